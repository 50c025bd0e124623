/*
 * inchan.c - one channel's receiving side: stages of a frame, the backlog,
 * reassembly and credit. See inchan.h.
 */
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "error.h"
#include "inchan.h"

#define BACKLOG_HDR 34 /* type|flags, header length, seq, total, len, stamp (8 each) */

/* Stages of the chunk at the head (see inchan.h). */
enum { STAGE_NEW = 0, STAGE_FORWARDED, STAGE_WHOLE };

int
inchan_new(struct inchan **out, uint32_t id, uint64_t window, uint64_t window_max,
           const struct inchan_ops *ops, void *arg, void *from)
{
	struct inchan *in = calloc(1, sizeof(*in));

	if (in == NULL) {
		return TERN_ENOMEM;
	}
	in->id = id;
	in->ops = ops;
	in->arg = arg;
	in->from = from;
	in->next_seq = 1;
	credit_rx_init(&in->credit, window, window_max);
	in->rate_t0_us = clock_us();
	*out = in;
	return 0;
}

void
inchan_free(struct inchan *in, uint64_t *budget)
{
	if (in == NULL) {
		return;
	}
	if (in->whole != NULL) {
		reasm_free(&in->whole->reasm, budget);
		free(in->whole->done_buf);
		free(in->whole);
	}
	free(in->backlog);
	free(in);
}

static void
consumed(struct inchan *in, uint64_t bytes)
{
	in->grant_pending += credit_rx_consume(&in->credit, bytes);
	in->dirty = true;
}

static bool
backlog_add(struct inchan *in, int tf, size_t hlen, uint64_t seq, uint64_t total, uint64_t stamp,
            const uint8_t *p, uint64_t len)
{
	size_t need = in->blen + BACKLOG_HDR + len;

	if (in->boff > 0 && need > in->bcap) {
		/* delivered frames at the front make room: a backlog that never
		 * empties (a subscriber always a little behind) must not grow */
		memmove(in->backlog, in->backlog + in->boff, in->blen - in->boff);
		in->blen -= in->boff;
		in->boff = 0;
		need = in->blen + BACKLOG_HDR + len;
	}
	if (need > in->bcap) {
		/* from a few hundred bytes: with many keys, many channels hold a
		 * message or two each while their subscriber catches up */
		size_t cap = in->bcap ? in->bcap : 256;
		while (cap < need) {
			cap *= 2;
		}
		uint8_t *b = realloc(in->backlog, cap);
		if (b == NULL) {
			return false;
		}
		in->backlog = b;
		in->bcap = cap;
	}
	uint8_t *w = in->backlog + in->blen;
	w[0] = (uint8_t)tf;
	w[1] = (uint8_t)hlen;
	memcpy(w + 2, &seq, 8);
	memcpy(w + 10, &total, 8);
	memcpy(w + 18, &len, 8);
	memcpy(w + 26, &stamp, 8);
	memcpy(w + BACKLOG_HDR, p, len);
	in->blen += BACKLOG_HDR + len;
	return true;
}

/* Stage 2: the reassembled message goes to local subscribers. */
static int
deliver_whole(struct inchan *in)
{
	struct inchan_whole *w = in->whole;
	uint8_t *heap = w->done_buf;

	if (!in->ops->deliver(in->arg, in->from, w->done_seq, w->stamp, w->done_buf, w->done_len,
	                      &heap, false)) {
		return 0;
	}
	if (heap != NULL) { /* no pull subscriber kept it */
		reasm_recycle(&w->reasm, heap, w->done_len);
	}
	w->done_buf = NULL;
	return 1;
}

/* Stage 1: reassemble for local subscribers, if any want it. Returns 1 when
 * the frame is done, 2 when a whole message is ready, or an error. */
