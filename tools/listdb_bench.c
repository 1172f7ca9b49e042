/*
 * listdb_bench.c - tips-listdb-bench: the ListDB measurements tips-bench cannot take
 * through the index interface (ListDB, OSDI'22, §4.2.1, §4.3, recovery, and what bounds a
 * sustained put).
 *
 *   tips-listdb-bench flush-timeline [--keys N] [--memtable E] [--max-immutable M]
 *                     [--flush iul|wal | --both] [--sample-ms MS] [--pool-size BYTES]
 *   tips-listdb-bench numa [--keys N] [--gets N] [--domains D] [--threads T]
 *                     [--layout braided|oblivious|both] [--memtable E] [--seed S]
 *   tips-listdb-bench recovery [--rates R1,R2,...] [--seconds S] [--memtable E]
 *                     [--compaction 0|1] [--no-check] [--pool-size BYTES] [--max-l0 L]
 *   tips-listdb-bench puts [--keys N] [--threads T] [--seconds S] [--memtable E] [--rounds R]
 *                     [--max-l0 L]
 *   tips-listdb-bench gets [--keys N] [--gets N] [--threads T] [--memtable E]
 *   common: [--pool PATH] [--seed S] [--no-prefault]
 *
 * Keys are 8 bytes, big-endian of i * 0x9E3779B97F4A7C15 (a bijection on 64-bit
 * integers, so distinct and scattered over the key space); values are 8 bytes (i, little
 * endian), so every get can be checked. Counts accept a decimal suffix (20M = 20000000,
 * 300k = 300000); byte sizes a binary one (4G = 4 GiB).
 *
 * flush-timeline (Figure 9). One writer thread does N blind tips_listdb_put()s into a database
 * with one background thread, compaction off (L1 unused: only the MemTable -> L0 flush
 * runs) and at most M immutable MemTables. A sampler thread wakes every MS milliseconds
 * (absolute deadlines) and records the puts the writer has acknowledged (a counter it
 * bumps after each put), tips_listdb_stats().entries_flushed, write_stall_ns and
 * immutable_now. After the last put the writer calls tips_listdb_flush(db, 0) (seal the last
 * MemTable, wait until every entry is in L0); sampling goes on until then. Output: the
 * per-interval put and flush throughput (Mops/s) as arrays, and the totals. The write
 * stall counter grows when a stall ends, so a stall shows in the interval it ended in.
 * entries_flushed grows by a whole MemTable when its flush ends, so the flush series is
 * a spike per MemTable. The engine does not time the flusher; with compaction off and one
 * background thread it is busy exactly while a MemTable is immutable, so flush_busy_s
 * sums the sampling intervals that end with immutable_now > 0 (error: about one interval
 * per MemTable; the time to free a flushed MemTable is left out) and flush_mops_busy is
 * entries_flushed over it: the flush throughput of Figure 9.
 * With --both, IUL then WAL run in one invocation, each on a fresh pool.
 *
 * puts (docs/listdb.md, "What bounds a put"). T writers put N keys between them on the
 * default configuration; reported per put: the writers' thread CPU time, the rest of
 * the process's CPU time (the background), the flush and compaction CPU time the store
 * counts, Zipper's fences per merged element, and the write stall.
 *
 * numa (Figure 11a). D domain pools, cache_entries = second_chance_entries = 0 (no
 * lookup cache: every get walks the PMTables), count_traversals on, compaction on. T
 * writer threads (thread i calls tips_listdb_thread_domain(db, i % D) first) put N keys in
 * total, tips_listdb_flush(db, 1) merges everything into L1 (flush + Zipper built the
 * PMTables), then T reader threads (same domain assignment) do N random gets, each
 * checked. Reported: the gets' element visits and the share in another domain than the
 * reader's (traversals, cross_domain_traversals) and the same for Zipper's scan phase
 * placing the elements (compaction_traversals, compaction_cross): braided vs oblivious,
 * same keys and seed. Oblivious layouts should show about (D-1)/D remote.
 *
 * gets (docs/listdb.md, "What a get costs"). The default configuration (lookup caches
 * sized from --keys) with count_traversals on: T writers put N keys, tips_listdb_flush(db,
 * 1) merges everything into L1, then T readers do G random checked gets. Reported per
 * get: the readers' thread CPU time, the elements visited in PMTables (traversals), the
 * hash cache's hit ratio and the share of gets the second-chance cache gave a start.
 * With --memtable E > N nothing is flushed: every get is answered by the one mutable
 * MemTable, a skiplist in DRAM (run with N = a shard's keys for the reference).
 *
 * recovery. For each rate R (ops/s, or "unlimited"): a forked child creates the
 * database and puts keys 0, 1, 2, ... from one thread, paced against CLOCK_MONOTONIC,
 * and after each acknowledged put stores the count in a shared anonymous mapping; the
 * parent SIGKILLs it S seconds after it opened the database. A second child opens the
 * database (the open's wall time, tips_listdb_stats' recovery_ms, recovered_entries, l0_now),
 * gets every acknowledged key (a missing or wrong one is a failure: exit 1), then
 * tips_listdb_flush()es and runs tips_listdb_check(). Last, the same with a clean close instead of
 * the kill (its open should recover nothing). The parent never opens the database.
 *
 * Output: one JSON object per run on stdout (one per line), a short summary on stderr.
 * Pools: PATH and PATH.dN (default DIR/tips-listdb-bench-PID, DIR $TIPS_BENCH_POOL_DIR
 * or else /dev/shm); PATH must not exist; they are removed at the end.
 * Exit: 0, 1 a failed check or run, 2 usage.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <tips/listdb.h>
#include <tips/pool.h>

#include "size_arg.h"

enum { EXIT_OK = 0, EXIT_FAIL = 1, EXIT_USAGE = 2 };

#define KEY_MULT 0x9E3779B97F4A7C15ull
/* Pool bytes per entry: an 8+8 byte entry is 40 + 8 * height bytes (about 51 on
 * average), log chunks are 1 MiB, and the pool's own log area takes 1/8 of it; 80 is a
 * margin. WAL mode copies every entry once more. */
#define POOL_BYTES_PER_ENTRY 80ull
#define POOL_SLACK (256ull << 20)
#define MAX_RATES 16
#define MAX_THREADS 64

/* ---- options -------------------------------------------------------------------------- */

struct options {
	const char *mode;
	char pool[4096];
	uint64_t keys;               /* 0: the mode's default */
	uint64_t gets;               /* numa: 0 = keys */
	uint64_t rounds;             /* puts: 0 = 1 */
	uint64_t memtable;           /* 0: the mode's default */
	uint64_t pool_size;          /* 0: computed */
	unsigned max_immutable;
	unsigned max_l0;             /* puts, recovery: 0 = the default */
	int flush_mode;              /* flush-timeline: TIPS_LISTDB_FLUSH_* */
	bool both;                   /* flush-timeline: IUL then WAL */
	unsigned sample_ms;
	unsigned domains, threads;
	int layout;                  /* numa: 1 braided, 0 oblivious, -1 both */
	uint64_t seed;
	double seconds;
	double rates[MAX_RATES];     /* recovery: 0 = unlimited */
	unsigned nrates;
	int compaction;              /* recovery */
	bool check;                  /* recovery: tips_listdb_check after verifying */
	bool prefault;               /* fault the new pools in at open (default; --no-prefault) */
};

