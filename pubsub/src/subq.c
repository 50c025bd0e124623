/*
 * subq.c - a pull subscriber's queue of entries. See subq.h.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clock.h"
#include "subq.h"

struct entry_hdr {
	uint32_t size; /* the whole entry, a multiple of 8; 0: skip to the ring's start */
	uint32_t len;
	uint16_t key_len;
	uint16_t pub_len;
	uint32_t heap;
	uint64_t seq;
};

static size_t
round8(size_t n)
{
	return (n + 7) & ~(size_t)7;
}

static size_t
entry_head(const struct subq_src *s)
{
	return round8(sizeof(struct entry_hdr) + s->key_len + 1 + s->publisher_len + 1);
}

int
subq_init(struct subq *q, size_t cap, size_t heap_max, void (*wake)(void *), void *wake_arg)
{
	memset(q, 0, sizeof(*q));
	q->cap_first = cap;
	pthread_mutex_init(&q->lock, NULL);
	pthread_cond_init(&q->cond, NULL);
	q->wake = wake;
	q->wake_arg = wake_arg;
	q->heap_max = heap_max;
	return 0;
}

size_t
subq_entry_size(const struct subq_src *s, size_t len, bool heap)
{
	return entry_head(s) + (heap ? sizeof(void *) : round8(len));
}

static bool
heap_room(struct subq *q, size_t heap_len)
{
	size_t used = atomic_load(&q->heap_bytes);

	return heap_len == 0 || used == 0 || used + heap_len <= q->heap_max;
}

/* The ring is allocated at the first entry: most of many thousand
 * subscriptions may never get a message, and an allocation that large
 * costs a page of the heap even untouched. The reader looks at buf and cap
 * only after it saw an entry (the tail's release orders them). */
static bool
ring_ready(struct subq *q)
{
	if (q->ring.buf != NULL) {
		return true;
	}
	q->ring.buf = malloc(q->cap_first);
	if (q->ring.buf == NULL) {
		return false;
	}
	q->ring.cap = q->cap_first;
	return true;
}

bool
subq_room(struct subq *q, size_t entry, size_t heap_len)
{
	if (!ring_ready(q)) {
		return false;
	}
	size_t to_end = q->ring.cap - (atomic_load_explicit(&q->ring.tail, memory_order_relaxed) &
	                               (q->ring.cap - 1));
	size_t need = entry + (to_end < entry ? to_end : 0);

	if (ring_has_space(&q->ring, need) && heap_room(q, heap_len)) {
		return true;
	}
	atomic_store(&q->stalled, true);
	/* the reader may have made room between the check and the flag */
	atomic_thread_fence(memory_order_seq_cst);
	q->ring.head_seen = atomic_load(&q->ring.head);
	return ring_has_space(&q->ring, need) && heap_room(q, heap_len);
}

void
subq_push(struct subq *q, const struct subq_src *s, uint64_t seq, const uint8_t *data, size_t len,
          uint8_t *heap)
{
	struct ring *r = &q->ring;
	size_t head = entry_head(s);
	size_t size = head + (heap != NULL ? sizeof(void *) : round8(len));
	size_t tail = atomic_load_explicit(&r->tail, memory_order_relaxed);
	size_t at = tail & (r->cap - 1);
	struct entry_hdr h = {.size = (uint32_t)size,
	                      .len = (uint32_t)len,
	                      .key_len = (uint16_t)s->key_len,
	                      .pub_len = (uint16_t)s->publisher_len,
	                      .heap = heap != NULL,
	                      .seq = seq};

	if (r->cap - at < size) { /* skip the end of the ring */
		if (r->cap - at >= sizeof(h)) {
			struct entry_hdr skip = {.size = 0};
			memcpy(r->buf + at, &skip, sizeof(skip));
		}
		tail += r->cap - at;
		at = 0;
	}
	uint8_t *w = r->buf + at;
	memcpy(w, &h, sizeof(h));
	memcpy(w + sizeof(h), s->key, h.key_len);
	w[sizeof(h) + h.key_len] = '\0';
	memcpy(w + sizeof(h) + h.key_len + 1, s->publisher, h.pub_len);
	w[sizeof(h) + h.key_len + 1 + h.pub_len] = '\0';
	if (heap != NULL) {
		memcpy(w + head, &heap, sizeof(heap));
		atomic_fetch_add(&q->heap_bytes, len);
	} else {
		memcpy(w + head, data, len);
	}
	atomic_store_explicit(&r->tail, tail + size, memory_order_release);
}

void
subq_signal(struct subq *q)
{
	if (atomic_load(&q->waiting)) {
		pthread_cond_signal(&q->cond);
	}
}

