/*
 * test_lcache.c - unit test of ListDB's lookup caches (src/listdb/lcache.c).
 *
 * Entries are built in malloc'd DRAM with the layout of entry.h; the caches only read
 * klen, lsn, height and the key. Checks: hash insert/lookup, FIFO overwrite on a
 * collision (one slot), forget clears only its own entry; second-chance floor (and the
 * element above it) at the boundaries, duplicates, the interpolation buckets against a
 * linear search, SIZE eviction, forget, disabled (NULL) caches; and a small
 * concurrent run - one writer adding, publishing, forgetting and freeing entries (after
 * a grace period, like the garbage collector) while two readers call floor inside read
 * sections and read the keys they get - meant for ASan and TSan builds.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "listdb/lcache.h"
#include "test_util.h"
#include "util/grace.h"

/* An entry with an 8-byte big-endian key @k (so numeric order is key order). */
static struct ld_entry *mk(uint64_t k, uint64_t lsn, unsigned height)
{
	struct ld_entry *e = calloc(1, ld_entry_size(height, 8, 8));
	REQUIRE(e);
	e->lsn = lsn;
	e->klen = 8;
	e->vlen = 8;
	e->op = LD_OP_PUT;
	e->height = (uint8_t)height;
	be64((unsigned char *)ld_key(e), k);
	return e;
}

static uint64_t key_of(const struct ld_entry *e)
{
	uint64_t k = 0;
	for (int i = 0; i < 8; i++)
		k = k << 8 | ld_key(e)[i];
	return k;
}

/* floor for the 8-byte key @k, inside a read section. */
static struct ld_entry *floor_of(struct ld_scache *c, uint64_t k)
{
	unsigned char b[8];
	be64(b, k);
	grace_read_enter();
	struct ld_entry *e = ld_scache_floor(c, b, 8, NULL);
	grace_read_exit();
	return e;
}

static void test_hcache(void)
{
	CHECK(ld_hcache_create(0) == NULL);
	struct ld_entry *a = mk(1, 10, 1), *b = mk(2, 11, 1), *a2 = mk(1, 12, 1);
	unsigned char k1[8], k2[8], k3[8];
	be64(k1, 1);
	be64(k2, 2);
	be64(k3, 3);

	struct ld_hcache *h = ld_hcache_create(1024);
	REQUIRE(h);
	CHECK(ld_hcache_slots(h) == 1024);
	CHECK(ld_hcache_lookup(h, k1, 8) == NULL);
	ld_hcache_insert(h, a);
	ld_hcache_insert(h, b);
	CHECK(ld_hcache_lookup(h, k1, 8) == a);
	CHECK(ld_hcache_lookup(h, k2, 8) == b);
	CHECK(ld_hcache_lookup(h, k3, 8) == NULL);
	CHECK(ld_hcache_lookup(h, k1, 7) == NULL); /* a prefix is another key */
	ld_hcache_insert(h, a2); /* newer version of key 1 replaces a */
	CHECK(ld_hcache_lookup(h, k1, 8) == a2);
	ld_hcache_forget(h, a); /* no longer cached: must not clear a2 */
	CHECK(ld_hcache_lookup(h, k1, 8) == a2);
	ld_hcache_forget(h, a2);
	CHECK(ld_hcache_lookup(h, k1, 8) == NULL);
	CHECK(ld_hcache_lookup(h, k2, 8) == b);
	ld_hcache_destroy(h);

	/* One slot: every insert collides and overwrites (FIFO). */
	h = ld_hcache_create(1);
	REQUIRE(h);
	ld_hcache_insert(h, a);
	CHECK(ld_hcache_lookup(h, k1, 8) == a);
	ld_hcache_insert(h, b);
	CHECK(ld_hcache_lookup(h, k1, 8) == NULL); /* slot holds b: key mismatch */
	CHECK(ld_hcache_lookup(h, k2, 8) == b);
	ld_hcache_forget(h, a); /* slot holds b, not a */
	CHECK(ld_hcache_lookup(h, k2, 8) == b);
	ld_hcache_forget(h, b);
	CHECK(ld_hcache_lookup(h, k2, 8) == NULL);
	ld_hcache_destroy(h);

	/* Keys of other lengths go through the general hash. */
	h = ld_hcache_create(97);
	REQUIRE(h);
	struct ld_entry *s = calloc(1, ld_entry_size(2, 13, 0));
	REQUIRE(s);
	s->klen = 13;
	s->height = 2;
	memcpy((unsigned char *)ld_key(s), "hello, world!", 13);
	ld_hcache_insert(h, s);
	CHECK(ld_hcache_lookup(h, "hello, world!", 13) == s);
	CHECK(ld_hcache_lookup(h, "hello, world?", 13) == NULL);
	ld_hcache_destroy(h);
	free(s);

	/* Disabled cache. */
	ld_hcache_insert(NULL, a);
	ld_hcache_forget(NULL, a);
	CHECK(ld_hcache_lookup(NULL, k1, 8) == NULL);
	CHECK(ld_hcache_slots(NULL) == 0);
	ld_hcache_destroy(NULL);
	free(a);
	free(b);
	free(a2);
}

