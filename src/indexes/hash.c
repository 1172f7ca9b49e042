/*
 * hash.c - "hash": a chained hash table with a reader-writer lock per bucket stripe,
 * the index of the TIPS paper's Figure 3 (ATC'21, §3.2.6), written once against the
 * hooks of idx_hooks.h and built as dram-hash (volatile original) and tips-hash (TIPS
 * plug-in).
 *
 * Structure. A root block (magic, bucket count, bucket array) and a bucket array of
 * chain heads, both allocated at create and never changed afterwards; then one block
 * per key: {next, klen, vlen, key bytes, value bytes}. The bucket count is a power of
 * two >= max(expected_keys, 1024), so the average chain holds at most about one key
 * while the user stays within the hint. The table never resizes: a resize would rewrite
 * every chain, and the tips build would have to undo-log all of it.
 *
 * Locks. A pthread rwlock per stripe, bucket b using stripe b % HASH_STRIPES, and on
 * the same line a sequence counter. They live in the DRAM handle made by open(), never
 * in the persistent root: a lock held when the process died reads as free because it
 * no longer exists (design decision "Locks inside PM"). Writers take the stripe's
 * write lock and make its counter odd around their stores to reachable memory (a link,
 * a value overwritten in place), after their IDX_LOG or IDX_LOG_VALUE (in the tips
 * build a ULog record and a fence, or for the value nothing that waits), so lookups
 * retry only for the nanoseconds of the stores. Lookups
 * are optimistic (lookup_optimistic): they read the chain without the lock between two
 * reads of the counter and keep the answer only if it was even and did not move; after
 * HASH_OPT_TRIES failures they take the read lock. Scans take the read lock. A reader
 * never follows a freed node: frees go through IDX_FREE, deferred past every read
 * section open at the unlink, and optimistic lookups run inside one.
 * Why optimistic: with the read lock, every lookup made a locked write to its stripe's
 * line, which in the tips build replay writes from the other core; the lock's miss,
 * serialised before the bucket's, cost tips-hash's lookups about 60 ns each in YCSB A
 * (docs/framework.md, "Eighth round"). A load of the counter overlaps the bucket's miss.
 *
 * Invariant (what makes the tips build crash consistent): every store to memory that
 * existed before the current operation is preceded by IDX_LOG of exactly the bytes it
 * stores, or, for a node's value bytes overwritten by an update of its own key, by
 * IDX_LOG_VALUE (no undo record: recovery replays that update again). Stores into a
 * block allocated by the same operation need no log (the framework frees that block
 * if it rolls the operation back). Writes: insert links a new node at the head of its
 * chain (log the head, store it); update overwrites a value of the same length in
 * place (IDX_LOG_VALUE, copy), otherwise links a replacement node in place of the old
 * one; remove logs and stores the predecessor's link. The code never flushes or
 * fences: the framework makes the stores durable.
 *
 * Conversion cost: 8 hook sites - IDX_ALLOC 2 (root, bucket array), IDX_ALLOC_LOG 1 (a
 * new node and the link it will be stored into, under one fence), IDX_FREE 3 (root when
 * create fails, replaced node in update, removed node in remove), IDX_LOG 2 (link_set(),
 * which remove's unlink goes through, and IDX_LOG_VALUE for the in-place value). insert
 * uses 1 (the node's IDX_ALLOC_LOG); Figure 3's insert, an upsert, uses 3 (alloc, log,
 * and our update's in-place value).
 *
 * Scan. Keys are hashed, so an ordered scan visits the whole table: O(n) per scan
 * whatever @count is, keeping the @count smallest keys >= start in a bounded max-heap
 * of copies (scan_topk.h, O(n log count)), then calling fn in order with no lock held.
 * This is the price of an ordered scan over a hash table; ordered indexes do better.
 */
#define _GNU_SOURCE
#define IDX_BASE_NAME "hash"
#include "indexes/idx_hooks.h"
#include "indexes/indexes.h"
#include "indexes/scan_topk.h"
#include "util/kv.h"
#include "util/seqcount.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define HASH_MAGIC 0x3168736168737074ull /* "tipshsh1": layout version 1 */
#define HASH_MIN_BUCKETS 1024u
#define HASH_MAX_BUCKETS (1ull << 40) /* keeps the size arithmetic far from overflow */
#define HASH_STRIPES 1024u            /* a power of two, <= HASH_MIN_BUCKETS */
#define HASH_OPT_TRIES 4u             /* lookup: optimistic tries before the read lock */

