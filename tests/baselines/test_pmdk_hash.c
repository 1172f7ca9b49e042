/*
 * test_pmdk_hash.c - unit test of pmdk-hash (src/baselines/pmdk_hash.h), the
 * libpmemobj-transaction baseline.
 *
 * Covers: codes and values of every call (insert of a present key, update and remove
 * of an absent one, NULL and empty arguments, keys and values over the limits, lookup
 * with a short buffer, empty values, same- and different-length updates, put); scans
 * (order, start key, count, early stop); random operations against a model with keys
 * of 1..40 bytes (prefixes of each other, 0x00 and 0xff bytes) and values of 0..300
 * bytes, reopening the pool every round and comparing everything and the leak check;
 * persistence across close and reopen; a full pool (TIPS_ENOMEM, nothing lost, nothing
 * leaked, room again after removes); foreign files (not a libpmemobj pool, another
 * layout, our layout with a foreign root); the leak check finding a planted object;
 * and threads (writers on disjoint keys, readers, and two threads fighting over the
 * same keys) followed by the leak check; prefault (every page of the pool file in
 * memory after a create with it, not without).
 */
#define _GNU_SOURCE
#include "test_util.h"

#include "baselines/pmdk_hash.h"

#include <fcntl.h>
#include <libpmemobj.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sched.h>
#include <stdint.h>

#define MAXK 40
#define MAXV 300

static struct pmdk_hash *open_at(const char *path, unsigned flags, uint64_t pool_size,
				 uint64_t keys)
{
	struct pmdk_hash_config cfg = { flags, pool_size, keys, 0 };
	struct pmdk_hash *h = NULL;
	int rc = pmdk_hash_open(path, &cfg, &h);
	if (rc) {
		fprintf(stderr, "pmdk_hash_open %s: %s (%s)\n", path, tips_strerror(rc),
			tips_errormsg());
		exit(1);
	}
	return h;
}

static void reopen(struct pmdk_hash **h, const char *path)
{
	pmdk_hash_close(h);
	REQUIRE(*h == NULL);
	*h = open_at(path, 0, 0, 0);
}

/* The leak check must pass and find @keys nodes (UINT64_MAX: any number). */
static void check_clean(struct pmdk_hash *h, uint64_t keys)
{
	struct pmdk_hash_report r;
	int rc = pmdk_hash_check(h, NULL, NULL, &r);
	CHECK_RC(rc, 0);
	CHECK(r.objects == r.reachable && r.leaked == 0 && r.free_but_owned == 0 &&
	      r.owned_twice == 0);
	if (keys != UINT64_MAX && r.keys != keys) {
		fprintf(stderr, "leak check: %llu keys, want %llu\n", (unsigned long long)r.keys,
			(unsigned long long)keys);
		test_failures++;
	}
}

/* ---- codes and values --------------------------------------------------------------- */

struct collected {
	size_t n, stop_at;
	unsigned char k[64][MAXK];
	size_t kl[64];
	size_t vl[64];
};

static int collect(const void *key, size_t klen, const void *val, size_t vlen, void *arg)
{
	struct collected *c = arg;
	(void)val;
	if (c->n < 64) {
		memcpy(c->k[c->n], key, klen < MAXK ? klen : MAXK);
		c->kl[c->n] = klen;
		c->vl[c->n] = vlen;
	}
	c->n++;
	return c->stop_at && c->n == c->stop_at;
}

