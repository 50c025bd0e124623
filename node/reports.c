/*
 * reports.c - the inbox the I/O thread fills and the table of each node's
 * latest report that the main thread reads.
 *
 * Both are arrays searched linearly: a network has tens of nodes, and the
 * table is looked at once a second. Each holds at most REPORTS_MAX_NODES
 * nodes, so a stream of ever-new ids cannot grow memory without bound.
 */
#include "reports.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <tern/tern.h>

#define KEY_PREFIX "@tern/"
#define KEY_SUFFIX "/stats"

struct inbox_item {
	char *id;
	char *text;
	size_t len;
	double heard;
};

struct reports {
	pthread_mutex_t lock; /* guards the inbox only */
	struct inbox_item *inbox;
	size_t inbox_count;
	struct inbox_item *spare; /* main thread: the inbox taken last time */

	report *table; /* main thread only, sorted by id */
	size_t count;
	unsigned long rejected;
};

reports *
reports_new(void)
{
	reports *rs = calloc(1, sizeof(*rs));

	if (rs == NULL) {
		return NULL;
	}
	rs->inbox = calloc(REPORTS_MAX_NODES, sizeof(*rs->inbox));
	rs->spare = calloc(REPORTS_MAX_NODES, sizeof(*rs->spare));
	rs->table = calloc(REPORTS_MAX_NODES, sizeof(*rs->table));
	if (rs->inbox == NULL || rs->spare == NULL || rs->table == NULL ||
	    pthread_mutex_init(&rs->lock, NULL) != 0) {
		free(rs->inbox);
		free(rs->spare);
		free(rs->table);
		free(rs);
		return NULL;
	}
	return rs;
}

static void
report_clear(report *r)
{
	free(r->id);
	free(r->text);
	cJSON_Delete(r->json);
	memset(r, 0, sizeof(*r));
}

void
reports_free(reports *rs)
{
	if (rs == NULL) {
		return;
	}
	for (size_t i = 0; i < rs->inbox_count; i++) {
		free(rs->inbox[i].id);
		free(rs->inbox[i].text);
	}
	for (size_t i = 0; i < rs->count; i++) {
		report_clear(&rs->table[i]);
	}
	pthread_mutex_destroy(&rs->lock);
	free(rs->inbox);
	free(rs->spare);
	free(rs->table);
	free(rs);
}

/* The ID of "@tern/ID/stats" (malloc'd), or NULL for any other key. */
static char *
key_node_id(const char *key)
{
	size_t n = strlen(key);
	size_t pre = strlen(KEY_PREFIX);
	size_t suf = strlen(KEY_SUFFIX);
	char *id;

	if (n <= pre + suf || strncmp(key, KEY_PREFIX, pre) != 0 ||
	    strcmp(key + n - suf, KEY_SUFFIX) != 0) {
		return NULL;
	}
	n -= pre + suf;
	if (memchr(key + pre, '/', n) != NULL) {
		return NULL;
	}
	id = malloc(n + 1);
	if (id != NULL) {
		memcpy(id, key + pre, n);
		id[n] = '\0';
	}
	return id;
}

int
reports_put(reports *rs, const char *key, const void *payload, size_t len, double now)
{
	char *id = key_node_id(key);
	char *text;
	size_t i;

	if (id == NULL) {
		return 0; /* another @tern key (or no memory for the id): nothing to keep */
	}
	text = malloc(len + 1);
	if (text == NULL) {
		free(id);
		return TERN_ENOMEM;
	}
	memcpy(text, payload, len);
	text[len] = '\0';

	pthread_mutex_lock(&rs->lock);
	for (i = 0; i < rs->inbox_count; i++) {
		if (strcmp(rs->inbox[i].id, id) == 0) {
			break;
		}
	}
	if (i == rs->inbox_count && i < REPORTS_MAX_NODES) {
		rs->inbox[i].id = id;
		rs->inbox[i].text = NULL;
		rs->inbox_count++;
		id = NULL;
	}
	if (i < rs->inbox_count) {
		free(rs->inbox[i].text);
		rs->inbox[i].text = text;
		rs->inbox[i].len = len;
		rs->inbox[i].heard = now;
		text = NULL;
	}
	pthread_mutex_unlock(&rs->lock);
	free(id);
	free(text);
	return 0;
}

