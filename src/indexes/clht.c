/*
 * clht.c - "clht": a cache-line hash table in the style of CLHT-LB (David, Guerraoui,
 * Trigonakis, "Asynchronized Concurrency: The Secret to Scaling Concurrent Search Data
 * Structures", ASPLOS'15), written once against the hooks of idx_hooks.h and built as
 * dram-clht (volatile original) and tips-clht (TIPS plug-in).
 *
 * Structure. A root block {magic, table} and one table block: a header line, a second
 * line holding the overflow cursor, then nbuckets primary buckets and novf = nbuckets/4
 * overflow buckets, every bucket exactly one 64-byte cache line (aligned inside the
 * block):
 *     lock | layout | key0 val0 | key1 val1 | key2 val2 | next
 * The first word is split in two 32-bit halves: the lock (only ever CAS'd and stored,
 * never logged) and the layout: bit 0 WRITING (a two-word change is in progress), three
 * occupancy bits, three "key inline" and three "value inline" bits, and a 22-bit
 * version that every layout store increments. Keeping the lock out of the logged
 * layout means the framework's undo-log copy of a layout (a plain memcpy) never races
 * with a waiting writer's CAS on the lock. An 8-byte key is the key word itself
 * (compared as one word, no pointer chase; any value, 0 included, since emptiness lives
 * in the layout); another length makes the key word point to an immutable key block
 * {hash, klen, bytes}. An 8-byte value is the value word itself; another length makes it
 * point to an immutable value block {vlen, bytes}, or NULL for the empty value. next
 * links the bucket's overflow chain, taken from the table's overflow area by a cursor
 * and linked once, never unlinked (deletes leave empty slots that later inserts of the
 * chain reuse). Keeping overflow buckets inside the table block bounds a resize to one
 * IDX_ALLOC and one IDX_FREE: a replay worker's MLog lane holds only a few records per
 * operation, so a resize that allocated or freed one block per overflow bucket could
 * overflow it. The table is sized at create for expected_keys at <= 2 keys a bucket.
 *
 * Concurrency (CLHT-LB). Writers lock the chain's head bucket (test-and-test-and-set on
 * its lock half: the lock shares the line with the data it protects) and search,
 * insert, update or delete under it. Readers never lock: inside a read section they
 * snapshot a bucket (layout, the occupied slots' words, next) and re-read the layout;
 * equal and WRITING clear means the snapshot was the bucket's content at one instant,
 * and only then are key or value blocks dereferenced, so a reader never follows a stale
 * word of a reused slot and never returns a torn or mismatched value. A same-kind value
 * change is one atomic word store (an inline value in place, or a new value block's
 * pointer, the old block freed through IDX_FREE after the grace period); a change of
 * value kind (8 bytes <-> other) sets WRITING, stores the word, then stores the layout
 * with the new kind and WRITING clear. Inserts fill an empty slot's words first and
 * publish it with the layout; deletes clear its occupancy bit. (A reader stalled while
 * exactly 2^22 layout changes hit its bucket could miss a change: not a practical
 * concern, and CLHT itself validates less.)
 * Resize: when an insert finds no free slot in its chain and the overflow area is used
 * up (the load is too high), it unlocks and resizes (one resizer at a time: a mutex in
 * the DRAM handle). The resizer locks every primary bucket of the old table, one at a
 * time, copying each chain into a new table twice as big (fresh memory: no logs) right
 * after locking it, then publishes the new table (IDX_LOG + store of the root's table
 * pointer, then the DRAM handle's copy) and IDX_FREEs the old table. The old buckets
 * stay locked: a writer spinning on one sees the table or the resize flag change and
 * retries on the new table (writers run in read sections, so the old table stays
 * mapped until they leave). Readers keep reading the old table, which no writer changes
 * any more, until they leave their section. If the new table's overflow area cannot
 * hold the copy, it is discarded and the size doubled again.
 *
 * Lock words in PM. The locks live in the persistent buckets, so after a crash one may
 * read as held. open() trusts none: it walks every primary and used overflow bucket,
 * zeroes the lock and clears WRITING. Lock stores are never logged: nothing a recovered
 * index reads depends on them, and open() resets them after the framework's rollback.
 * Versions need no reset: no reader survives a restart.
 *
 * Invariant (crash consistency of tips-clht): every store to memory that existed before
 * the current operation, other than lock stores, is preceded by IDX_LOG of exactly the
 * bytes it stores. Stores into blocks allocated by the same operation (key and value
 * blocks, a resize's new table) need none. Insert logs layout..slot i (one record:
 * layout, the key word and value word, and the slots in between); an 8-byte update of
 * an inline value takes IDX_LOG_VALUE (no undo record: recovery replays the update),
 * one of a value block's pointer logs the word; a delete logs the layout; a kind change logs layout..slot i; a new
 * overflow bucket logs its 64 bytes, the link to it and the overflow cursor; a resize
 * logs the root's table pointer.
 *
 * Conversion cost: 15 hook sites - IDX_ALLOC 4 (root, table, key block, value block),
 * IDX_FREE 3 (root when create fails; word_free(), a key or value block deleted,
 * replaced or left unused by a failed insert; table_free(), a resize's replaced or
 * discarded table), IDX_LOG 8 (slot_log(), before an insert's publish or a kind change;
 * value word, IDX_LOG_VALUE inline and IDX_LOG a block pointer; delete; overflow cursor;
 * overflow bucket; its link; root table pointer). An insert of an 8-byte key and value
 * runs 1 log (3 instead when it takes an overflow bucket), an 8-byte update none, a
 * delete 1.
 *
 * Lookups of 8-byte keys (lookup8(), the common case) take the same snapshot with no
 * branch per slot and the words in registers: a lookup is one cache miss, and the less
 * work between two lookups' misses, the more of them the processor overlaps.
 *
 * Scan. Hash order is not key order: a scan visits the whole table in one read section,
 * keeping the @count smallest keys >= start (scan_topk.h) from validated snapshots, and
 * emits them after the section, with nothing held.
 *
 * Limits: tables only grow (deletes never shrink them); overflow buckets are reclaimed
 * only by a resize; a pathological key set whose hashes collide in one chain makes that
 * chain long (lookups walk it) until the overflow area runs out.
 */
#define _GNU_SOURCE
#define IDX_BASE_NAME "clht"
#include "indexes/idx_hooks.h"
#include "indexes/indexes.h"
#include "indexes/scan_topk.h"
#include "util/kv.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define CLHT_MAGIC 0x32746c6873706974ull  /* "tipshlt2": root, layout version 2 */
/* Layout 1 (before 0.4.0) placed 8-byte keys by another hash: its pools are refused. */
#define CLHT_MAGIC_V1 0x31746c6873706974ull /* "tipshlt1" */
#define CLHT_TMAGIC 0x31626174746c6863ull /* "chlttab1": table header */
/* Build-time knobs, for tests only: tiny tables resize often (crash tests of resizing). */
#ifndef CLHT_MIN_BUCKETS
#define CLHT_MIN_BUCKETS 256u /* a power of two >= 4 */
#endif
#ifndef CLHT_CREATE_KEYS_PER_BUCKET
#define CLHT_CREATE_KEYS_PER_BUCKET 2u /* create sizes the table for expected_keys at this */
#endif
#define CLHT_MAX_BUCKETS (1ull << 36) /* 4 TiB of buckets: far from size overflow */
#define CLHT_SLOTS 3
#define CLHT_LINE 64u