static void test_codes(const char *dir)
{
	char path[256];
	test_path(path, sizeof(path), dir, "pmdk-codes");
	struct pmdk_hash *h = open_at(path, PMDK_HASH_CREATE, 16 << 20, 100);
	unsigned char v[100], out[100];
	size_t vl = 0;
	memset(v, 'v', sizeof(v));

	CHECK_RC(pmdk_hash_insert(h, "alpha", 5, "one", 3), 0);
	CHECK_RC(pmdk_hash_insert(h, "alpha", 5, "two", 3), TIPS_EKEYEXISTS);
	CHECK_RC(pmdk_hash_lookup(h, "alpha", 5, out, sizeof(out), &vl), 0);
	CHECK(vl == 3 && memcmp(out, "one", 3) == 0);
	CHECK_RC(pmdk_hash_update(h, "beta", 4, "x", 1), TIPS_ENOTFOUND);
	CHECK_RC(pmdk_hash_remove(h, "beta", 4), TIPS_ENOTFOUND);
	CHECK_RC(pmdk_hash_lookup(h, "beta", 4, out, sizeof(out), &vl), TIPS_ENOTFOUND);
	CHECK_RC(pmdk_hash_lookup(h, "alph", 4, out, sizeof(out), &vl), TIPS_ENOTFOUND);

	/* same length: in place; another length: a new node */
	CHECK_RC(pmdk_hash_update(h, "alpha", 5, "ONE", 3), 0);
	CHECK_RC(pmdk_hash_lookup(h, "alpha", 5, out, sizeof(out), &vl), 0);
	CHECK(vl == 3 && memcmp(out, "ONE", 3) == 0);
	CHECK_RC(pmdk_hash_update(h, "alpha", 5, v, 100), 0);
	CHECK_RC(pmdk_hash_lookup(h, "alpha", 5, out, sizeof(out), &vl), 0);
	CHECK(vl == 100 && memcmp(out, v, 100) == 0);
	/* a short buffer: its bytes copied, the full length reported */
	memset(out, 0, sizeof(out));
	CHECK_RC(pmdk_hash_lookup(h, "alpha", 5, out, 10, &vl), TIPS_ESIZE);
	CHECK(vl == 100 && memcmp(out, v, 10) == 0 && out[10] == 0);
	CHECK_RC(pmdk_hash_lookup(h, "alpha", 5, NULL, 0, &vl), TIPS_ESIZE);
	/* empty values */
	CHECK_RC(pmdk_hash_insert(h, "empty", 5, NULL, 0), 0);
	CHECK_RC(pmdk_hash_lookup(h, "empty", 5, NULL, 0, &vl), 0);
	CHECK(vl == 0);
	CHECK_RC(pmdk_hash_update(h, "empty", 5, NULL, 0), 0);
	CHECK_RC(pmdk_hash_update(h, "alpha", 5, NULL, 0), 0);
	CHECK_RC(pmdk_hash_lookup(h, "alpha", 5, out, sizeof(out), &vl), 0);
	CHECK(vl == 0);
	/* put: inserts, then overwrites */
	CHECK_RC(pmdk_hash_put(h, "gamma", 5, "g1", 2), 0);
	CHECK_RC(pmdk_hash_put(h, "gamma", 5, "g22", 3), 0);
	CHECK_RC(pmdk_hash_lookup(h, "gamma", 5, out, sizeof(out), &vl), 0);
	CHECK(vl == 3 && memcmp(out, "g22", 3) == 0);
	CHECK_RC(pmdk_hash_remove(h, "gamma", 5), 0);
	CHECK_RC(pmdk_hash_remove(h, "gamma", 5), TIPS_ENOTFOUND);

	/* arguments */
	CHECK_RC(pmdk_hash_insert(h, NULL, 3, "x", 1), TIPS_EINVAL);
	CHECK_RC(pmdk_hash_insert(h, "k", 0, "x", 1), TIPS_EINVAL);
	CHECK_RC(pmdk_hash_insert(h, "k", 1, NULL, 1), TIPS_EINVAL);
	CHECK_RC(pmdk_hash_update(NULL, "k", 1, "x", 1), TIPS_EINVAL);
	CHECK_RC(pmdk_hash_remove(h, NULL, 1), TIPS_EINVAL);
	CHECK_RC(pmdk_hash_lookup(h, "k", 1, NULL, 5, &vl), TIPS_EINVAL);
	CHECK(pmdk_hash_scan(h, "k", 1, 5, NULL, NULL) == TIPS_EINVAL);
	CHECK(pmdk_hash_scan(h, NULL, 3, 5, collect, NULL) == TIPS_EINVAL);
	static unsigned char big[TIPS_MAX_VALUE + 2];
	CHECK_RC(pmdk_hash_insert(h, big, TIPS_MAX_KEY + 1, "x", 1), TIPS_ETOOBIG);
	CHECK_RC(pmdk_hash_insert(h, "k", 1, big, TIPS_MAX_VALUE + 1), TIPS_ETOOBIG);
	CHECK_RC(pmdk_hash_lookup(h, big, TIPS_MAX_KEY + 1, out, 1, &vl), TIPS_ENOTFOUND);
	CHECK_RC(pmdk_hash_remove(h, big, TIPS_MAX_KEY + 1), TIPS_ENOTFOUND);
	/* the limits themselves */
	memset(big, 0xab, sizeof(big));
	CHECK_RC(pmdk_hash_insert(h, big, TIPS_MAX_KEY, big, TIPS_MAX_VALUE), 0);
	CHECK_RC(pmdk_hash_update(h, big, TIPS_MAX_KEY, big + 1, TIPS_MAX_VALUE), 0);
	CHECK_RC(pmdk_hash_lookup(h, big, TIPS_MAX_KEY, NULL, 0, &vl), TIPS_ESIZE);
	CHECK(vl == TIPS_MAX_VALUE);
	CHECK_RC(pmdk_hash_remove(h, big, TIPS_MAX_KEY), 0);

	/* scans: order (memcmp, shorter first), start, count, early stop */
	const char *keys[] = { "b", "a", "ab", "a\x00", "\xff", "abc", "b\x00\x01", "aa" };
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		CHECK_RC(pmdk_hash_put(h, keys[i], i == 3 ? 2 : i == 6 ? 3 : strlen(keys[i]),
				       "s", 1), 0);
	struct collected c = { 0 };
	long n = pmdk_hash_scan(h, NULL, 0, 100, collect, &c);
	CHECK(n == 10 && c.n == 10); /* the eight, "alpha" and "empty" */
	for (size_t i = 1; i < c.n && i < 64; i++)
		CHECK(key_cmp(c.k[i - 1], c.kl[i - 1], c.k[i], c.kl[i]) < 0);
	memset(&c, 0, sizeof(c));
	n = pmdk_hash_scan(h, "ab", 2, 3, collect, &c);
	CHECK(n == 3 && c.kl[0] == 2 && memcmp(c.k[0], "ab", 2) == 0 && c.kl[1] == 3 &&
	      memcmp(c.k[1], "abc", 3) == 0 && c.kl[2] == 5 && memcmp(c.k[2], "alpha", 5) == 0);
	memset(&c, 0, sizeof(c));
	c.stop_at = 2;
	CHECK(pmdk_hash_scan(h, "a", 1, 100, collect, &c) == 2);
	CHECK(pmdk_hash_scan(h, "\xff\xff", 2, 100, collect, &c) == 0);
	CHECK(pmdk_hash_scan(h, NULL, 0, 0, collect, &c) == 0);
	check_clean(h, 10);

	/* persistence: everything as it was after close and reopen */
	reopen(&h, path);
	CHECK_RC(pmdk_hash_lookup(h, "alpha", 5, out, sizeof(out), &vl), 0);
	CHECK(vl == 0);
	CHECK_RC(pmdk_hash_lookup(h, "a\x00", 2, out, sizeof(out), &vl), 0);
	CHECK(vl == 1 && out[0] == 's');
	memset(&c, 0, sizeof(c));
	CHECK(pmdk_hash_scan(h, NULL, 0, 100, collect, &c) == 10);
	check_clean(h, 10);

	/* opening: absent file without CREATE, create on an existing pool opens it */
	struct pmdk_hash *h2 = NULL;
	char absent[256];
	test_path(absent, sizeof(absent), dir, "pmdk-absent");
	struct pmdk_hash_config cfg = { 0, 0, 0, 0 };
	CHECK_RC(pmdk_hash_open(absent, &cfg, &h2), TIPS_ENOENT);
	CHECK(h2 == NULL);
	CHECK_RC(pmdk_hash_open(NULL, &cfg, &h2), TIPS_EINVAL);
	/* too small a pool: for libpmemobj, or for the bucket array (no file left) */
	struct pmdk_hash_config small = { PMDK_HASH_CREATE, 1 << 20, 0, 0 };
	CHECK_RC(pmdk_hash_open(absent, &small, &h2), TIPS_ESIZE);
	struct pmdk_hash_config tight = { PMDK_HASH_CREATE, PMEMOBJ_MIN_POOL, 4u << 20, 0 };
	CHECK_RC(pmdk_hash_open(absent, &tight, &h2), TIPS_ENOMEM);
	CHECK(h2 == NULL && access(absent, F_OK) != 0);
	pmdk_hash_close(&h);
	h = open_at(path, PMDK_HASH_CREATE, 0, 0);
	CHECK_RC(pmdk_hash_lookup(h, "empty", 5, NULL, 0, &vl), 0);
	pmdk_hash_close(&h);
	CHECK_RC(pmdk_hash_check_file(path), 0);
	unlink(path);
}

