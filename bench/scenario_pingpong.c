/*
 * scenario_pingpong.c - round trips: a message goes to the receiver, which
 * sends it straight back, with `concurrency` messages in flight.
 *
 * The client keeps the window full: whenever answers come back it sends as
 * many new messages as there are free slots (then flushes, so batched mode
 * batches exactly what is ready). Answers must come back complete and in
 * order. Before timing starts, one warm-up message must make the whole round
 * trip, so the receiver's answers are known to reach the client (a tern
 * subscription takes a moment to propagate).
 */
#include "record.h"
#include "scenario.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define READY_TIMEOUT_MS 20000
#define WARMUP_SENDER    1u
#define MAX_SAMPLES      (4u * 1024 * 1024)
#define CONCURRENCY_MAX  100000u

struct pp_state {
	struct cell_env *env;
	struct cell_result *res;
	uint32_t concurrency;
	uint32_t records_per_msg;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	uint32_t in_flight;
	uint64_t next_reply; /* message number expected next */
	uint64_t replies;
	bool warm;
	uint64_t *sent_at;    /* ring of send times, by message number */
	uint32_t *samples_ns; /* round trips, capped at MAX_SAMPLES */
	size_t nsamples;
};

static void
server_echo(void *arg, uint32_t conn, const void *data, size_t len)
{
	struct pp_state *st = arg;
	int rc = st->env->cell->layer->server_reply(st->env->server, conn, data, len);

	if (rc != 0) {
		result_fail(st->res, "the receiver could not answer (%d)", rc);
	}
}

static void
client_reply(void *arg, uint32_t conn, const void *data, size_t len)
{
	struct pp_state *st = arg;
	uint64_t now = net_now_ns();
	char err[160];
	record r;
	uint64_t msg;
	uint32_t i;

	(void)conn;
	if (len != (size_t)st->records_per_msg * RECORD_BYTES) {
		result_fail(st->res, "an answer of %zu bytes, expected %u records", len,
		            st->records_per_msg);
		return;
	}
	if (record_decode(&r, data, len, err, sizeof(err)) != RECORD_BYTES) {
		result_fail(st->res, "%s", err);
		return;
	}
	pthread_mutex_lock(&st->mu);
	if (record_sender(r.id) == WARMUP_SENDER) {
		st->warm = true;
		pthread_cond_signal(&st->cv);
		pthread_mutex_unlock(&st->mu);
		return;
	}
	msg = record_seq(r.id) / st->records_per_msg;
	if (record_sender(r.id) != 0 || msg != st->next_reply) {
		result_fail(st->res, "answer %llu came when %llu was due", (unsigned long long)msg,
		            (unsigned long long)st->next_reply);
	}
	/* The other records of the answer must follow on. */
	for (i = 1; i < st->records_per_msg; i++) {
		record o;

		if (record_decode(&o, (const char *)data + (size_t)i * RECORD_BYTES, RECORD_BYTES,
		                  err, sizeof(err)) != RECORD_BYTES ||
		    o.id != r.id + i) {
			result_fail(st->res, "answer %llu: record %u is wrong",
			            (unsigned long long)msg, i);
			break;
		}
	}
	if (st->nsamples < MAX_SAMPLES) {
		uint64_t rtt = now - st->sent_at[msg % st->concurrency];

		st->samples_ns[st->nsamples++] = rtt > UINT32_MAX ? UINT32_MAX : (uint32_t)rtt;
	}
	st->next_reply = msg + 1;
	st->replies++;
	if (st->in_flight > 0) {
		st->in_flight--;
	}
	pthread_cond_signal(&st->cv);
	pthread_mutex_unlock(&st->mu);
}

static void
wait_cv(struct pp_state *st, uint64_t ns)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_nsec += (long)(ns % 1000000000u);
	ts.tv_sec += (time_t)(ns / 1000000000u) + ts.tv_nsec / 1000000000L;
	ts.tv_nsec %= 1000000000L;
	pthread_cond_timedwait(&st->cv, &st->mu, &ts);
}

static int
send_msg(struct pp_state *st, char *buf, uint32_t sender, uint64_t msg)
{
	const struct layer_ops *ops = st->env->cell->layer;
	uint64_t now = net_wall_ns();
	uint32_t i;

	for (i = 0; i < st->records_per_msg; i++) {
		record r;

		record_make(&r, sender, (uint32_t)(msg * st->records_per_msg + i), now);
		record_encode(&r, buf + (size_t)i * RECORD_BYTES, RECORD_BYTES);
	}
	return ops->client_send(st->env->clients[0], buf,
	                        (size_t)st->records_per_msg * RECORD_BYTES);
}

static int
warm_up(struct pp_state *st, char *buf)
{
	const struct layer_ops *ops = st->env->cell->layer;
	uint64_t deadline = net_now_ns() + (uint64_t)READY_TIMEOUT_MS * 1000000u;
	uint64_t n = 0;

	while (!bench_interrupted && net_now_ns() < deadline) {
		uint64_t until;
		bool warm;

		if (send_msg(st, buf, WARMUP_SENDER, n++) != 0 ||
		    ops->client_flush(st->env->clients[0], false) != 0) {
			return -1;
		}
		/* Wait a round trip of the link and a little more before asking again. */
		until = net_now_ns() + 50000000u + (uint64_t)(st->env->cell->link->rtt_ms * 2e6);
		pthread_mutex_lock(&st->mu);
		while (!st->warm && net_now_ns() < until) {
			wait_cv(st, 5000000);
		}
		warm = st->warm; /* read under the lock: the reply thread sets it */
		pthread_mutex_unlock(&st->mu);
		if (warm) {
			/* Late warm-up answers may still be on their way: let them land. */
			net_sleep_ns(10000000u + (uint64_t)(st->env->cell->link->rtt_ms * 2e6));
			return 0;
		}
	}
	return -1;
}

