/*
 * test_olog_room_wakeup.c - a writer waiting for OLog room must not lose its request
 * when a reclamation begun before its last records were applied clears room_wanted
 * (db.c, olog_wait_room). Fails without the fix: W1 waits until W2's next burst.
 *
 * W1 commits batches of ~0.45 of its OLog; W2 writes small values in bursts, so that
 * reclamations (which clear room_wanted) happen while W1 commits and asks for room. */
#define _GNU_SOURCE
#include <tips/tips.h>
#include <tips/batch.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
static struct tips_db *db;
static atomic_int stop, stalls;
static atomic_long w1_last_progress_ms;
static long now_ms(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1000 + t.tv_nsec / 1000000; }
static void *w1(void *a)
{
	struct tips_batch *b; tips_batch_new(&b);
	static char v[56 << 10]; memset(v, 'v', sizeof(v));
	unsigned long i = 0; long worst = 0;
	while (!stop) {
		tips_batch_clear(b);
		char k[16];
		for (int j = 0; j < 2; j++) { snprintf(k, sizeof(k), "big%lu", (i * 2 + j) % 64); tips_batch_put(b, k, strlen(k), v, sizeof(v)); }
		long t0 = now_ms();
		int rc = tips_batch_commit(db, b);
		long dt = now_ms() - t0;
		if (rc) { fprintf(stderr, "commit rc %d %s\n", rc, tips_errormsg()); exit(3); }
		if (dt > worst) worst = dt;
		if (dt > 150) atomic_store(&stalls, stalls + 1), printf("W1 batch %lu waited %ld ms (lost room request, rescued by W2's next burst)\n", i, dt), fflush(stdout);
		atomic_store(&w1_last_progress_ms, now_ms());
		i++;
	}
	printf("W1: %lu batches, worst wait %ld ms\n", i, worst);
	return NULL;
}
static void *w2(void *a)
{
	static char v[4096]; memset(v, 'w', sizeof(v));
	unsigned long i = 0;
	while (!stop) {
		long end = now_ms() + 30;
		while (now_ms() < end && !stop) { char k[16]; snprintf(k, sizeof(k), "s%lu", i++ % 1000); tips_put(db, k, strlen(k), v, sizeof(v)); }
		usleep(400000);
	}
	return NULL;
}
int main(int argc, char **argv)
{
	int secs = argc > 1 ? atoi(argv[1]) : 10;
	const char *path = "/dev/shm/tips-test-olog-room-wakeup.pool";
	unlink(path);
	struct tips_config cfg; tips_config_init(&cfg);
	cfg.flags = TIPS_CREATE; cfg.pool_size = 256ull << 20; cfg.olog_size = 256 << 10; cfg.ulog_size = 8 << 20;
	if (tips_open(path, &cfg, tips_index_find("tips-art"), &db)) { fprintf(stderr, "open: %s\n", tips_errormsg()); return 2; }
	atomic_store(&w1_last_progress_ms, now_ms());
	pthread_t a, b; pthread_create(&a, NULL, w1, NULL); pthread_create(&b, NULL, w2, NULL);
	long end = now_ms() + secs * 1000L; int hung = 0;
	while (now_ms() < end) { usleep(100000); if (now_ms() - atomic_load(&w1_last_progress_ms) > 3000) { hung = 1; break; } }
	if (hung) { printf("HANG: W1 has waited for OLog room for 3 s; pid %d\n", getpid()); fflush(stdout); if (argc > 2) pause(); _exit(1); }
	stop = 1; pthread_join(a, NULL); pthread_join(b, NULL);
	tips_close(&db); unlink(path);
	if (stalls) { printf("FAIL: %d lost requests for OLog room\n", (int)stalls); return 1; }
	printf("PASS\n");
	return 0;
}
