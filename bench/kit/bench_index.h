/*
 * bench_index.h - the one interface through which tips-bench drives an index: a
 * dram-NAME index through its ops table (the volatile original, in DRAM), a tips-NAME
 * index through the TIPS facade on a pool, pmdk-hash (the baseline of
 * src/baselines/pmdk_hash.h: hash.c's table on libpmemobj transactions, in a
 * libpmemobj pool; offered when built with it, TIPS_HAVE_PMDK_HASH), and listdb (the
 * ListDB key-value store of tips/listdb.h, on its own pools: one per NUMA domain).
 * tips-bench, tips-fwbench, the PiBench plug-ins, the conformance tests and
 * tips-crashtest (which also reopens pools after crashes, with simulated power-failure
 * media, and checks block ownership) never reach further in. All calls but open, close
 * and the checks are thread-safe, as the index's own calls are.
 *
 * Invariant: each call maps to the store's own call of the same meaning (insert,
 * update and remove are the checked ones, returning TIPS_EKEYEXISTS / TIPS_ENOTFOUND;
 * put is blind), with the store's return code unchanged but for a lookup whose value
 * is longer than the buffer (found: 0, *vl the full length).
 */
#ifndef TIPS_BENCH_INDEX_H
#define TIPS_BENCH_INDEX_H

#include <stddef.h>
#include <stdint.h>
#include <tips/plugin.h>

struct pmdk_hash;
/* tips/listdb.h is included by bench_index.c, not here: the PiBench plug-in includes
 * this header from C++, where -Wshadow rejects listdb.h's function tips_listdb_stats() of
 * the same name as its struct tips_listdb_stats. */
struct tips_listdb;
struct tips_listdb_config;

#define BENCH_LISTDB_NAME "listdb"
/* An index whose every operation succeeds and does nothing: what the harness itself
 * costs per operation (its ceiling). Built like a dram-* index. */
#define BENCH_NULL_NAME "null"

/* What kind of store an index name opens. */
enum bench_kind {
	BENCH_NONE = 0, /* no index of that name */
	BENCH_DRAM,     /* dram-* and null: volatile, malloc */
	BENCH_TIPS,     /* tips-*: the TIPS facade on a libtips pool */
	BENCH_PMDK,     /* pmdk-hash: libpmemobj (built with TIPS_HAVE_PMDK_HASH) */
	BENCH_LISTDB,   /* listdb: libtips pools, one per domain */
};

struct bench_index {
	enum bench_kind kind;
	const struct tips_index_ops *ops; /* dram, tips: the ops table; pmdk: NULL */
	const char *name;    /* the index's name, as listed */
	void *handle;        /* dram: the index's open handle */
	struct tips_db *db;  /* tips: the database */
	struct pmdk_hash *pmdk; /* pmdk-hash: the table */
	struct tips_listdb *ldb;  /* listdb: the store */
	char pool[512];      /* tips, pmdk, listdb: the pool file (listdb: of domain 0) */
	int remove_pool;     /* tips, pmdk, listdb: unlink the pool(s) at close */
};

/* Every index bench_index_open() knows, NULL-terminated: tips_index_names(), then the
 * baselines (pmdk-hash), then listdb, then null. The first call builds the list: make it before
 * threads run. */
const char *const *bench_index_names(void);

/* The concurrency model of index @name in a few words (for listings), or NULL if no
 * index has that name. */
const char *bench_index_concurrency(const char *name);

/* 1 if the index's persistence cost shows in the pm counters (tips_pm_counters_*):
 * tips-* and listdb (which flush through libtips) and dram-* (nothing to count, truly 0);
 * 0 for pmdk-hash, which persists through libpmemobj and libpmem, which those
 * counters do not see: its fences and flushes are unavailable, not 0. */
int bench_index_pm_counted(const struct bench_index *b);

/* Where tips-bench puts the pools it creates (no --pool): $TIPS_BENCH_POOL_DIR, else
 * /dev/shm. A tmpfs mounted with huge=always maps pools with 2 MiB pages, as a DAX file
 * system maps real PM, and as the dram-* twins' big arrays get (src/util/hugepage.h);
 * /dev/shm gives 4 KiB pages (docs/bench.md, "Pool directory"). */
