/*
 * fuzz_frames.c - a stream of frames, read the way a connection reads it.
 *
 * The input is what a peer sends after the preamble. Frames are walked
 * with wire_header_decode(), each announced length checked against the
 * bytes that remain before the payload is touched; control payloads go to
 * ctl_decode(), chunks to one reassembly per channel under a shared budget.
 * The walk stops where the connection would close (a protocol error) or
 * wait (an incomplete frame).
 *
 * Properties: headers and control messages survive a round trip; a
 * completed message is exactly the bytes of its chunks, in order; the
 * reassembly budget plus what the open messages hold is always the whole
 * budget, and all of it is back once they are dropped (nothing leaks: the
 * leak checker runs after every input).
 */
#include <stdbool.h>
#include <string.h>

#include "control.h"
#include "fuzz.h"
#include "keyexpr.h"
#include "reasm.h"
#include "wire.h"

struct chan {
	struct reasm r;
	uint64_t next_seq;
	uint64_t first_seq;
	uint64_t hash; /* FNV-1a of the chunks of the open message */
};

static uint64_t
fnv(uint64_t h, const uint8_t *p, uint64_t len)
{
	for (uint64_t i = 0; i < len; i++) {
		h = (h ^ p[i]) * 0x100000001b3ull;
	}
	return h;
}

static void
check_budget(const struct chan *ch, uint64_t budget)
{
	uint64_t held = 0;

	for (int i = 0; i < FUZZ_CHANNELS; i++) {
		if (ch[i].r.active) {
			FUZZ_CHECK(ch[i].r.buf != NULL && ch[i].r.filled <= ch[i].r.total);
			held += ch[i].r.total;
		}
	}
	FUZZ_CHECK(budget + held == FUZZ_BUDGET);
}

static void
on_control(const uint8_t *p, size_t len)
{
	struct ctl_msg m;

	if (fuzz_ctl_decode(p, len, &m) != 0) {
		return;
	}
	/* what the router does first with a peer's key expression or key */
	if (m.type == CTL_SUB) {
		tern__key_check(m.u.sub.keyexpr.p, m.u.sub.keyexpr.len, true);
	} else if (m.type == CTL_OPEN) {
		tern__key_check(m.u.open.key.p, m.u.open.key.len, false);
	}
}

/* 0: go on; <0: the connection would close. */
static int
on_chunk(struct chan *c, const struct wire_frame *f, uint64_t seq, const uint8_t *payload,
         uint64_t *budget)
{
	int rc = reasm_add(&c->r, f, seq, payload, FUZZ_MAX_MESSAGE, budget);
	uint8_t *buf;
	uint64_t total;

	if (rc < 0) {
		FUZZ_CHECK(!c->r.active && c->r.buf == NULL);
		return rc;
	}
	if (f->flags & WIRE_FLAG_FIRST) {
		c->hash = 0xcbf29ce484222325ull;
		c->first_seq = seq;
	}
	c->hash = fnv(c->hash, payload, f->len);
	if (rc == 0) {
		FUZZ_CHECK(c->r.active);
		return 0;
	}
	FUZZ_CHECK(rc == 1 && c->r.filled == c->r.total && c->r.seq == c->first_seq);
	total = c->r.total;
	buf = reasm_take(&c->r, budget);
	FUZZ_CHECK(buf != NULL && !c->r.active);
	FUZZ_CHECK(fnv(0xcbf29ce484222325ull, buf, total) == c->hash);
	free(buf);
	return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct chan ch[FUZZ_CHANNELS];
	uint64_t budget = FUZZ_BUDGET;
	size_t pos = 0;

	memset(ch, 0, sizeof(ch));
	while (pos < size) {
		struct wire_frame f;
		size_t hlen = 0;
		const uint8_t *payload;
		int rc = wire_header_decode(data + pos, size - pos, FUZZ_MAX_PAYLOAD, &f, &hlen);

		if (rc <= 0) {
			break;
		}
		FUZZ_CHECK(rc == 1 && hlen >= 2 && hlen <= WIRE_HDR_MAX && hlen <= size - pos);
		FUZZ_CHECK(f.len <= FUZZ_MAX_PAYLOAD && f.channel <= UINT32_MAX);
		fuzz_header_roundtrip(&f, hlen, FUZZ_MAX_PAYLOAD);
		/* the payload may be incomplete: compare with what remains, never add */
		if (f.len > size - pos - hlen) {
			break;
		}
		payload = data + pos + hlen;
		if (f.type == WIRE_CONTROL) {
			on_control(payload, (size_t)f.len);
		} else {
			struct chan *c;
			uint64_t seq;

			if (f.channel >= FUZZ_CHANNELS) {
				break; /* never opened: a protocol error */
			}
			c = &ch[f.channel];
			if (f.type == WIRE_DATA || (f.flags & WIRE_FLAG_FIRST)) {
				seq = (f.flags & WIRE_FLAG_SEQ) ? f.seq : c->next_seq;
				c->next_seq = seq + 1;
			} else {
				seq = c->next_seq - 1;
			}
			if (f.type == WIRE_CHUNK && on_chunk(c, &f, seq, payload, &budget) < 0) {
				break;
			}
		}
		check_budget(ch, budget);
		pos += hlen + (size_t)f.len;
	}
	for (int i = 0; i < FUZZ_CHANNELS; i++) {
		reasm_reset(&ch[i].r, &budget);
	}
	FUZZ_CHECK(budget == FUZZ_BUDGET);
	return 0;
}
