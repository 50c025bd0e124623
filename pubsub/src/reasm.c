/*
 * reasm.c - chunk reassembly with bounded allocation.
 */
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "reasm.h"

/* Forget the message in progress, keeping the spare. */
static void
clear(struct reasm *r)
{
	r->buf = NULL;
	r->total = r->filled = r->seq = 0;
	r->active = false;
}

void
reasm_reset(struct reasm *r, uint64_t *budget)
{
	if (r->active) {
		*budget += r->total;
	}
	free(r->buf);
	clear(r);
}

uint8_t *
reasm_take(struct reasm *r, uint64_t *budget)
{
	uint8_t *buf = r->buf;

	*budget += r->total;
	clear(r);
	return buf;
}

void
reasm_recycle(struct reasm *r, uint8_t *buf, uint64_t cap)
{
	if (r->spare != NULL && r->spare_cap >= cap) {
		free(buf);
		return;
	}
	free(r->spare);
	r->spare = buf;
	r->spare_cap = cap;
}

void
reasm_free(struct reasm *r, uint64_t *budget)
{
	reasm_reset(r, budget);
	free(r->spare);
	r->spare = NULL;
	r->spare_cap = 0;
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
	if (r->spare != NULL && r->spare_cap >= f->total && f->total > 0) {
		r->buf = r->spare;
		r->spare = NULL;
		r->spare_cap = 0;
	} else {
		r->buf = malloc(f->total > 0 ? f->total : 1);
	}
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
