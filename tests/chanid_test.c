/*
 * chanid_test.c - channel ids: taken in order up to the bound, then round
 * again past those in use; a closed id found by no lookup and taken by
 * nobody until the peer answers a PING queued after its CLOSE; the memory
 * for held ids given back once a burst of closes settles.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "chanid.h"
#include "error.h"

#define MAX 600 /* over two pages of the table */

static int vals[MAX + 1];

static uint32_t
take(struct chanid *t, uint32_t id_for)
{
	uint32_t id = 0;

	assert_int_equal(chanid_take(t, &vals[id_for], &id), 0);
	return id;
}

static void
test_in_order_then_full(void **state)
{
	struct chanid t;
	uint32_t id;

	(void)state;
	chanid_init(&t, MAX);
	for (uint32_t i = 1; i <= MAX; i++) {
		assert_int_equal(take(&t, i), i);
		assert_ptr_equal(chanid_get(&t, i), &vals[i]);
	}
	assert_null(chanid_get(&t, 0));
	assert_null(chanid_get(&t, MAX + 1));
	assert_int_equal(chanid_take(&t, &vals[0], &id), TERN_ENOMEM);
	assert_non_null(strstr(tern_last_error(), "channel ids"));
	chanid_free(&t);
}

static void
test_held_until_settled(void **state)
{
	struct chanid t;
	uint32_t id;

	(void)state;
	chanid_init(&t, MAX);
	for (uint32_t i = 1; i <= MAX; i++) {
		take(&t, i);
	}
	chanid_close(&t, 7, 100);
	chanid_close(&t, 300, 200);
	assert_null(chanid_get(&t, 7));
	assert_null(chanid_get(&t, 300));
	assert_int_equal(t.nheld, 2);
	assert_int_equal(chanid_take(&t, &vals[0], &id), TERN_ENOMEM);
	/* a PING queued at the same time as the CLOSE proves nothing */
	chanid_settle(&t, 100);
	assert_int_equal(chanid_take(&t, &vals[0], &id), TERN_ENOMEM);
	chanid_settle(&t, 101);
	assert_int_equal(t.nheld, 1);
	assert_int_equal(take(&t, 7), 7);
	assert_int_equal(chanid_take(&t, &vals[0], &id), TERN_ENOMEM);
	chanid_settle(&t, 1000);
	assert_int_equal(take(&t, 300), 300);
	assert_int_equal(t.nheld, 0);
	chanid_free(&t);
}

/* Round again from where the last search stopped, past ids in use. */
static void
test_round_again(void **state)
{
	struct chanid t;

	(void)state;
	chanid_init(&t, MAX);
	for (uint32_t i = 1; i <= MAX; i++) {
		take(&t, i);
	}
	for (uint32_t i = 1; i <= MAX; i += 2) {
		chanid_close(&t, i, 5);
	}
	chanid_settle(&t, 6);
	for (uint32_t i = 1; i <= MAX; i += 2) {
		assert_int_equal(take(&t, i), i);
	}
	chanid_close(&t, 1, 7);
	chanid_close(&t, 2, 7);
	chanid_close(&t, MAX - 1, 7);
	chanid_settle(&t, 8);
	assert_int_equal(take(&t, 1), 1);
	/* 1 is free again, but the search goes on from where it stopped */
	chanid_close(&t, 1, 9);
	chanid_settle(&t, 10);
	assert_int_equal(take(&t, 2), 2);
	assert_int_equal(take(&t, MAX - 1), MAX - 1);
	assert_int_equal(take(&t, 1), 1);
	chanid_free(&t);
}

/* Many channels closed at once, then answered: the table's pages and the
 * list of held ids go. */
static void
test_burst_gives_memory_back(void **state)
{
	struct chanid t;
	const uint32_t max = 1u << 20, n = 100000;

	(void)state;
	chanid_init(&t, max);
	for (uint32_t i = 1; i <= n; i++) {
		assert_int_equal(chanid_take(&t, &vals[1], &(uint32_t){0}), 0);
	}
	for (uint32_t i = 1; i <= n; i++) {
		chanid_close(&t, i, i);
	}
	assert_int_equal(t.nheld, n);
	chanid_settle(&t, n / 2 + 1);
	assert_int_equal(t.nheld, n / 2);
	chanid_settle(&t, n + 1);
	assert_int_equal(t.nheld, 0);
	assert_null(t.held);
	for (uint32_t p = 0; p < t.tab.cap / IDTAB_PAGE; p++) {
		assert_null(t.tab.pages[p]);
	}
	chanid_free(&t);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_in_order_then_full),
	    cmocka_unit_test(test_held_until_settled),
	    cmocka_unit_test(test_round_again),
	    cmocka_unit_test(test_burst_gives_memory_back),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
