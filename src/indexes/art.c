/*
 * art.c - "art": an adaptive radix tree (Leis, Kemper, Neumann, "The Adaptive Radix
 * Tree", ICDE'13) synchronised by optimistic lock coupling (Leis, Scheibner, Kemper,
 * Neumann, "The ART of Practical Synchronization", DaMoN'16), written once against the
 * hooks of idx_hooks.h and built as dram-art (volatile original) and tips-art (TIPS
 * plug-in, ATC'21 §3.2.6).
 *
 * Structure. Inner nodes of four sizes: Node4 and Node16 (sorted key bytes and their
 * children), Node48 (a 256-entry byte index into 48 children) and Node256 (256
 * children), grown and shrunk by copying into a fresh node of the next size. Every
 * inner node starts with the same 32-byte header: its version lock, a "value leaf"
 * slot, the first 8 bytes of its compressed path (path compression) and the path's
 * full length. A node at depth d (key bytes consumed above it) with a path of p bytes
 * holds in its value leaf the key of length d + p, if present (so one key may be a
 * prefix of another: the shorter key sits at the node where it ends, and sorts before
 * every key below), and in its children the keys longer than that, by byte d + p.
 * Paths longer than 8 bytes are checked optimistically by readers (the leaf's full key
 * is compared at the end) and exactly by writers (the missing bytes are read from any
 * leaf below the node). The root block holds a Node256 that is never replaced.
 *
 * Leaves (lazy expansion). A child slot holds a tagged pointer (low bit set) to one
 * block {klen, vlen, 8-byte value word, key bytes, other values}: a key lives in the
 * highest slot that tells it from every other key, so a leaf is the only block read
 * below the last inner node, and an 8-byte key is compared in that block with one
 * word compare. An 8-byte value lives in the leaf's value word and is updated in place
 * (IDX_LOG_VALUE of the word, no undo record, then one atomic store); a value of another length is inline
 * after the key and immutable, so any other update builds a new leaf and swaps it into
 * the slot under the node's lock. Readers thus never see a torn value or a value of
 * another length than the one they read.
 *
 * Concurrency (optimistic lock coupling). Each inner node's lock word holds a version
 * (bits 2..63), a locked bit (1) and an obsolete bit (0). Readers never write: they
 * read a node's version (waiting while it is locked), read what they need with acquire
 * loads, and re-read the version; any change restarts the operation from the root. A
 * child pointer is used only after the parent's version is validated, and the parent
 * is validated again after the child's version has been read, so a reader never
 * follows a stale path. Writers traverse the same way, then upgrade the version of
 * every node they modify to locked with a compare-and-swap from the version they read
 * (parent before child; a failed upgrade releases what it holds and restarts). A node
 * replaced by a copy (growth, shrinking, collapse) is unlocked as obsolete and passed
 * to IDX_FREE, which frees it after every read section open at the time has ended; all
 * traversals run inside IDX_READ_ENTER/EXIT, so they may follow a pointer to a node
 * that was replaced meanwhile. A writer only spins (waiting for a locked node) when
 * it holds no lock, and nobody waits for a grace period while holding a node lock.
 *
 * Lock words in PM. In the tips build the lock words live in persistent nodes, so a
 * crash can leave one locked or obsolete. They are only meaningful while the process
 * lives: lock and version stores are never logged (no IDX_LOG range ever covers a lock
 * word, so an undo rollback cannot restore one either) and open(), which the framework
 * calls after the rollback and before any replay, walks the tree and stores 0 into
 * every lock word. A crash thus never leaves a node locked, and a rolled-back node
 * whose word said obsolete reads as live again, as the rolled-back parent expects.
 *
 * Invariant (what makes the tips build crash consistent): every store to memory that
 * existed before the current operation is preceded by IDX_LOG of exactly the bytes it
 * stores, lock words excepted (above). Fresh nodes and leaves are filled before they
 * are published and need no log. Writes: a slot store (insert of a leaf, replacement
 * of a child by a grown/shrunk/new node, out-of-place update, collapse) logs the 8-byte
 * slot; adding or removing a child of a Node4/16 logs the count and key bytes (one
 * range) and the children it shifts; of a Node48 the index byte and the child slot; of
 * a Node256 the slot (Node48/256 keep no count: they count their slots when they need
 * to, on removes, which saves a record per insert); a path split or merge logs the
 * node's path length and bytes (one 12-byte range); an in-place value of the key being
 * updated takes IDX_LOG_VALUE instead (no undo record: recovery replays the update).
 *
 * Deletion. Removing a key from a node other than the root that then holds one entry
 * replaces the node in its parent by that entry (a leaf, or the child node, whose path
 * is extended in place by the node's path and key byte); so every inner node but the
 * root holds at least two entries. A Node16/48/256 whose child count drops to 3/12/37
 * is shrunk to the next smaller size (if that allocation fails the key is removed in
 * place; ENOMEM is never returned by remove).
 *
 * Scan. A depth-first walk in key order from the start key (the value leaf first, then
 * the children by byte: Node4/16 are sorted, Node48 goes through its index) collects
 * up to @count copies into a private buffer, validating each node's version; on a
 * change it restarts from the root after the last key collected, and so it does every
 * 4096 keys in a new read section, so that a long scan never holds off reclamation.
 * A node's children are taken a batch at a time (gather_children(), one version check
 * per batch). Leaves found are prefetched at once and copied 24 at a time, the older
 * half of the 48 pending (key-order neighbours are scattered in memory), always before
 * the read section ends.
 * @fn is called afterwards, outside any read section, so it may call the index.
 *
 * Conversion cost: 13 hook sites - IDX_ALLOC 3 (root, node_new(), leaf_new()), IDX_FREE
 * 4 (insert: the node a growth replaced, or the unused new leaf; update: the replaced
 * leaf or the unused one; remove: the removed leaf, and the node a collapse or shrink
 * replaced), IDX_LOG 6 (slot_set(), through which every pointer store goes, child
 * slots, value-leaf slots and parent slots alike; index_set() of Node48; set_prefix();
 * IDX_LOG_VALUE for the in-place value word; and two IDX_LOG2, two ranges under one
 * fence: the count, keys and children small_rewrite() stores, and the child slot and
 * index byte of a Node48 add). An 8-byte update logs no record (IDX_LOG_VALUE); an
 * insert 1 (a new
 * Node4, a grown node, a Node256 slot) or 2 (a Node4/16 or Node48 child, under one
 * fence). An operation allocates and frees at most 3 blocks
 * (growth: leaf, node, old node; shrinking remove: node, old node, leaf).
 *
 * Known limits. A Node256 (2080 bytes) takes a 2560-byte heap slot. Scans restart (from
 * the last key collected) whenever a node on their path changes, so a scan over a
 * subtree that is written all the time may restart often. Paths longer than 8 bytes
 * cost writers and bounded scans a descent to a leaf to read the missing bytes.
 */
#define _GNU_SOURCE
#define IDX_BASE_NAME "art"
#include "indexes/idx_hooks.h"
#include "indexes/indexes.h"
#include "util/errors_internal.h"
#include "util/kv.h"

#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#define ART_MAGIC 0x3174726173706974ull /* "tipsart1": layout version 1 */
#define ART_PFX 8                       /* path bytes stored in a node */

enum art_type { ART_N4 = 1, ART_N16 = 2, ART_N48 = 3, ART_N256 = 4 };

/* ---- persistent layout (in PM in the tips build) ---------------------------------- */

/*
 * Header of every inner node. Fields that writers change in place are atomic: readers
 * read them optimistically (acquire loads) and validate the version afterwards.
 */
struct art_node {
	_Atomic uint64_t lock;   /* version lock: version << 2 | locked << 1 | obsolete;
	                            never logged, zeroed by open() */
	_Atomic uintptr_t vleaf; /* tagged leaf whose key ends at this node, or 0 */
	_Atomic uint64_t pfx;    /* first min(plen, 8) bytes of the path, in memory order */
	_Atomic uint32_t plen;   /* full path length (bytes skipped by path compression) */
	uint8_t type;            /* enum art_type; set at allocation, never changed */
	uint8_t pad;
	_Atomic uint16_t count;  /* children of a Node4/16 (0 in a Node48/256, which
	                            count their slots: one log record less an insert) */
};

struct art_n4 {
	struct art_node h;
	_Atomic uint32_t keys;        /* byte i (bits 8i..8i+7): key of child[i]; sorted */
	uint32_t pad;
	_Atomic uintptr_t child[4];   /* child[0..count): tagged leaves or nodes */
};

struct art_n16 {
	struct art_node h;
	_Atomic uint64_t keys[2];     /* byte i in keys[i / 8] bits 8(i % 8)..; sorted */
	_Atomic uintptr_t child[16];
};

struct art_n48 {
	struct art_node h;
	_Atomic uint8_t index[256];   /* 0: no child for the byte, else child slot + 1 */
	_Atomic uintptr_t child[48];  /* unordered; 0 marks a free slot */
};

struct art_n256 {
	struct art_node h;
	_Atomic uintptr_t child[256]; /* by key byte; 0: none */
};

/* A key and its value. klen, vlen and the key bytes never change once published. */
struct art_leaf {
	uint32_t klen;         /* key bytes, 1..TIPS_MAX_KEY */
	uint32_t vlen;         /* value bytes, 0..TIPS_MAX_VALUE */
	_Atomic uint64_t v8;   /* the value when vlen == 8 (updated in place), else unused */
	unsigned char key[];   /* klen key bytes; then, when vlen != 8, the value bytes */
};

/* The root object returned by create. Only the tree's contents change afterwards. */
struct art_root {
	uint64_t magic;        /* ART_MAGIC once create has filled the root */
	uint64_t pad;
	struct art_n256 tree;  /* the root node: depth 0, no path, never replaced */
};

/* IDX_LOG ranges rely on these neighbourhoods; the lock word is never inside one. */
_Static_assert(sizeof(struct art_node) == 32, "node header is 32 bytes");
_Static_assert(offsetof(struct art_node, plen) == offsetof(struct art_node, pfx) + 8,
	       "pfx and plen form one 12-byte log range");
_Static_assert(offsetof(struct art_node, count) + 2 == sizeof(struct art_node),
	       "count is followed by the Node4/16 keys");
