/*
 * db.c - ListDB's front end: open (its recovery, Algorithm 5, is recover.c), put/delete
 * (Algorithm 1), write batches (tips/batch.h), get (Algorithm 4), scan (a merging
 * iterator over every level), and the background threads that flush MemTables
 * (Algorithm 2) and run Zipper compaction (Algorithm 3).
 *
 * Tables. db->mutable_mt takes writes; a full one is sealed and joins the immutable
 * list; the oldest immutable one is flushed into an L0 table; the oldest L0 table is
 * merged into L1. Readers see the lists through an RCU-published view (struct ld_view):
 * every table they find stays readable until they leave their read section.
 * Invariants:
 *   - a MemTable of seq S holds exactly the entries with LD_SEQ(lsn) == S; a table moves
 *     to the next list (immutable -> L0 -> gone) only after its successor form holds
 *     every entry, and the view is republished in that order, so a reader that looks
 *     newest-to-oldest never misses an entry that was acknowledged before it started;
 *   - tables are flushed and merged oldest first; merged_seq advances only after a
 *     table is wholly in L1 and the compaction has fenced;
 *   - a write batch's entries enter a MemTable only after its one fence, all in one
 *     MemTable, so a flush never links an entry of an unfinished commit.
 */
#define _GNU_SOURCE
#include "listdb/listdb_internal.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <tips/heap.h>

#include "pm/pm.h"
#include "util/batch_internal.h"
#include "util/errors_internal.h"
#include "util/grace.h"
#include "util/version_internal.h"

uint64_t ld_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* CPU time of the calling thread (the flush and compaction CPU counters). */
static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void config_defaults(struct tips_listdb_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->struct_size = sizeof(*cfg);
	cfg->expected_keys = 1u << 20;
	cfg->domains = 1;
	cfg->braided = 1;
	cfg->flush_mode = TIPS_LISTDB_FLUSH_IUL;
	cfg->memtable_entries = 64u << 10;
	cfg->max_immutable = 4;
	cfg->max_l0 = 8;
	cfg->compaction_threads = 1;
	cfg->shards = 4;
	cfg->compaction = 1;
	cfg->bloom_bits = 10;
	cfg->cache_entries = UINT64_MAX;        /* resolved at open */
	cfg->second_chance_entries = UINT64_MAX;
}

void tips_listdb_config_init_sized(struct tips_listdb_config *cfg, size_t size)
{
	struct tips_listdb_config d;
	config_defaults(&d);
	tips_struct_init(cfg, size, &d, sizeof(d));
}

void *ld_dram_calloc(struct tips_listdb *db, enum ld_dram_site site, size_t n)
{
	if (atomic_load_explicit(&db->dram_faults, memory_order_relaxed) & site)
		return NULL;
	return calloc(1, n);
}

/* ---- views --------------------------------------------------------------------------- */

static unsigned l0_count(const struct tips_listdb *db)
{
	unsigned n = 0;
	for (const struct ld_l0 *t = db->l0_oldest; t; t = t->newer)
		n++;
	return n;
}

/* A view with room for @cap L0 tables, allocated before the change it will publish, so
 * that a change is made only once its view exists; NULL when DRAM is out. */
static struct ld_view *view_new(struct tips_listdb *db, unsigned cap)
{
	struct ld_view *v = ld_dram_calloc(db, LD_DRAM_VIEW, sizeof(*v) + cap * sizeof(v->l0[0]));
	if (v)
		v->cap = cap;
	return v;
}

/* Fills @v with the lists as they are now, with @mt as the mutable MemTable, and
 * publishes it; the caller holds view_lock. A new MemTable is published here before
 * writers can find it in db->mutable_mt, so a reader that starts after a put returned
 * sees the put's table. */
static void view_publish(struct tips_listdb *db, struct ld_view *v, struct ld_memtable *mt)
{
	unsigned n = l0_count(db);
	TIPS_INVARIANT(n <= v->cap, "a view allocated with too little room for the L0 tables");
	v->mutable_mt = mt;
	for (unsigned i = 0; i < db->nimm; i++)
		v->imm[i] = db->imm_oldest[db->nimm - 1 - i];
	v->nimm = db->nimm;
	v->nl0 = n;
	for (struct ld_l0 *t = db->l0_oldest; t; t = t->newer)
		v->l0[--n] = t;
	struct ld_view *old = atomic_exchange(&db->view, v);
	grace_free(old);
}

static unsigned shard_heads(const struct tips_listdb *db, struct ld_l0 *t, unsigned s,
			    struct ld_entry **heads)
{
	for (unsigned d = 0; d < db->domains; d++)
		heads[d] = t ? t->heads[s][d] : ld_l1_head(db, s, d);
	return db->domains;
}

/* ---- writes ------------------------------------------------------------------------- */

static unsigned random_height(struct ld_tls *t)
{
	uint64_t x = t->rng;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	t->rng = x;
	unsigned h = 1;
	while (h < LD_MAX_HEIGHT && (x & 3) == 0) {
		h++;
		x >>= 2;
	}
	return h;
}

/* The code writers get instead of waiting for a flush or compaction that keeps failing
 * (db->bg_error): waiting could last as long as the shortage. */
static int stall_error(struct tips_listdb *db)
{
	int rc = atomic_load(&db->bg_error);
	return tips_set_error(rc, "writes must wait for a MemTable flush or compaction that "
			      "failed (%s); it is retried every %d ms", tips_strerror(rc),
			      LD_RETRY_MS);
}

#define LD_ANY_FAILURE UINT64_MAX

/* Whether a writer stalled behind the background stops waiting: @since LD_ANY_FAILURE:
 * when the background's last attempt failed (writers); else when an attempt begun
 * after the first @since attempts failed (tips_listdb_flush(), which waits for a retry:
 * an attempt already running when it was called may still fail of a shortage that has
 * ended since, as test_listdb_rel_dram's cleared faults showed under TSan). */
static bool stall_gives_up(struct tips_listdb *db, uint64_t since)
{
	if (since == LD_ANY_FAILURE)
		return atomic_load(&db->bg_error) != 0;
	return atomic_load(&db->bg_failed) > since && atomic_load(&db->bg_error) != 0;
}

static void bg_help_compaction(struct tips_listdb *db);

/* A stalled writer merges shards of the running compaction, if any is left, instead of
 * sleeping: on a machine with few cores the stall is CPU the background could use.
 * Called and returns with view_lock held. True if it dropped view_lock meanwhile (the
 * caller must check its condition again before waiting: a wake-up may have been sent
 * in between); false if no shard seemed free (next_shard >= shards whenever no
 * compaction runs). */
static bool stall_help(struct tips_listdb *db)
{
	if (!db->cfg.compaction || atomic_load(&db->next_shard) >= db->shards)
		return false; /* a hint only: checked again under bg_lock */
	pthread_mutex_unlock(&db->view_lock);
	pthread_mutex_lock(&db->bg_lock);
	if (db->compacting && atomic_load(&db->next_shard) < db->shards)
		bg_help_compaction(db);
	pthread_mutex_unlock(&db->bg_lock);
	pthread_mutex_lock(&db->view_lock);
	return true;
}

/* Seals @mt (if it is still the mutable one) and installs a new MemTable; waits while
 * too many tables await flush or merge (the write stall), or returns the background's
 * error (stall_gives_up(@since)). On failure nothing changed. */
