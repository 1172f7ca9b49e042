/*
 * bst.c - "bst": a binary search tree under one readers-writer lock, balanced as a
 * treap, written once against the hooks of idx_hooks.h and built as dram-bst (volatile
 * original) and tips-bst (TIPS plug-in, ATC'21 §3.2.6; one of the plug-in indexes of
 * §7.1, Table 2).
 *
 * Structure. A root block {magic, tree} and one block per key: {left, right, klen,
 * vlen, key bytes, value bytes}. Keys order as byte strings (memcmp, the shorter first
 * on a tie); two 8-byte keys compare as big-endian 64-bit integers, one load each, so
 * an 8-byte key costs no pointer chase and no memcmp. Keys of any length live inline in
 * their node.
 *
 * Balance. A plain BST turns into a list under sequential inserts, so the tree is a
 * treap: besides the search order on keys it keeps a max-heap order on priorities,
 * where a key's priority is a 64-bit hash of the key computed when needed (never
 * stored: no per-node byte is spent on it, and the shape is a function of the key set
 * alone, the same in both builds and after recovery). The expected depth is O(log n)
 * whatever the insertion order. Insert: a BST insert as a leaf, then rotations lift the
 * new node while its priority beats its parent's (a path stack of the links walked
 * remembers the parents); the new node is linked once, at its final place, and a
 * store that would not change a slot is skipped. Remove: rotations push the node
 * down, always lifting the child of higher priority, until it has at most one child;
 * then it is spliced out.
 * Every traversal is iterative; the stacks start inline (BST_STACK entries, far more
 * than a treap of 2^40 keys needs in expectation) and grow on the heap if ever needed.
 *
 * Lock. One pthread rwlock in the DRAM handle made by open(), never in PM: a lock held
 * when the process died reads as free because it no longer exists (design decision "Locks
 * inside PM"). Writers (insert, update, remove) store only while holding it
 * exclusively; scans share it. Lookups are optimistic first (lookup_optimistic): a
 * sequence counter in the handle is odd while a writer stores, a lookup descends with
 * no lock and keeps its answer only if the counter was even and unchanged, and falls
 * back to the read lock after BST_OPT_TRIES tries. A writer collects the stores its
 * operation makes into the tree, logs them all, and only then makes the counter odd
 * around the stores (bst_commit), so lookups retry for tens of nanoseconds, not for the
 * writer's logging. A writer first descends under the read lock, noting the handle's
 * version (a count of structural changes, bumped under the write lock by every link
 * store); then takes the write lock and, if the version moved, descends again.
 * Unchanged, every node and link it found is still in the tree (none was unlinked, so
 * none was freed). So the descent, a cache miss per level, overlaps lookups, and the
 * write lock covers little more than the stores (an 8-byte in-place update: one
 * copy). The lock is glibc's default kind, which lets readers in while a
 * writer waits, on purpose: a writer-preferring lock queued every scan and locked
 * lookup behind the stream of replayed writes of the tips build. The price: a writer
 * can wait while reads keep overlapping; the framework's replay then lags and its
 * writers get back-pressure.
 *
 * Invariant (what makes the tips build crash consistent): every store to memory that
 * existed before the current operation is preceded by IDX_LOG of exactly the bytes it
 * stores. Every pointer store into a pre-existing node or the root is collected as a
 * pending (link, value) pair and applied by bst_commit(), which logs all of them
 * before the first store; stores into the node allocated by the same operation need
 * no log. Update of a value of the same length overwrites it in place (IDX_LOG_VALUE
 * of the value bytes, which needs no undo record since recovery replays the update;
 * copy: under the write lock and inside store_begin/store_end, so no reader
 * keeps a half-written value); a different length gets a replacement node that takes
 * over the old node's children and its place (same key, so same priority: the heap
 * order holds), and the old node is freed.
 * Remove never stores into the node it removes (its changing children are tracked in
 * locals), so each downward rotation costs one logged store, not three. The code never
 * flushes or fences: the framework makes the stores durable.
 *
 * Conversion cost: 7 hook sites - IDX_ALLOC 2 (root, node), IDX_FREE 3 (replaced node
 * in update, removed node in remove, and insert's new node, allocated before the write
 * lock, when a changed tree shows the key present after all: dram builds only, as
 * the framework never writes one key twice at once), IDX_LOG 2 (bst_commit(), which
 * every pointer store goes through, and IDX_LOG_VALUE for the in-place value). An
 * insert makes one IDX_ALLOC and at most 1 + r IDX_LOG calls for r rotations (fewer
 * than 2 expected); a remove 1 + r; an update of the same length one IDX_LOG_VALUE.
 *
 * Scan. In-order from the start key: a descent stacks the nodes >= start where it
 * turns left, then each popped node is followed by the left spine of its right
 * subtree. Pairs are copied under the read lock into a buffer (BST_BATCH bytes on the
 * stack, grown on the heap only for a single pair that does not fit), then handed to
 * the callback with no lock held, so it may call back into the index; if more are
 * wanted, the next batch resumes after the last key copied. A scan of count pairs
 * costs O(log n + count); it is not a snapshot (each batch is consistent by itself).
 */
