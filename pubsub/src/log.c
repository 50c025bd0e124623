/*
 * log.c - formatting and routing of log lines.
 */
#include <stdarg.h>
#include <stdio.h>

#include "log.h"

void
log_line(const struct logger *lg, int level, const char *fmt, ...)
{
	static const char *names[] = {"error", "warn", "info", "debug"};
	char line[768];
	va_list ap;
	int n;

	if (level > lg->level || level < 0 || level > TERN_LOG_DEBUG) {
		return;
	}
	n = snprintf(line, sizeof(line), "tern[%s] %s: ", lg->id, names[level]);
	va_start(ap, fmt);
	vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
	va_end(ap);
	if (lg->fn != NULL) {
		lg->fn(lg->arg, level, line);
	} else {
		fprintf(stderr, "%s\n", line);
	}
}