static int switch_memtable(struct tips_listdb *db, struct ld_memtable *mt, uint64_t since)
{
	pthread_mutex_lock(&db->view_lock);
	uint64_t t0 = 0;
	int rc = 0;
	while (atomic_load(&db->mutable_mt) == mt && !db->stop &&
	       (db->nimm >= db->cfg.max_immutable ||
		(db->cfg.compaction && db->nl0 >= db->cfg.max_l0))) {
		if (stall_gives_up(db, since)) {
			rc = stall_error(db);
			break;
		}
		if (!t0)
			t0 = ld_now_ns();
		if (!stall_help(db))
			pthread_cond_wait(&db->stall_cond, &db->view_lock);
	}
	if (t0) {
		atomic_fetch_add(&db->st.write_stall_ns, ld_now_ns() - t0);
		atomic_fetch_add(&db->st.write_stalls, 1);
	}
	if (rc || atomic_load(&db->mutable_mt) != mt) {
		pthread_mutex_unlock(&db->view_lock);
		return rc;
	}
	struct ld_memtable *nmt = ld_mt_create(db->next_seq, db->cfg.memtable_entries, db->cfg.bloom_bits,
						&db->arena_blocks);
	struct ld_view *v = nmt ? view_new(db, l0_count(db)) : NULL;
	if (!v) {
		pthread_mutex_unlock(&db->view_lock);
		ld_mt_destroy(nmt);
		return tips_set_error(TIPS_ENOMEM, "out of DRAM for a MemTable");
	}
	db->next_seq++;
	mt->sealed_count = atomic_fetch_or(&mt->issued, LD_MT_SEALED) & ~LD_MT_SEALED;
	db->imm_oldest[db->nimm++] = mt;
	view_publish(db, v, nmt);
	atomic_store(&db->mutable_mt, nmt);
	pthread_cond_broadcast(&db->stall_cond);
	pthread_mutex_unlock(&db->view_lock);
	pthread_mutex_lock(&db->bg_lock);
	pthread_cond_broadcast(&db->bg_cond);
	pthread_mutex_unlock(&db->bg_lock);
	return 0;
}


/* Takes @n consecutive slots (1 <= @n <= capacity) of the mutable MemTable into *@mt and
 * *@slot, sealing it and starting a new one when it has fewer left. The caller must
 * count every slot in (*@mt)->done once it is filled or given up. 0, or the error of
 * switch_memtable(). */
static int take_slots(struct tips_listdb *db, uint64_t n, struct ld_memtable **out,
		      uint64_t *slot)
{
	for (;;) {
		/* The read section keeps the MemTable alive between the load and the slot: a
		 * flushed MemTable is freed only after a grace period. A valid slot keeps it
		 * alive from then on (the flush waits for every slot's insert); a full or sealed
		 * one is left before switch_memtable, which may wait for the flusher. */
		grace_read_enter();
		struct ld_memtable *mt = atomic_load(&db->mutable_mt);
		uint64_t s = atomic_fetch_add(&mt->issued, n);
		bool sealed = s & LD_MT_SEALED, ok = !sealed && s + n <= mt->capacity;
		if (!ok && !sealed && s < mt->capacity)
			atomic_fetch_add(&mt->done, mt->capacity - s); /* too few left: empty */
		grace_read_exit();
		if (ok) {
			*out = mt;
			*slot = s;
			return 0;
		}
		int rc = switch_memtable(db, mt, LD_ANY_FAILURE); /* compares the pointer only */
		if (rc)
			return rc;
	}
}

/* Writes entry @e (room from ld_log_reserve) with its checksum; persists nothing. */
static void fill_entry(struct ld_entry *e, uint64_t lsn, uint8_t op, unsigned h,
		       const void *key, size_t klen, const void *val, size_t vlen)
{
	e->lsn = lsn;
	e->klen = (uint32_t)klen;
	e->vlen = (uint32_t)vlen;
	e->op = op;
	e->height = (uint8_t)h;
	atomic_store_explicit(&e->flags, 0, memory_order_relaxed);
	e->pad = 0;
	memset((void *)e->next, 0, 8u * h);
	unsigned char *kp = (unsigned char *)ld_key(e);
	memcpy(kp, key, klen);
	memset(kp + klen, 0, ld_pad8(klen) - klen);
	unsigned char *vp = (unsigned char *)ld_val(e);
	if (vlen)
		memcpy(vp, val, vlen);
	memset(vp + vlen, 0, ld_pad8(vlen) - vlen);
	e->csum = ld_entry_checksum(e);
}

static void count_write(struct ld_tls *t, uint8_t op)
{
	if (op == LD_OP_PUT)
		LD_COUNT(t, puts, 1);
	else
		LD_COUNT(t, deletes, 1);
}

/* Appends and indexes one entry; the arguments passed write_args_check(). Every failure
 * leaves nothing behind: the MemTable node is allocated before the entry is written. */
static int write_entry(struct tips_listdb *db, uint8_t op, const void *key, size_t klen,
		       const void *val, size_t vlen)
{
	struct ld_tls *t = ld_tls_get(db);
	if (!t)
		return tips_set_error(TIPS_ENOMEM, "out of DRAM for thread state");
	unsigned h = random_height(t);
	struct ld_memtable *mt;
	uint64_t slot;
	int rc = take_slots(db, 1, &mt, &slot);
	if (rc)
		return rc;
	struct ld_mnode *node = ld_mt_node_take(mt, t, h);
	if (!node) {
		atomic_fetch_add(&mt->done, 1); /* the slot stays empty */
		return tips_set_error(TIPS_ENOMEM, "out of DRAM for a MemTable node");
	}
	size_t size = ld_entry_size(h, klen, vlen);
	struct ld_entry *e;
	struct ld_chunk *c;
	rc = ld_log_reserve(db, t, LD_CHUNK_LOG, size, mt->seq, op == LD_OP_DELETE, &e, &c);
	if (rc) {
		atomic_fetch_add(&mt->done, 1); /* the slot stays empty; the node with mt */
		return rc;
	}
	uint64_t lsn = (mt->seq << 32) | slot;
	fill_entry(e, lsn, op, h, key, klen, val, vlen);
	struct ld_mt_pos pos;
	pm_flush(e, size);
	ld_mt_locate(mt, node, e, key, klen, lsn, &pos); /* its misses overlap the flush */
	pm_drain(); /* the durability point: before the entry can be found */
	atomic_fetch_add(&c->entries, 1);
	atomic_store(&c->max_seq, mt->seq);
	ld_mt_link(mt, node, &pos);
	atomic_fetch_add(&mt->done, 1);
	count_write(t, op);
	return 0;
}

int tips_listdb_put(struct tips_listdb *db, const void *key, size_t klen, const void *val, size_t vlen)
{
	int rc = write_args_check(db, key, klen, val, vlen);
	return rc ? rc : write_entry(db, LD_OP_PUT, key, klen, val, vlen);
}

int tips_listdb_delete(struct tips_listdb *db, const void *key, size_t klen)
{
	int rc = write_args_check(db, key, klen, NULL, 0);
	return rc ? rc : write_entry(db, LD_OP_DELETE, key, klen, NULL, 0);
}

/* ---- reads --------------------------------------------------------------------------- */

