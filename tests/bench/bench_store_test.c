/*
 * bench_store_test.c - the benchmark database: a new file gets schema
 * version 4; a version-1 file (the minimum schema) and a version-2 file are
 * migrated in place and keep their rows; a newer version is refused; rows
 * written by a run read back, with the run's environment; opening marks a
 * run `interrupted` when its bench is gone from this machine.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "layer.h"
#include "store.h"

static const char schema_v1[] =
    "CREATE TABLE runs (id INTEGER PRIMARY KEY, started_at TEXT NOT NULL, finished_at TEXT,"
    " tern_version TEXT NOT NULL, host TEXT, cpu TEXT, cores INTEGER, note TEXT,"
    " config TEXT NOT NULL);"
    "CREATE TABLE links (run_id INTEGER NOT NULL REFERENCES runs(id), name TEXT NOT NULL,"
    " bandwidth_Bps REAL, rtt_ms REAL NOT NULL, PRIMARY KEY (run_id, name));"
    "CREATE TABLE results (id INTEGER PRIMARY KEY, run_id INTEGER NOT NULL REFERENCES runs(id),"
    " scenario TEXT NOT NULL, link TEXT NOT NULL, layer TEXT NOT NULL, mode TEXT NOT NULL,"
    " records_per_msg INTEGER NOT NULL, payload_bytes INTEGER NOT NULL,"
    " concurrency INTEGER NOT NULL DEFAULT 1, batch_bytes INTEGER,"
    " record_bytes INTEGER NOT NULL, seconds REAL NOT NULL, messages INTEGER NOT NULL,"
    " records INTEGER NOT NULL, bytes INTEGER NOT NULL, records_per_s REAL NOT NULL,"
    " bytes_per_s REAL NOT NULL, link_share REAL, lat_p50_us REAL, lat_p99_us REAL,"
    " lat_p999_us REAL, lost INTEGER NOT NULL DEFAULT 0);"
    "INSERT INTO runs (started_at, finished_at, tern_version, config) VALUES"
    " ('2026-01-01T00:00:00Z', '2026-01-01T00:01:00Z', '0.0.1', '{}'),"
    " ('2026-01-02T00:00:00Z', NULL, '0.0.1', '{}');"
    "INSERT INTO results (run_id, scenario, link, layer, mode, records_per_msg, payload_bytes,"
    " record_bytes, seconds, messages, records, bytes, records_per_s, bytes_per_s)"
    " VALUES (1, 'stream', 'lan', 'tcp', 'batched', 16, 1024, 64, 5, 10, 160, 10240, 32, 2048);"
    "PRAGMA user_version = 1;";

/* Version 2, as tern bench wrote it before runs kept their environment. */
static const char schema_v2[] =
    "CREATE TABLE runs (\n"
    "  id           INTEGER PRIMARY KEY,\n"
    "  started_at   TEXT NOT NULL,\n"
    "  finished_at  TEXT,\n"
    "  tern_version TEXT NOT NULL,\n"
    "  host         TEXT, cpu TEXT, cores INTEGER,\n"
    "  note         TEXT,\n"
    "  config       TEXT NOT NULL,\n"
    "  status       TEXT NOT NULL DEFAULT 'running'\n"
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
    "  spread          REAL\n"
    ");\n"
    "CREATE INDEX results_run ON results(run_id);\n"
    "INSERT INTO runs (started_at, finished_at, tern_version, config, status) VALUES"
    " ('2026-02-01T00:00:00Z', NULL, '0.1.0', '{}', 'running');"
    "INSERT INTO results (run_id, scenario, link, layer, mode, records_per_msg, payload_bytes,"
    " record_bytes, seconds, messages, records, bytes, records_per_s, bytes_per_s, spread)"
    " VALUES (1, 'fanin', 'lan', 'tern', 'batched', 1, 64, 64, 1, 10, 10, 640, 10, 640, 1.5);"
    "PRAGMA user_version = 2;";

static char path[64];

