/*
 * outchan_test.c - the sending side of a channel, driven as a connection
 * would drive it but without a socket: frames are queued with outchan_send
 * and outchan_forward, taken as iovecs, decoded with wire_header_decode and
 * settled; acknowledgements come through outchan_on_credit; a broken
 * connection's frames are handed to a fresh channel (directly, and through
 * park.h).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "outchan.h"
#include "park.h"
#include "tern/tern.h"

#define NOW   1000000 /* a clock for outchan_take and friends, in ms */
#define WIRE  (1 << 17)
#define NWIRE 256

/* What the ops saw. Every queued frame is announced before and after it is
 * put in the ring: the ring grows by exactly its length in between. */
struct calls {
	int wake;
	int before, after;
	bool open;
	size_t len, used_before;
	size_t bytes;
};

/* Frames as the peer would read them. */
struct frame {
	struct wire_frame f;
	size_t hlen;
	const uint8_t *payload;
};

struct wire_out {
	uint8_t buf[WIRE];
	size_t len;
	struct frame fr[NWIRE];
	int n;
};

#define FIX_LINKS 16 /* channels a test opens */

struct fix {
	pthread_mutex_t lock;
	struct outchan_budget budget;
	struct calls calls;
	struct wire_out w;
	struct outchan_link links[FIX_LINKS]; /* a channel's own, as its parameters differ */
	int nlinks;
};

static void
on_wake(void *arg)
{
	struct calls *c = arg;

	c->wake++;
}

static void
on_queued(void *owner, struct outchan *oc, size_t len, bool before)
{
	struct calls *c = owner;

	if (before) {
		assert_false(c->open);
		c->open = true;
		c->len = len;
		c->used_before = ring_used(&oc->ring);
		c->before++;
		return;
	}
	assert_true(c->open);
	assert_int_equal(len, c->len);
	assert_int_equal(ring_used(&oc->ring), c->used_before + len);
	c->open = false;
	c->after++;
	c->bytes += len;
}

static const struct outchan_ops ops = {.wake = on_wake, .queued = on_queued};

static int
setup(void **state)
{
	struct fix *x = calloc(1, sizeof(*x));

	assert_non_null(x);
	pthread_mutex_init(&x->lock, NULL);
	atomic_init(&x->budget.used, 0);
	x->budget.max = 1 << 20;
	*state = x;
	return 0;
}

static int
teardown(void **state)
{
	struct fix *x = *state;

	assert_false(x->calls.open);
	assert_int_equal(x->calls.before, x->calls.after);
	assert_int_equal(atomic_load(&x->budget.used), 0);
	pthread_mutex_destroy(&x->lock);
	free(x);
	return 0;
}

static struct outchan *
chan(struct fix *x, uint32_t id, bool reliable, uint32_t frame_max, uint64_t window,
     size_t ring_min)
{
	struct outchan_link *l = &x->links[x->nlinks++];
	struct outchan_params p = {.id = id,
	                           .reliable = reliable,
	                           .link = l,
	                           .ops = &ops,
	                           .arg = &x->calls,
	                           .label = "test/key"};
	struct outchan *oc;

	assert_true(x->nlinks <= FIX_LINKS);
	l->flush_lock = &x->lock;
	l->budget = &x->budget;
	l->owner = &x->calls;
	l->frame_max = frame_max > 0 ? frame_max : 1;
	l->peer_window = window;
	l->ring_min = ring_min;
	assert_int_equal(outchan_new(&oc, &p), 0);
	return oc;
}

static void
fill(uint8_t *p, size_t len, unsigned seed)
{
	for (size_t i = 0; i < len; i++) {
		p[i] = (uint8_t)(seed * 131 + i * 7 + (i >> 8));
	}
}

/* The length of a frame as this node encodes it. */
static size_t
flen(int type, int flags, uint64_t ch, uint64_t seq, uint64_t total, uint64_t len)
{
	struct wire_frame f = {
	    .type = type, .flags = flags, .channel = ch, .seq = seq, .total = total, .len = len};
	uint8_t hdr[WIRE_HDR_MAX];

	return wire_header_encode(hdr, &f) + (size_t)len;
}

/* Decode every whole frame in w->buf. */
static void
parse(struct wire_out *w)
{
	size_t off = 0;

	w->n = 0;
	while (off < w->len) {
		struct frame *fr = &w->fr[w->n];
		assert_true(w->n < NWIRE);
		assert_int_equal(
		    wire_header_decode(w->buf + off, w->len - off, UINT64_MAX, &fr->f, &fr->hlen),
		    1);
		assert_true(fr->f.len <= w->len - off - fr->hlen);
		fr->payload = w->buf + off + fr->hlen;
		off += fr->hlen + (size_t)fr->f.len;
		w->n++;
	}
}

static void
append_iov(struct wire_out *w, const struct iovec *iov, int niov)
{
	for (int i = 0; i < niov; i++) {
		assert_true(iov[i].iov_len <= WIRE - w->len);
		memcpy(w->buf + w->len, iov[i].iov_base, iov[i].iov_len);
		w->len += iov[i].iov_len;
	}
}

/* One write that the socket takes whole: returns the bytes taken. */
static size_t
write_all(struct outchan *oc, struct wire_out *w, size_t limit)
{
	struct iovec iov[2];
	int niov;
	size_t taken;

	pthread_mutex_lock(oc->link->flush_lock);
	taken = outchan_take(oc, 0, limit, limit, iov, &niov, NOW);
	append_iov(w, iov, niov);
	assert_int_equal(outchan_cut_end(oc, taken, taken), taken);
	outchan_settle(oc, taken, taken, taken > 0, NOW);
	pthread_mutex_unlock(oc->link->flush_lock);
	parse(w);
	return taken;
}

static void
reset(struct wire_out *w)
{
	w->len = 0;
	w->n = 0;
}

static void
assert_frame(const struct frame *fr, int type, int flags, uint64_t ch, uint64_t len)
{
	assert_int_equal(fr->f.type, type);
	assert_int_equal(fr->f.flags, flags);
	assert_int_equal(fr->f.channel, ch);
	assert_int_equal(fr->f.len, len);
}

/* ---- framing ---- */

