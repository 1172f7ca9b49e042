/*
 * tips_bench.c - `tips-bench`: the PiBench-style harness (PiBench, VLDB'19, §4; YCSB as in
 * TIPS, ATC'21, §7, Table 1). A load phase inserts N records with T threads; a run phase
 * executes M operations with T threads in a mix of reads, inserts, updates, removes
 * and scans, drawing keys from a distribution (bench/kit/keygen.h). Both are reported.
 *
 * Key bookkeeping (exact with any number of threads):
 *  - record ids 0..N-1 are loaded; a key is keygen_scatter(id), big-endian, after an
 *    optional prefix for longer keys;
 *  - an insert takes a new id from a shared counter starting at N, so it never
 *    duplicates; while it runs, the thread publishes a lower bound of that id
 *    (inflight[t]), so the ids below min(next id, every inflight) are all inserted:
 *    `latest` draws below that watermark and can never pick a key still in flight;
 *  - a remove takes the next loaded id from a second counter (each removed once, so it
 *    exists); reads, updates and scans draw from the loaded ids (or, for latest, below
 *    the watermark), and a miss is an error unless that id was removed: the error names
 *    the key and the run fails.
 * With --upsert, the inserts (load and run) and updates are blind puts (bench_put).
 * With --batch N, writes are committed in write batches (tips/batch.h) of up to N: the
 * load's inserts N at a time; in the run phase consecutive inserts and updates of a
 * thread, committed when N are pending or before the thread's next read, remove or
 * scan (so a thread reads its own writes). A pending insert keeps the thread's
 * inflight bound, so `latest` never draws it before it is committed. Latency is then
 * sampled per commit, and fences per write are the commit's fences over its writes.
 * Counters: operations per thread (the statistics thread samples their sum every
 * --sample-ms for the timeline), latency for a sampled share of operations (with the
 * thread's flush/fence counters around them, which gives fences per read and per
 * write), the pm counters of the whole run, for tips-* the framework's statistics and
 * for listdb its own (tips_listdb_stats: flushes, compactions, stalls, caches).
 * pmdk-hash persists through libpmemobj, which those counters do not see: its flushes,
 * fences and PM bytes are reported as unavailable (n/a, JSON null), never as 0.
 * CPU time: each worker thread reads its own CPU clock around its phase, and the phase
 * reads the process's; the difference is the CPU of everything else, which is the
 * store's background (persist thread, replay workers, gc; ListDB's flush and
 * compaction threads) plus the sampler's few wake-ups. Both are reported per
 * operation: noise on a shared machine moves them far less than throughput.
 * The same seed gives every thread the same sequence of operations and keys.
 *
 * Exit codes: 0 done, 1 an operation failed (a lost key), 2 usage, 3 setup failed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <getopt.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "bench_index.h"
#include "histogram.h"
#include "json_str.h"
#include "size_arg.h"
#include "tips_bench.h"

static const char *const op_names[NOPS] = { "read", "insert", "update", "remove", "scan" };

#define MAX_KEY 128
#define MAX_VALUE 4096
#define MAX_SAMPLES 100000


/* One cache line per thread of shared counters. */
struct thread_slot {
	_Atomic uint64_t done;     /* operations completed in the current phase */
	_Atomic uint64_t inflight; /* insert id lower bound, UINT64_MAX when none */
	_Atomic pid_t tid;         /* the worker of the current phase (its schedstat) */
} __attribute__((aligned(64)));

/* What the clients and the host did in one timeline interval, so that a stalled one
 * can be told apart: the clients' time on a CPU and waiting for one (their threads'
 * schedstat; the rest of the interval they were blocked), and the CPU time the host
 * took from this machine's CPUs (steal, /proc/stat: the VM was not running). */
struct interval_sched {
	uint32_t cpu_us, wait_us, steal_us;
	bool known; /* false: a worker had exited, or the kernel does not say */
};

/* The running totals those are differences of; known: the kernel gave them. */
struct sched_snap {
	uint64_t cpu_ns, wait_ns, steal_us;
	bool known;
};

struct sampled {
	uint64_t n, fences, lines;
};

struct thread_result {
	struct histogram lat;
	struct histogram wlat; /* the sampled writes (and write batch commits) alone */
	struct sampled per_op[NOPS];
	uint64_t ops[NOPS];
	uint64_t removed_misses;
	struct tips_pm_counters pm;
	uint64_t cpu_ns; /* the thread's CPU time in the phase */
	bool failed;
};

/* One thread of the process seen during a phase, with its CPU clock at the phase's
 * start (0 if it began in the phase) and when last seen. */
struct task_cpu {
	pid_t tid;
	enum bg_role role;
	uint64_t start_ns, last_ns;
};

#define MAX_TASKS 512

/* The process's threads during a phase: sampled at its start, at each timeline
 * interval and at its end, so a thread that exits within the phase keeps the CPU it
 * had at its last sighting. Only the thread running the phase and the sampler (never
 * both at once) touch it. */
struct task_table {
	struct task_cpu task[MAX_TASKS];
	size_t n;
};

struct bench {
	struct options o;
	struct bench_index idx;
	struct zipf zipf;
	struct thread_slot slots[MAX_THREADS];
	_Atomic uint64_t next_insert, next_remove;
	_Atomic int stop_sampler, failed;
	_Atomic int time_up; /* the run phase reached o.max_seconds */
	pthread_barrier_t barrier;
	struct timespec start;
	int phase; /* 0 load, 1 run */
	struct thread_result res[MAX_THREADS];
	uint64_t timeline[2][MAX_SAMPLES]; /* per phase: operations in each interval */
	struct interval_sched sched[2][MAX_SAMPLES]; /* per phase: and who ran in it */
	size_t ntimeline[2];
	struct task_table tasks;
	uint64_t insert_limit; /* the run phase stops before inserting this id */
	_Atomic int insert_capped; /* it did */
};

static double secs_between(const struct timespec *a, const struct timespec *b)
{
	return (double)(b->tv_sec - a->tv_sec) + (double)(b->tv_nsec - a->tv_nsec) * 1e-9;
}

