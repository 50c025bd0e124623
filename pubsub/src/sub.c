/*
 * sub.c - subscribers: callback delivery and the queue behind tern_sub_recv.
 *
 * A pull subscriber's queue is a ring of entries: a fixed header, the key
 * and the publisher id (each with its NUL), then the payload, or for a
 * message above 64 KiB a pointer to a buffer of its own (so one large
 * message never needs a ring as large as itself). An entry never wraps
 * around the end of the ring: where it would, the producer marks the rest
 * of the ring as unused and starts again at the beginning. So recv hands
 * out pointers into the ring, with no copy; an entry handed out stays in
 * the ring until the next recv.
 *
 * Producers are the I/O thread (remote messages) and this node's publishing
 * threads (local ones), serialised by push_lock. The I/O thread takes a
 * queue's lock at its first message of a read and keeps it until the read is
 * parsed (sub_release_all), so a burst costs one lock and one wake-up, not
 * one per message.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "error.h"
#include "keyexpr.h"
#include "node.h"

#define SUB_RING (1u << 20)

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
entry_head(const struct src *s)
{
	return round8(sizeof(struct entry_hdr) + s->key_len + 1 + s->publisher_len + 1);
}

size_t
sub_entry_size(const struct src *s, size_t len, bool heap)
{
	return entry_head(s) + (heap ? sizeof(void *) : round8(len));
}

/* Room for an entry, counting the end of the ring it may have to skip.
 * Caller holds push_lock. */
static bool
room_locked(struct tern_sub *sub, size_t entry)
{
	size_t to_end =
	    sub->ring.cap -
	    (atomic_load_explicit(&sub->ring.tail, memory_order_relaxed) & (sub->ring.cap - 1));
	size_t need = entry + (to_end < entry ? to_end : 0);

	if (ring_has_space(&sub->ring, need)) {
		return true;
	}
	atomic_store(&sub->stalled, true);
	/* the reader may have made room between the check and the flag */
	sub->ring.head_seen = atomic_load(&sub->ring.head);
	return ring_has_space(&sub->ring, need);
}

static void
hold(struct tern_sub *sub)
{
	struct tern_node *node = sub->node;

	if (!sub->held) {
		pthread_mutex_lock(&sub->push_lock);
		sub->held = true;
		node->held[node->nheld++] = sub;
	}
}

bool
sub_reserve(struct tern_sub *sub, size_t entry)
{
	hold(sub);
	return room_locked(sub, entry);
}

void
sub_release_all(struct tern_node *node)
{
	for (int i = 0; i < node->nheld; i++) {
		struct tern_sub *sub = node->held[i];
		sub->held = false;
		if (atomic_load(&sub->waiting)) {
			pthread_cond_signal(&sub->cond);
		}
		pthread_mutex_unlock(&sub->push_lock);
	}
	node->nheld = 0;
}

/* Append one entry; the caller holds push_lock and checked the room. */
static void
push_locked(struct tern_sub *sub, const struct src *s, uint64_t seq, const uint8_t *data,
            size_t len, uint8_t *heap)
{
	struct ring *r = &sub->ring;
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
	memcpy(w + sizeof(h), s->key, h.key_len + 1u);
	memcpy(w + sizeof(h) + h.key_len + 1, s->publisher, h.pub_len + 1u);
	if (heap != NULL) {
		memcpy(w + head, &heap, sizeof(heap));
	} else {
		memcpy(w + head, data, len);
	}
	atomic_store_explicit(&r->tail, tail + size, memory_order_release);
	COUNT(sub->messages, 1); /* under push_lock */
	COUNT(sub->bytes, len);
}

void
sub_push(struct tern_sub *sub, const struct src *s, uint64_t seq, const uint8_t *data, size_t len,
         uint8_t *heap)
{
	push_locked(sub, s, seq, data, len, heap);
}

