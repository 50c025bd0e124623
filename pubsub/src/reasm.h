/*
 * reasm.h - reassembly of a chunked message on one channel.
 *
 * Chunks of one message arrive in order on their channel, interleaved with
 * other channels' frames. The buffer for the whole message is allocated at
 * the first chunk, only after its announced length has been checked against
 * max_message_bytes and the connection's reassembly budget.
 */
#ifndef TERN_REASM_H
#define TERN_REASM_H

#include <stdbool.h>
#include <stdint.h>

#include "wire.h"

struct reasm {
	uint8_t *buf;
	uint64_t total;
	uint64_t filled;
	uint64_t seq;
	bool active;
	/* A buffer given back after delivery, for the channel's next large
	 * message: a stream of large messages then reuses one buffer instead of
	 * mapping (and faulting in) fresh memory for each. */
	uint8_t *spare;
	uint64_t spare_cap;
};

/*
 * Add one chunk frame. *budget is what the connection may still allocate
 * for reassembly; it is charged at the first chunk and refunded by
 * reasm_take or reasm_reset. Returns 1 when the message is complete (then
 * r->buf holds r->total bytes), 0 when more chunks are needed, or
 * TERN_EMSGSIZE / TERN_ENOMEM / TERN_EPROTO.
 */
int reasm_add(struct reasm *r, const struct wire_frame *f, uint64_t seq, const uint8_t *payload,
              uint64_t max_message, uint64_t *budget);

/* Take ownership of the completed buffer (caller frees it). */
uint8_t *reasm_take(struct reasm *r, uint64_t *budget);

/* Drop a message in progress. */
void reasm_reset(struct reasm *r, uint64_t *budget);

/* Give back a buffer of cap bytes that reasm_take returned, once its
 * message is delivered; the larger of it and the current spare is kept. */
void reasm_recycle(struct reasm *r, uint8_t *buf, uint64_t cap);

/* Drop everything, the spare included (the channel closes). */
void reasm_free(struct reasm *r, uint64_t *budget);

#endif
