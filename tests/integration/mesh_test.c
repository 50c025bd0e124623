/*
 * mesh_test.c - routers in a cycle, through the public API only: three
 * routers each connected to the other two, a publisher's node on r0 and a
 * subscriber's node on r2.
 *  - a subscription closed by its subscriber goes from every router: the
 *    publisher sees no match afterwards (each router had declared it to
 *    the others, and those copies must not keep it alive through each
 *    other). Several rounds, as which router hears a declaration first
 *    varies from run to run;
 *  - the same when the subscriber's node leaves with its subscription
 *    open, and when it is killed;
 *  - a subscriber's node connected to two routers, which one of them
 *    heard of first through the other: when it leaves, that router stops
 *    sending toward the other router what only the subscriber wanted;
 *  - a router on one of two paths to a subscriber leaves: the publisher
 *    reaches it by the other;
 *  - a subscriber behind every router: each gets every message once, in
 *    order, whichever routes the routers chose.
 *
 * Nodes live in this process and talk over 127.0.0.1. Every wait is
 * bounded and fails rather than hangs; bounds are generous, never timing
 * goals.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "tern/tern.h"

#include "../child.h"
#include "nodes.h"

#define WAIT_MS NODES_WAIT_MS
#define ROUNDS  50

struct triangle {
	tern_node *r[3], *p;
	char bound[3][256];
	tern_pub *pub;
};

/* Three routers, each connected to the other two, and a publisher of
 * mesh/x on r0. */
static void
triangle_open(struct triangle *t)
{
	static const char *ids[3] = {"mesh-r0", "mesh-r1", "mesh-r2"};

	for (int i = 0; i < 3; i++) {
		t->r[i] = open_node(ids[i], TERN_MODE_ROUTER);
		assert_int_equal(tern_node_listen(t->r[i], "tcp://127.0.0.1:0", t->bound[i], 256),
		                 0);
	}
	assert_int_equal(tern_node_connect(t->r[0], t->bound[1]), 0);
	assert_int_equal(tern_node_connect(t->r[0], t->bound[2]), 0);
	assert_int_equal(tern_node_connect(t->r[1], t->bound[2]), 0);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(tern_node_wait_peers(t->r[i], 2, WAIT_MS), 0);
	}
	t->p = open_node("mesh-pub", TERN_MODE_PEER);
	assert_int_equal(tern_node_connect(t->p, t->bound[0]), 0);
	assert_int_equal(tern_node_wait_peers(t->p, 1, WAIT_MS), 0);
	assert_int_equal(tern_pub_open(&t->pub, t->p, "mesh/x", TERN_RELIABLE), 0);
}

static void
triangle_close(struct triangle *t)
{
	assert_int_equal(tern_pub_close(t->pub), 0);
	tern_node_close(t->p);
	for (int i = 0; i < 3; i++) {
		tern_node_close(t->r[i]);
	}
}

/* A subscriber's node on r2 subscribes to mesh/(all) and receives one
 * message from the publisher on r0. */
static tern_node *
subscribe_on_r2(struct triangle *t, tern_sub **sub, int round)
{
	tern_node *s = open_node("mesh-sub", TERN_MODE_PEER);
	tern_msg m;

	assert_int_equal(tern_node_connect(s, t->bound[2]), 0);
	assert_int_equal(tern_node_wait_peers(s, 1, WAIT_MS), 0);
	assert_int_equal(tern_sub_open(sub, s, "mesh/**", NULL, NULL), 0);
	assert_int_equal(wait_matched(t->pub, 1), 1);
	assert_int_equal(tern_publish(t->pub, &round, sizeof(round)), 0);
	assert_int_equal(tern_sub_recv(*sub, &m, WAIT_MS), 0);
	return s;
}

static void
test_unsubscribe_in_triangle(void **state)
{
	struct triangle t;
	tern_sub *sub;

	(void)state;
	triangle_open(&t);
	for (int round = 0; round < ROUNDS; round++) {
		tern_node *s = subscribe_on_r2(&t, &sub, round);
		tern_sub_close(sub);
		/* before the fix, some rounds kept a match for good */
		assert_int_equal(wait_matched(t.pub, 0), 0);
		tern_node_close(s);
	}
	triangle_close(&t);
}