static uint64_t clock_ns(clockid_t id)
{
	struct timespec t;
	clock_gettime(id, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static uint64_t now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* ---- background CPU by thread role ------------------------------------------------ */

/* The role of a thread named @comm (src/framework/replay.c and cache.c name them). */
static enum bg_role role_of(const char *comm)
{
	if (strncmp(comm, "tips-persist", 12) == 0)
		return ROLE_PERSIST;
	if (strncmp(comm, "tips-replay", 11) == 0)
		return ROLE_REPLAY;
	if (strncmp(comm, "tips-gc", 7) == 0)
		return ROLE_GC;
	return ROLE_OTHER;
}

/* The CPU time of thread @tid of this process (the kernel's per-thread clock, as
 * pthread_getcpuclockid builds it), or -1 if it has exited. */
static int64_t task_cpu_ns(pid_t tid)
{
	clockid_t id = (clockid_t)((~(unsigned)tid << 3) | 6); /* CPUCLOCK_PERTHREAD|SCHED */
	struct timespec t;
	if (clock_gettime(id, &t))
		return -1;
	return (int64_t)t.tv_sec * 1000000000ll + t.tv_nsec;
}

static enum bg_role task_role(pid_t tid)
{
	char path[64], comm[32] = "";
	snprintf(path, sizeof(path), "/proc/self/task/%d/comm", (int)tid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return ROLE_OTHER;
	ssize_t n = read(fd, comm, sizeof(comm) - 1);
	close(fd);
	comm[n > 0 ? n : 0] = '\0';
	return role_of(comm);
}

/* Reads every thread's CPU clock into @tt; @first: the phase starts (threads seen now
 * count from here; later newcomers from 0, as they began within the phase). */
static void tasks_sample(struct task_table *tt, bool first)
{
	if (first)
		tt->n = 0;
	DIR *d = opendir("/proc/self/task");
	if (!d)
		return;
	for (struct dirent *e; (e = readdir(d));) {
		pid_t tid = (pid_t)atoi(e->d_name);
		if (tid <= 0)
			continue;
		int64_t ns = task_cpu_ns(tid);
		if (ns < 0)
			continue;
		size_t i = 0;
		while (i < tt->n && tt->task[i].tid != tid)
			i++;
		if (i == tt->n) {
			if (tt->n == MAX_TASKS)
				continue;
			tt->task[tt->n++] = (struct task_cpu){ tid, ROLE_OTHER,
							       first ? (uint64_t)ns : 0, 0 };
		}
		struct task_cpu *tc = &tt->task[i];
		tc->last_ns = (uint64_t)ns;
		if (tc->role == ROLE_OTHER) /* a new thread names itself after it starts */
			tc->role = task_role(tid);
	}
	closedir(d);
}

/* The CPU each named role used in the phase, into @ns[NROLES] (ROLE_OTHER left 0: the
 * caller knows it as the background minus the named roles). */
static void tasks_by_role(const struct task_table *tt, uint64_t *ns)
{
	memset(ns, 0, NROLES * sizeof(*ns));
	for (size_t i = 0; i < tt->n; i++)
		if (tt->task[i].role != ROLE_OTHER && tt->task[i].last_ns > tt->task[i].start_ns)
			ns[tt->task[i].role] += tt->task[i].last_ns - tt->task[i].start_ns;
}

/* The key of record @id: the prefix bytes (--key-size over 8), then keygen_scatter(id)
 * big-endian, stored as one word (a store per byte sat on every measured operation). */
static void make_key(const struct options *o, uint64_t id, unsigned char *k)
{
	size_t plen = o->key_size - 8;
	if (plen) {
		size_t n = o->key_prefix ? strlen(o->key_prefix) : 0;
		for (size_t i = 0; i < plen; i++)
			k[i] = n ? (unsigned char)o->key_prefix[i % n] : 'k';
	}
	uint64_t be = __builtin_bswap64(keygen_scatter(id));
	memcpy(k + plen, &be, 8);
}

/*
 * Draws ID_AHEAD ids of loaded records, for run_reads(): PiBench draws a key per
 * operation on the measured path, and so does that loop, but a chunk at a time, so
 * that the draws run back to back (no cache miss among them) and only the index's work
 * and the counting sit between two lookups. Uniform draws keep the generator's state
 * in registers for the whole chunk.
 */
#define ID_AHEAD 32

static __attribute__((noinline)) void draw_ids(uint64_t id[ID_AHEAD], struct keygen *g,
						uint64_t n)
{
	if (g->dist == KEYDIST_UNIFORM) {
		struct rng r = g->rng;
		for (unsigned j = 0; j < ID_AHEAD; j++)
			id[j] = rng_below(&r, n);
		g->rng = r;
	} else {
		for (unsigned j = 0; j < ID_AHEAD; j++)
			id[j] = keygen_next(g, n);
	}
}

static void make_value(const struct options *o, uint64_t id, uint64_t seq, unsigned char *v)
{
	uint64_t w[2] = { id, seq };
	memcpy(v, w, o->value_size < 16 ? o->value_size : 16);
	for (unsigned i = 16; i < o->value_size; i++)
		v[i] = (unsigned char)(id + i);
}

/* Every id below this is inserted (see the top comment). */
static uint64_t insert_watermark(struct bench *b)
{
	uint64_t w = atomic_load(&b->next_insert);
	for (unsigned t = 0; t < b->o.threads; t++) {
		uint64_t f = atomic_load(&b->slots[t].inflight);
		if (f < w)
			w = f;
	}
	return w;
}

/* Latency sampling samples each operation with probability @p, independently: the
 * gaps between two samples are then geometric, so drawing the gap once per sample
 * replaces a draw and a compare on every operation. The number of operations to skip
 * before the next sample; UINT64_MAX: never. */
static uint64_t sample_gap(struct rng *r, double p)
{
	if (p >= 1.0)
		return 0;
	if (!(p > 0.0))
		return UINT64_MAX;
	double gap = floor(log1p(-rng_double(r)) / log1p(-p));
	return gap < 1e18 ? (uint64_t)gap : UINT64_MAX;
}

static enum op pick_op(const struct options *o, struct rng *r)
{
	double x = rng_double(r), acc = 0;
	for (int i = 0; i < NOPS; i++) {
		acc += o->ratio[i];
		if (x < acc)
			return (enum op)i;
	}
	return OP_READ;
}

static void report_lost(struct bench *b, const char *what, uint64_t id, int rc)
{
	fprintf(stderr, "tips-bench: %s of record %llu (key %#llx) failed: %s (%s)\n", what,
		(unsigned long long)id, (unsigned long long)keygen_scatter(id), tips_strerror(rc),
		tips_errormsg());
	atomic_store(&b->failed, 1);
}

/* A miss on @id is expected only if a remove took it. */
static bool miss_expected(struct bench *b, uint64_t id)
{
	return id < atomic_load(&b->next_remove);
}

/* One more operation done by thread @t (only it writes its slot: a plain add). */
static void count_done(struct bench *b, unsigned t)
{
	atomic_store_explicit(&b->slots[t].done,
			      atomic_load_explicit(&b->slots[t].done, memory_order_relaxed) + 1,
			      memory_order_relaxed);
}

struct worker_arg {
	struct bench *b;
	unsigned t;
};

/* A thread's writes waiting for their commit (--batch). */
struct pending {
	struct tips_batch *batch;
	uint64_t first_id;     /* record id of the first write (for an error message) */
	unsigned n;
	unsigned n_of[NOPS];   /* writes by kind (insert, update) */
	bool insert_pending;   /* holds the thread's inflight insert bound */
	bool sample;           /* time this commit */
};

/* Adds a write of record @id to the thread's batch. */
static int pending_add(struct pending *p, const struct options *o, enum op op, uint64_t id,
		       const unsigned char *k, const unsigned char *v)
{
	if (p->n == 0)
		p->first_id = id;
	p->n++;
	p->n_of[op]++;
	if (o->upsert)
		return tips_batch_put(p->batch, k, o->key_size, v, o->value_size);
	return op == OP_INSERT ? tips_batch_insert(p->batch, k, o->key_size, v, o->value_size)
			       : tips_batch_update(p->batch, k, o->key_size, v, o->value_size);
}

/* Commits the pending writes of thread @t (if any), with their latency and fences when
 * the batch is sampled. */
static void pending_commit(struct bench *b, unsigned t, struct pending *p)
{
	if (p->n == 0)
		return;
	struct thread_result *res = &b->res[t];
	struct tips_pm_counters c0, c1;
	uint64_t t0 = 0;
	if (p->sample) {
		tips_pm_counters_thread(&c0);
		t0 = now_ns();
	}
	int rc = bench_batch_commit(&b->idx, p->batch);
	if (p->sample) {
		uint64_t t1 = now_ns();
		tips_pm_counters_thread(&c1);
		histogram_record(&res->lat, t1 - t0);
		histogram_record(&res->wlat, t1 - t0);
		for (int op = OP_INSERT; op <= OP_UPDATE && rc == 0; op++) {
			/* The commit's fences shared out over its writes. */
			res->per_op[op].n += p->n_of[op];
			res->per_op[op].fences += (c1.fences - c0.fences) * p->n_of[op] / p->n;
			res->per_op[op].lines += (c1.lines_flushed - c0.lines_flushed) *
						 p->n_of[op] / p->n;
		}
	}
	if (rc) {
		report_lost(b, "batch commit", p->first_id, rc);
		res->failed = true;
	}
	if (p->insert_pending)
		atomic_store(&b->slots[t].inflight, UINT64_MAX);
	tips_batch_clear(p->batch);
	memset(p->n_of, 0, sizeof(p->n_of));
	p->n = 0;
	p->insert_pending = p->sample = false;
}

/* The latency and flush/fence counts of one sampled operation @op that returned @rc. */
static void record_sample(struct thread_result *res, enum op op, int rc, uint64_t t0,
			  const struct tips_pm_counters *c0)
{
	uint64_t t1 = now_ns();
	struct tips_pm_counters c1;
	tips_pm_counters_thread(&c1);
	histogram_record(&res->lat, t1 - t0);
	if (op == OP_INSERT || op == OP_UPDATE || op == OP_REMOVE)
		histogram_record(&res->wlat, t1 - t0);
	if (rc == 0) { /* a missed update wrote nothing: not a write's cost */
		res->per_op[op].n++;
		res->per_op[op].fences += c1.fences - c0->fences;
		res->per_op[op].lines += c1.lines_flushed - c0->lines_flushed;
	}
}

/*
 * The run phase of a mix of reads alone (workload C) without batches, for ids [lo, hi):
 * what run_ops() does for such a mix, in chunks of ID_AHEAD operations: the chunk's
 * keys are drawn and written first, then the chunk's lookups run with nothing between
 * two of them but the sampling countdown and the return code's check; the stop flags
 * and the thread's done count (the timeline's) are read and written once a chunk. A
 * lookup's cache miss overlaps the next lookups' only while they fit in the processor's
 * instruction window, so every instruction of the harness there lowers the rate it can
 * measure (docs/indexes.md, "Read paths"). A miss is an error (no removes in the mix).
 */
static void run_reads(struct bench *b, unsigned t, struct keygen *g, struct rng *sampler,
		      uint64_t until_sample, uint64_t lo, uint64_t hi)
{
	const struct options *o = &b->o;
	struct thread_result *res = &b->res[t];
	void *store;
	bench_lookup_fn lookup = o->lookup_index ? bench_lookup_past_facade(&b->idx, &store)
						 : bench_lookup_direct(&b->idx, &store);
	uint64_t id[ID_AHEAD], word[ID_AHEAD];
	unsigned char k[MAX_KEY], v[MAX_VALUE];
	size_t klen = o->key_size, vl;
	make_key(o, 0, k); /* the prefix, written once */
	unsigned char *kw = k + klen - 8;
	uint64_t i = lo;
	while (i < hi && !atomic_load_explicit(&b->failed, memory_order_relaxed) &&
	       !atomic_load_explicit(&b->time_up, memory_order_relaxed)) {
		unsigned m = hi - i < ID_AHEAD ? (unsigned)(hi - i) : ID_AHEAD;
		draw_ids(id, g, o->records);
		for (unsigned j = 0; j < m; j++)
			word[j] = __builtin_bswap64(keygen_scatter(id[j]));
		for (unsigned j = 0; j < m; j++) {
			memcpy(kw, &word[j], 8);
			int rc;
			if (__builtin_expect(until_sample-- == 0, 0)) {
				until_sample = sample_gap(sampler, o->latency_sample);
				struct tips_pm_counters c0;
				tips_pm_counters_thread(&c0);
				uint64_t t0 = now_ns();
				rc = lookup(store, k, klen, v, sizeof(v), &vl);
				record_sample(res, OP_READ, rc == TIPS_ESIZE ? 0 : rc, t0, &c0);
			} else {
				rc = lookup(store, k, klen, v, sizeof(v), &vl);
			}
			if (__builtin_expect(rc != 0 && rc != TIPS_ESIZE, 0)) {
				report_lost(b, op_names[OP_READ], id[j], rc);
				res->failed = true;
				m = j; /* the failed one is not done */
				hi = i; /* and no chunk after this one */
				break;
			}
		}
		i += m;
		res->ops[OP_READ] += m;
		atomic_store_explicit(&b->slots[t].done,
				      atomic_load_explicit(&b->slots[t].done, memory_order_relaxed) + m,
				      memory_order_relaxed);
	}
}

static void run_ops(struct bench *b, unsigned t)
{
	const struct options *o = &b->o;
	struct thread_result *res = &b->res[t];
	struct keygen g;
	keygen_init(&g, o->dist, o->skew, (o->dist == KEYDIST_ZIPFIAN || o->dist == KEYDIST_LATEST)
						  ? &b->zipf : NULL, o->seed, 1000 + t);
	struct rng sampler;
	rng_seed(&sampler, o->seed, 5000 + t);
	uint64_t until_sample = sample_gap(&sampler, o->latency_sample);
	/* A mix of one operation (C, load) needs no draw per operation. */
	enum op only_op = NOPS;
	for (int i = 0; i < NOPS; i++)
		if (o->ratio[i] == 1.0)
			only_op = (enum op)i;
	/* i numbers the thread's operations (a value's sequence number); in duration mode
	 * each thread counts from its own 2^40 range, without end. */
	uint64_t lo = o->ops * t / o->threads, hi = o->ops * (t + 1) / o->threads;
	if (o->seconds > 0)
		lo = (uint64_t)t << 40, hi = UINT64_MAX;
	if (only_op == OP_READ && !o->batch && o->dist != KEYDIST_LATEST) {
		run_reads(b, t, &g, &sampler, until_sample, lo, hi);
		return;
	}
	unsigned char k[MAX_KEY], v[MAX_VALUE];
	struct pending pend = { 0 };
	if (o->batch && tips_batch_new(&pend.batch)) {
		report_lost(b, "batch", 0, TIPS_ENOMEM);
		res->failed = true;
		return;
	}
	for (uint64_t i = lo; i < hi && !atomic_load_explicit(&b->failed, memory_order_relaxed) &&
			      !atomic_load_explicit(&b->time_up, memory_order_relaxed);
	     i++) {
		enum op op = only_op != NOPS ? only_op : pick_op(o, &g.rng);
		bool sample = until_sample == 0;
		until_sample = sample ? sample_gap(&sampler, o->latency_sample) : until_sample - 1;
		bool batched = o->batch && (op == OP_INSERT || op == OP_UPDATE);
		if (o->batch && !batched)
			pending_commit(b, t, &pend); /* the thread reads its own writes */
		uint64_t id;
		if (op == OP_INSERT && pend.insert_pending) {
			id = atomic_fetch_add(&b->next_insert, 1); /* the bound stays the first's */
		} else if (op == OP_INSERT) {
			atomic_store(&b->slots[t].inflight, atomic_load(&b->next_insert));
			id = atomic_fetch_add(&b->next_insert, 1);
			atomic_store(&b->slots[t].inflight, id);
		} else if (op == OP_REMOVE) {
			id = atomic_fetch_add(&b->next_remove, 1);
			if (id >= o->records) { /* all loaded keys removed: read instead */
				op = OP_READ;
				id = keygen_next(&g, o->records);
			}
		} else if (o->dist == KEYDIST_LATEST) {
			id = keygen_next(&g, insert_watermark(b));
		} else {
			id = keygen_next(&g, o->records);
		}
		if (op == OP_INSERT && id >= b->insert_limit) {
			/* The pool holds no more: stop here. The thread's inflight bound stays
			 * at or below this id, so `latest` never draws it. */
			atomic_store(&b->insert_capped, 1);
			atomic_store(&b->time_up, 1);
			break;
		}
		make_key(o, id, k);
		if (batched) {
			make_value(o, id, i, v);
			if (pending_add(&pend, o, op, id, k, v)) {
				report_lost(b, "batch add", id, TIPS_EINVAL);
				res->failed = true;
			}
			pend.insert_pending |= op == OP_INSERT;
			pend.sample |= sample;
			if (pend.n == o->batch)
				pending_commit(b, t, &pend);
			res->ops[op]++;
			count_done(b, t);
			continue;
		}
		struct tips_pm_counters c0;
		uint64_t t0 = 0;
		if (sample) {
			tips_pm_counters_thread(&c0);
			t0 = now_ns();
		}
		int rc = 0;
		size_t vl;
		switch (op) {
		case OP_READ:
			rc = bench_lookup(&b->idx, k, o->key_size, v, sizeof(v), &vl);
			break;
		case OP_UPDATE:
			make_value(o, id, i, v);
			rc = o->upsert ? bench_put(&b->idx, k, o->key_size, v, o->value_size)
				       : bench_update(&b->idx, k, o->key_size, v, o->value_size);
			break;
		case OP_INSERT:
			make_value(o, id, i, v);
			rc = o->upsert ? bench_put(&b->idx, k, o->key_size, v, o->value_size)
				       : bench_insert(&b->idx, k, o->key_size, v, o->value_size);
			atomic_store(&b->slots[t].inflight, UINT64_MAX);
			break;
		case OP_REMOVE:
			rc = bench_remove(&b->idx, k, o->key_size);
			break;
		case OP_SCAN: {
			long n = bench_scan(&b->idx, k, o->key_size, o->scan_len);
			rc = n < 0 ? (int)n : 0;
			break;
		}
		default:
			break;
		}
		if (sample)
			record_sample(res, op, rc, t0, &c0);
		if (rc == TIPS_ENOTFOUND && (op == OP_READ || op == OP_UPDATE) &&
		    miss_expected(b, id))
			res->removed_misses++;
		else if (rc) {
			report_lost(b, op_names[op], id, rc);
			res->failed = true;
		}
		res->ops[op]++;
		count_done(b, t);
	}
	pending_commit(b, t, &pend);
	tips_batch_free(&pend.batch);
}

/* The load phase: thread @t inserts its share of the records, in id order. A sampled
 * share of the inserts (--latency-sample, as in the run) is timed, so the load too
 * reports write latency and fences per write. */
static void load_ops(struct bench *b, unsigned t)
{
	const struct options *o = &b->o;
	struct thread_result *res = &b->res[t];
	unsigned char k[MAX_KEY], v[MAX_VALUE];
	struct pending pend = { 0 };
	if (o->batch && tips_batch_new(&pend.batch)) {
		report_lost(b, "batch", 0, TIPS_ENOMEM);
		res->failed = true;
		return;
	}
	struct rng sampler;
	rng_seed(&sampler, o->seed, 7000 + t);
	uint64_t until_sample = sample_gap(&sampler, o->latency_sample);
	uint64_t lo = o->records * t / o->threads, hi = o->records * (t + 1) / o->threads;
	for (uint64_t id = lo; id < hi && !atomic_load_explicit(&b->failed, memory_order_relaxed);
	     id++) {
		bool sample = until_sample == 0;
		until_sample = sample ? sample_gap(&sampler, o->latency_sample) : until_sample - 1;
		make_key(o, id, k);
		make_value(o, id, 0, v);
		if (o->batch) {
			if (pending_add(&pend, o, OP_INSERT, id, k, v)) {
				report_lost(b, "batch add", id, TIPS_EINVAL);
				res->failed = true;
			}
			pend.sample |= sample;
			if (pend.n == o->batch || id + 1 == hi)
				pending_commit(b, t, &pend);
			res->ops[OP_INSERT]++;
			count_done(b, t);
			continue;
		}
		struct tips_pm_counters c0;
		uint64_t t0 = 0;
		if (sample) {
			tips_pm_counters_thread(&c0);
			t0 = now_ns();
		}
		int rc = o->upsert ? bench_put(&b->idx, k, o->key_size, v, o->value_size)
				   : bench_insert(&b->idx, k, o->key_size, v, o->value_size);
		if (sample)
			record_sample(res, OP_INSERT, rc, t0, &c0);
		if (rc) {
			report_lost(b, "load insert", id, rc);
			res->failed = true;
		}
		res->ops[OP_INSERT]++;
		count_done(b, t);
	}
	tips_batch_free(&pend.batch);
}

static void *worker(void *p)
{
	struct worker_arg *a = p;
	struct bench *b = a->b;
	struct tips_pm_counters c0, c1;
	atomic_store(&b->slots[a->t].tid, gettid()); /* before the sampler starts */
	pthread_barrier_wait(&b->barrier);
	tips_pm_counters_thread(&c0);
	uint64_t cpu0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
	if (b->phase == 0)
		load_ops(b, a->t);
	else
		run_ops(b, a->t);
	b->res[a->t].cpu_ns = clock_ns(CLOCK_THREAD_CPUTIME_ID) - cpu0;
	tips_pm_counters_thread(&c1);
	b->res[a->t].pm.fences = c1.fences - c0.fences;
	b->res[a->t].pm.lines_flushed = c1.lines_flushed - c0.lines_flushed;
	b->res[a->t].pm.bytes_persisted = c1.bytes_persisted - c0.bytes_persisted;
	return NULL;
}

static uint64_t total_done(struct bench *b)
{
	uint64_t n = 0;
	for (unsigned t = 0; t < b->o.threads; t++)
		n += atomic_load_explicit(&b->slots[t].done, memory_order_relaxed);
	return n;
}

/* Reads the first two numbers of @path (a schedstat: ns on a CPU, ns waiting for one). */
static bool read_two(const char *path, unsigned long long *a, unsigned long long *b)
{
	FILE *f = fopen(path, "re");
	if (!f)
		return false;
	bool ok = fscanf(f, "%llu %llu", a, b) == 2;
	fclose(f);
	return ok;
}

/* The machine's steal time in microseconds, summed over its CPUs; false if unknown. */
static bool read_steal_us(uint64_t *us)
{
	FILE *f = fopen("/proc/stat", "re");
	if (!f)
		return false;
	unsigned long long v[8];
	bool ok = fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2],
			 &v[3], &v[4], &v[5], &v[6], &v[7]) == 8;
	fclose(f);
	long hz = sysconf(_SC_CLK_TCK);
	if (!ok || hz <= 0)
		return false;
	*us = (uint64_t)v[7] * (1000000ull / (uint64_t)hz);
	return true;
}

/* The clients' schedstat totals and the machine's steal, now. */
static struct sched_snap sched_snap(const struct bench *b)
{
	struct sched_snap s = { 0, 0, 0, true };
	for (unsigned t = 0; t < b->o.threads && s.known; t++) {
		char path[64];
		unsigned long long cpu, wait;
		snprintf(path, sizeof(path), "/proc/self/task/%d/schedstat",
			 (int)atomic_load(&b->slots[t].tid));
		s.known = read_two(path, &cpu, &wait);
		s.cpu_ns += cpu;
		s.wait_ns += wait;
	}
	s.known = s.known && read_steal_us(&s.steal_us);
	return s;
}

static uint32_t clamp_u32(uint64_t x)
{
	return x > UINT32_MAX ? UINT32_MAX : (uint32_t)x;
}

/* The interval from @a to @z. */
static struct interval_sched sched_between(const struct sched_snap *a,
					   const struct sched_snap *z)
{
	if (!a->known || !z->known)
		return (struct interval_sched){ 0, 0, 0, false };
	return (struct interval_sched){ clamp_u32((z->cpu_ns - a->cpu_ns) / 1000),
					clamp_u32((z->wait_ns - a->wait_ns) / 1000),
					clamp_u32(z->steal_us - a->steal_us), true };
}

/* Samples the completed operations every sample_ms (PiBench's statistics thread), and
 * with them what the clients and the host did (struct interval_sched). */
static void *sampler(void *p)
{
	struct bench *b = p;
	struct timespec next = b->start;
	uint64_t last = 0;
	bool progress = isatty(STDERR_FILENO);
	uint64_t *timeline = b->timeline[b->phase];
	struct interval_sched *sched = b->sched[b->phase];
	size_t *ntimeline = &b->ntimeline[b->phase];
	struct sched_snap prev = sched_snap(b);
	while (!atomic_load(&b->stop_sampler) && *ntimeline < MAX_SAMPLES) {
		next.tv_nsec += (long)b->o.sample_ms * 1000000L;
		while (next.tv_nsec >= 1000000000L) {
			next.tv_nsec -= 1000000000L;
			next.tv_sec++;
		}
		while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL) != 0)
			;
		uint64_t n = total_done(b);
		struct sched_snap now = sched_snap(b);
		sched[*ntimeline] = sched_between(&prev, &now);
		prev = now;
		timeline[(*ntimeline)++] = n - last;
		last = n;
		tasks_sample(&b->tasks, false);
		double elapsed_ms = (double)*ntimeline * b->o.sample_ms;
		if (b->phase == 1 && ((b->o.max_seconds > 0 && elapsed_ms >= b->o.max_seconds * 1000) ||
				      (b->o.seconds > 0 && elapsed_ms >= b->o.seconds * 1000)))
			atomic_store(&b->time_up, 1);
		if (progress)
			fprintf(stderr, "\r%s: %llu operations", b->phase ? "run" : "load",
				(unsigned long long)n);
	}
	/* The workers may have finished after the last sample: count their tail too, so the
	 * timeline always adds up to the phase's operations. */
	uint64_t n = total_done(b);
	if (n > last && *ntimeline < MAX_SAMPLES) {
		struct sched_snap now = sched_snap(b); /* not known: the workers exited */
		sched[*ntimeline] = sched_between(&prev, &now);
		timeline[(*ntimeline)++] = n - last;
	}
	if (progress)
		fprintf(stderr, "\r\033[K");
	return NULL;
}

