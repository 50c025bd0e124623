/*
 * fuzz_keyexpr.c - key checking, matching and intersection.
 *
 * Input: two bytes giving where to split, then two strings A and B (each
 * copied into a buffer of exactly its length, so a read past it is seen).
 * Both go through tern__key_check() as keys and as expressions; matching
 * and intersection run on them whatever the check said, since neither may
 * crash on any bytes.
 *
 * Properties, for inputs that pass the check:
 *  - a key is also a valid expression, and matches itself;
 *  - intersection is symmetric, and every expression intersects itself;
 *  - tern__keyexpr_match() agrees with a plain recursive matcher written
 *    here from the definition ("*" one chunk, "**" zero or more);
 *  - an expression matches the key made from it by writing "*" as "x" and
 *    dropping every "**".
 */
#include <stdbool.h>
#include <string.h>

#include "fuzz.h"
#include "keyexpr.h"

struct split {
	int n;
	const char *p[TERN_KEY_MAX_CHUNKS];
	size_t len[TERN_KEY_MAX_CHUNKS];
};

/* Only called on checked input: at most TERN_KEY_MAX_CHUNKS chunks. */
static void
split(const char *s, size_t len, struct split *c)
{
	size_t start = 0;

	c->n = 0;
	for (size_t i = 0; i <= len; i++) {
		if (i == len || s[i] == '/') {
			FUZZ_CHECK(c->n < TERN_KEY_MAX_CHUNKS);
			c->p[c->n] = s + start;
			c->len[c->n] = i - start;
			c->n++;
			start = i + 1;
		}
	}
}

static bool
is(const struct split *c, int i, const char *word)
{
	return c->len[i] == strlen(word) && memcmp(c->p[i], word, c->len[i]) == 0;
}

/* A key chunk that starts with '@' is matched by name only, never by a
 * wildcard (keys reserved for tern's telemetry). */
static bool
reserved(const struct split *c, int i)
{
	return c->len[i] > 0 && c->p[i][0] == '@';
}

/* 0 unknown, 1 false, 2 true: the memo keeps many "**" chunks polynomial. */
static signed char memo[TERN_KEY_MAX_CHUNKS + 1][TERN_KEY_MAX_CHUNKS + 1];

static bool
ref_match(const struct split *ke, int i, const struct split *key, int j)
{
	bool r;

	if (memo[i][j] != 0) {
		return memo[i][j] == 2;
	}
	if (i == ke->n) {
		r = j == key->n;
	} else if (is(ke, i, "**")) {
		r = ref_match(ke, i + 1, key, j) ||
		    (j < key->n && !reserved(key, j) && ref_match(ke, i, key, j + 1));
	} else if (j == key->n) {
		r = false;
	} else if (is(ke, i, "*")) {
		r = !reserved(key, j) && ref_match(ke, i + 1, key, j + 1);
	} else {
		r = ke->len[i] == key->len[j] && memcmp(ke->p[i], key->p[j], ke->len[i]) == 0 &&
		    ref_match(ke, i + 1, key, j + 1);
	}
	memo[i][j] = r ? 2 : 1;
	return r;
}

static bool
reference(const char *ke, size_t ke_len, const char *key, size_t key_len)
{
	struct split a, b;

	split(ke, ke_len, &a);
	split(key, key_len, &b);
	memset(memo, 0, sizeof(memo));
	return ref_match(&a, 0, &b, 0);
}

/* "*" becomes "x", "**" goes away; returns the length (0: nothing left). */
static size_t
instance(const char *ke, size_t len, char *out)
{
	struct split c;
	size_t n = 0;

	split(ke, len, &c);
	for (int i = 0; i < c.n; i++) {
		const char *p = c.p[i];
		size_t l = c.len[i];
		if (is(&c, i, "**")) {
			continue;
		}
		if (is(&c, i, "*")) {
			p = "x";
			l = 1;
		}
		if (n > 0) {
			out[n++] = '/';
		}
		memcpy(out + n, p, l);
		n += l;
	}
	return n;
}

static void
check_one(const char *s, size_t len)
{
	bool key = tern__key_check(s, len, false) == 0;
	bool ke = tern__key_check(s, len, true) == 0;
	char inst[TERN_KEY_MAX_LEN];
	size_t n;

	FUZZ_CHECK(!key || ke);
	if (!ke) {
		return;
	}
	FUZZ_CHECK(len > 0 && len <= TERN_KEY_MAX_LEN);
	FUZZ_CHECK(tern__keyexpr_intersect(s, len, s, len));
	if (key) {
		FUZZ_CHECK(tern__keyexpr_match(s, len, s, len));
		FUZZ_CHECK(reference(s, len, s, len));
	}
	n = instance(s, len, inst);
	if (n > 0) {
		FUZZ_CHECK(tern__key_check(inst, n, false) == 0);
		FUZZ_CHECK(tern__keyexpr_match(s, len, inst, n));
		FUZZ_CHECK(reference(s, len, inst, n));
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t cut, a_len, b_len;
	char *a, *b;

	if (size < 2) {
		return 0;
	}
	cut = ((size_t)data[0] | (size_t)data[1] << 8) % (size - 1);
	a_len = cut;
	b_len = size - 2 - cut;
	a = malloc(a_len > 0 ? a_len : 1);
	b = malloc(b_len > 0 ? b_len : 1);
	FUZZ_CHECK(a != NULL && b != NULL);
	memcpy(a, data + 2, a_len);
	memcpy(b, data + 2 + a_len, b_len);

	/* any bytes: no crash, whatever the answer */
	bool ab = tern__keyexpr_intersect(a, a_len, b, b_len);
	bool m = tern__keyexpr_match(a, a_len, b, b_len);

	check_one(a, a_len);
	check_one(b, b_len);
	if (tern__key_check(a, a_len, true) == 0 && tern__key_check(b, b_len, true) == 0) {
		FUZZ_CHECK(ab == tern__keyexpr_intersect(b, b_len, a, a_len));
		if (tern__key_check(b, b_len, false) == 0) {
			FUZZ_CHECK(m == reference(a, a_len, b, b_len));
			FUZZ_CHECK(!m || ab);
		}
	}
	free(a);
	free(b);
	return 0;
}
