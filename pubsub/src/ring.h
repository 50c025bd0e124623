/*
 * ring.h - a single-producer single-consumer byte ring.
 *
 * Channel send queues and pull-subscriber queues are rings: the producer
 * (a publishing thread, or the I/O thread) appends whole records, the
 * consumer takes bytes from the head. Indices only grow; the capacity is a
 * power of two, so positions are masked, never compared after wrapping.
 * The producer side must be serialised by its owner (a mutex when several
 * threads may produce).
 */
#ifndef TERN_RING_H
#define TERN_RING_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

/*
 * The consumer's and the producer's positions lie 64 bytes apart, which
 * puts them on different cache lines wherever the ring is, so that each
 * side writes only its own; each side also keeps the last position it read
 * of the other, and reads the shared one again only when that copy says
 * the ring is full (producer) or empty (consumer). Only the space between
 * them is padding: a channel has a ring, and a router a channel a key.
 */
#define RING_LINE 64

struct ring {
	uint8_t *buf;
	size_t cap;
	_Atomic size_t head; /* consumer position */
	size_t tail_seen;    /* consumer's copy of tail */
	char pad[RING_LINE - 2 * sizeof(size_t)];
	_Atomic size_t tail; /* producer position, RING_LINE after head */
	size_t head_seen;    /* producer's copy of head */
};

/* TERN_ENOMEM when min_cap is more than any power of two in a size_t, or
 * memory is short. */
int ring_init(struct ring *r, size_t min_cap);
void ring_free(struct ring *r);

/* Producer side. */
size_t ring_space(const struct ring *r);
/* Is there room for n bytes? Reads the consumer's position only when the
 * producer's copy of it says no. */
bool ring_has_space(struct ring *r, size_t n);
/* Copy a then b (either may be empty) at the tail; the caller checked the space. */
void ring_put(struct ring *r, const void *a, size_t alen, const void *b, size_t blen);

/* A ring may also start empty (zeroed: cap 0, no buffer; it has no space)
 * and be given its buffer by its first ring_grow, from this size up. */
#define RING_CAP_FIRST 256

/* Grow to hold at least min_cap bytes, keeping the contents. Only while
 * neither side is using the ring (the caller holds both sides' locks).
 * TERN_ENOMEM, the ring unchanged, as for ring_init. */
int ring_grow(struct ring *r, size_t min_cap);
/* Give the buffer back: the ring is as one never allocated (cap 0). Only
 * an empty ring, while neither side is using it. */
void ring_release(struct ring *r);

/* Consumer side. */
size_t ring_used(const struct ring *r);
/* Bytes the consumer can read, reading the producer's position only when
 * the consumer's copy of it says the ring is empty. */
size_t ring_readable(struct ring *r);
/* Up to two iovecs covering [head + off, head + off + len). Returns how many. */
int ring_iov(const struct ring *r, size_t off, size_t len, struct iovec iov[2]);
/* Copy len bytes from head + off into out. */
void ring_peek(const struct ring *r, size_t off, void *out, size_t len);
void ring_consume(struct ring *r, size_t n);
/* n bytes at head + off: a pointer into the ring when they are contiguous
 * (almost always), else copied to tmp. */
const uint8_t *ring_view(const struct ring *r, size_t off, size_t n, uint8_t *tmp);

#endif
