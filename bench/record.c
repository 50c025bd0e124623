/*
 * record.c - the 64-byte benchmark record, through libmpack's token API.
 */
#include <stdbool.h>

#include "record.h"

#include <math.h>
#include <mpack.h>
#include <stdio.h>
#include <string.h>

uint64_t
record_id(uint32_t sender, uint32_t seq)
{
	return ((uint64_t)sender + 1) << 32 | seq;
}

uint32_t
record_sender(uint64_t id)
{
	return (uint32_t)((id >> 32) - 1);
}

uint32_t
record_seq(uint64_t id)
{
	return (uint32_t)(id & 0xffffffffu);
}

/* "tern-bench-source-" and the sender as 15 digits: the same bytes as
 * "%015u", without a printf per record in the senders' loops. */
static void
record_source(char *out, uint32_t sender)
{
	static const char prefix[] = "tern-bench-source-";
	char *d = out + sizeof(prefix) - 1 + 15;

	memcpy(out, prefix, sizeof(prefix) - 1);
	*d = '\0';
	for (int i = 0; i < 15; i++) {
		*--d = (char)('0' + sender % 10);
		sender /= 10;
	}
}

void
record_make(record *r, uint32_t sender, uint32_t seq, uint64_t now_ns)
{
	double v = 20.0 + (double)(seq % 1000) * 0.001 + (double)(sender % 100) * 0.1;

	r->id = record_id(sender, seq);
	/* Before 1970 + 4.3 s a timestamp would shrink; no clock is there. */
	r->timestamp = now_ns < (1ull << 32) ? (1ull << 32) : now_ns;
	record_source(r->source, sender);
	r->valid = (seq & 1u) == 0;
	/* A value that a float32 holds exactly would be written in 5 bytes. */
	if ((double)(float)v == v) {
		v = nextafter(v, INFINITY);
	}
	r->value = v;
}

int
record_encode(const record *r, char *buf, size_t len)
{
	mpack_tokbuf_t tb = MPACK_TOKBUF_INITIAL_VALUE;
	mpack_token_t toks[7];
	char *p = buf;
	size_t left = len;
	size_t i;

	toks[0] = mpack_pack_array(5);
	toks[1] = mpack_pack_uint(r->id);
	toks[2] = mpack_pack_uint(r->timestamp);
	toks[3] = mpack_pack_str(RECORD_SOURCE_LEN);
	toks[4] = mpack_pack_chunk(r->source, RECORD_SOURCE_LEN);
	toks[5] = mpack_pack_boolean(r->valid);
	toks[6] = mpack_pack_float(r->value);
	for (i = 0; i < sizeof(toks) / sizeof(toks[0]); i++) {
		if (left == 0 || mpack_write(&tb, &p, &left, &toks[i]) != MPACK_OK) {
			return -1;
		}
	}
	return (int)(p - buf);
}

/* Read one token; mpack_read must never see an empty buffer. */
static int
next_token(mpack_tokbuf_t *tb, const char **p, size_t *left, mpack_token_t *tok)
{
	if (*left == 0) {
		return -1;
	}
	return mpack_read(tb, p, left, tok) == MPACK_OK ? 0 : -1;
}

int
record_decode(record *r, const char *buf, size_t len, char *err, size_t err_len)
{
	mpack_tokbuf_t tb = MPACK_TOKBUF_INITIAL_VALUE;
	mpack_token_t tok;
	const char *p = buf;
	size_t left = len;
	size_t got = 0;

	if (next_token(&tb, &p, &left, &tok) != 0 || tok.type != MPACK_TOKEN_ARRAY ||
	    tok.length != 5) {
		snprintf(err, err_len, "record at +0: not an array of 5");
		return -1;
	}
	if (next_token(&tb, &p, &left, &tok) != 0 || tok.type != MPACK_TOKEN_UINT) {
		snprintf(err, err_len, "record: id is not an unsigned integer");
		return -1;
	}
	r->id = mpack_unpack_uint(tok);
	if (next_token(&tb, &p, &left, &tok) != 0 || tok.type != MPACK_TOKEN_UINT) {
		snprintf(err, err_len, "record %llu: timestamp is not an unsigned integer",
		         (unsigned long long)r->id);
		return -1;
	}
	r->timestamp = mpack_unpack_uint(tok);
	if (next_token(&tb, &p, &left, &tok) != 0 || tok.type != MPACK_TOKEN_STR ||
	    tok.length > RECORD_SOURCE_LEN) {
		snprintf(err, err_len, "record %llu: source is not a short string",
		         (unsigned long long)r->id);
		return -1;
	}
	/* A string arrives as one or more chunks pointing into buf. */
	while (got < tok.length) {
		mpack_token_t chunk;

		if (next_token(&tb, &p, &left, &chunk) != 0 || chunk.type != MPACK_TOKEN_CHUNK ||
		    chunk.length == 0 || chunk.length > tok.length - got) {
			snprintf(err, err_len, "record %llu: source is truncated",
			         (unsigned long long)r->id);
			return -1;
		}
		memcpy(r->source + got, chunk.data.chunk_ptr, chunk.length);
		got += chunk.length;
	}
	r->source[got] = '\0';
	if (next_token(&tb, &p, &left, &tok) != 0 || tok.type != MPACK_TOKEN_BOOLEAN) {
		snprintf(err, err_len, "record %llu: valid is not a boolean",
		         (unsigned long long)r->id);
		return -1;
	}
	r->valid = mpack_unpack_boolean(tok);
	if (next_token(&tb, &p, &left, &tok) != 0 || tok.type != MPACK_TOKEN_FLOAT) {
		snprintf(err, err_len, "record %llu: value is not a float",
		         (unsigned long long)r->id);
		return -1;
	}
	r->value = mpack_unpack_float(tok);
	return (int)(p - buf);
}
