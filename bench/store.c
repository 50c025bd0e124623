/*
 * store.c - SQLite storage of benchmark runs (see store.h).
 */
#include "store.h"

#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define BUSY_TIMEOUT_MS 5000

struct store {
	sqlite3 *db;
};

static const char schema_v4[] = "CREATE TABLE runs (\n"
                                "  id           INTEGER PRIMARY KEY,\n"
                                "  started_at   TEXT NOT NULL,\n"
                                "  finished_at  TEXT,\n"
                                "  tern_version TEXT NOT NULL,\n"
                                "  host         TEXT, cpu TEXT, cores INTEGER,\n"
                                "  note         TEXT,\n"
                                "  config       TEXT NOT NULL,\n"
                                "  status       TEXT NOT NULL DEFAULT 'running',\n"
                                "  cpu_model    TEXT, kernel TEXT, compiler TEXT,\n"
                                "  build_type   TEXT, tern_commit TEXT,\n"
                                "  env          TEXT,\n"
                                "  pid          INTEGER\n"
                                ");\n"
                                "CREATE TABLE links (\n"
                                "  run_id        INTEGER NOT NULL REFERENCES runs(id),\n"
                                "  name          TEXT NOT NULL,\n"
                                "  bandwidth_Bps REAL,\n"
                                "  rtt_ms        REAL NOT NULL,\n"
                                "  PRIMARY KEY (run_id, name)\n"
                                ");\n"
                                "CREATE TABLE results (\n"
                                "  id              INTEGER PRIMARY KEY,\n"
                                "  run_id          INTEGER NOT NULL REFERENCES runs(id),\n"
                                "  scenario        TEXT NOT NULL,\n"
                                "  link            TEXT NOT NULL,\n"
                                "  layer           TEXT NOT NULL,\n"
                                "  mode            TEXT NOT NULL,\n"
                                "  records_per_msg INTEGER NOT NULL,\n"
                                "  payload_bytes   INTEGER NOT NULL,\n"
                                "  concurrency     INTEGER NOT NULL DEFAULT 1,\n"
                                "  batch_bytes     INTEGER,\n"
                                "  record_bytes    INTEGER NOT NULL,\n"
                                "  seconds         REAL NOT NULL,\n"
                                "  messages        INTEGER NOT NULL,\n"
                                "  records         INTEGER NOT NULL,\n"
                                "  bytes           INTEGER NOT NULL,\n"
                                "  records_per_s   REAL NOT NULL,\n"
                                "  bytes_per_s     REAL NOT NULL,\n"
                                "  link_share      REAL,\n"
                                "  lat_p50_us      REAL, lat_p99_us REAL, lat_p999_us REAL,\n"
                                "  lost            INTEGER NOT NULL DEFAULT 0,\n"
                                "  failed          INTEGER NOT NULL DEFAULT 0,\n"
                                "  error           TEXT,\n"
                                "  cpu_s_per_gb    REAL,\n"
                                "  spread          REAL,\n"
                                "  repeat          INTEGER NOT NULL DEFAULT 0,\n"
                                "  rate            REAL,\n"
                                "  keys            INTEGER NOT NULL DEFAULT 1\n"
                                ");\n"
                                "CREATE INDEX results_run ON results(run_id);\n";

/* Columns that each version adds to the one before (version 1 is the SPEC's
 * minimum schema). */
static const struct {
	int version;
	const char *table;
	const char *column;
	const char *decl;
} added[] = {
    {2, "runs", "status", "TEXT NOT NULL DEFAULT 'running'"},
    {2, "results", "failed", "INTEGER NOT NULL DEFAULT 0"},
    {2, "results", "error", "TEXT"},
    {2, "results", "cpu_s_per_gb", "REAL"},
    {2, "results", "spread", "REAL"},
    {3, "runs", "cpu_model", "TEXT"},
    {3, "runs", "kernel", "TEXT"},
    {3, "runs", "compiler", "TEXT"},
    {3, "runs", "build_type", "TEXT"},
    {3, "runs", "tern_commit", "TEXT"},
    {3, "runs", "env", "TEXT"},
    {3, "runs", "pid", "INTEGER"},
    {3, "results", "repeat", "INTEGER NOT NULL DEFAULT 0"},
    {3, "results", "rate", "REAL"},
    {4, "results", "keys", "INTEGER NOT NULL DEFAULT 1"},
};

static int
exec(store *st, const char *sql, char *err, size_t err_len)
{
	char *msg = NULL;

	if (sqlite3_exec(st->db, sql, NULL, NULL, &msg) != SQLITE_OK) {
		snprintf(err, err_len, "database: %s", msg ? msg : sqlite3_errmsg(st->db));
		sqlite3_free(msg);
		return -1;
	}
	return 0;
}

