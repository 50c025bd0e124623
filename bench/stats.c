/*
 * stats.c - sample summaries and Welch's t-test (see stats.h).
 *
 * The p-value comes from the t distribution's tail through the regularised
 * incomplete beta function, evaluated by its continued fraction (modified
 * Lentz), which converges quickly for x < (a + 1) / (a + b + 2) and is used
 * through the symmetry I_x(a, b) = 1 - I_(1-x)(b, a) elsewhere.
 */
#include "stats.h"

#include <float.h>
#include <math.h>
#include <stdlib.h>

#define CF_MAX_ITER 300
#define CF_EPS      1e-15
#define CF_TINY     1e-300

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a;
	double y = *(const double *)b;

	return (x > y) - (x < y);
}

void
stats_describe(double *v, size_t n, struct sample_stats *out)
{
	double sum = 0;
	double ss = 0;
	size_t i;

	*out = (struct sample_stats){.n = n};
	if (n == 0) {
		return;
	}
	qsort(v, n, sizeof(*v), cmp_double);
	for (i = 0; i < n; i++) {
		sum += v[i];
	}
	out->mean = sum / (double)n;
	for (i = 0; i < n; i++) {
		ss += (v[i] - out->mean) * (v[i] - out->mean);
	}
	out->sd = n > 1 ? sqrt(ss / (double)(n - 1)) : 0;
	out->median = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
	out->min = v[0];
	out->max = v[n - 1];
}

/* The continued fraction of I_x(a, b), without its prefactor. */
static double
beta_cf(double a, double b, double x)
{
	double c = 1;
	double d = 1 - (a + b) * x / (a + 1);
	double h;
	int m;

	d = 1 / (fabs(d) < CF_TINY ? CF_TINY : d);
	h = d;
	for (m = 1; m <= CF_MAX_ITER; m++) {
		double m2 = 2.0 * m;
		double num = m * (b - m) * x / ((a + m2 - 1) * (a + m2));
		double delta;
		int step;

		/* the even step, then the odd one */
		for (step = 0; step < 2; step++) {
			d = 1 + num * d;
			d = 1 / (fabs(d) < CF_TINY ? CF_TINY : d);
			c = 1 + num / c;
			c = fabs(c) < CF_TINY ? CF_TINY : c;
			delta = d * c;
			h *= delta;
			num = -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1));
		}
		if (fabs(delta - 1) < CF_EPS) {
			break;
		}
	}
	return h;
}

double
stats_betai(double a, double b, double x)
{
	double front;

	if (x <= 0) {
		return 0;
	}
	if (x >= 1) {
		return 1;
	}
	front = exp(lgamma(a + b) - lgamma(a) - lgamma(b) + a * log(x) + b * log1p(-x));
	if (x < (a + 1) / (a + b + 2)) {
		return front * beta_cf(a, b, x) / a;
	}
	return 1 - front * beta_cf(b, a, 1 - x) / b;
}

double
stats_t_p2(double t, double df)
{
	if (isnan(t) || !(df > 0)) {
		return NAN;
	}
	if (isinf(t)) {
		return 0;
	}
	return stats_betai(df / 2, 0.5, df / (df + t * t));
}

int
stats_welch(const struct sample_stats *a, const struct sample_stats *b, struct welch *out)
{
	double va;
	double vb;
	double se2;

	if (a->n < 2 || b->n < 2) {
		return -1;
	}
	va = a->sd * a->sd / (double)a->n;
	vb = b->sd * b->sd / (double)b->n;
	se2 = va + vb;
	if (se2 <= DBL_MIN) {
		/* Every repeat gave the same figure on both sides. */
		out->t = a->mean == b->mean ? 0 : a->mean > b->mean ? INFINITY : -INFINITY;
		out->df = (double)(a->n + b->n - 2);
		out->p = a->mean == b->mean ? 1 : 0;
		return 0;
	}
	out->t = (a->mean - b->mean) / sqrt(se2);
	out->df = se2 * se2 / (va * va / (double)(a->n - 1) + vb * vb / (double)(b->n - 1));
	out->p = stats_t_p2(out->t, out->df);
	return 0;
}
