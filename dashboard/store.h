/*
 * store.h - the dashboard's read-only view of the benchmark database.
 *
 * The store opens the database that `tern bench` writes with
 * SQLITE_OPEN_READONLY and answers the dashboard's questions as cJSON trees:
 * the list of runs, one run with its links and results, the trend of one cell
 * across runs, the comparison of two runs. dash_store_poll() notices what
 * another process committed (through PRAGMA data_version) and turns it into
 * push messages. Each query is one short statement (a comparison, a few in
 * one read transaction), so no read transaction outlives a call and a bench
 * writing in WAL mode is never blocked.
 *
 * A missing file is not an error: the store reports it through
 * dash_store_state() and keeps looking for it on every poll. Not thread safe: one
 * thread owns a store.
 */
#ifndef TERN_DASHBOARD_STORE_H
#define TERN_DASHBOARD_STORE_H

#include <stdint.h>

#include <cjson/cJSON.h>

enum dash_store_state {
	DASH_STORE_MISSING = 0, /* no file at the path */
	DASH_STORE_EMPTY,       /* a database without the bench's tables, or no run yet */
	DASH_STORE_READY,       /* runs to show */
	DASH_STORE_BROKEN       /* not a database, or a schema this dashboard cannot read */
};

/* One cell of the benchmark matrix, the key of a trend. */
struct dash_store_cell {
	const char *scenario;
	const char *link;
	const char *layer;
	const char *mode;
	int64_t records_per_msg;
	int64_t keys; /* stream over this many keys (tern bench --keys); 1 before schema 4 */
};

struct dash_store;

/* Opens the store for path (the file need not exist yet). NULL if out of memory. */
struct dash_store *dash_store_open(const char *path);

/* Closes the store. Accepts NULL. */
void dash_store_close(struct dash_store *st);

/* The state after the last open attempt or poll. */
enum dash_store_state dash_store_state(const struct dash_store *st);

/* The database path, and a sentence about the state (why it is missing or broken). */
const char *dash_store_path(const struct dash_store *st);
const char *dash_store_reason(const struct dash_store *st);

/*
 * The database description sent with every list of runs:
 * {"path", "state": "missing"|"empty"|"ready"|"broken", "reason"}.
 * The caller owns the result; NULL if out of memory.
 */
cJSON *dash_store_describe(const struct dash_store *st);

/*
 * Query functions. Each returns a new cJSON tree the caller owns, or NULL
 * with a reason in err (at most errlen bytes, NUL-terminated).
 */

/* An array of runs, newest first, each with counts of its results and failed cells. */
cJSON *dash_store_runs(struct dash_store *st, char *err, size_t errlen);

/*
 * {"run": {...}, "links": [...], "results": [...]}; NULL if no such run. The
 * run carries every column of its row (config and env parsed as JSON).
 */
cJSON *dash_store_run(struct dash_store *st, int64_t run_id, char *err, size_t errlen);

/* An array of points, oldest run first: the cell's result in every run that has it. */
cJSON *dash_store_trend(struct dash_store *st, const struct dash_store_cell *cell, char *err,
                        size_t errlen);

/*
 * `tern bench compare A B` as JSON (compare_report_json in bench/compare.h):
 * each cell both runs have, with its samples, Welch's p-value and verdict,
 * the environment differences and a summary, at the default threshold and
 * significance level. NULL (err set) when either run does not exist.
 */
cJSON *dash_store_compare(struct dash_store *st, int64_t a, int64_t b, char *err, size_t errlen);

/*
 * Looks for changes committed since the last poll, reopening the database
 * when the file appeared, vanished or was replaced. Appends push messages
 * (cJSON objects with a "type") to events, oldest first. Returns the number
 * appended, or a negative value if out of memory.
 */
int dash_store_poll(struct dash_store *st, cJSON *events);

#endif
