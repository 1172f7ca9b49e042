/*
 * fwbench.c - `tips-fwbench`: the TIPS framework's small measurement driver (until the
 * PiBench-style harness lands): a TIPS index against its volatile original, in the
 * same process and run.
 *
 * For each repetition and each side (dram-NAME called directly through its ops table;
 * tips-NAME through the facade on a fresh pool): load K keys with T threads (inserts),
 * then run the phases, each with T new threads doing N operations in all on uniformly
 * random loaded keys:
 *   mixed   50% lookup / 50% update (the update writes a new 8-byte value)
 *   read    100% lookup
 * Throughput is operations per second from a common start barrier to the last
 * thread's end. For tips-NAME it also reports, per phase, the fences and flushed lines
 * the application threads issued per write and per read (their own pm counters), the
 * same including the background threads (all counters), the cache hit ratio, the
 * average number of replay workers over the phase's epochs, and reclamations.
 * Sides alternate which goes first; the median of the repetitions is reported, and the
 * ratio tips/dram of the medians.
 *
 * Keys are 8-byte big-endian encodings of keygen_scatter(0..K-1); values 8 bytes.
 * Exit codes: 0 done, 2 usage error, 3 a library or system call failed.
 */
#define _GNU_SOURCE
#include "bench_index.h"
#include "keygen.h"
#include "size_arg.h"

#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <tips/plugin.h>
#include <unistd.h>

enum { EXIT_OK = 0, EXIT_USAGE = 2, EXIT_FAILED = 3 };
enum { PHASE_LOAD, PHASE_MIXED, PHASE_READ, NPHASES };
enum { SIDE_DRAM, SIDE_TIPS, NSIDES };
static const char *const phase_names[NPHASES] = { "load", "mixed", "read" };
#define MAX_REPEAT 31

struct options {
	const char *index;   /* base name: "hash" */
	uint64_t keys, ops;
	unsigned threads, repeat;
	uint64_t pool_size;  /* 0: from the key count */
	const char *dir;
	const char *json;
	bool crash_recovery; /* --crash-recovery: measure recovery of a full OLog */
};

struct sample {
	double mops;                 /* million operations per second */
	double fences_w, lines_w;    /* per write, application threads */
	double fences_r, lines_r;    /* per read, application threads */
	double fences_all;           /* per write, all threads (background included) */
	double hit_ratio, workers_avg;
	uint64_t reclamations;
	double close_ms, reopen_ms;  /* tips side, after the phases (in the load sample) */
};

struct run {
	const struct options *o;
	int side;
	const struct tips_index_ops *ops;
	void *index;                 /* dram side */
	struct tips_db *db;          /* tips side */
	int phase;
	pthread_barrier_t barrier;
	_Atomic int failed;
	/* Per-phase totals from the threads. */
	struct tips_pm_counters app;
	uint64_t writes, reads;
	pthread_mutex_t mu;
	struct timespec start, end;
};

static void key_bytes(uint64_t i, unsigned char out[8])
{
	uint64_t k = keygen_scatter(i);
	for (int b = 7; b >= 0; b--, k >>= 8)
		out[b] = (unsigned char)k;
}

static double secs(const struct timespec *a, const struct timespec *b)
{
	return (double)(b->tv_sec - a->tv_sec) + (double)(b->tv_nsec - a->tv_nsec) * 1e-9;
}

static int do_insert(struct run *r, const unsigned char *k, uint64_t v)
{
	return r->side == SIDE_TIPS ? tips_insert(r->db, k, 8, &v, 8)
				    : r->ops->insert(r->index, k, 8, &v, 8);
}

static int do_update(struct run *r, const unsigned char *k, uint64_t v)
{
	return r->side == SIDE_TIPS ? tips_update(r->db, k, 8, &v, 8)
				    : r->ops->update(r->index, k, 8, &v, 8);
}

