/*
 * session.c - interests, sources, routes, delivery and the publish path.
 * See session.h for the design and the thread rules.
 */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "acl.h"
#include "clock.h"
#include "error.h"
#include "frames.h"
#include "hist.h"
#include "jtext.h"
#include "keyexpr.h"
#include "ketree.h"
#include "park.h"
#include "route.h"
#include "scope.h"
#include "session.h"
#include "subq.h"
#include "writer.h"

#define MAX_HOPS        32
#define SUB_RING        (1u << 20)
#define WAIT_RECHECK_MS 20 /* a publisher waiting for room looks again this often */
#define DYING_MAX       4
#define STAMP_EVERY_US  1000 /* a publisher stamps about one message this often */
/* ... and a node at most this many messages a millisecond in all, so that
 * ten thousand keys cost no more clock reads, bytes and histogram entries
 * than a few (docs/PROTOCOL.md, "Publish stamps") */
#define STAMPS_PER_MS 32
/* how many messages a key lets go by, at most, between two looks at the
 * clock while the node's stamps are spent */
#define STAMP_GAP_MAX 4096

/* A peer's DENY of a local subscriber or publisher (TERN_EACCES), or a
 * channel to a peer that wants a reliable publisher's key that could not
 * be opened (TERN_ENOMEM): the I/O thread writes the code and reason once,
 * then sets `set` (release); any thread that sees `set` (acquire) may read
 * them, and the reason stays until the owner is freed. */
struct refusal {
	atomic_bool set;
	int code;
	char *reason;
};

/* A local subscriber. The I/O thread owns the list; `closing` and the
 * counters are read by any thread. */
struct sink {
	struct session *session;
	char *keyexpr;
	size_t ke_len;
	uint64_t id;
	tern_sub_fn fn; /* NULL: a pull subscriber, with a queue */
	void *arg;
	struct subq q;
	bool held;           /* I/O thread: holds q.lock until the read is parsed */
	atomic_bool closing; /* publishers stop waiting for room here */
	_Atomic uint64_t messages, bytes, missed;
	struct interest *interest; /* I/O thread: its entry in the table */
	struct sink *next, *prev;
	struct refusal refusal; /* a peer refused the subscription (acl) */
};

/*
 * The routers whose messages a channel does not carry on: each of them
 * declared to this node every subscription the channel serves, at a count
 * no greater than this node's, so its own route to them neither starts
 * nor passes here and it sends them its messages itself (docs/PROTOCOL.md,
 * "Routing"). At most SKIP_MAX: a shorter list costs a duplicate, which
 * the receiver drops, never a loss.
 */
#define SKIP_MAX 2
struct skip {
	const struct conn *v[SKIP_MAX];
	uint8_t n;
};

struct out {
	struct outchan *oc;
	struct conn *conn;
	struct skip skip; /* remote sources only */
	bool withdrawn;   /* put aside because conn withdrew what it served */
};

/* src_update's scratch: a connection the key goes to, and its skip list */
struct want {
	struct conn *conn;
	struct skip skip;
};

/* A source of messages: a local publisher, or a remote one seen on the wire. */
struct src {
	struct session *session;
	char *key; /* a remote source's strings follow its struct */
	size_t key_len;
	char *publisher;
	size_t publisher_len;
	uint64_t instance;
	int reliability;
	int nin; /* remote: receive channels open for it */
	/* the route: I/O thread, under route_lock for a local source; outs is
	 * out1 while one channel is enough */
	struct out *outs;
	int nouts, outs_cap;
	struct out out1;
	struct sink **subs;
	int nsubs, subs_cap;
	struct parked *parked;
	/* remote: the highest sequence delivered (duplicates dropped) */
	uint64_t last_seq;
	bool seen;
	bool local;
	bool releasing;         /* remote: none open; it goes once its queues drain */
	bool parked_noted;      /* in the session's parked list */
	atomic_bool has_parked; /* parked != NULL */
	/* A publisher sends from its copy of the route (see begin): set before it
	 * looks at gen, cleared when it is done. The I/O thread bumps gen before
	 * it looks at inside, so one of the two sees the other. */
	atomic_bool inside;
	atomic_bool update_due; /* a change waits for the publisher */
	atomic_uint gen;        /* bumped at every change of the route */
	atomic_int waiters;     /* local: publishers waiting for room */
	_Atomic uint64_t messages, bytes, dropped, undelivered;
	/* telemetry: a local publisher's time waiting for room or credit; a
	 * remote source's messages never received, and the publish-to-delivery
	 * latency of what it delivered here (I/O thread, allocated at the first
	 * stamped message, emptied by each report) */
	_Atomic uint64_t blocked_us, missed;
	struct tern__hist *lat;
	/* I/O thread: the list it is on (pubs or remote), and its place in
	 * the session's indexes */
	struct src *next, *prev;
};

/*
 * A local publisher's source: what only a publisher needs, after what
 * every source has. A remote source (a router holds one a key) is a bare
 * struct src; local_of gives the rest of a local one.
 */
struct local_src {
	struct src src;
	pthread_mutex_t send_lock;  /* a publication at a time: the rings' producer */
	pthread_mutex_t route_lock; /* outs, subs, parked, the copy's flag */
	pthread_mutex_t wait_lock;  /* waiting for room (a leaf) */
	pthread_cond_t wait_cond;
	uint64_t seq;     /* under send_lock */
	struct out *copy; /* under send_lock: the route as last copied */
	int ncopy, copy_cap;
	struct sink **copy_subs;
	int ncopy_subs, copy_subs_cap;
	unsigned copy_gen;
	bool copied;
	/* under send_lock: when to stamp a message (stamp_due) */
	uint64_t stamp_last_us;
	uint32_t stamp_left, stamp_gap, stamp_count;
	struct refusal refusal; /* a peer refused the publisher (acl), or a channel failed */
	/* client: its SCOPE went out and may not be answered yet; the first
	 * publication (or match count) waits for the answer (scope_settle) */
	atomic_bool scope_due;
};

static inline struct local_src *
local_of(struct src *src)
{
	assert(src->local);
	return (struct local_src *)src;
}

struct session {
	const tern_config *cfg;
	const struct logger *log;
	uint64_t instance;
	struct loop *loop;
	/* I/O thread */
	struct route_table routes;
	struct scope_table scopes; /* what each client link asked to be told */
	struct src *remote;
	struct src *pubs;
	struct ketree srcs;     /* every source, local and remote, by key */
	struct hmap remote_ids; /* remote sources by (publisher, instance) */
	struct src **parked_v;  /* sources that keep frames for an absent peer */
	int nparked, parked_cap;
	struct want *want; /* src_update's scratch: the connections a key goes to */
	int nwant, want_cap;
	struct sink *sinks;
	struct sink **held; /* pull subscribers whose queue lock this thread holds */
	int nheld, held_cap, nsinks;
	bool updates_due;
	/* where callbacks that publish have filled a queue past its mark: the
	 * messages that would run them wait (see callbacks_may_run) */
	struct outchan *congested_out;
	struct sink *congested_sink;
	uint64_t next_sub_id, next_pub_id;
	/* totals of closed publishers; messages received */
	_Atomic uint64_t messages_out, bytes_out, dropped, messages_in, bytes_in;
	/* reliable messages given up on: of closed publishers, and those this
	 * node relayed (a peer that did not come back, a slow consumer) */
	_Atomic uint64_t undelivered;
	/* messages that arrived on channels the acl refused, dropped */
	_Atomic uint64_t refused_in;
	/* publishers, any thread: the millisecond (of the wall clock) whose
	 * stamps are being counted, and how many it has given (stamp_take) */
	_Atomic uint64_t stamp_ms;
	atomic_uint stamps_used;
};

#define COUNT(var, n)                                                                              \
	atomic_store_explicit(&(var), atomic_load_explicit(&(var), memory_order_relaxed) + (n),    \
	                      memory_order_relaxed)

/* Where a reliable message given up on is counted: its publisher's count,
 * or, relayed from another node's, this node's. */
static _Atomic uint64_t *
undelivered_of(struct session *s, struct src *src)
{
	return src->local ? &src->undelivered : &s->undelivered;
}

static struct ctl_str
cstr(const char *s)
{
	struct ctl_str r = {s, strlen(s)};
	return r;
}

/* Room in *arr (of *cap elements of `size`) for element n, doubling from
 * one (most keys have one of everything); false without memory. */
static bool
room_for(void **arr, int n, int *cap, size_t size)
{
	if (n == *cap) {
		int nc = *cap ? *cap * 2 : 1;
		void *a = realloc(*arr, (size_t)nc * size);
		if (a == NULL) {
			return false;
		}
		*arr = a;
		*cap = nc;
	}
	return true;
}

static bool
push_ptr(void ***arr, int *n, int *cap, void *p)
{
	if (!room_for((void **)arr, *n, cap, sizeof(void *))) {
		return false;
	}
	(*arr)[(*n)++] = p;
	return true;
}

static bool
push_out(struct src *s, struct outchan *oc, const struct want *w)
{
	if (s->nouts == s->outs_cap) {
		int nc = s->outs_cap ? s->outs_cap * 2 : 1; /* most keys have one */
		struct out *a;
		if (nc == 1) {
			a = &s->out1;
		} else if (s->outs == &s->out1) {
			if ((a = malloc((size_t)nc * sizeof(*a))) != NULL) {
				a[0] = s->out1;
			}
		} else {
			a = realloc(s->outs, (size_t)nc * sizeof(*a));
		}
		if (a == NULL) {
			return false;
		}
		s->outs = a;
		s->outs_cap = nc;
	}
	s->outs[s->nouts].oc = oc;
	s->outs[s->nouts].withdrawn = false;
	s->outs[s->nouts].skip = w->skip;
	s->outs[s->nouts++].conn = w->conn;
	return true;
}

static struct subq_src
entry_src(const struct src *s)
{
	struct subq_src e = {s->key, s->key_len, s->publisher, s->publisher_len};
	return e;
}

/* ---- local subscribers ---- */

/* The I/O thread takes a queue's lock at its first message of a read and
 * keeps it until the read is parsed, so a burst costs one lock and one
 * wake-up, not one per message. */
static void
hold(struct sink *k)
{
	struct session *s = k->session;

	if (!k->held) {
		pthread_mutex_lock(&k->q.lock);
		k->held = true;
		s->held[s->nheld++] = k;
	}
}

static void
release_held(struct session *s)
{
	for (int i = 0; i < s->nheld; i++) {
		struct sink *k = s->held[i];
		k->held = false;
		subq_signal(&k->q);
		pthread_mutex_unlock(&k->q.lock);
	}
	s->nheld = 0;
}

static void
count_delivered(struct sink *k, size_t len)
{
	atomic_fetch_add_explicit(&k->messages, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&k->bytes, len, memory_order_relaxed);
}

static void
sink_call(struct sink *k, const struct src *s, uint64_t seq, const uint8_t *data, size_t len)
{
	tern_msg m = {
	    .key = s->key, .data = data, .len = len, .seq = seq, .publisher = s->publisher};

	count_delivered(k, len);
	k->fn(k->arg, &m);
}

/* Queue a copy for a pull subscriber from a publisher of this node,
 * waiting for room until *deadline_ms (NULL: do not wait). */
static int
sink_push_local(struct sink *k, const struct src *s, uint64_t seq, const uint8_t *data, size_t len,
                uint64_t *deadline_ms)
{
	struct subq_src e = entry_src(s);
	bool big = len > SUBQ_INLINE_MAX;
	size_t entry = subq_entry_size(&e, len, big);
	uint64_t timeout = s->session->cfg->publish_timeout_ms;
	uint8_t *heap = NULL;
	bool room;

	for (;;) {
		pthread_mutex_lock(&k->q.lock);
		room = subq_room(&k->q, entry, big ? len : 0);
		if (room || deadline_ms == NULL || atomic_load(&k->closing)) {
			break;
		}
		if (*deadline_ms == 0) {
			*deadline_ms = clock_ms() + timeout;
		}
		if (clock_ms() >= *deadline_ms) {
			break;
		}
		pthread_mutex_unlock(&k->q.lock);
		struct timespec ts = {0, 200000};
		nanosleep(&ts, NULL);
	}
	if (room && big && (heap = malloc(len)) != NULL) {
		memcpy(heap, data, len);
	}
	if (room && (!big || heap != NULL)) {
		subq_push(&k->q, &e, seq, data, len, heap);
		count_delivered(k, len);
		subq_signal(&k->q);
	}
	pthread_mutex_unlock(&k->q.lock);
	if (!room) {
		return deadline_ms != NULL ? TERN_ETIMEDOUT : TERN_EAGAIN;
	}
	return big && heap == NULL ? TERN_ENOMEM : 0;
}

/* The reader made room in a queue the I/O thread waits on. */
static void
sink_wake(void *arg)
{
	struct sink *k = arg;

	loop_wake(k->session->loop);
}

/* ---- interests ---- */

static void
send_sub(struct conn *c, const struct interest *i, bool declare)
{
	struct ctl_msg m = {.type = declare ? CTL_SUB : CTL_UNSUB};

	m.u.sub.origin = cstr(i->origin);
	m.u.sub.sub_id = i->sub_id;
	m.u.sub.hops = i->hops;
	m.u.sub.keyexpr.p = i->keyexpr;
	m.u.sub.keyexpr.len = i->ke_len;
	m.u.sub.end = CTL_UNSUB_WITHDRAWN;
	conn_send_ctl(c, &m);
}

