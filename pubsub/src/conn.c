/*
 * conn.c - one connection: handshake, reading and dispatching frames, the
 * channel tables, and the write path shared by the I/O thread and
 * publishing threads. See conn.h for the threads and locks.
 *
 * A flush writes what the socket takes; a ring only ever gives up whole
 * frames, and a frame the socket cut in two is finished from conn->out
 * before anything else, so the next flush continues exactly where the
 * socket stopped.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "clock.h"
#include "conn.h"
#include "error.h"

#define OUT_INITIAL  4096
#define READ_INITIAL 16384 /* grows to rmax for connections that carry traffic */
/* Lists of channels longer than their first size are given back after a
 * burst: what an idle connection holds does not depend on its past. */
#define LIST_KEEP 16
/* How long a grown buffer must go unused before it is given back. */
#define SHRINK_AFTER_MS 1000
#define IOV_BATCH       256
/* A side whose peer keeps pinging sends at most one PING in this many plus
 * one: enough to keep its round trip and clock offset fresh, while a
 * thousand idle connections cost half the wake-ups. */
#define PINGS_SKIP_MAX 7
#define TOOK_MAX       128
/* Idle rings given back in one look (each takes its producer's lock). */
#define SHRINK_RINGS_MAX 64
/*
 * On a long round trip, a blocked channel whose receiver keeps up jumps at
 * once to the window that carries FLOOR_RATE bytes a microsecond (25 MB/s),
 * up to WINDOW_FLOOR, instead of doubling its way there one round trip at
 * a time; from there it doubles while the link takes more. On a short
 * round trip the floor is tiny: a receiver that cannot keep up (a hundred
 * senders into one) would only gather bigger windows' worth in its sockets.
 */
#define WINDOW_FLOOR (2u << 20)
#define FLOOR_RATE   25

#define PLAIN_PEER "the peer is a plain tern node, not TLS (connect with tcp://)"

static ssize_t read_some(struct conn *c, bool *more, char *why, size_t whylen);

static void
conn_epoll(struct conn *c, int op)
{
	struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP};

	if (c->epollout || conn_state(c) == CONN_CONNECTING) {
		ev.events |= EPOLLOUT;
	}
	ev.data.ptr = c->ev_tag;
	epoll_ctl(c->env->epfd, op, c->fd, &ev);
}

static void
set_epollout(struct conn *c, bool on)
{
	atomic_store_explicit(&c->choked, on, memory_order_relaxed);
	if (c->epollout != on && conn_state(c) != CONN_DEAD) {
		c->epollout = on;
		conn_epoll(c, EPOLL_CTL_MOD);
	}
}

struct conn *
conn_new(const struct conn_env *env, int fd, bool outbound, bool connecting, const char *endpoint,
         const struct conn_ops *ops, void *arg, void *ev_tag)
{
	const tern_config *cfg = env->cfg;
	struct conn *c = calloc(1, sizeof(*c));
	size_t rcap = 256u << 10;

	if (c == NULL) {
		return NULL;
	}
	if (rcap < 2ull * (cfg->chunk_bytes + WIRE_HDR_MAX)) {
		rcap = 2ull * (cfg->chunk_bytes + WIRE_HDR_MAX);
	}
	c->rmax = rcap;
	rcap = READ_INITIAL < rcap ? READ_INITIAL : rcap;
	c->rbuf = malloc(rcap);
	c->out = malloc(OUT_INITIAL);
	if (c->rbuf == NULL || c->out == NULL) {
		free(c->rbuf);
		free(c->out);
		free(c);
		return NULL;
	}
	c->ev_tag = ev_tag;
	c->env = env;
	c->ops = ops;
	c->arg = arg;
	c->fd = fd;
	c->rcap = rcap;
	c->out_cap = OUT_INITIAL;
	c->outbound = outbound;
	atomic_init(&c->state, connecting ? CONN_CONNECTING : CONN_HANDSHAKE);
	chanid_init(&c->out_ids, WIRE_CHANNEL_MAX);
	c->low_latency = cfg->low_latency;
	c->batch_max = cfg->batch_max_bytes;
	c->created_ms = c->last_rx_ms = c->last_ping_ms = clock_ms();
	c->reasm_budget = cfg->queue_max_bytes;
	c->budget.max = cfg->queue_max_bytes;
	c->olink.flush_lock = &c->wlock;
	c->olink.budget = &c->budget;
	c->olink.ready = &c->ready;
	c->olink.owner = c;
	snprintf(c->endpoint, sizeof(c->endpoint), "%s", endpoint);
	pthread_mutex_init(&c->wlock, NULL);
	return c;
}

/* ---- writing ---- */

static bool
out_reserve(struct conn *c, size_t more)
{
	size_t cap = c->out_cap;

	if (c->out_len + more > c->out_peak) {
		c->out_peak = c->out_len + more;
	}
	if (c->out_len + more <= cap) {
		return true;
	}
	while (cap < c->out_len + more) {
		cap *= 2;
	}
	uint8_t *p = realloc(c->out, cap);
	if (p == NULL) {
		return false;
	}
	c->out = p;
	c->out_cap = cap;
	return true;
}

/*
 * List the connection on the loop's work stack, once until the loop takes
 * it. Called after every change that needs the loop (data pending, a
 * failed write, a death), on any thread: the loop looks at listed
 * connections, not at all of them. The flag is set before the push and
 * cleared by the loop before it looks at the connection, so a change
 * after that look lists it again.
 */
static void
note_work(struct conn *c)
{
	_Atomic(struct conn *) *work = c->env->work;
	struct conn *head;

	/* a look first: a connection stays listed through many changes, and
	 * the exchange would take its cache line from the loop each time */
	if (work == NULL || atomic_load(&c->listed) || atomic_exchange(&c->listed, true)) {
		return;
	}
	head = atomic_load_explicit(work, memory_order_relaxed);
	do {
		c->work_next = head;
	} while (!atomic_compare_exchange_weak_explicit(work, &head, c, memory_order_seq_cst,
	                                                memory_order_relaxed));
}

struct conn *
conn_work_take(_Atomic(struct conn *) *work)
{
	if (atomic_load_explicit(work, memory_order_relaxed) == NULL) {
		return NULL;
	}
	return atomic_exchange_explicit(work, NULL, memory_order_acquire);
}

struct conn *
conn_work_unlist(struct conn *c)
{
	struct conn *next = c->work_next;

	atomic_store(&c->listed, false);
	return next;
}

static void
set_pending(struct conn *c)
{
	atomic_store(&c->pending, 1);
	note_work(c);
}

static void
set_dead(struct conn *c)
{
	atomic_store(&c->dead, 1);
	note_work(c);
}

static void
send_ctl_locked(struct conn *c, const struct ctl_msg *m)
{
	uint8_t body[CTL_MSG_MAX];
	struct wire_frame f = {.type = WIRE_CONTROL};
	int n = ctl_encode(m, body, sizeof(body));

	if (n < 0 || !out_reserve(c, (size_t)n + WIRE_HDR_MAX)) {
		return;
	}
	f.len = (uint64_t)n;
	c->out_len += wire_header_encode(c->out + c->out_len, &f);
	memcpy(c->out + c->out_len, body, (size_t)n);
	c->out_len += (size_t)n;
	set_pending(c);
}

void
conn_send_ctl(struct conn *c, const struct ctl_msg *m)
{
	if (m->type == CTL_SYNC) {
		c->syncs_out++;
	}
	pthread_mutex_lock(&c->wlock);
	send_ctl_locked(c, m);
	pthread_mutex_unlock(&c->wlock);
}

struct batch {
	struct iovec iov[IOV_BATCH];
	short took_at[IOV_BATCH]; /* index into took[], or -1: conn->out */
	int n;
	size_t total;
	size_t taken[TOOK_MAX];
	struct outchan *took[TOOK_MAX];
	int ntook;
};

/* ---- the lists of channels with something to write or keep (wlock) ---- */

static void
act_append(struct conn *c, struct outchan *oc)
{
	oc->act_next = NULL;
	oc->act_prev = c->act_tail;
	if (c->act_tail != NULL) {
		c->act_tail->act_next = oc;
	} else {
		c->act_head = oc;
	}
	c->act_tail = oc;
	c->nact++;
	oc->on_act = true;
}

static void
act_unlink(struct conn *c, struct outchan *oc)
{
	if (oc->act_prev != NULL) {
		oc->act_prev->act_next = oc->act_next;
	} else {
		c->act_head = oc->act_next;
	}
	if (oc->act_next != NULL) {
		oc->act_next->act_prev = oc->act_prev;
	} else {
		c->act_tail = oc->act_prev;
	}
	oc->act_next = oc->act_prev = NULL;
	c->nact--;
	oc->on_act = false;
}

/* Take the channels producers listed since the last look, oldest first. */
static void
take_ready(struct conn *c)
{
	struct outchan *oc = atomic_exchange(&c->ready.head, NULL), *rev = NULL;

	while (oc != NULL) {
		struct outchan *next = oc->ready_next;
		oc->ready_next = rev;
		rev = oc;
		oc = next;
	}
	for (; rev != NULL; rev = rev->ready_next) {
		act_append(c, rev);
	}
}

