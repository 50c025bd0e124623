/*
 * toptable.c - rows from the reports, numbers in a few columns, and a
 * layout that fits: each section is a grid whose columns take the width of
 * their widest cell; when a line would not fit, the text columns (names,
 * keys) shrink first, then columns at the right are left out. When the
 * sections do not fit the height, the longest gives up lines first (the
 * keys' length counts half) and says how many rows it left out.
 *
 * Node ids and keys come from the network: every byte below 0x20 (and DEL)
 * is shown as '?', so a report cannot move the cursor or change colours.
 * Widths count UTF-8 code points, which is right for most text.
 */
#include "toptable.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tern/tern.h>

#define GAP       2   /* spaces between columns */
#define CELL_MAX  256 /* bytes of a cell's text kept */
#define NSECTIONS 3

struct column {
	const char *title;
	bool left; /* text, aligned left; numbers align right */
	int min;   /* > 0: may shrink down to this many columns */
};

struct grid {
	const struct column *cols;
	int ncols;
	size_t rows;
	size_t cap;
	char **cells; /* rows * ncols texts */
	double *rank; /* rows: sort by this, largest first */
};

/* Where the lines go, and how many may still come. */
struct sink {
	outbuf *ob;
	const toptable_opts *o;
	int lines;
	int rc;
};

static const struct column node_cols[] = {
    {"NODE", true, 8},  {"MODE", true, 0},   {"UPTIME", false, 0}, {"CONNS", false, 0},
    {"KEYS", false, 0}, {"PUB/S", false, 0}, {"SUB/S", false, 0},
};
static const struct column conn_cols[] = {
    {"CONNECTION", true, 12}, {"MODE", true, 0},     {"RTT", false, 0},
    {"IN B/S", false, 0},     {"OUT B/S", false, 0}, {"ENDPOINT", true, 0},
};
static const struct column key_cols[] = {
    {"NODE", true, 8},    {"KEY", true, 12},   {"ROLE", true, 0},   {"MSGS/S", false, 0},
    {"MB/S", false, 0},   {"TOTAL", false, 0}, {"DROPS", false, 0}, {"MISSED", false, 0},
    {"BLK MS", false, 0}, {"QUEUE", false, 0}, {"P50", false, 0},   {"P99", false, 0},
    {"P99.9", false, 0},  {"MAX", false, 0},
};

#define NCOLS(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* ---- numbers ---- */

/* 950, 12.3k, 4.56M: counts and rates in at most 5 columns. */
static void
fmt_si(char *b, size_t n, double v)
{
	static const char units[] = "kMGTPE";
	int u = -1;

	if (!isfinite(v) || v < 0) {
		snprintf(b, n, "-");
		return;
	}
	if (v < 10 && v != floor(v)) {
		snprintf(b, n, "%.1f", v);
		return;
	}
	while (v >= 999.5 && u < (int)sizeof(units) - 2) {
		v /= 1000;
		u++;
	}
	if (u < 0) {
		snprintf(b, n, "%.0f", v);
	} else if (v < 9.995) {
		snprintf(b, n, "%.2f%c", v, units[u]);
	} else if (v < 99.95) {
		snprintf(b, n, "%.1f%c", v, units[u]);
	} else {
		snprintf(b, n, "%.0f%c", v, units[u]);
	}
}

static void
fmt_mb(char *b, size_t n, double bytes)
{
	double mb = bytes / 1e6;

	if (!isfinite(mb) || mb < 0) {
		snprintf(b, n, "-");
	} else if (mb < 9.995) {
		snprintf(b, n, "%.2f", mb);
	} else if (mb < 999.95) {
		snprintf(b, n, "%.1f", mb);
	} else {
		snprintf(b, n, "%.0f", mb);
	}
}

/* 40us, 1.23ms, 456ms, 2.10s */
static void
fmt_us(char *b, size_t n, double us)
{
	if (!isfinite(us) || us < 0) {
		snprintf(b, n, "-");
	} else if (us < 999.5) {
		snprintf(b, n, "%.0fus", us);
	} else if (us < 9995) {
		snprintf(b, n, "%.2fms", us / 1e3);
	} else if (us < 99950) {
		snprintf(b, n, "%.1fms", us / 1e3);
	} else if (us < 999500) {
		snprintf(b, n, "%.0fms", us / 1e3);
	} else if (us < 9.995e6) {
		snprintf(b, n, "%.2fs", us / 1e6);
	} else {
		snprintf(b, n, "%.1fs", us / 1e6);
	}
}

