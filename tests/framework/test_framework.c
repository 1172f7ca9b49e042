/*
 * test_framework.c - unit tests of the TIPS framework through its facade, on the tips-*
 * index named by argv[1] (default tips-hash):
 * write semantics, the two-fence write and fence-free read, persistence across a clean
 * close, scans merging unapplied OLog records, OLog slots reused by short-lived
 * threads, selective undo logging, reclamation (and when it waits for a grace
 * period), and adaptive scaling down to zero
 * workers under reads; and, below the facade, the ULog's CRC32C (hardware and table
 * agree) and its groups (a torn last group rolls back, damage before a later group is
 * reported).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <pthread.h>
#include <sched.h>
#include <time.h>

#include "test_util.h"
#include "test_disk.h"
#include "framework/framework.h"
#include "framework/fw_layout.h"

#include <tips/plugin.h>

static char path[256];
static const struct tips_index_ops *ops;

/* Opens (creating if needed) the database at @at: a pool of @pool_size bytes. */
static struct tips_db *open_db_at(const char *at, uint64_t pool_size,
				  const struct tips_index_ops *o, unsigned workers_up)
{
	struct tips_config cfg;
	tips_config_init(&cfg);
	cfg.flags = TIPS_CREATE;
	cfg.pool_size = pool_size;
	cfg.expected_keys = 4096;
	cfg.workers_up = workers_up;
	struct tips_db *db = NULL;
	int rc = tips_open(at, &cfg, o, &db);
	if (rc)
		fprintf(stderr, "tips_open: %s\n", tips_errormsg());
	REQUIRE(rc == 0);
	return db;
}

static struct tips_db *open_db_with(const struct tips_index_ops *o, unsigned workers_up)
{
	return open_db_at(path, 64ull << 20, o, workers_up);
}

static struct tips_db *open_db(unsigned workers_up)
{
	return open_db_with(ops, workers_up);
}

static void key_of(uint64_t k, unsigned char out[8])
{
	for (int i = 7; i >= 0; i--, k >>= 8)
		out[i] = (unsigned char)k; /* big-endian: byte order = numeric order */
}

static uint64_t get_u64(struct tips_db *db, uint64_t k, int *rc)
{
	unsigned char key[8];
	uint64_t v = 0;
	size_t vlen = 0;
	key_of(k, key);
	*rc = tips_get(db, key, 8, &v, sizeof(v), &vlen);
	if (*rc == 0 && vlen != 8)
		*rc = -1;
	return v;
}

/* @write (tips_put, tips_update, tips_insert) of key @k (big-endian) with value @v. */
static int write_u64(int (*write)(struct tips_db *, const void *, size_t, const void *,
				  size_t),
		     struct tips_db *db, uint64_t k, uint64_t v)
{
	unsigned char key[8];
	key_of(k, key);
	return write(db, key, 8, &v, 8);
}

static int put_u64(struct tips_db *db, uint64_t k, uint64_t v)
{
	return write_u64(tips_put, db, k, v);
}

static void test_semantics(void)
{
	struct tips_db *db = open_db(2);
	unsigned char k[8];
	uint64_t v = 7, got;
	size_t vlen;
	key_of(1, k);
	CHECK_RC(tips_update(db, k, 8, &v, 8), TIPS_ENOTFOUND);
	CHECK_RC(tips_remove(db, k, 8), TIPS_ENOTFOUND);
	CHECK_RC(tips_insert(db, k, 8, &v, 8), 0);
	CHECK_RC(tips_insert(db, k, 8, &v, 8), TIPS_EKEYEXISTS);
	v = 8;
	CHECK_RC(tips_update(db, k, 8, &v, 8), 0);
	CHECK_RC(tips_get(db, k, 8, &got, 8, &vlen), 0);
	CHECK(got == 8 && vlen == 8);
	CHECK_RC(tips_get(db, k, 8, &got, 4, &vlen), TIPS_ESIZE);
	CHECK(vlen == 8);
	CHECK_RC(tips_remove(db, k, 8), 0);
	CHECK_RC(tips_get(db, k, 8, &got, 8, &vlen), TIPS_ENOTFOUND);
	CHECK_RC(tips_update(db, k, 8, &v, 8), TIPS_ENOTFOUND);
	CHECK_RC(tips_insert(db, k, 8, &v, 8), 0);
	/* Byte-string keys of other lengths, and an empty value. */
	CHECK_RC(tips_put(db, "a", 1, "xyz", 3), 0);
	CHECK_RC(tips_put(db, "abcdefghijklmnopqrstuvwxyz", 26, "", 0), 0);
	char buf[8];
	CHECK_RC(tips_get(db, "a", 1, buf, sizeof(buf), &vlen), 0);
	CHECK(vlen == 3 && memcmp(buf, "xyz", 3) == 0);
	CHECK_RC(tips_get(db, "abcdefghijklmnopqrstuvwxyz", 26, buf, sizeof(buf), &vlen), 0);
	CHECK(vlen == 0);
	/* Bad input. */
	static char big[TIPS_MAX_KEY + 1];
	CHECK_RC(tips_put(db, big, sizeof(big), "v", 1), TIPS_ETOOBIG);
	CHECK_RC(tips_put(db, k, 0, "v", 1), TIPS_EINVAL);
	CHECK_RC(tips_close(&db), 0);

	/* Everything survives a clean close, and reopening replays nothing. */
	db = open_db(2);
	CHECK_RC(tips_get(db, k, 8, &got, 8, &vlen), 0);
	CHECK(got == 8);
	CHECK_RC(tips_get(db, "a", 1, buf, sizeof(buf), &vlen), 0);
	struct tips_stats st;
	tips_stats(db, &st);
	CHECK(st.recovered == 0 && st.replayed == 0);
	CHECK_RC(tips_close(&db), 0);

	/* Another index name on the same pool is refused. */
	struct tips_index_ops other = *ops;
	other.name = "tips-other";
	struct tips_config cfg;
	tips_config_init(&cfg);
	CHECK_RC(tips_open(path, &cfg, &other, &db), TIPS_EMISMATCH);
	unlink(path);
}

static void test_fences(void)
{
	struct tips_db *db = open_db(2);
	struct tips_pm_counters a, b;
	unsigned char k[8];
	uint64_t v = 1, got;
	size_t vlen;
	for (uint64_t i = 0; i < 200; i++) {
		key_of(i, k);
		tips_pm_counters_thread(&a);
		CHECK_RC(tips_put(db, k, 8, &i, 8), 0);
		tips_pm_counters_thread(&b);
		CHECK(b.fences - a.fences == 1);
		CHECK(b.lines_flushed - a.lines_flushed == 1); /* the sealed record's line */
	}
	tips_pm_counters_thread(&a);
	for (uint64_t i = 0; i < 400; i++) {
		key_of(i % 250, k);
		int rc = tips_get(db, k, 8, &got, 8, &vlen);
		CHECK(i % 250 < 200 ? rc == 0 && got == i % 250 : rc == TIPS_ENOTFOUND);
	}
	tips_pm_counters_thread(&b);
	CHECK(b.fences == a.fences && b.lines_flushed == a.lines_flushed);
	(void)v;
	CHECK_RC(tips_close(&db), 0);
	unlink(path);
}

/* Scans: the model is an array of values indexed by key (0 = absent). */
#define SCAN_KEYS 600
static uint64_t model[SCAN_KEYS];

struct scan_out {
	uint64_t keys[64], vals[64];
	size_t n;
};

static int scan_cb(const void *key, size_t klen, const void *val, size_t vlen, void *arg)
{
	struct scan_out *o = arg;
	uint64_t k = 0;
	for (size_t i = 0; i < klen; i++)
		k = k << 8 | ((const unsigned char *)key)[i];
	CHECK(klen == 8 && vlen == 8);
	o->keys[o->n] = k;
	memcpy(&o->vals[o->n], val, 8);
	o->n++;
	return 0;
}

static void check_scan(struct tips_db *db, uint64_t start, size_t count)
{
	struct scan_out o = { .n = 0 };
	unsigned char k[8];
	key_of(start, k);
	long n = tips_scan(db, k, 8, count, scan_cb, &o);
	size_t want = 0;
	for (uint64_t i = start; i < SCAN_KEYS && want < count; i++)
		if (model[i]) {
			if (want < o.n) {
				CHECK(o.keys[want] == i);
				CHECK(o.vals[want] == model[i]);
			}
			want++;
		}
	CHECK(n == (long)want && o.n == want);
}

static void test_scan(void)
{
	struct tips_db *db = open_db(2);
	unsigned seed = 5;
	for (int round = 0; round < 20; round++) {
		for (int i = 0; i < 300; i++) {
			uint64_t k = (uint64_t)rand_r(&seed) % SCAN_KEYS;
			unsigned char key[8];
			key_of(k, key);
			if (rand_r(&seed) % 4 == 0) {
				if (model[k]) {
					CHECK_RC(tips_remove(db, key, 8), 0);
					model[k] = 0;
				}
			} else {
				uint64_t v = (uint64_t)round << 32 | (uint64_t)i | 1;
				CHECK_RC(tips_put(db, key, 8, &v, 8), 0);
				model[k] = v;
			}
		}
		/* Right after the writes most are still only in the OLogs. */
		check_scan(db, 0, 50);
		check_scan(db, (uint64_t)rand_r(&seed) % SCAN_KEYS, 1 + (size_t)rand_r(&seed) % 60);
	}
	check_scan(db, SCAN_KEYS - 5, 64);
	CHECK_RC(tips_close(&db), 0);
	db = open_db(2);
	check_scan(db, 0, 64);
	check_scan(db, 250, 33);
	CHECK_RC(tips_close(&db), 0);
	unlink(path);
}

