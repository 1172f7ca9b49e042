/*
 * lfbst.c - "lfbst": a lock-free external (leaf-oriented) binary search tree after
 * Natarajan and Mittal (PPoPP'14, "Fast concurrent lock-free binary search trees"),
 * written once against the hooks of idx_hooks.h and built as dram-lfbst (volatile
 * original) and tips-lfbst (TIPS plug-in, ATC'21 §3.2.6).
 *
 * Structure. Internal nodes only route; leaves hold the keys and values. Every
 * internal node has exactly two children and a routing key: keys < it go left, keys
 * >= it go right. The tree is not balanced. As in the paper, three sentinel keys
 * inf0 < inf1 < inf2, greater than every real key, keep the top fixed: R (key inf2,
 * left S, right leaf inf2) and S (key inf1, left: the tree of real keys, whose last
 * leaf is inf0; right: leaf inf1). R, S and the three sentinel leaves live inside the
 * root block and are never removed. A sentinel is a node whose `kind` says inf0/1/2
 * (its prefix word is all ones, so a real key compares below it with the same one
 * compare that orders real keys; `kind` only breaks the tie).
 * Each real key costs two blocks: its leaf and the internal node its insert created
 * (n keys: root + 2n blocks; walk reports exactly these).
 *
 * Keys. A node stores the key's first 8 bytes as a big-endian integer (`pfx`, zero
 * padded) and its length, so an 8-byte key (or any key that differs from the node's
 * key within 8 bytes) is routed and matched with integer compares and no pointer chase.
 * A key longer than 8 bytes is also copied whole after the node header, internal nodes
 * included (an internal node outlives the leaf whose key it copied). Order: memcmp
 * over the common length, the shorter key first (for equal prefixes of which one key
 * is <= 8 bytes, the shorter is a prefix of the longer: compare lengths).
 *
 * Values. A value of at most 8 bytes lives in the leaf's atomic word `vword` (zero
 * padded) and is overwritten in place when an update keeps its length: IDX_LOG_VALUE of
 * 8 bytes (no undo record) and one atomic store, so a reader sees the old or the new word, never a mix. A
 * longer value follows the key bytes and is immutable. A leaf's klen and vlen never
 * change. Every other update replaces the leaf: a new leaf (same key) is CASed into the
 * parent's edge in place of the old one, which the updater then frees.
 *
 * Concurrency (lock-free writers, lock-free readers). Each child edge is a word holding
 * the child's address and two mark bits: FLAG (the edge's target leaf is being deleted)
 * and TAG (the edge is frozen because its sibling edge is flagged). A marked edge never
 * changes again, and every CAS expects an unmarked edge. Writers start with seek(),
 * which walks to the key's leaf and records (ancestor, successor, parent, leaf): the
 * ancestor is the last node reached over an untagged edge, the successor its child on
 * the path. Insert CASes the parent's edge from the leaf to a new internal node whose
 * children are the leaf and the new leaf. Remove flags the parent's edge to the leaf
 * (injection), then cleans up: tags the sibling edge and CASes the ancestor's edge from
 * the successor to the sibling (keeping the sibling's flag, dropping its tag), which
 * splices out the parent and the leaf, and with them every node between successor and
 * parent (each such node has a tagged edge on the path and a flagged leaf off it: other
 * removes in progress, completed by the same splice). A writer whose CAS fails on an
 * edge that still points at its leaf and is marked helps the pending remove (cleanup)
 * and retries. Readers (lookup, scan) never write; every traversal runs between
 * IDX_READ_ENTER and IDX_READ_EXIT, so a node spliced out meanwhile stays readable.
 *
 * Linearization. Insert and leaf replacement: their edge CAS. Remove: the splice that
 * unlinks its leaf (until then the key is still found, by lookups, inserts - which
 * return TIPS_EKEYEXISTS - and updates). An in-place update is linearized at its store,
 * or, if the store lands on a leaf already spliced out or replaced (possible only in
 * the dram build, where writes of one key may race), just before that splice or
 * replacement: every operation that saw the leaf began before it, so all of them fit.
 *
 * Reclamation: exactly once. The spliced-out region is frozen (all its edges marked),
 * so no other CAS can ever succeed on it; the thread whose splice CAS succeeded frees
 * it (free_region: the successor..parent path and the flagged leaves hanging off it,
 * the sibling excluded). A replaced leaf is freed by the updater whose CAS replaced it;
 * nodes that lost their race were never published and are freed by their creator. A
 * remove returns only once its leaf is spliced out (its own splice, or a helper's), so
 * between operations no edge is marked: the tree is quiescent-clean.
 *
 * Invariant (what makes the tips build crash consistent): every store to memory that
 * existed before the current operation is preceded by IDX_LOG of exactly the bytes it
 * stores, or, for the in-place value (value_store) of the key being updated, by
 * IDX_LOG_VALUE (no undo record: recovery replays the update). Those stores are: the
 * edge CASes (edge_cas: insert, replacement, flag, splice), the tag (edge_tag, an
 * atomic OR) and the in-place value. Nodes
 * are filled before the CAS that publishes them, with no log (fresh blocks). Recovery
 * rolls the index back to the last reclamation, where no operation was in flight, so
 * no mark survives a crash; the code does not rely on it (helping clears any marked
 * edge a writer meets, walk masks the marks). No lock word lives in the index, so
 * open() has nothing to reset. The code never flushes or fences.
 *
 * Conversion cost: 9 hook sites - IDX_ALLOC 3 (root, leaf, internal node), IDX_FREE 3
 * (free_region: a spliced-out leaf, a spliced-out internal node; node_drop: a replaced
 * leaf, or a node never published because its write failed or lost a race), IDX_LOG 3
 * (edge_cas, edge_tag, and IDX_LOG_VALUE in value_store). insert uses 3 (two
 * IDX_ALLOCs, edge_cas's log); an in-place update 1, with no undo record. The read sections (5 IDX_READ_ENTER/EXIT pairs) are not
 * conversion: the volatile original needs them too, for safe memory reclamation.
 *
 * Scan. An in-order traversal from the start key with an explicit stack (no recursion):
 * descend toward the lower bound, pushing the right subtree whenever it goes left; visit
 * the leaf; pop. Sentinel leaves are skipped, and so is any leaf not above the last key
 * collected, so the output is strictly ascending even when a subtree moved up by a
 * splice meanwhile received keys from a wider range. Up to @count pairs are copied into
 * a private buffer inside one read section, then @fn is called outside it (it may call
 * back into the index). Not a snapshot: a key written during the scan may or may not be
 * seen; a key present throughout is seen.
 *
 * Limits. Unbalanced: keys inserted in sorted order build a path (depth n), so each
 * operation costs O(n) and inserting n sorted keys O(n^2); random-order keys give
 * expected depth O(log n). Scans and walks use a heap-allocated stack, so a deep
 * tree costs memory, not the C stack.
 */
