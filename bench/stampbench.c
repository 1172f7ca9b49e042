/*
 * stampbench.c - `tips-stampbench`: what a commit stamp costs, the invariant TSC
 * (rdtscp, what the framework uses) against a shared atomic counter (fetch_add), with
 * T threads taking stamps as fast as they can. Backs the choice in docs/framework.md,
 * "Commit stamps". Prints nanoseconds per stamp per thread, median of R runs.
 *
 * usage: tips-stampbench [THREADS [STAMPS_PER_THREAD [REPEAT]]]   (2, 10M, 5)
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <x86intrin.h>

static _Atomic uint64_t counter __attribute__((aligned(64)));
static uint64_t per_thread;
static int use_counter;
static pthread_barrier_t barrier;

static void *run(void *arg)
{
	uint64_t sink = 0;
	unsigned aux;
	pthread_barrier_wait(&barrier);
	if (use_counter)
		for (uint64_t i = 0; i < per_thread; i++)
			sink += atomic_fetch_add(&counter, 1);
	else
		for (uint64_t i = 0; i < per_thread; i++)
			sink += __rdtscp(&aux);
	*(uint64_t *)arg = sink;
	return NULL;
}

static double measure(unsigned threads)
{
	pthread_t t[64];
	uint64_t sinks[64];
	struct timespec a, b;
	pthread_barrier_init(&barrier, NULL, threads + 1);
	for (unsigned i = 0; i < threads; i++)
		pthread_create(&t[i], NULL, run, &sinks[i]);
	clock_gettime(CLOCK_MONOTONIC, &a);
	pthread_barrier_wait(&barrier);
	for (unsigned i = 0; i < threads; i++)
		pthread_join(t[i], NULL);
	clock_gettime(CLOCK_MONOTONIC, &b);
	pthread_barrier_destroy(&barrier);
	double ns = (double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec);
	return ns / (double)per_thread;
}

static int cmp(const void *x, const void *y)
{
	double a = *(const double *)x, b = *(const double *)y;
	return (a > b) - (a < b);
}

int main(int argc, char **argv)
{
	unsigned threads = argc > 1 ? (unsigned)atoi(argv[1]) : 2;
	per_thread = argc > 2 ? strtoull(argv[2], NULL, 0) : 10000000ull;
	unsigned repeat = argc > 3 ? (unsigned)atoi(argv[3]) : 5;
	if (threads < 1 || threads > 64 || repeat < 1 || repeat > 99 || !per_thread) {
		fprintf(stderr, "usage: tips-stampbench [THREADS [STAMPS_PER_THREAD [REPEAT]]]\n");
		return 2;
	}
	double v[2][99];
	for (unsigned r = 0; r < repeat; r++)
		for (int k = 0; k < 2; k++) {
			use_counter = (k + (int)r) % 2; /* alternate which goes first */
			v[use_counter][r] = measure(threads);
		}
	qsort(v[0], repeat, sizeof(double), cmp);
	qsort(v[1], repeat, sizeof(double), cmp);
	printf("%u threads, %llu stamps each, median of %u: rdtscp %.1f ns/stamp, shared "
	       "counter %.1f ns/stamp (%.1fx)\n", threads, (unsigned long long)per_thread, repeat,
	       v[0][repeat / 2], v[1][repeat / 2], v[1][repeat / 2] / v[0][repeat / 2]);
	return 0;
}
