/*
 * test_struct_size.c - the size-versioned structs of the API, as an older and a newer
 * program would pass them (src/util/version.c, tips/version.h).
 *
 * What it holds the library to: an _init writes exactly the caller's size (a canary
 * right after an older, smaller struct survives) and records it in struct_size; an
 * open accepts an older struct and defaults the fields it lacks (the open then behaves
 * as with a full default struct), accepts a newer struct whose unknown tail is zero
 * and refuses one that sets a field it does not know, and refuses a struct_size that
 * is not a size; the stats calls and the check reports (heap, database, ListDB) write
 * only the caller's size and zero a newer tail; tips_version() and
 * tips_version_check() agree with the headers. And the names of 0.3 the headers now
 * give to wrappers (tips_lookup, tips_delete, the *_check calls) still work, both as
 * the header's aliases and as the symbols a program built against 0.3 calls.
 */
#include "test_util.h"
#include "abi03_calls.h"

#include <stddef.h>
#include <tips/listdb.h>

#define CANARY 0xa5

/* A caller's struct of @size bytes followed by canary bytes, in one buffer. */
struct caller_buf {
	_Alignas(16) unsigned char b[1024];
};

static void buf_fill(struct caller_buf *c)
{
	memset(c->b, CANARY, sizeof(c->b));
}

static int canary_intact(const struct caller_buf *c, size_t from)
{
	for (size_t i = from; i < sizeof(c->b); i++)
		if (c->b[i] != CANARY)
			return 0;
	return 1;
}

static int zero_from(const struct caller_buf *c, size_t from, size_t to)
{
	for (size_t i = from; i < to; i++)
		if (c->b[i] != 0)
			return 0;
	return 1;
}

static size_t stored_size(const struct caller_buf *c)
{
	size_t s;
	memcpy(&s, c->b, sizeof(s));
	return s;
}

static void test_version(void)
{
	int ma = -1, mi = -1, pa = -1;
	const char *v = tips_version(&ma, &mi, &pa);
	CHECK(ma == TIPS_VERSION_MAJOR && mi == TIPS_VERSION_MINOR && pa == TIPS_VERSION_PATCH);
	CHECK(v && strcmp(v, TIPS_VERSION_STRING) == 0);
	CHECK_RC(TIPS_VERSION_CHECK(), 0);
	CHECK_RC(tips_version_check(TIPS_VERSION_MAJOR + 1, TIPS_VERSION_MINOR), TIPS_EVERSION);
	CHECK_RC(tips_version_check(TIPS_VERSION_MAJOR, TIPS_VERSION_MINOR + 1), TIPS_EVERSION);
}

/* _init of an older (smaller) struct: writes its size, no byte more. */
static void test_init_sizes(void)
{
	struct caller_buf c;
	size_t old = offsetof(struct tips_config, olog_size);
	buf_fill(&c);
	tips_config_init_sized((struct tips_config *)c.b, old);
	CHECK(stored_size(&c) == old && canary_intact(&c, old));

	old = offsetof(struct tips_pool_options, sim_crash_at);
	buf_fill(&c);
	tips_pool_options_init_sized((struct tips_pool_options *)c.b, old);
	CHECK(stored_size(&c) == old && canary_intact(&c, old));

	old = offsetof(struct tips_listdb_config, bloom_bits);
	buf_fill(&c);
	tips_listdb_config_init_sized((struct tips_listdb_config *)c.b, old);
	CHECK(stored_size(&c) == old && canary_intact(&c, old));

	/* A newer (larger) struct: the library's defaults, then zeros up to its size. */
	size_t newer = sizeof(struct tips_config) + 24;
	buf_fill(&c);
	tips_config_init_sized((struct tips_config *)c.b, newer);
	CHECK(stored_size(&c) == newer && zero_from(&c, sizeof(struct tips_config), newer) &&
	      canary_intact(&c, newer));
}

/* tips_open with an older config (up to olog_size, so olog_size, ulog_size, workers and
 * pool are defaulted) behaves as with a full default config; batch limits come from
 * the defaulted log sizes. */