/* ---- the model ---------------------------------------------------------------------------- */

struct entry {
	unsigned char k[MAXK], v[MAXV];
	size_t kl, vl;
	int present;
};

/* A key from a pool of 600: 8-byte big-endian integers, and strings of 1..40 bytes
 * drawn from a small alphabet with 0x00 and 0xff, so that prefixes are common. */
static void model_key(uint64_t id, unsigned char *k, size_t *kl)
{
	if (id % 3 == 0) {
		be64(k, id * 7919);
		*kl = 8;
		return;
	}
	uint64_t s = id * 0x9e3779b97f4a7c15ull + 1;
	static const unsigned char alpha[] = { 0x00, 'a', 'b', 0xff };
	*kl = 1 + rnd(&s) % (id % 5 == 0 ? MAXK : 4);
	for (size_t i = 0; i < *kl; i++)
		k[i] = alpha[rnd(&s) % 4];
}

struct model_scan {
	const struct entry *m;
	size_t nm;
	int bad;
	size_t n;
	const unsigned char *prev;
	size_t prevl;
	unsigned char prevbuf[MAXK];
};

static int model_visit(const void *key, size_t klen, const void *val, size_t vlen, void *arg)
{
	struct model_scan *s = arg;
	if (s->n && key_cmp(s->prevbuf, s->prevl, key, klen) >= 0)
		s->bad++;
	size_t i;
	for (i = 0; i < s->nm; i++)
		if (s->m[i].present && s->m[i].kl == klen && memcmp(s->m[i].k, key, klen) == 0)
			break;
	if (i == s->nm || s->m[i].vl != vlen || memcmp(s->m[i].v, val, vlen) != 0)
		s->bad++;
	memcpy(s->prevbuf, key, klen);
	s->prevl = klen;
	s->n++;
	return 0;
}

