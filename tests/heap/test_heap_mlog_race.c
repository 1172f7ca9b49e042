/*
 * test_heap_mlog_race.c - the MLog's owner alone decides on its records.
 *
 * Slot users fill their lanes' logs as fast as they can, so lanes keep checkpointing
 * on their own; meanwhile the MLog's owner allocates a logged block, logs the free of a
 * committed block, and rolls both back. Whatever the interleaving, no automatic
 * checkpoint may commit the owner's undecided records: after each rollback the logged
 * allocation must be gone and the committed block must still be allocated.
 * (A lane that checked for MLog records before taking every lane, and checkpointed
 * after, failed this within a second.)
 */
#include "test_util.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>

enum { SLOT_USERS = 3, ROUNDS = 100000 };

struct race {
	struct tips_heap *heap;
	uint64_t *slots;
	atomic_int stop;
	atomic_long failures, stray_allocs, stray_frees, rounds;
};

static void *slot_user(void *arg)
{
	struct race *r = ((void **)arg)[0];
	uint64_t *slot = ((void **)arg)[1];
	while (!atomic_load(&r->stop)) {
		int rc = tips_heap_alloc_to(r->heap, 16, slot);
		if (rc == TIPS_ELOGFULL) {
			sched_yield(); /* the owner's records block checkpoints: wait for it */
			continue;
		}
		if (rc == 0) /* the owner's records block checkpoints: wait for it */
			WAIT_UNTIL((rc = tips_heap_free_from(r->heap, slot)) != TIPS_ELOGFULL,
				   "room in the allocation log for a free");
		if (rc && atomic_fetch_add(&r->failures, 1) == 0)
			fprintf(stderr, "slot user: %s: %s\n", tips_strerror(rc), tips_errormsg());
	}
	return NULL;
}

/* Allocates a block made permanent by the owner's own checkpoint. */
static void *committed_block(struct race *r)
{
	void *p = NULL;
	while (tips_heap_alloc_logged(r->heap, 1000, &p) == TIPS_ELOGFULL)
		tips_heap_rollback(r->heap);
	if (tips_heap_checkpoint(r->heap, 0) != 0)
		atomic_fetch_add(&r->failures, 1);
	return p;
}

static void *mlog_owner(void *arg)
{
	struct race *r = arg;
	void *keep = committed_block(r);
	for (long i = 0; i < ROUNDS; i++) {
		void *p;
		int rc = tips_heap_alloc_logged(r->heap, 1000, &p);
		if (rc == 0 && (rc = tips_heap_free_logged(r->heap, keep)) != 0)
			p = NULL; /* the allocation stays pending; the rollback undoes it */
		if (rc != 0 && rc != TIPS_ELOGFULL)
			atomic_fetch_add(&r->failures, 1);
		if (tips_heap_rollback(r->heap) != 0)
			atomic_fetch_add(&r->failures, 1);
		if (rc != 0)
			continue;
		atomic_fetch_add(&r->rounds, 1);
		if (tips_heap_usable_size(r->heap, p) != 0)
			atomic_fetch_add(&r->stray_allocs, 1);
		if (tips_heap_usable_size(r->heap, keep) == 0) {
			atomic_fetch_add(&r->stray_frees, 1);
			keep = committed_block(r);
		}
	}
	atomic_store(&r->stop, 1);
	return NULL;
}

int main(void)
{
	char path[256];
	struct tips_pool *pool = test_pool_create(path, sizeof(path), "mlograce", 8ull << 20);
	struct race r = { .heap = tips_pool_heap(pool), .slots = tips_pool_root(pool, NULL) };
	pthread_t users[SLOT_USERS], owner;
	void *args[SLOT_USERS][2];
	for (int i = 0; i < SLOT_USERS; i++) {
		args[i][0] = &r;
		args[i][1] = &r.slots[i * 8]; /* one cache line each */
		REQUIRE(pthread_create(&users[i], NULL, slot_user, args[i]) == 0);
	}
	REQUIRE(pthread_create(&owner, NULL, mlog_owner, &r) == 0);
	pthread_join(owner, NULL);
	for (int i = 0; i < SLOT_USERS; i++)
		pthread_join(users[i], NULL);
	printf("rounds=%ld stray_allocs=%ld stray_frees=%ld failures=%ld\n", atomic_load(&r.rounds),
	       atomic_load(&r.stray_allocs), atomic_load(&r.stray_frees), atomic_load(&r.failures));
	CHECK(atomic_load(&r.rounds) > ROUNDS / 10);
	CHECK(atomic_load(&r.stray_allocs) == 0);
	CHECK(atomic_load(&r.stray_frees) == 0);
	CHECK(atomic_load(&r.failures) == 0);
	struct tips_heap_report rep;
	CHECK(tips_heap_check(r.heap, &rep) == 0);
	CHECK_RC(tips_pool_close(&pool), 0);
	unlink(path);
	return test_finish("test_heap_mlog_race");
}
