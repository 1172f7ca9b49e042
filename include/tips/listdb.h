/*
 * tips/listdb.h - ListDB: a write-optimized persistent key-value store (ListDB, OSDI'22).
 *
 * Three levels. Writes go to a MemTable (a lock-free skiplist in DRAM) whose elements
 * point at their log entries in PM. A full MemTable becomes immutable and a background
 * thread turns its log entries into an L0 PMTable by writing their skiplist pointers in
 * place (Index-Unified Logging: no key or value is copied, no pointer is flushed). Zipper
 * compaction merges the oldest L0 PMTable into the one L1 PMTable in place, tail to head,
 * without blocking readers. A MANIFEST in the first pool records what is merged and
 * which compaction is under way; everything newer is rebuilt from the log at open.
 *
 * Durability: a write is durable when it returns 0 (one fence: its log entry). Reads
 * never fence. All calls except open/close are thread-safe and may run concurrently.
 *
 * Files. A database with D NUMA domains is D pools: @path (domain 0, holding the
 * MANIFEST) and @path.d1 ... @path.d(D-1). Each domain's log entries live in its own
 * pool; a thread writes into the domain tips_listdb_thread_domain() gave it (default: the
 * thread's slot number modulo D). With braided skiplists (the default) the upper layers
 * of the PMTables link only elements of one domain; the bottom layer links all.
 *
 * Keys are byte strings of 1..TIPS_MAX_KEY bytes ordered by memcmp (shorter first on a
 * tie); values are 0..TIPS_MAX_VALUE bytes. Arguments are checked as by the TIPS facade
 * (tips.h): the same codes for the same mistakes. This header includes what ListDB's
 * calls take (keys and callbacks, batches, pool options, errors, the version), not the
 * TIPS framework: a program using both stores includes tips/tips.h too, or <libtips.h>.
 *
 * Running out of room. A full pool refuses puts with TIPS_ENOMEM; deletes still work,
 * from a spare 1 MiB log chunk each domain keeps for tombstones, so a user can make
 * room: once the deletes are merged (tips_listdb_flush(db, 1), or the background
 * doing it), log chunks whose every entry is dead are freed and puts succeed again.
 * When DRAM runs out, a MemTable flush or a compaction fails before it changes anything
 * and is retried every 10 ms; meanwhile reads are served from the tables as they are,
 * and writers that would have to wait for that flush or compaction get TIPS_ENOMEM
 * instead of waiting. Nothing acknowledged is ever lost (docs/listdb.md).
 */
#ifndef TIPS_LISTDB_H
#define TIPS_LISTDB_H

#include <stddef.h>
#include <stdint.h>
#include <tips/base.h>
#include <tips/batch.h>
#include <tips/errors.h>
#include <tips/pool.h>
#include <tips/version.h>

