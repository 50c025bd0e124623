/*
 * inchan_test.c - the receiving side of a channel, fed frames as the
 * connection's parser would feed them, with a recording set of ops in the
 * session's place: delivery in order, the backlog while the taker cannot
 * take, reassembly across interleaved channels, subscribers that appear in
 * the middle of a message, duplicates, credit and the message size limit.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "clock.h"
#include "inchan.h"
#include "tern/tern.h"

#define MAXREC 64

struct msg {
	uint64_t seq;
	uint64_t stamp;
	uint8_t *data;
	size_t len;
	bool whole;
	bool heap;
};

struct fwd {
	int flags;
	uint64_t seq, len;
};

/* One channel's taker: what it accepts, and what it was given. */
struct rec {
	bool refuse;       /* deliver cannot take messages now */
	bool refuse_fwd;   /* forward cannot take chunks now */
	bool want_whole;   /* a local subscriber is there */
	uint64_t dup_upto; /* messages up to this number were delivered already */
	bool keep_heap;    /* a pull subscriber keeps the reassembled buffer */
	int deliver_calls, forward_calls;
	int n, nfwd, nstarted;
	struct msg msg[MAXREC];
	struct fwd fwd[MAXREC];
	uint64_t started[MAXREC];
};

static bool
on_deliver(void *arg, void *from, uint64_t seq, uint64_t stamp, const uint8_t *data, size_t len,
           uint8_t **heap, bool whole)
{
	struct rec *r = arg;

	assert_ptr_equal(from, r);
	r->deliver_calls++;
	if (r->refuse) {
		return false;
	}
	assert_true(r->n < MAXREC);
	struct msg *m = &r->msg[r->n++];
	m->seq = seq;
	m->stamp = stamp;
	m->len = len;
	m->whole = whole;
	m->heap = heap != NULL && *heap != NULL;
	if (r->keep_heap && m->heap) {
		m->data = *heap;
		*heap = NULL;
		return true;
	}
	m->data = malloc(len > 0 ? len : 1);
	assert_non_null(m->data);
	memcpy(m->data, data, len);
	return true;
}

static bool
on_forward(void *arg, void *from, const struct wire_frame *f, uint64_t seq, const uint8_t *payload)
{
	struct rec *r = arg;

	(void)payload;
	assert_ptr_equal(from, r);
	r->forward_calls++;
	if (r->refuse_fwd) {
		return false;
	}
	assert_true(r->nfwd < MAXREC);
	r->fwd[r->nfwd].flags = f->flags;
	r->fwd[r->nfwd].seq = seq;
	r->fwd[r->nfwd].len = f->len;
	r->nfwd++;
	return true;
}

static bool
on_duplicate(void *arg, uint64_t seq)
{
	struct rec *r = arg;

	return seq <= r->dup_upto;
}

static void
on_started(void *arg, uint64_t seq)
{
	struct rec *r = arg;

	assert_true(r->nstarted < MAXREC);
	r->started[r->nstarted++] = seq;
}

static bool
on_wants_whole(void *arg)
{
	struct rec *r = arg;

	return r->want_whole;
}

static const struct inchan_ops ops = {.deliver = on_deliver,
                                      .forward = on_forward,
                                      .duplicate = on_duplicate,
                                      .started = on_started,
                                      .wants_whole = on_wants_whole};

static uint64_t budget;
static const uint64_t budget_all = 1 << 24;
static struct inchan_limits lim = {.max_message = 1 << 20, .budget = &budget};

static struct inchan *
chan(struct rec *r, uint32_t id, uint64_t window, uint64_t window_max)
{
	struct inchan *in;

	memset(r, 0, sizeof(*r));
	r->want_whole = true;
	assert_int_equal(inchan_new(&in, id, window, window_max, &ops, r, r), 0);
	return in;
}

static void
done(struct inchan *in, struct rec *r)
{
	inchan_free(in, &budget);
	for (int i = 0; i < r->n; i++) {
		free(r->msg[i].data);
	}
	assert_int_equal(budget, budget_all);
}

