/*
 * toptable_test.c - what `tern top` draws from a set of reports: the
 * sections and their order, two publishers of one key merged into one row,
 * numbers with units, and a table that fits a width and a height.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "toptable.h"

static const char pub_report[] =
    "{\"node\":\"P\",\"mode\":\"peer\",\"uptime_s\":125.5,\"interval_ms\":1000,"
    "\"keys\":[{\"key\":\"demo/a\",\"publisher\":\"P/1\",\"role\":\"pub\",\"msgs_per_s\":10001.0,"
    "\"bytes_per_s\":640064.0,\"msgs_total\":123456,\"drops\":0,\"missed\":0,"
    "\"blocked_ms\":2.5,\"queue_bytes\":4096},"
    "{\"key\":\"demo/slow\",\"publisher\":\"P/2\",\"role\":\"pub\",\"msgs_per_s\":3.0,"
    "\"bytes_per_s\":30.0,\"msgs_total\":9,\"drops\":0,\"missed\":0,\"blocked_ms\":0,"
    "\"queue_bytes\":0}],"
    "\"connections\":[{\"peer\":\"R\",\"endpoint\":\"tcp://127.0.0.1:7447\",\"mode\":\"batched\","
    "\"peer_mode\":\"router\",\"rtt_us\":35,\"bytes_in_per_s\":10.0,"
    "\"bytes_out_per_s\":700000.0}]}";

/* S gets demo/a from two publishers: one row, rates summed, the worse latency */
static const char sub_report[] =
    "{\"node\":\"S\",\"mode\":\"peer\",\"uptime_s\":7200,\"interval_ms\":1000,"
    "\"keys\":[{\"key\":\"demo/a\",\"publisher\":\"P/1\",\"role\":\"sub\",\"msgs_per_s\":6000.0,"
    "\"bytes_per_s\":384000.0,\"msgs_total\":100000,\"drops\":0,\"missed\":2,"
    "\"blocked_ms\":0,\"queue_bytes\":0,\"lat_samples\":100,\"lat_p50_us\":40,"
    "\"lat_p99_us\":1500,\"lat_p999_us\":1800,\"lat_max_us\":2100000},"
    "{\"key\":\"demo/a\",\"publisher\":\"Q/1\",\"role\":\"sub\",\"msgs_per_s\":4000.0,"
    "\"bytes_per_s\":256000.0,\"msgs_total\":50000,\"drops\":0,\"missed\":1,"
    "\"blocked_ms\":0,\"queue_bytes\":0,\"lat_samples\":100,\"lat_p50_us\":60,"
    "\"lat_p99_us\":900,\"lat_p999_us\":null,\"lat_max_us\":2000},"
    "{\"key\":\"demo/quiet\",\"publisher\":\"P/3\",\"role\":\"sub\",\"msgs_per_s\":0,"
    "\"bytes_per_s\":0,\"msgs_total\":5,\"drops\":0,\"missed\":0,\"blocked_ms\":0,"
    "\"queue_bytes\":0,\"lat_samples\":0,\"lat_p50_us\":null,\"lat_p99_us\":null,"
    "\"lat_p999_us\":null,\"lat_max_us\":null}],"
    "\"connections\":[]}";

static const char router_report[] =
    "{\"node\":\"R\",\"mode\":\"router\",\"uptime_s\":100000,\"interval_ms\":1000,\"keys\":[],"
    "\"connections\":[{\"peer\":\"P\",\"endpoint\":\"tcp://127.0.0.1:7447\","
    "\"mode\":\"low-latency\",\"peer_mode\":\"peer\",\"rtt_us\":null,"
    "\"bytes_in_per_s\":700000.0,\"bytes_out_per_s\":10.0}]}";

static reports *
three_nodes(void)
{
	reports *rs = reports_new();

	assert_non_null(rs);
	reports_put(rs, "@tern/P/stats", pub_report, strlen(pub_report), 0);
	reports_put(rs, "@tern/S/stats", sub_report, strlen(sub_report), 0);
	reports_put(rs, "@tern/R/stats", router_report, strlen(router_report), 0);
	reports_update(rs, 0);
	assert_int_equal(reports_count(rs), 3);
	return rs;
}

static char *
render(const reports *rs, int width, int height)
{
	toptable_opts o = {width, height, false, "12:00:00", "waiting for telemetry"};
	outbuf ob = {0};

	assert_int_equal(toptable_render(&ob, rs, &o), 0);
	assert_int_equal(outbuf_append(&ob, "", 1), 0);
	return ob.data;
}

/* The line of text that contains needle (a static copy), or NULL. */
static const char *
line_with(const char *text, const char *needle)
{
	static char line[1024];
	const char *p = strstr(text, needle);
	const char *start;
	const char *end;

	if (p == NULL) {
		return NULL;
	}
	if (*p == '\n') {
		p++; /* a needle that starts a line */
	}
	start = p;
	while (start > text && start[-1] != '\n') {
		start--;
	}
	end = strchr(p, '\n');
	snprintf(line, sizeof(line), "%.*s", (int)(end - start), start);
	return line;
}