static int
reassemble(struct inchan *in, const struct wire_frame *f, uint64_t seq, const uint8_t *p,
           const struct inchan_limits *lim)
{
	struct inchan_whole *w = in->whole;
	int rc;

	/* a message is reassembled from its first chunk, or not at all */
	if ((w == NULL || !w->reasm.active) &&
	    (!(f->flags & WIRE_FLAG_FIRST) || !in->ops->wants_whole(in->arg))) {
		return 1;
	}
	if (w == NULL && (w = in->whole = calloc(1, sizeof(*w))) == NULL) {
		return TERN_ENOMEM;
	}
	if (f->flags & WIRE_FLAG_FIRST) {
		w->stamp = (f->flags & WIRE_FLAG_STAMP) ? f->stamp : 0;
	}
	rc = reasm_add(&w->reasm, f, seq, p, lim->max_message, lim->budget);
	if (rc <= 0) {
		return rc < 0 ? rc : 1;
	}
	w->done_len = w->reasm.total;
	w->done_seq = w->reasm.seq;
	w->done_buf = reasm_take(&w->reasm, lim->budget);
	return 2;
}

/* Take one chunk as far as it can go. Returns 1 done, 0 must wait (stage
 * kept), <0 fatal. */
static int
process_chunk(struct inchan *in, struct wire_frame *f, uint64_t seq, const uint8_t *p,
              const struct inchan_limits *lim)
{
	int rc;

	if (in->stage == STAGE_NEW && (f->flags & WIRE_FLAG_FIRST)) {
		if (f->total > lim->max_message) {
			return tern__error(
			    TERN_EMSGSIZE,
			    "peer announced a %llu-byte message; max_message_bytes is %llu",
			    (unsigned long long)f->total, (unsigned long long)lim->max_message);
		}
		in->skip_chunks = in->ops->duplicate(in->arg, seq);
	}
	if (in->skip_chunks) {
		if (f->flags & WIRE_FLAG_LAST) {
			in->skip_chunks = false;
		}
		return 1;
	}
	if (in->stage == STAGE_NEW) {
		if (!in->ops->forward(in->arg, in->from, f, seq, p)) {
			return 0;
		}
		if (f->flags & WIRE_FLAG_FIRST) {
			in->ops->started(in->arg, seq);
		}
		in->stage = STAGE_FORWARDED;
	}
	if (in->stage == STAGE_FORWARDED) {
		rc = reassemble(in, f, seq, p, lim);
		if (rc != 2) {
			in->stage = STAGE_NEW;
			return rc;
		}
		in->stage = STAGE_WHOLE;
	}
	if (deliver_whole(in) == 0) {
		return 0;
	}
	in->stage = STAGE_NEW;
	return 1;
}

static int
process(struct inchan *in, int tf, size_t hlen, uint64_t seq, uint64_t total, uint64_t stamp,
        const uint8_t *p, uint64_t len, const struct inchan_limits *lim)
{
	struct wire_frame f = {.type = tf & WIRE_TYPE_MASK,
	                       .flags = tf & ~WIRE_TYPE_MASK,
	                       .seq = seq,
	                       .total = total,
	                       .stamp = stamp,
	                       .len = len};
	int rc;

	if (f.type == WIRE_DATA) {
		if (!in->ops->deliver(in->arg, in->from, seq, stamp, p, len, NULL, true)) {
			return 0;
		}
		rc = 1;
	} else {
		rc = process_chunk(in, &f, seq, p, lim);
	}
	if (rc == 1) {
		consumed(in, len + hlen);
	}
	return rc;
}

int
inchan_receive(struct inchan *in, const struct wire_frame *f, size_t hlen, const uint8_t *payload,
               const struct inchan_limits *lim)
{
	int tf = f->type | f->flags;
	uint64_t seq;
	int rc;

	/* credit counts whole frames, header included, as the sender queues them */
	if (!credit_rx_receive(&in->credit, hlen + f->len)) {
		return tern__error(TERN_EPROTO,
		                   "peer overran the flow-control window of channel %u", in->id);
	}
	if (f->type == WIRE_DATA || (f->flags & WIRE_FLAG_FIRST)) {
		seq = (f->flags & WIRE_FLAG_SEQ) ? f->seq : in->next_seq;
		in->next_seq = seq + 1;
	} else {
		seq = in->next_seq - 1;
	}
	if (!in->stalled) {
		rc = process(in, tf, hlen, seq, f->total, f->stamp, payload, f->len, lim);
		if (rc != 0) {
			return rc < 0 ? rc : 1;
		}
	}
	if (!backlog_add(in, tf, hlen, seq, f->total, f->stamp, payload, f->len)) {
		return tern__error(TERN_ENOMEM, "no memory to hold channel %u's frames", in->id);
	}
	in->stalled = true;
	return 0;
}

