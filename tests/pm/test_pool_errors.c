/*
 * test_pool_errors.c - every way tips_pool_create() and tips_pool_open() can be given
 * bad input, and one good round trip.
 *
 * For each bad input the test checks three things: the call returns its own TIPS_E*
 * code (and leaves the caller's out pointer untouched); tips_errormsg() names the
 * problem (the path, the size or the address); and nothing is half made: a failed
 * create leaves no file at the path and no hidden ".NAME.creating-*" temporary in the
 * directory, and a failed open leaves the file byte for byte as it was. Cases: missing
 * directory, existing file, no space, bad sizes, files that are not pools, a foreign
 * layout version (checked before the checksum, which also covers the version), a
 * corrupted header, truncated files, a pool already open (in this process and in
 * another one), a taken mapping address, and a missing file. tips_strerror() must give
 * every code its own name.
 *
 * The positive case stores plain pointers inside a pool, closes it, and has a child
 * process open it and follow them: they stay valid because the pool is always mapped
 * at the address in its header. The clean flag (tips_pool_stat) is 0 while the pool is
 * open and 1 after a close.
 *
 * All scratch files live under /dev/shm and are removed at exit.
 */
#define _GNU_SOURCE
#include "test_util.h"
#include "pm_test_files.h"
#include "pool/pool_layout.h"

#include <stddef.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/file.h>
#include <sys/statvfs.h>
#include <zlib.h>

#define MIB (1ull << 20)
#define SHM "/dev/shm"

static char sentinel_byte;
#define SENTINEL ((struct tips_pool *)&sentinel_byte)

static struct tips_pool_options opts_of_size(uint64_t size)
{
	struct tips_pool_options o;
	tips_pool_options_init(&o);
	o.size = size;
	return o;
}

/* Creates a closed 8 MiB pool at a fresh scratch path. */
static void make_closed_pool(char *path, size_t len, const char *name)
{
	make_closed_pool_in(path, len, SHM, name, 8 * MIB);
}

/* Opens and closes @path, which must succeed. */
static void expect_opens(const char *path)
{
	struct tips_pool *pool = NULL;
	CHECK_RC(tips_pool_open(path, NULL, &pool), 0);
	if (pool)
		CHECK_RC(tips_pool_close(&pool), 0);
}

/* Lines of /proc/self/maps that mention @path. */
static int mappings_of(const char *path)
{
	FILE *f = fopen("/proc/self/maps", "r");
	REQUIRE(f != NULL);
	char line[PATH_MAX + 256];
	int n = 0;
	while (fgets(line, sizeof(line), f))
		if (strstr(line, path))
			n++;
	fclose(f);
	return n;
}

/* ---- create ---------------------------------------------------------------------- */

static void test_create_nodir(void)
{
	char dir[PATH_MAX], path[PATH_MAX + 16];
	snprintf(dir, sizeof(dir), SHM "/tips-test-nodir-%d", (int)getpid());
	rmdir(dir);
	snprintf(path, sizeof(path), "%s/a.pool", dir);
	struct tips_pool_options o = opts_of_size(8 * MIB);
	struct tips_pool *pool = SENTINEL;
	CHECK_RC(tips_pool_create(path, &o, &pool), TIPS_ENODIR);
	CHECK(pool == SENTINEL);
	CHECK_MSG_HAS(path);
	CHECK_MSG_HAS(dir);
	CHECK(!file_exists(dir));
	CHECK(!file_exists(path));

	/* The "directory" exists but is a regular file. */
	char notdir[PATH_MAX], path2[PATH_MAX + 16];
	scratch_path(notdir, sizeof(notdir), SHM, "notdir");
	static const char text[] = "a regular file, not a directory\n";
	REQUIRE(file_write_all(notdir, text, sizeof(text) - 1) == 0);
	snprintf(path2, sizeof(path2), "%s/a.pool", notdir);
	CHECK_RC(tips_pool_create(path2, &o, &pool), TIPS_ENODIR);
	CHECK(pool == SENTINEL);
	CHECK_MSG_HAS(notdir);
	CHECK(file_equals(notdir, text, sizeof(text) - 1));
}

