/*
 * writer.h - who writes a frame once it is queued: the publishing thread
 * itself, or the I/O thread, and when.
 *
 *  - Low-latency connections: a polling I/O thread takes the frame at once,
 *    else the publishing thread writes it before returning.
 *  - Batched connections: a full batch is written by the publishing
 *    thread, as a plain TCP sender would; a partial one is left to the I/O
 *    thread, which is either awake (and takes it once the publisher pauses)
 *    or asleep; an asleep thread is woken, except that a publication after
 *    a quiet spell is written directly, so batching adds no latency at low
 *    load.
 *
 * Called by the producer of the channel's ring, on any thread.
 */
#ifndef TERN_WRITER_H
#define TERN_WRITER_H

#include <stddef.h>

#include "conn.h"
#include "loop.h"
#include "outchan.h"

/* A frame of len bytes is about to be queued on oc: a batch that it would
 * overflow is written first, so batches end on frame boundaries. */
void writer_before_put(struct loop *l, struct conn *c, struct outchan *oc, size_t len);
/* A frame was queued on oc: see that it gets written. */
void writer_after_put(struct loop *l, struct conn *c, struct outchan *oc);

#endif