/* ---- persistent layout (in PM in the tips build) ---------------------------------- */

/* One key. One block: the key and the value are inline after the header. */
struct hash_node {
	struct hash_node *next; /* next node of the bucket chain; NULL ends it */
	uint32_t klen;          /* key bytes, 1..TIPS_MAX_KEY */
	uint32_t vlen;          /* value bytes, 0..TIPS_MAX_VALUE */
	unsigned char data[];   /* klen key bytes, then vlen value bytes */
};

/* The root object returned by create. Written only by create; read-only afterwards. */
struct hash_root {
	uint64_t magic;             /* HASH_MAGIC once create has filled the root */
	uint64_t nbuckets;          /* number of chains: a power of two >= 1024 */
	struct hash_node **buckets; /* block of nbuckets chain heads (NULL: empty chain) */
};

/* ---- volatile handle (DRAM, rebuilt by every open) ----------------------------------- */

struct hash_stripe {
	_Alignas(64) pthread_rwlock_t lock; /* one per cache line: no false sharing */
	_Atomic uint64_t seq;               /* odd while a writer stores (util/seqcount.h) */
};

struct hash_index {
	struct hash_stripe stripes[HASH_STRIPES];
	struct hash_root *root;
	struct hash_node **buckets; /* root->buckets, copied: no PM read per operation */
	uint64_t mask;              /* root->nbuckets - 1 */
};

/* ---- keys ---------------------------------------------------------------------------- */

/* Always inline: lookup_optimistic's racy reads must stay uninstrumented by
 * ThreadSanitizer, also in a -O0 build, where a call would be instrumented (and TSan,
 * not seeing that function's acquire loads, reported the node's creation as a race). */
static inline __attribute__((always_inline)) bool
node_has_key(const struct hash_node *n, const void *key, uint32_t klen)
{
	if (n->klen != klen)
		return false;
	if (klen == 8)
		return load64(n->data) == load64(key);
	return seq_racy_equal(n->data, key, klen); /* not memcmp, which TSan intercepts */
}

static inline unsigned char *node_value(struct hash_node *n)
{
	return n->data + n->klen;
}

/* ---- chains (call with the bucket's stripe locked) ----------------------------------- */

static inline uint64_t bucket_of(const struct hash_index *h, const void *key, size_t klen)
{
	return hash_key(key, klen) & h->mask;
}

static inline struct hash_stripe *stripe_of(struct hash_index *h, uint64_t bucket)
{
	return &h->stripes[bucket & (HASH_STRIPES - 1)];
}

/* The link (bucket head or a node's next) that points at @key's node, or at the NULL
 * ending the chain if @key is absent. */
static struct hash_node **chain_find(struct hash_node **head, const void *key, uint32_t klen)
{
	struct hash_node **link = head;
	for (struct hash_node *n = *link; n; link = &n->next, n = *link)
		if (node_has_key(n, key, klen))
			return link;
	return link;
}

/* Stores @to into @link, which the caller logged, with the counter of the link's stripe
 * @st odd (write lock held). Every pointer store of the table goes through here (Figure
 * 3, lines 19-20); the node @to points at is complete before the release that
 * publishes it. */
static inline void link_store(struct hash_stripe *st, struct hash_node **link,
			      struct hash_node *to)
{
	seq_write_begin(&st->seq);
	atomic_store_explicit((struct hash_node *_Atomic *)link, to, memory_order_release);
	seq_write_end(&st->seq);
}

/* link_store for a @link not logged yet (a pointer that existed before this
 * operation). */
static inline void link_set(struct hash_stripe *st, struct hash_node **link,
			    struct hash_node *to)
{
	IDX_LOG(link, sizeof(*link));
	link_store(st, link, to);
}

/* A new node holding @key/@val, pointing at @next, that will be stored into @link:
 * the node and @link's undo record come under one fence (IDX_ALLOC_LOG). The node is
 * fresh memory, so it needs no logging. */
