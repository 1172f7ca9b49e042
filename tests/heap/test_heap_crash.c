/*
 * test_heap_crash.c - crash campaign for the persistent allocator.
 *
 *   test_heap_crash --mode sim|sigkill [--crashes N] [--seed S] [--ops N]
 *
 * A child process opens the pool and runs a random workload over NSLOTS slots in the
 * root area: allocate into an empty slot (and persist a pattern into the block), free a
 * full one, pairs of MLog (logged) allocations and frees, checkpoints. Before each slot
 * operation it tells the parent its intent, after it the result (the acknowledgement).
 * The parent crashes the child: `sim` arms a simulated power failure at a random persist
 * event with random eviction of dirty lines (the child may also crash while recovering
 * the previous crash, and a separate recovery run is crashed on purpose too); `sigkill`
 * sends SIGKILL after a random number of acknowledgements. Then the parent recovers the
 * pool, rolls back the MLog (as the framework's recovery will) and checks:
 *   lost          an acknowledged slot state or block content is missing;
 *   phantom       a slot holds a value nobody wrote (only the in-flight op may differ);
 *   leaked        an allocated block that no slot owns;
 *   double_owned  a slot pointing to a free block, or two slots to one block;
 *   heap_errors   tips_heap_check() inconsistencies; bad_exit: the child died otherwise.
 * `crashes` counts the children that did crash (the armed failure, or the SIGKILL, hit
 * them before their end); a round whose child completed is run again, up to
 * ROUNDS_PER_CRASH rounds per crash asked for, and a campaign that cannot reach --crashes
 * fails (bad_exit).
 * It prints one summary line and exits 0 only if every count is zero.
 */
#define _GNU_SOURCE
#include "test_util.h"

#include <errno.h>
#include <signal.h>
#include <stdint.h>
#include <sys/wait.h>
#include <time.h>

#define NSLOTS 256
#define POOL_SIZE (32ull << 20)
#define CRASH_EXIT 86

enum msg_kind { MSG_INTENT = 1, MSG_ACK = 2, MSG_DONE = 3 };

struct msg {
	uint32_t kind;
	uint32_t slot;
	uint64_t op;
	uint64_t value; /* INTENT: value before; ACK: value after; DONE: persist events */
};

struct crash_root {
	uint64_t slots[NSLOTS];
};

static uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static size_t pick_size(uint64_t *rng)
{
	uint64_t r = rng_next(rng) % 100;
	if (r < 70)
		return 16 + rng_next(rng) % 184;
	if (r < 90)
		return 200 + rng_next(rng) % 4800;
	if (r < 98)
		return 5000 + rng_next(rng) % 60000;
	return 70000 + rng_next(rng) % 530000;
}

/* Block contents (size >= 16): the op number, the size, then bytes derived from both. */
static void pattern_fill(unsigned char *p, size_t size, uint64_t op)
{
	uint64_t sz = size;
	memcpy(p, &op, 8);
	memcpy(p + 8, &sz, 8);
	for (size_t i = 16; i < size; i++)
		p[i] = (unsigned char)(op * 31 + i);
}

/* Whether @p holds the pattern of @op, within a block of @usable bytes. */
static int pattern_ok(const unsigned char *p, size_t usable, uint64_t op)
{
	uint64_t got_op, size;
	memcpy(&got_op, p, 8);
	memcpy(&size, p + 8, 8);
	if (got_op != op || size < 16 || size > usable)
		return 0;
	for (size_t i = 16; i < size; i++)
		if (p[i] != (unsigned char)(op * 31 + i))
			return 0;
	return 1;
}

static void send_msg(int fd, uint32_t kind, uint32_t slot, uint64_t op, uint64_t value)
{
	struct msg m = { kind, slot, op, value };
	if (write(fd, &m, sizeof(m)) != (ssize_t)sizeof(m))
		_exit(3);
}