static void test_tips_open(void)
{
	const struct tips_index_ops *ops = tips_index_find("tips-hash");
	REQUIRE(ops != NULL);
	char path[256];
	test_path(path, sizeof(path), "/dev/shm", "struct-size");

	struct caller_buf c;
	size_t old = offsetof(struct tips_config, olog_size);
	buf_fill(&c);
	struct tips_config *oldcfg = (struct tips_config *)c.b;
	tips_config_init_sized(oldcfg, old);
	oldcfg->flags = TIPS_CREATE;
	oldcfg->pool_size = 64ull << 20;
	oldcfg->expected_keys = 1000;
	struct tips_db *db = NULL;
	CHECK_RC(tips_open(path, oldcfg, ops, &db), 0);
	REQUIRE(db != NULL);
	CHECK_RC(tips_put(db, "k", 1, "v", 1), 0);
	size_t ops_old = 0, bytes_old = 0;
	tips_batch_limit(db, &ops_old, &bytes_old);
	CHECK_RC(tips_close(&db), 0);

	struct tips_config full;
	tips_config_init(&full);
	full.expected_keys = 1000;
	CHECK_RC(tips_open(path, &full, ops, &db), 0);
	REQUIRE(db != NULL);
	size_t ops_full = 0, bytes_full = 0;
	tips_batch_limit(db, &ops_full, &bytes_full);
	CHECK(ops_old == ops_full && bytes_old == bytes_full && bytes_full > 0);
	char v[4];
	size_t vlen = 0;
	CHECK_RC(tips_get(db, "k", 1, v, sizeof(v), &vlen), 0);
	CHECK_RC(tips_close(&db), 0);

	/* A newer config: zero tail accepted, a set unknown field refused. */
	size_t newer = sizeof(struct tips_config) + 16;
	buf_fill(&c);
	struct tips_config *newcfg = (struct tips_config *)c.b;
	tips_config_init_sized(newcfg, newer);
	newcfg->expected_keys = 1000;
	CHECK_RC(tips_open(path, newcfg, ops, &db), 0);
	if (db)
		CHECK_RC(tips_close(&db), 0);
	c.b[sizeof(struct tips_config) + 3] = 1;
	CHECK_RC(tips_open(path, newcfg, ops, &db), TIPS_EINVAL);
	CHECK(db == NULL);

	/* struct_size that is not a size (an uninitialised struct). */
	newcfg->struct_size = 0;
	CHECK_RC(tips_open(path, newcfg, ops, &db), TIPS_EINVAL);
	newcfg->struct_size = (size_t)-1;
	CHECK_RC(tips_open(path, newcfg, ops, &db), TIPS_EINVAL);
	unlink(path);
}

/* Pool options: an older struct (without the SIM fields) creates and opens; a newer one
 * with a set unknown field is refused by create, open and grow. */
static void test_pool_options(void)
{
	char path[256];
	test_path(path, sizeof(path), "/dev/shm", "struct-size-pool");
	struct caller_buf c;
	size_t old = offsetof(struct tips_pool_options, media);
	buf_fill(&c);
	struct tips_pool_options *o = (struct tips_pool_options *)c.b;
	tips_pool_options_init_sized(o, old);
	o->size = 16ull << 20;
	struct tips_pool *pool = NULL;
	CHECK_RC(tips_pool_create(path, o, &pool), 0);
	if (pool) {
		struct tips_pool_info info;
		tips_pool_info(pool, &info);
		CHECK(info.media != TIPS_MEDIA_SIM && info.size == 16ull << 20);
		CHECK_RC(tips_pool_close(&pool), 0);
	}
	CHECK_RC(tips_pool_open(path, o, &pool), 0);
	if (pool) {
		/* Pool info: an older caller's struct (without media and its reason) gets
		 * its size and no byte more; a newer one gets zeros after the library's. */
		size_t old_info = offsetof(struct tips_pool_info, media);
		struct caller_buf ib;
		buf_fill(&ib);
		tips_pool_info_sized(pool, (struct tips_pool_info *)ib.b, old_info);
		CHECK(canary_intact(&ib, old_info));
		CHECK(((struct tips_pool_info *)ib.b)->size == 16ull << 20);
		size_t new_info = sizeof(struct tips_pool_info) + 8;
		buf_fill(&ib);
		tips_pool_info_sized(pool, (struct tips_pool_info *)ib.b, new_info);
		CHECK(zero_from(&ib, sizeof(struct tips_pool_info), new_info) &&
		      canary_intact(&ib, new_info));
		CHECK_RC(tips_pool_close(&pool), 0);
		buf_fill(&ib);
		CHECK_RC(tips_pool_stat_sized(path, (struct tips_pool_info *)ib.b, old_info), 0);
		CHECK(canary_intact(&ib, old_info));
	}

	size_t newer = sizeof(struct tips_pool_options) + 8;
	buf_fill(&c);
	tips_pool_options_init_sized(o, newer);
	o->size = 16ull << 20;
	CHECK_RC(tips_pool_open(path, o, &pool), 0);
	if (pool)
		CHECK_RC(tips_pool_close(&pool), 0);
	c.b[newer - 1] = 7;
	CHECK_RC(tips_pool_open(path, o, &pool), TIPS_EINVAL);
	CHECK_RC(tips_pool_grow(path, 32ull << 20), 0);
	unlink(path);
	CHECK_RC(tips_pool_create(path, o, &pool), TIPS_EINVAL);
	CHECK(access(path, F_OK) != 0);
}

