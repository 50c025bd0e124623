/*
 * runenv.c - the environment of a run (see runenv.h).
 */
#include "runenv.h"

#include "build_info.h"
#include "commit.h"

#include <cjson/cJSON.h>
#include <gnu/libc-version.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <tern/tern.h>
#include <unistd.h>

/* The value after "key:" on the first line of a /proc file that starts with key. */
static int
proc_field(const char *path, const char *key, char *buf, size_t len)
{
	FILE *f = fopen(path, "r");
	char line[256];
	size_t kl = strlen(key);
	int rc = -1;

	if (f == NULL) {
		return -1;
	}
	while (fgets(line, sizeof(line), f) != NULL) {
		char *colon = strchr(line, ':');

		if (strncmp(line, key, kl) == 0 && colon != NULL) {
			colon++;
			colon += strspn(colon, " \t");
			colon[strcspn(colon, "\n")] = '\0';
			snprintf(buf, len, "%s", colon);
			rc = 0;
			break;
		}
	}
	fclose(f);
	return rc;
}

/* The first line of a small file, or -1. */
static int
read_line(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "r");
	int rc = -1;

	if (f == NULL) {
		return -1;
	}
	if (fgets(buf, (int)len, f) != NULL) {
		buf[strcspn(buf, "\n")] = '\0';
		rc = 0;
	}
	fclose(f);
	return rc;
}

static void
add_file_string(cJSON *o, const char *name, const char *path)
{
	char v[128];

	if (read_line(path, v, sizeof(v)) == 0) {
		cJSON_AddStringToObject(o, name, v);
	}
}

static char *
env_json(void)
{
	cJSON *o = cJSON_CreateObject();
	char v[128];
	cpu_set_t set;
	double load[1];
	char *s;

	/* A power-saving governor or turbo boost moves figures by tens of percent. */
	add_file_string(o, "governor", "/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor");
	add_file_string(o, "no_turbo", "/sys/devices/system/cpu/intel_pstate/no_turbo");
	add_file_string(o, "boost", "/sys/devices/system/cpu/cpufreq/boost");
	if (proc_field("/proc/meminfo", "MemTotal", v, sizeof(v)) == 0) {
		cJSON_AddStringToObject(o, "mem_total", v);
	}
	/* Other work on a shared machine is the first suspect of a slow run. */
	if (getloadavg(load, 1) == 1) {
		cJSON_AddNumberToObject(o, "load_1m", load[0]);
	}
	if (sched_getaffinity(0, sizeof(set), &set) == 0) {
		cJSON_AddNumberToObject(o, "cpus_allowed", CPU_COUNT(&set));
	}
	add_file_string(o, "virtualization", "/sys/class/dmi/id/product_name");
	cJSON_AddStringToObject(o, "libc", gnu_get_libc_version());
	cJSON_AddStringToObject(o, "cflags", BENCH_CFLAGS);
	cJSON_AddStringToObject(o, "tern_version", TERN_VERSION);
	s = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	return s;
}

void
runenv_collect(struct run_env *e)
{
	struct utsname u;

	memset(e, 0, sizeof(*e));
	if (gethostname(e->host, sizeof(e->host) - 1) != 0) {
		snprintf(e->host, sizeof(e->host), "unknown");
	}
	if (proc_field("/proc/cpuinfo", "model name", e->cpu_model, sizeof(e->cpu_model)) != 0) {
		snprintf(e->cpu_model, sizeof(e->cpu_model), "unknown");
	}
	e->cores = (int)sysconf(_SC_NPROCESSORS_ONLN);
	if (uname(&u) == 0) {
		snprintf(e->kernel, sizeof(e->kernel), "%s %s %s", u.sysname, u.release, u.machine);
	} else {
		snprintf(e->kernel, sizeof(e->kernel), "unknown");
	}
	snprintf(e->compiler, sizeof(e->compiler), "%s", BENCH_COMPILER);
	snprintf(e->build_type, sizeof(e->build_type), "%s", BENCH_BUILD_TYPE);
	snprintf(e->tern_commit, sizeof(e->tern_commit), "%s", BENCH_TERN_COMMIT);
	e->env_json = env_json();
}

void
runenv_free(struct run_env *e)
{
	cJSON_free(e->env_json);
	e->env_json = NULL;
}