/* Runs a call that may find the lane log full of MLog records: checkpoint, retry. */
#define RETRY_LOGFULL(h, call)                                                           \
	({                                                                               \
		int rc__;                                                                \
		while ((rc__ = (call)) == TIPS_ELOGFULL)                                 \
			if (tips_heap_checkpoint((h), 0) != 0)                           \
				_exit(4);                                                \
		rc__;                                                                    \
	})

/* The child: workload until done or until the armed power failure ends it. */
static void child_run(const char *path, int fd, int sim, uint64_t crash_at, double evict,
		      uint64_t seed, uint64_t first_op, uint64_t nops)
{
	struct tips_pool_options o;
	tips_pool_options_init(&o);
	if (sim) {
		o.media = TIPS_MEDIA_SIM;
		o.sim_crash_at = crash_at;
		o.sim_evict = evict;
		o.sim_seed = seed;
		o.sim_crash_exit_code = CRASH_EXIT;
	}
	struct tips_pool *pool;
	if (tips_pool_open(path, &o, &pool) != 0) {
		fprintf(stderr, "child: open: %s\n", tips_errormsg());
		_exit(5);
	}
	struct tips_heap *h = tips_pool_heap(pool);
	if (tips_heap_rollback(h) != 0) /* the MLog owner's recovery decision */
		_exit(6);
	struct crash_root *root = tips_pool_root(pool, NULL);
	uint64_t rng = seed * 0x2545f4914f6cdd1dull + first_op;
	for (uint64_t op = first_op; op < first_op + nops; op++) {
		uint64_t action = rng_next(&rng) % 100;
		if (action < 4) {
			if (tips_heap_checkpoint(h, 0) != 0)
				_exit(7);
			continue;
		}
		if (action < 14) { /* an MLog pair: never survives as allocated */
			void *p;
			size_t size = pick_size(&rng);
			if (RETRY_LOGFULL(h, tips_heap_alloc_logged(h, size, &p)) != 0)
				_exit(8);
			pattern_fill(p, size, op);
			if (RETRY_LOGFULL(h, tips_heap_free_logged(h, p)) != 0)
				_exit(9);
			continue;
		}
		uint32_t s = (uint32_t)(rng_next(&rng) % NSLOTS);
		uint64_t before = root->slots[s];
		send_msg(fd, MSG_INTENT, s, op, before);
		if (before == 0) {
			size_t size = pick_size(&rng);
			int rc = RETRY_LOGFULL(h, tips_heap_alloc_to(h, size, &root->slots[s]));
			if (rc == TIPS_ENOMEM) { /* full: the op is a no-op, say so */
				send_msg(fd, MSG_ACK, s, op, 0);
				continue;
			}
			if (rc != 0)
				_exit(10);
			pattern_fill((unsigned char *)root->slots[s], size, op);
			tips_persist((void *)root->slots[s], size);
		} else if (RETRY_LOGFULL(h, tips_heap_free_from(h, &root->slots[s])) != 0) {
			_exit(11);
		}
		send_msg(fd, MSG_ACK, s, op, root->slots[s]);
	}
	send_msg(fd, MSG_DONE, 0, 0, tips_pm_persist_events());
	if (tips_pool_close(&pool) != 0)
		_exit(12);
	_exit(0);
}

/* What the parent knows about each slot. */
struct model {
	uint64_t value[NSLOTS]; /* acknowledged value */
	uint64_t op[NSLOTS];    /* op that allocated it (for the content check) */
	uint64_t size_ok[NSLOTS];
	int inflight_slot;      /* slot of an intent without ack, -1 if none */
	uint64_t inflight_before, inflight_op;
	uint64_t next_op;
	uint64_t events_seen;   /* persist events of the last complete run */
};

struct counts {
	uint64_t acks;
	uint64_t crashes, /* rounds whose child did crash (status_crashed) */ lost, phantom, leaked, double_owned, heap_errors, bad_exit;
	double max_recovery_ms;
};

