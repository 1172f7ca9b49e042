/*
 * olog.c - the per-thread operational log (TIPS §4.1.5).
 *
 * Each writer thread appends to an OLog slot of its own, so appends need no lock. An
 * append is the durability point of a write and costs exactly two fences: the record
 * (and a PAD record, if the ring wraps) is flushed and fenced, then the tail is stored,
 * flushed and fenced. Only then does durable_tail (DRAM) move, and replay and scans
 * read no further than durable_tail, so nobody ever acts on a record whose tail is not
 * persistent. Space is freed only by reclamation, which moves the head (reclaim.c).
 */
#define _GNU_SOURCE
#include <string.h>

#include "pm/pm.h"
#include "tips/framework.h"

uint64_t olog_record_size(size_t klen, size_t vlen)
{
	uint64_t n = sizeof(struct olog_rec) + klen + vlen;
	return (n + 63) & ~63ull;
}

/* Bytes an append of @size bytes consumes at the tail: a PAD to the ring's end first
 * if the record does not fit before it. */
static uint64_t append_cost(const struct olog *log, uint64_t tail, uint64_t size)
{
	uint64_t to_end = log->size - tail % log->size;
	return size <= to_end ? size : to_end + size;
}

bool olog_has_room(const struct olog *log, uint64_t size)
{
	uint64_t tail = atomic_load_explicit(&log->durable_tail, memory_order_relaxed);
	uint64_t head = atomic_load_explicit(&log->head, memory_order_acquire);
	return tail - head + append_cost(log, tail, size) <= log->size;
}

void olog_append(struct olog *log, unsigned op, uint64_t ts, const void *key, size_t klen,
		 const void *val, size_t vlen, uint64_t entry)
{
	uint64_t size = olog_record_size(klen, vlen);
	uint64_t tail = atomic_load_explicit(&log->durable_tail, memory_order_relaxed);
	uint64_t to_end = log->size - tail % log->size;
	if (size > to_end) {
		struct olog_rec *pad = (struct olog_rec *)(log->ring + tail % log->size);
		pad->ts_op = OLOG_OP_PAD;
		pad->len = (uint32_t)to_end;
		pm_flush(pad, sizeof(*pad));
		tail += to_end;
	}
	struct olog_rec *r = (struct olog_rec *)(log->ring + tail % log->size);
	r->ts_op = ts << 8 | op;
	r->len = (uint32_t)size;
	r->klen = (uint16_t)klen;
	r->reserved = 0;
	r->vlen = (uint32_t)vlen;
	r->reserved2 = 0;
	r->entry = entry;
	memcpy(r->data, key, klen);
	if (vlen)
		memcpy(r->data + klen, val, vlen);
	pm_flush(r, sizeof(*r) + klen + vlen);
	pm_drain(); /* fence 1: the record is persistent */
	tail += size;
	log->pm->tail = tail;
	pm_persist(&log->pm->tail, sizeof(log->pm->tail)); /* fence 2: durability point */
	atomic_store_explicit(&log->durable_tail, tail, memory_order_release);
	atomic_store_explicit(&log->appended,
			      atomic_load_explicit(&log->appended, memory_order_relaxed) + 1,
			      memory_order_relaxed);
}

const struct olog_rec *olog_next(const struct olog *log, uint64_t *pos, uint64_t end)
{
	while (*pos < end) {
		const struct olog_rec *r = (const struct olog_rec *)(log->ring + *pos % log->size);
		if (r->len == 0 || r->len % 64 || r->len > end - *pos) {
			*pos = end; /* cannot happen below a persistent tail; never loop on it */
			return NULL;
		}
		*pos += r->len;
		if (OLOG_REC_OP(r) != OLOG_OP_PAD)
			return r;
	}
	return NULL;
}