static int
setup(void **state)
{
	(void)state;
	budget = budget_all;
	lim.max_message = 1 << 20;
	return 0;
}

static void
fill(uint8_t *p, size_t len, unsigned seed)
{
	for (size_t i = 0; i < len; i++) {
		p[i] = (uint8_t)(seed * 131 + i * 7 + (i >> 8));
	}
}

/* A frame as the parser hands it over: the header, its encoded length. */
static struct wire_frame
frame(int type, int flags, uint64_t ch, uint64_t seq, uint64_t total, uint64_t len, size_t *hlen)
{
	struct wire_frame f = {
	    .type = type, .flags = flags, .channel = ch, .seq = seq, .total = total, .len = len};
	uint8_t hdr[WIRE_HDR_MAX];

	*hlen = wire_header_encode(hdr, &f);
	return f;
}

/* Receive a data frame; seq 0: implicit. Returns inchan_receive's result
 * and adds the frame's bytes to *bytes. */
static int
data(struct inchan *in, uint64_t seq, const uint8_t *p, size_t len, uint64_t *bytes)
{
	size_t hlen;
	struct wire_frame f = frame(WIRE_DATA, seq ? WIRE_FLAG_SEQ : 0, in->id, seq, 0, len, &hlen);

	if (bytes != NULL) {
		*bytes += hlen + len;
	}
	return inchan_receive(in, &f, hlen, p, &lim);
}

static int
chunk(struct inchan *in, int flags, uint64_t seq, uint64_t total, const uint8_t *p, size_t len,
      uint64_t *bytes)
{
	size_t hlen;
	struct wire_frame f =
	    frame(WIRE_CHUNK, flags | (seq ? WIRE_FLAG_SEQ : 0), in->id, seq, total, len, &hlen);

	if (bytes != NULL) {
		*bytes += hlen + len;
	}
	return inchan_receive(in, &f, hlen, p, &lim);
}

static void
assert_msg(const struct rec *r, int i, uint64_t seq, const uint8_t *p, size_t len, bool whole)
{
	assert_true(i < r->n);
	assert_int_equal(r->msg[i].seq, seq);
	assert_int_equal(r->msg[i].len, len);
	assert_int_equal(r->msg[i].whole, whole);
	assert_memory_equal(r->msg[i].data, p, len);
}

/* ---- delivery and the backlog ---- */

static void
test_data_delivered_in_order(void **state)
{
	struct rec r;
	struct inchan *in = chan(&r, 1, 1 << 20, 1 << 20);
	uint8_t m[4][64];
	uint64_t seqs[] = {0, 0, 7, 0}, want[] = {1, 2, 7, 8};
	(void)state;

	for (int i = 0; i < 4; i++) {
		fill(m[i], 10 + (size_t)i, (unsigned)i);
		assert_int_equal(data(in, seqs[i], m[i], 10 + (size_t)i, NULL), 1);
	}
	assert_int_equal(r.n, 4);
	for (int i = 0; i < 4; i++) {
		assert_msg(&r, i, want[i], m[i], 10 + (size_t)i, true);
		assert_false(r.msg[i].heap);
	}
	assert_int_equal(r.nfwd, 0);
	done(in, &r);
}

