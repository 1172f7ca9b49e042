/*
 * batch_commit.c - tips_batch_commit(): a write batch (tips/batch.h) committed as one
 * OLog append.
 *
 * The batch's operations are grouped by key (util/batch_internal.h) and each key's net
 * effect (its last operation: a put or a delete) becomes one ordinary OLog record. All
 * records are written one after another into the thread's OLog and flushed without a
 * fence; one tail update then makes them durable together (olog_commit: fence 1 for the
 * records, fence 2 for the tail). That tail is the batch's only commit point: the
 * records are not sealed (fw_layout.h), recovery's walk past the persistent tail stops
 * at the first unsealed record, and replay reads nothing past durable_tail, so after a
 * crash the batch is either wholly below the tail or wholly absent, and nothing else
 * in the framework needs to know about batches.
 *
 * The write path is the single write's (db.c), widened to several keys: room in the
 * heap (admission), the OLog and the cache is secured first, without locks; then the
 * keys' cache buckets are locked in address order (so two batches never deadlock, and
 * a bucket two keys share is locked once), conditions are judged under those locks,
 * the records take consecutive commit stamps, are appended and committed, and the
 * cache entries are published (each key's linearization point) before any lock is
 * released. Why this respects every mechanism:
 *  - stamps: each key's record is stamped under its bucket lock, so a key's stamps still
 *    follow its commits, and the OLog stays in stamp order (one owner, increasing
 *    stamps), which replay's merge and its cut rely on;
 *  - replay routing: the batch's records are ordinary records, routed by key to
 *    different workers like any others;
 *  - reclamation: heads only ever move over applied records, so a reclamation that
 *    falls between two records of a batch leaves the applied ones in the index's
 *    durable state and the rest in the OLog; recovery (ULog undo, then replay from the
 *    heads) still yields the whole batch;
 *  - readers: a lookup sees each key switch when its entry is published; while the
 *    commit publishes, a reader of two keys may see one new and one old (tips/batch.h).
 * A batch of one operation is committed as that single write (batch_commit_single):
 * one key is atomic by itself.
 * Invariant: a failed commit returns before ts_take_n(): it has logged and published
 * nothing, and its reservations go back to the thread's credit.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include "framework/framework.h"
#include "util/batch_internal.h"
#include "util/errors_internal.h"

/* One key of the batch being committed: its net effect and where it goes. */
struct pending {
	size_t item;                 /* position of the key's last operation */
	unsigned op;                 /* OLOG_OP_PUT or OLOG_OP_DELETE */
	struct cache_bucket *bucket;
	struct cache_entry *entry;
};

void tips_batch_limit(struct tips_db *db, size_t *max_ops, size_t *max_bytes)
{
	if (!db)
		return;
	uint64_t ops = cache_capacity(db->cache) / 4;
	if (max_ops)
		*max_ops = ops < TIPS_BATCH_MAX_OPS ? (size_t)ops : TIPS_BATCH_MAX_OPS;
	uint64_t size = db->fw->olog_size;
	uint64_t widest = olog_record_size(TIPS_MAX_KEY, TIPS_MAX_VALUE);
	uint64_t room = size - size / 8; /* puts leave an eighth of the OLog for deletes */
	if (max_bytes)
		*max_bytes = room > widest ? (size_t)(room - widest) : 0;
}

static int by_address(const void *a, const void *b)
{
	uintptr_t x = (uintptr_t)*(struct cache_bucket *const *)a;
	uintptr_t y = (uintptr_t)*(struct cache_bucket *const *)b;
	return (x > y) - (x < y);
}

/* Sorts @locks (n buckets) by address, drops repeats, and returns how many remain. */
static size_t unique_buckets(struct cache_bucket **locks, size_t n)
{
	qsort(locks, n, sizeof(*locks), by_address);
	size_t w = 0;
	for (size_t i = 0; i < n; i++)
		if (w == 0 || locks[w - 1] != locks[i])
			locks[w++] = locks[i];
	return w;
}

/* Credit a thread keeps between writes (cache_reserve()'s batch is at most this). */
#define CREDIT_KEEP 64u

/* Tops the thread's cache credit up to @n entries; false if waiting cannot help. */
static bool cache_credit_for(struct tips_db *db, struct thread_ctx *ctx, size_t n)
{
	while (ctx->cache_credit < n) {
		unsigned got = cache_reserve(db->cache, cache_may_wait, db);
		if (!got)
			return false;
		ctx->cache_credit += got;
	}
	return true;
}

/* Gives back cache credit a large batch left beyond what single writes keep, so that
 * one thread never sits on a share of the cache others wait for. */
static void credit_trim(struct tips_db *db, struct thread_ctx *ctx)
{
	if (ctx->cache_credit > CREDIT_KEEP) {
		cache_unreserve(db->cache, ctx->cache_credit - CREDIT_KEEP);
		ctx->cache_credit = CREDIT_KEEP;
	}
}

