/*
 * route.c - who gets what: subscriptions (interests), sources, and the
 * route of each source to local subscribers and onward connections.
 *
 * A subscription is known by (origin node, sub id). It spreads from its
 * origin to every node; each node remembers which connections declared it,
 * in order, and routes matching messages only toward the first of them.
 * Those first-heard links form a tree toward the subscriber, so a message
 * follows one path to it. Where several paths exist (routers in a
 * triangle), a message can still arrive twice at a node; each source keeps
 * the highest sequence number it delivered and drops anything at or below
 * it, which ends loops and duplicates alike.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "keyexpr.h"
#include "node.h"

int conn_inchan_open(struct conn *c, const struct ctl_msg *m, struct src *s);

#define MAX_HOPS 32

static struct ctl_str
cstr(const char *s)
{
	struct ctl_str r = {s, strlen(s)};
	return r;
}

static void
send_sub(struct conn *c, const struct interest *i, bool declare)
{
	struct ctl_msg m = {.type = declare ? CTL_SUB : CTL_UNSUB};

	m.u.sub.origin = cstr(i->origin);
	m.u.sub.sub_id = i->sub_id;
	m.u.sub.hops = i->hops;
	m.u.sub.keyexpr.p = i->keyexpr;
	m.u.sub.keyexpr.len = i->ke_len;
	conn_send_ctl(c, &m);
}

/*
 * A peer-mode node routes for the nodes around it, but is not a transit
 * between two routers: routers are the backbone and know their own links.
 * Whatever it does not carry it must not advertise either.
 */
static bool
carries(const struct tern_node *node, const struct conn *from, const struct conn *to)
{
	return node->cfg.mode == TERN_MODE_ROUTER || from == NULL || !from->peer_router ||
	       !to->peer_router;
}

/* Tell every ready connection but `except`. */
static void
spread(struct tern_node *node, const struct interest *i, bool declare, struct conn *except)
{
	const struct conn *from = i->nfrom > 0 ? i->from[0] : except;

	for (struct conn *c = node->conns; c != NULL; c = c->next) {
		if (c != except && c->state == CONN_READY && carries(node, from, c)) {
			send_sub(c, i, declare);
		}
	}
}

void
route_peer_ready(struct tern_node *node, struct conn *c)
{
	struct ctl_msg sync = {.type = CTL_SYNC};

	for (struct interest *i = node->interests; i != NULL; i = i->next) {
		if (i->nfrom == 0 || (i->from[0] != c && carries(node, i->from[0], c))) {
			send_sub(c, i, true);
		}
	}
	conn_send_ctl(c, &sync);
	route_recompute(node);
}

static struct interest *
interest_find(struct tern_node *node, const char *origin, size_t olen, uint64_t id)
{
	for (struct interest *i = node->interests; i != NULL; i = i->next) {
		if (i->sub_id == id && strlen(i->origin) == olen &&
		    memcmp(i->origin, origin, olen) == 0) {
			return i;
		}
	}
	return NULL;
}

static void
interest_free(struct interest *i)
{
	free(i->origin);
	free(i->keyexpr);
	free(i->from);
	free(i);
}

static void
interest_unlink(struct tern_node *node, struct interest *dead)
{
	for (struct interest **pp = &node->interests; *pp != NULL; pp = &(*pp)->next) {
		if (*pp == dead) {
			*pp = dead->next;
			return;
		}
	}
}

static bool
from_add(struct interest *i, struct conn *c)
{
	for (int k = 0; k < i->nfrom; k++) {
		if (i->from[k] == c) {
			return true;
		}
	}
	if (i->nfrom == i->from_cap) {
		int cap = i->from_cap ? i->from_cap * 2 : 2;
		struct conn **p = realloc(i->from, (size_t)cap * sizeof(*p));
		if (p == NULL) {
			return false;
		}
		i->from = p;
		i->from_cap = cap;
	}
	i->from[i->nfrom++] = c;
	return true;
}

static bool
from_remove(struct interest *i, struct conn *c)
{
	for (int k = 0; k < i->nfrom; k++) {
		if (i->from[k] == c) {
			memmove(i->from + k, i->from + k + 1,
			        (size_t)(i->nfrom - k - 1) * sizeof(*i->from));
			i->nfrom--;
			return true;
		}
	}
	return false;
}