/* ListDB: an older config without the cache fields gets their defaults. */
static void test_listdb_config(void)
{
	char path[256];
	test_path(path, sizeof(path), "/dev/shm", "struct-size-listdb");
	struct caller_buf c;
	size_t old = offsetof(struct tips_listdb_config, cache_entries);
	buf_fill(&c);
	struct tips_listdb_config *cfg = (struct tips_listdb_config *)c.b;
	tips_listdb_config_init_sized(cfg, old);
	cfg->flags = TIPS_LISTDB_CREATE;
	cfg->expected_keys = 1000;
	cfg->pool_size = 64ull << 20;
	struct tips_listdb *db = NULL;
	CHECK_RC(tips_listdb_open(path, cfg, &db), 0);
	if (db) {
		char v[4];
		size_t vlen = 0;
		CHECK_RC(tips_listdb_put(db, "k", 1, "v", 1), 0);
		CHECK_RC(tips_listdb_get(db, "k", 1, v, sizeof(v), &vlen), 0);
		/* The cache fields defaulted (expected_keys / 8 + 1024 slots): lookups use it. */
		struct tips_listdb_stats st;
		tips_listdb_stats(db, &st);
		CHECK(st.puts == 1 && st.gets == 1);
		CHECK_RC(tips_listdb_close(&db), 0);
	}
	size_t newer = sizeof(struct tips_listdb_config) + 8;
	buf_fill(&c);
	tips_listdb_config_init_sized(cfg, newer);
	c.b[newer - 2] = 1;
	CHECK_RC(tips_listdb_open(path, cfg, &db), TIPS_EINVAL);
	CHECK(db == NULL);
	tips_listdb_destroy(path);
}

/* A fresh 64 MiB tips-hash pool under /dev/shm named after @tag (its path in @path), opened
 * with *@cfg (TIPS_CREATE, 1000 expected keys) for the tests below to reopen with it. */
static struct tips_db *open_small_hash(char *path, size_t cap, const char *tag,
				       struct tips_config *cfg, const struct tips_index_ops **ops)
{
	*ops = tips_index_find("tips-hash");
	test_path(path, cap, "/dev/shm", tag);
	tips_config_init(cfg);
	cfg->flags = TIPS_CREATE;
	cfg->pool_size = 64ull << 20;
	cfg->expected_keys = 1000;
	struct tips_db *db = NULL;
	CHECK_RC(tips_open(path, cfg, *ops, &db), 0);
	REQUIRE(db != NULL);
	return db;
}

/* Stats: an older caller's struct gets its size and no byte more; a newer one gets the
 * library's counters and zeros after them. */