#define _GNU_SOURCE
#define IDX_BASE_NAME "lfbst"
#include "indexes/idx_hooks.h"
#include "indexes/indexes.h"
#include "util/kv.h"

#include <endian.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define LFBST_MAGIC 0x3174736266627074ull /* "tpbfbst1": layout version 1 */

/* Mark bits of a child edge (nodes are at least 8-byte aligned). */
#define LF_FLAG ((uintptr_t)1) /* the edge's target (a leaf) is being removed */
#define LF_TAG ((uintptr_t)2)  /* frozen: the sibling edge is flagged */
#define LF_MARKS (LF_FLAG | LF_TAG)

/* Node kinds: a real key, or one of the paper's sentinels (inf0 < inf1 < inf2, each
 * greater than every real key). */
enum { LF_REAL = 0, LF_INF0 = 1, LF_INF1 = 2, LF_INF2 = 3 };

/* ---- persistent layout (in PM in the tips build) ---------------------------------- */

/* The first 16 bytes of every node; immutable once the node is published. */
struct lf_hdr {
	uint64_t pfx;  /* the key's first min(klen, 8) bytes, big-endian, zero padded;
	                  UINT64_MAX for a sentinel */
	uint16_t klen; /* key bytes, 1..TIPS_MAX_KEY (0 for a sentinel) */
	uint8_t kind;  /* LF_REAL or LF_INF0/1/2 */
	uint8_t leaf;  /* 1: struct lf_leaf, 0: struct lf_inner */
	uint32_t vlen; /* leaf: value bytes, 0..TIPS_MAX_VALUE; internal node: 0 */
};

/* An internal node: 32 bytes, then klen key bytes if klen > 8. */
struct lf_inner {
	struct lf_hdr h;
	_Atomic uintptr_t child[2]; /* left, right: child address | LF_FLAG | LF_TAG */
};

/* A leaf: 24 bytes, then klen key bytes if klen > 8, then vlen value bytes if vlen > 8. */
struct lf_leaf {
	struct lf_hdr h;
	_Atomic uint64_t vword; /* the value if vlen <= 8 (zero padded), else 0 */
};

/* The root object returned by create. The sentinel nodes are never freed. */
struct lfbst_root {
	uint64_t magic;        /* LFBST_MAGIC once create has filled the root */
	uint64_t reserved;     /* 0 */
	struct lf_inner r;     /* R: key inf2; left S, right inf[2] */
	struct lf_inner s;     /* S: key inf1; left the real keys (last leaf inf[0]), right inf[1] */
	struct lf_leaf inf[3]; /* the sentinel leaves inf0, inf1, inf2 (vlen 0) */
};

