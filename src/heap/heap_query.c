/*
 * heap_query.c - what the heap says about itself: usable sizes, freshness, statistics,
 * tips_heap_walk (every allocated block) and tips_heap_check (the consistency check).
 *
 * Invariant kept: these calls change no persistent state. The walk reports every block
 * the chunk table and bitmaps hold allocated, marking as pending those allocated or
 * freed in the current generation (not yet retired by a checkpoint); the check also
 * recounts the room from the chunk map and runs and compares it with the counter.
 */
#define _GNU_SOURCE
#include "heap/heap_private.h"
#include "pm/pm.h"
#include "util/errors_internal.h"
#include "util/version_internal.h"
#include "util/thread_slot.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

/* ---- queries -------------------------------------------------------------------- */

size_t tips_heap_usable_size(const struct tips_heap *h, const void *ptr)
{
	struct block_ref ref;
	uintptr_t p = (uintptr_t)ptr;
	if (!h || p < BLOCK_HEADER_SIZE ||
	    !block_find(h, (const void *)(p - BLOCK_HEADER_SIZE), true, &ref) ||
	    !block_is_allocated(h, &ref))
		return 0;
	return ref.usable;
}

/* The header's generation is read first: the caller (ULog, before a store to the
 * block) has the block's line in cache or is about to, while the allocation bitmap is
 * a miss of its own, paid only for a block that may be fresh (most are not). */
int tips_heap_block_is_fresh(const struct tips_heap *h, const void *addr)
{
	struct block_ref ref;
	if (!h || !block_find(h, addr, false, &ref) || ref.hdr->alloc_gen != generation(h))
		return 0;
	return block_is_allocated(h, &ref);
}

uint64_t tips_heap_generation(const struct tips_heap *h) { return generation(h); }

static void heap_stats_fill(struct tips_heap *h, struct tips_heap_stats *out)
{
	memset(out, 0, sizeof(*out));
	int64_t delta = 0;
	lanes_lock_all(h);
	for (unsigned l = 0; l < h->nlanes; l++) {
		out->allocs += h->lanes[l].allocs;
		out->frees += h->lanes[l].frees;
		delta += h->lanes[l].bytes_delta;
	}
	lanes_unlock_all(h);
	out->checkpoints = atomic_load(&h->n_checkpoints);
	out->rollbacks = atomic_load(&h->n_rollbacks);
	out->recovered_records = atomic_load(&h->n_recovered);
	out->bytes_in_use = (uint64_t)((int64_t)h->bytes_at_open + delta);
	out->bytes_total = h->nchunks * HEAP_CHUNK_SIZE;
}

void tips_heap_stats_sized(struct tips_heap *h, struct tips_heap_stats *out, size_t size)
{
	struct tips_heap_stats full;
	heap_stats_fill(h, &full);
	tips_struct_write(out, size, &full, sizeof(full));
}

static bool block_pending(const struct tips_heap *h, const struct block_ref *ref)
{
	const _Atomic uint64_t *pf = h->runs[ref->chunk].pending_free;
	return pf && ((atomic_load(&pf[ref->bit / 64]) >> (ref->bit % 64)) & 1);
}

/* Reports one allocated block, found by address, to a walk's callback. */
static int walk_visit(const struct tips_heap *h, const char *block, uint64_t gen,
		      tips_heap_walk_fn fn, void *arg)
{
	struct block_ref ref;
	if (!block_find(h, block, true, &ref))
		return 0;
	struct tips_heap_block b = {
		.ptr = (char *)ref.hdr + BLOCK_HEADER_SIZE,
		.size = ref.hdr->size,
		.usable = ref.usable,
		.alloc_gen = ref.hdr->alloc_gen,
		.pending = ref.hdr->alloc_gen == gen || block_pending(h, &ref),
	};
	return fn(&b, arg);
}

int tips_heap_walk(struct tips_heap *h, tips_heap_walk_fn fn, void *arg)
{
	uint64_t gen = generation(h);
	for (uint64_t i = 0; i < h->nchunks;) {
		uint64_t e = h->table[i];
		int rc = 0;
		if (CHUNK_KIND(e) == CHUNK_EXTENT) {
			rc = walk_visit(h, chunk_addr(h, i), gen, fn, arg);
			i += CHUNK_ARG(e) ? CHUNK_ARG(e) : 1;
		} else {
			if (CHUNK_KIND(e) == CHUNK_RUN && CHUNK_ARG(e) < (uint64_t)NCLASSES) {
				int cls = (int)CHUNK_ARG(e);
				const uint64_t *bm = run_bitmap(h, i);
				for (uint32_t bit = 0; bit < run_capacity(cls) && rc == 0; bit++)
					if ((bm[bit / 64] >> (bit % 64)) & 1)
						rc = walk_visit(h, chunk_addr(h, i) + RUN_BITMAP_BYTES +
								(uint64_t)bit * class_slot[cls], gen, fn, arg);
			}
			i++;
		}
		if (rc)
			return rc;
	}
	return 0;
}

/* ---- check ---------------------------------------------------------------------- */

__attribute__((format(printf, 2, 3)))
static void report_error(struct tips_heap_report *rep, const char *fmt, ...)
{
	if (rep->errors++ == 0) {
		va_list ap;
		va_start(ap, fmt);
		vsnprintf(rep->first_error, sizeof(rep->first_error), fmt, ap);
		va_end(ap);
	}
}

