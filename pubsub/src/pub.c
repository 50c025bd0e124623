/*
 * pub.c - publishers: the publish path, flow-control waits, and the choice
 * between queueing for the I/O thread and writing at once.
 *
 * Publish copies the frame into each routed channel's ring under the
 * publisher's lock. Then:
 *  - low-latency connections: a polling I/O thread takes it at once, else
 *    this thread writes it before returning;
 *  - batched connections: a full batch is written by this thread; a partial
 *    one is left to the I/O thread, which is either awake (and takes it
 *    once the publisher pauses) or asleep; an asleep thread is woken,
 *    except that a publication arriving after a quiet spell is written
 *    directly, so batching adds no latency at low load.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "error.h"
#include "keyexpr.h"
#include "node.h"

#define QUIET_NS        20000    /* a gap this long since the last direct write means low load */
#define GROW_AFTER_MS   300      /* no progress this long: queue instead of pushing back */
#define WAIT_RECHECK_NS 20000000 /* a publisher waiting for room looks again this often */

/* Wake a publisher waiting for room. The fence orders the change that made
 * room (a release store to a ring's head) before the look at `waiters`; the
 * waiter increments `waiters` before it looks at the room: one of the two
 * sees the other. */
void
pub_wake(struct tern_pub *pub)
{
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load(&pub->waiters) > 0) {
		pthread_mutex_lock(&pub->wait_lock);
		pthread_cond_broadcast(&pub->wait_cond);
		pthread_mutex_unlock(&pub->wait_lock);
	}
}

/*
 * A reliable channel whose ring is full may grow it, doubling, while the
 * connection's rings stay within queue.max_bytes: a subscriber that pauses
 * is absorbed by the queue, and only a full queue blocks the publisher.
 * Growing excludes the flusher (it holds wlock while it reads rings).
 *
 * A stalled peer's queue holds at most GROW_SECONDS of what the channel
 * moved before (its consumption rate), beyond the window: enough to ride
 * out a pause, where a deeper queue would only hold data back; and a
 * channel that shares a slow link with many others, served in bursts a
 * second apart, moves too little to grow at all (it is pushed back, as a
 * TCP sender would be). A window that outgrows its ring (a long, fast link)
 * grows it whatever the rate.
 */
#define GROW_SECONDS 2

static bool
outchan_grow(struct outchan *oc, size_t need, bool for_window)
{
	struct conn *c = oc->conn;
	size_t used = ring_used(&oc->ring), cap = oc->ring.cap;
	uint64_t budget = c->node->cfg.queue_max_bytes;
	uint64_t rate = atomic_load_explicit(&oc->rate_Bps, memory_order_relaxed);
	int rc;

	/* Best effort drops rather than queues. */
	if (oc->src->reliability != TERN_RELIABLE) {
		return false;
	}
	while (cap < used + need) {
		cap *= 2;
	}
	if (atomic_load(&c->ring_bytes) + (cap - oc->ring.cap) > budget ||
	    (!for_window && cap > c->peer_window + GROW_SECONDS * rate)) {
		return false;
	}
	pthread_mutex_lock(&c->wlock);
	size_t old = oc->ring.cap;
	rc = ring_grow(&oc->ring, cap);
	pthread_mutex_unlock(&c->wlock);
	if (rc != 0) {
		return false;
	}
	atomic_fetch_add(&c->ring_bytes, oc->ring.cap - old);
	return true;
}

bool
outchan_has_room(struct outchan *oc, size_t len)
{
	size_t frames = len / (oc->conn->frame_max ? oc->conn->frame_max : 1) + 1;
	size_t need = len + frames * WIRE_HDR_MAX;

	return ring_has_space(&oc->ring, need);
}

