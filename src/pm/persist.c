/*
 * persist.c - pm_flush / pm_drain / pm_persist, their per-thread counters, and the
 * registry of mapped regions that tells the primitives each address's media.
 *
 * Flush instruction: chosen once at run time from CPUID (clwb, else clflushopt, else
 * clflush); TIPS_FLUSH=clflushopt|clflush in the environment forces a weaker one (for
 * testing those paths). Fence: sfence (clflush is ordered by it too).
 *
 * Counters: each thread owns a record of relaxed atomics that only it writes; records
 * are linked into a list so tips_pm_counters_total() can sum them, and a thread's counts
 * are folded into the retired totals when it exits, so the sum never goes backwards.
 *
 * Registry: a small fixed table of regions, written under a mutex when pools open and
 * close, read without locks (each field an atomic). `plain_only` is set while every
 * registered region uses CPU flushes, so the common path skips the lookup entirely.
 */
#define _GNU_SOURCE
#include "pm/pm.h"
#include "pm/sim.h"
#include "util/errors_internal.h"

#include <cpuid.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

/* ---- flush instruction ---------------------------------------------------------- */

enum flush_kind { FLUSH_CLWB, FLUSH_CLFLUSHOPT, FLUSH_CLFLUSH };

static enum flush_kind flush_kind_detect(void)
{
	unsigned a, b, c, d;
	enum flush_kind best = FLUSH_CLFLUSH;
	if (__get_cpuid_count(7, 0, &a, &b, &c, &d)) {
		if (b & (1u << 24))
			best = FLUSH_CLWB;
		else if (b & (1u << 23))
			best = FLUSH_CLFLUSHOPT;
	}
	const char *forced = getenv("TIPS_FLUSH");
	if (forced && strcmp(forced, "clflush") == 0)
		best = FLUSH_CLFLUSH;
	else if (forced && strcmp(forced, "clflushopt") == 0 && best == FLUSH_CLWB)
		best = FLUSH_CLFLUSHOPT;
	return best;
}

static enum flush_kind flush_kind;
static pthread_once_t flush_kind_once = PTHREAD_ONCE_INIT;
static void flush_kind_init(void) { flush_kind = flush_kind_detect(); }
/* Chosen at load time, so the hot path never checks. */
__attribute__((constructor)) static void flush_kind_at_load(void)
{
	pthread_once(&flush_kind_once, flush_kind_init);
}

const char *pm_flush_instruction(void)
{
	pthread_once(&flush_kind_once, flush_kind_init);
	static const char *const names[] = { "clwb", "clflushopt", "clflush" };
	return names[flush_kind];
}

static void flush_lines(uintptr_t first, uintptr_t end)
{
	switch (flush_kind) {
	case FLUSH_CLWB:
		for (uintptr_t p = first; p < end; p += PM_CACHELINE)
			__asm__ volatile("clwb %0" : "+m"(*(volatile char *)p));
		break;
	case FLUSH_CLFLUSHOPT:
		for (uintptr_t p = first; p < end; p += PM_CACHELINE)
			__asm__ volatile("clflushopt %0" : "+m"(*(volatile char *)p));
		break;
	case FLUSH_CLFLUSH:
		for (uintptr_t p = first; p < end; p += PM_CACHELINE)
			__asm__ volatile("clflush %0" : "+m"(*(volatile char *)p));
		break;
	}
}

static inline void store_fence(void)
{
	__asm__ volatile("sfence" ::: "memory");
}

/* ---- per-thread counters -------------------------------------------------------- */

struct thread_counters {
	_Atomic uint64_t lines, fences, bytes;
	struct thread_counters *next, **prevp;
	bool linked;
};

static struct {
	pthread_mutex_t lock;
	pthread_once_t once;
	pthread_key_t key;
	struct thread_counters *threads;
	uint64_t retired_lines, retired_fences, retired_bytes;
} counters = { .lock = PTHREAD_MUTEX_INITIALIZER, .once = PTHREAD_ONCE_INIT };

static _Thread_local struct thread_counters my_counters;