int
inchan_retry(struct inchan *in, const struct inchan_limits *lim)
{
	while (in->boff < in->blen) {
		const uint8_t *r = in->backlog + in->boff;
		uint64_t seq, total, len, stamp;
		memcpy(&seq, r + 2, 8);
		memcpy(&total, r + 10, 8);
		memcpy(&len, r + 18, 8);
		memcpy(&stamp, r + 26, 8);
		int rc = process(in, r[0], r[1], seq, total, stamp, r + BACKLOG_HDR, len, lim);
		if (rc <= 0) {
			return rc;
		}
		in->boff += BACKLOG_HDR + len;
	}
	in->boff = in->blen = 0;
	in->stalled = false;
	/* empty again: the buffer is kept for the next stall (a subscriber a
	 * little behind stalls again and again, and an allocation each time
	 * would be one on the path of its messages); inchan_backlog_release
	 * gives it back once it has gone unused a while */
	return 1;
}

bool
inchan_backlog_release(struct inchan *in)
{
	if (in->backlog == NULL || in->blen > 0) {
		return false;
	}
	free(in->backlog);
	in->backlog = NULL;
	in->bcap = 0;
	return true;
}

/*
 * The window a channel needs: four times what it moved in one round trip
 * since it last ran out of credit. A window-limited channel moves a window
 * per round trip, so this lets it double; once the link itself is the
 * limit, growth stops at four times the bandwidth-delay product. Twice
 * would be enough if frames saw the shortest round trip PING/PONG times;
 * they also wait to be serialized and queue at the link (a 64 KiB frame
 * takes 5 ms at 12 MB/s), and credit is topped up only when half of the
 * window is used, so a window of twice stalled a link it could nearly
 * fill (wifi, 0.9 of tcp in 0.2 s cells). Needs a measured round trip.
 */
static uint64_t
link_need(struct inchan *in, uint64_t rtt_us)
{
	uint64_t now = clock_us();
	uint64_t elapsed = clock_since(now, in->rate_t0_us);
	uint64_t bytes = in->credit.consumed - in->rate_bytes0;
	uint64_t need = 0;

	if (elapsed > 0 && in->rate_t0_us != 0) {
		need = (uint64_t)(4.0 * (double)bytes * (double)rtt_us / (double)elapsed);
	}
	in->rate_t0_us = now;
	in->rate_bytes0 = in->credit.consumed;
	return need;
}

void
inchan_blocked(struct inchan *in, uint64_t rtt_us, uint64_t floor)
{
	/* The sender reports a shortage once: one that arrives before the
	 * data it is about (or before a round trip is timed) is kept, not
	 * spent on a window that nothing has measured yet. */
	bool weighable = rtt_us > 0 && in->credit.consumed != in->rate_bytes0;

	in->blocked_unweighed = !weighable;
	in->grant_pending += credit_rx_blocked(&in->credit, weighable && !in->stalled,
	                                       weighable ? link_need(in, rtt_us) : 0, floor);
	in->dirty = true;
}

bool
inchan_ack(struct inchan *in, uint64_t *bytes, uint64_t *consumed_total)
{
	in->dirty = false;
	if (in->grant_pending == 0 && in->credit.consumed == in->acked) {
		return false;
	}
	*bytes = in->grant_pending;
	*consumed_total = in->credit.consumed;
	in->grant_pending = 0;
	in->acked = in->credit.consumed;
	return true;
}