static void
send_end(struct conn *c, struct ctl_str origin, uint64_t sub_id, enum ctl_unsub_end end)
{
	struct ctl_msg m = {.type = CTL_UNSUB};

	m.u.sub.origin = origin;
	m.u.sub.sub_id = sub_id;
	m.u.sub.end = end;
	conn_send_ctl(c, &m);
}

/*
 * A peer-mode node routes for the nodes around it, but is not a transit
 * between two routers: routers are the backbone and know their own links.
 * Whatever it does not carry it must not advertise either.
 */
static bool
carries(const struct session *s, const struct conn *from, const struct conn *to)
{
	if (s->cfg->mode == TERN_MODE_CLIENT) {
		return from == NULL; /* a client is nobody's way to anything */
	}
	return s->cfg->mode == TERN_MODE_ROUTER || from == NULL || !from->peer_router ||
	       !to->peer_router;
}

/* Is i within what `to` hears of? A client hears what its scope meets. */
static bool
in_scope(const struct session *s, const struct conn *to, const struct interest *i)
{
	return !to->peer_client || scope_meets(&s->scopes, to, i->keyexpr, i->ke_len);
}

/* Whether to tell `to` of i, which came from `from`: what this node
 * carries, and of that what `to` hears of. */
static bool
tells(const struct session *s, const struct conn *from, const struct conn *to,
      const struct interest *i)
{
	return carries(s, from, to) && in_scope(s, to, i);
}

/* Does this node declare i on c, scopes aside? It is live, and it is this
 * node's own or c is not its route (and it carries it toward c). */
static bool
declared_to(const struct session *s, const struct conn *c, const struct interest *i)
{
	return !i->ended && (i->nfrom == 0 || (i->from[0] != c && carries(s, i->from[0], c)));
}

/* Tell every ready connection but `except`. */
static void
spread(struct session *s, const struct interest *i, bool declare, struct conn *except)
{
	const struct conn *from = i->nfrom > 0 ? (const struct conn *)i->from[0] : except;

	for (struct conn *c = loop_next_conn(s->loop, NULL); c != NULL;
	     c = loop_next_conn(s->loop, c)) {
		if (c != except && conn_state(c) == CONN_READY && tells(s, from, c, i)) {
			send_sub(c, i, declare);
		}
	}
}

static void update_matching(struct session *s, const char *ke, size_t ke_len,
                            const struct conn *withdrawn_by);
static void note_parked(struct session *s, struct src *src);

enum dropped { DROP_NONE, DROP_KEPT, DROP_MOVED, DROP_GONE };

/*
 * i's route (from[0]) is new, or declares it at a new count: this node's
 * count follows, and every link it declares i to hears the new one
 * (DROP_MOVED; DROP_NONE: no change). A route that leads round a cycle
 * with no subscriber at its end (its node broke off, and the routers moved
 * their routes onto each other) counts up at every turn; past MAX_HOPS i
 * is withdrawn everywhere and unlinked, for the caller to free (DROP_GONE).
 */
static enum dropped
recount(struct session *s, struct interest *i)
{
	uint64_t hops = (uint64_t)i->from_hops[0] + 1;

	if (hops == i->hops) {
		return DROP_NONE;
	}
	i->hops = hops;
	if (hops > MAX_HOPS) {
		spread(s, i, false, NULL);
		route_detach(&s->routes, i);
		return DROP_GONE;
	}
	spread(s, i, true, i->from[0]);
	return DROP_MOVED;
}

/* i's route (from[0]) is a new link: it is told nothing of i (this node
 * takes back its declaration there), and the count follows it. */
static enum dropped
route_moved(struct session *s, struct interest *i)
{
	if (conn_state(i->from[0]) == CONN_READY) {
		send_sub(i->from[0], i, false);
	}
	return recount(s, i);
}

/*
 * Link c no longer leads to interest i: its UNSUB, or c is gone.
 * DROP_NONE: c did not declare it. DROP_GONE: no link leads to it any
 * more; the UNSUB went on to the other links and i is unlinked, for the
 * caller to free. DROP_MOVED: its route moved to the next link that
 * declared it. That link is now the way to it, so this node takes back its
 * own declaration there (a link is told an interest only while it is not
 * the route to it): two routers in a cycle that each declared it to the
 * other would otherwise keep it through each other once its subscriber is
 * gone. And c, if it withdrew but is still connected, is told it. The
 * count moves with the route (recount), and may end it: DROP_GONE.
 */
static enum dropped
drop_link(struct session *s, struct interest *i, struct conn *c)
{
	bool first = i->nfrom > 0 && i->from[0] == c;
	enum dropped d;

	if (i->local != NULL || !route_from_remove(i, c)) {
		return DROP_NONE;
	}
	if (i->nfrom == 0) {
		spread(s, i, false, c);
		route_detach(&s->routes, i);
		return DROP_GONE;
	}
	if (!first) {
		return DROP_KEPT;
	}
	if ((d = route_moved(s, i)) != DROP_NONE) {
		return d;
	}
	/* and c, still up but no longer the way to it, is told, as every link
	 * but the route is: its own way to the subscriber has gone, this one
	 * may be its only one */
	if (conn_state(c) == CONN_READY && tells(s, i->from[0], c, i)) {
		send_sub(c, i, true);
	}
	return DROP_MOVED;
}

/* Is this origin this node? */
static bool
is_own(const struct session *s, const struct ctl_str *origin)
{
	return origin->len == strlen(s->cfg->id) && memcmp(origin->p, s->cfg->id, origin->len) == 0;
}

/* Did i's own node send this on c? */
static bool
from_origin(const struct conn *c, const struct interest *i)
{
	return strcmp(c->peer_id, i->origin) == 0;
}

/*
 * i's subscription ended: its node closed it or left. `by` told this node
 * (its answer is ENDED_ACK), or is NULL when i is this node's own. Every
 * other link but the subscriber's own node is told ENDED. Such a link may
 * have declared i to this node just before it heard: so that a SUB still
 * on its way does not bring i back, i stays, ended and matching nothing,
 * until each of them has answered (ENDED or ENDED_ACK, which follow on the
 * same connection anything it sent before). Subscription ids are never
 * used twice, so i's SUB that comes later is always a stale one.
 */
static void
end_interest(struct session *s, struct interest *i, struct conn *by)
{
	struct ctl_str origin = cstr(i->origin);
	bool tracked = true;

	i->nfrom = 0;
	for (struct conn *c = loop_next_conn(s->loop, NULL); c != NULL;
	     c = loop_next_conn(s->loop, c)) {
		if (conn_state(c) != CONN_READY || from_origin(c, i) || !in_scope(s, c, i)) {
			continue; /* a client never told of it */
		}
		send_end(c, origin, i->sub_id, c == by ? CTL_UNSUB_ENDED_ACK : CTL_UNSUB_ENDED);
		if (c != by && i->local == NULL) {
			/* without memory for the answers it goes at once, and a
			 * stale SUB may bring it back */
			tracked &= route_from_add(i, c, 0);
		}
	}
	route_end(&s->routes, i);
	update_matching(s, i->keyexpr, i->ke_len, NULL);
	if (i->nfrom == 0 || !tracked) {
		route_remove(&s->routes, i);
	}
}

/* An answer to i's end came on c: c will not declare it again. */
static void
end_answered(struct session *s, struct interest *i, struct conn *c)
{
	if (route_from_remove(i, c) && i->nfrom == 0) {
		route_remove(&s->routes, i);
	}
}

/* ---- access control (acl.h): refusals sent and received ---- */

/* Tell the peer its declaration is refused, and log it. */
static void
acl_refuse(struct session *s, struct conn *c, int what, struct ctl_str name, uint64_t id,
           struct ctl_str key)
{
	struct ctl_msg d = {.type = CTL_DENY};
	const char *verb = what == CTL_DENY_SUB ? "subscribe to" : "publish on";
	char who[2 * CTL_ID_MAX + 32];
	char reason[CTL_TEXT_MAX];
	int n;

	if (c->identity[0] != '\0') {
		snprintf(who, sizeof(who), "%s (identity %s)", c->peer_id, c->identity);
	} else {
		snprintf(who, sizeof(who), "%s (no identity)", c->peer_id);
	}
	n = snprintf(reason, sizeof(reason), "access denied: %s '%.*s' by %s at %s", verb,
	             (int)key.len, key.p, who, s->cfg->id);
	log_line(s->log, TERN_LOG_WARN, "acl: refused to let %s from %s %s '%.*s'", who,
	         c->endpoint, verb, (int)key.len, key.p);
	d.u.deny.what = (uint64_t)what;
	d.u.deny.name = name;
	d.u.deny.id = id;
	d.u.deny.key = key;
	d.u.deny.reason.p = reason;
	d.u.deny.reason.len = n < 0                        ? 0
	                      : (size_t)n < sizeof(reason) ? (size_t)n
	                                                   : sizeof(reason) - 1;
	conn_send_ctl(c, &d);
}

/* A refused channel takes what arrives (its credit flows on) and drops it. */
static bool
refused_deliver(void *arg, void *from, uint64_t seq, uint64_t stamp, const uint8_t *data,
                size_t len, uint8_t **heap, bool whole)
{
	struct session *s = arg;

	(void)from, (void)seq, (void)stamp, (void)data, (void)len, (void)heap, (void)whole;
	COUNT(s->refused_in, 1);
	return true;
}

static bool
refused_forward(void *arg, void *from, const struct wire_frame *f, uint64_t seq,
                const uint8_t *payload)
{
	struct session *s = arg;

	(void)from, (void)seq, (void)payload;
	if (f->flags & WIRE_FLAG_FIRST) {
		COUNT(s->refused_in, 1);
	}
	return true;
}

static bool
refused_duplicate(void *arg, uint64_t seq)
{
	(void)arg, (void)seq;
	return false;
}

static void
refused_started(void *arg, uint64_t seq)
{
	(void)arg, (void)seq;
}

static bool
refused_wants_whole(void *arg)
{
	(void)arg;
	return false;
}

static const struct inchan_ops refused_inchan_ops = {.deliver = refused_deliver,
                                                     .forward = refused_forward,
                                                     .duplicate = refused_duplicate,
                                                     .started = refused_started,
                                                     .wants_whole = refused_wants_whole};

/* The first refusal wins; later ones change nothing. */
static void
refusal_set(struct refusal *r, int code, const struct ctl_str *reason)
{
	char *copy;

	if (atomic_load_explicit(&r->set, memory_order_relaxed) ||
	    (copy = strndup(reason->p, reason->len)) == NULL) {
		return;
	}
	r->code = code;
	r->reason = copy;
	atomic_store_explicit(&r->set, true, memory_order_release);
}

static int
refusal_error(struct refusal *r)
{
	if (!atomic_load_explicit(&r->set, memory_order_acquire)) {
		return 0;
	}
	return tern__error(r->code, "%s", r->reason);
}

/*
 * A peer refused a declaration of ours. A subscription: if it is local, its
 * subscriber learns it; if this node relayed it, the DENY goes back toward
 * its origin along the link it was first heard on. A channel: the local
 * publisher that opened it learns it (a relayed publisher is not told: the
 * refusing node drops what it sends, and logged it).
 */
static int
on_deny(struct session *s, struct conn *c, const struct ctl_msg *m)
{
	const struct ctl_str *reason = &m->u.deny.reason;

	if (m->u.deny.what == CTL_DENY_SUB) {
		struct interest *i =
		    route_find(&s->routes, m->u.deny.name.p, m->u.deny.name.len, m->u.deny.id);
		if (i == NULL || i->ended) {
			return 0;
		}
		if (i->local != NULL) {
			struct sink *k = i->local;
			refusal_set(&k->refusal, TERN_EACCES, reason);
			subq_fail(&k->q, TERN_EACCES);
		} else if (i->nfrom > 0 && i->from[0] != c &&
		           conn_state((struct conn *)i->from[0]) == CONN_READY) {
			conn_send_ctl(i->from[0], m);
		}
		log_line(s->log, TERN_LOG_INFO, "%s refused subscription '%.*s': %.*s", c->peer_id,
		         (int)m->u.deny.key.len, m->u.deny.key.p, (int)reason->len, reason->p);
		return 0;
	}
	for (struct src *src = s->pubs; src != NULL; src = src->next) {
		for (int k = 0; k < src->nouts; k++) {
			if (src->outs[k].conn == c && src->outs[k].oc->id == m->u.deny.id) {
				refusal_set(&local_of(src)->refusal, TERN_EACCES, reason);
				log_line(s->log, TERN_LOG_INFO,
				         "%s refused publisher on '%s': %.*s", c->peer_id, src->key,
				         (int)reason->len, reason->p);
				return 0;
			}
		}
	}
	return 0;
}

/*
 * Routes are taken by first arrival; a declaration that comes later by a
 * shorter way (a smaller count) takes over only while nothing this node
 * passed on can be under way on the old one. A message sent the new way
 * could overtake one still on the old way, and the subscriber's node,
 * which drops what it has seen by sequence number, would drop the older
 * one as a duplicate. So the move is made only if no source that meets i
 * has sent anything toward the old route; a local publisher (it publishes
 * on its own thread, while this runs) holds the route where it is.
 */
struct route_use {
	const struct conn *route;
	bool used;
};

static void
route_use_one(void *arg, void *val)
{
	struct route_use *u = arg;
	const struct src *src = val;

	u->used |= src->local;
	for (int k = 0; k < src->nouts && !u->used; k++) {
		const struct outchan *oc = src->outs[k].oc;
		/* a remote source's channels are fed on this thread: what they
		 * show is all that was queued (resumed frames set last_seq) */
		u->used = src->outs[k].conn == u->route &&
		          (oc->last_seq != 0 || atomic_load(&oc->messages) > 0);
	}
}