/* Fills @p with each key's net effect and makes its cache entry; sums the logged
 * bytes (*bytes), the widest record (*widest) and the admission cost (*cost). */
static void prepare(struct tips_db *db, struct tips_batch *b, struct pending *p,
		    uint64_t *bytes, uint64_t *widest, uint64_t *cost, bool *any_put)
{
	*bytes = *widest = *cost = 0;
	*any_put = false;
	for (size_t g = 0; g < b->ngroups; g++) {
		size_t x = batch_group_last(b, g);
		const struct batch_item *it = &b->items[x];
		bool del = batch_op_is_delete(it->op);
		size_t vlen = del ? 0 : it->vlen;
		uint64_t rec = olog_record_size(it->klen, vlen);
		p[g].item = x;
		p[g].op = del ? OLOG_OP_DELETE : OLOG_OP_PUT;
		p[g].bucket = cache_bucket_of(db->cache, cache_key_hash(batch_key(b, x), it->klen));
		/* Start the misses the commit will wait on under the locks: the cache bucket,
		 * and the index's bucket of a condition's lookup. @deep 0, not write_op's 2:
		 * the whole batch's prefetches come before the first lookup, and a lookup
		 * made here would wait for its misses one key at a time. */
		__builtin_prefetch(p[g].bucket, 1, 3);
		if (batch_group_conditional(b, g) && db->ops->prefetch)
			db->ops->prefetch(db->index, batch_key(b, x), it->klen, 0);
		p[g].entry = NULL;
		*bytes += rec;
		*widest = rec > *widest ? rec : *widest;
		*cost += admit_cost(p[g].op, it->klen, vlen);
		*any_put |= !del;
	}
}

static void free_entries(struct pending *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(p[i].entry);
}

static int make_entries(struct tips_batch *b, struct pending *p, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		const struct batch_item *it = &b->items[p[i].item];
		bool del = p[i].op == OLOG_OP_DELETE;
		p[i].entry = cache_entry_new(NULL, NULL, batch_key(b, p[i].item), it->klen,
					     batch_val(b, p[i].item), del ? 0 : it->vlen, del);
		if (!p[i].entry) {
			free_entries(p, i);
			return tips_set_error(TIPS_ENOMEM, "tips_batch_commit: out of DRAM for "
					      "cache entries");
		}
	}
	return 0;
}

/* Judges every condition of the batch; bucket locks held. */
static int check_conditions(struct tips_db *db, struct tips_batch *b, const struct pending *p)
{
	static const char *const names[] = { [BATCH_INSERT] = "insert",
					     [BATCH_UPDATE] = "update",
					     [BATCH_REMOVE] = "remove" };
	for (size_t g = 0; g < b->ngroups; g++) {
		if (!batch_group_conditional(b, g))
			continue;
		size_t x = p[g].item, failed;
		bool present = key_present(db, p[g].bucket, batch_key(b, x), b->items[x].klen);
		int rc = batch_group_check(b, g, present, &failed);
		if (rc) {
			b->failed_op = failed;
			return tips_set_error(rc, "tips_batch_commit: operation %zu (%s): the key "
					      "is %s; nothing was applied", failed,
					      names[b->items[failed].op],
					      rc == TIPS_EKEYEXISTS ? "present" : "absent");
		}
	}
	return 0;
}

/* Logs, commits and publishes the batch; every bucket lock held. */
static void log_and_publish(struct tips_db *db, struct thread_ctx *ctx, struct tips_batch *b,
			    struct pending *p, size_t n, bool *long_chain)
{
	uint64_t ts = ts_take_n(n);
	/* Counted and marked before replay can see a record, and before publishing. */
	uint64_t gen = cache_count_unapplied(db->cache, n);
	unsigned slot = (unsigned)(gen & 1);
	struct olog *log = ctx->log;
	uint64_t tail = atomic_load_explicit(&log->durable_tail, memory_order_relaxed);
	for (size_t i = 0; i < n; i++) {
		const struct batch_item *it = &b->items[p[i].item];
		bool del = p[i].op == OLOG_OP_DELETE;
		p[i].entry->ts = ts + i;
		p[i].entry->pending_slot = slot;
		cache_mark_pending(db->cache, gen,
				   cache_filter_hash(batch_key(b, p[i].item), it->klen));
		olog_put_record(log, &tail, false, OLOG_OP_IN_SLOT(p[i].op, slot), ts + i,
				batch_key(b, p[i].item), it->klen,
				batch_val(b, p[i].item), del ? 0 : it->vlen, (uint64_t)p[i].entry);
	}
	olog_commit(log, tail, n); /* the batch's durability point */
	for (size_t i = 0; i < n; i++)
		long_chain[i] = cache_publish(db->cache, p[i].bucket, p[i].entry);
}