static bool
room_or_grow(struct outchan *oc, size_t len)
{
	uint64_t starved = atomic_load(&oc->starved_since_ms);
	size_t frames = len / (oc->conn->frame_max ? oc->conn->frame_max : 1) + 1;

	if (outchan_has_room(oc, len)) {
		return true;
	}
	/* A ring mostly holding frames kept for a resend means the window has
	 * outgrown it (a long, fast link): grow to keep the link full. A peer
	 * that granted nothing for a while (not a window still growing) is
	 * queued for, too. */
	bool kept_most = atomic_load(&oc->sent) > oc->ring.cap / 4 * 3;
	/* stalled: waiting on the peer, which has neither consumed anything nor
	 * taken any of this channel's bytes into its socket for a while (a slow
	 * or crowded link still does one or the other; a stopped reader does
	 * neither) */
	uint64_t now = node_now_ms();
	bool stalled = starved != 0 && now - starved >= GROW_AFTER_MS &&
	               now - atomic_load(&oc->last_ack_ms) >= GROW_AFTER_MS &&
	               now - atomic_load(&oc->last_write_ms) >= GROW_AFTER_MS;
	return (kept_most || stalled) && outchan_grow(oc, len + frames * WIRE_HDR_MAX, kept_most);
}

/*
 * Write from the publishing thread, unless another thread is writing, the
 * socket is full (the I/O thread writes when it drains: trying again here
 * for every message would be a failed system call each time), or the
 * channel's credit does not cover what waits (then the I/O thread writes
 * when credit arrives; here each message would scan the queue again for
 * the frames that fit).
 */
static void
flush_now(struct outchan *oc, bool wait_lock)
{
	struct conn *c = oc->conn;
	size_t unsent = outchan_unsent(oc);
	size_t batch = unsent < c->batch_max ? unsent : c->batch_max;

	if (atomic_load_explicit(&c->choked, memory_order_relaxed) ||
	    atomic_load_explicit(&oc->credit, memory_order_relaxed) < (int64_t)batch) {
		return;
	}
	if (wait_lock) {
		pthread_mutex_lock(&c->wlock);
	} else if (pthread_mutex_trylock(&c->wlock) != 0) {
		return;
	}
	conn_flush_locked(c);
	pthread_mutex_unlock(&c->wlock);
}

/*
 * After a frame was queued: see that it gets written. A full batch is
 * written by the publishing thread itself, as a plain TCP sender would, so
 * a busy stream needs neither the I/O thread nor a wake-up; a partial batch
 * is left to the I/O thread, which writes it once the publisher pauses (it
 * keeps looking for a while after traffic), or, when the connection has
 * been quiet and the I/O thread sleeps, written from here at once, so that
 * batching adds no latency at low load.
 */
static void
kick(struct outchan *oc)
{
	struct conn *c = oc->conn;
	struct tern_node *node = c->node;

	if (c->low_latency) {
		/* Written at once: by the I/O thread if it is polling (it takes
		 * it within a microsecond, and the publisher does not wait for the
		 * write), else from here. A message never waits for a batch to
		 * fill; one published while a write is under way goes out with
		 * the next write, right behind it. */
		if (!pthread_equal(pthread_self(), node->thread) && atomic_load(&node->spinning)) {
			atomic_store(&c->pending, 1);
			/* still polling after the flag is set: it sees the flag
			 * before it sleeps (io_sleep); else write it here */
			if (atomic_load(&node->spinning)) {
				return;
			}
		}
		flush_now(oc, true);
		return;
	}
	if (!atomic_load_explicit(&c->pending, memory_order_relaxed)) {
		if (node->cfg.batch_max_delay_us > 0) {
			atomic_store(&c->pending_since_ns, node_now_ns());
		}
		atomic_store(&c->pending, 1);
	}
	if (pthread_equal(pthread_self(), node->thread)) {
		return;
	}
	if (outchan_unsent(oc) >= c->batch_max) {
		flush_now(oc, false);
		return;
	}
	if (!atomic_load(&node->sleeping)) {
		return;
	}
	if (node->cfg.batch_max_delay_us > 0) {
		/* the batch is meant to wait and fill: no write from here */
		if (atomic_exchange(&node->sleeping, 0)) {
			node_wake(node);
		}
		return;
	}
	uint64_t now = node_now_ns();
	if (now - atomic_load(&c->last_direct_ns) > QUIET_NS &&
	    pthread_mutex_trylock(&c->wlock) == 0) {
		atomic_store(&c->last_direct_ns, now);
		conn_flush_locked(c);
		pthread_mutex_unlock(&c->wlock);
		return;
	}
	atomic_store(&c->last_direct_ns, now);
	if (atomic_exchange(&node->sleeping, 0)) {
		node_wake(node);
	}
}

