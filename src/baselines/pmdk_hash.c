/*
 * pmdk_hash.c - "pmdk-hash": src/indexes/hash.c's chained hash table made persistent
 * the conventional way, every write a libpmemobj transaction (PMDK-HT, the baseline
 * of the TIPS paper's Figure 7; ATC'21 §7.4: "the main performance bottleneck in PMDK
 * is the logging operations in the critical path"). The API is in pmdk_hash.h.
 *
 * Structure. The same as hash.c, in a libpmemobj pool of layout "tips-pmdk-hash": the
 * root object {magic, nbuckets, buckets} (pmemobj_root), a bucket array of nbuckets
 * chain heads (type PMDK_TYPE_BUCKETS), and one object per key (type PMDK_TYPE_NODE):
 * {next, klen, vlen, key bytes, value bytes}. Links are pool offsets (the off of a
 * PMEMoid of this pool; 0 ends a chain), 8 bytes like hash.c's pointers; the handle
 * turns them into addresses by adding the pool's base (what pmemobj_direct computes),
 * and caches the bucket array's address. The bucket count is a power of two >=
 * max(expected_keys, 1024); the table never resizes.
 *
 * Writes. Each is one transaction (TX_BEGIN .. TX_END) under the stripe's write lock:
 *   insert  pmemobj_tx_alloc the node, fill it (a transaction's new object needs no
 *           snapshot; libpmemobj flushes it at commit), TX_ADD the chain head, link;
 *   update  same value length: TX_ADD the value bytes, overwrite them in place;
 *           otherwise a new node replaces the old one (alloc, TX_ADD the link, store,
 *           pmemobj_tx_free the old node);
 *   put     update if present, else insert, in one transaction;
 *   remove  TX_ADD the predecessor's link, store the successor, pmemobj_tx_free.
 * Invariant: every store to an object that existed before the transaction is preceded,
 * in the same transaction, by a snapshot of exactly those bytes (pmemobj_tx_add_range
 * or _direct). At commit libpmemobj flushes the snapshotted ranges and the new objects,
 * publishes allocations and frees through its redo log and discards the undo log; a
 * crash before that point is rolled back by the next pmemobj_open. A failed allocation
 * (pool full) aborts the transaction: the snapshots are restored and TIPS_ENOMEM is
 * returned, the table unchanged.
 *
 * Locks. A pthread rwlock per stripe (bucket b: stripe b % 1024) and on the same line a
 * sequence counter (util/seqcount.h), in the DRAM handle, never in the pool: a lock
 * held at a crash does not exist afterwards. Writers hold the write lock across the
 * whole transaction, commit included, and keep the counter odd across it too (rollback
 * and the commit's frees included). Lookups are optimistic, as in hash.c: they walk the
 * chain without the lock and keep the answer only if the counter was even and did not
 * move, else retry, and take the read lock after PMDK_OPT_TRIES. Unlike hash.c's, this
 * table frees a node at the commit that unlinks it, and libpmemobj may hand its memory
 * to another stripe's insert at once: so an optimistic walk may read a reused node,
 * and checks each offset and length against the pool's size, and bounds its steps,
 * before following it; whatever it read is discarded unless the counter validates
 * (a node it could reach was freed only by a writer of its stripe, after s0). Scans
 * take the read lock, which excludes the writers of the stripe.
 *
 * Scan. As in hash.c: a full pass over the table, a stripe at a time under its read
 * lock, keeping the @count smallest keys >= start (scan_topk.h), emitted with no lock.
 *
 * Leak check. pmdk_hash_check() lists every object of the pool (pmemobj_first/next,
 * the root object excluded) and every object reachable from the root (the bucket array
 * and each chain's nodes): the same set means nothing leaked or is doubly owned.
 *
 * Pool size. Measured with 8-byte keys and values (pmdk_hash_pool_size()): a node of
 * 32 bytes takes a 128-byte allocation unit, the smallest of libpmemobj's default
 * allocation classes (112 usable bytes after its 16-byte header), plus 8 bytes of
 * bucket and the runs' metadata: about 132 bytes a key in all (hash.c's tips build:
 * about 64). We keep libpmemobj's default classes, as a conventional port would.
 */
#define _GNU_SOURCE
#include "baselines/pmdk_hash.h"

#include "indexes/scan_topk.h"
#include "util/kv.h"
#include "util/seqcount.h"