/*
 * Scans whose overlay (writes replay has not applied) is known exactly: the index's
 * writes are held (a wrapper of its ops table blocks replay's insert/update/remove
 * until released), so every write made meanwhile stays in the OLogs. tips_scan
 * drops the overlay's keys above the last key the index returned when the index
 * returned all it was asked for; scans from many starts with many counts check the
 * result against the model, so the overlay's keys at that last key (an update that
 * must win), below it (deletes that hide index keys, which the index is asked to
 * make up for) and above it (dropped, or included once the index is exhausted) are
 * all compared.
 */
static const struct tips_index_ops *held_real;
static pthread_mutex_t held_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t held_cond = PTHREAD_COND_INITIALIZER;
static bool held;

static void held_wait(void)
{
	pthread_mutex_lock(&held_lock);
	while (held)
		pthread_cond_wait(&held_cond, &held_lock);
	pthread_mutex_unlock(&held_lock);
}

static void held_set(bool on)
{
	pthread_mutex_lock(&held_lock);
	held = on;
	pthread_cond_broadcast(&held_cond);
	pthread_mutex_unlock(&held_lock);
}

static int held_insert(void *index, const void *key, size_t klen, const void *val, size_t vlen)
{
	held_wait();
	return held_real->insert(index, key, klen, val, vlen);
}

static int held_update(void *index, const void *key, size_t klen, const void *val, size_t vlen)
{
	held_wait();
	return held_real->update(index, key, klen, val, vlen);
}

static int held_remove(void *index, const void *key, size_t klen)
{
	held_wait();
	return held_real->remove(index, key, klen);
}

/* A fresh database whose index's writes wait while held_set(true); @wrapped (the
 * index's ops with writes wrapped, its own lookup and scan) must outlive it. The model
 * is emptied. */
static struct tips_db *open_db_held(struct tips_index_ops *wrapped)
{
	*wrapped = *ops;
	wrapped->insert = held_insert;
	wrapped->update = held_update;
	wrapped->remove = held_remove;
	held_real = ops;
	ops = wrapped;
	struct tips_db *db = open_db(2);
	ops = held_real;
	memset(model, 0, sizeof(model));
	return db;
}

/* Puts keys @first, @first + @step, ... below @end (value key << 8 | 1, in the model),
 * waits until replay has applied them all, then holds the index's writes. */
static void load_then_hold(struct tips_db *db, uint64_t first, uint64_t end, uint64_t step)
{
	unsigned char key[8];
	for (uint64_t k = first; k < end; k += step) {
		uint64_t v = k << 8 | 1;
		key_of(k, key);
		CHECK_RC(tips_put(db, key, 8, &v, 8), 0);
		model[k] = v;
	}
	struct tips_stats st;
	WAIT_UNTIL((tips_stats(db, &st), st.cache_unapplied == 0), "replay of the load");
	held_set(true);
}

static void test_scan_overlay_bound(void)
{
	struct tips_index_ops wrapped;
	struct tips_db *db = open_db_held(&wrapped);
	unsigned char key[8];
	load_then_hold(db, 0, 400, 1);
	struct tips_stats st;
	unsigned seed = 11;
	/* First puts only (no delete: the index is asked for exactly the scan's count, so
	 * its last key is the scan's last key unless the overlay adds smaller ones), then
	 * deletes among them. */
	for (int round = 0; round < 2; round++) {
		for (int i = 0; i < 100; i++) { /* in the OLogs only, until released */
			uint64_t k = (uint64_t)rand_r(&seed) % SCAN_KEYS;
			key_of(k, key);
			if (round == 1 && rand_r(&seed) % 3 == 0) {
				if (model[k]) {
					CHECK_RC(tips_remove(db, key, 8), 0);
					model[k] = 0;
				}
			} else {
				uint64_t v = (uint64_t)(round * 100 + i) << 16 | k << 1 | 1;
				CHECK_RC(tips_put(db, key, 8, &v, 8), 0);
				model[k] = v;
			}
		}
		tips_stats(db, &st);
		CHECK(st.cache_unapplied > 0); /* the writes are still held */
		for (uint64_t start = 0; start < SCAN_KEYS; start += 2)
			check_scan(db, start, 1 + (size_t)rand_r(&seed) % 64);
	}
	tips_stats(db, &st);
	CHECK(st.cache_unapplied > 0); /* the scans above saw an overlay */
	held_set(false);
	WAIT_UNTIL((tips_stats(db, &st), st.cache_unapplied == 0), "replay of the held writes");
	for (uint64_t start = 0; start < SCAN_KEYS; start += 7)
		check_scan(db, start, 1 + (size_t)rand_r(&seed) % 64);
	CHECK_RC(tips_close(&db), 0);
	unlink(path);
}

/*
 * Bounded scans (tips_scan passes the index's keys below the smallest unapplied key
 * straight to the caller's function, and merges from there on): replay held as above,
 * so that the overlay is exactly the few writes made meanwhile: updates of index keys,
 * deletes of index keys, new keys between and beyond them, and one key written several
 * times. Then scans from every start with every count 1..40 against the model; a
 * callback that stops after a few keys (the stopping one is counted); and a callback
 * that writes and reads through the facade while the scan runs (a bounded scan holds
 * no lock when it calls it).
 */
struct stop_after {
	size_t left, seen;
};

static int stop_cb(const void *key, size_t klen, const void *val, size_t vlen, void *arg)
{
	(void)key, (void)klen, (void)val, (void)vlen;
	struct stop_after *s = arg;
	s->seen++;
	return --s->left == 0;
}

struct reenter {
	struct tips_db *db;
	size_t n;
};

static int reenter_cb(const void *key, size_t klen, const void *val, size_t vlen, void *arg)
{
	struct reenter *r = arg;
	uint64_t got = 0;
	size_t gl = 0;
	CHECK_RC(tips_get(r->db, key, klen, &got, sizeof(got), &gl), 0);
	CHECK(gl == vlen && memcmp(&got, val, 8) == 0);
	unsigned char k[8];
	key_of(SCAN_KEYS + r->n, k); /* beyond every scanned key */
	uint64_t v = 7;
	CHECK_RC(tips_put(r->db, k, 8, &v, 8), 0);
	r->n++;
	return 0;
}

static void test_scan_stream(void)
{
	struct tips_index_ops wrapped; /* its own scan: the bounded path */
	struct tips_db *db = open_db_held(&wrapped);
	unsigned char key[8];
	load_then_hold(db, 10, 300, 3); /* the index: every third key */
	struct tips_stats st;
	/* 22 held records: updates, deletes, new keys, a key written 4 times, new keys
	 * past the index's last key (299 is absent: 298 is its last). */
	static const uint64_t upd[] = { 10, 31, 154, 298 }, del[] = { 13, 100, 157, 295 },
			      add[] = { 0, 11, 12, 101, 155, 156, 299, 305, 400, 599 };
	for (size_t i = 0; i < sizeof(upd) / sizeof(upd[0]); i++) {
		uint64_t v = upd[i] << 8 | 3;
		key_of(upd[i], key);
		CHECK_RC(tips_put(db, key, 8, &v, 8), 0);
		model[upd[i]] = v;
	}
	for (size_t i = 0; i < sizeof(del) / sizeof(del[0]); i++) {
		key_of(del[i], key);
		CHECK_RC(tips_remove(db, key, 8), 0);
		model[del[i]] = 0;
	}
	for (size_t i = 0; i < sizeof(add) / sizeof(add[0]); i++) {
		uint64_t v = add[i] << 8 | 5;
		key_of(add[i], key);
		CHECK_RC(tips_put(db, key, 8, &v, 8), 0);
		model[add[i]] = v;
	}
	for (uint64_t w = 0; w < 4; w++) { /* put, delete, put, put of one key */
		key_of(200, key);
		if (w == 1) {
			CHECK_RC(tips_remove(db, key, 8), 0);
			model[200] = 0;
		} else {
			uint64_t v = 200 << 8 | (w + 7) << 1 | 1;
			CHECK_RC(tips_put(db, key, 8, &v, 8), 0);
			model[200] = v;
		}
	}
	tips_stats(db, &st);
	CHECK(st.cache_unapplied == 22); /* all held: the overlay is exactly these */
	for (uint64_t start = 0; start < SCAN_KEYS; start += 1)
		for (size_t count = 1; count <= 40; count += start % 7 + 1)
			check_scan(db, start, count);
	check_scan(db, 250, 64); /* past the index's end: the overlay's last keys */
	for (size_t stop = 1; stop <= 12; stop++) {
		struct stop_after sa = { stop, 0 };
		unsigned char k0[8];
		key_of(150, k0);
		CHECK(tips_scan(db, k0, 8, 30, stop_cb, &sa) == (long)stop && sa.seen == stop);
	}
	struct reenter re = { db, 0 };
	long n = tips_scan(db, NULL, 0, 25, reenter_cb, &re);
	CHECK(n == 25 && re.n == 25);
	held_set(false);
	WAIT_UNTIL((tips_stats(db, &st), st.cache_unapplied == 0), "replay of the held writes");
	check_scan(db, 0, 64);
	CHECK_RC(tips_close(&db), 0);
	unlink(path);
}

/*
 * A scanning thread's view of the backlog (backlog_view.c) with keys of many lengths:
 * keys of 7 to 12 bytes that share their first 7 or 8 bytes, so that the view's 8-byte
 * prefixes tie and the keys must decide, and the empty key. Replay is held as above, so
 * the backlog is exactly the writes made meanwhile; scans from every key and from
 * between keys, counts 1-20, are checked against a model. Then the backlog outgrows the
 * view (600 records: the scans are merged scans), shrinks (released, replayed),
 * and the view is rebuilt for a few new writes; then the same with writers on three
 * threads at once, so that the backlog and the view's overflow span several OLogs.
 */
#define VKEYS 96
static unsigned char vkey[VKEYS][12];
static size_t vklen[VKEYS];
static uint64_t vmodel[VKEYS]; /* 0: absent; indexed in key order */

