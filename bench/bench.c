/*
 * bench.c - `tern bench`: options, the run, storage and reports.
 *
 * A run is a list of cells (matrix.c), each run by cell_run() and stored
 * as soon as it finishes. Ctrl-C stops the cell in progress (it is not
 * stored), keeps the finished ones and marks the run interrupted; a second
 * Ctrl-C ends the process at once.
 */
#include "bench.h"
#include "commands.h"
#include "matrix.h"
#include "tlsbench.h"
#include "record.h"
#include "runenv.h"
#include "store.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EXIT_FAILED      1
#define EXIT_USAGE       2
#define EXIT_INTERRUPTED 130
#define MB               1e6
/* More samples than this would not change a t-test's verdict, only the time. */
#define REPEAT_MAX 100
/* 100 M records/s is 6.4 GB/s of payload, beyond what loopback carries. */
#define RATE_MAX 100000000ull

/* Can the JSON report be written? Opened without truncating, so an
 * existing file is kept until the run has something to put in it. */
static bool
out_writable(const char *path)
{
	FILE *f = fopen(path, "a");

	if (f == NULL) {
		return false;
	}
	fclose(f);
	return true;
}

#ifdef BENCH_HAVE_ZMQ
#define ZMQ_BUILT ""
#else
#define ZMQ_BUILT "                       (this tern bench was built without libzmq)\n"
#endif

static const char usage[] =
    "usage: tern bench [OPTIONS]\n"
    "       tern bench compare A B [--db FILE] [--threshold PCT] [--format table|json]\n"
    "       tern bench export RUN --out FILE.json [--db FILE]\n"
    "       tern bench import FILE.json [--db FILE]\n"
    "Measures records/s from a sender to a receiver for each link, scenario, layer,\n"
    "mode and size; stores the run in SQLite and prints a table per link.\n"
    "\n"
    "  --scenarios LIST     stream,pingpong,bytes,fanin (default: all)\n"
    "  --links LIST         loopback,lan,wifi,lte,wan,unix and --link names (default: all)\n"
    "  --link NAME=MBPS:RTT_MS  add an emulated link (MBPS 0: unlimited)\n"
    "  --layers LIST        tcp,tern,zmq (default: every one built; zmq is ZeroMQ\n"
    "                       PUB/SUB, built with libzmq, and runs no pingpong, since\n"
    "                       PUB/SUB has no reply path)\n" ZMQ_BUILT
    "  --modes LIST         batched,lowlat (default: both)\n"
    "  --records LIST       records per message for stream (default 1,4,16,64,256,1024)\n"
    "  --keys LIST          stream: messages go round-robin over this many keys\n"
    "                       (default 1; the tcp layer carries the same key in each\n"
    "                       message; zmq runs only 1)\n"
    "  --concurrency LIST   pingpong messages in flight (default 1,1000)\n"
    "  --connections N      fanin publishers, each with its own connection (default 100)\n"
    "  --batch-bytes LIST   fanin batching.max_bytes sweep (default 1024,8192,16384,65536)\n"
    "  --sizes LIST         bytes payloads, K and M suffixes allowed\n"
    "                       (default 1K,10K,64K,1M,64M)\n"
    "  --duration SECONDS   sending time of a stream or pingpong cell (default 5;\n"
    "                       bytes and fanin cells send for 0.4 of it)\n"
    "  --rate LIST          open-loop stream: records/s sent on schedule, one record\n"
    "                       a message, with one-way latency percentiles; K = 1000,\n"
    "                       M = 10^6 (default: half of each link's bandwidth in\n"
    "                       payload, 100k on loopback and unix; 0: none)\n"
    "  --repeat N           run each cell N times, the layers interleaved (default 1;\n"
    "                       at most 100); tables show the median and the spread\n"
    "  --db FILE            SQLite database (default tern-bench.db)\n"
    "  --out FILE.json      also write the run as JSON\n"
    "  --note TEXT          a note stored with the run\n"
    "  --quick              a small matrix that finishes in well under a minute\n"
    "  --tls                every connection over TLS 1.3: tern on tls:// endpoints,\n"
    "                       tcp through OpenSSL with the same settings (a throwaway\n"
    "                       certificate, mutual verification); zmq and the unix link\n"
    "                       are left out. Prints the median TLS handshake time\n"
    "  --validate           measure the link emulator itself (rate and round trip of\n"
    "                       each emulated link); fails beyond 5%\n"
    "  --help               this text\n";