static void usage(FILE *f)
{
	fprintf(f,
		"usage: tips-listdb-bench MODE [options]\n"
		"  flush-timeline  [--keys N (20M)] [--memtable E (1M)] [--max-immutable M (4)]\n"
		"                  [--flush iul|wal (iul) | --both] [--sample-ms MS (100)]\n"
		"  numa            [--keys N (2M)] [--gets N (=keys)] [--domains D (4)]\n"
		"                  [--threads T (4)] [--layout braided|oblivious|both (both)]\n"
		"                  [--memtable E (256K)]\n"
		"  puts            [--keys N (10M)] [--threads T (2)] [--seconds S (no limit)]\n"
		"                  [--memtable E (default)] [--rounds R (1): every key R times,\n"
		"                  rounds after the first overwriting] [--max-l0 L (default)]:\n"
		"                  sustained blind puts, defaults\n"
		"  gets            [--keys N (2M)] [--gets N (=keys)] [--threads T (2)]: gets\n"
		"                  after a load merged into L1, defaults: CPU and visits per get;\n"
		"                  [--memtable E > N]: all in one MemTable (a DRAM skiplist)\n"
		"  recovery        [--rates R,... (100k,300k,unlimited)] [--seconds S (5)]\n"
		"                  [--memtable E (262144)] [--compaction 0|1 (1)] [--no-check]\n"
		"                  [--max-l0 L (default)]\n"
		"  common          [--pool PATH ($TIPS_BENCH_POOL_DIR or /dev/shm, then\n"
		"                  /tips-listdb-bench-PID)] [--seed S]\n"
		"                  [--pool-size BYTES (per domain pool; default from N)]\n"
		"                  [--no-prefault: new pools' pages fault in during the run,\n"
		"                  not at open (not used by recovery's writer and reopen)]\n"
		SIZE_ARG_RULE);
}

static int parse_rates(const char *s, struct options *o)
{
	char buf[512];
	if (strlen(s) >= sizeof(buf))
		return -1;
	strcpy(buf, s);
	o->nrates = 0;
	for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok;
	     tok = strtok_r(NULL, ",", &save)) {
		if (o->nrates == MAX_RATES)
			return -1;
		uint64_t r;
		if (!strcmp(tok, "unlimited") || !strcmp(tok, "0"))
			r = 0;
		else if (size_arg_count(tok, &r) || r == 0)
			return -1;
		o->rates[o->nrates++] = (double)r;
	}
	return o->nrates ? 0 : -1;
}

static int parse_options(int argc, char **argv, struct options *o)
{
	memset(o, 0, sizeof(*o));
	o->max_immutable = 4;
	o->flush_mode = TIPS_LISTDB_FLUSH_IUL;
	o->sample_ms = 100;
	o->domains = 4;
	o->threads = 4;
	o->layout = -1;
	o->seed = 42;
	o->seconds = 0; /* the mode's default */
	o->compaction = 1;
	o->check = true;
	o->prefault = true;
	o->rates[0] = 100000;
	o->rates[1] = 300000;
	o->rates[2] = 0;
	o->nrates = 3;
	/* The pool directory tips-bench uses: a huge-page tmpfs maps the pool as DAX maps
	 * PM, with 2 MiB pages (scripts/pool-dir.sh). */
	const char *dir = getenv("TIPS_BENCH_POOL_DIR");
	snprintf(o->pool, sizeof(o->pool), "%s/tips-listdb-bench-%ld", dir && *dir ? dir : "/dev/shm",
		 (long)getpid());
	if (argc < 2 || argv[1][0] == '-') {
		if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
			usage(stdout);
			exit(EXIT_OK);
		}
		return -1;
	}
	o->mode = argv[1];
	bool threads_given = false;
	if (strcmp(o->mode, "flush-timeline") && strcmp(o->mode, "numa") &&
	    strcmp(o->mode, "recovery") && strcmp(o->mode, "puts") && strcmp(o->mode, "gets")) {
		fprintf(stderr, "unknown mode '%s'\n", o->mode);
		return -1;
	}
	for (int i = 2; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		uint64_t x;
		bool takes = true;
		if (!strcmp(a, "--both")) {
			o->both = true;
			takes = false;
		} else if (!strcmp(a, "--no-check")) {
			o->check = false;
			takes = false;
		} else if (!strcmp(a, "--no-prefault")) {
			o->prefault = false;
			takes = false;
		} else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
			usage(stdout);
			exit(EXIT_OK);
		} else if (!v) {
			fprintf(stderr, "%s needs a value\n", a);
			return -1;
		} else if (!strcmp(a, "--pool")) {
			if (strlen(v) >= sizeof(o->pool) - 8)
				return -1;
			snprintf(o->pool, sizeof(o->pool), "%s", v);
		} else if (!strcmp(a, "--keys")) {
			if (size_arg_count(v, &o->keys) || o->keys == 0)
				goto bad;
		} else if (!strcmp(a, "--rounds")) {
			if (size_arg_count(v, &o->rounds) || o->rounds == 0)
				goto bad;
		} else if (!strcmp(a, "--gets")) {
			if (size_arg_count(v, &o->gets))
				goto bad;
		} else if (!strcmp(a, "--memtable")) {
			if (size_arg_count(v, &o->memtable))
				goto bad;
			if (o->memtable == 0)
				goto bad;
		} else if (!strcmp(a, "--pool-size")) {
			if (size_arg_bytes(v, &o->pool_size) || o->pool_size % TIPS_POOL_ALIGN ||
			    o->pool_size < TIPS_POOL_MIN_SIZE) {
				fprintf(stderr, "--pool-size: a multiple of 2 MiB, at least 8 MiB\n");
				return -1;
			}
		} else if (!strcmp(a, "--max-immutable")) {
			if (size_arg_count(v, &x) || x == 0 || x > 30)
				goto bad;
			o->max_immutable = (unsigned)x;
		} else if (!strcmp(a, "--max-l0")) { /* tips_listdb_open checks the range */
			if (size_arg_count(v, &x) || x == 0 || x > UINT32_MAX)
				goto bad;
			o->max_l0 = (unsigned)x;
		} else if (!strcmp(a, "--flush")) {
			if (!strcmp(v, "iul"))
				o->flush_mode = TIPS_LISTDB_FLUSH_IUL;
			else if (!strcmp(v, "wal"))
				o->flush_mode = TIPS_LISTDB_FLUSH_WAL;
			else
				goto bad;
		} else if (!strcmp(a, "--sample-ms")) {
			if (size_arg_count(v, &x) || x == 0 || x > 60000)
				goto bad;
			o->sample_ms = (unsigned)x;
		} else if (!strcmp(a, "--domains")) {
			if (size_arg_count(v, &x) || x == 0 || x > TIPS_LISTDB_MAX_DOMAINS)
				goto bad;
			o->domains = (unsigned)x;
		} else if (!strcmp(a, "--threads")) {
			if (size_arg_count(v, &x) || x == 0 || x > MAX_THREADS)
				goto bad;
			o->threads = (unsigned)x;
			threads_given = true;
		} else if (!strcmp(a, "--layout")) {
			if (!strcmp(v, "braided"))
				o->layout = 1;
			else if (!strcmp(v, "oblivious"))
				o->layout = 0;
			else if (!strcmp(v, "both"))
				o->layout = -1;
			else
				goto bad;
		} else if (!strcmp(a, "--seed")) {
			if (size_arg_count(v, &o->seed))
				goto bad;
		} else if (!strcmp(a, "--seconds")) {
			char *end;
			o->seconds = strtod(v, &end);
			if (*end || !(o->seconds > 0) || o->seconds > 3600)
				goto bad;
		} else if (!strcmp(a, "--rates")) {
			if (parse_rates(v, o))
				goto bad;
		} else if (!strcmp(a, "--compaction")) {
			if (strcmp(v, "0") && strcmp(v, "1"))
				goto bad;
			o->compaction = v[0] == '1';
		} else {
			fprintf(stderr, "unknown option %s\n", a);
			return -1;
		}
		if (takes)
			i++;
		continue;
bad:
		fprintf(stderr, "bad value '%s' for %s\n", v, a);
		return -1;
	}
	if (!strcmp(o->mode, "recovery") && o->seconds == 0)
		o->seconds = 5;
	if ((!strcmp(o->mode, "puts") || !strcmp(o->mode, "gets")) && !threads_given)
		o->threads = 2;
	return 0;
}

/* ---- helpers --------------------------------------------------------------------------- */

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void make_key(uint64_t i, unsigned char k[8])
{
	uint64_t x = i * KEY_MULT;
	for (int b = 0; b < 8; b++)
		k[b] = (unsigned char)(x >> (56 - 8 * b));
}

static uint64_t xorshift(uint64_t *s)
{
	uint64_t x = *s;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}


