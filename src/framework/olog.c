/*
 * olog.c - the per-thread operational log (TIPS §4.1.5).
 *
 * Each writer thread appends to an OLog slot of its own, so appends need no lock. A
 * single write's append is its durability point and costs one fence: the record (and a
 * PAD record, if the ring wraps) is sealed (fw_layout.h: its lap and a CRC32C seeded
 * with its position), flushed and fenced. Only then does durable_tail (DRAM) move, and
 * replay and scans read no further than durable_tail, so nobody ever acts on a record
 * that is not persistent. The paper persists a tail after the record (a second fence);
 * here recovery finds the end instead (olog_recover): sealed records follow one
 * another from the persistent tail, and the first one whose lap, checksum or shape is
 * wrong is where the log ends, because a record is written only after the previous
 * one's fence. Space is freed only by reclamation, which moves the head (reclaim.c).
 * A write batch is several unsealed records put one after another (olog_put_record, no
 * fence) and committed by one tail update (olog_commit): two fences, and a crash leaves
 * all of them below the persistent tail or none, since the walk stops at an unsealed
 * record.
 * olog_verify() checks a log read back from the pool (head, tail and every record)
 * before recovery follows it, so that a damaged log never sends a reader outside
 * its ring.
 */
#define _GNU_SOURCE
#include <string.h>

#include "pm/pm.h"
#include "framework/framework.h"
#include "util/errors_internal.h"

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

bool olog_has_room(const struct olog *log, uint64_t size, uint64_t keep)
{
	uint64_t tail = atomic_load_explicit(&log->durable_tail, memory_order_relaxed);
	uint64_t head = atomic_load_explicit(&log->head, memory_order_acquire);
	return tail - head + append_cost(log, tail, size) + keep <= log->size;
}

bool olog_has_room_bytes(const struct olog *log, uint64_t bytes, uint64_t keep)
{
	uint64_t tail = atomic_load_explicit(&log->durable_tail, memory_order_relaxed);
	uint64_t head = atomic_load_explicit(&log->head, memory_order_acquire);
	return tail - head + bytes + keep <= log->size;
}

/* Records up to this size are composed in a buffer and written with one streaming
 * copy (pm_copy_flush); longer ones are written in place and flushed. */
#define OLOG_STAGE_MAX 512u

/* The CRC seed of a sealed record at logical offset @pos: a record left at the same
 * ring offset by an earlier lap, or one of another pool, does not check. */
static uint32_t seal_seed(const struct olog *log, uint64_t pos)
{
	return (uint32_t)(((pos ^ log->salt) * 0x9E3779B97F4A7C15ull) >> 32);
}

static uint16_t seal_tag(const struct olog *log, uint64_t pos)
{
	return (uint16_t)(OLOG_SEALED | (pos / log->size) % OLOG_LAP_MOD);
}

/* A sealed record's CRC: of its header up to the crc field (replay clears `entry` in
 * place), then of its key and value. */
static uint32_t seal_crc(const struct olog *log, const struct olog_rec *r, uint64_t pos)
{
	uint32_t crc = fw_crc32c(seal_seed(log, pos), r, offsetof(struct olog_rec, crc));
	if (OLOG_REC_OP(r) == OLOG_OP_PAD)
		return crc;
	return fw_crc32c(crc, r->data, (size_t)r->klen + r->vlen);
}

/* Seals @r, to be stored at logical offset @pos (@r may be a staging copy). */
static void seal(const struct olog *log, struct olog_rec *r, uint64_t pos)
{
	r->seal = seal_tag(log, pos);
	r->crc = seal_crc(log, r, pos);
}

static void fill_record(struct olog_rec *r, unsigned op, uint64_t ts, uint64_t size,
			const void *key, size_t klen, const void *val, size_t vlen,
			uint64_t entry)
{
	r->ts_op = ts << 8 | op;
	r->len = (uint32_t)size;
	r->klen = (uint16_t)klen;
	r->seal = 0;
	r->vlen = (uint32_t)vlen;
	r->crc = 0;
	r->entry = entry;
	memcpy(r->data, key, klen);
	if (vlen)
		memcpy(r->data + klen, val, vlen);
}

