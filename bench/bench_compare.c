/*
 * bench_compare.c - `tips-bench compare`: runs every index of --indexes on every
 * workload of --workloads, --repeat times, and reports for each configuration the
 * median throughput and its ratio against a baseline measured in the same session:
 * each tips-X against its volatile twin dram-X (--baseline twin, the default), or every
 * index against one named index. pmdk-X (hash.c's table on libpmemobj transactions)
 * has the same twin as tips-X: dram-X, the volatile original both make persistent, so
 * the two ratios side by side are the costs of the two conversions (and --baseline
 * pmdk-hash gives tips-hash's speedup over PMDK-HT, the paper's comparison). Fences
 * and flushes of pmdk-X are not counted (libpmemobj flushes through libpmem): the
 * table shows "-", the JSON null.
 *
 * Each run is a child process (fork, no exec): a fresh heap, a fresh pool, its own peak
 * resident memory, and a crash or a lost key in one run cannot touch the others. The
 * child sends its brief result and its full JSON document back through a pipe. Runs
 * are interleaved (repeat, then workload, then index), so a slow spell of this shared
 * machine falls on every index alike instead of on one index's runs. With --one-load a
 * child loads an index once and runs every workload on it in --workloads order
 * (bench_sequence), sending one brief and document per workload: at 8M records a
 * load takes 4 to 30 s, against 2 s for a duration-mode run.
 *
 * With --threads 1,2 every configuration runs with each thread count (baselines are
 * taken at the same count), side by side in the table and the JSON. Workload E (scans)
 * runs only on ordered indexes: a hash index (name ending in hash or clht) has no key
 * order to scan, so its E cell is listed as not applicable and not run.
 *
 * Output: a table on stdout; with --json, one document holding the configuration,
 * for each (index, workload) the per-run figures, their medians and the ratio, and
 * every run's own document under "runs".
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <tips/tips.h>

#include "bench_index.h"
#include "json_str.h"
#include "tips_bench.h"

#define MAX_NAMES 64

struct cell {
	const char *index, *workload;
	unsigned threads;
	bool not_applicable; /* E on a hash index: listed, not run */
	int baseline; /* the cell this one is compared with, -1 if none */
	unsigned runs;
	struct run_brief brief[100];
	char *json[100];
	int failed; /* runs that did not complete */
};

struct session {
	const struct options *o;
	const char *index[MAX_NAMES], *workload[MAX_NAMES];
	unsigned nindex, nworkload;
	unsigned nthreads;
	struct cell *cell; /* [thread count][workload][index] */
	char *lists[2];    /* the copies split() cut the names from */
};

/* Splits @list at commas into @out (pointers into a copy, stored in *@copy_out for the
 * caller to free). Returns the count or -1. */
static int split(const char *list, const char **out, unsigned max, char **copy_out)
{
	char *copy = strdup(list), *save = NULL;
	unsigned n = 0;
	*copy_out = copy;
	if (!copy)
		return -1;
	for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		if (n == max)
			return -1;
		out[n++] = t;
	}
	return (int)n;
}

static int find(const char *const *names, unsigned n, const char *name)
{
	for (unsigned i = 0; i < n; i++)
		if (strcmp(names[i], name) == 0)
			return (int)i;
	return -1;
}

/* Adds @name to the index list unless present; returns its position or -1. */
static int add_index(struct session *s, const char *name)
{
	int i = find(s->index, s->nindex, name);
	if (i >= 0)
		return i;
	if (s->nindex == MAX_NAMES)
		return -1;
	s->index[s->nindex] = name;
	return (int)s->nindex++;
}

/* The twin of tips-X and of pmdk-X is dram-X (its registered name); other indexes
 * have none. */
static const char *twin_of(const char *name)
{
	char twin[128];
	if (strncmp(name, "tips-", 5) != 0 && strncmp(name, "pmdk-", 5) != 0)
		return NULL;
	snprintf(twin, sizeof(twin), "dram-%s", name + 5);
	const struct tips_index_ops *ops = tips_index_find(twin);
	return ops ? ops->name : NULL;
}

/* False for the hash indexes (tips-, dram-, pmdk-hash, lfhash, clht): their scans have
 * no key order, so workload E means nothing for them. */
static bool ordered(const char *name)
{
	size_t n = strlen(name);
	return !(n >= 4 && strcmp(name + n - 4, "hash") == 0) &&
	       !(n >= 4 && strcmp(name + n - 4, "clht") == 0);
}

