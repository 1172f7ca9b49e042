/*
 * db.c - the TIPS facade (TIPS §3.2.6, §4.1): open/close, the write path, lookups,
 * scans, statistics, and the per-thread state behind them.
 *
 * Write path (design decision "Data flow"): with the key's cache bucket locked, decide the
 * outcome (insert: key absent; update, delete: key present; from the cache's newest
 * entry, else from the index), take a commit stamp, append the record to the thread's
 * OLog, sealed, and persist it (one fence: the durability point), then publish the cache
 * entry (the linearization point). Room in the OLog and in the cache is secured before the
 * lock is taken, so a writer never waits while holding a bucket. So is heap room: a
 * write is admitted only if replay will be able to apply it (admit.c); one that
 * cannot be is refused with TIPS_ENOSPC, and a delete, which makes room, is admitted
 * into the headroom that puts leave free.
 * Reads never fence and never lock the cache: the newest cache entry of the key
 * answers (a tombstone means absent), else the index does.
 *
 * Threads need no registration: a thread's context (its OLog slot and counters) is
 * made on its first call and released by a thread-exit destructor; a released slot is
 * reused by the next new thread, and its unapplied records are still replayed.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <sys/random.h>
#include <unistd.h>
#include <zlib.h>

#include "heap/heap_internal.h"
#include "pm/pm.h"
#include "framework/framework.h"
#include "util/errors_internal.h"
#include "util/grace.h"
#include "util/kv.h"
#include "util/scan_below.h"
#include "util/version_internal.h"

#define DEFAULT_POOL_SIZE (1ull << 30)
#define DEFAULT_EXPECTED_KEYS (1ull << 20)
#define DEFAULT_LOG_BYTES (32ull << 20)
#define MAX_OLOG_SLOTS 256u
#define MIN_OLOG_SIZE (256ull << 10)

/* ---- per-thread contexts ----------------------------------------------------------- */

static pthread_mutex_t ctx_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_key_t ctx_key;
static pthread_once_t ctx_key_once = PTHREAD_ONCE_INIT;
static _Thread_local struct thread_ctx *thread_ctxs __attribute__((tls_model("initial-exec")));
static _Atomic uint64_t next_db_id = 1;

static void counters_add(struct thread_counters *to, const struct thread_counters *from)
{
	atomic_fetch_add(&to->hits, atomic_load(&from->hits));
	atomic_fetch_add(&to->misses, atomic_load(&from->misses));
	atomic_fetch_add(&to->writes, atomic_load(&from->writes));
	atomic_fetch_add(&to->batches, atomic_load(&from->batches));
	atomic_fetch_add(&to->olog_bytes, atomic_load(&from->olog_bytes));
	atomic_fetch_add(&to->waits, atomic_load(&from->waits));
}

/* Gives the slot back; its records stay for replay. ctx_lock held. */
static void ctx_detach(struct thread_ctx *ctx)
{
	struct tips_db *db = ctx->db;
	if (!db)
		return;
	counters_add(&db->retired, &ctx->c);
	cache_unreserve(db->cache, ctx->cache_credit);
	ctx->cache_credit = 0;
	admit_release(db, ctx->heap_credit);
	ctx->heap_credit = 0;
	cache_stash_free(&ctx->stash);
	backlog_view_free(ctx->view);
	ctx->view = NULL;
	if (ctx->log) {
		pthread_mutex_lock(&db->ologs.lock);
		ctx->log->in_use = false;
		pthread_cond_broadcast(&db->ologs.room);
		pthread_mutex_unlock(&db->ologs.lock);
		ctx->log = NULL;
	}
	for (struct thread_ctx **p = &db->ctxs; *p; p = &(*p)->next_in_db)
		if (*p == ctx) {
			*p = ctx->next_in_db;
			break;
		}
	ctx->db = NULL;
}

static void thread_exit(void *arg)
{
	struct thread_ctx *ctx = arg;
	thread_ctxs = NULL; /* a later destructor calling libtips starts afresh */
	pthread_mutex_lock(&ctx_lock);
	while (ctx) {
		struct thread_ctx *next = ctx->next_in_thread;
		ctx_detach(ctx);
		free(ctx);
		ctx = next;
	}
	pthread_mutex_unlock(&ctx_lock);
}

static void ctx_key_make(void)
{
	pthread_key_create(&ctx_key, thread_exit);
}

/* ctx_get()'s slow path: another database's context heads the list, or none yet. */
static struct thread_ctx *ctx_find_or_make(struct tips_db *db)
{
	for (struct thread_ctx *c = thread_ctxs; c; c = c->next_in_thread)
		if (c->db_id == db->id)
			return c;
	pthread_once(&ctx_key_once, ctx_key_make);
	struct thread_ctx *c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->db_id = db->id;
	pthread_mutex_lock(&ctx_lock);
	/* Drop contexts of databases closed since (their ids never come back). */
	for (struct thread_ctx **p = &thread_ctxs; *p;) {
		struct thread_ctx *dead = *p;
		if (!dead->db) {
			*p = dead->next_in_thread;
			free(dead);
		} else
			p = &dead->next_in_thread;
	}
	c->db = db;
	c->next_in_db = db->ctxs;
	db->ctxs = c;
	c->next_in_thread = thread_ctxs;
	thread_ctxs = c;
	pthread_mutex_unlock(&ctx_lock);
	pthread_setspecific(ctx_key, thread_ctxs);
	return c;
}

/* The calling thread's context for @db; NULL only when DRAM ran out. The common case
 * (the thread's newest context is this database's) stays inline: it is on every
 * operation's path, and a call there sits between two lookups' cache misses. */
struct thread_ctx *ctx_get(struct tips_db *db)
{
	struct thread_ctx *c = thread_ctxs;
	if (__builtin_expect(c != NULL && c->db_id == db->id, 1))
		return c;
	return ctx_find_or_make(db);
}

/* A free OLog slot for the calling thread; waits while every slot is taken. */
struct olog *olog_take(struct tips_db *db, struct thread_ctx *ctx)
{
	pthread_mutex_lock(&db->ologs.lock);
	for (;;) {
		for (unsigned i = 0; i < db->ologs.n; i++)
			if (!db->ologs.logs[i].in_use) {
				db->ologs.logs[i].in_use = true;
				if (i >= atomic_load_explicit(&db->ologs.live, memory_order_relaxed))
					atomic_store_explicit(&db->ologs.live, i + 1,
							      memory_order_release);
				pthread_mutex_unlock(&db->ologs.lock);
				return &db->ologs.logs[i];
			}
		count(&ctx->c.waits, 1);
		pthread_cond_wait(&db->ologs.room, &db->ologs.lock);
	}
}

int refuse(struct tips_db *db, const char *what)
{
	atomic_fetch_add_explicit(&db->refused, 1, memory_order_relaxed);
	return tips_set_error(TIPS_ENOSPC, "%s: the pool's heap is full (replay cannot apply "
			      "more writes); delete keys or grow the pool (tips pool grow)", what);
}

