/*
 * layer_zmq.c - ZeroMQ PUB/SUB carrying the bench's messages: what users
 * would pick instead of tern, over the same emulated links.
 *
 * Server: a SUB socket subscribed to everything, bound at the cell's
 * endpoint (tcp:// as given, port 0 written as zmq's "*"; unix:// as ipc://),
 * and a thread that receives each message and hands it to the callback. A
 * SUB socket does not say which publisher a message came from, so conn is
 * always 0; every record's id carries its sender, and that is what the
 * receiver's checks use.
 *
 * Client: a context of its own (one I/O thread, as each tern sender is its
 * own node) and an XPUB socket connected to the endpoint, which may be the
 * link emulator's relay: ZMTP over a plain TCP forwarder.
 *
 * Nothing may be lost, and a PUB socket drops messages at its high-water
 * mark and before it knows of a subscriber:
 * - XPUB with ZMQ_XPUB_NODROP refuses a message (EAGAIN) while the pipe to a
 *   subscriber is full instead of dropping it, and a blocking zmq_send then
 *   waits inside libzmq until the I/O thread has taken half the pipe (its
 *   low-water mark). zmq_poll cannot do that wait: an XPUB socket always
 *   reports POLLOUT (libzmq issue #1597), so a poll loop would spin.
 *   ZMQ_SNDTIMEO bounds the wait, as tern's publish timeout does: a sender
 *   that cannot queue one message for SEND_STALL_MS fails its cell.
 * - client_ready reads the subscription off the XPUB socket, so nothing is
 *   sent before the subscriber is known (the "slow joiner").
 *
 * High-water marks (both ends): zmq's default of 1000 messages a pipe,
 * lowered for large messages so that one pipe holds about QUEUE_BYTES, and
 * never below 2 (64 KiB messages: 64; 1 MiB: 4; 64 MiB: 2). A hundred fanin
 * publishers of 64 MiB messages at the default would each park 64 GB. The
 * publisher's kernel send buffer is 128 KiB, as in the tcp layer and for the
 * same reason: left alone, the kernel grows it to 4 MiB on loopback.
 *
 * Modes: zmq has no batching switch. Its I/O thread writes whatever is
 * queued, gathered into writes of up to 8 KiB, as soon as the socket takes
 * it, with TCP_NODELAY always on. Both modes use the same settings, and
 * batch_bytes does not apply.
 *
 * Closing: every socket has ZMQ_LINGER 0. By then the cell has waited at the
 * receiver for what was sent, and a socket lingering on a peer that stopped
 * reading would hang zmq_ctx_term forever.
 */
#include "layer.h"
#include "net.h"

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zmq.h>

#define DEFAULT_HWM   1000
#define QUEUE_BYTES   (4u * 1024 * 1024)
#define CLIENT_SNDBUF (128 * 1024)
#define SEND_STALL_MS 5000
#define ZMQ_EP_MAX    (NET_EP_MAX + 16)

static int
queue_hwm(const struct layer_opts *o)
{
	uint64_t n;

	if (o->msg_bytes == 0) {
		return DEFAULT_HWM;
	}
	n = QUEUE_BYTES / o->msg_bytes;
	return n < 2 ? 2 : n > DEFAULT_HWM ? DEFAULT_HWM : (int)n;
}

static int
fail(char *err, size_t err_len, const char *what)
{
	snprintf(err, err_len, "zmq: %s: %s", what, zmq_strerror(errno));
	return -1;
}

static int
set_int(void *sock, int option, int value, const char *name, char *err, size_t err_len)
{
	if (zmq_setsockopt(sock, option, &value, sizeof(value)) != 0) {
		return fail(err, err_len, name);
	}
	return 0;
}

/* The bench's endpoint in zmq's words: unix:// is ipc://, and a listener's
 * port 0 (any free port) is "*". */
static int
to_zmq_endpoint(const char *ep, bool listen, char *out, size_t len, char *err, size_t err_len)
{
	size_t n = strlen(ep);
	int w;

	if (net_is_unix(ep)) {
		w = snprintf(out, len, "ipc://%s", ep + 7);
	} else if (strncmp(ep, "tcp://", 6) == 0) {
		if (listen && n > 8 && strcmp(ep + n - 2, ":0") == 0) {
			w = snprintf(out, len, "%.*s:*", (int)(n - 2), ep);
		} else {
			w = snprintf(out, len, "%s", ep);
		}
	} else {
		snprintf(err, err_len, "zmq: endpoint %s: expected tcp:// or unix://", ep);
		return -1;
	}
	if (w < 0 || (size_t)w >= len) {
		snprintf(err, err_len, "zmq: endpoint %s is too long", ep);
		return -1;
	}
	return 0;
}

