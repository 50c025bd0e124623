/*
 * dashboard_store_test.c - the dashboard's store and message handling,
 * against databases this test writes through its own SQLite connection
 * (as a bench would, from another connection).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sqlite3.h>

#include "protocol.h"
#include "server.h"
#include "store.h"

static const char schema_v2[] =
    "PRAGMA journal_mode = WAL;"
    "CREATE TABLE runs (id INTEGER PRIMARY KEY, started_at TEXT NOT NULL, finished_at TEXT,"
    " tern_version TEXT NOT NULL, host TEXT, cpu TEXT, cores INTEGER, note TEXT,"
    " config TEXT NOT NULL, status TEXT NOT NULL DEFAULT 'running');"
    "CREATE TABLE links (run_id INTEGER NOT NULL, name TEXT NOT NULL, bandwidth_Bps REAL,"
    " rtt_ms REAL NOT NULL, PRIMARY KEY (run_id, name));"
    "CREATE TABLE results (id INTEGER PRIMARY KEY, run_id INTEGER NOT NULL, scenario TEXT NOT NULL,"
    " link TEXT NOT NULL, layer TEXT NOT NULL, mode TEXT NOT NULL, records_per_msg INTEGER NOT "
    "NULL,"
    " payload_bytes INTEGER NOT NULL, concurrency INTEGER NOT NULL DEFAULT 1, batch_bytes INTEGER,"
    " record_bytes INTEGER NOT NULL, seconds REAL NOT NULL, messages INTEGER NOT NULL,"
    " records INTEGER NOT NULL, bytes INTEGER NOT NULL, records_per_s REAL NOT NULL,"
    " bytes_per_s REAL NOT NULL, link_share REAL, lat_p50_us REAL, lat_p99_us REAL,"
    " lat_p999_us REAL, lost INTEGER NOT NULL DEFAULT 0, failed INTEGER NOT NULL DEFAULT 0,"
    " error TEXT, cpu_s_per_gb REAL);"
    "PRAGMA user_version = 2;";

/* What version 3 adds to version 2: the run's environment, repeats, open-loop rates. */
static const char schema_v3_added[] =
    "ALTER TABLE runs ADD COLUMN cpu_model TEXT; ALTER TABLE runs ADD COLUMN kernel TEXT;"
    "ALTER TABLE runs ADD COLUMN compiler TEXT; ALTER TABLE runs ADD COLUMN build_type TEXT;"
    "ALTER TABLE runs ADD COLUMN tern_commit TEXT; ALTER TABLE runs ADD COLUMN env TEXT;"
    "ALTER TABLE runs ADD COLUMN pid INTEGER; ALTER TABLE results ADD COLUMN spread REAL;"
    "ALTER TABLE results ADD COLUMN repeat INTEGER NOT NULL DEFAULT 0;"
    "ALTER TABLE results ADD COLUMN rate REAL;"
    "PRAGMA user_version = 3;";

/* The SPEC's minimum schema: no status, failed or error columns. */
static const char schema_v1[] =
    "PRAGMA journal_mode = WAL;"
    "CREATE TABLE runs (id INTEGER PRIMARY KEY, started_at TEXT NOT NULL, finished_at TEXT,"
    " tern_version TEXT NOT NULL, host TEXT, cpu TEXT, cores INTEGER, note TEXT,"
    " config TEXT NOT NULL);"
    "CREATE TABLE links (run_id INTEGER NOT NULL, name TEXT NOT NULL, bandwidth_Bps REAL,"
    " rtt_ms REAL NOT NULL, PRIMARY KEY (run_id, name));"
    "CREATE TABLE results (id INTEGER PRIMARY KEY, run_id INTEGER NOT NULL, scenario TEXT NOT NULL,"
    " link TEXT NOT NULL, layer TEXT NOT NULL, mode TEXT NOT NULL, records_per_msg INTEGER NOT "
    "NULL,"
    " payload_bytes INTEGER NOT NULL, concurrency INTEGER NOT NULL DEFAULT 1, batch_bytes INTEGER,"
    " record_bytes INTEGER NOT NULL, seconds REAL NOT NULL, messages INTEGER NOT NULL,"
    " records INTEGER NOT NULL, bytes INTEGER NOT NULL, records_per_s REAL NOT NULL,"
    " bytes_per_s REAL NOT NULL, link_share REAL, lat_p50_us REAL, lat_p99_us REAL,"
    " lat_p999_us REAL, lost INTEGER NOT NULL DEFAULT 0);"
    "PRAGMA user_version = 1;";

