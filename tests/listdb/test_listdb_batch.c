/*
 * test_listdb_batch.c - ListDB write batches (tips_listdb_batch_commit(), tips/batch.h).
 * What must hold: a committed batch is all or nothing, now and after any crash.
 *
 *   api         the contract case by case: empty batch (success, no fence), NULL
 *               arguments, past the limits (TIPS_ETOOBIG at once, nothing applied), a
 *               bad add in the middle (nothing applied, failed_op), last write wins,
 *               conditions that pass and fail (nothing applied, the earliest failing
 *               operation named), a batch reused after tips_batch_clear(), reopen
 *   fences      exactly one fence per batch of 1, 4, 16 and 64 operations (the
 *               calling thread's tips_pm_counters), against one per single put; the
 *               puts per second of each size (printed, not checked)
 *   concurrent  2 writers commit batches writing one marker to all their keys (plus
 *               conditional updates of shared keys, in random order: lock order) while
 *               2 readers check that each key's marker only moves forward and is never
 *               older than the writer's last acknowledged batch; MemTables of 256
 *               entries, so flushes and compactions run meanwhile
 *   crash       a forked child commits batches on SIM media (simulated power failure
 *               at a random persist event, dirty lines evicted at random) with 64-entry
 *               MemTables, so crashes land in commits, flushes, compactions and chunk
 *               reclamation; then 10 children killed with SIGKILL on ordinary media.
 *               After recovery every key holds exactly what the acknowledged batches
 *               left, and the batch in flight is wholly there or wholly absent
 * Usage: test_listdb_batch [api|fences|concurrent|crash] [--seed N] [--rounds N]
 */
#define _GNU_SOURCE
#include "listdb_test.h"
#include "util/kv.h" /* mix64 */

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <tips/batch.h>
#include <tips/listdb.h>
#include <tips/pool.h>

static uint64_t seed;

static struct tips_listdb *open_db(const char *path, uint64_t memtable,
				   const struct tips_pool_options *popts)
{
	struct tips_listdb_config cfg;
	tips_listdb_config_init(&cfg);
	cfg.flags = TIPS_LISTDB_CREATE;
	cfg.pool_size = 64ull << 20;
	cfg.expected_keys = 1u << 14;
	if (memtable)
		cfg.memtable_entries = memtable;
	cfg.pool = popts;
	struct tips_listdb *db = NULL;
	REQUIRE_RC(tips_listdb_open(path, &cfg, &db), 0);
	return db;
}

static void check_db(struct tips_listdb *db, const char *what)
{
	struct tips_listdb_report rep;
	if (tips_listdb_check(db, &rep)) {
		fprintf(stderr, "%s: tips_listdb_check: %s\n", what, tips_errormsg());
		test_failures++;
	}
}

static uint64_t fences_now(void)
{
	struct tips_pm_counters c;
	tips_pm_counters_thread(&c);
	return c.fences;
}

/* The value of @key as a string in @out (NULL: absent; "?": another error). */
static const char *get_str(struct tips_listdb *db, const char *key, char *out, size_t cap)
{
	size_t vl = 0;
	int rc = tips_listdb_get(db, key, strlen(key), out, cap - 1, &vl);
	if (rc == TIPS_ENOTFOUND)
		return NULL;
	if (rc)
		return "?";
	out[vl] = 0;
	return out;
}

/* Checks that @key holds @want (NULL: absent). */
#define CHECK_VAL(db, key, want)                                                         \
	do {                                                                             \
		char b_[256];                                                            \
		const char *got_ = get_str(db, key, b_, sizeof(b_));                     \
		const char *w_ = (want);                                                 \
		if (!(got_ == w_ || (got_ && w_ && strcmp(got_, w_) == 0))) {            \
			fprintf(stderr, "%s:%d: key %s holds %s, wanted %s [%s]\n",      \
				__FILE__, __LINE__, key, got_ ? got_ : "(absent)",       \
				w_ ? w_ : "(absent)", ld_phase);                         \
			test_failures++;                                                 \
		}                                                                        \
	} while (0)

static int put_s(struct tips_batch *b, const char *k, const char *v)
{
	return tips_batch_put(b, k, strlen(k), v, strlen(v));
}

/* ---- api ------------------------------------------------------------------------------ */