const char *bench_pool_dir(void);
/* 1: the pools opened from now on are faulted in at open (tips_pool_options.prefault
 * for tips-* and listdb, libpmemobj's prefault.at_create and at_open for pmdk-hash),
 * so that a tmpfs pool's pages are allocated and zeroed then and not at the first
 * store to each during the run, as DAX-mapped PM needs no zeroing. Default 0.
 * Not thread-safe: call before opening. */
void bench_set_prefault(int on);
int bench_prefault(void);
/* "2M", "4K" (a tmpfs with or without huge pages) or "unknown" (another file system):
 * the pages the pool directory's mount gives, for the JSON. */
const char *bench_pool_pages(void);

/* Pool size for a tips-* index expected to hold @expected_keys keys: room for the
 * nodes (about 64 B a key), the buckets and the logs (160 B a key + 512 MiB). */
uint64_t bench_pool_size(uint64_t expected_keys);

/* Pool size for pmdk-hash expected to hold @expected_keys keys: libpmemobj's objects
 * take more room (pmdk_hash_pool_size(): about 144 B a key + 128 MiB). 0 if pmdk-hash
 * is not built. */
uint64_t bench_pmdk_pool_size(uint64_t expected_keys);

/* Size of each domain pool of listdb expected to hold @expected_keys keys: its log
 * entries (48-64 B for small keys and values, in 1 MiB log chunks, several versions of
 * a key until compaction makes the old ones reclaimable): 200 B a key + 256 MiB,
 * rounded up to TIPS_POOL_ALIGN. Every domain pool gets the whole amount (one thread
 * may write every key into its domain). */
uint64_t bench_listdb_pool_size(uint64_t expected_keys);

/* The ListDB knobs of the next listdb open (copied; cfg->pool, if not NULL, must stay
 * valid until then). The open still sets flags (TIPS_LISTDB_CREATE), expected_keys and
 * pool_size (from its arguments). NULL: back to tips_listdb_config_init()'s defaults.
 * Not thread-safe: call before opening. */
void bench_listdb_configure(const struct tips_listdb_config *cfg);

/* The kind of index @name (BENCH_NONE if bench_index_open() knows no such name). */
enum bench_kind bench_index_kind(const char *name);

/* Opens @name. tips-*, pmdk-hash, listdb: @pool_path (NULL: a fresh file under
 * /dev/shm, removed at close unless @keep; listdb's domain pools are @pool_path.d1 ...
 * .d(D-1), removed with it), @pool_size (0: the default rule of the kind; listdb: per
 * domain pool), @expected_keys as sizing hint. pmdk-hash sets PMEM_IS_PMEM_FORCE=1 (unless set) so
 * that libpmemobj flushes cache lines on /dev/shm as libtips does, instead of msync.
 * Returns 0 or a TIPS_E* code (message in tips_errormsg()). */
int bench_index_open(struct bench_index *b, const char *name, const char *pool_path,
		     uint64_t pool_size, uint64_t expected_keys, int keep);

/* How bench_index_open_with() opens a store; zero fields are bench_index_open()'s. */
struct bench_open_how {
	const char *pool_path;  /* NULL: a fresh file under /dev/shm */
	uint64_t pool_size;     /* 0: the default rule of the kind */
	uint64_t expected_keys;
	int keep;               /* keep the pool file(s) at close */
	/* Open the pool(s) at pool_path as they are, recovering them, and never create
	 * (tips_open / tips_listdb_open / pmdk_hash_open without their CREATE flag): a
	 * missing pool is an error. 0: create them if absent (bench_index_open). */
	int existing;
	/* tips-* and listdb: the media and failure simulation of the pool(s)
	 * (tips_config.pool, tips_listdb_config.pool); NULL: the default. */
	const struct tips_pool_options *pool;
};

/* bench_index_open() with every choice of @how. */
int bench_index_open_with(struct bench_index *b, const char *name,
			  const struct bench_open_how *how);

/* Closes the store; the pool files stay unless opened without keep. Returns the code
 * of the store's close (tips_close, tips_listdb_close; 0 for the others). */
int bench_index_close(struct bench_index *b);

/* 1 if the store of @name persists through libtips's pool layer (tips-*, listdb), so
 * that simulated power failure (TIPS_MEDIA_SIM) applies to it. */
int bench_kind_persists_in_pools(enum bench_kind kind);