static struct interest *
interest_new(const char *origin, size_t olen, uint64_t id, const char *ke, size_t ke_len)
{
	struct interest *i = calloc(1, sizeof(*i));

	if (i == NULL) {
		return NULL;
	}
	i->origin = strndup(origin, olen);
	i->keyexpr = strndup(ke, ke_len);
	i->ke_len = ke_len;
	i->sub_id = id;
	if (i->origin == NULL || i->keyexpr == NULL) {
		interest_free(i);
		return NULL;
	}
	return i;
}

static int
on_sub(struct tern_node *node, struct conn *c, const struct ctl_msg *m)
{
	const struct ctl_str *o = &m->u.sub.origin;
	struct interest *i;

	if (tern__key_check(m->u.sub.keyexpr.p, m->u.sub.keyexpr.len, true) != 0) {
		return tern__error(TERN_EPROTO, "peer declared a bad key expression: %s",
		                   tern_last_error());
	}
	if (o->len == strlen(node->id) && memcmp(o->p, node->id, o->len) == 0) {
		return 0; /* our own subscription came back around */
	}
	i = interest_find(node, o->p, o->len, m->u.sub.sub_id);
	if (i != NULL) {
		return from_add(i, c) ? 0 : TERN_ENOMEM;
	}
	if (m->u.sub.hops >= MAX_HOPS) {
		return 0;
	}
	i = interest_new(o->p, o->len, m->u.sub.sub_id, m->u.sub.keyexpr.p, m->u.sub.keyexpr.len);
	if (i == NULL || !from_add(i, c)) {
		if (i != NULL) {
			interest_free(i);
		}
		return TERN_ENOMEM;
	}
	i->hops = m->u.sub.hops + 1;
	i->next = node->interests;
	node->interests = i;
	spread(node, i, true, c);
	route_recompute(node);
	return 0;
}

static int
on_unsub(struct tern_node *node, struct conn *c, const struct ctl_msg *m)
{
	struct interest *i =
	    interest_find(node, m->u.sub.origin.p, m->u.sub.origin.len, m->u.sub.sub_id);

	if (i == NULL || i->local != NULL || !from_remove(i, c)) {
		return 0;
	}
	if (i->nfrom == 0) {
		interest_unlink(node, i);
		spread(node, i, false, c);
		interest_free(i);
	}
	route_recompute(node);
	return 0;
}

static struct src *
remote_find(struct tern_node *node, const struct ctl_msg *m)
{
	const struct ctl_str *p = &m->u.open.publisher;

	for (struct src *s = node->remote; s != NULL; s = s->next) {
		if (s->instance == m->u.open.instance && strlen(s->publisher) == p->len &&
		    memcmp(s->publisher, p->p, p->len) == 0) {
			return s;
		}
	}
	return NULL;
}

static int
on_open(struct tern_node *node, struct conn *c, const struct ctl_msg *m)
{
	struct src *s;
	int rc;

	if (tern__key_check(m->u.open.key.p, m->u.open.key.len, false) != 0) {
		return tern__error(TERN_EPROTO, "peer opened a channel with a bad key: %s",
		                   tern_last_error());
	}
	s = remote_find(node, m);
	if (s != NULL &&
	    (s->key_len != m->u.open.key.len || memcmp(s->key, m->u.open.key.p, s->key_len) != 0)) {
		return tern__error(TERN_EPROTO, "publisher %s changed its key", s->publisher);
	}
	if (s == NULL) {
		s = calloc(1, sizeof(*s));
		if (s == NULL) {
			return TERN_ENOMEM;
		}
		s->key = strndup(m->u.open.key.p, m->u.open.key.len);
		s->publisher = strndup(m->u.open.publisher.p, m->u.open.publisher.len);
		if (s->key == NULL || s->publisher == NULL) {
			free(s->key);
			free(s->publisher);
			free(s);
			return TERN_ENOMEM;
		}
		s->key_len = m->u.open.key.len;
		s->publisher_len = m->u.open.publisher.len;
		s->instance = m->u.open.instance;
		s->reliability =
		    m->u.open.reliability == TERN_BEST_EFFORT ? TERN_BEST_EFFORT : TERN_RELIABLE;
		s->next = node->remote;
		node->remote = s;
	}
	if ((rc = conn_inchan_open(c, m, s)) != 0) {
		return rc;
	}
	route_recompute(node);
	return 0;
}

static void
unstall(struct tern_node *node, struct inchan *in)
{
	for (struct inchan **pp = &node->stalled; *pp != NULL; pp = &(*pp)->stall_next) {
		if (*pp == in) {
			*pp = in->stall_next;
			return;
		}
	}
}

