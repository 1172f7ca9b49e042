/*
 * store.c - how a child opens the store: through the bench adapter, never creating the
 * pool unless asked, on SIM media when armed, waiting out a dead child's pool lock.
 * Invariant: no open in a child may create a pool that a crash lost (only
 * child_create creates), so a lost pool is a failed open, never a fresh empty store.
 */
#define _GNU_SOURCE
#include "crashtest.h"

/* ---- opening in a child ---------------------------------------------------------------- */

#define LOCK_WAIT_MS 5000u /* how long a child waits for a dead child's pool lock */

/*
 * Opens the store through the bench adapter (bench/kit/bench_index.h: the same calls
 * tips-bench makes), never creating it unless @create, with SIM media @popts (NULL:
 * the default media), and waits up to LOCK_WAIT_MS while the pool is locked
 * (TIPS_ELOCKED). Only the previous child, already reaped, can hold it: its
 * flock lives as long as the open file, which its mapping of the pool keeps open, and
 * the kernel may drop that mapping after the process is gone (whoever else holds the
 * address space a moment, such as a `ps` reading /proc/PID/cmdline, puts it last). A
 * lock still held after the wait is reported.
 */
int store_open(const struct options *o, bool create,
		      const struct tips_pool_options *popts, struct bench_index *db)
{
	if (o->kind == BENCH_LISTDB) {
		struct tips_listdb_config cfg;
		tips_listdb_config_init(&cfg);
		cfg.domains = o->listdb_domains;
		cfg.memtable_entries = o->listdb_memtable;
		bench_listdb_configure(&cfg);
	}
	struct bench_open_how how = {
		.pool_path = o->pool, .pool_size = o->pool_size, .expected_keys = o->keys,
		.keep = 1, .existing = !create, .pool = popts,
	};
	for (unsigned waited = 0;; waited += 10) {
		int rc = bench_index_open_with(db, o->index_name, &how);
		if (rc != TIPS_ELOCKED || waited >= LOCK_WAIT_MS)
			return rc;
		struct timespec ts = { 0, 10 * 1000000 };
		nanosleep(&ts, NULL);
	}
}

void sim_options(struct tips_pool_options *p, uint64_t crash_at, double evict,
			uint64_t seed)
{
	tips_pool_options_init(p);
	p->media = TIPS_MEDIA_SIM;
	p->sim_crash_at = crash_at;
	p->sim_evict = evict;
	p->sim_seed = seed;
	p->sim_crash_exit_code = CRASH_EXIT;
}

