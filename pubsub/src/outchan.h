/*
 * outchan.h - the sending side of one channel: a ring of whole frames, the
 * credit the receiver granted, and for reliable channels the frames kept
 * until the receiver reports them consumed.
 *
 * The ring's head is the oldest frame still held; a reliable channel keeps
 * `sent` bytes past the head that were written but not acknowledged; what
 * follows waits for the socket. A best-effort channel drops frames as soon
 * as they are written.
 *
 * Threads and locks (the owner, conn.c, holds `flush_lock` while it reads
 * the ring; the session decides who produces):
 *  - producer (outchan_send, outchan_forward, outchan_resume): one thread
 *    at a time, serialised by the producer's owner (a publisher's send
 *    lock, or the I/O thread for forwarded traffic);
 *  - consumer (outchan_take, outchan_settle, outchan_release): whoever
 *    holds flush_lock;
 *  - outchan_on_credit and the stall clock: the I/O thread;
 *  - growing the ring excludes the consumer by taking flush_lock;
 *  - giving an idle ring's buffer back (outchan_shrink_idle) excludes
 *    both: the producer through ops->hold, the consumer by flush_lock;
 *  - `credit`, `sent`, `broken`, `detached` and the time stamps are atomic:
 *    producers read them without a lock.
 * The upward calls (struct outchan_ops) run on whichever thread made room
 * or queued the frame, with flush_lock held only for `wake` from settle.
 */
#ifndef TERN_OUTCHAN_H
#define TERN_OUTCHAN_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "ring.h"
#include "wire.h"

struct outchan;

/* What a connection's send rings may hold in all: queue.max_bytes. */
struct outchan_budget {
	_Atomic uint64_t used;
	uint64_t max;
};

/* A connection's channels that have frames to write, newly: a producer
 * that queues on a channel not listed yet pushes it here (lock-free, any
 * thread); whoever flushes the connection takes them all. */
struct outchan_ready {
	struct outchan *_Atomic head;
};

struct outchan_ops {
	/* Room may have opened, or the channel broke: a publisher waiting for
	 * room looks again. Any thread; must not block. */
	void (*wake)(void *arg);
	/* A frame of `len` bytes is about to be queued (before), or was queued
	 * (!before): the writer decides who writes it and when. Producer's
	 * thread. */
	void (*queued)(void *owner, struct outchan *oc, size_t len, bool before);
	/* Keep the channel's producer out, without waiting (called on the I/O
	 * thread with no lock held): false if it is busy. Then unhold. For
	 * giving an idle ring's buffer back; NULL: never given back. */
	bool (*hold)(void *arg);
	void (*unhold)(void *arg);
};

/* How a channel ended, as far as a publisher is concerned. */
enum outchan_broken {
	OUTCHAN_OK = 0,
	OUTCHAN_LOST,   /* the connection broke: the peer may come back */
	OUTCHAN_DROPPED /* the peer left or was dropped: nothing to resume */
};

/* What the send channels of one connection share: set by the connection
 * before it opens the first, read-only while any is open. */
struct outchan_link {
	pthread_mutex_t *flush_lock;
	struct outchan_budget *budget;
	struct outchan_ready *ready; /* where a channel is listed when it has data */
	void *owner;                 /* for ops->queued: the connection */
	uint64_t peer_window;        /* the peer's first grant */
	size_t ring_min;             /* a ring holds at least this */
	uint32_t frame_max;          /* largest frame payload the peer accepts (>= 1) */
};

struct outchan_params {
	uint32_t id;
	bool reliable;
	const struct outchan_link *link;
	const struct outchan_ops *ops;
	void *arg;         /* for ops->wake: the session's source */
	const char *label; /* the key, for messages; must outlive the channel */
};

#define OUTCHAN_JUMPS 16

/* The latest gaps in a channel's numbers (a message numbered to[k]
 * followed from[k]), for outchan_take_kept; allocated at the first gap. */
struct outchan_jumps {
	uint64_t to[OUTCHAN_JUMPS], from[OUTCHAN_JUMPS];
	unsigned n;
};

struct outchan {
	uint32_t id;
	int slot; /* the connection's, under flush_lock: its place in its table */
	const struct outchan_link *link;
	const struct outchan_ops *ops;
	void *arg;
	const char *label;

	/*
	 * The fields are grouped by who writes them, so that a flush walking
	 * many channels does not find the lines it reads taken away by the
	 * producers' per-message writes (what a line holds still depends on
	 * where the allocation starts).
	 *
	 * The connection's, under flush_lock: its list of channels with data
	 * to send, and its list of channels that keep written frames until
	 * acknowledged.
	 */
	bool retain; /* reliable: frames are kept until consumed */
	bool on_act, on_kept, on_blocked;
	bool want_blocked; /* data waits for credit, tell the peer */
	bool on_grown;     /* on its list of channels whose rings grew (to give back when idle) */
	bool on_credited;  /* I/O thread: listed for a CREDIT's release (ack_due) */
	struct outchan *act_next, *act_prev;
	struct outchan *kept_next, *kept_prev;
	/* I/O thread: the consumed total of a CREDIT not yet released */
	uint64_t ack_due;
	uint64_t acked;                   /* I/O thread: bytes the peer reported consumed */
	uint64_t freed;                   /* I/O thread: bytes released from the ring */
	uint64_t rate_t0_ms, rate_acked0; /* I/O thread: where the rate's measure started */

