/*
 * heap_private.h - what the heap's own files share, and nothing outside src/heap
 * includes: the size classes, the volatile state of an open heap (struct tips_heap),
 * the small helpers every part uses, and the calls one part makes into another.
 * heap_internal.h stays the heap's interface to the rest of the library (the pool, the
 * framework). The heap (tips/heap.h; layout in heap_layout.h) is:
 *   heap_alloc.c       locating blocks, free chunks, runs, lane records, alloc, free
 *   heap_checkpoint.c  checkpoint and rollback: applying and retiring the lane records
 *   heap_open.c        format, grow, open (recovery: replay and rebuild), close
 *   heap_query.c       sizes, statistics, the walk and the consistency check
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
#ifndef TIPS_HEAP_HEAP_PRIVATE_H
#define TIPS_HEAP_HEAP_PRIVATE_H

#include "heap/heap_internal.h"
#include "heap/heap_layout.h"
#include "util/thread_slot.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

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
_Static_assert(sizeof(struct heap_header) <= HEAP_GROW_PLAN_BYTES,
		"heap_grow_plan reads it all");

/* How many times an allocation that found the heap full retries after making room. */
#define MAKE_ROOM_ATTEMPTS 4

/* Smallest class whose slot holds @need bytes (header included); need <= 65536. */
static inline int class_of(uint64_t need)
{
	if (need <= 128)
		return need <= 32 ? 0 : (int)((need - 1) / 16) - 1;
	int p = 63 - __builtin_clzll(need - 1); /* 2^p < need <= 2^(p+1) */
	uint64_t quarter = (1ull << p) / 4;
	int step = (int)((need - (1ull << p) + quarter - 1) / quarter) - 1;
	return 7 + (p - 7) * 4 + step;
}

static inline uint32_t run_capacity(int cls)
{
	return (HEAP_CHUNK_SIZE - RUN_BITMAP_BYTES) / class_slot[cls];
}

/* ---- volatile state ------------------------------------------------------------- */

#define HEAP_LANE_RESERVES 2u /* reserves of logged allocations per lane, one size each */

struct run_state {
	int32_t owner;          /* lane that allocates from it, -1 if none */
	int32_t prev, next;     /* links in its class list, -1 at the ends */
	uint32_t nfree;         /* zero bits in the bitmap (freed-pending blocks count as used) */
	bool listed;            /* in the class list */
	_Atomic uint64_t *pending_free; /* bit set: a FREE record of this generation exists */
} __attribute__((aligned(64))); /* lanes allocate from neighbouring runs: no false sharing */

/* A block as found from an address: which chunk, which bit (runs), its header. */
struct block_ref {
	uint64_t chunk;            /* run chunk or extent head */
	bool extent;
	uint32_t bit;              /* runs */
	struct block_header *hdr;
	size_t usable;
};

struct lane {
	pthread_mutex_t lock;
	struct heap_record *log; /* in PM */
	uint32_t nrec;           /* records written this generation (next index) */
	int32_t active[NCLASSES]; /* run (chunk index) owned per class, -1 if none */
	uint32_t cursor[NCLASSES]; /* bitmap word to search from */
	uint32_t logged;         /* MLog records written this generation */
	uint32_t freed;          /* blocks handed out that were freed this generation */
	/* Statistics, kept per lane so that no shared line is written per call. */
	uint64_t allocs, frees;
	int64_t bytes_delta;     /* usable bytes allocated minus freed since open */
	/* Blocks taken ahead for logged allocations (heap_set_logged_reserve), one size per
	 * reserve, two sizes at once (a tree allocates leaves and nodes): allocated, each
	 * with its ALLOC_LOGGED record, not yet handed out; items [next, n). A checkpoint
	 * releases what is left with FREE_LOGGED records, a rollback with the allocations
	 * themselves, so a reserve never outlives its generation. */
	struct lane_reserve {
		size_t size;
		uint32_t n, next;
		struct block_ref item[HEAP_RESERVE_MAX];
	} reserve[HEAP_LANE_RESERVES];
} __attribute__((aligned(64)));

/* Records a lane's log holds or has promised: those written, and a FREE_LOGGED for
 * each block still in its reserves (written by the step that releases them). */
static inline uint64_t lane_records_used(const struct lane *l)
{
	uint64_t n = l->nrec;
	for (unsigned i = 0; i < HEAP_LANE_RESERVES; i++)
		n += l->reserve[i].n - l->reserve[i].next;
	return n;
}

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

static inline void gate_enter(struct ticket_gate *g)
{
	pthread_mutex_lock(&g->lock);
	uint64_t mine = g->next++;
	while (mine != g->serving)
		pthread_cond_wait(&g->turn, &g->lock);
	pthread_mutex_unlock(&g->lock);
}

