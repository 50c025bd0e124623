/*
 * conn.c - one connection: handshake, reading and dispatching frames, and
 * the write path shared by the I/O thread and low-latency publishers.
 *
 * Write path: conn->out holds control frames and the unwritten tail of a
 * batch; each outchan ring holds whole data frames. A flush gathers
 * conn->out plus whole frames from the rings, round-robin across channels,
 * into one sendmsg of at most batch_max bytes. What the socket did not take
 * is copied to conn->out, so a ring only ever gives up whole frames and the
 * next flush continues exactly where the socket stopped.
 *
 * Read path: frames are parsed in place in rbuf; a frame that cannot be
 * delivered yet (a full subscriber or onward channel) is copied to its
 * channel's backlog, which flow control bounds by the channel's window.
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

#include "error.h"
#include "node.h"

#define OUT_INITIAL  4096
#define READ_INITIAL 16384 /* grows to rmax for connections that carry traffic */
#define IOV_BATCH    256
/*
 * On a long round trip, a blocked channel whose receiver keeps up jumps at
 * once to the window that carries FLOOR_RATE bytes a microsecond (25 MB/s),
 * up to WINDOW_FLOOR, instead of doubling its way there one round trip at
 * a time (four round trips, 0.4 s on a 100 ms link); from there it doubles
 * while the link takes more. On a short round trip the floor is tiny: a
 * receiver that cannot keep up (a hundred senders into one) would only
 * gather bigger windows' worth in its sockets.
 */
#define WINDOW_FLOOR (2u << 20)
#define FLOOR_RATE   25
#define BACKLOG_HDR  26 /* type|flags, header length, seq (8), total (8), len (8) */

static void
conn_epoll(struct conn *c, int op)
{
	struct epoll_event ev = {.events = EPOLLIN | EPOLLRDHUP};

	if (c->epollout || c->state == CONN_CONNECTING) {
		ev.events |= EPOLLOUT;
	}
	ev.data.ptr = &c->ev;
	epoll_ctl(c->node->epfd, op, c->fd, &ev);
}

void
conn_set_epollout(struct conn *c, bool on)
{
	atomic_store_explicit(&c->choked, on, memory_order_relaxed);
	if (c->epollout != on && c->state != CONN_DEAD) {
		c->epollout = on;
		conn_epoll(c, EPOLL_CTL_MOD);
	}
}

