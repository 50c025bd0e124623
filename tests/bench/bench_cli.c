/*
 * bench_cli.c - runs `tern bench` on its own, so the bench's tests do not
 * depend on the rest of the tern executable: argv is passed through.
 */
#include "bench.h"

int
main(int argc, char **argv)
{
	argv[0] = "bench";
	return bench_main(argc, argv);
}