static void
inchan_close(struct tern_node *node, struct conn *c, struct inchan *in)
{
	if (in->stalled) {
		unstall(node, in);
	}
	for (uint32_t i = 0; in->dirty && i < c->ndirty; i++) {
		if (c->dirty[i] == in) {
			c->dirty[i] = c->dirty[--c->ndirty];
			break;
		}
	}
	in->src->refs--;
	reasm_free(&in->reasm, &c->reasm_budget);
	free(in->done_buf);
	free(in->backlog);
	c->ins[in->id] = NULL;
	free(in);
}

static struct outchan *
outchan_by_id(struct conn *c, uint64_t id)
{
	for (int i = 0; i < c->nout; i++) {
		if (c->outv[i]->id == id) {
			return c->outv[i];
		}
	}
	return NULL;
}

/* The channel's consumption rate, over intervals of a second at least (it
 * bounds how deep its queue may grow for a stalled peer: pub.c). */
static void
measure_rate(struct outchan *oc)
{
	uint64_t now = node_now_ms();

	if (oc->rate_t0_ms == 0) {
		oc->rate_t0_ms = now;
		oc->rate_acked0 = oc->acked;
	} else if (now - oc->rate_t0_ms >= 1000) {
		atomic_store_explicit(&oc->rate_Bps,
		                      (oc->acked - oc->rate_acked0) * 1000 / (now - oc->rate_t0_ms),
		                      memory_order_relaxed);
		oc->rate_t0_ms = now;
		oc->rate_acked0 = oc->acked;
	}
}

static int
on_credit(struct conn *c, const struct ctl_msg *m)
{
	struct outchan *oc = outchan_by_id(c, m->u.credit.channel);

	if (oc == NULL) {
		return 0; /* a channel we closed meanwhile */
	}
	if (m->u.credit.bytes > (1ull << 40)) {
		return tern__error(TERN_EPROTO, "absurd credit grant");
	}
	atomic_fetch_add(&oc->credit, (int64_t)m->u.credit.bytes);
	atomic_store(&oc->blocked_sent, false);
	/* credit, or anything consumed, is progress: the peer is not stalled */
	if (m->u.credit.bytes > 0 || m->u.credit.consumed > oc->acked) {
		atomic_store(&oc->starved_since_ms, 0);
	}
	if (m->u.credit.consumed > oc->acked || m->u.credit.bytes > 0) {
		atomic_store(&oc->last_ack_ms, node_now_ms());
	}
	if (oc->retain && m->u.credit.consumed > oc->acked) {
		pthread_mutex_lock(&c->wlock);
		oc->acked = m->u.credit.consumed;
		route_release_acked(oc);
		pthread_mutex_unlock(&c->wlock);
		measure_rate(oc);
	}
	if (outchan_unsent(oc) > 0) {
		atomic_store(&c->pending, 1); /* frames were waiting for this credit */
	}
	if (oc->src->pub != NULL) {
		pub_wake(oc->src->pub);
	}
	return 0;
}

int
route_on_ctl(struct tern_node *node, struct conn *c, const struct ctl_msg *m)
{
	switch (m->type) {
	case CTL_SUB:
		return on_sub(node, c, m);
	case CTL_UNSUB:
		return on_unsub(node, c, m);
	case CTL_OPEN:
		return on_open(node, c, m);
	case CTL_CLOSE: {
		struct inchan *in =
		    m->u.credit.channel < c->ins_cap ? c->ins[m->u.credit.channel] : NULL;
		if (in != NULL) {
			inchan_close(node, c, in);
		}
		return 0;
	}
	case CTL_CREDIT:
		return on_credit(c, m);
	default:
		return tern__error(TERN_EPROTO, "unexpected control message %d", m->type);
	}
}

/* ---- outchans ---- */