static bool dead_if_odd(const struct ld_entry *e, void *arg)
{
	(void)arg;
	return key_of(e) & 1;
}

static bool dead_if_is(const struct ld_entry *e, void *arg)
{
	return e == arg;
}

/* The published elements of @c, in key order, found by walking floor down from the
 * top (keys must be distinct); returns how many, at most @max. */
static size_t cached(struct ld_scache *c, struct ld_entry **out, size_t max)
{
	struct ld_entry *tmp[64];
	size_t n = 0;
	uint64_t k = UINT64_MAX;
	struct ld_entry *e;
	while (n < 64 && (e = floor_of(c, k)) != NULL) {
		tmp[n++] = e;
		k = key_of(e);
	}
	size_t m = n < max ? n : max;
	for (size_t i = 0; i < m; i++)
		out[i] = tmp[n - 1 - i];
	return n;
}

static void test_scache_floor(void)
{
	CHECK(ld_scache_create(0) == NULL);
	struct ld_scache *c = ld_scache_create(100);
	REQUIRE(c);
	CHECK(ld_scache_size(c) == 0);
	CHECK(floor_of(c, 50) == NULL);

	/* Keys 10, 20, ..., 90, offered out of order. */
	struct ld_entry *e[10];
	for (int i = 1; i <= 9; i++)
		e[i] = mk(10u * i, 100 + i, 1 + i % 3);
	for (int i = 9; i >= 1; i--)
		ld_scache_add(c, e[i]);
	CHECK(ld_scache_size(c) == 0); /* nothing visible before publish */
	CHECK(floor_of(c, 50) == NULL);
	ld_scache_publish(c);
	CHECK(ld_scache_size(c) == 9);
	CHECK(floor_of(c, 5) == NULL);    /* smaller than all */
	CHECK(floor_of(c, 10) == NULL);   /* equal to the smallest: strictly smaller */
	CHECK(floor_of(c, 11) == e[1]);
	CHECK(floor_of(c, 50) == e[4]);   /* equal key: the one before */
	CHECK(floor_of(c, 55) == e[5]);
	CHECK(floor_of(c, 90) == e[8]);
	CHECK(floor_of(c, 1000) == e[9]); /* larger than all: the last */
	unsigned char k9[9] = { 0 };      /* a key sorts before its longer extensions */
	memcpy(k9, ld_key(e[2]), 8);
	grace_read_enter();
	CHECK(ld_scache_floor(c, k9, 7, NULL) == NULL); /* 7 zero bytes: before every key */
	CHECK(ld_scache_floor(c, k9, 8, NULL) == e[1]);
	CHECK(ld_scache_floor(c, k9, 9, NULL) == e[2]);
	/* above: the cached element after the floor (key >= the search key) */
	struct ld_entry *up;
	unsigned char kb[8];
	be64(kb, 50);
	CHECK(ld_scache_floor(c, kb, 8, &up) == e[4] && up == e[5]);
	be64(kb, 5);
	CHECK(ld_scache_floor(c, kb, 8, &up) == NULL && up == e[1]);
	be64(kb, 1000);
	CHECK(ld_scache_floor(c, kb, 8, &up) == e[9] && up == NULL);
	CHECK(ld_scache_floor(c, k9, 9, &up) == e[2] && up == e[3]);
	grace_read_exit();

	/* Duplicate addresses are dropped; another version of a key is kept. */
	ld_scache_add(c, e[3]);
	ld_scache_add(c, e[3]);
	struct ld_entry *v30 = mk(30, 50, 1); /* older version of 30: sorts after e[3] */
	ld_scache_add(c, v30);
	ld_scache_publish(c);
	CHECK(ld_scache_size(c) == 10);
	CHECK(floor_of(c, 31) == v30); /* the last of the key-30 run */
	CHECK(floor_of(c, 30) == e[2]);
	ld_scache_publish(c); /* nothing offered: no change */
	CHECK(ld_scache_size(c) == 10);

	/* forget */
	ld_scache_forget(c, dead_if_is, v30);
	CHECK(ld_scache_size(c) == 9);
	CHECK(floor_of(c, 31) == e[3]);
	ld_scache_forget(c, dead_if_is, v30); /* nothing to drop */
	CHECK(ld_scache_size(c) == 9);
	struct ld_entry *o1 = mk(35, 1, 5), *o2 = mk(36, 1, 5);
	ld_scache_add(c, o1);
	ld_scache_add(c, o2);
	ld_scache_forget(c, dead_if_odd, NULL); /* filters the offers too: o1 (35) dies */
	CHECK(ld_scache_size(c) == 10);
	CHECK(floor_of(c, 37) == o2);
	CHECK(floor_of(c, 36) == e[3]);
	ld_scache_forget(c, dead_if_is, e[1]);
	CHECK(floor_of(c, 15) == NULL);
	CHECK(ld_scache_size(c) == 9);

	/* Two elements whose first words are more than 2^63 apart: one bucket of the
	 * interpolation table per word needs a shift of 63, never 64 (undefined; on x86
	 * it shifted by 0 and asked malloc for about 2^63 bytes). */
	struct ld_scache *c2 = ld_scache_create(8);
	REQUIRE(c2);
	struct ld_entry *lo_e = mk(0x0100000000000000ull, 1, 3), *hi_e = mk(0xff00000000000000ull, 2, 3);
	ld_scache_add(c2, hi_e);
	ld_scache_add(c2, lo_e);
	ld_scache_publish(c2);
	CHECK(ld_scache_size(c2) == 2);
	CHECK(floor_of(c2, 0x8000000000000000ull) == lo_e);
	CHECK(floor_of(c2, UINT64_MAX) == hi_e);
	CHECK(floor_of(c2, 1) == NULL);
	ld_scache_destroy(c2);
	free(lo_e);
	free(hi_e);

	/* Disabled cache. */
	ld_scache_add(NULL, e[1]);
	ld_scache_publish(NULL);
	ld_scache_forget(NULL, dead_if_odd, NULL);
	CHECK(ld_scache_floor(NULL, "k", 1, NULL) == NULL);
	CHECK(ld_scache_size(NULL) == 0);
	ld_scache_destroy(NULL);

	ld_scache_destroy(c);
	free(v30);
	free(o1);
	free(o2);
	for (int i = 1; i <= 9; i++)
		free(e[i]);
}

