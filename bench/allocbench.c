/*
 * allocbench.c - `tips-allocbench`: allocation + free throughput of the libtips heap
 * against libpmemobj, measured in the same process and run, on fresh pools.
 *
 * What it measures. Each thread owns W persistent 8-byte slots (16-byte PMEMoids on the
 * pmemobj side) inside the pool and runs, ops times:
 *     s = slot[i % W]; if s is full, free it (clearing s); allocate SIZE bytes into s;
 * then frees whatever its slots still hold, so every thread does exactly ops
 * allocations and ops frees. One "pair" is one allocation plus one free; the result
 * is pairs per second over all threads, from the moment the threads leave a common
 * barrier to the moment the last one finishes (CLOCK_MONOTONIC, read by each thread).
 *
 * Fairness choices.
 *  - Equal semantics: both sides use their failure-atomic "allocate into a persistent
 *    destination" and "free and clear the destination" calls (tips_heap_alloc_to /
 *    tips_heap_free_from and pmemobj_alloc / pmemobj_free with a PMEMoid in the root
 *    object). Neither side initialises or persists the block contents.
 *  - Equal persistence: on /dev/shm libpmemobj would see no DAX and fall back to msync;
 *    PMEM_IS_PMEM_FORCE=1 is set before any pool exists so that libpmem flushes cache
 *    lines and fences, as libtips does on shm media.
 *  - Nothing hidden: the libtips heap checkpoints on its own whenever a lane's log
 *    fills; those checkpoints run inside the timed region and count. The benchmark never
 *    calls tips_heap_checkpoint() itself. Closing the pools (which checkpoints) is not
 *    timed on either side.
 *  - Noise: every repetition uses new pool files (create, run, close, unlink), and the
 *    two allocators alternate, each going first in every other repetition (libtips,
 *    pmemobj, pmemobj, libtips, ...). The median of the repetitions is reported.
 *  - No false sharing between threads: each thread's slot array starts on its own
 *    cache line, on both sides.
 * Frees are not alike inside: libpmemobj may reuse a freed block at once, libtips only
 * after its next checkpoint (tips/heap.h); that is part of what is measured.
 *
 * Exit codes: 0 done, 2 usage error, 3 a library or system call failed.
 */
#define _GNU_SOURCE
#include "json_str.h"
#include "size_arg.h"

#include <errno.h>
#include <getopt.h>
#include <libpmemobj.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <tips/tips.h>
#include <unistd.h>

enum { EXIT_OK = 0, EXIT_USAGE = 2, EXIT_FAILED = 3 };

#define MAX_LIST 16         /* entries in --threads and --sizes */
#define MAX_THREADS 256
#define CACHELINE 64
#define DEFAULT_OPS 300000ull
#define DEFAULT_SLOTS 1024ull
#define DEFAULT_REPEAT 5u
#define DEFAULT_POOL_SIZE (1ull << 30)
#define MSG_LEN 512

static const char usage_text[] =
	"usage: tips-allocbench [--threads LIST] [--sizes LIST] [--ops N] [--slots W]\n"
	"                       [--repeat R] [--pool-size SIZE] [--dir DIR] [--json FILE]\n"
	"\n"
	"Alloc+free pairs per second of the libtips heap (tips_heap_alloc_to and\n"
	"tips_heap_free_from) against libpmemobj (pmemobj_alloc and pmemobj_free), each\n"
	"into persistent slots, on fresh pools, in the same run.\n"
	"\n"
	"  --threads LIST    thread counts, comma-separated (default 1,2)\n"
	"  --sizes LIST      allocation sizes in bytes, comma-separated (default 64,256)\n"
	"  --ops N           allocations (and frees) per thread per run (default 300000)\n"
	"  --slots W         persistent slots per thread (default 1024)\n"
	"  --repeat R        runs of each allocator per configuration (default 5)\n"
	"  --pool-size SIZE  size of each pool file (default 1G)\n"
	"  --dir DIR         directory for the pool files (default /dev/shm)\n"
	"  --json FILE       also write every sample and median as JSON to FILE\n"
	"  --help            print this text\n"
	"\n"
	SIZE_ARG_RULE
	"exit codes: 0 done, 2 usage error, 3 a library or system call failed\n";

/* ---- options ------------------------------------------------------------------- */

