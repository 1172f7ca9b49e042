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

/* Unlinks @e from its L1 list, top layer first, each store persisted before the next:
 * an element stays durably linked on a prefix of its layers (0..k), never on a layer
 * without the ones below it. */
static void unlink_entry(struct ld_chunk *c, struct ld_entry *e, void *arg)
{
	(void)c;
	struct tips_listdb *db = arg;
	if (!(atomic_load(&e->flags) & LD_F_IN_L1))
		return;
	unsigned s = ld_shard_of(db, ld_key(e), e->klen);
	struct ld_entry *heads[TIPS_LISTDB_MAX_DOMAINS];
	for (unsigned d = 0; d < db->domains; d++)
		heads[d] = ld_l1_head(db, s, d);
	struct ld_entry *preds[LD_MAX_HEIGHT];
	ld_list_preds(db, heads, e, ld_domain_of(db, e), preds);
	for (unsigned l = e->height; l-- > 0;) {
		if (ld_next(preds[l], l) != e)
			continue; /* not linked at this layer (an earlier, interrupted unlink) */
		ld_set_next(preds[l], l, ld_next(e, l));
		pm_persist((const void *)&preds[l]->next[l], 8);
	}
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
	for (unsigned i = 0; i < r.n; i++)
		ld_chunk_parse(batch[i], unlink_entry, db);
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