/* Waits until the thread's OLog has room for @size bytes; TIPS_ENOSPC if replay is
 * stalled on a full heap (the room would only come back after it). Puts leave an
 * eighth of the OLog free, so that deletes can still be logged while replay is stuck
 * on puts it cannot apply.
 * room_wanted is one flag for every waiter, and any reclamation clears it, also one
 * whose new heads were taken before this thread's last records were applied (it began
 * while they were being committed). So a waiter that wakes without room raises it
 * again: otherwise replay applies those records and, the flag being clear, reclaims
 * only past half an OLog, while a write of more than 3/8 of it (a 1 MiB string on a
 * 2 MiB OLog) needs less than that in use, and the writer waits forever. */
int olog_wait_room(struct tips_db *db, struct thread_ctx *ctx, uint64_t size,
		   bool is_delete, bool batch)
{
	struct olog *log = ctx->log;
	uint64_t keep = is_delete ? 0 : log->size / 8;
	bool (*has_room)(const struct olog *, uint64_t, uint64_t) =
		batch ? olog_has_room_bytes : olog_has_room;
	if (has_room(log, size, keep))
		return 0;
	count(&ctx->c.waits, 1);
	atomic_store(&db->room_wanted, 1);
	replay_wake(db);
	bool stalled = false;
	pthread_mutex_lock(&db->ologs.lock);
	while (!has_room(log, size, keep) && !(stalled = atomic_load(&db->stalled) != 0)) {
		if (!atomic_load(&db->room_wanted)) {
			/* a reclamation cleared it (and broadcast, under this lock) */
			atomic_store(&db->room_wanted, 1);
			pthread_mutex_unlock(&db->ologs.lock);
			replay_wake(db);
			pthread_mutex_lock(&db->ologs.lock);
			continue;
		}
		pthread_cond_wait(&db->ologs.room, &db->ologs.lock);
	}
	pthread_mutex_unlock(&db->ologs.lock);
	return stalled ? refuse(db, "no OLog room") : 0;
}

/* cache_reserve()'s may_wait: wake replay; waiting is useless once it is stalled. */
bool cache_may_wait(void *arg)
{
	struct tips_db *db = arg;
	replay_wake(db);
	return atomic_load(&db->stalled) == 0;
}

#define ADMIT_BATCH (64u << 10) /* heap bytes a thread reserves at a time */

/* Admits a write of @cost heap bytes (admit.c), from the thread's credit or a new
 * reservation; asks replay to make room before refusing. */
int admit(struct tips_db *db, struct thread_ctx *ctx, unsigned op, uint64_t cost)
{
	bool del = op == OLOG_OP_DELETE;
	if (db->admit_all)
		return 0;
	if (!del && atomic_load_explicit(&db->stalled, memory_order_relaxed))
		return refuse(db, "write refused");
	if (ctx->heap_credit >= cost) {
		ctx->heap_credit -= cost;
		return 0;
	}
	admit_release(db, ctx->heap_credit);
	ctx->heap_credit = 0;
	for (int attempt = 0;; attempt++) {
		uint64_t got = admit_reserve(db, cost, cost > ADMIT_BATCH ? cost : ADMIT_BATCH, del);
		if (got) {
			ctx->heap_credit = got - cost;
			return 0;
		}
		if (attempt == 2)
			return refuse(db, "write refused");
		admit_make_room(db); /* apply, then reclaim: deferred frees come back */
	}
}

/* ---- the write path ---------------------------------------------------------------- */

/* Is @key present, judged under its bucket lock: the cache's newest entry, else the
 * index (which then holds every write of the key: entries leave only once applied). */
bool key_present(struct tips_db *db, struct cache_bucket *b, const void *key,
		 size_t klen)
{
	struct cache_entry *e = cache_find(b, key, klen);
	if (e)
		return !e->tombstone;
	size_t vlen;
	struct error_size_state saved = error_size_save();
	int rc = db->ops->lookup(db->index, key, klen, NULL, 0, &vlen);
	error_size_restore(saved); /* a present key's TIPS_ESIZE is not the caller's error */
	return rc == 0 || rc == TIPS_ESIZE; /* found: with a value, longer than 0 bytes */
}

static int write_op(struct tips_db *db, unsigned op, const void *key, size_t klen,
		    const void *val, size_t vlen)
{
	int rc = write_args_check(db, key, klen, val, vlen);
	if (rc)
		return rc;
	struct thread_ctx *ctx = ctx_get(db);
	if (!ctx)
		return tips_set_error(TIPS_ENOMEM, "out of DRAM for the thread's context");
	if (!ctx->log)
		ctx->log = olog_take(db, ctx);
	/* The bucket is a likely DRAM miss: start loading it now, for writing, so that it
	 * overlaps admission and the entry's allocation instead of the lock. */
	struct cache_bucket *b = cache_bucket_of(db->cache, cache_key_hash(key, klen));
	__builtin_prefetch(b, 1, 3);
	/* So are the lines the outcome lookup reads after the bucket lock, whose locked
	 * instruction no later load passes (@deep 2: the index may walk them now). */
	if (op != OLOG_OP_PUT && db->ops->prefetch) {
		struct error_size_state saved = error_size_save(); /* as key_present */
		db->ops->prefetch(db->index, key, klen, 2);
		error_size_restore(saved);
	}
	uint64_t size = olog_record_size(klen, vlen);
	uint64_t cost = admit_cost(op, klen, vlen);
	if ((rc = admit(db, ctx, op, cost)))
		return rc;
	if ((rc = olog_wait_room(db, ctx, size, op == OLOG_OP_DELETE, false)))
		goto refund;
	if (!ctx->cache_credit &&
	    !(ctx->cache_credit = cache_reserve(db->cache, cache_may_wait, db))) {
		rc = refuse(db, "no DRAM cache room");
		goto refund;
	}
	struct cache_entry *e = cache_entry_new(db->cache, &ctx->stash, key, klen, val, vlen,
						op == OLOG_OP_DELETE);
	if (!e) {
		rc = tips_set_error(TIPS_ENOMEM, "out of DRAM for a cache entry");
		goto refund;
	}
	cache_bucket_lock(b);
	if (op != OLOG_OP_PUT) {
		bool present = key_present(db, b, key, klen);
		if (op == OLOG_OP_INSERT && present)
			rc = tips_set_error(TIPS_EKEYEXISTS, "tips_insert: the key is present");
		else if (op != OLOG_OP_INSERT && !present)
			rc = tips_set_error(TIPS_ENOTFOUND, "%s: the key is absent",
					    op == OLOG_OP_UPDATE ? "tips_update" : "tips_remove");
		if (rc) {
			cache_bucket_unlock(b);
			free(e);
			goto refund;
		}
	}
	ctx->cache_credit--;
	e->ts = ts_take(); /* under the bucket lock: a key's stamps follow its commits */
	/* Counted and marked before replay can see the record, and before publishing. */
	uint64_t gen = cache_count_unapplied(db->cache, 1);
	e->pending_slot = gen & 1;
	cache_mark_pending(db->cache, gen, cache_filter_hash(key, klen));
	olog_append(ctx->log, OLOG_OP_IN_SLOT(op, e->pending_slot), e->ts, key, klen, val, vlen,
		    (uint64_t)e);
	bool long_chain = cache_publish(db->cache, b, e);
	cache_bucket_unlock(b);
	if (long_chain)
		cache_queue_gc(db->cache, b);
	count(&ctx->c.writes, 1);
	count(&ctx->c.olog_bytes, size);
	if (atomic_load(&db->persist_idle))
		replay_wake(db);
	return 0;
refund:
	ctx->heap_credit += cost;
	return rc;
}

