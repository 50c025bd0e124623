/*
 * fuzz.c - round-trip properties shared by the frame and handshake harnesses.
 *
 * A decoder may accept several spellings of one value (an overlong varint, a
 * uint16 where a fixint would do); tern's encoders write the shortest one.
 * So decode, encode, decode again must give the same value, and the
 * encoding must be no longer than what was accepted.
 */
#include <stdbool.h>
#include <string.h>

#include "control.h"
#include "fuzz.h"
#include "wire.h"

void
fuzz_header_roundtrip(const struct wire_frame *f, size_t hdr_len, uint64_t max_payload)
{
	uint8_t buf[WIRE_HDR_MAX];
	struct wire_frame g;
	size_t n;
	size_t glen = 0;

	n = wire_header_encode(buf, f);
	FUZZ_CHECK(n <= hdr_len);
	FUZZ_CHECK(wire_header_decode(buf, n, max_payload, &g, &glen) == 1);
	FUZZ_CHECK(glen == n);
	FUZZ_CHECK(g.type == f->type && g.flags == f->flags);
	FUZZ_CHECK(g.channel == f->channel && g.seq == f->seq && g.total == f->total);
	FUZZ_CHECK(g.len == f->len);
	/* one byte short of a whole header is never a whole header */
	FUZZ_CHECK(wire_header_decode(buf, n - 1, max_payload, &g, &glen) == 0);
}

static bool
str_eq(struct ctl_str a, struct ctl_str b)
{
	return a.len == b.len && (a.len == 0 || memcmp(a.p, b.p, a.len) == 0);
}

static bool
msg_eq(const struct ctl_msg *a, const struct ctl_msg *b)
{
	if (a->type != b->type) {
		return false;
	}
	switch (a->type) {
	case CTL_HELLO:
		return str_eq(a->u.hello.id, b->u.hello.id) && a->u.hello.mode == b->u.hello.mode &&
		       a->u.hello.low_latency == b->u.hello.low_latency &&
		       a->u.hello.batch_max == b->u.hello.batch_max &&
		       a->u.hello.chunk == b->u.hello.chunk &&
		       a->u.hello.max_message == b->u.hello.max_message &&
		       a->u.hello.window == b->u.hello.window &&
		       a->u.hello.keepalive_ms == b->u.hello.keepalive_ms;
	case CTL_SUB:
		return str_eq(a->u.sub.origin, b->u.sub.origin) &&
		       a->u.sub.sub_id == b->u.sub.sub_id && a->u.sub.hops == b->u.sub.hops &&
		       str_eq(a->u.sub.keyexpr, b->u.sub.keyexpr);
	case CTL_UNSUB:
		return str_eq(a->u.sub.origin, b->u.sub.origin) &&
		       a->u.sub.sub_id == b->u.sub.sub_id && a->u.sub.end == b->u.sub.end;
	case CTL_OPEN:
		return a->u.open.channel == b->u.open.channel &&
		       str_eq(a->u.open.publisher, b->u.open.publisher) &&
		       str_eq(a->u.open.key, b->u.open.key) &&
		       a->u.open.reliability == b->u.open.reliability &&
		       a->u.open.instance == b->u.open.instance;
	case CTL_CLOSE:
		return a->u.credit.channel == b->u.credit.channel;
	case CTL_CREDIT:
		return a->u.credit.channel == b->u.credit.channel &&
		       a->u.credit.bytes == b->u.credit.bytes &&
		       a->u.credit.consumed == b->u.credit.consumed;
	case CTL_BLOCKED:
		return a->u.credit.channel == b->u.credit.channel &&
		       a->u.credit.bytes == b->u.credit.bytes;
	case CTL_PING:
	case CTL_PONG:
		return a->u.token == b->u.token;
	case CTL_GOODBYE:
		return str_eq(a->u.reason, b->u.reason);
	case CTL_DENY:
		return a->u.deny.what == b->u.deny.what && str_eq(a->u.deny.name, b->u.deny.name) &&
		       a->u.deny.id == b->u.deny.id && str_eq(a->u.deny.key, b->u.deny.key) &&
		       str_eq(a->u.deny.reason, b->u.deny.reason);
	case CTL_SCOPE:
	case CTL_UNSCOPE:
		return str_eq(a->u.scope, b->u.scope);
	case CTL_SYNC:
		return true;
	default:
		return false;
	}
}

int
fuzz_ctl_decode(const uint8_t *p, size_t len, struct ctl_msg *m)
{
	static uint8_t buf[2 * CTL_MSG_MAX];
	struct ctl_msg again;
	int rc = ctl_decode(p, len, m);
	int n;

	if (rc != 0) {
		FUZZ_CHECK(rc < 0);
		return rc;
	}
	FUZZ_CHECK(m->type >= CTL_HELLO && m->type <= CTL_LAST);
	if (m->type == CTL_DENY) {
		/* PROTOCOL.md: what is 0 (SUB) or 1 (OPEN); an OPEN's channel is in range */
		FUZZ_CHECK(m->u.deny.what <= CTL_DENY_OPEN);
		FUZZ_CHECK(m->u.deny.what == CTL_DENY_SUB ||
		           (m->u.deny.id >= 1 && m->u.deny.id <= CTL_CHANNEL_MAX));
		FUZZ_CHECK(m->u.deny.name.len <= CTL_ID_MAX + 24 &&
		           m->u.deny.key.len <= CTL_TEXT_MAX &&
		           m->u.deny.reason.len <= CTL_TEXT_MAX);
	}
	n = ctl_encode(m, buf, sizeof(buf));
	FUZZ_CHECK(n > 0 && (size_t)n <= len);
	FUZZ_CHECK(ctl_decode(buf, (size_t)n, &again) == 0);
	FUZZ_CHECK(msg_eq(m, &again));
	/* every prefix of a message is truncated, hence refused */
	FUZZ_CHECK(ctl_decode(buf, (size_t)n - 1, &again) != 0);
	return 0;
}