_Static_assert(offsetof(struct art_n4, keys) == sizeof(struct art_node), "n4 keys");
_Static_assert(offsetof(struct art_n16, keys) == sizeof(struct art_node), "n16 keys");

/* ---- volatile handle (DRAM, rebuilt by every open) ----------------------------------- */

struct art_index {
	struct art_root *root;
	struct art_node *tree; /* &root->tree.h */
};

/* ---- small helpers -------------------------------------------------------------------- */

#define LD(x) atomic_load_explicit(&(x), memory_order_acquire)
#define ST(x, v) atomic_store_explicit(&(x), (v), memory_order_release)

static inline bool is_leaf(uintptr_t c)
{
	return c & 1;
}

static inline struct art_leaf *as_leaf(uintptr_t c)
{
	return (struct art_leaf *)(c - 1);
}

static inline uintptr_t leaf_ref(struct art_leaf *l)
{
	return (uintptr_t)l | 1;
}

static inline struct art_node *as_node(uintptr_t c)
{
	return (struct art_node *)c;
}

static inline uint32_t min_u32(uint32_t a, uint32_t b)
{
	return a < b ? a : b;
}

static inline bool leaf_is(const struct art_leaf *l, const unsigned char *key, uint32_t klen)
{
	if (l->klen != klen)
		return false;
	if (klen == 8)
		return load64(l->key) == load64(key);
	return memcmp(l->key, key, klen) == 0;
}

/* ---- version locks ---------------------------------------------------------------------- */

#define LK_OBSOLETE 1ull
#define LK_LOCKED 2ull

/* The node's version once it is not locked (spins meanwhile); false if obsolete. Only
 * called with no node lock held. */
static inline bool lk_read(struct art_node *n, uint64_t *v)
{
	uint64_t w;
	for (unsigned spin = 0;
	     (w = atomic_load_explicit(&n->lock, memory_order_acquire)) & LK_LOCKED; spin++) {
		if (spin < 128)
			cpu_pause();
		else
			sched_yield(); /* the holder may have been descheduled */
	}
	*v = w;
	return !(w & LK_OBSOLETE);
}

/* True if @n is still at version @v: everything read since lk_read() is consistent. */
static inline bool lk_check(struct art_node *n, uint64_t v)
{
	return atomic_load_explicit(&n->lock, memory_order_acquire) == v;
}

/* Locks @n if it is still at version @v (so unchanged since it was read). */
static inline bool lk_upgrade(struct art_node *n, uint64_t v)
{
	return atomic_compare_exchange_strong_explicit(&n->lock, &v, v + LK_LOCKED,
						       memory_order_acquire, memory_order_relaxed);
}

/* Locks @n unless it is locked or obsolete (no waiting: the caller holds locks). */
static inline bool lk_try(struct art_node *n)
{
	uint64_t v = atomic_load_explicit(&n->lock, memory_order_acquire);
	return !(v & (LK_LOCKED | LK_OBSOLETE)) && lk_upgrade(n, v);
}

/* Unlocks with a new version: version + 1, locked bit clear. */
static inline void lk_unlock(struct art_node *n)
{
	atomic_fetch_add_explicit(&n->lock, LK_LOCKED, memory_order_release);
}

/* Unlocks a node that has been unlinked: new version, obsolete bit set. */
static inline void lk_unlock_obsolete(struct art_node *n)
{
	atomic_fetch_add_explicit(&n->lock, LK_LOCKED + LK_OBSOLETE, memory_order_release);
}

/* ---- nodes ------------------------------------------------------------------------------ */

static const uint16_t node_cap[] = { 0, 4, 16, 48, 256 };

static size_t node_size(unsigned type)
{
	switch (type) {
	case ART_N4: return sizeof(struct art_n4);
	case ART_N16: return sizeof(struct art_n16);
	case ART_N48: return sizeof(struct art_n48);
	default: return sizeof(struct art_n256);
	}
}

/* A fresh, empty node of @type (zeroed: unused slots read 0). */
static struct art_node *node_new(unsigned type)
{
	struct art_node *n = IDX_ALLOC(node_size(type));
	if (!n)
		return NULL;
	memset(n, 0, node_size(type));
	n->type = (uint8_t)type;
	return n;
}

/* A fresh leaf for @key and @val. */
static struct art_leaf *leaf_new(const void *key, uint32_t klen, const void *val, uint32_t vlen)
{
	size_t size = sizeof(struct art_leaf) + klen + (vlen == 8 ? 0 : vlen);
	struct art_leaf *l = IDX_ALLOC(size);
	if (!l)
		return NULL;
	l->klen = klen;
	l->vlen = vlen;
	memcpy(l->key, key, klen);
	if (vlen == 8) {
		atomic_init(&l->v8, load64(val));
	} else {
		atomic_init(&l->v8, 0);
		if (vlen)
			memcpy(l->key + klen, val, vlen);
	}
	return l;
}

/* Copies the value of @l to @val (at most @cap bytes); returns its length. */
static uint32_t leaf_value(const struct art_leaf *l, void *val, size_t cap)
{
	uint32_t vlen = l->vlen;
	if (vlen == 8) {
		uint64_t w = atomic_load_explicit(&((struct art_leaf *)l)->v8, memory_order_acquire);
		if (cap)
			memcpy(val, &w, cap < 8 ? cap : 8);
	} else if (cap && vlen) {
		memcpy(val, l->key + l->klen, vlen < cap ? vlen : cap);
	}
	return vlen;
}

/* Key bytes of a Node4/16, unpacked (count entries meaningful). */
static unsigned small_keys(struct art_node *n, uint8_t out[16])
{
	unsigned cnt = LD(n->count);
	if (n->type == ART_N4) {
		uint32_t w = LD(((struct art_n4 *)n)->keys);
		for (unsigned i = 0; i < 4; i++)
			out[i] = (uint8_t)(w >> (8 * i));
		return cnt < 4 ? cnt : 4;
	}
	struct art_n16 *p = (struct art_n16 *)n;
	uint64_t w0 = LD(p->keys[0]), w1 = LD(p->keys[1]);
	for (unsigned i = 0; i < 8; i++) {
		out[i] = (uint8_t)(w0 >> (8 * i));
		out[8 + i] = (uint8_t)(w1 >> (8 * i));
	}
	return cnt < 16 ? cnt : 16;
}

static void small_keys_store(struct art_node *n, const uint8_t in[16])
{
	if (n->type == ART_N4) {
		uint32_t w = 0;
		for (unsigned i = 0; i < 4; i++)
			w |= (uint32_t)in[i] << (8 * i);
		ST(((struct art_n4 *)n)->keys, w);
		return;
	}
	struct art_n16 *p = (struct art_n16 *)n;
	uint64_t w0 = 0, w1 = 0;
	for (unsigned i = 0; i < 8; i++) {
		w0 |= (uint64_t)in[i] << (8 * i);
		w1 |= (uint64_t)in[8 + i] << (8 * i);
	}
	ST(p->keys[0], w0);
	ST(p->keys[1], w1);
}

static _Atomic uintptr_t *small_children(struct art_node *n)
{
	return n->type == ART_N4 ? ((struct art_n4 *)n)->child : ((struct art_n16 *)n)->child;
}

/* The child of @n for byte @c, or 0. Optimistic: validate @n's version afterwards. */
static inline uintptr_t find_child(struct art_node *n, uint8_t c)
{
	switch (n->type) {
	case ART_N4: {
		struct art_n4 *p = (struct art_n4 *)n;
		uint32_t w = LD(p->keys);
		unsigned cnt = LD(n->count);
		for (unsigned i = 0; i < cnt && i < 4; i++)
			if ((uint8_t)(w >> (8 * i)) == c)
				return LD(p->child[i]);
		return 0;
	}
	case ART_N16: {
		struct art_n16 *p = (struct art_n16 *)n;
		uint64_t w0 = LD(p->keys[0]), w1 = LD(p->keys[1]);
		unsigned cnt = LD(n->count);
		if (cnt > 16)
			cnt = 16;
#if defined(__SSE2__)
		__m128i keys = _mm_set_epi64x((long long)w1, (long long)w0);
		__m128i eq = _mm_cmpeq_epi8(keys, _mm_set1_epi8((char)c));
		unsigned mask = (unsigned)_mm_movemask_epi8(eq) & ((1u << cnt) - 1);
		return mask ? LD(p->child[__builtin_ctz(mask)]) : 0;
#else
		for (unsigned i = 0; i < cnt; i++)
			if ((uint8_t)((i < 8 ? w0 : w1) >> (8 * (i & 7))) == c)
				return LD(p->child[i]);
		return 0;
#endif
	}
	case ART_N48: {
		struct art_n48 *p = (struct art_n48 *)n;
		unsigned i = LD(p->index[c]);
		return i && i <= 48 ? LD(p->child[i - 1]) : 0;
	}
	default:
		return LD(((struct art_n256 *)n)->child[c]);
	}
}

/* The first child of @n with key byte >= @from (0..255), its byte in *@byte; 0 if none.
 * Optimistic like find_child(). */
static uintptr_t next_child(struct art_node *n, unsigned from, unsigned *byte)
{
	switch (n->type) {
	case ART_N4:
	case ART_N16: {
		uint8_t keys[16];
		unsigned cnt = small_keys(n, keys);
		_Atomic uintptr_t *child = small_children(n);
		for (unsigned i = 0; i < cnt; i++) {
			if (keys[i] >= from) {
				uintptr_t c = LD(child[i]);
				if (c) {
					*byte = keys[i];
					return c;
				}
			}
		}
		return 0;
	}
	case ART_N48: {
		struct art_n48 *p = (struct art_n48 *)n;
		for (unsigned b = from; b < 256; b++) {
			unsigned i = LD(p->index[b]);
			if (i && i <= 48) {
				uintptr_t c = LD(p->child[i - 1]);
				if (c) {
					*byte = b;
					return c;
				}
			}
		}
		return 0;
	}
	default: {
		struct art_n256 *p = (struct art_n256 *)n;
		for (unsigned b = from; b < 256; b++) {
			uintptr_t c = LD(p->child[b]);
			if (c) {
				*byte = b;
				return c;
			}
		}
		return 0;
	}
	}
}

