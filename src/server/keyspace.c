/*
 * keyspace.c - the Redis keyspace laid out in one persistent index (keyspace.h,
 * docs/server.md), and transactions that commit as one batch (the sweeper: sweep.c).
 *
 * Invariants:
 *  - every user key has exactly one meta record under the current ksgen; every member
 *    key lives under a generation that either one meta record holds, or a 'g' record
 *    names (then it is garbage and only the sweeper touches it), or that a transaction
 *    still being built just took;
 *  - a transaction's writes reach the store only through one store_commit(), made while
 *    the caller holds the locks of every user key involved;
 *  - generation numbers are reserved durably (the 'G' record) before they are handed
 *    out, so none is reused after a crash.
 */
#include "keyspace.h"
#include "keyspace_internal.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SERVER_MAGIC 0x56525354u  /* "TSRV" little-endian */
#define LAYOUT_VERSION 1u
#define SERVER_RECORD_SIZE 24u
#define GEN_BLOCK 65536u
#define ARENA_BLOCK (64u * 1024u)
#define MAX_STRING (512u << 20)   /* Redis's limit on a string */
#define MAX_STAGED 64u            /* long strings staged by one transaction */
/* Keys a store scan copies out at a time: few on an ordered index (a scan from a key is
 * cheap), many on a hash table (every scan visits the whole table). */
#define CHUNK_ORDERED 64u
#define CHUNK_UNORDERED 8192u
#define CHUNK_BYTES (4u << 20) /* ... and at most about this many bytes */

/* ---- encodings ---------------------------------------------------------------------- */

void ks_score_encode(double score, unsigned char out[8])
{
	if (score == 0)
		score = 0.0; /* -0.0 and 0.0 are one score */
	uint64_t u;
	memcpy(&u, &score, 8);
	u = (u >> 63) ? ~u : u | (1ull << 63);
	put_be64(out, u);
}

double ks_score_decode(const unsigned char in[8])
{
	uint64_t u = get_be64(in);
	u = (u >> 63) ? u & ~(1ull << 63) : ~u;
	double d;
	memcpy(&d, &u, 8);
	return d;
}

void ks_index_encode(int64_t index, unsigned char out[8])
{
	put_be64(out, (uint64_t)index ^ (1ull << 63));
}

int64_t ks_index_decode(const unsigned char in[8])
{
	return (int64_t)(get_be64(in) ^ (1ull << 63));
}

int ks_member_key(struct ks_key *k, uint64_t gen, const void *a, size_t alen, const void *b,
		  size_t blen)
{
	if (alen > KS_MAX_SUFFIX || blen > KS_MAX_SUFFIX - alen)
		return TIPS_ETOOBIG;
	k->b[0] = KS_FAMILY_MEMBER;
	put_be64(k->b + 1, gen);
	if (alen)
		memcpy(k->b + KS_MEMBER_KEY_PREFIX, a, alen);
	if (blen)
		memcpy(k->b + KS_MEMBER_KEY_PREFIX + alen, b, blen);
	k->len = KS_MEMBER_KEY_PREFIX + alen + blen;
	return 0;
}

static void meta_encode(unsigned char *out, const struct ks_meta *m)
{
	memset(out, 0, KS_META_SIZE);
	out[0] = m->type;
	out[1] = m->enc;
	put_le64(out + 8, (uint64_t)m->expire_ms);
	put_le64(out + 16, m->gen);
	for (int i = 0; i < 4; i++)
		put_le64(out + 24 + 8 * i, m->hdr[i]);
}

/* Decodes a meta record; m->str points into @v. Return: 0, or -1 if malformed. */
int ks_meta_decode(const unsigned char *v, size_t vlen, struct ks_meta *m)
{
	if (vlen < KS_META_SIZE || v[0] < KS_STRING || v[0] > KS_HASH)
		return -1;
	m->type = v[0];
	m->enc = v[1];
	m->expire_ms = (int64_t)get_le64(v + 8);
	m->gen = get_le64(v + 16);
	for (int i = 0; i < 4; i++)
		m->hdr[i] = get_le64(v + 24 + 8 * i);
	m->str = (const char *)v + KS_META_SIZE;
	m->str_len = vlen - KS_META_SIZE;
	return 0;
}

/* ---- the database ------------------------------------------------------------------- */

static int write_server_record(struct ks_db *db, uint64_t reserved, uint32_t ksgen)
{
	unsigned char v[SERVER_RECORD_SIZE] = {0};
	v[0] = SERVER_MAGIC & 0xff;
	v[1] = (SERVER_MAGIC >> 8) & 0xff;
	v[2] = (SERVER_MAGIC >> 16) & 0xff;
	v[3] = SERVER_MAGIC >> 24;
	v[4] = LAYOUT_VERSION;
	put_le64(v + 8, reserved);
	put_le64(v + 16, ksgen);
	const char key = KS_FAMILY_SERVER;
	return store_put(db->store, &key, 1, v, sizeof(v));
}

static int any_key(const void *k, size_t kl, const void *v, size_t vl, void *arg)
{
	*(int *)arg = 1;
	return 1;
}

/* Reads or creates the server record. */
static int load_server_record(struct ks_db *db, char *err, size_t errlen)
{
	unsigned char v[SERVER_RECORD_SIZE];
	size_t vlen = 0;
	const char key = KS_FAMILY_SERVER;
	int rc = store_get(db->store, &key, 1, v, sizeof(v), &vlen);
	if (rc == TIPS_ENOTFOUND) {
		int found = 0;
		long n = store_scan(db->store, NULL, 0, 1, any_key, &found);
		if (n < 0) {
			snprintf(err, errlen, "cannot scan the pool: %s", tips_strerror((int)n));
			return (int)n;
		}
		if (found) {
			snprintf(err, errlen, "the pool holds keys that are not a tips-server "
				 "keyspace (no server record)");
			return TIPS_EMISMATCH;
		}
		db->gen_reserved = db->gen_next = 1;
		atomic_store(&db->ksgen, 1);
		rc = write_server_record(db, 1, 1);
		if (rc)
			snprintf(err, errlen, "cannot write the server record: %s: %s",
				 tips_strerror(rc), tips_errormsg());
		return rc;
	}
	uint32_t magic = (uint32_t)v[0] | (uint32_t)v[1] << 8 | (uint32_t)v[2] << 16 |
			 (uint32_t)v[3] << 24;
	if (rc || vlen != SERVER_RECORD_SIZE || magic != SERVER_MAGIC) {
		snprintf(err, errlen, "the pool holds keys that are not a tips-server keyspace "
			 "(bad server record)");
		return rc ? rc : TIPS_EMISMATCH;
	}
	if (v[4] != LAYOUT_VERSION) {
		snprintf(err, errlen, "the pool's keyspace has layout version %u, this "
			 "tips-server reads %u", v[4], LAYOUT_VERSION);
		return TIPS_EVERSION;
	}
	db->gen_reserved = db->gen_next = get_le64(v + 8);
	atomic_store(&db->ksgen, (uint32_t)get_le64(v + 16));
	return 0;
}

