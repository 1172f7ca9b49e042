/*
 * test_index_dram.c - conformance test of the index ops-table contract
 * (struct tips_index_ops, tips/tips.h) on the volatile builds of the indexes.
 *
 * Runs on every dram-* index listed by tips_index_names() (or on the names given as
 * arguments), calling the ops table directly: no pool, no framework. The tips-* builds
 * need the framework around them (tips_alloc is only valid inside its ops calls) and
 * are tested through tips_open() in tests/framework.
 *
 * Covers: the registry; insert/update/remove/lookup return codes and values, same- and
 * different-length updates, lookup with a small buffer (the full length is reported);
 * keys of 1..100 bytes including prefixes of each other and 0x00/0xff bytes, and
 * 8-byte big-endian integer keys, against a reference model (a sorted key array) under
 * random operations; scan order, count, start-key semantics and early stop; walk
 * visiting the root, the bucket array and every node exactly once; and four threads
 * (two writers on disjoint key sets, two readers) with invariants checked throughout.
 * An index with the optional prefetch op has it called before each random operation
 * and by the readers while the writers run: a hint, it must change nothing.
 * The index is created with expected_keys 1000 so chains collide.
 *
 * Contract points this test fixes (not spelled out in tips.h): a walk stops at the
 * first non-zero return of its callback and returns that value; a scan's return counts
 * the pair whose callback stopped it; values may be empty; the dram builds allocate
 * with malloc, so the test frees an index by freeing what walk reports (the ops table
 * has no destroy).
 */
#define _GNU_SOURCE
#include "test_util.h"

#include <tips/plugin.h>

#include <pthread.h>
#include <sched.h>
#include <stdint.h>

#define MAXK 100
#define MAXV 200

/* ---- small helpers ------------------------------------------------------------------- */

struct idx {
	const struct tips_index_ops *ops;
	void *root;
	void *h;
	size_t fixed; /* blocks besides the root that the empty index owns (hash: 1) */
	size_t per_key; /* blocks one key adds (hash: 1; lfbst: 2, leaf + routing node) */
	size_t per_key_max; /* most blocks a key of the probed shapes adds */
	int exact; /* every probed key shape adds per_key blocks (clht: 8-byte keys and
		      values are inline, others are blocks: the count only has bounds) */
};

static int count_block(const void *block, void *arg)
{
	(void)block;
	++*(size_t *)arg;
	return 0;
}

static void idx_make(struct idx *x, const struct tips_index_ops *ops, uint64_t expected)
{
	struct tips_index_config cfg = { .expected_keys = expected };
	x->ops = ops;
	x->root = NULL;
	x->h = NULL;
	REQUIRE(ops->create(&cfg, &x->root) == 0);
	REQUIRE(x->root != NULL);
	REQUIRE(ops->open(x->root, &x->h) == 0);
	REQUIRE(x->h != NULL);
	size_t n = 0;
	REQUIRE(ops->walk(x->h, count_block, &n) == 0 && n >= 1);
	x->fixed = n - 1;
	/* One probe key, inserted and removed again: how many blocks a key adds. */
	size_t m = 0;
	REQUIRE(ops->insert(x->h, "\xff probe", 7, "", 0) == 0);
	REQUIRE(ops->walk(x->h, count_block, &m) == 0 && m >= n);
	REQUIRE(ops->remove(x->h, "\xff probe", 7) == 0);
	x->per_key = m - n;
	/* Two more shapes: 8-byte key and value, then 7-byte key and value. */
	size_t m8 = 0, m7 = 0;
	REQUIRE(ops->insert(x->h, "\xfe" "probe!8", 8, "8 bytes!", 8) == 0);
	REQUIRE(ops->walk(x->h, count_block, &m8) == 0 && m8 >= n);
	REQUIRE(ops->remove(x->h, "\xfe" "probe!8", 8) == 0);
	REQUIRE(ops->insert(x->h, "\xfd" "probe7", 7, "7 bytes", 7) == 0);
	REQUIRE(ops->walk(x->h, count_block, &m7) == 0 && m7 >= n);
	REQUIRE(ops->remove(x->h, "\xfd" "probe7", 7) == 0);
	x->exact = m8 - n == x->per_key && m7 - n == x->per_key;
	x->per_key_max = x->per_key;
	if (m8 - n > x->per_key_max)
		x->per_key_max = m8 - n;
	if (m7 - n > x->per_key_max)
		x->per_key_max = m7 - n;
	/* Two keys sharing a prefix: a radix tree adds an inner node for the pair (art:
	 * a Node4 over two leaves), so its blocks per key only have bounds. */
	size_t m2 = 0;
	REQUIRE(ops->insert(x->h, "\xfc" "probeA", 7, "", 0) == 0);
	REQUIRE(ops->insert(x->h, "\xfc" "probeB", 7, "", 0) == 0);
	REQUIRE(ops->walk(x->h, count_block, &m2) == 0 && m2 >= n);
	REQUIRE(ops->remove(x->h, "\xfc" "probeA", 7) == 0);
	REQUIRE(ops->remove(x->h, "\xfc" "probeB", 7) == 0);
	if (m2 - n != 2 * x->per_key) {
		x->exact = 0;
		if ((m2 - n + 1) / 2 > x->per_key_max)
			x->per_key_max = (m2 - n + 1) / 2;
	}
	/* No probe added a block: keys share nodes (bptree: a leaf holds up to 128), so a
	 * key adds its key and value blocks when they are long, and its share of the
	 * nodes (at worst a leaf and an inner node of its own): bounds only. */
	if (x->per_key_max == 0) {
		x->exact = 0;
		x->per_key_max = 4;
	}
}