/* Reads every message the child wrote (until EOF) into the model. */
static uint64_t total_acks;

static void drain_messages(int fd, struct model *m, uint64_t kill_after, pid_t child)
{
	struct msg msg;
	uint64_t acks = 0;
	for (;;) {
		ssize_t n = read(fd, &msg, sizeof(msg));
		if (n == 0)
			break;
		if (n < 0 && errno == EINTR)
			continue;
		REQUIRE(n == (ssize_t)sizeof(msg));
		if (msg.kind == MSG_INTENT) {
			m->inflight_slot = (int)msg.slot;
			m->inflight_before = msg.value;
			m->inflight_op = msg.op;
		} else if (msg.kind == MSG_ACK) {
			m->value[msg.slot] = msg.value;
			m->op[msg.slot] = msg.op;
			m->inflight_slot = -1;
			total_acks++;
			if (kill_after && ++acks == kill_after)
				kill(child, SIGKILL);
		} else if (msg.kind == MSG_DONE) {
			m->events_seen = msg.value;
		}
	}
}

/* The allocated blocks, as the heap walk lists them (address order). */
struct block_list {
	uint64_t addr[1 << 16];
	size_t n;
};

static int collect_block(const struct tips_heap_block *b, void *arg)
{
	struct block_list *bl = arg;
	REQUIRE(bl->n < sizeof(bl->addr) / sizeof(bl->addr[0]));
	bl->addr[bl->n++] = (uint64_t)b->ptr;
	return 0;
}

static int block_listed(const struct block_list *bl, uint64_t v)
{
	size_t lo = 0, hi = bl->n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (bl->addr[mid] < v)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < bl->n && bl->addr[lo] == v;
}

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Recovers in this process and compares the pool with the model; updates the model. */
static void verify(const char *path, struct model *m, struct counts *c)
{
	struct tips_pool *pool;
	double t0 = now_ms();
	int rc = tips_pool_open(path, NULL, &pool);
	if (rc) {
		fprintf(stderr, "recovery open failed: %s\n", tips_errormsg());
		c->heap_errors++;
		return;
	}
	struct tips_heap *h = tips_pool_heap(pool);
	rc = tips_heap_rollback(h);
	double ms = now_ms() - t0;
	if (ms > c->max_recovery_ms)
		c->max_recovery_ms = ms;
	struct tips_heap_report rep;
	if (rc || tips_heap_check(h, &rep) != 0) {
		fprintf(stderr, "heap inconsistent after recovery: %s\n", rep.first_error);
		c->heap_errors++;
	}
	struct crash_root *root = tips_pool_root(pool, NULL);
	for (int s = 0; s < NSLOTS; s++) {
		uint64_t got = root->slots[s];
		int inflight = s == m->inflight_slot;
		if (got == m->value[s]) {
			if (got && !inflight) {
				size_t usable = tips_heap_usable_size(h, (void *)got);
				if (usable == 0 || !pattern_ok((const unsigned char *)got, usable, m->op[s])) {
					fprintf(stderr, "slot %d: block content of op %llu lost\n", s,
						(unsigned long long)m->op[s]);
					c->lost++;
				}
			}
			continue;
		}
		if (inflight && (got == m->inflight_before || (m->inflight_before == 0 && got != 0) ||
				 (m->inflight_before != 0 && got == 0))) {
			m->value[s] = got;
			m->op[s] = m->inflight_op;
			continue;
		}
		fprintf(stderr, "slot %d: holds %#llx, acknowledged %#llx%s\n", s,
			(unsigned long long)got, (unsigned long long)m->value[s],
			inflight ? " (in flight)" : "");
		if (got == 0 || (m->value[s] != 0 && !inflight))
			c->lost++;
		else
			c->phantom++;
		m->value[s] = got;
	}
	/* Ownership: each slot's block allocated and unshared; each block owned. */
	static struct block_list blocks;
	blocks.n = 0;
	tips_heap_walk(h, collect_block, &blocks);
	uint64_t owned = 0;
	for (int s = 0; s < NSLOTS; s++) {
		uint64_t v = root->slots[s];
		if (!v)
			continue;
		if (!block_listed(&blocks, v)) {
			fprintf(stderr, "slot %d: owns %#llx, which the heap holds free\n", s,
				(unsigned long long)v);
			c->double_owned++;
			continue;
		}
		owned++;
		for (int t = s + 1; t < NSLOTS; t++)
			if (root->slots[t] == v) {
				fprintf(stderr, "slots %d and %d own the same block\n", s, t);
				c->double_owned++;
			}
	}
	if (blocks.n > owned) {
		fprintf(stderr, "%llu allocated block(s) owned by no slot\n",
			(unsigned long long)(blocks.n - owned));
		c->leaked += blocks.n - owned;
	}
	/* Block contents of an allocation in flight are unknown: re-tag the model. */
	if (m->inflight_slot >= 0 && root->slots[m->inflight_slot] &&
	    root->slots[m->inflight_slot] != m->inflight_before) {
		unsigned char *p = (unsigned char *)root->slots[m->inflight_slot];
		size_t size = tips_heap_usable_size(h, p);
		pattern_fill(p, size, m->inflight_op);
		tips_persist(p, size);
	}
	m->inflight_slot = -1;
	if (tips_pool_close(&pool) != 0)
		c->heap_errors++;
}

