/*
 * session.h - who gets what: subscriptions (interests), sources of
 * messages, the route from each source to local subscribers and onward
 * connections, the publish path, and what is kept for a peer that lost its
 * connection.
 *
 * A subscription is known by (origin node, sub id). It spreads from its
 * origin to every node; each node remembers which connections declared it,
 * in order, and routes matching messages only toward the first of them.
 * Those first-heard links form a tree toward the subscriber, so a message
 * follows one path to it. Where several paths exist (routers in a
 * triangle), a message can still arrive twice at a node; each source keeps
 * the highest sequence number it delivered and drops anything at or below
 * it, which ends loops and duplicates alike.
 *
 * Threads and locks (the structures themselves are private to session.c):
 *  - the I/O thread owns interests, remote sources and the lists of
 *    publishers and subscribers; it changes a local source's route under
 *    the source's route lock, which it holds only briefly;
 *  - a publishing thread holds its source's send lock for a whole
 *    publication (it is the producer of the source's rings), copies the
 *    route under the route lock, and sends from the copy without it, so
 *    waiting for room never holds a lock the I/O thread needs. While a
 *    publisher works from its copy, the I/O thread does not free a channel
 *    the copy names: it marks it detached and finishes the change once the
 *    publisher is done;
 *  - lock order: the loop's run lock (loop.h: held by the I/O thread
 *    while it works, and by the declarations and closes that loop_run
 *    runs on their caller's thread; taken with no other lock held), send
 *    lock, then a subscriber queue's lock, the route lock, a connection's
 *    wlock, then the wait lock (a leaf). The I/O thread never waits for a
 *    send lock (it tries it).
 *  - callbacks: a remote message's on the I/O thread; a local publisher's
 *    on the publishing thread, inside tern_publish.
 */
#ifndef TERN_SESSION_H
#define TERN_SESSION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tern/tern.h"

#include "log.h"
#include "loop.h"

struct session;
struct src;  /* a local publisher's source */
struct sink; /* a local subscriber */

/* cfg and log stay the caller's and must outlive the session. */
int session_open(struct session **out, const tern_config *cfg, const struct logger *log,
                 uint64_t instance, uint64_t window_init, uint64_t window_max);
void session_close(struct session *s);
struct loop *session_loop(struct session *s);

int session_pub_open(struct session *s, const char *key, int reliability, struct src **out);
/* Waits (up to publish_timeout_ms) until the peers consumed what was sent;
 * 0, or TERN_ETIMEDOUT / TERN_ECLOSED when reliable messages were not
 * delivered (tern_last_error() says how many, to whom). */
int session_pub_close(struct session *s, struct src *src);
int session_publish(struct session *s, struct src *src, const void *data, size_t len);
int session_pub_flush(struct session *s, struct src *src, int timeout_ms);
int session_pub_matched(struct src *src);
void session_pub_stats(struct src *src, tern_stats *st);

int session_sub_open(struct session *s, const char *keyexpr, tern_sub_fn fn, void *arg,
                     struct sink **out);
void session_sub_close(struct session *s, struct sink *k);
int session_sub_recv(struct sink *k, tern_msg *msg, int timeout_ms);
/* 0, or TERN_EACCES once a peer refused the subscription (see tern_sub_status). */
int session_sub_status(struct sink *k);
void session_sub_stats(struct sink *k, tern_stats *st);

void session_stats(struct session *s, tern_stats *st);

/* ---- telemetry (telemetry.c) ---- */

/* One key as this node sees it: a local publisher (pub), or the messages
 * of a remote publisher delivered to local subscribers (!pub). Totals since
 * the key appeared; latency over the interval since the last report. */
struct session_key_report {
	const char *key;
	const char *publisher; /* "NODE/N": tells apart two publishers of one key */
	bool pub;
	uint64_t messages, bytes, drops, missed;
	uint64_t blocked_us;  /* pub: time spent waiting for room or credit */
	uint64_t queue_bytes; /* pub: bytes queued toward peers now */
	uint64_t lat_count;   /* stamped messages delivered in the interval; 0: no latency */
	uint64_t lat_p50_us, lat_p99_us, lat_p999_us, lat_max_us;
};

struct session_conn_report {
	const char *peer;
	const char *endpoint;
	const char *identity; /* the peer's certificate's common name; "": none proved */
	bool low_latency;
	int peer_mode;                /* enum tern_mode */
	uint64_t rtt_us;              /* 0: not measured yet */
	uint64_t bytes_in, bytes_out; /* totals: payload received, bytes written */
};

struct session_report_ops {
	void (*key)(void *arg, const struct session_key_report *k);
	void (*conn)(void *arg, const struct session_conn_report *c);
};

/* Calls ops for every key and ready connection, on the I/O thread while
 * the caller waits, and starts the next latency interval. */
void session_report(struct session *s, const struct session_report_ops *ops, void *arg);
/* The node's JSON description (see tern_node_stats_json). */
size_t session_stats_json(struct session *s, char *buf, size_t len);

#endif
