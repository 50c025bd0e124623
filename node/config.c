/*
 * config.c - reading and validating the tern config file.
 *
 * The file is one JSON object. Every key is described once in the table
 * below (name, type, range, where it lands in tern_config), so validation,
 * messages and docs/CONFIG.md stay in step. Unknown keys are errors: in a
 * config file they are almost always typos, and a typo silently ignored is a
 * setting the user believes in but does not have.
 */
#include "config.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cjson/cJSON.h>

enum key_kind {
	KIND_OBJECT,
	KIND_ID,
	KIND_MODE,
	KIND_BOOL,
	KIND_U32,
	KIND_U64,
	KIND_RELIABILITY,
	KIND_LOG,
	KIND_LISTEN,
	KIND_CONNECT,
	KIND_ACL,
	KIND_PATH,  /* a file name, kept by node_config, pointed at by tern_config */
	KIND_VERIFY /* a bool stored as int (tern_config.tls_verify_peer) */
};

struct key_spec {
	const char *path; /* dotted: "batching.max_bytes" */
	enum key_kind kind;
	size_t offset; /* into tern_config, for bools and integers */
	double min;
	double max;
};

#define FIELD(f) offsetof(tern_config, f)
#define MIB      (1024.0 * 1024.0)
#define GIB      (1024.0 * MIB)

static const struct key_spec key_specs[] = {
    {"id", KIND_ID, 0, 0, 0},
    {"mode", KIND_MODE, 0, 0, 0},
    {"listen", KIND_LISTEN, 0, 0, 0},
    {"connect", KIND_CONNECT, 0, 0, 0},
    {"low_latency", KIND_BOOL, FIELD(low_latency), 0, 0},
    {"batching", KIND_OBJECT, 0, 0, 0},
    {"batching.max_bytes", KIND_U32, FIELD(batch_max_bytes), 512, 16 * MIB},
    {"batching.max_delay_us", KIND_U32, FIELD(batch_max_delay_us), 0, 10000000},
    {"reliability", KIND_RELIABILITY, 0, 0, 0},
    {"queue", KIND_OBJECT, 0, 0, 0},
    {"queue.max_bytes", KIND_U64, FIELD(queue_max_bytes), 1 * MIB, 64 * GIB},
    {"max_message_bytes", KIND_U64, FIELD(max_message_bytes), 1, 4 * GIB - 1},
    {"chunk_bytes", KIND_U32, FIELD(chunk_bytes), 256, 16 * MIB},
    {"publish_timeout_ms", KIND_U32, FIELD(publish_timeout_ms), 0, 3600000},
    {"slow_consumer_ms", KIND_U32, FIELD(slow_consumer_ms), 1, 3600000},
    {"handshake_timeout_ms", KIND_U32, FIELD(handshake_timeout_ms), 100, 600000},
    {"keepalive_ms", KIND_U32, FIELD(keepalive_ms), 10, 3600000},
    {"reconnect", KIND_OBJECT, 0, 0, 0},
    {"reconnect.initial_ms", KIND_U32, FIELD(reconnect_initial_ms), 1, 600000},
    {"reconnect.max_ms", KIND_U32, FIELD(reconnect_max_ms), 1, 3600000},
    {"telemetry", KIND_OBJECT, 0, 0, 0},
    {"telemetry.interval_ms", KIND_U32, FIELD(telemetry_interval_ms), 0, 3600000},
    {"tls", KIND_OBJECT, 0, 0, 0},
    {"tls.cert", KIND_PATH, FIELD(tls_cert), 0, 0},
    {"tls.key", KIND_PATH, FIELD(tls_key), 0, 0},
    {"tls.ca", KIND_PATH, FIELD(tls_ca), 0, 0},
    {"tls.verify_peer", KIND_VERIFY, FIELD(tls_verify_peer), 0, 0},
    {"log", KIND_LOG, 0, 0, 0},
    {"acl", KIND_ACL, 0, 0, 0},
};

#define KEY_SPEC_COUNT (sizeof(key_specs) / sizeof(key_specs[0]))

static const char *const mode_names[] = {"peer", "router", "client"};
static const char *const reliability_names[] = {"reliable", "best_effort"};
static const char *const log_names[] = {"error", "warn", "info", "debug"};

static void
set_err(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (err == NULL || errlen == 0) {
		return;
	}
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	/* the sentence quotes the file's bytes: keep it one printable line */
	for (char *p = err; *p != '\0'; p++) {
		if ((unsigned char)*p < 0x20 || *p == 0x7f) {
			*p = '?';
		}
	}
}

const char *
config_mode_name(int mode)
{
	return mode == TERN_MODE_ROUTER   ? mode_names[1]
	       : mode == TERN_MODE_CLIENT ? mode_names[2]
	                                  : mode_names[0];
}

