/*
 * outchan.c - one channel's send queue, credit, and the frames a reliable
 * channel keeps for a resend. See outchan.h for who may call what.
 */
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "error.h"
#include "frames.h"
#include "outchan.h"

/* No progress from the peer for this long: queue for it instead of
 * pushing the publisher back. */
#define GROW_AFTER_MS 300
/*
 * A stalled peer's queue holds at most GROW_SECONDS of what the channel
 * moved before (its consumption rate), beyond the window: enough to ride
 * out a pause, where a deeper queue would only hold data back; a channel
 * that shares a slow link with many others, served in bursts a second
 * apart, moves too little to grow at all (it is pushed back, as a TCP
 * sender would be).
 */
#define GROW_SECONDS 2

int
outchan_new(struct outchan **out, const struct outchan_params *p)
{
	struct outchan *oc = calloc(1, sizeof(*oc));

	if (oc == NULL) {
		return TERN_ENOMEM;
	}
	/* the ring is allocated by the first message (see outchan_has_room): a
	 * declared key that carries nothing costs no buffer */
	oc->id = p->id;
	oc->retain = p->reliable;
	oc->link = p->link;
	oc->ops = p->ops;
	oc->arg = p->arg;
	oc->label = p->label != NULL ? p->label : "";
	atomic_init(&oc->credit, (int64_t)p->link->peer_window);
	atomic_init(&oc->sent, 0);
	atomic_init(&oc->last_ack_ms, clock_ms());
	atomic_init(&oc->last_write_ms, clock_ms());
	atomic_fetch_add(&oc->link->budget->used, oc->ring.cap);
	*out = oc;
	return 0;
}

void
outchan_free(struct outchan *oc)
{
	if (oc == NULL) {
		return;
	}
	atomic_fetch_sub(&oc->link->budget->used, oc->ring.cap);
	ring_free(&oc->ring);
	free(oc->jumps);
	free(oc);
}

/* ---- producer ---- */

static size_t
framed_len(const struct outchan *oc, size_t len)
{
	return len + (len / oc->link->frame_max + 1) * WIRE_HDR_MAX;
}

bool
outchan_has_space(struct outchan *oc, size_t len)
{
	return ring_has_space(&oc->ring, framed_len(oc, len));
}

/*
 * A ring starts empty and doubles, from RING_CAP_FIRST, to the size it
 * needs up to ring_min: its first buffer whatever the budget (a channel
 * must be able to carry a message), the later ones within it. Many keys
 * with a message or two in flight each then hold a few hundred bytes, not
 * ring_min each.
 */
/* Grow the ring to cap (under the flush lock: a writer may be gathering
 * from it) and charge what it added to the connection's budget. */
static bool
resize_charged(struct outchan *oc, size_t cap)
{
	size_t old;
	int rc;

	pthread_mutex_lock(oc->link->flush_lock);
	old = oc->ring.cap;
	rc = ring_grow(&oc->ring, cap);
	pthread_mutex_unlock(oc->link->flush_lock);
	if (rc != 0) {
		return false;
	}
	atomic_fetch_add(&oc->link->budget->used, oc->ring.cap - old);
	return true;
}

static bool
grow_to_min(struct outchan *oc, size_t need)
{
	size_t used = ring_used(&oc->ring), cap = oc->ring.cap ? oc->ring.cap : RING_CAP_FIRST;

	if (oc->ring.cap >= oc->link->ring_min) {
		return false;
	}
	while (cap < used + need) {
		cap *= 2;
	}
	if (cap > oc->link->ring_min && oc->ring.cap > 0) {
		return false; /* beyond ring_min: grow()'s rules */
	}
	if (oc->ring.cap > 0 &&
	    atomic_load(&oc->link->budget->used) + (cap - oc->ring.cap) > oc->link->budget->max) {
		return false;
	}
	return resize_charged(oc, cap);
}

bool
outchan_has_room(struct outchan *oc, size_t len)
{
	return ring_has_space(&oc->ring, framed_len(oc, len)) ||
	       grow_to_min(oc, framed_len(oc, len));
}

