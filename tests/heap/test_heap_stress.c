/*
 * test_heap_stress.c - the allocator under concurrency.
 *
 *   test_heap_stress [--threads T] [--ops N]
 *
 * T threads each own a range of slots in the root area and, at random, allocate into
 * an empty slot (filling the block with a stamp of thread, slot and sequence number),
 * or verify and free a full one; a few use the MLog (logged pairs). One more thread
 * checkpoints after every 500 completed operations. Invariants checked:
 *   - a block's stamp is intact when it is freed (no other allocation overlapped it);
 *   - no two live slots share a block;
 *   - at the end the heap walk lists exactly the live blocks and the check passes;
 *   - after close and reopen, the same holds.
 */
#include "test_util.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>

#define POOL_SIZE (256ull << 20)
#define SLOTS_PER_THREAD 512
#define MAX_THREADS 16

struct stress {
	struct tips_heap *heap;
	uint64_t *slots; /* SLOTS_PER_THREAD per thread, in the pool */
	uint64_t ops;
	_Atomic int running;
	_Atomic uint64_t done_ops; /* paces the checkpointer */
	_Atomic uint64_t corrupt, failed, logfull;
};

struct worker {
	struct stress *st;
	int id;
};

static uint64_t rng_next(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void stamp(uint64_t *p, size_t words, uint64_t tag)
{
	for (size_t i = 0; i < words; i++)
		p[i] = tag ^ (i * 0x9e3779b97f4a7c15ull);
}

static int stamp_ok(const uint64_t *p, size_t words, uint64_t tag)
{
	for (size_t i = 0; i < words; i++)
		if (p[i] != (tag ^ (i * 0x9e3779b97f4a7c15ull)))
			return 0;
	return 1;
}

static size_t words_of(size_t size) { return size / 8; }

/* As an MLog owner would: on a full lane log, checkpoint and try again. */
#define RETRY_LOGFULL(st, call)                                                          \
	({                                                                               \
		int rc__;                                                                \
		while ((rc__ = (call)) == TIPS_ELOGFULL) {                               \
			atomic_fetch_add(&(st)->logfull, 1);                             \
			if (tips_heap_checkpoint((st)->heap, 0) != 0)                    \
				atomic_fetch_add(&(st)->failed, 1);                      \
		}                                                                        \
		rc__;                                                                    \
	})

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	struct stress *st = w->st;
	uint64_t *mine = st->slots + (size_t)w->id * SLOTS_PER_THREAD;
	uint64_t tags[SLOTS_PER_THREAD] = { 0 };
	size_t sizes[SLOTS_PER_THREAD] = { 0 };
	uint64_t rng = 0x1234567ull * (uint64_t)(w->id + 1);
	for (uint64_t op = 0; op < st->ops; op++) {
		unsigned s = (unsigned)(rng_next(&rng) % SLOTS_PER_THREAD);
		if (rng_next(&rng) % 20 == 0) { /* an MLog pair */
			void *p;
			if (RETRY_LOGFULL(st, tips_heap_alloc_logged(st->heap, 64, &p)) != 0 ||
			    RETRY_LOGFULL(st, tips_heap_free_logged(st->heap, p)) != 0)
				atomic_fetch_add(&st->failed, 1);
			continue;
		}
		int rc;
		if (mine[s] == 0) {
			size_t size = 16 + (rng_next(&rng) % 64) * 8 * (1 + rng_next(&rng) % 4);
			rc = RETRY_LOGFULL(st, tips_heap_alloc_to(st->heap, size, &mine[s]));
			if (rc == 0) {
				tags[s] = ((uint64_t)w->id << 48) ^ ((uint64_t)s << 32) ^ op;
				sizes[s] = size;
				stamp((uint64_t *)mine[s], words_of(size), tags[s]);
			}
		} else {
			if (!stamp_ok((const uint64_t *)mine[s], words_of(sizes[s]), tags[s]))
				atomic_fetch_add(&st->corrupt, 1);
			rc = RETRY_LOGFULL(st, tips_heap_free_from(st->heap, &mine[s]));
		}
		atomic_fetch_add_explicit(&st->done_ops, 1, memory_order_relaxed);
		if (rc) {
			fprintf(stderr, "thread %d op %llu: %s: %s\n", w->id, (unsigned long long)op,
				tips_strerror(rc), tips_errormsg());
			atomic_fetch_add(&st->failed, 1);
		}
	}
	/* Final verification of everything still held. */
	for (unsigned s = 0; s < SLOTS_PER_THREAD; s++)
		if (mine[s] && !stamp_ok((const uint64_t *)mine[s], words_of(sizes[s]), tags[s]))
			atomic_fetch_add(&st->corrupt, 1);
	return NULL;
}

