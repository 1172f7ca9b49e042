/*
 * test_index_nomem.c - every index fails cleanly when an allocation fails.
 *
 * The contract (idx_hooks.h, IDX_ALLOC): an insert, update or remove that cannot get a
 * block returns TIPS_ENOMEM and leaves the index exactly as it was, so that the
 * framework can retry it after reclamation; growth that only helps (a table resize, a
 * smaller node) is skipped when its allocation fails. This test checks it on the dram
 * build of every index (or of the dram-* names given as arguments), calling the ops
 * table directly, single-threaded, with the fault injector of src/indexes/idx_alloc.h:
 * after idx_alloc_fail_after(n), n allocations succeed and every later one fails.
 *
 * Each index is created with expected_keys 16 (so clht resizes several times; art grows
 * and shrinks nodes, bptree splits and frees nodes) and runs three phases (fill, mixed,
 * drain) of random inserts, updates (values of 0..200 bytes, so nodes and value blocks
 * change size and kind) and removes over ~2000 keys of mixed shapes, against a model.
 * Two of three operations run under injection: the operation is tried with the
 * countdown at k = 0, 1, 2, ... (every allocation site it reaches fails once in turn),
 * and after a TIPS_ENOMEM either the next k or, half the time, no injection at all; so
 * the last attempt always succeeds. Then, on a fresh index, every key is inserted,
 * updated and removed with k = 0, 1, 2, ... until the operation succeeds, so that
 * every allocation of every operation, each growth included (every clht resize, art
 * node growth, bptree split), fails once. After every TIPS_ENOMEM the test checks that
 * the injector did refuse an allocation (no ENOMEM out of nothing), that the key's
 * lookup still matches the model, and that walk reports exactly the same set of blocks
 * as before the operation (no node half-linked or freed while still reachable, none
 * added); every 256 operations and at the end of each phase all keys are looked up and
 * a full scan is compared with the model. The attempt that succeeds must return what the
 * model says (0, TIPS_EKEYEXISTS or TIPS_ENOTFOUND). Blocks leaked by a failed
 * operation are caught by LeakSanitizer in an ASan build: the test frees exactly the
 * blocks walk reports, and close waits for the deferred frees.
 */
#define _GNU_SOURCE
#include "test_util.h"

#include <tips/plugin.h>

#include "util/kv.h" /* mix64 */

#include "indexes/idx_alloc.h"

#include <stdint.h>

#define MAXK 100
#define MAXV 200
#define CHECK_EVERY 256

/* ---- the model ------------------------------------------------------------------------ */

struct entry {
	unsigned char key[MAXK];
	unsigned char val[MAXV];
	uint32_t klen, vlen;
	int present;
};

struct model {
	struct entry *e; /* sorted by key, distinct */
	size_t n, present;
};

static int entry_cmp(const void *a, const void *b)
{
	const struct entry *x = a, *y = b;
	return key_cmp(x->key, x->klen, y->key, y->klen);
}

/* Distinct keys of three shapes: 8-byte big-endian integers (inline in clht, lfbst,
 * bptree), short strings over 4 bytes (shared prefixes: art's path splits, keys that
 * are prefixes of others), and 9..100-byte keys sharing long prefixes (key blocks). */
static void model_init(struct model *m, uint64_t *seed)
{
	size_t cap = 3000;
	m->e = calloc(cap, sizeof(*m->e));
	REQUIRE(m->e != NULL);
	size_t n = 0;
	for (uint64_t i = 0; i < 1200; i++, n++) {
		m->e[n].klen = 8;
		be64(m->e[n].key, rnd(seed));
	}
	static const unsigned char alpha[] = { 0x00, 0x01, 'a', 0xff };
	for (size_t i = 0; i < 600; i++, n++) {
		uint32_t len = 1 + (uint32_t)(rnd(seed) % 6);
		m->e[n].klen = len;
		for (uint32_t j = 0; j < len; j++)
			m->e[n].key[j] = alpha[rnd(seed) % 4];
	}
	for (size_t i = 0; i < 400; i++, n++) {
		uint32_t len = 9 + (uint32_t)(rnd(seed) % (MAXK - 8));
		uint32_t shared = (uint32_t)(rnd(seed) % len);
		m->e[n].klen = len;
		memset(m->e[n].key, 'm', shared);
		for (uint32_t j = shared; j < len; j++)
			m->e[n].key[j] = alpha[rnd(seed) % 4];
	}
	qsort(m->e, n, sizeof(*m->e), entry_cmp);
	size_t w = 0;
	for (size_t i = 0; i < n; i++)
		if (w == 0 || entry_cmp(&m->e[w - 1], &m->e[i]) != 0)
			m->e[w++] = m->e[i];
	m->n = w;
	m->present = 0;
}

