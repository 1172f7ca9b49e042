/*
 * test_util.h - the few helpers every C test shares: checks that report where they
 * failed, and unique scratch paths.
 *
 * A test is a program: it exits 0 when every check held and 1 otherwise, printing each
 * failed check with file and line. CHECK continues (to report more), REQUIRE stops.
 * A case that cannot run here (no disk file system, no size limit on /dev/shm) calls
 * test_skip(); test_finish() then exits TEST_SKIPPED, which CTest reports as a skip
 * (SKIP_RETURN_CODE, set by tips_test(... SKIPPABLE)), never as a pass. Such a case is
 * registered as a test of its own, so that a skip hides no other case's result.
 */
#ifndef TIPS_TEST_UTIL_H
#define TIPS_TEST_UTIL_H

#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <tips/tips.h>

static int test_failures;
static int test_skips;

/* The exit code of a test that was skipped (the automake convention). */
#define TEST_SKIPPED 77

/* Marks the running case as not run here, and says why. */
static inline void test_skip(const char *what, const char *why)
{
	printf("%s: SKIPPED: %s\n", what, why);
	test_skips++;
}

#define CHECK(cond)                                                                      \
	do {                                                                             \
		if (!(cond)) {                                                           \
			fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
			test_failures++;                                                 \
		}                                                                        \
	} while (0)

#define REQUIRE(cond)                                                                    \
	do {                                                                             \
		if (!(cond)) {                                                           \
			fprintf(stderr, "%s:%d: requirement failed: %s\n", __FILE__, __LINE__, #cond); \
			exit(1);                                                         \
		}                                                                        \
	} while (0)

/* Seconds since an arbitrary origin (C11 timespec_get: no POSIX feature macro needed). */
static inline double test_seconds(void)
{
	struct timespec ts;
	timespec_get(&ts, TIME_UTC);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* How long any wait of a test may take before it fails: far beyond what a loaded
 * machine needs, so that a wait that never ends fails loudly instead of hanging. */
#define TEST_WAIT_DEADLINE_S 60.0

/* WAIT_UNTIL(cond, what): yield until @cond holds (another thread's progress, not the
 * passing of time); after TEST_WAIT_DEADLINE_S seconds fail the test, naming @what. */
#define WAIT_UNTIL(cond, what)                                                           \
	do {                                                                             \
		double wait_end_ = test_seconds() + TEST_WAIT_DEADLINE_S;                \
		while (!(cond)) {                                                        \
			if (test_seconds() > wait_end_) {                                \
				fprintf(stderr, "%s:%d: waited %.0f s for %s (%s)\n",    \
					__FILE__, __LINE__, TEST_WAIT_DEADLINE_S, what, #cond); \
				exit(1);                                                 \
			}                                                                \
			sched_yield();                                                   \
		}                                                                        \
	} while (0)

/* Checks that a libtips call returned @want, printing its message if not. */
#define CHECK_RC(call, want)                                                             \
	do {                                                                             \
		int rc_ = (call);                                                        \
		if (rc_ != (want)) {                                                     \
			fprintf(stderr, "%s:%d: %s returned %d (%s: %s), wanted %d (%s)\n", \
				__FILE__, __LINE__, #call, rc_, tips_strerror(rc_),      \
				tips_errormsg(), (want), tips_strerror(want));           \
			test_failures++;                                                 \
		}                                                                        \
	} while (0)

/* ---- helpers of the index tests ---------------------------------------------------- */

/* xorshift64*: a fast deterministic stream from seed *@s (not 0). */
static inline uint64_t rnd(uint64_t *s)
{
	*s ^= *s >> 12;
	*s ^= *s << 25;
	*s ^= *s >> 27;
	return *s * 0x2545f4914f6cdd1dull;
}

/* @x as 8 big-endian bytes: byte order is numeric order. */
static inline void be64(unsigned char *out, uint64_t x)
{
	for (int i = 7; i >= 0; i--, x >>= 8)
		out[i] = (unsigned char)x;
}

/* The key order of tips.h: memcmp over the common length, the shorter key first. */
static inline int key_cmp(const void *a, size_t alen, const void *b, size_t blen)
{
	int r = memcmp(a, b, alen < blen ? alen : blen);
	return r ? r : (alen > blen) - (alen < blen);
}

/* A fresh path under @dir that does not exist yet: DIR/tips-test-NAME-PID-N.pool */
static inline void test_path(char *out, size_t len, const char *dir, const char *name)
{
	static int counter;
	snprintf(out, len, "%s/tips-test-%s-%d-%d.pool", dir, name, (int)getpid(), counter++);
	unlink(out);
}

/* Creates a pool of @size bytes at @path on @media (AUTO or SIM); aborts on failure. */
static inline struct tips_pool *test_pool_create_at(const char *path, uint64_t size,
						    enum tips_media media)
{
	struct tips_pool_options o;
	tips_pool_options_init(&o);
	o.size = size;
	o.media = media;
	struct tips_pool *pool = NULL;
	int rc = tips_pool_create(path, &o, &pool);
	if (rc) {
		fprintf(stderr, "cannot create test pool %s: %s\n", path, tips_errormsg());
		exit(1);
	}
	return pool;
}

/* Creates a pool of @size bytes at a fresh path under /dev/shm; aborts on failure. */
static inline struct tips_pool *test_pool_create(char *path, size_t len, const char *name,
						 uint64_t size)
{
	test_path(path, len, "/dev/shm", name);
	return test_pool_create_at(path, size, TIPS_MEDIA_AUTO);
}

/* Blocks an index's walk reports: collect with test_blocks_collect as the walk's fn. */
struct test_blocks {
	void **p;
	size_t n, cap;
};

static inline int test_blocks_collect(const void *block, void *arg)
{
	struct test_blocks *b = arg;
	if (b->n == b->cap) {
		b->cap = b->cap ? 2 * b->cap : 1024;
		b->p = realloc(b->p, b->cap * sizeof(*b->p));
		REQUIRE(b->p != NULL);
	}
	b->p[b->n++] = (void *)block;
	return 0;
}

static inline int test_finish(const char *name)
{
	if (test_failures) {
		fprintf(stderr, "%s: %d check(s) failed\n", name, test_failures);
		return 1;
	}
	if (test_skips) {
		printf("%s: skipped (%d case(s) could not run here)\n", name, test_skips);
		return TEST_SKIPPED;
	}
	printf("%s: all checks passed\n", name);
	return 0;
}

#endif
