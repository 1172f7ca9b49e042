/*
 * heap_alloc.c - the heap's hot path: locating a block from an address, the free-chunk
 * map, runs and their class lists, the lane records, tips_heap_alloc_to/_logged and
 * tips_heap_free_from/_logged (see heap_private.h for the whole design).
 *
 * Invariant kept: a record in the caller's lane log describes every change before it
 * can matter after a crash. An allocation's record is flushed and fenced before the
 * caller's slot is set; a free into a slot fences its record before clearing the slot;
 * a logged free (MLog) only flushes its record, and the free takes effect at a
 * checkpoint, which fences first. The metadata itself (chunk table, bitmaps, block
 * headers) is written unflushed: the checkpoint flushes it in bulk. A run's bitmap and
 * free count change only under its owning lane's mutex; class lists and the free-chunk
 * map under their own mutexes; room is adjusted (room_add) at every change.
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

/* ---- locating blocks ------------------------------------------------------------ */

/*
 * Resolves @addr to the block containing it. With @exact, @addr must be a block header
 * address. Returns false if @addr is not inside an allocated-looking block.
 */
bool block_find(const struct tips_heap *h, const void *addr, bool exact,
		       struct block_ref *ref)
{
	/* Any address may come here (a pointer read from a damaged pool): compare as
	 * integers, and trust no table entry beyond the heap's end. */
	uintptr_t ua = (uintptr_t)addr;
	if (ua < (uintptr_t)h->chunks || ua >= (uintptr_t)chunk_addr(h, h->nchunks))
		return false;
	const char *a = addr;
	uint64_t idx = chunk_index(h, a);
	uint64_t e = word_get(&h->table[idx]);
	switch (CHUNK_KIND(e)) {
	case CHUNK_CONT:
		if (exact || CHUNK_ARG(e) > idx)
			return false;
		idx -= CHUNK_ARG(e);
		e = word_get(&h->table[idx]);
		if (CHUNK_KIND(e) != CHUNK_EXTENT)
			return false;
		/* fall through */
	case CHUNK_EXTENT:
		if ((exact && a != chunk_addr(h, idx)) || CHUNK_ARG(e) == 0 ||
		    CHUNK_ARG(e) > h->nchunks - idx)
			return false;
		ref->chunk = idx;
		ref->extent = true;
		ref->bit = 0;
		ref->hdr = (struct block_header *)chunk_addr(h, idx);
		ref->usable = CHUNK_ARG(e) * HEAP_CHUNK_SIZE - BLOCK_HEADER_SIZE;
		return true;
	case CHUNK_RUN: {
		uint64_t cls = CHUNK_ARG(e);
		if (cls >= (uint64_t)NCLASSES)
			return false;
		const char *first = chunk_addr(h, idx) + RUN_BITMAP_BYTES;
		if (a < first)
			return false;
		uint64_t bit = (uint64_t)(a - first) / class_slot[cls];
		if (bit >= run_capacity((int)cls))
			return false;
		const char *blk = first + bit * class_slot[cls];
		if (exact && blk != a)
			return false;
		ref->chunk = idx;
		ref->extent = false;
		ref->bit = (uint32_t)bit;
		ref->hdr = (struct block_header *)blk;
		ref->usable = class_slot[cls] - BLOCK_HEADER_SIZE;
		return true;
	}
	default:
		return false;
	}
}

/* ---- free chunks ---------------------------------------------------------------- */

void chunk_mark_free(struct tips_heap *h, uint64_t idx, uint64_t n, bool free)
{
	room_add(h, (free ? 1 : -1) * (int64_t)(n * HEAP_CHUNK_SIZE));
	atomic_fetch_add_explicit(&h->chunk_room, (free ? 1 : -1) * (int64_t)(n * HEAP_CHUNK_SIZE),
				  memory_order_relaxed);
	for (uint64_t i = idx; i < idx + n; i++) {
		if (free)
			h->chunk_free[i / 64] |= 1ull << (i % 64);
		else
			h->chunk_free[i / 64] &= ~(1ull << (i % 64));
	}
}