static int
query_int(store *st, const char *sql, int *out)
{
	sqlite3_stmt *s;
	int rc = -1;

	if (sqlite3_prepare_v2(st->db, sql, -1, &s, NULL) != SQLITE_OK) {
		return -1;
	}
	if (sqlite3_step(s) == SQLITE_ROW) {
		*out = sqlite3_column_int(s, 0);
		rc = 0;
	}
	sqlite3_finalize(s);
	return rc;
}

static bool
has_column(store *st, const char *table, const char *column)
{
	char sql[128];
	sqlite3_stmt *s;
	bool found = false;

	snprintf(sql, sizeof(sql), "PRAGMA table_info(%s)", table);
	if (sqlite3_prepare_v2(st->db, sql, -1, &s, NULL) != SQLITE_OK) {
		return false;
	}
	while (!found && sqlite3_step(s) == SQLITE_ROW) {
		const unsigned char *name = sqlite3_column_text(s, 1);

		found = name != NULL && strcmp((const char *)name, column) == 0;
	}
	sqlite3_finalize(s);
	return found;
}

/* Bring a database of an older version (0 and 1: the minimum schema) up to
 * this one, adding what each version added. */
static int
migrate(store *st, int from, char *err, size_t err_len)
{
	size_t i;

	for (i = 0; i < sizeof(added) / sizeof(added[0]); i++) {
		char sql[256];

		if (added[i].version <= from || has_column(st, added[i].table, added[i].column)) {
			continue;
		}
		snprintf(sql, sizeof(sql), "ALTER TABLE %s ADD COLUMN \"%s\" %s", added[i].table,
		         added[i].column, added[i].decl);
		if (exec(st, sql, err, err_len) != 0) {
			return -1;
		}
	}
	/* Runs of a schema without a status have ended, one way or the other. */
	if (from < 2 && exec(st,
	                     "UPDATE runs SET status = CASE WHEN finished_at IS NULL THEN "
	                     "'interrupted' ELSE 'finished' END;",
	                     err, err_len) != 0) {
		return -1;
	}
	return exec(st,
	            "CREATE INDEX IF NOT EXISTS results_run ON results(run_id);"
	            "PRAGMA user_version = 4;",
	            err, err_len);
}

static int
set_up(store *st, char *err, size_t err_len)
{
	int version = 0;
	int tables = 0;

	if (query_int(st, "PRAGMA user_version", &version) != 0 ||
	    query_int(st, "SELECT count(*) FROM sqlite_master WHERE type='table' AND name='runs'",
	              &tables) != 0) {
		snprintf(err, err_len, "database: %s", sqlite3_errmsg(st->db));
		return -1;
	}
	if (version > STORE_SCHEMA_VERSION) {
		snprintf(err, err_len,
		         "database schema version %d is newer than this tern bench knows (%d): "
		         "use a newer tern or another --db",
		         version, STORE_SCHEMA_VERSION);
		return -1;
	}
	if (version == STORE_SCHEMA_VERSION) {
		return 0;
	}
	if (exec(st, "BEGIN IMMEDIATE", err, err_len) != 0) {
		return -1;
	}
	if (tables == 0) {
		if (exec(st, schema_v4, err, err_len) != 0 ||
		    exec(st, "PRAGMA user_version = 4", err, err_len) != 0) {
			goto fail;
		}
	} else if (migrate(st, version, err, err_len) != 0) {
		/* version 0 with tables: the minimum schema written without a version */
		goto fail;
	}
	return exec(st, "COMMIT", err, err_len);
fail:
	sqlite3_exec(st->db, "ROLLBACK", NULL, NULL, NULL);
	return -1;
}

int
store_open(store **out, const char *path, char *err, size_t err_len)
{
	store *st = calloc(1, sizeof(*st));

	*out = NULL;
	if (st == NULL) {
		snprintf(err, err_len, "database: out of memory");
		return -1;
	}
	if (sqlite3_open_v2(path, &st->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL) !=
	    SQLITE_OK) {
		snprintf(err, err_len, "database %s: %s", path,
		         st->db ? sqlite3_errmsg(st->db) : "cannot open");
		store_close(st);
		return -1;
	}
	sqlite3_busy_timeout(st->db, BUSY_TIMEOUT_MS);
	/* WAL lets a dashboard read while the bench writes. */
	if (exec(st, "PRAGMA journal_mode=WAL; PRAGMA foreign_keys=ON;", err, err_len) != 0 ||
	    set_up(st, err, err_len) != 0) {
		char e2[256];

		snprintf(e2, sizeof(e2), "%s", err);
		snprintf(err, err_len, "%s: %s", path, e2);
		store_close(st);
		return -1;
	}
	/* Best effort: a database this user may not write still opens. */
	char ignored[256];
	store_mark_interrupted(st, ignored, sizeof(ignored));
	*out = st;
	return 0;
}

