/*
 * layer_tcp.c - the plain-TCP reference: what a careful engineer would
 * write to move length-prefixed MessagePack messages over one socket.
 *
 * Client: a blocking socket with a 128 KiB send buffer. Batched mode appends frames to a
 * batch_bytes buffer and writes it when the next frame would not fit (a frame larger than the
 * buffer goes out on its own with one writev). Low-latency mode sets TCP_NODELAY and writes each
 * frame with one writev. A reader thread is started only when the client expects replies.
 *
 * Server: one thread, epoll over the listening socket and every connection;
 * reads up to 256 KiB at a time, parses every whole frame in the buffer and
 * hands it to the callback. Replies in batched mode gather in a per-connection
 * buffer that is written once the frames of the current read are handled;
 * in low-latency mode each reply is one write.
 *
 * With --tls (o->tls_dir) every socket carries TLS 1.3 through OpenSSL
 * (tlsbench.h): each write above becomes one SSL_write of the same bytes
 * (a low-latency frame is put together first, so it is one record, as a
 * careful engineer would), and reads go through SSL_read.
 *
 * With --keys N (N > 1) each message also carries its key, as a tern
 * message does: the frame is the length, one byte of key length, the key
 * ("bench/up/K", round-robin) and the message; the server skips the key.
 */
#include "layer.h"
#include "net.h"
#include "tlsbench.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#define READ_CHUNK    (256 * 1024)
#define HDR           4
#define DEFAULT_BATCH 65536u
#define CLIENT_SNDBUF (128 * 1024)

static void
put_len(unsigned char *p, uint32_t v)
{
	p[0] = (unsigned char)v;
	p[1] = (unsigned char)(v >> 8);
	p[2] = (unsigned char)(v >> 16);
	p[3] = (unsigned char)(v >> 24);
}

