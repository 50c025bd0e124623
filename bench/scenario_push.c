/*
 * scenario_push.c - the one-way scenarios: stream, fanin and bytes.
 *
 * Senders push messages for the cell's duration; the receiver checks every
 * message as it arrives. stream and fanin send records (records_per_msg of
 * them a message) and the receiver decodes each one and checks that every
 * sender's ids arrive complete and in order; bytes sends raw payloads whose
 * first 8 bytes are a sequence number. The cell's time runs from the start of
 * sending to the arrival of the last message, so what is still queued when
 * the senders stop counts against the rate.
 *
 * Each sender's window of --duration starts when that sender does, not when
 * its thread was asked for: on a loaded machine a thread can start later
 * than a whole short window, and a sender that then sent nothing would fail
 * its cell with "nothing arrived". Every sender sends at least one message.
 */
#include "record.h"
#include "scenario.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define READY_TIMEOUT_MS 20000
#define DRAIN_STALL_NS   (5ull * 1000000000ull)
#define DRAIN_MAX_NS     (120ull * 1000000000ull)

struct push_state {
	struct cell_env *env;
	struct cell_result *res;
	bool raw; /* bytes scenario */
	uint32_t nsenders;
	uint32_t records_per_msg;
	uint64_t payload_bytes;
	_Atomic uint32_t *next_seq; /* per sender: the receiver's next expected */
	_Atomic uint64_t records;
	_Atomic uint64_t messages;
	_Atomic uint64_t lost;
	_Atomic uint64_t t_last;
	_Atomic uint64_t t_start; /* the first sender began: the cell's time runs from here */
	uint64_t duration_ns;     /* how long each sender sends */
	_Atomic bool stop;        /* or now: a sender could not start */
	uint32_t *sent;           /* per sender: how many ids it used */
};

struct sender_arg {
	struct push_state *st;
	uint32_t index;
	void *client;
	pthread_t thread;
};

/* The receiver saw seq from sender s: account for order and loss. */
static void
check_seq(struct push_state *st, uint32_t s, uint32_t seq)
{
	uint32_t want;

	if (s >= st->nsenders) {
		result_fail(st->res, "record from unknown sender %u", s);
		return;
	}
	want = atomic_load_explicit(&st->next_seq[s], memory_order_relaxed);
	if (seq > want) {
		atomic_fetch_add(&st->lost, seq - want);
		result_fail(st->res, "sender %u: records %u to %u lost", s, want, seq - 1);
	} else if (seq < want) {
		result_fail(st->res, "sender %u: record %u came after %u (reordered or repeated)",
		            s, seq, want - 1);
		return;
	}
	atomic_store_explicit(&st->next_seq[s], seq + 1, memory_order_release);
}

static void
on_records(void *arg, uint32_t conn, const void *data, size_t len)
{
	struct push_state *st = arg;
	const char *p = data;
	char err[160];
	uint32_t n = 0;
	record r;

	(void)conn;
	if (len != (size_t)st->records_per_msg * RECORD_BYTES) {
		result_fail(st->res, "a message of %zu bytes, expected %u records", len,
		            st->records_per_msg);
	}
	while (len > 0) {
		int used = record_decode(&r, p, len, err, sizeof(err));

		if (used != RECORD_BYTES) {
			result_fail(st->res, "%s", used < 0 ? err : "a record of the wrong size");
			break;
		}
		check_seq(st, record_sender(r.id), record_seq(r.id));
		p += used;
		len -= (size_t)used;
		n++;
	}
	atomic_store(&st->t_last, net_now_ns());
	atomic_fetch_add(&st->messages, 1);
	atomic_fetch_add(&st->records, n);
}

static void
on_raw(void *arg, uint32_t conn, const void *data, size_t len)
{
	struct push_state *st = arg;
	uint64_t seq;

	(void)conn;
	if (len != st->payload_bytes || len < sizeof(seq)) {
		result_fail(st->res, "a payload of %zu bytes, expected %llu", len,
		            (unsigned long long)st->payload_bytes);
		return;
	}
	memcpy(&seq, data, sizeof(seq));
	check_seq(st, (uint32_t)(seq >> 32), (uint32_t)seq);
	atomic_store(&st->t_last, net_now_ns());
	atomic_fetch_add(&st->messages, 1);
	atomic_fetch_add(&st->records, 1);
}