static void model_compare(struct pmdk_hash *h, const struct entry *m, size_t nm)
{
	size_t present = 0;
	unsigned char out[MAXV];
	for (size_t i = 0; i < nm; i++) {
		if (!m[i].kl)
			continue;
		size_t vl = 0;
		int rc = pmdk_hash_lookup(h, m[i].k, m[i].kl, out, sizeof(out), &vl);
		if (m[i].present) {
			present++;
			CHECK_RC(rc, 0);
			CHECK(rc || (vl == m[i].vl && memcmp(out, m[i].v, vl) == 0));
		} else {
			CHECK_RC(rc, TIPS_ENOTFOUND);
		}
	}
	struct model_scan s = { m, nm, 0, 0, NULL, 0, { 0 } };
	long n = pmdk_hash_scan(h, NULL, 0, nm + 10, model_visit, &s);
	CHECK(n == (long)present && s.bad == 0);
	check_clean(h, present);
}

static void test_model(const char *dir)
{
	char path[256];
	test_path(path, sizeof(path), dir, "pmdk-model");
	struct pmdk_hash *h = open_at(path, PMDK_HASH_CREATE, 32 << 20, 64); /* long chains */
	enum { NKEYS = 600 };
	static struct entry m[NKEYS];
	memset(m, 0, sizeof(m));
	for (uint64_t id = 0; id < NKEYS; id++) { /* a key drawn twice is used once */
		model_key(id, m[id].k, &m[id].kl);
		for (uint64_t j = 0; j < id && m[id].kl; j++)
			if (m[j].kl == m[id].kl && memcmp(m[j].k, m[id].k, m[id].kl) == 0)
				m[id].kl = 0;
	}
	uint64_t seed = 42;
	for (int round = 0; round < 8; round++) {
		for (int op = 0; op < 2500; op++) {
			uint64_t id = rnd(&seed) % NKEYS;
			struct entry *e = &m[id];
			if (!e->kl)
				continue;
			unsigned char v[MAXV];
			size_t vl = rnd(&seed) % 4 == 0 ? rnd(&seed) % MAXV : 8;
			for (size_t i = 0; i < vl; i++)
				v[i] = (unsigned char)rnd(&seed);
			unsigned kind = (unsigned)(rnd(&seed) % 5);
			int rc, want;
			switch (kind) {
			case 0:
				rc = pmdk_hash_insert(h, e->k, e->kl, v, vl);
				want = e->present ? TIPS_EKEYEXISTS : 0;
				break;
			case 1:
				rc = pmdk_hash_update(h, e->k, e->kl, v, vl);
				want = e->present ? 0 : TIPS_ENOTFOUND;
				break;
			case 2:
				rc = pmdk_hash_put(h, e->k, e->kl, v, vl);
				want = 0;
				break;
			case 3:
				rc = pmdk_hash_remove(h, e->k, e->kl);
				want = e->present ? 0 : TIPS_ENOTFOUND;
				break;
			default: {
				unsigned char out[MAXV];
				size_t ol = 0;
				rc = pmdk_hash_lookup(h, e->k, e->kl, out, sizeof(out), &ol);
				want = e->present ? 0 : TIPS_ENOTFOUND;
				CHECK(rc || (ol == e->vl && memcmp(out, e->v, ol) == 0));
				break;
			}
			}
			CHECK_RC(rc, want);
			if (rc == 0 && kind < 3) {
				memcpy(e->v, v, vl);
				e->vl = vl;
				e->present = 1;
			} else if (rc == 0 && kind == 3) {
				e->present = 0;
			}
			if (op % 500 == 0) { /* a scan from a random key against the model */
				uint64_t sid = rnd(&seed) % NKEYS;
				unsigned char sk[MAXK];
				size_t skl;
				model_key(sid, sk, &skl);
				struct model_scan s = { m, NKEYS, 0, 0, NULL, 0, { 0 } };
				size_t want_n = 0;
				for (size_t i = 0; i < NKEYS; i++)
					if (m[i].present && key_cmp(m[i].k, m[i].kl, sk, skl) >= 0)
						want_n++;
				size_t cnt = 1 + rnd(&seed) % 50;
				long n = pmdk_hash_scan(h, sk, skl, cnt, model_visit, &s);
				CHECK(n == (long)(want_n < cnt ? want_n : cnt) && s.bad == 0);
			}
		}
		reopen(&h, path);
		model_compare(h, m, NKEYS);
	}
	pmdk_hash_close(&h);
	CHECK_RC(pmdk_hash_check_file(path), 0);
	unlink(path);
}