static void vkeys_make(void)
{
	/* In key order: "commonp" (7 bytes), then "commonpf" + 0-4 more bytes, so that
	 * each group of equal 8-byte prefixes holds keys of several lengths. */
	memcpy(vkey[0], "commonp", 7);
	vklen[0] = 7;
	for (unsigned i = 1; i < VKEYS; i++) {
		unsigned g = (i - 1) / 5, j = (i - 1) % 5; /* j extra bytes after the 8 */
		memcpy(vkey[i], "commonp", 7);
		vkey[i][7] = (unsigned char)('a' + g); /* the 8th byte: a group */
		for (unsigned b = 0; b < j; b++)
			vkey[i][8 + b] = 0x10; /* each key a prefix of the next */
		vklen[i] = 8 + j;
	}
	for (unsigned i = 1; i < VKEYS; i++) /* the construction is in order */
		REQUIRE(memcmp(vkey[i - 1], vkey[i], vklen[i - 1] < vklen[i] ? vklen[i - 1]
									   : vklen[i]) < 0 ||
			(memcmp(vkey[i - 1], vkey[i], vklen[i - 1]) == 0 && vklen[i - 1] < vklen[i]));
}

struct vscan {
	unsigned idx[32];
	uint64_t vals[32];
	size_t n;
	bool bad;
};

static int vscan_cb(const void *key, size_t klen, const void *val, size_t vlen, void *arg)
{
	struct vscan *o = arg;
	unsigned found = VKEYS;
	for (unsigned i = 0; i < VKEYS; i++)
		if (vklen[i] == klen && memcmp(vkey[i], key, klen) == 0)
			found = i;
	if (found == VKEYS || vlen != 8 || o->n == 32) {
		o->bad = true;
		return 1;
	}
	o->idx[o->n] = found;
	memcpy(&o->vals[o->n], val, 8);
	o->n++;
	return 0;
}

/* A scan from key @from (its @cut first bytes only, when @cut < its length: a start
 * between keys) against the model. */
static void check_vscan(struct tips_db *db, unsigned from, size_t cut, size_t count)
{
	size_t slen = cut < vklen[from] ? cut : vklen[from];
	struct vscan o = { .n = 0 };
	long n = tips_scan(db, slen ? vkey[from] : NULL, slen, count, vscan_cb, &o);
	CHECK(!o.bad);
	size_t want = 0;
	for (unsigned i = 0; i < VKEYS && want < count; i++) {
		int c = memcmp(vkey[i], vkey[from], vklen[i] < slen ? vklen[i] : slen);
		if (c < 0 || (c == 0 && vklen[i] < slen) || !vmodel[i])
			continue; /* below the start, or absent */
		if (want < o.n)
			CHECK(o.idx[want] == i && o.vals[want] == vmodel[i]);
		want++;
	}
	CHECK(n == (long)want && o.n == want);
}

static void check_vscans(struct tips_db *db)
{
	for (unsigned from = 0; from < VKEYS; from++)
		for (size_t count = 1; count <= 20; count += 1 + from % 4) {
			check_vscan(db, from, 12, count);
			check_vscan(db, from, 7 + from % 3, count); /* 7, 8 or 9 bytes of it */
		}
	check_vscan(db, 0, 0, 20); /* from the empty key */
}

static void vput(struct tips_db *db, unsigned i, uint64_t v)
{
	CHECK_RC(tips_put(db, vkey[i], vklen[i], &v, 8), 0);
	vmodel[i] = v;
}

/* Writers on several threads at once, so that the backlog spans several OLogs: thread
 * t of @n writes @per records over the keys i with i % n == t (the model's entries are
 * disjoint between threads), and waits for the others before it exits (which would
 * give its OLog slot to the next thread). */
struct vwriter {
	struct tips_db *db;
	unsigned t, n, per, round;
	pthread_barrier_t *done;
};

static void *vwriter_main(void *p)
{
	struct vwriter *w = p;
	for (unsigned k = 0; k < w->per; k++) {
		unsigned i = w->t + w->n * (k % (VKEYS / w->n));
		vput(w->db, i, (uint64_t)(w->round * 1000 + k) << 16 | w->t << 1 | 1);
	}
	pthread_barrier_wait(w->done);
	return NULL;
}

static void vwrite_threads(struct tips_db *db, unsigned per, unsigned round)
{
	enum { N = 3 };
	pthread_t th[N];
	struct vwriter w[N];
	pthread_barrier_t done;
	REQUIRE(pthread_barrier_init(&done, NULL, N) == 0);
	for (unsigned t = 0; t < N; t++) {
		w[t] = (struct vwriter){ db, t, N, per, round, &done };
		REQUIRE(pthread_create(&th[t], NULL, vwriter_main, &w[t]) == 0);
	}
	for (unsigned t = 0; t < N; t++)
		pthread_join(th[t], NULL);
	pthread_barrier_destroy(&done);
}

static void test_scan_view(void)
{
	struct tips_index_ops wrapped;
	struct tips_db *db = open_db_held(&wrapped);
	struct tips_stats st;
	vkeys_make();
	memset(vmodel, 0, sizeof(vmodel));
	held_set(false);
	for (unsigned i = 0; i < VKEYS; i += 2)
		vput(db, i, (uint64_t)i << 8 | 1);
	WAIT_UNTIL((tips_stats(db, &st), st.cache_unapplied == 0), "replay of the load");
	held_set(true);
	check_vscans(db); /* an empty backlog */
	unsigned seed = 17;
	for (int w = 0; w < 60; w++) { /* held: updates, deletes, new keys, repeats */
		unsigned i = (unsigned)rand_r(&seed) % VKEYS;
		if (rand_r(&seed) % 4 == 0) {
			if (vmodel[i]) {
				CHECK_RC(tips_remove(db, vkey[i], vklen[i]), 0);
				vmodel[i] = 0;
			}
		} else {
			vput(db, i, (uint64_t)(w + 1) << 16 | i << 1 | 1);
		}
		if (w % 20 == 19)
			check_vscans(db); /* the view grows by the writes since the last scan */
	}
	tips_stats(db, &st);
	CHECK(st.cache_unapplied > 0);
	for (int w = 0; w < 600; w++) /* more than the view holds: merged scans */
		vput(db, (unsigned)w % VKEYS, (uint64_t)(w + 100) << 16 | 1);
	check_vscans(db);
	held_set(false);
	WAIT_UNTIL((tips_stats(db, &st), st.cache_unapplied == 0), "replay of the held writes");
	held_set(true);
	/* A small backlog, so the view is rebuilt: in some 8-byte-prefix groups a longer
	 * key is written before a shorter one (the view must still bound at the smaller). */
	for (unsigned g = 2; g < (VKEYS - 1) / 5; g += 5) {
		vput(db, 5 * g + 5, (uint64_t)g << 24 | 3);
		vput(db, 5 * g + 2, (uint64_t)g << 24 | 5);
	}
	check_vscans(db);
	/* Several OLogs: 3 writer threads at once, 3 x 140 held records (the view holds
	 * them all), then 3 x 40 more (the view overflows partway through the OLogs), then,
	 * replayed and held again, 3 x 20 (rebuilt from several OLogs). */
	vwrite_threads(db, 140, 1);
	tips_stats(db, &st);
	CHECK(st.cache_unapplied > 400 && st.cache_unapplied < 512);
	check_vscans(db);
	vwrite_threads(db, 40, 2);
	check_vscans(db);
	held_set(false);
	WAIT_UNTIL((tips_stats(db, &st), st.cache_unapplied == 0), "replay of the held writes");
	held_set(true);
	vwrite_threads(db, 20, 3);
	check_vscans(db);
	held_set(false);
	CHECK_RC(tips_close(&db), 0);
	unlink(path);
}

/* More threads than OLog slots over time, each writing then exiting. */
struct thread_arg {
	struct tips_db *db;
	uint64_t base;
};

static void *short_writer(void *p)
{
	struct thread_arg *a = p;
	for (uint64_t i = 0; i < 50; i++)
		CHECK_RC(put_u64(a->db, a->base + i, a->base + i + 1), 0);
	return NULL;
}

static void test_thread_slots(void)
{
	struct tips_db *db = open_db(2);
	for (int wave = 0; wave < 10; wave++) {
		pthread_t t[8];
		struct thread_arg args[8];
		for (int i = 0; i < 8; i++) {
			args[i] = (struct thread_arg){ db, (uint64_t)(wave * 8 + i) * 1000 };
			REQUIRE(pthread_create(&t[i], NULL, short_writer, &args[i]) == 0);
		}
		for (int i = 0; i < 8; i++)
			pthread_join(t[i], NULL);
	}
	for (uint64_t w = 0; w < 80; w++)
		for (uint64_t i = 0; i < 50; i++) {
			int rc;
			uint64_t v = get_u64(db, w * 1000 + i, &rc);
			CHECK(rc == 0 && v == w * 1000 + i + 1);
		}
	struct tips_stats st;
	tips_stats(db, &st);
	CHECK(st.writes == 80 * 50);
	CHECK_RC(tips_close(&db), 0);
	db = open_db(2);
	int rc;
	CHECK(get_u64(db, 79 * 1000 + 49, &rc) == 79 * 1000 + 50 && rc == 0);
	CHECK_RC(tips_close(&db), 0);
	unlink(path);
}

/* A 16-byte value for key @k in round @round: its length differs from put_u64's. */
static int put_long(struct tips_db *db, uint64_t k, uint64_t round)
{
	unsigned char key[8];
	uint64_t v[2] = { k, round };
	key_of(k, key);
	return tips_put(db, key, 8, v, sizeof(v));
}

/* Puts keys [0, @n) with 8-byte values (value = key) and reopens the database: the clean
 * close reclaims, so the index's nodes are old (not fresh) when the caller writes. */
static struct tips_db *open_with_old_keys(uint64_t n)
{
	struct tips_db *db = open_db(2);
	for (uint64_t i = 0; i < n; i++)
		CHECK_RC(put_u64(db, i, i), 0);
	CHECK_RC(tips_close(&db), 0);
	return open_db(2);
}

