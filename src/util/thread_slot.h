/*
 * thread_slot.h - a small, dense, reusable number for each live thread.
 *
 * The allocator's lanes, and later the framework's per-thread logs, are indexed by it.
 * Invariant: no two live threads hold the same slot; a thread's slot is given back when
 * it exits and handed out again (lowest free first), so a harness that starts 2T-1
 * threads over its life, T at a time, uses slots 0..T-1 (plus a few in transit).
 */
#ifndef TIPS_UTIL_THREAD_SLOT_H
#define TIPS_UTIL_THREAD_SLOT_H

/* The calling thread's slot (assigned on first call). Never fails: slots beyond
 * THREAD_SLOT_MAX wrap and are then shared, which callers must tolerate (they lock). */
unsigned thread_slot_get(void);

#define THREAD_SLOT_MAX 1024u

#endif
