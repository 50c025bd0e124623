/*
 * conn.h - one connection to a peer: the handshake, reading and parsing
 * frames, the channels on it, and the write path.
 *
 * Write path: conn->out holds control frames and the unwritten tail of a
 * frame the socket cut; each outchan ring holds whole data frames. A flush
 * gathers conn->out plus whole frames from the rings, round-robin across
 * channels, into one sendmsg of at most batch_max bytes.
 *
 * Read path: frames are parsed in place in rbuf and handed to their
 * channel (inchan.h); control messages that concern routing go up through
 * conn_ops.
 *
 * Threads and locks:
 *  - the I/O thread owns the connection: reading, parsing, timers, state
 *    changes, the channel tables (opening and closing channels);
 *  - `wlock` guards conn->out, the socket's writes and the list of send
 *    channels; a publishing thread may flush (conn_flush, conn_try_flush)
 *    while the I/O thread does anything but change that list;
 *  - `state`, `dead`, `pending`, `choked` and the counters are atomic: any
 *    thread reads them.
 * conn_ops run on the I/O thread, with no lock of this module held.
 *
 * TLS (tls:// endpoints): the TLS handshake comes first (state
 * CONN_HANDSHAKE, tls_done false), then tern's own. Every call on the TLS
 * session, reads included, happens under `wlock`: OpenSSL does not allow a
 * read and a write on one session from two threads at once.
 */
#ifndef TERN_CONN_H
#define TERN_CONN_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "tern/tern.h"

#include "chanid.h"
#include "control.h"
#include "endpoint.h"
#include "idtab.h"
#include "inchan.h"
#include "log.h"
#include "outchan.h"
#include "tls.h"

/* What every connection of a node shares: read-only once the node runs. */
struct conn_env {
	const tern_config *cfg;
	struct tls_ctx *tls; /* NULL until a tls:// endpoint needs one */
	const struct logger *log;
	int epfd;
	uint64_t window_init, window_max; /* of the channels we receive on */
	/* The loop's list of connections that may have work (data to write, a
	 * failed write, a death): a lock-free stack its owner takes whole, so
	 * the loop looks at these and not at every connection. NULL: none. */
	_Atomic(struct conn *) *work;
};

struct conn;

struct conn_ops {
	/* The handshake is done: the connection carries traffic. */
	void (*ready)(void *arg, struct conn *c);
	/* The peer has sent everything it declares on connecting (SYNC). */
	void (*synced)(void *arg, struct conn *c);
	/* SUB, UNSUB, OPEN, CLOSE and DENY: routing. Negative: close the connection. */
	int (*control)(void *arg, struct conn *c, const struct ctl_msg *m);
};

enum conn_state { CONN_CONNECTING, CONN_HANDSHAKE, CONN_READY, CONN_DEAD };

struct conn {
	void *ev_tag; /* what epoll reports for this connection's socket */
	const struct conn_env *env;
	const struct conn_ops *ops;
	void *arg;
	int fd;
	atomic_int state; /* enum conn_state */
	bool outbound;
	char endpoint[ENDPOINT_MAX];
	char peer_id[CTL_ID_MAX + 1];
	/* I/O thread, set once by the handshake: who the peer proved it is (its
	 * certificate's common name); empty for a peer that proved nothing,
	 * which only `*` access rules cover */
	char identity[CTL_ID_MAX + 1];
	struct tls_conn *tls;  /* NULL: plain; its calls under wlock */
	bool tls_done;         /* under wlock: the TLS handshake is over */
	bool tls_peeked;       /* I/O thread: the peer's first bytes were checked */
	char reason[256];      /* I/O thread: why it closed */
	char write_error[160]; /* under wlock: why a write failed (then `dead` is set) */
	bool low_latency;
	bool peer_synced;
	bool peer_router; /* the peer runs in router mode */
	/* the peer runs in client mode: it is told only the subscriptions
	 * its SCOPEs meet, and each SYNC it sends is answered with one */
	bool peer_client;
	/* SYNCs sent and received (the I/O thread, or a loop_run function):
	 * a client knows its SCOPEs are answered when every SYNC it sent has
	 * come back */
	uint32_t syncs_out, syncs_in;
	bool said_goodbye; /* the peer left on purpose: nothing to resume */
	/* under wlock: this side said goodbye (nothing but control goes out
	 * after it), and half-closed once that was written (then nothing at
	 * all: conn_say_goodbye) */
	bool saying_goodbye, write_closed;
	atomic_bool kill;   /* dropped as a slow consumer: nothing to resume */
	uint32_t batch_max; /* largest write */
	uint64_t peer_max_message;
	uint64_t peer_keepalive_ms;
	uint64_t reasm_budget;
	uint64_t created_ms, last_rx_ms, last_ping_ms;
	uint64_t peer_ping_ms;  /* I/O thread: the peer's last PING came then (0: none) */
	uint32_t pings_skipped; /* I/O thread: ours left out since the last we sent */
	uint64_t slow_check_ms; /* when the channels were last looked at for a slow consumer */
	uint64_t rtt_us;        /* shortest round trip seen by PING/PONG, 0 until measured */
	/* I/O thread: the peer's wall clock minus ours, in microseconds, from
	 * a PONG whose round trip was within 1.5 times the shortest seen
	 * (offset_rtt_us, 0: none yet); accurate to offset_err_us, half the
	 * round trip of that PONG */
	int64_t clock_offset_us;
	uint64_t offset_rtt_us, offset_err_us;

