/*
 * test_sim.c - simulated power failure (media TIPS_MEDIA_SIM).
 *
 * On SIM media a pool's stores land in a private working view; only cache lines that
 * were flushed and then fenced reach the file. tips_pool_sim_power_fail() then decides
 * the fate of the rest from a seed: each flushed-but-unfenced line survives with
 * probability 1/2, each dirty never-flushed line with probability @evict. This test
 * checks that model from the outside, by reading the pool file afterwards:
 *   - an unflushed store is lost (evict 0), a persisted one (flush + fence) survives;
 *   - a flushed, unfenced line comes back either old or new, never anything else, and
 *     over 64 seeds both outcomes occur;
 *   - a fence makes durable only what its own thread flushed;
 *   - with evict 0.5 over thousands of dirty lines the same seed gives the same file,
 *     byte for byte, and another seed a different one; evict 1 keeps every dirty line
 *     and evict 0 none;
 *   - a pool created on SIM media is complete once closed;
 *   - persist events are counted one per flush of SIM memory and one per drain, and an
 *     armed failure (sim_crash_at = k) ends a child process with sim_crash_exit_code at
 *     exactly the k-th event: the parent then finds exactly the persists that completed
 *     before event k (the one whose fence was event k may or may not be there), and the
 *     same k and seed give the same file.
 * Pools live in /dev/shm and are removed at exit.
 */
#define _GNU_SOURCE
#include "test_util.h"
#include "pm_test_files.h"

#include <pthread.h>
#include <stdatomic.h>

#define MIB (1ull << 20)
#define LINE 64u
#define SHM "/dev/shm"

static uint64_t root_offset; /* of every pool made by make_base() (same layout) */

/* Creates a closed 8 MiB pool (ordinary media) at a fresh path. */
static void make_base(char *path, size_t len, const char *name)
{
	make_closed_pool_in(path, len, SHM, name, 8 * MIB);
	struct tips_pool_info info;
	REQUIRE(tips_pool_stat(path, &info) == 0);
	root_offset = info.root_offset;
}

static int open_sim(const char *path, struct tips_pool **pool)
{
	struct tips_pool_options o;
	tips_pool_options_init(&o);
	o.media = TIPS_MEDIA_SIM;
	return tips_pool_open(path, &o, pool);
}

static void line_fill(void *line, uint64_t v)
{
	uint64_t *w = line;
	for (unsigned i = 0; i < LINE / 8; i++)
		w[i] = v;
}

static int line_is(const void *line, uint64_t v)
{
	const uint64_t *w = line;
	for (unsigned i = 0; i < LINE / 8; i++)
		if (w[i] != v)
			return 0;
	return 1;
}

static void *root_line(struct tips_pool *pool, unsigned i)
{
	return (char *)tips_pool_root(pool, NULL) + (size_t)i * LINE;
}

/* Reads root line @i of the closed pool file at @path. */
static void file_line(const char *path, unsigned i, void *out)
{
	REQUIRE(file_peek(path, (off_t)(root_offset + (uint64_t)i * LINE), out, LINE) == 0);
}

/* ---- what survives ---------------------------------------------------------------- */