struct fixture {
	char dir[64];
	char path[96];
	sqlite3 *writer;
};

static int
setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	assert_non_null(f);
	snprintf(f->dir, sizeof(f->dir), "/tmp/tern-dash-test-XXXXXX");
	assert_non_null(mkdtemp(f->dir));
	snprintf(f->path, sizeof(f->path), "%s/bench.db", f->dir);
	*state = f;
	return 0;
}

static int
teardown(void **state)
{
	struct fixture *f = *state;
	char file[128];
	sqlite3_close(f->writer);
	const char *suffixes[] = {"", "-wal", "-shm", ".new"};
	for (size_t i = 0; i < 4; i++) {
		snprintf(file, sizeof(file), "%s%s", f->path, suffixes[i]);
		unlink(file);
	}
	rmdir(f->dir);
	free(f);
	return 0;
}

static void
exec(sqlite3 *db, const char *sql)
{
	char *err = NULL;
	int rc = sqlite3_exec(db, sql, NULL, NULL, &err);
	if (rc != SQLITE_OK) {
		fprintf(stderr, "sql failed: %s\n", err ? err : "?");
	}
	sqlite3_free(err);
	assert_int_equal(rc, SQLITE_OK);
}

static void
open_writer(struct fixture *f, const char *schema)
{
	assert_int_equal(sqlite3_open(f->path, &f->writer), SQLITE_OK);
	exec(f->writer, schema);
}

static void
add_run(sqlite3 *db, int id, const char *note)
{
	char sql[512];
	snprintf(sql, sizeof(sql),
	         "INSERT INTO runs (id, started_at, tern_version, host, note, config) VALUES "
	         "(%d, '2026-12-0%dT10:00:00Z', '0.1.0', 'h', '%s', '{\"quick\":true}');"
	         "INSERT INTO links VALUES (%d, 'lan', 125e6, 0);",
	         id, id, note, id);
	exec(db, sql);
}

static void
add_result(sqlite3 *db, int run, const char *layer, int rpm, double rate, int lost)
{
	char sql[512];
	snprintf(sql, sizeof(sql),
	         "INSERT INTO results (run_id, scenario, link, layer, mode, records_per_msg,"
	         " payload_bytes, record_bytes, seconds, messages, records, bytes, records_per_s,"
	         " bytes_per_s, link_share, lost) VALUES (%d, 'stream', 'lan', '%s', 'batched', %d,"
	         " %d, 40, 1, 10, 10, 400, %f, %f, %f, %d);",
	         run, layer, rpm, rpm * 40, rate, rate * 40, rate * 40 / 125e6, lost);
	exec(db, sql);
}

static const char *
string_of(const cJSON *obj, const char *name)
{
	const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, name);
	return cJSON_IsString(item) ? item->valuestring : NULL;
}

static double
number_of(const cJSON *obj, const char *name)
{
	const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, name);
	assert_true(cJSON_IsNumber(item));
	return item->valuedouble;
}

/* The Live view is off in these tests (no --connect): its time is never read. */
static const struct live_time no_time = {0, 0};

static cJSON *
reply(struct dash_store *st, const char *text)
{
	cJSON *msg = dash_protocol_reply(st, NULL, &no_time, text, strlen(text));
	assert_non_null(msg);
	return msg;
}

static void
test_missing_database_then_created(void **state)
{
	struct fixture *f = *state;
	struct dash_store *st = dash_store_open(f->path);
	assert_non_null(st);
	assert_int_equal(dash_store_state(st), DASH_STORE_MISSING);
	/* Read-only: looking at a missing database must not create it. */
	assert_int_not_equal(access(f->path, F_OK), 0);

	cJSON *runs = dash_protocol_runs(st);
	assert_string_equal(string_of(runs, "type"), "runs");
	cJSON *db = cJSON_GetObjectItemCaseSensitive(runs, "db");
	assert_string_equal(string_of(db, "state"), "missing");
	assert_string_equal(string_of(db, "path"), f->path);
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(runs, "runs")), 0);
	cJSON_Delete(runs);

	cJSON *events = cJSON_CreateArray();
	assert_int_equal(dash_store_poll(st, events), 0);

	open_writer(f, schema_v2);
	assert_int_equal(dash_store_poll(st, events), 1);
	assert_int_equal(dash_store_state(st), DASH_STORE_EMPTY);
	add_run(f->writer, 1, "first");
	assert_int_equal(dash_store_poll(st, events), 1);
	assert_int_equal(dash_store_state(st), DASH_STORE_READY);
	cJSON *last = cJSON_GetArrayItem(events, 1);
	assert_string_equal(string_of(last, "type"), "runs");
	cJSON *list = cJSON_GetObjectItemCaseSensitive(last, "runs");
	assert_int_equal(cJSON_GetArraySize(list), 1);
	assert_string_equal(string_of(cJSON_GetArrayItem(list, 0), "note"), "first");
	cJSON_Delete(events);
	dash_store_close(st);
}

