/*
 * matrix.c - from a configuration to the ordered list of cells.
 *
 * Cells go link by link; within a link, the cells of every layer for one
 * scenario, size and mode run back to back, so the ratios between them
 * compare measurements taken moments apart. A layer without a reply path
 * (zmq's PUB/SUB) gets no pingpong cells.
 */
#include "matrix.h"
#include "record.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Set-up and tear-down cost beyond the sending time, per cell. */
#define CELL_OVERHEAD_S 0.3

/* bytes and fanin cells send for this share of --duration. */
static double
short_duration(double d)
{
	double s = d * 0.4;

	return s < 0.2 ? (d < 0.2 ? d : 0.2) : s;
}

/* A payload that would take over a quarter of the cell to cross the link once
 * measures the wait for one message, not a rate: such cells are left out. */
static bool
size_fits(const struct bench_link *l, uint64_t size, double duration)
{
	return !l->emulated || l->bandwidth_Bps <= 0 ||
	       (double)size / l->bandwidth_Bps <= duration / 4.0;
}

static int
push(struct bench_run *run, size_t *cap, const struct cell *c)
{
	if (run->ncells == *cap) {
		size_t ncap = *cap ? *cap * 2 : 64;
		struct cell *nc = realloc(run->cells, ncap * sizeof(*nc));

		if (nc == NULL) {
			return -1;
		}
		run->cells = nc;
		*cap = ncap;
	}
	run->cells[run->ncells++] = *c;
	return 0;
}

/* One cell for each repeat and layer, the layers interleaved within a repeat
 * so that drift in the machine's speed hits them alike. */
static int
push_layers(struct bench_run *run, size_t *cap, struct cell *c)
{
	const struct bench_config *cfg = &run->cfg;
	uint32_t r;
	size_t y;

	for (r = 0; r < (cfg->repeat ? cfg->repeat : 1); r++) {
		c->repeat = r;
		for (y = 0; y < cfg->nlayers; y++) {
			if (c->kind == SCEN_PINGPONG && cfg->layers[y]->server_reply == NULL) {
				continue;
			}
			/* zmq carries no key of its own in the bench: one key only */
			if (c->keys > 1 && strcmp(cfg->layers[y]->name, "zmq") == 0) {
				continue;
			}
			c->layer = cfg->layers[y];
			if (push(run, cap, c) != 0) {
				return -1;
			}
		}
	}
	return 0;
}

/* One cell for each mode and layer. */
static int
push_modes(struct bench_run *run, size_t *cap, struct cell *c, bool batched_only_param)
{
	const struct bench_config *cfg = &run->cfg;
	size_t m;

	for (m = 0; m < cfg->nmodes; m++) {
		/* A batch size means nothing without batching. */
		if (batched_only_param && cfg->modes[m]) {
			continue;
		}
		c->lowlat = cfg->modes[m];
		if (push_layers(run, cap, c) != 0) {
			return -1;
		}
	}
	return 0;
}

/* --quick runs the scenarios other than stream on one link each: the one
 * that suits it (or the first link when that one is not selected). */
static bool
quick_runs_on(const struct bench_config *cfg, enum scenario_kind k, const struct bench_link *l)
{
	const char *want = k == SCEN_PINGPONG ? "loopback" : k == SCEN_BYTES ? "unix" : "lan";
	size_t i;

	if (!cfg->quick || k == SCEN_STREAM) {
		return true;
	}
	for (i = 0; i < cfg->nlinks; i++) {
		if (strcmp(cfg->links[i].name, want) == 0) {
			return strcmp(l->name, want) == 0;
		}
	}
	return l == &cfg->links[0];
}

size_t
matrix_link_rates(const struct bench_config *cfg, const struct bench_link *l, double *rates)
{
	if (cfg->rates_given) {
		memcpy(rates, cfg->rates, cfg->nrates * sizeof(rates[0]));
		return cfg->nrates;
	}
	/* Half of the link in payload: the wire also carries each message's
	 * framing (the tcp layer's 4-byte length, tern's frame header), so the
	 * link is a little more than half busy. */
	rates[0] = l->bandwidth_Bps > 0 ? floor(l->bandwidth_Bps / 2 / RECORD_BYTES)
	                                : MATRIX_UNLIMITED_RATE;
	return 1;
}

