/*
 * wire_test.c - the frame and control-message codecs: every message type
 * round-trips, and every truncated or corrupted input is refused with an
 * error, never a crash (this suite also runs under ASan and UBSan).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "control.h"
#include "tern/tern.h"
#include "wire.h"

static void
test_varint_roundtrip(void **state)
{
	static const uint64_t values[] = {0,
	                                  1,
	                                  127,
	                                  128,
	                                  255,
	                                  16383,
	                                  16384,
	                                  UINT32_MAX,
	                                  (uint64_t)UINT32_MAX + 1,
	                                  UINT64_MAX - 1,
	                                  UINT64_MAX};
	uint8_t buf[WIRE_VARINT_MAX];
	(void)state;

	for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
		size_t n = wire_varint_encode(buf, values[i]), used;
		uint64_t v;
		assert_true(n <= WIRE_VARINT_MAX);
		assert_int_equal(wire_varint_decode(buf, n, &v, &used), 1);
		assert_int_equal(used, n);
		assert_true(v == values[i]);
		for (size_t k = 0; k < n; k++) {
			assert_int_equal(wire_varint_decode(buf, k, &v, &used), 0);
		}
	}
}

static void
test_varint_overlong(void **state)
{
	uint8_t buf[12];
	uint64_t v;
	size_t used;
	(void)state;

	memset(buf, 0xff, sizeof(buf));
	assert_int_equal(wire_varint_decode(buf, sizeof(buf), &v, &used), TERN_EPROTO);
	memset(buf, 0x80, 9);
	buf[9] = 0x02; /* bit 64 */
	assert_int_equal(wire_varint_decode(buf, 10, &v, &used), TERN_EPROTO);
}

static void
test_preamble(void **state)
{
	uint8_t p[WIRE_PREAMBLE_LEN];
	int version = 0;
	(void)state;

	wire_preamble_encode(p);
	assert_int_equal(wire_preamble_decode(p, &version), 0);
	assert_int_equal(version, TERN_PROTOCOL_VERSION);
	p[4] = TERN_PROTOCOL_VERSION + 1;
	assert_int_equal(wire_preamble_decode(p, &version), TERN_EVERSION);
	assert_int_equal(version, TERN_PROTOCOL_VERSION + 1);
	memcpy(p, "HTTP", 4);
	assert_int_equal(wire_preamble_decode(p, &version), TERN_EPROTO);
}

static void
roundtrip_header(const struct wire_frame *f)
{
	uint8_t buf[WIRE_HDR_MAX];
	struct wire_frame g;
	size_t n = wire_header_encode(buf, f), hlen;

	assert_true(n <= WIRE_HDR_MAX);
	assert_int_equal(wire_header_decode(buf, n, UINT64_MAX, &g, &hlen), 1);
	assert_int_equal(hlen, n);
	assert_int_equal(g.type, f->type);
	assert_int_equal(g.flags, f->flags);
	assert_true(g.channel == f->channel && g.len == f->len);
	if (f->flags & WIRE_FLAG_SEQ) {
		assert_true(g.seq == f->seq);
	}
	if (f->flags & WIRE_FLAG_FIRST) {
		assert_true(g.total == f->total);
	}
	assert_true(g.stamp == ((f->flags & WIRE_FLAG_STAMP) ? f->stamp : 0));
	for (size_t k = 0; k < n; k++) {
		assert_int_equal(wire_header_decode(buf, k, UINT64_MAX, &g, &hlen), 0);
	}
}

