/*
 * test_persist.c - the persistence primitives' counters, and the media of a pool.
 *
 * Counters (tips_pm_counters_thread / _total): a tips_flush of [addr, addr+len) counts
 * every 64-byte cache line the range touches and len bytes; a tips_drain counts one
 * fence; tips_persist is both; pm_copy_flush (internal) copies exactly its range and
 * counts as a flush of it. The expected line count is computed here from the
 * range's first and last byte, for aligned and unaligned ranges, in DRAM, in a pool on
 * /dev/shm and in a pool on a disk file system. The totals must add exactly: work done
 * by threads that have exited stays counted, and while several threads persist at once
 * (and while they exit) the total is always the exact sum of what they did.
 *
 * Media: a pool under /dev/shm is reported as shm, a pool on a disk file system (/tmp,
 * or the test binary's directory if /tmp is a tmpfs) as file, both with a reason; on
 * file media tips_persist goes through msync, and data persisted there survives a
 * close and reopen.
 */
#define _GNU_SOURCE
#include "test_util.h"
#include "test_disk.h"
#include "pm_test_files.h"
#include "pm/pm.h"

#include <pthread.h>
#include <sys/mman.h>

#define MIB (1ull << 20)
#define LINE 64u

static struct tips_pm_counters thread_now(void)
{
	struct tips_pm_counters c;
	tips_pm_counters_thread(&c);
	return c;
}

static struct tips_pm_counters total_now(void)
{
	struct tips_pm_counters c;
	tips_pm_counters_total(&c);
	return c;
}

/* Cache lines that [off, off+len) touches, from its first and last byte. */
static uint64_t lines_of(uint64_t off, uint64_t len)
{
	return len == 0 ? 0 : (off + len - 1) / LINE - off / LINE + 1;
}

static int counters_eq(struct tips_pm_counters a, uint64_t lines, uint64_t fences,
		       uint64_t bytes)
{
	return a.lines_flushed == lines && a.fences == fences && a.bytes_persisted == bytes;
}

static struct tips_pm_counters delta(struct tips_pm_counters after,
				     struct tips_pm_counters before)
{
	struct tips_pm_counters d = {
		after.lines_flushed - before.lines_flushed,
		after.fences - before.fences,
		after.bytes_persisted - before.bytes_persisted,
	};
	return d;
}

#define CHECK_DELTA(d, want_lines, want_fences, want_bytes)                              \
	do {                                                                             \
		struct tips_pm_counters d_ = (d);                                        \
		uint64_t wl_ = (want_lines), wf_ = (want_fences), wb_ = (want_bytes);    \
		if (!counters_eq(d_, wl_, wf_, wb_)) {                                   \
			fprintf(stderr, "%s:%d: counted %llu lines, %llu fences, %llu bytes; " \
				"wanted %llu, %llu, %llu\n", __FILE__, __LINE__,        \
				(unsigned long long)d_.lines_flushed,                    \
				(unsigned long long)d_.fences,                           \
				(unsigned long long)d_.bytes_persisted,                  \
				(unsigned long long)wl_, (unsigned long long)wf_,        \
				(unsigned long long)wb_);                                \
			test_failures++;                                                 \
		}                                                                        \
	} while (0)

/* ---- one thread --------------------------------------------------------------------- */

static const struct { uint64_t off, len; } ranges[] = {
	{ 0, 4096 },  /* 64 aligned lines */
	{ 0, 64 },    { 0, 1 },    { 63, 1 },  { 63, 2 },   { 60, 8 },
	{ 1, 64 },    { 0, 65 },   { 5, 128 }, { 202, 320 }, { 64, 4032 },
	{ 4090, 20 }, /* crosses a page boundary */
};

/* Checks the counts of flush, drain and persist on ranges of @base (64-byte aligned). */
static void check_counts_at(char *base)
{
	REQUIRE((uintptr_t)base % LINE == 0);
	for (size_t i = 0; i < sizeof(ranges) / sizeof(ranges[0]); i++) {
		uint64_t off = ranges[i].off, len = ranges[i].len, want = lines_of(off, len);
		memset(base + off, (int)(i + 1), len);

		struct tips_pm_counters t0 = thread_now(), g0 = total_now();
		tips_persist(base + off, len);
		CHECK_DELTA(delta(thread_now(), t0), want, 1, len);
		CHECK_DELTA(delta(total_now(), g0), want, 1, len);

		t0 = thread_now();
		tips_flush(base + off, len);
		CHECK_DELTA(delta(thread_now(), t0), want, 0, len);
	}
	struct tips_pm_counters t0 = thread_now(), g0 = total_now();
	tips_drain();
	CHECK_DELTA(delta(thread_now(), t0), 0, 1, 0);
	CHECK_DELTA(delta(total_now(), g0), 0, 1, 0);

	t0 = thread_now();
	tips_flush(base, 0);
	CHECK_DELTA(delta(thread_now(), t0), 0, 0, 0);
	tips_persist(base, 0);
	CHECK_DELTA(delta(thread_now(), t0), 0, 1, 0);
}

