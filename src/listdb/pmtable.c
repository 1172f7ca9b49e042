/*
 * pmtable.c - PMTables: skiplists of log entries in PM (ListDB, OSDI'22, §3.2-3.3).
 *
 * A PMTable is one list per key shard. Each list has one sentinel per domain; the bottom
 * layer starts at domain 0's sentinel and links every element in (key, LSN desc) order;
 * with braided lists, layer l >= 1 of domain d starts at d's sentinel and links only
 * elements of d (Figure 7), so a search runs in its own domain until the bottom layer.
 * Oblivious lists use domain 0's sentinel for every layer.
 *
 * Linking an L0 table (Algorithm 2, done from sorted entries in one pass) writes next
 * pointers in place and never flushes them: an L0 table is rebuilt from the log at open.
 * Invariant kept for readers: every list is sorted at every layer at every moment, and
 * each upper layer is a sub-list of the bottom layer's elements.
 */
#include "listdb/listdb_internal.h"

#include <stdlib.h>
#include <string.h>

#include "util/errors_internal.h"

unsigned ld_shard_of(const struct tips_listdb *db, const void *k, size_t kl)
{
	(void)kl;
	return (unsigned)(((const unsigned char *)k)[0] * db->shards >> 8);
}

unsigned ld_domain_of(const struct tips_listdb *db, const void *p)
{
	uintptr_t a = (uintptr_t)p;
	for (unsigned d = 1; d < db->domains; d++)
		if (a >= db->dom[d].base && a < db->dom[d].end)
			return d;
	return 0;
}

struct ld_entry *ld_l1_head(const struct tips_listdb *db, unsigned shard, unsigned domain)
{
	return (struct ld_entry *)db->manifest->l1_heads[shard][domain];
}

void ld_l1_heads(const struct tips_listdb *db, unsigned shard, struct ld_entry **heads)
{
	for (unsigned d = 0; d < db->domains; d++)
		heads[d] = ld_l1_head(db, shard, d);
}

static inline unsigned upper_list(const struct tips_listdb *db, unsigned d)
{
	return db->braided ? d : 0;
}

#define LINK_PREFETCH 8

int ld_l0_link(struct tips_listdb *db, struct ld_l0 *t, struct ld_entry **sorted, size_t n,
	       struct ld_hcache *hc)
{
	size_t nheads = (size_t)db->shards * db->domains;
	t->head_mem = ld_dram_calloc(db, LD_DRAM_FLUSH, nheads * LD_HEAD_BYTES);
	t->elems = t->head_mem ? ld_dram_calloc(db, LD_DRAM_FLUSH, (n ? n : 1) * sizeof(*t->elems))
			       : NULL;
	if (!t->elems) {
		free(t->head_mem);
		t->head_mem = NULL;
		return tips_set_error(TIPS_ENOMEM, "out of DRAM for L0 heads");
	}
	memcpy(t->elems, sorted, n * sizeof(*sorted));
	for (unsigned s = 0; s < db->shards; s++)
		for (unsigned d = 0; d < db->domains; d++) {
			struct ld_entry *h = (struct ld_entry *)((char *)t->head_mem +
				((size_t)s * db->domains + d) * LD_HEAD_BYTES);
			h->height = LD_MAX_HEIGHT;
			t->heads[s][d] = h;
		}
	struct ld_entry *last[TIPS_LISTDB_MAX_DOMAINS][LD_MAX_HEIGHT];
	struct ld_entry *bottom = NULL;
	unsigned shard = ~0u;
	const struct ld_entry *prev = NULL;
	for (size_t i = 0; i < n; i++) {
		struct ld_entry *e = sorted[i];
		/* Sorted order is random order in PM: fetch ahead, or every entry is a miss
		 * in turn (recovery links ~0.5M of them; docs/listdb.md, "Recovery"). */
		if (i + LINK_PREFETCH < n)
			__builtin_prefetch(sorted[i + LINK_PREFETCH], 1);
		unsigned s = ld_shard_of(db, ld_key(e), e->klen);
		if (s != shard) {
			shard = s;
			for (unsigned d = 0; d < db->domains; d++)
				for (unsigned l = 0; l < LD_MAX_HEIGHT; l++)
					last[d][l] = t->heads[s][d];
			bottom = t->heads[s][0];
			t->first[s] = i;
		}
		t->nshard[s]++;
		unsigned u = upper_list(db, ld_domain_of(db, e));
		for (unsigned l = 0; l < e->height; l++)
			ld_set_next(e, l, NULL);
		ld_set_next(bottom, 0, e);
		bottom = e;
		for (unsigned l = 1; l < e->height; l++) {
			ld_set_next(last[u][l], l, e);
			last[u][l] = e;
		}
		if (hc && !(prev && ld_keycmp(ld_key(prev), prev->klen, ld_key(e), e->klen) == 0))
			ld_hcache_insert(hc, e); /* the newest version of each key */
		prev = e;
	}
	return 0;
}

void ld_l0_free(struct ld_l0 *t)
{
	if (!t)
		return;
	free(t->bloom);
	free(t->elems);
	free(t->head_mem);
	free(t);
}

static inline void count(struct tips_listdb *db, struct ld_tls *t, const struct ld_entry *n)
{
	if (t && db->cfg.count_traversals) {
		LD_COUNT(t, traversals, 1);
		if (ld_domain_of(db, n) != t->domain)
			LD_COUNT(t, cross, 1);
	}
}

