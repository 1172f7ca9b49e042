/*
 * bptree.c - "bptree": a B+tree of fanout 128 under one readers-writer lock, written
 * once against the hooks of idx_hooks.h and built as dram-bptree (volatile original)
 * and tips-bptree (TIPS plug-in; ATC'21, §3.2.6 and Table 2).
 *
 * Structure. A root block {magic, root node, height} and nodes of one shape: a header
 * {count, level, next, used bitmap, ord[]} and three parallel arrays of BPT_FANOUT
 * physical slots - kw[] (the key's first 8 bytes as a big-endian word, zero padded),
 * meta[] (key length | value length << 11) and e[] {val, kx}. ord[0..count) lists the
 * physical slots in ascending key order: entries stay in the slot they were written to,
 * and an insert or a remove shifts one byte per entry of ord instead of 28 bytes of
 * slot (so it logs ~28x less; see "Invariant"). Leaves (level 0) hold count keys,
 * e.val being the value itself when it has at most 8 bytes (zero padded) or a pointer
 * to a block of exactly vlen bytes, and are chained left to right by next. Inner nodes
 * hold count children in e.val and count - 1 separators: the i-th child in order holds
 * the keys k with sep[i] <= k < sep[i+1]; the key of the first entry in order is never
 * read and owns no block. Every leaf is at depth height - 1. kx points to a block
 * holding the whole key only when it is longer than 8 bytes: keys of up to 8 bytes live
 * in kw alone, so an 8-byte key costs no pointer chase, and comparing two keys is an
 * integer compare of their words, then, if the words are equal, of the tails after byte
 * 8 when both keys are longer than 8 bytes, then of the lengths (equal words and a key
 * of at most 8 bytes mean the shorter key is a prefix of the other, so "ab" < "ab\0" by
 * length). A node is searched by binary search through ord, after prefetching its ord
 * and kw lines so the search's cache misses overlap. A node is 3744 bytes (4 KiB class).
 *
 * Insert splits a full node into the node and a fresh right sibling (half and half, or
 * all but the new key when appending at the right edge of the tree, so ascending loads
 * fill nodes), up to a new root. A leaf split posts the shortest prefix of the right
 * node's first key that is greater than the left node's last key, so separators of
 * keys that differ early stay inline. Every block an insert may need is allocated
 * before the first store, so TIPS_ENOMEM leaves the tree untouched. Remove takes the key
 * out of its leaf; a leaf left empty is freed (unlinked from its left neighbour, found
 * through the path, and from its parent), an inner node left without children likewise,
 * and a root with one child is replaced by the child (height shrinks). Nodes are not
 * merged or rebalanced otherwise: a thinned node stays until it empties.
 *
 * Locks. One pthread rwlock taken spin-then-block (lock_read/lock_write), in the DRAM
 * handle made by open(): no lock word lives in PM, so a lock held when the process died
 * reads as free because it no longer exists (design decision "Locks inside PM"). Writers
 * hold it exclusive, scan shared; those readers therefore never see a half-updated
 * node, a torn value or a value/length mismatch. Lookup is optimistic first (a
 * sequence lock, see lookup_optimistic): writers make a counter odd around their stores
 * only (store_begin/store_end, after the IDX_LOGs), and a lookup that saw it even and
 * unchanged keeps what it read, else retries and at last takes the lock shared. The
 * lookups that TIPS makes from application threads to decide an insert's outcome then
 * neither wait for replay's writers nor wake them. It is glibc's default kind, reader-
 * preferring: a waiting writer does not hold back new readers, it waits for a moment
 * with none, which the callers' work between calls provides (a writer-preferring lock
 * measured 10-25% slower on YCSB A and C in both builds, tips-bptree most: there the
 * readers are the application's threads and the writers replay). Blocks are still
 * freed through IDX_FREE (deferred) as the hooks require.
 *
 * Invariant (what makes the tips build crash consistent): every store to memory that
 * existed before the current operation is preceded by IDX_LOG of the bytes it stores.
 * A node's header - count, level, next, used, ord[] - is logged as one range from its
 * start to the last ord byte that changes (header_log(): a superset, harmless, since a
 * rollback undoes every operation since the last reclamation); an insert logs that and
 * the parts of the one slot it fills that change (slot_write()), a remove only the
 * header. A split writes the new
 * right node unlogged (fresh) and logs the left node's header (its next included) and,
 * if the new entry stays left, the slot it takes. An update of a value of the same
 * length overwrites the value bytes (8 for an inline value) in place after
 * IDX_LOG_VALUE (no undo record: recovery replays the update), otherwise it logs the
 * slot's val and meta and links a new value block. A remove also logs the left
 * neighbour's next and the root block when they change. Slots not listed in ord are
 * never read. The code never flushes or fences: the framework makes stores durable.
 *
 * Conversion cost: 21 hook sites - IDX_ALLOC 4 (root block, node, key block, value
 * block), IDX_FREE 6 (free_blocks(), used on create and ENOMEM rollback and for a
 * removed key's blocks; a replaced value block; a dropped separator; an emptied leaf;
 * an emptied inner node; the old root on collapse), IDX_LOG 11 (header_log(); four in
 * slot_write(), kw and, when they change, meta and the entry or else its val;
 * next_set(); root_set(); four in update: IDX_LOG_VALUE of a value block in place and
 * of an inline value in place, and val and meta of a changed length). Lookup, scan and walk have none. The
 * sites beyond Figure 3's pattern buy log volume: an insert logs about 100 bytes in 3
 * records instead of a shifted half-node (~1.8 KB); measured on a 1M-key load with 2
 * threads, that cut the process's CPU time from ~16.5 s to ~12 s.
 *
 * Scan. Descends to the leaf of the start key and follows next, copying up to @count
 * pairs (in batches of at most BPT_SCAN_BATCH pairs or ~1 MiB) into a private buffer
 * under the read lock; then calls fn with no lock held, so fn may call back into the
 * index. A following batch descends again from the last key passed. The result is not
 * a snapshot: a key written while the scan runs may or may not be seen (the framework
 * merges the newer writes).
 */
#define _GNU_SOURCE
#define IDX_BASE_NAME "bptree"
#include "indexes/idx_hooks.h"
#include "indexes/indexes.h"
#include "util/kv.h"

