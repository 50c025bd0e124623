/*
 * commands.h - the subcommands of `tern bench` besides running the matrix:
 * compare, export and import. Each takes the arguments after its name
 * (argv[0] is the subcommand) and returns the process's exit status.
 */
#ifndef BENCH_COMMANDS_H
#define BENCH_COMMANDS_H

#define BENCH_EXIT_FAILED     1
#define BENCH_EXIT_USAGE      2
#define BENCH_EXIT_REGRESSION 3

int bench_compare_main(int argc, char **argv);
int bench_export_main(int argc, char **argv);
int bench_import_main(int argc, char **argv);

#endif