const char *
config_reliability_name(int reliability)
{
	return reliability == TERN_BEST_EFFORT ? reliability_names[1] : reliability_names[0];
}

const char *
config_log_name(int level)
{
	if (level < 0 || level > TERN_LOG_DEBUG) {
		return "info";
	}
	return log_names[level];
}

int
config_log_parse(const char *name)
{
	for (int i = 0; i <= TERN_LOG_DEBUG; i++) {
		if (strcmp(name, log_names[i]) == 0) {
			return i;
		}
	}
	return -1;
}

void
config_init(node_config *nc)
{
	memset(nc, 0, sizeof(*nc));
	tern_config_init(&nc->tern);
}

static void
free_list(char **list, size_t count)
{
	for (size_t i = 0; i < count; i++) {
		free(list[i]);
	}
	free(list);
}

void
config_clear_endpoints(node_config *nc, bool listen)
{
	if (listen) {
		free_list(nc->listen, nc->listen_count);
		nc->listen = NULL;
		nc->listen_count = 0;
		nc->listen_set = false;
	} else {
		free_list(nc->connect, nc->connect_count);
		nc->connect = NULL;
		nc->connect_count = 0;
		nc->connect_set = false;
	}
}

void
config_free(node_config *nc)
{
	config_clear_endpoints(nc, true);
	config_clear_endpoints(nc, false);
	free(nc->id);
	nc->id = NULL;
	nc->tern.id = NULL;
	config_acl_free(nc);
	free(nc->tls_cert);
	free(nc->tls_key);
	free(nc->tls_ca);
	nc->tls_cert = nc->tls_key = nc->tls_ca = NULL;
	nc->tern.tls_cert = nc->tern.tls_key = nc->tern.tls_ca = NULL;
}

/* Where the copy of a tls.* file name is kept. */
static char **
path_slot(node_config *nc, size_t offset)
{
	if (offset == FIELD(tls_cert)) {
		return &nc->tls_cert;
	}
	return offset == FIELD(tls_key) ? &nc->tls_key : &nc->tls_ca;
}

static int
path_value(node_config *nc, size_t offset, const char *path, char *err, size_t errlen)
{
	char **slot = path_slot(nc, offset);
	char *copy;

	if (path[0] == '\0' || strlen(path) > CONFIG_MAX_PATH_LEN) {
		set_err(err, errlen, "must be a file name of 1 to %d bytes", CONFIG_MAX_PATH_LEN);
		return TERN_EINVAL;
	}
	copy = strdup(path);
	if (copy == NULL) {
		set_err(err, errlen, "out of memory");
		return TERN_ENOMEM;
	}
	free(*slot);
	*slot = copy;
	*(const char **)((char *)&nc->tern + offset) = copy;
	return 0;
}

static int
port_check(const char *port, char *err, size_t errlen, const char *ep)
{
	size_t n = strlen(port);
	unsigned long v = 0;

	if (n == 0 || n > 5) {
		set_err(err, errlen, "endpoint \"%s\": the port must be a number from 0 to 65535",
		        ep);
		return TERN_EENDPOINT;
	}
	for (size_t i = 0; i < n; i++) {
		if (!isdigit((unsigned char)port[i])) {
			set_err(err, errlen,
			        "endpoint \"%s\": the port must be a number from 0 to 65535", ep);
			return TERN_EENDPOINT;
		}
		v = v * 10 + (unsigned long)(port[i] - '0');
	}
	if (v > 65535) {
		set_err(err, errlen, "endpoint \"%s\": the port must be a number from 0 to 65535",
		        ep);
		return TERN_EENDPOINT;
	}
	return 0;
}

static int
host_check(const char *host, size_t n, const char *ep, char *err, size_t errlen)
{
	char buf[256];
	struct in_addr a4;
	bool numeric = true;

	if (n == 0 || n >= sizeof(buf)) {
		set_err(err, errlen, "endpoint \"%s\": the host is empty or too long", ep);
		return TERN_EENDPOINT;
	}
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)host[i];
		if (!isalnum(c) && c != '.' && c != '-') {
			set_err(err, errlen,
			        "endpoint \"%s\": the host has a character that no host name has "
			        "(IPv6 addresses go in brackets: tcp://[::1]:7447)",
			        ep);
			return TERN_EENDPOINT;
		}
		if (!isdigit(c) && c != '.') {
			numeric = false;
		}
	}
	memcpy(buf, host, n);
	buf[n] = '\0';
	/* All digits and dots: it is meant as an IPv4 address, so it must be one. */
	if (numeric && inet_pton(AF_INET, buf, &a4) != 1) {
		set_err(err, errlen, "endpoint \"%s\": \"%s\" is not an IPv4 address", ep, buf);
		return TERN_EENDPOINT;
	}
	return 0;
}