static void test_unflushed_lost_persisted_survives(void)
{
	char path[PATH_MAX];
	make_base(path, sizeof(path), "simbasic");
	struct tips_pool *pool = NULL;
	REQUIRE(open_sim(path, &pool) == 0);
	struct tips_pool_info info;
	tips_pool_info(pool, &info);
	CHECK(info.media == TIPS_MEDIA_SIM);
	CHECK(info.media_reason[0] != '\0');

	const uint64_t lost = 0x1111111111111111ull, kept = 0x2222222222222222ull;
	line_fill(root_line(pool, 1), lost);           /* stored only */
	line_fill(root_line(pool, 2), kept);           /* stored and persisted */
	tips_persist(root_line(pool, 2), LINE);
	CHECK(line_is(root_line(pool, 1), lost));      /* the program sees its stores */

	/* Before the failure the file already has the persisted line and only that. */
	unsigned char line[LINE];
	file_line(path, 1, line);
	CHECK(line_is(line, 0));
	file_line(path, 2, line);
	CHECK(line_is(line, kept));

	CHECK_RC(tips_pool_sim_power_fail(&pool, 0.0, 1), 0);
	CHECK(pool == NULL);

	REQUIRE(tips_pool_open(path, NULL, &pool) == 0);
	CHECK(line_is(root_line(pool, 1), 0));
	CHECK(line_is(root_line(pool, 2), kept));
	tips_pool_info(pool, &info);
	CHECK(info.clean == 0); /* a power failure is no clean shutdown */
	CHECK(info.media != TIPS_MEDIA_SIM);

	/* A power failure needs SIM media. */
	struct tips_pool *same = pool;
	CHECK_RC(tips_pool_sim_power_fail(&pool, 0.0, 1), TIPS_EINVAL);
	CHECK(pool == same);
	CHECK_RC(tips_pool_close(&pool), 0);
}

static void test_create_on_sim(void)
{
	char path[PATH_MAX];
	scratch_path(path, sizeof(path), SHM, "simcreate");
	struct tips_pool_options o;
	tips_pool_options_init(&o);
	o.size = 8 * MIB;
	o.media = TIPS_MEDIA_SIM;
	struct tips_pool *pool = NULL;
	REQUIRE(tips_pool_create(path, &o, &pool) == 0);
	struct tips_pool_info info;
	tips_pool_info(pool, &info);
	CHECK(info.media == TIPS_MEDIA_SIM);
	line_fill(root_line(pool, 0), 0x3333333333333333ull);
	tips_persist(root_line(pool, 0), LINE);
	CHECK_RC(tips_pool_close(&pool), 0);

	/* Everything create and close wrote was persisted: the file is a complete pool. */
	CHECK_RC(tips_pool_stat(path, &info), 0);
	CHECK(info.clean == 1);
	REQUIRE(tips_pool_open(path, NULL, &pool) == 0);
	CHECK(line_is(root_line(pool, 0), 0x3333333333333333ull));
	struct tips_heap_report rep;
	CHECK_RC(tips_heap_check(tips_pool_heap(pool), &rep), 0);
	CHECK_RC(tips_pool_close(&pool), 0);
}

/* A line flushed but not fenced: old or new after the failure, and both happen. */
static void test_flushed_unfenced(void)
{
	char path[PATH_MAX];
	make_base(path, sizeof(path), "simunfenced");
	const uint64_t old_v = 0xaaaaaaaaaaaaaaaaull, new_v = 0x5555555555555555ull;
	const unsigned idx = 5;
	unsigned char old_line[LINE];
	line_fill(old_line, old_v);
	const off_t off = (off_t)(root_offset + idx * LINE);
	REQUIRE(file_patch(path, off, old_line, LINE) == 0);

	int outcome[64], n_old = 0, n_new = 0;
	for (uint64_t seed = 0; seed < 64; seed++) {
		struct tips_pool *pool = NULL;
		REQUIRE(open_sim(path, &pool) == 0);
		CHECK(line_is(root_line(pool, idx), old_v));
		line_fill(root_line(pool, idx), new_v);
		tips_flush(root_line(pool, idx), LINE);
		REQUIRE(tips_pool_sim_power_fail(&pool, 0.0, seed) == 0);
		unsigned char line[LINE];
		file_line(path, idx, line);
		outcome[seed] = line_is(line, new_v) ? 1 : line_is(line, old_v) ? 0 : -1;
		n_new += outcome[seed] == 1;
		n_old += outcome[seed] == 0;
		if (outcome[seed] < 0)
			fprintf(stderr, "seed %llu: the line is neither old nor new\n",
				(unsigned long long)seed);
		REQUIRE(file_patch(path, off, old_line, LINE) == 0);
	}
	CHECK(n_old + n_new == 64);
	CHECK(n_old > 0);
	CHECK(n_new > 0);

	/* The seed decides: the same seeds again give the same outcomes. */
	for (uint64_t seed = 0; seed < 8; seed++) {
		struct tips_pool *pool = NULL;
		REQUIRE(open_sim(path, &pool) == 0);
		line_fill(root_line(pool, idx), new_v);
		tips_flush(root_line(pool, idx), LINE);
		REQUIRE(tips_pool_sim_power_fail(&pool, 0.0, seed) == 0);
		unsigned char line[LINE];
		file_line(path, idx, line);
		CHECK((line_is(line, new_v) ? 1 : 0) == outcome[seed]);
		REQUIRE(file_patch(path, off, old_line, LINE) == 0);
	}
}