/* The newest entry of @key (a tombstone included), or NULL; inside a read section. */
static struct ld_entry *find_newest(struct tips_listdb *db, struct ld_tls *t, const void *key,
				    size_t klen)
{
	struct ld_view *v = atomic_load_explicit(&db->view, memory_order_acquire);
	uint64_t h = ld_bloom_hash(key, klen);
	struct ld_entry *e;
	if (ld_bloom_maybe(v->mutable_mt->bloom, h) && (e = ld_mt_get(v->mutable_mt, key, klen)))
		return e;
	for (unsigned i = 0; i < v->nimm; i++)
		if (ld_bloom_maybe(v->imm[i]->bloom, h) && (e = ld_mt_get(v->imm[i], key, klen)))
			return e;
	if (db->hcache) {
		LD_COUNT(t, cache_lookups, 1);
		e = ld_hcache_lookup(db->hcache, key, klen);
		if (e && (e->op == LD_OP_DELETE || !ld_obsolete(e))) {
			LD_COUNT(t, cache_hits, 1);
			return e;
		}
	}
	unsigned s = ld_shard_of(db, key, klen);
	struct ld_entry *heads[TIPS_LISTDB_MAX_DOMAINS];
	for (unsigned i = 0; i < v->nl0; i++) {
		if (!ld_bloom_maybe(v->l0[i]->bloom, h))
			continue;
		shard_heads(db, v->l0[i], s, heads);
		if ((e = ld_list_get(db, t, heads, NULL, NULL, key, klen, true)))
			return e;
	}
	shard_heads(db, NULL, s, heads);
	struct ld_entry *above = NULL;
	struct ld_entry *start = db->scache ? ld_scache_floor(db->scache, key, klen, &above) : NULL;
	if (start && ld_shard_of(db, ld_key(start), start->klen) != s)
		start = NULL;
	if (start)
		LD_COUNT(t, second_chance_hits, 1);
	/* @above is only compared by address: one of another shard's list never matches. */
	return ld_list_get(db, t, heads, start, above, key, klen, false);
}

int tips_listdb_get(struct tips_listdb *db, const void *key, size_t klen, void *val, size_t cap,
	       size_t *vlen)
{
	if (!db || !key || klen == 0 || !vlen || (cap && !val))
		return tips_set_error(TIPS_EINVAL, "tips_listdb_get: database, key, vlen "
				      "required (and a buffer when cap > 0)");
	if (klen > TIPS_MAX_KEY)
		return TIPS_ENOTFOUND; /* no such key can have been written */
	struct ld_tls *t = ld_tls_get(db); /* its domain chooses the upper layers searched */
	if (!t)
		return tips_set_error(TIPS_ENOMEM, "out of DRAM for thread state");
	grace_read_enter();
	struct ld_entry *e = find_newest(db, t, key, klen);
	int rc;
	if (!e || e->op == LD_OP_DELETE) {
		rc = TIPS_ENOTFOUND;
	} else {
		*vlen = e->vlen;
		if (e->vlen > cap) {
			rc = tips_set_error(TIPS_ESIZE, "tips_listdb_get: the value has %u bytes, "
					    "the buffer %zu", e->vlen, cap);
		} else {
			memcpy(val, ld_val(e), e->vlen);
			rc = 0;
		}
	}
	grace_read_exit();
	LD_COUNT(t, gets, 1);
	return rc;
}

/* Checked writes: a per-key lock makes the lookup and the write one step. */
static unsigned key_lock_index(const void *key, size_t klen)
{
	return (unsigned)(hash_key(key, klen) & 255);
}

static pthread_mutex_t *key_lock(struct tips_listdb *db, const void *key, size_t klen)
{
	return &db->key_locks[key_lock_index(key, klen)];
}

static int present(struct tips_listdb *db, struct ld_tls *t, const void *key, size_t klen)
{
	grace_read_enter();
	struct ld_entry *e = find_newest(db, t, key, klen);
	int yes = e && e->op == LD_OP_PUT;
	grace_read_exit();
	return yes;
}

static int checked(struct tips_listdb *db, uint8_t op, int want_present, const void *key,
		   size_t klen, const void *val, size_t vlen)
{
	int rc = write_args_check(db, key, klen, val, vlen);
	if (rc)
		return rc;
	struct ld_tls *t = ld_tls_get(db);
	if (!t)
		return tips_set_error(TIPS_ENOMEM, "out of DRAM for thread state");
	pthread_mutex_t *m = key_lock(db, key, klen);
	pthread_mutex_lock(m);
	if (present(db, t, key, klen) != want_present)
		rc = want_present ? TIPS_ENOTFOUND : TIPS_EKEYEXISTS;
	else
		rc = write_entry(db, op, key, klen, val, vlen);
	pthread_mutex_unlock(m);
	return rc;
}

int tips_listdb_insert(struct tips_listdb *db, const void *key, size_t klen, const void *val, size_t vlen)
{
	return checked(db, LD_OP_PUT, 0, key, klen, val, vlen);
}

int tips_listdb_update(struct tips_listdb *db, const void *key, size_t klen, const void *val, size_t vlen)
{
	return checked(db, LD_OP_PUT, 1, key, klen, val, vlen);
}

int tips_listdb_remove(struct tips_listdb *db, const void *key, size_t klen)
{
	return checked(db, LD_OP_DELETE, 1, key, klen, NULL, 0);
}

/* ---- write batches (tips/batch.h) ------------------------------------------------------
 * A commit locks every key of the batch (their key_locks, in ascending index order, so
 * two batches and the checked writes never deadlock), judges the conditions, and logs
 * each key's net effect (batch_group_last) as one span in one chunk: a header and N
 * entries with consecutive LSNs in N consecutive slots of one MemTable (entry.h). The
 * span is flushed and fenced once, and only then are the entries inserted into the
 * MemTable: a flush waits for every slot, so no entry of an unfinished commit is ever
 * linked into an L0 table, and recovery (ld_chunk_parse) keeps a batch only whole. */

#define LD_BATCH_MAX_BYTES (LD_CHUNK_SIZE - LD_CHUNK_HDR - LD_BATCH_HDR_BYTES)

static size_t batch_max_ops(const struct tips_listdb *db)
{
	uint64_t m = db->cfg.memtable_entries;
	return m < TIPS_BATCH_MAX_OPS ? (size_t)m : TIPS_BATCH_MAX_OPS;
}

void tips_listdb_batch_limit(struct tips_listdb *db, size_t *max_ops, size_t *max_bytes)
{
	if (max_ops)
		*max_ops = db ? batch_max_ops(db) : 0;
	if (max_bytes)
		*max_bytes = db ? LD_BATCH_MAX_BYTES : 0;
}

/* TIPS_ETOOBIG if @b is past tips_listdb_batch_limit(), counting every operation at
 * the largest size its entry can have, so the answer does not depend on luck. */
static int batch_too_big(const struct tips_listdb *db, const struct tips_batch *b)
{
	if (b->n > batch_max_ops(db))
		return tips_set_error(TIPS_ETOOBIG, "tips_listdb_batch_commit: %zu operations; "
				      "one commit takes at most %zu (a MemTable's entries)", b->n,
				      batch_max_ops(db));
	size_t bytes = 0;
	for (size_t i = 0; i < b->n; i++)
		bytes += ld_entry_size(LD_MAX_HEIGHT, b->items[i].klen, b->items[i].vlen);
	if (bytes > LD_BATCH_MAX_BYTES)
		return tips_set_error(TIPS_ETOOBIG, "tips_listdb_batch_commit: %zu log bytes at "
				      "most; one commit logs at most %zu (one log chunk)", bytes,
				      (size_t)LD_BATCH_MAX_BYTES);
	return 0;
}

/* A commit's DRAM, taken before any lock or slot: per key, its MemTable node (the
 * array in the batch's scratch memory, kept for its next commit). */
struct batch_nodes {
	struct ld_mnode **node;
	size_t n;
};

static void batch_nodes_free(struct batch_nodes *m, bool consumed)
{
	for (size_t g = 0; g < m->n && !consumed; g++)
		free(m->node[g]);
}

static int batch_nodes_new(struct ld_tls *t, struct tips_batch *b, struct batch_nodes *m)
{
	m->n = 0;
	m->node = batch_scratch(b, b->ngroups * sizeof(*m->node));
	for (; m->node && m->n < b->ngroups; m->n++)
		if (!(m->node[m->n] = ld_mt_node_new(random_height(t))))
			break;
	if (m->node && m->n == b->ngroups)
		return 0;
	batch_nodes_free(m, false);
	return tips_set_error(TIPS_ENOMEM, "tips_listdb_batch_commit: out of DRAM for %zu "
			      "MemTable nodes", b->ngroups);
}

