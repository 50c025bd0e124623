/*
 * telemetry.c - the node's report on @tern/NODE_ID/stats (see telemetry.h).
 *
 * A report is built from the session's totals; the rates are the change
 * since the previous report over the time between them, so this module
 * keeps each key's and connection's previous totals, under a 64-bit hash of
 * its name, sorted for a binary search (a node may carry many keys). In a
 * steady state a report allocates nothing: the arrays and the text buffer
 * keep their size from one report to the next.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "error.h"
#include "jtext.h"
#include "session.h"
#include "telemetry.h"

#define KEY_PREFIX "@tern/"
#define KEY_SUFFIX "/stats"

/* The previous totals of one key (role, publisher, key) or connection. */
struct prev {
	uint64_t id;      /* hash of the name */
	uint64_t a, b, c; /* messages, bytes, blocked_us; or bytes in, bytes out */
};

struct prevs {
	struct prev *v;
	size_t n, cap;
};

struct telemetry {
	struct session *session;
	const tern_config *cfg;
	struct src *pub;
	uint64_t started_ms;
	pthread_t thread;
	pthread_mutex_t lock; /* stop, the previous totals, the report buffer */
	pthread_cond_t cond;
	bool stop;
	/* under lock */
	uint64_t last_ms; /* when the previous report was made */
	struct prevs keys, conns, next_keys, next_conns;
	struct jtext text; /* the report, its buffer kept from one to the next */
	double seconds;    /* the interval the report covers */
	bool first_key, first_conn;
};

/* ---- the text ---- */

/* ---- previous totals ---- */

/* FNV-1a over the parts of a name, with a separator no key holds. */
static uint64_t
name_hash(const char *a, const char *b, const char *c)
{
	const char *parts[3] = {a, b, c};
	uint64_t h = 14695981039346656037ull;

	for (int i = 0; i < 3; i++) {
		for (const char *p = parts[i]; *p; p++) {
			h = (h ^ (unsigned char)*p) * 1099511628211ull;
		}
		h = (h ^ 0xff) * 1099511628211ull;
	}
	return h;
}

static int
prev_cmp(const void *a, const void *b)
{
	uint64_t x = ((const struct prev *)a)->id;
	uint64_t y = ((const struct prev *)b)->id;

	return (x > y) - (x < y);
}

static const struct prev *
prev_find(const struct prevs *p, uint64_t id)
{
	struct prev key = {.id = id};

	return p->n ? bsearch(&key, p->v, p->n, sizeof(*p->v), prev_cmp) : NULL;
}

static void
prev_add(struct telemetry *t, struct prevs *p, uint64_t id, uint64_t a, uint64_t b, uint64_t c)
{
	if (p->n == p->cap) {
		size_t cap = p->cap ? p->cap * 2 : 16;
		struct prev *v = realloc(p->v, cap * sizeof(*v));
		if (v == NULL) {
			t->text.oom = true;
			return;
		}
		p->v = v;
		p->cap = cap;
	}
	p->v[p->n++] = (struct prev){.id = id, .a = a, .b = b, .c = c};
}

/* The new totals become the previous ones; the old array is reused. */
static void
prevs_roll(struct prevs *cur, struct prevs *next)
{
	struct prevs tmp = *cur;

	*cur = *next;
	*next = tmp;
	next->n = 0;
	/* A node with no key or connection yet has no array: qsort must not see NULL. */
	if (cur->n > 1) {
		qsort(cur->v, cur->n, sizeof(*cur->v), prev_cmp);
	}
}

static double
rate(uint64_t now, uint64_t before, double seconds)
{
	return now >= before && seconds > 0 ? (double)(now - before) / seconds : 0;
}

/* ---- one report ---- */

