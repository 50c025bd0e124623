/*
 * control.h - control messages (handshake, declarations, credit, goodbye).
 *
 * Each control message is a MessagePack array whose first element is the
 * message type; it travels as the payload of a WIRE_CONTROL frame. Decoded
 * strings point into the input buffer (no copies, no allocation).
 */
#ifndef TERN_CONTROL_H
#define TERN_CONTROL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "wire.h"

enum ctl_type {
	CTL_HELLO = 1,
	CTL_SYNC = 2,
	CTL_SUB = 3,
	CTL_UNSUB = 4,
	CTL_OPEN = 5,
	CTL_CLOSE = 6,
	CTL_CREDIT = 7,
	CTL_BLOCKED = 8,
	CTL_PING = 9,
	CTL_PONG = 10,
	CTL_GOODBYE = 11,
	CTL_DENY = 12,
	CTL_SCOPE = 13,
	CTL_UNSCOPE = 14
};

#define CTL_LAST CTL_UNSCOPE

/* What a DENY refuses (docs/PROTOCOL.md): a subscription or a channel. */
enum ctl_deny_what { CTL_DENY_SUB = 0, CTL_DENY_OPEN = 1 };

#define CTL_ID_MAX   255
#define CTL_TEXT_MAX 1024
/* Largest encoded control message: a few strings of CTL_TEXT_MAX and ints. */
#define CTL_MSG_MAX WIRE_CONTROL_MAX

/*
 * Bounds on the numbers a peer sends (docs/PROTOCOL.md, "Bounds"): they
 * size queues, batches, frames and timers at the receiver, so ctl_decode
 * refuses a message with any of them out of range, naming the field. A
 * node's own configuration stays within them (tern_config's limits).
 */
#define CTL_BATCH_MIN     512u                 /* HELLO batch_max: batching.max_bytes */
#define CTL_BATCH_MAX     (64u << 20)          /* 64 MiB */
#define CTL_CHUNK_MIN     256u                 /* HELLO chunk: a chunk of 0 never ends a message */
#define CTL_CHUNK_MAX     (16u << 20)          /* 16 MiB */
#define CTL_WINDOW_MIN    4096u                /* HELLO window: a node's first window, ... */
#define CTL_WINDOW_MAX    (2u * CTL_CHUNK_MAX) /* ... at most twice the largest chunk */
#define CTL_KEEPALIVE_MIN 1u
#define CTL_KEEPALIVE_MAX 3600000u /* an hour */
#define CTL_CHANNEL_MAX   WIRE_CHANNEL_MAX
#define CTL_CREDIT_MAX    (1ull << 40) /* CREDIT and BLOCKED bytes */
#define CTL_CONSUMED_MAX  (1ull << 62) /* CREDIT consumed: a running total */

/*
 * What an UNSUB says. WITHDRAWN: this link no longer leads to the
 * subscription (it may still exist). ENDED: the subscription itself ended
 * (its node closed it or left); the receiver passes it on and answers
 * with ENDED_ACK, which is never answered (docs/PROTOCOL.md, "Routing").
 */
enum ctl_unsub_end { CTL_UNSUB_WITHDRAWN = 0, CTL_UNSUB_ENDED = 1, CTL_UNSUB_ENDED_ACK = 2 };

struct ctl_str {
	const char *p;
	size_t len;
};

struct ctl_msg {
	int type;
	union {
		struct {
			struct ctl_str id;
			uint64_t mode;
			bool low_latency;
			uint64_t batch_max;
			uint64_t chunk;
			uint64_t max_message;
			uint64_t window;
			uint64_t keepalive_ms;
		} hello;
		struct {
			struct ctl_str origin;
			uint64_t sub_id;
			uint64_t hops;
			struct ctl_str keyexpr;
			uint64_t end; /* CTL_UNSUB: enum ctl_unsub_end */
		} sub;                /* CTL_SUB; CTL_UNSUB uses origin, sub_id and end */
		struct {
			uint64_t channel;
			struct ctl_str publisher;
			struct ctl_str key;
			uint64_t reliability;
			uint64_t instance; /* tells apart restarts of a publisher with one name */
		} open;
		struct {
			uint64_t channel;
			uint64_t bytes;    /* CTL_CREDIT: bytes granted; CTL_BLOCKED: informative */
			uint64_t consumed; /* CTL_CREDIT: bytes consumed since the channel opened */
		} credit;                  /* CTL_CREDIT, CTL_BLOCKED, CTL_CLOSE (channel only) */
		struct {
			uint64_t token;   /* CTL_PING, CTL_PONG (echoed) */
			uint64_t time_us; /* CTL_PONG: the answering node's wall clock,
			                     microseconds since the Unix epoch */
		};
		struct ctl_str reason; /* CTL_GOODBYE */
		struct ctl_str scope;  /* CTL_SCOPE, CTL_UNSCOPE: a key expression */
		struct {
			uint64_t what;       /* enum ctl_deny_what */
			struct ctl_str name; /* SUB: its origin; OPEN: its publisher */
			uint64_t id;         /* SUB: its sub id; OPEN: its channel */
			struct ctl_str key;  /* SUB: its key expression; OPEN: its key */
			struct ctl_str reason;
		} deny; /* CTL_DENY */
	} u;
};

/* "peer", "router" or "client": a HELLO's mode (enum tern_mode). */
const char *ctl_mode_name(uint64_t mode);

/* Encode into out (cap bytes). Returns the length, or TERN_EINVAL if it does not fit. */
int ctl_encode(const struct ctl_msg *m, uint8_t *out, size_t cap);

/* Decode exactly len bytes. 0 or TERN_EPROTO (any malformed, truncated or
 * trailing input, or a number beyond its bound). */
int ctl_decode(const uint8_t *p, size_t len, struct ctl_msg *m);

/* The same; on refusal, a sentence in why naming the message and the field
 * ("HELLO window is 4294967296, outside 4096..33554432"). */
int ctl_decode_explain(const uint8_t *p, size_t len, struct ctl_msg *m, char *why, size_t why_len);

#endif
