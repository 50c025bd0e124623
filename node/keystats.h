/*
 * keystats.h - per-key counters for `--stats`: messages/s, MB/s and drops
 * for each key once a second. `tern sub` counts what it receives;
 * `tern node` copies the per-channel totals from the node's stats JSON.
 * Used from one thread only.
 */
#ifndef TERN_NODE_KEYSTATS_H
#define TERN_NODE_KEYSTATS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* Past this many distinct keys the rest are counted under "(other keys)". */
#define KEYSTATS_MAX_KEYS 4096

typedef struct keystats keystats;

keystats *keystats_new(void);
void keystats_free(keystats *ks);

/* One more message of bytes on key. */
void keystats_add(keystats *ks, const char *key, uint64_t bytes);

/* Totals since start for key (node side). */
void keystats_set(keystats *ks, const char *key, uint64_t messages, uint64_t bytes,
                  uint64_t dropped);

/* Copy per-channel totals out of a tern_node_stats_json text: every object
 * with a string "key" and numeric "messages"/"bytes"/"dropped" members. */
void keystats_from_json(keystats *ks, const char *json);

/* One line per key that moved since the last print:
 * "stats key=K msgs_per_s=X MB_per_s=Y drops=D", rates over interval. */
void keystats_print(keystats *ks, FILE *f, double interval);

#endif