static void test_create_exists(void)
{
	char path[PATH_MAX];
	scratch_path(path, sizeof(path), SHM, "exists");
	static const char text[] = "not a pool; must stay exactly as it is\n";
	REQUIRE(file_write_all(path, text, sizeof(text) - 1) == 0);
	struct tips_pool_options o = opts_of_size(8 * MIB);
	struct tips_pool *pool = SENTINEL;
	CHECK_RC(tips_pool_create(path, &o, &pool), TIPS_EEXIST);
	CHECK(pool == SENTINEL);
	CHECK_MSG_HAS(path);
	CHECK(file_equals(path, text, sizeof(text) - 1));
	CHECK(creating_leftovers(path) == 0);

	/* An existing pool is not replaced either. */
	char pool_path[PATH_MAX];
	make_closed_pool(pool_path, sizeof(pool_path), "exists-pool");
	size_t n = 0;
	unsigned char *before = file_read_all(pool_path, &n);
	REQUIRE(before != NULL);
	CHECK_RC(tips_pool_create(pool_path, &o, &pool), TIPS_EEXIST);
	CHECK(pool == SENTINEL);
	CHECK(file_equals(pool_path, before, n));
	CHECK(creating_leftovers(pool_path) == 0);
	free(before);
}

/*
 * The requested size exceeds the whole tmpfs, hence also its free space (statvfs).
 * Asking for more than the free space but less than the total would make tmpfs
 * allocate (and zero) all of its free memory before failing, so the test asks for more
 * than the total, which tmpfs refuses at once with ENOSPC.
 */
static void test_create_nospace(void)
{
	struct statvfs vs;
	REQUIRE(statvfs(SHM, &vs) == 0);
	uint64_t total = (uint64_t)vs.f_blocks * vs.f_frsize;
	uint64_t avail = (uint64_t)vs.f_bavail * vs.f_frsize;
	if (total == 0) {
		test_skip("test_create_nospace", SHM " has no size limit");
		return;
	}
	uint64_t size = (total + 1 + TIPS_POOL_ALIGN - 1) / TIPS_POOL_ALIGN * TIPS_POOL_ALIGN;
	REQUIRE(size > avail && size >= TIPS_POOL_MIN_SIZE);
	char path[PATH_MAX];
	scratch_path(path, sizeof(path), SHM, "nospace");
	struct tips_pool_options o = opts_of_size(size);
	struct tips_pool *pool = SENTINEL;
	CHECK_RC(tips_pool_create(path, &o, &pool), TIPS_ENOSPC);
	CHECK(pool == SENTINEL);
	CHECK_MSG_HAS(path);
	CHECK(!file_exists(path));
	CHECK(creating_leftovers(path) == 0);
}

static void test_create_bad_size(void)
{
	static const uint64_t sizes[] = {
		0,                      /* no size */
		2 * MIB,                /* aligned, too small */
		6 * MIB,                /* aligned, just below the minimum */
		8 * MIB + 4096,         /* large enough, not aligned */
		9 * MIB,                /* large enough, not aligned */
		16 * MIB - 1,           /* large enough, not aligned */
	};
	char path[PATH_MAX];
	scratch_path(path, sizeof(path), SHM, "badsize");
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		struct tips_pool_options o = opts_of_size(sizes[i]);
		struct tips_pool *pool = SENTINEL;
		CHECK_RC(tips_pool_create(path, &o, &pool), TIPS_ESIZE);
		CHECK(pool == SENTINEL);
		char num[32];
		snprintf(num, sizeof(num), "%llu", (unsigned long long)sizes[i]);
		CHECK_MSG_HAS(num);
		CHECK(!file_exists(path));
		CHECK(creating_leftovers(path) == 0);
	}
	/* Aligned and above the minimum, but the log area leaves no room for the heap. */
	struct tips_pool_options o = opts_of_size(8 * MIB);
	o.log_size = 6 * MIB;
	struct tips_pool *pool = SENTINEL;
	CHECK_RC(tips_pool_create(path, &o, &pool), TIPS_ESIZE);
	CHECK(pool == SENTINEL);
	CHECK_MSG_HAS("heap");
	CHECK(!file_exists(path));
	CHECK(creating_leftovers(path) == 0);

	/* No options at all, or options not initialised: invalid, not a size error. */
	CHECK_RC(tips_pool_create(path, NULL, &pool), TIPS_EINVAL);
	struct tips_pool_options raw;
	memset(&raw, 0, sizeof(raw));
	raw.size = 8 * MIB;
	CHECK_RC(tips_pool_create(path, &raw, &pool), TIPS_EINVAL);
	CHECK(pool == SENTINEL);
	CHECK(!file_exists(path));
}