static int
setup(void **state)
{
	int fd;

	(void)state;
	snprintf(path, sizeof(path), "/tmp/tern-bench-store-XXXXXX");
	fd = mkstemp(path);
	if (fd < 0) {
		return -1;
	}
	close(fd);
	unlink(path);
	return 0;
}

static int
teardown(void **state)
{
	char p[80];

	(void)state;
	unlink(path);
	snprintf(p, sizeof(p), "%s-wal", path);
	unlink(p);
	snprintf(p, sizeof(p), "%s-shm", path);
	unlink(p);
	return 0;
}

static int
query_int(const char *sql)
{
	sqlite3 *db;
	sqlite3_stmt *s;
	int v = -12345;

	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &s, NULL), SQLITE_OK);
	if (sqlite3_step(s) == SQLITE_ROW) {
		v = sqlite3_column_int(s, 0);
	}
	sqlite3_finalize(s);
	sqlite3_close(db);
	return v;
}

static void
exec_sql(const char *sql)
{
	sqlite3 *db;

	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
}

static int
has_column(const char *table, const char *column)
{
	char sql[200];

	snprintf(sql, sizeof(sql), "SELECT count(*) FROM pragma_table_info('%s') WHERE name='%s'",
	         table, column);
	return query_int(sql);
}

static void
creates_version_3(void **state)
{
	char err[256];
	store *st;

	(void)state;
	assert_int_equal(store_open(&st, path, err, sizeof(err)), 0);
	assert_int_equal(store_schema_version(st), STORE_SCHEMA_VERSION);
	store_close(st);
	assert_int_equal(query_int("PRAGMA user_version"), 4);
	assert_int_equal(has_column("runs", "status"), 1);
	assert_int_equal(has_column("results", "failed"), 1);
	assert_int_equal(has_column("results", "error"), 1);
	assert_int_equal(has_column("results", "cpu_s_per_gb"), 1);
	assert_int_equal(has_column("results", "lat_p999_us"), 1);
	assert_int_equal(has_column("links", "bandwidth_Bps"), 1);
	assert_int_equal(has_column("runs", "tern_commit"), 1);
	assert_int_equal(has_column("runs", "env"), 1);
	assert_int_equal(has_column("results", "repeat"), 1);
	assert_int_equal(has_column("results", "rate"), 1);
	assert_int_equal(has_column("results", "keys"), 1);
	/* WAL mode is a property of the file: a reader sees it too. */
	{
		sqlite3 *db;
		sqlite3_stmt *s;

		assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
		assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &s, NULL),
		                 SQLITE_OK);
		assert_int_equal(sqlite3_step(s), SQLITE_ROW);
		assert_string_equal((const char *)sqlite3_column_text(s, 0), "wal");
		sqlite3_finalize(s);
		sqlite3_close(db);
	}
	/* Opening again changes nothing. */
	assert_int_equal(store_open(&st, path, err, sizeof(err)), 0);
	store_close(st);
	assert_int_equal(query_int("PRAGMA user_version"), 4);
}

static void
migrates_version_1(void **state)
{
	char err[256];
	store *st;

	(void)state;
	exec_sql(schema_v1);
	assert_int_equal(has_column("results", "failed"), 0);
	assert_int_equal(store_open(&st, path, err, sizeof(err)), 0);
	store_close(st);
	assert_int_equal(query_int("PRAGMA user_version"), 4);
	assert_int_equal(has_column("runs", "status"), 1);
	assert_int_equal(has_column("results", "failed"), 1);
	assert_int_equal(has_column("results", "error"), 1);
	assert_int_equal(has_column("results", "cpu_s_per_gb"), 1);
	/* The old rows are kept, with the new columns filled sensibly. */
	assert_int_equal(query_int("SELECT count(*) FROM results"), 1);
	assert_int_equal(query_int("SELECT failed FROM results"), 0);
	assert_int_equal(query_int("SELECT count(*) FROM runs WHERE status='finished'"), 1);
	assert_int_equal(query_int("SELECT count(*) FROM runs WHERE status='interrupted'"), 1);
	assert_int_equal(has_column("runs", "kernel"), 1);
	assert_int_equal(query_int("SELECT repeat FROM results"), 0);
}