/* --tls: only what can speak TLS here (tern's tls:// is TCP; zmq has none) */
static int
tls_only(struct bench_config *cfg)
{
	size_t n = 0;

	for (size_t i = 0; i < cfg->nlayers; i++) {
		if (strcmp(cfg->layers[i]->name, "zmq") != 0) {
			cfg->layers[n++] = cfg->layers[i];
		}
	}
	cfg->nlayers = n;
	n = 0;
	for (size_t i = 0; i < cfg->nlinks; i++) {
		if (!cfg->links[i].is_unix) {
			cfg->links[n++] = cfg->links[i];
		}
	}
	cfg->nlinks = n;
	if (cfg->nlayers == 0 || cfg->nlinks == 0) {
		fprintf(stderr, "tern bench: --tls runs the tcp and tern layers on TCP links; the "
		                "options leave none\n");
		return -1;
	}
	return 0;
}

static void
add_link(struct bench_config *cfg, const char *name, double mbps, double rtt, bool emulated,
         bool is_unix)
{
	struct bench_link *l = &cfg->links[cfg->nlinks++];

	memset(l, 0, sizeof(*l));
	snprintf(l->name, sizeof(l->name), "%s", name);
	l->bandwidth_Bps = mbps * MB;
	l->rtt_ms = rtt;
	l->emulated = emulated;
	l->is_unix = is_unix;
}

static void
defaults(struct bench_config *cfg)
{
	static const uint32_t records[] = {1, 4, 16, 64, 256, 1024};
	static const uint32_t batch[] = {1024, 8192, 16384, 65536};
	static const uint64_t sizes[] = {1024, 10240, 65536, 1048576, 64u * 1048576};
	const struct layer_ops *const *layers;

	memset(cfg, 0, sizeof(*cfg));
	add_link(cfg, "loopback", 0, 0, false, false);
	add_link(cfg, "lan", 125, 0, true, false);
	add_link(cfg, "wifi", 12, 10, true, false);
	add_link(cfg, "lte", 6, 50, true, false);
	add_link(cfg, "wan", 25, 100, true, false);
	add_link(cfg, "unix", 0, 0, false, true);
	cfg->scenarios[0] = SCEN_STREAM;
	cfg->scenarios[1] = SCEN_PINGPONG;
	cfg->scenarios[2] = SCEN_BYTES;
	cfg->scenarios[3] = SCEN_FANIN;
	cfg->nscenarios = 4;
	layers = layer_all(&cfg->nlayers);
	memcpy(cfg->layers, layers, cfg->nlayers * sizeof(layers[0]));
	cfg->modes[0] = false;
	cfg->modes[1] = true;
	cfg->nmodes = 2;
	memcpy(cfg->records, records, sizeof(records));
	cfg->nrecords = sizeof(records) / sizeof(records[0]);
	cfg->keys[0] = 1;
	cfg->nkeys = 1;
	cfg->concurrency[0] = 1;
	cfg->concurrency[1] = 1000;
	cfg->nconcurrency = 2;
	cfg->connections = 100;
	cfg->fanin_records = 1;
	memcpy(cfg->batch_bytes, batch, sizeof(batch));
	cfg->nbatch_bytes = sizeof(batch) / sizeof(batch[0]);
	memcpy(cfg->sizes, sizes, sizeof(sizes));
	cfg->nsizes = sizeof(sizes) / sizeof(sizes[0]);
	cfg->duration = 5;
	cfg->repeat = 1;
	cfg->db = "tern-bench.db";
}

/* --quick: every link, layer and mode for stream; a tiny instance of the
 * other scenarios, each on the one link that suits it best. */
static void
quick_defaults(struct bench_config *cfg)
{
	cfg->quick = true;
	cfg->records[0] = 1;
	cfg->records[1] = 16;
	cfg->records[2] = 1024;
	cfg->nrecords = 3;
	cfg->concurrency[0] = 1;
	cfg->concurrency[1] = 16;
	cfg->nconcurrency = 2;
	cfg->connections = 4;
	cfg->batch_bytes[0] = 16384;
	cfg->nbatch_bytes = 1;
	cfg->sizes[0] = 1024;
	cfg->sizes[1] = 65536;
	cfg->nsizes = 2;
	cfg->duration = 0.2;
}

