/*
 * test_keygen.c - the key generators of tips-bench: each distribution's shape within a
 * tolerance, the scatter is a bijection that separates neighbouring ids, rng_below
 * stays in range, and a seed fixes the sequence while streams differ.
 */
#include <math.h>

#include "keygen.h"
#include "test_util.h"

#define DRAWS 2000000u

static void test_uniform(void)
{
	struct keygen g;
	REQUIRE(keygen_init(&g, KEYDIST_UNIFORM, 0, NULL, 1, 0) == 0);
	uint64_t bins[10] = { 0 }, n = 1000003;
	for (unsigned i = 0; i < DRAWS; i++) {
		uint64_t v = keygen_next(&g, n);
		REQUIRE(v < n);
		bins[v * 10 / n]++;
	}
	for (int b = 0; b < 10; b++) /* 10% each, within 0.3 points */
		CHECK(fabs((double)bins[b] / DRAWS - 0.1) < 0.003);
}

/* Share of draws that land on the first @frac of the ids. */
static double share_below(struct keygen *g, uint64_t n, double frac)
{
	uint64_t hits = 0, limit = (uint64_t)(frac * (double)n);
	for (unsigned i = 0; i < DRAWS; i++) {
		uint64_t v = keygen_next(g, n);
		REQUIRE(v < n);
		hits += v < limit;
	}
	return (double)hits / DRAWS;
}

static void test_selfsimilar(void)
{
	struct keygen g;
	REQUIRE(keygen_init(&g, KEYDIST_SELFSIMILAR, 0.2, NULL, 2, 0) == 0);
	/* 80% of accesses on 20% of the keys, and recursively 64% on 4%. */
	double s20 = share_below(&g, 8000000, 0.2), s4 = share_below(&g, 8000000, 0.04);
	fprintf(stderr, "selfsimilar 0.2: %.4f of draws on the first 20%% of ids, %.4f on 4%%\n",
		s20, s4);
	CHECK(fabs(s20 - 0.8) < 0.005);
	CHECK(fabs(s4 - 0.64) < 0.005);
	CHECK(keygen_init(&g, KEYDIST_SELFSIMILAR, 0.7, NULL, 2, 0) == -1);
}

static void test_zipfian(void)
{
	struct zipf z;
	uint64_t n = 100000;
	CHECK(zipf_init(&z, n, 1.0) == -1);
	REQUIRE(zipf_init(&z, n, 0.99) == 0);
	struct keygen g;
	REQUIRE(keygen_init(&g, KEYDIST_ZIPFIAN, 0.99, &z, 3, 0) == 0);
	static uint64_t count[100000];
	for (unsigned i = 0; i < DRAWS; i++)
		count[keygen_next(&g, n)]++;
	/* P(rank 0) = 1/zeta(n), P(rank 1) = 2^-theta / zeta(n). */
	double p0 = (double)count[0] / DRAWS, p1 = (double)count[1] / DRAWS;
	fprintf(stderr, "zipfian 0.99: P(0) %.4f (expected %.4f), P(1) %.4f (expected %.4f)\n",
		p0, 1 / z.zetan, p1, pow(0.5, 0.99) / z.zetan);
	CHECK(fabs(p0 - 1 / z.zetan) < 0.005);
	CHECK(fabs(p1 - pow(0.5, 0.99) / z.zetan) < 0.005);
	CHECK(count[0] > count[10] && count[10] > count[1000]);
}

static void test_latest(void)
{
	struct zipf z;
	uint64_t n = 100000;
	REQUIRE(zipf_init(&z, n, 0.99) == 0);
	struct keygen g;
	REQUIRE(keygen_init(&g, KEYDIST_LATEST, 0.99, &z, 4, 0) == 0);
	uint64_t newest = 0, recent = 0;
	for (unsigned i = 0; i < DRAWS; i++) {
		uint64_t v = keygen_next(&g, n);
		REQUIRE(v < n);
		newest += v == n - 1;
		recent += v >= n - n / 100;
	}
	CHECK(fabs((double)newest / DRAWS - 1 / z.zetan) < 0.005);
	CHECK((double)recent / DRAWS > 0.5); /* the newest 1% takes most draws */
	/* A range that grew past the table still yields ids inside it, newest hottest. */
	CHECK(keygen_next(&g, n + 500) < n + 500);
}

static void test_scatter_and_determinism(void)
{
	/* Distinct ids give distinct keys; neighbours land far apart. */
	enum { N = 1 << 20 };
	static uint64_t keys[N];
	for (uint64_t i = 0; i < N; i++)
		keys[i] = keygen_scatter(i);
	int apart = 0;
	for (uint64_t i = 1; i < N; i++)
		apart += (keys[i] > keys[i - 1] ? keys[i] - keys[i - 1] : keys[i - 1] - keys[i]) >
			 (1ull << 40);
	CHECK(apart == N - 1);
	for (uint64_t i = 0; i < N; i++) /* bijective: multiply back by the inverse */
		CHECK(keys[i] * 0xf1de83e19937733dull == i);

	struct rng a, b, c;
	rng_seed(&a, 42, 7);
	rng_seed(&b, 42, 7);
	rng_seed(&c, 42, 8);
	int same = 1, differ = 0;
	for (int i = 0; i < 1000; i++) {
		uint64_t x = rng_next(&a), y = rng_next(&b), w = rng_next(&c);
		same &= x == y;
		differ += x != w;
	}
	CHECK(same && differ > 990);
	for (uint64_t n = 1; n < 200; n++)
		CHECK(rng_below(&a, n) < n);
	enum keydist d;
	CHECK(keydist_parse("selfsimilar", &d) == 0 && d == KEYDIST_SELFSIMILAR);
	CHECK(keydist_parse("zipf", &d) == -1);
}

int main(void)
{
	test_uniform();
	test_selfsimilar();
	test_zipfian();
	test_latest();
	test_scatter_and_determinism();
	return test_finish("test_keygen");
}
