/*
 * test_pool_grow.c - tips_pool_grow(): the grown heap's new chunks are allocatable, data
 * written before a grow is still there after it, grows can repeat, and every bad request
 * fails with its own code and leaves the pool as it was (wrong sizes, a pool open here or
 * in another process, a file that is not a pool, no room in the file system). An unclean
 * pool (a simulated power failure left logged frees pending) grows without any
 * byte outside the two headers changing, and its next open recovers it as usual.
 * Blocks and their patterns: pool_fill.h. Scratch pools live in /dev/shm and are removed.
 */
#define _GNU_SOURCE
#include "test_util.h"
#include "pm_test_files.h"
#include "pool/pool_layout.h"
#include "pool_fill.h"

#include <signal.h>
#include <sys/resource.h>

#define MIB (1ull << 20)
#define SHM "/dev/shm"

static uint64_t pool_size(const char *path)
{
	struct tips_pool_info info;
	REQUIRE(tips_pool_stat(path, &info) == 0);
	CHECK(info.heap_offset + info.heap_size == info.size);
	return info.size;
}

/* Fills a fresh pool of @size bytes, closes it; returns the slots used. */
static uint64_t make_full_pool(char *path, size_t len, const char *name, uint64_t size)
{
	scratch_path(path, len, SHM, name);
	struct tips_pool *pool = test_pool_create_at(path, size, TIPS_MEDIA_AUTO);
	uint64_t n = fill_heap(pool, 0);
	CHECK(n > 0);
	REQUIRE(tips_pool_close(&pool) == 0);
	return n;
}

/* Grows the pool at @path (which holds @n blocks) to @size, checks the old blocks, fills
 * the new room and checks again after a reopen; returns the slots used now. */
static uint64_t grow_and_fill(const char *path, uint64_t n, uint64_t size)
{
	uint64_t before = pool_size(path);
	CHECK_RC(tips_pool_grow(path, size), 0);
	CHECK(pool_size(path) == size);
	struct tips_pool *pool = open_pool(path);
	struct tips_pool_info info;
	tips_pool_info(pool, &info);
	CHECK(info.size == size);
	CHECK(intact_blocks(pool, n) == n);
	expect_heap_clean(pool);
	uint64_t m = fill_heap(pool, n);
	/* Every added byte became chunks; the old heap may also have had room for one more
	 * chunk after its last (its table rounded up), which the grown heap uses. */
	uint64_t added_chunks = (size - before) / POOL_CHUNK_BYTES;
	CHECK(m - n >= added_chunks && m - n <= added_chunks + 1);
	if (m - n < added_chunks || m - n > added_chunks + 1)
		fprintf(stderr, "grow %llu -> %llu: %llu new blocks, %llu chunks added\n",
			(unsigned long long)before, (unsigned long long)size,
			(unsigned long long)(m - n), (unsigned long long)added_chunks);
	CHECK_RC(tips_pool_close(&pool), 0);
	pool = open_pool(path);
	CHECK(intact_blocks(pool, m) == m);
	expect_heap_clean(pool);
	CHECK_RC(tips_pool_close(&pool), 0);
	return m;
}

static void test_grow_then_allocate(void)
{
	char path[PATH_MAX];
	uint64_t n = make_full_pool(path, sizeof(path), "grow", 16 * MIB);
	grow_and_fill(path, n, 32 * MIB);
}

static void test_grow_twice(void)
{
	char path[PATH_MAX];
	uint64_t n = make_full_pool(path, sizeof(path), "twice", 16 * MIB);
	n = grow_and_fill(path, n, 18 * MIB);
	n = grow_and_fill(path, n, 64 * MIB);
	CHECK(n > 200);
}

/* A failed grow leaves the file byte for byte as it was. */
static void expect_grow_fails(const char *path, uint64_t size, int want, const char *needle)
{
	size_t len = 0;
	unsigned char *before = file_read_all(path, &len);
	REQUIRE(before != NULL);
	CHECK_RC(tips_pool_grow(path, size), want);
	if (needle)
		CHECK_MSG_HAS(needle);
	CHECK(file_equals(path, before, len));
	free(before);
}

