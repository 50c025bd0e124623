/*
 * keyexpr.c - checking and matching keys and key expressions.
 *
 * Matching is a dynamic program over chunks rather than a recursive search,
 * so "**" repeated many times costs chunks^2, never an exponential walk.
 * Both inputs are validated first, so chunk counts are bounded.
 */
#include <string.h>

#include "error.h"
#include "keyexpr.h"

struct chunks {
	int n;
	const char *p[TERN_KEY_MAX_CHUNKS];
	size_t len[TERN_KEY_MAX_CHUNKS];
};

static int
chunk_kind(const char *p, size_t len)
{
	if (len == 1 && p[0] == '*') {
		return 1;
	}
	if (len == 2 && p[0] == '*' && p[1] == '*') {
		return 2;
	}
	return 0;
}

static int
split(const char *s, size_t len, struct chunks *c)
{
	size_t start = 0;

	c->n = 0;
	for (size_t i = 0; i <= len; i++) {
		if (i == len || s[i] == '/') {
			if (c->n == TERN_KEY_MAX_CHUNKS) {
				return -1;
			}
			c->p[c->n] = s + start;
			c->len[c->n] = i - start;
			c->n++;
			start = i + 1;
		}
	}
	return 0;
}

int
tern__key_check(const char *s, size_t len, bool allow_wildcards)
{
	const char *what = allow_wildcards ? "key expression" : "key";
	struct chunks c;

	if (len == 0) {
		return tern__error(TERN_EKEY, "empty %s", what);
	}
	if (len > TERN_KEY_MAX_LEN) {
		return tern__error(TERN_EKEY, "%s is longer than %d bytes", what, TERN_KEY_MAX_LEN);
	}
	if (memchr(s, '\0', len) != NULL) {
		return tern__error(TERN_EKEY, "%s contains a NUL byte", what);
	}
	if (s[0] == '/' || s[len - 1] == '/') {
		return tern__error(TERN_EKEY, "%s '%.*s' has a leading or trailing '/'", what,
		                   (int)len, s);
	}
	if (split(s, len, &c) < 0) {
		return tern__error(TERN_EKEY, "%s '%.*s' has more than %d chunks", what, (int)len,
		                   s, TERN_KEY_MAX_CHUNKS);
	}
	for (int i = 0; i < c.n; i++) {
		if (c.len[i] == 0) {
			return tern__error(TERN_EKEY, "%s '%.*s' has an empty chunk", what,
			                   (int)len, s);
		}
		if (memchr(c.p[i], '*', c.len[i]) == NULL) {
			continue;
		}
		if (!allow_wildcards) {
			return tern__error(TERN_EKEY,
			                   "key '%.*s' has a wildcard; a publication key names one "
			                   "key",
			                   (int)len, s);
		}
		if (chunk_kind(c.p[i], c.len[i]) == 0) {
			return tern__error(
			    TERN_EKEY,
			    "key expression '%.*s': a wildcard must be a whole chunk "
			    "('*' or '**'), not '%.*s'",
			    (int)len, s, (int)c.len[i], c.p[i]);
		}
	}
	return 0;
}

/* A chunk that starts with '@' is reserved (tern's own keys, "@tern/..."):
 * only the same chunk matches it, never a wildcard, so a subscriber sees
 * telemetry only when it asks for it by name. */
static bool
reserved(const struct chunks *c, int i)
{
	return c->len[i] > 0 && c->p[i][0] == '@';
}

static bool
chunks_meet(const struct chunks *a, int i, const struct chunks *b, int j)
{
	bool a_star = chunk_kind(a->p[i], a->len[i]) == 1;
	bool b_star = chunk_kind(b->p[j], b->len[j]) == 1;

	if (a_star || b_star) {
		return (a_star && b_star) || (a_star ? !reserved(b, j) : !reserved(a, i));
	}
	return a->len[i] == b->len[j] && memcmp(a->p[i], b->p[j], a->len[i]) == 0;
}

/*
 * ok[i][j]: the suffixes a[i..] and b[j..] can describe a common key.
 * With b free of wildcards this is plain matching of a against b.
 */
static bool
chunks_intersect(const struct chunks *a, const struct chunks *b)
{
	static _Thread_local bool ok[TERN_KEY_MAX_CHUNKS + 1][TERN_KEY_MAX_CHUNKS + 1];

	for (int i = a->n; i >= 0; i--) {
		for (int j = b->n; j >= 0; j--) {
			bool r;
			bool a_dd = i < a->n && chunk_kind(a->p[i], a->len[i]) == 2;
			bool b_dd = j < b->n && chunk_kind(b->p[j], b->len[j]) == 2;

			if (i == a->n && j == b->n) {
				r = true;
			} else if (a_dd) {
				r = ok[i + 1][j] || (j < b->n && !reserved(b, j) && ok[i][j + 1]);
			} else if (b_dd) {
				r = ok[i][j + 1] || (i < a->n && !reserved(a, i) && ok[i + 1][j]);
			} else if (i == a->n || j == b->n) {
				r = false;
			} else {
				r = chunks_meet(a, i, b, j) && ok[i + 1][j + 1];
			}
			ok[i][j] = r;
		}
	}
	return ok[0][0];
}

bool
tern__keyexpr_intersect(const char *a, size_t a_len, const char *b, size_t b_len)
{
	struct chunks ca, cb;

	if (split(a, a_len, &ca) < 0 || split(b, b_len, &cb) < 0) {
		return false;
	}
	return chunks_intersect(&ca, &cb);
}

bool
tern__keyexpr_match(const char *ke, size_t ke_len, const char *key, size_t key_len)
{
	/* a key has no wildcards, so intersecting with it is matching it */
	return tern__keyexpr_intersect(ke, ke_len, key, key_len);
}

int
tern_key_check(const char *key)
{
	if (key == NULL) {
		return tern__error(TERN_EKEY, "no key given");
	}
	return tern__key_check(key, strlen(key), false);
}

int
tern_keyexpr_check(const char *keyexpr)
{
	if (keyexpr == NULL) {
		return tern__error(TERN_EKEY, "no key expression given");
	}
	return tern__key_check(keyexpr, strlen(keyexpr), true);
}

bool
tern_keyexpr_match(const char *keyexpr, const char *key)
{
	if (tern_keyexpr_check(keyexpr) != 0 || tern_key_check(key) != 0) {
		return false;
	}
	return tern__keyexpr_match(keyexpr, strlen(keyexpr), key, strlen(key));
}

bool
tern_keyexpr_intersect(const char *a, const char *b)
{
	if (tern_keyexpr_check(a) != 0 || tern_keyexpr_check(b) != 0) {
		return false;
	}
	return tern__keyexpr_intersect(a, strlen(a), b, strlen(b));
}