static void
test_backlog_keeps_order(void **state)
{
	struct rec r;
	struct inchan *in = chan(&r, 1, 1 << 20, 1 << 20);
	uint8_t m[5][100];
	uint64_t bytes = 0, first, consumed;
	(void)state;

	for (int i = 0; i < 5; i++) {
		fill(m[i], sizeof(m[i]), (unsigned)(10 + i));
	}
	assert_int_equal(data(in, 0, m[0], 100, &bytes), 1);
	first = bytes;
	/* the taker is full: frame 2 waits, 3 and 4 queue behind it unseen */
	r.refuse = true;
	assert_int_equal(data(in, 0, m[1], 100, &bytes), 0);
	assert_true(in->stalled);
	assert_int_equal(r.deliver_calls, 2);
	r.refuse = false;
	assert_int_equal(data(in, 0, m[2], 100, &bytes), 0);
	assert_int_equal(data(in, 5, m[3], 100, &bytes), 0);
	assert_int_equal(r.deliver_calls, 2);
	assert_int_equal(r.n, 1);
	/* only what was delivered counts as consumed */
	uint64_t grant;
	assert_true(inchan_ack(in, &grant, &consumed));
	assert_int_equal(consumed, first);

	r.refuse = true;
	assert_int_equal(inchan_retry(in, &lim), 0);
	assert_int_equal(r.n, 1);
	r.refuse = false;
	assert_int_equal(inchan_retry(in, &lim), 1);
	assert_false(in->stalled);
	assert_int_equal(r.n, 4);
	assert_msg(&r, 1, 2, m[1], 100, true);
	assert_msg(&r, 2, 3, m[2], 100, true);
	assert_msg(&r, 3, 5, m[3], 100, true);
	/* and the channel flows again directly */
	assert_int_equal(data(in, 0, m[4], 100, &bytes), 1);
	assert_msg(&r, 4, 6, m[4], 100, true);
	assert_true(inchan_ack(in, &grant, &consumed));
	assert_int_equal(consumed, bytes);
	done(in, &r);
}

/* A message's publish stamp reaches the taker with it: from a data frame,
 * from the first chunk of a chunked one (the later chunks carry none), and
 * from frames that waited in the backlog. */
static void
test_stamps_reach_the_taker(void **state)
{
	struct rec r;
	struct inchan *in = chan(&r, 3, 1 << 20, 1 << 20);
	uint8_t m[300];
	struct wire_frame f;
	size_t hlen;
	(void)state;

	fill(m, sizeof(m), 1);
	f = frame(WIRE_DATA, WIRE_FLAG_STAMP, 3, 0, 0, 50, &hlen);
	f.stamp = 111;
	assert_int_equal(inchan_receive(in, &f, hlen, m, &lim), 1);
	assert_int_equal(data(in, 0, m, 50, NULL), 1); /* no stamp */
	/* the taker is full: a stamped frame and a stamped chunked message wait */
	r.refuse = true;
	f.stamp = 222;
	assert_int_equal(inchan_receive(in, &f, hlen, m, &lim), 0);
	f = frame(WIRE_CHUNK, WIRE_FLAG_FIRST | WIRE_FLAG_STAMP, 3, 0, 300, 100, &hlen);
	f.stamp = 333;
	assert_int_equal(inchan_receive(in, &f, hlen, m, &lim), 0);
	assert_int_equal(chunk(in, 0, 0, 0, m + 100, 100, NULL), 0);
	assert_int_equal(chunk(in, WIRE_FLAG_LAST, 0, 0, m + 200, 100, NULL), 0);
	r.refuse = false;
	assert_int_equal(inchan_retry(in, &lim), 1);
	/* an unstamped chunked message after a stamped one has no stamp */
	assert_int_equal(chunk(in, WIRE_FLAG_FIRST, 0, 200, m, 100, NULL), 1);
	assert_int_equal(chunk(in, WIRE_FLAG_LAST, 0, 0, m + 100, 100, NULL), 1);
	assert_int_equal(r.n, 5);
	assert_true(r.msg[0].stamp == 111 && r.msg[1].stamp == 0 && r.msg[2].stamp == 222);
	assert_msg(&r, 3, 4, m, 300, false);
	assert_true(r.msg[3].stamp == 333);
	assert_true(r.msg[4].stamp == 0);
	done(in, &r);
}

/* ---- chunks ---- */

