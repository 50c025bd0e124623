/*
 * scope.c - the scopes of client links. See scope.h.
 */
#include <stdint.h>
#include <stdlib.h>

#include "error.h"
#include "ketree.h"
#include "scope.h"

struct scope {
	const void *link;
	uint64_t hash;
	struct ketree exprs; /* each value is the scope itself */
	uint32_t n;
	bool all;
};

static uint64_t
link_hash(const void *link)
{
	return hmap_hash_u64((uint64_t)(uintptr_t)link);
}

static bool
link_eq(const void *val, const void *key)
{
	return ((const struct scope *)val)->link == key;
}

static struct scope *
find(const struct scope_table *t, const void *link)
{
	return hmap_find(&t->by_link, link_hash(link), link_eq, link);
}

/* ke itself is in the scope (a node of the tree may be only on the way to
 * a longer expression) */
static bool
holds(const struct scope *sc, const char *ke, size_t len)
{
	const struct ketree_node *n = ketree_find(&sc->exprs, ke, len);

	return sc->all || (n != NULL && n->nvals > 0);
}

bool
scope_has(const struct scope_table *t, const void *link, const char *ke, size_t len)
{
	const struct scope *sc = find(t, link);

	return sc != NULL && holds(sc, ke, len);
}

static void
met(void *arg, void *val)
{
	(void)val;
	*(bool *)arg = true;
}

bool
scope_meets(const struct scope_table *t, const void *link, const char *ke, size_t len)
{
	struct scope *sc = find(t, link);
	bool yes = false;

	if (sc == NULL || sc->all) {
		return sc != NULL;
	}
	ketree_visit(&sc->exprs, ke, len, met, &yes);
	return yes;
}

bool
scope_full(const struct scope_table *t, const void *link)
{
	const struct scope *sc = find(t, link);

	return sc != NULL && (sc->all || sc->n >= SCOPE_MAX);
}

static void
scope_free(struct scope *sc)
{
	ketree_free(&sc->exprs);
	free(sc);
}

int
scope_add(struct scope_table *t, const void *link, const char *ke, size_t len)
{
	struct scope *sc = find(t, link);

	if (sc == NULL) {
		if ((sc = calloc(1, sizeof(*sc))) == NULL) {
			return TERN_ENOMEM;
		}
		sc->link = link;
		sc->hash = link_hash(link);
		if (!hmap_put(&t->by_link, sc->hash, sc)) {
			free(sc);
			return TERN_ENOMEM;
		}
	}
	if (holds(sc, ke, len)) {
		return 0;
	}
	if (sc->n >= SCOPE_MAX) {
		/* everything from now on: the expressions are no longer needed */
		ketree_free(&sc->exprs);
		sc->all = true;
		return 0;
	}
	if (ketree_add(&sc->exprs, ke, len, sc) != 0) {
		return TERN_ENOMEM;
	}
	sc->n++;
	return 0;
}

bool
scope_remove(struct scope_table *t, const void *link, const char *ke, size_t len)
{
	struct scope *sc = find(t, link);

	if (sc == NULL || sc->all || !ketree_remove(&sc->exprs, ke, len, sc)) {
		return false;
	}
	if (--sc->n == 0) {
		hmap_del(&t->by_link, sc->hash, sc);
		scope_free(sc);
	}
	return true;
}

void
scope_forget(struct scope_table *t, const void *link)
{
	struct scope *sc = find(t, link);

	if (sc != NULL) {
		hmap_del(&t->by_link, sc->hash, sc);
		scope_free(sc);
	}
}

void
scope_free_all(struct scope_table *t)
{
	size_t pos = 0;
	struct scope *sc;

	while ((sc = hmap_next(&t->by_link, &pos)) != NULL) {
		scope_free(sc);
	}
	hmap_free(&t->by_link);
}
