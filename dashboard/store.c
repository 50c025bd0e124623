/*
 * store.c - read-only queries over the benchmark database, and change polling.
 *
 * Rows become JSON generically (every column by its SQLite type), so columns
 * the bench adds later reach the browser without a change here. Two schema
 * generations are read: user_version 1 (the minimum schema) and 2 (runs.status,
 * results.failed and results.error); for 1, status and failed are derived
 * from finished_at and lost.
 *
 * The Compare view's report is bench/compare.c's, run on this read-only
 * handle, so the dashboard's verdicts are those of `tern bench compare`.
 *
 * Polling keeps one connection open with no transaction between calls: a
 * reader without a transaction costs a WAL writer nothing, and data_version
 * only counts other connections' commits on a connection that stays open.
 */
#include "store.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

#include "bench/compare.h"

/* A run as the poller last saw it, to notice new and finished runs. */
struct run_snapshot {
	int64_t id;
	char status[16];
	bool finished;
};

struct dash_store {
	char *path;
	sqlite3 *db;
	enum dash_store_state state;
	char reason[256];
	dev_t dev;
	ino_t ino;
	int64_t data_version;
	bool has_status; /* schema 2: runs.status, results.failed */
	bool has_pid;    /* schema 3: runs.pid, the bench's process on runs.host */
	bool has_keys;   /* schema 4: results.keys (tern bench --keys) */
	char host[256];  /* this machine's name, as the bench records it */
	struct run_snapshot *runs;
	size_t nruns;
	int64_t last_result_id;
	bool more_results; /* the last poll stopped at its row limit */
};

/* How many result rows one poll pushes; the rest follow on the next poll. */
#define POLL_RESULT_LIMIT 2000
/* A reader waits at most this long for a writer's WAL recovery or checkpoint. */
#define BUSY_TIMEOUT_MS 200
/* The longest runs list sent, newest first. */
#define RUNS_LIMIT 2000

static void
set_err(char *err, size_t errlen, const char *what, sqlite3 *db)
{
	if (err != NULL && errlen > 0) {
		snprintf(err, errlen, "%s: %s", what,
		         db != NULL ? sqlite3_errmsg(db) : "no database");
	}
}

/*
 * A run's status as the page shows it. On schema 3 a `running` run whose
 * bench is gone is `interrupted` (run_status below): the database still says
 * `running`, since the dashboard never writes and the bench that would have
 * ended the run was killed; the next `tern bench` writes `interrupted`.
 */
static const char *
status_expr(const struct dash_store *st)
{
	if (st->has_pid) {
		return "tern_run_status(r.status, r.host, r.pid)";
	}
	return st->has_status
	           ? "r.status"
	           : "CASE WHEN r.finished_at IS NULL THEN 'running' ELSE 'finished' END";
}

/*
 * SQL function tern_run_status(status, host, pid): `interrupted` for a
 * `running` run recorded on this host whose pid no process has (kill(pid, 0)
 * fails with ESRCH; EPERM means a process of another user has it), else
 * status. A run of another host is taken at its word: its pid means nothing
 * here. A pid reused since by another process keeps the run `running`.
 */
static void
run_status(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
	const struct dash_store *st = sqlite3_user_data(ctx);
	const unsigned char *status = sqlite3_value_text(argv[0]);
	const unsigned char *host = sqlite3_value_text(argv[1]);
	sqlite3_int64 pid = sqlite3_value_int64(argv[2]);

	(void)argc;
	if (status != NULL && strcmp((const char *)status, "running") == 0 && host != NULL &&
	    st->host[0] != '\0' && strcmp((const char *)host, st->host) == 0 &&
	    sqlite3_value_type(argv[2]) == SQLITE_INTEGER && pid > 0 &&
	    pid == (sqlite3_int64)(pid_t)pid && kill((pid_t)pid, 0) != 0 && errno == ESRCH) {
		sqlite3_result_text(ctx, "interrupted", -1, SQLITE_STATIC);
		return;
	}
	sqlite3_result_value(ctx, argv[0]);
}

static const char *
failed_expr(const struct dash_store *st)
{
	return st->has_status ? "failed <> 0" : "lost > 0";
}