static int
tcp_check(const char *ep, const char *rest, char *err, size_t errlen)
{
	const char *colon;

	if (rest[0] == '[') {
		const char *close = strchr(rest, ']');
		char buf[64];
		struct in6_addr a6;
		size_t n;

		if (close == NULL) {
			set_err(err, errlen, "endpoint \"%s\": missing ']' after the IPv6 address",
			        ep);
			return TERN_EENDPOINT;
		}
		n = (size_t)(close - rest - 1);
		if (n == 0 || n >= sizeof(buf)) {
			set_err(err, errlen, "endpoint \"%s\": bad IPv6 address", ep);
			return TERN_EENDPOINT;
		}
		memcpy(buf, rest + 1, n);
		buf[n] = '\0';
		if (inet_pton(AF_INET6, buf, &a6) != 1) {
			set_err(err, errlen, "endpoint \"%s\": \"%s\" is not an IPv6 address", ep,
			        buf);
			return TERN_EENDPOINT;
		}
		if (close[1] != ':') {
			set_err(err, errlen, "endpoint \"%s\": missing \":PORT\" after ']'", ep);
			return TERN_EENDPOINT;
		}
		return port_check(close + 2, err, errlen, ep);
	}
	colon = strrchr(rest, ':');
	if (colon == NULL) {
		set_err(err, errlen, "endpoint \"%s\": missing \":PORT\" (tcp://HOST:PORT)", ep);
		return TERN_EENDPOINT;
	}
	if (host_check(rest, (size_t)(colon - rest), ep, err, errlen) != 0) {
		return TERN_EENDPOINT;
	}
	return port_check(colon + 1, err, errlen, ep);
}

int
config_endpoint_check(const char *ep, char *err, size_t errlen)
{
	if (strncmp(ep, "tcp://", 6) == 0 || strncmp(ep, "tls://", 6) == 0) {
		return tcp_check(ep, ep + 6, err, errlen);
	}
	if (strncmp(ep, "unix://", 7) == 0) {
		const char *path = ep + 7;
		/* sun_path holds 108 bytes including the NUL */
		if (path[0] != '/' || path[1] == '\0') {
			set_err(err, errlen,
			        "endpoint \"%s\": a unix endpoint needs an absolute path "
			        "(unix:///run/tern.sock)",
			        ep);
			return TERN_EENDPOINT;
		}
		if (strlen(path) > 107) {
			set_err(err, errlen,
			        "endpoint \"%s\": the socket path is longer than 107 bytes", ep);
			return TERN_EENDPOINT;
		}
		return 0;
	}
	set_err(err, errlen,
	        "endpoint \"%s\": use tcp://HOST:PORT, tcp://[IPV6]:PORT, tls://HOST:PORT or "
	        "unix:///absolute/path",
	        ep);
	return TERN_EENDPOINT;
}

int
config_add_endpoint(node_config *nc, bool listen, const char *ep, char *err, size_t errlen)
{
	char ***list = listen ? &nc->listen : &nc->connect;
	size_t *count = listen ? &nc->listen_count : &nc->connect_count;
	char **grown;
	char *copy;
	int rc = config_endpoint_check(ep, err, errlen);

	if (rc != 0) {
		return rc;
	}
	if (*count >= CONFIG_MAX_ENDPOINTS) {
		set_err(err, errlen, "more than %d %s endpoints", CONFIG_MAX_ENDPOINTS,
		        listen ? "listen" : "connect");
		return TERN_EINVAL;
	}
	copy = strdup(ep);
	grown = realloc(*list, (*count + 1) * sizeof(**list));
	if (copy == NULL || grown == NULL) {
		free(copy);
		if (grown != NULL) {
			*list = grown;
		}
		set_err(err, errlen, "out of memory");
		return TERN_ENOMEM;
	}
	*list = grown;
	grown[(*count)++] = copy;
	if (listen) {
		nc->listen_set = true;
	} else {
		nc->connect_set = true;
	}
	return 0;
}

int
config_set_id(node_config *nc, const char *id, char *err, size_t errlen)
{
	size_t n = strlen(id);
	char *copy;

	if (n == 0 || n > CONFIG_MAX_ID_LEN) {
		set_err(err, errlen, "id \"%s\": must be 1 to %d characters", id,
		        CONFIG_MAX_ID_LEN);
		return TERN_EINVAL;
	}
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)id[i];
		/* '/' separates the node id from the publisher number in "publisher" */
		if (c <= ' ' || c == 0x7f || c == '/' || c == '"' || c == '\\') {
			set_err(err, errlen,
			        "id \"%s\": use letters, digits and punctuation other than / \" \\ "
			        "(no spaces)",
			        id);
			return TERN_EINVAL;
		}
	}
	copy = strdup(id);
	if (copy == NULL) {
		set_err(err, errlen, "out of memory");
		return TERN_ENOMEM;
	}
	free(nc->id);
	nc->id = copy;
	nc->tern.id = copy;
	return 0;
}

