/*
 * reasm.c - chunk reassembly with bounded allocation.
 */
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "reasm.h"

void
reasm_reset(struct reasm *r, uint64_t *budget)
{
	if (r->active) {
		*budget += r->total;
	}
	free(r->buf);
	memset(r, 0, sizeof(*r));
}

uint8_t *
reasm_take(struct reasm *r, uint64_t *budget)
{
	uint8_t *buf = r->buf;

	*budget += r->total;
	memset(r, 0, sizeof(*r));
	return buf;
}

static int
reasm_begin(struct reasm *r, const struct wire_frame *f, uint64_t seq, uint64_t max_message,
            uint64_t *budget)
{
	if (r->active) {
		/* a new message while one is open: the sender gave up on it */
		reasm_reset(r, budget);
	}
	if (f->total > max_message) {
		return tern__error(TERN_EMSGSIZE,
		                   "peer announced a %llu-byte message; max_message_bytes is %llu",
		                   (unsigned long long)f->total, (unsigned long long)max_message);
	}
	if (f->total > *budget) {
		return tern__error(TERN_EMSGSIZE,
		                   "peer announced a %llu-byte message beyond the connection's "
		                   "reassembly budget",
		                   (unsigned long long)f->total);
	}
	r->buf = malloc(f->total > 0 ? f->total : 1);
	if (r->buf == NULL) {
		return TERN_ENOMEM;
	}
	*budget -= f->total;
	r->total = f->total;
	r->filled = 0;
	r->seq = seq;
	r->active = true;
	return 0;
}

int
reasm_add(struct reasm *r, const struct wire_frame *f, uint64_t seq, const uint8_t *payload,
          uint64_t max_message, uint64_t *budget)
{
	int rc;

	if (f->flags & WIRE_FLAG_FIRST) {
		if ((rc = reasm_begin(r, f, seq, max_message, budget)) != 0) {
			return rc;
		}
	} else if (!r->active) {
		return tern__error(TERN_EPROTO, "chunk without a first chunk");
	}
	if (f->len > r->total - r->filled) {
		reasm_reset(r, budget);
		return tern__error(TERN_EPROTO, "chunks longer than the announced message");
	}
	memcpy(r->buf + r->filled, payload, f->len);
	r->filled += f->len;
	if (!(f->flags & WIRE_FLAG_LAST)) {
		return 0;
	}
	if (r->filled != r->total) {
		reasm_reset(r, budget);
		return tern__error(TERN_EPROTO, "last chunk before the announced length");
	}
	return 1;
}