static uint32_t
get_len(const unsigned char *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* A growing read buffer that yields whole frames. */
struct framer {
	unsigned char *buf;
	size_t cap;
	size_t len;
	bool keyed; /* each frame starts with a key to skip (--keys) */
};

static int
framer_init(struct framer *f)
{
	f->buf = malloc(READ_CHUNK);
	f->cap = f->buf ? READ_CHUNK : 0;
	f->len = 0;
	f->keyed = false;
	return f->buf ? 0 : -1;
}

/*
 * Hand each whole frame to fn; keep a partial one at the front. Returns -1
 * (with err) for a frame over the limit or a buffer that cannot grow.
 */
static int
framer_deliver(struct framer *f, layer_msg_fn fn, void *arg, uint32_t conn, char *err,
               size_t err_len)
{
	size_t off = 0;

	while (f->len - off >= HDR) {
		uint32_t n = get_len(f->buf + off);

		if (n > LAYER_MAX_MESSAGE) {
			snprintf(err, err_len, "tcp: a frame of %u bytes is over the limit", n);
			return -1;
		}
		if (f->len - off - HDR < n) {
			break;
		}
		if (f->keyed) {
			size_t skip = n > 0 ? 1 + (size_t)f->buf[off + HDR] : 1;
			if (skip > n) {
				snprintf(err, err_len,
				         "tcp: a frame's key is longer than the frame");
				return -1;
			}
			fn(arg, conn, f->buf + off + HDR + skip, n - skip);
		} else {
			fn(arg, conn, f->buf + off + HDR, n);
		}
		off += HDR + (size_t)n;
	}
	if (off > 0) {
		memmove(f->buf, f->buf + off, f->len - off);
		f->len -= off;
	}
	/* Make room for the frame in progress. */
	if (f->len >= HDR) {
		size_t need = HDR + (size_t)get_len(f->buf);

		if (need > f->cap) {
			unsigned char *nb = realloc(f->buf, need);

			if (nb == NULL) {
				snprintf(err, err_len, "tcp: out of memory for a %zu-byte frame",
				         need);
				return -1;
			}
			f->buf = nb;
			f->cap = need;
		}
	}
	return 0;
}

/* Read what the socket has into f; 1 data, 0 EOF, -1 error, 2 would block. */
static int
framer_read(struct framer *f, int fd, struct tlsbench_io *tls, bool block)
{
	size_t room;
	ssize_t n;

	room = f->cap - f->len;
	if (room == 0) {
		return -1;
	}
	if (tls != NULL) {
		n = tlsbench_read(tls, f->buf + f->len, room, block);
		if (n == -2) {
			return 2;
		}
		if (n > 0) {
			f->len += (size_t)n;
		}
		return n > 0 ? 1 : (int)n;
	}
	n = read(fd, f->buf + f->len, room);
	if (n < 0) {
		if (errno == EAGAIN || errno == EWOULDBLOCK) {
			return 2;
		}
		if (errno == EINTR) {
			return 1;
		}
		return -1;
	}
	if (n == 0) {
		return 0;
	}
	f->len += (size_t)n;
	return 1;
}

/* Buffered frame writer (batched) or one write per frame (lowlat). */
struct writer {
	int fd;
	struct tlsbench_io *tls; /* NULL: plain */
	bool lowlat;
	unsigned char *buf;
	size_t cap;
	size_t len;
};

static int
writer_init(struct writer *w, int fd, const struct layer_opts *o)
{
	w->fd = fd;
	w->lowlat = o->lowlat;
	w->cap = o->batch_bytes ? o->batch_bytes : DEFAULT_BATCH;
	w->len = 0;
	w->tls = NULL;
	/* over TLS a low-latency frame is put together, to be one record */
	w->buf = o->lowlat && o->tls_dir == NULL ? NULL : malloc(w->cap);
	return (w->buf != NULL || (o->lowlat && o->tls_dir == NULL)) ? 0 : -1;
}

static int
write_all(struct writer *w, const void *buf, size_t len)
{
	if (w->tls != NULL) {
		return tlsbench_write_all(w->tls, buf, len);
	}
	return net_write_all(w->fd, buf, len);
}

static int
writev2(struct writer *w, const void *a, size_t alen, const void *b, size_t blen)
{
	if (w->tls == NULL) {
		return net_writev2(w->fd, a, alen, b, blen);
	}
	if (w->buf != NULL && alen + blen <= w->cap) {
		memcpy(w->buf, a, alen);
		memcpy(w->buf + alen, b, blen);
		return tlsbench_write_all(w->tls, w->buf, alen + blen);
	}
	if (tlsbench_write_all(w->tls, a, alen) != 0) {
		return -1;
	}
	return tlsbench_write_all(w->tls, b, blen);
}

static int
writer_flush(struct writer *w)
{
	int rc = 0;

	if (w->len > 0) {
		rc = write_all(w, w->buf, w->len);
		w->len = 0;
	}
	return rc;
}

/* key (klen bytes, at most 255) goes before the message when not NULL */
static int
writer_send(struct writer *w, const char *key, size_t klen, const void *data, size_t len)
{
	unsigned char hdr[HDR + 256];
	size_t hlen = HDR;
	int rc;

	if (len > LAYER_MAX_MESSAGE) {
		return -EMSGSIZE;
	}
	if (key != NULL) {
		hdr[HDR] = (unsigned char)klen;
		memcpy(hdr + HDR + 1, key, klen);
		hlen += 1 + klen;
	}
	put_len(hdr, (uint32_t)(hlen - HDR + len));
	if (w->lowlat) {
		return writev2(w, hdr, hlen, data, len);
	}
	if (w->len + hlen + len > w->cap) {
		rc = writer_flush(w);
		if (rc != 0) {
			return rc;
		}
		if (hlen + len > w->cap) {
			return writev2(w, hdr, hlen, data, len);
		}
	}
	memcpy(w->buf + w->len, hdr, hlen);
	memcpy(w->buf + w->len + hlen, data, len);
	w->len += hlen + len;
	return 0;
}

/* ---- server ---- */

struct tcp_conn {
	int fd;
	struct framer in;
	struct writer out;
	struct tlsbench_io tio;
	bool tls;
	bool closed;
};

struct tcp_server {
	struct layer_opts opts;
	layer_msg_fn fn;
	void *arg;
	int lfd;
	int efd;
	int epfd;
	struct tcp_conn **conns;
	size_t nconns;
	size_t cap;
	pthread_t thread;
	bool started;
	char error[200];
};

static void
server_fail(struct tcp_server *s, const char *msg)
{
	if (s->error[0] == '\0') {
		snprintf(s->error, sizeof(s->error), "%s", msg);
	}
}

static void
server_accept(struct tcp_server *s)
{
	for (;;) {
		struct epoll_event ev = {.events = EPOLLIN};
		struct tcp_conn *c;
		int fd = accept4(s->lfd, NULL, NULL, SOCK_CLOEXEC);

		if (fd < 0) {
			return;
		}
		if (s->nconns == s->cap) {
			size_t ncap = s->cap ? s->cap * 2 : 8;
			struct tcp_conn **nc = realloc(s->conns, ncap * sizeof(*nc));

			if (nc == NULL) {
				close(fd);
				server_fail(s, "tcp server: out of memory");
				return;
			}
			s->conns = nc;
			s->cap = ncap;
		}
		c = calloc(1, sizeof(*c));
		if (c == NULL || framer_init(&c->in) != 0 ||
		    writer_init(&c->out, fd, &s->opts) != 0) {
			if (c != NULL) {
				free(c->in.buf);
			}
			free(c);
			close(fd);
			server_fail(s, "tcp server: out of memory");
			return;
		}
		c->fd = fd;
		c->in.keyed = s->opts.keys > 1;
		if (s->opts.lowlat) {
			net_set_nodelay(fd);
		}
		if (s->opts.tls_dir != NULL) {
			char err[200];
			/* a blocking handshake: connections open before a cell measures */
			if (tlsbench_open(&c->tio, fd, true, err, sizeof(err)) != 0) {
				server_fail(s, err);
				free(c->in.buf);
				free(c->out.buf);
				free(c);
				close(fd);
				return;
			}
			c->tls = true;
			c->out.tls = &c->tio;
		}
		net_set_nonblock(fd);
		ev.data.u64 = 2 + s->nconns;
		epoll_ctl(s->epfd, EPOLL_CTL_ADD, fd, &ev);
		s->conns[s->nconns++] = c;
	}
}

static void
conn_close(struct tcp_server *s, struct tcp_conn *c)
{
	if (!c->closed) {
		epoll_ctl(s->epfd, EPOLL_CTL_DEL, c->fd, NULL);
		close(c->fd);
		c->closed = true;
	}
}

static void
server_read(struct tcp_server *s, uint32_t idx)
{
	struct tcp_conn *c = s->conns[idx];
	char err[200];
	int rc;

	if (c->closed) {
		return;
	}
again:
	rc = framer_read(&c->in, c->fd, c->tls ? &c->tio : NULL, false);
	if (rc == 2) {
		return;
	}
	if (rc <= 0) {
		if (rc < 0) {
			snprintf(err, sizeof(err), "tcp server: read: %s", strerror(errno));
			server_fail(s, err);
		}
		conn_close(s, c);
		return;
	}
	if (framer_deliver(&c->in, s->fn, s->arg, idx, err, sizeof(err)) != 0) {
		server_fail(s, err);
		conn_close(s, c);
		return;
	}
	/* The frames of this read are handled: send what they produced. */
	if (writer_flush(&c->out) != 0) {
		server_fail(s, "tcp server: a reply could not be written");
		conn_close(s, c);
		return;
	}
	/* TLS may hold decrypted bytes the socket will not announce: drain */
	if (c->tls) {
		goto again;
	}
}

static void *
server_main(void *arg)
{
	struct tcp_server *s = arg;
	struct epoll_event evs[64];

	for (;;) {
		int n = epoll_wait(s->epfd, evs, 64, -1);
		int i;

		if (n < 0 && errno != EINTR) {
			server_fail(s, "tcp server: epoll failed");
			return NULL;
		}
		for (i = 0; i < n; i++) {
			uint64_t tag = evs[i].data.u64;

			if (tag == 0) {
				server_accept(s);
			} else if (tag == 1) {
				return NULL;
			} else if (tag - 2 < s->nconns) {
				server_read(s, (uint32_t)(tag - 2));
			}
		}
	}
}

static void
tcp_server_close(void *srv)
{
	struct tcp_server *s = srv;
	size_t i;

	if (s == NULL) {
		return;
	}
	if (s->started) {
		uint64_t one = 1;

		if (write(s->efd, &one, sizeof(one)) < 0) {
			/* cannot fail for an eventfd */
		}
		pthread_join(s->thread, NULL);
	}
	for (i = 0; i < s->nconns; i++) {
		tlsbench_close(&s->conns[i]->tio);
		conn_close(s, s->conns[i]);
		free(s->conns[i]->in.buf);
		free(s->conns[i]->out.buf);
		free(s->conns[i]);
	}
	free(s->conns);
	if (s->lfd >= 0) {
		close(s->lfd);
	}
	if (s->efd >= 0) {
		close(s->efd);
	}
	if (s->epfd >= 0) {
		close(s->epfd);
	}
	free(s);
}

static int
tcp_server_open(void **out, const struct layer_opts *o, const char *listen_ep, layer_msg_fn fn,
                void *arg, char *bound, size_t bound_len, char *err, size_t err_len)
{
	struct tcp_server *s = calloc(1, sizeof(*s));
	struct epoll_event ev = {.events = EPOLLIN};

	*out = NULL;
	if (s == NULL) {
		snprintf(err, err_len, "tcp server: out of memory");
		return -1;
	}
	s->opts = *o;
	s->fn = fn;
	s->arg = arg;
	s->efd = s->epfd = -1;
	s->lfd = net_listen(listen_ep, bound, bound_len, err, err_len);
	if (s->lfd < 0) {
		tcp_server_close(s);
		return -1;
	}
	s->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	s->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (s->efd < 0 || s->epfd < 0) {
		snprintf(err, err_len, "tcp server: %s", strerror(errno));
		tcp_server_close(s);
		return -1;
	}
	net_set_nonblock(s->lfd);
	ev.data.u64 = 0;
	epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->lfd, &ev);
	ev.data.u64 = 1;
	epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->efd, &ev);
	if (pthread_create(&s->thread, NULL, server_main, s) != 0) {
		snprintf(err, err_len, "tcp server: cannot start its thread");
		tcp_server_close(s);
		return -1;
	}
	s->started = true;
	*out = s;
	return 0;
}