struct outchan *
route_outchan_new(struct conn *c, struct src *s)
{
	struct outchan *oc = calloc(1, sizeof(*oc));
	struct ctl_msg m = {.type = CTL_OPEN};
	size_t ring = 256u << 10;

	if (oc == NULL) {
		return NULL;
	}
	if (ring < 4ull * c->batch_max) {
		ring = 4ull * c->batch_max;
	}
	if (ring < 2ull * c->peer_window) { /* the window's worth kept, and more to send */
		ring = 2ull * c->peer_window;
	}
	if (ring_init(&oc->ring, ring) != 0) {
		free(oc);
		return NULL;
	}
	pthread_mutex_lock(&c->wlock);
	if (c->nout == c->out_cap_v) {
		int cap = c->out_cap_v ? c->out_cap_v * 2 : 8;
		struct outchan **p = realloc(c->outv, (size_t)cap * sizeof(*p));
		if (p == NULL) {
			pthread_mutex_unlock(&c->wlock);
			ring_free(&oc->ring);
			free(oc);
			return NULL;
		}
		c->outv = p;
		c->out_cap_v = cap;
	}
	oc->conn = c;
	oc->src = s;
	oc->id = c->next_chan++;
	atomic_init(&oc->credit, (int64_t)c->peer_window);
	atomic_init(&oc->sent, 0);
	atomic_init(&oc->last_ack_ms, node_now_ms());
	atomic_init(&oc->last_write_ms, node_now_ms());
	oc->retain = s->reliability == TERN_RELIABLE;
	atomic_fetch_add(&c->ring_bytes, oc->ring.cap);
	m.u.open.channel = oc->id;
	m.u.open.publisher = cstr(s->publisher);
	m.u.open.key.p = s->key;
	m.u.open.key.len = s->key_len;
	m.u.open.reliability = (uint64_t)s->reliability;
	m.u.open.instance = s->instance;
	conn_send_ctl_locked(c, &m);
	c->outv[c->nout++] = oc;
	pthread_mutex_unlock(&c->wlock);
	return oc;
}

void
route_outchan_free(struct outchan *oc)
{
	atomic_fetch_sub(&oc->conn->ring_bytes, oc->ring.cap);
	ring_free(&oc->ring);
	free(oc);
}

/* Remove an outchan from its connection and free it (caller holds the
 * source's route lock, if any). Queued frames are dropped: nobody on that
 * connection wants them any more. */
static void
outchan_close(struct outchan *oc, bool tell)
{
	struct conn *c = oc->conn;
	struct ctl_msg m = {.type = CTL_CLOSE};

	pthread_mutex_lock(&c->wlock);
	for (int i = 0; i < c->nout; i++) {
		if (c->outv[i] == oc) {
			c->outv[i] = c->outv[--c->nout];
			break;
		}
	}
	if (tell && c->state == CONN_READY) {
		m.u.credit.channel = oc->id;
		conn_send_ctl_locked(c, &m);
	}
	pthread_mutex_unlock(&c->wlock);
	route_outchan_free(oc);
}

static bool
conn_wants(struct tern_node *node, struct conn *c, const struct src *s)
{
	for (struct interest *i = node->interests; i != NULL; i = i->next) {
		if (i->nfrom > 0 && i->from[0] == c &&
		    tern__keyexpr_match(i->keyexpr, i->ke_len, s->key, s->key_len)) {
			return true;
		}
	}
	return false;
}

static bool
push_ptr(void ***arr, int *n, int *cap, void *p)
{
	if (*n == *cap) {
		int nc = *cap ? *cap * 2 : 4;
		void **a = realloc(*arr, (size_t)nc * sizeof(void *));
		if (a == NULL) {
			return false;
		}
		*arr = a;
		*cap = nc;
	}
	(*arr)[(*n)++] = p;
	return true;
}

/*
 * Release, from the head of a reliable channel's ring, what the peer has
 * consumed: what stays is what a reconnect must send again. The peer
 * counts whole frames, so this always ends on a frame boundary, and no
 * frame needs decoding here. Caller holds conn->wlock.
 */
void
route_release_acked(struct outchan *oc)
{
	size_t sent = atomic_load(&oc->sent);
	uint64_t n = oc->acked - oc->freed;

	if (oc->acked <= oc->freed) {
		return;
	}
	if (n > sent) { /* the peer claims more than it was sent */
		n = sent;
	}
	ring_consume(&oc->ring, (size_t)n);
	oc->freed += n;
	atomic_store(&oc->sent, sent - (size_t)n);
}

/*
 * Where a reliable channel's kept frames start: the sequence number of the
 * first message in them, and whether they begin inside a message whose
 * first chunk was consumed. Worked out from the frames themselves, once,
 * when a connection breaks, so that the normal path keeps no per-message
 * records: a message's number is the last explicit one plus the messages
 * between, and without an explicit one, the number of the channel's last
 * message minus those after it.
 */