#include <errno.h>
#include <fcntl.h>
#include <libpmemobj.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PMDK_MAGIC 0x3168736864706d74ull /* "tmpdhsh1": layout version 1 */
#define PMDK_MIN_BUCKETS 1024u
#define PMDK_MAX_BUCKETS (1ull << 36) /* a 512 GiB bucket array; far from overflow */
#define PMDK_STRIPES 1024u            /* a power of two, <= PMDK_MIN_BUCKETS */
#define PMDK_OPT_TRIES 4u             /* lookup: optimistic tries before the read lock */
#define PMDK_OPT_STEPS (1u << 16)     /* lookup: longest chain walked without the lock */
#define PMDK_DEFAULT_KEYS (1ull << 20)

enum { PMDK_TYPE_BUCKETS = 1, PMDK_TYPE_NODE = 2 };

/* ---- persistent layout (in the libpmemobj pool) ------------------------------------ */

/* One key: one object, the key and the value inline after the header. */
struct pmdk_node {
	uint64_t next;        /* pool offset of the next node of the chain; 0 ends it */
	uint32_t klen;        /* key bytes, 1..TIPS_MAX_KEY */
	uint32_t vlen;        /* value bytes, 0..TIPS_MAX_VALUE */
	unsigned char data[]; /* klen key bytes, then vlen value bytes */
};

/* The root object (pmemobj_root). Written once, by the transaction that makes the
 * table; read-only afterwards. All zero: creation not done yet (or interrupted). */
struct pmdk_root {
	uint64_t magic;    /* PMDK_MAGIC once the table exists */
	uint64_t nbuckets; /* number of chains: a power of two >= 1024 */
	PMEMoid buckets;   /* object of nbuckets uint64_t chain heads (node offsets) */
};

/* ---- volatile handle ------------------------------------------------------------------- */

struct pmdk_stripe {
	_Alignas(64) pthread_rwlock_t lock; /* one per cache line: no false sharing */
	_Atomic uint64_t seq;               /* odd while a writer's transaction runs */
};

struct pmdk_hash {
	struct pmdk_stripe stripes[PMDK_STRIPES];
	PMEMobjpool *pop;
	char *base;              /* the pool's mapping: object at offset o is base + o */
	uint64_t size;           /* bytes of the pool file */
	uint64_t uuid_lo;        /* the pool's id, for PMEMoids of offsets */
	PMEMoid root_oid;
	struct pmdk_root *root;
	uint64_t *buckets;       /* root->buckets, direct */
	uint64_t mask;           /* root->nbuckets - 1 */
	char path[256];          /* for messages */
};

/* ---- keys (the hash is hash.c's: hash_key() of util/kv.h) ---------------------------------------------------------- */

static inline struct pmdk_node *node_at(const struct pmdk_hash *h, uint64_t off)
{
	return (struct pmdk_node *)(h->base + off);
}

static inline bool node_has_key(const struct pmdk_node *n, const void *key, uint32_t klen)
{
	if (n->klen != klen)
		return false;
	if (klen == 8)
		return load64(n->data) == load64(key);
	return memcmp(n->data, key, klen) == 0;
}

static inline uint64_t bucket_of(const struct pmdk_hash *h, const void *key, size_t klen)
{
	return hash_key(key, klen) & h->mask;
}

static inline struct pmdk_stripe *stripe_of(struct pmdk_hash *h, uint64_t bucket)
{
	return &h->stripes[bucket & (PMDK_STRIPES - 1)];
}

/* The link (bucket head or a node's next) holding @key's node, or the 0 ending the
 * chain if @key is absent. Call with the bucket's stripe locked. */
static uint64_t *chain_find(struct pmdk_hash *h, uint64_t *link, const void *key,
			    uint32_t klen)
{
	for (uint64_t off = *link; off; off = *link) {
		struct pmdk_node *n = node_at(h, off);
		if (node_has_key(n, key, klen))
			return link;
		link = &n->next;
	}
	return link;
}

/* check_kv() of util/kv.h, with a message naming the problem for tips_errormsg(). */
static int check_write_args(const void *key, size_t klen, const void *val, size_t vlen)
{
	if (!key || klen == 0 || (vlen && !val))
		return tips_set_error(TIPS_EINVAL, "pmdk-hash: NULL key or value, or empty key");
	if (klen > TIPS_MAX_KEY || vlen > TIPS_MAX_VALUE)
		return tips_set_error(TIPS_ETOOBIG, "pmdk-hash: key of %zu bytes (max %u) or "
				      "value of %zu bytes (max %u)", klen, TIPS_MAX_KEY, vlen,
				      TIPS_MAX_VALUE);
	return 0;
}

