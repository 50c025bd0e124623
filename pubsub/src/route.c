/*
 * route.c - the interest table. See route.h.
 */
#include <stdlib.h>
#include <string.h>

#include "keyexpr.h"
#include "route.h"

struct interest *
route_find(const struct route_table *t, const char *origin, size_t olen, uint64_t id)
{
	for (struct interest *i = t->head; i != NULL; i = i->next) {
		if (i->sub_id == id && strlen(i->origin) == olen &&
		    memcmp(i->origin, origin, olen) == 0) {
			return i;
		}
	}
	return NULL;
}

static void
interest_free(struct interest *i)
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
	if (i->origin == NULL || i->keyexpr == NULL) {
		interest_free(i);
		return NULL;
	}
	i->next = t->head;
	t->head = i;
	return i;
}

void
route_remove(struct route_table *t, struct interest *dead)
{
	for (struct interest **pp = &t->head; *pp != NULL; pp = &(*pp)->next) {
		if (*pp == dead) {
			*pp = dead->next;
			break;
		}
	}
	interest_free(dead);
}

bool
route_from_add(struct interest *i, void *peer)
{
	for (int k = 0; k < i->nfrom; k++) {
		if (i->from[k] == peer) {
			return true;
		}
	}
	if (i->nfrom == i->from_cap) {
		int cap = i->from_cap ? i->from_cap * 2 : 2;
		void **p = realloc(i->from, (size_t)cap * sizeof(*p));
		if (p == NULL) {
			return false;
		}
		i->from = p;
		i->from_cap = cap;
	}
	i->from[i->nfrom++] = peer;
	return true;
}

bool
route_from_remove(struct interest *i, void *peer)
{
	for (int k = 0; k < i->nfrom; k++) {
		if (i->from[k] == peer) {
			memmove(i->from + k, i->from + k + 1,
			        (size_t)(i->nfrom - k - 1) * sizeof(*i->from));
			i->nfrom--;
			return true;
		}
	}
	return false;
}

bool
route_wants(const struct route_table *t, const void *peer, const char *key, size_t key_len)
{
	for (const struct interest *i = t->head; i != NULL; i = i->next) {
		if (i->nfrom > 0 && i->from[0] == peer &&
		    tern__keyexpr_match(i->keyexpr, i->ke_len, key, key_len)) {
			return true;
		}
	}
	return false;
}

void
route_free_all(struct route_table *t)
{
	while (t->head != NULL) {
		struct interest *i = t->head;
		t->head = i->next;
		interest_free(i);
	}
}