#include <endian.h>
#include <stdatomic.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define BPT_MAGIC 0x3274727470737074ull /* "tipsptr2": layout version 2 */
#ifndef BPT_FANOUT /* a test build may set a small fanout (>= 3) to stress splits and frees */
#define BPT_FANOUT 128u /* slots a node: keys of a leaf, children of an inner */
#endif
#define BPT_MAX_HEIGHT 40u /* far above reach: each level needs ~64x the splits of the one below */
#define BPT_SCAN_BATCH 512u       /* pairs copied per read-lock hold in a scan */
#define BPT_SCAN_BYTES (1u << 20) /* ... or about this many bytes */
#define BPT_OPT_TRIES 4u          /* lookup: optimistic tries before the read lock */
#define BPT_SPIN_MAX 128u         /* lock: try-locks with 1, 2, .. 128 pauses between */
#define BPT_KLEN_BITS 11u         /* meta: key length 1..1024 in the low 11 bits */
#define BPT_USED_WORDS ((BPT_FANOUT + 63) / 64)

/* ---- persistent layout (in PM in the tips build) ---------------------------------- */

/* A slot's val and key block. */
struct bpt_ent {
	union {
		uint64_t word;          /* leaf, vlen <= 8: the value bytes, zero padded */
		unsigned char *block;   /* leaf, vlen > 8: block of exactly vlen bytes */
		struct bpt_node *child; /* inner: the child */
	} val;
	unsigned char *kx; /* klen > 8: block holding the whole key; else unused */
};

/* A leaf (level 0) or an inner node; one block. The header (count .. ord) comes first
 * so that one logged range covers it. Physical slots not in ord[0..count) are garbage. */
struct bpt_node {
	uint32_t count;                 /* leaf: keys; inner: children (>= 1 unless root) */
	uint32_t level;                 /* 0 for a leaf, the parent's level - 1 below the root */
	struct bpt_node *next;          /* leaf: right neighbour, NULL for the last; inner: NULL */
	uint64_t used[BPT_USED_WORDS];  /* bit s: physical slot s is listed in ord */
	uint8_t ord[BPT_FANOUT];        /* physical slots in ascending key order */
	uint64_t kw[BPT_FANOUT];        /* key's bytes 0..7 as a big-endian word, zero padded */
	uint32_t meta[BPT_FANOUT];      /* key length | value length << BPT_KLEN_BITS */
	struct bpt_ent e[BPT_FANOUT];
};

_Static_assert(BPT_FANOUT >= 3, "a split needs a slot on each side and one to post");
_Static_assert(BPT_FANOUT <= 256, "ord[] holds slot numbers in a byte");

/* The root object returned by create. magic is written by create only; root and height
 * change together (one logged range) when the root splits or collapses. */
struct bpt_root {
	uint64_t magic;        /* BPT_MAGIC once create has filled the root */
	struct bpt_node *root; /* root node: a leaf (maybe empty) or an inner with >= 2 children */
	uint64_t height;       /* levels: root->level + 1, 1..BPT_MAX_HEIGHT */
};

/* ---- volatile handle (DRAM, rebuilt by every open) ----------------------------------- */

struct bpt_index {
	_Alignas(64) pthread_rwlock_t lock; /* writers exclusive, scan and lookup's fallback shared */
	struct bpt_root *root;
	unsigned store_depth;               /* nested store_begin()s (under the write lock) */
	_Alignas(64) _Atomic uint64_t seq;  /* odd while a writer stores (lookup_optimistic) */
};

/*
 * The lock, spin-then-block: a few try-locks with growing pauses before the blocking
 * call. Critical sections last a microsecond or two, while a futex sleep and wake-up
 * cost more than that (measured: ~23% of the CPU of tips-bptree on YCSB A went to
 * rwlock sleeps and wake-ups with plain pthread_rwlock_rdlock/wrlock).
 */
static void lock_read(struct bpt_index *t)
{
	for (unsigned spin = 1; spin <= BPT_SPIN_MAX; spin *= 2) {
		if (pthread_rwlock_tryrdlock(&t->lock) == 0)
			return;
		for (unsigned i = 0; i < spin; i++)
			cpu_pause();
	}
	pthread_rwlock_rdlock(&t->lock);
}

static void lock_write(struct bpt_index *t)
{
	for (unsigned spin = 1; spin <= BPT_SPIN_MAX; spin *= 2) {
		if (pthread_rwlock_trywrlock(&t->lock) == 0)
			return;
		for (unsigned i = 0; i < spin; i++)
			cpu_pause();
	}
	pthread_rwlock_wrlock(&t->lock);
}

static inline void unlock(struct bpt_index *t)
{
	pthread_rwlock_unlock(&t->lock);
}

/*
 * A writer (holding the write lock) brackets its stores to reachable memory with
 * store_begin/store_end: seq is odd from before the first store to after the last, so
 * an optimistic lookup that saw seq even and unchanged around its reads read none of
 * them. The bracket covers the stores only, not the descent, the allocations or the
 * IDX_LOGs (each a ULog record and a fence) that precede them, so that the window in
 * which lookups must retry is tens of nanoseconds, not the microsecond of the write.
 * Brackets nest (a split's parent insert); the outermost flips seq.
 */
static void store_begin(struct bpt_index *t)
{
	if (t->store_depth++)
		return;
	atomic_store_explicit(&t->seq, atomic_load_explicit(&t->seq, memory_order_relaxed) + 1,
			      memory_order_relaxed);
	atomic_thread_fence(memory_order_release); /* seq odd before any store that follows */
}

static void store_end(struct bpt_index *t)
{
	if (--t->store_depth)
		return;
	atomic_store_explicit(&t->seq, atomic_load_explicit(&t->seq, memory_order_relaxed) + 1,
			      memory_order_release); /* after every store that preceded */
}

/* An entry outside a node (a new entry, a split's temporary, a separator going up). */
struct bpt_slot {
	uint64_t kw;
	uint32_t meta;
	struct bpt_ent e;
};

/* The nodes from the root down to a leaf, and the child (in order) taken in each. */
struct bpt_path {
	struct bpt_node *node[BPT_MAX_HEIGHT];
	unsigned idx[BPT_MAX_HEIGHT];
};

/* A search key: its word, length and bytes. */
struct bpt_key {
	uint64_t w;
	size_t len;
	const unsigned char *b;
};

/* ---- keys ---------------------------------------------------------------------------- */

/* Bytes 0..7 of a key as a big-endian integer, zero padded: words order like memcmp. */
static inline uint64_t key_word(const unsigned char *b, size_t len)
{
	uint64_t w = 0;
	memcpy(&w, b, len < 8 ? len : 8);
	return be64toh(w);
}

static inline struct bpt_key key_make(const void *b, size_t len)
{
	return (struct bpt_key){ key_word(b, len), len, b };
}

static inline uint32_t meta_klen(uint32_t meta)
{
	return meta & ((1u << BPT_KLEN_BITS) - 1);
}

static inline uint32_t meta_vlen(uint32_t meta)
{
	return meta >> BPT_KLEN_BITS;
}

