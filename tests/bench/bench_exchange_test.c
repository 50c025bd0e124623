/*
 * bench_exchange_test.c - `tern bench export` then `tern bench import` gives
 * the same rows (every column but the ids, with its type), in a run of its
 * own that keeps its host and environment; a broken file imports nothing.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <string.h>

#include "bench.h"
#include "bench_db_check.h"
#include "store.h"

/* Every row of table for run, every column but the ids, as "type:text|". */
static char *
dump(const char *db, const char *table, int64_t run)
{
	static char buf[1 << 16];
	char sql[160];
	sqlite3 *h;
	sqlite3_stmt *s;
	size_t len = 0;

	snprintf(sql, sizeof(sql), "SELECT * FROM %s WHERE %s = %lld ORDER BY rowid", table,
	         strcmp(table, "runs") == 0 ? "id" : "run_id", (long long)run);
	assert_int_equal(sqlite3_open(db, &h), SQLITE_OK);
	assert_int_equal(sqlite3_prepare_v2(h, sql, -1, &s, NULL), SQLITE_OK);
	buf[0] = '\0';
	while (sqlite3_step(s) == SQLITE_ROW) {
		int i;

		for (i = 0; i < sqlite3_column_count(s); i++) {
			const char *name = sqlite3_column_name(s, i);
			const unsigned char *t;

			if (strcmp(name, "id") == 0 || strcmp(name, "run_id") == 0) {
				continue;
			}
			t = sqlite3_column_text(s, i);
			len +=
			    (size_t)snprintf(buf + len, sizeof(buf) - len, "%s=%d:%s|", name,
			                     sqlite3_column_type(s, i), t ? (const char *)t : "");
			assert_true(len < sizeof(buf));
		}
		len += (size_t)snprintf(buf + len, sizeof(buf) - len, "\n");
	}
	sqlite3_finalize(s);
	sqlite3_close(h);
	return strdup(buf);
}

static void
write_run(const char *db)
{
	struct bench_link wifi = {.name = "wifi", .bandwidth_Bps = 12e6, .rtt_ms = 10};
	struct bench_link loop = {.name = "loopback"};
	struct run_info ri = {.tern_version = "0.1.0",
	                      .host = "far-away-host",
	                      .cpu = "cpu \"quoted\" é",
	                      .cores = 64,
	                      .note = "from another machine",
	                      .config_json = "{\"duration\":5}",
	                      .cpu_model = "cpu \"quoted\" é",
	                      .kernel = "Linux 6.1.0 x86_64",
	                      .compiler = "GNU 12.2.0",
	                      .build_type = "Release",
	                      .tern_commit = "0123456789ab",
	                      .env_json = "{\"governor\":\"performance\",\"load_1m\":0.25}",
	                      .pid = 4242};
	struct cell c = {.kind = SCEN_PINGPONG,
	                 .link = &wifi,
	                 .layer = &layer_tern_ops,
	                 .lowlat = true,
	                 .records_per_msg = 1,
	                 .payload_bytes = 64,
	                 .concurrency = 1000,
	                 .duration = 5};
	struct cell_result r;
	char err[300];
	int64_t id;
	store *st;
	int i;

	assert_int_equal(store_open(&st, db, err, sizeof(err)), 0);
	assert_int_equal(store_run_begin(st, &ri, &id, err, sizeof(err)), 0);
	assert_int_equal(store_link(st, id, &wifi, err, sizeof(err)), 0);
	assert_int_equal(store_link(st, id, &loop, err, sizeof(err)), 0);
	for (i = 0; i < 3; i++) {
		memset(&r, 0, sizeof(r));
		r.seconds = 5.000123456789;
		r.messages = r.records = 123456789012ull;
		r.bytes = 9007199254740000ull; /* near 2^53, still exact in JSON */
		r.records_per_s = 24691.358024691357;
		r.bytes_per_s = 1580246.9135802468 + i;
		r.link_share = 0.13168724279835392;
		r.lat_p50_us = 1234.5;
		r.lat_p99_us = 2345.25;
		r.lat_p999_us = 9999.125;
		r.spread = -1;
		r.cpu_s_per_gb = 3.25;
		c.repeat = (uint32_t)i;
		c.rate = i == 2 ? 48828.125 : 0;
		r.failed = i == 1;
		snprintf(r.error, sizeof(r.error),
		         "sender 0: record 7 came after 9 (\"reordered\")");
		assert_int_equal(store_result(st, id, &c, &r, err, sizeof(err)), 0);
	}
	assert_int_equal(store_run_end(st, id, "failed", err, sizeof(err)), 0);
	store_close(st);
}

static void
export_then_import_gives_the_same_rows(void **state)
{
	static const char *const tables[] = {"runs", "links", "results"};
	char src[64];
	char dst[64];
	char file[80];
	char *exp[] = {"bench", "export", "1", "--out", file, "--db", src, NULL};
	char *imp[] = {"bench", "import", file, "--db", dst, NULL};
	size_t i;

	(void)state;
	scratch_db(src, sizeof(src), "export");
	scratch_db(dst, sizeof(dst), "import");
	snprintf(file, sizeof(file), "%s.json", src);
	write_run(src);
	assert_int_equal(bench_main(7, exp), 0);
	/* into a database with a run of its own, so the ids differ */
	write_run(dst);
	assert_int_equal(bench_main(5, imp), 0);
	assert_int_equal(db_number(dst, "SELECT count(*) FROM runs"), 2);
	for (i = 0; i < 3; i++) {
		char *a = dump(src, tables[i], 1);
		char *b = dump(dst, tables[i], 2);

		assert_true(strlen(a) > 10);
		assert_string_equal(a, b);
		free(a);
		free(b);
	}
	assert_int_equal(db_number(dst, "SELECT count(*) FROM runs WHERE id = 2 AND "
	                                "host = 'far-away-host' AND pid = 4242"),
	                 1);
	unlink(file);
	remove_db(src);
	remove_db(dst);
}

static void
broken_files_import_nothing(void **state)
{
	char dst[64];
	char file[80];
	char *imp[] = {"bench", "import", file, "--db", dst, NULL};
	static const char *const bad[] = {
	    "not json",
	    "{\"format\":\"something-else\",\"version\":1}",
	    "{\"format\":\"tern-bench-run\",\"version\":99,\"run\":{},\"links\":[],\"results\":[]}",
	    /* the run goes in, then a result lacks what the schema needs: rolled back */
	    "{\"format\":\"tern-bench-run\",\"version\":1,\"run\":{\"started_at\":\"x\","
	    "\"tern_version\":\"0\",\"config\":\"{}\"},\"links\":[],\"results\":[{\"link\":\"x\"}]"
	    "}",
	};
	size_t i;

	(void)state;
	scratch_db(dst, sizeof(dst), "import-bad");
	snprintf(file, sizeof(file), "%s.json", dst);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		FILE *f = fopen(file, "w");

		assert_non_null(f);
		fputs(bad[i], f);
		fclose(f);
		assert_int_equal(bench_main(5, imp), 1);
	}
	assert_true(db_number(dst, "SELECT count(*) FROM runs") <= 0);
	unlink(file);
	remove_db(dst);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(export_then_import_gives_the_same_rows),
	    cmocka_unit_test(broken_files_import_nothing),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
