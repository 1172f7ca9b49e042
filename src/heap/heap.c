/*
 * heap.c - the crash-safe persistent allocator (tips/heap.h; layout in heap_layout.h).
 *
 * Idea. Persistent truth is the chunk table, the run bitmaps, the block headers and the
 * callers' slots; all of them may lag behind (be written but not flushed) as long as
 * the lane logs hold a persistent record of every change since the last checkpoint.
 * So an allocation costs one fence (its record), a logged free none, and the metadata
 * is flushed in bulk by tips_heap_checkpoint(), which then retires every record at
 * once by advancing the generation. After a crash, heap_open() replays the valid
 * records (roll forward); MLog (LOGGED) records are kept for the owner to decide on
 * with tips_heap_checkpoint() or tips_heap_rollback(). This is the MLog of UNO logging
 * (TIPS, ATC'21, §4.3.1) made general: slots named by the caller are the other users.
 *
 * Concurrency. A thread works through lane (thread slot % nlanes), under the lane
 * mutex. A run is owned by at most one lane at a time, so its bitmap and free count are
 * changed only under that lane's mutex, or by a checkpoint, which holds every lane
 * mutex (after a first-come first-served gate, so that no taker of every lane starves).
 * Class lists (runs with free blocks and no owner) have a mutex per class; the
 * free-chunk map has one mutex. Lock order: gate, lanes (ascending), class, chunks.
 */
#define _GNU_SOURCE
#include "heap/heap_internal.h"
#include "heap/heap_layout.h"
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

/* ---- size classes --------------------------------------------------------------- */

/* Slot sizes including the 16-byte block header: by 16 up to 128, then 4 per doubling. */
static const uint32_t class_slot[] = {
	32,    48,    64,    80,    96,    112,   128,   160,   192,   224,   256,
	320,   384,   448,   512,   640,   768,   896,   1024,  1280,  1536,  1792,
	2048,  2560,  3072,  3584,  4096,  5120,  6144,  7168,  8192,  10240, 12288,
	14336, 16384, 20480, 24576, 28672, 32768, 40960, 49152, 57344, 65536,
};
#define NCLASSES ((int)(sizeof(class_slot) / sizeof(class_slot[0])))
_Static_assert(sizeof(struct heap_record) == HEAP_RECORD_BYTES, "heap_internal.h says 32");
_Static_assert(HEAP_CHUNK_SIZE == HEAP_CHUNK_BYTES, "heap_internal.h names the chunk size");
_Static_assert(sizeof(struct heap_header) <= HEAP_GROW_PLAN_BYTES, "heap_grow_plan reads it all");

/* How many times an allocation that found the heap full retries after making room. */
#define MAKE_ROOM_ATTEMPTS 4

/* Smallest class whose slot holds @need bytes (header included); need <= 65536. */
static int class_of(uint64_t need)
{
	if (need <= 128)
		return need <= 32 ? 0 : (int)((need - 1) / 16) - 1;
	int p = 63 - __builtin_clzll(need - 1); /* 2^p < need <= 2^(p+1) */
	uint64_t quarter = (1ull << p) / 4;
	int step = (int)((need - (1ull << p) + quarter - 1) / quarter) - 1;
	return 7 + (p - 7) * 4 + step;
}

static uint32_t run_capacity(int cls)
{
	return (HEAP_CHUNK_SIZE - RUN_BITMAP_BYTES) / class_slot[cls];
}

/* ---- volatile state ------------------------------------------------------------- */

struct run_state {
	int32_t owner;          /* lane that allocates from it, -1 if none */
	int32_t prev, next;     /* links in its class list, -1 at the ends */
	uint32_t nfree;         /* zero bits in the bitmap (freed-pending blocks count as used) */
	bool listed;            /* in the class list */
	_Atomic uint64_t *pending_free; /* bit set: a FREE record of this generation exists */
} __attribute__((aligned(64))); /* lanes allocate from neighbouring runs: no false sharing */

struct lane {
	pthread_mutex_t lock;
	struct heap_record *log; /* in PM */
	uint32_t nrec;           /* records written this generation (next index) */
	int32_t active[NCLASSES]; /* run (chunk index) owned per class, -1 if none */
	uint32_t cursor[NCLASSES]; /* bitmap word to search from */
	uint32_t logged;         /* MLog records written this generation */
	/* Statistics, kept per lane so that no shared line is written per call. */
	uint64_t allocs, frees;
	int64_t bytes_delta;     /* usable bytes allocated minus freed since open */
} __attribute__((aligned(64)));

/*
 * A first-come first-served gate for whoever takes every lane (checkpoints, a full
 * lane, a full heap, statistics). Mutexes let a running thread take them back before a
 * woken waiter runs, so without it a thread that checkpoints in a loop starves a thread
 * waiting for every lane.
 */
struct ticket_gate {
	pthread_mutex_t lock;
	pthread_cond_t turn;
	uint64_t next, serving;
};

static void gate_enter(struct ticket_gate *g)
{
	pthread_mutex_lock(&g->lock);
	uint64_t mine = g->next++;
	while (mine != g->serving)
		pthread_cond_wait(&g->turn, &g->lock);
	pthread_mutex_unlock(&g->lock);
}

static void gate_leave(struct ticket_gate *g)
{
	pthread_mutex_lock(&g->lock);
	g->serving++;
	pthread_cond_broadcast(&g->turn);
	pthread_mutex_unlock(&g->lock);
}

struct class_list {
	pthread_mutex_t lock;
	int32_t head;
} __attribute__((aligned(64)));

