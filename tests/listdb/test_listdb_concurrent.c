/*
 * test_listdb_concurrent.c - readers never miss a committed write while MemTables are
 * flushed and L0 is zipped into L1 (ListDB, OSDI'22, §3.4.3, Theorem 1).
 *
 *   test_listdb_concurrent [--ops N]   (N writes per writer and round; default 12000)
 *
 * Two writer threads each put their own keys (key(w, i), interleaved in key order with
 * the other writer's) into a database with memtable_entries = 256 and compaction on:
 * mostly new keys, some overwrites (the value carries a version counter) and some
 * deletes (each right after a second version of its key). After a write returns, its writer publishes it with a release store: the
 * version of the key (or DELETED), and for a new key its "acknowledged up to i" counter.
 * Two reader threads loop: they read a writer's counter (acquire), pick an acknowledged
 * key (often one of the newest, which are in MemTables being flushed) and check
 *   - a key that is never deleted is found, with a version >= the published one and a
 *     value that belongs to the key (a miss is the failure this test exists for);
 *   - a key whose delete was published is not found;
 *   - a short scan from a never-deleted key returns that key first, and keys in strictly
 *     increasing order whose values belong to them.
 * After the writers finish, tips_listdb_flush(db, 1) runs while the readers still read, so
 * Zipper compactions certainly overlap them; the statistics must show flushes and
 * compactions both during the writes and during the reader phase. Then every key is
 * compared with its final state, tips_listdb_check() must pass, and again after reopen.
 * Round 1: one domain, compaction_threads = 1; round 2: two domains (a writer in each),
 * compaction_threads = 2, shards = 4. The total is kept small enough for TSan.
 */
#define _GNU_SOURCE /* fork, clock_gettime, sched_yield */
#include "listdb_test.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

#define WRITERS 2
#define READERS 2
#define DELETED UINT64_MAX
#define MAXK 16
#define MAXV 64

struct shared {
	struct tips_listdb *db;
	long nops;                        /* operations per writer */
	_Atomic uint64_t acked[WRITERS];  /* keys 0..acked-1 of a writer were put */
	_Atomic uint64_t *ver[WRITERS];   /* [key] published version, or DELETED */
	_Atomic int stop;
	_Atomic uint64_t reads, scans, misses, stale, resurrected, bad_value, scan_bad, errors;
};

/* Key i of writer w: 8 bytes that interleave the writers (an odd multiplier is a
 * bijection on 32 bits), then 0..4 bytes that vary the length. */
static size_t key_of(unsigned w, uint64_t i, unsigned char *k)
{
	uint32_t mixed = (uint32_t)i * 2654435761u;
	be64(k, ((uint64_t)mixed << 32) | w); /* the first byte varies: every shard is used */
	size_t extra = i % 5;
	for (size_t j = 0; j < extra; j++)
		k[8 + j] = (unsigned char)(i >> (8 * j));
	return 8 + extra;
}

/* A key may be deleted only if i % 8 == 7; the others are overwritten at most. */
static int deletable(uint64_t i) { return i % 8 == 7; }

/* Value: version, writer, index, then 0..31 filler bytes derived from them. */
static size_t val_of(unsigned w, uint64_t i, uint64_t ver, unsigned char *v)
{
	size_t len = 24 + (size_t)((i + ver) % 4) * 8;
	memcpy(v, &ver, 8);
	uint64_t ww = w;
	memcpy(v + 8, &ww, 8);
	memcpy(v + 16, &i, 8);
	for (size_t j = 24; j < len; j++)
		v[j] = (unsigned char)(ver * 7 + i * 3 + j);
	return len;
}

/* Checks that (key, val) is a value written for this key; returns its version or 0. */
static uint64_t val_check(const void *key, size_t klen, const unsigned char *v, size_t vlen,
			  unsigned *w_out, uint64_t *i_out)
{
	unsigned char k[MAXK], want[MAXV];
	uint64_t ver, w, i;
	if (vlen < 24 || vlen > MAXV)
		return 0;
	memcpy(&ver, v, 8);
	memcpy(&w, v + 8, 8);
	memcpy(&i, v + 16, 8);
	if (w >= WRITERS || ver == 0)
		return 0;
	size_t kl = key_of((unsigned)w, i, k);
	if (kl != klen || memcmp(k, key, kl) != 0)
		return 0;
	size_t vl = val_of((unsigned)w, i, ver, want);
	if (vl != vlen || memcmp(want, v, vl) != 0)
		return 0;
	if (w_out)
		*w_out = (unsigned)w;
	if (i_out)
		*i_out = i;
	return ver;
}

