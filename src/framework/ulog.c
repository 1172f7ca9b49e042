/*
 * ulog.c - the undo log with selective logging (TIPS §4.3.2).
 *
 * Replay workers call tips_ulog_add() before storing to index memory. The old bytes are
 * persisted (one fence) before the call returns, unless
 *  - the memory was allocated since the last reclamation: replaying the OLog recreates
 *    it, and the heap's MLog frees it on rollback (tips_heap_block_is_fresh), or
 *  - the same range was logged since the last reclamation: rolling back restores the
 *    oldest copy, which is the state at the reclamation.
 * The stores themselves are not flushed here: reclamation flushes every logged range
 * once (ulog_flush_targets), so repeated updates to one line cost one flush.
 * Records are appended under a mutex, so a torn record can only be the last one;
 * rollback stops at the first record with a wrong generation or checksum and restores
 * the valid ones newest first; an intact record after a bad one means damage, not a
 * torn append, and fails the rollback with TIPS_ECORRUPT.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "pm/pm.h"
#include "framework/framework.h"
#include "util/errors_internal.h"

struct ulog {
	unsigned char *ring;
	uint64_t size;
	uint64_t used;   /* bytes of records this generation (under lock) */
	uint64_t gen;
	pthread_mutex_t lock;
	/* Ranges logged this generation: open addressing on (addr, size). */
	uint64_t *set_addr, *set_size;
	uint64_t set_cap, set_n;
	/* Statistics. */
	_Atomic uint64_t bytes, logged, skipped_fresh, skipped_logged;
};

static uint64_t rec_bytes(uint64_t size)
{
	return sizeof(struct ulog_rec) + ((size + 7) & ~7ull);
}

static uint64_t rec_check(const struct ulog_rec *r)
{
	uLong c = crc32(0, (const Bytef *)r, offsetof(struct ulog_rec, check));
	return crc32(c, r->data, (uInt)r->size);
}

static uint64_t slot_of(uint64_t addr, uint64_t size, uint64_t cap)
{
	uint64_t h = (addr ^ size * 0x9e3779b97f4a7c15ull) * 0xff51afd7ed558ccdull;
	return (h ^ h >> 29) & (cap - 1);
}

static bool set_insert(struct ulog *u, uint64_t addr, uint64_t size); /* false: present */

static bool set_grow(struct ulog *u)
{
	uint64_t cap = u->set_cap ? u->set_cap * 2 : 4096;
	uint64_t *a = calloc(cap, sizeof(*a)), *s = calloc(cap, sizeof(*s));
	if (!a || !s) {
		free(a);
		free(s);
		return false;
	}
	uint64_t *oa = u->set_addr, *os = u->set_size, ocap = u->set_cap;
	u->set_addr = a;
	u->set_size = s;
	u->set_cap = cap;
	u->set_n = 0;
	for (uint64_t i = 0; i < ocap; i++)
		if (oa[i])
			set_insert(u, oa[i], os[i]);
	free(oa);
	free(os);
	return true;
}

static bool set_insert(struct ulog *u, uint64_t addr, uint64_t size)
{
	uint64_t i = slot_of(addr, size, u->set_cap);
	for (;; i = (i + 1) & (u->set_cap - 1)) {
		if (u->set_addr[i] == 0) {
			u->set_addr[i] = addr;
			u->set_size[i] = size;
			u->set_n++;
			return true;
		}
		if (u->set_addr[i] == addr && u->set_size[i] == size)
			return false;
	}
}

static bool set_contains(const struct ulog *u, uint64_t addr, uint64_t size)
{
	if (!u->set_cap)
		return false;
	for (uint64_t i = slot_of(addr, size, u->set_cap);; i = (i + 1) & (u->set_cap - 1)) {
		if (u->set_addr[i] == 0)
			return false;
		if (u->set_addr[i] == addr && u->set_size[i] == size)
			return true;
	}
}

int ulog_new(void *ring, uint64_t size, uint64_t gen, struct ulog **out)
{
	struct ulog *u = calloc(1, sizeof(*u));
	if (!u)
		return tips_set_error(TIPS_ENOMEM, "ulog: out of DRAM");
	u->ring = ring;
	u->size = size;
	u->gen = gen;
	pthread_mutex_init(&u->lock, NULL);
	*out = u;
	return 0;
}

void ulog_delete(struct ulog *u)
{
	if (!u)
		return;
	free(u->set_addr);
	free(u->set_size);
	pthread_mutex_destroy(&u->lock);
	free(u);
}