/* ---- a full pool ------------------------------------------------------------------------- */

/* Pages of the file at @path that are in memory (in the page cache: for a tmpfs file,
 * the pages that exist), and its page count in *@pages. */
static size_t file_resident_pages(const char *path, size_t *pages)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	REQUIRE(fd >= 0);
	struct stat st;
	REQUIRE(fstat(fd, &st) == 0);
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	*pages = (size_t)st.st_size / page;
	void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
	REQUIRE(p != MAP_FAILED);
	unsigned char *vec = malloc(*pages);
	REQUIRE(vec != NULL);
	REQUIRE(mincore(p, (size_t)st.st_size, vec) == 0);
	size_t in = 0;
	for (size_t i = 0; i < *pages; i++)
		in += vec[i] & 1;
	free(vec);
	munmap(p, (size_t)st.st_size);
	close(fd);
	return in;
}

/* pmdk_hash_config.prefault: the pool is faulted in at create (a tmpfs file then has
 * every page), and not without it; the pool works the same. */
static void test_prefault(const char *dir)
{
	for (int on = 0; on <= 1; on++) {
		char path[256];
		snprintf(path, sizeof(path), "%s/test_pmdk_hash_prefault_%d_%d", dir, on, (int)getpid());
		unlink(path);
		struct pmdk_hash_config cfg = { PMDK_HASH_CREATE, 64u << 20, 1000, on };
		struct pmdk_hash *h = NULL;
		REQUIRE(pmdk_hash_open(path, &cfg, &h) == 0);
		CHECK_RC(pmdk_hash_put(h, "k", 1, "v", 1), 0);
		pmdk_hash_close(&h);
		size_t pages, in = file_resident_pages(path, &pages);
		if (on)
			CHECK(in == pages);
		else
			CHECK(in < pages);
		REQUIRE(pmdk_hash_open(path, &cfg, &h) == 0);
		char v[8];
		size_t vl = 0;
		CHECK_RC(pmdk_hash_lookup(h, "k", 1, v, sizeof(v), &vl), 0);
		CHECK(vl == 1 && v[0] == 'v');
		pmdk_hash_close(&h);
		unlink(path);
	}
}

static void test_full(const char *dir)
{
	char path[256];
	test_path(path, sizeof(path), dir, "pmdk-full");
	struct pmdk_hash *h = open_at(path, PMDK_HASH_CREATE, PMEMOBJ_MIN_POOL, 1024);
	unsigned char k[8], v[200];
	memset(v, 'x', sizeof(v));
	uint64_t n = 0;
	int rc;
	while ((rc = pmdk_hash_insert(h, (be64(k, n), k), 8, v, 100)) == 0)
		n++;
	CHECK_RC(rc, TIPS_ENOMEM);
	CHECK(strstr(tips_errormsg(), "full") != NULL);
	CHECK(n > 1000);
	printf("full pool of %zu bytes: %llu keys with 100-byte values\n", (size_t)PMEMOBJ_MIN_POOL,
	       (unsigned long long)n);
	/* a replacement node does not fit either; the old value stays */
	be64(k, 0);
	int urc = pmdk_hash_update(h, k, 8, v, 200);
	CHECK(urc == TIPS_ENOMEM || urc == 0);
	size_t vl = 0;
	CHECK_RC(pmdk_hash_lookup(h, k, 8, NULL, 0, &vl), TIPS_ESIZE);
	CHECK(vl == (urc ? 100u : 200u));
	/* nothing lost, nothing leaked by the aborted transactions */
	for (uint64_t i = 0; i < n; i++) {
		be64(k, i);
		unsigned char out[200];
		if (pmdk_hash_lookup(h, k, 8, out, sizeof(out), &vl) != 0 ||
		    memcmp(out, v, vl) != 0) {
			fprintf(stderr, "full pool: key %llu lost\n", (unsigned long long)i);
			test_failures++;
			break;
		}
	}
	check_clean(h, n);
	reopen(&h, path);
	check_clean(h, n);
	/* room again after removes */
	for (uint64_t i = 0; i < 50; i++)
		CHECK_RC(pmdk_hash_remove(h, (be64(k, i), k), 8), 0);
	be64(k, n + 1);
	CHECK_RC(pmdk_hash_insert(h, k, 8, v, 100), 0);
	check_clean(h, n - 50 + 1);
	pmdk_hash_close(&h);
	unlink(path);
}