/* ---- writers ------------------------------------------------------------------------ */

struct writer_arg {
	struct shared *sh;
	unsigned w;
	unsigned domain;
	uint64_t seed;
};

static void *writer_main(void *p)
{
	struct writer_arg *a = p;
	struct shared *sh = a->sh;
	unsigned w = a->w;
	unsigned char k[MAXK], v[MAXV];
	uint64_t s = a->seed, count = 0, del_cursor = 7;
	if (tips_listdb_thread_domain(sh->db, a->domain) != 0)
		atomic_fetch_add(&sh->errors, 1);
	for (long op = 0; op < sh->nops; op++) {
		uint64_t r = rnd(&s);
		unsigned kind = (unsigned)(r % 16);
		if (count > 16 && kind < 4) {
			/* overwrite a key that is never deleted, with the next version */
			uint64_t i = (r >> 8) % count;
			if (deletable(i))
				i--;
			uint64_t ver = atomic_load_explicit(&sh->ver[w][i], memory_order_relaxed) + 1;
			size_t kl = key_of(w, i, k), vl = val_of(w, i, ver, v);
			int rc = tips_listdb_put(sh->db, k, kl, v, vl);
			if (rc != 0) {
				fprintf(stderr, "writer %u: put (overwrite): %s\n", w, tips_errormsg());
				atomic_fetch_add(&sh->errors, 1);
				continue;
			}
			atomic_store_explicit(&sh->ver[w][i], ver, memory_order_release);
		} else if (count > 16 && kind < 6 && del_cursor < count) {
			/* delete the oldest deletable key not deleted yet, right after a second
			 * version: the tombstone and the version it hides are then usually in
			 * the same MemTable, L0 table and Zipper run */
			uint64_t i = del_cursor;
			del_cursor += 8;
			size_t kl = key_of(w, i, k), vl = val_of(w, i, 2, v);
			int rc = tips_listdb_put(sh->db, k, kl, v, vl);
			if (rc != 0) {
				fprintf(stderr, "writer %u: put (before delete): %s\n", w, tips_errormsg());
				atomic_fetch_add(&sh->errors, 1);
				continue;
			}
			atomic_store_explicit(&sh->ver[w][i], 2, memory_order_release);
			rc = (op & 1) ? tips_listdb_delete(sh->db, k, kl) : tips_listdb_remove(sh->db, k, kl);
			if (rc != 0) {
				fprintf(stderr, "writer %u: %s of key %llu: %d (%s)\n", w,
					(op & 1) ? "delete" : "remove", (unsigned long long)i, rc,
					tips_errormsg());
				atomic_fetch_add(&sh->errors, 1);
				continue;
			}
			atomic_store_explicit(&sh->ver[w][i], DELETED, memory_order_release);
		} else {
			/* a new key, version 1 */
			uint64_t i = count;
			size_t kl = key_of(w, i, k), vl = val_of(w, i, 1, v);
			int rc = (op & 1) ? tips_listdb_put(sh->db, k, kl, v, vl)
					  : tips_listdb_insert(sh->db, k, kl, v, vl);
			if (rc != 0) {
				fprintf(stderr, "writer %u: put of new key %llu: %d (%s)\n", w,
					(unsigned long long)i, rc, tips_errormsg());
				atomic_fetch_add(&sh->errors, 1);
				break; /* the key sequence must have no hole */
			}
			atomic_store_explicit(&sh->ver[w][i], 1, memory_order_release);
			count++;
			atomic_store_explicit(&sh->acked[w], count, memory_order_release);
		}
	}
	return NULL;
}

/* ---- readers ------------------------------------------------------------------------ */

struct reader_arg {
	struct shared *sh;
	unsigned id;
};

struct rscan {
	unsigned char first[MAXK];
	size_t first_len;
	uint64_t min_ver;
	unsigned char prev[MAXK];
	size_t prev_len;
	long n;
	int bad;
	const char *why;
	int first_cmp;           /* the first key returned against the start key */
	unsigned first_w;        /* and whose it is */
	uint64_t first_i, first_ver;
};

