/*
 * tips/heap.h - the crash-safe persistent allocator inside every pool.
 *
 * Blocks come from size classes (16 B of user data and up, grown by a quarter per step
 * up to 64 KiB); larger requests get an extent of whole 256 KiB chunks. Each thread
 * allocates through a lane of its own (a per-thread cache of one run per size class
 * and a private allocation log), so allocation scales with threads.
 *
 * Ownership. Every block is owned by exactly one of: the heap (free), a persistent slot
 * the caller named, or the caller's own data structure. Changes of ownership are
 * recorded in the lane's allocation log, and a log record is persistent before any
 * allocator metadata or the block itself can reach the media. The records of one
 * checkpoint interval are kept until the next tips_heap_checkpoint(); at open after a
 * crash they are replayed, so after any crash:
 *   - tips_heap_alloc_to(): the block is owned by *slot (and allocated), or the slot is
 *     unchanged and the block free; never both, never neither;
 *   - tips_heap_free_from(): the block is free and *slot is 0, or neither happened;
 *   - tips_heap_alloc_logged() / tips_heap_free_logged() (the MLog of UNO logging):
 *     their effects stay pending until the owner decides: tips_heap_checkpoint() makes
 *     them permanent, tips_heap_rollback() returns every block allocated since the last
 *     checkpoint to the heap and forgets the frees.
 * Frees are deferred: a freed block is reused only after the next checkpoint, so a
 * replayed operation can never free a block twice or use a reallocated one.
 *
 * Each block records the checkpoint generation it was allocated in
 * (tips_heap_block_is_fresh()), so a caller can skip undo-logging memory that did not
 * exist at the last checkpoint.
 *
 * Thread safety: every call is thread-safe except checkpoint/rollback, which may run
 * concurrently with allocations (they take every lane) but not with a walk or a check.
 */
#ifndef TIPS_HEAP_H
#define TIPS_HEAP_H

#include <stddef.h>
#include <stdint.h>
#include <tips/errors.h>