int tips_insert(struct tips_db *db, const void *key, size_t klen, const void *val,
		size_t vlen)
{
	return write_op(db, OLOG_OP_INSERT, key, klen, val, vlen);
}

int tips_update(struct tips_db *db, const void *key, size_t klen, const void *val,
		size_t vlen)
{
	return write_op(db, OLOG_OP_UPDATE, key, klen, val, vlen);
}

int tips_put(struct tips_db *db, const void *key, size_t klen, const void *val, size_t vlen)
{
	return write_op(db, OLOG_OP_PUT, key, klen, val, vlen);
}

int tips_remove(struct tips_db *db, const void *key, size_t klen)
{
	return write_op(db, OLOG_OP_DELETE, key, klen, NULL, 0);
}

/* ---- lookups ----------------------------------------------------------------------- */

/* tips_get() when the cache may hold a newer value than the index. Out of line: the
 * common case, nothing unapplied, never comes here. */
static int get_through_cache(struct tips_db *db, const void *key, size_t klen, void *val,
			     size_t cap, size_t *vlen)
{
	struct thread_ctx *ctx = ctx_get(db);
	int rc = 1;
	struct cache_bucket *b = cache_bucket_of(db->cache, cache_key_hash(key, klen));
	cache_read_lock();
	struct cache_entry *e = cache_find(b, key, klen);
	if (e) {
		if (e->tombstone)
			rc = TIPS_ENOTFOUND;
		else {
			*vlen = e->vlen;
			if (cap)
				memcpy(val, e->data + e->klen, e->vlen < cap ? e->vlen : cap);
			rc = 0;
		}
	}
	cache_read_unlock();
	if (rc == 1) {
		if (ctx)
			count(&ctx->c.misses, 1);
		return db->ops->lookup(db->index, key, klen, val, cap, vlen);
	}
	if (ctx)
		count(&ctx->c.hits, 1);
	return rc;
}

static __attribute__((noinline, cold)) int get_too_long(size_t vlen, size_t cap)
{
	return tips_set_error_size("tips_get", vlen, cap);
}

/* Whether the index alone answers a get of @key: every counted write is applied, or
 * none of @key's can be unapplied (the pending filter). Inline in tips_get's fast path,
 * where the latency of every instruction before the index's first miss is paid. */
static inline bool index_answers(struct tips_db *db, const void *key, size_t klen)
{
	return __builtin_expect(cache_all_applied(db->cache), 1) ||
	       !cache_may_be_pending(db->cache, cache_filter_hash(key, klen));
}

/* tips_get() but for its fast path: the key's bit in the pending filter is set, or
 * the index is not one of libtips' own, which may return 0 for a value longer than
 * @cap. Only a key the filter marks goes through the cache. */
static __attribute__((noinline)) int get_slow(struct tips_db *db, const void *key,
					      size_t klen, void *val, size_t cap, size_t *vlen)
{
	int rc;
	if (index_answers(db, key, klen))
		rc = db->ops->lookup(db->index, key, klen, val, cap, vlen);
	else
		rc = get_through_cache(db, key, klen, val, cap, vlen);
	if (rc == 0 && *vlen > cap)
		return get_too_long(*vlen, cap);
	return rc;
}

/*
 * The common case is short on purpose: with nothing unapplied in the cache (or nothing
 * of this key's, by the pending filter) and one of libtips' own indexes (which return
 * TIPS_ESIZE themselves), a get is a tail call to
 * the index's lookup, not even counted (a per-thread counter there cost 15-20 ns of a
 * 90 ns tips-clht lookup), with no check after it: every instruction here sits between
 * two lookups' cache misses, and the frame and the length check after the call cost
 * tips-art about a quarter of its lookup rate (docs/indexes.md, "Fifth pass").
 */
int tips_get(struct tips_db *db, const void *key, size_t klen, void *val, size_t cap,
	     size_t *vlen)
{
	if (!db || !key || klen == 0 || !vlen || (cap && !val))
		return tips_set_error(TIPS_EINVAL, "tips_get: database, key, vlen required");
	if (klen > TIPS_MAX_KEY)
		return TIPS_ENOTFOUND; /* no such key can have been written */
	if (__builtin_expect(db->lookup_sizes, 1) && index_answers(db, key, klen))
		return db->ops->lookup(db->index, key, klen, val, cap, vlen);
	return get_slow(db, key, klen, val, cap, vlen);
}

/* ---- scans ------------------------------------------------------------------------- */

/*
 * A scan reads two sources: the index (everything replay has applied) and the overlay,
 * the OLog records replay has not applied yet. Both are copied while the scan lock is
 * held (the OLog may be reclaimed once it is released) and merged outside it, while
 * the caller's function is called, so that it may call the facade.
 *
 * Both copies are runs of records in one growing buffer each (struct scan_run): a
 * record is its two lengths and the key and value bytes, 8-byte aligned (24 bytes for
 * an 8-byte key and value), so collecting a key from the index costs one bounds check
 * and three stores, and a scan of about a hundred short keys allocates nothing (the
 * first buffer is on the caller's stack).
 */

/* A record of a scan_run: this header (read and written with memcpy, so the buffer
 * may be any byte array), klen key bytes, the value's, padding to 8 bytes. An overlay
 * delete has SCAN_TOMBSTONE in vlen. */
struct scan_rec {
	uint32_t klen, vlen;
};

#define SCAN_TOMBSTONE 0x80000000u /* TIPS_MAX_VALUE is far below it */
#define SCAN_REC_DATA(p) ((p) + sizeof(struct scan_rec))

static inline size_t scan_rec_size(size_t klen, size_t vlen)
{
	return (sizeof(struct scan_rec) + klen + vlen + 7) & ~(size_t)7;
}

static inline struct scan_rec scan_rec_at(const unsigned char *p)
{
	struct scan_rec h;
	memcpy(&h, p, sizeof(h));
	return h;
}

struct scan_run {
	unsigned char *p;
	size_t n, cap;      /* bytes used and available */
	size_t last;        /* offset of the last record put */
	size_t count;       /* records */
	unsigned char *inl; /* the caller's first buffer (never freed), or NULL */
};

/* Grows *@buf (@inl until it first grows) from @used meaningful bytes to @cap bytes. */
static bool scan_buf_grow(void **buf, const void *inl, size_t used, size_t cap)
{
	void *p;
	if (*buf && *buf == inl) {
		p = malloc(cap);
		if (p)
			memcpy(p, *buf, used);
	} else {
		p = realloc(*buf, cap);
	}
	if (!p)
		return false;
	*buf = p;
	return true;
}

/* Appends a record to @r. False without memory (@r unchanged). */
static inline bool scan_run_put(struct scan_run *r, const void *key, size_t klen,
				const void *val, size_t vlen, uint32_t flags)
{
	size_t need = scan_rec_size(klen, vlen);
	if (__builtin_expect(r->cap - r->n < need, 0)) {
		size_t cap = r->cap ? r->cap : 4096;
		while (cap - r->n < need)
			cap *= 2;
		if (!scan_buf_grow((void **)&r->p, r->inl, r->n, cap))
			return false;
		r->cap = cap;
	}
	unsigned char *x = r->p + r->n, *d = SCAN_REC_DATA(x);
	struct scan_rec h = { (uint32_t)klen, (uint32_t)vlen | flags };
	memcpy(x, &h, sizeof(h));
	if (klen == 8 && vlen == 8) { /* the common case: two word copies, no calls */
		memcpy(d, key, 8);
		memcpy(d + 8, val, 8);
	} else {
		memcpy(d, key, klen);
		if (vlen)
			memcpy(d + klen, val, vlen);
	}
	r->last = r->n;
	r->n += need;
	r->count++;
	return true;
}