/* The code and message of an aborted transaction (@err: its errno). */
static int tx_failed(const struct pmdk_hash *h, const char *what, int err)
{
	if (err == ENOMEM)
		return tips_set_error(TIPS_ENOMEM, "pmdk-hash %s: %s: the pool is full (%s)",
				      h->path, what, pmemobj_errormsg());
	return tips_set_error(err ? tips_errno_code(err) : TIPS_EIO,
			      "pmdk-hash %s: %s: transaction aborted: %s", h->path, what,
			      pmemobj_errormsg());
}

/* ---- transactions (call with the stripe write-locked) --------------------------------- */

/*
 * Runs @body(@arg) as one transaction (TX_BEGIN .. TX_END) and returns 0 if it
 * committed, else the errno it aborted with. The body works in TX_STAGE_WORK; a failing
 * libpmemobj call in it (pmemobj_tx_alloc on a full pool) aborts the transaction and
 * jumps back here. Keeping the body in its own function leaves no local of the caller
 * live across the setjmp of TX_BEGIN.
 */
static int tx_run(PMEMobjpool *pop, void (*body)(void *), void *arg)
{
	volatile int err = 0;
	TX_BEGIN(pop) {
		body(arg);
	} TX_ONABORT {
		err = errno ? errno : EIO;
	} TX_END
	return err;
}

/* tx_run() of a write to stripe @st's chains (write lock held), the stripe's counter
 * odd from before the first store to after the commit or the rollback. */
static int tx_run_stripe(struct pmdk_stripe *st, PMEMobjpool *pop, void (*body)(void *),
			 void *arg)
{
	seq_write_begin(&st->seq);
	int err = tx_run(pop, body, arg);
	seq_write_end(&st->seq);
	return err;
}

/* A transaction's arguments (one struct for every kind). */
struct tx_args {
	struct pmdk_hash *h;
	uint64_t *link;        /* the link to store to (snapshotted first) */
	const void *key, *val;
	uint32_t klen, vlen;
	uint64_t next;         /* link_new: the new node's successor */
	uint64_t old;          /* a node to free (0: none) */
	struct pmdk_node *node; /* overwrite: the node whose value is overwritten */
};

/*
 * A new node {key, val, next} stored into *link (snapshotted first), and old (0: none)
 * freed. insert: link a chain head, next its old value. Replacement (update of another
 * length, put): link the link holding old, next old's successor.
 */
static void tx_link_new(void *p)
{
	struct tx_args *a = p;
	PMEMoid oid = pmemobj_tx_alloc(sizeof(struct pmdk_node) + (size_t)a->klen + a->vlen,
				       PMDK_TYPE_NODE); /* aborts on failure */
	struct pmdk_node *n = node_at(a->h, oid.off);
	n->next = a->next;
	n->klen = a->klen;
	n->vlen = a->vlen;
	memcpy(n->data, a->key, a->klen);
	if (a->vlen)
		memcpy(n->data + a->klen, a->val, a->vlen);
	pmemobj_tx_add_range_direct(a->link, sizeof(*a->link));
	*a->link = oid.off;
	if (a->old)
		pmemobj_tx_free((PMEMoid){ a->h->uuid_lo, a->old });
}

/* *link (snapshotted first) skips node old, which is freed. */
static void tx_unlink(void *p)
{
	struct tx_args *a = p;
	pmemobj_tx_add_range_direct(a->link, sizeof(*a->link));
	*a->link = node_at(a->h, a->old)->next;
	pmemobj_tx_free((PMEMoid){ a->h->uuid_lo, a->old });
}

/* vlen bytes of node's value (snapshotted first) overwritten in place. */
static void tx_overwrite(void *p)
{
	struct tx_args *a = p;
	unsigned char *v = a->node->data + a->node->klen;
	pmemobj_tx_add_range_direct(v, a->vlen);
	memcpy(v, a->val, a->vlen);
}

/* Update of the node held by *@link (present). */
static int replace_value(struct pmdk_hash *h, struct pmdk_stripe *st, uint64_t *link,
			 const void *key, uint32_t klen, const void *val, uint32_t vlen,
			 const char *what)
{
	struct pmdk_node *old = node_at(h, *link);
	struct tx_args a = { .h = h, .link = link, .key = key, .val = val, .klen = klen,
			     .vlen = vlen, .next = old->next, .old = *link, .node = old };
	int err = 0;
	if (old->vlen != vlen)
		err = tx_run_stripe(st, h->pop, tx_link_new, &a);
	else if (vlen)
		err = tx_run_stripe(st, h->pop, tx_overwrite, &a);
	return err ? tx_failed(h, what, err) : 0;
}