static void counters_retire(void *arg)
{
	struct thread_counters *tc = arg;
	pthread_mutex_lock(&counters.lock);
	counters.retired_lines += atomic_load_explicit(&tc->lines, memory_order_relaxed);
	counters.retired_fences += atomic_load_explicit(&tc->fences, memory_order_relaxed);
	counters.retired_bytes += atomic_load_explicit(&tc->bytes, memory_order_relaxed);
	*tc->prevp = tc->next;
	if (tc->next)
		tc->next->prevp = tc->prevp;
	tc->linked = false;
	pthread_mutex_unlock(&counters.lock);
}

static void counters_init(void) { pthread_key_create(&counters.key, counters_retire); }

static struct thread_counters *my_counters_get(void)
{
	struct thread_counters *tc = &my_counters;
	if (__builtin_expect(!tc->linked, 0)) {
		pthread_once(&counters.once, counters_init);
		pthread_mutex_lock(&counters.lock);
		tc->next = counters.threads;
		tc->prevp = &counters.threads;
		if (tc->next)
			tc->next->prevp = &tc->next;
		counters.threads = tc;
		tc->linked = true;
		pthread_mutex_unlock(&counters.lock);
		pthread_setspecific(counters.key, tc);
	}
	return tc;
}

/* Single writer: a relaxed load and store, no locked instruction on the hot path. */
static inline void counter_add(_Atomic uint64_t *c, uint64_t n)
{
	atomic_store_explicit(c, atomic_load_explicit(c, memory_order_relaxed) + n,
			      memory_order_relaxed);
}

void tips_pm_counters_total(struct tips_pm_counters *out)
{
	pthread_mutex_lock(&counters.lock);
	out->lines_flushed = counters.retired_lines;
	out->fences = counters.retired_fences;
	out->bytes_persisted = counters.retired_bytes;
	for (struct thread_counters *tc = counters.threads; tc; tc = tc->next) {
		out->lines_flushed += atomic_load_explicit(&tc->lines, memory_order_relaxed);
		out->fences += atomic_load_explicit(&tc->fences, memory_order_relaxed);
		out->bytes_persisted += atomic_load_explicit(&tc->bytes, memory_order_relaxed);
	}
	pthread_mutex_unlock(&counters.lock);
}

void tips_pm_counters_thread(struct tips_pm_counters *out)
{
	struct thread_counters *tc = &my_counters;
	out->lines_flushed = atomic_load_explicit(&tc->lines, memory_order_relaxed);
	out->fences = atomic_load_explicit(&tc->fences, memory_order_relaxed);
	out->bytes_persisted = atomic_load_explicit(&tc->bytes, memory_order_relaxed);
}

/* ---- region registry ------------------------------------------------------------ */

#define MAX_REGIONS 64

struct region_slot {
	_Atomic uintptr_t start, end; /* end == 0: slot unused */
	_Atomic int media;
	struct pm_sim *_Atomic sim;
};

static struct {
	pthread_mutex_t lock;
	struct region_slot slot[MAX_REGIONS];
	_Atomic int used;        /* slots [0, used) may be in use */
	_Atomic bool plain_only; /* no FILE or SIM region registered */
	_Atomic int sims;        /* SIM regions registered */
} regions = { .lock = PTHREAD_MUTEX_INITIALIZER, .plain_only = true };

static bool media_is_plain(int media)
{
	return media == TIPS_MEDIA_PMEM || media == TIPS_MEDIA_SHM;
}

static void regions_recompute_locked(void)
{
	bool plain = true;
	int sims = 0;
	for (int i = 0; i < atomic_load(&regions.used); i++) {
		if (atomic_load(&regions.slot[i].end) == 0)
			continue;
		int media = atomic_load(&regions.slot[i].media);
		plain = plain && media_is_plain(media);
		sims += media == TIPS_MEDIA_SIM;
	}
	atomic_store(&regions.plain_only, plain);
	atomic_store(&regions.sims, sims);
}

