/*
 * scenario.h - one cell of the benchmark matrix and what it measured.
 *
 * A cell is one scenario on one link, layer, mode and size. cell_run() sets
 * up the receiver (a layer server), the link emulator in front of it and the
 * senders (layer clients), runs the scenario, tears everything down, and
 * fills a cell_result. The scenarios share the set-up through cell_env.
 */
#ifndef BENCH_SCENARIO_H
#define BENCH_SCENARIO_H

#include "layer.h"
#include "linkemu.h"
#include "net.h"

#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

struct bench_link {
	char name[32];
	double bandwidth_Bps; /* 0: unlimited */
	double rtt_ms;
	bool is_unix;  /* a Unix-domain socket, no emulation */
	bool emulated; /* traffic goes through the link emulator */
};

enum scenario_kind { SCEN_STREAM, SCEN_PINGPONG, SCEN_BYTES, SCEN_FANIN };

struct cell {
	enum scenario_kind kind;
	const struct bench_link *link;
	const struct layer_ops *layer;
	bool lowlat;
	uint32_t records_per_msg; /* bytes scenario: 0 */
	uint64_t payload_bytes;   /* one message's payload */
	uint32_t concurrency;     /* pingpong in flight, fanin connections, else 1 */
	uint32_t batch_bytes;     /* 0: the layer's default (65536) */
	double duration;          /* seconds of sending */
	double rate;              /* stream: open-loop records/s; 0: as fast as it can */
	uint32_t repeat;          /* which of the run's --repeat samples this is, from 0 */
	const char *tls_dir;      /* --tls: the run's certificate; NULL: plain */
	uint32_t keys;            /* stream: messages round-robin over this many keys, else 1 */
};

/* An open-loop sender still behind this many windows of --duration plus
 * RATE_GIVE_UP_NS after its start gives up (scenario_push.c). */
#define RATE_GIVE_UP_WINDOWS 10
#define RATE_GIVE_UP_NS      (5ull * 1000000000ull)

struct cell_result {
	double seconds;
	uint64_t messages;
	uint64_t records;
	uint64_t bytes;
	double records_per_s;
	double bytes_per_s;
	double link_share; /* < 0: unlimited link */
	double lat_p50_us; /* < 0: not measured */
	double lat_p99_us;
	double lat_p999_us;
	double spread; /* fanin: fastest / slowest publisher; < 0 otherwise */
	uint64_t lost;
	double cpu_s_per_gb;
	bool failed;
	bool interrupted;
	char error[256];
};

/* Set by SIGINT: every loop of a running cell checks it and stops. The
 * loops run in sender and receiver threads, not only in the thread the
 * handler interrupts, so a volatile sig_atomic_t (which orders nothing
 * between threads) will not do; a lock-free atomic is safe in a handler. */
extern atomic_int bench_interrupted;

/* The scenario's name as stored: "stream", "pingpong", "bytes", "fanin". */
const char *scenario_name(enum scenario_kind k);
int scenario_parse(const char *name, enum scenario_kind *k);

/* Run a cell. Returns 0; failures are in res->failed / res->error. */
int cell_run(const struct cell *c, struct cell_result *res);

/* ---- for the scenario files ---- */

#define ENV_MAX_CLIENTS 1024

struct cell_env {
	const struct cell *cell;
	struct layer_opts opts;
	void *server;
	linkemu *relay;
	char server_ep[NET_EP_MAX];
	char client_ep[NET_EP_MAX];
	void *clients[ENV_MAX_CLIENTS];
	uint32_t nclients;
	double relay_cpu;      /* CPU seconds of the emulator, set by env_teardown */
	bool fault_drop;       /* test-only: a sender leaves out one record */
	bool fault_late_start; /* test-only: senders start after their window */
};

/* Start the receiver (and the link emulator in front of it). */
int env_server(struct cell_env *e, layer_msg_fn fn, void *arg, char *err, size_t err_len);
/* Open one sender; it is e->clients[e->nclients - 1]. */
int env_client(struct cell_env *e, layer_msg_fn reply_fn, void *arg, char *err, size_t err_len);
/* Wait until every sender is ready to deliver. */
int env_ready(struct cell_env *e, int timeout_ms, char *err, size_t err_len);
/* Close senders, emulator, receiver (in that order). Idempotent. */
void env_teardown(struct cell_env *e);

/* Record the first failure of a cell. Thread safe. */
void result_fail(struct cell_result *res, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

int scenario_push_run(struct cell_env *e, struct cell_result *res);
int scenario_pingpong_run(struct cell_env *e, struct cell_result *res);

#endif
