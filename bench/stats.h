/*
 * stats.h - the statistics behind `tern bench --repeat` and `tern bench
 * compare`: a sample's summary, and Welch's t-test between two samples.
 *
 * Pure functions over arrays of doubles: no I/O, no allocation.
 */
#ifndef BENCH_STATS_H
#define BENCH_STATS_H

#include <stdbool.h>
#include <stddef.h>

struct sample_stats {
	size_t n;
	double mean;
	double sd; /* sample standard deviation (n - 1); 0 when n < 2 */
	double median;
	double min;
	double max;
};

/* Summarise v[0..n-1]; v is sorted in place. n may be 0 (all fields 0). */
void stats_describe(double *v, size_t n, struct sample_stats *out);

/* Regularised incomplete beta function I_x(a, b), for a, b > 0, 0 <= x <= 1. */
double stats_betai(double a, double b, double x);

/* Two-sided p-value of Student's t distribution with df degrees of freedom. */
double stats_t_p2(double t, double df);

struct welch {
	double t;
	double df;
	double p; /* two-sided */
};

/* Welch's t-test of the means of a and b (unequal variances). -1 when
 * either sample has fewer than two values: no variance, no test. Two
 * samples without variance give p = 1 for equal means and p = 0 otherwise. */
int stats_welch(const struct sample_stats *a, const struct sample_stats *b, struct welch *out);

#endif