static void
test_data_frames_numbered_at_jumps(void **state)
{
	struct fix *x = *state;
	struct outchan *oc = chan(x, 3, false, 1000, 1 << 20, 4096);
	uint8_t m[4][100];
	uint64_t seqs[] = {1, 2, 5, 6};
	size_t lens[] = {10, 100, 0, 37};

	for (int i = 0; i < 4; i++) {
		fill(m[i], lens[i], (unsigned)i);
		assert_int_equal(outchan_send(oc, seqs[i], m[i], lens[i], false, NULL), 0);
	}
	assert_int_equal(x->calls.before, 4);
	assert_int_equal(x->calls.after, 4);
	assert_int_equal(ring_used(&oc->ring), x->calls.bytes);
	assert_int_equal(outchan_unsent(oc), x->calls.bytes);
	assert_int_equal(atomic_load(&oc->messages), 4);

	size_t taken = write_all(oc, &x->w, 1 << 20);
	assert_int_equal(taken, x->calls.bytes);
	assert_int_equal(x->w.n, 4);
	/* SEQ only where the number does not follow the last one */
	assert_frame(&x->w.fr[0], WIRE_DATA, 0, 3, 10);
	assert_frame(&x->w.fr[1], WIRE_DATA, 0, 3, 100);
	assert_frame(&x->w.fr[2], WIRE_DATA, WIRE_FLAG_SEQ, 3, 0);
	assert_int_equal(x->w.fr[2].f.seq, 5);
	assert_frame(&x->w.fr[3], WIRE_DATA, 0, 3, 37);
	for (int i = 0; i < 4; i++) {
		assert_memory_equal(x->w.fr[i].payload, m[i], lens[i]);
	}
	/* the credit the socket used is gone; a best-effort ring is empty */
	assert_int_equal(atomic_load(&oc->credit), (1 << 20) - (int64_t)taken);
	assert_int_equal(ring_used(&oc->ring), 0);
	outchan_free(oc);

	/* a channel's first message is numbered when it is not 1 */
	oc = chan(x, 4, false, 1000, 1 << 20, 4096);
	reset(&x->w);
	assert_int_equal(outchan_send(oc, 42, m[0], 10, false, NULL), 0);
	write_all(oc, &x->w, 1 << 20);
	assert_int_equal(x->w.n, 1);
	assert_frame(&x->w.fr[0], WIRE_DATA, WIRE_FLAG_SEQ, 4, 10);
	assert_int_equal(x->w.fr[0].f.seq, 42);
	outchan_free(oc);
}

static void
test_chunked_message(void **state)
{
	struct fix *x = *state;
	struct outchan *oc = chan(x, 7, false, 100, 1 << 20, 4096);
	uint8_t big[350], two[200], one[100], got[350];
	size_t got_len = 0;

	fill(big, sizeof(big), 1);
	fill(two, sizeof(two), 2);
	fill(one, sizeof(one), 3);
	assert_int_equal(outchan_send(oc, 3, big, sizeof(big), false, NULL), 0);
	assert_int_equal(outchan_send(oc, 4, one, sizeof(one), false, NULL), 0);
	assert_int_equal(outchan_send(oc, 5, two, sizeof(two), false, NULL), 0);
	assert_int_equal(x->calls.before, 4 + 1 + 2);
	write_all(oc, &x->w, 1 << 20);
	assert_int_equal(x->w.n, 7);

	/* 350 bytes: 100, 100, 100, 50; numbered on the first chunk only */
	assert_frame(&x->w.fr[0], WIRE_CHUNK, WIRE_FLAG_FIRST | WIRE_FLAG_SEQ, 7, 100);
	assert_int_equal(x->w.fr[0].f.seq, 3);
	assert_int_equal(x->w.fr[0].f.total, 350);
	assert_frame(&x->w.fr[1], WIRE_CHUNK, 0, 7, 100);
	assert_frame(&x->w.fr[2], WIRE_CHUNK, 0, 7, 100);
	assert_frame(&x->w.fr[3], WIRE_CHUNK, WIRE_FLAG_LAST, 7, 50);
	for (int i = 0; i < 4; i++) {
		memcpy(got + got_len, x->w.fr[i].payload, x->w.fr[i].f.len);
		got_len += x->w.fr[i].f.len;
	}
	assert_int_equal(got_len, sizeof(big));
	assert_memory_equal(got, big, sizeof(big));

	/* exactly frame_max: one data frame; the next number follows */
	assert_frame(&x->w.fr[4], WIRE_DATA, 0, 7, 100);
	assert_memory_equal(x->w.fr[4].payload, one, sizeof(one));

	/* twice frame_max: FIRST and LAST, nothing else */
	assert_frame(&x->w.fr[5], WIRE_CHUNK, WIRE_FLAG_FIRST, 7, 100);
	assert_int_equal(x->w.fr[5].f.total, 200);
	assert_frame(&x->w.fr[6], WIRE_CHUNK, WIRE_FLAG_LAST, 7, 100);
	assert_memory_equal(x->w.fr[5].payload, two, 100);
	assert_memory_equal(x->w.fr[6].payload, two + 100, 100);
	assert_int_equal(atomic_load(&oc->messages), 3);
	assert_int_equal(atomic_load(&oc->bytes), 650);
	outchan_free(oc);
}

/* ---- taking frames: credit, limits, a socket that takes part ---- */

static void
test_take_within_credit_and_limit(void **state)
{
	struct fix *x = *state;
	size_t f100 = flen(WIRE_DATA, 0, 1, 0, 0, 100);
	struct outchan *oc = chan(x, 1, false, 1000, 2 * f100 + f100 / 2, 4096);
	uint8_t m[100];
	struct iovec iov[2];
	int niov;

	fill(m, sizeof(m), 9);
	for (uint64_t s = 1; s <= 3; s++) {
		assert_int_equal(outchan_send(oc, s, m, sizeof(m), false, NULL), 0);
	}
	/* a limit below one frame still takes one frame that fits the room */
	assert_int_equal(outchan_take(oc, 0, 10, f100, iov, &niov, NOW), f100);
	assert_int_equal(niov, 1);
	outchan_settle(oc, f100, 0, false, NOW); /* the socket took nothing */
	/* a batch without room for the next frame is reported too: a channel
	 * that fills whole batches tells its receiver early */
	assert_int_equal(outchan_take(oc, 0, 10, f100 - 1, iov, &niov, NOW), 0);
	assert_true(oc->want_blocked);
	oc->want_blocked = false;
	assert_int_equal(atomic_load(&oc->credit), 2 * f100 + f100 / 2);
	assert_int_equal(outchan_unsent(oc), 3 * f100);

	/* whole frames only, within the credit: two and a half frames of
	 * credit let two through, and the frame left behind wants a BLOCKED
	 * report at once (a publisher waiting for room may not try again) */
	assert_int_equal(write_all(oc, &x->w, 1 << 20), 2 * f100);
	assert_int_equal(x->w.n, 2);
	assert_int_equal(atomic_load(&oc->credit), f100 / 2);
	assert_true(oc->want_blocked);

	/* out of credit: nothing, and a BLOCKED report is wanted */
	oc->want_blocked = false;
	assert_int_equal(outchan_take(oc, 0, 1 << 20, 1 << 20, iov, &niov, NOW), 0);
	assert_int_equal(niov, 0);
	assert_true(oc->want_blocked);
	assert_int_equal(atomic_load(&oc->starved_since_ms), NOW);

	/* a report of use without new credit does not end the shortage: no
	 * second BLOCKED for it */
	atomic_store(&oc->blocked_sent, true);
	outchan_on_credit(oc, 0, 0, NOW);
	assert_true(atomic_load(&oc->blocked_sent));
	/* the grant lets the waiting frame through */
	int wakes = x->calls.wake;
	assert_true(outchan_on_credit(oc, f100, 0, NOW + 1));
	assert_int_equal(x->calls.wake, wakes + 1);
	assert_int_equal(atomic_load(&oc->starved_since_ms), 0);
	reset(&x->w);
	assert_int_equal(write_all(oc, &x->w, 1 << 20), f100);
	assert_int_equal(x->w.n, 1);
	assert_memory_equal(x->w.fr[0].payload, m, sizeof(m));
	assert_false(outchan_on_credit(oc, 0, 0, NOW + 2)); /* nothing waits */
	outchan_free(oc);
}