static const struct key_spec *
spec_find(const char *path)
{
	for (size_t i = 0; i < KEY_SPEC_COUNT; i++) {
		if (strcmp(key_specs[i].path, path) == 0) {
			return &key_specs[i];
		}
	}
	return NULL;
}

/* Keys one level below prefix, for the "unknown key" message. */
static void
known_keys(const char *prefix, char *out, size_t outlen)
{
	size_t plen = strlen(prefix);
	size_t used = 0;

	out[0] = '\0';
	for (size_t i = 0; i < KEY_SPEC_COUNT; i++) {
		const char *p = key_specs[i].path;
		int n;
		if (plen > 0 && (strncmp(p, prefix, plen) != 0 || p[plen] != '.')) {
			continue;
		}
		p += plen > 0 ? plen + 1 : 0;
		if (strchr(p, '.') != NULL) {
			continue;
		}
		n = snprintf(out + used, outlen - used, "%s%s", used > 0 ? ", " : "", p);
		if (n < 0 || (size_t)n >= outlen - used) {
			break;
		}
		used += (size_t)n;
	}
}

struct parse_ctx {
	node_config *nc;
	const char *name;
	char *err;
	size_t errlen;
};

static int
key_err(struct parse_ctx *pc, const char *path, const char *fmt, ...)
{
	char what[CONFIG_ERR_LEN];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	set_err(pc->err, pc->errlen, "%s: key \"%s\": %s", pc->name, path, what);
	return TERN_EINVAL;
}

/* "a" or "b"; one of "a", "b", "c" */
static const char *
enum_list(const char *const *names, int count)
{
	static _Thread_local char list[128];
	size_t at = 0;

	list[0] = '\0';
	for (int i = 0; i < count && at < sizeof(list); i++) {
		const char *sep = i == 0 ? (count > 2 ? "one of " : "") : count > 2 ? ", " : " or ";
		at += (size_t)snprintf(list + at, sizeof(list) - at, "%s\"%s\"", sep, names[i]);
	}
	return list;
}

static int
enum_value(struct parse_ctx *pc, const char *path, const cJSON *item, const char *const *names,
           int count, int *out)
{
	if (cJSON_IsString(item)) {
		for (int i = 0; i < count; i++) {
			if (strcmp(item->valuestring, names[i]) == 0) {
				*out = i;
				return 0;
			}
		}
	}
	return key_err(pc, path, "must be %s", enum_list(names, count));
}

static int
endpoints_value(struct parse_ctx *pc, const char *path, const cJSON *item, bool listen)
{
	const cJSON *el;
	char why[CONFIG_ERR_LEN];
	int rc;

	if (!cJSON_IsArray(item)) {
		return key_err(pc, path,
		               "must be an array of endpoints, e.g. [\"tcp://127.0.0.1:7447\"]");
	}
	config_clear_endpoints(pc->nc, listen);
	if (listen) {
		pc->nc->listen_set = true;
	} else {
		pc->nc->connect_set = true;
	}
	cJSON_ArrayForEach(el, item)
	{
		if (!cJSON_IsString(el)) {
			return key_err(pc, path, "must be an array of endpoint strings");
		}
		rc = config_add_endpoint(pc->nc, listen, el->valuestring, why, sizeof(why));
		if (rc != 0) {
			key_err(pc, path, "%s", why);
			return rc;
		}
	}
	return 0;
}

static int
integer_value(struct parse_ctx *pc, const struct key_spec *spec, const cJSON *item)
{
	char *field = (char *)&pc->nc->tern + spec->offset;
	double v;

	if (!cJSON_IsNumber(item)) {
		return key_err(pc, spec->path, "must be an integer from %.0f to %.0f", spec->min,
		               spec->max);
	}
	v = item->valuedouble;
	if (!isfinite(v) || v != floor(v) || v < spec->min || v > spec->max) {
		return key_err(pc, spec->path, "must be an integer from %.0f to %.0f, not %.15g",
		               spec->min, spec->max, v);
	}
	if (spec->kind == KIND_U32) {
		uint32_t u = (uint32_t)v;
		memcpy(field, &u, sizeof(u));
	} else {
		uint64_t u = (uint64_t)v;
		memcpy(field, &u, sizeof(u));
	}
	return 0;
}

static int parse_object(struct parse_ctx *pc, const cJSON *obj, const char *prefix);

/* ---- acl: access rules (docs/CONFIG.md) ---- */

