/*
 * test_index_conformance.c - the conformance suite every index passes, in every build,
 * through the benchmark's index interface (bench/kit/bench_index.h): dram-NAME through its
 * ops table, tips-NAME through the TIPS facade on a /dev/shm pool, pmdk-hash (the
 * libpmemobj baseline) on its own pool, listdb (tips/listdb.h) on its pools.
 *
 * Usage: test_index_conformance [listdb options] NAME...   (e.g. dram-bptree tips-bptree)
 *   listdb options: --listdb-memtable N (default here 1000, so that every part goes
 *   through MemTable flushes into L0 and Zipper compactions into L1, and lookups and
 *   scans merge all three levels), --listdb-domains D, --listdb-oblivious,
 *   --listdb-flush iul|wal.
 *
 * The same checks for all indexes, each against a reference model:
 *  - empty index: every read misses, update/remove report ENOTFOUND, scans return 0;
 *  - semantics: insert/duplicate/update (same and other lengths, empty and 64 KiB
 *    values)/remove/re-insert codes and values; a lookup into a small buffer still finds
 *    the key; oversized keys and values are refused (ETOOBIG) and change nothing;
 *  - long keys: 1..1024 bytes, prefixes of each other, 0x00 and 0xff bytes, keys that
 *    differ only in their last byte; lookups and ordered scans against the model;
 *  - node and bucket boundaries: 6000 sequential 8-byte big-endian keys inserted in
 *    ascending, then descending order, every other one removed, then all of them, with
 *    the contents checked by lookups and by a full scan after each phase;
 *  - growth: GROWTH_KEYS (150000; 30000 under sanitizers) scrambled 8-byte keys (many
 *    splits or resizes), every key looked up, the whole index scanned in pages of
 *    3000, half of them removed;
 *  - random operations against the model: RANDOM_OPS (60000; 20000 under sanitizers)
 *    operations over 3000 keys of 1..40 bytes and values of 0..300 bytes, with lookups
 *    and scans from random start keys checked throughout;
 *  - tips-*, pmdk-hash and listdb: after every part, close and reopen the pool; the
 *    contents must be the model's, and the block check (tips_db_check(),
 *    pmdk_hash_check(), tips_listdb_check(): every log chunk an allocated heap block and
 *    every allocated block a chunk, L1 in order) must find no leaked or doubly owned
 *    block.
 * Concurrency is covered elsewhere: test_index_dram (4 threads on the ops tables) and
 * test_framework_stress (facade) for every index.
 */
#define _GNU_SOURCE
#include "test_util.h"
#include "util/kv.h" /* mix64 */

#include "bench_index.h"
#include <tips/listdb.h>
#ifdef TIPS_HAVE_PMDK_HASH
#include "baselines/pmdk_hash.h"
#endif

#include <stdint.h>

/* Sanitizer builds run 5-20x slower: they grow to fewer keys and do fewer operations. */
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define GROWTH_KEYS 30000u
#define RANDOM_OPS 20000
#else
#define GROWTH_KEYS 150000u
#define RANDOM_OPS 60000
#endif
#define SEQ_KEYS 6000u
#define MAXK TIPS_MAX_KEY

/* ---- helpers ------------------------------------------------------------------------- */

/* ---- the model: a fixed set of distinct keys, each present or not, with a value ------- */

struct mkey {
	unsigned char *k;
	size_t klen;
	unsigned char *v; /* malloc'd value when present */
	size_t vlen;
	int present;
};

struct model {
	struct mkey *e; /* sorted by key */
	size_t n;
};

static int mkey_cmp(const void *a, const void *b)
{
	const struct mkey *x = a, *y = b;
	return key_cmp(x->k, x->klen, y->k, y->klen);
}

/* Sorts the keys and checks they are distinct (a bad key set would test nothing). */
static void model_seal(struct model *m)
{
	qsort(m->e, m->n, sizeof(*m->e), mkey_cmp);
	for (size_t i = 1; i < m->n; i++)
		REQUIRE(mkey_cmp(&m->e[i - 1], &m->e[i]) < 0);
}

static void model_add_key(struct model *m, size_t *cap, const void *k, size_t klen)
{
	if (m->n == *cap) {
		*cap = *cap ? *cap * 2 : 256;
		m->e = realloc(m->e, *cap * sizeof(*m->e));
		REQUIRE(m->e != NULL);
	}
	struct mkey *e = &m->e[m->n++];
	memset(e, 0, sizeof(*e));
	e->k = malloc(klen);
	REQUIRE(e->k != NULL);
	memcpy(e->k, k, klen);
	e->klen = klen;
}