static void
on_key(void *arg, const struct session_key_report *k)
{
	struct telemetry *t = arg;
	uint64_t id = name_hash(k->pub ? "p" : "s", k->publisher, k->key);
	const struct prev *p;
	uint64_t m0 = 0, b0 = 0, w0 = 0;

	if (k->key[0] == '@') {
		return; /* telemetry does not report on itself */
	}
	if ((p = prev_find(&t->keys, id)) != NULL) {
		m0 = p->a;
		b0 = p->b;
		w0 = p->c;
	}
	prev_add(t, &t->next_keys, id, k->messages, k->bytes, k->blocked_us);
	jtext_printf(&t->text, "%s{\"key\":", t->first_key ? "" : ",");
	t->first_key = false;
	jtext_str(&t->text, k->key);
	jtext_printf(&t->text, ",\"publisher\":");
	jtext_str(&t->text, k->publisher);
	jtext_printf(
	    &t->text,
	    ",\"role\":\"%s\",\"msgs_per_s\":%.1f,\"bytes_per_s\":%.1f,\"msgs_total\":%llu,"
	    "\"drops\":%llu,\"missed\":%llu,\"blocked_ms\":%.3f,\"queue_bytes\":%llu",
	    k->pub ? "pub" : "sub", rate(k->messages, m0, t->seconds),
	    rate(k->bytes, b0, t->seconds), (unsigned long long)k->messages,
	    (unsigned long long)k->drops, (unsigned long long)k->missed,
	    k->blocked_us >= w0 ? (double)(k->blocked_us - w0) / 1000.0 : 0,
	    (unsigned long long)k->queue_bytes);
	if (!k->pub) {
		if (k->lat_count > 0) {
			jtext_printf(
			    &t->text,
			    ",\"lat_samples\":%llu,\"lat_p50_us\":%llu,\"lat_p99_us\":%llu,"
			    "\"lat_p999_us\":%llu,\"lat_max_us\":%llu",
			    (unsigned long long)k->lat_count, (unsigned long long)k->lat_p50_us,
			    (unsigned long long)k->lat_p99_us, (unsigned long long)k->lat_p999_us,
			    (unsigned long long)k->lat_max_us);
		} else {
			jtext_printf(&t->text,
			             ",\"lat_samples\":0,\"lat_p50_us\":null,\"lat_p99_us\":null,"
			             "\"lat_p999_us\":null,\"lat_max_us\":null");
		}
	}
	jtext_printf(&t->text, "}");
}

static void
on_conn(void *arg, const struct session_conn_report *c)
{
	struct telemetry *t = arg;
	uint64_t id = name_hash("c", c->peer, c->endpoint);
	const struct prev *p;
	uint64_t in0 = 0, out0 = 0;

	if ((p = prev_find(&t->conns, id)) != NULL) {
		in0 = p->a;
		out0 = p->b;
	}
	prev_add(t, &t->next_conns, id, c->bytes_in, c->bytes_out, 0);
	jtext_printf(&t->text, "%s{\"peer\":", t->first_conn ? "],\"connections\":[" : ",");
	t->first_conn = false;
	jtext_str(&t->text, c->peer);
	jtext_printf(&t->text, ",\"endpoint\":");
	jtext_str(&t->text, c->endpoint);
	jtext_printf(&t->text, ",\"identity\":");
	jtext_str(&t->text, c->identity);
	jtext_printf(&t->text, ",\"mode\":\"%s\",\"peer_mode\":\"%s\",",
	             c->low_latency ? "low-latency" : "batched",
	             ctl_mode_name((uint64_t)c->peer_mode));
	if (c->rtt_us > 0) {
		jtext_printf(&t->text, "\"rtt_us\":%llu", (unsigned long long)c->rtt_us);
	} else {
		jtext_printf(&t->text, "\"rtt_us\":null");
	}
	jtext_printf(&t->text, ",\"bytes_in_per_s\":%.1f,\"bytes_out_per_s\":%.1f}",
	             rate(c->bytes_in, in0, t->seconds), rate(c->bytes_out, out0, t->seconds));
}

/* Build a report into t->text (lock held). The session reports every key,
 * then every connection: the first connection closes the keys' array. */
static void
build(struct telemetry *t)
{
	static const struct session_report_ops ops = {.key = on_key, .conn = on_conn};
	uint64_t now = clock_ms();

	jtext_restart(&t->text);
	t->seconds = (double)clock_since(now, t->last_ms) / 1000.0;
	t->last_ms = now;
	jtext_printf(&t->text, "{\"node\":");
	jtext_str(&t->text, t->cfg->id);
	jtext_printf(
	    &t->text,
	    ",\"mode\":\"%s\",\"uptime_s\":%.3f,\"interval_ms\":%u,\"time_us\":%llu,"
	    "\"version\":\"%s\",\"keys\":[",
	    ctl_mode_name((uint64_t)t->cfg->mode), (double)clock_since(now, t->started_ms) / 1000.0,
	    t->cfg->telemetry_interval_ms, (unsigned long long)clock_wall_us(), TERN_VERSION);
	t->first_key = true;
	t->first_conn = true;
	session_report(t->session, &ops, t);
	jtext_printf(&t->text, "%s]}", t->first_conn ? "],\"connections\":[" : "");
	prevs_roll(&t->keys, &t->next_keys);
	prevs_roll(&t->conns, &t->next_conns);
}