/* ---- foreign files, planted leaks ----------------------------------------------------------- */

static void test_foreign(const char *dir)
{
	char path[256];
	struct pmdk_hash *h = NULL;
	struct pmdk_hash_config cfg = { 0, 0, 0, 0 };

	/* not a libpmemobj pool at all */
	test_path(path, sizeof(path), dir, "pmdk-random");
	FILE *f = fopen(path, "w");
	REQUIRE(f);
	for (int i = 0; i < 100000; i++)
		fputc(i * 31, f);
	fclose(f);
	CHECK_RC(pmdk_hash_open(path, &cfg, &h), TIPS_ENOTPOOL);
	CHECK(h == NULL && strstr(tips_errormsg(), "not a libpmemobj pool"));
	cfg.flags = PMDK_HASH_CREATE; /* CREATE never overwrites a file */
	CHECK_RC(pmdk_hash_open(path, &cfg, &h), TIPS_ENOTPOOL);
	cfg.flags = 0;
	unlink(path);

	/* a TIPS pool */
	struct tips_config tc;
	tips_config_init(&tc);
	tc.flags = TIPS_CREATE;
	tc.pool_size = 64ull << 20;
	struct tips_db *db;
	test_path(path, sizeof(path), dir, "pmdk-tipspool");
	if (tips_open(path, &tc, tips_index_find("tips-hash"), &db) == 0) {
		tips_close(&db);
		CHECK_RC(pmdk_hash_open(path, &cfg, &h), TIPS_ENOTPOOL);
	}
	unlink(path);

	/* a libpmemobj pool of another layout */
	test_path(path, sizeof(path), dir, "pmdk-layout");
	PMEMobjpool *pop = pmemobj_create(path, "someone-else", PMEMOBJ_MIN_POOL, 0600);
	REQUIRE(pop);
	pmemobj_close(pop);
	CHECK_RC(pmdk_hash_open(path, &cfg, &h), TIPS_EMISMATCH);
	CHECK(strstr(tips_errormsg(), "another layout") != NULL);
	unlink(path);

	/* our layout, a root of another size */
	test_path(path, sizeof(path), dir, "pmdk-root");
	pop = pmemobj_create(path, PMDK_HASH_LAYOUT, PMEMOBJ_MIN_POOL, 0600);
	REQUIRE(pop);
	REQUIRE(!OID_IS_NULL(pmemobj_root(pop, 100)));
	pmemobj_close(pop);
	CHECK_RC(pmdk_hash_open(path, &cfg, &h), TIPS_ECORRUPT);
	unlink(path);

	/* our layout, the right root size, a foreign magic */
	test_path(path, sizeof(path), dir, "pmdk-magic");
	pop = pmemobj_create(path, PMDK_HASH_LAYOUT, PMEMOBJ_MIN_POOL, 0600);
	REQUIRE(pop);
	PMEMoid root = pmemobj_root(pop, 32);
	REQUIRE(!OID_IS_NULL(root));
	uint64_t junk[4] = { 0x1234, 1024, 0, 0 };
	pmemobj_memcpy_persist(pop, pmemobj_direct(root), junk, sizeof(junk));
	pmemobj_close(pop);
	CHECK_RC(pmdk_hash_open(path, &cfg, &h), TIPS_ECORRUPT);
	CHECK(strstr(tips_errormsg(), "magic") != NULL);
	unlink(path);

	/* a pool whose root was never filled (creation interrupted) becomes a table */
	test_path(path, sizeof(path), dir, "pmdk-unfinished");
	pop = pmemobj_create(path, PMDK_HASH_LAYOUT, PMEMOBJ_MIN_POOL, 0600);
	REQUIRE(pop);
	pmemobj_close(pop);
	h = open_at(path, 0, 0, 1000);
	CHECK_RC(pmdk_hash_insert(h, "k", 1, "v", 1), 0);
	check_clean(h, 1);

	/* the leak check finds an object nobody links */
	pmdk_hash_close(&h);
	pop = pmemobj_open(path, PMDK_HASH_LAYOUT);
	REQUIRE(pop);
	REQUIRE(pmemobj_alloc(pop, NULL, 48, 2, NULL, NULL) == 0);
	pmemobj_close(pop);
	h = open_at(path, 0, 0, 0);
	struct pmdk_hash_report r;
	CHECK_RC(pmdk_hash_check(h, NULL, NULL, &r), TIPS_ECORRUPT);
	CHECK(r.leaked == 1 && r.objects == r.reachable + 1 && r.keys == 1);
	pmdk_hash_close(&h);
	unlink(path);
}

