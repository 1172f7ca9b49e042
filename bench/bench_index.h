/*
 * bench_index.h - the one interface through which tips-bench drives an index: a
 * dram-NAME index through its ops table (the volatile original, in DRAM), a tips-NAME
 * index through the TIPS facade on a pool. The benchmark never reaches further in.
 * All calls but open/close are thread-safe, as the index's own calls are.
 */
#ifndef TIPS_BENCH_INDEX_H
#define TIPS_BENCH_INDEX_H

#include <stddef.h>
#include <stdint.h>
#include <tips/tips.h>

struct bench_index {
	const struct tips_index_ops *ops;
	void *handle;        /* dram: the index's open handle */
	struct tips_db *db;  /* tips: the database */
	char pool[512];      /* tips: the pool file */
	int remove_pool;     /* tips: unlink the pool at close */
};

/* Pool size for a tips-* index expected to hold @expected_keys keys: room for the
 * nodes (about 64 B a key), the buckets and the logs (160 B a key + 512 MiB). */
uint64_t bench_pool_size(uint64_t expected_keys);

/* Opens @name. tips-*: @pool_path (NULL: a fresh file under /dev/shm, removed at close
 * unless @keep), @pool_size (0: TIPS's default rule), @expected_keys as sizing hint.
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
