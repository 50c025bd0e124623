/*
 * ring_test.c - the byte ring: room checks with the producer's cached copy
 * of head, growth, wrap-around, and capacities that cannot exist.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ring.h"
#include "tern/tern.h"

static uint8_t blob[4096];

static void
test_room_follows_consumer(void **state)
{
	struct ring r;
	(void)state;

	assert_int_equal(ring_init(&r, 4096), 0);
	ring_put(&r, blob, 3000, NULL, 0);
	assert_false(ring_has_space(&r, 2000));
	ring_consume(&r, 3000);
	assert_true(ring_has_space(&r, 4096));
	ring_put(&r, blob, 4096, NULL, 0); /* wraps around the end */
	assert_false(ring_has_space(&r, 1));
	assert_int_equal(ring_used(&r), 4096);
	ring_free(&r);
}

/* A 4 KiB ring the producer last found full (its copy of head is 0) and
 * the consumer has emptied since: head is 3000. */
static void
ring_drained_unseen(struct ring *r)
{
	assert_int_equal(ring_init(r, 4096), 0);
	ring_put(r, blob, 3000, NULL, 0);
	assert_false(ring_has_space(r, 2000)); /* the producer looked: full */
	ring_consume(r, 3000);                 /* the consumer made room */
}

/* A grow that finds the ring big enough (the consumer made room after the
 * producer's last look) must leave the producer's room checks right. */
static void
test_grow_to_same_size_keeps_room_checks(void **state)
{
	struct ring r;
	(void)state;

	ring_drained_unseen(&r);
	assert_int_equal(ring_grow(&r, ring_used(&r) + 2000), 0);
	assert_int_equal(r.cap, 4096);
	ring_put(&r, blob, 2000, NULL, 0);
	ring_put(&r, blob, 1500, NULL, 0);
	assert_int_equal(ring_used(&r), 3500);
	assert_false(ring_has_space(&r, 1000));
	assert_true(ring_has_space(&r, 596));
	ring_free(&r);
}

/* However far behind the real head the producer's copy is, a room check
 * answers from the real head. */
static void
test_stale_copy_of_head(void **state)
{
	struct ring r;
	(void)state;

	ring_drained_unseen(&r);
	ring_put(&r, blob, 2000, NULL, 0); /* room known from elsewhere */
	assert_int_equal(ring_used(&r), 2000);
	assert_false(ring_has_space(&r, 2097));
	assert_true(ring_has_space(&r, 2096));
	ring_free(&r);
}

static void
test_grow_keeps_contents(void **state)
{
	struct ring r;
	uint8_t out[3000];
	(void)state;

	for (size_t i = 0; i < sizeof(blob); i++) {
		blob[i] = (uint8_t)(i * 7);
	}
	assert_int_equal(ring_init(&r, 4096), 0);
	ring_put(&r, blob, 3000, NULL, 0);
	ring_consume(&r, 2000);
	ring_put(&r, blob + 1000, 2000, NULL, 0); /* wraps */
	assert_int_equal(ring_grow(&r, 8192), 0);
	assert_int_equal(r.cap, 8192);
	assert_int_equal(ring_used(&r), 3000);
	ring_peek(&r, 0, out, 3000);
	assert_memory_equal(out, blob + 2000, 1000);
	assert_memory_equal(out + 1000, blob + 1000, 2000);
	assert_true(ring_has_space(&r, 8192 - 3000));
	assert_false(ring_has_space(&r, 8192 - 3000 + 1));
	ring_free(&r);
}

/* No power of two in a size_t holds these: refused, never looped on (a
 * peer's window once sized a ring, and doubling past the top wrapped to 0). */
static void
test_capacity_beyond_size_t_refused(void **state)
{
	const size_t huge[] = {SIZE_MAX, SIZE_MAX / 2 + 2, ((size_t)1 << 62) * 2 + 2};
	struct ring r;
	(void)state;

	for (size_t i = 0; i < sizeof(huge) / sizeof(huge[0]); i++) {
		assert_int_equal(ring_init(&r, huge[i]), TERN_ENOMEM);
	}
	assert_int_equal(ring_init(&r, 4096), 0);
	ring_put(&r, blob, 100, NULL, 0);
	for (size_t i = 0; i < sizeof(huge) / sizeof(huge[0]); i++) {
		assert_int_equal(ring_grow(&r, huge[i]), TERN_ENOMEM);
		assert_int_equal(r.cap, 4096);
		assert_int_equal(ring_used(&r), 100);
	}
	ring_free(&r);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_room_follows_consumer),
	    cmocka_unit_test(test_grow_to_same_size_keeps_room_checks),
	    cmocka_unit_test(test_stale_copy_of_head),
	    cmocka_unit_test(test_grow_keeps_contents),
	    cmocka_unit_test(test_capacity_beyond_size_t_refused),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
