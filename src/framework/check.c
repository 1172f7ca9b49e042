/*
 * check.c - verification of what the framework reads back from a pool.
 *
 * fw_check_root() and fw_index_attach() run at every open: no word read from PM is
 * followed before it is range-checked (the index root must start an allocated heap
 * block; every OLog's head, tail and records must lie inside its ring) or checksummed
 * (the header's identity, ULog records: fw_validate, ulog.c). With TIPS_VERIFY the
 * index itself is walked (fw_verify_index) before recovery replays into it: each
 * index's walk checks every pointer (tips_block_valid) and node before following it,
 * and the walk is bounded by the number of allocated blocks, so a cycle is reported
 * instead of followed. Lookups stay unchecked, for speed: a pool that these checks
 * reject must not be used (docs/framework.md).
 *
 * tips_db_check(): does the heap hold allocated exactly the blocks the index owns?
 * After recovery and reclamation every allocated block must be reachable from the
 * index (else it leaked) and every block the index reaches must be allocated (else it
 * was freed twice, or freed while still linked). Used by `tips pool check --index` and
 * by tips-crashtest. Every TIPS_ECORRUPT returned from here carries a message.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "framework/framework.h"
#include "util/errors_internal.h"
#include "util/version_internal.h"

/* The smallest root object an index can have: a magic word and one more. */
#define FW_ROOT_MIN_BYTES 16u

int fw_check_root(const struct fw_header *fw, struct tips_heap *heap, const char *path)
{
	if (fw->state != FW_STATE_CREATING && fw->state != FW_STATE_OPEN &&
	    fw->state != FW_STATE_CLEAN)
		return tips_set_error(TIPS_ECORRUPT, "%s: framework header: state %llu (root area "
				      "offset %zu): expected 1 (creating), 2 (open) or 3 (clean)",
				      path, (unsigned long long)fw->state,
				      offsetof(struct fw_header, state));
	if (fw->flush_done > 1)
		return tips_set_error(TIPS_ECORRUPT, "%s: framework header: flush_done %llu (root "
				      "area offset %zu): expected 0 or 1", path,
				      (unsigned long long)fw->flush_done,
				      offsetof(struct fw_header, flush_done));
	if (fw->state == FW_STATE_CREATING && !fw->flush_done)
		return 0; /* no root yet: the creation is redone */
	if (tips_heap_usable_size(heap, (const void *)(uintptr_t)fw->index_root) <
	    FW_ROOT_MIN_BYTES)
		return tips_set_error(TIPS_ECORRUPT, "%s: framework header: index root 0x%llx "
				      "(root area offset %zu): expected the start of an allocated "
				      "heap block of at least %u bytes", path,
				      (unsigned long long)fw->index_root,
				      offsetof(struct fw_header, index_root), FW_ROOT_MIN_BYTES);
	return 0;
}

static int count_block(const struct tips_heap_block *b, void *arg)
{
	(void)b;
	(*(uint64_t *)arg)++;
	return 0;
}

/* A walk's callback, wrapped: no index has more blocks than the heap holds allocated,
 * so a walk that reports more is going round a cycle. */
struct bounded_walk {
	tips_walk_fn fn;
	void *arg;
	uint64_t limit, seen;
	const char *index;
};

static int bounded_visit(const void *block, void *arg)
{
	struct bounded_walk *w = arg;
	if (++w->seen > w->limit)
		return tips_set_error(TIPS_ECORRUPT, "%s: index walk: block %p is block number "
				      "%llu, expected at most the %llu blocks the heap holds "
				      "allocated (a cycle among the index's pointers)", w->index,
				      block, (unsigned long long)w->seen,
				      (unsigned long long)w->limit);
	return w->fn(block, w->arg);
}

int tips_db_walk(struct tips_db *db, tips_walk_fn fn, void *arg)
{
	if (!db || !fn)
		return tips_set_error(TIPS_EINVAL, "tips_db_walk: database and callback required");
	struct bounded_walk w = { fn, arg, 0, 0, db->ops->name };
	int rc = tips_heap_walk(db->heap, count_block, &w.limit);
	if (rc)
		return rc;
	tips_set_error(0, "%s", "");
	fw_set_current(db); /* the walk's tips_block_valid checks this heap */
	rc = db->ops->walk(db->index, bounded_visit, &w);
	fw_set_current(NULL);
	if (rc < 0 && tips_errormsg()[0] == '\0')
		tips_set_error(rc, "%s: index walk failed without saying why", db->ops->name);
	return rc;
}

static int ignore_block(const void *block, void *arg)
{
	(void)block;
	(void)arg;
	return 0;
}

int fw_verify_index(struct tips_db *db)
{
	return tips_db_walk(db, ignore_block, NULL);
}

int fw_index_attach(struct tips_db *db)
{
	tips_set_error(0, "%s", "");
	fw_set_current(db); /* the index's open checks its root with tips_block_valid */
	int rc = db->ops->open(db->root, &db->index);
	fw_set_current(NULL);
	if (rc) {
		db->index = NULL;
		if (tips_errormsg()[0] == '\0')
			tips_set_error(rc, "%s: open of the index on root %p failed without saying "
				       "why", db->ops->name, db->root);
		return rc;
	}
	for (unsigned i = 0; i < db->ologs.n; i++)
		if ((rc = olog_verify(&db->ologs.logs[i], i)))
			return rc;
	if (db->cfg.flags & TIPS_VERIFY)
		rc = fw_verify_index(db);
	return rc;
}

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

static int db_check(struct tips_db *db, tips_block_problem_fn fn, void *arg,
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

int tips_db_check_sized(struct tips_db *db, tips_block_problem_fn fn, void *arg,
			struct tips_db_report *out, size_t size)
{
	struct tips_db_report r;
	int rc = db_check(db, fn, arg, out ? &r : NULL);
	if (db && out) /* db_check filled r (it refuses a NULL db before touching it) */
		tips_struct_write(out, size, &r, sizeof(r));
	return rc;
}
