/*
 * bench_index.c - tips-bench's adapter over dram-NAME (ops table, malloc), tips-NAME
 * (facade, pool) and pmdk-hash (libpmemobj baseline) indexes; see bench_index.h.
 */
#define _GNU_SOURCE
#include "bench_index.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef TIPS_HAVE_PMDK_HASH
#include "baselines/pmdk_hash.h"
#endif

static const char *const *names_list(void)
{
	static const char **names; /* built once, by the first caller */
	if (names)
		return names;
	size_t n = 0;
	const char *const *tips = tips_index_names();
	while (tips[n])
		n++;
	const char **v = calloc(n + 2, sizeof(*v));
	if (!v)
		return tips;
	memcpy(v, tips, n * sizeof(*v));
#ifdef TIPS_HAVE_PMDK_HASH
	v[n++] = PMDK_HASH_NAME;
#endif
	v[n] = NULL;
	names = v;
	return names;
}

const char *const *bench_index_names(void)
{
	return names_list();
}

static int is_pmdk(const char *name)
{
#ifdef TIPS_HAVE_PMDK_HASH
	return strcmp(name, PMDK_HASH_NAME) == 0;
#else
	(void)name;
	return 0;
#endif
}

const char *bench_index_concurrency(const char *name)
{
#ifdef TIPS_HAVE_PMDK_HASH
	if (is_pmdk(name))
		return PMDK_HASH_CONCURRENCY;
#endif
	const struct tips_index_ops *ops = tips_index_find(name);
	return ops ? (ops->concurrency ? ops->concurrency : "") : NULL;
}

int bench_index_pm_counted(const struct bench_index *b)
{
	return b->pmdk == NULL;
}

uint64_t bench_pmdk_pool_size(uint64_t expected_keys)
{
#ifdef TIPS_HAVE_PMDK_HASH
	return pmdk_hash_pool_size(expected_keys);
#else
	(void)expected_keys;
	return 0;
#endif
}

static int is_tips(const struct tips_index_ops *ops)
{
	return strncmp(ops->name, "tips-", 5) == 0;
}

uint64_t bench_pool_size(uint64_t expected_keys)
{
	return ((expected_keys * 160 + (512ull << 20)) >> 21) << 21; /* 2 MiB granules */
}

int bench_index_open(struct bench_index *b, const char *name, const char *pool_path,
		     uint64_t pool_size, uint64_t expected_keys, int keep)
{
	memset(b, 0, sizeof(*b));
	b->name = name;
	b->ops = tips_index_find(name);
	if (!b->ops && !is_pmdk(name)) {
		fprintf(stderr, "tips-bench: no index named '%s' (see --list)\n", name);
		return TIPS_EINVAL;
	}
	if (b->ops && !is_tips(b->ops)) {
		struct tips_index_config cfg = { expected_keys };
		void *root;
		int rc = b->ops->create(&cfg, &root);
		return rc ? rc : b->ops->open(root, &b->handle);
	}
	if (pool_path)
		snprintf(b->pool, sizeof(b->pool), "%s", pool_path);
	else
		snprintf(b->pool, sizeof(b->pool), "/dev/shm/tips-bench-%s%d.pool",
			 b->ops ? "" : "pmdk-", (int)getpid());
	b->remove_pool = !keep;
	if (!pool_path)
		unlink(b->pool); /* a leftover of an earlier run with the same pid */
#ifdef TIPS_HAVE_PMDK_HASH
	if (!b->ops) {
		pmdk_hash_force_flushes();
		struct pmdk_hash_config pc = { PMDK_HASH_CREATE,
					       pool_size ? pool_size
							 : pmdk_hash_pool_size(expected_keys),
					       expected_keys };
		return pmdk_hash_open(b->pool, &pc, &b->pmdk);
	}
#endif
	struct tips_config cfg;
	tips_config_init(&cfg);
	cfg.flags = TIPS_CREATE;
	cfg.expected_keys = expected_keys;
	cfg.pool_size = pool_size ? pool_size : bench_pool_size(expected_keys);
	return tips_open(b->pool, &cfg, b->ops, &b->db);
}

