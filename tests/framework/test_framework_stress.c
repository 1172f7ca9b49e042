/*
 * test_framework_stress.c - concurrent writers, readers and scanners on the tips-* index
 * named by argv[1] (default tips-hash),
 * checking the facade's guarantees while replay, gc and reclamation run underneath:
 *  - a lookup returns a value some write of that key produced, never older than the
 *    last write completed before the lookup began (versions only move forward);
 *  - absent is returned only if a delete could be the latest write at that time;
 *  - scans return keys in strictly increasing order, each with a value written for
 *    it, and contain every key that was present throughout the scan;
 *  - handoff: a write completed in one thread is seen by a lookup another thread starts
 *    after it, whether the lookup is answered by the cache or goes straight to the
 *    index (when replay has caught up, lookups skip the cache).
 * Each key belongs to one writer, which gives it versions 1, 2, 3...; whether version v
 * deletes the key is a fixed function of (key, v), so checkers can tell from two
 * version numbers whether a delete happened between them.
 * argv[2], the key length (8 to MAX_KLEN, default 8): key k is k as 8 big-endian
 * bytes, then a fixed filler, so keys order as their numbers at any length. Keys that
 * are not 8 bytes take the indexes' general compare paths (memcmp, not one word).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sched.h>
#include <time.h>

#include "test_util.h"

#define KEYS 4096u
#define WRITERS 2
#define READERS 2
#define RUN_SECONDS 3
#define MAX_KLEN 64u

static size_t key_len = 8; /* every key's length (argv[2]) */

static struct tips_db *db;
static _Atomic uint64_t completed[KEYS]; /* last version whose write returned */
static atomic_int stop;
static _Atomic uint64_t lookups, scans, writes;

static bool is_delete(uint64_t key, uint64_t version)
{
	return version > 1 && (key * 2654435761u + version * 40503u) % 5 == 0;
}

/* Is there a delete among versions [lo, hi]? */
static bool delete_between(uint64_t key, uint64_t lo, uint64_t hi)
{
	for (uint64_t v = lo; v <= hi; v++)
		if (is_delete(key, v))
			return true;
	return false;
}

static void key_bytes(uint64_t k, unsigned char out[MAX_KLEN])
{
	for (int i = 7; i >= 0; i--, k >>= 8)
		out[i] = (unsigned char)k;
	for (size_t i = 8; i < key_len; i++)
		out[i] = (unsigned char)('a' + i % 26);
}

static uint64_t key_value(const unsigned char *k)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v = v << 8 | k[i];
	return v;
}

static uint64_t value_of(uint64_t key, uint64_t version)
{
	return key << 32 | version;
}

static void *writer(void *arg)
{
	unsigned id = (unsigned)(uintptr_t)arg;
	unsigned seed = id + 1;
	while (!atomic_load(&stop)) {
		uint64_t k = (uint64_t)rand_r(&seed) % KEYS;
		k = k - k % WRITERS + id;
		if (k >= KEYS)
			continue;
		uint64_t v = atomic_load(&completed[k]) + 1;
		unsigned char key[MAX_KLEN];
		key_bytes(k, key);
		uint64_t val = value_of(k, v);
		int rc = is_delete(k, v) ? tips_remove(db, key, key_len)
					 : tips_put(db, key, key_len, &val, 8);
		/* A delete of an absent key (previous version a delete too) is refused. */
		CHECK(rc == 0 || (rc == TIPS_ENOTFOUND && is_delete(k, v) && is_delete(k, v - 1)));
		atomic_store(&completed[k], v);
		atomic_fetch_add(&writes, 1);
	}
	return NULL;
}

/* Checks one observation of @k: @found (and @val) seen between c0 and c1. */
static void check_observation(uint64_t k, bool found, uint64_t val, uint64_t c0, uint64_t c1)
{
	if (found) {
		uint64_t ver = val & 0xffffffffu;
		CHECK(val >> 32 == k);
		CHECK(ver >= c0 && ver <= c1 + 1 && ver >= 1);
		CHECK(!is_delete(k, ver));
		if (val >> 32 != k || ver < c0 || ver > c1 + 1)
			fprintf(stderr, "key %llu: value %#llx, completed %llu..%llu\n",
				(unsigned long long)k, (unsigned long long)val,
				(unsigned long long)c0, (unsigned long long)c1);
	} else {
		/* Absent: never written yet, or a delete may be the latest write. */
		bool ok = c0 == 0 || delete_between(k, c0, c1 + 1);
		CHECK(ok);
		if (!ok)
			fprintf(stderr, "key %llu: absent, completed %llu..%llu\n",
				(unsigned long long)k, (unsigned long long)c0,
				(unsigned long long)c1);
	}
}

