/*
 * tips/tips.h - the TIPS framework, as an application uses it.
 *
 * libtips turns a volatile in-memory index into a crash-consistent, durably
 * linearizable one on persistent memory (the TIPS design, USENIX ATC'21). This header
 * is the application's side of it: pick an index (tips_index_find), open a database,
 * read and write keys, commit batches, read the counters and check a pool. It includes
 * what those calls take: the error codes (tips/errors.h), the version (tips/version.h),
 * pools and the persistence primitives (tips/pool.h), the allocator (tips/heap.h),
 * write batches (tips/batch.h) and the key limits and callbacks (tips/base.h).
 *
 * Writing an index is the other side, tips/plugin.h; ListDB, the second store, is
 * tips/listdb.h; <libtips.h> includes them all. The design: docs/framework.md.
 */
#ifndef TIPS_TIPS_H
#define TIPS_TIPS_H

#include <tips/base.h>
#include <tips/batch.h>
#include <tips/errors.h>
#include <tips/heap.h>
#include <tips/pool.h>
#include <tips/version.h>

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ==== Indexes ======================================================================== */

/* An index's ops table: what tips_index_find() returns and tips_open() takes. Its
 * members are the plug-in API (tips/plugin.h); an application only passes it on. */
struct tips_index_ops;

/** tips_index_find() - the built-in index named @name ("tips-hash", "dram-hash"...),
 * or NULL. */
TIPS_API const struct tips_index_ops *tips_index_find(const char *name);

/** tips_index_names() - NULL-terminated list of the built-in index names. */
TIPS_API const char *const *tips_index_names(void);

/* ==== The facade: what an application calls ========================================= */

struct tips_db;

/* Flags of struct tips_config. */
#define TIPS_CREATE 1u /* create the pool (and the index) if the file does not exist */
#define TIPS_VERIFY 2u /* before recovery replays anything, walk the whole index and check
                          every pointer and node (the check of ops->walk): a damaged pool
                          fails with TIPS_ECORRUPT instead of being followed. Costs a pass
                          over the index; `tips pool check` opens with it. */

/*
 * Configuration of tips_open(). Initialise with tips_config_init(); the struct carries
 * its own size so it can grow: tips_open() reads min(struct_size, its own sizeof)
 * bytes and defaults the rest, and accepts a larger (newer) struct whose unknown tail
 * is zero (tips/version.h). Zero fields take the documented defaults.
 */
struct tips_config {
	size_t struct_size;       /* set by tips_config_init() */
	unsigned flags;           /* TIPS_CREATE, TIPS_VERIFY */
	uint64_t pool_size;       /* create: pool size (default 1 GiB) */
	uint64_t expected_keys;   /* sizing hint for the cache and the index (default 1M) */
	unsigned cache_percent;   /* DRAM cache entries, % of expected_keys (default 25) */
	unsigned chain_bound;     /* DRAM cache chain length that triggers gc (default 5) */
	uint64_t olog_size;       /* bytes of OLog per writer thread (default 32 MiB,
	                             at most 1/8 of the log area) */
	uint64_t ulog_size;       /* bytes of ULog (default 32 MiB, at most 1/4 of the
	                             log area) */
	unsigned workers_low;     /* W_low: fewest replay workers (default 0) */
	unsigned workers_up;      /* W_up: most replay workers (default: half the online
	                             cores, at least 1) */
	const struct tips_pool_options *pool; /* media/sim options, NULL for defaults */
};

/** tips_config_init_sized() - fill the first @size bytes of @cfg with the defaults and
 * set its struct_size to @size; nothing past @size is written. */
TIPS_API void tips_config_init_sized(struct tips_config *cfg, size_t size);
/** tips_config_init() - fill @cfg with the defaults (sized by the caller's sizeof). */
static inline void tips_config_init(struct tips_config *cfg)
{
	tips_config_init_sized(cfg, sizeof(*cfg));
}