/* Locks (@lock) or unlocks the key locks of every key of @b, in ascending order. */
static void batch_locks(struct tips_listdb *db, const struct tips_batch *b, bool lock)
{
	uint64_t held[4] = { 0 };
	for (size_t g = 0; g < b->ngroups; g++) {
		size_t x = batch_group_last(b, g);
		unsigned i = key_lock_index(batch_key(b, x), b->items[x].klen);
		held[i / 64] |= 1ull << (i % 64);
	}
	for (unsigned i = 0; i < 256; i++)
		if (held[i / 64] & (1ull << (i % 64))) {
			if (lock)
				pthread_mutex_lock(&db->key_locks[i]);
			else
				pthread_mutex_unlock(&db->key_locks[i]);
		}
}

/* Judges every condition of @b against the database (its keys locked); on a failure,
 * the earliest failing operation goes into b->failed_op. */
static int batch_judge(struct tips_listdb *db, struct ld_tls *t, struct tips_batch *b)
{
	int rc = 0;
	for (size_t g = 0; g < b->ngroups; g++) {
		if (!batch_group_conditional(b, g))
			continue;
		size_t x = batch_group_last(b, g), failed;
		int r = batch_group_check(b, g, present(db, t, batch_key(b, x), b->items[x].klen),
					  &failed);
		if (r && (!rc || failed < b->failed_op)) {
			rc = r;
			b->failed_op = failed;
		}
	}
	if (rc)
		tips_set_error(rc, "tips_listdb_batch_commit: operation %zu: the key is %s; "
			       "nothing was applied", b->failed_op,
			       rc == TIPS_EKEYEXISTS ? "present" : "absent");
	return rc;
}

static uint8_t batch_group_op(const struct tips_batch *b, size_t g)
{
	return batch_op_is_delete(b->items[batch_group_last(b, g)].op) ? LD_OP_DELETE
									: LD_OP_PUT;
}

/* The value length of group @g's entry (a delete logs none). */
static size_t batch_group_vlen(const struct tips_batch *b, size_t g)
{
	return batch_group_op(b, g) == LD_OP_DELETE ? 0 : b->items[batch_group_last(b, g)].vlen;
}

/* Bytes of group @g's entry in the span, at its node's height. */
static size_t batch_group_bytes(const struct tips_batch *b, const struct batch_nodes *m, size_t g)
{
	return ld_entry_size(m->node[g]->height, b->items[batch_group_last(b, g)].klen,
			     batch_group_vlen(b, g));
}

/* Bytes of @b's span in the log with the nodes' heights, and whether every key's net
 * effect is a delete (then the span may go into the domain's spare chunk). */
static size_t batch_span(const struct tips_batch *b, const struct batch_nodes *m, bool *tombs)
{
	size_t size = LD_BATCH_HDR_BYTES;
	*tombs = true;
	for (size_t g = 0; g < b->ngroups; g++) {
		size += batch_group_bytes(b, m, g);
		*tombs = *tombs && batch_group_op(b, g) == LD_OP_DELETE;
	}
	return size;
}

/* Writes the span at @hdr for LSNs @lsn.. (entries first, the header last), flushes it
 * and fences once: the batch's durability point. Returns the first entry. */
static struct ld_entry *batch_log(const struct tips_batch *b, const struct batch_nodes *m,
				  struct ld_entry *hdr, size_t size, uint64_t lsn)
{
	struct ld_entry *first = (struct ld_entry *)((char *)hdr + LD_BATCH_HDR_BYTES), *e = first;
	uint64_t digest = lsn;
	for (size_t g = 0; g < b->ngroups; g++) {
		size_t x = batch_group_last(b, g);
		fill_entry(e, lsn + g, batch_group_op(b, g), m->node[g]->height, batch_key(b, x),
			   b->items[x].klen, batch_val(b, x), batch_group_vlen(b, g));
		digest = ld_batch_digest(digest, e);
		e = (struct ld_entry *)((char *)e + batch_group_bytes(b, m, g));
	}
	uint64_t n = b->ngroups;
	fill_entry(hdr, lsn, LD_OP_BATCH, 1, &n, 8, &digest, 8);
	pm_flush(hdr, size);
	pm_drain();
	return first;
}

/* Logs and indexes @b (conditions judged, keys locked). On failure nothing was
 * written and m's nodes are unused. */
static int batch_write(struct tips_listdb *db, struct ld_tls *t, const struct tips_batch *b,
		       const struct batch_nodes *m)
{
	bool tombs;
	size_t size = batch_span(b, m, &tombs);
	struct ld_memtable *mt;
	uint64_t slot;
	int rc = take_slots(db, b->ngroups, &mt, &slot);
	if (rc)
		return rc;
	struct ld_entry *hdr;
	struct ld_chunk *c;
	rc = ld_log_reserve(db, t, LD_CHUNK_LOG, size, mt->seq, tombs, &hdr, &c);
	if (rc) {
		atomic_fetch_add(&mt->done, b->ngroups); /* the slots stay empty */
		return rc;
	}
	uint64_t lsn = (mt->seq << 32) | slot;
	struct ld_entry *e = batch_log(b, m, hdr, size, lsn);
	atomic_fetch_add(&c->entries, (uint32_t)b->ngroups);
	atomic_store(&c->max_seq, mt->seq);
	for (size_t g = 0; g < b->ngroups; g++) { /* from @b: the span's lines were written back */
		size_t x = batch_group_last(b, g);
		ld_mt_insert(mt, m->node[g], e, batch_key(b, x), b->items[x].klen, lsn + g);
		count_write(t, batch_group_op(b, g));
		e = (struct ld_entry *)((char *)e + batch_group_bytes(b, m, g));
	}
	atomic_fetch_add(&mt->done, b->ngroups);
	return 0;
}

/* The single writes, for a batch of one operation (batch_commit_single). */
static int single_put(void *s, const void *k, size_t kl, const void *v, size_t vl)
{
	return tips_listdb_put(s, k, kl, v, vl);
}

static int single_insert(void *s, const void *k, size_t kl, const void *v, size_t vl)
{
	return tips_listdb_insert(s, k, kl, v, vl);
}

static int single_update(void *s, const void *k, size_t kl, const void *v, size_t vl)
{
	return tips_listdb_update(s, k, kl, v, vl);
}

static int single_delete(void *s, const void *k, size_t kl)
{
	return tips_listdb_delete(s, k, kl);
}

static int single_remove(void *s, const void *k, size_t kl)
{
	return tips_listdb_remove(s, k, kl);
}

static const struct batch_single_ops single_ops = {
	single_put, single_insert, single_update, single_delete, single_remove
};

int tips_listdb_batch_commit(struct tips_listdb *db, struct tips_batch *b)
{
	if (!db)
		return tips_set_error(TIPS_EINVAL, "tips_listdb_batch_commit: NULL database");
	int rc = batch_commit_check(b, "tips_listdb_batch_commit");
	if (rc || b->n == 0)
		return rc;
	if (b->n == 1) /* one key is atomic by itself: no header entry needed */
		return batch_commit_single(b, db, &single_ops);
	if ((rc = batch_too_big(db, b)))
		return rc;
	struct ld_tls *t = ld_tls_get(db);
	if (!t)
		return tips_set_error(TIPS_ENOMEM, "out of DRAM for thread state");
	struct batch_nodes m;
	if ((rc = batch_group(b)) || (rc = batch_nodes_new(t, b, &m)))
		return rc;
	batch_locks(db, b, true);
	rc = batch_judge(db, t, b);
	if (rc == 0)
		rc = batch_write(db, t, b, &m);
	batch_locks(db, b, false);
	batch_nodes_free(&m, rc == 0);
	return rc;
}