/* Parse "a,b,c" of unsigned numbers; with a unit (1000 or 1024), K and M
 * suffixes stand for unit and unit squared. */
static int
parse_list(const char *opt, const char *s, uint64_t *out, size_t max, size_t *n, uint64_t lo,
           uint64_t hi, uint64_t unit)
{
	const char *p = s;

	*n = 0;
	while (*p != '\0') {
		char *end;
		unsigned long long v;

		errno = 0;
		if (*p < '0' || *p > '9') {
			fprintf(stderr, "tern bench: %s %s: expected numbers separated by commas\n",
			        opt, s);
			return -1;
		}
		v = strtoull(p, &end, 10);
		if (unit != 0 && (*end == 'K' || *end == 'k')) {
			v = v > UINT64_MAX / unit ? UINT64_MAX : v * unit;
			end++;
		} else if (unit != 0 && (*end == 'M' || *end == 'm')) {
			v = v > UINT64_MAX / unit / unit ? UINT64_MAX : v * unit * unit;
			end++;
		}
		if (errno != 0 || v < lo || v > hi || (*end != ',' && *end != '\0') ||
		    (*end == ',' && end[1] == '\0')) {
			fprintf(
			    stderr,
			    "tern bench: %s %s: each value must be a number from %llu to %llu\n",
			    opt, s, (unsigned long long)lo, (unsigned long long)hi);
			return -1;
		}
		if (*n == max) {
			fprintf(stderr, "tern bench: %s: at most %zu values\n", opt, max);
			return -1;
		}
		out[(*n)++] = v;
		p = *end == ',' ? end + 1 : end;
	}
	if (*n == 0) {
		fprintf(stderr, "tern bench: %s needs at least one value\n", opt);
		return -1;
	}
	return 0;
}

static int
parse_u32_list(const char *opt, const char *s, uint32_t *out, size_t *n, uint64_t lo, uint64_t hi)
{
	uint64_t v[MAX_VALUES];
	size_t i;

	if (parse_list(opt, s, v, MAX_VALUES, n, lo, hi, 0) != 0) {
		return -1;
	}
	for (i = 0; i < *n; i++) {
		out[i] = (uint32_t)v[i];
	}
	return 0;
}

/* --rate LIST: open-loop stream rates for every link; "0" alone: none. */
static int
parse_rates(struct bench_config *cfg, const char *a)
{
	uint64_t v[MAX_VALUES];
	size_t n;
	size_t i;

	if (parse_list("--rate", a, v, MAX_VALUES, &n, 0, RATE_MAX, 1000) != 0) {
		return -1;
	}
	cfg->rates_given = true;
	cfg->nrates = 0;
	for (i = 0; i < n; i++) {
		if (v[i] == 0 && n > 1) {
			fprintf(stderr,
			        "tern bench: --rate %s: 0 (no open-loop cells) stands alone\n", a);
			return -1;
		}
		if (v[i] > 0) {
			cfg->rates[cfg->nrates++] = (double)v[i];
		}
	}
	return 0;
}

/* Split a comma list into words; each is checked by the caller. */
static int
next_word(const char **p, char *w, size_t wl)
{
	const char *comma = strchr(*p, ',');
	size_t n = comma ? (size_t)(comma - *p) : strlen(*p);

	/* "a,,b" and "a," are typos, not lists. */
	if (n == 0 || n >= wl || (comma != NULL && comma[1] == '\0')) {
		return -1;
	}
	memcpy(w, *p, n);
	w[n] = '\0';
	*p += n + (comma ? 1 : 0);
	return 0;
}