static void
test_reassembly_across_channels(void **state)
{
	struct rec r[4];
	struct inchan *in[4];
	uint8_t big[3][1000], small[12][20];
	uint64_t bytes[4] = {0};
	int nsmall = 0;
	(void)state;

	for (int c = 0; c < 4; c++) {
		in[c] = chan(&r[c], (uint32_t)c + 1, 1 << 20, 1 << 20);
	}
	for (int c = 0; c < 3; c++) {
		fill(big[c], sizeof(big[c]), (unsigned)(40 + c));
	}
	/* channels 1-3: a message of 1000 bytes each, in chunks of 300, 300,
	 * 300 and 100 taking turns, and between any two chunks a small data
	 * message on channel 4 */
	for (int k = 0; k < 4; k++) {
		for (int c = 0; c < 3; c++) {
			int flags = (k == 0 ? WIRE_FLAG_FIRST : 0) | (k == 3 ? WIRE_FLAG_LAST : 0);
			size_t len = k == 3 ? 100 : 300;
			uint64_t seq = k == 0 ? 10 * ((uint64_t)c + 1) : 0;
			assert_int_equal(
			    chunk(in[c], flags, seq, 1000, big[c] + 300 * k, len, &bytes[c]), 1);
			fill(small[nsmall], 20, (unsigned)(50 + nsmall));
			assert_int_equal(data(in[3], 0, small[nsmall], 20, &bytes[3]), 1);
			nsmall++;
		}
	}
	for (int c = 0; c < 3; c++) {
		uint64_t seq = 10 * ((uint64_t)c + 1);
		assert_int_equal(r[c].n, 1);
		assert_msg(&r[c], 0, seq, big[c], 1000, false);
		assert_true(r[c].msg[0].heap);
		/* every chunk went onward first, numbered by its message */
		assert_int_equal(r[c].nfwd, 4);
		assert_int_equal(r[c].fwd[0].flags, WIRE_FLAG_FIRST | WIRE_FLAG_SEQ);
		assert_int_equal(r[c].fwd[1].flags, 0);
		assert_int_equal(r[c].fwd[3].flags, WIRE_FLAG_LAST);
		for (int k = 0; k < 4; k++) {
			assert_int_equal(r[c].fwd[k].seq, seq);
		}
		assert_int_equal(r[c].nstarted, 1);
		assert_int_equal(r[c].started[0], seq);
	}
	assert_int_equal(r[3].n, 12);
	for (int i = 0; i < 12; i++) {
		assert_msg(&r[3], i, (uint64_t)i + 1, small[i], 20, true);
	}
	for (int c = 0; c < 4; c++) {
		uint64_t grant, consumed;
		assert_true(inchan_ack(in[c], &grant, &consumed));
		assert_int_equal(consumed, bytes[c]);
		done(in[c], &r[c]);
	}
}

/* A chunk goes onward, then into the message; where either must wait, the
 * chunk waits at that stage and is not forwarded twice. */
static void
test_forwarded_then_delivered(void **state)
{
	struct rec r;
	struct inchan *in = chan(&r, 1, 1 << 20, 1 << 20);
	uint8_t m[600], after[10];
	(void)state;

	fill(m, sizeof(m), 60);
	fill(after, sizeof(after), 61);
	r.keep_heap = true;
	/* onward channels are full at the first chunk */
	r.refuse_fwd = true;
	assert_int_equal(chunk(in, WIRE_FLAG_FIRST, 4, 600, m, 300, NULL), 0);
	assert_int_equal(r.forward_calls, 1);
	assert_int_equal(r.nfwd, 0);
	assert_int_equal(r.nstarted, 0);
	r.refuse_fwd = false;
	/* local subscribers are full when the message completes */
	r.refuse = true;
	assert_int_equal(chunk(in, WIRE_FLAG_LAST, 0, 0, m + 300, 300, NULL), 0);
	assert_int_equal(data(in, 0, after, sizeof(after), NULL), 0);
	assert_int_equal(inchan_retry(in, &lim), 0);
	assert_int_equal(r.nfwd, 2); /* both chunks went onward */
	assert_int_equal(r.fwd[0].seq, 4);
	assert_int_equal(r.fwd[1].seq, 4);
	assert_int_equal(r.n, 0);
	int forwards = r.forward_calls;
	assert_int_equal(inchan_retry(in, &lim), 0);
	assert_int_equal(r.forward_calls, forwards); /* kept at its stage */
	r.refuse = false;
	assert_int_equal(inchan_retry(in, &lim), 1);
	assert_int_equal(r.forward_calls, forwards);
	assert_int_equal(r.n, 2);
	assert_msg(&r, 0, 4, m, 600, false);
	assert_true(r.msg[0].heap); /* kept by the taker, freed in done() */
	assert_msg(&r, 1, 5, after, sizeof(after), true);
	assert_int_equal(r.nstarted, 1);
	assert_int_equal(r.started[0], 4);
	done(in, &r);
}

