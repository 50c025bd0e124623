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
 * And which way r's route goes when a shorter one is declared after the
 * first (routers a, then b, lead to the subscription): b's, if nothing
 * went a's way yet; a's still, once a message went that way (a message on
 * the new way could overtake it).
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

	open.u.open.channel = ch;
	open.u.open.publisher = S("xp");
	open.u.open.key = S(key);
	open.u.open.reliability = TERN_BEST_EFFORT;
	open.u.open.instance = ch; /* a publisher (name, instance) has one key */
	raw_send(x, &open);
	raw_data(x, ch, value);
}

/* The channels a reader has seen opened: for key "k", and for its marker. */
struct seen {
	uint64_t k, marker;
};

/*
 * Read from y until a message on the marker key arrives, then on to the
 * answer of a PING sent after it (what r wrote before that answer has
 * come): the number of messages that came on key "k".
 */
static int
messages_on_k_until(struct raw *y, char marker, struct seen *ch)
{
	uint64_t deadline = now_ms() + WAIT_MS;
	struct ctl_msg m, ping = {.type = CTL_PING};
	struct wire_frame f;
	const uint8_t *body;
	bool marked = false;
	int on_k = 0;

	while (raw_frame(y, &f, &body, &m, deadline)) {
		if (f.type == WIRE_CONTROL && m.type == CTL_OPEN) {
			if (m.u.open.key.len == 1 && m.u.open.key.p[0] == 'k') {
				ch->k = m.u.open.channel;
			} else if (m.u.open.key.len == 1 && m.u.open.key.p[0] == marker) {
				ch->marker = m.u.open.channel;
			}
		} else if (f.type == WIRE_CONTROL && m.type == CTL_PONG && m.u.token == 4242) {
			return on_k;
		} else if (f.type == WIRE_DATA && ch->k != 0 && f.channel == ch->k) {
			on_k++;
		} else if (f.type == WIRE_DATA && ch->marker != 0 && f.channel == ch->marker &&
		           !marked) {
			marked = true;
			ping.u.token = 4242;
			raw_send(y, &ping);
		}
	}
	fail_msg("the message on %c, and the PONG after it, did not come in %d ms", marker,
	         WAIT_MS);
	return -1;
}

static int
messages_on_k(struct raw *y)
{
	struct seen ch = {0, 0};

	return messages_on_k_until(y, 'm', &ch);
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

/*
 * A route taken by first arrival, and a shorter one heard later: r with
 * routers a and b that both lead to o's subscription on k, a declaring it
 * first at count 1, then b at count 0 (b is next to o's node). Each also
 * leads to a marker subscription of its own (m: b, n: a). If
 * `traffic_first`, x publishes on k before b's declaration comes. Then x
 * publishes on k; *via_a and *via_b: what each got on k in all.
 */
static void
route_after_shorter(bool traffic_first, int *via_a, int *via_b)
{
	tern_node *r = open_node("r", TERN_MODE_ROUTER);
	char bound[256];
	struct raw a, b, x;
	struct seen seen_a = {0, 0}, seen_b = {0, 0};
	uint64_t id = 1, mid = 2, nid = 3, any = 0;

	assert_int_equal(tern_node_listen(r, "tcp://127.0.0.1:0", bound, sizeof(bound)), 0);
	raw_open(&a, bound, "a");
	raw_open(&b, bound, "b");
	raw_open(&x, bound, "x");
	assert_int_equal(tern_node_wait_peers(r, 3, WAIT_MS), 0);
	send_sub_at(&a, "o", id, "k", 1);
	send_sub_at(&b, "o", mid, "m", 0);
	send_sub_at(&a, "o", nid, "n", 0);
	/* r passes all three on to x, in whatever order it read a and b */
	for (unsigned seen = 0; seen != 7;) {
		any = 0;
		assert_true(raw_expect(&x, CTL_SUB, "o", &any, 0, false));
		assert_true(any >= id && any <= nid);
		seen |= 1u << (any - 1);
	}
	*via_a = *via_b = 0;
	if (traffic_first) {
		raw_publish(&x, 1, "k", 1);
		raw_publish(&x, 3, "n", 0);
		*via_a += messages_on_k_until(&a, 'n', &seen_a);
	}
	send_sub_at(&b, "o", id, "k", 0);
	/* taken: r takes back its own declaration from b, its route now */
	any = id;
	assert_int_equal(raw_expect(&b, CTL_UNSUB, "o", &any, CTL_UNSUB_WITHDRAWN, true),
	                 !traffic_first);
	if (traffic_first) {
		raw_data(&x, 1, 2);
		raw_data(&x, 3, 0);
	} else {
		raw_publish(&x, 1, "k", 2);
		raw_publish(&x, 3, "n", 0);
	}
	raw_publish(&x, 2, "m", 0);
	*via_b += messages_on_k_until(&b, 'm', &seen_b);
	*via_a += messages_on_k_until(&a, 'n', &seen_a);

	close(x.fd);
	close(a.fd);
	close(b.fd);
	tern_node_close(r);
}

static void
test_shorter_route_taken_before_traffic(void **state)
{
	int via_a, via_b;

	(void)state;
	route_after_shorter(false, &via_a, &via_b);
	assert_int_equal(via_b, 1);
	assert_int_equal(via_a, 0);
}

static void
test_route_kept_once_traffic_went_its_way(void **state)
{
	int via_a, via_b;

	(void)state;
	route_after_shorter(true, &via_a, &via_b);
	/* both of x's messages on k went the first way, in order */
	assert_int_equal(via_a, 2);
	assert_int_equal(via_b, 0);
}

int
main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_not_carried_toward_a_route_around),
	    cmocka_unit_test(test_carried_when_the_route_may_pass_here),
	    cmocka_unit_test(test_shorter_route_taken_before_traffic),
	    cmocka_unit_test(test_route_kept_once_traffic_went_its_way),
	};

	if (argc > 1) {
		cmocka_set_test_filter(argv[1]);
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}