static void
strings_free(const char *const *v, size_t n)
{
	for (size_t k = 0; k < n; k++) {
		free((void *)(uintptr_t)v[k]);
	}
	free((void *)(uintptr_t)v);
}

void
config_acl_free(node_config *nc)
{
	for (size_t i = 0; i < nc->acl_count; i++) {
		tern_acl_rule *r = &nc->acl[i];
		free((void *)(uintptr_t)r->peer);
		strings_free(r->allow_pub, r->allow_pub_len);
		strings_free(r->allow_sub, r->allow_sub_len);
	}
	free(nc->acl);
	nc->acl = NULL;
	nc->acl_count = 0;
	nc->tern.acl = NULL;
	nc->tern.acl_len = 0;
	nc->tern.acl_set = false;
}

/* One list of key expressions: an array of strings (checked later, whole). */
static int
acl_list(struct parse_ctx *pc, const char *path, const cJSON *item, const char *const **out,
         size_t *len)
{
	const cJSON *el;
	const char **v;
	size_t n;

	if (!cJSON_IsArray(item)) {
		return key_err(pc, path,
		               "must be an array of key expressions, e.g. [\"sensors/**\"]");
	}
	n = (size_t)cJSON_GetArraySize(item);
	if ((v = calloc(n > 0 ? n : 1, sizeof(*v))) == NULL) {
		return key_err(pc, path, "out of memory");
	}
	*out = v;
	*len = 0;
	cJSON_ArrayForEach(el, item)
	{
		if (!cJSON_IsString(el)) {
			return key_err(pc, path, "element %zu must be a key expression string",
			               *len);
		}
		if ((v[*len] = strdup(el->valuestring)) == NULL) {
			return key_err(pc, path, "out of memory");
		}
		(*len)++;
	}
	return 0;
}

static int
acl_rule(struct parse_ctx *pc, size_t index, const cJSON *obj, tern_acl_rule *r)
{
	const cJSON *item;
	char path[64];
	int rc = 0;

	snprintf(path, sizeof(path), "acl[%zu]", index);
	if (!cJSON_IsObject(obj)) {
		return key_err(pc, path,
		               "must be an object: { \"peer\": NAME or \"*\", \"allow_pub\": "
		               "[...], \"allow_sub\": [...] }");
	}
	cJSON_ArrayForEach(item, obj)
	{
		snprintf(path, sizeof(path), "acl[%zu].%s", index, item->string);
		for (const cJSON *prev = obj->child; prev != item; prev = prev->next) {
			if (strcmp(prev->string, item->string) == 0) {
				return key_err(pc, path, "appears twice");
			}
		}
		if (strcmp(item->string, "peer") == 0) {
			if (!cJSON_IsString(item) || item->valuestring[0] == '\0') {
				return key_err(
				    pc, path,
				    "must be a peer's certificate name, or \"*\" for every "
				    "peer");
			}
			if ((r->peer = strdup(item->valuestring)) == NULL) {
				return key_err(pc, path, "out of memory");
			}
		} else if (strcmp(item->string, "allow_pub") == 0) {
			rc = acl_list(pc, path, item, &r->allow_pub, &r->allow_pub_len);
		} else if (strcmp(item->string, "allow_sub") == 0) {
			rc = acl_list(pc, path, item, &r->allow_sub, &r->allow_sub_len);
		} else {
			return key_err(pc, path,
			               "unknown key (known keys here: peer, allow_pub, allow_sub)");
		}
		if (rc != 0) {
			return rc;
		}
	}
	if (r->peer == NULL) {
		snprintf(path, sizeof(path), "acl[%zu]", index);
		return key_err(pc, path, "has no \"peer\" (a certificate name, or \"*\")");
	}
	return 0;
}

static int
acl_value(struct parse_ctx *pc, const char *path, const cJSON *item)
{
	node_config *nc = pc->nc;
	const cJSON *el;
	size_t n;
	int rc;

	if (!cJSON_IsArray(item)) {
		return key_err(pc, path,
		               "must be an array of rules: [{ \"peer\": \"*\", \"allow_sub\": "
		               "[\"sensors/**\"] }]");
	}
	config_acl_free(nc);
	n = (size_t)cJSON_GetArraySize(item);
	if ((nc->acl = calloc(n > 0 ? n : 1, sizeof(*nc->acl))) == NULL) {
		return key_err(pc, path, "out of memory");
	}
	nc->tern.acl = nc->acl;
	nc->tern.acl_set = true;
	cJSON_ArrayForEach(el, item)
	{
		/* counted first: a rule half parsed is freed with the rest */
		nc->acl_count++;
		nc->tern.acl_len = nc->acl_count;
		if ((rc = acl_rule(pc, nc->acl_count - 1, el, &nc->acl[nc->acl_count - 1])) != 0) {
			return rc;
		}
	}
	if (tern_acl_check(nc->acl, nc->acl_count) != 0) {
		return key_err(pc, path, "%s", tern_last_error());
	}
	return 0;
}

