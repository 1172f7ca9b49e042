/*
 * tips/pool.h - a persistent memory pool mapped at a fixed address.
 *
 * A pool is one file: a header (magic, layout version, UUID, size, mapping address,
 * checksum; a clean-shutdown flag on its own cache line), a root area for the user's
 * root object, a log area that the TIPS framework divides into its logs, and a heap
 * (tips/heap.h). The pool is mapped at the address recorded in its header on every
 * open, so plain pointers stored inside it stay valid across restarts. If that address
 * range is taken in this process, opening fails with TIPS_EADDRINUSE; it never maps
 * the pool anywhere else.
 *
 * Media. The persistence domain is chosen per file when it is opened:
 *   TIPS_MEDIA_PMEM  a DAX file (MAP_SYNC accepted): cache-line write-back + sfence;
 *   TIPS_MEDIA_SHM   a tmpfs file: the same instructions; emulates PM and survives
 *                    process crashes, not power loss;
 *   TIPS_MEDIA_FILE  any other file system: msync;
 *   TIPS_MEDIA_SIM   simulated power failure, for tests: stores go to a private working
 *                    copy and only lines flushed and then fenced reach the file.
 * All persistence goes through tips_flush/tips_drain/tips_persist (src/pm/); they count
 * per thread the cache lines flushed, the fences and the bytes persisted.
 *
 * Locking. A pool is open in at most one place at a time: an exclusive file lock is
 * held while it is open, and a second open (in any process) fails with TIPS_ELOCKED.
 *
 * Size. A pool that is not open can be made larger with tips_pool_grow() (the heap gets
 * the new room); pools never shrink.
 */
#ifndef TIPS_POOL_H
#define TIPS_POOL_H

#include <stddef.h>
#include <stdint.h>
#include <tips/errors.h>