/* ---- operations --------------------------------------------------------------------------- */

/* insert (@mode 0), update (1) or put (2). */
static int write_kv(struct pmdk_hash *h, int mode, const void *key, size_t klen,
		    const void *val, size_t vlen)
{
	static const char *const names[] = { "insert", "update", "put" };
	if (!h)
		return tips_set_error(TIPS_EINVAL, "pmdk-hash: NULL handle");
	int rc = check_write_args(key, klen, val, vlen);
	if (rc)
		return rc;
	uint64_t b = bucket_of(h, key, klen);
	uint64_t *head = &h->buckets[b];
	struct pmdk_stripe *st = stripe_of(h, b);
	pthread_rwlock_wrlock(&st->lock);
	uint64_t *link = chain_find(h, head, key, (uint32_t)klen);
	if (*link) {
		if (mode == 0)
			rc = TIPS_EKEYEXISTS;
		else
			rc = replace_value(h, st, link, key, (uint32_t)klen, val,
					   (uint32_t)vlen, names[mode]);
	} else if (mode == 1) {
		rc = TIPS_ENOTFOUND;
	} else {
		struct tx_args a = { .h = h, .link = head, .key = key, .val = val,
				     .klen = (uint32_t)klen, .vlen = (uint32_t)vlen, .next = *head };
		int err = tx_run_stripe(st, h->pop, tx_link_new, &a);
		rc = err ? tx_failed(h, names[mode], err) : 0;
	}
	pthread_rwlock_unlock(&st->lock);
	return rc;
}

int pmdk_hash_insert(struct pmdk_hash *h, const void *key, size_t klen, const void *val,
		     size_t vlen)
{
	return write_kv(h, 0, key, klen, val, vlen);
}

int pmdk_hash_update(struct pmdk_hash *h, const void *key, size_t klen, const void *val,
		     size_t vlen)
{
	return write_kv(h, 1, key, klen, val, vlen);
}

int pmdk_hash_put(struct pmdk_hash *h, const void *key, size_t klen, const void *val,
		  size_t vlen)
{
	return write_kv(h, 2, key, klen, val, vlen);
}

int pmdk_hash_remove(struct pmdk_hash *h, const void *key, size_t klen)
{
	if (!h || !key || klen == 0)
		return tips_set_error(TIPS_EINVAL, "pmdk-hash: NULL handle or key, or empty key");
	if (klen > TIPS_MAX_KEY)
		return TIPS_ENOTFOUND;
	uint64_t b = bucket_of(h, key, klen);
	struct pmdk_stripe *st = stripe_of(h, b);
	int rc = TIPS_ENOTFOUND;
	pthread_rwlock_wrlock(&st->lock);
	uint64_t *link = chain_find(h, &h->buckets[b], key, (uint32_t)klen);
	if (*link) {
		struct tx_args a = { .h = h, .link = link, .old = *link };
		int err = tx_run_stripe(st, h->pop, tx_unlink, &a);
		rc = err ? tx_failed(h, "remove", err) : 0;
	}
	pthread_rwlock_unlock(&st->lock);
	return rc;
}

/* The found case of a lookup: copies up to @cap bytes of @n's value, and its length. */
__attribute__((no_sanitize_thread)) static inline int found(const struct pmdk_node *n,
								 void *val, size_t cap,
								 size_t *vlen)
{
	if (cap)
		seq_racy_copy(val, n->data + n->klen, n->vlen < cap ? n->vlen : cap);
	if (vlen)
		*vlen = n->vlen;
	return n->vlen > cap ? TIPS_ESIZE : 0;
}

/* Does a node at pool offset @off, with its key and value, lie inside the pool? It
 * may be a freed one that a writer is reusing (lookup_optimistic). */
__attribute__((no_sanitize_thread)) static inline bool node_in_pool(const struct pmdk_hash *h,
								    uint64_t off)
{
	if (off < sizeof(struct pmdk_node) || off > h->size - sizeof(struct pmdk_node))
		return false;
	const struct pmdk_node *n = node_at(h, off);
	return n->klen <= TIPS_MAX_KEY && n->vlen <= h->size &&
	       (uint64_t)n->klen + n->vlen <= h->size - sizeof(struct pmdk_node) - off;
}

enum { OPT_DONE, OPT_RETRY, OPT_LOCK };

/*
 * Optimistic lookup (see "Locks" above): walks @key's chain without the lock between
 * two reads of the stripe's counter. Each node is bounds-checked before it is read
 * further, for it may be a freed and reused one; a chain longer than PMDK_OPT_STEPS
 * goes to the locked path. Not instrumented by ThreadSanitizer: the racing reads are
 * the algorithm, and their result is discarded unless the counter validates.
 */