static cJSON *
acl_list_json(const char *const *v, size_t n)
{
	cJSON *arr = cJSON_CreateArray();

	for (size_t k = 0; arr != NULL && k < n; k++) {
		cJSON_AddItemToArray(arr, cJSON_CreateString(v[k]));
	}
	return arr;
}

static void
acl_json(cJSON *root, const node_config *nc)
{
	cJSON *arr;

	if (!nc->tern.acl_set || (arr = cJSON_AddArrayToObject(root, "acl")) == NULL) {
		return;
	}
	for (size_t i = 0; i < nc->tern.acl_len; i++) {
		const tern_acl_rule *r = &nc->tern.acl[i];
		cJSON *o = cJSON_CreateObject();
		if (o == NULL) {
			return;
		}
		cJSON_AddStringToObject(o, "peer", r->peer);
		cJSON_AddItemToObject(o, "allow_pub",
		                      acl_list_json(r->allow_pub, r->allow_pub_len));
		cJSON_AddItemToObject(o, "allow_sub",
		                      acl_list_json(r->allow_sub, r->allow_sub_len));
		cJSON_AddItemToArray(arr, o);
	}
}

static int
parse_item(struct parse_ctx *pc, const struct key_spec *spec, const cJSON *item)
{
	tern_config *tc = &pc->nc->tern;
	char why[CONFIG_ERR_LEN];

	switch (spec->kind) {
	case KIND_OBJECT:
		if (!cJSON_IsObject(item)) {
			return key_err(pc, spec->path, "must be an object");
		}
		return parse_object(pc, item, spec->path);
	case KIND_ID:
		if (!cJSON_IsString(item)) {
			return key_err(pc, spec->path, "must be a string");
		}
		if (config_set_id(pc->nc, item->valuestring, why, sizeof(why)) != 0) {
			return key_err(pc, spec->path, "%s", why);
		}
		return 0;
	case KIND_MODE:
		return enum_value(pc, spec->path, item, mode_names, 3, &tc->mode);
	case KIND_RELIABILITY:
		return enum_value(pc, spec->path, item, reliability_names, 2, &tc->reliability);
	case KIND_LOG:
		return enum_value(pc, spec->path, item, log_names, 4, &tc->log_level);
	case KIND_BOOL:
		if (!cJSON_IsBool(item)) {
			return key_err(pc, spec->path, "must be true or false");
		}
		*(bool *)((char *)tc + spec->offset) = cJSON_IsTrue(item);
		return 0;
	case KIND_U32:
	case KIND_U64:
		return integer_value(pc, spec, item);
	case KIND_LISTEN:
		return endpoints_value(pc, spec->path, item, true);
	case KIND_CONNECT:
		return endpoints_value(pc, spec->path, item, false);
	case KIND_ACL:
		return acl_value(pc, spec->path, item);
	case KIND_PATH:
		if (!cJSON_IsString(item)) {
			return key_err(pc, spec->path, "must be a string (a PEM file name)");
		}
		if (path_value(pc->nc, spec->offset, item->valuestring, why, sizeof(why)) != 0) {
			return key_err(pc, spec->path, "%s", why);
		}
		return 0;
	case KIND_VERIFY:
		if (!cJSON_IsBool(item)) {
			return key_err(pc, spec->path, "must be true or false");
		}
		tc->tls_verify_peer = cJSON_IsTrue(item) ? 1 : 0;
		return 0;
	}
	return key_err(pc, spec->path, "unsupported");
}

static int
parse_object(struct parse_ctx *pc, const cJSON *obj, const char *prefix)
{
	const cJSON *item;

	cJSON_ArrayForEach(item, obj)
	{
		char path[128];
		const struct key_spec *spec;
		int rc;

		if (prefix[0] != '\0') {
			snprintf(path, sizeof(path), "%s.%s", prefix, item->string);
		} else {
			snprintf(path, sizeof(path), "%s", item->string);
		}
		for (const cJSON *prev = obj->child; prev != item; prev = prev->next) {
			if (strcmp(prev->string, item->string) == 0) {
				return key_err(pc, path, "appears twice");
			}
		}
		spec = spec_find(path);
		if (spec == NULL) {
			char known[CONFIG_ERR_LEN];
			known_keys(prefix, known, sizeof(known));
			return key_err(pc, path, "unknown key (known keys here: %s)", known);
		}
		rc = parse_item(pc, spec, item);
		if (rc != 0) {
			return rc;
		}
	}
	return 0;
}

