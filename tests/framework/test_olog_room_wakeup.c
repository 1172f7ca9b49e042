/*
 * test_olog_room_wakeup.c - a writer waiting for OLog room never loses its request
 * (db.c, olog_wait_room): a reclamation begun before the writer's last records were
 * applied clears room_wanted, and the writer must raise it again, or replay, once those
 * records are applied, reclaims only past half an OLog while the writer's batch needs
 * less than that in use. That was the tips-server hang of server_diff_tips_art (a 1 MiB
 * string on a 2 MiB OLog).
 *
 *   test_olog_room_wakeup [SECONDS (10)]
 *
 * The big writer commits batches of about 0.45 of its 256 KiB OLog (two 56 KiB values);
 * the small writer puts 4 KiB values for 30 ms every BURST_GAP_S, and its writes start
 * the reclamations that clear room_wanted while the big writer commits. A lost request
 * is only answered by the small writer's next burst, so the big writer's commit then
 * takes about BURST_GAP_S; a kept one takes a replay of two values (longest commit 11
 * ms in 3 runs here). A commit slower than LOST_S counts as a lost request and fails
 * the test; without the fix, 3 runs of 10 s: one hung, two counted lost requests.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#include <tips/batch.h>

#include "test_util.h"

#define BIG_VALUE (56u << 10)
#define SMALL_VALUE 4096u
#define BURST_GAP_S 1.0
#define BURST_S 0.030
#define LOST_S 0.5

static struct tips_db *db;
static atomic_int stop;
static atomic_int lost;

static void *big_writer(void *arg)
{
	(void)arg;
	static char v[BIG_VALUE];
	memset(v, 'v', sizeof(v));
	struct tips_batch *b;
	REQUIRE(tips_batch_new(&b) == 0);
	double worst = 0;
	unsigned long n = 0;
	for (; !atomic_load(&stop); n++) {
		tips_batch_clear(b);
		for (unsigned j = 0; j < 2; j++) {
			char k[16];
			snprintf(k, sizeof(k), "big%lu", (n * 2 + j) % 64);
			CHECK_RC(tips_batch_put(b, k, strlen(k), v, sizeof(v)), 0);
		}
		double t0 = test_seconds();
		CHECK_RC(tips_batch_commit(db, b), 0);
		double waited = test_seconds() - t0;
		worst = waited > worst ? waited : worst;
		if (waited > LOST_S) {
			printf("batch %lu waited %.0f ms for OLog room: a lost request\n", n, waited * 1e3);
			atomic_fetch_add(&lost, 1);
		}
	}
	tips_batch_free(&b);
	printf("big writer: %lu batches, longest commit %.0f ms\n", n, worst * 1e3);
	return NULL;
}

static void *small_writer(void *arg)
{
	(void)arg;
	static char v[SMALL_VALUE];
	memset(v, 'w', sizeof(v));
	unsigned long i = 0;
	while (!atomic_load(&stop)) {
		for (double end = test_seconds() + BURST_S; test_seconds() < end && !atomic_load(&stop);) {
			char k[16];
			snprintf(k, sizeof(k), "s%lu", i++ % 1000);
			CHECK_RC(tips_put(db, k, strlen(k), v, sizeof(v)), 0);
		}
		for (double end = test_seconds() + BURST_GAP_S; test_seconds() < end && !atomic_load(&stop);)
			usleep(10000); /* the gap between bursts is the workload, not a wait */
	}
	return NULL;
}

int main(int argc, char **argv)
{
	int seconds = argc > 1 ? atoi(argv[1]) : 10;
	char path[256];
	test_path(path, sizeof(path), "/dev/shm", "olog-room-wakeup");
	struct tips_config cfg;
	tips_config_init(&cfg);
	cfg.flags = TIPS_CREATE;
	cfg.pool_size = 256ull << 20;
	cfg.olog_size = 256u << 10;
	cfg.ulog_size = 8u << 20;
	REQUIRE(tips_open(path, &cfg, tips_index_find("tips-art"), &db) == 0);
	pthread_t big, small;
	REQUIRE(pthread_create(&big, NULL, big_writer, NULL) == 0);
	REQUIRE(pthread_create(&small, NULL, small_writer, NULL) == 0);
	/* A lost request without a later burst waits for ever: the big writer is joined
	 * after the small one stops, so a hang shows as this test's timeout. */
	usleep((useconds_t)seconds * 1000000u);
	atomic_store(&stop, 1);
	pthread_join(small, NULL);
	pthread_join(big, NULL);
	CHECK(atomic_load(&lost) == 0);
	CHECK_RC(tips_close(&db), 0);
	unlink(path);
	return test_finish("test_olog_room_wakeup");
}