static int rscan_cb(const void *key, size_t klen, const void *val, size_t vlen, void *arg)
{
	struct rscan *c = arg;
	uint64_t ver = val_check(key, klen, val, vlen, NULL, NULL);
	if (!ver) {
		c->bad = 1, c->why = "a value that does not belong to its key";
		return 1;
	}
	if (c->n == 0) {
		c->first_cmp = key_cmp(key, klen, c->first, c->first_len);
		val_check(key, klen, val, vlen, &c->first_w, &c->first_i);
		c->first_ver = ver;
		if (c->first_cmp != 0) {
			c->bad = 1, c->why = "the start key (acknowledged) was not returned first";
			return 1;
		}
		if (ver < c->min_ver) {
			c->bad = 1, c->why = "the start key has an older version than acknowledged";
			return 1;
		}
	} else if (key_cmp(c->prev, c->prev_len, key, klen) >= 0) {
		c->bad = 1, c->why = "keys out of order or repeated";
		return 1;
	}
	if (klen > MAXK) {
		c->bad = 1, c->why = "a key longer than any written";
		return 1;
	}
	memcpy(c->prev, key, klen);
	c->prev_len = klen;
	c->n++;
	return 0;
}

static void *reader_main(void *p)
{
	struct reader_arg *a = p;
	struct shared *sh = a->sh;
	unsigned char k[MAXK], v[MAXV + 8];
	uint64_t s = 0x5eed + a->id, printed = 0;
	unsigned long iter = 0;
	tips_listdb_thread_domain(sh->db, a->id % 2 ? 1 : 0); /* EINVAL with one domain: ignored */
	while (!atomic_load_explicit(&sh->stop, memory_order_acquire)) {
		iter++;
		uint64_t r = rnd(&s);
		unsigned w = (unsigned)(r % WRITERS);
		uint64_t n = atomic_load_explicit(&sh->acked[w], memory_order_acquire);
		if (n == 0) {
			sched_yield();
			continue;
		}
		/* half the time one of the 64 newest keys: in MemTables, being flushed */
		uint64_t span = n < 64 ? n : 64;
		uint64_t i = (r >> 8) & 1 ? (r >> 16) % n : n - 1 - (r >> 16) % span;
		uint64_t v0 = atomic_load_explicit(&sh->ver[w][i], memory_order_acquire);
		size_t kl = key_of(w, i, k), vl = 0;

		if (iter % 8 == 0 && !deletable(i)) {
			struct rscan c;
			memset(&c, 0, sizeof(c));
			memcpy(c.first, k, kl);
			c.first_len = kl;
			c.min_ver = v0;
			size_t count = 1 + (size_t)(r >> 40) % 12;
			long got = tips_listdb_scan(sh->db, k, kl, count, rscan_cb, &c);
			atomic_fetch_add_explicit(&sh->scans, 1, memory_order_relaxed);
			if (c.bad || got < 1 || got != c.n) {
				if (printed++ < 5) {
					fprintf(stderr, "reader %u: scan from key %llu of writer %u "
						"(acknowledged version %llu): %s (returned %ld, saw %ld)\n",
						a->id, (unsigned long long)i, w, (unsigned long long)v0,
						c.bad ? c.why : "no key", got, c.n);
					if (c.bad && c.first_cmp)
						fprintf(stderr, "  the first key returned is %s the start "
							"key: key %llu of writer %u, version %llu\n",
							c.first_cmp < 0 ? "below" : "above",
							(unsigned long long)c.first_i, c.first_w,
							(unsigned long long)c.first_ver);
				}
				atomic_fetch_add(&sh->scan_bad, 1);
			}
			continue;
		}

		int rc = tips_listdb_get(sh->db, k, kl, v, sizeof(v), &vl);
		atomic_fetch_add_explicit(&sh->reads, 1, memory_order_relaxed);
		if (v0 == DELETED) {
			if (rc != TIPS_ENOTFOUND) {
				if (printed++ < 5)
					fprintf(stderr, "reader %u: key %llu of writer %u was deleted "
						"(acknowledged) but get returned %d\n", a->id,
						(unsigned long long)i, w, rc);
				atomic_fetch_add(&sh->resurrected, 1);
			}
			continue;
		}
		if (rc == TIPS_ENOTFOUND && deletable(i))
			continue; /* its delete may be under way */
		if (rc != 0) {
			if (printed++ < 5)
				fprintf(stderr, "reader %u: MISS: key %llu of writer %u (acknowledged "
					"version %llu, %llu keys acknowledged): get returned %d (%s)\n",
					a->id, (unsigned long long)i, w, (unsigned long long)v0,
					(unsigned long long)n, rc, tips_strerror(rc));
			atomic_fetch_add(&sh->misses, 1);
			continue;
		}
		uint64_t ver = val_check(k, kl, v, vl, NULL, NULL);
		if (!ver) {
			if (printed++ < 5)
				fprintf(stderr, "reader %u: key %llu of writer %u: a value of %zu bytes "
					"that does not belong to it\n", a->id, (unsigned long long)i, w,
					vl);
			atomic_fetch_add(&sh->bad_value, 1);
		} else if (ver < v0) {
			if (printed++ < 5)
				fprintf(stderr, "reader %u: key %llu of writer %u: version %llu, but "
					"%llu was acknowledged before the get\n", a->id,
					(unsigned long long)i, w, (unsigned long long)ver,
					(unsigned long long)v0);
			atomic_fetch_add(&sh->stale, 1);
		}
	}
	return NULL;
}

