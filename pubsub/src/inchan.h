/*
 * inchan.h - the receiving side of one channel: credit it grants, chunks it
 * reassembles, and the frames it keeps (its backlog) while whoever takes
 * its messages cannot take them yet.
 *
 * A frame goes through stages: a data frame is delivered whole (to local
 * subscribers and onward channels at once); a chunk is first forwarded
 * onward, then reassembled for local subscribers, and the completed
 * message delivered. Where a stage must wait, the frame and its stage are
 * kept, and the channel's later frames queue behind it, so order holds.
 * Flow control bounds the backlog by the channel's window.
 *
 * Reassembly starts only at a first chunk: a subscriber that appears in
 * the middle of a large message gets the next whole one.
 *
 * Threads: only the I/O thread of the node touches an inchan; the upward
 * calls (struct inchan_ops) run there, while a read is being parsed.
 */
#ifndef TERN_INCHAN_H
#define TERN_INCHAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "credit.h"
#include "reasm.h"
#include "wire.h"

struct inchan_ops {
	/*
	 * A whole message. whole: a data frame, for local subscribers and
	 * onward channels; !whole: a reassembled message, for local subscribers
	 * only (its chunks went onward already). heap: the malloc'ed buffer
	 * holding data, or NULL; a taker that keeps it sets *heap to NULL.
	 * Returns false when it cannot be taken yet (it is offered again).
	 * stamp: the publish time the message carried (the peer's wall clock,
	 * microseconds), or 0.
	 */
	bool (*deliver)(void *arg, void *from, uint64_t seq, uint64_t stamp, const uint8_t *data,
	                size_t len, uint8_t **heap, bool whole);
	/* One chunk for onward channels; false: try again later. */
	bool (*forward)(void *arg, void *from, const struct wire_frame *f, uint64_t seq,
	                const uint8_t *payload);
	/* Was the message with this number delivered already (another path)? */
	bool (*duplicate)(void *arg, uint64_t seq);
	/* A message with this number begins (the taker counts gaps). */
	void (*started)(void *arg, uint64_t seq);
	/* Does anyone here want whole messages (a local subscriber)? */
	bool (*wants_whole)(void *arg);
};

/* Reassembly of chunked messages for local subscribers: allocated at the
 * first such message, so a channel that carries only small ones (or only
 * passes chunks on) does without. */
struct inchan_whole {
	struct reasm reasm;
	uint64_t stamp;    /* of the message in progress, or 0 */
	uint8_t *done_buf; /* a reassembled message waiting for delivery */
	uint64_t done_len, done_seq;
};

struct inchan {
	uint32_t id;
	int stage;  /* progress on the frame at the head */
	void *from; /* the connection, for the ops */
	const struct inchan_ops *ops;
	void *arg; /* the session's source */
	struct credit_rx credit;
	uint64_t next_seq;
	struct inchan_whole *whole; /* NULL until a message is reassembled */
	/* frames that could not be delivered yet, in arrival order */
	uint8_t *backlog;
	size_t blen, bcap, boff;
	uint64_t grant_pending; /* credit to send with the next acknowledgement */
	uint64_t acked;         /* consumed bytes last reported to the sender */
	uint64_t rate_t0_us;    /* consumption measured since then ... */
	uint64_t rate_bytes0;   /* ... from this many bytes consumed */
	bool skip_chunks;       /* the chunked message in progress is a duplicate */
	bool stalled;           /* frames wait in the backlog */
	bool dirty;             /* something to acknowledge */
	/* the sender reported BLOCKED before there was anything to weigh (no
	 * round trip timed, or none of its data consumed since the last
	 * report): weigh it at the next acknowledgement that has */
	bool blocked_unweighed;
	/* the connection's: on its list of channels to acknowledge, of
	 * channels with a backlog, of channels keeping an emptied backlog's
	 * buffer */
	bool on_dirty, on_stalled, on_spare;
};

/* Limits a frame is held to: the node's max_message_bytes, and what the
 * connection may still allocate for reassembly (charged and refunded). */
struct inchan_limits {
	uint64_t max_message;
	uint64_t *budget;
};

int inchan_new(struct inchan **out, uint32_t id, uint64_t window, uint64_t window_max,
               const struct inchan_ops *ops, void *arg, void *from);
void inchan_free(struct inchan *in, uint64_t *budget);

/*
 * A data or chunk frame arrived (hlen: its header's length). seq_explicit:
 * the frame carries its sequence number. Returns 1 when taken, 0 when kept
 * in the backlog (the channel is now stalled: call inchan_retry later), or
 * a negative error (the peer broke the protocol: close the connection).
 */
int inchan_receive(struct inchan *in, const struct wire_frame *f, size_t hlen,
                   const uint8_t *payload, const struct inchan_limits *lim);
/* Offer the backlog again: 1 once it is empty, 0 if it must wait still,
 * or a negative error. An emptied backlog keeps its buffer for the next
 * stall: inchan_backlog_release gives it back. */
int inchan_retry(struct inchan *in, const struct inchan_limits *lim);
/* Free the backlog's buffer if it holds nothing: true if it did. */
bool inchan_backlog_release(struct inchan *in);

/* For a walk over many stalled channels: ask for a channel's state, then,
 * once that has arrived, for the head of its backlog, a step or two before
 * inchan_retry reads them, so that the cache misses overlap. */
static inline void
inchan_prefetch_state(const struct inchan *in)
{
	__builtin_prefetch(&in->backlog);
	__builtin_prefetch(&in->boff);
}

static inline void
inchan_prefetch_backlog(const struct inchan *in)
{
	if (in->backlog != NULL) {
		__builtin_prefetch(in->backlog + in->boff);
	}
}

/* The sender reports it ran out of credit: grow the window if the link
 * needs it (rtt_us: the connection's round trip; floor: see credit.h).
 * A report that cannot be weighed yet sets blocked_unweighed: call again
 * once the round trip is known and data was consumed. */
void inchan_blocked(struct inchan *in, uint64_t rtt_us, uint64_t floor);

/* A CREDIT message to send, if there is anything to report (clears it). */
bool inchan_ack(struct inchan *in, uint64_t *bytes, uint64_t *consumed);

#endif