struct phase_result {
	double seconds, ops_per_sec;
	uint64_t ops;
	int phase;   /* 0 load, 1 run */
	bool capped; /* stopped by max_seconds */
	struct tips_stats st0, st1;
	struct tips_listdb_stats ls0, ls1; /* listdb */
	struct tips_pm_counters all0, all1;
	uint64_t proc_cpu_ns; /* the process's CPU time in the phase */
	uint64_t role_cpu_ns[NROLES]; /* of it, each background role's (ROLE_OTHER: 0) */
	bool insert_capped; /* stopped at the insert bound of duration mode */
};

static int run_phase(struct bench *b, int phase, struct phase_result *pr)
{
	pthread_t th[MAX_THREADS], samp;
	struct worker_arg args[MAX_THREADS];
	b->phase = phase;
	pr->phase = phase;
	memset(b->res, 0, sizeof(b->res));
	b->ntimeline[phase] = 0;
	for (unsigned t = 0; t < b->o.threads; t++) {
		atomic_store(&b->slots[t].done, 0);
		atomic_store(&b->slots[t].inflight, UINT64_MAX);
		histogram_clear(&b->res[t].lat);
	}
	if (b->idx.db)
		tips_stats(b->idx.db, &pr->st0);
	if (b->idx.ldb)
		tips_listdb_stats(b->idx.ldb, &pr->ls0);
	tips_pm_counters_total(&pr->all0);
	pthread_barrier_init(&b->barrier, NULL, b->o.threads + 1);
	for (unsigned t = 0; t < b->o.threads; t++) {
		args[t] = (struct worker_arg){ b, t };
		if (pthread_create(&th[t], NULL, worker, &args[t]))
			return -1;
	}
	atomic_store(&b->stop_sampler, 0);
	/* The clock starts before the barrier opens: no operation can precede it, even if
	 * this thread is descheduled while the workers run. */
	clock_gettime(CLOCK_MONOTONIC, &b->start);
	tasks_sample(&b->tasks, true);
	uint64_t cpu0 = clock_ns(CLOCK_PROCESS_CPUTIME_ID);
	pthread_barrier_wait(&b->barrier);
	if (pthread_create(&samp, NULL, sampler, b))
		return -1;
	for (unsigned t = 0; t < b->o.threads; t++)
		pthread_join(th[t], NULL);
	struct timespec end;
	clock_gettime(CLOCK_MONOTONIC, &end);
	atomic_store(&b->stop_sampler, 1);
	pthread_join(samp, NULL);
	/* The threads' clocks bracket the same span as the process's (the background keeps
	 * running while the sampler stops; both readings see it). */
	tasks_sample(&b->tasks, false);
	pr->proc_cpu_ns = clock_ns(CLOCK_PROCESS_CPUTIME_ID) - cpu0;
	tasks_by_role(&b->tasks, pr->role_cpu_ns);
	pr->insert_capped = atomic_load(&b->insert_capped);
	pthread_barrier_destroy(&b->barrier);
	tips_pm_counters_total(&pr->all1);
	if (b->idx.db)
		tips_stats(b->idx.db, &pr->st1);
	if (b->idx.ldb)
		tips_listdb_stats(b->idx.ldb, &pr->ls1);
	pr->seconds = secs_between(&b->start, &end);
	pr->ops = total_done(b);
	pr->ops_per_sec = (double)pr->ops / pr->seconds;
	/* Capped: stopped short of what was asked, by --max-seconds or by the insert bound
	 * (reaching --seconds is the plan, not a cap). */
	bool by_time = atomic_load(&b->time_up) && !pr->insert_capped;
	pr->capped = pr->insert_capped ||
		     (by_time && !(b->o.seconds > 0 && (b->o.max_seconds <= 0 ||
							b->o.seconds <= b->o.max_seconds)));
	return atomic_load(&b->failed) ? 1 : 0;
}

