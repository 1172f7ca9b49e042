/*
 * test_batch.c - write batches on the TIPS facade (tips/batch.h, tips_batch_commit) on
 * the tips-* index named by argv[1]:
 *  - the builder's errors and the poisoned batch (a bad key in the middle applies
 *    nothing), empty batches, the operation and byte limits (TIPS_ETOOBIG at once);
 *  - last write wins, conditions judged in order, a failed condition applies nothing
 *    and names the operation;
 *  - exactly two fences per committed batch of two or more operations, one for a
 *    batch of one (a single write), none for an empty one;
 *  - batches survive a clean close and are seen by scans;
 *  - concurrency: writers commit batches over their own keys and over keys they all
 *    share, in different orders (the lock order must prevent deadlock); readers check
 *    that each owned key's version only moves forward and that a batch is wholly
 *    visible once its commit returned; a scanner checks the same of every scan (sorted,
 *    each key at least at the version committed before the scan began); at the end
 *    the shared keys all hold the value of one batch.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "test_util.h"

static char path[256];
static const struct tips_index_ops *ops;

static struct tips_db *open_db(uint64_t expected_keys)
{
	struct tips_config cfg;
	tips_config_init(&cfg);
	cfg.flags = TIPS_CREATE;
	cfg.pool_size = 64ull << 20;
	cfg.expected_keys = expected_keys;
	cfg.workers_up = 2;
	struct tips_db *db = NULL;
	int rc = tips_open(path, &cfg, ops, &db);
	if (rc)
		fprintf(stderr, "tips_open: %s\n", tips_errormsg());
	REQUIRE(rc == 0);
	return db;
}

static void key_of(uint64_t k, unsigned char out[8])
{
	be64(out, k);
}

/* The 8-byte value of key @k, or -1 if absent (-2 on another error). */
static int64_t get(struct tips_db *db, uint64_t k)
{
	unsigned char key[8];
	uint64_t v = 0;
	size_t vlen = 0;
	key_of(k, key);
	int rc = tips_get(db, key, 8, &v, sizeof(v), &vlen);
	if (rc == TIPS_ENOTFOUND)
		return -1;
	return rc == 0 && vlen == 8 ? (int64_t)v : -2;
}

static int add_put(struct tips_batch *b, uint64_t k, uint64_t v)
{
	unsigned char key[8];
	key_of(k, key);
	return tips_batch_put(b, key, 8, &v, 8);
}

static void test_builder_errors(void)
{
	struct tips_db *db = open_db(4096);
	struct tips_batch *b;
	CHECK_RC(tips_batch_new(NULL), TIPS_EINVAL);
	REQUIRE(tips_batch_new(&b) == 0);
	CHECK_RC(tips_batch_commit(db, NULL), TIPS_EINVAL);
	CHECK_RC(tips_batch_commit(NULL, b), TIPS_EINVAL);

	/* Empty: success, nothing written, no fence. */
	struct tips_pm_counters c0, c1;
	tips_pm_counters_thread(&c0);
	CHECK_RC(tips_batch_commit(db, b), 0);
	tips_pm_counters_thread(&c1);
	CHECK(c1.fences == c0.fences && c1.lines_flushed == c0.lines_flushed);

	/* A bad key in the middle: the add fails, the batch is poisoned, nothing applied. */
	CHECK_RC(add_put(b, 1, 10), 0);
	unsigned char big[TIPS_MAX_KEY + 1] = { 0 };
	uint64_t v = 11;
	CHECK_RC(tips_batch_put(b, big, sizeof(big), &v, 8), TIPS_ETOOBIG);
	CHECK_RC(tips_batch_put(b, NULL, 8, &v, 8), TIPS_EINVAL);
	CHECK_RC(tips_batch_put(b, big, 0, &v, 8), TIPS_EINVAL);
	CHECK_RC(tips_batch_put(b, big, 8, NULL, 8), TIPS_EINVAL);
	CHECK_RC(tips_batch_put(b, big, 8, big, TIPS_MAX_VALUE + 1), TIPS_ETOOBIG);
	CHECK_RC(add_put(b, 2, 20), 0);
	CHECK(tips_batch_count(b) == 2);
	CHECK_RC(tips_batch_commit(db, b), TIPS_ETOOBIG); /* the first failed add */
	CHECK(tips_batch_failed_op(b) == 1);
	CHECK(get(db, 1) == -1 && get(db, 2) == -1);

	/* Cleared, it is usable again. */
	tips_batch_clear(b);
	CHECK(tips_batch_count(b) == 0 && tips_batch_bytes(b) == 0);
	CHECK_RC(add_put(b, 1, 10), 0);
	CHECK_RC(add_put(b, 2, 20), 0);
	CHECK_RC(tips_batch_commit(db, b), 0);
	CHECK(tips_batch_failed_op(b) == (size_t)-1);
	CHECK(get(db, 1) == 10 && get(db, 2) == 20);

	/* The builder's own bound. */
	tips_batch_clear(b);
	for (uint64_t i = 0; i < TIPS_BATCH_MAX_OPS; i++)
		REQUIRE(add_put(b, i, i) == 0);
	CHECK_RC(add_put(b, 1u << 30, 1), TIPS_ETOOBIG);
	CHECK(tips_batch_count(b) == TIPS_BATCH_MAX_OPS);
	tips_batch_free(&b);
	CHECK(b == NULL);
	tips_batch_free(&b); /* NULL is fine */
	CHECK_RC(tips_close(&db), 0);
	unlink(path);
}

