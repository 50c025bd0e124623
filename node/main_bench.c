/*
 * main_bench.c - tern-bench, the helper executable behind `tern bench`.
 *
 * tern execs it (helper.h) so that only the bench loads SQLite, not every
 * tern process. bench_main() gets the argv that `tern bench` has always
 * passed it: argv[0] is "bench", then the user's arguments.
 */
#include <stddef.h>

#include "bench.h"
#include "finish.h"

int
main(int argc, char **argv)
{
	char *none[] = {"bench", NULL};

	if (argc < 1) {
		argc = 1;
		argv = none;
	}
	argv[0] = "bench";
	return finish_stdout("bench", bench_main(argc, argv));
}