/*
 * A reliable channel whose ring is full may grow it, doubling, while the
 * connection's rings stay within queue.max_bytes: a subscriber that pauses
 * is absorbed by the queue, and only a full queue blocks the publisher.
 * for_window: the window outgrew the ring (a long, fast link), which grows
 * it whatever the rate.
 */
static bool
grow(struct outchan *oc, size_t need, bool for_window)
{
	size_t used = ring_used(&oc->ring), cap = oc->ring.cap;
	uint64_t rate = atomic_load_explicit(&oc->rate_Bps, memory_order_relaxed);

	if (!oc->retain) {
		return false; /* best effort drops rather than queues */
	}
	if (cap == 0) {
		cap = RING_CAP_FIRST;
	}
	while (cap < used + need) {
		if (cap > oc->link->budget->max) {
			return false;
		}
		cap *= 2;
	}
	if (atomic_load(&oc->link->budget->used) + (cap - oc->ring.cap) > oc->link->budget->max ||
	    (!for_window && cap > oc->link->peer_window + GROW_SECONDS * rate)) {
		return false;
	}
	return resize_charged(oc, cap);
}

bool
outchan_room_or_grow(struct outchan *oc, size_t len, bool force)
{
	uint64_t now, starved = atomic_load(&oc->starved_since_ms);

	if (outchan_has_room(oc, len)) {
		return true;
	}
	if (force) {
		return grow(oc, framed_len(oc, len), true);
	}
	/* A ring mostly holding frames kept for a resend means the window has
	 * outgrown it: grow to keep the link full. */
	bool kept_most = atomic_load(&oc->sent) > oc->ring.cap / 4 * 3;
	/* Stalled: waiting on a peer that has neither consumed anything nor
	 * taken any of this channel's bytes into its socket for a while (a slow
	 * or crowded link still does one or the other; a stopped reader does
	 * neither). */
	now = clock_ms();
	bool stalled = starved != 0 && clock_since(now, starved) >= GROW_AFTER_MS &&
	               clock_since(now, atomic_load(&oc->last_ack_ms)) >= GROW_AFTER_MS &&
	               clock_since(now, atomic_load(&oc->last_write_ms)) >= GROW_AFTER_MS;
	if ((kept_most || stalled) && grow(oc, framed_len(oc, len), kept_most)) {
		return true;
	}
	/* a full ring waits on the peer, even one that took everything into
	 * its socket and its window: until it consumes, nothing makes room */
	outchan_mark_starved(oc, now);
	return false;
}

/* A message numbered seq follows last_seq with a gap: the frame carries
 * its number (SEQ), and the number before the gap is kept for
 * outchan_take_kept. The record is allocated at a channel's first gap (a
 * channel that never has one, most of a router's, does without); without
 * memory for it, outchan_take_kept numbers what was kept before the gap
 * as if there had been none, as it does for a gap older than the last
 * OUTCHAN_JUMPS. */
static void
note_jump(struct outchan *oc, uint64_t seq)
{
	unsigned k;

	if (oc->jumps == NULL && (oc->jumps = calloc(1, sizeof(*oc->jumps))) == NULL) {
		return;
	}
	k = oc->jumps->n++ % OUTCHAN_JUMPS;
	oc->jumps->to[k] = seq;
	oc->jumps->from[k] = oc->last_seq;
}

/*
 * Frames were queued: list the channel for its connection's next flush,
 * unless it is listed. The fence orders the frames (the ring's tail) before
 * the look at `listed`, as outchan_unlist orders its clearing of `listed`
 * before its look at the tail: of a producer that sees the channel listed
 * and a flush that unlists it, one sees the other's change, so no frame is
 * left on an unlisted channel.
 */
static void
note_ready(struct outchan *oc)
{
	struct outchan *head;

	if (oc->link->ready == NULL) {
		return;
	}
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit(&oc->listed, memory_order_relaxed) ||
	    atomic_exchange(&oc->listed, true)) {
		return;
	}
	head = atomic_load_explicit(&oc->link->ready->head, memory_order_relaxed);
	do {
		oc->ready_next = head;
	} while (!atomic_compare_exchange_weak_explicit(
	    &oc->link->ready->head, &head, oc, memory_order_release, memory_order_relaxed));
}

