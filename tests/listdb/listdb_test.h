/*
 * listdb_test.h - what the ListDB tests share: scratch database paths under /dev/shm
 * (one prefix per test process, removed at exit), a watchdog that names the phase a
 * hung test was in, and the command line of a test of several cases.
 *
 * A database with D domains is D pool files (@path, @path.d1 ...); tips_pool_create()
 * builds each under a hidden temporary name (".NAME.creating-XXXXXX") first. Every one
 * of these contains the prefix "tips-test-tests-TEST-PID-", so ld_cleanup() removes all
 * files a run (or its forked children) left, whatever state they were left in.
 */
#ifndef TIPS_LISTDB_TEST_H
#define TIPS_LISTDB_TEST_H

#include "test_util.h"

#include <dirent.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include <tips/listdb.h>

#define LD_SHM "/dev/shm"

static char ld_prefix[96];
static pid_t ld_owner; /* only this process cleans up (not forked children) */
static const char *volatile ld_phase = "start";

/* Removes every file of this run under /dev/shm. */
static void ld_cleanup(void)
{
	if (getpid() != ld_owner)
		return;
	DIR *d = opendir(LD_SHM);
	if (!d)
		return;
	struct dirent *e;
	char p[512];
	while ((e = readdir(d)) != NULL) {
		if (strstr(e->d_name, ld_prefix)) {
			snprintf(p, sizeof(p), "%s/%s", LD_SHM, e->d_name);
			unlink(p);
		}
	}
	closedir(d);
}

/* A fresh database path of this run. */
static inline void ld_path(char *out, size_t len)
{
	static int counter;
	snprintf(out, len, "%s/%s%d.pool", LD_SHM, ld_prefix, counter++);
	tips_listdb_destroy(out);
}

static void ld_watchdog(int sig)
{
	(void)sig;
	const char *a = "listdb test: watchdog fired (a hang?) in phase: ";
	const char *p = ld_phase;
	if (write(2, a, strlen(a)) < 0 || write(2, p, strlen(p)) < 0 || write(2, "\n", 1) < 0)
		_exit(3);
	ld_cleanup();
	_exit(3);
}

/* A crash (without a sanitizer, which reports it itself): say where, remove the pools,
 * and die of the same signal. */
static inline void ld_crash(int sig)
{
	const char *a = "listdb test: fatal signal in phase: ";
	const char *p = ld_phase;
	if (write(2, a, strlen(a)) < 0 || write(2, p, strlen(p)) < 0 || write(2, "\n", 1) < 0)
		sig = SIGKILL;
	ld_cleanup();
	signal(sig, SIG_DFL);
	raise(sig);
}

/* Call first in main(): names the run, removes leftovers at exit, arms the watchdog
 * (@seconds; 0: none). */
static inline void ld_test_init(const char *test, unsigned seconds)
{
	ld_owner = getpid();
	snprintf(ld_prefix, sizeof(ld_prefix), "tips-test-tests-%s-%d-", test, (int)ld_owner);
	ld_cleanup();
	atexit(ld_cleanup);
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
	signal(SIGSEGV, ld_crash);
	signal(SIGBUS, ld_crash);
	signal(SIGABRT, ld_crash);
	signal(SIGFPE, ld_crash);
#endif
	if (seconds) {
		signal(SIGALRM, ld_watchdog);
		alarm(seconds);
	}
}

static inline double ld_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The command line of a test of several cases: [CASE] [--seed N] [--rounds N]. Sets
 * *@only (NULL: every case), *@seed (default: from the clock and the pid; never 0) and
 * *@rounds (left as it is unless given); names the run (ld_test_init(@test, 240)) and
 * prints the seed. Returns 0, or 2 after printing @usage (then exit with it). */
static inline int ld_test_args(int argc, char **argv, const char *test, const char *usage,
			       const char **only, uint64_t *seed, unsigned *rounds)
{
	*only = NULL;
	*seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 20);
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--seed") && i + 1 < argc)
			*seed = strtoull(argv[++i], NULL, 0);
		else if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
			*rounds = (unsigned)strtoul(argv[++i], NULL, 0);
		else if (argv[i][0] != '-')
			*only = argv[i];
		else {
			fprintf(stderr, "usage: %s\n", usage);
			return 2;
		}
	}
	if (!*seed)
		*seed = 1;
	ld_test_init(test, 240);
	printf("seed %llu\n", (unsigned long long)*seed);
	return 0;
}

/* CHECK_RC for calls whose failure makes the rest of a case pointless. */
#define REQUIRE_RC(call, want)                                                           \
	do {                                                                             \
		int rq_ = (call);                                                        \
		if (rq_ != (want)) {                                                     \
			fprintf(stderr, "%s:%d: %s returned %d (%s: %s), wanted %d [%s]\n", \
				__FILE__, __LINE__, #call, rq_, tips_strerror(rq_),      \
				tips_errormsg(), (want), ld_phase);                      \
			exit(1);                                                         \
		}                                                                        \
	} while (0)

#endif
