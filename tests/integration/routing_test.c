/*
 * routing_test.c - which links a router passes a message on to, seen on
 * the wire: a router r between raw sockets that speak the protocol as
 * routers. y leads to o's subscription (r's route to it, one hop from o's
 * node); x declares the same subscription to r as well, and publishes on
 * its key.
 *  - x declared it at a count no greater than r's: x's own route to it
 *    does not pass r, so x delivers its messages there itself, and r does
 *    not carry them on to y (in a triangle of routers, the message would
 *    otherwise reach o's router twice);
 *  - x declared it at a greater count: x's route may lead through r, and
 *    r carries x's messages on to y.
 *
 * Every wait is bounded and fails rather than hangs; bounds are generous,
 * never timing goals.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "nodes.h"
#include "raw.h"

#define WAIT_MS NODES_WAIT_MS

/* x opens channel ch for key, as publisher "xp" in its life ch, and sends
 * one message. */
static void
raw_publish(struct raw *x, uint64_t ch, const char *key, int value)
{
	struct ctl_msg open = {.type = CTL_OPEN};
	uint8_t buf[WIRE_HDR_MAX + sizeof(value)];
	struct wire_frame f = {.type = WIRE_DATA, .channel = ch, .len = sizeof(value)};
	size_t h;

	open.u.open.channel = ch;
	open.u.open.publisher = S("xp");
	open.u.open.key = S(key);
	open.u.open.reliability = TERN_BEST_EFFORT;
	open.u.open.instance = ch; /* a publisher (name, instance) has one key */
	raw_send(x, &open);
	h = wire_header_encode(buf, &f);
	memcpy(buf + h, &value, sizeof(value));
	assert_int_equal(write(x->fd, buf, h + sizeof(value)), (ssize_t)(h + sizeof(value)));
}

/*
 * Read from y until the message on key "m" arrives, then on to the answer
 * of a PING sent after it (what r wrote before that answer has come): the
 * number of messages that came on key "k".
 */
static int
messages_on_k(struct raw *y)
{
	uint64_t deadline = now_ms() + WAIT_MS, k_ch = 0, m_ch = 0;
	struct ctl_msg m, ping = {.type = CTL_PING};
	struct wire_frame f;
	const uint8_t *body;
	bool marker = false;
	int on_k = 0;

	while (raw_frame(y, &f, &body, &m, deadline)) {
		if (f.type == WIRE_CONTROL && m.type == CTL_OPEN) {
			if (m.u.open.key.len == 1 && m.u.open.key.p[0] == 'k') {
				k_ch = m.u.open.channel;
			} else if (m.u.open.key.len == 1 && m.u.open.key.p[0] == 'm') {
				m_ch = m.u.open.channel;
			}
		} else if (f.type == WIRE_CONTROL && m.type == CTL_PONG && m.u.token == 4242) {
			return on_k;
		} else if (f.type == WIRE_DATA && k_ch != 0 && f.channel == k_ch) {
			on_k++;
		} else if (f.type == WIRE_DATA && m_ch != 0 && f.channel == m_ch && !marker) {
			marker = true;
			ping.u.token = 4242;
			raw_send(y, &ping);
		}
	}
	fail_msg("the message on m, and the PONG after it, did not come in %d ms", WAIT_MS);
	return -1;
}

/* r, y and x as above, x declaring o's subscription 1 at x_hops; x
 * publishes on k, then on m (which only y leads to). What y got on k. */
static int
forwarded(uint64_t x_hops)
{
	tern_node *r = open_node("r", TERN_MODE_ROUTER);
	char bound[256];
	struct raw x, y;
	uint64_t id = 1, mid = 2;
	int on_k;

	assert_int_equal(tern_node_listen(r, "tcp://127.0.0.1:0", bound, sizeof(bound)), 0);
	raw_open(&y, bound, "y");
	raw_open(&x, bound, "x");
	assert_int_equal(tern_node_wait_peers(r, 2, WAIT_MS), 0);
	/* y is next to o's node: r's route, at r's count 1 */
	send_sub_at(&y, "o", id, "k", 0);
	send_sub_at(&y, "o", mid, "m", 0);
	assert_true(raw_expect(&x, CTL_SUB, "o", &id, 0, false));
	assert_true(raw_expect(&x, CTL_SUB, "o", &mid, 0, false));
	send_sub_at(&x, "o", id, "k", x_hops);
	assert_false(raw_expect(&x, CTL_SUB, "o", &id, 0, true)); /* r has read it */

	raw_publish(&x, 1, "k", 7);
	raw_publish(&x, 2, "m", 8);
	on_k = messages_on_k(&y);

	close(x.fd);
	close(y.fd);
	tern_node_close(r);
	return on_k;
}

static void
test_not_carried_toward_a_route_around(void **state)
{
	(void)state;
	assert_int_equal(forwarded(1), 0);
}

static void
test_carried_when_the_route_may_pass_here(void **state)
{
	(void)state;
	assert_int_equal(forwarded(2), 1);
}

int
main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_not_carried_toward_a_route_around),
	    cmocka_unit_test(test_carried_when_the_route_may_pass_here),
	};

	if (argc > 1) {
		cmocka_set_test_filter(argv[1]);
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}