/* First fit of @n contiguous free chunks; returns the index or UINT64_MAX. Locked. */
static uint64_t chunks_take(struct tips_heap *h, uint64_t n)
{
	for (int pass = 0; pass < 2; pass++) {
		uint64_t start = pass == 0 ? h->chunk_hint : 0;
		uint64_t run = 0;
		for (uint64_t i = start; i < h->nchunks; i++) {
			if (run == 0 && (i % 64) == 0 && h->chunk_free[i / 64] == 0) {
				i += 63;
				continue;
			}
			run = chunk_is_free(h, i) ? run + 1 : 0;
			if (run == n) {
				uint64_t first = i + 1 - n;
				chunk_mark_free(h, first, n, false);
				h->chunk_hint = i + 1;
				return first;
			}
		}
	}
	return UINT64_MAX;
}

/* Returns a chunk that holds no allocated block to FREE, persistently. Chunk lock held. */
void chunk_release_locked(struct tips_heap *h, uint64_t idx, uint64_t n)
{
	for (uint64_t i = idx; i < idx + n; i++)
		word_put(&h->table[i], CHUNK_ENTRY(CHUNK_FREE, 0));
	pm_persist(&h->table[idx], n * sizeof(uint64_t));
	chunk_mark_free(h, idx, n, true);
	if (idx < h->chunk_hint)
		h->chunk_hint = idx;
}

/* ---- runs ----------------------------------------------------------------------- */

void class_list_push(struct tips_heap *h, int cls, uint64_t run)
{
	struct run_state *r = &h->runs[run];
	r->prev = -1;
	r->next = h->classes[cls].head;
	if (r->next >= 0)
		h->runs[r->next].prev = (int32_t)run;
	h->classes[cls].head = (int32_t)run;
	r->listed = true;
}

void class_list_remove(struct tips_heap *h, int cls, uint64_t run)
{
	struct run_state *r = &h->runs[run];
	if (r->prev >= 0)
		h->runs[r->prev].next = r->next;
	else
		h->classes[cls].head = r->next;
	if (r->next >= 0)
		h->runs[r->next].prev = r->prev;
	r->prev = r->next = -1;
	r->listed = false;
}

int run_state_init(struct tips_heap *h, uint64_t idx, int cls)
{
	struct run_state *r = &h->runs[idx];
	if (!r->pending_free) {
		r->pending_free = calloc(RUN_BITMAP_BYTES / 8, sizeof(uint64_t));
		if (!r->pending_free)
			return tips_set_error(TIPS_ENOMEM, "out of DRAM for run state");
	}
	r->owner = -1;
	r->prev = r->next = -1;
	r->listed = false;
	uint32_t cap = run_capacity(cls), used = 0;
	const uint64_t *bm = run_bitmap(h, idx);
	for (uint32_t w = 0; w < (cap + 63) / 64; w++)
		used += (uint32_t)__builtin_popcountll(word_get(&bm[w]));
	r->nfree = cap - used;
	room_add(h, (int64_t)r->nfree * class_slot[cls]);
	return 0;
}

/* Gives lane @lane_idx a run of class @cls with a free block. Lane lock held. */
static int run_acquire(struct tips_heap *h, int cls, int lane_idx, uint64_t *out)
{
	struct class_list *cl = &h->classes[cls];
	pthread_mutex_lock(&cl->lock);
	int32_t head = cl->head;
	if (head >= 0) {
		class_list_remove(h, cls, (uint64_t)head);
		h->runs[head].owner = lane_idx;
		pthread_mutex_unlock(&cl->lock);
		*out = (uint64_t)head;
		return 0;
	}
	pthread_mutex_unlock(&cl->lock);

	pthread_mutex_lock(&h->chunk_lock);
	uint64_t idx = chunks_take(h, 1);
	pthread_mutex_unlock(&h->chunk_lock);
	if (idx == UINT64_MAX)
		return tips_set_error(TIPS_ENOMEM, "heap full: no free chunk for a run of %u-byte "
				      "blocks", class_slot[cls]);
	/* Format: the empty bitmap must be persistent before the table entry can say RUN
	 * (an evicted entry over a stale bitmap would read as garbage blocks). */
	memset(run_bitmap(h, idx), 0, RUN_BITMAP_BYTES);
	pm_persist(run_bitmap(h, idx), RUN_BITMAP_BYTES);
	word_put(&h->table[idx], CHUNK_ENTRY(CHUNK_RUN, cls));
	pm_persist(&h->table[idx], sizeof(uint64_t));
	int rc = run_state_init(h, idx, cls);
	if (rc) {
		pthread_mutex_lock(&h->chunk_lock);
		chunk_release_locked(h, idx, 1);
		pthread_mutex_unlock(&h->chunk_lock);
		return rc;
	}
	h->runs[idx].owner = lane_idx;
	*out = idx;
	return 0;
}

