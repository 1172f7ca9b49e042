/*
 * ulog.c - the undo log with selective logging (TIPS §4.3.2).
 *
 * Replay workers call tips_ulog_add() before storing to index memory. The old bytes are
 * persisted (one fence) before the call returns, unless
 *  - the memory was allocated since the last reclamation: replaying the OLog recreates
 *    it, and the heap's MLog frees it on rollback (tips_heap_block_is_fresh), or
 *  - the same range was logged since the last reclamation: rolling back restores the
 *    oldest copy, which is the state at the reclamation.
 * A replay worker remembers the ranges of its last log_ahead batch (ulog_log_ahead), and
 * an operation that logs only those skips the lock and the set: they are in the set.
 * The stores themselves are not flushed here: reclamation flushes every logged range
 * once (ulog_flush_targets), so repeated updates to one line cost one flush.
 * Records are appended in groups (ulog_add_group: the ranges an operation logs before
 * its stores; ulog_add: a group of one) under a mutex, and each group is persisted by
 * one fence before the mutex is released, so only the last group can be torn, and in
 * any order: its records were flushed without a fence between them. Rollback stops at
 * the first record with a wrong generation or checksum and restores the valid ones
 * newest first. An intact record after a bad one is a torn append only if it belongs
 * to the bad one's group (each record stores its distance from its group's first
 * record); an intact record of a later group means damage, and fails the rollback with
 * TIPS_ECORRUPT. The index stores to no range of a group before the group's fence has
 * returned, so undoing a record of an unfinished group rewrites the bytes in place.
 * A group may borrow its fence from an allocation made under the mutex right after its
 * records are flushed (ulog_add_group_then, fw_alloc_logging): the heap fences an
 * allocation's record before it returns, which persists the group's records too, so an
 * allocating operation pays one fence for both. A block from a lane's reserve comes
 * without a fence (its record was fenced when the reserve was filled), and the group
 * then fences itself.
 *
 * Checksum: CRC32C (Castagnoli), computed with the SSE4.2 crc32 instruction when the
 * CPU has it and by a table otherwise; both give the same value, so a pool written on
 * one machine recovers on another (the hardware and table paths are checked against
 * each other and against the standard check value in test_framework).
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__)
#include <nmmintrin.h>
#endif

#include "pm/pm.h"
#include "framework/framework.h"
#include "util/errors_internal.h"

struct ulog {
	uint64_t id;            /* unique in the process: names it in a thread's `ahead` */
	unsigned char *ring;
	uint64_t size;
	uint64_t used;   /* bytes of records this generation (under lock) */
	uint64_t gen;
	pthread_mutex_t lock;
	/* Ranges logged this generation: open addressing on (addr, size), both in one
	 * slot so that a probe misses the cache once. */
	struct set_slot { uint64_t addr, size; } *set;
	uint64_t set_cap, set_n;
	/* Statistics. All but skipped_fresh are written under the lock, by loads and
	 * stores (stat_add): a locked add would wait for the caller's earlier stores to
	 * drain, on every call, also when nothing is logged. */
	_Atomic uint64_t bytes, logged, skipped_fresh, skipped_logged;
};

/* Records up to this size are composed in a buffer and written with one streaming
 * copy (pm_copy_flush); longer ones in place, then flushed. */
#define ULOG_STAGE_MAX 256u

static uint64_t rec_bytes(uint64_t size)
{
	return sizeof(struct ulog_rec) + ((size + 7) & ~7ull);
}

/* ---- CRC32C ---------------------------------------------------------------------- */

/* Reflected Castagnoli polynomial; the table is built once, at load. */
static uint32_t crc32c_table[256];

uint32_t fw_crc32c_portable(uint32_t crc, const void *buf, size_t len)
{
	const unsigned char *p = buf;
	crc = ~crc;
	while (len--)
		crc = crc32c_table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
	return ~crc;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t crc32c_sse42(uint32_t crc, const void *buf,
								size_t len)
{
	const unsigned char *p = buf;
	uint64_t c = ~crc;
	for (; len >= 8; len -= 8, p += 8) {
		uint64_t w;
		memcpy(&w, p, 8);
		c = _mm_crc32_u64(c, w);
	}
	uint32_t c32 = (uint32_t)c;
	while (len--)
		c32 = _mm_crc32_u8(c32, *p++);
	return ~c32;
}
#endif

static uint32_t (*crc32c_fn)(uint32_t, const void *, size_t) = fw_crc32c_portable;

__attribute__((constructor)) static void crc32c_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ 0x82f63b78u : c >> 1;
		crc32c_table[i] = c;
	}