struct options {
	uint64_t threads[MAX_LIST];
	size_t nthreads;
	uint64_t sizes[MAX_LIST];
	size_t nsizes;
	uint64_t ops;       /* per thread per run */
	uint64_t slots;     /* W */
	uint64_t repeat;
	uint64_t pool_size;
	const char *dir;
	const char *json;   /* NULL: no JSON file */
};

static void options_default(struct options *o)
{
	memset(o, 0, sizeof(*o));
	o->threads[0] = 1;
	o->threads[1] = 2;
	o->nthreads = 2;
	o->sizes[0] = 64;
	o->sizes[1] = 256;
	o->nsizes = 2;
	o->ops = DEFAULT_OPS;
	o->slots = DEFAULT_SLOTS;
	o->repeat = DEFAULT_REPEAT;
	o->pool_size = DEFAULT_POOL_SIZE;
	o->dir = "/dev/shm";
}

/* A count (size_arg.h) in [min, max]; 0 on success, -1 otherwise. */
static int count_parse(const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	uint64_t v;
	if (size_arg_count(s, &v) || v < min || v > max)
		return -1;
	*out = v;
	return 0;
}

/* A comma-separated list of sizes in bytes (@sizes) or of counts. Each in [min, max]. */
static int list_parse(const char *s, bool sizes, uint64_t min, uint64_t max, uint64_t *out,
		      size_t *n)
{
	char buf[256];
	if (strlen(s) >= sizeof(buf))
		return -1;
	strcpy(buf, s);
	*n = 0;
	char *save = NULL;
	for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		uint64_t v;
		int rc = sizes ? size_arg_bytes(tok, &v) : count_parse(tok, min, max, &v);
		if (rc || v < min || v > max || *n == MAX_LIST)
			return -1;
		out[(*n)++] = v;
	}
	return *n ? 0 : -1;
}

