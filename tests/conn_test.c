/*
 * conn_test.c - a connection's deadlines, driven through conn_timers with
 * a clock reading taken before the connection's own time stamps, as the
 * I/O thread's timers do when a connection is created, or hears from its
 * peer, after they read the clock. Such an elapsed time is no time at all,
 * never 584 years. Also the keepalives the timers send (gathered within a
 * slack, left out while the peer pings), the loop's work stack, channel
 * ids coming back after a long life, and a burst's buffer given back.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "clock.h"
#include "conn.h"
#include "outchan.h"
#include "tls.h"
#include "wire.h"

static void
on_ready(void *arg, struct conn *c)
{
	(void)arg;
	(void)c;
}

static void
on_synced(void *arg, struct conn *c)
{
	(void)arg;
	(void)c;
}

static int
on_control(void *arg, struct conn *c, const struct ctl_msg *m)
{
	(void)arg;
	(void)c;
	(void)m;
	return 0;
}

static const struct conn_ops ops = {.ready = on_ready, .synced = on_synced, .control = on_control};

struct fixture {
	tern_config cfg;
	struct logger log;
	struct conn_env env;
	int peer; /* the other end of the socket pair */
	struct conn *c;
};

static int
setup(void **state)
{
	static struct fixture f;
	int sv[2];

	memset(&f, 0, sizeof(f));
	tern_config_init(&f.cfg);
	f.cfg.id = "conn-test";
	f.log.id = "conn-test";
	f.log.level = TERN_LOG_ERROR;
	f.env.cfg = &f.cfg;
	f.env.log = &f.log;
	f.env.epfd = epoll_create1(0);
	f.env.window_init = 256u << 10;
	f.env.window_max = 32u << 20;
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	f.peer = sv[1];
	f.c = conn_new(&f.env, sv[0], false, false, "unix:///conn-test", &ops, NULL, NULL);
	assert_non_null(f.c);
	*state = &f;
	return 0;
}

static int
teardown(void **state)
{
	struct fixture *f = *state;

	conn_free(f->c);
	close(f->peer);
	close(f->env.epfd);
	return 0;
}

static void
test_handshake_deadline_before_creation(void **state)
{
	struct fixture *f = *state;

	/* the timers read the clock, then the connection was accepted */
	conn_timers(f->c, f->c->created_ms - 5, 0);
	assert_int_not_equal(conn_state(f->c), CONN_DEAD);
	/* the deadline itself still holds */
	conn_timers(f->c, f->c->created_ms + f->cfg.handshake_timeout_ms + 1, 0);
	assert_int_equal(conn_state(f->c), CONN_DEAD);
	assert_non_null(strstr(f->c->reason, "handshake"));
}

static void
test_keepalive_deadline_before_last_read(void **state)
{
	struct fixture *f = *state;
	uint64_t now;

	f->c->got_hello = true;
	atomic_store(&f->c->state, CONN_READY);
	now = f->c->last_rx_ms;
	/* a read after the timers took the time */
	f->c->last_rx_ms = now + 5;
	f->c->last_ping_ms = now + 5;
	conn_timers(f->c, now, 0);
	assert_int_not_equal(conn_state(f->c), CONN_DEAD);
	conn_timers(f->c, now + 5 + 3ull * f->cfg.keepalive_ms + 1, 0);
	assert_int_equal(conn_state(f->c), CONN_DEAD);
	assert_non_null(strstr(f->c->reason, "keepalive"));
}

/* The connection as after its handshake, with nothing queued. */
static void
make_ready(struct fixture *f)
{
	f->c->got_hello = true;
	atomic_store(&f->c->state, CONN_READY);
	f->c->out_len = 0;
}

static void
test_ping_due_within_slack_goes_now(void **state)
{
	struct fixture *f = *state;
	uint64_t now = f->c->last_rx_ms, k = f->cfg.keepalive_ms;

	make_ready(f);
	f->c->last_ping_ms = now - (k - 20);
	conn_timers(f->c, now, 10);
	assert_int_equal(f->c->out_len, 0); /* due in 20 ms, beyond the slack */
	conn_timers(f->c, now, 20);
	assert_true(f->c->out_len > 0);
	assert_int_equal(f->c->last_ping_ms, now);
}

/* While the peer pings, seven of ours in eight are left out; without its
 * PINGs, every one goes. */
