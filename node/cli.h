/*
 * cli.h - command-line pieces shared by `tern node`, `tern pub` and
 * `tern sub`: the options they all take (-c, --listen, --connect,
 * --low-latency, --batched, --log, --id), number parsing with ranges, and the
 * order in which a config is built: defaults, then the file, then the flags.
 */
#ifndef TERN_NODE_CLI_H
#define TERN_NODE_CLI_H

#include <stdbool.h>
#include <stdint.h>

#include "config.h"

/* Exit statuses of every command. */
#define EXIT_OK      0
#define EXIT_RUNTIME 1 /* something failed while running */
#define EXIT_USAGE   2 /* bad command line or config file */

/* getopt_long values of the shared options (above any short option). */
enum cli_common_opt {
	OPT_CONFIG = 'c',
	OPT_HELP = 'h',
	OPT_LISTEN = 1000,
	OPT_CONNECT,
	OPT_LOW_LATENCY,
	OPT_BATCHED,
	OPT_LOG,
	OPT_ID,
	OPT_FIRST_PRIVATE /* commands number their own options from here */
};

/* What the shared flags said; pointers point into argv. */
typedef struct cli_common {
	const char *cmd; /* "node", "pub", "sub": for messages */
	const char *config_path;
	const char **listen;
	int listen_count;
	const char **connect;
	int connect_count;
	int low_latency; /* -1: not given */
	int mode;        /* -1: not given */
	int log_level;   /* -1: not given */
	const char *id;
} cli_common;

/* Prepare for argc arguments. Returns 0 or TERN_ENOMEM. */
int cli_common_init(cli_common *cc, const char *cmd, int argc);
void cli_common_free(cli_common *cc);

/*
 * Handle one shared option (as returned by getopt_long). Returns 1 if it was
 * one, 0 if not, or -1 after printing an error (exit with EXIT_USAGE).
 */
int cli_common_option(cli_common *cc, int opt, const char *arg);

/*
 * Build the config: defaults (already in nc), the file, then the flags.
 * Prints one error line and returns EXIT_USAGE, or returns EXIT_OK.
 */
int cli_build_config(const cli_common *cc, node_config *nc);

/* Print "tern CMD: MESSAGE" on stderr (one line). */
void cli_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Parse an unsigned integer in [min, max]; prints the error itself. */
int cli_parse_u64(const char *cmd, const char *flag, const char *s, uint64_t min, uint64_t max,
                  uint64_t *out);

/* Parse a non-negative number of seconds (fractions allowed). */
int cli_parse_seconds(const char *cmd, const char *flag, const char *s, double *out);

/* The error line for an unknown option or a missing argument, from getopt. */
void cli_bad_option(const char *cmd, int argc, char **argv, int optopt_value);

#endif
