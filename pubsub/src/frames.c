/*
 * frames.c - walking the frames in a ring. See frames.h.
 */
#include "frames.h"

bool
frames_next(const struct ring *r, size_t *off, struct wire_frame *f, size_t *hlen)
{
	size_t used = ring_used(r);
	uint8_t hdr[WIRE_HDR_MAX];
	size_t n;

	if (*off >= used) {
		return false;
	}
	n = used - *off < sizeof(hdr) ? used - *off : sizeof(hdr);
	ring_peek(r, *off, hdr, n);
	if (wire_header_decode(hdr, n, UINT64_MAX, f, hlen) != 1) {
		return false;
	}
	*off += *hlen + (size_t)f->len;
	return true;
}

uint64_t
frames_messages(const struct ring *r)
{
	struct wire_frame f;
	size_t off = 0, hlen;
	uint64_t n = 0;

	while (frames_next(r, &off, &f, &hlen)) {
		n += frames_starts_message(&f);
	}
	return n;
}