static void *reader(void *arg)
{
	unsigned seed = (unsigned)(uintptr_t)arg * 77 + 3;
	while (!atomic_load(&stop)) {
		uint64_t k = (uint64_t)rand_r(&seed) % KEYS;
		unsigned char key[MAX_KLEN];
		key_bytes(k, key);
		uint64_t c0 = atomic_load(&completed[k]), val = 0;
		size_t vlen = 0;
		int rc = tips_get(db, key, key_len, &val, 8, &vlen);
		uint64_t c1 = atomic_load(&completed[k]);
		CHECK(rc == 0 || rc == TIPS_ENOTFOUND);
		CHECK(rc != 0 || vlen == 8);
		check_observation(k, rc == 0, val, c0, c1);
		atomic_fetch_add(&lookups, 1);
	}
	return NULL;
}

struct scan_result {
	uint64_t keys[64], vals[64];
	size_t n;
	bool ordered;
};

static int scan_cb(const void *key, size_t klen, const void *val, size_t vlen, void *arg)
{
	struct scan_result *r = arg;
	CHECK(klen == key_len && vlen == 8);
	uint64_t k = key_value(key);
	if (r->n && k <= r->keys[r->n - 1])
		r->ordered = false;
	r->keys[r->n] = k;
	memcpy(&r->vals[r->n], val, 8);
	r->n++;
	return 0;
}

static void *scanner(void *arg)
{
	unsigned seed = 999;
	static uint64_t c0[KEYS];
	while (!atomic_load(&stop)) {
		uint64_t start = (uint64_t)rand_r(&seed) % KEYS;
		size_t count = 1 + (size_t)rand_r(&seed) % 64;
		for (uint64_t k = start; k < KEYS; k++)
			c0[k] = atomic_load(&completed[k]);
		struct scan_result r = { .n = 0, .ordered = true };
		unsigned char key[MAX_KLEN];
		key_bytes(start, key);
		long n = tips_scan(db, key, key_len, count, scan_cb, &r);
		CHECK(n == (long)r.n && r.n <= count);
		CHECK(r.ordered);
		size_t j = 0;
		uint64_t last = r.n == count ? r.keys[r.n - 1] : KEYS - 1;
		for (uint64_t k = start; k <= last && k < KEYS; k++) {
			uint64_t c1 = atomic_load(&completed[k]);
			bool found = j < r.n && r.keys[j] == k;
			/* Present throughout: written before, no delete until after the scan. */
			bool must = c0[k] > 0 && !delete_between(k, c0[k], c1 + 1);
			if (must && !found)
				fprintf(stderr, "scan from %llu: key %llu missing (versions %llu..%llu)\n",
					(unsigned long long)start, (unsigned long long)k,
					(unsigned long long)c0[k], (unsigned long long)c1);
			CHECK(found || !must);
			if (found)
				check_observation(k, true, r.vals[j++], c0[k], c1);
		}
		CHECK(j == r.n); /* no key outside [start, last] */
		atomic_fetch_add(&scans, 1);
	}
	return NULL;
}

/* Handoff: the writer publishes the version it completed; the reader waits for it,
 * then looks up and must see that version (or a newer one). */
#define HANDOFF_ROUNDS 20000
static _Atomic uint64_t handed;
static _Atomic uint64_t looked; /* the last version the reader has looked up */

static void *handoff_reader(void *arg)
{
	unsigned char key[MAX_KLEN];
	key_bytes(KEYS + 1, key);
	for (uint64_t v = 1; v <= HANDOFF_ROUNDS; v++) {
		WAIT_UNTIL(atomic_load(&handed) >= v, "the writer's hand-off");
		uint64_t got = 0;
		size_t vlen;
		int rc = tips_get(db, key, key_len, &got, 8, &vlen);
		atomic_store(&looked, rc == 0 && got >= v ? v : HANDOFF_ROUNDS);
		CHECK(rc == 0 && got >= v);
		if (rc != 0 || got < v) {
			fprintf(stderr, "handoff: wrote %llu, read %llu (rc %d)\n",
				(unsigned long long)v, (unsigned long long)got, rc);
			break;
		}
	}
	return NULL;
}