static void scan_run_free(struct scan_run *r)
{
	if (r->p != r->inl)
		free(r->p);
}

/* An OLog record of the overlay, read in place (under the scan lock). */
struct ov_ref {
	const struct olog_rec *r;
	uint64_t ts;
};

struct ov_list {
	struct ov_ref *v;
	size_t n, cap;
	struct ov_ref *inl; /* as in scan_run */
};

static bool ov_add(struct ov_list *l, const struct olog_rec *r)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 64;
		if (!scan_buf_grow((void **)&l->v, l->inl, l->n * sizeof(*l->v),
				   cap * sizeof(*l->v)))
			return false;
		l->cap = cap;
	}
	l->v[l->n++] = (struct ov_ref){ r, OLOG_REC_TS(r) };
	return true;
}

static int ov_by_key_ts(const void *pa, const void *pb)
{
	const struct ov_ref *a = pa, *b = pb;
	int c = kv_cmp(a->r->data, a->r->klen, b->r->data, b->r->klen);
	return c ? c : (a->ts > b->ts) - (a->ts < b->ts);
}

struct index_collect {
	struct scan_run run;
	bool out_of_memory; /* the index stops when told to; this says why */
};

static int collect_index(const void *key, size_t klen, const void *val, size_t vlen,
			 void *arg)
{
	struct index_collect *c = arg;
	if (__builtin_expect(scan_run_put(&c->run, key, klen, val, vlen, 0), 1))
		return 0;
	c->out_of_memory = true;
	return 1;
}

/*
 * Every OLog write (stamp <= @scan_ts) of a key >= start that replay has not applied
 * yet, in OLog order, and in *@deletes how many of them are deletes. Records below an
 * OLog's `applied` are skipped: the index already holds them (or a newer write of their
 * key, since a key's records are applied in stamp order), and the index is read after
 * this. So the overlay's size is the replay backlog, not everything since the last
 * reclamation.
 */
static int olog_overlay(struct tips_db *db, const void *start, size_t klen, uint64_t scan_ts,
			struct ov_list *out, size_t *deletes)
{
	size_t dels = 0;
	for (unsigned i = 0, live = olog_live(&db->ologs); i < live; i++) {
		struct olog *l = &db->ologs.logs[i];
		struct olog_cursor c = olog_cursor_at(
			l, atomic_load_explicit(&l->applied, memory_order_acquire),
			atomic_load_explicit(&l->durable_tail, memory_order_acquire));
		const struct olog_rec *r;
		while ((r = olog_next(l, &c))) {
			if (OLOG_REC_TS(r) > scan_ts || kv_cmp(r->data, r->klen, start, klen) < 0)
				continue;
			if (!ov_add(out, r))
				return TIPS_ENOMEM;
			dels += OLOG_REC_OP(r) == OLOG_OP_DELETE;
		}
	}
	*deletes = dels;
	return 0;
}

/*
 * The overlay's writes that can be among the scan's first keys, newest per key, sorted,
 * copied into @to (tombstones marked). When the index gave all it was asked for, its
 * last record @last (else NULL) bounds the result: at most one key per overlay delete of the index's
 * keys is hidden, and the index was asked for that many more than the scan needs, so
 * at least `count` keys at or below @last remain and no write above @last can be among
 * the first `count`. Those are dropped before sorting, so a replay backlog spread over
 * the key space costs one compare per record, not a sort.
 */
static int overlay_copy(struct ov_list *ov, const unsigned char *last, struct scan_run *to)
{
	size_t w = 0;
	uint32_t last_klen = last ? scan_rec_at(last).klen : 0;
	for (size_t i = 0; i < ov->n; i++)
		if (!last || kv_cmp(ov->v[i].r->data, ov->v[i].r->klen, SCAN_REC_DATA(last),
				     last_klen) <= 0)
			ov->v[w++] = ov->v[i];
	ov->n = w;
	if (ov->n > 1)
		qsort(ov->v, ov->n, sizeof(*ov->v), ov_by_key_ts);
	for (size_t i = 0; i < ov->n; i++) {
		const struct olog_rec *r = ov->v[i].r;
		if (i + 1 < ov->n && kv_cmp(r->data, r->klen, ov->v[i + 1].r->data,
					     ov->v[i + 1].r->klen) == 0)
			continue; /* keep the newest (last) of each key */
		bool del = OLOG_REC_OP(r) == OLOG_OP_DELETE;
		if (!scan_run_put(to, r->data, r->klen, r->data + r->klen, del ? 0 : r->vlen,
				  del ? SCAN_TOMBSTONE : 0))
			return TIPS_ENOMEM;
	}
	return 0;
}

/* Calls @fn with the first @count keys of the index's run @ix merged with the
 * overlay's @ov (which wins on equal keys; its tombstones drop the key). Returns the
 * number of keys passed. */
static long scan_emit(const struct scan_run *ix, const struct scan_run *ov, size_t count,
		      tips_scan_fn fn, void *arg)
{
	const unsigned char *i = ix->p, *iend = ix->p + ix->n;
	const unsigned char *j = ov->p, *jend = ov->p + ov->n;
	long n = 0;
	if (j == jend) { /* no overlay key in range: the index's keys as they are */
		while (i < iend && (size_t)n < count) {
			struct scan_rec a = scan_rec_at(i);
			const unsigned char *d = SCAN_REC_DATA(i);
			i += scan_rec_size(a.klen, a.vlen);
			n++;
			if (fn(d, a.klen, d + a.klen, a.vlen, arg))
				break;
		}
		return n;
	}
	while ((size_t)n < count && (i < iend || j < jend)) {
		struct scan_rec a = i < iend ? scan_rec_at(i) : (struct scan_rec){ 0, 0 };
		struct scan_rec b = j < jend ? scan_rec_at(j) : (struct scan_rec){ 0, 0 };
		int c = i == iend ? 1 : j == jend ? -1 :
			kv_cmp(SCAN_REC_DATA(i), a.klen, SCAN_REC_DATA(j), b.klen);
		const unsigned char *d;
		uint32_t kl, vl;
		if (c < 0) {
			d = SCAN_REC_DATA(i), kl = a.klen, vl = a.vlen;
			i += scan_rec_size(a.klen, a.vlen);
		} else {
			if (c == 0)
				i += scan_rec_size(a.klen, a.vlen);
			d = SCAN_REC_DATA(j), kl = b.klen, vl = b.vlen & ~SCAN_TOMBSTONE;
			j += scan_rec_size(kl, vl);
			if (b.vlen & SCAN_TOMBSTONE)
				continue;
		}
		n++;
		if (fn(d, kl, d + kl, vl, arg))
			break;
	}
	return n;
}