static struct hash_node *node_new(const void *key, uint32_t klen, const void *val,
				  uint32_t vlen, struct hash_node *next, struct hash_node **link)
{
	struct hash_node *n = IDX_ALLOC_LOG(sizeof(*n) + (size_t)klen + vlen, link, sizeof(*link));
	if (!n)
		return NULL;
	n->next = next;
	n->klen = klen;
	n->vlen = vlen;
	memcpy(n->data, key, klen);
	if (vlen)
		memcpy(n->data + klen, val, vlen);
	return n;
}

/* ---- ops ------------------------------------------------------------------------------ */

static int hash_create(const struct tips_index_config *cfg, void **rootp)
{
	if (!cfg || !rootp)
		return TIPS_EINVAL;
	uint64_t want = cfg->expected_keys;
	uint64_t nb = HASH_MIN_BUCKETS;
	while (nb < want && nb < HASH_MAX_BUCKETS)
		nb <<= 1;
	if (nb > SIZE_MAX / sizeof(struct hash_node *))
		return TIPS_ENOMEM; /* cannot be addressed on this platform */

	struct hash_root *root = IDX_ALLOC(sizeof(*root));
	if (!root)
		return TIPS_ENOMEM;
	struct hash_node **buckets = IDX_ALLOC((size_t)nb * sizeof(*buckets));
	if (!buckets) {
		IDX_FREE(root);
		return TIPS_ENOMEM;
	}
	/* Fresh blocks, not zeroed by the allocator; no logging needed. */
	memset(buckets, 0, (size_t)nb * sizeof(*buckets));
	memset(root, 0, sizeof(*root));
	root->nbuckets = nb;
	root->buckets = buckets;
	root->magic = HASH_MAGIC;
	*rootp = root;
	return 0;
}

/* The root and its bucket array, checked before open follows them. */
static int root_check(const struct hash_root *root)
{
	if (!IDX_CHECK_BLOCK(root, sizeof(*root)))
		return IDX_CORRUPT(root, "root: expected an allocated block of >= %zu bytes",
				   sizeof(*root));
	if (root->magic != HASH_MAGIC || root->nbuckets < HASH_MIN_BUCKETS ||
	    root->nbuckets > HASH_MAX_BUCKETS || (root->nbuckets & (root->nbuckets - 1)))
		return IDX_CORRUPT(root, "root: magic 0x%llx, %llu buckets: expected magic 0x%llx "
				   "and a power of two >= %u buckets",
				   (unsigned long long)root->magic,
				   (unsigned long long)root->nbuckets,
				   (unsigned long long)HASH_MAGIC, HASH_MIN_BUCKETS);
	if (!IDX_CHECK_BLOCK(root->buckets, root->nbuckets * sizeof(*root->buckets)))
		return IDX_CORRUPT(root, "bucket array %p: expected an allocated block of >= %llu "
				   "bytes", (void *)root->buckets,
				   (unsigned long long)(root->nbuckets * sizeof(*root->buckets)));
	return 0;
}

/* A node a chain links to, checked before the walk follows it: a block that holds
 * its header, key (1..TIPS_MAX_KEY bytes) and value. */
static int node_check(const struct hash_node *n, const void *from)
{
	if (!IDX_CHECK_BLOCK(n, sizeof(*n)))
		return IDX_CORRUPT(from, "chain link %p: expected an allocated block of >= %zu "
				   "bytes", (const void *)n, sizeof(*n));
	if (n->klen == 0 || n->klen > TIPS_MAX_KEY || n->vlen > TIPS_MAX_VALUE ||
	    !IDX_CHECK_BLOCK(n, sizeof(*n) + (size_t)n->klen + n->vlen))
		return IDX_CORRUPT(n, "klen %u, vlen %u: expected 1..%u key bytes and a value "
				   "that fit the block", n->klen, n->vlen, TIPS_MAX_KEY);
	return 0;
}