/* The open-loop stream cells of a link: one record a message, so each
 * latency is one record's, for each rate, mode and layer. */
static int
build_open_loop(struct bench_run *run, size_t *cap, struct cell *c)
{
	double rates[MAX_VALUES];
	size_t n = matrix_link_rates(&run->cfg, c->link, rates);
	size_t i;

	c->records_per_msg = 1;
	c->payload_bytes = RECORD_BYTES;
	for (i = 0; i < n; i++) {
		c->rate = rates[i];
		if (push_modes(run, cap, c, false) != 0) {
			return -1;
		}
	}
	c->rate = 0;
	return 0;
}

static int
build_link(struct bench_run *run, size_t *cap, const struct bench_link *l)
{
	const struct bench_config *cfg = &run->cfg;
	size_t s;
	size_t i;

	for (s = 0; s < cfg->nscenarios; s++) {
		struct cell c;

		if (!quick_runs_on(cfg, cfg->scenarios[s], l)) {
			continue;
		}

		memset(&c, 0, sizeof(c));
		c.kind = cfg->scenarios[s];
		c.link = l;
		c.tls_dir = cfg->tls_dir;
		c.concurrency = 1;
		c.keys = 1;
		c.duration = cfg->duration;
		switch (c.kind) {
		case SCEN_STREAM:
			for (size_t k = 0; k < cfg->nkeys; k++) {
				c.keys = cfg->keys[k];
				for (i = 0; i < cfg->nrecords; i++) {
					c.records_per_msg = cfg->records[i];
					c.payload_bytes =
					    (uint64_t)c.records_per_msg * RECORD_BYTES;
					if (push_modes(run, cap, &c, false) != 0) {
						return -1;
					}
				}
				if (build_open_loop(run, cap, &c) != 0) {
					return -1;
				}
			}
			c.keys = 1;
			break;
		case SCEN_PINGPONG:
			c.records_per_msg = 1;
			c.payload_bytes = RECORD_BYTES;
			for (i = 0; i < cfg->nconcurrency; i++) {
				c.concurrency = cfg->concurrency[i];
				if (push_modes(run, cap, &c, false) != 0) {
					return -1;
				}
			}
			break;
		case SCEN_BYTES:
			c.duration = short_duration(cfg->duration);
			for (i = 0; i < cfg->nsizes; i++) {
				c.payload_bytes = cfg->sizes[i];
				if (!size_fits(l, c.payload_bytes, c.duration)) {
					continue;
				}
				if (push_modes(run, cap, &c, false) != 0) {
					return -1;
				}
			}
			break;
		case SCEN_FANIN:
			c.duration = short_duration(cfg->duration);
			c.concurrency = cfg->connections;
			c.records_per_msg = cfg->fanin_records;
			c.payload_bytes = (uint64_t)c.records_per_msg * RECORD_BYTES;
			for (i = 0; i < cfg->nbatch_bytes; i++) {
				c.batch_bytes = cfg->batch_bytes[i];
				if (push_modes(run, cap, &c, true) != 0) {
					return -1;
				}
			}
			/* Low-latency mode once: it has no batch size to sweep. */
			c.batch_bytes = 0;
			for (i = 0; i < cfg->nmodes; i++) {
				if (cfg->modes[i]) {
					c.lowlat = true;
					if (push_layers(run, cap, &c) != 0) {
						return -1;
					}
				}
			}
			break;
		}
	}
	return 0;
}

int
matrix_build(struct bench_run *run)
{
	size_t cap = 0;
	size_t i;

	run->cells = NULL;
	run->ncells = 0;
	for (i = 0; i < run->cfg.nlinks; i++) {
		if (build_link(run, &cap, &run->cfg.links[i]) != 0) {
			return -1;
		}
	}
	return 0;
}

