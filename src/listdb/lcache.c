/*
 * lcache.c - ListDB's two DRAM lookup caches (ListDB, OSDI'22, §3.5, Algorithm 4).
 *
 * Hash cache: one atomic slot per bucket holding the PM address of a log entry, at
 * slot hash(key) % slots. Insert is a release store that overwrites whatever was there
 * (FIFO on collision); lookup is an acquire load followed by a key comparison, so a
 * collision can only cause a miss, never a wrong answer; forget is a CAS from the entry
 * to 0, so it never clears a newer entry that took the slot. All three are lock-free.
 *
 * Second-chance cache: an immutable sorted snapshot {n, e[]} (order ld_cmp_entries, ties
 * by address) behind an atomic pointer. Readers binary-search it inside their grace read
 * section. The single writer buffers offered elements, then builds a new snapshot
 * (merge, drop duplicate addresses, keep the @capacity tallest - SIZE policy), publishes
 * it with a release store and passes the old one to grace_free().
 *
 * Invariant: a snapshot reachable from c->snap holds only live entries; once a _forget
 * call returns, no new reader can obtain a dropped entry (the caller then waits a grace
 * period before freeing it). If forget cannot allocate, it publishes an empty snapshot
 * rather than leave a dead entry reachable.
 */
#include "listdb/lcache.h"

#include <stdlib.h>

#include "util/grace.h"
#include "util/kv.h"

/* ---- hash cache ----------------------------------------------------------------- */

struct ld_hcache {
	uint64_t slots;
	_Atomic(uintptr_t) slot[]; /* [slots]: an entry's address, or 0 */
};

static inline uint64_t hc_hash(const void *key, size_t klen)
{
	return klen == 8 ? mix64(load64(key) ^ 0x9e3779b97f4a7c15ull) : hash_key(key, klen);
}

static inline _Atomic(uintptr_t) *hc_slot(struct ld_hcache *c, const void *key, size_t klen)
{
	return &c->slot[hc_hash(key, klen) % c->slots];
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
	if (!c || !e)
		return;
	/* release: a reader that sees the address also sees the entry's contents. */
	atomic_store_explicit(hc_slot(c, ld_key(e), e->klen), (uintptr_t)e,
			      memory_order_release);
}

struct ld_entry *ld_hcache_lookup(struct ld_hcache *c, const void *key, size_t klen)
{
	if (!c)
		return NULL;
	struct ld_entry *e = (struct ld_entry *)atomic_load_explicit(hc_slot(c, key, klen),
								      memory_order_acquire);
	if (e && e->klen == klen && memcmp(ld_key(e), key, klen) == 0)
		return e;
	return NULL;
}

void ld_hcache_forget(struct ld_hcache *c, const struct ld_entry *e)
{
	if (!c || !e)
		return;
	uintptr_t want = (uintptr_t)e;
	atomic_compare_exchange_strong_explicit(hc_slot(c, ld_key(e), e->klen), &want, 0,
						memory_order_relaxed, memory_order_relaxed);
}

uint64_t ld_hcache_slots(const struct ld_hcache *c)
{
	return c ? c->slots : 0;
}

/* ---- second-chance cache -------------------------------------------------------- */

struct sc_snap {
	size_t n;
	struct ld_entry *e[]; /* [n], sorted by sc_order */
};

struct ld_scache {
	uint64_t capacity;              /* most elements a snapshot holds, > 0 */
	_Atomic(struct sc_snap *) snap; /* published snapshot; NULL when empty */
	_Atomic uint64_t size;          /* its n, readable without a read section */
	/* Writer only: offered elements, unsorted, at most 2 * capacity (pruned). */
	struct ld_entry **pend;
	size_t npend, pend_cap;
};

/* A total order: ld_cmp_entries, then address, so duplicate addresses sort adjacent. */
static int sc_order(const struct ld_entry *a, const struct ld_entry *b)
{
	int r = ld_cmp_entries(a, b);
	return r ? r : ((uintptr_t)a > (uintptr_t)b) - ((uintptr_t)a < (uintptr_t)b);
}

static int sc_qsort_cmp(const void *a, const void *b)
{
	return sc_order(*(struct ld_entry *const *)a, *(struct ld_entry *const *)b);
}

static unsigned sc_height(const struct ld_entry *e)
{
	return e->height < LD_MAX_HEIGHT ? e->height : LD_MAX_HEIGHT;
}

/*
 * SIZE policy: keeps the @cap tallest of e[0..n), in their order, and returns how many
 * remain. The cut height t is found by counting heights; of the elements at height t,
 * an evenly spaced subset fills what is left, so no key range is favoured.
 */
