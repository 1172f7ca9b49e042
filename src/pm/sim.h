/*
 * sim.h - simulated power failure (media SIM).
 *
 * The pool is mapped twice: a MAP_PRIVATE working view at the pool's fixed address,
 * where the program's stores land, and a MAP_SHARED media view of the same file. Only a
 * cache line passed to pm_flush and then to pm_drain (by the same thread) is copied from
 * the working view to the media view, as it was when flushed: a flush is not ordered
 * with later stores to its line (clwb, clflushopt), so those need a flush of their own. A power failure writes back a random share of the
 * lines that differ between the views (dirty lines a CPU may have evicted), each pending
 * flushed-but-unfenced line with probability 1/2, and then drops the working view.
 * Invariant: the file never holds a line that the program did not flush, fence or
 * (in a power failure) have evicted.
 */
#ifndef TIPS_PM_SIM_H
#define TIPS_PM_SIM_H

#include <stddef.h>
#include <stdint.h>

struct pm_sim;

struct pm_sim *pm_sim_new(void *working, void *media, size_t size, uint64_t crash_at,
			  double evict, uint64_t seed, int exit_code);
void pm_sim_delete(struct pm_sim *sim);

/* Called by pm_flush for lines of a SIM region: remember them as pending. */
void pm_sim_flush(struct pm_sim *sim, uintptr_t line_start, uintptr_t line_end);
/* Called by pm_drain: copy this thread's pending lines to the media view. */
void pm_sim_drain(struct pm_sim *sim);
/* Counts one persist event; fails the power (and exits) if it is the armed one. */
void pm_sim_event(struct pm_sim *sim);
/* Power failure: write back evicted and some pending lines; the views stay mapped. */
void pm_sim_power_fail(struct pm_sim *sim, double evict, uint64_t seed);

uint64_t pm_sim_events_total(void);

#endif