static void
test_socket_cuts_a_frame(void **state)
{
	struct fix *x = *state;
	size_t f100 = flen(WIRE_DATA, 0, 1, 0, 0, 100);
	uint8_t m[3][100], taken_copy[512], cut[512];
	struct iovec iov[2];
	int niov;

	for (int reliable = 0; reliable <= 1; reliable++) {
		struct outchan *oc = chan(x, 1, reliable, 1000, 1 << 20, 4096);
		struct wire_out *w = &x->w;

		reset(w);
		for (int i = 0; i < 3; i++) {
			fill(m[i], 100, (unsigned)(10 + i));
			assert_int_equal(outchan_send(oc, (uint64_t)i + 1, m[i], 100, false, NULL),
			                 0);
		}
		size_t taken = outchan_take(oc, 0, 1 << 20, 1 << 20, iov, &niov, NOW);
		assert_int_equal(taken, 3 * f100);
		append_iov(w, iov, niov);
		memcpy(taken_copy, w->buf, taken);

		/* the socket takes the first frame and half the second: the
		 * second must be finished, the third stays queued */
		size_t written = f100 + 50;
		size_t end = outchan_cut_end(oc, taken, written);
		assert_int_equal(end, 2 * f100);
		outchan_copy_cut(oc, written, cut, end - written);
		assert_memory_equal(cut, taken_copy + written, end - written);
		/* a write that ends on a frame boundary would cut nothing */
		assert_int_equal(outchan_cut_end(oc, taken, f100), f100);
		outchan_settle(oc, taken, end, true, NOW);
		assert_int_equal(atomic_load(&oc->credit), (1 << 20) - (int64_t)end);
		assert_int_equal(outchan_unsent(oc), f100);
		assert_int_equal(ring_used(&oc->ring), reliable ? 3 * f100 : f100);

		/* the rest comes next, whole */
		reset(w);
		assert_int_equal(write_all(oc, w, 1 << 20), f100);
		assert_int_equal(w->n, 1);
		assert_memory_equal(w->fr[0].payload, m[2], 100);

		/* a socket that takes nothing: everything stays, credit comes back */
		assert_int_equal(outchan_send(oc, 4, m[0], 100, false, NULL), 0);
		taken = outchan_take(oc, 0, 1 << 20, 1 << 20, iov, &niov, NOW);
		assert_int_equal(taken, f100);
		int64_t credit = atomic_load(&oc->credit);
		assert_int_equal(outchan_cut_end(oc, taken, 0), 0);
		outchan_settle(oc, taken, 0, false, NOW);
		assert_int_equal(atomic_load(&oc->credit), credit + (int64_t)f100);
		assert_int_equal(outchan_unsent(oc), f100);
		outchan_free(oc);
	}
}

/* ---- retention ---- */

static void
test_reliable_keeps_until_consumed(void **state)
{
	struct fix *x = *state;
	struct outchan *oc = chan(x, 2, true, 1000, 1 << 20, 4096);
	size_t lens[] = {10, 200, 0, 150, 90}, fl[5], total = 0;
	uint8_t m[200];

	fill(m, sizeof(m), 4);
	for (int i = 0; i < 5; i++) {
		assert_int_equal(outchan_send(oc, (uint64_t)i + 1, m, lens[i], false, NULL), 0);
		fl[i] = flen(WIRE_DATA, 0, 2, 0, 0, lens[i]);
		total += fl[i];
	}
	int wakes = x->calls.wake;
	assert_int_equal(write_all(oc, &x->w, 1 << 20), total);
	/* written, not yet consumed: kept, and settling wakes nobody (room
	 * comes from the acknowledgement) */
	assert_int_equal(ring_used(&oc->ring), total);
	assert_int_equal(atomic_load(&oc->sent), total);
	assert_int_equal(outchan_unsent(oc), 0);
	assert_int_equal(x->calls.wake, wakes);

	/* consumed: the first two frames leave, exactly */
	assert_false(outchan_on_credit(oc, 0, fl[0] + fl[1], NOW));
	assert_int_equal(x->calls.wake, wakes + 1);
	assert_int_equal(ring_used(&oc->ring), total - fl[0] - fl[1]);
	assert_int_equal(atomic_load(&oc->sent), total - fl[0] - fl[1]);
	/* the same report again releases nothing */
	outchan_on_credit(oc, 0, fl[0] + fl[1], NOW);
	assert_int_equal(ring_used(&oc->ring), total - fl[0] - fl[1]);
	/* what stays starts on a frame boundary: the third frame */
	uint8_t hdr[WIRE_HDR_MAX];
	struct wire_frame f;
	size_t hlen;
	ring_peek(&oc->ring, 0, hdr, sizeof(hdr));
	assert_int_equal(wire_header_decode(hdr, sizeof(hdr), UINT64_MAX, &f, &hlen), 1);
	assert_int_equal(f.len, lens[2]);

	outchan_on_credit(oc, 0, fl[0] + fl[1] + fl[2] + fl[3], NOW);
	assert_int_equal(ring_used(&oc->ring), fl[4]);
	outchan_on_credit(oc, 0, total, NOW);
	assert_int_equal(ring_used(&oc->ring), 0);
	assert_int_equal(atomic_load(&oc->sent), 0);
	outchan_free(oc);
}