static void
kept_start(struct outchan *oc, uint64_t *head_seq, bool *head_mid)
{
	size_t used = ring_used(&oc->ring), off = 0;
	uint64_t starts = 0, first_explicit = 0, starts_before = 0;
	bool explicit_seen = false;

	*head_mid = false;
	while (off < used) {
		uint8_t hdr[WIRE_HDR_MAX];
		struct wire_frame f;
		size_t hlen, n = used - off < sizeof(hdr) ? used - off : sizeof(hdr);

		ring_peek(&oc->ring, off, hdr, n);
		if (wire_header_decode(hdr, n, UINT64_MAX, &f, &hlen) != 1) {
			break;
		}
		bool starts_msg = f.type == WIRE_DATA || (f.flags & WIRE_FLAG_FIRST);
		if (off == 0) {
			*head_mid = !starts_msg;
		}
		if (starts_msg && (f.flags & WIRE_FLAG_SEQ) && !explicit_seen) {
			explicit_seen = true;
			first_explicit = f.seq;
			starts_before = starts;
		}
		starts += starts_msg;
		off += hlen + (size_t)f.len;
	}
	uint64_t first;
	if (explicit_seen) {
		first = first_explicit - starts_before;
	} else if (starts > 0) {
		first = oc->last_seq - (starts - 1);
	} else {
		first = oc->last_seq + 1; /* only the rest of the last message */
	}
	*head_seq = *head_mid ? first - 1 : first;
}

static void
parked_free(struct parked *p)
{
	ring_free(&p->ring);
	free(p);
}

/* Keep what a reliable channel held when its connection broke. */
static void
park(struct tern_node *node, struct src *s, struct outchan *oc)
{
	struct parked **pp = &s->parked, *p;

	if (ring_used(&oc->ring) == 0) {
		return;
	}
	while (*pp != NULL) { /* one entry per peer: a newer loss replaces it */
		if (strcmp((*pp)->peer_id, oc->conn->peer_id) == 0) {
			struct parked *old = *pp;
			*pp = old->next;
			parked_free(old);
			break;
		}
		pp = &(*pp)->next;
	}
	p = calloc(1, sizeof(*p));
	if (p == NULL) {
		return;
	}
	snprintf(p->peer_id, sizeof(p->peer_id), "%s", oc->conn->peer_id);
	p->ring = oc->ring;
	kept_start(oc, &p->head_seq, &p->head_mid);
	p->expires_ms = node_now_ms() + node->cfg.slow_consumer_ms;
	memset(&oc->ring, 0, sizeof(oc->ring)); /* moved */
	p->next = s->parked;
	s->parked = p;
	node_log(node, TERN_LOG_DEBUG, "keeping %zu bytes of '%s' for %s", ring_used(&p->ring),
	         s->key, p->peer_id);
}

/* A publication while the peer is away: kept if it fits, else its sequence
 * number will show as missed. Caller holds the publisher's lock. */
/* Room for a message of len bytes in every parked ring (growing them within
 * budget bytes each); false if one is full. Caller holds the route lock. */
bool
route_parked_room(struct src *s, size_t len, uint64_t budget)
{
	for (struct parked *p = s->parked; p != NULL; p = p->next) {
		size_t need = len + WIRE_HDR_MAX;
		if (ring_space(&p->ring) >= need) {
			continue;
		}
		if (ring_used(&p->ring) + need > budget ||
		    ring_grow(&p->ring, ring_used(&p->ring) + need) != 0) {
			return false;
		}
	}
	return true;
}

void
route_park_append(struct src *s, const char *peer, uint64_t seq, const uint8_t *data, size_t len)
{
	for (struct parked *p = s->parked; p != NULL; p = p->next) {
		if (peer != NULL && strcmp(p->peer_id, peer) != 0) {
			continue;
		}
		struct wire_frame f = {
		    .type = WIRE_DATA, .flags = WIRE_FLAG_SEQ, .seq = seq, .len = len};
		uint8_t hdr[WIRE_HDR_MAX];
		size_t hlen = wire_header_encode(hdr, &f);

		if (len > 65536 || ring_space(&p->ring) < hlen + len) {
			p->dropped++;
			continue;
		}
		ring_put(&p->ring, hdr, hlen, data, len);
	}
}

/* The peer is back: queue what was kept, renumbered for the new channel;
 * the peer drops what it had already received, by sequence number. */