static int usage_error(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("tips-allocbench: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputs("\n\n", stderr);
	va_end(ap);
	fputs(usage_text, stderr);
	return EXIT_USAGE;
}

/* Returns EXIT_OK, EXIT_USAGE, or -1 when --help was printed. */
static int options_parse(int argc, char **argv, struct options *o)
{
	static const struct option longopts[] = {
		{ "threads", required_argument, NULL, 't' },
		{ "sizes", required_argument, NULL, 's' },
		{ "ops", required_argument, NULL, 'n' },
		{ "slots", required_argument, NULL, 'w' },
		{ "repeat", required_argument, NULL, 'r' },
		{ "pool-size", required_argument, NULL, 'p' },
		{ "dir", required_argument, NULL, 'd' },
		{ "json", required_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	options_default(o);
	opterr = 0;
	int c, idx = 0;
	while ((c = getopt_long(argc, argv, "", longopts, &idx)) != -1) {
		int bad = 0;
		switch (c) {
		case 't': bad = list_parse(optarg, false, 1, MAX_THREADS, o->threads, &o->nthreads); break;
		case 's': bad = list_parse(optarg, true, 1, 1ull << 30, o->sizes, &o->nsizes); break;
		case 'n': bad = count_parse(optarg, 1, UINT64_MAX >> 8, &o->ops); break;
		case 'w': bad = count_parse(optarg, 1, 1ull << 24, &o->slots); break;
		case 'r': bad = count_parse(optarg, 1, 1000, &o->repeat); break;
		case 'p': bad = size_arg_bytes(optarg, &o->pool_size) || o->pool_size == 0; break;
		case 'd': o->dir = optarg; break;
		case 'j': o->json = optarg; break;
		case 'h': fputs(usage_text, stdout); return -1;
		default: return usage_error("unknown option or missing value: %s", argv[optind - 1]);
		}
		if (bad)
			return usage_error("bad value for --%s: %s", longopts[idx].name, optarg);
	}
	if (optind < argc)
		return usage_error("unexpected argument: %s", argv[optind]);
	return EXIT_OK;
}

/* ---- the benchmark's state ----------------------------------------------------------- */

enum side_id { SIDE_TIPS, SIDE_PMEMOBJ, NSIDES };

/* What the report needs for one (threads, size) configuration. */
struct result {
	uint64_t threads, size;
	double *samples[NSIDES];    /* pairs/s of each repetition */
	double median[NSIDES];
	double spread[NSIDES];      /* (max - min) / median, in percent */
	uint64_t tips_checkpoints;  /* summed over repetitions */
	uint64_t tips_fences;       /* summed over repetitions */
};

struct bench {
	struct options opt;
	unsigned nproc;
	char path[NSIDES][PATH_MAX];  /* pool files; removed on the way out */
	bool have_media;
	struct tips_pool_info media;  /* of the first libtips pool */
	struct result *results;
	size_t nresults;
};

struct run;

/* One worker thread of a run. */
struct worker {
	struct run *run;
	pthread_t tid;
	uint64_t id;
	struct timespec start, end;
	int failed;
	char msg[MSG_LEN];      /* what failed, when failed */
};

/* One timed run of one allocator. */
struct run {
	const struct side *side;
	uint64_t threads, size, ops, slots;
	pthread_barrier_t barrier;
	struct worker *workers;
	/* libtips */
	struct tips_pool *pool;
	struct tips_heap *heap;
	uint64_t *tips_slots;   /* threads arrays, tips_stride slots apart */
	uint64_t tips_stride;
	struct tips_heap_stats stats_before;
	/* libpmemobj */
	PMEMobjpool *pop;
	PMEMoid *oid_slots;     /* threads arrays, oid_stride slots apart */
	uint64_t oid_stride;
};

/* One allocator: how to make its pool, run a thread's loop, and check and drop it. */
struct side {
	const char *name;
	void (*setup)(struct bench *b, struct run *r);
	int (*loop)(struct worker *w);  /* 0, or -1 with w->msg set */
	void (*teardown)(struct bench *b, struct run *r);
};

static void remove_pools(struct bench *b)
{
	for (int s = 0; s < NSIDES; s++)
		if (b->path[s][0])
			unlink(b->path[s]);
}

__attribute__((format(printf, 2, 3), noreturn))
static void bench_fail(struct bench *b, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fputs("tips-allocbench: ", stderr);
	vfprintf(stderr, fmt, ap);
	fputc('\n', stderr);
	va_end(ap);
	fflush(stdout);
	remove_pools(b);
	exit(EXIT_FAILED);
}

static uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

/* ---- libtips -------------------------------------------------------------------------- */

static void tips_setup(struct bench *b, struct run *r)
{
	r->tips_stride = align_up(r->slots * sizeof(uint64_t), CACHELINE) / sizeof(uint64_t);
	uint64_t need = r->threads * r->tips_stride * sizeof(uint64_t);
	struct tips_pool_options o;
	tips_pool_options_init(&o);
	o.size = b->opt.pool_size;
	if (o.root_size < need)
		o.root_size = need;
	int rc = tips_pool_create(b->path[SIDE_TIPS], &o, &r->pool);
	if (rc)
		bench_fail(b, "tips_pool_create %s: %s (%s)", b->path[SIDE_TIPS], tips_errormsg(),
			   tips_strerror(rc));
	size_t root_size = 0;
	r->tips_slots = tips_pool_root(r->pool, &root_size);
	if (!r->tips_slots || root_size < need || (uintptr_t)r->tips_slots % CACHELINE)
		bench_fail(b, "tips_pool_root: %zu bytes at %p, need %llu cache-aligned", root_size,
			   (void *)r->tips_slots, (unsigned long long)need);
	r->heap = tips_pool_heap(r->pool);
	if (!b->have_media) {
		tips_pool_info(r->pool, &b->media);
		b->have_media = true;
	}
	tips_heap_stats(r->heap, &r->stats_before);
}

static int tips_fail(struct worker *w, const char *what, int rc)
{
	snprintf(w->msg, sizeof(w->msg), "%s: %s (%s)", what, tips_errormsg(), tips_strerror(rc));
	return -1;
}

static int tips_loop(struct worker *w)
{
	const struct run *r = w->run;
	struct tips_heap *heap = r->heap;
	uint64_t *slot = r->tips_slots + w->id * r->tips_stride;
	const size_t size = (size_t)r->size;
	const uint64_t ops = r->ops, nslots = r->slots;
	uint64_t k = 0;
	int rc;
	for (uint64_t i = 0; i < ops; i++) {
		if (slot[k] && (rc = tips_heap_free_from(heap, &slot[k])))
			return tips_fail(w, "tips_heap_free_from", rc);
		if ((rc = tips_heap_alloc_to(heap, size, &slot[k])))
			return tips_fail(w, "tips_heap_alloc_to", rc);
		if (++k == nslots)
			k = 0;
	}
	for (k = 0; k < nslots; k++)
		if (slot[k] && (rc = tips_heap_free_from(heap, &slot[k])))
			return tips_fail(w, "tips_heap_free_from", rc);
	return 0;
}

static void tips_teardown(struct bench *b, struct run *r)
{
	struct tips_heap_stats after;
	tips_heap_stats(r->heap, &after);
	uint64_t expect = r->ops * r->threads;
	if (after.allocs - r->stats_before.allocs != expect ||
	    after.frees - r->stats_before.frees != expect)
		bench_fail(b, "libtips heap counted %llu allocations and %llu frees, expected %llu",
			   (unsigned long long)(after.allocs - r->stats_before.allocs),
			   (unsigned long long)(after.frees - r->stats_before.frees),
			   (unsigned long long)expect);
	for (uint64_t t = 0; t < r->threads; t++)
		for (uint64_t k = 0; k < r->slots; k++)
			if (r->tips_slots[t * r->tips_stride + k])
				bench_fail(b, "libtips slot %llu of thread %llu still full after the run",
					   (unsigned long long)k, (unsigned long long)t);
	int rc = tips_pool_close(&r->pool);
	if (rc)
		bench_fail(b, "tips_pool_close: %s (%s)", tips_errormsg(), tips_strerror(rc));
	if (unlink(b->path[SIDE_TIPS]))
		bench_fail(b, "unlink %s: %s", b->path[SIDE_TIPS], strerror(errno));
}

static const struct side side_tips = { "libtips", tips_setup, tips_loop, tips_teardown };

/* ---- libpmemobj ----------------------------------------------------------------------- */

static void pmemobj_setup(struct bench *b, struct run *r)
{
	r->oid_stride = align_up(r->slots * sizeof(PMEMoid), CACHELINE) / sizeof(PMEMoid);
	uint64_t need = r->threads * r->oid_stride * sizeof(PMEMoid);
	r->pop = pmemobj_create(b->path[SIDE_PMEMOBJ], "allocbench", b->opt.pool_size, 0666);
	if (!r->pop)
		bench_fail(b, "pmemobj_create %s: %s", b->path[SIDE_PMEMOBJ], pmemobj_errormsg());
	/* CACHELINE spare bytes, so the slot arrays can start on a cache line. */
	PMEMoid root = pmemobj_root(r->pop, need + CACHELINE);
	if (OID_IS_NULL(root))
		bench_fail(b, "pmemobj_root of %llu bytes: %s", (unsigned long long)need,
			   pmemobj_errormsg());
	uintptr_t base = (uintptr_t)pmemobj_direct(root);
	r->oid_slots = (PMEMoid *)align_up(base, CACHELINE);
}

static int pmemobj_loop(struct worker *w)
{
	const struct run *r = w->run;
	PMEMobjpool *pop = r->pop;
	PMEMoid *slot = r->oid_slots + w->id * r->oid_stride;
	const size_t size = (size_t)r->size;
	const uint64_t ops = r->ops, nslots = r->slots;
	uint64_t k = 0;
	for (uint64_t i = 0; i < ops; i++) {
		if (!OID_IS_NULL(slot[k]))
			pmemobj_free(&slot[k]);
		if (pmemobj_alloc(pop, &slot[k], size, 0, NULL, NULL)) {
			snprintf(w->msg, sizeof(w->msg), "pmemobj_alloc: %s", pmemobj_errormsg());
			return -1;
		}
		if (++k == nslots)
			k = 0;
	}
	for (k = 0; k < nslots; k++)
		if (!OID_IS_NULL(slot[k]))
			pmemobj_free(&slot[k]);
	return 0;
}

static void pmemobj_teardown(struct bench *b, struct run *r)
{
	for (uint64_t t = 0; t < r->threads; t++)
		for (uint64_t k = 0; k < r->slots; k++)
			if (!OID_IS_NULL(r->oid_slots[t * r->oid_stride + k]))
				bench_fail(b, "pmemobj slot %llu of thread %llu still full after the run",
					   (unsigned long long)k, (unsigned long long)t);
	pmemobj_close(r->pop);
	r->pop = NULL;
	if (unlink(b->path[SIDE_PMEMOBJ]))
		bench_fail(b, "unlink %s: %s", b->path[SIDE_PMEMOBJ], strerror(errno));
}

static const struct side side_pmemobj = { "pmemobj", pmemobj_setup, pmemobj_loop,
					  pmemobj_teardown };

static const struct side *const sides[NSIDES] = { &side_tips, &side_pmemobj };

/* ---- one timed run -------------------------------------------------------------------- */

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct run *r = w->run;
	pthread_barrier_wait(&r->barrier);
	clock_gettime(CLOCK_MONOTONIC, &w->start);
	w->failed = r->side->loop(w) != 0;
	clock_gettime(CLOCK_MONOTONIC, &w->end);
	return NULL;
}

static double ts_seconds(const struct timespec *t)
{
	return (double)t->tv_sec + (double)t->tv_nsec * 1e-9;
}

/* Seconds from the first thread's release from the barrier to the last one's end. */
static double run_elapsed(const struct run *r)
{
	double first = ts_seconds(&r->workers[0].start), last = ts_seconds(&r->workers[0].end);
	for (uint64_t t = 1; t < r->threads; t++) {
		double s = ts_seconds(&r->workers[t].start), e = ts_seconds(&r->workers[t].end);
		first = s < first ? s : first;
		last = e > last ? e : last;
	}
	return last - first;
}

/* Starts the workers, waits for them and reports the first failure. */
static void run_threads(struct bench *b, struct run *r)
{
	int rc = pthread_barrier_init(&r->barrier, NULL, (unsigned)r->threads);
	if (rc)
		bench_fail(b, "pthread_barrier_init: %s", strerror(rc));
	for (uint64_t t = 0; t < r->threads; t++) {
		r->workers[t] = (struct worker){ .run = r, .id = t };
		rc = pthread_create(&r->workers[t].tid, NULL, worker_main, &r->workers[t]);
		if (rc)
			bench_fail(b, "pthread_create: %s", strerror(rc));
	}
	for (uint64_t t = 0; t < r->threads; t++) {
		rc = pthread_join(r->workers[t].tid, NULL);
		if (rc)
			bench_fail(b, "pthread_join: %s", strerror(rc));
	}
	pthread_barrier_destroy(&r->barrier);
	for (uint64_t t = 0; t < r->threads; t++)
		if (r->workers[t].failed)
			bench_fail(b, "%s, thread %llu: %s", r->side->name, (unsigned long long)t,
				   r->workers[t].msg);
}

/* One run of @side on fresh pools; returns pairs per second and adds to @res. */
static double run_once(struct bench *b, enum side_id side, struct result *res)
{
	struct run r = {
		.side = sides[side],
		.threads = res->threads,
		.size = res->size,
		.ops = b->opt.ops,
		.slots = b->opt.slots,
	};
	r.workers = calloc(r.threads, sizeof(*r.workers));
	if (!r.workers)
		bench_fail(b, "out of memory");
	r.side->setup(b, &r);
	struct tips_pm_counters before, after;
	tips_pm_counters_total(&before);
	run_threads(b, &r);
	tips_pm_counters_total(&after);
	double secs = run_elapsed(&r);
	if (side == SIDE_TIPS) {
		struct tips_heap_stats st;
		tips_heap_stats(r.heap, &st);
		res->tips_checkpoints += st.checkpoints - r.stats_before.checkpoints;
		res->tips_fences += after.fences - before.fences;
	}
	r.side->teardown(b, &r);
	free(r.workers);
	return secs > 0 ? (double)(r.ops * r.threads) / secs : 0.0;
}

/* ---- statistics and report ------------------------------------------------------------ */

static int double_cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

/* The median of @v; leaves @v's values sorted in @scratch. */
static double median(const double *v, size_t n, double *scratch)
{
	memcpy(scratch, v, n * sizeof(*v));
	qsort(scratch, n, sizeof(*scratch), double_cmp);
	return n % 2 ? scratch[n / 2] : (scratch[n / 2 - 1] + scratch[n / 2]) / 2;
}

static void run_config(struct bench *b, struct result *res)
{
	double scratch[1000];
	for (uint64_t rep = 0; rep < b->opt.repeat; rep++)
		for (int k = 0; k < NSIDES; k++) {
			/* Who goes first alternates, so a trend in the machine's load over a
			 * repetition favours neither side. */
			int s = rep % 2 ? NSIDES - 1 - k : k;
			res->samples[s][rep] = run_once(b, (enum side_id)s, res);
		}
	for (int s = 0; s < NSIDES; s++) {
		double m = median(res->samples[s], b->opt.repeat, scratch);
		res->median[s] = m;
		res->spread[s] = m > 0 ? 100 * (scratch[b->opt.repeat - 1] - scratch[0]) / m : 0;
	}
}

static double ratio(const struct result *res)
{
	return res->median[SIDE_PMEMOBJ] > 0 ? res->median[SIDE_TIPS] / res->median[SIDE_PMEMOBJ]
					     : 0.0;
}

static void print_preamble(const struct bench *b)
{
	const struct options *o = &b->opt;
	printf("tips-allocbench: alloc+free pairs/s, libtips tips_heap_alloc_to/free_from vs "
	       "pmemobj_alloc/free\n");
	printf("machine: nproc %u\n", b->nproc);
	printf("runs: %llu allocations + %llu frees per thread per run, %llu slots per thread, "
	       "median of %llu runs, pools of %llu MiB in %s\n",
	       (unsigned long long)o->ops, (unsigned long long)o->ops,
	       (unsigned long long)o->slots, (unsigned long long)o->repeat,
	       (unsigned long long)(o->pool_size >> 20), o->dir);
	printf("pmemobj: PMEM_IS_PMEM_FORCE=1 set before pmemobj_create (libpmem flushes cache "
	       "lines + fence on this file, not msync, as libtips does on shm)\n");
	printf("libtips: timing includes the heap's automatic checkpoints (when a lane log "
	       "fills); the benchmark calls no checkpoint; pool close is untimed on both sides\n");
	for (size_t i = 0; i < o->nthreads; i++)
		if (o->threads[i] > b->nproc)
			printf("warning: %llu threads on %u CPUs: oversubscribed\n",
			       (unsigned long long)o->threads[i], b->nproc);
	fflush(stdout);
}

static void print_table(const struct bench *b)
{
	if (b->have_media)
		printf("libtips pool media: %s (%s)\n", tips_media_name(b->media.media),
		       b->media.media_reason);
	printf("\n%7s %6s %13s %15s %6s %11s %14s %13s %15s\n", "threads", "size",
	       "tips_pairs/s", "pmemobj_pairs/s", "ratio", "tips_spread", "pmemobj_spread",
	       "tips_ckpt/run", "tips_fence/pair");
	for (size_t i = 0; i < b->nresults; i++) {
		const struct result *res = &b->results[i];
		double pairs = (double)(b->opt.ops * res->threads * b->opt.repeat);
		printf("%7llu %6llu %13.0f %15.0f %6.2f %10.0f%% %13.0f%% %13.1f %15.2f\n",
		       (unsigned long long)res->threads, (unsigned long long)res->size,
		       res->median[SIDE_TIPS], res->median[SIDE_PMEMOBJ], ratio(res),
		       res->spread[SIDE_TIPS], res->spread[SIDE_PMEMOBJ],
		       (double)res->tips_checkpoints / (double)b->opt.repeat,
		       (double)res->tips_fences / pairs);
	}
	printf("(pairs/s: medians over runs, a pair = one alloc + one free; ratio = tips / pmemobj;\n"
	       " spread = (max - min) / median of the runs; checkpoints and fences: libtips, "
	       "timed region only)\n");
}

/* ---- JSON ------------------------------------------------------------------------------ */

static void json_samples(FILE *f, const double *v, uint64_t n)
{
	fputc('[', f);
	for (uint64_t i = 0; i < n; i++)
		fprintf(f, "%s%.1f", i ? ", " : "", v[i]);
	fputc(']', f);
}

static void json_result(FILE *f, const struct bench *b, const struct result *res)
{
	fprintf(f, "    {\"threads\": %llu, \"size\": %llu, ",
		(unsigned long long)res->threads, (unsigned long long)res->size);
	fprintf(f, "\"tips_pairs_per_s\": %.1f, \"pmemobj_pairs_per_s\": %.1f, \"ratio\": %.4f, ",
		res->median[SIDE_TIPS], res->median[SIDE_PMEMOBJ], ratio(res));
	fprintf(f, "\"tips_checkpoints_all_runs\": %llu, \"tips_fences_all_runs\": %llu,\n"
		"      \"tips_samples\": ", (unsigned long long)res->tips_checkpoints,
		(unsigned long long)res->tips_fences);
	json_samples(f, res->samples[SIDE_TIPS], b->opt.repeat);
	fputs(", \"pmemobj_samples\": ", f);
	json_samples(f, res->samples[SIDE_PMEMOBJ], b->opt.repeat);
	fputc('}', f);
}

static void json_write(struct bench *b)
{
	FILE *f = fopen(b->opt.json, "w");
	if (!f)
		bench_fail(b, "open %s: %s", b->opt.json, strerror(errno));
	const struct options *o = &b->opt;
	fprintf(f, "{\n  \"nproc\": %u,\n  \"tips_media\": ", b->nproc);
	json_string(f, b->have_media ? tips_media_name(b->media.media) : "");
	fputs(",\n  \"tips_media_reason\": ", f);
	json_string(f, b->have_media ? b->media.media_reason : "");
	fprintf(f, ",\n  \"pmem_is_pmem_force\": 1,\n  \"ops_per_thread\": %llu,\n"
		"  \"slots_per_thread\": %llu,\n  \"repeat\": %llu,\n  \"pool_size\": %llu,\n"
		"  \"dir\": ", (unsigned long long)o->ops, (unsigned long long)o->slots,
		(unsigned long long)o->repeat, (unsigned long long)o->pool_size);
	json_string(f, o->dir);
	fputs(",\n  \"results\": [\n", f);
	for (size_t i = 0; i < b->nresults; i++) {
		json_result(f, b, &b->results[i]);
		fputs(i + 1 < b->nresults ? ",\n" : "\n", f);
	}
	fputs("  ]\n}\n", f);
	if (fclose(f))
		bench_fail(b, "write %s: %s", b->opt.json, strerror(errno));
}

/* ---- main ------------------------------------------------------------------------------- */

static unsigned cpus_online(void)
{
	cpu_set_t set;
	if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0)
		return (unsigned)CPU_COUNT(&set);
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	return n > 0 ? (unsigned)n : 1;
}

static void bench_init(struct bench *b)
{
	b->nproc = cpus_online();
	for (int s = 0; s < NSIDES; s++) {
		int n = snprintf(b->path[s], sizeof(b->path[s]), "%s/allocbench-%ld-%s.pool",
				 b->opt.dir, (long)getpid(), s == SIDE_TIPS ? "tips" : "pmemobj");
		if (n < 0 || (size_t)n >= sizeof(b->path[s]))
			bench_fail(b, "pool path in %s is too long", b->opt.dir);
	}
	b->nresults = b->opt.nthreads * b->opt.nsizes;
	b->results = calloc(b->nresults, sizeof(*b->results));
	if (!b->results)
		bench_fail(b, "out of memory");
	for (size_t i = 0; i < b->nresults; i++) {
		struct result *res = &b->results[i];
		res->threads = b->opt.threads[i / b->opt.nsizes];
		res->size = b->opt.sizes[i % b->opt.nsizes];
		for (int s = 0; s < NSIDES; s++)
			if (!(res->samples[s] = calloc(b->opt.repeat, sizeof(double))))
				bench_fail(b, "out of memory");
	}
}

static void bench_free(struct bench *b)
{
	for (size_t i = 0; i < b->nresults; i++)
		for (int s = 0; s < NSIDES; s++)
			free(b->results[i].samples[s]);
	free(b->results);
}

int main(int argc, char **argv)
{
	struct bench b = { 0 };
	int rc = options_parse(argc, argv, &b.opt);
	if (rc)
		return rc < 0 ? EXIT_OK : rc;
	/* Before any pool exists: libpmem reads it once, at its first is-pmem check. */
	if (setenv("PMEM_IS_PMEM_FORCE", "1", 1))
		bench_fail(&b, "setenv PMEM_IS_PMEM_FORCE: %s", strerror(errno));
	bench_init(&b);
	print_preamble(&b);
	for (size_t i = 0; i < b.nresults; i++)
		run_config(&b, &b.results[i]);
	print_table(&b);
	if (b.opt.json)
		json_write(&b);
	bench_free(&b);
	return EXIT_OK;
}