static bool pools_exist(const char *path)
{
	char p[4200];
	struct stat st;
	for (unsigned d = 0; d < TIPS_LISTDB_MAX_DOMAINS; d++) {
		tips_listdb_pool_path(path, d, p, sizeof(p));
		if (stat(p, &st) == 0)
			return true;
	}
	return false;
}

static uint64_t round_pool(uint64_t bytes)
{
	if (bytes < TIPS_POOL_MIN_SIZE)
		bytes = TIPS_POOL_MIN_SIZE;
	return (bytes + TIPS_POOL_ALIGN - 1) & ~(TIPS_POOL_ALIGN - 1);
}

/* Opens the store at @pool (created fresh by the caller's config); on failure says why
 * on stderr, removes what the open left, and returns nonzero. Unless --no-prefault, the
 * pools are faulted in at open (tips_pool_options.prefault): a tmpfs pool's pages are
 * zeroed then, not on the first store to each during the run, as DAX PM needs no
 * zeroing. */
static int open_fresh(const struct options *o, const struct tips_listdb_config *cfg_in,
		      struct tips_listdb **db)
{
	const char *pool = o->pool;
	struct tips_listdb_config cfg = *cfg_in;
	struct tips_pool_options popts;
	if (cfg.pool)
		popts = *cfg.pool;
	else
		tips_pool_options_init(&popts);
	popts.prefault = o->prefault;
	cfg.pool = &popts;
	int rc = tips_listdb_open(pool, &cfg, db);
	if (rc) {
		fprintf(stderr, "tips_listdb_open %s: %s (%s)\n", pool, tips_strerror(rc),
			tips_errormsg());
		tips_listdb_destroy(pool);
	}
	return rc;
}

/* Fails (with a message naming what fits) if @need bytes do not fit in the file system of
 * @path with a 512 MiB margin. */
static int check_space(const char *path, uint64_t need, uint64_t bytes_per_key)
{
	char dir[4096];
	snprintf(dir, sizeof(dir), "%s", path);
	char *slash = strrchr(dir, '/');
	if (slash == dir)
		dir[1] = '\0';
	else if (slash)
		*slash = '\0';
	else
		snprintf(dir, sizeof(dir), ".");
	struct statvfs sv;
	if (statvfs(dir, &sv) != 0) {
		fprintf(stderr, "statvfs %s: %s\n", dir, strerror(errno));
		return -1;
	}
	uint64_t avail = (uint64_t)sv.f_bavail * sv.f_frsize;
	uint64_t margin = 512ull << 20;
	if (need + margin > avail) {
		uint64_t fit = avail > margin + POOL_SLACK ? (avail - margin - POOL_SLACK) /
							     bytes_per_key : 0;
		fprintf(stderr, "the pools need %.2f GiB but %s has %.2f GiB free (with a 0.5 GiB "
			"margin): use fewer keys (about %" PRIu64 " fit) or another --pool\n",
			(double)need / (1 << 30), dir, (double)avail / (1 << 30), fit);
		return -1;
	}
	return 0;
}

/* ---- JSON (flat objects: numbers, strings without escapes, number arrays) ---------------- */

static bool j_first;

static void j_open(void)
{
	fputc('{', stdout);
	j_first = true;
}
static void j_key(const char *k)
{
	printf("%s\"%s\":", j_first ? "" : ",", k);
	j_first = false;
}
static void j_u64(const char *k, uint64_t v)
{
	j_key(k);
	printf("%" PRIu64, v);
}
static void j_num(const char *k, double v)
{
	j_key(k);
	if (isfinite(v))
		printf("%.6g", v);
	else
		fputs("null", stdout);
}
static void j_str(const char *k, const char *s)
{
	j_key(k);
	fputc('"', stdout);
	for (; *s; s++) {
		if (*s == '"' || *s == '\\')
			fputc('\\', stdout);
		if ((unsigned char)*s >= 0x20)
			fputc(*s, stdout);
	}
	fputc('"', stdout);
}
static void j_bool(const char *k, bool b)
{
	j_key(k);
	fputs(b ? "true" : "false", stdout);
}
/* @fmt: a printf format of one double. */
static void j_arr(const char *k, const double *v, size_t n, const char *fmt)
{
	j_key(k);
	fputc('[', stdout);
	for (size_t i = 0; i < n; i++) {
		if (i)
			fputc(',', stdout);
		printf(fmt, isfinite(v[i]) ? v[i] : 0.0);
	}
	fputc(']', stdout);
}
static void j_close(void)
{
	fputs("}\n", stdout);
	fflush(stdout);
}

static double share(uint64_t part, uint64_t whole)
{
	return whole ? (double)part / (double)whole : 0.0;
}

/* ---- flush-timeline ----------------------------------------------------------------------- */

struct sample {
	double t;
	uint64_t puts, flushed, stall_ns, imm;
};

struct timeline {
	struct tips_listdb *db;
	_Atomic uint64_t puts;       /* acknowledged by the writer */
	_Atomic bool stop;
	double t0;
	unsigned sample_ms;
	struct sample *s;
	size_t n, cap;
	int oom;
};

static void take_sample(struct timeline *tl, double t)
{
	struct tips_listdb_stats st;
	tips_listdb_stats(tl->db, &st);
	if (tl->n == tl->cap) {
		size_t cap = tl->cap ? 2 * tl->cap : 1024;
		struct sample *s = realloc(tl->s, cap * sizeof(*s));
		if (!s) {
			tl->oom = 1;
			return;
		}
		tl->s = s;
		tl->cap = cap;
	}
	tl->s[tl->n++] = (struct sample){ t - tl->t0, atomic_load(&tl->puts), st.entries_flushed,
					  st.write_stall_ns, st.immutable_now };
}

static void *sampler_main(void *arg)
{
	struct timeline *tl = arg;
	struct timespec next;
	clock_gettime(CLOCK_MONOTONIC, &next);
	while (!atomic_load(&tl->stop)) {
		next.tv_nsec += (long)tl->sample_ms * 1000000L;
		while (next.tv_nsec >= 1000000000L) {
			next.tv_nsec -= 1000000000L;
			next.tv_sec++;
		}
		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL) == EINTR)
			;
		if (atomic_load(&tl->stop))
			break;
		take_sample(tl, now_s());
	}
	return NULL;
}