static void
test_empty_and_broken_files(void **state)
{
	struct fixture *f = *state;
	FILE *file = fopen(f->path, "w");
	assert_non_null(file);
	fclose(file);
	struct dash_store *st = dash_store_open(f->path);
	assert_int_equal(dash_store_state(st), DASH_STORE_EMPTY);
	cJSON *msg = reply(st, "{\"type\":\"runs\"}");
	assert_string_equal(string_of(cJSON_GetObjectItemCaseSensitive(msg, "db"), "state"),
	                    "empty");
	cJSON_Delete(msg);
	msg = reply(st, "{\"type\":\"run\",\"run_id\":1}");
	assert_string_equal(string_of(msg, "type"), "error");
	cJSON_Delete(msg);
	dash_store_close(st);

	file = fopen(f->path, "w");
	assert_non_null(file);
	fputs("this is not an SQLite database, but it is long enough to look like one to a "
	      "reader that checks only the size of the first page of the file............\n",
	      file);
	fclose(file);
	st = dash_store_open(f->path);
	assert_int_equal(dash_store_state(st), DASH_STORE_BROKEN);
	msg = dash_protocol_runs(st);
	assert_string_equal(string_of(cJSON_GetObjectItemCaseSensitive(msg, "db"), "state"),
	                    "broken");
	cJSON_Delete(msg);
	dash_store_close(st);
}

static void
test_runs_run_and_trend(void **state)
{
	struct fixture *f = *state;
	open_writer(f, schema_v2);
	add_run(f->writer, 1, "<img src=x onerror=alert(1)>");
	add_result(f->writer, 1, "tern", 1, 1000, 0);
	add_result(f->writer, 1, "tcp", 1, 1100, 0);
	exec(f->writer, "UPDATE runs SET status = 'finished', finished_at = 'x' WHERE id = 1");
	add_run(f->writer, 2, "second");
	add_result(f->writer, 2, "tern", 1, 500, 0);
	exec(f->writer, "UPDATE results SET failed = 1, error = 'lost 3 records' WHERE id = 3;"
	                "UPDATE runs SET status = 'failed', finished_at = 'y' WHERE id = 2");

	struct dash_store *st = dash_store_open(f->path);
	assert_int_equal(dash_store_state(st), DASH_STORE_READY);
	cJSON *msg = reply(st, "{\"type\":\"runs\",\"req\":\"r1\"}");
	assert_string_equal(string_of(msg, "req"), "r1");
	cJSON *runs = cJSON_GetObjectItemCaseSensitive(msg, "runs");
	assert_int_equal(cJSON_GetArraySize(runs), 2);
	cJSON *newest = cJSON_GetArrayItem(runs, 0);
	assert_int_equal((int)number_of(newest, "id"), 2);
	assert_string_equal(string_of(newest, "status"), "failed");
	assert_int_equal((int)number_of(newest, "failed_cells"), 1);
	cJSON *oldest = cJSON_GetArrayItem(runs, 1);
	assert_string_equal(string_of(oldest, "note"), "<img src=x onerror=alert(1)>");
	assert_int_equal((int)number_of(oldest, "results"), 2);
	assert_int_equal((int)number_of(oldest, "last_result_id"), 2);
	/* The list leaves the configuration out; one run carries it. */
	assert_null(cJSON_GetObjectItemCaseSensitive(oldest, "config"));
	cJSON_Delete(msg);

	msg = reply(st, "{\"type\":\"run\",\"run_id\":1,\"req\":7}");
	assert_string_equal(string_of(msg, "type"), "run");
	assert_int_equal((int)number_of(msg, "req"), 7);
	assert_int_equal((int)number_of(msg, "run_id"), 1);
	cJSON *run = cJSON_GetObjectItemCaseSensitive(msg, "run");
	assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(
	    cJSON_GetObjectItemCaseSensitive(run, "config"), "quick")));
	cJSON *links = cJSON_GetObjectItemCaseSensitive(msg, "links");
	assert_int_equal(cJSON_GetArraySize(links), 1);
	assert_string_equal(string_of(cJSON_GetArrayItem(links, 0), "name"), "lan");
	cJSON *results = cJSON_GetObjectItemCaseSensitive(msg, "results");
	assert_int_equal(cJSON_GetArraySize(results), 2);
	assert_string_equal(string_of(cJSON_GetArrayItem(results, 1), "layer"), "tcp");
	assert_true(number_of(cJSON_GetArrayItem(results, 1), "records_per_s") == 1100);
	cJSON_Delete(msg);

	msg = reply(st, "{\"type\":\"trend\",\"link\":\"lan\",\"layer\":\"tern\",\"mode\":"
	                "\"batched\",\"records_per_msg\":1}");
	assert_string_equal(string_of(msg, "type"), "trend");
	assert_string_equal(string_of(cJSON_GetObjectItemCaseSensitive(msg, "cell"), "scenario"),
	                    "stream");
	cJSON *points = cJSON_GetObjectItemCaseSensitive(msg, "points");
	assert_int_equal(cJSON_GetArraySize(points), 2);
	cJSON *p0 = cJSON_GetArrayItem(points, 0);
	cJSON *p1 = cJSON_GetArrayItem(points, 1);
	assert_int_equal((int)number_of(p0, "run_id"), 1);
	assert_int_equal((int)number_of(p1, "run_id"), 2);
	assert_int_equal((int)number_of(p1, "failed"), 1);
	assert_string_equal(string_of(p1, "error"), "lost 3 records");
	assert_string_equal(string_of(p1, "run_note"), "second");
	cJSON_Delete(msg);
	dash_store_close(st);
}