static void
migrates_version_2(void **state)
{
	char err[256];
	store *st;

	(void)state;
	exec_sql(schema_v2);
	assert_int_equal(has_column("results", "repeat"), 0);
	assert_int_equal(store_open(&st, path, err, sizeof(err)), 0);
	store_close(st);
	assert_int_equal(query_int("PRAGMA user_version"), 4);
	assert_int_equal(has_column("runs", "cpu_model"), 1);
	assert_int_equal(has_column("runs", "kernel"), 1);
	assert_int_equal(has_column("runs", "compiler"), 1);
	assert_int_equal(has_column("runs", "build_type"), 1);
	assert_int_equal(has_column("runs", "tern_commit"), 1);
	assert_int_equal(has_column("runs", "env"), 1);
	assert_int_equal(has_column("results", "rate"), 1);
	assert_int_equal(query_int("SELECT count(*) FROM results WHERE keys = 1"),
	                 query_int("SELECT count(*) FROM results"));
	/* Rows kept; a version-2 status is real and stays as it was. */
	assert_int_equal(query_int("SELECT count(*) FROM results WHERE repeat=0 AND spread=1.5 "
	                           "AND rate IS NULL"),
	                 1);
	assert_int_equal(query_int("SELECT count(*) FROM runs WHERE status='running' AND "
	                           "tern_commit IS NULL"),
	                 1);
}

static void
refuses_a_newer_version(void **state)
{
	char err[256];
	store *st;

	(void)state;
	exec_sql("CREATE TABLE runs (id INTEGER PRIMARY KEY); PRAGMA user_version = 9;");
	assert_int_equal(store_open(&st, path, err, sizeof(err)), -1);
	assert_non_null(strstr(err, "newer"));
}

static void
writes_a_run(void **state)
{
	struct bench_link l = {
	    .name = "wifi", .bandwidth_Bps = 12e6, .rtt_ms = 10, .emulated = true};
	struct cell c = {.kind = SCEN_STREAM,
	                 .link = &l,
	                 .layer = &layer_tcp_ops,
	                 .records_per_msg = 16,
	                 .payload_bytes = 1024,
	                 .concurrency = 1,
	                 .duration = 1};
	struct cell_result r;
	struct run_info ri = {.tern_version = "0.1.0",
	                      .host = "h",
	                      .cpu = "c",
	                      .cores = 2,
	                      .note = "n",
	                      .config_json = "{}",
	                      .kernel = "Linux 6.1",
	                      .tern_commit = "abc123",
	                      .env_json = "{\"governor\":\"performance\"}",
	                      .pid = 42};
	char err[256];
	int64_t id;
	store *st;

	(void)state;
	memset(&r, 0, sizeof(r));
	r.seconds = 1;
	r.records = r.messages = 100;
	r.bytes = 6400;
	r.records_per_s = 100;
	r.bytes_per_s = 6400;
	r.link_share = 6400 / 12e6;
	r.lat_p50_us = r.lat_p99_us = r.lat_p999_us = r.spread = -1;
	assert_int_equal(store_open(&st, path, err, sizeof(err)), 0);
	assert_int_equal(store_run_begin(st, &ri, &id, err, sizeof(err)), 0);
	assert_int_equal(store_link(st, id, &l, err, sizeof(err)), 0);
	assert_int_equal(store_result(st, id, &c, &r, err, sizeof(err)), 0);
	assert_int_equal(query_int("SELECT count(*) FROM runs WHERE status='running' AND "
	                           "finished_at IS NULL"),
	                 1);
	c.repeat = 2;
	c.rate = 5000;
	r.failed = true;
	snprintf(r.error, sizeof(r.error), "sender 0: records 1 to 1 lost");
	assert_int_equal(store_result(st, id, &c, &r, err, sizeof(err)), 0);
	assert_int_equal(store_run_end(st, id, "failed", err, sizeof(err)), 0);
	store_close(st);
	assert_int_equal(query_int("SELECT count(*) FROM results WHERE record_bytes=64 AND "
	                           "batch_bytes=65536 AND lat_p50_us IS NULL"),
	                 2);
	assert_int_equal(query_int("SELECT count(*) FROM results WHERE failed=1 AND error LIKE "
	                           "'%lost%'"),
	                 1);
	assert_int_equal(query_int("SELECT count(*) FROM runs WHERE status='failed' AND "
	                           "finished_at IS NOT NULL"),
	                 1);
	assert_int_equal(query_int("SELECT count(*) FROM links WHERE name='wifi' AND "
	                           "bandwidth_Bps=12000000"),
	                 1);
	assert_int_equal(query_int("SELECT count(*) FROM runs WHERE kernel='Linux 6.1' AND "
	                           "tern_commit='abc123' AND pid=42 AND compiler IS NULL AND "
	                           "json_extract(env, '$.governor')='performance'"),
	                 1);
	assert_int_equal(query_int("SELECT count(*) FROM results WHERE repeat=2 AND rate=5000"), 1);
	assert_int_equal(query_int("SELECT count(*) FROM results WHERE repeat=0 AND rate IS NULL"),
	                 1);
}