static int
parse_link_def(struct bench_config *cfg, struct bench_link *extra, size_t *nextra, const char *s)
{
	const char *eq = strchr(s, '=');
	char name[32];
	double mbps;
	double rtt;
	char *end;

	if (eq == NULL || eq == s || (size_t)(eq - s) >= sizeof(name)) {
		fprintf(stderr, "tern bench: --link %s: expected NAME=MBPS:RTT_MS\n", s);
		return -1;
	}
	memcpy(name, s, (size_t)(eq - s));
	name[eq - s] = '\0';
	mbps = strtod(eq + 1, &end);
	if (*end != ':' || !(mbps >= 0) || mbps > 1e6) {
		fprintf(stderr, "tern bench: --link %s: MBPS must be a number from 0 to 1000000\n",
		        s);
		return -1;
	}
	rtt = strtod(end + 1, &end);
	if (*end != '\0' || !(rtt >= 0) || rtt > 10000) {
		fprintf(stderr, "tern bench: --link %s: RTT_MS must be a number from 0 to 10000\n",
		        s);
		return -1;
	}
	if (*nextra == MAX_LINKS || cfg->nlinks + *nextra >= MAX_LINKS) {
		fprintf(stderr, "tern bench: at most %d links\n", MAX_LINKS);
		return -1;
	}
	memset(&extra[*nextra], 0, sizeof(extra[0]));
	snprintf(extra[*nextra].name, sizeof(extra[0].name), "%s", name);
	extra[*nextra].bandwidth_Bps = mbps * MB;
	extra[*nextra].rtt_ms = rtt;
	extra[*nextra].emulated = true;
	(*nextra)++;
	return 0;
}

enum {
	OPT_SCENARIOS = 256,
	OPT_LINKS,
	OPT_LINK,
	OPT_LAYERS,
	OPT_MODES,
	OPT_RECORDS,
	OPT_KEYS,
	OPT_CONCURRENCY,
	OPT_CONNECTIONS,
	OPT_BATCH,
	OPT_SIZES,
	OPT_DURATION,
	OPT_RATE,
	OPT_REPEAT,
	OPT_DB,
	OPT_OUT,
	OPT_NOTE,
	OPT_QUICK,
	OPT_TLS,
	OPT_VALIDATE,
	OPT_HELP
};

static const struct option long_opts[] = {
    {"scenarios", required_argument, NULL, OPT_SCENARIOS},
    {"links", required_argument, NULL, OPT_LINKS},
    {"link", required_argument, NULL, OPT_LINK},
    {"layers", required_argument, NULL, OPT_LAYERS},
    {"modes", required_argument, NULL, OPT_MODES},
    {"records", required_argument, NULL, OPT_RECORDS},
    {"keys", required_argument, NULL, OPT_KEYS},
    {"concurrency", required_argument, NULL, OPT_CONCURRENCY},
    {"connections", required_argument, NULL, OPT_CONNECTIONS},
    {"batch-bytes", required_argument, NULL, OPT_BATCH},
    {"sizes", required_argument, NULL, OPT_SIZES},
    {"duration", required_argument, NULL, OPT_DURATION},
    {"rate", required_argument, NULL, OPT_RATE},
    {"repeat", required_argument, NULL, OPT_REPEAT},
    {"db", required_argument, NULL, OPT_DB},
    {"out", required_argument, NULL, OPT_OUT},
    {"note", required_argument, NULL, OPT_NOTE},
    {"quick", no_argument, NULL, OPT_QUICK},
    {"tls", no_argument, NULL, OPT_TLS},
    {"validate", no_argument, NULL, OPT_VALIDATE},
    {"help", no_argument, NULL, OPT_HELP},
    {NULL, 0, NULL, 0},
};

static int
select_links(struct bench_config *cfg, const struct bench_link *extra, size_t nextra,
             const char *list)
{
	struct bench_link all[MAX_LINKS];
	size_t nall = 0;
	size_t i;
	const char *p = list;
	char w[32];

	for (i = 0; i < cfg->nlinks; i++) {
		all[nall++] = cfg->links[i];
	}
	for (i = 0; i < nextra; i++) {
		/* --link with a built-in name redefines it */
		size_t j;

		for (j = 0; j < nall && strcmp(all[j].name, extra[i].name) != 0; j++) {
		}
		all[j] = extra[i];
		if (j == nall) {
			nall++;
		}
	}
	if (list == NULL) {
		memcpy(cfg->links, all, nall * sizeof(all[0]));
		cfg->nlinks = nall;
		return 0;
	}
	cfg->nlinks = 0;
	while (*p != '\0') {
		if (next_word(&p, w, sizeof(w)) != 0) {
			fprintf(stderr,
			        "tern bench: --links %s: expected names separated by commas\n",
			        list);
			return -1;
		}
		for (i = 0; i < nall && strcmp(all[i].name, w) != 0; i++) {
		}
		if (i == nall) {
			fprintf(
			    stderr,
			    "tern bench: --links: no link called '%s' (known: loopback, lan, wifi, "
			    "lte, wan, unix, or one added with --link)\n",
			    w);
			return -1;
		}
		cfg->links[cfg->nlinks++] = all[i];
	}
	return cfg->nlinks > 0 ? 0 : -1;
}