/* A value of a length that changes node and block sizes: empty, inline (<= 8 bytes:
 * 8 is the inline size of art, clht, lfhash, lfbst and bptree), just past it, large. */
static uint32_t value_make(unsigned char *v, uint64_t *seed)
{
	static const uint32_t lens[] = { 0, 1, 7, 8, 8, 9, 16, 64, MAXV };
	uint32_t len = lens[rnd(seed) % (sizeof(lens) / sizeof(lens[0]))];
	for (uint32_t i = 0; i < len; i++)
		v[i] = (unsigned char)rnd(seed);
	return len;
}

/* ---- the index -------------------------------------------------------------------------- */

struct idx {
	const struct tips_index_ops *ops;
	void *root, *h;
};

/* The blocks walk reports, summarised: equal summaries mean (with overwhelming
 * probability) equal sets. */
struct block_set {
	size_t n;
	uint64_t sum, sum2;
};

static int block_add(const void *block, void *arg)
{
	struct block_set *s = arg;
	uint64_t h = mix64((uint64_t)(uintptr_t)block);
	s->n++;
	s->sum += h;
	s->sum2 += h * h;
	return 0;
}

static struct block_set blocks_of(struct idx *x)
{
	struct block_set s = { 0, 0, 0 };
	CHECK_RC(x->ops->walk(x->h, block_add, &s), 0);
	return s;
}

/* Closes the index and frees what walk reports (dram builds allocate with malloc). */
static void idx_destroy(struct idx *x)
{
	struct test_blocks b = { NULL, 0, 0 };
	CHECK_RC(x->ops->walk(x->h, test_blocks_collect, &b), 0);
	x->ops->close(x->h);
	for (size_t i = 0; i < b.n; i++)
		free(b.p[i]);
	free(b.p);
	x->h = x->root = NULL;
}

/* ---- checks ----------------------------------------------------------------------------- */

/* True if the index holds @e's key with its value, or lacks it, as the model says. */
static int lookup_matches(struct idx *x, const struct entry *e)
{
	unsigned char buf[MAXV];
	size_t vl = (size_t)-1;
	int rc = x->ops->lookup(x->h, e->key, e->klen, buf, sizeof(buf), &vl);
	if (!e->present)
		return rc == TIPS_ENOTFOUND;
	return rc == 0 && vl == e->vlen && memcmp(buf, e->val, e->vlen) == 0;
}

struct scan_cursor {
	const struct model *m;
	size_t next; /* model position of the next present key expected */
	size_t calls, wrong;
};

static int scan_compare(const void *key, size_t klen, const void *val, size_t vlen, void *arg)
{
	struct scan_cursor *c = arg;
	const struct model *m = c->m;
	while (c->next < m->n && !m->e[c->next].present)
		c->next++;
	c->calls++;
	if (c->next == m->n) {
		c->wrong++;
		return 0;
	}
	const struct entry *e = &m->e[c->next++];
	if (klen != e->klen || memcmp(key, e->key, klen) != 0 || vlen != e->vlen ||
	    memcmp(val, e->val, vlen) != 0)
		c->wrong++;
	return 0;
}

