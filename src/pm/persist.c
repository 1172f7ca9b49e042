/*
 * persist.c - pm_flush / pm_drain / pm_persist, their per-thread counters, and the
 * registry of mapped regions that tells the primitives each address's media.
 *
 * Flush instruction: chosen once at run time from CPUID (clwb, else clflushopt, else
 * clflush); TIPS_FLUSH=clflushopt|clflush in the environment forces a weaker one (for
 * testing those paths). Fence: sfence (clflush is ordered by it too, and so are the
 * streaming stores of pm_copy_flush, which it drains).
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
#include "util/version_internal.h"
#include "util/version_internal.h"

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

static enum flush_kind flush_kind; /* set by primitives_at_load() */

const char *tips_flush_instruction(void)
{
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
	bool retired; /* the thread is exiting: later counts go to the late totals */
};

static struct {
	pthread_mutex_t lock;
	pthread_once_t once;
	pthread_key_t key;
	struct thread_counters *threads;
	uint64_t retired_lines, retired_fences, retired_bytes;
	/* Counts of threads that persist again after their record was retired (from a
	 * later thread-exit destructor); several such threads may add at once. */
	_Atomic uint64_t late_lines, late_fences, late_bytes;
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
	tc->retired = true; /* never linked again: its storage goes with the thread */
	pthread_mutex_unlock(&counters.lock);
}

static void counters_init(void) { pthread_key_create(&counters.key, counters_retire); }