static int run_flush_timeline(const struct options *o, int flush_mode)
{
	uint64_t keys = o->keys ? o->keys : 20000000;
	uint64_t memtable = o->memtable ? o->memtable : 1000000;
	uint64_t per_entry = POOL_BYTES_PER_ENTRY * (flush_mode == TIPS_LISTDB_FLUSH_WAL ? 2 : 1);
	uint64_t pool_size = o->pool_size ? o->pool_size : round_pool(keys * per_entry +
								      POOL_SLACK);
	if (check_space(o->pool, pool_size, per_entry))
		return EXIT_FAIL;
	const char *fname = flush_mode == TIPS_LISTDB_FLUSH_WAL ? "wal" : "iul";

	struct tips_listdb_config cfg;
	tips_listdb_config_init(&cfg);
	cfg.flags = TIPS_LISTDB_CREATE;
	cfg.pool_size = pool_size;
	cfg.expected_keys = keys;
	cfg.flush_mode = flush_mode;
	cfg.memtable_entries = memtable;
	cfg.max_immutable = o->max_immutable;
	cfg.compaction_threads = 1;
	cfg.compaction = 0;
	struct tips_listdb *db = NULL;
	if (open_fresh(o, &cfg, &db))
		return EXIT_FAIL;
	struct tips_pm_counters pm0, pm1, pmw0, pmw1;
	tips_pm_counters_total(&pm0);
	tips_pm_counters_thread(&pmw0);

	struct timeline tl = { .db = db, .sample_ms = o->sample_ms };
	pthread_t sampler;
	tl.t0 = now_s();
	take_sample(&tl, tl.t0);
	if (pthread_create(&sampler, NULL, sampler_main, &tl) != 0) {
		fprintf(stderr, "cannot start the sampler thread\n");
		tips_listdb_close(&db);
		tips_listdb_destroy(o->pool);
		return EXIT_FAIL;
	}
	unsigned char k[8];
	int put_rc = 0;
	uint64_t i;
	for (i = 0; i < keys; i++) {
		make_key(i, k);
		if ((put_rc = tips_listdb_put(db, k, 8, &i, 8)) != 0)
			break;
		atomic_store_explicit(&tl.puts, i + 1, memory_order_relaxed);
	}
	double t_put = now_s();
	tips_pm_counters_thread(&pmw1); /* the writer's own flushes and fences */
	struct tips_listdb_stats at_put_end;
	tips_listdb_stats(db, &at_put_end);
	int flush_rc = put_rc ? 0 : tips_listdb_flush(db, 0);
	double t_end = now_s();
	atomic_store(&tl.stop, true);
	pthread_join(sampler, NULL);
	take_sample(&tl, t_end);
	struct tips_listdb_stats st;
	tips_listdb_stats(db, &st);
	tips_listdb_close(&db);
	tips_pm_counters_total(&pm1);
	tips_listdb_destroy(o->pool);
	if (put_rc || flush_rc || tl.oom) {
		fprintf(stderr, "flush-timeline %s: %s after %" PRIu64 " puts: %s (%s)\n", fname,
			put_rc ? "tips_listdb_put failed" : flush_rc ? "tips_listdb_flush failed"
							: "out of memory for samples",
			i, tips_strerror(put_rc ? put_rc : flush_rc), tips_errormsg());
		free(tl.s);
		return EXIT_FAIL;
	}

	/* Per-interval rates. */
	size_t n = tl.n > 1 ? tl.n - 1 : 0;
	double *t = calloc(n + 1, sizeof(double)), *pm = calloc(n + 1, sizeof(double));
	double *fm = calloc(n + 1, sizeof(double)), *imm = calloc(n + 1, sizeof(double));
	double *stall = calloc(n + 1, sizeof(double));
	if (!t || !pm || !fm || !imm || !stall) {
		fprintf(stderr, "out of memory\n");
		return EXIT_FAIL;
	}
	double peak_put = 0, peak_flush = 0, max_imm = 0, busy = 0;
	for (size_t j = 0; j < n; j++) {
		const struct sample *a = &tl.s[j], *b = &tl.s[j + 1];
		double dt = b->t - a->t;
		t[j] = b->t;
		pm[j] = dt > 0 ? (double)(b->puts - a->puts) / dt / 1e6 : 0;
		fm[j] = dt > 0 ? (double)(b->flushed - a->flushed) / dt / 1e6 : 0;
		imm[j] = (double)b->imm;
		stall[j] = (double)(b->stall_ns - a->stall_ns) / 1e6;
		if (b->imm > 0)
			busy += dt;
		if (pm[j] > peak_put)
			peak_put = pm[j];
		if (fm[j] > peak_flush)
			peak_flush = fm[j];
		if (imm[j] > max_imm)
			max_imm = imm[j];
	}
	double put_s = t_put - tl.t0, total_s = t_end - tl.t0;
	uint64_t lag = keys - at_put_end.entries_flushed;
	uint64_t wl = pmw1.lines_flushed - pmw0.lines_flushed, wf = pmw1.fences - pmw0.fences;
	uint64_t tl_lines = pm1.lines_flushed - pm0.lines_flushed, tf = pm1.fences - pm0.fences;

	j_open();
	j_str("mode", "flush-timeline");
	j_str("flush", fname);
	j_u64("keys", keys);
	j_u64("memtable_entries", memtable);
	j_u64("max_immutable", o->max_immutable);
	j_u64("compaction", 0);
	j_u64("compaction_threads", 1);
	j_u64("pool_size", pool_size);
	j_str("flush_instruction", tips_flush_instruction());
	j_u64("sample_ms", o->sample_ms);
	j_num("put_s", put_s);
	j_num("drain_s", t_end - t_put);
	j_num("total_s", total_s);
	j_num("put_mops", (double)keys / put_s / 1e6);
	j_num("flush_mops_wall", (double)st.entries_flushed / total_s / 1e6);
	j_num("flush_mops_during_puts", (double)at_put_end.entries_flushed / put_s / 1e6);
	j_num("flush_busy_s", busy);
	j_num("flush_mops_busy", busy > 0 ? (double)st.entries_flushed / busy / 1e6 : 0);
	j_u64("flushed_at_put_end", at_put_end.entries_flushed);
	j_u64("lag_at_put_end", lag);
	j_u64("entries_flushed", st.entries_flushed);
	j_u64("memtables_flushed", st.memtables_flushed);
	j_num("write_stall_s", (double)st.write_stall_ns / 1e9);
	j_num("stall_share_of_put_time", (double)st.write_stall_ns / 1e9 / put_s);
	j_num("peak_put_mops", peak_put);
	j_num("peak_flush_mops", peak_flush);
	j_u64("max_immutable_seen", (uint64_t)max_imm);
	j_u64("writer_lines_flushed", wl);
	j_u64("writer_fences", wf);
	j_u64("background_lines_flushed", tl_lines - wl);
	j_u64("background_fences", tf - wf);
	j_u64("samples", n);
	j_arr("t_s", t, n, "%.4f");
	j_arr("put_mops_series", pm, n, "%.4g");
	j_arr("flush_mops_series", fm, n, "%.4g");
	j_arr("immutable_series", imm, n, "%.0f");
	j_arr("stall_ms_series", stall, n, "%.4g");
	j_close();
	fprintf(stderr, "flush-timeline %s: %" PRIu64 " puts in %.2f s (%.3f Mops/s), flush "
		"%.3f Mops/s over %.2f s (%.3f during puts, %.3f while busy for %.2f s), lag at "
		"put end %" PRIu64 ", write stall %.2f s (%.0f%% of put time), background "
		"flushed %" PRIu64 " lines\n", fname, keys, put_s, (double)keys / put_s / 1e6,
		(double)st.entries_flushed / total_s / 1e6, total_s,
		(double)at_put_end.entries_flushed / put_s / 1e6,
		busy > 0 ? (double)st.entries_flushed / busy / 1e6 : 0, busy, lag,
		(double)st.write_stall_ns / 1e9, 100.0 * (double)st.write_stall_ns / 1e9 / put_s,
		tl_lines - wl);
	free(t);
	free(pm);
	free(fm);
	free(imm);
	free(stall);
	free(tl.s);
	return EXIT_OK;
}

/* ---- puts: what bounds sustained puts ------------------------------------------------------ */

struct puts_run {
	struct tips_listdb *db;
	uint64_t keys, rounds;
	unsigned threads;
	double deadline;             /* now_s() after which writers stop (0: none) */
	pthread_barrier_t start;
	_Atomic uint64_t done, errors;
	_Atomic uint64_t writer_cpu_ns;
};

struct puts_thread {
	struct puts_run *r;
	unsigned id;
	pthread_t th;
};