	struct ring ring; /* empty (cap 0) until the first message */

	/* the producer's, written per message: counters read by any thread */
	_Atomic uint64_t messages, bytes, dropped;
	uint64_t last_seq;           /* the last sequence number queued */
	struct outchan_jumps *jumps; /* NULL until the first gap */
	/* Listing: a channel with unsent frames is on its connection's list
	 * (or pushed on `ready` for it), so that a flush looks at the channels
	 * with data, not at every channel. `listed` is set by whoever lists
	 * it and cleared only by the connection, under flush_lock, when the
	 * channel has nothing left to send. */
	atomic_bool listed;
	bool fwd_open; /* producer: a forwarded chunked message is open */
	/* both sides, rarely written (here to fill the line's gap) */
	atomic_bool detached;     /* no longer routed: the session closes it */
	atomic_bool blocked_sent; /* a BLOCKED report went out since the last credit */
	atomic_int broken;        /* enum outchan_broken */
	struct outchan_ready *ready;
	struct outchan *ready_next;

	/* both sides */
	_Atomic int64_t credit;            /* bytes the receiver still accepts */
	_Atomic size_t sent;               /* written, kept until acknowledged (reliable) */
	_Atomic uint64_t starved_since_ms; /* since when data waits on the peer, or 0 */
	_Atomic uint64_t last_ack_ms;      /* when the peer last reported progress */
	_Atomic uint64_t last_write_ms;    /* when the socket last took this channel's data */
	_Atomic uint64_t rate_Bps;         /* consumed bytes a second, over the last second */
};

int outchan_new(struct outchan **out, const struct outchan_params *p);
void outchan_free(struct outchan *oc);

static inline size_t
outchan_unsent(struct outchan *oc)
{
	return ring_used(&oc->ring) - atomic_load_explicit(&oc->sent, memory_order_relaxed);
}

/*
 * A flush walks channels that producers on other cores have just written:
 * each one's positions and first frame are cache misses, taken one after
 * another. A walk asks for them a step or two ahead (outchan_prefetch_state,
 * then outchan_prefetch_data once that has arrived) so they overlap.
 */
static inline void
outchan_prefetch_state(const struct outchan *oc)
{
	__builtin_prefetch(&oc->act_next);
	__builtin_prefetch(&oc->ring.head);
	__builtin_prefetch(&oc->ring.tail);
	__builtin_prefetch(&oc->sent);
}

static inline void
outchan_prefetch_data(const struct outchan *oc)
{
	size_t at = atomic_load_explicit(&oc->ring.head, memory_order_relaxed) +
	            atomic_load_explicit(&oc->sent, memory_order_relaxed);

	if (oc->ring.cap > 0) {
		__builtin_prefetch(oc->ring.buf + (at & (oc->ring.cap - 1)));
	}
}

/* ---- producer ---- */

/* Room for a message of len bytes as it would be framed here, the ring
 * grown for it while it is smaller than ring_min (takes flush_lock). */
bool outchan_has_room(struct outchan *oc, size_t len);
/* The same without growing: for a caller that holds a lock that comes
 * after flush_lock. */
bool outchan_has_space(struct outchan *oc, size_t len);
/* Room, or the ring grown for it where the queue may grow: the window
 * outgrew the ring, or the peer is stalled (see outchan.c); force: grow
 * within the budget whatever the peer does (a producer that cannot wait). */
bool outchan_room_or_grow(struct outchan *oc, size_t len, bool force);

/* How a producer waits for room; room() returns false to give up. */
struct outchan_wait {
	bool (*room)(void *ctx, struct outchan *oc, size_t len);
	void *ctx;
};

/*
 * Queue one message: a data frame, or chunks of at most frame_max bytes.
 * Without room: wait through w if may_wait, else drop it. A chunked message
 * once started is finished, waiting through w (if any) even when may_wait
 * is false, so the receiver rarely holds a half message. 0, or TERN_ECLOSED
 * (the channel broke or was detached), TERN_ETIMEDOUT (w gave up),
 * TERN_EAGAIN (no room, no waiting).
 */
int outchan_send_stamped(struct outchan *oc, uint64_t seq, uint64_t stamp_us, const uint8_t *data,
                         size_t len, bool may_wait, const struct outchan_wait *w);
/* The same with no publish stamp (stamp_us 0: none; see WIRE_FLAG_STAMP). */
static inline int
outchan_send(struct outchan *oc, uint64_t seq, const uint8_t *data, size_t len, bool may_wait,
             const struct outchan_wait *w)
{
	return outchan_send_stamped(oc, seq, 0, data, len, may_wait, w);
}