/* A fence makes durable only the lines its own thread flushed. */
struct flusher {
	void *line;
	pthread_barrier_t *flushed, *checked;
};

static void *flush_then_drain(void *arg)
{
	struct flusher *f = arg;
	tips_flush(f->line, LINE);
	pthread_barrier_wait(f->flushed);
	pthread_barrier_wait(f->checked);
	tips_drain();
	return NULL;
}

static void test_fence_is_per_thread(void)
{
	char path[PATH_MAX];
	make_base(path, sizeof(path), "simthreads");
	struct tips_pool *pool = NULL;
	REQUIRE(open_sim(path, &pool) == 0);
	const uint64_t theirs = 0x7777777777777777ull, mine = 0x8888888888888888ull;
	line_fill(root_line(pool, 7), theirs);
	line_fill(root_line(pool, 8), mine);
	pthread_barrier_t flushed, checked;
	REQUIRE(pthread_barrier_init(&flushed, NULL, 2) == 0);
	REQUIRE(pthread_barrier_init(&checked, NULL, 2) == 0);
	struct flusher f = { root_line(pool, 7), &flushed, &checked };
	pthread_t tid;
	REQUIRE(pthread_create(&tid, NULL, flush_then_drain, &f) == 0);
	pthread_barrier_wait(&flushed);
	/* The other thread flushed line 7; this thread persists line 8 and fences. */
	tips_persist(root_line(pool, 8), LINE);
	unsigned char line[LINE];
	file_line(path, 8, line);
	CHECK(line_is(line, mine));
	file_line(path, 7, line);
	CHECK(line_is(line, 0)); /* not this thread's flush: not durable yet */
	pthread_barrier_wait(&checked);
	REQUIRE(pthread_join(tid, NULL) == 0);
	file_line(path, 7, line);
	CHECK(line_is(line, theirs)); /* its own fence made it durable */
	pthread_barrier_destroy(&flushed);
	pthread_barrier_destroy(&checked);
	CHECK_RC(tips_pool_sim_power_fail(&pool, 0.0, 3), 0);
	REQUIRE(tips_pool_open(path, NULL, &pool) == 0);
	CHECK(line_is(root_line(pool, 7), theirs));
	CHECK(line_is(root_line(pool, 8), mine));
	CHECK_RC(tips_pool_close(&pool), 0);
}

/*
 * Write-backs of one line are coherent: after thread B stores to a line that thread A
 * flushed earlier, flushes and fences it, A's later fence (or its coin at a power
 * failure) must not bring back the older contents A's flush captured.
 */
static void test_older_flush_never_wins(void)
{
	char path[PATH_MAX];
	make_base(path, sizeof(path), "simorder");
	struct tips_pool *pool = NULL;
	REQUIRE(open_sim(path, &pool) == 0);
	const uint64_t old_value = 0x1111111111111111ull, new_value = 0x2222222222222222ull;
	line_fill(root_line(pool, 9), old_value);
	pthread_barrier_t flushed, checked;
	REQUIRE(pthread_barrier_init(&flushed, NULL, 2) == 0);
	REQUIRE(pthread_barrier_init(&checked, NULL, 2) == 0);
	struct flusher f = { root_line(pool, 9), &flushed, &checked };
	pthread_t tid;
	REQUIRE(pthread_create(&tid, NULL, flush_then_drain, &f) == 0);
	pthread_barrier_wait(&flushed);          /* A flushed the old contents */
	line_fill(root_line(pool, 9), new_value); /* B: store, flush, fence */
	tips_persist(root_line(pool, 9), LINE);
	pthread_barrier_wait(&checked);          /* now A fences */
	REQUIRE(pthread_join(tid, NULL) == 0);
	unsigned char line[LINE];
	file_line(path, 9, line);
	CHECK(line_is(line, new_value));
	pthread_barrier_destroy(&flushed);
	pthread_barrier_destroy(&checked);
	CHECK_RC(tips_pool_sim_power_fail(&pool, 0.0, 4), 0);
	REQUIRE(tips_pool_open(path, NULL, &pool) == 0);
	CHECK(line_is(root_line(pool, 9), new_value));
	CHECK_RC(tips_pool_close(&pool), 0);
}

