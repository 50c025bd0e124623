/*
 * bench_tls_test.c - `tern bench --tls`: the tcp and tern layers deliver
 * everything over TLS 1.3 (stream batched and low-latency, pingpong, fanin,
 * over loopback and the emulated lan), the run's config says "tls": true,
 * and zmq and the unix link, which have no TLS, are left out. No figure is
 * asserted, only delivery.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <string.h>

#include "bench.h"
#include "bench_db_check.h"

static void
tls_cells_lose_nothing(void **state)
{
	char db[64];
	char *argv[] = {"bench",
	                "--tls",
	                "--scenarios",
	                "stream,pingpong,fanin",
	                "--links",
	                "loopback,lan,unix",
	                "--records",
	                "1,64",
	                "--connections",
	                "4",
	                "--batch-bytes",
	                "16384",
	                "--concurrency",
	                "1,16",
	                "--duration",
	                "0.2",
	                "--rate",
	                "0",
	                "--db",
	                db,
	                NULL};
	int argc = (int)(sizeof(argv) / sizeof(argv[0])) - 1;

	(void)state;
	scratch_db(db, sizeof(db), "tls");
	assert_int_equal(bench_main(argc, argv), 0);
	assert_true(db_number(db, "SELECT count(*) FROM results") > 0);
	assert_int_equal(db_number(db,
	                           "SELECT count(*) FROM results WHERE failed != 0 OR lost != 0 "
	                           "OR records = 0"),
	                 0);
	assert_int_equal(db_number(db, "SELECT count(*) FROM results WHERE link = 'unix' OR "
	                               "layer NOT IN ('tcp', 'tern')"),
	                 0);
	assert_true(db_number(db, "SELECT count(*) FROM results WHERE layer = 'tcp'") ==
	            db_number(db, "SELECT count(*) FROM results WHERE layer = 'tern'"));
	assert_int_equal(db_number(db, "SELECT count(*) FROM runs WHERE "
	                               "json_extract(config, '$.tls') = 1"),
	                 1);
	remove_db(db);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(tls_cells_lose_nothing),
	};

	return cmocka_run_group_tests_name("bench_tls", tests, NULL, NULL);
}