static void
resume(struct tern_node *node, struct src *s, struct outchan *oc)
{
	struct parked **pp = &s->parked, *p = NULL;
	uint8_t *frame;
	size_t off = 0, used, room;
	uint64_t seq;
	bool skip;
	int messages = 0;

	for (; *pp != NULL; pp = &(*pp)->next) {
		if (strcmp((*pp)->peer_id, oc->conn->peer_id) == 0) {
			p = *pp;
			*pp = p->next;
			break;
		}
	}
	if (p == NULL) {
		return;
	}
	used = ring_used(&p->ring);
	room = (size_t)oc->conn->frame_max + WIRE_HDR_MAX;
	frame = malloc(room + WIRE_HDR_MAX);
	pthread_mutex_lock(&oc->conn->wlock);
	if (frame == NULL || ring_grow(&oc->ring, 2 * used) != 0) {
		used = 0;
	}
	seq = p->head_seq;
	skip = p->head_mid;
	while (off < used) {
		uint8_t hdr[WIRE_HDR_MAX];
		struct wire_frame f;
		size_t hlen, n = used - off < sizeof(hdr) ? used - off : sizeof(hdr);

		ring_peek(&p->ring, off, hdr, n);
		if (wire_header_decode(hdr, n, UINT64_MAX, &f, &hlen) != 1 || f.len > room) {
			break;
		}
		bool starts = f.type == WIRE_DATA || (f.flags & WIRE_FLAG_FIRST);
		if (skip && !starts) {
			/* the rest of a message whose start the peer consumed before the
			 * break: it cannot be completed, and shows as missed */
			if (f.flags & WIRE_FLAG_LAST) {
				seq++;
				skip = false;
			}
			off += hlen + (size_t)f.len;
			continue;
		}
		skip = false;
		if (starts && (f.flags & WIRE_FLAG_SEQ)) {
			seq = f.seq;
		}
		f.channel = oc->id;
		f.flags &= ~WIRE_FLAG_SEQ;
		if (starts && seq != oc->last_seq + 1) {
			f.flags |= WIRE_FLAG_SEQ;
			f.seq = seq;
		}
		messages += starts;
		size_t nh = wire_header_encode(frame, &f);
		ring_peek(&p->ring, off + hlen, frame + nh, (size_t)f.len);
		ring_put(&oc->ring, frame, nh + (size_t)f.len, NULL, 0);
		if (starts) {
			oc->last_seq = seq;
		}
		if (f.type == WIRE_DATA || (f.flags & WIRE_FLAG_LAST)) {
			seq++;
		}
		off += hlen + (size_t)f.len;
	}
	pthread_mutex_unlock(&oc->conn->wlock);
	atomic_store(&oc->conn->pending, 1);
	node_log(node, TERN_LOG_INFO, "resuming '%s' with %s: %d messages sent again%s", s->key,
	         p->peer_id, messages, p->dropped ? " (some did not fit and are missed)" : "");
	free(frame);
	parked_free(p);
}

void
route_expire_parked(struct tern_node *node, uint64_t now_ms)
{
	for (struct tern_pub *pub = node->pubs; pub != NULL; pub = pub->next) {
		if (pub->src.parked == NULL) {
			continue;
		}
		pthread_mutex_lock(&pub->lock);
		for (struct parked **pp = &pub->src.parked; *pp != NULL;) {
			struct parked *p = *pp;
			if (now_ms < p->expires_ms) {
				pp = &p->next;
				continue;
			}
			*pp = p->next;
			node_log(node, TERN_LOG_INFO,
			         "%s did not come back: dropping what '%s' kept", p->peer_id,
			         pub->src.key);
			parked_free(p);
		}
		pthread_mutex_unlock(&pub->lock);
	}
	for (struct src *s = node->remote; s != NULL; s = s->next) {
		for (struct parked **pp = &s->parked; *pp != NULL;) {
			struct parked *p = *pp;
			if (now_ms < p->expires_ms) {
				pp = &p->next;
				continue;
			}
			*pp = p->next;
			parked_free(p);
		}
	}
}