/* The lane stops allocating from @run (full). Lane lock held. */
static void run_release(struct tips_heap *h, int cls, uint64_t run)
{
	struct class_list *cl = &h->classes[cls];
	pthread_mutex_lock(&cl->lock);
	h->runs[run].owner = -1;
	if (h->runs[run].nfree > 0 && !h->runs[run].listed)
		class_list_push(h, cls, run);
	pthread_mutex_unlock(&cl->lock);
}

/* Finds and sets a zero bit in the lane's run; returns the bit. nfree > 0. */
static uint32_t run_take_bit(struct tips_heap *h, struct lane *lane, int cls, uint64_t run)
{
	uint64_t *bm = run_bitmap(h, run);
	uint32_t cap = run_capacity(cls), words = (cap + 63) / 64;
	uint32_t w = lane->cursor[cls] < words ? lane->cursor[cls] : 0;
	for (uint32_t n = 0; n <= words; n++, w = (w + 1) % words) {
		uint64_t v = word_get(&bm[w]);
		if (w == words - 1 && cap % 64)
			v |= ~0ull << (cap % 64); /* bits past the capacity count as used */
		if (v != ~0ull) {
			uint32_t bit = (uint32_t)__builtin_ctzll(~v);
			lane->cursor[cls] = w;
			return w * 64 + bit;
		}
	}
	tips_invariant_failed(__FILE__, __LINE__, "run has free count > 0 but a full bitmap");
}

/* ---- records -------------------------------------------------------------------- */

/* The tag of a record: its generation, a check of its fields, its type (written last). */
static inline uint64_t record_tag(uint64_t gen, uint64_t block, uint64_t slot, uint64_t size,
				  enum heap_record_type type)
{
	return REC_TAG(gen, rec_check(gen, block, slot, size, type), type);
}

/* Appends a record to @lane's log, stored and flushed, and fenced if @fence (a logged
 * free waits for the checkpoint's fence). */
static void record_write(struct tips_heap *h, struct lane *lane, uint64_t block, uint64_t slot,
			 uint64_t size, enum heap_record_type type, bool fence)
{
	struct heap_record *r = &lane->log[lane->nrec++];
	r->block = block;
	r->slot = slot;
	r->size = size;
	__atomic_store_n(&r->tag, record_tag(generation(h), block, slot, size, type),
			 __ATOMIC_RELEASE);
	pm_flush(r, sizeof(*r));
	if (fence)
		pm_drain();
}

/*
 * Locks the caller's lane with room for one record. When the lane log is full it
 * checkpoints, unless MLog records are pending: only their owner may decide on those.
 */
static int lane_lock_with_room(struct tips_heap *h, struct lane **out)
{
	struct lane *lane = lane_mine(h);
	uint64_t cap = h->hdr->lane_records;
	pthread_mutex_lock(&lane->lock);
	while (lane_records_used(lane) >= cap) {
		pthread_mutex_unlock(&lane->lock);
		lanes_lock_all(h); /* decide with every lane still: no MLog record can appear */
		int rc = 0;
		if (lane_records_used(lane) >= cap) {
			if (logged_pending(h) > 0 || h->undecided)
				rc = tips_set_error(TIPS_ELOGFULL, "allocation log lane full while MLog "
						    "records are pending: checkpoint or roll back first");
			else
				rc = checkpoint_locked(h, 0, false);
		}
		lanes_unlock_all(h);
		if (rc)
			return rc;
		pthread_mutex_lock(&lane->lock);
	}
	*out = lane;
	return 0;
}