/* A publishing thread writes a batch that is full before adding a frame
 * that would not fit in it: the batch then ends on a frame boundary, and
 * the writer takes it whole, without looking for one. */
static void
write_full_batch(struct outchan *oc, size_t frame)
{
	struct conn *c = oc->conn;
	size_t unsent = outchan_unsent(oc);

	if (unsent == 0 || unsent + frame <= c->batch_max || c->low_latency ||
	    pthread_equal(pthread_self(), c->node->thread)) {
		return;
	}
	flush_now(oc, false);
}

int
outchan_put_frame(struct outchan *oc, const struct wire_frame *f, const uint8_t *payload)
{
	uint8_t hdr[WIRE_HDR_MAX];
	size_t hlen = wire_header_encode(hdr, f);

	write_full_batch(oc, hlen + (size_t)f->len);
	ring_put(&oc->ring, hdr, hlen, payload, (size_t)f->len);
	kick(oc);
	return 0;
}

/*
 * Wait until oc has room for len bytes. False on the publish deadline, or
 * a detached, dead or dropped channel (the I/O thread drops a peer that has
 * taken nothing for slow_consumer_ms, which ends this wait). wait_lock is a
 * leaf: growing the ring takes conn->wlock, so it happens outside it.
 */
static bool
wait_room(struct outchan *oc, size_t len, struct tern_pub *pub, uint64_t *deadline_ms)
{
	struct timespec ts;
	bool room;

	atomic_fetch_add(&pub->waiters, 1);
	while (!(room = room_or_grow(oc, len))) {
		if (atomic_load(&oc->detached) || atomic_load(&oc->conn->dead) ||
		    atomic_load(&oc->conn->kill) ||
		    node_now_ms() >= node_deadline(pub->node, deadline_ms)) {
			break;
		}
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += WAIT_RECHECK_NS; /* a stalled peer is queued for after a while */
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_mutex_lock(&pub->wait_lock);
		if (!outchan_has_room(oc, len)) {
			pthread_cond_timedwait(&pub->wait_cond, &pub->wait_lock, &ts);
		}
		pthread_mutex_unlock(&pub->wait_lock);
	}
	atomic_fetch_sub(&pub->waiters, 1);
	return room && !atomic_load(&oc->detached);
}

/* Why a message could not be queued: a dropped connection is no error for
 * the publisher (its other subscribers got the message). */
static int
refused(struct outchan *oc, bool may_wait)
{
	if (atomic_load(&oc->detached) || atomic_load(&oc->conn->dead) ||
	    atomic_load(&oc->conn->kill)) {
		return TERN_ECLOSED;
	}
	oc->dropped++;
	return may_wait ? TERN_ETIMEDOUT : TERN_EAGAIN;
}

/*
 * One message on one outchan: a data frame, or chunks for a message larger
 * than a frame. may_wait: reliable publishers wait for room until
 * *deadline_ms (see node_deadline); otherwise a full channel drops the message.
 */
int
outchan_send(struct outchan *oc, uint64_t seq, const uint8_t *data, size_t len, bool may_wait,
             struct tern_pub *pub, uint64_t *deadline_ms)
{
	struct wire_frame f = {.type = WIRE_DATA, .channel = oc->id};
	size_t fmax = oc->conn->frame_max;
	size_t off = 0;
	uint64_t own_deadline = 0;

