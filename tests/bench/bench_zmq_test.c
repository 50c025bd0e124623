/*
 * bench_zmq_test.c - the zmq layer (ZeroMQ XPUB/SUB) delivers everything:
 * stream at several message sizes and fanin over the emulated lan link, and
 * bytes over a Unix-domain socket (zmq's ipc://), with no cell failed and
 * nothing lost; a record left out on purpose still fails its cell; and
 * pingpong, which PUB/SUB cannot answer, gets no zmq cells. Built only when
 * libzmq was found. No figure is asserted, only delivery.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <string.h>

#include "bench.h"
#include "bench_db_check.h"
#include "layer.h"

static int
argc_of(char **argv)
{
	int n = 0;

	while (argv[n] != NULL) {
		n++;
	}
	return n;
}

static void
zmq_is_built(void **state)
{
	(void)state;
	assert_non_null(layer_find("zmq"));
	assert_null(layer_find("zmq")->server_reply);
	assert_false(layer_built_without("zmq"));
}

static void
lan_stream_and_fanin_lose_nothing(void **state)
{
	char db[64];
	char *argv[] = {"bench",
	                "--layers",
	                "zmq",
	                "--scenarios",
	                "stream,fanin",
	                "--links",
	                "lan",
	                "--records",
	                "1,16,256",
	                "--connections",
	                "8",
	                "--batch-bytes",
	                "16384",
	                "--duration",
	                "0.2",
	                "--db",
	                db,
	                "--note",
	                "zmq test",
	                "--rate",
	                "0",
	                NULL};

	(void)state;
	scratch_db(db, sizeof(db), "zmq");
	assert_int_equal(bench_main(argc_of(argv), argv), 0);
	/* stream: 3 sizes x 2 modes; fanin: one batch size batched, and lowlat */
	assert_int_equal(db_number(db, "SELECT count(*) FROM results"), 8);
	assert_int_equal(db_number(db, "SELECT count(*) FROM results WHERE layer='zmq' AND "
	                               "link='lan'"),
	                 8);
	assert_int_equal(db_number(db, "SELECT count(*) FROM results WHERE failed=0 AND lost=0 "
	                               "AND error IS NULL AND records > 0 AND messages > 0 "
	                               "AND seconds > 0"),
	                 8);
	assert_int_equal(db_number(db, "SELECT count(*) FROM results WHERE scenario='stream'"), 6);
	assert_int_equal(db_number(db, "SELECT count(DISTINCT records_per_msg) FROM results "
	                               "WHERE scenario='stream'"),
	                 3);
	/* Every record of every message arrived: records = messages x size. */
	assert_int_equal(db_number(db, "SELECT count(*) FROM results WHERE "
	                               "records != messages * records_per_msg"),
	                 0);
	assert_int_equal(db_number(db, "SELECT count(*) FROM results WHERE scenario='fanin' AND "
	                               "concurrency=8 AND spread >= 1"),
	                 2);
	assert_int_equal(db_number(db, "SELECT count(*) FROM runs WHERE status='finished'"), 1);
	remove_db(db);
}

static void
unix_bytes_lose_nothing(void **state)
{
	char db[64];
	char *argv[] = {"bench",   "--layers", "zmq",     "--scenarios", "bytes",
	                "--links", "unix",     "--sizes", "1K,1M",       "--duration",
	                "0.2",     "--db",     db,        NULL};

	(void)state;
	scratch_db(db, sizeof(db), "zmqipc");
	assert_int_equal(bench_main(argc_of(argv), argv), 0);
	assert_int_equal(db_number(db, "SELECT count(*) FROM results"), 4);
	assert_int_equal(db_number(db, "SELECT count(*) FROM results WHERE layer='zmq' AND "
	                               "failed=0 AND lost=0 AND records > 0"),
	                 4);
	remove_db(db);
}

static void
dropped_record_fails_zmq_cell(void **state)
{
	char db[64];
	char *argv[] = {"bench", "--scenarios", "stream",  "--links",   "loopback", "--layers",
	                "zmq",   "--modes",     "batched", "--records", "16",       "--duration",
	                "0.2",   "--db",        db,        "--rate",    "0",        NULL};
	int rc;

	(void)state;
	scratch_db(db, sizeof(db), "zmqfault");
	setenv("TERN_BENCH_FAULT", "drop-record", 1);
	rc = bench_main(argc_of(argv), argv);
	unsetenv("TERN_BENCH_FAULT");
	assert_int_equal(rc, 1);
	assert_int_equal(db_number(db, "SELECT count(*) FROM results WHERE failed=1 AND lost=1 "
	                               "AND error LIKE '%lost%'"),
	                 1);
	remove_db(db);
}

static void
pingpong_has_no_zmq_cells(void **state)
{
	char db[64];
	char *argv[] = {"bench",    "--layers",      "tcp,zmq",  "--scenarios",
	                "pingpong", "--links",       "loopback", "--modes",
	                "batched",  "--concurrency", "1",        "--duration",
	                "0.1",      "--db",          db,         NULL};
	char *only[] = {"bench",    "--layers", "zmq", "--scenarios", "pingpong", "--links",
	                "loopback", "--db",     db,    NULL};

	(void)state;
	scratch_db(db, sizeof(db), "zmqpp");
	assert_int_equal(bench_main(argc_of(argv), argv), 0);
	assert_int_equal(db_number(db, "SELECT count(*) FROM results"), 1);
	assert_int_equal(db_number(db, "SELECT count(*) FROM results WHERE layer='tcp'"), 1);
	remove_db(db);
	/* zmq alone leaves nothing to run: a usage error, not an empty run */
	scratch_db(db, sizeof(db), "zmqpp");
	assert_int_equal(bench_main(argc_of(only), only), 2);
	remove_db(db);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(zmq_is_built),
	    cmocka_unit_test(lan_stream_and_fanin_lose_nothing),
	    cmocka_unit_test(unix_bytes_lose_nothing),
	    cmocka_unit_test(dropped_record_fails_zmq_cell),
	    cmocka_unit_test(pingpong_has_no_zmq_cells),
	};

	return cmocka_run_group_tests_name("bench_zmq", tests, NULL, NULL);
}