/* ---- volatile handle (DRAM, rebuilt by every open) ----------------------------------- */

struct lfbst {
	struct lfbst_root *root;
	struct lf_inner *R, *S; /* &root->r, &root->s */
};

/* ---- keys ---------------------------------------------------------------------------- */

/* A key being searched for: its prefix word, its length, its bytes. */
struct skey {
	uint64_t pfx;
	size_t klen;
	const unsigned char *k;
};

static inline void skey_init(struct skey *s, const void *key, size_t klen)
{
	uint64_t w = 0;
	memcpy(&w, key, klen < 8 ? klen : 8);
	s->pfx = be64toh(w);
	s->klen = klen;
	s->k = key;
}

/* The bytes after a node's fixed part: its full key if klen > 8. */
static inline unsigned char *node_key(const struct lf_hdr *h)
{
	return (unsigned char *)h + (h->leaf ? sizeof(struct lf_leaf) : sizeof(struct lf_inner));
}

/* The search key taken from a node (valid while the node is). */
static inline void skey_of_node(struct skey *s, const struct lf_hdr *h)
{
	s->pfx = h->pfx;
	s->klen = h->klen;
	s->k = node_key(h);
}

/* <0, 0, >0 as @s sorts before, equal to, after the key of node @h. */
static inline int kcmp(const struct skey *s, const struct lf_hdr *h)
{
	if (s->pfx != h->pfx)
		return s->pfx < h->pfx ? -1 : 1;
	if (h->kind != LF_REAL)
		return -1;
	if (s->klen > 8 && h->klen > 8) {
		size_t m = s->klen < h->klen ? s->klen : h->klen;
		int r = memcmp(s->k + 8, node_key(h) + 8, m - 8);
		if (r)
			return r;
	}
	return (s->klen > h->klen) - (s->klen < h->klen);
}

static inline bool leaf_has_key(const struct lf_leaf *l, const struct skey *s)
{
	return l->h.pfx == s->pfx && l->h.klen == s->klen && l->h.kind == LF_REAL &&
	       (s->klen <= 8 || memcmp(node_key(&l->h) + 8, s->k + 8, s->klen - 8) == 0);
}

/* The key bytes of node @h into @out (klen bytes). */
static inline void node_key_copy(const struct lf_hdr *h, unsigned char *out)
{
	if (h->klen <= 8) {
		uint64_t be = htobe64(h->pfx);
		memcpy(out, &be, h->klen);
	} else {
		memcpy(out, node_key(h), h->klen);
	}
}

/* ---- values -------------------------------------------------------------------------- */

static inline uint64_t vword_of(const void *val, size_t vlen)
{
	uint64_t w = 0;
	if (vlen)
		memcpy(&w, val, vlen);
	return w;
}

/* Where a value longer than 8 bytes lives: after the key bytes. */
static inline unsigned char *leaf_value(const struct lf_leaf *l)
{
	return node_key(&l->h) + (l->h.klen > 8 ? l->h.klen : 0);
}

/* Copies up to @cap bytes of @l's value into @out. */
static inline void leaf_value_copy(struct lf_leaf *l, void *out, size_t cap)
{
	size_t n = l->h.vlen < cap ? l->h.vlen : cap;
	if (l->h.vlen <= 8) {
		uint64_t w = atomic_load_explicit(&l->vword, memory_order_acquire);
		memcpy(out, &w, n);
	} else {
		memcpy(out, leaf_value(l), n);
	}
}

/* The in-place update of a value of at most 8 bytes (same length), by an update of the
 * leaf's own key: the word holds nothing but the value, so no undo record. */
static inline void value_store(struct lf_leaf *l, uint64_t w)
{
	IDX_LOG_VALUE((void *)&l->vword, sizeof(l->vword));
	atomic_store_explicit(&l->vword, w, memory_order_release);
}

/* ---- edges --------------------------------------------------------------------------- */

static inline uintptr_t edge_load(_Atomic uintptr_t *e)
{
	return atomic_load_explicit(e, memory_order_acquire);
}

static inline struct lf_hdr *edge_node(uintptr_t e)
{
	return (struct lf_hdr *)(e & ~LF_MARKS);
}

static inline _Atomic uintptr_t *child_edge(struct lf_hdr *h, const struct skey *s)
{
	return &((struct lf_inner *)h)->child[kcmp(s, h) >= 0];
}

/* Every edge store but the tag goes through here. On failure *expected is the edge's
 * current value. */
static inline bool edge_cas(_Atomic uintptr_t *e, uintptr_t *expected, uintptr_t to)
{
	IDX_LOG((void *)e, sizeof(*e));
	return atomic_compare_exchange_strong_explicit(e, expected, to, memory_order_acq_rel,
						       memory_order_acquire);
}