static void
test_best_effort_drops_on_settle(void **state)
{
	struct fix *x = *state;
	struct outchan *oc = chan(x, 2, false, 1000, 1 << 20, 4096);
	uint8_t m[64];

	fill(m, sizeof(m), 5);
	for (uint64_t s = 1; s <= 5; s++) {
		assert_int_equal(outchan_send(oc, s, m, sizeof(m), false, NULL), 0);
	}
	int wakes = x->calls.wake;
	write_all(oc, &x->w, 1 << 20);
	assert_int_equal(x->w.n, 5);
	assert_int_equal(ring_used(&oc->ring), 0);
	assert_int_equal(atomic_load(&oc->sent), 0);
	assert_int_equal(x->calls.wake, wakes + 1); /* room opened */
	/* an acknowledgement has nothing to release */
	outchan_on_credit(oc, 0, 5 * flen(WIRE_DATA, 0, 2, 0, 0, 64), NOW);
	assert_int_equal(ring_used(&oc->ring), 0);
	outchan_free(oc);
}

/* ---- without room ---- */

struct waiter {
	struct fix *x;
	struct outchan *oc;
	int calls;
	bool give;
};

/* A producer's wait: the 'socket' drains the ring, or the wait gives up. */
static bool
wait_room(void *ctx, struct outchan *oc, size_t len)
{
	struct waiter *wt = ctx;
	struct iovec iov[2];
	int niov;

	wt->calls++;
	if (!wt->give) {
		return false;
	}
	pthread_mutex_lock(oc->link->flush_lock);
	size_t taken = outchan_take(oc, 0, 1 << 20, 1 << 20, iov, &niov, NOW);
	append_iov(&wt->x->w, iov, niov);
	outchan_settle(oc, taken, taken, true, NOW);
	pthread_mutex_unlock(oc->link->flush_lock);
	return outchan_has_room(oc, len);
}

static void
test_send_without_room(void **state)
{
	struct fix *x = *state;
	struct outchan *oc = chan(x, 5, false, 4096, 1 << 20, 4096);
	struct waiter wt = {.x = x, .oc = oc};
	struct outchan_wait w = {.room = wait_room, .ctx = &wt};
	uint8_t m[3000];

	fill(m, sizeof(m), 6);
	assert_int_equal(outchan_send(oc, 1, m, sizeof(m), false, NULL), 0);
	/* no room, no waiting: dropped */
	assert_int_equal(outchan_send(oc, 2, m, sizeof(m), false, &w), TERN_EAGAIN);
	assert_int_equal(wt.calls, 0);
	assert_int_equal(atomic_load(&oc->dropped), 1);
	/* a wait that gives up */
	assert_int_equal(outchan_send(oc, 2, m, sizeof(m), true, &w), TERN_ETIMEDOUT);
	assert_int_equal(wt.calls, 1);
	assert_int_equal(atomic_load(&oc->dropped), 2);
	/* a wait that finds room: the number after the dropped one is explicit */
	wt.give = true;
	assert_int_equal(outchan_send(oc, 4, m, sizeof(m), true, &w), 0);
	write_all(oc, &x->w, 1 << 20);
	assert_int_equal(x->w.n, 2);
	assert_frame(&x->w.fr[0], WIRE_DATA, 0, 5, sizeof(m));
	assert_frame(&x->w.fr[1], WIRE_DATA, WIRE_FLAG_SEQ, 5, sizeof(m));
	assert_int_equal(x->w.fr[1].f.seq, 4);

	/* a broken channel refuses, and wakes whoever waits */
	assert_int_equal(outchan_send(oc, 5, m, sizeof(m), false, NULL), 0);
	int wakes = x->calls.wake;
	outchan_break(oc, OUTCHAN_LOST);
	assert_int_equal(x->calls.wake, wakes + 1);
	wt.give = false;
	assert_int_equal(outchan_send(oc, 6, m, sizeof(m), true, &w), TERN_ECLOSED);
	assert_int_equal(outchan_send(oc, 6, m, sizeof(m), false, NULL), TERN_ECLOSED);
	assert_int_equal(atomic_load(&oc->dropped), 2);
	outchan_free(oc);
}

/* A chunked message once started is finished, through the wait, even by a
 * producer that would not wait for its first chunk. */
static void
test_chunked_message_finished_once_started(void **state)
{
	struct fix *x = *state;
	struct outchan *oc = chan(x, 6, false, 1000, 1 << 20, 4096);
	struct waiter wt = {.x = x, .oc = oc, .give = true};
	struct outchan_wait w = {.room = wait_room, .ctx = &wt};
	uint8_t pad[1800], m[3000];

	fill(pad, sizeof(pad), 7);
	fill(m, sizeof(m), 8);
	/* 1800 bytes queued: room for about two chunks of 1000 */
	assert_int_equal(outchan_send(oc, 1, pad, sizeof(pad), false, NULL), 0);
	assert_int_equal(outchan_send(oc, 2, m, sizeof(m), false, &w), 0);
	assert_true(wt.calls > 0);
	write_all(oc, &x->w, 1 << 20);
	/* pad (2 chunks), then the message's 3 chunks, in order */
	assert_int_equal(x->w.n, 5);
	assert_int_equal(x->w.fr[2].f.flags, WIRE_FLAG_FIRST);
	assert_int_equal(x->w.fr[3].f.flags, 0);
	assert_int_equal(x->w.fr[4].f.flags, WIRE_FLAG_LAST);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(x->w.fr[2 + i].f.len, 1000);
		assert_memory_equal(x->w.fr[2 + i].payload, m + 1000 * i, 1000);
	}
	assert_int_equal(atomic_load(&oc->dropped), 0);
	outchan_free(oc);
}

/* ---- resend after a broken connection ---- */

/*
 * A reliable channel 1 with frame_max 100 that wrote: data 1 (50), a
 * message 2 of 250 bytes in chunks of 100, 100 and 50, data 3 (30) and
 * data 4 (40). Returns the frame lengths in fl[6].
 */
static struct outchan *
written_channel(struct fix *x, uint8_t m[4][250], size_t fl[6])
{
	struct outchan *oc = chan(x, 1, true, 100, 1 << 20, 4096);
	size_t lens[] = {50, 250, 30, 40};

	for (int i = 0; i < 4; i++) {
		fill(m[i], lens[i], (unsigned)(20 + i));
		assert_int_equal(outchan_send(oc, (uint64_t)i + 1, m[i], lens[i], false, NULL), 0);
	}
	reset(&x->w);
	write_all(oc, &x->w, 1 << 20);
	assert_int_equal(x->w.n, 6);
	for (int i = 0; i < 6; i++) {
		fl[i] = x->w.fr[i].hlen + (size_t)x->w.fr[i].f.len;
	}
	return oc;
}