/* Children a scan takes from a node at once (one version check for all of them). */
#define SCAN_GATHER 16u

/* The 8 index bytes of a Node48 from byte @b (a multiple of 8) as one word, byte b + i
 * in bits 8i..8i+7. Optimistic like find_child(). */
static inline uint64_t n48_index_word(struct art_n48 *p, unsigned b)
{
#if defined(__SANITIZE_THREAD__)
	uint64_t w = 0; /* byte by byte: the writers' stores are byte-wide atomics */
	for (unsigned i = 0; i < 8; i++)
		w |= (uint64_t)LD(p->index[b + i]) << (8 * i);
	return w;
#else
	return __atomic_load_n((const uint64_t *)(const void *)&p->index[b], __ATOMIC_ACQUIRE);
#endif
}

/*
 * The first children of @n (up to SCAN_GATHER) with key byte >= @from, in key order,
 * up to the first inner node (which the scan enters before it needs the next ones):
 * their bytes in @bytes, their tagged pointers in @kids. Returns how many; *@more is
 * true if children after the last one returned may exist. One pass over the node per
 * SCAN_GATHER children instead of one next_child() call per child: Node4/16 find the
 * first key >= @from with one SSE2 compare, a Node48 reads its index 8 bytes at a
 * time. Optimistic like find_child(): validate @n's version before using any.
 */
static unsigned gather_children(struct art_node *n, unsigned from, uint8_t *bytes,
				uintptr_t *kids, bool *more)
{
	unsigned k = 0;
	*more = false;
	switch (n->type) {
	case ART_N4:
	case ART_N16: {
		unsigned cnt = LD(n->count);
		uint64_t w0, w1 = 0;
		if (n->type == ART_N4) {
			w0 = LD(((struct art_n4 *)n)->keys);
			cnt = cnt < 4 ? cnt : 4;
		} else {
			w0 = LD(((struct art_n16 *)n)->keys[0]);
			w1 = LD(((struct art_n16 *)n)->keys[1]);
			cnt = cnt < 16 ? cnt : 16;
		}
		_Atomic uintptr_t *child = small_children(n);
#if defined(__SSE2__)
		__m128i keys = _mm_set_epi64x((long long)w1, (long long)w0);
		__m128i ge = _mm_cmpeq_epi8(_mm_max_epu8(keys, _mm_set1_epi8((char)from)), keys);
		unsigned mask = (unsigned)_mm_movemask_epi8(ge) & ((1u << cnt) - 1);
#else
		unsigned mask = 0;
		for (unsigned i = 0; i < cnt; i++)
			if (((i < 8 ? w0 : w1) >> (8 * (i & 7)) & 0xff) >= from)
				mask |= 1u << i;
#endif
		for (; mask; mask &= mask - 1) { /* at most 16 = SCAN_GATHER */
			unsigned i = (unsigned)__builtin_ctz(mask);
			uintptr_t c = LD(child[i]);
			if (!c)
				continue;
			bytes[k] = (uint8_t)((i < 8 ? w0 : w1) >> (8 * (i & 7)));
			kids[k++] = c;
			if (!is_leaf(c)) {
				*more = (mask & (mask - 1)) != 0;
				return k;
			}
		}
		return k;
	}
	case ART_N48: {
		struct art_n48 *p = (struct art_n48 *)n;
		for (unsigned b = from & ~7u; b < 256; b += 8) {
			uint64_t w = n48_index_word(p, b);
			/* High bit of each nonzero byte. */
			uint64_t nz = (((w & 0x7f7f7f7f7f7f7f7full) + 0x7f7f7f7f7f7f7f7full) | w) &
				      0x8080808080808080ull;
			if (b < from)
				nz &= ~0ull << (8 * (from - b));
			for (; nz; nz &= nz - 1) {
				unsigned j = (unsigned)__builtin_ctzll(nz) >> 3;
				unsigned i = (unsigned)(w >> (8 * j)) & 0xff;
				if (i > 48)
					continue;
				uintptr_t c = LD(p->child[i - 1]);
				if (!c)
					continue;
				if (k == SCAN_GATHER) {
					*more = true;
					return k;
				}
				bytes[k] = (uint8_t)(b + j);
				kids[k++] = c;
				if (!is_leaf(c)) {
					*more = true;
					return k;
				}
			}
		}
		return k;
	}
	default: {
		struct art_n256 *p = (struct art_n256 *)n;
		for (unsigned b = from; b < 256; b++) {
			uintptr_t c = LD(p->child[b]);
			if (!c)
				continue;
			if (k == SCAN_GATHER) {
				*more = true;
				return k;
			}
			bytes[k] = (uint8_t)b;
			kids[k++] = c;
			if (!is_leaf(c)) {
				*more = true;
				return k;
			}
		}
		return k;
	}
	}
}

/* The slot of @n that holds the child for byte @c (which must exist); @n locked. */
static _Atomic uintptr_t *child_slot(struct art_node *n, uint8_t c)
{
	switch (n->type) {
	case ART_N4:
	case ART_N16: {
		uint8_t keys[16];
		unsigned cnt = small_keys(n, keys);
		for (unsigned i = 0; i < cnt; i++)
			if (keys[i] == c)
				return &small_children(n)[i];
		return NULL;
	}
	case ART_N48: {
		struct art_n48 *p = (struct art_n48 *)n;
		unsigned i = LD(p->index[c]);
		return i && i <= 48 ? &p->child[i - 1] : NULL; /* art_log_ahead: no lock */
	}
	default:
		return &((struct art_n256 *)n)->child[c];
	}
}

/* How many children @n has. Optimistic like find_child(). */
static unsigned node_count(struct art_node *n)
{
	unsigned cnt = 0;
	switch (n->type) {
	case ART_N4:
	case ART_N16:
		return LD(n->count);
	case ART_N48:
		for (unsigned s = 0; s < 48; s++)
			cnt += LD(((struct art_n48 *)n)->child[s]) != 0;
		return cnt;
	default:
		for (unsigned b = 0; b < 256; b++)
			cnt += LD(((struct art_n256 *)n)->child[b]) != 0;
		return cnt;
	}
}

/* True if @n has no room for another child (a Node256 always has). */
static bool node_full(struct art_node *n)
{
	return n->type != ART_N256 && node_count(n) >= node_cap[n->type];
}

/*
 * The stores of the tree to nodes that may be published. Each logs exactly the bytes
 * it stores first (IDX_LOG), unless @log is false: the node is fresh (allocated by
 * this operation, not yet published), so there is nothing to undo.
 */

/* A child slot, a value-leaf slot or a parent's slot: every pointer store of the tree. */
static inline void slot_set(_Atomic uintptr_t *slot, uintptr_t to, bool log)
{
	if (log)
		IDX_LOG(slot, sizeof(*slot));
	ST(*slot, to);
}

static inline void index_set(struct art_n48 *p, uint8_t c, unsigned slot1, bool log)
{
	if (log)
		IDX_LOG(&p->index[c], sizeof(p->index[c]));
	ST(p->index[c], (uint8_t)slot1);
}

/* @n's path: @len bytes from @p (the first 8 are stored): one 12-byte range. */
static void set_prefix(struct art_node *n, const unsigned char *p, uint32_t len, bool log)
{
	uint64_t w = 0;
	memcpy(&w, p, len < ART_PFX ? len : ART_PFX);
	if (log)
		IDX_LOG(&n->pfx, sizeof(n->pfx) + sizeof(n->plen));
	ST(n->pfx, w);
	ST(n->plen, len);
}

/* The two ranges small_rewrite() logs (and art_log_ahead() names ahead). */
static void small_ranges(struct art_node *n, unsigned pos, unsigned end, void *addr[2],
			 size_t size[2])
{
	addr[0] = (void *)&n->count;
	size[0] = sizeof(n->count) + (n->type == ART_N4 ? 4 : 16);
	addr[1] = (void *)&small_children(n)[pos];
	size[1] = (end - pos) * sizeof(uintptr_t);
}

/*
 * A Node4/16 rewritten from child position @pos: the count and the key bytes (one
 * range, they are neighbours) and children [pos, @end) change; @keys are the new key
 * bytes, the children are shifted by the caller after this call.
 */
static void small_rewrite(struct art_node *n, unsigned pos, unsigned end,
			  const uint8_t keys[16], unsigned cnt, bool log)
{
	if (log) { /* both before either store: one fence */
		void *addr[2];
		size_t size[2];
		small_ranges(n, pos, end, addr, size);
		IDX_LOG2(addr[0], size[0], addr[1], size[1]);
	}
	small_keys_store(n, keys);
	ST(n->count, (uint16_t)cnt);
}

/* Where key byte @c goes among the @cnt sorted key bytes of a Node4/16. */
static unsigned small_pos(const uint8_t keys[16], unsigned cnt, uint8_t c)
{
	unsigned pos = 0;
	while (pos < cnt && keys[pos] < c)
		pos++;
	return pos;
}

/* A Node48's first free child slot, 48 if none. */
static unsigned n48_free_slot(struct art_n48 *p)
{
	unsigned s = 0;
	while (s < 48 && LD(p->child[s]))
		s++;
	return s;
}

/* The two ranges a Node48 add of byte @c into slot @s logs (and art_log_ahead names). */
static void n48_add_ranges(struct art_n48 *p, unsigned s, uint8_t c, void *addr[2],
			   size_t size[2])
{
	addr[0] = (void *)&p->child[s];
	size[0] = sizeof(p->child[s]);
	addr[1] = (void *)&p->index[c];
	size[1] = sizeof(p->index[c]);
}

/*
 * Adds child @c -> @child to @n, which has room and no child for @c. @n is locked by
 * the caller, or fresh (@log false).
 */
