/*
 * layer.h - the transports a cell can measure, behind one interface.
 *
 * A server listens and hands every message it receives to a callback; a
 * client connects, sends messages, and may get the server's replies through
 * its own callback. The `tern` layer is a tern publisher and subscriber pair
 * on each side; the `tcp` layer is the plain-TCP reference: the same bytes,
 * each message behind a 4-byte little-endian length, written straight to
 * the socket (buffered into batch_bytes writes in batched mode; one write
 * per message with TCP_NODELAY in low-latency mode). The `zmq` layer, built
 * when libzmq is found, is ZeroMQ PUB/SUB: what users would pick instead.
 * It has no reply path (server_reply is NULL), so it runs no pingpong.
 *
 * Callbacks run on a thread of the layer (the tcp server's reader, the tern
 * node's I/O thread, the zmq server's receiving thread); they must not block
 * for long.
 */
#ifndef BENCH_LAYER_H
#define BENCH_LAYER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* conn: which client connection the message came on (tcp; 0 for tern). */
typedef void (*layer_msg_fn)(void *arg, uint32_t conn, const void *data, size_t len);

struct layer_opts {
	bool lowlat;
	uint32_t batch_bytes; /* largest write in batched mode; 0: 65536 */
	uint64_t msg_bytes;   /* the cell's message size, to size queues; 0: unknown */
	/* --tls: the run's certificate (cert.pem, key.pem) in this folder, and
	 * TLS 1.3 on every connection (tern: tls:// endpoints; tcp: OpenSSL on
	 * the socket, tlsbench.h); NULL: plain */
	const char *tls_dir;
	uint32_t keys; /* messages go round-robin over this many keys; 0 or 1: one */
};

/* The key of message i when messages go round-robin over n keys: what the
 * tern layer publishes on and the tcp and zmq layers carry in each
 * message ("bench/up" for one key, else "bench/up/K"). */
void layer_key(char *buf, size_t len, uint32_t keys, uint64_t i);

struct layer_ops {
	const char *name;
	/* Listen on listen_ep; bound gets the endpoint to connect to. */
	int (*server_open)(void **out, const struct layer_opts *o, const char *listen_ep,
	                   layer_msg_fn fn, void *arg, char *bound, size_t bound_len, char *err,
	                   size_t err_len);
	/* Answer a message; only from inside the server's callback. NULL for a
	 * layer without a reply path: the matrix gives it no pingpong cells. */
	int (*server_reply)(void *srv, uint32_t conn, const void *data, size_t len);
	/* The first error the server met (a broken frame, a failed write), or NULL. */
	const char *(*server_error)(void *srv);
	void (*server_close)(void *srv);

	/* Connect to ep; reply_fn (may be NULL) gets what the server answers. */
	int (*client_open)(void **out, const struct layer_opts *o, const char *ep,
	                   layer_msg_fn reply_fn, void *arg, char *err, size_t err_len);
	/* Wait until messages sent now will be delivered (tern: a matched subscriber). */
	int (*client_ready)(void *cli, int timeout_ms, char *err, size_t err_len);
	/* Send one message (blocks while the transport is full). 0 or negative. */
	int (*client_send)(void *cli, const void *data, size_t len);
	/* Push out what is buffered; final: also wait until it is written. */
	int (*client_flush)(void *cli, bool final);
	void (*client_close)(void *cli);
};

extern const struct layer_ops layer_tcp_ops;
extern const struct layer_ops layer_tern_ops;
extern const struct layer_ops layer_zmq_ops; /* only when built with libzmq */

/* The layer called name ("tcp", "tern", "zmq"), or NULL when there is none
 * or this bench was built without it (see layer_built_without). */
const struct layer_ops *layer_find(const char *name);

/* true when name is a layer this bench was built without ("zmq" without
 * libzmq): say so rather than "no such layer". */
bool layer_built_without(const char *name);

/* The layers this bench was built with, in the order a run interleaves
 * them: tcp, tern, then zmq. *n gets how many (at most LAYER_MAX). */
const struct layer_ops *const *layer_all(size_t *n);

#define LAYER_MAX 3

/* The largest message a layer carries in the bench (the bytes scenario's 64 MiB). */
#define LAYER_MAX_MESSAGE (64u * 1024 * 1024)

#endif