static void handoff(void)
{
	pthread_t r;
	unsigned char key[MAX_KLEN];
	key_bytes(KEYS + 1, key);
	struct tips_stats st0;
	tips_stats(db, &st0);
	REQUIRE(pthread_create(&r, NULL, handoff_reader, NULL) == 0);
	for (uint64_t v = 1; v <= HANDOFF_ROUNDS; v++) {
		CHECK_RC(tips_put(db, key, key_len, &v, 8), 0);
		bool caught_up = v % 100 == 0;
		if (caught_up) { /* let replay catch up: the lookup then skips the cache */
			struct tips_stats st;
			WAIT_UNTIL((tips_stats(db, &st), st.cache_unapplied == 0),
				   "replay to catch up");
		}
		atomic_store(&handed, v);
		if (caught_up) /* no write until that lookup is done: it must skip the cache */
			WAIT_UNTIL(atomic_load(&looked) >= v, "the reader's lookup");
	}
	pthread_join(r, NULL);
	struct tips_stats st;
	tips_stats(db, &st);
	/* Both read paths ran during the handoff: lookups through the cache (the writer's
	 * entry not yet applied), which count as hits or misses, and lookups sent straight
	 * to the index (at least every hundredth, after replay caught up), which are not
	 * counted: the reader's HANDOFF_ROUNDS lookups outnumber the counted ones. */
	uint64_t through_cache = st.cache_hits + st.cache_misses -
				 (st0.cache_hits + st0.cache_misses);
	CHECK(through_cache > 0);
	CHECK(through_cache <= HANDOFF_ROUNDS - HANDOFF_ROUNDS / 100);
	fprintf(stderr, "handoff: %u rounds; %llu lookups through the cache, %llu straight "
		"to the index\n", HANDOFF_ROUNDS, (unsigned long long)through_cache,
		(unsigned long long)(HANDOFF_ROUNDS - through_cache));
}

int main(int argc, char **argv)
{
	char path[256];
	test_path(path, sizeof(path), "/dev/shm", "fwstress");
	struct tips_config cfg;
	tips_config_init(&cfg);
	cfg.flags = TIPS_CREATE;
	cfg.pool_size = 64ull << 20;
	cfg.expected_keys = KEYS;
	cfg.cache_percent = 10; /* a small cache: gc and capacity waits run often */
	const char *name = argc > 1 ? argv[1] : "tips-hash";
	if (argc > 2)
		key_len = strtoul(argv[2], NULL, 10);
	REQUIRE(key_len >= 8 && key_len <= MAX_KLEN);
	const struct tips_index_ops *ops = tips_index_find(name);
	if (!ops)
		fprintf(stderr, "no index named %s\n", name);
	REQUIRE(ops != NULL);
	REQUIRE(tips_open(path, &cfg, ops, &db) == 0);

	pthread_t t[WRITERS + READERS + 1];
	int n = 0;
	for (int i = 0; i < WRITERS; i++)
		REQUIRE(pthread_create(&t[n++], NULL, writer, (void *)(uintptr_t)i) == 0);
	for (int i = 0; i < READERS; i++)
		REQUIRE(pthread_create(&t[n++], NULL, reader, (void *)(uintptr_t)i) == 0);
	REQUIRE(pthread_create(&t[n++], NULL, scanner, NULL) == 0);
	struct timespec end;
	clock_gettime(CLOCK_MONOTONIC, &end);
	end.tv_sec += RUN_SECONDS;
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &end, NULL) != 0)
		;
	atomic_store(&stop, 1);
	for (int i = 0; i < n; i++)
		pthread_join(t[i], NULL);

	struct tips_stats st;
	tips_stats(db, &st);
	fprintf(stderr, "%zu-byte keys: writes %llu lookups %llu scans %llu; reclamations %llu, gc unlinked "
		"%llu, writer waits %llu, cache hits %llu misses %llu\n", key_len,
		(unsigned long long)writes, (unsigned long long)lookups,
		(unsigned long long)scans, (unsigned long long)st.reclamations,
		(unsigned long long)st.gc_unlinked, (unsigned long long)st.writer_waits,
		(unsigned long long)st.cache_hits, (unsigned long long)st.cache_misses);
	CHECK(writes > 1000 && lookups > 1000 && scans > 10);
	CHECK(st.reclamations > 0 && st.gc_unlinked > 0);

	handoff();

	/* After a clean close every key holds its last version. */
	REQUIRE(tips_close(&db) == 0);
	REQUIRE(tips_open(path, &cfg, ops, &db) == 0);
	for (uint64_t k = 0; k < KEYS; k++) {
		unsigned char key[MAX_KLEN];
		key_bytes(k, key);
		uint64_t c = atomic_load(&completed[k]), val = 0;
		size_t vlen;
		int rc = tips_get(db, key, key_len, &val, 8, &vlen);
		if (c == 0 || is_delete(k, c))
			CHECK(rc == TIPS_ENOTFOUND);
		else
			CHECK(rc == 0 && val == value_of(k, c));
	}
	REQUIRE(tips_close(&db) == 0);
	unlink(path);
	return test_finish("test_framework_stress");
}