static int
parse_args(struct bench_config *cfg, int argc, char **argv)
{
	struct bench_link extra[MAX_LINKS];
	size_t nextra = 0;
	const char *links = NULL;
	uint64_t sizes[MAX_VALUES];
	size_t n;
	int i;
	int c;

	defaults(cfg);
	for (i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--quick") == 0) {
			quick_defaults(cfg);
		}
	}
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, "", long_opts, NULL)) != -1) {
		const char *a = optarg;
		const char *p = a;
		char w[32];

		switch (c) {
		case OPT_SCENARIOS:
			cfg->nscenarios = 0;
			while (p && *p) {
				enum scenario_kind k;

				if (next_word(&p, w, sizeof(w)) != 0 ||
				    scenario_parse(w, &k) != 0 || cfg->nscenarios == 4) {
					fprintf(stderr,
					        "tern bench: --scenarios %s: expected stream, "
					        "pingpong, bytes, fanin\n",
					        a);
					return -1;
				}
				cfg->scenarios[cfg->nscenarios++] = k;
			}
			break;
		case OPT_LINKS:
			links = a;
			break;
		case OPT_LINK:
			if (parse_link_def(cfg, extra, &nextra, a) != 0) {
				return -1;
			}
			break;
		case OPT_LAYERS:
			cfg->nlayers = 0;
			while (p && *p) {
				bool word = next_word(&p, w, sizeof(w)) == 0;

				if (word && layer_built_without(w)) {
					fprintf(
					    stderr,
					    "tern bench: --layers: %s: this tern bench was built "
					    "without libzmq (install libzmq3-dev and rebuild)\n",
					    w);
					return -1;
				}
				if (!word || layer_find(w) == NULL || cfg->nlayers == LAYER_MAX) {
					fprintf(
					    stderr,
					    "tern bench: --layers %s: expected tcp, tern, zmq\n",
					    a);
					return -1;
				}
				cfg->layers[cfg->nlayers++] = layer_find(w);
			}
			break;
		case OPT_MODES:
			cfg->nmodes = 0;
			while (p && *p) {
				if (next_word(&p, w, sizeof(w)) != 0 || cfg->nmodes == 2 ||
				    (strcmp(w, "batched") != 0 && strcmp(w, "lowlat") != 0)) {
					fprintf(
					    stderr,
					    "tern bench: --modes %s: expected batched, lowlat\n",
					    a);
					return -1;
				}
				cfg->modes[cfg->nmodes++] = strcmp(w, "lowlat") == 0;
			}
			break;
		case OPT_RECORDS:
			if (parse_u32_list("--records", a, cfg->records, &cfg->nrecords, 1,
			                   LAYER_MAX_MESSAGE / RECORD_BYTES) != 0) {
				return -1;
			}
			break;
		case OPT_KEYS:
			if (parse_u32_list("--keys", a, cfg->keys, &cfg->nkeys, 1, 1000000) != 0) {
				return -1;
			}
			break;
		case OPT_CONCURRENCY:
			if (parse_u32_list("--concurrency", a, cfg->concurrency, &cfg->nconcurrency,
			                   1, 100000) != 0) {
				return -1;
			}
			break;
		case OPT_CONNECTIONS:
			if (parse_u32_list("--connections", a, &cfg->connections, &n, 1,
			                   ENV_MAX_CLIENTS) != 0 ||
			    n != 1) {
				if (n > 1) {
					fprintf(stderr,
					        "tern bench: --connections takes one number\n");
				}
				return -1;
			}
			break;
		case OPT_BATCH:
			if (parse_u32_list("--batch-bytes", a, cfg->batch_bytes, &cfg->nbatch_bytes,
			                   64, LAYER_MAX_MESSAGE) != 0) {
				return -1;
			}
			break;
		case OPT_SIZES:
			if (parse_list("--sizes", a, sizes, MAX_VALUES, &cfg->nsizes, 8,
			               LAYER_MAX_MESSAGE, 1024) != 0) {
				return -1;
			}
			memcpy(cfg->sizes, sizes, cfg->nsizes * sizeof(sizes[0]));
			break;
		case OPT_DURATION: {
			char *end;
			double d = strtod(a, &end);

			if (*end != '\0' || !(d >= 0.05) || d > 3600) {
				fprintf(stderr,
				        "tern bench: --duration %s: expected seconds from 0.05 to "
				        "3600\n",
				        a);
				return -1;
			}
			cfg->duration = d;
			break;
		}
		case OPT_RATE:
			if (parse_rates(cfg, a) != 0) {
				return -1;
			}
			break;
		case OPT_REPEAT:
			if (parse_u32_list("--repeat", a, &cfg->repeat, &n, 1, REPEAT_MAX) != 0 ||
			    n != 1) {
				if (n > 1) {
					fprintf(stderr, "tern bench: --repeat takes one number\n");
				}
				return -1;
			}
			break;
		case OPT_DB:
			cfg->db = a;
			break;
		case OPT_OUT:
			cfg->out = a;
			break;
		case OPT_NOTE:
			cfg->note = a;
			break;
		case OPT_QUICK:
			break;
		case OPT_TLS:
			cfg->tls = true;
			break;
		case OPT_VALIDATE:
			cfg->validate = true;
			break;
		case OPT_HELP:
			fputs(usage, stdout);
			return 1;
		case ':':
			fprintf(stderr, "tern bench: %s needs a value (see tern bench --help)\n",
			        argv[optind - 1]);
			return -1;
		default:
			fprintf(stderr, "tern bench: unknown option %s (see tern bench --help)\n",
			        argv[optind - 1]);
			return -1;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "tern bench: unexpected argument '%s' (see tern bench --help)\n",
		        argv[optind]);
		return -1;
	}
	if (select_links(cfg, extra, nextra, links) != 0) {
		return -1;
	}
	return cfg->tls ? tls_only(cfg) : 0;
}