static void
position(const char *text, size_t offset, int *line, int *col)
{
	*line = 1;
	*col = 1;
	for (size_t i = 0; i < offset; i++) {
		if (text[i] == '\n') {
			(*line)++;
			*col = 1;
		} else {
			(*col)++;
		}
	}
}

static int
syntax_err(struct parse_ctx *pc, const char *text, size_t len, size_t offset, const char *what)
{
	int line;
	int col;

	if (offset > len) {
		offset = len;
	}
	position(text, offset, &line, &col);
	if (offset >= len) {
		set_err(pc->err, pc->errlen, "%s:%d:%d: %s: unexpected end of file", pc->name, line,
		        col, what);
	} else {
		unsigned char c = (unsigned char)text[offset];
		if (isprint(c)) {
			set_err(pc->err, pc->errlen, "%s:%d:%d: %s near '%c'", pc->name, line, col,
			        what, c);
		} else {
			set_err(pc->err, pc->errlen, "%s:%d:%d: %s near byte 0x%02x", pc->name,
			        line, col, what, c);
		}
	}
	return TERN_EINVAL;
}

int
config_parse(node_config *nc, const char *text, size_t len, const char *name, char *err,
             size_t errlen)
{
	struct parse_ctx pc = {nc, name, err, errlen};
	const char *end = NULL;
	cJSON *root;
	size_t off;
	int rc;

	root = cJSON_ParseWithLengthOpts(text, len, &end, 0);
	if (root == NULL) {
		off = end != NULL && end >= text ? (size_t)(end - text) : 0;
		return syntax_err(&pc, text, len, off, "not valid JSON");
	}
	/* cJSON stops after the first value; anything but blanks after it is an error */
	off = (size_t)(end - text);
	while (off < len && isspace((unsigned char)text[off])) {
		off++;
	}
	if (off < len) {
		cJSON_Delete(root);
		return syntax_err(&pc, text, len, off, "text after the JSON object");
	}
	if (!cJSON_IsObject(root)) {
		cJSON_Delete(root);
		set_err(err, errlen, "%s:1:1: the config must be a JSON object ({ ... })", name);
		return TERN_EINVAL;
	}
	rc = parse_object(&pc, root, "");
	cJSON_Delete(root);
	if (rc != 0) {
		return rc;
	}
	if (nc->tern.reconnect_initial_ms > nc->tern.reconnect_max_ms) {
		set_err(err, errlen,
		        "%s: key \"reconnect.initial_ms\": %u is larger than reconnect.max_ms (%u)",
		        name, nc->tern.reconnect_initial_ms, nc->tern.reconnect_max_ms);
		return TERN_EINVAL;
	}
	if (nc->tern.tls_verify_peer == 1 && nc->tern.tls_ca == NULL) {
		set_err(err, errlen,
		        "%s: key \"tls.verify_peer\": true needs \"tls.ca\", the authority to "
		        "check peers against",
		        name);
		return TERN_EINVAL;
	}
	if ((nc->tern.tls_cert == NULL) != (nc->tern.tls_key == NULL)) {
		set_err(err, errlen,
		        "%s: keys \"tls.cert\" and \"tls.key\" go together: %s is missing", name,
		        nc->tern.tls_cert == NULL ? "tls.cert" : "tls.key");
		return TERN_EINVAL;
	}
	if (nc->tern.telemetry_interval_ms > 0 && nc->tern.telemetry_interval_ms < 10) {
		set_err(err, errlen,
		        "%s: key \"telemetry.interval_ms\": %u is below 10 (0 turns telemetry off)",
		        name, nc->tern.telemetry_interval_ms);
		return TERN_EINVAL;
	}
	return 0;
}

int
config_load(node_config *nc, const char *path, char *err, size_t errlen)
{
	FILE *f = fopen(path, "rb");
	struct stat st;
	char *text = NULL;
	size_t len = 0;
	size_t cap = 0;
	int rc;

	if (f == NULL) {
		set_err(err, errlen, "%s: cannot open: %s", path, strerror(errno));
		return TERN_ESYS;
	}
	if (fstat(fileno(f), &st) == 0 && S_ISDIR(st.st_mode)) {
		fclose(f);
		set_err(err, errlen, "%s: is a directory, not a config file", path);
		return TERN_ESYS;
	}
	/* read in steps rather than trusting st_size: -c <(...) is a pipe */
	for (;;) {
		size_t got;
		if (len == cap) {
			char *grown;
			if (cap > CONFIG_MAX_FILE_BYTES) {
				free(text);
				fclose(f);
				set_err(err, errlen,
				        "%s: larger than %d bytes; a config file is much smaller",
				        path, CONFIG_MAX_FILE_BYTES);
				return TERN_EINVAL;
			}
			cap = cap == 0 ? 4096 : cap * 2;
			grown = realloc(text, cap + 1);
			if (grown == NULL) {
				free(text);
				fclose(f);
				set_err(err, errlen, "%s: out of memory", path);
				return TERN_ENOMEM;
			}
			text = grown;
		}
		got = fread(text + len, 1, cap - len, f);
		len += got;
		if (got == 0) {
			break;
		}
	}
	if (ferror(f)) {
		free(text);
		fclose(f);
		set_err(err, errlen, "%s: read error", path);
		return TERN_ESYS;
	}
	fclose(f);
	text[len] = '\0';
	rc = config_parse(nc, text, len, path, err, errlen);
	free(text);
	return rc;
}