/* A scan of up to about 128 keys of up to 8 bytes with 8-byte values keeps the
 * index's keys on the caller's stack, and up to 32 overlay records: a short scan
 * allocates nothing. */
#define SCAN_INLINE_BYTES 3072
#define SCAN_INLINE_OVERLAY 32

/* A scan's negative result, with the message tips_errormsg() gives for it. */
static long scan_error(long rc)
{
	return rc == TIPS_ENOMEM ? tips_set_error(TIPS_ENOMEM, "tips_scan: out of DRAM") : rc;
}

/* The caller's function and what was passed to it. */
struct emit {
	tips_scan_fn fn;
	void *arg;
	size_t count;
	long n;    /* pairs passed to fn */
	bool stop; /* fn asked to stop, or count reached */
};

static int emit_pair(struct emit *e, const void *key, size_t klen, const void *val,
		     size_t vlen)
{
	e->n++;
	if (e->fn(key, klen, val, vlen, e->arg) || (size_t)e->n >= e->count) {
		e->stop = true;
		return 1;
	}
	return 0;
}

/* A scan that merges the overlay with the index's keys (count > 0): the general path,
 * and the rest of a bounded scan. */
static long scan_merged(struct tips_db *db, const void *start, size_t klen, size_t count,
			tips_scan_fn fn, void *arg)
{
	_Alignas(8) unsigned char inl_bytes[SCAN_INLINE_BYTES];
	struct ov_ref inl_ov[SCAN_INLINE_OVERLAY];
	struct ov_list overlay = { inl_ov, 0, SCAN_INLINE_OVERLAY, inl_ov };
	struct index_collect collected = {
		{ inl_bytes, 0, SCAN_INLINE_BYTES, 0, 0, inl_bytes },
		false
	};
	struct scan_run ov = { 0 }; /* the overlay's keys that the result may hold */
	size_t deletes = 0;
	long rc;
	pthread_rwlock_rdlock(&db->scan_lock); /* reclamation may not move heads now */
	uint64_t scan_ts = ts_scan_point();
	rc = olog_overlay(db, start, klen, scan_ts, &overlay, &deletes);
	/* Each overlay delete can hide one index key: ask the index for that many more. */
	size_t want = count > SIZE_MAX - deletes ? SIZE_MAX : count + deletes;
	if (rc == 0) {
		long got = db->ops->scan(db->index, start, klen, want, collect_index, &collected);
		if (got < 0)
			rc = got;
		else if (collected.out_of_memory)
			rc = TIPS_ENOMEM;
	}
	if (rc == 0 && overlay.n) {
		const struct scan_run *ix = &collected.run;
		rc = overlay_copy(&overlay, ix->count >= want ? ix->p + ix->last : NULL, &ov);
	}
	pthread_rwlock_unlock(&db->scan_lock);
	if (overlay.v != overlay.inl)
		free(overlay.v);
	long n = rc ? rc : scan_emit(&collected.run, &ov, count, fn, arg);
	scan_run_free(&collected.run);
	scan_run_free(&ov);
	if (rc)
		return scan_error(rc);
	return n;
}

/*
 * Bounded scans, the usual path for libtips' own indexes (db->scan_bounded). Inside a
 * read section, the smallest key >= start among the writes replay has not applied is
 * found (the bound) and copied, from the calling thread's backlog view (backlog_view.c:
 * a sorted index it keeps of the backlog, reading only the records appended since its
 * last scan; a backlog too large for it makes the whole scan a merged one). Nothing
 * else of the overlay is copied. The index's keys below
 * the bound go straight to the caller's function: no overlay write is among them and no
 * overlay delete hides one of them, so the index is asked for exactly `count`; an index
 * with a bounded scan of its own (util/scan_below.h: tips-art) stops at the bound
 * itself, and the others get a callback that compares each key with it. When the index
 * reaches the bound, or runs out of keys before `count`, the rest of the scan, from the
 * bound on, is a merged scan (scan_merged), which reads the overlay again. With a
 * backlog spread over the key space a short scan seldom reaches the bound
 * (docs/indexes.md, "Eighth pass").
 */
struct bounded {
	struct emit out;
	const void *bound;     /* the smallest overlay key >= start */
	size_t bound_klen;
};

static int bounded_index_key(const void *key, size_t klen, const void *val, size_t vlen,
			     void *arg)
{
	struct bounded *b = arg;
	if (kv_cmp(key, klen, b->bound, b->bound_klen) >= 0)
		return 1; /* the merged scan takes over from the bound */
	return emit_pair(&b->out, key, klen, val, vlen);
}

/* The index's keys >= @start and < @bound, to @fn (util/scan_below.h's contract). */
static long scan_index_below(struct tips_db *db, const void *start, size_t klen, size_t count,
			     const void *bound, size_t blen, bool *more, tips_scan_fn fn,
			     void *arg)
{
	if (db->scan_below) /* the index stops at the bound itself */
		return db->scan_below(db->index, start, klen, count, bound, blen, more, fn, arg);
	struct bounded b = { { .fn = fn, .arg = arg, .count = count }, bound, blen };
	long got = db->ops->scan(db->index, start, klen, count, bounded_index_key, &b);
	if (got < 0)
		return got;
	*more = !b.out.stop;
	return b.out.n;
}

long tips_scan(struct tips_db *db, const void *start, size_t klen, size_t count,
	       tips_scan_fn fn, void *arg)
{
	if (!db || !fn || (klen && !start))
		return tips_set_error(TIPS_EINVAL, "tips_scan: database and callback required");
	if (count == 0)
		return 0;
	struct thread_ctx *ctx = db->scan_bounded ? ctx_get(db) : NULL;
	if (ctx && !ctx->view) /* the thread's first scan; allocated outside the section */
		ctx->view = backlog_view_new(db->ologs.n);
	if (!ctx || !ctx->view) /* a plug-in index's scan, or out of DRAM */
		return scan_merged(db, start, klen, count, fn, arg);
	unsigned char bound[TIPS_MAX_KEY];
	size_t blen = 0;
	/* A read section, not the scan lock (whose line two scanning threads would bounce):
	 * reclamation reads each OLog's new head from `applied` before it takes `scanned`,
	 * waits for a grace period if it was raised, and hands the space below the head to
	 * writers only after; `applied` only grows. So no record read here is overwritten
	 * before the exit (reclaim.c). The flag is written only when clear: its line stays
	 * shared between scanning threads. */
	grace_read_enter();
	if (!atomic_load_explicit(&db->scanned, memory_order_acquire))
		atomic_exchange(&db->scanned, 1);
	const struct olog_rec *min;
	if (backlog_view_min(db, ctx->view, start, klen, &min) != 0) {
		grace_read_exit(); /* a backlog larger than the view */
		return scan_merged(db, start, klen, count, fn, arg);
	}
	if (min) {
		blen = min->klen; /* <= TIPS_MAX_KEY: every OLog record's key is */
		memcpy(bound, min->data, blen);
	}
	grace_read_exit();
	long got;
	bool more = false;
	if (!min) /* nothing to merge: the index's keys are the answer */
		got = db->ops->scan(db->index, start, klen, count, fn, arg);
	else
		got = scan_index_below(db, start, klen, count, bound, blen, &more, fn, arg);
	if (got < 0)
		return scan_error(got);
	if (!more)
		return got;
	long rest = scan_merged(db, bound, blen, count - (size_t)got, fn, arg);
	return rest < 0 ? rest : got + rest;
}