/* A thread that flushed a line and exited without a fence never made it durable, even
 * if a later thread gets the same pthread_t and fences. */
static void *flush_only(void *arg)
{
	tips_flush(arg, LINE);
	return NULL;
}

static void *drain_only(void *arg)
{
	(void)arg;
	tips_drain();
	return NULL;
}

static void test_exited_thread_never_fences(void)
{
	char path[PATH_MAX];
	make_base(path, sizeof(path), "simexit");
	struct tips_pool *pool = NULL;
	REQUIRE(open_sim(path, &pool) == 0);
	line_fill(root_line(pool, 11), 0x3333333333333333ull);
	pthread_t t1, t2;
	REQUIRE(pthread_create(&t1, NULL, flush_only, root_line(pool, 11)) == 0);
	REQUIRE(pthread_join(t1, NULL) == 0);
	REQUIRE(pthread_create(&t2, NULL, drain_only, NULL) == 0); /* often reuses t1's id */
	REQUIRE(pthread_join(t2, NULL) == 0);
	unsigned char line[LINE];
	file_line(path, 11, line);
	CHECK(line_is(line, 0));
	CHECK_RC(tips_pool_sim_power_fail(&pool, 0.0, 6), 0);
	unlink(path);
}

/* Fences on one thread while another opens and closes SIM pools: a fence never touches
 * the state of a pool that is closing (found as a use after free; run under ASan). */
struct closer {
	const char *path;
	_Atomic int done;
};

static void *open_close_loop(void *arg)
{
	struct closer *c = arg;
	for (int i = 0; i < 300; i++) {
		struct tips_pool *pool = NULL;
		if (open_sim(c->path, &pool) != 0 || tips_pool_close(&pool) != 0)
			test_failures++;
	}
	atomic_store(&c->done, 1);
	return NULL;
}

static void test_fence_while_pools_close(void)
{
	char path[PATH_MAX];
	make_base(path, sizeof(path), "simclose");
	struct closer c = { .path = path };
	pthread_t t;
	REQUIRE(pthread_create(&t, NULL, open_close_loop, &c) == 0);
	unsigned long fences = 0;
	while (!atomic_load(&c.done)) {
		tips_drain();
		fences++;
	}
	REQUIRE(pthread_join(t, NULL) == 0);
	CHECK(fences > 0);
	unlink(path);
}

/* ---- eviction of dirty lines ------------------------------------------------------- */

#define DIRTY_LINES 4096u

static uint64_t dirty_value(unsigned i) { return 0xd1e7000000000000ull | (i + 1); }

/*
 * Copies @base to @run, dirties DIRTY_LINES root lines on SIM media without flushing,
 * fails the power with @evict and @seed, and returns the resulting file.
 */
static unsigned char *evict_run(const char *base, const char *run, double evict,
				uint64_t seed, size_t *len)
{
	REQUIRE(file_copy(base, run) == 0);
	struct tips_pool *pool = NULL;
	REQUIRE(open_sim(run, &pool) == 0);
	for (unsigned i = 0; i < DIRTY_LINES; i++)
		line_fill(root_line(pool, i), dirty_value(i));
	REQUIRE(tips_pool_sim_power_fail(&pool, evict, seed) == 0);
	unsigned char *bytes = file_read_all(run, len);
	REQUIRE(bytes != NULL);
	unlink(run);
	return bytes;
}