struct conn *
conn_new(struct tern_node *node, int fd, bool outbound, bool connecting, const char *endpoint)
{
	struct conn *c = calloc(1, sizeof(*c));
	size_t rcap = 256u << 10;

	if (c == NULL) {
		return NULL;
	}
	if (rcap < 2ull * (node->cfg.chunk_bytes + WIRE_HDR_MAX)) {
		rcap = 2ull * (node->cfg.chunk_bytes + WIRE_HDR_MAX);
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
	c->ev.kind = EV_CONN;
	c->node = node;
	c->fd = fd;
	c->rcap = rcap;
	c->out_cap = OUT_INITIAL;
	c->outbound = outbound;
	c->state = connecting ? CONN_CONNECTING : CONN_HANDSHAKE;
	c->next_chan = 1;
	c->low_latency = node->cfg.low_latency;
	c->batch_max = node->cfg.batch_max_bytes;
	c->created_ms = c->last_rx_ms = c->last_ping_ms = node_now_ms();
	c->reasm_budget = node->cfg.queue_max_bytes;
	snprintf(c->endpoint, sizeof(c->endpoint), "%s", endpoint);
	pthread_mutex_init(&c->wlock, NULL);
	c->next = node->conns;
	node->conns = c;
	return c;
}

static void
send_hello(struct conn *c)
{
	struct tern_node *node = c->node;
	struct ctl_msg m = {.type = CTL_HELLO};
	uint8_t pre[WIRE_PREAMBLE_LEN];
	int one = 1;

	/* tern batches by itself; Nagle's delay would only add latency */
	setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	m.u.hello.id.p = node->id;
	m.u.hello.id.len = strlen(node->id);
	m.u.hello.mode = (uint64_t)node->cfg.mode;
	m.u.hello.low_latency = node->cfg.low_latency;
	m.u.hello.batch_max = node->cfg.batch_max_bytes;
	m.u.hello.chunk = node->cfg.chunk_bytes;
	m.u.hello.max_message = node->cfg.max_message_bytes;
	m.u.hello.window = node->window_init;
	m.u.hello.keepalive_ms = node->cfg.keepalive_ms;
	wire_preamble_encode(pre);
	pthread_mutex_lock(&c->wlock);
	memcpy(c->out, pre, sizeof(pre));
	c->out_len = sizeof(pre);
	conn_send_ctl_locked(c, &m);
	conn_flush_locked(c);
	pthread_mutex_unlock(&c->wlock);
}

void
conn_start(struct conn *c)
{
	conn_epoll(c, EPOLL_CTL_ADD);
	if (c->state == CONN_HANDSHAKE) {
		send_hello(c);
	}
}

void
conn_fail(struct conn *c, const char *why)
{
	if (c->state == CONN_DEAD) {
		return;
	}
	atomic_store(&c->dead, 1);
	c->state = CONN_DEAD;
	snprintf(c->reason, sizeof(c->reason), "%s", why);
	epoll_ctl(c->node->epfd, EPOLL_CTL_DEL, c->fd, NULL);
	shutdown(c->fd, SHUT_RDWR);
	/* publishers blocked on this connection give up on it */
	for (int i = 0; i < c->nout; i++) {
		if (c->outv[i]->src->pub != NULL) {
			pub_wake(c->outv[i]->src->pub);
		}
	}
}

void
conn_free(struct conn *c)
{
	for (int i = 0; i < c->nout; i++) {
		route_outchan_free(c->outv[i]);
	}
	free(c->outv);
	for (uint32_t i = 0; i < c->ins_cap; i++) {
		struct inchan *in = c->ins[i];
		if (in == NULL) {
			continue;
		}
		reasm_free(&in->reasm, &c->reasm_budget);
		free(in->done_buf);
		free(in->backlog);
		free(in);
	}
	free(c->ins);
	free(c->dirty);
	close(c->fd);
	pthread_mutex_destroy(&c->wlock);
	free(c->rbuf);
	free(c->out);
	free(c);
}

/* ---- writing ---- */

static bool
out_reserve(struct conn *c, size_t more)
{
	size_t cap = c->out_cap;

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

void
conn_send_ctl_locked(struct conn *c, const struct ctl_msg *m)
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
	atomic_store(&c->pending, 1);
}

void
conn_send_ctl(struct conn *c, const struct ctl_msg *m)
{
	pthread_mutex_lock(&c->wlock);
	conn_send_ctl_locked(c, m);
	pthread_mutex_unlock(&c->wlock);
}

/*
 * Bytes of whole frames in ring starting at base (a frame boundary): at
 * most limit (but at least one frame if it fits in room), and never more
 * than the channel's credit, which counts frames as they are on the wire.
 */
static size_t
frames_prefix(struct ring *r, size_t base, size_t used, size_t limit, size_t room, int64_t credit)
{
	size_t off = 0;

	if (credit <= 0) {
		return 0;
	}
	if (used <= limit && used <= (uint64_t)credit) {
		return used;
	}
	while (off < used) {
		uint8_t hdr[WIRE_HDR_MAX];
		struct wire_frame f;
		size_t hlen, n = used - off < sizeof(hdr) ? used - off : sizeof(hdr);

		const uint8_t *h = ring_view(r, base + off, n, hdr);
		if (wire_header_decode_fast(h, n, UINT64_MAX, &f, &hlen) != 1) {
			break;
		}
		size_t flen = hlen + (size_t)f.len;
		if (off + flen > (uint64_t)credit) {
			break;
		}
		if (off + flen > limit && !(off == 0 && flen <= room)) {
			break;
		}
		off += flen;
		if (off >= limit) {
			break;
		}
	}
	return off;
}

struct batch {
	struct iovec iov[IOV_BATCH];
	struct outchan *chan[IOV_BATCH]; /* NULL: conn->out */
	int n;
	size_t total;
	size_t taken[64];
	struct outchan *took[64];
	int ntook;
};

/* Data of this channel waits on the peer, for credit or for a socket the
 * peer does not read: from now on, unless it reports progress. */
static void
mark_starved(struct outchan *oc)
{
	if (atomic_load(&oc->starved_since_ms) == 0) {
		atomic_store(&oc->starved_since_ms, node_now_ms());
	}
}

/* The socket is full: every channel with data waiting waits on the peer. */
static void
mark_choked(struct conn *c)
{
	for (int i = 0; i < c->nout; i++) {
		if (outchan_unsent(c->outv[i]) > 0) {
			mark_starved(c->outv[i]);
		}
	}
}

static void
gather_chan(struct batch *b, struct outchan *oc, size_t limit, size_t room)
{
	size_t used = ring_used(&oc->ring);
	size_t already = atomic_load_explicit(&oc->sent, memory_order_relaxed);
	int k;

	for (k = 0; k < b->ntook; k++) {
		if (b->took[k] == oc) {
			already += b->taken[k];
			break;
		}
	}
	if (used <= already || b->n > IOV_BATCH - 2 || (k == b->ntook && b->ntook == 64)) {
		return;
	}
	size_t take = frames_prefix(&oc->ring, already, used - already, limit, room,
	                            atomic_load_explicit(&oc->credit, memory_order_acquire));
	if (take == 0) {
		oc->want_blocked = true; /* waiting for credit, not for room */
		mark_starved(oc);
		return;
	}
	atomic_fetch_sub(&oc->credit, (int64_t)take);
	int nv = ring_iov(&oc->ring, already, take, &b->iov[b->n]);
	for (int i = 0; i < nv; i++) {
		b->chan[b->n + i] = oc;
	}
	b->n += nv;
	b->total += take;
	if (k == b->ntook) {
		b->took[b->ntook] = oc;
		b->taken[b->ntook++] = 0;
	}
	b->taken[k] += take;
}

/* Fill a batch: conn->out first, then a fair share of each channel. */
static void
gather(struct conn *c, struct batch *b)
{
	size_t budget = c->batch_max;
	int active = 0;

	b->n = b->ntook = 0;
	b->total = 0;
	if (c->out_len > 0) {
		/* no write above the peer's batch_max, control frames included */
		b->iov[0].iov_base = c->out;
		b->iov[0].iov_len = c->out_len < budget ? c->out_len : budget;
		b->chan[0] = NULL;
		b->n = 1;
		b->total = b->iov[0].iov_len;
	}
	if (c->state != CONN_READY || b->total >= budget) {
		return;
	}
	for (int i = 0; i < c->nout; i++) {
		active += outchan_unsent(c->outv[i]) > 0;
	}
	for (int pass = 0; pass < 2 && active > 0 && b->total < budget; pass++) {
		size_t share = (budget - b->total) / (size_t)active;
		for (int i = 0; i < c->nout && b->total < budget; i++) {
			struct outchan *oc = c->outv[(c->rr + i) % c->nout];
			gather_chan(b, oc, pass == 0 ? share : budget - b->total,
			            budget - b->total);
		}
	}
	c->rr = c->nout > 0 ? (c->rr + 1) % c->nout : 0;
}

/*
 * The socket took `written` of the taken bytes of a channel's range (which
 * starts at the channel's first unsent byte). A frame cut in two must be
 * finished before anything else is written, so its remainder moves to
 * conn->out; whole frames the socket did not take stay in the ring, and
 * their credit is given back. Returns the bytes the ring is done with.
 */
static size_t
settle_chan(struct conn *c, struct outchan *oc, size_t taken, size_t written)
{
	size_t base = oc->retain ? atomic_load(&oc->sent) : 0;
	size_t end = 0;

	if (written == taken) {
		return taken;
	}
	while (written > 0 && end < written) { /* the end of the frame holding the cut */
		uint8_t hdr[WIRE_HDR_MAX];
		struct wire_frame f;
		size_t hlen, n = taken - end < sizeof(hdr) ? taken - end : sizeof(hdr);

		const uint8_t *h = ring_view(&oc->ring, base + end, n, hdr);
		if (wire_header_decode_fast(h, n, UINT64_MAX, &f, &hlen) != 1) {
			end = taken; /* cannot happen: rings hold frames this node encoded */
			break;
		}
		end += hlen + (size_t)f.len;
	}
	if (end > written) {
		if (!out_reserve(c, end - written)) {
			atomic_store(&c->dead, 1);
			snprintf(c->reason, sizeof(c->reason), "out of memory");
			return end;
		}
		ring_peek(&oc->ring, base + written, c->out + c->out_len, end - written);
		c->out_len += end - written;
	}
	atomic_fetch_add(&oc->credit, (int64_t)(taken - end));
	return end;
}

/* The socket took `written` bytes of the batch: release them. */
static void
settle(struct conn *c, struct batch *b, size_t written)
{
	size_t written_ch[64] = {0};

	/* conn->out is the batch's first segment, if any; the rest are rings */
	if (b->n > 0 && b->chan[0] == NULL) {
		size_t out_done = written < b->iov[0].iov_len ? written : b->iov[0].iov_len;
		memmove(c->out, c->out + out_done, c->out_len - out_done);
		c->out_len -= out_done;
		written -= out_done;
	}
	for (int i = 0; i < b->n && written > 0; i++) {
		size_t w = written < b->iov[i].iov_len ? written : b->iov[i].iov_len;
		if (b->chan[i] == NULL) {
			continue;
		}
		for (int k = 0; k < b->ntook; k++) {
			if (b->took[k] == b->chan[i]) {
				written_ch[k] += w;
			}
		}
		written -= w;
	}
	uint64_t now_ms = b->ntook > 0 ? node_now_ms() : 0;
	for (int k = 0; k < b->ntook; k++) {
		struct outchan *oc = b->took[k];
		size_t done = settle_chan(c, oc, b->taken[k], written_ch[k]);
		if (written_ch[k] > 0) {
			atomic_store_explicit(&oc->last_write_ms, now_ms, memory_order_relaxed);
		}
		if (oc->retain) { /* kept until the peer reports it consumed */
			atomic_store_explicit(&oc->sent, atomic_load(&oc->sent) + done,
			                      memory_order_relaxed);
		} else {
			ring_consume(&oc->ring, done);
		}
		/* room in a reliable channel's ring comes from the peer's
		 * acknowledgement, not from the write */
		if (!oc->retain && oc->src->pub != NULL && atomic_load(&oc->src->pub->waiters)) {
			pub_wake(oc->src->pub);
		}
	}
}

/* Report channels whose data waits for credit (once per shortage), so the
 * receiver can grow a window that is too small for the link. */
static bool
tell_blocked(struct conn *c)
{
	bool told = false;

	for (int i = 0; i < c->nout; i++) {
		struct outchan *oc = c->outv[i];
		if (!oc->want_blocked) {
			continue;
		}
		oc->want_blocked = false;
		if (!atomic_exchange(&oc->blocked_sent, true)) {
			struct ctl_msg m = {.type = CTL_BLOCKED};
			m.u.credit.channel = oc->id;
			m.u.credit.bytes = 0;
			conn_send_ctl_locked(c, &m);
			told = true;
		}
	}
	return told;
}

bool
conn_flush_locked(struct conn *c)
{
	struct batch b;
	bool wrote = false;

	if (c->state == CONN_DEAD || c->state == CONN_CONNECTING) {
		return false;
	}
	atomic_store(&c->pending, 0);
	for (;;) {
		struct msghdr mh = {0};
		tell_blocked(c); /* before gathering: it appends to conn->out */
		gather(c, &b);
		if (b.total == 0 && tell_blocked(c)) {
			continue;
		}
		if (b.total == 0) {
			conn_set_epollout(c, false);
			return wrote;
		}
		mh.msg_iov = b.iov;
		mh.msg_iovlen = (size_t)b.n;
		ssize_t n = sendmsg(c->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EINTR) {
				continue;
			}
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				settle(c, &b, 0);
				conn_set_epollout(c, true);
				atomic_store(&c->pending, 1);
				mark_choked(c);
				return wrote;
			}
			char why[128];
			snprintf(why, sizeof(why), "write: %s", strerror(errno));
			atomic_store(&c->dead, 1);
			snprintf(c->reason, sizeof(c->reason), "%s", why);
			return wrote;
		}
		wrote = true;
		COUNT(c->batches, 1); /* under wlock */
		COUNT(c->batch_bytes, (uint64_t)n);
		if ((uint64_t)n > atomic_load_explicit(&c->batch_largest, memory_order_relaxed)) {
			atomic_store(&c->batch_largest, (uint64_t)n);
		}
		settle(c, &b, (size_t)n);
		if ((size_t)n < b.total) {
			conn_set_epollout(c, true);
			atomic_store(&c->pending, 1);
			mark_choked(c);
			return wrote;
		}
	}
}