	if (deadline_ms == NULL) {
		deadline_ms = &own_deadline;
	}
	if (seq != oc->last_seq + 1) {
		f.flags = WIRE_FLAG_SEQ;
		f.seq = seq;
	}
	if (len <= fmax) {
		if (!outchan_has_room(oc, len) &&
		    (!may_wait || !wait_room(oc, len, pub, deadline_ms))) {
			return refused(oc, may_wait);
		}
		f.len = len;
		oc->last_seq = seq;
		oc->messages++;
		oc->bytes += len;
		return outchan_put_frame(oc, &f, data);
	}
	f.type = WIRE_CHUNK;
	f.total = len;
	while (off < len) {
		size_t n = len - off < fmax ? len - off : fmax;
		f.flags = (f.flags & WIRE_FLAG_SEQ) | (off == 0 ? WIRE_FLAG_FIRST : 0) |
		          (off + n == len ? WIRE_FLAG_LAST : 0);
		f.len = n;
		/* once a message has started, finish it: the receiver holds it open */
		bool wait = may_wait || off > 0;
		if (!outchan_has_room(oc, n) &&
		    (!wait || pub == NULL || !wait_room(oc, n, pub, deadline_ms))) {
			return refused(oc, may_wait);
		}
		outchan_put_frame(oc, &f, data + off);
		/* the receiver numbers a message by its first chunk */
		oc->last_seq = seq;
		f.flags &= ~WIRE_FLAG_SEQ;
		off += n;
	}
	oc->messages++;
	oc->bytes += len;
	return 0;
}

static int
do_pub_open(struct tern_node *node, void *arg)
{
	struct tern_pub *pub = arg;

	pub->id = node->next_pub_id++;
	snprintf(pub->src.publisher, CTL_ID_MAX + 24, "%s/%llu", node->id,
	         (unsigned long long)pub->id);
	pub->src.publisher_len = strlen(pub->src.publisher);
	pub->next = node->pubs;
	node->pubs = pub;
	route_recompute(node);
	return 0;
}

int
tern_pub_open(tern_pub **out, tern_node *node, const char *key, int reliability)
{
	struct tern_pub *pub;
	int rc;

	if (out == NULL || node == NULL) {
		return tern__error(TERN_EINVAL, "tern_pub_open: no node");
	}
	if ((rc = tern_key_check(key)) != 0) {
		return rc;
	}
	pub = calloc(1, sizeof(*pub));
	if (pub == NULL) {
		return TERN_ENOMEM;
	}
	pub->node = node;
	pub->src.key = strdup(key);
	pub->src.key_len = strlen(key);
	pub->src.publisher = malloc(CTL_ID_MAX + 24);
	pub->src.pub = pub;
	pub->src.instance = node->instance;
	pub->src.reliability = reliability < 0 ? node->cfg.reliability : reliability;
	if (pub->src.key == NULL || pub->src.publisher == NULL) {
		free(pub->src.key);
		free(pub->src.publisher);
		free(pub);
		return TERN_ENOMEM;
	}
	pthread_mutex_init(&pub->lock, NULL);
	pthread_mutex_init(&pub->wait_lock, NULL);
	pthread_cond_init(&pub->wait_cond, NULL);
	node_call(node, do_pub_open, pub);
	*out = pub;
	return 0;
}

static int
publish_local(struct tern_pub *pub, const uint8_t *data, size_t len, uint64_t *deadline_ms)
{
	struct src *s = &pub->src;
	bool reliable = s->reliability == TERN_RELIABLE;
	int rc = 0;

	for (int k = 0; k < s->nsubs; k++) {
		struct tern_sub *sub = s->subs[k];
		if (sub->fn != NULL) {
			sub_call(sub, s, pub->seq, data, len);
			continue;
		}
		int r = sub_push_local(sub, s, pub->seq, data, len, reliable ? deadline_ms : NULL);
		if (r != 0) {
			rc = r;
		}
	}
	return rc;
}

/* Peers whose connection broke under a publication that their kept queue
 * could not take yet. */
struct dying {
	int n;
	char peer[4][CTL_ID_MAX + 1];
	struct outchan *oc[4];
};

static void
note_dying(struct dying *d, struct outchan *oc)
{
	if (d->n < 4) {
		snprintf(d->peer[d->n], sizeof(d->peer[0]), "%s", oc->conn->peer_id);
		d->oc[d->n++] = oc;
	}
}

/* Wait (without the route lock) until the I/O thread has put the broken
 * channels aside for a resume, then add this publication to what it kept. */