/* Counts root lines of @file that hold the dirty value; -1 if one is neither. */
static long lines_evicted(const unsigned char *file)
{
	long n = 0;
	for (unsigned i = 0; i < DIRTY_LINES; i++) {
		const unsigned char *line = file + root_offset + (size_t)i * LINE;
		if (line_is(line, dirty_value(i)))
			n++;
		else if (!line_is(line, 0))
			return -1;
	}
	return n;
}

static void test_eviction(void)
{
	char base[PATH_MAX], run[PATH_MAX];
	make_base(base, sizeof(base), "simevict");
	scratch_path(run, sizeof(run), SHM, "simevict-run");
	size_t len_base = 0, la = 0, lb = 0, lc = 0, ld = 0, le = 0;
	unsigned char *b0 = file_read_all(base, &len_base);
	REQUIRE(b0 != NULL);
	REQUIRE(root_offset + (uint64_t)DIRTY_LINES * LINE <= len_base);

	unsigned char *a = evict_run(base, run, 0.5, 42, &la);
	unsigned char *b = evict_run(base, run, 0.5, 42, &lb);
	unsigned char *c = evict_run(base, run, 0.5, 43, &lc);
	CHECK(la == len_base && lb == len_base && lc == len_base);
	CHECK(memcmp(a, b, la) == 0);  /* same seed, same file */
	CHECK(memcmp(a, c, la) != 0);  /* another seed, another state */
	long na = lines_evicted(a), nc = lines_evicted(c);
	CHECK(na >= 0 && nc >= 0);
	/* About half, far from 0 and from all (12 standard deviations of margin). */
	CHECK(na > (long)DIRTY_LINES * 2 / 5 && na < (long)DIRTY_LINES * 3 / 5);
	CHECK(nc > (long)DIRTY_LINES * 2 / 5 && nc < (long)DIRTY_LINES * 3 / 5);

	unsigned char *d = evict_run(base, run, 1.0, 42, &ld);
	CHECK(lines_evicted(d) == (long)DIRTY_LINES);
	unsigned char *e = evict_run(base, run, 0.0, 42, &le);
	CHECK(lines_evicted(e) == 0);
	/* With evict 0 the root area is exactly what the base pool had. */
	CHECK(le == len_base &&
	      memcmp(e + root_offset, b0 + root_offset, (size_t)DIRTY_LINES * LINE) == 0);
	free(a);
	free(b);
	free(c);
	free(d);
	free(e);
	free(b0);
}

/* ---- persist events and armed failures ---------------------------------------------- */

#define NPERSIST 6u
#define DEFAULT_EXIT 86

static uint64_t counter_value(unsigned i) { return 0xc0c0000000000000ull + i; }

/*
 * Persist events during tips_pool_open() of a copy of @base on SIM media, and checks of
 * how the public calls count: one event per flush of SIM memory, one per drain.
 */
static uint64_t measure_open_events(const char *base)
{
	char dry[PATH_MAX];
	scratch_path(dry, sizeof(dry), SHM, "simdry");
	REQUIRE(file_copy(base, dry) == 0);
	struct tips_pool *pool = NULL;
	uint64_t e0 = tips_pm_persist_events();
	REQUIRE(open_sim(dry, &pool) == 0);
	uint64_t opened = tips_pm_persist_events() - e0;

	uint64_t e = tips_pm_persist_events();
	tips_flush(root_line(pool, 1), LINE);
	CHECK(tips_pm_persist_events() - e == 1);
	e = tips_pm_persist_events();
	tips_drain();
	CHECK(tips_pm_persist_events() - e == 1);
	e = tips_pm_persist_events();
	tips_persist(root_line(pool, 2), 4 * LINE + 3); /* five lines, still one flush */
	CHECK(tips_pm_persist_events() - e == 2);
	/* Memory outside the pool: the flush is no event, the drain is one. */
	static uint64_t dram[16] __attribute__((aligned(64)));
	e = tips_pm_persist_events();
	tips_flush(dram, sizeof(dram));
	CHECK(tips_pm_persist_events() - e == 0);
	tips_persist(dram, sizeof(dram));
	CHECK(tips_pm_persist_events() - e == 1);
	/* An empty flush is no event. */
	e = tips_pm_persist_events();
	tips_flush(root_line(pool, 1), 0);
	CHECK(tips_pm_persist_events() - e == 0);

	REQUIRE(tips_pool_sim_power_fail(&pool, 0.0, 0) == 0);
	/* With no SIM pool open, nothing counts. */
	e = tips_pm_persist_events();
	tips_persist(dram, sizeof(dram));
	CHECK(tips_pm_persist_events() == e);
	unlink(dry);
	return opened;
}