/* Tags edge @e (freezes it); returns its value, tag included. */
static inline uintptr_t edge_tag(_Atomic uintptr_t *e)
{
	IDX_LOG((void *)e, sizeof(*e));
	return atomic_fetch_or_explicit(e, LF_TAG, memory_order_acq_rel) | LF_TAG;
}

/* ---- nodes --------------------------------------------------------------------------- */

/* A new leaf for @s with @val; fresh memory, so no logging. */
static struct lf_leaf *leaf_new(const struct skey *s, const void *val, uint32_t vlen)
{
	size_t kb = s->klen > 8 ? s->klen : 0, vb = vlen > 8 ? vlen : 0;
	struct lf_leaf *l = IDX_ALLOC(sizeof(*l) + kb + vb);
	if (!l)
		return NULL;
	l->h.pfx = s->pfx;
	l->h.klen = (uint16_t)s->klen;
	l->h.kind = LF_REAL;
	l->h.leaf = 1;
	l->h.vlen = vlen;
	atomic_init(&l->vword, vlen <= 8 ? vword_of(val, vlen) : 0);
	unsigned char *p = (unsigned char *)(l + 1);
	if (kb)
		memcpy(p, s->k, kb);
	if (vb)
		memcpy(p + kb, val, vb);
	return l;
}

/* Bytes of an internal node routing on a key of @klen bytes. */
static inline size_t inner_size(size_t klen)
{
	return sizeof(struct lf_inner) + (klen > 8 ? klen : 0);
}

/* Fills fresh internal node @n: routing key copied from node @kh, children @l and @r. */
static void inner_fill(struct lf_inner *n, const struct lf_hdr *kh, uintptr_t l, uintptr_t r)
{
	n->h.pfx = kh->pfx;
	n->h.klen = kh->klen;
	n->h.kind = kh->kind;
	n->h.leaf = 0;
	n->h.vlen = 0;
	atomic_init(&n->child[0], l);
	atomic_init(&n->child[1], r);
	if (kh->klen > 8)
		memcpy(n + 1, node_key(kh), kh->klen);
}

/* Frees a node this operation allocated and never published, or one it unlinked. */
static inline void node_drop(void *n)
{
	IDX_FREE(n);
}

/*
 * Frees what a successful splice unlinked: the path from @n (the successor) down to the
 * parent, and off it the flagged leaves, but not @keep (the sibling, moved up). Every
 * edge in this region is marked, hence frozen, so it reads the same as at the splice;
 * each internal node of the region has exactly one child in the region that is not a
 * leaf, or none (the parent).
 */
static void free_region(struct lf_inner *n, const struct lf_hdr *keep)
{
	while (n) {
		struct lf_inner *next = NULL;
		for (int d = 0; d < 2; d++) {
			struct lf_hdr *c = edge_node(edge_load(&n->child[d]));
			if (c == keep)
				continue;
			if (c->leaf)
				IDX_FREE(c);
			else
				next = (struct lf_inner *)c;
		}
		IDX_FREE(n);
		n = next;
	}
}

/* ---- seek and cleanup (call inside a read section) ----------------------------------- */

struct seekrec {
	struct lf_inner *succ;     /* successor: the ancestor's child on the path */
	struct lf_inner *parent;   /* the leaf's parent */
	struct lf_leaf *leaf;      /* where the search for the key ends */
	_Atomic uintptr_t *sedge;  /* the ancestor's edge to the successor */
	_Atomic uintptr_t *pedge;  /* the parent's edge to the leaf */
};

/* Natarajan-Mittal seek: the ancestor is the last node entered over an untagged edge. */
static void seek(struct lfbst *t, const struct skey *s, struct seekrec *r)
{
	struct lf_inner *succ = t->S, *par = t->S;
	_Atomic uintptr_t *sedge = &t->R->child[0], *pedge = &t->S->child[0];
	uintptr_t pe = edge_load(pedge);
	struct lf_hdr *cur = edge_node(pe);
	while (!cur->leaf) {
		_Atomic uintptr_t *cedge = child_edge(cur, s);
		uintptr_t ce = edge_load(cedge);
		if (!(pe & LF_TAG)) { /* par -> cur unfrozen: par becomes the ancestor */
			succ = (struct lf_inner *)cur;
			sedge = pedge;
		}
		par = (struct lf_inner *)cur;
		pedge = cedge;
		pe = ce;
		cur = edge_node(ce);
	}
	r->succ = succ;
	r->parent = par;
	r->leaf = (struct lf_leaf *)cur;
	r->sedge = sedge;
	r->pedge = pedge;
}

