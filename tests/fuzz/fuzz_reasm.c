/*
 * fuzz_reasm.c - chunk reassembly driven by a list of operations.
 *
 * Input: one byte choosing max_message_bytes (low nibble) and the budget
 * (high nibble), then operations until the input ends:
 *   op byte: bits 0-1 channel, 0x10 FIRST, 0x20 LAST, 0x40 drop the
 *            channel's message (reasm_reset) instead of adding a chunk;
 *   FIRST:   varint total;
 *   chunk:   varint len, then len payload bytes.
 * Totals and lengths come straight from the input, up to UINT64_MAX, and
 * are not first filtered by wire_header_decode(): reassembly must refuse
 * them on its own, before allocating. The budget never exceeds 1 MiB, so
 * an unchecked allocation would show as a budget broken, not as a fault.
 *
 * Properties: errors leave the channel empty; the budget plus the open
 * messages is always the starting budget; a completed message is exactly
 * its chunks' bytes and is announced with its first chunk's number.
 */
#include <stdbool.h>
#include <string.h>

#include "fuzz.h"
#include "reasm.h"
#include "tern/tern.h"
#include "wire.h"

#define CHANNELS 4

static const uint64_t max_messages[16] = {
    0,     1,     2,     255,      256,        4095,           4096,       4097,
    65535, 65536, 65537, 1u << 20, UINT32_MAX, UINT64_MAX - 1, UINT64_MAX, 100};
static const uint64_t budgets[16] = {0,     1,     2,     255,      256,      4095,     4096, 4097,
                                     65535, 65536, 65537, 1u << 20, 1u << 20, 1u << 20, 300,  100};

struct chan {
	struct reasm r;
	uint64_t hash;
	uint64_t first_seq;
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
check(const struct chan *ch, uint64_t budget, uint64_t start)
{
	uint64_t held = 0;

	for (int i = 0; i < CHANNELS; i++) {
		const struct reasm *r = &ch[i].r;
		if (r->active) {
			FUZZ_CHECK(r->buf != NULL && r->filled <= r->total);
			held += r->total;
		} else {
			FUZZ_CHECK(r->buf == NULL && r->total == 0 && r->filled == 0);
		}
	}
	FUZZ_CHECK(held <= start && budget == start - held);
}

/* Read a varint at *pos; false at the end of the input or on a bad one. */
static bool
varint(const uint8_t *data, size_t size, size_t *pos, uint64_t *v)
{
	size_t used = 0;

	if (wire_varint_decode(data + *pos, size - *pos, v, &used) != 1) {
		return false;
	}
	*pos += used;
	return true;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct chan ch[CHANNELS];
	uint64_t max_message, start, budget;
	uint64_t seq = 0;
	size_t pos = 1;

	if (size == 0) {
		return 0;
	}
	memset(ch, 0, sizeof(ch));
	max_message = max_messages[data[0] & 0x0f];
	start = budget = budgets[data[0] >> 4];
	while (pos < size) {
		uint8_t op = data[pos++];
		struct chan *c = &ch[op & 3];
		struct wire_frame f = {.type = WIRE_CHUNK,
		                       .flags = op & (WIRE_FLAG_FIRST | WIRE_FLAG_LAST)};
		int rc;

		if (op & 0x40) {
			reasm_reset(&c->r, &budget);
			check(ch, budget, start);
			continue;
		}
		if ((f.flags & WIRE_FLAG_FIRST) && !varint(data, size, &pos, &f.total)) {
			break;
		}
		if (!varint(data, size, &pos, &f.len) || f.len > size - pos) {
			break;
		}
		seq++;
		rc = reasm_add(&c->r, &f, seq, data + pos, max_message, &budget);
		if (rc < 0) {
			FUZZ_CHECK(!c->r.active);
			if (f.flags & WIRE_FLAG_FIRST) {
				/* refused at the first chunk: the total was out of bounds */
				FUZZ_CHECK(rc != TERN_EMSGSIZE || f.total > max_message ||
				           f.total > budget);
			}
		} else {
			if (f.flags & WIRE_FLAG_FIRST) {
				FUZZ_CHECK(f.total <= max_message);
				c->hash = 0xcbf29ce484222325ull;
				c->first_seq = seq;
			}
			c->hash = fnv(c->hash, data + pos, f.len);
		}
		if (rc == 1) {
			uint64_t total = c->r.total;
			uint8_t *buf;

			FUZZ_CHECK(c->r.filled == total && c->r.seq == c->first_seq);
			FUZZ_CHECK(f.flags & WIRE_FLAG_LAST);
			buf = reasm_take(&c->r, &budget);
			FUZZ_CHECK(buf != NULL);
			FUZZ_CHECK(fnv(0xcbf29ce484222325ull, buf, total) == c->hash);
			free(buf);
		}
		check(ch, budget, start);
		pos += (size_t)f.len;
	}
	for (int i = 0; i < CHANNELS; i++) {
		reasm_reset(&ch[i].r, &budget);
	}
	FUZZ_CHECK(budget == start);
	return 0;
}