/* In the child: open with the failure armed at event @k, persist counters 1..NPERSIST. */
static void armed_child(const char *path, uint64_t k, double evict, uint64_t seed,
			int exit_code)
{
	struct tips_pool_options o;
	tips_pool_options_init(&o);
	if (o.sim_crash_exit_code != DEFAULT_EXIT)
		_exit(5);
	o.media = TIPS_MEDIA_SIM;
	o.sim_crash_at = k;
	o.sim_evict = evict;
	o.sim_seed = seed;
	if (exit_code)
		o.sim_crash_exit_code = exit_code;
	struct tips_pool *pool = NULL;
	if (tips_pool_open(path, &o, &pool) != 0)
		_exit(3);
	for (unsigned i = 1; i <= NPERSIST; i++) {
		line_fill(root_line(pool, i), counter_value(i));
		tips_persist(root_line(pool, i), LINE);
	}
	if (tips_pool_close(&pool) != 0)
		_exit(4);
	_exit(0);
}

/* Runs armed_child on a fresh copy of @base at @run; returns the file, *status the exit. */
static unsigned char *armed_run(const char *base, const char *run, uint64_t k, double evict,
				uint64_t seed, int exit_code, int *status)
{
	REQUIRE(file_copy(base, run) == 0);
	fflush(NULL);
	pid_t pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0)
		armed_child(run, k, evict, seed, exit_code);
	*status = child_status(pid);
	size_t len = 0;
	unsigned char *bytes = file_read_all(run, &len);
	REQUIRE(bytes != NULL);
	return bytes;
}

/* State of counter line @i in @file: 1 present, 0 absent (zero), -1 anything else. */
static int counter_state(const unsigned char *file, unsigned i)
{
	const unsigned char *line = file + root_offset + (size_t)i * LINE;
	return line_is(line, counter_value(i)) ? 1 : line_is(line, 0) ? 0 : -1;
}