__attribute__((no_sanitize_thread)) static int
lookup_optimistic(struct pmdk_hash *h, struct pmdk_stripe *st, uint64_t b, const void *key,
		  uint32_t klen, void *val, size_t cap, size_t *vlen, int *rc)
{
	uint64_t s0 = seq_read_begin(&st->seq);
	if (s0 & 1)
		return OPT_RETRY;
	uint64_t off = atomic_load_explicit((_Atomic uint64_t *)&h->buckets[b],
					    memory_order_acquire);
	for (unsigned steps = 0; off; steps++) {
		if (!node_in_pool(h, off))
			return OPT_RETRY;
		if (steps == PMDK_OPT_STEPS)
			return seq_read_valid(&st->seq, s0) ? OPT_LOCK : OPT_RETRY;
		const struct pmdk_node *n = node_at(h, off);
		if (n->klen == klen && seq_racy_equal(n->data, key, klen))
			break;
		off = atomic_load_explicit((_Atomic uint64_t *)&n->next, memory_order_acquire);
	}
	int r = off ? found(node_at(h, off), val, cap, vlen) : TIPS_ENOTFOUND;
	if (!seq_read_valid(&st->seq, s0))
		return OPT_RETRY;
	*rc = r;
	return OPT_DONE;
}

int pmdk_hash_lookup(struct pmdk_hash *h, const void *key, size_t klen, void *val,
		     size_t cap, size_t *vlen)
{
	if (!h || !key || klen == 0 || (cap && !val))
		return tips_set_error(TIPS_EINVAL, "pmdk-hash: NULL handle, key or buffer, or "
				      "empty key");
	if (klen > TIPS_MAX_KEY)
		return TIPS_ENOTFOUND;
	uint64_t b = bucket_of(h, key, klen);
	struct pmdk_stripe *st = stripe_of(h, b);
	int rc = TIPS_ENOTFOUND;
	for (unsigned attempt = 0; attempt < PMDK_OPT_TRIES; attempt++) {
		int o = lookup_optimistic(h, st, b, key, (uint32_t)klen, val, cap, vlen, &rc);
		if (o == OPT_DONE)
			return rc;
		if (o == OPT_LOCK)
			break;
		seq_backoff(attempt);
	}
	pthread_rwlock_rdlock(&st->lock);
	uint64_t off = *chain_find(h, &h->buckets[b], key, (uint32_t)klen);
	rc = off ? found(node_at(h, off), val, cap, vlen) : TIPS_ENOTFOUND;
	pthread_rwlock_unlock(&st->lock);
	return rc;
}

long pmdk_hash_scan(struct pmdk_hash *h, const void *start, size_t klen, size_t count,
		    tips_scan_fn fn, void *arg)
{
	if (!h || !fn || (klen && !start))
		return tips_set_error(TIPS_EINVAL, "pmdk-hash: NULL handle, callback or start");
	if (count == 0)
		return 0;
	struct topk t;
	topk_init(&t, count);
	int rc = 0;
	uint64_t nbuckets = h->mask + 1;
	for (unsigned st = 0; st < PMDK_STRIPES && rc == 0; st++) {
		pthread_rwlock_rdlock(&h->stripes[st].lock);
		for (uint64_t b = st; b < nbuckets && rc == 0; b += PMDK_STRIPES)
			for (uint64_t off = h->buckets[b]; off && rc == 0;) {
				const struct pmdk_node *n = node_at(h, off);
				if (!klen || topk_key_cmp(n->data, n->klen, start, klen) >= 0)
					rc = topk_offer(&t, n->data, n->klen, n->data + n->klen,
							n->vlen);
				off = n->next;
			}
		pthread_rwlock_unlock(&h->stripes[st].lock);
	}
	long passed = rc ? tips_set_error(rc, "pmdk-hash: scan: out of memory for the "
					  "kept pairs") : topk_emit(&t, fn, arg);
	topk_free(&t);
	return passed;
}

/* ---- open, create, close ------------------------------------------------------------------ */

uint64_t pmdk_hash_pool_size(uint64_t expected_keys)
{
	if (!expected_keys)
		expected_keys = PMDK_DEFAULT_KEYS;
	uint64_t nb = PMDK_MIN_BUCKETS;
	while (nb < expected_keys && nb < PMDK_MAX_BUCKETS)
		nb <<= 1;
	/* 144 B a key (a 128 B allocation unit, libpmemobj's smallest by default, and
	 * its share of run metadata, with ~10% to spare), the bucket array, and 128 MiB
	 * for libpmemobj's lanes, heap metadata and slack; 2 MiB granules. */
	return ((expected_keys * 144 + nb * 8 + (128ull << 20)) >> 21) << 21;
}