void
store_close(store *st)
{
	if (st == NULL) {
		return;
	}
	sqlite3_close(st->db);
	free(st);
}

int
store_schema_version(store *st)
{
	int v = -1;

	query_int(st, "PRAGMA user_version", &v);
	return v;
}

struct sqlite3 *
store_handle(store *st)
{
	return st->db;
}

void
store_now_iso(char *buf, size_t len)
{
	time_t t = time(NULL);
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static int
step_done(store *st, sqlite3_stmt *s, char *err, size_t err_len)
{
	int rc = sqlite3_step(s);

	sqlite3_finalize(s);
	if (rc != SQLITE_DONE) {
		snprintf(err, err_len, "database: %s", sqlite3_errmsg(st->db));
		return -1;
	}
	return 0;
}

static int
prepare(store *st, const char *sql, sqlite3_stmt **s, char *err, size_t err_len)
{
	if (sqlite3_prepare_v2(st->db, sql, -1, s, NULL) != SQLITE_OK) {
		snprintf(err, err_len, "database: %s", sqlite3_errmsg(st->db));
		return -1;
	}
	return 0;
}

/* True when no process has this id on this machine: kill(pid, 0) fails with
 * ESRCH (EPERM means one exists that belongs to another user). */
static bool
pid_gone(sqlite3_int64 pid)
{
	if (pid <= 0 || pid != (sqlite3_int64)(pid_t)pid) {
		return false;
	}
	return kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

int
store_mark_interrupted(store *st, char *err, size_t err_len)
{
	char host[256];
	sqlite3_stmt *s;
	int64_t dead[64];
	int n = 0;
	int marked = 0;

	if (!has_column(st, "runs", "pid") || gethostname(host, sizeof(host) - 1) != 0) {
		return 0;
	}
	host[sizeof(host) - 1] = '\0';
	if (prepare(st,
	            "SELECT id, pid FROM runs WHERE status = 'running' AND host = ?1 AND pid > 0",
	            &s, err, err_len) != 0) {
		return -1;
	}
	sqlite3_bind_text(s, 1, host, -1, SQLITE_TRANSIENT);
	/* At most 64 a time: the bench opens the database again next time. */
	while (n < (int)(sizeof(dead) / sizeof(dead[0])) && sqlite3_step(s) == SQLITE_ROW) {
		if (pid_gone(sqlite3_column_int64(s, 1))) {
			dead[n++] = sqlite3_column_int64(s, 0);
		}
	}
	sqlite3_finalize(s);
	for (int i = 0; i < n; i++) {
		/* Still running: a run that ended meanwhile keeps its own status. */
		if (prepare(st,
		            "UPDATE runs SET status = 'interrupted' WHERE id = ?1 AND status = "
		            "'running'",
		            &s, err, err_len) != 0) {
			return -1;
		}
		sqlite3_bind_int64(s, 1, dead[i]);
		if (step_done(st, s, err, err_len) != 0) {
			return -1;
		}
		marked += sqlite3_changes(st->db);
	}
	return marked;
}

int
store_run_begin(store *st, const struct run_info *ri, int64_t *run_id, char *err, size_t err_len)
{
	sqlite3_stmt *s;
	char now[32];

	store_now_iso(now, sizeof(now));
	if (prepare(st,
	            "INSERT INTO runs (started_at, tern_version, host, cpu, cores, note, config, "
	            "status, cpu_model, kernel, compiler, build_type, tern_commit, env, pid) "
	            "VALUES (?, ?, ?, ?, ?, ?, ?, 'running', ?, ?, ?, ?, ?, ?, ?)",
	            &s, err, err_len) != 0) {
		return -1;
	}
	sqlite3_bind_text(s, 1, now, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(s, 2, ri->tern_version, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(s, 3, ri->host, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(s, 4, ri->cpu, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int(s, 5, ri->cores);
	if (ri->note != NULL) {
		sqlite3_bind_text(s, 6, ri->note, -1, SQLITE_TRANSIENT);
	}
	sqlite3_bind_text(s, 7, ri->config_json, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(s, 8, ri->cpu_model, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(s, 9, ri->kernel, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(s, 10, ri->compiler, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(s, 11, ri->build_type, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(s, 12, ri->tern_commit, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(s, 13, ri->env_json, -1, SQLITE_TRANSIENT);
	if (ri->pid > 0) {
		sqlite3_bind_int64(s, 14, ri->pid);
	}
	if (step_done(st, s, err, err_len) != 0) {
		return -1;
	}
	*run_id = sqlite3_last_insert_rowid(st->db);
	return 0;
}

int
store_link(store *st, int64_t run_id, const struct bench_link *l, char *err, size_t err_len)
{
	sqlite3_stmt *s;

	if (prepare(st, "INSERT INTO links (run_id, name, bandwidth_Bps, rtt_ms) VALUES (?,?,?,?)",
	            &s, err, err_len) != 0) {
		return -1;
	}
	sqlite3_bind_int64(s, 1, run_id);
	sqlite3_bind_text(s, 2, l->name, -1, SQLITE_TRANSIENT);
	if (l->bandwidth_Bps > 0) {
		sqlite3_bind_double(s, 3, l->bandwidth_Bps);
	}
	sqlite3_bind_double(s, 4, l->rtt_ms);
	return step_done(st, s, err, err_len);
}

static void
bind_opt(sqlite3_stmt *s, int i, double v)
{
	if (v >= 0) {
		sqlite3_bind_double(s, i, v);
	}
}

int
store_result(store *st, int64_t run_id, const struct cell *c, const struct cell_result *r,
             char *err, size_t err_len)
{
	sqlite3_stmt *s;

	if (prepare(st,
	            "INSERT INTO results (run_id, scenario, link, layer, mode, records_per_msg, "
	            "payload_bytes, concurrency, batch_bytes, record_bytes, seconds, messages, "
	            "records, bytes, records_per_s, bytes_per_s, link_share, lat_p50_us, "
	            "lat_p99_us, lat_p999_us, lost, failed, error, cpu_s_per_gb, spread, repeat, "
	            "rate, keys) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
	            &s, err, err_len) != 0) {
		return -1;
	}
	sqlite3_bind_int64(s, 1, run_id);
	sqlite3_bind_text(s, 2, scenario_name(c->kind), -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 3, c->link->name, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(s, 4, c->layer->name, -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 5, c->lowlat ? "lowlat" : "batched", -1, SQLITE_STATIC);
	sqlite3_bind_int64(s, 6, c->records_per_msg);
	sqlite3_bind_int64(s, 7, (sqlite3_int64)c->payload_bytes);
	sqlite3_bind_int64(s, 8, c->concurrency);
	/* Low-latency mode does not batch: no batch size applies. */
	if (!c->lowlat) {
		sqlite3_bind_int64(s, 9, c->batch_bytes ? c->batch_bytes : 65536);
	}
	sqlite3_bind_int64(s, 10, c->kind == SCEN_BYTES ? 0 : 64);
	sqlite3_bind_double(s, 11, r->seconds);
	sqlite3_bind_int64(s, 12, (sqlite3_int64)r->messages);
	sqlite3_bind_int64(s, 13, (sqlite3_int64)r->records);
	sqlite3_bind_int64(s, 14, (sqlite3_int64)r->bytes);
	sqlite3_bind_double(s, 15, r->records_per_s);
	sqlite3_bind_double(s, 16, r->bytes_per_s);
	bind_opt(s, 17, r->link_share);
	bind_opt(s, 18, r->lat_p50_us);
	bind_opt(s, 19, r->lat_p99_us);
	bind_opt(s, 20, r->lat_p999_us);
	sqlite3_bind_int64(s, 21, (sqlite3_int64)r->lost);
	sqlite3_bind_int(s, 22, r->failed ? 1 : 0);
	if (r->failed) {
		sqlite3_bind_text(s, 23, r->error, -1, SQLITE_TRANSIENT);
	}
	if (r->bytes > 0) {
		sqlite3_bind_double(s, 24, r->cpu_s_per_gb);
	}
	bind_opt(s, 25, r->spread);
	sqlite3_bind_int64(s, 26, c->repeat);
	if (c->rate > 0) {
		sqlite3_bind_double(s, 27, c->rate);
	}
	sqlite3_bind_int64(s, 28, c->keys > 0 ? c->keys : 1);
	return step_done(st, s, err, err_len);
}

int
store_run_end(store *st, int64_t run_id, const char *status, char *err, size_t err_len)
{
	sqlite3_stmt *s;
	char now[32];

	store_now_iso(now, sizeof(now));
	if (prepare(st, "UPDATE runs SET finished_at = ?, status = ? WHERE id = ?", &s, err,
	            err_len) != 0) {
		return -1;
	}
	sqlite3_bind_text(s, 1, now, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(s, 2, status, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int64(s, 3, run_id);
	return step_done(st, s, err, err_len);
}
