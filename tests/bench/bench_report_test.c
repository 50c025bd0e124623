/*
 * bench_report_test.c - the tables of a run with --repeat show each cell
 * once, at the median of its repeats, with their spread; a repeat that
 * failed fails its cell. The JSON report keeps every repeat with its index.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "matrix.h"

static struct bench_link lan = {.name = "lan", .bandwidth_Bps = 125e6, .emulated = true};

/* Three repeats of tcp and tern, stream 16 rec/msg batched: records/s as given. */
static void
fill(struct bench_run *run, struct cell *cells, struct cell_result *res, bool *done,
     const double *tcp, const double *tern, bool tern_fails_once)
{
	memset(run, 0, sizeof(*run));
	run->cfg.repeat = 3;
	run->cfg.nlinks = 1;
	run->cfg.links[0] = lan;
	run->cfg.layers[0] = &layer_tcp_ops;
	run->cfg.layers[1] = &layer_tern_ops;
	run->cfg.nlayers = 2;
	run->cells = cells;
	run->results = res;
	run->done = done;
	run->ncells = 6;
	for (int i = 0; i < 6; i++) {
		bool is_tern = i % 2 == 1;

		cells[i] = (struct cell){.kind = SCEN_STREAM,
		                         .link = &run->cfg.links[0],
		                         .layer = is_tern ? &layer_tern_ops : &layer_tcp_ops,
		                         .records_per_msg = 16,
		                         .payload_bytes = 1024,
		                         .concurrency = 1,
		                         .duration = 1,
		                         .repeat = (uint32_t)(i / 2)};
		memset(&res[i], 0, sizeof(res[i]));
		res[i].records_per_s = is_tern ? tern[i / 2] : tcp[i / 2];
		res[i].bytes_per_s = res[i].records_per_s * 64;
		res[i].link_share = res[i].bytes_per_s / 125e6;
		res[i].lat_p50_us = res[i].lat_p99_us = res[i].lat_p999_us = res[i].spread = -1;
		res[i].cpu_s_per_gb = 1;
		res[i].bytes = 1;
		done[i] = true;
	}
	if (tern_fails_once) {
		res[3].failed = true;
		snprintf(res[3].error, sizeof(res[3].error), "sender 0: records 5 to 9 lost");
	}
}

static char *
tables(const struct bench_run *run)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	assert_non_null(f);
	report_tables(f, run);
	fclose(f);
	return text;
}

static int
count(const char *hay, const char *needle)
{
	int n = 0;

	for (const char *p = hay; (p = strstr(p, needle)) != NULL; p++) {
		n++;
	}
	return n;
}

static void
medians_and_spread(void **state)
{
	static const double tcp[] = {1.0e6, 1.2e6, 1.1e6};  /* median 1.10M, spread 18 % */
	static const double tern[] = {0.9e6, 2.0e6, 1.0e6}; /* median 1.00M, spread 110 % */
	struct cell cells[6];
	struct cell_result res[6];
	bool done[6];
	struct bench_run run;
	char *t;

	(void)state;
	fill(&run, cells, res, done, tcp, tern, false);
	t = tables(&run);
	assert_int_equal(count(t, "stream   16 rec/msg"), 1); /* one row, not three */
	assert_non_null(strstr(t, "1.10M"));
	assert_non_null(strstr(t, "1.00M"));
	assert_null(strstr(t, "2.00M"));
	assert_non_null(strstr(t, "0.91")); /* tern/tcp of the medians */
	assert_non_null(strstr(t, "spread tcp 18% tern 110%"));
	free(t);
}

static void
a_failed_repeat_fails_the_cell(void **state)
{
	static const double tcp[] = {1.0e6, 1.0e6, 1.0e6};
	static const double tern[] = {1.0e6, 1.0e6, 1.0e6};
	struct cell cells[6];
	struct cell_result res[6];
	bool done[6];
	struct bench_run run;
	char *t;

	(void)state;
	fill(&run, cells, res, done, tcp, tern, true);
	t = tables(&run);
	assert_non_null(strstr(t, "FAILED"));
	assert_non_null(strstr(t, "records 5 to 9 lost"));
	free(t);
}

static void
json_keeps_every_repeat(void **state)
{
	static const double v[] = {1.0e6, 1.2e6, 1.1e6};
	struct cell cells[6];
	struct cell_result res[6];
	bool done[6];
	struct bench_run run;
	char path[] = "/tmp/tern-report-XXXXXX";
	char err[256];
	char buf[1 << 16];
	const cJSON *x;
	cJSON *j;
	FILE *f;
	size_t n;
	int seen[3] = {0, 0, 0};
	int fd = mkstemp(path);

	(void)state;
	assert_true(fd >= 0);
	close(fd);
	fill(&run, cells, res, done, v, v, false);
	run.status = "finished";
	assert_int_equal(report_json(&run, path, err, sizeof(err)), 0);
	f = fopen(path, "r");
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	unlink(path);
	buf[n] = '\0';
	j = cJSON_Parse(buf);
	assert_non_null(j);
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(j, "results")), 6);
	cJSON_ArrayForEach(x, cJSON_GetObjectItem(j, "results"))
	{
		seen[(int)cJSON_GetObjectItem(x, "repeat")->valuedouble]++;
	}
	assert_true(seen[0] == 2 && seen[1] == 2 && seen[2] == 2);
	cJSON_Delete(j);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(medians_and_spread),
	    cmocka_unit_test(a_failed_repeat_fails_the_cell),
	    cmocka_unit_test(json_keeps_every_repeat),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
