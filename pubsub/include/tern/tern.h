/*
 * tern.h - the public API of libtern, a publish/subscribe middleware.
 *
 * A tern_node is one participant: it listens and connects over TCP or
 * Unix-domain sockets, and on each connection every key travels on its own
 * multiplexed channel with its own credit-based flow control. Publishers
 * (tern_pub) send on one key; subscribers (tern_sub) receive every message
 * whose key matches a key expression ("sensors/ * /temp", "sensors/ **").
 *
 * Conventions:
 *  - Functions return 0 or a negative TERN_E... code. tern_strerror() names
 *    the code; tern_last_error() gives a sentence about the last failure in
 *    the calling thread (which endpoint, which key, what to do).
 *  - Objects are opaque and owned by the caller from _open() to _close().
 *    Close functions accept NULL. A pub or sub must be closed before the node.
 *  - Every function is thread safe unless its comment says otherwise.
 *  - A subscriber's callback runs on the node's I/O thread for messages from
 *    peers, and on the publishing thread, inside tern_publish, for messages
 *    of a publisher of the same node. It must not block, and must not close
 *    the sub it was called for. It may publish: see tern_publish.
 */
#ifndef TERN_H
#define TERN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TERN_VERSION          "0.1.0"
#define TERN_PROTOCOL_VERSION 3

enum tern_error {
	TERN_OK = 0,
	TERN_EINVAL = -1,      /* a bad argument or configuration value */
	TERN_ENOMEM = -2,      /* out of memory */
	TERN_ETIMEDOUT = -3,   /* the deadline passed */
	TERN_ECLOSED = -4,     /* the node or connection is closed */
	TERN_EPROTO = -5,      /* the peer broke the wire protocol */
	TERN_EVERSION = -6,    /* the peer speaks another protocol version */
	TERN_EMSGSIZE = -7,    /* message larger than max_message_bytes */
	TERN_EENDPOINT = -8,   /* an endpoint string that does not parse */
	TERN_EKEY = -9,        /* a key or key expression that does not parse */
	TERN_ESYS = -10,       /* a system call failed; tern_last_error() says which */
	TERN_EAGAIN = -11,     /* best effort: the queue was full, the message was dropped */
	TERN_EADDRINUSE = -12, /* the address to listen on is taken */
	TERN_EACCES = -13      /* a peer's access rules (acl) refused a subscription or publisher */
};

/* The name of an error code, e.g. "timed out". Never NULL. */
const char *tern_strerror(int err);

/* A sentence about the last error returned to the calling thread. */
const char *tern_last_error(void);

/* The library version, e.g. "0.1.0", and the wire protocol version. */
const char *tern_version(void);
int tern_protocol_version(void);

/*
 * A peer routes for the nodes connected to it; a router also carries
 * traffic and subscriptions between routers. A client routes nothing and
 * does not listen: the nodes it connects to tell it only the subscriptions
 * that meet its publishers' keys, so a thousand clients of a router do not
 * each hold every subscription (docs/PROTOCOL.md, "Clients").
 */
enum tern_mode { TERN_MODE_PEER = 0, TERN_MODE_ROUTER = 1, TERN_MODE_CLIENT = 2 };
enum tern_reliability { TERN_RELIABLE = 0, TERN_BEST_EFFORT = 1 };
enum tern_log_level { TERN_LOG_ERROR = 0, TERN_LOG_WARN, TERN_LOG_INFO, TERN_LOG_DEBUG };

typedef void (*tern_log_fn)(void *arg, int level, const char *line);

/*
 * One access rule (docs/CONFIG.md, "acl"): what a peer may declare on its
 * connections to this node. peer is a proven identity (a TLS certificate's
 * common name) or "*" (every peer, including one that proved nothing). A
 * subscription to E is allowed when an allow_sub expression includes E
 * (matches every key E matches); a publisher on key K when an allow_pub
 * expression matches K.
 */
typedef struct tern_acl_rule {
	const char *peer;
	const char *const *allow_pub;
	size_t allow_pub_len;
	const char *const *allow_sub;
	size_t allow_sub_len;
} tern_acl_rule;