bool
conn_flush(struct conn *c)
{
	pthread_mutex_lock(&c->wlock);
	bool wrote = conn_flush_locked(c);
	pthread_mutex_unlock(&c->wlock);
	if (atomic_load(&c->dead) && c->state != CONN_DEAD) {
		conn_fail(c, c->reason[0] ? c->reason : "write failed");
	}
	return wrote;
}

/* ---- reading ---- */

static struct inchan *
inchan_get(struct conn *c, uint64_t id)
{
	return id < c->ins_cap ? c->ins[id] : NULL;
}

static int
inchan_open(struct conn *c, const struct ctl_msg *m, struct src *s)
{
	uint64_t id = m->u.open.channel;
	struct inchan *in;

	if (id == 0 || id > (1u << 20)) {
		return tern__error(TERN_EPROTO, "channel id %llu out of range",
		                   (unsigned long long)id);
	}
	if (id >= c->ins_cap) {
		uint32_t cap = c->ins_cap ? c->ins_cap : 16;
		while (cap <= id) {
			cap *= 2;
		}
		struct inchan **p = realloc(c->ins, cap * sizeof(*p));
		if (p == NULL) {
			return TERN_ENOMEM;
		}
		memset(p + c->ins_cap, 0, (cap - c->ins_cap) * sizeof(*p));
		c->ins = p;
		c->ins_cap = cap;
	}
	if (c->ins[id] != NULL) {
		return tern__error(TERN_EPROTO, "channel %llu opened twice",
		                   (unsigned long long)id);
	}
	in = calloc(1, sizeof(*in));
	if (in == NULL) {
		return TERN_ENOMEM;
	}
	in->conn = c;
	in->id = (uint32_t)id;
	in->src = s;
	in->next_seq = 1;
	credit_rx_init(&in->credit, c->node->window_init, c->node->window_max);
	in->rate_t0_us = node_now_ns() / 1000;
	s->refs++;
	c->ins[id] = in;
	return 0;
}