/* A media value outside enum tips_media is refused by create and open, and the message
 * names the valid values; nothing is left behind. */
static void test_bad_media(void)
{
	char path[PATH_MAX];
	scratch_path(path, sizeof(path), SHM, "badmedia");
	static const int bad[] = { 5, 99, -1 };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct tips_pool_options o = opts_of_size(16 * MIB);
		o.media = (enum tips_media)bad[i];
		struct tips_pool *pool = SENTINEL;
		CHECK_RC(tips_pool_create(path, &o, &pool), TIPS_EINVAL);
		CHECK(pool == SENTINEL);
		CHECK_MSG_HAS("TIPS_MEDIA_AUTO");
		CHECK_MSG_HAS("SIM");
		CHECK(!file_exists(path));
		CHECK(creating_leftovers(path) == 0);
	}
	struct tips_pool_options o = opts_of_size(16 * MIB);
	struct tips_pool *pool = test_pool_create_at(path, 16 * MIB, TIPS_MEDIA_AUTO);
	REQUIRE(tips_pool_close(&pool) == 0);
	o.media = (enum tips_media)7;
	pool = SENTINEL;
	CHECK_RC(tips_pool_open(path, &o, &pool), TIPS_EINVAL);
	CHECK(pool == SENTINEL);
	CHECK_MSG_HAS("TIPS_MEDIA_AUTO");
}

/* ---- open: files that are not (good) pools ---------------------------------------- */

/* Open and stat of @path must fail with @want, naming the path, changing nothing. */
static void expect_open_fails(const char *path, int want)
{
	size_t n = 0;
	unsigned char *before = file_read_all(path, &n);
	REQUIRE(before != NULL);
	struct tips_pool *pool = SENTINEL;
	CHECK_RC(tips_pool_open(path, NULL, &pool), want);
	CHECK(pool == SENTINEL);
	CHECK_MSG_HAS(path);
	CHECK(file_equals(path, before, n));
	struct tips_pool_info info;
	CHECK_RC(tips_pool_stat(path, &info), want);
	CHECK(file_equals(path, before, n));
	CHECK(mappings_of(path) == 0);
	free(before);
}

/* Root or log sizes whose arithmetic would wrap are refused, and nothing is left. */
static void test_create_wrapping_areas(void)
{
	char path[PATH_MAX];
	scratch_path(path, sizeof(path), SHM, "wrap");
	struct tips_pool_options o = opts_of_size(16 * MIB);
	o.root_size = 0 - 4096ull;
	struct tips_pool *pool = SENTINEL;
	CHECK_RC(tips_pool_create(path, &o, &pool), TIPS_ESIZE);
	CHECK(pool == SENTINEL);
	o = opts_of_size(16 * MIB);
	o.log_size = 0 - (2ull << 20);
	CHECK_RC(tips_pool_create(path, &o, &pool), TIPS_ESIZE);
	CHECK(pool == SENTINEL);
	CHECK(!file_exists(path));
	CHECK(creating_leftovers(path) == 0);
}

static void test_open_not_a_pool(void)
{
	char path[PATH_MAX];

	scratch_path(path, sizeof(path), SHM, "random");
	unsigned char bytes[8192];
	REQUIRE(getrandom(bytes, sizeof(bytes), 0) == (ssize_t)sizeof(bytes));
	bytes[0] = 0; /* cannot be the magic */
	REQUIRE(file_write_all(path, bytes, sizeof(bytes)) == 0);
	expect_open_fails(path, TIPS_ENOTPOOL);

	scratch_path(path, sizeof(path), SHM, "empty");
	REQUIRE(file_write_all(path, "", 0) == 0);
	expect_open_fails(path, TIPS_ENOTPOOL);

	scratch_path(path, sizeof(path), SHM, "text");
	static const char text[] = "[settings]\nthis is a text file, not a pool\n";
	REQUIRE(file_write_all(path, text, sizeof(text) - 1) == 0);
	expect_open_fails(path, TIPS_ENOTPOOL);

	/* A real pool whose magic alone was overwritten: its checksum still holds with the
	 * magic restored, so it is reported as a damaged pool, not as a foreign file. */
	make_closed_pool(path, sizeof(path), "nomagic");
	REQUIRE(file_patch(path, 0, "TIPSPOOX", 8) == 0);
	expect_open_fails(path, TIPS_ECORRUPT);
}