#if defined(__x86_64__)
	__builtin_cpu_init();
	if (__builtin_cpu_supports("sse4.2"))
		crc32c_fn = crc32c_sse42;
#endif
}

uint32_t fw_crc32c(uint32_t crc, const void *buf, size_t len)
{
	return crc32c_fn(crc, buf, len);
}

bool fw_crc32c_is_hardware(void)
{
	return crc32c_fn != fw_crc32c_portable;
}

/* ---- the log ----------------------------------------------------------------------- */

static uint64_t rec_check(const struct ulog_rec *r)
{
	uint32_t c = crc32c_fn(0, r, offsetof(struct ulog_rec, check));
	return crc32c_fn(c, r->data, r->size);
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
	struct set_slot *a = calloc(cap, sizeof(*a));
	if (!a)
		return false;
	struct set_slot *old = u->set;
	uint64_t ocap = u->set_cap;
	u->set = a;
	u->set_cap = cap;
	u->set_n = 0;
	for (uint64_t i = 0; i < ocap; i++)
		if (old[i].addr)
			set_insert(u, old[i].addr, old[i].size);
	free(old);
	return true;
}

static bool set_insert(struct ulog *u, uint64_t addr, uint64_t size)
{
	uint64_t i = slot_of(addr, size, u->set_cap);
	for (;; i = (i + 1) & (u->set_cap - 1)) {
		if (u->set[i].addr == 0) {
			u->set[i].addr = addr;
			u->set[i].size = size;
			u->set_n++;
			return true;
		}
		if (u->set[i].addr == addr && u->set[i].size == size)
			return false;
	}
}

static bool set_contains(const struct ulog *u, uint64_t addr, uint64_t size)
{
	if (!u->set_cap)
		return false;
	for (uint64_t i = slot_of(addr, size, u->set_cap);; i = (i + 1) & (u->set_cap - 1)) {
		if (u->set[i].addr == 0)
			return false;
		if (u->set[i].addr == addr && u->set[i].size == size)
			return true;
	}
}

int ulog_new(void *ring, uint64_t size, uint64_t gen, struct ulog **out)
{
	struct ulog *u = calloc(1, sizeof(*u));
	if (!u)
		return tips_set_error(TIPS_ENOMEM, "ulog: out of DRAM");
	static _Atomic uint64_t ids;
	u->id = atomic_fetch_add(&ids, 1) + 1;
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
	free(u->set);
	pthread_mutex_destroy(&u->lock);
	free(u);
}

/* Is [addr, addr+size) a range to log: a range of the pool, not fresh? 0: log it;
 * 1: skip it (counted); < 0: an error. */
static int range_check(struct ulog *u, struct tips_heap *heap, struct tips_pool *pool,
		       const void *addr, size_t size)
{
	if (size == 0 || size > TIPS_MAX_VALUE || !tips_pool_contains(pool, addr, size))
		return tips_set_error(TIPS_EINVAL, "tips_ulog_add(%p, %zu): not a range of the "
				      "pool", addr, size);
	if (tips_heap_block_is_fresh(heap, addr)) {
		atomic_fetch_add_explicit(&u->skipped_fresh, 1, memory_order_relaxed);
		return 1;
	}
	return 0;
}

/*
 * Copies the old bytes of a range into its record. Another replay worker may store to
 * them meanwhile, when a batch logs ahead (replay.c, log_ahead) a range that overlaps
 * one that worker logged and is now storing to (tips-clht: a bucket's layout and
 * slots). That is harmless: the other worker's record is the older, and a rollback
 * restores newest first, so the older copy of every byte wins. The words are read
 * with relaxed atomic loads (plain loads on x86) so that such a copy is not a data
 * race; an unaligned edge is copied byte by byte.
 */
static void copy_old_bytes(unsigned char *dst, const unsigned char *src, size_t n)
{
	while (n && ((uintptr_t)src & 7)) {
		*dst++ = __atomic_load_n(src++, __ATOMIC_RELAXED);
		n--;
	}
	for (; n >= 8; n -= 8, src += 8, dst += 8) {
		uint64_t v = __atomic_load_n((const uint64_t *)src, __ATOMIC_RELAXED);
		memcpy(dst, &v, 8);
	}
	while (n--)
		*dst++ = __atomic_load_n(src++, __ATOMIC_RELAXED);
}

