/*
 * live.c - the nodes, connections and key series of a watched network.
 *
 * A report replaces its node's previous one: the connections are read anew,
 * each key's series gets its latest figures and one point in its ring. The
 * JSON builders read the store and never change it, so a message always
 * shows one consistent moment.
 */
#include "live.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REPORT_PREFIX "@tern/"
#define REPORT_SUFFIX "/stats"

static char *
copy_name(const char *s)
{
	size_t n = strnlen(s, LIVE_MAX_NAME);
	char *c = malloc(n + 1);
	if (c != NULL) {
		memcpy(c, s, n);
		c[n] = '\0';
	}
	return c;
}

/* A string member of 1 to LIVE_MAX_NAME bytes, or NULL. */
static const char *
get_name(const cJSON *obj, const char *name)
{
	const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, name);
	if (!cJSON_IsString(item) || item->valuestring[0] == '\0' ||
	    strlen(item->valuestring) > LIVE_MAX_NAME) {
		return NULL;
	}
	return item->valuestring;
}

/* A string member of at most LIVE_MAX_NAME bytes; "" when absent or too long. */
static const char *
get_text(const cJSON *obj, const char *name)
{
	const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, name);
	if (!cJSON_IsString(item) || strlen(item->valuestring) > LIVE_MAX_NAME) {
		return "";
	}
	return item->valuestring;
}

/* A node's mode as reported: one of three names (anything else is a
 * peer's, as a node that says nothing of it is). */
static const char *
mode_of(const char *text)
{
	return strcmp(text, "router") == 0   ? "router"
	       : strcmp(text, "client") == 0 ? "client"
	                                     : "peer";
}

/* A finite number member, or NAN when absent, null or not a number. */
static double
get_num(const cJSON *obj, const char *name)
{
	const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, name);
	if (!cJSON_IsNumber(item) || !isfinite(item->valuedouble)) {
		return NAN;
	}
	return item->valuedouble;
}

/* A count or rate: 0 where the report had none (or a negative one). */
static double
get_amount(const cJSON *obj, const char *name)
{
	double v = get_num(obj, name);
	return isnan(v) || v < 0 ? 0 : v;
}

/* Counts a refusal and keeps its reason; fmt has one %s, for detail (cut to 120 bytes). */
static void
refuse(struct live *lv, const char *fmt, const char *detail)
{
	char cut[121];
	size_t n = strnlen(detail, sizeof(cut) - 1);
	memcpy(cut, detail, n);
	cut[n] = '\0';
	lv->refused++;
	snprintf(lv->last_refusal, sizeof(lv->last_refusal), fmt, cut);
}

/* ---- the store ---- */

struct live *
live_new(const char *observer, const char *const *connect, size_t nconnect)
{
	struct live *lv = calloc(1, sizeof(*lv));
	if (lv == NULL) {
		return NULL;
	}
	lv->observer = copy_name(observer != NULL ? observer : "");
	lv->connect = calloc(nconnect > 0 ? nconnect : 1, sizeof(*lv->connect));
	if (lv->observer == NULL || lv->connect == NULL) {
		live_free(lv);
		return NULL;
	}
	for (size_t i = 0; i < nconnect; i++) {
		if ((lv->connect[i] = strdup(connect[i])) == NULL) {
			live_free(lv);
			return NULL;
		}
		lv->nconnect++;
	}
	return lv;
}

static void
conns_free(struct live_node *n)
{
	for (size_t i = 0; i < n->nconns; i++) {
		free(n->conns[i].peer);
		free(n->conns[i].endpoint);
	}
	free(n->conns);
	n->conns = NULL;
	n->nconns = 0;
}

static void
series_free(struct live_series *s)
{
	if (s != NULL) {
		free(s->key);
		free(s->publisher);
		free(s);
	}
}

static void
node_free(struct live *lv, struct live_node *n)
{
	conns_free(n);
	for (size_t i = 0; i < n->nseries; i++) {
		series_free(n->series[i]);
	}
	lv->series_total -= n->nseries;
	free(n->series);
	free(n->id);
	free(n);
}