static void
on_sigint(int sig)
{
	(void)sig;
	bench_interrupted = 1;
}

/* Store the run's header rows. */
static int
begin_run(store *db, struct bench_run *run, int64_t *run_id)
{
	struct run_info ri;
	struct run_env env;
	char err[300];
	char *config = matrix_config_json(&run->cfg);
	size_t i;
	int rc;

	runenv_collect(&env);
	memset(&ri, 0, sizeof(ri));
	ri.tern_version = TERN_BENCH_VERSION;
	ri.host = env.host;
	ri.cpu = env.cpu_model;
	ri.cores = env.cores;
	ri.note = run->cfg.note;
	ri.config_json = config ? config : "{}";
	ri.cpu_model = env.cpu_model;
	ri.kernel = env.kernel;
	ri.compiler = env.compiler;
	ri.build_type = env.build_type;
	ri.tern_commit = env.tern_commit;
	ri.env_json = env.env_json;
	ri.pid = (long)getpid();
	rc = store_run_begin(db, &ri, run_id, err, sizeof(err));
	free(config);
	runenv_free(&env);
	for (i = 0; rc == 0 && i < run->cfg.nlinks; i++) {
		rc = store_link(db, *run_id, &run->cfg.links[i], err, sizeof(err));
	}
	if (rc != 0) {
		fprintf(stderr, "tern bench: %s\n", err);
	}
	return rc;
}