static void
fmt_ms(char *b, size_t n, double ms)
{
	if (!isfinite(ms) || ms < 0) {
		snprintf(b, n, "-");
	} else if (ms == 0 || ms >= 9.95) {
		snprintf(b, n, "%.0f", ms);
	} else {
		snprintf(b, n, "%.1f", ms);
	}
}

/* 42s, 5m03s, 2h05m, 3d04h */
static void
fmt_uptime(char *b, size_t n, double s)
{
	unsigned long t = isfinite(s) && s > 0 ? (unsigned long)s : 0;

	if (t < 60) {
		snprintf(b, n, "%lus", t);
	} else if (t < 3600) {
		snprintf(b, n, "%lum%02lus", t / 60, t % 60);
	} else if (t < 86400) {
		snprintf(b, n, "%luh%02lum", t / 3600, t / 60 % 60);
	} else {
		snprintf(b, n, "%lud%02luh", t / 86400, t / 3600 % 24);
	}
}

/* ---- reading a report ---- */

static double
num(const cJSON *obj, const char *name)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, name);

	return cJSON_IsNumber(v) ? v->valuedouble : 0;
}

/* The number, or NAN when it is null or missing. */
static double
num_or_nan(const cJSON *obj, const char *name)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, name);

	return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

static const char *
str(const cJSON *obj, const char *name)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, name);

	return cJSON_IsString(v) ? v->valuestring : "";
}

/* ---- grids ---- */

static void
grid_free(struct grid *g)
{
	for (size_t i = 0; i < g->rows * (size_t)g->ncols; i++) {
		free(g->cells[i]);
	}
	free(g->cells);
	free(g->rank);
}

/* A copy of s for the screen: at most CELL_MAX bytes, control bytes as '?'. */
static char *
cell_text(const char *s)
{
	size_t n = strnlen(s, CELL_MAX);
	char *t = malloc(n + 1);

	if (t == NULL) {
		return NULL;
	}
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		t[i] = c < 0x20 || c == 0x7f ? '?' : (char)c;
	}
	/* a cut in the middle of a UTF-8 sequence leaves no stray bytes */
	while (n > 0 && n == CELL_MAX && ((unsigned char)t[n - 1] & 0xc0) == 0x80) {
		n--;
	}
	if (n > 0 && n == CELL_MAX && ((unsigned char)t[n - 1] & 0xc0) == 0xc0) {
		n--;
	}
	t[n] = '\0';
	return t;
}

static int
grid_add(struct grid *g, const char *const *cells, double rank)
{
	size_t nc = (size_t)g->ncols;

	if (g->rows == g->cap) {
		size_t cap = g->cap > 0 ? g->cap * 2 : 16;
		char **c = realloc(g->cells, cap * nc * sizeof(*c));
		if (c == NULL) {
			return TERN_ENOMEM;
		}
		g->cells = c;
		double *r = realloc(g->rank, cap * sizeof(*r));
		if (r == NULL) {
			return TERN_ENOMEM;
		}
		g->rank = r;
		g->cap = cap;
	}
	for (size_t i = 0; i < nc; i++) {
		g->cells[g->rows * nc + i] = cell_text(cells[i]);
		if (g->cells[g->rows * nc + i] == NULL) {
			for (size_t j = 0; j < i; j++) {
				free(g->cells[g->rows * nc + j]);
			}
			return TERN_ENOMEM;
		}
	}
	g->rank[g->rows] = rank;
	g->rows++;
	return 0;
}

/* A row while sorting: its rank and its cells. */
struct row_ref {
	double rank;
	char **cells;
	int ncols;
};

/* By rank, largest first, then by the cells' text. */
static int
row_compare(const void *a, const void *b)
{
	const struct row_ref *ra = a;
	const struct row_ref *rb = b;

	if (ra->rank != rb->rank) {
		return ra->rank > rb->rank ? -1 : 1;
	}
	for (int i = 0; i < ra->ncols; i++) {
		int c = strcmp(ra->cells[i], rb->cells[i]);
		if (c != 0) {
			return c;
		}
	}
	return 0;
}