void olog_put_record(struct olog *log, uint64_t *ptail, bool sealed, unsigned op, uint64_t ts,
		     const void *key, size_t klen, const void *val, size_t vlen, uint64_t entry)
{
	uint64_t size = olog_record_size(klen, vlen);
	uint64_t tail = *ptail;
	uint64_t to_end = log->size - tail % log->size;
	if (size > to_end) {
		struct olog_rec *pad = (struct olog_rec *)(log->ring + tail % log->size);
		*pad = (struct olog_rec){ .ts_op = OLOG_OP_PAD, .len = (uint32_t)to_end };
		if (sealed)
			seal(log, pad, tail);
		pm_flush(pad, sizeof(*pad));
		tail += to_end;
	}
	struct olog_rec *r = (struct olog_rec *)(log->ring + tail % log->size);
	if (size <= OLOG_STAGE_MAX) {
		/* Whole lines (size is a multiple of 64), the padding zeroed. */
		_Alignas(64) unsigned char buf[OLOG_STAGE_MAX];
		struct olog_rec *staged = (struct olog_rec *)buf;
		fill_record(staged, op, ts, size, key, klen, val, vlen, entry);
		size_t used = sizeof(*staged) + klen + vlen;
		memset(buf + used, 0, size - used);
		if (sealed)
			seal(log, staged, tail);
		pm_copy_flush(r, buf, size);
	} else {
		fill_record(r, op, ts, size, key, klen, val, vlen, entry);
		if (sealed)
			seal(log, r, tail);
		pm_flush(r, sizeof(*r) + klen + vlen);
	}
	*ptail = tail + size;
}

/* Records below @tail are durable: replay and scans may read them. */
static void publish(struct olog *log, uint64_t tail, uint64_t records)
{
	atomic_store_explicit(&log->durable_tail, tail, memory_order_release);
	atomic_store_explicit(&log->appended,
			      atomic_load_explicit(&log->appended, memory_order_relaxed) + records,
			      memory_order_relaxed);
}

void olog_commit(struct olog *log, uint64_t tail, uint64_t records)
{
	pm_drain(); /* fence 1: every record below @tail is persistent */
	pm_copy_flush(&log->pm->tail, &tail, sizeof(tail));
	pm_drain(); /* fence 2: durability point */
	publish(log, tail, records);
}

void olog_append(struct olog *log, unsigned op, uint64_t ts, const void *key, size_t klen,
		 const void *val, size_t vlen, uint64_t entry)
{
	uint64_t tail = atomic_load_explicit(&log->durable_tail, memory_order_relaxed);
	olog_put_record(log, &tail, true, op, ts, key, klen, val, vlen, entry);
	pm_drain(); /* the only fence: the sealed record is durable, the write too */
	publish(log, tail, 1);
}

/* Persists @tail as the log's tail, unless it is already. */
static void tail_persist(struct olog *log, uint64_t tail)
{
	if (log->pm->tail == tail)
		return;
	pm_copy_flush(&log->pm->tail, &tail, sizeof(tail));
	pm_drain();
}

void olog_persist_tail(struct olog *log)
{
	tail_persist(log, atomic_load_explicit(&log->durable_tail, memory_order_acquire));
}

/* What is wrong with the record @r found at logical offset @pos (tail at @end), or
 * NULL if it can be read: it lies inside the ring and below the tail, and its key and
 * value lie inside it. */
static const char *record_problem(const struct olog *log, const struct olog_rec *r,
				  uint64_t pos, uint64_t end)
{
	if (r->len == 0 || r->len % 64)
		return "a length that is a non-zero multiple of 64";
	if (r->len > end - pos || r->len > log->size - pos % log->size)
		return "a record that ends before the tail and the ring's end";
	unsigned op = OLOG_REC_OP(r);
	if (op == OLOG_OP_PAD)
		return NULL;
	if (op < OLOG_OP_INSERT || op > OLOG_OP_DELETE)
		return "an op code of 1..5";
	if (r->klen == 0 || r->klen > TIPS_MAX_KEY || r->vlen > TIPS_MAX_VALUE)
		return "a key of 1..TIPS_MAX_KEY bytes and a value of at most TIPS_MAX_VALUE";
	if (sizeof(*r) + (uint64_t)r->klen + r->vlen > r->len)
		return "key and value inside the record's length";
	return NULL;
}