/*
 * Patches @len bytes at @off of the closed pool's header page (and, if @fix_checksum,
 * recomputes the header checksum so that only the patched field is wrong), expects
 * open and stat to fail with @want and leave the file as patched, then restores the
 * header page and expects the pool to open again: the patch alone caused the failure.
 */
static void expect_patched_header_fails(const char *path, size_t off, const void *bytes,
					size_t len, int fix_checksum, int want)
{
	unsigned char orig[POOL_HEADER_SIZE], patched[POOL_HEADER_SIZE];
	REQUIRE(file_peek(path, 0, orig, sizeof(orig)) == 0);
	memcpy(patched, orig, sizeof(patched));
	memcpy(patched + off, bytes, len);
	if (fix_checksum) {
		uint64_t sum = crc32(0, patched, offsetof(struct pool_header, checksum));
		memcpy(patched + offsetof(struct pool_header, checksum), &sum, sizeof(sum));
	}
	REQUIRE(file_patch(path, 0, patched, sizeof(patched)) == 0);
	expect_open_fails(path, want);
	REQUIRE(file_patch(path, 0, orig, sizeof(orig)) == 0);
	expect_opens(path);
}

static void test_open_foreign_version(void)
{
	char path[PATH_MAX];
	make_closed_pool(path, sizeof(path), "version");
	const size_t off = offsetof(struct pool_header, layout_version);
	uint32_t v = POOL_LAYOUT_VERSION + 1;
	/*
	 * The checksum covers the version: a version written with its checksum is a
	 * foreign layout (EVERSION); a version that changed under a checksum that still
	 * holds for the current one is damage (ECORRUPT).
	 */
	expect_patched_header_fails(path, off, &v, sizeof(v), 0, TIPS_ECORRUPT);
	expect_patched_header_fails(path, off, &v, sizeof(v), 1, TIPS_EVERSION);

	/* The message says which version was found. */
	unsigned char orig[POOL_HEADER_SIZE], far_hdr[POOL_HEADER_SIZE];
	REQUIRE(file_peek(path, 0, orig, sizeof(orig)) == 0);
	memcpy(far_hdr, orig, sizeof(far_hdr));
	uint32_t far = 7777;
	memcpy(far_hdr + off, &far, sizeof(far));
	uint64_t sum = crc32(0, far_hdr, offsetof(struct pool_header, checksum));
	memcpy(far_hdr + offsetof(struct pool_header, checksum), &sum, sizeof(sum));
	REQUIRE(file_patch(path, 0, far_hdr, sizeof(far_hdr)) == 0);
	struct tips_pool *pool = SENTINEL;
	CHECK_RC(tips_pool_open(path, NULL, &pool), TIPS_EVERSION);
	CHECK_MSG_HAS("7777");
	REQUIRE(file_patch(path, 0, orig, sizeof(orig)) == 0);
	expect_opens(path);
}

static void test_open_corrupt_header(void)
{
	char path[PATH_MAX];
	make_closed_pool(path, sizeof(path), "corrupt");
	unsigned char b;

	/* One byte of the UUID, of the size, of the map address: checksum mismatch. */
	REQUIRE(file_peek(path, offsetof(struct pool_header, uuid) + 5, &b, 1) == 0);
	b ^= 0x01;
	expect_patched_header_fails(path, offsetof(struct pool_header, uuid) + 5, &b, 1, 0,
				    TIPS_ECORRUPT);
	REQUIRE(file_peek(path, offsetof(struct pool_header, size) + 2, &b, 1) == 0);
	b ^= 0x40;
	expect_patched_header_fails(path, offsetof(struct pool_header, size) + 2, &b, 1, 0,
				    TIPS_ECORRUPT);
	REQUIRE(file_peek(path, offsetof(struct pool_header, map_addr) + 3, &b, 1) == 0);
	b ^= 0x10;
	expect_patched_header_fails(path, offsetof(struct pool_header, map_addr) + 3, &b, 1, 0,
				    TIPS_ECORRUPT);
	/* The checksum itself. */
	REQUIRE(file_peek(path, offsetof(struct pool_header, checksum), &b, 1) == 0);
	b ^= 0xff;
	expect_patched_header_fails(path, offsetof(struct pool_header, checksum), &b, 1, 0,
				    TIPS_ECORRUPT);
	/* A consistent checksum over an impossible layout (size grown by 2 MiB). */
	uint64_t size;
	REQUIRE(file_peek(path, offsetof(struct pool_header, size), &size, sizeof(size)) == 0);
	size += TIPS_POOL_ALIGN;
	expect_patched_header_fails(path, offsetof(struct pool_header, size), &size,
				    sizeof(size), 1, TIPS_ECORRUPT);

	/* Consistent checksums over layouts whose sums wrap around 2^64, and a mapping
	 * address no process could use: refused as corrupt, never mapped or read. */
	struct pool_header h;
	REQUIRE(file_peek(path, 0, &h, sizeof(h)) == 0);
	struct pool_header bad = h;
	bad.heap_offset = 1ull << 62;
	bad.heap_size = bad.size - bad.heap_offset;
	bad.log_size = bad.heap_offset - bad.log_offset;
	expect_patched_header_fails(path, 0, &bad, offsetof(struct pool_header, checksum), 1,
				    TIPS_ECORRUPT);
	bad = h;
	bad.root_size = 0 - bad.root_offset;
	expect_patched_header_fails(path, 0, &bad, offsetof(struct pool_header, checksum), 1,
				    TIPS_ECORRUPT);
	bad = h;
	bad.map_addr = 0x1234;
	expect_patched_header_fails(path, 0, &bad, offsetof(struct pool_header, checksum), 1,
				    TIPS_ECORRUPT);
}

