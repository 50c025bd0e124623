/*
 * hist.h - a latency histogram with about 1% resolution, for open-loop cells.
 *
 * Log-linear buckets, the HdrHistogram layout: below 256 ns every
 * nanosecond has its own bucket; from there on each power of two is split
 * into 128 equal buckets, so a bucket is at most 1/128 (0.8%) of its values
 * wide and the value a percentile reports, the middle of its bucket, is
 * within 0.4% of every value that fell in it. The range is 0 to 2^37 ns
 * (137 s); a longer value is counted as 137 s. 3968 buckets, 31 KiB.
 *
 * All memory is taken by hist_new(): hist_record() is one relaxed atomic
 * add (two more when a value is a new minimum or maximum), so a receiver
 * records each record's latency without allocating, from any thread.
 * Read the percentiles once the recording threads have stopped.
 */
#ifndef BENCH_HIST_H
#define BENCH_HIST_H

#include <stdint.h>

typedef struct hist hist;

/* A new, empty histogram, or NULL when out of memory. Free with hist_free. */
hist *hist_new(void);
void hist_free(hist *h);

/* Count one value (nanoseconds); n values at once with hist_record_n. */
void hist_record(hist *h, uint64_t ns);
void hist_record_n(hist *h, uint64_t ns, uint64_t n);

/* How many values were counted. */
uint64_t hist_count(const hist *h);

/*
 * The value below or at which a share q (0 to 1) of the values lie: the
 * value of rank ceil(q * count), at least the first, as the middle of its
 * bucket, kept within the smallest and largest value counted. -1 when the
 * histogram is empty.
 */
double hist_percentile_ns(const hist *h, double q);

#endif
