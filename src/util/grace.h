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

void grace_read_enter(void);
void grace_read_exit(void);

/* Waits until every read section open at the call has ended. */
void grace_wait(void);

/* free(@p) after a grace period, without blocking the caller (batched; the frees run
 * on a reclaimer thread). NULL is ignored. */
void grace_free(void *p);

/* Hands the current batch over and waits until every grace_free() made before the call
 * has freed its block (close of an index, end of a test). */
void grace_free_barrier(void);

#endif /* TIPS_UTIL_GRACE_H */