static void
test_header_roundtrip(void **state)
{
	struct wire_frame f = {.type = WIRE_DATA, .channel = 5, .len = 64};
	(void)state;

	roundtrip_header(&f);
	f.flags = WIRE_FLAG_SEQ;
	f.seq = UINT64_MAX;
	roundtrip_header(&f);
	f.type = WIRE_CHUNK;
	f.flags = WIRE_FLAG_FIRST | WIRE_FLAG_SEQ;
	f.total = 64ull << 20;
	f.len = 65536;
	f.channel = WIRE_CHANNEL_MAX;
	roundtrip_header(&f);
	f.flags = WIRE_FLAG_LAST;
	roundtrip_header(&f);
	f.flags = 0;
	roundtrip_header(&f);
	f.type = WIRE_CONTROL;
	f.channel = 0;
	f.len = 100;
	roundtrip_header(&f);
}

/* A publish time rides on a data frame or a first chunk, never on a later
 * chunk or a control frame; with every field at its largest the header
 * still fits WIRE_HDR_MAX. */
static void
test_header_stamp(void **state)
{
	struct wire_frame f = {.type = WIRE_DATA,
	                       .flags = WIRE_FLAG_STAMP,
	                       .channel = 7,
	                       .len = 64,
	                       .stamp = 1796400000123456ull};
	uint8_t buf[WIRE_HDR_MAX];
	struct wire_frame g;
	size_t hlen;
	(void)state;

	roundtrip_header(&f);
	/* a stamp of today costs 8 bytes (docs/PROTOCOL.md) */
	assert_int_equal(wire_header_encode(buf, &f), 3 + 8);
	f.type = WIRE_CHUNK;
	f.flags = WIRE_FLAG_FIRST | WIRE_FLAG_SEQ | WIRE_FLAG_LAST | WIRE_FLAG_STAMP;
	f.seq = f.total = f.stamp = UINT64_MAX;
	f.len = UINT64_MAX;
	f.channel = WIRE_CHANNEL_MAX;
	roundtrip_header(&f);
	f.flags = WIRE_FLAG_LAST | WIRE_FLAG_STAMP;
	assert_int_equal(
	    wire_header_decode(buf, wire_header_encode(buf, &f), UINT64_MAX, &g, &hlen),
	    TERN_EPROTO);
	buf[0] = WIRE_CONTROL | WIRE_FLAG_STAMP;
	assert_int_equal(wire_header_decode(buf, sizeof(buf), UINT64_MAX, &g, &hlen), TERN_EPROTO);
}

static void
test_small_message_overhead(void **state)
{
	struct wire_frame f = {.type = WIRE_DATA, .channel = 1, .len = 64};
	uint8_t buf[WIRE_HDR_MAX];
	(void)state;

	/* the documented overhead of a 64-byte message (docs/PROTOCOL.md) */
	assert_int_equal(wire_header_encode(buf, &f), 3);
}

static void
test_header_lengths(void **state)
{
	static const uint64_t max = 65536;
	static const uint64_t lens[] = {0, 1, max - 1, max, max + 1, UINT32_MAX, UINT64_MAX};
	(void)state;

	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		struct wire_frame f = {.type = WIRE_DATA, .channel = 1, .len = lens[i]}, g;
		uint8_t buf[WIRE_HDR_MAX];
		size_t n = wire_header_encode(buf, &f), hlen;
		int rc = wire_header_decode(buf, n, max, &g, &hlen);
		assert_int_equal(rc, lens[i] <= max ? 1 : TERN_EMSGSIZE);
	}
}

/* Channels beyond WIRE_CHANNEL_MAX and control payloads beyond
 * WIRE_CONTROL_MAX are refused, whatever the caller's payload limit, and
 * the explanation names the field and its bound. */
