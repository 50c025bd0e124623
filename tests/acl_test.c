/*
 * acl_test.c - access rules: key-expression inclusion (against brute
 * force), which rules cover which identity, checking and copying rules.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "acl.h"
#include "keyexpr.h"
#include "tern/tern.h"

/* ---- inclusion ---- */

struct inc_case {
	const char *a, *b;
	bool includes;
};

static const struct inc_case cases[] = {
    {"sensors/**", "sensors/**", true},
    {"sensors/**", "sensors/a/temp", true},
    {"sensors/**", "sensors/*/temp", true},
    {"sensors/**", "sensors", true},
    {"sensors/**", "**", false},
    {"sensors/**", "secret/**", false},
    {"sensors/**", "*/temp", false},
    {"**", "sensors/**", true},
    {"**", "@tern/node/stats", false}, /* no wildcard matches an '@' chunk */
    {"**", "a/@x", false},
    {"@tern/**", "@tern/a/stats", true},
    {"*/**", "**", true}, /* keys are never empty */
    {"**", "*/**", true},
    {"*/**", "**/x", true},
    {"a/*", "a/**", false},
    {"a/*/c", "a/b/c", true},
    {"a/*/c", "a/*/c", true},
    {"a/b/c", "a/*/c", false},
    {"**/c", "a/**/c", true},
    {"a/**/c", "**/c", false},
    {"**/x/**", "x/**", true},
    {"**/x/**", "**/x", true},
    {"**/x/**", "a/**", false},
    {"*/*/**", "**/a/b", true},
    {"*/*/**", "**/a", false},
};

static void
test_includes_cases(void **state)
{
	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		bool got = tern_keyexpr_includes(cases[i].a, cases[i].b);
		if (got != cases[i].includes) {
			fail_msg("includes(%s, %s) = %d, expected %d", cases[i].a, cases[i].b, got,
			         cases[i].includes);
		}
	}
}

/*
 * Brute force: every expression of up to 3 chunks over a, b, @r, * and **,
 * against every key of up to 7 chunks over a, b, @r and z (a chunk no
 * expression names). a includes b when every key b matches, a matches.
 */
enum { SYM_A, SYM_B, SYM_R, SYM_STAR, SYM_DSTAR, SYM_Z };
#define EXPR_CHUNKS 3
#define KEY_CHUNKS  7

static const char *const sym_name[] = {"a", "b", "@r", "*", "**", "z"};

struct seq {
	int n;
	int s[KEY_CHUNKS];
};

static bool
ref_match(const int *e, int ne, const int *k, int nk)
{
	if (ne == 0) {
		return nk == 0;
	}
	if (e[0] == SYM_DSTAR) {
		return ref_match(e + 1, ne - 1, k, nk) ||
		       (nk > 0 && k[0] != SYM_R && ref_match(e, ne, k + 1, nk - 1));
	}
	if (nk == 0) {
		return false;
	}
	if (e[0] == SYM_STAR) {
		return k[0] != SYM_R && ref_match(e + 1, ne - 1, k + 1, nk - 1);
	}
	return e[0] == k[0] && ref_match(e + 1, ne - 1, k + 1, nk - 1);
}

static void
text_of(const struct seq *q, char *out)
{
	out[0] = '\0';
	for (int i = 0; i < q->n; i++) {
		strcat(out, i > 0 ? "/" : "");
		strcat(out, sym_name[q->s[i]]);
	}
}

/* all sequences of 1..max symbols from syms */
static int
enumerate(struct seq *out, const int *syms, int nsyms, int max)
{
	int count = 0;

	for (int n = 1; n <= max; n++) {
		int total = 1;
		for (int i = 0; i < n; i++) {
			total *= nsyms;
		}
		for (int v = 0; v < total; v++) {
			int x = v;
			out[count].n = n;
			for (int i = 0; i < n; i++) {
				out[count].s[i] = syms[x % nsyms];
				x /= nsyms;
			}
			count++;
		}
	}
	return count;
}