static unsigned ncells(const struct session *s)
{
	return s->nthreads * s->nworkload * s->nindex;
}

static int plan(struct session *s)
{
	const struct options *o = s->o;
	if (!o->indexes || strcmp(o->indexes, "all") == 0) {
		for (const char *const *n = bench_index_names(); *n && s->nindex < MAX_NAMES; n++)
			s->index[s->nindex++] = *n;
	} else {
		int n = split(o->indexes, s->index, MAX_NAMES, &s->lists[0]);
		if (n <= 0) {
			fprintf(stderr, "tips-bench compare: --indexes needs names\n");
			return -1;
		}
		s->nindex = (unsigned)n;
	}
	for (unsigned i = 0; i < s->nindex; i++)
		if (!bench_index_concurrency(s->index[i])) {
			fprintf(stderr, "tips-bench compare: no index named '%s' (see --list)\n",
				s->index[i]);
			return -1;
		}
	int n = split(o->workloads ? o->workloads : "a,b,c,d,e", s->workload, MAX_NAMES,
		      &s->lists[1]);
	if (n <= 0) {
		fprintf(stderr, "tips-bench compare: --workloads needs names\n");
		return -1;
	}
	s->nworkload = (unsigned)n;
	for (unsigned w = 0; w < s->nworkload; w++) {
		struct options probe = *o;
		if (bench_set_workload(&probe, s->workload[w])) {
			fprintf(stderr, "tips-bench compare: unknown workload '%s' (a-e or load)\n",
				s->workload[w]);
			return -1;
		}
	}
	/* Baselines: added to the list if missing. */
	const char *base = o->baseline ? o->baseline : "twin";
	bool twin = strcmp(base, "twin") == 0;
	if (!twin && !bench_index_concurrency(base)) {
		fprintf(stderr, "tips-bench compare: no baseline index named '%s'\n", base);
		return -1;
	}
	int base_pos[MAX_NAMES];
	unsigned listed = s->nindex;
	for (unsigned i = 0; i < listed; i++) {
		const char *b = twin ? twin_of(s->index[i]) : base;
		base_pos[i] = b ? add_index(s, b) : -1;
	}
	for (unsigned i = listed; i < s->nindex; i++)
		base_pos[i] = twin ? -1 : find(s->index, s->nindex, base);
	s->nthreads = o->nthread_counts ? o->nthread_counts : 1;
	s->cell = calloc((size_t)s->nthreads * s->nworkload * s->nindex, sizeof(*s->cell));
	if (!s->cell)
		return -1;
	for (unsigned t = 0; t < s->nthreads; t++)
		for (unsigned w = 0; w < s->nworkload; w++)
			for (unsigned i = 0; i < s->nindex; i++) {
				unsigned row = (t * s->nworkload + w) * s->nindex;
				struct cell *c = &s->cell[row + i];
				c->index = s->index[i];
				c->workload = s->workload[w];
				c->threads = o->nthread_counts ? o->thread_counts[t] : o->threads;
				c->not_applicable = strcmp(c->workload, "e") == 0 &&
						    !ordered(c->index);
				c->baseline = base_pos[i] < 0 || base_pos[i] == (int)i
						      ? -1 : (int)(row + (unsigned)base_pos[i]);
			}
	return 0;
}