/* ---- server ---- */

struct zmq_server {
	void *ctx;
	void *sock; /* the receiving thread's once it starts */
	layer_msg_fn fn;
	void *arg;
	pthread_t thread;
	bool started;
	pthread_mutex_t mu; /* guards error */
	char error[200];
};

static void
server_fail(struct zmq_server *s, const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&s->mu);
	if (s->error[0] == '\0') {
		va_start(ap, fmt);
		vsnprintf(s->error, sizeof(s->error), fmt, ap);
		va_end(ap);
	}
	pthread_mutex_unlock(&s->mu);
}

/*
 * Receive until the context is shut down. One zmq_msg_t is reused: each
 * zmq_msg_recv releases what it held before. The message's bytes are
 * libzmq's (its decoder allocates a large message, or shares its read
 * buffer); the callback reads them in place.
 */
static void *
server_main(void *arg)
{
	struct zmq_server *s = arg;
	zmq_msg_t msg;

	zmq_msg_init(&msg);
	for (;;) {
		if (zmq_msg_recv(&msg, s->sock, 0) < 0) {
			if (errno == EINTR) {
				continue;
			}
			if (errno != ETERM) {
				server_fail(s, "zmq server: receive: %s", zmq_strerror(errno));
			}
			break;
		}
		s->fn(s->arg, 0, zmq_msg_data(&msg), zmq_msg_size(&msg));
	}
	zmq_msg_close(&msg);
	zmq_close(s->sock);
	return NULL;
}

static void
zmq_server_close(void *srv)
{
	struct zmq_server *s = srv;

	if (s == NULL) {
		return;
	}
	if (s->started) {
		/* Wakes the receiving thread with ETERM; it closes its socket. */
		zmq_ctx_shutdown(s->ctx);
		pthread_join(s->thread, NULL);
	} else if (s->sock != NULL) {
		zmq_close(s->sock);
	}
	if (s->ctx != NULL) {
		while (zmq_ctx_term(s->ctx) != 0 && errno == EINTR) {
		}
	}
	pthread_mutex_destroy(&s->mu);
	free(s);
}

/* ZMQ_LAST_ENDPOINT back in the bench's words. */
static int
read_bound(void *sock, char *bound, size_t bound_len, char *err, size_t err_len)
{
	char ep[ZMQ_EP_MAX];
	size_t len = sizeof(ep);
	int w;

	if (zmq_getsockopt(sock, ZMQ_LAST_ENDPOINT, ep, &len) != 0) {
		return fail(err, err_len, "read the bound endpoint");
	}
	if (strncmp(ep, "ipc://", 6) == 0) {
		w = snprintf(bound, bound_len, "unix://%s", ep + 6);
	} else {
		w = snprintf(bound, bound_len, "%s", ep);
	}
	if (w < 0 || (size_t)w >= bound_len) {
		snprintf(err, err_len, "zmq: the bound endpoint %s is too long", ep);
		return -1;
	}
	return 0;
}