static void
test_poll_pushes_a_live_run(void **state)
{
	struct fixture *f = *state;
	open_writer(f, schema_v2);
	add_run(f->writer, 1, "old");
	struct dash_store *st = dash_store_open(f->path);
	cJSON *events = cJSON_CreateArray();
	assert_int_equal(dash_store_poll(st, events), 0);

	add_run(f->writer, 2, "live");
	assert_int_equal(dash_store_poll(st, events), 1);
	cJSON *added = cJSON_GetArrayItem(events, 0);
	assert_string_equal(string_of(added, "type"), "run_added");
	cJSON *run = cJSON_GetObjectItemCaseSensitive(added, "run");
	assert_int_equal((int)number_of(run, "id"), 2);
	assert_string_equal(string_of(run, "status"), "running");

	add_result(f->writer, 2, "tern", 4, 4000, 0);
	add_result(f->writer, 2, "tcp", 4, 4400, 0);
	exec(f->writer, "UPDATE runs SET status = 'finished', finished_at = 'z' WHERE id = 2");
	assert_int_equal(dash_store_poll(st, events), 3);
	cJSON *r1 = cJSON_GetArrayItem(events, 1);
	cJSON *r2 = cJSON_GetArrayItem(events, 2);
	cJSON *done = cJSON_GetArrayItem(events, 3);
	assert_string_equal(string_of(r1, "type"), "result");
	assert_int_equal((int)number_of(r1, "run_id"), 2);
	assert_string_equal(string_of(cJSON_GetObjectItemCaseSensitive(r1, "result"), "layer"),
	                    "tern");
	assert_string_equal(string_of(cJSON_GetObjectItemCaseSensitive(r1, "link"), "name"), "lan");
	assert_string_equal(string_of(cJSON_GetObjectItemCaseSensitive(r2, "result"), "layer"),
	                    "tcp");
	/* The run finishes after its last result. */
	assert_string_equal(string_of(done, "type"), "run_updated");
	assert_string_equal(string_of(cJSON_GetObjectItemCaseSensitive(done, "run"), "status"),
	                    "finished");
	assert_int_equal((int)number_of(cJSON_GetObjectItemCaseSensitive(done, "run"), "results"),
	                 2);

	/* Nothing new: nothing pushed. */
	assert_int_equal(dash_store_poll(st, events), 0);
	cJSON_Delete(events);
	dash_store_close(st);
}