/* ---- allocation ----------------------------------------------------------------- */

/* Reserves a block (volatile only) for @size bytes; sets *block. Lane lock held. */
static int block_reserve(struct tips_heap *h, struct lane *lane, size_t size, char **block,
			 struct block_ref *ref)
{
	uint64_t need = (uint64_t)size + BLOCK_HEADER_SIZE;
	if (need <= class_slot[NCLASSES - 1]) {
		int cls = class_of(need);
		int lane_idx = (int)(lane - h->lanes);
		int32_t run = lane->active[cls];
		if (run >= 0 && h->runs[run].nfree == 0) {
			run_release(h, cls, (uint64_t)run);
			lane->active[cls] = run = -1;
		}
		if (run < 0) {
			uint64_t idx = 0;
			int rc = run_acquire(h, cls, lane_idx, &idx);
			if (rc)
				return rc;
			lane->active[cls] = run = (int32_t)idx;
			lane->cursor[cls] = 0;
		}
		uint32_t bit = run_take_bit(h, lane, cls, (uint64_t)run);
		*block = chunk_addr(h, (uint64_t)run) + RUN_BITMAP_BYTES + (uint64_t)bit * class_slot[cls];
		ref->chunk = (uint64_t)run;
		ref->extent = false;
		ref->bit = bit;
		ref->usable = class_slot[cls] - BLOCK_HEADER_SIZE;
	} else {
		uint64_t n = extent_chunks(size); /* <= nchunks: alloc_common checked the size */
		pthread_mutex_lock(&h->chunk_lock);
		uint64_t idx = chunks_take(h, n);
		pthread_mutex_unlock(&h->chunk_lock);
		if (idx == UINT64_MAX)
			return tips_set_error(TIPS_ENOMEM, "heap full: no %llu contiguous free "
					      "chunks for %zu bytes", (unsigned long long)n, size);
		if (!h->runs[idx].pending_free &&
		    !(h->runs[idx].pending_free = calloc(RUN_BITMAP_BYTES / 8, sizeof(uint64_t)))) {
			pthread_mutex_lock(&h->chunk_lock);
			chunk_mark_free(h, idx, n, true);
			pthread_mutex_unlock(&h->chunk_lock);
			return tips_set_error(TIPS_ENOMEM, "out of DRAM for extent state");
		}
		*block = chunk_addr(h, idx);
		ref->chunk = idx;
		ref->extent = true;
		ref->bit = 0;
		ref->usable = n * HEAP_CHUNK_SIZE - BLOCK_HEADER_SIZE;
	}
	ref->hdr = (struct block_header *)*block;
	return 0;
}

/* Sets a block's allocated state in the metadata: bitmap bit or table entries. */
void block_set_bits(struct tips_heap *h, const struct block_ref *ref, size_t size)
{
	if (ref->extent) {
		uint64_t n = extent_chunks(size);
		word_put(&h->table[ref->chunk], CHUNK_ENTRY(CHUNK_EXTENT, n));
		for (uint64_t i = 1; i < n; i++)
			word_put(&h->table[ref->chunk + i], CHUNK_ENTRY(CHUNK_CONT, i));
	} else {
		uint64_t *w = &run_bitmap(h, ref->chunk)[ref->bit / 64];
		word_put(w, word_get(w) | (1ull << (ref->bit % 64)));
	}
}

/* Marks a reserved block allocated: metadata and header. */
void block_mark_allocated(struct tips_heap *h, const struct block_ref *ref, size_t size,
				 uint64_t gen)
{
	block_set_bits(h, ref, size);
	ref->hdr->alloc_gen = gen;
	ref->hdr->size = size;
}

/* ---- reserves ------------------------------------------------------------------ */