/* ---- threads ----------------------------------------------------------------------------- */

struct thr {
	struct pmdk_hash *h;
	unsigned id;
	uint64_t n;
	int errors;
};

/* Writer @id owns keys with k % 2 == id: inserts, updates (two lengths), removes the
 * odd ones; its keys' final state is known. */
static void *writer(void *p)
{
	struct thr *t = p;
	unsigned char k[8], v[24];
	for (uint64_t i = t->id; i < t->n; i += 2) {
		be64(k, i);
		memset(v, (int)i, sizeof(v));
		if (pmdk_hash_insert(t->h, k, 8, v, 8))
			t->errors++;
		if (pmdk_hash_update(t->h, k, 8, v, i % 3 ? 8 : 24))
			t->errors++;
		if (i % 4 == 1 && pmdk_hash_remove(t->h, k, 8))
			t->errors++;
	}
	return NULL;
}

/* A reader: every value found is whole (its bytes all equal to the key's low byte). */
static void *reader(void *p)
{
	struct thr *t = p;
	uint64_t s = 99 + t->id;
	unsigned char k[8], v[24];
	for (int j = 0; j < 40000; j++) {
		uint64_t i = rnd(&s) % t->n;
		be64(k, i);
		size_t vl = 0;
		int rc = pmdk_hash_lookup(t->h, k, 8, v, sizeof(v), &vl);
		if (rc == 0) {
			for (size_t b = 0; b < vl; b++)
				if (v[b] != (unsigned char)i)
					t->errors++;
			if (vl != 8 && vl != 24)
				t->errors++;
		} else if (rc != TIPS_ENOTFOUND) {
			t->errors++;
		}
	}
	return NULL;
}

/* Two of these fight over keys "x0".."x9": any code but the expected ones is wrong. */
static void *fighter(void *p)
{
	struct thr *t = p;
	uint64_t s = 7 + t->id;
	for (int j = 0; j < 5000; j++) {
		char k[2] = { 'x', (char)('0' + rnd(&s) % 10) };
		unsigned char v[32];
		size_t vl = 1 + rnd(&s) % 32;
		memset(v, 'f', sizeof(v));
		int rc;
		switch (rnd(&s) % 4) {
		case 0: rc = pmdk_hash_insert(t->h, k, 2, v, vl); break;
		case 1: rc = pmdk_hash_update(t->h, k, 2, v, vl); break;
		case 2: rc = pmdk_hash_put(t->h, k, 2, v, vl); break;
		default: rc = pmdk_hash_remove(t->h, k, 2); break;
		}
		if (rc && rc != TIPS_EKEYEXISTS && rc != TIPS_ENOTFOUND)
			t->errors++;
	}
	return NULL;
}

static void test_threads(const char *dir)
{
	char path[256];
	test_path(path, sizeof(path), dir, "pmdk-threads");
	struct pmdk_hash *h = open_at(path, PMDK_HASH_CREATE, 64 << 20, 1000);
	enum { N = 20000 };
	struct thr t[6];
	pthread_t tid[6];
	for (unsigned i = 0; i < 6; i++) {
		t[i] = (struct thr){ h, i % 2, N, 0 };
		void *(*fn)(void *) = i < 2 ? writer : i < 4 ? reader : fighter;
		REQUIRE(pthread_create(&tid[i], NULL, fn, &t[i]) == 0);
	}
	int errors = 0;
	for (unsigned i = 0; i < 6; i++) {
		pthread_join(tid[i], NULL);
		errors += t[i].errors;
	}
	CHECK(errors == 0);
	reopen(&h, path);
	uint64_t present = 0;
	for (uint64_t i = 0; i < N; i++) {
		unsigned char k[8], v[24];
		size_t vl = 0;
		be64(k, i);
		int rc = pmdk_hash_lookup(h, k, 8, v, sizeof(v), &vl);
		if (i % 4 == 1) {
			CHECK(rc == TIPS_ENOTFOUND);
		} else {
			present++;
			CHECK(rc == 0 && vl == (i % 3 ? 8u : 24u) && v[0] == (unsigned char)i);
		}
	}
	for (int x = 0; x < 10; x++) {
		char k[2] = { 'x', (char)('0' + x) };
		if (pmdk_hash_lookup(h, k, 2, NULL, 0, NULL) != TIPS_ENOTFOUND)
			present++;
	}
	check_clean(h, present);
	pmdk_hash_close(&h);
	unlink(path);
}

