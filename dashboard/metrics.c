/*
 * metrics.c - the Prometheus text exposition of a live store.
 *
 * Every figure comes from the nodes' own reports, as the Live view shows
 * them: counters are the nodes' totals (msgs_total, drops, missed), gauges
 * their latest rates. Latency is a summary whose quantiles are those of the
 * node's last report interval (a sliding window of one interval) and whose
 * _count adds up the stamped messages of every report the dashboard heard.
 * Reports carry no sum of latencies, so the summary has no _sum.
 */
#include "metrics.h"

#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct text {
	char *buf;
	size_t len;
	size_t cap;
	bool oom;
};

static void put(struct text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void
put(struct text *t, const char *fmt, ...)
{
	for (;;) {
		va_list ap;
		size_t room = t->cap - t->len;
		va_start(ap, fmt);
		int n = vsnprintf(t->buf != NULL ? t->buf + t->len : NULL, room, fmt, ap);
		va_end(ap);
		if (n < 0 || t->oom) {
			return;
		}
		if ((size_t)n < room) {
			t->len += (size_t)n;
			return;
		}
		size_t cap = t->cap ? t->cap * 2 : 16384;
		while (cap < t->len + (size_t)n + 1) {
			cap *= 2;
		}
		char *b = realloc(t->buf, cap);
		if (b == NULL) {
			t->oom = true;
			return;
		}
		t->buf = b;
		t->cap = cap;
	}
}

/* A label value: backslash, double quote and newline escaped. */
static void
put_label_value(struct text *t, const char *v)
{
	put(t, "\"");
	for (const char *p = v; *p != '\0'; p++) {
		if (*p == '\\') {
			put(t, "\\\\");
		} else if (*p == '"') {
			put(t, "\\\"");
		} else if (*p == '\n') {
			put(t, "\\n");
		} else {
			put(t, "%c", *p);
		}
	}
	put(t, "\"");
}

/* A sample's value: Go's float syntax, which Prometheus parses (NaN, +Inf). */
static void
put_value(struct text *t, double v)
{
	if (isnan(v)) {
		put(t, " NaN\n");
	} else if (isinf(v)) {
		put(t, " %cInf\n", v > 0 ? '+' : '-');
	} else {
		put(t, " %.15g\n", v);
	}
}

static void
family(struct text *t, const char *name, const char *type, const char *help)
{
	put(t, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* name{l0="v0",l1="v1",...} value; labels is a NULL-terminated list of name, value pairs. */
static void
sample(struct text *t, const char *name, const char *const *labels, double v)
{
	put(t, "%s", name);
	for (size_t i = 0; labels != NULL && labels[i] != NULL; i += 2) {
		put(t, "%s%s=", i == 0 ? "{" : ",", labels[i]);
		put_label_value(t, labels[i + 1]);
	}
	put(t, "%s", labels != NULL && labels[0] != NULL ? "}" : "");
	put_value(t, v);
}

/* ---- the dashboard itself ---- */

static void
dashboard_families(struct text *t, const struct live *lv)
{
	family(t, "tern_dashboard_nodes", "gauge",
	       "Nodes whose telemetry the dashboard heard within three of their report intervals.");
	sample(t, "tern_dashboard_nodes", NULL, lv != NULL ? (double)lv->nnodes : 0);
	family(t, "tern_dashboard_reports_total", "counter",
	       "Telemetry reports the dashboard has read.");
	sample(t, "tern_dashboard_reports_total", NULL, lv != NULL ? (double)lv->reports : 0);
	family(t, "tern_dashboard_reports_refused_total", "counter",
	       "Telemetry reports the dashboard refused: malformed, or over one of its limits.");
	sample(t, "tern_dashboard_reports_refused_total", NULL,
	       lv != NULL ? (double)lv->refused : 0);
}

/* ---- nodes and connections ---- */

static void
node_families(struct text *t, const struct live *lv, const struct live_time *now)
{
	family(t, "tern_node_up", "gauge",
	       "1 for each node heard from within three of its report intervals.");
	for (size_t i = 0; i < lv->nnodes; i++) {
		const struct live_node *n = lv->nodes[i];
		const char *labels[] = {"node", n->id, "mode", n->mode, NULL};
		sample(t, "tern_node_up", labels, 1);
	}
	family(t, "tern_node_uptime_seconds", "gauge", "Seconds since the node opened.");
	for (size_t i = 0; i < lv->nnodes; i++) {
		const char *labels[] = {"node", lv->nodes[i]->id, NULL};
		sample(t, "tern_node_uptime_seconds", labels, lv->nodes[i]->uptime_s);
	}
	family(t, "tern_node_report_age_seconds", "gauge",
	       "Seconds since the dashboard received the node's latest report.");
	for (size_t i = 0; i < lv->nnodes; i++) {
		const char *labels[] = {"node", lv->nodes[i]->id, NULL};
		sample(t, "tern_node_report_age_seconds", labels,
		       (double)(now->mono_ms - lv->nodes[i]->heard_ms) / 1000.0);
	}
}

struct conn_family {
	const char *name;
	const char *help;
	int field; /* 0 rtt, 1 bytes in, 2 bytes out */
};

static void
conn_families(struct text *t, const struct live *lv)
{
	static const struct conn_family families[] = {
	    {"tern_connection_rtt_seconds",
	     "Shortest round trip the node measured on the connection (absent before the first).",
	     0},
	    {"tern_connection_bytes_in_per_second",
	     "Payload bytes a second the node received on the connection, over its last report "
	     "interval.",
	     1},
	    {"tern_connection_bytes_out_per_second",
	     "Bytes a second the node wrote on the connection, over its last report interval.", 2},
	};
	for (size_t f = 0; f < sizeof(families) / sizeof(families[0]); f++) {
		family(t, families[f].name, "gauge", families[f].help);
		for (size_t i = 0; i < lv->nnodes; i++) {
			const struct live_node *n = lv->nodes[i];
			for (size_t j = 0; j < n->nconns; j++) {
				const struct live_conn *c = &n->conns[j];
				const char *labels[] = {"node",     n->id,       "peer", c->peer,
				                        "endpoint", c->endpoint, NULL};
				double v = families[f].field == 0   ? c->rtt_us / 1e6
				           : families[f].field == 1 ? c->bytes_in_per_s
				                                    : c->bytes_out_per_s;
				if (!isnan(v)) {
					sample(t, families[f].name, labels, v);
				}
			}
		}
	}
}

/* ---- keys ---- */

enum roles { PUB = 1, SUB = 2, BOTH = 3 };

struct key_family {
	const char *name;
	const char *type;
	const char *help;
	enum roles roles;
	size_t offset; /* of the double in struct live_series */
	double scale;
};

#define FIELD(f) offsetof(struct live_series, f)

static void
key_labels(const char **labels, const struct live_node *n, const struct live_series *s)
{
	labels[0] = "node";
	labels[1] = n->id;
	labels[2] = "key";
	labels[3] = s->key;
	labels[4] = "role";
	labels[5] = s->pub ? "pub" : "sub";
	labels[6] = "publisher";
	labels[7] = s->publisher;
	labels[8] = NULL;
}

static void
key_families(struct text *t, const struct live *lv)
{
	static const struct key_family families[] = {
	    {"tern_key_messages_total", "counter",
	     "Messages published (role pub) or delivered to this node's subscribers (role sub).",
	     BOTH, FIELD(msgs_total), 1},
	    {"tern_key_messages_per_second", "gauge",
	     "Messages a second over the node's last report interval.", BOTH, FIELD(msgs_per_s), 1},
	    {"tern_key_bytes_per_second", "gauge",
	     "Payload bytes a second over the node's last report interval.", BOTH,
	     FIELD(bytes_per_s), 1},
	    {"tern_key_drops_total", "counter", "Best-effort messages this publisher dropped.", PUB,
	     FIELD(drops), 1},
	    {"tern_key_missed_total", "counter",
	     "Messages the subscribing node never received (gaps in the publisher's sequence).",
	     SUB, FIELD(missed), 1},
	    {"tern_key_blocked_seconds", "gauge",
	     "Seconds publishers spent waiting for credit or room in the last report interval.",
	     PUB, FIELD(blocked_ms), 1e-3},
	    {"tern_key_queue_bytes", "gauge",
	     "Bytes queued toward peers when the node made its report.", PUB, FIELD(queue_bytes),
	     1},
	};
	for (size_t f = 0; f < sizeof(families) / sizeof(families[0]); f++) {
		const struct key_family *kf = &families[f];
		family(t, kf->name, kf->type, kf->help);
		for (size_t i = 0; i < lv->nnodes; i++) {
			const struct live_node *n = lv->nodes[i];
			for (size_t j = 0; j < n->nseries; j++) {
				const struct live_series *s = n->series[j];
				if ((kf->roles & (s->pub ? PUB : SUB)) == 0) {
					continue;
				}
				const char *labels[9];
				double v;
				key_labels(labels, n, s);
				memcpy(&v, (const char *)s + kf->offset, sizeof(v));
				sample(t, kf->name, labels, v * kf->scale);
			}
		}
	}
}

static void
latency_family(struct text *t, const struct live *lv)
{
	static const char *const quantiles[] = {"0.5", "0.99", "0.999"};
	family(t, "tern_key_latency_seconds", "summary",
	       "Publish-to-delivery latency of the stamped messages of the node's last report "
	       "interval; _count adds up the stamps of every report heard.");
	for (size_t i = 0; i < lv->nnodes; i++) {
		const struct live_node *n = lv->nodes[i];
		for (size_t j = 0; j < n->nseries; j++) {
			const struct live_series *s = n->series[j];
			if (s->pub) {
				continue;
			}
			const double v[] = {s->lat_p50_us, s->lat_p99_us, s->lat_p999_us};
			const char *labels[11];
			key_labels(labels, n, s);
			labels[8] = "quantile";
			labels[10] = NULL;
			for (size_t q = 0; q < 3; q++) {
				labels[9] = quantiles[q];
				/* NaN when the interval had no stamp, as Prometheus's own clients
				 * do. */
				sample(t, "tern_key_latency_seconds", labels, v[q] / 1e6);
			}
			labels[8] = NULL;
			sample(t, "tern_key_latency_seconds_count", labels, (double)s->lat_seen);
		}
	}
}

char *
metrics_text(const struct live *lv, const struct live_time *now, size_t *len)
{
	struct text t = {0};
	if (lv == NULL) {
		put(&t,
		    "# tern dashboard: started without --connect, so it watches no network: there "
		    "are no node, connection or key series.\n"
		    "# Start it with --connect EP (a router's endpoint) to export them.\n");
	}
	dashboard_families(&t, lv);
	if (lv != NULL) {
		node_families(&t, lv, now);
		conn_families(&t, lv);
		key_families(&t, lv);
		latency_family(&t, lv);
	}
	if (t.oom || t.buf == NULL) {
		free(t.buf);
		return NULL;
	}
	*len = t.len;
	return t.buf;
}