/* ---- scans ----------------------------------------------------------------------------- */

struct source {
	struct ld_mnode *node;  /* a MemTable source */
	struct ld_entry *e;     /* current entry (NULL: exhausted) */
};

/* Skips obsolete puts, never tombstones. Zipper marks a merged tombstone obsolete after
 * the older versions of its key in L1; an L1 cursor may have read such a version as live
 * before that and an L0 cursor reach the tombstone after it: skipped, the tombstone would
 * let the scan return the deleted key. A tombstone, obsolete or not, hides only older
 * versions of its key, which it deletes (tombstones never enter L1: only L0 lists hold
 * them). */
static void source_skip_obsolete(struct source *src)
{
	while (!src->node && src->e && src->e->op != LD_OP_DELETE && ld_obsolete(src->e))
		src->e = ld_next(src->e, 0);
}

static void source_advance(struct source *src)
{
	if (src->node) {
		src->node = ld_mt_next(src->node);
		src->e = src->node ? src->node->e : NULL;
	} else {
		src->e = ld_next(src->e, 0);
		source_skip_obsolete(src);
	}
}

/* Scans shard @s from @start; returns pairs emitted, or <0 (fn stopped: -1 - n). */
static long scan_shard(struct tips_listdb *db, struct ld_view *v, unsigned s, const void *start,
		       size_t kl, size_t count, tips_scan_fn fn, void *arg, bool *stop)
{
	struct source local[64];
	size_t nsrc = 1 + v->nimm + v->nl0 + 1;
	struct source *src = nsrc <= 64 ? local : malloc(nsrc * sizeof(*src));
	if (!src)
		return tips_set_error(TIPS_ENOMEM, "out of DRAM for a scan");
	unsigned n = 0;
	struct ld_memtable *mts[33];
	unsigned nmt = 0;
	mts[nmt++] = v->mutable_mt;
	for (unsigned i = 0; i < v->nimm; i++)
		mts[nmt++] = v->imm[i];
	for (unsigned i = 0; i < nmt; i++) {
		struct ld_mnode *m = ld_mt_seek(mts[i], start, kl);
		if (m) {
			src[n].node = m;
			src[n].e = m->e;
			n++;
		}
	}
	struct ld_entry *heads[TIPS_LISTDB_MAX_DOMAINS];
	for (unsigned i = 0; i <= v->nl0; i++) {
		shard_heads(db, i < v->nl0 ? v->l0[i] : NULL, s, heads);
		src[n].node = NULL;
		src[n].e = ld_list_seek(db, heads, start, kl);
		source_skip_obsolete(&src[n]);
		if (src[n].e)
			n++;
	}
	long emitted = 0;
	const struct ld_entry *last = NULL;
	while ((size_t)emitted < count) {
		int best = -1;
		for (unsigned i = 0; i < n; i++) {
			if (!src[i].e)
				continue;
			if (best < 0 || ld_cmp_entries(src[i].e, src[best].e) < 0)
				best = (int)i;
		}
		if (best < 0)
			break;
		struct ld_entry *e = src[best].e;
		if (ld_shard_of(db, ld_key(e), e->klen) != s)
			break; /* MemTables are not sharded: the shard ends here */
		bool from_pmtable = !src[best].node;
		source_advance(&src[best]);
		if (last && ld_keycmp(ld_key(last), last->klen, ld_key(e), e->klen) == 0)
			continue; /* an older version (or the same entry seen twice) */
		/* Read again now: the cursor may have read @e as live before a merge marked it
		 * obsolete, and the version that made it so may be one the other cursors can
		 * no longer reach (a merged tombstone is linked nowhere: the element before it
		 * in L0 now leads into L1 past it). Zipper marks older versions in its scan
		 * phase, before its merge phase writes any pointer a cursor could follow past
		 * the newer one. */
		if (from_pmtable && e->op != LD_OP_DELETE && ld_obsolete(e))
			continue;
		last = e;
		if (e->op == LD_OP_DELETE)
			continue;
		emitted++;
		if (fn(ld_key(e), e->klen, ld_val(e), e->vlen, arg)) {
			*stop = true;
			break;
		}
	}
	if (src != local)
		free(src);
	return emitted;
}

long tips_listdb_scan(struct tips_listdb *db, const void *start, size_t klen, size_t count,
		 tips_scan_fn fn, void *arg)
{
	if (!db || !fn || (klen && !start))
		return tips_set_error(TIPS_EINVAL, "tips_listdb_scan: database and callback "
				      "required (and a start key when klen > 0)");
	/* A start key longer than TIPS_MAX_KEY is a valid bound, as in tips_scan(). */
	long total = 0;
	bool stop = false;
	grace_read_enter();
	struct ld_view *v = atomic_load_explicit(&db->view, memory_order_acquire);
	unsigned s0 = klen ? ld_shard_of(db, start, klen) : 0;
	for (unsigned s = s0; s < db->shards && !stop && (size_t)total < count; s++) {
		unsigned char lo = (unsigned char)((s * 256u + db->shards - 1) / db->shards);
		const void *k = s == s0 ? start : &lo;
		size_t kl = s == s0 ? klen : 1;
		if (s == s0 && klen == 0) {
			k = &lo;
			kl = 1;
		}
		long got = scan_shard(db, v, s, k, kl, count - (size_t)total, fn, arg, &stop);
		if (got < 0) {
			total = got;
			break;
		}
		total += got;
	}
	grace_read_exit();
	return total;
}

/* ---- background: flush and compaction ---------------------------------------------------- */

/* The entries of sealed MemTable @mt in order, or NULL when DRAM is out. */
static struct ld_entry **collect(struct tips_listdb *db, struct ld_memtable *mt, size_t *n)
{
	uint64_t issued = mt->sealed_count; /* set under view_lock before the table was listed */
	if (issued > mt->capacity)
		issued = mt->capacity;
	while (atomic_load(&mt->done) < issued)
		sched_yield(); /* a writer is between its slot and its MemTable insert */
	struct ld_entry **arr = ld_dram_calloc(db, LD_DRAM_FLUSH, (issued ? issued : 1) * sizeof(*arr));
	if (!arr)
		return NULL;
	*n = ld_mt_collect(mt, arr);
	return arr;
}

/* WAL mode: copy each entry of @arr out of the log into a new element, persisted, into
 * @copies. When the pool has no room for a copy, the copies made are marked obsolete
 * (garbage, reclaimed with their chunk once the table is merged) and the flush can be
 * tried again; the log entries are untouched either way. */
static int copy_out(struct tips_listdb *db, struct ld_entry **arr, struct ld_entry **copies,
		    size_t n, uint64_t seq)
{
	struct ld_tls *t = ld_tls_get(db);
	if (!t)
		return tips_set_error(TIPS_ENOMEM, "out of DRAM for thread state");
	unsigned home = t->domain;
	int rc = 0;
	size_t i;
	for (i = 0; i < n; i++) {
		struct ld_entry *e = arr[i], *c;
		struct ld_chunk *ch;
		t->domain = ld_domain_of(db, e);
		size_t sz = ld_entry_bytes(e);
		rc = ld_log_reserve(db, t, LD_CHUNK_COPY, sz, seq, false, &c, &ch);
		if (rc)
			break;
		memcpy(c, e, sz);
		atomic_store(&c->flags, 0);
		pm_flush(c, sz);
		atomic_fetch_add(&ch->entries, 1);
		atomic_store(&ch->max_seq, seq);
		copies[i] = c;
	}
	t->domain = home;
	for (size_t x = 0; rc && x < i; x++)
		ld_mark_obsolete(db, copies[x]); /* recovery keeps one of an entry's twins */
	return rc;
}

