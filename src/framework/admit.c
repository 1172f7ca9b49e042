/*
 * admit.c - admission of writes against the room left in the heap.
 *
 * A write is acknowledged once its OLog record is durable, but the index allocates for
 * it only later, when replay applies it. So a write may be acknowledged only if replay
 * will find the heap room to apply it. Each write is admitted against a reservation:
 *
 *   heap_room() >= reserved + cost(write) + headroom      (puts)
 *   heap_room() >= reserved + cost(write)                 (deletes)
 *
 * where heap_room() is the heap's exact count of free bytes (free chunks and free slots
 * of runs), reserved the costs of admitted writes replay has not applied yet, and
 * cost() a bound on what applying one record allocates (its key and value twice, for a
 * node rebuilt with a new value, plus node overhead). The headroom (1/32 of the heap,
 * at least 1 MiB, plus twice the largest table the index grew into, which a table
 * that doubles again needs while the old one waits for its deferred free) absorbs
 * what no per-write bound sees: a node split, a size class that needs a fresh chunk,
 * a growing table. Deletes may dip into it, so a full pool still takes the deletes
 * that make room again. Puts also need free chunks (a sixteenth of the headroom, at
 * least 8): free slots serve only their own size class, and an index that needs a
 * node of a class whose runs are full needs a fresh chunk. Writers take reservations
 * in batches kept
 * as per-thread credit (db.c), so the shared counter is touched once per batch.
 *
 * Invariant: reserved >= the summed cost of every admitted write not yet applied.
 * Replay releases a record's cost once, when it applies the record (replay.c).
 * When the check fails, the writer asks the persist thread to apply everything and
 * reclaim (deferred frees return room only at a reclamation), then checks again; only
 * then is the write refused with TIPS_ENOSPC. The admission is a bound, not a proof:
 * if replay still finds the heap full it stops, keeps the record, refuses puts and
 * retries (replay.c), so nothing acknowledged is ever dropped.
 */
#define _GNU_SOURCE
#include "heap/heap_internal.h"
#include "framework/framework.h"
#include "util/errors_internal.h"

#define ADMIT_NODE_OVERHEAD 128u
#define ADMIT_MIN_HEADROOM (1ull << 20)
#define ADMIT_MIN_CHUNKS 8u

uint64_t admit_cost(unsigned op, size_t klen, size_t vlen)
{
	if (op == OLOG_OP_DELETE)
		return ADMIT_NODE_OVERHEAD;
	return 2 * ((uint64_t)klen + vlen) + ADMIT_NODE_OVERHEAD;
}

uint64_t admit_headroom(uint64_t heap_bytes)
{
	uint64_t h = heap_bytes / 32;
	return h < ADMIT_MIN_HEADROOM ? ADMIT_MIN_HEADROOM : h;
}

uint64_t admit_keep(struct tips_db *db)
{
	return db->heap_headroom +
	       2 * atomic_load_explicit(&db->grown_block, memory_order_relaxed);
}

uint64_t admit_chunk_margin(const struct tips_db *db)
{
	uint64_t m = db->heap_headroom / 16;
	return m < ADMIT_MIN_CHUNKS * HEAP_CHUNK_BYTES ? ADMIT_MIN_CHUNKS * HEAP_CHUNK_BYTES : m;
}

uint64_t admit_reserve(struct tips_db *db, uint64_t need, uint64_t want, bool is_delete)
{
	uint64_t keep = is_delete ? 0 : admit_keep(db);
	if (!is_delete && heap_chunk_room(db->heap) < admit_chunk_margin(db))
		return 0;
	uint64_t reserved = atomic_load_explicit(&db->heap_reserved, memory_order_relaxed);
	for (;;) {
		uint64_t room = heap_room(db->heap);
		uint64_t spare = room > reserved + keep ? room - reserved - keep : 0;
		if (spare < need)
			return 0;
		uint64_t take = spare < want ? spare : want;
		if (take < need)
			take = need;
		if (atomic_compare_exchange_weak_explicit(&db->heap_reserved, &reserved,
							  reserved + take, memory_order_relaxed,
							  memory_order_relaxed))
			return take;
	}
}

void admit_release(struct tips_db *db, uint64_t bytes)
{
	if (bytes)
		atomic_fetch_sub_explicit(&db->heap_reserved, bytes, memory_order_relaxed);
}

void admit_make_room(struct tips_db *db)
{
	pthread_mutex_lock(&db->ologs.lock);
	uint64_t mine = ++db->space_req;
	pthread_mutex_unlock(&db->ologs.lock);
	replay_wake(db);
	pthread_mutex_lock(&db->ologs.lock);
	while (db->space_done < mine && !atomic_load(&db->stopping))
		pthread_cond_wait(&db->ologs.room, &db->ologs.lock);
	pthread_mutex_unlock(&db->ologs.lock);
}

void fw_debug_admit_all(struct tips_db *db)
{
	db->admit_all = true;
}