/* True if a sealed record that checks lies at logical offset @pos and ends by @end. */
static bool sealed_at(const struct olog *log, uint64_t pos, uint64_t end)
{
	const struct olog_rec *r = (const struct olog_rec *)(log->ring + pos % log->size);
	return r->seal == seal_tag(log, pos) && !record_problem(log, r, pos, end) &&
	       seal_crc(log, r, pos) == r->crc;
}

/* Flushes [from, end) of the ring and persists @end as the tail: sealed records found
 * in the caches (left by a killed process) reach the media before anything acts on
 * them. */
static void adopt_end(struct olog *log, uint64_t from, uint64_t end)
{
	for (uint64_t pos = from; pos < end;) {
		uint64_t off = pos % log->size, n = log->size - off;
		if (n > end - pos)
			n = end - pos;
		pm_flush(log->ring + off, n);
		pos += n;
	}
	pm_drain();
	tail_persist(log, end);
}

int olog_recover(struct olog *log, unsigned slot)
{
	uint64_t head = log->pm->head, tail = log->pm->tail;
	if (head % 64 || tail % 64 || (tail > head && tail - head > log->size))
		return 0; /* olog_verify reports it */
	uint64_t from = tail > head ? tail : head, pos = from, limit = head + log->size;
	while (pos < limit && sealed_at(log, pos, limit))
		pos += ((const struct olog_rec *)(log->ring + pos % log->size))->len;
	/* Only the last record a crash interrupted can fail its seal: a record is written
	 * after the previous one's fence. One that fails with a sealed record after it
	 * was damaged after it was written. */
	const struct olog_rec *r = (const struct olog_rec *)(log->ring + pos % log->size);
	uint64_t after = pos + r->len;
	if (pos < limit && r->seal == seal_tag(log, pos) && r->len % 64 == 0 && after > pos &&
	    after < limit && sealed_at(log, after, limit))
		return tips_set_error(TIPS_ECORRUPT, "OLog %u: the record at offset %llu (ring "
				      "offset %llu, len %u) fails its checksum, and a valid record "
				      "follows it: the log was damaged after it was written",
				      slot, (unsigned long long)pos,
				      (unsigned long long)(pos % log->size), r->len);
	adopt_end(log, from, pos);
	return 0;
}

const struct olog_rec *olog_next(const struct olog *log, struct olog_cursor *c)
{
	while (c->pos < c->end) {
		const struct olog_rec *r = (const struct olog_rec *)(log->ring + c->off);
		/* A PAD's key and value lengths are whatever the ring held before: only a
		 * record's are checked. */
		bool pad = OLOG_REC_OP(r) == OLOG_OP_PAD;
		if (r->len == 0 || r->len % 64 || r->len > c->end - c->pos ||
		    r->len > log->size - c->off ||
		    (!pad && sizeof(*r) + (uint64_t)r->klen + r->vlen > r->len)) {
			c->pos = c->end; /* cannot happen below a persistent tail; never loop */
			return NULL;
		}
		c->pos += r->len;
		c->off += r->len; /* a record never crosses the ring's end */
		if (c->off == log->size)
			c->off = 0;
		if (!pad)
			return r;
	}
	return NULL;
}

int olog_verify(const struct olog *log, unsigned slot)
{
	uint64_t head = log->pm->head, tail = log->pm->tail;
	if (head > tail || tail - head > log->size || head % 64 || tail % 64)
		return tips_set_error(TIPS_ECORRUPT, "OLog %u: head %llu, tail %llu: expected "
				      "64-byte aligned offsets with head <= tail <= head + %llu",
				      slot, (unsigned long long)head, (unsigned long long)tail,
				      (unsigned long long)log->size);
	for (uint64_t pos = head; pos < tail;) {
		const struct olog_rec *r = (const struct olog_rec *)(log->ring + pos % log->size);
		const char *problem = record_problem(log, r, pos, tail);
		if (problem)
			return tips_set_error(TIPS_ECORRUPT, "OLog %u: record at offset %llu (ring "
					      "offset %llu, len %u, klen %u, vlen %u, op %u): "
					      "expected %s", slot, (unsigned long long)pos,
					      (unsigned long long)(pos % log->size), r->len,
					      r->klen, r->vlen, OLOG_REC_OP(r), problem);
		pos += r->len;
	}
	return 0;
}