/*
 * A logged allocation's record is one 32-byte store to the lane log, written back and
 * fenced before the block is marked. On the AMD machine that write-back, not the fence,
 * was about a third of what a replay worker spent on an insert into tips-hash (about
 * 180 of 570 ns; streaming the record instead of `clwb` saved little), apparently
 * because a record shares its line with the next one and a line written back costs
 * the next store to it a trip to memory. A reserve writes the records of up to
 * HEAP_RESERVE_MAX blocks of one size together (whole lines, one fence) and hands the
 * blocks out one per allocation (docs/framework.md, "Seventeenth round"). Every block
 * still has a durable ALLOC_LOGGED record of the generation before its bitmap bit or
 * header is stored, so recovery treats a reserved block as any logged allocation: a
 * rollback frees it.
 */

/* Don't reserve below this much room: near a full heap, allocate what is asked. */
#define RESERVE_MIN_ROOM (8ull << 20)
/* Lane records left free beyond a reserve's own (its records and their releases). */
#define RESERVE_LANE_SLACK 256u

void heap_set_logged_reserve(struct tips_heap *h, unsigned n)
{
	h->logged_reserve = n > HEAP_RESERVE_MAX ? HEAP_RESERVE_MAX : n;
}

/*
 * Claims up to @want - 1 more free slots of the run @first lies in, after it (the bits
 * are not stored yet: that waits for the records' fence, so they are claimed against a
 * copy of each bitmap word). Fills @item[1..]; returns how many it claimed. Lane lock
 * held: only its owner lane takes slots of a run.
 */
static unsigned reserve_more_slots(struct tips_heap *h, const struct block_ref *first,
				   struct block_ref *item, unsigned want)
{
	uint64_t run = first->chunk;
	int cls = (int)CHUNK_ARG(word_get(&h->table[run]));
	uint32_t cap = run_capacity(cls), words = (cap + 63) / 64;
	uint32_t left = h->runs[run].nfree - 1; /* free slots besides @first */
	uint64_t *bm = run_bitmap(h, run);
	unsigned got = 1;
	for (uint32_t w = first->bit / 64; w < words && got < want && left > 0; w++) {
		uint64_t v = word_get(&bm[w]);
		if (w == first->bit / 64)
			v |= (2ull << (first->bit % 64)) - 1; /* @first and every slot before it */
		if (w == words - 1 && cap % 64)
			v |= ~0ull << (cap % 64);
		while (v != ~0ull && got < want && left > 0) {
			uint32_t bit = (uint32_t)__builtin_ctzll(~v);
			v |= 1ull << bit;
			struct block_ref *ref = &item[got++];
			*ref = *first;
			ref->bit = w * 64 + bit;
			ref->hdr = (struct block_header *)(chunk_addr(h, run) + RUN_BITMAP_BYTES +
							   (uint64_t)ref->bit * class_slot[cls]);
			left--;
		}
	}
	return got;
}

/* Fills the empty reserve @rs of @lane with blocks of @size: all ALLOC_LOGGED records
 * written and fenced, then every block marked. Lane lock held. False to allocate one
 * by one. */
static bool reserve_fill(struct tips_heap *h, struct lane *lane, struct lane_reserve *rs,
			 size_t size)
{
	unsigned want = h->logged_reserve;
	if (size + BLOCK_HEADER_SIZE > class_slot[NCLASSES - 1] ||
	    lane->nrec + 2ull * want + RESERVE_LANE_SLACK > h->hdr->lane_records ||
	    heap_room(h) < RESERVE_MIN_ROOM)
		return false;
	char *block;
	if (block_reserve(h, lane, size, &block, &rs->item[0]))
		return false; /* the one-by-one path makes room or says why not */
	unsigned n = reserve_more_slots(h, &rs->item[0], rs->item, want);
	uint64_t gen = generation(h);
	struct heap_record rec[HEAP_RESERVE_MAX];
	for (unsigned i = 0; i < n; i++) {
		uint64_t b = (uint64_t)rs->item[i].hdr;
		rec[i] = (struct heap_record){ .block = b, .slot = 0, .size = size,
					       .tag = record_tag(gen, b, 0, size, REC_ALLOC_LOGGED) };
	}
	pm_copy_flush(&lane->log[lane->nrec], rec, n * sizeof(rec[0]));
	pm_drain();
	lane->nrec += n;
	for (unsigned i = 0; i < n; i++) {
		block_mark_allocated(h, &rs->item[i], size, gen);
		room_add(h, -(int64_t)(rs->item[i].usable + BLOCK_HEADER_SIZE));
	}
	h->runs[rs->item[0].chunk].nfree -= n;
	__atomic_store_n(&lane->logged, lane->logged + n, __ATOMIC_RELAXED);
	rs->size = size;
	rs->n = n;
	rs->next = 0;
	return true;
}