static int ptr_cmp(const void *a, const void *b)
{
	uintptr_t x = (uintptr_t) * (const void *const *)a, y = (uintptr_t) * (const void *const *)b;
	return (x > y) - (x < y);
}

/* Walk: the root, then exactly x->per_key * @nodes + x->fixed more blocks (the non-node
 * blocks besides the root, such as hash's bucket array, and the blocks per key are
 * index-specific: idx_make counts them on the empty index and with one key). */
static void check_walk(struct idx *x, size_t nodes)
{
	size_t extra = x->fixed;
	struct test_blocks b = { NULL, 0, 0 };
	CHECK_RC(x->ops->walk(x->h, test_blocks_collect, &b), 0);
	if (x->exact) {
		nodes *= x->per_key;
		CHECK(b.n == 1 + extra + nodes);
		if (b.n != 1 + extra + nodes)
			fprintf(stderr, "  walk visited %zu blocks, wanted %zu\n", b.n,
				1 + extra + nodes);
	} else {
		/* Blocks per key depend on its shape: bounds here; exactness (no block
		 * missed) is checked by LeakSanitizer in ASan builds, since idx_destroy
		 * frees exactly what walk reports, and by tips_db_check for tips-*. */
		CHECK(b.n >= 1 + extra && b.n <= 1 + extra + nodes * x->per_key_max);
		if (b.n < 1 + extra || b.n > 1 + extra + nodes * x->per_key_max)
			fprintf(stderr, "  walk visited %zu blocks, wanted %zu..%zu\n", b.n,
				1 + extra, 1 + extra + nodes * x->per_key_max);
	}
	int has_root = 0;
	for (size_t i = 0; i < b.n; i++)
		has_root |= b.p[i] == x->root;
	CHECK(has_root);
	qsort(b.p, b.n, sizeof(*b.p), ptr_cmp);
	for (size_t i = 1; i < b.n; i++)
		CHECK(b.p[i] != b.p[i - 1]);
	free(b.p);
}

/* Closes the index and frees its blocks (dram builds allocate with malloc). */
static void idx_destroy(struct idx *x)
{
	struct test_blocks b = { NULL, 0, 0 };
	CHECK_RC(x->ops->walk(x->h, test_blocks_collect, &b), 0);
	x->ops->close(x->h);
	for (size_t i = 0; i < b.n; i++)
		free((void *)b.p[i]);
	free(b.p);
	x->h = x->root = NULL;
}

static int lookup_is(struct idx *x, const void *k, size_t klen, const void *v, size_t vlen)
{
	unsigned char buf[MAXV + 16];
	size_t got = (size_t)-1;
	int rc = x->ops->lookup(x->h, k, klen, buf, sizeof(buf), &got);
	return rc == 0 && got == vlen && memcmp(buf, v, vlen) == 0;
}

/* ---- registry ------------------------------------------------------------------------ */

static void test_registry(void)
{
	const char *const *names = tips_index_names();
	REQUIRE(names != NULL);
	int dram = 0, tips = 0;
	size_t n = 0;
	for (; names[n]; n++) {
		const struct tips_index_ops *o = tips_index_find(names[n]);
		CHECK(o != NULL);
		if (!o)
			continue;
		CHECK(strcmp(o->name, names[n]) == 0);
		CHECK(o->create && o->open && o->close && o->insert && o->update && o->remove &&
		      o->lookup && o->scan && o->walk);
		for (size_t j = 0; j < n; j++)
			CHECK(strcmp(names[j], names[n]) != 0);
		dram |= strcmp(names[n], "dram-hash") == 0;
		tips |= strcmp(names[n], "tips-hash") == 0;
	}
	CHECK(n >= 2);
	CHECK(dram && tips);
	CHECK(tips_index_find("dram-hash") != tips_index_find("tips-hash"));
	CHECK(tips_index_find("hash") == NULL);
	CHECK(tips_index_find("dram-hash ") == NULL);
	CHECK(tips_index_find("") == NULL);
	CHECK(tips_index_find(NULL) == NULL);
}

/* ---- basic semantics ------------------------------------------------------------------ */