static void
test_resume_from_the_middle_of_a_message(void **state)
{
	struct fix *x = *state;
	uint8_t m[4][250];
	size_t fl[6];
	struct outchan *oc = written_channel(x, m, fl);
	struct ring kept;
	uint64_t head_seq;
	bool head_mid;

	/* the peer consumed data 1 and the first chunk of message 2 */
	outchan_on_credit(oc, 0, fl[0] + fl[1], NOW);
	outchan_break(oc, OUTCHAN_LOST);
	outchan_take_kept(oc, &kept, &head_seq, &head_mid);
	assert_true(head_mid);
	assert_int_equal(head_seq, 2);
	assert_int_equal(ring_used(&kept), fl[2] + fl[3] + fl[4] + fl[5]);
	assert_int_equal(ring_used(&oc->ring), 0);
	outchan_free(oc);

	/* a new connection: channel 9; the rest of message 2 is skipped */
	struct outchan *oc2 = chan(x, 9, true, 100, 1 << 20, 4096);
	assert_int_equal(outchan_resume(oc2, &kept, head_seq, head_mid), 2);
	ring_free(&kept);
	reset(&x->w);
	write_all(oc2, &x->w, 1 << 20);
	assert_int_equal(x->w.n, 2);
	assert_frame(&x->w.fr[0], WIRE_DATA, WIRE_FLAG_SEQ, 9, 30);
	assert_int_equal(x->w.fr[0].f.seq, 3);
	assert_memory_equal(x->w.fr[0].payload, m[2], 30);
	assert_frame(&x->w.fr[1], WIRE_DATA, 0, 9, 40);
	assert_memory_equal(x->w.fr[1].payload, m[3], 40);
	/* the numbering goes on from there */
	assert_int_equal(outchan_send(oc2, 5, m[0], 50, false, NULL), 0);
	reset(&x->w);
	write_all(oc2, &x->w, 1 << 20);
	assert_frame(&x->w.fr[0], WIRE_DATA, 0, 9, 50);
	outchan_free(oc2);
}

static void
test_resume_from_a_message_start(void **state)
{
	struct fix *x = *state;
	uint8_t m[4][250], got[250];
	size_t fl[6];
	struct outchan *oc = written_channel(x, m, fl);
	struct ring kept;
	uint64_t head_seq;
	bool head_mid;

	outchan_on_credit(oc, 0, fl[0], NOW);
	outchan_take_kept(oc, &kept, &head_seq, &head_mid);
	assert_false(head_mid);
	assert_int_equal(head_seq, 2);
	outchan_free(oc);

	struct outchan *oc2 = chan(x, 300, true, 100, 1 << 20, 4096);
	assert_int_equal(outchan_resume(oc2, &kept, head_seq, head_mid), 3);
	ring_free(&kept);
	reset(&x->w);
	write_all(oc2, &x->w, 1 << 20);
	assert_int_equal(x->w.n, 5);
	assert_frame(&x->w.fr[0], WIRE_CHUNK, WIRE_FLAG_FIRST | WIRE_FLAG_SEQ, 300, 100);
	assert_int_equal(x->w.fr[0].f.seq, 2);
	assert_int_equal(x->w.fr[0].f.total, 250);
	assert_frame(&x->w.fr[1], WIRE_CHUNK, 0, 300, 100);
	assert_frame(&x->w.fr[2], WIRE_CHUNK, WIRE_FLAG_LAST, 300, 50);
	for (int i = 0; i < 3; i++) {
		memcpy(got + 100 * i, x->w.fr[i].payload, x->w.fr[i].f.len);
	}
	assert_memory_equal(got, m[1], 250);
	assert_frame(&x->w.fr[3], WIRE_DATA, 0, 300, 30);
	assert_frame(&x->w.fr[4], WIRE_DATA, 0, 300, 40);
	assert_memory_equal(x->w.fr[4].payload, m[3], 40);
	outchan_free(oc2);
}

/* Kept frames that carry their own numbers keep them; the ones between
 * are counted from there. */
static void
test_resume_keeps_explicit_numbers(void **state)
{
	struct fix *x = *state;
	struct outchan *oc = chan(x, 1, true, 1000, 1 << 20, 4096);
	uint64_t seqs[] = {10, 11, 12, 20, 21};
	uint8_t m[5][16];
	struct ring kept;
	uint64_t head_seq;
	bool head_mid;

	for (int i = 0; i < 5; i++) {
		fill(m[i], 16, (unsigned)(30 + i));
		assert_int_equal(outchan_send(oc, seqs[i], m[i], 16, false, NULL), 0);
	}
	write_all(oc, &x->w, 1 << 20);
	outchan_take_kept(oc, &kept, &head_seq, &head_mid);
	assert_false(head_mid);
	assert_int_equal(head_seq, 10);
	outchan_free(oc);

	struct outchan *oc2 = chan(x, 2, true, 1000, 1 << 20, 4096);
	assert_int_equal(outchan_resume(oc2, &kept, head_seq, head_mid), 5);
	ring_free(&kept);
	reset(&x->w);
	write_all(oc2, &x->w, 1 << 20);
	assert_int_equal(x->w.n, 5);
	int want_flags[] = {WIRE_FLAG_SEQ, 0, 0, WIRE_FLAG_SEQ, 0};
	for (int i = 0; i < 5; i++) {
		assert_frame(&x->w.fr[i], WIRE_DATA, want_flags[i], 2, 16);
		assert_memory_equal(x->w.fr[i].payload, m[i], 16);
	}
	assert_int_equal(x->w.fr[0].f.seq, 10);
	assert_int_equal(x->w.fr[3].f.seq, 20);
	assert_int_equal(oc2->last_seq, 21);
	outchan_free(oc2);
}

/*
 * Frames kept before the first explicitly numbered one keep their numbers:
 * an explicit number marks a gap, so they are not counted back from it.
 * Kept [11, 12, 20 (explicit)] resume as 11, 12, 20, not 18, 19, 20 (the
 * peer, which may have delivered 11 and 12 already, would take them again).
 */