static void model_free(struct model *m)
{
	for (size_t i = 0; i < m->n; i++) {
		free(m->e[i].k);
		free(m->e[i].v);
	}
	free(m->e);
	m->e = NULL;
	m->n = 0;
}

static void model_set(struct mkey *e, const void *v, size_t vlen)
{
	free(e->v);
	e->v = malloc(vlen ? vlen : 1);
	REQUIRE(e->v != NULL);
	if (vlen)
		memcpy(e->v, v, vlen);
	e->vlen = vlen;
	e->present = 1;
}

static void model_clear(struct mkey *e)
{
	free(e->v);
	e->v = NULL;
	e->vlen = 0;
	e->present = 0;
}

static void fill_value(unsigned char *v, size_t len, uint64_t tag)
{
	for (size_t i = 0; i < len; i++)
		v[i] = (unsigned char)(mix64(tag + i / 8) >> (8 * (i % 8)));
}

/* ---- the index under test ------------------------------------------------------------ */

struct subject {
	const char *name;
	char pool[256];
	struct bench_index b;
	uint64_t expected;
	int persistent;
};

static void subject_open(struct subject *s, uint64_t expected)
{
	s->expected = expected;
	s->persistent = strncmp(s->name, "dram-", 5) != 0;
	test_path(s->pool, sizeof(s->pool), "/dev/shm", "conformance");
	int rc = bench_index_open(&s->b, s->name, s->pool, 0, expected, 1);
	if (rc)
		fprintf(stderr, "open %s: %s\n", s->name, tips_errormsg());
	REQUIRE(rc == 0);
}

/* tips-*, pmdk-hash: the block check of the pool (no leak, nothing owned twice or owned
 * but free). */
static void subject_check_blocks(struct subject *s)
{
#ifdef TIPS_HAVE_PMDK_HASH
	if (s->b.pmdk) {
		struct pmdk_hash_report prep;
		int prc = pmdk_hash_check(s->b.pmdk, NULL, NULL, &prep);
		if (prc)
			fprintf(stderr, "%s: check: leaked %llu, free but owned %llu, owned twice "
				"%llu\n", s->name, (unsigned long long)prep.leaked,
				(unsigned long long)prep.free_but_owned,
				(unsigned long long)prep.owned_twice);
		CHECK_RC(prc, 0);
		return;
	}
#endif
	if (s->b.ldb) {
		/* Check at a fixed point: every table merged into L1, reclamation done. */
		CHECK_RC(tips_listdb_flush(s->b.ldb, 1), 0);
		struct tips_listdb_report lr;
		int lrc = tips_listdb_check(s->b.ldb, &lr);
		if (lrc)
			fprintf(stderr, "%s: tips_listdb_check: %s\n", s->name, tips_errormsg());
		CHECK_RC(lrc, 0);
		if (lrc == 0 && lr.heap_blocks != lr.chunks)
			fprintf(stderr, "%s: %llu heap blocks allocated, %llu owned as log chunks\n",
				s->name, (unsigned long long)lr.heap_blocks,
				(unsigned long long)lr.chunks);
		CHECK(lrc != 0 || lr.heap_blocks == lr.chunks);
		return;
	}
	if (!s->b.db)
		return;
	struct tips_db_report rep;
	int rc = tips_db_check(s->b.db, NULL, NULL, &rep);
	if (rc)
		fprintf(stderr, "%s: db check: leaked %llu, free but owned %llu, owned twice "
			"%llu\n", s->name, (unsigned long long)rep.leaked,
			(unsigned long long)rep.free_but_owned, (unsigned long long)rep.owned_twice);
	CHECK_RC(rc, 0);
}

/* Persistent builds: close and reopen the pool, then check its blocks. */
static void subject_reopen(struct subject *s)
{
	if (!s->persistent)
		return;
	bench_index_close(&s->b);
	int rc = bench_index_open(&s->b, s->name, s->pool, 0, s->expected, 1);
	if (rc)
		fprintf(stderr, "reopen %s: %s\n", s->name, tips_errormsg());
	REQUIRE(rc == 0);
	subject_check_blocks(s);
}