static cJSON *
endpoints_json(char **list, size_t count)
{
	cJSON *arr = cJSON_CreateArray();

	for (size_t i = 0; arr != NULL && i < count; i++) {
		cJSON_AddItemToArray(arr, cJSON_CreateString(list[i]));
	}
	return arr;
}

static void
add_path(cJSON *obj, const char *name, const char *path)
{
	if (path != NULL) {
		cJSON_AddStringToObject(obj, name, path);
	}
}

static cJSON *
tls_json(const tern_config *tc)
{
	cJSON *tls = cJSON_CreateObject();

	if (tls == NULL) {
		return NULL;
	}
	add_path(tls, "cert", tc->tls_cert);
	add_path(tls, "key", tc->tls_key);
	add_path(tls, "ca", tc->tls_ca);
	cJSON_AddBoolToObject(tls, "verify_peer",
	                      tc->tls_verify_peer < 0 ? tc->tls_ca != NULL : tc->tls_verify_peer);
	return tls;
}

char *
config_to_json(const node_config *nc)
{
	const tern_config *tc = &nc->tern;
	cJSON *root = cJSON_CreateObject();
	cJSON *batching = cJSON_CreateObject();
	cJSON *queue = cJSON_CreateObject();
	cJSON *reconnect = cJSON_CreateObject();
	cJSON *telemetry = cJSON_CreateObject();
	char *text = NULL;

	if (root == NULL || batching == NULL || queue == NULL || reconnect == NULL ||
	    telemetry == NULL) {
		cJSON_Delete(telemetry);
		cJSON_Delete(root);
		cJSON_Delete(batching);
		cJSON_Delete(queue);
		cJSON_Delete(reconnect);
		return NULL;
	}
	if (nc->id != NULL) {
		cJSON_AddStringToObject(root, "id", nc->id);
	}
	cJSON_AddStringToObject(root, "mode", config_mode_name(tc->mode));
	cJSON_AddItemToObject(root, "listen", endpoints_json(nc->listen, nc->listen_count));
	cJSON_AddItemToObject(root, "connect", endpoints_json(nc->connect, nc->connect_count));
	cJSON_AddBoolToObject(root, "low_latency", tc->low_latency);
	cJSON_AddNumberToObject(batching, "max_bytes", tc->batch_max_bytes);
	cJSON_AddNumberToObject(batching, "max_delay_us", tc->batch_max_delay_us);
	cJSON_AddItemToObject(root, "batching", batching);
	cJSON_AddStringToObject(root, "reliability", config_reliability_name(tc->reliability));
	cJSON_AddNumberToObject(queue, "max_bytes", (double)tc->queue_max_bytes);
	cJSON_AddItemToObject(root, "queue", queue);
	cJSON_AddNumberToObject(root, "max_message_bytes", (double)tc->max_message_bytes);
	cJSON_AddNumberToObject(root, "chunk_bytes", tc->chunk_bytes);
	cJSON_AddNumberToObject(root, "publish_timeout_ms", tc->publish_timeout_ms);
	cJSON_AddNumberToObject(root, "slow_consumer_ms", tc->slow_consumer_ms);
	cJSON_AddNumberToObject(root, "handshake_timeout_ms", tc->handshake_timeout_ms);
	cJSON_AddNumberToObject(root, "keepalive_ms", tc->keepalive_ms);
	cJSON_AddNumberToObject(reconnect, "initial_ms", tc->reconnect_initial_ms);
	cJSON_AddNumberToObject(reconnect, "max_ms", tc->reconnect_max_ms);
	cJSON_AddItemToObject(root, "reconnect", reconnect);
	cJSON_AddNumberToObject(telemetry, "interval_ms", tc->telemetry_interval_ms);
	cJSON_AddItemToObject(root, "telemetry", telemetry);
	cJSON_AddItemToObject(root, "tls", tls_json(tc));
	cJSON_AddStringToObject(root, "log", config_log_name(tc->log_level));
	acl_json(root, nc);
	text = cJSON_Print(root);
	cJSON_Delete(root);
	return text;
}