/* An entry with key @kb (@kl bytes). */
static struct ld_entry *mkk(const unsigned char *kb, unsigned kl, uint64_t lsn, unsigned height)
{
	struct ld_entry *e = calloc(1, ld_entry_size(height, kl, 8));
	REQUIRE(e);
	e->lsn = lsn;
	e->klen = kl;
	e->vlen = 8;
	e->op = LD_OP_PUT;
	e->height = (uint8_t)height;
	memcpy((unsigned char *)ld_key(e), kb, kl);
	return e;
}

static int by_entry_order(const void *a, const void *b)
{
	return ld_cmp_entries(*(struct ld_entry *const *)a, *(struct ld_entry *const *)b);
}

/*
 * The interpolation buckets against a linear search: for keys spread evenly, keys
 * crowded into a few buckets with outliers far away, and keys of 1 to 12 bytes that
 * share their first 8 bytes (equal words: the element's key decides), floor and above
 * of every key, its neighbours and random keys are those of a scan of the sorted set.
 */
static void test_scache_buckets(void)
{
	enum { N = 3000 };
	uint64_t seed = 77;
	for (int dist = 0; dist < 3; dist++) {
		struct ld_scache *c = ld_scache_create(N);
		REQUIRE(c);
		struct ld_entry *e[N];
		unsigned char kb[12];
		for (int i = 0; i < N; i++) {
			unsigned kl = 8;
			uint64_t w = rnd(&seed);
			if (dist == 1) /* crowded: 3 outliers, the rest within 2^12 */
				w = i < 3 ? rnd(&seed) : 0x4141414141400000ull + (w & 0xfff);
			if (dist == 2) { /* 1..12 bytes over 16 distinct words */
				kl = 1 + (unsigned)(w % 12);
				w = 0x6b00000000000000ull | (w >> 60) << 40;
			}
			be64(kb, w);
			for (unsigned j = 8; j < 12; j++)
				kb[j] = (unsigned char)rnd(&seed);
			e[i] = mkk(kb, kl, (uint64_t)i + 1, 3);
			ld_scache_add(c, e[i]);
		}
		ld_scache_publish(c);
		CHECK(ld_scache_size(c) == N);
		struct ld_entry *sorted[N];
		memcpy(sorted, e, sizeof(e));
		qsort(sorted, N, sizeof(sorted[0]), by_entry_order);
		for (int q = 0; q < 3 * N; q++) {
			const struct ld_entry *base = e[q % N];
			unsigned kl = base->klen;
			memcpy(kb, ld_key(base), kl);
			if (q >= N && q < 2 * N) { /* a neighbour: last byte +-1, or one byte more */
				if (q & 1)
					kb[kl - 1] = (unsigned char)(kb[kl - 1] + (q & 2 ? 1 : -1));
				else if (kl < 12)
					kb[kl++] = 0;
			} else if (q >= 2 * N) { /* anywhere */
				kl = 8;
				be64(kb, dist == 1 && q & 1 ? 0x4141414141400000ull + rnd(&seed) % 0x2000
							    : rnd(&seed));
			}
			size_t lo = 0; /* first element with key >= kb */
			while (lo < N && ld_cmp_entry_key(sorted[lo], kb, kl) < 0)
				lo++;
			struct ld_entry *up = (struct ld_entry *)1;
			grace_read_enter();
			struct ld_entry *f = ld_scache_floor(c, kb, kl, &up);
			grace_read_exit();
			CHECK(f == (lo ? sorted[lo - 1] : NULL));
			CHECK(up == (lo < N ? sorted[lo] : NULL));
		}
		ld_scache_destroy(c);
		for (int i = 0; i < N; i++)
			free(e[i]);
	}
}