/* Nobody here wanted the message when it began: its middle and end go
 * onward only, without an error, and the next message arrives whole. */
static void
test_subscriber_arrives_mid_message(void **state)
{
	struct rec r;
	struct inchan *in = chan(&r, 1, 1 << 20, 1 << 20);
	uint8_t a[900], b[500];
	(void)state;

	fill(a, sizeof(a), 70);
	fill(b, sizeof(b), 71);
	r.want_whole = false;
	assert_int_equal(chunk(in, WIRE_FLAG_FIRST, 0, 900, a, 300, NULL), 1);
	r.want_whole = true; /* a subscriber appears */
	assert_int_equal(chunk(in, 0, 0, 0, a + 300, 300, NULL), 1);
	assert_int_equal(chunk(in, WIRE_FLAG_LAST, 0, 0, a + 600, 300, NULL), 1);
	assert_int_equal(r.n, 0);
	assert_true(in->whole == NULL || !in->whole->reasm.active);
	assert_int_equal(r.nfwd, 3);
	assert_int_equal(budget, budget_all);

	assert_int_equal(chunk(in, WIRE_FLAG_FIRST, 0, 500, b, 250, NULL), 1);
	assert_int_equal(chunk(in, WIRE_FLAG_LAST, 0, 0, b + 250, 250, NULL), 1);
	assert_int_equal(r.n, 1);
	assert_msg(&r, 0, 2, b, sizeof(b), false);
	done(in, &r);
}

static void
test_duplicate_skipped(void **state)
{
	struct rec r;
	struct inchan *in = chan(&r, 1, 1 << 20, 1 << 20);
	uint8_t m[300], next[40];
	uint64_t bytes = 0, grant, consumed;
	(void)state;

	fill(m, sizeof(m), 80);
	fill(next, sizeof(next), 81);
	r.dup_upto = 7; /* delivered already through another path */
	assert_int_equal(chunk(in, WIRE_FLAG_FIRST, 7, 300, m, 100, &bytes), 1);
	assert_int_equal(chunk(in, 0, 0, 0, m + 100, 100, &bytes), 1);
	assert_int_equal(chunk(in, WIRE_FLAG_LAST, 0, 0, m + 200, 100, &bytes), 1);
	assert_int_equal(r.n, 0);
	assert_int_equal(r.forward_calls, 0);
	assert_int_equal(r.nstarted, 0);
	assert_true(in->whole == NULL || !in->whole->reasm.active);
	/* skipped, yet consumed: the sender's credit comes back */
	assert_true(inchan_ack(in, &grant, &consumed));
	assert_int_equal(consumed, bytes);

	/* the next message (8, numbered from the duplicate) is taken */
	assert_int_equal(chunk(in, WIRE_FLAG_FIRST | WIRE_FLAG_LAST, 0, 40, next, 40, &bytes), 1);
	assert_int_equal(r.n, 1);
	assert_msg(&r, 0, 8, next, sizeof(next), false);
	assert_int_equal(r.nfwd, 1);
	done(in, &r);
}

/* ---- credit ---- */