static int
grid_sort(struct grid *g)
{
	size_t nc = (size_t)g->ncols;
	struct row_ref *refs;
	char **cells;

	if (g->rows < 2) {
		return 0;
	}
	refs = malloc(g->rows * sizeof(*refs));
	cells = malloc(g->rows * nc * sizeof(*cells));
	if (refs == NULL || cells == NULL) {
		free(refs);
		free(cells);
		return TERN_ENOMEM;
	}
	for (size_t i = 0; i < g->rows; i++) {
		refs[i] = (struct row_ref){g->rank[i], &g->cells[i * nc], g->ncols};
	}
	qsort(refs, g->rows, sizeof(*refs), row_compare);
	for (size_t i = 0; i < g->rows; i++) {
		memcpy(&cells[i * nc], refs[i].cells, nc * sizeof(*cells));
		g->rank[i] = refs[i].rank;
	}
	free(g->cells);
	free(refs);
	g->cells = cells;
	g->cap = g->rows;
	return 0;
}

/* ---- text that fits ---- */

/* Columns that s takes on the screen: its UTF-8 code points. */
static int
text_cols(const char *s)
{
	int n = 0;

	for (; *s != '\0'; s++) {
		if (((unsigned char)*s & 0xc0) != 0x80) {
			n++;
		}
	}
	return n;
}

/* Bytes of s that make its first cols columns. */
static size_t
text_prefix(const char *s, int cols)
{
	size_t i = 0;
	int n = 0;

	while (s[i] != '\0') {
		if (((unsigned char)s[i] & 0xc0) != 0x80) {
			if (n == cols) {
				break;
			}
			n++;
		}
		i++;
	}
	return i;
}

/* Append s in exactly w columns: padded, or cut with a '~' at the end. */
static int
put_cell(outbuf *ob, const char *s, int w, bool left)
{
	static const char spaces[] = "                                ";
	int cols = text_cols(s);
	int pad = w - cols;
	int rc = 0;

	if (cols > w) {
		if (w == 0) {
			return 0;
		}
		rc = outbuf_append(ob, s, text_prefix(s, w - 1));
		return rc != 0 ? rc : outbuf_append(ob, "~", 1);
	}
	if (!left) {
		for (; pad > 0 && rc == 0; pad -= (int)sizeof(spaces) - 1) {
			rc = outbuf_append(ob, spaces,
			                   pad < (int)sizeof(spaces) - 1 ? (size_t)pad
			                                                 : sizeof(spaces) - 1);
		}
		pad = 0;
	}
	rc = rc != 0 ? rc : outbuf_append(ob, s, strlen(s));
	for (; pad > 0 && rc == 0; pad -= (int)sizeof(spaces) - 1) {
		rc = outbuf_append(
		    ob, spaces, pad < (int)sizeof(spaces) - 1 ? (size_t)pad : sizeof(spaces) - 1);
	}
	return rc;
}

/* One line, cut to the width; bold when it is a column title. */
static void
sink_line(struct sink *k, const char *text, size_t len, bool title)
{
	const toptable_opts *o = k->o;
	size_t n = len;

	if (k->rc != 0 || (o->height > 0 && k->lines >= o->height)) {
		return;
	}
	if (o->width > 0 && text_cols(text) > o->width) {
		n = text_prefix(text, o->width);
	}
	while (n > 0 && text[n - 1] == ' ') {
		n--;
	}
	if (title && o->ansi) {
		k->rc = outbuf_append_str(k->ob, "\033[1m");
	}
	k->rc = k->rc != 0 ? k->rc : outbuf_append(k->ob, text, n);
	if (title && o->ansi) {
		k->rc = k->rc != 0 ? k->rc : outbuf_append_str(k->ob, "\033[0m");
	}
	if (o->ansi) {
		k->rc = k->rc != 0 ? k->rc : outbuf_append_str(k->ob, "\033[K");
	}
	k->rc = k->rc != 0 ? k->rc : outbuf_append(k->ob, "\n", 1);
	k->lines++;
}

