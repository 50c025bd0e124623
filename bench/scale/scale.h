/*
 * scale.h - the subcommands of tern-scale that live outside keys.c, each
 * called from keys.c's main() with the whole command line.
 */
#ifndef TERN_SCALE_H
#define TERN_SCALE_H

/* tern-scale peers [--peers N] [--seconds S] [--size B] [--idle S] */
int scale_peers(int argc, char **argv);

#endif