static void test_basic(const struct tips_index_ops *ops)
{
	struct idx x;
	idx_make(&x, ops, 1000);
	const char *k = "apple";
	size_t vl = 0;
	unsigned char buf[256];

	CHECK_RC(ops->lookup(x.h, k, 5, buf, sizeof(buf), &vl), TIPS_ENOTFOUND);
	CHECK_RC(ops->update(x.h, k, 5, "v", 1), TIPS_ENOTFOUND);
	CHECK_RC(ops->remove(x.h, k, 5), TIPS_ENOTFOUND);
	CHECK_RC(ops->insert(x.h, k, 5, "red", 3), 0);
	CHECK_RC(ops->insert(x.h, k, 5, "green", 5), TIPS_EKEYEXISTS);
	CHECK(lookup_is(&x, k, 5, "red", 3)); /* a failed insert changes nothing */
	CHECK_RC(ops->update(x.h, k, 5, "tan", 3), 0); /* same length */
	CHECK(lookup_is(&x, k, 5, "tan", 3));
	CHECK_RC(ops->update(x.h, k, 5, "yellowish", 9), 0); /* longer */
	CHECK(lookup_is(&x, k, 5, "yellowish", 9));
	CHECK_RC(ops->update(x.h, k, 5, "ok", 2), 0); /* shorter */
	CHECK(lookup_is(&x, k, 5, "ok", 2));
	CHECK_RC(ops->update(x.h, k, 5, "", 0), 0); /* empty value */
	CHECK(lookup_is(&x, k, 5, "", 0));
	CHECK_RC(ops->update(x.h, k, 5, "", 0), 0); /* empty, same length */
	CHECK_RC(ops->update(x.h, k, 5, "back", 4), 0);
	CHECK(lookup_is(&x, k, 5, "back", 4));

	/* Prefixes are different keys. */
	CHECK_RC(ops->lookup(x.h, "appl", 4, buf, sizeof(buf), &vl), TIPS_ENOTFOUND);
	CHECK_RC(ops->lookup(x.h, "apples", 6, buf, sizeof(buf), &vl), TIPS_ENOTFOUND);
	CHECK_RC(ops->insert(x.h, "appl", 4, "1", 1), 0);
	CHECK_RC(ops->insert(x.h, "apples", 6, "2", 1), 0);
	CHECK(lookup_is(&x, "appl", 4, "1", 1));
	CHECK(lookup_is(&x, "apples", 6, "2", 1));
	CHECK(lookup_is(&x, k, 5, "back", 4));

	/* Small buffer: TIPS_ESIZE (plugin contract), copies cap bytes, reports the full
	 * length; a buffer of exactly the value's length is enough. */
	unsigned char big[100];
	for (int i = 0; i < 100; i++)
		big[i] = (unsigned char)(i * 7 + 1);
	CHECK_RC(ops->insert(x.h, "big", 3, big, 100), 0);
	memset(buf, 0xAA, sizeof(buf));
	vl = 0;
	CHECK_RC(ops->lookup(x.h, "big", 3, buf, 10, &vl), TIPS_ESIZE);
	CHECK(strstr(tips_errormsg(), "buffer") != NULL);
	CHECK(vl == 100);
	CHECK(memcmp(buf, big, 10) == 0);
	int untouched = 1;
	for (int i = 10; i < 256; i++)
		untouched &= buf[i] == 0xAA;
	CHECK(untouched);
	vl = 0;
	CHECK_RC(ops->lookup(x.h, "big", 3, NULL, 0, &vl), TIPS_ESIZE);
	CHECK(vl == 100);
	vl = 0;
	CHECK_RC(ops->lookup(x.h, "big", 3, buf, 100, &vl), 0);
	CHECK(vl == 100 && memcmp(buf, big, 100) == 0);
	/* An 8-byte value (the indexes' inline fast paths) into 4 bytes. */
	CHECK_RC(ops->insert(x.h, "word", 4, "12345678", 8), 0);
	memset(buf, 0xAA, sizeof(buf));
	vl = 0;
	CHECK_RC(ops->lookup(x.h, "word", 4, buf, 4, &vl), TIPS_ESIZE);
	CHECK(vl == 8 && memcmp(buf, "1234", 4) == 0 && buf[4] == 0xAA);
	CHECK_RC(ops->lookup(x.h, "word", 4, buf, 8, &vl), 0);
	CHECK(vl == 8 && memcmp(buf, "12345678", 8) == 0);
	CHECK_RC(ops->remove(x.h, "word", 4), 0);

	/* Remove, then absent everywhere, then insert again. */
	CHECK_RC(ops->remove(x.h, k, 5), 0);
	CHECK_RC(ops->remove(x.h, k, 5), TIPS_ENOTFOUND);
	CHECK_RC(ops->lookup(x.h, k, 5, buf, sizeof(buf), &vl), TIPS_ENOTFOUND);
	CHECK_RC(ops->update(x.h, k, 5, "x", 1), TIPS_ENOTFOUND);
	CHECK(lookup_is(&x, "appl", 4, "1", 1));
	CHECK(lookup_is(&x, "apples", 6, "2", 1));
	CHECK_RC(ops->insert(x.h, k, 5, "again", 5), 0);
	CHECK(lookup_is(&x, k, 5, "again", 5));

	/* Keys with zero bytes, and the longest key. */
	CHECK_RC(ops->insert(x.h, "\0\0", 2, "z2", 2), 0);
	CHECK_RC(ops->insert(x.h, "\0", 1, "z1", 2), 0);
	CHECK(lookup_is(&x, "\0\0", 2, "z2", 2));
	CHECK(lookup_is(&x, "\0", 1, "z1", 2));
	static unsigned char longkey[TIPS_MAX_KEY];
	memset(longkey, 'L', sizeof(longkey));
	CHECK_RC(ops->insert(x.h, longkey, sizeof(longkey), "long", 4), 0);
	CHECK(lookup_is(&x, longkey, sizeof(longkey), "long", 4));
	CHECK(ops->insert(x.h, longkey, 1, "short", 5) == 0);
	CHECK(lookup_is(&x, longkey, sizeof(longkey), "long", 4));

	check_walk(&x, 8); /* apple appl apples big \0\0 \0 L*1024 L */
	idx_destroy(&x);
}

/* ---- model-based random test ------------------------------------------------------------ */

struct entry {
	unsigned char key[MAXK];
	unsigned char val[MAXV];
	uint32_t klen, vlen;
	int present;
};

static int entry_cmp(const void *a, const void *b)
{
	const struct entry *x = a, *y = b;
	return key_cmp(x->key, x->klen, y->key, y->klen);
}

struct model {
	struct entry *e; /* sorted by key, distinct */
	size_t n, present;
};

/* Distinct keys: random 1..MAXK bytes over {00, 01, 'a', ff} (many shared prefixes),
 * a prefix chain 'm', 'mm', ... of every length, and 8-byte big-endian integers. */