int ulog_add(struct ulog *u, struct tips_heap *heap, struct tips_pool *pool, void *addr,
	     size_t size)
{
	if (size == 0 || size > TIPS_MAX_VALUE || !tips_pool_contains(pool, addr, size))
		return tips_set_error(TIPS_EINVAL, "tips_ulog_add(%p, %zu): not a range of the "
				      "pool", addr, size);
	if (tips_heap_block_is_fresh(heap, addr)) {
		atomic_fetch_add_explicit(&u->skipped_fresh, 1, memory_order_relaxed);
		return 0;
	}
	pthread_mutex_lock(&u->lock);
	if (set_contains(u, (uint64_t)addr, size)) {
		pthread_mutex_unlock(&u->lock);
		atomic_fetch_add_explicit(&u->skipped_logged, 1, memory_order_relaxed);
		return 0;
	}
	uint64_t need = rec_bytes(size);
	/* Replay checks for ulog_headroom() before each operation and reclaims first when
	 * it is short, so only an operation logging more than that can get here. */
	TIPS_INVARIANT(u->used + need <= u->size,
		       "ULog full within one index operation: it logged more than the headroom "
		       "replay keeps (a larger ulog_size is needed)");
	/* The set only spares logging a range twice: without DRAM to grow it, keep using
	 * it while a slot stays empty (probes end there), then log without it. */
	bool remember = (u->set_n + 1) * 2 <= u->set_cap || set_grow(u) ||
			u->set_n + 2 <= u->set_cap;
	struct ulog_rec *r = (struct ulog_rec *)(u->ring + u->used);
	r->addr = (uint64_t)addr;
	r->size = size;
	r->gen = u->gen;
	memcpy(r->data, addr, size);
	r->check = rec_check(r);
	pm_persist(r, sizeof(*r) + size);
	__atomic_store_n(&u->used, u->used + need, __ATOMIC_RELAXED);
	if (remember)
		set_insert(u, (uint64_t)addr, size);
	pthread_mutex_unlock(&u->lock);
	atomic_fetch_add_explicit(&u->logged, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&u->bytes, need, memory_order_relaxed);
	return 0;
}

void ulog_flush_targets(struct ulog *u)
{
	pthread_mutex_lock(&u->lock);
	for (uint64_t off = 0; off < u->used;) {
		const struct ulog_rec *r = (const struct ulog_rec *)(u->ring + off);
		pm_flush((const void *)r->addr, r->size);
		off += rec_bytes(r->size);
	}
	pthread_mutex_unlock(&u->lock);
}

void ulog_reset(struct ulog *u, uint64_t gen)
{
	pthread_mutex_lock(&u->lock);
	__atomic_store_n(&u->used, 0, __ATOMIC_RELAXED);
	u->gen = gen;
	if (u->set_cap)
		memset(u->set_addr, 0, u->set_cap * sizeof(*u->set_addr));
	u->set_n = 0;
	pthread_mutex_unlock(&u->lock);
}

uint64_t ulog_used(const struct ulog *u)
{
	return __atomic_load_n(&u->used, __ATOMIC_RELAXED);
}

void ulog_counters(const struct ulog *u, uint64_t *bytes, uint64_t *logged,
		   uint64_t *skipped_fresh, uint64_t *skipped_logged)
{
	*bytes = atomic_load(&u->bytes);
	*logged = atomic_load(&u->logged);
	*skipped_fresh = atomic_load(&u->skipped_fresh);
	*skipped_logged = atomic_load(&u->skipped_logged);
}

/* True if a whole, intact record of @gen lies at @off of the ring. */
static bool rec_valid(const unsigned char *base, uint64_t off, uint64_t size, uint64_t gen,
		      struct tips_pool *pool)
{
	if (off + sizeof(struct ulog_rec) > size)
		return false;
	const struct ulog_rec *r = (const struct ulog_rec *)(base + off);
	return r->gen == gen && r->size != 0 && r->size <= TIPS_MAX_VALUE &&
	       off + rec_bytes(r->size) <= size && rec_check(r) == r->check &&
	       tips_pool_contains(pool, (const void *)r->addr, r->size);
}

/* The record at @off ends the ULog. Each record is persistent before the next is
 * written, so only the last can be torn: if an intact record of this generation
 * follows, the one at @off was damaged after it was written. */
static int check_log_end(const unsigned char *base, uint64_t off, uint64_t size,
			 uint64_t gen, struct tips_pool *pool)
{
	const struct ulog_rec *r = (const struct ulog_rec *)(base + off);
	if (off + sizeof(*r) > size || r->gen != gen || r->size == 0 ||
	    r->size > TIPS_MAX_VALUE || !rec_valid(base, off + rec_bytes(r->size), size, gen, pool))
		return 0;
	return tips_set_error(TIPS_ECORRUPT, "ULog: record at offset %llu (generation %llu, %llu "
			      "bytes for 0x%llx) fails its checksum, yet an intact record follows: "
			      "expected a torn record only at the end", (unsigned long long)off,
			      (unsigned long long)gen, (unsigned long long)r->size,
			      (unsigned long long)r->addr);
}

int ulog_rollback(void *ring, uint64_t size, uint64_t gen, struct tips_pool *pool)
{
	/* Find the valid prefix, then undo newest first so the oldest copy wins. */
	uint64_t n = 0, cap = 0, *offs = NULL;
	unsigned char *base = ring;
	for (uint64_t off = 0; off + sizeof(struct ulog_rec) <= size;) {
		const struct ulog_rec *r = (const struct ulog_rec *)(base + off);
		if (!rec_valid(base, off, size, gen, pool)) {
			int rc = check_log_end(base, off, size, gen, pool);
			if (rc) {
				free(offs);
				return rc;
			}
			break;
		}
		if (n == cap) {
			cap = cap ? cap * 2 : 1024;
			uint64_t *o = realloc(offs, cap * sizeof(*o));
			if (!o) {
				free(offs);
				return tips_set_error(TIPS_ENOMEM, "ULog rollback: out of DRAM");
			}
			offs = o;
		}
		offs[n++] = off;
		off += rec_bytes(r->size);
	}
	for (uint64_t i = n; i-- > 0;) {
		const struct ulog_rec *r = (const struct ulog_rec *)(base + offs[i]);
		memcpy((void *)r->addr, r->data, r->size);
		pm_flush((const void *)r->addr, r->size);
	}
	pm_drain();
	free(offs);
	return 0;
}
