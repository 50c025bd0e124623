/*
 * chanid.h - a connection's send channels by id, and the ids they take.
 *
 * Ids run from 1 to a bound (the wire's 2^20), then come round again, so a
 * connection outlives any number of channels. A closed channel's id is held
 * back until the peer can no longer mention it: the peer may have sent a
 * CREDIT or a DENY for the channel before it read the CLOSE, and that must
 * not land on a new channel with the same id. The peer answers a PING after
 * everything it read before it, so its answer to a PING queued after the
 * CLOSE frees the id.
 *
 * Pure: no locks, no I/O; its owner calls it from one thread.
 */
#ifndef TERN_CHANID_H
#define TERN_CHANID_H

#include <stdint.h>

#include "idtab.h"

/* Held ids worth a PING of their own, rather than waiting for a keepalive. */
#define CHANID_HELD_PING 1024

struct chanid_held {
	uint32_t id;
	uint64_t closed_us;
};

struct chanid {
	struct idtab tab; /* the open channels, and chanid_mark for held ids */
	uint32_t max;     /* the highest id */
	uint32_t next;    /* where the search for a free id starts */
	/* closed ids, oldest first: held[head] to held[head + nheld - 1] */
	struct chanid_held *held;
	uint32_t head, nheld, cap;
};

extern char chanid_mark;

void chanid_init(struct chanid *t, uint32_t max);
void chanid_free(struct chanid *t);

/* Give p (not NULL) a free id in *id: 0, or TERN_ENOMEM (out of memory, or
 * every id is open or held back; tern_last_error() says which). */
int chanid_take(struct chanid *t, void *p, uint32_t *id);

/* The channel on id closed, its CLOSE queued before now_us: the id is held
 * back. Without memory to note it, the id is never used again. */
void chanid_close(struct chanid *t, uint32_t id, uint64_t now_us);

/* The peer answered a PING queued at ping_us: ids closed before it are free. */
void chanid_settle(struct chanid *t, uint64_t ping_us);

static inline void *
chanid_get(const struct chanid *t, uint64_t id)
{
	void *p = idtab_get(&t->tab, id);

	return p == &chanid_mark ? NULL : p;
}

#endif
