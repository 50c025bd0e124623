/*
 * log.h - a node's log lines: "tern[<id>] <level>: <text>", to the
 * configured log function or to stderr.
 *
 * A logger is filled once when its node opens and read-only afterwards, so
 * any thread may log through it.
 */
#ifndef TERN_LOG_H
#define TERN_LOG_H

#include "tern/tern.h"

struct logger {
	const char *id; /* the node's id */
	int level;      /* enum tern_log_level: lines above it are dropped */
	tern_log_fn fn; /* NULL: stderr */
	void *arg;
};

void log_line(const struct logger *lg, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