/* What the store says of itself after open. */
struct bench_store_stats {
	uint64_t background; /* background work so far: tips-* reclamations, listdb
			      * Zipper compactions (bench_kind_background), else 0 */
	double recovery_ms;  /* the recovery its open ran (0: none, or unknown) */
	int recovered;       /* 1 recovered, 0 clean, -1 unknown (pmdk-hash, dram) */
};
void bench_index_stats(struct bench_index *b, struct bench_store_stats *out);
/* What bench_index_stats() counts as background work, as a plural noun. */
const char *bench_kind_background(enum bench_kind kind);

/* What bench_index_check() found. */
struct bench_check_report {
	uint64_t allocated, owned; /* blocks allocated in the heap(s) / owned by the index */
	uint64_t heap_errors;      /* the heap's own inconsistencies (and listdb's) */
	char first_error[200];     /* the first of them ("" if none) */
};
/* One problem block: @block an address (tips-*) or a pool offset (pmdk-hash). */
typedef void (*bench_problem_fn)(enum tips_block_problem what, uint64_t block, size_t size,
				 void *arg);
/*
 * Ownership: every block allocated in the store's heap owned exactly once, and the
 * heap's own check. tips-*: tips_db_check; pmdk-hash: pmdk_hash_check (objects of the
 * pool against those reachable from the root). listdb: first tips_listdb_flush(db, 1),
 * so that everything recovery rebuilt is merged into L1 and reclaimed (a fixed point),
 * then tips_listdb_check, which verifies lists, chunks and that the heaps hold exactly
 * the chunks the root slots own; it names no block, so a problem it finds is one
 * heap_errors with its message (allocated = heap blocks, owned = chunks). Returns 0,
 * TIPS_ECORRUPT (problem blocks found, each passed to @fn), or another code; TIPS_EINVAL
 * for a volatile index. No write may run meanwhile.
 */
int bench_index_check(struct bench_index *b, bench_problem_fn fn, void *arg,
		      struct bench_check_report *rep);
/* After bench_index_close(): the closed pool's own consistency check where the store
 * has one (pmdk-hash: pmemobj_check), else 0. 0, TIPS_ECORRUPT or another code. */
int bench_index_check_closed(const struct bench_index *b);

int bench_insert(struct bench_index *b, const void *k, size_t kl, const void *v, size_t vl);
int bench_update(struct bench_index *b, const void *k, size_t kl, const void *v, size_t vl);
int bench_remove(struct bench_index *b, const void *k, size_t kl);
/* A blind write (insert or overwrite): tips_put, pmdk_hash_put, tips_listdb_put; a dram-*
 * index has none, so it is an insert followed on TIPS_EKEYEXISTS by an update (and
 * retried if a concurrent remove made the update miss). */
int bench_put(struct bench_index *b, const void *k, size_t kl, const void *v, size_t vl);
int bench_lookup(struct bench_index *b, const void *k, size_t kl, void *v, size_t cap,
		 size_t *vl);

/* bench_lookup() as one function and its first argument, resolved once: a loop of
 * lookups then calls the store itself, with no dispatch on the store's kind between two
 * lookups. The function returns what the store's lookup returns (so TIPS_ESIZE, found
 * but longer than @cap, is not folded into 0 as bench_lookup() does). */
typedef int (*bench_lookup_fn)(void *store, const void *k, size_t kl, void *v, size_t cap,
			       size_t *vl);
bench_lookup_fn bench_lookup_direct(const struct bench_index *b, void **store);
/* For a tips-* index, its own lookup on the database's index handle, past tips_get()
 * and its cache check (right only while nothing is unapplied: a settled, read-only
 * run); for any other store, bench_lookup_direct(). */
bench_lookup_fn bench_lookup_past_facade(const struct bench_index *b, void **store);
/* 1 if bench_batch_commit() works on @b: tips-* (tips_batch_commit), listdb
 * (tips_listdb_batch_commit) and dram-* (the operations one by one: the volatile
 * baseline has no atomicity to keep); not pmdk-hash. */
int bench_index_has_batches(const struct bench_index *b);
/* Commits @batch (tips/batch.h) as one write; TIPS_EINVAL where there are none. */
int bench_batch_commit(struct bench_index *b, struct tips_batch *batch);
/* Returns the number of pairs the scan produced, or a negative code. */
long bench_scan(struct bench_index *b, const void *start, size_t kl, size_t count);
/* The same scan, calling @fn for each pair (tests compare the pairs to a model). */
long bench_scan_each(struct bench_index *b, const void *start, size_t kl, size_t count,
		     tips_scan_fn fn, void *arg);

#endif /* TIPS_BENCH_INDEX_H */
