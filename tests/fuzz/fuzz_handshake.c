/*
 * fuzz_handshake.c - the first bytes a peer sends: preamble, then HELLO.
 *
 * The preamble decides whether the peer is tern at all and which version it
 * speaks; then the first frame must be a CONTROL frame holding a HELLO.
 * When a HELLO is accepted, its fields must be within what PROTOCOL.md
 * allows and what the connection derives from them must be usable: the
 * node computes its frame size from the peer's chunk size, and a frame size
 * of 0 would leave a publisher sending empty chunks forever.
 */
#include <stdbool.h>
#include <string.h>

#include "control.h"
#include "fuzz.h"
#include "tern/tern.h"
#include "wire.h"

/* The defaults of tern_config_init(), as the node meets the peer with them. */
#define NODE_CHUNK     65536
#define NODE_BATCH_MAX 65536

static void
check_hello(const struct ctl_msg *m)
{
	uint64_t frame_max;

	/* PROTOCOL.md: id (str, 1-255 bytes), mode (uint: 0 peer, 1 router, 2 client) */
	FUZZ_CHECK(m->u.hello.id.len >= 1 && m->u.hello.id.len <= CTL_ID_MAX);
	FUZZ_CHECK(m->u.hello.mode <= TERN_MODE_CLIENT);
	/* PROTOCOL.md's Bounds: what sizes queues, batches, frames and timers */
	FUZZ_CHECK(m->u.hello.batch_max >= CTL_BATCH_MIN && m->u.hello.batch_max <= CTL_BATCH_MAX);
	FUZZ_CHECK(m->u.hello.chunk >= CTL_CHUNK_MIN && m->u.hello.chunk <= CTL_CHUNK_MAX);
	FUZZ_CHECK(m->u.hello.window >= CTL_WINDOW_MIN && m->u.hello.window <= CTL_WINDOW_MAX);
	FUZZ_CHECK(m->u.hello.keepalive_ms >= CTL_KEEPALIVE_MIN &&
	           m->u.hello.keepalive_ms <= CTL_KEEPALIVE_MAX);
	FUZZ_CHECK(m->u.hello.max_message >= 1);
	/* the frame size the connection would use, as in the handshake */
	frame_max = NODE_CHUNK < m->u.hello.chunk ? NODE_CHUNK : m->u.hello.chunk;
	if (frame_max + WIRE_HDR_MAX > NODE_BATCH_MAX) {
		frame_max = NODE_BATCH_MAX - WIRE_HDR_MAX;
	}
	FUZZ_CHECK(frame_max > 0);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct wire_frame f;
	struct ctl_msg m;
	size_t hlen = 0;
	size_t left;
	int version = -1;
	int rc;

	if (size < WIRE_PREAMBLE_LEN) {
		return 0; /* the connection waits for more */
	}
	rc = wire_preamble_decode(data, &version);
	if (rc == TERN_EPROTO) {
		FUZZ_CHECK(memcmp(data, "TERN", 4) != 0);
		return 0;
	}
	if (rc == TERN_EVERSION) {
		FUZZ_CHECK(version == data[4] && version != TERN_PROTOCOL_VERSION);
		return 0;
	}
	FUZZ_CHECK(rc == 0 && version == TERN_PROTOCOL_VERSION);
	FUZZ_CHECK(memcmp(data, "TERN", 4) == 0);

	left = size - WIRE_PREAMBLE_LEN;
	rc = wire_header_decode(data + WIRE_PREAMBLE_LEN, left, CTL_MSG_MAX, &f, &hlen);
	if (rc <= 0) {
		return 0;
	}
	FUZZ_CHECK(hlen <= left && f.len <= CTL_MSG_MAX);
	fuzz_header_roundtrip(&f, hlen, CTL_MSG_MAX);
	if (f.len > left - hlen || f.type != WIRE_CONTROL) {
		return 0; /* incomplete, or data before the handshake */
	}
	if (fuzz_ctl_decode(data + WIRE_PREAMBLE_LEN + hlen, (size_t)f.len, &m) != 0) {
		return 0;
	}
	if (m.type == CTL_HELLO) {
		check_hello(&m);
	}
	return 0;
}