static size_t sc_keep_tallest(struct ld_entry **e, size_t n, size_t cap)
{
	if (n <= cap)
		return n;
	size_t count[LD_MAX_HEIGHT + 1] = { 0 };
	for (size_t i = 0; i < n; i++)
		count[sc_height(e[i])]++;
	unsigned t = LD_MAX_HEIGHT;
	size_t above = 0; /* elements taller than t */
	while (above + count[t] < cap)
		above += count[t--]; /* stops at t >= 0: the counts sum to n > cap */
	size_t keep = cap - above, acc = 0, m = 0; /* keep of count[t], 0 < keep <= count */
	for (size_t i = 0; i < n; i++) {
		unsigned h = sc_height(e[i]);
		if (h < t)
			continue;
		if (h == t) { /* Bresenham: exactly keep of count[t], evenly spaced */
			acc += keep;
			if (acc < count[t])
				continue;
			acc -= count[t];
		}
		e[m++] = e[i];
	}
	return m;
}

struct ld_scache *ld_scache_create(uint64_t capacity)
{
	if (capacity == 0 || capacity > SIZE_MAX / (4 * sizeof(void *)))
		return NULL;
	struct ld_scache *c = calloc(1, sizeof(*c));
	if (c)
		c->capacity = capacity;
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
		struct ld_entry **p = NULL;
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
	c->pend[c->npend++] = e;
}

static void sc_install(struct ld_scache *c, struct sc_snap *s, struct sc_snap *old)
{
	atomic_store_explicit(&c->snap, s, memory_order_release);
	atomic_store_explicit(&c->size, s ? s->n : 0, memory_order_relaxed);
	grace_free(old); /* readers may still be searching it */
}

/* Merges the snapshot and the pending buffer, dropping what @dead (if given) rejects. */
static void sc_rebuild(struct ld_scache *c, bool (*dead)(const struct ld_entry *, void *),
		       void *arg)
{
	struct sc_snap *old = atomic_load_explicit(&c->snap, memory_order_relaxed);
	size_t no = old ? old->n : 0, np = c->npend, max = no + np;
	if (max == 0)
		return;
	struct sc_snap *s = malloc(sizeof(*s) + max * sizeof(s->e[0]));
	if (!s) {
		if (dead) { /* a dead entry must not stay reachable: publish empty */
			c->npend = 0;
			sc_install(c, NULL, old);
		}
		return; /* a plain publish keeps its offers for the next try */
	}
	qsort(c->pend, np, sizeof(c->pend[0]), sc_qsort_cmp);
	size_t i = 0, j = 0, n = 0;
	while (i < no || j < np) {
		struct ld_entry *x;
		if (j == np || (i < no && sc_order(old->e[i], c->pend[j]) <= 0))
			x = old->e[i++];
		else
			x = c->pend[j++];
		if ((n && s->e[n - 1] == x) || (dead && dead(x, arg)))
			continue;
		s->e[n++] = x;
	}
	c->npend = 0;
	n = sc_keep_tallest(s->e, n, c->capacity);
	if (np == 0 && n == no) { /* forget found nothing dead: keep the old snapshot */
		free(s);
		return;
	}
	if (n == 0) {
		free(s);
		s = NULL;
	} else {
		s->n = n;
		if (n < max) { /* not yet visible: shrinking in place is safe */
			struct sc_snap *t = realloc(s, sizeof(*s) + n * sizeof(s->e[0]));
			s = t ? t : s;
		}
	}
	sc_install(c, s, old);
}

void ld_scache_publish(struct ld_scache *c)
{
	if (c && c->npend)
		sc_rebuild(c, NULL, NULL);
}

void ld_scache_forget(struct ld_scache *c, bool (*dead)(const struct ld_entry *, void *),
		      void *arg)
{
	if (c && dead)
		sc_rebuild(c, dead, arg);
}

struct ld_entry *ld_scache_floor(struct ld_scache *c, const void *key, size_t klen)
{
	if (!c)
		return NULL;
	const struct sc_snap *s = atomic_load_explicit(&c->snap, memory_order_acquire);
	if (!s)
		return NULL;
	size_t lo = 0, hi = s->n; /* first index whose key is >= the search key */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (ld_cmp_entry_key(s->e[mid], key, klen) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo ? s->e[lo - 1] : NULL;
}

uint64_t ld_scache_size(const struct ld_scache *c)
{
	return c ? atomic_load_explicit(&c->size, memory_order_relaxed) : 0;
}