static void model_init(struct model *m, size_t nrandom, uint64_t *seed)
{
	size_t cap = nrandom + MAXK + 1000;
	m->e = calloc(cap, sizeof(*m->e));
	REQUIRE(m->e != NULL);
	size_t n = 0;
	static const unsigned char alpha[] = { 0x00, 0x01, 'a', 0xff };
	for (size_t i = 0; i < nrandom; i++, n++) {
		/* Mostly short keys, so that many collide as prefixes. */
		uint32_t len = (uint32_t)(rnd(seed) % 4 ? 1 + rnd(seed) % 8 : 1 + rnd(seed) % MAXK);
		m->e[n].klen = len;
		for (uint32_t j = 0; j < len; j++)
			m->e[n].key[j] = alpha[rnd(seed) % 4];
	}
	for (uint32_t len = 1; len <= MAXK; len++, n++) {
		m->e[n].klen = len;
		memset(m->e[n].key, 'm', len);
	}
	for (uint64_t i = 0; i < 1000; i++, n++) {
		m->e[n].klen = 8;
		be64(m->e[n].key, i * 0x100000001ull + (i & 1 ? 0xff : 0)); /* spans all bytes */
	}
	qsort(m->e, n, sizeof(*m->e), entry_cmp);
	size_t w = 0;
	for (size_t i = 0; i < n; i++)
		if (w == 0 || entry_cmp(&m->e[w - 1], &m->e[i]) != 0)
			m->e[w++] = m->e[i];
	m->n = w;
	m->present = 0;
}

static void random_value(unsigned char *v, uint32_t *vlen, uint32_t len, uint64_t *seed)
{
	*vlen = len;
	for (uint32_t i = 0; i < len; i++)
		v[i] = (unsigned char)rnd(seed);
}

struct scan_out {
	size_t calls, stop_after;
	struct entry *got; /* calls entries, as passed to fn */
	size_t cap;
	int bad; /* a key or value longer than the model allows */
};

static int scan_collect(const void *key, size_t klen, const void *val, size_t vlen, void *arg)
{
	struct scan_out *o = arg;
	if (o->calls == o->cap) {
		o->cap = o->cap ? 2 * o->cap : 256;
		o->got = realloc(o->got, o->cap * sizeof(*o->got));
		REQUIRE(o->got != NULL);
	}
	struct entry *e = &o->got[o->calls++];
	if (klen > MAXK || vlen > MAXV) {
		o->bad = 1;
		e->klen = e->vlen = 0;
	} else {
		memcpy(e->key, key, klen);
		memcpy(e->val, val, vlen);
		e->klen = (uint32_t)klen;
		e->vlen = (uint32_t)vlen;
	}
	return o->stop_after && o->calls >= o->stop_after;
}

/* One scan checked against the model: the first @count present keys >= start. */
static void check_scan(struct idx *x, struct model *m, const unsigned char *start,
		       size_t klen, size_t count, size_t stop_after)
{
	struct scan_out o = { 0, stop_after, NULL, 0, 0 };
	long r = x->ops->scan(x->h, start, klen, count, scan_collect, &o);
	/* expected: model entries from lower_bound(start) */
	size_t i = 0;
	if (klen) {
		size_t lo = 0, hi = m->n;
		while (lo < hi) {
			size_t mid = (lo + hi) / 2;
			if (key_cmp(m->e[mid].key, m->e[mid].klen, start, klen) < 0)
				lo = mid + 1;
			else
				hi = mid;
		}
		i = lo;
	}
	size_t want = 0, k = 0;
	size_t limit = count;
	if (stop_after && stop_after < limit)
		limit = stop_after;
	int ok = !o.bad;
	for (; i < m->n && want < limit; i++) {
		const struct entry *e = &m->e[i];
		if (!e->present)
			continue;
		want++;
		if (k < o.calls) {
			const struct entry *g = &o.got[k++];
			ok &= g->klen == e->klen && memcmp(g->key, e->key, e->klen) == 0 &&
			      g->vlen == e->vlen && memcmp(g->val, e->val, e->vlen) == 0;
		}
	}
	ok &= o.calls == want && r == (long)want;
	CHECK(ok);
	if (!ok)
		fprintf(stderr, "  scan(klen %zu, count %zu, stop %zu): returned %ld, %zu calls, "
				"wanted %zu\n",
			klen, count, stop_after, r, o.calls, want);
	free(o.got);
}

static void check_scans(struct idx *x, struct model *m, uint64_t *seed)
{
	check_scan(x, m, NULL, 0, SIZE_MAX, 0);      /* everything, in order */
	check_scan(x, m, NULL, 0, 0, 0);             /* count 0: nothing */
	check_scan(x, m, NULL, 0, 1, 0);             /* the smallest key */
	check_scan(x, m, NULL, 0, m->present + 5, 0);
	check_scan(x, m, NULL, 0, SIZE_MAX, 3);      /* fn stops the scan */
	unsigned char hi[MAXK + 1];
	memset(hi, 0xff, sizeof(hi));
	check_scan(x, m, hi, sizeof(hi), 10, 0);     /* beyond every key */
	static const size_t counts[] = { 1, 2, 7, 64, 1000 };
	for (int t = 0; t < 40; t++) {
		size_t count = counts[rnd(seed) % 5];
		if (t % 2 == 0) { /* start at a model key, present or not */
			const struct entry *e = &m->e[rnd(seed) % m->n];
			check_scan(x, m, e->key, e->klen, count, t % 8 == 0 ? 2 : 0);
		} else { /* a start that is (probably) no key: a random string */
			unsigned char s[MAXK];
			size_t len = 1 + rnd(seed) % 12;
			for (size_t j = 0; j < len; j++)
				s[j] = (unsigned char)"\x00\x01\x02" "a" "b" "m" "\xfe\xff"[rnd(seed) % 8];
			check_scan(x, m, s, len, count, 0);
		}
	}
}

static void check_all_lookups(struct idx *x, struct model *m)
{
	size_t bad = 0;
	unsigned char buf[MAXV];
	for (size_t i = 0; i < m->n; i++) {
		const struct entry *e = &m->e[i];
		size_t vl = (size_t)-1;
		int rc = x->ops->lookup(x->h, e->key, e->klen, buf, sizeof(buf), &vl);
		if (e->present)
			bad += !(rc == 0 && vl == e->vlen && memcmp(buf, e->val, e->vlen) == 0);
		else
			bad += rc != TIPS_ENOTFOUND;
	}
	CHECK(bad == 0);
	if (bad)
		fprintf(stderr, "  %zu of %zu keys disagree with the model\n", bad, m->n);
}