static inline uint32_t meta_make(size_t klen, size_t vlen)
{
	return (uint32_t)klen | (uint32_t)vlen << BPT_KLEN_BITS;
}

/* Compares physical slot @s of @n with @k: memcmp order, the shorter first on a tie. */
static inline int slot_cmp(const struct bpt_node *n, unsigned s, const struct bpt_key *k)
{
	uint64_t w = n->kw[s];
	if (w != k->w)
		return w < k->w ? -1 : 1;
	size_t l = meta_klen(n->meta[s]);
	if (l > 8 && k->len > 8) {
		int c = memcmp(n->e[s].kx + 8, k->b + 8, (l < k->len ? l : k->len) - 8);
		if (c)
			return c;
	}
	return (l > k->len) - (l < k->len);
}

/* The bytes of a key given its word, length and block; @buf holds short keys. */
static inline const unsigned char *key_bytes(uint64_t kw, uint32_t klen,
					     const unsigned char *kx, unsigned char buf[8])
{
	if (klen > 8)
		return kx;
	uint64_t be = htobe64(kw);
	memcpy(buf, &be, 8);
	return buf;
}

/* Length of the shortest prefix of @b greater than @a, given a < b. */
static uint32_t sep_len(const unsigned char *a, uint32_t al, const unsigned char *b,
			uint32_t bl)
{
	uint32_t m = al < bl ? al : bl, i = 0;
	while (i < m && a[i] == b[i])
		i++;
	return i + 1; /* i < bl: if i == m, a is a proper prefix of b */
}

/* ---- searches (call with the lock held) --------------------------------------------- */

/* Starts loading @n's ord and key words: the binary search's misses then overlap
 * instead of following one another (a full node's words are 16 cache lines). */
static inline void prefetch_node(const struct bpt_node *n)
{
	const char *p = (const char *)n->ord, *end = (const char *)&n->ord[BPT_FANOUT];
	for (; p < end; p += 64)
		__builtin_prefetch(p);
	p = (const char *)n->kw;
	end = (const char *)&n->kw[BPT_FANOUT];
	for (; p < end; p += 64)
		__builtin_prefetch(p);
}

