/*
 * hist_test.c - the latency histogram's percentiles against distributions
 * whose quantiles are known exactly: uniform and exponential.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <math.h>
#include <stdlib.h>

#include "hist.h"

/* Within 2 % (the bucket's half-width is 1/64 of its octave, plus rank rounding). */
static void
near(uint64_t got, double want)
{
	if (fabs((double)got - want) > want * 0.02) {
		fail_msg("got %llu ns, want %.0f ns (2 %%)", (unsigned long long)got, want);
	}
}

static void
uniform(void **state)
{
	struct tern__hist *h = malloc(sizeof(*h));
	uint64_t us;

	(void)state;
	tern__hist_reset(h);
	/* 1 us .. 100 ms in steps of 1 us */
	for (us = 1; us <= 100000; us++) {
		tern__hist_add(h, us * 1000);
	}
	assert_int_equal(h->count, 100000);
	near(tern__hist_quantile(h, 0.5), 50000e3);
	near(tern__hist_quantile(h, 0.99), 99000e3);
	near(tern__hist_quantile(h, 0.999), 99900e3);
	near(tern__hist_quantile(h, 0.0001), 10e3);
	assert_int_equal(tern__hist_quantile(h, 1), 100000000ull);
	assert_int_equal(h->max_ns, 100000000ull);
	free(h);
}

/* Exponential with mean 2 ms, sampled at its own quantiles: the q-th
 * quantile is -mean ln(1 - q) exactly. */
static void
exponential(void **state)
{
	struct tern__hist *h = malloc(sizeof(*h));
	const double mean = 2e6;
	const int n = 200000;
	static const double qs[] = {0.5, 0.9, 0.99, 0.999};
	int i;

	(void)state;
	tern__hist_reset(h);
	for (i = 0; i < n; i++) {
		tern__hist_add(h, (uint64_t)(-mean * log(1 - (i + 0.5) / n)));
	}
	for (i = 0; i < 4; i++) {
		near(tern__hist_quantile(h, qs[i]), -mean * log(1 - qs[i]));
	}
	free(h);
}

static void
range_and_empty(void **state)
{
	struct tern__hist *h = malloc(sizeof(*h));

	(void)state;
	tern__hist_reset(h);
	assert_int_equal(tern__hist_quantile(h, 0.5), 0);
	/* 1 us and 100 s, the ends of the promised range */
	tern__hist_add(h, 1000);
	near(tern__hist_quantile(h, 0.5), 1000);
	tern__hist_reset(h);
	tern__hist_add(h, 100000000000ull);
	near(tern__hist_quantile(h, 0.5), 1e11);
	/* beyond the range: counted, reported as the largest value seen */
	tern__hist_add(h, 1000000000000ull);
	tern__hist_add(h, 0);
	assert_int_equal(h->count, 3);
	assert_int_equal(tern__hist_quantile(h, 1), 1000000000000ull);
	free(h);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(uniform),
	    cmocka_unit_test(exponential),
	    cmocka_unit_test(range_and_empty),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