#define _GNU_SOURCE
#define IDX_BASE_NAME "bst"
#include "indexes/idx_hooks.h"
#include "indexes/indexes.h"
#include "util/kv.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define BST_MAGIC 0x3174736273706974ull /* "tipsbst1": layout version 1 */
#define BST_STACK 128                   /* inline stack entries before growing */
#define BST_BATCH 8192                  /* bytes of pairs a scan copies per lock hold */
#define BST_OPT_TRIES 4u                /* lookup: optimistic tries before the read lock */
#define BST_OPT_DEPTH 4096u             /* lookup: a longer optimistic descent retries */

/* ---- persistent layout (in PM in the tips build) ---------------------------------- */

/* One key. One block: the key and the value are inline after the header. */
struct bst_node {
	struct bst_node *left;  /* subtree of smaller keys; NULL if none */
	struct bst_node *right; /* subtree of larger keys; NULL if none */
	uint32_t klen;          /* key bytes, 1..TIPS_MAX_KEY */
	uint32_t vlen;          /* value bytes, 0..TIPS_MAX_VALUE */
	unsigned char data[];   /* klen key bytes, then vlen value bytes */
};

/* The root object returned by create. */
struct bst_root {
	uint64_t magic;        /* BST_MAGIC once create has filled the root */
	struct bst_node *tree; /* the treap's top node; NULL when empty (stores logged) */
};

/* ---- volatile handle (DRAM, rebuilt by every open) ----------------------------------- */

struct bst_index {
	_Alignas(64) pthread_rwlock_t lock; /* writers exclusive, readers shared */
	struct bst_root *root;
	uint64_t version; /* structural changes (link stores); written under the write lock */
	_Alignas(64) _Atomic uint64_t seq; /* odd while a writer stores (lookup_optimistic) */
};

/* ---- keys and priorities -------------------------------------------------------------- */

/* The 8 bytes at @p as a big-endian integer: integer order == memcmp order. */
static inline uint64_t load_be64(const void *p)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	return __builtin_bswap64(load64(p));
#else
	return load64(p);
#endif
}

/*
 * The treap priority of a key: a hash, deterministic across runs and builds. An 8-byte
 * key is one mix; longer or shorter keys fold 8-byte words (the tail zero-padded, the
 * length in the seed so that "a" and "a\0" differ) before the final mix.
 */
static uint64_t key_prio(const unsigned char *key, uint32_t len)
{
	if (len == 8)
		return mix64(load64(key) + 0x9e3779b97f4a7c15ull);
	uint64_t h = 0x243f6a8885a308d3ull ^ ((uint64_t)len * 0xff51afd7ed558ccdull);
	for (; len >= 8; key += 8, len -= 8)
		h = mix64(h ^ load64(key)) * 0x9e3779b97f4a7c15ull;
	if (len) {
		uint64_t w = 0;
		memcpy(&w, key, len);
		h = mix64(h ^ w) * 0x9e3779b97f4a7c15ull;
	}
	return mix64(h);
}

static inline uint64_t node_prio(const struct bst_node *n)
{
	return key_prio(n->data, n->klen);
}

/* A search key, with its big-endian integer precomputed when it is 8 bytes long. */
struct bst_key {
	const unsigned char *p;
	size_t len;
	uint64_t be; /* load_be64(p) if len == 8 */
};

static inline void key_init(struct bst_key *k, const void *p, size_t len)
{
	k->p = p;
	k->len = len;
	k->be = len == 8 ? load_be64(p) : 0;
}

