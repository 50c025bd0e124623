/*
 * bench_keys_test.c - `tern bench --keys`: stream cells spread over 1 and
 * 1,000 keys, for the tcp and tern layers in both modes, each stored with
 * its number of keys, every record delivered. No figure is asserted.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "bench.h"
#include "bench_db_check.h"

static void
keys_cells_are_stored(void **state)
{
	char db[64];
	char *argv[] = {"bench",     "--scenarios", "stream", "--links",   "loopback", "--layers",
	                "tcp,tern",  "--keys",      "1,1000", "--records", "1",        "--duration",
	                "0.2",       "--rate",      "0",      "--db",      db,         "--note",
	                "keys test", NULL};
	int argc = (int)(sizeof(argv) / sizeof(argv[0])) - 1;

	(void)state;
	scratch_db(db, sizeof(db), "keys");
	assert_int_equal(bench_main(argc, argv), 0);
	/* 2 numbers of keys x 2 layers x 2 modes */
	assert_int_equal(db_number(db, "SELECT count(*) FROM results"), 8);
	assert_int_equal(db_number(db, "SELECT count(*) FROM results WHERE failed != 0 OR "
	                               "lost != 0 OR error IS NOT NULL OR records = 0 OR "
	                               "records_per_s <= 0"),
	                 0);
	assert_int_equal(db_number(db, "SELECT count(DISTINCT layer || mode) FROM results "
	                               "WHERE keys = 1000"),
	                 4);
	assert_int_equal(db_number(db, "SELECT count(DISTINCT layer || mode) FROM results "
	                               "WHERE keys = 1"),
	                 4);
	assert_int_equal(db_number(db, "SELECT count(*) FROM runs WHERE status = 'finished'"), 1);
	remove_db(db);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(keys_cells_are_stored),
	};

	return cmocka_run_group_tests_name("bench_keys", tests, NULL, NULL);
}