/* Runs @check on a 16 KiB DRAM buffer, then on the root of a new 8 MiB pool in
 * /dev/shm named @name (at least @min_root bytes). */
static void at_dram_and_shm(void (*check)(char *), const char *name, size_t min_root)
{
	char *dram = aligned_alloc(LINE, 16384);
	REQUIRE(dram != NULL);
	check(dram);
	free(dram);
	char path[PATH_MAX];
	scratch_path(path, sizeof(path), "/dev/shm", name);
	struct tips_pool_options o;
	tips_pool_options_init(&o);
	o.size = 8 * MIB;
	struct tips_pool *pool = NULL;
	REQUIRE(tips_pool_create(path, &o, &pool) == 0);
	size_t root_size = 0;
	char *root = tips_pool_root(pool, &root_size);
	REQUIRE(root_size >= min_root);
	check(root);
	CHECK_RC(tips_pool_close(&pool), 0);
}

static void test_counts_one_thread(void)
{
	at_dram_and_shm(check_counts_at, "counts", 4096 + 20);
}

/* pm_copy_flush, both the way this CPU gets (pm_copy_way) and streaming forced: the
 * bytes of every range of ranges[] arrive, nothing around them changes, and it counts
 * as tips_flush would (lines touched, bytes, no fence); streaming, the aligned ranges
 * take the movnti path on DRAM and shm media, the others the plain one. */
#define COPY_AREA 4608u /* covers every range of ranges[] */

static void check_copy_flush_at(char *base)
{
	static unsigned char src[8192];
	for (size_t i = 0; i < sizeof(src); i++)
		src[i] = (unsigned char)(i * 7 + 3);
	void (*const copy[])(void *, const void *, size_t) = { pm_copy_flush,
							       pm_copy_flush_streaming };
	for (size_t i = 0; i < 2 * sizeof(ranges) / sizeof(ranges[0]); i++) {
		size_t r = i / 2;
		uint64_t off = ranges[r].off, len = ranges[r].len;
		memset(base, 0xee, COPY_AREA);
		struct tips_pm_counters t0 = thread_now();
		copy[i % 2](base + off, src + i, len);
		CHECK_DELTA(delta(thread_now(), t0), lines_of(off, len), 0, len);
		tips_drain();
		CHECK(memcmp(base + off, src + i, len) == 0);
		size_t outside = 0;
		for (uint64_t b = 0; b < COPY_AREA; b++)
			outside += (b < off || b >= off + len) && (unsigned char)base[b] != 0xee;
		CHECK(outside == 0);
	}
}

static void test_copy_flush(void)
{
	at_dram_and_shm(check_copy_flush_at, "copy", COPY_AREA);
}

/* ---- several threads ---------------------------------------------------------------- */

#define NTHREADS 4

struct work {
	unsigned count;      /* persists to do */
	size_t off, len;     /* range inside buf */
	unsigned drains;     /* extra lone drains */
	char *buf;
	pthread_barrier_t *start, *done, *release; /* NULL: run without waiting */
	struct tips_pm_counters at_start, at_end;   /* the thread's own counters */
};

static void work_expected(const struct work *w, struct tips_pm_counters *out)
{
	out->lines_flushed = (uint64_t)w->count * lines_of(w->off, w->len);
	out->fences = (uint64_t)w->count + w->drains;
	out->bytes_persisted = (uint64_t)w->count * w->len;
}

static void *work_run(void *arg)
{
	struct work *w = arg;
	tips_pm_counters_thread(&w->at_start);
	if (w->start)
		pthread_barrier_wait(w->start);
	for (unsigned i = 0; i < w->count; i++) {
		w->buf[w->off + i % w->len] = (char)i;
		tips_persist(w->buf + w->off, w->len);
	}
	for (unsigned i = 0; i < w->drains; i++)
		tips_drain();
	tips_pm_counters_thread(&w->at_end);
	if (w->done)
		pthread_barrier_wait(w->done);
	if (w->release)
		pthread_barrier_wait(w->release);
	return NULL;
}