static void subject_close(struct subject *s)
{
	subject_check_blocks(s);
	int listdb = s->b.ldb != NULL;
	bench_index_close(&s->b);
	if (listdb)
		tips_listdb_destroy(s->pool);
	else if (s->persistent)
		unlink(s->pool);
}

/* ---- checks against the model -------------------------------------------------------- */

static unsigned char vbuf[TIPS_MAX_VALUE + 1];

static void check_lookup(struct subject *s, const struct mkey *e)
{
	size_t vlen = SIZE_MAX;
	int rc = bench_lookup(&s->b, e->k, e->klen, vbuf, sizeof(vbuf), &vlen);
	if (e->present) {
		CHECK_RC(rc, 0);
		CHECK(vlen == e->vlen);
		if (rc == 0 && vlen == e->vlen)
			CHECK(e->vlen == 0 || memcmp(vbuf, e->v, e->vlen) == 0);
	} else {
		CHECK_RC(rc, TIPS_ENOTFOUND);
	}
}

static void check_all_lookups(struct subject *s, const struct model *m)
{
	for (size_t i = 0; i < m->n; i++)
		check_lookup(s, &m->e[i]);
}

struct scan_out {
	const struct model *m;
	size_t next;  /* model index the next pair must match */
	size_t seen;
	int bad;
	char first_bad[80]; /* the first wrong pair, for the message */
};

/* Describes the wrong pair (k, kl, vl) of a scan into o->first_bad: its first key bytes
 * in hex and the value's length. */
static void note_bad_pair(struct scan_out *o, const void *k, size_t kl, size_t vl)
{
	if (o->bad)
		return;
	int n = snprintf(o->first_bad, sizeof(o->first_bad), "key %zu B ", kl);
	for (size_t i = 0; i < kl && i < 16 && n > 0 && (size_t)n + 3 < sizeof(o->first_bad); i++)
		n += snprintf(o->first_bad + n, sizeof(o->first_bad) - (size_t)n, "%02x",
			      ((const unsigned char *)k)[i]);
	if (n > 0 && (size_t)n < sizeof(o->first_bad))
		snprintf(o->first_bad + n, sizeof(o->first_bad) - (size_t)n, ", value %zu B", vl);
}

/* Each pair must be the next present model key, with its value. */
static int scan_check_fn(const void *k, size_t kl, const void *v, size_t vl, void *arg)
{
	struct scan_out *o = arg;
	const struct model *m = o->m;
	while (o->next < m->n && !m->e[o->next].present)
		o->next++;
	if (o->next >= m->n) {
		note_bad_pair(o, k, kl, vl);
		o->bad = 1;
		return 1;
	}
	const struct mkey *e = &m->e[o->next++];
	if (key_cmp(k, kl, e->k, e->klen) != 0 || vl != e->vlen ||
	    (vl && memcmp(v, e->v, vl) != 0)) {
		note_bad_pair(o, k, kl, vl);
		o->bad = 1;
	}
	o->seen++;
	return o->bad;
}

/* Scans @count pairs from @start (NULL: from the first key) and compares with the model. */
static void check_scan(struct subject *s, const struct model *m, const void *start,
		       size_t klen, size_t count)
{
	struct scan_out o = { .m = m };
	if (start) { /* the first model key >= start */
		size_t lo = 0, hi = m->n;
		while (lo < hi) {
			size_t mid = (lo + hi) / 2;
			if (key_cmp(m->e[mid].k, m->e[mid].klen, start, klen) < 0)
				lo = mid + 1;
			else
				hi = mid;
		}
		o.next = lo;
	}
	size_t want = 0;
	for (size_t i = o.next; i < m->n && want < count; i++)
		want += (size_t)m->e[i].present;
	long got = bench_scan_each(&s->b, start, start ? klen : 0, count, scan_check_fn, &o);
	if (o.bad || got != (long)want)
		fprintf(stderr, "%s: scan of %zu from a %zu-byte key: got %ld pairs, want %zu%s%s\n",
			s->name, count, start ? klen : 0, got, want,
			o.bad ? " (wrong pair or order), first wrong pair: " : "",
			o.bad ? o.first_bad : "");
	CHECK(!o.bad);
	CHECK(got == (long)want);
}

/* A whole-index scan in pages of @page pairs, each page starting at the last key seen
 * plus a 0x00 byte (its successor in byte-string order). */