/* Called by route.c for CTL_OPEN once the source is known. */
int conn_inchan_open(struct conn *c, const struct ctl_msg *m, struct src *s);
int
conn_inchan_open(struct conn *c, const struct ctl_msg *m, struct src *s)
{
	return inchan_open(c, m, s);
}

/*
 * Consumption is acknowledged once per read (not per frame): one CREDIT per
 * touched channel carries the bytes granted, if any, and the total consumed,
 * which lets the sender release what it kept for a resend.
 */
static void
grant(struct conn *c, struct inchan *in, uint64_t bytes)
{
	in->grant_pending += bytes;
	if (in->dirty) {
		return;
	}
	if (c->ndirty == c->dirty_cap) {
		uint32_t cap = c->dirty_cap ? c->dirty_cap * 2 : 16;
		struct inchan **d = realloc(c->dirty, cap * sizeof(*d));
		if (d == NULL) {
			return; /* acknowledged with the next frame instead */
		}
		c->dirty = d;
		c->dirty_cap = cap;
	}
	in->dirty = true;
	c->dirty[c->ndirty++] = in;
}

static void
flush_acks(struct conn *c)
{
	for (uint32_t i = 0; i < c->ndirty; i++) {
		struct inchan *in = c->dirty[i];
		struct ctl_msg m = {.type = CTL_CREDIT};

		in->dirty = false;
		if (c->state != CONN_READY ||
		    (in->grant_pending == 0 && in->credit.consumed == in->acked)) {
			continue;
		}
		m.u.credit.channel = in->id;
		m.u.credit.bytes = in->grant_pending;
		m.u.credit.consumed = in->credit.consumed;
		in->grant_pending = 0;
		in->acked = in->credit.consumed;
		conn_send_ctl(c, &m);
	}
	c->ndirty = 0;
}

