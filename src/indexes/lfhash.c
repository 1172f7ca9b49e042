/*
 * lfhash.c - "lfhash": a lock-free hash table after Michael (SPAA'02, "High performance
 * dynamic lock-free hash tables and list-based sets"): a fixed array of buckets, each a
 * lock-free ordered singly linked list with Harris-style deletion. Written once against
 * the hooks of idx_hooks.h and built as dram-lfhash (volatile original) and tips-lfhash
 * (TIPS plug-in, ATC'21 §3.2.6).
 *
 * Structure. A root block (magic, bucket count, bucket array) and a bucket array of list
 * heads, both allocated at create and never changed afterwards; then ONE block per key:
 * {next, val, klen, vlen, key bytes[, value bytes]}. The bucket count is a power of two
 * >= max(expected_keys, 1024), so a list holds about one key on average while the user
 * stays within the hint. The table never resizes (Michael's table is fixed-size too): a
 * lock-free resize would need split-ordering or a migration, and the tips build would
 * undo-log all of it. Beyond the hint, lists just grow longer.
 *
 * Keys and values. The key is inline after the 24-byte header, so an 8-byte key is
 * compared with one load and no pointer chase (a 32-byte node for 8-byte keys and
 * values). A value of at most 8 bytes lives in the atomic word `val` (zero-padded); it
 * is replaced in place when an update keeps its length: IDX_LOG_VALUE of 8 bytes and
 * one atomic store, so a reader gets either the old or the new word, never a mix. A longer
 * value follows the key and is immutable. klen and vlen never change once a node is
 * published, so a value and its length always match. Any other update (another length,
 * or a value longer than 8 bytes) replaces the node: see "Replacement" below.
 *
 * Order within a bucket: by key bytes (memcmp over the common length, the shorter key
 * first), the index's key order; for two 8-byte keys one byte-swapped 64-bit compare.
 * With about one key per bucket the order only matters for stopping early on a miss.
 *
 * Concurrency (lock-free writers, wait-free-traversal readers). A node's `next` word is
 * a tagged pointer: bit 0 (LF_MARK) set means the node is logically deleted, and its
 * next word is frozen from then on. Remove marks the victim's next with CAS (its
 * linearization point), then unlinks it with CAS on the predecessor's link. Writers
 * search with lf_find(), which unlinks every marked node it meets (helping) and
 * restarts from the bucket head when a CAS fails. Insert CASes the new node into the
 * predecessor's link; the CAS fails if that link changed or the predecessor got marked.
 * Readers (lookup, scan) never write: they follow next words, skipping marked nodes,
 * and for the key's node load `val` first and `next` second; an unmarked `next` proves
 * the node was live when `val` was read. Every traversal runs inside
 * IDX_READ_ENTER/EXIT, so a node unlinked meanwhile stays readable until the reader
 * leaves (IDX_FREE is deferred past open read sections in both builds).
 *
 * Replacement. An update that cannot write in place builds a new node n (same key,
 * n.next = the victim's successor) and CASes the victim's next from succ to n|LF_MARK:
 * one step deletes the victim and makes n reachable in its place, so every reader sees
 * the old value or the new one and never a missing key. Then the victim is unlinked
 * like a removed node (its unlinked successor pointer is n). Only marked nodes may be
 * followed by a node with an equal key, so the lists stay sorted for every traversal.
 *
 * Reclamation: exactly once. A node is freed only by the thread whose CAS unlinked it
 * (the remover's own unlink, or the helper in lf_find that succeeded); once unlinked it
 * is unreachable from any link, so no second CAS can unlink it again. A node that lost
 * its insert race (never published) is freed by its creator. A remover whose unlink CAS
 * fails calls lf_find again, which cannot return before the marked node is unlinked, so
 * when an operation returns, no node it marked is still linked. Reclamation is thus
 * quiescent-clean; after a crash the tips build is rolled back to such a quiescent
 * state, but the code does not rely on it: a marked node still linked is handled by
 * every traversal, and is still owned (walk reports it once, by its list position).
 *
 * Invariant (what makes the tips build crash consistent): every store to memory that
 * existed before the current operation is preceded by IDX_LOG of exactly the bytes it
 * stores, or, for a node's in-place `val` overwritten by an update of its own key, by
 * IDX_LOG_VALUE (no undo record: recovery replays that update again). The index stores
 * to two kinds of words, each a full aligned 8 bytes: links (a bucket head or a node's
 * next: insert, mark, replace, unlink), all through link_cas(), and a node's in-place
 * `val`. A failed CAS after its log is harmless: the
 * log holds the word's state at the last reclamation. Stores into a node allocated by
 * the same operation need no log. No lock word exists in PM (nor in DRAM): the mark
 * bits are part of the logical state and are undone like any other logged store, so
 * open() has nothing to reset. The code never flushes or fences.
 *
 * Conversion cost: 9 hook sites - IDX_ALLOC 3 (root, bucket array, node), IDX_FREE 4
 * (root when create fails, a node by the thread that unlinked it in unlink_node(), and
 * in insert and update a node that lost its race and was never published), IDX_LOG 2
 * (link_cas(), which every link CAS goes through, and IDX_LOG_VALUE for the in-place
 * value). At run time an insert costs one IDX_ALLOC and one IDX_LOG; an update of the
 * same length <= 8 one IDX_LOG_VALUE (no undo record); a remove two IDX_LOGs and one IDX_FREE; a replacing update one IDX_ALLOC,
 * two IDX_LOGs and one IDX_FREE.
 *
 * Scan. Keys are hashed, so an ordered scan visits the whole table: O(n) per scan
 * whatever @count is, keeping the @count smallest keys >= start in a bounded max-heap
 * of copies (scan_topk.h), then calling fn in order outside any read section.
 *
 * Known limits: no resize (see above); a scan is O(table); a value longer than 8 bytes
 * is rewritten by node replacement (allocation + free) on every update.
 */
