/*
 * test_fill.c - a full pool never loses a database (admission, admit.c; failed replay
 * epochs, replay.c), on the tips-* index named by argv[1].
 *
 *  fill:   insert keys with 8, 100 and 1000-byte values into a pool (16 MiB, or argv[2]
 *          MiB: the campaign fills 64 MiB) until the
 *          first error, which must be TIPS_ENOSPC; every acknowledged key reads back;
 *          deletes still work in the full pool and make room for new inserts; the
 *          close is clean and after reopening every acknowledged key is there and the
 *          heap holds exactly the index's blocks.
 *  kill:   a child fills the pool and is killed with SIGKILL at a random point (some
 *          after it met the full pool); every key it acknowledged is back after the
 *          parent reopens, and the pool checks clean.
 *  legacy: the pool the code before admission left behind (fw_debug_admit_all: the
 *          heap fills up under acknowledged writes replay cannot apply): close keeps
 *          them and says TIPS_ENOSPC; open either recovers with the room it has or says
 *          TIPS_ENOSPC and names `tips pool grow`, and after tips_pool_grow() replays
 *          them; either way every key is there.
 * Prints one line per fill: keys acknowledged, the error, keys back after reopen.
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test_util.h"
#include "framework/framework.h"

static uint64_t pool_size = 16ull << 20; /* argv[2] MiB: 64 in the campaign */
#define MAX_VALUE 1000u

static char path[256];
static const struct tips_index_ops *ops;

static struct tips_db *open_db(unsigned flags)
{
	struct tips_config cfg;
	tips_config_init(&cfg);
	cfg.flags = flags;
	struct tips_pool_options po;
	tips_pool_options_init(&po);
	po.size = pool_size;
	po.log_size = 4ull << 20; /* room for the smallest OLogs in a 16 MiB pool */
	cfg.pool = &po;
	cfg.expected_keys = 1u << 16;
	struct tips_db *db = NULL;
	int rc = tips_open(path, &cfg, ops, &db);
	if (rc)
		fprintf(stderr, "tips_open: %s: %s\n", tips_strerror(rc), tips_errormsg());
	REQUIRE(rc == 0);
	return db;
}

/* The value of key @i: @len bytes that name the key, so a mixed-up value shows. */
static void value_of(uint64_t i, unsigned len, unsigned char *out)
{
	uint64_t s = i * 0x9e3779b97f4a7c15ull + len;
	for (unsigned b = 0; b < len; b++)
		out[b] = (unsigned char)(rnd(&s) >> 56);
}

/* Key @i: scrambled (an odd multiplier is a bijection of 64-bit words), so that trees
 * fill as they would in use and an unbalanced one (lfbst) does not become a list. */
static void key_of(uint64_t i, unsigned char out[8])
{
	be64(out, i * 0x9e3779b97f4a7c15ull);
}

static int put_key(struct tips_db *db, uint64_t i, unsigned vlen)
{
	unsigned char key[8], val[MAX_VALUE];
	key_of(i, key);
	value_of(i, vlen, val);
	return tips_insert(db, key, 8, val, vlen);
}

/* 0 if key @i holds its value, TIPS_ENOTFOUND if absent, -1 if it holds another. */
static int check_key(struct tips_db *db, uint64_t i, unsigned vlen)
{
	unsigned char key[8], want[MAX_VALUE], got[MAX_VALUE];
	size_t len = 0;
	key_of(i, key);
	value_of(i, vlen, want);
	int rc = tips_get(db, key, 8, got, sizeof(got), &len);
	if (rc)
		return rc;
	return len == vlen && memcmp(got, want, vlen) == 0 ? 0 : -1;
}

static void check_pool_clean(struct tips_db *db)
{
	struct tips_db_report rep;
	int rc = tips_db_check(db, NULL, NULL, &rep);
	if (rc)
		fprintf(stderr, "tips_db_check: %s\n", tips_errormsg());
	CHECK(rc == 0);
}

/* Inserts keys from @first until the first error; returns how many were taken. */
static uint64_t fill_from(struct tips_db *db, uint64_t first, unsigned vlen, int *err)
{
	uint64_t i = first;
	while ((*err = put_key(db, i, vlen)) == 0)
		i++;
	return i - first;
}