static void
test_includes_brute_force(void **state)
{
	static const int esyms[] = {SYM_A, SYM_B, SYM_R, SYM_STAR, SYM_DSTAR};
	static const int ksyms[] = {SYM_A, SYM_B, SYM_R, SYM_Z};
	int nexpr_max = 5 + 25 + 125;
	int nkey_max = 4 + 16 + 64 + 256 + 1024 + 4096 + 16384;
	struct seq *exprs = calloc((size_t)nexpr_max, sizeof(*exprs));
	struct seq *keys = calloc((size_t)nkey_max, sizeof(*keys));
	int nexpr, nkey, words;
	uint64_t *bits;
	int checked = 0;

	(void)state;
	assert_non_null(exprs);
	assert_non_null(keys);
	nexpr = enumerate(exprs, esyms, 5, EXPR_CHUNKS);
	nkey = enumerate(keys, ksyms, 4, KEY_CHUNKS);
	words = (nkey + 63) / 64;
	bits = calloc((size_t)nexpr * (size_t)words, sizeof(*bits));
	assert_non_null(bits);
	for (int e = 0; e < nexpr; e++) {
		for (int k = 0; k < nkey; k++) {
			if (ref_match(exprs[e].s, exprs[e].n, keys[k].s, keys[k].n)) {
				bits[(size_t)e * (size_t)words + (size_t)k / 64] |= 1ull
				                                                    << (k % 64);
			}
		}
	}
	for (int a = 0; a < nexpr; a++) {
		char ta[64];
		text_of(&exprs[a], ta);
		for (int b = 0; b < nexpr; b++) {
			const uint64_t *ba = bits + (size_t)a * (size_t)words;
			const uint64_t *bb = bits + (size_t)b * (size_t)words;
			bool want = true;
			char tb[64];
			for (int w = 0; w < words && want; w++) {
				want = (bb[w] & ~ba[w]) == 0;
			}
			text_of(&exprs[b], tb);
			if (tern__keyexpr_includes(ta, strlen(ta), tb, strlen(tb)) != want) {
				fail_msg("includes(%s, %s): brute force says %d", ta, tb, want);
			}
			checked++;
		}
	}
	assert_int_equal(checked, nexpr * nexpr);
	free(bits);
	free(keys);
	free(exprs);
}

/* Long expressions cost bounded work, and a key is included exactly when matched. */
static void
test_includes_long(void **state)
{
	char a[TERN_KEY_MAX_LEN + 1] = "", b[TERN_KEY_MAX_LEN + 1] = "";

	(void)state;
	for (int i = 0; i < TERN_KEY_MAX_CHUNKS; i++) {
		strcat(a, i > 0 ? "/" : "");
		strcat(a, i % 2 ? "**" : "x");
		strcat(b, i > 0 ? "/" : "");
		strcat(b, i % 3 ? "**" : "*");
	}
	assert_int_equal(tern_keyexpr_check(a), 0);
	assert_int_equal(tern_keyexpr_check(b), 0);
	assert_false(tern_keyexpr_includes(a, b));
	assert_true(tern_keyexpr_includes(a, a));
	assert_true(tern_keyexpr_includes(b, b));
	assert_true(tern_keyexpr_includes("a/*/c/**", "a/b/c"));
	assert_false(tern_keyexpr_includes("a/*/c/**", "a/b/d"));
}

/* ---- rules ---- */

static const char *const sensors[] = {"sensors/**"};
static const char *const only_a[] = {"a/**"};
static const char *const alice_sub[] = {"secret/**", "sensors/**"};

static tern_config
config_with(const tern_acl_rule *rules, size_t n)
{
	tern_config cfg;

	tern_config_init(&cfg);
	cfg.acl = rules;
	cfg.acl_len = n;
	cfg.acl_set = true;
	return cfg;
}

static bool
allows(const tern_config *cfg, const char *identity, enum acl_op op, const char *ke)
{
	return acl_allows(cfg, identity, op, ke, strlen(ke));
}

static void
test_no_acl_allows_everything(void **state)
{
	tern_config cfg;

	(void)state;
	tern_config_init(&cfg);
	assert_true(allows(&cfg, "", ACL_SUB, "**"));
	assert_true(allows(&cfg, "", ACL_PUB, "secret/x"));
	cfg.acl_set = true; /* an empty list: nothing is allowed */
	assert_false(allows(&cfg, "", ACL_SUB, "a"));
	assert_false(allows(&cfg, "alice", ACL_PUB, "a"));
}

static void
test_star_rule(void **state)
{
	const tern_acl_rule rules[] = {
	    {.peer = "*",
	     .allow_sub = sensors,
	     .allow_sub_len = 1,
	     .allow_pub = only_a,
	     .allow_pub_len = 1},
	};
	tern_config cfg = config_with(rules, 1);

	(void)state;
	assert_true(allows(&cfg, "", ACL_SUB, "sensors/**"));
	assert_true(allows(&cfg, "", ACL_SUB, "sensors/*/temp"));
	assert_false(allows(&cfg, "", ACL_SUB, "secret/**"));
	assert_false(allows(&cfg, "", ACL_SUB, "**")); /* refused, not narrowed */
	assert_true(allows(&cfg, "bob", ACL_SUB, "sensors/x"));
	assert_true(allows(&cfg, "", ACL_PUB, "a/x"));
	assert_true(allows(&cfg, "", ACL_PUB, "a"));
	assert_false(allows(&cfg, "", ACL_PUB, "b/x"));
}