static int
tcp_server_reply(void *srv, uint32_t conn, const void *data, size_t len)
{
	struct tcp_server *s = srv;

	if (conn >= s->nconns || s->conns[conn]->closed) {
		return -EINVAL;
	}
	return writer_send(&s->conns[conn]->out, NULL, 0, data, len);
}

static const char *
tcp_server_error(void *srv)
{
	struct tcp_server *s = srv;

	return s->error[0] ? s->error : NULL;
}

/* ---- client ---- */

struct tcp_client {
	int fd;
	struct writer out;
	struct tlsbench_io tio;
	bool tls;
	char (*keys)[24]; /* with --keys: each key, made once */
	uint32_t nkeys, next;
	layer_msg_fn reply_fn;
	void *arg;
	pthread_t reader;
	bool reading;
};

static void *
client_reader(void *arg)
{
	struct tcp_client *c = arg;
	struct framer in;
	char err[200];

	if (framer_init(&in) != 0) {
		return NULL;
	}
	for (;;) {
		int rc = framer_read(&in, c->fd, c->tls ? &c->tio : NULL, true);

		if (rc <= 0) {
			break;
		}
		if (rc == 1 && framer_deliver(&in, c->reply_fn, c->arg, 0, err, sizeof(err)) != 0) {
			break;
		}
	}
	free(in.buf);
	return NULL;
}