void
live_free(struct live *lv)
{
	if (lv == NULL) {
		return;
	}
	for (size_t i = 0; i < lv->nnodes; i++) {
		node_free(lv, lv->nodes[i]);
	}
	free(lv->nodes);
	for (size_t i = 0; i < lv->nconnect; i++) {
		free(lv->connect[i]);
	}
	free(lv->connect);
	free(lv->observer);
	free(lv);
}

static struct live_node *
node_find(const struct live *lv, const char *id)
{
	for (size_t i = 0; i < lv->nnodes; i++) {
		if (strcmp(lv->nodes[i]->id, id) == 0) {
			return lv->nodes[i];
		}
	}
	return NULL;
}

static struct live_node *
node_add(struct live *lv, const char *id)
{
	if (lv->nnodes == lv->nodes_cap) {
		size_t cap = lv->nodes_cap ? lv->nodes_cap * 2 : 16;
		struct live_node **v = realloc(lv->nodes, cap * sizeof(*v));
		if (v == NULL) {
			return NULL;
		}
		lv->nodes = v;
		lv->nodes_cap = cap;
	}
	struct live_node *n = calloc(1, sizeof(*n));
	if (n == NULL || (n->id = copy_name(id)) == NULL) {
		free(n);
		return NULL;
	}
	lv->nodes[lv->nnodes++] = n;
	return n;
}

static struct live_series *
series_find(const struct live_node *n, const char *key, bool pub, const char *publisher)
{
	for (size_t i = 0; i < n->nseries; i++) {
		struct live_series *s = n->series[i];
		if (s->pub == pub && strcmp(s->key, key) == 0 &&
		    strcmp(s->publisher, publisher) == 0) {
			return s;
		}
	}
	return NULL;
}

static struct live_series *
series_add(struct live *lv, struct live_node *n, const char *key, bool pub, const char *publisher)
{
	if (n->nseries == n->series_cap) {
		size_t cap = n->series_cap ? n->series_cap * 2 : 8;
		struct live_series **v = realloc(n->series, cap * sizeof(*v));
		if (v == NULL) {
			return NULL;
		}
		n->series = v;
		n->series_cap = cap;
	}
	struct live_series *s = calloc(1, sizeof(*s));
	if (s == NULL) {
		return NULL;
	}
	s->key = copy_name(key);
	s->publisher = copy_name(publisher);
	if (s->key == NULL || s->publisher == NULL) {
		series_free(s);
		return NULL;
	}
	s->pub = pub;
	n->series[n->nseries++] = s;
	lv->series_total++;
	return s;
}

/* How long a node or series may go unheard: LIVE_STALE_INTERVALS of its node's interval. */
static uint64_t
stale_after_ms(const struct live_node *n)
{
	return (uint64_t)LIVE_STALE_INTERVALS * n->interval_ms;
}

/* Drops the node's series not heard for stale_after_ms; keeps the order of the rest. */
static void
series_expire(struct live *lv, struct live_node *n, uint64_t now_ms)
{
	size_t kept = 0;
	for (size_t i = 0; i < n->nseries; i++) {
		struct live_series *s = n->series[i];
		if (now_ms - s->heard_ms > stale_after_ms(n)) {
			series_free(s);
			lv->series_total--;
		} else {
			n->series[kept++] = s;
		}
	}
	n->nseries = kept;
}

/* ---- one report ---- */

