/*
 * check.c - tips_listdb_check(): the structural and ownership check the tests run after
 * every crash and recovery.
 *
 * It verifies, with no writer running: every L1 and L0 list is sorted at every layer,
 * every element of an upper layer is on the bottom layer, every owned chunk has its header,
 * each upper layer holds only elements of its own domain (braided) and of enough height;
 * every element lies inside a live chunk of the domain pools (never the spare) and has a
 * valid checksum;
 * L1 elements carry LD_F_IN_L1, and of two versions of a key in L1 the older is marked
 * obsolete; and the heap of every domain pool holds exactly the chunks the roots own (no
 * leaked block, no slot pointing at a free block).
 */
#include "listdb/listdb_internal.h"

#include <stdio.h>
#include <tips/heap.h>

#include "util/errors_internal.h"
#include "util/version_internal.h"

static int bad_entry(struct tips_listdb *db, const struct ld_entry *e, const char *where)
{
	struct ld_chunk *c = ld_chunk_of(db, e);
	if (!c || atomic_load(&c->state) == LD_CS_FREE)
		return tips_set_error(TIPS_ECORRUPT, "%s: element %p is not in a live chunk",
				      where, (const void *)e);
	if (atomic_load(&c->state) == LD_CS_SPARE)
		return tips_set_error(TIPS_ECORRUPT, "%s: element %p lies in the spare chunk",
				      where, (const void *)e);
	if ((const char *)e < (const char *)c->hdr + LD_CHUNK_HDR ||
	    e->height == 0 || e->height > LD_MAX_HEIGHT || ld_entry_checksum(e) != e->csum)
		return tips_set_error(TIPS_ECORRUPT, "%s: element %p is damaged", where,
				      (const void *)e);
	return 0;
}

static int check_list(struct tips_listdb *db, struct ld_entry *const *heads, bool l1,
		      const char *where, uint64_t *count)
{
	int rc;
	const struct ld_entry *prev = NULL;
	for (struct ld_entry *e = ld_next(heads[0], 0); e; e = ld_next(e, 0)) {
		if ((rc = bad_entry(db, e, where)))
			return rc;
		if (prev && ld_cmp_entries(prev, e) >= 0)
			return tips_set_error(TIPS_ECORRUPT, "%s: bottom layer out of order", where);
		if (l1 && !(atomic_load(&e->flags) & LD_F_IN_L1))
			return tips_set_error(TIPS_ECORRUPT, "%s: element without its L1 flag", where);
		/* Zipper marks only the first older version it meets (zipper.c) */
		if (l1 && prev && !ld_obsolete(e) &&
		    ld_keycmp(ld_key(prev), prev->klen, ld_key(e), e->klen) == 0)
			return tips_set_error(TIPS_ECORRUPT, "%s: an older version of a key is not "
					      "marked obsolete", where);
		prev = e;
		(*count)++;
	}
	for (unsigned d = 0; d < (db->braided ? db->domains : 1u); d++)
		for (unsigned l = 1; l < LD_MAX_HEIGHT; l++) {
			prev = NULL;
			struct ld_entry *bottom = ld_next(heads[0], 0);
			for (struct ld_entry *e = ld_next(heads[d], l); e; e = ld_next(e, l)) {
				if ((rc = bad_entry(db, e, where)))
					return rc;
				if (e->height <= l)
					return tips_set_error(TIPS_ECORRUPT, "%s: element of height "
							      "%u on layer %u", where, e->height, l);
				if (db->braided && ld_domain_of(db, e) != d)
					return tips_set_error(TIPS_ECORRUPT, "%s: layer %u of domain "
							      "%u links another domain", where, l, d);
				if (prev && ld_cmp_entries(prev, e) >= 0)
					return tips_set_error(TIPS_ECORRUPT, "%s: layer %u out of "
							      "order", where, l);
				/* the bottom layer must hold it: advance along it (both sorted) */
				while (bottom && ld_cmp_entries(bottom, e) < 0)
					bottom = ld_next(bottom, 0);
				if (bottom != e)
					return tips_set_error(TIPS_ECORRUPT, "%s: element %p on layer "
							      "%u is not on the bottom layer", where,
							      (const void *)e, l);
				prev = e;
			}
		}
	return 0;
}