static void
test_take_kept_numbers_before_a_jump(void **state)
{
	struct fix *x = *state;
	struct outchan *oc;
	uint64_t seqs[] = {10, 11, 12, 20};
	uint8_t m[16];
	struct ring kept;
	uint64_t head_seq;
	bool head_mid;

	oc = chan(x, 1, true, 1000, 1 << 20, 4096);
	fill(m, sizeof(m), 40);
	for (int i = 0; i < 4; i++) {
		assert_int_equal(outchan_send(oc, seqs[i], m, sizeof(m), false, NULL), 0);
	}
	write_all(oc, &x->w, 1 << 20);
	/* the peer consumed message 10 */
	outchan_on_credit(oc, 0, x->w.fr[0].hlen + x->w.fr[0].f.len, NOW);
	outchan_take_kept(oc, &kept, &head_seq, &head_mid);
	outchan_free(oc);

	struct outchan *oc2 = chan(x, 2, true, 1000, 1 << 20, 4096);
	outchan_resume(oc2, &kept, head_seq, head_mid);
	ring_free(&kept);
	reset(&x->w);
	write_all(oc2, &x->w, 1 << 20);
	outchan_free(oc2);
	assert_int_equal(x->w.n, 3);
	assert_int_equal(x->w.fr[0].f.flags, WIRE_FLAG_SEQ);
	assert_int_equal(x->w.fr[0].f.seq, 11); /* 18 today */
	assert_int_equal(head_seq, 11);
}

static void
test_park_keep_append_resume(void **state)
{
	struct fix *x = *state;
	uint8_t m[4][250], late[20], other[20];
	size_t fl[6];
	struct outchan *oc = written_channel(x, m, fl);
	struct parked *list = NULL;
	uint64_t dropped = 99;

	outchan_on_credit(oc, 0, fl[0] + fl[1], NOW); /* ring starts inside message 2 */
	outchan_break(oc, OUTCHAN_LOST);
	assert_int_equal(park_keep(&list, "peer-a", oc, NOW + 5000, false),
	                 fl[2] + fl[3] + fl[4] + fl[5]);
	outchan_free(oc);
	assert_non_null(list);
	assert_true(list->head_mid);
	assert_int_equal(list->head_seq, 2);

	/* publications while the peer is away: 5 for everyone, 6 for another
	 * peer, one too large to keep */
	fill(late, sizeof(late), 50);
	fill(other, sizeof(other), 51);
	assert_true(park_room(list, sizeof(late), 1 << 20));
	park_append(list, NULL, 5, late, sizeof(late));
	park_append(list, "peer-b", 6, other, sizeof(other));
	uint8_t *huge = calloc(1, 65537);
	assert_non_null(huge);
	park_append(list, NULL, 7, huge, 65537);
	free(huge);
	assert_int_equal(list->dropped, 1);

	struct outchan *oc2 = chan(x, 4, true, 100, 1 << 20, 4096);
	assert_int_equal(park_resume(&list, "peer-b", oc2, &dropped), -1);
	assert_int_equal(park_resume(&list, "peer-a", oc2, &dropped), 3);
	assert_null(list);
	assert_int_equal(dropped, 1);
	reset(&x->w);
	write_all(oc2, &x->w, 1 << 20);
	assert_int_equal(x->w.n, 3);
	assert_frame(&x->w.fr[0], WIRE_DATA, WIRE_FLAG_SEQ, 4, 30);
	assert_int_equal(x->w.fr[0].f.seq, 3);
	assert_memory_equal(x->w.fr[0].payload, m[2], 30);
	assert_frame(&x->w.fr[1], WIRE_DATA, 0, 4, 40);
	assert_frame(&x->w.fr[2], WIRE_DATA, 0, 4, sizeof(late));
	assert_memory_equal(x->w.fr[2].payload, late, sizeof(late));
	outchan_free(oc2);
}

/*
 * park_append keeps a publication of up to 64 KiB as one data frame,
 * whatever the peer's frame size (chunk_bytes may be as low as 256): on
 * resume it is cut into chunks of this channel's frame size, and nothing
 * after it is lost.
 */
static void
test_park_resume_frame_above_frame_max(void **state)
{
	struct fix *x = *state;
	struct outchan *oc;
	struct parked *list = NULL;
	uint8_t small[16], big[1000];
	uint64_t dropped = 0;

	oc = chan(x, 1, true, 256, 1 << 20, 4096);
	fill(small, sizeof(small), 60);
	fill(big, sizeof(big), 61);
	assert_int_equal(outchan_send(oc, 1, small, sizeof(small), false, NULL), 0);
	write_all(oc, &x->w, 1 << 20);
	assert_true(park_keep(&list, "peer-a", oc, NOW + 5000, false) > 0);
	outchan_free(oc);
	park_append(list, NULL, 2, big, sizeof(big));
	park_append(list, NULL, 3, small, sizeof(small));

	struct outchan *oc2 = chan(x, 1, true, 256, 1 << 20, 4096);
	int resent = park_resume(&list, "peer-a", oc2, &dropped);
	reset(&x->w);
	write_all(oc2, &x->w, 1 << 20);
	outchan_free(oc2);
	/* every message is sent again or counted as dropped ... */
	assert_int_equal((uint64_t)resent + dropped, 3);
	/* ... no frame exceeds what the peer accepts, and message 3 arrives */
	for (int i = 0; i < x->w.n; i++) {
		assert_true(x->w.fr[i].f.len <= 256);
	}
	assert_true(x->w.n >= 2);
	assert_int_equal(x->w.fr[x->w.n - 1].f.len, sizeof(small));
}

/* ---- forwarding ---- */

static struct wire_frame
chunk(int flags, uint64_t total, uint64_t len)
{
	struct wire_frame f = {
	    .type = WIRE_CHUNK, .flags = flags, .channel = 77, .total = total, .len = len};
	return f;
}