static void
test_credit_window(void **state)
{
	struct rec r;
	struct inchan *in = chan(&r, 1, 1000, 8000);
	uint8_t m[1000];
	uint64_t bytes = 0, grant, consumed;
	size_t hlen;
	(void)state;

	fill(m, sizeof(m), 90);
	frame(WIRE_DATA, 0, 1, 0, 0, 397, &hlen);
	/* the taker holds everything: 1000 bytes of frames fill the window */
	r.refuse = true;
	assert_int_equal(data(in, 0, m, 400 - hlen, &bytes), 0);
	assert_int_equal(data(in, 0, m, 400 - hlen, &bytes), 0);
	assert_int_equal(data(in, 0, m, 200 - hlen, &bytes), 0);
	assert_int_equal(bytes, 1000);
	assert_false(inchan_ack(in, &grant, &consumed)); /* nothing to report */
	/* one byte more than granted: the peer broke the protocol */
	assert_int_equal(data(in, 0, m, 0, NULL), TERN_EPROTO);

	/* consumed: half the window gone, so it is topped up */
	r.refuse = false;
	assert_int_equal(inchan_retry(in, &lim), 1);
	assert_true(inchan_ack(in, &grant, &consumed));
	assert_int_equal(consumed, 1000);
	/* topped up to a window past 800 consumed, when 200 were outstanding */
	assert_int_equal(grant, 800);
	assert_false(inchan_ack(in, &grant, &consumed)); /* reported once */
	/* the sender may now fill exactly what was granted, not more */
	uint64_t room = in->credit.granted - in->credit.received;
	assert_int_equal(room, 800);
	r.refuse = true;
	assert_int_equal(data(in, 0, m, room - hlen, NULL), 0);
	assert_int_equal(data(in, 0, m, 0, NULL), TERN_EPROTO);
	r.refuse = false;
	assert_int_equal(inchan_retry(in, &lim), 1);
	done(in, &r);
}

/* The link seems to need four times what the channel consumed: it moved all of
 * it within one round trip of a second. */
static void
link_busy(struct inchan *in)
{
	in->rate_t0_us = clock_us() - 1000000;
	in->rate_bytes0 = 0;
}

/* Deliver data frames until at least n bytes more were consumed. */
static void
consume(struct inchan *in, uint64_t n, const uint8_t *m)
{
	uint64_t bytes = 0;

	while (bytes < n) {
		assert_int_equal(data(in, 0, m, 100, &bytes), 1);
	}
}

static void
test_blocked_grows_the_window(void **state)
{
	struct rec r;
	struct inchan *in = chan(&r, 1, 1000, 64000);
	uint8_t m[100];
	uint64_t grant, consumed;
	(void)state;

	fill(m, sizeof(m), 91);
	consume(in, 900, m);
	inchan_ack(in, &grant, &consumed);
	link_busy(in);
	inchan_blocked(in, 1000000, 0);
	assert_int_equal(in->credit.window, 2000);
	assert_true(inchan_ack(in, &grant, &consumed));
	assert_true(grant > 0);
	assert_int_equal(in->credit.granted - in->credit.consumed, 2000);

	/* a round trip measured too short for a larger window: no growth */
	consume(in, in->credit.grow_fence - in->credit.consumed, m);
	link_busy(in); /* timed over a second, not the microseconds this test took */
	inchan_blocked(in, 1, 0);
	assert_int_equal(in->credit.window, 2000);

	/* a receiver holding frames back is not helped by a larger window */
	r.refuse = true;
	assert_int_equal(data(in, 0, m, 100, NULL), 0);
	link_busy(in);
	inchan_blocked(in, 1000000, 0);
	assert_int_equal(in->credit.window, 2000);
	/* once it has caught up, it is */
	r.refuse = false;
	assert_int_equal(inchan_retry(in, &lim), 1);
	link_busy(in);
	inchan_blocked(in, 1000000, 0);
	assert_int_equal(in->credit.window, 4000);
	/* and a floor is jumped to at once, not doubled towards */
	consume(in, in->credit.grow_fence - in->credit.consumed, m);
	link_busy(in);
	inchan_blocked(in, 1000000, 20000);
	assert_int_equal(in->credit.window, 20000);
	done(in, &r);
}