/* layout word (the second half of a bucket's first word) */
#define L_WRITING 1u
#define L_OCC(i) (1u << (1 + (i))) /* slot i holds a key */
#define L_KIN(i) (1u << (4 + (i))) /* slot i's key word is the 8-byte key */
#define L_VIN(i) (1u << (7 + (i))) /* slot i's value word is the 8-byte value */
#define L_SLOT(i) (L_OCC(i) | L_KIN(i) | L_VIN(i))
#define L_VER (1u << 10)           /* version unit: bits 10..31 */

/* ---- persistent layout (in PM in the tips build) ---------------------------------- */

struct clht_slot {
	_Atomic uint64_t key; /* 8-byte key, or struct clht_key * (layout says which) */
	_Atomic uint64_t val; /* 8-byte value, or struct clht_val * / NULL (empty value) */
};

/* One cache line. Accessed only through 64-byte aligned pointers into a table. */
struct clht_bucket {
	_Atomic uint32_t lock;   /* 1: held by a writer; meaningful only while the process
				    lives (open() resets it); never logged */
	_Atomic uint32_t layout; /* WRITING, slot bits, version; changed under the lock */
	struct clht_slot slot[CLHT_SLOTS];
	_Atomic(struct clht_bucket *) next;      /* overflow chain; NULL ends it */
};
_Static_assert(sizeof(struct clht_bucket) == CLHT_LINE, "a bucket is one cache line");
/* Bytes from the layout word through slot @i's value word: one undo record. */
#define LOG_TO_SLOT(i) (sizeof(uint32_t) + sizeof(struct clht_slot) * (size_t)((i) + 1))

/* Out-of-line key (klen != 8): immutable once published. */
struct clht_key {
	uint64_t hash;        /* key_hash(): resizes and compares need no rehash */
	uint32_t klen;        /* 1..TIPS_MAX_KEY, never 8 */
	uint32_t pad;
	unsigned char data[]; /* klen bytes */
};

/* Out-of-line value (vlen != 8, vlen > 0): immutable once published. */
struct clht_val {
	uint32_t vlen; /* 1..TIPS_MAX_VALUE, never 8 */
	uint32_t pad;
	unsigned char data[];
};

/* Table header: the first two cache lines of the aligned part of the table block. */
struct clht_table {
	uint64_t magic;               /* CLHT_TMAGIC */
	uint64_t nbuckets;            /* primary buckets: a power of two */
	uint64_t novf;                /* overflow buckets after the primaries */
	void *block;                  /* the IDX_ALLOC result holding this table */
	struct clht_bucket *buckets;  /* (char *)this + 2 lines: nbuckets + novf buckets */
	uint64_t hash_shift;          /* 64 - log2(nbuckets): a key's bucket is hash >> it */
	uint64_t pad[2];
	_Atomic uint64_t ovf_used;    /* own line: overflow buckets taken (may pass novf) */
	uint64_t pad2[7];
};
_Static_assert(sizeof(struct clht_table) == 2 * CLHT_LINE, "two header lines");

/* The root object returned by create. */
struct clht_root {
	uint64_t magic;           /* CLHT_MAGIC once create has filled the root */
	struct clht_table *table; /* the current table; changed only by a resize (logged) */
};

/* ---- volatile handle (DRAM, rebuilt by every open) ----------------------------------- */

struct clht_index {
	_Atomic(struct clht_table *) table; /* the current table (root->table's copy) */
	_Atomic int resizing;               /* a resize holds resize_mu */
	struct clht_root *root;
	pthread_mutex_t resize_mu;          /* one resizer at a time */
};

/* ---- helpers ------------------------------------------------------------------------- */

static inline void cpu_relax(unsigned *spins)
{
	if (++*spins % 256 == 0) {
		sched_yield(); /* the holder may have been preempted: 2 cores, many threads */
		return;
	}
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#endif
}

/* Hash of an 8-byte key: one multiplication (Fibonacci hashing). Only its high bits
 * are used (head_of), and those depend on every bit of the word; the multiplier is
 * odd, so distinct words have distinct hashes. A finalizer of two multiplications did
 * no better for the buckets and put a dozen more instructions on every lookup. */
static inline uint64_t hash8(uint64_t word)
{
	return word * 0x9fb21c651e98df25ull;
}

/* Hash of a key. Longer or shorter keys than 8 bytes fold 8-byte words (the tail
 * zero-padded) into a length-seeded state and end with a finalizer. */
static uint64_t key_hash(const void *key, size_t len)
{
	if (len == 8)
		return hash8(load64(key));
	const unsigned char *p = key;
	uint64_t h = 0x243f6a8885a308d3ull ^ ((uint64_t)len << 32);
	for (; len >= 8; p += 8, len -= 8) {
		h = (h ^ load64(p)) * 0x9fb21c651e98df25ull;
		h ^= h >> 32;
	}
	if (len) {
		uint64_t w = 0;
		memcpy(&w, p, len);
		h = (h ^ w) * 0x9fb21c651e98df25ull;
		h ^= h >> 32;
	}
	return mix64(h);
}

/* A key being looked for: its bytes, hash, and (klen 8) its word. */
struct probe {
	const void *key;
	uint32_t klen;
	uint64_t hash;
	uint64_t word; /* load64(key) when klen == 8 */
};

static inline void probe_init(struct probe *p, const void *key, size_t klen)
{
	p->key = key;
	p->klen = (uint32_t)klen;
	p->hash = key_hash(key, klen);
	p->word = klen == 8 ? load64(key) : 0;
}

/* Does slot @i, with layout @lay and key word @kw, hold @p's key? @kw must be a word
 * that was current together with @lay (under the lock, or a validated snapshot). */
static inline bool slot_has_key(uint32_t lay, int i, uint64_t kw, const struct probe *p)
{
	if (!(lay & L_OCC(i)))
		return false;
	if (lay & L_KIN(i))
		return p->klen == 8 && kw == p->word;
	if (p->klen == 8)
		return false;
	const struct clht_key *k = (const struct clht_key *)kw;
	return k->hash == p->hash && k->klen == p->klen &&
	       memcmp(k->data, p->key, p->klen) == 0;
}