void pmdk_hash_force_flushes(void)
{
	setenv("PMEM_IS_PMEM_FORCE", "1", 0);
}

/* libpmemobj's process-wide prefault settings, for the next create or open. */
static void set_prefault(int on)
{
	int v = on != 0;
	(void)pmemobj_ctl_set(NULL, "prefault.at_create", &v);
	(void)pmemobj_ctl_set(NULL, "prefault.at_open", &v);
}

/* 0 if @path starts with libpmemobj's pool signature, else the code (message set). */
static int check_signature(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return tips_set_error(tips_errno_code(errno), "pmdk-hash: cannot open %s: %s",
				      path, strerror(errno));
	char sig[8] = { 0 };
	ssize_t n = pread(fd, sig, sizeof(sig), 0);
	close(fd);
	if (n != (ssize_t)sizeof(sig) || memcmp(sig, "PMEMOBJ", 8) != 0)
		return tips_set_error(TIPS_ENOTPOOL, "pmdk-hash: %s is not a libpmemobj pool "
				      "(no PMEMOBJ signature)", path);
	return 0;
}

struct table_args {
	PMEMoid root_oid;
	uint64_t nbuckets;
};

/* The bucket array allocated (zeroed), the root (snapshotted first) filled. */
static void tx_table_create(void *p)
{
	struct table_args *a = p;
	PMEMoid b = pmemobj_tx_zalloc(a->nbuckets * sizeof(uint64_t), PMDK_TYPE_BUCKETS);
	struct pmdk_root *root = pmemobj_direct(a->root_oid);
	pmemobj_tx_add_range(a->root_oid, 0, sizeof(*root));
	root->nbuckets = a->nbuckets;
	root->buckets = b;
	root->magic = PMDK_MAGIC;
}

/* Makes the bucket array and fills the root, in one transaction. */
static int table_create(PMEMobjpool *pop, PMEMoid root_oid, uint64_t expected,
			const char *path)
{
	uint64_t nb = PMDK_MIN_BUCKETS;
	while (nb < expected && nb < PMDK_MAX_BUCKETS)
		nb <<= 1;
	struct table_args a = { root_oid, nb };
	int err = tx_run(pop, tx_table_create, &a);
	if (err == ENOMEM)
		return tips_set_error(TIPS_ENOMEM, "pmdk-hash %s: the pool is too small for "
				      "%llu buckets (%s)", path, (unsigned long long)nb,
				      pmemobj_errormsg());
	if (err)
		return tips_set_error(tips_errno_code(err), "pmdk-hash %s: creating the table "
				      "failed: %s", path, pmemobj_errormsg());
	return 0;
}

/* Checks the root of an opened pool, finishing an interrupted creation. */
static int root_attach(PMEMobjpool *pop, const char *path, uint64_t expected,
		       PMEMoid *root_oid)
{
	size_t rsize = pmemobj_root_size(pop);
	if (rsize != 0 && rsize != sizeof(struct pmdk_root))
		return tips_set_error(TIPS_ECORRUPT, "pmdk-hash %s: the root object has %zu "
				      "bytes, not %zu: not a pmdk-hash table", path, rsize,
				      sizeof(struct pmdk_root));
	*root_oid = pmemobj_root(pop, sizeof(struct pmdk_root)); /* zeroed if new */
	if (OID_IS_NULL(*root_oid))
		return tips_set_error(TIPS_ENOMEM, "pmdk-hash %s: no room for the root object "
				      "(%s)", path, pmemobj_errormsg());
	struct pmdk_root *root = pmemobj_direct(*root_oid);
	if (root->magic == 0 && root->nbuckets == 0 && OID_IS_NULL(root->buckets))
		return table_create(pop, *root_oid, expected, path);
	uint64_t nb = root->nbuckets;
	if (root->magic != PMDK_MAGIC)
		return tips_set_error(TIPS_ECORRUPT, "pmdk-hash %s: bad magic %#llx in the root "
				      "(want %#llx)", path, (unsigned long long)root->magic,
				      (unsigned long long)PMDK_MAGIC);
	if (nb < PMDK_MIN_BUCKETS || nb > PMDK_MAX_BUCKETS || (nb & (nb - 1)) ||
	    OID_IS_NULL(root->buckets) ||
	    pmemobj_type_num(root->buckets) != PMDK_TYPE_BUCKETS ||
	    pmemobj_alloc_usable_size(root->buckets) < nb * sizeof(uint64_t))
		return tips_set_error(TIPS_ECORRUPT, "pmdk-hash %s: the root's bucket array "
				      "(%llu buckets) is not valid", path, (unsigned long long)nb);
	return 0;
}