static int
read_conns(struct live *lv, struct live_node *n, const cJSON *conns)
{
	conns_free(n);
	size_t count = 0;
	const cJSON *c;
	cJSON_ArrayForEach(c, conns)
	{
		count += get_name(c, "peer") != NULL;
	}
	if (count > LIVE_MAX_CONNS) {
		refuse(lv, "node %s reports more than 1024 connections; the Live view keeps 1024",
		       n->id);
		count = LIVE_MAX_CONNS;
	}
	if (count == 0) {
		return 0;
	}
	if ((n->conns = calloc(count, sizeof(*n->conns))) == NULL) {
		return -1;
	}
	cJSON_ArrayForEach(c, conns)
	{
		const char *peer = get_name(c, "peer");
		if (peer == NULL || n->nconns == count) {
			continue;
		}
		struct live_conn *lc = &n->conns[n->nconns];
		lc->peer = copy_name(peer);
		lc->endpoint = copy_name(get_text(c, "endpoint"));
		n->nconns++;
		if (lc->peer == NULL || lc->endpoint == NULL) {
			return -1;
		}
		lc->low_latency = strcmp(get_text(c, "mode"), "low-latency") == 0;
		lc->peer_mode = mode_of(get_text(c, "peer_mode"));
		lc->rtt_us = get_num(c, "rtt_us");
		lc->bytes_in_per_s = get_amount(c, "bytes_in_per_s");
		lc->bytes_out_per_s = get_amount(c, "bytes_out_per_s");
	}
	return 0;
}

static void
point_add(struct live_series *s)
{
	struct live_point *p = &s->ring[s->ring_head];
	p->t_ms = s->t_ms;
	p->msgs_per_s = (float)s->msgs_per_s;
	p->bytes_per_s = (float)s->bytes_per_s;
	p->lat_p50_us = (float)s->lat_p50_us;
	p->lat_p99_us = (float)s->lat_p99_us;
	p->lat_p999_us = (float)s->lat_p999_us;
	s->ring_head = (s->ring_head + 1) % LIVE_HISTORY;
	if (s->ring_len < LIVE_HISTORY) {
		s->ring_len++;
	}
}

static int
read_key(struct live *lv, struct live_node *n, const cJSON *k, const struct live_time *now)
{
	const char *key = get_name(k, "key");
	const char *role = get_text(k, "role");
	const char *publisher = get_text(k, "publisher");
	bool pub = strcmp(role, "pub") == 0;
	if (key == NULL || (!pub && strcmp(role, "sub") != 0)) {
		refuse(lv, "node %s reports a key without a name or a role pub or sub", n->id);
		return 0;
	}
	struct live_series *s = series_find(n, key, pub, publisher);
	if (s == NULL) {
		if (lv->series_total >= LIVE_MAX_SERIES) {
			refuse(lv,
			       "more than 4096 key series; the Live view leaves out %s's newest",
			       n->id);
			return 0;
		}
		if ((s = series_add(lv, n, key, pub, publisher)) == NULL) {
			return -1;
		}
	}
	s->heard_ms = now->mono_ms;
	s->t_ms = now->wall_ms;
	s->msgs_per_s = get_amount(k, "msgs_per_s");
	s->bytes_per_s = get_amount(k, "bytes_per_s");
	s->msgs_total = get_amount(k, "msgs_total");
	s->drops = get_amount(k, "drops");
	s->missed = get_amount(k, "missed");
	s->blocked_ms = get_amount(k, "blocked_ms");
	s->queue_bytes = get_amount(k, "queue_bytes");
	s->lat_samples = get_amount(k, "lat_samples");
	s->lat_p50_us = get_num(k, "lat_p50_us");
	s->lat_p99_us = get_num(k, "lat_p99_us");
	s->lat_p999_us = get_num(k, "lat_p999_us");
	s->lat_max_us = get_num(k, "lat_max_us");
	if (s->lat_samples < 1e15) {
		s->lat_seen += (uint64_t)s->lat_samples;
	}
	point_add(s);
	return 0;
}

/* The node id of a report key "@tern/ID/stats", or false. */
static bool
report_node(const char *key, char *id, size_t size)
{
	size_t len = strlen(key);
	size_t pre = strlen(REPORT_PREFIX);
	size_t suf = strlen(REPORT_SUFFIX);
	if (len <= pre + suf || strncmp(key, REPORT_PREFIX, pre) != 0 ||
	    strcmp(key + len - suf, REPORT_SUFFIX) != 0) {
		return false;
	}
	size_t n = len - pre - suf;
	if (n >= size || memchr(key + pre, '/', n) != NULL) {
		return false;
	}
	memcpy(id, key + pre, n);
	id[n] = '\0';
	return true;
}

