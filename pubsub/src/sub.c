/*
 * sub.c - subscribers: callback delivery and the queue behind tern_sub_recv.
 *
 * A pull subscriber's queue is a ring of entries: a fixed header, the key,
 * the publisher id, then the payload, or for a message above 64 KiB a
 * pointer to a buffer of its own (so one large message never needs a ring
 * as large as itself). An entry handed out by recv stays in the ring until
 * the next recv, so the message's pointers stay valid without a copy.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "error.h"
#include "keyexpr.h"
#include "node.h"

#define SUB_RING   (1u << 20)
#define INLINE_MAX 65536

struct entry_hdr {
	uint32_t len;
	uint16_t key_len;
	uint16_t pub_len;
	uint32_t heap;
	uint32_t pad;
	uint64_t seq;
};

size_t
sub_entry_size(const struct src *s, size_t len, bool heap)
{
	return sizeof(struct entry_hdr) + s->key_len + strlen(s->publisher) +
	       (heap ? sizeof(void *) : len);
}

bool
sub_has_room(struct tern_sub *sub, size_t entry)
{
	if (ring_space(&sub->ring) >= entry) {
		return true;
	}
	atomic_store(&sub->stalled, true);
	/* the reader may have made room between the check and the flag */
	return ring_space(&sub->ring) >= entry;
}

void
sub_push(struct tern_sub *sub, const struct src *s, uint64_t seq, const uint8_t *data, size_t len,
         uint8_t *heap)
{
	struct entry_hdr h = {.len = (uint32_t)len,
	                      .key_len = (uint16_t)s->key_len,
	                      .pub_len = (uint16_t)strlen(s->publisher),
	                      .heap = heap != NULL,
	                      .seq = seq};
	uint8_t head[sizeof(h) + 2 * 1300];

	memcpy(head, &h, sizeof(h));
	memcpy(head + sizeof(h), s->key, h.key_len);
	memcpy(head + sizeof(h) + h.key_len, s->publisher, h.pub_len);
	pthread_mutex_lock(&sub->push_lock);
	if (heap != NULL) {
		ring_put(&sub->ring, head, sizeof(h) + h.key_len + h.pub_len, &heap, sizeof(heap));
	} else {
		ring_put(&sub->ring, head, sizeof(h) + h.key_len + h.pub_len, data, len);
	}
	if (atomic_load(&sub->waiting)) {
		pthread_cond_signal(&sub->cond);
	}
	COUNT(sub->messages, 1); /* under push_lock */
	COUNT(sub->bytes, len);
	pthread_mutex_unlock(&sub->push_lock);
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

	sub->id = node->next_sub_id++;
	return route_add_local_sub(node, sub);
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

/* Release the entry handed out by the previous recv. */
static void
release_previous(struct tern_sub *sub)
{
	if (sub->consume_next > 0) {
		ring_consume(&sub->ring, sub->consume_next);
		sub->consume_next = 0;
	}
	free(sub->heap);
	sub->heap = NULL;
	if (atomic_exchange(&sub->stalled, false)) {
		node_wake(sub->node); /* the I/O thread waits for room here */
	}
}

static int
wait_entry(struct tern_sub *sub, int timeout_ms)
{
	struct timespec ts;

	if (ring_used(&sub->ring) > 0) {
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
	while (ring_used(&sub->ring) == 0) {
		int rc = timeout_ms < 0 ? pthread_cond_wait(&sub->cond, &sub->push_lock)
		                        : pthread_cond_timedwait(&sub->cond, &sub->push_lock, &ts);
		if (rc == ETIMEDOUT) {
			break;
		}
	}
	atomic_store(&sub->waiting, 0);
	pthread_mutex_unlock(&sub->push_lock);
	return ring_used(&sub->ring) > 0 ? 0 : TERN_ETIMEDOUT;
}

/* A pointer to n bytes at off in the ring, copied to scratch if they wrap. */
static const uint8_t *
view(struct tern_sub *sub, size_t off, size_t n, size_t scratch_off)
{
	struct iovec iov[2];

	if (n == 0 || ring_iov(&sub->ring, off, n, iov) == 1) {
		return n == 0 ? (const uint8_t *)"" : iov[0].iov_base;
	}
	ring_peek(&sub->ring, off, sub->scratch + scratch_off, n);
	return sub->scratch + scratch_off;
}

int
tern_sub_recv(tern_sub *sub, tern_msg *msg, int timeout_ms)
{
	struct entry_hdr h;
	size_t need;
	int rc;

	if (sub->fn != NULL) {
		return tern__error(TERN_EINVAL, "tern_sub_recv on a callback subscriber");
	}
	release_previous(sub);
	if ((rc = wait_entry(sub, timeout_ms)) != 0) {
		return rc;
	}
	ring_peek(&sub->ring, 0, &h, sizeof(h));
	need = (size_t)h.key_len + h.pub_len + 2 + (h.heap ? 0 : h.len);
	if (sub->scratch_cap < need) {
		uint8_t *p = realloc(sub->scratch, need);
		if (p == NULL) {
			return TERN_ENOMEM;
		}
		sub->scratch = p;
		sub->scratch_cap = need;
	}
	/* key and publisher are copied to scratch to add their terminating NULs */
	ring_peek(&sub->ring, sizeof(h), sub->scratch, h.key_len);
	sub->scratch[h.key_len] = '\0';
	ring_peek(&sub->ring, sizeof(h) + h.key_len, sub->scratch + h.key_len + 1, h.pub_len);
	sub->scratch[h.key_len + 1 + h.pub_len] = '\0';
	msg->key = (const char *)sub->scratch;
	msg->publisher = (const char *)sub->scratch + h.key_len + 1;
	msg->seq = h.seq;
	msg->len = h.len;
	size_t off = sizeof(h) + h.key_len + h.pub_len;
	if (h.heap) {
		ring_peek(&sub->ring, off, &sub->heap, sizeof(sub->heap));
		msg->data = sub->heap;
		sub->consume_next = off + sizeof(void *);
	} else {
		msg->data = view(sub, off, h.len, (size_t)h.key_len + h.pub_len + 2);
		sub->consume_next = off + h.len;
	}
	return 0;
}

static int
do_sub_close(struct tern_node *node, void *arg)
{
	route_remove_local_sub(node, arg);
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
			struct entry_hdr h;
			ring_peek(&sub->ring, 0, &h, sizeof(h));
			size_t off = sizeof(h) + h.key_len + h.pub_len;
			if (h.heap) {
				void *p;
				ring_peek(&sub->ring, off, &p, sizeof(p));
				free(p);
				off += sizeof(p);
			} else {
				off += h.len;
			}
			ring_consume(&sub->ring, off);
		}
	}
	ring_free(&sub->ring);
	pthread_mutex_destroy(&sub->push_lock);
	pthread_cond_destroy(&sub->cond);
	free(sub->scratch);
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