static void
test_header_bounds(void **state)
{
	static const uint64_t channels[] = {WIRE_CHANNEL_MAX + 1ull, UINT32_MAX, UINT64_MAX};
	static const uint64_t ctl_lens[] = {WIRE_CONTROL_MAX + 1ull, 65536, UINT32_MAX, UINT64_MAX};
	struct wire_frame f = {.type = WIRE_DATA, .len = 1}, g;
	uint8_t buf[WIRE_HDR_MAX];
	char why[160];
	size_t n, hlen;
	(void)state;

	for (size_t i = 0; i < sizeof(channels) / sizeof(channels[0]); i++) {
		f.channel = channels[i];
		n = wire_header_encode(buf, &f);
		assert_int_equal(wire_header_decode(buf, n, UINT64_MAX, &g, &hlen), TERN_EPROTO);
		wire_header_explain(buf, n, UINT64_MAX, why, sizeof(why));
		assert_non_null(strstr(why, "channel"));
	}
	f.channel = WIRE_CHANNEL_MAX;
	n = wire_header_encode(buf, &f);
	assert_int_equal(wire_header_decode(buf, n, UINT64_MAX, &g, &hlen), 1);
	f = (struct wire_frame){.type = WIRE_CONTROL, .len = WIRE_CONTROL_MAX};
	n = wire_header_encode(buf, &f);
	assert_int_equal(wire_header_decode(buf, n, UINT64_MAX, &g, &hlen), 1);
	for (size_t i = 0; i < sizeof(ctl_lens) / sizeof(ctl_lens[0]); i++) {
		f.len = ctl_lens[i];
		n = wire_header_encode(buf, &f);
		assert_int_equal(wire_header_decode(buf, n, UINT64_MAX, &g, &hlen), TERN_EMSGSIZE);
		wire_header_explain(buf, n, UINT64_MAX, why, sizeof(why));
		assert_non_null(strstr(why, "control frame of"));
		assert_non_null(strstr(why, "above 4096"));
	}
}

static void
test_header_corrupt(void **state)
{
	uint8_t buf[WIRE_HDR_MAX];
	struct wire_frame g;
	size_t hlen;
	(void)state;

	buf[0] = 3; /* no such type */
	buf[1] = 0;
	assert_int_equal(wire_header_decode(buf, 2, 100, &g, &hlen), TERN_EPROTO);
	buf[0] = WIRE_DATA | WIRE_FLAG_FIRST; /* first is a chunk flag */
	assert_int_equal(wire_header_decode(buf, 2, 100, &g, &hlen), TERN_EPROTO);
	buf[0] = WIRE_CONTROL | WIRE_FLAG_SEQ;
	assert_int_equal(wire_header_decode(buf, 2, 100, &g, &hlen), TERN_EPROTO);
	buf[0] = 0x80 | WIRE_DATA;
	assert_int_equal(wire_header_decode(buf, 2, 100, &g, &hlen), TERN_EPROTO);
	/* channel beyond 32 bits */
	struct wire_frame f = {.type = WIRE_DATA, .channel = (uint64_t)UINT32_MAX + 1, .len = 1};
	size_t n = wire_header_encode(buf, &f);
	assert_int_equal(wire_header_decode(buf, n, 100, &g, &hlen), TERN_EPROTO);
	/* a first chunk longer than its message */
	struct wire_frame c = {
	    .type = WIRE_CHUNK, .flags = WIRE_FLAG_FIRST, .channel = 1, .total = 10, .len = 20};
	n = wire_header_encode(buf, &c);
	assert_int_equal(wire_header_decode(buf, n, 100, &g, &hlen), TERN_EPROTO);
}

/* The inline decoder agrees with the full one on every header of up to
 * five bytes, and on headers of every other length cut at every length:
 * same result, and the same frame where both decode one. */
static void
agree(const uint8_t *buf, size_t len, uint64_t max)
{
	struct wire_frame a, b;
	size_t ha = 0, hb = 0;
	int ra = wire_header_decode_fast(buf, len, max, &a, &ha);
	int rb = wire_header_decode(buf, len, max, &b, &hb);

	assert_int_equal(ra, rb);
	if (ra == 1) {
		assert_int_equal(ha, hb);
		assert_int_equal(a.type, b.type);
		assert_int_equal(a.flags, b.flags);
		assert_int_equal(a.channel, b.channel);
		assert_int_equal(a.len, b.len);
		assert_int_equal(a.seq, b.seq);
		assert_int_equal(a.total, b.total);
		assert_int_equal(a.stamp, b.stamp);
	}
}

