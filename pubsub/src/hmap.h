/*
 * hmap.h - an open-addressed hash index of pointers (pure, no I/O, no
 * locks).
 *
 * The map holds (hash, value) pairs and never looks inside a value: the
 * caller hashes its key (hmap_hash) and says, through `eq`, whether a
 * value found under that hash is the one it looks for. So a value is
 * indexed by whatever it embeds (a channel by its id, an interest by its
 * origin and number) without a second copy of the key. Linear probing with
 * deletion by backward shift: no tombstones, so a map that has shrunk
 * back to empty costs what an empty one does once hmap_free'd or
 * compacted by its last deletion.
 */
#ifndef TERN_HMAP_H
#define TERN_HMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct hmap_slot {
	uint64_t hash;
	void *val; /* NULL: empty */
};

struct hmap {
	struct hmap_slot *slots;
	size_t cap; /* a power of two, or 0 */
	size_t n;
};

uint64_t hmap_hash(const void *p, size_t len, uint64_t seed);
static inline uint64_t
hmap_hash_u64(uint64_t x)
{
	x ^= x >> 33;
	x *= 0xff51afd7ed558ccdull;
	x ^= x >> 33;
	x *= 0xc4ceb9fe1a85ec53ull;
	return x ^ (x >> 33);
}

/* The first value under hash that eq(val, key) accepts, or NULL. */
void *hmap_find(const struct hmap *m, uint64_t hash, bool (*eq)(const void *val, const void *key),
                const void *key);
/* Add (val must not be NULL; duplicates are the caller's business);
 * false without memory. */
bool hmap_put(struct hmap *m, uint64_t hash, void *val);
/* Remove this value (by identity) from under hash; false if absent. The
 * table shrinks as it empties, and is freed at zero. */
bool hmap_del(struct hmap *m, uint64_t hash, const void *val);
void hmap_free(struct hmap *m);

/* Every value, in no order: for (i = 0; (v = hmap_next(m, &i)) != NULL;).
 * The map must not change while this runs. */
void *hmap_next(const struct hmap *m, size_t *pos);

#endif