static void
stall(struct tern_node *node, struct inchan *in)
{
	if (!in->stalled) {
		in->stalled = true;
		in->stall_next = node->stalled;
		node->stalled = in;
	}
}

static bool
backlog_add(struct inchan *in, int tf, size_t hlen, uint64_t seq, uint64_t total, const uint8_t *p,
            uint64_t len)
{
	size_t need = in->blen + BACKLOG_HDR + len;

	if (in->boff > 0 && need > in->bcap) {
		/* delivered frames at the front make room: a backlog that never
		 * empties (a subscriber always a little behind) must not grow */
		memmove(in->backlog, in->backlog + in->boff, in->blen - in->boff);
		in->blen -= in->boff;
		in->boff = 0;
		need = in->blen + BACKLOG_HDR + len;
	}
	if (need > in->bcap) {
		size_t cap = in->bcap ? in->bcap : 65536;
		while (cap < need) {
			cap *= 2;
		}
		uint8_t *b = realloc(in->backlog, cap);
		if (b == NULL) {
			return false;
		}
		in->backlog = b;
		in->bcap = cap;
	}
	uint8_t *w = in->backlog + in->blen;
	w[0] = (uint8_t)tf;
	w[1] = (uint8_t)hlen;
	memcpy(w + 2, &seq, 8);
	memcpy(w + 10, &total, 8);
	memcpy(w + 18, &len, 8);
	memcpy(w + BACKLOG_HDR, p, len);
	in->blen += BACKLOG_HDR + len;
	return true;
}

/*
 * Take one data or chunk frame as far as it can go. Stages for a chunk:
 * 0 nothing done, 1 forwarded onward, 2 reassembled and waiting for local
 * delivery. Returns 1 done, 0 must wait (stage kept), <0 fatal.
 */