int
sub_push_local(struct tern_sub *sub, const struct src *s, uint64_t seq, const uint8_t *data,
               size_t len, uint64_t *deadline_ms)
{
	bool big = len > SUB_INLINE_MAX;
	size_t entry = sub_entry_size(s, len, big);
	uint8_t *heap = NULL;
	bool room;

	for (;;) {
		pthread_mutex_lock(&sub->push_lock);
		if ((room = room_locked(sub, entry)) || deadline_ms == NULL ||
		    node_now_ms() >= node_deadline(sub->node, deadline_ms)) {
			break;
		}
		pthread_mutex_unlock(&sub->push_lock);
		struct timespec ts = {0, 200000};
		nanosleep(&ts, NULL);
	}
	if (room && big && (heap = malloc(len)) != NULL) {
		memcpy(heap, data, len);
	}
	if (room && (!big || heap != NULL)) {
		push_locked(sub, s, seq, data, len, heap);
		if (atomic_load(&sub->waiting)) {
			pthread_cond_signal(&sub->cond);
		}
	}
	pthread_mutex_unlock(&sub->push_lock);
	if (!room) {
		return deadline_ms != NULL ? TERN_ETIMEDOUT : TERN_EAGAIN;
	}
	return big && heap == NULL ? TERN_ENOMEM : 0;
}

void
sub_call(struct tern_sub *sub, const struct src *s, uint64_t seq, const uint8_t *data, size_t len)
{
	tern_msg m = {
	    .key = s->key, .data = data, .len = len, .seq = seq, .publisher = s->publisher};

	if (pthread_equal(pthread_self(), sub->node->thread)) {
		COUNT(sub->messages, 1);
		COUNT(sub->bytes, len);
	} else { /* a publisher of this node, on its own thread */
		atomic_fetch_add_explicit(&sub->messages, 1, memory_order_relaxed);
		atomic_fetch_add_explicit(&sub->bytes, len, memory_order_relaxed);
	}
	sub->fn(sub->arg, &m);
}

static int
do_sub_open(struct tern_node *node, void *arg)
{
	struct tern_sub *sub = arg;

	/* room for every pull subscriber in the I/O thread's list of queues it
	 * holds, so that taking one never allocates */
	if (node->nheld_cap < node->nsubs + 1) {
		int cap = node->nheld_cap ? node->nheld_cap * 2 : 8;
		struct tern_sub **p = realloc(node->held, (size_t)cap * sizeof(*p));
		if (p == NULL) {
			return TERN_ENOMEM;
		}
		node->held = p;
		node->nheld_cap = cap;
	}
	sub->id = node->next_sub_id++;
	int rc = route_add_local_sub(node, sub);
	if (rc == 0) {
		node->nsubs++;
	}
	return rc;
}

int
tern_sub_open(tern_sub **out, tern_node *node, const char *keyexpr, tern_sub_fn fn, void *arg)
{
	struct tern_sub *sub;
	int rc;

	if (out == NULL || node == NULL) {
		return tern__error(TERN_EINVAL, "tern_sub_open: no node");
	}
	if ((rc = tern_keyexpr_check(keyexpr)) != 0) {
		return rc;
	}
	sub = calloc(1, sizeof(*sub));
	if (sub == NULL) {
		return TERN_ENOMEM;
	}
	sub->node = node;
	sub->keyexpr = strdup(keyexpr);
	sub->ke_len = strlen(keyexpr);
	sub->fn = fn;
	sub->arg = arg;
	if (sub->keyexpr == NULL || ring_init(&sub->ring, fn != NULL ? 4096 : SUB_RING) != 0) {
		free(sub->keyexpr);
		free(sub);
		return TERN_ENOMEM;
	}
	pthread_mutex_init(&sub->push_lock, NULL);
	pthread_cond_init(&sub->cond, NULL);
	if ((rc = node_call(node, do_sub_open, sub)) != 0) {
		ring_free(&sub->ring);
		free(sub->keyexpr);
		free(sub);
		return rc;
	}
	*out = sub;
	return 0;
}

static void
wake_if_stalled(struct tern_sub *sub)
{
	if (atomic_load_explicit(&sub->stalled, memory_order_relaxed) &&
	    atomic_exchange(&sub->stalled, false)) {
		node_wake(sub->node); /* the I/O thread waits for room here */
	}
}

/* The I/O thread marks a queue stalled, then looks at head once more; we
 * move head, then look at the flag. Without a fence between the two the
 * store of head may still sit in this core's store buffer while both sides
 * read the other's old value. A recv that finds entries needs no fence: a
 * later recv sees the flag. One that finds the queue empty (about to wait,
 * or to return for a poll) fences first, so that a missed flag never
 * leaves the I/O thread asleep with room it does not know of. */