static void check_full_scan(struct subject *s, const struct model *m, size_t page)
{
	unsigned char start[MAXK + 1];
	size_t klen = 0;
	size_t i = 0;
	for (;;) {
		check_scan(s, m, klen ? start : NULL, klen, page);
		size_t taken = 0;
		while (i < m->n && taken < page)
			taken += (size_t)m->e[i++].present;
		if (taken < page || i >= m->n)
			return;
		const struct mkey *last = &m->e[i - 1];
		if (last->klen == MAXK)
			return; /* no successor key of legal length: the scans so far suffice */
		memcpy(start, last->k, last->klen);
		start[last->klen] = 0;
		klen = last->klen + 1;
	}
}

/* ---- parts ----------------------------------------------------------------------------- */

static void part_empty(const char *name)
{
	struct subject s = { .name = name };
	subject_open(&s, 1000);
	unsigned char k[8];
	size_t vlen;
	for (uint64_t i = 0; i < 100; i++) {
		be64(k, mix64(i));
		CHECK_RC(bench_lookup(&s.b, k, 8, vbuf, 8, &vlen), TIPS_ENOTFOUND);
		CHECK_RC(bench_update(&s.b, k, 8, k, 8), TIPS_ENOTFOUND);
		CHECK_RC(bench_remove(&s.b, k, 8), TIPS_ENOTFOUND);
	}
	CHECK(bench_scan(&s.b, NULL, 0, 10) == 0);
	CHECK(bench_scan(&s.b, k, 8, 10) == 0);
	subject_reopen(&s);
	CHECK(bench_scan(&s.b, NULL, 0, 10) == 0);
	subject_close(&s);
}

static void part_semantics(const char *name)
{
	struct subject s = { .name = name };
	subject_open(&s, 1000);
	static unsigned char big[TIPS_MAX_VALUE + 1];
	fill_value(big, sizeof(big), 7);
	unsigned char k[8], k2[8];
	be64(k, 42);
	be64(k2, 43);
	size_t vlen;
	uint64_t a = 1, b = 2;

	CHECK_RC(bench_insert(&s.b, k, 8, &a, 8), 0);
	CHECK_RC(bench_insert(&s.b, k, 8, &b, 8), TIPS_EKEYEXISTS);
	CHECK(bench_lookup(&s.b, k, 8, vbuf, 8, &vlen) == 0 && vlen == 8 &&
	      memcmp(vbuf, &a, 8) == 0);
	CHECK_RC(bench_update(&s.b, k, 8, &b, 8), 0); /* same length */
	CHECK(bench_lookup(&s.b, k, 8, vbuf, 8, &vlen) == 0 && memcmp(vbuf, &b, 8) == 0);
	CHECK_RC(bench_update(&s.b, k, 8, big, 300), 0); /* longer */
	CHECK(bench_lookup(&s.b, k, 8, vbuf, sizeof(vbuf), &vlen) == 0 && vlen == 300 &&
	      memcmp(vbuf, big, 300) == 0);
	CHECK(bench_lookup(&s.b, k, 8, vbuf, 4, &vlen) == 0 && vlen == 300); /* small buffer */
	CHECK_RC(bench_update(&s.b, k, 8, NULL, 0), 0); /* empty */
	CHECK(bench_lookup(&s.b, k, 8, vbuf, sizeof(vbuf), &vlen) == 0 && vlen == 0);
	CHECK_RC(bench_update(&s.b, k, 8, big, TIPS_MAX_VALUE), 0); /* largest */
	CHECK(bench_lookup(&s.b, k, 8, vbuf, sizeof(vbuf), &vlen) == 0 &&
	      vlen == TIPS_MAX_VALUE && memcmp(vbuf, big, TIPS_MAX_VALUE) == 0);
	CHECK_RC(bench_update(&s.b, k, 8, big, TIPS_MAX_VALUE + 1), TIPS_ETOOBIG);
	CHECK_RC(bench_insert(&s.b, k2, 8, big, TIPS_MAX_VALUE + 1), TIPS_ETOOBIG);
	CHECK_RC(bench_lookup(&s.b, k2, 8, vbuf, 8, &vlen), TIPS_ENOTFOUND);
	static unsigned char longk[MAXK + 1];
	memset(longk, 'x', sizeof(longk));
	CHECK_RC(bench_insert(&s.b, longk, MAXK + 1, &a, 8), TIPS_ETOOBIG);
	CHECK_RC(bench_lookup(&s.b, longk, MAXK + 1, vbuf, 8, &vlen), TIPS_ENOTFOUND);
	CHECK_RC(bench_update(&s.b, k, 8, &a, 8), 0); /* back to 8 bytes */
	CHECK_RC(bench_remove(&s.b, k, 8), 0);
	CHECK_RC(bench_remove(&s.b, k, 8), TIPS_ENOTFOUND);
	CHECK_RC(bench_update(&s.b, k, 8, &a, 8), TIPS_ENOTFOUND);
	CHECK_RC(bench_lookup(&s.b, k, 8, vbuf, 8, &vlen), TIPS_ENOTFOUND);
	CHECK_RC(bench_insert(&s.b, k, 8, &b, 8), 0); /* re-insert after remove */
	CHECK(bench_lookup(&s.b, k, 8, vbuf, 8, &vlen) == 0 && memcmp(vbuf, &b, 8) == 0);
	subject_reopen(&s);
	CHECK(bench_lookup(&s.b, k, 8, vbuf, 8, &vlen) == 0 && vlen == 8 &&
	      memcmp(vbuf, &b, 8) == 0);
	CHECK_RC(bench_lookup(&s.b, k2, 8, vbuf, 8, &vlen), TIPS_ENOTFOUND);
	subject_close(&s);
}