/* Column widths for g in width (0: no limit); returns how many show. */
static int
grid_fit(const struct grid *g, int width, int *w)
{
	int total = -GAP;
	int shown = g->ncols;

	for (int c = 0; c < g->ncols; c++) {
		w[c] = text_cols(g->cols[c].title);
		for (size_t r = 0; r < g->rows; r++) {
			int n = text_cols(g->cells[r * (size_t)g->ncols + (size_t)c]);
			w[c] = n > w[c] ? n : w[c];
		}
		total += w[c] + GAP;
	}
	if (width <= 0) {
		return shown;
	}
	while (total > width) {
		int widest = -1;
		for (int c = 0; c < g->ncols; c++) {
			if (g->cols[c].min > 0 && w[c] > g->cols[c].min &&
			    (widest < 0 || w[c] > w[widest])) {
				widest = c;
			}
		}
		if (widest < 0) {
			break;
		}
		w[widest]--;
		total--;
	}
	while (total > width && shown > 1) {
		shown--;
		total -= w[shown] + GAP;
	}
	if (total > width) {
		w[0] = width;
	}
	return shown;
}

/* The title and up to lines rows of g (the last of them "... N more" when
 * rows are left out). */
static void
grid_render(struct sink *k, const struct grid *g, size_t lines)
{
	int w[NCOLS(key_cols)];
	int shown = grid_fit(g, k->o->width, w);
	size_t rows = g->rows <= lines ? g->rows : lines > 0 ? lines - 1 : 0;
	outbuf line = {0};

	for (size_t r = 0; r <= rows && k->rc == 0; r++) {
		line.len = 0;
		for (int c = 0; c < shown && k->rc == 0; c++) {
			const char *text = r == 0
			                       ? g->cols[c].title
			                       : g->cells[(r - 1) * (size_t)g->ncols + (size_t)c];
			if (c > 0) {
				k->rc = outbuf_append(&line, "  ", GAP);
			}
			if (k->rc != 0) {
				break;
			}
			/* text in the last column needs no padding after it */
			if (c == shown - 1 && g->cols[c].left && text_cols(text) <= w[c]) {
				k->rc = outbuf_append_str(&line, text);
			} else {
				k->rc = put_cell(&line, text, w[c], g->cols[c].left);
			}
		}
		k->rc = k->rc != 0 ? k->rc : outbuf_append(&line, "", 1);
		if (k->rc == 0) {
			sink_line(k, line.data, line.len - 1, r == 0);
		}
	}
	if (rows < g->rows && lines > 0 && k->rc == 0) {
		char more[64];
		int n = snprintf(more, sizeof(more), "  ... %zu more", g->rows - rows);
		sink_line(k, more, (size_t)n, false);
	}
	outbuf_free(&line);
}

/* ---- the three sections ---- */

struct totals {
	double published;
	double delivered;
	size_t connections;
};

static int
add_node_row(struct grid *g, const report *r, struct totals *t)
{
	const cJSON *keys = cJSON_GetObjectItemCaseSensitive(r->json, "keys");
	const cJSON *conns = cJSON_GetObjectItemCaseSensitive(r->json, "connections");
	const cJSON *k;
	double pub = 0;
	double sub = 0;
	char uptime[32], nconn[32], nkeys[32], pubs[32], subs[32];

	cJSON_ArrayForEach(k, keys)
	{
		if (strcmp(str(k, "role"), "pub") == 0) {
			pub += num(k, "msgs_per_s");
		} else {
			sub += num(k, "msgs_per_s");
		}
	}
	t->published += pub;
	t->delivered += sub;
	t->connections += (size_t)cJSON_GetArraySize(conns);
	fmt_uptime(uptime, sizeof(uptime), num(r->json, "uptime_s"));
	snprintf(nconn, sizeof(nconn), "%d", cJSON_GetArraySize(conns));
	snprintf(nkeys, sizeof(nkeys), "%d", cJSON_GetArraySize(keys));
	fmt_si(pubs, sizeof(pubs), pub);
	fmt_si(subs, sizeof(subs), sub);
	const char *cells[] = {r->id, str(r->json, "mode"), uptime, nconn, nkeys, pubs, subs};
	return grid_add(g, cells, pub + sub);
}