int
live_report(struct live *lv, const char *key, const char *json, size_t len,
            const struct live_time *now)
{
	char id[LIVE_MAX_NAME + 1];
	if (!report_node(key, id, sizeof(id))) {
		return 1;
	}
	cJSON *r = cJSON_ParseWithLength(json, len);
	if (!cJSON_IsObject(r)) {
		refuse(lv, "the report on @tern/%s/stats is not a JSON object", id);
		cJSON_Delete(r);
		return -1;
	}
	const char *node_id = get_name(r, "node");
	if (node_id == NULL || strcmp(node_id, id) != 0) {
		refuse(lv, "the report on @tern/%s/stats names another node", id);
		cJSON_Delete(r);
		return -1;
	}
	struct live_node *n = node_find(lv, id);
	if (n == NULL) {
		if (lv->nnodes >= LIVE_MAX_NODES) {
			refuse(lv, "more than 1024 nodes; the Live view leaves out %s", id);
			cJSON_Delete(r);
			return -1;
		}
		if ((n = node_add(lv, id)) == NULL) {
			refuse(lv, "%s", "out of memory");
			cJSON_Delete(r);
			return -1;
		}
	}
	n->mode = mode_of(get_text(r, "mode"));
	snprintf(n->version, sizeof(n->version), "%s", get_text(r, "version"));
	n->uptime_s = get_amount(r, "uptime_s");
	double interval = get_num(r, "interval_ms");
	n->interval_ms = interval >= 10 && interval <= 3600000 ? (uint32_t)interval : 1000;
	n->heard_ms = now->mono_ms;
	n->reports++;
	lv->reports++;
	int rc = read_conns(lv, n, cJSON_GetObjectItemCaseSensitive(r, "connections"));
	const cJSON *k;
	cJSON_ArrayForEach(k, cJSON_GetObjectItemCaseSensitive(r, "keys"))
	{
		if (rc == 0 && cJSON_IsObject(k)) {
			rc = read_key(lv, n, k, now);
		}
	}
	series_expire(lv, n, now->mono_ms);
	cJSON_Delete(r);
	if (rc != 0) {
		refuse(lv, "out of memory reading %s's report", id);
		return -1;
	}
	return 0;
}

size_t
live_expire(struct live *lv, const struct live_time *now)
{
	size_t kept = 0;
	size_t dropped = 0;
	for (size_t i = 0; i < lv->nnodes; i++) {
		struct live_node *n = lv->nodes[i];
		if (now->mono_ms - n->heard_ms > stale_after_ms(n)) {
			node_free(lv, n);
			dropped++;
		} else {
			series_expire(lv, n, now->mono_ms);
			lv->nodes[kept++] = n;
		}
	}
	lv->nnodes = kept;
	return dropped;
}

/* ---- messages ---- */

static void
add_num(cJSON *obj, const char *name, double v)
{
	if (isfinite(v)) {
		cJSON_AddNumberToObject(obj, name, v);
	} else {
		cJSON_AddNullToObject(obj, name);
	}
}

static cJSON *
conn_json(const struct live_conn *c)
{
	cJSON *o = cJSON_CreateObject();
	if (o == NULL) {
		return NULL;
	}
	cJSON_AddStringToObject(o, "peer", c->peer);
	cJSON_AddStringToObject(o, "endpoint", c->endpoint);
	cJSON_AddStringToObject(o, "mode", c->low_latency ? "low-latency" : "batched");
	cJSON_AddStringToObject(o, "peer_mode", c->peer_mode);
	add_num(o, "rtt_us", c->rtt_us);
	add_num(o, "bytes_in_per_s", c->bytes_in_per_s);
	add_num(o, "bytes_out_per_s", c->bytes_out_per_s);
	return o;
}

