/*
 * restart_test.c - a router with 100,000 subscriptions behind it restarts,
 * and every one of them is found again: a subscriber node declares one
 * subscription on each of k/0 .. k/99999 through a router, a publisher node
 * one publisher on each; the router is closed and opened again on the same
 * endpoint; once the two nodes are back, every publisher is matched again,
 * and a message on each key reaches its subscriber, each exactly once.
 *
 * Public API only, one process. Under the sanitizers, which make each
 * allocation and lock many times dearer, 10,000 keys. No timing is
 * asserted: every wait is a bounded loop with a generous limit.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "tern/tern.h"

#include "../sanitized.h"
#include "nodes.h"

#ifdef TERN_TEST_SANITIZED
#define KEYS 10000
#else
#define KEYS 100000
#endif

#define WAIT_MS 120000

static atomic_long received;
static atomic_uchar seen[KEYS];
static atomic_long repeated;

static void
on_msg(void *arg, const tern_msg *m)
{
	long k = atol(m->key + 2);

	(void)arg;
	if (k >= 0 && k < KEYS && atomic_exchange(&seen[k], 1) != 0) {
		atomic_fetch_add(&repeated, 1);
	}
	atomic_fetch_add(&received, 1);
}

/* How many of the publishers have a subscriber, waiting (bounded) for all. */
static long
wait_all_matched(tern_pub **pubs)
{
	long matched = 0;

	for (int waited = 0; waited < WAIT_MS / 10; waited++) {
		matched = 0;
		for (long i = 0; i < KEYS; i++) {
			matched += tern_pub_matched(pubs[i]) > 0;
		}
		if (matched == KEYS) {
			break;
		}
		usleep(10000);
	}
	return matched;
}

static void
test_router_restart_keeps_every_subscription(void **state)
{
	char dir[] = "/tmp/tern-restart-XXXXXX", ep[128], key[32];
	tern_node *r, *s, *p;
	tern_sub **subs = calloc(KEYS, sizeof(*subs));
	tern_pub **pubs = calloc(KEYS, sizeof(*pubs));
	tern_stats st;

	(void)state;
	assert_non_null(mkdtemp(dir));
	snprintf(ep, sizeof(ep), "unix://%s/router.sock", dir);
	r = open_redialing("restart-router", TERN_MODE_ROUTER);
	assert_int_equal(tern_node_listen(r, ep, NULL, 0), 0);
	s = open_redialing("restart-sub", TERN_MODE_PEER);
	p = open_redialing("restart-pub", TERN_MODE_PEER);
	assert_int_equal(tern_node_connect(s, ep), 0);
	assert_int_equal(tern_node_connect(p, ep), 0);
	for (long i = 0; i < KEYS; i++) {
		snprintf(key, sizeof(key), "k/%ld", i);
		assert_int_equal(tern_sub_open(&subs[i], s, key, on_msg, NULL), 0);
		assert_int_equal(tern_pub_open(&pubs[i], p, key, -1), 0);
	}
	assert_int_equal(wait_all_matched(pubs), KEYS);

	/* the router goes; both sides see it gone, then it comes back */
	tern_node_close(r);
	for (int w = 0; w < WAIT_MS / 10 && tern_pub_matched(pubs[KEYS - 1]) > 0; w++) {
		usleep(10000);
	}
	assert_int_equal(tern_pub_matched(pubs[KEYS - 1]), 0);
	r = open_redialing("restart-router", TERN_MODE_ROUTER);
	assert_int_equal(tern_node_listen(r, ep, NULL, 0), 0);
	assert_int_equal(tern_node_wait_peers(r, 2, WAIT_MS), 0);
	long matched = wait_all_matched(pubs);
	print_message("%ld of %d subscriptions found again through the new router\n", matched,
	              KEYS);
	assert_int_equal(matched, KEYS);

	for (long i = 0; i < KEYS; i++) {
		assert_int_equal(tern_publish(pubs[i], &i, sizeof(i)), 0);
	}
	for (int w = 0; w < WAIT_MS / 10 && atomic_load(&received) < KEYS; w++) {
		usleep(10000);
	}
	assert_int_equal(atomic_load(&received), KEYS);
	assert_int_equal(atomic_load(&repeated), 0);
	tern_node_stats(s, &st);
	assert_int_equal(st.connections, 1);

	for (long i = 0; i < KEYS; i++) {
		tern_pub_close(pubs[i]);
		tern_sub_close(subs[i]);
	}
	tern_node_close(p);
	tern_node_close(s);
	tern_node_close(r);
	free(pubs);
	free(subs);
	snprintf(key, sizeof(key), "%s", dir);
	rmdir(key);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_router_restart_keeps_every_subscription),
	};
	return cmocka_run_group_tests_name("restart", tests, NULL, NULL);
}