/* ---- reporting ------------------------------------------------------------------- */

struct run_summary {
	struct histogram lat, wlat; /* every sampled operation; the writes alone */
	uint64_t ops[NOPS], removed_misses;
	double fences_w, lines_w, fences_r, lines_r; /* from sampled operations */
	double fences_w_all, pm_bytes_per_op;        /* all threads, whole phase */
	double timeline_mean, timeline_stddev;       /* ops per interval */
	double cpu_app, cpu_backend;                 /* CPU ns per operation: the worker
							threads, everything else */
	double cpu_role[NROLES];                     /* cpu_backend by role; ROLE_OTHER:
							the rest (ListDB's threads, the
							sampler, threads gone unseen) */
	double timeline_median;                      /* ops per full interval */
	unsigned stalls, longest_stall;              /* intervals below half the median,
							the longest run of them */
	unsigned stalls_known;                       /* of them, those with their
							struct interval_sched; in these: */
	double stall_cpu_share, stall_wait_share;    /* the clients' time on a CPU, and
							waiting for one, over theirs */
	double stall_steal_ms;                       /* CPU time the host took */
	bool pm_counted; /* the pm counters see this index's persistence (not pmdk-*) */
};

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* Write stalls in the first @n intervals of @timeline: those below half the median
 * interval, the longest run of consecutive ones, and what the clients (@threads of
 * them, over intervals of @interval_ms) and the host did in those @sched knows. */
static void find_stalls(const uint64_t *timeline, const struct interval_sched *sched,
			size_t n, unsigned threads, unsigned interval_ms, struct run_summary *s)
{
	uint64_t *sorted = malloc((n ? n : 1) * sizeof(*sorted));
	if (!sorted || !n) {
		free(sorted);
		return;
	}
	memcpy(sorted, timeline, n * sizeof(*sorted));
	qsort(sorted, n, sizeof(*sorted), cmp_u64);
	s->timeline_median = n % 2 ? (double)sorted[n / 2]
				   : ((double)sorted[n / 2 - 1] + (double)sorted[n / 2]) / 2;
	free(sorted);
	unsigned run = 0;
	uint64_t cpu = 0, wait = 0, steal = 0;
	for (size_t i = 0; i < n; i++) {
		if ((double)timeline[i] >= s->timeline_median / 2) {
			run = 0;
			continue;
		}
		s->stalls++;
		if (++run > s->longest_stall)
			s->longest_stall = run;
		if (sched[i].known) {
			s->stalls_known++;
			cpu += sched[i].cpu_us;
			wait += sched[i].wait_us;
			steal += sched[i].steal_us;
		}
	}
	double span_us = (double)s->stalls_known * threads * interval_ms * 1000.0;
	s->stall_cpu_share = span_us > 0 ? (double)cpu / span_us : 0;
	s->stall_wait_share = span_us > 0 ? (double)wait / span_us : 0;
	s->stall_steal_ms = (double)steal / 1000.0;
}

static void summarize(struct bench *b, const struct phase_result *pr, struct run_summary *s)
{
	memset(s, 0, sizeof(*s));
	histogram_clear(&s->lat);
	histogram_clear(&s->wlat);
	s->pm_counted = bench_index_pm_counted(&b->idx);
	struct sampled per[NOPS] = { { 0, 0, 0 } };
	for (unsigned t = 0; t < b->o.threads; t++) {
		histogram_merge(&s->lat, &b->res[t].lat);
		histogram_merge(&s->wlat, &b->res[t].wlat);
		s->removed_misses += b->res[t].removed_misses;
		for (int i = 0; i < NOPS; i++) {
			s->ops[i] += b->res[t].ops[i];
			per[i].n += b->res[t].per_op[i].n;
			per[i].fences += b->res[t].per_op[i].fences;
			per[i].lines += b->res[t].per_op[i].lines;
		}
	}
	uint64_t wn = per[OP_INSERT].n + per[OP_UPDATE].n + per[OP_REMOVE].n;
	uint64_t wf = per[OP_INSERT].fences + per[OP_UPDATE].fences + per[OP_REMOVE].fences;
	uint64_t wl = per[OP_INSERT].lines + per[OP_UPDATE].lines + per[OP_REMOVE].lines;
	uint64_t rn = per[OP_READ].n + per[OP_SCAN].n;
	uint64_t writes = s->ops[OP_INSERT] + s->ops[OP_UPDATE] + s->ops[OP_REMOVE];
	/* The load (as before its inserts were sampled), or a run of writes none of which
	 * was sampled: every write, from the threads' totals. */
	if (writes == pr->ops && (pr->phase == 0 || !wn)) {
		wn = wf = wl = 0;
		for (unsigned t = 0; t < b->o.threads; t++) {
			wn += b->res[t].ops[OP_INSERT] + b->res[t].ops[OP_UPDATE] +
			      b->res[t].ops[OP_REMOVE];
			wf += b->res[t].pm.fences;
			wl += b->res[t].pm.lines_flushed;
		}
	}
	s->fences_w = wn ? (double)wf / (double)wn : 0;
	s->lines_w = wn ? (double)wl / (double)wn : 0;
	s->fences_r = rn ? (double)(per[OP_READ].fences + per[OP_SCAN].fences) / (double)rn : 0;
	s->lines_r = rn ? (double)(per[OP_READ].lines + per[OP_SCAN].lines) / (double)rn : 0;
	s->fences_w_all = writes ? (double)(pr->all1.fences - pr->all0.fences) / (double)writes : 0;
	uint64_t app = 0;
	for (unsigned t = 0; t < b->o.threads; t++)
		app += b->res[t].cpu_ns;
	uint64_t other = pr->proc_cpu_ns > app ? pr->proc_cpu_ns - app : 0;
	s->cpu_app = pr->ops ? (double)app / (double)pr->ops : 0;
	s->cpu_backend = pr->ops ? (double)other / (double)pr->ops : 0;
	uint64_t named = 0;
	for (int r = 0; r < ROLE_OTHER; r++) {
		named += pr->role_cpu_ns[r];
		s->cpu_role[r] = pr->ops ? (double)pr->role_cpu_ns[r] / (double)pr->ops : 0;
	}
	s->cpu_role[ROLE_OTHER] = pr->ops && other > named ? (double)(other - named) /
								 (double)pr->ops : 0;
	s->pm_bytes_per_op = pr->ops ? (double)(pr->all1.bytes_persisted -
						 pr->all0.bytes_persisted) / (double)pr->ops : 0;
	/* The last interval is partial: leave it out of the spread. */
	const uint64_t *timeline = b->timeline[pr->phase];
	size_t n = b->ntimeline[pr->phase] > 1 ? b->ntimeline[pr->phase] - 1 : b->ntimeline[pr->phase];
	double sum = 0, sq = 0;
	for (size_t i = 0; i < n; i++)
		sum += (double)timeline[i];
	s->timeline_mean = n ? sum / (double)n : 0;
	for (size_t i = 0; i < n; i++)
		sq += ((double)timeline[i] - s->timeline_mean) *
		      ((double)timeline[i] - s->timeline_mean);
	s->timeline_stddev = n ? sqrt(sq / (double)n) : 0;
	find_stalls(timeline, b->sched[pr->phase], n, b->o.threads, b->o.sample_ms, s);
}

static const double quantiles[] = { 0.5, 0.9, 0.99, 0.999, 0.9999 };
static const char *const quantile_names[] = { "p50", "p90", "p99", "p999", "p9999" };