bool
outchan_unlist(struct outchan *oc)
{
	atomic_store(&oc->listed, false);
	if (outchan_unsent(oc) == 0 || atomic_exchange(&oc->listed, true)) {
		return true; /* empty, or a producer listed it again (on ready) */
	}
	return false;
}

static void
put_frame(struct outchan *oc, const struct wire_frame *f, const uint8_t *payload)
{
	uint8_t hdr[WIRE_HDR_MAX];
	size_t hlen = wire_header_encode(hdr, f);

	oc->ops->queued(oc->link->owner, oc, hlen + (size_t)f->len, true);
	ring_put(&oc->ring, hdr, hlen, payload, (size_t)f->len);
	note_ready(oc);
	oc->ops->queued(oc->link->owner, oc, hlen + (size_t)f->len, false);
}

static int
refused(struct outchan *oc, bool waited)
{
	if (atomic_load(&oc->detached) || atomic_load(&oc->broken) != OUTCHAN_OK) {
		return TERN_ECLOSED;
	}
	atomic_fetch_add_explicit(&oc->dropped, 1, memory_order_relaxed);
	return waited ? TERN_ETIMEDOUT : TERN_EAGAIN;
}

static bool
room_for(struct outchan *oc, size_t len, const struct outchan_wait *w)
{
	return outchan_has_room(oc, len) || (w != NULL && w->room(w->ctx, oc, len));
}

int
outchan_send_stamped(struct outchan *oc, uint64_t seq, uint64_t stamp_us, const uint8_t *data,
                     size_t len, bool may_wait, const struct outchan_wait *w)
{
	struct wire_frame f = {.type = WIRE_DATA, .channel = oc->id, .stamp = stamp_us};
	size_t off = 0;

	if (seq != oc->last_seq + 1) {
		f.flags = WIRE_FLAG_SEQ;
		f.seq = seq;
	}
	if (stamp_us != 0) {
		f.flags |= WIRE_FLAG_STAMP;
	}
	if (len <= oc->link->frame_max) {
		if (!room_for(oc, len, may_wait ? w : NULL)) {
			return refused(oc, may_wait && w != NULL);
		}
		f.len = len;
		if (f.flags & WIRE_FLAG_SEQ) {
			note_jump(oc, seq);
		}
		oc->last_seq = seq;
		put_frame(oc, &f, data);
	} else {
		f.type = WIRE_CHUNK;
		f.total = len;
		while (off < len) {
			size_t n =
			    len - off < oc->link->frame_max ? len - off : oc->link->frame_max;
			f.flags = (f.flags & WIRE_FLAG_SEQ) |
			          (off == 0 ? WIRE_FLAG_FIRST | (f.flags & WIRE_FLAG_STAMP) : 0) |
			          (off + n == len ? WIRE_FLAG_LAST : 0);
			f.len = n;
			/* once a message has started, finish it: the receiver holds
			 * it open */
			if (!room_for(oc, n, may_wait || off > 0 ? w : NULL)) {
				if (off > 0) {
					/* the receiver drops the open message at the next
					 * first chunk */
					oc->last_seq = seq;
				}
				return refused(oc, may_wait && w != NULL);
			}
			if (f.flags & WIRE_FLAG_SEQ) {
				note_jump(oc, seq);
			}
			put_frame(oc, &f, data + off);
			/* the receiver numbers a message by its first chunk */
			oc->last_seq = seq;
			f.flags &= ~WIRE_FLAG_SEQ;
			off += n;
		}
	}
	atomic_store_explicit(&oc->messages, atomic_load(&oc->messages) + 1, memory_order_relaxed);
	atomic_store_explicit(&oc->bytes, atomic_load(&oc->bytes) + len, memory_order_relaxed);
	return 0;
}

bool
outchan_forward_room(struct outchan *oc, const struct wire_frame *f)
{
	if (!(f->flags & WIRE_FLAG_FIRST) && !oc->fwd_open) {
		return true;
	}
	return outchan_has_room(oc, (size_t)f->len);
}