/* Closes, reopens and checks that keys [0, @n) hold 8-byte values i + @add; closes. */
static void check_u64_after_reopen(struct tips_db **db, uint64_t n, uint64_t add)
{
	CHECK_RC(tips_close(db), 0);
	*db = open_db(2);
	for (uint64_t i = 0; i < n; i++) {
		int rc;
		CHECK(get_u64(*db, i, &rc) == i + add && rc == 0);
	}
	CHECK_RC(tips_close(db), 0);
	unlink(path);
}

/* Enough same-length updates of old keys to force several reclamations: each overwrites
 * its value in place with no undo record (IDX_LOG_VALUE, counted in ulog_values when
 * replay flushes them), so the ULog stays empty. */
static void test_reclaim_and_ulog(void)
{
	struct tips_db *db = open_with_old_keys(2000);
	for (int round = 0; round < 30; round++)
		for (uint64_t i = 0; i < 2000; i++)
			CHECK_RC(put_u64(db, i, i + (uint64_t)round * 10000), 0);
	for (uint64_t i = 0; i < 2000; i++) {
		int rc;
		CHECK(get_u64(db, i, &rc) == i + 29 * 10000 && rc == 0);
	}
	struct tips_stats st;
	WAIT_UNTIL((tips_stats(db, &st), st.ulog_values >= 60000), "replay of the updates");
	fprintf(stderr, "reclaim_and_ulog: reclamations %llu ulog logged %llu values %llu\n",
		(unsigned long long)st.reclamations, (unsigned long long)st.ulog_logged,
		(unsigned long long)st.ulog_values);
	CHECK(st.reclamations >= 2);
	CHECK(st.ulog_values == 60000);
	CHECK(st.ulog_logged == 0);
	check_u64_after_reopen(&db, 2000, 29 * 10000);
}

/* Lengths that alternate (16 bytes, then 8), on 10 old keys: each update replaces the
 * value's node or block, storing to the old structure. Those ranges were logged
 * (ulog_logged), a range logged again in the same interval was skipped
 * (ulog_skipped_logged: the frees make a reclamation after nearly every epoch, so only
 * a few keys make that possible in any epoch), and no key logged more than twice (the
 * most any index here logs for such an update) per reclamation interval. */
static void test_ulog_length_changes(void)
{
	const uint64_t nkeys = 10, rounds = 6000;
	struct tips_db *db = open_with_old_keys(nkeys);
	for (uint64_t round = 0; round < rounds; round++)
		for (uint64_t i = 0; i < nkeys; i++)
			CHECK_RC(round % 2 ? put_u64(db, i, i + round * 10000)
					   : put_long(db, i, round), 0);
	for (uint64_t i = 0; i < nkeys; i++) {
		int rc;
		CHECK(get_u64(db, i, &rc) == i + (rounds - 1) * 10000 && rc == 0);
	}
	struct tips_stats st;
	WAIT_UNTIL((tips_stats(db, &st), st.cache_unapplied == 0), "replay of the updates");
	fprintf(stderr, "ulog_length_changes: reclamations %llu ulog logged %llu skipped "
		"logged %llu skipped fresh %llu values %llu\n",
		(unsigned long long)st.reclamations, (unsigned long long)st.ulog_logged,
		(unsigned long long)st.ulog_skipped_logged,
		(unsigned long long)st.ulog_skipped_fresh, (unsigned long long)st.ulog_values);
	CHECK(st.reclamations >= 2);
	CHECK(st.ulog_logged > 0);
	CHECK(st.ulog_skipped_logged > 0);
	CHECK(st.ulog_logged <= (st.reclamations + 1) * nkeys * 2);
	check_u64_after_reopen(&db, nkeys, (rounds - 1) * 10000);
}

/* 16-byte values of the same length on 10 old keys: hash, bst and bptree overwrite them
 * in place (a node's value bytes, a value block) with no record; the others replace the
 * node or leaf, and tips-clht stores a new value block's pointer, a logged word. The
 * first round changes the length (8 -> 16), which is logged everywhere. */
static void test_ulog_in_place_16(void)
{
	const uint64_t nkeys = 10, rounds = 200;
	const char *const in_place16[] = { "tips-hash", "tips-bst", "tips-bptree" };
	bool in_place = false;
	for (size_t j = 0; j < sizeof(in_place16) / sizeof(in_place16[0]); j++)
		in_place |= strcmp(ops->name, in_place16[j]) == 0;
	struct tips_db *db = open_with_old_keys(nkeys);
	for (uint64_t round = 0; round < rounds; round++)
		for (uint64_t i = 0; i < nkeys; i++)
			CHECK_RC(put_long(db, i, round), 0);
	struct tips_stats st;
	WAIT_UNTIL((tips_stats(db, &st), st.cache_unapplied == 0), "replay of the updates");
	fprintf(stderr, "ulog_in_place_16: ulog logged %llu values %llu\n",
		(unsigned long long)st.ulog_logged, (unsigned long long)st.ulog_values);
	CHECK(st.ulog_values == (in_place ? (rounds - 1) * nkeys : 0));
	CHECK(st.ulog_logged > 0); /* the first round's replacements */
	CHECK_RC(tips_close(&db), 0);
	db = open_db(2);
	for (uint64_t i = 0; i < nkeys; i++) {
		unsigned char key[8];
		uint64_t v[2] = { 0, 0 };
		size_t vlen = 0;
		key_of(i, key);
		CHECK_RC(tips_get(db, key, 8, v, sizeof(v), &vlen), 0);
		CHECK(vlen == sizeof(v) && v[0] == i && v[1] == rounds - 1);
	}
	CHECK_RC(tips_close(&db), 0);
	unlink(path);
}

/* On msync media (a pool on a disk file system) tips_ulog_value writes undo records
 * instead of noting the range (a flush there is an msync, per value), and the values
 * still survive a close. Run alone, as `test_framework NAME msync`: it skips where no
 * disk file system is found. */
static void test_values_on_msync_media(void)
{
	char dir[PATH_MAX], fpath[PATH_MAX];
	if (!test_disk_dir(dir, sizeof(dir))) {
		test_skip("values_on_msync_media", "no disk file system found");
		return;
	}
	test_path(fpath, sizeof(fpath), dir, "framework-msync");
	struct tips_db *db = open_db_at(fpath, 32ull << 20, ops, 1);
	const uint64_t nkeys = 100;
	for (uint64_t i = 0; i < nkeys; i++)
		CHECK_RC(put_u64(db, i, i), 0);
	CHECK_RC(tips_close(&db), 0); /* the nodes are old now */
	db = open_db_at(fpath, 32ull << 20, ops, 1);
	for (uint64_t round = 1; round <= 2; round++)
		for (uint64_t i = 0; i < nkeys; i++)
			CHECK_RC(put_u64(db, i, i + round * 1000), 0);
	struct tips_stats st;
	WAIT_UNTIL((tips_stats(db, &st), st.cache_unapplied == 0), "replay of the updates");
	fprintf(stderr, "values_on_msync_media: ulog logged %llu values %llu\n",
		(unsigned long long)st.ulog_logged, (unsigned long long)st.ulog_values);
	CHECK(st.ulog_values == 0);
	CHECK(st.ulog_logged >= nkeys); /* each key's value, once in the generation */
	CHECK_RC(tips_close(&db), 0);
	db = open_db_at(fpath, 32ull << 20, ops, 1);
	for (uint64_t i = 0; i < nkeys; i++) {
		int rc;
		CHECK(get_u64(db, i, &rc) == i + 2000 && rc == 0);
	}
	CHECK_RC(tips_close(&db), 0);
	unlink(fpath);
}

/* Updates keys [@from, @to) in place, round after round, until the database has
 * reclaimed at least @target times since open; returns the stats then. */
static struct tips_stats update_until_reclaimed(struct tips_db *db, uint64_t from,
						uint64_t to, uint64_t target)
{
	struct tips_stats st;
	uint64_t v = 0;
	double end = test_seconds() + TEST_WAIT_DEADLINE_S;
	for (tips_stats(db, &st); st.reclamations < target; tips_stats(db, &st)) {
		REQUIRE(test_seconds() < end);
		v++;
		for (uint64_t i = from; i < to; i++)
			CHECK_RC(write_u64(tips_update, db, i, i + v * 10000), 0);
	}
	/* Once more: a reclamation's grace is counted just after it, and tips_stats reads
	 * the graces before the reclamations. */
	tips_stats(db, &st);
	return st;
}

static int count_pair(const void *key, size_t klen, const void *val, size_t vlen, void *arg)
{
	(void)key, (void)klen, (void)val, (void)vlen;
	++*(long *)arg;
	return 0;
}

/* A reclamation waits for a grace period only if a reader may hold what it releases:
 * a block the index freed, or OLog space a bounded scan read (reclaim.c). In-place
 * updates free nothing, so they reclaim without one; one scan costs exactly one;
 * deletes cost at least one more if the index freed a node for them (tips-clht and
 * tips-bptree clear a slot instead). */