static int
cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a;
	uint32_t y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

static double
percentile_us(const uint32_t *s, size_t n, double q)
{
	size_t i = (size_t)(q * (double)(n - 1) + 0.5);

	return (double)s[i] / 1000.0;
}

static void
drive(struct pp_state *st, char *buf)
{
	const struct cell *c = st->env->cell;
	const struct layer_ops *ops = c->layer;
	uint64_t t0 = net_now_ns();
	uint64_t t_end = t0 + (uint64_t)(c->duration * 1e9);
	uint64_t deadline;
	uint64_t next_msg = 0;

	/* The first round goes out even if this thread was descheduled past
	 * t_end: a loaded machine makes the figures poor, never the cell empty. */
	while (!bench_interrupted && (next_msg == 0 || net_now_ns() < t_end) && !st->res->failed) {
		uint32_t k;
		uint32_t i;

		pthread_mutex_lock(&st->mu);
		while (st->in_flight >= st->concurrency && net_now_ns() < t_end) {
			wait_cv(st, 2000000);
		}
		k = st->concurrency - st->in_flight;
		st->in_flight += k;
		for (i = 0; i < k; i++) {
			st->sent_at[(next_msg + i) % st->concurrency] = net_now_ns();
		}
		pthread_mutex_unlock(&st->mu);
		for (i = 0; i < k; i++) {
			if (send_msg(st, buf, 0, next_msg++) != 0) {
				result_fail(st->res, "send failed");
				break;
			}
		}
		if (k > 0 && ops->client_flush(st->env->clients[0], false) != 0) {
			result_fail(st->res, "flush failed");
		}
	}
	deadline = net_now_ns() + 5000000000ull + (uint64_t)(c->link->rtt_ms * 10e6);
	pthread_mutex_lock(&st->mu);
	while (st->replies < next_msg && net_now_ns() < deadline && !bench_interrupted) {
		wait_cv(st, 2000000);
	}
	if (st->replies < next_msg) {
		st->res->lost = next_msg - st->replies;
		result_fail(st->res, "%llu of %llu messages never came back",
		            (unsigned long long)(next_msg - st->replies),
		            (unsigned long long)next_msg);
	}
	st->res->seconds = (double)(net_now_ns() - t0) / 1e9;
	st->res->messages = st->replies;
	st->res->records = st->replies * st->records_per_msg;
	st->res->bytes = st->res->records * RECORD_BYTES;
	if (st->nsamples > 0) {
		qsort(st->samples_ns, st->nsamples, sizeof(st->samples_ns[0]), cmp_u32);
		st->res->lat_p50_us = percentile_us(st->samples_ns, st->nsamples, 0.50);
		st->res->lat_p99_us = percentile_us(st->samples_ns, st->nsamples, 0.99);
		st->res->lat_p999_us = percentile_us(st->samples_ns, st->nsamples, 0.999);
	}
	pthread_mutex_unlock(&st->mu);
}

int
scenario_pingpong_run(struct cell_env *e, struct cell_result *res)
{
	const struct cell *c = e->cell;
	struct pp_state st;
	char err[256];
	char *buf = NULL;

	memset(&st, 0, sizeof(st));
	if (c->layer->server_reply == NULL) {
		/* the matrix gives such a layer no pingpong cells */
		result_fail(res, "the %s layer has no reply path", c->layer->name);
		return -1;
	}
	st.env = e;
	st.res = res;
	st.concurrency = c->concurrency ? c->concurrency : 1;
	st.records_per_msg = c->records_per_msg ? c->records_per_msg : 1;
	if (st.concurrency > CONCURRENCY_MAX || st.records_per_msg > 1024 * 1024) {
		result_fail(res, "bad cell: concurrency or records per message too large");
		return -1;
	}
	pthread_mutex_init(&st.mu, NULL);
	pthread_cond_init(&st.cv, NULL);
	st.sent_at = calloc(st.concurrency, sizeof(*st.sent_at));
	st.samples_ns = malloc(MAX_SAMPLES * sizeof(*st.samples_ns));
	buf = malloc((size_t)st.records_per_msg * RECORD_BYTES);
	if (st.sent_at == NULL || st.samples_ns == NULL || buf == NULL) {
		result_fail(res, "out of memory");
		goto out;
	}
	if (env_server(e, server_echo, &st, err, sizeof(err)) != 0 ||
	    env_client(e, client_reply, &st, err, sizeof(err)) != 0 ||
	    env_ready(e, READY_TIMEOUT_MS, err, sizeof(err)) != 0) {
		result_fail(res, "%s", err);
		goto out;
	}
	if (warm_up(&st, buf) != 0) {
		if (!bench_interrupted) {
			result_fail(res, "no answer came back within %d ms", READY_TIMEOUT_MS);
		}
		goto out;
	}
	drive(&st, buf);
out:
	env_teardown(e);
	pthread_cond_destroy(&st.cv);
	pthread_mutex_destroy(&st.mu);
	free(st.sent_at);
	free(st.samples_ns);
	free(buf);
	return res->failed ? -1 : 0;
}