/* Channels at the head with nothing left to send leave the list, up to
 * the first that has something (enough to tell whether any has). */
static void
prune_active(struct conn *c)
{
	struct outchan *oc;

	while ((oc = c->act_head) != NULL && outchan_unsent(oc) == 0) {
		act_unlink(c, oc);
		if (!outchan_unlist(oc)) {
			act_append(c, oc); /* frames arrived meanwhile */
			return;
		}
	}
}

static void
kept_note(struct conn *c, struct outchan *oc)
{
	if (oc->on_kept || !oc->retain || atomic_load(&oc->sent) == 0) {
		return;
	}
	oc->on_kept = true;
	oc->kept_prev = NULL;
	oc->kept_next = c->kept_head;
	if (c->kept_head != NULL) {
		c->kept_head->kept_prev = oc;
	}
	c->kept_head = oc;
}

static void
kept_unlink(struct conn *c, struct outchan *oc)
{
	if (!oc->on_kept) {
		return;
	}
	if (oc->kept_prev != NULL) {
		oc->kept_prev->kept_next = oc->kept_next;
	} else {
		c->kept_head = oc->kept_next;
	}
	if (oc->kept_next != NULL) {
		oc->kept_next->kept_prev = oc->kept_prev;
	}
	oc->kept_next = oc->kept_prev = NULL;
	oc->on_kept = false;
}

/* A ring that grew is listed, so that the timers give its buffer back once
 * it is idle without walking every channel. Without memory for the list the
 * ring stays as it is until its channel closes. The list holds at most
 * queue.max_bytes / OUTCHAN_SHRINK_MIN channels, and is short unless a
 * backlog is under way: a channel leaving it is looked for. */
static void
grown_note(struct conn *c, struct outchan *oc)
{
	if (oc->on_grown || oc->ring.cap < OUTCHAN_SHRINK_MIN) {
		return;
	}
	if (c->ngrown == c->grown_cap) {
		uint32_t cap = c->grown_cap ? 2 * c->grown_cap : LIST_KEEP;
		struct outchan **v = realloc(c->grown, cap * sizeof(*v));
		if (v == NULL) {
			return;
		}
		c->grown = v;
		c->grown_cap = cap;
	}
	c->grown[c->ngrown++] = oc;
	oc->on_grown = true;
}

static void
grown_remove(struct conn *c, uint32_t i)
{
	c->grown[i]->on_grown = false;
	c->grown[i] = c->grown[--c->ngrown];
}

static void
grown_unlink(struct conn *c, struct outchan *oc)
{
	for (uint32_t i = 0; oc->on_grown && i < c->ngrown; i++) {
		if (c->grown[i] == oc) {
			grown_remove(c, i);
		}
	}
}

/* Channels whose written frames were all acknowledged leave the kept list
 * (only a write, under wlock, makes `sent` grow again). */
static void
prune_kept(struct conn *c)
{
	struct outchan *oc = c->kept_head, *next;

	for (; oc != NULL; oc = next) {
		next = oc->kept_next;
		if (atomic_load(&oc->sent) == 0) {
			kept_unlink(c, oc);
		}
	}
}

/* The socket is full: every channel with data waiting waits on the peer. */
static void
mark_choked(struct conn *c)
{
	uint64_t now = clock_ms();

	for (struct outchan *oc = c->act_head; oc != NULL; oc = oc->act_next) {
		if (outchan_unsent(oc) > 0) {
			outchan_mark_starved(oc, now);
		}
	}
}

/* Add what channel oc gives to the batch: its place in took[] is k
 * (b->ntook: its first part in this batch). */
static void
gather_chan(struct batch *b, struct outchan *oc, int k, size_t limit, size_t room, uint64_t now)
{
	size_t already = k < b->ntook ? b->taken[k] : 0;
	int nv;

	if (b->n > IOV_BATCH - 2 || (k == b->ntook && b->ntook == TOOK_MAX)) {
		return;
	}
	size_t take = outchan_take(oc, already, limit, room, &b->iov[b->n], &nv, now);
	if (take == 0) {
		return;
	}
	for (int i = 0; i < nv; i++) {
		b->took_at[b->n + i] = (short)k;
	}
	b->n += nv;
	b->total += take;
	if (k == b->ntook) {
		b->took[b->ntook] = oc;
		b->taken[b->ntook++] = 0;
	}
	b->taken[k] += take;
}

/* outchan_take asked for a BLOCKED report: note the channel for
 * tell_blocked, which then looks at these only. */
static void
note_want_blocked(struct conn *c, struct outchan *oc)
{
	if (!oc->want_blocked || oc->on_blocked) {
		return;
	}
	if (c->nblocked == c->blocked_cap) {
		int cap = c->blocked_cap ? c->blocked_cap * 2 : 16;
		struct outchan **v = realloc(c->blockedv, (size_t)cap * sizeof(*v));
		if (v == NULL) {
			return; /* reported with the next shortage */
		}
		c->blockedv = v;
		c->blocked_cap = cap;
	}
	c->blockedv[c->nblocked++] = oc;
	oc->on_blocked = true;
}

static bool
batch_full(const struct batch *b)
{
	return b->n > IOV_BATCH - 2 || b->ntook == TOOK_MAX;
}

/* The next channel's first frame, and the state of the one after it. */
static inline void
prefetch_ahead(const struct outchan *oc)
{
	const struct outchan *next = oc->act_next;

	if (next != NULL) {
		outchan_prefetch_data(next);
		if (next->act_next != NULL) {
			outchan_prefetch_state(next->act_next);
		}
	}
}

/* Fill a batch: conn->out first, then a fair share of each channel. */
static void
gather(struct conn *c, struct batch *b)
{
	size_t budget = c->batch_max;
	uint64_t now = clock_ms();
	int active = 0, visited = 0;

	b->n = b->ntook = 0;
	b->total = 0;
	if (c->out_len > 0) {
		/* no write above the peer's batch_max, control frames included */
		b->iov[0].iov_base = c->out;
		b->iov[0].iov_len = c->out_len < budget ? c->out_len : budget;
		b->took_at[0] = -1;
		b->n = 1;
		b->total = b->iov[0].iov_len;
	}
	if (conn_state(c) != CONN_READY || b->total >= budget || c->saying_goodbye) {
		return;
	}
	take_ready(c);
	active = c->nact;
	if (active == 0) {
		return;
	}
	size_t share = (budget - b->total) / (size_t)active;
	struct outchan *oc = c->act_head;
	for (; oc != NULL && b->total < budget && !batch_full(b); oc = oc->act_next) {
		prefetch_ahead(oc);
		gather_chan(b, oc, b->ntook, share, budget - b->total, now);
		note_want_blocked(c, oc);
		visited++;
	}
	/* every channel had its share and room is left: what the batch can
	 * still take goes to those that gave something (the others had nothing
	 * or no credit) */
	for (int k = 0; oc == NULL && k < b->ntook && b->total < budget; k++) {
		gather_chan(b, b->took[k], k, budget - b->total, budget - b->total, now);
		note_want_blocked(c, b->took[k]);
	}
	/* round robin: the channels this batch looked at go to the back, so
	 * the next batch starts with those it could not reach; those it
	 * emptied leave the list (the list is not walked whole per batch) */
	for (int i = 0; i < visited && c->act_head != NULL; i++) {
		struct outchan *first = c->act_head;
		act_unlink(c, first);
		if (outchan_unsent(first) > 0 || !outchan_unlist(first)) {
			act_append(c, first);
		}
	}
}

/* A channel's part of a write: a frame the socket cut moves to conn->out. */
static void
settle_chan(struct conn *c, struct outchan *oc, size_t taken, size_t written, uint64_t now)
{
	size_t end = outchan_cut_end(oc, taken, written);

	if (end > written) {
		if (out_reserve(c, end - written)) {
			outchan_copy_cut(oc, written, c->out + c->out_len, end - written);
			c->out_len += end - written;
		} else {
			set_dead(c);
			snprintf(c->write_error, sizeof(c->write_error), "out of memory");
		}
	}
	outchan_settle(oc, taken, end, written > 0, now);
	kept_note(c, oc);
	grown_note(c, oc);
}

/* The socket took `written` bytes of the batch: release them. */
static void
settle(struct conn *c, struct batch *b, size_t written)
{
	size_t written_ch[TOOK_MAX] = {0};

	/* conn->out is the batch's first segment, if any; the rest are rings */
	if (b->n > 0 && b->took_at[0] < 0) {
		size_t out_done = written < b->iov[0].iov_len ? written : b->iov[0].iov_len;
		memmove(c->out, c->out + out_done, c->out_len - out_done);
		c->out_len -= out_done;
		written -= out_done;
	}
	for (int i = 0; i < b->n && written > 0; i++) {
		size_t w = written < b->iov[i].iov_len ? written : b->iov[i].iov_len;
		if (b->took_at[i] < 0) {
			continue;
		}
		written_ch[b->took_at[i]] += w;
		written -= w;
	}
	uint64_t now = b->ntook > 0 ? clock_ms() : 0;
	for (int k = 0; k < b->ntook; k++) {
		settle_chan(c, b->took[k], b->taken[k], written_ch[k], now);
	}
}