int pmdk_hash_open(const char *path, const struct pmdk_hash_config *cfg,
		   struct pmdk_hash **out)
{
	if (!path || !out)
		return tips_set_error(TIPS_EINVAL, "pmdk-hash: NULL path or handle pointer");
	*out = NULL;
	struct pmdk_hash_config def = { 0 };
	if (!cfg)
		cfg = &def;
	uint64_t expected = cfg->expected_keys ? cfg->expected_keys : PMDK_DEFAULT_KEYS;
	PMEMobjpool *pop;
	struct stat st;
	bool created = false;
	if (stat(path, &st) != 0) {
		if (errno != ENOENT)
			return tips_set_error(tips_errno_code(errno), "pmdk-hash: %s: %s", path,
					      strerror(errno));
		if (!(cfg->flags & PMDK_HASH_CREATE))
			return tips_set_error(TIPS_ENOENT, "pmdk-hash: no pool at %s", path);
		uint64_t size = cfg->pool_size ? cfg->pool_size : pmdk_hash_pool_size(expected);
		if (size < PMEMOBJ_MIN_POOL)
			return tips_set_error(TIPS_ESIZE, "pmdk-hash: pool size %llu is below "
					      "libpmemobj's minimum %llu", (unsigned long long)size,
					      (unsigned long long)PMEMOBJ_MIN_POOL);
		set_prefault(cfg->prefault);
		pop = pmemobj_create(path, PMDK_HASH_LAYOUT, size, 0600);
		if (!pop) {
			int e = errno;
			return tips_set_error(e == ENOSPC ? TIPS_ENOSPC : tips_errno_code(e),
					      "pmdk-hash: cannot create a pool of %llu bytes at "
					      "%s: %s", (unsigned long long)size, path,
					      pmemobj_errormsg());
		}
		created = true;
	} else {
		int rc = check_signature(path);
		if (rc)
			return rc;
		set_prefault(cfg->prefault);
		pop = pmemobj_open(path, PMDK_HASH_LAYOUT);
		if (!pop) {
			int e = errno;
			const char *msg = pmemobj_errormsg();
			if (e == EINVAL && strstr(msg, "layout"))
				return tips_set_error(TIPS_EMISMATCH, "pmdk-hash: %s is a libpmemobj "
						      "pool of another layout (%s)", path, msg);
			if (e == EWOULDBLOCK || e == EAGAIN)
				return tips_set_error(TIPS_ELOCKED, "pmdk-hash: %s is open "
						      "elsewhere (%s)", path, msg);
			return tips_set_error(e ? tips_errno_code(e) : TIPS_EIO,
					      "pmdk-hash: cannot open %s: %s", path, msg);
		}
	}
	if (stat(path, &st) != 0)
		st.st_size = 0;

	PMEMoid root_oid;
	int rc = root_attach(pop, path, expected, &root_oid);
	struct pmdk_hash *h = NULL;
	if (rc == 0 && posix_memalign((void **)&h, _Alignof(struct pmdk_hash), sizeof(*h)))
		rc = tips_set_error(TIPS_ENOMEM, "pmdk-hash: out of memory for the handle");
	if (rc) {
		pmemobj_close(pop);
		if (created)
			unlink(path); /* no half-made pool left behind */
		return rc;
	}
	memset(h, 0, sizeof(*h));
	for (unsigned i = 0; i < PMDK_STRIPES; i++) {
		if (pthread_rwlock_init(&h->stripes[i].lock, NULL)) {
			while (i--)
				pthread_rwlock_destroy(&h->stripes[i].lock);
			free(h);
			pmemobj_close(pop);
			return tips_set_error(TIPS_ENOMEM, "pmdk-hash: cannot make the locks");
		}
	}
	h->pop = pop;
	h->root_oid = root_oid;
	h->root = pmemobj_direct(root_oid);
	h->base = (char *)h->root - root_oid.off; /* what pmemobj_direct adds to an off */
	h->size = (uint64_t)st.st_size;
	h->uuid_lo = root_oid.pool_uuid_lo;
	h->buckets = pmemobj_direct(h->root->buckets);
	h->mask = h->root->nbuckets - 1;
	snprintf(h->path, sizeof(h->path), "%s", path);
	*out = h;
	return 0;
}