static cJSON *
node_json(const struct live_node *n, const struct live_time *now)
{
	cJSON *o = cJSON_CreateObject();
	cJSON *conns = cJSON_CreateArray();
	if (o == NULL || conns == NULL) {
		cJSON_Delete(o);
		cJSON_Delete(conns);
		return NULL;
	}
	cJSON_AddStringToObject(o, "node", n->id);
	cJSON_AddBoolToObject(o, "reporting", true);
	cJSON_AddStringToObject(o, "mode", n->mode);
	cJSON_AddStringToObject(o, "version", n->version);
	add_num(o, "uptime_s", n->uptime_s);
	cJSON_AddNumberToObject(o, "interval_ms", n->interval_ms);
	cJSON_AddNumberToObject(o, "age_ms", (double)(now->mono_ms - n->heard_ms));
	for (size_t i = 0; i < n->nconns; i++) {
		cJSON_AddItemToArray(conns, conn_json(&n->conns[i]));
	}
	cJSON_AddItemToObject(o, "connections", conns);
	return o;
}

static int
compare_names(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Peers that some node names but that send no report of their own (the dashboard, for one). */
static int
add_silent_peers(const struct live *lv, cJSON *nodes)
{
	size_t count = 0;
	for (size_t i = 0; i < lv->nnodes; i++) {
		count += lv->nodes[i]->nconns;
	}
	if (count == 0) {
		return 0;
	}
	const char **names = malloc(count * sizeof(*names));
	if (names == NULL) {
		return -1;
	}
	size_t n = 0;
	for (size_t i = 0; i < lv->nnodes; i++) {
		for (size_t j = 0; j < lv->nodes[i]->nconns; j++) {
			const char *peer = lv->nodes[i]->conns[j].peer;
			if (node_find(lv, peer) == NULL) {
				names[n++] = peer;
			}
		}
	}
	qsort(names, n, sizeof(*names), compare_names);
	for (size_t i = 0; i < n; i++) {
		if (i > 0 && strcmp(names[i], names[i - 1]) == 0) {
			continue;
		}
		cJSON *o = cJSON_CreateObject();
		if (o == NULL) {
			free(names);
			return -1;
		}
		cJSON_AddStringToObject(o, "node", names[i]);
		cJSON_AddBoolToObject(o, "reporting", false);
		cJSON_AddBoolToObject(o, "observer", strcmp(names[i], lv->observer) == 0);
		cJSON_AddItemToArray(nodes, o);
	}
	free(names);
	return 0;
}

/* An edge of the graph: the connections between two nodes, a < b, as either side saw them. */
struct edge {
	const char *a;
	const char *b;
	double rtt_us; /* the shortest either side measured; NAN: none yet */
	double a_to_b; /* bytes a wrote toward b a second, by a's report; NAN: a is silent */
	double b_to_a; /* and the reverse */
	int a_conns;   /* connections a reported with b */
	int b_conns;   /* and b with a */
};

static int
compare_edges(const void *x, const void *y)
{
	const struct edge *e = x;
	const struct edge *f = y;
	int c = strcmp(e->a, f->a);
	return c != 0 ? c : strcmp(e->b, f->b);
}

static double
min_known(double x, double y)
{
	return isnan(x) ? y : isnan(y) ? x : x < y ? x : y;
}

static double
sum_known(double x, double y)
{
	return isnan(x) ? y : isnan(y) ? x : x + y;
}

static cJSON *
edge_json(const struct edge *e)
{
	cJSON *o = cJSON_CreateObject();
	if (o == NULL) {
		return NULL;
	}
	cJSON_AddStringToObject(o, "a", e->a);
	cJSON_AddStringToObject(o, "b", e->b);
	/* Each side reports its own end of a connection: count the larger side's. */
	cJSON_AddNumberToObject(o, "connections",
	                        e->a_conns > e->b_conns ? e->a_conns : e->b_conns);
	add_num(o, "rtt_us", e->rtt_us);
	add_num(o, "bytes_a_to_b_per_s", e->a_to_b);
	add_num(o, "bytes_b_to_a_per_s", e->b_to_a);
	return o;
}

/* The graph's edges: every connection any node reported, one edge a pair of nodes. */
static int
add_links(const struct live *lv, cJSON *links)
{
	size_t count = 0;
	for (size_t i = 0; i < lv->nnodes; i++) {
		count += lv->nodes[i]->nconns;
	}
	if (count == 0) {
		return 0;
	}
	struct edge *edges = malloc(count * sizeof(*edges));
	if (edges == NULL) {
		return -1;
	}
	size_t n = 0;
	for (size_t i = 0; i < lv->nnodes; i++) {
		const struct live_node *node = lv->nodes[i];
		for (size_t j = 0; j < node->nconns; j++) {
			const struct live_conn *c = &node->conns[j];
			bool first = strcmp(node->id, c->peer) <= 0;
			edges[n++] = (struct edge){
			    .a = first ? node->id : c->peer,
			    .b = first ? c->peer : node->id,
			    .rtt_us = c->rtt_us,
			    .a_to_b = first ? c->bytes_out_per_s : NAN,
			    .b_to_a = first ? NAN : c->bytes_out_per_s,
			    .a_conns = first ? 1 : 0,
			    .b_conns = first ? 0 : 1,
			};
		}
	}
	qsort(edges, n, sizeof(*edges), compare_edges);
	size_t out = 0;
	for (size_t i = 0; i < n; i++) {
		if (out > 0 && compare_edges(&edges[out - 1], &edges[i]) == 0) {
			struct edge *e = &edges[out - 1];
			e->rtt_us = min_known(e->rtt_us, edges[i].rtt_us);
			e->a_to_b = sum_known(e->a_to_b, edges[i].a_to_b);
			e->b_to_a = sum_known(e->b_to_a, edges[i].b_to_a);
			e->a_conns += edges[i].a_conns;
			e->b_conns += edges[i].b_conns;
		} else {
			edges[out++] = edges[i];
		}
	}
	int rc = 0;
	for (size_t i = 0; i < out && rc == 0; i++) {
		cJSON *o = edge_json(&edges[i]);
		if (o == NULL) {
			rc = -1;
		} else {
			cJSON_AddItemToArray(links, o);
		}
	}
	free(edges);
	return rc;
}

static void
add_series_names(cJSON *o, const struct live_node *n, const struct live_series *s)
{
	cJSON_AddStringToObject(o, "node", n->id);
	cJSON_AddStringToObject(o, "key", s->key);
	cJSON_AddStringToObject(o, "role", s->pub ? "pub" : "sub");
	cJSON_AddStringToObject(o, "publisher", s->publisher);
}

static cJSON *
series_json(const struct live_node *n, const struct live_series *s)
{
	cJSON *o = cJSON_CreateObject();
	if (o == NULL) {
		return NULL;
	}
	add_series_names(o, n, s);
	cJSON_AddNumberToObject(o, "t_ms", (double)s->t_ms);
	add_num(o, "msgs_per_s", s->msgs_per_s);
	add_num(o, "bytes_per_s", s->bytes_per_s);
	add_num(o, "msgs_total", s->msgs_total);
	if (s->pub) {
		add_num(o, "drops", s->drops);
		add_num(o, "blocked_ms", s->blocked_ms);
		add_num(o, "queue_bytes", s->queue_bytes);
	} else {
		add_num(o, "missed", s->missed);
		add_num(o, "lat_samples", s->lat_samples);
		add_num(o, "lat_p50_us", s->lat_p50_us);
		add_num(o, "lat_p99_us", s->lat_p99_us);
		add_num(o, "lat_p999_us", s->lat_p999_us);
		add_num(o, "lat_max_us", s->lat_max_us);
	}
	return o;
}

static cJSON *
message_new(const struct live *lv, const char *type, const struct live_time *now)
{
	cJSON *msg = cJSON_CreateObject();
	cJSON *connect = cJSON_CreateArray();
	if (msg == NULL || connect == NULL) {
		cJSON_Delete(msg);
		cJSON_Delete(connect);
		return NULL;
	}
	cJSON_AddStringToObject(msg, "type", type);
	cJSON_AddNumberToObject(msg, "time_ms", (double)now->wall_ms);
	cJSON_AddStringToObject(msg, "observer", lv->observer);
	for (size_t i = 0; i < lv->nconnect; i++) {
		cJSON_AddItemToArray(connect, cJSON_CreateString(lv->connect[i]));
	}
	cJSON_AddItemToObject(msg, "connect", connect);
	return msg;
}

cJSON *
live_message(const struct live *lv, const struct live_time *now)
{
	cJSON *msg = message_new(lv, "live", now);
	if (msg == NULL) {
		return NULL;
	}
	cJSON *nodes = cJSON_AddArrayToObject(msg, "nodes");
	cJSON *links = cJSON_AddArrayToObject(msg, "links");
	cJSON *keys = cJSON_AddArrayToObject(msg, "keys");
	if (nodes == NULL || links == NULL || keys == NULL) {
		goto fail;
	}
	for (size_t i = 0; i < lv->nnodes; i++) {
		const struct live_node *n = lv->nodes[i];
		cJSON *o = node_json(n, now);
		if (o == NULL) {
			goto fail;
		}
		cJSON_AddItemToArray(nodes, o);
		for (size_t j = 0; j < n->nseries; j++) {
			if ((o = series_json(n, n->series[j])) == NULL) {
				goto fail;
			}
			cJSON_AddItemToArray(keys, o);
		}
	}
	if (add_silent_peers(lv, nodes) != 0 || add_links(lv, links) != 0) {
		goto fail;
	}
	return msg;
fail:
	cJSON_Delete(msg);
	return NULL;
}

static cJSON *
point_json(const struct live_point *p)
{
	const double v[] = {(double)p->t_ms, p->msgs_per_s, p->bytes_per_s,
	                    p->lat_p50_us,   p->lat_p99_us, p->lat_p999_us};
	cJSON *a = cJSON_CreateArray();
	for (size_t i = 0; a != NULL && i < sizeof(v) / sizeof(v[0]); i++) {
		cJSON_AddItemToArray(a, isfinite(v[i]) ? cJSON_CreateNumber(v[i])
		                                       : cJSON_CreateNull());
	}
	return a;
}

cJSON *
live_history_message(const struct live *lv, const struct live_time *now)
{
	static const char *const columns[] = {"t_ms",       "msgs_per_s", "bytes_per_s",
	                                      "lat_p50_us", "lat_p99_us", "lat_p999_us"};
	cJSON *msg = message_new(lv, "live_history", now);
	if (msg == NULL) {
		return NULL;
	}
	cJSON_AddNumberToObject(msg, "capacity", LIVE_HISTORY);
	cJSON *cols = cJSON_CreateStringArray(columns, (int)(sizeof(columns) / sizeof(columns[0])));
	cJSON *all = cJSON_CreateArray();
	cJSON_AddItemToObject(msg, "columns", cols);
	cJSON_AddItemToObject(msg, "series", all);
	if (cols == NULL || all == NULL) {
		cJSON_Delete(msg);
		return NULL;
	}
	for (size_t i = 0; i < lv->nnodes; i++) {
		const struct live_node *n = lv->nodes[i];
		for (size_t j = 0; j < n->nseries; j++) {
			const struct live_series *s = n->series[j];
			cJSON *o = cJSON_CreateObject();
			cJSON *points = cJSON_CreateArray();
			if (o == NULL || points == NULL) {
				cJSON_Delete(o);
				cJSON_Delete(points);
				cJSON_Delete(msg);
				return NULL;
			}
			add_series_names(o, n, s);
			size_t first = (s->ring_head + LIVE_HISTORY - s->ring_len) % LIVE_HISTORY;
			for (size_t k = 0; k < s->ring_len; k++) {
				cJSON_AddItemToArray(
				    points, point_json(&s->ring[(first + k) % LIVE_HISTORY]));
			}
			cJSON_AddItemToObject(o, "points", points);
			cJSON_AddItemToArray(all, o);
		}
	}
	return msg;
}
