/*
 * keyspace_test.c - the keyspace of tips-server (src/server/keyspace.h) on a real pool:
 * transactions (reads see their own writes, nothing reaches the store before commit,
 * abort leaves nothing), member scans merging the buffered writes, generations and
 * garbage (DEL of a collection is one meta delete; the sweeper removes the members),
 * RENAME moving only the meta record, expiry (lazy), FLUSHDB, long strings inline, in
 * pieces and staged beyond one batch, and the counts after a reopen.
 *   keyspace_test INDEX
 */
#include "keyspace.h"
#include "test_util.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

static int64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static struct ks_db *open_db(const char *path, const char *index)
{
	struct ks_options o = {path, index, 128ull << 20, 50};
	struct ks_db *db = NULL;
	char err[512];
	int rc = ks_db_open(&o, &db, err, sizeof(err));
	if (rc)
		fprintf(stderr, "ks_db_open: %s\n", err);
	REQUIRE(rc == 0);
	return db;
}

struct collect {
	char out[4096];
	size_t len;
	int n;
};

static int collect_member(const void *s, size_t sl, const void *v, size_t vl, void *arg)
{
	struct collect *c = arg;
	c->len += (size_t)snprintf(c->out + c->len, sizeof(c->out) - c->len, "%.*s=%.*s,",
				   (int)sl, (const char *)s, (int)vl, (const char *)v);
	c->n++;
	return 0;
}

/* A hash of @n fields f000.. under a new generation, committed. */
static uint64_t make_hash(struct ks_db *db, struct ks_txn *t, const char *key, int n)
{
	ks_txn_begin(t, now_ms());
	struct ks_meta m = {.type = KS_HASH};
	m.gen = ks_new_gen(t);
	CHECK(m.gen > 0);
	for (int i = 0; i < n; i++) {
		char f[16];
		int fl = snprintf(f, sizeof(f), "f%03d", i);
		struct ks_key k;
		CHECK_RC(ks_member_key(&k, m.gen, f, (size_t)fl, NULL, 0), 0);
		CHECK_RC(ks_put(t, &k, "v", 1), 0);
	}
	m.hdr[0] = (uint64_t)n;
	CHECK_RC(ks_write_meta(t, key, strlen(key), &m), 0);
	CHECK_RC(ks_txn_commit(t), 0);
	(void)db;
	return m.gen;
}

static long count_members(struct ks_txn *t, uint64_t gen)
{
	struct collect c = {{0}, 0, 0};
	return ks_scan_members(t, gen, NULL, 0, SIZE_MAX, collect_member, &c);
}

