/*
 * credit_test.c - flow-control window arithmetic and reassembly.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "credit.h"
#include "reasm.h"
#include "tern/tern.h"

static void
test_top_up_at_half(void **state)
{
	struct credit_rx c;
	(void)state;

	credit_rx_init(&c, 1000, 8000);
	assert_true(credit_rx_receive(&c, 400));
	assert_int_equal(credit_rx_consume(&c, 400), 0); /* 600 outstanding > 500 */
	assert_true(credit_rx_receive(&c, 100));
	/* 500 outstanding: top up to a full window past what was consumed */
	assert_int_equal(credit_rx_consume(&c, 100), 500);
	assert_int_equal(c.granted - c.consumed, 1000);
}

static void
test_overrun_detected(void **state)
{
	struct credit_rx c;
	(void)state;

	credit_rx_init(&c, 1000, 1000);
	assert_true(credit_rx_receive(&c, 1000));
	assert_false(credit_rx_receive(&c, 1));
	credit_rx_consume(&c, 1000);
	assert_true(credit_rx_receive(&c, 1000));
}

static void
test_window_grows_to_bdp(void **state)
{
	struct credit_rx c;
	int rounds = 0;
	(void)state;

	/* A 25 MB/s link with 100 ms round trip needs 2.5 MB in flight. The
	 * sender reports blocked once per round trip while the receiver is idle. */
	credit_rx_init(&c, 256 << 10, 32 << 20);
	while (c.window < 2500000 && rounds < 20) {
		uint64_t outstanding = c.granted - c.consumed;
		credit_rx_receive(&c, outstanding);
		credit_rx_consume(&c, outstanding);
		credit_rx_blocked(&c, true, UINT64_MAX, 0);
		rounds++;
	}
	assert_true(c.window >= 2500000);
	assert_true(rounds <= 4); /* doubling: 256 KiB -> 4 MiB in 4 round trips */
	assert_true(c.window <= c.max_window);
}

static void
test_no_growth_when_receiver_is_slow(void **state)
{
	struct credit_rx c;
	(void)state;

	credit_rx_init(&c, 1000, 100000);
	credit_rx_receive(&c, 1000);
	assert_int_equal(credit_rx_blocked(&c, false, UINT64_MAX, 0), 0);
	assert_int_equal(c.window, 1000);
}

static void
test_growth_once_per_window(void **state)
{
	struct credit_rx c;
	(void)state;

	credit_rx_init(&c, 1000, 100000);
	credit_rx_receive(&c, 1000);
	credit_rx_consume(&c, 1000);
	credit_rx_blocked(&c, true, UINT64_MAX, 0);
	assert_int_equal(c.window, 2000);
	/* a second report from the same window does not double again */
	credit_rx_blocked(&c, true, UINT64_MAX, 0);
	assert_int_equal(c.window, 2000);
	assert_int_equal(c.granted - c.consumed, 2000);
}

static void
test_window_capped(void **state)
{
	struct credit_rx c;
	(void)state;

	credit_rx_init(&c, 1000, 3000);
	for (int i = 0; i < 10; i++) {
		uint64_t out = c.granted - c.consumed;
		credit_rx_receive(&c, out);
		credit_rx_consume(&c, out);
		credit_rx_blocked(&c, true, UINT64_MAX, 0);
	}
	assert_int_equal(c.window, 3000);
}

static void
test_growth_stops_at_the_link_need(void **state)
{
	struct credit_rx c;
	(void)state;

	/* a fast receiver on a short link: the window the link needs is below
	 * the initial one, so being blocked now and then grows nothing */
	credit_rx_init(&c, 1000, 100000);
	for (int i = 0; i < 10; i++) {
		uint64_t out = c.granted - c.consumed;
		credit_rx_receive(&c, out);
		credit_rx_consume(&c, out);
		credit_rx_blocked(&c, true, 600, 0);
	}
	assert_int_equal(c.window, 1000);
	/* a longer link: growth up to its need, not to the maximum */
	for (int i = 0; i < 10; i++) {
		uint64_t out = c.granted - c.consumed;
		credit_rx_receive(&c, out);
		credit_rx_consume(&c, out);
		credit_rx_blocked(&c, true, 5000, 0);
	}
	assert_int_equal(c.window, 8000);
}

static void
test_growth_jumps_to_the_floor(void **state)
{
	struct credit_rx c;
	(void)state;

	/* a link that needs more than the window, and a receiver that keeps
	 * up: the first block takes the window straight to the floor */
	credit_rx_init(&c, 1000, 100000);
	credit_rx_receive(&c, 1000);
	credit_rx_consume(&c, 1000);
	credit_rx_blocked(&c, true, 2000, 8000);
	assert_int_equal(c.window, 8000);
	/* past the floor and the link's need, no more growth */
	for (int i = 0; i < 10; i++) {
		uint64_t out = c.granted - c.consumed;
		credit_rx_receive(&c, out);
		credit_rx_consume(&c, out);
		credit_rx_blocked(&c, true, 2000, 8000);
	}
	assert_int_equal(c.window, 8000);
	/* a link that needs no more than the window (many channels share it):
	 * the floor does not apply */
	credit_rx_init(&c, 1000, 100000);
	credit_rx_receive(&c, 1000);
	credit_rx_consume(&c, 1000);
	credit_rx_blocked(&c, true, 600, 8000);
	assert_int_equal(c.window, 1000);
	/* a slow receiver gets no jump */
	credit_rx_init(&c, 1000, 100000);
	credit_rx_receive(&c, 1000);
	assert_int_equal(credit_rx_blocked(&c, false, 2000, 8000), 0);
	assert_int_equal(c.window, 1000);
}