static void check_thread_own_counts(const struct work *w)
{
	struct tips_pm_counters want;
	work_expected(w, &want);
	CHECK_DELTA(w->at_start, 0, 0, 0); /* a new thread starts from zero */
	CHECK_DELTA(w->at_end, want.lines_flushed, want.fences, want.bytes_persisted);
}

/* Threads that persist and exit: the total keeps their counts. */
static void test_exited_threads_stay_counted(void)
{
	struct work w[NTHREADS];
	struct tips_pm_counters sum = { 0, 0, 0 };
	for (int t = 0; t < NTHREADS; t++) {
		memset(&w[t], 0, sizeof(w[t]));
		w[t].count = 100u * (unsigned)(t + 1);
		w[t].off = (size_t)t * 3;               /* aligned for t = 0, then not */
		w[t].len = 64u * (unsigned)(t + 1) + (unsigned)t;
		w[t].drains = (unsigned)t;
		w[t].buf = aligned_alloc(LINE, 4096);
		REQUIRE(w[t].buf != NULL);
		struct tips_pm_counters e;
		work_expected(&w[t], &e);
		sum.lines_flushed += e.lines_flushed;
		sum.fences += e.fences;
		sum.bytes_persisted += e.bytes_persisted;
	}
	struct tips_pm_counters mine0 = thread_now(), g0 = total_now();
	pthread_t tid[NTHREADS];
	for (int t = 0; t < NTHREADS; t++)
		REQUIRE(pthread_create(&tid[t], NULL, work_run, &w[t]) == 0);
	for (int t = 0; t < NTHREADS; t++)
		REQUIRE(pthread_join(tid[t], NULL) == 0);
	CHECK_DELTA(delta(total_now(), g0), sum.lines_flushed, sum.fences, sum.bytes_persisted);
	CHECK_DELTA(delta(thread_now(), mine0), 0, 0, 0); /* others' work is not mine */
	for (int t = 0; t < NTHREADS; t++) {
		check_thread_own_counts(&w[t]);
		free(w[t].buf);
	}
	/* Still there later, after this thread did more work of its own. */
	char *buf = aligned_alloc(LINE, 4096);
	REQUIRE(buf != NULL);
	tips_persist(buf, 256);
	CHECK_DELTA(delta(total_now(), g0), sum.lines_flushed + 4, sum.fences + 1,
		    sum.bytes_persisted + 256);
	free(buf);
}

/*
 * Threads persist at the same time (released together by a barrier); once all are done
 * but still alive, and again while they exit, and after they are joined, the total is
 * exactly the sum of their work.
 */
/*
 * A thread that persists again from a thread-exit destructor that runs after the
 * library retired its counters: those counts are kept, and nothing is counted twice.
 */
static pthread_key_t late_key;
static char late_buf[8192] __attribute__((aligned(64)));

static void persist_at_exit(void *arg)
{
	(void)arg;
	tips_persist(late_buf + 1024, 64); /* 1 line, 1 fence, 64 bytes */
}

static void *persist_then_exit(void *arg)
{
	(void)arg;
	tips_persist(late_buf, 6400);      /* 100 lines, 1 fence */
	pthread_setspecific(late_key, late_buf);
	return NULL;
}

static void test_counts_made_while_exiting(void)
{
	tips_persist(late_buf, 64); /* the library's own key exists before ours */
	REQUIRE(pthread_key_create(&late_key, persist_at_exit) == 0);
	struct tips_pm_counters g0 = total_now();
	pthread_t tid;
	REQUIRE(pthread_create(&tid, NULL, persist_then_exit, NULL) == 0);
	REQUIRE(pthread_join(tid, NULL) == 0);
	CHECK_DELTA(delta(total_now(), g0), 101, 2, 6464);
	pthread_key_delete(late_key);
}