static void
keep_for_dying(struct tern_pub *pub, struct dying *d, const uint8_t *data, size_t len,
               uint64_t *deadline)
{
	for (;;) {
		bool gone = true;
		for (int k = 0; k < pub->src.nouts; k++) {
			for (int i = 0; i < d->n; i++) {
				gone &= pub->src.outs[k] != d->oc[i];
			}
		}
		if (gone || node_now_ms() >= node_deadline(pub->node, deadline)) {
			break;
		}
		struct timespec ts = {0, 500000};
		pthread_mutex_unlock(&pub->lock);
		nanosleep(&ts, NULL);
		pthread_mutex_lock(&pub->lock);
	}
	for (int i = 0; i < d->n; i++) {
		if (route_parked_room(&pub->src, len, pub->node->cfg.queue_max_bytes)) {
			route_park_append(&pub->src, d->peer[i], pub->seq, data, len);
		}
	}
}

/* Is a message of len bytes held back by a peer that lost its connection
 * and is expected back (its queue, kept for the resume, is full)? */
static bool
peer_away_full(struct tern_pub *pub, size_t len)
{
	for (int k = 0; k < pub->src.nouts; k++) {
		struct outchan *oc = pub->src.outs[k];
		if (oc->retain && atomic_load(&oc->conn->dead) && !atomic_load(&oc->conn->kill) &&
		    !outchan_has_room(oc, len)) {
			return true;
		}
	}
	return pub->src.parked != NULL && len <= 65536 &&
	       !route_parked_room(&pub->src, len, pub->node->cfg.queue_max_bytes);
}

int
tern_publish(tern_pub *pub, const void *data, size_t len)
{
	struct tern_node *node = pub->node;
	struct dying dying = {.n = 0};
	uint64_t deadline = 0;
	int rc = 0, r;

	if (len > node->cfg.max_message_bytes) {
		return tern__error(
		    TERN_EMSGSIZE, "a %zu-byte message on '%s' exceeds max_message_bytes (%llu)",
		    len, pub->src.key, (unsigned long long)node->cfg.max_message_bytes);
	}
	pthread_mutex_lock(&pub->lock);
	while (pub->src.reliability == TERN_RELIABLE && peer_away_full(pub, len) &&
	       node_now_ms() < node_deadline(node, &deadline)) {
		/* a peer is reconnecting and its queue is full: wait for it to come
		 * back (or be given up on) without holding the route */
		struct timespec ts = {0, 1000000};
		pthread_mutex_unlock(&pub->lock);
		nanosleep(&ts, NULL);
		pthread_mutex_lock(&pub->lock);
	}
	pub->seq++;
	if (pub->src.nsubs > 0 && (r = publish_local(pub, data, len, &deadline)) != 0) {
		rc = r;
	}
	if (pub->src.parked != NULL) {
		route_park_append(&pub->src, NULL, pub->seq, data, len);
	}
	for (int k = 0; k < pub->src.nouts; k++) {
		struct outchan *oc = pub->src.outs[k];
		if (atomic_load(&oc->conn->dead) || atomic_load(&oc->conn->kill)) {
			if (oc->retain && !atomic_load(&oc->conn->kill) &&
			    outchan_send(oc, pub->seq, data, len, false, pub, NULL) != 0) {
				note_dying(&dying, oc); /* lost, not yet reaped, and full */
			}
			continue;
		}
		if (len > oc->conn->peer_max_message) {
			rc =
			    tern__error(TERN_EMSGSIZE, "a %zu-byte message exceeds peer %s's limit",
			                len, oc->conn->peer_id);
			continue;
		}
		r = outchan_send(oc, pub->seq, data, len, pub->src.reliability == TERN_RELIABLE,
		                 pub, &deadline);
		if (r == TERN_ECLOSED && oc->retain && atomic_load(&oc->conn->dead) &&
		    !atomic_load(&oc->conn->kill)) {
			note_dying(&dying, oc); /* the connection broke while we waited */
		} else if (r != 0 && r != TERN_ECLOSED) {
			rc = r;
		}
	}
	if (dying.n > 0) {
		keep_for_dying(pub, &dying, data, len, &deadline);
	}
	if (rc == TERN_EAGAIN) {
		COUNT(pub->dropped, 1);
	} else if (rc == 0) {
		COUNT(pub->messages, 1);
		COUNT(pub->bytes, len);
	}
	pthread_mutex_unlock(&pub->lock);
	if (rc == TERN_EAGAIN) {
		tern__error(rc, "queue full on '%s': message dropped", pub->src.key);
	} else if (rc == TERN_ETIMEDOUT) {
		tern__error(rc, "publish on '%s' timed out waiting for a slow subscriber",
		            pub->src.key);
	}
	return rc;
}