/* The value a slot's word stands for. */
static inline void slot_value(uint32_t lay, int i, const uint64_t *vw, const void **v,
			      size_t *vlen)
{
	if (lay & L_VIN(i)) {
		*v = vw;
		*vlen = 8;
	} else if (*vw) {
		const struct clht_val *b = (const struct clht_val *)*vw;
		*v = b->data;
		*vlen = b->vlen;
	} else {
		*v = NULL;
		*vlen = 0;
	}
}

/* ---- blocks ---------------------------------------------------------------------------- */

/* The key word for @p: the key itself (8 bytes), else a new key block (0 if no memory). */
static uint64_t key_word_new(const struct probe *p)
{
	if (p->klen == 8)
		return p->word;
	struct clht_key *k = IDX_ALLOC(sizeof(*k) + p->klen);
	if (!k)
		return 0;
	k->hash = p->hash;
	k->klen = p->klen;
	k->pad = 0;
	memcpy(k->data, p->key, p->klen);
	return (uint64_t)(uintptr_t)k;
}

/* The value word for @val: the value itself (8 bytes), NULL (empty), else a new value
 * block. Returns false if there was no memory. */
static bool val_word_new(const void *val, size_t vlen, uint64_t *out)
{
	if (vlen == 8) {
		*out = load64(val);
		return true;
	}
	if (vlen == 0) {
		*out = 0;
		return true;
	}
	struct clht_val *b = IDX_ALLOC(sizeof(*b) + vlen);
	if (!b)
		return false;
	b->vlen = (uint32_t)vlen;
	b->pad = 0;
	memcpy(b->data, val, vlen);
	*out = (uint64_t)(uintptr_t)b;
	return true;
}

/* Frees an out-of-line key or value word (inline words and NULL are ignored). */
static inline void word_free(bool inline_word, uint64_t w)
{
	if (!inline_word && w)
		IDX_FREE((void *)(uintptr_t)w);
}

/* ---- tables ------------------------------------------------------------------------------ */

/* A new table of @nb primary buckets, primaries empty; fresh memory, no logging. */
static struct clht_table *table_new(uint64_t nb)
{
	uint64_t novf = nb / 4;
	uint64_t total = nb + novf;
	if (nb > CLHT_MAX_BUCKETS || total > (SIZE_MAX - 4 * CLHT_LINE) / CLHT_LINE)
		return NULL;
	size_t bytes = (size_t)total * CLHT_LINE + sizeof(struct clht_table) + CLHT_LINE;
	void *block = IDX_ALLOC(bytes); /* + a line of slack to align the header */
	if (!block)
		return NULL;
	uintptr_t a = ((uintptr_t)block + CLHT_LINE - 1) & ~(uintptr_t)(CLHT_LINE - 1);
	struct clht_table *t = (struct clht_table *)a;
	memset(t, 0, sizeof(*t));
	t->nbuckets = nb;
	t->hash_shift = 64 - (uint64_t)__builtin_ctzll(nb);
	t->novf = novf;
	t->block = block;
	t->buckets = (struct clht_bucket *)(a + sizeof(*t));
	/* Overflow buckets are initialised when taken. */
	memset(t->buckets, 0, (size_t)nb * CLHT_LINE);
	t->magic = CLHT_TMAGIC;
	return t;
}

/* Frees table @t (its block holds the overflow buckets too). */
static inline void table_free(struct clht_table *t)
{
	IDX_FREE(t->block);
}

static inline struct clht_bucket *head_of(const struct clht_table *t, uint64_t hash)
{
	return &t->buckets[hash >> t->hash_shift];
}

/* ---- writers' bucket lock (the chain's head bucket) ------------------------------------ */

enum { LOCKED, RETRY, WAIT_RESIZE };

/* Locks head bucket @b of table @t. RETRY: @t is no longer current (the caller reloads
 * the table); WAIT_RESIZE: @b is held and a resize runs (wait for it, then reload). */
static int bucket_lock(struct clht_index *h, struct clht_table *t, struct clht_bucket *b)
{
	unsigned spins = 0;
	for (;;) {
		uint32_t free_ = 0;
		if (atomic_load_explicit(&b->lock, memory_order_relaxed) == 0) {
			/* Lock store: not logged (open() resets locks). */
			if (atomic_compare_exchange_weak_explicit(&b->lock, &free_, 1,
								  memory_order_acquire,
								  memory_order_relaxed))
				return LOCKED;
			continue;
		}
		if (atomic_load_explicit(&h->table, memory_order_acquire) != t)
			return RETRY;
		if (atomic_load_explicit(&h->resizing, memory_order_acquire))
			return WAIT_RESIZE;
		cpu_relax(&spins);
	}
}

static inline void bucket_unlock(struct clht_bucket *b)
{
	atomic_store_explicit(&b->lock, 0, memory_order_release);
}

static void wait_resize(struct clht_index *h)
{
	pthread_mutex_lock(&h->resize_mu);
	pthread_mutex_unlock(&h->resize_mu);
}

/* ---- readers' snapshot --------------------------------------------------------------- */

struct snap {
	uint32_t layout;
	uint64_t key[CLHT_SLOTS], val[CLHT_SLOTS];
	struct clht_bucket *next;
};

/* Copies bucket @b as it was at one instant: layout, the occupied slots' words and next,
 * re-reading the layout until it did not change and WRITING was clear (the lock is not
 * looked at). The acquire loads keep the data loads before the second layout load and
 * make blocks published by a value or link store readable. Call in a read section. */
static void bucket_snapshot(struct clht_bucket *b, struct snap *s)
{
	unsigned spins = 0;
	for (;;) {
		uint32_t m1 = atomic_load_explicit(&b->layout, memory_order_acquire);
		if (m1 & L_WRITING) {
			cpu_relax(&spins);
			continue;
		}
		for (int i = 0; i < CLHT_SLOTS; i++) {
			if (m1 & L_OCC(i)) {
				struct clht_slot *sl = &b->slot[i];
				s->key[i] = atomic_load_explicit(&sl->key, memory_order_acquire);
				s->val[i] = atomic_load_explicit(&sl->val, memory_order_acquire);
			} else {
				s->key[i] = s->val[i] = 0;
			}
		}
		s->next = atomic_load_explicit(&b->next, memory_order_acquire);
		uint32_t m2 = atomic_load_explicit(&b->layout, memory_order_relaxed);
		if (m1 == m2) {
			s->layout = m1;
			return;
		}
		cpu_relax(&spins);
	}
}

/* ---- writers' chain search (head bucket locked) -------------------------------------- */

struct where {
	struct clht_bucket *b; /* bucket holding the key (or NULL) */
	int i;
	struct clht_bucket *free_b; /* first empty slot of the chain (or NULL) */
	int free_i;
	struct clht_bucket *last; /* last bucket of the chain */
};

