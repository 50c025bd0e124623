/*
 * ring.c - SPSC byte ring. The tail is published with release order after
 * the bytes are written, and read with acquire order before they are read.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "ring.h"

_Static_assert(offsetof(struct ring, tail) - offsetof(struct ring, head) >= RING_LINE,
               "the two positions share no cache line");

/* The largest power of two a size_t holds. */
#define RING_CAP_MAX (SIZE_MAX / 2 + 1)

/* The capacity for at least min_cap bytes, doubling from cap; 0 when no
 * power of two holds it (doubling on would wrap to 0 and never end). */
static size_t
capacity_for(size_t cap, size_t min_cap)
{
	if (min_cap > RING_CAP_MAX) {
		return 0;
	}
	while (cap < min_cap) {
		cap <<= 1;
	}
	return cap;
}

int
ring_init(struct ring *r, size_t min_cap)
{
	size_t cap = capacity_for(4096, min_cap);

	if (cap == 0) {
		return TERN_ENOMEM;
	}
	r->buf = malloc(cap);
	if (r->buf == NULL) {
		return TERN_ENOMEM;
	}
	r->cap = cap;
	atomic_init(&r->head, 0);
	atomic_init(&r->tail, 0);
	r->head_seen = r->tail_seen = 0;
	return 0;
}

void
ring_free(struct ring *r)
{
	free(r->buf);
	r->buf = NULL;
}

int
ring_grow(struct ring *r, size_t min_cap)
{
	/* a ring never allocated (cap 0) starts at RING_CAP_FIRST */
	size_t cap = capacity_for(r->cap ? r->cap : RING_CAP_FIRST, min_cap), used = ring_used(r);
	uint8_t *buf;

	if (cap == 0) {
		return TERN_ENOMEM;
	}
	if (cap == r->cap) {
		/* big enough already: the consumer made room since the producer
		 * last looked (its copy of head is stale, which ring_has_space
		 * allows for) */
		return 0;
	}
	buf = malloc(cap);
	if (buf == NULL) {
		return TERN_ENOMEM;
	}
	if (used > 0) {
		ring_peek(r, 0, buf, used);
	}
	free(r->buf);
	r->buf = buf;
	r->cap = cap;
	atomic_store(&r->head, 0);
	atomic_store(&r->tail, used);
	r->head_seen = 0;
	r->tail_seen = used;
	return 0;
}

void
ring_release(struct ring *r)
{
	free(r->buf);
	r->buf = NULL;
	r->cap = 0;
	atomic_store(&r->head, 0);
	atomic_store(&r->tail, 0);
	r->head_seen = r->tail_seen = 0;
}

size_t
ring_space(const struct ring *r)
{
	size_t head = atomic_load_explicit(&r->head, memory_order_acquire);
	size_t tail = atomic_load_explicit(&r->tail, memory_order_relaxed);

	return r->cap - (tail - head);
}

bool
ring_has_space(struct ring *r, size_t n)
{
	size_t tail = atomic_load_explicit(&r->tail, memory_order_relaxed);
	size_t used = tail - r->head_seen;

	/* The copy of head may lag more than cap behind tail (a put that
	 * found room through ring_grow never looked at it): then it says
	 * more than cap is used, and only the real head tells. */
	if (used <= r->cap && r->cap - used >= n) {
		return true;
	}
	r->head_seen = atomic_load_explicit(&r->head, memory_order_acquire);
	return r->cap - (tail - r->head_seen) >= n;
}

size_t
ring_readable(struct ring *r)
{
	size_t head = atomic_load_explicit(&r->head, memory_order_relaxed);

	if (r->tail_seen == head) {
		r->tail_seen = atomic_load_explicit(&r->tail, memory_order_acquire);
	}
	return r->tail_seen - head;
}

size_t
ring_used(const struct ring *r)
{
	size_t tail = atomic_load_explicit(&r->tail, memory_order_acquire);
	size_t head = atomic_load_explicit(&r->head, memory_order_relaxed);

	return tail - head;
}

static void
copy_in(struct ring *r, size_t pos, const void *src, size_t len)
{
	size_t at = pos & (r->cap - 1);
	size_t first = r->cap - at < len ? r->cap - at : len;

	memcpy(r->buf + at, src, first);
	memcpy(r->buf, (const uint8_t *)src + first, len - first);
}

void
ring_put(struct ring *r, const void *a, size_t alen, const void *b, size_t blen)
{
	size_t tail = atomic_load_explicit(&r->tail, memory_order_relaxed);

	if (alen > 0) {
		copy_in(r, tail, a, alen);
	}
	if (blen > 0) {
		copy_in(r, tail + alen, b, blen);
	}
	atomic_store_explicit(&r->tail, tail + alen + blen, memory_order_release);
}

int
ring_iov(const struct ring *r, size_t off, size_t len, struct iovec iov[2])
{
	size_t at = (atomic_load_explicit(&r->head, memory_order_relaxed) + off) & (r->cap - 1);
	size_t first = r->cap - at < len ? r->cap - at : len;

	iov[0].iov_base = r->buf + at;
	iov[0].iov_len = first;
	if (first == len) {
		return 1;
	}
	iov[1].iov_base = r->buf;
	iov[1].iov_len = len - first;
	return 2;
}

void
ring_peek(const struct ring *r, size_t off, void *out, size_t len)
{
	struct iovec iov[2];
	int n = ring_iov(r, off, len, iov);

	memcpy(out, iov[0].iov_base, iov[0].iov_len);
	if (n == 2) {
		memcpy((uint8_t *)out + iov[0].iov_len, iov[1].iov_base, iov[1].iov_len);
	}
}

const uint8_t *
ring_view(const struct ring *r, size_t off, size_t n, uint8_t *tmp)
{
	size_t at = (atomic_load_explicit(&r->head, memory_order_relaxed) + off) & (r->cap - 1);

	if (r->cap - at >= n) {
		return r->buf + at;
	}
	ring_peek(r, off, tmp, n);
	return tmp;
}

void
ring_consume(struct ring *r, size_t n)
{
	size_t head = atomic_load_explicit(&r->head, memory_order_relaxed);

	atomic_store_explicit(&r->head, head + n, memory_order_release);
}