static void test_concurrent_threads_add_exactly(void)
{
	pthread_barrier_t start, done, release;
	REQUIRE(pthread_barrier_init(&start, NULL, NTHREADS + 1) == 0);
	REQUIRE(pthread_barrier_init(&done, NULL, NTHREADS + 1) == 0);
	REQUIRE(pthread_barrier_init(&release, NULL, NTHREADS + 1) == 0);
	struct work w[NTHREADS];
	struct tips_pm_counters sum = { 0, 0, 0 };
	for (int t = 0; t < NTHREADS; t++) {
		memset(&w[t], 0, sizeof(w[t]));
		w[t].count = 20000;
		w[t].off = (size_t)t * 17;
		w[t].len = 128;
		w[t].drains = 1000;
		w[t].buf = aligned_alloc(LINE, 4096);
		REQUIRE(w[t].buf != NULL);
		w[t].start = &start;
		w[t].done = &done;
		w[t].release = &release;
		struct tips_pm_counters e;
		work_expected(&w[t], &e);
		sum.lines_flushed += e.lines_flushed;
		sum.fences += e.fences;
		sum.bytes_persisted += e.bytes_persisted;
	}
	struct tips_pm_counters g0 = total_now();
	pthread_t tid[NTHREADS];
	for (int t = 0; t < NTHREADS; t++)
		REQUIRE(pthread_create(&tid[t], NULL, work_run, &w[t]) == 0);
	pthread_barrier_wait(&start);
	pthread_barrier_wait(&done);
	/* All work is done, every thread is alive. */
	CHECK_DELTA(delta(total_now(), g0), sum.lines_flushed, sum.fences, sum.bytes_persisted);
	pthread_barrier_wait(&release);
	/* The threads are exiting now: their counts move to the retired totals. */
	int wrong = 0;
	for (int i = 0; i < 2000; i++) {
		struct tips_pm_counters d = delta(total_now(), g0);
		wrong += !counters_eq(d, sum.lines_flushed, sum.fences, sum.bytes_persisted);
	}
	CHECK(wrong == 0);
	for (int t = 0; t < NTHREADS; t++)
		REQUIRE(pthread_join(tid[t], NULL) == 0);
	CHECK_DELTA(delta(total_now(), g0), sum.lines_flushed, sum.fences, sum.bytes_persisted);
	for (int t = 0; t < NTHREADS; t++) {
		check_thread_own_counts(&w[t]);
		free(w[t].buf);
	}
	pthread_barrier_destroy(&start);
	pthread_barrier_destroy(&done);
	pthread_barrier_destroy(&release);
}

/* ---- media ---------------------------------------------------------------------------- */

static unsigned char pattern_byte(size_t i) { return (unsigned char)(i * 131 + 17); }

static void test_media_shm(void)
{
	char path[PATH_MAX];
	scratch_path(path, sizeof(path), "/dev/shm", "media-shm");
	struct tips_pool_options o;
	tips_pool_options_init(&o);
	o.size = 8 * MIB;
	struct tips_pool *pool = NULL;
	REQUIRE(tips_pool_create(path, &o, &pool) == 0);
	struct tips_pool_info info;
	tips_pool_info(pool, &info);
	CHECK(info.media == TIPS_MEDIA_SHM);
	CHECK(info.media_reason[0] != '\0');
	CHECK(strcmp(tips_media_name(info.media), "shm") == 0);
	CHECK_RC(tips_pool_close(&pool), 0);
	memset(&info, 0, sizeof(info));
	CHECK_RC(tips_pool_stat(path, &info), 0);
	CHECK(info.media == TIPS_MEDIA_SHM);
	CHECK(info.media_reason[0] != '\0');
}

/* Pages of [map_addr, map_addr + size) resident in memory. */
static size_t resident_pages(const struct tips_pool_info *info)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE), n = info->size / page;
	unsigned char *vec = malloc(n);
	REQUIRE(vec != NULL);
	REQUIRE(mincore((void *)(uintptr_t)info->map_addr, info->size, vec) == 0);
	size_t in = 0;
	for (size_t i = 0; i < n; i++)
		in += vec[i] & 1;
	free(vec);
	return in;
}

/* tips_pool_options.prefault: every page of the pool is resident when create and open
 * return (without it the heap's pages are not), and nothing else changes. */
static void test_prefault(void)
{
	char path[PATH_MAX];
	scratch_path(path, sizeof(path), "/dev/shm", "prefault");
	struct tips_pool_options o;
	tips_pool_options_init(&o);
	CHECK(o.prefault == 0);
	o.size = 32 * MIB;
	struct tips_pool *pool = NULL;
	REQUIRE(tips_pool_create(path, &o, &pool) == 0);
	struct tips_pool_info info;
	tips_pool_info(pool, &info);
	size_t pages = info.size / (size_t)sysconf(_SC_PAGESIZE);
	CHECK(resident_pages(&info) < pages); /* the heap is untouched */
	unsigned char *root = tips_pool_root(pool, NULL);
	for (size_t i = 0; i < 4096; i++)
		root[i] = pattern_byte(i);
	tips_persist(root, 4096);
	CHECK_RC(tips_pool_close(&pool), 0);

	o.prefault = 1;
	REQUIRE(tips_pool_open(path, &o, &pool) == 0);
	tips_pool_info(pool, &info);
	CHECK(resident_pages(&info) == pages);
	root = tips_pool_root(pool, NULL);
	size_t bad = 0;
	for (size_t i = 0; i < 4096; i++)
		bad += root[i] != pattern_byte(i);
	CHECK(bad == 0);
	CHECK_RC(tips_pool_close(&pool), 0);

	char path2[PATH_MAX];
	scratch_path(path2, sizeof(path2), "/dev/shm", "prefault-create");
	REQUIRE(tips_pool_create(path2, &o, &pool) == 0);
	tips_pool_info(pool, &info);
	CHECK(resident_pages(&info) == pages);
	CHECK_RC(tips_pool_close(&pool), 0);
}

