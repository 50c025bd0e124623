/*
 * subq.h - the queue behind tern_sub_recv: a ring of entries, each a fixed
 * header, the key and the publisher id (each with its NUL), then the
 * payload, or for a message above SUBQ_INLINE_MAX a pointer to a buffer of
 * its own (so one large message never needs a ring as large as itself).
 *
 * An entry never wraps around the end of the ring: where it would, the
 * producer marks the rest of the ring unused and starts again at the
 * beginning. So recv hands out pointers into the ring, with no copy; an
 * entry handed out stays in the ring until the next recv.
 *
 * Buffers of their own count against heap_max (queue.max_bytes), so a
 * queue of large messages is bounded in bytes, not only in entries; one
 * such message is always let through, however large.
 *
 * Threads and locks: producers (the I/O thread, and publishing threads of
 * the same node) hold `lock` while they check for room and push; the one
 * reading thread consumes without it and waits on `cond` under it. When a
 * producer finds no room it sets `stalled`; the reader that makes room
 * calls `wake` (the I/O thread retries then).
 */
#ifndef TERN_SUBQ_H
#define TERN_SUBQ_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tern/tern.h"

#include "ring.h"

/* A larger message reaches a pull subscriber as a buffer of its own. */
#define SUBQ_INLINE_MAX 65536

struct subq {
	struct ring ring;
	pthread_mutex_t lock; /* producers; the reader waits here */
	pthread_cond_t cond;
	atomic_int waiting;      /* the reader waits on cond */
	atomic_bool stalled;     /* a producer is waiting for room */
	void (*wake)(void *arg); /* called by the reader when it made room */
	void *wake_arg;
	_Atomic size_t heap_bytes; /* in buffers of their own, queued or handed out */
	size_t heap_max;
	size_t cap_first;    /* the ring's size, allocated at the first entry */
	size_t consume_next; /* reader: bytes of the entry handed out last */
	void *heap;          /* reader: the large message handed out last */
	size_t heap_len;
	atomic_int fail; /* once set (subq_fail), what recv returns when empty */
};

/* What an entry says besides its payload. */
struct subq_src {
	const char *key;
	size_t key_len;
	const char *publisher;
	size_t publisher_len;
};

/* cap: a power of two, the ring's size once it holds an entry. */
int subq_init(struct subq *q, size_t cap, size_t heap_max, void (*wake)(void *), void *wake_arg);
/* Frees queued entries too. */
void subq_free(struct subq *q);

/* Producers, with q->lock held. */
size_t subq_entry_size(const struct subq_src *s, size_t len, bool heap);
/* Room for an entry, and for heap_len bytes in a buffer of its own. */
bool subq_room(struct subq *q, size_t entry, size_t heap_len);
/* Append an entry (room checked): heap NULL copies data into the ring,
 * else the queue takes heap (a buffer of len bytes). */
void subq_push(struct subq *q, const struct subq_src *s, uint64_t seq, const uint8_t *data,
               size_t len, uint8_t *heap);
/* After pushing: wake the reader if it waits (q->lock still held). */
void subq_signal(struct subq *q);

/* No more entries will come: recv returns err (negative) once the queue is
 * empty, and a waiting reader wakes. Any thread. */
void subq_fail(struct subq *q, int err);

/* Reader: the next entry, waiting up to timeout_ms (0: no wait, negative:
 * forever). 0, TERN_ETIMEDOUT, or the error given to subq_fail. */
int subq_recv(struct subq *q, tern_msg *msg, int timeout_ms);

#endif