/*
 * The subscriber's side of test_subscriber_leaves_triangle, in a process of
 * its own (forked before any node exists): for each address read from in,
 * a node connects there, subscribes to mesh/(all), receives one message,
 * writes a byte on out, and at the next byte on in closes with its
 * subscription still open. It ends with _exit, so the open subscription
 * is not reported as a leak.
 */
static void
subscriber_process(int in, int out)
{
	char bound[256], go = 1;
	tern_node *s;
	tern_sub *sub;
	tern_msg m;

	while (read(in, bound, sizeof(bound)) == (ssize_t)sizeof(bound)) {
		s = open_node("mesh-sub", TERN_MODE_PEER);
		if (tern_node_connect(s, bound) != 0 || tern_node_wait_peers(s, 1, WAIT_MS) != 0 ||
		    tern_sub_open(&sub, s, "mesh/**", NULL, NULL) != 0 ||
		    tern_sub_recv(sub, &m, WAIT_MS) != 0 || write(out, &go, 1) != 1 ||
		    read(in, &go, 1) != 1) {
			_exit(1);
		}
		tern_node_close(s); /* GOODBYE, the subscription open */
		if (write(out, &go, 1) != 1) {
			_exit(1);
		}
	}
	_exit(0);
}

/* The subscriber's node leaves (GOODBYE) with its subscription open. */
static void
test_subscriber_leaves_triangle(void **state)
{
	struct triangle t;
	struct child sub;
	char go = 1;

	(void)state;
	child_start(&sub, subscriber_process);
	triangle_open(&t);
	for (int round = 0; round < ROUNDS; round++) {
		assert_int_equal(write(sub.to, t.bound[2], sizeof(t.bound[2])),
		                 (ssize_t)sizeof(t.bound[2]));
		assert_int_equal(wait_matched(t.pub, 1), 1);
		assert_int_equal(tern_publish(t.pub, &round, sizeof(round)), 0);
		assert_int_equal(read(sub.from, &go, 1), 1); /* it has the message */
		assert_int_equal(write(sub.to, &go, 1), 1);
		assert_int_equal(read(sub.from, &go, 1), 1); /* its node has closed */
		assert_int_equal(wait_matched(t.pub, 0), 0);
	}
	child_end(&sub);
	triangle_close(&t);
}

/*
 * The multi-homed subscriber of test_multihomed_subscriber_leaves, in a
 * process of its own: it connects to the first address read from in,
 * subscribes to mesh/(all), tells out; connects to the second address,
 * tells out; and at the next byte on in closes with its subscription open.
 */
static void
multihomed_process(int in, int out)
{
	char first[256], second[256], go = 1;
	tern_node *s = open_node("mesh-sub", TERN_MODE_PEER);
	tern_sub *sub;

	if (read(in, first, sizeof(first)) != (ssize_t)sizeof(first) ||
	    read(in, second, sizeof(second)) != (ssize_t)sizeof(second) ||
	    tern_node_connect(s, first) != 0 || tern_node_wait_peers(s, 1, WAIT_MS) != 0 ||
	    tern_sub_open(&sub, s, "mesh/**", NULL, NULL) != 0 || write(out, &go, 1) != 1 ||
	    read(in, &go, 1) != 1 || tern_node_connect(s, second) != 0 ||
	    tern_node_wait_peers(s, 2, WAIT_MS) != 0 || write(out, &go, 1) != 1 ||
	    read(in, &go, 1) != 1) {
		_exit(1);
	}
	tern_node_close(s); /* GOODBYE to both, the subscription open */
	if (write(out, &go, 1) != 1) {
		_exit(1);
	}
	while (read(in, &go, 1) == 1) {
	}
	_exit(0);
}

/* Does node n send mesh/x toward the peer named `peer`? */
static bool
sends_toward(tern_node *n, const char *peer)
{
	char json[8192], at[64];
	const char *conn, *end;

	tern_node_stats_json(n, json, sizeof(json));
	snprintf(at, sizeof(at), "\"peer\":\"%s\"", peer);
	if ((conn = strstr(json, at)) == NULL || (conn = strstr(conn, "\"channels\":[")) == NULL ||
	    (end = strchr(conn, ']')) == NULL) {
		return false;
	}
	const char *key = strstr(conn, "\"key\":\"mesh/x\"");
	return key != NULL && key < end;
}

