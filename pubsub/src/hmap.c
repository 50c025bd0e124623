/*
 * hmap.c - the hash index. See hmap.h.
 */
#include <stdlib.h>
#include <string.h>

#include "hmap.h"

#define CAP_MIN 8

uint64_t
hmap_hash(const void *p, size_t len, uint64_t seed)
{
	/* FNV-1a, finished with a mixer so that the low bits (the slot) vary */
	const uint8_t *b = p;
	uint64_t h = 0xcbf29ce484222325ull ^ seed;

	for (size_t i = 0; i < len; i++) {
		h = (h ^ b[i]) * 0x100000001b3ull;
	}
	return hmap_hash_u64(h);
}

void *
hmap_find(const struct hmap *m, uint64_t hash, bool (*eq)(const void *val, const void *key),
          const void *key)
{
	if (m->n == 0) {
		return NULL;
	}
	for (size_t i = hash & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
		const struct hmap_slot *s = &m->slots[i];
		if (s->val == NULL) {
			return NULL;
		}
		if (s->hash == hash && eq(s->val, key)) {
			return s->val;
		}
	}
}

static void
place(struct hmap_slot *slots, size_t cap, uint64_t hash, void *val)
{
	size_t i = hash & (cap - 1);

	while (slots[i].val != NULL) {
		i = (i + 1) & (cap - 1);
	}
	slots[i].hash = hash;
	slots[i].val = val;
}

static bool
resize(struct hmap *m, size_t cap)
{
	struct hmap_slot *slots = calloc(cap, sizeof(*slots));

	if (slots == NULL) {
		return false;
	}
	for (size_t i = 0; i < m->cap; i++) {
		if (m->slots[i].val != NULL) {
			place(slots, cap, m->slots[i].hash, m->slots[i].val);
		}
	}
	free(m->slots);
	m->slots = slots;
	m->cap = cap;
	return true;
}

bool
hmap_put(struct hmap *m, uint64_t hash, void *val)
{
	/* at most 3/4 full */
	if ((m->n + 1) * 4 > m->cap * 3 && !resize(m, m->cap ? m->cap * 2 : CAP_MIN)) {
		return false;
	}
	place(m->slots, m->cap, hash, val);
	m->n++;
	return true;
}

bool
hmap_del(struct hmap *m, uint64_t hash, const void *val)
{
	size_t mask = m->cap - 1, i, j;

	if (m->n == 0) {
		return false;
	}
	for (i = hash & mask;; i = (i + 1) & mask) {
		if (m->slots[i].val == NULL) {
			return false;
		}
		if (m->slots[i].val == val) {
			break;
		}
	}
	/* backward shift: move up every later entry of the run that may sit
	 * in the hole (its home is not cyclically within (i, j]) */
	for (j = (i + 1) & mask; m->slots[j].val != NULL; j = (j + 1) & mask) {
		size_t home = m->slots[j].hash & mask;
		bool between = i <= j ? (home > i && home <= j) : (home > i || home <= j);
		if (!between) {
			m->slots[i] = m->slots[j];
			i = j;
		}
	}
	m->slots[i].val = NULL;
	m->n--;
	if (m->n == 0) {
		hmap_free(m);
	} else if (m->cap > CAP_MIN && m->n * 8 < m->cap) {
		resize(m, m->cap / 2); /* without memory it stays as it is */
	}
	return true;
}

void
hmap_free(struct hmap *m)
{
	free(m->slots);
	m->slots = NULL;
	m->cap = m->n = 0;
}

void *
hmap_next(const struct hmap *m, size_t *pos)
{
	while (*pos < m->cap) {
		void *v = m->slots[(*pos)++].val;
		if (v != NULL) {
			return v;
		}
	}
	return NULL;
}
