/*
 * bench_stats_test.c - the statistics of `tern bench compare`: sample
 * summaries, the t distribution's tail against closed forms, and Welch's
 * t-test against published reference values.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <math.h>

#include "stats.h"

#define PI 3.14159265358979323846

static void
describes_a_sample(void **state)
{
	double v[] = {5, 1, 4, 2, 3, 100};
	struct sample_stats s;

	(void)state;
	stats_describe(v, 6, &s);
	assert_int_equal(s.n, 6);
	assert_true(fabs(s.mean - 115.0 / 6) < 1e-12);
	assert_true(fabs(s.median - 3.5) < 1e-12);
	assert_true(s.min == 1 && s.max == 100);
	stats_describe(v, 1, &s);
	assert_true(s.sd == 0 && s.median == v[0]);
	stats_describe(v, 0, &s);
	assert_int_equal(s.n, 0);
}

/* One and two degrees of freedom have closed forms: 1 - 2 atan(t) / pi
 * (Cauchy) and 1 - t / sqrt(2 + t^2). */
static void
t_tail_matches_closed_forms(void **state)
{
	static const double ts[] = {0, 0.1, 0.5, 1, 2.5, 10, 100};
	size_t i;

	(void)state;
	for (i = 0; i < sizeof(ts) / sizeof(ts[0]); i++) {
		double t = ts[i];

		assert_true(fabs(stats_t_p2(t, 1) - (1 - 2 * atan(t) / PI)) < 1e-10);
		assert_true(fabs(stats_t_p2(-t, 1) - (1 - 2 * atan(t) / PI)) < 1e-10);
		assert_true(fabs(stats_t_p2(t, 2) - (1 - t / sqrt(2 + t * t))) < 1e-10);
	}
	/* large df: the normal distribution's 1.96 gives 5 % */
	assert_true(fabs(stats_t_p2(1.959963985, 1e7) - 0.05) < 1e-5);
	assert_true(stats_t_p2(INFINITY, 3) == 0);
}

static void
betai_symmetry(void **state)
{
	(void)state;
	assert_true(fabs(stats_betai(2, 3, 0.4) + stats_betai(3, 2, 0.6) - 1) < 1e-12);
	/* I_x(1, 1) = x */
	assert_true(fabs(stats_betai(1, 1, 0.3) - 0.3) < 1e-12);
	assert_true(stats_betai(2, 2, 0) == 0 && stats_betai(2, 2, 1) == 1);
}

static void
welch(double *a, size_t na, double *b, size_t nb, struct welch *w)
{
	struct sample_stats sa;
	struct sample_stats sb;

	stats_describe(a, na, &sa);
	stats_describe(b, nb, &sb);
	assert_int_equal(stats_welch(&sa, &sb, w), 0);
}

/* The two examples of Welch's t-test in Wikipedia's article, whose t, df
 * and p are printed there (t = -2.46, df = 25.0, p = 0.021; t = -1.57,
 * df = 9.9, p = 0.149); the digits below come from integrating the t density
 * numerically. */
static void
welch_reference_values(void **state)
{
	double a1[] = {27.5, 21.0, 19.0, 23.6, 17.0, 17.9, 16.9, 20.1,
	               21.9, 22.6, 23.1, 19.6, 19.0, 21.7, 21.4};
	double a2[] = {27.1, 22.0, 20.8, 23.4, 23.4, 23.5, 25.8, 22.0,
	               24.8, 20.2, 21.9, 22.1, 22.9, 20.5, 24.4};
	double b1[] = {17.2, 20.9, 22.6, 18.1, 21.7, 21.4, 23.5, 24.2, 14.7, 21.8};
	double b2[] = {21.5, 22.8, 21.0, 23.0, 21.6, 23.6, 22.5, 20.7, 23.4, 21.8,
	               20.7, 21.7, 21.5, 22.5, 23.6, 21.5, 22.5, 23.5, 21.5, 21.8};
	double c1[] = {100, 102, 98};
	double c2[] = {90, 91, 89.5};
	struct welch w;

	(void)state;
	welch(a1, 15, a2, 15, &w);
	assert_true(fabs(w.t - -2.455356398) < 1e-6);
	assert_true(fabs(w.df - 24.988529290) < 1e-6);
	assert_true(fabs(w.p - 0.021378001) < 1e-6);
	welch(b1, 10, b2, 20, &w);
	assert_true(fabs(w.t - -1.565433524) < 1e-6);
	assert_true(fabs(w.df - 9.904741249) < 1e-6);
	assert_true(fabs(w.p - 0.148841697) < 1e-6);
	/* three repeats a side, as `tern bench --repeat 3` gives */
	welch(c1, 3, c2, 3, &w);
	assert_true(fabs(w.t - 7.955558377) < 1e-6);
	assert_true(fabs(w.p - 0.007073766) < 1e-6);
}

static void
welch_edge_cases(void **state)
{
	double one[] = {5};
	double same1[] = {7, 7, 7};
	double same2[] = {7, 7};
	double other[] = {8, 8};
	struct sample_stats s1;
	struct sample_stats s2;
	struct welch w;

	(void)state;
	stats_describe(one, 1, &s1);
	stats_describe(same1, 3, &s2);
	assert_int_equal(stats_welch(&s1, &s2, &w), -1);
	stats_describe(same2, 2, &s1);
	assert_int_equal(stats_welch(&s1, &s2, &w), 0);
	assert_true(w.p == 1);
	stats_describe(other, 2, &s1);
	assert_int_equal(stats_welch(&s1, &s2, &w), 0);
	assert_true(w.p == 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(describes_a_sample), cmocka_unit_test(t_tail_matches_closed_forms),
	    cmocka_unit_test(betai_symmetry),     cmocka_unit_test(welch_reference_values),
	    cmocka_unit_test(welch_edge_cases),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