static void chain_find(struct clht_bucket *head, const struct probe *p, struct where *w)
{
	w->b = w->free_b = NULL;
	w->i = w->free_i = -1;
	w->last = head;
	for (struct clht_bucket *b = head; b;
	     b = atomic_load_explicit(&b->next, memory_order_relaxed)) {
		uint32_t m = atomic_load_explicit(&b->layout, memory_order_relaxed);
		for (int i = 0; i < CLHT_SLOTS; i++) {
			if (!(m & L_OCC(i))) {
				if (!w->free_b) {
					w->free_b = b;
					w->free_i = i;
				}
				continue;
			}
			uint64_t kw =
				atomic_load_explicit(&b->slot[i].key, memory_order_relaxed);
			if (slot_has_key(m, i, kw, p)) {
				w->b = b;
				w->i = i;
				return;
			}
		}
		w->last = b;
	}
}

/* Layout @m with slot @i's bits set for a key/value of lengths @klen/@vlen. */
static inline uint32_t layout_fill(uint32_t m, int i, size_t klen, size_t vlen)
{
	m &= ~L_SLOT(i);
	m |= L_OCC(i);
	if (klen == 8)
		m |= L_KIN(i);
	if (vlen == 8)
		m |= L_VIN(i);
	return m + L_VER;
}

/* Logs @b's layout through slot @i's value word, before a store to the layout and to
 * slot @i (one record; never the lock half). */
static inline void slot_log(struct clht_bucket *b, int i)
{
	IDX_LOG((void *)&b->layout, LOG_TO_SLOT(i));
}

/* Fills empty slot @i of @b (a bucket of a chain whose head we hold) and publishes it:
 * the words first, then the layout. One log record covers the layout and slots 0..i
 * (contiguous), never the lock half. */
static void slot_publish(struct clht_bucket *b, int i, uint64_t kw, uint64_t vw, size_t klen,
			 size_t vlen)
{
	slot_log(b, i);
	atomic_store_explicit(&b->slot[i].key, kw, memory_order_release);
	atomic_store_explicit(&b->slot[i].val, vw, memory_order_release);
	uint32_t m = atomic_load_explicit(&b->layout, memory_order_relaxed);
	atomic_store_explicit(&b->layout, layout_fill(m, i, klen, vlen), memory_order_release);
}

/* Takes an overflow bucket of @t, or NULL when the area is used up. */
static struct clht_bucket *ovf_take(struct clht_table *t)
{
	if (atomic_load_explicit(&t->ovf_used, memory_order_relaxed) >= t->novf)
		return NULL;
	IDX_LOG((void *)&t->ovf_used, sizeof(uint64_t));
	uint64_t n = atomic_fetch_add_explicit(&t->ovf_used, 1, memory_order_relaxed);
	return n < t->novf ? &t->buckets[t->nbuckets + n] : NULL;
}

/* Links overflow bucket @ob, holding one key in slot 0, after @last. The bucket existed
 * (inside the table block) before this operation: its 64 bytes are logged, then the
 * link. Readers reach it only through the link's release store. */
static void ovf_publish(struct clht_bucket *last, struct clht_bucket *ob, uint64_t kw,
			uint64_t vw, size_t klen, size_t vlen)
{
	IDX_LOG((void *)ob, sizeof(*ob));
	atomic_store_explicit(&ob->slot[0].key, kw, memory_order_relaxed);
	atomic_store_explicit(&ob->slot[0].val, vw, memory_order_relaxed);
	for (int i = 1; i < CLHT_SLOTS; i++) {
		atomic_store_explicit(&ob->slot[i].key, 0, memory_order_relaxed);
		atomic_store_explicit(&ob->slot[i].val, 0, memory_order_relaxed);
	}
	atomic_store_explicit(&ob->next, NULL, memory_order_relaxed);
	atomic_store_explicit(&ob->lock, 0, memory_order_relaxed);
	atomic_store_explicit(&ob->layout, layout_fill(0, 0, klen, vlen), memory_order_relaxed);
	IDX_LOG((void *)&last->next, sizeof(last->next));
	atomic_store_explicit(&last->next, ob, memory_order_release);
}

/* ---- resize -------------------------------------------------------------------------- */

/* Puts one key into private table @t (no search: keys are distinct). False when its
 * overflow area is used up. */
static bool table_put_private(struct clht_table *t, uint64_t hash, uint64_t kw, uint64_t vw,
			      uint32_t kinds)
{
	struct clht_bucket *b = head_of(t, hash), *last = b;
	for (; b; last = b, b = atomic_load_explicit(&b->next, memory_order_relaxed)) {
		uint32_t m = atomic_load_explicit(&b->layout, memory_order_relaxed);
		for (int i = 0; i < CLHT_SLOTS; i++) {
			if (!(m & L_OCC(i))) {
				struct clht_slot *sl = &b->slot[i];
				atomic_store_explicit(&sl->key, kw, memory_order_relaxed);
				atomic_store_explicit(&sl->val, vw, memory_order_relaxed);
				atomic_store_explicit(&b->layout, m | L_OCC(i) | (kinds << i),
						      memory_order_relaxed);
				return true;
			}
		}
	}
	uint64_t n = atomic_load_explicit(&t->ovf_used, memory_order_relaxed);
	if (n >= t->novf)
		return false;
	atomic_store_explicit(&t->ovf_used, n + 1, memory_order_relaxed);
	struct clht_bucket *ob = &t->buckets[t->nbuckets + n];
	memset(ob, 0, sizeof(*ob));
	atomic_store_explicit(&ob->slot[0].key, kw, memory_order_relaxed);
	atomic_store_explicit(&ob->slot[0].val, vw, memory_order_relaxed);
	atomic_store_explicit(&ob->layout, L_OCC(0) | kinds, memory_order_relaxed);
	atomic_store_explicit(&last->next, ob, memory_order_relaxed);
	return true;
}

/* Copies the chain of locked head @head into private table @t. */
static bool chain_copy(struct clht_bucket *head, struct clht_table *t)
{
	for (struct clht_bucket *b = head; b;
	     b = atomic_load_explicit(&b->next, memory_order_relaxed)) {
		uint32_t m = atomic_load_explicit(&b->layout, memory_order_relaxed);
		for (int i = 0; i < CLHT_SLOTS; i++) {
			if (!(m & L_OCC(i)))
				continue;
			struct clht_slot *sl = &b->slot[i];
			uint64_t kw = atomic_load_explicit(&sl->key, memory_order_relaxed);
			uint64_t vw = atomic_load_explicit(&sl->val, memory_order_relaxed);
			uint64_t hash = (m & L_KIN(i)) ? key_hash(&kw, 8)
						       : ((const struct clht_key *)kw)->hash;
			/* slot i's kind bits, moved to slot 0's positions */
			uint32_t kinds = ((m & L_KIN(i)) ? L_KIN(0) : 0) |
					 ((m & L_VIN(i)) ? L_VIN(0) : 0);
			if (!table_put_private(t, hash, kw, vw, kinds))
				return false;
		}
	}
	return true;
}