static void test_open_truncated(void)
{
	char path[PATH_MAX];
	make_closed_pool(path, sizeof(path), "trunc");
	struct tips_pool_info info;
	REQUIRE(tips_pool_stat(path, &info) == 0);
	REQUIRE(truncate(path, (off_t)(info.size / 2)) == 0);
	expect_open_fails(path, TIPS_ETRUNCATED);
	char num[32];
	snprintf(num, sizeof(num), "%llu", (unsigned long long)info.size);
	struct tips_pool *pool = SENTINEL;
	CHECK_RC(tips_pool_open(path, NULL, &pool), TIPS_ETRUNCATED);
	CHECK_MSG_HAS(num); /* the size the pool needs */

	/* Shorter than the header page, magic still there. */
	REQUIRE(truncate(path, 100) == 0);
	expect_open_fails(path, TIPS_ETRUNCATED);
	/* One byte short of the pool's size. */
	make_closed_pool(path, sizeof(path), "trunc1");
	REQUIRE(truncate(path, (off_t)(info.size - 1)) == 0);
	expect_open_fails(path, TIPS_ETRUNCATED);
}

static void test_open_missing(void)
{
	char path[PATH_MAX];
	scratch_path(path, sizeof(path), SHM, "missing");
	struct tips_pool *pool = SENTINEL;
	CHECK_RC(tips_pool_open(path, NULL, &pool), TIPS_ENOENT);
	CHECK(pool == SENTINEL);
	CHECK_MSG_HAS(path);
	CHECK(!file_exists(path));
	struct tips_pool_info info;
	CHECK_RC(tips_pool_stat(path, &info), TIPS_ENOENT);
	CHECK_MSG_HAS(path);
	CHECK(!file_exists(path));
}

/* ---- open: the pool is busy ------------------------------------------------------- */

static void test_open_locked_same_process(void)
{
	char path[PATH_MAX];
	scratch_path(path, sizeof(path), SHM, "locked");
	struct tips_pool_options o = opts_of_size(8 * MIB);
	struct tips_pool *first = NULL, *second = SENTINEL;
	REQUIRE(tips_pool_create(path, &o, &first) == 0);
	CHECK_RC(tips_pool_open(path, NULL, &second), TIPS_ELOCKED);
	CHECK(second == SENTINEL);
	CHECK_MSG_HAS(path);
	/* The first handle is unharmed by the failed open. */
	uint64_t *root = tips_pool_root(first, NULL);
	root[0] = 0x10c4ed;
	tips_persist(root, sizeof(root[0]));
	CHECK_RC(tips_pool_close(&first), 0);
	CHECK_RC(tips_pool_open(path, NULL, &second), 0);
	if (second) {
		CHECK(((uint64_t *)tips_pool_root(second, NULL))[0] == 0x10c4ed);
		CHECK_RC(tips_pool_close(&second), 0);
	}
}

/*
 * Another process holds the pool: the child opens it, says so through a pipe and
 * waits for the parent's word before closing it. No sleeps: every step waits on a
 * pipe read.
 */