/* Fields of a line split on spaces; returns how many. */
static int
fields(const char *line, char out[][64], int max)
{
	int n = 0;
	const char *p = line;

	while (*p != '\0' && n < max) {
		size_t len;
		while (*p == ' ') {
			p++;
		}
		len = strcspn(p, " ");
		if (len == 0) {
			break;
		}
		snprintf(out[n++], 64, "%.*s", (int)len, p);
		p += len;
	}
	return n;
}

static void
test_sections(void **state)
{
	reports *rs = three_nodes();
	char *out = render(rs, 0, 0);
	char f[20][64];
	const char *nodes;
	const char *conns;
	const char *keys;

	(void)state;
	assert_non_null(strstr(out, "tern top  12:00:00  nodes 3  connections 2  msgs/s 10.0k "
	                            "published, 10.0k delivered\n"));
	nodes = strstr(out, "\nNODE  ");
	conns = strstr(out, "\nCONNECTION ");
	keys = strstr(out, "\nNODE  KEY");
	assert_non_null(nodes);
	assert_true(nodes < conns && conns < keys);
	/* nodes by rate: P (10k published), S (10k delivered), then R */
	assert_true(strstr(nodes, "\nP ") < strstr(nodes, "\nS "));
	assert_true(strstr(nodes, "\nS ") < strstr(nodes, "\nR "));
	assert_int_equal(fields(line_with(out, "\nP  "), f, 20), 7);
	assert_string_equal(f[1], "peer");
	assert_string_equal(f[2], "2m05s");
	assert_string_equal(f[4], "2");
	assert_string_equal(f[5], "10.0k");
	assert_int_equal(fields(line_with(out, "router"), f, 20), 7);
	assert_string_equal(f[2], "1d03h");
	/* connections: a round trip not measured yet is "-" */
	assert_non_null(line_with(conns, "P -> R"));
	assert_int_equal(fields(line_with(conns, "R -> P"), f, 20), 8);
	assert_string_equal(f[3], "low-latency");
	assert_string_equal(f[4], "-");
	assert_string_equal(f[5], "700k");
	assert_int_equal(fields(line_with(conns, "P -> R"), f, 20), 8);
	assert_string_equal(f[4], "35us");
	free(out);
	reports_free(rs);
}

static void
test_key_rows(void **state)
{
	reports *rs = three_nodes();
	char *out = render(rs, 0, 0);
	const char *keys = strstr(out, "\nNODE  KEY");
	char f[20][64];
	int n;

	(void)state;
	/* by rate: P's demo/a, S's demo/a (10k merged), P's demo/slow, S's demo/quiet */
	assert_true(strstr(keys, "\nP  ") < strstr(keys, "\nS "));
	assert_true(strstr(keys, "\nS ") < strstr(keys, "demo/slow"));
	assert_true(strstr(keys, "demo/slow") < strstr(keys, "demo/quiet"));
	/* pub: no latency and no missed column */
	n = fields(line_with(keys, "\nP  "), f, 20);
	assert_int_equal(n, 9);
	assert_string_equal(f[1], "demo/a");
	assert_string_equal(f[2], "pub");
	assert_string_equal(f[3], "10.0k");
	assert_string_equal(f[4], "0.64");
	assert_string_equal(f[5], "123k");
	assert_string_equal(f[6], "0");   /* drops */
	assert_string_equal(f[7], "2.5"); /* blocked ms */
	assert_string_equal(f[8], "4.10k");
	/* sub: two publishers in one row, the worse of each percentile */
	n = fields(line_with(keys, "\nS "), f, 20);
	assert_int_equal(n, 11);
	assert_string_equal(f[1], "demo/a");
	assert_string_equal(f[2], "sub");
	assert_string_equal(f[3], "10.0k");
	assert_string_equal(f[4], "0.64");
	assert_string_equal(f[5], "150k");
	assert_string_equal(f[6], "3"); /* missed */
	assert_string_equal(f[7], "60us");
	assert_string_equal(f[8], "1.50ms");
	assert_string_equal(f[9], "1.80ms");
	assert_string_equal(f[10], "2.10s");
	/* no stamps in the interval: "-" */
	n = fields(line_with(keys, "demo/quiet"), f, 20);
	assert_int_equal(n, 11);
	assert_string_equal(f[3], "0");
	assert_string_equal(f[7], "-");
	assert_string_equal(f[10], "-");
	n = fields(line_with(keys, "demo/slow"), f, 20);
	assert_string_equal(f[3], "3");
	assert_string_equal(f[4], "0.00");
	/* no line ends in a space */
	assert_null(strstr(out, " \n"));
	free(out);
	reports_free(rs);
}

static int
max_line_cols(const char *text, int *lines)
{
	int max = 0;
	int cols = 0;

	*lines = 0;
	for (const char *p = text; *p != '\0'; p++) {
		if (*p == '\n') {
			max = cols > max ? cols : max;
			cols = 0;
			(*lines)++;
		} else if (((unsigned char)*p & 0xc0) != 0x80) {
			cols++;
		}
	}
	return max;
}

