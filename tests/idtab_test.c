/*
 * idtab_test.c - pointers by growing id, in pages: what is put is found,
 * what is deleted is gone, a page goes when its last id does, the table
 * grows to far ids and lookups beyond it find nothing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "idtab.h"

#define IDS (5 * IDTAB_PAGE + 17)

static int vals[IDS];

static void
test_put_get_del(void **state)
{
	struct idtab t = {0};

	(void)state;
	assert_null(idtab_get(&t, 0));
	assert_null(idtab_get(&t, UINT64_MAX));
	for (uint32_t id = 1; id < IDS; id++) {
		assert_int_equal(idtab_put(&t, id, &vals[id]), 0);
	}
	assert_true(t.cap >= IDS);
	for (uint32_t id = 1; id < IDS; id++) {
		assert_ptr_equal(idtab_get(&t, id), &vals[id]);
	}
	assert_null(idtab_get(&t, 0));
	assert_null(idtab_get(&t, t.cap));
	assert_null(idtab_get(&t, (uint64_t)UINT32_MAX + 1));
	/* every other id goes: the rest stay */
	for (uint32_t id = 1; id < IDS; id += 2) {
		idtab_del(&t, id);
	}
	for (uint32_t id = 1; id < IDS; id++) {
		assert_ptr_equal(idtab_get(&t, id), id % 2 ? NULL : &vals[id]);
	}
	idtab_free(&t);
	assert_null(t.pages);
	assert_int_equal(t.cap, 0);
}

static void
test_page_goes_with_its_last_id(void **state)
{
	struct idtab t = {0};
	uint32_t first = 2 * IDTAB_PAGE;

	(void)state;
	for (uint32_t id = first; id < first + IDTAB_PAGE; id++) {
		assert_int_equal(idtab_put(&t, id, &vals[id - first]), 0);
	}
	assert_non_null(t.pages[first / IDTAB_PAGE]);
	assert_int_equal(t.pages[first / IDTAB_PAGE]->n, IDTAB_PAGE);
	for (uint32_t id = first; id < first + IDTAB_PAGE - 1; id++) {
		idtab_del(&t, id);
	}
	assert_non_null(t.pages[first / IDTAB_PAGE]);
	idtab_del(&t, first + IDTAB_PAGE - 1);
	assert_null(t.pages[first / IDTAB_PAGE]);
	assert_null(idtab_get(&t, first));
	/* an id used again after its page went gets a fresh page */
	assert_int_equal(idtab_put(&t, first + 3, &vals[3]), 0);
	assert_ptr_equal(idtab_get(&t, first + 3), &vals[3]);
	assert_null(idtab_get(&t, first + 4));
	idtab_free(&t);
}

static void
test_far_id(void **state)
{
	struct idtab t = {0};
	uint32_t far = 1048576; /* the largest channel id on the wire */

	(void)state;
	assert_int_equal(idtab_put(&t, far, &vals[0]), 0);
	assert_true(t.cap > far);
	assert_ptr_equal(idtab_get(&t, far), &vals[0]);
	assert_null(idtab_get(&t, far - 1));
	assert_null(idtab_get(&t, 1));
	idtab_del(&t, far);
	assert_null(idtab_get(&t, far));
	idtab_free(&t);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_put_get_del),
	    cmocka_unit_test(test_page_goes_with_its_last_id),
	    cmocka_unit_test(test_far_id),
	};
	return cmocka_run_group_tests_name("idtab", tests, NULL, NULL);
}
