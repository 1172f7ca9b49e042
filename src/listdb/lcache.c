/*
 * lcache.c - ListDB's two DRAM lookup caches (ListDB, OSDI'22, §3.5, Algorithm 4).
 *
 * Hash cache: one atomic slot per bucket holding the PM address of a log entry and a
 * 16-bit tag of its key's hash (hc_word), at slot hash(key) % slots. Insert is a release store that overwrites whatever was there
 * (FIFO on collision); lookup is an acquire load followed by a key comparison, so a
 * collision can only cause a miss, never a wrong answer; forget is a CAS from the entry
 * to 0, so it never clears a newer entry that took the slot. All three are lock-free.
 *
 * Second-chance cache: an immutable sorted snapshot of {first 8 key bytes, element}
 * items (order ld_cmp_entries, ties by address) with an interpolation table of buckets,
 * behind an atomic pointer. Readers find the bucket of their key's first 8 bytes and
 * search its few items inside their grace read section, reading an element only on equal
 * words. The single writer buffers offered elements, then builds a new snapshot (merge,
 * drop duplicate addresses, keep the @capacity tallest - SIZE policy), publishes it with
 * a release store and passes the old one to grace_free().
 *
 * Invariant: a snapshot reachable from c->snap holds only live entries; once a _forget
 * call returns, no new reader can obtain a dropped entry (the caller then waits a grace
 * period before freeing it). If forget cannot allocate, it publishes an empty snapshot
 * rather than leave a dead entry reachable.
 */
#include "listdb/lcache.h"

#include <stdlib.h>
#include <string.h>

#include "util/grace.h"
#include "util/kv.h"

/* ---- hash cache ----------------------------------------------------------------- */

struct ld_hcache {
	uint64_t slots;
	_Atomic(uintptr_t) slot[]; /* [slots]: hc_word() of an entry, or 0 */
};

static inline uint64_t hc_hash(const void *key, size_t klen)
{
	return klen == 8 ? mix64(load64(key) ^ 0x9e3779b97f4a7c15ull) : hash_key(key, klen);
}

/* A slot holds an entry's address with a 16-bit tag of its key's hash in the 16 bits
 * above bit 47 (user-space addresses have them clear), so a lookup of another key that
 * maps to the slot is rejected without reading the entry in PM (1 in 32768 pass on to
 * the key comparison). An entry at an address with any of those bits set is not cached
 * (x86-64 and AArch64 user space is below 2^48 unless asked otherwise). */
#define HC_TAG_SHIFT 48
static inline uintptr_t hc_tag(uint64_t h)
{
	return (uintptr_t)((h >> 32) & 0xffff) | 1u; /* never 0 */
}

#define HC_ADDR_MASK (((uintptr_t)1 << HC_TAG_SHIFT) - 1)
static inline uintptr_t hc_word(const struct ld_entry *e, uint64_t h)
{
	return (uintptr_t)e | hc_tag(h) << HC_TAG_SHIFT;
}

struct ld_hcache *ld_hcache_create(uint64_t slots)
{
	if (slots == 0 || slots > (SIZE_MAX - sizeof(struct ld_hcache)) / sizeof(uintptr_t))
		return NULL;
	/* calloc: glibc maps large blocks fresh, so zeroing costs nothing up front. */
	struct ld_hcache *c = calloc(1, sizeof(*c) + slots * sizeof(uintptr_t));
	if (c)
		c->slots = slots;
	return c;
}

void ld_hcache_destroy(struct ld_hcache *c)
{
	free(c);
}

void ld_hcache_insert(struct ld_hcache *c, struct ld_entry *e)
{
	if (!c || !e || ((uintptr_t)e & ~HC_ADDR_MASK))
		return;
	uint64_t h = hc_hash(ld_key(e), e->klen);
	/* release: a reader that sees the address also sees the entry's contents. */
	atomic_store_explicit(&c->slot[h % c->slots], hc_word(e, h), memory_order_release);
}

