/*
 * frames.h - walking the whole frames held in a ring (a channel's queue,
 * or what is kept for an absent peer). Frames in a ring were encoded by
 * this node, so a header that does not decode ends the walk.
 */
#ifndef TERN_FRAMES_H
#define TERN_FRAMES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ring.h"
#include "wire.h"

/* The frame at *off (from the ring's head), if a whole header is there:
 * its header in *f and *hlen; *off moves past the frame. */
bool frames_next(const struct ring *r, size_t *off, struct wire_frame *f, size_t *hlen);

/* Does this frame start a message (a data frame or a first chunk)? */
static inline bool
frames_starts_message(const struct wire_frame *f)
{
	return f->type == WIRE_DATA || (f->flags & WIRE_FLAG_FIRST);
}

/* Messages that start in the ring. */
uint64_t frames_messages(const struct ring *r);

#endif
