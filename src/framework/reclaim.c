/*
 * reclaim.c - UNO logging reclamation and crash recovery (TIPS §4.3.3, §4.4).
 *
 * Reclamation runs between replay epochs, so [head, applied) of every OLog is exactly
 * what the index holds beyond the last reclamation.
 *   Step 1: wait for merged scans (the scan lock); flush every range in the ULog and every
 *     block allocated through the MLog; record each OLog's new head (pending_head);
 *     then persist flush_done = 1. From here the index's state is durable.
 *   Step 2: wait for a grace period, if a reader may hold what this step releases;
 *     checkpoint the heap (applies the deferred frees: no replay can free those blocks
 *     again now), install the heads, move the ULog to a new generation (which empties
 *     it), and persist flush_done = 0, in that order.
 * The grace period protects two kinds of reader: an index lookup inside a block the
 * index freed (the checkpoint releases it), and a bounded scan reading OLog records
 * below the new heads (writers reuse that space). With neither (no block freed since
 * the last checkpoint, no bounded scan since the last reclamation: an insert-only load)
 * it is skipped. It is not free: with two clients on two cores one of them is often
 * preempted inside a read section, and liburcu-bp then sleeps 10 ms at a time.
 * Bounded scans (db.c) read OLog records from `applied` on inside a read section, not
 * under the scan lock, and raise `scanned` inside it before they read `applied`. The
 * new heads are `applied` values read before step 2 takes `scanned` (an exchange with
 * 0), `applied` only grows, and writers reuse space below a head only once it is
 * installed, after the grace period. So a scan whose flag step 2 took is waited for,
 * and one that raised it after (or found it raised after) read `applied` at or above
 * the new heads. A scan that found the flag raised before step 2 took it is covered by
 * the wait itself: its section was open when the grace period began.
 * The count of freed blocks is exact only because every framework free is a logged
 * free (tips_free): the heap's own checkpoints (make_room) never run while logged
 * records are pending, so they cannot apply such a free, nor reset the count, without
 * a grace period. It may count blocks no reader ever saw (an insert that lost a race,
 * an allocation undone); that only costs a wait.
 * Recovery after a crash: with flush_done set, finish step 2; otherwise undo the ULog
 * (newest record first), roll back the MLog (frees what was allocated since the last
 * reclamation, forgets deferred frees) and empty the ULog: the index's structure is
 * back at the last reclamation (values overwritten in place with no record,
 * tips_ulog_value, may hold later bytes, which the replay of their keys' writes sets
 * again). Then the OLogs are replayed from their heads and reclaimed. Each step is
 * idempotent or crash-safe, so a crash during recovery is recovered by recovering
 * again.
 */
#define _GNU_SOURCE
#include <time.h>

#include "heap/heap_internal.h"
#include "pm/pm.h"
#include "framework/framework.h"
#include "util/errors_internal.h"
#include "util/grace.h"

static void persist_word(uint64_t *w, uint64_t v)
{
	*w = v;
	pm_persist(w, sizeof(*w));
}

/* Step 2; also what recovery and open run when they find flush_done set. @grace: wait
 * for every open read section first (util/grace.h): the checkpoint really frees what
 * the index tips_free'd, and an index reader (a lookup that missed the cache, a scan)
 * may still be inside a lock-free traversal of such a block. */
void reclaim_finish(struct tips_db *db, bool grace)
{
	if (grace)
		grace_wait();
	int rc = tips_heap_checkpoint(db->heap, 0);
	TIPS_INVARIANT(rc == 0, "reclamation: heap checkpoint failed");
	for (unsigned i = 0; i < db->ologs.n; i++) {
		struct olog *l = &db->ologs.logs[i];
		l->pm->head = l->pm->pending_head;
		pm_flush(&l->pm->head, sizeof(l->pm->head));
		atomic_store_explicit(&l->head, l->pm->head, memory_order_release);
	}
	pm_drain();
	/* The new ULog generation must be durable before flush_done clears: with the old
	 * generation still valid, a later recovery would undo from stale records. */
	persist_word(&db->fw->ulog_gen, db->fw->ulog_gen + 1);
	persist_word(&db->fw->flush_done, 0);
	if (db->ulog)
		ulog_reset(db->ulog, db->fw->ulog_gen);
}

void reclaim_run(struct tips_db *db)
{
	pthread_rwlock_wrlock(&db->scan_lock);
	/* Step 1. */
	ulog_flush_targets(db->ulog);
	uint64_t freed = heap_flush_logged_blocks(db->heap); /* drains */
	for (unsigned i = 0; i < db->ologs.n; i++) {
		struct olog *l = &db->ologs.logs[i];
		l->pm->pending_head = l->applied;
		pm_flush(&l->pm->pending_head, sizeof(l->pm->pending_head));
	}
	pm_drain();
	persist_word(&db->fw->flush_done, 1);
	/* Step 2. */
	bool scanned = atomic_exchange(&db->scanned, 0);
	bool grace = freed > 0 || scanned;
	reclaim_finish(db, grace);
	pthread_rwlock_unlock(&db->scan_lock);
	atomic_store(&db->reclaim_wanted, 0);
	atomic_store(&db->room_wanted, 0);
	atomic_fetch_add(&db->reclamations, 1);
	if (grace) /* after reclamations, which tips_stats reads second: never more graces */
		atomic_fetch_add(&db->reclaim_graces, 1);
	pthread_mutex_lock(&db->ologs.lock);
	pthread_cond_broadcast(&db->ologs.room);
	pthread_mutex_unlock(&db->ologs.lock);
}

int recover(struct tips_db *db)
{
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	if (db->fw->flush_done) {
		reclaim_finish(db, true);
	} else {
		int rc = ulog_rollback(db->ulog_ring, db->ulog_size, db->fw->ulog_gen, db->pool);
		if (rc)
			return rc;
		rc = tips_heap_rollback(db->heap);
		if (rc)
			return rc;
		persist_word(&db->fw->ulog_gen, db->fw->ulog_gen + 1);
		ulog_reset(db->ulog, db->fw->ulog_gen);
	}
	/* The index is at the last reclamation; its records follow the heads. */
	for (unsigned i = 0; i < db->ologs.n; i++) {
		struct olog *l = &db->ologs.logs[i];
		l->applied = l->pm->head;
		l->recovered_end = l->pm->tail;
	}
	int rc = fw_index_attach(db); /* checks the OLogs; with TIPS_VERIFY the index */
	if (rc)
		return rc;
	rc = replay_recovered(db);
	if (rc)
		return rc;
	reclaim_run(db);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	db->recovery_ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 +
			  (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
	db->recovered = 1;
	return 0;
}