static void test_fill(unsigned vlen)
{
	unlink(path);
	struct tips_db *db = open_db(TIPS_CREATE);
	int err = 0;
	uint64_t n = fill_from(db, 0, vlen, &err);
	if (err != TIPS_ENOSPC)
		fprintf(stderr, "fill stopped with %s: %s\n", tips_strerror(err), tips_errormsg());
	CHECK(err == TIPS_ENOSPC);
	CHECK(n > 0);
	uint64_t bad = 0;
	for (uint64_t i = 0; i < n; i++)
		bad += check_key(db, i, vlen) != 0;
	CHECK(bad == 0);

	/* Deletes work in the full pool, and the room they free takes new keys. */
	struct tips_stats st;
	tips_stats(db, &st);
	uint64_t room_full = st.heap_room, deleted = 0;
	for (uint64_t i = 0; i < n; i += 10) {
		unsigned char key[8];
		key_of(i, key);
		int rc = tips_remove(db, key, 8);
		if (rc)
			fprintf(stderr, "delete in a full pool: %s: %s\n", tips_strerror(rc),
				tips_errormsg());
		CHECK(rc == 0);
		deleted++;
	}
	int rc = tips_close(&db); /* applies the deletes and reclaims: their room is free */
	if (rc)
		fprintf(stderr, "tips_close: %s\n", tips_errormsg());
	CHECK(rc == 0);
	db = open_db(0);
	tips_stats(db, &st);
	uint64_t freed = st.heap_room > room_full ? st.heap_room - room_full : 0;
	/* What admission may give puts now (tips_stats documents the rule). */
	uint64_t usable = st.heap_room > st.heap_keep ? st.heap_room - st.heap_keep : 0;
	uint64_t chunks = st.heap_chunk_room > st.heap_chunk_margin
				  ? st.heap_chunk_room - st.heap_chunk_margin : 0;
	if (chunks < usable)
		usable = chunks; /* free slots of other size classes may not serve these keys */
	uint64_t again = fill_from(db, n, vlen, &err);
	CHECK(err == TIPS_ENOSPC);
	/* The room the deletes gave back takes new keys: the admission bound is
	 * conservative, not blind. */
	uint64_t cost = 2 * (8 + vlen) + 128;
	if (again < usable / cost / 4)
		fprintf(stderr, "second fill: %llu keys, %llu usable bytes\n",
			(unsigned long long)again, (unsigned long long)usable);
	CHECK(again >= usable / cost / 4);
	tips_stats(db, &st);
	rc = tips_close(&db);
	if (rc)
		fprintf(stderr, "tips_close: %s\n", tips_errormsg());
	CHECK(rc == 0);

	db = open_db(0);
	uint64_t back = 0, wrong = 0;
	for (uint64_t i = 0; i < n + again; i++) {
		rc = check_key(db, i, vlen);
		bool was_deleted = i < n && i % 10 == 0;
		if (was_deleted ? rc == TIPS_ENOTFOUND : rc == 0)
			back += !was_deleted;
		else if (wrong++ < 3)
			fprintf(stderr, "key %llu of %llu (deleted: %d) after reopen: %d (%s)\n",
				(unsigned long long)i, (unsigned long long)(n + again),
				was_deleted, rc, rc > 0 ? "" : tips_strerror(rc));
	}
	CHECK(wrong == 0);
	check_pool_clean(db);
	CHECK(tips_close(&db) == 0);
	printf("%s value %4u B: %llu keys acknowledged in %llu MiB, then %s; %llu deleted, "
	       "%llu more inserted (deletes freed %llu KiB); %llu of %llu keys back after "
	       "reopen; second fill: %llu writes refused, %llu replay stalls\n",
	       ops->name, vlen, (unsigned long long)n, (unsigned long long)(pool_size >> 20),
	       tips_strerror(TIPS_ENOSPC), (unsigned long long)deleted,
	       (unsigned long long)again, (unsigned long long)(freed >> 10),
	       (unsigned long long)back, (unsigned long long)(n + again - deleted),
	       (unsigned long long)st.writes_refused, (unsigned long long)st.replay_stalls);
}

struct shared {
	_Atomic uint64_t acked; /* keys [0, acked) are acknowledged */
	_Atomic int full;       /* the child met TIPS_ENOSPC */
};

static void child_fill(struct shared *sh, unsigned vlen)
{
	struct tips_db *db = open_db(TIPS_CREATE);
	for (uint64_t i = 0;; i++) {
		int rc = put_key(db, i, vlen);
		if (rc) {
			atomic_store(&sh->full, rc == TIPS_ENOSPC ? 1 : 2);
			for (;;)
				pause(); /* the parent kills us */
		}
		atomic_store(&sh->acked, i + 1);
	}
}

