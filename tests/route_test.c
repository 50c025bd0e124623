/*
 * route_test.c - the interest table: which peer a source's messages go to
 * while subscriptions come and go.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "route.h"

static int peer_a, peer_b, peer_c; /* stand-ins: the table only compares them */

static struct interest *
declare(struct route_table *t, const char *origin, uint64_t id, const char *ke, void *peer)
{
	struct interest *i = route_find(t, origin, strlen(origin), id);

	if (i == NULL) {
		i = route_add(t, origin, strlen(origin), id, ke, strlen(ke), 1);
		assert_non_null(i);
	}
	assert_true(route_from_add(i, peer, 1));
	return i;
}

static bool
wants(struct route_table *t, void *peer, const char *key)
{
	return route_wants(t, peer, key, strlen(key));
}

static void
test_first_heard_route_wins(void **state)
{
	struct route_table t = {0};
	(void)state;

	/* node x's subscription arrives from a, then again from b (a triangle) */
	declare(&t, "x", 1, "sensors/**", &peer_a);
	declare(&t, "x", 1, "sensors/**", &peer_b);
	assert_true(wants(&t, &peer_a, "sensors/t"));
	assert_false(wants(&t, &peer_b, "sensors/t"));
	assert_false(wants(&t, &peer_a, "other/t"));
	route_free_all(&t);
}

static void
test_route_moves_when_a_peer_goes(void **state)
{
	struct route_table t = {0};
	struct interest *i;
	(void)state;

	i = declare(&t, "x", 1, "k/*", &peer_a);
	declare(&t, "x", 1, "k/*", &peer_b);
	/* each link's count is kept beside it, and a new one replaces it */
	assert_true(route_from_add(i, &peer_b, 7));
	assert_int_equal(i->nfrom, 2);
	assert_int_equal(i->from_hops[0], 1);
	assert_int_equal(i->from_hops[1], 7);
	/* a breaks: b, heard second, becomes the route, with its count */
	assert_true(route_from_remove(i, &peer_a));
	assert_int_equal(i->from_hops[0], 7);
	assert_false(route_from_remove(i, &peer_a));
	assert_true(wants(&t, &peer_b, "k/1"));
	assert_false(wants(&t, &peer_a, "k/1"));
	/* and when b goes too, nobody is routed to */
	assert_true(route_from_remove(i, &peer_b));
	assert_int_equal(i->nfrom, 0);
	assert_false(wants(&t, &peer_b, "k/1"));
	route_remove(&t, i);
	assert_null(t.head);
}

static void
test_interest_changes_while_data_flows(void **state)
{
	struct route_table t = {0};
	struct interest *i1, *i2;
	(void)state;

	/* a source on key "a/b" asks, before each message, who wants it */
	assert_false(wants(&t, &peer_c, "a/b"));
	i1 = declare(&t, "y", 7, "a/*", &peer_c);
	assert_true(wants(&t, &peer_c, "a/b"));
	i2 = declare(&t, "y", 8, "a/b", &peer_c);
	route_remove(&t, i1); /* one of two matching subscriptions goes */
	assert_true(wants(&t, &peer_c, "a/b"));
	route_remove(&t, i2);
	assert_false(wants(&t, &peer_c, "a/b"));
	/* same id from another origin is another subscription */
	declare(&t, "y", 9, "a/**", &peer_c);
	declare(&t, "z", 9, "q", &peer_a);
	assert_non_null(route_find(&t, "z", 1, 9));
	assert_null(route_find(&t, "z", 1, 7));
	assert_true(wants(&t, &peer_c, "a/b/c"));
	assert_false(wants(&t, &peer_a, "a/b/c"));
	route_free_all(&t);
	assert_null(t.head);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_first_heard_route_wins),
	    cmocka_unit_test(test_route_moves_when_a_peer_goes),
	    cmocka_unit_test(test_interest_changes_while_data_flows),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
