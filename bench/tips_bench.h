/*
 * tips_bench.h - what the two halves of tips-bench share: the options of a run, one
 * run (tips_bench.c: load and run phases, report, JSON) and its brief result, and the
 * compare mode (bench_compare.c), which repeats runs of several indexes and workloads in
 * child processes and reports medians and ratios.
 */
#ifndef TIPS_BENCH_TIPS_BENCH_H
#define TIPS_BENCH_TIPS_BENCH_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <tips/listdb.h>

#include "keygen.h"

enum { EXIT_OK = 0, EXIT_LOST = 1, EXIT_USAGE = 2, EXIT_SETUP = 3 };
enum op { OP_READ, OP_INSERT, OP_UPDATE, OP_REMOVE, OP_SCAN, NOPS };

#define MAX_THREADS 256

struct options {
	const char *index, *pool, *json, *workload, *key_prefix;
	uint64_t records, ops, pool_size, seed;
	unsigned threads, key_size, value_size, scan_len, sample_ms;
	double ratio[NOPS], skew, latency_sample;
	double max_seconds; /* run phase stops after this long (0: no limit) */
	double seconds;     /* --seconds: duration mode, the run phase lasts this long and
			       --ops only bounds its inserts (0: --ops operations) */
	bool ops_set;       /* the user gave --ops */
	enum keydist dist;
	bool keep, quiet;
	bool no_settle; /* start the run phase without waiting for the load's replay */
	bool lookup_index; /* --lookup-via index: C calls a tips-* index's lookup directly */
	bool upsert;    /* inserts and updates are blind puts (bench_put) */
	unsigned batch; /* --batch: writes per batch commit (0: single writes) */
	/* listdb (--listdb-*): its knobs, from tips_listdb_config_init() and the options (handed
	 * to bench_listdb_configure() before any run); which of them the user set, for the
	 * JSON; and whether to wait between the phases for everything to reach L1. */
	struct tips_listdb_config listdb;
	bool listdb_cache_set, listdb_second_chance_set, listdb_knob_set;
	bool listdb_settle;
	/* compare mode only */
	const char *indexes, *workloads, *baseline;
	unsigned repeat;
	unsigned thread_counts[16], nthread_counts; /* --threads 1,2 */
	bool one_load; /* --one-load: one load per index, thread count and repeat, then
			  every workload's run phase on it (bench_sequence) */
};

/* The store's background threads, recognised by the names they give themselves
 * (pthread_setname_np); reclamation runs on the persist thread and is counted there. */
enum bg_role { ROLE_PERSIST, ROLE_REPLAY, ROLE_GC, ROLE_OTHER, NROLES };

/* What compare needs of one run (the full record is the run's JSON). */
struct run_brief {
	int status; /* the run's exit code */
	bool capped; /* the run phase hit max_seconds or its insert bound */
	unsigned threads;
	double load_ops_per_sec, run_ops_per_sec;
	double p50, p99, p999;     /* run phase latency, ns */
	double fences_w, fences_r; /* run phase, sampled operations */
	double cpu_app, cpu_backend; /* run phase CPU ns per operation: the worker threads,
					everything else (the store's background) */
	double cpu_role[NROLES];     /* cpu_backend by thread role (bg_role) */
	double stall_intervals, stall_longest; /* timeline intervals below half the median,
						  the longest run of them */
	double wp50, wp999;        /* run phase write latency, ns */
	bool pm_counted;           /* false: fences unavailable (pmdk-*), not 0 */
	long peak_rss_kib;
};

/* Sets the ratios (and for d the latest distribution) of YCSB workload @w (a-e, load).
 * Returns 0, or -1 for an unknown name. */
int bench_set_workload(struct options *o, const char *w);

/* One load + run of o->index. Prints the human report unless o->quiet; writes the
 * JSON document to @json if not NULL; fills @brief if not NULL. Returns an exit code. */
int bench_single(const struct options *o, FILE *json, struct run_brief *brief);

/* One load of o->index, then a run phase of each of the @n workloads named in
 * @workloads (a-e, load), one after another on what the load and the runs before left
 * (YCSB's own order of work: load once, then run the workloads). Run i writes its
 * document (the shared load's figures, then its own run's) to json[i] and fills
 * brief[i]; a run that did not complete leaves brief[i].status EXIT_LOST, and the runs
 * after a failed one are not made. @workloads NULL: one run of o's own mix (@n 1).
 * Returns an exit code. */
int bench_sequence(const struct options *o, const char *const *workloads, unsigned n,
		   FILE *const *json, struct run_brief *brief);

/* `tips-bench compare`: runs every index of o->indexes on every workload of
 * o->workloads o->repeat times. Returns an exit code. */
int bench_compare(const struct options *o);

#endif /* TIPS_BENCH_TIPS_BENCH_H */