/* <0, 0, >0 as @k sorts before, with, after @n's key. */
static inline int key_cmp(const struct bst_key *k, const struct bst_node *n)
{
	if (k->len == 8 && n->klen == 8) {
		uint64_t b = load_be64(n->data);
		return (k->be > b) - (k->be < b);
	}
	size_t m = k->len < n->klen ? k->len : n->klen;
	int c = memcmp(k->p, n->data, m);
	if (c)
		return c;
	return (k->len > n->klen) - (k->len < n->klen);
}

static inline unsigned char *node_value(struct bst_node *n)
{
	return n->data + n->klen;
}

/* ---- an explicit stack: inline first, grown on the heap ------------------------------- */

struct bst_stack {
	void **v;
	size_t n, cap;
	void *inl[BST_STACK];
};

static inline void stack_init(struct bst_stack *s)
{
	s->v = s->inl;
	s->n = 0;
	s->cap = BST_STACK;
}

static bool stack_grow(struct bst_stack *s)
{
	if (s->cap > SIZE_MAX / (2 * sizeof(void *)))
		return false;
	void **v = malloc(2 * s->cap * sizeof(void *));
	if (!v)
		return false;
	memcpy(v, s->v, s->n * sizeof(void *));
	if (s->v != s->inl)
		free(s->v);
	s->v = v;
	s->cap *= 2;
	return true;
}

/* false only if the stack had to grow and malloc failed */
static inline bool stack_push(struct bst_stack *s, void *p)
{
	if (s->n == s->cap && !stack_grow(s))
		return false;
	s->v[s->n++] = p;
	return true;
}

static inline void stack_free(struct bst_stack *s)
{
	if (s->v != s->inl)
		free(s->v);
}

/* ---- walks and stores (stores with the write lock held) ----------------------------- */

/*
 * A writer's stores into memory that existed before its operation (the root's tree
 * and child pointers of linked nodes) are collected first, as (link, value) pairs on a
 * bst_stack, while the writer only reads; then bst_commit() logs every one (IDX_LOG,
 * undo before store), makes seq odd, stores them all, and makes seq even again. So
 * the window in which an optimistic lookup must retry covers the few stores, not the
 * logging (in the tips build each IDX_LOG is a ULog record and a fence). Collecting is
 * sound because no writer reads back a slot it has already decided to store into:
 * each slot is written at most once per operation and read, if at all, before.
 */
static inline bool pending_add(struct bst_stack *st, struct bst_node **link,
			       struct bst_node *to)
{
	return stack_push(st, link) && stack_push(st, to);
}

/*
 * store_begin/store_end bracket a writer's stores to reachable memory (write lock
 * held): seq is odd from before the first store to after the last, so an optimistic
 * lookup that saw seq even and unchanged around its reads read none of them.
 */
static inline void store_begin(struct bst_index *t)
{
	atomic_store_explicit(&t->seq, atomic_load_explicit(&t->seq, memory_order_relaxed) + 1,
			      memory_order_relaxed);
	atomic_thread_fence(memory_order_release); /* seq odd before any store that follows */
}

static inline void store_end(struct bst_index *t)
{
	atomic_store_explicit(&t->seq, atomic_load_explicit(&t->seq, memory_order_relaxed) + 1,
			      memory_order_release); /* after every store that preceded */
}

/* Logs, then stores, every pending (link, value) pair of @st (see pending_add). */
static void bst_commit(struct bst_index *t, const struct bst_stack *st)
{
	for (size_t i = 0; i < st->n; i += 2)
		IDX_LOG(st->v[i], sizeof(struct bst_node *));
	store_begin(t);
	for (size_t i = 0; i < st->n; i += 2)
		*(struct bst_node **)st->v[i] = st->v[i + 1];
	store_end(t);
}

/* A new node holding @key/@val with the given children; fresh memory, so no logging. */
static struct bst_node *node_new(const void *key, uint32_t klen, const void *val,
				 uint32_t vlen, struct bst_node *left, struct bst_node *right)
{
	struct bst_node *n = IDX_ALLOC(sizeof(*n) + (size_t)klen + vlen);
	if (!n)
		return NULL;
	n->left = left;
	n->right = right;
	n->klen = klen;
	n->vlen = vlen;
	memcpy(n->data, key, klen);
	if (vlen)
		memcpy(n->data + klen, val, vlen);
	return n;
}