/*
 * Replaces table @old by one at least twice as big, unless another resize did already.
 * Called with no bucket lock held, inside a read section. Returns 0 or TIPS_ENOMEM (the
 * index unchanged: the old buckets are unlocked again).
 */
static int table_resize(struct clht_index *h, struct clht_table *old)
{
	pthread_mutex_lock(&h->resize_mu);
	if (atomic_load_explicit(&h->table, memory_order_relaxed) != old) {
		pthread_mutex_unlock(&h->resize_mu);
		return 0;
	}
	atomic_store_explicit(&h->resizing, 1, memory_order_release);
	uint64_t locked = 0, nb = old->nbuckets * 2;
	struct clht_table *t = NULL;
	int rc = 0;
	for (;;) {
		t = table_new(nb);
		if (!t) {
			rc = TIPS_ENOMEM;
			break;
		}
		bool ok = true;
		for (uint64_t i = 0; i < old->nbuckets && ok; i++) {
			struct clht_bucket *b = &old->buckets[i];
			if (i == locked) {
				unsigned spins = 0;
				for (;;) { /* lock store: not logged */
					uint32_t free_ = 0;
					if (atomic_load_explicit(&b->lock,
								 memory_order_relaxed) == 0 &&
					    atomic_compare_exchange_weak_explicit(
						    &b->lock, &free_, 1, memory_order_acquire,
						    memory_order_relaxed))
						break;
					cpu_relax(&spins);
				}
				locked++;
			}
			ok = chain_copy(b, t);
		}
		if (ok)
			break;
		table_free(t); /* its overflow area was too small: grow more */
		t = NULL;
		nb *= 2;
	}
	if (rc == 0) {
		IDX_LOG((void *)&h->root->table, sizeof(h->root->table));
		h->root->table = t;
		atomic_store_explicit(&h->table, t, memory_order_release);
		/* The old buckets stay locked: writers that reach one retry on the new table. */
		table_free(old);
	} else {
		for (uint64_t i = 0; i < locked; i++)
			bucket_unlock(&old->buckets[i]);
	}
	atomic_store_explicit(&h->resizing, 0, memory_order_release);
	pthread_mutex_unlock(&h->resize_mu);
	return rc;
}

/* ---- ops ------------------------------------------------------------------------------ */

static int clht_create(const struct tips_index_config *cfg, void **rootp)
{
	if (!cfg || !rootp)
		return TIPS_EINVAL;
	uint64_t want = cfg->expected_keys / CLHT_CREATE_KEYS_PER_BUCKET;
	uint64_t nb = CLHT_MIN_BUCKETS;
	while (nb < want && nb < CLHT_MAX_BUCKETS)
		nb <<= 1;
	struct clht_root *root = IDX_ALLOC(sizeof(*root));
	if (!root)
		return TIPS_ENOMEM;
	struct clht_table *t = table_new(nb);
	if (!t) {
		IDX_FREE(root);
		return TIPS_ENOMEM;
	}
	root->table = t;
	root->magic = CLHT_MAGIC;
	*rootp = root;
	return 0;
}

static bool table_valid(const struct clht_table *t)
{
	return t && t->magic == CLHT_TMAGIC && t->nbuckets >= CLHT_MIN_BUCKETS &&
	       t->nbuckets <= CLHT_MAX_BUCKETS && !(t->nbuckets & (t->nbuckets - 1)) &&
	       t->hash_shift == 64 - (uint64_t)__builtin_ctzll(t->nbuckets) &&
	       t->novf == t->nbuckets / 4 &&
	       t->buckets == (struct clht_bucket *)((uintptr_t)t + sizeof(*t)) && t->block &&
	       (uintptr_t)t - (uintptr_t)t->block < CLHT_LINE;
}

/* Bytes of a table block from its start through the last overflow bucket. */
static uint64_t table_bytes(const struct clht_table *t)
{
	return (uint64_t)((uintptr_t)t - (uintptr_t)t->block) + sizeof(*t) +
	       (t->nbuckets + t->novf) * sizeof(struct clht_bucket);
}

/* The root and its table, checked before open follows them. The table header sits at
 * the first 64-byte boundary of its block, so the block starts at most a line below;
 * the header is read only once a block is known to hold it. */
static int root_check(const struct clht_root *root)
{
	if (IDX_CHECK_BLOCK(root, sizeof(*root)) && root->magic == CLHT_MAGIC_V1)
		return tips_set_error(TIPS_EVERSION, "clht: the pool holds layout 1 (libtips "
				      "before 0.4.0), which placed keys by another hash; this "
				      "library reads layout 2 only");
	if (!IDX_CHECK_BLOCK(root, sizeof(*root)) || root->magic != CLHT_MAGIC)
		return IDX_CORRUPT(root, "root: expected an allocated block of >= %zu bytes "
				   "starting with magic 0x%llx", sizeof(*root),
				   (unsigned long long)CLHT_MAGIC);
	const struct clht_table *t = root->table;
	bool held = false;
	for (uintptr_t back = 0; back < CLHT_LINE && back <= (uintptr_t)t && !held; back += 8)
		held = IDX_CHECK_BLOCK((const void *)((uintptr_t)t - back), back + sizeof(*t));
	if (!held || !table_valid(t) || !IDX_CHECK_BLOCK(t->block, table_bytes(t)))
		return IDX_CORRUPT(root, "table %p: expected a table header (magic 0x%llx, a "
				   "power of two >= %u buckets, a quarter more for overflow) in an "
				   "allocated block that holds every bucket", (const void *)t,
				   (unsigned long long)CLHT_TMAGIC, CLHT_MIN_BUCKETS);
	return 0;
}

static int clht_open(void *rootv, void **indexp)
{
	struct clht_root *root = rootv;
	if (!root || !indexp)
		return TIPS_EINVAL;
	int rc = root_check(root);
	if (rc)
		return rc;
	struct clht_table *t = root->table;

	struct clht_index *h = malloc(sizeof(*h));
	if (!h)
		return TIPS_ENOMEM;
	if (pthread_mutex_init(&h->resize_mu, NULL)) {
		free(h);
		return TIPS_ENOMEM;
	}
	/* Lock bits (and WRITING) mean nothing after a restart: a lock held at a crash, or
	 * restored by the framework's undo of a record logged under the lock, would read
	 * as held. Clear them in every bucket in use. Not logged: outside any operation,
	 * and a crash before these stores persist leads to another open doing the same. */
	uint64_t used = atomic_load_explicit(&t->ovf_used, memory_order_relaxed);
	uint64_t n = t->nbuckets + (used < t->novf ? used : t->novf);
	for (uint64_t i = 0; i < n; i++) {
		struct clht_bucket *b = &t->buckets[i];
		if (atomic_load_explicit(&b->lock, memory_order_relaxed))
			atomic_store_explicit(&b->lock, 0, memory_order_relaxed);
		uint32_t m = atomic_load_explicit(&b->layout, memory_order_relaxed);
		if (m & L_WRITING)
			atomic_store_explicit(&b->layout, m & ~L_WRITING, memory_order_relaxed);
	}
	h->root = root;
	atomic_init(&h->table, t);
	atomic_init(&h->resizing, 0);
	*indexp = h;
	return 0;
}