/* Inserts every model key with a value derived from @tag, checking each code. */
static void insert_all(struct subject *s, struct model *m, uint64_t tag, size_t vlen)
{
	unsigned char v[512];
	for (size_t i = 0; i < m->n; i++) {
		struct mkey *e = &m->e[i];
		fill_value(v, vlen, tag + i);
		CHECK_RC(bench_insert(&s->b, e->k, e->klen, v, vlen), 0);
		model_set(e, v, vlen);
	}
}

static void part_long_keys(const char *name)
{
	struct model m = { 0 };
	size_t cap = 0;
	unsigned char k[MAXK];
	/* "a", "aa", ... up to 1024 bytes: each a prefix of the next. */
	memset(k, 'a', sizeof(k));
	for (size_t len = 1; len <= MAXK; len += (len < 40 ? 1 : 37))
		model_add_key(&m, &cap, k, len);
	model_add_key(&m, &cap, k, MAXK);
	/* Keys of 0x00 and 0xff bytes, and long keys that differ only in the last byte. */
	for (size_t len = 1; len <= 24; len++) {
		memset(k, 0, len);
		model_add_key(&m, &cap, k, len);
		memset(k, 0xff, len);
		model_add_key(&m, &cap, k, len);
	}
	memset(k, 'q', sizeof(k));
	for (int last = 0; last < 256; last += 15) {
		k[MAXK - 1] = (unsigned char)last;
		model_add_key(&m, &cap, k, MAXK);
		k[511] = (unsigned char)last;
		model_add_key(&m, &cap, k, 512);
	}
	/* 8-byte keys among them, and keys just shorter and longer than 8. */
	for (uint64_t i = 0; i < 64; i++) {
		be64(k, mix64(i));
		model_add_key(&m, &cap, k, 8);
		model_add_key(&m, &cap, k, 7 + (i & 1) * 2);
	}
	/* model_seal needs distinct keys: drop the duplicate "a"*1024 added twice above. */
	qsort(m.e, m.n, sizeof(*m.e), mkey_cmp);
	size_t w = 0;
	for (size_t i = 0; i < m.n; i++) {
		if (w && mkey_cmp(&m.e[w - 1], &m.e[i]) == 0) {
			free(m.e[i].k);
			continue;
		}
		m.e[w++] = m.e[i];
	}
	m.n = w;
	model_seal(&m);

	struct subject s = { .name = name };
	subject_open(&s, 1000);
	insert_all(&s, &m, 100, 16);
	check_all_lookups(&s, &m);
	check_full_scan(&s, &m, 7);
	check_scan(&s, &m, "aaaa", 4, 5);
	check_scan(&s, &m, "ab", 2, 3);
	/* Remove every third key, update every fourth to another length. */
	unsigned char v[64];
	for (size_t i = 0; i < m.n; i++) {
		struct mkey *e = &m.e[i];
		if (i % 3 == 0) {
			CHECK_RC(bench_remove(&s.b, e->k, e->klen), 0);
			model_clear(e);
		} else if (i % 4 == 0) {
			fill_value(v, 40, i);
			CHECK_RC(bench_update(&s.b, e->k, e->klen, v, 40), 0);
			model_set(e, v, 40);
		}
	}
	check_all_lookups(&s, &m);
	check_full_scan(&s, &m, 11);
	subject_reopen(&s);
	check_all_lookups(&s, &m);
	check_full_scan(&s, &m, 50);
	subject_close(&s);
	model_free(&m);
}

