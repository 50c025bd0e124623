/*
 * node.h - the internal structures of a node, shared by node.c (lifecycle,
 * event loop, dialing), conn.c (one connection's read and write paths),
 * route.c (subscriptions, sources and delivery), pub.c and sub.c.
 *
 * Threading: one I/O thread per node owns every structure here, except:
 *  - a publisher's route (its outchans and local subs) is read by
 *    publishing threads under pub->lock, and changed by the I/O thread
 *    under the same lock;
 *  - an outchan's ring has one producer (the publisher holding pub->lock,
 *    or the I/O thread for forwarded traffic) and one consumer (whoever
 *    holds conn->wlock and flushes); its credit is atomic;
 *  - conn->out and the socket writes are under conn->wlock;
 *  - a pull subscriber's ring is filled under sub->push_lock and drained by
 *    the one thread calling tern_sub_recv.
 * API calls that change structure run on the I/O thread via node_call().
 * Lock order: pub->lock, then sub->push_lock or conn->wlock; never the reverse.
 * pub->wait_lock is a leaf: nothing else is taken while it is held.
 */
#ifndef TERN_NODE_H
#define TERN_NODE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "tern/tern.h"

#include "control.h"
#include "credit.h"
#include "endpoint.h"
#include "reasm.h"
#include "ring.h"
#include "wire.h"

enum evkind { EV_WAKE = 1, EV_LISTENER, EV_CONN };

struct evsrc {
	int kind;
};

struct tern_sub;
struct tern_pub;
struct conn;

/* The sending side of one channel on one connection. */
struct outchan {
	struct conn *conn;
	struct src *src;
	uint32_t id;
	struct ring ring;
	_Atomic int64_t credit;            /* bytes the receiver still accepts */
	atomic_bool detached;              /* no longer routed: close once drained */
	atomic_bool blocked_sent;          /* a BLOCKED report went out since the last credit */
	uint64_t last_seq;                 /* producer side: the last sequence number queued */
	_Atomic uint64_t starved_since_ms; /* since when data waits for credit, or 0 */
	_Atomic uint64_t last_ack_ms;      /* when the peer last reported consuming */
	_Atomic uint64_t last_write_ms;    /* when the socket last took this channel's data */
	_Atomic uint64_t rate_Bps;         /* consumed bytes a second, over the last second */
	uint64_t rate_t0_ms, rate_acked0;  /* I/O thread: where that measure started */
	bool want_blocked;                 /* flusher: data waits for credit, tell the peer */
	bool open_sent;
	/* Reliable channels keep written frames until the peer reports them
	 * consumed, so that they can be sent again after a reconnect. The
	 * ring's head is the oldest unacknowledged frame; `sent` bytes past it
	 * are written; the rest waits for the socket. */
	bool retain;
	_Atomic size_t sent;
	uint64_t acked; /* bytes the peer reported consumed */
	uint64_t freed; /* bytes released from the ring: whole frames */
	uint64_t messages, bytes, dropped;
};

/* What a reliable channel held when its connection broke: sent again when
 * the same peer is back, and meanwhile filled by new publications. */
struct parked {
	char peer_id[CTL_ID_MAX + 1];
	struct ring ring;
	uint64_t head_seq;   /* sequence number of the first message in ring */
	bool head_mid;       /* ring starts inside a message: skip to the next */
	uint64_t expires_ms; /* given up after slow_consumer_ms */
	uint64_t dropped;    /* messages that did not fit */
	struct parked *next;
};

/* A source of messages: a local publisher or a remote one seen on the wire. */
struct src {
	char *key;
	size_t key_len;
	char *publisher;
	size_t publisher_len;
	uint64_t instance;
	int reliability;
	struct tern_pub *pub; /* local publisher, or NULL */
	uint64_t last_seq;    /* remote: the highest sequence delivered (duplicates dropped) */
	bool seen;            /* remote: a message has arrived */
	int refs;             /* remote: inchans using it */
	struct outchan **outs;
	int nouts, outs_cap;
	struct tern_sub **subs;
	int nsubs, subs_cap;
	struct parked *parked;
	struct src *next;
};

