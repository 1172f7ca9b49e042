/*
 * plugin.c - the plug-in API an index is written against (TIPS §3.2.6, Figure 2):
 * tips_alloc, tips_free, tips_ulog_add, tips_root, tips_block_valid; and, for the
 * indexes built into the library (src/indexes/idx_hooks.h, IDX_LOG2, IDX_ALLOC_LOG),
 * fw_ulog_add_ranges: several ranges an operation stores to, logged with one fence, and
 * fw_alloc_logging: a block and the undo record of a range, under one fence; and
 * tips_ulog_value: a value overwritten in place, remembered for the replay worker to
 * flush before it reports its queue applied (fw_value_ranges_flush), with no undo
 * record.
 *
 * The framework calls an index's ops only from threads it controls (replay workers,
 * recovery, create), and each of them names its database here first, so the index
 * code needs no handle. tips_alloc/tips_free go to the heap's MLog
 * (tips_heap_alloc_logged/free_logged): an allocation is undone if a crash rolls back
 * its operation, and a free takes effect only at the next reclamation, when the
 * operation that freed can no longer be replayed (§4.3.1).
 *
 * Room: a block larger than a size class (a table an index grows into) may use the
 * headroom but never the room admitted writes were promised (admit.c); an index
 * treats that NULL as "do not grow now". The largest such block allocated after the
 * index's creation (fw_header.grown_block, persisted) sets part of the headroom: a
 * table that grew once may double again. Tables sized at creation and never grown
 * (tips-hash) reserve nothing. A free the
 * heap cannot record (its MLog lane is full, which replay checks for before each
 * operation) leaks the block instead of stopping the process (`tips pool check`
 * reports the leak).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>

#include "heap/heap_internal.h"
#include "pm/pm.h"
#include "util/grow.h"
#include "framework/framework.h"
#include "util/errors_internal.h"

static _Thread_local struct tips_db *current __attribute__((tls_model("initial-exec")));

void fw_set_current(struct tips_db *db)
{
	current = db;
}

/* Remembers, durably, the largest block the index grew into (see the top). */
static void note_growth(struct tips_db *db, size_t size)
{
	uint64_t most = atomic_load_explicit(&db->grown_block, memory_order_relaxed);
	while (size > most && !atomic_compare_exchange_weak(&db->grown_block, &most, size))
		;
	if (size > most) {
		pthread_mutex_lock(&db->persist_mu); /* one writer of the word at a time */
		if (size > db->fw->grown_block) {
			db->fw->grown_block = size;
			pm_persist(&db->fw->grown_block, sizeof(db->fw->grown_block));
		}
		pthread_mutex_unlock(&db->persist_mu);
	}
}

/* tips_alloc(), and in *@fenced whether the heap fenced after the block's record. */
static void *alloc_block(size_t size, bool *fenced)
{
	*fenced = false;
	if (!current) {
		tips_set_error(TIPS_EINVAL, "tips_alloc outside an index operation");
		return NULL;
	}
	if (size > TIPS_HEAP_MAX_RUN_ALLOC && current->index &&
	    heap_room(current->heap) < size + atomic_load(&current->heap_reserved)) {
		tips_set_error(TIPS_ENOMEM, "tips_alloc(%zu): the heap's room is promised to "
			       "admitted writes", size);
		return NULL;
	}
	void *p = NULL;
	if (heap_alloc_logged_fenced(current->heap, size, &p, fenced))
		return NULL;
	atomic_fetch_add_explicit(&current->mlog_allocs, 1, memory_order_relaxed);
	if (size > TIPS_HEAP_MAX_RUN_ALLOC && current->index)
		note_growth(current, size);
	return p;
}

void *tips_alloc(size_t size)
{
	bool fenced;
	return alloc_block(size, &fenced);
}

struct alloc_request {
	size_t size;
	void *block;
};

/* Under the ULog's lock: the allocation. If the heap fenced after the block's record
 * (heap_alloc.c), that fence made the group's records durable too; a block from a
 * lane's reserve comes without a fence (its record was fenced earlier), and then the
 * ULog fences its group itself. */
static bool alloc_then(void *arg)
{
	struct alloc_request *req = arg;
	bool fenced;
	req->block = alloc_block(req->size, &fenced);
	return fenced;
}

void *fw_alloc_logging(size_t size, void *addr, size_t lsize)
{
	if (!current)
		return tips_alloc(size); /* which says why it cannot */
	struct alloc_request req = { size, NULL };
	if (ulog_add_group_then(current->ulog, current->heap, current->pool, &addr, &lsize, 1,
				alloc_then, &req))
		return NULL; /* not a range of the pool: a bug of the index */
	return req.block;
}

void tips_free(void *ptr)
{
	if (!ptr)
		return;
	TIPS_INVARIANT(current != NULL, "tips_free outside an index operation");
	int rc = tips_heap_free_logged(current->heap, ptr);
	if (rc) {
		fprintf(stderr, "libtips: tips_free(%p): %s: %s; the block leaks\n", ptr,
			tips_strerror(rc), tips_errormsg());
		atomic_fetch_add_explicit(&current->leaked_frees, 1, memory_order_relaxed);
		return;
	}
	atomic_fetch_add_explicit(&current->mlog_frees, 1, memory_order_relaxed);
}

int tips_ulog_add(void *addr, size_t size)
{
	if (!current) /* e.g. index code run outside the framework: nothing to undo */
		return tips_set_error(TIPS_EINVAL, "tips_ulog_add outside an index operation");
	return ulog_add(current->ulog, current->heap, current->pool, addr, size);
}

static _Thread_local struct fw_value_ranges *value_ranges
	__attribute__((tls_model("initial-exec")));

void fw_set_value_ranges(struct fw_value_ranges *v)
{
	value_ranges = v;
}

/* No undo record: see plugin.h for why recovery needs none. The range is remembered
 * for the worker's flush; where it cannot be, or where each flush would be an msync
 * (db->values_logged), an undo record does as well. */
int tips_ulog_value(void *addr, size_t size)
{
	if (!current)
		return tips_set_error(TIPS_EINVAL, "tips_ulog_value outside an index operation");
	struct fw_value_ranges *v = value_ranges;
	if (v && !current->values_logged && size && size <= TIPS_MAX_VALUE &&
	    tips_pool_contains(current->pool, addr, size) &&
	    array_grow((void **)&v->r, &v->cap, v->n + 1, sizeof(*v->r), 1024)) {
		v->r[v->n++] = (struct fw_range){ addr, size };
		return 0;
	}
	return ulog_add(current->ulog, current->heap, current->pool, addr, size);
}

void fw_value_ranges_flush(struct tips_db *db, struct fw_value_ranges *v)
{
	if (!v->n)
		return;
	for (size_t i = 0; i < v->n; i++)
		pm_flush(v->r[i].addr, v->r[i].size);
	pm_drain();
	atomic_fetch_add_explicit(&db->ulog_values, v->n, memory_order_relaxed);
	v->n = 0;
}

int fw_ulog_add_ranges(void *const addr[], const size_t size[], unsigned n)
{
	if (!current)
		return tips_set_error(TIPS_EINVAL, "tips_ulog_add outside an index operation");
	return ulog_add_group(current->ulog, current->heap, current->pool, addr, size, n);
}

void *tips_root(void)
{
	return current ? current->root : NULL;
}

int tips_block_valid(const void *ptr, size_t min_size)
{
	if (!current || !ptr)
		return 0;
	size_t usable = tips_heap_usable_size(current->heap, ptr);
	return usable != 0 && usable >= min_size;
}
