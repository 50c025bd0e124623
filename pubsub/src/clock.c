/*
 * clock.c - CLOCK_MONOTONIC in the units tern uses.
 */
#include <time.h>

#include "clock.h"

uint64_t
clock_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t
clock_us(void)
{
	return clock_ns() / 1000u;
}

uint64_t
clock_ms(void)
{
	return clock_ns() / 1000000u;
}