#define _GNU_SOURCE
#define IDX_BASE_NAME "lfhash"
#include "indexes/idx_hooks.h"
#include "indexes/indexes.h"
#include "indexes/scan_topk.h"
#include "util/kv.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define LF_MAGIC 0x316873686674666cull /* "lfthsh1": layout version 1 */
#define LF_MIN_BUCKETS 1024u
#define LF_MAX_BUCKETS (1ull << 40) /* keeps the size arithmetic far from overflow */
#define LF_MARK ((uintptr_t)1)      /* bit 0 of a next word: this node is deleted */
#define LF_INLINE_MAX 8u            /* values up to this length live in the val word */
#define LF_SCAN_BATCH 1024u         /* buckets per read section of a scan */

/* ---- persistent layout (in PM in the tips build) ---------------------------------- */

/* One key. One block: the key, then (vlen > 8) the value, inline after the header. */
struct lf_node {
	_Atomic uintptr_t next; /* successor | LF_MARK; NULL (0) ends the list. Once marked,
	                           never stored again */
	_Atomic uint64_t val;   /* vlen <= 8: the value, zero-padded; else unused (0) */
	uint32_t klen;          /* key bytes, 1..TIPS_MAX_KEY; immutable */
	uint32_t vlen;          /* value bytes, 0..TIPS_MAX_VALUE; immutable */
	unsigned char data[];   /* klen key bytes, then vlen value bytes if vlen > 8 */
};

/* The root object returned by create. Written only by create; read-only afterwards. */
struct lf_root {
	uint64_t magic;             /* LF_MAGIC once create has filled the root */
	uint64_t nbuckets;          /* number of lists: a power of two >= 1024 */
	_Atomic uintptr_t *buckets; /* block of nbuckets list heads (0: empty; never marked) */
};

/* ---- volatile handle (DRAM, rebuilt by every open) ----------------------------------- */

struct lf_index {
	struct lf_root *root;
	_Atomic uintptr_t *buckets; /* root->buckets, copied: no PM read per operation */
	uint64_t mask;              /* root->nbuckets - 1 */
};

/* ---- keys ---------------------------------------------------------------------------- */

/* A search key, with its first word byte-swapped when it is 8 bytes long, so that two
 * 8-byte keys compare in memcmp order with one integer comparison. */
struct lf_key {
	const unsigned char *p;
	uint32_t len;
	uint64_t be; /* len == 8: the key as a big-endian integer */
};

static inline struct lf_key key_make(const void *key, size_t len)
{
	struct lf_key k = { key, (uint32_t)len, 0 };
	if (len == 8)
		k.be = __builtin_bswap64(load64(key));
	return k;
}