/*
 * Descends from the root to @k: *@linkp is the link (root->tree or a child pointer) that
 * points at @k's node, or at the NULL where it would hang if absent. With @path, every
 * link walked before it is pushed there (the top one holds *@linkp's node's parent).
 * Returns false only if @path could not grow (malloc failed). Call with the lock held.
 */
static bool descend(struct bst_root *root, const struct bst_key *k, struct bst_stack *path,
		    struct bst_node ***linkp)
{
	struct bst_node **link = &root->tree;
	struct bst_node *n;
	bool ok = true;
	while ((n = *link)) {
		int c = key_cmp(k, n);
		if (c == 0)
			break;
		if (path && !stack_push(path, link)) {
			ok = false;
			break;
		}
		link = c < 0 ? &n->left : &n->right;
	}
	*linkp = link;
	return ok;
}

/* ---- ops ------------------------------------------------------------------------------ */

static int bst_create(const struct tips_index_config *cfg, void **rootp)
{
	if (!cfg || !rootp)
		return TIPS_EINVAL;
	struct bst_root *root = IDX_ALLOC(sizeof(*root));
	if (!root)
		return TIPS_ENOMEM;
	/* A fresh block: no logging needed. */
	root->tree = NULL;
	root->magic = BST_MAGIC;
	*rootp = root;
	return 0;
}

/* A link to @n (NULL allowed), read from @from, checked before it is followed: a
 * block that holds the node's header, key (1..TIPS_MAX_KEY bytes) and value. */
static int node_check(const struct bst_node *n, const void *from)
{
	if (!n)
		return 0;
	if (!IDX_CHECK_BLOCK(n, sizeof(*n)))
		return IDX_CORRUPT(from, "link %p: expected an allocated block of >= %zu bytes",
				   (const void *)n, sizeof(*n));
	if (n->klen == 0 || n->klen > TIPS_MAX_KEY || n->vlen > TIPS_MAX_VALUE ||
	    !IDX_CHECK_BLOCK(n, sizeof(*n) + (size_t)n->klen + n->vlen))
		return IDX_CORRUPT(n, "klen %u, vlen %u: expected 1..%u key bytes and a value "
				   "that fit the block", n->klen, n->vlen, TIPS_MAX_KEY);
	return 0;
}

static int bst_open(void *rootv, void **indexp)
{
	struct bst_root *root = rootv;
	if (!root || !indexp)
		return TIPS_EINVAL;
	if (!IDX_CHECK_BLOCK(root, sizeof(*root)) || root->magic != BST_MAGIC)
		return IDX_CORRUPT(root, "root: expected an allocated block of >= %zu bytes "
				   "starting with magic 0x%llx", sizeof(*root),
				   (unsigned long long)BST_MAGIC);
	int rc = node_check(root->tree, root);
	if (rc)
		return rc;

	struct bst_index *t = NULL;
	if (posix_memalign((void **)&t, _Alignof(struct bst_index), sizeof(*t)))
		return TIPS_ENOMEM;
	if (pthread_rwlock_init(&t->lock, NULL)) {
		free(t);
		return TIPS_ENOMEM;
	}
	t->root = root;
	t->version = 0;
	atomic_init(&t->seq, 0);
	*indexp = t;
	return 0;
}

static void bst_close(void *index)
{
	struct bst_index *t = index;
	if (!t)
		return;
	pthread_rwlock_destroy(&t->lock);
	free(t);
	IDX_FREE_BARRIER();
}

/*
 * A writer's first descent, under the read lock; returns the version it saw. The
 * writer then takes the write lock, and if t->version moved (a structural change), it
 * descends again. *@found is @k's node at the time (NULL: absent); it, *@linkp and the
 * links on @path may be dereferenced again only under the write lock with the version
 * unchanged (no link store in between, so none of them was unlinked or freed).
 */
static inline uint64_t read_descend(struct bst_index *t, const struct bst_key *k,
				    struct bst_stack *path, struct bst_node ***linkp,
				    struct bst_node **found, bool *path_ok)
{
	pthread_rwlock_rdlock(&t->lock);
	uint64_t v = t->version;
	*path_ok = descend(t->root, k, path, linkp);
	*found = **linkp;
	pthread_rwlock_unlock(&t->lock);
	return v;
}

