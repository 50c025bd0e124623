/*
 * term.c - termios and the window size, for `tern top`.
 */
#include "term.h"

#include <errno.h>
#include <sys/ioctl.h>
#include <unistd.h>

bool
term_size(int fd, int *cols, int *rows)
{
	struct winsize ws;

	if (ioctl(fd, TIOCGWINSZ, &ws) != 0 || ws.ws_col == 0 || ws.ws_row == 0) {
		return false;
	}
	*cols = ws.ws_col;
	*rows = ws.ws_row;
	return true;
}

bool
term_keys_on(term_keys *t, int fd)
{
	struct termios raw;

	t->fd = fd;
	t->on = false;
	/* a background job that changed the terminal would be stopped (SIGTTOU) */
	if (!isatty(fd) || tcgetpgrp(fd) != getpgrp() || tcgetattr(fd, &t->saved) != 0) {
		return false;
	}
	raw = t->saved;
	raw.c_lflag &= ~(tcflag_t)(ICANON | ECHO);
	raw.c_cc[VMIN] = 1;
	raw.c_cc[VTIME] = 0;
	if (tcsetattr(fd, TCSANOW, &raw) != 0) {
		return false;
	}
	t->on = true;
	return true;
}

void
term_keys_off(term_keys *t)
{
	if (!t->on) {
		return;
	}
	/* a signal may interrupt the call; the terminal must come back */
	while (tcsetattr(t->fd, TCSANOW, &t->saved) != 0 && errno == EINTR) {
	}
	t->on = false;
}