/* Sequential keys 0..SEQ_KEYS-1 in ascending or descending insert order. */
static void part_boundaries(const char *name, int descending)
{
	struct model m = { 0 };
	size_t cap = 0;
	unsigned char k[8];
	for (uint64_t i = 0; i < SEQ_KEYS; i++) {
		be64(k, i);
		model_add_key(&m, &cap, k, 8);
	}
	model_seal(&m);
	struct subject s = { .name = name };
	subject_open(&s, SEQ_KEYS);
	uint64_t v;
	for (size_t j = 0; j < m.n; j++) {
		size_t i = descending ? m.n - 1 - j : j;
		v = i * 3;
		CHECK_RC(bench_insert(&s.b, m.e[i].k, 8, &v, 8), 0);
		model_set(&m.e[i], &v, 8);
	}
	check_all_lookups(&s, &m);
	check_full_scan(&s, &m, 1000);
	for (uint64_t start = 0; start < SEQ_KEYS; start += 997) {
		be64(k, start);
		check_scan(&s, &m, k, 8, 130); /* crosses a 128-key node boundary */
	}
	/* Every other key removed, from the far end inwards. */
	for (size_t j = 0; j < m.n; j++) {
		size_t i = descending ? j : m.n - 1 - j;
		if (i % 2) {
			CHECK_RC(bench_remove(&s.b, m.e[i].k, 8), 0);
			model_clear(&m.e[i]);
		}
	}
	check_all_lookups(&s, &m);
	check_full_scan(&s, &m, 999);
	subject_reopen(&s);
	check_all_lookups(&s, &m);
	/* Then all of them: the index must end empty and still work. */
	for (size_t i = 0; i < m.n; i++) {
		if (m.e[i].present) {
			CHECK_RC(bench_remove(&s.b, m.e[i].k, 8), 0);
			model_clear(&m.e[i]);
		}
	}
	CHECK(bench_scan(&s.b, NULL, 0, 10) == 0);
	v = 5;
	CHECK_RC(bench_insert(&s.b, m.e[7].k, 8, &v, 8), 0);
	model_set(&m.e[7], &v, 8);
	check_all_lookups(&s, &m);
	check_full_scan(&s, &m, 10);
	subject_reopen(&s);
	check_full_scan(&s, &m, 10);
	subject_close(&s);
	model_free(&m);
}

static void part_growth(const char *name)
{
	struct model m = { 0 };
	size_t cap = 0;
	unsigned char k[8];
	for (uint64_t i = 0; i < GROWTH_KEYS; i++) {
		be64(k, mix64(i + 12345));
		model_add_key(&m, &cap, k, 8);
	}
	/* Insert in id order (scrambled key order), not in sorted order. */
	struct subject s = { .name = name };
	subject_open(&s, 1024); /* a small hint: the index must grow past it */
	for (size_t i = 0; i < m.n; i++) {
		uint64_t v = i;
		CHECK_RC(bench_insert(&s.b, m.e[i].k, 8, &v, 8), 0);
		model_set(&m.e[i], &v, 8);
	}
	model_seal(&m);
	check_all_lookups(&s, &m);
	check_full_scan(&s, &m, 3000);
	for (size_t i = 0; i < m.n; i += 2) {
		CHECK_RC(bench_remove(&s.b, m.e[i].k, 8), 0);
		model_clear(&m.e[i]);
	}
	for (size_t i = 1; i < m.n; i += 4) {
		uint64_t v = i * 7;
		CHECK_RC(bench_update(&s.b, m.e[i].k, 8, &v, 8), 0);
		model_set(&m.e[i], &v, 8);
	}
	check_all_lookups(&s, &m);
	subject_reopen(&s);
	check_all_lookups(&s, &m);
	check_full_scan(&s, &m, 5000);
	subject_close(&s);
	model_free(&m);
}

