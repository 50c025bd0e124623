/*
 * ketree_test.c - the key expression tree against the simple matcher:
 * random expressions stored, random keys and expressions asked, and each
 * visit must reach exactly the stored values that tern__keyexpr_intersect
 * says meet the query ('*', '**' and the '@' rule included), each once.
 * Also the hash index under it, a key's values held in its node and then
 * in an array, and that removing everything leaves an empty tree.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "hmap.h"
#include "keyexpr.h"
#include "ketree.h"

#define STORED  400
#define QUERIES 4000

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint32_t
rnd(uint32_t n)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng % n);
}

/* A random key (no wildcards) or expression of 1 to 5 chunks over a small
 * alphabet, so that matches are frequent. */
static void
random_expr(char *out, size_t cap, bool wild)
{
	static const char *lit[] = {"a", "b", "c", "@t", "@u", "dd"};
	int n = 1 + (int)rnd(5);
	size_t len = 0;

	for (int i = 0; i < n; i++) {
		const char *c = lit[rnd(6)];
		if (wild && rnd(3) == 0) {
			c = rnd(2) ? "*" : "**";
		}
		len += (size_t)snprintf(out + len, cap - len, "%s%s", i ? "/" : "", c);
	}
}

struct entry {
	char ke[64];
	int hits;
};

static void
hit(void *arg, void *val)
{
	(void)arg;
	((struct entry *)val)->hits++;
}

static void
check_queries(struct ketree *t, struct entry *e, int n, bool wild)
{
	char q[64];
	long matched = 0;

	for (int r = 0; r < QUERIES; r++) {
		random_expr(q, sizeof(q), wild);
		for (int i = 0; i < n; i++) {
			e[i].hits = 0;
		}
		ketree_visit(t, q, strlen(q), hit, NULL);
		for (int i = 0; i < n; i++) {
			int want = tern__keyexpr_intersect(e[i].ke, strlen(e[i].ke), q, strlen(q));
			if (e[i].hits != want) {
				fail_msg("query '%s', stored '%s': visited %d times, expected %d",
				         q, e[i].ke, e[i].hits, want);
			}
			matched += want;
		}
	}
	assert_true(matched > QUERIES); /* the alphabet is small: matches are common */
}

static void
test_differential(void **state)
{
	static struct entry e[STORED];
	struct ketree t = {0};

	(void)state;
	for (int i = 0; i < STORED; i++) {
		random_expr(e[i].ke, sizeof(e[i].ke), i % 4 != 0);
		assert_int_equal(ketree_add(&t, e[i].ke, strlen(e[i].ke), &e[i]), 0);
	}
	check_queries(&t, e, STORED, false); /* keys: a publication's route */
	check_queries(&t, e, STORED, true);  /* expressions: a subscription's reach */
	/* remove half, ask again, then the rest: the tree ends empty */
	for (int i = 0; i < STORED; i += 2) {
		assert_true(ketree_remove(&t, e[i].ke, strlen(e[i].ke), &e[i]));
		e[i].ke[0] = '\0';
	}
	struct entry *left = calloc(STORED / 2, sizeof(*left));
	for (int i = 1, k = 0; i < STORED; i += 2, k++) {
		left[k] = e[i];
		ketree_remove(&t, e[i].ke, strlen(e[i].ke), &e[i]);
		assert_int_equal(ketree_add(&t, left[k].ke, strlen(left[k].ke), &left[k]), 0);
	}
	check_queries(&t, left, STORED / 2, true);
	for (int k = 0; k < STORED / 2; k++) {
		assert_true(ketree_remove(&t, left[k].ke, strlen(left[k].ke), &left[k]));
		assert_false(ketree_remove(&t, left[k].ke, strlen(left[k].ke), &left[k]));
	}
	assert_null(t.root);
	assert_int_equal(t.nodes, 0);
	free(left);
}

static void
test_many_keys(void **state)
{
	struct ketree t = {0};
	char key[32];
	int n = 0;
	static int vals[100000];
	const struct ketree_node *nd;

	(void)state;
	for (int i = 0; i < 100000; i++) {
		snprintf(key, sizeof(key), "k/%d", i);
		assert_int_equal(ketree_add(&t, key, strlen(key), &vals[i]), 0);
	}
	assert_non_null(ketree_find(&t, "k/99999", 7));
	assert_null(ketree_find(&t, "k/100000", 8));
	nd = ketree_find(&t, "k/777", 5);
	assert_int_equal(nd->nvals, 1);
	assert_ptr_equal(ketree_vals(nd)[0], &vals[777]);
	for (int i = 0; i < 100000; i++) {
		snprintf(key, sizeof(key), "k/%d", i);
		n += ketree_remove(&t, key, strlen(key), &vals[i]);
	}
	assert_int_equal(n, 100000);
	assert_null(t.root);
}