static int bst_insert(void *index, const void *key, size_t klen, const void *val,
		      size_t vlen)
{
	struct bst_index *t = index;
	int rc = check_kv(key, klen, val, vlen);
	if (rc)
		return rc;
	struct bst_key k;
	key_init(&k, key, klen);
	struct bst_stack path; /* the links walked, top = the link of the new node's parent */
	stack_init(&path);
	struct bst_node **link, *x, *found;
	bool ok;

	uint64_t v = read_descend(t, &k, &path, &link, &found, &ok);
	if (!ok) {
		rc = TIPS_ENOMEM;
		goto done;
	}
	if (found) {
		rc = TIPS_EKEYEXISTS;
		goto done;
	}
	/* Allocate outside the lock; a fresh node needs no log. */
	x = node_new(key, (uint32_t)klen, val, (uint32_t)vlen, NULL, NULL);
	if (!x) {
		rc = TIPS_ENOMEM;
		goto done;
	}
	struct bst_stack pend; /* stores into linked memory, applied by bst_commit */
	stack_init(&pend);
	pthread_rwlock_wrlock(&t->lock);
	if (t->version != v) { /* the tree changed shape: walk again */
		path.n = 0;
		if (!descend(t->root, &k, &path, &link))
			rc = TIPS_ENOMEM; /* nothing stored yet */
		else if (*link)
			rc = TIPS_EKEYEXISTS;
		if (rc)
			goto unlock;
	}
	/*
	 * Lift x while it outranks its parent p (hanging from plink): one rotation each.
	 * x is stored only once, at its final place: until then *link, the slot x would
	 * hang from, is stale, and a rotation stores p's new child straight into it (the
	 * slot is p's child pointer that held x), then x moves up to plink. So every slot
	 * is written at most once per insert; the first rotation's store, NULL over the
	 * leaf's NULL, is skipped. Stores into x itself need no log (fresh).
	 */
	uint64_t px = key_prio(k.p, (uint32_t)klen);
	while (path.n) {
		struct bst_node **plink = path.v[path.n - 1];
		struct bst_node *p = *plink;
		if (node_prio(p) >= px)
			break;
		path.n--;
		struct bst_node *moved; /* x's subtree that becomes p's child */
		if (link == &p->left) { /* rotate right */
			moved = x->right;
			x->right = p;
		} else {                /* rotate left */
			moved = x->left;
			x->left = p;
		}
		if (*link != moved && !pending_add(&pend, link, moved)) {
			rc = TIPS_ENOMEM; /* nothing stored into the tree yet */
			goto unlock;
		}
		link = plink;
	}
	if (!pending_add(&pend, link, x)) {
		rc = TIPS_ENOMEM;
		goto unlock;
	}
	bst_commit(t, &pend);
	t->version++;
unlock:
	pthread_rwlock_unlock(&t->lock);
	if (rc)
		IDX_FREE(x); /* never linked */
	stack_free(&pend);
done:
	stack_free(&path);
	return rc;
}

static int bst_update(void *index, const void *key, size_t klen, const void *val,
		      size_t vlen)
{
	struct bst_index *t = index;
	int rc = check_kv(key, klen, val, vlen);
	if (rc)
		return rc;
	struct bst_key k;
	key_init(&k, key, klen);
	struct bst_node **link, *old;
	bool ok;

	uint64_t v = read_descend(t, &k, NULL, &link, &old, &ok);
	if (!old)
		return TIPS_ENOTFOUND;
	pthread_rwlock_wrlock(&t->lock);
	if (t->version != v) { /* the tree changed shape: find the key again */
		(void)descend(t->root, &k, NULL, &link);
		old = *link;
	}
	if (!old) {
		rc = TIPS_ENOTFOUND;
	} else if (old->vlen == vlen) {
		if (vlen) { /* same length: overwrite in place, no undo record */
			IDX_LOG_VALUE(node_value(old), vlen);
			store_begin(t);
			memcpy(node_value(old), val, vlen);
			store_end(t);
		}
	} else { /* a replacement in the old node's place: same key, same priority */
		struct bst_node *n = node_new(key, (uint32_t)klen, val, (uint32_t)vlen,
					      old->left, old->right);
		if (n) {
			struct bst_stack pend; /* one pair: fits the inline stack */
			stack_init(&pend);
			(void)pending_add(&pend, link, n);
			bst_commit(t, &pend);
			IDX_FREE(old);
			t->version++;
		} else {
			rc = TIPS_ENOMEM;
		}
	}
	pthread_rwlock_unlock(&t->lock);
	return rc;
}