/* Marks obsolete what a WAL flush leaves behind: on success the log entries (garbage once
 * the table is merged), on failure the copies. */
static void wal_drop(struct tips_listdb *db, struct ld_entry **drop, size_t n)
{
	for (size_t i = 0; i < n; i++)
		ld_mark_obsolete(db, drop[i]);
}

/* Turns the oldest immutable MemTable into an L0 table. Every allocation comes before
 * the first change readers can see; on failure (TIPS_ENOMEM: DRAM, or in WAL mode the
 * pool has no room for the copies) the MemTable stays immutable and readable, nothing
 * acknowledged is touched, and the caller tries again later. */
static int flush_one(struct tips_listdb *db)
{
	pthread_mutex_lock(&db->view_lock);
	struct ld_memtable *mt = db->nimm ? db->imm_oldest[0] : NULL;
	pthread_mutex_unlock(&db->view_lock);
	if (!mt)
		return 0;
	size_t n = 0;
	struct ld_entry **arr = collect(db, mt, &n);
	struct ld_l0 *t = arr ? ld_dram_calloc(db, LD_DRAM_FLUSH, sizeof(*t)) : NULL;
	/* Flushes are serial and compaction only removes tables: one more than now is
	 * room enough for the view that will list @t. */
	pthread_mutex_lock(&db->view_lock);
	struct ld_view *v = t ? view_new(db, l0_count(db) + 1) : NULL;
	pthread_mutex_unlock(&db->view_lock);
	bool wal = db->cfg.flush_mode == TIPS_LISTDB_FLUSH_WAL;
	struct ld_entry **copies = v && wal ? ld_dram_calloc(db, LD_DRAM_FLUSH, (n ? n : 1) *
							     sizeof(*copies)) : NULL;
	int rc = v && (copies || !wal) ? 0 : tips_set_error(TIPS_ENOMEM, "out of DRAM for a "
							     "MemTable flush");
	if (rc == 0 && wal)
		rc = copy_out(db, arr, copies, n, mt->seq);
	bool copied = rc == 0 && wal;
	struct ld_entry **linked = wal ? copies : arr;
	if (rc == 0)
		rc = ld_l0_link(db, t, linked, n, db->hcache);
	if (copied)
		wal_drop(db, rc ? copies : arr, n);
	if (rc) {
		free(copies);
		free(arr);
		free(v);
		ld_l0_free(t);
		return rc;
	}
	t->seq = mt->seq;
	t->bloom = mt->bloom; /* the table takes over the MemTable's filter */
	mt->bloom_lent = true;
	if (wal) {
		for (size_t i = 0; i < n; i++)
			pm_flush((const void *)linked[i]->next, 8u * linked[i]->height);
		pm_drain(); /* a conventional flush persists the table it built */
	}
	free(copies);
	free(arr);
	pthread_mutex_lock(&db->view_lock);
	if (n) {
		struct ld_l0 **p = &db->l0_oldest;
		while (*p)
			p = &(*p)->newer;
		*p = t;
		db->nl0++;
	} else {
		ld_l0_free(t);
	}
	memmove(db->imm_oldest, db->imm_oldest + 1, (db->nimm - 1) * sizeof(db->imm_oldest[0]));
	db->nimm--;
	view_publish(db, v, atomic_load(&db->mutable_mt));
	pthread_cond_broadcast(&db->stall_cond);
	pthread_mutex_unlock(&db->view_lock);
	atomic_fetch_add(&db->st.memtables_flushed, 1);
	atomic_fetch_add(&db->st.entries_flushed, n);
	grace_wait();
	ld_mt_destroy(mt);
	return 0;
}

/* Room for the view published when a compaction ends. While it runs only flushes add
 * L0 tables, and a MemTable is sealed only while nl0 < max_l0 and nimm < max_immutable,
 * so nl0 + nimm never exceeds the larger of its value now and max_l0 + max_immutable. */
static unsigned compaction_view_cap(const struct tips_listdb *db)
{
	unsigned now = l0_count(db) + db->nimm;
	unsigned bound = db->cfg.max_l0 + db->cfg.max_immutable;
	return now > bound ? now : bound;
}

/* Merges the oldest L0 table into L1 with every idle compaction thread's help. Its
 * DRAM (the view that ends it, this thread's Zipper buffers) is taken before the
 * MANIFEST records the compaction; without it nothing is begun: TIPS_ENOMEM, and the
 * caller tries again later. Once begun it cannot fail. */
static int compact_one(struct tips_listdb *db)
{
	pthread_mutex_lock(&db->view_lock);
	struct ld_l0 *t = db->l0_oldest;
	struct ld_view *v = t ? view_new(db, compaction_view_cap(db)) : NULL;
	pthread_mutex_unlock(&db->view_lock);
	if (!t)
		return 0;
	struct ld_zipper_mem *zm = v ? ld_zipper_mem_new(db, t) : NULL;
	if (!zm) {
		free(v);
		return tips_set_error(TIPS_ENOMEM, "out of DRAM for a compaction");
	}
	db->manifest->compacting_seq = t->seq; /* the micro-log: begin */
	pm_persist(&db->manifest->compacting_seq, 8);
	pthread_mutex_lock(&db->bg_lock);
	atomic_store(&db->next_shard, 0);
	db->compacting = t;
	pthread_cond_broadcast(&db->bg_cond);
	pthread_mutex_lock(&db->view_lock);
	pthread_cond_broadcast(&db->stall_cond); /* stalled writers help (stall_help) */
	pthread_mutex_unlock(&db->view_lock);
	pthread_mutex_unlock(&db->bg_lock);
	ld_zipper_shards(db, t, zm);
	ld_zipper_mem_free(zm);
	/* Every shard is taken; those taken by helpers are done once helpers_in is 0 (a
	 * helper is counted from before it takes a shard until it is done, and none joins
	 * once compacting is NULL). */
	pthread_mutex_lock(&db->bg_lock);
	db->compacting = NULL;
	while (db->helpers_in)
		pthread_cond_wait(&db->bg_cond, &db->bg_lock);
	pthread_mutex_unlock(&db->bg_lock);
	pm_drain();
	db->manifest->merged_seq = t->seq + 1; /* the micro-log: done */
	db->manifest->compacting_seq = 0;
	pm_persist(&db->manifest->merged_seq, 16);
	if (db->scache) {
		pthread_mutex_lock(&db->scache_lock);
		if (ld_scache_publish_due(db->scache))
			ld_scache_publish(db->scache);
		pthread_mutex_unlock(&db->scache_lock);
	}
	pthread_mutex_lock(&db->view_lock);
	db->l0_oldest = t->newer;
	db->nl0--;
	view_publish(db, v, atomic_load(&db->mutable_mt));
	pthread_cond_broadcast(&db->stall_cond);
	pthread_mutex_unlock(&db->view_lock);
	atomic_fetch_add(&db->st.compactions, 1);
	grace_wait();
	ld_l0_free(t);
	return 0;
}

static bool bg_has_work(struct tips_listdb *db)
{
	if (db->compacting && atomic_load(&db->next_shard) < db->shards)
		return true; /* shards of a running compaction are free to take */
	if (!db->flushing && atomic_load(&db->nimm) > 0)
		return true;
	if (db->cfg.compaction && !db->compaction_busy && atomic_load(&db->nl0) > 0)
		return true;
	return db->recount_pending && !db->compaction_busy;
}

/* Records the outcome of attempt number @attempt, a flush or compaction: a failure is
 * kept in db->bg_error (writers that would wait for it get it, tips_listdb_flush()
 * returns it) and wakes them; a success clears it. The caller holds bg_lock. */