/* Hands out the next block of reserve @rs if it is of @size. Lane lock held. */
static bool reserve_take(struct lane *lane, struct lane_reserve *rs, size_t size, void **out)
{
	if (rs->next >= rs->n || rs->size != size)
		return false;
	const struct block_ref *ref = &rs->item[rs->next++];
	lane->allocs++;
	lane->bytes_delta += (int64_t)ref->usable;
	*out = (char *)ref->hdr + BLOCK_HEADER_SIZE;
	return true;
}

static void release_one(struct tips_heap *h, struct lane *lane, struct lane_reserve *rs,
			bool rollback)
{
	for (; rs->next < rs->n; rs->next++) {
		const struct block_ref *ref = &rs->item[rs->next];
		/* Whatever frees it subtracts its size, and a block never handed out was
		 * never added. */
		lane->bytes_delta += (int64_t)ref->usable;
		if (rollback)
			continue;
		bool marked = block_mark_pending(h, ref);
		TIPS_INVARIANT(marked, "a reserved block was already pending free");
		record_write(h, lane, (uint64_t)ref->hdr, 0, rs->size, REC_FREE_LOGGED, false);
		__atomic_store_n(&lane->logged, lane->logged + 1, __ATOMIC_RELAXED);
	}
	rs->n = rs->next = 0;
}

void reserve_release(struct tips_heap *h, struct lane *lane, bool rollback)
{
	for (unsigned i = 0; i < HEAP_LANE_RESERVES; i++)
		release_one(h, lane, &lane->reserve[i], rollback);
}

/* A logged allocation from a reserve of the calling lane that holds @size, else from
 * an empty one filled for @size; false if neither (reserves off, both hold other sizes,
 * no room). The block's record was made durable when the reserve was filled, so a
 * block handed out needs no fence: none is taken, and the stores the caller made
 * before (its index's last operation) drain while it goes on. *@fenced: whether this
 * call filled a reserve, whose fence came after everything the caller had flushed. */
static bool alloc_reserved(struct tips_heap *h, size_t size, void **out, bool *fenced)
{
	struct lane *lane = lane_mine(h);
	pthread_mutex_lock(&lane->lock);
	struct lane_reserve *empty = NULL;
	bool got = false;
	for (unsigned i = 0; i < HEAP_LANE_RESERVES && !got; i++) {
		struct lane_reserve *rs = &lane->reserve[i];
		got = reserve_take(lane, rs, size, out);
		if (!empty && rs->next >= rs->n)
			empty = rs;
	}
	if (!got && empty && reserve_fill(h, lane, empty, size)) {
		got = reserve_take(lane, empty, size, out);
		if (fenced)
			*fenced = true;
	}
	pthread_mutex_unlock(&lane->lock);
	return got;
}

/*
 * Lanes keep their run of each class even when it empties; when the heap runs out of
 * room, every empty run a lane holds goes back to the free chunks, and every partly
 * free one to its class list, so that no free block is out of reach of another lane.
 * Every lane locked. Returns the number of runs released.
 */