static int bst_remove(void *index, const void *key, size_t klen)
{
	struct bst_index *t = index;
	if (!key || klen == 0)
		return TIPS_EINVAL;
	if (klen > TIPS_MAX_KEY)
		return TIPS_ENOTFOUND;
	struct bst_key k;
	key_init(&k, key, klen);
	struct bst_node **link, *d;
	bool ok;

	uint64_t v = read_descend(t, &k, NULL, &link, &d, &ok);
	if (!d)
		return TIPS_ENOTFOUND;
	pthread_rwlock_wrlock(&t->lock);
	if (t->version != v) {
		(void)descend(t->root, &k, NULL, &link);
		d = *link;
	}
	if (!d) {
		pthread_rwlock_unlock(&t->lock);
		return TIPS_ENOTFOUND;
	}
	/*
	 * Rotate d down until it has at most one child, lifting the child of higher
	 * priority each time. d itself is never written: l and r track what its children
	 * would be, and link the pointer that would hold d. A right rotation lifts l into
	 * *link; d would become l's right child with l's old right subtree as its left.
	 */
	struct bst_node *l = d->left, *r = d->right;
	struct bst_stack pend; /* stores into linked memory, applied by bst_commit */
	stack_init(&pend);
	bool ok_pend = true;
	while (ok_pend) {
		if (!l) {
			ok_pend = pending_add(&pend, link, r);
			break;
		}
		if (!r) {
			ok_pend = pending_add(&pend, link, l);
			break;
		}
		if (node_prio(l) > node_prio(r)) {
			ok_pend = pending_add(&pend, link, l);
			link = &l->right;
			l = l->right;
		} else {
			ok_pend = pending_add(&pend, link, r);
			link = &r->left;
			r = r->left;
		}
	}
	if (ok_pend) {
		bst_commit(t, &pend);
		IDX_FREE(d);
		t->version++;
	}
	pthread_rwlock_unlock(&t->lock);
	stack_free(&pend);
	return ok_pend ? 0 : TIPS_ENOMEM; /* ENOMEM: nothing was stored */
}

/*
 * Optimistic lookup (a sequence lock): descends without the lock between two reads of
 * seq and keeps the answer only if seq was even and unchanged, i.e. no writer stored
 * meanwhile (bst_commit, store_begin). TIPS decides each write's outcome with a lookup
 * from the application thread; under the rwlock alone such a lookup that met replay
 * holding the write lock slept on a futex (a context switch per handoff on a busy
 * machine: the tips-bptree outlier of docs/framework.md, which tips-bst showed too).
 *
 * Memory safety: the whole descent runs in a read section (IDX_READ_ENTER), and every
 * node it can reach was reachable at some moment of the section (an unlinked node is
 * never written again, so its links still point at nodes reachable when it was
 * unlinked), so IDX_FREE's deferral keeps each one allocated. A node's klen and vlen
 * never change while it is allocated (a new length gets a new node), so the key
 * compare and the value copy stay inside the node; the values copied are validated by
 * a second read of seq. A torn view can make the descent long (a rotation seen half
 * done): BST_OPT_DEPTH bounds it. Off under ThreadSanitizer (BST_OPTIMISTIC): the
 * racing reads are the algorithm, and their result is discarded unless validated.
 */
enum { OPT_FOUND, OPT_ABSENT, OPT_RETRY };

/*
 * Under ThreadSanitizer the optimistic path is off and every lookup takes the read
 * lock: its racing reads go through helpers (key_cmp, memcmp, memcpy) that TSan
 * instruments, so it would report the races the algorithm is made of. The locked
 * path, the writers and bst_commit stay checked; the optimistic path is tested by the
 * other builds.
 */
#ifdef __SANITIZE_THREAD__
#define BST_OPTIMISTIC 0
#else
#define BST_OPTIMISTIC 1
#endif

