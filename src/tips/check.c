/*
 * check.c - tips_db_check(): does the heap hold allocated exactly the blocks the index
 * owns? After recovery and reclamation every allocated block must be reachable from
 * the index (else it leaked) and every block the index reaches must be allocated (else
 * it was freed twice, or freed while still linked). Used by `tips pool check --index`
 * and by tips-crashtest.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "tips/framework.h"
#include "util/errors_internal.h"

struct block_list {
	uint64_t *addr, *size;
	size_t n, cap;
	bool failed;
};

static void list_push(struct block_list *l, uint64_t addr, uint64_t size)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 1024;
		uint64_t *a = realloc(l->addr, cap * sizeof(*a));
		uint64_t *s = a ? realloc(l->size, cap * sizeof(*s)) : NULL;
		if (a)
			l->addr = a;
		if (!s) {
			l->failed = true;
			return;
		}
		l->size = s;
		l->cap = cap;
	}
	l->addr[l->n] = addr;
	l->size[l->n++] = size;
}

static int heap_block(const struct tips_heap_block *b, void *arg)
{
	list_push(arg, (uint64_t)b->ptr, b->size);
	return 0;
}

static int owned_block(const void *block, void *arg)
{
	list_push(arg, (uint64_t)block, 0);
	return 0;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

/* Index of @a in the sorted @v[0..n), or n. */
static size_t find(const uint64_t *v, size_t n, uint64_t a)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (v[mid] < a)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < n && v[lo] == a ? lo : n;
}

int tips_db_check(struct tips_db *db, tips_block_problem_fn fn, void *arg,
		  struct tips_db_report *out)
{
	if (!db || !out)
		return tips_set_error(TIPS_EINVAL, "tips_db_check: database and report required");
	memset(out, 0, sizeof(*out));
	int heap_rc = tips_heap_check(db->heap, &out->heap);
	struct block_list heap = { 0 }, owned = { 0 };
	int rc = tips_heap_walk(db->heap, heap_block, &heap);
	if (rc == 0)
		rc = tips_db_walk(db, owned_block, &owned);
	unsigned char *used = rc == 0 ? calloc(heap.n + 1, 1) : NULL;
	if (rc == 0 && (heap.failed || owned.failed || !used))
		rc = tips_set_error(TIPS_ENOMEM, "tips_db_check: out of DRAM");
	if (rc == 0) {
		out->blocks_allocated = heap.n;
		out->blocks_owned = owned.n;
		/* tips_heap_walk reports blocks in address order. */
		if (owned.n > 1)
			qsort(owned.addr, owned.n, sizeof(uint64_t), cmp_u64);
		for (size_t i = 0; i < owned.n; i++) {
			size_t at = find(heap.addr, heap.n, owned.addr[i]);
			if (i > 0 && owned.addr[i] == owned.addr[i - 1]) {
				out->owned_twice++;
				if (fn)
					fn(TIPS_BLOCK_OWNED_TWICE, (void *)owned.addr[i], 0, arg);
			} else if (at == heap.n) {
				out->free_but_owned++;
				if (fn)
					fn(TIPS_BLOCK_FREE_BUT_OWNED, (void *)owned.addr[i], 0, arg);
			} else
				used[at] = 1;
		}
		for (size_t i = 0; i < heap.n; i++)
			if (!used[i]) {
				out->leaked++;
				if (fn)
					fn(TIPS_BLOCK_LEAKED, (void *)heap.addr[i], heap.size[i], arg);
			}
		if (heap_rc || out->heap.errors || out->leaked || out->free_but_owned ||
		    out->owned_twice)
			rc = tips_set_error(TIPS_ECORRUPT, "tips_db_check: %llu leaked, %llu free but "
					    "owned, %llu owned twice, %llu heap error(s)",
					    (unsigned long long)out->leaked,
					    (unsigned long long)out->free_but_owned,
					    (unsigned long long)out->owned_twice,
					    (unsigned long long)out->heap.errors);
	}
	free(used);
	free(heap.addr);
	free(heap.size);
	free(owned.addr);
	free(owned.size);
	return rc;
}
