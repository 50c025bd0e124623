/*
 * bench_hist_test.c - the latency histogram: percentiles of known inputs,
 * its resolution across the range, and its edges (empty, tiny, too long).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <math.h>

#include "hist.h"

/* Within the histogram's promise: half a bucket, 1/256 of the value. */
static void
assert_near(double got, double want)
{
	if (fabs(got - want) > want / 256.0 + 1e-9) {
		fail_msg("got %.1f, want %.1f within 0.4%%", got, want);
	}
}

static void
empty_has_no_percentile(void **state)
{
	hist *h = hist_new();

	(void)state;
	assert_non_null(h);
	assert_int_equal(hist_count(h), 0);
	assert_true(hist_percentile_ns(h, 0.5) < 0);
	hist_free(h);
}

static void
ranks_of_a_uniform_run(void **state)
{
	hist *h = hist_new();
	uint64_t us;

	(void)state;
	/* 1, 2, ... 1000 microseconds, each once, in scrambled order. */
	for (us = 0; us < 1000; us++) {
		hist_record(h, ((us * 7919) % 1000 + 1) * 1000);
	}
	assert_int_equal(hist_count(h), 1000);
	/* rank ceil(q * 1000): the 500th, 990th and 999th value */
	assert_near(hist_percentile_ns(h, 0.50), 500e3);
	assert_near(hist_percentile_ns(h, 0.99), 990e3);
	assert_near(hist_percentile_ns(h, 0.999), 999e3);
	/* No percentile lies beyond the largest value counted. */
	assert_near(hist_percentile_ns(h, 0), 1e3);
	assert_true(hist_percentile_ns(h, 1) == 1000e3);
	hist_free(h);
}

static void
a_tail_shows_at_its_rank(void **state)
{
	hist *h = hist_new();

	(void)state;
	/* 990 fast values and 10 stalls of a second: p99 is still fast, the
	 * 991st value and beyond are the stall. */
	hist_record_n(h, 50000, 990);
	hist_record_n(h, 1000000000, 10);
	assert_near(hist_percentile_ns(h, 0.50), 50000);
	assert_near(hist_percentile_ns(h, 0.99), 50000);
	assert_near(hist_percentile_ns(h, 0.991), 1e9);
	assert_near(hist_percentile_ns(h, 0.999), 1e9);
	hist_free(h);
}

static void
small_values_are_exact(void **state)
{
	hist *h = hist_new();
	uint64_t v;

	(void)state;
	for (v = 0; v < 256; v++) {
		hist_record(h, v);
	}
	assert_true(hist_percentile_ns(h, 0.5) == 127);
	assert_true(hist_percentile_ns(h, 1.0 / 256) == 0);
	hist_free(h);
}

static void
resolution_from_a_microsecond_to_100_seconds(void **state)
{
	double v;

	(void)state;
	/* One value at a time, in steps of 1%: each comes back within 0.4%. */
	for (v = 1e3; v <= 100e9; v *= 1.01) {
		hist *h = hist_new();

		hist_record(h, (uint64_t)v);
		hist_record(h, 1);
		hist_record(h, 200e9);
		assert_near(hist_percentile_ns(h, 0.5), (double)(uint64_t)v);
		hist_free(h);
	}
}

static void
too_long_counts_as_the_top(void **state)
{
	hist *h = hist_new();
	double top;

	(void)state;
	hist_record(h, 500e9);
	hist_record(h, UINT64_MAX);
	top = hist_percentile_ns(h, 0.5);
	assert_true(top > 137e9 && top < 138e9);
	hist_free(h);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(empty_has_no_percentile),
	    cmocka_unit_test(ranks_of_a_uniform_run),
	    cmocka_unit_test(a_tail_shows_at_its_rank),
	    cmocka_unit_test(small_values_are_exact),
	    cmocka_unit_test(resolution_from_a_microsecond_to_100_seconds),
	    cmocka_unit_test(too_long_counts_as_the_top),
	};

	return cmocka_run_group_tests_name("bench_hist", tests, NULL, NULL);
}