static int hash_open(void *rootv, void **indexp)
{
	struct hash_root *root = rootv;
	if (!root || !indexp)
		return TIPS_EINVAL;
	int rc = root_check(root);
	if (rc)
		return rc;

	struct hash_index *h = NULL;
	if (posix_memalign((void **)&h, _Alignof(struct hash_index), sizeof(*h)))
		return TIPS_ENOMEM;
	for (unsigned i = 0; i < HASH_STRIPES; i++) {
		atomic_init(&h->stripes[i].seq, 0);
		if (pthread_rwlock_init(&h->stripes[i].lock, NULL)) {
			while (i--)
				pthread_rwlock_destroy(&h->stripes[i].lock);
			free(h);
			return TIPS_ENOMEM;
		}
	}
	h->root = root;
	h->buckets = root->buckets;
	h->mask = root->nbuckets - 1;
	*indexp = h;
	return 0;
}

static void hash_close(void *index)
{
	struct hash_index *h = index;
	if (!h)
		return;
	for (unsigned i = 0; i < HASH_STRIPES; i++)
		pthread_rwlock_destroy(&h->stripes[i].lock);
	free(h);
	IDX_FREE_BARRIER();
}

static int hash_insert(void *index, const void *key, size_t klen, const void *val,
		       size_t vlen)
{
	struct hash_index *h = index;
	int rc = check_kv(key, klen, val, vlen);
	if (rc)
		return rc;
	uint64_t b = bucket_of(h, key, klen);
	struct hash_node **head = &h->buckets[b];
	struct hash_stripe *st = stripe_of(h, b);

	pthread_rwlock_wrlock(&st->lock);
	if (*chain_find(head, key, (uint32_t)klen)) {
		rc = TIPS_EKEYEXISTS;
	} else {
		struct hash_node *n =
			node_new(key, (uint32_t)klen, val, (uint32_t)vlen, *head, head);
		if (n)
			link_store(st, head, n);
		else
			rc = TIPS_ENOMEM;
	}
	pthread_rwlock_unlock(&st->lock);
	return rc;
}

static int hash_update(void *index, const void *key, size_t klen, const void *val,
		       size_t vlen)
{
	struct hash_index *h = index;
	int rc = check_kv(key, klen, val, vlen);
	if (rc)
		return rc;
	uint64_t b = bucket_of(h, key, klen);
	struct hash_stripe *st = stripe_of(h, b);

	pthread_rwlock_wrlock(&st->lock);
	struct hash_node **link = chain_find(&h->buckets[b], key, (uint32_t)klen);
	struct hash_node *old = *link;
	if (!old) {
		rc = TIPS_ENOTFOUND;
	} else if (old->vlen == vlen) {
		if (vlen) { /* same length: overwrite in place (Figure 3, lines 9-10) */
			IDX_LOG_VALUE(node_value(old), vlen);
			seq_write_begin(&st->seq);
			memcpy(node_value(old), val, vlen);
			seq_write_end(&st->seq);
		}
	} else {
		struct hash_node *n =
			node_new(key, (uint32_t)klen, val, (uint32_t)vlen, old->next, link);
		if (n) {
			link_store(st, link, n);
			IDX_FREE(old);
		} else {
			rc = TIPS_ENOMEM;
		}
	}
	pthread_rwlock_unlock(&st->lock);
	return rc;
}

static int hash_remove(void *index, const void *key, size_t klen)
{
	struct hash_index *h = index;
	if (!key || klen == 0)
		return TIPS_EINVAL;
	if (klen > TIPS_MAX_KEY)
		return TIPS_ENOTFOUND;
	uint64_t b = bucket_of(h, key, klen);
	struct hash_stripe *st = stripe_of(h, b);
	int rc = 0;

	pthread_rwlock_wrlock(&st->lock);
	struct hash_node **link = chain_find(&h->buckets[b], key, (uint32_t)klen);
	struct hash_node *old = *link;
	if (old) {
		link_set(st, link, old->next);
		IDX_FREE(old);
	} else {
		rc = TIPS_ENOTFOUND;
	}
	pthread_rwlock_unlock(&st->lock);
	return rc;
}

/* Copies @n's value (up to @cap bytes) and its length: the found case of a lookup. */
static inline __attribute__((always_inline)) int
found(const struct hash_node *n, void *val, size_t cap, size_t *vlen)
{
	size_t len = n->vlen;
	if (cap && len)
		seq_racy_copy(val, n->data + n->klen, len < cap ? len : cap);
	if (vlen)
		*vlen = len;
	return IDX_FOUND(len, cap);
}