double
matrix_cell_estimate(const struct cell *c)
{
	double t = c->duration + CELL_OVERHEAD_S;

	/* An open-loop cell sends its whole schedule: longer when the rate is
	 * more than the link carries, up to when its sender gives up. */
	if (c->rate > 0 && c->link->emulated && c->link->bandwidth_Bps > 0 &&
	    c->rate * RECORD_BYTES > c->link->bandwidth_Bps) {
		t += fmin(c->duration * (c->rate * RECORD_BYTES / c->link->bandwidth_Bps - 1),
		          (RATE_GIVE_UP_WINDOWS - 1) * c->duration + RATE_GIVE_UP_NS / 1e9);
	}
	if (c->link->emulated) {
		t += 4 * c->link->rtt_ms / 1000.0;
		if (c->link->bandwidth_Bps > 0) {
			/* draining the bottleneck queue and the sockets around it */
			t += 2.0 * 262144 / c->link->bandwidth_Bps;
		}
	}
	if (c->kind == SCEN_FANIN) {
		t += 0.01 * c->concurrency;
	}
	return t;
}

static void
size_label(uint64_t n, char *buf, size_t len)
{
	if (n >= 1048576 && n % 1048576 == 0) {
		snprintf(buf, len, "%lluMiB", (unsigned long long)(n / 1048576));
	} else if (n >= 1024 && n % 1024 == 0) {
		snprintf(buf, len, "%lluKiB", (unsigned long long)(n / 1024));
	} else {
		snprintf(buf, len, "%lluB", (unsigned long long)n);
	}
}

/* 976562 as "977k", 1500000 as "1.5M", 500 as "500". */
static void
rate_label(double r, char *buf, size_t len)
{
	if (r >= 1e6) {
		snprintf(buf, len, "%.3gM", r / 1e6);
	} else if (r >= 1e3) {
		snprintf(buf, len, "%.3gk", r / 1e3);
	} else {
		snprintf(buf, len, "%.3g", r);
	}
}

void
matrix_cell_label(const struct cell *c, char *buf, size_t len)
{
	char param[96]; /* the longest: "4294967295 rec/msg @ 1.23e+45 rec/s 4294967295 keys" */
	char sz[24];

	switch (c->kind) {
	case SCEN_STREAM: {
		char keys[24] = "";
		if (c->keys > 1) {
			snprintf(keys, sizeof(keys), " %u keys", c->keys);
		}
		if (c->rate > 0) {
			rate_label(c->rate, sz, sizeof(sz));
			snprintf(param, sizeof(param), "%u rec/msg @ %s rec/s%s",
			         c->records_per_msg, sz, keys);
		} else {
			snprintf(param, sizeof(param), "%u rec/msg%s", c->records_per_msg, keys);
		}
		break;
	}
	case SCEN_PINGPONG:
		snprintf(param, sizeof(param), "%u in flight", c->concurrency);
		break;
	case SCEN_BYTES:
		size_label(c->payload_bytes, sz, sizeof(sz));
		snprintf(param, sizeof(param), "%s", sz);
		break;
	case SCEN_FANIN:
		if (c->lowlat) {
			snprintf(param, sizeof(param), "%u conns", c->concurrency);
		} else {
			size_label(c->batch_bytes ? c->batch_bytes : 65536, sz, sizeof(sz));
			snprintf(param, sizeof(param), "%u conns %s", c->concurrency, sz);
		}
		break;
	}
	snprintf(buf, len, "%s %s %s %s %s", scenario_name(c->kind), c->link->name, c->layer->name,
	         c->lowlat ? "lowlat" : "batched", param);
}

static cJSON *
u32_array(const uint32_t *v, size_t n)
{
	cJSON *a = cJSON_CreateArray();
	size_t i;

	for (i = 0; i < n; i++) {
		cJSON_AddItemToArray(a, cJSON_CreateNumber(v[i]));
	}
	return a;
}