/* One column of the current row as a JSON value; NULL for a blob (not shown). */
static cJSON *
column_to_json(sqlite3_stmt *stmt, int col)
{
	switch (sqlite3_column_type(stmt, col)) {
	case SQLITE_INTEGER:
		return cJSON_CreateNumber((double)sqlite3_column_int64(stmt, col));
	case SQLITE_FLOAT:
		return cJSON_CreateNumber(sqlite3_column_double(stmt, col));
	case SQLITE_TEXT:
		return cJSON_CreateString((const char *)sqlite3_column_text(stmt, col));
	case SQLITE_NULL:
		return cJSON_CreateNull();
	default:
		return NULL;
	}
}

/* The current row as an object keyed by column name. NULL if out of memory. */
static cJSON *
row_to_json(sqlite3_stmt *stmt)
{
	cJSON *row = cJSON_CreateObject();
	if (row == NULL) {
		return NULL;
	}
	int n = sqlite3_column_count(stmt);
	for (int i = 0; i < n; i++) {
		const char *name = sqlite3_column_name(stmt, i);
		if (name == NULL || cJSON_GetObjectItemCaseSensitive(row, name) != NULL) {
			continue;
		}
		cJSON *value = column_to_json(stmt, i);
		if (value == NULL && sqlite3_column_type(stmt, i) != SQLITE_BLOB) {
			cJSON_Delete(row);
			return NULL;
		}
		if (value != NULL) {
			cJSON_AddItemToObject(row, name, value);
		}
	}
	return row;
}

/* Runs a prepared statement to the end, appending each row to a new array. */
static cJSON *
rows_to_array(sqlite3 *db, sqlite3_stmt *stmt, char *err, size_t errlen)
{
	cJSON *array = cJSON_CreateArray();
	if (array == NULL) {
		set_err(err, errlen, "out of memory", NULL);
		return NULL;
	}
	int rc;
	while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
		cJSON *row = row_to_json(stmt);
		if (row == NULL) {
			set_err(err, errlen, "out of memory", NULL);
			cJSON_Delete(array);
			return NULL;
		}
		cJSON_AddItemToArray(array, row);
	}
	if (rc != SQLITE_DONE) {
		set_err(err, errlen, "reading the database", db);
		cJSON_Delete(array);
		return NULL;
	}
	return array;
}

static sqlite3_stmt *
prepare(sqlite3 *db, const char *sql, char *err, size_t errlen)
{
	sqlite3_stmt *stmt = NULL;
	if (sqlite3_prepare_v2(db, sql, -1, &stmt, NULL) != SQLITE_OK) {
		set_err(err, errlen, "querying the database", db);
		sqlite3_finalize(stmt);
		return NULL;
	}
	return stmt;
}

/* A single integer from a statement without parameters; fallback on error. */
static int64_t
query_int(sqlite3 *db, const char *sql, int64_t fallback)
{
	sqlite3_stmt *stmt = prepare(db, sql, NULL, 0);
	int64_t value = fallback;
	if (stmt != NULL && sqlite3_step(stmt) == SQLITE_ROW) {
		value = sqlite3_column_int64(stmt, 0);
	}
	sqlite3_finalize(stmt);
	return value;
}

static bool
has_column(sqlite3 *db, const char *table, const char *column)
{
	char sql[160];
	snprintf(sql, sizeof(sql), "SELECT count(*) FROM pragma_table_info('%s') WHERE name = '%s'",
	         table, column);
	return query_int(db, sql, 0) > 0;
}

static void
close_db(struct dash_store *st)
{
	sqlite3_close(st->db);
	st->db = NULL;
	free(st->runs);
	st->runs = NULL;
	st->nruns = 0;
	st->last_result_id = 0;
	st->more_results = false;
}

