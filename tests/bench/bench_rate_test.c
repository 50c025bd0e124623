/*
 * bench_rate_test.c - open-loop stream cells (--rate): latency is measured
 * from each record's intended send time, so offering a link more than it
 * carries shows as a latency that grows with the backlog; every scheduled
 * record is sent and none is lost; --rate 0 leaves the open-loop cells out,
 * and a record dropped on purpose still fails an open-loop cell.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <string.h>

#include "bench.h"
#include "bench_db_check.h"

/* One figure of the open-loop cell of a layer, mode and rate. */
static double
cell_figure(const char *db, const char *col, const char *layer, const char *mode, double rate)
{
	char sql[256];

	snprintf(sql, sizeof(sql),
	         "SELECT %s FROM results WHERE layer='%s' AND mode='%s' AND rate=%.0f", col, layer,
	         mode, rate);
	return db_number(db, sql);
}

/*
 * A 1 MB/s link without delay, offered 2k and 40k one-record messages/s for
 * 0.5 s, on both layers and modes.
 *
 * 2k rec/s is 128 kB/s of payload (about 140 kB/s on the wire): the link is
 * 14% busy, a record crosses in about 70 us, and the median latency is a
 * fraction of a millisecond.
 *
 * 40k rec/s is 2.56 MB/s: 20000 records scheduled in 0.5 s, which the link
 * needs at least 20000 x 64 B / 1 MB/s = 1.28 s to carry. Record i is due
 * at i / 40000 s and cannot arrive before (i + 1) x 64 us, so its latency
 * is at least i x 39 us, and the 10000th (the median) at least 0.39 s;
 * with the framing on the wire, about 0.45 s. A slow or loaded machine can
 * only add to that, so the checks are a floor of 0.3 s and ten times the
 * 2k cell's median (which a machine would have to hold up by 30 ms at the
 * median to break).
 */
static void
latency_rises_when_the_offered_rate_exceeds_the_link(void **state)
{
	static const char *const layers[] = {"tcp", "tern"};
	static const char *const modes[] = {"batched", "lowlat"};
	char db[64];
	char *argv[] = {"bench", "--scenarios", "stream", "--link",    "slow=1:0", "--links",
	                "slow",  "--rate",      "2k,40k", "--records", "1",        "--duration",
	                "0.5",   "--db",        db,       "--layers",  "tcp,tern", NULL};
	size_t y;
	size_t m;

	(void)state;
	scratch_db(db, sizeof(db), "rate");
	assert_int_equal(bench_main(17, argv), 0);
	/* 4 closed-loop cells and 8 open-loop ones, all delivered in full */
	assert_int_equal(db_number(db, "SELECT count(*) FROM results"), 12);
	assert_int_equal(db_number(db, "SELECT count(*) FROM results WHERE failed=0 AND lost=0"),
	                 12);
	assert_int_equal(db_number(db, "SELECT count(*) FROM results WHERE rate IS NULL AND "
	                               "lat_p50_us IS NULL"),
	                 4);
	assert_int_equal(db_number(db, "SELECT count(*) FROM results WHERE rate IS NOT NULL AND "
	                               "records_per_msg=1 AND lat_p50_us > 0 AND "
	                               "lat_p99_us >= lat_p50_us AND lat_p999_us >= lat_p99_us"),
	                 8);
	for (y = 0; y < 2; y++) {
		for (m = 0; m < 2; m++) {
			double below = cell_figure(db, "lat_p50_us", layers[y], modes[m], 2000);
			double above = cell_figure(db, "lat_p50_us", layers[y], modes[m], 40000);

			print_message("%s %s: p50 %.0f us at 2k rec/s, %.0f us at 40k rec/s\n",
			              layers[y], modes[m], below, above);
			/* the whole schedule, late or not: nothing skipped */
			assert_true(cell_figure(db, "records", layers[y], modes[m], 2000) == 1000);
			assert_true(cell_figure(db, "records", layers[y], modes[m], 40000) ==
			            20000);
			assert_true(below > 0);
			assert_true(above >= 300e3);
			assert_true(above >= 10 * below);
			/* delivered: no more than the link carries */
			assert_true(cell_figure(db, "records_per_s", layers[y], modes[m], 40000) <=
			            1.02 * 1e6 / 64);
		}
	}
	remove_db(db);
}

static void
rate_zero_leaves_open_loop_out(void **state)
{
	char db[64];
	char *argv[] = {"bench", "--scenarios", "stream", "--links", "loopback", "--rate",
	                "0",     "--layers",    "tcp",    "--modes", "batched",  "--records",
	                "1",     "--duration",  "0.05",   "--db",    db,         NULL};

	(void)state;
	scratch_db(db, sizeof(db), "rate0");
	assert_int_equal(bench_main(17, argv), 0);
	assert_int_equal(db_number(db, "SELECT count(*) FROM results"), 1);
	assert_int_equal(db_number(db, "SELECT count(*) FROM results WHERE rate IS NULL"), 1);
	remove_db(db);
}

static void
dropped_record_fails_an_open_loop_cell(void **state)
{
	char db[64];
	char *argv[] = {"bench", "--scenarios", "stream", "--links", "loopback", "--rate",
	                "1k",    "--layers",    "tern",   "--modes", "batched",  "--records",
	                "1",     "--duration",  "0.1",    "--db",    db,         NULL};
	int rc;

	(void)state;
	scratch_db(db, sizeof(db), "ratefault");
	setenv("TERN_BENCH_FAULT", "drop-record", 1);
	rc = bench_main(17, argv);
	unsetenv("TERN_BENCH_FAULT");
	assert_int_equal(rc, 1);
	assert_int_equal(db_number(db, "SELECT count(*) FROM results WHERE rate=1000 AND "
	                               "failed=1 AND lost=1 AND error LIKE '%lost%'"),
	                 1);
	remove_db(db);
}

static void
bad_rates_are_usage_errors(void **state)
{
	char *a1[] = {"bench", "--rate", "0,5k", NULL};
	char *a2[] = {"bench", "--rate", "5x", NULL};
	char *a3[] = {"bench", "--rate", "200M", NULL};
	char *a4[] = {"bench", "--rate", "", NULL};

	(void)state;
	assert_int_equal(bench_main(3, a1), 2);
	assert_int_equal(bench_main(3, a2), 2);
	assert_int_equal(bench_main(3, a3), 2);
	assert_int_equal(bench_main(3, a4), 2);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(bad_rates_are_usage_errors),
	    cmocka_unit_test(rate_zero_leaves_open_loop_out),
	    cmocka_unit_test(dropped_record_fails_an_open_loop_cell),
	    cmocka_unit_test(latency_rises_when_the_offered_rate_exceeds_the_link),
	};

	return cmocka_run_group_tests_name("bench_rate", tests, NULL, NULL);
}
