/*
 * wire.h - the byte layout of tern's wire protocol v1 (docs/PROTOCOL.md).
 *
 * Pure encoders and decoders over (pointer, length): no I/O, no allocation.
 * A decoder never reads past the length it is given; it returns 0 when it
 * needs more bytes and a negative TERN_E... code for bytes that can never
 * become a valid frame.
 */
#ifndef TERN_WIRE_H
#define TERN_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define WIRE_PREAMBLE_LEN 8
#define WIRE_VARINT_MAX   10
#define WIRE_HDR_MAX      (1 + 5 * WIRE_VARINT_MAX)

/*
 * Bounds on a frame header's fields (docs/PROTOCOL.md, "Bounds"); the
 * decoder refuses a header beyond them. Channel ids index a connection's
 * table of incoming channels, so they stay small; a control message never
 * needs more than 4096 bytes (control.h), so a larger one is never buffered.
 */
#define WIRE_CHANNEL_MAX 1048576u /* 2^20 */
#define WIRE_CONTROL_MAX 4096u

enum wire_type { WIRE_DATA = 0, WIRE_CHUNK = 1, WIRE_CONTROL = 2 };

#define WIRE_TYPE_MASK  0x07
#define WIRE_FLAG_SEQ   0x08 /* an explicit sequence number follows the channel */
#define WIRE_FLAG_FIRST 0x10 /* chunk: the first of a message; total length follows */
#define WIRE_FLAG_LAST  0x20 /* chunk: the last of a message */
/* data, or a first chunk: the message's publish time follows (microseconds
 * since the Unix epoch on the sender's clock), for latency telemetry */
#define WIRE_FLAG_STAMP 0x40

struct wire_frame {
	int type;
	int flags;
	uint64_t channel; /* data and chunk frames */
	uint64_t seq;     /* with WIRE_FLAG_SEQ */
	uint64_t total;   /* first chunk: the whole message's length */
	uint64_t stamp;   /* with WIRE_FLAG_STAMP */
	uint64_t len;     /* payload bytes after the header */
};

size_t wire_varint_encode(uint8_t *out, uint64_t v);
/* 1 + bytes used; 0 if more bytes are needed; TERN_EPROTO if overlong. */
int wire_varint_decode(const uint8_t *p, size_t len, uint64_t *v, size_t *used);

void wire_preamble_encode(uint8_t out[WIRE_PREAMBLE_LEN]);
/* 0, TERN_EPROTO (not tern), or TERN_EVERSION (*version says which). */
int wire_preamble_decode(const uint8_t in[WIRE_PREAMBLE_LEN], int *version);

/* Returns the header length (at most WIRE_HDR_MAX). */
size_t wire_header_encode(uint8_t *out, const struct wire_frame *f);

/*
 * Decode a frame header at p. Returns 1 and sets *hdr_len when a whole
 * header is there, 0 when more bytes are needed, or TERN_EPROTO /
 * TERN_EMSGSIZE (payload above max_payload, or a control payload above
 * WIRE_CONTROL_MAX). The payload itself may still be incomplete: the caller
 * compares f->len with what remains.
 */
int wire_header_decode(const uint8_t *p, size_t len, uint64_t max_payload, struct wire_frame *f,
                       size_t *hdr_len);

/* For a header wire_header_decode refused: a sentence naming the field and
 * its bound ("control frame of 5000 bytes, above 4096"), written to why. */
void wire_header_explain(const uint8_t *p, size_t len, uint64_t max_payload, char *why,
                         size_t why_len);

/*
 * A varint of one or two bytes at p[*pos] (p holds at least *pos + 2
 * bytes), as wire_varint_decode reads it: false for a longer one.
 */
static inline bool
wire_varint2(const uint8_t *p, size_t *pos, uint64_t *v)
{
	uint64_t b0 = p[*pos];

	if (b0 < 0x80) {
		*v = b0;
		*pos += 1;
		return true;
	}
	if (p[*pos + 1] < 0x80) {
		*v = (b0 & 0x7f) | ((uint64_t)p[*pos + 1] << 7);
		*pos += 2;
		return true;
	}
	return false;
}

/*
 * The same, with the common case inline: a data frame without flags on a
 * channel below 16,384 with a payload below 16 KiB, the header of nearly
 * every small message (many keys: channel numbers past 127 take a second
 * byte). Anything else goes to wire_header_decode.
 */
static inline int
wire_header_decode_fast(const uint8_t *p, size_t len, uint64_t max_payload, struct wire_frame *f,
                        size_t *hdr_len)
{
	size_t h = 1;
	uint64_t ch, n;

	/* five bytes: the longest header read here, whatever it turns out to be */
	if (len >= 5 && p[0] == WIRE_DATA && wire_varint2(p, &h, &ch) && wire_varint2(p, &h, &n) &&
	    n <= max_payload) {
		f->type = WIRE_DATA;
		f->flags = 0;
		f->channel = ch;
		f->seq = f->total = f->stamp = 0;
		f->len = n;
		*hdr_len = h;
		return 1;
	}
	return wire_header_decode(p, len, max_payload, f, hdr_len);
}

#endif