static struct wire_frame
chunk(uint64_t ch, int flags, uint64_t total, uint64_t len)
{
	struct wire_frame f = {
	    .type = WIRE_CHUNK, .flags = flags, .channel = ch, .total = total, .len = len};
	return f;
}

static void
test_reasm_interleaved(void **state)
{
	struct reasm a = {0}, b = {0};
	uint64_t budget = 1000;
	uint8_t pa[300], pb[200];
	struct wire_frame f;
	(void)state;

	for (int i = 0; i < 300; i++) {
		pa[i] = (uint8_t)i;
	}
	memset(pb, 0xbb, sizeof(pb));
	f = chunk(1, WIRE_FLAG_FIRST, 300, 100);
	assert_int_equal(reasm_add(&a, &f, 7, pa, 1000, &budget), 0);
	f = chunk(2, WIRE_FLAG_FIRST, 200, 100);
	assert_int_equal(reasm_add(&b, &f, 9, pb, 1000, &budget), 0);
	assert_int_equal(budget, 500);
	f = chunk(1, 0, 0, 100);
	assert_int_equal(reasm_add(&a, &f, 7, pa + 100, 1000, &budget), 0);
	f = chunk(2, WIRE_FLAG_LAST, 0, 100);
	assert_int_equal(reasm_add(&b, &f, 9, pb + 100, 1000, &budget), 1);
	f = chunk(1, WIRE_FLAG_LAST, 0, 100);
	assert_int_equal(reasm_add(&a, &f, 7, pa + 200, 1000, &budget), 1);
	assert_memory_equal(a.buf, pa, 300);
	assert_memory_equal(b.buf, pb, 200);
	assert_int_equal(a.seq, 7);
	free(reasm_take(&a, &budget));
	free(reasm_take(&b, &budget));
	assert_int_equal(budget, 1000);
}

static void
test_reasm_refuses_oversize(void **state)
{
	struct reasm r = {0};
	uint64_t budget = 1ull << 30;
	uint8_t p[16] = {0};
	struct wire_frame f = chunk(1, WIRE_FLAG_FIRST, 4ull << 30, 16);
	(void)state;

	/* a 4 GiB claim is refused before anything is allocated */
	assert_int_equal(reasm_add(&r, &f, 1, p, 64u << 20, &budget), TERN_EMSGSIZE);
	assert_null(r.buf);
	assert_int_equal(budget, 1ull << 30);
	/* within max_message_bytes but beyond the connection's budget */
	f = chunk(1, WIRE_FLAG_FIRST, 2ull << 30, 16);
	assert_int_equal(reasm_add(&r, &f, 1, p, 4ull << 30, &budget), TERN_EMSGSIZE);
	assert_null(r.buf);
}

static void
test_reasm_bad_sequences(void **state)
{
	struct reasm r = {0};
	uint64_t budget = 1000;
	uint8_t p[100] = {0};
	struct wire_frame f;
	(void)state;

	f = chunk(1, 0, 0, 10); /* middle without a first */
	assert_int_equal(reasm_add(&r, &f, 1, p, 1000, &budget), TERN_EPROTO);
	f = chunk(1, WIRE_FLAG_FIRST, 50, 40);
	assert_int_equal(reasm_add(&r, &f, 1, p, 1000, &budget), 0);
	f = chunk(1, 0, 0, 20); /* past the announced length */
	assert_int_equal(reasm_add(&r, &f, 1, p, 1000, &budget), TERN_EPROTO);
	assert_int_equal(budget, 1000);
	f = chunk(1, WIRE_FLAG_FIRST, 50, 10);
	assert_int_equal(reasm_add(&r, &f, 1, p, 1000, &budget), 0);
	f = chunk(1, WIRE_FLAG_LAST, 0, 10); /* last before the length */
	assert_int_equal(reasm_add(&r, &f, 1, p, 1000, &budget), TERN_EPROTO);
	assert_int_equal(budget, 1000);
	/* a new first chunk abandons a message in progress */
	f = chunk(1, WIRE_FLAG_FIRST, 50, 10);
	assert_int_equal(reasm_add(&r, &f, 1, p, 1000, &budget), 0);
	f = chunk(1, WIRE_FLAG_FIRST | WIRE_FLAG_LAST, 20, 20);
	assert_int_equal(reasm_add(&r, &f, 2, p, 1000, &budget), 1);
	reasm_reset(&r, &budget);
	assert_int_equal(budget, 1000);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_top_up_at_half),
	    cmocka_unit_test(test_overrun_detected),
	    cmocka_unit_test(test_window_grows_to_bdp),
	    cmocka_unit_test(test_no_growth_when_receiver_is_slow),
	    cmocka_unit_test(test_growth_once_per_window),
	    cmocka_unit_test(test_window_capped),
	    cmocka_unit_test(test_growth_stops_at_the_link_need),
	    cmocka_unit_test(test_growth_jumps_to_the_floor),
	    cmocka_unit_test(test_reasm_interleaved),
	    cmocka_unit_test(test_reasm_refuses_oversize),
	    cmocka_unit_test(test_reasm_bad_sequences),
	};
	return cmocka_run_group_tests_name("credit", tests, NULL, NULL);
}
