/*
 * heap_checkpoint.c - tips_heap_checkpoint and tips_heap_rollback: flush in bulk what
 * the lane records describe, apply the deferred frees, then retire every record at once
 * by advancing the generation (see heap_private.h for the whole design).
 *
 * Invariant kept: the generation advances (retiring every record at once) only after a
 * fence that follows the flush of everything the records of the old generation changed
 * (metadata, headers, slots) and of the cleared metadata of the blocks they free, so no
 * record is retired before its effects are durable. With rollback, MLog allocations are
 * freed and MLog frees forgotten instead. Every lane is held throughout.
 */
#define _GNU_SOURCE
#include "heap/heap_private.h"
#include "pm/pm.h"
#include "util/errors_internal.h"
#include "util/version_internal.h"
#include "util/thread_slot.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

/* ---- checkpoint, rollback, replay ----------------------------------------------- */

void lanes_lock_all(struct tips_heap *h)
{
	gate_enter(&h->all_lanes);
	for (unsigned i = 0; i < h->nlanes; i++)
		pthread_mutex_lock(&h->lanes[i].lock);
}

void lanes_unlock_all(struct tips_heap *h)
{
	for (unsigned i = h->nlanes; i-- > 0;)
		pthread_mutex_unlock(&h->lanes[i].lock);
	gate_leave(&h->all_lanes);
}

/*
 * The block a record names, with its geometry taken from the record, not the table:
 * during a checkpoint or a replay an extent's table entries may already read FREE.
 * Runs are never released while records of the generation may name them.
 */
void record_block(const struct tips_heap *h, const struct heap_record *r,
			 struct block_ref *ref, uint64_t *extent_n)
{
	uint64_t idx = chunk_index(h, (void *)r->block);
	uint64_t e = word_get(&h->table[idx]);
	*extent_n = 0;
	if (CHUNK_KIND(e) == CHUNK_RUN) {
		int cls = (int)CHUNK_ARG(e);
		ref->chunk = idx;
		ref->extent = false;
		ref->bit = (uint32_t)((r->block - (uint64_t)chunk_addr(h, idx) - RUN_BITMAP_BYTES) /
				      class_slot[cls]);
		ref->usable = class_slot[cls] - BLOCK_HEADER_SIZE;
	} else {
		*extent_n = extent_chunks(r->size);
		ref->chunk = idx;
		ref->extent = true;
		ref->bit = 0;
		ref->usable = *extent_n * HEAP_CHUNK_SIZE - BLOCK_HEADER_SIZE;
	}
	ref->hdr = (struct block_header *)r->block;
}


static void flush_once(struct line_filter *f, int stream, const void *addr, size_t len)
{
	uintptr_t first = (uintptr_t)addr & ~(uintptr_t)(PM_CACHELINE - 1);
	uintptr_t end = (uintptr_t)addr + len;
	if (first == f->last[stream] && end <= first + PM_CACHELINE)
		return;
	pm_flush(addr, len);
	f->last[stream] = ((end - 1) & ~(uintptr_t)(PM_CACHELINE - 1));
}

/* Flushes the metadata word(s) that say whether a block is allocated. */
static void flush_block_meta(struct tips_heap *h, const struct block_ref *ref,
			     uint64_t extent_n, struct line_filter *f)
{
	if (ref->extent)
		flush_once(f, 0, &h->table[ref->chunk], extent_n * sizeof(uint64_t));
	else
		flush_once(f, 0, &run_bitmap(h, ref->chunk)[ref->bit / 64], sizeof(uint64_t));
}

/* Flushes what a record's change wrote: metadata, header, slot, and with @contents the
 * whole block. */
void flush_record_effects(struct tips_heap *h, const struct heap_record *r,
				 bool contents, struct line_filter *f)
{
	struct block_ref ref;
	uint64_t n;
	record_block(h, r, &ref, &n);
	flush_block_meta(h, &ref, n, f);
	pm_flush(ref.hdr, contents ? BLOCK_HEADER_SIZE + r->size : BLOCK_HEADER_SIZE);
	if (r->slot)
		flush_once(f, 1, (void *)r->slot, sizeof(uint64_t));
}

/* Clears a block's allocated state (stores only; the caller flushes afterwards). */
static void block_clear(struct tips_heap *h, const struct block_ref *ref, uint64_t extent_n)
{
	if (ref->extent) {
		for (uint64_t i = 0; i < extent_n; i++)
			word_put(&h->table[ref->chunk + i], CHUNK_ENTRY(CHUNK_FREE, 0));
	} else {
		uint64_t *w = &run_bitmap(h, ref->chunk)[ref->bit / 64];
		word_put(w, word_get(w) & ~(1ull << (ref->bit % 64)));
	}
}

void pending_clear(struct tips_heap *h, const struct block_ref *ref)
{
	_Atomic uint64_t *pf = h->runs[ref->chunk].pending_free;
	if (pf)
		atomic_fetch_and(&pf[ref->bit / 64], ~(1ull << (ref->bit % 64)));
}

