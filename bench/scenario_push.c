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
 *
 * A stream cell with a rate is open loop: record i is due at t0 + i / rate,
 * whatever the receiver does. The sender waits for a message's last record
 * to be due and sends it; when it is behind (the layer or the link held it
 * up) it sends at once, skipping nothing, so a backlog shows as latency.
 * Each record carries its due time, and the receiver counts arrival - due
 * for every record: measured from when the record should have left, not
 * from when a held-up sender got round to it, a stall is never hidden
 * (no coordinated omission). The schedule holds rate x --duration records,
 * all sent however late; only a sender still behind RATE_GIVE_UP_WINDOWS
 * windows plus RATE_GIVE_UP_NS after its start gives up, fails its cell,
 * and counts each record it never sent at the latency reached by then.
 */
#include "hist.h"
#include "record.h"
#include "scenario.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>

#define READY_TIMEOUT_MS 20000
#define DRAIN_STALL_NS   (5ull * 1000000000ull)
#define DRAIN_MAX_NS     (120ull * 1000000000ull)

/* Open loop: how close to a due time the sender stops sleeping and spins
 * (see wait_until). */
#define RATE_SPIN_NS 50000ull
/* Unsent records of a sender that gave up are counted in this many slices. */
#define UNSENT_SLICES 100000u

struct push_state {
	struct cell_env *env;
	struct cell_result *res;
	bool raw; /* bytes scenario */
	uint32_t nsenders;
	uint32_t records_per_msg;
	uint64_t payload_bytes;
	_Atomic uint32_t *next_seq; /* per sender: the receiver's next expected */
	/* --keys: message m goes on key m % keys, and order holds per key only:
	 * the next record expected on each key (next_seq counts records) */
	uint32_t keys;
	uint32_t *key_next;
	_Atomic uint64_t records;
	_Atomic uint64_t messages;
	_Atomic uint64_t lost;
	_Atomic uint64_t t_last;
	_Atomic uint64_t t_start; /* the first sender began: the cell's time runs from here */
	uint64_t duration_ns;     /* how long each sender sends */
	_Atomic bool stop;        /* or now: a sender could not start */
	uint32_t *sent;           /* per sender: how many ids it used */
	/* open loop (rate > 0) */
	double ns_per_record; /* 1e9 / rate */
	uint64_t scheduled;   /* records in the sender's schedule */
	uint64_t wall_offset; /* wall clock - monotonic clock, read once */
	hist *latency;        /* arrival - due time, per record */
};

struct sender_arg {
	struct push_state *st;
	uint32_t index;
	void *client;
	pthread_t thread;
};

/* With keys: records come in order on each key (the receiver's callbacks
 * run one at a time), and each is counted once. */
static void
check_keyed(struct push_state *st, uint32_t s, uint32_t seq)
{
	uint32_t rpm = st->records_per_msg;
	uint32_t key = seq / rpm % st->keys;
	uint32_t want = st->key_next[key];

	if (seq != want) {
		result_fail(st->res, "sender %u, key %u: record %u came where %u was due (%s)", s,
		            key, seq, want, seq > want ? "lost" : "reordered or repeated");
		if (seq < want) {
			return;
		}
	}
	st->key_next[key] = (seq + 1) % rpm == 0 ? seq + 1 + (st->keys - 1) * rpm : seq + 1;
	atomic_store_explicit(&st->next_seq[s], atomic_load(&st->next_seq[s]) + 1,
	                      memory_order_release);
}

