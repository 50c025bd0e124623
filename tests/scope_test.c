/*
 * scope_test.c - the scopes of client links: what each asked for, what
 * that meets, the bound past which a scope is everything, and a link
 * forgotten.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "scope.h"

static int link_a, link_b; /* stand-ins: the table only compares them */

#define ADD(t, l, ke)   assert_int_equal(scope_add(t, l, ke, strlen(ke)), 0)
#define HAS(t, l, ke)   scope_has(t, l, ke, strlen(ke))
#define MEETS(t, l, ke) scope_meets(t, l, ke, strlen(ke))

static void
test_meets_what_was_asked(void **state)
{
	struct scope_table t = {0};

	(void)state;
	assert_false(MEETS(&t, &link_a, "**")); /* nothing asked: nothing met */
	ADD(&t, &link_a, "s/1/temp");
	ADD(&t, &link_a, "cmd/x");
	assert_true(HAS(&t, &link_a, "s/1/temp"));
	assert_false(HAS(&t, &link_a, "s/1")); /* on the way to it, not asked */
	assert_false(HAS(&t, &link_b, "s/1/temp"));
	assert_true(MEETS(&t, &link_a, "s/1/temp"));
	assert_true(MEETS(&t, &link_a, "s/*/temp"));
	assert_true(MEETS(&t, &link_a, "s/**"));
	assert_true(MEETS(&t, &link_a, "cmd/*"));
	assert_false(MEETS(&t, &link_a, "s/2/temp"));
	assert_false(MEETS(&t, &link_a, "s/1"));
	assert_false(MEETS(&t, &link_a, "@tern/**"));
	assert_false(MEETS(&t, &link_b, "**"));
	ADD(&t, &link_a, "s/1"); /* the prefix, asked for itself */
	assert_true(HAS(&t, &link_a, "s/1"));
	assert_true(MEETS(&t, &link_a, "s/1"));
	scope_free_all(&t);
}

static void
test_full_becomes_everything(void **state)
{
	struct scope_table t = {0};
	char key[32];

	(void)state;
	for (int k = 0; k < SCOPE_MAX; k++) {
		snprintf(key, sizeof(key), "k/%d", k);
		assert_false(scope_full(&t, &link_a));
		ADD(&t, &link_a, key);
	}
	ADD(&t, &link_a, "k/0"); /* known: no change */
	assert_true(scope_full(&t, &link_a));
	assert_false(MEETS(&t, &link_a, "other"));
	ADD(&t, &link_a, "one/more");
	assert_true(MEETS(&t, &link_a, "other"));
	assert_true(HAS(&t, &link_a, "anything/at/all"));
	assert_false(MEETS(&t, &link_b, "other"));
	scope_free_all(&t);
}

static void
test_remove(void **state)
{
	struct scope_table t = {0};
	char key[32];

	(void)state;
	ADD(&t, &link_a, "s/1");
	ADD(&t, &link_a, "s/1/temp");
	assert_false(scope_remove(&t, &link_a, "s/2", 3));
	assert_false(scope_remove(&t, &link_b, "s/1", 3));
	assert_true(scope_remove(&t, &link_a, "s/1", 3));
	assert_false(HAS(&t, &link_a, "s/1"));
	assert_false(MEETS(&t, &link_a, "s/1"));
	assert_true(MEETS(&t, &link_a, "s/*/temp"));
	assert_true(scope_remove(&t, &link_a, "s/1/temp", 8));
	assert_int_equal(t.by_link.n, 0); /* emptied: freed */
	/* a scope that became everything stays so */
	for (int k = 0; k <= SCOPE_MAX; k++) {
		snprintf(key, sizeof(key), "k/%d", k);
		ADD(&t, &link_a, key);
	}
	assert_false(scope_remove(&t, &link_a, "k/0", 3));
	assert_true(MEETS(&t, &link_a, "k/0"));
	scope_free_all(&t);
}

static void
test_forget(void **state)
{
	struct scope_table t = {0};

	(void)state;
	ADD(&t, &link_a, "a");
	ADD(&t, &link_b, "b");
	scope_forget(&t, &link_a);
	scope_forget(&t, &link_a); /* twice: nothing */
	assert_false(MEETS(&t, &link_a, "a"));
	assert_true(MEETS(&t, &link_b, "b"));
	scope_forget(&t, &link_b);
	assert_int_equal(t.by_link.n, 0);
	scope_free_all(&t);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_meets_what_was_asked),
	    cmocka_unit_test(test_full_becomes_everything),
	    cmocka_unit_test(test_remove),
	    cmocka_unit_test(test_forget),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