static void api_limits(struct tips_listdb *db, struct tips_batch *b)
{
	ld_phase = "api: limits";
	size_t max_ops = 0, max_bytes = 0;
	tips_listdb_batch_limit(db, &max_ops, &max_bytes);
	CHECK(max_ops == 64); /* the MemTable's entries */
	CHECK(max_bytes > 1000000 && max_bytes < (1u << 20));
	tips_listdb_batch_limit(db, NULL, NULL);
	char k[32];
	for (size_t i = 0; i <= max_ops; i++) {
		snprintf(k, sizeof(k), "big%03zu", i);
		REQUIRE_RC(put_s(b, k, "v"), 0);
	}
	uint64_t f0 = fences_now();
	CHECK_RC(tips_listdb_batch_commit(db, b), TIPS_ETOOBIG);
	CHECK(fences_now() == f0);
	CHECK_VAL(db, "big000", NULL);
	tips_batch_clear(b);
	static unsigned char v[TIPS_MAX_VALUE];
	memset(v, 'x', sizeof(v));
	for (size_t i = 0; i * TIPS_MAX_VALUE <= max_bytes; i++) {
		snprintf(k, sizeof(k), "huge%03zu", i);
		REQUIRE_RC(tips_batch_put(b, k, strlen(k), v, sizeof(v)), 0);
	}
	CHECK_RC(tips_listdb_batch_commit(db, b), TIPS_ETOOBIG);
	CHECK(fences_now() == f0);
	CHECK_VAL(db, "huge000", NULL);
	tips_batch_clear(b);
	/* Just under the byte limit: accepted. */
	for (size_t i = 0; (i + 1) * (TIPS_MAX_VALUE + 256) < max_bytes; i++) {
		snprintf(k, sizeof(k), "huge%03zu", i);
		REQUIRE_RC(tips_batch_put(b, k, strlen(k), v, sizeof(v)), 0);
	}
	CHECK_RC(tips_listdb_batch_commit(db, b), 0);
	size_t vl = 0;
	CHECK_RC(tips_listdb_get(db, "huge000", 7, v, sizeof(v), &vl), 0);
	CHECK(vl == sizeof(v));
	tips_batch_clear(b);
}

static void api_basics(struct tips_listdb *db, struct tips_batch *b)
{
	ld_phase = "api: empty, NULL, bad add";
	uint64_t f0 = fences_now();
	CHECK_RC(tips_listdb_batch_commit(db, b), 0); /* empty */
	CHECK(fences_now() == f0);
	CHECK_RC(tips_listdb_batch_commit(NULL, b), TIPS_EINVAL);
	CHECK_RC(tips_listdb_batch_commit(db, NULL), TIPS_EINVAL);
	REQUIRE_RC(put_s(b, "a", "1"), 0);
	CHECK_RC(tips_batch_put(b, "", 0, "2", 1), TIPS_EINVAL);
	REQUIRE_RC(put_s(b, "c", "3"), 0);
	CHECK_RC(tips_listdb_batch_commit(db, b), TIPS_EINVAL);
	CHECK(tips_batch_failed_op(b) == 1);
	CHECK_RC(tips_listdb_batch_commit(db, b), TIPS_EINVAL); /* still poisoned */
	CHECK_VAL(db, "a", NULL);
	CHECK_VAL(db, "c", NULL);
	tips_batch_clear(b);
	ld_phase = "api: reuse, last write wins";
	REQUIRE_RC(put_s(b, "a", "1"), 0);
	CHECK_RC(tips_listdb_batch_commit(db, b), 0);
	CHECK(tips_batch_failed_op(b) == SIZE_MAX);
	CHECK_VAL(db, "a", "1");
	tips_batch_clear(b);
	REQUIRE_RC(put_s(b, "d", "old"), 0);
	REQUIRE_RC(put_s(b, "e", "x"), 0);
	REQUIRE_RC(put_s(b, "d", "new"), 0);
	REQUIRE_RC(tips_batch_delete(b, "e", 1), 0);
	REQUIRE_RC(tips_batch_delete(b, "f", 1), 0);
	REQUIRE_RC(put_s(b, "f", "back"), 0);
	REQUIRE_RC(tips_batch_delete(b, "a", 1), 0);
	CHECK_RC(tips_listdb_batch_commit(db, b), 0);
	CHECK_VAL(db, "d", "new");
	CHECK_VAL(db, "e", NULL);
	CHECK_VAL(db, "f", "back");
	CHECK_VAL(db, "a", NULL);
	CHECK_RC(tips_listdb_batch_commit(db, b), 0); /* the same batch again */
	CHECK_VAL(db, "d", "new");
	tips_batch_clear(b);
}

/* Commits @b expecting @want and failed_op @op; then nothing of @b may be applied:
 * @probe (a key the batch puts) stays absent. */