/* A pid that no process has now: a child's, once it has been reaped. */
static long
dead_pid(void)
{
	pid_t child = fork();

	assert_true(child >= 0);
	if (child == 0) {
		_exit(0);
	}
	assert_int_equal(waitpid(child, NULL, 0), child);
	return (long)child;
}

static void
marks_dead_runs_interrupted(void **state)
{
	char err[256];
	char host[256];
	char sql[2048];
	store *st;
	long dead = dead_pid();

	(void)state;
	assert_int_equal(gethostname(host, sizeof(host) - 1), 0);
	host[sizeof(host) - 1] = '\0';
	assert_int_equal(store_open(&st, path, err, sizeof(err)), 0);
	store_close(st);
	/* 1: killed here; 2: alive here (this process); 3: another machine's;
	 * 4: killed, but it had finished; 5: no pid (schema 2). */
	snprintf(sql, sizeof(sql),
	         "INSERT INTO runs (id, started_at, tern_version, config, status, host, pid) VALUES"
	         " (1, 't', 'v', '{}', 'running', '%s', %ld),"
	         " (2, 't', 'v', '{}', 'running', '%s', %ld),"
	         " (3, 't', 'v', '{}', 'running', 'elsewhere', %ld),"
	         " (4, 't', 'v', '{}', 'finished', '%s', %ld),"
	         " (5, 't', 'v', '{}', 'running', '%s', NULL);",
	         host, dead, host, (long)getpid(), dead, host, dead, host);
	exec_sql(sql);
	assert_int_equal(store_open(&st, path, err, sizeof(err)), 0);
	assert_int_equal(query_int("SELECT count(*) FROM runs WHERE id = 1 AND status = "
	                           "'interrupted' AND finished_at IS NULL"),
	                 1);
	assert_int_equal(query_int("SELECT count(*) FROM runs WHERE status = 'running'"), 3);
	assert_int_equal(
	    query_int("SELECT count(*) FROM runs WHERE id = 4 AND status = 'finished'"), 1);
	/* Nothing left to mark. */
	assert_int_equal(store_mark_interrupted(st, err, sizeof(err)), 0);
	store_close(st);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(creates_version_3, setup, teardown),
	    cmocka_unit_test_setup_teardown(migrates_version_1, setup, teardown),
	    cmocka_unit_test_setup_teardown(migrates_version_2, setup, teardown),
	    cmocka_unit_test_setup_teardown(refuses_a_newer_version, setup, teardown),
	    cmocka_unit_test_setup_teardown(writes_a_run, setup, teardown),
	    cmocka_unit_test_setup_teardown(marks_dead_runs_interrupted, setup, teardown),
	};

	return cmocka_run_group_tests_name("bench_store", tests, NULL, NULL);
}