/* The open-loop rates a link gets, records/s. */
static cJSON *
rates_array(const struct bench_config *cfg, const struct bench_link *l)
{
	double rates[MAX_VALUES];
	size_t n = matrix_link_rates(cfg, l, rates);
	cJSON *a = cJSON_CreateArray();
	size_t i;

	for (i = 0; i < n; i++) {
		cJSON_AddItemToArray(a, cJSON_CreateNumber(rates[i]));
	}
	return a;
}

char *
matrix_config_json(const struct bench_config *cfg)
{
	cJSON *o = cJSON_CreateObject();
	cJSON *a;
	char *s;
	size_t i;

	a = cJSON_AddArrayToObject(o, "scenarios");
	for (i = 0; i < cfg->nscenarios; i++) {
		cJSON_AddItemToArray(a, cJSON_CreateString(scenario_name(cfg->scenarios[i])));
	}
	a = cJSON_AddArrayToObject(o, "links");
	for (i = 0; i < cfg->nlinks; i++) {
		cJSON *l = cJSON_CreateObject();

		cJSON_AddStringToObject(l, "name", cfg->links[i].name);
		if (cfg->links[i].bandwidth_Bps > 0) {
			cJSON_AddNumberToObject(l, "bandwidth_Bps", cfg->links[i].bandwidth_Bps);
		} else {
			cJSON_AddNullToObject(l, "bandwidth_Bps");
		}
		cJSON_AddNumberToObject(l, "rtt_ms", cfg->links[i].rtt_ms);
		cJSON_AddStringToObject(l, "kind",
		                        cfg->links[i].is_unix    ? "unix"
		                        : cfg->links[i].emulated ? "emulated"
		                                                 : "loopback");
		cJSON_AddItemToObject(l, "rates", rates_array(cfg, &cfg->links[i]));
		cJSON_AddItemToArray(a, l);
	}
	a = cJSON_AddArrayToObject(o, "layers");
	for (i = 0; i < cfg->nlayers; i++) {
		cJSON_AddItemToArray(a, cJSON_CreateString(cfg->layers[i]->name));
	}
	a = cJSON_AddArrayToObject(o, "modes");
	for (i = 0; i < cfg->nmodes; i++) {
		cJSON_AddItemToArray(a, cJSON_CreateString(cfg->modes[i] ? "lowlat" : "batched"));
	}
	cJSON_AddItemToObject(o, "records", u32_array(cfg->records, cfg->nrecords));
	cJSON_AddItemToObject(o, "keys", u32_array(cfg->keys, cfg->nkeys));
	cJSON_AddItemToObject(o, "concurrency", u32_array(cfg->concurrency, cfg->nconcurrency));
	cJSON_AddNumberToObject(o, "connections", cfg->connections);
	cJSON_AddNumberToObject(o, "fanin_records", cfg->fanin_records);
	cJSON_AddItemToObject(o, "batch_bytes", u32_array(cfg->batch_bytes, cfg->nbatch_bytes));
	a = cJSON_AddArrayToObject(o, "sizes");
	for (i = 0; i < cfg->nsizes; i++) {
		cJSON_AddItemToArray(a, cJSON_CreateNumber((double)cfg->sizes[i]));
	}
	cJSON_AddNumberToObject(o, "duration", cfg->duration);
	/* --rate as given; null: each link's default, listed with the link */
	if (cfg->rates_given) {
		a = cJSON_AddArrayToObject(o, "rates");
		for (i = 0; i < cfg->nrates; i++) {
			cJSON_AddItemToArray(a, cJSON_CreateNumber(cfg->rates[i]));
		}
	} else {
		cJSON_AddNullToObject(o, "rates");
	}
	cJSON_AddNumberToObject(o, "repeat", cfg->repeat ? cfg->repeat : 1);
	cJSON_AddNumberToObject(o, "record_bytes", RECORD_BYTES);
	cJSON_AddBoolToObject(o, "quick", cfg->quick);
	cJSON_AddBoolToObject(o, "tls", cfg->tls);
	s = cJSON_PrintUnformatted(o);
	cJSON_Delete(o);
	return s;
}
