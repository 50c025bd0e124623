/*
 * bench_record_test.c - the benchmark record: always 64 bytes, decodes to
 * what was encoded, and never reads past a truncated buffer.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <string.h>

#include "record.h"

static void
encodes_to_64_bytes(void **state)
{
	static const uint32_t senders[] = {0, 1, 99, 65534};
	static const uint32_t seqs[] = {0, 1, 2, 255, 65536, 4000000000u};
	static const uint64_t times[] = {0, 1, 1764681136123456789ull, UINT64_MAX};
	char buf[RECORD_BYTES];
	size_t a, b, c;

	(void)state;
	for (a = 0; a < sizeof(senders) / sizeof(senders[0]); a++) {
		for (b = 0; b < sizeof(seqs) / sizeof(seqs[0]); b++) {
			for (c = 0; c < sizeof(times) / sizeof(times[0]); c++) {
				record r;

				record_make(&r, senders[a], seqs[b], times[c]);
				assert_int_equal(record_encode(&r, buf, sizeof(buf)), RECORD_BYTES);
			}
		}
	}
}

static void
every_value_of_a_run_is_64_bytes(void **state)
{
	char buf[RECORD_BYTES];
	uint32_t seq;

	(void)state;
	/* The value cycles with seq % 1000: cover every one of them. */
	for (seq = 0; seq < 3000; seq++) {
		record r;

		record_make(&r, seq % 7, seq, 1764681136000000000ull + seq);
		assert_int_equal(record_encode(&r, buf, sizeof(buf)), RECORD_BYTES);
	}
}

static void
round_trip(void **state)
{
	char buf[RECORD_BYTES];
	char err[128];
	record in;
	record out;

	(void)state;
	record_make(&in, 42, 123456, 1764681136123456789ull);
	assert_int_equal(record_encode(&in, buf, sizeof(buf)), RECORD_BYTES);
	assert_int_equal(record_decode(&out, buf, sizeof(buf), err, sizeof(err)), RECORD_BYTES);
	assert_true(out.id == in.id);
	assert_true(out.timestamp == in.timestamp);
	assert_string_equal(out.source, in.source);
	assert_int_equal(out.valid, in.valid);
	assert_true(out.value == in.value);
	assert_int_equal(record_sender(out.id), 42);
	assert_int_equal(record_seq(out.id), 123456);
}

static void
a_full_message_is_64_kib(void **state)
{
	static char msg[1024 * RECORD_BYTES];
	size_t off = 0;
	uint32_t i;

	(void)state;
	for (i = 0; i < 1024; i++) {
		record r;
		int n;

		record_make(&r, 0, i, 1764681136123456789ull);
		n = record_encode(&r, msg + off, sizeof(msg) - off);
		assert_int_equal(n, RECORD_BYTES);
		off += (size_t)n;
	}
	assert_int_equal(off, 65536);
}

static void
truncated_input_is_an_error(void **state)
{
	char buf[RECORD_BYTES];
	char err[128];
	record r;
	size_t len;

	(void)state;
	record_make(&r, 3, 7, 1764681136123456789ull);
	assert_int_equal(record_encode(&r, buf, sizeof(buf)), RECORD_BYTES);
	for (len = 0; len < RECORD_BYTES; len++) {
		char *copy = test_malloc(len + 1);

		/* An exact-size heap copy lets the sanitizer catch a read past len. */
		memcpy(copy, buf, len);
		assert_int_equal(record_decode(&r, copy, len, err, sizeof(err)), -1);
		test_free(copy);
	}
}

static void
garbage_is_an_error(void **state)
{
	char buf[RECORD_BYTES];
	char err[128];
	record r;

	(void)state;
	memset(buf, 0xc1, sizeof(buf)); /* 0xc1 is never used in MessagePack */
	assert_int_equal(record_decode(&r, buf, sizeof(buf), err, sizeof(err)), -1);
	memset(buf, 0x95, sizeof(buf)); /* arrays all the way down */
	assert_int_equal(record_decode(&r, buf, sizeof(buf), err, sizeof(err)), -1);
}

static void
too_small_a_buffer_is_an_error(void **state)
{
	char buf[RECORD_BYTES - 1];
	record r;

	(void)state;
	record_make(&r, 0, 0, 1764681136123456789ull);
	assert_int_equal(record_encode(&r, buf, sizeof(buf)), -1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(encodes_to_64_bytes),
	    cmocka_unit_test(every_value_of_a_run_is_64_bytes),
	    cmocka_unit_test(round_trip),
	    cmocka_unit_test(a_full_message_is_64_kib),
	    cmocka_unit_test(truncated_input_is_an_error),
	    cmocka_unit_test(garbage_is_an_error),
	    cmocka_unit_test(too_small_a_buffer_is_an_error),
	};

	return cmocka_run_group_tests_name("bench_record", tests, NULL, NULL);
}