/* @counter += @n; the ULog's lock held, so that no other thread writes it meanwhile. */
static inline void stat_add(_Atomic uint64_t *counter, uint64_t n)
{
	atomic_store_explicit(counter, atomic_load_explicit(counter, memory_order_relaxed) + n,
			      memory_order_relaxed);
}

/*
 * The ranges the calling thread logged ahead in its last ulog_log_ahead() group, all
 * durable and in the set since then: an operation whose ranges are all among them (the
 * common case after replay's log_ahead) needs neither the lock nor the set. Valid for
 * one ULog and generation; a generation ends only while no replay worker applies
 * anything. The skips counted here reach skipped_logged in ulog_ahead_done(), which
 * replay calls at the end of each epoch.
 */
static _Thread_local struct {
	uint64_t id; /* the ULog's (ulog.id; 0: none): a freed one's address may be reused */
	uint64_t gen;
	unsigned n;
	uint64_t skipped;
	uint64_t addr[ULOG_GROUP_MAX];
	size_t size[ULOG_GROUP_MAX];
} ahead;

static bool logged_ahead(const void *addr, size_t size)
{
	for (unsigned j = 0; j < ahead.n; j++)
		if (ahead.addr[j] == (uint64_t)addr && ahead.size[j] == size)
			return true;
	return false;
}

/* Whether every range with log[i] set is among the thread's ranges logged ahead. */
static bool all_logged_ahead(const struct ulog *u, void *const addr[], const size_t size[],
			     const bool log[], unsigned n)
{
	if (ahead.id != u->id || ahead.gen != u->gen)
		return false;
	for (unsigned i = 0; i < n; i++)
		if (log[i] && !logged_ahead(addr[i], size[i]))
			return false;
	return true;
}

static int add_group(struct ulog *u, struct tips_heap *heap, struct tips_pool *pool,
		     void *const addr[], const size_t size[], unsigned n, bool (*then)(void *),
		     void *arg, bool is_ahead)
{
	bool log[ULOG_GROUP_MAX];
	unsigned todo = 0;
	TIPS_INVARIANT(n <= ULOG_GROUP_MAX, "ULog: a group of more than ULOG_GROUP_MAX ranges");
	for (unsigned i = 0; i < n; i++) {
		int rc = range_check(u, heap, pool, addr[i], size[i]);
		if (rc < 0)
			return rc;
		log[i] = rc == 0;
		todo += log[i];
	}
	if (todo && !is_ahead && all_logged_ahead(u, addr, size, log, n)) {
		ahead.skipped += todo;
		todo = 0;
	}
	if (!todo) {
		if (then)
			then(arg);
		return 0;
	}
	pthread_mutex_lock(&u->lock);
	/* Each range's probe of the set is a miss in a table of up to millions of slots:
	 * start them all before the first waits (a batch of replay's log_ahead). */
	for (unsigned i = 0; todo > 1 && u->set_cap && i < n; i++)
		if (log[i])
			__builtin_prefetch(&u->set[slot_of((uint64_t)addr[i], size[i], u->set_cap)]);
	uint64_t start = u->used, off = start, logged = 0, skipped = 0;
	for (unsigned i = 0; i < n; i++) {
		if (!log[i])
			continue;
		/* Already logged this generation, possibly earlier in this group. */
		if (set_contains(u, (uint64_t)addr[i], size[i])) {
			skipped++;
			continue;
		}
		uint64_t need = rec_bytes(size[i]);
		/* Replay checks for ulog_headroom() before each operation and reclaims first
		 * when it is short, so only an operation logging more than that gets here. */
		TIPS_INVARIANT(off + need <= u->size,
			       "ULog full within one index operation: it logged more than the "
			       "headroom replay keeps (a larger ulog_size is needed)");
		/* The set only spares logging a range twice: without DRAM to grow it, keep
		 * using it while a slot stays empty (probes end there), then log without it. */
		bool remember = (u->set_n + 1) * 2 <= u->set_cap || set_grow(u) ||
				u->set_n + 2 <= u->set_cap;
		struct ulog_rec *r = (struct ulog_rec *)(u->ring + off);
		_Alignas(8) unsigned char buf[ULOG_STAGE_MAX];
		bool staged = need <= sizeof(buf); /* composed here, then one streaming copy */
		struct ulog_rec *w = staged ? (struct ulog_rec *)buf : r;
		w->addr = (uint64_t)addr[i];
		w->size = (uint32_t)size[i];
		w->back = (uint32_t)(off - start);
		w->gen = u->gen;
		copy_old_bytes(w->data, addr[i], size[i]);
		w->check = rec_check(w);
		if (staged) {
			memset(w->data + size[i], 0, need - sizeof(*w) - size[i]);
			pm_copy_flush(r, buf, need);
		} else {
			pm_flush(r, sizeof(*r) + size[i]);
		}
		off += need;
		logged++;
		if (remember)
			set_insert(u, (uint64_t)addr[i], size[i]);
	}
	/* @then runs while no other thread can append, so this group stays the ULog's last
	 * until it is durable: by @then's fence if it says it fenced, else by ours. */
	bool fenced = then && then(arg);
	if (logged) {
		if (!fenced)
			pm_drain(); /* the group's one fence: before any of its stores */
		__atomic_store_n(&u->used, off, __ATOMIC_RELAXED);
		stat_add(&u->logged, logged);
		stat_add(&u->bytes, off - start);
	}
	if (skipped)
		stat_add(&u->skipped_logged, skipped);
	if (is_ahead) {
		/* Durable (fenced above, or earlier in the generation: in the set) unless
		 * the group was not logged at all (todo 0: the fresh ranges need nothing). */
		if (ahead.id != u->id)
			ahead.skipped = 0; /* another ULog's: its statistics lose them */
		ahead.id = u->id;
		ahead.gen = u->gen;
		ahead.n = 0;
		for (unsigned i = 0; i < n; i++)
			if (log[i]) {
				ahead.addr[ahead.n] = (uint64_t)addr[i];
				ahead.size[ahead.n++] = size[i];
			}
	}
	pthread_mutex_unlock(&u->lock);
	return 0;
}