static void test_reclaim_grace(void)
{
	struct tips_db *db = open_db(1);
	for (uint64_t i = 0; i < 2000; i++)
		CHECK_RC(put_u64(db, i, i), 0);
	CHECK_RC(tips_close(&db), 0); /* reclaimed: nothing freed is pending now */
	db = open_db(1);
	struct tips_stats st = update_until_reclaimed(db, 0, 2000, 3);
	fprintf(stderr, "reclaim_grace: %llu reclamations of in-place updates, %llu graces\n",
		(unsigned long long)st.reclamations, (unsigned long long)st.reclaim_graces);
	CHECK(st.reclaim_graces == 0);
	long pairs = 0;
	unsigned char key[8];
	key_of(0, key);
	CHECK(tips_scan(db, key, 8, 16, count_pair, &pairs) == pairs && pairs > 0);
	tips_stats(db, &st);
	/* The reclamation that takes the scan's flag is under way or next: both are done
	 * once two more have counted. */
	st = update_until_reclaimed(db, 0, 2000, st.reclamations + 2);
	fprintf(stderr, "reclaim_grace: after one scan, %llu graces\n",
		(unsigned long long)st.reclaim_graces);
	CHECK(st.reclaim_graces == 1);
	uint64_t frees = st.mlog_frees;
	for (uint64_t i = 0; i < 100; i++) {
		key_of(i, key);
		CHECK_RC(tips_remove(db, key, 8), 0);
	}
	tips_stats(db, &st);
	st = update_until_reclaimed(db, 100, 2000, st.reclamations + 2);
	fprintf(stderr, "reclaim_grace: after 100 deletes (%llu blocks freed), %llu graces\n",
		(unsigned long long)(st.mlog_frees - frees), (unsigned long long)st.reclaim_graces);
	CHECK(st.mlog_frees > frees ? st.reclaim_graces >= 2 : st.reclaim_graces == 1);
	CHECK_RC(tips_close(&db), 0);
	unlink(path);
}

/*
 * Samples the state of every thread but this one (/proc/self/task/TID/stat) IDLE_SAMPLES
 * times over one second and returns the most samples in which one thread was running
 * or runnable (R). A thread that spins is R in nearly every sample, whatever the load
 * of the machine (runnable counts as R too); a thread that blocks and wakes now and
 * then for a short bounded wait is R in few. Unlike a CPU-time limit, this does not
 * depend on how fast the machine is or how many other processes share it.
 */
#define IDLE_SAMPLES 50
#define IDLE_MAX_THREADS 256

static char thread_state(const char *tid)
{
	char p[300], buf[512];
	snprintf(p, sizeof(p), "/proc/self/task/%s/stat", tid);
	FILE *f = fopen(p, "r");
	if (!f)
		return '?'; /* the thread exited: not running */
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	const char *close_paren = strrchr(buf, ')');
	return close_paren && close_paren[1] == ' ' ? close_paren[2] : '?';
}

static int busiest_idle_thread(void)
{
	long tids[IDLE_MAX_THREADS];
	int running[IDLE_MAX_THREADS], ntids = 0, busiest = 0;
	for (int s = 0; s < IDLE_SAMPLES; s++) {
		DIR *d = opendir("/proc/self/task");
		REQUIRE(d != NULL);
		for (struct dirent *e; (e = readdir(d)) != NULL;) {
			long tid = strtol(e->d_name, NULL, 10);
			if (tid <= 0 || tid == (long)getpid() || thread_state(e->d_name) != 'R')
				continue;
			int i = 0;
			while (i < ntids && tids[i] != tid)
				i++;
			if (i == ntids && ntids < IDLE_MAX_THREADS) {
				tids[ntids] = tid;
				running[ntids++] = 0;
			}
			if (i < ntids && ++running[i] > busiest)
				busiest = running[i];
		}
		closedir(d);
		/* paces the samples over the idle second; not a synchronisation */
		struct timespec gap = { 0, 1000000000L / IDLE_SAMPLES };
		nanosleep(&gap, NULL);
	}
	fprintf(stderr, "idle for 1 s: the busiest background thread was running in %d of %d "
		"samples\n", busiest, IDLE_SAMPLES);
	return busiest;
}

static void test_stats_after_load(void)
{
	struct tips_db *db = open_db(2);
	for (uint64_t i = 0; i < 60000; i++)
		CHECK_RC(put_u64(db, i % 3000, i), 0);
	struct tips_stats st;
	tips_stats(db, &st);
	fprintf(stderr, "after 60000 puts: reclamations %llu epochs %llu replayed %llu "
		"ulog logged %llu skipped fresh %llu skipped logged %llu workers avg %.2f "
		"waits %llu\n", (unsigned long long)st.reclamations,
		(unsigned long long)st.epochs, (unsigned long long)st.replayed,
		(unsigned long long)st.ulog_logged, (unsigned long long)st.ulog_skipped_fresh,
		(unsigned long long)st.ulog_skipped_logged, st.workers_avg,
		(unsigned long long)st.writer_waits);
	/* 60000 records of 64 B fill the 512 KiB OLog many times over. */
	CHECK(st.reclamations >= 5);
	CHECK(st.replayed > 0 && st.epochs > 0);
	CHECK(st.ulog_skipped_logged > 0 || st.ulog_skipped_fresh > 0);
	/* Reads only: the workers scale down to W_low = 0. Wait on the counter with a
	 * deadline (the persist thread scales down once per idle 10 ms tick). */
	struct timespec t0, now;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		int rc;
		for (int i = 0; i < 1000; i++)
			(void)get_u64(db, (uint64_t)i, &rc);
		tips_stats(db, &st);
		clock_gettime(CLOCK_MONOTONIC, &now);
	} while ((st.workers_now != 0 || st.replayed < 60000) && now.tv_sec - t0.tv_sec < 10);
	/* ...and the backlog applied: workers reach 0 while records are still pending, and
	 * a slow index (lfbst: 3000 sequential keys make a path of depth 3000) would still
	 * be replaying them during the idle second measured below. */
	CHECK(st.workers_now == 0);
	/* Idle, the background threads block (the persist thread's bounded waits, gc):
	 * sampled over one idle second, no thread is running in most samples. */
	CHECK(busiest_idle_thread() <= IDLE_SAMPLES / 2);
	CHECK_RC(tips_close(&db), 0);
	unlink(path);
}

/* Puts keys [0, @n) and waits until replay has applied them and gc has unlinked all but
 * at most 64 cache entries (the writer's unused reservation counts as entries). */
static struct tips_stats put_applied_and_unlinked(struct tips_db *db, uint64_t n)
{
	struct tips_stats st;
	for (uint64_t i = 0; i < n; i++)
		CHECK_RC(put_u64(db, i, i), 0);
	WAIT_UNTIL((tips_stats(db, &st), st.cache_unapplied == 0), "replay of the puts");
	WAIT_UNTIL((tips_stats(db, &st), st.cache_entries <= 64), "gc to unlink them");
	return st;
}

/* What replay applied leaves the cache soon, not only when the cache nears its capacity:
 * gc gets the applied keys' hashes after each epoch (cache.c, trim_gone). 500 distinct
 * keys fill about half of a 1024-entry cache, far below the 7/8 at which a sweep starts,
 * in chains far below the bound. The cache's count includes the entries writers
 * reserved and have not used, at most one reservation batch (64). */
static void test_applied_leave_cache(void)
{
	struct tips_db *db = open_db(1);
	struct tips_stats st;
	tips_stats(db, &st);
	CHECK(st.cache_capacity == 1024);
	st = put_applied_and_unlinked(db, 500);
	CHECK(st.gc_unlinked >= 436);
	if (st.gc_unlinked < 436)
		fprintf(stderr, "cache entries %llu, gc unlinked %llu\n",
			(unsigned long long)st.cache_entries, (unsigned long long)st.gc_unlinked);
	for (uint64_t i = 0; i < 500; i++) {
		int rc;
		CHECK(get_u64(db, i, &rc) == i && rc == 0);
	}
	CHECK_RC(tips_close(&db), 0);
	unlink(path);
}

/* tips_errormsg() keeps a failure's message until the next failing call (errors.h),
 * also across successful writes whose outcome lookups find a present key in the
 * index: such a lookup asks for no value bytes, so the index reports TIPS_ESIZE, whose
 * deferred message must not replace the caller's. The keys are applied and mostly
 * unlinked from the cache first, so the writes' outcome lookups reach the index. */
static void test_errormsg_survives_writes(void)
{
	struct tips_db *db = open_db(1);
	put_applied_and_unlinked(db, 500);
	CHECK_RC(write_u64(tips_insert, db, 0, 1), TIPS_EKEYEXISTS);
	char before[256];
	snprintf(before, sizeof(before), "%s", tips_errormsg());
	for (uint64_t i = 1; i < 500; i++)
		CHECK_RC(write_u64(tips_update, db, i, i + 1), 0);
	CHECK(strcmp(tips_errormsg(), before) == 0);
	if (strcmp(tips_errormsg(), before) != 0)
		fprintf(stderr, "message after the updates: \"%s\", before: \"%s\"\n",
			tips_errormsg(), before);
	CHECK_RC(tips_close(&db), 0);
	unlink(path);
}

/* Replay's batched logging (tips_index_ops.log_ahead): for an index that says which
 * ranges a write logs, replay logs the ranges of 8 records under one fence, and each
 * insert then finds its ranges logged (one or two each: at least 3000 in all, against
 * 78-1085 without the batches). 4000 scattered keys land mostly in distinct
 * places (buckets of a 4096-bucket tips-hash, nodes of tips-art), so without the
 * batches hardly any insert would find its ranges logged already; and the 8 records
 * of a batch seldom share a node, whose ranges the first insert would make stale. */
#define SCATTER(i) ((i) * 0x9e3779b97f4a7c15ull)
static void test_log_ahead(void)
{
	if (!ops->log_ahead)
		return;
	struct tips_db *db = open_db(1);
	struct tips_stats st0, st;
	tips_stats(db, &st0);
	for (uint64_t i = 0; i < 4000; i++)
		CHECK_RC(put_u64(db, SCATTER(i), i), 0);
	WAIT_UNTIL((tips_stats(db, &st), st.cache_unapplied == 0), "replay of the puts");
	uint64_t skipped = st.ulog_skipped_logged - st0.ulog_skipped_logged;
	if (skipped < 3000)
		fprintf(stderr, "log_ahead: 4000 inserts found %llu ranges logged\n",
			(unsigned long long)skipped);
	CHECK(skipped >= 3000);
	for (uint64_t i = 0; i < 4000; i++) {
		int rc;
		CHECK(get_u64(db, SCATTER(i), &rc) == i && rc == 0);
	}
	CHECK_RC(tips_close(&db), 0);
	unlink(path);
}