/* c declared i, which this node forwards: c's place in i->from if its way
 * is shorter than i's route and i may move onto it, else -1. */
static int
shorter_route(struct session *s, const struct interest *i, const struct conn *c)
{
	int f = route_from_index(i, c);
	struct route_use u = {.route = i->nfrom > 0 ? i->from[0] : NULL};

	if (i->local != NULL || f <= 0 || i->from_hops[f] >= i->from_hops[0]) {
		return -1;
	}
	ketree_visit(&s->srcs, i->keyexpr, i->ke_len, route_use_one, &u);
	return u.used ? -1 : f;
}

static int
on_sub(struct session *s, struct conn *c, const struct ctl_msg *m)
{
	const struct ctl_str *o = &m->u.sub.origin;
	struct interest *i;

	if (tern__key_check(m->u.sub.keyexpr.p, m->u.sub.keyexpr.len, true) != 0) {
		return tern__error(TERN_EPROTO, "peer declared a bad key expression: %s",
		                   tern_last_error());
	}
	if (is_own(s, o)) {
		return 0; /* our own subscription came back around */
	}
	if (!acl_allows(s->cfg, c->identity, ACL_SUB, m->u.sub.keyexpr.p, m->u.sub.keyexpr.len)) {
		acl_refuse(s, c, CTL_DENY_SUB, *o, m->u.sub.sub_id, m->u.sub.keyexpr);
		return 0; /* never in the table: nothing is forwarded to it for this */
	}
	i = route_find(&s->routes, o->p, o->len, m->u.sub.sub_id);
	if (i != NULL && i->ended) {
		return 0; /* sent before c heard it ended */
	}
	if (i != NULL) {
		int f = route_from_index(i, c);
		bool news = f < 0 || i->from_hops[f] != m->u.sub.hops;
		enum dropped d = DROP_NONE;
		if (!route_from_add(i, c, m->u.sub.hops)) {
			return TERN_ENOMEM;
		}
		if (i->local == NULL && i->from[0] == c) {
			d = recount(s, i);
		} else if ((f = shorter_route(s, i, c)) > 0) {
			/* every other link, the old route among them, hears the new count */
			route_from_first(i, f);
			d = route_moved(s, i);
		}
		if (d != DROP_NONE || (news && c->peer_router && i->from[0] != c)) {
			/* a new count here, or c's: the skip lists change */
			update_matching(s, i->keyexpr, i->ke_len, NULL);
		}
		if (d == DROP_GONE) {
			route_free(i);
		}
		return 0;
	}
	if (m->u.sub.hops >= MAX_HOPS) {
		return 0;
	}
	i = route_add(&s->routes, o->p, o->len, m->u.sub.sub_id, m->u.sub.keyexpr.p,
	              m->u.sub.keyexpr.len, m->u.sub.hops + 1);
	if (i == NULL || !route_from_add(i, c, m->u.sub.hops)) {
		if (i != NULL) {
			route_remove(&s->routes, i);
		}
		return TERN_ENOMEM;
	}
	spread(s, i, true, c);
	update_matching(s, i->keyexpr, i->ke_len, NULL);
	return 0;
}

static int
on_unsub(struct session *s, struct conn *c, const struct ctl_msg *m)
{
	const struct ctl_str *o = &m->u.sub.origin;
	struct interest *i = route_find(&s->routes, o->p, o->len, m->u.sub.sub_id);
	enum dropped d;

	if (is_own(s, o)) {
		return 0; /* our own, which we ended ourselves */
	}
	if (m->u.sub.end == CTL_UNSUB_ENDED && (i == NULL || !i->ended)) {
		if (i == NULL) {
			send_end(c, *o, m->u.sub.sub_id, CTL_UNSUB_ENDED_ACK);
		} else {
			end_interest(s, i, c);
		}
		return 0;
	}
	if (i == NULL) {
		return 0;
	}
	if (i->ended) {
		if (m->u.sub.end != CTL_UNSUB_WITHDRAWN) {
			end_answered(s, i, c);
		}
		return 0;
	}
	/* from its own node it ended, whatever the UNSUB says */
	if (from_origin(c, i)) {
		end_interest(s, i, c);
		return 0;
	}
	if ((d = drop_link(s, i, c)) == DROP_NONE) {
		return 0;
	}
	update_matching(s, i->keyexpr, i->ke_len, c); /* its route may have moved */
	if (d == DROP_GONE) {
		route_free(i);
	}
	return 0;
}

/* SCOPE or UNSCOPE */
static void
send_scope(struct conn *c, int type, const char *ke, size_t len)
{
	struct ctl_msg m = {.type = type};

	m.u.scope.p = ke;
	m.u.scope.len = len;
	conn_send_ctl(c, &m);
}

/*
 * c carries traffic: declare what c is to know, then SYNC. A client first
 * names its publishers' keys (their answers come before the SYNC it is
 * answered with); a client link is told nothing yet: its scope is empty
 * until its SCOPEs come, and its SYNC is answered then (on_synced).
 */
static void
on_ready(void *arg, struct conn *c)
{
	struct session *s = arg;
	struct ctl_msg sync = {.type = CTL_SYNC};

	if (c->peer_client) {
		return;
	}
	if (s->cfg->mode == TERN_MODE_CLIENT) {
		for (struct src *src = s->pubs; src != NULL; src = src->next) {
			send_scope(c, CTL_SCOPE, src->key, src->key_len);
		}
	}
	for (struct interest *i = s->routes.head; i != NULL; i = i->next) {
		if (declared_to(s, c, i)) {
			send_sub(c, i, true);
		}
	}
	conn_send_ctl(c, &sync);
	/* no route changes: nothing is routed toward c until it subscribes */
}

/* A client asks that its SCOPEs so far be answered: they were, in order. */
static void
on_synced(void *arg, struct conn *c)
{
	struct ctl_msg sync = {.type = CTL_SYNC};

	(void)arg;
	if (c->peer_client) {
		conn_send_ctl(c, &sync);
	}
}

struct scope_args {
	struct session *s;
	struct conn *c;
};

/* Tell the client of i if its scope did not meet i before. */
static void
scope_tell(void *arg, struct interest *i)
{
	struct scope_args *a = arg;

	if (declared_to(a->s, a->c, i) &&
	    !scope_meets(&a->s->scopes, a->c, i->keyexpr, i->ke_len)) {
		send_sub(a->c, i, true);
	}
}

/* Withdraw i from the client if its scope no longer meets it. */
static void
scope_untell(void *arg, struct interest *i)
{
	struct scope_args *a = arg;

	if (declared_to(a->s, a->c, i) &&
	    !scope_meets(&a->s->scopes, a->c, i->keyexpr, i->ke_len)) {
		send_sub(a->c, i, false);
	}
}

/*
 * A client names a key it publishes on (SCOPE): tell it the subscriptions
 * that meet it, and from now on those that come. Or it no longer
 * publishes on it (UNSCOPE): withdraw what its scope no longer meets.
 */
static int
on_scope(struct session *s, struct conn *c, const struct ctl_msg *m)
{
	struct scope_args a = {s, c};
	const struct ctl_str *ke = &m->u.scope;
	const char *what = m->type == CTL_SCOPE ? "SCOPE" : "UNSCOPE";

	if (!c->peer_client) {
		return tern__error(TERN_EPROTO, "%s from %s, which is not in client mode", what,
		                   c->peer_id);
	}
	if (tern__key_check(ke->p, ke->len, true) != 0) {
		return tern__error(TERN_EPROTO, "peer sent %s of a bad key expression: %s", what,
		                   tern_last_error());
	}
	if (m->type == CTL_UNSCOPE) {
		if (scope_remove(&s->scopes, c, ke->p, ke->len)) {
			route_visit(&s->routes, ke->p, ke->len, scope_untell, &a);
		}
		return 0;
	}
	if (scope_has(&s->scopes, c, ke->p, ke->len)) {
		return 0;
	}
	if (scope_full(&s->scopes, c)) { /* it becomes everything */
		for (struct interest *i = s->routes.head; i != NULL; i = i->next) {
			scope_tell(&a, i);
		}
	} else {
		route_visit(&s->routes, ke->p, ke->len, scope_tell, &a);
	}
	return scope_add(&s->scopes, c, ke->p, ke->len);
}

/* ---- delivery of remote messages (inchan ops, I/O thread) ---- */

static bool
skipped(const struct out *o, const struct conn *from)
{
	for (int k = 0; k < o->skip.n; k++) {
		if (o->skip.v[k] == from) {
			return true;
		}
	}
	return false;
}

static bool
onward(struct session *s, const struct out *o, const struct conn *from)
{
	return o->conn != from && conn_state(o->conn) == CONN_READY && carries(s, from, o->conn) &&
	       !skipped(o, from);
}

static bool
is_duplicate(void *arg, uint64_t seq)
{
	struct src *s = arg;

	return s->seen && seq <= s->last_seq;
}

static void
started(void *arg, uint64_t seq)
{
	struct src *s = arg;

	if (s->seen && seq > s->last_seq + 1) {
		for (int k = 0; k < s->nsubs; k++) {
			atomic_fetch_add(&s->subs[k]->missed, seq - s->last_seq - 1);
		}
		if (s->nsubs > 0) {
			COUNT(s->missed, seq - s->last_seq - 1);
		}
	}
	s->last_seq = seq;
	s->seen = true;
}

static bool
wants_whole(void *arg)
{
	struct src *s = arg;

	return s->nsubs > 0;
}

/* Room in every pull subscriber's queue, and for a reliable source in
 * every onward channel: a message goes to all of them or waits. */
static bool
room_everywhere(struct src *s, const struct conn *from, size_t len, bool whole)
{
	struct subq_src e = entry_src(s);
	bool big = len > SUBQ_INLINE_MAX;
	size_t entry = subq_entry_size(&e, len, big);

	for (int k = 0; k < s->nsubs; k++) {
		struct sink *sink = s->subs[k];
		if (sink->fn == NULL) {
			hold(sink);
			if (!subq_room(&sink->q, entry, big ? len : 0)) {
				return false;
			}
		}
	}
	if (!whole || s->reliability != TERN_RELIABLE) {
		return true;
	}
	for (int k = 0; k < s->nouts; k++) {
		if (onward(s->session, &s->outs[k], from) &&
		    !outchan_has_room(s->outs[k].oc, len)) {
			return false;
		}
	}
	return true;
}

/* A large message goes to a pull subscriber as a buffer of its own: each
 * gets a copy but the last, which takes the caller's buffer (its reader
 * may free it at once); without memory for a copy, it misses it. */
static void
push_pull(struct src *s, uint64_t seq, const uint8_t *data, size_t len, uint8_t **heap)
{
	struct subq_src e = entry_src(s);
	bool big = len > SUBQ_INLINE_MAX;
	bool can_take = big && heap != NULL && *heap != NULL;
	struct sink *taker = NULL;

	for (int k = 0; k < s->nsubs; k++) {
		struct sink *sink = s->subs[k];
		uint8_t *copy = NULL;
		if (sink->fn != NULL) {
			continue;
		}
		if (can_take && taker == NULL) {
			taker = sink;
			continue;
		}
		if (big && (copy = malloc(len)) == NULL) {
			atomic_fetch_add(&sink->missed, 1);
			continue;
		}
		if (copy != NULL) {
			memcpy(copy, data, len);
		}
		subq_push(&sink->q, &e, seq, data, len, copy);
		count_delivered(sink, len);
	}
	if (taker != NULL) {
		subq_push(&taker->q, &e, seq, data, len, *heap);
		count_delivered(taker, len);
		*heap = NULL;
	}
}

/*
 * A callback that publishes (a request/reply server) runs on the I/O thread,
 * which cannot wait for room. So where such publications have filled a
 * channel past a window's worth of unsent data, or a pull subscriber's
 * queue past half, the next message with a callback to run waits, in its
 * channel's backlog, until they drain: the requester is pushed back through
 * flow control instead of the replies being refused.
 */
static bool
out_congested(const struct outchan *oc)
{
	return outchan_unsent((struct outchan *)oc) > oc->link->peer_window &&
	       atomic_load(&oc->broken) == OUTCHAN_OK && !atomic_load(&oc->detached);
}

/* cap is read only once an entry was seen: the ring is allocated by the
 * first producer (subq.c). */
static bool
sink_congested(struct sink *k)
{
	size_t used = ring_used(&k->q.ring);

	return used > 0 && used > k->q.ring.cap / 2;
}

static bool
callbacks_may_run(struct src *s)
{
	struct session *ss = s->session;
	bool any = false;

	for (int k = 0; k < s->nsubs && !any; k++) {
		any = s->subs[k]->fn != NULL;
	}
	if (!any) {
		return true;
	}
	if (ss->congested_out != NULL && !out_congested(ss->congested_out)) {
		ss->congested_out = NULL;
	}
	if (ss->congested_sink != NULL && !sink_congested(ss->congested_sink)) {
		ss->congested_sink = NULL;
	}
	if (ss->congested_sink != NULL) {
		/* its reader wakes the I/O thread when it makes room */
		atomic_store(&ss->congested_sink->q.stalled, true);
	}
	return ss->congested_out == NULL && ss->congested_sink == NULL;
}