static void check_block(const struct tips_heap *h, const struct block_header *bh, size_t usable,
			uint64_t gen, struct tips_heap_report *rep)
{
	rep->blocks_allocated++;
	rep->bytes_allocated += bh->size;
	if (bh->size == 0 || bh->size > usable)
		report_error(rep, "block at 0x%llx: header size %llu does not fit the block", (unsigned long long)(uintptr_t)bh, (unsigned long long)bh->size);
	if (bh->alloc_gen == 0 || bh->alloc_gen > gen)
		report_error(rep, "block at 0x%llx: allocation generation %llu is in the future", (unsigned long long)(uintptr_t)bh, (unsigned long long)bh->alloc_gen);
	(void)h;
}

/* What heap_room() must say, counted from the free-chunk map and the runs' free counts. */
static int64_t room_recount(const struct tips_heap *h)
{
	int64_t room = 0;
	for (uint64_t i = 0; i < h->nchunks; i++) {
		uint64_t e = h->table[i];
		if (chunk_is_free(h, i))
			room += HEAP_CHUNK_SIZE;
		else if (CHUNK_KIND(e) == CHUNK_RUN && CHUNK_ARG(e) < (uint64_t)NCLASSES)
			room += (int64_t)h->runs[i].nfree * class_slot[CHUNK_ARG(e)];
	}
	return room;
}

static int heap_check(struct tips_heap *h, struct tips_heap_report *rep)
{
	struct tips_heap_report local;
	if (!rep)
		rep = &local;
	memset(rep, 0, sizeof(*rep));
	uint64_t gen = generation(h);
	rep->chunks = h->nchunks;
	if (h->hdr->checksum != heap_header_checksum(h->hdr))
		report_error(rep, "heap header checksum mismatch");
	for (uint64_t i = 0; i < h->nchunks;) {
		uint64_t e = h->table[i];
		switch (CHUNK_KIND(e)) {
		case CHUNK_FREE:
			rep->chunks_free++;
			i++;
			break;
		case CHUNK_RUN: {
			rep->chunks_run++;
			uint64_t cls = CHUNK_ARG(e);
			if (cls >= (uint64_t)NCLASSES) {
				report_error(rep, "chunk %llu: size class %llu does not exist", (unsigned long long)(i), (unsigned long long)(cls));
				i++;
				break;
			}
			uint32_t cap = run_capacity((int)cls);
			const uint64_t *bm = run_bitmap(h, i);
			for (uint32_t w = cap / 64; w < RUN_BITMAP_BYTES / 8; w++) {
				uint64_t beyond = w == cap / 64 ? bm[w] & (~0ull << (cap % 64)) : bm[w];
				if (beyond)
					report_error(rep, "chunk %llu: bitmap word %llu marks blocks past "
						     "the run's end", (unsigned long long)(i), (unsigned long long)(w));
			}
			for (uint32_t bit = 0; bit < cap; bit++)
				if ((bm[bit / 64] >> (bit % 64)) & 1)
					check_block(h, (const struct block_header *)(chunk_addr(h, i) +
						    RUN_BITMAP_BYTES + (uint64_t)bit * class_slot[cls]),
						    class_slot[cls] - BLOCK_HEADER_SIZE, gen, rep);
			i++;
			break;
		}
		case CHUNK_EXTENT: {
			rep->chunks_extent++;
			uint64_t n = CHUNK_ARG(e);
			if (n == 0 || i + n > h->nchunks) {
				report_error(rep, "chunk %llu: extent of %llu chunks overruns the heap", (unsigned long long)(i), (unsigned long long)(n));
				i++;
				break;
			}
			for (uint64_t k = 1; k < n; k++)
				if (h->table[i + k] != CHUNK_ENTRY(CHUNK_CONT, k))
					report_error(rep, "chunk %llu: extent continuation %llu is wrong", (unsigned long long)(i), (unsigned long long)(k));
			check_block(h, (const struct block_header *)chunk_addr(h, i),
				    n * HEAP_CHUNK_SIZE - BLOCK_HEADER_SIZE, gen, rep);
			rep->chunks_extent += n - 1;
			i += n;
			break;
		}
		case CHUNK_CONT:
			report_error(rep, "chunk %llu: extent continuation without a head", (unsigned long long)i);
			i++;
			break;
		default:
			report_error(rep, "chunk %llu: unknown chunk kind %llu", (unsigned long long)(i), (unsigned long long)(CHUNK_KIND(e)));
			i++;
		}
	}
	int64_t room = room_recount(h);
	if (room != atomic_load(&h->room))
		report_error(rep, "room counter says %lld free bytes, the chunk map and runs %lld",
			     (long long)atomic_load(&h->room), (long long)room);
	for (unsigned l = 0; l < h->nlanes; l++)
		for (uint64_t k = 0; k < h->hdr->lane_records; k++) {
			const struct heap_record *r = &h->lanes[l].log[k];
			if (!record_valid(h, r, gen))
				continue;
			rep->log_records++;
			if (!record_sane(h, r))
				report_error(rep, "log lane %llu record %llu names no block", (unsigned long long)(l), (unsigned long long)(k));
		}
	return rep->errors ? tips_set_error(TIPS_ECORRUPT, "heap inconsistent: %s", rep->first_error)
			   : 0;
}

int tips_heap_check_sized(struct tips_heap *h, struct tips_heap_report *rep, size_t size)
{
	struct tips_heap_report r;
	int rc = heap_check(h, &r);
	if (rep)
		tips_struct_write(rep, size, &r, sizeof(r));
	return rc;
}