/*
 * A create that crashed leaves `.NAME.creating-XXXXXX` behind; the next create of NAME
 * removes it, but never the temporary file of a create still in progress (locked).
 */
static void test_create_removes_abandoned_temps(void)
{
	char path[PATH_MAX], abandoned[PATH_MAX + 32], in_progress[PATH_MAX + 32];
	scratch_path(path, sizeof(path), SHM, "abandon");
	char *slash = strrchr(path, '/');
	REQUIRE(slash != NULL);
	*slash = '\0';
	snprintf(abandoned, sizeof(abandoned), "%s/.%s.creating-AAAAAA", path, slash + 1);
	snprintf(in_progress, sizeof(in_progress), "%s/.%s.creating-BBBBBB", path, slash + 1);
	*slash = '/';
	cleanup_track(abandoned, 0);
	cleanup_track(in_progress, 0);
	int a = open(abandoned, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
	int b = open(in_progress, O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600);
	REQUIRE(a >= 0 && b >= 0);
	close(a);
	REQUIRE(flock(b, LOCK_EX | LOCK_NB) == 0); /* its creator is still at work */
	struct tips_pool_options o = opts_of_size(8 * MIB);
	struct tips_pool *pool = NULL;
	CHECK_RC(tips_pool_create(path, &o, &pool), 0);
	if (pool)
		CHECK_RC(tips_pool_close(&pool), 0);
	CHECK(!file_exists(abandoned));
	CHECK(file_exists(in_progress));
	close(b);
	unlink(in_progress);
}

static void test_open_locked_other_process(void)
{
	char path[PATH_MAX];
	make_closed_pool(path, sizeof(path), "locked2");
	int to_child[2], to_parent[2];
	REQUIRE(pipe(to_child) == 0 && pipe(to_parent) == 0);
	fflush(NULL);
	pid_t pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		close(to_child[1]);
		close(to_parent[0]);
		struct tips_pool *pool = NULL;
		char c = tips_pool_open(path, NULL, &pool) == 0 ? 'O' : 'E';
		if (write(to_parent[1], &c, 1) != 1 || c != 'O')
			_exit(2);
		if (read(to_child[0], &c, 1) != 1)
			_exit(3);
		if (tips_pool_close(&pool) != 0)
			_exit(4);
		c = 'C';
		if (write(to_parent[1], &c, 1) != 1)
			_exit(5);
		_exit(0);
	}
	close(to_child[0]);
	close(to_parent[1]);
	char c = 0;
	REQUIRE(read(to_parent[0], &c, 1) == 1);
	CHECK(c == 'O');
	struct tips_pool *pool = SENTINEL;
	CHECK_RC(tips_pool_open(path, NULL, &pool), TIPS_ELOCKED);
	CHECK(pool == SENTINEL);
	CHECK_MSG_HAS(path);
	/* stat still reads the header of a pool open elsewhere: not clean. */
	struct tips_pool_info info;
	CHECK_RC(tips_pool_stat(path, &info), 0);
	CHECK(info.clean == 0);
	c = 'X';
	REQUIRE(write(to_child[1], &c, 1) == 1);
	REQUIRE(read(to_parent[0], &c, 1) == 1);
	CHECK(c == 'C');
	CHECK(child_status(pid) == 0);
	close(to_child[1]);
	close(to_parent[0]);
	pool = NULL;
	CHECK_RC(tips_pool_open(path, NULL, &pool), 0);
	if (pool)
		CHECK_RC(tips_pool_close(&pool), 0);
}

/*
 * The pool's address range is partly taken (one anonymous page at its start, middle
 * or end): open fails, maps nothing anywhere else, and succeeds once the page is gone.
 */