/*
 * r0 and r1 connected; the publisher's node and a local subscriber on r0,
 * which keeps the publisher sending there. The subscriber's node joins r1
 * (r0 hears of its subscription through r1, and routes mesh/x there), then
 * r0 directly, then leaves. Whichever of its GOODBYE and r1's UNSUB reaches
 * r0 first, r0 stops sending mesh/x to r1. Before the fix, its GOODBYE
 * first left the route toward r1 in place.
 */
static void
test_multihomed_subscriber_leaves(void **state)
{
	struct child sub;
	tern_node *r[2], *p;
	char bound[2][256], go = 1;
	tern_pub *pub;
	tern_sub *local;
	tern_msg m;

	(void)state;
	for (int round = 0; round < ROUNDS; round++) {
		child_start(&sub, multihomed_process);
		r[0] = open_node("mesh-r0", TERN_MODE_ROUTER);
		r[1] = open_node("mesh-r1", TERN_MODE_ROUTER);
		for (int i = 0; i < 2; i++) {
			assert_int_equal(tern_node_listen(r[i], "tcp://127.0.0.1:0", bound[i], 256),
			                 0);
		}
		assert_int_equal(tern_node_connect(r[0], bound[1]), 0);
		assert_int_equal(tern_node_wait_peers(r[0], 1, WAIT_MS), 0);
		p = open_node("mesh-pub", TERN_MODE_PEER);
		assert_int_equal(tern_node_connect(p, bound[0]), 0);
		assert_int_equal(tern_node_wait_peers(p, 1, WAIT_MS), 0);
		assert_int_equal(tern_pub_open(&pub, p, "mesh/x", TERN_RELIABLE), 0);
		assert_int_equal(tern_sub_open(&local, r[0], "mesh/**", NULL, NULL), 0);
		assert_int_equal(wait_matched(pub, 1), 1);
		assert_int_equal(write(sub.to, bound[1], 256), 256);
		assert_int_equal(write(sub.to, bound[0], 256), 256);
		assert_int_equal(read(sub.from, &go, 1), 1); /* subscribed through r1 */
		for (int w = 0; w < WAIT_MS && !sends_toward(r[0], "mesh-r1"); w++) {
			usleep(1000);
		}
		assert_true(sends_toward(r[0], "mesh-r1"));
		assert_int_equal(write(sub.to, &go, 1), 1);
		assert_int_equal(read(sub.from, &go, 1), 1); /* connected to r0 too */
		/* r0 has read its SYNC, after its SUB */
		assert_int_equal(tern_node_wait_peers(r[0], 3, WAIT_MS), 0);
		assert_int_equal(write(sub.to, &go, 1), 1);
		assert_int_equal(read(sub.from, &go, 1), 1); /* it has left */
		for (int w = 0; w < WAIT_MS && sends_toward(r[0], "mesh-r1"); w++) {
			usleep(1000);
		}
		assert_false(sends_toward(r[0], "mesh-r1"));
		/* the local subscriber still gets what is published */
		assert_int_equal(tern_publish(pub, &round, sizeof(round)), 0);
		assert_int_equal(tern_sub_recv(local, &m, WAIT_MS), 0);
		child_end(&sub);
		tern_sub_close(local);
		assert_int_equal(tern_pub_close(pub), 0);
		tern_node_close(p);
		tern_node_close(r[1]);
		tern_node_close(r[0]);
	}
}

/*
 * The subscriber's side of test_subscriber_killed_triangle, in a process of
 * its own: a node on the address read from in subscribes to mesh/(all),
 * receives one message, writes a byte on out, and waits to be killed.
 */
static void
killed_process(int in, int out)
{
	char bound[256], go = 1;
	tern_node *s;
	tern_sub *sub;
	tern_msg m;

	if (read(in, bound, sizeof(bound)) != (ssize_t)sizeof(bound)) {
		_exit(1);
	}
	s = open_node("mesh-sub", TERN_MODE_PEER);
	if (tern_node_connect(s, bound) != 0 || tern_node_wait_peers(s, 1, WAIT_MS) != 0 ||
	    tern_sub_open(&sub, s, "mesh/**", NULL, NULL) != 0 ||
	    tern_sub_recv(sub, &m, WAIT_MS) != 0 || write(out, &go, 1) != 1) {
		_exit(1);
	}
	for (;;) {
		pause();
	}
}