/* The status of run id in a list of runs (a runs reply's "runs"). */
static const char *
status_in(const cJSON *runs, int id)
{
	const cJSON *run;
	cJSON_ArrayForEach(run, runs)
	{
		if ((int)number_of(run, "id") == id) {
			return string_of(run, "status");
		}
	}
	return NULL;
}

/*
 * A bench killed with SIGKILL leaves its run `running` in the database: the
 * dashboard on the same host sees its pid is gone and says `interrupted`,
 * though nothing was committed; a run of another host is taken at its word.
 */
static void
test_dead_bench_is_interrupted(void **state)
{
	struct fixture *f = *state;
	char host[256];
	char sql[1024];
	assert_int_equal(gethostname(host, sizeof(host) - 1), 0);
	host[sizeof(host) - 1] = '\0';
	pid_t bench = fork();
	assert_true(bench >= 0);
	if (bench == 0) {
		/* A stand-in for the bench: alive until killed. */
		for (;;) {
			pause();
		}
	}
	open_writer(f, schema_v2);
	exec(f->writer, schema_v3_added);
	snprintf(sql, sizeof(sql),
	         "INSERT INTO runs (id, started_at, tern_version, host, config, pid) VALUES"
	         " (1, '2026-12-01T10:00:00Z', '0.1.0', '%s', '{}', %ld),"
	         " (2, '2026-12-02T10:00:00Z', '0.1.0', 'another-host', '{}', %ld);",
	         host, (long)bench, (long)bench);
	exec(f->writer, sql);
	struct dash_store *st = dash_store_open(f->path);
	cJSON *msg = reply(st, "{\"type\": \"runs\"}");
	cJSON *runs = cJSON_GetObjectItemCaseSensitive(msg, "runs");
	assert_string_equal(status_in(runs, 1), "running");
	assert_string_equal(status_in(runs, 2), "running");
	cJSON_Delete(msg);
	cJSON *events = cJSON_CreateArray();
	assert_int_equal(dash_store_poll(st, events), 0);

	assert_int_equal(kill(bench, SIGKILL), 0);
	assert_int_equal(waitpid(bench, NULL, 0), bench);
	assert_int_equal(dash_store_poll(st, events), 1);
	cJSON *updated = cJSON_GetArrayItem(events, 0);
	assert_string_equal(string_of(updated, "type"), "run_updated");
	cJSON *run = cJSON_GetObjectItemCaseSensitive(updated, "run");
	assert_int_equal((int)number_of(run, "id"), 1);
	assert_string_equal(string_of(run, "status"), "interrupted");
	assert_int_equal(dash_store_poll(st, events), 0);

	msg = reply(st, "{\"type\": \"runs\"}");
	runs = cJSON_GetObjectItemCaseSensitive(msg, "runs");
	assert_string_equal(status_in(runs, 1), "interrupted");
	assert_string_equal(status_in(runs, 2), "running");
	cJSON_Delete(msg);
	msg = reply(st, "{\"type\": \"run\", \"run_id\": 1}");
	assert_string_equal(string_of(cJSON_GetObjectItemCaseSensitive(msg, "run"), "status"),
	                    "interrupted");
	cJSON_Delete(msg);
	cJSON_Delete(events);
	dash_store_close(st);
}

static void
test_replaced_database(void **state)
{
	struct fixture *f = *state;
	open_writer(f, schema_v2);
	add_run(f->writer, 1, "old");
	struct dash_store *st = dash_store_open(f->path);
	sqlite3_close(f->writer);
	f->writer = NULL;

	char fresh[128];
	snprintf(fresh, sizeof(fresh), "%s.new", f->path);
	sqlite3 *other;
	assert_int_equal(sqlite3_open(fresh, &other), SQLITE_OK);
	exec(other, schema_v2);
	add_run(other, 5, "replacement");
	exec(other, "PRAGMA journal_mode = DELETE");
	sqlite3_close(other);
	/* As `rm bench.db*` before a new bench would: the old WAL goes with the old file. */
	char old[128];
	snprintf(old, sizeof(old), "%s-wal", f->path);
	unlink(old);
	snprintf(old, sizeof(old), "%s-shm", f->path);
	unlink(old);
	assert_int_equal(rename(fresh, f->path), 0);

	cJSON *events = cJSON_CreateArray();
	assert_int_equal(dash_store_poll(st, events), 1);
	cJSON *list = cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(events, 0), "runs");
	assert_int_equal(cJSON_GetArraySize(list), 1);
	assert_string_equal(string_of(cJSON_GetArrayItem(list, 0), "note"), "replacement");
	cJSON_Delete(events);

	/* Deleted: the clients hear that it is missing. */
	char wal[128];
	snprintf(wal, sizeof(wal), "%s-wal", f->path);
	unlink(wal);
	unlink(f->path);
	events = cJSON_CreateArray();
	assert_int_equal(dash_store_poll(st, events), 1);
	assert_string_equal(
	    string_of(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(events, 0), "db"),
	              "state"),
	    "missing");
	cJSON_Delete(events);
	dash_store_close(st);
}