static void
test_pings_left_out_while_peer_pings(void **state)
{
	struct fixture *f = *state;
	uint64_t t = f->c->last_rx_ms, k = f->cfg.keepalive_ms;
	int sent = 0;

	make_ready(f);
	f->c->last_ping_ms = t - k;
	for (int i = 0; i < 16; i++, t += k) {
		size_t before = f->c->out_len;
		f->c->peer_ping_ms = f->c->last_rx_ms = t - 1;
		conn_timers(f->c, t, 0);
		assert_int_equal(f->c->last_ping_ms, t);
		sent += f->c->out_len > before;
	}
	assert_int_equal(sent, 2);
	/* the peer stopped pinging a keepalive interval ago */
	for (int i = 0; i < 3; i++, t += k) {
		size_t before = f->c->out_len;
		f->c->last_rx_ms = t - 1;
		conn_timers(f->c, t, 0);
		assert_true(f->c->out_len > before);
	}
	assert_int_not_equal(conn_state(f->c), CONN_DEAD);
}

/* A connection is listed once until the loop takes the stack, and again
 * after the loop has unlisted it. */
static void
test_work_listed_once_until_taken(void **state)
{
	struct fixture *f = *state;
	_Atomic(struct conn *) work;

	atomic_init(&work, NULL);
	f->env.work = &work;
	assert_null(conn_work_take(&work));
	conn_mark_pending(f->c);
	conn_mark_pending(f->c);
	assert_ptr_equal(conn_work_take(&work), f->c);
	assert_null(conn_work_take(&work));
	conn_mark_pending(f->c); /* taken, not yet unlisted: still listed */
	assert_null(conn_work_take(&work));
	assert_null(conn_work_unlist(f->c));
	conn_fail(f->c, "test");
	assert_ptr_equal(conn_work_take(&work), f->c);
	assert_null(conn_work_unlist(f->c));
	f->env.work = NULL;
}

/* A burst of control messages grew conn->out: after a second in which the
 * writes fit a quarter of it, the timers give it back. */
static void
test_idle_connection_gives_back_out(void **state)
{
	struct fixture *f = *state;
	struct ctl_msg ping = {.type = CTL_PING};
	size_t first = f->c->out_cap;
	uint64_t t = f->c->last_rx_ms;

	make_ready(f);
	for (int i = 0; i < 4000; i++) {
		ping.u.token = (uint64_t)i;
		conn_send_ctl(f->c, &ping);
	}
	assert_true(f->c->out_cap > first);
	f->c->out_len = 0; /* written */
	f->c->last_ping_ms = f->c->peer_ping_ms = t;
	conn_timers(f->c, t, 0);
	assert_true(f->c->out_cap > first); /* just used */
	f->c->last_rx_ms = t + 999;
	conn_timers(f->c, t + 999, 0);
	assert_true(f->c->out_cap > first);
	f->c->last_rx_ms = t + 2000;
	conn_timers(f->c, t + 2000, 0);
	assert_int_equal(f->c->out_cap, first);
	assert_int_not_equal(conn_state(f->c), CONN_DEAD);
}

static void
no_wake(void *arg)
{
	(void)arg;
}

static void
no_queued(void *owner, struct outchan *oc, size_t len, bool before)
{
	(void)owner;
	(void)oc;
	(void)len;
	(void)before;
}

static const struct outchan_ops chan_ops = {.wake = no_wake, .queued = no_queued};

/* A PONG from the peer for a PING sent at token (our monotonic clock),
 * answered when the peer's wall clock read time_us. */
static void
peer_pong(struct fixture *f, uint64_t token, uint64_t time_us)
{
	struct ctl_msg m = {.type = CTL_PONG};
	struct wire_frame h = {.type = WIRE_CONTROL};
	uint8_t body[CTL_MSG_MAX], frame[CTL_MSG_MAX + WIRE_HDR_MAX];
	size_t n;

	m.u.token = token;
	m.u.time_us = time_us;
	h.len = (uint64_t)ctl_encode(&m, body, sizeof(body));
	n = wire_header_encode(frame, &h);
	memcpy(frame + n, body, h.len);
	assert_int_equal(write(f->peer, frame, n + h.len), (ssize_t)(n + h.len));
	conn_on_event(f->c, EPOLLIN);
	assert_int_not_equal(conn_state(f->c), CONN_DEAD);
}

/* The peer's PONG, as read from the socket: it answers every PING written
 * so far, so what was closed before them may be named again. */
static void
peer_pongs(struct fixture *f)
{
	peer_pong(f, clock_us(), clock_wall_us());
}

/*
 * A peer on the same clock whose PONG came late in its round trip (the
 * PING waited behind data): the offset it suggests is within that round
 * trip's uncertainty, so stamps are left alone, even though it is beyond
 * half the shortest round trip seen. A real offset, well beyond, is
 * applied. Timing slack (a preempted test) only shrinks the suggestion.
 */