/* Sign of (node's key - @k) in memcmp order, the shorter key first on a tie. */
static inline int node_cmp(const struct lf_node *n, const struct lf_key *k)
{
	if (n->klen == 8 && k->len == 8) {
		uint64_t a = __builtin_bswap64(load64(n->data));
		return (a > k->be) - (a < k->be);
	}
	uint32_t m = n->klen < k->len ? n->klen : k->len;
	int r = memcmp(n->data, k->p, m);
	if (r)
		return r;
	return (n->klen > k->len) - (n->klen < k->len);
}

/* A 64-bit finalizer (xor-shift-multiply rounds): each input bit affects all output
 * bits, so the low bits that pick the bucket are well spread. */
static inline uint64_t fin64(uint64_t h)
{
	h ^= h >> 32;
	h *= 0xd6e8feb86659fd93ull;
	h ^= h >> 32;
	h *= 0xd6e8feb86659fd93ull;
	h ^= h >> 32;
	return h;
}

/* Hash of a byte string, a word at a time (tail zero-padded), the length in the seed so
 * that "a" and "a\0" differ. An 8-byte key costs one multiply and the finalizer. */
static uint64_t key_hash(const struct lf_key *k)
{
	const unsigned char *p = k->p;
	size_t len = k->len;
	uint64_t h = 0x6a09e667f3bcc909ull ^ ((uint64_t)len * 0x9e3779b97f4a7c15ull);
	for (; len >= 8; p += 8, len -= 8)
		h = (h ^ load64(p)) * 0xbf58476d1ce4e5b9ull;
	if (len) {
		uint64_t w = 0;
		memcpy(&w, p, len);
		h = (h ^ w) * 0xbf58476d1ce4e5b9ull;
	}
	return fin64(h);
}

static inline struct lf_node *node_of(uintptr_t w)
{
	return (struct lf_node *)(w & ~LF_MARK);
}

/* A value of at most 8 bytes as the word stored in val. */
static inline uint64_t val_pack(const void *val, size_t vlen)
{
	uint64_t w = 0;
	if (vlen)
		memcpy(&w, val, vlen);
	return w;
}

/* ---- lists ----------------------------------------------------------------------------- */

/* CAS on a link (a bucket head or a node's next) that existed before this operation:
 * logged first. Every link store of the index goes through here. */
static inline bool link_cas(_Atomic uintptr_t *link, uintptr_t expect, uintptr_t to)
{
	IDX_LOG(link, sizeof(*link));
	return atomic_compare_exchange_strong_explicit(link, &expect, to, memory_order_acq_rel,
						       memory_order_acquire);
}

/* Unlinks marked @cur, whose frozen successor is @succ, from @prev. The one thread whose
 * CAS succeeds frees @cur: a node is unlinked, hence freed, exactly once. */
static inline bool unlink_node(_Atomic uintptr_t *prev, struct lf_node *cur, uintptr_t succ)
{
	if (!link_cas(prev, (uintptr_t)cur, succ))
		return false;
	IDX_FREE(cur);
	return true;
}

/*
 * Michael's search (writers only, inside a read section): returns the first unmarked
 * node whose key is >= @k, or NULL, with *@prevp the link that pointed at it (a bucket
 * head or the next word of an unmarked node, as read) and *@cmp the node's comparison
 * with @k (1 for NULL). Unlinks and frees every marked node on the way; restarts from
 * the head when such a CAS fails (the predecessor changed or got marked).
 */
static struct lf_node *lf_find(_Atomic uintptr_t *head, const struct lf_key *k,
			       _Atomic uintptr_t **prevp, int *cmp)
{
retry:;
	_Atomic uintptr_t *prev = head;
	uintptr_t cw = atomic_load_explicit(prev, memory_order_acquire); /* never marked */
	for (;;) {
		struct lf_node *cur = (struct lf_node *)cw;
		if (!cur) {
			*prevp = prev;
			*cmp = 1;
			return NULL;
		}
		uintptr_t nw = atomic_load_explicit(&cur->next, memory_order_acquire);
		if (nw & LF_MARK) { /* deleted: help unlink it */
			uintptr_t succ = nw & ~LF_MARK;
			if (!unlink_node(prev, cur, succ))
				goto retry;
			cw = succ;
			continue;
		}
		int c = node_cmp(cur, k);
		if (c >= 0) {
			*prevp = prev;
			*cmp = c;
			return cur;
		}
		prev = &cur->next;
		cw = nw;
	}
}