#ifdef __cplusplus
extern "C" {
#endif

struct tips_pool;
struct tips_heap;

enum tips_media {
	TIPS_MEDIA_AUTO = 0, /* detect from the file (only valid as a request) */
	TIPS_MEDIA_PMEM = 1,
	TIPS_MEDIA_SHM = 2,
	TIPS_MEDIA_FILE = 3,
	TIPS_MEDIA_SIM = 4,
};

/* Smallest pool, and the granularity of pool sizes. */
#define TIPS_POOL_MIN_SIZE (8ull << 20)
#define TIPS_POOL_ALIGN (2ull << 20)

/*
 * Options for create and open. Initialise with tips_pool_options_init(); the struct
 * carries its own size so that it can grow without breaking callers: the library reads
 * min(struct_size, its own sizeof) bytes and defaults the rest, and accepts a larger
 * (newer) struct whose unknown tail is zero (see tips/version.h). New fields are only
 * ever appended, and a zero in them means what the library did before they existed.
 */
struct tips_pool_options {
	size_t struct_size;    /* sizeof(struct tips_pool_options), set by _init */
	uint64_t size;         /* create: pool size in bytes, multiple of TIPS_POOL_ALIGN */
	uint64_t root_size;    /* create: root area size (default 1 MiB) */
	uint64_t log_size;     /* create: log area size (default: 1/8 of the pool, 2 MiB
	                          aligned); may be 0 */
	uint64_t map_addr;     /* create: fixed mapping address, 0 = choose one that is
	                          free in a region reserved for pools */
	enum tips_media media; /* AUTO, or SIM to open/create with simulated power failure
	                          (PMEM, SHM, FILE are accepted and detected as with AUTO);
	                          any other value is TIPS_EINVAL */
	/* Simulated power failure (media SIM only). */
	uint64_t sim_crash_at;     /* power fails at this persist event (1-based), 0 = never */
	double sim_evict;          /* share of dirty unflushed lines written back at failure */
	uint64_t sim_seed;         /* seed for eviction and for flushed-but-unfenced lines */
	int sim_crash_exit_code;   /* exit code of the process at an armed failure (default 86) */
	/* Open/create: 1 faults every page of the pool in before the call returns, as
	 * libpmemobj's prefault.at_open does (default 0: each page on first access). On a
	 * tmpfs pool the kernel then zeroes the pages at open instead of at the first
	 * store to each, a cost that PM mapped with DAX does not have; on a file pool it
	 * reads the file in. The open takes as much longer as the kernel needs to
	 * allocate and zero (or read) the whole pool.
	 * Ignored with media SIM. */
	int prefault;
};

/** tips_pool_options_init_sized() - fill the first @size bytes of @opts with the
 * documented defaults and set its struct_size to @size; nothing past @size is written. */
TIPS_API void tips_pool_options_init_sized(struct tips_pool_options *opts, size_t size);
/** tips_pool_options_init() - fill @opts with the documented defaults (the size is the
 * caller's sizeof, so an older program's smaller struct is never overrun). */
static inline void tips_pool_options_init(struct tips_pool_options *opts)
{
	tips_pool_options_init_sized(opts, sizeof(*opts));
}

/**
 * tips_pool_create() - create a new pool file and open it.
 * @path: file to create; must not exist; its directory must exist.
 * @opts: size and layout; NULL is TIPS_EINVAL (a size is required).
 * @out:  the open pool on success, untouched on failure.
 *
 * The file is built under a temporary name in the same directory, space is reserved
 * with posix_fallocate, and only a complete, persisted pool is renamed to @path, so a
 * failure or crash never leaves a half-made pool at @path.
 * Return: 0, TIPS_EEXIST, TIPS_ENODIR, TIPS_ENOSPC, TIPS_ESIZE, TIPS_EADDRINUSE,
 * TIPS_EPERM, TIPS_EIO, TIPS_EINVAL.
 */
TIPS_API int tips_pool_create(const char *path, const struct tips_pool_options *opts,
			      struct tips_pool **out);

/**
 * tips_pool_open() - open an existing pool at its fixed address.
 * @opts: NULL for defaults; media SIM forces simulated power failure.
 *
 * If the previous user did not close the pool cleanly, the heap's allocation log is
 * recovered first (see tips/heap.h). Return: 0, TIPS_ENOENT, TIPS_ENOTPOOL,
 * TIPS_EVERSION, TIPS_ECORRUPT, TIPS_ETRUNCATED, TIPS_ELOCKED, TIPS_EADDRINUSE,
 * TIPS_EPERM, TIPS_EIO.
 */
TIPS_API int tips_pool_open(const char *path, const struct tips_pool_options *opts,
			    struct tips_pool **out);

/**
 * tips_pool_close() - checkpoint the heap, mark the pool clean, unmap, unlock.
 * Sets *@pool to NULL. No other thread may use the pool during or after the call.
 */
TIPS_API int tips_pool_close(struct tips_pool **pool);

/**
 * tips_pool_grow() - make a pool that is not open larger, in place.
 * @path:     the pool file.
 * @new_size: the new size in bytes: larger than the current size, a multiple of
 *            TIPS_POOL_ALIGN.
 *
 * The file is extended (its blocks reserved with posix_fallocate), and the heap grows
 * by the new room: its new chunks are free and allocatable after the next open. The
 * root and log areas, the heap's allocation logs, the clean-shutdown flag and every
 * byte of data stay as they were, so a pool left unclean by a crash can be grown too:
 * the next open (or tips_open) recovers it as usual. The mapping address does not
 * change; the pool then covers [map address, map address + @new_size), so two pools
 * that a program opens together must not come to overlap (pools created with an
 * automatic address are 1 GiB-aligned at random in a 32 TiB region).
 *
 * Crash safety: a crash or power failure at any point leaves either the old pool or
 * the grown one, never a mix: the new geometry is first written to a checksummed
 * intent record (the commit point) and then applied; an open (or the next grow) that
 * finds the record applies it again. A pool whose heap was made by an older build
 * can grow only as far as its chunk table has room (TIPS_ESIZE names the limit); pools
 * made now can grow to 64 times their heap.
 *
 * Thread safety: takes the pool's exclusive lock as tips_pool_open() does, so it fails
 * with TIPS_ELOCKED while the pool is open anywhere (another process or handle).
 * Return: 0, TIPS_EINVAL, TIPS_ENOENT, TIPS_ENOTPOOL, TIPS_EVERSION, TIPS_ECORRUPT,
 * TIPS_ETRUNCATED, TIPS_ELOCKED, TIPS_ESIZE (not larger, not aligned, or beyond what
 * the address space or the heap's chunk table allows), TIPS_ENOSPC (the file system
 * has no room), TIPS_EADDRINUSE (the grown range is mapped in this process),
 * TIPS_EPERM, TIPS_EIO.
 */
TIPS_API int tips_pool_grow(const char *path, uint64_t new_size);

/** Facts about a pool, as tips_pool_info() and tips_pool_stat() report them. New fields
 * are appended; both calls fill only the caller's sizeof (zeroing any newer tail). */
struct tips_pool_info {
	uint32_t layout_version;
	uint8_t uuid[16];
	uint64_t size;
	uint64_t map_addr;
	uint64_t root_offset, root_size;
	uint64_t log_offset, log_size;
	uint64_t heap_offset, heap_size;
	int clean;                 /* clean-shutdown flag as found on disk */
	enum tips_media media;     /* media that is (or would be) used */
	char media_reason[160];    /* why that media was chosen */
};

/**
 * tips_pool_stat() - read a pool's header without opening it.
 * Takes no lock and never maps the pool at its address, so it also works on a pool
 * that another process has open.
 * Return: the same codes as tips_pool_open(), except TIPS_EADDRINUSE.
 */
TIPS_API int tips_pool_stat_sized(const char *path, struct tips_pool_info *info, size_t size);
static inline int tips_pool_stat(const char *path, struct tips_pool_info *info)
{
	return tips_pool_stat_sized(path, info, sizeof(*info));
}

/** tips_pool_info() - facts about an open pool. */
TIPS_API void tips_pool_info_sized(const struct tips_pool *pool, struct tips_pool_info *info,
				   size_t size);
static inline void tips_pool_info(const struct tips_pool *pool, struct tips_pool_info *info)
{
	tips_pool_info_sized(pool, info, sizeof(*info));
}

/** tips_media_name() - "pmem", "shm", "file", "sim" or "auto". */
TIPS_API const char *tips_media_name(enum tips_media media);

/** tips_pool_root() - the root area (zeroed at create); its size in *@size if non-NULL. */
TIPS_API void *tips_pool_root(const struct tips_pool *pool, size_t *size);

/** tips_pool_log_area() - the log area reserved for the framework's logs. */
TIPS_API void *tips_pool_log_area(const struct tips_pool *pool, size_t *size);

/** tips_pool_heap() - the pool's persistent heap. */
TIPS_API struct tips_heap *tips_pool_heap(const struct tips_pool *pool);

/** tips_pool_contains() - true if [@addr, @addr+@len) lies inside the pool mapping. */
TIPS_API int tips_pool_contains(const struct tips_pool *pool, const void *addr, size_t len);

/*
 * Persistence. The range must be mapped memory (a flush instruction faults on an
 * unmapped address, as with any PM library); a range may span several pools and
 * ordinary memory, and each part is persisted by its own media (memory outside every
 * pool gets the CPU flush instruction). Thread-safe.
 */
/** tips_flush() - start writing back the cache lines of [@addr, @addr+@len). */
TIPS_API void tips_flush(const void *addr, size_t len);
/** tips_drain() - wait until every line this thread flushed is persistent (a fence). */
TIPS_API void tips_drain(void);
/** tips_persist() - tips_flush() then tips_drain(). */
TIPS_API void tips_persist(const void *addr, size_t len);

/** Persistence counters; sums over all threads, past and present. New counters are
 * appended; the calls below fill only the caller's sizeof (zeroing any newer tail). */
struct tips_pm_counters {
	uint64_t lines_flushed;   /* cache lines passed to flush */
	uint64_t fences;          /* drains */
	uint64_t bytes_persisted; /* bytes passed to flush */
};
TIPS_API void tips_pm_counters_total_sized(struct tips_pm_counters *out, size_t size);
TIPS_API void tips_pm_counters_thread_sized(struct tips_pm_counters *out, size_t size);
/** tips_pm_counters_total() - sum of every thread's counters since the process began. */
static inline void tips_pm_counters_total(struct tips_pm_counters *out)
{
	tips_pm_counters_total_sized(out, sizeof(*out));
}
/** tips_pm_counters_thread() - the calling thread's own counters. */
static inline void tips_pm_counters_thread(struct tips_pm_counters *out)
{
	tips_pm_counters_thread_sized(out, sizeof(*out));
}

/**
 * tips_pool_sim_power_fail() - simulate a power failure of a SIM pool, then release it.
 * @evict: share (0..1) of dirty, never-flushed cache lines written back first (a CPU
 *         may evict any line at any time); lines flushed but not yet fenced survive
 *         with probability 1/2. Both draws come from @seed, so a seed fixes the state.
 *
 * Afterwards the file holds exactly what a machine would find after losing power;
 * *@pool is released without a clean shutdown and set to NULL.
 * Return: 0, or TIPS_EINVAL if the pool is not on SIM media.
 */
TIPS_API int tips_pool_sim_power_fail(struct tips_pool **pool, double evict, uint64_t seed);

/** tips_flush_instruction() - "clwb", "clflushopt" or "clflush": what pmem and shm pools
 * are flushed with on this CPU (TIPS_FLUSH=clflushopt|clflush forces a weaker one). */
TIPS_API const char *tips_flush_instruction(void);

/** tips_pm_persist_events() - persist events (flushes and drains) seen by SIM pools so far. */
TIPS_API uint64_t tips_pm_persist_events(void);

#ifdef __cplusplus
}
#endif
#endif /* TIPS_POOL_H */