static inline void gate_leave(struct ticket_gate *g)
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
	unsigned logged_reserve;         /* blocks a lane reserves at a time, 0: none */
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
static inline bool slot_in_pool(const struct tips_heap *h, const uint64_t *slot)
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

static inline uint64_t generation(const struct tips_heap *h)
{
	return __atomic_load_n(&h->hdr->generation, __ATOMIC_ACQUIRE);
}

static inline uint64_t extent_chunks(uint64_t size)
{
	return (size + BLOCK_HEADER_SIZE + HEAP_CHUNK_SIZE - 1) / HEAP_CHUNK_SIZE;
}




/* ---- calls between the heap's files ------------------------------------------------- */

/* Small helpers of several files. */
static inline uint64_t *run_bitmap(const struct tips_heap *h, uint64_t chunk)
{
	return (uint64_t *)chunk_addr(h, chunk);
}

static inline bool block_is_allocated(const struct tips_heap *h, const struct block_ref *r)
{
	if (r->extent)
		return true; /* an extent head in the table is allocated */
	return (word_get(&run_bitmap(h, r->chunk)[r->bit / 64]) >> (r->bit % 64)) & 1;
}

static inline bool chunk_is_free(const struct tips_heap *h, uint64_t i)
{
	return (h->chunk_free[i / 64] >> (i % 64)) & 1;
}

static inline struct lane *lane_mine(struct tips_heap *h)
{
	return &h->lanes[thread_slot_get() % h->nlanes];
}

static inline bool record_valid(const struct tips_heap *h, const struct heap_record *r, uint64_t gen)
{
	(void)h;
	uint64_t tag = __atomic_load_n(&r->tag, __ATOMIC_ACQUIRE);
	unsigned t = REC_TYPE(tag);
	return REC_GEN(tag) == gen && t >= REC_ALLOC_SLOT && t <= REC_FREE_LOGGED &&
	       REC_CHECK(tag) == rec_check(gen, r->block, r->slot, r->size, t);
}

/* MLog records pending in this generation; reads other lanes' counts without their
 * locks, which is exact when every lane is locked and a hint otherwise. */
static inline uint64_t logged_pending(const struct tips_heap *h)
{
	uint64_t n = 0;
	for (unsigned l = 0; l < h->nlanes; l++)
		n += __atomic_load_n(&h->lanes[l].logged, __ATOMIC_RELAXED);
	return n;
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

/* Defined in heap_alloc.c (hidden, as every internal symbol): locating blocks, chunks, runs. */
bool block_find(const struct tips_heap *h, const void *addr, bool exact,
		struct block_ref *ref);
void chunk_mark_free(struct tips_heap *h, uint64_t idx, uint64_t n, bool free);
void chunk_release_locked(struct tips_heap *h, uint64_t idx, uint64_t n);
void class_list_push(struct tips_heap *h, int cls, uint64_t run);
void class_list_remove(struct tips_heap *h, int cls, uint64_t run);
int run_state_init(struct tips_heap *h, uint64_t idx, int cls);
void block_mark_allocated(struct tips_heap *h, const struct block_ref *ref, size_t size,
		uint64_t gen);
void block_set_bits(struct tips_heap *h, const struct block_ref *ref, size_t size);
bool block_mark_pending(struct tips_heap *h, const struct block_ref *ref);
/* Releases what is left of @lane's reserves (its lock, or every lane, held): with
 * FREE_LOGGED records that the checkpoint about to run applies, or, for a rollback,
 * nothing (the rollback undoes the reserves' allocations). Called by checkpoint_locked
 * and heap_flush_logged_blocks. */
void reserve_release(struct tips_heap *h, struct lane *lane, bool rollback);

/* Defined in heap_checkpoint.c: taking every lane, checkpoints, applying a record. */
int checkpoint_locked(struct tips_heap *h, unsigned flags, bool rollback);
void lanes_lock_all(struct tips_heap *h);
void lanes_unlock_all(struct tips_heap *h);
void pending_clear(struct tips_heap *h, const struct block_ref *ref);
void record_block(const struct tips_heap *h, const struct heap_record *r,
		struct block_ref *ref, uint64_t *extent_n);
void flush_record_effects(struct tips_heap *h, const struct heap_record *r, bool contents,
		struct line_filter *f);

/* Defined in heap_open.c: record and header validation. */
bool record_sane(const struct tips_heap *h, const struct heap_record *r);
uint64_t heap_header_checksum(const struct heap_header *hh);

#endif /* TIPS_HEAP_HEAP_PRIVATE_H */
