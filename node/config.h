/*
 * config.h - the tern config file (JSON) and endpoint syntax.
 *
 * A node_config is a tern_config plus what the command line adds on top of
 * it: the endpoints to listen on and connect to. config_load() reads and
 * validates a file; every problem is one sentence that names the file and
 * either the line and column (syntax) or the key (unknown key, wrong type,
 * value out of range). Flags are applied afterwards, so they override it.
 */
#ifndef TERN_NODE_CONFIG_H
#define TERN_NODE_CONFIG_H

#include <stdbool.h>
#include <stddef.h>

#include <tern/tern.h>

/* Files larger than this are refused before anything is allocated. */
#define CONFIG_MAX_FILE_BYTES (1024 * 1024)
/* Per list: more endpoints than this is a mistake, not a topology. */
#define CONFIG_MAX_ENDPOINTS 64
#define CONFIG_MAX_ID_LEN    128
#define CONFIG_MAX_PATH_LEN  4096 /* tls.cert, tls.key, tls.ca */
/* Room for one error sentence. */
#define CONFIG_ERR_LEN 512

typedef struct node_config {
	tern_config tern; /* tern.id points to id when set */
	char *id;
	char **listen;
	size_t listen_count;
	bool listen_set; /* listen given (even as []): no default listen */
	char **connect;
	size_t connect_count;
	bool connect_set;
	/* acl: the rules tern.acl points at (strings owned here) */
	tern_acl_rule *acl;
	size_t acl_count;
	/* tls.cert, tls.key, tls.ca: the copies tern.tls_* point at */
	char *tls_cert, *tls_key, *tls_ca;
} node_config;

/* Defaults: tern_config_init() and no endpoints. */
void config_init(node_config *nc);

/* Free what the config owns; the struct may be initialised again. */
void config_free(node_config *nc);

/* Drop the acl rules (tern.acl_set becomes false: everything allowed). */
void config_acl_free(node_config *nc);

/*
 * Read FILE and apply its keys on top of nc. Returns 0, or TERN_EINVAL (bad
 * content), TERN_ESYS (cannot read) or TERN_ENOMEM, with one sentence that
 * names the file in err.
 */
int config_load(node_config *nc, const char *path, char *err, size_t errlen);

/* The same for text already in memory; name is used in messages. */
int config_parse(node_config *nc, const char *text, size_t len, const char *name, char *err,
                 size_t errlen);

/*
 * Endpoint syntax: tcp://HOST:PORT, tcp://[IPV6]:PORT, tls://HOST:PORT,
 * unix:///abs/path.
 * Returns 0 or TERN_EENDPOINT with the reason in err (may be NULL).
 */
int config_endpoint_check(const char *ep, char *err, size_t errlen);

/* Append a checked copy of ep to the listen (or connect) list. */
int config_add_endpoint(node_config *nc, bool listen, const char *ep, char *err, size_t errlen);

/* Forget the listen (or connect) list, e.g. before flags replace it. */
void config_clear_endpoints(node_config *nc, bool listen);

/* Set the id (copied and checked). */
int config_set_id(node_config *nc, const char *id, char *err, size_t errlen);

/* Names used by the file, for messages and for config_to_json. */
const char *config_mode_name(int mode);
const char *config_reliability_name(int reliability);
const char *config_log_name(int level);
/* Parse a log level name; returns the level or -1. */
int config_log_parse(const char *name);

/* The effective configuration as a JSON text (malloc'd), or NULL. */
char *config_to_json(const node_config *nc);

#endif