static int
zmq_server_open(void **out, const struct layer_opts *o, const char *listen_ep, layer_msg_fn fn,
                void *arg, char *bound, size_t bound_len, char *err, size_t err_len)
{
	struct zmq_server *s = calloc(1, sizeof(*s));
	int64_t max_msg = LAYER_MAX_MESSAGE;
	char ep[ZMQ_EP_MAX];

	*out = NULL;
	if (s == NULL) {
		snprintf(err, err_len, "zmq server: out of memory");
		return -1;
	}
	pthread_mutex_init(&s->mu, NULL);
	s->fn = fn;
	s->arg = arg;
	if (to_zmq_endpoint(listen_ep, true, ep, sizeof(ep), err, err_len) != 0) {
		goto fail;
	}
	s->ctx = zmq_ctx_new();
	if (s->ctx == NULL) {
		fail(err, err_len, "create the receiver's context");
		goto fail;
	}
	s->sock = zmq_socket(s->ctx, ZMQ_SUB);
	if (s->sock == NULL) {
		fail(err, err_len, "create the SUB socket");
		goto fail;
	}
	if (set_int(s->sock, ZMQ_LINGER, 0, "ZMQ_LINGER", err, err_len) != 0 ||
	    set_int(s->sock, ZMQ_RCVHWM, queue_hwm(o), "ZMQ_RCVHWM", err, err_len) != 0) {
		goto fail;
	}
	if (zmq_setsockopt(s->sock, ZMQ_MAXMSGSIZE, &max_msg, sizeof(max_msg)) != 0) {
		fail(err, err_len, "ZMQ_MAXMSGSIZE");
		goto fail;
	}
	if (zmq_setsockopt(s->sock, ZMQ_SUBSCRIBE, "", 0) != 0) {
		fail(err, err_len, "subscribe to everything");
		goto fail;
	}
	if (zmq_bind(s->sock, ep) != 0) {
		snprintf(err, err_len, "zmq: bind %s: %s", ep, zmq_strerror(errno));
		goto fail;
	}
	if (read_bound(s->sock, bound, bound_len, err, err_len) != 0) {
		goto fail;
	}
	if (pthread_create(&s->thread, NULL, server_main, s) != 0) {
		snprintf(err, err_len, "zmq server: cannot start its thread");
		goto fail;
	}
	s->started = true;
	*out = s;
	return 0;
fail:
	zmq_server_close(s);
	return -1;
}

static const char *
zmq_server_error(void *srv)
{
	struct zmq_server *s = srv;
	const char *e;

	pthread_mutex_lock(&s->mu);
	e = s->error[0] ? s->error : NULL;
	pthread_mutex_unlock(&s->mu);
	return e;
}

/* ---- client ---- */

struct zmq_client {
	void *ctx;
	void *sock;
};

static void
zmq_client_close(void *cli)
{
	struct zmq_client *c = cli;

	if (c == NULL) {
		return;
	}
	if (c->sock != NULL) {
		zmq_close(c->sock);
	}
	if (c->ctx != NULL) {
		while (zmq_ctx_term(c->ctx) != 0 && errno == EINTR) {
		}
	}
	free(c);
}

static int
zmq_client_open(void **out, const struct layer_opts *o, const char *ep, layer_msg_fn reply_fn,
                void *arg, char *err, size_t err_len)
{
	struct zmq_client *c;
	char zep[ZMQ_EP_MAX];

	(void)arg;
	*out = NULL;
	if (reply_fn != NULL) {
		snprintf(err, err_len, "zmq: PUB/SUB has no reply path");
		return -1;
	}
	if (to_zmq_endpoint(ep, false, zep, sizeof(zep), err, err_len) != 0) {
		return -1;
	}
	c = calloc(1, sizeof(*c));
	if (c == NULL) {
		snprintf(err, err_len, "zmq client: out of memory");
		return -1;
	}
	c->ctx = zmq_ctx_new();
	if (c->ctx == NULL) {
		fail(err, err_len, "create a sender's context");
		goto fail;
	}
	c->sock = zmq_socket(c->ctx, ZMQ_XPUB);
	if (c->sock == NULL) {
		fail(err, err_len, "create the XPUB socket");
		goto fail;
	}
	if (set_int(c->sock, ZMQ_LINGER, 0, "ZMQ_LINGER", err, err_len) != 0 ||
	    set_int(c->sock, ZMQ_XPUB_NODROP, 1, "ZMQ_XPUB_NODROP", err, err_len) != 0 ||
	    set_int(c->sock, ZMQ_SNDHWM, queue_hwm(o), "ZMQ_SNDHWM", err, err_len) != 0 ||
	    set_int(c->sock, ZMQ_SNDTIMEO, SEND_STALL_MS, "ZMQ_SNDTIMEO", err, err_len) != 0 ||
	    set_int(c->sock, ZMQ_SNDBUF, CLIENT_SNDBUF, "ZMQ_SNDBUF", err, err_len) != 0) {
		goto fail;
	}
	if (zmq_connect(c->sock, zep) != 0) {
		snprintf(err, err_len, "zmq: connect %s: %s", zep, zmq_strerror(errno));
		goto fail;
	}
	*out = c;
	return 0;
fail:
	zmq_client_close(c);
	return -1;
}