/* Every key looked up, and one scan of everything, against the model. */
static void check_all(struct idx *x, const struct model *m, const char *when)
{
	size_t bad = 0;
	for (size_t i = 0; i < m->n; i++)
		bad += !lookup_matches(x, &m->e[i]);
	struct scan_cursor c = { m, 0, 0, 0 };
	long r = x->ops->scan(x->h, NULL, 0, SIZE_MAX, scan_compare, &c);
	CHECK(bad == 0 && c.wrong == 0 && c.calls == m->present && r == (long)m->present);
	if (bad || c.wrong || c.calls != m->present || r != (long)m->present)
		fprintf(stderr, "  %s (%s): %zu lookups wrong; scan returned %ld, %zu pairs "
				"(%zu wrong), model has %zu\n",
			x->ops->name, when, bad, r, c.calls, c.wrong, m->present);
}

/* ---- operations under injection ------------------------------------------------------ */

enum op_kind { OP_INSERT, OP_UPDATE, OP_REMOVE, OP_KINDS };
static const char *const op_names[OP_KINDS] = { "insert", "update", "remove" };

struct stats {
	size_t ops, attempts;
	size_t enomem[OP_KINDS]; /* failed attempts, each checked */
	size_t absorbed;         /* attempts that succeeded although an allocation failed */
	size_t full_checks;
};

static int op_run(struct idx *x, enum op_kind op, const struct entry *e,
		  const unsigned char *v, uint32_t vlen)
{
	switch (op) {
	case OP_INSERT: return x->ops->insert(x->h, e->key, e->klen, v, vlen);
	case OP_UPDATE: return x->ops->update(x->h, e->key, e->klen, v, vlen);
	default: return x->ops->remove(x->h, e->key, e->klen);
	}
}

/* What the operation must return once it does not fail for memory. */
static int op_expected(enum op_kind op, const struct entry *e)
{
	switch (op) {
	case OP_INSERT: return e->present ? TIPS_EKEYEXISTS : 0;
	default: return e->present ? 0 : TIPS_ENOTFOUND;
	}
}

static void model_apply(struct model *m, enum op_kind op, struct entry *e,
			const unsigned char *v, uint32_t vlen)
{
	if (op == OP_REMOVE) {
		e->present = 0;
		m->present--;
		return;
	}
	if (op == OP_INSERT) {
		e->present = 1;
		m->present++;
	}
	memcpy(e->val, v, vlen);
	e->vlen = vlen;
}

enum injection {
	INJECT_NONE,       /* no failure */
	INJECT_RANDOM,     /* k = 0, 1, ...; after a failure, half the time no injection */
	INJECT_EXHAUSTIVE, /* k = 0, 1, ... until the operation succeeds */
};

/*
 * One operation, with injection as @inject says: attempts with the countdown at k = 0,
 * 1, ... until one does not return TIPS_ENOMEM; INJECT_RANDOM runs the next attempt
 * without injection half the time (the framework's retry after reclamation), so
 * INJECT_EXHAUSTIVE is the one that makes each allocation of the operation fail in turn.
 */
static void op_checked(struct idx *x, struct model *m, enum op_kind op, struct entry *e,
		       enum injection inject, struct stats *st, uint64_t *seed)
{
	unsigned char v[MAXV];
	uint32_t vlen = op == OP_REMOVE ? 0 : value_make(v, seed);
	int want = op_expected(op, e);
	long k = inject != INJECT_NONE ? 0 : -1;
	int rc;
	/* The blocks before the first attempt: every failed attempt must leave them so. */
	struct block_set before = { 0, 0, 0 };
	if (k >= 0)
		before = blocks_of(x);
	st->ops++;
	for (;;) {
		if (k >= 0)
			idx_alloc_fail_after(k);
		rc = op_run(x, op, e, v, vlen);
		bool refused = idx_alloc_has_failed();
		idx_alloc_never_fail();
		st->attempts++;
		if (rc != TIPS_ENOMEM) {
			st->absorbed += refused;
			break;
		}
		st->enomem[op]++;
		/* The failure was injected, and the index is exactly as before. */
		CHECK(refused);
		CHECK(lookup_matches(x, e));
		if (k >= 0) {
			struct block_set after = blocks_of(x);
			CHECK(after.n == before.n && after.sum == before.sum &&
			      after.sum2 == before.sum2);
			if (after.n != before.n || after.sum != before.sum)
				fprintf(stderr, "  %s: %s (klen %u, vlen %u) failed at allocation "
						"%ld: walk saw %zu blocks, %zu before\n",
					x->ops->name, op_names[op], e->klen, vlen, k, after.n,
					before.n);
		}
		if (st->enomem[op] % 16 == 1) {
			check_all(x, m, "after TIPS_ENOMEM");
			st->full_checks++;
		}
		if (k < 0 || k >= 64) { /* failed without injection, or never succeeds */
			CHECK(!"the operation keeps failing with TIPS_ENOMEM");
			return;
		}
		k = inject == INJECT_EXHAUSTIVE || rnd(seed) % 2 ? k + 1 : -1;
	}
	CHECK(rc == want);
	if (rc != want) {
		fprintf(stderr, "  %s: %s (klen %u, vlen %u) returned %d (%s), wanted %d\n",
			x->ops->name, op_names[op], e->klen, vlen, rc, tips_strerror(rc), want);
		return;
	}
	if (rc == 0)
		model_apply(m, op, e, v, vlen);
}