static void test_wrong_sizes(void)
{
	char path[PATH_MAX];
	make_closed_pool_in(path, sizeof(path), SHM, "sizes", 16 * MIB);
	expect_grow_fails(path, 16 * MIB, TIPS_ESIZE, "already has");
	expect_grow_fails(path, 8 * MIB, TIPS_ESIZE, "already has");
	expect_grow_fails(path, 0, TIPS_ESIZE, "already has");
	expect_grow_fails(path, 17 * MIB, TIPS_ESIZE, "multiples of 2 MiB");
	expect_grow_fails(path, 32 * MIB + 4096, TIPS_ESIZE, "multiples of 2 MiB");
	expect_grow_fails(path, 1ull << 47, TIPS_ESIZE, "address space");
	/* A 12 MiB heap's chunk table describes about 64 times its chunks, not 4096. */
	expect_grow_fails(path, 64ull << 30, TIPS_ESIZE, "chunk table");
	CHECK(pool_size(path) == 16 * MIB);
	CHECK_RC(tips_pool_grow(NULL, 32 * MIB), TIPS_EINVAL);
}

static void test_not_a_pool(void)
{
	char path[PATH_MAX];
	scratch_path(path, sizeof(path), SHM, "notpool");
	CHECK_RC(tips_pool_grow(path, 32 * MIB), TIPS_ENOENT);
	CHECK(!file_exists(path));
	unsigned char junk[8192];
	for (size_t i = 0; i < sizeof(junk); i++)
		junk[i] = (unsigned char)(i * 37 + 1);
	REQUIRE(file_write_all(path, junk, sizeof(junk)) == 0);
	expect_grow_fails(path, 32 * MIB, TIPS_ENOTPOOL, path);
	/* A pool whose header checksum is wrong is refused too. */
	char bad[PATH_MAX];
	make_closed_pool_in(bad, sizeof(bad), SHM, "badsum", 16 * MIB);
	uint64_t wrong = 12345;
	REQUIRE(file_patch(bad, offsetof(struct pool_header, create_time), &wrong, 8) == 0);
	expect_grow_fails(bad, 32 * MIB, TIPS_ECORRUPT, "checksum");
	char dir[PATH_MAX];
	scratch_path(dir, sizeof(dir), SHM, "dir");
	cleanup_track(dir, 1);
	REQUIRE(mkdir(dir, 0700) == 0);
	CHECK_RC(tips_pool_grow(dir, 32 * MIB), TIPS_ENOTPOOL);
}

static void test_open_here(void)
{
	char path[PATH_MAX];
	make_closed_pool_in(path, sizeof(path), SHM, "openhere", 16 * MIB);
	struct tips_pool *pool = open_pool(path);
	CHECK_RC(tips_pool_grow(path, 32 * MIB), TIPS_ELOCKED);
	CHECK_RC(tips_pool_close(&pool), 0);
	CHECK(pool_size(path) == 16 * MIB);
	CHECK_RC(tips_pool_grow(path, 32 * MIB), 0);
}

/* A child holds the pool open until the parent has tried to grow it. */
static void test_open_elsewhere(void)
{
	char path[PATH_MAX];
	make_closed_pool_in(path, sizeof(path), SHM, "openthere", 16 * MIB);
	int to_child[2], to_parent[2];
	REQUIRE(pipe(to_child) == 0 && pipe(to_parent) == 0);
	fflush(NULL);
	pid_t pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		struct tips_pool *pool = NULL;
		char c = tips_pool_open(path, NULL, &pool) == 0 ? 'O' : 'E';
		if (write(to_parent[1], &c, 1) != 1 || c != 'O')
			_exit(2);
		if (read(to_child[0], &c, 1) != 1 || tips_pool_close(&pool) != 0)
			_exit(3);
		_exit(0);
	}
	char c = 0;
	REQUIRE(read(to_parent[0], &c, 1) == 1);
	CHECK(c == 'O');
	expect_grow_fails(path, 32 * MIB, TIPS_ELOCKED, path);
	REQUIRE(write(to_child[1], "x", 1) == 1);
	CHECK(child_status(pid) == 0);
	CHECK_RC(tips_pool_grow(path, 32 * MIB), 0);
	CHECK(pool_size(path) == 32 * MIB);
	close(to_child[0]);
	close(to_child[1]);
	close(to_parent[0]);
	close(to_parent[1]);
}