/**
 * tips_open() - open (or create, with TIPS_CREATE) the pool at @path holding an index
 * made by @ops, and recover it if it was not closed cleanly.
 * Every word read from the pool is range-checked or checksummed before it is followed
 * (headers, the index root, OLog heads, tails and records, ULog records); with
 * TIPS_VERIFY the index's pointers and nodes are checked too (ops->walk). Without it,
 * a damaged index may still be followed: do not use a pool that `tips pool check`
 * rejects.
 * Return: 0; the pool's codes (tips_pool_open()); TIPS_EMISMATCH if the pool holds
 * another index; TIPS_ECORRUPT (a damaged header, log or index; tips_errormsg() says
 * where and what was expected); TIPS_ENOMEM; TIPS_ENOSPC if recovery cannot replay
 * the logged writes for lack of heap room (nothing is lost: grow the pool with
 * tips_pool_grow() or `tips pool grow`, then open it again).
 */
TIPS_API int tips_open(const char *path, const struct tips_config *cfg,
		       const struct tips_index_ops *ops, struct tips_db **db);

/**
 * tips_close() - apply every logged operation to the index, make it durable, mark the
 * pool clean and close it; reopening then replays nothing. No other thread may use
 * @db during or after the call. Sets *@db to NULL, also on failure.
 * Return: 0; TIPS_ENOSPC if some logged writes could not be applied because the heap
 * is full: they stay in the OLog and the next tips_open replays them (it returns
 * TIPS_ENOSPC too while the heap is still too small: tips_pool_grow() the pool).
 */
TIPS_API int tips_close(struct tips_db **db);

/*
 * Writes. The verbs mean the same in TIPS, ListDB and write batches (the table in
 * README.md, "One vocabulary"): put = insert or overwrite; insert = only if absent;
 * update = only if present; remove = delete, only if present. Each is durable when it
 * returns 0 (one fence on PM) and visible to every later get. Any thread may call them at
 * any time, without registering.
 * Return: 0; TIPS_EKEYEXISTS (insert of a present key); TIPS_ENOTFOUND (update or
 * remove of an absent key); TIPS_ETOOBIG (key or value too long); TIPS_EINVAL;
 * TIPS_ENOSPC: the pool's heap cannot promise replay the room to apply the write (see
 * "Full pools" in docs/framework.md): nothing was written; reads, and removes, which
 * make room, still work; TIPS_ENOMEM: out of DRAM.
 */
TIPS_API int tips_insert(struct tips_db *db, const void *key, size_t klen, const void *val,
			 size_t vlen);
TIPS_API int tips_update(struct tips_db *db, const void *key, size_t klen, const void *val,
			 size_t vlen);
TIPS_API int tips_put(struct tips_db *db, const void *key, size_t klen, const void *val,
		      size_t vlen);
TIPS_API int tips_remove(struct tips_db *db, const void *key, size_t klen);

/**
 * tips_batch_commit() - apply every operation of @b (tips/batch.h) as one atomic,
 * durable write. Any thread may call it. The batch's keys are locked (in a fixed
 * order) while its conditions are judged and its records are logged; each key's net
 * effect is one ordinary OLog record, and all of them are made durable by one OLog tail
 * update: two fences for the whole batch. Recovery replays the batch whole or not at
 * all, because a record counts only below the tail. Readers see each key switch
 * atomically (see tips/batch.h for what a reader of several keys may observe).
 * Return: 0; the error of a failed add (TIPS_EINVAL, TIPS_ETOOBIG, TIPS_ENOMEM);
 * TIPS_EKEYEXISTS / TIPS_ENOTFOUND (a failed condition: tips_batch_failed_op() names
 * it); TIPS_ETOOBIG (more than tips_batch_limit() allows); TIPS_ENOSPC, TIPS_ENOMEM as
 * for single writes. On any error nothing was applied.
 */
TIPS_API int tips_batch_commit(struct tips_db *db, struct tips_batch *b);

/**
 * tips_batch_limit() - the most distinct keys (*@max_ops) and logged bytes (*@max_bytes:
 * tips_batch_bytes() plus 64 bytes of record header per key, rounded up to 64) that one
 * tips_batch_commit() on @db accepts. They come from the OLog and the DRAM cache sizes
 * chosen at open (a batch must fit in one thread's OLog beside the room kept for
 * deletes, and in a share of the cache). Either pointer may be NULL.
 */