static void clht_close(void *index)
{
	struct clht_index *h = index;
	if (!h)
		return;
	pthread_mutex_destroy(&h->resize_mu);
	free(h);
	IDX_FREE_BARRIER();
}

/* Locks the head bucket of @p's chain in the current table, waiting out resizes.
 * Call inside a read section. */
static struct clht_bucket *lock_chain(struct clht_index *h, const struct probe *p,
				      struct clht_table **tp)
{
	for (;;) {
		struct clht_table *t = atomic_load_explicit(&h->table, memory_order_acquire);
		struct clht_bucket *b = head_of(t, p->hash);
		int l = bucket_lock(h, t, b);
		if (l == WAIT_RESIZE)
			wait_resize(h);
		if (l != LOCKED)
			continue;
		if (atomic_load_explicit(&h->table, memory_order_acquire) != t) {
			bucket_unlock(b); /* cannot happen: a resizer keeps old buckets locked */
			continue;
		}
		*tp = t;
		return b;
	}
}

static int clht_insert(void *index, const void *key, size_t klen, const void *val,
		       size_t vlen)
{
	struct clht_index *h = index;
	int rc = check_kv(key, klen, val, vlen);
	if (rc)
		return rc;
	struct probe p;
	probe_init(&p, key, klen);
	uint64_t kw = 0, vw = 0;
	bool made = false; /* kw/vw hold words (and blocks) made for this insert */

	IDX_READ_ENTER();
	for (;;) {
		struct clht_table *t;
		struct clht_bucket *head = lock_chain(h, &p, &t);
		struct where w;
		chain_find(head, &p, &w);
		if (w.b) {
			bucket_unlock(head);
			rc = TIPS_EKEYEXISTS;
			break;
		}
		if (!made) { /* allocated under the lock: nothing wasted on a present key */
			kw = key_word_new(&p);
			if (!kw && klen != 8) {
				bucket_unlock(head);
				rc = TIPS_ENOMEM;
				break;
			}
			if (!val_word_new(val, vlen, &vw)) {
				bucket_unlock(head);
				word_free(klen == 8, kw);
				rc = TIPS_ENOMEM;
				break;
			}
			made = true;
		}
		if (w.free_b) {
			slot_publish(w.free_b, w.free_i, kw, vw, klen, vlen);
		} else {
			struct clht_bucket *ob = ovf_take(t);
			if (!ob) { /* load too high: grow, then retry on the new table */
				bucket_unlock(head);
				rc = table_resize(h, t);
				if (rc)
					break;
				continue;
			}
			ovf_publish(w.last, ob, kw, vw, klen, vlen);
		}
		bucket_unlock(head);
		made = false;
		break;
	}
	IDX_READ_EXIT();
	if (made) { /* failed after making the words: their blocks were never published */
		word_free(klen == 8, kw);
		word_free(vlen == 8, vw);
	}
	return rc;
}

static int clht_update(void *index, const void *key, size_t klen, const void *val,
		       size_t vlen)
{
	struct clht_index *h = index;
	int rc = check_kv(key, klen, val, vlen);
	if (rc)
		return rc;
	struct probe p;
	probe_init(&p, key, klen);

	IDX_READ_ENTER();
	struct clht_table *t;
	struct clht_bucket *head = lock_chain(h, &p, &t);
	struct where w;
	chain_find(head, &p, &w);
	if (!w.b) {
		rc = TIPS_ENOTFOUND;
		goto out;
	}
	struct clht_bucket *b = w.b;
	int i = w.i;
	_Atomic uint64_t *vp = &b->slot[i].val;
	uint32_t m = atomic_load_explicit(&b->layout, memory_order_relaxed);
	uint64_t old = atomic_load_explicit(vp, memory_order_relaxed);
	bool old_in = m & L_VIN(i), new_in = vlen == 8;
	uint64_t vw;
	if (!val_word_new(val, vlen, &vw)) {
		rc = TIPS_ENOMEM;
		goto out;
	}
	if (old_in == new_in) {
		/* Same kind: one word store; a reader sees the old or the new value. An
		 * inline value word holds nothing but the value: no undo record. A pointer
		 * to a value block is undone like any link. */
		if (new_in)
			IDX_LOG_VALUE((void *)vp, sizeof(*vp));
		else
			IDX_LOG((void *)vp, sizeof(*vp));
		atomic_store_explicit(vp, vw, memory_order_release);
	} else {
		/* Kind change: WRITING keeps readers off the slot while word and kind differ. */
		slot_log(b, i);
		atomic_store_explicit(&b->layout, (m + L_VER) | L_WRITING, memory_order_relaxed);
		atomic_store_explicit(vp, vw, memory_order_release);
		atomic_store_explicit(&b->layout, ((m + 2 * L_VER) ^ L_VIN(i)) & ~L_WRITING,
				      memory_order_release);
	}
	word_free(old_in, old);
out:
	bucket_unlock(head);
	IDX_READ_EXIT();
	return rc;
}

static int clht_remove(void *index, const void *key, size_t klen)
{
	struct clht_index *h = index;
	if (!key || klen == 0)
		return TIPS_EINVAL;
	if (klen > TIPS_MAX_KEY)
		return TIPS_ENOTFOUND;
	struct probe p;
	probe_init(&p, key, klen);
	int rc = 0;

	IDX_READ_ENTER();
	struct clht_table *t;
	struct clht_bucket *head = lock_chain(h, &p, &t);
	struct where w;
	chain_find(head, &p, &w);
	if (w.b) {
		struct clht_bucket *b = w.b;
		int i = w.i;
		uint32_t m = atomic_load_explicit(&b->layout, memory_order_relaxed);
		uint64_t kw = atomic_load_explicit(&b->slot[i].key, memory_order_relaxed);
		uint64_t vw = atomic_load_explicit(&b->slot[i].val, memory_order_relaxed);
		IDX_LOG((void *)&b->layout, sizeof(b->layout));
		atomic_store_explicit(&b->layout, (m + L_VER) & ~L_SLOT(i), memory_order_release);
		word_free(m & L_KIN(i), kw);
		word_free(m & L_VIN(i), vw);
	} else {
		rc = TIPS_ENOTFOUND;
	}
	bucket_unlock(head);
	IDX_READ_EXIT();
	return rc;
}

