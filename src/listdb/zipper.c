/*
 * zipper.c - Zipper compaction (ListDB, OSDI'22, §3.4, Algorithm 3): merges one shard of
 * an L0 table into the same shard of L1 in place, by pointer updates only.
 *
 * Scan phase, head to tail: for each L0 element, find its predecessor in L1 at every
 * layer it has (in its own domain's lists for layers >= 1 when braided; in the bottom
 * list for layer 0), resuming from the previous element's predecessors, and push them
 * on a stack. The older version of the key met in L1 is marked obsolete (§3.4.4): only
 * the first, as L1 holds at most one version of a key not marked obsolete, its newest
 * (each merge marks the one it meets, and the older ones were marked when that one was
 * merged; marks are flushed in the scan and durable at the merge phase's first fence,
 * before the new version is linked, so this holds after a crash too); an L0
 * element that is not the newest of its key in the table, or that is a tombstone, is
 * marked obsolete too and not linked at all (in L1, the last level, it shadows nothing
 * that is not already obsolete). The elements come from the table's array (t->elems,
 * in list order), split into up to LD_SCAN_WAYS stretches searched at once, each search
 * prefetching the element it compares next and yielding to the next one, so that the
 * cache misses of several searches overlap (one search alone waits for each in turn).
 * Merge phase, tail to head, pipelined, one fence per element plus one per upper layer
 * beyond the first (1.08 on average): element i gets all its next pointers and its
 * IN_L1 flag and is flushed; a fence makes it durable, and with it the bottom link of
 * element i-1 (the one after it in key order), stored and flushed in the previous step;
 * then element i-1 is linked on its upper layers, bottom-up, a fence between two of
 * them (the last made durable by the next element's fence); then element i's
 * bottom-layer predecessor points at it (its linearization point; flushed, durable at
 * the next fence). Recovery relies on this order: of a shard's elements flagged IN_L1
 * after a crash, only the lowest keys can be unlinked (recover.c, in_l1). When elements
 * i and i-1 share a predecessor on an upper layer,
 * element i is written to point at i-1 there (i-1 is not linked on that layer yet). The
 * paper fences twice per element (element, bottom link) and leaves the upper layers
 * unpersisted; the first version of this file fenced twice plus once per upper layer
 * (2.33 per element on average).
 *
 * Durable invariant (after any crash): an element of L1 is linked on a prefix of its
 * layers 0..k, and every durable pointer leads to such an element. A search that
 * reaches an element on layer l therefore only ever follows its pointers of layers
 * <= l, which are valid. The prefix matters: an element durably on layer 2 but not on
 * layer 1 still points into layer 1, so an element after it can have two predecessors
 * on layer 1, and chunk reclamation, which unlinks the one its search finds, would free
 * an element still linked from the other (the crash campaign found this when the upper
 * links were left unordered). The paper leaves upper layers unpersisted, which is safe
 * only while nothing is ever unlinked, and our chunk reclamation unlinks.

 * Readers are never blocked and never miss a key (§3.4.3): they go head to tail while
 * the merge goes tail to head, every element stays reachable from some head, and a
 * pointer to an element is only written after the element's own pointers are in place.
 *
 * DRAM: a compaction thread allocates its buffers (ld_zipper_mem_new) before it takes a
 * shard, so a merge, once begun, allocates nothing and cannot fail half way; a thread
 * without buffers takes no shard and the compaction is not begun or is left to others.
 */
#include "listdb/listdb_internal.h"

#include <stdlib.h>

#include "pm/pm.h"
#include "util/errors_internal.h"

/* An element to link and its predecessors. Its height is kept here, read in the scan:
 * the merge phase must not load it from the element once flushed, as after clwb the
 * line has left the core's near caches on some CPUs (AMD Zen): those loads were 23% of
 * ld_zipper_shards' samples there. */
struct push {
	struct ld_entry *e;
	unsigned h;
	struct ld_entry *preds[LD_MAX_HEIGHT];
};

#define LD_MARKS_BATCH 256 /* obsolete marks whose chunk counts are added at once */

/* A compaction thread's buffers, each with room for the largest shard of the table. */
struct ld_zipper_mem {
	struct push *stack;
	struct ld_entry **tombs;
	struct cursor *cursors; /* [LD_SCAN_WAYS] */
	struct ld_entry *marked[LD_MARKS_BATCH]; /* marked obsolete, chunks not counted yet */
	size_t nmarked;
};

static inline bool same_key(const struct ld_entry *a, const struct ld_entry *b)
{
	return ld_keycmp(ld_key(a), a->klen, ld_key(b), b->klen) == 0;
}