static void node_add(struct art_node *n, uint8_t c, uintptr_t child, bool log)
{
	unsigned cnt = LD(n->count);
	switch (n->type) {
	case ART_N4:
	case ART_N16: {
		uint8_t keys[16];
		TIPS_INVARIANT(cnt < node_cap[n->type] && cnt < 16, "art: node_add on a full node");
		small_keys(n, keys);
		_Atomic uintptr_t *ch = small_children(n);
		unsigned pos = small_pos(keys, cnt, c);
		memmove(keys + pos + 1, keys + pos, cnt - pos);
		keys[pos] = c;
		small_rewrite(n, pos, cnt + 1, keys, cnt + 1, log);
		for (unsigned i = cnt; i > pos; i--)
			ST(ch[i], LD(ch[i - 1]));
		ST(ch[pos], child);
		return;
	}
	case ART_N48: {
		struct art_n48 *p = (struct art_n48 *)n;
		unsigned s = n48_free_slot(p);
		if (log) { /* both before either store: one fence */
			void *addr[2];
			size_t size[2];
			n48_add_ranges(p, s, c, addr, size);
			IDX_LOG2(addr[0], size[0], addr[1], size[1]);
		}
		slot_set(&p->child[s], child, false);
		index_set(p, c, s + 1, false);
		return;
	}
	default:
		slot_set(&((struct art_n256 *)n)->child[c], child, log);
		return;
	}
}

/* Removes the child for byte @c (which must exist) from @n, locked by the caller. */
static void node_remove(struct art_node *n, uint8_t c)
{
	unsigned cnt = LD(n->count);
	switch (n->type) {
	case ART_N4:
	case ART_N16: {
		uint8_t keys[16];
		small_keys(n, keys);
		_Atomic uintptr_t *ch = small_children(n);
		unsigned pos = 0;
		while (pos < cnt && keys[pos] != c)
			pos++;
		if (pos == cnt)
			return;
		memmove(keys + pos, keys + pos + 1, cnt - pos - 1);
		keys[cnt - 1] = 0;
		small_rewrite(n, pos, cnt, keys, cnt - 1, true);
		for (unsigned i = pos; i + 1 < cnt; i++)
			ST(ch[i], LD(ch[i + 1]));
		ST(ch[cnt - 1], 0); /* no stale pointer past the count */
		return;
	}
	case ART_N48: {
		struct art_n48 *p = (struct art_n48 *)n;
		unsigned i = LD(p->index[c]);
		if (!i)
			return;
		index_set(p, c, 0, true);
		slot_set(&p->child[i - 1], 0, true);
		return;
	}
	default:
		slot_set(&((struct art_n256 *)n)->child[c], 0, true);
		return;
	}
}

/* A fresh copy of @src (locked by the caller) as a node of @type, without the child
 * for byte @skip (-1: none). NULL when out of memory. */
static struct art_node *node_copy(struct art_node *src, unsigned type, int skip)
{
	struct art_node *d = node_new(type);
	if (!d)
		return NULL;
	atomic_init(&d->vleaf, LD(src->vleaf));
	atomic_init(&d->pfx, LD(src->pfx));
	atomic_init(&d->plen, LD(src->plen));
	unsigned b = 0;
	uintptr_t c;
	for (unsigned from = 0; from < 256 && (c = next_child(src, from, &b)); from = b + 1)
		if ((int)b != skip)
			node_add(d, (uint8_t)b, c, false);
	return d;
}

/*
 * Any leaf below @n (its value leaf, or the first child's, recursively): every key
 * below @n carries @n's whole path, so this gives the path bytes a node does not
 * store. Optimistic: NULL when a node changed (the caller restarts), and the caller
 * validates @n's own version afterwards. Called with no node lock held.
 */
static struct art_leaf *any_leaf(struct art_node *n)
{
	for (;;) {
		uint64_t v;
		unsigned b;
		if (!lk_read(n, &v))
			return NULL;
		uintptr_t c = LD(n->vleaf);
		if (!c)
			c = next_child(n, 0, &b);
		if (!lk_check(n, v) || !c)
			return NULL;
		if (is_leaf(c))
			return as_leaf(c);
		n = as_node(c);
	}
}

/*
 * Copies the first @want (<= plen) path bytes of @n, a node at depth @depth, to @out:
 * from the node itself, or past the 8 stored bytes from a leaf below it. False: a
 * concurrent change was seen (restart). The caller validates @n's version afterwards.
 */
static bool node_prefix(struct art_node *n, uint32_t depth, uint32_t want, unsigned char *out)
{
	if (want <= ART_PFX) {
		uint64_t w = LD(n->pfx);
		memcpy(out, &w, want);
		return true;
	}
	struct art_leaf *l = any_leaf(n);
	if (!l || l->klen < depth + want)
		return false;
	memcpy(out, l->key + depth, want);
	return true;
}

/* ---- ops ------------------------------------------------------------------------------ */

static int art_create(const struct tips_index_config *cfg, void **rootp)
{
	if (!cfg || !rootp)
		return TIPS_EINVAL;
	struct art_root *root = IDX_ALLOC(sizeof(*root));
	if (!root)
		return TIPS_ENOMEM;
	/* Fresh block, not zeroed by the allocator; no logging needed. */
	memset(root, 0, sizeof(*root));
	root->tree.h.type = ART_N256;
	root->magic = ART_MAGIC;
	*rootp = root;
	return 0;
}

/* Zeroes the lock word of @n and of every node below (see "Lock words in PM"); checks
 * node types on the way. */
/* ---- checks of what open and walk follow ------------------------------------------------ */

/* Levels below the root: each consumes at least one key byte. */
#define ART_MAX_DEPTH (TIPS_MAX_KEY + 1u)

/* A leaf, checked before it is followed: a block holding its header, key (1..
 * TIPS_MAX_KEY bytes) and, unless 8 bytes long, its value. */
static int leaf_check(const struct art_leaf *l, const void *from)
{
	if (!IDX_CHECK_BLOCK(l, sizeof(*l)))
		return IDX_CORRUPT(from, "leaf link %p: expected an allocated block of >= %zu "
				   "bytes", (const void *)l, sizeof(*l));
	size_t bytes = sizeof(*l) + l->klen + (l->vlen != 8 ? l->vlen : 0);
	if (l->klen == 0 || l->klen > TIPS_MAX_KEY || l->vlen > TIPS_MAX_VALUE ||
	    !IDX_CHECK_BLOCK(l, bytes))
		return IDX_CORRUPT(l, "klen %u, vlen %u: expected 1..%u key bytes and a leaf "
				   "that fits its block", l->klen, l->vlen, TIPS_MAX_KEY);
	return 0;
}

/* An inner node, checked before it is followed: an allocated block of its type's size,
 * a valid type, a count within capacity, a Node48's index naming its 48 slots. */
static int node_check(const struct art_node *n, const void *from)
{
	if (!IDX_CHECK_BLOCK(n, sizeof(*n)))
		return IDX_CORRUPT(from, "node link %p: expected an allocated block of >= %zu "
				   "bytes", (const void *)n, sizeof(*n));
	if (n->type < ART_N4 || n->type > ART_N256 || !IDX_CHECK_BLOCK(n, node_size(n->type)) ||
	    LD(n->count) > node_cap[n->type])
		return IDX_CORRUPT(n, "type %u, count %u: expected a type of 1..4, a block of its "
				   "size and a count within its capacity", n->type,
				   (unsigned)LD(n->count));
	if (n->type == ART_N48) {
		const struct art_n48 *p = (const struct art_n48 *)n;
		for (unsigned b = 0; b < 256; b++)
			if (LD(p->index[b]) > 48)
				return IDX_CORRUPT(n, "index[%u] = %u: expected 0..48", b,
						   (unsigned)LD(p->index[b]));
	}
	return 0;
}

/* A tagged child word @c of @from: a leaf or a node, checked. */
static int child_check(uintptr_t c, const void *from)
{
	return is_leaf(c) ? leaf_check(as_leaf(c), from) : node_check(as_node(c), from);
}

/* Node addresses met so far (DRAM, open addressing): open reaches each node once. */
struct seen {
	uintptr_t *v;
	size_t cap, n;
};

/* 1 if @p was added, 0 if it was there, TIPS_ENOMEM. */
static int seen_add(struct seen *s, const void *p)
{
	if (2 * (s->n + 1) > s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 1024;
		uintptr_t *v = calloc(cap, sizeof(*v));
		if (!v)
			return TIPS_ENOMEM;
		for (size_t i = 0; i < s->cap; i++)
			for (size_t j = s->v[i] ? mix64(s->v[i]) & (cap - 1) : cap; j < cap;
			     j = (j + 1) & (cap - 1))
				if (!v[j]) {
					v[j] = s->v[i];
					break;
				}
		free(s->v);
		s->v = v;
		s->cap = cap;
	}
	for (size_t j = mix64((uintptr_t)p) & (s->cap - 1);; j = (j + 1) & (s->cap - 1)) {
		if (s->v[j] == (uintptr_t)p)
			return 0;
		if (!s->v[j]) {
			s->v[j] = (uintptr_t)p;
			s->n++;
			return 1;
		}
	}
}

/* Zeroes the lock word of @n (checked) and of every node below, checking each leaf and
 * node before following it; a node reached twice, or deeper than a key can reach, is
 * reported. */
static int reset_locks(struct art_node *n, unsigned depth, struct seen *seen)
{
	if (depth > ART_MAX_DEPTH)
		return IDX_CORRUPT(n, "depth %u: expected at most %u levels", depth, ART_MAX_DEPTH);
	atomic_store_explicit(&n->lock, 0, memory_order_relaxed);
	uintptr_t vl = LD(n->vleaf);
	int rc = vl ? leaf_check(as_leaf(vl), n) : 0;
	unsigned b = 0;
	uintptr_t c;
	for (unsigned from = 0; rc == 0 && from < 256 && (c = next_child(n, from, &b));
	     from = b + 1) {
		if ((rc = child_check(c, n)) || is_leaf(c))
			continue;
		rc = seen_add(seen, as_node(c));
		if (rc == 0)
			rc = IDX_CORRUPT(as_node(c), "node reached twice: expected a tree");
		else if (rc == 1)
			rc = reset_locks(as_node(c), depth + 1, seen);
	}
	return rc;
}

static int art_open(void *rootv, void **indexp)
{
	struct art_root *root = rootv;
	if (!root || !indexp)
		return TIPS_EINVAL;
	if (!IDX_CHECK_BLOCK(root, sizeof(*root)) || root->magic != ART_MAGIC ||
	    root->tree.h.type != ART_N256)
		return IDX_CORRUPT(root, "root: expected an allocated block of >= %zu bytes with "
				   "magic 0x%llx holding a Node256", sizeof(*root),
				   (unsigned long long)ART_MAGIC);
	struct art_index *t = malloc(sizeof(*t));
	if (!t)
		return TIPS_ENOMEM;
	t->root = root;
	t->tree = &root->tree.h;
	struct seen seen = { 0 };
	int rc = reset_locks(t->tree, 0, &seen);
	free(seen.v);
	if (rc) {
		free(t);
		return rc;
	}
	*indexp = t;
	return 0;
}