/* Parse text: one JSON object (nothing after it) with a string "node". */
static cJSON *
parse_report(const char *text, size_t len)
{
	const char *end = NULL;
	cJSON *json = cJSON_ParseWithLengthOpts(text, len, &end, false);

	if (json == NULL) {
		return NULL;
	}
	while (end != NULL && end < text + len &&
	       (*end == ' ' || *end == '\t' || *end == '\r' || *end == '\n')) {
		end++;
	}
	if (end != text + len || !cJSON_IsObject(json) ||
	    !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(json, "node"))) {
		cJSON_Delete(json);
		return NULL;
	}
	return json;
}

static double
report_interval(const cJSON *json)
{
	const cJSON *ms = cJSON_GetObjectItemCaseSensitive(json, "interval_ms");

	if (cJSON_IsNumber(ms) && ms->valuedouble > 0) {
		return ms->valuedouble / 1000.0;
	}
	return 1.0; /* the default interval */
}

/* The index of id in the table, or where it would go (*found false). */
static size_t
table_find(const reports *rs, const char *id, bool *found)
{
	size_t lo = 0;
	size_t hi = rs->count;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(rs->table[mid].id, id);
		if (c == 0) {
			*found = true;
			return mid;
		}
		if (c < 0) {
			lo = mid + 1;
		} else {
			hi = mid;
		}
	}
	*found = false;
	return lo;
}

/* Keep item's report in the table; takes item's strings either way. */
static void
table_put(reports *rs, struct inbox_item *item)
{
	cJSON *json = parse_report(item->text, item->len);
	bool found;
	size_t at;
	report *r;

	if (json == NULL) {
		rs->rejected++;
		free(item->id);
		free(item->text);
		return;
	}
	at = table_find(rs, item->id, &found);
	if (!found) {
		if (rs->count == REPORTS_MAX_NODES) {
			cJSON_Delete(json);
			free(item->id);
			free(item->text);
			return;
		}
		memmove(&rs->table[at + 1], &rs->table[at], (rs->count - at) * sizeof(*rs->table));
		memset(&rs->table[at], 0, sizeof(*rs->table));
		rs->count++;
	}
	r = &rs->table[at];
	report_clear(r);
	r->id = item->id;
	r->text = item->text;
	r->len = item->len;
	r->json = json;
	r->heard = item->heard;
	r->interval = report_interval(json);
}

void
reports_update(reports *rs, double now)
{
	struct inbox_item *taken;
	size_t n;
	size_t kept = 0;

	/* swap the inbox for the empty spare, then parse without the lock */
	pthread_mutex_lock(&rs->lock);
	taken = rs->inbox;
	n = rs->inbox_count;
	rs->inbox = rs->spare;
	rs->inbox_count = 0;
	pthread_mutex_unlock(&rs->lock);
	for (size_t i = 0; i < n; i++) {
		table_put(rs, &taken[i]);
	}
	memset(taken, 0, n * sizeof(*taken));
	rs->spare = taken;
	for (size_t i = 0; i < rs->count; i++) {
		report *r = &rs->table[i];
		if (now - r->heard > REPORTS_SILENT_INTERVALS * r->interval) {
			report_clear(r);
			continue;
		}
		if (kept != i) {
			rs->table[kept] = *r;
			memset(r, 0, sizeof(*r));
		}
		kept++;
	}
	rs->count = kept;
}

size_t
reports_count(const reports *rs)
{
	return rs->count;
}

const report *
reports_at(const reports *rs, size_t i)
{
	return i < rs->count ? &rs->table[i] : NULL;
}

double
reports_max_interval(const reports *rs)
{
	double max = 0;

	for (size_t i = 0; i < rs->count; i++) {
		if (rs->table[i].interval > max) {
			max = rs->table[i].interval;
		}
	}
	return max;
}

unsigned long
reports_rejected(const reports *rs)
{
	return rs->rejected;
}