static void
test_header_fast_agrees(void **state)
{
	static const uint8_t bytes[] = {0x00, 0x01, 0x7f, 0x80, 0x81, 0xff, 0x02, 0x40, 0x10};
	const size_t nb = sizeof(bytes);
	uint8_t buf[WIRE_HDR_MAX + 8];
	(void)state;

	/* every first byte; four more from a set that covers each varint case */
	for (int t = 0; t < 256; t++) {
		for (size_t i = 0; i < nb * nb * nb * nb; i++) {
			size_t k = i;
			buf[0] = (uint8_t)t;
			for (int j = 1; j <= 4; j++, k /= nb) {
				buf[j] = bytes[k % nb];
			}
			for (size_t len = 0; len <= 5; len++) {
				agree(buf, len, 100);
				agree(buf, len, UINT64_MAX);
			}
		}
	}
	/* encoded headers of every shape, whole and cut short */
	static const uint64_t channels[] = {0, 1, 127, 128, 16383, 16384, WIRE_CHANNEL_MAX};
	static const uint64_t lens[] = {0, 1, 127, 128, 16383, 16384, 100000};
	for (size_t c = 0; c < sizeof(channels) / sizeof(channels[0]); c++) {
		for (size_t l = 0; l < sizeof(lens) / sizeof(lens[0]); l++) {
			for (int flags = 0; flags < 2; flags++) {
				struct wire_frame f = {.type = WIRE_DATA,
				                       .flags = flags ? WIRE_FLAG_SEQ : 0,
				                       .channel = channels[c],
				                       .seq = 300,
				                       .len = lens[l]};
				size_t n = wire_header_encode(buf, &f);
				memset(buf + n, 0xab, sizeof(buf) - n);
				for (size_t len = 0; len <= sizeof(buf); len++) {
					agree(buf, len, 20000);
				}
			}
		}
	}
}

static struct ctl_str
S(const char *s) {
	struct ctl_str r = {s, strlen(s)};
	return r;
}

static void
sample_messages(struct ctl_msg *m, int *n)
{
	int i = 0;

	memset(m, 0, CTL_LAST * sizeof(*m));
	m[i].type = CTL_HELLO;
	m[i].u.hello.id = S("node-1");
	m[i].u.hello.mode = 1;
	m[i].u.hello.low_latency = true;
	m[i].u.hello.batch_max = 65536;
	m[i].u.hello.chunk = 65536;
	m[i].u.hello.max_message = 64ull << 20;
	m[i].u.hello.window = 262144;
	m[i++].u.hello.keepalive_ms = 1000;
	m[i++].type = CTL_SYNC;
	m[i].type = CTL_SUB;
	m[i].u.sub.origin = S("node-2");
	m[i].u.sub.sub_id = 77;
	m[i].u.sub.hops = 3;
	m[i++].u.sub.keyexpr = S("sensors/**");
	m[i].type = CTL_UNSUB;
	m[i].u.sub.origin = S("node-2");
	m[i].u.sub.end = CTL_UNSUB_ENDED_ACK;
	m[i++].u.sub.sub_id = 77;
	m[i].type = CTL_OPEN;
	m[i].u.open.channel = 9;
	m[i].u.open.publisher = S("node-1/4");
	m[i].u.open.key = S("sensors/a/b");
	m[i].u.open.reliability = 1;
	m[i++].u.open.instance = UINT64_MAX;
	m[i].type = CTL_CLOSE;
	m[i++].u.credit.channel = 9;
	m[i].type = CTL_CREDIT;
	m[i].u.credit.channel = 9;
	m[i].u.credit.consumed = 1234567;
	m[i++].u.credit.bytes = CTL_CREDIT_MAX;
	m[i].type = CTL_BLOCKED;
	m[i].u.credit.channel = 9;
	m[i++].u.credit.bytes = 12345;
	m[i].type = CTL_PING;
	m[i++].u.token = 42;
	m[i].type = CTL_PONG;
	m[i++].u.token = 42;
	m[i].type = CTL_GOODBYE;
	m[i++].u.reason = S("node closing");
	m[i].type = CTL_DENY;
	m[i].u.deny.what = CTL_DENY_OPEN;
	m[i].u.deny.name = S("node-a/3");
	m[i].u.deny.id = 9;
	m[i].u.deny.key = S("secret/x");
	m[i++].u.deny.reason = S("access denied: publish on 'secret/x'");
	m[i].type = CTL_SCOPE;
	m[i++].u.scope = S("sensors/a/b");
	m[i].type = CTL_UNSCOPE;
	m[i++].u.scope = S("sensors/a/b");
	*n = i;
}