static void count_batch(struct tips_db *db)
{
	struct thread_ctx *ctx = ctx_get(db);
	if (ctx)
		count(&ctx->c.batches, 1);
}

/* The facade's single writes, for a batch of one operation (batch_commit_single). */
static int single_put(void *s, const void *k, size_t kl, const void *v, size_t vl)
{
	return tips_put(s, k, kl, v, vl);
}

static int single_insert(void *s, const void *k, size_t kl, const void *v, size_t vl)
{
	return tips_insert(s, k, kl, v, vl);
}

static int single_update(void *s, const void *k, size_t kl, const void *v, size_t vl)
{
	return tips_update(s, k, kl, v, vl);
}

static int single_remove(void *s, const void *k, size_t kl)
{
	return tips_remove(s, k, kl); /* checked */
}

static const struct batch_single_ops single_ops = {
	single_put, single_insert, single_update, NULL, single_remove
};

int tips_batch_commit(struct tips_db *db, struct tips_batch *b)
{
	if (!db)
		return tips_set_error(TIPS_EINVAL, "tips_batch_commit: no database");
	int rc = batch_commit_check(b, "tips_batch_commit");
	if (rc || b->n == 0)
		return rc;
	if (b->n == 1) {
		rc = batch_commit_single(b, db, &single_ops);
		if (rc == 0)
			count_batch(db);
		return rc;
	}
	if ((rc = batch_group(b)))
		return rc;
	size_t n = b->ngroups, max_ops;
	tips_batch_limit(db, &max_ops, NULL);
	if (n > max_ops)
		return tips_set_error(TIPS_ETOOBIG, "tips_batch_commit: %zu keys, this database "
				      "takes at most %zu in one batch (tips_batch_limit)", n, max_ops);
	/* Scratch: the pending keys, their buckets to lock, and which chains grew long. */
	size_t need = n * (sizeof(struct pending) + sizeof(struct cache_bucket *) + sizeof(bool));
	struct pending *p = batch_scratch(b, need);
	if (!p)
		return tips_set_error(TIPS_ENOMEM, "tips_batch_commit: out of DRAM");
	struct cache_bucket **locks = (struct cache_bucket **)(p + n);
	bool *long_chain = (bool *)(locks + n);
	uint64_t bytes, widest, cost;
	bool any_put;
	prepare(db, b, p, &bytes, &widest, &cost, &any_put);
	uint64_t olog_bytes = bytes + widest; /* a PAD is shorter than the record after it */
	uint64_t size = db->fw->olog_size;
	if (olog_bytes > size - size / 8)
		return tips_set_error(TIPS_ETOOBIG, "tips_batch_commit: %llu bytes of records, "
				      "an OLog of %llu bytes takes at most %llu in one batch "
				      "(tips_batch_limit)", (unsigned long long)bytes,
				      (unsigned long long)size,
				      (unsigned long long)(size - size / 8 - widest));
	struct thread_ctx *ctx = ctx_get(db);
	if (!ctx)
		return tips_set_error(TIPS_ENOMEM, "out of DRAM for the thread's context");
	if (!ctx->log)
		ctx->log = olog_take(db, ctx);
	if ((rc = admit(db, ctx, any_put ? OLOG_OP_PUT : OLOG_OP_DELETE, cost)))
		return rc;
	if ((rc = olog_wait_room(db, ctx, olog_bytes, !any_put, true)))
		goto refund;
	if (!cache_credit_for(db, ctx, n)) {
		rc = refuse(db, "no DRAM cache room");
		goto refund;
	}
	if ((rc = make_entries(b, p, n)))
		goto refund;
	for (size_t i = 0; i < n; i++)
		locks[i] = p[i].bucket;
	size_t nlocks = unique_buckets(locks, n);
	for (size_t i = 0; i < nlocks; i++)
		cache_bucket_lock(locks[i]);
	rc = check_conditions(db, b, p);
	if (rc == 0) {
		ctx->cache_credit -= (unsigned)n;
		log_and_publish(db, ctx, b, p, n, long_chain);
	}
	for (size_t i = 0; i < nlocks; i++)
		cache_bucket_unlock(locks[i]);
	if (rc) {
		free_entries(p, n);
		goto refund;
	}
	for (size_t i = 0; i < n; i++)
		if (long_chain[i])
			cache_queue_gc(db->cache, p[i].bucket);
	count(&ctx->c.writes, n);
	count(&ctx->c.batches, 1);
	count(&ctx->c.olog_bytes, bytes);
	if (atomic_load(&db->persist_idle))
		replay_wake(db);
	credit_trim(db, ctx);
	return 0;
refund:
	ctx->heap_credit += cost;
	credit_trim(db, ctx);
	return rc;
}