/* ---- create ---------------------------------------------------------------------------- */

/* create with each of its allocations failing: TIPS_ENOMEM and nothing leaked (the
 * ASan build's LeakSanitizer checks), or an index that works. */
static void test_create(const struct tips_index_ops *ops)
{
	for (long k = 0; k < 8; k++) {
		struct tips_index_config cfg = { .expected_keys = 16 };
		void *root = NULL;
		idx_alloc_fail_after(k);
		int rc = ops->create(&cfg, &root);
		idx_alloc_never_fail();
		if (rc == TIPS_ENOMEM)
			continue;
		CHECK_RC(rc, 0);
		if (rc)
			return;
		struct idx x = { ops, root, NULL };
		REQUIRE(ops->open(root, &x.h) == 0);
		CHECK_RC(ops->insert(x.h, "k", 1, "v", 1), 0);
		struct entry e = { .key = "k", .val = "v", .klen = 1, .vlen = 1, .present = 1 };
		CHECK(lookup_matches(&x, &e));
		idx_destroy(&x);
		return;
	}
	CHECK(!"create fails with TIPS_ENOMEM after 8 allocations");
}

/* ---- the run ---------------------------------------------------------------------------- */

/* A fresh index (expected_keys 16) into which every model key goes, in random order,
 * then gets a new value, then goes out again, each operation with INJECT_EXHAUSTIVE:
 * every allocation of every insert fails once, so every growth of the index (every
 * clht resize, every art node growth, every bptree split) fails once before it works. */
static void test_exhaustive(const struct tips_index_ops *ops, struct model *m, uint64_t *seed,
			    struct stats *st)
{
	struct idx x = { ops, NULL, NULL };
	struct tips_index_config cfg = { .expected_keys = 16 };
	REQUIRE(ops->create(&cfg, &x.root) == 0);
	REQUIRE(ops->open(x.root, &x.h) == 0);
	size_t *order = malloc(m->n * sizeof(*order));
	REQUIRE(order != NULL);
	for (size_t i = 0; i < m->n; i++)
		order[i] = i;
	static const enum op_kind rounds[] = { OP_INSERT, OP_UPDATE, OP_REMOVE };
	for (size_t r = 0; r < sizeof(rounds) / sizeof(rounds[0]); r++) {
		for (size_t i = m->n; i > 1; i--) { /* Fisher-Yates */
			size_t j = rnd(seed) % i, t = order[i - 1];
			order[i - 1] = order[j];
			order[j] = t;
		}
		for (size_t i = 0; i < m->n; i++) {
			op_checked(&x, m, rounds[r], &m->e[order[i]], INJECT_EXHAUSTIVE, st, seed);
			if ((i + 1) % (4 * CHECK_EVERY) == 0) {
				check_all(&x, m, "exhaustive");
				st->full_checks++;
			}
		}
		check_all(&x, m, op_names[rounds[r]]);
		st->full_checks++;
	}
	CHECK(m->present == 0);
	free(order);
	idx_destroy(&x);
}