static void part_random(const char *name, uint64_t seed)
{
	struct model m = { 0 };
	size_t cap = 0;
	unsigned char k[40];
	uint64_t r = seed;
	while (m.n < 3000) {
		size_t len = 1 + rnd(&r) % 40;
		if (rnd(&r) % 3 == 0)
			len = 8;
		for (size_t i = 0; i < len; i++)
			k[i] = (unsigned char)(rnd(&r) % 4 ? 'a' + rnd(&r) % 3 : rnd(&r));
		int dup = 0;
		for (size_t i = 0; i < m.n && !dup; i++)
			dup = key_cmp(m.e[i].k, m.e[i].klen, k, len) == 0;
		if (!dup)
			model_add_key(&m, &cap, k, len);
	}
	model_seal(&m);
	struct subject s = { .name = name };
	subject_open(&s, 1000);
	unsigned char v[300];
	for (int op = 0; op < RANDOM_OPS; op++) {
		struct mkey *e = &m.e[rnd(&r) % m.n];
		size_t vlen = rnd(&r) % 4 ? 8 : rnd(&r) % sizeof(v);
		fill_value(v, vlen, r);
		switch (rnd(&r) % 8) {
		case 0: case 1: case 2:
			CHECK_RC(bench_insert(&s.b, e->k, e->klen, v, vlen),
				 e->present ? TIPS_EKEYEXISTS : 0);
			if (!e->present)
				model_set(e, v, vlen);
			break;
		case 3: case 4:
			CHECK_RC(bench_update(&s.b, e->k, e->klen, v, vlen),
				 e->present ? 0 : TIPS_ENOTFOUND);
			if (e->present)
				model_set(e, v, vlen);
			break;
		case 5:
			CHECK_RC(bench_remove(&s.b, e->k, e->klen), e->present ? 0 : TIPS_ENOTFOUND);
			model_clear(e);
			break;
		case 6:
			check_lookup(&s, e);
			break;
		default:
			if (op % 50 == 7)
				check_scan(&s, &m, e->k, e->klen, 1 + rnd(&r) % 40);
			break;
		}
		if (op % (RANDOM_OPS / 3) == RANDOM_OPS / 3 - 1) {
			check_all_lookups(&s, &m);
			subject_reopen(&s);
		}
	}
	check_all_lookups(&s, &m);
	check_full_scan(&s, &m, 333);
	subject_close(&s);
	model_free(&m);
}

static void run_suite(const char *name)
{
	int before = test_failures;
	part_empty(name);
	part_semantics(name);
	part_long_keys(name);
	part_boundaries(name, 0);
	part_boundaries(name, 1);
	part_growth(name);
	part_random(name, 0x9e3779b97f4a7c15ull);
	printf("%s: %s\n", name, test_failures == before ? "conforms" : "FAILED");
}

int main(int argc, char **argv)
{
	struct tips_listdb_config ldb;
	tips_listdb_config_init(&ldb);
	ldb.memtable_entries = 1000;
	int i = 1;
	for (; i + 1 < argc && strncmp(argv[i], "--listdb-", 9) == 0; i++) {
		const char *opt = argv[i];
		if (strcmp(opt, "--listdb-oblivious") == 0) {
			ldb.braided = 0;
			continue;
		}
		const char *v = argv[++i];
		if (strcmp(opt, "--listdb-memtable") == 0)
			ldb.memtable_entries = strtoull(v, NULL, 10);
		else if (strcmp(opt, "--listdb-domains") == 0)
			ldb.domains = (unsigned)strtoul(v, NULL, 10);
		else if (strcmp(opt, "--listdb-flush") == 0 && strcmp(v, "wal") == 0)
			ldb.flush_mode = TIPS_LISTDB_FLUSH_WAL;
		else if (strcmp(opt, "--listdb-flush") != 0 || strcmp(v, "iul") != 0) {
			fprintf(stderr, "%s: bad option %s %s\n", argv[0], opt, v);
			return 2;
		}
	}
	if (i >= argc) {
		fprintf(stderr, "usage: %s [--listdb-memtable N] [--listdb-domains D] "
			"[--listdb-oblivious] [--listdb-flush iul|wal] INDEX...\n", argv[0]);
		return 2;
	}
	bench_listdb_configure(&ldb);
	for (; i < argc; i++)
		run_suite(argv[i]);
	return test_finish("test_index_conformance");
}