#ifdef __cplusplus
extern "C" {
#endif

struct tips_listdb;

#define TIPS_LISTDB_MAX_DOMAINS 8

/** How a full MemTable becomes an L0 PMTable. */
enum tips_listdb_flush_mode {
	TIPS_LISTDB_FLUSH_IUL = 0, /* Index-Unified Logging: link the log entries in place */
	TIPS_LISTDB_FLUSH_WAL = 1, /* conventional: copy each entry out of the write-ahead log
	                         into a new persisted element (for comparison) */
};

struct tips_listdb_config {
	size_t struct_size;        /* set by tips_listdb_config_init */
	unsigned flags;            /* TIPS_LISTDB_CREATE: create the pools if they do not exist */
	uint64_t pool_size;        /* create: bytes per domain pool (0: from expected_keys) */
	uint64_t expected_keys;    /* sizing hint (default 1M) */
	unsigned domains;          /* create: NUMA domains, 1..TIPS_LISTDB_MAX_DOMAINS (default 1) */
	int braided;               /* create: 1 braided upper layers (default), 0 oblivious */
	enum tips_listdb_flush_mode flush_mode; /* default IUL */
	uint64_t memtable_entries; /* entries per MemTable (default 64K) */
	unsigned max_immutable;    /* writers wait while this many MemTables await flush (4) */
	unsigned max_l0;           /* writers wait while this many L0 tables await merge (8) */
	unsigned compaction_threads; /* background threads (default 1), each also flushes */
	unsigned shards;           /* key-range shards of L1 for parallel compaction (default 4) */
	int compaction;            /* 1: merge L0 into L1 (default); 0: keep L0 (IUL tests) */
	uint64_t cache_entries;    /* lookup hash table: slots of PM addresses (0: none);
	                              default: expected_keys / 8 */
	uint64_t second_chance_entries; /* skiplist cache of tall L1 elements (0: none);
	                              default: expected_keys / 16 (about every element
	                              of height >= 3), 0 when cache_entries is 0 */
	unsigned bloom_bits;       /* Bloom filter bits per key for each MemTable and L0
	                              table (default 10; 0: none). Not in the paper. */
	int count_traversals;      /* 1: count pointer traversals and cross-domain ones */
	const struct tips_pool_options *pool; /* NULL: defaults; media SIM for tests */
};
#define TIPS_LISTDB_CREATE 1u

/** tips_listdb_config_init_sized() - fill the first @size bytes of @cfg with the
 * documented defaults and set its struct_size to @size; nothing past @size is written. */
TIPS_API void tips_listdb_config_init_sized(struct tips_listdb_config *cfg, size_t size);
/** tips_listdb_config_init() - fill @cfg with the documented defaults (every field must
 * come from here). The struct grows by appending: tips_listdb_open() reads
 * min(struct_size, its own sizeof) bytes, defaults the rest, and accepts a larger
 * (newer) struct whose unknown tail is zero (tips/version.h). */
static inline void tips_listdb_config_init(struct tips_listdb_config *cfg)
{
	tips_listdb_config_init_sized(cfg, sizeof(*cfg));
}

/**
 * tips_listdb_open() - open (or with TIPS_LISTDB_CREATE create) the database at @path.
 * After a crash, recovery (Alg. 5) finishes an interrupted compaction and rebuilds the
 * L0 PMTables from the log before it returns; the lookup caches start empty.
 * Not thread-safe with other calls on the same database.
 * Return: 0;
 *   TIPS_EINVAL (NULL @path or @out, @cfg not from tips_listdb_config_init(), a field
 *   out of range); TIPS_ENOMEM (out of DRAM);
 *   TIPS_ENOENT (no pool at @path, or a domain pool is missing, without
 *   TIPS_LISTDB_CREATE); TIPS_EEXIST (create over a TIPS pool that holds something
 *   else); TIPS_EMISMATCH (open of a TIPS pool that holds something else);
 *   TIPS_EVERSION (ListDB layout of another version); TIPS_ECORRUPT (a damaged ListDB
 *   root, or domain pools that do not belong together); TIPS_ESIZE (a pool whose root
 *   area is too small for ListDB);
 *   and those of tips_pool_open() (TIPS_ENOTPOOL, TIPS_ETRUNCATED, TIPS_ELOCKED,
 *   TIPS_EADDRINUSE, TIPS_EPERM, TIPS_EIO) and, with TIPS_LISTDB_CREATE,
 *   tips_pool_create() (TIPS_ENODIR, TIPS_ENOSPC, TIPS_ESIZE).
 */
TIPS_API int tips_listdb_open(const char *path, const struct tips_listdb_config *cfg,
			 struct tips_listdb **out);
/** tips_listdb_pool_path() - the file of domain @domain's pool of the database at @path
 * (@path itself for domain 0, else "@path.dN") into @buf; like snprintf, returns the
 * length it needs (truncated if >= @cap), or TIPS_EINVAL (NULL @path, or NULL @buf with
 * @cap > 0). */
TIPS_API int tips_listdb_pool_path(const char *path, unsigned domain, char *buf, size_t cap);
/** tips_listdb_destroy() - unlink every pool file of the database at @path (all domains
 * that exist). The database must not be open. Return: 0, TIPS_ENOENT (none existed),
 * TIPS_EINVAL (NULL @path). */
TIPS_API int tips_listdb_destroy(const char *path);

/** tips_listdb_close() - stop the background threads, close the pools; sets *@db to NULL.
 * MemTables need no flush: their entries are in the log. No other call on the database
 * may run. Return: 0, TIPS_EINVAL (@db or *@db NULL). */
TIPS_API int tips_listdb_close(struct tips_listdb **db);

/*
 * Writes. Thread-safe; durable when they return 0 (one fence), and then visible to every
 * later get and scan. A write that fails leaves nothing behind, and after a crash the
 * database holds every write that returned 0.
 * Return, for every write: 0;
 *   TIPS_EINVAL (NULL @db or @key, @klen 0, or @val NULL with @vlen > 0);
 *   TIPS_ETOOBIG (@klen > TIPS_MAX_KEY or @vlen > TIPS_MAX_VALUE);
 *   TIPS_ENOMEM: the pool of the thread's domain is full (puts, inserts, updates; a
 *   delete or remove only once the domain's spare chunk is used up, or is being used by
 *   another thread), or DRAM is out, or the write would have to wait for a MemTable
 *   flush or compaction that failed (see the top of this file).
 * tips_listdb_put() - insert or overwrite.
 * tips_listdb_delete() - write a tombstone; succeeds whether or not the key is present.
 */
TIPS_API int tips_listdb_put(struct tips_listdb *db, const void *key, size_t klen, const void *val,
			size_t vlen);
TIPS_API int tips_listdb_delete(struct tips_listdb *db, const void *key, size_t klen);
/* Checked writes (a lookup and the write under a per-key lock), as tips_insert(),
 * tips_update() and tips_remove(): also TIPS_EKEYEXISTS for an insert of a present key,
 * TIPS_ENOTFOUND for an update or remove of an absent one. */
TIPS_API int tips_listdb_insert(struct tips_listdb *db, const void *key, size_t klen, const void *val,
			   size_t vlen);
TIPS_API int tips_listdb_update(struct tips_listdb *db, const void *key, size_t klen, const void *val,
			   size_t vlen);
TIPS_API int tips_listdb_remove(struct tips_listdb *db, const void *key, size_t klen);

/**
 * tips_listdb_batch_commit() - apply every operation of @b (tips/batch.h) as one atomic
 * write, durable with one fence whatever the batch's size, and recovered all or nothing
 * after a crash, through MemTable flushes and compactions alike. Thread-safe. Every key
 * of @b is locked (the checked writes' per-key locks, in a fixed order) while the
 * conditions are judged and the batch is written; an empty batch writes nothing.
 * Return: 0; TIPS_EINVAL (NULL @db or @b); the error of a failed add; TIPS_EKEYEXISTS /
 * TIPS_ENOTFOUND (a failed condition: tips_batch_failed_op() names the earliest);
 * TIPS_ETOOBIG (past tips_listdb_batch_limit(), before anything else is done); the
 * codes of the single writes above. On any error nothing was applied.
 */
TIPS_API int tips_listdb_batch_commit(struct tips_listdb *db, struct tips_batch *b);

/** tips_listdb_batch_limit() - the most operations and logged bytes one
 * tips_listdb_batch_commit() accepts (0 and 0 for a NULL @db): operations up to
 * memtable_entries (and TIPS_BATCH_MAX_OPS), as a batch takes its slots in one MemTable;
 * bytes of one log chunk, each operation counted at its largest, 184 bytes plus its key
 * and its value each rounded up to 8 (docs/listdb.md, "Write batches"). Either pointer
 * may be NULL. */
TIPS_API void tips_listdb_batch_limit(struct tips_listdb *db, size_t *max_ops,
				      size_t *max_bytes);

/** tips_listdb_get() - as tips_get(): copy the value of @key into @val (up to @cap
 * bytes) and its length into *@vlen. Thread-safe, no fence, never blocked by writers.
 * Return: 0; TIPS_ENOTFOUND (absent, or @klen > TIPS_MAX_KEY); TIPS_ESIZE (value
 * longer than @cap: nothing copied, *@vlen says how long); TIPS_EINVAL (NULL @db, @key
 * or @vlen, @klen 0, or @val NULL with @cap > 0); TIPS_ENOMEM (no DRAM for the
 * calling thread's state, on its first call). */
TIPS_API int tips_listdb_get(struct tips_listdb *db, const void *key, size_t klen, void *val,
			size_t cap, size_t *vlen);
/** tips_listdb_scan() - as tips_scan(): call @fn with up to @count pairs with keys >=
 * @start (@klen 0: from the first key; a start key may be longer than TIPS_MAX_KEY),
 * in order, merged over every level (the newest version of each key; deleted keys
 * skipped); stops early when @fn returns nonzero. Thread-safe; sees every write that
 * completed before the call. Return: the number of pairs passed to @fn; TIPS_EINVAL
 * (NULL @db or @fn, or @start NULL with @klen > 0); TIPS_ENOMEM (no DRAM for the merge
 * of many tables). */
TIPS_API long tips_listdb_scan(struct tips_listdb *db, const void *start, size_t klen, size_t count,
			  tips_scan_fn fn, void *arg);

/** tips_listdb_thread_domain() - the NUMA domain of the calling thread's writes and reads
 * (0..domains-1). Return: 0, TIPS_EINVAL (NULL @db, @domain out of range), TIPS_ENOMEM
 * (no DRAM for the thread's state). */
TIPS_API int tips_listdb_thread_domain(struct tips_listdb *db, unsigned domain);

/** tips_listdb_flush() - seal the mutable MemTable and wait until every MemTable is an L0
 * PMTable and (if @merge) every L0 PMTable is merged into L1 (which also frees the log
 * chunks whose entries are all dead). For tests, tools, and making room in a full pool.
 * Thread-safe. Return: 0; TIPS_EINVAL (NULL @db, or @merge asked of a database opened
 * with compaction off); TIPS_ENOMEM (no DRAM for a new MemTable, or a flush or
 * compaction begun during the call failed: out of DRAM, or in WAL mode no pool room
 * for the copies; the background tries again every 10 ms). */
TIPS_API int tips_listdb_flush(struct tips_listdb *db, int merge);

struct tips_listdb_stats {
	uint64_t puts, deletes, gets;
	uint64_t memtables_flushed, entries_flushed; /* MemTable -> L0 */
	uint64_t compactions, entries_merged;        /* L0 -> L1 */
	uint64_t obsolete_marked, chunks_reclaimed, chunks_live;
	uint64_t write_stall_ns;      /* time writers waited for flush or compaction */
	uint64_t immutable_now, l0_now;
	uint64_t cache_hits, cache_lookups, second_chance_hits;
	uint64_t traversals, cross_domain_traversals; /* count_traversals only: elements
	                              visited by gets, and those in another domain than the
	                              reading thread's */
	uint64_t compaction_traversals, compaction_cross; /* count_traversals only: L1
	                              elements visited by Zipper's scan phase, and those in
	                              another domain than the L0 element being placed */
	double recovery_ms;           /* time open spent recovering (0 after a clean close) */
	uint64_t recovered_entries;   /* log entries recovery put back into L0 */
	int recovered;                /* 1 if open found an unclean shutdown */
	/* What bounds sustained puts (docs/listdb.md, "What bounds a put"): */
	uint64_t compaction_fences;   /* fences issued by Zipper's merges (per merged
	                                 element: compaction_fences / entries_merged) */
	uint64_t flush_cpu_ns;        /* thread CPU time spent flushing MemTables */
	uint64_t compaction_cpu_ns;   /* thread CPU time spent merging into L1 (and
	                                 reclaiming chunks), writers' help included */
	uint64_t write_stalls;        /* times a writer had to wait (write_stall_ns) */
};
/** tips_listdb_stats_sized() - fill the first @size bytes of @out (a longer tail is
 * zeroed). New counters are appended to struct tips_listdb_stats. */
TIPS_API void tips_listdb_stats_sized(struct tips_listdb *db, struct tips_listdb_stats *out,
				      size_t size);
/** tips_listdb_stats() - the counters now (all zero for a NULL @db). Thread-safe. */
static inline void tips_listdb_stats(struct tips_listdb *db, struct tips_listdb_stats *out)
{
	tips_listdb_stats_sized(db, out, sizeof(*out));
}

/** What tips_listdb_check() counted. New fields are appended; the check fills only the
 * caller's sizeof (zeroing any newer tail). */
struct tips_listdb_report {
	uint64_t l1_elements, l0_elements, chunks, heap_blocks;
};
/** tips_listdb_check_sized() - tips_listdb_check() into the first @size bytes of @rep. */
TIPS_API int tips_listdb_check_sized(struct tips_listdb *db, struct tips_listdb_report *rep,
				     size_t size);
/** tips_listdb_check() - ownership check (tests): every L1 element lies in a live log
 * chunk, keys are in order, every chunk is an allocated heap block owned by its slot.
 * Not concurrent with writes. The counts go to *@rep if it is not NULL and the check
 * passed. Return: 0, TIPS_ECORRUPT (first problem in tips_errormsg()), TIPS_EINVAL (NULL
 * @db). */
static inline int tips_listdb_check(struct tips_listdb *db, struct tips_listdb_report *rep)
{
	return tips_listdb_check_sized(db, rep, sizeof(*rep));
}

#ifdef __cplusplus
}
#endif
#endif /* TIPS_LISTDB_H */