/* ---- the final state ---------------------------------------------------------------- */

struct fscan {
	struct shared *sh;
	long n;
	int bad;
	unsigned char prev[MAXK];
	size_t prev_len;
};

static int fscan_cb(const void *key, size_t klen, const void *val, size_t vlen, void *arg)
{
	struct fscan *c = arg;
	unsigned w;
	uint64_t i;
	uint64_t ver = val_check(key, klen, val, vlen, &w, &i);
	if (!ver || i >= atomic_load(&c->sh->acked[w]) || atomic_load(&c->sh->ver[w][i]) != ver ||
	    (c->n && key_cmp(c->prev, c->prev_len, key, klen) >= 0) || klen > MAXK) {
		c->bad = 1;
		return 1;
	}
	memcpy(c->prev, key, klen);
	c->prev_len = klen;
	c->n++;
	return 0;
}

static void verify_final(struct shared *sh, const char *phase)
{
	unsigned char k[MAXK], v[MAXV + 8];
	long live = 0, wrong = 0;
	ld_phase = phase;
	for (unsigned w = 0; w < WRITERS; w++) {
		uint64_t n = atomic_load(&sh->acked[w]);
		for (uint64_t i = 0; i < n; i++) {
			uint64_t want = atomic_load(&sh->ver[w][i]);
			size_t kl = key_of(w, i, k), vl = 0;
			int rc = tips_listdb_get(sh->db, k, kl, v, sizeof(v), &vl);
			if (want == DELETED) {
				if (rc != TIPS_ENOTFOUND && wrong++ < 5)
					fprintf(stderr, "[%s] deleted key %llu of writer %u: get %d\n",
						phase, (unsigned long long)i, w, rc);
				continue;
			}
			live++;
			uint64_t ver = rc == 0 ? val_check(k, kl, v, vl, NULL, NULL) : 0;
			if (ver != want && wrong++ < 5)
				fprintf(stderr, "[%s] key %llu of writer %u: get %d, version %llu, "
					"wanted %llu\n", phase, (unsigned long long)i, w, rc,
					(unsigned long long)ver, (unsigned long long)want);
		}
	}
	CHECK(wrong == 0);
	struct fscan c;
	memset(&c, 0, sizeof(c));
	c.sh = sh;
	long got = tips_listdb_scan(sh->db, NULL, 0, (size_t)live + 100, fscan_cb, &c);
	CHECK(!c.bad);
	CHECK(got == live && c.n == live);
}

/* ---- one round ---------------------------------------------------------------------- */