int main(int argc, char **argv)
{
	const char *index = argc > 1 ? argv[1] : "tips-art";
	char path[256];
	snprintf(path, sizeof(path), "/dev/shm/tips-keyspace-test-%d.pool", (int)getpid());
	unlink(path);
	struct ks_db *db = open_db(path, index);
	struct ks_txn *t = NULL;
	REQUIRE(ks_txn_new(db, &t) == 0);
	int ordered = ks_db_ordered(db);
	struct ks_meta m;
	struct ks_stats st;

	/* strings: a write is seen by its own txn, by nobody before commit; abort drops it */
	ks_txn_begin(t, now_ms());
	CHECK_RC(ks_string_set(t, "k", 1, "v1", 2, 0), 0);
	CHECK(ks_lookup(t, "k", 1, &m) == 1 && m.str_len == 2 && !memcmp(m.str, "v1", 2));
	ks_txn_abort(t);
	ks_txn_begin(t, now_ms());
	CHECK(ks_lookup(t, "k", 1, &m) == 0);
	CHECK_RC(ks_string_set(t, "k", 1, "v2", 2, 0), 0);
	CHECK_RC(ks_txn_commit(t), 0);
	ks_txn_begin(t, now_ms());
	CHECK(ks_lookup(t, "k", 1, &m) == 1 && m.type == KS_STRING && !memcmp(m.str, "v2", 2));
	ks_txn_abort(t);

	/* a hash; member scans merge the txn's own writes, in order */
	uint64_t gen = make_hash(db, t, "h", 5);
	ks_txn_begin(t, now_ms());
	struct ks_key k;
	ks_member_key(&k, gen, "f001", 4, NULL, 0);
	CHECK_RC(ks_del(t, &k), 0);
	ks_member_key(&k, gen, "f0025", 5, NULL, 0);
	CHECK_RC(ks_put(t, &k, "new", 3), 0);
	ks_member_key(&k, gen, "f003", 4, NULL, 0);
	CHECK_RC(ks_put(t, &k, "upd", 3), 0);
	char buf[16];
	size_t vlen = 0;
	CHECK(ks_get(t, &k, buf, sizeof(buf), &vlen) == 1 && vlen == 3 && !memcmp(buf, "upd", 3));
	CHECK(ks_get(t, &k, NULL, 0, &vlen) == 1 && vlen == 3); /* presence only */
	struct collect c = {{0}, 0, 0};
	long n = ks_scan_members(t, gen, "f002", 4, 3, collect_member, &c);
	if (ordered) {
		CHECK(n == 3);
		CHECK(!strcmp(c.out, "f002=v,f0025=new,f003=upd,"));
		memset(&c, 0, sizeof(c));
		CHECK(ks_scan_members(t, gen, NULL, 0, SIZE_MAX, collect_member, &c) == 5);
		CHECK(!strcmp(c.out, "f000=v,f002=v,f0025=new,f003=upd,f004=v,"));
	} else {
		CHECK(n == KS_EUNORDERED && ks_txn_error(t) == KS_EUNORDERED);
	}
	ks_txn_abort(t);

	/* RENAME moves the meta record only; the members stay under their generation */
	ks_txn_begin(t, now_ms());
	CHECK(ks_rename(t, "h", 1, "h2", 2) == 1);
	CHECK_RC(ks_txn_commit(t), 0);
	ks_txn_begin(t, now_ms());
	CHECK(ks_lookup(t, "h", 1, NULL) == 0);
	CHECK(ks_lookup(t, "h2", 2, &m) == 1 && m.gen == gen && m.hdr[0] == 5);
	if (ordered)
		CHECK(count_members(t, gen) == 5);
	/* DEL of the collection: one meta delete; the sweeper removes the members */
	CHECK(ks_delete_key(t, "h2", 2) == 1);
	CHECK(ks_txn_writes(t) == 2); /* the meta record and one garbage record */
	CHECK_RC(ks_txn_commit(t), 0);
	int swept = 0;
	for (int i = 0; i < 200 && !swept; i++) {
		ks_db_stats(db, &st);
		swept = st.swept_members >= 5;
		if (!swept)
			usleep(20000); /* the sweeper runs 50 rounds a second here */
	}
	CHECK(swept);
	if (ordered) {
		ks_txn_begin(t, now_ms());
		CHECK(count_members(t, gen) == 0);
		ks_txn_abort(t);
	}

	/* expiry: an expired key is absent, deleted lazily, counted. The sweeper deletes
	 * expired keys too, under the key's lock; so "e" is written and looked up under
	 * its lock, as keyspace.h asks of every caller. Without it the sweeper may delete
	 * "e" first (a 200 ms pause before the lookup fails the write count 3 runs in 3)
	 * or as well (counted twice: the key counts below failed once under scripts/test.sh). */
	struct lockset e_lock;
	lockset_clear(&e_lock);
	lockset_add(&e_lock, "e", 1);
	locks_acquire(ks_db_locks(db), &e_lock, 0);
	ks_txn_begin(t, now_ms());
	CHECK_RC(ks_string_set(t, "e", 1, "x", 1, now_ms() - 1), 0);
	CHECK_RC(ks_txn_commit(t), 0);
	ks_txn_begin(t, now_ms());
	CHECK(ks_lookup(t, "e", 1, NULL) == 0);
	CHECK(ks_txn_writes(t) == 1);
	CHECK_RC(ks_txn_commit(t), 0);
	locks_release(ks_db_locks(db), &e_lock);

	/* long strings: inline, pieces in the batch, pieces staged beyond one batch */
	size_t sizes[] = {KS_MAX_INLINE, KS_MAX_INLINE + 1, 300000, 0};
	ks_db_max_txn(db, NULL, &vlen);
	sizes[3] = vlen + 3 * KS_PIECE_SIZE + 7; /* more than one batch holds */
	for (size_t i = 0; i < 4; i++) {
		char *v = malloc(sizes[i]);
		REQUIRE(v);
		for (size_t j = 0; j < sizes[i]; j++)
			v[j] = (char)('a' + (j * 7 + i) % 26);
		ks_txn_begin(t, now_ms());
		CHECK_RC(ks_string_set(t, "long", 4, v, sizes[i], 0), 0);
		CHECK_RC(ks_txn_commit(t), 0);
		ks_txn_begin(t, now_ms());
		const char *got;
		size_t gl;
		CHECK(ks_lookup(t, "long", 4, &m) == 1);
		CHECK_RC(ks_string_get(t, &m, &got, &gl), 0);
		CHECK(gl == sizes[i] && !memcmp(got, v, gl));
		ks_txn_abort(t);
		/* a staged string whose txn aborts never appears */
		ks_txn_begin(t, now_ms());
		CHECK_RC(ks_string_set(t, "never", 5, v, sizes[i], 0), 0);
		ks_txn_abort(t);
		ks_txn_begin(t, now_ms());
		CHECK(ks_lookup(t, "never", 5, NULL) == 0);
		ks_txn_abort(t);
		free(v);
	}

	/* counts survive a reopen; FLUSHDB empties at once */
	ks_db_stats(db, &st);
	CHECK(st.keys == 2); /* k, long */
	ks_txn_free(&t);
	CHECK_RC(ks_db_close(&db), 0);
	db = open_db(path, index);
	REQUIRE(ks_txn_new(db, &t) == 0);
	ks_db_stats(db, &st);
	CHECK(st.keys == 2);
	ks_txn_begin(t, now_ms());
	CHECK_RC(ks_flush(t), 0);
	CHECK(ks_lookup(t, "k", 1, NULL) == 0);
	CHECK_RC(ks_txn_commit(t), 0);
	ks_db_stats(db, &st);
	CHECK(st.keys == 0);

	/* the counts are durable records, one per transaction (shard): two transactions'
	 * changes in the new generation survive a reopen, without a scan */
	struct ks_txn *t2;
	REQUIRE(ks_txn_new(db, &t2) == 0);
	ks_txn_begin(t, now_ms());
	CHECK_RC(ks_string_set(t, "a", 1, "1", 1, 0), 0);
	CHECK_RC(ks_string_set(t, "b", 1, "1", 1, 0), 0);
	CHECK_RC(ks_txn_commit(t), 0);
	ks_txn_begin(t2, now_ms());
	CHECK_RC(ks_string_set(t2, "c", 1, "1", 1, 0), 0);
	CHECK_RC(ks_txn_commit(t2), 0);
	ks_txn_begin(t2, now_ms());
	CHECK(ks_delete_key(t2, "a", 1) >= 0);
	CHECK_RC(ks_txn_commit(t2), 0);
	ks_txn_free(&t2);
	ks_txn_free(&t);
	CHECK_RC(ks_db_close(&db), 0);
	db = open_db(path, index);
	ks_db_stats(db, &st);
	CHECK(st.keys == 2);
	CHECK(st.start_scan_ms < 1000); /* point lookups, no scan */
	CHECK_RC(ks_db_close(&db), 0);
	unlink(path);
	return test_finish("keyspace_test");
}