/*
 * Optimistic lookup: walks @key's chain without the lock between two reads of the
 * stripe's counter, and keeps the answer only if the counter was even and did not move,
 * i.e. no writer stored to the stripe meanwhile. Run inside a read section, so every
 * node it reaches stays allocated; a node's key and lengths never change once it is
 * linked, so only the value bytes can be torn, and the copy is validated again. The
 * chain it walks is acyclic at every instant (writers only relink to nodes further
 * down or to new ones), so the walk ends. Not instrumented by ThreadSanitizer: the
 * racing reads are the algorithm, and their result is discarded unless validated.
 * Returns 1 and sets *@rc when it decided, 0 to retry.
 */
__attribute__((no_sanitize_thread)) static int
lookup_optimistic(struct hash_index *h, struct hash_stripe *st, uint64_t b, const void *key,
		  uint32_t klen, void *val, size_t cap, size_t *vlen, int *rc)
{
	uint64_t s0 = seq_read_begin(&st->seq);
	if (s0 & 1)
		return 0;
	const struct hash_node *n = atomic_load_explicit(
		(struct hash_node *_Atomic *)&h->buckets[b], memory_order_acquire);
	while (n && !node_has_key(n, key, klen))
		n = atomic_load_explicit((struct hash_node *_Atomic *)&n->next,
					 memory_order_acquire);
	int r = n ? found(n, val, cap, vlen) : TIPS_ENOTFOUND;
	if (!seq_read_valid(&st->seq, s0))
		return 0;
	*rc = r;
	return 1;
}

static int hash_lookup(void *index, const void *key, size_t klen, void *val, size_t cap,
		       size_t *vlen)
{
	struct hash_index *h = index;
	if (!key || klen == 0 || (cap && !val))
		return TIPS_EINVAL;
	if (klen > TIPS_MAX_KEY)
		return TIPS_ENOTFOUND;
	uint64_t b = bucket_of(h, key, klen);
	struct hash_stripe *st = stripe_of(h, b);
	int rc = 0;

	IDX_READ_ENTER();
	for (unsigned attempt = 0; attempt < HASH_OPT_TRIES; attempt++) {
		if (lookup_optimistic(h, st, b, key, (uint32_t)klen, val, cap, vlen, &rc)) {
			IDX_READ_EXIT();
			return rc;
		}
		seq_backoff(attempt);
	}
	IDX_READ_EXIT(); /* never block on the lock inside a read section */

	pthread_rwlock_rdlock(&st->lock);
	struct hash_node *n = *chain_find(&h->buckets[b], key, (uint32_t)klen);
	rc = n ? found(n, val, cap, vlen) : TIPS_ENOTFOUND;
	pthread_rwlock_unlock(&st->lock);
	return rc;
}

/* Replay's look-ahead (plugin.h): @deep 0 loads @key's bucket head, for writing;
 * @deep 1 reads it, now in cache, and loads the first node of its chain and the
 * stripe. A head read without the lock may be stale: it is only prefetched. @deep 2,
 * a writer's outcome lookup to come: that lookup, made now (its chain's node is a
 * second miss, which the lookup under the framework's bucket lock then finds here). */
static void hash_prefetch(void *index, const void *key, size_t klen, int deep)
{
	struct hash_index *h = index;
	if (deep == 2) {
		IDX_LOOKUP_AHEAD(hash_lookup, index, key, klen);
		return;
	}
	uint64_t b = bucket_of(h, key, klen);
	struct hash_node **head = &h->buckets[b];
	if (!deep) {
		__builtin_prefetch(head, 1, 3);
		return;
	}
	__builtin_prefetch(stripe_of(h, b), 1, 3);
	__builtin_prefetch(atomic_load_explicit((struct hash_node *_Atomic *)head,
						memory_order_relaxed),
			   1, 3);
}

