/*
 * helper.h - `tern bench` and `tern dashboard` are helper executables,
 * tern-bench and tern-dashboard, that tern runs the way git runs its
 * subcommands.
 *
 * They need libwebsockets (with OpenSSL, zlib and libcap) and SQLite. Linked
 * into tern, the file-backed pages of those libraries cost every idle
 * `tern node` about 2 MB of resident memory; as separate executables they are
 * loaded only by the commands that use them.
 */
#ifndef TERN_NODE_HELPER_H
#define TERN_NODE_HELPER_H

/*
 * Run `tern CMD` by exec'ing tern-CMD with argv[0] set to its path and the
 * other arguments unchanged (argv is the arguments after "tern", so argv[0]
 * is CMD, and it is NULL-terminated). It looks for tern-CMD beside the tern
 * executable (the build tree), then in the libexec folder of the prefix tern
 * runs from (an install moved with `cmake --install --prefix`), then in the
 * libexec folder configured at build time (TERN_LIBEXECDIR).
 *
 * Returns only on failure: EXIT_RUNTIME after one line on stderr.
 */
int helper_run(const char *cmd, char **argv);

#endif