static void
assert_str(struct ctl_str a, struct ctl_str b)
{
	assert_int_equal(a.len, b.len);
	assert_memory_equal(a.p, b.p, a.len);
}

static void
test_control_roundtrip(void **state)
{
	struct ctl_msg m[CTL_LAST], d;
	uint8_t buf[CTL_MSG_MAX];
	int n;
	(void)state;

	sample_messages(m, &n);
	assert_int_equal(n, CTL_LAST);
	for (int i = 0; i < n; i++) {
		int len = ctl_encode(&m[i], buf, sizeof(buf));
		assert_true(len > 0);
		assert_int_equal(ctl_decode(buf, (size_t)len, &d), 0);
		assert_int_equal(d.type, m[i].type);
		switch (d.type) {
		case CTL_HELLO:
			assert_str(d.u.hello.id, m[i].u.hello.id);
			assert_true(d.u.hello.low_latency);
			assert_true(d.u.hello.max_message == m[i].u.hello.max_message);
			assert_true(d.u.hello.window == m[i].u.hello.window);
			assert_true(d.u.hello.keepalive_ms == 1000);
			break;
		case CTL_SUB:
			assert_str(d.u.sub.keyexpr, m[i].u.sub.keyexpr);
			assert_true(d.u.sub.hops == 3);
			assert_str(d.u.sub.origin, m[i].u.sub.origin);
			assert_true(d.u.sub.sub_id == 77);
			break;
		case CTL_UNSUB:
			assert_str(d.u.sub.origin, m[i].u.sub.origin);
			assert_true(d.u.sub.sub_id == 77);
			assert_true(d.u.sub.end == CTL_UNSUB_ENDED_ACK);
			break;
		case CTL_OPEN:
			assert_str(d.u.open.publisher, m[i].u.open.publisher);
			assert_str(d.u.open.key, m[i].u.open.key);
			assert_true(d.u.open.channel == 9 && d.u.open.reliability == 1);
			assert_true(d.u.open.instance == UINT64_MAX);
			break;
		case CTL_CREDIT:
		case CTL_BLOCKED:
		case CTL_CLOSE:
			assert_true(d.u.credit.channel == 9);
			assert_true(d.u.credit.bytes == m[i].u.credit.bytes);
			assert_true(d.u.credit.consumed == m[i].u.credit.consumed);
			break;
		case CTL_PING:
		case CTL_PONG:
			assert_true(d.u.token == 42);
			break;
		case CTL_GOODBYE:
			assert_str(d.u.reason, m[i].u.reason);
			break;
		case CTL_DENY:
			assert_true(d.u.deny.what == CTL_DENY_OPEN && d.u.deny.id == 9);
			assert_str(d.u.deny.name, m[i].u.deny.name);
			assert_str(d.u.deny.key, m[i].u.deny.key);
			assert_str(d.u.deny.reason, m[i].u.deny.reason);
			break;
		case CTL_SCOPE:
		case CTL_UNSCOPE:
			assert_str(d.u.scope, m[i].u.scope);
			break;
		}
	}
}

