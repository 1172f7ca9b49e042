/*
 * pmdk_hash.h - "pmdk-hash": the chained hash table of src/indexes/hash.c made
 * persistent the conventional way, with libpmemobj transactions on the critical path
 * (the PMDK-HT baseline of the TIPS paper, ATC'21 §7.4 and Figure 7).
 *
 * A store of its own, not a TIPS plug-in: it owns a libpmemobj pool (layout
 * PMDK_HASH_LAYOUT) and is called directly. Every write is one transaction, durable
 * when the call returns; a crash at any point leaves the table as it was before or
 * after the write in flight (libpmemobj's undo log, replayed by the next open). The
 * semantics and codes follow the TIPS facade (tips/tips.h): TIPS_EKEYEXISTS,
 * TIPS_ENOTFOUND, TIPS_EINVAL, TIPS_ETOOBIG, TIPS_ESIZE for a lookup buffer too small,
 * and TIPS_ENOMEM when the pool is full (the transaction aborts, the table is
 * unchanged). Failures set tips_errormsg() with the detail (through the public
 * tips_set_error(), as any extension of libtips would).
 *
 * Threads: every call but open/close/check is thread-safe, for any keys (the same key
 * included). Media: on a file system without DAX (e.g. /dev/shm) libpmem would msync
 * instead of flushing cache lines; set PMEM_IS_PMEM_FORCE=1 before the first pool is
 * opened to get cache-line flushes and fences, as libtips does on shm media
 * (pmdk_hash_force_flushes()).
 */
#ifndef TIPS_BASELINES_PMDK_HASH_H
#define TIPS_BASELINES_PMDK_HASH_H

#include <stddef.h>
#include <stdint.h>

#include <tips/tips.h>

#define PMDK_HASH_NAME "pmdk-hash"
#define PMDK_HASH_LAYOUT "tips-pmdk-hash"
#define PMDK_HASH_CONCURRENCY                                                            \
	"1024 striped rwlocks; each write one libpmemobj transaction (undo log on the "  \
	"critical path)"

struct pmdk_hash;

#define PMDK_HASH_CREATE 1u /* create the pool if the file does not exist */

struct pmdk_hash_config {
	unsigned flags;         /* PMDK_HASH_CREATE */
	uint64_t pool_size;     /* create: bytes (0: pmdk_hash_pool_size(expected_keys)) */
	uint64_t expected_keys; /* create: sizes the bucket array (0: 1M) */
	int prefault;           /* 1: libpmemobj's prefault.at_create and at_open (they are
	                           process-wide settings: each open sets both) */
};

/**
 * pmdk_hash_pool_size() - a pool size that holds @expected_keys keys of 8 bytes with
 * 8-byte values, with room to spare (measured: libpmemobj spends about 64 B a node
 * plus 8 B a bucket; see pmdk_hash.c).
 */
uint64_t pmdk_hash_pool_size(uint64_t expected_keys);

/**
 * pmdk_hash_force_flushes() - set PMEM_IS_PMEM_FORCE=1 unless the environment already
 * sets it, so that libpmemobj flushes cache lines on non-DAX media instead of calling
 * msync. Call before the first pool of the process is opened (libpmem reads the
 * variable once). Not thread-safe (setenv).
 */
void pmdk_hash_force_flushes(void);

/**
 * pmdk_hash_open() - open the table in the pool at @path, or create it (pool and table)
 * with PMDK_HASH_CREATE if no file exists there. Opening runs libpmemobj's recovery
 * (a transaction in flight at a crash is rolled back) and finishes a table whose
 * creation was interrupted.
 * Return: 0; TIPS_ENOENT (no file, no CREATE); TIPS_ENOTPOOL (not a libpmemobj pool);
 * TIPS_EMISMATCH (a libpmemobj pool of another layout); TIPS_ECORRUPT (our layout but
 * the root is not a table); TIPS_ENOMEM; another code from the system.
 */
int pmdk_hash_open(const char *path, const struct pmdk_hash_config *cfg,
		   struct pmdk_hash **out);

/** pmdk_hash_close() - close the pool (every write is durable already); NULLs *@h. */
void pmdk_hash_close(struct pmdk_hash **h);

/* Writes: one transaction each. 0, TIPS_EKEYEXISTS (insert of a present key),
 * TIPS_ENOTFOUND (update or remove of an absent key), TIPS_EINVAL, TIPS_ETOOBIG,
 * TIPS_ENOMEM (pool full: nothing changed). put inserts or overwrites. */
int pmdk_hash_insert(struct pmdk_hash *h, const void *key, size_t klen, const void *val,
		     size_t vlen);
int pmdk_hash_update(struct pmdk_hash *h, const void *key, size_t klen, const void *val,
		     size_t vlen);
int pmdk_hash_put(struct pmdk_hash *h, const void *key, size_t klen, const void *val,
		  size_t vlen);
int pmdk_hash_remove(struct pmdk_hash *h, const void *key, size_t klen);

/**
 * pmdk_hash_lookup() - copy @key's value into @val (at most @cap bytes), its length
 * into *@vlen (if not NULL). Return: 0, TIPS_ENOTFOUND, TIPS_ESIZE (longer than @cap:
 * @cap bytes copied, *@vlen the full length), TIPS_EINVAL.
 */
int pmdk_hash_lookup(struct pmdk_hash *h, const void *key, size_t klen, void *val,
		     size_t cap, size_t *vlen);

/**
 * pmdk_hash_scan() - call @fn for up to @count keys >= @start (@klen 0: from the
 * first) in key order (memcmp, shorter first). A full-table pass: O(n log count).
 * Not a snapshot: a key written meanwhile may or may not be seen. @fn runs with no
 * lock held. Return: the number of pairs passed to @fn, or a negative code.
 */
long pmdk_hash_scan(struct pmdk_hash *h, const void *start, size_t klen, size_t count,
		    tips_scan_fn fn, void *arg);

/** What pmdk_hash_check() found. */
struct pmdk_hash_report {
	uint64_t objects;        /* objects allocated in the pool (the root excluded) */
	uint64_t reachable;      /* objects reached from the root: buckets and nodes */
	uint64_t keys;           /* nodes reached */
	uint64_t leaked;         /* allocated, not reachable */
	uint64_t free_but_owned; /* reachable, not an allocated object */
	uint64_t owned_twice;    /* reached twice */
};

/** Called by pmdk_hash_check() for each problem object; @block is its pool offset. */
typedef void (*pmdk_hash_problem_fn)(enum tips_block_problem what, uint64_t block,
				     size_t size, void *arg);

/**
 * pmdk_hash_check() - the leak check: every object of the pool (pmemobj_first/next)
 * against the objects reachable from the root (root object, bucket array, chains).
 * @fn (may be NULL) is called for each problem. No write may run meanwhile.
 * Return: 0 if they are the same set, TIPS_ECORRUPT otherwise, TIPS_ENOMEM.
 */
int pmdk_hash_check(struct pmdk_hash *h, pmdk_hash_problem_fn fn, void *arg,
		    struct pmdk_hash_report *rep);

/**
 * pmdk_hash_check_file() - libpmemobj's own consistency check of the closed pool at
 * @path (pmemobj_check: pool header, lanes, heap). Return: 0 consistent,
 * TIPS_ECORRUPT (message says what), or the code of a failure to read it.
 */
int pmdk_hash_check_file(const char *path);

#endif /* TIPS_BASELINES_PMDK_HASH_H */