static void test_scache_evict(void)
{
	/* Capacity 4 keeps the 4 tallest, in key order. */
	struct ld_scache *c = ld_scache_create(4);
	REQUIRE(c);
	static const unsigned hts[9] = { 0, 1, 5, 1, 3, 2, 7, 1, 4 }; /* f[1..8] */
	struct ld_entry *f[9], *got[64];
	for (int i = 1; i <= 8; i++) {
		f[i] = mk(10u * i, 200 + i, hts[i]);
		ld_scache_add(c, f[i]);
	}
	ld_scache_publish(c);
	CHECK(ld_scache_size(c) == 4); /* heights 5, 3, 7, 4: keys 20, 40, 60, 80 */
	CHECK(cached(c, got, 64) == 4);
	CHECK(got[0] == f[2] && got[1] == f[4] && got[2] == f[6] && got[3] == f[8]);
	CHECK(floor_of(c, 55) == f[4]); /* 50 (height 2) was evicted */

	/* A taller newcomer evicts the shortest (40, height 3). */
	struct ld_entry *t = mk(5, 300, 9);
	ld_scache_add(c, t);
	ld_scache_publish(c);
	CHECK(ld_scache_size(c) == 4);
	CHECK(cached(c, got, 64) == 4);
	CHECK(got[0] == t && got[1] == f[2] && got[2] == f[6] && got[3] == f[8]);

	/* Ties at the cut: 20 more of height 9 -> exactly 4 of height 9 stay, spread out. */
	struct ld_entry *tie[20];
	for (int i = 0; i < 20; i++) {
		tie[i] = mk(1000 + (uint64_t)i, 1, 9);
		ld_scache_add(c, tie[i]);
	}
	ld_scache_publish(c);
	CHECK(ld_scache_size(c) == 4);
	size_t n = cached(c, got, 64);
	CHECK(n == 4);
	for (size_t i = 0; i < n && i < 4; i++)
		CHECK(got[i]->height == 9 && (i == 0 || key_of(got[i - 1]) < key_of(got[i])));
	CHECK(key_of(got[3]) >= 1010); /* evenly spaced, not the first four */
	ld_scache_destroy(c);

	/* Many offers without a publish: the buffer stays bounded, the tallest still win. */
	c = ld_scache_create(8);
	REQUIRE(c);
	struct ld_entry *many[1000];
	for (int i = 0; i < 1000; i++) {
		many[i] = mk((uint64_t)i, 1, i % 97 == 0 ? 12 : 1 + i % 5);
		ld_scache_add(c, many[i]);
	}
	ld_scache_publish(c);
	CHECK(ld_scache_size(c) == 8);
	n = cached(c, got, 64);
	CHECK(n == 8);
	for (size_t i = 0; i < n && i < 8; i++)
		CHECK(got[i]->height == 12); /* 8 of the 11 of height 12 */
	ld_scache_forget(c, dead_if_odd, NULL);
	n = cached(c, got, 64);
	CHECK(n == ld_scache_size(c));
	for (size_t i = 0; i < n && i < 8; i++)
		CHECK(!(key_of(got[i]) & 1));
	ld_scache_destroy(c);

	for (int i = 0; i < 1000; i++)
		free(many[i]);
	for (int i = 0; i < 20; i++)
		free(tie[i]);
	for (int i = 1; i <= 8; i++)
		free(f[i]);
	free(t);
}