bool
outchan_forward(struct outchan *oc, const struct wire_frame *f, uint64_t seq,
                const uint8_t *payload, bool drop_if_full)
{
	struct wire_frame g = *f;
	bool first = f->flags & WIRE_FLAG_FIRST, last = f->flags & WIRE_FLAG_LAST;
	uint64_t off = 0;

	if (!first && !oc->fwd_open) {
		return true; /* the middle of a message this channel never started */
	}
	if (!outchan_has_room(oc, (size_t)f->len)) {
		if (!drop_if_full) {
			return false;
		}
		/* best effort: the rest of this message is not sent either; the
		 * receiver drops what it holds of it at the next first chunk */
		if (first) {
			atomic_fetch_add_explicit(&oc->dropped, 1, memory_order_relaxed);
		}
		oc->fwd_open = false;
		return true;
	}
	g.channel = oc->id;
	do {
		uint64_t n =
		    f->len - off < oc->link->frame_max ? f->len - off : oc->link->frame_max;
		g.flags = f->flags &
		          ~(WIRE_FLAG_SEQ | WIRE_FLAG_FIRST | WIRE_FLAG_LAST | WIRE_FLAG_STAMP);
		if (first && off == 0) {
			g.flags |= WIRE_FLAG_FIRST | (f->flags & WIRE_FLAG_STAMP);
			if (seq != oc->last_seq + 1) {
				g.flags |= WIRE_FLAG_SEQ;
				g.seq = seq;
				note_jump(oc, seq);
			}
		}
		if (last && off + n == f->len) {
			g.flags |= WIRE_FLAG_LAST;
		}
		g.len = n;
		put_frame(oc, &g, payload + off);
		off += n;
	} while (off < f->len);
	if (first) {
		oc->last_seq = seq;
		atomic_store_explicit(&oc->messages, atomic_load(&oc->messages) + 1,
		                      memory_order_relaxed);
	}
	atomic_store_explicit(&oc->bytes, atomic_load(&oc->bytes) + f->len, memory_order_relaxed);
	oc->fwd_open = !last;
	return true;
}

/* ---- consumer ---- */

void
outchan_mark_starved(struct outchan *oc, uint64_t now_ms)
{
	if (atomic_load(&oc->starved_since_ms) == 0) {
		atomic_store(&oc->starved_since_ms, now_ms);
	}
}

/*
 * Bytes of whole frames in the ring starting at base (a frame boundary): at
 * most limit (but at least one frame if it fits in room), and never more
 * than the credit, which counts frames as they are on the wire. *short_of_credit:
 * the credit, not the limit, left a frame behind.
 */
static size_t
frames_prefix(struct ring *r, size_t base, size_t used, size_t limit, size_t room, int64_t credit,
              bool *short_of_credit)
{
	size_t off = 0;

	*short_of_credit = credit <= 0;
	if (credit <= 0) {
		return 0;
	}
	if (used <= limit && used <= (uint64_t)credit) {
		return used;
	}
	while (off < used) {
		uint8_t hdr[WIRE_HDR_MAX];
		struct wire_frame f;
		size_t hlen, n = used - off < sizeof(hdr) ? used - off : sizeof(hdr);

		const uint8_t *h = ring_view(r, base + off, n, hdr);
		if (wire_header_decode_fast(h, n, UINT64_MAX, &f, &hlen) != 1) {
			break;
		}
		size_t flen = hlen + (size_t)f.len;
		if (off + flen > (uint64_t)credit) {
			*short_of_credit = true;
			break;
		}
		if (off + flen > limit && !(off == 0 && flen <= room)) {
			break;
		}
		off += flen;
		if (off >= limit) {
			break;
		}
	}
	return off;
}

size_t
outchan_take(struct outchan *oc, size_t already, size_t limit, size_t room, struct iovec iov[2],
             int *niov, uint64_t now_ms)
{
	size_t used = ring_used(&oc->ring);
	size_t base = atomic_load_explicit(&oc->sent, memory_order_relaxed) + already;
	size_t take;
	bool short_of_credit;

	*niov = 0;
	if (used <= base) {
		return 0;
	}
	take = frames_prefix(&oc->ring, base, used - base, limit, room,
	                     atomic_load_explicit(&oc->credit, memory_order_acquire),
	                     &short_of_credit);
	if (short_of_credit || take == 0) {
		/* Reported now, not at the next attempt (a publisher waiting for
		 * room in a full ring makes none, and the report would wait a round
		 * trip for the next credit); also when only this batch's room was
		 * short: a channel that fills whole batches on a long round trip
		 * then tells its receiver early, which grows the window sooner. */
		oc->want_blocked = true;
	}
	if (take == 0) {
		outchan_mark_starved(oc, now_ms);
		return 0;
	}
	atomic_fetch_sub(&oc->credit, (int64_t)take);
	*niov = ring_iov(&oc->ring, base, take, iov);
	return take;
}