/*
 * Completes the remove pending at @r's parent: a flagged leaf there (the one on @s's
 * side, or else its sibling). Tags the other edge, then splices the successor out by
 * pointing the ancestor's edge at the kept child. True if this call's splice did it
 * (and freed the region); false if the ancestor's edge had changed: seek again.
 */
static bool cleanup(const struct seekrec *r)
{
	struct lf_inner *p = r->parent;
	_Atomic uintptr_t *keep_edge =
		r->pedge == &p->child[0] ? &p->child[1] : &p->child[0];
	if (!(edge_load(r->pedge) & LF_FLAG)) /* the flagged leaf is the sibling: keep ours */
		keep_edge = r->pedge;
	uintptr_t keep = edge_tag(keep_edge);
	uintptr_t expected = (uintptr_t)r->succ;
	if (!edge_cas(r->sedge, &expected, keep & ~LF_TAG))
		return false;
	free_region(r->succ, edge_node(keep));
	return true;
}

/* After a failed CAS on @r->pedge that found @seen there: help if it still points at
 * the leaf and is marked (a remove is pending there). */
static inline void help_if_marked(const struct seekrec *r, uintptr_t seen)
{
	if (edge_node(seen) == &r->leaf->h && (seen & LF_MARKS))
		cleanup(r);
}

/* ---- ops ------------------------------------------------------------------------------ */

static void sentinel_hdr(struct lf_hdr *h, uint8_t kind, uint8_t leaf)
{
	h->pfx = UINT64_MAX;
	h->klen = 0;
	h->kind = kind;
	h->leaf = leaf;
	h->vlen = 0;
}

static int lf_create(const struct tips_index_config *cfg, void **rootp)
{
	if (!cfg || !rootp)
		return TIPS_EINVAL;
	struct lfbst_root *root = IDX_ALLOC(sizeof(*root));
	if (!root)
		return TIPS_ENOMEM;
	/* A fresh block: no logging. */
	memset(root, 0, sizeof(*root));
	for (int i = 0; i < 3; i++) {
		sentinel_hdr(&root->inf[i].h, (uint8_t)(LF_INF0 + i), 1);
		atomic_init(&root->inf[i].vword, 0);
	}
	sentinel_hdr(&root->s.h, LF_INF1, 0);
	atomic_init(&root->s.child[0], (uintptr_t)&root->inf[0]);
	atomic_init(&root->s.child[1], (uintptr_t)&root->inf[1]);
	sentinel_hdr(&root->r.h, LF_INF2, 0);
	atomic_init(&root->r.child[0], (uintptr_t)&root->s);
	atomic_init(&root->r.child[1], (uintptr_t)&root->inf[2]);
	root->magic = LFBST_MAGIC;
	*rootp = root;
	return 0;
}

static int lf_open(void *rootv, void **indexp)
{
	struct lfbst_root *root = rootv;
	if (!root || !indexp)
		return TIPS_EINVAL;
	if (!IDX_CHECK_BLOCK(root, sizeof(*root)))
		return IDX_CORRUPT(root, "root: expected an allocated block of >= %zu bytes",
				   sizeof(*root));
	if (root->magic != LFBST_MAGIC || root->r.h.kind != LF_INF2 || root->r.h.leaf ||
	    root->s.h.kind != LF_INF1 || root->s.h.leaf ||
	    edge_node(atomic_load(&root->r.child[0])) != &root->s.h)
		return IDX_CORRUPT(root, "root: expected magic 0x%llx and the sentinels R (inf2) "
				   "and S (inf1), R's left child S",
				   (unsigned long long)LFBST_MAGIC);
	struct lfbst *t = malloc(sizeof(*t));
	if (!t)
		return TIPS_ENOMEM;
	t->root = root;
	t->R = &root->r;
	t->S = &root->s;
	*indexp = t;
	return 0;
}

static void lf_close(void *index)
{
	free(index);
	IDX_FREE_BARRIER();
}