static int
run_matrix(struct bench_run *run)
{
	store *db = NULL;
	int64_t run_id = 0;
	char err[300];
	char tls_dir[256];
	bool any_failed = false;
	bool db_failed = false;
	size_t i;

	if (matrix_build(run) != 0 || run->ncells == 0) {
		fprintf(stderr, "tern bench: %s\n",
		        run->ncells == 0 ? "the options leave no cell to run" : "out of memory");
		return EXIT_USAGE;
	}
	run->results = calloc(run->ncells, sizeof(*run->results));
	run->done = calloc(run->ncells, sizeof(*run->done));
	if (run->results == NULL || run->done == NULL) {
		fprintf(stderr, "tern bench: out of memory\n");
		return EXIT_FAILED;
	}
	if (run->cfg.out != NULL && !out_writable(run->cfg.out)) {
		/* found out now, not after the whole matrix has run */
		fprintf(stderr, "tern bench: --out %s: cannot write the file: %s\n", run->cfg.out,
		        strerror(errno));
		return EXIT_FAILED;
	}
	if (run->cfg.tls && tlsbench_make(tls_dir, sizeof(tls_dir), err, sizeof(err)) != 0) {
		fprintf(stderr, "tern bench: --tls: %s\n", err);
		return EXIT_FAILED;
	}
	if (run->cfg.tls) {
		run->cfg.tls_dir = tls_dir;
		for (i = 0; i < run->ncells; i++) {
			run->cells[i].tls_dir = tls_dir;
		}
	}
	if (store_open(&db, run->cfg.db, err, sizeof(err)) != 0) {
		fprintf(stderr, "tern bench: %s\n", err);
		if (run->cfg.tls) {
			tlsbench_remove(tls_dir);
		}
		return EXIT_FAILED;
	}
	store_now_iso(run->started_at, sizeof(run->started_at));
	if (begin_run(db, run, &run_id) != 0) {
		if (run->cfg.tls) {
			tlsbench_remove(tls_dir);
		}
		store_close(db);
		return EXIT_FAILED;
	}
	progress_begin(run);
	for (i = 0; i < run->ncells && !bench_interrupted; i++) {
		progress_cell(run, i);
		cell_run(&run->cells[i], &run->results[i]);
		if (run->results[i].interrupted) {
			break;
		}
		run->done[i] = true;
		any_failed |= run->results[i].failed;
		if (store_result(db, run_id, &run->cells[i], &run->results[i], err, sizeof(err)) !=
		    0) {
			/* Keep measuring: the table and --out still get the result. */
			if (!db_failed) {
				fprintf(stderr, "\ntern bench: %s\n", err);
			}
			db_failed = true;
		}
	}
	progress_end();
	run->status = bench_interrupted ? "interrupted" : any_failed ? "failed" : "finished";
	store_now_iso(run->finished_at, sizeof(run->finished_at));
	if (store_run_end(db, run_id, run->status, err, sizeof(err)) != 0) {
		fprintf(stderr, "tern bench: %s\n", err);
		db_failed = true;
	}
	store_close(db);
	if (run->cfg.tls) {
		tlsbench_report(stderr);
		tlsbench_remove(tls_dir);
		run->cfg.tls_dir = NULL;
	}
	report_tables(stdout, run);
	if (run->cfg.out != NULL && report_json(run, run->cfg.out, err, sizeof(err)) != 0) {
		fprintf(stderr, "tern bench: %s\n", err);
		db_failed = true;
	}
	fprintf(stderr, "tern bench: run %lld %s (%s)\n", (long long)run_id, run->status,
	        run->cfg.db);
	if (bench_interrupted) {
		return EXIT_INTERRUPTED;
	}
	return any_failed || db_failed ? EXIT_FAILED : 0;
}

int
bench_main(int argc, char **argv)
{
	struct bench_run run;
	struct sigaction sa;
	struct sigaction old_int;
	struct sigaction old_pipe;
	int rc;

	if (argc > 1 && strcmp(argv[1], "compare") == 0) {
		return bench_compare_main(argc - 1, argv + 1);
	}
	if (argc > 1 && strcmp(argv[1], "export") == 0) {
		return bench_export_main(argc - 1, argv + 1);
	}
	if (argc > 1 && strcmp(argv[1], "import") == 0) {
		return bench_import_main(argc - 1, argv + 1);
	}
	memset(&run, 0, sizeof(run));
	rc = parse_args(&run.cfg, argc, argv);
	if (rc != 0) {
		return rc > 0 ? 0 : EXIT_USAGE;
	}
	bench_interrupted = 0;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_sigint;
	/* A second Ctrl-C gets the default action: the process ends. */
	sa.sa_flags = (int)SA_RESETHAND;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, &old_int);
	/* A peer that goes away mid-write is an error to report, not a signal. */
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = SIG_IGN;
	sigaction(SIGPIPE, &sa, &old_pipe);
	if (run.cfg.validate) {
		rc = validate_links(&run.cfg, stdout) == 0 ? 0 : EXIT_FAILED;
	} else {
		rc = run_matrix(&run);
	}
	sigaction(SIGINT, &old_int, NULL);
	sigaction(SIGPIPE, &old_pipe, NULL);
	free(run.cells);
	free(run.results);
	free(run.done);
	return rc;
}
