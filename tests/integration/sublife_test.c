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

#include "raw.h"

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

/*
 * A router relays publisher p's messages to x, which takes them into its
 * socket but never consumes them, then goes away without a GOODBYE and does
 * not come back within slow_consumer_ms. What the router kept for x is
 * lost, and p, a hop further back, is not told (reliability is per link):
 * the router's node counters say so (undelivered), besides its log.
 */
static void
test_relay_counts_what_it_gave_up(void **state)
{
	tern_node *r, *p = open_node("p", TERN_MODE_PEER);
	uint64_t ch = 0, bytes = 0;
	tern_config cfg;
	tern_stats st;
	char bound[256];
	tern_pub *pub;
	struct raw x;
	int got[5];
	(void)state;

	node_config(&cfg, "r", TERN_MODE_ROUTER);
	cfg.slow_consumer_ms = 1000;
	assert_int_equal(tern_node_open(&r, &cfg), 0);
	assert_int_equal(tern_node_listen(r, "tcp://127.0.0.1:0", bound, sizeof(bound)), 0);
	raw_open_as(&x, bound, "x", TERN_MODE_PEER);
	send_sub(&x, "x", 1, "k");
	assert_int_equal(tern_node_connect(p, bound), 0);
	assert_int_equal(tern_pub_open(&pub, p, "k", TERN_RELIABLE), 0);
	assert_int_equal(wait_matched(pub, 1), 1);
	for (int i = 0; i < 5; i++) {
		assert_int_equal(tern_publish(pub, &i, sizeof(i)), 0);
	}
	read_data(&x, "k", &ch, got, 5, &bytes); /* and not consumed */
	close(x.fd);
	/* the router took them from p: p has nothing to give up on */
	assert_int_equal(tern_pub_flush(pub, WAIT_MS), 0);
	tern_node_stats(r, &st);
	for (int w = 0; w < WAIT_MS / 10 && st.undelivered == 0; w++) {
		usleep(10000);
		tern_node_stats(r, &st);
	}
	assert_int_equal(st.undelivered, 5);
	assert_int_equal(tern_pub_close(pub), 0);
	tern_node_stats(p, &st);
	assert_int_equal(st.undelivered, 0);
	tern_node_close(p);
	tern_node_close(r);
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
	    cmocka_unit_test(test_relay_counts_what_it_gave_up),
	};

	signal(SIGPIPE, SIG_IGN); /* a write to a closed peer fails its assert instead */
	if (argc > 1) {
		cmocka_set_test_filter(argv[1]);
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}
