/*
 * bench_fault_test.c - failures are visible: a record dropped on purpose
 * (the test-only TERN_BENCH_FAULT=drop-record hook) fails its cell in the
 * database and makes the command exit non-zero; Ctrl-C keeps the finished
 * rows and marks the run interrupted; bad options are usage errors. And the
 * opposite: senders that start after their whole window (what a loaded
 * machine does to a thread, made certain by TERN_BENCH_FAULT=late-start)
 * still deliver and pass their cell.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <signal.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>

#include "bench.h"
#include "bench_db_check.h"
#include "layer.h"

static int
run_dropping(const char *layer, const char *db)
{
	/* --rate 0: the closed-loop cell alone (bench_rate_test drops a
	 * record from an open-loop one) */
	char *argv[] = {"bench",    "--scenarios", "stream",  "--links", "loopback",
	                "--layers", (char *)layer, "--modes", "batched", "--records",
	                "16",       "--duration",  "0.2",     "--rate",  "0",
	                "--db",     (char *)db,    NULL};
	int rc;

	setenv("TERN_BENCH_FAULT", "drop-record", 1);
	rc = bench_main(17, argv);
	unsetenv("TERN_BENCH_FAULT");
	return rc;
}

static void
check_dropped(const char *layer)
{
	char db[64];

	scratch_db(db, sizeof(db), "fault");
	assert_int_equal(run_dropping(layer, db), 1);
	assert_int_equal(db_number(db, "SELECT count(*) FROM results"), 1);
	assert_int_equal(db_number(db, "SELECT count(*) FROM results WHERE failed=1 AND lost=1 "
	                               "AND error LIKE '%lost%'"),
	                 1);
	assert_int_equal(db_number(db, "SELECT count(*) FROM runs WHERE status='failed' AND "
	                               "finished_at IS NOT NULL"),
	                 1);
	remove_db(db);
}

static void
dropped_record_fails_tcp_cell(void **state)
{
	(void)state;
	check_dropped("tcp");
}

static void
dropped_record_fails_tern_cell(void **state)
{
	(void)state;
	check_dropped("tern");
}

static void
without_the_fault_the_cell_passes(void **state)
{
	char db[64];
	char *argv[] = {"bench", "--scenarios", "stream",  "--links",   "loopback", "--layers",
	                "tcp",   "--modes",     "batched", "--records", "16",       "--duration",
	                "0.2",   "--rate",      "0",       "--db",      db,         NULL};

	(void)state;
	scratch_db(db, sizeof(db), "nofault");
	assert_int_equal(bench_main(17, argv), 0);
	assert_int_equal(db_number(db, "SELECT count(*) FROM results WHERE failed=0 AND lost=0"),
	                 1);
	remove_db(db);
}

static void
check_late_start(const char *scenario, const char *layer)
{
	char db[64];
	char *argv[] = {"bench",       "--scenarios", (char *)scenario,
	                "--links",     "loopback",    "--layers",
	                (char *)layer, "--modes",     "batched",
	                "--records",   "16",          "--duration",
	                "0.1",         "--db",        db,
	                NULL};
	int rc;

	scratch_db(db, sizeof(db), "late");
	setenv("TERN_BENCH_FAULT", "late-start", 1);
	rc = bench_main(15, argv);
	unsetenv("TERN_BENCH_FAULT");
	assert_int_equal(rc, 0);
	assert_int_equal(db_number(db, "SELECT count(*) FROM results WHERE failed=0 AND lost=0 "
	                               "AND records > 0 AND seconds > 0"),
	                 db_number(db, "SELECT count(*) FROM results"));
	assert_true(db_number(db, "SELECT count(*) FROM results") >= 1);
	remove_db(db);
}

static void
late_senders_still_deliver(void **state)
{
	(void)state;
	check_late_start("stream", "tcp");
	check_late_start("stream", "tern");
	check_late_start("fanin", "tcp");
}

static void
interrupt_keeps_finished_rows(void **state)
{
	char db[64];
	char *argv[] = {"bench",      "--scenarios", "stream",
	                "--links",    "loopback",    "--layers",
	                "tcp",        "--records",   "1,2,4,8,16,32,64,128",
	                "--duration", "0.3",         "--db",
	                db,           NULL};
	struct timespec ms50 = {0, 50000000};
	pid_t pid;
	int status;
	int i;

	(void)state;
	scratch_db(db, sizeof(db), "interrupt");
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		freopen("/dev/null", "w", stdout);
		_exit(bench_main(13, argv));
	}
	/* Wait for two finished cells (at most 20 s), then press Ctrl-C. */
	for (i = 0; i < 400; i++) {
		if (db_number(db, "SELECT count(*) FROM results") >= 2) {
			break;
		}
		nanosleep(&ms50, NULL);
	}
	kill(pid, SIGINT);
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 130);
	assert_true(db_number(db, "SELECT count(*) FROM results") >= 2);
	assert_true(db_number(db, "SELECT count(*) FROM results") < 16);
	assert_int_equal(db_number(db, "SELECT count(*) FROM results WHERE failed=0"),
	                 db_number(db, "SELECT count(*) FROM results"));
	assert_int_equal(db_number(db, "SELECT count(*) FROM runs WHERE status='interrupted' AND "
	                               "finished_at IS NOT NULL"),
	                 1);
	remove_db(db);
}

static void
bad_options_are_usage_errors(void **state)
{
	char *a1[] = {"bench", "--records", "0", NULL};
	char *a2[] = {"bench", "--links", "mars", NULL};
	char *a3[] = {"bench", "--link", "x=abc:1", NULL};
	char *a4[] = {"bench", "--duration", "-1", NULL};
	char *a5[] = {"bench", "--frobnicate", NULL};
	char *a6[] = {"bench", "--scenarios", "stream,", NULL};
	char *a8[] = {"bench", "--layers", "tcp,udp", NULL};
	char *a9[] = {"bench", "--layers", "tcp,tern,zmq,tcp", NULL};
	char *a10[] = {"bench", "--layers", "zmq", NULL};
	char *a7[] = {"bench",       "--db",      "/nonexistent-dir/x.db",
	              "--scenarios", "stream",    "--links",
	              "loopback",    "--records", "1",
	              "--duration",  "0.05",      NULL};

	(void)state;
	assert_int_equal(bench_main(3, a1), 2);
	assert_int_equal(bench_main(3, a2), 2);
	assert_int_equal(bench_main(3, a3), 2);
	assert_int_equal(bench_main(3, a4), 2);
	assert_int_equal(bench_main(2, a5), 2);
	assert_int_equal(bench_main(3, a6), 2);
	assert_int_equal(bench_main(3, a8), 2);
	assert_int_equal(bench_main(3, a9), 2);
	/* A bench built without libzmq refuses zmq as a usage error too. */
	if (layer_find("zmq") == NULL) {
		assert_true(layer_built_without("zmq"));
		assert_int_equal(bench_main(3, a10), 2);
	}
	/* A database that cannot be opened fails before any cell runs. */
	assert_int_equal(bench_main(11, a7), 1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(bad_options_are_usage_errors),
	    cmocka_unit_test(without_the_fault_the_cell_passes),
	    cmocka_unit_test(dropped_record_fails_tcp_cell),
	    cmocka_unit_test(dropped_record_fails_tern_cell),
	    cmocka_unit_test(late_senders_still_deliver),
	    cmocka_unit_test(interrupt_keeps_finished_rows),
	};

	return cmocka_run_group_tests_name("bench_fault", tests, NULL, NULL);
}