/* Reads which tables and columns exist and sets state accordingly. */
static void
inspect_schema(struct dash_store *st)
{
	int64_t tables = query_int(st->db,
	                           "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND "
	                           "name IN ('runs', 'links', 'results')",
	                           -1);
	if (tables < 0) {
		st->state = DASH_STORE_BROKEN;
		snprintf(st->reason, sizeof(st->reason), "%s cannot be read: %s", st->path,
		         sqlite3_errmsg(st->db));
		return;
	}
	if (tables < 3) {
		st->state = DASH_STORE_EMPTY;
		snprintf(st->reason, sizeof(st->reason), "%s has no benchmark tables yet",
		         st->path);
		return;
	}
	if (!has_column(st->db, "runs", "started_at") ||
	    !has_column(st->db, "results", "records_per_s")) {
		st->state = DASH_STORE_BROKEN;
		snprintf(st->reason, sizeof(st->reason),
		         "%s has runs and results tables, but not the ones tern bench writes",
		         st->path);
		return;
	}
	st->has_status =
	    has_column(st->db, "runs", "status") && has_column(st->db, "results", "failed");
	st->has_keys = has_column(st->db, "results", "keys");
	st->has_pid = st->has_status && has_column(st->db, "runs", "pid") &&
	              has_column(st->db, "runs", "host") &&
	              sqlite3_create_function(st->db, "tern_run_status", 3, SQLITE_UTF8, st,
	                                      run_status, NULL, NULL) == SQLITE_OK;
	int64_t runs = query_int(st->db, "SELECT count(*) FROM runs", 0);
	st->state = runs > 0 ? DASH_STORE_READY : DASH_STORE_EMPTY;
	if (runs == 0) {
		snprintf(st->reason, sizeof(st->reason), "%s has no runs yet", st->path);
	} else {
		st->reason[0] = '\0';
	}
}

/* Takes the current runs and the last result id as the baseline for polling. */
static int snapshot_runs(struct dash_store *st, struct run_snapshot **out, size_t *count);

static void
prime_poll(struct dash_store *st)
{
	struct run_snapshot *runs = NULL;
	size_t n = 0;
	if (st->state == DASH_STORE_READY || st->state == DASH_STORE_EMPTY) {
		if (snapshot_runs(st, &runs, &n) < 0) {
			n = 0;
		}
	}
	free(st->runs);
	st->runs = runs;
	st->nruns = n;
	st->last_result_id = 0;
	if (st->state == DASH_STORE_READY || st->state == DASH_STORE_EMPTY) {
		if (has_column(st->db, "results", "id")) {
			st->last_result_id = query_int(st->db, "SELECT max(id) FROM results", 0);
		}
	}
}