static unsigned release_idle_runs_locked(struct tips_heap *h)
{
	unsigned released = 0;
	for (unsigned l = 0; l < h->nlanes; l++)
		for (int c = 0; c < NCLASSES; c++) {
			int32_t run = h->lanes[l].active[c];
			if (run < 0 || h->runs[run].nfree == 0)
				continue;
			h->lanes[l].active[c] = -1;
			pthread_mutex_lock(&h->classes[c].lock);
			h->runs[run].owner = -1;
			if (h->runs[run].nfree == run_capacity(c)) {
				if (h->runs[run].listed)
					class_list_remove(h, c, (uint64_t)run);
				room_add(h, -(int64_t)run_capacity(c) * class_slot[c]);
				pthread_mutex_lock(&h->chunk_lock);
				chunk_release_locked(h, (uint64_t)run, 1);
				pthread_mutex_unlock(&h->chunk_lock);
			} else if (!h->runs[run].listed) {
				/* Partly free: any lane may take it from the class list now. */
				class_list_push(h, c, (uint64_t)run);
			}
			pthread_mutex_unlock(&h->classes[c].lock);
			released++;
		}
	return released;
}

/*
 * Makes room when the heap is full: applies pending frees with a checkpoint (unless an
 * MLog record stands in the way: only its owner may checkpoint those), then gives back
 * the empty runs lanes hold. True if anything may have been freed, by this call or by a
 * checkpoint another thread took since the caller saw generation @gen_seen.
 */
static bool make_room(struct tips_heap *h, uint64_t gen_seen)
{
	lanes_lock_all(h);
	bool someone_checkpointed = generation(h) != gen_seen;
	bool records = false; /* frees, if any, are among them */
	for (unsigned l = 0; l < h->nlanes && !records; l++)
		records = h->lanes[l].nrec > 0;
	bool checkpointed = records && logged_pending(h) == 0 && !h->undecided;
	if (checkpointed)
		checkpoint_locked(h, 0, false);
	bool released = release_idle_runs_locked(h) > 0;
	lanes_unlock_all(h);
	return someone_checkpointed || checkpointed || released;
}

static int alloc_common(struct tips_heap *h, size_t size, uint64_t *slot, void **out,
			bool *fenced)
{
	if (!h || size == 0)
		return tips_set_error(TIPS_EINVAL, "allocation of 0 bytes");
	if (size > h->nchunks * HEAP_CHUNK_SIZE)
		return tips_set_error(TIPS_ETOOBIG, "allocation of %zu bytes exceeds the heap",
				      size);
	if (fenced)
		*fenced = false;
	if (!slot && h->logged_reserve && alloc_reserved(h, size, out, fenced))
		return 0;
	struct lane *lane;
	char *block = NULL;
	struct block_ref ref = { 0 };
	/* Retry while making room frees something; bounded, as other threads may take the
	 * room first each time. */
	for (int attempt = 0;; attempt++) {
		int rc = lane_lock_with_room(h, &lane);
		if (rc)
			return rc;
		uint64_t gen_seen = generation(h);
		rc = block_reserve(h, lane, size, &block, &ref);
		if (rc == 0)
			break;
		pthread_mutex_unlock(&lane->lock);
		if (rc != TIPS_ENOMEM || attempt >= MAKE_ROOM_ATTEMPTS || !make_room(h, gen_seen))
			return rc;
	}
	/* The record is persistent (one fence, one line) before any metadata, header or
	 * slot store it describes; those are flushed by the checkpoint, or redone by replay. */
	record_write(h, lane, (uint64_t)block, (uint64_t)slot, size,
		     slot ? REC_ALLOC_SLOT : REC_ALLOC_LOGGED, true);
	block_mark_allocated(h, &ref, size, generation(h));
	if (!ref.extent) {
		h->runs[ref.chunk].nfree--;
		room_add(h, -(int64_t)(ref.usable + BLOCK_HEADER_SIZE));
	}
	void *user = block + BLOCK_HEADER_SIZE;
	if (fenced)
		*fenced = true;
	if (slot)
		__atomic_store_n(slot, (uint64_t)user, __ATOMIC_RELEASE);
	else
		__atomic_store_n(&lane->logged, lane->logged + 1, __ATOMIC_RELAXED);
	lane->allocs++;
	lane->bytes_delta += (int64_t)ref.usable;
	pthread_mutex_unlock(&lane->lock);
	if (out)
		*out = user;
	return 0;
}

