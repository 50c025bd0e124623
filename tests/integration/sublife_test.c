/*
 * sublife_test.c - how a subscription ends, seen on the wire: a router
 * between a real node and raw sockets that speak the protocol as routers
 * ("x", "y") and say exactly what a scenario needs, in the order it needs.
 *  - an ended subscription is passed on as ended and answered; a SUB for
 *    it that crossed the end on the way (sent before its sender heard)
 *    does not bring it back, until the sender's answer comes;
 *  - a subscriber's node that leaves with GOODBYE ends its subscriptions
 *    everywhere;
 *  - a node that restarts with the same id never repeats a subscription
 *    number of its last life (else a router still holding the old one
 *    would take the new one for it);
 *  - a route that moves (withdrawn, declared again) loses nothing a
 *    reliable publisher had under way on it.
 *
 * Every wait is bounded and fails rather than hangs; bounds are generous,
 * never timing goals. A raw peer answers the node's PINGs, so a loaded
 * machine does not end its connection.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "control.h"
#include "tern/tern.h"
#include "wire.h"

#include "nodes.h"

#define WAIT_MS NODES_WAIT_MS

struct raw {
	int fd;
	uint8_t in[1 << 16];
	size_t len, pos;
	size_t frame_len; /* header and payload of the last frame read */
	bool preamble;
	bool shut; /* this side is done writing: PINGs go unanswered */
};

static uint64_t
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static struct ctl_str
S(const char *s) {
	return (struct ctl_str){s, strlen(s)};
}

static void
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

/* Connect to a node as a router (or a peer) named id: preamble, HELLO,
 * SYNC. */
static void
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

static void
raw_open(struct raw *r, const char *bound, const char *id)
{
	raw_open_as(r, bound, id, TERN_MODE_ROUTER);
}

/* The next frame from the node into *f, its payload at *body (in r->in,
 * until the next call); a control message is decoded into *m, and PINGs
 * are answered on the way. False when none came by the deadline. */
static bool
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
static void
raw_drain(struct raw *r)
{
	uint64_t deadline = now_ms() + WAIT_MS;
	struct wire_frame f;
	const uint8_t *body;
	struct ctl_msg m;

	while (raw_frame(r, &f, &body, &m, deadline)) {
	}
}

/* The next control message from the node (see raw_frame). */
static bool
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
static bool
raw_expect(struct raw *r, int type, const char *origin, uint64_t *id, uint64_t end, bool sync)
{
	uint64_t deadline = now_ms() + WAIT_MS;
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
	fail_msg("no %s from the node in %d ms", sync ? "PONG" : "such message", WAIT_MS);
	return false;
}

static void
send_sub(struct raw *r, const char *origin, uint64_t id, const char *ke)
{
	struct ctl_msg m = {.type = CTL_SUB};

	m.u.sub.origin = S(origin);
	m.u.sub.sub_id = id;
	m.u.sub.hops = 1;
	m.u.sub.keyexpr = S(ke);
	raw_send(r, &m);
}

static void
send_unsub(struct raw *r, const char *origin, uint64_t id, uint64_t end)
{
	struct ctl_msg m = {.type = CTL_UNSUB};

	m.u.sub.origin = S(origin);
	m.u.sub.sub_id = id;
	m.u.sub.end = end;
	raw_send(r, &m);
}

/*
 * x declares o's subscription 7 to router r, which passes it to y; then
 * x ends it. y declares it again, as y would have had it reached y by
 * another way just before the end: r keeps it ended, until y answers.
 */
