/*
 * wire.c - varints, the connection preamble and frame headers.
 *
 * A data frame of 64 bytes on a channel below 128 costs 3 bytes of header:
 * the type byte, the channel and the length, the sequence number being
 * implicit (the previous one plus one) unless a flag says otherwise.
 */
#include <stdio.h>
#include <string.h>

#include "error.h"
#include "wire.h"

static const uint8_t magic[4] = {'T', 'E', 'R', 'N'};

size_t
wire_varint_encode(uint8_t *out, uint64_t v)
{
	size_t n = 0;

	while (v >= 0x80) {
		out[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	out[n++] = (uint8_t)v;
	return n;
}

int
wire_varint_decode(const uint8_t *p, size_t len, uint64_t *v, size_t *used)
{
	uint64_t r = 0;

	if (len > 0 && p[0] < 0x80) {
		*v = p[0];
		*used = 1;
		return 1;
	}
	for (size_t i = 0; i < WIRE_VARINT_MAX; i++) {
		if (i == len) {
			return 0;
		}
		uint64_t b = p[i];
		if (i == WIRE_VARINT_MAX - 1 && b > 1) {
			return TERN_EPROTO; /* more than 64 bits */
		}
		r |= (b & 0x7f) << (7 * i);
		if ((b & 0x80) == 0) {
			*v = r;
			*used = i + 1;
			return 1;
		}
	}
	return TERN_EPROTO;
}

void
wire_preamble_encode(uint8_t out[WIRE_PREAMBLE_LEN])
{
	memcpy(out, magic, 4);
	out[4] = TERN_PROTOCOL_VERSION;
	out[5] = out[6] = out[7] = 0;
}

int
wire_preamble_decode(const uint8_t in[WIRE_PREAMBLE_LEN], int *version)
{
	if (memcmp(in, magic, 4) != 0) {
		return TERN_EPROTO;
	}
	*version = in[4];
	if (in[4] != TERN_PROTOCOL_VERSION) {
		return TERN_EVERSION;
	}
	return 0;
}

size_t
wire_header_encode(uint8_t *out, const struct wire_frame *f)
{
	size_t n = 0;

	out[n++] = (uint8_t)(f->type | f->flags);
	if (f->type != WIRE_CONTROL) {
		n += wire_varint_encode(out + n, f->channel);
		if (f->flags & WIRE_FLAG_SEQ) {
			n += wire_varint_encode(out + n, f->seq);
		}
		if (f->flags & WIRE_FLAG_FIRST) {
			n += wire_varint_encode(out + n, f->total);
		}
		if (f->flags & WIRE_FLAG_STAMP) {
			n += wire_varint_encode(out + n, f->stamp);
		}
	}
	n += wire_varint_encode(out + n, f->len);
	return n;
}

/* Decode one varint field at *pos; 1, 0 (need more) or an error. */
static int
field(const uint8_t *p, size_t len, size_t *pos, uint64_t *v)
{
	size_t used;
	int rc = wire_varint_decode(p + *pos, len - *pos, v, &used);

	if (rc == 1) {
		*pos += used;
	}
	return rc;
}

static int
flags_valid(int type, int flags)
{
	switch (type) {
	case WIRE_DATA:
		return (flags & ~(WIRE_FLAG_SEQ | WIRE_FLAG_STAMP)) == 0;
	case WIRE_CHUNK:
		/* a message's stamp goes with its first chunk only */
		if ((flags & WIRE_FLAG_STAMP) && !(flags & WIRE_FLAG_FIRST)) {
			return 0;
		}
		return (flags &
		        ~(WIRE_FLAG_SEQ | WIRE_FLAG_FIRST | WIRE_FLAG_LAST | WIRE_FLAG_STAMP)) == 0;
	case WIRE_CONTROL:
		return flags == 0;
	default:
		return 0;
	}
}

static const char *const type_names[] = {"data", "chunk", "control"};

/* The decoder, with a sentence for its refusal when why is not NULL. */
static int
header_decode(const uint8_t *p, size_t len, uint64_t max_payload, struct wire_frame *f,
              size_t *hdr_len, char *why, size_t why_len)
{
	size_t pos = 1;
	int rc;

	if (len == 0) {
		return 0;
	}
	f->type = p[0] & WIRE_TYPE_MASK;
	f->flags = p[0] & ~WIRE_TYPE_MASK;
	f->channel = f->seq = f->total = f->stamp = 0;
	if (!flags_valid(f->type, f->flags)) {
		if (why != NULL) {
			snprintf(why, why_len, "frame type %d with flags 0x%02x", f->type,
			         f->flags);
		}
		return TERN_EPROTO;
	}
	if (f->type != WIRE_CONTROL) {
		if ((rc = field(p, len, &pos, &f->channel)) != 1) {
			goto varint;
		}
		if ((f->flags & WIRE_FLAG_SEQ) && (rc = field(p, len, &pos, &f->seq)) != 1) {
			goto varint;
		}
		if ((f->flags & WIRE_FLAG_FIRST) && (rc = field(p, len, &pos, &f->total)) != 1) {
			goto varint;
		}
		if ((f->flags & WIRE_FLAG_STAMP) && (rc = field(p, len, &pos, &f->stamp)) != 1) {
			goto varint;
		}
		if (f->channel > WIRE_CHANNEL_MAX) {
			if (why != NULL) {
				snprintf(why, why_len, "%s frame on channel %llu, above %u",
				         type_names[f->type], (unsigned long long)f->channel,
				         WIRE_CHANNEL_MAX);
			}
			return TERN_EPROTO;
		}
	}
	if ((rc = field(p, len, &pos, &f->len)) != 1) {
		goto varint;
	}
	if (f->type == WIRE_CONTROL && max_payload > WIRE_CONTROL_MAX) {
		max_payload = WIRE_CONTROL_MAX;
	}
	if (f->len > max_payload) {
		if (why != NULL) {
			snprintf(why, why_len, "%s frame of %llu bytes, above %llu%s",
			         type_names[f->type], (unsigned long long)f->len,
			         (unsigned long long)max_payload,
			         f->type == WIRE_CONTROL ? "" : " (chunk_bytes)");
		}
		return TERN_EMSGSIZE;
	}
	if (f->type == WIRE_CHUNK && (f->flags & WIRE_FLAG_FIRST) && f->total < f->len) {
		if (why != NULL) {
			snprintf(why, why_len, "a first chunk of %llu bytes of a %llu-byte message",
			         (unsigned long long)f->len, (unsigned long long)f->total);
		}
		return TERN_EPROTO;
	}
	*hdr_len = pos;
	return 1;
varint:
	if (rc < 0 && why != NULL) {
		snprintf(why, why_len, "a varint above 64 bits");
	}
	return rc;
}

int
wire_header_decode(const uint8_t *p, size_t len, uint64_t max_payload, struct wire_frame *f,
                   size_t *hdr_len)
{
	return header_decode(p, len, max_payload, f, hdr_len, NULL, 0);
}

void
wire_header_explain(const uint8_t *p, size_t len, uint64_t max_payload, char *why, size_t why_len)
{
	struct wire_frame f;
	size_t hdr_len;

	if (why_len == 0) {
		return;
	}
	snprintf(why, why_len, "a valid frame header");
	header_decode(p, len, max_payload, &f, &hdr_len, why, why_len);
}