/* Reads everything from @fd into a malloc'd buffer; *len gets its length. */
static char *read_all(int fd, size_t *len)
{
	size_t cap = 1 << 16, n = 0;
	char *buf = malloc(cap);
	while (buf) {
		if (n == cap && !(buf = realloc(buf, cap *= 2)))
			break;
		ssize_t r = read(fd, buf + n, cap - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	*len = n;
	return buf;
}

static int write_all(int fd, const void *p, size_t len)
{
	const char *c = p;
	while (len) {
		ssize_t w = write(fd, c, len);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		c += w, len -= (size_t)w;
	}
	return 0;
}

/* Records a run of @c that did not complete. */
static void run_failed(struct cell *c, const char *why)
{
	fprintf(stderr, "tips-bench compare: %s on %s %s\n", c->index, c->workload, why);
	c->brief[c->runs] = (struct run_brief){ .status = EXIT_LOST };
	c->failed++;
	c->runs++;
}

/*
 * One load and the runs of the @n cells @c (one index and thread count; one cell, or
 * with --one-load every workload's) in a child process; fills each cell's next slot.
 * The child sends, for each run in order, its brief, the length of its document and
 * the document (length 0: the run did not complete).
 */
static void run_child(struct session *s, struct cell *const *c, unsigned n)
{
	struct options o = *s->o;
	o.index = c[0]->index;
	o.threads = c[0]->threads;
	o.json = NULL;
	o.quiet = true;
	const char *workload[MAX_NAMES];
	for (unsigned k = 0; k < n; k++)
		workload[k] = c[k]->workload;
	int fd[2];
	if (pipe(fd)) {
		perror("tips-bench compare: pipe");
		exit(EXIT_SETUP);
	}
	fflush(stdout);
	fflush(stderr);
	pid_t pid = fork();
	if (pid < 0) {
		perror("tips-bench compare: fork");
		exit(EXIT_SETUP);
	}
	if (pid == 0) {
		close(fd[0]);
		char *doc[MAX_NAMES] = { NULL };
		size_t len[MAX_NAMES] = { 0 };
		FILE *m[MAX_NAMES];
		struct run_brief brief[MAX_NAMES];
		for (unsigned k = 0; k < n; k++)
			if (!(m[k] = open_memstream(&doc[k], &len[k])))
				_exit(EXIT_SETUP);
		int rc = bench_sequence(&o, workload, n, m, brief);
		for (unsigned k = 0; k < n; k++) {
			if (fclose(m[k]))
				_exit(EXIT_SETUP);
			uint64_t l = brief[k].status == EXIT_OK ? len[k] : 0;
			if (write_all(fd[1], &brief[k], sizeof(brief[k])) ||
			    write_all(fd[1], &l, sizeof(l)) || write_all(fd[1], doc[k], l))
				_exit(EXIT_SETUP);
		}
		_exit(rc);
	}
	close(fd[1]);
	size_t len;
	char *got = read_all(fd[0], &len);
	close(fd[0]);
	int status;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	char why[64];
	if (WIFSIGNALED(status))
		snprintf(why, sizeof(why), "died of signal %d", WTERMSIG(status));
	else
		snprintf(why, sizeof(why), "failed (exit %d)",
			 WIFEXITED(status) ? WEXITSTATUS(status) : -1);
	size_t at = 0;
	for (unsigned k = 0; k < n; k++) {
		struct run_brief b;
		uint64_t l = 0;
		bool framed = got && len - at >= sizeof(b) + sizeof(l);
		if (framed) {
			memcpy(&b, got + at, sizeof(b));
			memcpy(&l, got + at + sizeof(b), sizeof(l));
			at += sizeof(b) + sizeof(l);
			framed = l <= len - at;
		}
		if (!framed) { /* the child died mid-way: nothing after this can be read */
			run_failed(c[k], why);
			at = len;
			continue;
		}
		if (b.status != EXIT_OK || l == 0) { /* sent as not completed */
			run_failed(c[k], why);
			at += l;
			continue;
		}
		char *doc = malloc(l);
		if (!doc) {
			run_failed(c[k], "lost its document (out of memory)");
			at += l;
			continue;
		}
		memcpy(doc, got + at, l);
		doc[l - 1] = '\0'; /* drops the document's newline */
		at += l;
		c[k]->brief[c[k]->runs] = b;
		c[k]->json[c[k]->runs++] = doc;
	}
	free(got);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

/* The completed runs' values of a run_brief field (@field: its offset) into @v; returns
 * how many. */
static unsigned completed(const struct cell *c, size_t field, double *v)
{
	unsigned n = 0;
	for (unsigned r = 0; r < c->runs; r++)
		if (c->brief[r].status == EXIT_OK)
			v[n++] = *(const double *)((const char *)&c->brief[r] + field);
	return n;
}

/* The median of the completed runs' @field. */
static double median(const struct cell *c, size_t field)
{
	double v[100];
	unsigned n = completed(c, field, v);
	if (!n)
		return 0;
	qsort(v, n, sizeof(v[0]), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

#define MEDIAN(c, f) median((c), offsetof(struct run_brief, f))

/* False if a completed run could not count its fences (pmdk-*). */
static bool pm_counted(const struct cell *c)
{
	for (unsigned r = 0; r < c->runs; r++)
		if (c->brief[r].status == EXIT_OK && !c->brief[r].pm_counted)
			return false;
	return true;
}

static bool any_capped(const struct cell *c)
{
	for (unsigned r = 0; r < c->runs; r++)
		if (c->brief[r].capped)
			return true;
	return false;
}

/* The duration of each run phase, in words, for the table's title. */
static void print_title(const struct session *s)
{
	const struct options *o = s->o;
	printf("\ntips-bench compare: %llu records, ", (unsigned long long)o->records);
	if (o->seconds > 0)
		printf("run phases of %g s (at most %llu ops' inserts)", o->seconds,
		       (unsigned long long)o->ops);
	else
		printf("%llu ops (run phase capped at %g s)", (unsigned long long)o->ops,
		       o->max_seconds);
	printf(", threads");
	for (unsigned t = 0; t < s->nthreads; t++)
		printf("%s%u", t ? "," : " ", s->cell[t * s->nworkload * s->nindex].threads);
	printf(", %s keys (%u B), values %u B, medians of %u runs%s", keydist_name(o->dist),
	       o->key_size, o->value_size, o->repeat, o->upsert ? ", writes are puts" : "");
	if (o->batch)
		printf(", write batches of up to %u", o->batch);
	putchar('\n');
}

static void print_row(const struct session *s, const struct cell *c)
{
	if (c->not_applicable) {
		printf("%-4s %3u %-16s %12s %12s  n/a: a hash index has no key order to scan\n",
		       c->workload, c->threads, c->index, "-", "-");
		return;
	}
	double run = MEDIAN(c, run_ops_per_sec);
	char ratio[32] = "-";
	const char *vs = "";
	if (c->baseline >= 0) {
		const struct cell *b = &s->cell[c->baseline];
		double base = MEDIAN(b, run_ops_per_sec);
		if (base > 0 && run > 0)
			snprintf(ratio, sizeof(ratio), "%.2fx", run / base);
		vs = b->index;
	}
	char fw[16] = "-", fr[16] = "-";
	if (pm_counted(c)) {
		snprintf(fw, sizeof(fw), "%.3f", MEDIAN(c, fences_w));
		snprintf(fr, sizeof(fr), "%.3f", MEDIAN(c, fences_r));
	}
	char cpu[32], roles[48], stalls[24], wlat[32] = "-";
	snprintf(cpu, sizeof(cpu), "%.0f+%.0f", MEDIAN(c, cpu_app), MEDIAN(c, cpu_backend));
	snprintf(roles, sizeof(roles), "%.0f/%.0f/%.0f/%.0f", MEDIAN(c, cpu_role[ROLE_PERSIST]),
		 MEDIAN(c, cpu_role[ROLE_REPLAY]), MEDIAN(c, cpu_role[ROLE_GC]),
		 MEDIAN(c, cpu_role[ROLE_OTHER]));
	snprintf(stalls, sizeof(stalls), "%.0f (%.0f)", MEDIAN(c, stall_intervals),
		 MEDIAN(c, stall_longest));
	if (MEDIAN(c, wp50) > 0)
		snprintf(wlat, sizeof(wlat), "%.0f/%.0f", MEDIAN(c, wp50), MEDIAN(c, wp999));
	printf("%-4s %3u %-16s %12.4g %12.4g %7s %-12s %9.0f %8s %8s %11s %19s %9s %17s%s%s\n",
	       c->workload, c->threads, c->index, MEDIAN(c, load_ops_per_sec) / 1e6, run / 1e6,
	       ratio, vs, MEDIAN(c, p99), fw, fr, cpu, roles, stalls, wlat,
	       any_capped(c) ? "  (capped)" : "", c->failed ? "  FAILED RUNS" : "");
}

/* One block per workload, its rows by thread count then index: both set-ups side by
 * side. */
static void print_table(const struct session *s)
{
	print_title(s);
	printf("%-4s %3s %-16s %12s %12s %7s %-12s %9s %8s %8s %11s %19s %9s %17s\n", "wl", "thr",
	       "index", "load Mops/s", "run Mops/s", "ratio", "vs", "p99 ns", "fence/wr",
	       "fence/rd", "cpu ns/op", "bg pers/repl/gc/oth", "stalls", "write p50/p99.9");
	for (unsigned w = 0; w < s->nworkload; w++)
		for (unsigned t = 0; t < s->nthreads; t++)
			for (unsigned i = 0; i < s->nindex; i++)
				print_row(s, &s->cell[(t * s->nworkload + w) * s->nindex + i]);
}

/* "name":{"median":M,"runs":[...]} of a run_brief field; @sep goes before it. */
static void json_runs(FILE *f, const char *sep, const struct cell *c, const char *name,
		      size_t field)
{
	double v[100];
	unsigned n = completed(c, field, v);
	fprintf(f, "%s\"%s\":{\"median\":%.10g,\"runs\":[", sep, name, median(c, field));
	for (unsigned i = 0; i < n; i++)
		fprintf(f, "%s%.10g", i ? "," : "", v[i]);
	fprintf(f, "]}");
}

#define JSON_RUNS(f, sep, c, name, fld) json_runs((f), (sep), (c), (name), offsetof(struct run_brief, fld))

static int write_json(const struct session *s)
{
	const struct options *o = s->o;
	FILE *f = fopen(o->json, "w");
	if (!f) {
		fprintf(stderr, "tips-bench compare: cannot write %s: %s\n", o->json, strerror(errno));
		return -1;
	}
	fprintf(f, "{\"kind\":\"tips-bench-compare\",\"config\":{\"records\":%llu,\"ops\":%llu,"
		"\"threads\":%u,\"dist\":\"%s\",\"skew\":%g,\"key_size\":%u,\"value_size\":%u,"
		"\"scan_len\":%u,\"seed\":%llu,\"repeat\":%u,\"max_seconds\":%g,\"seconds\":%g,"
		"\"baseline\":\"%s\",\"upsert\":%s,\"batch\":%u,\"one_load\":%s,\"pool_dir\":",
		(unsigned long long)o->records, (unsigned long long)o->ops, s->cell[0].threads,
		keydist_name(o->dist), o->skew, o->key_size, o->value_size, o->scan_len,
		(unsigned long long)o->seed, o->repeat, o->max_seconds, o->seconds,
		o->baseline ? o->baseline : "twin", o->upsert ? "true" : "false", o->batch,
		o->one_load ? "true" : "false");
	json_string(f, bench_pool_dir());
	fprintf(f, ",\"pool_pages\":\"%s\",\"prefault\":%s,\"thread_counts\":[", bench_pool_pages(),
		bench_prefault() ? "true" : "false");
	for (unsigned t = 0; t < s->nthreads; t++)
		fprintf(f, "%s%u", t ? "," : "", s->cell[t * s->nworkload * s->nindex].threads);
	fprintf(f, "]},\"results\":[");
	for (unsigned k = 0; k < ncells(s); k++) {
		const struct cell *c = &s->cell[k];
		fprintf(f, "%s{\"index\":\"%s\",\"workload\":\"%s\",\"threads\":%u,"
			"\"applicable\":%s,\"baseline\":", k ? "," : "", c->index, c->workload,
			c->threads, c->not_applicable ? "false" : "true");
		if (c->not_applicable) { /* listed, not run: nothing measured */
			fprintf(f, "null,\"ratio\":null,\"load_ratio\":null,\"completed\":0,"
				"\"failed\":0,\"capped\":false,\"runs\":[]}");
			continue;
		}
		double run = MEDIAN(c, run_ops_per_sec);
		if (c->baseline >= 0) {
			const struct cell *b = &s->cell[c->baseline];
			double base = MEDIAN(b, run_ops_per_sec), lbase = MEDIAN(b, load_ops_per_sec);
			fprintf(f, "\"%s\",\"ratio\":%.4f,\"load_ratio\":%.4f,", b->index,
				base > 0 ? run / base : 0,
				lbase > 0 ? MEDIAN(c, load_ops_per_sec) / lbase : 0);
		} else {
			fprintf(f, "null,\"ratio\":null,\"load_ratio\":null,");
		}
		fprintf(f, "\"completed\":%u,\"failed\":%d,\"capped\":%s,", c->runs - c->failed,
			c->failed, any_capped(c) ? "true" : "false");
		JSON_RUNS(f, "", c, "load_ops_per_sec", load_ops_per_sec);
		JSON_RUNS(f, ",", c, "run_ops_per_sec", run_ops_per_sec);
		JSON_RUNS(f, ",\"latency_ns\":{", c, "p50", p50);
		JSON_RUNS(f, ",", c, "p99", p99);
		JSON_RUNS(f, ",", c, "p999", p999);
		if (pm_counted(c)) {
			JSON_RUNS(f, "},", c, "fences_per_write", fences_w);
			JSON_RUNS(f, ",", c, "fences_per_read", fences_r);
		} else { /* not counted (pmdk-*): unknown, not 0 */
			fprintf(f, "},\"fences_per_write\":{\"median\":null,\"runs\":[]},"
				"\"fences_per_read\":{\"median\":null,\"runs\":[]}");
		}
		JSON_RUNS(f, ",\"cpu_ns_per_op\":{", c, "app", cpu_app);
		JSON_RUNS(f, ",", c, "background", cpu_backend);
		JSON_RUNS(f, ",", c, "persist", cpu_role[ROLE_PERSIST]);
		JSON_RUNS(f, ",", c, "replay", cpu_role[ROLE_REPLAY]);
		JSON_RUNS(f, ",", c, "gc", cpu_role[ROLE_GC]);
		JSON_RUNS(f, ",", c, "other_background", cpu_role[ROLE_OTHER]);
		JSON_RUNS(f, "},\"stalls\":{", c, "intervals_below_half_median", stall_intervals);
		JSON_RUNS(f, ",", c, "longest_run", stall_longest);
		JSON_RUNS(f, "},\"write_latency_ns\":{", c, "p50", wp50);
		JSON_RUNS(f, ",", c, "p999", wp999);
		fprintf(f, "},\"runs\":[");
		for (unsigned r = 0, first = 1; r < c->runs; r++)
			if (c->json[r]) {
				fprintf(f, "%s%s", first ? "" : ",", c->json[r]);
				first = 0;
			}
		fprintf(f, "]}");
	}
	fprintf(f, "]}\n");
	if (fclose(f)) {
		fprintf(stderr, "tips-bench compare: writing %s failed\n", o->json);
		return -1;
	}
	return 0;
}

static void session_free(struct session *s)
{
	for (unsigned k = 0; s->cell && k < ncells(s); k++)
		for (unsigned r = 0; r < s->cell[k].runs; r++)
			free(s->cell[k].json[r]);
	free(s->cell);
	free(s->lists[0]);
	free(s->lists[1]);
}

static void print_progress(const struct cell *c, unsigned done, unsigned total, unsigned r)
{
	const struct run_brief *b = &c->brief[c->runs - 1];
	printf("[%u/%u] %-16s %-4s %u thr run %u: load %.3f Mops/s, run %.3f Mops/s%s%s\n",
	       done, total, c->index, c->workload, c->threads, r + 1,
	       b->load_ops_per_sec / 1e6, b->run_ops_per_sec / 1e6,
	       b->capped ? " (capped)" : "", b->status == EXIT_OK ? "" : " FAILED");
	fflush(stdout);
}

int bench_compare(const struct options *o)
{
	struct session s = { .o = o };
	if (plan(&s)) {
		session_free(&s);
		return EXIT_USAGE;
	}
	unsigned total = 0, done = 0;
	for (unsigned k = 0; k < ncells(&s); k++)
		total += s.cell[k].not_applicable ? 0 : o->repeat;
	/* Interleaved: repeat, then thread count, then workload, then index; with
	 * --one-load a child runs every workload of an index, so the workload loop is
	 * inside it. */
	unsigned group = o->one_load ? s.nworkload : 1;
	for (unsigned r = 0; r < o->repeat; r++)
		for (unsigned t = 0; t < s.nthreads; t++)
			for (unsigned g = 0; g < s.nworkload / group; g++)
				for (unsigned i = 0; i < s.nindex; i++) {
					struct cell *run[MAX_NAMES];
					unsigned n = 0;
					for (unsigned w = g * group; w < (g + 1) * group; w++) {
						struct cell *c = &s.cell[(t * s.nworkload + w) * s.nindex + i];
						if (!c->not_applicable)
							run[n++] = c;
					}
					if (!n)
						continue;
					run_child(&s, run, n);
					for (unsigned k = 0; k < n; k++)
						print_progress(run[k], ++done, total, r);
				}
	print_table(&s);
	int rc = o->json && write_json(&s) ? EXIT_SETUP : EXIT_OK;
	unsigned failed = 0;
	for (unsigned k = 0; k < ncells(&s); k++)
		failed += (unsigned)s.cell[k].failed;
	session_free(&s);
	if (failed) {
		fprintf(stderr, "tips-bench compare: %u run(s) failed\n", failed);
		return EXIT_LOST;
	}
	return rc;
}