size_t
outchan_cut_end(struct outchan *oc, size_t taken, size_t written)
{
	size_t base = atomic_load(&oc->sent);
	size_t end = 0;

	if (written == taken) {
		return taken;
	}
	while (written > 0 && end < written) {
		uint8_t hdr[WIRE_HDR_MAX];
		struct wire_frame f;
		size_t hlen, n = taken - end < sizeof(hdr) ? taken - end : sizeof(hdr);

		const uint8_t *h = ring_view(&oc->ring, base + end, n, hdr);
		if (wire_header_decode_fast(h, n, UINT64_MAX, &f, &hlen) != 1) {
			return taken; /* cannot happen: rings hold frames this node encoded */
		}
		end += hlen + (size_t)f.len;
	}
	return end;
}

void
outchan_copy_cut(struct outchan *oc, size_t from, uint8_t *out, size_t len)
{
	ring_peek(&oc->ring, atomic_load(&oc->sent) + from, out, len);
}

void
outchan_settle(struct outchan *oc, size_t taken, size_t done, bool wrote, uint64_t now_ms)
{
	atomic_fetch_add(&oc->credit, (int64_t)(taken - done));
	if (wrote) {
		atomic_store_explicit(&oc->last_write_ms, now_ms, memory_order_relaxed);
	}
	if (oc->retain) { /* kept until the peer reports it consumed */
		atomic_store_explicit(&oc->sent, atomic_load(&oc->sent) + done,
		                      memory_order_relaxed);
		return;
	}
	ring_consume(&oc->ring, done);
	/* room in a reliable channel's ring comes from the acknowledgement */
	oc->ops->wake(oc->arg);
}

/* ---- I/O thread ---- */

/*
 * Release, from the head of a reliable channel's ring, what the peer has
 * consumed: what stays is what a reconnect must send again. The peer
 * counts whole frames, so this always ends on a frame boundary.
 */
static void
release_acked(struct outchan *oc)
{
	size_t sent = atomic_load(&oc->sent);
	uint64_t n = oc->acked - oc->freed;

	if (oc->acked <= oc->freed) {
		return;
	}
	if (n > sent) { /* the peer claims more than it was sent */
		n = sent;
	}
	ring_consume(&oc->ring, (size_t)n);
	oc->freed += n;
	atomic_store(&oc->sent, sent - (size_t)n);
}

/* The consumption rate, over intervals of a second at least: it bounds how
 * deep the queue may grow for a stalled peer. */
static void
measure_rate(struct outchan *oc, uint64_t now)
{
	if (oc->rate_t0_ms == 0) {
		oc->rate_t0_ms = now;
		oc->rate_acked0 = oc->acked;
	} else if (clock_since(now, oc->rate_t0_ms) >= 1000) {
		atomic_store_explicit(&oc->rate_Bps,
		                      (oc->acked - oc->rate_acked0) * 1000 / (now - oc->rate_t0_ms),
		                      memory_order_relaxed);
		oc->rate_t0_ms = now;
		oc->rate_acked0 = oc->acked;
	}
}

bool
outchan_credit(struct outchan *oc, uint64_t bytes, uint64_t consumed, uint64_t now_ms)
{
	uint64_t acked = oc->ack_due > oc->acked ? oc->ack_due : oc->acked;

	atomic_fetch_add(&oc->credit, (int64_t)bytes);
	if (bytes > 0) { /* a shortage ends with new credit, not with a report of use */
		atomic_store(&oc->blocked_sent, false);
	}
	/* credit, or anything consumed, is progress: the peer is not stalled */
	if (bytes > 0 || consumed > acked) {
		atomic_store(&oc->starved_since_ms, 0);
		atomic_store(&oc->last_ack_ms, now_ms);
	}
	if (oc->retain && consumed > acked) {
		oc->ack_due = consumed;
		return true;
	}
	return false;
}

