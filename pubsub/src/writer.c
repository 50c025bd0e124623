/*
 * writer.c - the choice between queueing for the I/O thread and writing
 * at once. See writer.h.
 */
#include "clock.h"
#include "writer.h"

#define QUIET_NS 20000 /* a gap this long since the last direct write means low load */

/*
 * Write from the publishing thread, unless another thread is writing, the
 * socket is full (the I/O thread writes when it drains: trying again here
 * for every message would be a failed system call each time), or the
 * channel's credit does not cover what waits and the receiver has been
 * told so (then the I/O thread writes when credit arrives; here each
 * message would scan the queue again for the frames that fit). Until it
 * has been told, this write is what tells it: the shortage is reported
 * the moment it begins, and the window grows a round trip sooner.
 */
static void
flush_now(struct conn *c, struct outchan *oc, bool wait_lock)
{
	size_t unsent = outchan_unsent(oc);
	size_t batch = unsent < c->batch_max ? unsent : c->batch_max;

	if (atomic_load_explicit(&c->choked, memory_order_relaxed) ||
	    (atomic_load_explicit(&oc->credit, memory_order_relaxed) < (int64_t)batch &&
	     atomic_load_explicit(&oc->blocked_sent, memory_order_relaxed))) {
		return;
	}
	if (wait_lock) {
		conn_flush(c);
	} else {
		conn_try_flush(c);
	}
}

void
writer_before_put(struct loop *l, struct conn *c, struct outchan *oc, size_t len)
{
	size_t unsent = outchan_unsent(oc);

	if (unsent == 0 || unsent + len <= c->batch_max || c->low_latency || loop_on_thread(l)) {
		return;
	}
	flush_now(c, oc, false);
}

static void
after_put_low_latency(struct loop *l, struct conn *c, struct outchan *oc)
{
	/* Written at once: by the I/O thread if it is polling (it takes it
	 * within a microsecond, and the publisher does not wait for the write),
	 * else from here. A message never waits for a batch to fill; one
	 * published while a write is under way goes out with the next write,
	 * right behind it. */
	if (!loop_on_thread(l) && loop_polling(l)) {
		conn_mark_pending(c);
		/* still polling after the flag is set: it sees the flag before
		 * it sleeps; else write it here */
		if (loop_polling(l)) {
			return;
		}
	}
	if (!loop_on_thread(l)) {
		loop_note_missed(l);
	}
	flush_now(c, oc, true);
}

void
writer_after_put(struct loop *l, struct conn *c, struct outchan *oc)
{
	uint64_t now;

	if (c->low_latency) {
		after_put_low_latency(l, c, oc);
		return;
	}
	conn_data_pending(c);
	if (loop_on_thread(l)) {
		return;
	}
	if (outchan_unsent(oc) >= c->batch_max) {
		flush_now(c, oc, false);
		return;
	}
	if (!loop_is_sleeping(l)) {
		return;
	}
	if (c->env->cfg->batch_max_delay_us > 0) {
		/* the batch is meant to wait and fill: no write from here */
		if (loop_take_sleeper(l)) {
			loop_wake(l);
		}
		return;
	}
	now = clock_ns();
	if (clock_since(now, atomic_load(&c->last_direct_ns)) > QUIET_NS && conn_try_flush(c)) {
		atomic_store(&c->last_direct_ns, now);
		return;
	}
	atomic_store(&c->last_direct_ns, now);
	if (loop_take_sleeper(l)) {
		loop_wake(l);
	}
}