/* Adds the marks of @m->marked to their chunks' obsolete counts and the store's. */
static void count_marks(struct tips_listdb *db, struct ld_zipper_mem *m)
{
	for (size_t i = 0; i < m->nmarked; i++) {
		struct ld_chunk *c = ld_chunk_of(db, m->marked[i]);
		if (c)
			atomic_fetch_add(&c->obsolete, 1);
	}
	if (m->nmarked)
		atomic_fetch_add(&db->st.obsolete_marked, m->nmarked);
	m->nmarked = 0;
}

/* ld_mark_obsolete for the scan phase: a plain store of the flag, flushed (durable at
 * the merge phase's first fence), the counts added in batches. ld_mark_obsolete's
 * locked OR and counter adds each waited for the flushes issued before them, like a
 * fence, per mark (8% of all samples in a 50/50 run). Nothing else writes the flags of
 * a shard's elements while it is merged: see write_element. */
static void mark_obsolete(struct tips_listdb *db, struct ld_zipper_mem *m, struct ld_entry *e)
{
	uint8_t f = atomic_load_explicit(&e->flags, memory_order_relaxed);
	if (f & LD_F_OBSOLETE)
		return;
	atomic_store_explicit(&e->flags, f | LD_F_OBSOLETE, memory_order_release);
	pm_flush((const void *)&e->flags, 1);
	m->marked[m->nmarked++] = e;
	if (m->nmarked == LD_MARKS_BATCH)
		count_marks(db, m);
}

/* count_traversals: L1 elements visited while placing an element of domain @d. */
struct visits {
	uint64_t n, cross;
};

static inline void visit(struct tips_listdb *db, struct visits *v, const struct ld_entry *n,
			 unsigned d)
{
	if (db->cfg.count_traversals) {
		v->n++;
		v->cross += ld_domain_of(db, n) != d;
	}
}

/* Writes @p->e's next pointers and its IN_L1 flag, and flushes it (no fence). Layer 0
 * takes its predecessor's successor as it is now; an upper layer l too, except when
 * @pending (the element placed just before, after this one in key order, whose upper
 * links are not stored yet) has the same predecessor on l: then this one precedes it. */
static void write_element(struct push *p, const struct push *pending)
{
	struct ld_entry *e = p->e;
	unsigned h = p->h;
	ld_set_next(e, 0, ld_next(p->preds[0], 0));
	for (unsigned l = 1; l < h; l++) {
		bool before_pending = pending && l < pending->h &&
				      pending->preds[l] == p->preds[l];
		ld_set_next(e, l, before_pending ? pending->e : ld_next(p->preds[l], l));
	}
	/* A plain store, not a locked OR: nothing else writes @e's flags while it is merged,
	 * nor those of the shard's L1 elements the scan marks obsolete (mark_obsolete):
	 * only this shard's scan and merge, on this thread, write them; chunk reclamation
	 * and other compactions hold compaction_lock, which this one's thread holds until
	 * every shard is done; WAL flushes mark only log entries and unlinked copies, never
	 * table elements; readers only load. A locked instruction waits for every flush
	 * issued before it, like a fence: it took 27% of ld_zipper_shards' samples. */
	atomic_store_explicit(&e->flags,
			      atomic_load_explicit(&e->flags, memory_order_relaxed) | LD_F_IN_L1,
			      memory_order_release);
	pm_flush(e, sizeof(*e) + 8u * h);
}

/* Links @p->e on its upper layers (its bottom link is durable), bottom-up, each store
 * flushed and fenced before the next one (the first needs none: the bottom link is
 * durable; the last is made durable by the next element's fence), so that the element
 * is durably linked on a prefix of its layers. */
static void link_upper(struct push *p)
{
	struct ld_entry *e = p->e;
	unsigned h = p->h;
	for (unsigned l = 1; l < h; l++) {
		if (l >= 2)
			pm_drain(); /* layer l-1 durable before layer l */
		ld_set_next(p->preds[l], l, e);
		pm_flush((const void *)&p->preds[l]->next[l], 8);
	}
}

/* The scan phase runs LD_SCAN_WAYS searches at once, each over its own stretch of the
 * shard's elements: a search is a chain of dependent loads of L1 elements, nearly every
 * one a cache miss, so one search alone keeps a single miss in flight. Each cursor
 * prefetches the element it must compare next and yields to the next cursor, so that up
 * to LD_SCAN_WAYS misses overlap. A stretch's first search starts at the heads (a full
 * top-down search), later ones at their stretch's previous element's predecessors
 * (rightmost); the predecessors found are the same as a single scan's. 16 ways: on the
 * AMD machine 8 left misses unissued (compaction CPU per merged element -8% at 16, no
 * further gain at 24 or 32: docs/listdb.md, "Thirteenth round"). */
