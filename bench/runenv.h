/*
 * runenv.h - what a run's figures depend on besides the code: the machine,
 * the kernel, the build, and the state of the machine when the run began.
 *
 * Stored with each run so that `tern bench compare` can say what differs
 * between two runs before it says what got slower.
 */
#ifndef BENCH_RUNENV_H
#define BENCH_RUNENV_H

struct run_env {
	char host[256];
	char cpu_model[128];
	int cores;
	char kernel[200]; /* sysname, release and machine of uname(2), 65 bytes each */
	char compiler[96];
	char build_type[64];
	char tern_commit[64];
	/* JSON object: governor, memory, load, libc and the libraries measured
	 * against; owned, freed by runenv_free */
	char *env_json;
};

/* Fill e from /proc, /sys, uname and the build. Never fails: what cannot be
 * read is "unknown" (or left out of env_json). */
void runenv_collect(struct run_env *e);
void runenv_free(struct run_env *e);

#endif