#ifdef IDX_TIPS
/* Replay's batched logging (plugin.h): the range a write of @key logs first. An absent
 * key is inserted at the bucket head (the head). A key in the chain logs nothing ahead:
 * a value of @vlen bytes is overwritten in place with no undo record (IDX_LOG_VALUE),
 * and a value of another length replaces the node (a link the chain decides): no
 * guess. Reads the chain without the lock, by acquire loads: nodes are published
 * complete and not reused before a reclamation. */
static int hash_log_ahead(void *index, const void *key, size_t klen, size_t vlen,
			  void **addr, size_t *size)
{
	struct hash_index *h = index;
	struct hash_node *_Atomic *link =
		(struct hash_node *_Atomic *)&h->buckets[bucket_of(h, key, klen)];
	for (struct hash_node *n = atomic_load_explicit(link, memory_order_acquire); n;
	     n = atomic_load_explicit((struct hash_node *_Atomic *)&n->next,
				      memory_order_acquire)) {
		if (node_has_key(n, key, (uint32_t)klen))
			return 0;
	}
	*addr = (void *)link;
	*size = sizeof(struct hash_node *);
	return 1;
}
#endif

/*
 * Scan: visits every chain, a stripe at a time under its read lock, keeping the @count
 * smallest keys >= @start (scan_topk.h); then calls @fn in key order with no lock held,
 * so @fn may call back into the index. The result is not a snapshot: a key written
 * while the scan runs may or may not be seen (the framework merges the newer writes).
 */
static long hash_scan(void *index, const void *start, size_t klen, size_t count,
		      tips_scan_fn fn, void *arg)
{
	struct hash_index *h = index;
	if (!fn || (klen && !start))
		return TIPS_EINVAL;
	if (count == 0)
		return 0;

	struct topk t;
	topk_init(&t, count);
	int rc = 0;
	uint64_t nbuckets = h->mask + 1;
	for (unsigned st = 0; st < HASH_STRIPES && rc == 0; st++) {
		pthread_rwlock_rdlock(&h->stripes[st].lock);
		for (uint64_t b = st; b < nbuckets && rc == 0; b += HASH_STRIPES)
			for (const struct hash_node *n = h->buckets[b]; n && rc == 0; n = n->next)
				if (!klen || topk_key_cmp(n->data, n->klen, start, klen) >= 0)
					rc = topk_offer(&t, n->data, n->klen, n->data + n->klen,
							n->vlen);
		pthread_rwlock_unlock(&h->stripes[st].lock);
	}
	long passed = rc ? rc : topk_emit(&t, fn, arg);
	topk_free(&t);
	return passed;
}

/* Root, bucket array, then every node, each checked before it is followed (a cycle
 * is caught by the caller's bound on fn calls); stops at (and returns) fn's first
 * non-zero. Takes no lock: the contract says no write runs meanwhile. */
static int hash_walk(void *index, tips_walk_fn fn, void *arg)
{
	struct hash_index *h = index;
	if (!fn)
		return TIPS_EINVAL;
	int rc = fn(h->root, arg);
	if (rc)
		return rc;
	rc = fn(h->buckets, arg);
	for (uint64_t b = 0; b <= h->mask && rc == 0; b++) {
		const void *from = &h->buckets[b];
		for (struct hash_node *n = h->buckets[b], *next; n && rc == 0; n = next) {
			if ((rc = node_check(n, from)))
				break;
			next = n->next;
			from = n;
			rc = fn(n, arg);
		}
	}
	return rc;
}

const struct tips_index_ops IDX_SYM(ops) = {
	.name = IDX_NAME,
#ifdef IDX_TIPS
	.concurrency = "TIPS: lock-free cache reads, per-bucket spinlock writes; "
		       "replay on 1024 striped rwlocks, optimistic lookups",
#else
	.concurrency = "1024 striped rwlocks (writers exclusive, scans share); optimistic "
		       "lookups (a sequence counter per stripe)",
#endif
	.create = hash_create,
	.open = hash_open,
	.close = hash_close,
	.insert = hash_insert,
	.update = hash_update,
	.remove = hash_remove,
	.lookup = hash_lookup,
	.scan = hash_scan,
	.walk = hash_walk,
	.prefetch = hash_prefetch,
#ifdef IDX_TIPS
	.log_ahead = hash_log_ahead,
#endif
};