/*
 * Node configuration. Fill it with tern_config_init(), then change fields.
 * Field names follow the config-file keys of docs/CONFIG.md.
 */
typedef struct tern_config {
	const char *id;              /* NULL: "<hostname>-<pid>" */
	int mode;                    /* enum tern_mode */
	bool low_latency;            /* write each message at once, no batching */
	uint32_t batch_max_bytes;    /* batching.max_bytes: largest single write */
	uint32_t batch_max_delay_us; /* batching.max_delay_us: 0 = flush when idle */
	int reliability;             /* enum tern_reliability, default for publishers */
	uint64_t queue_max_bytes;    /* queue.max_bytes: bound per connection */
	uint64_t max_message_bytes;  /* larger messages are refused */
	uint32_t chunk_bytes;        /* messages above this travel in chunks */
	uint32_t publish_timeout_ms; /* reliable: how long publish may block */
	uint32_t
	    slow_consumer_ms; /* reliable: a peer that takes nothing for this long is dropped */
	uint32_t handshake_timeout_ms;  /* a silent new connection is dropped after this */
	uint32_t keepalive_ms;          /* a peer silent for 3x this is considered dead */
	uint32_t reconnect_initial_ms;  /* first retry delay after a lost connection */
	uint32_t reconnect_max_ms;      /* retry delay cap (exponential backoff) */
	uint32_t telemetry_interval_ms; /* telemetry.interval_ms: publish @tern/ID/stats this often
	                                   (0: never) */
	/* TLS, for tls:// endpoints (docs/CONFIG.md): PEM file paths, NULL for
	 * none; the files are read by tern_node_open, which names a bad one. */
	const char *tls_cert; /* tls.cert: this node's certificate (a chain may follow) */
	const char *tls_key;  /* tls.key: its private key */
	const char *tls_ca;   /* tls.ca: the authority that signs peers' certificates */
	int tls_verify_peer;  /* tls.verify_peer: 1 check every peer's certificate against
	                         tls_ca (a listener demands one: mutual TLS), 0 check none,
	                         -1 (default) 1 when tls_ca is set */
	int log_level;        /* enum tern_log_level */
	tern_log_fn log_fn;   /* NULL: log lines go to stderr */
	void *log_arg;
	/* acl: access rules applied to every connection's SUB and OPEN (see
	 * tern_acl_rule). acl_set false: everything is allowed; true with no
	 * rules: nothing is. Copied by tern_node_open. Local publishers and
	 * subscribers of the node are not subject to them. */
	const tern_acl_rule *acl;
	size_t acl_len;
	bool acl_set;
} tern_config;

/* Fill cfg with the defaults of docs/CONFIG.md. */
void tern_config_init(tern_config *cfg);

/*
 * Check cfg as tern_node_open would, reading its TLS files, without opening
 * a node. Returns 0 or TERN_EINVAL with a sentence naming the bad value or
 * file (tern_last_error()). Thread-safe.
 */
int tern_config_check(const tern_config *cfg);

typedef struct tern_node tern_node;
typedef struct tern_pub tern_pub;
typedef struct tern_sub tern_sub;

/*
 * Open a node and start its I/O thread. The config is copied (strings too).
 * On success *out owns the node. Errors: TERN_EINVAL (a bad value, or a TLS
 * file that cannot be read or does not fit: the message names it),
 * TERN_ENOMEM, TERN_ESYS.
 */
int tern_node_open(tern_node **out, const tern_config *cfg);

/*
 * Listen on an endpoint: "tcp://HOST:PORT", "tcp://[IPV6]:PORT",
 * "tls://HOST:PORT" or "unix:///absolute/path". With port 0 the system picks
 * one; the endpoint actually bound is written to bound (if not NULL).
 * tls:// needs tls_cert and tls_key. Errors: TERN_EENDPOINT,
 * TERN_EADDRINUSE, TERN_ESYS, TERN_EINVAL (tls:// without a certificate,
 * or a node in client mode).
 */