static void print_phase(const char *name, const struct phase_result *pr,
			const struct run_summary *s)
{
	printf("%-5s %12.0f ops/s  %10llu ops in %.3f s  cpu ns/op %.0f + %.0f background "
	       "(persist %.0f, replay %.0f, gc %.0f, other %.0f)",
	       name, pr->ops_per_sec, (unsigned long long)pr->ops, pr->seconds, s->cpu_app,
	       s->cpu_backend, s->cpu_role[ROLE_PERSIST], s->cpu_role[ROLE_REPLAY],
	       s->cpu_role[ROLE_GC], s->cpu_role[ROLE_OTHER]);
	if (s->lat.total)
		printf("  latency ns p50 %llu p99 %llu p99.9 %llu max %llu",
		       (unsigned long long)histogram_quantile(&s->lat, 0.5),
		       (unsigned long long)histogram_quantile(&s->lat, 0.99),
		       (unsigned long long)histogram_quantile(&s->lat, 0.999),
		       (unsigned long long)s->lat.max);
	printf("\n%-5s stalls: %u of the 100 ms intervals below half the median (%.0f ops), "
	       "longest %u", name, s->stalls, s->timeline_median, s->longest_stall);
	if (s->stalls_known)
		printf(" (in them the clients were on a CPU %.0f%% of their time, waiting for "
		       "one %.0f%%; the host took %.0f ms of CPU)", 100 * s->stall_cpu_share,
		       100 * s->stall_wait_share, s->stall_steal_ms);
	if (s->wlat.total)
		printf("; write latency ns p50 %llu p99.9 %llu",
		       (unsigned long long)histogram_quantile(&s->wlat, 0.5),
		       (unsigned long long)histogram_quantile(&s->wlat, 0.999));
	if (pr->insert_capped)
		printf("; stopped at the insert bound of --seconds (raise --ops)");
	printf("\n");
}

static void json_phase(FILE *f, struct bench *b, const char *name,
		       const struct phase_result *pr, const struct run_summary *s)
{
	fprintf(f, "\"%s\":{\"ops\":%llu,\"seconds\":%.6f,\"ops_per_sec\":%.1f,\"capped\":%s,"
		"\"insert_capped\":%s,"
		"\"cpu_ns_per_op\":{\"app\":%.1f,\"background\":%.1f,\"total\":%.1f,"
		"\"persist\":%.1f,\"replay\":%.1f,\"gc\":%.1f,\"other_background\":%.1f},"
		"\"stalls\":{\"interval_ms\":%u,\"median_interval_ops\":%.1f,"
		"\"intervals_below_half_median\":%u,\"longest_run\":%u",
		name, (unsigned long long)pr->ops, pr->seconds, pr->ops_per_sec,
		pr->capped ? "true" : "false", pr->insert_capped ? "true" : "false", s->cpu_app,
		s->cpu_backend, s->cpu_app + s->cpu_backend, s->cpu_role[ROLE_PERSIST],
		s->cpu_role[ROLE_REPLAY], s->cpu_role[ROLE_GC], s->cpu_role[ROLE_OTHER],
		b->o.sample_ms, s->timeline_median, s->stalls, s->longest_stall);
	if (s->stalls_known)
		fprintf(f, ",\"clients_on_cpu_share\":%.4f,\"clients_runqueue_share\":%.4f,"
			"\"host_steal_ms\":%.1f}", s->stall_cpu_share, s->stall_wait_share,
			s->stall_steal_ms);
	else
		fprintf(f, ",\"clients_on_cpu_share\":null,\"clients_runqueue_share\":null,"
			"\"host_steal_ms\":null}");
	fprintf(f, ",\"op_counts\":{");
	for (int i = 0; i < NOPS; i++)
		fprintf(f, "%s\"%s\":%llu", i ? "," : "", op_names[i], (unsigned long long)s->ops[i]);
	fprintf(f, "},\"removed_key_misses\":%llu,\"latency_ns\":{\"samples\":%llu",
		(unsigned long long)s->removed_misses, (unsigned long long)s->lat.total);
	for (int i = 0; i < 5; i++)
		fprintf(f, ",\"%s\":%llu", quantile_names[i],
			(unsigned long long)histogram_quantile(&s->lat, quantiles[i]));
	fprintf(f, ",\"max\":%llu},\"write_latency_ns\":{\"samples\":%llu,\"p50\":%llu,"
		"\"p99\":%llu,\"p999\":%llu,\"max\":%llu},\"latency_cdf\":[",
		(unsigned long long)s->lat.max, (unsigned long long)s->wlat.total,
		(unsigned long long)histogram_quantile(&s->wlat, 0.5),
		(unsigned long long)histogram_quantile(&s->wlat, 0.99),
		(unsigned long long)histogram_quantile(&s->wlat, 0.999),
		(unsigned long long)s->wlat.max);
	uint64_t cdf_ns[HISTOGRAM_BUCKETS];
	double cdf_share[HISTOGRAM_BUCKETS];
	size_t points = histogram_cdf(&s->lat, cdf_ns, cdf_share, HISTOGRAM_BUCKETS);
	for (size_t i = 0; i < points; i++)
		fprintf(f, "%s[%llu,%.6f]", i ? "," : "", (unsigned long long)cdf_ns[i], cdf_share[i]);
	fprintf(f, "],\"timeline_ms\":%u,\"timeline\":[", b->o.sample_ms);
	for (size_t i = 0; i < b->ntimeline[pr->phase]; i++)
		fprintf(f, "%s%llu", i ? "," : "", (unsigned long long)b->timeline[pr->phase][i]);
	/* [on a CPU, waiting for one, host steal] per interval, null where not known */
	fprintf(f, "],\"timeline_sched_us\":[");
	for (size_t i = 0; i < b->ntimeline[pr->phase]; i++) {
		const struct interval_sched *iv = &b->sched[pr->phase][i];
		if (iv->known)
			fprintf(f, "%s[%u,%u,%u]", i ? "," : "", iv->cpu_us, iv->wait_us,
				iv->steal_us);
		else
			fprintf(f, "%snull", i ? "," : "");
	}
	fprintf(f, "]");
	if (s->pm_counted)
		fprintf(f, ",\"timeline_stddev\":%.1f,\"persist\":{\"flushes_per_write\":%.4f,"
			"\"fences_per_write\":%.4f,\"flushes_per_read\":%.4f,"
			"\"fences_per_read\":%.4f,\"fences_per_write_all_threads\":%.4f,"
			"\"pm_bytes_per_op\":%.2f,\"counted\":true}",
			s->timeline_stddev, s->lines_w, s->fences_w, s->lines_r, s->fences_r,
			s->fences_w_all, s->pm_bytes_per_op);
	else /* persisted by libpmemobj: not seen by the pm counters, so unknown, not 0 */
		fprintf(f, ",\"timeline_stddev\":%.1f,\"persist\":{\"flushes_per_write\":null,"
			"\"fences_per_write\":null,\"flushes_per_read\":null,"
			"\"fences_per_read\":null,\"fences_per_write_all_threads\":null,"
			"\"pm_bytes_per_op\":null,\"counted\":false}", s->timeline_stddev);
	if (b->idx.db) {
		const struct tips_stats *a = &pr->st0, *z = &pr->st1;
		uint64_t hits = z->cache_hits - a->cache_hits;
		uint64_t looked = hits + z->cache_misses - a->cache_misses;
		uint64_t epochs = z->epochs - a->epochs;
		double wavg = epochs ? (z->workers_avg * (double)z->epochs -
					a->workers_avg * (double)a->epochs) / (double)epochs : 0;
		fprintf(f, ",\"framework\":{\"cache_hit_ratio\":%.4f,\"cache_lookups\":%llu,"
			"\"workers_avg\":%.3f,\"workers_final\":%u,\"reclamations\":%llu,"
			"\"reclaim_graces\":%llu,"
			"\"ulog_logged\":%llu,\"ulog_skipped_fresh\":%llu,"
			"\"ulog_skipped_logged\":%llu,\"ulog_values\":%llu,\"replayed\":%llu,"
			"\"writer_waits\":%llu,\"gc_unlinked\":%llu,\"epochs\":%llu}",
			looked ? (double)hits / (double)looked : 0, (unsigned long long)looked,
			wavg,
			z->workers_now, (unsigned long long)(z->reclamations - a->reclamations),
			(unsigned long long)(z->reclaim_graces - a->reclaim_graces),
			(unsigned long long)(z->ulog_logged - a->ulog_logged),
			(unsigned long long)(z->ulog_skipped_fresh - a->ulog_skipped_fresh),
			(unsigned long long)(z->ulog_skipped_logged - a->ulog_skipped_logged),
			(unsigned long long)(z->ulog_values - a->ulog_values),
			(unsigned long long)(z->replayed - a->replayed),
			(unsigned long long)(z->writer_waits - a->writer_waits),
			(unsigned long long)(z->gc_unlinked - a->gc_unlinked),
			(unsigned long long)epochs);
	}
	fprintf(f, "}");
}

/* listdb: every field of struct tips_listdb_stats (X: name; recovery_ms and recovered apart). */
#define TIPS_LISTDB_U64_STATS(X)                                                              \
	X(puts) X(deletes) X(gets) X(memtables_flushed) X(entries_flushed) X(compactions)   \
	X(entries_merged) X(obsolete_marked) X(chunks_reclaimed) X(chunks_live)            \
	X(write_stall_ns) X(immutable_now) X(l0_now) X(cache_hits) X(cache_lookups)        \
	X(second_chance_hits) X(traversals) X(cross_domain_traversals) X(recovered_entries)
/* The counters of listdb's background work and caches that a phase moves. */
#define TIPS_LISTDB_PHASE_STATS(X)                                                            \
	X(memtables_flushed) X(entries_flushed) X(compactions) X(entries_merged)            \
	X(obsolete_marked) X(chunks_reclaimed) X(write_stall_ns) X(cache_hits)              \
	X(cache_lookups) X(second_chance_hits)