static void
test_control_truncated(void **state)
{
	struct ctl_msg m[CTL_LAST], d;
	uint8_t buf[CTL_MSG_MAX];
	int n;
	(void)state;

	sample_messages(m, &n);
	for (int i = 0; i < n; i++) {
		int len = ctl_encode(&m[i], buf, sizeof(buf));
		for (int k = 0; k < len; k++) {
			/* an exact-size heap copy lets ASan catch any over-read */
			uint8_t *p = malloc((size_t)k + 1);
			memcpy(p, buf, (size_t)k);
			assert_int_equal(ctl_decode(p, (size_t)k, &d), TERN_EPROTO);
			free(p);
		}
		/* trailing garbage */
		buf[len] = 0xc0;
		assert_int_equal(ctl_decode(buf, (size_t)len + 1, &d), TERN_EPROTO);
	}
}

static void
test_control_corrupted(void **state)
{
	struct ctl_msg m[CTL_LAST], d;
	uint8_t buf[CTL_MSG_MAX];
	int n;
	unsigned seed = 1;
	(void)state;

	sample_messages(m, &n);
	for (int i = 0; i < n; i++) {
		int len = ctl_encode(&m[i], buf, sizeof(buf));
		for (int round = 0; round < 2000; round++) {
			uint8_t *p = malloc((size_t)len);
			memcpy(p, buf, (size_t)len);
			for (int flips = 0; flips < 3; flips++) {
				seed = seed * 1103515245u + 12345u;
				p[(seed >> 8) % (unsigned)len] ^=
				    (uint8_t)(1u << ((seed >> 4) % 8));
			}
			/* either refused or decoded to something self-consistent */
			if (ctl_decode(p, (size_t)len, &d) == 0) {
				assert_true(d.type >= CTL_HELLO && d.type <= CTL_LAST);
			}
			free(p);
		}
	}
}

static void
test_control_schema(void **state)
{
	/* [5] (OPEN) with the wrong arity, [99] unknown type, a string where a uint goes */
	static const uint8_t short_open[] = {0x91, 0x05};
	static const uint8_t unknown[] = {0x91, 0x63};
	static const uint8_t wrong_type[] = {0x92, 0x09, 0xa1, 'x'};
	static const uint8_t not_array[] = {0x05};
	static const uint8_t huge_str[] = {0x92, 0x0b, 0xdb, 0xff, 0xff, 0xff, 0xff};
	struct ctl_msg d;
	(void)state;

	assert_int_equal(ctl_decode(short_open, sizeof(short_open), &d), TERN_EPROTO);
	assert_int_equal(ctl_decode(unknown, sizeof(unknown), &d), TERN_EPROTO);
	assert_int_equal(ctl_decode(wrong_type, sizeof(wrong_type), &d), TERN_EPROTO);
	assert_int_equal(ctl_decode(not_array, sizeof(not_array), &d), TERN_EPROTO);
	assert_int_equal(ctl_decode(huge_str, sizeof(huge_str), &d), TERN_EPROTO);
	assert_int_equal(ctl_decode(NULL, 0, &d), TERN_EPROTO);
}

static void
test_control_too_long_strings(void **state)
{
	char id[CTL_ID_MAX + 2];
	struct ctl_msg m = {.type = CTL_HELLO}, d;
	uint8_t buf[CTL_MSG_MAX];
	int len;
	(void)state;

	memset(id, 'x', sizeof(id) - 1);
	id[sizeof(id) - 1] = '\0';
	m.u.hello.id = S(id);
	len = ctl_encode(&m, buf, sizeof(buf));
	assert_true(len > 0);
	assert_int_equal(ctl_decode(buf, (size_t)len, &d), TERN_EPROTO);
	/* encoding into too small a buffer fails cleanly */
	assert_int_equal(ctl_encode(&m, buf, 10), TERN_EINVAL);
}