static void
test_schema_version_1(void **state)
{
	struct fixture *f = *state;
	open_writer(f, schema_v1);
	add_run(f->writer, 1, "v1");
	add_result(f->writer, 1, "tern", 1, 1000, 0);
	add_result(f->writer, 1, "tcp", 1, 1000, 2);
	struct dash_store *st = dash_store_open(f->path);
	assert_int_equal(dash_store_state(st), DASH_STORE_READY);
	cJSON *msg = reply(st, "{\"type\":\"run\",\"run_id\":1}");
	cJSON *run = cJSON_GetObjectItemCaseSensitive(msg, "run");
	assert_string_equal(string_of(run, "status"), "running");
	assert_int_equal((int)number_of(run, "failed_cells"), 1);
	cJSON *results = cJSON_GetObjectItemCaseSensitive(msg, "results");
	assert_int_equal((int)number_of(cJSON_GetArrayItem(results, 0), "failed"), 0);
	assert_int_equal((int)number_of(cJSON_GetArrayItem(results, 1), "failed"), 1);
	cJSON_Delete(msg);

	cJSON *events = cJSON_CreateArray();
	exec(f->writer, "UPDATE runs SET finished_at = 'x' WHERE id = 1");
	assert_int_equal(dash_store_poll(st, events), 1);
	cJSON *done = cJSON_GetArrayItem(events, 0);
	assert_string_equal(string_of(done, "type"), "run_updated");
	assert_string_equal(string_of(cJSON_GetObjectItemCaseSensitive(done, "run"), "status"),
	                    "finished");
	cJSON_Delete(events);
	dash_store_close(st);
}

static void
expect_error(struct dash_store *st, const char *request, const char *mentions)
{
	cJSON *msg = reply(st, request);
	assert_string_equal(string_of(msg, "type"), "error");
	const char *error = string_of(msg, "error");
	assert_non_null(error);
	if (strstr(error, mentions) == NULL) {
		fprintf(stderr, "error \"%s\" does not mention \"%s\"\n", error, mentions);
		fail();
	}
	cJSON_Delete(msg);
}

/* A finished schema-3 run with its environment (the kernel named). */
static void
add_run_v3(sqlite3 *db, int id, const char *kernel)
{
	char sql[512];
	add_run(db, id, "repeated");
	snprintf(sql, sizeof(sql),
	         "UPDATE runs SET status = 'finished', finished_at = 'z', cpu_model = 'Test CPU',"
	         " kernel = '%s', compiler = 'gcc 12.2.0', build_type = 'RelWithDebInfo',"
	         " tern_commit = 'abc1234', env = '{\"governor\":\"performance\"}' WHERE id = %d",
	         kernel, id);
	exec(db, sql);
}

/* Three repeats of one cell: rate x (1 - 1%, 1, 1 + 1%). */
static void
add_repeats(sqlite3 *db, int run, const char *layer, double rate)
{
	const double spread[] = {0.99, 1.0, 1.01};
	char sql[128];
	for (int i = 0; i < 3; i++) {
		add_result(db, run, layer, 16, rate * spread[i], 0);
		snprintf(sql, sizeof(sql),
		         "UPDATE results SET repeat = %d WHERE id = last_insert_rowid()", i);
		exec(db, sql);
	}
}

static const cJSON *
compare_cell(const cJSON *msg, const char *layer)
{
	const cJSON *cell;
	cJSON_ArrayForEach(cell, cJSON_GetObjectItemCaseSensitive(msg, "cells"))
	{
		if (strcmp(string_of(cell, "layer"), layer) == 0) {
			return cell;
		}
	}
	fail_msg("no %s cell in the comparison", layer);
	return NULL;
}