static int
add_conn_rows(struct grid *g, const report *r)
{
	const cJSON *conns = cJSON_GetObjectItemCaseSensitive(r->json, "connections");
	const cJSON *c;
	int rc = 0;

	cJSON_ArrayForEach(c, conns)
	{
		char name[2 * CELL_MAX + 8], rtt[32], in[32], out[32];
		double bin = num(c, "bytes_in_per_s");
		double bout = num(c, "bytes_out_per_s");

		snprintf(name, sizeof(name), "%.*s -> %.*s", CELL_MAX, r->id, CELL_MAX,
		         str(c, "peer"));
		fmt_us(rtt, sizeof(rtt), num_or_nan(c, "rtt_us"));
		fmt_si(in, sizeof(in), bin);
		fmt_si(out, sizeof(out), bout);
		const char *cells[] = {name, str(c, "mode"), rtt, in, out, str(c, "endpoint")};
		rc = grid_add(g, cells, bin + bout);
		if (rc != 0) {
			break;
		}
	}
	return rc;
}

/* One (key, role) of a node, its publishers' entries merged. */
struct key_sum {
	const char *key;
	const char *role;
	double msgs_per_s, bytes_per_s, total, drops, missed, blocked_ms, queue;
	double lat[4]; /* p50, p99, p99.9, max; NAN: none */
};

static const char *const lat_names[4] = {"lat_p50_us", "lat_p99_us", "lat_p999_us", "lat_max_us"};

static void
key_sum_add(struct key_sum *s, const cJSON *k)
{
	s->msgs_per_s += num(k, "msgs_per_s");
	s->bytes_per_s += num(k, "bytes_per_s");
	s->total += num(k, "msgs_total");
	s->drops += num(k, "drops");
	s->missed += num(k, "missed");
	s->blocked_ms += num(k, "blocked_ms");
	s->queue += num(k, "queue_bytes");
	for (int i = 0; i < 4; i++) {
		double v = num_or_nan(k, lat_names[i]);
		if (!isnan(v) && (isnan(s->lat[i]) || v > s->lat[i])) {
			s->lat[i] = v;
		}
	}
}

/* A counter that does not apply to the role shows blank unless it moved. */
static void
fmt_role_count(char *b, size_t n, double v, bool applies)
{
	if (!applies && v == 0) {
		b[0] = '\0';
	} else {
		fmt_si(b, n, v);
	}
}

static int
add_key_row(struct grid *g, const char *node, const struct key_sum *s)
{
	bool pub = strcmp(s->role, "pub") == 0;
	char rate[32], mb[32], total[32], drops[32], missed[32], blocked[32], queue[32];
	char lat[4][32];

	fmt_si(rate, sizeof(rate), s->msgs_per_s);
	fmt_mb(mb, sizeof(mb), s->bytes_per_s);
	fmt_si(total, sizeof(total), s->total);
	fmt_role_count(drops, sizeof(drops), s->drops, pub);
	fmt_role_count(missed, sizeof(missed), s->missed, !pub);
	if (!pub && s->blocked_ms == 0) {
		blocked[0] = '\0';
	} else {
		fmt_ms(blocked, sizeof(blocked), s->blocked_ms);
	}
	fmt_role_count(queue, sizeof(queue), s->queue, pub);
	for (int i = 0; i < 4; i++) {
		if (pub && isnan(s->lat[i])) {
			lat[i][0] = '\0';
		} else {
			fmt_us(lat[i], sizeof(lat[i]), s->lat[i]);
		}
	}
	const char *cells[] = {node,   s->key,  s->role, rate,   mb,     total,  drops,
	                       missed, blocked, queue,   lat[0], lat[1], lat[2], lat[3]};
	return grid_add(g, cells, s->msgs_per_s);
}

