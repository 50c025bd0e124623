/*
 * hist.c - the log-linear latency histogram (see hist.h).
 *
 * A value v at or above LINEAR has its highest bit e (8 to 36); the
 * SUB_BITS + 1 bits from e down pick one of SUB_COUNT buckets within that
 * power of two, each 2^(e - SUB_BITS) wide.
 */
#include "hist.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>

#define SUB_BITS  7
#define SUB_COUNT (1u << SUB_BITS)
#define LINEAR    (2u * SUB_COUNT) /* below this, one bucket per nanosecond */
#define TOP_BIT   37               /* values up to 2^37 - 1 ns */
#define NBUCKETS  (LINEAR + (TOP_BIT - SUB_BITS - 1) * SUB_COUNT)
#define TOP_VALUE ((1ull << TOP_BIT) - 1)

struct hist {
	_Atomic uint64_t count;
	_Atomic uint64_t min;
	_Atomic uint64_t max;
	_Atomic uint64_t buckets[NBUCKETS];
};

hist *
hist_new(void)
{
	hist *h = calloc(1, sizeof(*h));

	if (h != NULL) {
		atomic_init(&h->min, UINT64_MAX);
	}
	return h;
}

void
hist_free(hist *h)
{
	free(h);
}

static unsigned
bucket_of(uint64_t v)
{
	unsigned e;
	unsigned shift;

	if (v < LINEAR) {
		return (unsigned)v;
	}
	e = 63u - (unsigned)__builtin_clzll(v);
	shift = e - SUB_BITS;
	return LINEAR + (e - SUB_BITS - 1) * SUB_COUNT + (unsigned)(v >> shift) - SUB_COUNT;
}

/* The middle of a bucket: its value when it holds one, else halfway. */
static double
bucket_middle(unsigned b)
{
	unsigned k;
	unsigned shift;
	uint64_t low;
	uint64_t width;

	if (b < LINEAR) {
		return (double)b;
	}
	k = b - LINEAR;
	shift = k / SUB_COUNT + 1;
	low = (uint64_t)(k % SUB_COUNT + SUB_COUNT) << shift;
	width = 1ull << shift;
	return (double)low + (double)(width - 1) / 2.0;
}

void
hist_record_n(hist *h, uint64_t ns, uint64_t n)
{
	uint64_t seen;

	if (n == 0) {
		return;
	}
	if (ns > TOP_VALUE) {
		ns = TOP_VALUE;
	}
	atomic_fetch_add_explicit(&h->buckets[bucket_of(ns)], n, memory_order_relaxed);
	atomic_fetch_add_explicit(&h->count, n, memory_order_relaxed);
	seen = atomic_load_explicit(&h->min, memory_order_relaxed);
	while (ns < seen && !atomic_compare_exchange_weak_explicit(
	                        &h->min, &seen, ns, memory_order_relaxed, memory_order_relaxed)) {
	}
	seen = atomic_load_explicit(&h->max, memory_order_relaxed);
	while (ns > seen && !atomic_compare_exchange_weak_explicit(
	                        &h->max, &seen, ns, memory_order_relaxed, memory_order_relaxed)) {
	}
}

void
hist_record(hist *h, uint64_t ns)
{
	hist_record_n(h, ns, 1);
}

uint64_t
hist_count(const hist *h)
{
	return atomic_load_explicit(&h->count, memory_order_relaxed);
}

double
hist_percentile_ns(const hist *h, double q)
{
	uint64_t n = hist_count(h);
	double r;
	uint64_t rank;
	uint64_t seen = 0;
	double lo;
	double hi;
	double v;
	unsigned b;

	if (n == 0) {
		return -1;
	}
	/* q * n in floating point can land a hair above a whole rank (0.999 has
	 * no exact double): a relative nudge keeps ceil() on the rank meant. */
	r = (q < 0 ? 0 : q > 1 ? 1 : q) * (double)n;
	rank = (uint64_t)ceil(r - r * 1e-12);
	rank = rank < 1 ? 1 : rank > n ? n : rank;
	for (b = 0; b < NBUCKETS; b++) {
		seen += atomic_load_explicit(&h->buckets[b], memory_order_relaxed);
		if (seen >= rank) {
			break;
		}
	}
	v = bucket_middle(b < NBUCKETS ? b : NBUCKETS - 1);
	lo = (double)atomic_load_explicit(&h->min, memory_order_relaxed);
	hi = (double)atomic_load_explicit(&h->max, memory_order_relaxed);
	return v < lo ? lo : v > hi ? hi : v;
}