/* Report channels whose data waits for credit (once per shortage), so the
 * receiver can grow a window that is too small for the link. */
static bool
tell_blocked(struct conn *c)
{
	bool told = false;

	for (int i = 0; i < c->nblocked; i++) {
		struct outchan *oc = c->blockedv[i];
		oc->on_blocked = false;
		if (!oc->want_blocked) {
			continue;
		}
		oc->want_blocked = false;
		if (!atomic_exchange(&oc->blocked_sent, true)) {
			struct ctl_msg m = {.type = CTL_BLOCKED};
			m.u.credit.channel = oc->id;
			m.u.credit.bytes = 0;
			send_ctl_locked(c, &m);
			told = true;
		}
	}
	c->nblocked = 0;
	return told;
}

static void
count_write(struct conn *c, size_t n)
{
	/* one writer at a time (wlock): a relaxed read and store suffice */
	atomic_store_explicit(&c->batches,
	                      atomic_load_explicit(&c->batches, memory_order_relaxed) + 1,
	                      memory_order_relaxed);
	atomic_store_explicit(&c->batch_bytes,
	                      atomic_load_explicit(&c->batch_bytes, memory_order_relaxed) + n,
	                      memory_order_relaxed);
	if (n > atomic_load_explicit(&c->batch_largest, memory_order_relaxed)) {
		atomic_store_explicit(&c->batch_largest, n, memory_order_relaxed);
	}
}

/* The socket is full: the rest waits for EPOLLOUT. */
static void
choke(struct conn *c)
{
	set_epollout(c, true);
	set_pending(c);
	mark_choked(c);
}

/* The batch through the TLS session: its records are written from the
 * gathered segments themselves. False when the flush stops here. */
static bool
flush_tls(struct conn *c, struct batch *b, bool *wrote)
{
	bool blocked = false;
	ssize_t n =
	    tls_writev(c->tls, b->iov, b->n, &blocked, c->write_error, sizeof(c->write_error));

	if (n < 0) {
		settle(c, b, 0);
		set_dead(c);
		return false;
	}
	if (n > 0) {
		*wrote = true;
		count_write(c, (size_t)n);
	}
	settle(c, b, (size_t)n);
	if (blocked || (size_t)n < b->total) {
		choke(c);
		return false;
	}
	return true;
}

/* A burst of control messages (a hundred thousand declarations) grew
 * conn->out: once it is written, give the memory back. */
static void
shrink_out(struct conn *c)
{
	uint8_t *p;

	if (c->out_len > 0 || c->out_cap <= (64u << 10) ||
	    (p = realloc(c->out, OUT_INITIAL)) == NULL) {
		return;
	}
	c->out = p;
	c->out_cap = OUT_INITIAL;
}

static bool
flush_locked(struct conn *c)
{
	struct batch b;
	bool wrote = false;
	int state = conn_state(c);

	if (state == CONN_DEAD || state == CONN_CONNECTING || atomic_load(&c->dead) ||
	    (c->tls != NULL && !c->tls_done)) {
		return false;
	}
	atomic_store(&c->pending, 0);
	if (c->write_closed) {
		c->out_len = 0; /* acknowledgements for a peer that is told to go */
		set_epollout(c, false);
		return false;
	}
	for (;;) {
		struct msghdr mh = {0};
		tell_blocked(c); /* before gathering: it appends to conn->out */
		gather(c, &b);
		if (b.total == 0 && tell_blocked(c)) {
			continue;
		}
		if (b.total == 0) {
			set_epollout(c, false);
			shrink_out(c);
			if (c->saying_goodbye) {
				shutdown(c->fd, SHUT_WR);
				c->write_closed = true;
			}
			return wrote;
		}
		if (c->tls != NULL) {
			if (!flush_tls(c, &b, &wrote)) {
				return wrote;
			}
			continue;
		}
		mh.msg_iov = b.iov;
		mh.msg_iovlen = (size_t)b.n;
		ssize_t n = sendmsg(c->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EINTR) {
				continue;
			}
			settle(c, &b, 0);
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				choke(c);
			} else {
				snprintf(c->write_error, sizeof(c->write_error), "write: %s",
				         strerror(errno));
				set_dead(c);
			}
			return wrote;
		}
		wrote = true;
		count_write(c, (size_t)n);
		settle(c, &b, (size_t)n);
		if ((size_t)n < b.total) {
			choke(c);
			return wrote;
		}
	}
}

bool
conn_flush(struct conn *c)
{
	pthread_mutex_lock(&c->wlock);
	bool wrote = flush_locked(c);
	pthread_mutex_unlock(&c->wlock);
	return wrote;
}

void
conn_say_goodbye(struct conn *c, const char *reason)
{
	struct ctl_msg m = {.type = CTL_GOODBYE};

	m.u.reason.p = reason;
	m.u.reason.len = strlen(reason);
	conn_send_ctl(c, &m);
	pthread_mutex_lock(&c->wlock);
	c->saying_goodbye = true;
	flush_locked(c);
	pthread_mutex_unlock(&c->wlock);
}

bool
conn_try_flush(struct conn *c)
{
	if (pthread_mutex_trylock(&c->wlock) != 0) {
		return false;
	}
	bool wrote = flush_locked(c);
	pthread_mutex_unlock(&c->wlock);
	return wrote;
}

/* ---- life ---- */

static void
send_hello(struct conn *c)
{
	const tern_config *cfg = c->env->cfg;
	struct ctl_msg m = {.type = CTL_HELLO};
	uint8_t pre[WIRE_PREAMBLE_LEN];
	int one = 1;

	/* tern batches by itself; Nagle's delay would only add latency */
	setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	m.u.hello.id.p = cfg->id;
	m.u.hello.id.len = strlen(cfg->id);
	m.u.hello.mode = (uint64_t)cfg->mode;
	m.u.hello.low_latency = cfg->low_latency;
	m.u.hello.batch_max = cfg->batch_max_bytes;
	m.u.hello.chunk = cfg->chunk_bytes;
	m.u.hello.max_message = cfg->max_message_bytes;
	m.u.hello.window = c->env->window_init;
	m.u.hello.keepalive_ms = cfg->keepalive_ms;
	wire_preamble_encode(pre);
	pthread_mutex_lock(&c->wlock);
	memcpy(c->out, pre, sizeof(pre));
	c->out_len = sizeof(pre);
	send_ctl_locked(c, &m);
	flush_locked(c);
	pthread_mutex_unlock(&c->wlock);
}

int
conn_use_tls(struct conn *c)
{
	if (c->env->tls == NULL) {
		return tern__error(TERN_EINVAL, "%s: no TLS context", c->endpoint);
	}
	c->tls = tls_conn_new(c->env->tls, c->fd, !c->outbound);
	if (c->tls == NULL) {
		return tern__error(TERN_ENOMEM, "%s: cannot start a TLS session", c->endpoint);
	}
	/* the handshake's small flights must not wait for Nagle */
	int one = 1;
	setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	return 0;
}

/* A TLS handshake failed (or never began): say so, once, and close. An
 * outbound connection's failure is logged by its dialer, once per run of
 * failures; an inbound one is logged here. */
static void
tls_refuse(struct conn *c, const char *why)
{
	if (!c->outbound) {
		log_line(c->env->log, TERN_LOG_WARN, "refusing a connection on %s: %s", c->endpoint,
		         why);
	}
	conn_fail(c, why);
}

/*
 * Before a TLS listener's handshake reads anything, look at the peer's
 * first bytes without taking them: a plain tern client starts with the
 * preamble. Returns 1 when the handshake may go on, 0 to wait for bytes,
 * -1 when the connection was refused.
 *
 * A client does not look: it speaks first, always, even when a plain
 * listener's preamble is already waiting, so that its ClientHello tells
 * that listener why it goes (tls_step then finds the preamble where the
 * handshake failed).
 */
static int
tls_peek(struct conn *c)
{
	uint8_t pre[WIRE_PREAMBLE_LEN], first[WIRE_PREAMBLE_LEN];
	ssize_t n;

	if (c->tls_peeked || c->outbound) {
		return 1;
	}
	n = recv(c->fd, first, sizeof(first), MSG_PEEK | MSG_DONTWAIT);
	if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
		tls_refuse(c, strerror(errno));
		return -1;
	}
	if (n < 0) {
		return 0; /* the client speaks first */
	}
	if (n == 0) {
		/* a probe that connects and leaves is no refusal: not worth a warning */
		conn_fail(c, "the peer closed the connection before the TLS handshake");
		return -1;
	}
	wire_preamble_encode(pre);
	if (memcmp(first, pre, (size_t)n < 4 ? (size_t)n : 4) == 0) {
		if (n < 4) {
			return 0;
		}
		uint8_t alert[16];
		size_t len = tls_refusal_record(alert, sizeof(alert));
		/* the plain peer reads this as "TLS here": see parse() */
		if (send(c->fd, alert, len, MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
			/* it learns from the closed connection alone */
		}
		tls_refuse(c, "a plain tern peer on a TLS port (it must connect with tls://)");
		return -1;
	}
	c->tls_peeked = true;
	return 1;
}

