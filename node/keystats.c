/*
 * keystats.c - a small open-addressing table of per-key counters.
 *
 * Keys are hashed with FNV-1a; the table never shrinks and holds at most
 * KEYSTATS_MAX_KEYS keys so a stream of ever-new keys cannot grow it without
 * bound.
 */
#include "keystats.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#define TABLE_SIZE (KEYSTATS_MAX_KEYS * 2)
#define OTHER_KEYS "(other keys)"

struct key_entry {
	char *key;
	uint64_t messages;
	uint64_t bytes;
	uint64_t dropped;
	uint64_t shown_messages; /* totals at the last print */
	uint64_t shown_bytes;
	uint64_t shown_dropped;
};

struct keystats {
	struct key_entry *table;
	size_t count;
	struct key_entry other;
};

keystats *
keystats_new(void)
{
	keystats *ks = calloc(1, sizeof(*ks));

	if (ks == NULL) {
		return NULL;
	}
	ks->table = calloc(TABLE_SIZE, sizeof(*ks->table));
	if (ks->table == NULL) {
		free(ks);
		return NULL;
	}
	return ks;
}

void
keystats_free(keystats *ks)
{
	if (ks == NULL) {
		return;
	}
	for (size_t i = 0; i < TABLE_SIZE; i++) {
		free(ks->table[i].key);
	}
	free(ks->table);
	free(ks);
}

static uint32_t
hash_key(const char *key)
{
	uint32_t h = 2166136261u;

	for (const unsigned char *p = (const unsigned char *)key; *p != '\0'; p++) {
		h ^= *p;
		h *= 16777619u;
	}
	return h;
}

static struct key_entry *
entry_for(keystats *ks, const char *key)
{
	size_t i = hash_key(key) % TABLE_SIZE;

	for (;;) {
		struct key_entry *e = &ks->table[i];
		if (e->key == NULL) {
			if (ks->count >= KEYSTATS_MAX_KEYS) {
				return &ks->other;
			}
			e->key = strdup(key);
			if (e->key == NULL) {
				return &ks->other;
			}
			ks->count++;
			return e;
		}
		if (strcmp(e->key, key) == 0) {
			return e;
		}
		i = (i + 1) % TABLE_SIZE;
	}
}

void
keystats_add(keystats *ks, const char *key, uint64_t bytes)
{
	struct key_entry *e = entry_for(ks, key);

	e->messages++;
	e->bytes += bytes;
}

void
keystats_set(keystats *ks, const char *key, uint64_t messages, uint64_t bytes, uint64_t dropped)
{
	struct key_entry *e = entry_for(ks, key);

	if (e == &ks->other) {
		return;
	}
	e->messages = messages;
	e->bytes = bytes;
	e->dropped = dropped;
}

static uint64_t
number_member(const cJSON *obj, const char *name)
{
	const cJSON *n = cJSON_GetObjectItemCaseSensitive(obj, name);

	if (cJSON_IsNumber(n) && n->valuedouble > 0) {
		return (uint64_t)n->valuedouble;
	}
	return 0;
}

/* Channels may appear under several connections: sum them per key. */
static void
collect(keystats *ks, const cJSON *node, bool *seen_any)
{
	const cJSON *child;
	const cJSON *key =
	    cJSON_IsObject(node) ? cJSON_GetObjectItemCaseSensitive(node, "key") : NULL;

	if (cJSON_IsString(key) && cJSON_GetObjectItemCaseSensitive(node, "messages") != NULL) {
		struct key_entry *e = entry_for(ks, key->valuestring);
		if (e != &ks->other) {
			e->messages += number_member(node, "messages");
			e->bytes += number_member(node, "bytes");
			e->dropped += number_member(node, "dropped");
			*seen_any = true;
		}
	}
	cJSON_ArrayForEach(child, node)
	{
		if (cJSON_IsObject(child) || cJSON_IsArray(child)) {
			collect(ks, child, seen_any);
		}
	}
}

void
keystats_from_json(keystats *ks, const char *json)
{
	cJSON *root = cJSON_Parse(json);
	bool seen_any = false;

	if (root == NULL) {
		return;
	}
	/* totals are rebuilt from scratch each time; a closed channel keeps its
	 * last totals, so rates never go negative */
	for (size_t i = 0; i < TABLE_SIZE; i++) {
		struct key_entry *e = &ks->table[i];
		if (e->key != NULL) {
			e->messages = 0;
			e->bytes = 0;
			e->dropped = 0;
		}
	}
	collect(ks, root, &seen_any);
	for (size_t i = 0; i < TABLE_SIZE; i++) {
		struct key_entry *e = &ks->table[i];
		if (e->key != NULL && e->messages < e->shown_messages) {
			e->messages = e->shown_messages;
			e->bytes = e->shown_bytes;
			e->dropped = e->shown_dropped;
		}
	}
	cJSON_Delete(root);
}

static void
print_entry(FILE *f, struct key_entry *e, const char *name, double interval)
{
	uint64_t dm = e->messages - e->shown_messages;
	uint64_t db = e->bytes - e->shown_bytes;
	uint64_t dd = e->dropped - e->shown_dropped;

	if (dm == 0 && dd == 0) {
		return;
	}
	fprintf(f, "stats key=%s msgs_per_s=%.1f MB_per_s=%.3f drops=%llu\n", name,
	        interval > 0 ? (double)dm / interval : 0,
	        interval > 0 ? (double)db / interval / 1e6 : 0, (unsigned long long)dd);
	e->shown_messages = e->messages;
	e->shown_bytes = e->bytes;
	e->shown_dropped = e->dropped;
}

void
keystats_print(keystats *ks, FILE *f, double interval)
{
	for (size_t i = 0; i < TABLE_SIZE; i++) {
		if (ks->table[i].key != NULL) {
			print_entry(f, &ks->table[i], ks->table[i].key, interval);
		}
	}
	print_entry(f, &ks->other, OTHER_KEYS, interval);
}