TIPS_API void tips_batch_limit(struct tips_db *db, size_t *max_ops, size_t *max_bytes);

/**
 * tips_get() - copy the value of @key into @val (at most @cap bytes); its full
 * length goes to *@vlen. No fence, no lock on the cache.
 * Return: 0, TIPS_ENOTFOUND, TIPS_ESIZE (value longer than @cap; *@vlen says how long).
 */
TIPS_API int tips_get(struct tips_db *db, const void *key, size_t klen, void *val,
		      size_t cap, size_t *vlen);

/**
 * tips_scan() - call @fn with up to @count key/value pairs, keys >= @start in order
 * (@klen 0: from the first key). Sees every write that completed before the call.
 * @fn may call the database (no lock is held while it runs); with libtips' own
 * indexes it runs while the scan is under way, so a long scan may see a write @fn
 * made to a key ahead of it.
 * Return: the number of pairs passed to @fn, or a negative code (which, in a long scan,
 * may come after some pairs were passed).
 */
TIPS_API long tips_scan(struct tips_db *db, const void *start, size_t klen, size_t count,
			tips_scan_fn fn, void *arg);

/** Counters since open (tips_stats()). New counters are appended at the end;
 * tips_stats() fills only the caller's sizeof (zeroing any newer tail). */
struct tips_stats {
	uint64_t cache_hits, cache_misses;      /* lookups answered by the cache / the index */
	uint64_t cache_bypasses;                /* always 0 since 0.4.0: lookups that go
	                                           straight to the index are not counted
	                                           (the count cost 15% of such a lookup) */
	uint64_t cache_entries;                 /* entries in the cache now */
	uint64_t cache_unapplied;               /* of which replay has not applied yet */
	uint64_t cache_capacity;
	uint64_t writes, olog_bytes;            /* OLog records and bytes appended */
	uint64_t ulog_bytes, ulog_logged;       /* ULog bytes and records written */
	uint64_t ulog_skipped_fresh;            /* tips_ulog_add skipped: memory is new */
	uint64_t ulog_skipped_logged;           /* tips_ulog_add skipped: already logged
	                                           (a replay worker adds some at the end
	                                           of its epoch) */
	uint64_t mlog_allocs, mlog_frees;       /* tips_alloc / tips_free calls */
	uint64_t mlog_bytes;                    /* MLog records they wrote, in bytes */
	uint64_t reclamations;
	uint64_t epochs;                        /* replay epochs that applied records */
	uint64_t replayed;                      /* records applied to the index */
	unsigned workers_now;                   /* replay workers of the current epoch */
	double workers_avg;                     /* average over epochs that applied records */
	uint64_t writer_waits;                  /* writes that waited for OLog or cache room */
	uint64_t gc_unlinked;                   /* cache entries gc removed */
	double recovery_ms;                     /* time tips_open spent recovering */
	int recovered;                          /* 1 if tips_open ran crash recovery */
	uint64_t writes_refused;                /* writes refused with TIPS_ENOSPC */
	uint64_t replay_stalls;                 /* replay epochs stopped by an operation
	                                           that failed (retried after reclaiming) */
	uint64_t heap_reserved;                 /* heap bytes admitted writes may still take */
	uint64_t heap_room;                     /* heap bytes free now */
	uint64_t heap_chunk_room;               /* of which in free chunks (any class) */
	uint64_t heap_keep;                     /* room puts leave free (deletes may use it):
	                                           a put is refused unless heap_room >=
	                                           heap_reserved + its cost + heap_keep */
	uint64_t heap_chunk_margin;             /* ... and heap_chunk_room >= this */
	uint64_t batches;                       /* tips_batch_commit() calls that wrote
	                                           (their records count in `writes`) */
	uint64_t reclaim_graces;                /* reclamations that waited for a grace
	                                           period: the index had freed blocks, or
	                                           a scan had read the OLogs, since the
	                                           one before (the others skip it) */
	uint64_t ulog_values;                   /* values overwritten in place with no undo
	                                           record (tips_ulog_value), counted when
	                                           replay flushes them at its epoch's end */
};

