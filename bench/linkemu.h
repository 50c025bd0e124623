/*
 * linkemu.h - a link emulated in the process: a TCP relay between a sender
 * and a receiver that gives each direction a bandwidth and a one-way delay.
 *
 * Each direction works like a router's output port followed by a wire:
 * bytes read from one side wait in a bottleneck queue of one
 * bandwidth-delay product (at least 256 KiB), leave it at the link's
 * bandwidth (a token bucket with no burst: each segment departs when the
 * previous one has been clocked out), and reach the other side half a round
 * trip after they depart. While the queue is full the relay stops reading,
 * so the sender's socket fills and it blocks, as on a real link; a
 * flow-control window smaller than the link's bandwidth-delay product
 * therefore shows as lost throughput. All connections through one relay
 * share its bandwidth, like flows through one bottleneck. Timers are
 * timerfd deadlines with 1 ns slack, so a 0 ms link adds no delay and a 1 ms
 * link is 1 ms.
 */
#ifndef BENCH_LINKEMU_H
#define BENCH_LINKEMU_H

#include <stddef.h>
#include <stdint.h>

typedef struct linkemu linkemu;

/*
 * Start a relay thread listening on tcp://127.0.0.1:0 that forwards every
 * connection to target (a tcp:// or unix:// endpoint). bandwidth_Bps 0 means
 * unlimited. The relay's endpoint is written to ep. Returns 0 or -1 with a
 * reason in err.
 */
int linkemu_open(linkemu **out, double bandwidth_Bps, double rtt_ms, const char *target, char *ep,
                 size_t ep_len, char *err, size_t err_len);

/* CPU seconds the relay thread has used so far (getrusage of the thread). */
double linkemu_cpu_seconds(linkemu *le);

/* Stop the relay, close every connection through it, free it. NULL is fine. */
void linkemu_close(linkemu *le);

#endif
