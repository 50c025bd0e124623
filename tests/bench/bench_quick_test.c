/*
 * bench_quick_test.c - `tern bench --quick` end to end: it finishes, exits 0,
 * and stores one row per cell of the quick matrix with sane figures, and
 * --out writes the same run as JSON.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <cjson/cJSON.h>
#include <string.h>

#include "bench.h"
#include "bench_db_check.h"
#include "layer.h"

/*
 * The quick matrix, with L layers (tcp and tern, and zmq when it was built):
 * stream on 6 links x L layers x 2 modes x 3 sizes, and open loop at each
 * link's default rate x L layers x 2 modes; pingpong on loopback, 2
 * concurrencies x 2 modes x the 2 layers with a reply path (zmq has none);
 * bytes on unix, 2 sizes x 2 modes x L layers; fanin on lan, one batch size
 * batched plus lowlat, x L layers.
 */
static int
quick_cells(int layers)
{
	return 36 * layers + 12 * layers + 8 + 4 * layers + 2 * layers;
}

/* Results of the JSON report with a rate and latencies; every result must
 * have a "rate" (null when closed loop). */
static int
json_open_loop(const cJSON *json)
{
	const cJSON *x;
	int n = 0;

	cJSON_ArrayForEach(x, cJSON_GetObjectItem(json, "results"))
	{
		const cJSON *rate = cJSON_GetObjectItem(x, "rate");

		assert_non_null(rate);
		if (cJSON_IsNumber(rate) && rate->valuedouble > 0 &&
		    cJSON_IsNumber(cJSON_GetObjectItem(x, "lat_p999_us"))) {
			n++;
		}
	}
	return n;
}

static void
quick_run_stores_sane_rows(void **state)
{
	char db[64];
	char out[80];
	char *argv[] = {"bench", "--quick", "--db", db, "--out", out, "--note", "quick test", NULL};
	int layers = layer_find("zmq") != NULL ? 3 : 2;
	int cells = quick_cells(layers);
	FILE *f;
	cJSON *json;
	char *text;
	long n;
	int rc;

	(void)state;
	scratch_db(db, sizeof(db), "quick");
	snprintf(out, sizeof(out), "%s.json", db);
	rc = bench_main(8, argv);
	assert_int_equal(rc, 0);

	assert_int_equal(db_number(db, "SELECT count(*) FROM runs"), 1);
	assert_int_equal(db_number(db, "SELECT count(*) FROM runs WHERE status='finished' AND "
	                               "finished_at IS NOT NULL AND note='quick test'"),
	                 1);
	assert_int_equal(db_number(db, "SELECT count(*) FROM links"), 6);
	assert_int_equal(db_number(db, "SELECT count(*) FROM results"), cells);
	/* Every row is a success with figures that make sense. */
	assert_int_equal(db_number(db,
	                           "SELECT count(*) FROM results WHERE failed=0 AND lost=0 "
	                           "AND error IS NULL AND records_per_s > 0 AND bytes_per_s > 0 "
	                           "AND seconds > 0 AND records > 0 AND messages > 0"),
	                 cells);
	assert_int_equal(db_number(db, "SELECT count(*) FROM results WHERE link_share IS NOT NULL "
	                               "AND link_share > 1.02"),
	                 0);
	assert_int_equal(db_number(db, "SELECT count(*) FROM results WHERE link IN "
	                               "('lan','wifi','lte','wan') AND link_share IS NULL"),
	                 0);
	assert_int_equal(db_number(db, "SELECT count(*) FROM results WHERE scenario != 'bytes' "
	                               "AND record_bytes != 64"),
	                 0);
	assert_int_equal(db_number(db, "SELECT count(*) FROM results WHERE scenario='stream' AND "
	                               "payload_bytes != records_per_msg * 64"),
	                 0);
	/* Every layer, both modes, every link. */
	assert_int_equal(db_number(db, "SELECT count(DISTINCT layer || mode || link) FROM results "
	                               "WHERE scenario='stream'"),
	                 12 * layers);
	/* Open loop: half of each link's bandwidth in 64-byte records, 100k on
	 * loopback and unix; the whole schedule of 0.2 s sent; latencies. */
	assert_int_equal(db_number(db, "SELECT count(*) FROM results WHERE scenario='stream' AND "
	                               "rate IS NULL AND lat_p50_us IS NULL"),
	                 36 * layers);
	assert_int_equal(
	    db_number(db, "SELECT count(*) FROM results WHERE scenario='stream' AND "
	                  "records_per_msg=1 AND rate = CASE link WHEN 'lan' THEN 976562 "
	                  "WHEN 'wifi' THEN 93750 WHEN 'lte' THEN 46875 WHEN 'wan' THEN 195312 "
	                  "ELSE 100000 END AND records >= rate * 0.2 AND records < rate * 0.2 + 1 "
	                  "AND lat_p50_us > 0 AND lat_p99_us >= lat_p50_us AND "
	                  "lat_p999_us >= lat_p99_us"),
	    12 * layers);
	assert_int_equal(db_number(db, "SELECT count(DISTINCT layer || mode || link) FROM results "
	                               "WHERE rate IS NOT NULL"),
	                 12 * layers);
	assert_int_equal(db_number(db, "SELECT count(DISTINCT layer) FROM results"), layers);
	assert_int_equal(db_number(db, "SELECT count(*) FROM results WHERE scenario='pingpong' "
	                               "AND lat_p50_us > 0 AND lat_p999_us >= lat_p50_us"),
	                 8);
	assert_int_equal(db_number(db, "SELECT count(*) FROM results WHERE scenario='pingpong' "
	                               "AND layer NOT IN ('tcp','tern')"),
	                 0);
	assert_int_equal(db_number(db, "SELECT count(*) FROM results WHERE scenario='fanin' AND "
	                               "concurrency=4 AND spread >= 1"),
	                 2 * layers);
	assert_int_equal(db_number(db, "SELECT count(*) FROM results WHERE cpu_s_per_gb > 0"),
	                 cells);
	/* 1024 records of 64 bytes make a 64 KiB message. */
	assert_int_equal(db_number(db, "SELECT count(*) FROM results WHERE records_per_msg=1024 "
	                               "AND payload_bytes=65536"),
	                 12 * layers);

	f = fopen(out, "r");
	assert_non_null(f);
	text = test_malloc(1 << 20);
	n = (long)fread(text, 1, (1 << 20) - 1, f);
	fclose(f);
	text[n] = '\0';
	json = cJSON_Parse(text);
	test_free(text);
	assert_non_null(json);
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(json, "results")), cells);
	assert_int_equal(json_open_loop(json), 12 * layers);
	assert_string_equal(cJSON_GetObjectItem(json, "status")->valuestring, "finished");
	cJSON_Delete(json);
	unlink(out);
	remove_db(db);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(quick_run_stores_sane_rows),
	};

	return cmocka_run_group_tests_name("bench_quick", tests, NULL, NULL);
}