/* One step of the TLS handshake; when it is over, tern's begins. */
static void
tls_step(struct conn *c)
{
	char why[200];
	bool want_write = false;
	int rc = tls_peek(c);

	if (rc <= 0) {
		return;
	}
	pthread_mutex_lock(&c->wlock);
	rc = tls_handshake(c->tls, &want_write, why, sizeof(why));
	if (rc == TLS_DONE) {
		c->tls_done = true;
		tls_peer_name(c->tls, c->identity, sizeof(c->identity));
	}
	pthread_mutex_unlock(&c->wlock);
	if (rc == TLS_FAILED) {
		const uint8_t *first;
		uint8_t pre[WIRE_PREAMBLE_LEN];
		wire_preamble_encode(pre);
		/* a client met a plain listener: its preamble where a record was due */
		if (tls_first_bytes(c->tls, &first) >= 4 && memcmp(first, pre, 4) == 0) {
			snprintf(why, sizeof(why), "%s", PLAIN_PEER);
		}
		tls_refuse(c, why);
		return;
	}
	set_epollout(c, want_write);
	if (rc == TLS_DONE) {
		log_line(c->env->log, TERN_LOG_DEBUG, "TLS with %s: %s, peer %s", c->endpoint,
		         tls_cipher(c->tls), c->identity[0] ? c->identity : "not verified");
		send_hello(c);
	}
}

/* The socket is connected: the handshakes begin. */
static void
begin(struct conn *c)
{
	if (c->tls != NULL) {
		tls_step(c);
	} else {
		send_hello(c);
	}
}

void
conn_start(struct conn *c)
{
	conn_epoll(c, EPOLL_CTL_ADD);
	if (conn_state(c) == CONN_HANDSHAKE) {
		begin(c);
	}
}

void
conn_fail(struct conn *c, const char *why)
{
	bool nothing_to_resume = c->said_goodbye || atomic_load(&c->kill);

	if (conn_state(c) == CONN_DEAD) {
		return;
	}
	atomic_store(&c->dead, 1);
	atomic_store(&c->state, CONN_DEAD);
	note_work(c); /* the loop reaps it */
	snprintf(c->reason, sizeof(c->reason), "%s", why);
	epoll_ctl(c->env->epfd, EPOLL_CTL_DEL, c->fd, NULL);
	shutdown(c->fd, SHUT_RDWR);
	/* publishers blocked on this connection give up on it */
	pthread_mutex_lock(&c->wlock);
	for (int i = 0; i < c->nout; i++) {
		outchan_break(c->outv[i], nothing_to_resume ? OUTCHAN_DROPPED : OUTCHAN_LOST);
	}
	pthread_mutex_unlock(&c->wlock);
}

void
conn_free(struct conn *c)
{
	for (int i = 0; i < c->nout; i++) {
		outchan_free(c->outv[i]);
	}
	free(c->outv);
	free(c->grown);
	free(c->blockedv);
	chanid_free(&c->out_ids);
	for (uint32_t i = 0; i < c->ins.cap; i++) {
		inchan_free(conn_inchan(c, i), &c->reasm_budget);
	}
	idtab_free(&c->ins);
	free(c->dirty);
	free(c->credited);
	free(c->stalled);
	free(c->spare);
	tls_conn_free(c->tls);
	close(c->fd);
	pthread_mutex_destroy(&c->wlock);
	free(c->rbuf);
	free(c->out);
	free(c);
}

void
conn_data_pending(struct conn *c)
{
	if (!atomic_load_explicit(&c->pending, memory_order_relaxed)) {
		if (c->env->cfg->batch_max_delay_us > 0) {
			atomic_store(&c->pending_since_ns, clock_ns());
		}
		set_pending(c);
	}
}

void
conn_mark_pending(struct conn *c)
{
	set_pending(c);
}

bool
conn_busy(const struct conn *c)
{
	return c->nstalled > 0 || c->nout > 0;
}

size_t
conn_queued(struct conn *c)
{
	size_t queued;

	pthread_mutex_lock(&c->wlock);
	queued = c->out_len;
	take_ready(c);
	for (struct outchan *oc = c->act_head; oc != NULL; oc = oc->act_next) {
		queued += ring_used(&oc->ring);
	}
	for (struct outchan *oc = c->kept_head; oc != NULL; oc = oc->kept_next) {
		queued += atomic_load(&oc->listed) ? 0 : ring_used(&oc->ring);
	}
	pthread_mutex_unlock(&c->wlock);
	return queued;
}

uint64_t
conn_tail_mark(struct conn *c)
{
	uint64_t mark = 0;

	pthread_mutex_lock(&c->wlock);
	take_ready(c);
	for (struct outchan *oc = c->act_head; oc != NULL; oc = oc->act_next) {
		mark += atomic_load_explicit(&oc->ring.tail, memory_order_relaxed);
	}
	pthread_mutex_unlock(&c->wlock);
	return mark;
}

/* ---- channels ---- */

struct outchan *
conn_open_outchan(struct conn *c, const struct ctl_msg *open, bool reliable,
                  const struct outchan_ops *ops, void *arg)
{
	struct outchan_params p = {.reliable = reliable,
	                           .link = &c->olink,
	                           .ops = ops,
	                           .arg = arg,
	                           .label = open->u.open.key.p};
	struct ctl_msg m = *open;
	struct outchan *oc;

	pthread_mutex_lock(&c->wlock);
	if (c->nout == c->out_cap_v) {
		int cap = c->out_cap_v ? c->out_cap_v * 2 : 8;
		struct outchan **v = realloc(c->outv, (size_t)cap * sizeof(*v));
		if (v == NULL) {
			pthread_mutex_unlock(&c->wlock);
			tern__error(TERN_ENOMEM, "out of memory");
			return NULL;
		}
		c->outv = v;
		c->out_cap_v = cap;
	}
	if (outchan_new(&oc, &p) != 0) {
		pthread_mutex_unlock(&c->wlock);
		tern__error(TERN_ENOMEM, "out of memory");
		return NULL;
	}
	if (chanid_take(&c->out_ids, oc, &oc->id) != 0) {
		pthread_mutex_unlock(&c->wlock);
		outchan_free(oc); /* keeps the error chanid_take set */
		return NULL;
	}
	m.u.open.channel = oc->id;
	send_ctl_locked(c, &m);
	oc->slot = c->nout;
	c->outv[c->nout++] = oc;
	pthread_mutex_unlock(&c->wlock);
	return oc;
}

void
conn_close_outchan(struct conn *c, struct outchan *oc, bool tell)
{
	struct ctl_msg m = {.type = CTL_CLOSE};

	pthread_mutex_lock(&c->wlock);
	c->outv[oc->slot] = c->outv[--c->nout];
	c->outv[oc->slot]->slot = oc->slot;
	if (c->out_cap_v > 64 && c->nout < c->out_cap_v / 4) {
		/* many keys came and went: give the table back */
		struct outchan **v = realloc(c->outv, (size_t)(c->out_cap_v / 2) * sizeof(*v));
		if (v != NULL) {
			c->outv = v;
			c->out_cap_v /= 2;
		}
	}
	take_ready(c); /* then a listed channel is on the list, not on ready */
	if (oc->on_act) {
		act_unlink(c, oc);
	}
	kept_unlink(c, oc);
	grown_unlink(c, oc);
	for (uint32_t i = 0; oc->on_credited && i < c->ncredited; i++) {
		if (c->credited[i] == oc) {
			c->credited[i] = c->credited[--c->ncredited];
			oc->on_credited = false;
		}
	}
	for (int i = 0; oc->on_blocked && i < c->nblocked; i++) {
		if (c->blockedv[i] == oc) {
			c->blockedv[i] = c->blockedv[--c->nblocked];
			oc->on_blocked = false;
		}
	}
	if (tell && conn_state(c) == CONN_READY) {
		m.u.credit.channel = oc->id;
		send_ctl_locked(c, &m);
	}
	/* the time after the CLOSE was queued: a PING queued later follows it */
	chanid_close(&c->out_ids, oc->id, clock_us());
	if (c->out_ids.nheld >= CHANID_HELD_PING && c->settle_ping_us == 0 &&
	    conn_state(c) == CONN_READY) {
		struct ctl_msg ping = {.type = CTL_PING};
		ping.u.token = c->settle_ping_us = clock_us();
		send_ctl_locked(c, &ping);
	}
	pthread_mutex_unlock(&c->wlock);
	outchan_free(oc);
}

static struct outchan *
outchan_by_id(struct conn *c, uint64_t id)
{
	return chanid_get(&c->out_ids, id);
}

int
conn_open_inchan(struct conn *c, uint64_t id, const struct inchan_ops *ops, void *arg)
{
	struct inchan *in;
	int rc;

	if (id == 0 || id > WIRE_CHANNEL_MAX) {
		return tern__error(TERN_EPROTO, "channel id %llu out of range",
		                   (unsigned long long)id);
	}
	if (conn_inchan(c, id) != NULL) {
		return tern__error(TERN_EPROTO, "channel %llu opened twice",
		                   (unsigned long long)id);
	}
	if ((rc = inchan_new(&in, (uint32_t)id, c->env->window_init, c->env->window_max, ops, arg,
	                     c)) != 0) {
		return rc;
	}
	if (idtab_put(&c->ins, (uint32_t)id, in) != 0) {
		inchan_free(in, &c->reasm_budget);
		return TERN_ENOMEM;
	}
	return 0;
}

