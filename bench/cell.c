/*
 * cell.c - runs one cell: endpoints, link emulator, senders and receiver,
 * and the CPU it cost (see scenario.h).
 */
#include "scenario.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

_Static_assert(ATOMIC_INT_LOCK_FREE == 2, "bench_interrupted is set in a signal handler");
atomic_int bench_interrupted;

static pthread_mutex_t fail_mu = PTHREAD_MUTEX_INITIALIZER;
static unsigned cell_counter;

const char *
scenario_name(enum scenario_kind k)
{
	switch (k) {
	case SCEN_STREAM:
		return "stream";
	case SCEN_PINGPONG:
		return "pingpong";
	case SCEN_BYTES:
		return "bytes";
	case SCEN_FANIN:
		return "fanin";
	}
	return "?";
}

int
scenario_parse(const char *name, enum scenario_kind *k)
{
	static const enum scenario_kind all[] = {SCEN_STREAM, SCEN_PINGPONG, SCEN_BYTES,
	                                         SCEN_FANIN};
	size_t i;

	for (i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
		if (strcmp(name, scenario_name(all[i])) == 0) {
			*k = all[i];
			return 0;
		}
	}
	return -1;
}

void
result_fail(struct cell_result *res, const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&fail_mu);
	if (!res->failed) {
		res->failed = true;
		va_start(ap, fmt);
		vsnprintf(res->error, sizeof(res->error), fmt, ap);
		va_end(ap);
	}
	pthread_mutex_unlock(&fail_mu);
}

int
env_server(struct cell_env *e, layer_msg_fn fn, void *arg, char *err, size_t err_len)
{
	const struct bench_link *l = e->cell->link;
	char listen_ep[NET_EP_MAX];
	const char *tmp = getenv("TMPDIR");

	if (l->is_unix) {
		if (tmp == NULL || tmp[0] != '/' || strlen(tmp) > 60) {
			tmp = "/tmp";
		}
		snprintf(listen_ep, sizeof(listen_ep), "unix://%s/tern-bench-%ld-%u.sock", tmp,
		         (long)getpid(), cell_counter++);
	} else {
		snprintf(listen_ep, sizeof(listen_ep), "tcp://127.0.0.1:0");
	}
	if (e->cell->layer->server_open(&e->server, &e->opts, listen_ep, fn, arg, e->server_ep,
	                                sizeof(e->server_ep), err, err_len) != 0) {
		return -1;
	}
	if (!l->emulated) {
		snprintf(e->client_ep, sizeof(e->client_ep), "%s", e->server_ep);
		return 0;
	}
	return linkemu_open(&e->relay, l->bandwidth_Bps, l->rtt_ms, e->server_ep, e->client_ep,
	                    sizeof(e->client_ep), err, err_len);
}

int
env_client(struct cell_env *e, layer_msg_fn reply_fn, void *arg, char *err, size_t err_len)
{
	void *cli;

	if (e->nclients >= ENV_MAX_CLIENTS) {
		snprintf(err, err_len, "at most %d connections", ENV_MAX_CLIENTS);
		return -1;
	}
	if (e->cell->layer->client_open(&cli, &e->opts, e->client_ep, reply_fn, arg, err,
	                                err_len) != 0) {
		return -1;
	}
	e->clients[e->nclients++] = cli;
	return 0;
}

int
env_ready(struct cell_env *e, int timeout_ms, char *err, size_t err_len)
{
	uint32_t i;

	for (i = 0; i < e->nclients; i++) {
		if (e->cell->layer->client_ready(e->clients[i], timeout_ms, err, err_len) != 0) {
			return -1;
		}
	}
	return 0;
}

void
env_teardown(struct cell_env *e)
{
	uint32_t i;

	for (i = 0; i < e->nclients; i++) {
		e->cell->layer->client_close(e->clients[i]);
	}
	e->nclients = 0;
	if (e->relay != NULL) {
		e->relay_cpu += linkemu_cpu_seconds(e->relay);
	}
	linkemu_close(e->relay);
	e->relay = NULL;
	if (e->server != NULL) {
		e->cell->layer->server_close(e->server);
		e->server = NULL;
	}
	if (e->cell->link->is_unix && e->server_ep[0] != '\0') {
		unlink(e->server_ep + 7);
	}
}

static double
process_cpu_seconds(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
	       (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

int
cell_run(const struct cell *c, struct cell_result *res)
{
	struct cell_env e;
	const char *fault = getenv("TERN_BENCH_FAULT");
	double cpu0;
	double cpu;
	double relay_cpu = 0;

	memset(res, 0, sizeof(*res));
	res->link_share = -1;
	res->lat_p50_us = res->lat_p99_us = res->lat_p999_us = -1;
	res->spread = -1;
	memset(&e, 0, sizeof(e));
	e.cell = c;
	e.opts.lowlat = c->lowlat;
	e.opts.batch_bytes = c->batch_bytes;
	e.opts.msg_bytes = c->payload_bytes;
	e.opts.tls_dir = c->tls_dir;
	e.opts.keys = c->keys;
	e.fault_drop = fault != NULL && strcmp(fault, "drop-record") == 0;
	e.fault_late_start = fault != NULL && strcmp(fault, "late-start") == 0;
	cpu0 = process_cpu_seconds();
	if (c->kind == SCEN_PINGPONG) {
		scenario_pingpong_run(&e, res);
	} else {
		scenario_push_run(&e, res);
	}
	env_teardown(&e);
	/* The emulator's CPU is the link's, not the layer's. */
	relay_cpu = e.relay_cpu;
	cpu = process_cpu_seconds() - cpu0 - relay_cpu;
	if (res->bytes > 0) {
		res->cpu_s_per_gb = (cpu > 0 ? cpu : 0) / ((double)res->bytes / 1e9);
	}
	if (res->seconds > 0) {
		res->records_per_s = (double)res->records / res->seconds;
		res->bytes_per_s = (double)res->bytes / res->seconds;
	}
	if (c->link->emulated && c->link->bandwidth_Bps > 0) {
		res->link_share = res->bytes_per_s / c->link->bandwidth_Bps;
	}
	if (bench_interrupted) {
		res->interrupted = true;
	}
	return 0;
}
