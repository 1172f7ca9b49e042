/*
 * heap_internal.h - how the pool creates, opens and closes its heap.
 */
#ifndef TIPS_HEAP_HEAP_INTERNAL_H
#define TIPS_HEAP_HEAP_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <tips/heap.h>

/* Bytes of one allocation-log record (an MLog entry). */
#define HEAP_RECORD_BYTES 32u

/* Bytes of one chunk, the unit runs and extents are made of. */
#define HEAP_CHUNK_BYTES (256u << 10)

/* Smallest heap area a pool may have. */
#define HEAP_MIN_SIZE (4ull << 20)

/* Writes an empty heap into [base, base+size) and persists it. 0 or TIPS_ESIZE. */
int heap_format(void *base, size_t size);
/* Opens the heap at @base; callers' slots may lie in [slots_start, slots_end): validates it, replays its allocation logs if a crash left
 * records behind, and rebuilds the volatile free lists. 0, TIPS_ECORRUPT, TIPS_ENOMEM. */
int heap_open(void *base, size_t size, void *slots_start, void *slots_end,
	      struct tips_heap **out);
/* Checkpoints (unless @crashed) and frees the volatile state. */
/* Returns 1 if MLog records were left for the owner's recovery (pool not clean). */
int heap_close(struct tips_heap *heap, int crashed);

/*
 * Growing the heap area at its end, on a heap that is not open (the pool's grow, see
 * src/pool/pool.c). The pool commits the grow with an intent record between prepare and
 * apply, and re-runs apply until the intent is cleared.
 *
 * heap_grow_plan() reads the header at @hdr (a copy is fine) of a heap of @old_size
 * bytes: *@nchunks gets the chunk count for @new_size bytes, *@max_size the largest
 * heap area its chunk table can describe. 0, or TIPS_ECORRUPT if it is not a valid heap
 * header. The caller checks new_size against *max_size.
 * heap_grow_prepare() persists FREE table entries for the chunks [old count, @nchunks):
 * done before the commit, it touches nothing the current heap uses.
 * heap_grow_apply() sets the chunk count to @nchunks and the header checksum, persisted.
 * Idempotent, and it recomputes the checksum, so it also repairs a header whose
 * previous apply was torn by a crash.
 */
#define HEAP_GROW_PLAN_BYTES 128u /* bytes at the heap's base that heap_grow_plan reads */
int heap_grow_plan(const void *hdr, uint64_t old_size, uint64_t new_size, uint64_t *nchunks,
		   uint64_t *max_size);
void heap_grow_prepare(void *base, uint64_t nchunks);
void heap_grow_apply(void *base, uint64_t nchunks);

/* Persists the contents of every block allocated by tips_heap_alloc_logged() since the
 * last checkpoint, and every record of tips_heap_free_logged() (written unflushed),
 * without committing anything: step 1 of UNO reclamation, after which a crash must
 * still find every free to apply. The blocks left in lanes' reserves are freed here
 * (FREE_LOGGED records), so that committing the generation leaks none of them; no
 * logged allocation may come between this and the checkpoint. Returns how many blocks
 * the caller's tips_heap_free_logged() and tips_heap_free_from() freed since the last
 * checkpoint: those a reader may still hold, unlike the reserves' blocks, never handed
 * out. With 0, the checkpoint releases no block that a reader could be reading (given
 * that only logged frees are made: a checkpoint of the heap's own, when it is full,
 * applies slot frees and resets the count, but never runs while logged records are
 * pending). */
uint64_t heap_flush_logged_blocks(struct tips_heap *heap);
/* Bytes allocations could still take (free chunks and the free slots of runs; blocks
 * freed since the last checkpoint count as taken). Lock-free, exact between changes. */
uint64_t heap_room(const struct tips_heap *h);
/* The part of heap_room() in free chunks: what a size class without free slots, or an
 * extent, can take. */
uint64_t heap_chunk_room(const struct tips_heap *h);
/* Most blocks a lane reserves ahead for logged allocations (heap_set_logged_reserve). */
#define HEAP_RESERVE_MAX 16u
/* Makes each lane take up to @n blocks (at most HEAP_RESERVE_MAX; 0: none, the default)
 * at a time for tips_heap_alloc_logged() of one size: their ALLOC_LOGGED records are
 * written together under one fence, and the next allocations of that size hand them
 * out with no record and no fence of their own. Blocks left at a checkpoint are freed
 * by it (FREE_LOGGED records), at a rollback with the allocations; in between they
 * count as allocated. Not taken when the heap is nearly full or the lane log nearly
 * so. Call before allocating. */
void heap_set_logged_reserve(struct tips_heap *heap, unsigned n);
/* tips_heap_alloc_logged(), and in *@fenced (if not NULL) whether it fenced after the
 * block's record (and after all the calling thread had flushed): not for a block from
 * a reserve filled before, whose record was fenced then. */
int heap_alloc_logged_fenced(struct tips_heap *heap, size_t size, void **out, bool *fenced);
/* Records still free in the calling thread's lane log. */
uint64_t heap_lane_room(struct tips_heap *heap);

#endif
