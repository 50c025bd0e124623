/*
 * raw.h - a raw socket that speaks the tern protocol to a real node, as a
 * router or a peer, and says exactly what a test needs in the order it
 * needs (include after cmocka.h and nodes.h). It answers the node's PINGs
 * while it reads, so a loaded machine does not end its connection.
 */
#ifndef TERN_TEST_RAW_H
#define TERN_TEST_RAW_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "control.h"
#include "tern/tern.h"
#include "wire.h"

#include "nodes.h"

struct raw {
	int fd;
	uint8_t in[1 << 16];
	size_t len, pos;
	size_t frame_len; /* header and payload of the last frame read */
	bool preamble;
	bool shut; /* this side is done writing: PINGs go unanswered */
};

static inline uint64_t
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static inline struct ctl_str
S(const char *s) {
	return (struct ctl_str){s, strlen(s)};
}

static inline void
raw_send(struct raw *r, const struct ctl_msg *m)
{
	uint8_t buf[WIRE_HDR_MAX + CTL_MSG_MAX];
	struct wire_frame f = {.type = WIRE_CONTROL};
	int n = ctl_encode(m, buf + WIRE_HDR_MAX, CTL_MSG_MAX);
	size_t h;

	assert_true(n > 0);
	f.len = (uint64_t)n;
	h = wire_header_encode(buf, &f);
	memmove(buf + h, buf + WIRE_HDR_MAX, (size_t)n);
	assert_int_equal(write(r->fd, buf, h + (size_t)n), (ssize_t)(h + (size_t)n));
}

/* Send one data frame on channel ch whose payload is value. */
static inline void
raw_data(struct raw *x, uint64_t ch, int value)
{
	uint8_t buf[WIRE_HDR_MAX + sizeof(value)];
	struct wire_frame f = {.type = WIRE_DATA, .channel = ch, .len = sizeof(value)};
	size_t h = wire_header_encode(buf, &f);

	memcpy(buf + h, &value, sizeof(value));
	assert_int_equal(write(x->fd, buf, h + sizeof(value)), (ssize_t)(h + sizeof(value)));
}

/* Connect to a node as a router (or a peer) named id: preamble, HELLO,
 * SYNC. */
static inline void
raw_open_as(struct raw *r, const char *bound, const char *id, int mode)
{
	struct sockaddr_in a = {.sin_family = AF_INET};
	uint8_t pre[WIRE_PREAMBLE_LEN];
	struct ctl_msg m = {.type = CTL_HELLO};

	memset(r, 0, sizeof(*r));
	a.sin_port = htons((uint16_t)atoi(strrchr(bound, ':') + 1));
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	r->fd = socket(AF_INET, SOCK_STREAM, 0);
	assert_int_equal(connect(r->fd, (struct sockaddr *)&a, sizeof(a)), 0);
	wire_preamble_encode(pre);
	assert_int_equal(write(r->fd, pre, sizeof(pre)), (ssize_t)sizeof(pre));
	m.u.hello.id = S(id);
	m.u.hello.mode = (uint64_t)mode;
	m.u.hello.batch_max = 65536;
	m.u.hello.chunk = 65536;
	m.u.hello.max_message = 64u << 20;
	m.u.hello.window = 256u * 1024;
	m.u.hello.keepalive_ms = 1000;
	raw_send(r, &m);
	m = (struct ctl_msg){.type = CTL_SYNC};
	raw_send(r, &m);
}

static inline void
raw_open(struct raw *r, const char *bound, const char *id)
{
	raw_open_as(r, bound, id, TERN_MODE_ROUTER);
}

/* The next frame from the node into *f, its payload at *body (in r->in,
 * until the next call); a control message is decoded into *m, and PINGs
 * are answered on the way. False when none came by the deadline. */