/* One hot key, two threads, values alternating between 8 and 16 bytes: every record
 * goes to one replay worker and costs it two MLog records (the hash replaces the node).
 * Epochs must bound each worker's queue, not only their sum, or the lane overflows. */
static void *hot_writer(void *arg)
{
	struct tips_db *db = arg;
	char val[16] = { 0 };
	for (int burst = 0; burst < 6; burst++) {
		for (int i = 0; i < 10000; i++)
			CHECK_RC(tips_put(db, "hot", 3, val, (i & 1) ? 8 : 16), 0);
		struct tips_stats st;
		/* let replay catch up, so the next burst starts a fresh epoch */
		WAIT_UNTIL((tips_stats(db, &st), st.cache_unapplied == 0), "replay to catch up");
	}
	return NULL;
}

static void test_hot_key(void)
{
	struct tips_db *db = open_db(2);
	pthread_t t[2];
	for (int i = 0; i < 2; i++)
		REQUIRE(pthread_create(&t[i], NULL, hot_writer, db) == 0);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	char val[16];
	size_t vlen;
	CHECK_RC(tips_get(db, "hot", 3, val, sizeof(val), &vlen), 0);
	CHECK(vlen == 8 || vlen == 16);
	CHECK_RC(tips_close(&db), 0);
	unlink(path);
}

static void count_problem(enum tips_block_problem what, const void *block, size_t size,
			  void *arg)
{
	unsigned *n = arg;
	n[what]++;
	(void)block;
	(void)size;
}

/* tips_db_check: consistent after writes, deletes and a reopen; a block allocated
 * behind the index's back is reported as leaked. */
static void test_db_check(void)
{
	struct tips_db *db = open_db(2);
	for (uint64_t i = 0; i < 3000; i++)
		CHECK_RC(put_u64(db, i, i), 0);
	for (uint64_t i = 0; i < 3000; i += 3) {
		unsigned char k[8];
		key_of(i, k);
		CHECK_RC(tips_remove(db, k, 8), 0);
	}
	CHECK_RC(tips_close(&db), 0);
	db = open_db(2);
	struct tips_db_report rep;
	unsigned problems[4] = { 0 };
	CHECK_RC(tips_db_check(db, count_problem, problems, &rep), 0);
	/* 2000 keys remain, but an index may hold 8-byte keys and values inline, in no block
	 * of their own (clht): owned == allocated is the check, the bound only a sanity one. */
	CHECK(rep.blocks_owned == rep.blocks_allocated && rep.blocks_owned >= 2);
	CHECK(rep.leaked == 0 && rep.free_but_owned == 0 && rep.owned_twice == 0);
	void *stray = NULL;
	struct tips_heap *heap = tips_pool_heap(tips_db_pool(db));
	CHECK_RC(tips_heap_alloc_logged(heap, 100, &stray), 0);
	CHECK_RC(tips_heap_checkpoint(heap, 0), 0);
	CHECK_RC(tips_db_check(db, count_problem, problems, &rep), TIPS_ECORRUPT);
	CHECK(rep.leaked == 1 && problems[TIPS_BLOCK_LEAKED] == 1);
	CHECK_RC(tips_close(&db), 0);
	unlink(path);
}

/* A log that does not fit the pool's log area is named as such (OLog or ULog, with the
 * sizes), not reported as a too-small log area. */
static void test_log_too_small(void)
{
	unlink(path);
	struct tips_config cfg;
	tips_config_init(&cfg);
	cfg.flags = TIPS_CREATE;
	cfg.pool_size = 16ull << 20; /* a 2 MiB log area: 128 KiB OLogs at most */
	struct tips_db *db = NULL;
	int rc = tips_open(path, &cfg, ops, &db);
	CHECK(rc == TIPS_ESIZE && db == NULL);
	CHECK(strstr(tips_errormsg(), "OLog of 131072 bytes is below the minimum") != NULL);
	unlink(path);
}

/* The ULog checksum: the standard check value, and the hardware path (if the CPU has
 * one) equal to the table on every length and alignment. */
static void test_crc32c(void)
{
	CHECK(fw_crc32c(0, "123456789", 9) == 0xe3069283u);
	CHECK(fw_crc32c_portable(0, "123456789", 9) == 0xe3069283u);
	unsigned char buf[160];
	uint64_t x = 0x9e3779b97f4a7c15ull;
	for (size_t i = 0; i < sizeof(buf); i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		buf[i] = (unsigned char)x;
	}
	unsigned differ = 0;
	for (size_t at = 0; at < 8; at++)
		for (size_t len = 0; len + at <= sizeof(buf); len++) {
			uint32_t seed = (uint32_t)(len * 2654435761u);
			differ += fw_crc32c(seed, buf + at, len) !=
				  fw_crc32c_portable(seed, buf + at, len);
			/* Chained in two parts = in one part. */
			differ += fw_crc32c(fw_crc32c(0, buf + at, len / 2), buf + at + len / 2,
					    len - len / 2) != fw_crc32c(0, buf + at, len);
		}
	CHECK(differ == 0);
	fprintf(stderr, "crc32c: %s\n", fw_crc32c_is_hardware() ? "sse4.2" : "table");
}

/* The ULog tests' setting: a fresh 16 MiB pool at @path + a suffix (its name in
 * `path`), a ring of ULOG_TEST_RING bytes at the start of its log area and, 128 KiB
 * further, the target bytes the tests log. */
#define ULOG_TEST_RING (64u << 10)
struct ulog_fixture {
	char path[300];
	struct tips_pool *pool;
	unsigned char *ring, *target;
};

static void ulog_fixture_open(struct ulog_fixture *fx, const char *suffix)
{
	snprintf(fx->path, sizeof(fx->path), "%s%s", path, suffix);
	unlink(fx->path);
	struct tips_pool_options po;
	tips_pool_options_init(&po);
	po.size = 16ull << 20;
	po.log_size = 2ull << 20;
	fx->pool = NULL;
	int prc = tips_pool_create(fx->path, &po, &fx->pool);
	if (prc)
		fprintf(stderr, "tips_pool_create: %s\n", tips_errormsg());
	REQUIRE(prc == 0);
	size_t log_size = 0;
	unsigned char *area = tips_pool_log_area(fx->pool, &log_size);
	REQUIRE(area && log_size >= (256u << 10));
	fx->ring = area;
	fx->target = area + (128u << 10);
}

static void ulog_fixture_close(struct ulog_fixture *fx)
{
	CHECK(tips_pool_close(&fx->pool) == 0);
	unlink(fx->path);
}

/* ULog groups: three ranges logged with one fence, then stored to. Intact: rollback
 * restores all three. The middle record torn (a crash before the group's fence):
 * rollback restores the first and stops, without calling the third, intact record of
 * the same group damage. The first of two separate groups damaged: TIPS_ECORRUPT. */
static void test_ulog_groups(void)
{
	struct ulog_fixture fx;
	ulog_fixture_open(&fx, ".ulog");
	struct tips_pool *pool = fx.pool;
	const uint64_t ring_size = ULOG_TEST_RING, gen = 7;
	unsigned char *ring = fx.ring, *target = fx.target;
	enum { N = 3, LEN = 16 };
	void *addr[N];
	size_t size[N];
	for (int i = 0; i < N; i++) {
		addr[i] = target + 64 * i;
		size[i] = LEN;
	}
	const uint64_t rec = sizeof(struct ulog_rec) + LEN; /* record i at rec * i */
	for (int round = 0; round < 3; round++) {
		memset(ring, 0, ring_size);
		for (int i = 0; i < N; i++)
			memset(addr[i], 'a' + i, LEN); /* old bytes */
		struct ulog *u = NULL;
		REQUIRE(ulog_new(ring, ring_size, gen, &u) == 0);
		if (round < 2) {
			CHECK(ulog_add_group(u, NULL, pool, addr, size, N) == 0);
			CHECK(ulog_used(u) == N * rec);
		} else {
			CHECK(ulog_add(u, NULL, pool, addr[0], LEN) == 0);
			CHECK(ulog_add(u, NULL, pool, addr[1], LEN) == 0);
		}
		/* Logged again in a group: already in this generation, no record. */
		CHECK(ulog_add_group(u, NULL, pool, addr, size, 2) == 0);
		CHECK(ulog_used(u) == (round < 2 ? N : 2) * rec);
		ulog_delete(u);
		for (int i = 0; i < N; i++)
			memset(addr[i], 'x', LEN); /* the stores */
		if (round == 1)
			ring[rec + sizeof(struct ulog_rec) + 3] ^= 0x10; /* record 1 torn */
		if (round == 2)
			ring[sizeof(struct ulog_rec) + 3] ^= 0x10; /* record 0, its own group */
		int rc = ulog_rollback(ring, ring_size, gen, pool);
		unsigned char want[LEN];
		if (round == 0) {
			CHECK(rc == 0);
			for (int i = 0; i < N; i++) {
				memset(want, 'a' + i, LEN);
				CHECK(memcmp(addr[i], want, LEN) == 0);
			}
		} else if (round == 1) {
			CHECK(rc == 0);
			memset(want, 'a', LEN);
			CHECK(memcmp(addr[0], want, LEN) == 0);
			memset(want, 'x', LEN);
			CHECK(memcmp(addr[1], want, LEN) == 0 && memcmp(addr[2], want, LEN) == 0);
		} else {
			CHECK(rc == TIPS_ECORRUPT);
		}
	}
	ulog_fixture_close(&fx);
}

/* ulog_log_ahead: a thread's later operations on the ranges it logged ahead take no
 * record, are counted as skipped by ulog_ahead_done, and only in that ULog and
 * generation: after ulog_reset, or in a new ULog of the same generation, they log
 * again. A batch that fails (a range outside the pool) keeps the ranges before it. */
