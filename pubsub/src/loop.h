/*
 * loop.h - a node's I/O thread: the epoll loop, listening, dialing with
 * exponential backoff, the connections' lives, and calls from API threads.
 *
 * The loop flushes every connection with queued data, then polls. After
 * traffic it keeps polling without sleeping for a short while, so a burst
 * of publications is batched by this thread without a wake-up per message;
 * only when idle does it sleep in epoll_wait, and publishers wake it
 * through an eventfd.
 *
 * Threads: everything here belongs to the I/O thread, except
 *  - loop_call, loop_run, loop_wake, loop_wait_peers, loop_close and the
 *    flags `sleeping` and `spinning`, which other threads use;
 *  - `lock` guards `calls` and `ready_peers`.
 * The I/O thread holds `run_lock` while it works, and lets go of it only
 * while it waits for events or spins: a loop_run caller that holds it has
 * the I/O thread's state to itself, and what "I/O thread" means below and
 * in the modules above is "the I/O thread, or a loop_run function".
 * The upward calls (struct loop_ops) run on the I/O thread with run_lock
 * held and no other lock of this module.
 */
#ifndef TERN_LOOP_H
#define TERN_LOOP_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "tern/tern.h"

#include "conn.h"
#include "endpoint.h"
#include "log.h"

struct loop_ops {
	/* A connection finished its handshake. */
	void (*ready)(void *arg, struct conn *c);
	/* The peer sent SYNC (see conn_ops). */
	void (*synced)(void *arg, struct conn *c);
	/* Routing control messages of a connection (see conn_ops). */
	int (*control)(void *arg, struct conn *c, const struct ctl_msg *m);
	/* A connection died: forget it; its channels close. */
	void (*gone)(void *arg, struct conn *c);
	/* Every 10 ms or so while anything is under way. True while the
	 * session has timed work of its own (kept frames to expire, deferred
	 * route updates): then ticks go on even when every connection is quiet. */
	bool (*tick)(void *arg, uint64_t now_ms);
	/* Once per round, after events were handled: release what was held
	 * across a read; do deferred work. True if there was work. */
	bool (*round)(void *arg);
};

struct loop;

int loop_open(struct loop **out, const tern_config *cfg, const struct logger *log,
              uint64_t window_init, uint64_t window_max, const struct loop_ops *ops, void *arg);
/* Start the I/O thread. */
int loop_start(struct loop *l);
/* Flush what is queued (bounded by publish_timeout_ms), say goodbye to
 * each peer, stop the thread and free every connection. */
void loop_close(struct loop *l);

/* Run fn on the I/O thread and return its result (at once when called
 * there). */
int loop_call(struct loop *l, int (*fn)(void *arg), void *arg);
/* Run fn on the calling thread while the I/O thread waits (run_lock), and
 * wake it if it sleeps: for the calls that come in runs (declarations),
 * each of which would otherwise wait for that thread to be scheduled. fn
 * must not depend on running on the I/O thread itself (loop_on_thread is
 * false in it). */
int loop_run(struct loop *l, int (*fn)(void *arg), void *arg);
void loop_wake(struct loop *l);
bool loop_on_thread(const struct loop *l);
/* The I/O thread polls without sleeping: it sees queued data at once. */
bool loop_polling(const struct loop *l);
/* A publisher wrote a message itself because the I/O thread was not
 * polling: a polling thread would have taken it (see SPIN_NS in loop.c). */
void loop_note_missed(struct loop *l);
/* The I/O thread sleeps: true for the one caller that takes the duty to
 * wake it (or to write itself). */
bool loop_take_sleeper(struct loop *l);
bool loop_is_sleeping(const struct loop *l);
/* The node said goodbye (I/O thread): broken connections are not expected
 * back. */
bool loop_closing(const struct loop *l);

int loop_listen(struct loop *l, const char *endpoint, char *bound, size_t bound_len);
int loop_connect(struct loop *l, const char *endpoint);
int loop_wait_peers(struct loop *l, int n, int timeout_ms);
int loop_ready_peers(struct loop *l);

/* The connections, I/O thread only: first with prev NULL. */
struct conn *loop_next_conn(struct loop *l, struct conn *prev);
/* Write totals of the connections, closed ones included (I/O thread). */
void loop_write_totals(struct loop *l, tern_stats *st);

#endif