static void bg_outcome(struct tips_listdb *db, int rc, uint64_t attempt)
{
	atomic_store(&db->bg_error, rc);
	if (rc) {
		if (attempt > atomic_load(&db->bg_failed))
			atomic_store(&db->bg_failed, attempt);
		pthread_mutex_lock(&db->view_lock);
		pthread_cond_broadcast(&db->stall_cond);
		pthread_mutex_unlock(&db->view_lock);
	}
}

/* After a failure: wait LD_RETRY_MS (or until close) before trying again, so a shortage
 * does not turn the background threads into a busy loop. The caller holds bg_lock. */
static void bg_back_off(struct tips_listdb *db)
{
	struct timespec until;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_nsec += LD_RETRY_MS * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	if (!db->stop)
		pthread_cond_timedwait(&db->bg_cond, &db->bg_lock, &until);
}

/* A helper of a running compaction: merges shards while any is left. */
static void bg_help_compaction(struct tips_listdb *db)
{
	struct ld_l0 *t = db->compacting;
	db->helpers_in++;
	pthread_mutex_unlock(&db->bg_lock);
	uint64_t c0 = thread_cpu_ns();
	struct tips_pm_counters pm0;
	tips_pm_counters_thread(&pm0);
	struct ld_zipper_mem *zm = ld_zipper_mem_new(db, t);
	if (zm)
		ld_zipper_shards(db, t, zm);
	ld_zipper_mem_free(zm);
	pm_counters_to_background(&pm0); /* a writer's own counters: its puts only */
	atomic_fetch_add(&db->st.compaction_cpu_ns, thread_cpu_ns() - c0);
	pthread_mutex_lock(&db->bg_lock);
	db->helpers_in--;
	pthread_cond_broadcast(&db->bg_cond);
	if (!zm)
		bg_back_off(db); /* the compaction's own thread merges the rest */
}

static void *bg_main(void *arg)
{
	struct tips_listdb *db = arg;
	pthread_mutex_lock(&db->bg_lock);
	for (;;) {
		while (!db->stop && !bg_has_work(db))
			pthread_cond_wait(&db->bg_cond, &db->bg_lock);
		if (db->stop)
			break;
		if (db->compacting && atomic_load(&db->next_shard) < db->shards) {
			bg_help_compaction(db);
			continue;
		}
		int rc;
		if (!db->flushing && atomic_load(&db->nimm) > 0) {
			db->flushing = true;
			uint64_t attempt = atomic_fetch_add(&db->bg_started, 1) + 1;
			pthread_mutex_unlock(&db->bg_lock);
			uint64_t c0 = thread_cpu_ns();
			rc = flush_one(db);
			atomic_fetch_add(&db->st.flush_cpu_ns, thread_cpu_ns() - c0);
			pthread_mutex_lock(&db->bg_lock);
			db->flushing = false;
			bg_outcome(db, rc, attempt);
			pthread_cond_broadcast(&db->bg_cond);
			if (rc)
				bg_back_off(db);
			continue;
		}
		if (db->compaction_busy)
			continue;
		db->compaction_busy = true;
		uint64_t attempt = atomic_fetch_add(&db->bg_started, 1) + 1;
		bool recount = db->recount_pending;
		pthread_mutex_unlock(&db->bg_lock);
		uint64_t c0 = thread_cpu_ns();
		pthread_mutex_lock(&db->compaction_lock);
		rc = 0;
		if (recount)
			ld_gc_recount(db);
		else if (db->cfg.compaction && atomic_load(&db->nl0) > 0)
			rc = compact_one(db);
		ld_gc_run(db);
		pthread_mutex_unlock(&db->compaction_lock);
		atomic_fetch_add(&db->st.compaction_cpu_ns, thread_cpu_ns() - c0);
		pthread_mutex_lock(&db->bg_lock);
		if (recount)
			db->recount_pending = false;
		db->compaction_busy = false;
		bg_outcome(db, rc, attempt);
		pthread_cond_broadcast(&db->bg_cond);
		if (rc)
			bg_back_off(db);
	}
	pthread_mutex_unlock(&db->bg_lock);
	return NULL;
}

int tips_listdb_flush(struct tips_listdb *db, int merge)
{
	if (!db)
		return tips_set_error(TIPS_EINVAL, "NULL database");
	if (merge && !db->cfg.compaction)
		return tips_set_error(TIPS_EINVAL, "merge asked of a database without compaction");
	/* Only an attempt begun from now on counts: an earlier failure is retried. */
	uint64_t failures = atomic_load(&db->bg_started);
	struct ld_memtable *mt = atomic_load(&db->mutable_mt);
	if ((atomic_load(&mt->issued) & ~LD_MT_SEALED) > 0) {
		int rc = switch_memtable(db, mt, failures);
		if (rc)
			return rc;
	}
	int rc = 0;
	pthread_mutex_lock(&db->bg_lock);
	while (atomic_load(&db->nimm) > 0 || db->flushing ||
	       (merge && (atomic_load(&db->nl0) > 0 || db->compaction_busy))) {
		if (stall_gives_up(db, failures)) {
			rc = atomic_load(&db->bg_error);
			break;
		}
		pthread_cond_wait(&db->bg_cond, &db->bg_lock);
	}
	pthread_mutex_unlock(&db->bg_lock);
	if (rc)
		return tips_set_error(rc, "tips_listdb_flush: a MemTable flush or compaction "
				      "failed (%s); it is retried every %d ms", tips_strerror(rc),
				      LD_RETRY_MS);
	return 0;
}

int tips_listdb_thread_domain(struct tips_listdb *db, unsigned domain)
{
	if (!db || domain >= db->domains)
		return tips_set_error(TIPS_EINVAL, "domain %u of %u", domain, db ? db->domains : 0);
	struct ld_tls *t = ld_tls_get(db);
	if (!t)
		return tips_set_error(TIPS_ENOMEM, "out of DRAM for thread state");
	t->domain = domain;
	return 0;
}

/* ---- open / close ------------------------------------------------------------------------- */

static void destroy(struct tips_listdb *db)
{
	ld_tls_retire_all(db);
	ld_domains_close(db);
	struct ld_view *v = atomic_load(&db->view);
	if (v) {
		ld_mt_destroy(v->mutable_mt);
		for (unsigned i = 0; i < v->nimm; i++)
			ld_mt_destroy(v->imm[i]);
		free(v);
	} else {
		ld_mt_destroy(atomic_load(&db->mutable_mt));
	}
	struct ld_l0 *t = db->l0_oldest;
	while (t) {
		struct ld_l0 *n = t->newer;
		ld_l0_free(t);
		t = n;
	}
	grace_free_barrier();
	ld_hcache_destroy(db->hcache);
	ld_scache_destroy(db->scache);
	ld_tls_fini(db);
	ld_arena_cache_fini(&db->arena_blocks);
	free(db);
}