/* After a publication on the I/O thread: note what it filled. */
static void
note_congestion(struct session *ss, struct src *src)
{
	struct local_src *l = local_of(src);

	for (int k = 0; k < l->ncopy && ss->congested_out == NULL; k++) {
		if (out_congested(l->copy[k].oc)) {
			ss->congested_out = l->copy[k].oc;
		}
	}
	for (int k = 0; k < l->ncopy_subs && ss->congested_sink == NULL; k++) {
		struct sink *sink = l->copy_subs[k];
		if (sink->fn == NULL && sink_congested(sink)) {
			ss->congested_sink = sink;
		}
	}
}

/* A stamped message reached local subscribers: its publish-to-delivery
 * time goes into the source's histogram (stamp on this node's clock). */
static void
note_latency(struct src *s, uint64_t stamp)
{
	uint64_t now = clock_wall_us();

	if (s->lat == NULL) {
		if ((s->lat = malloc(sizeof(*s->lat))) == NULL) {
			return; /* no latency for this source; delivery goes on */
		}
		tern__hist_reset(s->lat);
	}
	tern__hist_add(s->lat, (now > stamp ? now - stamp : 0) * 1000u);
}

static bool
deliver(void *arg, void *from, uint64_t seq, uint64_t stamp, const uint8_t *data, size_t len,
        uint8_t **heap, bool whole)
{
	struct src *s = arg;
	struct session *ss = s->session;

	if (whole && is_duplicate(s, seq)) {
		return true;
	}
	if (!callbacks_may_run(s) || !room_everywhere(s, from, len, whole)) {
		return false;
	}
	if (whole) {
		started(s, seq);
	}
	if (stamp != 0) {
		stamp = conn_local_stamp(from, stamp);
	}
	if (s->nsubs > 0) {
		COUNT(s->messages, 1);
		COUNT(s->bytes, len);
		if (stamp != 0) {
			note_latency(s, stamp);
		}
	}
	push_pull(s, seq, data, len, heap);
	if (whole) {
		for (int k = 0; k < s->nouts; k++) {
			if (onward(ss, &s->outs[k], from)) {
				outchan_send_stamped(s->outs[k].oc, seq, stamp, data, len, false,
				                     NULL);
			}
		}
	}
	/* callbacks last: one that publishes releases the queues held above */
	for (int k = 0; k < s->nsubs; k++) {
		if (s->subs[k]->fn != NULL) {
			sink_call(s->subs[k], s, seq, data, len);
		}
	}
	COUNT(ss->messages_in, 1);
	COUNT(ss->bytes_in, len);
	return true;
}

static bool
forward(void *arg, void *from, const struct wire_frame *f, uint64_t seq, const uint8_t *payload)
{
	struct src *s = arg;
	bool reliable = s->reliability == TERN_RELIABLE;
	struct wire_frame g;

	if (f->flags & WIRE_FLAG_STAMP) {
		/* the next hop reads the stamp on this node's clock */
		g = *f;
		g.stamp = conn_local_stamp(from, f->stamp);
		f = &g;
	}

	if (reliable) {
		for (int k = 0; k < s->nouts; k++) {
			if (onward(s->session, &s->outs[k], from) &&
			    !outchan_forward_room(s->outs[k].oc, f)) {
				return false;
			}
		}
	}
	for (int k = 0; k < s->nouts; k++) {
		if (onward(s->session, &s->outs[k], from)) {
			outchan_forward(s->outs[k].oc, f, seq, payload, !reliable);
		}
	}
	return true;
}

static const struct inchan_ops src_inchan_ops = {.deliver = deliver,
                                                 .forward = forward,
                                                 .duplicate = is_duplicate,
                                                 .started = started,
                                                 .wants_whole = wants_whole};

/* ---- channels of a source (outchan ops) ---- */

/* Wake a publisher waiting for room. The fence orders the change that made
 * room (a release store to a ring's head) before the look at `waiters`; the
 * waiter increments `waiters` before it looks at the room: one of the two
 * sees the other. */
static void
src_wake(void *arg)
{
	struct src *s = arg;
	struct local_src *l;

	if (!s->local) {
		return;
	}
	l = local_of(s);
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load(&s->waiters) > 0) {
		pthread_mutex_lock(&l->wait_lock);
		pthread_cond_broadcast(&l->wait_cond);
		pthread_mutex_unlock(&l->wait_lock);
	}
}

static void
src_queued(void *owner, struct outchan *oc, size_t len, bool before)
{
	struct src *s = oc->arg;

	if (before) {
		writer_before_put(s->session->loop, owner, oc, len);
	} else {
		writer_after_put(s->session->loop, owner, oc);
	}
}

/* A local source's channels are produced under its send_lock; a remote
 * source's by the I/O thread, which is the caller. */
static bool
src_hold(void *arg)
{
	struct src *s = arg;

	return !s->local || pthread_mutex_trylock(&local_of(s)->send_lock) == 0;
}

static void
src_unhold(void *arg)
{
	struct src *s = arg;

	if (s->local) {
		pthread_mutex_unlock(&local_of(s)->send_lock);
	}
}

static const struct outchan_ops src_outchan_ops = {
    .wake = src_wake, .queued = src_queued, .hold = src_hold, .unhold = src_unhold};

/* ---- routes ---- */

/* The interests a key meets give the route: the local subscribers, and
 * the connections their first-heard links go through (s->want), each with
 * the routers that declared all of the interests it serves. */
struct want_args {
	struct session *s;
	struct src *src;
};

/* Did router c declare i here at a count that keeps its route off this
 * node? A route through here would count at least one more than i's. */
static bool
around(const struct interest *i, int f)
{
	return f > 0 && ((const struct conn *)i->from[f])->peer_router &&
	       i->from_hops[f] <= i->hops;
}

/* The routers other than its route that declared i around this node. */
static void
skip_init(struct skip *k, const struct interest *i)
{
	k->n = 0;
	for (int f = 1; f < i->nfrom && k->n < SKIP_MAX; f++) {
		if (around(i, f)) {
			k->v[k->n++] = i->from[f];
		}
	}
}

/* Keep only the routers that declared i around this node too. */
static void
skip_meet(struct skip *k, const struct interest *i)
{
	uint8_t n = 0;

	for (int a = 0; a < k->n; a++) {
		if (around(i, route_from_index(i, k->v[a]))) {
			k->v[n++] = k->v[a];
		}
	}
	k->n = n;
}

static void
want_one(void *arg, struct interest *i)
{
	struct want_args *a = arg;
	struct session *s = a->s;

	if (i->local != NULL) {
		push_ptr((void ***)&a->src->subs, &a->src->nsubs, &a->src->subs_cap, i->local);
	}
	if (i->nfrom > 0) {
		for (int k = 0; k < s->nwant; k++) {
			if (s->want[k].conn == i->from[0]) {
				skip_meet(&s->want[k].skip, i);
				return;
			}
		}
		if (room_for((void **)&s->want, s->nwant, &s->want_cap, sizeof(*s->want))) {
			s->want[s->nwant].conn = i->from[0];
			skip_init(&s->want[s->nwant++].skip, i);
		}
	}
}

static const struct want *
wanted(const struct session *s, const struct conn *c)
{
	for (int k = 0; k < s->nwant; k++) {
		if (s->want[k].conn == c) {
			return &s->want[k];
		}
	}
	return NULL;
}

static void
route_lock(struct src *s)
{
	if (s->local) {
		pthread_mutex_lock(&local_of(s)->route_lock);
	}
}

static void
route_unlock(struct src *s)
{
	if (s->local) {
		pthread_mutex_unlock(&local_of(s)->route_lock);
	}
}

/* A channel leaves the route: a broken connection (not a goodbye, not a
 * slow consumer we dropped) is expected back, so what it had not consumed
 * is kept; what a dropped peer had not consumed is lost, and counted. So is
 * what a peer that withdrew had not consumed: its route may be back at
 * once (a route that moves is withdrawn, then declared again), and what
 * was under way then goes on the new channel. */
static void
out_close(struct session *s, struct src *src, struct out *o)
{
	struct conn *c = o->conn;
	bool broken = conn_state(c) == CONN_DEAD;

	if (o->oc->retain && !loop_closing(s->loop) &&
	    ((broken && !c->said_goodbye && !atomic_load(&c->kill)) || (!broken && o->withdrawn))) {
		size_t kept = park_keep(&src->parked, c->peer_id, o->oc,
		                        clock_ms() + s->cfg->slow_consumer_ms, !broken);
		if (kept > 0) {
			log_line(s->log, TERN_LOG_DEBUG, "keeping %zu bytes of '%s' for %s", kept,
			         src->key, c->peer_id);
		}
		note_parked(s, src);
	} else if (broken && o->oc->retain && atomic_load(&c->kill)) {
		COUNT(*undelivered_of(s, src), frames_messages(&o->oc->ring));
	}
	if (s->congested_out == o->oc) {
		s->congested_out = NULL;
	}
	conn_close_outchan(c, o->oc, true);
}

/* No channel to c, which wants src's key: what src publishes does not reach
 * it. A reliable local publisher learns it (tern_publish and tern_pub_close
 * fail from now on); the reason is tern_last_error() of the failed open. */
static void
out_failed(struct session *s, struct src *src, struct conn *c)
{
	char why[CTL_TEXT_MAX];
	struct ctl_str reason = {.p = why};

	reason.len = (size_t)snprintf(why, sizeof(why), "no channel to %s for '%s': %s", c->peer_id,
	                              src->key, tern_last_error());
	if (reason.len >= sizeof(why)) {
		reason.len = sizeof(why) - 1;
	}
	log_line(s->log, TERN_LOG_WARN, "%s", why);
	if (src->local && src->reliability == TERN_RELIABLE) {
		refusal_set(&local_of(src)->refusal, TERN_ENOMEM, &reason);
	}
}

static void
out_open(struct session *s, struct src *src, const struct want *w)
{
	struct conn *c = w->conn;
	struct ctl_msg open = {.type = CTL_OPEN};
	struct outchan *oc;
	uint64_t dropped = 0;
	int resent;

	open.u.open.publisher.p = src->publisher;
	open.u.open.publisher.len = src->publisher_len;
	open.u.open.key.p = src->key;
	open.u.open.key.len = src->key_len;
	open.u.open.reliability = (uint64_t)src->reliability;
	open.u.open.instance = src->instance;
	oc = conn_open_outchan(c, &open, src->reliability == TERN_RELIABLE, &src_outchan_ops, src);
	if (oc == NULL) {
		out_failed(s, src, c);
		return;
	}
	if (!push_out(src, oc, w)) {
		conn_close_outchan(c, oc, true);
		tern__error(TERN_ENOMEM, "out of memory");
		out_failed(s, src, c);
		return;
	}
	resent = park_resume(&src->parked, c->peer_id, oc, &dropped);
	if (resent >= 0) {
		conn_mark_pending(c);
		log_line(s->log, TERN_LOG_INFO, "resuming '%s' with %s: %d messages sent again%s",
		         src->key, c->peer_id, resent,
		         dropped ? " (some did not fit and are missed)" : "");
		COUNT(*undelivered_of(s, src), dropped);
	}
}

static bool
has_out(const struct src *src, const struct conn *c)
{
	for (int k = 0; k < src->nouts; k++) {
		if (src->outs[k].conn == c) {
			return true;
		}
	}
	return false;
}

/* A channel to c's peer on an earlier connection is still on the route,
 * waiting for the publisher to let go before it closes: what it kept is
 * parked only then. A channel opened on c before that would start without
 * it, and the peer would miss what the broken connection lost. */
static bool
closing_to_peer(const struct src *src, const struct conn *c)
{
	for (int k = 0; k < src->nouts; k++) {
		const struct conn *o = src->outs[k].conn;
		if (o != c && atomic_load(&src->outs[k].oc->detached) &&
		    strcmp(o->peer_id, c->peer_id) == 0) {
			return true;
		}
	}
	return false;
}

/* Bring a source's route up to date (I/O thread). Channels a publisher may
 * still be using stay, detached, until it is done. withdrawn_by: the
 * connection whose UNSUB (withdrawn) is being applied, or NULL. */
static void
src_update(struct session *s, struct src *src, const struct conn *withdrawn_by)
{
	struct want_args wa = {s, src};

	route_lock(src);
	atomic_fetch_add(&src->gen, 1); /* first: a publisher that misses it is seen inside */
	atomic_store(&src->update_due, false);
	src->nsubs = 0;
	s->nwant = 0;
	route_visit(&s->routes, src->key, src->key_len, want_one, &wa);
	for (int k = 0; k < src->nouts;) {
		struct out *o = &src->outs[k];
		const struct want *w = wanted(s, o->conn);
		if (conn_state(o->conn) == CONN_READY && w != NULL) {
			o->skip = w->skip;
			k++;
			continue;
		}
		if (!atomic_exchange(&o->oc->detached, true)) {
			o->withdrawn = o->conn == withdrawn_by;
		}
		if (atomic_load(&src->inside)) {
			atomic_store(&src->update_due, true);
			s->updates_due = true;
			k++;
			continue;
		}
		out_close(s, src, o);
		src->outs[k] = src->outs[--src->nouts];
	}
	/* update_due is set while a closing channel waits: this runs again */
	for (int k = 0; k < s->nwant; k++) {
		struct conn *c = s->want[k].conn;
		if (conn_state(c) == CONN_READY && !has_out(src, c) && !closing_to_peer(src, c)) {
			out_open(s, src, &s->want[k]);
		}
	}
	atomic_store(&src->has_parked, src->parked != NULL);
	route_unlock(src);
	src_wake(src); /* a publisher waiting on a detached channel gives up on it */
}

struct update_args {
	struct session *s;
	const struct conn *withdrawn_by;
};

