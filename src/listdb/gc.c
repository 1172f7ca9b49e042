/*
 * gc.c - reclamation of obsolete log chunks (ListDB, OSDI'22, §3.4.5).
 *
 * A chunk is reclaimed when it is retired (no writer appends to it), every table it
 * holds entries of is merged (max_seq < merged_seq), and every entry in it is obsolete.
 * Steps, for a batch of such chunks:
 *   1. drop their entries from both lookup caches, and wait for a grace period, so no
 *      reader can start a search at one of them;
 *   2. unlink each entry that is linked in L1, top layer first, each store persisted
 *      before the next (so an element is always durably on a prefix of its layers, the
 *      invariant of zipper.c); after a crash no durable pointer leads into the chunk;
 *   3. wait for a grace period, so no reader still stands on an entry; free the chunk.
 * The simple epoch scheme of the paper is replaced by these RCU grace periods.
 * Invariant: the caller holds compaction_lock, so no compaction changes L1 meanwhile.
 */
#include "listdb/listdb_internal.h"

#include <stdlib.h>
#include <tips/heap.h>

#include "pm/pm.h"
#include "util/grace.h"

struct range {
	uintptr_t lo[64], hi[64];
	unsigned n;
};

static bool in_ranges(const struct ld_entry *e, void *arg)
{
	const struct range *r = arg;
	for (unsigned i = 0; i < r->n; i++)
		if ((uintptr_t)e >= r->lo[i] && (uintptr_t)e < r->hi[i])
			return true;
	return false;
}

static void forget_cached(struct ld_chunk *c, struct ld_entry *e, void *arg)
{
	(void)c;
	struct tips_listdb *db = arg;
	ld_hcache_forget(db->hcache, e);
}

/* Unlinks @e from its L1 list at @preds (its predecessors, layer by layer), top layer
 * first, each store persisted before the next: an element stays durably linked on a
 * prefix of its layers (0..k), never on a layer without the ones below it. */
static void unlink_at(struct ld_entry *e, struct ld_entry **preds)
{
	for (unsigned l = e->height; l-- > 0;) {
		if (ld_next(preds[l], l) != e)
			continue; /* not linked at this layer (an earlier, interrupted unlink) */
		ld_set_next(preds[l], l, ld_next(e, l));
		pm_persist((const void *)&preds[l]->next[l], 8);
	}
}

/* Unlinks @e, found by a search from its shard's heads (the way without DRAM for the
 * sorted one below). */
static void unlink_entry(struct ld_chunk *c, struct ld_entry *e, void *arg)
{
	(void)c;
	struct tips_listdb *db = arg;
	if (!(atomic_load(&e->flags) & LD_F_IN_L1))
		return;
	struct ld_entry *heads[TIPS_LISTDB_MAX_DOMAINS], *preds[LD_MAX_HEIGHT];
	ld_l1_heads(db, ld_shard_of(db, ld_key(e), e->klen), heads);
	ld_list_preds(db, heads, e, ld_domain_of(db, e), preds, false);
	unlink_at(e, preds);
}

/* An element to unlink, in the order of the unlinking: by shard and upper list, then
 * by key (its first 8 bytes first) and LSN, as in the list. */
struct doomed {
	uint32_t group; /* shard * domains + upper list */
	uint64_t key8;
	struct ld_entry *e;
};

struct doomed_set {
	struct tips_listdb *db;
	struct doomed *v;
	size_t n, cap;
};

/* Adds @e to the set if it is in L1; when DRAM for the set is out, unlinks it now,
 * searched from the heads (the windows search the list as it is then). */
static void collect_doomed(struct ld_chunk *c, struct ld_entry *e, void *arg)
{
	struct doomed_set *ds = arg;
	if (!(atomic_load(&e->flags) & LD_F_IN_L1))
		return;
	if (ds->n == ds->cap) {
		size_t cap = ds->cap ? 2 * ds->cap : 4096;
		struct doomed *v = realloc(ds->v, cap * sizeof(*v));
		if (!v) {
			unlink_entry(c, e, ds->db);
			return;
		}
		ds->v = v;
		ds->cap = cap;
	}
	struct tips_listdb *db = ds->db;
	unsigned u = db->braided ? ld_domain_of(db, e) : 0;
	ds->v[ds->n++] = (struct doomed){
		(uint32_t)(ld_shard_of(db, ld_key(e), e->klen) * db->domains + u),
		ld_key8(ld_key(e), e->klen), e };
}

static int doomed_cmp(const void *pa, const void *pb)
{
	const struct doomed *a = pa, *b = pb;
	if (a->group != b->group)
		return a->group < b->group ? -1 : 1;
	if (a->key8 != b->key8)
		return a->key8 < b->key8 ? -1 : 1;
	return ld_cmp_entries(a->e, b->e);
}