static void test_limits(void)
{
	struct tips_db *db = open_db(4096); /* a small cache: few keys per batch */
	size_t max_ops = 0, max_bytes = 0;
	tips_batch_limit(db, &max_ops, &max_bytes);
	CHECK(max_ops >= 64 && max_ops <= TIPS_BATCH_MAX_OPS);
	CHECK(max_bytes >= 64u << 10);
	struct tips_batch *b;
	REQUIRE(tips_batch_new(&b) == 0);
	for (uint64_t i = 0; i <= max_ops; i++)
		REQUIRE(add_put(b, i, i) == 0);
	CHECK_RC(tips_batch_commit(db, b), TIPS_ETOOBIG);
	CHECK(get(db, 0) == -1 && get(db, max_ops) == -1);
	/* The same key max_ops + 1 times is one key: it fits. */
	tips_batch_clear(b);
	for (uint64_t i = 0; i <= max_ops; i++)
		REQUIRE(add_put(b, 7, i) == 0);
	CHECK_RC(tips_batch_commit(db, b), 0);
	CHECK(get(db, 7) == (int64_t)max_ops);
	/* Too many bytes: large values past max_bytes. */
	tips_batch_clear(b);
	static unsigned char val[TIPS_MAX_VALUE];
	size_t n = max_bytes / TIPS_MAX_VALUE + 2;
	for (uint64_t i = 0; i < n; i++) {
		unsigned char key[8];
		key_of(1000 + i, key);
		REQUIRE(tips_batch_put(b, key, 8, val, sizeof(val)) == 0);
	}
	CHECK_RC(tips_batch_commit(db, b), TIPS_ETOOBIG);
	CHECK(get(db, 1000) == -1);
	/* Exactly at the limit it goes through. */
	tips_batch_clear(b);
	for (uint64_t i = 0; i < max_ops; i++)
		REQUIRE(add_put(b, 5000 + i, i) == 0);
	CHECK_RC(tips_batch_commit(db, b), 0);
	CHECK(get(db, 5000) == 0 && get(db, 5000 + max_ops - 1) == (int64_t)max_ops - 1);
	tips_batch_free(&b);
	CHECK_RC(tips_close(&db), 0);
	unlink(path);
}

/* Scan callback of test_semantics: keys 200.. with values 0.. in order. */
struct scan_arg {
	uint64_t n;
	int bad;
};

static int scan_fn(const void *k, size_t kl, const void *val, size_t vl, void *arg)
{
	struct scan_arg *a = arg;
	unsigned char want[8];
	be64(want, 200 + a->n);
	uint64_t v;
	memcpy(&v, val, 8);
	if (kl != 8 || vl != 8 || memcmp(k, want, 8) || v != a->n)
		a->bad++;
	a->n++;
	return 0;
}