static void
update_one(void *arg, void *val)
{
	struct update_args *a = arg;

	src_update(a->s, val, a->withdrawn_by);
}

/* Bring up to date the route of every source whose key meets ke: what a
 * subscription that comes, goes or moves changes. */
static void
update_matching(struct session *s, const char *ke, size_t ke_len, const struct conn *withdrawn_by)
{
	struct update_args a = {s, withdrawn_by};

	ketree_visit(&s->srcs, ke, ke_len, update_one, &a);
}

/* Bring up to date the route of every source, local and remote (a
 * releasing one too), reserved keys included. */
static void
update_all(struct session *s)
{
	for (struct src *src = s->pubs; src != NULL; src = src->next) {
		src_update(s, src, NULL);
	}
	for (struct src *src = s->remote; src != NULL; src = src->next) {
		src_update(s, src, NULL);
	}
}

static void
src_link(struct src **head, struct src *src)
{
	src->prev = NULL;
	src->next = *head;
	if (*head != NULL) {
		(*head)->prev = src;
	}
	*head = src;
}

static void
src_unlink(struct src **head, struct src *src)
{
	if (src->prev != NULL) {
		src->prev->next = src->next;
	} else {
		*head = src->next;
	}
	if (src->next != NULL) {
		src->next->prev = src->prev;
	}
	src->next = src->prev = NULL;
}

/* A source keeps frames for an absent peer: the tick looks at it. */
static void
note_parked(struct session *s, struct src *src)
{
	if (src->parked != NULL && !src->parked_noted &&
	    push_ptr((void ***)&s->parked_v, &s->nparked, &s->parked_cap, src)) {
		src->parked_noted = true;
	}
}

static void
forget_parked(struct session *s, struct src *src)
{
	for (int k = 0; src->parked_noted && k < s->nparked; k++) {
		if (s->parked_v[k] == src) {
			s->parked_v[k] = s->parked_v[--s->nparked];
			src->parked_noted = false;
		}
	}
}

/* Route changes that waited for a publisher. */
static bool
run_due_updates(struct session *s)
{
	bool any = false;

	if (!s->updates_due) {
		return false;
	}
	s->updates_due = false;
	for (struct src *src = s->pubs; src != NULL; src = src->next) {
		if (atomic_load(&src->update_due)) {
			src_update(s, src, NULL);
			any = true;
		}
	}
	return any;
}

static void
src_clear(struct src *src)
{
	park_free_all(&src->parked);
	for (int k = 0; k < src->nouts; k++) {
		if (src->session->congested_out == src->outs[k].oc) {
			src->session->congested_out = NULL;
		}
		conn_close_outchan(src->outs[k].conn, src->outs[k].oc, true);
	}
	if (src->local) { /* a remote source's strings are part of it */
		struct local_src *l = local_of(src);
		free(l->copy);
		free(l->copy_subs);
		free(l->refusal.reason);
		l->copy = NULL;
		l->copy_subs = NULL;
		l->refusal.reason = NULL;
		free(src->key);
		free(src->publisher);
	}
	if (src->outs != &src->out1) {
		free(src->outs);
	}
	free(src->subs);
	free(src->lat);
	src->lat = NULL;
	src->outs = NULL;
	src->outs_cap = 0;
	src->subs = NULL;
	src->nouts = src->nsubs = 0;
}

static uint64_t
remote_hash(const char *publisher, size_t len, uint64_t instance)
{
	return hmap_hash(publisher, len, hmap_hash_u64(instance));
}

static bool
remote_eq(const void *val, const void *key)
{
	const struct src *src = val;
	const struct ctl_msg *m = key;
	const struct ctl_str *p = &m->u.open.publisher;

	return src->instance == m->u.open.instance && src->publisher_len == p->len &&
	       memcmp(src->publisher, p->p, p->len) == 0;
}

/* Its place in remote_ids (computed again, not kept: a router holds a
 * remote source a key). */
static uint64_t
src_hash(const struct src *src)
{
	return remote_hash(src->publisher, src->publisher_len, src->instance);
}

static struct src *
remote_find(struct session *s, const struct ctl_msg *m)
{
	const struct ctl_str *p = &m->u.open.publisher;

	return hmap_find(&s->remote_ids, remote_hash(p->p, p->len, m->u.open.instance), remote_eq,
	                 m);
}

static struct src *
remote_new(struct session *s, const struct ctl_msg *m)
{
	const struct ctl_str *key = &m->u.open.key, *publisher = &m->u.open.publisher;
	/* the strings after the struct: one allocation a key, not three */
	struct src *src = calloc(1, sizeof(*src) + key->len + 1 + publisher->len + 1);

	if (src == NULL) {
		return NULL;
	}
	src->session = s;
	src->key = (char *)(src + 1);
	memcpy(src->key, key->p, key->len);
	src->key_len = key->len;
	src->publisher = src->key + key->len + 1;
	memcpy(src->publisher, publisher->p, publisher->len);
	src->publisher_len = publisher->len;
	src->instance = m->u.open.instance;
	src->reliability =
	    m->u.open.reliability == TERN_BEST_EFFORT ? TERN_BEST_EFFORT : TERN_RELIABLE;
	if (!hmap_put(&s->remote_ids, src_hash(src), src)) {
		src_clear(src);
		free(src);
		return NULL;
	}
	if (ketree_add(&s->srcs, src->key, src->key_len, src) != 0) {
		hmap_del(&s->remote_ids, src_hash(src), src);
		src_clear(src);
		free(src);
		return NULL;
	}
	src_link(&s->remote, src);
	return src;
}

/*
 * A publisher closed its channel (CLOSE, not a broken link): when none is
 * left open for its source and nothing is kept for an absent peer, the
 * source goes, so the memory of keys that come and go returns. A link
 * that breaks leaves the source (and the highest number it delivered, which
 * drops what a resume sends twice).
 */
static bool
drained_out(const struct src *src)
{
	if (src->parked != NULL) {
		return false;
	}
	for (int k = 0; k < src->nouts; k++) {
		if (ring_used(&src->outs[k].oc->ring) > 0 &&
		    conn_state(src->outs[k].conn) == CONN_READY) {
			return false;
		}
	}
	return true;
}

static void
remote_free(struct session *s, struct src *src)
{
	src_unlink(&s->remote, src);
	hmap_del(&s->remote_ids, src_hash(src), src);
	ketree_remove(&s->srcs, src->key, src->key_len, src);
	forget_parked(s, src);
	src_clear(src);
	free(src);
}

static void
remote_release(struct session *s, struct src *src)
{
	if (--src->nin > 0) {
		return;
	}
	if (drained_out(src)) {
		remote_free(s, src);
		return;
	}
	/* what it queued onward is still on its way: the tick frees it after */
	src->releasing = true;
	if (!src->parked_noted &&
	    push_ptr((void ***)&s->parked_v, &s->nparked, &s->parked_cap, src)) {
		src->parked_noted = true;
	}
}

static int
on_open(struct session *s, struct conn *c, const struct ctl_msg *m)
{
	struct src *src;
	int rc;

	if (tern__key_check(m->u.open.key.p, m->u.open.key.len, false) != 0) {
		return tern__error(TERN_EPROTO, "peer opened a channel with a bad key: %s",
		                   tern_last_error());
	}
	if (!acl_allows(s->cfg, c->identity, ACL_PUB, m->u.open.key.p, m->u.open.key.len)) {
		/* the channel exists (its id is taken) but feeds nothing */
		if ((rc = conn_open_inchan(c, m->u.open.channel, &refused_inchan_ops, s)) != 0) {
			return rc;
		}
		acl_refuse(s, c, CTL_DENY_OPEN, m->u.open.publisher, m->u.open.channel,
		           m->u.open.key);
		return 0;
	}
	src = remote_find(s, m);
	if (src != NULL && (src->key_len != m->u.open.key.len ||
	                    memcmp(src->key, m->u.open.key.p, src->key_len) != 0)) {
		return tern__error(TERN_EPROTO, "publisher %s changed its key", src->publisher);
	}
	if (src == NULL && (src = remote_new(s, m)) == NULL) {
		return TERN_ENOMEM;
	}
	if ((rc = conn_open_inchan(c, m->u.open.channel, &src_inchan_ops, src)) != 0) {
		return rc;
	}
	src->nin++;
	src->releasing = false;
	src_update(s, src, NULL);
	return 0;
}

static int
on_control(void *arg, struct conn *c, const struct ctl_msg *m)
{
	struct session *s = arg;

	/* routing changes take route locks, which come after a subscriber
	 * queue's in the lock order: let go of those held for this read */
	release_held(s);
	switch (m->type) {
	case CTL_SUB:
		return on_sub(s, c, m);
	case CTL_UNSUB:
		return on_unsub(s, c, m);
	case CTL_OPEN:
		return on_open(s, c, m);
	case CTL_DENY:
		return on_deny(s, c, m);
	case CTL_SCOPE:
	case CTL_UNSCOPE:
		return on_scope(s, c, m);
	case CTL_CLOSE: {
		struct inchan *in = conn_inchan(c, m->u.credit.channel);
		if (in != NULL) {
			/* a channel the acl refused feeds the session, not a source */
			bool refused = in->ops == &refused_inchan_ops;
			struct src *src = in->arg;
			conn_close_inchan(c, in);
			if (!refused) {
				remote_release(s, src);
			}
		}
		return 0;
	}
	default:
		return tern__error(TERN_EPROTO, "unexpected control message %d", m->type);
	}
}

static void
on_gone(void *arg, struct conn *c)
{
	struct session *s = arg;
	struct interest *i = s->routes.head;
	struct interest **moved = NULL;
	struct src **srcs = NULL;
	int nmoved = 0, moved_cap = 0, nsrcs = 0, srcs_cap = 0;
	bool every = false;

	while (i != NULL) {
		struct interest *next = i->next;
		/* routed here: the sources that send here are updated below */
		bool here = i->nfrom > 0 && i->from[0] == c;
		enum dropped d;

		if (i->ended) {
			end_answered(s, i, c);
			i = next;
			continue;
		}
		if (c->said_goodbye && from_origin(c, i)) {
			/* its node left on purpose: it ended, as with its UNSUB */
			end_interest(s, i, c);
			i = next;
			continue;
		}
		d = drop_link(s, i, c);
		if (d == DROP_GONE) {
			if (!here) {
				update_matching(s, i->keyexpr, i->ke_len, NULL);
			}
			route_free(i);
		} else if (d == DROP_MOVED || (d == DROP_KEPT && c->peer_router)) {
			/* moved, or c leaves skip lists; without memory to note
			 * it, every source is brought up to date below (a skip
			 * list must not name a connection that is gone) */
			every |= !push_ptr((void ***)&moved, &nmoved, &moved_cap, i);
		}
		i = next;
	}
	for (uint32_t k = 0; k < c->ins.cap; k++) {
		/* a channel with a backlog stays until it is delivered */
		struct inchan *in = conn_inchan(c, k);
		if (in != NULL && !in->stalled) {
			conn_close_inchan(c, in);
		}
	}
	/* the sources that send here close their channels to it */
	pthread_mutex_lock(&c->wlock);
	for (int k = 0; k < c->nout; k++) {
		push_ptr((void ***)&srcs, &nsrcs, &srcs_cap, c->outv[k]->arg);
	}
	pthread_mutex_unlock(&c->wlock);
	for (int k = 0; k < nsrcs; k++) {
		src_update(s, srcs[k], NULL);
	}
	for (int k = 0; k < nmoved && !every; k++) {
		update_matching(s, moved[k]->keyexpr, moved[k]->ke_len, NULL);
	}
	if (every) {
		update_all(s);
	}
	scope_forget(&s->scopes, c);
	free(srcs);
	free(moved);
}

static void
expire_parked(struct session *s, struct src *src, uint64_t now)
{
	struct parked *p;

	route_lock(src);
	while ((p = park_expired(&src->parked, now)) != NULL) {
		uint64_t lost = frames_messages(&p->ring) + p->dropped;
		if (src->local && !p->withdrawn) {
			COUNT(src->undelivered, lost);
			log_line(s->log, TERN_LOG_WARN,
			         "%s did not come back: %llu messages of '%s' kept for it are lost",
			         p->peer_id, (unsigned long long)lost, src->key);
		} else if (!p->withdrawn && lost > 0) {
			/* a relay: its publisher, further back, is not told (reliability
			 * is per link), so this line and the node's count are the only
			 * trace of the loss */
			COUNT(s->undelivered, lost);
			log_line(s->log, TERN_LOG_WARN,
			         "%s did not come back: %llu messages of '%s' from %.*s, relayed "
			         "here and kept for it, are lost",
			         p->peer_id, (unsigned long long)lost, src->key,
			         (int)src->publisher_len, src->publisher);
		}
		park_free(p);
	}
	atomic_store(&src->has_parked, src->parked != NULL);
	route_unlock(src);
}

static bool
on_tick(void *arg, uint64_t now)
{
	struct session *s = arg;
	bool kept = false;

	for (int k = 0; k < s->nparked;) {
		struct src *src = s->parked_v[k];
		if (src->parked != NULL) {
			expire_parked(s, src, now);
		}
		bool release = src->releasing && src->nin == 0 && drained_out(src);
		if ((src->parked == NULL && !src->releasing) || release) {
			src->parked_noted = false;
			s->parked_v[k] = s->parked_v[--s->nparked];
			if (release) {
				remote_free(s, src);
			}
			continue;
		}
		kept = true;
		k++;
	}
	return kept || s->updates_due;
}

static bool
on_round(void *arg)
{
	struct session *s = arg;

	release_held(s);
	return run_due_updates(s);
}