/* Bring one source's route up to date; the caller holds its route lock. */
static void
src_update(struct tern_node *node, struct src *s)
{
	/* drop outchans nobody wants any more */
	for (int k = 0; k < s->nouts;) {
		struct outchan *oc = s->outs[k];
		if (oc->conn->state == CONN_READY && conn_wants(node, oc->conn, s)) {
			k++;
			continue;
		}
		s->outs[k] = s->outs[--s->nouts];
		/* a broken connection (not a goodbye, not a slow consumer we dropped)
		 * is expected back: keep what it had not consumed */
		if (oc->conn->state == CONN_DEAD && oc->retain && !oc->conn->said_goodbye &&
		    !atomic_load(&oc->conn->kill) && !node->closing) {
			park(node, s, oc);
		}
		outchan_close(oc, true);
	}
	for (struct conn *c = node->conns; c != NULL; c = c->next) {
		bool have = false;
		if (c->state != CONN_READY || !conn_wants(node, c, s)) {
			continue;
		}
		for (int k = 0; k < s->nouts; k++) {
			have |= s->outs[k]->conn == c;
		}
		if (!have) {
			struct outchan *oc = route_outchan_new(c, s);
			if (oc != NULL &&
			    !push_ptr((void ***)&s->outs, &s->nouts, &s->outs_cap, oc)) {
				outchan_close(oc, true);
				oc = NULL;
			}
			if (oc != NULL) {
				resume(node, s, oc);
			}
		}
	}
	s->nsubs = 0;
	for (struct tern_sub *sub = node->subs; sub != NULL; sub = sub->next) {
		if (tern__keyexpr_match(sub->keyexpr, sub->ke_len, s->key, s->key_len)) {
			push_ptr((void ***)&s->subs, &s->nsubs, &s->subs_cap, sub);
		}
	}
}

void
route_recompute(struct tern_node *node)
{
	for (struct tern_pub *p = node->pubs; p != NULL; p = p->next) {
		/* outchans about to go: let a publisher waiting on them give up */
		for (int k = 0; k < p->src.nouts; k++) {
			struct outchan *oc = p->src.outs[k];
			if (oc->conn->state != CONN_READY || !conn_wants(node, oc->conn, &p->src)) {
				atomic_store(&oc->detached, true);
			}
		}
		pub_wake(p);
		pthread_mutex_lock(&p->lock);
		src_update(node, &p->src);
		pthread_mutex_unlock(&p->lock);
	}
	for (struct src *s = node->remote; s != NULL; s = s->next) {
		src_update(node, s);
	}
}

void
route_src_clear(struct src *s)
{
	while (s->parked != NULL) {
		struct parked *p = s->parked;
		s->parked = p->next;
		parked_free(p);
	}
	for (int k = 0; k < s->nouts; k++) {
		outchan_close(s->outs[k], false);
	}
	free(s->outs);
	free(s->subs);
	free(s->key);
	free(s->publisher);
	s->outs = NULL;
	s->subs = NULL;
	s->nouts = s->nsubs = 0;
}

void
route_conn_gone(struct tern_node *node, struct conn *c)
{
	struct interest **pp = &node->interests;

	while (*pp != NULL) {
		struct interest *i = *pp;
		if (from_remove(i, c) && i->nfrom == 0 && i->local == NULL) {
			*pp = i->next;
			spread(node, i, false, c);
			interest_free(i);
			continue;
		}
		pp = &i->next;
	}
	for (uint32_t k = 0; k < c->ins_cap; k++) {
		/* a channel with a backlog stays until it is delivered */
		if (c->ins[k] != NULL && !c->ins[k]->stalled) {
			inchan_close(node, c, c->ins[k]);
		}
	}
	c->state = CONN_DEAD;
	route_recompute(node); /* closes this connection's outchans */
}

int
route_add_local_sub(struct tern_node *node, struct tern_sub *sub)
{
	struct interest *i =
	    interest_new(node->id, strlen(node->id), sub->id, sub->keyexpr, sub->ke_len);

	if (i == NULL) {
		return TERN_ENOMEM;
	}
	i->local = sub;
	i->next = node->interests;
	node->interests = i;
	sub->next = node->subs;
	node->subs = sub;
	spread(node, i, true, NULL);
	route_recompute(node);
	return 0;
}

void
route_remove_local_sub(struct tern_node *node, struct tern_sub *sub)
{
	struct interest *i = interest_find(node, node->id, strlen(node->id), sub->id);

	for (struct tern_sub **pp = &node->subs; *pp != NULL; pp = &(*pp)->next) {
		if (*pp == sub) {
			*pp = sub->next;
			break;
		}
	}
	if (i != NULL) {
		interest_unlink(node, i);
		spread(node, i, false, NULL);
		interest_free(i);
	}
	route_recompute(node);
	for (struct inchan **pp = &node->stalled; *pp != NULL; pp = &(*pp)->stall_next) {
		(void)pp; /* stalled channels are retried and find the sub gone */
	}
}

/* ---- delivery of remote messages ---- */

bool
route_is_duplicate(struct inchan *in, uint64_t seq)
{
	return in->src->seen && seq <= in->src->last_seq;
}