static int do_lookup(struct run *r, const unsigned char *k, uint64_t *v)
{
	size_t vlen;
	return r->side == SIDE_TIPS ? tips_get(r->db, k, 8, v, 8, &vlen)
				    : r->ops->lookup(r->index, k, 8, v, 8, &vlen);
}

struct thread_arg {
	struct run *r;
	unsigned id;
};

static void *bench_thread(void *p)
{
	struct thread_arg *a = p;
	struct run *r = a->r;
	const struct options *o = r->o;
	struct rng rng;
	rng_seed(&rng, 1, (uint64_t)r->phase << 32 | a->id);
	uint64_t n = r->phase == PHASE_LOAD ? o->keys : o->ops;
	uint64_t lo = n * a->id / o->threads, hi = n * (a->id + 1) / o->threads;
	uint64_t writes = 0, reads = 0;
	struct tips_pm_counters c0, c1;
	unsigned char k[8];
	pthread_barrier_wait(&r->barrier);
	tips_pm_counters_thread(&c0);
	for (uint64_t i = lo; i < hi; i++) {
		int rc;
		if (r->phase == PHASE_LOAD) {
			key_bytes(i, k);
			rc = do_insert(r, k, i);
			writes++;
		} else {
			uint64_t draw = rng_next(&rng);
			key_bytes(draw % o->keys, k);
			if (r->phase == PHASE_MIXED && (draw >> 63)) {
				rc = do_update(r, k, i);
				writes++;
			} else {
				uint64_t v;
				rc = do_lookup(r, k, &v);
				reads++;
			}
		}
		if (rc) {
			fprintf(stderr, "tips-fwbench: %s: %s (%s)\n", phase_names[r->phase],
				tips_strerror(rc), tips_errormsg());
			atomic_store(&r->failed, 1);
			break;
		}
	}
	tips_pm_counters_thread(&c1);
	struct timespec end;
	clock_gettime(CLOCK_MONOTONIC, &end);
	pthread_mutex_lock(&r->mu);
	if (secs(&r->end, &end) > 0)
		r->end = end;
	r->app.fences += c1.fences - c0.fences;
	r->app.lines_flushed += c1.lines_flushed - c0.lines_flushed;
	r->writes += writes;
	r->reads += reads;
	pthread_mutex_unlock(&r->mu);
	return NULL;
}

/* Runs one phase; returns 0 or -1. */
static int run_phase(struct run *r, int phase, struct sample *s)
{
	const struct options *o = r->o;
	pthread_t t[256];
	struct thread_arg args[256];
	r->phase = phase;
	memset(&r->app, 0, sizeof(r->app));
	r->writes = r->reads = 0;
	r->end = (struct timespec){ 0, 0 };
	struct tips_stats st0, st1;
	struct tips_pm_counters all0, all1;
	if (r->db)
		tips_stats(r->db, &st0);
	tips_pm_counters_total(&all0);
	pthread_barrier_init(&r->barrier, NULL, o->threads + 1);
	for (unsigned i = 0; i < o->threads; i++) {
		args[i] = (struct thread_arg){ r, i };
		if (pthread_create(&t[i], NULL, bench_thread, &args[i]))
			return -1;
	}
	/* The clock starts before the barrier opens: no operation can precede it, even if
	 * the thread that reads it is descheduled while the others run. */
	clock_gettime(CLOCK_MONOTONIC, &r->start);
	pthread_barrier_wait(&r->barrier);
	for (unsigned i = 0; i < o->threads; i++)
		pthread_join(t[i], NULL);
	pthread_barrier_destroy(&r->barrier);
	tips_pm_counters_total(&all1);
	memset(s, 0, sizeof(*s));
	double dt = secs(&r->start, &r->end);
	s->mops = (double)(r->writes + r->reads) / dt / 1e6;
	if (r->db) {
		tips_stats(r->db, &st1);
		/* Reads issue none of their own; charge the application's fences to writes
		 * and show reads separately from the read-only phase. */
		if (r->writes) {
			s->fences_w = (double)r->app.fences / (double)r->writes;
			s->lines_w = (double)r->app.lines_flushed / (double)r->writes;
			s->fences_all = (double)(all1.fences - all0.fences) / (double)r->writes;
		} else if (r->reads) {
			s->fences_r = (double)r->app.fences / (double)r->reads;
			s->lines_r = (double)r->app.lines_flushed / (double)r->reads;
		}
		uint64_t hits = st1.cache_hits - st0.cache_hits;
		uint64_t lookups = hits + st1.cache_misses - st0.cache_misses;
		s->hit_ratio = lookups ? (double)hits / (double)lookups : 0;
		uint64_t epochs = st1.epochs - st0.epochs;
		s->workers_avg = epochs ? (st1.workers_avg * (double)st1.epochs -
					   st0.workers_avg * (double)st0.epochs) / (double)epochs
					: 0;
		s->reclamations = st1.reclamations - st0.reclamations;
	}
	return atomic_load(&r->failed) ? -1 : 0;
}