struct tips_heap {
	char *base;
	uintptr_t slots_start, slots_end; /* where callers' slots may lie (the pool's areas) */
	struct heap_header *hdr;
	uint64_t *table;
	char *chunks;
	uint64_t nchunks;
	unsigned nlanes;                 /* from the header, <= HEAP_MAX_LANES */
	struct lane lanes[HEAP_MAX_LANES];
	struct class_list classes[NCLASSES];
	struct run_state *runs; /* one per chunk */

	struct ticket_gate all_lanes;    /* taken before taking every lane */
	pthread_mutex_t chunk_lock;
	uint64_t *chunk_free; /* bitmap: 1 = free chunk */
	uint64_t chunk_hint;

	bool undecided;                  /* LOGGED records found by recovery, not decided */
	const struct heap_record **freeing; /* checkpoint scratch: records that free blocks */

	_Atomic uint64_t n_checkpoints, n_rollbacks, n_recovered;
	uint64_t bytes_at_open;          /* usable bytes allocated when the heap was opened */
	/* Bytes an allocation could still take: free chunks, plus the free slots of every
	 * run (deferred frees count as taken until the checkpoint applies them). Kept
	 * exact by room_add() at every change; read without locks (heap_room()). */
	_Atomic int64_t room;
	_Atomic int64_t chunk_room;      /* the part of it in free chunks (any class) */
};

static inline void room_add(struct tips_heap *h, int64_t delta)
{
	atomic_fetch_add_explicit(&h->room, delta, memory_order_relaxed);
}

/*
 * Chunk-table entries and bitmap words are read without a lock (a free looks up its
 * block while other lanes allocate in the same run or chunk table line), so every such
 * access is a relaxed atomic. Writers of one word already exclude each other (lane lock,
 * or all lanes in a checkpoint), so a load and a store suffice: no locked instruction.
 */
static inline uint64_t word_get(const uint64_t *w) { return __atomic_load_n(w, __ATOMIC_RELAXED); }
static inline void word_put(uint64_t *w, uint64_t v) { __atomic_store_n(w, v, __ATOMIC_RELAXED); }

static inline char *chunk_addr(const struct tips_heap *h, uint64_t idx)
{
	return h->chunks + idx * HEAP_CHUNK_SIZE;
}

static inline uint64_t chunk_index(const struct tips_heap *h, const void *addr)
{
	return (uint64_t)((const char *)addr - h->chunks) / HEAP_CHUNK_SIZE;
}

/* Slots are aligned words of the pool's areas, anywhere but in the heap's own metadata
 * (its header, logs, chunk table and run bitmaps). */
static bool slot_in_pool(const struct tips_heap *h, const uint64_t *slot)
{
	uintptr_t a = (uintptr_t)slot;
	if (a % 8 != 0 || a < h->slots_start || a + 8 > h->slots_end)
		return false;
	if (a >= (uintptr_t)h->base && a < (uintptr_t)h->chunks)
		return false;
	if (a >= (uintptr_t)h->chunks && a < (uintptr_t)chunk_addr(h, h->nchunks)) {
		uint64_t idx = chunk_index(h, slot);
		bool in_bitmap = (uintptr_t)(a - (uintptr_t)chunk_addr(h, idx)) < RUN_BITMAP_BYTES;
		if (in_bitmap && CHUNK_KIND(word_get(&h->table[idx])) == CHUNK_RUN)
			return false;
	}
	return true;
}

static uint64_t generation(const struct tips_heap *h)
{
	return __atomic_load_n(&h->hdr->generation, __ATOMIC_ACQUIRE);
}

static uint64_t extent_chunks(uint64_t size)
{
	return (size + BLOCK_HEADER_SIZE + HEAP_CHUNK_SIZE - 1) / HEAP_CHUNK_SIZE;
}

/* ---- locating blocks ------------------------------------------------------------ */

/* A block as found from an address: which chunk, which bit (runs), its header. */
struct block_ref {
	uint64_t chunk;            /* run chunk or extent head */
	bool extent;
	uint32_t bit;              /* runs */
	struct block_header *hdr;
	size_t usable;
};

/*
 * Resolves @addr to the block containing it. With @exact, @addr must be a block header
 * address. Returns false if @addr is not inside an allocated-looking block.
 */
