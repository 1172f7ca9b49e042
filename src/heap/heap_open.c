/*
 * heap_open.c - formatting a heap, growing it, opening it (recovery: validating the
 * header, replaying the valid records of the current generation, rebuilding the
 * volatile state from the chunk table and bitmaps) and closing it.
 *
 * Invariant kept: nothing read from the pool is trusted before it is checked (header
 * checksum, table entries within the heap, records that name real blocks), so a damaged
 * pool yields TIPS_ECORRUPT instead of a crash; replay is idempotent, so a crash during
 * recovery is recovered from the same way; a grow is applied only through a
 * checksummed header write that can be repeated.
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

/* ---- format, open, replay, close ------------------------------------------------ */

uint64_t heap_header_checksum(const struct heap_header *hh)
{
	return crc32(0, (const Bytef *)hh, offsetof(struct heap_header, checksum));
}

#define HEAP_BIG_LOGS (256ull << 20) /* heaps this large give their logs 1/8 */

int heap_format(void *base, size_t size)
{
	if (size < HEAP_MIN_SIZE)
		return tips_set_error(TIPS_ESIZE, "heap of %zu bytes is below the minimum", size);
	struct heap_header *hh = base;
	memset(hh, 0, sizeof(*hh));
	hh->magic = HEAP_MAGIC;
	hh->layout_version = HEAP_LAYOUT_VERSION;
	hh->nlanes = HEAP_DEFAULT_LANES;
	/* Logs: 1/32 of a heap below HEAP_BIG_LOGS, 1/8 of a larger one, 64 KiB..64 MiB in
	 * all, at least 32 records a lane. The TIPS framework keeps a replay worker's MLog
	 * records in its lane until the next reclamation, so bigger lanes mean fewer
	 * reclamations, each of which stops replay for about a millisecond (1/32 gave a
	 * 2M-insert load in an 832 MiB pool about 270 of them: docs/framework.md,
	 * "Nineteenth round"); a small heap keeps its room for data. A 1 GiB pool: 64 MiB,
	 * 128K records a lane. */
	uint64_t log_bytes = size / (size < HEAP_BIG_LOGS ? 32 : 8);
	log_bytes = log_bytes < (64u << 10) ? (64u << 10) : log_bytes > (64u << 20) ? (64u << 20) : log_bytes;
	hh->lane_records = log_bytes / hh->nlanes / sizeof(struct heap_record);
	if (hh->lane_records < 32)
		hh->lane_records = 32;
	hh->lanes_offset = HEAP_HEADER_SIZE;
	hh->table_offset = hh->lanes_offset + hh->nlanes * hh->lane_records * sizeof(struct heap_record);
	/* Chunks start chunk-aligned after a table sized for HEAP_TABLE_GROWTH times the
	 * chunks that still fit (room to grow the heap later). */
	uint64_t n = size / HEAP_CHUNK_SIZE;
	for (;; n--) {
		uint64_t start = hh->table_offset + n * HEAP_TABLE_GROWTH * sizeof(uint64_t);
		start = (start + HEAP_CHUNK_SIZE - 1) / HEAP_CHUNK_SIZE * HEAP_CHUNK_SIZE;
		if (n == 0 || start + n * HEAP_CHUNK_SIZE <= size) {
			hh->chunks_offset = start;
			break;
		}
	}
	if (n < 2)
		return tips_set_error(TIPS_ESIZE, "heap of %zu bytes has room for no chunks", size);
	hh->nchunks = n;
	hh->checksum = heap_header_checksum(hh);
	hh->generation = 1;
	/* Logs all zero (generation 0 never matches); table all FREE. */
	char *b = base;
	memset(b + hh->lanes_offset, 0, hh->chunks_offset - hh->lanes_offset);
	pm_flush(b + hh->lanes_offset, hh->chunks_offset - hh->lanes_offset);
	pm_persist(hh, sizeof(*hh));
	return 0;
}

/* Chunks the table of @hh has entries for. */
static uint64_t table_capacity(const struct heap_header *hh)
{
	return (hh->chunks_offset - hh->table_offset) / sizeof(uint64_t);
}

static bool heap_layout_plausible(const struct heap_header *hh, uint64_t size);

int heap_grow_plan(const void *hdr, uint64_t old_size, uint64_t new_size, uint64_t *nchunks,
		   uint64_t *max_size)
{
	const struct heap_header *hh = hdr;
	if (hh->magic != HEAP_MAGIC || hh->layout_version != HEAP_LAYOUT_VERSION ||
	    hh->checksum != heap_header_checksum(hh) || !heap_layout_plausible(hh, old_size) ||
	    new_size < old_size)
		return tips_set_error(TIPS_ECORRUPT, "heap header is corrupted");
	*nchunks = (new_size - hh->chunks_offset) / HEAP_CHUNK_SIZE;
	*max_size = hh->chunks_offset + table_capacity(hh) * HEAP_CHUNK_SIZE;
	return 0;
}

