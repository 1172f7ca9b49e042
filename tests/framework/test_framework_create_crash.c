/*
 * test_framework_create_crash.c - a power failure at every persist event of a new
 * database's first open (formatting the framework header, creating the index,
 * committing it, closing), with no eviction and with half the dirty lines evicted.
 * After each, a normal open must succeed, the heap's allocated blocks must be exactly
 * the index's (tips_db_check: a crash after the commit must not create a second index
 * and leak the first), and the database must work.
 */
#define _GNU_SOURCE
#include <sys/wait.h>

#include "test_util.h"

static char path[256];

static void make_empty_pool(void)
{
	unlink(path);
	struct tips_pool *pool = test_pool_create_at(path, 32ull << 20, TIPS_MEDIA_AUTO);
	REQUIRE(tips_pool_close(&pool) == 0);
}

/* Child: the first open on SIM media, crashing at persist event @k (0: never). */
static void first_open(uint64_t k, double evict, int report_fd)
{
	struct tips_pool_options po;
	tips_pool_options_init(&po);
	po.media = TIPS_MEDIA_SIM;
	po.sim_crash_at = k;
	po.sim_evict = evict;
	po.sim_seed = k * 7 + 1;
	struct tips_config cfg;
	tips_config_init(&cfg);
	cfg.expected_keys = 1024;
	cfg.pool = &po;
	struct tips_db *db;
	if (tips_open(path, &cfg, tips_index_find("tips-hash"), &db))
		_exit(3);
	tips_close(&db);
	uint64_t events = tips_pm_persist_events();
	if (report_fd >= 0 && write(report_fd, &events, sizeof(events)) != sizeof(events))
		_exit(3);
	_exit(0);
}

static int run_first_open(uint64_t k, double evict, int report_fd)
{
	pid_t pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0)
		first_open(k, evict, report_fd);
	int st;
	REQUIRE(waitpid(pid, &st, 0) == pid);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* After the crash: open, check ownership, write and read, close. 0 if all is well. */
static int verify(uint64_t k, double evict)
{
	struct tips_config cfg;
	tips_config_init(&cfg);
	struct tips_db *db;
	int rc = tips_open(path, &cfg, tips_index_find("tips-hash"), &db);
	if (rc) {
		fprintf(stderr, "crash at event %llu (evict %.1f): open: %s\n",
			(unsigned long long)k, evict, tips_errormsg());
		return 1;
	}
	struct tips_db_report rep;
	rc = tips_db_check(db, NULL, NULL, &rep);
	if (rc)
		fprintf(stderr, "crash at event %llu (evict %.1f): %s (heap %llu blocks, index "
			"%llu)\n", (unsigned long long)k, evict, tips_errormsg(),
			(unsigned long long)rep.blocks_allocated,
			(unsigned long long)rep.blocks_owned);
	uint64_t v = k, got = 0;
	size_t vlen;
	if (!rc && (tips_put(db, "key", 3, &v, 8) || tips_get(db, "key", 3, &got, 8, &vlen) ||
		    got != k)) {
		fprintf(stderr, "crash at event %llu: the database does not work (%s)\n",
			(unsigned long long)k, tips_errormsg());
		rc = 1;
	}
	tips_close(&db);
	return rc ? 1 : 0;
}

int main(void)
{
	test_path(path, sizeof(path), "/dev/shm", "createcrash");
	int fds[2];
	REQUIRE(pipe(fds) == 0);
	make_empty_pool();
	REQUIRE(run_first_open(0, 0, fds[1]) == 0);
	uint64_t events = 0;
	REQUIRE(read(fds[0], &events, sizeof(events)) == sizeof(events));
	REQUIRE(events > 10);
	const double evicts[] = { 0.0, 0.5 };
	unsigned crashes = 0, failures = 0;
	for (unsigned e = 0; e < 2; e++)
		for (uint64_t k = 1; k <= events; k++) {
			make_empty_pool();
			int st = run_first_open(k, evicts[e], -1);
			crashes += st == 86;
			CHECK(st == 86 || st == 0);
			if (verify(k, evicts[e]))
				failures++;
		}
	fprintf(stderr, "%llu persist events in a first open and close; %u crashes, %u failed\n",
		(unsigned long long)events, crashes, failures);
	CHECK(crashes > events); /* nearly every point really crashed, in both passes */
	CHECK(failures == 0);
	unlink(path);
	return test_finish("test_framework_create_crash");
}