/* The receiver saw seq from sender s: account for order and loss. */
static void
check_seq(struct push_state *st, uint32_t s, uint32_t seq)
{
	uint32_t want;

	if (s >= st->nsenders) {
		result_fail(st->res, "record from unknown sender %u", s);
		return;
	}
	if (st->keys > 1) {
		check_keyed(st, s, seq);
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

/* Open loop: a record due at its timestamp arrived at arrival. The
 * timestamp is a wall-clock time made from the monotonic clock with the
 * cell's one wall_offset, so a clock step cannot move a latency. */
static void
count_latency(struct push_state *st, uint64_t arrival, uint64_t timestamp)
{
	uint64_t due = timestamp - st->wall_offset;

	hist_record(st->latency, arrival > due ? arrival - due : 0);
}

static void
on_records(void *arg, uint32_t conn, const void *data, size_t len)
{
	struct push_state *st = arg;
	uint64_t arrival = st->latency != NULL ? net_now_ns() : 0;
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
		if (st->latency != NULL) {
			count_latency(st, arrival, r.timestamp);
		}
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

/* Closed loop: send as fast as the layer takes messages, for the window. */
static int
send_closed(struct sender_arg *sa, char *buf, size_t msg_len, uint32_t *seqp)
{
	struct push_state *st = sa->st;
	const struct layer_ops *ops = st->env->cell->layer;
	uint32_t seq = 0;
	int rc = 0;

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
	*seqp = seq;
	return rc;
}

/*
 * Wait until the monotonic clock reaches t. A sleep wakes late, by about
 * 20 us at the median and 90 us at p99 on a 2-core VM with the thread's
 * timer slack at 1 ns (80 and 250 us with the default 50 us slack), and
 * lateness here would be counted against the layer: sleep until
 * RATE_SPIN_NS before t and spin the rest. The spin is bounded: at most
 * RATE_SPIN_NS (plus what the sleep overslept) a message, so a slow rate
 * costs a small share of a core, and a rate with gaps under RATE_SPIN_NS
 * keeps the sender as busy as a closed-loop sender always is.
 */
static void
wait_until(uint64_t t)
{
	if (t > net_now_ns() + RATE_SPIN_NS) {
		net_sleep_until_ns(t - RATE_SPIN_NS);
	}
	while (net_now_ns() < t) {
	}
}

/* The time record i of the schedule is due. */
static uint64_t
due_at(const struct push_state *st, uint64_t t0, uint64_t i)
{
	return t0 + (uint64_t)((double)i * st->ns_per_record);
}

/*
 * The sender gave up at now with records first.. of its schedule unsent.
 * Each had waited now - due by then: count that, a lower bound, so the
 * percentiles never look better for the records the layer never took. In
 * at most UNSENT_SLICES slices, each counted at its middle record, so an
 * absurd rate cannot make this long; a slice spans under 1e-5 of the
 * unsent stretch, far below the histogram's resolution.
 */
static void
count_unsent(struct push_state *st, uint64_t t0, uint64_t first, uint64_t now)
{
	uint64_t step = (st->scheduled - first) / UNSENT_SLICES + 1;
	uint64_t i;

	for (i = first; i < st->scheduled; i += step) {
		uint64_t n = st->scheduled - i < step ? st->scheduled - i : step;
		uint64_t due = due_at(st, t0, i + n / 2);

		hist_record_n(st->latency, now > due ? now - due : 0, n);
	}
}

/* Open loop: send each message when its last record is due (see the top). */
static int
send_paced(struct sender_arg *sa, char *buf, size_t msg_len, uint32_t *seqp)
{
	struct push_state *st = sa->st;
	const struct layer_ops *ops = st->env->cell->layer;
	uint32_t k = st->records_per_msg;
	uint64_t t0;
	uint64_t give_up;
	uint64_t i;
	uint32_t seq = 0;
	bool pending = false;
	int rc = 0;

	/* This thread sleeps to the microsecond; the default slack is 50 us. */
	prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
	t0 = net_now_ns();
	give_up = t0 + RATE_GIVE_UP_WINDOWS * st->duration_ns + RATE_GIVE_UP_NS;
	note_start(st, t0);
	for (i = 0; i < st->scheduled; i += k) {
		uint64_t due = due_at(st, t0, i + k - 1);
		uint64_t now = net_now_ns();
		uint32_t j;

		if (bench_interrupted || atomic_load_explicit(&st->stop, memory_order_relaxed)) {
			break;
		}
		if (now < due) {
			/* Ahead: what is buffered goes out before the wait (the tcp
			 * layer's batch; tern writes by itself). */
			if (pending && (rc = ops->client_flush(sa->client, false)) != 0) {
				break;
			}
			pending = false;
			wait_until(due);
		} else if (now > give_up) {
			count_unsent(st, t0, i, now);
			result_fail(st->res,
			            "sender %u: %llu of %llu records still unsent %.1f s after "
			            "the start: the layer cannot keep up with %.0f records/s",
			            sa->index, (unsigned long long)(st->scheduled - i),
			            (unsigned long long)st->scheduled, (double)(now - t0) / 1e9,
			            1e9 / st->ns_per_record);
			break;
		}
		for (j = 0; j < k; j++) {
			record r;

			/* Test-only fault: leave one record out of the stream. */
			if (st->env->fault_drop && sa->index == 0 && seq == 1) {
				seq++;
			}
			record_make(&r, sa->index, seq++, due_at(st, t0, i + j) + st->wall_offset);
			record_encode(&r, buf + (size_t)j * RECORD_BYTES, RECORD_BYTES);
		}
		if ((rc = ops->client_send(sa->client, buf, msg_len)) != 0) {
			break;
		}
		pending = true;
	}
	*seqp = seq;
	return rc;
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
	int rc;

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
	if (st->latency != NULL) {
		rc = send_paced(sa, buf, msg_len, &seq);
	} else {
		rc = send_closed(sa, buf, msg_len, &seq);
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

/* Open loop: the schedule of a stream cell's one sender, and the histogram. */
static int
set_schedule(struct push_state *st, const struct cell *c)
{
	uint32_t k = st->records_per_msg;
	double n = c->rate * c->duration;
	uint64_t msgs;

	if (c->kind != SCEN_STREAM || st->nsenders != 1 || !(c->rate <= 1e9) ||
	    n > (double)(UINT32_MAX / 2)) {
		result_fail(st->res, "bad cell: a rate is for stream, at most 2^31 records a cell");
		return -1;
	}
	/* ceil(n) records, a nudge below so that 40000 x 0.3 is 12000, not 12001 */
	msgs = ((uint64_t)ceil(n - n * 1e-12) + k - 1) / k;
	st->scheduled = (msgs > 0 ? msgs : 1) * k;
	st->ns_per_record = 1e9 / c->rate;
	st->wall_offset = net_wall_ns() - net_now_ns();
	st->latency = hist_new();
	if (st->latency == NULL) {
		result_fail(st->res, "out of memory");
		return -1;
	}
	return 0;
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
	if (c->rate > 0 && set_schedule(&st, c) != 0) {
		return -1;
	}
	st.keys = c->kind == SCEN_STREAM && c->keys > 1 ? c->keys : 1;
	if (st.keys > 1 && (st.raw || st.nsenders != 1 ||
	                    (uint64_t)st.keys * st.records_per_msg > UINT32_MAX / 2)) {
		result_fail(res, "bad cell: keys are for stream, one sender");
		return -1;
	}
	if (st.keys > 1 && (st.key_next = calloc(st.keys, sizeof(*st.key_next))) != NULL) {
		for (i = 0; i < st.keys; i++) {
			st.key_next[i] = i * st.records_per_msg;
		}
	}
	st.next_seq = calloc(st.nsenders, sizeof(*st.next_seq));
	st.sent = calloc(st.nsenders, sizeof(*st.sent));
	sa = calloc(st.nsenders, sizeof(*sa));
	if (st.next_seq == NULL || st.sent == NULL || sa == NULL ||
	    (st.keys > 1 && st.key_next == NULL)) {
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
	if (st.latency != NULL && hist_count(st.latency) > 0) {
		res->lat_p50_us = hist_percentile_ns(st.latency, 0.50) / 1e3;
		res->lat_p99_us = hist_percentile_ns(st.latency, 0.99) / 1e3;
		res->lat_p999_us = hist_percentile_ns(st.latency, 0.999) / 1e3;
	}
	hist_free(st.latency);
	free(st.next_seq);
	free(st.key_next);
	free(st.sent);
	free(sa);
	return res->failed ? -1 : 0;
}