static void expect_fail(struct tips_listdb *db, struct tips_batch *b, int want, size_t op,
			const char *probe)
{
	CHECK_RC(tips_listdb_batch_commit(db, b), want);
	CHECK(tips_batch_failed_op(b) == op);
	CHECK_VAL(db, probe, NULL);
	tips_batch_clear(b);
}

static void api_conditions(struct tips_listdb *db, struct tips_batch *b)
{
	ld_phase = "api: conditions";
	REQUIRE_RC(tips_listdb_put(db, "p", 1, "present", 7), 0);
	REQUIRE_RC(put_s(b, "n1", "x"), 0);
	REQUIRE_RC(tips_batch_insert(b, "p", 1, "y", 1), 0);
	expect_fail(db, b, TIPS_EKEYEXISTS, 1, "n1");
	REQUIRE_RC(put_s(b, "n1", "x"), 0);
	REQUIRE_RC(tips_batch_update(b, "q", 1, "y", 1), 0);
	expect_fail(db, b, TIPS_ENOTFOUND, 1, "n1");
	REQUIRE_RC(tips_batch_remove(b, "q", 1), 0);
	REQUIRE_RC(put_s(b, "n1", "x"), 0);
	expect_fail(db, b, TIPS_ENOTFOUND, 0, "n1");
	/* Judged against the batch's earlier operations. */
	REQUIRE_RC(tips_batch_insert(b, "n2", 2, "y", 1), 0);
	REQUIRE_RC(put_s(b, "n1", "x"), 0);
	REQUIRE_RC(tips_batch_insert(b, "n2", 2, "z", 1), 0);
	expect_fail(db, b, TIPS_EKEYEXISTS, 2, "n1");
	REQUIRE_RC(tips_batch_remove(b, "p", 1), 0);
	REQUIRE_RC(tips_batch_update(b, "p", 1, "z", 1), 0);
	REQUIRE_RC(put_s(b, "n1", "x"), 0);
	expect_fail(db, b, TIPS_ENOTFOUND, 1, "n1");
	CHECK_VAL(db, "p", "present");
	/* Two failures: the earliest operation is named, not the smallest key. */
	REQUIRE_RC(put_s(b, "n1", "x"), 0);
	REQUIRE_RC(tips_batch_update(b, "zz", 2, "y", 1), 0);
	REQUIRE_RC(tips_batch_insert(b, "p", 1, "y", 1), 0);
	expect_fail(db, b, TIPS_ENOTFOUND, 1, "n1");
	/* Conditions that pass. */
	REQUIRE_RC(tips_batch_insert(b, "n2", 2, "i", 1), 0);
	REQUIRE_RC(tips_batch_update(b, "n2", 2, "u", 1), 0);
	REQUIRE_RC(tips_batch_remove(b, "p", 1), 0);
	REQUIRE_RC(tips_batch_insert(b, "p", 1, "again", 5), 0);
	REQUIRE_RC(tips_batch_update(b, "d", 1, "upd", 3), 0);
	REQUIRE_RC(tips_batch_insert(b, "n3", 2, "gone", 4), 0);
	REQUIRE_RC(tips_batch_remove(b, "n3", 2), 0);
	CHECK_RC(tips_listdb_batch_commit(db, b), 0);
	CHECK(tips_batch_failed_op(b) == SIZE_MAX);
	CHECK_VAL(db, "n2", "u");
	CHECK_VAL(db, "p", "again");
	CHECK_VAL(db, "d", "upd");
	CHECK_VAL(db, "n3", NULL);
	tips_batch_clear(b);
}

static void test_api(void)
{
	char path[256];
	ld_path(path, sizeof(path));
	struct tips_listdb *db = open_db(path, 64, NULL);
	struct tips_batch *b = NULL;
	REQUIRE_RC(tips_batch_new(&b), 0);
	api_basics(db, b);
	api_conditions(db, b);
	api_limits(db, b);
	ld_phase = "api: reopen";
	CHECK_RC(tips_listdb_close(&db), 0);
	db = open_db(path, 64, NULL);
	CHECK_VAL(db, "d", "upd");
	CHECK_VAL(db, "f", "back");
	CHECK_VAL(db, "n2", "u");
	CHECK_VAL(db, "p", "again");
	CHECK_VAL(db, "a", NULL);
	check_db(db, "api");
	CHECK_RC(tips_listdb_close(&db), 0);
	tips_batch_free(&b);
	tips_listdb_destroy(path);
}

