/*
 * metrics.h - GET /metrics: the watched network in Prometheus's text format.
 *
 * The text exposition format, version 0.0.4 (served as
 * "text/plain; version=0.0.4"): every family has its HELP and TYPE lines and
 * its samples together; label values are escaped (backslash, double quote,
 * newline). The families and their labels are listed in docs/DASHBOARD.md.
 * Pure: reads a live store (live.h), builds text.
 */
#ifndef TERN_DASHBOARD_METRICS_H
#define TERN_DASHBOARD_METRICS_H

#include <stddef.h>

#include "live.h"

/*
 * The exposition of what lv holds at now. lv NULL: the dashboard watches no
 * network (no --connect), and the text has only its own families and a
 * comment that says so. Returns a NUL-terminated text the caller frees, its
 * length in *len; NULL if out of memory.
 */
char *metrics_text(const struct live *lv, const struct live_time *now, size_t *len);

#endif