/*
 * The subscriber's node dies (SIGKILL: no UNSUB, no GOODBYE). r2 loses its
 * only link to it, and r0 or r1 may have declared the subscription back to
 * r2 through the other: the routers' routes then point round the triangle.
 * The count they declare climbs at every turn until it passes the bound,
 * and the subscription goes (before, it stayed, matched, in 7 rounds of 20).
 */
static void
test_subscriber_killed_triangle(void **state)
{
	(void)state;
	for (int round = 0; round < ROUNDS; round++) {
		struct triangle t;
		struct child sub;
		char go;

		child_start(&sub, killed_process);
		triangle_open(&t);
		assert_int_equal(write(sub.to, t.bound[2], sizeof(t.bound[2])),
		                 (ssize_t)sizeof(t.bound[2]));
		assert_int_equal(wait_matched(t.pub, 1), 1);
		assert_int_equal(tern_publish(t.pub, &round, sizeof(round)), 0);
		assert_int_equal(read(sub.from, &go, 1), 1); /* it has the message */
		kill(sub.pid, SIGKILL);
		assert_int_equal(waitpid(sub.pid, NULL, 0), sub.pid);
		close(sub.to);
		close(sub.from);
		assert_int_equal(wait_matched(t.pub, 0), 0);
		triangle_close(&t);
	}
}

/*
 * Routers r0, r2, r3, r4 in a line r3 - r0 - r2 - r4, the publisher's node
 * on r2, and a subscriber's node on r4 that then also connects to r3. When
 * r4 closes, r2 loses its way to the subscriber and withdraws it; r0 moves
 * its route to r3 and must now tell r2, or the publisher on r2 never
 * reaches the subscriber again. Before the fix it did not, in 6 of 6 runs.
 */
static void
test_router_leaves_on_one_path(void **state)
{
	static const char *ids[4] = {"mesh-r0", "mesh-r2", "mesh-r3", "mesh-r4"};
	tern_node *r[4], *s, *p;
	char bound[4][256];
	tern_sub *sub;
	tern_pub *pub;
	tern_msg m;

	(void)state;
	for (int round = 0; round < ROUNDS; round++) {
		for (int i = 0; i < 4; i++) {
			r[i] = open_node(ids[i], TERN_MODE_ROUTER);
			assert_int_equal(tern_node_listen(r[i], "tcp://127.0.0.1:0", bound[i], 256),
			                 0);
		}
		assert_int_equal(tern_node_connect(r[1], bound[0]), 0);
		assert_int_equal(tern_node_connect(r[2], bound[0]), 0);
		assert_int_equal(tern_node_connect(r[3], bound[1]), 0);
		assert_int_equal(tern_node_wait_peers(r[0], 2, WAIT_MS), 0);
		assert_int_equal(tern_node_wait_peers(r[1], 2, WAIT_MS), 0);
		p = open_node("mesh-pub", TERN_MODE_PEER);
		assert_int_equal(tern_node_connect(p, bound[1]), 0);
		assert_int_equal(tern_node_wait_peers(p, 1, WAIT_MS), 0);
		assert_int_equal(tern_pub_open(&pub, p, "mesh/x", TERN_RELIABLE), 0);
		s = open_node("mesh-sub", TERN_MODE_PEER);
		assert_int_equal(tern_node_connect(s, bound[3]), 0);
		assert_int_equal(tern_node_wait_peers(s, 1, WAIT_MS), 0);
		assert_int_equal(tern_sub_open(&sub, s, "mesh/**", NULL, NULL), 0);
		assert_int_equal(wait_matched(pub, 1), 1);
		assert_int_equal(tern_node_connect(s, bound[2]), 0);
		assert_int_equal(tern_node_wait_peers(s, 2, WAIT_MS), 0);
		/* r3 has read the subscriber's SUB (its SYNC came after it) */
		assert_int_equal(tern_node_wait_peers(r[2], 2, WAIT_MS), 0);
		assert_int_equal(tern_publish(pub, &round, sizeof(round)), 0);
		assert_int_equal(tern_sub_recv(sub, &m, WAIT_MS), 0);
		tern_node_close(r[3]);
		/* r2 routes mesh/x to r0 once r0 has told it of the subscriber;
		 * a message from the publisher that r2 reads after that reaches it */
		for (int w = 0; w < WAIT_MS && !sends_toward(r[1], "mesh-r0"); w++) {
			usleep(1000);
		}
		assert_true(sends_toward(r[1], "mesh-r0"));
		assert_int_equal(wait_matched(pub, 1), 1);
		/* the publisher may still be on its old channel to r2, which the
		 * route's flap closes with what it had not written: publish until
		 * one arrives (bounded) */
		int got = -1;
		for (int w = 0; w < WAIT_MS / 100 && got != 0; w++) {
			assert_int_equal(tern_publish(pub, &round, sizeof(round)), 0);
			got = tern_sub_recv(sub, &m, 100);
		}
		assert_int_equal(got, 0);
		assert_int_equal(*(const int *)m.data, round);
		tern_sub_close(sub);
		tern_node_close(s);
		assert_int_equal(tern_pub_close(pub), 0);
		tern_node_close(p);
		for (int i = 0; i < 3; i++) {
			tern_node_close(r[i]);
		}
	}
}