static const struct loop_ops session_loop_ops = {.ready = on_ready,
                                                 .synced = on_synced,
                                                 .control = on_control,
                                                 .gone = on_gone,
                                                 .tick = on_tick,
                                                 .round = on_round};

/* ---- the publish path ---- */

/* Copy the route for this publication (only when it changed) and mark the
 * source as used from the copy. Caller holds route_lock. */
static int
take_copy(struct src *src)
{
	struct local_src *l = local_of(src);

	if (!l->copied || l->copy_gen != atomic_load(&src->gen)) {
		if (l->copy_cap < src->nouts || l->copy_subs_cap < src->nsubs) {
			int cap = src->nouts > src->nsubs ? src->nouts : src->nsubs;
			struct out *o = realloc(l->copy, (size_t)cap * sizeof(*o));
			struct sink **k =
			    o ? realloc(l->copy_subs, (size_t)cap * sizeof(*k)) : NULL;
			if (o != NULL) {
				l->copy = o;
			}
			if (k == NULL) {
				return TERN_ENOMEM;
			}
			l->copy_subs = k;
			l->copy_cap = l->copy_subs_cap = cap;
		}
		if (src->nouts > 0) {
			memcpy(l->copy, src->outs, (size_t)src->nouts * sizeof(*src->outs));
		}
		if (src->nsubs > 0) {
			memcpy(l->copy_subs, src->subs, (size_t)src->nsubs * sizeof(*src->subs));
		}
		l->ncopy = src->nouts;
		l->ncopy_subs = src->nsubs;
		l->copy_gen = atomic_load(&src->gen);
		l->copied = true;
	}
	atomic_store(&src->inside, true);
	return 0;
}

static void
leave_copy(struct src *src)
{
	atomic_store(&src->inside, false);
	if (atomic_load(&src->update_due)) {
		loop_wake(src->session->loop);
	}
}

static uint64_t
deadline_of(struct src *src, uint64_t *deadline)
{
	if (*deadline == 0) {
		*deadline = clock_ms() + src->session->cfg->publish_timeout_ms;
	}
	return *deadline;
}

struct wait_ctx {
	struct src *src;
	uint64_t *deadline;
	bool io; /* on the I/O thread: never wait */
};

/*
 * Wait until oc has room for len bytes. False on the publish deadline, or
 * a detached or broken channel (the I/O thread drops a peer that has taken
 * nothing for slow_consumer_ms, which ends this wait). On the I/O thread
 * (a callback publishing) nothing can make room but this thread: the queue
 * grows within queue.max_bytes instead, or the message is refused.
 */
static bool
wait_room(void *ctx, struct outchan *oc, size_t len)
{
	struct wait_ctx *w = ctx;
	struct src *src = w->src;
	struct local_src *l = local_of(src);
	struct timespec ts;
	bool room;

	uint64_t t0;

	if (w->io) {
		return outchan_room_or_grow(oc, len, true);
	}
	t0 = clock_us();
	atomic_fetch_add(&src->waiters, 1);
	while (!(room = outchan_room_or_grow(oc, len, false))) {
		if (atomic_load(&oc->detached) || atomic_load(&oc->broken) != OUTCHAN_OK ||
		    clock_ms() >= deadline_of(src, w->deadline)) {
			break;
		}
		/* a stalled peer is queued for after a while: look again */
		ts = clock_deadline_in(WAIT_RECHECK_MS);
		pthread_mutex_lock(&l->wait_lock);
		if (!outchan_has_space(oc, len)) {
			pthread_cond_timedwait(&l->wait_cond, &l->wait_lock, &ts);
		}
		pthread_mutex_unlock(&l->wait_lock);
	}
	atomic_fetch_sub(&src->waiters, 1);
	/* several threads may publish on one source, one at a time: an atomic
	 * add, not COUNT */
	atomic_fetch_add_explicit(&src->blocked_us, clock_since(clock_us(), t0),
	                          memory_order_relaxed);
	return room && !atomic_load(&oc->detached);
}

/* Peers whose connection broke under a publication that their kept queue
 * could not take yet. */
struct dying {
	int n;
	char peer[DYING_MAX][CTL_ID_MAX + 1];
	struct outchan *oc[DYING_MAX];
};

static void
note_dying(struct dying *d, const struct out *o)
{
	if (d->n < DYING_MAX) {
		snprintf(d->peer[d->n], sizeof(d->peer[0]), "%s", o->conn->peer_id);
		d->oc[d->n++] = o->oc;
	}
}

static bool
all_parked(struct src *src, const struct dying *d)
{
	for (int k = 0; k < src->nouts; k++) {
		for (int i = 0; i < d->n; i++) {
			if (src->outs[k].oc == d->oc[i]) {
				return false;
			}
		}
	}
	return true;
}

/* Wait (outside the copy) until the I/O thread has put the broken channels
 * aside for a resume, then add this publication to what it kept. */
static void
keep_for_dying(struct src *src, struct dying *d, uint64_t seq, const uint8_t *data, size_t len,
               uint64_t *deadline)
{
	struct local_src *l = local_of(src);

	for (;;) {
		pthread_mutex_lock(&l->route_lock);
		bool gone = all_parked(src, d);
		if (gone || clock_ms() >= deadline_of(src, deadline)) {
			break;
		}
		pthread_mutex_unlock(&l->route_lock);
		struct timespec ts = {0, 500000};
		nanosleep(&ts, NULL);
	}
	for (int i = 0; i < d->n; i++) {
		if (park_room(src->parked, len, src->session->cfg->queue_max_bytes)) {
			park_append(src->parked, d->peer[i], seq, data, len);
		} else {
			COUNT(src->undelivered, 1);
		}
	}
	pthread_mutex_unlock(&l->route_lock);
}

/* Is a message of len bytes held back by a peer that lost its connection
 * and is expected back (its queue, kept for the resume, is full)? Caller
 * holds route_lock. */
static bool
peer_away_full(struct src *src, size_t len)
{
	for (int k = 0; k < src->nouts; k++) {
		struct outchan *oc = src->outs[k].oc;
		if (oc->retain && atomic_load(&oc->broken) == OUTCHAN_LOST &&
		    !outchan_has_space(oc, len)) {
			return true;
		}
	}
	return src->parked != NULL && len <= 65536 &&
	       !park_room(src->parked, len, src->session->cfg->queue_max_bytes);
}

/*
 * Start a publication: a reliable one waits while a reconnecting peer's
 * queue is full, without holding the route. Then, under one hold of the
 * route lock, the message is numbered, added to what is kept for absent
 * peers, and the route copied: a channel the I/O thread puts aside in
 * between would otherwise miss it.
 */
/* The copy is current, nothing is kept for absent peers and no channel
 * waits for its peer to come back: the common case needs no lock. */
static bool
copy_current(struct src *src)
{
	struct local_src *l = local_of(src);

	atomic_store(&src->inside, true);
	if (!l->copied || l->copy_gen != atomic_load(&src->gen) || atomic_load(&src->has_parked) ||
	    atomic_load(&src->update_due)) {
		return false;
	}
	for (int k = 0; k < l->ncopy; k++) {
		if (atomic_load_explicit(&l->copy[k].oc->broken, memory_order_relaxed) ==
		    OUTCHAN_LOST) {
			return false;
		}
	}
	return true;
}

static int
begin(struct src *src, const uint8_t *data, size_t len, bool io, uint64_t *deadline, uint64_t *seq)
{
	struct local_src *l = local_of(src);
	int rc;

	if (copy_current(src)) {
		*seq = ++l->seq;
		return 0;
	}
	/* waiting below must not keep the I/O thread from putting channels aside;
	 * one that waits for this publisher to let go gets its turn first, or a
	 * publisher that never pauses would hold the change off for ever */
	atomic_store(&src->inside, false);
	for (int i = 0; !io && atomic_load(&src->update_due) && i < 2000; i++) {
		struct timespec ts = {0, 50000};
		loop_wake(src->session->loop);
		nanosleep(&ts, NULL);
	}
	pthread_mutex_lock(&l->route_lock);
	while (src->reliability == TERN_RELIABLE && !io && peer_away_full(src, len) &&
	       clock_ms() < deadline_of(src, deadline)) {
		struct timespec ts = {0, 1000000};
		pthread_mutex_unlock(&l->route_lock);
		nanosleep(&ts, NULL);
		pthread_mutex_lock(&l->route_lock);
	}
	if ((rc = take_copy(src)) == 0) {
		*seq = ++l->seq;
		if (src->parked != NULL) {
			park_append(src->parked, NULL, *seq, data, len);
		}
	}
	pthread_mutex_unlock(&l->route_lock);
	return rc;
}

static int
publish_local(struct src *src, uint64_t seq, const uint8_t *data, size_t len, bool io,
              uint64_t *deadline)
{
	struct local_src *l = local_of(src);
	bool wait = src->reliability == TERN_RELIABLE && !io;
	int rc = 0;

	for (int k = 0; k < l->ncopy_subs; k++) {
		struct sink *sink = l->copy_subs[k];
		if (sink->fn != NULL) {
			sink_call(sink, src, seq, data, len);
			continue;
		}
		int r = sink_push_local(sink, src, seq, data, len, wait ? deadline : NULL);
		if (r != 0) {
			rc = r;
		}
	}
	return rc;
}

static int
publish_remote(struct src *src, uint64_t seq, uint64_t stamp, const uint8_t *data, size_t len,
               struct wait_ctx *w, struct dying *dying)
{
	struct local_src *l = local_of(src);
	struct outchan_wait ow = {.room = wait_room, .ctx = w};
	bool reliable = src->reliability == TERN_RELIABLE;
	int rc = 0, r;

	for (int k = 0; k < l->ncopy; k++) {
		struct out *o = &l->copy[k];
		int broken = atomic_load(&o->oc->broken);
		if (atomic_load(&o->oc->detached) && broken == OUTCHAN_OK) {
			continue; /* no longer routed */
		}
		if (broken != OUTCHAN_OK) {
			/* lost, not yet reaped: queued for the resume if it fits */
			if (o->oc->retain && broken == OUTCHAN_LOST &&
			    outchan_send(o->oc, seq, data, len, false, &ow) != 0) {
				note_dying(dying, o);
			}
			continue;
		}
		if (len > o->conn->peer_max_message) {
			rc =
			    tern__error(TERN_EMSGSIZE, "a %zu-byte message exceeds peer %s's limit",
			                len, o->conn->peer_id);
			continue;
		}
		r = outchan_send_stamped(o->oc, seq, stamp, data, len, reliable, &ow);
		if (r == TERN_ECLOSED && o->oc->retain &&
		    atomic_load(&o->oc->broken) == OUTCHAN_LOST) {
			note_dying(dying, o); /* the connection broke while we waited */
		} else if (r != 0 && r != TERN_ECLOSED) {
			rc = r;
		}
	}
	return rc;
}

/* One of the node's stamps for the millisecond of now_us, if any is left.
 * Approximate across threads (two may both start a new millisecond), and
 * only a counter that is read, not written, once the stamps are spent. */
static bool
stamp_take(struct session *s, uint64_t now_us)
{
	uint64_t ms = now_us / 1000, cur = atomic_load_explicit(&s->stamp_ms, memory_order_relaxed);

	if (cur != ms && atomic_compare_exchange_strong_explicit(
	                     &s->stamp_ms, &cur, ms, memory_order_relaxed, memory_order_relaxed)) {
		atomic_store_explicit(&s->stamps_used, 0, memory_order_relaxed);
	}
	return atomic_load_explicit(&s->stamps_used, memory_order_relaxed) < STAMPS_PER_MS &&
	       atomic_fetch_add_explicit(&s->stamps_used, 1, memory_order_relaxed) < STAMPS_PER_MS;
}

/*
 * The publish stamp of this message, or 0: about one message a millisecond
 * carries one (docs/PROTOCOL.md, WIRE_FLAG_STAMP), so the cost in bytes and
 * clock reads stays small at any rate. The clock is read only when a
 * millisecond's worth of messages may have gone by: after a stamp, 7/8 of
 * the messages the last millisecond had, then half as many again each time
 * it was too early. A key due a stamp when the node has given its
 * STAMPS_PER_MS for this millisecond looks again after twice as many
 * messages as the last time. Under send_lock.
 */
static uint64_t
stamp_due(struct src *src)
{
	struct local_src *l = local_of(src);
	uint64_t now;

	l->stamp_count++;
	if (l->stamp_left > 1) {
		l->stamp_left--;
		return 0;
	}
	now = clock_wall_us();
	if (now >= l->stamp_last_us && now - l->stamp_last_us < STAMP_EVERY_US) {
		l->stamp_gap = l->stamp_gap > 1 ? l->stamp_gap / 2 : 1;
		l->stamp_left = l->stamp_gap;
		return 0;
	}
	if (!stamp_take(src->session, now)) {
		l->stamp_gap =
		    l->stamp_gap < STAMP_GAP_MAX / 2 ? 2 * l->stamp_gap + 1 : STAMP_GAP_MAX;
		l->stamp_left = l->stamp_gap;
		return 0;
	}
	l->stamp_gap = l->stamp_count - l->stamp_count / 8;
	l->stamp_left = l->stamp_gap;
	l->stamp_count = 0;
	l->stamp_last_us = now;
	return now;
}