static void test_stats(void)
{
	char path[256];
	struct tips_config cfg;
	const struct tips_index_ops *ops;
	struct tips_db *db = open_small_hash(path, sizeof(path), "struct-size-stats", &cfg, &ops);
	CHECK_RC(tips_put(db, "k", 1, "v", 1), 0);

	struct caller_buf c;
	size_t old = offsetof(struct tips_stats, cache_capacity);
	buf_fill(&c);
	tips_stats_sized(db, (struct tips_stats *)c.b, old);
	CHECK(canary_intact(&c, old));
	size_t newer = sizeof(struct tips_stats) + 32;
	buf_fill(&c);
	tips_stats_sized(db, (struct tips_stats *)c.b, newer);
	CHECK(((struct tips_stats *)c.b)->writes == 1);
	CHECK(zero_from(&c, sizeof(struct tips_stats), newer) && canary_intact(&c, newer));

	struct tips_heap *heap = tips_pool_heap(tips_db_pool(db));
	old = offsetof(struct tips_heap_stats, bytes_total);
	buf_fill(&c);
	tips_heap_stats_sized(heap, (struct tips_heap_stats *)c.b, old);
	CHECK(canary_intact(&c, old) && ((struct tips_heap_stats *)c.b)->allocs > 0);
	newer = sizeof(struct tips_heap_stats) + 8;
	buf_fill(&c);
	tips_heap_stats_sized(heap, (struct tips_heap_stats *)c.b, newer);
	CHECK(zero_from(&c, sizeof(struct tips_heap_stats), newer) && canary_intact(&c, newer));

	old = offsetof(struct tips_pm_counters, bytes_persisted);
	buf_fill(&c);
	tips_pm_counters_total_sized((struct tips_pm_counters *)c.b, old);
	CHECK(canary_intact(&c, old) && ((struct tips_pm_counters *)c.b)->fences > 0);
	buf_fill(&c);
	tips_pm_counters_thread_sized((struct tips_pm_counters *)c.b, old);
	CHECK(canary_intact(&c, old));
	newer = sizeof(struct tips_pm_counters) + 8;
	buf_fill(&c);
	tips_pm_counters_total_sized((struct tips_pm_counters *)c.b, newer);
	CHECK(zero_from(&c, sizeof(struct tips_pm_counters), newer) && canary_intact(&c, newer));
	CHECK_RC(tips_close(&db), 0);
	unlink(path);

	old = offsetof(struct tips_listdb_stats, gets);
	buf_fill(&c);
	tips_listdb_stats_sized(NULL, (struct tips_listdb_stats *)c.b, old);
	CHECK(zero_from(&c, 0, old) && canary_intact(&c, old));
}

/* Check reports: an older caller's report gets its size and no byte more; a newer
 * one the library's fields and zeros after them; the 0.3 symbols fill the full one. */
static void test_reports(void)
{
	char path[256];
	struct tips_config cfg;
	const struct tips_index_ops *ops;
	struct tips_db *db = open_small_hash(path, sizeof(path), "struct-size-reports", &cfg, &ops);
	CHECK_RC(tips_put(db, "k", 1, "v", 1), 0);
	CHECK_RC(tips_close(&db), 0);
	CHECK_RC(tips_open(path, &cfg, ops, &db), 0); /* reclaimed: checks may run */
	REQUIRE(db != NULL);
	struct tips_heap *heap = tips_pool_heap(tips_db_pool(db));

	struct caller_buf c;
	size_t old = offsetof(struct tips_heap_report, first_error);
	buf_fill(&c);
	CHECK_RC(tips_heap_check_sized(heap, (struct tips_heap_report *)c.b, old), 0);
	CHECK(canary_intact(&c, old) && ((struct tips_heap_report *)c.b)->blocks_allocated > 0);
	size_t newer = sizeof(struct tips_heap_report) + 16;
	buf_fill(&c);
	CHECK_RC(tips_heap_check_sized(heap, (struct tips_heap_report *)c.b, newer), 0);
	CHECK(zero_from(&c, sizeof(struct tips_heap_report), newer) && canary_intact(&c, newer));
	struct tips_heap_report hr, hr03;
	CHECK_RC(tips_heap_check(heap, &hr), 0);
	CHECK_RC(abi03_heap_check(heap, &hr03), 0);
	CHECK(hr03.blocks_allocated == hr.blocks_allocated && hr03.chunks == hr.chunks);

	old = offsetof(struct tips_db_report, leaked);
	buf_fill(&c);
	CHECK_RC(tips_db_check_sized(db, NULL, NULL, (struct tips_db_report *)c.b, old), 0);
	CHECK(canary_intact(&c, old) && ((struct tips_db_report *)c.b)->blocks_owned > 0);
	newer = sizeof(struct tips_db_report) + 8;
	buf_fill(&c);
	CHECK_RC(tips_db_check_sized(db, NULL, NULL, (struct tips_db_report *)c.b, newer), 0);
	CHECK(zero_from(&c, sizeof(struct tips_db_report), newer) && canary_intact(&c, newer));
	struct tips_db_report dr, dr03;
	CHECK_RC(tips_db_check(db, NULL, NULL, &dr), 0);
	CHECK_RC(abi03_db_check(db, &dr03), 0);
	CHECK(dr03.blocks_owned == dr.blocks_owned && dr03.blocks_allocated == dr.blocks_allocated);
	CHECK_RC(tips_db_check(NULL, NULL, NULL, &dr), TIPS_EINVAL);
	CHECK_RC(tips_close(&db), 0);
	unlink(path);

	test_path(path, sizeof(path), "/dev/shm", "struct-size-reports-listdb");
	struct tips_listdb_config lcfg;
	tips_listdb_config_init(&lcfg);
	lcfg.flags = TIPS_LISTDB_CREATE;
	lcfg.expected_keys = 1000;
	lcfg.pool_size = 64ull << 20;
	struct tips_listdb *ldb = NULL;
	CHECK_RC(tips_listdb_open(path, &lcfg, &ldb), 0);
	REQUIRE(ldb != NULL);
	CHECK_RC(tips_listdb_put(ldb, "k", 1, "v", 1), 0);
	CHECK_RC(tips_listdb_flush(ldb, 1), 0);
	old = offsetof(struct tips_listdb_report, heap_blocks);
	buf_fill(&c);
	CHECK_RC(tips_listdb_check_sized(ldb, (struct tips_listdb_report *)c.b, old), 0);
	CHECK(canary_intact(&c, old) && ((struct tips_listdb_report *)c.b)->l1_elements == 1);
	newer = sizeof(struct tips_listdb_report) + 8;
	buf_fill(&c);
	CHECK_RC(tips_listdb_check_sized(ldb, (struct tips_listdb_report *)c.b, newer), 0);
	CHECK(zero_from(&c, sizeof(struct tips_listdb_report), newer) && canary_intact(&c, newer));
	struct tips_listdb_report lr, lr03;
	CHECK_RC(tips_listdb_check(ldb, &lr), 0);
	CHECK_RC(abi03_listdb_check(ldb, &lr03), 0);
	CHECK(lr03.l1_elements == lr.l1_elements && lr03.chunks == lr.chunks);
	CHECK_RC(tips_listdb_close(&ldb), 0);
	tips_listdb_destroy(path);
}