/* The search of a window's elements runs GC_WAYS stretches at once, as Zipper's scan
 * does (zipper.c): each walk is a chain of cache misses, so one alone keeps one miss in
 * flight. A cursor searches its stretch's elements in turn, each from the predecessors
 * of the one before (a finger search); none of them changes the list. */
#define GC_WINDOW 4096
#define GC_WAYS 8
#define GC_MIN_STRETCH 64

struct gc_cursor {
	size_t i, end;                 /* element index in the window; end of the stretch */
	struct ld_entry *e;            /* the element searched */
	struct ld_entry *const *heads; /* its shard's sentinels */
	unsigned u;                    /* its upper list */
	int l;                         /* the layer walked */
	struct ld_entry *x, *n;        /* on layer l: x < e, n = x's successor (prefetched) */
	struct ld_entry **preds;       /* the element's predecessors (the window's slot) */
	struct ld_entry *finger[LD_MAX_HEIGHT]; /* the stretch's previous ones (NULL: none) */
};

/* Enters layer @c->l: from the later of where the layer above left the search and the
 * finger; false when the layer has nothing after it (then the caller goes on). */
static bool cursor_enter(struct gc_cursor *c)
{
	if (c->l == 0 && c->x == c->heads[c->u])
		c->x = c->heads[0];
	struct ld_entry *f = c->finger[c->l];
	if (f && f != c->x)
		c->x = ld_later(c->x, f);
	c->n = ld_next(c->x, (unsigned)c->l);
	if (c->n)
		ld_prefetch_compared(c->n);
	return c->n != NULL;
}

static void cursor_begin(struct gc_cursor *c, struct doomed *v, struct ld_entry **preds)
{
	c->e = v[c->i].e;
	c->preds = preds + c->i * LD_MAX_HEIGHT;
	c->l = LD_MAX_HEIGHT - 1;
	c->x = c->heads[c->u];
	cursor_enter(c);
}

/* Advances @c until it has prefetched a line it must read next (true) or its stretch is
 * done (false). */
static bool cursor_step(struct gc_cursor *c, struct doomed *v, struct ld_entry **preds)
{
	for (;;) {
		if (ld_walk_step(&c->x, &c->n, c->e, (unsigned)c->l)) {
			if (c->n)
				return true;
			continue;
		}
		c->preds[c->l] = c->finger[c->l] = c->x; /* e's predecessor on layer l */
		if (c->l > 0) {
			c->l--;
			if (cursor_enter(c))
				return true;
			continue;
		}
		if (++c->i == c->end)
			return false;
		cursor_begin(c, v, preds);
		if (c->n)
			return true;
	}
}

/* A window's predecessors (LD_MAX_HEIGHT per element) and the cursors that find them. */
struct gc_scratch {
	struct ld_entry *preds[GC_WINDOW * LD_MAX_HEIGHT];
	struct gc_cursor cur[GC_WAYS];
};

/* Finds the predecessors of the window @v[0..@n) (one shard and upper list, in list
 * order) in @preds (LD_MAX_HEIGHT per element), on the list as it is. */
static void search_window(struct tips_listdb *db, struct doomed *v, size_t n,
			  struct ld_entry **preds, struct gc_cursor *cur)
{
	struct ld_entry *heads[TIPS_LISTDB_MAX_DOMAINS];
	ld_l1_heads(db, v[0].group / db->domains, heads);
	size_t ways = n / GC_MIN_STRETCH;
	ways = ways < 1 ? 1 : ways > GC_WAYS ? GC_WAYS : ways;
	for (size_t w = 0; w < ways; w++) {
		struct gc_cursor *c = &cur[w];
		c->i = n * w / ways;
		c->end = n * (w + 1) / ways;
		c->heads = heads;
		c->u = v[0].group % db->domains;
		for (unsigned l = 0; l < LD_MAX_HEIGHT; l++)
			c->finger[l] = NULL;
		cursor_begin(c, v, preds);
	}
	size_t live = ways;
	while (live > 0)
		for (size_t w = 0; w < live;) {
			if (cursor_step(&cur[w], v, preds))
				w++;
			else
				cur[w] = cur[--live]; /* its stretch is done */
		}
}