/* Opens (or reopens) the file at the path. Does not create it. */
static void
open_db(struct dash_store *st)
{
	struct stat sb;
	close_db(st);
	if (stat(st->path, &sb) != 0) {
		st->state = DASH_STORE_MISSING;
		snprintf(st->reason, sizeof(st->reason), "%s does not exist: %s", st->path,
		         strerror(errno));
		return;
	}
	st->dev = sb.st_dev;
	st->ino = sb.st_ino;
	if (sqlite3_open_v2(st->path, &st->db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
		st->state = DASH_STORE_BROKEN;
		snprintf(st->reason, sizeof(st->reason), "%s cannot be opened: %s", st->path,
		         st->db != NULL ? sqlite3_errmsg(st->db) : "out of memory");
		sqlite3_close(st->db);
		st->db = NULL;
		return;
	}
	sqlite3_busy_timeout(st->db, BUSY_TIMEOUT_MS);
	st->data_version = query_int(st->db, "PRAGMA data_version", 0);
	inspect_schema(st);
	prime_poll(st);
}

struct dash_store *
dash_store_open(const char *path)
{
	struct dash_store *st = calloc(1, sizeof(*st));
	if (st == NULL) {
		return NULL;
	}
	size_t len = strlen(path);
	st->path = malloc(len + 1);
	if (st->path == NULL) {
		free(st);
		return NULL;
	}
	memcpy(st->path, path, len + 1);
	if (gethostname(st->host, sizeof(st->host) - 1) != 0) {
		st->host[0] = '\0';
	}
	open_db(st);
	return st;
}

void
dash_store_close(struct dash_store *st)
{
	if (st == NULL) {
		return;
	}
	close_db(st);
	free(st->path);
	free(st);
}

enum dash_store_state
dash_store_state(const struct dash_store *st)
{
	return st->state;
}

const char *
dash_store_path(const struct dash_store *st)
{
	return st->path;
}

const char *
dash_store_reason(const struct dash_store *st)
{
	return st->reason;
}

static const char *
state_name(enum dash_store_state state)
{
	switch (state) {
	case DASH_STORE_MISSING:
		return "missing";
	case DASH_STORE_EMPTY:
		return "empty";
	case DASH_STORE_READY:
		return "ready";
	default:
		return "broken";
	}
}

cJSON *
dash_store_describe(const struct dash_store *st)
{
	cJSON *db = cJSON_CreateObject();
	if (db == NULL || cJSON_AddStringToObject(db, "path", st->path) == NULL ||
	    cJSON_AddStringToObject(db, "state", state_name(st->state)) == NULL ||
	    cJSON_AddStringToObject(db, "reason", st->reason) == NULL) {
		cJSON_Delete(db);
		return NULL;
	}
	return db;
}

/* True when the store can answer queries; otherwise err says why not. */
static bool
queryable(const struct dash_store *st, char *err, size_t errlen)
{
	if (st->db == NULL || st->state == DASH_STORE_MISSING || st->state == DASH_STORE_BROKEN) {
		snprintf(err, errlen, "%s", st->reason[0] ? st->reason : "no database");
		return false;
	}
	return true;
}

/*
 * The SELECT list and FROM clause of a run with its result counts, and the id
 * of its last result: a client that counts pushed results adds only those
 * above it (a run written in one transaction arrives with its count and its
 * results in the same poll).
 */
static int
run_query(const struct dash_store *st, char *sql, size_t size, const char *where, const char *tail)
{
	int n = snprintf(sql, size,
	                 "SELECT r.id, r.started_at, r.finished_at, r.tern_version, r.host, r.cpu, "
	                 "r.cores, r.note, %s AS status, coalesce(c.n, 0) AS results, "
	                 "coalesce(c.f, 0) AS failed_cells, coalesce(c.last, 0) AS last_result_id "
	                 "FROM runs r LEFT JOIN "
	                 "(SELECT run_id, count(*) AS n, sum(CASE WHEN %s THEN 1 ELSE 0 END) AS f, "
	                 "max(rowid) AS last FROM results %s GROUP BY run_id) c "
	                 "ON c.run_id = r.id %s %s",
	                 status_expr(st), failed_expr(st), where[0] ? "WHERE run_id = ?1" : "",
	                 where, tail);
	return n > 0 && (size_t)n < size ? 0 : -1;
}

cJSON *
dash_store_runs(struct dash_store *st, char *err, size_t errlen)
{
	if (st->state == DASH_STORE_EMPTY) {
		/* The tables may not exist yet: an empty list, not an error. */
		cJSON *empty = cJSON_CreateArray();
		if (empty == NULL) {
			set_err(err, errlen, "out of memory", NULL);
		}
		return empty;
	}
	if (!queryable(st, err, errlen)) {
		return NULL;
	}
	char sql[1024];
	char tail[64];
	snprintf(tail, sizeof(tail), "ORDER BY r.id DESC LIMIT %d", RUNS_LIMIT);
	if (run_query(st, sql, sizeof(sql), "", tail) < 0) {
		set_err(err, errlen, "query too long", NULL);
		return NULL;
	}
	sqlite3_stmt *stmt = prepare(st->db, sql, err, errlen);
	if (stmt == NULL) {
		return NULL;
	}
	cJSON *runs = rows_to_array(st->db, stmt, err, errlen);
	sqlite3_finalize(stmt);
	return runs;
}

/* One run row with its counts, or NULL (err set) if it does not exist. */
static cJSON *
run_row(struct dash_store *st, int64_t run_id, bool with_config, char *err, size_t errlen)
{
	char sql[1024];
	if (run_query(st, sql, sizeof(sql), "WHERE r.id = ?1", "") < 0) {
		set_err(err, errlen, "query too long", NULL);
		return NULL;
	}
	sqlite3_stmt *stmt = prepare(st->db, sql, err, errlen);
	if (stmt == NULL) {
		return NULL;
	}
	sqlite3_bind_int64(stmt, 1, run_id);
	cJSON *rows = rows_to_array(st->db, stmt, err, errlen);
	sqlite3_finalize(stmt);
	if (rows == NULL) {
		return NULL;
	}
	cJSON *run = cJSON_DetachItemFromArray(rows, 0);
	cJSON_Delete(rows);
	if (run == NULL) {
		snprintf(err, errlen, "no run %lld in %s", (long long)run_id, st->path);
		return NULL;
	}
	if (!with_config) {
		return run;
	}
	/*
	 * The rest of the run's columns: the configuration, and on schema 3 the
	 * environment (cpu_model, kernel, compiler, build_type, tern_commit, env).
	 * The bench stores config and env as JSON text: they go out as objects.
	 */
	stmt = prepare(st->db, "SELECT * FROM runs WHERE id = ?1", err, errlen);
	if (stmt == NULL) {
		cJSON_Delete(run);
		return NULL;
	}
	sqlite3_bind_int64(stmt, 1, run_id);
	if (sqlite3_step(stmt) == SQLITE_ROW) {
		int n = sqlite3_column_count(stmt);
		for (int i = 0; i < n; i++) {
			const char *name = sqlite3_column_name(stmt, i);
			if (name == NULL || cJSON_GetObjectItemCaseSensitive(run, name) != NULL) {
				continue;
			}
			cJSON *value = NULL;
			bool json = strcmp(name, "config") == 0 || strcmp(name, "env") == 0;
			if (json && sqlite3_column_type(stmt, i) == SQLITE_TEXT) {
				value = cJSON_Parse((const char *)sqlite3_column_text(stmt, i));
			}
			if (value == NULL) {
				value = column_to_json(stmt, i);
			}
			if (value != NULL) {
				cJSON_AddItemToObject(run, name, value);
			}
		}
	}
	sqlite3_finalize(stmt);
	return run;
}

/* SELECT list for result rows: every column, plus a derived failed flag on schema 1. */
static const char *
result_columns(const struct dash_store *st)
{
	return st->has_status ? "x.*" : "x.*, (x.lost > 0) AS failed";
}

static cJSON *
select_by_run(struct dash_store *st, const char *sql, int64_t run_id, char *err, size_t errlen)
{
	sqlite3_stmt *stmt = prepare(st->db, sql, err, errlen);
	if (stmt == NULL) {
		return NULL;
	}
	sqlite3_bind_int64(stmt, 1, run_id);
	cJSON *rows = rows_to_array(st->db, stmt, err, errlen);
	sqlite3_finalize(stmt);
	return rows;
}

cJSON *
dash_store_run(struct dash_store *st, int64_t run_id, char *err, size_t errlen)
{
	if (!queryable(st, err, errlen)) {
		return NULL;
	}
	if (st->state == DASH_STORE_EMPTY && query_int(st->db,
	                                               "SELECT count(*) FROM sqlite_master WHERE "
	                                               "type = 'table' AND name = 'runs'",
	                                               0) == 0) {
		snprintf(err, errlen, "no run %lld: %s", (long long)run_id, st->reason);
		return NULL;
	}
	char sql[256];
	cJSON *out = cJSON_CreateObject();
	cJSON *run = run_row(st, run_id, true, err, errlen);
	if (out == NULL || run == NULL) {
		cJSON_Delete(out);
		cJSON_Delete(run);
		return NULL;
	}
	cJSON_AddItemToObject(out, "run", run);
	cJSON *links = select_by_run(st, "SELECT * FROM links WHERE run_id = ?1 ORDER BY rowid",
	                             run_id, err, errlen);
	if (links == NULL) {
		cJSON_Delete(out);
		return NULL;
	}
	cJSON_AddItemToObject(out, "links", links);
	snprintf(sql, sizeof(sql), "SELECT %s FROM results x WHERE x.run_id = ?1 ORDER BY x.id",
	         result_columns(st));
	cJSON *results = select_by_run(st, sql, run_id, err, errlen);
	if (results == NULL) {
		cJSON_Delete(out);
		return NULL;
	}
	cJSON_AddItemToObject(out, "results", results);
	return out;
}

cJSON *
dash_store_trend(struct dash_store *st, const struct dash_store_cell *cell, char *err,
                 size_t errlen)
{
	if (st->state == DASH_STORE_EMPTY) {
		cJSON *empty = cJSON_CreateArray();
		if (empty == NULL) {
			set_err(err, errlen, "out of memory", NULL);
		}
		return empty;
	}
	if (!queryable(st, err, errlen)) {
		return NULL;
	}
	if (!st->has_keys && cell->keys != 1) {
		return cJSON_CreateArray(); /* every row of an older schema is one key */
	}
	char sql[896];
	snprintf(sql, sizeof(sql),
	         "SELECT %s, r.started_at AS run_started_at, r.note AS run_note, "
	         "r.tern_version AS run_tern_version, r.host AS run_host, %s AS run_status "
	         "FROM results x JOIN runs r ON r.id = x.run_id WHERE x.scenario = ?1 AND "
	         "x.link = ?2 AND x.layer = ?3 AND x.mode = ?4 AND x.records_per_msg = ?5 %s"
	         "ORDER BY x.run_id, x.id LIMIT 10000",
	         result_columns(st), status_expr(st), st->has_keys ? "AND x.keys = ?6 " : "");
	sqlite3_stmt *stmt = prepare(st->db, sql, err, errlen);
	if (stmt == NULL) {
		return NULL;
	}
	sqlite3_bind_text(stmt, 1, cell->scenario, -1, SQLITE_STATIC);
	sqlite3_bind_text(stmt, 2, cell->link, -1, SQLITE_STATIC);
	sqlite3_bind_text(stmt, 3, cell->layer, -1, SQLITE_STATIC);
	sqlite3_bind_text(stmt, 4, cell->mode, -1, SQLITE_STATIC);
	sqlite3_bind_int64(stmt, 5, cell->records_per_msg);
	if (st->has_keys) {
		sqlite3_bind_int64(stmt, 6, cell->keys);
	}
	cJSON *points = rows_to_array(st->db, stmt, err, errlen);
	sqlite3_finalize(stmt);
	return points;
}

cJSON *
dash_store_compare(struct dash_store *st, int64_t a, int64_t b, char *err, size_t errlen)
{
	if (!queryable(st, err, errlen)) {
		return NULL;
	}
	if (st->state == DASH_STORE_EMPTY && query_int(st->db,
	                                               "SELECT count(*) FROM sqlite_master WHERE "
	                                               "type = 'table' AND name = 'results'",
	                                               0) == 0) {
		snprintf(err, errlen, "no runs to compare: %s", st->reason);
		return NULL;
	}
	struct compare_report report;
	char why[300];
	/* One read transaction: both runs as of the same moment, even while a bench writes. */
	sqlite3_exec(st->db, "BEGIN", NULL, NULL, NULL);
	int rc = compare_runs(st->db, a, b, NULL, &report, why, sizeof(why));
	sqlite3_exec(st->db, "COMMIT", NULL, NULL, NULL);
	if (rc != 0) {
		snprintf(err, errlen, "%s", why);
		return NULL;
	}
	cJSON *json = compare_report_json(&report);
	compare_report_free(&report);
	if (json == NULL) {
		set_err(err, errlen, "out of memory", NULL);
	}
	return json;
}

static int
snapshot_runs(struct dash_store *st, struct run_snapshot **out, size_t *count)
{
	char sql[256];
	*out = NULL;
	*count = 0;
	snprintf(sql, sizeof(sql),
	         "SELECT r.id, %s, r.finished_at IS NOT NULL FROM runs r ORDER BY r.id",
	         status_expr(st));
	sqlite3_stmt *stmt = prepare(st->db, sql, NULL, 0);
	if (stmt == NULL) {
		return 0;
	}
	struct run_snapshot *runs = NULL;
	size_t n = 0;
	size_t cap = 0;
	while (sqlite3_step(stmt) == SQLITE_ROW) {
		if (n == cap) {
			size_t ncap = cap ? cap * 2 : 64;
			struct run_snapshot *grown = realloc(runs, ncap * sizeof(*runs));
			if (grown == NULL) {
				free(runs);
				sqlite3_finalize(stmt);
				return -1;
			}
			runs = grown;
			cap = ncap;
		}
		struct run_snapshot *r = &runs[n++];
		r->id = sqlite3_column_int64(stmt, 0);
		const unsigned char *status = sqlite3_column_text(stmt, 1);
		snprintf(r->status, sizeof(r->status), "%s", status ? (const char *)status : "");
		r->finished = sqlite3_column_int(stmt, 2) != 0;
	}
	sqlite3_finalize(stmt);
	*out = runs;
	*count = n;
	return 0;
}

static const struct run_snapshot *
find_snapshot(const struct run_snapshot *runs, size_t n, int64_t id)
{
	for (size_t i = 0; i < n; i++) {
		if (runs[i].id == id) {
			return &runs[i];
		}
	}
	return NULL;
}

/* {"type": type, "run": row} for one run; false if out of memory. */
static bool
push_run(struct dash_store *st, cJSON *events, const char *type, int64_t run_id)
{
	char err[256];
	cJSON *run = run_row(st, run_id, false, err, sizeof(err));
	if (run == NULL) {
		/* Vanished between two statements: the next poll sends the new list. */
		return true;
	}
	cJSON *event = cJSON_CreateObject();
	if (event == NULL || cJSON_AddStringToObject(event, "type", type) == NULL) {
		cJSON_Delete(event);
		cJSON_Delete(run);
		return false;
	}
	cJSON_AddItemToObject(event, "run", run);
	cJSON_AddItemToArray(events, event);
	return true;
}

/* A whole new list of runs, after the file changed under the dashboard. */
static int
push_runs_list(struct dash_store *st, cJSON *events)
{
	char err[256];
	cJSON *event = cJSON_CreateObject();
	cJSON *db = dash_store_describe(st);
	if (event == NULL || db == NULL || cJSON_AddStringToObject(event, "type", "runs") == NULL) {
		cJSON_Delete(event);
		cJSON_Delete(db);
		return -1;
	}
	cJSON_AddItemToObject(event, "db", db);
	cJSON *runs = dash_store_runs(st, err, sizeof(err));
	if (runs == NULL) {
		runs = cJSON_CreateArray();
	}
	if (runs == NULL) {
		cJSON_Delete(event);
		return -1;
	}
	cJSON_AddItemToObject(event, "runs", runs);
	cJSON_AddItemToArray(events, event);
	return 1;
}

/* New result rows since the last poll, each with its link's row. */
static int
push_results(struct dash_store *st, cJSON *events)
{
	char sql[256];
	snprintf(sql, sizeof(sql),
	         "SELECT %s FROM results x WHERE x.id > ?1 ORDER BY x.id LIMIT %d",
	         result_columns(st), POLL_RESULT_LIMIT);
	cJSON *rows = select_by_run(st, sql, st->last_result_id, NULL, 0);
	if (rows == NULL) {
		return 0;
	}
	int count = 0;
	st->more_results = cJSON_GetArraySize(rows) >= POLL_RESULT_LIMIT;
	sqlite3_stmt *link =
	    prepare(st->db, "SELECT * FROM links WHERE run_id = ?1 AND name = ?2", NULL, 0);
	cJSON *row;
	while ((row = cJSON_DetachItemFromArray(rows, 0)) != NULL) {
		cJSON *id = cJSON_GetObjectItemCaseSensitive(row, "id");
		cJSON *run_id = cJSON_GetObjectItemCaseSensitive(row, "run_id");
		cJSON *name = cJSON_GetObjectItemCaseSensitive(row, "link");
		if (cJSON_IsNumber(id) && id->valuedouble > (double)st->last_result_id) {
			st->last_result_id = (int64_t)id->valuedouble;
		}
		cJSON *event = cJSON_CreateObject();
		if (event == NULL || !cJSON_IsNumber(run_id)) {
			cJSON_Delete(event);
			cJSON_Delete(row);
			continue;
		}
		cJSON_AddStringToObject(event, "type", "result");
		cJSON_AddNumberToObject(event, "run_id", run_id->valuedouble);
		if (link != NULL && cJSON_IsString(name)) {
			sqlite3_reset(link);
			sqlite3_bind_int64(link, 1, (int64_t)run_id->valuedouble);
			sqlite3_bind_text(link, 2, name->valuestring, -1, SQLITE_TRANSIENT);
			if (sqlite3_step(link) == SQLITE_ROW) {
				cJSON *link_row = row_to_json(link);
				if (link_row != NULL) {
					cJSON_AddItemToObject(event, "link", link_row);
				}
			}
		}
		cJSON_AddItemToObject(event, "result", row);
		cJSON_AddItemToArray(events, event);
		count++;
	}
	sqlite3_finalize(link);
	cJSON_Delete(rows);
	return count;
}

/* Compares the runs with the last snapshot; pushes additions, results, then updates. */
static int
poll_changes(struct dash_store *st, cJSON *events)
{
	struct run_snapshot *now = NULL;
	size_t n = 0;
	if (snapshot_runs(st, &now, &n) < 0) {
		return -1;
	}
	for (size_t i = 0; i < st->nruns; i++) {
		if (find_snapshot(now, n, st->runs[i].id) == NULL) {
			/* A run was deleted: only a whole new list describes that. */
			free(st->runs);
			st->runs = now;
			st->nruns = n;
			return push_runs_list(st, events);
		}
	}
	int count = 0;
	for (size_t i = 0; i < n; i++) {
		if (find_snapshot(st->runs, st->nruns, now[i].id) == NULL) {
			if (!push_run(st, events, "run_added", now[i].id)) {
				free(now);
				return -1;
			}
			count++;
		}
	}
	count += push_results(st, events);
	for (size_t i = 0; i < n; i++) {
		const struct run_snapshot *old = find_snapshot(st->runs, st->nruns, now[i].id);
		if (old != NULL &&
		    (strcmp(old->status, now[i].status) != 0 || old->finished != now[i].finished)) {
			if (!push_run(st, events, "run_updated", now[i].id)) {
				free(now);
				return -1;
			}
			count++;
		}
	}
	free(st->runs);
	st->runs = now;
	st->nruns = n;
	return count;
}

/* True while some run is `running`: its bench may die without a commit. */
static bool
watching_a_bench(const struct dash_store *st)
{
	if (!st->has_pid || st->state != DASH_STORE_READY) {
		return false;
	}
	for (size_t i = 0; i < st->nruns; i++) {
		if (strcmp(st->runs[i].status, "running") == 0) {
			return true;
		}
	}
	return false;
}

int
dash_store_poll(struct dash_store *st, cJSON *events)
{
	struct stat sb;
	bool exists = stat(st->path, &sb) == 0;
	bool replaced = exists && st->db != NULL && (sb.st_dev != st->dev || sb.st_ino != st->ino);
	if (st->db == NULL || !exists || replaced) {
		enum dash_store_state before = st->state;
		if (st->db == NULL && !exists && before == DASH_STORE_MISSING) {
			return 0;
		}
		open_db(st);
		if (st->state == before && !replaced && st->state != DASH_STORE_READY) {
			return 0;
		}
		return push_runs_list(st, events);
	}
	int64_t version = query_int(st->db, "PRAGMA data_version", st->data_version);
	/* A bench killed with SIGKILL commits nothing: while a run is running
	 * here, look at it on every poll to notice its bench is gone. */
	if (version == st->data_version && !st->more_results && !watching_a_bench(st)) {
		return 0;
	}
	st->data_version = version;
	if (st->state != DASH_STORE_READY) {
		enum dash_store_state before = st->state;
		inspect_schema(st);
		if (st->state == before) {
			return 0;
		}
		prime_poll(st);
		/* The first run of a new database: clients need the list, not a delta. */
		return push_runs_list(st, events);
	}
	/* One read transaction, so the runs and the results agree with each other. */
	sqlite3_exec(st->db, "BEGIN", NULL, NULL, NULL);
	int count = poll_changes(st, events);
	sqlite3_exec(st->db, "COMMIT", NULL, NULL, NULL);
	return count;
}
