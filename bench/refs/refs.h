/*
 * refs.h - what the reference programs tcp_thr and zmq_thr share: the
 * clock, little-endian sequence numbers, their SIZE COUNT SECONDS
 * arguments and the receiver's result line. Header-only: each program is a
 * single file built by bench/refs/Makefile.
 */
#ifndef BENCH_REFS_H
#define BENCH_REFS_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static inline double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline void
put_le(uint8_t *p, uint64_t v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		p[i] = (uint8_t)(v >> (8 * i));
	}
}

static inline uint64_t
get_le(const uint8_t *p, size_t n)
{
	uint64_t v = 0;

	for (size_t i = 0; i < n; i++) {
		v |= (uint64_t)p[i] << (8 * i);
	}
	return v;
}

static inline int
parse_u64(const char *s, uint64_t *out)
{
	char *end;

	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno != 0 || end == s || *end != '\0' || s[0] == '-') {
		return -1;
	}
	*out = v;
	return 0;
}

/* argv[3..5]: SIZE (1 to max_size) COUNT SECONDS. -1 after printing why. */
static inline int
parse_size_count_seconds(const char *prog, char **argv, uint64_t max_size, size_t *size,
                         uint64_t *count, double *seconds)
{
	uint64_t v;
	char *end;

	if (parse_u64(argv[3], &v) != 0 || v == 0 || v > max_size) {
		fprintf(stderr, "%s: SIZE must be 1 to %llu\n", prog, (unsigned long long)max_size);
		return -1;
	}
	*size = (size_t)v;
	if (parse_u64(argv[4], count) != 0 || *count == 0) {
		fprintf(stderr, "%s: COUNT must be a positive integer\n", prog);
		return -1;
	}
	*seconds = strtod(argv[5], &end);
	if (end == argv[5] || *end != '\0' || !(*seconds > 0)) {
		fprintf(stderr, "%s: SECONDS must be a positive number\n", prog);
		return -1;
	}
	return 0;
}

/* The receiver's line on stdout, which run.sh reads; the exit status. */
static inline int
report_recv(const char *layer, size_t size, uint64_t msgs, uint64_t count, double secs,
            uint64_t bad)
{
	double rate = secs > 0 ? (double)msgs / secs : 0;

	printf("layer=%s size=%zu msgs=%llu expected=%llu secs=%.6f msgs_per_s=%.0f MB_per_s=%.1f "
	       "bad=%llu\n",
	       layer, size, (unsigned long long)msgs, (unsigned long long)count, secs, rate,
	       rate * (double)size / 1e6, (unsigned long long)bad);
	fflush(stdout);
	return msgs == count && bad == 0 ? 0 : 1;
}

#endif