static int lf_insert(void *index, const void *key, size_t klen, const void *val, size_t vlen)
{
	struct lfbst *t = index;
	int rc = check_kv(key, klen, val, vlen);
	if (rc)
		return rc;
	struct skey s;
	skey_init(&s, key, klen);
	struct lf_leaf *nl = NULL;  /* the new leaf, made once */
	struct lf_inner *ni = NULL; /* the new internal node, refilled on each attempt */
	size_t ni_size = 0;

	IDX_READ_ENTER();
	for (;;) {
		struct seekrec r;
		seek(t, &s, &r);
		struct lf_leaf *l = r.leaf;
		if (leaf_has_key(l, &s)) {
			rc = TIPS_EKEYEXISTS;
			break;
		}
		if (!nl && !(nl = leaf_new(&s, val, (uint32_t)vlen))) {
			rc = TIPS_ENOMEM;
			break;
		}
		/* The routing key is the larger of the two; the smaller goes left. */
		bool before = kcmp(&s, &l->h) < 0;
		const struct lf_hdr *kh = before ? &l->h : &nl->h;
		if (ni && ni_size < inner_size(kh->klen)) {
			node_drop(ni);
			ni = NULL;
		}
		if (!ni) {
			ni_size = inner_size(kh->klen);
			if (!(ni = IDX_ALLOC(ni_size))) {
				rc = TIPS_ENOMEM;
				break;
			}
		}
		inner_fill(ni, kh, before ? (uintptr_t)nl : (uintptr_t)l,
			   before ? (uintptr_t)l : (uintptr_t)nl);
		uintptr_t seen = (uintptr_t)l;
		if (edge_cas(r.pedge, &seen, (uintptr_t)ni)) {
			nl = NULL;
			ni = NULL;
			break;
		}
		help_if_marked(&r, seen);
	}
	IDX_READ_EXIT();
	if (nl)
		node_drop(nl);
	if (ni)
		node_drop(ni);
	return rc;
}

static int lf_update(void *index, const void *key, size_t klen, const void *val, size_t vlen)
{
	struct lfbst *t = index;
	int rc = check_kv(key, klen, val, vlen);
	if (rc)
		return rc;
	struct skey s;
	skey_init(&s, key, klen);
	struct lf_leaf *nl = NULL; /* the replacement leaf, if one is needed */

	IDX_READ_ENTER();
	for (;;) {
		struct seekrec r;
		seek(t, &s, &r);
		struct lf_leaf *l = r.leaf;
		if (!leaf_has_key(l, &s)) {
			rc = TIPS_ENOTFOUND;
			break;
		}
		if (l->h.vlen == vlen && vlen <= 8) { /* in place (or nothing, if empty) */
			if (vlen)
				value_store(l, vword_of(val, vlen));
			break;
		}
		if (!nl && !(nl = leaf_new(&s, val, (uint32_t)vlen))) {
			rc = TIPS_ENOMEM;
			break;
		}
		uintptr_t seen = (uintptr_t)l;
		if (edge_cas(r.pedge, &seen, (uintptr_t)nl)) {
			nl = NULL;
			node_drop(l); /* unlinked by this CAS: no one else frees it */
			break;
		}
		help_if_marked(&r, seen);
	}
	IDX_READ_EXIT();
	if (nl)
		node_drop(nl);
	return rc;
}

static int lf_remove(void *index, const void *key, size_t klen)
{
	struct lfbst *t = index;
	if (!key || klen == 0)
		return TIPS_EINVAL;
	if (klen > TIPS_MAX_KEY)
		return TIPS_ENOTFOUND;
	struct skey s;
	skey_init(&s, key, klen);
	struct lf_leaf *victim = NULL; /* set once this remove has flagged its leaf */
	int rc = 0;

	IDX_READ_ENTER();
	for (;;) {
		struct seekrec r;
		seek(t, &s, &r);
		if (!victim) { /* injection */
			struct lf_leaf *l = r.leaf;
			if (!leaf_has_key(l, &s)) {
				rc = TIPS_ENOTFOUND;
				break;
			}
			uintptr_t seen = (uintptr_t)l;
			if (edge_cas(r.pedge, &seen, (uintptr_t)l | LF_FLAG)) {
				victim = l;
				if (cleanup(&r))
					break;
			} else {
				help_if_marked(&r, seen);
			}
		} else { /* cleanup: done once the leaf is no longer where the key leads */
			if (r.leaf != victim || cleanup(&r))
				break;
		}
	}
	IDX_READ_EXIT();
	return rc;
}

static int lf_lookup(void *index, const void *key, size_t klen, void *val, size_t cap,
		     size_t *vlen)
{
	struct lfbst *t = index;
	if (!key || klen == 0 || (cap && !val))
		return TIPS_EINVAL;
	if (klen > TIPS_MAX_KEY)
		return TIPS_ENOTFOUND;
	struct skey s;
	skey_init(&s, key, klen);
	int rc = 0;

	IDX_READ_ENTER();
	struct lf_hdr *cur = edge_node(edge_load(&t->S->child[0]));
	while (!cur->leaf)
		cur = edge_node(edge_load(child_edge(cur, &s)));
	struct lf_leaf *l = (struct lf_leaf *)cur;
	if (leaf_has_key(l, &s)) {
		if (cap)
			leaf_value_copy(l, val, cap);
		if (vlen)
			*vlen = l->h.vlen;
		rc = IDX_FOUND(l->h.vlen, cap);
	} else {
		rc = TIPS_ENOTFOUND;
	}
	IDX_READ_EXIT();
	return rc;
}

/* ---- explicit stack (scan, walk) ----------------------------------------------------- */