/* Checkpoints after every 500 operations the workers complete, concurrently with them. */
static void *checkpointer_main(void *arg)
{
	struct stress *st = arg;
	uint64_t last = 0;
	while (atomic_load(&st->running)) {
		uint64_t now = atomic_load(&st->done_ops);
		if (now - last < 500) {
			sched_yield();
			continue;
		}
		last = now;
		if (tips_heap_checkpoint(st->heap, 0) != 0)
			atomic_fetch_add(&st->failed, 1);
	}
	return NULL;
}

struct live {
	uint64_t *slots;
	size_t nslots, blocks, unowned;
};

static int count_live(const struct tips_heap_block *b, void *arg)
{
	struct live *l = arg;
	l->blocks++;
	for (size_t i = 0; i < l->nslots; i++)
		if (l->slots[i] == (uint64_t)b->ptr)
			return 0;
	l->unowned++;
	return 0;
}

static void check_live(struct tips_heap *h, uint64_t *slots, size_t nslots)
{
	size_t live = 0;
	for (size_t i = 0; i < nslots; i++) {
		if (!slots[i])
			continue;
		live++;
		CHECK(tips_heap_usable_size(h, (void *)slots[i]) > 0);
		for (size_t k = i + 1; k < nslots; k++)
			if (slots[k] == slots[i]) {
				fprintf(stderr, "slots %zu and %zu share a block\n", i, k);
				test_failures++;
			}
	}
	struct live l = { slots, nslots, 0, 0 };
	tips_heap_walk(h, count_live, &l);
	CHECK(l.blocks == live);
	CHECK(l.unowned == 0);
	struct tips_heap_report rep;
	CHECK(tips_heap_check(h, &rep) == 0);
}

int main(int argc, char **argv)
{
	int threads = 4;
	uint64_t ops = 200000;
	for (int i = 1; i + 1 < argc; i += 2) {
		if (strcmp(argv[i], "--threads") == 0)
			threads = atoi(argv[i + 1]);
		else if (strcmp(argv[i], "--ops") == 0)
			ops = strtoull(argv[i + 1], NULL, 0);
	}
	REQUIRE(threads >= 1 && threads <= MAX_THREADS);
	char path[256];
	struct tips_pool *pool = test_pool_create(path, sizeof(path), "heapstress", POOL_SIZE);
	size_t root_size;
	uint64_t *slots = tips_pool_root(pool, &root_size);
	size_t nslots = (size_t)threads * SLOTS_PER_THREAD;
	REQUIRE(nslots * sizeof(uint64_t) <= root_size);

	struct stress st = { .heap = tips_pool_heap(pool), .slots = slots, .ops = ops };
	atomic_store(&st.running, 1);
	pthread_t tid[MAX_THREADS], ckpt;
	struct worker w[MAX_THREADS];
	REQUIRE(pthread_create(&ckpt, NULL, checkpointer_main, &st) == 0);
	for (int i = 0; i < threads; i++) {
		w[i] = (struct worker){ &st, i };
		REQUIRE(pthread_create(&tid[i], NULL, worker_main, &w[i]) == 0);
	}
	for (int i = 0; i < threads; i++)
		pthread_join(tid[i], NULL);
	atomic_store(&st.running, 0);
	pthread_join(ckpt, NULL);

	CHECK(atomic_load(&st.corrupt) == 0);
	CHECK(atomic_load(&st.failed) == 0);
	struct tips_heap_stats hs;
	tips_heap_stats(st.heap, &hs);
	printf("threads=%d ops/thread=%llu allocs=%llu frees=%llu checkpoints=%llu "
	       "logfull=%llu\n", threads, (unsigned long long)ops,
	       (unsigned long long)hs.allocs, (unsigned long long)hs.frees,
	       (unsigned long long)hs.checkpoints, (unsigned long long)atomic_load(&st.logfull));
	CHECK(hs.checkpoints > 0);
	CHECK_RC(tips_heap_checkpoint(st.heap, 0), 0);
	check_live(st.heap, slots, nslots);

	CHECK_RC(tips_pool_close(&pool), 0);
	CHECK_RC(tips_pool_open(path, NULL, &pool), 0);
	REQUIRE(pool != NULL);
	slots = tips_pool_root(pool, NULL);
	check_live(tips_pool_heap(pool), slots, nslots);
	CHECK_RC(tips_pool_close(&pool), 0);
	unlink(path);
	return test_finish("test_heap_stress");
}