static int
send_lock(struct src *src, bool io)
{
	struct local_src *l = local_of(src);

	if (!io) {
		pthread_mutex_lock(&l->send_lock);
		return 0;
	}
	/* the I/O thread never waits for a publisher: one that holds this lock
	 * may be waiting for credit only the I/O thread can read */
	if (pthread_mutex_trylock(&l->send_lock) != 0) {
		return tern__error(TERN_EAGAIN,
		                   "publish on '%s' from a callback while another thread is "
		                   "publishing on it: not sent",
		                   src->key);
	}
	return 0;
}

static void
publish_result(struct src *src, int rc, size_t len)
{
	if (rc == TERN_EAGAIN) {
		COUNT(src->dropped, 1);
		tern__error(rc, "queue full on '%s': message dropped", src->key);
	} else if (rc == TERN_ETIMEDOUT) {
		tern__error(rc, "publish on '%s' timed out waiting for a slow subscriber",
		            src->key);
	} else if (rc == 0) {
		COUNT(src->messages, 1);
		COUNT(src->bytes, len);
	}
}

/* Has every ready link answered each SYNC sent on it? */
static int
scopes_answered(void *arg)
{
	struct session *s = arg;

	for (struct conn *c = loop_next_conn(s->loop, NULL); c != NULL;
	     c = loop_next_conn(s->loop, c)) {
		if (conn_state(c) == CONN_READY && c->syncs_in != c->syncs_out) {
			return 0;
		}
	}
	return 1;
}

/* A client's publisher knows of the subscriptions that meet its key once
 * its SCOPE is answered: wait for that (a link that breaks meanwhile
 * answers nothing), at most publish_timeout_ms. Not at tern_pub_open: a
 * client that declares many publishers sends their SCOPEs one after the
 * other, and the first publication waits once for all the answers. */
static void
wait_scoped(struct session *s)
{
	uint64_t until = clock_ms() + s->cfg->publish_timeout_ms;
	long ns = 20000;

	while (!loop_run(s->loop, scopes_answered, s) && clock_ms() < until) {
		struct timespec ts = {0, ns};
		nanosleep(&ts, NULL);
		ns = ns < 1000000 ? ns * 2 : ns;
	}
}

/* The first publication or match count of a client's publisher: its SCOPE
 * answered first (not on the I/O thread, which reads the answers after
 * this). */
static void
scope_settle(struct session *s, struct local_src *l)
{
	if (atomic_load_explicit(&l->scope_due, memory_order_relaxed) && !loop_on_thread(s->loop)) {
		wait_scoped(s);
		atomic_store(&l->scope_due, false);
	}
}

int
session_publish(struct session *s, struct src *src, const void *data, size_t len)
{
	struct local_src *l = local_of(src);
	bool io = loop_on_thread(s->loop);
	struct dying dying; /* a kilobyte, read only up to n: not cleared per message */
	uint64_t deadline = 0, seq;
	struct wait_ctx w = {.src = src, .deadline = &deadline, .io = io};
	int rc, r;

	dying.n = 0;
	if (len > s->cfg->max_message_bytes) {
		return tern__error(TERN_EMSGSIZE,
		                   "a %zu-byte message on '%s' exceeds max_message_bytes (%llu)",
		                   len, src->key, (unsigned long long)s->cfg->max_message_bytes);
	}
	if (io) {
		release_held(s); /* this publication may queue for them */
	}
	scope_settle(s, l);
	if ((rc = send_lock(src, io)) != 0) {
		return rc;
	}
	if ((rc = begin(src, data, len, io, &deadline, &seq)) != 0) {
		pthread_mutex_unlock(&l->send_lock);
		return rc;
	}
	rc = publish_local(src, seq, data, len, io, &deadline);
	if ((r = publish_remote(src, seq, l->ncopy > 0 ? stamp_due(src) : 0, data, len, &w,
	                        &dying)) != 0) {
		rc = r;
	}
	if (io) {
		note_congestion(s, src);
	}
	leave_copy(src);
	if (dying.n > 0) {
		keep_for_dying(src, &dying, seq, data, len, &deadline);
	}
	if (rc == TERN_EAGAIN && src->reliability == TERN_RELIABLE) {
		COUNT(src->undelivered, 1);
	}
	publish_result(src, rc, len);
	pthread_mutex_unlock(&l->send_lock);
	/* a peer that refused this publisher drops what reaches it; everyone
	 * else got the message (as with TERN_EMSGSIZE from one peer) */
	return rc == 0 ? refusal_error(&l->refusal) : rc;
}

/* ---- publishers ---- */

struct pub_args {
	struct session *session;
	struct src *src;
};

static int
do_pub_open(void *arg)
{
	struct pub_args *a = arg;
	struct session *s = a->session;
	struct src *src = a->src;

	snprintf(src->publisher, strlen(s->cfg->id) + 22, "%s/%llu", s->cfg->id,
	         (unsigned long long)s->next_pub_id++);
	src->publisher_len = strlen(src->publisher);
	if (ketree_add(&s->srcs, src->key, src->key_len, src) != 0) {
		return TERN_ENOMEM;
	}
	src_link(&s->pubs, src);
	src_update(s, src, NULL);
	if (s->cfg->mode == TERN_MODE_CLIENT) {
		struct ctl_msg sync = {.type = CTL_SYNC};
		for (struct conn *c = loop_next_conn(s->loop, NULL); c != NULL;
		     c = loop_next_conn(s->loop, c)) {
			if (conn_state(c) == CONN_READY) {
				send_scope(c, CTL_SCOPE, src->key, src->key_len);
				conn_send_ctl(c, &sync);
				atomic_store(&local_of(src)->scope_due, true);
			}
		}
	}
	return 0;
}

int
session_pub_open(struct session *s, const char *key, int reliability, struct src **out)
{
	struct pub_args a = {.session = s};
	struct local_src *l = calloc(1, sizeof(*l));
	struct src *src = &l->src;

	if (l == NULL) {
		return TERN_ENOMEM;
	}
	src->session = s;
	src->local = true;
	src->key = strdup(key);
	src->key_len = strlen(key);
	/* "ID/N": the id, '/', up to 20 digits and the NUL (a byte count that
	 * matters when there are a hundred thousand publishers) */
	src->publisher = malloc(strlen(s->cfg->id) + 22);
	src->instance = s->instance;
	src->reliability = reliability < 0 ? s->cfg->reliability : reliability;
	if (src->key == NULL || src->publisher == NULL) {
		free(src->key);
		free(src->publisher);
		free(l);
		return TERN_ENOMEM;
	}
	pthread_mutex_init(&l->send_lock, NULL);
	pthread_mutex_init(&l->route_lock, NULL);
	pthread_mutex_init(&l->wait_lock, NULL);
	pthread_cond_init(&l->wait_cond, NULL);
	a.src = src;
	if (loop_run(s->loop, do_pub_open, &a) != 0) {
		pthread_mutex_destroy(&l->send_lock);
		pthread_mutex_destroy(&l->route_lock);
		pthread_mutex_destroy(&l->wait_lock);
		pthread_cond_destroy(&l->wait_cond);
		free(src->key);
		free(src->publisher);
		free(l);
		return tern__error(TERN_ENOMEM, "no memory to index publisher '%s'", key);
	}
	*out = src;
	return 0;
}

/* Nothing left to write (or, with consumed, nothing the peers have not
 * consumed yet) on this source's live channels. *flagged: data was left
 * that no one was flagged to write (the I/O thread must look). */
static bool
drained(struct src *src, bool consumed, bool *flagged)
{
	struct local_src *l = local_of(src);
	bool empty = true;

	*flagged = false;
	pthread_mutex_lock(&l->route_lock);
	for (int k = 0; k < src->nouts; k++) {
		struct outchan *oc = src->outs[k].oc;
		struct conn *c = src->outs[k].conn;
		size_t left = consumed ? ring_used(&oc->ring) : outchan_unsent(oc);
		if (atomic_load(&oc->broken) == OUTCHAN_OK && !atomic_load(&oc->detached) &&
		    left > 0) {
			empty = false;
			if (!atomic_load(&c->pending)) {
				conn_mark_pending(c);
				*flagged = true;
			}
		}
	}
	pthread_mutex_unlock(&l->route_lock);
	return empty;
}

/* Poll until drained: from every half millisecond, backing off to every
 * 10 ms, so that a hundred publishers draining a slow link do not keep the
 * machine busy switching between them. */
static int
wait_drained(struct session *s, struct src *src, int timeout_ms, bool consumed)
{
	uint64_t deadline = clock_ms() + (uint64_t)(timeout_ms < 0 ? 86400000 : timeout_ms);
	long wait_ns = 500000;
	bool flagged;

	while (!drained(src, consumed, &flagged)) {
		struct timespec ts = {0, wait_ns};
		if (clock_ms() >= deadline) {
			return tern__error(TERN_ETIMEDOUT, "flush of '%s' timed out", src->key);
		}
		if (flagged) {
			loop_wake(s->loop);
		}
		nanosleep(&ts, NULL);
		wait_ns = wait_ns * 2 > 10000000 ? 10000000 : wait_ns * 2;
	}
	return 0;
}

int
session_pub_flush(struct session *s, struct src *src, int timeout_ms)
{
	return wait_drained(s, src, timeout_ms, false);
}

int
session_pub_matched(struct src *src)
{
	struct local_src *l = local_of(src);
	int n;

	scope_settle(src->session, l);
	pthread_mutex_lock(&l->route_lock);
	n = src->nouts + (src->nsubs > 0);
	pthread_mutex_unlock(&l->route_lock);
	return n;
}

/* Does a local publisher still publish on exactly this key? */
static bool
publishes_on(struct session *s, const char *key, size_t len)
{
	const struct ketree_node *n = ketree_find(&s->srcs, key, len);

	for (uint32_t k = 0; n != NULL && k < n->nvals; k++) {
		if (((const struct src *)ketree_vals(n)[k])->local) {
			return true;
		}
	}
	return false;
}

/* What is still unconsumed when a publisher closes is given up on. */
static int
do_pub_close(void *arg)
{
	struct pub_args *a = arg;
	struct session *s = a->session;
	struct src *src = a->src;
	struct local_src *l = local_of(src);

	src_unlink(&s->pubs, src);
	ketree_remove(&s->srcs, src->key, src->key_len, src);
	if (s->cfg->mode == TERN_MODE_CLIENT && !publishes_on(s, src->key, src->key_len)) {
		for (struct conn *c = loop_next_conn(s->loop, NULL); c != NULL;
		     c = loop_next_conn(s->loop, c)) {
			if (conn_state(c) == CONN_READY) {
				send_scope(c, CTL_UNSCOPE, src->key, src->key_len);
			}
		}
	}
	forget_parked(s, src);
	pthread_mutex_lock(&l->route_lock);
	for (int k = 0; k < src->nouts; k++) {
		struct outchan *oc = src->outs[k].oc;
		if (oc->retain && atomic_load(&oc->broken) != OUTCHAN_DROPPED) {
			COUNT(src->undelivered, frames_messages(&oc->ring));
		}
	}
	for (struct parked *p = src->parked; p != NULL; p = p->next) {
		COUNT(src->undelivered, frames_messages(&p->ring) + p->dropped);
	}
	src_clear(src);
	pthread_mutex_unlock(&l->route_lock);
	/* the node's totals keep what closed publishers sent */
	COUNT(s->messages_out, atomic_load(&src->messages));
	COUNT(s->bytes_out, atomic_load(&src->bytes));
	COUNT(s->dropped, atomic_load(&src->dropped));
	COUNT(s->undelivered, atomic_load(&src->undelivered));
	return 0;
}

int
session_pub_close(struct session *s, struct src *src)
{
	struct local_src *l = local_of(src);
	struct pub_args a = {.session = s, .src = src};
	uint64_t lost;
	char key[256];
	char refused[CTL_TEXT_MAX + 1] = "";
	int refused_code = 0;

	/* what reliable channels still hold may be in flight on a slow link:
	 * let the peers consume it before the channels go */
	wait_drained(s, src, (int)s->cfg->publish_timeout_ms, true);
	snprintf(key, sizeof(key), "%s", src->key);
	if ((refused_code = refusal_error(&l->refusal)) != 0) {
		snprintf(refused, sizeof(refused), "%s", l->refusal.reason);
	}
	loop_run(s->loop, do_pub_close, &a);
	lost = atomic_load(&src->undelivered);
	pthread_mutex_destroy(&l->send_lock);
	pthread_mutex_destroy(&l->route_lock);
	pthread_mutex_destroy(&l->wait_lock);
	pthread_cond_destroy(&l->wait_cond);
	free(l);
	if (refused_code != 0) {
		return tern__error(refused_code, "%s", refused);
	}
	if (lost > 0) {
		return tern__error(TERN_ECLOSED,
		                   "%llu reliable messages on '%s' were not delivered to every "
		                   "subscriber",
		                   (unsigned long long)lost, key);
	}
	return 0;
}

void
session_pub_stats(struct src *src, tern_stats *st)
{
	memset(st, 0, sizeof(*st));
	st->messages = atomic_load(&src->messages);
	st->bytes = atomic_load(&src->bytes);
	st->dropped = atomic_load(&src->dropped);
	st->undelivered = atomic_load(&src->undelivered);
}

/* ---- subscribers ---- */

struct sub_args {
	struct session *session;
	struct sink *sink;
};