/* The file may not exceed 20 MiB in a child (RLIMIT_FSIZE): extending to 32 MiB finds no
 * room, which is TIPS_ENOSPC, and the pool stays 16 MiB and opens. */
static void test_no_room(void)
{
	char path[PATH_MAX];
	make_closed_pool_in(path, sizeof(path), SHM, "noroom", 16 * MIB);
	fflush(NULL);
	pid_t pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		signal(SIGXFSZ, SIG_IGN);
		struct rlimit lim = { 20 * MIB, 20 * MIB };
		if (setrlimit(RLIMIT_FSIZE, &lim) != 0)
			_exit(10);
		int rc = tips_pool_grow(path, 32 * MIB);
		_exit(rc == TIPS_ENOSPC && strstr(tips_errormsg(), path) ? 0 : 11);
	}
	CHECK(child_status(pid) == 0);
	CHECK(pool_size(path) == 16 * MIB);
	struct tips_pool *pool = open_pool(path);
	expect_heap_clean(pool);
	CHECK_RC(tips_pool_close(&pool), 0);
}

/*
 * An unclean pool: frees recorded in the heap's logs but never checkpointed, then a
 * simulated power failure. Grow must change nothing but the pool header page and the
 * heap header's first line (and the size of the file); the next open then recovers the
 * pool exactly as it would have without the grow.
 */
static void test_unclean_pool(void)
{
	char path[PATH_MAX];
	scratch_path(path, sizeof(path), SHM, "unclean");
	struct tips_pool *pool = test_pool_create_at(path, 16 * MIB, TIPS_MEDIA_SIM);
	uint64_t full = fill_heap(pool, 0), freed = 3;
	REQUIRE(full > freed);
	/* The allocation that found the heap full checkpointed; these frees stay logged. */
	uint64_t *slots = tips_pool_root(pool, NULL);
	for (uint64_t s = full - freed; s < full; s++)
		CHECK_RC(tips_heap_free_from(tips_pool_heap(pool), &slots[s]), 0);
	uint64_t n = full - freed;
	struct tips_pool_info info;
	tips_pool_info(pool, &info);
	REQUIRE(tips_pool_sim_power_fail(&pool, 0.0, 7) == 0);
	struct tips_pool_info st;
	REQUIRE(tips_pool_stat(path, &st) == 0);
	CHECK(!st.clean);
	size_t len_before = 0, len_after = 0;
	unsigned char *before = file_read_all(path, &len_before);
	REQUIRE(before != NULL && len_before == 16 * MIB);

	CHECK_RC(tips_pool_grow(path, 24 * MIB), 0);
	unsigned char *after = file_read_all(path, &len_after);
	REQUIRE(after != NULL);
	CHECK(len_after == 24 * MIB);
	uint64_t ho = info.heap_offset;
	CHECK(memcmp(before + POOL_HEADER_SIZE, after + POOL_HEADER_SIZE,
		     ho - POOL_HEADER_SIZE) == 0); /* root and log areas */
	CHECK(memcmp(before + ho + 64, after + ho + 64, len_before - ho - 64) == 0);
	CHECK(memcmp(before + ho, after + ho, 64) != 0); /* the heap's chunk count */
	free(before);
	free(after);
	REQUIRE(tips_pool_stat(path, &st) == 0);
	CHECK(!st.clean);
	CHECK(st.size == 24 * MIB);

	pool = open_pool(path);
	struct tips_heap_stats hs;
	tips_heap_stats(tips_pool_heap(pool), &hs);
	CHECK(hs.recovered_records == freed); /* the open replayed the logged frees */
	CHECK(intact_blocks(pool, n) == n);
	expect_heap_clean(pool);
	uint64_t m = fill_heap(pool, n);
	uint64_t added = 8 * MIB / POOL_CHUNK_BYTES + freed;
	CHECK(m - n >= added && m - n <= added + 1);
	CHECK_RC(tips_pool_close(&pool), 0);
}

int main(void)
{
	test_grow_then_allocate();
	test_grow_twice();
	test_wrong_sizes();
	test_not_a_pool();
	test_open_here();
	test_open_elsewhere();
	test_no_room();
	test_unclean_pool();
	return test_finish("test_pool_grow");
}