/* One kill: a child fills, dies at @target acknowledged keys (or once full). */
static void test_kill_once(struct shared *sh, uint64_t target, unsigned vlen)
{
	unlink(path);
	atomic_store(&sh->acked, 0);
	atomic_store(&sh->full, 0);
	pid_t pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0)
		child_fill(sh, vlen);
	struct timespec tick = { 0, 100000 };
	int status;
	pid_t gone = 0;
	while (atomic_load(&sh->acked) < target && !atomic_load(&sh->full) &&
	       (gone = waitpid(pid, &status, WNOHANG)) == 0)
		nanosleep(&tick, NULL); /* polls the child's progress; the kill point is random */
	CHECK(gone == 0); /* the child must not die before it is killed */
	if (gone == 0) {
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
	}
	CHECK(atomic_load(&sh->full) != 2);
	uint64_t acked = atomic_load(&sh->acked);
	struct tips_db *db = open_db(0);
	uint64_t lost = 0;
	for (uint64_t i = 0; i < acked; i++)
		lost += check_key(db, i, vlen) != 0;
	CHECK(lost == 0);
	check_pool_clean(db);
	CHECK(tips_close(&db) == 0);
	printf("%s kill -9 at %llu acknowledged keys%s: %llu lost\n", ops->name,
	       (unsigned long long)acked, atomic_load(&sh->full) ? " (pool full)" : "",
	       (unsigned long long)lost);
}

static void test_kill(void)
{
	struct shared *sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
				 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	REQUIRE(sh != MAP_FAILED);
	uint64_t seed = (uint64_t)getpid() * 7919 + 17;
	for (int round = 0; round < 4; round++) {
		/* 100-byte values: about 5K keys a MiB fill the pool; the last round waits
		 * until the child met the full pool. */
		uint64_t target = round == 3 ? UINT64_MAX
					     : 1000 + rnd(&seed) % (5000 * (pool_size >> 20));
		test_kill_once(sh, target, 100);
	}
	munmap(sh, sizeof(*sh));
}

static void test_legacy_full(void)
{
	unlink(path);
	uint64_t keep = pool_size;
	pool_size = 16ull << 20;
	struct tips_db *db = open_db(TIPS_CREATE);
	fw_debug_admit_all(db);
	int err = 0;
	uint64_t n = fill_from(db, 0, 100, &err);
	CHECK(err == TIPS_ENOSPC); /* the OLog filled behind a replay that cannot go on */
	int rc = tips_close(&db);
	CHECK(rc == TIPS_ENOSPC && db == NULL);
	struct tips_config cfg;
	tips_config_init(&cfg);
	rc = tips_open(path, &cfg, ops, &db);
	/* Recovery may finish with the room it has (reclaiming applies deferred frees
	 * the stuck process never got to); else it must say how to go on. */
	bool grown = rc != 0;
	if (grown) {
		CHECK(rc == TIPS_ENOSPC && strstr(tips_errormsg(), "tips pool grow") != NULL);
		CHECK(tips_pool_grow(path, 32ull << 20) == 0);
		db = open_db(0);
	}
	uint64_t lost = 0;
	for (uint64_t i = 0; i < n; i++)
		lost += check_key(db, i, 100) != 0;
	CHECK(lost == 0);
	check_pool_clean(db);
	CHECK(tips_close(&db) == 0);
	printf("%s legacy full pool: %llu keys acknowledged in 16 MiB; %s; %llu lost\n",
	       ops->name, (unsigned long long)n,
	       grown ? "open refused with TIPS_ENOSPC, grown to 32 MiB"
		     : "recovery finished with the room it had", (unsigned long long)lost);
	pool_size = keep;
}

int main(int argc, char **argv)
{
	const char *name = argc > 1 ? argv[1] : "tips-hash";
	if (argc > 2)
		pool_size = strtoull(argv[2], NULL, 10) << 20;
	ops = tips_index_find(name);
	REQUIRE(ops != NULL);
	snprintf(path, sizeof(path), "/dev/shm/tips-fill-%s-%d.pool", name, (int)getpid());
	test_fill(8);
	test_fill(100);
	test_fill(MAX_VALUE);
	test_kill();
	test_legacy_full();
	unlink(path);
	return test_finish("test_fill");
}