struct ld_entry *ld_hcache_lookup(struct ld_hcache *c, const void *key, size_t klen)
{
	if (!c)
		return NULL;
	uint64_t h = hc_hash(key, klen);
	uintptr_t w = atomic_load_explicit(&c->slot[h % c->slots], memory_order_acquire);
	if ((w >> HC_TAG_SHIFT) != hc_tag(h))
		return NULL; /* empty, or another key's entry */
	struct ld_entry *e = (struct ld_entry *)(w & HC_ADDR_MASK);
	if (e->klen == klen && memcmp(ld_key(e), key, klen) == 0)
		return e;
	return NULL;
}

void ld_hcache_forget(struct ld_hcache *c, const struct ld_entry *e)
{
	if (!c || !e || ((uintptr_t)e & ~HC_ADDR_MASK))
		return;
	uint64_t h = hc_hash(ld_key(e), e->klen);
	uintptr_t want = hc_word(e, h);
	atomic_compare_exchange_strong_explicit(&c->slot[h % c->slots], &want, 0,
						memory_order_relaxed, memory_order_relaxed);
}

uint64_t ld_hcache_slots(const struct ld_hcache *c)
{
	return c ? c->slots : 0;
}

/* ---- second-chance cache -------------------------------------------------------- */

/* An element and the first 8 bytes of its key (ld_key8), so that a search compares
 * words in DRAM and reads the element only when the words are equal. */
struct sc_item {
	uint64_t k8;
	struct ld_entry *e;
};

struct sc_snap {
	size_t n;
	uint64_t lo;      /* it[0].k8 */
	uint64_t hi;      /* it[n-1].k8 */
	unsigned shift;   /* bucket of a word w in [lo, hi]: (w - lo) >> shift */
	uint32_t *bucket; /* [nb + 1]: index of the first item of each bucket; [nb] = n */
	struct sc_item it[]; /* [n], sorted by sc_order; the buckets follow */
};

struct ld_scache {
	uint64_t capacity;              /* most elements a snapshot holds, > 0 */
	_Atomic(struct sc_snap *) snap; /* published snapshot; NULL when empty */
	_Atomic uint64_t size;          /* its n, readable without a read section */
	/* Writer only: offered elements, unsorted, at most 2 * capacity (pruned). */
	struct sc_item *pend;
	size_t npend, pend_cap;
};

/* A total order: ld_cmp_entries (the words first), then address, so duplicate addresses
 * sort adjacent. */
static int sc_order(const struct sc_item *a, const struct sc_item *b)
{
	if (a->k8 != b->k8)
		return a->k8 < b->k8 ? -1 : 1;
	int r = ld_cmp_entries(a->e, b->e);
	return r ? r : ((uintptr_t)a->e > (uintptr_t)b->e) - ((uintptr_t)a->e < (uintptr_t)b->e);
}

static int sc_qsort_cmp(const void *a, const void *b)
{
	return sc_order(a, b);
}

static unsigned sc_height(const struct ld_entry *e)
{
	return e->height < LD_MAX_HEIGHT ? e->height : LD_MAX_HEIGHT;
}

/*
 * SIZE policy: keeps the @cap tallest of it[0..n), in their order, and returns how many
 * remain. The cut height t is found by counting heights; of the elements at height t,
 * an evenly spaced subset fills what is left, so no key range is favoured.
 */
static size_t sc_keep_tallest(struct sc_item *it, size_t n, size_t cap)
{
	if (n <= cap)
		return n;
	size_t count[LD_MAX_HEIGHT + 1] = { 0 };
	for (size_t i = 0; i < n; i++)
		count[sc_height(it[i].e)]++;
	unsigned t = LD_MAX_HEIGHT;
	size_t above = 0; /* elements taller than t */
	while (above + count[t] < cap)
		above += count[t--]; /* stops at t >= 0: the counts sum to n > cap */
	size_t keep = cap - above, acc = 0, m = 0; /* keep of count[t], 0 < keep <= count */
	for (size_t i = 0; i < n; i++) {
		unsigned h = sc_height(it[i].e);
		if (h < t)
			continue;
		if (h == t) { /* Bresenham: exactly keep of count[t], evenly spaced */
			acc += keep;
			if (acc < count[t])
				continue;
			acc -= count[t];
		}
		it[m++] = it[i];
	}
	return m;
}

