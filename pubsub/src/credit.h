/*
 * credit.h - the receiving side of per-channel flow control (pure).
 *
 * The receiver grants bytes; the sender may have at most the granted bytes
 * outstanding on a channel. The receiver tops the grant up once half of the
 * window has been consumed, so a steady stream never waits for credit. The
 * window starts small and doubles each time the sender reports that it ran
 * out of credit while nothing was waiting at the receiver: then the window,
 * not the receiver, is what limits the channel, and it grows until it covers
 * the link's bandwidth-delay product. No setting needs tuning.
 */
#ifndef TERN_CREDIT_H
#define TERN_CREDIT_H

#include <stdbool.h>
#include <stdint.h>

struct credit_rx {
	uint64_t window;     /* current window size */
	uint64_t max_window; /* never grow past this */
	uint64_t granted;    /* total granted since the channel opened */
	uint64_t received;   /* total received from the sender */
	uint64_t consumed;   /* total consumed (delivered) */
	uint64_t grow_fence; /* no growth until consumed passes this */
};

void credit_rx_init(struct credit_rx *c, uint64_t window, uint64_t max_window);

/* n bytes arrived; false if the sender overran its credit. */
bool credit_rx_receive(struct credit_rx *c, uint64_t n);

/* n bytes were consumed; returns the bytes to grant now (0: none yet). */
uint64_t credit_rx_consume(struct credit_rx *c, uint64_t n);

/* The sender reported it is blocked. receiver_idle: nothing of this channel
 * waits at the receiver; limit: the window the link needs (twice its
 * measured bandwidth-delay product), past which it does not grow; floor:
 * when the link does need more, a window to jump to at once instead of
 * doubling towards it one round trip at a time. Returns the bytes to grant
 * now (0: none). */
uint64_t credit_rx_blocked(struct credit_rx *c, bool receiver_idle, uint64_t limit, uint64_t floor);

#endif