/* ---- open and close ---------------------------------------------------------------- */

void tips_config_init_sized(struct tips_config *cfg, size_t size)
{
	struct tips_config d;
	memset(&d, 0, sizeof(d));
	d.struct_size = sizeof(d);
	tips_struct_init(cfg, size, &d, sizeof(d));
}

static void config_defaults(struct tips_config *c)
{
	if (!c->pool_size)
		c->pool_size = DEFAULT_POOL_SIZE;
	if (!c->expected_keys)
		c->expected_keys = DEFAULT_EXPECTED_KEYS;
	if (!c->cache_percent)
		c->cache_percent = 25;
	if (!c->chain_bound)
		c->chain_bound = 5;
	if (!c->workers_up) {
		/* Half the online cores, as the paper sets W_up (§7: 32 of 64): the other
		 * half runs the application. With every core as a possible worker, the
		 * scaler added a second worker on 2 cores whenever replay fell behind, and
		 * the two workers, the clients and gc then shared 2 cores: tips-hash A with
		 * 2 clients ran at 2.03-2.08 Mops/s against 2.43-2.56 with 1 worker at most
		 * (docs/framework.md, "Sixteenth round"). */
		long n = sysconf(_SC_NPROCESSORS_ONLN);
		c->workers_up = n > 1 ? (unsigned)(n / 2) : 1;
	}
	if (c->workers_low > c->workers_up)
		c->workers_low = c->workers_up;
}

static uint64_t fw_checksum(const struct fw_header *fw)
{
	return crc32(0, (const Bytef *)fw, offsetof(struct fw_header, checksum));
}

/* Lays out the log area of a new pool and writes the header (state CREATING). */
static int fw_format(struct tips_db *db, const struct tips_config *cfg)
{
	size_t log_size = 0;
	unsigned char *log = tips_pool_log_area(db->pool, &log_size);
	uint64_t ulog = cfg->ulog_size ? cfg->ulog_size : DEFAULT_LOG_BYTES;
	if (ulog > log_size / 4)
		ulog = log_size / 4;
	uint64_t olog = cfg->olog_size ? cfg->olog_size : DEFAULT_LOG_BYTES;
	if (olog > log_size / 16)
		olog = log_size / 16;
	ulog &= ~63ull;
	olog &= ~63ull;
	if (olog < MIN_OLOG_SIZE || ulog < MIN_OLOG_SIZE)
		return tips_set_error(TIPS_ESIZE, "%s of %llu bytes is below the minimum of %llu "
				      "(asked for %llu; the pool's log area of %zu bytes allows at "
				      "most 1/16 of it per OLog and 1/4 for the ULog)",
				      olog < MIN_OLOG_SIZE ? "OLog" : "ULog",
				      (unsigned long long)(olog < MIN_OLOG_SIZE ? olog : ulog),
				      (unsigned long long)MIN_OLOG_SIZE,
				      (unsigned long long)(olog < MIN_OLOG_SIZE
					      ? (cfg->olog_size ? cfg->olog_size : DEFAULT_LOG_BYTES)
					      : (cfg->ulog_size ? cfg->ulog_size : DEFAULT_LOG_BYTES)),
				      log_size);
	uint64_t slots = (log_size - ulog) / (olog + sizeof(struct olog_slot_pm));
	if (slots > MAX_OLOG_SLOTS)
		slots = MAX_OLOG_SLOTS;
	/* The header spans several lines, which may reach the media in any order, so it
	 * is written in steps: FORMATTING (a torn format is redone), the identity, the
	 * magic, and last the state (0 until then: an open finishes the format). */
	struct fw_header *fw = db->fw;
	memset(fw, 0, sizeof(*fw));
	fw->magic = FW_MAGIC_FORMATTING;
	pm_persist(fw, sizeof(*fw));
	memset(log, 0, slots * sizeof(struct olog_slot_pm));
	pm_flush(log, slots * sizeof(struct olog_slot_pm));
	fw->layout_version = FW_LAYOUT_VERSION;
	fw->olog_slots = (uint32_t)slots;
	strncpy(fw->index_name, db->ops->name, FW_NAME_MAX - 1);
	fw->olog_size = olog;
	fw->ulog_size = ulog;
	fw->expected_keys = cfg->expected_keys;
	if (getrandom(&fw->olog_salt, sizeof(fw->olog_salt), 0) != sizeof(fw->olog_salt))
		return tips_set_error(TIPS_EIO, "getrandom failed: %s", strerror(errno));
	fw->ulog_gen = 1;
	uint64_t magic = FW_MAGIC;
	fw->magic = magic; /* the checksum covers it */
	fw->checksum = fw_checksum(fw);
	fw->magic = FW_MAGIC_FORMATTING;
	pm_persist(fw, sizeof(*fw));
	fw->magic = magic;
	pm_persist(&fw->magic, sizeof(fw->magic));
	fw->state = FW_STATE_CREATING;
	pm_persist(&fw->state, sizeof(fw->state));
	return 0;
}

/* True if the root area holds nothing yet (a new pool), or a format that a crash cut
 * short; anything else is left alone. */
static bool fw_needs_format(const struct fw_header *fw)
{
	/* A torn format never set the root (fw_format zeroes it): state 0 beside a root is
	 * damage, which fw_validate reports, not a format to redo over the index. */
	if (fw->magic == FW_MAGIC_FORMATTING ||
	    (fw->magic == FW_MAGIC && fw->state == 0 && fw->index_root == 0))
		return true;
	const unsigned char *p = (const unsigned char *)fw;
	for (size_t i = 0; i < sizeof(*fw); i++)
		if (p[i])
			return false;
	return true;
}

/* True if only the magic or layout version of @fw was damaged. */
static bool fw_identity_damaged(const struct fw_header *fw)
{
	struct fw_header fixed = *fw;
	fixed.magic = FW_MAGIC;
	fixed.layout_version = FW_LAYOUT_VERSION;
	return fixed.checksum == fw_checksum(&fixed);
}

static int fw_validate(struct tips_db *db, const char *path)
{
	const struct fw_header *fw = db->fw;
	size_t log_size = 0;
	tips_pool_log_area(db->pool, &log_size);
	if ((fw->magic != FW_MAGIC || fw->layout_version != FW_LAYOUT_VERSION) &&
	    fw_identity_damaged(fw))
		return tips_set_error(TIPS_ECORRUPT, "%s: framework header: magic or layout "
				      "version damaged (the checksum holds with them restored)", path);
	if (fw->magic != FW_MAGIC)
		return tips_set_error(TIPS_EMISMATCH, "%s: the pool holds no TIPS index", path);
	if (fw->layout_version != FW_LAYOUT_VERSION)
		return tips_set_error(TIPS_EVERSION, "%s: framework layout %u, this build reads %u",
				      path, fw->layout_version, FW_LAYOUT_VERSION);
	if (fw->checksum != fw_checksum(fw) || !fw->olog_slots || fw->olog_slots > MAX_OLOG_SLOTS ||
	    fw->olog_size % 64 || fw->ulog_size % 64 ||
	    fw->olog_slots * (fw->olog_size + sizeof(struct olog_slot_pm)) + fw->ulog_size > log_size)
		return tips_set_error(TIPS_ECORRUPT, "%s: the framework header is damaged", path);
	if (strncmp(fw->index_name, db->ops->name, FW_NAME_MAX) != 0)
		return tips_set_error(TIPS_EMISMATCH, "%s: the pool holds index '%.*s', not '%s'",
				      path, (int)FW_NAME_MAX, fw->index_name, db->ops->name);
	return fw_check_root(fw, db->heap, path);
}