static uint64_t pool_size_for(const struct options *o)
{
	return o->pool_size ? o->pool_size : bench_pool_size(o->keys);
}

static int run_side(const struct options *o, int side, struct sample out[NPHASES])
{
	char name[64], path[512];
	snprintf(name, sizeof(name), "%s-%s", side == SIDE_TIPS ? "tips" : "dram", o->index);
	struct run r = { .o = o, .side = side, .ops = tips_index_find(name) };
	pthread_mutex_init(&r.mu, NULL);
	if (!r.ops) {
		fprintf(stderr, "tips-fwbench: no index named %s\n", name);
		return -1;
	}
	if (side == SIDE_TIPS) {
		snprintf(path, sizeof(path), "%s/tips-fwbench-%d.pool", o->dir, (int)getpid());
		unlink(path);
		struct tips_config cfg;
		tips_config_init(&cfg);
		cfg.flags = TIPS_CREATE;
		cfg.expected_keys = o->keys;
		cfg.pool_size = pool_size_for(o);
		if (tips_open(path, &cfg, r.ops, &r.db)) {
			fprintf(stderr, "tips-fwbench: tips_open %s: %s\n", path, tips_errormsg());
			return -1;
		}
	} else {
		struct tips_index_config icfg = { o->keys };
		void *root;
		if (r.ops->create(&icfg, &root) || r.ops->open(root, &r.index))
			return -1;
	}
	int rc = 0;
	for (int p = 0; p < NPHASES && rc == 0; p++)
		rc = run_phase(&r, p, &out[p]);
	if (r.db) {
		/* Clean close, then reopen: a clean pool replays nothing. */
		struct timespec t0, t1, t2;
		struct tips_config cfg;
		tips_config_init(&cfg);
		clock_gettime(CLOCK_MONOTONIC, &t0);
		tips_close(&r.db);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		if (rc == 0 && tips_open(path, &cfg, r.ops, &r.db) == 0) {
			clock_gettime(CLOCK_MONOTONIC, &t2);
			out[PHASE_LOAD].close_ms = secs(&t0, &t1) * 1e3;
			out[PHASE_LOAD].reopen_ms = secs(&t1, &t2) * 1e3;
			unsigned char k[8];
			uint64_t v;
			size_t vlen;
			key_bytes(o->keys - 1, k);
			if (tips_get(r.db, k, 8, &v, 8, &vlen)) {
				fprintf(stderr, "tips-fwbench: after reopen the last key is missing\n");
				rc = -1;
			}
			tips_close(&r.db);
		} else if (rc == 0) {
			fprintf(stderr, "tips-fwbench: reopen: %s\n", tips_errormsg());
			rc = -1;
		}
		unlink(path);
	} else if (r.index) {
		/* The volatile original: its memory goes with the process; release the
		 * handle (the nodes are reclaimed by exit, as a volatile index would be). */
		r.ops->close(r.index);
	}
	return rc;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double median_of(struct sample *s, size_t n, size_t offset)
{
	double v[MAX_REPEAT];
	for (size_t i = 0; i < n; i++)
		v[i] = *(const double *)((const char *)&s[i] + offset);
	qsort(v, n, sizeof(double), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* ---- --crash-recovery --------------------------------------------------------------- */

struct filler {
	struct tips_db *db;
	const struct options *o;
	unsigned id;
};

static void *fill_thread(void *p)
{
	struct filler *f = p;
	struct rng rng;
	rng_seed(&rng, 11, f->id);
	unsigned char k[8];
	for (;;) { /* until the parent kills the process */
		uint64_t draw = rng_next(&rng);
		key_bytes(draw % f->o->keys, k);
		if (tips_put(f->db, k, 8, &draw, 8))
			_exit(3);
	}
	return NULL;
}

/* Child: writes until a writer finds its OLog full, then tells the parent (which kills
 * it with SIGKILL at once) and waits. */
static void crash_child(const struct options *o, const char *path, int fd)
{
	const struct tips_index_ops *ops;
	char name[64];
	snprintf(name, sizeof(name), "tips-%s", o->index);
	ops = tips_index_find(name);
	struct tips_config cfg;
	tips_config_init(&cfg);
	cfg.flags = TIPS_CREATE;
	cfg.expected_keys = o->keys;
	cfg.cache_percent = 100; /* only the OLog limits how far writers run ahead */
	cfg.pool_size = pool_size_for(o);
	struct tips_db *db;
	if (!ops || tips_open(path, &cfg, ops, &db))
		_exit(3);
	struct filler f[256];
	pthread_t t[256];
	for (unsigned i = 0; i < o->threads; i++) {
		f[i] = (struct filler){ db, o, i };
		pthread_create(&t[i], NULL, fill_thread, &f[i]);
	}
	struct tips_stats st;
	do { /* a benchmark harness may poll: 1 ms steps */
		struct timespec ms = { 0, 1000000 };
		nanosleep(&ms, NULL);
		tips_stats(db, &st);
	} while (st.writer_waits == 0);
	char c = 1;
	if (write(fd, &c, 1) != 1)
		_exit(3);
	pause();
	_exit(0);
}

static int crash_recovery(const struct options *o)
{
	double ms[MAX_REPEAT], recs[MAX_REPEAT], wall[MAX_REPEAT];
	printf("tips-fwbench --crash-recovery: tips-%s, %llu keys, %u writer threads, kill -9 "
	       "when a writer finds its OLog full, then timed reopen; %u repetitions\n",
	       o->index, (unsigned long long)o->keys, o->threads, o->repeat);
	for (unsigned rep = 0; rep < o->repeat; rep++) {
		char path[512];
		snprintf(path, sizeof(path), "%s/tips-fwbench-crash-%d.pool", o->dir, (int)getpid());
		unlink(path);
		int fds[2];
		if (pipe(fds))
			return -1;
		pid_t pid = fork();
		if (pid == 0) {
			close(fds[0]);
			crash_child(o, path, fds[1]);
		}
		close(fds[1]);
		char c;
		ssize_t n = read(fds[0], &c, 1);
		kill(pid, SIGKILL);
		int status;
		waitpid(pid, &status, 0);
		close(fds[0]);
		if (n != 1) {
			fprintf(stderr, "tips-fwbench: the writer child failed\n");
			return -1;
		}
		char name[64];
		snprintf(name, sizeof(name), "tips-%s", o->index);
		struct tips_config cfg;
		tips_config_init(&cfg);
		struct tips_db *db;
		struct timespec a, b;
		clock_gettime(CLOCK_MONOTONIC, &a);
		if (tips_open(path, &cfg, tips_index_find(name), &db)) {
			fprintf(stderr, "tips-fwbench: recovery: %s\n", tips_errormsg());
			return -1;
		}
		clock_gettime(CLOCK_MONOTONIC, &b);
		struct tips_stats st;
		tips_stats(db, &st);
		ms[rep] = st.recovery_ms;
		recs[rep] = (double)st.replayed;
		wall[rep] = secs(&a, &b) * 1e3;
		printf("  run %u: recovery %.1f ms (tips_open %.1f ms), %llu OLog records replayed\n",
		       rep, ms[rep], wall[rep], (unsigned long long)st.replayed);
		tips_close(&db);
		unlink(path);
	}
	qsort(ms, o->repeat, sizeof(double), cmp_double);
	qsort(recs, o->repeat, sizeof(double), cmp_double);
	qsort(wall, o->repeat, sizeof(double), cmp_double);
	printf("median: recovery %.1f ms, tips_open %.1f ms, %.0f records replayed\n",
	       ms[o->repeat / 2], wall[o->repeat / 2], recs[o->repeat / 2]);
	return 0;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: tips-fwbench [--index hash] [--keys K] [--ops N] [--threads T]\n"
		   "                    [--repeat R] [--pool-size SIZE] [--dir DIR] [--json FILE]\n"
		   "                    [--crash-recovery]\n"
		   "  defaults: --index hash --keys 4M --ops 4M --threads 2 --repeat 3 --dir /dev/shm\n"
		   "  --crash-recovery: writers run until one finds its OLog full, the process is\n"
		   "  killed (SIGKILL), and the recovering tips_open is timed\n"
		   SIZE_ARG_RULE);
}

int main(int argc, char **argv)
{
	struct options o = { "hash", 4000000, 4000000, 2, 3, 0, "/dev/shm", NULL, false };
	static const struct option longopts[] = {
		{ "index", required_argument, NULL, 'i' }, { "keys", required_argument, NULL, 'k' },
		{ "ops", required_argument, NULL, 'n' },   { "threads", required_argument, NULL, 't' },
		{ "repeat", required_argument, NULL, 'r' }, { "pool-size", required_argument, NULL, 'p' },
		{ "dir", required_argument, NULL, 'd' },   { "json", required_argument, NULL, 'j' },
		{ "crash-recovery", no_argument, NULL, 'c' },
		{ "help", no_argument, NULL, 'h' },        { NULL, 0, NULL, 0 },
	};
	int c;
	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		uint64_t v = 0;
		switch (c) {
		case 'i': o.index = optarg; break;
		case 'k': if (size_arg_count(optarg, &v) || !v) goto bad; o.keys = v; break;
		case 'n': if (size_arg_count(optarg, &v) || !v) goto bad; o.ops = v; break;
		case 't': o.threads = (unsigned)atoi(optarg); if (o.threads < 1 || o.threads > 256) goto bad; break;
		case 'r': o.repeat = (unsigned)atoi(optarg); if (o.repeat < 1 || o.repeat > MAX_REPEAT) goto bad; break;
		case 'p': if (size_arg_bytes(optarg, &v)) goto bad; o.pool_size = v; break;
		case 'd': o.dir = optarg; break;
		case 'j': o.json = optarg; break;
		case 'c': o.crash_recovery = true; break;
		case 'h': usage(stdout); return EXIT_OK;
		default: goto bad;
		}
	}
	if (optind != argc)
		goto bad;
	if (o.crash_recovery)
		return crash_recovery(&o) ? EXIT_FAILED : EXIT_OK;
	static struct sample samples[NSIDES][MAX_REPEAT][NPHASES];
	printf("tips-fwbench: %s, %llu keys, %llu ops a phase, %u threads, %u repetitions, "
	       "pools in %s, flush %s\n", o.index, (unsigned long long)o.keys,
	       (unsigned long long)o.ops, o.threads, o.repeat, o.dir, tips_flush_instruction());
	for (unsigned rep = 0; rep < o.repeat; rep++)
		for (int i = 0; i < NSIDES; i++) {
			int side = rep % 2 ? NSIDES - 1 - i : i; /* alternate who goes first */
			if (run_side(&o, side, samples[side][rep]))
				return EXIT_FAILED;
		}
	FILE *json = o.json ? fopen(o.json, "w") : NULL;
	if (o.json && !json) {
		perror(o.json);
		return EXIT_FAILED;
	}
	if (json)
		fprintf(json, "{\"index\":\"%s\",\"keys\":%llu,\"ops\":%llu,\"threads\":%u,"
			"\"repeat\":%u,\"phases\":{", o.index, (unsigned long long)o.keys,
			(unsigned long long)o.ops, o.threads, o.repeat);
	printf("%-6s %11s %11s %7s | %8s %8s %8s %8s %9s %6s %7s %6s\n", "phase", "dram Mops/s",
	       "tips Mops/s", "ratio", "fence/w", "line/w", "fence/r", "line/r", "fenceAll/w",
	       "hit", "workers", "recl");
	for (int p = 0; p < NPHASES; p++) {
		struct sample d[MAX_REPEAT], t[MAX_REPEAT];
		for (unsigned i = 0; i < o.repeat; i++) {
			d[i] = samples[SIDE_DRAM][i][p];
			t[i] = samples[SIDE_TIPS][i][p];
		}
#define MED(arr, f) median_of(arr, o.repeat, offsetof(struct sample, f))
		double dm = MED(d, mops), tm = MED(t, mops);
		double recl = 0;
		for (unsigned i = 0; i < o.repeat; i++)
			recl += (double)t[i].reclamations / o.repeat;
		printf("%-6s %11.3f %11.3f %7.3f | %8.3f %8.3f %8.3f %8.3f %9.3f %6.3f %7.2f %6.1f\n",
		       phase_names[p], dm, tm, tm / dm, MED(t, fences_w), MED(t, lines_w),
		       MED(t, fences_r), MED(t, lines_r), MED(t, fences_all), MED(t, hit_ratio),
		       MED(t, workers_avg), recl);
		if (json) {
			fprintf(json, "%s\"%s\":{\"dram_mops\":[", p ? "," : "", phase_names[p]);
			for (unsigned i = 0; i < o.repeat; i++)
				fprintf(json, "%s%.4f", i ? "," : "", d[i].mops);
			fprintf(json, "],\"tips_mops\":[");
			for (unsigned i = 0; i < o.repeat; i++)
				fprintf(json, "%s%.4f", i ? "," : "", t[i].mops);
			fprintf(json, "],\"median_dram_mops\":%.4f,\"median_tips_mops\":%.4f,"
				"\"ratio\":%.4f,\"fences_per_write\":%.4f,\"lines_per_write\":%.4f,"
				"\"fences_per_read\":%.4f,\"lines_per_read\":%.4f,"
				"\"fences_per_write_all_threads\":%.4f,\"cache_hit_ratio\":%.4f,"
				"\"workers_avg\":%.3f,\"reclamations_avg\":%.1f}", dm, tm, tm / dm,
				MED(t, fences_w), MED(t, lines_w), MED(t, fences_r), MED(t, lines_r),
				MED(t, fences_all), MED(t, hit_ratio), MED(t, workers_avg), recl);
		}
	}
	double cl[MAX_REPEAT], ro[MAX_REPEAT];
	for (unsigned i = 0; i < o.repeat; i++) {
		cl[i] = samples[SIDE_TIPS][i][PHASE_LOAD].close_ms;
		ro[i] = samples[SIDE_TIPS][i][PHASE_LOAD].reopen_ms;
	}
	qsort(cl, o.repeat, sizeof(double), cmp_double);
	qsort(ro, o.repeat, sizeof(double), cmp_double);
	printf("tips-%s clean close %.1f ms, reopen %.1f ms (medians; %llu keys)\n", o.index,
	       cl[o.repeat / 2], ro[o.repeat / 2], (unsigned long long)o.keys);
	if (json) {
		fprintf(json, "},\"close_ms\":%.2f,\"reopen_ms\":%.2f}\n", cl[o.repeat / 2],
			ro[o.repeat / 2]);
		fclose(json);
	}
	return EXIT_OK;
bad:
	usage(stderr);
	return EXIT_USAGE;
}
