/*
 * test_grow_e2e.c - growing a TIPS database's pool through the public facade: a 16 MiB
 * pool holding tips-hash is filled with KEYS keys (a fixed number that fits: writes
 * into a full heap are another engineer's open issue, so the test stays short of it and
 * reports how full the heap got), closed, grown to 32 MiB with tips_pool_grow(),
 * reopened, given KEYS more keys, and every key of both rounds is read back, after the
 * writes and again after another close and reopen, with tips_db_check() clean. Both
 * rounds together need more heap than the 16 MiB pool has (measured: 61% of its heap
 * after the first round, 42% of the grown heap after both), so the second round must
 * use the new room.
 */
#define _GNU_SOURCE
#include "test_util.h"

#define MIB (1ull << 20)
#define KEYS 26000u
#define VALUE_BYTES 160u

static void value_of(uint64_t k, unsigned char *v)
{
	for (unsigned i = 0; i < VALUE_BYTES; i++)
		v[i] = (unsigned char)(k * 29 + i);
}

static struct tips_db *open_db(const char *path, unsigned flags)
{
	struct tips_config cfg;
	tips_config_init(&cfg);
	cfg.flags = flags;
	cfg.pool_size = 16 * MIB;
	cfg.expected_keys = 2 * KEYS;
	/* The framework needs a log area of 4 MiB or more (its default is 1/8 of a pool). */
	struct tips_pool_options po;
	tips_pool_options_init(&po);
	po.size = 16 * MIB;
	po.log_size = 4 * MIB;
	cfg.pool = &po;
	struct tips_db *db = NULL;
	int rc = tips_open(path, &cfg, tips_index_find("tips-hash"), &db);
	if (rc) {
		fprintf(stderr, "tips_open %s: %s (%s)\n", path, tips_errormsg(), tips_strerror(rc));
		exit(1);
	}
	return db;
}

static void put_range(struct tips_db *db, uint64_t from, uint64_t to)
{
	unsigned char key[8], val[VALUE_BYTES];
	for (uint64_t k = from; k < to; k++) {
		be64(key, k);
		value_of(k, val);
		CHECK_RC(tips_put(db, key, 8, val, VALUE_BYTES), 0);
	}
}

/* Number of keys in [from, to) whose value reads back right. */
static uint64_t count_intact(struct tips_db *db, uint64_t from, uint64_t to)
{
	unsigned char key[8], want[VALUE_BYTES], got[VALUE_BYTES];
	uint64_t ok = 0;
	for (uint64_t k = from; k < to; k++) {
		be64(key, k);
		value_of(k, want);
		size_t len = 0;
		if (tips_get(db, key, 8, got, sizeof(got), &len) == 0 && len == VALUE_BYTES &&
		    memcmp(got, want, VALUE_BYTES) == 0)
			ok++;
	}
	return ok;
}

/* Share of the heap in use, in percent. */
static unsigned heap_percent(struct tips_db *db)
{
	struct tips_heap_stats st;
	tips_heap_stats(tips_pool_heap(tips_db_pool(db)), &st);
	return (unsigned)(st.bytes_in_use * 100 / st.bytes_total);
}

static void expect_db_clean(struct tips_db *db)
{
	struct tips_db_report rep;
	CHECK_RC(tips_db_check(db, NULL, NULL, &rep), 0);
	CHECK(rep.leaked == 0 && rep.free_but_owned == 0 && rep.owned_twice == 0);
}

int main(void)
{
	char path[256];
	test_path(path, sizeof(path), "/dev/shm", "grow-e2e");
	struct tips_db *db = open_db(path, TIPS_CREATE);
	put_range(db, 0, KEYS);
	CHECK(count_intact(db, 0, KEYS) == KEYS);
	unsigned before = heap_percent(db);
	CHECK_RC(tips_close(&db), 0);

	CHECK_RC(tips_pool_grow(path, 32 * MIB), 0);
	struct tips_pool_info info;
	CHECK_RC(tips_pool_stat(path, &info), 0);
	CHECK(info.size == 32 * MIB);

	db = open_db(path, 0);
	CHECK(count_intact(db, 0, KEYS) == KEYS);
	unsigned grown_before = heap_percent(db);
	put_range(db, KEYS, 2 * KEYS);
	unsigned after = heap_percent(db);
	CHECK(count_intact(db, 0, 2 * KEYS) == 2 * KEYS);
	CHECK_RC(tips_close(&db), 0);

	db = open_db(path, 0);
	CHECK(count_intact(db, 0, 2 * KEYS) == 2 * KEYS);
	expect_db_clean(db);
	CHECK_RC(tips_close(&db), 0);
	printf("heap in use: %u%% of 16 MiB pool after %u keys; %u%% of the grown pool, "
	       "%u%% after %u more\n", before, KEYS, grown_before, after, KEYS);
	unlink(path);
	return test_finish("test_grow_e2e");
}