/* Note when a sender began; the earliest is the cell's start. */
static void
note_start(struct push_state *st, uint64_t now)
{
	uint64_t first = atomic_load(&st->t_start);

	while ((first == 0 || now < first) &&
	       !atomic_compare_exchange_weak(&st->t_start, &first, now)) {
	}
}

static void *
sender_main(void *arg)
{
	struct sender_arg *sa = arg;
	struct push_state *st = sa->st;
	const struct layer_ops *ops = st->env->cell->layer;
	size_t msg_len = st->raw ? st->payload_bytes : (size_t)st->records_per_msg * RECORD_BYTES;
	char *buf = malloc(msg_len);
	uint32_t seq = 0;
	int rc = 0;

	if (buf == NULL) {
		result_fail(st->res, "sender %u: out of memory", sa->index);
		return NULL;
	}
	if (st->raw) {
		memset(buf, 0xa5, msg_len);
	}
	if (st->env->fault_late_start) {
		net_sleep_ns(st->duration_ns + 100000000ull);
	}
	note_start(st, net_now_ns());
	/* one clock read a message: the records' wall-clock timestamp also
	 * tells when to stop */
	uint64_t wall_end = net_wall_ns() + st->duration_ns;
	uint64_t now = net_wall_ns();

	while (!bench_interrupted && !atomic_load_explicit(&st->stop, memory_order_relaxed)) {
		if (st->raw) {
			uint64_t id = (uint64_t)sa->index << 32 | seq++;

			memcpy(buf, &id, sizeof(id));
		} else {
			uint32_t i;

			for (i = 0; i < st->records_per_msg; i++) {
				record r;

				/* Test-only fault: leave one record out of the stream. */
				if (st->env->fault_drop && sa->index == 0 && seq == 1) {
					seq++;
				}
				record_make(&r, sa->index, seq++, now);
				record_encode(&r, buf + (size_t)i * RECORD_BYTES, RECORD_BYTES);
			}
		}
		rc = ops->client_send(sa->client, buf, msg_len);
		if (rc != 0 || (now = net_wall_ns()) >= wall_end) {
			break;
		}
	}
	if (rc != 0) {
		result_fail(st->res, "sender %u: send failed (%d)", sa->index, rc);
	} else if ((rc = ops->client_flush(sa->client, true)) != 0) {
		result_fail(st->res, "sender %u: final flush failed (%d)", sa->index, rc);
	}
	st->sent[sa->index] = seq;
	free(buf);
	return NULL;
}

/*
 * Everything sent has arrived or been counted lost, and counted: the
 * receiver moves next_seq on record by record and adds the message to
 * records (after t_last) only once it is through, so next_seq alone would
 * let the cell end before its last message is counted.
 */
static bool
drained(struct push_state *st)
{
	uint64_t total = 0;
	uint32_t i;

	for (i = 0; i < st->nsenders; i++) {
		if (atomic_load(&st->next_seq[i]) < st->sent[i]) {
			return false;
		}
		total += st->sent[i];
	}
	return atomic_load(&st->records) + atomic_load(&st->lost) >= total;
}

