/*
 * keyexpr.c - checking and matching keys and key expressions.
 *
 * Matching is a dynamic program over chunks rather than a recursive search,
 * so "**" repeated many times costs chunks^2, never an exponential walk.
 * Both inputs are validated first, so chunk counts are bounded.
 */
#include <stdint.h>
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
tern__key_check_at(const char *s, size_t len, bool allow_wildcards, size_t *at)
{
	const char *what = allow_wildcards ? "key expression" : "key";
	const char *nul;
	struct chunks c;

	*at = 0;
	if (len == 0) {
		return tern__error(TERN_EKEY, "empty %s", what);
	}
	if (len > TERN_KEY_MAX_LEN) {
		*at = TERN_KEY_MAX_LEN;
		return tern__error(TERN_EKEY, "%s is longer than %d bytes", what, TERN_KEY_MAX_LEN);
	}
	if ((nul = memchr(s, '\0', len)) != NULL) {
		*at = (size_t)(nul - s);
		return tern__error(TERN_EKEY, "%s contains a NUL byte", what);
	}
	if (s[0] == '/' || s[len - 1] == '/') {
		*at = s[0] == '/' ? 0 : len - 1;
		return tern__error(TERN_EKEY, "%s '%.*s' has a leading or trailing '/'", what,
		                   (int)len, s);
	}
	if (split(s, len, &c) < 0) {
		*at = (size_t)(c.p[TERN_KEY_MAX_CHUNKS - 1] + c.len[TERN_KEY_MAX_CHUNKS - 1] - s);
		return tern__error(TERN_EKEY, "%s '%.*s' has more than %d chunks", what, (int)len,
		                   s, TERN_KEY_MAX_CHUNKS);
	}
	for (int i = 0; i < c.n; i++) {
		*at = (size_t)(c.p[i] - s);
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
	*at = 0;
	return 0;
}

int
tern__key_check(const char *s, size_t len, bool allow_wildcards)
{
	size_t at;

	return tern__key_check_at(s, len, allow_wildcards, &at);
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

/*
 * Inclusion: does every key that b matches match a too? Read the keys of b
 * with a's matcher as an automaton over chunks, keeping the set of
 * positions of a that could still match (a subset construction over a,
 * driven by b). The worst key for a is what b's wildcards produce: a chunk
 * no literal of a names (only a's wildcards take it), so b's '*' reads one
 * such fresh chunk and b's '**' any number of them. A run longer than a's
 * chunks changes nothing (the sets repeat from a->n + 1 fresh chunks on),
 * so '**' tries 0 .. a->n + 1. b is included when no reachable set is empty
 * (a key of b that a cannot follow) and every final set has reached the
 * end of a. The sets kept at once are bounded; beyond the bound the answer
 * is "no": an access check refuses rather than guesses.
 */
#define INCLUDE_SETS 64

struct posset {
	uint64_t w[2]; /* positions 0 .. TERN_KEY_MAX_CHUNKS */
};

static bool
ps_has(const struct posset *s, int p)
{
	return (s->w[p >> 6] >> (p & 63)) & 1u;
}

static void
ps_add(struct posset *s, int p)
{
	s->w[p >> 6] |= 1ull << (p & 63);
}

/* a '**' may match nothing: from it, the next position is reachable too */
static void
ps_close(const struct chunks *a, struct posset *s)
{
	for (int p = 0; p < a->n; p++) {
		if (ps_has(s, p) && chunk_kind(a->p[p], a->len[p]) == 2) {
			ps_add(s, p + 1);
		}
	}
}

/* Read one chunk: c (clen bytes), or with c NULL a fresh non-reserved chunk. */
static struct posset
ps_step(const struct chunks *a, const struct posset *s, const char *c, size_t clen)
{
	struct posset r = {{0, 0}};
	bool res = c != NULL && clen > 0 && c[0] == '@';

	for (int p = 0; p < a->n; p++) {
		int kind = chunk_kind(a->p[p], a->len[p]);
		if (!ps_has(s, p)) {
			continue;
		}
		if (kind == 2 && !res) {
			ps_add(&r, p);
		} else if (kind == 1 && !res) {
			ps_add(&r, p + 1);
		} else if (kind == 0 && c != NULL && a->len[p] == clen &&
		           memcmp(a->p[p], c, clen) == 0) {
			ps_add(&r, p + 1);
		}
	}
	ps_close(a, &r);
	return r;
}

/* Add s to the sets (once); false when s is empty or there is no room. */
static bool
ps_keep(struct posset *v, int *n, const struct posset *s)
{
	if (s->w[0] == 0 && s->w[1] == 0) {
		return false;
	}
	for (int k = 0; k < *n; k++) {
		if (v[k].w[0] == s->w[0] && v[k].w[1] == s->w[1]) {
			return true;
		}
	}
	if (*n == INCLUDE_SETS) {
		return false;
	}
	v[(*n)++] = *s;
	return true;
}

static bool
chunks_include(const struct chunks *a, const struct chunks *b)
{
	static _Thread_local struct posset sets[2][INCLUDE_SETS];
	struct posset *cur = sets[0], *next = sets[1], *t;
	int ncur = 1, nnext;

	cur[0] = (struct posset){{0, 0}};
	ps_add(&cur[0], 0);
	ps_close(a, &cur[0]);
	for (int j = 0; j < b->n; j++) {
		int kind = chunk_kind(b->p[j], b->len[j]);
		nnext = 0;
		for (int k = 0; k < ncur; k++) {
			struct posset x = cur[k];
			if (kind == 0) {
				x = ps_step(a, &x, b->p[j], b->len[j]);
			} else if (kind == 1) {
				x = ps_step(a, &x, NULL, 0);
			}
			if (kind != 2) {
				if (!ps_keep(next, &nnext, &x)) {
					return false;
				}
				continue;
			}
			for (int run = 0; run <= a->n + 1; run++) {
				if (!ps_keep(next, &nnext, &x)) {
					return false;
				}
				x = ps_step(a, &x, NULL, 0);
			}
		}
		t = cur;
		cur = next;
		next = t;
		ncur = nnext;
	}
	for (int k = 0; k < ncur; k++) {
		if (!ps_has(&cur[k], a->n)) {
			return false;
		}
	}
	return true;
}

static bool
only_double_stars(const struct chunks *c)
{
	for (int i = 0; i < c->n; i++) {
		if (chunk_kind(c->p[i], c->len[i]) != 2) {
			return false;
		}
	}
	return true;
}

bool
tern__keyexpr_includes(const char *a, size_t a_len, const char *b, size_t b_len)
{
	struct chunks ca, cb;

	if (split(a, a_len, &ca) < 0 || split(b, b_len, &cb) < 0) {
		return false;
	}
	if (only_double_stars(&cb)) {
		/* keys are never empty: "**" (or "**" / "**") means one chunk or more */
		cb = (struct chunks){.n = 2, .p = {"*", "**"}, .len = {1, 2}};
	}
	return chunks_include(&ca, &cb);
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

bool
tern_keyexpr_includes(const char *a, const char *b)
{
	if (tern_keyexpr_check(a) != 0 || tern_keyexpr_check(b) != 0) {
		return false;
	}
	return tern__keyexpr_includes(a, strlen(a), b, strlen(b));
}