int tips_listdb_open(const char *path, const struct tips_listdb_config *cfg_in, struct tips_listdb **out)
{
	if (!path || !out)
		return tips_set_error(TIPS_EINVAL, "NULL path or result");
	struct tips_listdb_config cfg;
	config_defaults(&cfg);
	if (cfg_in) {
		int crc = tips_struct_read(&cfg, sizeof(cfg), cfg_in, "tips_listdb_open: "
					   "tips_listdb_config");
		if (crc)
			return crc;
	}
	if (cfg.expected_keys == 0)
		cfg.expected_keys = 1u << 20;
	if (cfg.domains == 0 || cfg.domains > TIPS_LISTDB_MAX_DOMAINS || cfg.shards == 0 ||
	    cfg.shards > LD_MAX_SHARDS || cfg.memtable_entries == 0 ||
	    cfg.memtable_entries >= (1ull << 32) || cfg.max_immutable == 0 ||
	    cfg.max_immutable > 30 || cfg.max_l0 == 0 || cfg.max_l0 > 60 ||
	    cfg.compaction_threads == 0 || cfg.compaction_threads > 8)
		return tips_set_error(TIPS_EINVAL, "listdb_config out of range (domains 1..%u, "
				      "shards 1..%u, max_immutable 1..30, max_l0 1..60, "
				      "compaction_threads 1..8)", TIPS_LISTDB_MAX_DOMAINS, LD_MAX_SHARDS);
	if (cfg.cache_entries == UINT64_MAX)
		cfg.cache_entries = cfg.expected_keys / 8 + 1024;
	if (cfg.second_chance_entries == UINT64_MAX)
		cfg.second_chance_entries = cfg.cache_entries ? cfg.expected_keys / 16 + 64 : 0;
	struct tips_listdb *db = calloc(1, sizeof(*db));
	if (!db)
		return tips_set_error(TIPS_ENOMEM, "out of DRAM");
	db->cfg = cfg;
	db->domains = cfg.domains;
	db->braided = cfg.braided != 0;
	db->shards = cfg.shards;
	atomic_store(&db->next_shard, LD_MAX_SHARDS); /* no compaction runs */
	pthread_mutex_init(&db->view_lock, NULL);
	ld_arena_cache_init(&db->arena_blocks, cfg.memtable_entries);
	pthread_mutex_init(&db->bg_lock, NULL);
	pthread_mutex_init(&db->compaction_lock, NULL);
	pthread_mutex_init(&db->scache_lock, NULL);
	pthread_cond_init(&db->bg_cond, NULL);
	pthread_cond_init(&db->stall_cond, NULL);
	for (unsigned i = 0; i < 256; i++)
		pthread_mutex_init(&db->key_locks[i], NULL);
	int rc = ld_tls_init(db);
	if (rc) {
		ld_arena_cache_fini(&db->arena_blocks);
		free(db);
		return tips_set_error(rc, "no thread-local key left");
	}
	rc = ld_domains_open(db, path, cfg.flags & TIPS_LISTDB_CREATE);
	if (rc) {
		int keep = rc;
		char msg[512];
		snprintf(msg, sizeof(msg), "%s", tips_errormsg());
		destroy(db);
		return tips_set_error(keep, "%s", msg);
	}
	struct tips_pool_info info;
	tips_pool_info(db->dom[0].pool, &info);
	db->recovered = !info.clean;
	db->hcache = ld_hcache_create(cfg.cache_entries);
	db->scache = ld_scache_create(cfg.second_chance_entries);
	if ((cfg.cache_entries && !db->hcache) || (cfg.second_chance_entries && !db->scache)) {
		destroy(db);
		return tips_set_error(TIPS_ENOMEM, "out of DRAM for the lookup caches");
	}
	if ((rc = ld_recover(db))) {
		destroy(db);
		return rc;
	}
	if (!db->recovered)
		db->recovery_ms = 0;
	struct ld_memtable *mt = ld_mt_create(db->next_seq++, cfg.memtable_entries, cfg.bloom_bits,
					       &db->arena_blocks);
	if (!mt) {
		destroy(db);
		return tips_set_error(TIPS_ENOMEM, "out of DRAM for a MemTable");
	}
	struct ld_view *v = view_new(db, l0_count(db));
	if (!v) {
		ld_mt_destroy(mt);
		destroy(db);
		return tips_set_error(TIPS_ENOMEM, "out of DRAM for the table view");
	}
	atomic_store(&db->mutable_mt, mt);
	pthread_mutex_lock(&db->view_lock);
	view_publish(db, v, mt);
	pthread_mutex_unlock(&db->view_lock);
	for (unsigned i = 0; i < cfg.compaction_threads; i++) {
		if (pthread_create(&db->bg[i], NULL, bg_main, db) != 0) {
			pthread_mutex_lock(&db->bg_lock);
			db->stop = true;
			pthread_cond_broadcast(&db->bg_cond);
			pthread_mutex_unlock(&db->bg_lock);
			for (unsigned j = 0; j < i; j++)
				pthread_join(db->bg[j], NULL);
			destroy(db);
			return tips_set_error(TIPS_ENOMEM, "cannot start a background thread");
		}
		db->bg_running++;
	}
	*out = db;
	return 0;
}

int tips_listdb_close(struct tips_listdb **pdb)
{
	if (!pdb || !*pdb)
		return tips_set_error(TIPS_EINVAL, "NULL database");
	struct tips_listdb *db = *pdb;
	pthread_mutex_lock(&db->bg_lock);
	db->stop = true;
	pthread_cond_broadcast(&db->bg_cond);
	pthread_mutex_unlock(&db->bg_lock);
	pthread_mutex_lock(&db->view_lock);
	pthread_cond_broadcast(&db->stall_cond);
	pthread_mutex_unlock(&db->view_lock);
	for (unsigned i = 0; i < db->bg_running; i++)
		pthread_join(db->bg[i], NULL);
	destroy(db);
	*pdb = NULL;
	return 0;
}

static void stats_fill(struct tips_listdb *db, struct tips_listdb_stats *o)
{
	memset(o, 0, sizeof(*o));
	if (!db)
		return;
	pthread_mutex_lock(&db->tls_lock);
	for (struct ld_tls *t = db->tls_all; t; t = t->next_all) {
		o->puts += atomic_load_explicit(&t->n.puts, memory_order_relaxed);
		o->deletes += atomic_load_explicit(&t->n.deletes, memory_order_relaxed);
		o->gets += atomic_load_explicit(&t->n.gets, memory_order_relaxed);
		o->cache_lookups += atomic_load_explicit(&t->n.cache_lookups, memory_order_relaxed);
		o->cache_hits += atomic_load_explicit(&t->n.cache_hits, memory_order_relaxed);
		o->second_chance_hits += atomic_load_explicit(&t->n.second_chance_hits,
							      memory_order_relaxed);
		o->traversals += atomic_load_explicit(&t->n.traversals, memory_order_relaxed);
		o->cross_domain_traversals += atomic_load_explicit(&t->n.cross,
								   memory_order_relaxed);
	}
	pthread_mutex_unlock(&db->tls_lock);
	o->memtables_flushed = atomic_load(&db->st.memtables_flushed);
	o->entries_flushed = atomic_load(&db->st.entries_flushed);
	o->compactions = atomic_load(&db->st.compactions);
	o->entries_merged = atomic_load(&db->st.entries_merged);
	o->obsolete_marked = atomic_load(&db->st.obsolete_marked);
	o->chunks_reclaimed = atomic_load(&db->st.chunks_reclaimed);
	for (unsigned d = 0; d < db->domains; d++)
		for (unsigned s = 0; s < LD_MAX_CHUNKS; s++)
			if (atomic_load(&db->dom[d].chunks[s].state) != LD_CS_FREE)
				o->chunks_live++;
	o->write_stall_ns = atomic_load(&db->st.write_stall_ns);
	o->immutable_now = atomic_load(&db->nimm);
	o->l0_now = atomic_load(&db->nl0);
	o->compaction_traversals = atomic_load(&db->st.ctrav);
	o->compaction_cross = atomic_load(&db->st.ccross);
	o->recovery_ms = db->recovery_ms;
	o->recovered_entries = db->recovered_entries;
	o->recovered = db->recovered;
	o->compaction_fences = atomic_load(&db->st.compaction_fences);
	o->flush_cpu_ns = atomic_load(&db->st.flush_cpu_ns);
	o->compaction_cpu_ns = atomic_load(&db->st.compaction_cpu_ns);
	o->write_stalls = atomic_load(&db->st.write_stalls);
}

void tips_listdb_stats_sized(struct tips_listdb *db, struct tips_listdb_stats *out, size_t size)
{
	struct tips_listdb_stats full;
	stats_fill(db, &full);
	tips_struct_write(out, size, &full, sizeof(full));
}
