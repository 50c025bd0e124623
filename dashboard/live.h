/*
 * live.h - the Live view's picture of a tern network, built from telemetry.
 *
 * With `tern dashboard --connect EP` the dashboard subscribes to every key
 * under @tern (observer.h) and hands each report (docs/CONFIG.md,
 * "Telemetry") to live_report(). This module keeps the latest report of each node and, for
 * each (node, key, role, publisher), a series: its latest figures and a ring
 * of its last LIVE_HISTORY points, one a report. A node not heard for
 * LIVE_STALE_INTERVALS of its own report intervals is dropped with its
 * series; so is a series that its node has stopped reporting for as long.
 *
 * Pure: no threads and no I/O; the time is passed in. Not thread safe: the
 * dashboard's server thread owns a store. Any node on the network may
 * publish a report, so everything taken from one is bounded: name lengths,
 * connections per node, nodes, series.
 *
 * The structs below are read by metrics.c and the tests; only live.c
 * changes them.
 */
#ifndef TERN_DASHBOARD_LIVE_H
#define TERN_DASHBOARD_LIVE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>

#define LIVE_HISTORY         300  /* points a series keeps: 5 minutes at a report a second */
#define LIVE_STALE_INTERVALS 3    /* intervals without a report before a node is dropped */
#define LIVE_MAX_NAME        256  /* longest node id, key, publisher, peer or endpoint kept */
#define LIVE_MAX_NODES       1024 /* nodes kept; reports of more are refused */
#define LIVE_MAX_CONNS       1024 /* connections kept per node */
#define LIVE_MAX_SERIES      4096 /* series kept over all nodes */

/* When: a monotonic clock for ages and expiry, and the wall clock for points. */
struct live_time {
	uint64_t mono_ms;
	int64_t wall_ms; /* milliseconds since the Unix epoch */
};

/* One point of a series; NAN where the report had null (no latency samples). */
struct live_point {
	int64_t t_ms; /* the dashboard's wall clock when the report arrived */
	float msgs_per_s;
	float bytes_per_s;
	float lat_p50_us;
	float lat_p99_us;
	float lat_p999_us;
};

struct live_conn {
	char *peer;
	char *endpoint;
	bool low_latency;
	const char *peer_mode; /* "peer", "router" or "client" (static) */
	double rtt_us;         /* NAN before the first round trip */
	double bytes_in_per_s;
	double bytes_out_per_s;
};

/* One key of one node, as a publisher (pub) or as delivered here (sub). */
struct live_series {
	char *key;
	char *publisher; /* "NODE/N" */
	bool pub;
	uint64_t heard_ms; /* mono_ms of the last report that had it */
	int64_t t_ms;      /* wall_ms of that report */
	double msgs_per_s, bytes_per_s, msgs_total;
	double drops, missed, blocked_ms, queue_bytes;
	double lat_samples;                                     /* stamps in the last interval */
	double lat_p50_us, lat_p99_us, lat_p999_us, lat_max_us; /* NAN: none */
	uint64_t lat_seen;                                      /* stamps over every report heard */
	struct live_point ring[LIVE_HISTORY];
	size_t ring_head; /* where the next point goes */
	size_t ring_len;
};

struct live_node {
	char *id;
	const char *mode; /* "peer", "router" or "client" (static) */
	char version[32];
	double uptime_s;
	uint32_t interval_ms;
	uint64_t heard_ms; /* mono_ms of its last report */
	uint64_t reports;
	struct live_conn *conns;
	size_t nconns;
	struct live_series **series;
	size_t nseries, series_cap;
};

struct live {
	char *observer;  /* the dashboard's own node id */
	char **connect;  /* the endpoints it was told to connect to */
	size_t nconnect; /* how many */
	struct live_node **nodes;
	size_t nnodes, nodes_cap;
	size_t series_total;
	uint64_t reports; /* reports taken */
	uint64_t refused; /* reports that were malformed or over a limit */
	char last_refusal[256];
};

/* A store for the dashboard whose node is observer, connected to connect[]. NULL if out of memory.
 */
struct live *live_new(const char *observer, const char *const *connect, size_t nconnect);

/* Frees the store. Accepts NULL. */
void live_free(struct live *lv);

/*
 * Takes one message under @tern: its key and its JSON payload of len bytes
 * (not NUL-terminated). Returns 0 when it was a node's report and is now the
 * node's latest, 1 when the key is not a report (@tern/ID/stats) and was
 * ignored, -1 when the report was refused (malformed, on another node's key,
 * or over a limit): lv->refused counts it and lv->last_refusal says why.
 */
int live_report(struct live *lv, const char *key, const char *json, size_t len,
                const struct live_time *now);

/* Drops the nodes and series not heard for LIVE_STALE_INTERVALS intervals. Returns the nodes
 * dropped. */
size_t live_expire(struct live *lv, const struct live_time *now);

/*
 * {"type": "live", ...}: the nodes, their connections as a graph, and each
 * series' latest figures (docs/DASHBOARD.md). NULL if out of memory.
 */
cJSON *live_message(const struct live *lv, const struct live_time *now);

/* {"type": "live_history", ...}: every series with its points, oldest first. NULL if out of memory.
 */
cJSON *live_history_message(const struct live *lv, const struct live_time *now);

#endif
