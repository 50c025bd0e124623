/*
 * toptable.h - the text that `tern top` shows: a header line, then the
 * nodes, their connections and their keys, each section sorted by rate and
 * the whole fitted to a terminal's width and height.
 *
 * The table is built from the reports (reports.h) into a buffer, without
 * I/O, so the layout is tested without a terminal. A key row stands for one
 * (node, key, role): a node that delivers one key from two publishers shows
 * their rates and counters summed and, for each latency percentile, the
 * larger of the two (the worse publisher).
 */
#ifndef TERN_NODE_TOPTABLE_H
#define TERN_NODE_TOPTABLE_H

#include <stdbool.h>

#include "escape.h"
#include "reports.h"

typedef struct toptable_opts {
	int width;           /* columns a line may use; 0: no limit */
	int height;          /* lines the table may use; 0: no limit */
	bool ansi;           /* bold column titles, and "\033[K" before each newline */
	const char *clock;   /* shown in the header line, e.g. "12:00:01" (may be NULL) */
	const char *waiting; /* shown when there is no node yet (may be NULL) */
} toptable_opts;

/*
 * Append the table to ob, one "\n" at the end of each line (so at most
 * height lines). Returns 0 or TERN_ENOMEM.
 */
int toptable_render(outbuf *ob, const reports *rs, const toptable_opts *o);

#endif