/* A list of receive channels; *on says whether in is on it, so that
 * adding costs nothing per frame and removing scans only when needed. */
static void
list_remove(struct inchan **v, uint32_t *n, struct inchan *in, bool *on)
{
	for (uint32_t i = 0; *on && i < *n; i++) {
		if (v[i] == in) {
			v[i] = v[--*n];
			break;
		}
	}
	*on = false;
}

static bool
list_add(struct inchan ***v, uint32_t *n, uint32_t *cap, struct inchan *in, bool *on)
{
	if (*on) {
		return true;
	}
	if (*n == *cap) {
		uint32_t nc = *cap ? *cap * 2 : 16;
		struct inchan **p = realloc(*v, nc * sizeof(*p));
		if (p == NULL) {
			return false;
		}
		*v = p;
		*cap = nc;
	}
	(*v)[(*n)++] = in;
	*on = true;
	return true;
}

void
conn_close_inchan(struct conn *c, struct inchan *in)
{
	list_remove(c->stalled, &c->nstalled, in, &in->on_stalled);
	list_remove(c->dirty, &c->ndirty, in, &in->on_dirty);
	list_remove(c->spare, &c->nspare, in, &in->on_spare);
	idtab_del(&c->ins, in->id);
	inchan_free(in, &c->reasm_budget);
}

/* ---- reading ---- */

/*
 * Consumption is acknowledged once per read (not per frame): one CREDIT per
 * touched channel carries the bytes granted, if any, and the total consumed,
 * which lets the sender release what it kept for a resend.
 */
static void
note_ack(struct conn *c, struct inchan *in)
{
	/* without memory for the list, the channel is acknowledged after its
	 * next frame instead */
	if (in->dirty) {
		list_add(&c->dirty, &c->ndirty, &c->dirty_cap, in, &in->on_dirty);
	}
}

static uint64_t window_floor(const struct conn *c);

static void
flush_acks(struct conn *c)
{
	for (uint32_t i = 0; i < c->ndirty; i++) {
		struct ctl_msg m = {.type = CTL_CREDIT};
		struct inchan *in = c->dirty[i];

		in->on_dirty = false;
		if (in->blocked_unweighed && c->rtt_us > 0) {
			inchan_blocked(in, c->rtt_us, window_floor(c));
		}
		if (conn_state(c) != CONN_READY ||
		    !inchan_ack(in, &m.u.credit.bytes, &m.u.credit.consumed)) {
			in->dirty = false;
			continue;
		}
		m.u.credit.channel = in->id;
		conn_send_ctl(c, &m);
	}
	if (c->ndirty > c->dirty_peak) {
		c->dirty_peak = c->ndirty;
	}
	c->ndirty = 0;
}

static struct inchan_limits
limits(struct conn *c)
{
	struct inchan_limits lim = {.max_message = c->env->cfg->max_message_bytes,
	                            .budget = &c->reasm_budget};
	return lim;
}

/* A backlog emptied: its buffer waits on the spare list for the next stall
 * (shrink_backlogs gives it back once unused for a while). Without memory
 * for the list it goes back at once. */
static void
note_spare(struct conn *c, struct inchan *in)
{
	if (!list_add(&c->spare, &c->nspare, &c->spare_cap, in, &in->on_spare)) {
		inchan_backlog_release(in);
	}
}

/* How far ahead a walk over the stalled channels asks for their backlogs
 * (and twice as far for their state): a retry is short, a miss is not. */
#define STALLED_AHEAD 4

bool
conn_retry_stalled(struct conn *c)
{
	struct inchan_limits lim = limits(c);
	bool progress = false;

	uint32_t n = c->nstalled, keep = 0;

	/* a dead connection's backlog is still delivered: it was received; the
	 * list is walked in order (those still stalled move up), so that what
	 * is asked for ahead is what comes next */
	for (uint32_t i = 0; i < n; i++) {
		struct inchan *in = c->stalled[i];
		if (i + 2 * STALLED_AHEAD < n) {
			inchan_prefetch_state(c->stalled[i + 2 * STALLED_AHEAD]);
		}
		if (i + STALLED_AHEAD < n) {
			inchan_prefetch_backlog(c->stalled[i + STALLED_AHEAD]);
		}
		int rc = inchan_retry(in, &lim);
		note_ack(c, in);
		if (rc < 0) {
			conn_fail(c, tern_last_error());
			for (uint32_t k = 0; k < n; k++) {
				if (k < keep || k >= i) {
					c->stalled[k]->on_stalled = false;
				}
			}
			keep = 0;
			progress = true;
			break;
		}
		if (rc == 0) {
			c->stalled[keep++] = in;
			continue;
		}
		in->on_stalled = false;
		note_spare(c, in);
		progress = true;
	}
	c->nstalled = keep;
	flush_acks(c);
	return progress;
}

static int
on_data(struct conn *c, const struct wire_frame *f, size_t hlen, const uint8_t *payload)
{
	struct inchan *in = conn_inchan(c, f->channel);
	struct inchan_limits lim = limits(c);
	int rc;

	if (in == NULL) {
		return tern__error(TERN_EPROTO, "data on channel %llu, which was never opened",
		                   (unsigned long long)f->channel);
	}
	atomic_store_explicit(&c->bytes_in, atomic_load(&c->bytes_in) + f->len,
	                      memory_order_relaxed);
	if (f->type == WIRE_DATA || (f->flags & WIRE_FLAG_FIRST)) {
		atomic_store_explicit(&c->messages_in, atomic_load(&c->messages_in) + 1,
		                      memory_order_relaxed);
	}
	rc = inchan_receive(in, f, hlen, payload, &lim);
	note_ack(c, in);
	if (rc == 0) {
		c->stalled_since_look = true;
		if (!list_add(&c->stalled, &c->nstalled, &c->stalled_cap, in, &in->on_stalled)) {
			return tern__error(TERN_ENOMEM, "no memory to hold a stalled channel");
		}
	}
	return rc < 0 ? rc : 0;
}

/* What the send channels share, from the peer's HELLO: frame_max and
 * window as on_hello bounded them; a ring grows without asking the budget
 * up to four batches and the window's worth twice (kept, and more to send). */
static void
set_olink(struct conn *c, uint64_t frame_max, uint64_t window)
{
	size_t ring_min = 256u << 10;

	if (ring_min < 4ull * c->batch_max) {
		ring_min = 4ull * c->batch_max;
	}
	if (ring_min < 2ull * window) {
		ring_min = 2ull * window;
	}
	c->olink.frame_max = (uint32_t)frame_max;
	c->olink.peer_window = window;
	c->olink.ring_min = ring_min;
}

static void
on_hello(struct conn *c, const struct ctl_msg *m)
{
	const tern_config *cfg = c->env->cfg;
	uint64_t frame_max, window;

	snprintf(c->peer_id, sizeof(c->peer_id), "%.*s", (int)m->u.hello.id.len, m->u.hello.id.p);
	/* either side asking for low latency makes the connection low-latency */
	c->low_latency = cfg->low_latency || m->u.hello.low_latency;
	/* no write larger than either side's batch limit */
	c->batch_max = cfg->batch_max_bytes;
	if (m->u.hello.batch_max < c->batch_max) {
		c->batch_max = (uint32_t)m->u.hello.batch_max;
	}
	frame_max = cfg->chunk_bytes < m->u.hello.chunk ? cfg->chunk_bytes : m->u.hello.chunk;
	if (frame_max + WIRE_HDR_MAX > c->batch_max) {
		frame_max = c->batch_max - WIRE_HDR_MAX;
	}
	c->peer_max_message = m->u.hello.max_message;
	c->peer_router = m->u.hello.mode == TERN_MODE_ROUTER;
	c->peer_client = m->u.hello.mode == TERN_MODE_CLIENT;
	/* a send ring holds twice the window: no more than the queue allows */
	window = m->u.hello.window;
	if (window > cfg->queue_max_bytes / 2) {
		window = cfg->queue_max_bytes / 2;
	}
	if (window < frame_max + WIRE_HDR_MAX) {
		window = frame_max + WIRE_HDR_MAX;
	}
	c->peer_keepalive_ms = m->u.hello.keepalive_ms;
	set_olink(c, frame_max, window);
	c->got_hello = true;
	atomic_store(&c->state, CONN_READY);
	struct ctl_msg ping = {.type = CTL_PING};
	ping.u.token = clock_us(); /* a first round trip, for flow control */
	conn_send_ctl(c, &ping);
	log_line(c->env->log, TERN_LOG_INFO, "connected %s %s (%s), %s mode%s%s%s",
	         c->outbound ? "to" : "from", c->peer_id, c->endpoint,
	         c->low_latency ? "low-latency" : "batched",
	         c->tls == NULL   ? ""
	         : c->identity[0] ? ", TLS identity '"
	                          : ", TLS (peer not verified)",
	         c->identity, c->tls != NULL && c->identity[0] ? "'" : "");
	c->ops->ready(c->arg, c);
}