/* Wait for the subscriber's subscription: a PUB socket drops what it sends
 * to nobody, so only now will messages be delivered. */
static int
zmq_client_ready(void *cli, int timeout_ms, char *err, size_t err_len)
{
	struct zmq_client *c = cli;
	uint64_t deadline = net_now_ns() + (uint64_t)timeout_ms * 1000000u;
	unsigned char sub[64];

	for (;;) {
		zmq_pollitem_t it = {.socket = c->sock, .events = ZMQ_POLLIN};
		uint64_t now = net_now_ns();
		int n;

		if (now >= deadline) {
			snprintf(err, err_len,
			         "zmq: the receiver's subscription never reached the sender "
			         "within %d ms",
			         timeout_ms);
			return -1;
		}
		if (zmq_poll(&it, 1, (long)((deadline - now) / 1000000u) + 1) < 0 &&
		    errno != EINTR) {
			return fail(err, err_len, "wait for the subscription");
		}
		n = zmq_recv(c->sock, sub, sizeof(sub), ZMQ_DONTWAIT);
		/* 1 then the prefix: a subscription (0 would be its end). */
		if (n >= 1 && sub[0] == 1) {
			return 0;
		}
		if (n < 0 && errno != EAGAIN && errno != EINTR) {
			return fail(err, err_len, "read the subscription");
		}
	}
}

/*
 * zmq_send copies the message into one of libzmq's own (allocated by libzmq
 * above 33 bytes) before it returns, so the sender's one buffer is free for
 * the next message; zmq_msg_init_data would skip the copy but lend that
 * buffer to the I/O thread until it is written. Blocks while the pipe is full
 * (XPUB_NODROP), for at most SEND_STALL_MS.
 */
static int
zmq_client_send(void *cli, const void *data, size_t len)
{
	struct zmq_client *c = cli;

	if (len > LAYER_MAX_MESSAGE) {
		return -EMSGSIZE;
	}
	for (;;) {
		if (zmq_send(c->sock, data, len, 0) >= 0) {
			return 0;
		}
		if (errno == EAGAIN) {
			return -ETIMEDOUT;
		}
		if (errno != EINTR) {
			return -errno;
		}
	}
}

static int
zmq_client_flush(void *cli, bool final)
{
	(void)cli;
	(void) final;
	/* Nothing waits in the layer: each message is in the socket's pipe, and
	 * the I/O thread writes it as soon as the kernel takes it. zmq has no
	 * call that waits until a socket's queue is written short of closing
	 * it, and closing is no such wait either: with ZMQ_LINGER the session
	 * waits only until the I/O thread has taken the last message from the
	 * pipe, then drops the connection with up to one batch still unwritten
	 * when the kernel's buffer is full (a slow link). So the final flush
	 * returns at once, and the cell waits at the receiver for the last
	 * record, as it does for every layer. */
	return 0;
}

const struct layer_ops layer_zmq_ops = {
    .name = "zmq",
    .server_open = zmq_server_open,
    .server_reply = NULL,
    .server_error = zmq_server_error,
    .server_close = zmq_server_close,
    .client_open = zmq_client_open,
    .client_ready = zmq_client_ready,
    .client_send = zmq_client_send,
    .client_flush = zmq_client_flush,
    .client_close = zmq_client_close,
};

#if defined(__SANITIZE_THREAD__)
#define BENCH_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define BENCH_TSAN 1
#endif
#endif

#ifdef BENCH_TSAN
/*
 * ThreadSanitizer cannot see libzmq's synchronization: libzmq is not built
 * with it, and its queues between a socket and its I/O thread are lock-free.
 * Every message then looks like a race (a malloc in the sending thread, a
 * free in the I/O thread; a buffer the I/O thread filled, read by the
 * receiving thread). The runtime asks the program for default suppressions
 * through this name, so every TSan build of tern bench, run by ctest or by
 * hand, ignores what libzmq does and reports only what tern's own threads do.
 */
const char *__tsan_default_suppressions(void);

const char *
__tsan_default_suppressions(void)
{
	return "called_from_lib:libzmq.so\n"
	       "race:libzmq.so\n";
}
#endif