void
route_note_seq(struct tern_node *node, struct inchan *in, uint64_t seq)
{
	struct src *s = in->src;
	(void)node;

	if (s->seen && seq > s->last_seq + 1) {
		for (int k = 0; k < s->nsubs; k++) {
			atomic_fetch_add(&s->subs[k]->missed, seq - s->last_seq - 1);
		}
	}
	s->last_seq = seq;
	s->seen = true;
}

static bool
onward(const struct outchan *oc, const struct inchan *in)
{
	return oc->conn != in->conn && oc->conn->state == CONN_READY &&
	       carries(in->conn->node, in->conn, oc->conn);
}

/* A large message for a pull subscriber, in a buffer of its own; without
 * memory for it, the subscriber misses it. */
static void
push_copy(struct tern_sub *sub, const struct src *s, uint64_t seq, const uint8_t *data, size_t len)
{
	uint8_t *copy = malloc(len);

	if (copy == NULL) {
		atomic_fetch_add(&sub->missed, 1);
		return;
	}
	memcpy(copy, data, len);
	sub_push(sub, s, seq, data, len, copy);
}

bool
route_deliver(struct tern_node *node, struct inchan *in, uint64_t seq, const uint8_t *data,
              size_t len, uint8_t **heap, bool whole)
{
	struct src *s = in->src;
	bool big = len > SUB_INLINE_MAX;

	if (whole && route_is_duplicate(in, seq)) {
		return true;
	}
	for (int k = 0; k < s->nsubs; k++) {
		struct tern_sub *sub = s->subs[k];
		if (sub->fn == NULL && !sub_reserve(sub, sub_entry_size(s, len, big))) {
			return false;
		}
	}
	if (whole && s->reliability == TERN_RELIABLE) {
		for (int k = 0; k < s->nouts; k++) {
			if (onward(s->outs[k], in) && !outchan_has_room(s->outs[k], len)) {
				return false;
			}
		}
	}
	if (whole) {
		route_note_seq(node, in, seq);
	}
	/* A large message goes to a pull subscriber as a buffer of its own:
	 * each gets a copy but the last, which takes the caller's buffer once
	 * nothing else needs to read it (its reader may free it at once). */
	struct tern_sub *last_big = NULL;
	for (int k = 0; k < s->nsubs; k++) {
		struct tern_sub *sub = s->subs[k];
		if (sub->fn != NULL) {
			sub_call(sub, s, seq, data, len);
		} else if (!big) {
			sub_push(sub, s, seq, data, len, NULL);
		} else if (last_big != NULL) {
			push_copy(last_big, s, seq, data, len);
			last_big = sub;
		} else {
			last_big = sub;
		}
	}
	if (whole) {
		for (int k = 0; k < s->nouts; k++) {
			if (onward(s->outs[k], in)) {
				outchan_send(s->outs[k], seq, data, len, false, NULL, NULL);
			}
		}
	}
	if (last_big != NULL && heap != NULL && *heap != NULL) {
		sub_push(last_big, s, seq, data, len, *heap);
		*heap = NULL;
	} else if (last_big != NULL) {
		push_copy(last_big, s, seq, data, len);
	}
	COUNT(node->messages_in, 1);
	COUNT(node->bytes_in, len);
	return true;
}

bool
route_forward_chunk(struct tern_node *node, struct inchan *in, const struct wire_frame *f,
                    uint64_t seq, const uint8_t *payload)
{
	struct src *s = in->src;
	(void)node;

	if (s->reliability == TERN_RELIABLE) {
		for (int k = 0; k < s->nouts; k++) {
			if (onward(s->outs[k], in) && !outchan_has_room(s->outs[k], f->len)) {
				return false;
			}
		}
	}
	for (int k = 0; k < s->nouts; k++) {
		struct outchan *oc = s->outs[k];
		struct wire_frame g = *f;
		if (!onward(oc, in) || !outchan_has_room(oc, f->len)) {
			continue;
		}
		g.channel = oc->id;
		g.flags &= ~WIRE_FLAG_SEQ;
		if ((f->flags & WIRE_FLAG_FIRST) && seq != oc->last_seq + 1) {
			g.flags |= WIRE_FLAG_SEQ;
			g.seq = seq;
		}
		if (f->flags & WIRE_FLAG_FIRST) {
			oc->last_seq = seq;
		}
		outchan_put_frame(oc, &g, payload);
	}
	return true;
}