static void
test_stale_sub_after_end(void **state)
{
	tern_node *r = open_node("r", TERN_MODE_ROUTER);
	char bound[256];
	struct raw x, y;
	tern_pub *pub;
	uint64_t id = 7;
	(void)state;

	assert_int_equal(tern_node_listen(r, "tcp://127.0.0.1:0", bound, sizeof(bound)), 0);
	assert_int_equal(tern_pub_open(&pub, r, "k", TERN_BEST_EFFORT), 0);
	raw_open(&x, bound, "x");
	raw_open(&y, bound, "y");
	assert_int_equal(tern_node_wait_peers(r, 2, WAIT_MS), 0);
	send_sub(&x, "o", id, "k");
	assert_true(raw_expect(&y, CTL_SUB, "o", &id, 0, false));
	assert_int_equal(wait_matched(pub, 1), 1);

	send_unsub(&x, "o", id, CTL_UNSUB_ENDED);
	assert_true(raw_expect(&x, CTL_UNSUB, "o", &id, CTL_UNSUB_ENDED_ACK, false));
	assert_true(raw_expect(&y, CTL_UNSUB, "o", &id, CTL_UNSUB_ENDED, false));
	assert_int_equal(wait_matched(pub, 0), 0);

	/* y's SUB, sent before it heard: r takes no route through y */
	send_sub(&y, "o", id, "k");
	assert_false(raw_expect(&y, CTL_SUB, "o", &id, 0, true));
	assert_int_equal(tern_pub_matched(pub), 0);
	assert_false(raw_expect(&x, CTL_SUB, "o", &id, 0, true)); /* nor declares it to x */

	/* y's answer: r forgets the ended subscription (a SUB now is news) */
	send_unsub(&y, "o", id, CTL_UNSUB_ENDED_ACK);
	send_sub(&y, "o", id, "k");
	assert_true(raw_expect(&x, CTL_SUB, "o", &id, 0, false));
	assert_int_equal(wait_matched(pub, 1), 1);

	tern_pub_close(pub);
	close(x.fd);
	close(y.fd);
	tern_node_close(r);
}

/* A subscriber's node s on router r leaves with GOODBYE, its subscription
 * open: y hears that the subscription ended, not merely that r no longer
 * leads to it. */
static void
test_goodbye_ends_subscriptions(void **state)
{
	tern_node *r = open_node("r", TERN_MODE_ROUTER);
	struct ctl_msg bye = {.type = CTL_GOODBYE};
	char bound[256];
	struct raw s, y;
	uint64_t id = 5;
	(void)state;

	assert_int_equal(tern_node_listen(r, "tcp://127.0.0.1:0", bound, sizeof(bound)), 0);
	raw_open(&y, bound, "y");
	raw_open_as(&s, bound, "s", TERN_MODE_PEER);
	assert_int_equal(tern_node_wait_peers(r, 2, WAIT_MS), 0);
	send_sub(&s, "s", id, "k/**");
	assert_true(raw_expect(&y, CTL_SUB, "s", &id, 0, false));
	bye.u.reason = S("closing");
	raw_send(&s, &bye);
	/* read on to the node's close: a close with unread bytes is a reset,
	 * which may overtake the GOODBYE */
	shutdown(s.fd, SHUT_WR);
	s.shut = true;
	raw_drain(&s);
	close(s.fd);
	assert_true(raw_expect(&y, CTL_UNSUB, "s", &id, CTL_UNSUB_ENDED, false));
	send_unsub(&y, "s", id, CTL_UNSUB_ENDED_ACK);
	close(y.fd);
	tern_node_close(r);
}

/*
 * Read until n data frames on channel ch arrive (the OPEN for a channel
 * of key `key` first, if *ch is 0): their payloads, as ints, into got.
 * Adds each frame's length to *bytes.
 */
static void
read_data(struct raw *r, const char *key, uint64_t *ch, int *got, int n, uint64_t *bytes)
{
	uint64_t deadline = now_ms() + WAIT_MS;
	struct wire_frame f;
	const uint8_t *body;
	struct ctl_msg m;
	int k = 0;

	while (k < n && raw_frame(r, &f, &body, &m, deadline)) {
		if (f.type == WIRE_CONTROL) {
			if (*ch == 0 && m.type == CTL_OPEN && m.u.open.key.len == strlen(key) &&
			    memcmp(m.u.open.key.p, key, strlen(key)) == 0) {
				*ch = m.u.open.channel;
			}
			continue;
		}
		if (f.type == WIRE_DATA && *ch != 0 && f.channel == *ch && f.len == sizeof(int)) {
			memcpy(&got[k++], body, sizeof(int));
			*bytes += r->frame_len;
		}
	}
	if (k < n) {
		fail_msg("%d of %d messages on channel %llu in %d ms", k, n,
		         (unsigned long long)*ch, WAIT_MS);
	}
}