static void
test_compare(void **state)
{
	struct fixture *f = *state;
	open_writer(f, schema_v2);
	exec(f->writer, schema_v3_added);
	/* 1 and 2: the same samples. 3: tern at half the rate, on another kernel. */
	for (int run = 1; run <= 3; run++) {
		add_run_v3(f->writer, run, run == 3 ? "6.18.1" : "6.18.0");
		add_repeats(f->writer, run, "tern", run == 3 ? 500000 : 1000000);
		add_repeats(f->writer, run, "tcp", 2000000);
	}
	struct dash_store *st = dash_store_open(f->path);
	assert_int_equal(dash_store_state(st), DASH_STORE_READY);

	cJSON *msg = reply(st, "{\"type\":\"compare\",\"a\":1,\"b\":2,\"req\":5}");
	assert_string_equal(string_of(msg, "type"), "compare");
	assert_int_equal((int)number_of(msg, "req"), 5);
	assert_int_equal((int)number_of(msg, "a"), 1);
	assert_int_equal((int)number_of(msg, "b"), 2);
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(msg, "environment")),
	                 0);
	const cJSON *sum = cJSON_GetObjectItemCaseSensitive(msg, "summary");
	assert_int_equal((int)number_of(sum, "cells"), 2);
	assert_int_equal((int)number_of(sum, "regressions"), 0);
	assert_int_equal((int)number_of(sum, "improvements"), 0);
	assert_int_equal((int)number_of(sum, "same"), 2);
	const cJSON *tern = compare_cell(msg, "tern");
	assert_string_equal(string_of(tern, "verdict"), "same");
	assert_true(cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(tern, "tested")));
	assert_int_equal((int)number_of(cJSON_GetObjectItemCaseSensitive(tern, "a"), "n"), 3);
	assert_true(number_of(tern, "p") > 0.99);
	cJSON_Delete(msg);

	msg = reply(st, "{\"type\":\"compare\",\"a\":1,\"b\":3}");
	sum = cJSON_GetObjectItemCaseSensitive(msg, "summary");
	assert_int_equal((int)number_of(sum, "regressions"), 1);
	assert_int_equal((int)number_of(sum, "same"), 1);
	tern = compare_cell(msg, "tern");
	assert_string_equal(string_of(tern, "verdict"), "regression");
	assert_true(number_of(tern, "p") < 0.01);
	assert_true(number_of(tern, "change_pct") < -49 && number_of(tern, "change_pct") > -51);
	assert_true(number_of(cJSON_GetObjectItemCaseSensitive(tern, "b"), "median") == 500000);
	assert_string_equal(string_of(compare_cell(msg, "tcp"), "verdict"), "same");
	const cJSON *env = cJSON_GetObjectItemCaseSensitive(msg, "environment");
	assert_int_equal(cJSON_GetArraySize(env), 1);
	assert_string_equal(string_of(cJSON_GetArrayItem(env, 0), "name"), "kernel");
	assert_string_equal(string_of(cJSON_GetArrayItem(env, 0), "a"), "6.18.0");
	assert_string_equal(string_of(cJSON_GetArrayItem(env, 0), "b"), "6.18.1");
	cJSON_Delete(msg);

	/* The run carries its environment, env as an object. */
	msg = reply(st, "{\"type\":\"run\",\"run_id\":3}");
	const cJSON *run = cJSON_GetObjectItemCaseSensitive(msg, "run");
	assert_string_equal(string_of(run, "kernel"), "6.18.1");
	assert_string_equal(string_of(run, "tern_commit"), "abc1234");
	assert_string_equal(string_of(run, "build_type"), "RelWithDebInfo");
	assert_string_equal(string_of(cJSON_GetObjectItemCaseSensitive(run, "env"), "governor"),
	                    "performance");
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(msg, "results")), 6);
	cJSON_Delete(msg);

	expect_error(st, "{\"type\":\"compare\",\"a\":1}", "\"b\"");
	expect_error(st, "{\"type\":\"compare\",\"a\":\"1\",\"b\":2}", "positive integers");
	expect_error(st, "{\"type\":\"compare\",\"a\":0,\"b\":2}", "positive integers");
	expect_error(st, "{\"type\":\"compare\",\"a\":1,\"b\":99}", "no run 99");
	msg = reply(st, "{\"type\":\"compare\",\"a\":99,\"b\":1,\"req\":\"c\"}");
	assert_string_equal(string_of(msg, "request"), "compare");
	assert_string_equal(string_of(msg, "req"), "c");
	cJSON_Delete(msg);
	dash_store_close(st);

	/* Nothing to compare in a missing database: an error, and still no file. */
	char missing[128];
	snprintf(missing, sizeof(missing), "%s/none.db", f->dir);
	st = dash_store_open(missing);
	expect_error(st, "{\"type\":\"compare\",\"a\":1,\"b\":2}", "does not exist");
	assert_int_not_equal(access(missing, F_OK), 0);
	dash_store_close(st);
}

