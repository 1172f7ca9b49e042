/*
 * replay.c - the TIPS backend: the persist thread, the replay workers and adaptive
 * scaling (TIPS §4.2).
 *
 * One epoch: the persist thread takes every durable record not yet applied from every
 * OLog (up to a bound), routes each to worker hash(key) % W so that all operations on
 * one key meet in one queue, and wakes W workers; each sorts its queue by commit stamp
 * and applies it through the index's ops, then marks the cache entries applied. After
 * the epoch the persist thread sets W for the next one (§4.2.1):
 *   R = F/B, F = records appended during the epoch, B = records applied in it;
 *   R > 1: W += Δ (remembering the best throughput's W; at W_up fall back to it and
 *   stay until R < 0.5); R < 0.5: W -= Δ; Δ = 1 below 4 workers, 4 from 4 on;
 *   W within [W_low, W_up]. With W = 0 nothing is applied (B = 0: R is infinite if
 *   anything waits), so a read-only load runs no worker at all.
 * Then, if a log passed half its size, or a writer waits for room, it reclaims.
 * Idle, the persist thread sleeps: with a timeout while W > W_low (each timeout is an
 * empty epoch that scales down), without one at W_low (writers wake it).
 *
 * Replay uses blind-write semantics: insert of a present key updates it, update of an
 * absent key inserts it, delete of an absent key does nothing. The facade already
 * decided each operation's outcome, so in normal running these fallbacks never fire;
 * they make replaying a record twice harmless.
 *
 * Failed epochs. Admission (admit.c) makes a full heap rare here, but an operation can
 * still fail: the heap is full after all (fragmentation, a split), or the ULog or the
 * worker's MLog lane has too little room left for one more operation (checked before
 * each one: TIPS_ELOGFULL). After a failed operation the worker goes on with the
 * records of other keys (up to BLOCKED_MAX failed keys; a key's later records wait
 * behind its failed one), so deletes that make room still get applied; a full log
 * stops the whole queue. With t = the smallest stamp left unapplied, every record
 * stamped below t was applied, so each OLog's `applied` moves to its first record
 * stamped >= t (a prefix: an OLog is in stamp order) and the rest is collected again
 * next epoch.
 * Records above the cut that were applied have their `entry` word zeroed when applied
 * (a live record's word is never 0 otherwise), and are skipped when collected again:
 * never applied twice, so a reader never sees a key go back to an older value. Scans
 * stay right: a key's records are applied in stamp order, so the newest record of a
 * key at or above `applied` is at least as new as what the index holds.
 * Then the persist thread reclaims (deferred frees return room, the ULog and lanes
 * empty) and retries. A heap failure sets `stalled`: puts are refused with TIPS_ENOSPC
 * (deletes are still taken) until an epoch completes. If an epoch right after a
 * reclamation moves no OLog's applied point, waiting is all that can help: the thread
 * retries when a write arrives or every STALL_RETRY_NS (recovery gives up instead:
 * it re-applies the records past the failed one each time, so records applied is no
 * measure of progress). Nothing is dropped: a close leaves such
 * records in the OLog for the next open (tips_close then returns TIPS_ENOSPC).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "heap/heap_internal.h"
#include "framework/framework.h"
#include "util/errors_internal.h"
#include "util/grow.h"

#define EPOCH_MAX_RECORDS (256u * 1024u)
#define EPOCH_BATCH_MIN 1024u      /* fewer records: wait a little for more */
#define EPOCH_BATCH_WAIT_NS 1000000 /* ... up to 1 ms */
#define IDLE_EPOCH_NS 10000000     /* an idle tick while W > W_low: 10 ms */
#define IDLE_SAFETY_NS 100000000   /* at W_low: writers wake it; this only bounds a
				      wake-up lost to store-load reordering (100 ms) */
#define STALL_RETRY_NS 50000000    /* stuck on a full heap: retry at least this often */
#define LANE_OP_RECORDS 64u        /* MLog records one operation may need at most */
#define ROOM_CHECK_EVERY 16u       /* operations per check of the logs' room */
#define ULOG_OP_MIN 4096u          /* ULog bytes kept free per worker, at least */
#define SERVE_EPOCHS 4u            /* epochs a request for room waits at most */
#define BLOCKED_MAX 16u            /* failed keys a worker steps around in an epoch */
#define AHEAD_FAR 16u              /* look-ahead: the record whose bucket is prefetched */
#define AHEAD_NEAR 8u              /* ... and whose bucket's target is */
#define LOG_AHEAD 8u               /* records whose ranges share one ULog fence */
_Static_assert(LOG_AHEAD * TIPS_LOG_AHEAD_RANGES <= ULOG_GROUP_MAX, "log-ahead group");
#define LOG_AHEAD_MAX_BYTES 256u   /* ... each range at most this long */