static uint64_t
window_floor(const struct conn *c)
{
	uint64_t floor = c->rtt_us * FLOOR_RATE;

	return floor < WINDOW_FLOOR ? floor : WINDOW_FLOOR;
}

static int
on_first_control(struct conn *c, const struct ctl_msg *m)
{
	const char *id = c->env->cfg->id;

	if (m->type != CTL_HELLO) {
		return tern__error(TERN_EPROTO, "the peer did not start with a handshake");
	}
	if (m->u.hello.id.len == strlen(id) &&
	    memcmp(m->u.hello.id.p, id, m->u.hello.id.len) == 0) {
		return tern__error(TERN_EPROTO,
		                   "the peer at %s has this node's id '%s'; give each node its "
		                   "own id",
		                   c->endpoint, id);
	}
	on_hello(c, m);
	return 0;
}

/* The first round trip is timed: weigh the BLOCKED reports that came
 * before it (a channel's first window can run out sooner on a long round
 * trip), instead of waiting a round trip for the next ones. */
static void
weigh_early_blocked(struct conn *c)
{
	for (uint32_t i = 0; i < c->ins.cap; i++) {
		struct inchan *in = conn_inchan(c, i);
		if (in != NULL && in->blocked_unweighed) {
			inchan_blocked(in, c->rtt_us, window_floor(c));
			note_ack(c, in);
		}
	}
}

/* The peer's clock answered at time_us, some time between token and now
 * on ours: take the middle. Keep the sample with the shortest round trip
 * (the least uncertain), but let a newer one within 1.5 times of it in,
 * so a drifting clock is followed. */
static void
note_offset(struct conn *c, uint64_t token, uint64_t now, uint64_t time_us)
{
	uint64_t rtt = now - token;
	uint64_t wall_mid = clock_wall_us() - rtt / 2;

	if (time_us == 0 ||
	    (c->offset_rtt_us != 0 && rtt > c->offset_rtt_us + c->offset_rtt_us / 2)) {
		return;
	}
	c->clock_offset_us = (int64_t)(time_us - wall_mid);
	c->offset_err_us = rtt / 2;
	if (c->offset_rtt_us == 0 || rtt < c->offset_rtt_us) {
		c->offset_rtt_us = rtt > 0 ? rtt : 1;
	}
}

uint64_t
conn_local_stamp(const struct conn *c, uint64_t peer_stamp_us)
{
	int64_t off = c->clock_offset_us;
	uint64_t mag = off < 0 ? (uint64_t)-off : (uint64_t)off;

	if (c->offset_rtt_us == 0 || mag <= c->offset_err_us) {
		return peer_stamp_us;
	}
	return peer_stamp_us - (uint64_t)off;
}

static void
on_pong(struct conn *c, uint64_t token, uint64_t time_us)
{
	uint64_t now = clock_us();
	bool first = c->rtt_us == 0;

	if (token > now) {
		return; /* not a token of ours */
	}
	chanid_settle(&c->out_ids, token);
	if (token >= c->settle_ping_us) {
		c->settle_ping_us = 0;
	}
	note_offset(c, token, now, time_us);
	/* the smallest sample: a PING waits behind the data queued ahead of it,
	 * and a window sized on that delay would only deepen the queue */
	if (c->rtt_us == 0 || now - token < c->rtt_us) {
		c->rtt_us = now - token > 0 ? now - token : 1;
	}
	if (first) {
		weigh_early_blocked(c);
	}
}

/*
 * A CREDIT that reports frames consumed releases them from the channel's
 * ring under wlock, which publishers writing by themselves also take. With
 * many keys, a read holds a CREDIT for each of many channels: they are
 * released together, under one wlock, at the end of the read.
 */
static void
release_credited(struct conn *c)
{
	uint64_t now = c->credited_ms;
	bool waiting = false;

	if (c->ncredited == 0) {
		return;
	}
	pthread_mutex_lock(&c->wlock);
	for (uint32_t i = 0; i < c->ncredited; i++) {
		outchan_release_locked(c->credited[i], now);
		c->credited[i]->on_credited = false;
	}
	pthread_mutex_unlock(&c->wlock);
	for (uint32_t i = 0; i < c->ncredited; i++) {
		waiting |= outchan_credited(c->credited[i]);
	}
	if (c->ncredited > c->dirty_peak) {
		c->dirty_peak = c->ncredited;
	}
	c->ncredited = 0;
	if (waiting) {
		conn_data_pending(c); /* frames were waiting for this credit */
	}
}

static bool
credited_add(struct conn *c, struct outchan *oc)
{
	if (oc->on_credited) {
		return true;
	}
	if (c->ncredited == c->credited_cap) {
		uint32_t nc = c->credited_cap ? c->credited_cap * 2 : 16;
		struct outchan **p = realloc(c->credited, nc * sizeof(*p));
		if (p == NULL) {
			return false;
		}
		c->credited = p;
		c->credited_cap = nc;
	}
	c->credited[c->ncredited++] = oc;
	oc->on_credited = true;
	return true;
}

static void
on_credit(struct conn *c, struct outchan *oc, const struct ctl_msg *m)
{
	uint64_t now = clock_ms();

	if (outchan_credit(oc, m->u.credit.bytes, m->u.credit.consumed, now)) {
		if (credited_add(c, oc)) {
			c->credited_ms = now;
			return; /* released, and its publishers woken, after the read */
		}
		/* without memory for the list: released now */
		pthread_mutex_lock(&c->wlock);
		outchan_release_locked(oc, now);
		pthread_mutex_unlock(&c->wlock);
	}
	if (outchan_credited(oc)) {
		conn_data_pending(c); /* frames were waiting for this credit */
	}
}

static int
on_control(struct conn *c, const uint8_t *p, size_t len)
{
	struct ctl_msg m;
	char why[160];

	if (ctl_decode_explain(p, len, &m, why, sizeof(why)) != 0) {
		return tern__error(TERN_EPROTO, "bad control message: %s", why);
	}
	if (!c->got_hello) {
		return on_first_control(c, &m);
	}
	switch (m.type) {
	case CTL_HELLO:
		return tern__error(TERN_EPROTO, "a second handshake");
	case CTL_SYNC:
		c->syncs_in++;
		c->peer_synced = true;
		c->ops->synced(c->arg, c);
		return 0;
	case CTL_PING: {
		struct ctl_msg r = {.type = CTL_PONG};
		c->peer_ping_ms = clock_ms();
		r.u.token = m.u.token;
		r.u.time_us = clock_wall_us();
		conn_send_ctl(c, &r);
		return 0;
	}
	case CTL_PONG:
		on_pong(c, m.u.token, m.u.time_us);
		return 0;
	case CTL_GOODBYE:
		log_line(c->env->log, TERN_LOG_INFO, "%s said goodbye: %.*s", c->peer_id,
		         (int)m.u.reason.len, m.u.reason.p);
		c->said_goodbye = true;
		conn_fail(c, "the peer said goodbye");
		return 0;
	case CTL_BLOCKED: {
		struct inchan *in = conn_inchan(c, m.u.credit.channel);
		if (in != NULL) {
			inchan_blocked(in, c->rtt_us, window_floor(c));
			note_ack(c, in);
		}
		return 0;
	}
	case CTL_CREDIT: {
		struct outchan *oc = outchan_by_id(c, m.u.credit.channel);
		/* a channel we closed meanwhile has nothing to settle */
		if (oc != NULL) {
			on_credit(c, oc, &m);
		}
		return 0;
	}
	case CTL_SUB:
	case CTL_UNSUB:
	case CTL_OPEN:
	case CTL_CLOSE:
	case CTL_DENY:
	case CTL_SCOPE:
	case CTL_UNSCOPE:
		release_credited(c); /* the session may close a listed channel */
		return c->ops->control(c->arg, c, &m);
	default:
		return tern__error(TERN_EPROTO, "unexpected control message %d", m.type);
	}
}

static int
on_preamble(struct conn *c)
{
	int version = 0;
	int rc = wire_preamble_decode(c->rbuf, &version);

	if (rc == TERN_EPROTO) {
		return tern__error(rc, "the peer at %s is not a tern node (bad magic)",
		                   c->endpoint);
	}
	if (rc == TERN_EVERSION) {
		return tern__error(rc,
		                   "the peer at %s speaks tern protocol version %d; this node "
		                   "speaks version %d",
		                   c->endpoint, version, TERN_PROTOCOL_VERSION);
	}
	c->got_preamble = true;
	return 0;
}