static uint64_t cpu_ns(clockid_t clk)
{
	struct timespec ts;
	clock_gettime(clk, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Writer @id puts keys id, id + T, id + 2T, ... (scattered by make_key), the whole
 * range once per round (every round after the first overwrites), until the count or the
 * deadline; adds its own CPU time to writer_cpu_ns. */
static void *puts_writer(void *arg)
{
	struct puts_thread *t = arg;
	struct puts_run *r = t->r;
	pthread_barrier_wait(&r->start);
	uint64_t c0 = cpu_ns(CLOCK_THREAD_CPUTIME_ID), n = 0;
	unsigned char k[8];
	bool over = false;
	for (uint64_t round = 0; round < r->rounds && !over; round++)
		for (uint64_t i = t->id; i < r->keys; i += r->threads) {
			make_key(i, k);
			uint64_t v = i + round;
			if (tips_listdb_put(r->db, k, 8, &v, 8) != 0) {
				atomic_fetch_add(&r->errors, 1);
				over = true;
				break;
			}
			if (++n % 4096 == 0 && r->deadline > 0 && now_s() > r->deadline) {
				over = true;
				break;
			}
		}
	atomic_fetch_add(&r->done, n);
	atomic_fetch_add(&r->writer_cpu_ns, cpu_ns(CLOCK_THREAD_CPUTIME_ID) - c0);
	return NULL;
}

static int run_puts(const struct options *o)
{
	uint64_t keys = o->keys ? o->keys : 10000000;
	unsigned threads = o->threads ? o->threads : 2;
	uint64_t rounds = o->rounds ? o->rounds : 1;
	uint64_t pool_size = o->pool_size ? o->pool_size : round_pool(keys * rounds *
								      POOL_BYTES_PER_ENTRY + POOL_SLACK);
	if (check_space(o->pool, pool_size, POOL_BYTES_PER_ENTRY))
		return EXIT_FAIL;
	struct tips_listdb_config cfg;
	tips_listdb_config_init(&cfg); /* the defaults are what is measured */
	cfg.flags = TIPS_LISTDB_CREATE;
	cfg.pool_size = pool_size;
	cfg.expected_keys = keys;
	if (o->memtable)
		cfg.memtable_entries = o->memtable;
	if (o->max_l0)
		cfg.max_l0 = o->max_l0;
	struct puts_run r = { .keys = keys, .rounds = rounds, .threads = threads };
	if (open_fresh(o, &cfg, &r.db))
		return EXIT_FAIL;
	struct puts_thread th[MAX_THREADS];
	pthread_barrier_init(&r.start, NULL, threads + 1);
	for (unsigned i = 0; i < threads; i++) {
		th[i] = (struct puts_thread){ .r = &r, .id = i };
		if (pthread_create(&th[i].th, NULL, puts_writer, &th[i]) != 0) {
			fprintf(stderr, "cannot start writer %u\n", i);
			exit(EXIT_FAIL);
		}
	}
	struct tips_pm_counters pm0, pm1;
	struct tips_listdb_stats s0, s1;
	tips_listdb_stats(r.db, &s0);
	tips_pm_counters_total(&pm0);
	uint64_t proc0 = cpu_ns(CLOCK_PROCESS_CPUTIME_ID);
	double t0 = now_s();
	r.deadline = o->seconds > 0 ? t0 + o->seconds : 0;
	pthread_barrier_wait(&r.start);
	for (unsigned i = 0; i < threads; i++)
		pthread_join(th[i].th, NULL);
	double t1 = now_s();
	uint64_t proc1 = cpu_ns(CLOCK_PROCESS_CPUTIME_ID);
	tips_pm_counters_total(&pm1);
	tips_listdb_stats(r.db, &s1);
	pthread_barrier_destroy(&r.start);
	tips_listdb_close(&r.db);
	tips_listdb_destroy(o->pool);
	uint64_t n = atomic_load(&r.done);
	if (atomic_load(&r.errors) || n == 0) {
		fprintf(stderr, "puts: a put failed after %" PRIu64 " puts\n", n);
		return EXIT_FAIL;
	}
	double secs = t1 - t0, dn = (double)n;
	uint64_t wcpu = atomic_load(&r.writer_cpu_ns), pcpu = proc1 - proc0;
	uint64_t bcpu = pcpu > wcpu ? pcpu - wcpu : 0;
	uint64_t merged = s1.entries_merged - s0.entries_merged;
	uint64_t cfences = s1.compaction_fences - s0.compaction_fences;
	double stall_s = (double)(s1.write_stall_ns - s0.write_stall_ns) / 1e9;
	j_open();
	j_str("mode", "puts");
	j_u64("keys", keys);
	j_u64("rounds", rounds);
	j_u64("threads", threads);
	j_u64("memtable_entries", cfg.memtable_entries);
	j_u64("max_l0", cfg.max_l0);
	j_u64("compaction_threads", cfg.compaction_threads);
	j_str("flush_instruction", tips_flush_instruction());
	j_u64("puts", n);
	j_num("seconds", secs);
	j_num("put_mops", dn / secs / 1e6);
	j_num("writer_cpu_ns_per_put", (double)wcpu / dn);
	j_num("background_cpu_ns_per_put", (double)bcpu / dn);
	j_num("flush_cpu_ns_per_put", (double)(s1.flush_cpu_ns - s0.flush_cpu_ns) / dn);
	j_num("compaction_cpu_ns_per_put",
	      (double)(s1.compaction_cpu_ns - s0.compaction_cpu_ns) / dn);
	j_num("compaction_cpu_ns_per_merged", merged ? (double)(s1.compaction_cpu_ns -
							       s0.compaction_cpu_ns) / (double)merged : 0);
	j_u64("entries_merged", merged);
	j_u64("obsolete_marked", s1.obsolete_marked - s0.obsolete_marked);
	j_u64("compactions", s1.compactions - s0.compactions);
	j_num("fences_per_merged_element", merged ? (double)cfences / (double)merged : 0);
	j_num("fences_per_put_all_threads", (double)(pm1.fences - pm0.fences) / dn);
	j_num("write_stall_s", stall_s);
	j_num("stall_share", stall_s / secs / threads);
	j_u64("write_stalls", s1.write_stalls - s0.write_stalls);
	j_u64("l0_at_end", s1.l0_now);
	j_close();
	fprintf(stderr, "puts: %" PRIu64 " puts by %u threads in %.2f s (%.3f Mops/s); CPU per "
		"put: writer %.0f ns + background %.0f ns (flush %.0f, compaction %.0f); "
		"%.2f fences per merged element (%" PRIu64 " merged); writers stalled %.2f s "
		"(%.1f%% of their time)\n", n, threads, secs, dn / secs / 1e6, (double)wcpu / dn,
		(double)bcpu / dn, (double)(s1.flush_cpu_ns - s0.flush_cpu_ns) / dn,
		(double)(s1.compaction_cpu_ns - s0.compaction_cpu_ns) / dn,
		merged ? (double)cfences / (double)merged : 0, merged, stall_s,
		100.0 * stall_s / secs / threads);
	return EXIT_OK;
}

/* ---- numa ---------------------------------------------------------------------------------- */

struct numa_run {
	struct tips_listdb *db;
	const struct options *o;
	uint64_t keys, gets;
	pthread_barrier_t start;
	_Atomic uint64_t errors;     /* failed puts, missing or wrong gets */
	_Atomic int domain_err;
	_Atomic uint64_t reader_cpu_ns; /* the readers' thread CPU time, summed */
};

struct numa_thread {
	struct numa_run *r;
	unsigned id;
	pthread_t th;
};

static void *numa_writer(void *arg)
{
	struct numa_thread *t = arg;
	struct numa_run *r = t->r;
	if (tips_listdb_thread_domain(r->db, t->id % r->o->domains))
		atomic_store(&r->domain_err, 1);
	pthread_barrier_wait(&r->start);
	unsigned char k[8];
	for (uint64_t i = t->id; i < r->keys; i += r->o->threads) {
		make_key(i, k);
		if (tips_listdb_put(r->db, k, 8, &i, 8))
			atomic_fetch_add(&r->errors, 1);
	}
	return NULL;
}

static void *numa_reader(void *arg)
{
	struct numa_thread *t = arg;
	struct numa_run *r = t->r;
	if (tips_listdb_thread_domain(r->db, t->id % r->o->domains))
		atomic_store(&r->domain_err, 1);
	uint64_t rng = (r->o->seed + 1) * 0x2545F4914F6CDD1Dull + t->id * 7919 + 1;
	uint64_t n = r->gets / r->o->threads + (t->id < r->gets % r->o->threads);
	pthread_barrier_wait(&r->start);
	unsigned char k[8];
	uint64_t v, errors = 0;
	size_t vlen;
	uint64_t c0 = cpu_ns(CLOCK_THREAD_CPUTIME_ID);
	for (uint64_t j = 0; j < n; j++) {
		uint64_t i = xorshift(&rng) % r->keys;
		make_key(i, k);
		if (tips_listdb_get(r->db, k, 8, &v, sizeof(v), &vlen) || vlen != 8 || v != i)
			errors++;
	}
	atomic_fetch_add(&r->reader_cpu_ns, cpu_ns(CLOCK_THREAD_CPUTIME_ID) - c0);
	atomic_fetch_add(&r->errors, errors);
	return NULL;
}

/* Starts o->threads threads of @fn, releases them together, returns the seconds until
 * the last one ended (or a negative value if a thread could not start). */
static double numa_phase(struct numa_run *r, void *(*fn)(void *))
{
	struct numa_thread th[MAX_THREADS];
	unsigned n = r->o->threads;
	pthread_barrier_init(&r->start, NULL, n + 1);
	for (unsigned i = 0; i < n; i++) {
		th[i].r = r;
		th[i].id = i;
		if (pthread_create(&th[i].th, NULL, fn, &th[i]) != 0) {
			fprintf(stderr, "cannot start thread %u\n", i);
			exit(EXIT_FAIL); /* the barrier would never open */
		}
	}
	pthread_barrier_wait(&r->start);
	double t0 = now_s();
	for (unsigned i = 0; i < n; i++)
		pthread_join(th[i].th, NULL);
	double dt = now_s() - t0;
	pthread_barrier_destroy(&r->start);
	return dt;
}

struct numa_result {
	double share_get, share_put, get_mops, put_mops;
};

static int run_numa(const struct options *o, int braided, struct numa_result *res)
{
	uint64_t keys = o->keys ? o->keys : 2000000;
	uint64_t gets = o->gets ? o->gets : keys;
	uint64_t memtable = o->memtable ? o->memtable : 256u << 10;
	unsigned per_domain_threads = (o->threads + o->domains - 1) / o->domains;
	uint64_t per_domain = keys / o->threads * per_domain_threads + per_domain_threads;
	uint64_t pool_size = o->pool_size ? o->pool_size
					  : round_pool(per_domain * POOL_BYTES_PER_ENTRY +
						       POOL_SLACK);
	if (check_space(o->pool, pool_size * o->domains, POOL_BYTES_PER_ENTRY))
		return EXIT_FAIL;
	struct tips_listdb_config cfg;
	tips_listdb_config_init(&cfg);
	cfg.flags = TIPS_LISTDB_CREATE;
	cfg.pool_size = pool_size;
	cfg.expected_keys = keys;
	cfg.domains = o->domains;
	cfg.braided = braided;
	cfg.memtable_entries = memtable;
	cfg.count_traversals = 1;
	cfg.cache_entries = 0;
	cfg.second_chance_entries = 0;
	cfg.compaction = 1;
	struct numa_run r = { .o = o, .keys = keys, .gets = gets };
	if (open_fresh(o, &cfg, &r.db))
		return EXIT_FAIL;
	double put_s = numa_phase(&r, numa_writer);
	uint64_t put_errors = atomic_load(&r.errors);
	double t0 = now_s();
	int flush_rc = tips_listdb_flush(r.db, 1);
	double merge_s = now_s() - t0;
	struct tips_listdb_stats sp;
	tips_listdb_stats(r.db, &sp);
	atomic_store(&r.errors, 0);
	double get_s = numa_phase(&r, numa_reader);
	uint64_t get_errors = atomic_load(&r.errors);
	struct tips_listdb_stats sg;
	tips_listdb_stats(r.db, &sg);
	struct tips_listdb_report rep = { 0 };
	int check_rc = tips_listdb_check(r.db, &rep);
	tips_listdb_close(&r.db);
	tips_listdb_destroy(o->pool);

	uint64_t gt = sg.traversals - sp.traversals;
	uint64_t gc = sg.cross_domain_traversals - sp.cross_domain_traversals;
	res->share_get = share(gc, gt);
	res->share_put = share(sp.compaction_cross, sp.compaction_traversals);
	res->get_mops = (double)gets / get_s / 1e6;
	res->put_mops = (double)keys / put_s / 1e6;
	bool ok = !put_errors && !get_errors && !flush_rc && !check_rc &&
		  !atomic_load(&r.domain_err) && gt > 0 && rep.l1_elements == keys;
	j_open();
	j_str("mode", "numa");
	j_str("layout", braided ? "braided" : "oblivious");
	j_u64("domains", o->domains);
	j_u64("threads", o->threads);
	j_u64("keys", keys);
	j_u64("gets", gets);
	j_u64("memtable_entries", memtable);
	j_u64("seed", o->seed);
	j_u64("pool_size_per_domain", pool_size);
	j_str("note", "cache_entries=0 second_chance_entries=0: every get walks the PMTables");
	j_num("put_s", put_s);
	j_num("put_mops", res->put_mops);
	j_num("merge_s", merge_s);
	j_u64("memtables_flushed", sp.memtables_flushed);
	j_u64("compactions", sp.compactions);
	j_u64("entries_merged", sp.entries_merged);
	j_num("write_stall_s", (double)sp.write_stall_ns / 1e9);
	j_u64("compaction_traversals", sp.compaction_traversals);
	j_u64("compaction_cross", sp.compaction_cross);
	j_num("compaction_cross_share", res->share_put);
	j_num("get_s", get_s);
	j_num("get_mops", res->get_mops);
	j_u64("traversals", gt);
	j_u64("cross_domain_traversals", gc);
	j_num("cross_share", res->share_get);
	j_num("traversals_per_get", (double)gt / (double)(gets ? gets : 1));
	j_num("oblivious_expected_share", (double)(o->domains - 1) / o->domains);
	j_u64("l1_elements", rep.l1_elements);
	j_u64("put_errors", put_errors);
	j_u64("get_errors", get_errors);
	j_num("check_rc", check_rc);
	j_bool("ok", ok);
	j_close();
	fprintf(stderr, "numa %s, %u domains: gets %.3f Mops/s, %.1f elements/get, %.1f%% "
		"cross-domain; Zipper placing %.1f%% cross-domain; puts %.3f Mops/s%s\n",
		braided ? "braided" : "oblivious", o->domains, res->get_mops,
		(double)gt / (double)(gets ? gets : 1), 100 * res->share_get,
		100 * res->share_put, res->put_mops, ok ? "" : "  FAILED");
	if (!ok)
		fprintf(stderr, "numa: put errors %" PRIu64 ", get errors %" PRIu64 ", flush %d, "
			"check %d (%s), l1 elements %" PRIu64 " of %" PRIu64 "\n", put_errors,
			get_errors, flush_rc, check_rc, check_rc ? tips_errormsg() : "ok",
			rep.l1_elements, keys);
	return ok ? EXIT_OK : EXIT_FAIL;
}

/* ---- gets ---------------------------------------------------------------------------------- */

static int run_gets(const struct options *o)
{
	uint64_t keys = o->keys ? o->keys : 2000000;
	uint64_t gets = o->gets ? o->gets : keys;
	uint64_t pool_size = o->pool_size ? o->pool_size
					  : round_pool(keys * POOL_BYTES_PER_ENTRY + POOL_SLACK);
	if (check_space(o->pool, pool_size, POOL_BYTES_PER_ENTRY))
		return EXIT_FAIL;
	struct tips_listdb_config cfg;
	tips_listdb_config_init(&cfg);
	cfg.flags = TIPS_LISTDB_CREATE;
	cfg.pool_size = pool_size;
	cfg.expected_keys = keys;
	cfg.count_traversals = 1;
	/* --memtable larger than --keys: nothing is flushed, every get is answered by the
	 * mutable MemTable, a DRAM skiplist: the reference a get from L1 is held to. */
	bool dram = o->memtable > keys;
	if (o->memtable)
		cfg.memtable_entries = o->memtable;
	struct options one = *o;
	one.domains = 1; /* numa_writer/numa_reader: every thread in domain 0 */
	struct numa_run r = { .o = &one, .keys = keys, .gets = gets };
	if (open_fresh(o, &cfg, &r.db))
		return EXIT_FAIL;
	double put_s = numa_phase(&r, numa_writer);
	uint64_t put_errors = atomic_load(&r.errors);
	int flush_rc = dram ? 0 : tips_listdb_flush(r.db, 1);
	struct tips_listdb_stats sp, sg;
	tips_listdb_stats(r.db, &sp);
	atomic_store(&r.errors, 0);
	double get_s = numa_phase(&r, numa_reader);
	uint64_t get_errors = atomic_load(&r.errors);
	tips_listdb_stats(r.db, &sg);
	tips_listdb_close(&r.db);
	tips_listdb_destroy(o->pool);
	double g = (double)(gets ? gets : 1);
	double cpu = (double)atomic_load(&r.reader_cpu_ns) / g;
	double visits = (double)(sg.traversals - sp.traversals) / g;
	uint64_t lookups = sg.cache_lookups - sp.cache_lookups;
	double hit = lookups ? (double)(sg.cache_hits - sp.cache_hits) / (double)lookups : 0;
	double sc = (double)(sg.second_chance_hits - sp.second_chance_hits) / g;
	bool ok = !put_errors && !get_errors && !flush_rc;
	j_open();
	j_str("mode", "gets");
	j_str("answered_by", dram ? "MemTable (DRAM skiplist)" : "L1 and the caches");
	j_u64("threads", o->threads);
	j_u64("keys", keys);
	j_u64("gets", gets);
	j_u64("seed", o->seed);
	j_num("put_s", put_s);
	j_num("get_s", get_s);
	j_num("get_mops", g / get_s / 1e6);
	j_num("cpu_ns_per_get", cpu);
	j_num("visits_per_get", visits);
	j_num("cache_hit_ratio", hit);
	j_num("second_chance_start_share", sc);
	j_u64("put_errors", put_errors);
	j_u64("get_errors", get_errors);
	j_bool("ok", ok);
	j_close();
	fprintf(stderr, "gets: %" PRIu64 " gets by %u threads after %" PRIu64 " keys %s: %.3f "
		"Mops/s, CPU %.0f ns per get, %.1f elements visited per get, hash cache hits "
		"%.1f%%, second-chance start %.1f%%%s\n", gets, o->threads, keys,
		dram ? "kept in one MemTable" : "merged into L1", g / get_s / 1e6, cpu, visits,
		100 * hit, 100 * sc, ok ? "" : "  FAILED");
	return ok ? EXIT_OK : EXIT_FAIL;
}

/* ---- recovery -------------------------------------------------------------------------------- */

/* Shared between the parent and its children (an anonymous shared mapping). */
struct rec_shared {
	_Atomic uint64_t acked;         /* writer: puts acknowledged (keys 0..acked-1) */
	_Atomic uint64_t imm_now, l0_now; /* writer: last sampled before the crash */
	_Atomic int writer_state;       /* 1 capped (pool budget reached), 2 put failed */
	double close_ms;                /* writer, clean case */
	/* verifier */
	double open_ms, recovery_ms, verify_s, check_s;
	uint64_t recovered_entries, l0_now_after_open, imm_after_open, l1_elements;
	uint64_t missing, wrong, extra;
	int recovered, open_rc, flush_rc, check_rc;
	char msg[256];
};

static void rec_config(const struct options *o, struct tips_listdb_config *cfg, uint64_t pool_size)
{
	tips_listdb_config_init(cfg);
	cfg->pool_size = pool_size;
	cfg->expected_keys = pool_size / POOL_BYTES_PER_ENTRY;
	if (o->memtable)
		cfg->memtable_entries = o->memtable;
	if (o->max_l0)
		cfg->max_l0 = o->max_l0;
	cfg->compaction = o->compaction;
}

/* The writer child: create, signal @ready_fd, put keys 0.. at @rate (0: as fast as it
 * can) until killed, or for @clean_s seconds and close (clean_s > 0). */
static void rec_writer(const struct options *o, struct rec_shared *sh, uint64_t pool_size,
		       uint64_t cap, double rate, int ready_fd, double clean_s)
{
	struct tips_listdb_config cfg;
	rec_config(o, &cfg, pool_size);
	cfg.flags = TIPS_LISTDB_CREATE;
	struct tips_listdb *db;
	int rc = tips_listdb_open(o->pool, &cfg, &db);
	if (rc) {
		fprintf(stderr, "writer: tips_listdb_open %s: %s (%s)\n", o->pool, tips_strerror(rc),
			tips_errormsg());
		_exit(3);
	}
	char c = 1;
	if (write(ready_fd, &c, 1) != 1)
		_exit(4);
	close(ready_fd);
	double t0 = now_s();
	struct timespec due;
	unsigned char k[8];
	for (uint64_t i = 0;; i++) {
		if (i == cap) {
			atomic_store(&sh->writer_state, 1);
			break;
		}
		if (rate > 0) {
			double d = t0 + (double)i / rate;
			if (now_s() < d) {
				due.tv_sec = (time_t)d;
				due.tv_nsec = (long)((d - (double)due.tv_sec) * 1e9);
				while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &due, NULL) ==
				       EINTR)
					;
			}
		}
		if (clean_s > 0 && (i & 1023) == 0 && now_s() - t0 >= clean_s)
			break;
		make_key(i, k);
		if (tips_listdb_put(db, k, 8, &i, 8)) {
			atomic_store(&sh->writer_state, 2);
			break;
		}
		atomic_store_explicit(&sh->acked, i + 1, memory_order_release);
		if ((i & 16383) == 16383) {
			struct tips_listdb_stats st;
			tips_listdb_stats(db, &st);
			atomic_store(&sh->imm_now, st.immutable_now);
			atomic_store(&sh->l0_now, st.l0_now);
		}
	}
	if (clean_s > 0) {
		struct tips_listdb_stats st;
		tips_listdb_stats(db, &st);
		atomic_store(&sh->imm_now, st.immutable_now);
		atomic_store(&sh->l0_now, st.l0_now);
		double tc = now_s();
		rc = tips_listdb_close(&db);
		sh->close_ms = (now_s() - tc) * 1e3;
		_exit(rc ? 5 : 0);
	}
	for (;;)
		pause(); /* capped or failed: wait for the kill */
}

