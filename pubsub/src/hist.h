/*
 * hist.h - a fixed log-linear latency histogram (HDR-style).
 *
 * 32 linear sub-buckets in each power of two, so a value is known within
 * 1/32 of its octave: a reported percentile (a bucket's midpoint) is within
 * about 1.6 % of the true value. The unit is 32 ns, the range 32 ns to
 * 2^37 ns (137 s); values beyond it count in the last bucket. 896 buckets of
 * 32-bit counts: 3.5 KiB, allocated once by its owner; adding a value is a
 * few shifts and an increment, no allocation.
 *
 * Not thread safe: one thread adds, and readers take a copy under the
 * owner's lock (or between intervals).
 */
#ifndef TERN_HIST_H
#define TERN_HIST_H

#include <stdint.h>

#define TERN_HIST_UNIT_SHIFT 5 /* 32 ns */
#define TERN_HIST_SUB_BITS   5 /* 32 sub-buckets an octave */
#define TERN_HIST_OCTAVES    27
#define TERN_HIST_BUCKETS    ((TERN_HIST_OCTAVES + 1) << TERN_HIST_SUB_BITS)

struct tern__hist {
	uint64_t count;
	uint64_t max_ns;
	uint32_t bucket[TERN_HIST_BUCKETS];
};

void tern__hist_reset(struct tern__hist *h);
void tern__hist_add(struct tern__hist *h, uint64_t ns);
/* The value at quantile q (0..1) in ns: the midpoint of its bucket, never
 * above the largest value added. 0 when empty. */
uint64_t tern__hist_quantile(const struct tern__hist *h, double q);

#endif
