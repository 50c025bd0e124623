/*
 * ketree.h - a tree of key expressions, one chunk an edge (pure, no I/O,
 * no locks), after zenoh's keyexpr_tree.
 *
 * Values (opaque pointers) are stored under a key or key expression; a
 * visit with a key or key expression reaches every value stored under an
 * expression that intersects it, each once, walking only the branches
 * that can match: a literal chunk follows one edge (and the '*' and '**'
 * edges beside it), so finding the few subscriptions of one key among a
 * hundred thousand costs the depth of the key, not the number stored.
 * The rules are keyexpr.c's, '@' included: no wildcard matches a chunk
 * that starts with '@' (tests/ketree_test.c checks the two against each
 * other on random keys and expressions).
 *
 * A walk remembers the (node, position) pairs it has been through, so
 * expressions with many '**' cost at most nodes x chunks, never an
 * exponential search.
 *
 * Not reentrant: a visit's callback must not change the tree it walks nor
 * start another visit of it (another tree is fine).
 */
#ifndef TERN_KETREE_H
#define TERN_KETREE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "hmap.h"

struct ketree_node {
	struct ketree_node *parent;
	struct ketree_node *star, *dstar; /* the '*' and '**' children, also in kids */
	struct hmap kids;                 /* children, by chunk */
	/* its values: one is held in the node itself (vals_cap 0), more in
	 * an array; read them through ketree_vals */
	union {
		void *one;
		void **many;
	} v;
	uint32_t nvals, vals_cap;
	uint32_t walk; /* the walk that last came here */
	bool reported; /* ... and reported its values */
	bool seen_end; /* ... at the end of the query */
	uint64_t seen; /* ... at these query positions */
	uint64_t hash; /* of the chunk */
	size_t len;
	char chunk[];
};

struct ketree {
	struct ketree_node *root;
	uint32_t walk;
	size_t nodes; /* besides the root */
};

/* Store val under ke (a checked key or key expression); 0 or TERN_ENOMEM. */
int ketree_add(struct ketree *t, const char *ke, size_t len, void *val);
/* Remove val from under ke; false if it was not there. */
bool ketree_remove(struct ketree *t, const char *ke, size_t len, const void *val);
/* The node of exactly ke (its values: ketree_vals(n)[0 .. nvals)), or NULL. */
const struct ketree_node *ketree_find(const struct ketree *t, const char *ke, size_t len);

static inline void *const *
ketree_vals(const struct ketree_node *n)
{
	return n->vals_cap ? n->v.many : &n->v.one;
}
/* fn(arg, val) for every val stored under an expression intersecting q. */
void ketree_visit(struct ketree *t, const char *q, size_t len, void (*fn)(void *arg, void *val),
                  void *arg);
void ketree_free(struct ketree *t);

#endif
