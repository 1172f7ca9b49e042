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

/* The library's read lock and unlock, called when the inline path below does not
 * apply (the thread's first section, or no membarrier on this kernel). */
void grace_read_enter_call(void);
void grace_read_exit_call(void);

/*
 * liburcu-bp's read-side protocol, as its header's inline read lock and unlock follow
 * it: the thread's counter takes the grace-period counter on the outermost entry and
 * goes up by one on a nested one, and down by one on exit; with sys_membarrier (the
 * grace period makes every thread fence) no fence. Written here rather than called
 * through urcu_bp_read_lock()/unlock() for where the compiler barriers go: only inside
 * the section's ends (nothing moves out of the section; code before and after may
 * move in). With the header's own versions, which also fence the compiler outside both
 * ends and test for membarrier between the unlock's load and store, a dram-hash
 * lookup at 8M records cost 225-253 ns against 178-188 with these (docs/framework.md,
 * "Ninth round"). The inline path is taken only with membarrier, else the library.
 */
static inline void grace_read_enter(void)
{
	struct urcu_bp_reader *r = URCU_TLS(urcu_bp_reader);
	if (__builtin_expect(!r || !urcu_bp_has_sys_membarrier, 0)) {
		grace_read_enter_call();
		return;
	}
	unsigned long ctr = CMM_LOAD_SHARED(r->ctr);
	CMM_STORE_SHARED(r->ctr, (ctr & URCU_BP_GP_CTR_NEST_MASK)
					 ? ctr + URCU_BP_GP_COUNT
					 : CMM_LOAD_SHARED(urcu_bp_gp.ctr));
	cmm_barrier(); /* the section's reads after the store */
}

static inline void grace_read_exit(void)
{
	cmm_barrier(); /* the section's reads before the store */
	struct urcu_bp_reader *r = URCU_TLS(urcu_bp_reader);
	if (__builtin_expect(!urcu_bp_has_sys_membarrier, 0)) {
		grace_read_exit_call();
		return;
	}
	CMM_STORE_SHARED(r->ctr, CMM_LOAD_SHARED(r->ctr) - URCU_BP_GP_COUNT);
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