int tips_heap_alloc_to(struct tips_heap *h, size_t size, uint64_t *slot)
{
	if (!h || !slot_in_pool(h, slot))
		return tips_set_error(TIPS_EINVAL, "tips_heap_alloc_to: slot %p is not an aligned "
				      "word of the pool outside the heap's metadata", (void *)slot);
	if (__atomic_load_n(slot, __ATOMIC_ACQUIRE) != 0)
		return tips_set_error(TIPS_EINVAL, "tips_heap_alloc_to: slot %p already holds "
				      "%#llx; free it first", (void *)slot,
				      (unsigned long long)*slot);
	return alloc_common(h, size, slot, NULL, NULL);
}

int tips_heap_alloc_logged(struct tips_heap *h, size_t size, void **out)
{
	return heap_alloc_logged_fenced(h, size, out, NULL);
}

int heap_alloc_logged_fenced(struct tips_heap *h, size_t size, void **out, bool *fenced)
{
	if (!out)
		return tips_set_error(TIPS_EINVAL, "tips_heap_alloc_logged: no out pointer");
	return alloc_common(h, size, NULL, out, fenced);
}

/* ---- free ----------------------------------------------------------------------- */

/* Marks @ref pending-free for this generation; false if it already was (double free). */
bool block_mark_pending(struct tips_heap *h, const struct block_ref *ref)
{
	_Atomic uint64_t *w = &h->runs[ref->chunk].pending_free[ref->bit / 64];
	uint64_t bit = 1ull << (ref->bit % 64);
	return !(atomic_fetch_or(w, bit) & bit);
}

static int free_common(struct tips_heap *h, void *ptr, uint64_t *slot)
{
	if (!h || !ptr)
		return tips_set_error(TIPS_EINVAL, "free of a NULL pointer");
	char *block = (char *)ptr - BLOCK_HEADER_SIZE;
	struct lane *lane;
	int rc = lane_lock_with_room(h, &lane);
	if (rc)
		return rc;
	/* While a lane is held no checkpoint or rollback runs, so the block keeps the state
	 * checked here until its record is written. */
	struct block_ref ref;
	if (!block_find(h, block, true, &ref) || !block_is_allocated(h, &ref)) {
		pthread_mutex_unlock(&lane->lock);
		return tips_set_error(TIPS_EINVAL, "free of %p: not an allocated block", ptr);
	}
	if (!block_mark_pending(h, &ref)) {
		pthread_mutex_unlock(&lane->lock);
		return tips_set_error(TIPS_EINVAL, "double free of %p", ptr);
	}
	uint64_t size = ref.hdr->size;
	if (slot) {
		/* Record durable first, then the slot may change (recovery re-applies it). */
		record_write(h, lane, (uint64_t)block, (uint64_t)slot, size, REC_FREE_SLOT, true);
		__atomic_store_n(slot, 0, __ATOMIC_RELEASE);
	} else {
		record_write(h, lane, (uint64_t)block, 0, size, REC_FREE_LOGGED, false);
		__atomic_store_n(&lane->logged, lane->logged + 1, __ATOMIC_RELAXED);
	}
	lane->frees++;
	lane->freed++;
	pthread_mutex_unlock(&lane->lock);
	return 0;
}

int tips_heap_free_from(struct tips_heap *h, uint64_t *slot)
{
	if (!h || !slot_in_pool(h, slot))
		return tips_set_error(TIPS_EINVAL, "tips_heap_free_from: slot %p is not an aligned "
				      "word of the pool outside the heap's metadata", (void *)slot);
	if (!*slot)
		return tips_set_error(TIPS_EINVAL, "tips_heap_free_from: empty slot");
	return free_common(h, (void *)*slot, slot);
}

int tips_heap_free_logged(struct tips_heap *h, void *ptr)
{
	return free_common(h, ptr, NULL);
}