static int
do_sub_open(void *arg)
{
	struct sub_args *a = arg;
	struct session *s = a->session;
	struct sink *k = a->sink;
	struct interest *i;

	/* room for every pull subscriber in the list of queues this thread
	 * holds, so that taking one never allocates */
	if (s->held_cap < s->nsinks + 1) {
		int cap = s->held_cap ? s->held_cap * 2 : 8;
		struct sink **p = realloc(s->held, (size_t)cap * sizeof(*p));
		if (p == NULL) {
			return TERN_ENOMEM;
		}
		s->held = p;
		s->held_cap = cap;
	}
	k->id = s->next_sub_id++;
	i = route_add(&s->routes, s->cfg->id, strlen(s->cfg->id), k->id, k->keyexpr, k->ke_len, 0);
	if (i == NULL) {
		return TERN_ENOMEM;
	}
	i->local = k;
	k->interest = i;
	k->prev = NULL;
	k->next = s->sinks;
	if (s->sinks != NULL) {
		s->sinks->prev = k;
	}
	s->sinks = k;
	s->nsinks++;
	spread(s, i, true, NULL);
	update_matching(s, k->keyexpr, k->ke_len, NULL);
	return 0;
}

int
session_sub_open(struct session *s, const char *keyexpr, tern_sub_fn fn, void *arg,
                 struct sink **out)
{
	struct sub_args a = {.session = s};
	struct sink *k = calloc(1, sizeof(*k));
	int rc;

	if (k == NULL) {
		return TERN_ENOMEM;
	}
	k->session = s;
	k->keyexpr = strdup(keyexpr);
	k->ke_len = strlen(keyexpr);
	k->fn = fn;
	k->arg = arg;
	if (k->keyexpr == NULL || subq_init(&k->q, fn != NULL ? 4096 : SUB_RING,
	                                    s->cfg->queue_max_bytes, sink_wake, k) != 0) {
		free(k->keyexpr);
		free(k);
		return TERN_ENOMEM;
	}
	a.sink = k;
	if ((rc = loop_run(s->loop, do_sub_open, &a)) != 0) {
		subq_free(&k->q);
		free(k->keyexpr);
		free(k);
		return rc;
	}
	*out = k;
	return 0;
}

static int
do_sub_close(void *arg)
{
	struct sub_args *a = arg;
	struct session *s = a->session;
	struct sink *k = a->sink;
	struct interest *i = k->interest;

	if (k->prev != NULL) {
		k->prev->next = k->next;
	} else {
		s->sinks = k->next;
	}
	if (k->next != NULL) {
		k->next->prev = k->prev;
	}
	s->nsinks--;
	if (s->nheld == 0 && s->held_cap > 64 && s->nsinks < s->held_cap / 4) {
		/* still room for every subscriber left (see do_sub_open) */
		struct sink **p = realloc(s->held, (size_t)(s->held_cap / 2) * sizeof(*p));
		if (p != NULL) {
			s->held = p;
			s->held_cap /= 2;
		}
	}
	if (s->congested_sink == k) {
		s->congested_sink = NULL;
	}
	end_interest(s, i, NULL);
	k->interest = NULL;
	return 0;
}

struct in_use_args {
	struct sink *sink;
	int used;
};

static void
in_use_one(void *arg, void *val)
{
	struct in_use_args *a = arg;
	struct src *src = val;
	struct local_src *l;

	if (!src->local || a->used) {
		return;
	}
	l = local_of(src);
	pthread_mutex_lock(&l->route_lock);
	for (int k = 0; atomic_load(&src->inside) && k < l->ncopy_subs; k++) {
		a->used |= l->copy_subs[k] == a->sink;
	}
	pthread_mutex_unlock(&l->route_lock);
}

/* Does a publisher still send from a copy that names this subscriber?
 * Only one whose key the subscription matches can. */
static int
sink_in_use(void *arg)
{
	struct sub_args *a = arg;
	struct in_use_args u = {a->sink, 0};

	ketree_visit(&a->session->srcs, a->sink->keyexpr, a->sink->ke_len, in_use_one, &u);
	return u.used;
}

void
session_sub_close(struct session *s, struct sink *k)
{
	struct sub_args a = {.session = s, .sink = k};

	atomic_store(&k->closing, true);
	loop_run(s->loop, do_sub_close, &a);
	while (loop_run(s->loop, sink_in_use, &a)) {
		struct timespec ts = {0, 200000};
		nanosleep(&ts, NULL);
	}
	subq_free(&k->q);
	free(k->refusal.reason);
	free(k->keyexpr);
	free(k);
}

int
session_sub_recv(struct sink *k, tern_msg *msg, int timeout_ms)
{
	int rc;

	if (k->fn != NULL) {
		return tern__error(TERN_EINVAL, "tern_sub_recv on a callback subscriber");
	}
	rc = subq_recv(&k->q, msg, timeout_ms);
	return rc == TERN_EACCES ? refusal_error(&k->refusal) : rc;
}

int
session_sub_status(struct sink *k)
{
	return refusal_error(&k->refusal);
}

void
session_sub_stats(struct sink *k, tern_stats *st)
{
	memset(st, 0, sizeof(*st));
	st->messages = atomic_load(&k->messages);
	st->bytes = atomic_load(&k->bytes);
	st->missed = atomic_load(&k->missed);
}

/* ---- the node's counters ---- */

static int
sum_stats(void *arg)
{
	void **a = arg;
	struct session *s = a[0];
	tern_stats *st = a[1];

	st->messages = atomic_load(&s->messages_out);
	st->bytes = atomic_load(&s->bytes_out);
	st->dropped = atomic_load(&s->dropped);
	st->undelivered = atomic_load(&s->undelivered);
	for (struct src *p = s->pubs; p != NULL; p = p->next) {
		st->messages += atomic_load(&p->messages);
		st->bytes += atomic_load(&p->bytes);
		st->dropped += atomic_load(&p->dropped);
		st->undelivered += atomic_load(&p->undelivered);
	}
	loop_write_totals(s->loop, st);
	st->messages_in = atomic_load(&s->messages_in);
	st->bytes_in = atomic_load(&s->bytes_in);
	return 0;
}

void
session_stats(struct session *s, tern_stats *st)
{
	void *a[2] = {s, st};

	memset(st, 0, sizeof(*st));
	st->connections = (uint64_t)loop_ready_peers(s->loop);
	loop_call(s->loop, sum_stats, a);
}

struct json_args {
	struct session *session;
	struct jtext text;
};

static void
conn_json(struct json_args *a, struct conn *c)
{
	jtext_printf(&a->text, "{\"peer\":");
	jtext_str(&a->text, c->peer_id);
	jtext_printf(&a->text, ",\"endpoint\":");
	jtext_str(&a->text, c->endpoint);
	jtext_printf(&a->text, ",\"identity\":");
	jtext_str(&a->text, c->identity);
	jtext_printf(&a->text,
	             ",\"mode\":\"%s\",\"batches\":%llu,\"batch_bytes\":%llu,"
	             "\"batch_largest\":%llu,\"messages_in\":%llu,\"bytes_in\":%llu,"
	             "\"channels\":[",
	             c->low_latency ? "low-latency" : "batched",
	             (unsigned long long)atomic_load(&c->batches),
	             (unsigned long long)atomic_load(&c->batch_bytes),
	             (unsigned long long)atomic_load(&c->batch_largest),
	             (unsigned long long)atomic_load(&c->messages_in),
	             (unsigned long long)atomic_load(&c->bytes_in));
	pthread_mutex_lock(&c->wlock);
	for (int i = 0; i < c->nout; i++) {
		struct outchan *oc = c->outv[i];
		struct src *src = oc->arg;
		jtext_printf(&a->text, "%s{\"key\":", i ? "," : "");
		jtext_str(&a->text, src->key);
		jtext_printf(&a->text, ",\"messages\":%llu,\"bytes\":%llu,\"dropped\":%llu}",
		             (unsigned long long)atomic_load(&oc->messages),
		             (unsigned long long)atomic_load(&oc->bytes),
		             (unsigned long long)atomic_load(&oc->dropped));
	}
	pthread_mutex_unlock(&c->wlock);
	jtext_printf(&a->text, "]}");
}

static int
do_json(void *arg)
{
	struct json_args *a = arg;
	struct session *s = a->session;
	void *sa[2];
	tern_stats st = {0};
	bool first = true;

	sa[0] = s;
	sa[1] = &st;
	sum_stats(sa);
	jtext_printf(&a->text, "{\"id\":");
	jtext_str(&a->text, s->cfg->id);
	jtext_printf(&a->text,
	             ",\"mode\":\"%s\",\"messages_out\":%llu,\"bytes_out\":%llu,\"dropped\":%llu,"
	             "\"messages_in\":%llu,\"bytes_in\":%llu,\"refused_in\":%llu,\"connections\":[",
	             ctl_mode_name((uint64_t)s->cfg->mode), (unsigned long long)st.messages,
	             (unsigned long long)st.bytes, (unsigned long long)st.dropped,
	             (unsigned long long)st.messages_in, (unsigned long long)st.bytes_in,
	             (unsigned long long)atomic_load(&s->refused_in));
	for (struct conn *c = loop_next_conn(s->loop, NULL); c != NULL;
	     c = loop_next_conn(s->loop, c)) {
		if (conn_state(c) != CONN_READY) {
			continue;
		}
		jtext_printf(&a->text, "%s", first ? "" : ",");
		conn_json(a, c);
		first = false;
	}
	jtext_printf(&a->text, "]}");
	return 0;
}

struct report_args {
	struct session *session;
	const struct session_report_ops *ops;
	void *arg;
};

static uint64_t
queued_bytes(const struct src *src)
{
	uint64_t n = 0;

	for (int k = 0; k < src->nouts; k++) {
		n += ring_used(&src->outs[k].oc->ring);
	}
	return n;
}

static void
report_src(struct report_args *a, struct src *src)
{
	struct session_key_report k = {.key = src->key,
	                               .publisher = src->publisher,
	                               .pub = src->local,
	                               .messages = atomic_load(&src->messages),
	                               .bytes = atomic_load(&src->bytes),
	                               .drops = atomic_load(&src->dropped),
	                               .missed = atomic_load(&src->missed),
	                               .blocked_us = atomic_load(&src->blocked_us)};

	if (src->local) {
		k.queue_bytes = queued_bytes(src);
	}
	if (src->lat != NULL && src->lat->count > 0) {
		k.lat_count = src->lat->count;
		k.lat_p50_us = tern__hist_quantile(src->lat, 0.50) / 1000u;
		k.lat_p99_us = tern__hist_quantile(src->lat, 0.99) / 1000u;
		k.lat_p999_us = tern__hist_quantile(src->lat, 0.999) / 1000u;
		k.lat_max_us = src->lat->max_ns / 1000u;
		tern__hist_reset(src->lat);
	}
	a->ops->key(a->arg, &k);
}

static int
do_report(void *arg)
{
	struct report_args *a = arg;
	struct session *s = a->session;

	for (struct src *src = s->pubs; src != NULL; src = src->next) {
		report_src(a, src);
	}
	for (struct src *src = s->remote; src != NULL; src = src->next) {
		if (src->nsubs > 0 || src->lat != NULL) {
			report_src(a, src);
		}
	}
	for (struct conn *c = loop_next_conn(s->loop, NULL); c != NULL;
	     c = loop_next_conn(s->loop, c)) {
		struct session_conn_report r = {.peer = c->peer_id,
		                                .endpoint = c->endpoint,
		                                .identity = c->identity,
		                                .low_latency = c->low_latency,
		                                .peer_mode = c->peer_router   ? TERN_MODE_ROUTER
		                                             : c->peer_client ? TERN_MODE_CLIENT
		                                                              : TERN_MODE_PEER,
		                                .rtt_us = c->rtt_us,
		                                .bytes_in = atomic_load(&c->bytes_in),
		                                .bytes_out = atomic_load(&c->batch_bytes)};

		if (conn_state(c) == CONN_READY) {
			a->ops->conn(a->arg, &r);
		}
	}
	return 0;
}

void
session_report(struct session *s, const struct session_report_ops *ops, void *arg)
{
	struct report_args a = {.session = s, .ops = ops, .arg = arg};

	loop_call(s->loop, do_report, &a);
}

size_t
session_stats_json(struct session *s, char *buf, size_t len)
{
	struct json_args a = {.session = s};

	jtext_fixed(&a.text, buf, len);
	loop_call(s->loop, do_json, &a);
	return a.text.len;
}

/* ---- open, close ---- */

int
session_open(struct session **out, const tern_config *cfg, const struct logger *log,
             uint64_t instance, uint64_t window_init, uint64_t window_max)
{
	struct session *s = calloc(1, sizeof(*s));
	int rc;

	if (s == NULL) {
		return TERN_ENOMEM;
	}
	s->cfg = cfg;
	s->log = log;
	s->instance = instance;
	/* from a random start, so that a restarted node with the same id
	 * never repeats one of its last life's (end_interest) */
	s->next_sub_id = instance;
	s->next_pub_id = 1;
	if ((rc = loop_open(&s->loop, cfg, log, window_init, window_max, &session_loop_ops, s)) !=
	    0) {
		free(s);
		return rc;
	}
	if ((rc = loop_start(s->loop)) != 0) {
		loop_close(s->loop);
		free(s);
		return rc;
	}
	*out = s;
	return 0;
}

struct loop *
session_loop(struct session *s)
{
	return s->loop;
}

void
session_close(struct session *s)
{
	if (s == NULL) {
		return;
	}
	loop_close(s->loop);
	route_free_all(&s->routes);
	scope_free_all(&s->scopes);
	while (s->remote != NULL) {
		struct src *src = s->remote;
		s->remote = src->next;
		src_clear(src);
		free(src);
	}
	ketree_free(&s->srcs);
	hmap_free(&s->remote_ids);
	free(s->parked_v);
	free(s->want);
	free(s->held);
	free(s);
}