static void test_semantics(void)
{
	struct tips_db *db = open_db(4096);
	struct tips_batch *b;
	REQUIRE(tips_batch_new(&b) == 0);
	unsigned char k1[8], k2[8], k3[8];
	key_of(1, k1);
	key_of(2, k2);
	key_of(3, k3);
	uint64_t v;

	/* Last write wins; a delete then a put leaves the put. */
	CHECK_RC(add_put(b, 1, 1), 0);
	CHECK_RC(add_put(b, 2, 2), 0);
	CHECK_RC(add_put(b, 1, 100), 0);
	CHECK_RC(tips_batch_delete(b, k2, 8), 0);
	CHECK_RC(tips_batch_delete(b, k3, 8), 0); /* absent: fine */
	CHECK_RC(add_put(b, 3, 3), 0);
	CHECK_RC(tips_batch_commit(db, b), 0);
	CHECK(get(db, 1) == 100 && get(db, 2) == -1 && get(db, 3) == 3);

	/* Conditions judged in order against the batch's own earlier writes. */
	tips_batch_clear(b);
	v = 4;
	CHECK_RC(tips_batch_insert(b, k2, 8, &v, 8), 0);  /* absent: ok */
	v = 5;
	CHECK_RC(tips_batch_update(b, k2, 8, &v, 8), 0);  /* present after the insert */
	CHECK_RC(tips_batch_remove(b, k3, 8), 0);         /* present */
	v = 6;
	CHECK_RC(tips_batch_insert(b, k3, 8, &v, 8), 0);  /* absent after the remove */
	CHECK_RC(tips_batch_commit(db, b), 0);
	CHECK(get(db, 2) == 5 && get(db, 3) == 6);

	/* A failed condition fails the whole batch, wherever it stands. */
	struct { int want; size_t at; } cases[3] = {
		{ TIPS_EKEYEXISTS, 2 }, { TIPS_ENOTFOUND, 1 }, { TIPS_ENOTFOUND, 2 } };
	for (int c = 0; c < 3; c++) {
		tips_batch_clear(b);
		CHECK_RC(add_put(b, 1, 999), 0);
		unsigned char absent[8];
		key_of(77, absent);
		v = 999;
		if (c == 0) {
			CHECK_RC(add_put(b, 10, 999), 0);
			CHECK_RC(tips_batch_insert(b, k2, 8, &v, 8), 0); /* present */
		} else if (c == 1) {
			CHECK_RC(tips_batch_update(b, absent, 8, &v, 8), 0);
		} else {
			CHECK_RC(add_put(b, 10, 999), 0);
			CHECK_RC(tips_batch_remove(b, absent, 8), 0); /* first remove: absent */
			CHECK_RC(tips_batch_remove(b, absent, 8), 0);
		}
		CHECK_RC(tips_batch_commit(db, b), cases[c].want);
		CHECK(tips_batch_failed_op(b) == cases[c].at);
		CHECK(get(db, 1) == 100 && get(db, 10) == -1 && get(db, 2) == 5);
		CHECK(get(db, 77) == -1);
	}
	/* The second remove of a key the batch itself removed fails too. */
	tips_batch_clear(b);
	CHECK_RC(tips_batch_remove(b, k1, 8), 0);
	CHECK_RC(tips_batch_remove(b, k1, 8), 0);
	CHECK_RC(tips_batch_commit(db, b), TIPS_ENOTFOUND);
	CHECK(tips_batch_failed_op(b) == 1);
	CHECK(get(db, 1) == 100);

	/* Scans see a committed batch, and so does a reopened database. */
	tips_batch_clear(b);
	for (uint64_t i = 0; i < 50; i++)
		CHECK_RC(add_put(b, 200 + i, i), 0);
	CHECK_RC(tips_batch_commit(db, b), 0);
	struct tips_stats st;
	tips_stats(db, &st);
	CHECK(st.batches == 3); /* failed and empty commits do not count */
	unsigned char start[8];
	key_of(200, start);
	struct scan_arg sa = { 0, 0 };
	CHECK(tips_scan(db, start, 8, 50, scan_fn, &sa) == 50);
	CHECK(sa.n == 50 && sa.bad == 0);
	CHECK_RC(tips_close(&db), 0);
	db = open_db(4096);
	CHECK(get(db, 1) == 100 && get(db, 2) == 5 && get(db, 3) == 6);
	for (uint64_t i = 0; i < 50; i++)
		CHECK(get(db, 200 + i) == (int64_t)i);
	tips_batch_free(&b);
	CHECK_RC(tips_close(&db), 0);
	unlink(path);
}