/* Volatile bookkeeping once a block's free is durable and its records retired. */
static void block_freed_volatile(struct tips_heap *h, const struct block_ref *ref,
				 uint64_t extent_n)
{
	h->lanes[0].bytes_delta -= (int64_t)ref->usable; /* every lane is locked */
	pending_clear(h, ref);
	if (ref->extent) {
		pthread_mutex_lock(&h->chunk_lock);
		chunk_mark_free(h, ref->chunk, extent_n, true);
		if (ref->chunk < h->chunk_hint)
			h->chunk_hint = ref->chunk;
		pthread_mutex_unlock(&h->chunk_lock);
		return;
	}
	struct run_state *r = &h->runs[ref->chunk];
	int cls = (int)CHUNK_ARG(word_get(&h->table[ref->chunk]));
	struct class_list *cl = &h->classes[cls];
	pthread_mutex_lock(&cl->lock);
	TIPS_INVARIANT(r->nfree < run_capacity(cls), "a block was freed twice in one checkpoint");
	r->nfree++;
	room_add(h, class_slot[cls]);
	if (r->owner < 0) {
		if (r->nfree == run_capacity(cls)) {
			/* Empty and unowned: give the chunk back for any class or extent. */
			if (r->listed)
				class_list_remove(h, cls, ref->chunk);
			room_add(h, -(int64_t)run_capacity(cls) * class_slot[cls]);
			pthread_mutex_lock(&h->chunk_lock);
			chunk_release_locked(h, ref->chunk, 1);
			pthread_mutex_unlock(&h->chunk_lock);
		} else if (!r->listed) {
			class_list_push(h, cls, ref->chunk);
		}
	}
	pthread_mutex_unlock(&cl->lock);
}

/* Does this record free its block in a checkpoint (or, with @rollback, a rollback)? */
static bool record_frees(unsigned type, bool rollback)
{
	return type == REC_FREE_SLOT || (type == REC_FREE_LOGGED && !rollback) ||
	       (type == REC_ALLOC_LOGGED && rollback);
}

/* Walks the records of generation @gen that the lanes wrote, lane by lane. */
struct record_iter {
	unsigned lane;
	uint64_t index;
};

static const struct heap_record *record_next(const struct tips_heap *h, uint64_t gen,
					     struct record_iter *it)
{
	uint64_t cap = h->hdr->lane_records;
	for (; it->lane < h->nlanes; it->lane++, it->index = 0) {
		const struct lane *lane = &h->lanes[it->lane];
		while (it->index < lane->nrec && it->index < cap) {
			const struct heap_record *r = &lane->log[it->index++];
			if (record_valid(h, r, gen))
				return r;
		}
	}
	return NULL;
}

static int record_block_compare(const void *a, const void *b)
{
	uint64_t x = (*(const struct heap_record *const *)a)->block;
	uint64_t y = (*(const struct heap_record *const *)b)->block;
	return (x > y) - (x < y);
}

/*
 * Gathers into h->freeing the records that free a block in this checkpoint, each block
 * once. In a commit a block has at most one such record (a free marks the block pending
 * first, and a second free is refused); a rollback may also undo the MLog allocation
 * of a block that a slot free names, so there the list is sorted and de-duplicated.
 */
static size_t freeing_collect(struct tips_heap *h, uint64_t gen, bool rollback)
{
	const struct heap_record *r;
	struct record_iter it = { 0, 0 };
	size_t n = 0;
	while ((r = record_next(h, gen, &it)) != NULL)
		if (record_frees(REC_TYPE(r->tag), rollback))
			h->freeing[n++] = r;
	if (!rollback || n < 2)
		return n;
	qsort(h->freeing, n, sizeof(*h->freeing), record_block_compare);
	size_t kept = 1;
	for (size_t i = 1; i < n; i++)
		if (h->freeing[i]->block != h->freeing[kept - 1]->block)
			h->freeing[kept++] = h->freeing[i];
	return kept;
}

/*
 * The checkpoint (and, with @rollback, the MLog rollback). Every lane lock held.
 * Step 1 persists every recorded allocation (rollback: only SLOT ones); step 2 applies
 * the frees (rollback: SLOT frees, and undoes LOGGED allocations) and persists them;
 * step 3 advances the generation, retiring every record; step 4 updates the volatile
 * free lists. A crash before step 3 leaves the records valid, and replaying them is
 * idempotent; after step 3 the media is consistent without them.
 */