struct queued {
	const struct olog_rec *rec;
	bool live; /* written by this process: its cache entry exists */
};

struct worker {
	struct tips_db *db;
	unsigned idx;
	pthread_t thread;
	struct queued *q;
	size_t n, cap;
	uint64_t *gone;   /* key hashes of the cache entries applied, for gc */
	size_t ngone, gone_cap;
	struct fw_value_ranges values; /* overwritten without an undo record: flushed at
					  the end of each queue, before the epoch ends */
	size_t done;      /* records of q applied in this epoch */
	uint64_t fail_ts; /* stamp of the first record left unapplied, UINT64_MAX if none */
	int rc;           /* 0, or why that record could not be applied */
};

static double now_sec(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void deadline_in(struct timespec *t, long ns)
{
	clock_gettime(CLOCK_REALTIME, t);
	t->tv_nsec += ns;
	while (t->tv_nsec >= 1000000000) {
		t->tv_nsec -= 1000000000;
		t->tv_sec++;
	}
}

static int replay_apply(struct tips_db *db, const struct olog_rec *r)
{
	const struct tips_index_ops *ops = db->ops;
	const void *key = r->data, *val = r->data + r->klen;
	int rc;
	switch (OLOG_REC_OP(r)) {
	case OLOG_OP_INSERT:
	case OLOG_OP_PUT:
		rc = ops->insert(db->index, key, r->klen, val, r->vlen);
		if (rc == TIPS_EKEYEXISTS)
			rc = ops->update(db->index, key, r->klen, val, r->vlen);
		break;
	case OLOG_OP_UPDATE:
		rc = ops->update(db->index, key, r->klen, val, r->vlen);
		if (rc == TIPS_ENOTFOUND)
			rc = ops->insert(db->index, key, r->klen, val, r->vlen);
		break;
	case OLOG_OP_DELETE:
		rc = ops->remove(db->index, key, r->klen);
		if (rc == TIPS_ENOTFOUND)
			rc = 0;
		break;
	default:
		rc = tips_set_error(TIPS_ECORRUPT, "OLog record with unknown op %u",
				    OLOG_REC_OP(r));
	}
	return rc;
}

/* TIPS_ELOGFULL unless the ULog and the calling worker's MLog lane have room for the
 * next ROOM_CHECK_EVERY operations while @W workers share the ULog (checked once per
 * that many: the lane's room is read under its lock). */
static int room_for_ops(struct tips_db *db, unsigned W)
{
	uint64_t per_op = 2 * atomic_load_explicit(&db->ulog_op_max, memory_order_relaxed) +
			  ULOG_OP_MIN;
	uint64_t need = per_op * W * ROOM_CHECK_EVERY;
	if (need > db->ulog_size / 2) /* an empty ULog must always pass */
		need = db->ulog_size / 2;
	if (ulog_used(db->ulog) + need > db->ulog_size)
		return tips_set_error(TIPS_ELOGFULL, "replay: the ULog needs a reclamation");
	uint64_t lane_need = LANE_OP_RECORDS * ROOM_CHECK_EVERY;
	if (lane_need > db->lane_capacity) /* an empty lane must always pass */
		lane_need = db->lane_capacity;
	if (heap_lane_room(db->heap) < lane_need)
		return tips_set_error(TIPS_ELOGFULL, "replay: the MLog lane needs a reclamation");
	return 0;
}

static void note_ulog_use(struct tips_db *db, uint64_t before)
{
	uint64_t used = ulog_used(db->ulog); /* other workers' records count too: a bound */
	uint64_t d = used > before ? used - before : 0;
	uint64_t max = atomic_load_explicit(&db->ulog_op_max, memory_order_relaxed);
	while (d > max && !atomic_compare_exchange_weak(&db->ulog_op_max, &max, d))
		;
}

static bool same_key(const struct olog_rec *a, const struct olog_rec *b)
{
	return a->klen == b->klen && memcmp(a->data, b->data, a->klen) == 0;
}

/* Is @r's key among the @n keys whose earlier record failed in this epoch? */
static bool key_blocked(const struct olog_rec *const *blocked, unsigned n,
			const struct olog_rec *r)
{
	for (unsigned i = 0; i < n; i++)
		if (same_key(blocked[i], r))
			return true;
	return false;
}

/* Replay's look-ahead: before applying record @i of @w's queue, the index loads the
 * bucket of record i + AHEAD_FAR and the node that of i + AHEAD_NEAR points to
 * (tips_index_ops.prefetch), so that each operation's misses were started some
 * operations before it, not when it reaches them. The cache entry of record
 * i + AHEAD_NEAR is loaded for writing too: a client wrote it on another core, and
 * replay's store to its `applied` flag otherwise waited for that line, and the next
 * locked instruction for the store (replay's CPU per tips-hash write 224-232 -> 195-208
 * ns in A with 2 clients; docs/framework.md, "Twentieth round"). */
static inline void look_ahead(const struct tips_index_ops *ops, void *index,
			      const struct worker *w, size_t i)
{
	if (i + AHEAD_FAR < w->n) {
		const struct olog_rec *r = w->q[i + AHEAD_FAR].rec;
		ops->prefetch(index, r->data, r->klen, 0);
	}
	if (i + AHEAD_NEAR < w->n) {
		const struct olog_rec *r = w->q[i + AHEAD_NEAR].rec;
		ops->prefetch(index, r->data, r->klen, 1);
		if (w->q[i + AHEAD_NEAR].live && r->entry) /* not applied: not recycled */
			__builtin_prefetch((const void *)r->entry, 1, 3);
	}
}

/*
 * Replay's batched logging: before applying records [@i, @i + LOG_AHEAD) of @w's queue,
 * logs the ranges each insert, put or update among them will log (up to
 * TIPS_LOG_AHEAD_RANGES each, tips_index_ops.log_ahead) as one ULog group, under one
 * fence; each operation then finds its ranges logged (the ULog's set) and stores
 * without a fence of its own. On the AMD machine the wait for a record's write-back
 * was about 40% of a tips-hash insert's replay (docs/framework.md, "Seventeenth
 * round"). A range that turns out wrong (an earlier write of the batch, or another
 * worker's, changed the node) costs a record: the operation logs its own, as before.
 * Deletes and blocked keys are left out.
 */
static void log_ahead(struct tips_db *db, const struct worker *w, size_t i,
		      const struct olog_rec *const *blocked, unsigned nblocked)
{
	void *addr[LOG_AHEAD * TIPS_LOG_AHEAD_RANGES];
	size_t size[LOG_AHEAD * TIPS_LOG_AHEAD_RANGES];
	unsigned n = 0;
	for (size_t j = i; j < w->n && j < i + LOG_AHEAD; j++) {
		const struct olog_rec *r = w->q[j].rec;
		if (OLOG_REC_OP(r) == OLOG_OP_DELETE || key_blocked(blocked, nblocked, r))
			continue;
		int k = db->ops->log_ahead(db->index, r->data, r->klen, r->vlen, &addr[n],
					   &size[n]);
		bool fits = k > 0 && k <= TIPS_LOG_AHEAD_RANGES;
		for (int x = 0; fits && x < k; x++)
			fits = size[n + x] <= LOG_AHEAD_MAX_BYTES;
		if (fits)
			n += (unsigned)k;
	}
	if (n > 1) /* an error (a range outside the pool): each operation logs its own */
		(void)ulog_log_ahead(db->ulog, db->heap, db->pool, addr, size, n);
}

/* Notes an applied entry's key for gc (cache_applied_keys). Without DRAM to note it,
 * the entry stays in the cache until a sweep or a long chain takes it. */
static void note_gone(struct worker *w, const struct olog_rec *r)
{
	if (!array_grow((void **)&w->gone, &w->gone_cap, w->ngone + 1, sizeof(*w->gone),
			4096))
		return;
	w->gone[w->ngone++] = cache_key_hash(r->data, r->klen);
}

/*
 * Applies @w's queue, already in stamp order (see "Failed epochs" for what happens
 * when an operation fails: w->done, w->fail_ts, w->rc). For each live record (written
 * since this open) it marks the cache entry applied, zeroes the record's entry word
 * and releases its admission cost. At the end it flushes the values its operations
 * overwrote without an undo record (tips_ulog_value), so that they are durable before
 * the epoch ends and any reclamation drops their records.
 */
static void apply_queue(struct tips_db *db, struct worker *w, unsigned W)
{
	uint64_t live[2] = { 0, 0 }, cost = 0; /* entries applied, by pending slot */
	const struct olog_rec *blocked[BLOCKED_MAX];
	unsigned nblocked = 0;
	w->done = 0;
	w->rc = 0;
	w->fail_ts = UINT64_MAX;
	const struct tips_index_ops *ops = db->ops;
	for (size_t i = 0; i < w->n; i++) {
		struct olog_rec *r = (struct olog_rec *)w->q[i].rec;
		if (ops->prefetch)
			look_ahead(ops, db->index, w, i);
		if (key_blocked(blocked, nblocked, r))
			continue;
		int rc = i % ROOM_CHECK_EVERY ? 0 : room_for_ops(db, W);
		bool stop = rc != 0; /* a full log: nothing more can run before reclaiming */
		if (rc == 0 && ops->log_ahead && i % LOG_AHEAD == 0)
			log_ahead(db, w, i, blocked, nblocked);
		if (rc == 0) {
			uint64_t before = ulog_used(db->ulog);
			rc = replay_apply(db, r);
			note_ulog_use(db, before);
		}
		if (rc) {
			if (w->rc == 0) {
				w->rc = rc;
				w->fail_ts = OLOG_REC_TS(r);
			}
			if (stop || nblocked == BLOCKED_MAX)
				break;
			blocked[nblocked++] = r;
			continue;
		}
		if (w->q[i].live) {
			struct cache_entry *e = (struct cache_entry *)r->entry;
			/* From the record, which is in cache: the entry, written by a client
			 * on another core, is not, and gc may recycle it once applied. */
			unsigned slot = OLOG_REC_PENDING_SLOT(r);
			atomic_store_explicit(&e->applied, 1, memory_order_release);
			r->entry = 0; /* applied: skip it if a failed epoch collects it again */
			cost += admit_cost(OLOG_REC_OP(r), r->klen, r->vlen);
			live[slot]++;
			note_gone(w, r);
		}
		w->done++;
	}
	fw_value_ranges_flush(db, &w->values);
	cache_applied(db->cache, live);
	admit_release(db, cost);
	if (ops->log_ahead)
		ulog_ahead_done(db->ulog);
}

static bool queue_push(struct worker *w, const struct olog_rec *r, bool live)
{
	if (!array_grow((void **)&w->q, &w->cap, w->n + 1, sizeof(*w->q), 4096))
		return false;
	w->q[w->n++] = (struct queued){ r, live };
	return true;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct tips_db *db = w->db;
	char name[16];
	snprintf(name, sizeof(name), "tips-replay%u", w->idx);
	pthread_setname_np(pthread_self(), name); /* for perf and top */
	fw_set_current(db);
	fw_set_value_ranges(&w->values);
	uint64_t seen = 0;
	pthread_mutex_lock(&db->work_mu);
	for (;;) {
		while (db->work_epoch == seen)
			pthread_cond_wait(&db->work_cv, &db->work_mu);
		seen = db->work_epoch;
		if (db->work_epoch == UINT64_MAX)
			break;
		if (w->idx >= db->work_count)
			continue;
		unsigned W = db->work_count;
		pthread_mutex_unlock(&db->work_mu);
		apply_queue(db, w, W);
		if (heap_lane_room(db->heap) < db->lane_capacity)
			atomic_store(&db->reclaim_wanted, 1);
		pthread_mutex_lock(&db->work_mu);
		if (--db->work_pending == 0)
			pthread_cond_signal(&db->done_cv);
	}
	pthread_mutex_unlock(&db->work_mu);
	return NULL;
}

static bool workers_ensure(struct tips_db *db, unsigned n)
{
	while (db->nworkers_made < n) {
		struct worker *w = &db->workers[db->nworkers_made];
		w->db = db;
		w->idx = db->nworkers_made;
		if (pthread_create(&w->thread, NULL, worker_main, w))
			return false;
		db->nworkers_made++;
	}
	return true;
}

/* Total records made durable so far (for F_e). */
static uint64_t appended_total(struct tips_db *db)
{
	uint64_t n = 0;
	for (unsigned i = 0; i < db->ologs.n; i++)
		n += atomic_load_explicit(&db->ologs.logs[i].appended, memory_order_relaxed);
	return n;
}

static uint64_t backlog(struct tips_db *db)
{
	uint64_t n = 0;
	for (unsigned i = 0; i < db->ologs.n; i++) {
		struct olog *l = &db->ologs.logs[i];
		n += atomic_load_explicit(&l->durable_tail, memory_order_acquire) - l->applied;
	}
	return n; /* in bytes: only compared with 0 and with batch sizes */
}

/* Reclaim when a worker's MLog lane is half full, the ULog is half full, an OLog holds
 * more than half its size of applied records, or a writer waits for OLog room and
 * reclaiming would give a quarter of an OLog, or all it holds (every record applied).
 * Not for less: a reclamation costs about a millisecond whatever it frees, and with
 * the cores busy, reclaiming whatever was applied meant one per few hundred writes. */
static bool logs_need_reclaim(struct tips_db *db)
{
	if (atomic_load(&db->reclaim_wanted))
		return true;
	if (ulog_used(db->ulog) > db->ulog_size / 2)
		return true;
	bool room_wanted = atomic_load(&db->room_wanted);
	for (unsigned i = 0; i < db->ologs.n; i++) {
		struct olog *l = &db->ologs.logs[i];
		uint64_t head = atomic_load(&l->head);
		uint64_t reclaimable = l->applied - head;
		uint64_t held = atomic_load_explicit(&l->durable_tail, memory_order_acquire) - head;
		if (reclaimable > l->size / 2 ||
		    (room_wanted && reclaimable > 0 &&
		     (reclaimable >= l->size / 4 || reclaimable == held)))
			return true;
	}
	return false;
}

/*
 * Takes the oldest pending records across all OLogs, by a merge on stamps (each OLog is
 * in stamp order: its one owner takes stamps one after another), and routes each to
 * queue hash(key) % W, so every queue is in stamp order too. It stops at the cut, at
 * @limit records, or when one queue holds @per_queue (a worker's MLog bound: routing by
 * key can send every record to one worker).
 * The cut makes the set consistent: it is the stamp counter read before any tail. A
 * record stamped at or below it was stamped before the tails were read, and every
 * earlier write of its key was durable before that (it was appended under the bucket
 * lock the later write then took), so it lies below the tails and, with a smaller
 * stamp, is taken first. Without the cut, a tail read late could admit a write whose
 * earlier write to the same key sits above a tail read early. Recovery passes no cut
 * (UINT64_MAX): nothing is being written, and the stamps come from another process.
 * The records taken are a prefix of each OLog; next_applied[i] is set to where OLog
 * i's untaken records start. Returns the count.
 */
static uint64_t epoch_collect(struct tips_db *db, unsigned W, uint64_t limit,
			      uint64_t per_queue, uint64_t *next_applied)
{
	for (unsigned i = 0; i < W; i++)
		db->workers[i].n = 0;
	uint64_t cut = db->recovering ? UINT64_MAX : ts_scan_point();
	struct collect_cursor *cur = db->cursors;
	unsigned n_logs = olog_live(&db->ologs); /* the others hold nothing */
	for (unsigned i = 0; i < n_logs; i++) {
		struct olog *l = &db->ologs.logs[i];
		cur[i].c = olog_cursor_at(l, l->applied,
					  atomic_load_explicit(&l->durable_tail, memory_order_acquire));
		cur[i].rec = olog_next(l, &cur[i].c);
	}
	uint64_t n = 0;
	while (n < limit) {
		int best = -1;
		for (unsigned i = 0; i < n_logs; i++)
			if (cur[i].rec && (best < 0 || OLOG_REC_TS(cur[i].rec) <
							 OLOG_REC_TS(cur[best].rec)))
				best = (int)i;
		if (best < 0 || OLOG_REC_TS(cur[best].rec) > cut)
			break;
		struct olog *l = &db->ologs.logs[best];
		const struct olog_rec *r = cur[best].rec;
		bool live = cur[best].c.pos - r->len >= l->recovered_end;
		if (!(live && !db->recovering && r->entry == 0)) { /* 0: applied already */
			struct worker *w = &db->workers[cache_key_hash(r->data, r->klen) % W];
			if (w->n >= per_queue)
				break;
			if (!queue_push(w, r, live)) {
				atomic_store(&db->stalled, TIPS_ENOMEM); /* out of DRAM: retried */
				break;
			}
			n++;
		}
		cur[best].rec = olog_next(l, &cur[best].c);
	}
	for (unsigned i = 0; i < db->ologs.n; i++)
		next_applied[i] = i >= n_logs ? db->ologs.logs[i].applied
			: cur[i].rec ? cur[i].c.pos - cur[i].rec->len : cur[i].c.end;
	return n;
}

static unsigned delta_of(unsigned w)
{
	return w < 4 ? 1 : 4;
}

/* §4.2.1: the worker count for the next epoch. */
static void scale(struct tips_db *db, uint64_t F, uint64_t B, double secs, bool waiting)
{
	unsigned W = db->workers_now, lo = db->cfg.workers_low, up = db->cfg.workers_up;
	double R = B ? (double)F / (double)B : (F || waiting) ? 1e9 : 0.0;
	if (R > 1.0) {
		if (B && secs > 0) {
			double rate = (double)B / secs;
			if (rate > db->best_rate) {
				db->best_rate = rate;
				db->workers_best = W;
			}
		}
		if (db->capped)
			W = db->workers_best ? db->workers_best : W;
		else if (W >= up) {
			W = db->workers_best ? db->workers_best : up;
			db->capped = true;
		} else
			W = W + delta_of(W) > up ? up : W + delta_of(W);
	} else if (R < 0.5) {
		db->capped = false;
		unsigned d = delta_of(W);
		W = W < lo + d ? lo : W - d;
	}
	db->workers_now = W;
	atomic_store_explicit(&db->workers_published, W, memory_order_relaxed);
}

/* After a failed epoch: moves each next_applied[i] back to OLog i's first record
 * stamped at or after @ts (everything before it was applied). */
static void cut_at_stamp(struct tips_db *db, uint64_t ts, uint64_t *next_applied)
{
	for (unsigned i = 0; i < db->ologs.n; i++) {
		struct olog *l = &db->ologs.logs[i];
		struct olog_cursor c = olog_cursor_at(l, l->applied, next_applied[i]);
		const struct olog_rec *r;
		while ((r = olog_next(l, &c)))
			if (OLOG_REC_TS(r) >= ts) {
				next_applied[i] = c.pos - r->len;
				break;
			}
	}
}

/* Runs the collected queues on @W workers; returns the records applied and sets *rc to
 * the first failure (0 if none), with the OLog cut moved back before it. */
static uint64_t epoch_apply(struct tips_db *db, unsigned W, uint64_t *next_applied, int *rc)
{
	pthread_mutex_lock(&db->work_mu);
	db->work_pending = W;
	db->work_count = W;
	db->work_epoch++;
	pthread_cond_broadcast(&db->work_cv);
	while (db->work_pending)
		pthread_cond_wait(&db->done_cv, &db->work_mu);
	pthread_mutex_unlock(&db->work_mu);
	uint64_t applied = 0, ts_fail = UINT64_MAX;
	*rc = 0;
	for (unsigned i = 0; i < W; i++) {
		struct worker *w = &db->workers[i];
		applied += w->done;
		if (w->rc && w->fail_ts < ts_fail) {
			ts_fail = w->fail_ts;
			*rc = w->rc;
		}
	}
	if (*rc)
		cut_at_stamp(db, ts_fail, next_applied);
	return applied;
}

/* One epoch. Returns the records applied; db->epoch_rc says whether one failed. */
static uint64_t epoch_run(struct tips_db *db, uint64_t *next_applied)
{
	double t0 = now_sec();
	uint64_t f0 = appended_total(db);
	unsigned W = db->workers_now;
	uint64_t B = 0;
	bool had_backlog = backlog(db) > 0;
	db->epoch_rc = 0;
	db->epoch_moved = false;
	if (W > 0) {
		uint64_t limit = (uint64_t)W * db->epoch_records_per_worker;
		uint64_t n = epoch_collect(db, W, limit < EPOCH_MAX_RECORDS ? limit
									    : EPOCH_MAX_RECORDS,
					   db->epoch_records_per_worker, next_applied);
		if (n)
			B = epoch_apply(db, W, next_applied, &db->epoch_rc);
		/* Also when every record taken was applied already (skipped). */
		for (unsigned i = 0; i < db->ologs.n; i++) {
			struct olog *l = &db->ologs.logs[i];
			db->epoch_moved |= next_applied[i] != atomic_load(&l->applied);
			atomic_store_explicit(&l->applied, next_applied[i], memory_order_release);
		}
		if (n) {
			atomic_fetch_add(&db->epochs, 1);
			atomic_fetch_add(&db->replayed, B);
			atomic_fetch_add(&db->worker_sum, W);
			for (unsigned i = 0; i < W; i++) {
				struct worker *w = &db->workers[i];
				cache_applied_keys(db->cache, &w->gone, &w->ngone, &w->gone_cap);
			}
			cache_applied_more(db->cache);
			cache_pending_flip(db->cache);
		}
		if (db->epoch_rc) {
			atomic_fetch_add(&db->replay_stalls, 1);
			if (db->epoch_rc != TIPS_ELOGFULL)
				atomic_store(&db->stalled, db->epoch_rc);
		} else if (n == B && atomic_load(&db->stalled)) {
			atomic_store(&db->stalled, 0);
		}
	}
	double secs = now_sec() - t0;
	uint64_t F = appended_total(db) - f0;
	scale(db, F, B, secs, had_backlog && B == 0);
	return B;
}

static void persist_wait(struct tips_db *db, long timeout_ns)
{
	pthread_mutex_lock(&db->persist_mu);
	if (timeout_ns) {
		struct timespec t;
		deadline_in(&t, timeout_ns);
		if (!atomic_load(&db->stopping) && !atomic_load(&db->reclaim_wanted) &&
		    !atomic_load(&db->room_wanted))
			pthread_cond_timedwait(&db->persist_cv, &db->persist_mu, &t);
	} else {
		atomic_store(&db->persist_idle, 1);
		/* Re-check after announcing: a writer that published before seeing idle=1
		 * is caught here, one that published after will signal. The writer's side
		 * has no full fence (it would cost every write one), so the wait is bounded. */
		struct timespec t;
		deadline_in(&t, IDLE_SAFETY_NS);
		if (!atomic_load(&db->stopping) && !atomic_load(&db->reclaim_wanted) &&
		    !atomic_load(&db->room_wanted) && backlog(db) == 0)
			pthread_cond_timedwait(&db->persist_cv, &db->persist_mu, &t);
		atomic_store(&db->persist_idle, 0);
	}
	pthread_mutex_unlock(&db->persist_mu);
}

void replay_wake(struct tips_db *db)
{
	pthread_mutex_lock(&db->persist_mu);
	pthread_cond_signal(&db->persist_cv);
	pthread_mutex_unlock(&db->persist_mu);
}

/* Waits while replay is stuck on a full heap: until a write arrives (writers wake an
 * idle persist thread), a request for room, a close, or STALL_RETRY_NS. */
static void stall_wait(struct tips_db *db)
{
	pthread_mutex_lock(&db->persist_mu);
	atomic_store(&db->persist_idle, 1);
	struct timespec t;
	deadline_in(&t, STALL_RETRY_NS);
	if (!atomic_load(&db->stopping) && atomic_load(&db->space_req) == db->space_done)
		pthread_cond_timedwait(&db->persist_cv, &db->persist_mu, &t);
	atomic_store(&db->persist_idle, 0);
	pthread_mutex_unlock(&db->persist_mu);
}

/* Tells the writers waiting in admit_make_room() that requests up to @req are served. */
static void space_served(struct tips_db *db, uint64_t req)
{
	pthread_mutex_lock(&db->ologs.lock);
	db->space_done = req;
	pthread_cond_broadcast(&db->ologs.room);
	pthread_mutex_unlock(&db->ologs.lock);
}

static void *persist_main(void *arg)
{
	struct tips_db *db = arg;
	pthread_setname_np(pthread_self(), "tips-persist");
	fw_set_current(db);
	bool stuck = false, after_failure = false;
	unsigned serving = 0; /* epochs run for the pending request for room */
	for (;;) {
		bool stopping = atomic_load(&db->stopping);
		uint64_t pending = backlog(db);
		uint64_t req = atomic_load(&db->space_req);
		bool serve = req != db->space_done;
		if (stopping) { /* close: apply everything with at least one worker */
			if (db->workers_now == 0)
				db->workers_now = 1;
			if (pending == 0 || stuck)
				break;
		}
		if (stuck) {
			if (serve)
				space_served(db, req);
			stall_wait(db);
			stuck = false; /* try again: a delete may have made room */
			continue;
		}
		if (pending == 0 && !serve && !logs_need_reclaim(db)) {
			if (db->workers_now > db->cfg.workers_low) {
				persist_wait(db, IDLE_EPOCH_NS);
				if (backlog(db) == 0) /* an empty epoch: scale down */
					scale(db, 0, 0, 0, false);
			} else
				persist_wait(db, 0);
			continue;
		}
		if (pending && pending < EPOCH_BATCH_MIN * 64 && !stopping && !serve &&
		    !logs_need_reclaim(db))
			persist_wait(db, EPOCH_BATCH_WAIT_NS); /* let a batch build up */
		epoch_run(db, db->next_applied);
		bool failed = db->epoch_rc != 0;
		if (failed || serve || logs_need_reclaim(db))
			reclaim_run(db); /* after a failure: frees, empty ULog and lanes */
		/* Failed again right after a reclamation, and no OLog's applied point moved
		 * (records of other keys may have been applied): wait for a write. */
		stuck = failed && !db->epoch_moved && after_failure;
		after_failure = failed;
		if (failed)
			cache_wake_waiters(db->cache); /* writers may now give up */
		if (serve && (backlog(db) == 0 || stuck || ++serving >= SERVE_EPOCHS)) {
			serving = 0;
			space_served(db, req);
		}
	}
	reclaim_run(db);
	return NULL;
}

int replay_workers_start(struct tips_db *db)
{
	unsigned n = db->cfg.workers_up ? db->cfg.workers_up : 1;
	db->workers = calloc(n, sizeof(struct worker));
	db->cursors = calloc(db->ologs.n, sizeof(*db->cursors));
	db->next_applied = calloc(db->ologs.n, sizeof(uint64_t));
	if (!db->workers || !db->cursors || !db->next_applied)
		return tips_set_error(TIPS_ENOMEM, "replay: out of DRAM");
	if (!workers_ensure(db, n))
		return tips_set_error(TIPS_ENOMEM, "replay: cannot start worker threads");
	return 0;
}

int replay_start(struct tips_db *db)
{
	db->workers_now = db->cfg.workers_low;
	if (pthread_create(&db->persist_thread, NULL, persist_main, db))
		return tips_set_error(TIPS_ENOMEM, "replay: cannot start the persist thread");
	db->persist_started = true;
	return 0;
}

uint64_t replay_stop(struct tips_db *db)
{
	if (db->persist_started) {
		atomic_store(&db->stopping, 1);
		replay_wake(db);
		pthread_join(db->persist_thread, NULL);
		db->persist_started = false;
	}
	if (db->workers) {
		pthread_mutex_lock(&db->work_mu);
		db->work_epoch = UINT64_MAX;
		pthread_cond_broadcast(&db->work_cv);
		pthread_mutex_unlock(&db->work_mu);
		for (unsigned i = 0; i < db->nworkers_made; i++) {
			pthread_join(db->workers[i].thread, NULL);
			free(db->workers[i].q);
			free(db->workers[i].gone);
			free(db->workers[i].values.r);
		}
		free(db->workers);
		db->workers = NULL;
		db->nworkers_made = 0;
	}
	free(db->cursors);
	db->cursors = NULL;
	free(db->next_applied);
	db->next_applied = NULL;
	return db->ologs.logs ? backlog(db) : 0;
}

int replay_recovered(struct tips_db *db)
{
	/* The opening thread runs epochs with every worker until nothing is pending,
	 * reclaiming whenever the logs ask for it (so the MLog never overflows), and
	 * after a failed epoch (see "Failed epochs"); it gives up when an epoch right
	 * after a reclamation moves no OLog's applied point. */
	unsigned keep = db->workers_now;
	bool after_failure = false;
	int rc = 0;
	db->recovering = true;
	while (backlog(db) > 0) {
		db->workers_now = db->cfg.workers_up ? db->cfg.workers_up : 1;
		epoch_run(db, db->next_applied);
		bool failed = db->epoch_rc != 0;
		if (failed || logs_need_reclaim(db))
			reclaim_run(db);
		if (failed && !db->epoch_moved && after_failure) {
			rc = db->epoch_rc;
			break;
		}
		after_failure = failed;
	}
	db->recovering = false;
	db->workers_now = keep;
	atomic_store(&db->stalled, 0);
	if (rc)
		return tips_set_error(TIPS_ENOSPC, "recovery cannot replay the logged writes: an "
				      "index operation failed with %s, %llu bytes of OLog records "
				      "wait; they are kept: grow the pool (tips pool grow PATH "
				      "--size SIZE) and open it again", tips_strerror(rc),
				      (unsigned long long)backlog(db));
	return 0;
}