/* The verifier child: open (timed), get every acknowledged key, flush, check. */
static void rec_verifier(const struct options *o, struct rec_shared *sh, uint64_t pool_size)
{
	struct tips_listdb_config cfg;
	rec_config(o, &cfg, pool_size);
	struct tips_listdb *db;
	double t0 = now_s();
	int rc = tips_listdb_open(o->pool, &cfg, &db);
	sh->open_ms = (now_s() - t0) * 1e3;
	sh->open_rc = rc;
	if (rc) {
		snprintf(sh->msg, sizeof(sh->msg), "tips_listdb_open: %s (%s)", tips_strerror(rc),
			 tips_errormsg());
		_exit(3);
	}
	struct tips_listdb_stats st;
	tips_listdb_stats(db, &st);
	sh->recovery_ms = st.recovery_ms;
	sh->recovered_entries = st.recovered_entries;
	sh->recovered = st.recovered;
	sh->l0_now_after_open = st.l0_now;
	sh->imm_after_open = st.immutable_now;
	uint64_t acked = atomic_load(&sh->acked);
	unsigned char k[8];
	uint64_t v;
	size_t vlen;
	t0 = now_s();
	for (uint64_t i = 0; i < acked; i++) {
		make_key(i, k);
		rc = tips_listdb_get(db, k, 8, &v, sizeof(v), &vlen);
		if (rc == TIPS_ENOTFOUND) {
			if (sh->missing++ == 0)
				snprintf(sh->msg, sizeof(sh->msg), "acknowledged key %" PRIu64
					 " (of %" PRIu64 ") is missing", i, acked);
		} else if (rc || vlen != 8 || v != i) {
			if (sh->wrong++ == 0)
				snprintf(sh->msg, sizeof(sh->msg), "key %" PRIu64 ": rc %d, value "
					 "%" PRIu64 " (%zu bytes)", i, rc, v, vlen);
		}
	}
	/* The put in flight at the kill may or may not be there; nothing after it. */
	for (uint64_t i = acked; i < acked + 4; i++) {
		make_key(i, k);
		if (tips_listdb_get(db, k, 8, &v, sizeof(v), &vlen) == 0)
			sh->extra++;
	}
	sh->verify_s = now_s() - t0;
	t0 = now_s();
	sh->flush_rc = tips_listdb_flush(db, o->compaction);
	if (o->check) {
		struct tips_listdb_report rep = { 0 };
		sh->check_rc = tips_listdb_check(db, &rep);
		sh->l1_elements = rep.l1_elements;
		if (sh->check_rc && !sh->msg[0])
			snprintf(sh->msg, sizeof(sh->msg), "tips_listdb_check: %s", tips_errormsg());
	}
	sh->check_s = now_s() - t0;
	tips_listdb_close(&db);
	_exit(0);
}