int checkpoint_locked(struct tips_heap *h, unsigned flags, bool rollback)
{
	uint64_t gen = generation(h);
	bool contents = flags & TIPS_HEAP_FLUSH_LOGGED_BLOCKS;
	const struct heap_record *r;
	struct record_iter it;
	struct block_ref ref;
	uint64_t n;
	struct line_filter f = { { 0, 0 } };
	for (unsigned l = 0; l < h->nlanes; l++)
		reserve_release(h, &h->lanes[l], rollback);
	for (it = (struct record_iter){ 0, 0 }; (r = record_next(h, gen, &it));) {
		unsigned t = REC_TYPE(r->tag);
		if (t == REC_ALLOC_SLOT || (t == REC_ALLOC_LOGGED && !rollback))
			flush_record_effects(h, r, contents && t == REC_ALLOC_LOGGED, &f);
		else if (t == REC_FREE_LOGGED) /* written unfenced, maybe by another CPU */
			pm_flush(r, sizeof(*r));
		if (t == REC_FREE_SLOT) /* its current value: 0 or a newer block's */
			flush_once(&f, 1, (void *)r->slot, sizeof(uint64_t));
	}
	pm_drain();
	size_t nfreeing = freeing_collect(h, gen, rollback);
	for (size_t i = 0; i < nfreeing; i++) {
		record_block(h, h->freeing[i], &ref, &n);
		block_clear(h, &ref, n);
	}
	f = (struct line_filter){ { 0, 0 } };
	for (size_t i = 0; i < nfreeing; i++) {
		record_block(h, h->freeing[i], &ref, &n);
		flush_block_meta(h, &ref, n, &f);
	}
	pm_drain();
	__atomic_store_n(&h->hdr->generation, gen + 1, __ATOMIC_RELEASE);
	pm_persist(&h->hdr->generation, sizeof(uint64_t));
	for (size_t i = 0; i < nfreeing; i++) {
		record_block(h, h->freeing[i], &ref, &n);
		block_freed_volatile(h, &ref, n);
	}
	if (rollback) /* forgotten logged frees: the blocks stay allocated, unmarked */
		for (it = (struct record_iter){ 0, 0 }; (r = record_next(h, gen, &it));)
			if (REC_TYPE(r->tag) == REC_FREE_LOGGED) {
				record_block(h, r, &ref, &n);
				pending_clear(h, &ref);
			}
	for (unsigned l = 0; l < h->nlanes; l++) {
		h->lanes[l].nrec = 0;
		h->lanes[l].freed = 0;
		__atomic_store_n(&h->lanes[l].logged, 0, __ATOMIC_RELAXED);
	}
	h->undecided = false;
	atomic_fetch_add(rollback ? &h->n_rollbacks : &h->n_checkpoints, 1);
	return 0;
}

int tips_heap_checkpoint(struct tips_heap *h, unsigned flags)
{
	if (!h)
		return tips_set_error(TIPS_EINVAL, "tips_heap_checkpoint: no heap");
	lanes_lock_all(h);
	int rc = checkpoint_locked(h, flags, false);
	lanes_unlock_all(h);
	return rc;
}

uint64_t heap_flush_logged_blocks(struct tips_heap *h)
{
	lanes_lock_all(h);
	uint64_t gen = generation(h);
	uint64_t freed = 0;
	for (unsigned l = 0; l < h->nlanes; l++)
		freed += h->lanes[l].freed;
	const struct heap_record *r;
	struct record_iter it;
	struct line_filter f = { { 0, 0 } };
	/* After this step a crash commits the generation: the blocks still in reserves must
	 * be freed by it too, so their FREE_LOGGED records are written (and flushed) now. */
	for (unsigned l = 0; l < h->nlanes; l++)
		reserve_release(h, &h->lanes[l], false);
	for (it = (struct record_iter){ 0, 0 }; (r = record_next(h, gen, &it));) {
		if (REC_TYPE(r->tag) == REC_ALLOC_LOGGED)
			flush_record_effects(h, r, true, &f);
		else if (REC_TYPE(r->tag) == REC_FREE_LOGGED) /* written without a flush */
			pm_flush(r, sizeof(*r));
	}
	lanes_unlock_all(h);
	pm_drain();
	return freed;
}

uint64_t heap_chunk_room(const struct tips_heap *h)
{
	int64_t r = atomic_load_explicit(&h->chunk_room, memory_order_relaxed);
	return r > 0 ? (uint64_t)r : 0;
}

uint64_t heap_room(const struct tips_heap *h)
{
	int64_t r = atomic_load_explicit(&h->room, memory_order_relaxed);
	return r > 0 ? (uint64_t)r : 0;
}

uint64_t heap_lane_room(struct tips_heap *h)
{
	struct lane *lane = lane_mine(h);
	pthread_mutex_lock(&lane->lock);
	uint64_t used = lane_records_used(lane);
	pthread_mutex_unlock(&lane->lock);
	uint64_t cap = h->hdr->lane_records;
	return used >= cap ? 0 : cap - used;
}

int tips_heap_rollback(struct tips_heap *h)
{
	if (!h)
		return tips_set_error(TIPS_EINVAL, "tips_heap_rollback: no heap");
	lanes_lock_all(h);
	int rc = checkpoint_locked(h, 0, true);
	lanes_unlock_all(h);
	return rc;
}