void ulog_ahead_done(struct ulog *u)
{
	if (ahead.id != u->id || !ahead.skipped)
		return;
	pthread_mutex_lock(&u->lock);
	stat_add(&u->skipped_logged, ahead.skipped);
	pthread_mutex_unlock(&u->lock);
	ahead.skipped = 0;
}

int ulog_add_group_then(struct ulog *u, struct tips_heap *heap, struct tips_pool *pool,
			void *const addr[], const size_t size[], unsigned n,
			bool (*then)(void *), void *arg)
{
	return add_group(u, heap, pool, addr, size, n, then, arg, false);
}

int ulog_add_group(struct ulog *u, struct tips_heap *heap, struct tips_pool *pool,
		   void *const addr[], const size_t size[], unsigned n)
{
	return add_group(u, heap, pool, addr, size, n, NULL, NULL, false);
}

int ulog_log_ahead(struct ulog *u, struct tips_heap *heap, struct tips_pool *pool,
		   void *const addr[], const size_t size[], unsigned n)
{
	return add_group(u, heap, pool, addr, size, n, NULL, NULL, true);
}

int ulog_add(struct ulog *u, struct tips_heap *heap, struct tips_pool *pool, void *addr,
	     size_t size)
{
	return ulog_add_group(u, heap, pool, &addr, &size, 1);
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
		memset(u->set, 0, u->set_cap * sizeof(*u->set));
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

/* The record at @off ends the ULog. Each group of records is persistent before the
 * next is written, so only the last group can be torn, in any of its records: an
 * intact record of this generation that follows and belongs to a group that began at
 * or before @off is part of that torn group; one of a later group means the record at
 * @off was damaged after it was written. */
static int check_log_end(const unsigned char *base, uint64_t off, uint64_t size,
			 uint64_t gen, struct tips_pool *pool)
{
	const struct ulog_rec *r = (const struct ulog_rec *)(base + off);
	if (off + sizeof(*r) > size || r->gen != gen || r->size == 0 ||
	    r->size > TIPS_MAX_VALUE)
		return 0;
	uint64_t next = off + rec_bytes(r->size);
	if (!rec_valid(base, next, size, gen, pool))
		return 0;
	const struct ulog_rec *n = (const struct ulog_rec *)(base + next);
	if (n->back >= next - off)
		return 0; /* the same group, begun at or before @off: a torn group */
	return tips_set_error(TIPS_ECORRUPT, "ULog: record at offset %llu (generation %llu, %llu "
			      "bytes for 0x%llx) fails its checksum, yet an intact record of a "
			      "later group follows: expected a torn group only at the end",
			      (unsigned long long)off, (unsigned long long)gen,
			      (unsigned long long)r->size, (unsigned long long)r->addr);
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