/* Every string a peer sends is kept or printed as a C string: one with a
 * NUL byte inside is refused, naming the field (a publisher "a\0b" was kept
 * as "a" with length 3, then compared and re-sent past its end). */
static void
test_control_nul_strings(void **state)
{
	static const char nul[] = {'a', '\0', 'b'};
	struct ctl_msg m[CTL_LAST], d;
	const struct {
		struct ctl_msg *msg;
		struct ctl_str *field;
		const char *name;
	} strs[] = {
	    {&m[0], &m[0].u.hello.id, "HELLO id"},
	    {&m[2], &m[2].u.sub.origin, "SUB origin"},
	    {&m[2], &m[2].u.sub.keyexpr, "SUB keyexpr"},
	    {&m[3], &m[3].u.sub.origin, "UNSUB origin"},
	    {&m[4], &m[4].u.open.publisher, "OPEN publisher"},
	    {&m[4], &m[4].u.open.key, "OPEN key"},
	    {&m[10], &m[10].u.reason, "GOODBYE reason"},
	};
	uint8_t buf[CTL_MSG_MAX];
	char why[160];
	int n, len;
	(void)state;

	sample_messages(m, &n);
	for (size_t i = 0; i < sizeof(strs) / sizeof(strs[0]); i++) {
		struct ctl_str keep = *strs[i].field;

		*strs[i].field = (struct ctl_str){nul, sizeof(nul)};
		len = ctl_encode(strs[i].msg, buf, sizeof(buf));
		assert_true(len > 0);
		assert_int_equal(ctl_decode_explain(buf, (size_t)len, &d, why, sizeof(why)),
		                 TERN_EPROTO);
		if (strstr(why, strs[i].name) == NULL || strstr(why, "NUL") == NULL) {
			fail_msg("'%s' does not name '%s' and the NUL byte", why, strs[i].name);
		}
		*strs[i].field = keep;
		len = ctl_encode(strs[i].msg, buf, sizeof(buf));
		assert_int_equal(ctl_decode(buf, (size_t)len, &d), 0);
	}
}

/* One field beyond its bound: refused, and the reason names the field. */
static void
check_bound(struct ctl_msg *m, uint64_t *field, uint64_t v, bool ok, const char *name)
{
	uint8_t buf[CTL_MSG_MAX];
	char why[160];
	struct ctl_msg d;
	uint64_t keep = *field;
	int len;

	*field = v;
	len = ctl_encode(m, buf, sizeof(buf));
	assert_true(len > 0);
	if (ok) {
		assert_int_equal(ctl_decode_explain(buf, (size_t)len, &d, why, sizeof(why)), 0);
	} else {
		assert_int_equal(ctl_decode_explain(buf, (size_t)len, &d, why, sizeof(why)),
		                 TERN_EPROTO);
		if (strstr(why, name) == NULL) {
			fail_msg("value %llu: '%s' does not name '%s'", (unsigned long long)v, why,
			         name);
		}
	}
	*field = keep;
}

/* Each bound of PROTOCOL.md's table: its edges taken, one past them, and
 * UINT32_MAX and UINT64_MAX where those are beyond, refused. */
