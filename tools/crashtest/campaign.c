/*
 * campaign.c - the campaign: forks each run, crashes it (SIGKILL or armed power
 * failure), crashes some recoveries, has every crash verified against the model, keeps
 * crashed copies on request; and main().
 * Invariant: the parent never opens the pool (every open happens in a forked child), and
 * a run counts as a crash only when the child's exit status shows it crashed.
 */
#define _GNU_SOURCE
#include "crashtest.h"

static int wait_child(pid_t pid)
{
	int status;
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR) {
			perror("tips-crashtest: waitpid");
			exit(EXIT_VIOLATION);
		}
	return status;
}

static pid_t fork_or_die(void)
{
	fflush(NULL); /* no buffered output is written twice */
	pid_t pid = fork();
	if (pid < 0) {
		perror("tips-crashtest: fork");
		exit(EXIT_VIOLATION);
	}
	if (pid == 0)
		alarm(CHILD_TIMEOUT_S);
	return pid;
}

static const char *status_text(int status, char *buf, size_t cap)
{
	if (WIFEXITED(status))
		snprintf(buf, cap, "exit %d", WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		snprintf(buf, cap, "signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
	else
		snprintf(buf, cap, "status %#x", status);
	return buf;
}

/* One workload run. Returns the child's wait status; *events: persist events of a
 * finished run. */
static int run_workload(struct campaign *c, uint64_t crash_at, uint64_t kill_after,
			uint64_t *events)
{
	uint64_t per_thread = (c->o.ops + c->o.threads - 1) / c->o.threads;
	uint64_t seq_base = c->next_seq;
	c->next_seq += per_thread * c->o.threads;
	if (c->next_seq > 0xffffffffull) {
		fprintf(stderr, "tips-crashtest: sequence numbers exhausted (32 bits)\n");
		exit(EXIT_VIOLATION);
	}
	uint64_t sim_seed = rng_next(&c->rng), rng_seed = rng_next(&c->rng);
	int fds[2];
	if (pipe(fds) != 0) {
		perror("tips-crashtest: pipe");
		exit(EXIT_VIOLATION);
	}
	pid_t pid = fork_or_die();
	if (pid == 0) {
		close(fds[0]);
		child_workload(&c->o, fds[1], c->o.sim, crash_at, sim_seed, seq_base, rng_seed);
	}
	close(fds[1]);
	*events = read_messages(c, fds[0], pid, kill_after);
	close(fds[0]);
	return wait_child(pid);
}

/* Crashes a recovery of the pool (see crashtest.h). */
static void crash_recovery(struct campaign *c)
{
	uint64_t bound = c->recovery_events ? c->recovery_events : DEFAULT_RECOVERY_EVENTS;
	uint64_t crash_at = 1 + rng_below(&c->rng, bound);
	uint64_t sim_seed = rng_next(&c->rng);
	long delay_us = (long)rng_below(&c->rng, 20001);
	c->sh->recovery_events = 0;
	pid_t pid = fork_or_die();
	if (pid == 0)
		child_recovery(&c->o, c->sh, crash_at, sim_seed);
	if (!c->o.sim) {
		struct timespec ts = { delay_us / 1000000, (delay_us % 1000000) * 1000 };
		while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
			;
		kill(pid, SIGKILL); /* harmless if it already exited: it is a zombie until
				       waited for */
	}
	int status = wait_child(pid);
	char buf[64];
	bool crashed = (WIFEXITED(status) && WEXITSTATUS(status) == CRASH_EXIT && c->o.sim) ||
		       (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL && !c->o.sim);
	if (crashed)
		c->recovery_crashes++;
	else if (WIFEXITED(status) && WEXITSTATUS(status) == CHILD_OK) {
		if (c->o.sim && c->sh->recovery_events > c->recovery_events)
			c->recovery_events = c->sh->recovery_events;
	} else {
		fprintf(stderr, "crash %llu: the recovery child failed: %s\n",
			(unsigned long long)c->crashes, status_text(status, buf, sizeof(buf)));
		c->failed = true;
	}
	if (c->o.verbose)
		fprintf(stderr, "crash %llu: recovery %s (%s %llu)\n",
			(unsigned long long)c->crashes, crashed ? "crashed" : "completed",
			c->o.sim ? "armed at event" : "killed after us",
			(unsigned long long)(c->o.sim ? crash_at : (uint64_t)delay_us));
}

/* Batch mode: each thread's unacknowledged batch must be found wholly applied or not
 * at all (keys whose old and new states are equal say nothing either way). */
static void check_batches_whole(struct campaign *c)
{
	for (unsigned t = 0; t < c->o.threads; t++) {
		unsigned applied = 0, not_applied = 0;
		uint64_t key_new = 0, key_old = 0;
		for (unsigned i = 0; i < c->n_inflight[t] && c->o.batch; i++) {
			const struct inflight *f = &c->inflight[t][i];
			const struct found_key *fk = &c->sh->found[f->key];
			struct key_state got, after, *before = &c->model[f->key];
			state_of(&got, fk->rc == 0, fk->val, fk->vlen);
			state_after(before, f, &after);
			if (before->unknown || state_equal(before, &after))
				continue;
			if (state_equal(&got, &after))
				applied++, key_new = f->key;
			else if (state_equal(&got, before))
				not_applied++, key_old = f->key;
		}
		if (applied && not_applied) {
			c->torn++;
			c->lost++;
			if (detail_ok(c))
				fprintf(stderr, "crash %llu: torn batch of thread %u: %u keys new "
					"(e.g. key %llu), %u keys old (e.g. key %llu)\n",
					(unsigned long long)c->crashes, t, applied,
					(unsigned long long)key_new, not_applied,
					(unsigned long long)key_old);
		}
	}
}

/* Recovers and checks the pool against the model, then adopts what was found. */
static void verify(struct campaign *c)
{
	struct shared *sh = c->sh;
	memset(sh, 0, c->sh_size);
	pid_t pid = fork_or_die();
	if (pid == 0)
		child_verify(&c->o, sh, c->crashes, &c->known);
	int status = wait_child(pid);
	char buf[64];
	if (!WIFEXITED(status) || WEXITSTATUS(status) != CHILD_OK) {
		fprintf(stderr, "crash %llu: the verifier failed: %s\n",
			(unsigned long long)c->crashes, status_text(status, buf, sizeof(buf)));
		c->failed = true;
		return;
	}
	if (sh->open_ms > c->max_recovery_ms)
		c->max_recovery_ms = sh->open_ms;
	c->leaked += sh->leaked;
	c->double_free += sh->double_free;
	for (uint32_t i = 0; i < sh->n_new_leaks; i++)
		addr_push(&c->known.leaks, sh->new_leaks[i]);
	for (uint32_t i = 0; i < sh->n_new_unowned_free; i++)
		addr_push(&c->known.free_owned, sh->new_unowned_free[i]);
	if (c->known.leaks.n > 1)
		qsort(c->known.leaks.v, c->known.leaks.n, sizeof(uint64_t), cmp_u64);
	if (c->known.free_owned.n > 1)
		qsort(c->known.free_owned.v, c->known.free_owned.n, sizeof(uint64_t), cmp_u64);
	c->phantom += sh->scan_phantom;
	c->lost += sh->scan_lost;
	c->details = 0;
	uint64_t lost0 = c->lost, phantom0 = c->phantom;
	check_batches_whole(c);
	for (uint64_t k = 0; k < c->o.keys; k++) {
		const struct found_key *f = &sh->found[k];
		if (f->rc != 0 && f->rc != TIPS_ENOTFOUND) {
			fprintf(stderr, "crash %llu: key %llu: lookup failed: %s\n",
				(unsigned long long)c->crashes, (unsigned long long)k,
				tips_strerror(f->rc));
			c->failed = true;
			continue;
		}
		struct key_state got;
		state_of(&got, f->rc == 0, f->val, f->vlen);
		struct key_state *e = &c->model[k];
		const struct inflight *fl = inflight_on(c, k);
		bool inflight = fl != NULL;
		struct key_state alt;
		if (inflight)
			state_after(e, fl, &alt);
		if (e->unknown || state_equal(&got, e) || (inflight && state_equal(&got, &alt))) {
			*e = got;
			continue;
		}
		bool phantom = got.present && !value_was_written(c, k, &got);
		if (phantom)
			c->phantom++;
		else
			c->lost++;
		if (detail_ok(c)) {
			char want[128], have[128], alt_s[128];
			state_describe(k, e, want, sizeof(want));
			state_describe(k, &got, have, sizeof(have));
			if (inflight)
				state_describe(k, &alt, alt_s, sizeof(alt_s));
			fprintf(stderr, "crash %llu: %s: key %llu: expected %s%s%s%s%s, found %s\n",
				(unsigned long long)c->crashes, phantom ? "phantom" : "lost",
				(unsigned long long)k, want,
				inflight ? " or (in-flight " : "",
				inflight ? op_names[fl->op] : "", inflight ? ") " : "",
				inflight ? alt_s : "", have);
		}
		*e = got;
	}
	if (c->details > MAX_DETAILS)
		fprintf(stderr, "crash %llu: ... %u more violation(s) not shown\n",
			(unsigned long long)c->crashes, c->details - MAX_DETAILS);
	for (unsigned t = 0; t < c->o.threads; t++)
		c->n_inflight[t] = 0;
	if (c->o.verbose || c->lost != lost0 || c->phantom != phantom0 || sh->leaked ||
	    sh->double_free)
		fprintf(stderr, "crash %llu (run %llu): recovery %.1f ms (stats %.1f ms, "
			"recovered=%d); blocks: heap %llu, owned %llu; lost +%llu phantom +%llu "
			"leaked +%llu double_free +%llu\n",
			(unsigned long long)c->crashes, (unsigned long long)c->runs, sh->open_ms,
			sh->stats_recovery_ms, sh->recovered, (unsigned long long)sh->heap_blocks,
			(unsigned long long)sh->owned_blocks,
			(unsigned long long)(c->lost - lost0),
			(unsigned long long)(c->phantom - phantom0),
			(unsigned long long)sh->leaked, (unsigned long long)sh->double_free);
}

/* File @d of the store at @base (0: @base; listdb: @base.dN) into @out. */
static void store_file(const char *base, unsigned d, char *out, size_t cap)
{
	tips_listdb_pool_path(base, d, out, cap);
}

static unsigned store_files(const struct options *o)
{
	return o->kind == BENCH_LISTDB ? o->listdb_domains : 1;
}

/* Copies @from to @to (replaced); false on an error (printed). */
static bool copy_file(const char *from, const char *to)
{
	static char buf[1 << 20];
	FILE *in = fopen(from, "rb"), *out = in ? fopen(to, "wb") : NULL;
	bool ok = in && out;
	size_t n;
	while (ok && (n = fread(buf, 1, sizeof(buf), in)) > 0)
		ok = fwrite(buf, 1, n, out) == n;
	ok = ok && !ferror(in);
	if (in)
		fclose(in);
	if (out && fclose(out) != 0)
		ok = false;
	if (!ok)
		fprintf(stderr, "tips-crashtest: cannot copy %s to %s: %s\n", from, to,
			strerror(errno));
	return ok;
}

/* --keep-crashed: the pool as the crash left it, before any recovery, at PATH.crashed;
 * only until the first violation, so that the copy is the state whose recovery (or the
 * run after it) went wrong first. */
static void keep_crashed_copy(struct campaign *c)
{
	char base[4096], from[4200], to[4200];
	snprintf(base, sizeof(base), "%s.crashed", c->o.pool);
	for (unsigned d = 0; d < store_files(&c->o); d++) {
		store_file(c->o.pool, d, from, sizeof(from));
		store_file(base, d, to, sizeof(to));
		if (!copy_file(from, to))
			c->failed = true;
	}
	c->kept_crash = c->crashes;
}

static void remove_crashed_copy(const struct options *o)
{
	char base[4096], p[4200];
	snprintf(base, sizeof(base), "%s.crashed", o->pool);
	for (unsigned d = 0; d < store_files(o); d++) {
		store_file(base, d, p, sizeof(p));
		unlink(p);
	}
}

static void campaign_run(struct campaign *c)
{
	char buf[64];
	pid_t pid = fork_or_die();
	if (pid == 0)
		child_create(&c->o);
	int status = wait_child(pid);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != CHILD_OK) {
		fprintf(stderr, "tips-crashtest: creating %s failed: %s\n", c->o.pool,
			status_text(status, buf, sizeof(buf)));
		c->failed = true;
		return;
	}
	if (c->o.sim) { /* calibration: a whole run on SIM media, never armed */
		uint64_t events = 0;
		c->runs++;
		status = run_workload(c, 0, 0, &events);
		if (!WIFEXITED(status) || WEXITSTATUS(status) != CHILD_OK || events == 0) {
			fprintf(stderr, "tips-crashtest: the calibration run failed: %s\n",
				status_text(status, buf, sizeof(buf)));
			c->failed = true;
			return;
		}
		c->finished_runs++;
		c->run_events = events;
		fprintf(stderr, "tips-crashtest: calibration: %llu persist events per run\n",
			(unsigned long long)events);
		verify(c);
	}
	uint64_t max_runs = c->o.crashes * 10 + 10;
	while (!c->failed && c->crashes < c->o.crashes && c->runs < max_runs) {
		c->runs++;
		uint64_t crash_at = c->o.sim ? 1 + rng_below(&c->rng, c->run_events) : 0;
		uint64_t acks_per_run = c->o.batch ? c->o.ops / c->o.batch : c->o.ops;
		uint64_t kill_after = c->o.sim ? 0
				    : 1 + rng_below(&c->rng, acks_per_run ? acks_per_run : 1);
		uint64_t events = 0;
		status = run_workload(c, crash_at, kill_after, &events);
		bool crashed = c->o.sim ? WIFEXITED(status) && WEXITSTATUS(status) == CRASH_EXIT
					: WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
		if (crashed) {
			c->crashes++;
		} else if (WIFEXITED(status) && WEXITSTATUS(status) == CHILD_OK) {
			c->finished_runs++;
			if (events > c->run_events)
				c->run_events = events;
		} else {
			fprintf(stderr, "run %llu: the workload child failed: %s\n",
				(unsigned long long)c->runs, status_text(status, buf, sizeof(buf)));
			c->failed = true;
			break;
		}
		if (c->o.verbose)
			fprintf(stderr, "run %llu: %s (%s %llu), %llu acks so far\n",
				(unsigned long long)c->runs, crashed ? "crashed" : "finished",
				c->o.sim ? "armed at event" : "kill after ack",
				(unsigned long long)(c->o.sim ? crash_at : kill_after),
				(unsigned long long)c->acks);
		if (crashed && c->o.keep_crashed &&
		    !(c->lost || c->phantom || c->leaked || c->double_free))
			keep_crashed_copy(c);
		if (crashed && rng_unit(&c->rng) < c->o.recovery_share)
			crash_recovery(c);
		if (!c->failed)
			verify(c);
	}
	if (!c->failed && c->crashes < c->o.crashes) {
		fprintf(stderr, "tips-crashtest: only %llu crashes in %llu runs (asked %llu)\n",
			(unsigned long long)c->crashes, (unsigned long long)c->runs,
			(unsigned long long)c->o.crashes);
		c->failed = true;
	}
}

int main(int argc, char **argv)
{
	struct campaign c;
	memset(&c, 0, sizeof(c));
	int rc = parse_options(argc, argv, &c.o);
	if (rc)
		return rc == PARSE_HELP ? EXIT_OK : rc;
	c.o.kind = bench_index_kind(c.o.index_name);
	if (c.o.kind == BENCH_NONE || c.o.kind == BENCH_DRAM) {
		fprintf(stderr, "tips-crashtest: no persistent index named '%s'; built in:",
			c.o.index_name);
		for (const char *const *n = bench_index_names(); *n; n++)
			if (bench_index_kind(*n) != BENCH_DRAM)
				fprintf(stderr, " %s", *n);
		fputc('\n', stderr);
		return EXIT_USAGE;
	}
	if (c.o.batch && c.o.kind == BENCH_PMDK) {
		fprintf(stderr, "tips-crashtest: --batch needs a store with write batches "
			"(tips-* indexes, listdb), not %s\n", c.o.index_name);
		return EXIT_USAGE;
	}
	if (c.o.sim && !bench_kind_persists_in_pools(c.o.kind)) {
		fprintf(stderr, "tips-crashtest: --mode sim does not apply to %s: it simulates "
			"power failure inside libtips's pool layer (dropping unflushed lines), "
			"which %s does not use (libpmemobj maps and flushes its pool itself); use "
			"--mode sigkill\n", c.o.index_name, "pmdk-hash (libpmemobj)");
		return EXIT_USAGE;
	}
	/* pmdk-hash: bench_index_open_with sets PMEM_IS_PMEM_FORCE=1 (cache-line flushes,
	 * not msync, as on tips pools) in every child. */
	bool listdb = c.o.kind == BENCH_LISTDB;
	if (listdb && !c.o.pool_size_set)
		c.o.pool_size = TIPS_LISTDB_POOL_SIZE;
	/* The files of the store: PATH, and for listdb its domain pools PATH.d1 ... */
	unsigned nfiles = listdb ? TIPS_LISTDB_MAX_DOMAINS : 1;
	for (unsigned d = 0; d < nfiles; d++) {
		char path[4096];
		struct stat stbuf;
		tips_listdb_pool_path(c.o.pool, d, path, sizeof(path));
		if (lstat(path, &stbuf) != 0)
			continue;
		if (!c.o.fresh) {
			fprintf(stderr, "tips-crashtest: %s exists; remove it or pass --fresh\n",
				path);
			return EXIT_USAGE;
		}
		if (unlink(path) != 0) {
			fprintf(stderr, "tips-crashtest: cannot remove %s: %s\n", path,
				strerror(errno));
			return EXIT_USAGE;
		}
	}
	c.sh_size = sizeof(struct shared) + c.o.keys * sizeof(struct found_key);
	c.sh = mmap(NULL, c.sh_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	c.model = calloc(c.o.keys, sizeof(*c.model));
	if (c.sh == MAP_FAILED || !c.model) {
		fprintf(stderr, "tips-crashtest: out of memory\n");
		return EXIT_VIOLATION;
	}
	c.rng = c.o.seed;
	c.next_seq = 1;
	fprintf(stderr, "tips-crashtest: index=%s mode=%s seed=%llu crashes=%llu keys=%llu "
		"ops=%llu threads=%u evict=%.2f recovery-crash-share=%.2f", c.o.index_name,
		c.o.sim ? "sim" : "sigkill", (unsigned long long)c.o.seed,
		(unsigned long long)c.o.crashes, (unsigned long long)c.o.keys,
		(unsigned long long)c.o.ops, c.o.threads, c.o.evict, c.o.recovery_share);
	if (listdb)
		fprintf(stderr, " memtable=%llu domains=%u",
			(unsigned long long)c.o.listdb_memtable, c.o.listdb_domains);
	if (c.o.batch)
		fprintf(stderr, " batch=%u", c.o.batch);
	fputc('\n', stderr);
	double t0 = now_ms();
	campaign_run(&c);
	bool bad = c.failed || c.lost || c.phantom || c.leaked || c.double_free;
	fprintf(stderr, "tips-crashtest: %llu runs (%llu finished without a crash, with %llu "
		"%s before close), %llu acks, %llu recoveries crashed, %.1f s; "
		"seed=%llu\n", (unsigned long long)c.runs, (unsigned long long)c.finished_runs,
		(unsigned long long)c.reclamations, bench_kind_background(c.o.kind),
		(unsigned long long)c.acks,
		(unsigned long long)c.recovery_crashes, (now_ms() - t0) / 1e3,
		(unsigned long long)c.o.seed);
	printf("crashes=%llu lost=%llu phantom=%llu leaked=%llu double_free=%llu "
	       "max_recovery_ms=%.1f", (unsigned long long)c.crashes,
	       (unsigned long long)c.lost, (unsigned long long)c.phantom,
	       (unsigned long long)c.leaked, (unsigned long long)c.double_free,
	       c.max_recovery_ms);
	if (c.o.batch)
		printf(" torn=%llu", (unsigned long long)c.torn);
	putchar('\n');
	if (bad && c.o.keep_crashed && c.kept_crash)
		fprintf(stderr, "tips-crashtest: the pool as crash %llu left it (before its "
			"recovery) is kept at %s.crashed%s\n", (unsigned long long)c.kept_crash,
			c.o.pool, listdb && c.o.listdb_domains > 1 ? " (and .d1 ...)" : "");
	else if (c.o.keep_crashed)
		remove_crashed_copy(&c.o);
	if (bad)
		fprintf(stderr, "tips-crashtest: FAILED (seed %llu); the pool is kept at %s%s\n",
			(unsigned long long)c.o.seed, c.o.pool,
			listdb && c.o.listdb_domains > 1 ? " (and .d1 ...)" : "");
	else if (listdb)
		tips_listdb_destroy(c.o.pool);
	else
		unlink(c.o.pool);
	free(c.model);
	free(c.written);
	free(c.known.leaks.v);
	free(c.known.free_owned.v);
	munmap(c.sh, c.sh_size);
	return bad ? EXIT_VIOLATION : EXIT_OK;
}