static void
wake_if_stalled(struct subq *q)
{
	if (atomic_load_explicit(&q->stalled, memory_order_relaxed) &&
	    atomic_exchange(&q->stalled, false)) {
		q->wake(q->wake_arg); /* a producer waits for room here */
	}
}

/* The producer marks a queue stalled, then looks at head once more; we
 * move head, then look at the flag. Without a fence between the two the
 * store of head may still sit in this core's store buffer while both sides
 * read the other's old value. A recv that finds entries needs no fence: a
 * later recv sees the flag. One that finds the queue empty (about to wait,
 * or to return for a poll) fences first, so that a missed flag never
 * leaves the producer waiting for room it does not know of. */
static bool
queue_empty(struct subq *q)
{
	if (ring_readable(&q->ring) > 0) {
		return false;
	}
	atomic_thread_fence(memory_order_seq_cst);
	wake_if_stalled(q);
	return ring_readable(&q->ring) == 0;
}

/* The entry at the head, past any unused end of the ring. */
static const struct entry_hdr *
head_entry(struct subq *q)
{
	struct ring *r = &q->ring;

	for (;;) {
		size_t at = atomic_load_explicit(&r->head, memory_order_relaxed) & (r->cap - 1);
		const struct entry_hdr *h = (const struct entry_hdr *)(void *)(r->buf + at);
		if (r->cap - at >= sizeof(*h) && h->size != 0) {
			return h;
		}
		ring_consume(r, r->cap - at);
	}
}

/* Release the entry handed out by the previous recv. */
static void
release_previous(struct subq *q)
{
	if (q->consume_next > 0) {
		ring_consume(&q->ring, q->consume_next);
		q->consume_next = 0;
	}
	if (q->heap != NULL) {
		free(q->heap);
		q->heap = NULL;
		atomic_fetch_sub(&q->heap_bytes, q->heap_len);
	}
	wake_if_stalled(q);
}

void
subq_free(struct subq *q)
{
	release_previous(q);
	while (ring_used(&q->ring) > 0) {
		const struct entry_hdr *h = head_entry(q);
		if (h->heap) {
			void *p;
			memcpy(&p, (const uint8_t *)h + h->size - sizeof(p), sizeof(p));
			free(p);
		}
		ring_consume(&q->ring, h->size);
	}
	ring_free(&q->ring);
	pthread_mutex_destroy(&q->lock);
	pthread_cond_destroy(&q->cond);
}

static int
wait_entry(struct subq *q, int timeout_ms)
{
	struct timespec ts;

	if (!queue_empty(q)) {
		return 0;
	}
	if (atomic_load(&q->fail) != 0) {
		return atomic_load(&q->fail);
	}
	if (timeout_ms == 0) {
		return TERN_ETIMEDOUT;
	}
	ts = clock_deadline_in(timeout_ms > 0 ? (uint64_t)timeout_ms : 0);
	pthread_mutex_lock(&q->lock);
	atomic_store(&q->waiting, 1);
	while (ring_readable(&q->ring) == 0 && atomic_load(&q->fail) == 0) {
		int rc = timeout_ms < 0 ? pthread_cond_wait(&q->cond, &q->lock)
		                        : pthread_cond_timedwait(&q->cond, &q->lock, &ts);
		if (rc == ETIMEDOUT) {
			break;
		}
	}
	atomic_store(&q->waiting, 0);
	pthread_mutex_unlock(&q->lock);
	if (ring_readable(&q->ring) > 0) {
		return 0;
	}
	return atomic_load(&q->fail) != 0 ? atomic_load(&q->fail) : TERN_ETIMEDOUT;
}

void
subq_fail(struct subq *q, int err)
{
	pthread_mutex_lock(&q->lock);
	atomic_store(&q->fail, err);
	pthread_cond_broadcast(&q->cond);
	pthread_mutex_unlock(&q->lock);
}

int
subq_recv(struct subq *q, tern_msg *msg, int timeout_ms)
{
	const struct entry_hdr *h;
	const uint8_t *e;
	int rc;

	release_previous(q);
	if ((rc = wait_entry(q, timeout_ms)) != 0) {
		return rc;
	}
	h = head_entry(q);
	e = (const uint8_t *)h;
	msg->key = (const char *)e + sizeof(*h);
	msg->publisher = (const char *)e + sizeof(*h) + h->key_len + 1;
	msg->seq = h->seq;
	msg->len = h->len;
	if (h->heap) {
		memcpy(&q->heap, e + h->size - sizeof(void *), sizeof(q->heap));
		q->heap_len = h->len;
		msg->data = q->heap;
	} else {
		msg->data = e + h->size - round8(h->len);
	}
	q->consume_next = h->size;
	return 0;
}