static void test_model(const struct tips_index_ops *ops, uint64_t seed)
{
	struct idx x;
	idx_make(&x, ops, 1000);
	struct model m;
	model_init(&m, 3000, &seed);
	printf("  model: %zu distinct keys\n", m.n);

	const size_t nops = 40000;
	size_t wrong = 0;
	for (size_t op = 1; op <= nops; op++) {
		struct entry *e = &m.e[rnd(&seed) % m.n];
		unsigned char v[MAXV];
		uint32_t vlen;
		int rc, want;
		if (ops->prefetch) /* a hint: the model must still agree after it */
			ops->prefetch(x.h, e->key, e->klen, (int)(op % 3));
		switch (rnd(&seed) % 8) {
		case 0: case 1: case 2: /* insert */
			random_value(v, &vlen, (uint32_t)(rnd(&seed) % MAXV), &seed);
			rc = ops->insert(x.h, e->key, e->klen, v, vlen);
			want = e->present ? TIPS_EKEYEXISTS : 0;
			if (rc == 0 && !e->present) {
				memcpy(e->val, v, vlen);
				e->vlen = vlen;
				e->present = 1;
				m.present++;
			}
			break;
		case 3: case 4: /* update, same length half the time */
			random_value(v, &vlen,
				     e->present && rnd(&seed) % 2 ? e->vlen
								  : (uint32_t)(rnd(&seed) % MAXV),
				     &seed);
			rc = ops->update(x.h, e->key, e->klen, v, vlen);
			want = e->present ? 0 : TIPS_ENOTFOUND;
			if (rc == 0 && e->present) {
				memcpy(e->val, v, vlen);
				e->vlen = vlen;
			}
			break;
		case 5: /* remove */
			rc = ops->remove(x.h, e->key, e->klen);
			want = e->present ? 0 : TIPS_ENOTFOUND;
			if (rc == 0 && e->present) {
				e->present = 0;
				m.present--;
			}
			break;
		default: { /* lookup */
			unsigned char buf[MAXV];
			size_t vl = (size_t)-1;
			rc = ops->lookup(x.h, e->key, e->klen, buf, sizeof(buf), &vl);
			want = e->present ? 0 : TIPS_ENOTFOUND;
			if (rc == 0 && e->present && (vl != e->vlen || memcmp(buf, e->val, vl)))
				rc = 1; /* wrong value */
			break;
		}
		}
		if (rc != want && wrong++ < 5)
			fprintf(stderr, "  op %zu: returned %d, wanted %d\n", op, rc, want);
		if (op % 10000 == 0) {
			check_all_lookups(&x, &m);
			check_scans(&x, &m, &seed);
			check_walk(&x, m.present);
		}
	}
	CHECK(wrong == 0);
	printf("  model: %zu ops, %zu keys present at the end\n", nops, m.present);

	/* Empty the index through remove; everything reads absent. */
	for (size_t i = 0; i < m.n; i++)
		if (m.e[i].present) {
			CHECK_RC(ops->remove(x.h, m.e[i].key, m.e[i].klen), 0);
			m.e[i].present = 0;
		}
	m.present = 0;
	check_all_lookups(&x, &m);
	check_scan(&x, &m, NULL, 0, SIZE_MAX, 0);
	check_walk(&x, 0);
	idx_destroy(&x);
	free(m.e);
}

/* ---- 8-byte big-endian integer keys ---------------------------------------------------- */

struct int_scan {
	uint64_t next; /* the integer expected next */
	uint64_t step;
	size_t calls;
	int bad;
};

static int int_scan_fn(const void *key, size_t klen, const void *val, size_t vlen, void *arg)
{
	struct int_scan *s = arg;
	unsigned char want[8];
	be64(want, s->next);
	uint64_t v = 0;
	if (vlen == 8)
		memcpy(&v, val, 8);
	if (klen != 8 || memcmp(key, want, 8) != 0 || vlen != 8 || v != s->next * 3)
		s->bad = 1;
	s->next += s->step;
	s->calls++;
	return 0;
}

static void test_int_keys(const struct tips_index_ops *ops, uint64_t seed)
{
	struct idx x;
	idx_make(&x, ops, 1000);
	enum { N = 5000 };
	uint64_t *perm = malloc(N * sizeof(*perm));
	REQUIRE(perm != NULL);
	for (uint64_t i = 0; i < N; i++)
		perm[i] = i;
	for (size_t i = N - 1; i > 0; i--) {
		size_t j = rnd(&seed) % (i + 1);
		uint64_t t = perm[i];
		perm[i] = perm[j];
		perm[j] = t;
	}
	size_t bad = 0;
	for (size_t i = 0; i < N; i++) {
		unsigned char k[8];
		uint64_t v = perm[i] * 3;
		be64(k, perm[i]);
		bad += ops->insert(x.h, k, 8, &v, 8) != 0;
	}
	CHECK(bad == 0);
	for (uint64_t i = 0; i < N; i++) {
		unsigned char k[8];
		uint64_t v = i * 3;
		be64(k, i);
		bad += !lookup_is(&x, k, 8, &v, 8);
	}
	CHECK(bad == 0);

	unsigned char k[8];
	struct int_scan s = { 1234, 1, 0, 0 };
	be64(k, 1234);
	CHECK(ops->scan(x.h, k, 8, 100, int_scan_fn, &s) == 100);
	CHECK(s.calls == 100 && !s.bad);
	s = (struct int_scan){ 4990, 1, 0, 0 };
	be64(k, 4990);
	CHECK(ops->scan(x.h, k, 8, 100, int_scan_fn, &s) == 10);
	CHECK(s.calls == 10 && !s.bad);
	s = (struct int_scan){ 0, 1, 0, 0 };
	CHECK(ops->scan(x.h, NULL, 0, SIZE_MAX, int_scan_fn, &s) == N);
	CHECK(s.calls == N && !s.bad);
	/* A 4-byte start sorts before every 8-byte key that extends it. */
	s = (struct int_scan){ 0, 1, 0, 0 };
	CHECK(ops->scan(x.h, "\0\0\0\0", 4, 5, int_scan_fn, &s) == 5);
	CHECK(s.calls == 5 && !s.bad);

	/* Remove the even keys: a scan from 0 sees 1, 3, 5, ... */
	for (uint64_t i = 0; i < N; i += 2) {
		be64(k, i);
		bad += ops->remove(x.h, k, 8) != 0;
	}
	CHECK(bad == 0);
	s = (struct int_scan){ 1, 2, 0, 0 };
	be64(k, 0);
	CHECK(ops->scan(x.h, k, 8, 10, int_scan_fn, &s) == 10);
	CHECK(s.calls == 10 && !s.bad);
	check_walk(&x, N / 2);
	free(perm);
	idx_destroy(&x);
}