static inline bool
raw_frame(struct raw *r, struct wire_frame *f, const uint8_t **body, struct ctl_msg *m,
          uint64_t deadline)
{
	for (;;) {
		size_t h;

		if (!r->preamble && r->len - r->pos >= WIRE_PREAMBLE_LEN) {
			r->pos += WIRE_PREAMBLE_LEN;
			r->preamble = true;
		}
		if (r->preamble &&
		    wire_header_decode(r->in + r->pos, r->len - r->pos, sizeof(r->in), f, &h) ==
		        1 &&
		    f->len <= r->len - r->pos - h) {
			*body = r->in + r->pos + h;
			r->frame_len = h + (size_t)f->len;
			r->pos += r->frame_len;
			if (f->type != WIRE_CONTROL) {
				return true;
			}
			assert_int_equal(ctl_decode(*body, f->len, m), 0);
			if (m->type == CTL_PING && !r->shut) {
				struct ctl_msg pong = {.type = CTL_PONG};
				pong.u.token = m->u.token;
				raw_send(r, &pong);
				continue;
			}
			return true;
		}
		memmove(r->in, r->in + r->pos, r->len - r->pos);
		r->len -= r->pos;
		r->pos = 0;
		uint64_t now = now_ms();
		struct pollfd p = {.fd = r->fd, .events = POLLIN};
		if (now >= deadline || poll(&p, 1, (int)(deadline - now)) <= 0) {
			return false;
		}
		ssize_t n = read(r->fd, r->in + r->len, sizeof(r->in) - r->len);
		if (n <= 0) {
			return false;
		}
		r->len += (size_t)n;
	}
}

/* Read (and answer PINGs) until the node closes the connection. */
static inline void
raw_drain(struct raw *r)
{
	uint64_t deadline = now_ms() + NODES_WAIT_MS;
	struct wire_frame f;
	const uint8_t *body;
	struct ctl_msg m;

	while (raw_frame(r, &f, &body, &m, deadline)) {
	}
}

/* The next control message from the node (see raw_frame). */
static inline bool
raw_next(struct raw *r, struct ctl_msg *m, uint64_t deadline)
{
	struct wire_frame f;
	const uint8_t *body;

	while (raw_frame(r, &f, &body, m, deadline)) {
		if (f.type == WIRE_CONTROL) {
			return true;
		}
	}
	return false;
}

/*
 * Read until a control message of `type` about (origin, sub id) comes
 * (for an UNSUB, with `end`), or until the PONG for a PING sent first
 * when `sync` is set (then: was one seen before it?). *id, if not NULL,
 * receives the sub id of the first matching message, any id matching
 * when *id is 0.
 */
static inline bool
raw_expect(struct raw *r, int type, const char *origin, uint64_t *id, uint64_t end, bool sync)
{
	uint64_t deadline = now_ms() + NODES_WAIT_MS;
	struct ctl_msg m;
	bool seen = false;

	if (sync) {
		struct ctl_msg ping = {.type = CTL_PING};
		ping.u.token = 424242;
		raw_send(r, &ping);
	}
	while (raw_next(r, &m, deadline)) {
		if (sync && m.type == CTL_PONG && m.u.token == 424242) {
			return seen;
		}
		if (m.type != type || m.u.sub.origin.len != strlen(origin) ||
		    memcmp(m.u.sub.origin.p, origin, strlen(origin)) != 0 ||
		    (*id != 0 && m.u.sub.sub_id != *id) ||
		    (type == CTL_UNSUB && m.u.sub.end != end)) {
			continue;
		}
		*id = m.u.sub.sub_id;
		seen = true;
		if (!sync) {
			return true;
		}
	}
	fail_msg("no %s from the node in %d ms", sync ? "PONG" : "such message", NODES_WAIT_MS);
	return false;
}

/* Declare origin's subscription id at a count of hops. */
static inline void
send_sub_at(struct raw *r, const char *origin, uint64_t id, const char *ke, uint64_t hops)
{
	struct ctl_msg m = {.type = CTL_SUB};

	m.u.sub.origin = S(origin);
	m.u.sub.sub_id = id;
	m.u.sub.hops = hops;
	m.u.sub.keyexpr = S(ke);
	raw_send(r, &m);
}

static inline void
send_sub(struct raw *r, const char *origin, uint64_t id, const char *ke)
{
	send_sub_at(r, origin, id, ke, 1);
}

static inline void
send_unsub(struct raw *r, const char *origin, uint64_t id, uint64_t end)
{
	struct ctl_msg m = {.type = CTL_UNSUB};

	m.u.sub.origin = S(origin);
	m.u.sub.sub_id = id;
	m.u.sub.end = end;
	raw_send(r, &m);
}

#endif