struct heap_count {
	struct tips_listdb *db;
	unsigned domain;
	uint64_t blocks, strays;
};

static int count_block(const struct tips_heap_block *b, void *arg)
{
	struct heap_count *h = arg;
	struct ld_chunk *c = ld_chunk_of(h->db, b->ptr);
	if (b->pending && !c)
		return 0; /* freed by the gc, returned to the heap at its next checkpoint */
	h->blocks++;
	if (!c || (void *)c->hdr != b->ptr || c->domain != h->domain)
		h->strays++;
	return 0;
}

static int check_all(struct tips_listdb *db, struct tips_listdb_report *rp);

int tips_listdb_check_sized(struct tips_listdb *db, struct tips_listdb_report *rep,
			    size_t size)
{
	struct tips_listdb_report r = { 0 };
	int rc;
	if (!db)
		return tips_set_error(TIPS_EINVAL, "tips_listdb_check: NULL database");
	pthread_mutex_lock(&db->compaction_lock); /* no compaction or gc meanwhile */
	rc = check_all(db, &r);
	pthread_mutex_unlock(&db->compaction_lock);
	if (rc == 0 && rep)
		tips_struct_write(rep, size, &r, sizeof(r));
	return rc;
}

static int check_all(struct tips_listdb *db, struct tips_listdb_report *rp)
{
	struct tips_listdb_report r = { 0 };
	int rc;
	char where[64];
	struct ld_entry *heads[TIPS_LISTDB_MAX_DOMAINS];
	for (unsigned s = 0; s < db->shards; s++) {
		ld_l1_heads(db, s, heads);
		snprintf(where, sizeof(where), "L1 shard %u", s);
		if ((rc = check_list(db, heads, true, where, &r.l1_elements)))
			return rc;
	}
	pthread_mutex_lock(&db->view_lock);
	for (struct ld_l0 *t = db->l0_oldest; t; t = t->newer)
		for (unsigned s = 0; s < db->shards; s++) {
			snprintf(where, sizeof(where), "L0 table %llu shard %u",
				 (unsigned long long)t->seq, s);
			rc = check_list(db, t->heads[s], false, where, &r.l0_elements);
			if (rc) {
				pthread_mutex_unlock(&db->view_lock);
				return rc;
			}
		}
	pthread_mutex_unlock(&db->view_lock);
	for (unsigned d = 0; d < db->domains; d++) {
		struct ld_root *root = db->dom[d].root;
		for (unsigned s = 0; s < LD_MAX_CHUNKS; s++) {
			bool owned = root->chunk_slots[s] != 0;
			bool live = atomic_load(&db->dom[d].chunks[s].state) != LD_CS_FREE;
			if (owned != live)
				return tips_set_error(TIPS_ECORRUPT, "domain %u chunk slot %u: owned %d "
						      "but registered %d", d, s, owned, live);
			const struct ld_chunk_hdr *h = (const void *)(uintptr_t)root->chunk_slots[s];
			if (owned && (h->magic != LD_MAGIC || h->domain != d ||
				      (h->kind != LD_CHUNK_LOG && h->kind != LD_CHUNK_COPY &&
				       h->kind != LD_CHUNK_SPARE)))
				return tips_set_error(TIPS_ECORRUPT, "domain %u chunk slot %u: the "
						      "block has no valid chunk header", d, s);
			r.chunks += owned;
		}
		struct heap_count h = { db, d, 0, 0 };
		tips_heap_walk(tips_pool_heap(db->dom[d].pool), count_block, &h);
		r.heap_blocks += h.blocks;
		if (h.strays)
			return tips_set_error(TIPS_ECORRUPT, "domain %u: %llu heap blocks that no "
					      "chunk slot owns (leaked)", d,
					      (unsigned long long)h.strays);
	}
	if (r.heap_blocks != r.chunks)
		return tips_set_error(TIPS_ECORRUPT, "%llu heap blocks for %llu owned chunks",
				      (unsigned long long)r.heap_blocks,
				      (unsigned long long)r.chunks);
	*rp = r;
	return 0;
}