static void
test_named_rules(void **state)
{
	const tern_acl_rule rules[] = {
	    {.peer = "alice", .allow_sub = alice_sub, .allow_sub_len = 2},
	    {.peer = "*", .allow_sub = sensors, .allow_sub_len = 1},
	};
	tern_config cfg = config_with(rules, 2);

	(void)state;
	assert_true(allows(&cfg, "alice", ACL_SUB, "secret/x/**"));
	assert_true(allows(&cfg, "alice", ACL_SUB, "sensors/**"));
	/* no proven identity: only "*" rules */
	assert_false(allows(&cfg, "", ACL_SUB, "secret/x"));
	assert_true(allows(&cfg, "", ACL_SUB, "sensors/x"));
	assert_false(allows(&cfg, "bob", ACL_SUB, "secret/x"));
	assert_false(allows(&cfg, "alicia", ACL_SUB, "secret/x"));
	assert_false(allows(&cfg, "alice", ACL_PUB, "sensors/x"));
	/* a rule for a name nobody proves is harmless */
	const tern_acl_rule only_alice[] = {
	    {.peer = "alice", .allow_pub = only_a, .allow_pub_len = 1}};
	cfg = config_with(only_alice, 1);
	assert_false(allows(&cfg, "", ACL_PUB, "a/x"));
	assert_true(allows(&cfg, "alice", ACL_PUB, "a/x"));
}

static void
test_check_names_rule_and_position(void **state)
{
	static const char *const bad[] = {"ok/**", "a/b*/c"};
	static const char *const bad2[] = {"x//y"};
	const tern_acl_rule rules[] = {
	    {.peer = "*", .allow_sub = sensors, .allow_sub_len = 1},
	    {.peer = "nobody-knows-me", .allow_sub = bad, .allow_sub_len = 2},
	};
	const tern_acl_rule rules2[] = {{.peer = "*", .allow_pub = bad2, .allow_pub_len = 1}};
	const tern_acl_rule nopeer[] = {{.peer = "", .allow_pub = only_a, .allow_pub_len = 1}};

	(void)state;
	assert_int_equal(tern_acl_check(rules, 1), 0);
	assert_int_equal(tern_acl_check(rules, 2), TERN_EINVAL);
	assert_non_null(strstr(tern_last_error(), "acl[1].allow_sub[1] 'a/b*/c' at character 3"));
	assert_int_equal(tern_acl_check(rules2, 1), TERN_EINVAL);
	assert_non_null(strstr(tern_last_error(), "acl[0].allow_pub[0] 'x//y' at character 3"));
	assert_int_equal(tern_acl_check(nopeer, 1), TERN_EINVAL);
	assert_non_null(strstr(tern_last_error(), "acl[0]: no peer"));
	assert_int_equal(tern_acl_check(NULL, 0), 0);
}

static void
test_copy(void **state)
{
	const tern_acl_rule rules[] = {
	    {.peer = "alice", .allow_sub = alice_sub, .allow_sub_len = 2},
	    {.peer = "*", .allow_pub = only_a, .allow_pub_len = 1},
	};
	tern_acl_rule *c = acl_copy(rules, 2);

	(void)state;
	assert_non_null(c);
	assert_string_equal(c[0].peer, "alice");
	assert_int_equal(c[0].allow_sub_len, 2);
	assert_string_equal(c[0].allow_sub[1], "sensors/**");
	assert_true(c[0].allow_sub[1] != alice_sub[1]);
	assert_int_equal(c[0].allow_pub_len, 0);
	assert_string_equal(c[1].peer, "*");
	assert_string_equal(c[1].allow_pub[0], "a/**");
	free(c);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_includes_cases),
	    cmocka_unit_test(test_includes_brute_force),
	    cmocka_unit_test(test_includes_long),
	    cmocka_unit_test(test_no_acl_allows_everything),
	    cmocka_unit_test(test_star_rule),
	    cmocka_unit_test(test_named_rules),
	    cmocka_unit_test(test_check_names_rule_and_position),
	    cmocka_unit_test(test_copy),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