static void
tcp_client_close(void *cli)
{
	struct tcp_client *c = cli;

	if (c == NULL) {
		return;
	}
	if (c->fd >= 0) {
		shutdown(c->fd, SHUT_RDWR);
	}
	if (c->reading) {
		pthread_join(c->reader, NULL);
	}
	if (c->tls) {
		tlsbench_close(&c->tio);
	}
	if (c->fd >= 0) {
		close(c->fd);
	}
	free(c->out.buf);
	free(c->keys);
	free(c);
}

static int
tcp_client_open(void **out, const struct layer_opts *o, const char *ep, layer_msg_fn reply_fn,
                void *arg, char *err, size_t err_len)
{
	struct tcp_client *c = calloc(1, sizeof(*c));
	int sndbuf = CLIENT_SNDBUF;

	*out = NULL;
	if (c == NULL) {
		snprintf(err, err_len, "tcp client: out of memory");
		return -1;
	}
	c->reply_fn = reply_fn;
	c->arg = arg;
	c->fd = net_connect(ep, err, err_len);
	if (c->fd < 0) {
		tcp_client_close(c);
		return -1;
	}
	if (o->keys > 1 && (c->keys = calloc(o->keys, sizeof(*c->keys))) != NULL) {
		c->nkeys = o->keys;
		for (uint32_t i = 0; i < o->keys; i++) {
			layer_key(c->keys[i], sizeof(c->keys[i]), o->keys, i);
		}
	}
	if (writer_init(&c->out, c->fd, o) != 0 || (o->keys > 1 && c->keys == NULL)) {
		snprintf(err, err_len, "tcp client: out of memory");
		tcp_client_close(c);
		return -1;
	}
	if (o->lowlat) {
		net_set_nodelay(c->fd);
	}
	/* Left to itself, the kernel grows a loopback socket's send buffer to
	 * 4 MiB whatever the link beyond can take: megabytes written but not
	 * sent, per connection. Bound it, as tern's flow-control window bounds
	 * what tern has in flight. */
	setsockopt(c->fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
	if (o->tls_dir != NULL) {
		if (tlsbench_open(&c->tio, c->fd, false, err, err_len) != 0) {
			tcp_client_close(c);
			return -1;
		}
		c->tls = true;
		c->out.tls = &c->tio;
	}
	if (reply_fn != NULL) {
		if (pthread_create(&c->reader, NULL, client_reader, c) != 0) {
			snprintf(err, err_len, "tcp client: cannot start its reader");
			tcp_client_close(c);
			return -1;
		}
		c->reading = true;
	}
	*out = c;
	return 0;
}

static int
tcp_client_ready(void *cli, int timeout_ms, char *err, size_t err_len)
{
	(void)cli;
	(void)timeout_ms;
	(void)err;
	(void)err_len;
	/* A connected socket delivers whatever is written to it. */
	return 0;
}

static int
tcp_client_send(void *cli, const void *data, size_t len)
{
	struct tcp_client *c = cli;

	if (c->keys != NULL) {
		const char *k = c->keys[c->next];
		c->next = c->next + 1 == c->nkeys ? 0 : c->next + 1;
		return writer_send(&c->out, k, strlen(k), data, len);
	}
	return writer_send(&c->out, NULL, 0, data, len);
}

static int
tcp_client_flush(void *cli, bool final)
{
	struct tcp_client *c = cli;

	(void) final;
	return writer_flush(&c->out);
}

const struct layer_ops layer_tcp_ops = {
    .name = "tcp",
    .server_open = tcp_server_open,
    .server_reply = tcp_server_reply,
    .server_error = tcp_server_error,
    .server_close = tcp_server_close,
    .client_open = tcp_client_open,
    .client_ready = tcp_client_ready,
    .client_send = tcp_client_send,
    .client_flush = tcp_client_flush,
    .client_close = tcp_client_close,
};
