/*
 * helper.c - finding and exec'ing tern-bench and tern-dashboard (helper.h
 * says why they are executables of their own).
 *
 * The build passes three places as compile definitions: TERN_LIBEXECDIR,
 * the helpers' absolute install folder, and TERN_INSTALL_BINDIR and
 * TERN_INSTALL_LIBEXECDIR, the same two folders relative to the install
 * prefix (empty when either is absolute), from which the helpers of an
 * install that was moved to another prefix are found.
 */
#include "helper.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

#define HELPER_DIRS 3

/* The folder of the running executable, from /proc/self/exe. */
static int
self_dir(char *dir, size_t size)
{
	ssize_t n = readlink("/proc/self/exe", dir, size);
	char *slash;

	if (n <= 0 || (size_t)n >= size) {
		return -1;
	}
	dir[n] = '\0';
	slash = strrchr(dir, '/');
	if (slash == NULL) {
		return -1;
	}
	*slash = '\0';
	return 0;
}

/* PREFIX/libexec/tern when dir is PREFIX/bin; -1 when it is not. */
static int
prefix_libexec_dir(const char *dir, char *out, size_t size)
{
	const char *bindir = TERN_INSTALL_BINDIR;
	size_t dlen = strlen(dir);
	size_t blen = strlen(bindir);
	int n;

	if (blen == 0 || TERN_INSTALL_LIBEXECDIR[0] == '\0' || dlen <= blen ||
	    dir[dlen - blen - 1] != '/' || strcmp(dir + dlen - blen, bindir) != 0) {
		return -1;
	}
	n = snprintf(out, size, "%.*s/%s", (int)(dlen - blen - 1), dir, TERN_INSTALL_LIBEXECDIR);
	return n < 0 || (size_t)n >= size ? -1 : 0;
}

/* Append dir to dirs unless it is already there. */
static void
add_dir(char dirs[][PATH_MAX], size_t *ndirs, const char *dir)
{
	size_t i;

	for (i = 0; i < *ndirs; i++) {
		if (strcmp(dirs[i], dir) == 0) {
			return;
		}
	}
	if (*ndirs < HELPER_DIRS && strlen(dir) < PATH_MAX) {
		strcpy(dirs[(*ndirs)++], dir);
	}
}

int
helper_run(const char *cmd, char **argv)
{
	char path[PATH_MAX];
	char dirs[HELPER_DIRS][PATH_MAX];
	char found[PATH_MAX];
	char looked[HELPER_DIRS * (PATH_MAX + 8)] = "";
	size_t ndirs = 0;
	size_t i;

	if (self_dir(found, sizeof(found)) == 0) {
		add_dir(dirs, &ndirs, found);
		if (prefix_libexec_dir(dirs[0], found, sizeof(found)) == 0) {
			add_dir(dirs, &ndirs, found);
		}
	}
	add_dir(dirs, &ndirs, TERN_LIBEXECDIR);

	for (i = 0; i < ndirs; i++) {
		int n = snprintf(path, sizeof(path), "%s/tern-%s", dirs[i], cmd);

		if (n < 0 || (size_t)n >= sizeof(path) || access(path, X_OK) != 0) {
			continue;
		}
		argv[0] = path;
		execv(path, argv);
		cli_error(cmd, "cannot run %s: %s", path, strerror(errno));
		return EXIT_RUNTIME;
	}

	for (i = 0; i < ndirs; i++) {
		const char *sep = i == 0 ? "" : i + 1 == ndirs ? " and " : ", ";

		strcat(strcat(looked, sep), dirs[i]);
	}
	/* not cli_error(): its line is cut at 1 KiB, and the folders are the point */
	fprintf(stderr, "tern %s: not installed (looked for tern-%s in %s)\n", cmd, cmd, looked);
	return EXIT_RUNTIME;
}