static void test_fences(void)
{
	struct tips_db *db = open_db(1 << 16);
	struct tips_batch *b;
	REQUIRE(tips_batch_new(&b) == 0);
	static const unsigned sizes[] = { 1, 4, 16, 64, 1024 };
	for (unsigned s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		for (int round = 0; round < 20; round++) {
			tips_batch_clear(b);
			for (unsigned i = 0; i < sizes[s]; i++)
				REQUIRE(add_put(b, (uint64_t)round * 4096 + i, round) == 0);
			struct tips_pm_counters a, z;
			tips_pm_counters_thread(&a);
			CHECK_RC(tips_batch_commit(db, b), 0);
			tips_pm_counters_thread(&z);
			/* A batch of one is that single write: one fence (a sealed record). */
			uint64_t want = sizes[s] == 1 ? 1 : 2;
			if (z.fences - a.fences != want)
				fprintf(stderr, "batch of %u: %llu fences\n", sizes[s],
					(unsigned long long)(z.fences - a.fences));
			CHECK(z.fences - a.fences == want);
			CHECK(z.lines_flushed - a.lines_flushed >= sizes[s]);
		}
	}
	tips_batch_free(&b);
	CHECK_RC(tips_close(&db), 0);
	unlink(path);
}

/* ---- concurrency --------------------------------------------------------------------- */

#define WRITERS 2
#define READERS 2
#define OWNED 8          /* keys each writer owns: key w * 1000 + i */
#define SHARED 6         /* keys every writer writes: key 900000 + i */
#define ROUNDS 20000

static struct tips_db *cdb;
static atomic_int writers_left;
static atomic_uint_fast64_t committed[WRITERS]; /* last version each writer committed */

static void *writer(void *arg)
{
	unsigned w = (unsigned)(uintptr_t)arg;
	struct tips_batch *b;
	REQUIRE(tips_batch_new(&b) == 0);
	uint64_t seed = 0x9e37 + w;
	for (uint64_t ver = 1; ver <= ROUNDS; ver++) {
		tips_batch_clear(b);
		/* Owned keys in a random rotation, the shared ones in another: batches of
		 * different writers lock overlapping buckets in different add orders. */
		unsigned rot = (unsigned)(rnd(&seed) % OWNED);
		for (unsigned i = 0; i < OWNED; i++)
			REQUIRE(add_put(b, w * 1000 + (i + rot) % OWNED, ver) == 0);
		if (ver % 3 == 0) {
			uint64_t tag = (uint64_t)w << 32 | ver;
			for (unsigned i = 0; i < SHARED; i++)
				REQUIRE(add_put(b, 900000 + (SHARED - 1 - (i + rot) % SHARED), tag) == 0);
		}
		int rc = tips_batch_commit(cdb, b);
		if (rc)
			fprintf(stderr, "writer %u: %s\n", w, tips_errormsg());
		REQUIRE(rc == 0);
		atomic_store(&committed[w], ver);
		/* Once the commit returned, the whole batch is visible. */
		for (unsigned i = 0; i < OWNED; i++)
			CHECK(get(cdb, w * 1000 + i) == (int64_t)ver);
	}
	tips_batch_free(&b);
	atomic_fetch_sub(&writers_left, 1);
	return NULL;
}