static void
test_forward_cuts_to_frame_max(void **state)
{
	struct fix *x = *state;
	struct outchan *oc = chan(x, 8, false, 100, 1 << 20, 4096);
	uint8_t m[500], got[500];
	size_t got_len = 0;
	struct wire_frame f;

	fill(m, sizeof(m), 70);
	/* a message of 500 arriving in chunks of 250, 150 and 100 */
	f = chunk(WIRE_FLAG_FIRST, 500, 250);
	assert_true(outchan_forward(oc, &f, 1, m, false));
	assert_true(oc->fwd_open);
	f = chunk(0, 0, 150);
	assert_true(outchan_forward(oc, &f, 1, m + 250, false));
	f = chunk(WIRE_FLAG_LAST, 0, 100);
	assert_true(outchan_forward(oc, &f, 1, m + 400, false));
	assert_false(oc->fwd_open);
	/* a one-chunk message of 250 with a jump in numbers */
	f = chunk(WIRE_FLAG_FIRST | WIRE_FLAG_LAST | WIRE_FLAG_SEQ, 250, 250);
	f.seq = 5;
	assert_true(outchan_forward(oc, &f, 5, m, false));
	assert_int_equal(atomic_load(&oc->messages), 2);

	write_all(oc, &x->w, 1 << 20);
	assert_int_equal(x->w.n, 3 + 2 + 1 + 3);
	assert_frame(&x->w.fr[0], WIRE_CHUNK, WIRE_FLAG_FIRST, 8, 100);
	assert_int_equal(x->w.fr[0].f.total, 500);
	assert_frame(&x->w.fr[1], WIRE_CHUNK, 0, 8, 100);
	assert_frame(&x->w.fr[2], WIRE_CHUNK, 0, 8, 50);
	assert_frame(&x->w.fr[3], WIRE_CHUNK, 0, 8, 100);
	assert_frame(&x->w.fr[4], WIRE_CHUNK, 0, 8, 50);
	assert_frame(&x->w.fr[5], WIRE_CHUNK, WIRE_FLAG_LAST, 8, 100);
	for (int i = 0; i < 6; i++) {
		memcpy(got + got_len, x->w.fr[i].payload, x->w.fr[i].f.len);
		got_len += x->w.fr[i].f.len;
	}
	assert_int_equal(got_len, 500);
	assert_memory_equal(got, m, 500);

	assert_frame(&x->w.fr[6], WIRE_CHUNK, WIRE_FLAG_FIRST | WIRE_FLAG_SEQ, 8, 100);
	assert_int_equal(x->w.fr[6].f.seq, 5);
	assert_int_equal(x->w.fr[6].f.total, 250);
	assert_frame(&x->w.fr[7], WIRE_CHUNK, 0, 8, 100);
	assert_frame(&x->w.fr[8], WIRE_CHUNK, WIRE_FLAG_LAST, 8, 50);
	assert_memory_equal(x->w.fr[8].payload, m + 200, 50);
	outchan_free(oc);
}

static void
test_forward_skips_a_message_never_started(void **state)
{
	struct fix *x = *state;
	struct outchan *oc = chan(x, 8, false, 1000, 1 << 20, 4096);
	uint8_t m[300];
	struct wire_frame f;

	fill(m, sizeof(m), 71);
	/* opened while message 3 was under way: its middle and end are no use */
	f = chunk(0, 0, 100);
	assert_true(outchan_forward_room(oc, &f));
	assert_true(outchan_forward(oc, &f, 3, m, false));
	f = chunk(WIRE_FLAG_LAST, 0, 100);
	assert_true(outchan_forward(oc, &f, 3, m, false));
	assert_int_equal(ring_used(&oc->ring), 0);
	assert_int_equal(x->calls.before, 0);
	assert_int_equal(atomic_load(&oc->messages), 0);

	/* message 4 is sent from its first chunk */
	f = chunk(WIRE_FLAG_FIRST, 300, 100);
	assert_true(outchan_forward(oc, &f, 4, m, false));
	f = chunk(0, 0, 100);
	assert_true(outchan_forward(oc, &f, 4, m + 100, false));
	f = chunk(WIRE_FLAG_LAST, 0, 100);
	assert_true(outchan_forward(oc, &f, 4, m + 200, false));
	write_all(oc, &x->w, 1 << 20);
	assert_int_equal(x->w.n, 3);
	assert_frame(&x->w.fr[0], WIRE_CHUNK, WIRE_FLAG_FIRST | WIRE_FLAG_SEQ, 8, 100);
	assert_int_equal(x->w.fr[0].f.seq, 4);
	assert_memory_equal(x->w.fr[0].payload, m, 100);
	assert_frame(&x->w.fr[1], WIRE_CHUNK, 0, 8, 100);
	assert_frame(&x->w.fr[2], WIRE_CHUNK, WIRE_FLAG_LAST, 8, 100);
	assert_memory_equal(x->w.fr[2].payload, m + 200, 100);
	outchan_free(oc);
}

static void
test_forward_drop_if_full(void **state)
{
	struct fix *x = *state;
	struct outchan *oc = chan(x, 8, false, 4000, 1 << 20, 4096);
	uint8_t m[3000];
	struct wire_frame f;

	fill(m, sizeof(m), 72);
	/* message 1's first chunk fills the ring */
	f = chunk(WIRE_FLAG_FIRST, 9000, 3000);
	assert_true(outchan_forward(oc, &f, 1, m, true));
	f = chunk(0, 0, 3000);
	assert_false(outchan_forward_room(oc, &f));
	/* reliable forwarding waits: nothing queued */
	size_t used = ring_used(&oc->ring);
	assert_false(outchan_forward(oc, &f, 1, m, false));
	assert_int_equal(ring_used(&oc->ring), used);
	assert_true(oc->fwd_open);
	/* best effort drops the rest of message 1 */
	assert_true(outchan_forward(oc, &f, 1, m, true));
	assert_int_equal(ring_used(&oc->ring), used);
	assert_false(oc->fwd_open);

	write_all(oc, &x->w, 1 << 20); /* the socket empties the ring */
	assert_int_equal(x->w.n, 1);
	f = chunk(WIRE_FLAG_LAST, 0, 3000);
	assert_true(outchan_forward_room(oc, &f));
	assert_true(outchan_forward(oc, &f, 1, m, true));
	assert_int_equal(ring_used(&oc->ring), 0);

	/* message 2 goes through whole */
	f = chunk(WIRE_FLAG_FIRST | WIRE_FLAG_LAST, 2000, 2000);
	assert_true(outchan_forward(oc, &f, 2, m, true));
	/* message 3 finds the ring full at its first chunk: dropped and
	 * counted, its end skipped */
	f = chunk(WIRE_FLAG_FIRST, 6000, 3000);
	assert_true(outchan_forward(oc, &f, 3, m, true));
	assert_int_equal(atomic_load(&oc->dropped), 1);
	reset(&x->w);
	write_all(oc, &x->w, 1 << 20);
	f = chunk(WIRE_FLAG_LAST, 0, 3000);
	assert_true(outchan_forward(oc, &f, 3, m, true));
	assert_int_equal(ring_used(&oc->ring), 0);
	/* message 4 follows, numbered: 3 never went out */
	f = chunk(WIRE_FLAG_FIRST | WIRE_FLAG_LAST, 10, 10);
	assert_true(outchan_forward(oc, &f, 4, m, true));
	write_all(oc, &x->w, 1 << 20);
	assert_int_equal(x->w.n, 2);
	assert_frame(&x->w.fr[0], WIRE_CHUNK, WIRE_FLAG_FIRST | WIRE_FLAG_LAST, 8, 2000);
	assert_frame(&x->w.fr[1], WIRE_CHUNK, WIRE_FLAG_FIRST | WIRE_FLAG_LAST | WIRE_FLAG_SEQ, 8,
	             10);
	assert_int_equal(x->w.fr[1].f.seq, 4);
	outchan_free(oc);
}