int pm_region_register(const struct pm_region *r)
{
	pthread_once(&flush_kind_once, flush_kind_init);
	pthread_mutex_lock(&regions.lock);
	int i;
	for (i = 0; i < MAX_REGIONS; i++)
		if (atomic_load(&regions.slot[i].end) == 0)
			break;
	if (i == MAX_REGIONS) {
		pthread_mutex_unlock(&regions.lock);
		return tips_set_error(TIPS_EBUSY, "more than %d pools open", MAX_REGIONS);
	}
	struct region_slot *s = &regions.slot[i];
	atomic_store(&s->start, r->start);
	atomic_store(&s->media, (int)r->media);
	atomic_store(&s->sim, r->sim);
	atomic_store(&s->end, r->end);
	if (i >= atomic_load(&regions.used))
		atomic_store(&regions.used, i + 1);
	regions_recompute_locked();
	pthread_mutex_unlock(&regions.lock);
	return 0;
}

void pm_region_unregister(uintptr_t start)
{
	pthread_mutex_lock(&regions.lock);
	for (int i = 0; i < atomic_load(&regions.used); i++) {
		struct region_slot *s = &regions.slot[i];
		if (atomic_load(&s->end) != 0 && atomic_load(&s->start) == start) {
			atomic_store(&s->end, 0);
			atomic_store(&s->sim, NULL);
		}
	}
	regions_recompute_locked();
	pthread_mutex_unlock(&regions.lock);
}

static struct region_slot *region_find(uintptr_t addr)
{
	int used = atomic_load_explicit(&regions.used, memory_order_acquire);
	for (int i = 0; i < used; i++) {
		struct region_slot *s = &regions.slot[i];
		uintptr_t end = atomic_load_explicit(&s->end, memory_order_acquire);
		if (addr < end && addr >= atomic_load_explicit(&s->start, memory_order_relaxed))
			return s;
	}
	return NULL;
}

/* ---- the primitives ------------------------------------------------------------- */

static void flush_special(uintptr_t first, uintptr_t end)
{
	struct region_slot *s = region_find(first);
	int media = s ? atomic_load_explicit(&s->media, memory_order_relaxed) : TIPS_MEDIA_SHM;
	if (media == TIPS_MEDIA_FILE) {
		uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
		uintptr_t p0 = first & ~(page - 1);
		if (msync((void *)p0, end - p0, MS_SYNC) != 0)
			tips_invariant_failed(__FILE__, __LINE__, "msync of a mapped pool failed");
	} else if (media == TIPS_MEDIA_SIM) {
		struct pm_sim *sim = atomic_load_explicit(&s->sim, memory_order_relaxed);
		pm_sim_event(sim);
		pm_sim_flush(sim, first, end);
	} else {
		flush_lines(first, end);
	}
}

void pm_flush(const void *addr, size_t len)
{
	if (len == 0)
		return;
	uintptr_t first = (uintptr_t)addr & ~(uintptr_t)(PM_CACHELINE - 1);
	uintptr_t end = ((uintptr_t)addr + len + PM_CACHELINE - 1) &
			~(uintptr_t)(PM_CACHELINE - 1);
	struct thread_counters *tc = my_counters_get();
	counter_add(&tc->lines, (end - first) / PM_CACHELINE);
	counter_add(&tc->bytes, len);
	if (__builtin_expect(atomic_load_explicit(&regions.plain_only, memory_order_relaxed), 1))
		flush_lines(first, end);
	else
		flush_special(first, end);
}

void pm_drain(void)
{
	struct thread_counters *tc = my_counters_get();
	counter_add(&tc->fences, 1);
	store_fence();
	if (__builtin_expect(atomic_load_explicit(&regions.sims, memory_order_relaxed) == 0, 1))
		return;
	int used = atomic_load_explicit(&regions.used, memory_order_acquire);
	for (int i = 0; i < used; i++) {
		struct region_slot *s = &regions.slot[i];
		struct pm_sim *sim = atomic_load_explicit(&s->sim, memory_order_acquire);
		if (sim && atomic_load_explicit(&s->end, memory_order_acquire) != 0) {
			pm_sim_event(sim);
			pm_sim_drain(sim);
		}
	}
}

/* Public wrappers. */
void tips_flush(const void *addr, size_t len) { pm_flush(addr, len); }
void tips_drain(void) { pm_drain(); }
void tips_persist(const void *addr, size_t len) { pm_persist(addr, len); }
uint64_t tips_pm_persist_events(void) { return pm_sim_events_total(); }