#ifdef __cplusplus
extern "C" {
#endif

struct tips_heap;

/* Largest allocation: a single extent, at most the heap. */
#define TIPS_HEAP_MAX_RUN_ALLOC (64u * 1024u - 16u)

/**
 * tips_heap_alloc_to() - allocate and hand the block atomically to a persistent slot.
 * @size: bytes of user data (> 0).
 * @slot: a 64-bit word inside the pool; receives the block's address.
 *
 * On return the block is durably owned by @slot (one fence). Preconditions: *@slot is
 * 0 (else TIPS_EINVAL), and no other thread allocates into or frees @slot at the same
 * time. Until the next checkpoint the caller must change @slot only through this heap
 * (e.g. tips_heap_free_from()), because recovery may rewrite it. The block's contents
 * are not initialised or persisted. Return: 0, TIPS_EINVAL, TIPS_ENOMEM (heap full),
 * TIPS_ETOOBIG, TIPS_ELOGFULL (the lane log is full of logged records, see below).
 */
TIPS_API int tips_heap_alloc_to(struct tips_heap *heap, size_t size, uint64_t *slot);

/**
 * tips_heap_free_from() - free the block held by @slot and clear the slot, atomically.
 * After return (one fence) the free survives any crash and *@slot reads 0 in this
 * process; like every free, the block is reused only after the next checkpoint.
 * Return: 0, TIPS_EINVAL (@slot empty or not a block), TIPS_ELOGFULL.
 */
TIPS_API int tips_heap_free_from(struct tips_heap *heap, uint64_t *slot);

/**
 * tips_heap_alloc_logged() - allocate a block recorded in the MLog.
 * @out: receives the block's address.
 *
 * The record is persistent on return. The allocation is pending until the
 * next tips_heap_checkpoint(); tips_heap_rollback() frees it. When the calling lane's
 * log is full this returns TIPS_ELOGFULL: the owner must checkpoint or roll back.
 */
TIPS_API int tips_heap_alloc_logged(struct tips_heap *heap, size_t size, void **out);

/**
 * tips_heap_free_logged() - record a deferred free of @ptr in the MLog.
 * No fence: the record is flushed and made durable by the next checkpoint, which
 * applies it; tips_heap_rollback() forgets it.
 */
TIPS_API int tips_heap_free_logged(struct tips_heap *heap, void *ptr);

/** Options for tips_heap_checkpoint(). */
enum tips_heap_checkpoint_flags {
	TIPS_HEAP_FLUSH_LOGGED_BLOCKS = 1, /* also persist the contents of every block
	                                      allocated by tips_heap_alloc_logged() */
};

/**
 * tips_heap_checkpoint() - make every recorded change permanent and start a new
 * interval: persist allocator metadata and slots, apply deferred frees, advance the
 * generation, empty all lane logs. Crash-safe at every point.
 */
TIPS_API int tips_heap_checkpoint(struct tips_heap *heap, unsigned flags);

/**
 * tips_heap_rollback() - undo the MLog: free every block allocated by
 * tips_heap_alloc_logged() since the last checkpoint and drop logged frees; then
 * checkpoint the remaining (slot) records. Used by recovery after a crash.
 */
TIPS_API int tips_heap_rollback(struct tips_heap *heap);

/** tips_heap_usable_size() - bytes of user data the block at @ptr can hold; 0 if @ptr
 * is not the start of an allocated block. */
TIPS_API size_t tips_heap_usable_size(const struct tips_heap *heap, const void *ptr);

/**
 * tips_heap_block_is_fresh() - true if @addr lies in a block allocated since the last
 * checkpoint (its contents need no undo log: they did not exist at that checkpoint).
 * @addr may point anywhere inside the block.
 */
TIPS_API int tips_heap_block_is_fresh(const struct tips_heap *heap, const void *addr);

/** tips_heap_generation() - the current checkpoint generation (starts at 1). */
TIPS_API uint64_t tips_heap_generation(const struct tips_heap *heap);

/** One allocated block, as the walk reports it. */
struct tips_heap_block {
	void *ptr;          /* user address */
	size_t size;        /* size that was requested */
	size_t usable;      /* usable size of the block */
	uint64_t alloc_gen; /* generation it was allocated in */
	int pending;        /* 1 if a log record of this interval refers to it */
};
typedef int (*tips_heap_walk_fn)(const struct tips_heap_block *block, void *arg);

/**
 * tips_heap_walk() - call @fn for every allocated block, in address order.
 * Stops early and returns @fn's value when it is non-zero. Not concurrent with writes.
 */
TIPS_API int tips_heap_walk(struct tips_heap *heap, tips_heap_walk_fn fn, void *arg);

/** What tips_heap_check() found. New fields are appended; the check fills only the
 * caller's sizeof (zeroing any newer tail). Embedded in struct tips_db_report, so a
 * field added here moves the fields after it there: that is a new layout of both
 * structs (an ABI change, a minor version while the major is 0). */
struct tips_heap_report {
	uint64_t chunks, chunks_free, chunks_run, chunks_extent;
	uint64_t blocks_allocated, bytes_allocated;
	uint64_t log_records;  /* records pending in the allocation logs */
	uint64_t errors;       /* inconsistencies found (the first in first_error) */
	char first_error[200]; /* the first inconsistency found, "" if none */
};

/** tips_heap_check_sized() - tips_heap_check() into the first @size bytes of @report
 * (NULL: no report). */
TIPS_API int tips_heap_check_sized(struct tips_heap *heap, struct tips_heap_report *report,
				   size_t size);
/**
 * tips_heap_check() - verify the heap's on-media consistency: chunk table, run bitmaps,
 * block headers, log records; what was found goes to *@report if it is not NULL.
 * Return: 0 if consistent, TIPS_ECORRUPT otherwise.
 */
static inline int tips_heap_check(struct tips_heap *heap, struct tips_heap_report *report)
{
	return tips_heap_check_sized(heap, report, sizeof(*report));
}

/** Allocator statistics (volatile, since open). */
struct tips_heap_stats {
	uint64_t allocs, frees, checkpoints, rollbacks, recovered_records;
	uint64_t bytes_in_use;      /* sum of usable sizes of allocated blocks */
	uint64_t bytes_total;       /* size of the chunk area */
};
/** tips_heap_stats_sized() - fill the first @size bytes of @out (a longer tail is zeroed).
 * New counters are appended to struct tips_heap_stats. */
TIPS_API void tips_heap_stats_sized(struct tips_heap *heap, struct tips_heap_stats *out,
				    size_t size);
/** tips_heap_stats() - the allocator's counters. */
static inline void tips_heap_stats(struct tips_heap *heap, struct tips_heap_stats *out)
{
	tips_heap_stats_sized(heap, out, sizeof(*out));
}

#ifdef __cplusplus
}
#endif
#endif /* TIPS_HEAP_H */
