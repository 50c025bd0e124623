/*
 * clock.h - the monotonic clock, and elapsed time that never wraps.
 *
 * Timestamps are taken on several threads; one taken after `now` was read
 * (a connection created while the timers run, a channel starved a moment
 * later) is "in the future" of that `now`. clock_since() counts that as no
 * time at all, where a plain subtraction would wrap to 584 years and fire
 * every deadline at once.
 */
#ifndef TERN_CLOCK_H
#define TERN_CLOCK_H

#include <stdint.h>
#include <time.h>

uint64_t clock_ns(void);
uint64_t clock_us(void);
uint64_t clock_ms(void);
/* The wall clock (CLOCK_REALTIME), microseconds since the Unix epoch: what
 * a message's publish stamp and a PONG's time are in, so two hosts can
 * compare them. */
uint64_t clock_wall_us(void);

/* Time from then to now, 0 if then is later than now. */
static inline uint64_t
clock_since(uint64_t now, uint64_t then)
{
	return now > then ? now - then : 0;
}

/* The CLOCK_REALTIME time ms from now, for pthread_cond_timedwait. */
struct timespec clock_deadline_in(uint64_t ms);

#endif
