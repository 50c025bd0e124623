/*
 * acl.c - checking, copying and applying access rules.
 *
 * The rules are read where a peer's declaration arrives (a SUB or an
 * OPEN), never per message, so a plain walk over them is enough.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "acl.h"
#include "error.h"
#include "keyexpr.h"

static bool
covers(const tern_acl_rule *r, const char *identity)
{
	return strcmp(r->peer, "*") == 0 || (identity[0] != '\0' && strcmp(r->peer, identity) == 0);
}

bool
acl_allows(const tern_config *cfg, const char *identity, enum acl_op op, const char *ke, size_t len)
{
	if (!cfg->acl_set) {
		return true;
	}
	for (size_t i = 0; i < cfg->acl_len; i++) {
		const tern_acl_rule *r = &cfg->acl[i];
		const char *const *v = op == ACL_SUB ? r->allow_sub : r->allow_pub;
		size_t n = op == ACL_SUB ? r->allow_sub_len : r->allow_pub_len;

		if (!covers(r, identity)) {
			continue;
		}
		for (size_t k = 0; k < n; k++) {
			if (tern__keyexpr_includes(v[k], strlen(v[k]), ke, len)) {
				return true;
			}
		}
	}
	return false;
}

static int
check_list(size_t rule, const char *list, const char *const *v, size_t n)
{
	if (n > 0 && v == NULL) {
		return tern__error(TERN_EINVAL, "acl[%zu].%s: no list given for %zu expressions",
		                   rule, list, n);
	}
	for (size_t k = 0; k < n; k++) {
		char why[512];
		size_t at;

		if (v[k] == NULL) {
			return tern__error(TERN_EINVAL, "acl[%zu].%s[%zu]: no expression", rule,
			                   list, k);
		}
		if (tern__key_check_at(v[k], strlen(v[k]), true, &at) != 0) {
			snprintf(why, sizeof(why), "%s", tern_last_error());
			return tern__error(TERN_EINVAL,
			                   "acl[%zu].%s[%zu] '%s' at character %zu: %s", rule, list,
			                   k, v[k], at + 1, why);
		}
	}
	return 0;
}

int
tern_acl_check(const tern_acl_rule *rules, size_t n)
{
	int rc;

	if (n > 0 && rules == NULL) {
		return tern__error(TERN_EINVAL, "acl: no rules given for %zu", n);
	}
	for (size_t i = 0; i < n; i++) {
		const tern_acl_rule *r = &rules[i];

		if (r->peer == NULL || r->peer[0] == '\0') {
			return tern__error(
			    TERN_EINVAL, "acl[%zu]: no peer (a certificate name, or \"*\" for all)",
			    i);
		}
		if ((rc = check_list(i, "allow_pub", r->allow_pub, r->allow_pub_len)) != 0 ||
		    (rc = check_list(i, "allow_sub", r->allow_sub, r->allow_sub_len)) != 0) {
			return rc;
		}
	}
	return 0;
}

/* Lay out rules, then pointer lists, then strings, in one block. */
static size_t
list_size(const char *const *v, size_t n, size_t *strings)
{
	for (size_t k = 0; k < n; k++) {
		*strings += strlen(v[k]) + 1;
	}
	return n * sizeof(char *);
}

static char *
put_string(char **pool, const char *s)
{
	size_t len = strlen(s) + 1;
	char *r = *pool;

	memcpy(r, s, len);
	*pool += len;
	return r;
}

static const char *const *
put_list(const char ***ptrs, char **pool, const char *const *v, size_t n)
{
	const char **r = *ptrs;

	for (size_t k = 0; k < n; k++) {
		r[k] = put_string(pool, v[k]);
	}
	*ptrs += n;
	return n > 0 ? r : NULL;
}

tern_acl_rule *
acl_copy(const tern_acl_rule *rules, size_t n)
{
	size_t ptrs = 0, strings = 0;
	tern_acl_rule *out;
	const char **pv;
	char *pool;

	for (size_t i = 0; i < n; i++) {
		strings += strlen(rules[i].peer) + 1;
		ptrs += list_size(rules[i].allow_pub, rules[i].allow_pub_len, &strings);
		ptrs += list_size(rules[i].allow_sub, rules[i].allow_sub_len, &strings);
	}
	out = malloc(n * sizeof(*out) + ptrs + strings);
	if (out == NULL) {
		return NULL;
	}
	pv = (const char **)(void *)(out + n);
	pool = (char *)out + n * sizeof(*out) + ptrs;
	for (size_t i = 0; i < n; i++) {
		out[i].peer = put_string(&pool, rules[i].peer);
		out[i].allow_pub_len = rules[i].allow_pub_len;
		out[i].allow_pub = put_list(&pv, &pool, rules[i].allow_pub, rules[i].allow_pub_len);
		out[i].allow_sub_len = rules[i].allow_sub_len;
		out[i].allow_sub = put_list(&pv, &pool, rules[i].allow_sub, rules[i].allow_sub_len);
	}
	return out;
}