/* ---- fences ----------------------------------------------------------------------------- */

static void test_fences(void)
{
	ld_phase = "fences";
	char path[256], k[32];
	ld_path(path, sizeof(path));
	struct tips_listdb *db = open_db(path, 0, NULL);
	struct tips_batch *b = NULL;
	REQUIRE_RC(tips_batch_new(&b), 0);
	REQUIRE_RC(tips_listdb_put(db, "warm", 4, "up", 2), 0); /* allocates the log chunk */
	static const size_t sizes[] = { 1, 4, 16, 64 };
	for (size_t s = 0; s < 4; s++) {
		uint64_t most = 0, total = 0;
		for (unsigned r = 0; r < 8; r++) {
			tips_batch_clear(b);
			for (size_t i = 0; i < sizes[s]; i++) {
				snprintf(k, sizeof(k), "f%zu-%u-%zu", s, r, i);
				REQUIRE_RC(put_s(b, k, "some value of a batch"), 0);
			}
			uint64_t f0 = fences_now();
			CHECK_RC(tips_listdb_batch_commit(db, b), 0);
			uint64_t f = fences_now() - f0;
			total += f;
			most = f > most ? f : most;
			CHECK(f == 1);
		}
		uint64_t f0 = fences_now();
		for (size_t i = 0; i < sizes[s]; i++) {
			snprintf(k, sizeof(k), "single%zu-%zu", s, i);
			REQUIRE_RC(tips_listdb_put(db, k, strlen(k), "v", 1), 0);
		}
		printf("batches of %2zu puts: %.2f fences per batch (most %llu); %zu single puts: "
		       "%llu fences\n", sizes[s], total / 8.0, (unsigned long long)most, sizes[s],
		       (unsigned long long)(fences_now() - f0));
	}
	CHECK_VAL(db, "f3-7-63", "some value of a batch");
	/* Informative: puts per second alone and in batches (8-byte keys, 16-byte values;
	 * not checked: the machine is shared). */
	for (size_t s = 0; s < 4; s++) {
		tips_batch_clear(b);
		double t0 = ld_now();
		for (uint64_t i = 0; i < 8192; i++) {
			unsigned char key[8];
			be64(key, (s + 1) << 40 | i);
			REQUIRE_RC(tips_batch_put(b, key, 8, "sixteen bytes...", 16), 0);
			if (tips_batch_count(b) == sizes[s]) {
				REQUIRE_RC(tips_listdb_batch_commit(db, b), 0);
				tips_batch_clear(b);
			}
		}
		printf("8192 puts in batches of %2zu: %.2f M puts/s\n", sizes[s],
		       8192 / (ld_now() - t0) / 1e6);
		CHECK(tips_batch_count(b) == 0); /* every put committed */
	}
	tips_batch_free(&b);
	CHECK_RC(tips_listdb_close(&db), 0);
	tips_listdb_destroy(path);
}

/* ---- concurrent --------------------------------------------------------------------------- */

#define CW 2       /* writers */
#define CKEYS 16   /* keys of each writer */
#define CHOT 8     /* shared keys every writer updates */
#define CSECONDS 2.0

static struct tips_listdb *cdb;
static _Atomic uint64_t c_acked[CW], c_started[CW];
static _Atomic bool cstop;
static _Atomic long creads, cbad;

static void ckey(char *k, unsigned w, unsigned i)
{
	snprintf(k, 32, "w%u-%03u", w, i);
}

static void *writer_main(void *arg)
{
	unsigned w = (unsigned)(uintptr_t)arg;
	uint64_t rs = seed ^ (0x9e3779b97f4a7c15ull * (w + 1));
	struct tips_batch *b = NULL;
	REQUIRE_RC(tips_batch_new(&b), 0);
	char k[32], v[32];
	for (uint64_t m = 1; !atomic_load(&cstop); m++) {
		tips_batch_clear(b);
		snprintf(v, sizeof(v), "%020llu", (unsigned long long)m);
		for (unsigned i = 0; i < CKEYS; i++) {
			ckey(k, w, (i * 7 + (unsigned)m) % CKEYS); /* an order of its own each time */
			REQUIRE_RC(put_s(b, k, v), 0);
		}
		for (unsigned i = 0; i < 3; i++) {
			snprintf(k, sizeof(k), "hot%u", (unsigned)(rnd(&rs) % CHOT));
			REQUIRE_RC(tips_batch_update(b, k, strlen(k), v, strlen(v)), 0);
		}
		atomic_store(&c_started[w], m);
		CHECK_RC(tips_listdb_batch_commit(cdb, b), 0);
		atomic_store(&c_acked[w], m);
		snprintf(k, sizeof(k), "hot%u", (unsigned)(rnd(&rs) % CHOT));
		CHECK_RC(tips_listdb_update(cdb, k, strlen(k), "single", 6), 0);
	}
	tips_batch_free(&b);
	return NULL;
}