/* Asks for the lines of the element @e that a comparison reads (its header, next
 * pointers and, for the usual short keys and heights, its key). */
static inline void prefetch_entry(const struct ld_entry *e)
{
	if (e) {
		__builtin_prefetch(e);
		__builtin_prefetch((const char *)e + 56);
	}
}

/* Prefetches the elements x leads to on the (up to 3) layers below @l: a search that
 * stops moving right at x on layer l goes on from x on layer l - 1, so those loads
 * overlap the one of x's successor on layer l instead of following it. */
static inline void prefetch_below(const struct ld_entry *x, int l)
{
	for (int j = l - 1; j >= 0 && j >= l - 3; j--)
		prefetch_entry(ld_next(x, (unsigned)j));
}

/* The last element before (k, newest) in the bottom layer, reached through the upper
 * layers of the searcher's domain. *stopped: an IN_L1 element was met (stop_at_l1).
 * @above, if not NULL, is an element known to sort at or after k: reached, it ends the
 * layer without being read. */
static struct ld_entry *find_before(struct tips_listdb *db, struct ld_tls *t,
				    struct ld_entry *const *heads, struct ld_entry *start,
				    const struct ld_entry *above, const void *k, size_t kl,
				    bool stop_at_l1, bool *stopped)
{
	unsigned d = t ? upper_list(db, t->domain) : 0;
	struct ld_entry *x = start ? start : heads[d];
	int top = x->height - 1;
	for (int l = top; l >= 0; l--) {
		if (l == 0 && !start && x == heads[d])
			x = heads[0]; /* the bottom layer starts at domain 0's sentinel */
		struct ld_entry *n = ld_next(x, (unsigned)l);
		prefetch_below(x, l);
		while (n && n != above) {
			count(db, t, n);
			if (ld_cmp_entry_key(n, k, kl) >= 0)
				break;
			if (stop_at_l1 && (atomic_load_explicit(&n->flags, memory_order_acquire) &
					   LD_F_IN_L1)) {
				*stopped = true;
				return NULL;
			}
			x = n;
			n = ld_next(x, (unsigned)l);
			prefetch_below(x, l);
		}
	}
	return x;
}

struct ld_entry *ld_list_get(struct tips_listdb *db, struct ld_tls *t, struct ld_entry *const *heads,
			     struct ld_entry *start, const struct ld_entry *above, const void *k,
			     size_t kl, bool stop_at_l1)
{
	bool stopped = false;
	struct ld_entry *x = find_before(db, t, heads, start, above, k, kl, stop_at_l1, &stopped);
	if (!x)
		return NULL;
	/* x->next[0] may have changed since find_before compared it (Zipper links an
	 * element after x, or re-points an L0 element into L1): step past smaller keys. */
	struct ld_entry *n = ld_next(x, 0);
	while (n && ld_cmp_entry_key(n, k, kl) < 0)
		n = ld_next(n, 0);
	while (n && ld_cmp_entry_key(n, k, kl) == 0) {
		if (!ld_obsolete(n))
			return n;
		count(db, t, n);
		n = ld_next(n, 0);
	}
	return NULL;
}

struct ld_entry *ld_list_seek(struct tips_listdb *db, struct ld_entry *const *heads, const void *k,
			      size_t kl)
{
	if (kl == 0)
		return ld_next(heads[0], 0);
	bool stopped = false;
	struct ld_entry *x = find_before(db, NULL, heads, NULL, NULL, k, kl, false, &stopped);
	struct ld_entry *n = ld_next(x, 0);
	while (n && ld_cmp_entry_key(n, k, kl) < 0) /* linked after x meanwhile */
		n = ld_next(n, 0);
	return n;
}

/* Whether @x is one of the list's sentinels (for the finger of ld_list_preds). */
static bool is_head(const struct tips_listdb *db, struct ld_entry *const *heads,
		    const struct ld_entry *x)
{
	for (unsigned d = 0; d < db->domains; d++)
		if (x == heads[d])
			return true;
	return false;
}

void ld_list_preds(struct tips_listdb *db, struct ld_entry *const *heads, const struct ld_entry *e,
		   unsigned d, struct ld_entry **preds, bool resume)
{
	unsigned u = upper_list(db, d);
	struct ld_entry *x = heads[u];
	for (int l = LD_MAX_HEIGHT - 1; l >= 0; l--) {
		if (l == 0 && x == heads[u])
			x = heads[0];
		/* The last call's predecessor on this layer precedes e too: start from it
		 * if it is further along than the layer above left us. */
		struct ld_entry *f = resume ? preds[l] : NULL;
		if (f && f != x && !is_head(db, heads, f) &&
		    (is_head(db, heads, x) || ld_cmp_entries(f, x) > 0))
			x = f;
		struct ld_entry *n = ld_next(x, (unsigned)l);
		while (n && ld_cmp_entries(n, e) < 0) {
			x = n;
			n = ld_next(x, (unsigned)l);
		}
		preds[l] = x;
	}
}

bool ld_list_contains(struct tips_listdb *db, struct ld_entry *const *heads, const struct ld_entry *e,
		      struct ld_entry **finger)
{
	ld_list_preds(db, heads, e, 0, finger, true);
	return ld_next(finger[0], 0) == e;
}