	pthread_mutex_t wlock;
	uint8_t *out;
	size_t out_len, out_cap;
	size_t out_peak;  /* the most conn->out held since the timers looked */
	uint64_t obig_ms; /* when they last saw it hold a quarter of out_cap */
	bool epollout;
	atomic_bool choked; /* the socket took less than offered: wait for EPOLLOUT */
	atomic_int dead;    /* set first when the connection fails */
	atomic_int pending; /* rings or conn->out may hold data */
	/* on env->work; work_next is the producer's until the loop takes the
	 * stack and the loop's until it clears `listed` */
	atomic_bool listed;
	struct conn *work_next;
	_Atomic uint64_t pending_since_ns; /* when data first waited (batching.max_delay_us) */
	_Atomic uint64_t last_direct_ns;   /* the last write from a publishing thread */
	struct outchan_budget budget;      /* what the send rings may hold */
	struct outchan_link olink;         /* what its send channels share (set at HELLO) */

	struct outchan **outv; /* under wlock */
	int nout, out_cap_v;
	struct chanid out_ids; /* I/O thread: the send channels by id */
	/* I/O thread: the token of a PING sent for ids held back (0: none out) */
	uint64_t settle_ping_us;
	/* The send channels with data to write (under wlock, plus `ready`,
	 * where producers list channels newly), and those that keep written
	 * frames until the peer acknowledges them (under wlock): a flush and
	 * the timers look at these, not at every channel. */
	struct outchan_ready ready;
	struct outchan *act_head, *act_tail;
	int nact;
	struct outchan *kept_head;
	/* under wlock: channels whose rings grew past OUTCHAN_SHRINK_MIN, whose
	 * buffers go back once idle (shrink_rings) */
	struct outchan **grown;
	uint32_t ngrown, grown_cap;
	struct outchan **blockedv; /* under wlock: channels that want a BLOCKED report */
	int nblocked, blocked_cap;
	struct idtab ins;      /* receive channels by id */
	struct inchan **dirty; /* channels to acknowledge after this read */
	uint32_t ndirty, dirty_cap;
	uint32_t dirty_peak; /* the most acknowledged at once since the timers looked */
	/* channels whose CREDIT in this read released frames: released under
	 * one wlock at the end of the read (or before a control message that
	 * may close a channel) */
	struct outchan **credited;
	uint32_t ncredited, credited_cap;
	uint64_t credited_ms;    /* when the last of them came */
	struct inchan **stalled; /* channels with a backlog */
	uint32_t nstalled, stalled_cap;
	struct inchan **spare; /* channels keeping an emptied backlog's buffer */
	uint32_t nspare, spare_cap;
	uint64_t spare_look_ms;  /* when shrink_backlogs last looked at them */
	bool stalled_since_look; /* a channel stalled since then */

	uint8_t *rbuf;
	size_t rlen, rcap, rmax;
	size_t rpeak;            /* the largest read since the timers last looked */
	uint64_t rbig_ms;        /* when they last saw a read of a quarter of rcap */
	uint64_t lbig_ms;        /* or a list used past a quarter of its size */
	uint64_t shrink_look_ms; /* when the timers last looked for buffers to shrink */
	bool got_preamble, got_hello;

	_Atomic uint64_t batches, batch_bytes, batch_largest, messages_in, bytes_in;
};

/* ---- the event loop's calls (I/O thread) ---- */

struct conn *conn_new(const struct conn_env *env, int fd, bool outbound, bool connecting,
                      const char *endpoint, const struct conn_ops *ops, void *arg, void *ev_tag);