/* A sender can run out of its first window before the receiver has timed a
 * round trip: that report is not lost, it is weighed once the round trip is
 * known. */
static void
test_blocked_before_round_trip(void **state)
{
	struct rec r;
	struct inchan *in = chan(&r, 1, 1000, 64000);
	uint8_t m[100];
	(void)state;

	fill(m, sizeof(m), 93);
	link_busy(in);
	consume(in, 900, m);
	inchan_blocked(in, 0, 0);
	assert_int_equal(in->credit.window, 1000);
	/* the round trip is in: the same report now opens the window */
	inchan_blocked(in, 1000000, 20000);
	assert_int_equal(in->credit.window, 20000);
	done(in, &r);
}

/* A report can arrive before the data it is about (a batch without room
 * is reported at once, ahead of the frames still to come). The sender
 * reports a shortage only once: the report is kept until data has been
 * consumed, then weighed, instead of being spent on nothing. */
static void
test_blocked_before_its_data(void **state)
{
	struct rec r;
	struct inchan *in = chan(&r, 1, 1000, 64000);
	uint8_t m[100];
	(void)state;

	fill(m, sizeof(m), 94);
	inchan_blocked(in, 1000000, 20000);
	assert_int_equal(in->credit.window, 1000);
	assert_true(in->blocked_unweighed);
	/* the data arrives; the connection weighs the kept report at its
	 * next acknowledgement */
	link_busy(in);
	consume(in, 900, m);
	inchan_blocked(in, 1000000, 20000);
	assert_false(in->blocked_unweighed);
	assert_int_equal(in->credit.window, 20000);
	done(in, &r);
}

static void
test_max_message(void **state)
{
	struct rec r;
	struct inchan *in = chan(&r, 1, 1 << 20, 1 << 20);
	uint8_t m[100];
	(void)state;

	fill(m, sizeof(m), 92);
	lim.max_message = 1000;
	assert_int_equal(chunk(in, WIRE_FLAG_FIRST, 0, 1001, m, 100, NULL), TERN_EMSGSIZE);
	assert_int_equal(r.forward_calls, 0);
	assert_int_equal(budget, budget_all);
	/* at the limit: taken */
	assert_int_equal(chunk(in, WIRE_FLAG_FIRST, 0, 1000, m, 100, NULL), 1);
	assert_true(in->whole != NULL && in->whole->reasm.active);
	done(in, &r);

	/* a channel without subscribers refuses it too, also from its backlog */
	in = chan(&r, 2, 1 << 20, 1 << 20);
	r.want_whole = false;
	assert_int_equal(chunk(in, WIRE_FLAG_FIRST, 0, 5000, m, 100, NULL), TERN_EMSGSIZE);
	r.refuse = true;
	assert_int_equal(data(in, 0, m, 10, NULL), 0);
	assert_int_equal(chunk(in, WIRE_FLAG_FIRST, 0, 5000, m, 100, NULL), 0);
	r.refuse = false;
	assert_int_equal(inchan_retry(in, &lim), TERN_EMSGSIZE);
	assert_int_equal(r.forward_calls, 0);
	done(in, &r);
}

#define T(f) cmocka_unit_test_setup(f, setup)

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    T(test_data_delivered_in_order),  T(test_backlog_keeps_order),
	    T(test_stamps_reach_the_taker),   T(test_reassembly_across_channels),
	    T(test_forwarded_then_delivered), T(test_subscriber_arrives_mid_message),
	    T(test_duplicate_skipped),        T(test_credit_window),
	    T(test_blocked_grows_the_window), T(test_blocked_before_round_trip),
	    T(test_blocked_before_its_data),  T(test_max_message),
	};
	return cmocka_run_group_tests_name("inchan", tests, NULL, NULL);
}