static void test_ulog_log_ahead(void)
{
	struct ulog_fixture fx;
	ulog_fixture_open(&fx, ".ahead");
	struct tips_pool *pool = fx.pool;
	const uint64_t ring_size = ULOG_TEST_RING, gen = 9;
	unsigned char *ring = fx.ring, *target = fx.target;
	enum { LEN = 8 };
	const uint64_t rec = sizeof(struct ulog_rec) + LEN;
	void *addr[3] = { target, target + 64, target + 128 };
	size_t size[3] = { LEN, LEN, LEN };
	uint64_t bytes, logged, fresh, skipped;

	struct ulog *u = NULL;
	REQUIRE(ulog_new(ring, ring_size, gen, &u) == 0);
	CHECK(ulog_log_ahead(u, NULL, pool, addr, size, 2) == 0);
	CHECK(ulog_used(u) == 2 * rec);
	CHECK(ulog_add(u, NULL, pool, addr[1], LEN) == 0); /* logged ahead: no record */
	CHECK(ulog_add(u, NULL, pool, addr[0], LEN) == 0);
	CHECK(ulog_used(u) == 2 * rec);
	CHECK(ulog_add(u, NULL, pool, addr[2], LEN) == 0); /* not in the batch: a record */
	CHECK(ulog_used(u) == 3 * rec);
	ulog_ahead_done(u);
	ulog_counters(u, &bytes, &logged, &fresh, &skipped);
	CHECK(logged == 3 && skipped == 2);

	/* A failed batch (its second range is not in the pool) changes nothing. */
	void *bad[2] = { addr[2], &fx.path[0] };
	CHECK(ulog_log_ahead(u, NULL, pool, bad, size, 2) < 0);
	CHECK(ulog_add(u, NULL, pool, addr[0], LEN) == 0);
	CHECK(ulog_used(u) == 3 * rec);

	/* A new generation: the ranges are logged again. */
	ulog_reset(u, gen + 1);
	CHECK(ulog_add(u, NULL, pool, addr[0], LEN) == 0);
	CHECK(ulog_used(u) == rec);
	ulog_delete(u);

	/* A new ULog (the same generation, maybe the same address): logged again. */
	REQUIRE(ulog_new(ring, ring_size, gen, &u) == 0);
	CHECK(ulog_log_ahead(u, NULL, pool, addr, size, 1) == 0);
	ulog_delete(u);
	REQUIRE(ulog_new(ring, ring_size, gen, &u) == 0);
	CHECK(ulog_add(u, NULL, pool, addr[0], LEN) == 0);
	CHECK(ulog_used(u) == rec);
	ulog_delete(u);
	ulog_fixture_close(&fx);
}

/* An index of the caller's written to the plug-in contract before 0.4: found, longer
 * than the buffer, it returns 0 (tips_get then judges the length itself). */
static int lookup_returns_0(void *index, const void *key, size_t klen, void *val, size_t cap,
			    size_t *vlen)
{
	int rc = ops->lookup(index, key, klen, val, cap, vlen);
	return rc == TIPS_ESIZE ? 0 : rc;
}

/* One of the lengths checks of test_get_sizes. */
static void check_get(struct tips_db *db, const char *key, size_t cap, int want_rc,
		      const void *want, size_t want_len)
{
	unsigned char buf[128];
	memset(buf, 0xAA, sizeof(buf));
	size_t vl = 12345;
	CHECK_RC(tips_get(db, key, strlen(key), cap ? buf : NULL, cap, &vl), want_rc);
	if (want_rc == TIPS_ESIZE)
		CHECK(strstr(tips_errormsg(), "buffer") != NULL);
	if (want_rc == TIPS_ENOTFOUND)
		return;
	size_t copied = want_len < cap ? want_len : cap;
	CHECK(vl == want_len);
	CHECK(memcmp(buf, want, copied) == 0);
	CHECK(copied == sizeof(buf) || buf[copied] == 0xAA);
}

/*
 * tips_get's lengths on the fast path (replay has applied everything, or a reopen left
 * the cache empty: the index's lookup answers, and a built-in index reports TIPS_ESIZE
 * itself), for the index under test and for a copy of it that keeps the old contract;
 * and a conditional write judged through the index with no buffer (key_present) sees
 * a key whose value is longer than that.
 */
static void test_get_sizes(void)
{
	struct tips_index_ops mine = *ops;
	mine.name = "test-old-contract";
	mine.lookup = lookup_returns_0;
	unsigned char v100[100];
	for (int i = 0; i < 100; i++)
		v100[i] = (unsigned char)(i * 7 + 1);
	for (int pass = 0; pass < 2; pass++) {
		const struct tips_index_ops *o = pass ? &mine : ops;
		struct tips_db *db = open_db_with(o, 2);
		CHECK_RC(tips_put(db, "w8", 2, "12345678", 8), 0);
		CHECK_RC(tips_put(db, "w100", 4, v100, 100), 0);
		CHECK_RC(tips_put(db, "w0", 2, "", 0), 0);
		struct tips_stats st;
		WAIT_UNTIL((tips_stats(db, &st), st.cache_unapplied == 0), "replay of the puts");
		for (int reopened = 0; reopened < 2; reopened++) {
			check_get(db, "w8", 4, TIPS_ESIZE, "12345678", 8);
			check_get(db, "w8", 8, 0, "12345678", 8);
			check_get(db, "w8", 0, TIPS_ESIZE, "", 8);
			check_get(db, "w100", 99, TIPS_ESIZE, v100, 100);
			check_get(db, "w100", 100, 0, v100, 100);
			check_get(db, "w0", 0, 0, "", 0);
			check_get(db, "none", 8, TIPS_ENOTFOUND, "", 0);
			if (!reopened) {
				CHECK_RC(tips_close(&db), 0);
				db = open_db_with(o, 2);
			}
		}
		/* After the reopen the cache is empty: these conditions ask the index. */
		CHECK_RC(tips_insert(db, "w100", 4, "x", 1), TIPS_EKEYEXISTS);
		CHECK_RC(tips_insert(db, "w8", 2, "x", 1), TIPS_EKEYEXISTS);
		CHECK_RC(tips_update(db, "w0", 2, "y", 1), 0);
		check_get(db, "w100", 100, 0, v100, 100);
		check_get(db, "w0", 8, 0, "y", 1);
		/* The message of a short buffer is formatted when asked for; a later error
		 * replaces it, and it names the length and the buffer. */
		size_t vl;
		unsigned char small[3];
		CHECK_RC(tips_get(db, "w100", 4, small, sizeof(small), &vl), TIPS_ESIZE);
		CHECK_RC(tips_put(db, "w100", 0, "v", 1), TIPS_EINVAL);
		CHECK(strstr(tips_errormsg(), "buffer") == NULL);
		CHECK_RC(tips_get(db, "w100", 4, small, sizeof(small), &vl), TIPS_ESIZE);
		CHECK(strstr(tips_errormsg(), "the value has 100 bytes, the buffer 3") != NULL);
		CHECK_RC(tips_close(&db), 0);
		unlink(path);
	}
}

/* The pending filter's classes: a word and a bit in its sets. */
#define FILTER_CLASSES ((size_t)CACHE_PENDING_WORDS * CACHE_PENDING_SET_BITS)

/* Distinct pending-filter classes among @n keys made by @make. */
static size_t filter_classes(size_t n, size_t (*make)(uint64_t i, unsigned char *key))
{
	uint64_t *seen = calloc(FILTER_CLASSES / 64, sizeof(uint64_t));
	REQUIRE(seen != NULL);
	size_t distinct = 0;
	unsigned char key[64];
	for (uint64_t i = 0; i < n; i++) {
		size_t klen = make(i, key);
		uint64_t h = cache_filter_hash(key, klen);
		size_t c = (size_t)cache_pending_word(h) * CACHE_PENDING_SET_BITS +
			   cache_pending_bit(h);
		if (!(seen[c >> 6] & (1ull << (c & 63))))
			distinct++;
		seen[c >> 6] |= 1ull << (c & 63);
	}
	free(seen);
	return distinct;
}

static size_t key_be8(uint64_t i, unsigned char *k) { key_of(i, k); return 8; }
static size_t key_le8(uint64_t i, unsigned char *k) { memcpy(k, &i, 8); return 8; }
static size_t key_ascii(uint64_t i, unsigned char *k)
{
	return (size_t)snprintf((char *)k, 64, "user%llu", (unsigned long long)i);
}
static size_t key_middle24(uint64_t i, unsigned char *k) /* only bytes 8..15 vary */
{
	memset(k, 'p', 24);
	key_of(i, k + 8);
	return 24;
}
static size_t key_tail20(uint64_t i, unsigned char *k) /* a 12-byte prefix, then i */
{
	memset(k, 'q', 12);
	key_of(i, k + 12);
	return 20;
}
static size_t key_short(uint64_t i, unsigned char *k) /* 3..7 bytes, all distinct */
{
	size_t len = 3 + (size_t)(i % 5);
	for (size_t j = 0; j < len; j++)
		k[j] = (unsigned char)(i / 5 >> (8 * j));
	return len;
}

/* The filter test's key lengths: every one up to 80 bytes, then ten up to the most. */
static size_t next_len(size_t len)
{
	return len < 80 ? len + 1 : len < TIPS_MAX_KEY && len + 97 > TIPS_MAX_KEY ?
							TIPS_MAX_KEY : len + 97;
}

/*
 * The pending filter's hash (framework.h): spread, and marked and looked up alike.
 * Spread: 2^16 keys of each family must fill at least 90% of the classes that random
 * hashing would (a family folded onto a few classes sends every read of it through the
 * cache while any of its keys is unapplied). Agreement: with the index's writes held,
 * keys of the lengths of next_len(), overwritten, new or removed, must read back their
 * new state, which only the cache holds: a reader whose hash differed from the
 * writer's would read the index's old value or none. (The held index is a wrapper, not
 * one of libtips' own, so these gets take get_slow; tips_get's inline check is the
 * same index_answers.)
 */