static uint64_t marker_of(struct tips_listdb *db, const char *k)
{
	char v[64];
	const char *s = get_str(db, k, v, sizeof(v));
	return s && s[0] != '?' ? strtoull(s, NULL, 10) : UINT64_MAX;
}

static void *reader_main(void *arg)
{
	(void)arg;
	uint64_t seen[CW][CKEYS] = { { 0 } };
	char k[32];
	while (!atomic_load(&cstop)) {
		for (unsigned w = 0; w < CW; w++) {
			uint64_t floor = atomic_load(&c_acked[w]);
			for (unsigned i = 0; i < CKEYS; i++) {
				ckey(k, w, i);
				uint64_t m = marker_of(cdb, k);
				uint64_t top = atomic_load(&c_started[w]);
				if (m < floor || m < seen[w][i] || m > top) {
					if (atomic_fetch_add(&cbad, 1) < 5)
						fprintf(stderr, "reader: %s marker %llu: acknowledged "
							"%llu, seen before %llu, started %llu\n", k,
							(unsigned long long)m, (unsigned long long)floor,
							(unsigned long long)seen[w][i],
							(unsigned long long)top);
				} else {
					seen[w][i] = m;
				}
				atomic_fetch_add(&creads, 1);
			}
		}
	}
	return NULL;
}

static void test_concurrent(void)
{
	ld_phase = "concurrent";
	char path[256], k[32];
	ld_path(path, sizeof(path));
	cdb = open_db(path, 256, NULL);
	struct tips_batch *b = NULL;
	REQUIRE_RC(tips_batch_new(&b), 0);
	for (unsigned w = 0; w < CW; w++)
		for (unsigned i = 0; i < CKEYS; i++) {
			ckey(k, w, i);
			REQUIRE_RC(put_s(b, k, "0"), 0);
		}
	for (unsigned i = 0; i < CHOT; i++) {
		snprintf(k, sizeof(k), "hot%u", i);
		REQUIRE_RC(put_s(b, k, "0"), 0);
	}
	REQUIRE_RC(tips_listdb_batch_commit(cdb, b), 0);
	tips_batch_free(&b);
	pthread_t tw[CW], tr[2];
	for (unsigned w = 0; w < CW; w++)
		REQUIRE(pthread_create(&tw[w], NULL, writer_main, (void *)(uintptr_t)w) == 0);
	for (unsigned r = 0; r < 2; r++)
		REQUIRE(pthread_create(&tr[r], NULL, reader_main, NULL) == 0);
	double t0 = ld_now();
	while (ld_now() - t0 < CSECONDS)
		usleep(10000);
	atomic_store(&cstop, true);
	for (unsigned w = 0; w < CW; w++)
		pthread_join(tw[w], NULL);
	for (unsigned r = 0; r < 2; r++)
		pthread_join(tr[r], NULL);
	CHECK(atomic_load(&cbad) == 0);
	struct tips_listdb_stats st;
	tips_listdb_stats(cdb, &st);
	printf("concurrent: %llu + %llu batches, %ld reads, %llu MemTables flushed, %llu "
	       "compactions, %ld bad\n", (unsigned long long)c_acked[0],
	       (unsigned long long)c_acked[1], (long)creads,
	       (unsigned long long)st.memtables_flushed, (unsigned long long)st.compactions,
	       (long)cbad);
	CHECK(c_acked[0] > 10 && c_acked[1] > 10);
	CHECK(st.memtables_flushed > 0);
	ld_phase = "concurrent: reopen";
	CHECK_RC(tips_listdb_close(&cdb), 0);
	cdb = open_db(path, 256, NULL);
	for (unsigned w = 0; w < CW; w++)
		for (unsigned i = 0; i < CKEYS; i++) {
			ckey(k, w, i);
			CHECK(marker_of(cdb, k) == c_acked[w]);
		}
	CHECK_RC(tips_listdb_flush(cdb, 1), 0);
	check_db(cdb, "concurrent");
	CHECK_RC(tips_listdb_close(&cdb), 0);
	tips_listdb_destroy(path);
}

/* ---- crash ---------------------------------------------------------------------------------- */

