/*
 * scale.h - the subcommands of tern-scale that live outside keys.c, each
 * called from keys.c's main() with the whole command line.
 */
#ifndef TERN_SCALE_H
#define TERN_SCALE_H

#include <tern/tern.h>

/* A node named id in mode, logging errors only, once tune (if not NULL)
 * has changed its configuration; the process ends, saying why, if it
 * cannot open. */
tern_node *scale_node(const char *id, int mode, void (*tune)(tern_config *cfg));

/* tern-scale peers [--peers N] [--seconds S] [--size B] [--idle S] */
int scale_peers(int argc, char **argv);

/* tern-scale routers: subscriptions spread through three routers. argv[0]
 * is "routers"; prints one key=value line a measurement. Ends the process
 * once measured (status 1 if a message was lost, repeated or misrouted, or
 * the routes did not converge; 2 on a bad option). */
int scale_routers(int argc, char **argv);

#endif