static void
test_clock_offset_within_its_uncertainty(void **state)
{
	struct fixture *f = *state;
	const uint64_t ms = 1000;
	uint64_t stamp = clock_wall_us();
	int64_t moved;

	make_ready(f);
	f->c->got_preamble = true;
	/* 100 ms round trip, answered in the middle: no offset */
	peer_pong(f, clock_us() - 100 * ms, clock_wall_us() - 50 * ms);
	assert_true(conn_local_stamp(f->c, stamp) == stamp);
	/* 130 ms, answered 5 ms before the end: 60 ms suggested, 65 uncertain */
	peer_pong(f, clock_us() - 130 * ms, clock_wall_us() - 5 * ms);
	assert_true(conn_local_stamp(f->c, stamp) == stamp);
	/* the peer's clock 10 s ahead: its stamps come back by that much */
	peer_pong(f, clock_us() - 100 * ms, clock_wall_us() - 50 * ms + 10000 * ms);
	moved = (int64_t)(stamp - conn_local_stamp(f->c, stamp));
	assert_true(moved > 9900 * (int64_t)ms && moved < 10100 * (int64_t)ms);
}

/*
 * A connection that outlives 2^20 channels names its next channel with an
 * id a peer accepts (1 to 2^20), and never with one it closed after the
 * last PING its peer answered: until then a CREDIT or DENY for the old
 * channel may still be on its way, and would land on the new one.
 */
static void
test_channel_ids_come_back(void **state)
{
	struct fixture *f = *state;
	struct ctl_msg open = {.type = CTL_OPEN};
	const uint32_t total = WIRE_CHANNEL_MAX + 4096;
	/* per id: 1 + the round of the peer's answers it was closed in */
	uint32_t *closed = calloc(WIRE_CHANNEL_MAX + 1, sizeof(*closed));
	uint32_t round = 1, reused = 0;

	assert_non_null(closed);
	open.u.open.publisher.p = "n/1";
	open.u.open.publisher.len = 3;
	open.u.open.key.p = "k";
	open.u.open.key.len = 1;
	make_ready(f);
	f->c->got_preamble = true;
	for (uint32_t i = 0; i < total; i++) {
		struct outchan *oc = conn_open_outchan(f->c, &open, true, &chan_ops, NULL);
		uint32_t id;

		assert_non_null(oc);
		id = oc->id;
		assert_true(id >= 1 && id <= WIRE_CHANNEL_MAX);
		/* closed in an earlier round of answers, or never */
		assert_true(closed[id] < round);
		reused += closed[id] != 0;
		conn_close_outchan(f->c, oc, true);
		closed[id] = round;
		f->c->out_len = 0; /* what it wrote does not matter here */
		if (i % 1000 == 999) {
			peer_pongs(f);
			round++;
		}
	}
	assert_true(reused >= 4096);
	free(closed);
}

/*
 * A TLS client that finds a plain listener's preamble already waiting
 * still says its ClientHello before it gives up: the listener learns from
 * it that a TLS peer came to its plain port, and can say so. Without it
 * the listener saw only a connection that closed in silence.
 */
static void
test_tls_client_speaks_before_refusing_plain(void **state)
{
	struct fixture *f = *state;
	uint8_t pre[WIRE_PREAMBLE_LEN], got[64];
	int sv[2];
	struct conn *c;
	ssize_t n;

	assert_int_equal(tls_ctx_new(&f->env.tls, NULL, NULL, NULL, 0), 0);
	assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
	c = conn_new(&f->env, sv[0], true, false, "tls://conn-test", &ops, NULL, NULL);
	assert_non_null(c);
	assert_int_equal(conn_use_tls(c), 0);
	/* the plain listener's preamble, sent at once on accept */
	wire_preamble_encode(pre);
	assert_int_equal(write(sv[1], pre, sizeof(pre)), (ssize_t)sizeof(pre));
	conn_start(c);
	for (int i = 0; i < 10 && conn_state(c) != CONN_DEAD; i++) {
		conn_on_event(c, EPOLLIN);
	}
	assert_int_equal(conn_state(c), CONN_DEAD);
	assert_non_null(strstr(c->reason, "plain tern node"));
	n = recv(sv[1], got, sizeof(got), MSG_DONTWAIT);
	assert_true(n >= 5);
	assert_int_equal(got[0], 0x16); /* a TLS handshake record */
	conn_free(c);
	close(sv[1]);
	tls_ctx_free(f->env.tls);
	f->env.tls = NULL;
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_handshake_deadline_before_creation, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_keepalive_deadline_before_last_read, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_ping_due_within_slack_goes_now, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_pings_left_out_while_peer_pings, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_work_listed_once_until_taken, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_channel_ids_come_back, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_idle_connection_gives_back_out, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_clock_offset_within_its_uncertainty, setup,
	                                    teardown),
	    cmocka_unit_test_setup_teardown(test_tls_client_speaks_before_refusing_plain, setup,
	                                    teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