static void test_armed_crash(void)
{
	char base[PATH_MAX], run[PATH_MAX];
	make_base(base, sizeof(base), "simarmed");
	scratch_path(run, sizeof(run), SHM, "simarmed-run");
	size_t base_len = 0;
	unsigned char *b0 = file_read_all(base, &base_len);
	REQUIRE(b0 != NULL);
	const uint64_t opened = measure_open_events(base);
	REQUIRE(opened >= 2); /* at least the persist of the clean flag */
	printf("test_sim: a SIM open counts %llu persist events\n", (unsigned long long)opened);
	/* Persist i is events opened+2i-1 (its flush) and opened+2i (its fence). */
	const uint64_t last = opened + 2 * NPERSIST;
	const uint64_t seed = 7;
	int inflight_seen[2] = { 0, 0 };

	for (uint64_t k = 1; k <= last; k++) {
		int st1 = -1, st2 = -1;
		unsigned char *f1 = armed_run(base, run, k, 0.0, seed, 0, &st1);
		if (st1 != DEFAULT_EXIT)
			fprintf(stderr, "k=%llu: child exited with %d, wanted %d\n",
				(unsigned long long)k, st1, DEFAULT_EXIT);
		CHECK(st1 == DEFAULT_EXIT);
		for (unsigned i = 1; i <= NPERSIST; i++) {
			uint64_t fence = opened + 2 * i;
			int s = counter_state(f1, i);
			if (fence < k) {
				CHECK(s == 1);      /* completed before event k */
			} else if (fence == k) {
				CHECK(s == 0 || s == 1); /* its fence was the failing event */
				if (s >= 0)
					inflight_seen[s] = 1;
			} else if (s != 0) {
				fprintf(stderr, "k=%llu: counter %u present, its fence is event %llu\n",
					(unsigned long long)k, i, (unsigned long long)fence);
				test_failures++;
			}
		}
		if (k <= opened) /* failed while opening: the root is as it was */
			CHECK(memcmp(f1 + root_offset, b0 + root_offset, LINE * (NPERSIST + 1)) == 0);
		/* Determinism: the same k and seed give the same file. */
		unsigned char *f2 = armed_run(base, run, k, 0.0, seed, 0, &st2);
		CHECK(st2 == DEFAULT_EXIT);
		CHECK(memcmp(f1, f2, base_len) == 0);
		free(f2);
		/* The crashed pool opens again (recovery) and shows the same counters. */
		struct tips_pool *pool = NULL;
		CHECK_RC(tips_pool_open(run, NULL, &pool), 0);
		if (pool) {
			struct tips_pool_info info;
			tips_pool_info(pool, &info);
			if (k > opened)
				CHECK(info.clean == 0);
			for (unsigned i = 1; i <= NPERSIST; i++) {
				const void *line = root_line(pool, i);
				CHECK(memcmp(line, f1 + root_offset + (size_t)i * LINE, LINE) == 0);
			}
			CHECK_RC(tips_pool_close(&pool), 0);
		}
		free(f1);
	}

	/* The in-flight persist (fence = event k) comes back old or new depending on seed. */
	const uint64_t k3 = opened + 2 * 3;
	for (uint64_t s = 0; s < 16; s++) {
		int st = -1;
		unsigned char *f = armed_run(base, run, k3, 0.0, s, 0, &st);
		CHECK(st == DEFAULT_EXIT);
		CHECK(counter_state(f, 2) == 1);
		int c3 = counter_state(f, 3);
		CHECK(c3 == 0 || c3 == 1);
		if (c3 >= 0)
			inflight_seen[c3] = 1;
		CHECK(counter_state(f, 4) == 0);
		free(f);
	}
	CHECK(inflight_seen[0] && inflight_seen[1]);

	/* sim_evict reaches the armed failure: at the flush event of persist 2 its line is
	 * dirty, never flushed; evict 1 writes it back, evict 0 does not. */
	int st = -1;
	unsigned char *f = armed_run(base, run, opened + 2 * 2 - 1, 1.0, seed, 0, &st);
	CHECK(st == DEFAULT_EXIT);
	CHECK(counter_state(f, 1) == 1 && counter_state(f, 2) == 1 && counter_state(f, 3) == 0);
	free(f);
	f = armed_run(base, run, opened + 2 * 2 - 1, 0.0, seed, 0, &st);
	CHECK(st == DEFAULT_EXIT);
	CHECK(counter_state(f, 1) == 1 && counter_state(f, 2) == 0);
	free(f);

	/* Another exit code, as asked. */
	f = armed_run(base, run, opened + 3, 0.0, seed, 77, &st);
	CHECK(st == 77);
	free(f);

	/* Never reached: the child finishes, closes cleanly, every counter is there. */
	f = armed_run(base, run, 1ull << 40, 0.0, seed, 0, &st);
	CHECK(st == 0);
	for (unsigned i = 1; i <= NPERSIST; i++)
		CHECK(counter_state(f, i) == 1);
	free(f);
	struct tips_pool_info info;
	CHECK_RC(tips_pool_stat(run, &info), 0);
	CHECK(info.clean == 1);
	free(b0);
}

int main(void)
{
	test_unflushed_lost_persisted_survives();
	test_create_on_sim();
	test_flushed_unfenced();
	test_fence_is_per_thread();
	test_older_flush_never_wins();
	test_exited_thread_never_fences();
	test_fence_while_pools_close();
	test_eviction();
	test_armed_crash();
	return test_finish("test_sim");
}
