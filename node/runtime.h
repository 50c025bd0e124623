/*
 * runtime.h - what every running tern command needs around its node:
 * signals, log lines, opening the node with its endpoints, the SIGUSR1 stats
 * line and the summary line.
 *
 * Signals only set flags; the command's main loop notices them within about
 * 100 ms and does the work (a signal handler may not take locks or print).
 */
#ifndef TERN_NODE_RUNTIME_H
#define TERN_NODE_RUNTIME_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <tern/tern.h>

#include "config.h"

extern volatile sig_atomic_t runtime_stop; /* SIGINT or SIGTERM seen */
extern volatile sig_atomic_t runtime_usr1; /* SIGUSR1 seen, not yet served */

/*
 * Block SIGINT, SIGTERM and SIGUSR1 in the calling thread and install the
 * handlers. Call before the node is opened: its I/O thread inherits the mask,
 * so the signals interrupt the main thread's waits, not the I/O thread.
 */
void runtime_signals_init(void);

/* Unblock them in the calling (main) thread, once the node is open. */
void runtime_signals_unblock(void);

/* Block them again once the node is closed: a late copy of the stop signal
 * (timeout(1) signals both the process and its group) must not interrupt
 * the exit, e.g. LeakSanitizer's check in a sanitizer build. */
void runtime_signals_block(void);

/* Write one log line on stderr if level is enabled. */
void runtime_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* pub and sub report an unreachable peer once, when they give up, instead of
 * logging each retry; runtime_connect_error() is the last such failure
 * ("cannot connect to EP: why"), or NULL. */
void runtime_quiet_connect_errors(void);
const char *runtime_connect_error(void);

/*
 * Add the default endpoints when the config has none: default_listen when no
 * listen endpoint is set, default_connect when neither kind is (either may
 * be NULL). Prints an error and returns an exit status, or EXIT_OK.
 */
int runtime_apply_defaults(node_config *nc, const char *cmd, const char *default_listen,
                           const char *default_connect);

/*
 * Open the node for command cmd, listen on every listen endpoint (printing
 * each bound endpoint on stderr) and connect to every connect endpoint. With
 * neither, default_listen or default_connect (either may be NULL) is used.
 * Returns EXIT_OK with *out set, or prints one error line and returns an
 * exit status.
 */
int runtime_open(node_config *nc, const char *cmd, const char *default_listen,
                 const char *default_connect, tern_node **out);

/* Seconds on a monotonic clock. */
double runtime_now(void);

/* Sleep up to seconds, waking early on a signal. */
void runtime_sleep(double seconds);

/*
 * If SIGUSR1 arrived, write one JSON line on stderr:
 * {"command":CMD, ..extra.., "node":<tern_node_stats_json>}.
 * extra is a JSON fragment of members without braces (may be NULL).
 */
void runtime_serve_usr1(tern_node *node, const char *cmd, const char *extra);

/* The summary line: messages=N bytes=B seconds=S msgs_per_s=X MB_per_s=Y,
 * followed by extra (may be NULL), e.g. " missed=3". */
void runtime_summary(uint64_t messages, uint64_t bytes, double seconds, const char *extra);

/* The whole tern_node_stats_json text, malloc'd, or NULL. */
char *runtime_node_json(tern_node *node);

#endif