/* A new node holding @key/@val; fresh memory, so no logging. */
static struct lf_node *node_new(const struct lf_key *k, const void *val, uint32_t vlen)
{
	size_t size = sizeof(struct lf_node) + k->len + (vlen > LF_INLINE_MAX ? vlen : 0);
	struct lf_node *n = IDX_ALLOC(size);
	if (!n)
		return NULL;
	atomic_init(&n->next, 0);
	n->klen = k->len;
	n->vlen = vlen;
	memcpy(n->data, k->p, k->len);
	if (vlen > LF_INLINE_MAX) {
		atomic_init(&n->val, 0);
		memcpy(n->data + k->len, val, vlen);
	} else {
		atomic_init(&n->val, val_pack(val, vlen));
	}
	return n;
}

static inline _Atomic uintptr_t *bucket_of(const struct lf_index *h, const struct lf_key *k)
{
	return &h->buckets[key_hash(k) & h->mask];
}

/* ---- ops ------------------------------------------------------------------------------ */

static int lf_create(const struct tips_index_config *cfg, void **rootp)
{
	if (!cfg || !rootp)
		return TIPS_EINVAL;
	uint64_t want = cfg->expected_keys;
	uint64_t nb = LF_MIN_BUCKETS;
	while (nb < want && nb < LF_MAX_BUCKETS)
		nb <<= 1;
	if (nb > SIZE_MAX / sizeof(uintptr_t))
		return TIPS_ENOMEM; /* cannot be addressed on this platform */

	struct lf_root *root = IDX_ALLOC(sizeof(*root));
	if (!root)
		return TIPS_ENOMEM;
	_Atomic uintptr_t *buckets = IDX_ALLOC((size_t)nb * sizeof(*buckets));
	if (!buckets) {
		IDX_FREE(root);
		return TIPS_ENOMEM;
	}
	/* Fresh blocks, not zeroed by the allocator; no logging needed. Nothing can read
	 * them before create returns. */
	memset((void *)buckets, 0, (size_t)nb * sizeof(*buckets));
	memset(root, 0, sizeof(*root));
	root->nbuckets = nb;
	root->buckets = buckets;
	root->magic = LF_MAGIC;
	*rootp = root;
	return 0;
}

/* No lock or version word exists to reset: marked nodes are logical state, handled by
 * every traversal. */
static int lf_open(void *rootv, void **indexp)
{
	struct lf_root *root = rootv;
	if (!root || !indexp)
		return TIPS_EINVAL;
	if (!IDX_CHECK_BLOCK(root, sizeof(*root)))
		return IDX_CORRUPT(root, "root: expected an allocated block of >= %zu bytes",
				   sizeof(*root));
	if (root->magic != LF_MAGIC || root->nbuckets < LF_MIN_BUCKETS ||
	    root->nbuckets > LF_MAX_BUCKETS || (root->nbuckets & (root->nbuckets - 1)))
		return IDX_CORRUPT(root, "root: magic 0x%llx, %llu buckets: expected magic 0x%llx "
				   "and a power of two >= %u buckets",
				   (unsigned long long)root->magic,
				   (unsigned long long)root->nbuckets,
				   (unsigned long long)LF_MAGIC, LF_MIN_BUCKETS);
	if (!IDX_CHECK_BLOCK((const void *)root->buckets, root->nbuckets * sizeof(uintptr_t)))
		return IDX_CORRUPT(root, "bucket array %p: expected an allocated block of >= %llu "
				   "bytes", (const void *)root->buckets,
				   (unsigned long long)(root->nbuckets * sizeof(uintptr_t)));
	struct lf_index *h = malloc(sizeof(*h));
	if (!h)
		return TIPS_ENOMEM;
	h->root = root;
	h->buckets = root->buckets;
	h->mask = root->nbuckets - 1;
	*indexp = h;
	return 0;
}

static void lf_close(void *index)
{
	free(index);
	IDX_FREE_BARRIER();
}