/* ---- concurrent: one writer (this thread), two readers ---------------------------- */

#define CC_ROUNDS 1000
#define CC_BATCH 32
#define CC_LIVE 4     /* batches alive at once; the oldest is forgotten and freed */
#define CC_KEYS 2048  /* key space, small enough for hash hits */

struct cc {
	struct ld_scache *sc;
	struct ld_hcache *hc;
	atomic_bool stop;
	atomic_int errors;
	uint64_t seed;
	long floors, hits;
};

static void *cc_reader(void *arg)
{
	struct cc *cc = arg;
	uint64_t s = cc->seed;
	unsigned char k[8];
	while (!atomic_load_explicit(&cc->stop, memory_order_relaxed)) {
		uint64_t key = rnd(&s) % (CC_KEYS + 16);
		be64(k, key);
		grace_read_enter();
		struct ld_entry *up;
		struct ld_entry *e = ld_scache_floor(cc->sc, k, 8, &up);
		if (e && !(key_of(e) < key && e->klen == 8 && e->height >= 1))
			atomic_fetch_add(&cc->errors, 1);
		if (up && !(key_of(up) >= key && up->klen == 8))
			atomic_fetch_add(&cc->errors, 1);
		cc->floors++;
		e = ld_hcache_lookup(cc->hc, k, 8);
		if (e) {
			cc->hits++;
			if (key_of(e) != key || ld_val(e)[0] != (unsigned char)key)
				atomic_fetch_add(&cc->errors, 1);
		}
		grace_read_exit();
	}
	return NULL;
}

static bool cc_dead(const struct ld_entry *e, void *arg)
{
	return e->lsn == *(const uint64_t *)arg;
}

static void test_concurrent(void)
{
	struct cc cc = { .sc = ld_scache_create(64), .hc = ld_hcache_create(256) };
	REQUIRE(cc.sc && cc.hc);
	struct cc rd[2] = { cc, cc };
	rd[0].seed = 0x1234567;
	rd[1].seed = 0x89abcdef;
	pthread_t th[2];
	for (int i = 0; i < 2; i++)
		REQUIRE(pthread_create(&th[i], NULL, cc_reader, &rd[i]) == 0);

	struct ld_entry *live[CC_LIVE][CC_BATCH] = { { 0 } };
	uint64_t s = 42;
	for (uint64_t r = 1; r <= CC_ROUNDS; r++) {
		struct ld_entry **b = live[r % CC_LIVE];
		if (b[0]) { /* what the garbage collector does before freeing a chunk */
			uint64_t gone = b[0]->lsn;
			ld_scache_forget(cc.sc, cc_dead, &gone);
			for (int i = 0; i < CC_BATCH; i++)
				ld_hcache_forget(cc.hc, b[i]);
			grace_wait();
			for (int i = 0; i < CC_BATCH; i++)
				free(b[i]);
		}
		for (int i = 0; i < CC_BATCH; i++) {
			uint64_t key = rnd(&s) % CC_KEYS;
			b[i] = mk(key, r, 1 + (unsigned)(rnd(&s) % 8));
			((unsigned char *)ld_val(b[i]))[0] = (unsigned char)key;
			ld_hcache_insert(cc.hc, b[i]);
			ld_scache_add(cc.sc, b[i]);
		}
		ld_scache_publish(cc.sc);
		CHECK(ld_scache_size(cc.sc) <= 64);
	}
	atomic_store(&rd[0].stop, true);
	atomic_store(&rd[1].stop, true);
	for (int i = 0; i < 2; i++)
		pthread_join(th[i], NULL);
	CHECK(rd[0].errors == 0 && rd[1].errors == 0);
	CHECK(rd[0].floors > 0 && rd[1].floors > 0);
	printf("concurrent: %d rounds, floors %ld + %ld, hash hits %ld + %ld\n", CC_ROUNDS,
	       rd[0].floors, rd[1].floors, rd[0].hits, rd[1].hits);
	ld_scache_destroy(cc.sc);
	ld_hcache_destroy(cc.hc);
	for (int j = 0; j < CC_LIVE; j++)
		for (int i = 0; i < CC_BATCH; i++)
			free(live[j][i]);
	grace_free_barrier(); /* old snapshots */
}

int main(void)
{
	test_hcache();
	test_scache_floor();
	test_scache_buckets();
	test_scache_evict();
	test_concurrent();
	return test_finish("test_lcache");
}