static void
test_fits_width(void **state)
{
	reports *rs = three_nodes();
	char *wide = render(rs, 0, 0);
	char *out = render(rs, 60, 0);
	int lines;
	int wide_lines;

	(void)state;
	assert_true(max_line_cols(wide, &wide_lines) > 60);
	assert_true(max_line_cols(out, &lines) <= 60);
	assert_int_equal(lines, wide_lines);
	/* key rows keep their first columns; latency ones are left out */
	assert_non_null(strstr(out, "demo/a"));
	assert_null(strstr(out, "P99.9"));
	free(wide);
	free(out);
	/* very narrow: still no line over the width */
	out = render(rs, 10, 0);
	assert_true(max_line_cols(out, &lines) <= 10);
	free(out);
	reports_free(rs);
}

static void
test_long_names_shrink(void **state)
{
	reports *rs = reports_new();
	const char *text = "{\"node\":\"a-very-long-node-name-indeed\",\"keys\":[{\"key\":"
	                   "\"sensors/building-7/floor-3/room-12/temperature\",\"role\":"
	                   "\"pub\",\"msgs_per_s\":1}],\"connections\":[]}";
	char *out;
	int lines;

	(void)state;
	reports_put(rs, "@tern/a-very-long-node-name-indeed/stats", text, strlen(text), 0);
	reports_update(rs, 0);
	out = render(rs, 100, 0);
	assert_true(max_line_cols(out, &lines) <= 100);
	/* the name columns gave up room, marked with '~', so MB/S still shows */
	assert_non_null(strstr(out, "~"));
	assert_non_null(strstr(out, "MB/S"));
	assert_non_null(strstr(out, "sensors/bui"));
	free(out);
	reports_free(rs);
}

static void
test_fits_height(void **state)
{
	reports *rs = reports_new();
	char text[8192];
	size_t n;
	char *out;
	int lines;

	(void)state;
	n = (size_t)snprintf(text, sizeof(text), "{\"node\":\"N\",\"keys\":[");
	for (int i = 0; i < 50; i++) {
		n += (size_t)snprintf(text + n, sizeof(text) - n,
		                      "%s{\"key\":\"k/%02d\",\"role\":\"pub\",\"msgs_per_s\":%d}",
		                      i > 0 ? "," : "", i, i);
	}
	snprintf(text + n, sizeof(text) - n, "],\"connections\":[]}");
	reports_put(rs, "@tern/N/stats", text, strlen(text), 0);
	reports_update(rs, 0);
	out = render(rs, 0, 20);
	max_line_cols(out, &lines);
	assert_int_equal(lines, 20);
	/* header, blank, nodes title and row, blank, connections title, blank,
	 * keys title: 12 lines remain, 11 rows and "... 39 more" */
	assert_non_null(strstr(out, "\nN     k/49  pub"));
	assert_non_null(strstr(out, "\nN     k/39  pub"));
	assert_null(strstr(out, "k/38"));
	assert_non_null(strstr(out, "\n  ... 39 more\n"));
	free(out);
	/* fewer lines than the titles: cut at the height */
	out = render(rs, 0, 3);
	max_line_cols(out, &lines);
	assert_int_equal(lines, 3);
	free(out);
	reports_free(rs);
}

static void
test_hostile_names(void **state)
{
	reports *rs = reports_new();
	const char *text = "{\"node\":\"x\",\"mode\":\"\\u001b[2Jpeer\",\"keys\":[{\"key\":"
	                   "\"a\\nb\",\"role\":\"pub\"}],\"connections\":[]}";
	char *out;

	(void)state;
	reports_put(rs, "@tern/x\033]0;t\007/stats", text, strlen(text), 0);
	reports_update(rs, 0);
	out = render(rs, 0, 0);
	assert_null(strchr(out, '\033'));
	assert_null(strchr(out, '\007'));
	assert_non_null(strstr(out, "x?]0;t?"));
	assert_non_null(strstr(out, "?[2Jpeer"));
	assert_non_null(strstr(out, "a?b"));
	free(out);
	reports_free(rs);
}

static void
test_waiting_and_ansi(void **state)
{
	reports *rs = reports_new();
	toptable_opts o = {80, 24, true, NULL, "waiting for telemetry from tcp://x:1"};
	outbuf ob = {0};

	(void)state;
	assert_int_equal(toptable_render(&ob, rs, &o), 0);
	assert_int_equal(outbuf_append(&ob, "", 1), 0);
	assert_non_null(strstr(ob.data, "tern top  nodes 0  connections 0"));
	assert_non_null(strstr(ob.data, "\nwaiting for telemetry from tcp://x:1\033[K\n"));
	assert_non_null(strstr(ob.data, "\033[1mNODE  MODE"));
	outbuf_free(&ob);
	reports_free(rs);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_sections),         cmocka_unit_test(test_key_rows),
	    cmocka_unit_test(test_fits_width),       cmocka_unit_test(test_long_names_shrink),
	    cmocka_unit_test(test_fits_height),      cmocka_unit_test(test_hostile_names),
	    cmocka_unit_test(test_waiting_and_ansi),
	};
	return cmocka_run_group_tests_name("node_toptable", tests, NULL, NULL);
}