/* Runs one child; returns its wait status. */
static int run_child(const char *path, struct model *m, int sim, uint64_t crash_at,
		     double evict, uint64_t seed, uint64_t nops, uint64_t kill_after)
{
	int fds[2];
	REQUIRE(pipe(fds) == 0);
	pid_t pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		close(fds[0]);
		child_run(path, fds[1], sim, crash_at, evict, seed, m->next_op, nops);
	}
	close(fds[1]);
	drain_messages(fds[0], m, kill_after, pid);
	close(fds[0]);
	int status;
	REQUIRE(waitpid(pid, &status, 0) == pid);
	m->next_op += nops;
	return status;
}

/* A recovery that itself loses power after @k persist events. */
static int crash_recovery(const char *path, uint64_t k, uint64_t seed)
{
	pid_t pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		struct tips_pool_options o;
		tips_pool_options_init(&o);
		o.media = TIPS_MEDIA_SIM;
		o.sim_crash_at = k;
		o.sim_evict = 0.5;
		o.sim_seed = seed;
		o.sim_crash_exit_code = CRASH_EXIT;
		struct tips_pool *pool;
		if (tips_pool_open(path, &o, &pool) != 0)
			_exit(5);
		tips_heap_rollback(tips_pool_heap(pool));
		tips_pool_close(&pool);
		_exit(0);
	}
	int status;
	REQUIRE(waitpid(pid, &status, 0) == pid);
	return status;
}

/* Did the child crash the way this mode crashes it (sim: the armed power failure;
 * sigkill: the parent's SIGKILL)? A child that ran to its end did not. */
static int status_crashed(int status, int sim)
{
	return sim ? WIFEXITED(status) && WEXITSTATUS(status) == CRASH_EXIT
		   : WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
}

/* Rounds allowed per crash asked for: a round whose child ends before its crash point
 * (the parent's kill came late, or the power failure was armed past the run's last
 * persist event) is run again, but a campaign that cannot crash fails. */
#define ROUNDS_PER_CRASH 4