void heap_grow_prepare(void *base, uint64_t nchunks)
{
	struct heap_header *hh = base;
	TIPS_INVARIANT(nchunks >= hh->nchunks && nchunks <= table_capacity(hh),
		       "a heap grows only within its chunk table (heap_grow_plan)");
	uint64_t *table = (uint64_t *)((char *)base + hh->table_offset);
	uint64_t first = hh->nchunks;
	for (uint64_t i = first; i < nchunks; i++)
		table[i] = CHUNK_ENTRY(CHUNK_FREE, 0);
	pm_persist(&table[first], (nchunks - first) * sizeof(uint64_t));
}

void heap_grow_apply(void *base, uint64_t nchunks)
{
	struct heap_header *hh = base;
	hh->nchunks = nchunks;
	hh->checksum = heap_header_checksum(hh);
	pm_persist(hh, offsetof(struct heap_header, generation));
}

static int addr_compare(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

static bool addr_listed(const uint64_t *sorted, size_t n, uint64_t v)
{
	return bsearch(&v, sorted, n, sizeof(*sorted), addr_compare) != NULL;
}

/* Validates the geometry a record claims, so replay never writes outside the heap. */
bool record_sane(const struct tips_heap *h, const struct heap_record *r)
{
	const char *blk = (const char *)r->block;
	if (blk < h->chunks || blk >= chunk_addr(h, h->nchunks))
		return false;
	unsigned t = REC_TYPE(r->tag);
	bool slot_type = t == REC_ALLOC_SLOT || t == REC_FREE_SLOT;
	if (slot_type ? !slot_in_pool(h, (const uint64_t *)r->slot) : r->slot != 0)
		return false;
	uint64_t idx = chunk_index(h, blk);
	uint64_t e = h->table[idx];
	if (CHUNK_KIND(e) == CHUNK_RUN) {
		uint64_t cls = CHUNK_ARG(e);
		if (cls >= (uint64_t)NCLASSES || r->size + BLOCK_HEADER_SIZE > class_slot[cls])
			return false;
		uint64_t off = (uint64_t)(blk - chunk_addr(h, idx));
		return off >= RUN_BITMAP_BYTES && (off - RUN_BITMAP_BYTES) % class_slot[cls] == 0 &&
		       (off - RUN_BITMAP_BYTES) / class_slot[cls] < run_capacity((int)cls);
	}
	/* An extent: its head is FREE or EXTENT, the rest FREE or its own continuations
	 * (it was carved from free chunks; replay may have written it before). */
	uint64_t n = extent_chunks(r->size);
	if (blk != chunk_addr(h, idx) || n < 1 || idx + n > h->nchunks)
		return false;
	if (CHUNK_KIND(e) != CHUNK_FREE && CHUNK_KIND(e) != CHUNK_EXTENT)
		return false;
	for (uint64_t k = 1; k < n; k++) {
		uint64_t c = h->table[idx + k];
		if (c != CHUNK_ENTRY(CHUNK_FREE, 0) && c != CHUNK_ENTRY(CHUNK_CONT, k))
			return false;
	}
	return true;
}

/*
 * Replays the valid records, bringing the media to the state the program had at the
 * crash: every block a record names marked allocated (an interrupted checkpoint may
 * have cleared some; frees stay pending until the next checkpoint), allocation headers
 * rewritten, and every slot set to its last value (see heap_layout.h).
 */
static int replay(struct tips_heap *h, struct heap_record ***out, size_t *nout)
{
	uint64_t gen = generation(h), cap = h->hdr->lane_records;
	size_t total = 0, nfreed = 0;
	for (unsigned l = 0; l < h->nlanes; l++) {
		h->lanes[l].nrec = 0;
		for (uint64_t i = 0; i < cap; i++)
			if (record_valid(h, &h->lanes[l].log[i], gen)) {
				total++;
				h->lanes[l].nrec = (uint32_t)(i + 1);
			}
	}
	struct heap_record **recs = calloc(total ? total : 1, sizeof(*recs));
	uint64_t *freed = calloc(total ? total : 1, sizeof(*freed));
	if (!recs || !freed) {
		free(recs);
		free(freed);
		return tips_set_error(TIPS_ENOMEM, "out of DRAM for heap recovery");
	}
	size_t k = 0;
	for (unsigned l = 0; l < h->nlanes; l++)
		for (uint64_t i = 0; i < h->lanes[l].nrec; i++) {
			struct heap_record *r = &h->lanes[l].log[i];
			if (!record_valid(h, r, gen))
				continue;
			if (!record_sane(h, r)) {
				free(recs);
				free(freed);
				return tips_set_error(TIPS_ECORRUPT, "heap log lane %u record %llu "
						      "names no block", l, (unsigned long long)i);
			}
			recs[k++] = r;
			unsigned t = REC_TYPE(r->tag);
			if (t == REC_FREE_SLOT) /* a logged free leaves slots alone */
				freed[nfreed++] = r->block;
			if (t == REC_ALLOC_LOGGED || t == REC_FREE_LOGGED)
				h->lanes[l].logged++;
		}
	qsort(freed, nfreed, sizeof(*freed), addr_compare);
	/* Stores first, then one flush pass: no line is stored to after its flush. */
	for (size_t i = 0; i < total; i++) {
		struct heap_record *r = recs[i];
		unsigned t = REC_TYPE(r->tag);
		struct block_ref ref;
		uint64_t n;
		record_block(h, r, &ref, &n);
		if (t == REC_ALLOC_SLOT || t == REC_ALLOC_LOGGED)
			block_mark_allocated(h, &ref, r->size, gen);
		else
			block_set_bits(h, &ref, r->size);
		if (t == REC_FREE_SLOT) /* cleared first; a surviving allocation sets it below */
			*(uint64_t *)r->slot = 0;
	}
	for (size_t i = 0; i < total; i++) {
		struct heap_record *r = recs[i];
		if (REC_TYPE(r->tag) == REC_ALLOC_SLOT && !addr_listed(freed, nfreed, r->block))
			*(uint64_t *)r->slot = r->block + BLOCK_HEADER_SIZE;
	}
	struct line_filter f = { { 0, 0 } };
	for (size_t i = 0; i < total; i++)
		flush_record_effects(h, recs[i], false, &f);
	pm_drain();
	free(freed);
	atomic_fetch_add(&h->n_recovered, total);
	*out = recs;
	*nout = total;
	return 0;
}

/* Builds the volatile free lists from the chunk table and bitmaps. */
static int rebuild(struct tips_heap *h)
{
	for (uint64_t i = 0; i < h->nchunks;) {
		uint64_t e = h->table[i];
		switch (CHUNK_KIND(e)) {
		case CHUNK_FREE:
			chunk_mark_free(h, i, 1, true);
			i++;
			break;
		case CHUNK_RUN: {
			if (CHUNK_ARG(e) >= (uint64_t)NCLASSES)
				return tips_set_error(TIPS_ECORRUPT, "chunk %llu: bad size class",
						      (unsigned long long)i);
			int cls = (int)CHUNK_ARG(e);
			int rc = run_state_init(h, i, cls);
			if (rc)
				return rc;
			if (h->runs[i].nfree == run_capacity(cls)) {
				/* empty: free for any class */
				room_add(h, -(int64_t)run_capacity(cls) * class_slot[cls]);
				chunk_release_locked(h, i, 1);
			}
			else if (h->runs[i].nfree > 0)
				class_list_push(h, cls, i);
			i++;
			break;
		}
		case CHUNK_EXTENT: {
			uint64_t n = CHUNK_ARG(e);
			if (n == 0 || i + n > h->nchunks)
				return tips_set_error(TIPS_ECORRUPT, "chunk %llu: bad extent length",
						      (unsigned long long)i);
			h->runs[i].pending_free = calloc(RUN_BITMAP_BYTES / 8, sizeof(uint64_t));
			if (!h->runs[i].pending_free)
				return tips_set_error(TIPS_ENOMEM, "out of DRAM");
			h->bytes_at_open += n * HEAP_CHUNK_SIZE - BLOCK_HEADER_SIZE;
			i += n;
			break;
		}
		default:
			return tips_set_error(TIPS_ECORRUPT, "chunk %llu: bad chunk table entry",
					      (unsigned long long)i);
		}
	}
	for (uint64_t i = 0; i < h->nchunks; i++)
		if (CHUNK_KIND(h->table[i]) == CHUNK_RUN) {
			int cls = (int)CHUNK_ARG(h->table[i]);
			h->bytes_at_open += (uint64_t)(run_capacity(cls) - h->runs[i].nfree) *
					   (class_slot[cls] - BLOCK_HEADER_SIZE);
		}
	return 0;
}

static void heap_free_volatile(struct tips_heap *h)
{
	if (h->runs)
		for (uint64_t i = 0; i < h->nchunks; i++)
			free(h->runs[i].pending_free);
	for (unsigned l = 0; l < h->nlanes; l++)
		pthread_mutex_destroy(&h->lanes[l].lock);
	for (int c = 0; c < NCLASSES; c++)
		pthread_mutex_destroy(&h->classes[c].lock);
	pthread_mutex_destroy(&h->chunk_lock);
	pthread_mutex_destroy(&h->all_lanes.lock);
	pthread_cond_destroy(&h->all_lanes.turn);
	free(h->runs);
	free(h->chunk_free);
	free(h->freeing);
	free(h);
}

/* Whether a heap header describes areas in order inside @size bytes (no sum can wrap:
 * every count is bounded by @size first). */
static bool heap_layout_plausible(const struct heap_header *hh, uint64_t size)
{
	if (hh->nlanes == 0 || hh->nlanes > HEAP_MAX_LANES || hh->generation == 0 ||
	    hh->lanes_offset < HEAP_HEADER_SIZE || hh->lanes_offset > size ||
	    hh->lane_records > size / sizeof(struct heap_record) / hh->nlanes ||
	    hh->nchunks == 0 || hh->nchunks > size / HEAP_CHUNK_SIZE ||
	    hh->table_offset > size || hh->chunks_offset > size)
		return false;
	uint64_t lanes_end = hh->lanes_offset + hh->nlanes * hh->lane_records *
						   sizeof(struct heap_record);
	return lanes_end <= hh->table_offset &&
	       hh->table_offset + hh->nchunks * sizeof(uint64_t) <= hh->chunks_offset &&
	       hh->nchunks * HEAP_CHUNK_SIZE <= size - hh->chunks_offset;
}

int heap_open(void *base, size_t size, void *slots_start, void *slots_end,
	      struct tips_heap **out)
{
	struct heap_header *hh = base;
	if (hh->magic != HEAP_MAGIC || hh->layout_version != HEAP_LAYOUT_VERSION ||
	    hh->checksum != heap_header_checksum(hh) || !heap_layout_plausible(hh, size))
		return tips_set_error(TIPS_ECORRUPT, "heap header is corrupted");
	struct tips_heap *h = calloc(1, sizeof(*h));
	if (!h)
		return tips_set_error(TIPS_ENOMEM, "out of DRAM");
	h->base = base;
	h->slots_start = (uintptr_t)slots_start;
	h->slots_end = (uintptr_t)slots_end;
	h->hdr = hh;
	h->table = (uint64_t *)(h->base + hh->table_offset);
	h->chunks = h->base + hh->chunks_offset;
	h->nchunks = hh->nchunks;
	h->nlanes = hh->nlanes;
	pthread_mutex_init(&h->chunk_lock, NULL);
	pthread_mutex_init(&h->all_lanes.lock, NULL);
	pthread_cond_init(&h->all_lanes.turn, NULL);
	for (unsigned l = 0; l < h->nlanes; l++) {
		pthread_mutex_init(&h->lanes[l].lock, NULL);
		h->lanes[l].log = (struct heap_record *)(h->base + hh->lanes_offset) + l * hh->lane_records;
		for (int c = 0; c < NCLASSES; c++)
			h->lanes[l].active[c] = -1;
	}
	for (int c = 0; c < NCLASSES; c++) {
		pthread_mutex_init(&h->classes[c].lock, NULL);
		h->classes[c].head = -1;
	}
	h->runs = aligned_alloc(64, h->nchunks * sizeof(*h->runs));
	if (h->runs)
		memset(h->runs, 0, h->nchunks * sizeof(*h->runs));
	h->chunk_free = calloc((h->nchunks + 63) / 64, sizeof(uint64_t));
	h->freeing = calloc((size_t)h->nlanes * hh->lane_records, sizeof(*h->freeing));
	if (!h->runs || !h->chunk_free || !h->freeing) {
		heap_free_volatile(h);
		return tips_set_error(TIPS_ENOMEM, "out of DRAM");
	}
	for (uint64_t i = 0; i < h->nchunks; i++)
		h->runs[i].owner = -1;
	struct heap_record **recs = NULL;
	size_t nrecs = 0;
	int rc = replay(h, &recs, &nrecs);
	if (rc == 0)
		rc = rebuild(h);
	if (rc) {
		free(recs);
		heap_free_volatile(h);
		return rc;
	}
	/* Frees recorded before the crash stay pending (deferred) as they were. */
	for (size_t i = 0; i < nrecs; i++) {
		unsigned t = REC_TYPE(recs[i]->tag);
		if (t == REC_FREE_SLOT || t == REC_FREE_LOGGED) {
			struct block_ref ref;
			uint64_t n;
			record_block(h, recs[i], &ref, &n);
			block_mark_pending(h, &ref);
		}
	}
	free(recs);
	if (logged_pending(h) > 0)
		h->undecided = true; /* the MLog's owner decides: checkpoint or rollback */
	else if (nrecs > 0)
		checkpoint_locked(h, 0, false);
	*out = h;
	return 0;
}

int heap_close(struct tips_heap *h, int crashed)
{
	int pending = 0;
	if (!crashed) {
		if (h->undecided)
			pending = 1; /* leave the MLog for its owner's recovery */
		else
			tips_heap_checkpoint(h, 0);
	}
	heap_free_volatile(h);
	return pending;
}