/* ---- walk stops at the callback's first non-zero ---------------------------------------- */

static int walk_stop3(const void *block, void *arg)
{
	int *calls = arg;
	return ++*calls == 3 ? 7 : 0;
}

static void test_walk_stop(const struct tips_index_ops *ops)
{
	struct idx x;
	idx_make(&x, ops, 1000);
	for (int i = 0; i < 10; i++) {
		unsigned char k[8];
		be64(k, (uint64_t)i);
		/* A value of more than 8 bytes: a block of its own in every index, so the
		 * walk has more than 3 blocks to report even where keys share nodes. */
		CHECK_RC(ops->insert(x.h, k, 8, "a 16-byte value", 16), 0);
	}
	int calls = 0;
	CHECK(ops->walk(x.h, walk_stop3, &calls) == 7);
	CHECK(calls == 3);
	idx_destroy(&x);
}

/* ---- concurrency: two writers on disjoint keys, two readers -------------------------------- */

#define STABLE 500   /* keys "s"+be64(i): inserted first, never written again */
#define WKEYS 2000   /* keys "w<t>"+be64(i) per writer */
#define SCAN_N 50

static void wkey(unsigned char *k, int t, uint64_t i)
{
	k[0] = 'w';
	k[1] = (unsigned char)('0' + t);
	be64(k + 2, i);
}

static void skey(unsigned char *k, uint64_t i)
{
	k[0] = 's';
	be64(k + 1, i);
}

static uint64_t fingerprint(const void *key, size_t klen)
{
	const unsigned char *p = key;
	uint64_t h = 1469598103934665603ull;
	for (size_t i = 0; i < klen; i++)
		h = (h ^ p[i]) * 1099511628211ull;
	return h;
}

/* A well-formed value of @len >= 9 bytes: the key's fingerprint, then seed, seed+1, ... */
__attribute__((noinline)) /* GCC 12 -O3 warns falsely when inlined */
static void make_value(unsigned char *v, size_t len, const void *key, size_t klen,
		       unsigned char seed)
{
	uint64_t f = fingerprint(key, klen);
	memcpy(v, &f, 8);
	unsigned char *tail = v + 8;
	for (size_t i = 0; i + 8 < len; i++)
		tail[i] = (unsigned char)(seed + i);
}

static int value_ok(const unsigned char *v, size_t len, const void *key, size_t klen)
{
	uint64_t f = fingerprint(key, klen), g;
	if (len < 9 || len > 64)
		return 0;
	memcpy(&g, v, 8);
	if (f != g)
		return 0;
	for (size_t i = 9; i < len; i++)
		if (v[i] != (unsigned char)(v[8] + (i - 8)))
			return 0;
	return 1;
}

struct conc {
	const struct tips_index_ops *ops;
	void *h;
	_Atomic int writers_left;
};

struct writer {
	struct conc *c;
	int t;
	uint64_t seed;
	unsigned char present[WKEYS];
	unsigned char vlen[WKEYS];
	unsigned char vseed[WKEYS];
	size_t errors, ops;
};

static void *writer_main(void *arg)
{
	struct writer *w = arg;
	const struct tips_index_ops *ops = w->c->ops;
	for (size_t n = 0; n < 30000; n++, w->ops++) {
		uint64_t i = rnd(&w->seed) % WKEYS;
		unsigned char k[10], v[64];
		wkey(k, w->t, i);
		unsigned char seed = (unsigned char)rnd(&w->seed);
		size_t len = 9 + rnd(&w->seed) % 56;
		int rc;
		switch (rnd(&w->seed) % 4) {
		case 0:
		case 1:
			make_value(v, len, k, 10, seed);
			rc = ops->insert(w->c->h, k, 10, v, len);
			if (rc != (w->present[i] ? TIPS_EKEYEXISTS : 0))
				w->errors++;
			if (rc == 0) {
				w->present[i] = 1;
				w->vlen[i] = (unsigned char)len;
				w->vseed[i] = seed;
			}
			break;
		case 2:
			if (w->present[i] && rnd(&w->seed) % 2)
				len = w->vlen[i]; /* in place */
			make_value(v, len, k, 10, seed);
			rc = ops->update(w->c->h, k, 10, v, len);
			if (rc != (w->present[i] ? 0 : TIPS_ENOTFOUND))
				w->errors++;
			if (rc == 0) {
				w->vlen[i] = (unsigned char)len;
				w->vseed[i] = seed;
			}
			break;
		default:
			rc = ops->remove(w->c->h, k, 10);
			if (rc != (w->present[i] ? 0 : TIPS_ENOTFOUND))
				w->errors++;
			if (rc == 0)
				w->present[i] = 0;
			break;
		}
	}
	w->c->writers_left--;
	return NULL;
}