/* Capacity is capped so that an item index fits the 32-bit buckets. */
#define SC_MAX_CAPACITY (UINT32_MAX / 4)

struct ld_scache *ld_scache_create(uint64_t capacity)
{
	if (capacity == 0)
		return NULL;
	struct ld_scache *c = calloc(1, sizeof(*c));
	if (c)
		c->capacity = capacity < SC_MAX_CAPACITY ? capacity : SC_MAX_CAPACITY;
	return c;
}

void ld_scache_destroy(struct ld_scache *c)
{
	if (!c)
		return;
	free(atomic_load_explicit(&c->snap, memory_order_relaxed)); /* no readers left */
	free(c->pend);
	free(c);
}

void ld_scache_add(struct ld_scache *c, struct ld_entry *e)
{
	if (!c || !e)
		return;
	if (c->npend == c->pend_cap) {
		size_t ncap = c->pend_cap ? 2 * c->pend_cap : 64;
		struct sc_item *p = NULL;
		if (c->npend < 2 * c->capacity)
			p = realloc(c->pend, ncap * sizeof(*p));
		if (p) {
			c->pend = p;
			c->pend_cap = ncap;
		} else {
			/* Bound the buffer (or survive ENOMEM): only the tallest can win. */
			c->npend = sc_keep_tallest(c->pend, c->npend, c->capacity);
			if (c->npend == c->pend_cap)
				return; /* it is a cache: drop the offer */
		}
	}
	c->pend[c->npend++] = (struct sc_item){ ld_key8(ld_key(e), e->klen), e };
}

static void sc_install(struct ld_scache *c, struct sc_snap *s, struct sc_snap *old)
{
	atomic_store_explicit(&c->snap, s, memory_order_release);
	atomic_store_explicit(&c->size, s ? s->n : 0, memory_order_relaxed);
	grace_free(old); /* readers may still be searching it */
}

/*
 * A snapshot of the @n sorted items @it with their buckets: about two items per
 * bucket (at least 2 buckets), buckets of equal width over [lo, hi] (interpolation: with keys spread evenly
 * a search lands within a cache line or two; with clustered keys it degrades to a binary
 * search of the crowded buckets). NULL when out of DRAM.
 */
static struct sc_snap *sc_snap_build(const struct sc_item *it, size_t n)
{
	unsigned bits = 1; /* at least 1, so that shift stays below 64 */
	while (bits < 31 && ((size_t)2 << bits) <= n / 2)
		bits++; /* 2^bits <= max(n / 2, 2) */
	uint64_t lo = it[0].k8, hi = it[n - 1].k8, d = hi - lo;
	unsigned width = d ? 64u - (unsigned)__builtin_clzll(d) : 0; /* bits of d */
	unsigned shift = width > bits ? width - bits : 0; /* <= 63 */
	size_t nb = (size_t)(d >> shift) + 1; /* <= 2^bits */
	struct sc_snap *s = malloc(sizeof(*s) + n * sizeof(s->it[0]) + (nb + 1) * sizeof(uint32_t));
	if (!s)
		return NULL;
	s->n = n;
	s->lo = lo;
	s->hi = hi;
	s->shift = shift;
	s->bucket = (uint32_t *)(void *)&s->it[n];
	memcpy(s->it, it, n * sizeof(it[0]));
	size_t j = 0;
	for (size_t b = 0; b < nb; b++) {
		while (j < n && ((it[j].k8 - lo) >> shift) < b)
			j++;
		s->bucket[b] = (uint32_t)j;
	}
	s->bucket[nb] = (uint32_t)n;
	return s;
}