/*
 * Lookup of an 8-byte key, the common case, on one cache line per bucket: the hash is
 * one finalizer; each bucket of the chain is read once as a snapshot (layout, the three
 * key and value words and next: one line, so reading unoccupied slots' words costs
 * nothing; the layout's bits say which count) and validated by re-reading the layout,
 * as bucket_snapshot() does. Written lean on purpose: no branch on which slot matches
 * (random, so often mispredicted once the line arrives), the snapshot in registers, and
 * the 8-byte value stored directly. Every instruction and store here delays the point
 * where the processor can start the caller's next lookup while this one's cache miss
 * is outstanding (docs/indexes.md, "Read paths").
 */
/* Copies the value of slot @i (layout @m, value word @vw) into @val (@cap bytes at
 * most) and its length into *@vlen; returns IDX_FOUND. Out of line: lookup8() inlines
 * only the common case, an 8-byte value into a buffer that holds it. */
static __attribute__((noinline)) int value_out(uint32_t m, int i, uint64_t vw, void *val,
					       size_t cap, size_t *vlen)
{
	const void *v;
	size_t n;
	slot_value(m, i, &vw, &v, &n);
	if (cap && n)
		memcpy(val, v, n < cap ? n : cap);
	if (vlen)
		*vlen = n;
	return IDX_FOUND(n, cap);
}

static int lookup8(struct clht_index *h, uint64_t word, void *val, size_t cap, size_t *vlen)
{
	uint64_t hash = hash8(word);
	int rc = TIPS_ENOTFOUND;
	IDX_READ_ENTER();
	struct clht_table *t = atomic_load_explicit(&h->table, memory_order_acquire);
	struct clht_bucket *b = head_of(t, hash);
	unsigned spins = 0;
	while (b) {
		uint32_t m = atomic_load_explicit(&b->layout, memory_order_acquire);
		uint64_t k0 = atomic_load_explicit(&b->slot[0].key, memory_order_acquire);
		uint64_t k1 = atomic_load_explicit(&b->slot[1].key, memory_order_acquire);
		uint64_t k2 = atomic_load_explicit(&b->slot[2].key, memory_order_acquire);
		/* occupied slots whose key word is the key itself, as L_OCC bits */
		uint32_t live = m & (m >> 3);
		uint32_t hit = live & (((uint32_t)(k0 == word) << 1) |
				       ((uint32_t)(k1 == word) << 2) |
				       ((uint32_t)(k2 == word) << 3));
		int i = hit ? __builtin_ctz(hit) - 1 : 0;
		uint64_t vw = atomic_load_explicit(&b->slot[i].val, memory_order_acquire);
		struct clht_bucket *next = atomic_load_explicit(&b->next, memory_order_acquire);
		if (__builtin_expect(atomic_load_explicit(&b->layout, memory_order_relaxed) != m ||
				     (m & L_WRITING), 0)) {
			cpu_relax(&spins); /* a writer changed the bucket meanwhile: again */
			continue;
		}
		if (hit) {
			rc = 0;
			if (__builtin_expect(m & L_VIN(i), 1) && cap >= 8) {
				memcpy(val, &vw, 8);
				if (vlen)
					*vlen = 8;
			} else {
				rc = value_out(m, i, vw, val, cap, vlen);
			}
			break;
		}
		b = next;
	}
	IDX_READ_EXIT();
	return rc;
}

static __attribute__((noinline)) int lookup_any(struct clht_index *h, const void *key,
						size_t klen, void *val, size_t cap,
						size_t *vlen);

/* Replay's look-ahead (plugin.h): loads @key's head bucket, for writing (its lock,
 * layout and slots share the line). @deep 1 adds nothing: an 8-byte key and value
 * live in the bucket, and an overflow bucket is rare. @deep 2 (a writer's outcome
 * lookup to come) is 0: that lookup reads the bucket, and making it twice cost more
 * than it saved. The table is read inside a read section, as a resize may free it. */
static void clht_prefetch(void *index, const void *key, size_t klen, int deep)
{
	struct clht_index *h = index;
	if (deep == 1)
		return;
	IDX_READ_ENTER();
	struct clht_table *t = atomic_load_explicit(&h->table, memory_order_acquire);
	__builtin_prefetch(head_of(t, key_hash(key, klen)), 1, 3);
	IDX_READ_EXIT();
}

#ifdef IDX_TIPS
/* Replay's batched logging (plugin.h): the range an insert or update of an 8-byte @key
 * with an 8-byte value logs first. A present key logs nothing ahead (an inline value
 * word is overwritten with IDX_LOG_VALUE); an absent one fills the chain's first empty
 * slot (the layout through that slot, slot_publish). Anything else (a long key or value, a
 * full chain that takes an overflow bucket) is left to the operation. Reads the chain
 * without its lock, as chain_find does under it, inside a read section (a resize
 * frees the table). */
static int clht_log_ahead(void *index, const void *key, size_t klen, size_t vlen,
			  void **addr, size_t *size)
{
	struct clht_index *h = index;
	if (klen != 8 || vlen != 8)
		return 0;
	struct probe p;
	probe_init(&p, key, klen);
	int rc = 0;
	IDX_READ_ENTER();
	struct clht_table *t = atomic_load_explicit(&h->table, memory_order_acquire);
	struct where w;
	chain_find(head_of(t, p.hash), &p, &w);
	if (w.b) {
		/* Present: an inline value is overwritten with IDX_LOG_VALUE (nothing to log
		 * ahead); a kind change is left to the operation. */
	} else if (w.free_b) {
		*addr = (void *)&w.free_b->layout;
		*size = LOG_TO_SLOT(w.free_i);
		rc = 1;
	}
	IDX_READ_EXIT();
	return rc;
}
#endif

static int clht_lookup(void *index, const void *key, size_t klen, void *val, size_t cap,
		       size_t *vlen)
{
	struct clht_index *h = index;
	if (!key || klen == 0 || (cap && !val))
		return TIPS_EINVAL;
	if (klen == 8)
		return lookup8(h, load64(key), val, cap, vlen);
	return lookup_any(h, key, klen, val, cap, vlen);
}

/* Lookup of a key of any length: bucket_snapshot() and slot_has_key() per bucket. */
static int lookup_any(struct clht_index *h, const void *key, size_t klen, void *val,
		      size_t cap, size_t *vlen)
{
	if (klen > TIPS_MAX_KEY)
		return TIPS_ENOTFOUND;
	struct probe p;
	probe_init(&p, key, klen);
	int rc = TIPS_ENOTFOUND;

	IDX_READ_ENTER();
	struct clht_table *t = atomic_load_explicit(&h->table, memory_order_acquire);
	struct snap s;
	for (struct clht_bucket *b = head_of(t, p.hash); b && rc; b = s.next) {
		bucket_snapshot(b, &s);
		for (int i = 0; i < CLHT_SLOTS; i++) {
			if (!slot_has_key(s.layout, i, s.key[i], &p))
				continue;
			const void *v;
			size_t n;
			slot_value(s.layout, i, &s.val[i], &v, &n);
			if (cap && n)
				memcpy(val, v, n < cap ? n : cap);
			if (vlen)
				*vlen = n;
			rc = IDX_FOUND(n, cap);
			break;
		}
	}
	IDX_READ_EXIT();
	return rc;
}