static void
finish(struct push_state *st, struct sender_arg *sa)
{
	struct cell_result *res = st->res;
	uint64_t t0 = atomic_load(&st->t_start);
	uint64_t start = net_now_ns();
	uint64_t stall = DRAIN_STALL_NS + (uint64_t)(st->env->cell->link->rtt_ms * 2e6);
	uint64_t last_progress = start;
	uint64_t last_count = 0;
	uint32_t i;
	uint32_t lo = UINT32_MAX;
	uint32_t hi = 0;

	/* What the senders left queued arrives at the link's pace: wait while it
	 * keeps coming, and call the cell failed when delivery stalls. */
	while (!drained(st) && !bench_interrupted) {
		uint64_t now = net_now_ns();
		uint64_t count = atomic_load(&st->records) + atomic_load(&st->lost);

		if (count != last_count) {
			last_count = count;
			last_progress = now;
		}
		if (now - last_progress > stall || now - start > DRAIN_MAX_NS) {
			break;
		}
		net_sleep_ns(1000000);
	}
	for (i = 0; i < st->nsenders; i++) {
		uint32_t got = atomic_load(&st->next_seq[i]);

		if (got < st->sent[i]) {
			result_fail(res, "sender %u: the receiver got %u of %u records in time", i,
			            got, st->sent[i]);
			atomic_fetch_add(&st->lost, st->sent[i] - got);
		}
		lo = got < lo ? got : lo;
		hi = got > hi ? got : hi;
	}
	(void)sa;
	res->messages = atomic_load(&st->messages);
	res->records = atomic_load(&st->records);
	res->bytes = st->raw ? res->records * st->payload_bytes : res->records * RECORD_BYTES;
	res->lost = atomic_load(&st->lost);
	if (t0 != 0 && atomic_load(&st->t_last) > t0) {
		res->seconds = (double)(atomic_load(&st->t_last) - t0) / 1e9;
	}
	if (st->nsenders > 1 && lo > 0) {
		res->spread = (double)hi / (double)lo;
	}
	if (res->records == 0) {
		result_fail(res, "nothing arrived");
	}
}

int
scenario_push_run(struct cell_env *e, struct cell_result *res)
{
	const struct cell *c = e->cell;
	struct push_state st;
	struct sender_arg *sa = NULL;
	char err[256];
	uint32_t i;
	uint32_t started = 0;

	memset(&st, 0, sizeof(st));
	st.env = e;
	st.res = res;
	st.raw = c->kind == SCEN_BYTES;
	st.nsenders = c->kind == SCEN_FANIN ? c->concurrency : 1;
	st.records_per_msg = c->records_per_msg;
	st.payload_bytes = c->payload_bytes;
	if (st.nsenders == 0 || st.nsenders > ENV_MAX_CLIENTS ||
	    (!st.raw && (st.records_per_msg == 0 || st.records_per_msg > 1024 * 1024)) ||
	    (st.raw && (st.payload_bytes < 8 || st.payload_bytes > LAYER_MAX_MESSAGE))) {
		result_fail(res, "bad cell: senders, records per message or payload size");
		return -1;
	}
	st.next_seq = calloc(st.nsenders, sizeof(*st.next_seq));
	st.sent = calloc(st.nsenders, sizeof(*st.sent));
	sa = calloc(st.nsenders, sizeof(*sa));
	if (st.next_seq == NULL || st.sent == NULL || sa == NULL) {
		result_fail(res, "out of memory");
		goto out;
	}
	if (env_server(e, st.raw ? on_raw : on_records, &st, err, sizeof(err)) != 0) {
		result_fail(res, "%s", err);
		goto out;
	}
	for (i = 0; i < st.nsenders; i++) {
		if (env_client(e, NULL, NULL, err, sizeof(err)) != 0) {
			result_fail(res, "%s", err);
			goto out;
		}
		sa[i].st = &st;
		sa[i].index = i;
		sa[i].client = e->clients[i];
	}
	if (env_ready(e, READY_TIMEOUT_MS, err, sizeof(err)) != 0) {
		result_fail(res, "%s", err);
		goto out;
	}
	st.duration_ns = (uint64_t)(c->duration * 1e9);
	for (i = 0; i < st.nsenders; i++) {
		if (pthread_create(&sa[i].thread, NULL, sender_main, &sa[i]) != 0) {
			result_fail(res, "cannot start sender thread %u", i);
			atomic_store(&st.stop, true);
			break;
		}
		started++;
	}
	for (i = 0; i < started; i++) {
		pthread_join(sa[i].thread, NULL);
	}
	if (started == st.nsenders) {
		finish(&st, sa);
	}
out:
	/* The receiver's callback uses st: stop it before st goes away. */
	env_teardown(e);
	free(st.next_seq);
	free(st.sent);
	free(sa);
	return res->failed ? -1 : 0;
}