struct count_arg {
	unsigned char prefix[KS_META_KEY_PREFIX];
	int64_t keys, expires;
	int bad;
};

static int count_key(const void *k, size_t kl, const void *v, size_t vl, void *arg)
{
	struct count_arg *a = arg;
	if (kl < KS_META_KEY_PREFIX || memcmp(k, a->prefix, KS_META_KEY_PREFIX))
		return 1;
	struct ks_meta m;
	if (ks_meta_decode(v, vl, &m)) {
		a->bad++;
		return 0;
	}
	a->keys++;
	a->expires += m.expire_ms != 0;
	return 0;
}


/* The key of shard @shard's count record in keyspace generation @ksgen. */
static void count_key_of(uint32_t ksgen, unsigned shard, unsigned char k[KS_COUNT_KEY])
{
	k[0] = KS_FAMILY_COUNT;
	put_be32(k + 1, ksgen);
	k[5] = (unsigned char)(shard >> 8);
	k[6] = (unsigned char)shard;
}

/*
 * Key counts. DBSIZE and INFO keyspace must not scan, and neither may a start (32M
 * keys would take seconds), so the counts are durable: KS_SHARDS records
 * 'N' ksgen:4 shard:2 -> keys:8 expires:8 (little-endian), one per transaction that
 * exists at once (each event loop's, the sweeper's). A transaction that changes the
 * number of keys writes its shard's new counts in its own batch, so after any crash
 * the counts agree with the keys; no lock is needed, since one transaction owns a
 * shard. The total is the sum of the shards (a start reads KS_SHARDS point lookups).
 * FLUSHDB moves to a new ksgen, whose shards are all absent (0); the old records stay
 * (KS_SHARDS small records at most per FLUSHDB).
 * A keyspace with meta records but no count record (made before the counts existed) is
 * counted once by a scan, and the result written as shard 0.
 */
static int load_counts(struct ks_db *db, char *err, size_t errlen)
{
	uint32_t ksgen = atomic_load(&db->ksgen);
	int64_t keys = 0, expires = 0;
	int found = 0;
	for (unsigned s = 0; s < KS_SHARDS; s++) {
		unsigned char k[KS_COUNT_KEY], v[16];
		size_t vl = 0;
		count_key_of(ksgen, s, k);
		int rc = store_get(db->store, k, sizeof(k), v, sizeof(v), &vl);
		if (rc == TIPS_ENOTFOUND)
			continue;
		if (rc || vl != sizeof(v)) {
			snprintf(err, errlen, "cannot read the key count of shard %u: %s", s,
				 rc ? tips_strerror(rc) : "a record of the wrong size");
			return rc ? rc : TIPS_ECORRUPT;
		}
		db->shard_keys[s] = (int64_t)get_le64(v);
		db->shard_expires[s] = (int64_t)get_le64(v + 8);
		keys += db->shard_keys[s];
		expires += db->shard_expires[s];
		found = 1;
	}
	if (!found) {
		struct count_arg ca = {{KS_FAMILY_META}, 0, 0, 0};
		put_be32(ca.prefix + 1, ksgen);
		long n = store_scan(db->store, ca.prefix, KS_META_KEY_PREFIX, SIZE_MAX, count_key,
				    &ca);
		if (n < 0 || ca.bad) {
			int rc = n < 0 ? (int)n : TIPS_ECORRUPT;
			snprintf(err, errlen, "cannot count the keys: %s", n < 0 ? tips_strerror(rc)
				 : "a meta record is malformed");
			return rc;
		}
		if (ca.keys) {
			unsigned char k[KS_COUNT_KEY], v[16];
			count_key_of(ksgen, 0, k);
			put_le64(v, (uint64_t)ca.keys);
			put_le64(v + 8, (uint64_t)ca.expires);
			int rc = store_put(db->store, k, sizeof(k), v, sizeof(v));
			if (rc) {
				snprintf(err, errlen, "cannot write the key count: %s",
					 tips_strerror(rc));
				return rc;
			}
			db->shard_keys[0] = keys = ca.keys;
			db->shard_expires[0] = expires = ca.expires;
			db->counted_by_scan = 1;
		}
	}
	atomic_store(&db->keys, keys);
	atomic_store(&db->expires, expires);
	return 0;
}

struct gen_list {
	uint64_t *gens;
	size_t n, cap;
	int err;
};

static int collect_gen(const void *k, size_t kl, const void *v, size_t vl, void *arg)
{
	struct gen_list *g = arg;
	if (kl != 9 || ((const unsigned char *)k)[0] != KS_FAMILY_PENDING)
		return 1;
	if (g->n == g->cap) {
		size_t cap = g->cap ? 2 * g->cap : 16;
		uint64_t *n = realloc(g->gens, cap * sizeof(*n));
		if (!n) {
			g->err = TIPS_ENOMEM;
			return 1;
		}
		g->gens = n;
		g->cap = cap;
	}
	g->gens[g->n++] = get_be64((const unsigned char *)k + 1);
	return 0;
}

/* One batch: generation @gen, staged for a long string, becomes garbage. */
static int unstage(struct store *st, struct tips_batch *b, uint64_t gen)
{
	unsigned char k[9];
	put_be64(k + 1, gen);
	tips_batch_clear(b);
	k[0] = KS_FAMILY_GARBAGE;
	tips_batch_put(b, k, sizeof(k), "", 0);
	k[0] = KS_FAMILY_PENDING;
	tips_batch_delete(b, k, sizeof(k));
	return store_commit(st, b);
}

/* Long strings whose command never committed (a crash while their pieces were being
 * staged): their generations become garbage. No command runs yet. */