static void test_open_address_taken(void)
{
	char path[PATH_MAX];
	make_closed_pool(path, sizeof(path), "addr");
	struct tips_pool_info info;
	REQUIRE(tips_pool_stat(path, &info) == 0);
	REQUIRE(info.map_addr != 0 && info.map_addr % TIPS_POOL_ALIGN == 0);
	const uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
	const uint64_t offsets[] = { 0, info.size / 2, info.size - page };
	char addr_text[32];
	snprintf(addr_text, sizeof(addr_text), "0x%llx", (unsigned long long)info.map_addr);
	for (size_t i = 0; i < sizeof(offsets) / sizeof(offsets[0]); i++) {
		void *want = (void *)(uintptr_t)(info.map_addr + offsets[i]);
		void *p = mmap(want, page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS |
			       MAP_FIXED_NOREPLACE, -1, 0);
		REQUIRE(p == want);
		struct tips_pool *pool = SENTINEL;
		size_t n = 0;
		unsigned char *before = file_read_all(path, &n);
		REQUIRE(before != NULL);
		CHECK_RC(tips_pool_open(path, NULL, &pool), TIPS_EADDRINUSE);
		CHECK(pool == SENTINEL);
		CHECK_MSG_HAS(addr_text);
		CHECK(mappings_of(path) == 0);
		CHECK(file_equals(path, before, n));
		free(before);
		/* The page we placed is still ours, untouched. */
		CHECK(*(volatile char *)p == 0);
		REQUIRE(munmap(p, page) == 0);
		pool = NULL;
		CHECK_RC(tips_pool_open(path, NULL, &pool), 0);
		if (pool) {
			CHECK((uintptr_t)tips_pool_root(pool, NULL) == info.map_addr + info.root_offset);
			CHECK_RC(tips_pool_close(&pool), 0);
		}
	}

	/* Creating a pool at an address that is taken leaves nothing behind. */
	void *want = (void *)(uintptr_t)(info.map_addr + 4 * MIB);
	void *p = mmap(want, page, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE,
		       -1, 0);
	REQUIRE(p == want);
	char path2[PATH_MAX];
	scratch_path(path2, sizeof(path2), SHM, "addr-create");
	struct tips_pool_options o = opts_of_size(8 * MIB);
	o.map_addr = info.map_addr;
	struct tips_pool *pool = SENTINEL;
	CHECK_RC(tips_pool_create(path2, &o, &pool), TIPS_EADDRINUSE);
	CHECK(pool == SENTINEL);
	CHECK_MSG_HAS(addr_text);
	CHECK(!file_exists(path2));
	CHECK(creating_leftovers(path2) == 0);
	REQUIRE(munmap(p, page) == 0);
	/* A map address that is not 2 MiB aligned is refused, also without leftovers. */
	o.map_addr = info.map_addr + page;
	CHECK_RC(tips_pool_create(path2, &o, &pool), TIPS_EINVAL);
	CHECK(pool == SENTINEL);
	CHECK(!file_exists(path2));
	CHECK(creating_leftovers(path2) == 0);
}

/* ---- names ------------------------------------------------------------------------ */

static void test_strerror(void)
{
	const char *unknown = tips_strerror(TIPS_E_LAST - 1);
	const char *success = tips_strerror(0);
	CHECK(unknown != NULL && success != NULL);
	for (int a = TIPS_E_FIRST; a >= TIPS_E_LAST; a--) {
		const char *sa = tips_strerror(a);
		CHECK(sa != NULL && sa[0] != '\0');
		if (!sa)
			continue;
		CHECK(strcmp(sa, unknown) != 0);
		CHECK(strcmp(sa, success) != 0);
		for (int b = a - 1; b >= TIPS_E_LAST; b--) {
			const char *sb = tips_strerror(b);
			if (sb && strcmp(sa, sb) == 0) {
				fprintf(stderr, "codes %d and %d share the name \"%s\"\n", a, b, sa);
				test_failures++;
			}
		}
	}
	/* TIPS_ESIZE is also a lookup buffer that is too small: the name must say so. */
	CHECK(strstr(tips_strerror(TIPS_ESIZE), "buffer") != NULL);
	CHECK(strstr(tips_strerror(TIPS_ESIZE), "pool size") != NULL);
	/* A plain -errno is named by the system. */
	CHECK(strcmp(tips_strerror(-ENOENT), strerror(ENOENT)) == 0);
}

/* ---- the good path ------------------------------------------------------------------ */

/* What the test stores in the root area: plain pointers into the pool itself. */
struct node {
	struct node *next;
	uint64_t value;
};
struct root {
	struct root *self;   /* the root's own address */
	struct node *head;   /* a list of nodes elsewhere in the root area */
	uint64_t marker;     /* written by the child */
	struct node nodes[64];
	unsigned char pattern[8192];
};

static unsigned char pattern_byte(size_t i) { return (unsigned char)(i * 31 + 7); }