void pmdk_hash_close(struct pmdk_hash **hp)
{
	if (!hp || !*hp)
		return;
	struct pmdk_hash *h = *hp;
	pmemobj_close(h->pop);
	for (unsigned i = 0; i < PMDK_STRIPES; i++)
		pthread_rwlock_destroy(&h->stripes[i].lock);
	free(h);
	*hp = NULL;
}

/* ---- checks ------------------------------------------------------------------------------- */

struct off_list {
	uint64_t *v;
	size_t n, cap;
};

static bool off_push(struct off_list *l, uint64_t off)
{
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 4096;
		uint64_t *v = realloc(l->v, cap * sizeof(*v));
		if (!v)
			return false;
		l->v = v;
		l->cap = cap;
	}
	l->v[l->n++] = off;
	return true;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

int pmdk_hash_check(struct pmdk_hash *h, pmdk_hash_problem_fn fn, void *arg,
		    struct pmdk_hash_report *rep)
{
	struct pmdk_hash_report r = { 0 };
	struct off_list all = { 0 }, reach = { 0 };
	bool oom = false;
	if (!h)
		return tips_set_error(TIPS_EINVAL, "pmdk-hash: NULL handle");
	for (PMEMoid o = pmemobj_first(h->pop); !OID_IS_NULL(o) && !oom; o = pmemobj_next(o))
		if (o.off != h->root_oid.off)
			oom = !off_push(&all, o.off);
	r.objects = all.n;
	/* Reachable: the bucket array, then each chain. A chain longer than the pool has
	 * objects loops; an offset outside the pool is not followed. */
	oom = oom || !off_push(&reach, h->root->buckets.off);
	for (uint64_t b = 0; b <= h->mask && !oom; b++) {
		uint64_t steps = 0;
		for (uint64_t off = h->buckets[b]; off && !oom; off = node_at(h, off)->next) {
			oom = !off_push(&reach, off);
			r.keys++;
			if (off + sizeof(struct pmdk_node) > h->size || ++steps > all.n)
				break; /* counted below: not an object, or reached twice */
		}
	}
	if (oom) {
		free(all.v);
		free(reach.v);
		return tips_set_error(TIPS_ENOMEM, "pmdk-hash: check: out of memory");
	}
	r.reachable = reach.n;
	qsort(all.v, all.n, sizeof(uint64_t), cmp_u64);
	qsort(reach.v, reach.n, sizeof(uint64_t), cmp_u64);
	size_t i = 0, j = 0;
	while (i < all.n || j < reach.n) {
		if (j < reach.n && j > 0 && reach.v[j] == reach.v[j - 1]) {
			r.owned_twice++;
			if (fn)
				fn(TIPS_BLOCK_OWNED_TWICE, reach.v[j], 0, arg);
			j++;
		} else if (j == reach.n || (i < all.n && all.v[i] < reach.v[j])) {
			r.leaked++;
			if (fn)
				fn(TIPS_BLOCK_LEAKED, all.v[i],
				   pmemobj_alloc_usable_size((PMEMoid){ h->uuid_lo, all.v[i] }), arg);
			i++;
		} else if (i == all.n || reach.v[j] < all.v[i]) {
			r.free_but_owned++;
			if (fn)
				fn(TIPS_BLOCK_FREE_BUT_OWNED, reach.v[j], 0, arg);
			j++;
		} else {
			i++, j++;
		}
	}
	free(all.v);
	free(reach.v);
	if (rep)
		*rep = r;
	if (r.leaked || r.free_but_owned || r.owned_twice)
		return tips_set_error(TIPS_ECORRUPT, "pmdk-hash %s: %llu objects, %llu reachable: "
				      "%llu leaked, %llu reachable but not objects, %llu reached "
				      "twice", h->path, (unsigned long long)r.objects,
				      (unsigned long long)r.reachable,
				      (unsigned long long)r.leaked,
				      (unsigned long long)r.free_but_owned,
				      (unsigned long long)r.owned_twice);
	return 0;
}

int pmdk_hash_check_file(const char *path)
{
	int rc = pmemobj_check(path, PMDK_HASH_LAYOUT);
	if (rc == 1)
		return 0;
	if (rc == 0)
		return tips_set_error(TIPS_ECORRUPT, "pmdk-hash: pmemobj_check %s: inconsistent "
				      "(%s)", path, pmemobj_errormsg());
	return tips_set_error(errno ? tips_errno_code(errno) : TIPS_EIO, "pmdk-hash: "
			      "pmemobj_check %s: %s", path, pmemobj_errormsg());
}