static int
process(struct conn *c, struct inchan *in, int tf, size_t hlen, uint64_t seq, uint64_t total,
        const uint8_t *p, uint64_t len)
{
	struct tern_node *node = c->node;
	struct wire_frame f = {.type = tf & WIRE_TYPE_MASK, .flags = tf & ~WIRE_TYPE_MASK};
	int rc;

	if (f.type == WIRE_DATA) {
		if (!route_deliver(node, in, seq, p, len, NULL, true)) {
			return 0;
		}
		grant(c, in, credit_rx_consume(&in->credit, len + hlen));
		return 1;
	}
	f.len = len;
	f.total = total;
	f.seq = seq;
	if (in->stage == 0 && (f.flags & WIRE_FLAG_FIRST)) {
		if (f.total > node->cfg.max_message_bytes) {
			return tern__error(
			    TERN_EMSGSIZE,
			    "peer announced a %llu-byte message; max_message_bytes is %llu",
			    (unsigned long long)f.total,
			    (unsigned long long)node->cfg.max_message_bytes);
		}
		in->skip_chunks = route_is_duplicate(in, seq);
	}
	if (in->skip_chunks) {
		if (f.flags & WIRE_FLAG_LAST) {
			in->skip_chunks = false;
		}
		grant(c, in, credit_rx_consume(&in->credit, len + hlen));
		return 1;
	}
	if (in->stage == 0) {
		if (!route_forward_chunk(node, in, &f, seq, p)) {
			return 0;
		}
		if (f.flags & WIRE_FLAG_FIRST) {
			route_note_seq(node, in, seq);
		}
		in->stage = 1;
	}
	if (in->stage == 1) {
		if (in->src->nsubs > 0 || in->reasm.active) {
			rc = reasm_add(&in->reasm, &f, seq, p, node->cfg.max_message_bytes,
			               &c->reasm_budget);
			if (rc < 0) {
				return rc;
			}
			if (rc == 1) {
				in->done_len = in->reasm.total;
				in->done_seq = in->reasm.seq;
				in->done_buf = reasm_take(&in->reasm, &c->reasm_budget);
				in->stage = 2;
			}
		}
		if (in->stage == 1) {
			in->stage = 0;
			grant(c, in, credit_rx_consume(&in->credit, len + hlen));
			return 1;
		}
	}
	/* stage 2: the whole message goes to local subscribers */
	uint8_t *heap = in->done_buf;
	if (!route_deliver(node, in, in->done_seq, in->done_buf, in->done_len, &heap, false)) {
		return 0;
	}
	if (heap != NULL) { /* no pull subscriber kept it */
		reasm_recycle(&in->reasm, heap, in->done_len);
	}
	in->done_buf = NULL;
	in->stage = 0;
	grant(c, in, credit_rx_consume(&in->credit, len + hlen));
	return 1;
}

/* Retry the backlog of a stalled channel; true once it is empty. */
bool
conn_retry_stalled(struct inchan *in)
{
	struct conn *c = in->conn;

	/* a dead connection's backlog is still delivered: it was received */
	while (in->boff < in->blen) {
		const uint8_t *r = in->backlog + in->boff;
		uint64_t seq, total, len;
		memcpy(&seq, r + 2, 8);
		memcpy(&total, r + 10, 8);
		memcpy(&len, r + 18, 8);
		int rc = process(c, in, r[0], r[1], seq, total, r + BACKLOG_HDR, len);
		if (rc < 0) {
			conn_fail(c, tern_last_error());
			return true;
		}
		if (rc == 0) {
			flush_acks(c);
			return false;
		}
		in->boff += BACKLOG_HDR + len;
	}
	in->boff = in->blen = 0;
	in->stalled = false;
	flush_acks(c);
	return true;
}

static int
on_data(struct conn *c, const struct wire_frame *f, size_t hlen, const uint8_t *payload)
{
	struct inchan *in = inchan_get(c, f->channel);
	uint64_t seq;
	int rc;

	if (in == NULL) {
		return tern__error(TERN_EPROTO, "data on channel %llu, which was never opened",
		                   (unsigned long long)f->channel);
	}
	/* credit counts whole frames, header included, as the sender queues them */
	if (!credit_rx_receive(&in->credit, hlen + f->len)) {
		return tern__error(TERN_EPROTO,
		                   "peer overran the flow-control window of channel %u", in->id);
	}
	COUNT(c->bytes_in, f->len);
	if (f->type == WIRE_DATA || (f->flags & WIRE_FLAG_FIRST)) {
		seq = (f->flags & WIRE_FLAG_SEQ) ? f->seq : in->next_seq;
		in->next_seq = seq + 1;
		COUNT(c->messages_in, 1);
	} else {
		seq = in->next_seq - 1;
	}
	if (in->stalled) {
		return backlog_add(in, f->type | f->flags, hlen, seq, f->total, payload, f->len)
		           ? 0
		           : TERN_ENOMEM;
	}
	rc = process(c, in, f->type | f->flags, hlen, seq, f->total, payload, f->len);
	if (rc == 0) {
		if (!backlog_add(in, f->type | f->flags, hlen, seq, f->total, payload, f->len)) {
			return TERN_ENOMEM;
		}
		stall(c->node, in);
		return 0;
	}
	return rc < 0 ? rc : 0;
}