static void *reader(void *arg)
{
	(void)arg;
	int64_t last[WRITERS][OWNED] = { { 0 } };
	while (atomic_load(&writers_left) > 0) {
		for (unsigned w = 0; w < WRITERS; w++) {
			uint64_t floor = atomic_load(&committed[w]);
			for (unsigned i = 0; i < OWNED; i++) {
				int64_t v = get(cdb, w * 1000 + i);
				if (v == -1)
					v = 0; /* before the writer's first batch */
				if (v < last[w][i] || v < (int64_t)floor || v > ROUNDS)
					fprintf(stderr, "reader: key %u: read %lld after %lld, "
						"writer %u had committed %llu\n", w * 1000 + i,
						(long long)v, (long long)last[w][i], w,
						(unsigned long long)floor);
				CHECK(v >= last[w][i]);        /* only forward */
				CHECK(v >= (int64_t)floor);    /* every committed batch visible */
				CHECK(v <= ROUNDS);
				last[w][i] = v > last[w][i] ? v : last[w][i];
			}
		}
	}
	return NULL;
}

/* What a scan of the owned keys saw: each key's value at least the version its
 * writer had committed when the scan began (a scan sees every completed write). */
struct scan_check {
	uint64_t floor[WRITERS];
	uint64_t n, bad, prev_key;
};

static int scan_owned(const void *k, size_t kl, const void *val, size_t vl, void *arg)
{
	struct scan_check *sc = arg;
	if (kl != 8 || vl != 8) {
		sc->bad++;
		return 0;
	}
	const unsigned char *kb = k;
	uint64_t key = 0, v;
	for (int i = 0; i < 8; i++)
		key = key << 8 | kb[i];
	memcpy(&v, val, 8);
	if (key >= 900000)
		return 1; /* past the owned keys */
	unsigned w = (unsigned)(key / 1000);
	if ((sc->n && key <= sc->prev_key) || w >= WRITERS || key % 1000 >= OWNED ||
	    v < sc->floor[w] || v > ROUNDS)
		sc->bad++;
	sc->prev_key = key;
	sc->n++;
	return 0;
}

static void *scanner(void *arg)
{
	(void)arg;
	while (atomic_load(&writers_left) > 0) {
		struct scan_check sc = { { 0 }, 0, 0, 0 };
		for (unsigned w = 0; w < WRITERS; w++)
			sc.floor[w] = atomic_load(&committed[w]);
		long n = tips_scan(cdb, NULL, 0, WRITERS * OWNED + 1, scan_owned, &sc);
		CHECK(n >= 0 && sc.bad == 0);
		bool all_started = true;
		for (unsigned w = 0; w < WRITERS; w++)
			all_started &= sc.floor[w] > 0;
		if (all_started) /* every owned key was written before the scan began */
			CHECK(sc.n == WRITERS * OWNED);
	}
	return NULL;
}

static void test_concurrent(void)
{
	cdb = open_db(1 << 16);
	atomic_store(&writers_left, WRITERS);
	pthread_t t[WRITERS + READERS + 1];
	for (unsigned i = 0; i < WRITERS; i++)
		pthread_create(&t[i], NULL, writer, (void *)(uintptr_t)i);
	for (unsigned i = 0; i < READERS; i++)
		pthread_create(&t[WRITERS + i], NULL, reader, NULL);
	pthread_create(&t[WRITERS + READERS], NULL, scanner, NULL);
	for (unsigned i = 0; i < WRITERS + READERS + 1; i++)
		pthread_join(t[i], NULL);
	/* The shared keys all hold the tag of one batch: the last to commit wrote all. */
	int64_t first = get(cdb, 900000);
	CHECK(first > 0);
	for (unsigned i = 1; i < SHARED; i++)
		CHECK(get(cdb, 900000 + i) == first);
	CHECK_RC(tips_close(&cdb), 0);
	cdb = open_db(1 << 16);
	for (unsigned i = 0; i < SHARED; i++)
		CHECK(get(cdb, 900000 + i) == first);
	for (unsigned w = 0; w < WRITERS; w++)
		for (unsigned i = 0; i < OWNED; i++)
			CHECK(get(cdb, w * 1000 + i) == ROUNDS);
	CHECK_RC(tips_close(&cdb), 0);
	unlink(path);
}

int main(int argc, char **argv)
{
	const char *name = argc > 1 ? argv[1] : "tips-hash";
	ops = tips_index_find(name);
	REQUIRE(ops != NULL);
	test_path(path, sizeof(path), "/dev/shm", "batch");
	test_builder_errors();
	test_limits();
	test_semantics();
	test_fences();
	test_concurrent();
	return test_finish("test_batch");
}
