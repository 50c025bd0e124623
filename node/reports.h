/*
 * reports.h - the latest telemetry report of each node, for `tern top`.
 *
 * Every node publishes one JSON object on @tern/NODE_ID/stats each
 * telemetry.interval_ms (docs/CONFIG.md, "Telemetry"). A subscriber's
 * callback hands each one to reports_put() on the node's I/O thread; that
 * only copies the text into an inbox under a mutex, so the I/O thread never
 * waits for parsing or drawing. The main thread calls reports_update(),
 * which parses what arrived, keeps the newest report of each node and
 * forgets a node not heard from for 3 of its intervals; it then reads the
 * reports, sorted by node id, without a lock (only it touches them).
 */
#ifndef TERN_NODE_REPORTS_H
#define TERN_NODE_REPORTS_H

#include <stddef.h>

#include <cjson/cJSON.h>

/* More nodes than this at once are not shown (a flood, not a network). */
#define REPORTS_MAX_NODES 4096

/* A node is forgotten when silent for this many of its intervals. */
#define REPORTS_SILENT_INTERVALS 3

typedef struct report {
	char *id;        /* the node id, from the key @tern/ID/stats */
	char *text;      /* the report as published: one JSON object */
	size_t len;      /* of text, without the NUL */
	cJSON *json;     /* text, parsed: an object */
	double heard;    /* when it arrived, in the caller's seconds */
	double interval; /* seconds between its reports (interval_ms) */
} report;

typedef struct reports reports;

reports *reports_new(void);
void reports_free(reports *rs); /* accepts NULL */

/*
 * Any thread (the subscriber's callback): a message on key arrived at time
 * now. Keys other than @tern/ID/stats are ignored. The payload is copied;
 * it replaces an older one of the same node still in the inbox.
 * Returns 0, or TERN_ENOMEM (the report is lost).
 */
int reports_put(reports *rs, const char *key, const void *payload, size_t len, double now);

/*
 * Main thread: take the inbox, keep the newest report of each node (a text
 * that is not one JSON object naming a node is counted in reports_rejected
 * and ignored), and forget every node silent for REPORTS_SILENT_INTERVALS of
 * its intervals at time now.
 */
void reports_update(reports *rs, double now);

/* Main thread: the nodes kept, sorted by id; i < reports_count(). */
size_t reports_count(const reports *rs);
const report *reports_at(const reports *rs, size_t i);

/* Main thread: the longest interval among the nodes kept (0 when none). */
double reports_max_interval(const reports *rs);

/* Main thread: texts ignored because they were not a report. */
unsigned long reports_rejected(const reports *rs);

#endif