int tern_node_listen(tern_node *node, const char *endpoint, char *bound, size_t bound_len);

/*
 * Connect to an endpoint. Returns once the endpoint parses; the connection is
 * made in the background and made again, with exponential backoff, whenever
 * it is lost. Errors: TERN_EENDPOINT.
 */
int tern_node_connect(tern_node *node, const char *endpoint);

/*
 * Wait until at least n peers have completed the handshake, or timeout_ms
 * passes (negative: forever). Returns 0 or TERN_ETIMEDOUT.
 */
int tern_node_wait_peers(tern_node *node, int n, int timeout_ms);

/* Close the node: flush what is queued (bounded by publish_timeout_ms), say
 * goodbye to each peer, stop the I/O thread, free what the node holds.
 * Close its publishers and subscriptions first: one still open is not
 * freed, and its handle must not be used once the node is closed. */
void tern_node_close(tern_node *node);

/* The node's id, valid until close. */
const char *tern_node_id(const tern_node *node);

/*
 * Publishers.
 * tern_pub_open: declare a publisher on a key (no wildcards). reliability is
 * an enum tern_reliability, or -1 for the node's default.
 * In client mode the first tern_publish (or tern_pub_matched) on it waits
 * until the nodes the client is connected to have told it the subscriptions
 * that meet the key (at most publish_timeout_ms; from a subscriber's
 * callback it does not wait: they come as the I/O thread reads on).
 * Errors: TERN_EKEY, TERN_ENOMEM.
 */
int tern_pub_open(tern_pub **out, tern_node *node, const char *key, int reliability);

/*
 * Publish one message; the data is copied before the call returns. A message
 * that no subscriber's key expression matches costs no I/O.
 * Reliable: blocks while a queue or a flow-control window is full, up to
 * publish_timeout_ms, then returns TERN_ETIMEDOUT (the message is not sent).
 * Best effort: a full queue drops the message, counts it and returns
 * TERN_EAGAIN. TERN_EMSGSIZE if len exceeds max_message_bytes (the node's or
 * a peer's). Safe to call from several threads on the same pub.
 * From a subscriber's callback on the I/O thread (a request/reply server)
 * it never blocks: where a reliable publish would wait, the queue grows up
 * to queue.max_bytes instead, and beyond that, or while another thread is
 * publishing on the same pub, it returns TERN_EAGAIN (not sent).
 * Once a peer has refused the publisher (its acl), tern_publish returns
 * TERN_EACCES, and so does tern_pub_close; tern_last_error() says which
 * node refused which key. The message still went to every other
 * subscriber: the refusing peer drops what reaches it.
 * Likewise, once a reliable publisher's channel to a peer that wants its key
 * could not be opened (out of memory, or every channel id of that connection
 * in use), tern_publish and tern_pub_close return TERN_ENOMEM, naming the
 * peer and the key: what it publishes does not reach that peer.
 */
int tern_publish(tern_pub *pub, const void *data, size_t len);

/* Wait until everything this pub queued is written to the sockets. */
int tern_pub_flush(tern_pub *pub, int timeout_ms);

/* How many subscribing peers (connections) this pub currently feeds,
 * plus 1 if a subscriber in this node matches. */
int tern_pub_matched(tern_pub *pub);

/*
 * Close a publisher. Waits up to publish_timeout_ms until the peers have
 * consumed what reliable channels still hold. Returns 0 when every reliable
 * message reached every subscriber it was routed to, else TERN_ECLOSED:
 * some were given up on (a peer that did not come back within
 * slow_consumer_ms, one dropped as a slow consumer, or the close deadline);
 * tern_last_error() says how many. The pub is freed either way.
 */
int tern_pub_close(tern_pub *pub);

/* A received message. Pointers stay valid until the callback returns, or
 * for tern_sub_recv until the next recv or close on that sub. */
typedef struct tern_msg {
	const char *key;
	const void *data;
	size_t len;
	uint64_t seq;          /* the publisher's sequence number, from 1 */
	const char *publisher; /* "<node id>/<publisher number>" */
} tern_msg;