static int wait_child(pid_t pid, const char *what)
{
	int status;
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -1;
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	if (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL && !strcmp(what, "killed"))
		return 0;
	if (WIFSIGNALED(status))
		fprintf(stderr, "recovery: the %s child died of signal %d\n", what,
			WTERMSIG(status));
	else
		fprintf(stderr, "recovery: the %s child exited with %d\n", what,
			WEXITSTATUS(status));
	return -1;
}

/* One recovery run: rate 0 = unlimited; clean: close instead of the kill. */
static int run_recovery_one(const struct options *o, struct rec_shared *sh, double rate,
			    bool clean, uint64_t pool_size)
{
	uint64_t cap = (pool_size > 2 * POOL_SLACK ? pool_size - POOL_SLACK : pool_size / 2) /
		       POOL_BYTES_PER_ENTRY;
	memset(sh, 0, sizeof(*sh));
	tips_listdb_destroy(o->pool);
	int fds[2];
	if (pipe(fds)) {
		perror("pipe");
		return EXIT_FAIL;
	}
	fflush(NULL);
	pid_t w = fork();
	if (w < 0) {
		perror("fork");
		return EXIT_FAIL;
	}
	if (w == 0) {
		close(fds[0]);
		rec_writer(o, sh, pool_size, cap, rate, fds[1], clean ? o->seconds : 0);
	}
	close(fds[1]);
	char c;
	ssize_t got;
	while ((got = read(fds[0], &c, 1)) < 0 && errno == EINTR)
		;
	close(fds[0]);
	if (got != 1) {
		wait_child(w, "writer");
		tips_listdb_destroy(o->pool);
		return EXIT_FAIL;
	}
	double t0 = now_s();
	if (clean) {
		if (wait_child(w, "writer")) {
			tips_listdb_destroy(o->pool);
			return EXIT_FAIL;
		}
	} else {
		struct timespec d = { (time_t)o->seconds,
				      (long)((o->seconds - (double)(time_t)o->seconds) * 1e9) };
		while (nanosleep(&d, &d) < 0 && errno == EINTR)
			;
		kill(w, SIGKILL);
		if (wait_child(w, "killed")) {
			tips_listdb_destroy(o->pool);
			return EXIT_FAIL;
		}
	}
	double ran_s = now_s() - t0;
	uint64_t acked = atomic_load(&sh->acked);
	fflush(NULL);
	pid_t v = fork();
	if (v < 0) {
		perror("fork");
		tips_listdb_destroy(o->pool);
		return EXIT_FAIL;
	}
	if (v == 0)
		rec_verifier(o, sh, pool_size);
	int vrc = wait_child(v, "verifier");
	tips_listdb_destroy(o->pool);
	bool ok = !vrc && !sh->open_rc && !sh->missing && !sh->wrong && !sh->flush_rc &&
		  !sh->check_rc && sh->extra <= 1 && sh->writer_state != 2 &&
		  sh->recovered == !clean;
	char rate_s[32];
	if (rate > 0)
		snprintf(rate_s, sizeof(rate_s), "%.0f", rate);
	else
		snprintf(rate_s, sizeof(rate_s), "unlimited");
	j_open();
	j_str("mode", "recovery");
	j_str("shutdown", clean ? "clean" : "sigkill");
	j_str("rate_target", rate_s);
	j_num("seconds", ran_s);
	j_u64("memtable_entries", o->memtable ? o->memtable : 256u << 10);
	j_u64("compaction", (uint64_t)o->compaction);
	j_u64("pool_size", pool_size);
	j_u64("acked", acked);
	j_num("rate_achieved", (double)acked / ran_s);
	j_bool("capped", sh->writer_state == 1);
	if (clean)
		j_num("close_ms", sh->close_ms);
	j_u64("immutable_before_crash", atomic_load(&sh->imm_now));
	j_u64("l0_before_crash", atomic_load(&sh->l0_now));
	j_num("open_ms", sh->open_ms);
	j_num("recovery_ms", sh->recovery_ms);
	j_u64("recovered", (uint64_t)sh->recovered);
	j_u64("recovered_entries", sh->recovered_entries);
	j_u64("l0_after_open", sh->l0_now_after_open);
	j_u64("missing", sh->missing);
	j_u64("wrong", sh->wrong);
	j_u64("in_flight_present", sh->extra);
	j_num("verify_s", sh->verify_s);
	j_num("flush_check_s", sh->check_s);
	j_num("check_rc", sh->check_rc);
	if (o->check)
		j_u64("l1_elements", sh->l1_elements);
	j_bool("ok", ok);
	j_close();
	fprintf(stderr, "recovery %s, rate %s: %" PRIu64 " acked (%.0f ops/s); open %.1f ms "
		"(recovery %.1f ms, %" PRIu64 " entries into %" PRIu64 " L0 tables); %s%s%s\n",
		clean ? "clean close" : "sigkill", rate_s, acked, (double)acked / ran_s,
		sh->open_ms, sh->recovery_ms, sh->recovered_entries, sh->l0_now_after_open,
		ok ? "every acknowledged key found" : "FAILED", sh->msg[0] ? ": " : "",
		sh->msg);
	return ok ? EXIT_OK : EXIT_FAIL;
}