static int volatile_state_init(struct tips_db *db)
{
	struct fw_header *fw = db->fw;
	unsigned char *log = tips_pool_log_area(db->pool, NULL);
	unsigned n = fw->olog_slots;
	struct olog_slot_pm *slots = (struct olog_slot_pm *)log;
	db->ulog_ring = log + n * sizeof(struct olog_slot_pm);
	db->ulog_size = fw->ulog_size;
	unsigned char *rings = (unsigned char *)db->ulog_ring + fw->ulog_size;
	db->ologs.logs = calloc(n, sizeof(struct olog));
	if (!db->ologs.logs)
		return tips_set_error(TIPS_ENOMEM, "out of DRAM");
	db->ologs.n = n;
	for (unsigned i = 0; i < n; i++) {
		struct olog *l = &db->ologs.logs[i];
		l->pm = &slots[i];
		l->ring = rings + (uint64_t)i * fw->olog_size;
		l->size = fw->olog_size;
		l->salt = fw->olog_salt;
		/* After a crash, sealed records may follow the persistent tail: find them,
		 * and make them and their end durable before anything reads them. A log
		 * whose words are damaged is left to olog_verify to report. */
		int rc = fw->state == FW_STATE_OPEN ? olog_recover(l, i) : 0;
		if (rc)
			return rc;
		atomic_init(&l->durable_tail, slots[i].tail);
		atomic_init(&l->head, slots[i].head);
		l->applied = slots[i].head;
		l->recovered_end = slots[i].tail;
		if (slots[i].head != slots[i].tail)
			atomic_store_explicit(&db->ologs.live, i + 1, memory_order_relaxed);
	}
	int rc = ulog_new(db->ulog_ring, fw->ulog_size, fw->ulog_gen, &db->ulog);
	if (rc)
		return rc;
	uint64_t entries = db->cfg.expected_keys * db->cfg.cache_percent / 100;
	rc = cache_new(entries < 1024 ? 1024 : entries, db->cfg.chain_bound, &db->cache);
	if (rc)
		return rc;
	/* A worker applies at most an eighth of its lane log's records in one epoch, and
	 * reclamation starts once a lane is half full: an index doing up to two allocations
	 * or frees per operation (hash: a put that changes the value's length) stays below
	 * three quarters of a lane. */
	struct tips_heap_stats hs;
	tips_heap_stats(db->heap, &hs);
	db->heap_headroom = admit_headroom(hs.bytes_total);
	atomic_init(&db->grown_block, fw->grown_block);
	uint64_t lane = heap_lane_room(db->heap);
	db->epoch_records_per_worker = lane / 8 ? lane / 8 : 1;
	db->lane_capacity = lane / 2;
	return replay_workers_start(db);
}

/* Creates the index in a new pool, or redoes a creation a crash interrupted. */
static int index_create(struct tips_db *db)
{
	struct fw_header *fw = db->fw;
	if (fw->flush_done) { /* the root was committed: finish */
		reclaim_finish(db, true);
	} else {
		int rc = tips_heap_rollback(db->heap);
		if (rc)
			return rc;
		fw->index_root = 0;
		pm_persist(&fw->index_root, sizeof(fw->index_root));
		struct tips_index_config icfg = { fw->expected_keys };
		void *root = NULL;
		fw_set_current(db);
		rc = db->ops->create(&icfg, &root);
		fw_set_current(NULL);
		if (rc)
			return rc;
		heap_flush_logged_blocks(db->heap);
		fw->index_root = (uint64_t)root;
		pm_persist(&fw->index_root, sizeof(fw->index_root));
		fw->flush_done = 1;
		pm_persist(&fw->flush_done, sizeof(fw->flush_done));
		/* From here a crash is an ordinary one: OPEN with flush_done set finishes
		 * the reclamation. Left CREATING, a crash after reclaim_finish would
		 * create a second index and leak the first. */
		fw->state = FW_STATE_OPEN;
		pm_persist(&fw->state, sizeof(fw->state));
		reclaim_finish(db, true);
	}
	fw->state = FW_STATE_OPEN;
	pm_persist(&fw->state, sizeof(fw->state));
	db->root = (void *)fw->index_root;
	return fw_index_attach(db);
}

static bool logs_empty(const struct tips_db *db)
{
	if (db->fw->flush_done)
		return false;
	for (unsigned i = 0; i < db->ologs.n; i++)
		if (db->ologs.logs[i].pm->head != db->ologs.logs[i].pm->tail)
			return false;
	return true;
}

static void db_free(struct tips_db *db)
{
	replay_stop(db);
	pthread_mutex_lock(&ctx_lock);
	while (db->ctxs)
		ctx_detach(db->ctxs);
	pthread_mutex_unlock(&ctx_lock);
	cache_delete(db->cache);
	ulog_delete(db->ulog);
	free(db->ologs.logs);
	if (db->index)
		db->ops->close(db->index);
	if (db->pool)
		tips_pool_close(&db->pool);
	pthread_mutex_destroy(&db->ologs.lock);
	pthread_cond_destroy(&db->ologs.room);
	pthread_rwlock_destroy(&db->scan_lock);
	pthread_mutex_destroy(&db->persist_mu);
	pthread_cond_destroy(&db->persist_cv);
	pthread_mutex_destroy(&db->work_mu);
	pthread_cond_destroy(&db->work_cv);
	pthread_cond_destroy(&db->done_cv);
	free(db);
}

static int pool_attach(struct tips_db *db, const char *path)
{
	const struct tips_config *cfg = &db->cfg;
	int rc = tips_pool_open(path, cfg->pool, &db->pool);
	if (rc == TIPS_ENOENT && (cfg->flags & TIPS_CREATE)) {
		struct tips_pool_options o;
		if (cfg->pool)
			o = *cfg->pool;
		else
			tips_pool_options_init(&o);
		if (!o.size)
			o.size = cfg->pool_size;
		rc = tips_pool_create(path, &o, &db->pool);
	}
	return rc;
}