/* ---- optimistic lookups against writers ----------------------------------------------- */

#define HOT_LEN 4096
#define STABLE_KEYS 64
#define OPT_LOOKUPS 200000 /* at least, and for at least OPT_ROUNDS of the churner */
#define OPT_ROUNDS 20000

struct churn {
	struct pmdk_hash *h;
	_Atomic int started, stop;
	_Atomic unsigned rounds;
	int errors;
};

/* Overwrites "hot" in place (a fill byte per round), and removes and inserts again
 * keys that share the stable keys' chains, so that freed nodes are reused meanwhile. */
static void *churner(void *p)
{
	struct churn *c = p;
	unsigned char v[HOT_LEN], k[8];
	while (!c->stop) {
		unsigned r = ++c->rounds;
		memset(v, (int)(r & 0xff), sizeof(v));
		if (pmdk_hash_update(c->h, "hot", 3, v, sizeof(v)))
			c->errors++;
		be64(k, 1000 + r % 512);
		if (pmdk_hash_remove(c->h, k, 8) || pmdk_hash_insert(c->h, k, 8, v, 8 + r % 64))
			c->errors++;
		c->started = 1;
	}
	return NULL;
}

/* What a reader must see while the churner runs: "hot" whole (one fill byte), and each
 * stable key present with its own value; in a table of 1024 chains, so that the churned
 * keys share the stable keys' chains and stripes. */
static void test_optimistic(const char *dir)
{
	char path[256];
	test_path(path, sizeof(path), dir, "pmdk-optimistic");
	struct pmdk_hash *h = open_at(path, PMDK_HASH_CREATE, 64 << 20, 1000);
	unsigned char v[HOT_LEN], k[8];
	memset(v, 0, sizeof(v));
	REQUIRE(pmdk_hash_insert(h, "hot", 3, v, sizeof(v)) == 0);
	for (uint64_t i = 0; i < STABLE_KEYS; i++) {
		be64(k, i);
		REQUIRE(pmdk_hash_insert(h, k, 8, k, 8) == 0);
	}
	for (uint64_t i = 1000; i < 1512; i++) {
		be64(k, i);
		REQUIRE(pmdk_hash_insert(h, k, 8, k, 8) == 0);
	}
	struct churn c = { h, 0, 0, 0, 0 };
	pthread_t tid;
	REQUIRE(pthread_create(&tid, NULL, churner, &c) == 0);
	while (!c.started)
		sched_yield();
	size_t torn = 0, lost = 0, n;
	for (n = 0; n < OPT_LOOKUPS || c.rounds < OPT_ROUNDS; n++) {
		size_t vl = 0;
		if (n % 2) {
			int rc = pmdk_hash_lookup(h, "hot", 3, v, sizeof(v), &vl);
			int whole = rc == 0 && vl == HOT_LEN;
			for (size_t i = 1; whole && i < HOT_LEN; i++)
				whole = v[i] == v[0];
			torn += !whole;
		} else {
			unsigned char got[8];
			be64(k, n / 2 % STABLE_KEYS);
			int rc = pmdk_hash_lookup(h, k, 8, got, sizeof(got), &vl);
			lost += rc != 0 || vl != 8 || memcmp(got, k, 8) != 0;
		}
	}
	c.stop = 1;
	pthread_join(tid, NULL);
	CHECK(c.errors == 0);
	CHECK(torn == 0);
	CHECK(lost == 0);
	printf("  optimistic lookups: %zu against %u churn rounds: %zu torn, %zu stable keys "
	       "lost\n", n, (unsigned)c.rounds, torn, lost);
	check_clean(h, 1 + STABLE_KEYS + 512);
	pmdk_hash_close(&h);
	unlink(path);
}

int main(void)
{
	pmdk_hash_force_flushes();
	const char *dir = "/dev/shm";
	test_codes(dir);
	test_model(dir);
	test_full(dir);
	test_foreign(dir);
	test_threads(dir);
	test_optimistic(dir);
	test_prefault(dir);
	return test_finish("test_pmdk_hash");
}