static int run_recovery(const struct options *o)
{
	/* The budget: what the fastest run could write, with room; a writer stops at it. */
	uint64_t pool_size = o->pool_size ? o->pool_size : round_pool(2048ull << 20);
	if (check_space(o->pool, pool_size, POOL_BYTES_PER_ENTRY))
		return EXIT_FAIL;
	struct rec_shared *sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE,
				     MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED) {
		perror("mmap");
		return EXIT_FAIL;
	}
	int rc = EXIT_OK;
	for (unsigned i = 0; i < o->nrates; i++)
		if (run_recovery_one(o, sh, o->rates[i], false, pool_size))
			rc = EXIT_FAIL;
	if (run_recovery_one(o, sh, 0, true, pool_size))
		rc = EXIT_FAIL;
	munmap(sh, sizeof(*sh));
	return rc;
}

int main(int argc, char **argv)
{
	struct options o;
	if (parse_options(argc, argv, &o)) {
		usage(stderr);
		return EXIT_USAGE;
	}
	if (pools_exist(o.pool)) {
		fprintf(stderr, "%s (or one of its .dN files) exists: remove it or pass another "
			"--pool\n", o.pool);
		return EXIT_USAGE;
	}
	int rc = EXIT_OK;
	if (!strcmp(o.mode, "flush-timeline")) {
		if (o.both) {
			rc = run_flush_timeline(&o, TIPS_LISTDB_FLUSH_IUL);
			if (run_flush_timeline(&o, TIPS_LISTDB_FLUSH_WAL))
				rc = EXIT_FAIL;
		} else {
			rc = run_flush_timeline(&o, o.flush_mode);
		}
	} else if (!strcmp(o.mode, "numa")) {
		struct numa_result b = { 0 }, ob = { 0 };
		if (o.layout != 0)
			rc |= run_numa(&o, 1, &b);
		if (o.layout != 1)
			rc |= run_numa(&o, 0, &ob);
		if (o.layout == -1 && ob.share_get > 0)
			fprintf(stderr, "numa: cross-domain share braided/oblivious: gets %.2f, "
				"Zipper %.2f (1/D = %.2f)\n", b.share_get / ob.share_get,
				ob.share_put > 0 ? b.share_put / ob.share_put : 0.0,
				1.0 / o.domains);
	} else if (!strcmp(o.mode, "puts")) {
		rc = run_puts(&o);
	} else if (!strcmp(o.mode, "gets")) {
		rc = run_gets(&o);
	} else {
		rc = run_recovery(&o);
	}
	tips_listdb_destroy(o.pool);
	return rc;
}