struct reader {
	struct conc *c;
	uint64_t seed;
	size_t errors, lookups, scans, found;
};

struct rscan {
	unsigned char prev[16];
	size_t prev_len, calls;
	uint64_t first_stable; /* stable keys expected first, from this index */
	int bad;
};

static int reader_scan_fn(const void *key, size_t klen, const void *val, size_t vlen, void *arg)
{
	struct rscan *s = arg;
	if (klen > sizeof(s->prev) || !value_ok(val, vlen, key, klen))
		s->bad = 1;
	else if (s->calls && key_cmp(s->prev, s->prev_len, key, klen) >= 0)
		s->bad = 1; /* not strictly ascending */
	if (s->first_stable + s->calls < STABLE) { /* must be the next stable key */
		unsigned char want[9];
		skey(want, s->first_stable + s->calls);
		if (klen != 9 || memcmp(key, want, 9) != 0)
			s->bad = 1;
	} else if (klen != 10 || ((const unsigned char *)key)[0] != 'w') {
		s->bad = 1;
	}
	if (klen <= sizeof(s->prev)) {
		memcpy(s->prev, key, klen);
		s->prev_len = klen;
	}
	s->calls++;
	return 0;
}

static void *reader_main(void *arg)
{
	struct reader *r = arg;
	const struct tips_index_ops *ops = r->c->ops;
	while (r->c->writers_left > 0 || r->lookups < 1000) {
		unsigned char k[10], v[64];
		size_t vl = 0;
		uint64_t i = rnd(&r->seed);
		if (i % 3 == 0) { /* a stable key: always there, always its first value */
			unsigned char want[64];
			skey(k, i % STABLE);
			make_value(want, 20, k, 9, (unsigned char)(i % STABLE));
			int rc = ops->lookup(r->c->h, k, 9, v, sizeof(v), &vl);
			if (rc != 0 || vl != 20 || memcmp(v, want, 20) != 0)
				r->errors++;
		} else { /* a writer's key: absent, or a well-formed value of its own */
			wkey(k, (int)(i % 2), (i >> 8) % WKEYS);
			if (ops->prefetch) /* while writers relink and resize (ASan: no stale read) */
				ops->prefetch(r->c->h, k, 10, (int)((i >> 1) % 3));
			int rc = ops->lookup(r->c->h, k, 10, v, sizeof(v), &vl);
			if (rc == 0) {
				r->found++;
				if (!value_ok(v, vl, k, 10))
					r->errors++;
			} else if (rc != TIPS_ENOTFOUND) {
				r->errors++;
			}
		}
		r->lookups++;
		if (r->lookups % 64 == 0) {
			struct rscan s = { .calls = 0, .bad = 0 };
			uint64_t j = rnd(&r->seed) % (STABLE + 10);
			long got;
			if (j >= STABLE) {
				s.first_stable = 0;
				got = ops->scan(r->c->h, NULL, 0, SCAN_N, reader_scan_fn, &s);
			} else {
				s.first_stable = j;
				skey(k, j);
				got = ops->scan(r->c->h, k, 9, SCAN_N, reader_scan_fn, &s);
			}
			/* Only the stable keys are sure to be present: a scan may come back
			 * short only once it has passed all of them. */
			if (s.bad || got != (long)s.calls || got > SCAN_N ||
			    (got < SCAN_N && s.first_stable + (uint64_t)got < STABLE))
				r->errors++;
			r->scans++;
		}
	}
	return NULL;
}

static void test_concurrent(const struct tips_index_ops *ops, uint64_t seed)
{
	struct idx x;
	idx_make(&x, ops, 1000);
	for (uint64_t i = 0; i < STABLE; i++) {
		unsigned char k[9], v[20];
		skey(k, i);
		make_value(v, 20, k, 9, (unsigned char)i);
		CHECK_RC(ops->insert(x.h, k, 9, v, 20), 0);
	}
	struct conc c = { ops, x.h, 2 };
	struct writer w[2];
	struct reader r[2];
	pthread_t tw[2], tr[2];
	for (int t = 0; t < 2; t++) {
		memset(&w[t], 0, sizeof(w[t]));
		w[t].c = &c;
		w[t].t = t;
		w[t].seed = seed + 100 + (uint64_t)t;
		r[t] = (struct reader){ &c, seed + 200 + (uint64_t)t, 0, 0, 0, 0 };
	}
	for (int t = 0; t < 2; t++) {
		REQUIRE(pthread_create(&tw[t], NULL, writer_main, &w[t]) == 0);
		REQUIRE(pthread_create(&tr[t], NULL, reader_main, &r[t]) == 0);
	}
	for (int t = 0; t < 2; t++) {
		pthread_join(tw[t], NULL);
		pthread_join(tr[t], NULL);
	}
	size_t total = STABLE;
	for (int t = 0; t < 2; t++) {
		CHECK(w[t].errors == 0);
		CHECK(r[t].errors == 0);
		CHECK(r[t].scans > 0);
		printf("  thread pair %d: writer %zu ops (%zu wrong), reader %zu lookups "
		       "(%zu found), %zu scans (%zu wrong)\n",
		       t, w[t].ops, w[t].errors, r[t].lookups, r[t].found, r[t].scans, r[t].errors);
		/* The final state is exactly each writer's model. */
		size_t bad = 0;
		for (uint64_t i = 0; i < WKEYS; i++) {
			unsigned char k[10], v[64];
			wkey(k, t, i);
			make_value(v, w[t].vlen[i], k, 10, w[t].vseed[i]);
			if (w[t].present[i])
				bad += !lookup_is(&x, k, 10, v, w[t].vlen[i]);
			else
				bad += ops->lookup(x.h, k, 10, NULL, 0, NULL) != TIPS_ENOTFOUND;
			total += w[t].present[i];
		}
		CHECK(bad == 0);
	}
	struct rscan s = { .calls = 0, .bad = 0, .first_stable = 0 };
	CHECK(ops->scan(x.h, NULL, 0, SIZE_MAX, reader_scan_fn, &s) == (long)total);
	CHECK(!s.bad);
	check_walk(&x, total);
	idx_destroy(&x);
}

