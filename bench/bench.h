/*
 * bench.h - the entry point of `tern bench`, the benchmark suite.
 *
 * The suite measures how many records per second get from a sender to a
 * receiver over emulated links, for tern and for a plain-TCP reference that
 * carries the same MessagePack records, and stores every run in SQLite.
 */
#ifndef TERN_BENCH_H
#define TERN_BENCH_H

/*
 * Run `tern bench` with its command-line arguments (argv[0] is "bench").
 * Returns the process exit status: 0 when every cell succeeded, 1 when a
 * cell failed or the run was interrupted, 2 for a usage error.
 */
int bench_main(int argc, char **argv);

#endif
