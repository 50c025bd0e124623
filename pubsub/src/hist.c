/*
 * hist.c - the log-linear latency histogram (see hist.h).
 */
#include "hist.h"

#include <string.h>

#define SUB  (1u << TERN_HIST_SUB_BITS)
#define LAST (TERN_HIST_BUCKETS - 1)

void
tern__hist_reset(struct tern__hist *h)
{
	memset(h, 0, sizeof(*h));
}

/* Values below SUB units are linear (bucket = value); above, octave e
 * (SUB <= v < 2 SUB is octave 1) keeps the SUB_BITS bits below its top bit. */
static uint32_t
index_of(uint64_t units)
{
	unsigned e;

	if (units < SUB) {
		return (uint32_t)units;
	}
	e = 63u - (unsigned)__builtin_clzll(units) - TERN_HIST_SUB_BITS + 1;
	if (e > TERN_HIST_OCTAVES) {
		return LAST;
	}
	return (e << TERN_HIST_SUB_BITS) | (uint32_t)((units >> (e - 1)) & (SUB - 1));
}

/* The first value of bucket i and its width, in units. */
static void
bounds(uint32_t i, uint64_t *lo, uint64_t *width)
{
	uint32_t e = i >> TERN_HIST_SUB_BITS;

	if (e == 0) {
		*lo = i;
		*width = 1;
		return;
	}
	*width = 1ull << (e - 1);
	*lo = ((uint64_t)SUB + (i & (SUB - 1))) << (e - 1);
}

void
tern__hist_add(struct tern__hist *h, uint64_t ns)
{
	h->bucket[index_of(ns >> TERN_HIST_UNIT_SHIFT)]++;
	h->count++;
	if (ns > h->max_ns) {
		h->max_ns = ns;
	}
}

uint64_t
tern__hist_quantile(const struct tern__hist *h, double q)
{
	uint64_t rank;
	uint64_t seen = 0;
	uint32_t i;

	if (h->count == 0) {
		return 0;
	}
	q = q < 0 ? 0 : q > 1 ? 1 : q;
	rank = (uint64_t)(q * (double)h->count + 0.999999);
	rank = rank == 0 ? 1 : rank;
	if (rank >= h->count) {
		return h->max_ns; /* the largest value is known exactly */
	}
	for (i = 0; i < TERN_HIST_BUCKETS; i++) {
		seen += h->bucket[i];
		if (seen >= rank) {
			uint64_t lo;
			uint64_t width;
			uint64_t mid;

			bounds(i, &lo, &width);
			mid = ((lo << TERN_HIST_UNIT_SHIFT) + (width << TERN_HIST_UNIT_SHIFT) / 2);
			return mid < h->max_ns ? mid : h->max_ns;
		}
	}
	return h->max_ns;
}
