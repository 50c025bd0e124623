/*
 * route.h - the subscriptions a node knows (interests), and which of its
 * peers a source's messages go to.
 *
 * A subscription is known by (origin node, sub id). Each interest keeps
 * the peers that declared it, in order of arrival; a message matching it
 * goes only toward the first (from[0]), so those links form a tree toward
 * the subscriber. The session may move a shorter way to the front
 * (route_from_first).
 *
 * Interests are found by (origin, sub id) through a hash index, and by
 * key through a key expression tree (ketree.h): what a publication's key
 * reaches costs the interests that match it, not the number of interests.
 *
 * Pure: peers and local subscribers are opaque pointers that the caller
 * owns; no locks, no I/O. The session calls it on the I/O thread.
 */
#ifndef TERN_ROUTE_H
#define TERN_ROUTE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hmap.h"
#include "ketree.h"

struct interest {
	char *origin;
	uint64_t sub_id;
	char *keyexpr;
	size_t ke_len;
	uint64_t hops;      /* from this node: 0 here, else its route's count + 1 */
	void *local;        /* this node's subscriber, or NULL */
	void **from;        /* peers that declared it; from[0] is the route toward it.
	                       Once ended: the peers yet to answer its end */
	uint8_t *from_hops; /* the hop count each of them declared (in from's block) */
	bool ended;         /* its subscription ended: found by id, matching nothing */
	int nfrom, from_cap;
	uint64_t hash; /* of (origin, sub_id), in by_id */
	struct interest *next, *prev;
};

struct route_table {
	struct interest *head; /* every interest, newest first */
	size_t n;
	struct hmap by_id;    /* by (origin, sub_id) */
	struct ketree by_key; /* by key expression */
};

struct interest *route_find(const struct route_table *t, const char *origin, size_t olen,
                            uint64_t id);
/* A new interest, linked into t; NULL without memory. */
struct interest *route_add(struct route_table *t, const char *origin, size_t olen, uint64_t id,
                           const char *ke, size_t ke_len, uint64_t hops);
/* Unlink and free. */
void route_remove(struct route_table *t, struct interest *i);
/* It ended: it matches no key from now on, but is still found by id. */
void route_end(struct route_table *t, struct interest *i);
/* Unlink only (it is found no more); free it later with route_free. */
void route_detach(struct route_table *t, struct interest *i);
void route_free(struct interest *i);
/* A peer declared it at `hops` (again: its count is updated); false
 * without memory. */
bool route_from_add(struct interest *i, void *peer, uint64_t hops);
/* Where peer is in i->from (0: i's route), or -1. */
int route_from_index(const struct interest *i, const void *peer);
/* The peer at from[k] becomes i's route (from[0]). */
void route_from_first(struct interest *i, int k);
/* The peer no longer declares it; false if it did not. */
bool route_from_remove(struct interest *i, void *peer);
/* fn(arg, i) for each interest whose expression matches key (or, for an
 * expression, meets it). fn must not change the table. */
void route_visit(struct route_table *t, const char *key, size_t key_len,
                 void (*fn)(void *arg, struct interest *i), void *arg);
/* Does a subscription routed through peer match key? */
bool route_wants(struct route_table *t, const void *peer, const char *key, size_t key_len);
void route_free_all(struct route_table *t);

#endif