static int
add_key_rows(struct grid *g, const report *r)
{
	const cJSON *keys = cJSON_GetObjectItemCaseSensitive(r->json, "keys");
	int n = cJSON_GetArraySize(keys);
	struct key_sum *sums;
	int count = 0;
	const cJSON *k;
	int rc = 0;

	if (n <= 0) {
		return 0;
	}
	sums = calloc((size_t)n, sizeof(*sums));
	if (sums == NULL) {
		return TERN_ENOMEM;
	}
	cJSON_ArrayForEach(k, keys)
	{
		const char *key = str(k, "key");
		const char *role = str(k, "role");
		int i;
		for (i = 0; i < count; i++) {
			if (strcmp(sums[i].key, key) == 0 && strcmp(sums[i].role, role) == 0) {
				break;
			}
		}
		if (i == count) {
			sums[i].key = key;
			sums[i].role = role;
			for (int j = 0; j < 4; j++) {
				sums[i].lat[j] = NAN;
			}
			count++;
		}
		key_sum_add(&sums[i], k);
	}
	for (int i = 0; i < count && rc == 0; i++) {
		rc = add_key_row(g, r->id, &sums[i]);
	}
	free(sums);
	return rc;
}

/* How many lines each section gets: the longest gives up lines first,
 * where the keys, the reason to run top, count half. */
static void
share_lines(const size_t *want, size_t budget, size_t *get)
{
	static const size_t weight[NSECTIONS] = {2, 2, 1};
	size_t sum = 0;

	for (int i = 0; i < NSECTIONS; i++) {
		get[i] = want[i];
		sum += want[i];
	}
	while (sum > budget) {
		int longest = -1;
		for (int i = 0; i < NSECTIONS; i++) {
			if (get[i] > 0 &&
			    (longest < 0 || get[i] * weight[i] > get[longest] * weight[longest])) {
				longest = i;
			}
		}
		get[longest]--;
		sum--;
	}
}

static void
render_header(struct sink *k, const struct totals *t, size_t nodes)
{
	char line[512];
	char pub[32], sub[32];
	int n;

	fmt_si(pub, sizeof(pub), t->published);
	fmt_si(sub, sizeof(sub), t->delivered);
	n = snprintf(line, sizeof(line),
	             "tern top%s%s  nodes %zu  connections %zu  msgs/s %s published, %s delivered",
	             k->o->clock != NULL ? "  " : "", k->o->clock != NULL ? k->o->clock : "", nodes,
	             t->connections, pub, sub);
	sink_line(k, line, n < (int)sizeof(line) ? (size_t)n : sizeof(line) - 1, false);
}

int
toptable_render(outbuf *ob, const reports *rs, const toptable_opts *o)
{
	struct grid g[NSECTIONS] = {
	    {node_cols, NCOLS(node_cols), 0, 0, NULL, NULL},
	    {conn_cols, NCOLS(conn_cols), 0, 0, NULL, NULL},
	    {key_cols, NCOLS(key_cols), 0, 0, NULL, NULL},
	};
	struct sink k = {ob, o, 0, 0};
	struct totals t = {0, 0, 0};
	size_t want[NSECTIONS], get[NSECTIONS];
	size_t fixed = 1 + 2 * NSECTIONS; /* header; a blank and a title each */
	size_t n = reports_count(rs);

	for (size_t i = 0; i < n && k.rc == 0; i++) {
		const report *r = reports_at(rs, i);
		k.rc = add_node_row(&g[0], r, &t);
		k.rc = k.rc != 0 ? k.rc : add_conn_rows(&g[1], r);
		k.rc = k.rc != 0 ? k.rc : add_key_rows(&g[2], r);
	}
	for (int i = 0; i < NSECTIONS && k.rc == 0; i++) {
		k.rc = grid_sort(&g[i]);
		want[i] = g[i].rows;
	}
	if (k.rc == 0) {
		render_header(&k, &t, n);
	}
	if (k.rc == 0 && n == 0 && o->waiting != NULL) {
		sink_line(&k, o->waiting, strlen(o->waiting), false);
		fixed++;
	}
	if (k.rc == 0) {
		size_t budget = (size_t)-1;
		if (o->height > 0) {
			budget = (size_t)o->height > fixed ? (size_t)o->height - fixed : 0;
		}
		share_lines(want, budget, get);
		for (int i = 0; i < NSECTIONS && k.rc == 0; i++) {
			sink_line(&k, "", 0, false);
			grid_render(&k, &g[i], get[i]);
		}
	}
	for (int i = 0; i < NSECTIONS; i++) {
		grid_free(&g[i]);
	}
	return k.rc;
}