struct block_list {
	void **v;
	size_t n, cap;
};

static int collect_block(const void *block, void *arg)
{
	struct block_list *l = arg;
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 1024;
		void **v = realloc(l->v, cap * sizeof(*v));
		if (!v)
			return 1;
		l->v = v;
		l->cap = cap;
	}
	l->v[l->n++] = (void *)block;
	return 0;
}

void bench_index_close(struct bench_index *b)
{
	if (b->db) {
		tips_close(&b->db);
		if (b->remove_pool)
			unlink(b->pool);
#ifdef TIPS_HAVE_PMDK_HASH
	} else if (b->pmdk) {
		pmdk_hash_close(&b->pmdk);
		if (b->remove_pool)
			unlink(b->pool);
#endif
	} else if (b->handle) {
		/* A volatile index has no destroy: free the blocks its walk reports. */
		struct block_list l = { 0 };
		int rc = b->ops->walk(b->handle, collect_block, &l);
		b->ops->close(b->handle);
		for (size_t i = 0; rc == 0 && i < l.n; i++)
			free(l.v[i]);
		free(l.v);
	}
	b->handle = NULL;
}

#ifdef TIPS_HAVE_PMDK_HASH
#define IF_PMDK_RETURN(b, call) if ((b)->pmdk) return call
#else
#define IF_PMDK_RETURN(b, call) (void)0
#endif

int bench_insert(struct bench_index *b, const void *k, size_t kl, const void *v, size_t vl)
{
	IF_PMDK_RETURN(b, pmdk_hash_insert(b->pmdk, k, kl, v, vl));
	return b->db ? tips_insert(b->db, k, kl, v, vl) : b->ops->insert(b->handle, k, kl, v, vl);
}

int bench_update(struct bench_index *b, const void *k, size_t kl, const void *v, size_t vl)
{
	IF_PMDK_RETURN(b, pmdk_hash_update(b->pmdk, k, kl, v, vl));
	return b->db ? tips_update(b->db, k, kl, v, vl) : b->ops->update(b->handle, k, kl, v, vl);
}

int bench_remove(struct bench_index *b, const void *k, size_t kl)
{
	IF_PMDK_RETURN(b, pmdk_hash_remove(b->pmdk, k, kl));
	return b->db ? tips_delete(b->db, k, kl) : b->ops->remove(b->handle, k, kl);
}

int bench_lookup(struct bench_index *b, const void *k, size_t kl, void *v, size_t cap,
		 size_t *vl)
{
	int rc;
#ifdef TIPS_HAVE_PMDK_HASH
	if (b->pmdk)
		rc = pmdk_hash_lookup(b->pmdk, k, kl, v, cap, vl);
	else
#endif
		rc = b->db ? tips_lookup(b->db, k, kl, v, cap, vl)
			   : b->ops->lookup(b->handle, k, kl, v, cap, vl);
	return rc == TIPS_ESIZE ? 0 : rc; /* found, longer than the buffer: still found */
}

static int count_pair(const void *k, size_t kl, const void *v, size_t vl, void *arg)
{
	(void)k, (void)kl, (void)v, (void)vl, (void)arg;
	return 0;
}

long bench_scan(struct bench_index *b, const void *start, size_t kl, size_t count)
{
	return bench_scan_each(b, start, kl, count, count_pair, NULL);
}

long bench_scan_each(struct bench_index *b, const void *start, size_t kl, size_t count,
		     tips_scan_fn fn, void *arg)
{
	IF_PMDK_RETURN(b, pmdk_hash_scan(b->pmdk, start, kl, count, fn, arg));
	return b->db ? tips_scan(b->db, start, kl, count, fn, arg)
		     : b->ops->scan(b->handle, start, kl, count, fn, arg);
}