static void
test_control_bounds(void **state)
{
	struct ctl_msg m[CTL_LAST];
	int n;
	const struct {
		int msg;
		size_t offset;
		uint64_t lo, hi;
		const char *name;
	} bounds[] = {
	    {0, offsetof(struct ctl_msg, u.hello.batch_max), CTL_BATCH_MIN, CTL_BATCH_MAX,
	     "HELLO batch_max"},
	    {0, offsetof(struct ctl_msg, u.hello.chunk), CTL_CHUNK_MIN, CTL_CHUNK_MAX,
	     "HELLO chunk"},
	    {0, offsetof(struct ctl_msg, u.hello.window), CTL_WINDOW_MIN, CTL_WINDOW_MAX,
	     "HELLO window"},
	    {0, offsetof(struct ctl_msg, u.hello.keepalive_ms), CTL_KEEPALIVE_MIN,
	     CTL_KEEPALIVE_MAX, "HELLO keepalive_ms"},
	    {0, offsetof(struct ctl_msg, u.hello.mode), 0, 2, "HELLO mode"},
	    {0, offsetof(struct ctl_msg, u.hello.max_message), 1, UINT64_MAX, "HELLO max_message"},
	    {4, offsetof(struct ctl_msg, u.open.channel), 1, CTL_CHANNEL_MAX, "OPEN channel"},
	    {4, offsetof(struct ctl_msg, u.open.reliability), 0, 1, "OPEN reliability"},
	    {5, offsetof(struct ctl_msg, u.credit.channel), 1, CTL_CHANNEL_MAX, "CLOSE channel"},
	    {6, offsetof(struct ctl_msg, u.credit.channel), 1, CTL_CHANNEL_MAX, "CREDIT channel"},
	    {6, offsetof(struct ctl_msg, u.credit.bytes), 0, CTL_CREDIT_MAX, "CREDIT bytes"},
	    {6, offsetof(struct ctl_msg, u.credit.consumed), 0, CTL_CONSUMED_MAX,
	     "CREDIT consumed"},
	    {7, offsetof(struct ctl_msg, u.credit.channel), 1, CTL_CHANNEL_MAX, "BLOCKED channel"},
	    {7, offsetof(struct ctl_msg, u.credit.bytes), 0, CTL_CREDIT_MAX, "BLOCKED bytes"},
	    {11, offsetof(struct ctl_msg, u.deny.what), CTL_DENY_SUB, CTL_DENY_OPEN, "DENY what"},
	    {11, offsetof(struct ctl_msg, u.deny.id), 1, CTL_CHANNEL_MAX, "DENY channel"},
	};
	(void)state;

	sample_messages(m, &n);
	for (size_t i = 0; i < sizeof(bounds) / sizeof(bounds[0]); i++) {
		struct ctl_msg *msg = &m[bounds[i].msg];
		uint64_t *field = (uint64_t *)((char *)msg + bounds[i].offset);
		uint64_t lo = bounds[i].lo, hi = bounds[i].hi;

		check_bound(msg, field, lo, true, bounds[i].name);
		check_bound(msg, field, hi, true, bounds[i].name);
		if (lo > 0) {
			check_bound(msg, field, lo - 1, false, bounds[i].name);
			check_bound(msg, field, 0, false, bounds[i].name);
		}
		if (hi < UINT64_MAX) {
			check_bound(msg, field, hi + 1, false, bounds[i].name);
			check_bound(msg, field, UINT64_MAX, false, bounds[i].name);
		}
		if (hi < UINT32_MAX) {
			check_bound(msg, field, UINT32_MAX, false, bounds[i].name);
		}
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_varint_roundtrip),
	    cmocka_unit_test(test_varint_overlong),
	    cmocka_unit_test(test_preamble),
	    cmocka_unit_test(test_header_roundtrip),
	    cmocka_unit_test(test_header_stamp),
	    cmocka_unit_test(test_small_message_overhead),
	    cmocka_unit_test(test_header_lengths),
	    cmocka_unit_test(test_header_corrupt),
	    cmocka_unit_test(test_header_fast_agrees),
	    cmocka_unit_test(test_control_roundtrip),
	    cmocka_unit_test(test_control_truncated),
	    cmocka_unit_test(test_control_corrupted),
	    cmocka_unit_test(test_control_schema),
	    cmocka_unit_test(test_control_too_long_strings),
	    cmocka_unit_test(test_control_nul_strings),
	    cmocka_unit_test(test_header_bounds),
	    cmocka_unit_test(test_control_bounds),
	};
	return cmocka_run_group_tests_name("wire", tests, NULL, NULL);
}