/* Parse and dispatch every complete frame in rbuf. */
static int
parse_frames(struct conn *c)
{
	uint64_t max =
	    c->env->cfg->chunk_bytes > CTL_MSG_MAX ? c->env->cfg->chunk_bytes : CTL_MSG_MAX;
	size_t pos = 0;
	int rc = 0;

	if (!c->got_preamble) {
		if (c->tls == NULL && tls_looks_like_record(c->rbuf, c->rlen) == 1) {
			if (c->outbound) {
				return tern__error(
				    TERN_EPROTO, "the peer at %s speaks TLS (connect with tls://)",
				    c->endpoint);
			}
			return tern__error(TERN_EPROTO,
			                   "a TLS peer on the plain port %s (it must connect with "
			                   "tcp://, or this node listen with tls://)",
			                   c->endpoint);
		}
		if (c->rlen < WIRE_PREAMBLE_LEN) {
			return 0;
		}
		if ((rc = on_preamble(c)) != 0) {
			return rc;
		}
		pos = WIRE_PREAMBLE_LEN;
	}
	while (pos < c->rlen && conn_state(c) != CONN_DEAD) {
		struct wire_frame f;
		size_t hlen;

		rc = wire_header_decode_fast(c->rbuf + pos, c->rlen - pos, max, &f, &hlen);
		if (rc < 0) {
			char why[160];
			wire_header_explain(c->rbuf + pos, c->rlen - pos, max, why, sizeof(why));
			return tern__error(rc, "bad frame header from %s: %s", c->endpoint, why);
		}
		if (rc == 0 || f.len > c->rlen - pos - hlen) {
			break;
		}
		const uint8_t *payload = c->rbuf + pos + hlen;
		if (f.type == WIRE_CONTROL) { /* the decoder bounds it by CTL_MSG_MAX */
			rc = on_control(c, payload, (size_t)f.len);
		} else if (!c->got_hello) {
			rc = tern__error(TERN_EPROTO, "data before the handshake");
		} else {
			rc = on_data(c, &f, hlen, payload);
		}
		if (rc < 0) {
			return rc;
		}
		pos += hlen + (size_t)f.len;
	}
	memmove(c->rbuf, c->rbuf + pos, c->rlen - pos);
	c->rlen -= pos;
	return 0;
}

static int
parse(struct conn *c)
{
	int rc = parse_frames(c);

	release_credited(c);
	return rc;
}

/* A read that fills the buffer (a big frame, or a busy connection) doubles
 * it, up to rmax: idle and misbehaving connections stay small. */
static bool
grow_rbuf(struct conn *c)
{
	size_t cap = c->rcap * 2 < c->rmax ? c->rcap * 2 : c->rmax;
	uint8_t *p = realloc(c->rbuf, cap);

	if (p == NULL) {
		return false;
	}
	c->rbuf = p;
	c->rcap = cap;
	return true;
}

/* The peer broke the protocol: tell it why, then close. */
static void
refuse(struct conn *c)
{
	/* a dialer reports a connection that never got going, once a cause */
	if (!c->outbound || c->got_hello) {
		log_line(c->env->log, TERN_LOG_WARN, "closing %s: %s", c->endpoint,
		         tern_last_error());
	}
	if (!c->got_preamble || tern_last_error()[0]) {
		struct ctl_msg m = {.type = CTL_GOODBYE};
		m.u.reason.p = tern_last_error();
		m.u.reason.len = strlen(m.u.reason.p);
		conn_send_ctl(c, &m);
		conn_flush(c);
	}
	conn_fail(c, tern_last_error());
}

/* Read into rbuf: > 0 bytes, 0 closed, -1 with errno (why filled in when
 * it is not EAGAIN or EINTR). *more: TLS holds decrypted bytes that the
 * socket will not announce. */
static ssize_t
read_some(struct conn *c, bool *more, char *why, size_t whylen)
{
	ssize_t n;

	*more = false;
	if (c->tls == NULL) {
		n = read(c->fd, c->rbuf + c->rlen, c->rcap - c->rlen);
		if (n < 0) {
			int e = errno;
			snprintf(why, whylen, "%s", strerror(e));
			errno = e;
		}
		return n;
	}
	pthread_mutex_lock(&c->wlock);
	n = tls_read(c->tls, c->rbuf + c->rlen, c->rcap - c->rlen, more, why, whylen);
	pthread_mutex_unlock(&c->wlock);
	if (n == -2) {
		errno = EPROTO;
		return -1;
	}
	return n;
}

static void
on_readable(struct conn *c)
{
	bool more = false;
	char why[200];

	/* more: TLS holds bytes it read ahead (at most its buffer: bounded) */
	for (int i = 0; (i < 8 || more) && conn_state(c) != CONN_DEAD; i++) {
		ssize_t n = read_some(c, &more, why, sizeof(why));
		if (n == 0) {
			conn_fail(c, "the peer closed the connection");
			return;
		}
		if (n < 0) {
			if (errno == EINTR) {
				continue;
			}
			if (errno != EAGAIN) {
				conn_fail(c, why);
			}
			return;
		}
		c->rlen += (size_t)n;
		c->last_rx_ms = clock_ms();
		if ((size_t)n > c->rpeak) {
			c->rpeak = (size_t)n;
		}
		bool filled = c->rlen == c->rcap;
		int prc = parse(c);
		flush_acks(c);
		if (prc != 0) {
			refuse(c);
			return;
		}
		if (filled && c->rcap < c->rmax && !grow_rbuf(c)) {
			conn_fail(c, "out of memory");
			return;
		}
		/* a TLS read gives one record at a time: go on until the socket
		 * is empty (the next read says EAGAIN) rather than wait a round */
		if ((size_t)n < c->rcap / 2 && !more && c->tls == NULL) {
			return;
		}
	}
}

void
conn_on_event(struct conn *c, uint32_t events)
{
	int state = conn_state(c);

	if (state == CONN_DEAD) {
		return;
	}
	if (state == CONN_CONNECTING) {
		int err = 0;
		socklen_t len = sizeof(err);
		getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len);
		if (err != 0 || (events & (EPOLLERR | EPOLLHUP))) {
			conn_fail(c, err ? strerror(err) : "connection failed");
			return;
		}
		if (!(events & EPOLLOUT)) {
			return;
		}
		atomic_store(&c->state, CONN_HANDSHAKE);
		conn_epoll(c, EPOLL_CTL_MOD);
		begin(c);
		return;
	}
	if (c->tls != NULL && !c->tls_done) {
		tls_step(c);
		return;
	}
	if (events & (EPOLLIN | EPOLLHUP | EPOLLERR | EPOLLRDHUP)) {
		on_readable(c);
	}
	if ((events & EPOLLOUT) && conn_state(c) != CONN_DEAD) {
		conn_flush(c);
	}
	conn_reap_failed_write(c);
}

void
conn_reap_failed_write(struct conn *c)
{
	char why[sizeof(c->write_error)];

	if (!atomic_load(&c->dead) || conn_state(c) == CONN_DEAD) {
		return;
	}
	/* a publishing thread's write may have failed: its words are under wlock */
	pthread_mutex_lock(&c->wlock);
	snprintf(why, sizeof(why), "%s", c->write_error[0] ? c->write_error : "write failed");
	pthread_mutex_unlock(&c->wlock);
	if (c->tls != NULL && !c->got_hello) {
		/* a TLS 1.3 server checks our certificate after our side of the
		 * handshake is over: its alert, waiting to be read, says why it
		 * hung up, where the write only saw the broken pipe */
		bool more;
		char alert[sizeof(c->write_error)];
		if (read_some(c, &more, alert, sizeof(alert)) < 0 && errno == EPROTO) {
			snprintf(why, sizeof(why), "%s", alert);
		}
	}
	conn_fail(c, why);
}

/* conn->out and the BLOCKED list, which publishing threads fill under wlock
 * (shrink_buffers says when). True if conn->out went back. */
static bool
shrink_out_idle(struct conn *c, uint64_t now)
{
	bool gave = false;
	uint8_t *p;

	pthread_mutex_lock(&c->wlock);
	if (c->out_peak >= c->out_cap / 4 || c->nblocked > 0) {
		c->obig_ms = now;
	} else if (clock_since(now, c->obig_ms) >= SHRINK_AFTER_MS) {
		if (c->out_cap > OUT_INITIAL && c->out_len <= OUT_INITIAL &&
		    (p = realloc(c->out, OUT_INITIAL)) != NULL) {
			c->out = p;
			c->out_cap = OUT_INITIAL;
			gave = true;
		}
		if (c->blocked_cap > LIST_KEEP) {
			free(c->blockedv);
			c->blockedv = NULL;
			c->blocked_cap = 0;
		}
	}
	c->out_peak = c->out_len;
	pthread_mutex_unlock(&c->wlock);
	return gave;
}

/*
 * Send rings grown by a backlog give their buffers back once they have
 * been empty and unwritten for SHRINK_AFTER_MS, so that what an idle
 * connection holds does not depend on its past. The producer must be kept
 * out: a publisher's lock comes before wlock and is only tried (a busy
 * publisher is not idle for long; its ring is looked at again next time).
 * True if a ring gave its buffer back.
 */
