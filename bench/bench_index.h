/*
 * bench_index.h - the one interface through which tips-bench drives an index: a
 * dram-NAME index through its ops table (the volatile original, in DRAM), a tips-NAME
 * index through the TIPS facade on a pool, and pmdk-hash (the baseline of
 * src/baselines/pmdk_hash.h: hash.c's table on libpmemobj transactions, in a
 * libpmemobj pool; offered when built with it, TIPS_HAVE_PMDK_HASH). The benchmark
 * never reaches further in. All calls but open/close are thread-safe, as the index's
 * own calls are.
 */
#ifndef TIPS_BENCH_INDEX_H
#define TIPS_BENCH_INDEX_H

#include <stddef.h>
#include <stdint.h>
#include <tips/tips.h>

struct pmdk_hash;

struct bench_index {
	const struct tips_index_ops *ops; /* dram, tips: the ops table; pmdk: NULL */
	const char *name;    /* the index's name, as listed */
	void *handle;        /* dram: the index's open handle */
	struct tips_db *db;  /* tips: the database */
	struct pmdk_hash *pmdk; /* pmdk-hash: the table */
	char pool[512];      /* tips, pmdk: the pool file */
	int remove_pool;     /* tips, pmdk: unlink the pool at close */
};

/* Every index bench_index_open() knows, NULL-terminated: tips_index_names(), then the
 * baselines (pmdk-hash). The first call builds the list: make it before threads run. */
const char *const *bench_index_names(void);

/* The concurrency model of index @name in a few words (for listings), or NULL if no
 * index has that name. */
const char *bench_index_concurrency(const char *name);

/* 1 if the index's persistence cost shows in the pm counters (tips_pm_counters_*):
 * tips-* (which flush through libtips) and dram-* (nothing to count, truly 0);
 * 0 for pmdk-hash, which persists through libpmemobj and libpmem, which those
 * counters do not see: its fences and flushes are unavailable, not 0. */
int bench_index_pm_counted(const struct bench_index *b);

/* Pool size for a tips-* index expected to hold @expected_keys keys: room for the
 * nodes (about 64 B a key), the buckets and the logs (160 B a key + 512 MiB). */
uint64_t bench_pool_size(uint64_t expected_keys);

/* Pool size for pmdk-hash expected to hold @expected_keys keys: libpmemobj's objects
 * take more room (pmdk_hash_pool_size(): about 144 B a key + 128 MiB). 0 if pmdk-hash
 * is not built. */
uint64_t bench_pmdk_pool_size(uint64_t expected_keys);

/* Opens @name. tips-*, pmdk-hash: @pool_path (NULL: a fresh file under /dev/shm,
 * removed at close unless @keep), @pool_size (0: the default rule of the kind),
 * @expected_keys as sizing hint. pmdk-hash sets PMEM_IS_PMEM_FORCE=1 (unless set) so
 * that libpmemobj flushes cache lines on /dev/shm as libtips does, instead of msync.
 * Returns 0 or a TIPS_E* code (message in tips_errormsg()). */
int bench_index_open(struct bench_index *b, const char *name, const char *pool_path,
		     uint64_t pool_size, uint64_t expected_keys, int keep);
void bench_index_close(struct bench_index *b);

int bench_insert(struct bench_index *b, const void *k, size_t kl, const void *v, size_t vl);
int bench_update(struct bench_index *b, const void *k, size_t kl, const void *v, size_t vl);
int bench_remove(struct bench_index *b, const void *k, size_t kl);
int bench_lookup(struct bench_index *b, const void *k, size_t kl, void *v, size_t cap,
		 size_t *vl);
/* Returns the number of pairs the scan produced, or a negative code. */
long bench_scan(struct bench_index *b, const void *start, size_t kl, size_t count);
/* The same scan, calling @fn for each pair (tests compare the pairs to a model). */
long bench_scan_each(struct bench_index *b, const void *start, size_t kl, size_t count,
		     tips_scan_fn fn, void *arg);

#endif /* TIPS_BENCH_INDEX_H */