int tips_open(const char *path, const struct tips_config *config,
	      const struct tips_index_ops *ops, struct tips_db **out)
{
	if (!path || !ops || !out || !ops->name || !ops->create || !ops->open || !ops->close ||
	    !ops->insert || !ops->update || !ops->remove || !ops->lookup || !ops->scan ||
	    !ops->walk)
		return tips_set_error(TIPS_EINVAL, "tips_open: path, a complete ops table and "
				      "an out pointer are required");
	if (strncmp(ops->name, "dram-", 5) == 0)
		return tips_set_error(TIPS_EINVAL, "tips_open: %s is a volatile index (it "
				      "allocates with malloc); use its tips- build", ops->name);
	if (strlen(ops->name) >= FW_NAME_MAX)
		return tips_set_error(TIPS_EINVAL, "tips_open: index name longer than %u bytes",
				      FW_NAME_MAX - 1);
	struct tips_config cfg;
	tips_config_init(&cfg);
	if (config) {
		int crc = tips_struct_read(&cfg, sizeof(cfg), config, "tips_open: tips_config");
		if (crc)
			return crc;
	}
	struct tips_db *db = calloc(1, sizeof(*db));
	if (!db)
		return tips_set_error(TIPS_ENOMEM, "out of DRAM");
	db->cfg = cfg;
	config_defaults(&db->cfg);
	db->id = atomic_fetch_add(&next_db_id, 1);
	db->ops = ops;
	const struct tips_index_ops *builtin = tips_index_find(ops->name);
	db->lookup_sizes = builtin == ops;
	db->scan_bounded = builtin && builtin->scan == ops->scan; /* see tips_scan() */
	db->scan_below = db->scan_bounded ? idx_scan_below_of(builtin) : NULL;
	pthread_mutex_init(&db->ologs.lock, NULL);
	pthread_cond_init(&db->ologs.room, NULL);
	pthread_rwlockattr_t ra;
	pthread_rwlockattr_init(&ra);
	pthread_rwlockattr_setkind_np(&ra, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	pthread_rwlock_init(&db->scan_lock, &ra);
	pthread_rwlockattr_destroy(&ra);
	pthread_mutex_init(&db->persist_mu, NULL);
	pthread_cond_init(&db->persist_cv, NULL);
	pthread_mutex_init(&db->work_mu, NULL);
	pthread_cond_init(&db->work_cv, NULL);
	pthread_cond_init(&db->done_cv, NULL);

	int rc = pool_attach(db, path);
	if (rc)
		goto fail;
	db->heap = tips_pool_heap(db->pool);
	struct tips_pool_info info;
	tips_pool_info_sized(db->pool, &info, sizeof(info));
	db->values_logged = info.media == TIPS_MEDIA_FILE;
	/* Replay allocates one index node per insert, of a few sizes: let each worker's lane
	 * record them HEAP_RESERVE_MAX at a time (heap_internal.h). */
	heap_set_logged_reserve(db->heap, HEAP_RESERVE_MAX);
	size_t root_size = 0;
	db->fw = tips_pool_root(db->pool, &root_size);
	if (root_size < sizeof(struct fw_header)) {
		rc = tips_set_error(TIPS_ESIZE, "%s: root area too small", path);
		goto fail;
	}
	if (fw_needs_format(db->fw) && (rc = fw_format(db, &db->cfg)))
		goto fail;
	if ((rc = fw_validate(db, path)) || (rc = volatile_state_init(db)))
		goto fail;
	db->root = (void *)db->fw->index_root;
	if (db->fw->state == FW_STATE_CREATING) {
		rc = index_create(db);
	} else if (db->fw->state == FW_STATE_CLEAN && logs_empty(db)) {
		db->fw->state = FW_STATE_OPEN;
		pm_persist(&db->fw->state, sizeof(db->fw->state));
		rc = fw_index_attach(db);
	} else {
		db->fw->state = FW_STATE_OPEN;
		pm_persist(&db->fw->state, sizeof(db->fw->state));
		rc = recover(db);
	}
	if (rc || (rc = replay_start(db)))
		goto fail;
	*out = db;
	return 0;
fail:
	db_free(db);
	return rc;
}

int tips_close(struct tips_db **pdb)
{
	if (!pdb || !*pdb)
		return tips_set_error(TIPS_EINVAL, "tips_close: no database");
	struct tips_db *db = *pdb;
	/* Applies every record and reclaims: the logs are empty, unless replay found the
	 * heap full; then the records stay for the next open, which replays them. */
	uint64_t left = replay_stop(db);
	for (unsigned i = 0; i < db->ologs.n; i++)
		olog_persist_tail(&db->ologs.logs[i]); /* the open needs no walk */
	int rc = 0;
	if (left == 0) {
		db->fw->state = FW_STATE_CLEAN;
		pm_persist(&db->fw->state, sizeof(db->fw->state));
	} else {
		rc = tips_set_error(TIPS_ENOSPC, "tips_close: %llu bytes of OLog records could "
				    "not be applied (the heap is full); they are kept and the next "
				    "open replays them: grow the pool first (tips pool grow)",
				    (unsigned long long)left);
	}
	db_free(db);
	*pdb = NULL;
	return rc;
}

/* ---- statistics and introspection -------------------------------------------------- */

static void stats_fill(struct tips_db *db, struct tips_stats *out)
{
	memset(out, 0, sizeof(*out));
	struct thread_counters sum;
	memset(&sum, 0, sizeof(sum));
	pthread_mutex_lock(&ctx_lock);
	counters_add(&sum, &db->retired);
	for (struct thread_ctx *c = db->ctxs; c; c = c->next_in_db)
		counters_add(&sum, &c->c);
	pthread_mutex_unlock(&ctx_lock);
	out->cache_hits = atomic_load(&sum.hits);
	out->cache_misses = atomic_load(&sum.misses);
	out->writes = atomic_load(&sum.writes);
	out->batches = atomic_load(&sum.batches);
	out->olog_bytes = atomic_load(&sum.olog_bytes);
	out->writer_waits = atomic_load(&sum.waits) + cache_room_waits(db->cache);
	out->cache_entries = cache_entries(db->cache);
	out->cache_unapplied = cache_unapplied(db->cache);
	out->cache_capacity = cache_capacity(db->cache);
	out->gc_unlinked = cache_gc_unlinked(db->cache);
	ulog_counters(db->ulog, &out->ulog_bytes, &out->ulog_logged, &out->ulog_skipped_fresh,
		      &out->ulog_skipped_logged);
	out->ulog_values = atomic_load(&db->ulog_values);
	out->mlog_allocs = atomic_load(&db->mlog_allocs);
	out->mlog_frees = atomic_load(&db->mlog_frees);
	out->mlog_bytes = (out->mlog_allocs + out->mlog_frees) * HEAP_RECORD_BYTES;
	/* Graces first: reclaim_run counts them after the reclamation, so a snapshot
	 * never shows more graces than reclamations. */
	out->reclaim_graces = atomic_load(&db->reclaim_graces);
	out->reclamations = atomic_load(&db->reclamations);
	out->epochs = atomic_load(&db->epochs);
	out->replayed = atomic_load(&db->replayed);
	out->workers_now = atomic_load(&db->workers_published);
	out->workers_avg = out->epochs ? (double)atomic_load(&db->worker_sum) / (double)out->epochs
				       : 0.0;
	out->recovery_ms = db->recovery_ms;
	out->recovered = db->recovered;
	out->writes_refused = atomic_load(&db->refused);
	out->replay_stalls = atomic_load(&db->replay_stalls);
	out->heap_reserved = atomic_load(&db->heap_reserved);
	out->heap_room = heap_room(db->heap);
	out->heap_chunk_room = heap_chunk_room(db->heap);
	out->heap_keep = admit_keep(db);
	out->heap_chunk_margin = admit_chunk_margin(db);
}

void tips_stats_sized(struct tips_db *db, struct tips_stats *out, size_t size)
{
	struct tips_stats full;
	stats_fill(db, &full);
	tips_struct_write(out, size, &full, sizeof(full));
}

struct tips_pool *tips_db_pool(struct tips_db *db)
{
	return db ? db->pool : NULL;
}