static void run_round(unsigned domains, unsigned compaction_threads, long nops)
{
	char path[256];
	struct tips_listdb_config cfg;
	struct shared sh;
	struct tips_listdb_stats s0, s_mid, s1;
	pthread_t wt[WRITERS], rt[READERS];
	struct writer_arg wa[WRITERS];
	struct reader_arg ra[READERS];
	double t0 = ld_now();

	memset(&sh, 0, sizeof(sh));
	sh.nops = nops;
	for (unsigned w = 0; w < WRITERS; w++) {
		sh.ver[w] = calloc((size_t)nops, sizeof(*sh.ver[w]));
		REQUIRE(sh.ver[w] != NULL);
	}
	ld_phase = "open";
	ld_path(path, sizeof(path));
	tips_listdb_config_init(&cfg);
	cfg.flags = TIPS_LISTDB_CREATE;
	cfg.pool_size = 64ull << 20;
	cfg.domains = domains;
	cfg.memtable_entries = 256;
	cfg.compaction = 1;
	cfg.compaction_threads = compaction_threads;
	cfg.shards = 4;
	REQUIRE_RC(tips_listdb_open(path, &cfg, &sh.db), 0);
	tips_listdb_stats(sh.db, &s0);

	ld_phase = "readers and writers";
	for (unsigned r = 0; r < READERS; r++) {
		ra[r] = (struct reader_arg){ &sh, r };
		REQUIRE(pthread_create(&rt[r], NULL, reader_main, &ra[r]) == 0);
	}
	for (unsigned w = 0; w < WRITERS; w++) {
		wa[w] = (struct writer_arg){ &sh, w, w % domains, 0x1234567 + w * 77 + domains };
		REQUIRE(pthread_create(&wt[w], NULL, writer_main, &wa[w]) == 0);
	}
	for (unsigned w = 0; w < WRITERS; w++)
		pthread_join(wt[w], NULL);
	tips_listdb_stats(sh.db, &s_mid);
	ld_phase = "flush(1) while readers read";
	CHECK_RC(tips_listdb_flush(sh.db, 1), 0);
	atomic_store_explicit(&sh.stop, 1, memory_order_release);
	for (unsigned r = 0; r < READERS; r++)
		pthread_join(rt[r], NULL);
	tips_listdb_stats(sh.db, &s1);

	printf("round: domains=%u compaction_threads=%u: %llu+%llu keys, %llu gets, %llu "
	       "scans; flushes %llu, compactions %llu (%llu while writing), %.2f s\n", domains,
	       compaction_threads, (unsigned long long)sh.acked[0], (unsigned long long)sh.acked[1],
	       (unsigned long long)sh.reads, (unsigned long long)sh.scans,
	       (unsigned long long)(s1.memtables_flushed - s0.memtables_flushed),
	       (unsigned long long)(s1.compactions - s0.compactions),
	       (unsigned long long)(s_mid.compactions - s0.compactions), ld_now() - t0);
	CHECK(atomic_load(&sh.errors) == 0);
	CHECK(atomic_load(&sh.misses) == 0);       /* a reader never misses a committed key */
	CHECK(atomic_load(&sh.stale) == 0);
	CHECK(atomic_load(&sh.resurrected) == 0);
	CHECK(atomic_load(&sh.bad_value) == 0);
	CHECK(atomic_load(&sh.scan_bad) == 0);
	CHECK(atomic_load(&sh.reads) > 0);
	CHECK(atomic_load(&sh.scans) > 0);
	CHECK(atomic_load(&sh.acked[0]) > 0 && atomic_load(&sh.acked[1]) > 0);
	/* The readers overlapped flushes and compactions, while writing and in the flush. */
	CHECK(s_mid.memtables_flushed > s0.memtables_flushed);
	CHECK(s_mid.compactions > s0.compactions);
	CHECK(s1.compactions > s0.compactions);
	CHECK(s1.entries_merged > s0.entries_merged);

	verify_final(&sh, "final state");
	ld_phase = "check";
	CHECK_RC(tips_listdb_check(sh.db, NULL), 0);
	ld_phase = "close";
	CHECK_RC(tips_listdb_close(&sh.db), 0);
	cfg.flags = 0;
	REQUIRE_RC(tips_listdb_open(path, &cfg, &sh.db), 0);
	verify_final(&sh, "final state after reopen");
	CHECK_RC(tips_listdb_check(sh.db, NULL), 0);
	CHECK_RC(tips_listdb_close(&sh.db), 0);
	tips_listdb_destroy(path);
	for (unsigned w = 0; w < WRITERS; w++)
		free(sh.ver[w]);
}

int main(int argc, char **argv)
{
	long nops = 12000;
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--ops") && i + 1 < argc)
			nops = atol(argv[++i]);
		else {
			fprintf(stderr, "usage: test_listdb_concurrent [--ops N]\n");
			return 2;
		}
	}
	REQUIRE(nops > 100);
	ld_test_init("listdb-concurrent", 280); /* below the CTest timeout */
	setvbuf(stdout, NULL, _IOLBF, 0);
	run_round(1, 1, nops);
	run_round(2, 2, nops);
	return test_finish("test_listdb_concurrent");
}