static void art_close(void *index)
{
	free(index);
	IDX_FREE_BARRIER();
}

static int art_insert(void *index, const void *key, size_t klen_, const void *val, size_t vlen)
{
	struct art_index *t = index;
	int rc = check_kv(key, klen_, val, vlen);
	if (rc)
		return rc;
	const unsigned char *k = key;
	uint32_t klen = (uint32_t)klen_;
	struct art_leaf *nl = NULL; /* the new leaf, made once it is needed */
	void *dead = NULL;          /* the node a growth replaced */
	unsigned char pre[TIPS_MAX_KEY];
	struct art_node *n, *parent;
	uint64_t v, pv;
	uint32_t depth;
	uint8_t pbyte;

	IDX_READ_ENTER();
restart:
	n = t->tree;
	parent = NULL;
	pv = 0;
	pbyte = 0;
	depth = 0;
	if (!lk_read(n, &v))
		goto restart;
	for (;;) {
		uint32_t plen = LD(n->plen);
		if (plen) {
			/* Writers compare the whole path: a mismatch splits it here. */
			if (plen > TIPS_MAX_KEY || !node_prefix(n, depth, plen, pre) ||
			    !lk_check(n, v))
				goto restart;
			uint32_t m = 0, lim = min_u32(plen, klen - depth);
			while (m < lim && pre[m] == k[depth + m])
				m++;
			if (m < plen) {
				/* Split: a new Node4 takes the first m path bytes and holds the
				 * key (here or as a child) and @n under byte pre[m]; @n keeps
				 * the path after that byte. */
				if (!nl && !(nl = leaf_new(k, klen, val, (uint32_t)vlen))) {
					rc = TIPS_ENOMEM;
					goto out;
				}
				if (!lk_upgrade(parent, pv))
					goto restart;
				if (!lk_upgrade(n, v)) {
					lk_unlock(parent);
					goto restart;
				}
				struct art_node *n4 = node_new(ART_N4);
				if (!n4) {
					lk_unlock(n);
					lk_unlock(parent);
					rc = TIPS_ENOMEM;
					goto out;
				}
				set_prefix(n4, pre, m, false);
				if (depth + m == klen)
					atomic_init(&n4->vleaf, leaf_ref(nl));
				else
					node_add(n4, k[depth + m], leaf_ref(nl), false);
				node_add(n4, pre[m], (uintptr_t)n, false);
				set_prefix(n, pre + m + 1, plen - m - 1, true);
				slot_set(child_slot(parent, pbyte), (uintptr_t)n4, true);
				lk_unlock(n);
				lk_unlock(parent);
				rc = 0;
				goto out;
			}
			depth += plen;
		}

		if (depth == klen) { /* the key ends here: the value leaf */
			uintptr_t vl = LD(n->vleaf);
			if (!lk_check(n, v))
				goto restart;
			if (vl) {
				rc = TIPS_EKEYEXISTS;
				goto out;
			}
			if (!nl && !(nl = leaf_new(k, klen, val, (uint32_t)vlen))) {
				rc = TIPS_ENOMEM;
				goto out;
			}
			if (!lk_upgrade(n, v))
				goto restart;
			slot_set(&n->vleaf, leaf_ref(nl), true);
			lk_unlock(n);
			rc = 0;
			goto out;
		}

		uint8_t c = k[depth];
		uintptr_t ch = find_child(n, c);
		bool full = !ch && node_full(n); /* read before the check: consistent */
		if (!lk_check(n, v))
			goto restart;

		if (!ch) { /* a new child of n */
			if (!nl && !(nl = leaf_new(k, klen, val, (uint32_t)vlen))) {
				rc = TIPS_ENOMEM;
				goto out;
			}
			if (!full) {
				if (!lk_upgrade(n, v))
					goto restart;
				node_add(n, c, leaf_ref(nl), true);
				lk_unlock(n);
				rc = 0;
				goto out;
			}
			/* Full (never the root, a Node256): grow into a fresh copy. */
			if (!lk_upgrade(parent, pv))
				goto restart;
			if (!lk_upgrade(n, v)) {
				lk_unlock(parent);
				goto restart;
			}
			struct art_node *g = node_copy(n, n->type + 1u, -1);
			if (!g) {
				lk_unlock(n);
				lk_unlock(parent);
				rc = TIPS_ENOMEM;
				goto out;
			}
			node_add(g, c, leaf_ref(nl), false);
			slot_set(child_slot(parent, pbyte), (uintptr_t)g, true);
			lk_unlock_obsolete(n);
			lk_unlock(parent);
			dead = n;
			rc = 0;
			goto out;
		}

		if (is_leaf(ch)) { /* lazy expansion: a Node4 tells the two keys apart */
			struct art_leaf *l = as_leaf(ch);
			if (leaf_is(l, k, klen)) {
				rc = TIPS_EKEYEXISTS;
				goto out;
			}
			if (!nl && !(nl = leaf_new(k, klen, val, (uint32_t)vlen))) {
				rc = TIPS_ENOMEM;
				goto out;
			}
			if (!lk_upgrade(n, v))
				goto restart;
			struct art_node *n4 = node_new(ART_N4);
			if (!n4) {
				lk_unlock(n);
				rc = TIPS_ENOMEM;
				goto out;
			}
			uint32_t d = depth + 1, m = 0, lim = min_u32(klen, l->klen) - d;
			while (m < lim && k[d + m] == l->key[d + m])
				m++;
			uint32_t e = d + m;
			set_prefix(n4, k + d, m, false);
			if (klen == e)
				atomic_init(&n4->vleaf, leaf_ref(nl));
			else
				node_add(n4, k[e], leaf_ref(nl), false);
			if (l->klen == e)
				atomic_init(&n4->vleaf, ch);
			else
				node_add(n4, l->key[e], ch, false);
			slot_set(child_slot(n, c), (uintptr_t)n4, true);
			lk_unlock(n);
			rc = 0;
			goto out;
		}

		parent = n;
		pv = v;
		pbyte = c;
		n = as_node(ch);
		depth++;
		if (!lk_read(n, &v) || !lk_check(parent, pv))
			goto restart;
	}
out:
	IDX_READ_EXIT();
	/* The node a growth replaced, or on failure the new leaf (NULL: nothing). */
	IDX_FREE(rc ? (void *)nl : dead);
	return rc;
}

/*
 * Where a key's leaf sits, found by an optimistic descent (paths past the 8 stored
 * bytes are not compared: the leaf's full key is). On success *@l is the key's leaf in
 * node *@n (version *@v): its value leaf if *@at_vleaf, else the child for *@c; *@parent
 * (version *@pv) holds *@n under byte *@pbyte. Returns 1 found, 0 absent, -1 restart.
 * Run inside a read section. With @track false (lookups) only *@l is filled: the
 * function is inlined into art_lookup() with the constant, so the descent keeps its
 * state in registers and stores nothing per level.
 */
struct art_pos {
	struct art_node *n, *parent;
	uint64_t v, pv;
	struct art_leaf *l;
	uint8_t c, pbyte;
	bool at_vleaf;
};

static inline __attribute__((always_inline)) int
locate(struct art_index *t, const unsigned char *k, uint32_t klen, struct art_pos *p, bool track)
{
	struct art_node *parent = NULL;
	uint64_t pv = 0;
	struct art_node *n = t->tree;
	uint32_t depth = 0;
	uint64_t v;
	if (track) {
		p->parent = NULL;
		p->pv = 0;
		p->pbyte = 0;
	}
	if (!lk_read(n, &v))
		return -1;
	for (;;) {
		uint32_t plen = LD(n->plen);
		if (plen) {
			uint64_t w = LD(n->pfx);
			if (plen > klen - depth || memcmp(&w, k + depth, min_u32(plen, ART_PFX)))
				return lk_check(n, v) ? 0 : -1;
			depth += plen;
		}
		uintptr_t ch;
		bool at_vleaf = depth == klen;
		if (at_vleaf)
			ch = LD(n->vleaf);
		else
			ch = find_child(n, k[depth]);
		if (!lk_check(n, v))
			return -1;
		if (!ch)
			return 0;
		if (is_leaf(ch)) {
			struct art_leaf *l = as_leaf(ch);
			if (!leaf_is(l, k, klen))
				return 0;
			p->l = l;
			if (track) {
				p->n = n;
				p->v = v;
				p->at_vleaf = at_vleaf;
				p->c = at_vleaf ? 0 : k[depth];
			}
			return 1;
		}
		if (track) {
			p->parent = n;
			p->pv = v;
			p->pbyte = k[depth];
		}
		parent = n;
		pv = v;
		n = as_node(ch);
		depth++;
		if (!lk_read(n, &v) || !lk_check(parent, pv))
			return -1;
	}
}

static int art_lookup(void *index, const void *key, size_t klen, void *val, size_t cap,
		      size_t *vlen)
{
	struct art_index *t = index;
	if (!key || klen == 0 || (cap && !val))
		return TIPS_EINVAL;
	if (klen > TIPS_MAX_KEY)
		return TIPS_ENOTFOUND;
	struct art_pos p;
	int r;
	IDX_READ_ENTER();
	while ((r = locate(t, key, (uint32_t)klen, &p, false)) < 0)
		;
	int rc = TIPS_ENOTFOUND;
	if (r) {
		uint32_t n;
		if (__builtin_expect(p.l->vlen == 8 && cap >= 8, 1)) {
			/* the common case, without leaf_value()'s copy of a variable length */
			uint64_t w = atomic_load_explicit(&p.l->v8, memory_order_acquire);
			memcpy(val, &w, 8);
			n = 8;
			rc = 0;
		} else {
			n = leaf_value(p.l, val, cap);
			rc = IDX_FOUND(n, cap);
		}
		if (vlen)
			*vlen = n;
	}
	IDX_READ_EXIT();
	return rc;
}