static bool
shrink_rings(struct conn *c, uint64_t now)
{
	struct outchan *idle[SHRINK_RINGS_MAX];
	bool gave = false;
	int n = 0;

	pthread_mutex_lock(&c->wlock);
	for (uint32_t i = 0; i < c->ngrown && n < SHRINK_RINGS_MAX;) {
		struct outchan *oc = c->grown[i];
		if (oc->ring.cap < OUTCHAN_SHRINK_MIN) {
			grown_remove(c, i); /* its ring went elsewhere (kept for a resume) */
			continue;
		}
		if (outchan_idle_for(oc, now, SHRINK_AFTER_MS) && oc->ops->hold != NULL) {
			idle[n++] = oc;
		}
		i++;
	}
	if (c->ngrown == 0 && c->grown_cap > LIST_KEEP) {
		free(c->grown);
		c->grown = NULL;
		c->grown_cap = 0;
	}
	pthread_mutex_unlock(&c->wlock);
	/* the channels stay open meanwhile: only this thread closes them */
	for (int i = 0; i < n; i++) {
		struct outchan *oc = idle[i];
		if (!oc->ops->hold(oc->arg)) {
			continue;
		}
		pthread_mutex_lock(&c->wlock);
		if (outchan_shrink_idle(oc, now, SHRINK_AFTER_MS)) {
			grown_unlink(c, oc);
			gave = true;
		}
		pthread_mutex_unlock(&c->wlock);
		oc->ops->unhold(oc->arg);
	}
	return gave;
}

/* Emptied backlogs keep their buffers while the connection's channels keep
 * stalling (a subscriber that falls behind again and again would otherwise
 * allocate at each stall), and give them all back at the first look, looks
 * SHRINK_AFTER_MS apart, that finds none stalled since the last: an idle
 * channel holds none. True if one went back. */
static bool
shrink_backlogs(struct conn *c, uint64_t now)
{
	bool gave = false;

	if (clock_since(now, c->spare_look_ms) < SHRINK_AFTER_MS) {
		return false;
	}
	c->spare_look_ms = now;
	if (c->stalled_since_look || c->nstalled > 0) {
		c->stalled_since_look = false;
		return false;
	}
	for (uint32_t i = 0; i < c->nspare; i++) {
		gave |= inchan_backlog_release(c->spare[i]);
		c->spare[i]->on_spare = false;
	}
	c->nspare = 0;
	if (c->spare_cap > LIST_KEEP) {
		free(c->spare);
		c->spare = NULL;
		c->spare_cap = 0;
	}
	return gave;
}

/*
 * A read buffer, conn->out or a list grown for a burst goes back to its
 * first size once, for SHRINK_AFTER_MS, the reads and writes have fit a
 * quarter of the buffer and the lists a quarter of theirs: an idle
 * connection holds little, and a busy one does not give memory back
 * between two bursts only to take it again (an allocation on the path of
 * every message). True if a buffer went back: the loop may then hand the
 * heap's free memory back to the system.
 */
static bool
shrink_buffers(struct conn *c, uint64_t now)
{
	bool gave = shrink_out_idle(c, now);
	uint8_t *p;

	c->shrink_look_ms = now;
	gave |= shrink_rings(c, now);
	gave |= shrink_backlogs(c, now);
	if (c->rpeak >= c->rcap / 4) {
		c->rbig_ms = now;
	} else if (c->rcap > READ_INITIAL && c->rlen <= READ_INITIAL &&
	           clock_since(now, c->rbig_ms) >= SHRINK_AFTER_MS &&
	           (p = realloc(c->rbuf, READ_INITIAL)) != NULL) {
		c->rbuf = p;
		c->rcap = READ_INITIAL;
		gave = true;
	}
	c->rpeak = 0;
	if (c->dirty_peak > c->dirty_cap / 4 || c->nstalled > c->stalled_cap / 4) {
		c->lbig_ms = now;
	} else if (clock_since(now, c->lbig_ms) >= SHRINK_AFTER_MS) {
		if (c->dirty_cap > LIST_KEEP) {
			free(c->dirty); /* many channels at once (a backlog let go) */
			c->dirty = NULL;
			c->dirty_cap = 0;
		}
		if (c->credited_cap > LIST_KEEP) {
			free(c->credited);
			c->credited = NULL;
			c->credited_cap = 0;
		}
		if (c->nstalled == 0 && c->stalled_cap > LIST_KEEP) {
			free(c->stalled);
			c->stalled = NULL;
			c->stalled_cap = 0;
		}
	}
	c->dirty_peak = 0;
	return gave;
}

/* A peer that takes nothing for slow_consumer_ms is dropped. */
static bool
drop_slow(struct conn *c, uint64_t now)
{
	uint64_t limit = c->env->cfg->slow_consumer_ms;
	const struct outchan *slow = NULL;
	char why[200];

	/* A look walks every channel holding data, which may be a hundred
	 * thousand: a few looks per slow_consumer_ms, not one per tick, find a
	 * stalled peer soon enough. */
	if (clock_since(now, c->slow_check_ms) < limit / 8) {
		return false;
	}
	c->slow_check_ms = now;
	/* only a channel with data unsent or unacknowledged can be stalled */
	pthread_mutex_lock(&c->wlock);
	take_ready(c);
	for (struct outchan *oc = c->act_head; oc != NULL && slow == NULL; oc = oc->act_next) {
		slow = outchan_stalled_for(oc, now, limit) ? oc : NULL;
	}
	for (struct outchan *oc = c->kept_head; oc != NULL && slow == NULL; oc = oc->kept_next) {
		slow = outchan_stalled_for(oc, now, limit) ? oc : NULL;
	}
	if (slow != NULL) {
		snprintf(why, sizeof(why),
		         "slow consumer: '%s' took nothing for %llu ms (slow_consumer_ms)",
		         slow->label, (unsigned long long)limit);
	}
	pthread_mutex_unlock(&c->wlock);
	if (slow != NULL) {
		log_line(c->env->log, TERN_LOG_WARN, "dropping %s (%s): %s", c->peer_id,
		         c->endpoint, why);
		atomic_store(&c->kill, 1);
		conn_fail(c, why);
		return true;
	}
	return false;
}

uint64_t
conn_next_timer(struct conn *c, bool exact)
{
	const tern_config *cfg = c->env->cfg;
	uint64_t keepalive =
	    cfg->keepalive_ms > c->peer_keepalive_ms ? cfg->keepalive_ms : c->peer_keepalive_ms;
	uint64_t ping = c->last_ping_ms + cfg->keepalive_ms;
	uint64_t silent = c->last_rx_ms + 3 * keepalive + 1;

	if (conn_state(c) != CONN_READY || atomic_load(&c->dead) || atomic_load(&c->pending) ||
	    c->nstalled > 0) {
		return 0;
	}
	uint64_t next = ping < silent ? ping : silent;
	/* Data unsent or unacknowledged: a waiting publisher needs the
	 * slow-consumer check, which looks every slow_consumer_ms / 8
	 * (drop_slow). Nothing else about held data is timed here: credit,
	 * writes and acknowledgements come with events, so a busy connection
	 * does not wake its thread a hundred times a second. */
	pthread_mutex_lock(&c->wlock);
	take_ready(c);
	prune_active(c);
	if (exact) {
		prune_kept(c);
	}
	bool held = c->act_head != NULL || c->kept_head != NULL;
	bool grown =
	    c->ngrown > 0 || c->nspare > 0 || c->out_cap > OUT_INITIAL || c->rcap > READ_INITIAL;
	pthread_mutex_unlock(&c->wlock);
	if (held) {
		uint64_t slow = c->slow_check_ms + cfg->slow_consumer_ms / 8;
		next = slow < next ? slow : next;
	}
	if (grown) {
		/* a buffer grown for a burst goes back about a second after it,
		 * whatever the keepalive interval (shrink_buffers) */
		uint64_t shrink = c->shrink_look_ms + SHRINK_AFTER_MS;
		next = shrink < next ? shrink : next;
	}
	return next != 0 ? next : 1;
}

bool
conn_timers(struct conn *c, uint64_t now, uint64_t slack)
{
	const tern_config *cfg = c->env->cfg;
	/* the peer pings at its own interval: allow three of the longer one */
	uint64_t keepalive =
	    cfg->keepalive_ms > c->peer_keepalive_ms ? cfg->keepalive_ms : c->peer_keepalive_ms;
	bool gave;

	if (conn_state(c) == CONN_DEAD) {
		return false;
	}
	conn_reap_failed_write(c);
	if (conn_state(c) == CONN_DEAD) {
		return false;
	}
	if (!c->got_hello) {
		if (clock_since(now, c->created_ms) > cfg->handshake_timeout_ms) {
			conn_fail(c, "no handshake before the deadline");
		}
		return false;
	}
	if (clock_since(now, c->last_rx_ms) > 3 * keepalive) {
		conn_fail(c, "the peer went silent (keepalive deadline)");
		return false;
	}
	if (drop_slow(c, now)) {
		return false;
	}
	gave = shrink_buffers(c, now);
	if (clock_since(now, c->last_ping_ms) + slack >= cfg->keepalive_ms) {
		struct ctl_msg m = {.type = CTL_PING};
		/* The peer's PINGs keep us alive to it (we answer each) and it
		 * to us: ours would only refresh the round trip, which an eighth
		 * of them does. Both sides may skip: the one whose PINGs came
		 * first keeps pinging. */
		if (c->peer_ping_ms != 0 && clock_since(now, c->peer_ping_ms) < cfg->keepalive_ms &&
		    c->pings_skipped < PINGS_SKIP_MAX) {
			c->pings_skipped++;
			c->last_ping_ms = now;
			return gave;
		}
		c->pings_skipped = 0;
		m.u.token = clock_us(); /* microseconds: the PONG gives the round trip */
		c->last_ping_ms = now;
		conn_send_ctl(c, &m);
	}
	return gave;
}