#define LD_SCAN_WAYS 16
#define LD_SCAN_MIN_STRETCH 256 /* fewer elements per stretch: fewer cursors */
#define LD_MERGE_AHEAD 4        /* merge phase: elements prefetched ahead */

struct cursor {
	size_t i, end;        /* element index in the shard; end of the stretch */
	struct ld_entry *e;   /* the element being placed (elems[i]) */
	struct push *p;       /* its slot */
	unsigned u, de;       /* its upper list and its domain */
	int l;                /* the layer being walked */
	struct ld_entry *x, *n; /* on layer l: x < e, n = x's successor (prefetched) */
	struct ld_entry *bottom;
	struct ld_entry *rightmost[TIPS_LISTDB_MAX_DOMAINS][LD_MAX_HEIGHT];
};

/* Begins placing element @c->i (the cursor's stretch is not done). */
static void cursor_begin(struct tips_listdb *db, struct cursor *c, struct ld_entry **elems,
			 struct push *stack)
{
	c->e = elems[c->i];
	if (c->i + 1 < c->end)
		__builtin_prefetch(elems[c->i + 1]);
	c->p = &stack[c->i];
	c->de = ld_domain_of(db, c->e);
	c->u = db->braided ? c->de : 0;
	c->l = LD_MAX_HEIGHT - 1;
	c->x = c->rightmost[c->u][c->l];
	c->n = ld_next(c->x, (unsigned)c->l);
}

/* Advances @c until it has prefetched a line it must read next (true) or its stretch
 * is done (false). Per element: on each layer from the top, from the later of the
 * layer's rightmost and the element's predecessor on the layer above, step right while
 * the next element is smaller; the bottom layer starts from the later of the last
 * bottom predecessor and the layer-1 one. Then the element's own work (see the scan
 * phase in merge_shard). */
static bool cursor_step(struct tips_listdb *db, struct cursor *c, struct ld_entry **elems,
			struct push *stack, struct ld_zipper_mem *m, size_t *ntombs,
			struct visits *vis)
{
	for (;;) {
		if (c->n)
			visit(db, vis, c->n, c->de);
		if (ld_walk_step(&c->x, &c->n, c->e, (unsigned)c->l)) {
			if (c->n)
				return true;
			continue;
		}
		/* c->x is e's predecessor on layer l */
		struct ld_entry *e = c->e;
		if (c->l > 0) {
			c->rightmost[c->u][c->l] = c->x;
			if ((unsigned)c->l < e->height)
				c->p->preds[c->l] = c->x;
			c->l--;
			struct ld_entry *r = c->l > 0 ? c->rightmost[c->u][c->l] : c->bottom;
			c->x = c->x == r ? r : ld_later(c->x, r);
			c->n = ld_next(c->x, (unsigned)c->l);
			if (c->n) {
				ld_prefetch_compared(c->n);
				return true;
			}
			continue;
		}
		c->bottom = c->x;
		c->p->preds[0] = c->x;
		c->p->e = NULL; /* not linked unless it is placed below */
		struct ld_entry *n = c->n;
		if (c->i > 0 && same_key(elems[c->i - 1], e)) {
			mark_obsolete(db, m, e); /* an older version in the same table */
		} else {
			/* The newest older version in L1 (the first of the key): the ones
			 * after it were marked when it was merged, so the next element, a
			 * miss of its own, need not be read. */
			if (n && same_key(n, e))
				mark_obsolete(db, m, n);
			if (e->op == LD_OP_DELETE)
				/* Marked at the end of the scan, after every older version
				 * of its key (in L1 and later in this table): readers skip
				 * obsolete elements. */
				m->tombs[(*ntombs)++] = e;
			else {
				c->p->e = e;
				c->p->h = e->height;
			}
		}
		if (++c->i == c->end)
			return false;
		cursor_begin(db, c, elems, stack);
		if (c->n) {
			ld_prefetch_compared(c->n);
			return true;
		}
	}
}

/* Prefetches, for writing, the lines the merge phase will store to for @p. */
static inline void prefetch_merge(const struct push *p)
{
	if (!p->e)
		return;
	__builtin_prefetch(p->e, 1);
	for (unsigned l = 0; l < p->h; l++)
		__builtin_prefetch(&p->preds[l]->next[l], 1);
}

static void merge_shard(struct tips_listdb *db, struct ld_l0 *t, unsigned s,
			struct ld_zipper_mem *m)
{
	struct visits vis = { 0, 0 };
	struct push *stack = m->stack;
	struct ld_entry **tombs = m->tombs;
	struct ld_entry **elems = t->elems + t->first[s];
	size_t n = t->nshard[s];
	size_t ntombs = 0;