/* The values under one key, in any order, as ketree_find sees them. */
static void
expect_vals(struct ketree *t, const char *key, int *const *want, uint32_t n)
{
	const struct ketree_node *nd = ketree_find(t, key, strlen(key));

	if (n == 0) {
		assert_true(nd == NULL || nd->nvals == 0);
		return;
	}
	assert_non_null(nd);
	assert_int_equal(nd->nvals, n);
	for (uint32_t i = 0; i < n; i++) {
		bool found = false;
		for (uint32_t j = 0; j < nd->nvals; j++) {
			found = found || ketree_vals(nd)[j] == want[i];
		}
		assert_true(found);
	}
}

/* One value is held in the node, more in an array: through 1, 2, 3 values
 * and back, in both directions, each step seen by ketree_find. */
static void
test_values_of_one_key(void **state)
{
	struct ketree t = {0};
	int a, b, c;
	int *one[] = {&a}, *two[] = {&a, &b}, *three[] = {&a, &b, &c}, *ac[] = {&a, &c},
	    *cc[] = {&c};

	(void)state;
	assert_int_equal(ketree_add(&t, "x/y", 3, &a), 0);
	expect_vals(&t, "x/y", one, 1);
	assert_int_equal(ketree_add(&t, "x/y", 3, &b), 0);
	expect_vals(&t, "x/y", two, 2);
	assert_int_equal(ketree_add(&t, "x/y", 3, &c), 0);
	expect_vals(&t, "x/y", three, 3);
	assert_true(ketree_remove(&t, "x/y", 3, &b));
	expect_vals(&t, "x/y", ac, 2);
	assert_false(ketree_remove(&t, "x/y", 3, &b));
	assert_true(ketree_remove(&t, "x/y", 3, &a));
	expect_vals(&t, "x/y", cc, 1);
	assert_int_equal(ketree_add(&t, "x/y", 3, &a), 0);
	expect_vals(&t, "x/y", ac, 2);
	assert_true(ketree_remove(&t, "x/y", 3, &a));
	assert_true(ketree_remove(&t, "x/y", 3, &c));
	expect_vals(&t, "x/y", NULL, 0);
	assert_null(t.root);
	/* from none straight to one again, held in the node */
	assert_int_equal(ketree_add(&t, "x/y", 3, &b), 0);
	expect_vals(&t, "x/y", two + 1, 1);
	assert_true(ketree_remove(&t, "x/y", 3, &b));
	assert_null(t.root);
	ketree_free(&t);
}

static bool
u64_eq(const void *val, const void *key)
{
	return *(const uint64_t *)val == *(const uint64_t *)key;
}

static void
test_hmap(void **state)
{
	static uint64_t v[5000];
	struct hmap m = {0};

	(void)state;
	for (uint64_t i = 0; i < 5000; i++) {
		v[i] = i * 7;
		/* a weak hash, so that runs of collisions are exercised */
		assert_true(hmap_put(&m, i % 97, &v[i]));
	}
	for (uint64_t i = 0; i < 5000; i += 3) {
		assert_true(hmap_del(&m, i % 97, &v[i]));
		assert_false(hmap_del(&m, i % 97, &v[i]));
	}
	for (uint64_t i = 0; i < 5000; i++) {
		uint64_t k = i * 7;
		void *f = hmap_find(&m, i % 97, u64_eq, &k);
		if (i % 3 == 0) {
			assert_null(f);
		} else {
			assert_ptr_equal(f, &v[i]);
		}
	}
	size_t pos = 0, seen = 0;
	while (hmap_next(&m, &pos) != NULL) {
		seen++;
	}
	assert_int_equal(seen, m.n);
	for (uint64_t i = 0; i < 5000; i++) {
		if (i % 3 != 0) {
			assert_true(hmap_del(&m, i % 97, &v[i]));
		}
	}
	assert_int_equal(m.n, 0);
	assert_null(m.slots);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
	    cmocka_unit_test(test_differential),
	    cmocka_unit_test(test_many_keys),
	    cmocka_unit_test(test_values_of_one_key),
	    cmocka_unit_test(test_hmap),
	};
	return cmocka_run_group_tests_name("ketree", tests, NULL, NULL);
}