#define XKEYS 48    /* keys the crash workload writes */
#define XBATCHES 240
#define XMEMTABLE 64
#define XEXIT 86    /* sim_crash_exit_code */

/* Batch @n (1-based) of the crash workload: for each key, 0 (not in it), 1 (put) or 2
 * (delete); a function of seed and @n alone, so the parent knows what the child did. */
static void xbatch(uint64_t n, uint8_t ops[XKEYS])
{
	uint64_t rs = mix64(seed ^ (n * 0x9e3779b97f4a7c15ull)) | 1;
	memset(ops, 0, XKEYS);
	unsigned size = 1 + (unsigned)(rnd(&rs) % 16);
	for (unsigned i = 0; i < size; i++)
		ops[rnd(&rs) % XKEYS] = rnd(&rs) % 8 ? 1 : 2;
}

static void xkey(char *k, unsigned i)
{
	snprintf(k, 32, "x%02u", i);
}

/* The value batch @n puts into key @i: "n:i:" then filler, 16..120 bytes. */
static size_t xval(uint64_t n, unsigned i, char *v)
{
	int len = snprintf(v, 64, "%llu:%u:", (unsigned long long)n, i);
	size_t total = 16 + (size_t)((n * 7 + i * 13) % 105);
	for (size_t j = (size_t)len; j < total; j++)
		v[j] = (char)('a' + (n + i + j) % 26);
	return total;
}

/* The child's messages: batch n starts (with the persist events so far), batch n was
 * acknowledged (the same), the run ended (the persist events of the whole run; n: the
 * MemTables flushed << 32 | the compactions). */
enum { X_START = 1, X_ACK, X_END };
struct xmsg {
	uint64_t kind, n, events;
};

static void xsend(int fd, uint64_t kind, uint64_t n)
{
	struct xmsg m = { kind, n, tips_pm_persist_events() };
	if (write(fd, &m, sizeof(m)) != (ssize_t)sizeof(m))
		_exit(4);
}

/* The child: commits XBATCHES batches on pools of @popts (NULL: ordinary media),
 * telling the parent about each (struct xmsg). */
static void xchild(const char *path, int fd, const struct tips_pool_options *popts)
{
	struct tips_listdb *db = open_db(path, XMEMTABLE, popts);
	struct tips_batch *b = NULL;
	REQUIRE_RC(tips_batch_new(&b), 0);
	uint8_t ops[XKEYS];
	char k[32], v[128];
	for (uint64_t n = 1; n <= XBATCHES; n++) {
		tips_batch_clear(b);
		xbatch(n, ops);
		for (unsigned i = 0; i < XKEYS; i++) {
			xkey(k, i);
			if (ops[i] == 1)
				REQUIRE_RC(tips_batch_put(b, k, strlen(k), v, xval(n, i, v)), 0);
			else if (ops[i] == 2)
				REQUIRE_RC(tips_batch_delete(b, k, strlen(k)), 0);
		}
		xsend(fd, X_START, n);
		REQUIRE_RC(tips_listdb_batch_commit(db, b), 0);
		xsend(fd, X_ACK, n);
	}
	/* No close: after a fork grace.c's reclaimer thread (started in the parent) is
	 * missing, and close would wait for it. Ending here is a crash after the last
	 * fence, which recovery handles like any other. */
	struct tips_listdb_stats st;
	tips_listdb_stats(db, &st);
	xsend(fd, X_END, st.memtables_flushed << 32 | st.compactions);
	_exit(0);
}

/* Which batch key @i holds after batches 1..@acked: 0 (absent) or the batch. */
static uint64_t xexpected(unsigned i, uint64_t acked)
{
	uint8_t ops[XKEYS];
	for (uint64_t n = acked; n >= 1; n--) {
		xbatch(n, ops);
		if (ops[i])
			return ops[i] == 1 ? n : 0;
	}
	return 0;
}

/* Which batch key @i holds now: 0 (absent), the batch, or UINT64_MAX (a value no batch
 * wrote: damaged). */
static uint64_t xstate(struct tips_listdb *db, unsigned i)
{
	char k[32], got[128], want[128];
	xkey(k, i);
	size_t vl = 0;
	int rc = tips_listdb_get(db, k, strlen(k), got, sizeof(got), &vl);
	if (rc == TIPS_ENOTFOUND)
		return 0;
	uint64_t n = rc == 0 ? strtoull(got, NULL, 10) : 0;
	if (rc || n == 0 || xval(n, i, want) != vl || memcmp(got, want, vl) != 0)
		return UINT64_MAX;
	return n;
}