/* Runs in the child: opens the pool and follows the stored pointers. Exit status. */
static int child_verify(const char *path, uint64_t map_addr)
{
	struct tips_pool *pool = NULL;
	if (tips_pool_open(path, NULL, &pool) != 0)
		return 10;
	struct tips_pool_info info;
	tips_pool_info(pool, &info);
	if (info.map_addr != map_addr)
		return 11;
	if (info.clean != 1)
		return 12;
	struct root *r = tips_pool_root(pool, NULL);
	if (r->self != r)
		return 13;
	uint64_t count = 0;
	for (struct node *n = r->head; n; n = n->next) {
		if (!tips_pool_contains(pool, n, sizeof(*n)) || n->value != count * 7 + 3)
			return 14;
		count++;
	}
	if (count != 64)
		return 15;
	for (size_t i = 0; i < sizeof(r->pattern); i++)
		if (r->pattern[i] != pattern_byte(i))
			return 16;
	struct tips_pool_info disk;
	if (tips_pool_stat(path, &disk) != 0 || disk.clean != 0)
		return 17;
	r->marker = 0xc0ffee;
	tips_persist(&r->marker, sizeof(r->marker));
	if (tips_pool_close(&pool) != 0)
		return 18;
	return 0;
}

static void test_pointers_survive_in_new_process(void)
{
	char path[PATH_MAX];
	scratch_path(path, sizeof(path), SHM, "roundtrip");
	struct tips_pool_options o = opts_of_size(8 * MIB);
	struct tips_pool *pool = NULL;
	REQUIRE(tips_pool_create(path, &o, &pool) == 0);
	size_t root_size = 0;
	struct root *r = tips_pool_root(pool, &root_size);
	REQUIRE(root_size >= sizeof(*r));
	/* The root area starts zeroed. */
	int zero = 1;
	for (size_t i = 0; i < sizeof(*r); i++)
		zero &= ((unsigned char *)r)[i] == 0;
	CHECK(zero);
	r->self = r;
	for (int i = 0; i < 64; i++) {
		r->nodes[i].value = (uint64_t)i * 7 + 3;
		r->nodes[i].next = i + 1 < 64 ? &r->nodes[i + 1] : NULL;
	}
	r->head = &r->nodes[0];
	for (size_t i = 0; i < sizeof(r->pattern); i++)
		r->pattern[i] = pattern_byte(i);
	tips_persist(r, sizeof(*r));

	struct tips_pool_info info;
	CHECK_RC(tips_pool_stat(path, &info), 0);
	CHECK(info.clean == 0); /* open */
	uint64_t map_addr = info.map_addr;
	CHECK((uintptr_t)r == map_addr + info.root_offset);
	CHECK_RC(tips_pool_close(&pool), 0);
	CHECK(pool == NULL);
	CHECK_RC(tips_pool_stat(path, &info), 0);
	CHECK(info.clean == 1); /* closed */
	CHECK(info.map_addr == map_addr);

	fflush(NULL);
	pid_t pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0)
		_exit(child_verify(path, map_addr));
	int st = child_status(pid);
	if (st != 0)
		fprintf(stderr, "child_verify failed with status %d\n", st);
	CHECK(st == 0);

	CHECK_RC(tips_pool_stat(path, &info), 0);
	CHECK(info.clean == 1);
	CHECK_RC(tips_pool_open(path, NULL, &pool), 0);
	if (pool) {
		r = tips_pool_root(pool, NULL);
		CHECK(r->self == r);
		CHECK(r->marker == 0xc0ffee);
		tips_pool_info(pool, &info);
		CHECK(info.clean == 1);
		CHECK_RC(tips_pool_close(&pool), 0);
	}
}

int main(int argc, char **argv)
{
	/* The no-space case is a CTest test of its own (test_pool_errors_nospace): it is
	 * skipped where /dev/shm has no size limit, without hiding the other cases. */
	if (argc > 1 && strcmp(argv[1], "nospace") == 0) {
		test_create_nospace();
		return test_finish("test_pool_errors nospace");
	}
	test_strerror();
	test_create_nodir();
	test_create_exists();
	test_create_bad_size();
	test_bad_media();
	test_create_removes_abandoned_temps();
	test_create_wrapping_areas();
	test_open_not_a_pool();
	test_open_foreign_version();
	test_open_corrupt_header();
	test_open_truncated();
	test_open_missing();
	test_open_locked_same_process();
	test_open_locked_other_process();
	test_open_address_taken();
	test_pointers_survive_in_new_process();
	return test_finish("test_pool_errors");
}