static int lf_insert(void *index, const void *key, size_t klen, const void *val, size_t vlen)
{
	struct lf_index *h = index;
	int rc = check_kv(key, klen, val, vlen);
	if (rc)
		return rc;
	struct lf_key k = key_make(key, klen);
	_Atomic uintptr_t *head = bucket_of(h, &k), *prev;
	struct lf_node *n = NULL; /* allocated once, on the first attempt that needs it */
	int c;

	IDX_READ_ENTER();
	for (;;) {
		struct lf_node *cur = lf_find(head, &k, &prev, &c);
		if (c == 0) {
			rc = TIPS_EKEYEXISTS;
			break;
		}
		if (!n && !(n = node_new(&k, val, (uint32_t)vlen))) {
			rc = TIPS_ENOMEM;
			break;
		}
		atomic_store_explicit(&n->next, (uintptr_t)cur, memory_order_relaxed);
		if (link_cas(prev, (uintptr_t)cur, (uintptr_t)n)) {
			n = NULL; /* published */
			break;
		}
	}
	IDX_READ_EXIT();
	if (n) /* lost to a concurrent insert of the same key: never published */
		IDX_FREE(n);
	return rc;
}

static int lf_update(void *index, const void *key, size_t klen, const void *val, size_t vlen)
{
	struct lf_index *h = index;
	int rc = check_kv(key, klen, val, vlen);
	if (rc)
		return rc;
	struct lf_key k = key_make(key, klen);
	_Atomic uintptr_t *head = bucket_of(h, &k), *prev;
	struct lf_node *n = NULL; /* the replacement, allocated once if needed */
	int c;

	IDX_READ_ENTER();
	for (;;) {
		struct lf_node *cur = lf_find(head, &k, &prev, &c);
		if (c != 0) {
			rc = TIPS_ENOTFOUND;
			break;
		}
		if (cur->vlen == vlen && vlen <= LF_INLINE_MAX) {
			/* Same short length: in place. If a concurrent remove (or replacement)
			 * of this very key marked cur meanwhile, this store is never read:
			 * readers check the mark after loading val. */
			if (vlen) {
				IDX_LOG_VALUE(&cur->val, sizeof(cur->val));
				atomic_store_explicit(&cur->val, val_pack(val, vlen),
						      memory_order_release);
			}
			break;
		}
		uintptr_t succ = atomic_load_explicit(&cur->next, memory_order_acquire);
		if (succ & LF_MARK)
			continue; /* deleted meanwhile: search again */
		if (!n && !(n = node_new(&k, val, (uint32_t)vlen))) {
			rc = TIPS_ENOMEM;
			break;
		}
		atomic_store_explicit(&n->next, succ, memory_order_relaxed);
		/* Replacement: cur deleted and n in its place, in one CAS. */
		if (!link_cas(&cur->next, succ, (uintptr_t)n | LF_MARK))
			continue;
		uintptr_t repl = (uintptr_t)n;
		n = NULL; /* published */
		if (!unlink_node(prev, cur, repl))
			lf_find(head, &k, &prev, &c); /* unlinks cur */
		break;
	}
	IDX_READ_EXIT();
	if (n) /* key removed meanwhile, or out of memory after all: never published */
		IDX_FREE(n);
	return rc;
}

static int lf_remove(void *index, const void *key, size_t klen)
{
	struct lf_index *h = index;
	if (!key || klen == 0)
		return TIPS_EINVAL;
	if (klen > TIPS_MAX_KEY)
		return TIPS_ENOTFOUND;
	struct lf_key k = key_make(key, klen);
	_Atomic uintptr_t *head = bucket_of(h, &k), *prev;
	int rc = 0, c;

	IDX_READ_ENTER();
	for (;;) {
		struct lf_node *cur = lf_find(head, &k, &prev, &c);
		if (c != 0) {
			rc = TIPS_ENOTFOUND;
			break;
		}
		uintptr_t succ = atomic_load_explicit(&cur->next, memory_order_acquire);
		if (succ & LF_MARK)
			continue;
		/* Logical deletion: the linearization point. */
		if (!link_cas(&cur->next, succ, succ | LF_MARK))
			continue;
		if (!unlink_node(prev, cur, succ))
			lf_find(head, &k, &prev, &c); /* unlinks cur */
		break;
	}
	IDX_READ_EXIT();
	return rc;
}

#ifdef IDX_TIPS
/* Replay's batched logging (plugin.h): the range a write of @key logs first, found by
 * lf_find's walk without its stores. An absent key is linked in at its predecessor's
 * link (a deleted node on the way is skipped: lf_find unlinks it through that same
 * link first); a present key logs nothing ahead: a value of the same short length is
 * overwritten in place with no undo record (IDX_LOG_VALUE), and a replacement (another
 * length) is left to the operation. */