/* The receiving side of a channel. */
struct inchan {
	struct conn *conn;
	struct src *src;
	uint32_t id;
	struct credit_rx credit;
	uint64_t next_seq;
	struct reasm reasm;
	bool skip_chunks;  /* the chunked message in progress is a duplicate */
	int stage;         /* progress on the frame at the head (see conn.c) */
	uint8_t *done_buf; /* a reassembled message waiting for delivery */
	uint64_t done_len, done_seq;
	/* frames that could not be delivered yet, in arrival order */
	uint8_t *backlog;
	size_t blen, bcap, boff;
	bool stalled;
	struct inchan *stall_next;
	uint64_t grant_pending; /* credit to send with the next acknowledgement */
	uint64_t rate_t0_us;    /* consumption measured since then ... */
	uint64_t rate_bytes0;   /* ... from this many bytes consumed */
	uint64_t acked;         /* consumed bytes last reported to the sender */
	bool dirty;             /* on conn->dirty: something to acknowledge */
};

enum conn_state { CONN_CONNECTING, CONN_HANDSHAKE, CONN_READY, CONN_DEAD };

struct conn {
	struct evsrc ev;
	struct tern_node *node;
	int fd;
	int state;
	bool outbound;
	struct dialer *dialer;
	char endpoint[ENDPOINT_MAX];
	char peer_id[CTL_ID_MAX + 1];
	char reason[256]; /* why it closed */
	bool low_latency;
	bool peer_synced;
	bool peer_router; /* the peer runs in router mode */
	bool counted_ready;
	bool gone;          /* dead, and routing has forgotten it */
	bool said_goodbye;  /* the peer left on purpose: nothing to resume */
	uint32_t batch_max; /* largest write */
	uint32_t frame_max; /* largest payload in one frame we send */
	uint32_t recv_frame_max;
	uint64_t peer_max_message;
	uint64_t peer_window;
	uint32_t peer_keepalive_ms; /* the peer pings this often: dead after 3x */
	uint64_t reasm_budget;
	uint64_t created_ms, last_rx_ms, last_ping_ms;
	uint64_t rtt_us; /* shortest round trip seen by PING/PONG, 0 until measured */

	pthread_mutex_t wlock;
	uint8_t *out;
	size_t out_len, out_cap;
	bool epollout;
	atomic_bool choked; /* the socket took less than offered: wait for EPOLLOUT */
	atomic_int dead;    /* set first when the connection fails */
	atomic_int kill;    /* a publisher asks the I/O thread to drop it */
	char kill_reason[200];
	_Atomic uint64_t ring_bytes;       /* capacity of this connection's send rings */
	atomic_int pending;                /* rings may hold data */
	_Atomic uint64_t pending_since_ns; /* with batching.max_delay_us: when data first waited */
	_Atomic uint64_t last_direct_ns;
	uint64_t fill_mark, fill_since; /* I/O thread: a partial batch still filling */

	struct outchan **outv;
	int nout, out_cap_v, rr;
	uint32_t next_chan;
	struct inchan **ins;
	uint32_t ins_cap;
	struct inchan **dirty; /* channels to acknowledge after this read */
	uint32_t ndirty, dirty_cap;

	uint8_t *rbuf;
	size_t rlen, rcap, rmax;
	bool got_preamble, got_hello;

	_Atomic uint64_t batches, batch_bytes, batch_largest, messages_in, bytes_in;
	struct conn *next;
};

struct dialer {
	char endpoint[ENDPOINT_MAX];
	struct endpoint ep;
	struct conn *conn;
	uint64_t next_at_ms;
	uint32_t backoff_ms;
	bool failed_logged;
	struct dialer *next;
};

struct listener {
	struct evsrc ev;
	int fd;
	char endpoint[ENDPOINT_MAX];
	char path[ENDPOINT_MAX]; /* unix socket file to remove */
	struct listener *next;
};

/* A subscription known to this node: local, or declared by peers. */
struct interest {
	char *origin;
	uint64_t sub_id;
	char *keyexpr;
	size_t ke_len;
	uint64_t hops;
	struct tern_sub *local;
	struct conn **from; /* peers that declared it; from[0] is the route toward it */
	int nfrom, from_cap;
	struct interest *next;
};