/* ---- a hot key: in-place updates against readers ----------------------------------- */

#define HOT_LEN MAXV    /* long enough that an in-place copy takes many stores */
#define HOT_LOOKUPS 300000

struct hot {
	const struct tips_index_ops *ops;
	void *h;
	_Atomic int started, stop;
	unsigned updates;     /* the writer's, and the fill byte of the last one */
	size_t failed;        /* the writer's updates that did not return 0 */
};

static void *hot_writer(void *arg)
{
	struct hot *t = arg;
	unsigned char v[HOT_LEN];
	while (!t->stop) {
		t->updates++;
		memset(v, (int)(t->updates & 0xff), sizeof(v)); /* same length: in place */
		if (t->ops->update(t->h, "hot", 3, v, sizeof(v)) != 0)
			t->failed++;
		t->started = 1;
	}
	return NULL;
}

/* A reader of a key that a writer keeps overwriting in place must see each value whole:
 * all HOT_LEN bytes one fill byte. The reader starts once the writer has, and stops it
 * after HOT_LOOKUPS lookups, so the two overlap whatever the scheduler does. */
static void test_hot_key(const struct tips_index_ops *ops)
{
	struct idx x;
	idx_make(&x, ops, 1000);
	unsigned char v[HOT_LEN];
	memset(v, 0, sizeof(v));
	CHECK_RC(ops->insert(x.h, "hot", 3, v, sizeof(v)), 0);
	struct hot t = { ops, x.h, 0, 0, 0, 0 };
	size_t torn = 0;
	pthread_t tw;
	REQUIRE(pthread_create(&tw, NULL, hot_writer, &t) == 0);
	while (!t.started)
		sched_yield();
	for (size_t n = 0; n < HOT_LOOKUPS; n++) {
		size_t vl = 0;
		int rc = ops->lookup(x.h, "hot", 3, v, sizeof(v), &vl);
		int whole = rc == 0 && vl == HOT_LEN;
		for (size_t i = 1; whole && i < HOT_LEN; i++)
			whole = v[i] == v[0];
		torn += !whole;
	}
	t.stop = 1;
	pthread_join(tw, NULL);
	CHECK(t.failed == 0);
	CHECK(torn == 0);
	memset(v, (int)(t.updates & 0xff), sizeof(v));
	CHECK(lookup_is(&x, "hot", 3, v, HOT_LEN));
	printf("  hot key: %d lookups against %u in-place updates, %zu torn or wrong\n",
	       HOT_LOOKUPS, t.updates, torn);
	idx_destroy(&x);
}

/* ---- clht's layout version ------------------------------------------------------------- */

/* A clht root of layout 1 (before 0.4.0, another hash of 8-byte keys) is refused with
 * TIPS_EVERSION and a message, not read with the new hash; layout 2 opens again. */
static void test_clht_layout1_refused(void)
{
	const struct tips_index_ops *ops = tips_index_find("dram-clht");
	REQUIRE(ops != NULL);
	struct idx x;
	idx_make(&x, ops, 1000);
	REQUIRE(ops->insert(x.h, "8bytes!!", 8, "value!!!", 8) == 0);
	ops->close(x.h);
	uint64_t magic, v1 = 0x31746c6873706974ull; /* the root's first word: "tipshlt1" */
	memcpy(&magic, x.root, 8);
	CHECK(magic == 0x32746c6873706974ull);     /* "tipshlt2" */
	memcpy(x.root, &v1, 8);
	void *h = NULL;
	CHECK_RC(ops->open(x.root, &h), TIPS_EVERSION);
	CHECK(h == NULL && strstr(tips_errormsg(), "layout 1") != NULL);
	memcpy(x.root, &magic, 8);
	CHECK_RC(ops->open(x.root, &x.h), 0);
	CHECK(lookup_is(&x, "8bytes!!", 8, "value!!!", 8));
	idx_destroy(&x);
	printf("  clht layout 1 refused\n");
}

/* ---- main ------------------------------------------------------------------------------- */

static void run_suite(const struct tips_index_ops *ops)
{
	printf("%s:\n", ops->name);
	test_basic(ops);
	test_hot_key(ops);
	test_model(ops, 0x1234567887654321ull);
	test_model(ops, 42);
	test_int_keys(ops, 7);
	test_walk_stop(ops);
	test_concurrent(ops, 99);
}

int main(int argc, char **argv)
{
	test_registry();
	REQUIRE(tips_index_find("dram-hash") != NULL);
	test_clht_layout1_refused();
	if (argc > 1) {
		for (int i = 1; i < argc; i++) {
			const struct tips_index_ops *ops = tips_index_find(argv[i]);
			if (!ops || strncmp(argv[i], "dram-", 5) != 0) {
				fprintf(stderr, "%s: not a dram-* index\n", argv[i]);
				return 2;
			}
			run_suite(ops);
		}
	} else {
		for (const char *const *n = tips_index_names(); *n; n++)
			if (strncmp(*n, "dram-", 5) == 0)
				run_suite(tips_index_find(*n));
	}
	return test_finish("test_index_dram");
}