int main(int argc, char **argv)
{
	const char *mode = "sim";
	uint64_t crashes = 30, seed = 1, nops = 300;
	for (int i = 1; i + 1 < argc; i += 2) {
		if (strcmp(argv[i], "--mode") == 0)
			mode = argv[i + 1];
		else if (strcmp(argv[i], "--crashes") == 0)
			crashes = strtoull(argv[i + 1], NULL, 0);
		else if (strcmp(argv[i], "--seed") == 0)
			seed = strtoull(argv[i + 1], NULL, 0);
		else if (strcmp(argv[i], "--ops") == 0)
			nops = strtoull(argv[i + 1], NULL, 0);
	}
	int sim = strcmp(mode, "sim") == 0;
	REQUIRE(sim || strcmp(mode, "sigkill") == 0);

	char path[256];
	struct tips_pool *pool = test_pool_create(path, sizeof(path), "heapcrash", POOL_SIZE);
	memset(tips_pool_root(pool, NULL), 0, sizeof(struct crash_root));
	tips_persist(tips_pool_root(pool, NULL), sizeof(struct crash_root));
	REQUIRE(tips_pool_close(&pool) == 0);

	struct model m;
	memset(&m, 0, sizeof(m));
	m.inflight_slot = -1;
	struct counts c = { 0 };
	uint64_t rng = seed;
	/* Calibration: a full run without a crash tells how many persist events a run has. */
	int status = run_child(path, &m, sim, 0, 0, seed, nops, 0);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		c.bad_exit++;
	verify(path, &m, &c);
	uint64_t events = m.events_seen ? m.events_seen : 1000;

	static const double evictions[] = { 0.0, 0.1, 0.5, 1.0 };
	uint64_t rounds = 0;
	for (uint64_t k = 0; c.crashes < crashes; k++) {
		if (k >= ROUNDS_PER_CRASH * crashes) {
			fprintf(stderr, "only %llu of %llu rounds crashed (%llu crashes asked for)\n",
				(unsigned long long)c.crashes, (unsigned long long)k,
				(unsigned long long)crashes);
			c.bad_exit++;
			break;
		}
		rounds++;
		uint64_t round_seed = rng_next(&rng);
		if (sim) {
			uint64_t at = 1 + rng_next(&rng) % events;
			double evict = evictions[rng_next(&rng) % 4];
			status = run_child(path, &m, 1, at, evict, round_seed, nops, 0);
			if (k % 3 == 0 && WIFEXITED(status) && WEXITSTATUS(status) == CRASH_EXIT) {
				/* Lose power again in the middle of the recovery. */
				int st2 = crash_recovery(path, 1 + rng_next(&rng) % 40, round_seed);
				if (!WIFEXITED(st2) || (WEXITSTATUS(st2) != 0 &&
							WEXITSTATUS(st2) != CRASH_EXIT))
					c.bad_exit++;
			}
		} else {
			status = run_child(path, &m, 0, 0, 0, round_seed, nops,
					   1 + rng_next(&rng) % nops);
		}
		if (status_crashed(status, sim))
			c.crashes++;
		else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
			fprintf(stderr, "child ended with status %#x\n", status);
			c.bad_exit++;
		}
		verify(path, &m, &c);
	}
	unlink(path);
	printf("runs crashed before their end: %llu of %llu; operations acknowledged: %llu; "
	       "persist events in a full run: %llu\n", (unsigned long long)c.crashes,
	       (unsigned long long)rounds, (unsigned long long)total_acks,
	       (unsigned long long)events);
	printf("mode=%s crashes=%llu lost=%llu phantom=%llu leaked=%llu double_owned=%llu "
	       "heap_errors=%llu bad_exit=%llu max_recovery_ms=%.2f\n",
	       mode, (unsigned long long)c.crashes, (unsigned long long)c.lost,
	       (unsigned long long)c.phantom, (unsigned long long)c.leaked,
	       (unsigned long long)c.double_owned, (unsigned long long)c.heap_errors,
	       (unsigned long long)c.bad_exit, c.max_recovery_ms);
	return (c.lost | c.phantom | c.leaked | c.double_owned | c.heap_errors | c.bad_exit) ? 1 : 0;
}
