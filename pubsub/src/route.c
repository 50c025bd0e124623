/*
 * route.c - the interest table. See route.h.
 */
#include <stdlib.h>
#include <string.h>

#include "keyexpr.h"
#include "route.h"

struct id_key {
	const char *origin;
	size_t olen;
	uint64_t id;
};

static uint64_t
id_hash(const char *origin, size_t olen, uint64_t id)
{
	return hmap_hash(origin, olen, hmap_hash_u64(id));
}

static bool
id_eq(const void *val, const void *key)
{
	const struct interest *i = val;
	const struct id_key *k = key;

	return i->sub_id == k->id && strlen(i->origin) == k->olen &&
	       memcmp(i->origin, k->origin, k->olen) == 0;
}

struct interest *
route_find(const struct route_table *t, const char *origin, size_t olen, uint64_t id)
{
	struct id_key k = {origin, olen, id};

	return hmap_find(&t->by_id, id_hash(origin, olen, id), id_eq, &k);
}

void
route_free(struct interest *i)
{
	free(i->origin);
	free(i->keyexpr);
	free(i->from);
	free(i);
}

struct interest *
route_add(struct route_table *t, const char *origin, size_t olen, uint64_t id, const char *ke,
          size_t ke_len, uint64_t hops)
{
	struct interest *i = calloc(1, sizeof(*i));

	if (i == NULL) {
		return NULL;
	}
	i->origin = strndup(origin, olen);
	i->keyexpr = strndup(ke, ke_len);
	i->ke_len = ke_len;
	i->sub_id = id;
	i->hops = hops;
	i->hash = id_hash(origin, olen, id);
	if (i->origin == NULL || i->keyexpr == NULL || !hmap_put(&t->by_id, i->hash, i)) {
		route_free(i);
		return NULL;
	}
	if (ketree_add(&t->by_key, ke, ke_len, i) != 0) {
		hmap_del(&t->by_id, i->hash, i);
		route_free(i);
		return NULL;
	}
	i->next = t->head;
	if (t->head != NULL) {
		t->head->prev = i;
	}
	t->head = i;
	t->n++;
	return i;
}

void
route_end(struct route_table *t, struct interest *i)
{
	if (!i->ended) {
		ketree_remove(&t->by_key, i->keyexpr, i->ke_len, i);
		i->ended = true;
	}
}

void
route_detach(struct route_table *t, struct interest *i)
{
	hmap_del(&t->by_id, i->hash, i);
	if (!i->ended) {
		ketree_remove(&t->by_key, i->keyexpr, i->ke_len, i);
	}
	if (i->prev != NULL) {
		i->prev->next = i->next;
	} else {
		t->head = i->next;
	}
	if (i->next != NULL) {
		i->next->prev = i->prev;
	}
	i->next = i->prev = NULL;
	t->n--;
}

void
route_remove(struct route_table *t, struct interest *dead)
{
	route_detach(t, dead);
	route_free(dead);
}

int
route_from_index(const struct interest *i, const void *peer)
{
	for (int k = 0; k < i->nfrom; k++) {
		if (i->from[k] == peer) {
			return k;
		}
	}
	return -1;
}

bool
route_from_add(struct interest *i, void *peer, uint64_t hops)
{
	uint8_t h = hops > UINT8_MAX ? UINT8_MAX : (uint8_t)hops;
	int k = route_from_index(i, peer);

	if (k >= 0) {
		i->from_hops[k] = h;
		return true;
	}
	if (i->nfrom == i->from_cap) {
		/* one block: the peers, then their counts */
		int cap = i->from_cap ? i->from_cap * 2 : 1;
		void **p = realloc(i->from, (size_t)cap * (sizeof(*p) + 1));
		if (p == NULL) {
			return false;
		}
		memmove(p + cap, p + i->from_cap, (size_t)i->nfrom);
		i->from = p;
		i->from_hops = (uint8_t *)(p + cap);
		i->from_cap = cap;
	}
	i->from_hops[i->nfrom] = h;
	i->from[i->nfrom++] = peer;
	return true;
}

bool
route_from_remove(struct interest *i, void *peer)
{
	int k = route_from_index(i, peer);

	if (k < 0) {
		return false;
	}
	memmove(i->from + k, i->from + k + 1, (size_t)(i->nfrom - k - 1) * sizeof(*i->from));
	memmove(i->from_hops + k, i->from_hops + k + 1, (size_t)(i->nfrom - k - 1));
	i->nfrom--;
	return true;
}

void
route_from_first(struct interest *i, int k)
{
	void *peer = i->from[k];
	uint8_t h = i->from_hops[k];

	/* the others keep their order: the next route is still the next heard */
	memmove(i->from + 1, i->from, (size_t)k * sizeof(*i->from));
	memmove(i->from_hops + 1, i->from_hops, (size_t)k);
	i->from[0] = peer;
	i->from_hops[0] = h;
}

struct visit_args {
	void (*fn)(void *arg, struct interest *i);
	void *arg;
};

static void
visit_one(void *arg, void *val)
{
	struct visit_args *a = arg;

	a->fn(a->arg, val);
}

void
route_visit(struct route_table *t, const char *key, size_t key_len,
            void (*fn)(void *arg, struct interest *i), void *arg)
{
	struct visit_args a = {fn, arg};

	ketree_visit(&t->by_key, key, key_len, visit_one, &a);
}

struct wants_args {
	const void *peer;
	bool yes;
};

static void
wants_one(void *arg, struct interest *i)
{
	struct wants_args *a = arg;

	a->yes |= i->nfrom > 0 && i->from[0] == a->peer;
}

bool
route_wants(struct route_table *t, const void *peer, const char *key, size_t key_len)
{
	struct wants_args a = {peer, false};

	route_visit(t, key, key_len, wants_one, &a);
	return a.yes;
}

void
route_free_all(struct route_table *t)
{
	while (t->head != NULL) {
		struct interest *i = t->head;
		t->head = i->next;
		route_free(i);
	}
	hmap_free(&t->by_id);
	ketree_free(&t->by_key);
	t->n = 0;
}