struct call {
	int (*fn)(struct tern_node *node, void *arg);
	void *arg;
	int rc;
	bool done;
	struct call *next;
};

struct tern_node {
	tern_config cfg;
	char id[CTL_ID_MAX + 1];
	uint64_t instance;
	struct evsrc wake_ev;
	int epfd, wakefd;
	pthread_t thread;
	atomic_int sleeping;
	atomic_bool spinning; /* polling without sleeping: queued data is seen at once */
	atomic_bool stop;

	pthread_mutex_t lock; /* calls, ready count */
	pthread_cond_t cond;
	struct call *calls;
	int ready_peers;

	/* owned by the I/O thread */
	struct conn *conns;
	struct listener *listeners;
	struct dialer *dialers;
	struct interest *interests;
	struct src *remote;
	struct tern_pub *pubs;
	struct tern_sub *subs;
	struct inchan *stalled;
	struct tern_sub **held; /* pull subscribers whose push_lock this thread holds */
	int nheld, nheld_cap, nsubs;
	bool subs_blocked; /* a pull subscriber was full */
	bool closing;      /* goodbye said: no more dialing */
	uint64_t last_trim_ms;
	uint64_t delay_until_ns; /* a batch held for max_delay_us is due then (0: none) */
	uint64_t next_sub_id, next_pub_id;
	uint64_t window_init, window_max;

	_Atomic uint64_t messages_out, bytes_out, dropped, messages_in, bytes_in;
	_Atomic uint64_t batches, batch_bytes, batch_largest; /* of closed connections */
};

struct tern_pub {
	struct tern_node *node;
	struct src src;
	pthread_mutex_t lock;      /* the route and the sequence */
	pthread_mutex_t wait_lock; /* waiting for credit or ring space */
	pthread_cond_t wait_cond;
	atomic_int waiters;
	uint64_t seq;
	uint64_t id;
	_Atomic uint64_t messages, bytes, dropped;
	struct tern_pub *next;
};

struct tern_sub {
	struct tern_node *node;
	char *keyexpr;
	size_t ke_len;
	uint64_t id;
	tern_sub_fn fn;
	void *arg;
	struct ring ring;          /* pull: queued entries */
	pthread_mutex_t push_lock; /* producers of the ring; recv waits here */
	pthread_cond_t cond;
	atomic_int waiting;
	atomic_bool stalled; /* the I/O thread is waiting for room */
	size_t consume_next; /* bytes of the entry handed out by the last recv */
	void *heap;          /* the large message handed out by the last recv */
	bool held;           /* the I/O thread holds push_lock until the read is parsed */
	_Atomic uint64_t messages, bytes, missed;
	struct tern_sub *next;
};

/*
 * Counters with one writer at a time (the I/O thread, or whoever holds the
 * lock that guards them) are bumped with a relaxed load and store: readers
 * on other threads see a consistent value, and the hot path pays no locked
 * instruction.
 */
#define COUNT(var, n)                                                                              \
	atomic_store_explicit(&(var), atomic_load_explicit(&(var), memory_order_relaxed) + (n),    \
	                      memory_order_relaxed)

/* node.c */
int node_call(struct tern_node *node, int (*fn)(struct tern_node *, void *), void *arg);
void node_wake(struct tern_node *node);
uint64_t node_now_ms(void);
uint64_t node_now_ns(void);
/* A publication's deadline, publish_timeout_ms from its first wait: *deadline
 * is 0 until then, so a publication that never waits never reads the clock. */
