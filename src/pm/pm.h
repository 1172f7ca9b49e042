/*
 * pm.h - persistence primitives of libtips, and the registry of mapped pool regions.
 *
 * Rule of the project: only src/pm/ issues cache-line flushes, fences or msync. Every
 * other part persists through pm_flush/pm_drain/pm_persist, which pick what to do from
 * the media of the region the address lies in (see tips/pool.h for the four media) and
 * count per thread what they did.
 */
#ifndef TIPS_PM_PM_H
#define TIPS_PM_PM_H

#include <stddef.h>
#include <stdint.h>
#include <tips/pool.h>

#define PM_CACHELINE 64u

/* Start writing back [addr, addr+len): flush instruction, msync, or (sim) mark pending. */
void pm_flush(const void *addr, size_t len);
/*
 * memcpy(dst, src, len) then pm_flush(dst, len), in one, for a log record written once
 * and read back only by recovery or another thread. Written the way that is cheaper on
 * this CPU (pm_copy_way(): "streaming" on AMD, "stores" elsewhere; TIPS_PM_COPY=
 * streaming|stores forces one; persist.c says why). Counted as a flush either way.
 */
void pm_copy_flush(void *dst, const void *src, size_t len);
/* pm_copy_flush by streaming stores (movnti), which neither read the destination's
 * lines nor leave them in cache, wherever they are safe: @dst and @len multiples of 8,
 * media that persist by CPU flushes, x86-64, not a sanitizer build; elsewhere memcpy and
 * pm_flush. The fence of pm_drain orders and drains them. */
void pm_copy_flush_streaming(void *dst, const void *src, size_t len);
/* "streaming" or "stores": how pm_copy_flush writes in this process. */
const char *pm_copy_way(void);
/* Fence: everything this thread flushed is persistent when it returns. */
void pm_drain(void);
/* pm_flush then pm_drain. */
/*
 * Moves what this thread flushed and fenced since @since (its own counters, read with
 * tips_pm_counters_thread()) out of its per-thread counters into the process totals,
 * which do not change. For a thread that does background work on the side (a ListDB
 * writer that merges while it would stall), so that its own counters, which measure
 * the critical path of its operations, count only those.
 */
void pm_counters_to_background(const struct tips_pm_counters *since);

static inline void pm_persist(const void *addr, size_t len)
{
	pm_flush(addr, len);
	pm_drain();
}

struct pm_sim;

/* A mapped pool as the primitives see it. */
struct pm_region {
	uintptr_t start, end;
	enum tips_media media;
	struct pm_sim *sim; /* SIM only */
};

/* Registers a region so that pm_flush knows its media; 0 or TIPS_EBUSY (table full). */
int pm_region_register(const struct pm_region *region);
void pm_region_unregister(uintptr_t start);


#endif