static bool
queue_empty(struct tern_sub *sub)
{
	if (ring_readable(&sub->ring) > 0) {
		return false;
	}
	atomic_thread_fence(memory_order_seq_cst);
	wake_if_stalled(sub);
	return ring_readable(&sub->ring) == 0;
}

/* Release the entry handed out by the previous recv. */
static void
release_previous(struct tern_sub *sub)
{
	if (sub->consume_next > 0) {
		ring_consume(&sub->ring, sub->consume_next);
		sub->consume_next = 0;
	}
	if (sub->heap != NULL) {
		free(sub->heap);
		sub->heap = NULL;
	}
	wake_if_stalled(sub);
}

static int
wait_entry(struct tern_sub *sub, int timeout_ms)
{
	struct timespec ts;

	if (!queue_empty(sub)) {
		return 0;
	}
	if (timeout_ms == 0) {
		return TERN_ETIMEDOUT;
	}
	clock_gettime(CLOCK_REALTIME, &ts);
	if (timeout_ms > 0) {
		ts.tv_sec += timeout_ms / 1000;
		ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
	}
	pthread_mutex_lock(&sub->push_lock);
	atomic_store(&sub->waiting, 1);
	while (ring_readable(&sub->ring) == 0) {
		int rc = timeout_ms < 0 ? pthread_cond_wait(&sub->cond, &sub->push_lock)
		                        : pthread_cond_timedwait(&sub->cond, &sub->push_lock, &ts);
		if (rc == ETIMEDOUT) {
			break;
		}
	}
	atomic_store(&sub->waiting, 0);
	pthread_mutex_unlock(&sub->push_lock);
	return ring_readable(&sub->ring) > 0 ? 0 : TERN_ETIMEDOUT;
}

/* The entry at the head, past any unused end of the ring. */
static const struct entry_hdr *
head_entry(struct tern_sub *sub)
{
	struct ring *r = &sub->ring;

	for (;;) {
		size_t at = atomic_load_explicit(&r->head, memory_order_relaxed) & (r->cap - 1);
		const struct entry_hdr *h = (const struct entry_hdr *)(void *)(r->buf + at);
		if (r->cap - at >= sizeof(*h) && h->size != 0) {
			return h;
		}
		ring_consume(r, r->cap - at);
	}
}

int
tern_sub_recv(tern_sub *sub, tern_msg *msg, int timeout_ms)
{
	const struct entry_hdr *h;
	const uint8_t *e;
	int rc;

	if (sub->fn != NULL) {
		return tern__error(TERN_EINVAL, "tern_sub_recv on a callback subscriber");
	}
	release_previous(sub);
	if ((rc = wait_entry(sub, timeout_ms)) != 0) {
		return rc;
	}
	h = head_entry(sub);
	e = (const uint8_t *)h;
	msg->key = (const char *)e + sizeof(*h);
	msg->publisher = (const char *)e + sizeof(*h) + h->key_len + 1;
	msg->seq = h->seq;
	msg->len = h->len;
	if (h->heap) {
		memcpy(&sub->heap, e + h->size - sizeof(void *), sizeof(sub->heap));
		msg->data = sub->heap;
	} else {
		msg->data = e + h->size - round8(h->len);
	}
	sub->consume_next = h->size;
	return 0;
}

static int
do_sub_close(struct tern_node *node, void *arg)
{
	route_remove_local_sub(node, arg);
	node->nsubs--;
	return 0;
}

void
tern_sub_close(tern_sub *sub)
{
	if (sub == NULL) {
		return;
	}
	node_call(sub->node, do_sub_close, sub);
	if (sub->fn == NULL) {
		release_previous(sub);
		while (ring_used(&sub->ring) > 0) {
			const struct entry_hdr *h = head_entry(sub);
			if (h->heap) {
				void *p;
				memcpy(&p, (const uint8_t *)h + h->size - sizeof(p), sizeof(p));
				free(p);
			}
			ring_consume(&sub->ring, h->size);
		}
	}
	ring_free(&sub->ring);
	pthread_mutex_destroy(&sub->push_lock);
	pthread_cond_destroy(&sub->cond);
	free(sub->keyexpr);
	free(sub);
}

void
tern_sub_stats(tern_sub *sub, tern_stats *st)
{
	memset(st, 0, sizeof(*st));
	st->messages = atomic_load(&sub->messages);
	st->bytes = atomic_load(&sub->bytes);
	st->missed = atomic_load(&sub->missed);
}