struct nstack {
	struct lf_hdr **a;
	size_t n, cap;
	struct lf_hdr *inl[64]; /* the first 64 entries: no allocation for a shallow tree */
};

static inline void nstack_init(struct nstack *st)
{
	st->a = st->inl;
	st->n = 0;
	st->cap = sizeof(st->inl) / sizeof(st->inl[0]);
}

static inline int nstack_push(struct nstack *st, struct lf_hdr *h)
{
	if (st->n == st->cap) {
		size_t cap = 2 * st->cap;
		struct lf_hdr **a = st->a == st->inl ? malloc(cap * sizeof(*a))
						     : realloc(st->a, cap * sizeof(*a));
		if (!a)
			return TIPS_ENOMEM;
		if (st->a == st->inl)
			memcpy(a, st->inl, sizeof(st->inl));
		st->a = a;
		st->cap = cap;
	}
	st->a[st->n++] = h;
	return 0;
}

static inline void nstack_free(struct nstack *st)
{
	if (st->a != st->inl)
		free(st->a);
}

/* ---- scan ----------------------------------------------------------------------------- */

/* Private copies of the pairs a scan collects: entries, and one byte arena. */
struct scan_ent {
	size_t off; /* key at bytes + off, value right after it */
	uint32_t klen, vlen;
};

struct scan_buf {
	struct scan_ent *e;
	size_t n, cap;
	unsigned char *bytes;
	size_t used, bcap;
};

static int scan_add(struct scan_buf *b, struct lf_leaf *l)
{
	size_t need = (size_t)l->h.klen + l->h.vlen;
	if (b->n == b->cap) {
		size_t cap = b->cap ? 2 * b->cap : 64;
		struct scan_ent *e = realloc(b->e, cap * sizeof(*e));
		if (!e)
			return TIPS_ENOMEM;
		b->e = e;
		b->cap = cap;
	}
	if (b->bcap - b->used < need) {
		size_t cap = b->bcap ? 2 * b->bcap : 4096;
		while (cap - b->used < need)
			cap *= 2;
		unsigned char *p = realloc(b->bytes, cap);
		if (!p)
			return TIPS_ENOMEM;
		b->bytes = p;
		b->bcap = cap;
	}
	unsigned char *p = b->bytes + b->used;
	node_key_copy(&l->h, p);
	leaf_value_copy(l, p + l->h.klen, l->h.vlen);
	b->e[b->n++] = (struct scan_ent){ b->used, l->h.klen, l->h.vlen };
	b->used += need;
	return 0;
}

/*
 * Collects up to @count pairs with keys >= @start in order (see the header: a lock-free
 * in-order traversal; leaves not above the last key taken are skipped), then calls @fn
 * for each outside the read section. Returns the number passed to @fn.
 */
static long lf_scan(void *index, const void *start, size_t klen, size_t count, tips_scan_fn fn,
		    void *arg)
{
	struct lfbst *t = index;
	if (!fn || (klen && !start))
		return TIPS_EINVAL;
	if (count == 0)
		return 0;

	struct scan_buf b = { 0 };
	struct nstack st;
	nstack_init(&st);
	/* Lower bound: @start (inclusive), then the last key taken (exclusive). */
	struct skey lo = { 0 };
	bool have_lo = klen > 0, incl = true;
	if (have_lo)
		skey_init(&lo, start, klen);
	int rc = 0;

	IDX_READ_ENTER();
	struct lf_hdr *n = edge_node(edge_load(&t->S->child[0]));
	for (;;) {
		while (!n->leaf && rc == 0) {
			struct lf_inner *in = (struct lf_inner *)n;
			if (have_lo && kcmp(&lo, n) >= 0) { /* the left subtree is below the bound */
				n = edge_node(edge_load(&in->child[1]));
				continue;
			}
			rc = nstack_push(&st, edge_node(edge_load(&in->child[1])));
			n = edge_node(edge_load(&in->child[0]));
		}
		if (rc)
			break;
		if (n->kind == LF_REAL) {
			int c = have_lo ? kcmp(&lo, n) : -1;
			if (c < 0 || (c == 0 && incl)) {
				if ((rc = scan_add(&b, (struct lf_leaf *)n)))
					break;
				skey_of_node(&lo, n); /* the leaf stays valid in the section */
				have_lo = true;
				incl = false;
				if (b.n == count)
					break;
			}
		}
		if (st.n == 0)
			break;
		n = st.a[--st.n];
	}
	IDX_READ_EXIT();
	nstack_free(&st);

	long passed = rc;
	for (size_t i = 0; rc == 0 && i < b.n; i++) {
		const unsigned char *p = b.bytes + b.e[i].off;
		passed++;
		if (fn(p, b.e[i].klen, p + b.e[i].klen, b.e[i].vlen, arg))
			break;
	}
	free(b.e);
	free(b.bytes);
	return passed;
}