static int
lookup_optimistic(struct bst_index *t, const struct bst_key *k, void *val, size_t cap,
		  size_t *vlen)
{
	uint64_t s0 = atomic_load_explicit(&t->seq, memory_order_acquire);
	if (s0 & 1)
		return OPT_RETRY;
	struct bst_node *n = *(struct bst_node *volatile *)&t->root->tree;
	for (unsigned d = 0; n; d++) {
		if (d == BST_OPT_DEPTH)
			return OPT_RETRY;
		int c = key_cmp(k, n);
		if (c == 0)
			break;
		n = c < 0 ? *(struct bst_node *volatile *)&n->left
			  : *(struct bst_node *volatile *)&n->right;
	}
	size_t len = n ? n->vlen : 0;
	if (n && cap && len)
		memcpy(val, node_value(n), len < cap ? len : cap);
	atomic_thread_fence(memory_order_acquire);
	if (atomic_load_explicit(&t->seq, memory_order_relaxed) != s0)
		return OPT_RETRY;
	if (!n)
		return OPT_ABSENT;
	if (vlen)
		*vlen = len;
	return OPT_FOUND;
}

static int bst_lookup(void *index, const void *key, size_t klen, void *val, size_t cap,
		      size_t *vlen)
{
	struct bst_index *t = index;
	if (!key || klen == 0 || (cap && !val))
		return TIPS_EINVAL;
	if (klen > TIPS_MAX_KEY)
		return TIPS_ENOTFOUND;
	struct bst_key k;
	key_init(&k, key, klen);

	IDX_READ_ENTER();
	for (unsigned attempt = 0; attempt < BST_OPT_TRIES && BST_OPTIMISTIC; attempt++) {
		size_t len;
		int o = lookup_optimistic(t, &k, val, cap, &len);
		if (o != OPT_RETRY) {
			IDX_READ_EXIT();
			if (o == OPT_ABSENT)
				return TIPS_ENOTFOUND;
			if (vlen)
				*vlen = len;
			return IDX_FOUND(len, cap);
		}
		seq_backoff(attempt);
	}
	IDX_READ_EXIT(); /* never block on the lock inside a read section */

	int rc = TIPS_ENOTFOUND;
	pthread_rwlock_rdlock(&t->lock);
	struct bst_node *n = t->root->tree;
	while (n) {
		int c = key_cmp(&k, n);
		if (c == 0) {
			if (cap)
				memcpy(val, node_value(n), n->vlen < cap ? n->vlen : cap);
			if (vlen)
				*vlen = n->vlen;
			rc = IDX_FOUND(n->vlen, cap);
			break;
		}
		n = c < 0 ? n->left : n->right;
	}
	pthread_rwlock_unlock(&t->lock);
	return rc;
}

/* One copied pair in a scan batch: this header, then klen key bytes, vlen value bytes. */
struct bst_rec {
	uint32_t klen, vlen;
};

static inline size_t rec_size(const struct bst_node *n)
{
	return sizeof(struct bst_rec) + n->klen + n->vlen;
}

/*
 * Scan: batches of pairs copied under the read lock, handed to @fn with the lock
 * released (file comment). Each batch starts with a descent to the first key >= @start
 * (the first batch) or > the last key handed out (the next ones).
 */