static int art_update(void *index, const void *key, size_t klen, const void *val, size_t vlen)
{
	struct art_index *t = index;
	int rc = check_kv(key, klen, val, vlen);
	if (rc)
		return rc;
	struct art_leaf *nl = NULL, *dead = NULL; /* new leaf; the leaf it replaced */
	struct art_pos p;
	int r;
	IDX_READ_ENTER();
	for (;;) {
		while ((r = locate(t, key, (uint32_t)klen, &p, true)) < 0)
			;
		if (!r) {
			rc = TIPS_ENOTFOUND;
			break;
		}
		if (vlen == 8 && p.l->vlen == 8) {
			/* In place: one value word, no undo record (IDX_LOG_VALUE), one
			 * atomic store. */
			IDX_LOG_VALUE(&p.l->v8, sizeof(p.l->v8));
			ST(p.l->v8, load64(val));
			break;
		}
		if (!nl && !(nl = leaf_new(key, (uint32_t)klen, val, (uint32_t)vlen))) {
			rc = TIPS_ENOMEM;
			break;
		}
		if (!lk_upgrade(p.n, p.v))
			continue;
		slot_set(p.at_vleaf ? &p.n->vleaf : child_slot(p.n, p.c), leaf_ref(nl), true);
		lk_unlock(p.n);
		dead = p.l;
		nl = NULL;
		break;
	}
	IDX_READ_EXIT();
	/* The replaced leaf, or a new leaf left unused (not found, replaced in place). */
	IDX_FREE(dead ? dead : nl);
	return rc;
}

/* The lines of @n that a lookup, add or log_ahead of key byte @c reads past the header
 * (art_prefetch, @deep 1): the key bytes and children of a Node4/16, the byte's index
 * entry and every child slot of a Node48 (an add scans them for a free one), the
 * byte's slot of a Node256. */
static void prefetch_node(struct art_node *n, uint8_t c)
{
	const char *p = (const char *)n;
	switch (n->type) {
	case ART_N4:
		__builtin_prefetch(p + 64, 1, 3);
		return;
	case ART_N16:
		__builtin_prefetch(p + 64, 1, 3);
		__builtin_prefetch(p + 128, 1, 3);
		return;
	case ART_N48: {
		struct art_n48 *q = (struct art_n48 *)n;
		__builtin_prefetch(&q->index[c], 1, 3);
		/* child[] starts mid-line: 7 lines */
		uintptr_t first = (uintptr_t)&q->child[0] & ~(uintptr_t)63;
		for (uintptr_t a = first; a <= (uintptr_t)&q->child[47]; a += 64)
			__builtin_prefetch((const void *)a, 1, 3);
		return;
	}
	default:
		__builtin_prefetch(&((struct art_n256 *)n)->child[c], 1, 3);
		return;
	}
}

/*
 * Replay's and writers' look-ahead (plugin.h). The top of the tree, the root and the
 * nodes one level below it (at most 257), stays in the caches, and a write's misses
 * are in the nodes below: @deep 0 walks the top and prefetches the header of the node
 * it reaches two levels down; @deep 1, some operations later, walks to that node (its
 * header cached by then) and prefetches the lines of it that @key's operation reads
 * (prefetch_node). Reads nodes as they are, inside a read section. @deep 2, from a
 * writer whose outcome lookup follows: that lookup, made now and discarded.
 */
static void art_prefetch(void *index, const void *key, size_t klen_, int deep)
{
	struct art_index *t = index;
	if (deep == 2) {
		IDX_LOOKUP_AHEAD(art_lookup, index, key, klen_);
		return;
	}
	const unsigned char *k = key;
	uint32_t klen = (uint32_t)klen_, depth = 0;
	struct art_node *n = t->tree;
	IDX_READ_ENTER();
	for (unsigned level = 0; n->type >= ART_N4 && n->type <= ART_N256; level++) {
		depth += LD(n->plen);
		if (depth >= klen)
			break;
		if (level == 2) {
			if (deep)
				prefetch_node(n, k[depth]);
			break;
		}
		uintptr_t ch = find_child(n, k[depth]);
		if (!ch || is_leaf(ch)) {
			if (ch && deep)
				__builtin_prefetch(as_leaf(ch), 0, 3);
			break;
		}
		n = as_node(ch);
		depth++;
		if (level == 1 && !deep) {
			__builtin_prefetch(n, 1, 3);
			break;
		}
	}
	IDX_READ_EXIT();
}

#ifdef IDX_TIPS
/* art_log_ahead() for a key with no child in @n under byte @c: the ranges node_add()
 * logs, or for a full node the parent's slot that its growth stores to. */
static int add_ranges(struct art_node *n, uint8_t c, struct art_node *parent, uint8_t pbyte,
		      void **addr, size_t *size)
{
	switch (n->type) {
	case ART_N4:
	case ART_N16: {
		uint8_t keys[16];
		unsigned cnt = small_keys(n, keys);
		if (cnt >= node_cap[n->type])
			break;
		small_ranges(n, small_pos(keys, cnt, c), cnt + 1, addr, size);
		return 2;
	}
	case ART_N48: {
		struct art_n48 *p = (struct art_n48 *)n;
		unsigned s = n48_free_slot(p);
		if (s == 48)
			break;
		n48_add_ranges(p, s, c, addr, size);
		return 2;
	}
	default:
		addr[0] = (void *)&((struct art_n256 *)n)->child[c];
		size[0] = sizeof(uintptr_t);
		return 1;
	}
	_Atomic uintptr_t *slot = parent ? child_slot(parent, pbyte) : NULL;
	if (!slot)
		return 0;
	addr[0] = (void *)slot;
	size[0] = sizeof(*slot);
	return 1;
}

/*
 * Replay's batched logging (plugin.h): the ranges an insert or update of @key logs, by
 * the case art_insert() or art_update() will meet: a child added to a node (node_add's
 * ranges, or the parent's slot for a growth), a leaf that a new Node4 replaces (its
 * slot), a value leaf, or a path split (the path, then the parent's slot); an 8-byte
 * value updated in place logs nothing (IDX_LOG_VALUE). The descent is locate()'s without the
 * version checks: it reads nodes as they are, inside a read section so that none is
 * freed under it, and a range that a concurrent write makes stale costs a record.
 */
static int art_log_ahead(void *index, const void *key, size_t klen_, size_t vlen,
			 void **addr, size_t *size)
{
	struct art_index *t = index;
	const unsigned char *k = key;
	uint32_t klen = (uint32_t)klen_, depth = 0;
	struct art_node *n = t->tree, *parent = NULL;
	uint8_t pbyte = 0;
	int rc = 0;
	IDX_READ_ENTER();
	while (n->type >= ART_N4 && n->type <= ART_N256) {
		uint32_t plen = LD(n->plen);
		if (plen) {
			uint64_t w = LD(n->pfx);
			if (plen > klen - depth || memcmp(&w, k + depth, min_u32(plen, ART_PFX))) {
				_Atomic uintptr_t *slot = parent ? child_slot(parent, pbyte) : NULL;
				if (slot) {
					addr[0] = (void *)&n->pfx;
					size[0] = sizeof(n->pfx) + sizeof(n->plen);
					addr[1] = (void *)slot;
					size[1] = sizeof(*slot);
					rc = 2;
				}
				break;
			}
			depth += plen;
		}
		if (depth == klen) {
			uintptr_t vl = LD(n->vleaf);
			if (!(vl && vlen == 8 && as_leaf(vl)->vlen == 8)) { /* else in place */
				addr[0] = (void *)&n->vleaf;
				size[0] = sizeof(uintptr_t);
				rc = 1;
			}
			break;
		}
		uint8_t c = k[depth];
		uintptr_t ch = find_child(n, c);
		if (!ch) {
			rc = add_ranges(n, c, parent, pbyte, addr, size);
			break;
		}
		if (is_leaf(ch)) {
			struct art_leaf *l = as_leaf(ch);
			_Atomic uintptr_t *slot = child_slot(n, c);
			if (leaf_is(l, k, klen) && vlen == 8 && l->vlen == 8) {
				/* in place, IDX_LOG_VALUE: nothing to log ahead */
			} else if (slot) {
				addr[0] = (void *)slot;
				size[0] = sizeof(*slot);
				rc = 1;
			}
			break;
		}
		parent = n;
		pbyte = c;
		n = as_node(ch);
		depth++;
	}
	IDX_READ_EXIT();
	return rc;
}
#endif

/* The node size to shrink a node of @type to once it has @cnt children, or 0. */
static unsigned shrink_to(unsigned type, unsigned cnt)
{
	switch (type) {
	case ART_N16: return cnt <= 3 ? ART_N4 : 0;
	case ART_N48: return cnt <= 12 ? ART_N16 : 0;
	case ART_N256: return cnt <= 37 ? ART_N48 : 0;
	default: return 0;
	}
}

/*
 * Collapse of @p->n, which holds the key's leaf and one other entry: the parent's slot
 * gets that entry (a child node's path grows by @n's path and key byte). Parent and
 * node are locked by the caller. Returns false (nothing changed) if the child node is
 * locked by someone else: the caller unlocks and restarts.
 */
static bool collapse(struct art_pos *p)
{
	struct art_node *n = p->n;
	uintptr_t rest = 0;
	unsigned b = 0;
	if (!p->at_vleaf)
		rest = LD(n->vleaf);
	if (!rest) {
		for (unsigned from = 0; from < 256 && (rest = next_child(n, from, &b));
		     from = b + 1)
			if (p->at_vleaf || b != p->c)
				break;
	}
	TIPS_INVARIANT(rest != 0, "art: a node other than the root holds fewer than 2 entries");
	if (!is_leaf(rest)) {
		struct art_node *c = as_node(rest);
		if (!lk_try(c))
			return false;
		uint32_t plen = LD(n->plen), cplen = LD(c->plen);
		unsigned char buf[ART_PFX] = { 0 };
		uint64_t w = LD(n->pfx), cw = LD(c->pfx);
		uint32_t have = min_u32(plen, ART_PFX);
		memcpy(buf, &w, have);
		if (have < ART_PFX) {
			buf[have++] = (uint8_t)b;
			memcpy(buf + have, &cw, min_u32(cplen, ART_PFX - have));
		}
		set_prefix(c, buf, plen + 1 + cplen, true);
		slot_set(child_slot(p->parent, p->pbyte), rest, true);
		lk_unlock(c);
	} else {
		slot_set(child_slot(p->parent, p->pbyte), rest, true);
	}
	return true;
}