/* The names of 0.3: the header's deprecated aliases (tips_lookup, tips_delete) and the
 * symbols the library still exports under those names behave as tips_get() and
 * tips_remove() (tips_delete stays checked). */
static void test_old_names(void)
{
	char path[256];
	struct tips_config cfg;
	const struct tips_index_ops *ops;
	struct tips_db *db = open_small_hash(path, sizeof(path), "struct-size-names", &cfg, &ops);
	char buf[8];
	size_t vlen = 0;
	CHECK_RC(tips_put(db, "old", 3, "v1", 2), 0);
	CHECK_RC(tips_lookup(db, "old", 3, buf, sizeof(buf), &vlen), 0);
	CHECK(vlen == 2 && memcmp(buf, "v1", 2) == 0);
	vlen = 0;
	CHECK_RC(abi03_lookup(db, "old", 3, buf, sizeof(buf), &vlen), 0);
	CHECK(vlen == 2 && memcmp(buf, "v1", 2) == 0);
	CHECK_RC(abi03_lookup(db, "old", 3, buf, 1, &vlen), TIPS_ESIZE);
	CHECK_RC(tips_delete(db, "old", 3), 0);
	CHECK_RC(tips_delete(db, "old", 3), TIPS_ENOTFOUND);
	CHECK_RC(tips_put(db, "old", 3, "v2", 2), 0);
	CHECK_RC(abi03_delete(db, "old", 3), 0);
	CHECK_RC(abi03_delete(db, "old", 3), TIPS_ENOTFOUND);
	CHECK_RC(tips_get(db, "old", 3, buf, sizeof(buf), &vlen), TIPS_ENOTFOUND);
	CHECK_RC(abi03_lookup(db, "old", 3, buf, sizeof(buf), &vlen), TIPS_ENOTFOUND);
	CHECK_RC(tips_close(&db), 0);
	unlink(path);
}

int main(void)
{
	test_version();
	test_init_sizes();
	test_tips_open();
	test_pool_options();
	test_listdb_config();
	test_stats();
	test_reports();
	test_old_names();
	return test_finish("test_struct_size");
}