static void
test_bad_requests(void **state)
{
	struct fixture *f = *state;
	open_writer(f, schema_v2);
	add_run(f->writer, 1, "x");
	struct dash_store *st = dash_store_open(f->path);
	expect_error(st, "{not json", "not valid JSON");
	expect_error(st, "[1,2]", "JSON object");
	expect_error(st, "{\"kind\":\"runs\"}", "\"type\"");
	expect_error(st, "{\"type\":\"drop tables\"}", "unknown message type");
	expect_error(st, "{\"type\":\"run\"}", "run_id");
	expect_error(st, "{\"type\":\"run\",\"run_id\":\"1\"}", "run_id");
	expect_error(st, "{\"type\":\"run\",\"run_id\":1.5}", "run_id");
	expect_error(st, "{\"type\":\"run\",\"run_id\":-3}", "run_id");
	expect_error(st, "{\"type\":\"run\",\"run_id\":1e300}", "run_id");
	expect_error(st, "{\"type\":\"run\",\"run_id\":99}", "no run 99");
	expect_error(st, "{\"type\":\"trend\",\"link\":\"lan\"}", "layer");
	expect_error(st,
	             "{\"type\":\"trend\",\"link\":\"lan\",\"layer\":\"tern\",\"mode\":\"batched\","
	             "\"records_per_msg\":-1}",
	             "records_per_msg");
	expect_error(st,
	             "{\"type\":\"trend\",\"link\":\"\",\"layer\":\"tern\",\"mode\":\"batched\","
	             "\"records_per_msg\":1}",
	             "non-empty");

	/* The error says which request failed, and carries the request's tag. */
	cJSON *msg = reply(st, "{\"type\":\"run\",\"run_id\":42,\"req\":3}");
	assert_string_equal(string_of(msg, "request"), "run");
	assert_int_equal((int)number_of(msg, "req"), 3);
	cJSON_Delete(msg);

	/* A message over the limit is refused without being parsed. */
	size_t big = DASH_MAX_REQUEST + 1;
	char *text = malloc(big);
	assert_non_null(text);
	memset(text, ' ', big);
	msg = dash_protocol_reply(st, NULL, &no_time, text, big);
	assert_string_equal(string_of(msg, "type"), "error");
	cJSON_Delete(msg);
	free(text);
	dash_store_close(st);
}

static void
test_origin_check(void **state)
{
	(void)state;
	assert_true(dash_server_origin_allowed(NULL, "127.0.0.1:8080", true));
	assert_true(dash_server_origin_allowed("http://127.0.0.1:8080", "127.0.0.1:8080", true));
	assert_true(dash_server_origin_allowed("http://localhost:8080", "localhost:8080", true));
	assert_true(dash_server_origin_allowed("http://[::1]:8080", "[::1]:8080", true));
	assert_false(dash_server_origin_allowed("http://evil.example", "127.0.0.1:8080", true));
	assert_false(dash_server_origin_allowed("http://127.0.0.1:9999", "127.0.0.1:8080", true));
	assert_false(dash_server_origin_allowed("null", "127.0.0.1:8080", true));
	assert_false(dash_server_origin_allowed("http://127.0.0.1:8080", NULL, true));
	/* DNS rebinding: the attacker's name resolves to loopback; Host and Origin agree. */
	assert_false(
	    dash_server_origin_allowed("http://evil.example:8080", "evil.example:8080", true));
	assert_true(dash_server_origin_allowed("http://bench.lan:8080", "bench.lan:8080", false));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test_setup_teardown(test_missing_database_then_created, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_empty_and_broken_files, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_runs_run_and_trend, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_poll_pushes_a_live_run, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_replaced_database, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_dead_bench_is_interrupted, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_schema_version_1, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_bad_requests, setup, teardown),
	    cmocka_unit_test_setup_teardown(test_compare, setup, teardown),
	    cmocka_unit_test(test_origin_check),
	};
	return cmocka_run_group_tests_name("dashboard_store", tests, NULL, NULL);
}