/*
 * Scan: every chain of the current table, bucket by validated snapshot, inside one read
 * section, keeping the @count smallest keys >= @start (scan_topk.h); then @fn in key
 * order with nothing held, so @fn may call back into the index. Not a snapshot of the
 * whole table: a key written meanwhile may or may not be seen (the framework merges
 * newer writes).
 */
static long clht_scan(void *index, const void *start, size_t klen, size_t count,
		      tips_scan_fn fn, void *arg)
{
	struct clht_index *h = index;
	if (!fn || (klen && !start))
		return TIPS_EINVAL;
	if (count == 0)
		return 0;

	struct topk tk;
	topk_init(&tk, count);
	int rc = 0;
	IDX_READ_ENTER();
	struct clht_table *t = atomic_load_explicit(&h->table, memory_order_acquire);
	struct snap s;
	for (uint64_t bi = 0; bi < t->nbuckets && rc == 0; bi++) {
		for (struct clht_bucket *b = &t->buckets[bi]; b && rc == 0; b = s.next) {
			bucket_snapshot(b, &s);
			for (int i = 0; i < CLHT_SLOTS && rc == 0; i++) {
				if (!(s.layout & L_OCC(i)))
					continue;
				const void *k;
				size_t kl;
				if (s.layout & L_KIN(i)) {
					k = &s.key[i];
					kl = 8;
				} else {
					const struct clht_key *kb =
						(const struct clht_key *)s.key[i];
					k = kb->data;
					kl = kb->klen;
				}
				if (klen && topk_key_cmp(k, kl, start, klen) < 0)
					continue;
				const void *v;
				size_t vl;
				slot_value(s.layout, i, &s.val[i], &v, &vl);
				rc = topk_offer(&tk, k, kl, v, vl);
			}
		}
	}
	IDX_READ_EXIT();
	long passed = rc ? rc : topk_emit(&tk, fn, arg);
	topk_free(&tk);
	return passed;
}

/* The out-of-line key word @kw of slot @i of @b, checked before the walk reports it. */
static int key_block_check(const struct clht_bucket *b, int i, uint64_t kw)
{
	const struct clht_key *k = (const struct clht_key *)(uintptr_t)kw;
	if (!IDX_CHECK_BLOCK(k, sizeof(*k)) || k->klen == 0 || k->klen == 8 ||
	    k->klen > TIPS_MAX_KEY || !IDX_CHECK_BLOCK(k, sizeof(*k) + k->klen))
		return IDX_CORRUPT(b, "slot %d: key block %p: expected an allocated block holding "
				   "a key of 1..%u bytes (not 8)", i, (const void *)k, TIPS_MAX_KEY);
	return 0;
}

/* The out-of-line value word @vw (not NULL) of slot @i of @b, likewise. */
static int value_block_check(const struct clht_bucket *b, int i, uint64_t vw)
{
	const struct clht_val *v = (const struct clht_val *)(uintptr_t)vw;
	if (!IDX_CHECK_BLOCK(v, sizeof(*v)) || v->vlen == 0 || v->vlen == 8 ||
	    v->vlen > TIPS_MAX_VALUE || !IDX_CHECK_BLOCK(v, sizeof(*v) + v->vlen))
		return IDX_CORRUPT(b, "slot %d: value block %p: expected an allocated block "
				   "holding a value of 1..%u bytes (not 8)", i, (const void *)v,
				   TIPS_MAX_VALUE);
	return 0;
}

/* The overflow link @next of @b: NULL, or a bucket of @t's overflow area. */
static int next_check(const struct clht_table *t, const struct clht_bucket *b,
		      const struct clht_bucket *next)
{
	const struct clht_bucket *first = t->buckets + t->nbuckets;
	uintptr_t off = (uintptr_t)next - (uintptr_t)first;
	if (next && (off % sizeof(*next) || off / sizeof(*next) >= t->novf))
		return IDX_CORRUPT(b, "overflow link %p: expected one of the %llu overflow "
				   "buckets at %p", (const void *)next,
				   (unsigned long long)t->novf, (const void *)first);
	return 0;
}

/* Root, table block, then every out-of-line key and value block (overflow buckets live
 * in the table block); stops at (and returns) fn's first non-zero. Not concurrent with
 * writes (contract), so it reads the buckets without snapshots. Every link, key and
 * value block is checked before it is followed or reported; a chain longer than the
 * overflow area is a cycle. */
static int clht_walk(void *index, tips_walk_fn fn, void *arg)
{
	struct clht_index *h = index;
	if (!fn)
		return TIPS_EINVAL;
	struct clht_table *t = atomic_load_explicit(&h->table, memory_order_acquire);
	int rc = fn(h->root, arg);
	if (rc == 0)
		rc = fn(t->block, arg);
	for (uint64_t bi = 0; bi < t->nbuckets && rc == 0; bi++) {
		uint64_t hops = 0;
		for (struct clht_bucket *b = &t->buckets[bi], *next; b && rc == 0; b = next) {
			uint32_t m = atomic_load_explicit(&b->layout, memory_order_acquire);
			for (int i = 0; i < CLHT_SLOTS && rc == 0; i++) {
				if (!(m & L_OCC(i)))
					continue;
				uint64_t kw = atomic_load_explicit(&b->slot[i].key,
								   memory_order_relaxed);
				uint64_t vw = atomic_load_explicit(&b->slot[i].val,
								   memory_order_relaxed);
				if (!(m & L_KIN(i)) && !(rc = key_block_check(b, i, kw)))
					rc = fn((const void *)(uintptr_t)kw, arg);
				if (rc == 0 && !(m & L_VIN(i)) && vw &&
				    !(rc = value_block_check(b, i, vw)))
					rc = fn((const void *)(uintptr_t)vw, arg);
			}
			next = atomic_load_explicit(&b->next, memory_order_acquire);
			if (rc == 0 && (rc = next_check(t, b, next)) == 0 && next &&
			    ++hops > t->novf)
				rc = IDX_CORRUPT(b, "overflow chain of bucket %llu: expected at most "
						 "%llu links (a cycle)", (unsigned long long)bi,
						 (unsigned long long)t->novf);
		}
	}
	return rc;
}

const struct tips_index_ops IDX_SYM(ops) = {
	.name = IDX_NAME,
	.concurrency = "CLHT-LB: lock-free reads, per-bucket (cache-line) locks, resizing",
	.create = clht_create,
	.open = clht_open,
	.close = clht_close,
	.insert = clht_insert,
	.update = clht_update,
	.remove = clht_remove,
	.lookup = clht_lookup,
	.scan = clht_scan,
	.walk = clht_walk,
	.prefetch = clht_prefetch,
#ifdef IDX_TIPS
	.log_ahead = clht_log_ahead,
#endif
};