static long bst_scan(void *index, const void *start, size_t klen, size_t count,
		     tips_scan_fn fn, void *arg)
{
	struct bst_index *t = index;
	if (!fn || (klen && !start))
		return TIPS_EINVAL;
	if (count == 0)
		return 0;

	_Alignas(8) unsigned char sbuf[BST_BATCH];
	unsigned char last[TIPS_MAX_KEY]; /* resume point: the last key handed out */
	unsigned char *buf = sbuf;
	size_t cap = sizeof(sbuf);
	struct bst_stack st; /* nodes still to visit, the next one on top */
	stack_init(&st);
	struct bst_key from;
	bool bounded = klen != 0, exclusive = false;
	if (bounded)
		key_init(&from, start, klen);
	long passed = 0;
	int rc = 0;

	for (;;) {
		size_t used = 0, nrec = 0, want = count - (size_t)passed;
		bool more = false;
		st.n = 0;
		pthread_rwlock_rdlock(&t->lock);
		/* Stack every node >= from (> from if exclusive) where the descent turns left. */
		for (struct bst_node *n = t->root->tree; n;) {
			int c = bounded ? key_cmp(&from, n) : -1;
			if (c < 0 || (c == 0 && !exclusive)) {
				if (!stack_push(&st, n)) {
					rc = TIPS_ENOMEM;
					break;
				}
				n = n->left;
			} else {
				n = n->right;
			}
		}
		while (rc == 0 && st.n && nrec < want) {
			struct bst_node *n = st.v[st.n - 1];
			size_t need = rec_size(n);
			if (cap - used < need) {
				if (nrec) { /* hand these out first, resume at n */
					more = true;
					break;
				}
				unsigned char *b = malloc(need); /* one pair larger than sbuf */
				if (!b) {
					rc = TIPS_ENOMEM;
					break;
				}
				if (buf != sbuf)
					free(buf);
				buf = b;
				cap = need;
			}
			st.n--;
			struct bst_rec h = { n->klen, n->vlen };
			memcpy(buf + used, &h, sizeof(h));
			memcpy(buf + used + sizeof(h), n->data, (size_t)n->klen + n->vlen);
			used += need;
			nrec++;
			for (struct bst_node *c = n->right; c; c = c->left) {
				if (!stack_push(&st, c)) {
					rc = TIPS_ENOMEM;
					break;
				}
			}
		}
		if (rc == 0 && nrec == want && st.n)
			more = true;
		pthread_rwlock_unlock(&t->lock);
		if (rc)
			break;

		/* Hand the batch out with no lock held. */
		const unsigned char *lastkey = NULL;
		uint32_t lastlen = 0;
		bool stopped = false;
		for (size_t off = 0, i = 0; i < nrec; i++) {
			struct bst_rec h;
			memcpy(&h, buf + off, sizeof(h));
			lastkey = buf + off + sizeof(h);
			lastlen = h.klen;
			passed++;
			if (fn(lastkey, h.klen, lastkey + h.klen, h.vlen, arg)) {
				stopped = true;
				break;
			}
			off += sizeof(h) + h.klen + h.vlen;
		}
		if (stopped || !more || (size_t)passed == count)
			break;
		memcpy(last, lastkey, lastlen);
		key_init(&from, last, lastlen);
		bounded = exclusive = true;
	}
	if (buf != sbuf)
		free(buf);
	stack_free(&st);
	return rc ? rc : passed;
}

/* The root, then every node (pre-order); stops at (and returns) fn's first non-zero.
 * Takes no lock: the contract says no write runs meanwhile. Reads a block's pointers
 * before handing it to fn, so fn may free it; checks each (node_check) before it is
 * pushed, so a damaged link is reported, never followed (a cycle is caught by the
 * caller's bound on fn calls). */
static int bst_walk(void *index, tips_walk_fn fn, void *arg)
{
	struct bst_index *t = index;
	if (!fn)
		return TIPS_EINVAL;
	struct bst_stack st;
	stack_init(&st);
	struct bst_node *top = t->root->tree;
	int rc = fn(t->root, arg);
	if (rc == 0 && top && !stack_push(&st, top))
		rc = TIPS_ENOMEM;
	while (rc == 0 && st.n) {
		struct bst_node *n = st.v[--st.n];
		struct bst_node *l = n->left, *r = n->right;
		if ((rc = node_check(l, n)) || (rc = node_check(r, n)))
			break;
		rc = fn(n, arg);
		if (rc == 0 && ((l && !stack_push(&st, l)) || (r && !stack_push(&st, r))))
			rc = TIPS_ENOMEM;
	}
	stack_free(&st);
	return rc;
}

const struct tips_index_ops IDX_SYM(ops) = {
	.name = IDX_NAME,
#ifdef IDX_TIPS
	.concurrency = "TIPS: lock-free cache reads, per-bucket spinlock writes; "
		       "replay on one readers-writer lock, optimistic lookups "
		       "(treap: balanced in expectation)",
#else
	.concurrency = "one readers-writer lock, optimistic lookups "
		       "(treap: balanced in expectation)",
#endif
	.create = bst_create,
	.open = bst_open,
	.close = bst_close,
	.insert = bst_insert,
	.update = bst_update,
	.remove = bst_remove,
	.lookup = bst_lookup,
	.scan = bst_scan,
	.walk = bst_walk,
};
