/*
 * clock.c - CLOCK_MONOTONIC in the units tern uses, and the wall clock.
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

uint64_t
clock_wall_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000ull + (uint64_t)ts.tv_nsec / 1000u;
}

struct timespec
clock_deadline_in(uint64_t ms)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	ts.tv_sec += (time_t)(ms / 1000);
	ts.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	return ts;
}
