/*
 * term.h - the terminal under `tern top`: its size, a mode that hands each
 * key press over at once without echoing it, and putting things back.
 *
 * term_keys_on() saves the settings it changes; term_keys_off() restores
 * them and may be called any number of times. Only the lflag bits ICANON
 * and ECHO change: ISIG stays on, so Ctrl-C still raises SIGINT and the
 * command's loop restores the terminal on its way out.
 */
#ifndef TERN_NODE_TERM_H
#define TERN_NODE_TERM_H

#include <stdbool.h>
#include <termios.h>

typedef struct term_keys {
	int fd;
	bool on;
	struct termios saved;
} term_keys;

/* The size of the terminal on fd; false when fd is not a terminal (or the
 * size is unknown), and *cols and *rows are left alone. */
bool term_size(int fd, int *cols, int *rows);

/*
 * If fd is a terminal of which this process is in the foreground, switch
 * it to non-canonical mode without echo (one byte at a time, no wait) and
 * return true. Otherwise (a pipe, a file, a job in the background) change
 * nothing and return false.
 */
bool term_keys_on(term_keys *t, int fd);

/* Restore what term_keys_on changed; does nothing when it changed nothing. */
void term_keys_off(term_keys *t);

#endif