size_t
telemetry_json(struct telemetry *t, char *buf, size_t len)
{
	size_t need;

	pthread_mutex_lock(&t->lock);
	build(t);
	need = t->text.oom ? 0 : t->text.len;
	if (buf != NULL && len > 0) {
		snprintf(buf, len, "%.*s", (int)need, t->text.buf ? t->text.buf : "");
	}
	pthread_mutex_unlock(&t->lock);
	return need;
}

/* ---- the thread ---- */

static void *
run(void *arg)
{
	struct telemetry *t = arg;

	pthread_mutex_lock(&t->lock);
	while (!t->stop) {
		struct timespec ts = clock_deadline_in(t->cfg->telemetry_interval_ms);

		/* a timed wait on the wall clock: a jump only moves one report */
		pthread_cond_timedwait(&t->cond, &t->lock, &ts);
		if (t->stop) {
			break;
		}
		if (clock_since(clock_ms(), t->last_ms) + 5 < t->cfg->telemetry_interval_ms) {
			continue; /* woken early */
		}
		if (session_pub_matched(t->pub) == 0) {
			/* nobody listens: a node with many keys would spend a core
			 * on reports. Rates stay right: the next report covers the
			 * time since the last one (t->last_ms). */
			continue;
		}
		build(t);
		if (!t->text.oom && t->text.len > 0) {
			/* best effort, so this never waits; a full queue drops a report */
			session_publish(t->session, t->pub, t->text.buf, t->text.len);
		}
	}
	pthread_mutex_unlock(&t->lock);
	return NULL;
}

/* "@tern/ID/stats", with characters a key chunk cannot hold replaced. */
static char *
stats_key(const char *id)
{
	size_t n = strlen(id);
	char *k = malloc(sizeof(KEY_PREFIX) + n + sizeof(KEY_SUFFIX));

	if (k == NULL) {
		return NULL;
	}
	memcpy(k, KEY_PREFIX, sizeof(KEY_PREFIX) - 1);
	for (size_t i = 0; i < n; i++) {
		char ch = id[i];
		k[sizeof(KEY_PREFIX) - 1 + i] =
		    ch == '/' || ch == '*' || (i == 0 && ch == '@') ? '_' : ch;
	}
	memcpy(k + sizeof(KEY_PREFIX) - 1 + n, KEY_SUFFIX, sizeof(KEY_SUFFIX));
	return k;
}

int
telemetry_start(struct telemetry **out, struct session *s, const tern_config *cfg)
{
	struct telemetry *t = calloc(1, sizeof(*t));
	char *key;
	int rc;

	if (t == NULL || (key = stats_key(cfg->id)) == NULL) {
		free(t);
		return tern__error(TERN_ENOMEM, "no memory for telemetry");
	}
	t->session = s;
	t->cfg = cfg;
	t->started_ms = t->last_ms = clock_ms();
	rc = session_pub_open(s, key, TERN_BEST_EFFORT, &t->pub);
	free(key);
	if (rc != 0) {
		free(t);
		return rc;
	}
	pthread_mutex_init(&t->lock, NULL);
	pthread_cond_init(&t->cond, NULL);
	if (pthread_create(&t->thread, NULL, run, t) != 0) {
		session_pub_close(s, t->pub);
		pthread_mutex_destroy(&t->lock);
		pthread_cond_destroy(&t->cond);
		free(t);
		return tern__error(TERN_ESYS, "cannot start the telemetry thread");
	}
	*out = t;
	return 0;
}

void
telemetry_stop(struct telemetry *t)
{
	if (t == NULL) {
		return;
	}
	pthread_mutex_lock(&t->lock);
	t->stop = true;
	pthread_cond_signal(&t->cond);
	pthread_mutex_unlock(&t->lock);
	pthread_join(t->thread, NULL);
	session_pub_close(t->session, t->pub);
	free(t->keys.v);
	free(t->conns.v);
	free(t->next_keys.v);
	free(t->next_conns.v);
	free(t->text.buf);
	pthread_mutex_destroy(&t->lock);
	pthread_cond_destroy(&t->cond);
	free(t);
}