/* Nothing left to write (or, with consumed, nothing the peers have not
 * consumed yet) on this publisher's live channels. *flagged: data was left
 * that no one was flagged to write (the I/O thread must look). */
static bool
pub_drained(struct tern_pub *pub, bool consumed, bool *flagged)
{
	bool empty = true;

	*flagged = false;
	pthread_mutex_lock(&pub->lock);
	for (int k = 0; k < pub->src.nouts; k++) {
		struct outchan *oc = pub->src.outs[k];
		size_t left = consumed ? ring_used(&oc->ring) : outchan_unsent(oc);
		if (!atomic_load(&oc->conn->dead) && left > 0) {
			empty = false;
			if (!atomic_load(&oc->conn->pending)) {
				atomic_store(&oc->conn->pending, 1);
				*flagged = true;
			}
		}
	}
	pthread_mutex_unlock(&pub->lock);
	return empty;
}

/* Poll until drained: from every half millisecond, backing off to every
 * 10 ms, so that a hundred publishers draining a slow link do not keep the
 * machine busy switching between them. */
static int
pub_wait_drained(tern_pub *pub, int timeout_ms, bool consumed)
{
	uint64_t deadline = node_now_ms() + (uint64_t)(timeout_ms < 0 ? 86400000 : timeout_ms);
	long wait_ns = 500000;
	bool flagged;

	while (!pub_drained(pub, consumed, &flagged)) {
		struct timespec ts = {0, wait_ns};
		if (node_now_ms() >= deadline) {
			return tern__error(TERN_ETIMEDOUT, "flush of '%s' timed out", pub->src.key);
		}
		if (flagged) {
			node_wake(pub->node);
		}
		nanosleep(&ts, NULL);
		wait_ns = wait_ns * 2 > 10000000 ? 10000000 : wait_ns * 2;
	}
	return 0;
}

int
tern_pub_flush(tern_pub *pub, int timeout_ms)
{
	return pub_wait_drained(pub, timeout_ms, false);
}

int
tern_pub_matched(tern_pub *pub)
{
	int n;

	pthread_mutex_lock(&pub->lock);
	n = pub->src.nouts + (pub->src.nsubs > 0);
	pthread_mutex_unlock(&pub->lock);
	return n;
}

static int
do_pub_close(struct tern_node *node, void *arg)
{
	struct tern_pub *pub = arg;

	for (struct tern_pub **pp = &node->pubs; *pp != NULL; pp = &(*pp)->next) {
		if (*pp == pub) {
			*pp = pub->next;
			break;
		}
	}
	pthread_mutex_lock(&pub->lock);
	route_src_clear(&pub->src);
	pthread_mutex_unlock(&pub->lock);
	/* the node's totals keep what closed publishers sent */
	COUNT(node->messages_out, atomic_load(&pub->messages));
	COUNT(node->bytes_out, atomic_load(&pub->bytes));
	COUNT(node->dropped, atomic_load(&pub->dropped));
	return 0;
}

void
tern_pub_close(tern_pub *pub)
{
	if (pub == NULL) {
		return;
	}
	/* what reliable channels still hold may be in flight on a slow link:
	 * let the peers consume it before the channels go */
	pub_wait_drained(pub, (int)pub->node->cfg.publish_timeout_ms, true);
	node_call(pub->node, do_pub_close, pub);
	pthread_mutex_destroy(&pub->lock);
	pthread_mutex_destroy(&pub->wait_lock);
	pthread_cond_destroy(&pub->wait_cond);
	free(pub);
}

void
tern_pub_stats(tern_pub *pub, tern_stats *st)
{
	memset(st, 0, sizeof(*st));
	st->messages = atomic_load(&pub->messages);
	st->bytes = atomic_load(&pub->bytes);
	st->dropped = atomic_load(&pub->dropped);
}