	/* I. scan phase, head to tail, in LD_SCAN_WAYS stretches at once: each element's
	 * predecessors in L1, pushed in its slot of the stack (slot e NULL: not linked) */
	size_t ways = n / LD_SCAN_MIN_STRETCH;
	ways = ways < 1 ? 1 : ways > LD_SCAN_WAYS ? LD_SCAN_WAYS : ways;
	struct cursor *cur = m->cursors;
	for (size_t w = 0; w < ways; w++) {
		struct cursor *c = &cur[w];
		c->i = n * w / ways;
		c->end = n * (w + 1) / ways;
		for (unsigned d = 0; d < db->domains; d++)
			for (unsigned l = 0; l < LD_MAX_HEIGHT; l++)
				c->rightmost[d][l] = ld_l1_head(db, s, d);
		c->bottom = ld_l1_head(db, s, 0);
		cursor_begin(db, c, elems, stack);
	}
	size_t live = ways;
	while (live > 0)
		for (size_t w = 0; w < live;) {
			if (cursor_step(db, &cur[w], elems, stack, m, &ntombs, &vis))
				w++;
			else
				cur[w] = cur[--live]; /* its stretch is done */
		}

	for (size_t i = 0; i < ntombs; i++)
		mark_obsolete(db, m, tombs[i]);
	count_marks(db, m);
	atomic_fetch_add(&db->st.ctrav, vis.n);
	atomic_fetch_add(&db->st.ccross, vis.cross);

	/* II. merge phase, tail to head, one fence per element (see the top of the file);
	 * the lines of the elements LD_MERGE_AHEAD ahead are prefetched. No locked
	 * instruction per element (the merged count, the second-chance offers: once per
	 * shard below): each would wait for the flushes before it like a fence (the
	 * count's atomic add took 95% of link_upper's samples). */
	struct push *pending = NULL;
	size_t merged = 0;
	for (size_t i = n; i-- > 0;) {
		if (i >= LD_MERGE_AHEAD)
			prefetch_merge(&stack[i - LD_MERGE_AHEAD]);
		struct push *p = &stack[i];
		if (!p->e)
			continue;
		write_element(p, pending);
		pm_drain(); /* p->e durable; and pending's bottom link */
		if (pending)
			link_upper(pending);
		ld_set_next(p->preds[0], 0, p->e); /* the linearization point */
		pm_flush((const void *)&p->preds[0]->next[0], 8);
		pending = p;
		merged++;
	}
	if (pending) {
		pm_drain();
		link_upper(pending);
	}
	atomic_fetch_add(&db->st.entries_merged, merged);
	if (db->scache) { /* the tall elements linked, offered as start points for gets */
		pthread_mutex_lock(&db->scache_lock);
		for (size_t i = 0; i < n; i++)
			if (stack[i].e && stack[i].h >= 3)
				ld_scache_add(db->scache, stack[i].e);
		pthread_mutex_unlock(&db->scache_lock);
	}
}

struct ld_zipper_mem *ld_zipper_mem_new(struct tips_listdb *db, const struct ld_l0 *t)
{
	size_t cap = 1;
	for (unsigned s = 0; s < db->shards; s++)
		if (t->nshard[s] > cap)
			cap = t->nshard[s];
	struct ld_zipper_mem *m = ld_dram_calloc(db, LD_DRAM_ZIPPER, sizeof(*m));
	if (!m)
		return NULL;
	m->stack = malloc(cap * sizeof(*m->stack));
	m->tombs = malloc(cap * sizeof(*m->tombs));
	m->cursors = malloc(LD_SCAN_WAYS * sizeof(*m->cursors));
	if (!m->stack || !m->tombs || !m->cursors) {
		ld_zipper_mem_free(m);
		return NULL;
	}
	return m;
}

void ld_zipper_mem_free(struct ld_zipper_mem *m)
{
	if (!m)
		return;
	free(m->stack);
	free(m->tombs);
	free(m->cursors);
	free(m);
}

void ld_zipper_shards(struct tips_listdb *db, struct ld_l0 *t, struct ld_zipper_mem *m)
{
	for (;;) {
		unsigned s = atomic_fetch_add(&db->next_shard, 1);
		if (s >= db->shards)
			break;
		if (t->nshard[s]) {
			struct tips_pm_counters c0, c1;
			tips_pm_counters_thread(&c0);
			merge_shard(db, t, s, m);
			tips_pm_counters_thread(&c1);
			atomic_fetch_add(&db->st.compaction_fences, c1.fences - c0.fences);
		}
	}
	pm_drain(); /* the flushed obsolete flags */
}