/*
 * x's route to o's subscription moves: x withdraws it and declares it
 * again at once. What publisher p had sent x and x had not consumed is
 * not lost with the old channel: it goes again on the new one.
 */
static void
test_route_flap_keeps_what_was_under_way(void **state)
{
	tern_node *p = open_node("p", TERN_MODE_PEER);
	struct ctl_msg credit = {.type = CTL_CREDIT};
	uint64_t ch1 = 0, ch2 = 0, bytes = 0;
	int got[4];
	char bound[256];
	tern_pub *pub;
	struct raw x;
	(void)state;

	assert_int_equal(tern_node_listen(p, "tcp://127.0.0.1:0", bound, sizeof(bound)), 0);
	raw_open(&x, bound, "x");
	assert_int_equal(tern_node_wait_peers(p, 1, WAIT_MS), 0);
	assert_int_equal(tern_pub_open(&pub, p, "k", TERN_RELIABLE), 0);
	send_sub(&x, "o", 1, "k");
	assert_int_equal(wait_matched(pub, 1), 1);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(tern_publish(pub, &i, sizeof(i)), 0);
	}
	read_data(&x, "k", &ch1, got, 3, &bytes); /* and not consumed */

	send_unsub(&x, "o", 1, CTL_UNSUB_WITHDRAWN);
	send_sub(&x, "o", 1, "k");
	bytes = 0;
	read_data(&x, "k", &ch2, got, 3, &bytes);
	assert_true(ch2 != ch1);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(got[i], i);
	}
	int last = 3;
	assert_int_equal(tern_publish(pub, &last, sizeof(last)), 0);
	read_data(&x, "k", &ch2, got + 3, 1, &bytes);
	assert_int_equal(got[3], 3);

	credit.u.credit.channel = ch2;
	credit.u.credit.consumed = bytes;
	raw_send(&x, &credit);
	assert_int_equal(tern_pub_close(pub), 0);
	close(x.fd);
	tern_node_close(p);
}

/* The subscription numbers a node with one id declares, life after life. */
static uint64_t
first_sub_id(const char *id)
{
	tern_node *n = open_node(id, TERN_MODE_PEER);
	char bound[256];
	tern_sub *sub;
	struct raw y;
	uint64_t sub_id = 0;

	assert_int_equal(tern_node_listen(n, "tcp://127.0.0.1:0", bound, sizeof(bound)), 0);
	raw_open(&y, bound, "y");
	assert_int_equal(tern_node_wait_peers(n, 1, WAIT_MS), 0);
	assert_int_equal(tern_sub_open(&sub, n, "k", NULL, NULL), 0);
	assert_true(raw_expect(&y, CTL_SUB, id, &sub_id, 0, false));
	tern_sub_close(sub);
	close(y.fd);
	tern_node_close(n);
	return sub_id;
}

static void
test_restart_new_sub_ids(void **state)
{
	uint64_t a = first_sub_id("twin"), b = first_sub_id("twin");
	(void)state;

	if (a == b) {
		fail_msg("both lives of node twin declared subscription %llu",
		         (unsigned long long)a);
	}
}

int
main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_stale_sub_after_end),
	    cmocka_unit_test(test_goodbye_ends_subscriptions),
	    cmocka_unit_test(test_restart_new_sub_ids),
	    cmocka_unit_test(test_route_flap_keeps_what_was_under_way),
	};

	signal(SIGPIPE, SIG_IGN); /* a write to a closed peer fails its assert instead */
	if (argc > 1) {
		cmocka_set_test_filter(argv[1]);
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}
