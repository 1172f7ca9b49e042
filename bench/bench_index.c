/*
 * bench_index.c - tips-bench's adapter over dram-NAME (ops table, malloc) and
 * tips-NAME (facade, pool) indexes; see bench_index.h.
 */
#define _GNU_SOURCE
#include "bench_index.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

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
	b->ops = tips_index_find(name);
	if (!b->ops) {
		fprintf(stderr, "tips-bench: no index named '%s' (see --list)\n", name);
		return TIPS_EINVAL;
	}
	if (!is_tips(b->ops)) {
		struct tips_index_config cfg = { expected_keys };
		void *root;
		int rc = b->ops->create(&cfg, &root);
		return rc ? rc : b->ops->open(root, &b->handle);
	}
	if (pool_path)
		snprintf(b->pool, sizeof(b->pool), "%s", pool_path);
	else
		snprintf(b->pool, sizeof(b->pool), "/dev/shm/tips-bench-%d.pool", (int)getpid());
	b->remove_pool = !keep;
	if (!pool_path)
		unlink(b->pool); /* a leftover of an earlier run with the same pid */
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

int bench_insert(struct bench_index *b, const void *k, size_t kl, const void *v, size_t vl)
{
	return b->db ? tips_insert(b->db, k, kl, v, vl) : b->ops->insert(b->handle, k, kl, v, vl);
}

int bench_update(struct bench_index *b, const void *k, size_t kl, const void *v, size_t vl)
{
	return b->db ? tips_update(b->db, k, kl, v, vl) : b->ops->update(b->handle, k, kl, v, vl);
}

int bench_remove(struct bench_index *b, const void *k, size_t kl)
{
	return b->db ? tips_delete(b->db, k, kl) : b->ops->remove(b->handle, k, kl);
}

int bench_lookup(struct bench_index *b, const void *k, size_t kl, void *v, size_t cap,
		 size_t *vl)
{
	int rc = b->db ? tips_lookup(b->db, k, kl, v, cap, vl)
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
	return b->db ? tips_scan(b->db, start, kl, count, fn, arg)
		     : b->ops->scan(b->handle, start, kl, count, fn, arg);
}