/*
 * Forward one chunk of a message received on another connection, cut to
 * this channel's frame size. A channel opened while a message was under way
 * starts at the next message's first chunk: the receiver could do nothing
 * with the middle of one. Without room: false (nothing queued), or with
 * drop_if_full the rest of the message is dropped on this channel.
 */
bool outchan_forward(struct outchan *oc, const struct wire_frame *f, uint64_t seq,
                     const uint8_t *payload, bool drop_if_full);
/* Room to forward this chunk (true for one the channel would skip). */
bool outchan_forward_room(struct outchan *oc, const struct wire_frame *f);

/* ---- consumer (flush_lock held) ---- */

/*
 * Whole frames of unsent data after `already` bytes, at most `limit` (at
 * least one frame if it fits in `room`) and within the credit, as iovecs
 * (at most 2). The credit is taken; outchan_settle gives back what the
 * socket did not take. Returns the bytes taken (0: none; then a BLOCKED
 * report is wanted: credit, or this batch's room, was short).
 */
size_t outchan_take(struct outchan *oc, size_t already, size_t limit, size_t room,
                    struct iovec iov[2], int *niov, uint64_t now_ms);
/*
 * The socket took `written` of the `taken` bytes. A frame it cut in two
 * must be finished before anything else is written: outchan_cut_end gives
 * the end of that frame (== written when nothing was cut), and the caller
 * copies [written, end) aside with outchan_copy_cut. Then outchan_settle
 * releases the first `done` (that end) bytes: a best-effort ring drops
 * them, a reliable one keeps them until acknowledged; whole frames not
 * written stay queued, and their credit comes back.
 */
size_t outchan_cut_end(struct outchan *oc, size_t taken, size_t written);
void outchan_copy_cut(struct outchan *oc, size_t from, uint8_t *out, size_t len);
void outchan_settle(struct outchan *oc, size_t taken, size_t done, bool wrote, uint64_t now_ms);
/* After outchan_take finds nothing more to send on a listed channel: unlist
 * it. False when frames arrived meanwhile (it stays listed). */
bool outchan_unlist(struct outchan *oc);

/* Data waits on the peer (no credit, or a full socket) from now on. */
void outchan_mark_starved(struct outchan *oc, uint64_t now_ms);

/* ---- I/O thread ---- */

/* A ring from this size up is worth giving back when idle; a smaller one
 * is what a key's few messages in flight need, and goes with its channel. */
#define OUTCHAN_SHRINK_MIN 4096

/* The ring holds nothing and the socket has taken nothing from it for ms:
 * a channel that was busy and is idle. flush_lock held. */
bool outchan_idle_for(struct outchan *oc, uint64_t now_ms, uint64_t ms);
/* If it is still (outchan_idle_for), give its ring's buffer back to the
 * budget and the heap: the next message allocates one again, from
 * RING_CAP_FIRST. flush_lock held and the producer kept out (ops->hold).
 * True if it did. */
bool outchan_shrink_idle(struct outchan *oc, uint64_t now_ms, uint64_t ms);

/* A CREDIT message: bytes granted, total consumed. Returns true if frames
 * wait that the new credit lets through. */
bool outchan_on_credit(struct outchan *oc, uint64_t bytes, uint64_t consumed, uint64_t now_ms);
/* The same in three steps, so that a connection takes flush_lock once for
 * the CREDITs of a whole read, not once each: outchan_credit takes the
 * credit and notes what was consumed, true if frames are to be released;
 * outchan_release_locked releases them (flush_lock held); outchan_credited
 * wakes the publishers and returns true if frames wait to be sent. */
bool outchan_credit(struct outchan *oc, uint64_t bytes, uint64_t consumed, uint64_t now_ms);
void outchan_release_locked(struct outchan *oc, uint64_t now_ms);
bool outchan_credited(struct outchan *oc);
/* The connection failed: publishers waiting on it give up. */
void outchan_break(struct outchan *oc, enum outchan_broken how);
/* Data (unsent, or written and not consumed) has waited on a peer that
 * consumed nothing for at least ms: a slow consumer. */
bool outchan_stalled_for(struct outchan *oc, uint64_t now_ms, uint64_t ms);

/*
 * Where the frames kept in the ring start: the sequence number of the
 * first message, and whether they begin inside a message (its first chunk
 * was consumed). Then hand the ring over (the channel is left empty).
 */
void outchan_take_kept(struct outchan *oc, struct ring *kept, uint64_t *head_seq, bool *head_mid);
/* Queue frames kept from an earlier channel (see outchan_take_kept),
 * renumbered for this one. Returns the messages queued. Caller is the
 * producer. */
int outchan_resume(struct outchan *oc, struct ring *kept, uint64_t head_seq, bool head_mid);

#endif