static void json_listdb_phase(FILE *f, const char *name, const struct phase_result *pr)
{
	const struct tips_listdb_stats *a = &pr->ls0, *z = &pr->ls1;
	const char *sep = "";
	fprintf(f, "\"%s\":{", name);
#define X(field)                                                                         \
	fprintf(f, "%s\"" #field "\":%llu", sep, (unsigned long long)(z->field - a->field));  \
	sep = ",";
	TIPS_LISTDB_PHASE_STATS(X)
#undef X
	fprintf(f, "}");
}

static const char *listdb_flush_name(enum tips_listdb_flush_mode m)
{
	return m == TIPS_LISTDB_FLUSH_WAL ? "wal" : "iul";
}

/* The "listdb" object: the knobs, every tips_listdb_stats field after the run phase, and
 * what each phase's background work did. Cache sizes the user did not set are null:
 * the engine derives them from expected_keys at open. */
static void json_listdb(FILE *f, const struct options *o, const struct phase_result *load,
			const struct phase_result *run)
{
	const struct tips_listdb_config *c = &o->listdb;
	const struct tips_listdb_stats *z = &run->ls1;
	fprintf(f, ",\"listdb\":{\"config\":{\"memtable_entries\":%llu,\"domains\":%u,"
		"\"braided\":%s,\"flush\":\"%s\",\"compaction\":%s,\"compaction_threads\":%u,"
		"\"shards\":%u,\"max_immutable\":%u,\"max_l0\":%u,",
		(unsigned long long)c->memtable_entries, c->domains, c->braided ? "true" : "false",
		listdb_flush_name(c->flush_mode), c->compaction ? "true" : "false",
		c->compaction_threads, c->shards, c->max_immutable, c->max_l0);
	if (o->listdb_cache_set)
		fprintf(f, "\"cache_entries\":%llu,", (unsigned long long)c->cache_entries);
	else
		fprintf(f, "\"cache_entries\":null,");
	if (o->listdb_second_chance_set)
		fprintf(f, "\"second_chance_entries\":%llu,",
			(unsigned long long)c->second_chance_entries);
	else
		fprintf(f, "\"second_chance_entries\":null,");
	fprintf(f, "\"settle\":%s}", o->listdb_settle ? "true" : "false");
#define X(field) fprintf(f, ",\"" #field "\":%llu", (unsigned long long)z->field);
	TIPS_LISTDB_U64_STATS(X)
#undef X
	fprintf(f, ",\"recovery_ms\":%.3f,\"recovered\":%d,", z->recovery_ms, z->recovered);
	json_listdb_phase(f, "load", load);
	fprintf(f, ",");
	json_listdb_phase(f, "run", run);
	fprintf(f, "}");
}

static void print_listdb(const struct phase_result *pr)
{
	const struct tips_listdb_stats *a = &pr->ls0, *z = &pr->ls1;
	uint64_t looked = z->cache_lookups - a->cache_lookups;
	printf("listdb: run: %llu MemTables flushed (%llu entries), %llu compactions (%llu "
	       "entries merged), writers stalled %.1f ms, cache hit ratio %.3f; now %llu "
	       "immutable MemTables, %llu L0 tables, %llu live log chunks (%llu reclaimed)\n",
	       (unsigned long long)(z->memtables_flushed - a->memtables_flushed),
	       (unsigned long long)(z->entries_flushed - a->entries_flushed),
	       (unsigned long long)(z->compactions - a->compactions),
	       (unsigned long long)(z->entries_merged - a->entries_merged),
	       (double)(z->write_stall_ns - a->write_stall_ns) / 1e6,
	       looked ? (double)(z->cache_hits - a->cache_hits) / (double)looked : 0,
	       (unsigned long long)z->immutable_now, (unsigned long long)z->l0_now,
	       (unsigned long long)z->chunks_live, (unsigned long long)z->chunks_reclaimed);
}

/* ---- options --------------------------------------------------------------------- */

int bench_set_workload(struct options *o, const char *w)
{
	memset(o->ratio, 0, sizeof(o->ratio));
	if (strcmp(w, "a") == 0) {
		o->ratio[OP_READ] = 0.5, o->ratio[OP_UPDATE] = 0.5;
	} else if (strcmp(w, "b") == 0) {
		o->ratio[OP_READ] = 0.95, o->ratio[OP_UPDATE] = 0.05;
	} else if (strcmp(w, "c") == 0) {
		o->ratio[OP_READ] = 1.0;
	} else if (strcmp(w, "d") == 0) {
		o->ratio[OP_READ] = 0.95, o->ratio[OP_INSERT] = 0.05;
		o->dist = KEYDIST_LATEST;
	} else if (strcmp(w, "e") == 0) {
		o->ratio[OP_SCAN] = 0.95, o->ratio[OP_INSERT] = 0.05;
	} else if (strcmp(w, "load") == 0) {
		o->ratio[OP_INSERT] = 1.0;
	} else
		return -1;
	o->workload = w;
	return 0;
}

static void usage(FILE *f)
{
	struct tips_listdb_config ldb_defaults;
	tips_listdb_config_init(&ldb_defaults);
	fprintf(f,
		"usage: tips-bench --index NAME [options]      one index, one workload\n"
		"       tips-bench compare [options]            several, repeated, with ratios\n"
		"       tips-bench --list                       the available indexes\n"
		"  --records N        records loaded first (default 1M)\n"
		"  --ops M            operations in the run phase (default 1M)\n"
		"  --threads T        worker threads (default 2); compare: a list (1,2) runs\n"
		"                     every configuration with each count\n"
		"  --workload W       a|b|c|d|e (YCSB as in TIPS Table 1) or load (inserts only)\n"
		"  --read R --insert R --update R --remove R --scan R   a mix (sums to 1)\n"
		"  --dist D           uniform|selfsimilar|zipfian|latest (default uniform)\n"
		"  --skew F           selfsimilar h (default 0.2), zipfian/latest theta (0.99)\n"
		"  --key-size B       8 or more (default 8); --key-prefix S for longer keys\n"
		"  --value-size B     (default 8); --scan-len N (default 100); --seed S (1)\n"
		"  --sample-ms MS     timeline interval (100); --latency-sample F (0.01)\n"
		"  --max-seconds S    stop the run phase after S seconds (default: no limit;\n"
		"                     compare: 60); the rate is over the operations done\n"
		"  --seconds S        duration mode: the run phase lasts S seconds and reports\n"
		"                     the rate; --ops then only bounds its inserts (pools are\n"
		"                     sized for --ops x the insert share; reaching it stops the\n"
		"                     run early, reported as insert_capped)\n"
		"  --no-settle        tips-*: start the run phase at once, without waiting until\n"
		"                     replay has applied the load (default: wait, and report it)\n"
		"  --lookup-via W     facade (default) or index: a read-only run of a tips-*\n"
		"                     index calls the index's own lookup, past tips_get, to\n"
		"                     measure the framework's share of a lookup\n"
		"  --upsert           inserts (load and run) and updates are blind puts: tips_put,\n"
		"                     tips_listdb_put, pmdk_hash_put; dram-*: insert, then update if\n"
		"                     the key exists\n"
		"  --batch N          commit writes in atomic batches of up to N (tips/batch.h):\n"
		"                     the load N inserts at a time, the run consecutive writes\n"
		"                     of a thread (tips-*; dram-*: one by one, as the baseline)\n"
		"  --pool PATH        tips-* pool (default a fresh file in /dev/shm, removed\n"
		"                     afterwards unless --keep); --pool-size SIZE\n"
		"  --prefault         fault every pool in at open (tips-*, listdb, pmdk-hash),\n"
		"                     so that a tmpfs pool is not zeroed page by page during\n"
		"                     the run (DAX PM needs no zeroing); the open takes longer\n"
		"  --json FILE        also write the results as one JSON document\n"
		"listdb (--index listdb; its pools are PATH, PATH.d1 ... for domains):\n"
		"  --listdb-memtable N          entries per MemTable (default %llu)\n"
		"  --listdb-cache N             lookup hash cache slots, 0: none (default\n"
		"                               expected keys / 8 + 1024)\n"
		"  --listdb-second-chance N     second-chance cache entries, 0: none (default\n"
		"                               expected keys / 16; 0 with no cache)\n"
		"  --listdb-compaction-threads N  background flush/compaction threads (1..8,\n"
		"                               default 1)\n"
		"  --listdb-domains N           NUMA domains, one pool each (1..8, default 1)\n"
		"  --listdb-oblivious           NUMA-oblivious skiplists (default braided)\n"
		"  --listdb-flush iul|wal       MemTable flush: index-unified logging (default)\n"
		"                               or copy out of a write-ahead log\n"
		"  --listdb-no-compaction       keep every L0 table (no Zipper compaction)\n"
		"  --listdb-settle              between load and run, wait until everything is\n"
		"                               merged into L1 (without compaction: flushed to\n"
		"                               L0); default: background work stays live, as\n"
		"                               the store is measured\n"
		"compare mode:\n"
		"  --indexes LIST     comma-separated index names, or all (default)\n"
		"  --workloads LIST   comma-separated workloads (default a,b,c,d,e)\n"
		"  --repeat R         runs of each configuration (default 3); medians reported\n"
		"  --baseline B       twin (default: tips-X and pmdk-X against dram-X) or an index\n"
		"                     name\n"
		"  --one-load         load each index once per thread count and repeat, then run\n"
		"                     the workloads one after another on it, in --workloads\n"
		"                     order (default: a fresh load for every workload's run)\n"
		SIZE_ARG_RULE
		"exit codes: 0 ok, 1 an operation failed (e.g. a loaded key not found), 2 usage,\n"
		"3 setup failed\n", (unsigned long long)ldb_defaults.memtable_entries);
}

/* Codes of the long options that have no one-letter code (above every char). */
enum {
	OPT_UPSERT = 1000, OPT_LDB_CACHE, OPT_LDB_SECOND, OPT_LDB_MEMTABLE, OPT_LDB_THREADS,
	OPT_LDB_DOMAINS, OPT_LDB_OBLIVIOUS, OPT_LDB_FLUSH, OPT_LDB_NO_COMPACTION, OPT_LDB_SETTLE,
	OPT_BATCH, OPT_SECONDS, OPT_LOOKUP_VIA, OPT_PREFAULT,
};

/* --threads: one count, or in compare a comma-separated list of them. */
static int parse_threads(const char *arg, struct options *o, bool compare)
{
	char *end;
	o->nthread_counts = 0;
	for (const char *p = arg;; p = end + 1) {
		unsigned long v = strtoul(p, &end, 10);
		if (end == p || v < 1 || v > MAX_THREADS || o->nthread_counts == 16)
			return -1;
		o->thread_counts[o->nthread_counts++] = (unsigned)v;
		if (*end != ',')
			break;
		if (!compare) {
			fprintf(stderr, "tips-bench: a list of thread counts is for compare\n");
			return -1;
		}
	}
	if (*end)
		return -1;
	o->threads = o->thread_counts[0];
	return 0;
}

/* An unsigned count in [lo, hi] (K/M/G suffixes: size_arg.h): 0 or -1. */
static int parse_count(const char *arg, uint64_t lo, uint64_t hi, uint64_t *out)
{
	uint64_t v;
	if (size_arg_count(arg, &v) || v < lo || v > hi)
		return -1;
	*out = v;
	return 0;
}

static int parse(int argc, char **argv, struct options *o, bool compare, bool *list)
{
	static const struct option longopts[] = {
		{ "index", 1, 0, 'i' }, { "records", 1, 0, 'N' }, { "ops", 1, 0, 'M' },
		{ "threads", 1, 0, 'T' }, { "workload", 1, 0, 'w' }, { "read", 1, 0, 'r' },
		{ "insert", 1, 0, 'I' }, { "update", 1, 0, 'u' }, { "remove", 1, 0, 'd' },
		{ "scan", 1, 0, 's' }, { "dist", 1, 0, 'D' }, { "skew", 1, 0, 'k' },
		{ "key-size", 1, 0, 'K' }, { "key-prefix", 1, 0, 'P' }, { "value-size", 1, 0, 'V' },
		{ "scan-len", 1, 0, 'L' }, { "seed", 1, 0, 'S' }, { "sample-ms", 1, 0, 'm' },
		{ "latency-sample", 1, 0, 'l' }, { "pool", 1, 0, 'p' }, { "pool-size", 1, 0, 'z' },
		{ "keep", 0, 0, 'e' }, { "json", 1, 0, 'j' }, { "list", 0, 0, 'x' },
		{ "max-seconds", 1, 0, 't' }, { "indexes", 1, 0, 'X' }, { "workloads", 1, 0, 'W' },
		{ "repeat", 1, 0, 'R' }, { "baseline", 1, 0, 'B' }, { "no-settle", 0, 0, 'n' },
		{ "one-load", 0, 0, 'O' },
		{ "upsert", 0, 0, OPT_UPSERT }, { "listdb-cache", 1, 0, OPT_LDB_CACHE },
		{ "listdb-second-chance", 1, 0, OPT_LDB_SECOND },
		{ "listdb-memtable", 1, 0, OPT_LDB_MEMTABLE },
		{ "listdb-compaction-threads", 1, 0, OPT_LDB_THREADS },
		{ "listdb-domains", 1, 0, OPT_LDB_DOMAINS },
		{ "listdb-oblivious", 0, 0, OPT_LDB_OBLIVIOUS },
		{ "listdb-flush", 1, 0, OPT_LDB_FLUSH },
		{ "listdb-no-compaction", 0, 0, OPT_LDB_NO_COMPACTION },
		{ "listdb-settle", 0, 0, OPT_LDB_SETTLE }, { "batch", 1, 0, OPT_BATCH },
		{ "seconds", 1, 0, OPT_SECONDS }, { "lookup-via", 1, 0, OPT_LOOKUP_VIA },
		{ "prefault", 0, 0, OPT_PREFAULT },
		{ "help", 0, 0, 'h' }, { 0, 0, 0, 0 },
	};
	struct tips_listdb_config *ldb = &o->listdb;
	bool mix = false, skew_set = false;
	int c;
	while ((c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
		uint64_t v = 0;
		char *end = NULL;
		if (c >= OPT_LDB_CACHE && c <= OPT_LDB_SETTLE)
			o->listdb_knob_set = true;
		if (c > 0 && c < 256 && !compare && strchr("XWRBO", c)) {
			fprintf(stderr, "tips-bench: %s is an option of compare mode\n", argv[optind - 1]);
			return -1;
		}
		if (c > 0 && c < 256 && compare && strchr("ipewx", c)) {
			fprintf(stderr, "tips-bench compare: %s does not apply (see --indexes, "
				"--workloads)\n", argv[optind - 1]);
			return -1;
		}
		switch (c) {
		case 'i': o->index = optarg; break;
		case 'N': if (size_arg_count(optarg, &v) || !v) return -1; o->records = v; break;
		case 'M': if (size_arg_count(optarg, &v)) return -1; o->ops = v; o->ops_set = true;
			break;
		case 'T': if (parse_threads(optarg, o, compare)) return -1; break;
		case OPT_SECONDS: o->seconds = strtod(optarg, &end);
			if (*end || !(o->seconds > 0)) return -1;
			break;
		case 'w': if (bench_set_workload(o, optarg)) return -1; break;
		case 'r': case 'I': case 'u': case 'd': case 's': {
			int op = c == 'r' ? OP_READ : c == 'I' ? OP_INSERT : c == 'u' ? OP_UPDATE
				 : c == 'd' ? OP_REMOVE : OP_SCAN;
			if (compare) {
				fprintf(stderr, "tips-bench compare: runs the workloads of "
					"--workloads, not a custom mix\n");
				return -1;
			}
			if (!mix)
				memset(o->ratio, 0, sizeof(o->ratio));
			mix = true;
			o->ratio[op] = strtod(optarg, &end);
			if (*end || o->ratio[op] < 0 || o->ratio[op] > 1) return -1;
			o->workload = "custom";
			break;
		}
		case 'D': if (keydist_parse(optarg, &o->dist)) return -1; break;
		case 'k': o->skew = strtod(optarg, &end); skew_set = true; if (*end) return -1; break;
		case 'K': o->key_size = (unsigned)strtoul(optarg, &end, 10);
			if (*end || o->key_size < 8 || o->key_size > MAX_KEY) return -1;
			break;
		case 'P': o->key_prefix = optarg; break;
		case 'V': o->value_size = (unsigned)strtoul(optarg, &end, 10);
			if (*end || o->value_size > MAX_VALUE) return -1;
			break;
		case 'L': o->scan_len = (unsigned)strtoul(optarg, &end, 10); if (*end) return -1; break;
		case 'S': o->seed = strtoull(optarg, &end, 0); if (*end) return -1; break;
		case 'm': o->sample_ms = (unsigned)strtoul(optarg, &end, 10);
			if (*end || !o->sample_ms) return -1;
			break;
		case 'l': o->latency_sample = strtod(optarg, &end);
			if (*end || o->latency_sample < 0 || o->latency_sample > 1) return -1;
			break;
		case 'n': o->no_settle = true; break;
		case 't': o->max_seconds = strtod(optarg, &end);
			if (*end || o->max_seconds < 0) return -1;
			break;
		case 'p': o->pool = optarg; break;
		case 'z': if (size_arg_bytes(optarg, &v)) return -1; o->pool_size = v; break;
		case 'e': o->keep = true; break;
		case 'j': o->json = optarg; break;
		case 'x': *list = true; break;
		case 'X': o->indexes = optarg; break;
		case 'W': o->workloads = optarg; break;
		case 'R': o->repeat = (unsigned)strtoul(optarg, &end, 10);
			if (*end || o->repeat < 1 || o->repeat > 100) return -1;
			break;
		case 'B': o->baseline = optarg; break;
		case 'O': o->one_load = true; break;
		case OPT_UPSERT: o->upsert = true; break;
		case OPT_PREFAULT: bench_set_prefault(1); break;
		case OPT_BATCH:
			if (parse_count(optarg, 1, 4096, &v)) return -1;
			o->batch = (unsigned)v;
			break;
		case OPT_LDB_CACHE:
			if (parse_count(optarg, 0, UINT64_MAX, &ldb->cache_entries)) return -1;
			o->listdb_cache_set = true;
			break;
		case OPT_LDB_SECOND:
			if (parse_count(optarg, 0, UINT64_MAX, &ldb->second_chance_entries))
				return -1;
			o->listdb_second_chance_set = true;
			break;
		case OPT_LDB_MEMTABLE:
			if (parse_count(optarg, 1, (1ull << 32) - 1, &ldb->memtable_entries))
				return -1;
			break;
		case OPT_LDB_THREADS:
			if (parse_count(optarg, 1, 8, &v)) return -1; /* tips_listdb_open's range */
			ldb->compaction_threads = (unsigned)v;
			break;
		case OPT_LDB_DOMAINS:
			if (parse_count(optarg, 1, TIPS_LISTDB_MAX_DOMAINS, &v)) return -1;
			ldb->domains = (unsigned)v;
			break;
		case OPT_LDB_OBLIVIOUS: ldb->braided = 0; break;
		case OPT_LDB_FLUSH:
			if (strcmp(optarg, "iul") == 0)
				ldb->flush_mode = TIPS_LISTDB_FLUSH_IUL;
			else if (strcmp(optarg, "wal") == 0)
				ldb->flush_mode = TIPS_LISTDB_FLUSH_WAL;
			else
				return -1;
			break;
		case OPT_LDB_NO_COMPACTION: ldb->compaction = 0; break;
		case OPT_LDB_SETTLE: o->listdb_settle = true; break;
		case OPT_LOOKUP_VIA:
			if (strcmp(optarg, "index") == 0)
				o->lookup_index = true;
			else if (strcmp(optarg, "facade") != 0)
				return -1;
			break;
		case 'h': usage(stdout); exit(EXIT_OK);
		default: return -1;
		}
	}
	if (optind != argc)
		return -1;
	if (!compare && o->listdb_knob_set && o->index &&
	    strcmp(o->index, BENCH_LISTDB_NAME) != 0) {
		fprintf(stderr, "tips-bench: the --listdb-* options apply to --index listdb only\n");
		return -1;
	}
	if (!skew_set)
		o->skew = o->dist == KEYDIST_SELFSIMILAR ? 0.2 : 0.99;
	double sum = 0;
	for (int i = 0; i < NOPS; i++)
		sum += o->ratio[i];
	if (fabs(sum - 1.0) > 1e-9) {
		fprintf(stderr, "tips-bench: the operation ratios sum to %g, not 1\n", sum);
		return -1;
	}
	/* Past tips_get, a lookup is right only while the index holds every write: after
	 * the settle, in a run that writes nothing. */
	if (o->lookup_index && (o->ratio[OP_READ] != 1.0 || o->no_settle || o->batch ||
				o->dist == KEYDIST_LATEST)) {
		fprintf(stderr, "tips-bench: --lookup-via index needs a read-only run (C), "
			"settled, without --batch or --dist latest\n");
		return -1;
	}
	return 0;
}

static void list_indexes(void)
{
	for (const char *const *n = bench_index_names(); *n; n++)
		printf("%-16s %s\n", *n, bench_index_concurrency(*n));
}

static void json_config(FILE *json, const struct options *o)
{
	fprintf(json, "{\"index\":\"%s\",\"config\":{\"records\":%llu,\"ops\":%llu,"
		"\"threads\":%u,\"workload\":\"%s\",\"dist\":\"%s\",\"skew\":%g,"
		"\"key_size\":%u,\"value_size\":%u,\"scan_len\":%u,\"seed\":%llu,"
		"\"max_seconds\":%g,\"seconds\":%g,\"upsert\":%s,\"batch\":%u,"
		"\"pool_dir\":",
		o->index, (unsigned long long)o->records, (unsigned long long)o->ops, o->threads,
		o->workload, keydist_name(o->dist), o->skew, o->key_size, o->value_size,
		o->scan_len, (unsigned long long)o->seed, o->max_seconds, o->seconds, o->upsert ? "true" : "false",
		o->batch);
	json_string(json, bench_pool_dir());
	fprintf(json, ",\"pool_pages\":\"%s\",\"prefault\":%s,\"ratios\":{", bench_pool_pages(),
		bench_prefault() ? "true" : "false");
	for (int i = 0; i < NOPS; i++)
		fprintf(json, "%s\"%s\":%g", i ? "," : "", op_names[i], o->ratio[i]);
	fprintf(json, "}},");
}

/*
 * Between the phases of a tips-* run: waits until replay has applied every write of the
 * load (no unapplied cache entry is left), so that the run phase measures its own
 * workload and not the load's backlog. Polls the counter every 2 ms (there is no
 * event to wait on); gives up after 10 minutes. Returns the wait in ms (0 for other
 * indexes).
 * listdb, only with --listdb-settle: tips_listdb_flush(db, 1), which returns once every
 * MemTable is flushed and every L0 table merged into L1 (with --listdb-no-compaction,
 * tips_listdb_flush(db, 0): flushed into L0). By default ListDB is measured with its
 * background work (flushes and compactions of the load) live in the run.
 */
static double settle(struct bench_index *idx, const struct options *o)
{
	if (idx->ldb) {
		if (!o->listdb_settle)
			return 0;
		uint64_t t0 = now_ns();
		int rc = tips_listdb_flush(idx->ldb, o->listdb.compaction ? 1 : 0);
		if (rc)
			fprintf(stderr, "tips-bench: tips_listdb_flush: %s (%s)\n", tips_strerror(rc),
				tips_errormsg());
		return (double)(now_ns() - t0) / 1e6;
	}
	if (!idx->db)
		return 0;
	uint64_t t0 = now_ns();
	for (;;) {
		struct tips_stats st;
		tips_stats(idx->db, &st);
		if (st.cache_unapplied == 0 || now_ns() - t0 > 600ull * 1000000000ull)
			break;
		struct timespec nap = { 0, 2 * 1000 * 1000 };
		nanosleep(&nap, NULL);
	}
	return (double)(now_ns() - t0) / 1e6;
}

/* The inserts a run phase of o's mix makes at most (--ops times its insert share). */
static uint64_t phase_inserts(const struct options *o)
{
	return (uint64_t)((double)o->ops * o->ratio[OP_INSERT]);
}

/* Sets up workload @workloads[@i] (@workloads NULL: o's own mix) in *@o, with the key
 * distribution the user chose (@dist): bench_set_workload gives d its own. */
static void select_workload(struct options *o, enum keydist dist,
			    const char *const *workloads, unsigned i)
{
	if (!workloads)
		return;
	o->dist = dist;
	bench_set_workload(o, workloads[i]);
}

/* The report and JSON document of the run phase just ended, and its brief. */
static void report_run(struct bench *b, const struct phase_result *load,
		       const struct run_summary *ls, const struct phase_result *run,
		       const struct run_summary *rs, double settle_ms, FILE *json,
		       struct run_brief *brief)
{
	const struct options *o = &b->o;
	if (!o->quiet) {
		print_phase("run", run, rs);
		if (rs->pm_counted)
			printf("run: fences/write %.3f, flushes/write %.3f, fences/read "
			       "%.3f, all-thread fences/write %.3f, PM bytes/op %.1f, ",
			       rs->fences_w, rs->lines_w, rs->fences_r, rs->fences_w_all,
			       rs->pm_bytes_per_op);
		else
			printf("run: fences and flushes n/a (libpmemobj persists through "
			       "libpmem, not counted), ");
		printf("throughput stddev %.1f%% of mean%s\n",
		       rs->timeline_mean ? 100 * rs->timeline_stddev / rs->timeline_mean : 0,
		       run->capped && o->seconds <= 0 ? " (stopped at --max-seconds)" : "");
		if (b->idx.ldb)
			print_listdb(run);
	}
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	if (json) {
		json_config(json, o);
		json_phase(json, b, "load", load, ls);
		fprintf(json, ",");
		json_phase(json, b, "run", run, rs);
		if (b->idx.ldb)
			json_listdb(json, o, load, run);
		/* With the index null, the run's worker CPU is the harness's own cost. */
		if (strcmp(o->index, BENCH_NULL_NAME) == 0)
			fprintf(json, ",\"harness_ns_per_op\":%.1f", rs->cpu_app);
		else
			fprintf(json, ",\"harness_ns_per_op\":null");
		fprintf(json, ",\"settle_ms\":%.1f,\"peak_rss_kib\":%ld}\n", settle_ms,
			ru.ru_maxrss);
	}
	if (!o->quiet)
		printf("peak resident memory %ld KiB\n", ru.ru_maxrss);
	if (brief)
		*brief = (struct run_brief){
			.status = EXIT_OK, .capped = run->capped,
			.load_ops_per_sec = load->ops_per_sec, .run_ops_per_sec = run->ops_per_sec,
			.p50 = (double)histogram_quantile(&rs->lat, 0.5),
			.p99 = (double)histogram_quantile(&rs->lat, 0.99),
			.p999 = (double)histogram_quantile(&rs->lat, 0.999),
			.fences_w = rs->fences_w, .fences_r = rs->fences_r,
			.cpu_app = rs->cpu_app, .cpu_backend = rs->cpu_backend,
			.cpu_role = { rs->cpu_role[0], rs->cpu_role[1], rs->cpu_role[2],
				      rs->cpu_role[3] },
			.stall_intervals = rs->stalls, .stall_longest = rs->longest_stall,
			.wp50 = (double)histogram_quantile(&rs->wlat, 0.5),
			.wp999 = (double)histogram_quantile(&rs->wlat, 0.999),
			.threads = o->threads,
			.pm_counted = bench_index_pm_counted(&b->idx),
			.peak_rss_kib = ru.ru_maxrss,
		};
}

int bench_sequence(const struct options *opt, const char *const *workloads, unsigned n,
		   FILE *const *json, struct run_brief *brief)
{
	for (unsigned i = 0; brief && i < n; i++)
		brief[i] = (struct run_brief){ .status = EXIT_LOST };
	struct bench *b = calloc(1, sizeof(*b));
	if (!b) {
		fprintf(stderr, "tips-bench: out of memory\n");
		return EXIT_SETUP;
	}
	struct options *o = &b->o;
	*o = *opt;
	/* Pools and tables are sized for the inserts --ops allows in every run phase; in
	 * duration mode each phase also stops inserting there (it reports so). */
	const enum keydist dist = o->dist;
	bool zipf_needed = false;
	uint64_t inserts = 0;
	for (unsigned i = 0; i < n; i++) {
		select_workload(o, dist, workloads, i);
		zipf_needed |= o->dist == KEYDIST_ZIPFIAN || o->dist == KEYDIST_LATEST;
		inserts += phase_inserts(o);
	}
	if (zipf_needed && zipf_init(&b->zipf, o->records, o->skew)) {
		fprintf(stderr, "tips-bench: zipfian skew must be in (0, 1)\n");
		free(b);
		return EXIT_USAGE;
	}
	for (unsigned i = 0; i < n; i++) {
		select_workload(o, dist, workloads, i);
		struct keygen probe;
		if (keygen_init(&probe, o->dist, o->skew, &b->zipf, 0, 0)) {
			fprintf(stderr, "tips-bench: skew %g does not fit %s\n", o->skew,
				keydist_name(o->dist));
			free(b);
			return EXIT_USAGE;
		}
	}
	uint64_t expected = o->records + inserts;
	int rc = bench_index_open(&b->idx, o->index, o->pool, o->pool_size, expected, o->keep);
	if (rc) {
		fprintf(stderr, "tips-bench: cannot open %s: %s\n", o->index, tips_errormsg());
		free(b);
		return EXIT_SETUP;
	}
	if (o->batch && !bench_index_has_batches(&b->idx)) {
		fprintf(stderr, "tips-bench: %s has no write batches (--batch applies to tips-*, "
			"dram-* and listdb)\n", o->index);
		bench_index_close(&b->idx);
		free(b);
		return EXIT_SETUP;
	}
	atomic_store(&b->next_insert, o->records);
	select_workload(o, dist, workloads, 0);
	if (!o->quiet) {
		if (o->seconds > 0)
			printf("tips-bench: %s, %llu records, run for %g s (at most %llu inserts), "
			       "%u threads", o->index, (unsigned long long)o->records, o->seconds,
			       (unsigned long long)inserts, o->threads);
		else
			printf("tips-bench: %s, %llu records, %llu ops, %u threads", o->index,
			       (unsigned long long)o->records, (unsigned long long)o->ops,
			       o->threads);
		printf(", workload %s, %s keys (%u B), values %u B, seed %llu\n", o->workload,
		       keydist_name(o->dist), o->key_size, o->value_size,
		       (unsigned long long)o->seed);
	}
	struct phase_result load, run;
	struct run_summary *ls = malloc(sizeof(*ls)), *rs = malloc(sizeof(*rs));
	if (!ls || !rs) {
		fprintf(stderr, "tips-bench: out of memory\n");
		exit(EXIT_SETUP);
	}
	int failed = run_phase(b, 0, &load);
	summarize(b, &load, ls);
	if (!o->quiet)
		print_phase("load", &load, ls);
	/* Each run phase in turn, on what the load and the runs before it left. */
	for (unsigned i = 0; i < n && !failed; i++) {
		select_workload(o, dist, workloads, i);
		if (!o->quiet && i > 0)
			printf("then workload %s\n", o->workload);
		double settle_ms = o->no_settle ? 0 : settle(&b->idx, o);
		if (!o->quiet && b->idx.db && !o->no_settle)
			printf("%s: replay applied the backlog %.0f ms after the last insert\n",
			       i ? "run" : "load", settle_ms);
		if (!o->quiet && b->idx.ldb && o->listdb_settle && !o->no_settle)
			printf("%s: every MemTable flushed%s %.0f ms after the last insert\n",
			       i ? "run" : "load", o->listdb.compaction ? " and merged into L1"
									: " into L0", settle_ms);
		/* Each run phase has the insert bound of its own workload. */
		b->insert_limit = o->seconds > 0 ? atomic_load(&b->next_insert) + phase_inserts(o)
						 : UINT64_MAX;
		atomic_store(&b->time_up, 0);
		atomic_store(&b->insert_capped, 0);
		memset(&run, 0, sizeof(run));
		failed = run_phase(b, 1, &run);
		/* The ids a capped phase drew at or past its bound were never inserted: the
		 * next phase inserts them (so that `latest` never reads a missing key). */
		if (atomic_load(&b->next_insert) > b->insert_limit)
			atomic_store(&b->next_insert, b->insert_limit);
		summarize(b, &run, rs);
		if (!failed)
			report_run(b, &load, ls, &run, rs, settle_ms, json ? json[i] : NULL,
				   brief ? &brief[i] : NULL);
	}
	bench_index_close(&b->idx);
	free(ls);
	free(rs);
	free(b);
	return failed ? EXIT_LOST : EXIT_OK;
}

int bench_single(const struct options *o, FILE *json, struct run_brief *brief)
{
	return bench_sequence(o, NULL, 1, &json, brief);
}

int main(int argc, char **argv)
{
	struct options o = { .records = 1000000, .ops = 1000000, .threads = 2, .key_size = 8,
			     .value_size = 8, .scan_len = 100, .seed = 1, .sample_ms = 100,
			     .latency_sample = 0.01, .dist = KEYDIST_UNIFORM, .repeat = 3 };
	bench_set_workload(&o, "a");
	tips_listdb_config_init(&o.listdb);
	bool compare = argc > 1 && strcmp(argv[1], "compare") == 0;
	if (compare) {
		argc--, argv++;
		o.max_seconds = 60;
	}
	bool list = false;
	if (parse(argc, argv, &o, compare, &list)) {
		usage(stderr);
		return EXIT_USAGE;
	}
	if (list) {
		list_indexes();
		return EXIT_OK;
	}
	bench_listdb_configure(&o.listdb); /* compare's children inherit it through fork */
	if (compare)
		return bench_compare(&o);
	if (!o.index) {
		fprintf(stderr, "tips-bench: --index NAME is required (see --list)\n");
		return EXIT_USAGE;
	}
	FILE *json = NULL;
	if (o.json && !(json = fopen(o.json, "w"))) {
		fprintf(stderr, "tips-bench: cannot write %s: %s\n", o.json, strerror(errno));
		return EXIT_SETUP;
	}
	int rc = bench_single(&o, json, NULL);
	if (json && fclose(json)) {
		fprintf(stderr, "tips-bench: writing %s failed: %s\n", o.json, strerror(errno));
		return rc ? rc : EXIT_SETUP;
	}
	if (json && rc)
		unlink(o.json); /* no half a document */
	return rc;
}