/* ---- walk ----------------------------------------------------------------------------- */

/* Bytes a node needs: its fixed part, a key longer than 8, a leaf's value longer than 8. */
static size_t node_bytes(const struct lf_hdr *h)
{
	size_t n = h->leaf ? sizeof(struct lf_leaf) : sizeof(struct lf_inner);
	if (h->klen > 8)
		n += h->klen;
	if (h->leaf && h->vlen > 8)
		n += h->vlen;
	return n;
}

/* The target @n of an edge of @from, checked before the walk follows it: one of the
 * root's sentinel nodes, or an allocated block holding a well-formed node. */
static int node_check(const struct lfbst_root *root, const struct lf_hdr *n, const void *from)
{
	if (n == &root->s.h || n == &root->r.h)
		return n->leaf == 0 ? 0 : IDX_CORRUPT(n, "sentinel R or S: expected an inner node");
	for (unsigned i = 0; i < 3; i++)
		if (n == &root->inf[i].h)
			return n->leaf == 1 && n->kind == LF_INF0 + i
				       ? 0 : IDX_CORRUPT(n, "sentinel leaf inf%u: expected leaf 1, "
							 "kind %u", i, LF_INF0 + i);
	if (!IDX_CHECK_BLOCK(n, sizeof(*n)))
		return IDX_CORRUPT(from, "edge to %p: expected a sentinel or an allocated block of "
				   ">= %zu bytes", (const void *)n, sizeof(*n));
	bool real = n->kind == LF_REAL;
	if (n->leaf > 1 || n->kind > LF_INF2 || (real && (n->klen == 0 || n->klen > TIPS_MAX_KEY)) ||
	    (!real && n->klen != 0) || (n->leaf && n->vlen > TIPS_MAX_VALUE) ||
	    !IDX_CHECK_BLOCK(n, node_bytes(n)))
		return IDX_CORRUPT(n, "leaf %u, kind %u, klen %u, vlen %u: expected a leaf flag, "
				   "a kind of 0..3, a key of 1..%u bytes (0 for a sentinel) and a "
				   "node that fits its block", n->leaf, n->kind, n->klen, n->vlen,
				   TIPS_MAX_KEY);
	return 0;
}

/* Pushes the target of @edge of @in after checking it. */
static int push_child(struct nstack *st, const struct lfbst_root *root, struct lf_inner *in,
		      _Atomic uintptr_t *edge)
{
	struct lf_hdr *c = edge_node(edge_load(edge));
	int rc = node_check(root, c, in);
	return rc ? rc : nstack_push(st, c);
}

/* The root block, then every node reachable from R that is not inside it (each exactly
 * once: the tree is a tree); marks are masked, so a leaf of a pending remove, still
 * linked, is reported too. Every edge is checked (node_check) before it is followed;
 * a cycle is caught by the caller's bound on fn calls, or, among the root's five
 * sentinel nodes, by counting them. Stops at (and returns) fn's first non-zero. Not
 * concurrent with writes (the contract); it still reads edges atomically. */
static int lf_walk(void *index, tips_walk_fn fn, void *arg)
{
	struct lfbst *t = index;
	if (!fn)
		return TIPS_EINVAL;
	int rc = fn(t->root, arg);
	if (rc)
		return rc;
	const char *lo = (const char *)t->root, *hi = lo + sizeof(*t->root);
	struct nstack st;
	nstack_init(&st);
	rc = nstack_push(&st, &t->R->h);
	unsigned sentinels_seen = 0;
	while (rc == 0 && st.n) {
		struct lf_hdr *n = st.a[--st.n];
		bool in_root = (const char *)n >= lo && (const char *)n < hi;
		if (in_root && ++sentinels_seen > 5) {
			rc = IDX_CORRUPT(n, "sentinel reached twice: expected a tree");
			break;
		}
		if (!n->leaf) {
			struct lf_inner *in = (struct lf_inner *)n;
			rc = push_child(&st, t->root, in, &in->child[1]);
			if (rc == 0)
				rc = push_child(&st, t->root, in, &in->child[0]);
		}
		if (rc == 0 && !in_root)
			rc = fn(n, arg);
	}
	nstack_free(&st);
	return rc;
}

const struct tips_index_ops IDX_SYM(ops) = {
	.name = IDX_NAME,
	.concurrency = "lock-free (CAS) reads and writes; Natarajan-Mittal edge marking "
		       "(unbalanced external BST)",
	.create = lf_create,
	.open = lf_open,
	.close = lf_close,
	.insert = lf_insert,
	.update = lf_update,
	.remove = lf_remove,
	.lookup = lf_lookup,
	.scan = lf_scan,
	.walk = lf_walk,
};