static struct thread_counters *my_counters_get(void)
{
	struct thread_counters *tc = &my_counters;
	if (__builtin_expect(!tc->linked && !tc->retired, 0)) {
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

static void count_flush(uint64_t lines, uint64_t bytes)
{
	struct thread_counters *tc = my_counters_get();
	if (__builtin_expect(tc->retired, 0)) {
		atomic_fetch_add_explicit(&counters.late_lines, lines, memory_order_relaxed);
		atomic_fetch_add_explicit(&counters.late_bytes, bytes, memory_order_relaxed);
		return;
	}
	counter_add(&tc->lines, lines);
	counter_add(&tc->bytes, bytes);
}

static void count_fence(void)
{
	struct thread_counters *tc = my_counters_get();
	if (__builtin_expect(tc->retired, 0))
		atomic_fetch_add_explicit(&counters.late_fences, 1, memory_order_relaxed);
	else
		counter_add(&tc->fences, 1);
}

static void counters_total(struct tips_pm_counters *out)
{
	pthread_mutex_lock(&counters.lock);
	out->lines_flushed = counters.retired_lines + atomic_load(&counters.late_lines);
	out->fences = counters.retired_fences + atomic_load(&counters.late_fences);
	out->bytes_persisted = counters.retired_bytes + atomic_load(&counters.late_bytes);
	for (struct thread_counters *tc = counters.threads; tc; tc = tc->next) {
		out->lines_flushed += atomic_load_explicit(&tc->lines, memory_order_relaxed);
		out->fences += atomic_load_explicit(&tc->fences, memory_order_relaxed);
		out->bytes_persisted += atomic_load_explicit(&tc->bytes, memory_order_relaxed);
	}
	pthread_mutex_unlock(&counters.lock);
}

void tips_pm_counters_total_sized(struct tips_pm_counters *out, size_t size)
{
	struct tips_pm_counters full;
	memset(&full, 0, sizeof(full));
	counters_total(&full);
	tips_struct_write(out, size, &full, sizeof(full));
}

static void counters_thread(struct tips_pm_counters *out)
{
	struct thread_counters *tc = &my_counters;
	out->lines_flushed = atomic_load_explicit(&tc->lines, memory_order_relaxed);
	out->fences = atomic_load_explicit(&tc->fences, memory_order_relaxed);
	out->bytes_persisted = atomic_load_explicit(&tc->bytes, memory_order_relaxed);
}

void pm_counters_to_background(const struct tips_pm_counters *since)
{
	struct thread_counters *tc = my_counters_get();
	struct tips_pm_counters now;
	counters_thread(&now);
	uint64_t lines = now.lines_flushed - since->lines_flushed;
	uint64_t fences = now.fences - since->fences;
	uint64_t bytes = now.bytes_persisted - since->bytes_persisted;
	/* Under the lock, so that counters_total() sees the sum unchanged. */
	pthread_mutex_lock(&counters.lock);
	atomic_fetch_sub_explicit(&tc->lines, lines, memory_order_relaxed);
	atomic_fetch_sub_explicit(&tc->fences, fences, memory_order_relaxed);
	atomic_fetch_sub_explicit(&tc->bytes, bytes, memory_order_relaxed);
	counters.retired_lines += lines;
	counters.retired_fences += fences;
	counters.retired_bytes += bytes;
	pthread_mutex_unlock(&counters.lock);
}

void tips_pm_counters_thread_sized(struct tips_pm_counters *out, size_t size)
{
	struct tips_pm_counters full;
	memset(&full, 0, sizeof(full));
	counters_thread(&full);
	tips_struct_write(out, size, &full, sizeof(full));
}

/* ---- region registry ------------------------------------------------------------ */

#define MAX_REGIONS 64

struct region_slot {
	uintptr_t start, end; /* end == 0: slot unused */
	int media;
	struct pm_sim *sim;
};

/*
 * Written under the write lock when pools open and close. The common path (only pmem
 * and shm pools open) reads just the two flags and never the table; the other paths
 * read the table under the read lock, so a closing pool's sim is not freed under them
 * and a slot is never seen half-written.
 */
static struct {
	pthread_rwlock_t lock;
	struct region_slot slot[MAX_REGIONS];
	_Atomic bool plain_only; /* no FILE or SIM region registered */
	_Atomic int sims;        /* SIM regions registered */
} regions = { .lock = PTHREAD_RWLOCK_INITIALIZER, .plain_only = true };

static bool media_is_plain(int media)
{
	return media == TIPS_MEDIA_PMEM || media == TIPS_MEDIA_SHM;
}

static void regions_recompute_locked(void)
{
	bool plain = true;
	int sims = 0;
	for (int i = 0; i < MAX_REGIONS; i++) {
		if (regions.slot[i].end == 0)
			continue;
		plain = plain && media_is_plain(regions.slot[i].media);
		sims += regions.slot[i].media == TIPS_MEDIA_SIM;
	}
	atomic_store(&regions.plain_only, plain);
	atomic_store(&regions.sims, sims);
}

int pm_region_register(const struct pm_region *r)
{
	pthread_rwlock_wrlock(&regions.lock);
	int i;
	for (i = 0; i < MAX_REGIONS; i++)
		if (regions.slot[i].end == 0)
			break;
	if (i == MAX_REGIONS) {
		pthread_rwlock_unlock(&regions.lock);
		return tips_set_error(TIPS_EBUSY, "more than %d pools open", MAX_REGIONS);
	}
	regions.slot[i] = (struct region_slot){ r->start, r->end, (int)r->media, r->sim };
	regions_recompute_locked();
	pthread_rwlock_unlock(&regions.lock);
	return 0;
}

void pm_region_unregister(uintptr_t start)
{
	pthread_rwlock_wrlock(&regions.lock);
	for (int i = 0; i < MAX_REGIONS; i++)
		if (regions.slot[i].end != 0 && regions.slot[i].start == start)
			regions.slot[i] = (struct region_slot){ 0, 0, 0, NULL };
	regions_recompute_locked();
	pthread_rwlock_unlock(&regions.lock);
}

/* The region holding @addr, else NULL and in *@next the start of the first region
 * above @addr (UINTPTR_MAX if none). Read lock held. */
static const struct region_slot *region_find(uintptr_t addr, uintptr_t *next)
{
	*next = UINTPTR_MAX;
	for (int i = 0; i < MAX_REGIONS; i++) {
		const struct region_slot *s = &regions.slot[i];
		if (s->end == 0)
			continue;
		if (addr >= s->start && addr < s->end)
			return s;
		if (s->start > addr && s->start < *next)
			*next = s->start;
	}
	return NULL;
}

/* ---- the primitives ------------------------------------------------------------- */

/* Flushes [first, end) piece by piece, each by the media of the region it lies in. */
static void flush_special(uintptr_t first, uintptr_t end)
{
	pthread_rwlock_rdlock(&regions.lock);
	while (first < end) {
		uintptr_t next;
		const struct region_slot *s = region_find(first, &next);
		uintptr_t stop = s ? (s->end < end ? s->end : end) : (next < end ? next : end);
		if (!s || media_is_plain(s->media)) {
			flush_lines(first, stop);
		} else if (s->media == TIPS_MEDIA_FILE) {
			uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
			uintptr_t p0 = first & ~(page - 1);
			if (msync((void *)p0, stop - p0, MS_SYNC) != 0)
				tips_invariant_failed(__FILE__, __LINE__,
						      "msync of a mapped pool failed");
		} else {
			pm_sim_event(s->sim);
			pm_sim_flush(s->sim, first, stop);
		}
		first = stop;
	}
	pthread_rwlock_unlock(&regions.lock);
}

/* The cache lines [*@first, *@end) that [addr, addr+len) touches. */
static inline void line_range(const void *addr, size_t len, uintptr_t *first, uintptr_t *end)
{
	*first = (uintptr_t)addr & ~(uintptr_t)(PM_CACHELINE - 1);
	*end = ((uintptr_t)addr + len + PM_CACHELINE - 1) & ~(uintptr_t)(PM_CACHELINE - 1);
}

void pm_flush(const void *addr, size_t len)
{
	if (len == 0)
		return;
	uintptr_t first, end;
	line_range(addr, len, &first, &end);
	count_flush((end - first) / PM_CACHELINE, len);
	if (__builtin_expect(atomic_load_explicit(&regions.plain_only, memory_order_relaxed), 1))
		flush_lines(first, end);
	else
		flush_special(first, end);
}

/* Streaming stores where they are safe and meaningful: x86-64 (SSE2's movnti), and not
 * in sanitizer builds, whose checkers do not see them. */
#if defined(__x86_64__) && !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
#include <immintrin.h>
#define PM_STREAMING 1
static void stream_copy(void *dst, const void *src, size_t len)
{
	long long *d = dst;
	const unsigned char *s = src;
	for (size_t i = 0; i < len / 8; i++) {
		long long w;
		memcpy(&w, s + 8 * i, 8);
		_mm_stream_si64(d + i, w);
	}
}
#else
#define PM_STREAMING 0
#endif

/*
 * How pm_copy_flush writes, chosen once at load like the flush instruction. Which way
 * is cheaper depends on the CPU, and no flag tells: a persisted 64-byte record costs
 * 98 ns streamed against 161 stored and clwb'd on the AMD EPYC this project first ran
 * on, but 198 against 144 on an Intel Xeon (Emerald Rapids) VM, where an 8-byte tail
 * rewritten in place costs 360 against 157 (tips-persistbench, docs/framework.md
 * "Ninth round" and "Tenth round"). So streaming is the default on AMD only;
 * TIPS_PM_COPY=streaming|stores in the environment forces either.
 */
static bool copy_streams_detect(void)
{
	unsigned a, b, c, d;
	char vendor[13] = "";
	if (__get_cpuid(0, &a, &b, &c, &d)) {
		memcpy(vendor, &b, 4);
		memcpy(vendor + 4, &d, 4);
		memcpy(vendor + 8, &c, 4);
	}
	bool streams = strcmp(vendor, "AuthenticAMD") == 0 || strcmp(vendor, "HygonGenuine") == 0;
	const char *forced = getenv("TIPS_PM_COPY");
	if (forced && strcmp(forced, "streaming") == 0)
		streams = true;
	else if (forced && strcmp(forced, "stores") == 0)
		streams = false;
	return streams && PM_STREAMING;
}

static bool copy_streams; /* set by primitives_at_load() */

/* The flush instruction and the copy way, chosen when the library is loaded, before
 * any call into it, so the hot path never checks. */
__attribute__((constructor)) static void primitives_at_load(void)
{
	flush_kind = flush_kind_detect();
	copy_streams = copy_streams_detect();
}

const char *pm_copy_way(void)
{
	return copy_streams ? "streaming" : "stores";
}

static void copy_then_flush(void *dst, const void *src, size_t len)
{
	memcpy(dst, src, len);
	pm_flush(dst, len);
}

void pm_copy_flush_streaming(void *dst, const void *src, size_t len)
{
	if (len == 0)
		return;
#if PM_STREAMING
	if (((uintptr_t)dst | len) % 8 == 0 &&
	    __builtin_expect(atomic_load_explicit(&regions.plain_only, memory_order_relaxed), 1)) {
		uintptr_t first, end;
		line_range(dst, len, &first, &end);
		count_flush((end - first) / PM_CACHELINE, len);
		stream_copy(dst, src, len); /* ordered and made durable by pm_drain's sfence */
		return;
	}
#endif
	copy_then_flush(dst, src, len);
}

void pm_copy_flush(void *dst, const void *src, size_t len)
{
	if (copy_streams)
		pm_copy_flush_streaming(dst, src, len);
	else
		copy_then_flush(dst, src, len);
}

void pm_drain(void)
{
	count_fence();
	store_fence();
	if (__builtin_expect(atomic_load_explicit(&regions.sims, memory_order_relaxed) == 0, 1))
		return;
	pthread_rwlock_rdlock(&regions.lock);
	for (int i = 0; i < MAX_REGIONS; i++) {
		const struct region_slot *s = &regions.slot[i];
		if (s->end != 0 && s->media == TIPS_MEDIA_SIM) {
			pm_sim_event(s->sim);
			pm_sim_drain(s->sim);
		}
	}
	pthread_rwlock_unlock(&regions.lock);
}

/* Public wrappers. */
void tips_flush(const void *addr, size_t len) { pm_flush(addr, len); }
void tips_drain(void) { pm_drain(); }
void tips_persist(const void *addr, size_t len) { pm_persist(addr, len); }
uint64_t tips_pm_persist_events(void) { return pm_sim_events_total(); }