/* Every key holds what batches 1..@acked left, except that batch @inflight (0: none)
 * may be wholly applied. Returns the number of keys wrong. */
static unsigned xverify(struct tips_listdb *db, uint64_t acked, uint64_t inflight,
			int *applied)
{
	uint8_t ops[XKEYS] = { 0 };
	if (inflight)
		xbatch(inflight, ops);
	unsigned bad = 0;
	int old_seen = 0, new_seen = 0;
	for (unsigned i = 0; i < XKEYS; i++) {
		uint64_t before = xexpected(i, acked), now = xstate(db, i);
		uint64_t after = ops[i] == 1 ? inflight : ops[i] == 2 ? 0 : before;
		if (now != before && now != after) {
			if (bad++ < 5)
				fprintf(stderr, "key x%02u holds batch %llu, wanted %llu (or %llu)\n",
					i, (unsigned long long)now, (unsigned long long)before,
					(unsigned long long)after);
			continue;
		}
		if (before != after) {
			old_seen |= now == before;
			new_seen |= now == after;
		}
	}
	if (old_seen && new_seen) {
		fprintf(stderr, "batch %llu is partly present\n", (unsigned long long)inflight);
		bad++;
	}
	*applied = new_seen;
	return bad;
}

/* Where the calibration run's commits were: persist events (of every thread) at the
 * start and at the acknowledgement of each batch, and of the whole run; the MemTable
 * flushes and compactions it saw. */
static uint64_t xstart[XBATCHES + 1], xack[XBATCHES + 1], xtotal, xflushes, xcompactions;

/* Reads the child's messages: the last acknowledged batch and the one in flight (0:
 * none); @calibrate: records where the commits were; @kill_after (0: never): kills
 * child @pid with SIGKILL once that many batches are acknowledged. */
static void xread(int fd, bool calibrate, pid_t pid, uint64_t kill_after, uint64_t *last_ack,
		  uint64_t *inflight)
{
	struct xmsg m;
	*last_ack = *inflight = 0;
	while (read(fd, &m, sizeof(m)) == (ssize_t)sizeof(m)) {
		if (m.kind == X_START)
			*inflight = m.n;
		else if (m.kind == X_ACK)
			*last_ack = m.n;
		if (m.kind == X_ACK && m.n == kill_after)
			kill(pid, SIGKILL);
		if (!calibrate)
			continue;
		if (m.kind == X_START && m.n <= XBATCHES)
			xstart[m.n] = m.events;
		else if (m.kind == X_ACK && m.n <= XBATCHES)
			xack[m.n] = m.events;
		else if (m.kind == X_END) {
			xtotal = m.events;
			xflushes = m.n >> 32;
			xcompactions = m.n & 0xffffffffu;
		}
	}
	if (*inflight == *last_ack)
		*inflight = 0;
}

/* How a round's child ends: SIM media armed at @crash_at (0: never; the calibration
 * run), or ordinary media and SIGKILL after @kill_after acknowledged batches. */
struct xend {
	uint64_t crash_at, kill_after;
};

/* Runs the child; returns what it said: the last acknowledged batch and the one in
 * flight. False (reported) if it ended in another way than planned. */
static bool xrun(unsigned round, const char *path, struct xend how, uint64_t *last_ack,
		 uint64_t *inflight, const char **end)
{
	struct tips_pool_options sim;
	tips_pool_options_init(&sim);
	sim.media = TIPS_MEDIA_SIM;
	sim.sim_crash_at = how.crash_at;
	sim.sim_evict = 0.5;
	sim.sim_seed = mix64(seed + round);
	sim.sim_crash_exit_code = XEXIT;
	int pfd[2];
	REQUIRE(pipe(pfd) == 0);
	pid_t pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		close(pfd[0]);
		alarm(0);
		xchild(path, pfd[1], how.kill_after ? NULL : &sim);
	}
	close(pfd[1]);
	xread(pfd[0], !how.crash_at && !how.kill_after, pid, how.kill_after, last_ack, inflight);
	close(pfd[0]);
	int status;
	REQUIRE(waitpid(pid, &status, 0) == pid);
	bool done = WIFEXITED(status) && WEXITSTATUS(status) == 0;
	bool crashed = how.crash_at && WIFEXITED(status) && WEXITSTATUS(status) == XEXIT;
	bool killed = how.kill_after && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
	*end = crashed ? "power failure" : killed ? "SIGKILL" : "finished first";
	if (!done && !crashed && !killed) {
		fprintf(stderr, "crash round %u: the child ended with status %d\n", round, status);
		test_failures++;
	}
	return done || crashed || killed;
}