static int art_remove(void *index, const void *key, size_t klen)
{
	struct art_index *t = index;
	if (!key || klen == 0)
		return TIPS_EINVAL;
	if (klen > TIPS_MAX_KEY)
		return TIPS_ENOTFOUND;
	struct art_pos p;
	struct art_node *gone = NULL; /* a node replaced in its parent */
	int r, rc = 0;
	IDX_READ_ENTER();
	for (;;) {
		while ((r = locate(t, key, (uint32_t)klen, &p, true)) < 0)
			;
		if (!r) {
			rc = TIPS_ENOTFOUND;
			break;
		}
		struct art_node *n = p.n;
		unsigned cnt = node_count(n);
		unsigned entries = cnt + (LD(n->vleaf) != 0);
		if (!lk_check(n, p.v))
			continue;
		unsigned small = p.at_vleaf || n == t->tree ? 0 : shrink_to(n->type, cnt - 1);

		if (n != t->tree && (entries <= 2 || small)) {
			/* The node is replaced in its parent: lock both. */
			if (!lk_upgrade(p.parent, p.pv))
				continue;
			if (!lk_upgrade(n, p.v)) {
				lk_unlock(p.parent);
				continue;
			}
			struct art_node *s = NULL;
			if (entries <= 2) {
				if (!collapse(&p)) {
					lk_unlock(n);
					lk_unlock(p.parent);
					continue;
				}
			} else if ((s = node_copy(n, small, p.c)) != NULL) {
				slot_set(child_slot(p.parent, p.pbyte), (uintptr_t)s, true);
			}
			if (entries <= 2 || s) {
				lk_unlock_obsolete(n);
				lk_unlock(p.parent);
				gone = n;
				break;
			}
			/* No memory to shrink: remove in place. */
			lk_unlock(p.parent);
		} else if (!lk_upgrade(n, p.v)) {
			continue;
		}
		if (p.at_vleaf)
			slot_set(&n->vleaf, 0, true);
		else
			node_remove(n, p.c);
		lk_unlock(n);
		break;
	}
	IDX_READ_EXIT();
	if (rc == 0)
		IDX_FREE(p.l);
	if (gone)
		IDX_FREE(gone);
	return rc;
}

/* ---- scan ---------------------------------------------------------------------------- */

/* Keys a scan collects in one read section at most (reclamation waits for it). */
#define SCAN_SECTION_KEYS 4096u

struct scan_frame {
	struct art_node *n;
	uint64_t v;
	uint32_t end;  /* depth before the node's path until set up, then after it */
	int16_t next;  /* next key byte to visit; -1: node not set up yet */
	bool bounded;  /* keys below may be below the bound: compare */
};

struct scan_entry {
	uint32_t klen, vlen;
	size_t off; /* key, then value, in the arena */
};

/* Leaves found but not yet copied: each is prefetched when found, and when SCAN_AHEAD
 * are pending the older half is copied, so that the copies read lines prefetched long
 * before while the newer half's misses are still in flight: a scan waits for about one
 * cache miss per SCAN_AHEAD / 2 keys rather than one per key (leaves are allocated in
 * insertion order, so neighbours in key order are scattered in memory). Copied before
 * the read section ends. */
#define SCAN_AHEAD 48u
/* Result and stack buffers start inside struct scan_state (on the caller's stack) and
 * move to the heap only for longer scans: a scan of a few hundred keys allocates
 * nothing. */
#define SCAN_INLINE_KEYS 128u
#define SCAN_INLINE_BYTES 4096u
#define SCAN_INLINE_FRAMES 24u

struct scan_state {
	const unsigned char *bk; /* the bound: keys >= it (> it if excl) are collected */
	size_t blen;
	bool has_bound, excl;
	size_t limit;            /* count */
	struct scan_entry *e;    /* e0 or the heap */
	size_t n, ecap;
	unsigned char *arena;    /* arena0 or the heap */
	size_t used, acap;
	struct scan_frame *stk;  /* stk0 or the heap */
	size_t scap;
	const struct art_leaf *pend[SCAN_AHEAD]; /* found, prefetched, not yet copied */
	unsigned np;
	struct scan_entry e0[SCAN_INLINE_KEYS];
	unsigned char arena0[SCAN_INLINE_BYTES];
	struct scan_frame stk0[SCAN_INLINE_FRAMES];
};

static void scan_state_init(struct scan_state *s, const void *start, size_t klen,
			    size_t count)
{
	s->bk = start;
	s->blen = klen;
	s->has_bound = klen > 0;
	s->excl = false;
	s->limit = count;
	s->e = s->e0;
	s->ecap = SCAN_INLINE_KEYS;
	s->arena = s->arena0;
	s->acap = SCAN_INLINE_BYTES;
	s->stk = s->stk0;
	s->scap = SCAN_INLINE_FRAMES;
	s->n = s->used = 0;
	s->np = 0;
}

static void scan_state_free(struct scan_state *s)
{
	if (s->e != s->e0)
		free(s->e);
	if (s->arena != s->arena0)
		free(s->arena);
	if (s->stk != s->stk0)
		free(s->stk);
}

/* Grows buffer *@buf (@inline_buf until it first grows) from @old to @want bytes,
 * keeping its contents. False if there was no memory (*@buf unchanged). */
static bool scan_grow(void **buf, const void *inline_buf, size_t old, size_t want)
{
	void *p;
	if (*buf == inline_buf) {
		p = malloc(want);
		if (p)
			memcpy(p, *buf, old);
	} else {
		p = realloc(*buf, want);
	}
	if (!p)
		return false;
	*buf = p;
	return true;
}

static bool scan_wants(const struct scan_state *s, const struct art_leaf *l)
{
	int c = kv_cmp(l->key, l->klen, s->bk, s->blen);
	return s->excl ? c > 0 : c >= 0;
}

/* Copies @l into the result, growing the buffers as needed (scan_flush() copies the
 * common case itself). 0, or TIPS_ENOMEM. */
static int scan_emit(struct scan_state *s, const struct art_leaf *l)
{
	uint32_t klen = l->klen, vlen = l->vlen;
	if (s->n == s->ecap) {
		size_t cap = 2 * s->ecap;
		if (!scan_grow((void **)&s->e, s->e0, s->ecap * sizeof(*s->e),
			       cap * sizeof(*s->e)))
			return TIPS_ENOMEM;
		s->ecap = cap;
	}
	if (s->used + klen + vlen > s->acap) {
		size_t cap = 2 * s->acap;
		while (cap < s->used + klen + vlen)
			cap *= 2;
		if (!scan_grow((void **)&s->arena, s->arena0, s->used, cap))
			return TIPS_ENOMEM;
		s->acap = cap;
	}
	unsigned char *dst = s->arena + s->used;
	memcpy(dst, l->key, klen);
	leaf_value(l, dst + klen, vlen);
	s->e[s->n++] = (struct scan_entry){ klen, vlen, s->used };
	s->used += (size_t)klen + vlen;
	return 0;
}

/* Copies the first @np pending leaves, in the order found, and moves the rest to the
 * front. 0, or TIPS_ENOMEM. */
static int scan_flush_n(struct scan_state *s, unsigned np)
{
	unsigned rest = s->np - np;
	for (unsigned i = 0; i < np; i++) {
		const struct art_leaf *l = s->pend[i];
		/* An 8-byte key and value that fit: two word copies, no checks beyond these. */
		if (l->klen == 8 && l->vlen == 8 && s->n < s->ecap && s->acap - s->used >= 16) {
			unsigned char *dst = s->arena + s->used;
			memcpy(dst, l->key, 8);
			leaf_value(l, dst + 8, 8);
			s->e[s->n++] = (struct scan_entry){ 8, 8, s->used };
			s->used += 16;
			continue;
		}
		int rc = scan_emit(s, l);
		if (rc) {
			s->np = 0;
			return rc;
		}
	}
	for (unsigned i = 0; i < rest; i++)
		s->pend[i] = s->pend[np + i];
	s->np = rest;
	return 0;
}

/* Copies every pending leaf. 0, or TIPS_ENOMEM. */
static int scan_flush(struct scan_state *s)
{
	return scan_flush_n(s, s->np);
}

/* Keys collected so far, copied or pending. */
static inline size_t scan_count(const struct scan_state *s)
{
	return s->n + s->np;
}

/* Queues leaf @l (validated by the caller) for copying, prefetching its line; copies
 * the queue when it is full. 0, or TIPS_ENOMEM. */
static int scan_take(struct scan_state *s, const struct art_leaf *l)
{
	__builtin_prefetch(l);
	s->pend[s->np++] = l;
	return s->np == SCAN_AHEAD ? scan_flush_n(s, SCAN_AHEAD / 2) : 0;
}

/* scan_pass() goes on after scan_leaf() returned this. */
#define SCAN_GO 2

/* Takes leaf @l (validated by the caller): SCAN_GO, or what scan_pass() returns now:
 * 0 at the limit, 1 at the end of a read section's keys, or TIPS_ENOMEM. */
static inline int scan_leaf(struct scan_state *s, const struct art_leaf *l)
{
	if (scan_take(s, l))
		return TIPS_ENOMEM;
	size_t c = scan_count(s);
	if (c == s->limit)
		return 0;
	return c % SCAN_SECTION_KEYS == 0 ? 1 : SCAN_GO;
}

/* Prefetches @len bytes from @p (whole lines). A hint: nothing is read. */
static inline void prefetch_span(const void *p, size_t len)
{
	uintptr_t a = (uintptr_t)p & ~(uintptr_t)63, end = (uintptr_t)p + len;
	for (; a < end; a += 64)
		__builtin_prefetch((const void *)a);
}

/* The most of a node a scan prefetches at once: a Node48 (its index and children) or
 * the first quarter of a Node256. */
#define SCAN_PREFETCH_NODE 704u

/* Prefetches what the scan will read of @n, whose header it has read: the rest of the
 * node (a scan of a node reads most of its index and children; their lines otherwise
 * miss one after the other as next_child() reaches them). */