static void
on_hello(struct conn *c, const struct ctl_msg *m)
{
	struct tern_node *node = c->node;
	uint64_t frame_max;

	snprintf(c->peer_id, sizeof(c->peer_id), "%.*s", (int)m->u.hello.id.len, m->u.hello.id.p);
	/* either side asking for low latency makes the connection low-latency */
	c->low_latency = node->cfg.low_latency || m->u.hello.low_latency;
	/* no write larger than either side's batch_max (ctl_decode bounds it) */
	c->batch_max = node->cfg.batch_max_bytes < m->u.hello.batch_max
	                   ? node->cfg.batch_max_bytes
	                   : (uint32_t)m->u.hello.batch_max;
	c->peer_keepalive_ms = (uint32_t)m->u.hello.keepalive_ms;
	frame_max =
	    node->cfg.chunk_bytes < m->u.hello.chunk ? node->cfg.chunk_bytes : m->u.hello.chunk;
	if (frame_max + WIRE_HDR_MAX > c->batch_max) {
		frame_max = c->batch_max - WIRE_HDR_MAX;
	}
	c->frame_max = (uint32_t)frame_max;
	c->peer_max_message = m->u.hello.max_message;
	c->peer_router = m->u.hello.mode == TERN_MODE_ROUTER;
	c->peer_window = m->u.hello.window < 4096 ? 4096 : m->u.hello.window;
	if (c->peer_window < frame_max) {
		c->peer_window = frame_max;
	}
	c->got_hello = true;
	c->state = CONN_READY;
	struct ctl_msg ping = {.type = CTL_PING};
	ping.u.token = node_now_ns() / 1000; /* a first round trip, for flow control */
	conn_send_ctl(c, &ping);
	node_log(node, TERN_LOG_INFO, "connected %s %s (%s), %s mode", c->outbound ? "to" : "from",
	         c->peer_id, c->endpoint, c->low_latency ? "low-latency" : "batched");
	route_peer_ready(node, c);
}

/*
 * The window a channel needs: twice what it moved in one round trip since
 * it last ran out of credit. A window-limited channel moves a window per
 * round trip, so this lets it double; once the link itself is the limit,
 * growth stops at twice the bandwidth-delay product. Until a round trip
 * has been measured, nothing grows.
 */
static uint64_t
link_need(struct conn *c, struct inchan *in)
{
	uint64_t now = node_now_ns() / 1000;
	uint64_t elapsed = now - in->rate_t0_us;
	uint64_t bytes = in->credit.consumed - in->rate_bytes0;
	uint64_t need = 0;

	if (c->rtt_us > 0 && elapsed > 0 && in->rate_t0_us != 0) {
		need = (uint64_t)(2.0 * (double)bytes * (double)c->rtt_us / (double)elapsed);
	}
	in->rate_t0_us = now;
	in->rate_bytes0 = in->credit.consumed;
	return need;
}