static void test_media_file(void)
{
	char dir[PATH_MAX];
	if (!test_disk_dir(dir, sizeof(dir))) {
		test_skip("test_media_file", "no disk file system found");
		return;
	}
	char path[PATH_MAX];
	scratch_path(path, sizeof(path), dir, "media-file");
	struct tips_pool_options o;
	tips_pool_options_init(&o);
	o.size = 8 * MIB;
	struct tips_pool *pool = NULL;
	int rc = tips_pool_create(path, &o, &pool);
	if (rc)
		fprintf(stderr, "create %s: %s\n", path, tips_errormsg());
	REQUIRE(rc == 0);
	struct tips_pool_info info;
	tips_pool_info(pool, &info);
	CHECK(info.media == TIPS_MEDIA_FILE);
	CHECK(info.media_reason[0] != '\0');
	CHECK(strcmp(tips_media_name(info.media), "file") == 0);

	/* Counting is the same on file media (msync instead of cache-line flushes). */
	check_counts_at(tips_pool_root(pool, NULL));

	const size_t n = 65536;
	unsigned char *root = tips_pool_root(pool, NULL);
	for (size_t i = 0; i < n; i++)
		root[i] = pattern_byte(i);
	struct tips_pm_counters t0 = thread_now();
	tips_persist(root, n);
	CHECK_DELTA(delta(thread_now(), t0), n / LINE, 1, n);
	/* A pool on /dev/shm open at the same time still persists with its own media. */
	char shm_path[PATH_MAX];
	scratch_path(shm_path, sizeof(shm_path), "/dev/shm", "media-mixed");
	struct tips_pool *shm = NULL;
	REQUIRE(tips_pool_create(shm_path, &o, &shm) == 0);
	uint64_t *sroot = tips_pool_root(shm, NULL);
	sroot[0] = 0x5e55;
	tips_persist(sroot, 8);
	CHECK_RC(tips_pool_close(&shm), 0);
	CHECK_RC(tips_pool_close(&pool), 0);

	memset(&info, 0, sizeof(info));
	CHECK_RC(tips_pool_stat(path, &info), 0);
	CHECK(info.media == TIPS_MEDIA_FILE);
	CHECK(info.media_reason[0] != '\0');
	CHECK(info.clean == 1);

	REQUIRE(tips_pool_open(path, NULL, &pool) == 0);
	root = tips_pool_root(pool, NULL);
	size_t bad = 0;
	for (size_t i = 0; i < n; i++)
		bad += root[i] != pattern_byte(i);
	CHECK(bad == 0);
	CHECK_RC(tips_pool_close(&pool), 0);
	/* And the file itself holds it, read without mapping. */
	unsigned char head[256];
	REQUIRE(file_peek(path, (off_t)info.root_offset, head, sizeof(head)) == 0);
	for (size_t i = 0; i < sizeof(head); i++)
		CHECK(head[i] == pattern_byte(i));

	REQUIRE(tips_pool_open(shm_path, NULL, &shm) == 0);
	CHECK(((uint64_t *)tips_pool_root(shm, NULL))[0] == 0x5e55);
	CHECK_RC(tips_pool_close(&shm), 0);
}

int main(int argc, char **argv)
{
	/* The disk-media case is a CTest test of its own (test_persist_media_file): it is
	 * skipped where no disk file system is found, without hiding the other cases. */
	if (argc > 1 && strcmp(argv[1], "media_file") == 0) {
		test_media_file();
		return test_finish("test_persist media_file");
	}
	test_counts_one_thread();
	test_copy_flush();
	test_exited_threads_stay_counted();
	test_counts_made_while_exiting();
	test_concurrent_threads_add_exactly();
	test_media_shm();
	test_prefault();
	return test_finish("test_persist");
}