static int lf_log_ahead(void *index, const void *key, size_t klen, size_t vlen,
			void **addr, size_t *size)
{
	struct lf_index *h = index;
	struct lf_key k = key_make(key, klen);
	_Atomic uintptr_t *prev = bucket_of(h, &k);
	int rc = 0;
	IDX_READ_ENTER();
	uintptr_t cw = atomic_load_explicit(prev, memory_order_acquire);
	for (;;) {
		struct lf_node *cur = (struct lf_node *)(cw & ~LF_MARK);
		uintptr_t nw = cur ? atomic_load_explicit(&cur->next, memory_order_acquire) : 0;
		if (cur && (nw & LF_MARK)) {
			cw = nw & ~LF_MARK;
			continue;
		}
		int c = cur ? node_cmp(cur, &k) : 1;
		if (c > 0) {
			*addr = (void *)prev;
			*size = sizeof(*prev);
			rc = 1;
		}
		if (c >= 0)
			break;
		prev = &cur->next;
		cw = nw;
	}
	IDX_READ_EXIT();
	return rc;
}
#endif

static int lf_lookup(void *index, const void *key, size_t klen, void *val, size_t cap,
		     size_t *vlen)
{
	struct lf_index *h = index;
	if (!key || klen == 0 || (cap && !val))
		return TIPS_EINVAL;
	if (klen > TIPS_MAX_KEY)
		return TIPS_ENOTFOUND;
	struct lf_key k = key_make(key, klen);
	_Atomic uintptr_t *head = bucket_of(h, &k);
	int rc = TIPS_ENOTFOUND;

	IDX_READ_ENTER();
	/* A marked next word may be a marked NULL: always strip the mark before testing. */
	const struct lf_node *n = node_of(atomic_load_explicit(head, memory_order_acquire));
	while (n) {
		int c = node_cmp(n, &k);
		if (c > 0)
			break; /* every path is sorted: the key is absent */
		if (c < 0) {
			n = node_of(atomic_load_explicit(&n->next, memory_order_acquire));
			continue;
		}
		/* val first, the mark second: unmarked proves n was live when val was read. */
		uint64_t v = atomic_load_explicit(&n->val, memory_order_acquire);
		uintptr_t w = atomic_load_explicit(&n->next, memory_order_acquire);
		if (w & LF_MARK) {
			n = node_of(w); /* deleted; a replacement, if any, follows it */
			continue;
		}
		uint32_t len = n->vlen;
		if (len == 8 && cap >= 8) {
			memcpy(val, &v, 8); /* the common case: one store, no length math */
		} else if (cap) {
			const void *src = len > LF_INLINE_MAX ? (const void *)(n->data + n->klen)
							      : (const void *)&v;
			memcpy(val, src, len < cap ? len : cap);
		}
		if (vlen)
			*vlen = len;
		rc = IDX_FOUND(len, cap);
		break;
	}
	IDX_READ_EXIT();
	return rc;
}

/* Replay's look-ahead (plugin.h): @deep 0 loads @key's list head, for writing; @deep
 * 1 reads it, now in cache, and loads the list's first node. A head read outside a
 * read section may point at a node being freed: it is only prefetched. @deep 2, a
 * writer's outcome lookup to come: that lookup, made now. */
static void lf_prefetch(void *index, const void *key, size_t klen, int deep)
{
	struct lf_index *h = index;
	if (deep == 2) {
		IDX_LOOKUP_AHEAD(lf_lookup, index, key, klen);
		return;
	}
	struct lf_key k = key_make(key, klen);
	_Atomic uintptr_t *head = bucket_of(h, &k);
	if (!deep)
		__builtin_prefetch((const void *)head, 1, 3);
	else
		__builtin_prefetch(node_of(atomic_load_explicit(head, memory_order_relaxed)), 1, 3);
}

/*
 * Scan: visits every list, LF_SCAN_BATCH buckets per read section (short sections keep
 * grace periods and reclamation short), keeping the @count smallest live keys >= @start
 * (scan_topk.h); then calls @fn in key order outside any read section, so @fn may call
 * back into the index. The result is not a snapshot: a key written while the scan runs
 * may or may not be seen (the framework merges the newer writes); no key is reported
 * twice, since a path through a list never holds two unmarked nodes with one key.
 */