typedef void (*tern_sub_fn)(void *arg, const tern_msg *msg);

/*
 * Subscribe to a key expression. With fn, each message is handed to fn on
 * the I/O thread; with fn NULL, messages queue for tern_sub_recv().
 * Errors: TERN_EKEY, TERN_ENOMEM.
 */
int tern_sub_open(tern_sub **out, tern_node *node, const char *keyexpr, tern_sub_fn fn, void *arg);

/*
 * Take the next message (pull subscribers only). Blocks up to timeout_ms
 * (0: do not block; negative: forever). Returns 0, TERN_ETIMEDOUT, or
 * TERN_EINVAL for a callback subscriber. Once a peer has refused the
 * subscription (its acl), TERN_EACCES after the messages already queued;
 * tern_last_error() says which node refused what. Not for use by two
 * threads at once.
 */
int tern_sub_recv(tern_sub *sub, tern_msg *msg, int timeout_ms);

void tern_sub_close(tern_sub *sub);

/*
 * 0, or TERN_EACCES once a peer has refused the subscription (for a callback
 * subscriber, the only way to learn it), with tern_last_error() saying
 * which node refused what.
 */
int tern_sub_status(tern_sub *sub);

/* Counters. All are totals since open. */
typedef struct tern_stats {
	uint64_t messages;      /* published (pub, node: sent) or delivered (sub) */
	uint64_t bytes;         /* payload bytes of those messages */
	uint64_t dropped;       /* best effort drops */
	uint64_t missed;        /* sub: sequence numbers never received */
	uint64_t batches;       /* writes to sockets */
	uint64_t batch_bytes;   /* bytes in those writes (mean batch = batch_bytes / batches) */
	uint64_t batch_largest; /* the largest single write */
	uint64_t messages_in;   /* node: messages received from peers */
	uint64_t bytes_in;      /* node: payload bytes received from peers */
	uint64_t connections;   /* node: connections currently established */
	/* pub: reliable messages given up on (see tern_pub_close); node: those
	 * of its publishers, open and closed, and those it relayed for another
	 * node's publisher and gave up on (a peer that did not come back within
	 * slow_consumer_ms, or dropped as a slow consumer), which that
	 * publisher is not told of */
	uint64_t undelivered;
} tern_stats;

void tern_pub_stats(tern_pub *pub, tern_stats *st);
void tern_sub_stats(tern_sub *sub, tern_stats *st);
void tern_node_stats(tern_node *node, tern_stats *st);

/*
 * One JSON object describing the node: id, mode, per-connection peer id,
 * endpoint, mode (low-latency or batched) and counters, per-channel counters.
 * Writes at most len bytes including the NUL; returns the length the whole
 * text needs (like snprintf).
 */
size_t tern_node_stats_json(tern_node *node, char *buf, size_t len);

/*
 * Key expressions. A key is "/"-separated non-empty chunks without wildcards;
 * a key expression may use "*" (exactly one chunk) and "**" (zero or more).
 * A chunk that starts with '@' is reserved for tern's own keys (telemetry
 * under "@tern") and matched only by name: no wildcard matches it, so "**"
 * never delivers telemetry; a subscription must name "@tern" to get it.
 * The check functions return 0 or TERN_EKEY (tern_last_error() names the
 * key and the fault).
 */
int tern_key_check(const char *key);
int tern_keyexpr_check(const char *keyexpr);
bool tern_keyexpr_match(const char *keyexpr, const char *key);
/* true if some key could match both expressions */
bool tern_keyexpr_intersect(const char *a, const char *b);
/* true if every key b matches, a matches too (a covers b) */
bool tern_keyexpr_includes(const char *a, const char *b);

/*
 * Check access rules: 0, or TERN_EINVAL with tern_last_error() naming the
 * rule, the list and the character of a bad expression ("acl[1].allow_sub[0]
 * 'a/b*' at character 3: ..."). Unknown peer names are fine.
 */
int tern_acl_check(const tern_acl_rule *rules, size_t n);

#ifdef __cplusplus
}
#endif

#endif
