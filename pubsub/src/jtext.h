/*
 * jtext.h - JSON text built piece by piece: the node's stats
 * (tern_node_stats_json) and its telemetry reports.
 *
 * Two kinds: a fixed buffer of the caller's, filled like snprintf (len
 * counts the whole text even where it did not fit), or a buffer the jtext
 * grows and keeps from one text to the next (its owner frees buf). Pure: no
 * I/O, no threads.
 */
#ifndef TERN_JTEXT_H
#define TERN_JTEXT_H

#include <stdbool.h>
#include <stddef.h>

struct jtext {
	char *buf;
	size_t len; /* the text so far (fixed: as if it all fit) */
	size_t cap;
	bool grows; /* false: buf is the caller's, cap bytes */
	bool oom;   /* a growing buffer could not grow: the text is cut */
};

/* A fixed buffer (buf may be NULL with cap 0: only measure). */
void jtext_fixed(struct jtext *t, char *buf, size_t cap);
/* Start a new text in a growing buffer, keeping its memory. */
void jtext_restart(struct jtext *t);

void jtext_printf(struct jtext *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* s as a JSON string: quoted, with '"', '\' and control bytes escaped. */
void jtext_str(struct jtext *t, const char *s);

#endif