void
outchan_release_locked(struct outchan *oc, uint64_t now_ms)
{
	if (oc->ack_due > oc->acked) {
		oc->acked = oc->ack_due;
		release_acked(oc);
		measure_rate(oc, now_ms);
	}
}

bool
outchan_credited(struct outchan *oc)
{
	oc->ops->wake(oc->arg);
	return outchan_unsent(oc) > 0;
}

bool
outchan_on_credit(struct outchan *oc, uint64_t bytes, uint64_t consumed, uint64_t now_ms)
{
	if (outchan_credit(oc, bytes, consumed, now_ms)) {
		pthread_mutex_lock(oc->link->flush_lock);
		outchan_release_locked(oc, now_ms);
		pthread_mutex_unlock(oc->link->flush_lock);
	}
	return outchan_credited(oc);
}

void
outchan_break(struct outchan *oc, enum outchan_broken how)
{
	int expected = OUTCHAN_OK;

	atomic_compare_exchange_strong(&oc->broken, &expected, (int)how);
	oc->ops->wake(oc->arg);
}

bool
outchan_idle_for(struct outchan *oc, uint64_t now_ms, uint64_t ms)
{
	return ring_used(&oc->ring) == 0 &&
	       clock_since(now_ms, atomic_load(&oc->last_write_ms)) >= ms;
}

bool
outchan_shrink_idle(struct outchan *oc, uint64_t now_ms, uint64_t ms)
{
	if (oc->ring.cap == 0 || !outchan_idle_for(oc, now_ms, ms)) {
		return false;
	}
	atomic_fetch_sub(&oc->link->budget->used, oc->ring.cap);
	ring_release(&oc->ring);
	return true;
}

bool
outchan_stalled_for(struct outchan *oc, uint64_t now_ms, uint64_t ms)
{
	uint64_t starved = atomic_load(&oc->starved_since_ms);

	/* unconsumed data, written or not, waits on the peer */
	return oc->retain && starved != 0 && clock_since(now_ms, starved) >= ms &&
	       ring_used(&oc->ring) > 0;
}

/*
 * The sequence number of a kept message is the last explicit one plus the
 * messages between, and without an explicit one, the number of the
 * channel's last message minus those after it: worked out from the frames
 * themselves, once, when a connection breaks, so that the normal path keeps
 * no per-message records.
 */
void
outchan_take_kept(struct outchan *oc, struct ring *kept, uint64_t *head_seq, bool *head_mid)
{
	uint64_t starts = 0, first_explicit = 0, starts_before = 0, first;
	bool explicit_seen = false;
	struct wire_frame f;
	size_t off = 0, hlen;

	*head_mid = false;
	while (frames_next(&oc->ring, &off, &f, &hlen)) {
		bool starts_msg = frames_starts_message(&f);
		if (off == hlen + (size_t)f.len) { /* the first frame */
			*head_mid = !starts_msg;
		}
		if (starts_msg && (f.flags & WIRE_FLAG_SEQ) && !explicit_seen) {
			explicit_seen = true;
			first_explicit = f.seq;
			starts_before = starts;
		}
		starts += starts_msg;
	}
	if (explicit_seen) {
		/* the messages before the first numbered one end where its gap
		 * began */
		first = first_explicit - starts_before;
		for (unsigned k = 0; oc->jumps != NULL && k < OUTCHAN_JUMPS && k < oc->jumps->n;
		     k++) {
			if (oc->jumps->to[k] == first_explicit) {
				first = oc->jumps->from[k] + 1 - starts_before;
			}
		}
		if (starts_before == 0) {
			first = first_explicit;
		}
	} else if (starts > 0) {
		first = oc->last_seq - (starts - 1);
	} else {
		first = oc->last_seq + 1; /* only the rest of the last message */
	}
	*head_seq = *head_mid ? first - 1 : first;
	atomic_fetch_sub(&oc->link->budget->used, oc->ring.cap);
	*kept = oc->ring;
	memset(&oc->ring, 0, sizeof(oc->ring));
	atomic_store(&oc->sent, 0);
}

