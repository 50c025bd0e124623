/*
 * credit.c - receiver window arithmetic. See credit.h for the policy.
 */
#include "credit.h"

void
credit_rx_init(struct credit_rx *c, uint64_t window, uint64_t max_window)
{
	c->window = window;
	c->max_window = max_window < window ? window : max_window;
	c->granted = window;
	c->received = 0;
	c->consumed = 0;
	c->grow_fence = 0;
}

static uint64_t
top_up(struct credit_rx *c)
{
	uint64_t target = c->consumed + c->window;
	uint64_t grant = target > c->granted ? target - c->granted : 0;

	c->granted += grant;
	return grant;
}

bool
credit_rx_receive(struct credit_rx *c, uint64_t n)
{
	if (n > c->granted - c->received) {
		return false;
	}
	c->received += n;
	return true;
}

uint64_t
credit_rx_consume(struct credit_rx *c, uint64_t n)
{
	c->consumed += n;
	/* outstanding = granted - consumed; top up when half the window is used */
	if (c->granted - c->consumed > c->window / 2) {
		return 0;
	}
	return top_up(c);
}

uint64_t
credit_rx_blocked(struct credit_rx *c, bool receiver_idle, uint64_t limit, uint64_t floor)
{
	if (receiver_idle && c->window < c->max_window && c->window < limit &&
	    c->consumed >= c->grow_fence) {
		uint64_t w = c->window * 2 < floor ? floor : c->window * 2;
		c->window = w > c->max_window ? c->max_window : w;
		c->grow_fence = c->granted;
	}
	return top_up(c);
}
