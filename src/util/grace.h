/*
 * grace.h - read sections and grace periods (RCU, liburcu-bp) shared by the framework
 * and the indexes: the one way in this project to free memory that a lock-free reader
 * may still be reading.
 *
 * Invariant: a block passed to grace_free() (or freed after grace_wait()) is released
 * only after every read section that was open when it was unlinked has ended. So a
 * reader that found a pointer inside grace_read_enter()/grace_read_exit() may follow it
 * until it exits, whatever writers unlink meanwhile.
 *
 * Read sections are cheap (no fence on x86 with liburcu-bp's memory-barrier flavour),
 * nest, and need no thread registration. Never wait for a grace period (grace_wait,
 * grace_free_barrier) inside a read section, nor while holding a lock that a reader
 * waits for inside one.
 */
#ifndef TIPS_UTIL_GRACE_H
#define TIPS_UTIL_GRACE_H

/*
 * The read section is inline (liburcu-bp's own inline read lock, which its header
 * allows under _LGPL_SOURCE): a call per enter and per exit, with the spills around
 * them, put enough instructions between two lookups' cache misses that the processor
 * stopped overlapping them (docs/indexes.md, "Read paths": 86 -> 66 CPU ns per
 * dram-clht lookup in a tight loop). Sanitizer builds keep the calls into grace.c:
 * ThreadSanitizer needs the hand-over annotation there, and UBSan's alignment check
 * stops on liburcu-bp's under-aligned per-thread record, so only grace.c is built
 * without that check.
 */
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define GRACE_READ_INLINE 0
#else
#define GRACE_READ_INLINE 1
#endif

#if GRACE_READ_INLINE
#ifndef _LGPL_SOURCE
#define _LGPL_SOURCE
#endif
#include <urcu-bp.h>

static inline void grace_read_enter(void)
{
	urcu_bp_read_lock();
}

static inline void grace_read_exit(void)
{
	urcu_bp_read_unlock();
}
#else
void grace_read_enter(void);
void grace_read_exit(void);
#endif

/* Waits until every read section open at the call has ended. */
void grace_wait(void);

/* free(@p) after a grace period, without waiting for one (batched; the frees run
 * on a reclaimer thread). NULL is ignored. */
void grace_free(void *p);

/* Hands the current batch over and waits until every grace_free() made before the call
 * has freed its block (close of an index, end of a test). */
void grace_free_barrier(void);

#endif /* TIPS_UTIL_GRACE_H */