static void stats_print(const struct tips_index_ops *ops, const char *what,
			const struct stats *st)
{
	printf("  %s, %s: %zu ops, %zu attempts; TIPS_ENOMEM: %zu insert, %zu update, %zu "
	       "remove; %zu succeeded past a refused allocation; %zu full checks\n",
	       ops->name, what, st->ops, st->attempts, st->enomem[OP_INSERT],
	       st->enomem[OP_UPDATE], st->enomem[OP_REMOVE], st->absorbed, st->full_checks);
}

struct phase {
	const char *name;
	size_t ops;
	unsigned insert, update; /* in 10ths; the rest removes */
};

static void test_index(const struct tips_index_ops *ops, uint64_t seed)
{
	test_create(ops);

	struct idx x = { ops, NULL, NULL };
	struct tips_index_config cfg = { .expected_keys = 16 };
	REQUIRE(ops->create(&cfg, &x.root) == 0);
	REQUIRE(ops->open(x.root, &x.h) == 0);
	struct model m;
	model_init(&m, &seed);

	static const struct phase phases[] = {
		{ "fill", 5000, 7, 2 },
		{ "mixed", 5000, 4, 3 },
		{ "drain", 5000, 2, 2 },
	};
	struct stats st = { 0 };
	for (size_t p = 0; p < sizeof(phases) / sizeof(phases[0]); p++) {
		const struct phase *ph = &phases[p];
		for (size_t i = 1; i <= ph->ops; i++) {
			unsigned r = (unsigned)(rnd(&seed) % 10);
			enum op_kind op = r < ph->insert		  ? OP_INSERT
					  : r < ph->insert + ph->update ? OP_UPDATE
									: OP_REMOVE;
			struct entry *e = &m.e[rnd(&seed) % m.n];
			op_checked(&x, &m, op, e, rnd(&seed) % 3 ? INJECT_RANDOM : INJECT_NONE,
				   &st, &seed);
			if (i % CHECK_EVERY == 0) {
				check_all(&x, &m, ph->name);
				st.full_checks++;
			}
		}
		check_all(&x, &m, ph->name);
		st.full_checks++;
		if (p == 0)
			printf("  %s: %zu of %zu keys present after the fill\n", ops->name,
			       m.present, m.n);
	}
	stats_print(ops, "random", &st);
	/* Injection that never made an insert fail would test nothing. */
	CHECK(st.enomem[OP_INSERT] > 0);
	idx_destroy(&x);

	for (size_t i = 0; i < m.n; i++) /* the exhaustive round starts empty */
		m.e[i].present = 0;
	m.present = 0;
	struct stats ex = { 0 };
	test_exhaustive(ops, &m, &seed, &ex);
	stats_print(ops, "exhaustive", &ex);
	CHECK(ex.enomem[OP_INSERT] > 0);
	free(m.e);
}

int main(int argc, char **argv)
{
	uint64_t seed = 0x6e6f6d656d2d3031ull; /* fixed: a failure reproduces */
	const char *env = getenv("TIPS_TEST_SEED");
	if (env && *env)
		seed = strtoull(env, NULL, 0) | 1;
	printf("test_index_nomem: seed %#llx\n", (unsigned long long)seed);
	if (argc > 1) {
		for (int i = 1; i < argc; i++) {
			const struct tips_index_ops *ops = tips_index_find(argv[i]);
			if (!ops || strncmp(argv[i], "dram-", 5) != 0) {
				fprintf(stderr, "%s: not a dram-* index\n", argv[i]);
				return 2;
			}
			test_index(ops, seed + (uint64_t)i);
		}
	} else {
		size_t n = 0;
		for (const char *const *name = tips_index_names(); *name; name++) {
			if (strncmp(*name, "dram-", 5) != 0)
				continue;
			test_index(tips_index_find(*name), seed + n++);
		}
		CHECK(n >= 1);
	}
	return test_finish("test_index_nomem");
}