/* Merges the snapshot and the pending buffer, dropping what @dead (if given) rejects. */
static void sc_rebuild(struct ld_scache *c, bool (*dead)(const struct ld_entry *, void *),
		       void *arg)
{
	struct sc_snap *old = atomic_load_explicit(&c->snap, memory_order_relaxed);
	size_t no = old ? old->n : 0, np = c->npend, max = no + np;
	if (max == 0)
		return;
	struct sc_item *m = malloc(max * sizeof(*m));
	if (!m) {
		if (dead) { /* a dead entry must not stay reachable: publish empty */
			c->npend = 0;
			sc_install(c, NULL, old);
		}
		return; /* a plain publish keeps its offers for the next try */
	}
	qsort(c->pend, np, sizeof(c->pend[0]), sc_qsort_cmp);
	size_t i = 0, j = 0, n = 0;
	while (i < no || j < np) {
		struct sc_item x;
		if (j == np || (i < no && sc_order(&old->it[i], &c->pend[j]) <= 0))
			x = old->it[i++];
		else
			x = c->pend[j++];
		if ((n && m[n - 1].e == x.e) || (dead && dead(x.e, arg)))
			continue;
		m[n++] = x;
	}
	n = sc_keep_tallest(m, n, c->capacity);
	if (np == 0 && n == no) { /* forget found nothing dead: keep the old snapshot */
		free(m);
		return;
	}
	struct sc_snap *s = n ? sc_snap_build(m, n) : NULL;
	free(m);
	if (n && !s) {
		if (dead) {
			c->npend = 0;
			sc_install(c, NULL, old);
		}
		return;
	}
	c->npend = 0;
	sc_install(c, s, old);
}

void ld_scache_publish(struct ld_scache *c)
{
	if (c && c->npend)
		sc_rebuild(c, NULL, NULL);
}

bool ld_scache_publish_due(const struct ld_scache *c)
{
	if (!c || !c->npend)
		return false;
	return c->npend >= atomic_load_explicit(&c->size, memory_order_relaxed) / 8;
}

void ld_scache_forget(struct ld_scache *c, bool (*dead)(const struct ld_entry *, void *),
		      void *arg)
{
	if (c && dead)
		sc_rebuild(c, dead, arg);
}

/* Item @x against the search key (@q8 its word): <0, 0, >0. */
static inline int sc_cmp_key(const struct sc_item *x, uint64_t q8, const void *key, size_t klen)
{
	if (x->k8 != q8)
		return x->k8 < q8 ? -1 : 1;
	return ld_cmp_entry_key(x->e, key, klen);
}

struct ld_entry *ld_scache_floor(struct ld_scache *c, const void *key, size_t klen,
				 struct ld_entry **above)
{
	if (above)
		*above = NULL;
	if (!c)
		return NULL;
	const struct sc_snap *s = atomic_load_explicit(&c->snap, memory_order_acquire);
	if (!s)
		return NULL;
	uint64_t q8 = ld_key8(key, klen);
	if (q8 < s->lo) { /* every item's word is larger */
		if (above)
			*above = s->it[0].e;
		return NULL;
	}
	if (q8 > s->hi)
		return s->it[s->n - 1].e;
	/* Items of earlier buckets have smaller words, of later ones larger: the first item
	 * whose key is >= the search key is in [bucket[b], bucket[b + 1]]. */
	size_t b = (size_t)((q8 - s->lo) >> s->shift);
	size_t lo = s->bucket[b], hi = s->bucket[b + 1];
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (sc_cmp_key(&s->it[mid], q8, key, klen) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (above && lo < s->n)
		*above = s->it[lo].e;
	return lo ? s->it[lo - 1].e : NULL;
}

uint64_t ld_scache_size(const struct ld_scache *c)
{
	return c ? atomic_load_explicit(&c->size, memory_order_relaxed) : 0;
}