/* Position in order of the child of inner node @n whose range holds @k. */
static inline unsigned inner_child(const struct bpt_node *n, const struct bpt_key *k)
{
	unsigned lo = 1, hi = n->count; /* first separator > k, in [1, count] */
	while (lo < hi) {
		unsigned mid = (lo + hi) / 2;
		if (slot_cmp(n, n->ord[mid], k) <= 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo - 1;
}

static inline struct bpt_node *child_at(const struct bpt_node *n, unsigned i)
{
	return n->e[n->ord[i]].val.child;
}

/* Position in order of the first key >= @k in leaf @n; *found says whether it is @k. */
static inline unsigned leaf_lower(const struct bpt_node *n, const struct bpt_key *k,
				  bool *found)
{
	unsigned lo = 0, hi = n->count;
	while (lo < hi) {
		unsigned mid = (lo + hi) / 2;
		if (slot_cmp(n, n->ord[mid], k) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	*found = lo < n->count && slot_cmp(n, n->ord[lo], k) == 0;
	return lo;
}

/* The leaf whose range holds @k (the first leaf if @k is NULL). */
static const struct bpt_node *leaf_of(const struct bpt_root *r, const struct bpt_key *k)
{
	const struct bpt_node *n = r->root;
	prefetch_node(n);
	while (n->level > 0) {
		n = child_at(n, k ? inner_child(n, k) : 0);
		prefetch_node(n);
	}
	return n;
}

/* Fills @pa from the root to @k's leaf; returns the depth (the height). */
static unsigned descend(const struct bpt_root *r, const struct bpt_key *k,
			struct bpt_path *pa)
{
	struct bpt_node *n = r->root;
	unsigned d = 0;
	prefetch_node(n);
	for (; n->level > 0; d++) {
		unsigned i = inner_child(n, k);
		pa->node[d] = n;
		pa->idx[d] = i;
		n = child_at(n, i);
		prefetch_node(n);
	}
	pa->node[d] = n;
	return d + 1;
}

/* ---- node stores (call with the write lock held) ------------------------------------ */

/* Logs @n's header up to ord[@nord - 1]: count, level, next, used and ord[0..nord). */
static inline void header_log(struct bpt_node *n, unsigned nord)
{
	IDX_LOG(n, offsetof(struct bpt_node, ord) + nord);
}

/* Writes @in into free physical slot @s of @n, logging what changes: the meta word and
 * the key block pointer of a reused slot often stay (same lengths, short keys), and
 * each logged range costs the ULog a record and a fence. */
enum { SLOT_META = 1, SLOT_KX = 2 }; /* what slot_log() found to change besides kw, val */

static unsigned slot_log(struct bpt_node *n, unsigned s, const struct bpt_slot *in)
{
	unsigned what = 0;
	IDX_LOG(&n->kw[s], sizeof(n->kw[s]));
	if (n->meta[s] != in->meta) {
		IDX_LOG(&n->meta[s], sizeof(n->meta[s]));
		what |= SLOT_META;
	}
	if (n->e[s].kx != in->e.kx) {
		IDX_LOG(&n->e[s], sizeof(n->e[s]));
		what |= SLOT_KX;
	} else {
		IDX_LOG(&n->e[s].val, sizeof(n->e[s].val));
	}
	return what;
}

static void slot_store(struct bpt_node *n, unsigned s, const struct bpt_slot *in, unsigned what)
{
	n->kw[s] = in->kw;
	if (what & SLOT_META)
		n->meta[s] = in->meta;
	if (what & SLOT_KX)
		n->e[s] = in->e;
	else
		n->e[s].val = in->e.val;
}

static void slot_write(struct bpt_node *n, unsigned s, const struct bpt_slot *in)
{
	slot_store(n, s, in, slot_log(n, s, in));
}

static inline void next_set(struct bpt_node *n, struct bpt_node *next)
{
	IDX_LOG(&n->next, sizeof(n->next));
	n->next = next;
}

static inline void root_set(struct bpt_root *r, struct bpt_node *node, uint64_t height)
{
	IDX_LOG(&r->root, sizeof(r->root) + sizeof(r->height)); /* adjacent: one range */
	r->root = node;
	r->height = height;
}

static inline void slot_get(const struct bpt_node *n, unsigned s, struct bpt_slot *out)
{
	out->kw = n->kw[s];
	out->meta = n->meta[s];
	out->e = n->e[s];
}

static inline void slot_put(struct bpt_node *n, unsigned s, const struct bpt_slot *in)
{
	n->kw[s] = in->kw;
	n->meta[s] = in->meta;
	n->e[s] = in->e;
}

static inline bool used_has(const struct bpt_node *n, unsigned s)
{
	return n->used[s / 64] >> (s % 64) & 1;
}

static inline void used_set(struct bpt_node *n, unsigned s, bool on)
{
	if (on)
		n->used[s / 64] |= 1ull << (s % 64);
	else
		n->used[s / 64] &= ~(1ull << (s % 64));
}

/* A physical slot not in use; the node has fewer than BPT_FANOUT entries. */
static unsigned slot_free(const struct bpt_node *n)
{
	for (unsigned w = 0;; w++)
		if (~n->used[w])
			return w * 64 + (unsigned)__builtin_ctzll(~n->used[w]);
}

/* Entry @i in order of @n with @s inserted at @p (the sequence a split distributes). */
static inline void virt_get(const struct bpt_node *n, unsigned p, const struct bpt_slot *s,
			    unsigned i, struct bpt_slot *out)
{
	if (i == p)
		*out = *s;
	else
		slot_get(n, n->ord[i < p ? i : i - 1], out);
}

/* Inserts @s at position @p in order into @n, which has room: the entry goes to a free
 * slot (logged), and ord shifts by a byte per later entry (in the logged header). */
static void node_put(struct bpt_index *t, struct bpt_node *n, unsigned p,
		     const struct bpt_slot *s)
{
	unsigned c = n->count, f = slot_free(n);
	unsigned what = slot_log(n, f, s);
	header_log(n, c + 1);
	store_begin(t);
	slot_store(n, f, s, what);
	memmove(&n->ord[p + 1], &n->ord[p], c - p);
	n->ord[p] = (uint8_t)f;
	used_set(n, f, true);
	n->count = c + 1;
	store_end(t);
}

/* Removes the entry at position @i in order from @n (its slot becomes free). */
static void node_del(struct bpt_node *n, unsigned i)
{
	unsigned c = n->count;
	header_log(n, c);
	used_set(n, n->ord[i], false);
	memmove(&n->ord[i], &n->ord[i + 1], c - i - 1);
	n->count = c - 1;
}

/* Where a full node splits when @s goes in at @p: the left keeps entries [0, L). At the
 * right edge of the tree an append keeps the left full (ascending loads fill nodes). */
static inline unsigned split_at(unsigned p, bool rightmost)
{
	return rightmost && p == BPT_FANOUT ? BPT_FANOUT : (BPT_FANOUT + 1) / 2;
}

/*
 * Splits full node @n while inserting @s at @p: entries [L, FANOUT] of the sequence go
 * to @r (fresh: no log), the left keeps [0, L) in place. *@first gets r's first entry
 * (an inner node's moves up to the parent with the block it owns; r never reads it).
 */
static void node_split(struct bpt_node *n, unsigned p, const struct bpt_slot *s, unsigned L,
		       struct bpt_node *r, struct bpt_slot *first)
{
	struct bpt_slot t;
	unsigned rc = BPT_FANOUT + 1 - L;
	for (unsigned i = L; i <= BPT_FANOUT; i++) { /* before the left changes */
		virt_get(n, p, s, i, &t);
		slot_put(r, i - L, &t);
		r->ord[i - L] = (uint8_t)(i - L);
	}
	slot_get(r, 0, first);
	memset(r->used, 0, sizeof(r->used));
	for (unsigned i = 0; i < rc; i++)
		used_set(r, i, true);
	r->count = rc;
	r->level = n->level;
	r->next = n->level == 0 ? n->next : NULL;

	header_log(n, BPT_FANOUT); /* count, next, used, ord: all may change */
	if (n->level == 0)
		n->next = r;
	for (unsigned i = L; i <= BPT_FANOUT; i++) /* free the slots of what moved right */
		if (i != p)
			used_set(n, n->ord[i < p ? i : i - 1], false);
	if (p < L) {
		unsigned f = slot_free(n);
		slot_write(n, f, s);
		memmove(&n->ord[p + 1], &n->ord[p], L - 1 - p);
		n->ord[p] = (uint8_t)f;
		used_set(n, f, true);
	}
	n->count = L;
}

/* ---- blocks -------------------------------------------------------------------------- */

/* A fresh node with no entries. */
static struct bpt_node *node_new(uint32_t level)
{
	struct bpt_node *n = IDX_ALLOC(sizeof(*n));
	if (n) {
		n->count = 0;
		n->level = level;
		n->next = NULL;
		memset(n->used, 0, sizeof(n->used));
	}
	return n;
}

/* A block holding @len bytes of @b (a key longer than 8 bytes, a separator). */
static unsigned char *key_block_new(const unsigned char *b, size_t len)
{
	unsigned char *kx = IDX_ALLOC(len);
	if (kx)
		memcpy(kx, b, len);
	return kx;
}

/* A block holding a value of more than 8 bytes. */
static unsigned char *value_block_new(const void *val, size_t vlen)
{
	unsigned char *vb = IDX_ALLOC(vlen);
	if (vb)
		memcpy(vb, val, vlen);
	return vb;
}

/* Frees the non-NULL blocks of @v. */
static void free_blocks(void *const *v, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		if (v[i])
			IDX_FREE(v[i]);
}

/* An inline value (at most 8 bytes), zero padded. */
static inline uint64_t value_word(const void *val, size_t vlen)
{
	uint64_t w = 0;
	if (vlen)
		memcpy(&w, val, vlen);
	return w;
}

static inline const unsigned char *slot_value(const struct bpt_node *n, unsigned s)
{
	return meta_vlen(n->meta[s]) > 8 ? n->e[s].val.block
					 : (const unsigned char *)&n->e[s].val.word;
}

/* ---- ops ------------------------------------------------------------------------------ */

static int bpt_create(const struct tips_index_config *cfg, void **rootp)
{
	if (!cfg || !rootp)
		return TIPS_EINVAL;
	struct bpt_root *root = IDX_ALLOC(sizeof(*root));
	struct bpt_node *leaf = root ? node_new(0) : NULL;
	if (!leaf) {
		void *blocks[] = { root };
		free_blocks(blocks, 1);
		return TIPS_ENOMEM;
	}
	/* Fresh blocks: no logging. */
	root->root = leaf;
	root->height = 1;
	root->magic = BPT_MAGIC;
	*rootp = root;
	return 0;
}

/* A link to node @n at @level, read from @from, checked before it is followed: an
 * allocated node block, its level, a count within the fanout (inner nodes >= 1), and
 * ord[] naming physical slots. */
static int node_check(const struct bpt_node *n, uint32_t level, const void *from)
{
	if (!IDX_CHECK_BLOCK(n, sizeof(*n)))
		return IDX_CORRUPT(from, "link %p: expected an allocated node block of >= %zu "
				   "bytes", (const void *)n, sizeof(*n));
	if (n->level != level || n->count > BPT_FANOUT || (level > 0 && n->count == 0))
		return IDX_CORRUPT(n, "level %u, count %u: expected level %u and a count of "
				   "%u..%u", n->level, n->count, level, level > 0 ? 1u : 0u,
				   BPT_FANOUT);
	for (unsigned i = 0; i < n->count; i++)
		if (n->ord[i] >= BPT_FANOUT)
			return IDX_CORRUPT(n, "ord[%u] = %u: expected a slot below %u", i,
					   n->ord[i], BPT_FANOUT);
	return 0;
}

static int bpt_open(void *rootv, void **indexp)
{
	struct bpt_root *root = rootv;
	if (!root || !indexp)
		return TIPS_EINVAL;
	if (!IDX_CHECK_BLOCK(root, sizeof(*root)) || root->magic != BPT_MAGIC ||
	    root->height < 1 || root->height > BPT_MAX_HEIGHT)
		return IDX_CORRUPT(root, "root: expected an allocated block of >= %zu bytes with "
				   "magic 0x%llx and a height of 1..%u", sizeof(*root),
				   (unsigned long long)BPT_MAGIC, BPT_MAX_HEIGHT);
	int rc = node_check(root->root, (uint32_t)root->height - 1, root);
	if (rc)
		return rc;

	struct bpt_index *t = NULL;
	if (posix_memalign((void **)&t, _Alignof(struct bpt_index), sizeof(*t)))
		return TIPS_ENOMEM;
	/* Default kind, reader-preferring (see "Locks" at the top). */
	if (pthread_rwlock_init(&t->lock, NULL)) {
		free(t);
		return TIPS_ENOMEM;
	}
	t->root = root;
	t->store_depth = 0;
	atomic_init(&t->seq, 0);
	*indexp = t;
	return 0;
}

static void bpt_close(void *index)
{
	struct bpt_index *t = index;
	if (!t)
		return;
	pthread_rwlock_destroy(&t->lock);
	free(t);
	IDX_FREE_BARRIER();
}

/* Insert under the write lock: the splits' blocks first, then the stores. */
static int insert_locked(struct bpt_index *t, const struct bpt_key *k, const void *val,
			 size_t vlen)
{
	struct bpt_root *R = t->root;
	struct bpt_path pa;
	unsigned h = descend(R, k, &pa);
	struct bpt_node *leaf = pa.node[h - 1];
	bool found;
	unsigned pos = leaf_lower(leaf, k, &found);
	if (found)
		return TIPS_EKEYEXISTS;

	/* Full nodes from the leaf up split; all full means a new root too. */
	unsigned nsplit = 0;
	while (nsplit < h && pa.node[h - 1 - nsplit]->count == BPT_FANOUT)
		nsplit++;
	bool grow = nsplit == h;
	if (grow && h >= BPT_MAX_HEIGHT)
		return TIPS_ENOMEM;
	bool rightmost[BPT_MAX_HEIGHT];
	rightmost[0] = true;
	for (unsigned d = 1; d < h; d++)
		rightmost[d] = rightmost[d - 1] && pa.idx[d - 1] == pa.node[d - 1]->count - 1;

	/* Blocks: [0] key, [1] value, [2] separator, [3..] new nodes, the last one the root. */
	void *blk[3 + BPT_MAX_HEIGHT + 1] = { NULL };
	unsigned nblk = 3 + nsplit + grow;
	bool nomem = false;
	struct bpt_slot s = { k->w, meta_make(k->len, vlen), { { 0 }, NULL } };
	if (k->len > 8)
		nomem |= !(blk[0] = s.e.kx = key_block_new(k->b, k->len));
	if (vlen > 8)
		nomem |= !(blk[1] = s.e.val.block = value_block_new(val, vlen));
	else
		s.e.val.word = value_word(val, vlen);

	struct bpt_slot sep = { 0, 0, { { 0 }, NULL } };
	unsigned L = 0;
	if (nsplit > 0 && !nomem) {
		/* The leaf's split point and the separator it posts: the shortest prefix of the
		 * right's first key above the left's last key. */
		L = split_at(pos, rightmost[h - 1]);
		struct bpt_slot a, b;
		unsigned char abuf[8], bbuf[8];
		virt_get(leaf, pos, &s, L - 1, &a);
		virt_get(leaf, pos, &s, L, &b);
		uint32_t al = meta_klen(a.meta), bl = meta_klen(b.meta);
		const unsigned char *bb = key_bytes(b.kw, bl, b.e.kx, bbuf);
		uint32_t sl = sep_len(key_bytes(a.kw, al, a.e.kx, abuf), al, bb, bl);
		sep.kw = sl >= 8 ? b.kw : b.kw & (~0ull << (64 - 8 * sl));
		sep.meta = meta_make(sl, 0);
		if (sl > 8)
			nomem |= !(blk[2] = sep.e.kx = key_block_new(bb, sl));
	}
	for (unsigned i = 3; i < nblk && !nomem; i++)
		nomem |= !(blk[i] = node_new(0));
	if (nomem) {
		free_blocks(blk, nblk);
		return TIPS_ENOMEM;
	}

	/* Stores from here on; nothing fails. A split stores in one bracket, a plain insert
	 * logs first and brackets its stores alone (node_put). */
	if (nsplit)
		store_begin(t);
	struct bpt_slot cur = s;
	for (unsigned d = h, used = 3;; d--) {
		struct bpt_node *n = pa.node[d - 1];
		unsigned p = d == h ? pos : pa.idx[d - 1] + 1;
		if (n->count < BPT_FANOUT) {
			node_put(t, n, p, &cur);
			break;
		}
		struct bpt_node *r = blk[used++];
		struct bpt_slot first;
		node_split(n, p, &cur, d == h ? L : split_at(p, rightmost[d - 1]), r, &first);
		/* Up goes the leaf's shortened separator, or an inner node's middle one. */
		cur = d == h ? sep : first;
		cur.e.val.child = r;
		if (d == 1) { /* the root split: a new root above it */
			struct bpt_node *nr = blk[used++];
			struct bpt_slot left = { 0, 0, { { 0 }, NULL } };
			left.e.val.child = n;
			nr->level = n->level + 1;
			slot_put(nr, 0, &left);
			slot_put(nr, 1, &cur);
			nr->ord[0] = 0;
			nr->ord[1] = 1;
			used_set(nr, 0, true);
			used_set(nr, 1, true);
			nr->count = 2;
			root_set(R, nr, h + 1);
			break;
		}
	}
	if (nsplit)
		store_end(t);
	return 0;
}

static int bpt_insert(void *index, const void *key, size_t klen, const void *val, size_t vlen)
{
	struct bpt_index *t = index;
	int rc = check_kv(key, klen, val, vlen);
	if (rc)
		return rc;
	struct bpt_key k = key_make(key, klen);
	lock_write(t);
	rc = insert_locked(t, &k, val, vlen);
	unlock(t);
	return rc;
}

static int bpt_update(void *index, const void *key, size_t klen, const void *val, size_t vlen)
{
	struct bpt_index *t = index;
	int rc = check_kv(key, klen, val, vlen);
	if (rc)
		return rc;
	struct bpt_key k = key_make(key, klen);

	lock_write(t);
	struct bpt_node *n = (struct bpt_node *)leaf_of(t->root, &k);
	bool found;
	unsigned i = leaf_lower(n, &k, &found);
	if (!found) {
		rc = TIPS_ENOTFOUND;
		goto out;
	}
	unsigned s = n->ord[i];
	uint32_t ov = meta_vlen(n->meta[s]);
	if (ov == vlen && vlen > 8) { /* same length: overwrite the block in place */
		IDX_LOG_VALUE(n->e[s].val.block, vlen);
		store_begin(t);
		memcpy(n->e[s].val.block, val, vlen);
		store_end(t);
	} else if (ov == vlen) { /* inline, same length: 8 bytes in place */
		if (vlen) {
			IDX_LOG_VALUE(&n->e[s].val, sizeof(n->e[s].val));
			store_begin(t);
			n->e[s].val.word = value_word(val, vlen);
			store_end(t);
		}
	} else {
		unsigned char *old = ov > 8 ? n->e[s].val.block : NULL;
		struct bpt_ent e = n->e[s];
		if (vlen > 8) {
			if (!(e.val.block = value_block_new(val, vlen))) {
				rc = TIPS_ENOMEM;
				goto out;
			}
		} else {
			e.val.word = value_word(val, vlen);
		}
		/* val and meta change together, in one store bracket. */
		IDX_LOG(&n->e[s].val, sizeof(n->e[s].val));
		IDX_LOG(&n->meta[s], sizeof(n->meta[s]));
		store_begin(t);
		n->e[s].val = e.val;
		n->meta[s] = meta_make(klen, vlen);
		store_end(t);
		if (old)
			IDX_FREE(old);
	}
out:
	unlock(t);
	return rc;
}

/* Removes inner node @n's child at position @i (count >= 2) with the separator that
 * goes: its own, or for the first child the second's, whose key becomes the unread
 * first one. */
static void inner_del(struct bpt_node *n, unsigned i)
{
	unsigned s = n->ord[i ? i : 1];
	if (meta_klen(n->meta[s]) > 8)
		IDX_FREE(n->e[s].kx);
	node_del(n, i);
}

static int bpt_remove(void *index, const void *key, size_t klen)
{
	struct bpt_index *t = index;
	if (!key || klen == 0)
		return TIPS_EINVAL;
	if (klen > TIPS_MAX_KEY)
		return TIPS_ENOTFOUND;
	struct bpt_key k = key_make(key, klen);
	struct bpt_path pa;
	int rc = 0;

	lock_write(t);
	store_begin(t); /* removes are rare: one bracket over the whole operation */
	struct bpt_root *R = t->root;
	unsigned h = descend(R, &k, &pa);
	struct bpt_node *leaf = pa.node[h - 1];
	bool found;
	unsigned pos = leaf_lower(leaf, &k, &found);
	if (!found) {
		rc = TIPS_ENOTFOUND;
		goto out;
	}
	unsigned s = leaf->ord[pos];
	void *gone[2] = { meta_klen(leaf->meta[s]) > 8 ? leaf->e[s].kx : NULL,
			  meta_vlen(leaf->meta[s]) > 8 ? leaf->e[s].val.block : NULL };
	if (leaf->count > 1 || h == 1) {
		node_del(leaf, pos);
	} else {
		/* The leaf empties: unlink it from its left neighbour (the rightmost leaf of
		 * the nearest subtree to the left on the path) and from its parent. */
		for (unsigned d = h - 1; d-- > 0;) {
			if (pa.idx[d] > 0) {
				struct bpt_node *l = child_at(pa.node[d], pa.idx[d] - 1);
				while (l->level > 0)
					l = child_at(l, l->count - 1);
				next_set(l, leaf->next);
				break;
			}
		}
		IDX_FREE(leaf);
		for (unsigned d = h - 1; d-- > 0;) {
			struct bpt_node *n = pa.node[d];
			if (n->count > 1 || d == 0) { /* the root always has >= 2 children */
				inner_del(n, pa.idx[d]);
				break;
			}
			IDX_FREE(n); /* its only child went: it empties too (no separators) */
		}
		/* A root with one child hands the root over to it. */
		while (R->height > 1 && R->root->count == 1) {
			struct bpt_node *old = R->root;
			root_set(R, child_at(old, 0), R->height - 1);
			IDX_FREE(old);
		}
	}
	free_blocks(gone, 2);
out:
	store_end(t);
	unlock(t);
	return rc;
}

/*
 * Optimistic lookup (a sequence lock): reads the tree without the lock between two
 * reads of seq, and keeps the answer only if seq was even and did not change, i.e. no
 * writer stored meanwhile (store_begin). TIPS decides each insert's outcome with a
 * lookup from the application thread; with the rwlock alone, such a lookup that met a
 * replay writer slept on a futex and woke it on unlock, and a load spent half its CPU
 * in futex sleeps and wake-ups (docs/framework.md, "tips-bptree's write outlier").
 *
 * What it reads may be torn, so it follows only pointers that stay valid: child
 * pointers (nodes are freed through IDX_FREE, deferred past this read section), never a
 * key block (keys longer than 8 bytes whose first words tie go to the locked path), and
 * a value block only after a validation, the copy being validated again (a same-length
 * update stores in place). ord[] bytes are taken modulo BPT_FANOUT and count is checked,
 * so no index leaves a node. Not instrumented by ThreadSanitizer: the racing reads are
 * the algorithm, and their result is discarded unless validated.
 */
enum { OPT_FOUND, OPT_ABSENT, OPT_RETRY, OPT_LOCK };

__attribute__((no_sanitize_thread)) static int
lookup_optimistic(struct bpt_index *t, const struct bpt_key *k, void *val, size_t cap,
		  size_t *vlen)
{
	uint64_t s0 = atomic_load_explicit(&t->seq, memory_order_acquire);
	if (s0 & 1)
		return OPT_RETRY;
	const struct bpt_node *n = t->root->root;
	prefetch_node(n);
	for (unsigned d = 0; d < BPT_MAX_HEIGHT; d++) {
		unsigned c = n->count;
		if (c > BPT_FANOUT)
			return OPT_RETRY;
		bool inner = n->level > 0;
		unsigned lo = inner ? 1 : 0, hi = c;
		while (lo < hi) { /* inner: first separator > k; leaf: first key >= k */
			unsigned mid = (lo + hi) / 2, s = n->ord[mid] % BPT_FANOUT;
			uint64_t w = n->kw[s];
			uint32_t l = meta_klen(n->meta[s]);
			if (w == k->w && k->len > 8 && l > 8)
				return OPT_LOCK;
			int cmp = w != k->w ? (w < k->w ? -1 : 1)
					    : (int)(l > k->len) - (int)(l < k->len);
			if (inner ? cmp <= 0 : cmp < 0)
				lo = mid + 1;
			else
				hi = mid;
		}
		if (inner) {
			n = n->e[n->ord[lo - 1] % BPT_FANOUT].val.child;
			if (!n)
				return OPT_RETRY;
			prefetch_node(n);
			continue;
		}
		unsigned s = lo < c ? n->ord[lo] % BPT_FANOUT : 0;
		bool found = lo < c && n->kw[s] == k->w && meta_klen(n->meta[s]) == k->len;
		if (found && k->len > 8)
			return OPT_LOCK; /* the tails decide: they live in key blocks */
		uint32_t meta = found ? n->meta[s] : 0;
		struct bpt_ent e = found ? n->e[s] : (struct bpt_ent){ { 0 }, NULL };
		atomic_thread_fence(memory_order_acquire);
		if (atomic_load_explicit(&t->seq, memory_order_relaxed) != s0)
			return OPT_RETRY;
		if (!found)
			return OPT_ABSENT;
		size_t len = meta_vlen(meta);
		if (cap && len) {
			const void *src = len > 8 ? (const void *)e.val.block
						  : (const void *)&e.val.word;
			seq_racy_copy(val, src, len < cap ? len : cap);
			atomic_thread_fence(memory_order_acquire);
			if (atomic_load_explicit(&t->seq, memory_order_relaxed) != s0)
				return OPT_RETRY;
		}
		if (vlen)
			*vlen = len;
		return OPT_FOUND;
	}
	return OPT_RETRY;
}

static int bpt_lookup(void *index, const void *key, size_t klen, void *val, size_t cap,
		      size_t *vlen)
{
	struct bpt_index *t = index;
	if (!key || klen == 0 || (cap && !val))
		return TIPS_EINVAL;
	if (klen > TIPS_MAX_KEY)
		return TIPS_ENOTFOUND;
	struct bpt_key k = key_make(key, klen);
	int rc = 0;

	IDX_READ_ENTER();
	for (unsigned attempt = 0; attempt < BPT_OPT_TRIES; attempt++) {
		size_t len;
		int o = lookup_optimistic(t, &k, val, cap, &len);
		if (o == OPT_FOUND || o == OPT_ABSENT) {
			IDX_READ_EXIT();
			if (o == OPT_ABSENT)
				return TIPS_ENOTFOUND;
			if (vlen)
				*vlen = len;
			return IDX_FOUND(len, cap);
		}
		if (o == OPT_LOCK)
			break;
		seq_backoff(attempt);
	}
	IDX_READ_EXIT(); /* never block on the lock inside a read section */

	lock_read(t);
	const struct bpt_node *n = leaf_of(t->root, &k);
	bool found;
	unsigned i = leaf_lower(n, &k, &found);
	if (found) {
		unsigned s = n->ord[i];
		size_t len = meta_vlen(n->meta[s]);
		if (cap && len)
			memcpy(val, slot_value(n, s), len < cap ? len : cap);
		if (vlen)
			*vlen = len;
		rc = IDX_FOUND(len, cap);
	} else {
		rc = TIPS_ENOTFOUND;
	}
	unlock(t);
	return rc;
}

/* ---- scan ------------------------------------------------------------------------------ */

/* Copies of pairs: records {u32 klen, u32 vlen, key, value}, back to back. */
struct scan_buf {
	unsigned char *p;
	size_t used, cap;
};

static int sbuf_add(struct scan_buf *b, const unsigned char *key, uint32_t klen,
		    const unsigned char *val, uint32_t vlen)
{
	size_t need = 2 * sizeof(uint32_t) + klen + vlen;
	if (b->used + need > b->cap) {
		size_t cap = b->cap ? b->cap : 4096;
		while (cap < b->used + need)
			cap *= 2;
		unsigned char *p = realloc(b->p, cap);
		if (!p)
			return TIPS_ENOMEM;
		b->p = p;
		b->cap = cap;
	}
	unsigned char *d = b->p + b->used;
	memcpy(d, &klen, sizeof(klen));
	memcpy(d + sizeof(klen), &vlen, sizeof(vlen));
	memcpy(d + 2 * sizeof(uint32_t), key, klen);
	if (vlen)
		memcpy(d + 2 * sizeof(uint32_t) + klen, val, vlen);
	b->used += need;
	return 0;
}

/*
 * Copies up to @max pairs with keys >= @k (> @k if @after; from the first key if @k is
 * NULL) into @b, under the read lock. *more says whether keys may follow the batch.
 */
static int scan_batch(struct bpt_index *t, const struct bpt_key *k, bool after, size_t max,
		      struct scan_buf *b, size_t *got, bool *more)
{
	int rc = 0;
	size_t n = 0;
	lock_read(t);
	const struct bpt_node *leaf = leaf_of(t->root, k);
	unsigned i = 0;
	if (k) {
		bool found;
		i = leaf_lower(leaf, k, &found);
		if (found && after)
			i++;
	}
	while (leaf && n < max && b->used < BPT_SCAN_BYTES) {
		if (i >= leaf->count) {
			leaf = leaf->next;
			i = 0;
			continue;
		}
		unsigned s = leaf->ord[i];
		uint32_t m = leaf->meta[s];
		unsigned char kbuf[8];
		const unsigned char *key = key_bytes(leaf->kw[s], meta_klen(m), leaf->e[s].kx, kbuf);
		rc = sbuf_add(b, key, meta_klen(m), slot_value(leaf, s), meta_vlen(m));
		if (rc)
			break;
		n++;
		i++;
	}
	*more = leaf != NULL;
	unlock(t);
	*got = n;
	return rc;
}

static long bpt_scan(void *index, const void *start, size_t klen, size_t count,
		     tips_scan_fn fn, void *arg)
{
	struct bpt_index *t = index;
	if (!fn || (klen && !start))
		return TIPS_EINVAL;
	if (count == 0)
		return 0;

	struct scan_buf b = { NULL, 0, 0 };
	unsigned char last[TIPS_MAX_KEY]; /* the last key passed: where the next batch starts */
	struct bpt_key k = klen ? key_make(start, klen) : (struct bpt_key){ 0, 0, NULL };
	bool from = klen != 0, after = false, stop = false;
	long passed = 0;
	while (!stop) {
		size_t want = count - (size_t)passed, got = 0;
		bool more = false;
		b.used = 0;
		int rc = scan_batch(t, from ? &k : NULL, after,
				    want < BPT_SCAN_BATCH ? want : BPT_SCAN_BATCH, &b, &got, &more);
		if (rc) {
			passed = rc;
			break;
		}
		uint32_t kl = 0, vl;
		for (size_t off = 0; off < b.used && !stop;) {
			memcpy(&kl, b.p + off, sizeof(kl));
			memcpy(&vl, b.p + off + sizeof(kl), sizeof(vl));
			const unsigned char *key = b.p + off + 2 * sizeof(uint32_t);
			off += 2 * sizeof(uint32_t) + kl + vl;
			passed++;
			stop = fn(key, kl, key + kl, vl, arg) != 0;
			if (!stop && off >= b.used)
				memcpy(last, key, kl); /* the batch's last key */
		}
		if (got == 0 || !more || (size_t)passed >= count)
			break;
		k = key_make(last, kl);
		from = after = true;
	}
	free(b.p);
	return passed;
}

/* ---- walk ------------------------------------------------------------------------------ */

struct walk_state {
	tips_walk_fn fn;
	void *arg;
	const struct bpt_node *prev_leaf; /* the leaf before in key order, NULL at first */
};

/* Slot @s of @n (read in ord position @i): its key length within limits and, beyond 8
 * bytes, its key block (not for an inner node's first key, which is never read);
 * a leaf's value length within limits and, beyond 8 bytes, its value block. An inner
 * node's first key is not checked: it stands for minus infinity. */
static int slot_check(const struct bpt_node *n, unsigned i, unsigned s)
{
	uint32_t m = n->meta[s], klen = meta_klen(m), vlen = meta_vlen(m);
	bool key_read = n->level == 0 || i > 0;
	if ((key_read && (klen == 0 || klen > TIPS_MAX_KEY)) || (n->level == 0 && vlen > TIPS_MAX_VALUE) ||
	    (n->level > 0 && vlen != 0))
		return IDX_CORRUPT(n, "slot %u: klen %u, vlen %u: expected a key of 1..%u bytes "
				   "and a value of at most %u (0 in an inner node)", s, klen, vlen,
				   TIPS_MAX_KEY, TIPS_MAX_VALUE);
	if (klen > 8 && key_read && !IDX_CHECK_BLOCK(n->e[s].kx, klen))
		return IDX_CORRUPT(n, "slot %u: key block %p: expected an allocated block of "
				   ">= %u bytes", s, (const void *)n->e[s].kx, klen);
	if (n->level == 0 && vlen > 8 && !IDX_CHECK_BLOCK(n->e[s].val.block, vlen))
		return IDX_CORRUPT(n, "slot %u: value block %p: expected an allocated block of "
				   ">= %u bytes", s, (const void *)n->e[s].val.block, vlen);
	return 0;
}

/* The leaves in key order must be the leaf chain scans follow. */
static int leaf_chain_check(struct walk_state *w, const struct bpt_node *leaf)
{
	if (w->prev_leaf && w->prev_leaf->next != leaf)
		return IDX_CORRUPT(w->prev_leaf, "next %p: expected the next leaf in key order, "
				   "%p", (const void *)w->prev_leaf->next, (const void *)leaf);
	w->prev_leaf = leaf;
	return 0;
}

/* Reports @n; a leaf also takes its place in the leaf chain. */
static int fn_checked(const struct bpt_node *n, struct walk_state *w)
{
	int rc = n->level == 0 ? leaf_chain_check(w, n) : 0;
	return rc ? rc : w->fn(n, w->arg);
}

/* @n was checked by node_check; recursion depth is bounded by its level. */
static int walk_node(const struct bpt_node *n, struct walk_state *w)
{
	int rc = fn_checked(n, w);
	for (unsigned i = 0; i < n->count && rc == 0; i++) {
		unsigned s = n->ord[i];
		uint32_t m = n->meta[s];
		if ((rc = slot_check(n, i, s)))
			break;
		if (n->level == 0) {
			if (meta_klen(m) > 8)
				rc = w->fn(n->e[s].kx, w->arg);
			if (rc == 0 && meta_vlen(m) > 8)
				rc = w->fn(n->e[s].val.block, w->arg);
		} else {
			if (i > 0 && meta_klen(m) > 8) /* the first key is never read, owns nothing */
				rc = w->fn(n->e[s].kx, w->arg);
			if (rc == 0)
				rc = node_check(n->e[s].val.child, n->level - 1, n);
			if (rc == 0)
				rc = walk_node(n->e[s].val.child, w);
		}
	}
	return rc;
}

/* The root block, then every node with its key and value blocks, each checked before
 * it is followed (levels fall by one per link, so no cycle; the leaves in key order
 * must form the leaf chain); stops at (and returns) fn's first non-zero. Takes no
 * lock: the contract says no write runs. */
static int bpt_walk(void *index, tips_walk_fn fn, void *arg)
{
	struct bpt_index *t = index;
	if (!fn)
		return TIPS_EINVAL;
	struct walk_state w = { fn, arg, NULL };
	int rc = fn(t->root, arg);
	if (rc == 0)
		rc = walk_node(t->root->root, &w);
	if (rc == 0 && w.prev_leaf && w.prev_leaf->next)
		rc = IDX_CORRUPT(w.prev_leaf, "next %p: expected NULL after the last leaf",
				 (const void *)w.prev_leaf->next);
	return rc;
}

const struct tips_index_ops IDX_SYM(ops) = {
	.name = IDX_NAME,
#ifdef IDX_TIPS
	.concurrency = "TIPS: lock-free cache reads, per-bucket spinlock writes; "
		       "replay on one readers-writer lock; fanout 128",
#else
	.concurrency = "one readers-writer lock (readers share, writers exclusive); fanout 128",
#endif
	.create = bpt_create,
	.open = bpt_open,
	.close = bpt_close,
	.insert = bpt_insert,
	.update = bpt_update,
	.remove = bpt_remove,
	.lookup = bpt_lookup,
	.scan = bpt_scan,
	.walk = bpt_walk,
};