static void test_filter_hash(void)
{
	const size_t n = 1u << 16;
	double bins = (double)FILTER_CLASSES;
	/* Random hashing of n = bins / 6 keys fills bins * (1 - e^(-1/6)) classes. */
	_Static_assert((1u << 16) * 6 == FILTER_CLASSES, "n = bins / 6");
	double random_fill = bins * 0.15351827510938587;
	size_t (*families[])(uint64_t, unsigned char *) = { key_be8, key_le8, key_ascii,
							     key_middle24, key_tail20, key_short };
	for (size_t f = 0; f < sizeof(families) / sizeof(families[0]); f++) {
		size_t got = filter_classes(n, families[f]);
		if (!(got >= 0.9 * random_fill))
			fprintf(stderr, "family %zu: %zu classes, random hashing fills %.0f\n", f,
				got, random_fill);
		CHECK(got >= 0.9 * random_fill);
	}

	struct tips_index_ops wrapped;
	struct tips_db *db = open_db_held(&wrapped);
	static unsigned char key[TIPS_MAX_KEY];
	for (size_t len = 1; len <= TIPS_MAX_KEY; len = next_len(len)) {
		memset(key, (int)('a' + len % 26), len);
		uint64_t v = len << 8 | 1;
		CHECK_RC(tips_put(db, key, len, &v, 8), 0);
		key[0] ^= 0x80; /* removed below */
		CHECK_RC(tips_put(db, key, len, &v, 8), 0);
	}
	struct tips_stats st;
	WAIT_UNTIL((tips_stats(db, &st), st.cache_unapplied == 0), "replay of the load");
	held_set(true);
	for (size_t len = 1; len <= TIPS_MAX_KEY; len = next_len(len)) {
		memset(key, (int)('a' + len % 26), len);
		uint64_t v = len << 8 | 2, fresh = len << 8 | 3, got = 0;
		size_t vl = 0;
		CHECK_RC(tips_put(db, key, len, &v, 8), 0); /* overwrites the applied value */
		key[len - 1] ^= 0x80;                       /* a key never written before */
		CHECK_RC(tips_put(db, key, len, &fresh, 8), 0);
		CHECK_RC(tips_get(db, key, len, &got, 8, &vl), 0);
		CHECK(vl == 8 && got == fresh);
		key[len - 1] ^= 0x80;
		CHECK_RC(tips_get(db, key, len, &got, 8, &vl), 0);
		CHECK(vl == 8 && got == v);
		key[0] ^= 0x80;
		CHECK_RC(tips_remove(db, key, len), 0);
		CHECK_RC(tips_get(db, key, len, &got, 8, &vl), TIPS_ENOTFOUND);
	}
	tips_stats(db, &st);
	CHECK(st.cache_unapplied > 0); /* the reads above could only be answered by the cache */
	held_set(false);
	WAIT_UNTIL((tips_stats(db, &st), st.cache_unapplied == 0), "replay of the held writes");
	CHECK_RC(tips_close(&db), 0);
	unlink(path);
}

/* The pending filter's hash of the 8-byte key of @k (key_of). */
static uint64_t key_filter_hash(uint64_t k)
{
	unsigned char key[8];
	key_of(k, key);
	return cache_filter_hash(key, 8);
}

/* The filter word of key @k, read from @c's filter (test_filter_generations). */
static uint64_t filter_word_of(struct cache *c, uint64_t k)
{
	const struct cache_unapplied_line *u = (const struct cache_unapplied_line *)c;
	return atomic_load(&u->pending[cache_pending_word(key_filter_hash(k))]);
}

static bool key_may_be_pending(struct cache *c, uint64_t k)
{
	return cache_may_be_pending(c, key_filter_hash(k));
}

static unsigned key_filter_bit(uint64_t k)
{
	return cache_pending_bit(key_filter_hash(k));
}

/* Counts and marks a write of key @k, as write_op does; returns its generation. */
static uint64_t count_and_mark(struct cache *c, uint64_t k)
{
	uint64_t gen = cache_count_unapplied(c, 1);
	cache_mark_pending(c, gen, key_filter_hash(k));
	return gen;
}

/*
 * The pending filter's generations (framework.h, cache.c "Pending filter"), step by
 * step on a cache of its own, with keys that share one filter word: a write stays
 * marked while it is unapplied, whichever newer writer retags its word and whichever
 * generation a reader read, and no longer marked once applied and the generation is
 * two past its own.
 * The reader's rule is checked on its own too, for a reader whose generation is one
 * behind the word's tag (a flip and a retag between its two loads).
 */
static void test_filter_generations(void)
{
	/* Five keys in key 0's word, on five different bits. */
	uint64_t k[5] = { 0 };
	size_t found = 1;
	for (uint64_t i = 1; found < 5 && i < 100000000; i++) {
		if (cache_pending_word(key_filter_hash(0)) != cache_pending_word(key_filter_hash(i)))
			continue;
		bool clash = false;
		for (size_t j = 0; j < found; j++)
			clash |= key_filter_bit(k[j]) == key_filter_bit(i);
		if (!clash)
			k[found++] = i;
	}
	REQUIRE(found == 5);

	struct cache *c = NULL;
	CHECK_RC(cache_new(1024, 8, &c), 0);
	REQUIRE(c != NULL);
	for (size_t j = 0; j < 5; j++)
		CHECK(!key_may_be_pending(c, k[j]));
	const uint64_t one[2][2] = { { 1, 0 }, { 0, 1 } }; /* one entry applied, per slot */

	CHECK(count_and_mark(c, k[0]) == 0);
	CHECK(key_may_be_pending(c, k[0]) && !key_may_be_pending(c, k[1]));
	cache_pending_flip(c); /* slot 1 is empty: generation 1 */
	CHECK(key_may_be_pending(c, k[0])); /* tag 0, read in 1: the first set */
	CHECK(count_and_mark(c, k[1]) == 1); /* retags to 1: k0 moves to the second set */
	CHECK(key_may_be_pending(c, k[0]) && key_may_be_pending(c, k[1]));
	cache_pending_flip(c); /* k0 is unapplied in slot 0: no flip */
	CHECK(count_and_mark(c, k[2]) == 1);
	CHECK(key_may_be_pending(c, k[0]) && key_may_be_pending(c, k[2]));

	cache_applied(c, one[0]); /* k0 */
	cache_pending_flip(c);    /* generation 2 */
	CHECK(!key_may_be_pending(c, k[0])); /* tag 1 read in 2: its second set is done */
	CHECK(key_may_be_pending(c, k[1]) && key_may_be_pending(c, k[2]));

	/* A writer counted in 1 that marks after a writer of 2 retagged: the second set. */
	CHECK(count_and_mark(c, k[3]) == 2); /* retag to 2: k1, k2 to the second set */
	struct cache_unapplied_line *u = (struct cache_unapplied_line *)c;
	atomic_fetch_add(&u->unapplied[1], 1); /* k4, counted in 1 before the flip */
	cache_mark_pending(c, 1, key_filter_hash(k[4]));
	uint64_t w = filter_word_of(c, k[4]);
	CHECK(w >> CACHE_PENDING_TAG_SHIFT == 2);
	CHECK((w >> (CACHE_PENDING_SET_BITS + key_filter_bit(k[4]))) & 1);
	for (size_t j = 1; j < 5; j++)
		CHECK(key_may_be_pending(c, k[j]));

	/* A reader that read generation 2 before the flip to 3 and a retag to 3. */
	cache_applied(c, one[1]); /* k1 */
	cache_applied(c, one[1]); /* k2 */
	cache_applied(c, one[1]); /* k4 */
	cache_pending_flip(c);    /* generation 3 */
	CHECK(count_and_mark(c, k[1]) == 3); /* retag to 3: k3 (generation 2) to the second */
	w = filter_word_of(c, k[3]);
	CHECK(cache_pending_in_word(w, 2, key_filter_bit(k[3]))); /* tag 3 read in 2 */
	CHECK(cache_pending_in_word(w, 3, key_filter_bit(k[3])));
	CHECK(!cache_pending_in_word(w, 4, key_filter_bit(k[3]))); /* k3 applied by then */
	CHECK(cache_pending_in_word(w, 4, key_filter_bit(k[1])));
	CHECK(!cache_pending_in_word(w, 5, key_filter_bit(k[1])));
	CHECK(!key_may_be_pending(c, k[2]) && !key_may_be_pending(c, k[4]));

	/* Tags are 16 bits: generation 2^16 + 3 reads a tag of 3 as recent (needlessly). */
	CHECK(cache_pending_in_word(w, ((uint64_t)1 << 16) + 3, key_filter_bit(k[1])));
	cache_delete(c);
}

int main(int argc, char **argv)
{
	const char *name = argc > 1 ? argv[1] : "tips-hash";
	ops = tips_index_find(name);
	if (!ops)
		fprintf(stderr, "no index named %s\n", name);
	REQUIRE(ops != NULL);
	test_path(path, sizeof(path), "/dev/shm", "framework");
	if (argc > 2 && strcmp(argv[2], "msync") == 0) {
		test_values_on_msync_media();
		return test_finish("test_framework msync");
	}
	test_semantics();
	test_get_sizes();
	test_fences();
	test_scan();
	test_scan_overlay_bound();
	test_scan_stream();
	test_scan_view();
	test_thread_slots();
	test_reclaim_and_ulog();
	test_ulog_length_changes();
	test_ulog_in_place_16();
	test_reclaim_grace();
	test_stats_after_load();
	test_applied_leave_cache();
	test_errormsg_survives_writes();
	test_log_ahead();
	test_db_check();
	test_hot_key();
	test_log_too_small();
	test_crc32c();
	test_ulog_groups();
	test_ulog_log_ahead();
	test_filter_hash();
	test_filter_generations();
	return test_finish("test_framework");
}