uint64_t node_deadline(struct tern_node *node, uint64_t *deadline);
void node_log(struct tern_node *node, int level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void node_peer_ready(struct tern_node *node, struct conn *c);

/* conn.c */
struct conn *conn_new(struct tern_node *node, int fd, bool outbound, bool connecting,
                      const char *endpoint);
void conn_start(struct conn *c);
void conn_on_event(struct conn *c, uint32_t events);
/* Write what is queued; true if the socket took anything. */
bool conn_flush(struct conn *c);
bool conn_flush_locked(struct conn *c);
void conn_send_ctl(struct conn *c, const struct ctl_msg *m);
void conn_send_ctl_locked(struct conn *c, const struct ctl_msg *m);
void conn_fail(struct conn *c, const char *why);
void conn_free(struct conn *c);
bool conn_retry_stalled(struct inchan *in);
void conn_timers(struct conn *c, uint64_t now);
void conn_set_epollout(struct conn *c, bool on);

/* route.c */
void route_peer_ready(struct tern_node *node, struct conn *c);
void route_conn_gone(struct tern_node *node, struct conn *c);
int route_on_ctl(struct tern_node *node, struct conn *c, const struct ctl_msg *m);
void route_recompute(struct tern_node *node);
int route_add_local_sub(struct tern_node *node, struct tern_sub *sub);
void route_remove_local_sub(struct tern_node *node, struct tern_sub *sub);
struct outchan *route_outchan_new(struct conn *c, struct src *s);
void route_outchan_free(struct outchan *oc);
void route_src_clear(struct src *s);
/* Deliver one message of a remote source to local subs and onward peers.
 * Returns true if delivered (or dropped by policy), false if it must wait.
 * heap (or NULL): the malloc'ed buffer holding data; a pull subscriber
 * takes it (*heap becomes NULL), else it stays the caller's. */
bool route_deliver(struct tern_node *node, struct inchan *in, uint64_t seq, const uint8_t *data,
                   size_t len, uint8_t **heap, bool whole);
/* Chunked messages: is this first chunk a duplicate; note its sequence number. */
bool route_is_duplicate(struct inchan *in, uint64_t seq);
void route_note_seq(struct tern_node *node, struct inchan *in, uint64_t seq);
bool route_forward_chunk(struct tern_node *node, struct inchan *in, const struct wire_frame *f,
                         uint64_t seq, const uint8_t *payload);

static inline size_t
outchan_unsent(struct outchan *oc)
{
	return ring_used(&oc->ring) - atomic_load_explicit(&oc->sent, memory_order_relaxed);
}

/* route.c: reliable channels across reconnects */
void route_release_acked(struct outchan *oc);
void route_expire_parked(struct tern_node *node, uint64_t now_ms);
/* Add a publication to what is kept for absent peers (all, or just peer). */
void route_park_append(struct src *s, const char *peer, uint64_t seq, const uint8_t *data,
                       size_t len);
bool route_parked_room(struct src *s, size_t len, uint64_t budget);

/* pub.c */
void pub_wake(struct tern_pub *pub);
/* Queue or write one message on an outchan; used by publishers and forwarding. */
int outchan_send(struct outchan *oc, uint64_t seq, const uint8_t *data, size_t len, bool may_wait,
                 struct tern_pub *pub, uint64_t *deadline_ms);
int outchan_put_frame(struct outchan *oc, const struct wire_frame *f, const uint8_t *payload);
bool outchan_has_room(struct outchan *oc, size_t len);

/* sub.c */
/* A larger message reaches a pull subscriber as a buffer of its own. */
#define SUB_INLINE_MAX 65536
size_t sub_entry_size(const struct src *s, size_t len, bool heap);
/* I/O thread: is there room for an entry? Takes the queue's lock, which it
 * keeps until sub_release_all (called once a read is parsed, and before
 * anything that takes a publisher's lock). */
bool sub_reserve(struct tern_sub *sub, size_t entry);
void sub_release_all(struct tern_node *node);
/* I/O thread, after sub_reserve said yes. */
void sub_push(struct tern_sub *sub, const struct src *s, uint64_t seq, const uint8_t *data,
              size_t len, uint8_t *heap);
/* A publisher of this node: queue a copy, waiting for room until the
 * publication's deadline (NULL: do not wait). 0, TERN_ETIMEDOUT, TERN_EAGAIN
 * or TERN_ENOMEM. */
int sub_push_local(struct tern_sub *sub, const struct src *s, uint64_t seq, const uint8_t *data,
                   size_t len, uint64_t *deadline_ms);
void sub_call(struct tern_sub *sub, const struct src *s, uint64_t seq, const uint8_t *data,
              size_t len);

#endif