static uint64_t
window_floor(const struct conn *c)
{
	uint64_t floor = c->rtt_us * FLOOR_RATE;

	return floor < WINDOW_FLOOR ? floor : WINDOW_FLOOR;
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
		if (m.type != CTL_HELLO) {
			return tern__error(TERN_EPROTO, "the peer did not start with a handshake");
		}
		if (m.u.hello.id.len == strlen(c->node->id) &&
		    memcmp(m.u.hello.id.p, c->node->id, m.u.hello.id.len) == 0) {
			return tern__error(TERN_EPROTO,
			                   "the peer at %s has this node's id '%s'; give each node "
			                   "its own id",
			                   c->endpoint, c->node->id);
		}
		on_hello(c, &m);
		return 0;
	}
	switch (m.type) {
	case CTL_HELLO:
		return tern__error(TERN_EPROTO, "a second handshake");
	case CTL_SYNC:
		c->peer_synced = true;
		node_peer_ready(c->node, c);
		return 0;
	case CTL_PING: {
		struct ctl_msg r = {.type = CTL_PONG};
		r.u.token = m.u.token;
		conn_send_ctl(c, &r);
		return 0;
	}
	case CTL_PONG: {
		uint64_t sample = node_now_ns() / 1000 - m.u.token;
		if (m.u.token <= node_now_ns() / 1000) {
			/* the smallest sample: a PING waits behind the data queued
			 * ahead of it, and a window sized on that delay would only
			 * deepen the queue (a hundred senders sharing a slow link) */
			if (c->rtt_us == 0 || sample < c->rtt_us) {
				c->rtt_us = sample > 0 ? sample : 1;
			}
		}
		return 0;
	}
	case CTL_GOODBYE:
		node_log(c->node, TERN_LOG_INFO, "%s said goodbye: %.*s", c->peer_id,
		         (int)m.u.reason.len, m.u.reason.p);
		c->said_goodbye = true;
		conn_fail(c, "the peer said goodbye");
		return 0;
	case CTL_BLOCKED: {
		struct inchan *in = inchan_get(c, m.u.credit.channel);
		if (in != NULL) {
			grant(c, in,
			      credit_rx_blocked(&in->credit, !in->stalled, link_need(c, in),
			                        window_floor(c)));
			flush_acks(c);
		}
		return 0;
	}
	default:
		return route_on_ctl(c->node, c, &m);
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
parse(struct conn *c)
{
	size_t pos = 0;
	int rc = 0;

	if (!c->got_preamble) {
		if (c->rlen < WIRE_PREAMBLE_LEN) {
			return 0;
		}
		if ((rc = on_preamble(c)) != 0) {
			return rc;
		}
		pos = WIRE_PREAMBLE_LEN;
	}
	while (pos < c->rlen && c->state != CONN_DEAD) {
		struct wire_frame f;
		size_t hlen;
		uint64_t max =
		    c->node->cfg.chunk_bytes > CTL_MSG_MAX ? c->node->cfg.chunk_bytes : CTL_MSG_MAX;

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
		if (f.type == WIRE_CONTROL) {
			/* control messages may take a publisher's lock, which comes
			 * before a subscriber queue's in the lock order */
			sub_release_all(c->node);
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

static void
on_readable(struct conn *c)
{
	for (int i = 0; i < 8 && c->state != CONN_DEAD; i++) {
		ssize_t n = read(c->fd, c->rbuf + c->rlen, c->rcap - c->rlen);
		if (n == 0) {
			conn_fail(c, "the peer closed the connection");
			return;
		}
		if (n < 0) {
			if (errno == EINTR) {
				continue;
			}
			if (errno != EAGAIN) {
				conn_fail(c, strerror(errno));
			}
			return;
		}
		c->rlen += (size_t)n;
		c->last_rx_ms = node_now_ms();
		bool filled = c->rlen == c->rcap;
		int prc = parse(c);
		flush_acks(c);
		if (prc != 0) {
			node_log(c->node, TERN_LOG_WARN, "closing %s: %s", c->endpoint,
			         tern_last_error());
			if (!c->got_preamble || tern_last_error()[0]) {
				struct ctl_msg m = {.type = CTL_GOODBYE};
				m.u.reason.p = tern_last_error();
				m.u.reason.len = strlen(m.u.reason.p);
				conn_send_ctl(c, &m);
				conn_flush(c);
			}
			conn_fail(c, tern_last_error());
			return;
		}
		if (filled && c->rcap < c->rmax && !grow_rbuf(c)) {
			conn_fail(c, "out of memory");
			return;
		}
		if ((size_t)n < c->rcap / 2) {
			return;
		}
	}
}

void
conn_on_event(struct conn *c, uint32_t events)
{
	if (c->state == CONN_DEAD) {
		return;
	}
	if (c->state == CONN_CONNECTING) {
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
		c->state = CONN_HANDSHAKE;
		conn_epoll(c, EPOLL_CTL_MOD);
		send_hello(c);
		return;
	}
	if (events & (EPOLLIN | EPOLLHUP | EPOLLERR | EPOLLRDHUP)) {
		on_readable(c);
	}
	if ((events & EPOLLOUT) && c->state != CONN_DEAD) {
		conn_flush(c);
	}
}

void
conn_timers(struct conn *c, uint64_t now)
{
	struct tern_node *node = c->node;

	if (c->state == CONN_DEAD) {
		return;
	}
	if (!c->got_hello && now - c->created_ms > node->cfg.handshake_timeout_ms) {
		conn_fail(c, "no handshake before the deadline");
		return;
	}
	/* the peer pings every keepalive_ms of its own HELLO: not dead before that allows */
	uint64_t keepalive = node->cfg.keepalive_ms > c->peer_keepalive_ms ? node->cfg.keepalive_ms
	                                                                   : c->peer_keepalive_ms;
	if (c->got_hello && now - c->last_rx_ms > 3 * keepalive) {
		conn_fail(c, "the peer went silent (keepalive deadline)");
		return;
	}
	for (int i = 0; i < c->nout && c->got_hello; i++) {
		struct outchan *oc = c->outv[i];
		uint64_t starved = atomic_load(&oc->starved_since_ms);
		if (oc->retain && starved != 0 && now - starved >= node->cfg.slow_consumer_ms &&
		    outchan_unsent(oc) > 0) {
			char why[200];
			snprintf(why, sizeof(why),
			         "slow consumer: '%s' took nothing for %llu ms (slow_consumer_ms)",
			         oc->src->key, (unsigned long long)(now - starved));
			node_log(node, TERN_LOG_WARN, "dropping %s (%s): %s", c->peer_id,
			         c->endpoint, why);
			snprintf(c->kill_reason, sizeof(c->kill_reason), "%s", why);
			atomic_store(&c->kill, 1);
			conn_fail(c, why);
			return;
		}
	}
	if (c->got_hello && now - c->last_ping_ms >= node->cfg.keepalive_ms) {
		struct ctl_msg m = {.type = CTL_PING};
		m.u.token = node_now_ns() / 1000; /* microseconds: the PONG gives the round trip */
		c->last_ping_ms = now;
		conn_send_ctl(c, &m);
	}
}
