/*
 * scope.h - what each client link asked to be told (pure, no I/O, no
 * locks).
 *
 * A node in client mode routes nothing, so it needs only the
 * subscriptions that meet its own publishers' keys. It names them in SCOPE
 * messages, and the node it connects to keeps them here, a key expression
 * tree per link, and tells that link a subscription only if its scope
 * meets it (docs/PROTOCOL.md, "Clients"); when the client takes an
 * expression back (UNSCOPE), the session withdraws there what its scope
 * no longer meets, so a link is told exactly what its scope meets. Past
 * SCOPE_MAX expressions a link's scope becomes everything, as if the link
 * were a peer's, for the rest of its life, so a client cannot make its
 * router hold an unbounded table for it.
 *
 * Links are opaque pointers the caller owns. The session calls this on
 * the I/O thread.
 */
#ifndef TERN_SCOPE_H
#define TERN_SCOPE_H

#include <stdbool.h>
#include <stddef.h>

#include "hmap.h"

#define SCOPE_MAX 16384

struct scope_table {
	struct hmap by_link;
};

/* The link asked for exactly ke already (or for everything). */
bool scope_has(const struct scope_table *t, const void *link, const char *ke, size_t len);
/* Does the link's scope meet ke (a key or key expression)? */
bool scope_meets(const struct scope_table *t, const void *link, const char *ke, size_t len);
/* Adding one more expression would make the link's scope everything. */
bool scope_full(const struct scope_table *t, const void *link);
/* Add ke (a checked key expression) to the link's scope, or make it
 * everything if it is full; 0 or TERN_ENOMEM. */
int scope_add(struct scope_table *t, const void *link, const char *ke, size_t len);
/* Take ke out of the link's scope: false if it was not in it, or if the
 * scope is everything (it stays so). A scope emptied is freed. */
bool scope_remove(struct scope_table *t, const void *link, const char *ke, size_t len);
/* The link is gone. */
void scope_forget(struct scope_table *t, const void *link);
void scope_free_all(struct scope_table *t);

#endif