/*
 * A subscriber's node on each router, the publisher on r0. A router does
 * not carry on toward a subscription a message from a router that
 * declared that subscription to it at a count no greater than its own
 * (that router's route to it does not pass here): each subscriber must
 * still get every message once, in order, whichever routes the routers
 * chose, crossed ones included (r0 reaching r1's subscriber through r2 and
 * r2's through r1, say, when declarations relayed by one router arrived
 * before the other's own). A rule that skipped any router that declared
 * the subscription lost messages there: a router took the copy it was
 * told to skip, and then dropped as a duplicate the one it needed. Several
 * rounds, with new subscribers each, see several of those choices.
 */
static void
test_fanout_in_triangle(void **state)
{
	static const char *sid[3] = {"mesh-sub0", "mesh-sub1", "mesh-sub2"};
	enum { MESSAGES = 50, FAN_ROUNDS = 10 };
	struct triangle t;

	(void)state;
	triangle_open(&t);
	for (int round = 0; round < FAN_ROUNDS; round++) {
		tern_node *s[3];
		tern_sub *sub[3];
		tern_msg m;

		for (int i = 0; i < 3; i++) {
			s[i] = open_node(sid[i], TERN_MODE_PEER);
			assert_int_equal(tern_node_connect(s[i], t.bound[i]), 0);
			assert_int_equal(tern_node_wait_peers(s[i], 1, WAIT_MS), 0);
			assert_int_equal(tern_sub_open(&sub[i], s[i], "mesh/x", NULL, NULL), 0);
		}
		/* the publisher counts its node's one link, not the subscribers:
		 * probes (negative) until each subscriber has one */
		for (int i = 0; i < 3; i++) {
			int got = -1;
			for (int w = 0; w < WAIT_MS / 100 && got != 0; w++) {
				int probe = -1;
				assert_int_equal(tern_publish(t.pub, &probe, sizeof(probe)), 0);
				got = tern_sub_recv(sub[i], &m, 100);
			}
			assert_int_equal(got, 0);
		}
		for (int k = 0; k < MESSAGES; k++) {
			assert_int_equal(tern_publish(t.pub, &k, sizeof(k)), 0);
		}
		for (int i = 0; i < 3; i++) {
			for (int k = 0; k < MESSAGES; k++) {
				do {
					assert_int_equal(tern_sub_recv(sub[i], &m, WAIT_MS), 0);
				} while (*(const int *)m.data < 0);
				assert_int_equal(*(const int *)m.data, k);
			}
		}
		for (int i = 0; i < 3; i++) {
			tern_sub_close(sub[i]);
			tern_node_close(s[i]);
		}
		assert_int_equal(wait_matched(t.pub, 0), 0);
	}
	triangle_close(&t);
}

int
main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_unsubscribe_in_triangle),
	    cmocka_unit_test(test_subscriber_leaves_triangle),
	    cmocka_unit_test(test_subscriber_killed_triangle),
	    cmocka_unit_test(test_multihomed_subscriber_leaves),
	    cmocka_unit_test(test_router_leaves_on_one_path),
	    cmocka_unit_test(test_fanout_in_triangle),
	};

	if (argc > 1) {
		cmocka_set_test_filter(argv[1]);
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}