static int adopt_pending(struct ks_db *db, char *err, size_t errlen)
{
	struct gen_list g = {0};
	const char p = KS_FAMILY_PENDING;
	long n = store_scan(db->store, &p, 1, SIZE_MAX, collect_gen, &g);
	struct tips_batch *b = NULL;
	int rc = n < 0 ? (int)n : g.err ? g.err : tips_batch_new(&b);
	for (size_t i = 0; !rc && i < g.n; i++)
		rc = unstage(db->store, b, g.gens[i]);
	if (rc)
		snprintf(err, errlen, "cannot clear the pieces of unfinished long strings: %s",
			 tips_strerror(rc));
	tips_batch_free(&b);
	free(g.gens);
	return rc;
}

static double now_ms_mono(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

int ks_db_open(const struct ks_options *o, struct ks_db **out, char *err, size_t errlen)
{
	struct ks_db *db = calloc(1, sizeof(*db));
	if (!db) {
		snprintf(err, errlen, "out of memory");
		return TIPS_ENOMEM;
	}
	int rc = locks_init(&db->locks);
	if (rc) {
		snprintf(err, errlen, "cannot create locks: %s", strerror(-rc));
		free(db);
		return rc;
	}
	pthread_mutex_init(&db->gen_lock, NULL);
	pthread_mutex_init(&db->stop_lock, NULL);
	pthread_cond_init(&db->stop_cond, NULL);
	db->sweep_hz = o->sweep_hz ? o->sweep_hz : 10;
	rc = store_open(o->pool_path, o->index, o->pool_size, &db->store, err, errlen);
	if (rc)
		goto fail;
	struct store_info si;
	store_info(db->store, &si);
	db->ordered = si.ordered;
	store_batch_limit(db->store, &db->max_ops, &db->max_bytes);
	/* a long string: its pieces, the meta record and one garbage record */
	size_t piece_cost = (KS_PIECE_SIZE + KS_MEMBER_KEY_PREFIX + 4 + 64 + 63) / 64 * 64;
	size_t fixed = 2 * (TIPS_MAX_VALUE + TIPS_MAX_KEY + 128);
	size_t pieces = db->max_bytes > fixed ? (db->max_bytes - fixed) / piece_cost : 0;
	if (db->max_ops > 4 && pieces > db->max_ops - 4)
		pieces = db->max_ops - 4;
	db->max_string_batch = pieces * KS_PIECE_SIZE;
	if (db->max_string_batch < KS_MAX_INLINE)
		db->max_string_batch = KS_MAX_INLINE;
	db->max_string = MAX_STRING;
	rc = load_server_record(db, err, errlen);
	if (rc)
		goto fail;
	rc = adopt_pending(db, err, errlen);
	if (rc)
		goto fail;
	/* the key counts of the current keyspace generation */
	double t0 = now_ms_mono();
	rc = load_counts(db, err, errlen);
	if (rc)
		goto fail;
	db->start_scan_ms = now_ms_mono() - t0;
	if (pthread_create(&db->sweeper, NULL, ks_sweeper_main, db)) {
		snprintf(err, errlen, "cannot start the sweeper thread");
		rc = TIPS_ENOMEM;
		goto fail;
	}
	atomic_store(&db->garbage_hint, 1);
	atomic_store(&db->old_keyspace, 1);
	db->sweeper_started = 1;
	*out = db;
	return 0;
fail:
	if (db->store)
		store_close(&db->store);
	locks_destroy(&db->locks);
	free(db);
	return rc;
}

int ks_db_close(struct ks_db **dbp)
{
	struct ks_db *db = *dbp;
	*dbp = NULL;
	if (!db)
		return 0;
	if (db->sweeper_started) {
		pthread_mutex_lock(&db->stop_lock);
		db->stop = 1;
		pthread_cond_signal(&db->stop_cond);
		pthread_mutex_unlock(&db->stop_lock);
		pthread_join(db->sweeper, NULL);
	}
	int rc = store_close(&db->store);
	locks_destroy(&db->locks);
	free(db);
	return rc;
}

struct locks *ks_db_locks(struct ks_db *db)
{
	return &db->locks;
}

struct store *ks_db_store(struct ks_db *db)
{
	return db->store;
}

int ks_db_ordered(struct ks_db *db)
{
	return db->ordered;
}

size_t ks_db_max_string(struct ks_db *db)
{
	return db->max_string;
}

void ks_db_max_txn(struct ks_db *db, size_t *ops, size_t *bytes)
{
	if (ops)
		*ops = db->max_ops;
	if (bytes)
		*bytes = db->max_bytes;
}

void ks_db_stats(struct ks_db *db, struct ks_stats *out)
{
	int64_t k = atomic_load(&db->keys), e = atomic_load(&db->expires);
	out->keys = k > 0 ? (uint64_t)k : 0;
	out->expires = e > 0 ? (uint64_t)e : 0;
	out->expired_keys = atomic_load(&db->expired_keys);
	out->swept_members = atomic_load(&db->swept_members);
	out->swept_keys = atomic_load(&db->swept_keys);
	out->garbage_pending = atomic_load(&db->garbage_pending);
	out->commits = atomic_load(&db->commits);
	out->commit_ops = atomic_load(&db->commit_ops);
	out->start_scan_ms = db->start_scan_ms;
}

/* ---- transactions ------------------------------------------------------------------- */

/* A chunk of store scan results, copied out (the scan callback may hold engine locks). */
struct chunk_item {
	size_t koff, klen, voff, vlen;
};

/* One buffered write. */
struct wentry {
	unsigned char *key;
	size_t klen;
	unsigned char *val;   /* NULL: a delete */
	size_t vlen;
};

struct arena_block {
	struct arena_block *next;
	size_t used, cap;
	unsigned char data[];
};

struct ks_txn {
	struct ks_db *db;
	unsigned shard;       /* its key-count record (struct ks_db shard_*) */
	int64_t now;
	uint32_t ksgen;
	int err;
	/* buffered writes: entries in first-write order, and a hash of them */
	struct wentry *w;
	size_t nw, wcap;
	size_t *slots;        /* open addressing: index + 1 into w, 0 = empty */
	size_t nslots;
	size_t bytes;         /* logged-bytes estimate of the batch */
	int64_t dkeys, dexpires, dexpired;
	int garbage;          /* 'g' records written */
	/* the meta record last read from the store (meta_read) */
	unsigned char last_mk[TIPS_MAX_KEY];
	size_t last_mklen;    /* 0: none */
	int last_rc;
	struct ks_meta last_m;
	struct arena_block *arena;
	struct tips_batch *stage;     /* the pieces of a long string, committed ahead */
	uint64_t staged[MAX_STAGED];  /* generations staged by this txn (pending records) */
	size_t nstaged;
	struct chunk_item *items; /* a store scan's chunk */
	size_t chunk;
	struct tips_batch *batch;
	unsigned char *vbuf;  /* TIPS_MAX_VALUE bytes for reads */
	/* scan chunks */
	unsigned char *sbuf;
	size_t sused, scap;
};

static int txn_fail(struct ks_txn *t, int rc)
{
	if (!t->err)
		t->err = rc;
	return rc;
}

int ks_txn_new(struct ks_db *db, struct ks_txn **out)
{
	struct ks_txn *t = calloc(1, sizeof(*t));
	if (!t)
		return TIPS_ENOMEM;
	t->db = db;
	pthread_mutex_lock(&db->gen_lock);
	unsigned s = 0;
	while (s < KS_SHARDS && db->shard_used[s])
		s++;
	if (s < KS_SHARDS)
		db->shard_used[s] = 1;
	pthread_mutex_unlock(&db->gen_lock);
	if (s == KS_SHARDS) {
		free(t);
		return TIPS_ENOMEM; /* more than KS_SHARDS transactions at once */
	}
	t->shard = s;
	t->vbuf = malloc(TIPS_MAX_VALUE);
	t->chunk = db->ordered ? CHUNK_ORDERED : CHUNK_UNORDERED;
	t->items = malloc(t->chunk * sizeof(*t->items));
	if (!t->vbuf || !t->items || tips_batch_new(&t->batch) || tips_batch_new(&t->stage)) {
		ks_txn_free(&t);
		return TIPS_ENOMEM;
	}
	*out = t;
	return 0;
}

/* Frees the arena's blocks but one of 64 KiB (the oldest), kept if @keep_one. */
static void arena_reset(struct ks_txn *t, int keep_one)
{
	struct arena_block *b = t->arena, *keep = NULL;
	while (b) {
		struct arena_block *next = b->next;
		if (keep_one && !next && b->cap == ARENA_BLOCK) {
			keep = b;
			keep->used = 0;
		} else {
			free(b);
		}
		b = next;
	}
	t->arena = keep;
}

void ks_txn_free(struct ks_txn **tp)
{
	struct ks_txn *t = *tp;
	*tp = NULL;
	if (!t)
		return;
	pthread_mutex_lock(&t->db->gen_lock);
	t->db->shard_used[t->shard] = 0;
	pthread_mutex_unlock(&t->db->gen_lock);
	arena_reset(t, 0);
	tips_batch_free(&t->batch);
	tips_batch_free(&t->stage);
	free(t->w);
	free(t->slots);
	free(t->vbuf);
	free(t->sbuf);
	free(t->items);
	free(t);
}

void *ks_scratch(struct ks_txn *t, size_t size)
{
	size = (size + 15) & ~(size_t)15;
	struct arena_block *b = t->arena;
	if (!b || b->cap - b->used < size) {
		size_t cap = size > ARENA_BLOCK ? size : ARENA_BLOCK;
		b = malloc(sizeof(*b) + cap);
		if (!b) {
			txn_fail(t, TIPS_ENOMEM);
			return NULL;
		}
		b->cap = cap;
		b->used = 0;
		b->next = t->arena;
		t->arena = b;
	}
	void *p = b->data + b->used;
	b->used += size;
	return p;
}

static void txn_end(struct ks_txn *t)
{
	t->nw = 0;
	t->nstaged = 0;
	t->last_mklen = 0;
	if (t->slots)
		memset(t->slots, 0, t->nslots * sizeof(*t->slots));
	t->bytes = 0;
	t->dkeys = t->dexpires = t->dexpired = 0;
	t->garbage = 0;
	t->err = 0;
	arena_reset(t, 1);
}

void ks_txn_begin(struct ks_txn *t, int64_t now_ms)
{
	txn_end(t);
	t->now = now_ms;
	t->ksgen = atomic_load(&t->db->ksgen);
}

uint32_t ks_txn_ksgen(struct ks_txn *t)
{
	return t->ksgen;
}

int64_t ks_txn_now(struct ks_txn *t)
{
	return t->now;
}

struct ks_db *ks_txn_db(struct ks_txn *t)
{
	return t->db;
}

int ks_txn_error(struct ks_txn *t)
{
	return t->err;
}

int64_t ks_txn_pending_keys(struct ks_txn *t)
{
	return t ? t->dkeys : 0;
}

size_t ks_txn_writes(struct ks_txn *t)
{
	return t->nw;
}

/* The long strings this txn staged will never be referenced: make them garbage. */
static void unstage_all(struct ks_txn *t)
{
	for (size_t i = 0; i < t->nstaged; i++)
		if (unstage(t->db->store, t->stage, t->staged[i]))
			break; /* left pending: the next start makes them garbage */
	if (t->nstaged)
		atomic_store(&t->db->garbage_hint, 1);
}

void ks_txn_abort(struct ks_txn *t)
{
	unstage_all(t);
	txn_end(t);
}

/* Adds the txn's shard record, with the counts after this txn, to its writes. */
static int count_write(struct ks_txn *t)
{
	unsigned char k[KS_COUNT_KEY], v[16];
	count_key_of(t->ksgen, t->shard, k);
	put_le64(v, (uint64_t)(t->db->shard_keys[t->shard] + t->dkeys));
	put_le64(v + 8, (uint64_t)(t->db->shard_expires[t->shard] + t->dexpires));
	return ks_txn_write(t, k, sizeof(k), v, sizeof(v));
}

int ks_txn_commit(struct ks_txn *t)
{
	int rc = t->err;
	if (!rc && t->nw && (t->dkeys || t->dexpires))
		rc = count_write(t); /* in the same batch: counts and keys agree after a crash */
	if (!rc && t->nw == 1) {
		/* one index write needs no batch: a single put or delete is as atomic */
		struct wentry *e = &t->w[0];
		rc = e->val ? store_put(t->db->store, e->key, e->klen, e->val, e->vlen)
			    : store_delete(t->db->store, e->key, e->klen);
	} else if (!rc && t->nw) {
		tips_batch_clear(t->batch);
		for (size_t i = 0; i < t->nw && !rc; i++) {
			struct wentry *e = &t->w[i];
			rc = e->val ? tips_batch_put(t->batch, e->key, e->klen, e->val, e->vlen)
				    : tips_batch_delete(t->batch, e->key, e->klen);
		}
		if (!rc)
			rc = store_commit(t->db->store, t->batch);
	}
	if (!rc && t->nw) {
		t->db->shard_keys[t->shard] += t->dkeys;
		t->db->shard_expires[t->shard] += t->dexpires;
		atomic_fetch_add(&t->db->keys, t->dkeys);
		atomic_fetch_add(&t->db->expires, t->dexpires);
		atomic_fetch_add(&t->db->expired_keys, (uint64_t)t->dexpired);
		atomic_fetch_add(&t->db->commits, 1);
		atomic_fetch_add(&t->db->commit_ops, t->nw);
		if (t->garbage)
			atomic_store(&t->db->garbage_hint, 1);
	}
	if (rc)
		unstage_all(t);
	txn_end(t);
	return rc;
}

/* The buffered write of @key, or NULL. */
static struct wentry *txn_find(struct ks_txn *t, const void *key, size_t klen)
{
	if (!t->nw)
		return NULL;
	size_t mask = t->nslots - 1;
	for (size_t i = lock_hash(key, klen) & mask;; i = (i + 1) & mask) {
		size_t s = t->slots[i];
		if (!s)
			return NULL;
		struct wentry *e = &t->w[s - 1];
		if (e->klen == klen && !memcmp(e->key, key, klen))
			return e;
	}
}

static int txn_grow(struct ks_txn *t)
{
	if (t->nw == t->wcap) {
		size_t cap = t->wcap ? 2 * t->wcap : 64;
		struct wentry *w = realloc(t->w, cap * sizeof(*w));
		if (!w)
			return TIPS_ENOMEM;
		t->w = w;
		t->wcap = cap;
	}
	if (2 * (t->nw + 1) > t->nslots) {
		size_t n = t->nslots ? 2 * t->nslots : 256;
		size_t *s = calloc(n, sizeof(*s));
		if (!s)
			return TIPS_ENOMEM;
		free(t->slots);
		t->slots = s;
		t->nslots = n;
		for (size_t i = 0; i < t->nw; i++)
			for (size_t j = lock_hash(t->w[i].key, t->w[i].klen) & (n - 1);;
			     j = (j + 1) & (n - 1))
				if (!s[j]) {
					s[j] = i + 1;
					break;
				}
	}
	return 0;
}

static size_t record_cost(size_t klen, size_t vlen)
{
	return (klen + vlen + 64 + 63) / 64 * 64;
}

/* Buffers a put (@val non-NULL) or delete of @key. */
int ks_txn_write(struct ks_txn *t, const void *key, size_t klen, const void *val,
		     size_t vlen)
{
	if (t->err)
		return t->err;
	if (klen == 0 || klen > TIPS_MAX_KEY || vlen > TIPS_MAX_VALUE)
		return txn_fail(t, TIPS_ETOOBIG);
	struct wentry *e = txn_find(t, key, klen);
	if (!e) {
		if (t->nw + 1 > t->db->max_ops)
			return txn_fail(t, TIPS_ETOOBIG);
		int rc = txn_grow(t);
		if (rc)
			return txn_fail(t, rc);
		unsigned char *k = ks_scratch(t, klen);
		if (!k)
			return t->err;
		memcpy(k, key, klen);
		e = &t->w[t->nw++];
		e->key = k;
		e->klen = klen;
		e->val = NULL;
		e->vlen = 0;
		size_t mask = t->nslots - 1;
		for (size_t i = lock_hash(key, klen) & mask;; i = (i + 1) & mask)
			if (!t->slots[i]) {
				t->slots[i] = t->nw;
				break;
			}
	} else {
		t->bytes -= record_cost(e->klen, e->val ? e->vlen : 0);
	}
	t->bytes += record_cost(klen, val ? vlen : 0);
	if (t->bytes > t->db->max_bytes)
		return txn_fail(t, TIPS_ETOOBIG);
	if (val) {
		unsigned char *v = ks_scratch(t, vlen ? vlen : 1);
		if (!v)
			return t->err;
		memcpy(v, val, vlen);
		e->val = v;
	} else {
		e->val = NULL;
	}
	e->vlen = vlen;
	return 0;
}

/* Reads @key through the txn into @buf. Return: 1, 0 (absent), or a negative code. */
static int txn_read(struct ks_txn *t, const void *key, size_t klen, void *buf, size_t cap,
		    size_t *vlen)
{
	if (t->err)
		return t->err;
	struct wentry *e = txn_find(t, key, klen);
	if (e) {
		if (!e->val)
			return 0;
		if (e->vlen <= cap && e->vlen)
			memcpy(buf, e->val, e->vlen);
		*vlen = e->vlen;
		return 1;
	}
	int rc = store_get(t->db->store, key, klen, buf, cap, vlen);
	if (rc == TIPS_ENOTFOUND)
		return 0;
	if (rc == TIPS_ESIZE)
		return 1; /* present; longer than @cap: *vlen says how long, nothing copied */
	if (rc)
		return txn_fail(t, rc);
	return 1;
}

int ks_get(struct ks_txn *t, const struct ks_key *k, void *val, size_t cap, size_t *vlen)
{
	return txn_read(t, k->b, k->len, val, cap, vlen);
}

int ks_put(struct ks_txn *t, const struct ks_key *k, const void *val, size_t vlen)
{
	return ks_txn_write(t, k->b, k->len, val ? val : "", vlen);
}

int ks_del(struct ks_txn *t, const struct ks_key *k)
{
	return ks_txn_write(t, k->b, k->len, NULL, 0);
}

/* ---- user keys ---------------------------------------------------------------------- */

static int meta_key(struct ks_txn *t, const void *key, size_t klen, unsigned char *out)
{
	if (klen > KS_MAX_USER_KEY)
		return txn_fail(t, TIPS_ETOOBIG);
	out[0] = KS_FAMILY_META;
	put_be32(out + 1, t->ksgen);
	memcpy(out + KS_META_KEY_PREFIX, key, klen);
	return 0;
}

/* The meta record at index key @mk, expired or not, str copied into scratch.
 * Return: 1, 0, negative. */
static int meta_read(struct ks_txn *t, const unsigned char *mk, size_t mklen,
		     struct ks_meta *m, int need_str)
{
	/* not written by this txn: the store's answer, maybe already read (the caller
	 * holds the key's lock, so it cannot have changed) */
	int from_store = !txn_find(t, mk, mklen);
	if (from_store && !need_str && t->last_mklen == mklen &&
	    !memcmp(t->last_mk, mk, mklen)) {
		if (t->last_rc == 1)
			*m = t->last_m;
		return t->last_rc;
	}
	size_t vlen = 0;
	int rc = txn_read(t, mk, mklen, t->vbuf, TIPS_MAX_VALUE, &vlen);
	if (rc < 0)
		return rc;
	if (rc == 1 && (vlen > TIPS_MAX_VALUE || ks_meta_decode(t->vbuf, vlen, m)))
		return txn_fail(t, TIPS_ECORRUPT);
	if (from_store && mklen <= sizeof(t->last_mk)) {
		memcpy(t->last_mk, mk, mklen);
		t->last_mklen = mklen;
		t->last_rc = rc;
		if (rc == 1) {
			t->last_m = *m;
			t->last_m.str = NULL; /* only kept for callers that need no value */
		}
	}
	if (rc == 0)
		return 0;
	if (m->str_len && need_str) {
		char *s = ks_scratch(t, m->str_len);
		if (!s)
			return t->err;
		memcpy(s, m->str, m->str_len);
		m->str = s;
	} else {
		m->str = m->str_len ? NULL : "";
	}
	return 1;
}

static int expired(const struct ks_txn *t, const struct ks_meta *m)
{
	return m->expire_ms && t->now > m->expire_ms;
}

int ks_put_garbage(struct ks_txn *t, uint64_t gen)
{
	unsigned char g[9];
	g[0] = KS_FAMILY_GARBAGE;
	put_be64(g + 1, gen);
	t->garbage++;
	return ks_txn_write(t, g, sizeof(g), "", 0);
}

/* Deletes the meta record @mk (found as @old); @garbage: its generation dies too. */
static int meta_remove(struct ks_txn *t, const unsigned char *mk, size_t mklen,
		       const struct ks_meta *old, int garbage)
{
	int rc = 0;
	if (garbage && old->gen)
		rc = ks_put_garbage(t, old->gen);
	if (!rc)
		rc = ks_txn_write(t, mk, mklen, NULL, 0);
	if (!rc) {
		t->dkeys--;
		t->dexpires -= old->expire_ms != 0;
	}
	return rc;
}

int ks_lookup(struct ks_txn *t, const void *key, size_t klen, struct ks_meta *m)
{
	unsigned char mk[TIPS_MAX_KEY + KS_META_KEY_PREFIX];
	struct ks_meta tmp;
	if (!m)
		m = &tmp;
	if (klen > KS_MAX_USER_KEY)
		return 0; /* no such key can exist */
	meta_key(t, key, klen, mk);
	int rc = meta_read(t, mk, klen + KS_META_KEY_PREFIX, m, 1);
	if (rc <= 0)
		return rc;
	if (expired(t, m)) {
		rc = meta_remove(t, mk, klen + KS_META_KEY_PREFIX, m, 1);
		t->dexpired++;
		return rc ? rc : 0;
	}
	return 1;
}

int ks_write_meta(struct ks_txn *t, const void *key, size_t klen, const struct ks_meta *m)
{
	unsigned char mk[TIPS_MAX_KEY + KS_META_KEY_PREFIX];
	int rc = meta_key(t, key, klen, mk);
	if (rc)
		return rc;
	size_t mklen = klen + KS_META_KEY_PREFIX;
	size_t slen = (m->type == KS_STRING && m->enc == KS_ENC_INLINE) ? m->str_len : 0;
	if (slen > KS_MAX_INLINE)
		return txn_fail(t, TIPS_ETOOBIG);
	struct ks_meta old;
	rc = meta_read(t, mk, mklen, &old, 0);
	if (rc < 0)
		return rc;
	if (rc == 1) {
		if (old.gen && old.gen != m->gen && (rc = ks_put_garbage(t, old.gen)))
			return rc;
		t->dexpires -= old.expire_ms != 0;
	} else {
		t->dkeys++;
	}
	t->dexpires += m->expire_ms != 0;
	unsigned char *v = ks_scratch(t, KS_META_SIZE + slen);
	if (!v)
		return t->err;
	meta_encode(v, m);
	if (slen)
		memcpy(v + KS_META_SIZE, m->str, slen);
	return ks_txn_write(t, mk, mklen, v, KS_META_SIZE + slen);
}

int ks_delete_key(struct ks_txn *t, const void *key, size_t klen)
{
	unsigned char mk[TIPS_MAX_KEY + KS_META_KEY_PREFIX];
	if (klen > KS_MAX_USER_KEY)
		return 0;
	meta_key(t, key, klen, mk);
	struct ks_meta old;
	int rc = meta_read(t, mk, klen + KS_META_KEY_PREFIX, &old, 0);
	if (rc <= 0)
		return rc;
	int was_live = !expired(t, &old);
	t->dexpired += !was_live;
	rc = meta_remove(t, mk, klen + KS_META_KEY_PREFIX, &old, 1);
	return rc ? rc : was_live;
}

int ks_rename(struct ks_txn *t, const void *src, size_t slen, const void *dst, size_t dlen)
{
	struct ks_meta m;
	int rc = ks_lookup(t, src, slen, &m);
	if (rc <= 0)
		return rc;
	if (slen == dlen && !memcmp(src, dst, slen))
		return 1;
	unsigned char mk[TIPS_MAX_KEY + KS_META_KEY_PREFIX];
	meta_key(t, src, slen, mk);
	/* write dst first: its old generation (if another) becomes garbage, ours moves */
	if ((rc = ks_write_meta(t, dst, dlen, &m)))
		return rc;
	rc = meta_remove(t, mk, slen + KS_META_KEY_PREFIX, &m, 0);
	return rc ? rc : 1;
}

int ks_flush(struct ks_txn *t)
{
	struct ks_db *db = t->db;
	pthread_mutex_lock(&db->gen_lock);
	uint32_t next = atomic_load(&db->ksgen) + 1;
	int rc = write_server_record(db, db->gen_reserved, next);
	if (!rc) {
		atomic_store(&db->ksgen, next);
		atomic_store(&db->keys, 0);
		atomic_store(&db->expires, 0);
		/* the new generation has no count records: every shard starts at 0 (the
		 * exclusive keyspace lock keeps every other txn out of its commit) */
		memset(db->shard_keys, 0, sizeof(db->shard_keys));
		memset(db->shard_expires, 0, sizeof(db->shard_expires));
		atomic_store(&db->old_keyspace, 1);
		t->ksgen = next;
		t->dkeys = t->dexpires = 0; /* the keys this txn made are gone too */
	}
	pthread_mutex_unlock(&db->gen_lock);
	return rc ? txn_fail(t, rc) : 0;
}

uint64_t ks_new_gen(struct ks_txn *t)
{
	struct ks_db *db = t->db;
	pthread_mutex_lock(&db->gen_lock);
	if (db->gen_next >= db->gen_reserved) {
		int rc = write_server_record(db, db->gen_next + GEN_BLOCK,
					     atomic_load(&db->ksgen));
		if (rc) {
			pthread_mutex_unlock(&db->gen_lock);
			txn_fail(t, rc);
			return 0;
		}
		db->gen_reserved = db->gen_next + GEN_BLOCK;
	}
	uint64_t g = db->gen_next++;
	pthread_mutex_unlock(&db->gen_lock);
	return g;
}

/* ---- scans -------------------------------------------------------------------------- */

struct chunk {
	struct ks_txn *t;
	const unsigned char *prefix;
	size_t plen;
	struct chunk_item *items;
	size_t n, cap;
	int past;             /* a key beyond the prefix was seen */
	int full;             /* stopped at CHUNK_BYTES */
	int err;
};

static int chunk_add(const void *k, size_t kl, const void *v, size_t vl, void *arg)
{
	struct chunk *c = arg;
	if (kl < c->plen || memcmp(k, c->prefix, c->plen)) {
		c->past = 1;
		return 1;
	}
	struct ks_txn *t = c->t;
	size_t need = t->sused + kl + vl;
	if (need > t->scap) {
		size_t cap = t->scap ? t->scap : 256 * 1024;
		while (cap < need)
			cap *= 2;
		unsigned char *b = realloc(t->sbuf, cap);
		if (!b) {
			c->err = TIPS_ENOMEM;
			return 1;
		}
		t->sbuf = b;
		t->scap = cap;
	}
	struct chunk_item *it = &c->items[c->n++];
	it->koff = t->sused;
	it->klen = kl;
	memcpy(t->sbuf + t->sused, k, kl);
	t->sused += kl;
	it->voff = t->sused;
	it->vlen = vl;
	if (vl)
		memcpy(t->sbuf + t->sused, v, vl);
	t->sused += vl;
	if (t->sused >= CHUNK_BYTES)
		c->full = 1;
	return c->n == c->cap || c->full;
}

static int key_cmp(const void *a, size_t al, const void *b, size_t bl)
{
	int r = memcmp(a, b, al < bl ? al : bl);
	return r ? r : (al > bl) - (al < bl);
}

static int went_cmp(const void *x, const void *y)
{
	const struct wentry *a = *(const struct wentry *const *)x;
	const struct wentry *b = *(const struct wentry *const *)y;
	return key_cmp(a->key, a->klen, b->key, b->klen);
}

/*
 * Calls @fn for the keys prefix+suffix with suffix >= @from, in order, the buffered
 * writes merged in if @merge, until @fn returns non-zero. @want: how many keys @fn will
 * probably take (the first chunk asks the store for no more: on a hash table every
 * chunk costs a pass over the table). Return: keys passed to @fn, or a negative code.
 */
long ks_scan_range(struct ks_txn *t, const unsigned char *prefix, size_t plen,
		       const void *from, size_t flen, int merge, size_t want, range_fn fn,
		       void *arg)
{
	if (t->err)
		return t->err;
	unsigned char start[2 * TIPS_MAX_KEY + 16];
	if (plen + flen > sizeof(start))
		flen = sizeof(start) - plen;
	memcpy(start, prefix, plen);
	if (flen)
		memcpy(start + plen, from, flen);
	size_t slen = plen + flen;
	/* the buffered writes in range, sorted */
	struct wentry **ov = NULL;
	size_t nov = 0, iov = 0;
	if (merge && t->nw) {
		ov = malloc(t->nw * sizeof(*ov));
		if (!ov)
			return txn_fail(t, TIPS_ENOMEM);
		for (size_t i = 0; i < t->nw; i++) {
			struct wentry *e = &t->w[i];
			if (e->klen >= plen && !memcmp(e->key, prefix, plen) &&
			    key_cmp(e->key, e->klen, start, slen) >= 0)
				ov[nov++] = e;
		}
		qsort(ov, nov, sizeof(*ov), went_cmp);
	}
	struct chunk_item *items = t->items;
	long passed = 0;
	int stop = 0, skip_equal = 0;
	size_t chunk = want < t->chunk ? want + 1 : t->chunk;
	while (!stop) {
		struct chunk c = {t, prefix, plen, items, 0, chunk, 0, 0, 0};
		t->sused = 0;
		long n = store_scan(t->db->store, start, slen, chunk, chunk_add, &c);
		if (n < 0 || c.err) {
			free(ov);
			return txn_fail(t, n < 0 ? (int)n : c.err);
		}
		size_t i = 0;
		if (skip_equal && c.n && key_cmp(t->sbuf + items[0].koff, items[0].klen, start,
						 slen) == 0)
			i = 1; /* the last key of the previous chunk */
		int done = c.past || (c.n < chunk && !c.full);
		for (; i < c.n && !stop; i++) {
			const unsigned char *k = t->sbuf + items[i].koff;
			size_t kl = items[i].klen;
			/* buffered writes before this key */
			while (iov < nov && !stop) {
				struct wentry *e = ov[iov];
				int cmp = key_cmp(e->key, e->klen, k, kl);
				if (cmp > 0)
					break;
				iov++;
				if (e->val) {
					passed++;
					stop = fn(e->key + plen, e->klen - plen, e->val, e->vlen, arg);
				}
				if (cmp == 0)
					goto next_item; /* the buffered write replaces it */
			}
			if (stop)
				break;
			passed++;
			stop = fn(k + plen, kl - plen, t->sbuf + items[i].voff, items[i].vlen, arg);
next_item:;
		}
		if (done || stop || !c.n)
			break;
		/* continue at the last key seen (skipped as equal next time) */
		struct chunk_item *last = &items[c.n - 1];
		memcpy(start, t->sbuf + last->koff, last->klen);
		slen = last->klen;
		skip_equal = 1;
		chunk = t->chunk; /* @fn wanted more than guessed */
	}
	while (!stop && iov < nov) {
		struct wentry *e = ov[iov++];
		if (e->val) {
			passed++;
			stop = fn(e->key + plen, e->klen - plen, e->val, e->vlen, arg);
		}
	}
	free(ov);
	return t->err ? t->err : passed;
}

struct member_arg {
	ks_member_fn fn;
	void *arg;
	size_t left;
};

static int member_cb(const unsigned char *s, size_t sl, const void *v, size_t vl, void *arg)
{
	struct member_arg *a = arg;
	if (a->fn(s, sl, v, vl, a->arg))
		return 1;
	return --a->left == 0;
}

long ks_scan_members(struct ks_txn *t, uint64_t gen, const void *from, size_t flen,
		     size_t count, ks_member_fn fn, void *arg)
{
	if (!t->db->ordered)
		return txn_fail(t, KS_EUNORDERED);
	if (!count)
		return 0;
	unsigned char prefix[KS_MEMBER_KEY_PREFIX];
	prefix[0] = KS_FAMILY_MEMBER;
	put_be64(prefix + 1, gen);
	struct member_arg a = {fn, arg, count};
	return ks_scan_range(t, prefix, sizeof(prefix), from, flen, 1, count, member_cb, &a);
}

struct keys_arg {
	struct ks_txn *t;
	ks_key_fn fn;
	void *arg;
	size_t left;
	long passed;
};

static int keys_cb(const unsigned char *s, size_t sl, const void *v, size_t vl, void *arg)
{
	struct keys_arg *a = arg;
	struct ks_meta m;
	if (ks_meta_decode(v, vl, &m)) {
		txn_fail(a->t, TIPS_ECORRUPT);
		return 1;
	}
	if (expired(a->t, &m))
		return 0;
	a->passed++;
	if (a->fn(s, sl, &m, a->arg))
		return 1;
	return --a->left == 0;
}

long ks_scan_keys(struct ks_txn *t, const void *from, size_t flen, size_t count,
		  ks_key_fn fn, void *arg)
{
	if (!count)
		return 0;
	unsigned char prefix[KS_META_KEY_PREFIX];
	prefix[0] = KS_FAMILY_META;
	put_be32(prefix + 1, t->ksgen);
	struct keys_arg a = {t, fn, arg, count, 0};
	long n = ks_scan_range(t, prefix, sizeof(prefix), from, flen, 1, count, keys_cb, &a);
	return n < 0 ? n : a.passed;
}

/* ---- strings ------------------------------------------------------------------------ */

/* The index key of piece @piece of the long string of generation @gen. */
static void piece_key(struct ks_key *k, uint64_t gen, size_t piece)
{
	unsigned char p[4];
	put_be32(p, (uint32_t)piece);
	ks_member_key(k, gen, p, 4, NULL, 0);
}


int ks_string_get(struct ks_txn *t, const struct ks_meta *m, const char **val, size_t *len)
{
	if (m->enc == KS_ENC_INLINE) {
		*val = m->str;
		*len = m->str_len;
		return 0;
	}
	size_t total = m->hdr[0];
	char *buf = ks_scratch(t, total ? total : 1);
	if (!buf)
		return t->err;
	for (size_t off = 0, piece = 0; off < total; off += KS_PIECE_SIZE, piece++) {
		struct ks_key k;
		piece_key(&k, m->gen, piece);
		size_t want = total - off < KS_PIECE_SIZE ? total - off : KS_PIECE_SIZE, got = 0;
		int rc = ks_get(t, &k, buf + off, want, &got);
		if (rc < 0)
			return rc;
		if (rc == 0 || got != want)
			return txn_fail(t, TIPS_ECORRUPT);
	}
	*val = buf;
	*len = total;
	return 0;
}

/*
 * A string too long for one batch: its pieces are committed ahead, in batches of their
 * own, under a pending record 'p' gen; the transaction's own batch then writes the meta
 * record and deletes the pending record, so the string still appears all at once. If the
 * transaction never commits, its pending generations become garbage (unstage_all, or
 * adopt_pending at the next start after a crash).
 */
static int stage_pieces(struct ks_txn *t, uint64_t gen, const char *val, size_t len)
{
	if (t->nstaged == MAX_STAGED)
		return txn_fail(t, TIPS_ETOOBIG);
	struct store *st = t->db->store;
	unsigned char pk[9];
	pk[0] = KS_FAMILY_PENDING;
	put_be64(pk + 1, gen);
	int rc = store_put(st, pk, sizeof(pk), "", 0);
	if (rc)
		return txn_fail(t, rc);
	t->staged[t->nstaged++] = gen;
	size_t per = (t->db->max_bytes / 2) / (KS_PIECE_SIZE + 128);
	if (per > t->db->max_ops / 2)
		per = t->db->max_ops / 2;
	if (per < 1)
		per = 1;
	size_t piece = 0, off = 0;
	while (off < len) {
		tips_batch_clear(t->stage);
		for (size_t i = 0; i < per && off < len; i++, piece++, off += KS_PIECE_SIZE) {
			struct ks_key k;
			piece_key(&k, gen, piece);
			size_t n = len - off < KS_PIECE_SIZE ? len - off : KS_PIECE_SIZE;
			tips_batch_put(t->stage, k.b, k.len, val + off, n);
		}
		rc = store_commit(st, t->stage);
		if (rc)
			return txn_fail(t, rc);
	}
	return ks_txn_write(t, pk, sizeof(pk), NULL, 0);
}

int ks_string_set(struct ks_txn *t, const void *key, size_t klen, const void *val,
		  size_t len, int64_t expire_ms)
{
	struct ks_meta m = {.type = KS_STRING, .expire_ms = expire_ms};
	if (len <= KS_MAX_INLINE) {
		m.enc = KS_ENC_INLINE;
		m.str = val;
		m.str_len = len;
		return ks_write_meta(t, key, klen, &m);
	}
	if (len > t->db->max_string)
		return txn_fail(t, TIPS_ETOOBIG);
	m.enc = KS_ENC_PIECES;
	m.gen = ks_new_gen(t);
	if (!m.gen)
		return t->err;
	m.hdr[0] = len;
	if (len > t->db->max_string_batch) {
		int rc = stage_pieces(t, m.gen, val, len);
		if (rc)
			return rc;
	} else {
		for (size_t off = 0, piece = 0; off < len; off += KS_PIECE_SIZE, piece++) {
			struct ks_key k;
			piece_key(&k, m.gen, piece);
			size_t n = len - off < KS_PIECE_SIZE ? len - off : KS_PIECE_SIZE;
			int rc = ks_put(t, &k, (const char *)val + off, n);
			if (rc)
				return rc;
		}
	}
	return ks_write_meta(t, key, klen, &m);
}