/* ---- growing, stalls ---- */

static void
test_room_or_grow_forced_within_budget(void **state)
{
	struct fix *x = *state;
	struct outchan *oc;
	uint8_t m[4000];

	fill(m, sizeof(m), 80);
	x->budget.max = 16384;
	oc = chan(x, 1, true, 8192, 1 << 20, 4096);
	/* no buffer until the first message, which grows it up to ring_min */
	assert_int_equal(oc->ring.cap, 0);
	assert_int_equal(atomic_load(&x->budget.used), 0);
	assert_int_equal(outchan_send(oc, 1, m, 3000, false, NULL), 0);
	assert_int_equal(oc->ring.cap, 4096);
	assert_int_equal(atomic_load(&x->budget.used), 4096);
	assert_false(outchan_has_room(oc, 3000));
	/* a peer that is neither stalled nor holding most of the ring: no */
	assert_false(outchan_room_or_grow(oc, 3000, false));
	assert_int_equal(oc->ring.cap, 4096);
	assert_true(atomic_load(&oc->starved_since_ms) != 0); /* it waits on the peer */
	/* forced: doubles, within the budget */
	assert_true(outchan_room_or_grow(oc, 3000, true));
	assert_int_equal(oc->ring.cap, 8192);
	assert_int_equal(atomic_load(&x->budget.used), 8192);
	assert_int_equal(outchan_send(oc, 2, m, 3000, false, NULL), 0);
	assert_true(outchan_room_or_grow(oc, 4000, true));
	assert_int_equal(oc->ring.cap, 16384);
	assert_int_equal(atomic_load(&x->budget.used), 16384);
	assert_int_equal(outchan_send(oc, 3, m, 4000, false, NULL), 0);
	/* the budget is spent: refused, nothing changes */
	assert_false(outchan_has_room(oc, 8000));
	assert_false(outchan_room_or_grow(oc, 8000, true));
	assert_int_equal(oc->ring.cap, 16384);
	assert_int_equal(atomic_load(&x->budget.used), 16384);
	/* what was queued survived the growth */
	write_all(oc, &x->w, 1 << 20);
	assert_int_equal(x->w.n, 3);
	assert_int_equal(x->w.fr[2].f.len, 4000);
	assert_memory_equal(x->w.fr[2].payload, m, 4000);
	outchan_free(oc);

	/* best effort never grows */
	x->budget.max = 1 << 20;
	oc = chan(x, 2, false, 8192, 1 << 20, 4096);
	assert_int_equal(outchan_send(oc, 1, m, 3000, false, NULL), 0);
	assert_false(outchan_room_or_grow(oc, 3000, true));
	assert_int_equal(oc->ring.cap, 4096);
	outchan_free(oc);
}

static void
test_stalled_for(void **state)
{
	struct fix *x = *state;
	struct outchan *oc = chan(x, 1, true, 1000, 0, 4096); /* no credit yet */
	uint8_t m[100];
	struct iovec iov[2];
	int niov;

	fill(m, sizeof(m), 90);
	assert_int_equal(outchan_send(oc, 1, m, sizeof(m), false, NULL), 0);
	assert_false(outchan_stalled_for(oc, NOW, 0)); /* not starved yet */
	assert_int_equal(outchan_take(oc, 0, 1 << 20, 1 << 20, iov, &niov, NOW), 0);
	assert_false(outchan_stalled_for(oc, NOW + 499, 500));
	assert_true(outchan_stalled_for(oc, NOW + 500, 500));
	/* marking again does not restart the clock */
	outchan_mark_starved(oc, NOW + 400);
	assert_true(outchan_stalled_for(oc, NOW + 500, 500));
	/* credit is progress */
	assert_true(outchan_on_credit(oc, 1000, 0, NOW + 600));
	assert_false(outchan_stalled_for(oc, NOW + 5000, 500));
	/* written but not consumed still waits on the peer */
	write_all(oc, &x->w, 1 << 20);
	assert_int_equal(outchan_unsent(oc), 0);
	outchan_mark_starved(oc, NOW + 700);
	assert_true(outchan_stalled_for(oc, NOW + 1200, 500));
	/* consumed: nothing waits, however long ago it was starved */
	outchan_on_credit(oc, 0, x->w.fr[0].hlen + x->w.fr[0].f.len, NOW + 1300);
	assert_int_equal(ring_used(&oc->ring), 0);
	outchan_mark_starved(oc, NOW + 1400);
	assert_false(outchan_stalled_for(oc, NOW + 5000, 500));
	outchan_free(oc);

	/* best effort never counts as stalled */
	oc = chan(x, 2, false, 1000, 0, 4096);
	assert_int_equal(outchan_send(oc, 1, m, sizeof(m), false, NULL), 0);
	assert_int_equal(outchan_take(oc, 0, 1 << 20, 1 << 20, iov, &niov, NOW), 0);
	assert_false(outchan_stalled_for(oc, NOW + 5000, 500));
	outchan_free(oc);
}

#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    T(test_data_frames_numbered_at_jumps),
	    T(test_chunked_message),
	    T(test_take_within_credit_and_limit),
	    T(test_socket_cuts_a_frame),
	    T(test_reliable_keeps_until_consumed),
	    T(test_best_effort_drops_on_settle),
	    T(test_send_without_room),
	    T(test_chunked_message_finished_once_started),
	    T(test_resume_from_the_middle_of_a_message),
	    T(test_resume_from_a_message_start),
	    T(test_resume_keeps_explicit_numbers),
	    T(test_take_kept_numbers_before_a_jump),
	    T(test_park_keep_append_resume),
	    T(test_park_resume_frame_above_frame_max),
	    T(test_forward_cuts_to_frame_max),
	    T(test_forward_skips_a_message_never_started),
	    T(test_forward_drop_if_full),
	    T(test_room_or_grow_forced_within_budget),
	    T(test_stalled_for),
	};
	return cmocka_run_group_tests_name("outchan", tests, NULL, NULL);
}