/** tips_stats_sized() - fill the first @size bytes of @out (a longer tail is zeroed). */
TIPS_API void tips_stats_sized(struct tips_db *db, struct tips_stats *out, size_t size);
/** tips_stats() - fill @out. Thread-safe; the counters are read without a lock. */
static inline void tips_stats(struct tips_db *db, struct tips_stats *out)
{
	tips_stats_sized(db, out, sizeof(*out));
}

/**
 * tips_db_walk() - call @fn for every heap block the database owns: the index's
 * blocks (ops->walk) and the framework's own. With tips_heap_walk() this finds leaked
 * and doubly owned blocks. Only while no write is in flight (e.g. right after open).
 * The walk checks each pointer and node before following it and is bounded by the
 * heap's allocated blocks. Return: 0, @fn's first non-zero value, TIPS_ECORRUPT (the
 * message names the index, the node and what was expected), TIPS_ENOMEM.
 */
TIPS_API int tips_db_walk(struct tips_db *db, tips_walk_fn fn, void *arg);

/** What tips_db_check() can find wrong with a block. */
enum tips_block_problem {
	TIPS_BLOCK_LEAKED = 1,      /* allocated in the heap, owned by nobody */
	TIPS_BLOCK_FREE_BUT_OWNED,  /* owned by the index, free in the heap */
	TIPS_BLOCK_OWNED_TWICE,     /* reported twice by the index's walk */
};
typedef void (*tips_block_problem_fn)(enum tips_block_problem what, const void *block,
				      size_t size, void *arg);

/** What tips_db_check() found. New fields are appended; the check fills only the
 * caller's sizeof (zeroing any newer tail). */
struct tips_db_report {
	struct tips_heap_report heap;     /* tips_heap_check() of the pool's heap */
	uint64_t blocks_allocated;        /* blocks the heap holds allocated */
	uint64_t blocks_owned;            /* blocks the index's walk reported */
	uint64_t leaked, free_but_owned, owned_twice;
};

/** tips_db_check_sized() - tips_db_check() into the first @size bytes of @out. */
TIPS_API int tips_db_check_sized(struct tips_db *db, tips_block_problem_fn fn, void *arg,
				 struct tips_db_report *out, size_t size);
/**
 * tips_db_check() - verify the heap (tips_heap_check) and that the blocks it holds
 * allocated are exactly the blocks the database owns (tips_db_walk). @fn, if not NULL,
 * is called for each problem block. Only while no write is in flight (e.g. right after
 * tips_open, which has recovered and reclaimed).
 * Return: 0 if consistent, TIPS_ECORRUPT if anything was found, TIPS_ENOMEM,
 * TIPS_EINVAL (NULL @db or @out).
 */
static inline int tips_db_check(struct tips_db *db, tips_block_problem_fn fn, void *arg,
				struct tips_db_report *out)
{
	return tips_db_check_sized(db, fn, arg, out, sizeof(*out));
}

/** tips_db_pool() - the pool under @db (for tips_pm_counters_*, tips_pool_info). */
TIPS_API struct tips_pool *tips_db_pool(struct tips_db *db);

/* ==== Deprecated names ================================================================
 * The names of 0.3 and earlier, kept so that programs still compile and link (the
 * library still exports them: cmake/libtips.map). New code uses the names above. */

/** tips_lookup() - deprecated: the old name of tips_get(); the same call. */
static inline int tips_lookup(struct tips_db *db, const void *key, size_t klen, void *val,
			      size_t cap, size_t *vlen)
{
	return tips_get(db, key, klen, val, cap, vlen);
}

/** tips_delete() - deprecated: the old name of tips_remove(); the same call, a checked
 * delete (TIPS_ENOTFOUND if the key is absent). Beware: "delete" now names the blind
 * delete (tips_listdb_delete(), tips_batch_delete(): an absent key is not an error);
 * this old name keeps its old, checked meaning. */
static inline int tips_delete(struct tips_db *db, const void *key, size_t klen)
{
	return tips_remove(db, key, klen);
}

#ifdef __cplusplus
}
#endif

#endif /* TIPS_TIPS_H */