static long lf_scan(void *index, const void *start, size_t klen, size_t count,
		    tips_scan_fn fn, void *arg)
{
	struct lf_index *h = index;
	if (!fn || (klen && !start))
		return TIPS_EINVAL;
	if (count == 0)
		return 0;

	struct topk t;
	topk_init(&t, count);
	int rc = 0;
	uint64_t nbuckets = h->mask + 1;
	for (uint64_t b0 = 0; b0 < nbuckets && rc == 0; b0 += LF_SCAN_BATCH) {
		uint64_t end = b0 + LF_SCAN_BATCH < nbuckets ? b0 + LF_SCAN_BATCH : nbuckets;
		IDX_READ_ENTER();
		for (uint64_t b = b0; b < end && rc == 0; b++) {
			const struct lf_node *n = node_of(
				atomic_load_explicit(&h->buckets[b], memory_order_acquire));
			for (const struct lf_node *cur; n && rc == 0;) {
				cur = n;
				uint64_t v = atomic_load_explicit(&cur->val, memory_order_acquire);
				uintptr_t w = atomic_load_explicit(&cur->next, memory_order_acquire);
				n = node_of(w);
				if (w & LF_MARK)
					continue;
				if (klen && topk_key_cmp(cur->data, cur->klen, start, klen) < 0)
					continue;
				const void *src = cur->vlen > LF_INLINE_MAX
							  ? (const void *)(cur->data + cur->klen)
							  : (const void *)&v;
				rc = topk_offer(&t, cur->data, cur->klen, src, cur->vlen);
			}
		}
		IDX_READ_EXIT();
	}
	long passed = rc ? rc : topk_emit(&t, fn, arg);
	topk_free(&t);
	return passed;
}

/* A node a list links to, checked before the walk follows it: a block holding its
 * header, key (1..TIPS_MAX_KEY bytes) and, beyond 8 bytes, its value. */
static int node_check(const struct lf_node *n, const void *from)
{
	if (!IDX_CHECK_BLOCK(n, sizeof(*n)))
		return IDX_CORRUPT(from, "link %p: expected an allocated block of >= %zu bytes",
				   (const void *)n, sizeof(*n));
	size_t bytes = sizeof(*n) + n->klen + (n->vlen > LF_INLINE_MAX ? n->vlen : 0);
	if (n->klen == 0 || n->klen > TIPS_MAX_KEY || n->vlen > TIPS_MAX_VALUE ||
	    !IDX_CHECK_BLOCK(n, bytes))
		return IDX_CORRUPT(n, "klen %u, vlen %u: expected 1..%u key bytes and a node "
				   "that fits its block", n->klen, n->vlen, TIPS_MAX_KEY);
	return 0;
}

/* Root, bucket array, then every node linked in a list (a marked node still linked is
 * owned too: its unlinker will free it), each once and checked (node_check) before it
 * is followed; a cycle is caught by the caller's bound on fn calls. Stops at (and
 * returns) fn's first non-zero. The contract says no write runs meanwhile. */
static int lf_walk(void *index, tips_walk_fn fn, void *arg)
{
	struct lf_index *h = index;
	if (!fn)
		return TIPS_EINVAL;
	int rc = fn(h->root, arg);
	if (rc)
		return rc;
	rc = fn((const void *)h->buckets, arg);
	for (uint64_t b = 0; b <= h->mask && rc == 0; b++) {
		struct lf_node *n = node_of(atomic_load_explicit(&h->buckets[b],
							       memory_order_acquire));
		const void *from = &h->buckets[b];
		while (n && rc == 0) {
			struct lf_node *cur = n;
			if ((rc = node_check(cur, from)))
				break;
			from = cur;
			n = node_of(atomic_load_explicit(&cur->next, memory_order_acquire));
			rc = fn(cur, arg);
		}
	}
	return rc;
}

const struct tips_index_ops IDX_SYM(ops) = {
	.name = IDX_NAME,
	.concurrency = "lock-free (CAS) reads and writes, Michael's ordered bucket lists",
	.create = lf_create,
	.open = lf_open,
	.close = lf_close,
	.insert = lf_insert,
	.update = lf_update,
	.remove = lf_remove,
	.lookup = lf_lookup,
	.scan = lf_scan,
	.walk = lf_walk,
	.prefetch = lf_prefetch,
#ifdef IDX_TIPS
	.log_ahead = lf_log_ahead,
#endif
};