static inline void scan_prefetch_body(struct art_node *n)
{
	size_t len = node_size(n->type);
	prefetch_span(n, len < SCAN_PREFETCH_NODE ? len : SCAN_PREFETCH_NODE);
}

static bool scan_push(struct scan_state *s, size_t *sp, struct art_node *n, uint64_t v,
		      uint32_t depth, bool bounded)
{
	if (*sp == s->scap) {
		size_t cap = 2 * s->scap;
		if (!scan_grow((void **)&s->stk, s->stk0, s->scap * sizeof(*s->stk),
			       cap * sizeof(*s->stk)))
			return false;
		s->scap = cap;
	}
	s->stk[(*sp)++] = (struct scan_frame){ n, v, depth, -1, bounded };
	return true;
}

/*
 * One depth-first pass from the root, collecting leaves after the bound until the
 * limit. Returns 0 when done (limit reached or tree exhausted), 1 when a node changed
 * under it or SCAN_SECTION_KEYS more keys were collected (go on after the last key
 * collected, in a new read section), or TIPS_ENOMEM. Read section held; the caller
 * copies the pending leaves (scan_flush) before it leaves the section.
 */
static int scan_pass(struct art_index *t, struct scan_state *s)
{
	unsigned char pre[TIPS_MAX_KEY];
	size_t sp = 0;
	uint64_t v;
	if (!lk_read(t->tree, &v))
		return 1;
	if (!scan_push(s, &sp, t->tree, v, 0, s->has_bound))
		return TIPS_ENOMEM;
	while (sp) {
		struct scan_frame *f = &s->stk[sp - 1];
		struct art_node *n = f->n;
		if (f->next < 0) { /* set up: the path against the bound, then the value leaf */
			uint32_t plen = LD(n->plen), d = f->end;
			if (plen > TIPS_MAX_KEY)
				return 1;
			if (f->bounded) {
				/* On the bound's path: s->blen >= d. */
				uint32_t m = (uint32_t)(s->blen - d < plen ? s->blen - d : plen);
				int c = 0;
				if (m) {
					if (!node_prefix(n, d, m, pre))
						return 1;
					c = memcmp(pre, s->bk + d, m);
				}
				if (!lk_check(n, f->v))
					return 1;
				if (c < 0) { /* every key below is smaller than the bound */
					sp--;
					continue;
				}
				if (c > 0 || s->blen < (size_t)d + plen)
					f->bounded = false; /* every key below is larger */
			}
			f->end = d + plen;
			uintptr_t vl = LD(n->vleaf);
			if (!lk_check(n, f->v))
				return 1;
			if (vl && (!f->bounded || scan_wants(s, as_leaf(vl)))) {
				int rc = scan_leaf(s, as_leaf(vl));
				if (rc != SCAN_GO)
					return rc;
			}
			f->next = f->bounded && s->blen > f->end ? s->bk[f->end] : 0;
		}
		if (f->next >= 256) {
			sp--;
			continue;
		}
		uint8_t bytes[SCAN_GATHER];
		uintptr_t kids[SCAN_GATHER];
		bool more;
		unsigned k = gather_children(n, (unsigned)f->next, bytes, kids, &more);
		if (!lk_check(n, f->v))
			return 1;
		/* Only the child at the bound's byte may hold keys below the bound. */
		int bound_byte = f->bounded && s->blen > f->end ? s->bk[f->end] : -1;
		unsigned i = 0;
		for (; i < k && is_leaf(kids[i]); i++) {
			const struct art_leaf *l = as_leaf(kids[i]);
			if (bytes[i] == bound_byte && !scan_wants(s, l))
				continue;
			int rc = scan_leaf(s, l);
			if (rc != SCAN_GO)
				return rc;
		}
		if (i == k) { /* only leaves: the node is done, or gather more */
			if (more)
				f->next = (int16_t)(bytes[k - 1] + 1);
			else
				sp--;
			continue;
		}
		unsigned b = bytes[i];
		f->next = (int16_t)(b + 1);
		bool cb = bytes[i] == bound_byte;
		struct art_node *cn = as_node(kids[i]);
		/* The node the scan will most likely enter after @cn is @n's next child:
		 * its header is fetched together with @cn's, and its body (taking siblings
		 * to be of @cn's kind) while the scan works through @cn's keys. Hints only:
		 * @sib is read optimistically and never dereferenced here. */
		unsigned sb;
		uintptr_t sib = i + 1 < k ? kids[i + 1] : more && b < 255 ? next_child(n, b + 1, &sb) : 0;
		if (sib && is_leaf(sib))
			sib = 0;
		if (sib)
			__builtin_prefetch(as_node(sib));
		uint64_t cv;
		if (!lk_read(cn, &cv) || !lk_check(n, f->v))
			return 1;
		scan_prefetch_body(cn);
		if (sib) {
			size_t len = node_size(cn->type);
			prefetch_span(as_node(sib), len < SCAN_PREFETCH_NODE ? len
								 : SCAN_PREFETCH_NODE);
		}
		uint32_t end = f->end;
		if (!scan_push(s, &sp, cn, cv, end + 1, cb))
			return TIPS_ENOMEM;
	}
	return 0;
}

/* scan_pass(), then the pending leaves copied, inside the same read section. */
static int scan_pass_flushed(struct art_index *t, struct scan_state *s)
{
	int rc = scan_pass(t, s);
	if (rc == TIPS_ENOMEM) {
		s->np = 0;
		return rc;
	}
	int frc = scan_flush(s);
	return frc ? frc : rc;
}

/* The first of the @n collected entries whose key is >= @below (entries are in order:
 * the last is checked first, as a short scan seldom reaches the bound). */
static size_t scan_cut(const struct scan_state *s, size_t n, const void *below, size_t blen)
{
	const struct scan_entry *e = s->e;
	if (n == 0 || kv_cmp(s->arena + e[n - 1].off, e[n - 1].klen, below, blen) < 0)
		return n;
	size_t lo = 0, hi = n - 1;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (kv_cmp(s->arena + e[mid].off, e[mid].klen, below, blen) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* The framework's bounded scan (util/scan_below.h), and art_scan without a bound: with
 * @below, only keys below it are passed, and *@more says whether keys may remain that
 * the caller must get elsewhere (the bound was reached or the tree ran out before
 * @count, and @fn did not stop the scan). */
static long art_scan_below(void *index, const void *start, size_t klen, size_t count,
			   const void *below, size_t blen, bool *more, tips_scan_fn fn,
			   void *arg)
{
	struct art_index *t = index;
	if (!fn || (klen && !start))
		return TIPS_EINVAL;
	if (count == 0)
		return 0;
	unsigned char last[TIPS_MAX_KEY];
	struct scan_state s;
	scan_state_init(&s, start, klen, count);
	int rc;
	IDX_READ_ENTER();
	while ((rc = scan_pass_flushed(t, &s)) == 1) {
		/* A long scan must not hold off reclamation: a new read section. */
		IDX_READ_EXIT();
		IDX_READ_ENTER();
		if (s.n) { /* resume after the last key collected */
			const struct scan_entry *e = &s.e[s.n - 1];
			memcpy(last, s.arena + e->off, e->klen);
			s.bk = last;
			s.blen = e->klen;
			s.has_bound = s.excl = true;
		}
	}
	IDX_READ_EXIT();
	long passed = rc;
	bool stopped = false;
	size_t n = rc == 0 && below ? scan_cut(&s, s.n, below, blen) : s.n;
	if (rc == 0) {
		for (size_t i = 0; i < n; i++) {
			const struct scan_entry *e = &s.e[i];
			passed++;
			if (fn(s.arena + e->off, e->klen, s.arena + e->off + e->klen, e->vlen, arg)) {
				stopped = true;
				break;
			}
		}
	}
	if (more)
		*more = rc == 0 && !stopped && (size_t)passed < count;
	scan_state_free(&s);
	return passed;
}

static long art_scan(void *index, const void *start, size_t klen, size_t count,
		     tips_scan_fn fn, void *arg)
{
	return art_scan_below(index, start, klen, count, NULL, 0, NULL, fn, arg);
}

/* ---- walk ------------------------------------------------------------------------------ */

static int walk_below(struct art_node *n, unsigned depth, tips_walk_fn fn, void *arg)
{
	if (depth > ART_MAX_DEPTH)
		return IDX_CORRUPT(n, "depth %u: expected at most %u levels", depth, ART_MAX_DEPTH);
	uintptr_t vl = LD(n->vleaf);
	int rc = vl ? leaf_check(as_leaf(vl), n) : 0;
	if (rc == 0 && vl)
		rc = fn(as_leaf(vl), arg);
	unsigned b = 0;
	uintptr_t c;
	for (unsigned from = 0; rc == 0 && from < 256 && (c = next_child(n, from, &b));
	     from = b + 1) {
		if ((rc = child_check(c, n)))
			break;
		if (is_leaf(c)) {
			rc = fn(as_leaf(c), arg);
		} else {
			rc = fn(as_node(c), arg);
			if (rc == 0)
				rc = walk_below(as_node(c), depth + 1, fn, arg);
		}
	}
	return rc;
}

/* The root block (which holds the root node), then every node and leaf below, each
 * checked before it is followed (a cycle is caught by the depth limit and the caller's
 * bound on fn calls); stops at (and returns) fn's first non-zero. Takes no lock: no
 * write runs meanwhile. */
static int art_walk(void *index, tips_walk_fn fn, void *arg)
{
	struct art_index *t = index;
	if (!fn)
		return TIPS_EINVAL;
	int rc = fn(t->root, arg);
	return rc ? rc : walk_below(t->tree, 0, fn, arg);
}

const struct tips_index_ops IDX_SYM(ops) = {
	.name = IDX_NAME,
	.concurrency = "optimistic lock coupling: non-blocking reads, per-node write locks",
	.create = art_create,
	.open = art_open,
	.close = art_close,
	.insert = art_insert,
	.update = art_update,
	.remove = art_remove,
	.lookup = art_lookup,
	.scan = art_scan,
	.walk = art_walk,
	.prefetch = art_prefetch,
#ifdef IDX_TIPS
	.log_ahead = art_log_ahead,
#endif
};

const struct idx_scan_below IDX_SYM(scan_below) = { &IDX_SYM(ops), art_scan_below };