/* Queue one kept frame on this channel, cut to its frame size (a kept
 * data frame may be larger: a publication kept for an absent peer). The
 * caller holds flush_lock: nothing else produces or flushes meanwhile. */
static void
put_kept(struct outchan *oc, struct wire_frame *f, const uint8_t *payload)
{
	uint8_t hdr[WIRE_HDR_MAX];
	struct wire_frame g = *f;
	bool first, last;
	uint64_t off = 0;

	if (f->len <= oc->link->frame_max) {
		ring_put(&oc->ring, hdr, wire_header_encode(hdr, f), payload, (size_t)f->len);
		note_ready(oc);
		return;
	}
	if (f->type == WIRE_DATA) { /* one message: a first chunk that is also the last */
		g.type = WIRE_CHUNK;
		g.flags |= WIRE_FLAG_FIRST | WIRE_FLAG_LAST;
		g.total = f->len;
	}
	first = g.flags & WIRE_FLAG_FIRST;
	last = g.flags & WIRE_FLAG_LAST;
	do {
		struct wire_frame p = g;
		uint64_t n = g.len - off < oc->link->frame_max ? g.len - off : oc->link->frame_max;
		p.flags &= ~(WIRE_FLAG_SEQ | WIRE_FLAG_FIRST | WIRE_FLAG_LAST | WIRE_FLAG_STAMP);
		if (first && off == 0) {
			p.flags |= WIRE_FLAG_FIRST | (g.flags & (WIRE_FLAG_SEQ | WIRE_FLAG_STAMP));
		}
		if (last && off + n == g.len) {
			p.flags |= WIRE_FLAG_LAST;
		}
		p.len = n;
		ring_put(&oc->ring, hdr, wire_header_encode(hdr, &p), payload + off, (size_t)n);
		off += n;
	} while (off < g.len);
	note_ready(oc);
}

int
outchan_resume(struct outchan *oc, struct ring *kept, uint64_t head_seq, bool head_mid)
{
	size_t off = 0, used = ring_used(kept), cap = 0, old, hlen;
	struct wire_frame f;
	uint8_t *payload = NULL;
	uint64_t seq = head_seq;
	bool skip = head_mid;
	int messages = 0;

	pthread_mutex_lock(oc->link->flush_lock);
	old = oc->ring.cap;
	/* room for every kept frame, cut into pieces with headers of their own */
	if (ring_grow(&oc->ring, 2 * used + 4096) != 0) {
		used = 0;
	}
	atomic_fetch_add(&oc->link->budget->used, oc->ring.cap - old);
	for (size_t at = 0; used > 0 && frames_next(kept, &off, &f, &hlen); at = off) {
		bool starts = frames_starts_message(&f);
		if (skip && !starts) {
			/* the rest of a message whose start the peer consumed before the
			 * break: it cannot be completed, and shows as missed */
			if (f.flags & WIRE_FLAG_LAST) {
				seq++;
				skip = false;
			}
			continue;
		}
		skip = false;
		if (starts && (f.flags & WIRE_FLAG_SEQ)) {
			seq = f.seq;
		}
		f.channel = oc->id;
		f.flags &= ~WIRE_FLAG_SEQ;
		if (starts && seq != oc->last_seq + 1) {
			f.flags |= WIRE_FLAG_SEQ;
			f.seq = seq;
			note_jump(oc, seq);
		}
		if (f.len > cap) {
			uint8_t *p = realloc(payload, (size_t)f.len);
			if (p == NULL) {
				break;
			}
			payload = p;
			cap = (size_t)f.len;
		}
		messages += starts;
		ring_peek(kept, at + hlen, payload, (size_t)f.len);
		put_kept(oc, &f, payload);
		if (starts) {
			oc->last_seq = seq;
		}
		if (f.type == WIRE_DATA || (f.flags & WIRE_FLAG_LAST)) {
			seq++;
		}
	}
	pthread_mutex_unlock(oc->link->flush_lock);
	free(payload);
	return messages;
}