/* One round: a child ending as @how, then recovery and the checks. */
static void xround(unsigned round, struct xend how)
{
	char path[256];
	ld_path(path, sizeof(path));
	/* Created here: a power failure inside tips_listdb_open's create is not this
	 * test's subject (such a pool is refused as not a ListDB one). */
	struct tips_listdb *db = open_db(path, XMEMTABLE, NULL);
	REQUIRE_RC(tips_listdb_close(&db), 0);
	uint64_t last_ack, inflight;
	const char *end;
	if (!xrun(round, path, how, &last_ack, &inflight, &end))
		return;
	db = open_db(path, XMEMTABLE, NULL);
	int applied = 0;
	unsigned bad = xverify(db, last_ack, inflight, &applied);
	CHECK(bad == 0);
	check_db(db, "crash: after recovery");
	/* The recovered database goes on: one more batch, merged, still right. */
	struct tips_batch *b = NULL;
	REQUIRE_RC(tips_batch_new(&b), 0);
	REQUIRE_RC(tips_batch_delete(b, "x00", 3), 0);
	CHECK_RC(tips_listdb_batch_commit(db, b), 0);
	tips_batch_free(&b);
	CHECK_RC(tips_listdb_flush(db, 1), 0);
	check_db(db, "crash: after the merge");
	CHECK(xstate(db, 0) == 0);
	struct tips_listdb_stats st;
	tips_listdb_stats(db, &st);
	if (how.crash_at || how.kill_after)
		printf("crash round %u, %s at %s %llu: %llu batches acknowledged, batch in "
		       "flight %llu %s; %llu entries recovered; %u keys wrong\n", round, end,
		       how.crash_at ? "event" : "batch",
		       (unsigned long long)(how.crash_at ? how.crash_at : how.kill_after),
		       (unsigned long long)last_ack, (unsigned long long)inflight,
		       !inflight ? "-" : applied ? "applied" : "absent",
		       (unsigned long long)st.recovered_entries, bad);
	CHECK_RC(tips_listdb_close(&db), 0);
	tips_listdb_destroy(path);
}

/* Power failures: odd rounds at any persist event of a run; even ones inside a commit
 * (between its start and its acknowledgement in the calibration run), where a batch is
 * torn. Then @kills rounds killed with SIGKILL after a random batch. */
static void test_crash(unsigned rounds, unsigned kills)
{
	ld_phase = "crash: calibration";
	xround(0, (struct xend){ 0, 0 });
	REQUIRE(xtotal > 0);
	CHECK(xflushes > 4 && xcompactions > 4); /* crashes can land in them */
	uint64_t in_commits = 0;
	for (unsigned n = 1; n <= XBATCHES; n++)
		in_commits += xack[n] - xstart[n];
	printf("crash: a whole run is %llu persist events, %llu of them while a commit ran; "
	       "%llu MemTables flushed, %llu compactions\n", (unsigned long long)xtotal,
	       (unsigned long long)in_commits, (unsigned long long)xflushes,
	       (unsigned long long)xcompactions);
	uint64_t rs = seed | 1;
	for (unsigned r = 1; r <= rounds + kills; r++) {
		ld_phase = r <= rounds ? "crash: power failure round" : "crash: SIGKILL round";
		uint64_t n = 1 + rnd(&rs) % XBATCHES;
		uint64_t span = xack[n] > xstart[n] ? xack[n] - xstart[n] : 1;
		struct xend how = { r % 2 ? 1 + rnd(&rs) % xtotal : xstart[n] + 1 + rnd(&rs) % span,
				    0 };
		if (r > rounds)
			how = (struct xend){ 0, n };
		xround(r, how);
	}
}

int main(int argc, char **argv)
{
	const char *only;
	unsigned rounds = 30;
	int rc = ld_test_args(argc, argv, "listdb_batch", "test_listdb_batch [api|fences|"
			      "concurrent|crash] [--seed N] [--rounds N]", &only, &seed, &rounds);
	if (rc)
		return rc;
	if (!only || !strcmp(only, "api"))
		test_api();
	if (!only || !strcmp(only, "fences"))
		test_fences();
	if (!only || !strcmp(only, "concurrent"))
		test_concurrent();
	if (!only || !strcmp(only, "crash"))
		test_crash(rounds, 10);
	return test_finish("test_listdb_batch");
}