/* Unlinks every L1 element of the @n chunks in @batch. They are sorted in list order and
 * taken in windows of one shard and upper list: the window's predecessors are found
 * first, on the list as it is, by GC_WAYS finger searches at once (a search from the
 * heads for each took about half of all CPU in a run of overwrites, tips-listdb-bench
 * puts --rounds 4), then the window is unlinked from its last element to its first.
 * In that order every predecessor found is still right when it is used: one that is
 * itself in the window is unlinked after the elements it precedes, and a store only
 * changes the next pointer of an element before the one unlinked. Without DRAM for
 * the window, each is searched from the heads; without DRAM for the set, the elements
 * it has no room for are. */
static void unlink_chunks(struct tips_listdb *db, struct ld_chunk **batch, unsigned n)
{
	struct gc_scratch *scr = malloc(sizeof(*scr));
	if (!scr) {
		for (unsigned i = 0; i < n; i++)
			ld_chunk_parse(batch[i], unlink_entry, db);
		return;
	}
	struct doomed_set ds = { db, NULL, 0, 0 };
	for (unsigned i = 0; i < n; i++)
		ld_chunk_parse(batch[i], collect_doomed, &ds);
	if (ds.n)
		qsort(ds.v, ds.n, sizeof(*ds.v), doomed_cmp);
	for (size_t i = 0; i < ds.n;) {
		size_t j = i + 1;
		while (j < ds.n && j - i < GC_WINDOW && ds.v[j].group == ds.v[i].group)
			j++;
		search_window(db, ds.v + i, j - i, scr->preds, scr->cur);
		for (size_t k = j - i; k-- > 0;)
			unlink_at(ds.v[i + k].e, scr->preds + k * LD_MAX_HEIGHT);
		i = j;
	}
	free(ds.v);
	free(scr);
}

static bool reclaimable(struct tips_listdb *db, struct ld_chunk *c)
{
	return atomic_load(&c->state) == LD_CS_RETIRED &&
	       atomic_load(&c->obsolete) >= atomic_load(&c->entries) &&
	       atomic_load(&c->max_seq) < db->manifest->merged_seq;
}

void ld_gc_run(struct tips_listdb *db)
{
	struct ld_chunk *batch[64];
	struct range r = { .n = 0 };
	for (unsigned d = 0; d < db->domains && r.n < 64; d++)
		for (unsigned s = 0; s < LD_MAX_CHUNKS && r.n < 64; s++) {
			struct ld_chunk *c = &db->dom[d].chunks[s];
			if (!reclaimable(db, c))
				continue;
			batch[r.n] = c;
			r.lo[r.n] = (uintptr_t)c->hdr;
			r.hi[r.n] = (uintptr_t)c->hdr + LD_CHUNK_SIZE;
			r.n++;
		}
	if (r.n == 0)
		return;
	/* 1 */
	if (db->scache) {
		pthread_mutex_lock(&db->scache_lock);
		ld_scache_forget(db->scache, in_ranges, &r);
		pthread_mutex_unlock(&db->scache_lock);
	}
	for (unsigned i = 0; i < r.n; i++)
		ld_chunk_parse(batch[i], forget_cached, db);
	grace_wait();
	/* 2 */
	unlink_chunks(db, batch, r.n);
	/* 3 */
	grace_wait();
	bool freed[TIPS_LISTDB_MAX_DOMAINS] = { false };
	for (unsigned i = 0; i < r.n; i++)
		if (ld_chunk_free(db, batch[i]) == 0) {
			atomic_fetch_add(&db->st.chunks_reclaimed, 1);
			freed[batch[i]->domain] = true;
		}
	/* Freed blocks become reusable at the heap's next checkpoint: take it now. */
	for (unsigned d = 0; d < db->domains; d++)
		if (freed[d])
			tips_heap_checkpoint(tips_pool_heap(db->dom[d].pool), 0);
}

static void count_entry(struct ld_chunk *c, struct ld_entry *e, void *arg)
{
	(void)arg;
	if (ld_obsolete(e))
		atomic_fetch_add(&c->obsolete, 1);
	if (LD_SEQ(e->lsn) > atomic_load(&c->max_seq))
		atomic_store(&c->max_seq, LD_SEQ(e->lsn));
}

void ld_gc_recount(struct tips_listdb *db)
{
	for (unsigned d = 0; d < db->domains; d++)
		for (unsigned s = 0; s < LD_MAX_CHUNKS; s++) {
			struct ld_chunk *c = &db->dom[d].chunks[s];
			if (atomic_load(&c->state) != LD_CS_UNCOUNTED)
				continue;
			atomic_store(&c->obsolete, 0);
			atomic_store(&c->max_seq, c->hdr->created_seq);
			uint64_t n = ld_chunk_parse(c, count_entry, NULL);
			atomic_store(&c->entries, (uint32_t)n);
			atomic_store(&c->state, LD_CS_RETIRED);
		}
}
