/*
 * replay.c - run a harness over saved inputs without a fuzzing engine.
 *
 *   replay_NAME DIR|FILE...
 *
 * Every regular file of each directory (in name order, so a failure is
 * reproducible) is read into a buffer of exactly its size, so that the
 * sanitizers see any read past the end, and handed to
 * LLVMFuzzerTestOneInput(). A crash or a broken property aborts with the
 * file's name printed just before. Finding no input at all is a failure:
 * a missing corpus must not look like a passing one.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

/* libFuzzer's default -max_len is far below this; a larger file is a mistake. */
#define REPLAY_MAX_FILE (1024 * 1024)

static int
replay_file(const char *path)
{
	struct stat st;
	FILE *f;
	uint8_t *buf;
	size_t n;

	if (stat(path, &st) != 0) {
		fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
		return -1;
	}
	if (st.st_size < 0 || st.st_size > REPLAY_MAX_FILE) {
		fprintf(stderr, "replay: %s: larger than %d bytes\n", path, REPLAY_MAX_FILE);
		return -1;
	}
	n = (size_t)st.st_size;
	f = fopen(path, "rb");
	if (f == NULL) {
		fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
		return -1;
	}
	/* never malloc(0): an empty input still gets its own (empty) buffer */
	buf = malloc(n > 0 ? n : 1);
	if (buf == NULL || fread(buf, 1, n, f) != n) {
		fprintf(stderr, "replay: %s: cannot read\n", path);
		free(buf);
		fclose(f);
		return -1;
	}
	fclose(f);
	printf("replay: %s (%zu bytes)\n", path, n);
	fflush(stdout);
	LLVMFuzzerTestOneInput(buf, n);
	free(buf);
	return 0;
}

static int
by_name(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Returns the number of inputs run, or -1. */
static int
replay_dir(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char **names = NULL;
	size_t count = 0;
	size_t cap = 0;
	int ran = 0;

	if (d == NULL) {
		fprintf(stderr, "replay: %s: %s\n", dir, strerror(errno));
		return -1;
	}
	while ((e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.') {
			continue;
		}
		if (count == cap) {
			char **grown;
			cap = cap == 0 ? 64 : cap * 2;
			grown = realloc(names, cap * sizeof(*names));
			if (grown == NULL) {
				ran = -1;
				break;
			}
			names = grown;
		}
		names[count] = malloc(strlen(dir) + strlen(e->d_name) + 2);
		if (names[count] == NULL) {
			ran = -1;
			break;
		}
		sprintf(names[count], "%s/%s", dir, e->d_name);
		count++;
	}
	closedir(d);
	if (ran == 0 && count > 0) {
		qsort(names, count, sizeof(*names), by_name);
	}
	for (size_t i = 0; i < count; i++) {
		struct stat st;
		if (ran >= 0 && stat(names[i], &st) == 0 && S_ISREG(st.st_mode)) {
			ran = replay_file(names[i]) == 0 ? ran + 1 : -1;
		}
		free(names[i]);
	}
	free(names);
	if (ran < 0) {
		fprintf(stderr, "replay: %s: failed\n", dir);
	}
	return ran;
}

int
main(int argc, char **argv)
{
	int total = 0;

	if (argc < 2) {
		fprintf(stderr, "usage: %s DIR|FILE...\n", argv[0]);
		return 2;
	}
	for (int i = 1; i < argc; i++) {
		struct stat st;
		int n;

		if (stat(argv[i], &st) != 0) {
			fprintf(stderr, "replay: %s: %s\n", argv[i], strerror(errno));
			return 1;
		}
		n = S_ISDIR(st.st_mode) ? replay_dir(argv[i]) : replay_file(argv[i]) == 0 ? 1 : -1;
		if (n < 0) {
			return 1;
		}
		total += n;
	}
	if (total == 0) {
		fprintf(stderr, "replay: no input found in %s\n", argv[1]);
		return 1;
	}
	printf("replay: %d inputs, no crash and no broken property\n", total);
	return 0;
}