static bool block_find(const struct tips_heap *h, const void *addr, bool exact,
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

static uint64_t *run_bitmap(const struct tips_heap *h, uint64_t chunk)
{
	return (uint64_t *)chunk_addr(h, chunk);
}

static bool block_is_allocated(const struct tips_heap *h, const struct block_ref *r)
{
	if (r->extent)
		return true; /* an extent head in the table is allocated */
	return (word_get(&run_bitmap(h, r->chunk)[r->bit / 64]) >> (r->bit % 64)) & 1;
}

/* ---- free chunks ---------------------------------------------------------------- */

static void chunk_mark_free(struct tips_heap *h, uint64_t idx, uint64_t n, bool free)
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

static bool chunk_is_free(const struct tips_heap *h, uint64_t i)
{
	return (h->chunk_free[i / 64] >> (i % 64)) & 1;
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
static void chunk_release_locked(struct tips_heap *h, uint64_t idx, uint64_t n)
{
	for (uint64_t i = idx; i < idx + n; i++)
		word_put(&h->table[i], CHUNK_ENTRY(CHUNK_FREE, 0));
	pm_persist(&h->table[idx], n * sizeof(uint64_t));
	chunk_mark_free(h, idx, n, true);
	if (idx < h->chunk_hint)
		h->chunk_hint = idx;
}

/* ---- runs ----------------------------------------------------------------------- */

static void class_list_push(struct tips_heap *h, int cls, uint64_t run)
{
	struct run_state *r = &h->runs[run];
	r->prev = -1;
	r->next = h->classes[cls].head;
	if (r->next >= 0)
		h->runs[r->next].prev = (int32_t)run;
	h->classes[cls].head = (int32_t)run;
	r->listed = true;
}

static void class_list_remove(struct tips_heap *h, int cls, uint64_t run)
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

static int run_state_init(struct tips_heap *h, uint64_t idx, int cls)
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

static struct lane *lane_mine(struct tips_heap *h)
{
	return &h->lanes[thread_slot_get() % h->nlanes];
}

static void record_write(struct tips_heap *h, struct lane *lane, uint64_t block, uint64_t slot,
			 uint64_t size, enum heap_record_type type, bool fence)
{
	struct heap_record *r = &lane->log[lane->nrec++];
	r->block = block;
	r->slot = slot;
	r->size = size;
	uint64_t gen = generation(h);
	__atomic_store_n(&r->tag, REC_TAG(gen, rec_check(gen, block, slot, size, type), type),
			 __ATOMIC_RELEASE);
	pm_flush(r, sizeof(*r));
	if (fence)
		pm_drain();
}

static bool record_valid(const struct tips_heap *h, const struct heap_record *r, uint64_t gen)
{
	(void)h;
	uint64_t tag = __atomic_load_n(&r->tag, __ATOMIC_ACQUIRE);
	unsigned t = REC_TYPE(tag);
	return REC_GEN(tag) == gen && t >= REC_ALLOC_SLOT && t <= REC_FREE_LOGGED &&
	       REC_CHECK(tag) == rec_check(gen, r->block, r->slot, r->size, t);
}

/* MLog records pending in this generation; reads other lanes' counts without their
 * locks, which is exact when every lane is locked and a hint otherwise. */
static uint64_t logged_pending(const struct tips_heap *h)
{
	uint64_t n = 0;
	for (unsigned l = 0; l < h->nlanes; l++)
		n += __atomic_load_n(&h->lanes[l].logged, __ATOMIC_RELAXED);
	return n;
}

static int checkpoint_locked(struct tips_heap *h, unsigned flags, bool rollback);
static void lanes_lock_all(struct tips_heap *h);
static void lanes_unlock_all(struct tips_heap *h);

/*
 * Locks the caller's lane with room for one record. When the lane log is full it
 * checkpoints, unless MLog records are pending: only their owner may decide on those.
 */
static int lane_lock_with_room(struct tips_heap *h, struct lane **out)
{
	struct lane *lane = lane_mine(h);
	uint64_t cap = h->hdr->lane_records;
	pthread_mutex_lock(&lane->lock);
	while (lane->nrec >= cap) {
		pthread_mutex_unlock(&lane->lock);
		lanes_lock_all(h); /* decide with every lane still: no MLog record can appear */
		int rc = 0;
		if (lane->nrec >= cap) {
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
static void block_set_bits(struct tips_heap *h, const struct block_ref *ref, size_t size)
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
static void block_mark_allocated(struct tips_heap *h, const struct block_ref *ref, size_t size,
				 uint64_t gen)
{
	block_set_bits(h, ref, size);
	ref->hdr->alloc_gen = gen;
	ref->hdr->size = size;
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

static int alloc_common(struct tips_heap *h, size_t size, uint64_t *slot, void **out)
{
	if (!h || size == 0)
		return tips_set_error(TIPS_EINVAL, "allocation of 0 bytes");
	if (size > h->nchunks * HEAP_CHUNK_SIZE)
		return tips_set_error(TIPS_ETOOBIG, "allocation of %zu bytes exceeds the heap",
				      size);
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
	return alloc_common(h, size, slot, NULL);
}

int tips_heap_alloc_logged(struct tips_heap *h, size_t size, void **out)
{
	if (!out)
		return tips_set_error(TIPS_EINVAL, "tips_heap_alloc_logged: no out pointer");
	return alloc_common(h, size, NULL, out);
}

/* ---- free ----------------------------------------------------------------------- */

static void pending_clear(struct tips_heap *h, const struct block_ref *ref);

/* Marks @ref pending-free for this generation; false if it already was (double free). */
static bool block_mark_pending(struct tips_heap *h, const struct block_ref *ref)
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

/* ---- checkpoint, rollback, replay ----------------------------------------------- */

static void lanes_lock_all(struct tips_heap *h)
{
	gate_enter(&h->all_lanes);
	for (unsigned i = 0; i < h->nlanes; i++)
		pthread_mutex_lock(&h->lanes[i].lock);
}

static void lanes_unlock_all(struct tips_heap *h)
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
static void record_block(const struct tips_heap *h, const struct heap_record *r,
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

/*
 * Flushes a line unless it was the last one this pass flushed: consecutive records name
 * neighbouring blocks (one bitmap line covers up to 512 of them) and neighbouring slots.
 * Only for passes that flush and do not store: a flush is not ordered with later stores
 * to its line, so a line stored to after its flush must be flushed again.
 */
struct line_filter {
	uintptr_t last[2]; /* two streams: metadata words and slots */
};

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
static void flush_record_effects(struct tips_heap *h, const struct heap_record *r,
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

static void pending_clear(struct tips_heap *h, const struct block_ref *ref)
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
static int checkpoint_locked(struct tips_heap *h, unsigned flags, bool rollback)
{
	uint64_t gen = generation(h);
	bool contents = flags & TIPS_HEAP_FLUSH_LOGGED_BLOCKS;
	const struct heap_record *r;
	struct record_iter it;
	struct block_ref ref;
	uint64_t n;
	struct line_filter f = { { 0, 0 } };
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

void heap_flush_logged_blocks(struct tips_heap *h)
{
	lanes_lock_all(h);
	uint64_t gen = generation(h);
	const struct heap_record *r;
	struct record_iter it;
	struct line_filter f = { { 0, 0 } };
	for (it = (struct record_iter){ 0, 0 }; (r = record_next(h, gen, &it));) {
		if (REC_TYPE(r->tag) == REC_ALLOC_LOGGED)
			flush_record_effects(h, r, true, &f);
		else if (REC_TYPE(r->tag) == REC_FREE_LOGGED) /* written without a flush */
			pm_flush(r, sizeof(*r));
	}
	lanes_unlock_all(h);
	pm_drain();
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
	uint64_t used = lane->nrec;
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

/* ---- format, open, replay, close ------------------------------------------------ */

static uint64_t heap_header_checksum(const struct heap_header *hh)
{
	return crc32(0, (const Bytef *)hh, offsetof(struct heap_header, checksum));
}

int heap_format(void *base, size_t size)
{
	if (size < HEAP_MIN_SIZE)
		return tips_set_error(TIPS_ESIZE, "heap of %zu bytes is below the minimum", size);
	struct heap_header *hh = base;
	memset(hh, 0, sizeof(*hh));
	hh->magic = HEAP_MAGIC;
	hh->layout_version = HEAP_LAYOUT_VERSION;
	hh->nlanes = HEAP_DEFAULT_LANES;
	/* Logs: 1/32 of the heap, 64 KiB..64 MiB in all, at least 32 records a lane. The
	 * TIPS framework keeps a replay worker's MLog records in its lane until the next
	 * reclamation, so bigger lanes mean fewer reclamations (a 1 GiB pool: 16K records). */
	uint64_t log_bytes = size / 32;
	log_bytes = log_bytes < (64u << 10) ? (64u << 10) : log_bytes > (64u << 20) ? (64u << 20) : log_bytes;
	hh->lane_records = log_bytes / hh->nlanes / sizeof(struct heap_record);
	if (hh->lane_records < 32)
		hh->lane_records = 32;
	hh->lanes_offset = HEAP_HEADER_SIZE;
	hh->table_offset = hh->lanes_offset + hh->nlanes * hh->lane_records * sizeof(struct heap_record);
	/* Chunks start chunk-aligned after a table sized for HEAP_TABLE_GROWTH times the
	 * chunks that still fit (room to grow the heap later). */
	uint64_t n = size / HEAP_CHUNK_SIZE;
	for (;; n--) {
		uint64_t start = hh->table_offset + n * HEAP_TABLE_GROWTH * sizeof(uint64_t);
		start = (start + HEAP_CHUNK_SIZE - 1) / HEAP_CHUNK_SIZE * HEAP_CHUNK_SIZE;
		if (n == 0 || start + n * HEAP_CHUNK_SIZE <= size) {
			hh->chunks_offset = start;
			break;
		}
	}
	if (n < 2)
		return tips_set_error(TIPS_ESIZE, "heap of %zu bytes has room for no chunks", size);
	hh->nchunks = n;
	hh->checksum = heap_header_checksum(hh);
	hh->generation = 1;
	/* Logs all zero (generation 0 never matches); table all FREE. */
	char *b = base;
	memset(b + hh->lanes_offset, 0, hh->chunks_offset - hh->lanes_offset);
	pm_flush(b + hh->lanes_offset, hh->chunks_offset - hh->lanes_offset);
	pm_persist(hh, sizeof(*hh));
	return 0;
}

/* Chunks the table of @hh has entries for. */
static uint64_t table_capacity(const struct heap_header *hh)
{
	return (hh->chunks_offset - hh->table_offset) / sizeof(uint64_t);
}

static bool heap_layout_plausible(const struct heap_header *hh, uint64_t size);

int heap_grow_plan(const void *hdr, uint64_t old_size, uint64_t new_size, uint64_t *nchunks,
		   uint64_t *max_size)
{
	const struct heap_header *hh = hdr;
	if (hh->magic != HEAP_MAGIC || hh->layout_version != HEAP_LAYOUT_VERSION ||
	    hh->checksum != heap_header_checksum(hh) || !heap_layout_plausible(hh, old_size) ||
	    new_size < old_size)
		return tips_set_error(TIPS_ECORRUPT, "heap header is corrupted");
	*nchunks = (new_size - hh->chunks_offset) / HEAP_CHUNK_SIZE;
	*max_size = hh->chunks_offset + table_capacity(hh) * HEAP_CHUNK_SIZE;
	return 0;
}

void heap_grow_prepare(void *base, uint64_t nchunks)
{
	struct heap_header *hh = base;
	TIPS_INVARIANT(nchunks >= hh->nchunks && nchunks <= table_capacity(hh),
		       "a heap grows only within its chunk table (heap_grow_plan)");
	uint64_t *table = (uint64_t *)((char *)base + hh->table_offset);
	uint64_t first = hh->nchunks;
	for (uint64_t i = first; i < nchunks; i++)
		table[i] = CHUNK_ENTRY(CHUNK_FREE, 0);
	pm_persist(&table[first], (nchunks - first) * sizeof(uint64_t));
}

void heap_grow_apply(void *base, uint64_t nchunks)
{
	struct heap_header *hh = base;
	hh->nchunks = nchunks;
	hh->checksum = heap_header_checksum(hh);
	pm_persist(hh, offsetof(struct heap_header, generation));
}

static int addr_compare(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

static bool addr_listed(const uint64_t *sorted, size_t n, uint64_t v)
{
	return bsearch(&v, sorted, n, sizeof(*sorted), addr_compare) != NULL;
}

/* Validates the geometry a record claims, so replay never writes outside the heap. */
static bool record_sane(const struct tips_heap *h, const struct heap_record *r)
{
	const char *blk = (const char *)r->block;
	if (blk < h->chunks || blk >= chunk_addr(h, h->nchunks))
		return false;
	unsigned t = REC_TYPE(r->tag);
	bool slot_type = t == REC_ALLOC_SLOT || t == REC_FREE_SLOT;
	if (slot_type ? !slot_in_pool(h, (const uint64_t *)r->slot) : r->slot != 0)
		return false;
	uint64_t idx = chunk_index(h, blk);
	uint64_t e = h->table[idx];
	if (CHUNK_KIND(e) == CHUNK_RUN) {
		uint64_t cls = CHUNK_ARG(e);
		if (cls >= (uint64_t)NCLASSES || r->size + BLOCK_HEADER_SIZE > class_slot[cls])
			return false;
		uint64_t off = (uint64_t)(blk - chunk_addr(h, idx));
		return off >= RUN_BITMAP_BYTES && (off - RUN_BITMAP_BYTES) % class_slot[cls] == 0 &&
		       (off - RUN_BITMAP_BYTES) / class_slot[cls] < run_capacity((int)cls);
	}
	/* An extent: its head is FREE or EXTENT, the rest FREE or its own continuations
	 * (it was carved from free chunks; replay may have written it before). */
	uint64_t n = extent_chunks(r->size);
	if (blk != chunk_addr(h, idx) || n < 1 || idx + n > h->nchunks)
		return false;
	if (CHUNK_KIND(e) != CHUNK_FREE && CHUNK_KIND(e) != CHUNK_EXTENT)
		return false;
	for (uint64_t k = 1; k < n; k++) {
		uint64_t c = h->table[idx + k];
		if (c != CHUNK_ENTRY(CHUNK_FREE, 0) && c != CHUNK_ENTRY(CHUNK_CONT, k))
			return false;
	}
	return true;
}

/*
 * Replays the valid records, bringing the media to the state the program had at the
 * crash: every block a record names marked allocated (an interrupted checkpoint may
 * have cleared some; frees stay pending until the next checkpoint), allocation headers
 * rewritten, and every slot set to its last value (see heap_layout.h).
 */
static int replay(struct tips_heap *h, struct heap_record ***out, size_t *nout)
{
	uint64_t gen = generation(h), cap = h->hdr->lane_records;
	size_t total = 0, nfreed = 0;
	for (unsigned l = 0; l < h->nlanes; l++) {
		h->lanes[l].nrec = 0;
		for (uint64_t i = 0; i < cap; i++)
			if (record_valid(h, &h->lanes[l].log[i], gen)) {
				total++;
				h->lanes[l].nrec = (uint32_t)(i + 1);
			}
	}
	struct heap_record **recs = calloc(total ? total : 1, sizeof(*recs));
	uint64_t *freed = calloc(total ? total : 1, sizeof(*freed));
	if (!recs || !freed) {
		free(recs);
		free(freed);
		return tips_set_error(TIPS_ENOMEM, "out of DRAM for heap recovery");
	}
	size_t k = 0;
	for (unsigned l = 0; l < h->nlanes; l++)
		for (uint64_t i = 0; i < h->lanes[l].nrec; i++) {
			struct heap_record *r = &h->lanes[l].log[i];
			if (!record_valid(h, r, gen))
				continue;
			if (!record_sane(h, r)) {
				free(recs);
				free(freed);
				return tips_set_error(TIPS_ECORRUPT, "heap log lane %u record %llu "
						      "names no block", l, (unsigned long long)i);
			}
			recs[k++] = r;
			unsigned t = REC_TYPE(r->tag);
			if (t == REC_FREE_SLOT) /* a logged free leaves slots alone */
				freed[nfreed++] = r->block;
			if (t == REC_ALLOC_LOGGED || t == REC_FREE_LOGGED)
				h->lanes[l].logged++;
		}
	qsort(freed, nfreed, sizeof(*freed), addr_compare);
	/* Stores first, then one flush pass: no line is stored to after its flush. */
	for (size_t i = 0; i < total; i++) {
		struct heap_record *r = recs[i];
		unsigned t = REC_TYPE(r->tag);
		struct block_ref ref;
		uint64_t n;
		record_block(h, r, &ref, &n);
		if (t == REC_ALLOC_SLOT || t == REC_ALLOC_LOGGED)
			block_mark_allocated(h, &ref, r->size, gen);
		else
			block_set_bits(h, &ref, r->size);
		if (t == REC_FREE_SLOT) /* cleared first; a surviving allocation sets it below */
			*(uint64_t *)r->slot = 0;
	}
	for (size_t i = 0; i < total; i++) {
		struct heap_record *r = recs[i];
		if (REC_TYPE(r->tag) == REC_ALLOC_SLOT && !addr_listed(freed, nfreed, r->block))
			*(uint64_t *)r->slot = r->block + BLOCK_HEADER_SIZE;
	}
	struct line_filter f = { { 0, 0 } };
	for (size_t i = 0; i < total; i++)
		flush_record_effects(h, recs[i], false, &f);
	pm_drain();
	free(freed);
	atomic_fetch_add(&h->n_recovered, total);
	*out = recs;
	*nout = total;
	return 0;
}

/* Builds the volatile free lists from the chunk table and bitmaps. */
static int rebuild(struct tips_heap *h)
{
	for (uint64_t i = 0; i < h->nchunks;) {
		uint64_t e = h->table[i];
		switch (CHUNK_KIND(e)) {
		case CHUNK_FREE:
			chunk_mark_free(h, i, 1, true);
			i++;
			break;
		case CHUNK_RUN: {
			if (CHUNK_ARG(e) >= (uint64_t)NCLASSES)
				return tips_set_error(TIPS_ECORRUPT, "chunk %llu: bad size class",
						      (unsigned long long)i);
			int cls = (int)CHUNK_ARG(e);
			int rc = run_state_init(h, i, cls);
			if (rc)
				return rc;
			if (h->runs[i].nfree == run_capacity(cls)) {
				/* empty: free for any class */
				room_add(h, -(int64_t)run_capacity(cls) * class_slot[cls]);
				chunk_release_locked(h, i, 1);
			}
			else if (h->runs[i].nfree > 0)
				class_list_push(h, cls, i);
			i++;
			break;
		}
		case CHUNK_EXTENT: {
			uint64_t n = CHUNK_ARG(e);
			if (n == 0 || i + n > h->nchunks)
				return tips_set_error(TIPS_ECORRUPT, "chunk %llu: bad extent length",
						      (unsigned long long)i);
			h->runs[i].pending_free = calloc(RUN_BITMAP_BYTES / 8, sizeof(uint64_t));
			if (!h->runs[i].pending_free)
				return tips_set_error(TIPS_ENOMEM, "out of DRAM");
			h->bytes_at_open += n * HEAP_CHUNK_SIZE - BLOCK_HEADER_SIZE;
			i += n;
			break;
		}
		default:
			return tips_set_error(TIPS_ECORRUPT, "chunk %llu: bad chunk table entry",
					      (unsigned long long)i);
		}
	}
	for (uint64_t i = 0; i < h->nchunks; i++)
		if (CHUNK_KIND(h->table[i]) == CHUNK_RUN) {
			int cls = (int)CHUNK_ARG(h->table[i]);
			h->bytes_at_open += (uint64_t)(run_capacity(cls) - h->runs[i].nfree) *
					   (class_slot[cls] - BLOCK_HEADER_SIZE);
		}
	return 0;
}

static void heap_free_volatile(struct tips_heap *h)
{
	if (h->runs)
		for (uint64_t i = 0; i < h->nchunks; i++)
			free(h->runs[i].pending_free);
	for (unsigned l = 0; l < h->nlanes; l++)
		pthread_mutex_destroy(&h->lanes[l].lock);
	for (int c = 0; c < NCLASSES; c++)
		pthread_mutex_destroy(&h->classes[c].lock);
	pthread_mutex_destroy(&h->chunk_lock);
	pthread_mutex_destroy(&h->all_lanes.lock);
	pthread_cond_destroy(&h->all_lanes.turn);
	free(h->runs);
	free(h->chunk_free);
	free(h->freeing);
	free(h);
}

/* Whether a heap header describes areas in order inside @size bytes (no sum can wrap:
 * every count is bounded by @size first). */
static bool heap_layout_plausible(const struct heap_header *hh, uint64_t size)
{
	if (hh->nlanes == 0 || hh->nlanes > HEAP_MAX_LANES || hh->generation == 0 ||
	    hh->lanes_offset < HEAP_HEADER_SIZE || hh->lanes_offset > size ||
	    hh->lane_records > size / sizeof(struct heap_record) / hh->nlanes ||
	    hh->nchunks == 0 || hh->nchunks > size / HEAP_CHUNK_SIZE ||
	    hh->table_offset > size || hh->chunks_offset > size)
		return false;
	uint64_t lanes_end = hh->lanes_offset + hh->nlanes * hh->lane_records *
						   sizeof(struct heap_record);
	return lanes_end <= hh->table_offset &&
	       hh->table_offset + hh->nchunks * sizeof(uint64_t) <= hh->chunks_offset &&
	       hh->nchunks * HEAP_CHUNK_SIZE <= size - hh->chunks_offset;
}

int heap_open(void *base, size_t size, void *slots_start, void *slots_end,
	      struct tips_heap **out)
{
	struct heap_header *hh = base;
	if (hh->magic != HEAP_MAGIC || hh->layout_version != HEAP_LAYOUT_VERSION ||
	    hh->checksum != heap_header_checksum(hh) || !heap_layout_plausible(hh, size))
		return tips_set_error(TIPS_ECORRUPT, "heap header is corrupted");
	struct tips_heap *h = calloc(1, sizeof(*h));
	if (!h)
		return tips_set_error(TIPS_ENOMEM, "out of DRAM");
	h->base = base;
	h->slots_start = (uintptr_t)slots_start;
	h->slots_end = (uintptr_t)slots_end;
	h->hdr = hh;
	h->table = (uint64_t *)(h->base + hh->table_offset);
	h->chunks = h->base + hh->chunks_offset;
	h->nchunks = hh->nchunks;
	h->nlanes = hh->nlanes;
	pthread_mutex_init(&h->chunk_lock, NULL);
	pthread_mutex_init(&h->all_lanes.lock, NULL);
	pthread_cond_init(&h->all_lanes.turn, NULL);
	for (unsigned l = 0; l < h->nlanes; l++) {
		pthread_mutex_init(&h->lanes[l].lock, NULL);
		h->lanes[l].log = (struct heap_record *)(h->base + hh->lanes_offset) + l * hh->lane_records;
		for (int c = 0; c < NCLASSES; c++)
			h->lanes[l].active[c] = -1;
	}
	for (int c = 0; c < NCLASSES; c++) {
		pthread_mutex_init(&h->classes[c].lock, NULL);
		h->classes[c].head = -1;
	}
	h->runs = aligned_alloc(64, h->nchunks * sizeof(*h->runs));
	if (h->runs)
		memset(h->runs, 0, h->nchunks * sizeof(*h->runs));
	h->chunk_free = calloc((h->nchunks + 63) / 64, sizeof(uint64_t));
	h->freeing = calloc((size_t)h->nlanes * hh->lane_records, sizeof(*h->freeing));
	if (!h->runs || !h->chunk_free || !h->freeing) {
		heap_free_volatile(h);
		return tips_set_error(TIPS_ENOMEM, "out of DRAM");
	}
	for (uint64_t i = 0; i < h->nchunks; i++)
		h->runs[i].owner = -1;
	struct heap_record **recs = NULL;
	size_t nrecs = 0;
	int rc = replay(h, &recs, &nrecs);
	if (rc == 0)
		rc = rebuild(h);
	if (rc) {
		free(recs);
		heap_free_volatile(h);
		return rc;
	}
	/* Frees recorded before the crash stay pending (deferred) as they were. */
	for (size_t i = 0; i < nrecs; i++) {
		unsigned t = REC_TYPE(recs[i]->tag);
		if (t == REC_FREE_SLOT || t == REC_FREE_LOGGED) {
			struct block_ref ref;
			uint64_t n;
			record_block(h, recs[i], &ref, &n);
			block_mark_pending(h, &ref);
		}
	}
	free(recs);
	if (logged_pending(h) > 0)
		h->undecided = true; /* the MLog's owner decides: checkpoint or rollback */
	else if (nrecs > 0)
		checkpoint_locked(h, 0, false);
	*out = h;
	return 0;
}

int heap_close(struct tips_heap *h, int crashed)
{
	int pending = 0;
	if (!crashed) {
		if (h->undecided)
			pending = 1; /* leave the MLog for its owner's recovery */
		else
			tips_heap_checkpoint(h, 0);
	}
	heap_free_volatile(h);
	return pending;
}

/* ---- queries -------------------------------------------------------------------- */

size_t tips_heap_usable_size(const struct tips_heap *h, const void *ptr)
{
	struct block_ref ref;
	uintptr_t p = (uintptr_t)ptr;
	if (!h || p < BLOCK_HEADER_SIZE ||
	    !block_find(h, (const void *)(p - BLOCK_HEADER_SIZE), true, &ref) ||
	    !block_is_allocated(h, &ref))
		return 0;
	return ref.usable;
}

int tips_heap_block_is_fresh(const struct tips_heap *h, const void *addr)
{
	struct block_ref ref;
	if (!h || !block_find(h, addr, false, &ref) || !block_is_allocated(h, &ref))
		return 0;
	return ref.hdr->alloc_gen == generation(h);
}

uint64_t tips_heap_generation(const struct tips_heap *h) { return generation(h); }

static void heap_stats_fill(struct tips_heap *h, struct tips_heap_stats *out)
{
	memset(out, 0, sizeof(*out));
	int64_t delta = 0;
	lanes_lock_all(h);
	for (unsigned l = 0; l < h->nlanes; l++) {
		out->allocs += h->lanes[l].allocs;
		out->frees += h->lanes[l].frees;
		delta += h->lanes[l].bytes_delta;
	}
	lanes_unlock_all(h);
	out->checkpoints = atomic_load(&h->n_checkpoints);
	out->rollbacks = atomic_load(&h->n_rollbacks);
	out->recovered_records = atomic_load(&h->n_recovered);
	out->bytes_in_use = (uint64_t)((int64_t)h->bytes_at_open + delta);
	out->bytes_total = h->nchunks * HEAP_CHUNK_SIZE;
}

void tips_heap_stats_sized(struct tips_heap *h, struct tips_heap_stats *out, size_t size)
{
	struct tips_heap_stats full;
	heap_stats_fill(h, &full);
	tips_struct_write(out, size, &full, sizeof(full));
}

static bool block_pending(const struct tips_heap *h, const struct block_ref *ref)
{
	const _Atomic uint64_t *pf = h->runs[ref->chunk].pending_free;
	return pf && ((atomic_load(&pf[ref->bit / 64]) >> (ref->bit % 64)) & 1);
}

/* Reports one allocated block, found by address, to a walk's callback. */
static int walk_visit(const struct tips_heap *h, const char *block, uint64_t gen,
		      tips_heap_walk_fn fn, void *arg)
{
	struct block_ref ref;
	if (!block_find(h, block, true, &ref))
		return 0;
	struct tips_heap_block b = {
		.ptr = (char *)ref.hdr + BLOCK_HEADER_SIZE,
		.size = ref.hdr->size,
		.usable = ref.usable,
		.alloc_gen = ref.hdr->alloc_gen,
		.pending = ref.hdr->alloc_gen == gen || block_pending(h, &ref),
	};
	return fn(&b, arg);
}

int tips_heap_walk(struct tips_heap *h, tips_heap_walk_fn fn, void *arg)
{
	uint64_t gen = generation(h);
	for (uint64_t i = 0; i < h->nchunks;) {
		uint64_t e = h->table[i];
		int rc = 0;
		if (CHUNK_KIND(e) == CHUNK_EXTENT) {
			rc = walk_visit(h, chunk_addr(h, i), gen, fn, arg);
			i += CHUNK_ARG(e) ? CHUNK_ARG(e) : 1;
		} else {
			if (CHUNK_KIND(e) == CHUNK_RUN && CHUNK_ARG(e) < (uint64_t)NCLASSES) {
				int cls = (int)CHUNK_ARG(e);
				const uint64_t *bm = run_bitmap(h, i);
				for (uint32_t bit = 0; bit < run_capacity(cls) && rc == 0; bit++)
					if ((bm[bit / 64] >> (bit % 64)) & 1)
						rc = walk_visit(h, chunk_addr(h, i) + RUN_BITMAP_BYTES +
								(uint64_t)bit * class_slot[cls], gen, fn, arg);
			}
			i++;
		}
		if (rc)
			return rc;
	}
	return 0;
}

/* ---- check ---------------------------------------------------------------------- */

__attribute__((format(printf, 2, 3)))
static void report_error(struct tips_heap_report *rep, const char *fmt, ...)
{
	if (rep->errors++ == 0) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(rep->first_error, sizeof(rep->first_error), fmt, ap);
		va_end(ap);
	}
}

static void check_block(const struct tips_heap *h, const struct block_header *bh, size_t usable,
			uint64_t gen, struct tips_heap_report *rep)
{
	rep->blocks_allocated++;
	rep->bytes_allocated += bh->size;
	if (bh->size == 0 || bh->size > usable)
		report_error(rep, "block at 0x%llx: header size %llu does not fit the block", (unsigned long long)(uintptr_t)bh, (unsigned long long)bh->size);
	if (bh->alloc_gen == 0 || bh->alloc_gen > gen)
		report_error(rep, "block at 0x%llx: allocation generation %llu is in the future", (unsigned long long)(uintptr_t)bh, (unsigned long long)bh->alloc_gen);
	(void)h;
}

/* What heap_room() must say, counted from the free-chunk map and the runs' free counts. */
static int64_t room_recount(const struct tips_heap *h)
{
	int64_t room = 0;
	for (uint64_t i = 0; i < h->nchunks; i++) {
		uint64_t e = h->table[i];
		if (chunk_is_free(h, i))
			room += HEAP_CHUNK_SIZE;
		else if (CHUNK_KIND(e) == CHUNK_RUN && CHUNK_ARG(e) < (uint64_t)NCLASSES)
			room += (int64_t)h->runs[i].nfree * class_slot[CHUNK_ARG(e)];
	}
	return room;
}

static int heap_check(struct tips_heap *h, struct tips_heap_report *rep)
{
	struct tips_heap_report local;
	if (!rep)
		rep = &local;
	memset(rep, 0, sizeof(*rep));
	uint64_t gen = generation(h);
	rep->chunks = h->nchunks;
	if (h->hdr->checksum != heap_header_checksum(h->hdr))
		report_error(rep, "heap header checksum mismatch");
	for (uint64_t i = 0; i < h->nchunks;) {
		uint64_t e = h->table[i];
		switch (CHUNK_KIND(e)) {
		case CHUNK_FREE:
			rep->chunks_free++;
			i++;
			break;
		case CHUNK_RUN: {
			rep->chunks_run++;
			uint64_t cls = CHUNK_ARG(e);
			if (cls >= (uint64_t)NCLASSES) {
				report_error(rep, "chunk %llu: size class %llu does not exist", (unsigned long long)(i), (unsigned long long)(cls));
				i++;
				break;
			}
			uint32_t cap = run_capacity((int)cls);
			const uint64_t *bm = run_bitmap(h, i);
			for (uint32_t w = cap / 64; w < RUN_BITMAP_BYTES / 8; w++) {
				uint64_t beyond = w == cap / 64 ? bm[w] & (~0ull << (cap % 64)) : bm[w];
				if (beyond)
					report_error(rep, "chunk %llu: bitmap word %llu marks blocks past "
						     "the run's end", (unsigned long long)(i), (unsigned long long)(w));
			}
			for (uint32_t bit = 0; bit < cap; bit++)
				if ((bm[bit / 64] >> (bit % 64)) & 1)
					check_block(h, (const struct block_header *)(chunk_addr(h, i) +
						    RUN_BITMAP_BYTES + (uint64_t)bit * class_slot[cls]),
						    class_slot[cls] - BLOCK_HEADER_SIZE, gen, rep);
			i++;
			break;
		}
		case CHUNK_EXTENT: {
			rep->chunks_extent++;
			uint64_t n = CHUNK_ARG(e);
			if (n == 0 || i + n > h->nchunks) {
				report_error(rep, "chunk %llu: extent of %llu chunks overruns the heap", (unsigned long long)(i), (unsigned long long)(n));
				i++;
				break;
			}
			for (uint64_t k = 1; k < n; k++)
				if (h->table[i + k] != CHUNK_ENTRY(CHUNK_CONT, k))
					report_error(rep, "chunk %llu: extent continuation %llu is wrong", (unsigned long long)(i), (unsigned long long)(k));
			check_block(h, (const struct block_header *)chunk_addr(h, i),
				    n * HEAP_CHUNK_SIZE - BLOCK_HEADER_SIZE, gen, rep);
			rep->chunks_extent += n - 1;
			i += n;
			break;
		}
		case CHUNK_CONT:
			report_error(rep, "chunk %llu: extent continuation without a head", (unsigned long long)i);
			i++;
			break;
		default:
			report_error(rep, "chunk %llu: unknown chunk kind %llu", (unsigned long long)(i), (unsigned long long)(CHUNK_KIND(e)));
			i++;
		}
	}
	int64_t room = room_recount(h);
	if (room != atomic_load(&h->room))
		report_error(rep, "room counter says %lld free bytes, the chunk map and runs %lld",
			     (long long)atomic_load(&h->room), (long long)room);
	for (unsigned l = 0; l < h->nlanes; l++)
		for (uint64_t k = 0; k < h->hdr->lane_records; k++) {
			const struct heap_record *r = &h->lanes[l].log[k];
			if (!record_valid(h, r, gen))
				continue;
			rep->log_records++;
			if (!record_sane(h, r))
				report_error(rep, "log lane %llu record %llu names no block", (unsigned long long)(l), (unsigned long long)(k));
		}
	return rep->errors ? tips_set_error(TIPS_ECORRUPT, "heap inconsistent: %s", rep->first_error)
			   : 0;
}

int tips_heap_check_sized(struct tips_heap *h, struct tips_heap_report *rep, size_t size)
{
	struct tips_heap_report r;
	int rc = heap_check(h, &r);
	if (rep)
		tips_struct_write(rep, size, &r, sizeof(r));
	return rc;
}