/* Speak TLS on this connection (before conn_start; env->tls set). */
int conn_use_tls(struct conn *c);
void conn_start(struct conn *c);
void conn_on_event(struct conn *c, uint32_t events);
void conn_fail(struct conn *c, const char *why);
void conn_free(struct conn *c);
/* Keepalives, deadlines, a slow consumer, buffers to shrink. A PING due
 * within slack_ms goes now, so that the loop can see to many connections'
 * keepalives at once. True if grown buffers went back to the heap. */
bool conn_timers(struct conn *c, uint64_t now_ms, uint64_t slack_ms);
/* When conn_timers next has work to do (clock_ms), or 0 while anything is
 * under way on the connection: a handshake, a backlog, a failed write.
 * Data in a ring (unsent or unacknowledged) brings the slow-consumer check
 * forward, and a buffer or ring grown for a burst a look a second after the
 * last (to give it back). exact: look through the channels that kept written frames,
 * dropping those since acknowledged; without it (every round of a busy
 * connection: the list may be long), a channel acknowledged since the last
 * exact look still counts as held, which costs at most one early look. */
uint64_t conn_next_timer(struct conn *c, bool exact);
/* Take env->work whole: the connections listed since the last take, in a
 * chain. Walk it with conn_work_unlist, which returns the next one and
 * unlists this one, so that a later change lists it again: look at a
 * connection's flags only after unlisting it. */
struct conn *conn_work_take(_Atomic(struct conn *) *work);
struct conn *conn_work_unlist(struct conn *c);
/* Close a connection whose write failed on any thread. */
void conn_reap_failed_write(struct conn *c);
/* Offer the backlogs again; true if any emptied. */
bool conn_retry_stalled(struct conn *c);
/* Frames received and not yet delivered, or channels still open: the
 * connection cannot be freed yet. */
bool conn_busy(const struct conn *c);
/* Bytes queued to write; the sum of the rings' tails (moves while a
 * publisher adds to a batch). */
size_t conn_queued(struct conn *c);
uint64_t conn_tail_mark(struct conn *c);
/* A publish stamp from this peer's clock on ours (I/O thread). The offset
 * is applied only when it is larger than its own uncertainty (half the
 * round trip it was measured on): two processes on one host share a clock,
 * and a correction there would only add error. */
uint64_t conn_local_stamp(const struct conn *c, uint64_t peer_stamp_us);

/* ---- writing (any thread) ---- */

/* Write what is queued; true if the socket took anything. A write that
 * fails marks the connection dead; the I/O thread closes it. */
bool conn_flush(struct conn *c);
/* The same unless another thread is writing (then that one writes it). */
bool conn_try_flush(struct conn *c);
/* This node is closing: send GOODBYE with reason, and half-close the
 * connection once it is written. Nothing is written after it, so the peer
 * reads the goodbye before it can find the connection ended (a write
 * after the half-close would fail, and the close that follows could reach
 * the peer first): what it sends meanwhile is still read. I/O thread. */
void conn_say_goodbye(struct conn *c, const char *reason);
/* Data frames wait to be written: with batching.max_delay_us, the hold
 * starts now unless data was already waiting. */
void conn_data_pending(struct conn *c);
/* Data waits to be written, without a batching hold: the I/O thread
 * writes it at its next round. Any thread. */
void conn_mark_pending(struct conn *c);
void conn_send_ctl(struct conn *c, const struct ctl_msg *m);

static inline int
conn_state(const struct conn *c)
{
	return atomic_load_explicit(&c->state, memory_order_relaxed);
}

/* ---- channels (I/O thread) ---- */

/* Open a send channel for a source, announcing it with OPEN (whose key,
 * NUL-terminated, must outlive the channel: it names it in messages).
 * NULL: tern_last_error() says why (out of memory, or no id free). */
struct outchan *conn_open_outchan(struct conn *c, const struct ctl_msg *open, bool reliable,
                                  const struct outchan_ops *ops, void *arg);
/* Remove a send channel (telling the peer if tell) and free it. */
void conn_close_outchan(struct conn *c, struct outchan *oc, bool tell);
/* A receive channel for an OPEN; TERN_EPROTO for a bad or reused id. */
int conn_open_inchan(struct conn *c, uint64_t id, const struct inchan_ops *ops, void *arg);
static inline struct inchan *
conn_inchan(struct conn *c, uint64_t id)
{
	return idtab_get(&c->ins, id);
}
void conn_close_inchan(struct conn *c, struct inchan *in);

#endif
