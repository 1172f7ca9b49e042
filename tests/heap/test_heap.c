/*
 * test_heap.c - unit tests of the persistent allocator (tips/heap.h).
 *
 * Covers: sizes across every class and extents, alignment, non-overlap, the walk and
 * the check, deferred frees (no reuse before a checkpoint), double and foreign frees,
 * freshness by generation, a full heap that recovers, the MLog (checkpoint applies it,
 * rollback undoes it, a full lane log refuses instead of committing it), reserves of
 * logged allocations (handed out, released at a checkpoint, undone by a rollback and
 * after a power failure), and that a close/reopen keeps every block.
 */
#define _GNU_SOURCE
#include "test_util.h"
#include "heap/heap_private.h" /* test_stale_header_not_fresh: a run's bitmap */

#include <pthread.h>
#include <stdint.h>

#define POOL_SIZE (64ull << 20)

struct walk_count {
	uint64_t blocks, pending;
};

static int count_blocks(const struct tips_heap_block *b, void *arg)
{
	struct walk_count *c = arg;
	c->blocks++;
	c->pending += b->pending != 0;
	return 0;
}

static uint64_t heap_blocks(struct tips_heap *h)
{
	struct walk_count c = { 0, 0 };
	tips_heap_walk(h, count_blocks, &c);
	return c.blocks;
}

static void check_consistent(struct tips_heap *h)
{
	struct tips_heap_report rep;
	int rc = tips_heap_check(h, &rep);
	if (rc)
		fprintf(stderr, "heap check: %s\n", rep.first_error);
	CHECK(rc == 0);
}

/* Every size from 1 byte to past the largest run class, and extents. */
static void test_sizes(struct tips_heap *h, uint64_t *slots)
{
	static const size_t sizes[] = { 1,     15,    16,    17,    31,     32,      100,
					128,   129,   1000,  4096,  5000,   16368,   16369,
					65519, 65520, 65521, 100000, 262128, 1u << 20 };
	size_t n = sizeof(sizes) / sizeof(sizes[0]);
	for (size_t i = 0; i < n; i++) {
		CHECK_RC(tips_heap_alloc_to(h, sizes[i], &slots[i]), 0);
		char *p = (char *)slots[i];
		REQUIRE(p != NULL);
		CHECK(((uintptr_t)p % 16) == 0);
		CHECK(tips_heap_usable_size(h, p) >= sizes[i]);
		memset(p, (int)(i + 1), sizes[i]);
	}
	/* No block overlaps another: each still holds its own byte. */
	for (size_t i = 0; i < n; i++) {
		const unsigned char *p = (const unsigned char *)slots[i];
		size_t bad = 0;
		for (size_t k = 0; k < sizes[i]; k++)
			bad += p[k] != (unsigned char)(i + 1);
		CHECK(bad == 0);
	}
	CHECK(heap_blocks(h) == n);
	check_consistent(h);
	for (size_t i = 0; i < n; i++) {
		CHECK_RC(tips_heap_free_from(h, &slots[i]), 0);
		CHECK(slots[i] == 0);
	}
	CHECK_RC(tips_heap_checkpoint(h, 0), 0);
	CHECK(heap_blocks(h) == 0);
	check_consistent(h);
}

/* tips_heap_usable_size() answers 0, never faults, for any address that is not the
 * start of an allocated block: a damaged pool's pointers are checked with it. */
static void test_usable_size_any_address(struct tips_heap *h, uint64_t *slots)
{
	CHECK_RC(tips_heap_alloc_to(h, 100, &slots[0]), 0);
	CHECK_RC(tips_heap_alloc_to(h, 300000, &slots[1]), 0); /* an extent */
	const char *run = (const char *)slots[0], *ext = (const char *)slots[1];
	CHECK(tips_heap_usable_size(h, run) >= 100);
	CHECK(tips_heap_usable_size(h, ext) >= 300000);
	const uintptr_t odd[] = { 0, 1, 8, 15, 16, 4096, (uintptr_t)run + 1, (uintptr_t)run - 16,
				  (uintptr_t)run + 8, (uintptr_t)ext + 4096, (uintptr_t)ext - 1,
				  (uintptr_t)h, (uintptr_t)slots, UINTPTR_MAX, UINTPTR_MAX - 15,
				  (uintptr_t)1 << 63, ((uintptr_t)run ^ ((uintptr_t)1 << 40)) };
	for (size_t i = 0; i < sizeof(odd) / sizeof(odd[0]); i++)
		CHECK(tips_heap_usable_size(h, (const void *)odd[i]) == 0);
	CHECK_RC(tips_heap_free_from(h, &slots[0]), 0);
	CHECK_RC(tips_heap_free_from(h, &slots[1]), 0);
	CHECK_RC(tips_heap_checkpoint(h, 0), 0);
	CHECK(tips_heap_usable_size(h, run) == 0); /* freed: no longer a block */
}

/* A freed block is not handed out again before the next checkpoint. */
static void test_deferred_reuse(struct tips_heap *h, uint64_t *slots)
{
	enum { N = 200 };
	CHECK_RC(tips_heap_checkpoint(h, 0), 0);
	for (int i = 0; i < N; i++)
		CHECK_RC(tips_heap_alloc_to(h, 48, &slots[i]), 0);
	uint64_t freed[N];
	for (int i = 0; i < N; i++) {
		freed[i] = slots[i];
		CHECK_RC(tips_heap_free_from(h, &slots[i]), 0);
	}
	for (int i = 0; i < N; i++) {
		CHECK_RC(tips_heap_alloc_to(h, 48, &slots[i]), 0);
		for (int k = 0; k < N; k++)
			if (slots[i] == freed[k]) {
				fprintf(stderr, "block %#llx reused before a checkpoint\n",
					(unsigned long long)freed[k]);
				test_failures++;
			}
	}
	for (int i = 0; i < N; i++)
		CHECK_RC(tips_heap_free_from(h, &slots[i]), 0);
	CHECK_RC(tips_heap_checkpoint(h, 0), 0);
	/* After the checkpoint the space comes back. */
	struct tips_heap_stats st;
	tips_heap_stats(h, &st);
	CHECK(st.bytes_in_use == 0);
	CHECK(heap_blocks(h) == 0);
}

static void test_bad_frees(struct tips_heap *h, uint64_t *slots)
{
	CHECK_RC(tips_heap_alloc_to(h, 64, &slots[0]), 0);
	void *p = (void *)slots[0];
	CHECK_RC(tips_heap_free_logged(h, p), 0);
	CHECK_RC(tips_heap_free_logged(h, p), TIPS_EINVAL); /* double free */
	CHECK(strstr(tips_errormsg(), "double free") != NULL);
	uint64_t empty = 0;
	CHECK_RC(tips_heap_free_from(h, &empty), TIPS_EINVAL);
	int on_stack;
	CHECK_RC(tips_heap_free_logged(h, &on_stack), TIPS_EINVAL);
	CHECK_RC(tips_heap_alloc_to(h, 64, &slots[0]), TIPS_EINVAL); /* slot holds a block */
	CHECK(strstr(tips_errormsg(), "already holds") != NULL);
	CHECK_RC(tips_heap_alloc_to(h, 0, &slots[1]), TIPS_EINVAL);
	CHECK(slots[1] == 0);
	CHECK_RC(tips_heap_alloc_to(h, (size_t)1 << 40, &slots[1]), TIPS_ETOOBIG);
	CHECK(slots[1] == 0);
	CHECK_RC(tips_heap_checkpoint(h, 0), 0);
	slots[0] = 0; /* freed through the MLog */
	CHECK(heap_blocks(h) == 0);
}

static void test_freshness(struct tips_heap *h, uint64_t *slots)
{
	CHECK_RC(tips_heap_checkpoint(h, 0), 0);
	uint64_t gen = tips_heap_generation(h);
	CHECK_RC(tips_heap_alloc_to(h, 100, &slots[0]), 0);
	CHECK_RC(tips_heap_alloc_to(h, 300000, &slots[1]), 0);
	char *small = (char *)slots[0], *big = (char *)slots[1];
	CHECK(tips_heap_block_is_fresh(h, small));
	CHECK(tips_heap_block_is_fresh(h, small + 99)); /* interior address */
	CHECK(tips_heap_block_is_fresh(h, big + 299999));
	CHECK_RC(tips_heap_checkpoint(h, 0), 0);
	CHECK(tips_heap_generation(h) == gen + 1);
	CHECK(!tips_heap_block_is_fresh(h, small));
	CHECK(!tips_heap_block_is_fresh(h, big + 4096));
	int local;
	CHECK(!tips_heap_block_is_fresh(h, &local));
	CHECK_RC(tips_heap_free_from(h, &slots[0]), 0);
	CHECK_RC(tips_heap_free_from(h, &slots[1]), 0);
	CHECK_RC(tips_heap_checkpoint(h, 0), 0);
}

/*
 * A free slot whose stale header holds the current generation is not fresh. A crash can
 * leave one: the header's line reached PM, the bitmap's and the allocation record's did
 * not, and the generation did not advance. tips_heap_block_is_fresh() reads the header
 * first, so it must then read the bitmap; here the bit is cleared by hand, as such a
 * crash leaves it.
 */
static void test_stale_header_not_fresh(struct tips_heap *h, uint64_t *slots)
{
	CHECK_RC(tips_heap_checkpoint(h, 0), 0);
	CHECK_RC(tips_heap_alloc_to(h, 100, &slots[0]), 0);
	char *b = (char *)slots[0];
	struct block_ref ref;
	CHECK(block_find(h, b, false, &ref));
	CHECK(!ref.extent); /* a 100-byte block lies in a run */
	CHECK(ref.hdr->alloc_gen == tips_heap_generation(h));
	uint64_t *word = &run_bitmap(h, ref.chunk)[ref.bit / 64];
	uint64_t bit = 1ull << (ref.bit % 64);
	CHECK(tips_heap_block_is_fresh(h, b));
	*word &= ~bit;
	CHECK(!tips_heap_block_is_fresh(h, b));
	CHECK(!tips_heap_block_is_fresh(h, b + 50));
	*word |= bit;
	CHECK(tips_heap_block_is_fresh(h, b));
	CHECK_RC(tips_heap_free_from(h, &slots[0]), 0);
	CHECK_RC(tips_heap_checkpoint(h, 0), 0);
}

/* Fill the heap until ENOMEM; then everything still works after freeing. */
static void test_full(struct tips_heap *h, uint64_t *slots, size_t nslots)
{
	size_t n = 0;
	int rc = 0;
	while (n < nslots && (rc = tips_heap_alloc_to(h, 4000, &slots[n])) == 0)
		n++;
	CHECK(rc == TIPS_ENOMEM);
	CHECK(n > 1000);             /* a 64 MiB pool holds many 4 KB blocks */
	CHECK(slots[n] == 0);        /* the failed call left its slot alone */
	check_consistent(h);
	CHECK(heap_blocks(h) == n);
	for (size_t i = 0; i < n; i++)
		CHECK_RC(tips_heap_free_from(h, &slots[i]), 0);
	/* No checkpoint: the allocation that finds the heap full applies the deferred
	 * frees itself (no MLog record is pending) and succeeds. */
	CHECK_RC(tips_heap_alloc_to(h, 4000, &slots[0]), 0);
	CHECK_RC(tips_heap_free_from(h, &slots[0]), 0);
	CHECK_RC(tips_heap_checkpoint(h, 0), 0);
	CHECK(heap_blocks(h) == 0);
	/* Empty runs went back to the chunk pool: a large extent fits again. */
	CHECK_RC(tips_heap_alloc_to(h, 16u << 20, &slots[0]), 0);
	CHECK_RC(tips_heap_free_from(h, &slots[0]), 0);
	CHECK_RC(tips_heap_checkpoint(h, 0), 0);
}

static void test_mlog(struct tips_heap *h, uint64_t *slots)
{
	CHECK_RC(tips_heap_checkpoint(h, 0), 0);
	void *a, *b, *keep;
	CHECK_RC(tips_heap_alloc_logged(h, 200, &keep), 0);
	CHECK_RC(tips_heap_checkpoint(h, TIPS_HEAP_FLUSH_LOGGED_BLOCKS), 0);
	/* keep is now permanent. A logged alloc and a logged free of keep, then roll back. */
	CHECK_RC(tips_heap_alloc_logged(h, 64, &a), 0);
	CHECK_RC(tips_heap_alloc_logged(h, 500000, &b), 0);
	CHECK_RC(tips_heap_free_logged(h, keep), 0);
	CHECK(heap_blocks(h) == 3);
	CHECK_RC(tips_heap_rollback(h), 0);
	CHECK(heap_blocks(h) == 1); /* a and b returned, the free of keep forgotten */
	CHECK(tips_heap_usable_size(h, keep) >= 200);
	/* keep can be freed again (the forgotten free left no pending mark). */
	CHECK_RC(tips_heap_free_logged(h, keep), 0);
	CHECK_RC(tips_heap_checkpoint(h, 0), 0);
	CHECK(heap_blocks(h) == 0);

	/* With MLog records pending, a full lane log refuses rather than commit them. */
	CHECK_RC(tips_heap_alloc_logged(h, 32, &a), 0);
	int rc = 0;
	size_t i = 0;
	while (i < 100000 && (rc = tips_heap_alloc_to(h, 32, &slots[i])) == 0)
		i++;
	CHECK(rc == TIPS_ELOGFULL);
	CHECK_RC(tips_heap_rollback(h), 0);
	CHECK(heap_blocks(h) == i); /* the slot allocations stay, the logged one is gone */
	for (size_t k = 0; k < i; k++)
		CHECK_RC(tips_heap_free_from(h, &slots[k]), 0);
	CHECK_RC(tips_heap_checkpoint(h, 0), 0);
	CHECK(heap_blocks(h) == 0);
	check_consistent(h);
}

/* Blocks, contents and slots survive close and reopen at the same address. */
static void test_reopen(const char *path, struct tips_pool **pool)
{
	struct tips_heap *h = tips_pool_heap(*pool);
	uint64_t *slots = tips_pool_root(*pool, NULL);
	for (int i = 0; i < 100; i++) {
		CHECK_RC(tips_heap_alloc_to(h, (size_t)(i + 1) * 40, &slots[i]), 0);
		memset((void *)slots[i], i, (size_t)(i + 1) * 40);
		tips_persist((void *)slots[i], (size_t)(i + 1) * 40);
	}
	CHECK_RC(tips_pool_close(pool), 0);
	CHECK_RC(tips_pool_open(path, NULL, pool), 0);
	REQUIRE(*pool != NULL);
	h = tips_pool_heap(*pool);
	slots = tips_pool_root(*pool, NULL);
	CHECK(heap_blocks(h) == 100);
	for (int i = 0; i < 100; i++) {
		const unsigned char *p = (const unsigned char *)slots[i];
		REQUIRE(p != NULL);
		CHECK(p[0] == i && p[(i + 1) * 40 - 1] == i);
		CHECK(tips_heap_usable_size(h, p) >= (size_t)(i + 1) * 40);
	}
	check_consistent(h);
	for (int i = 0; i < 100; i++)
		CHECK_RC(tips_heap_free_from(h, &slots[i]), 0);
}

/*
 * One lane allocates b1 into slot S; another frees it and allocates b2 into S; power
 * fails before any checkpoint. Replay must leave S = b2, b1 free, nothing leaked, in
 * whichever order it visits the lanes: the scenario runs with the roles both ways.
 */
struct cross_lane {
	struct tips_heap *heap;
	uint64_t *slot;
	int helper_allocates_first; /* else the helper frees and reallocates */
	uint64_t b1, b2;
	pthread_barrier_t step;
};

static void cross_lane_first(struct cross_lane *cl)
{
	CHECK_RC(tips_heap_alloc_to(cl->heap, 40, cl->slot), 0);
	cl->b1 = *cl->slot;
}

static void cross_lane_second(struct cross_lane *cl)
{
	CHECK_RC(tips_heap_free_from(cl->heap, cl->slot), 0);
	CHECK_RC(tips_heap_alloc_to(cl->heap, 40, cl->slot), 0);
	cl->b2 = *cl->slot;
}

static void *cross_lane_helper(void *arg)
{
	struct cross_lane *cl = arg;
	if (cl->helper_allocates_first)
		cross_lane_first(cl);
	pthread_barrier_wait(&cl->step);
	pthread_barrier_wait(&cl->step);
	if (!cl->helper_allocates_first)
		cross_lane_second(cl);
	pthread_barrier_wait(&cl->step); /* both threads alive throughout: distinct lanes */
	return NULL;
}

static void test_cross_lane_slot(int helper_allocates_first)
{
	char path[256];
	test_path(path, sizeof(path), "/dev/shm", "crosslane");
	struct tips_pool *pool = test_pool_create_at(path, 16u << 20, TIPS_MEDIA_SIM);
	struct tips_heap *h = tips_pool_heap(pool);
	struct cross_lane cl = { .heap = h, .slot = tips_pool_root(pool, NULL),
				 .helper_allocates_first = helper_allocates_first };
	pthread_barrier_init(&cl.step, NULL, 2);
	pthread_t t;
	REQUIRE(pthread_create(&t, NULL, cross_lane_helper, &cl) == 0);
	pthread_barrier_wait(&cl.step);
	if (!helper_allocates_first)
		cross_lane_first(&cl);
	pthread_barrier_wait(&cl.step);
	if (helper_allocates_first)
		cross_lane_second(&cl);
	pthread_barrier_wait(&cl.step);
	pthread_join(t, NULL);
	pthread_barrier_destroy(&cl.step);
	CHECK(cl.b1 != 0 && cl.b2 != 0 && cl.b1 != cl.b2);
	CHECK_RC(tips_pool_sim_power_fail(&pool, 0.0, 1), 0);

	REQUIRE(tips_pool_open(path, NULL, &pool) == 0);
	h = tips_pool_heap(pool);
	uint64_t *slot = tips_pool_root(pool, NULL);
	CHECK(*slot == cl.b2);
	CHECK(tips_heap_usable_size(h, (void *)cl.b2) >= 40);
	CHECK(tips_heap_usable_size(h, (void *)cl.b1) == 0);
	CHECK(heap_blocks(h) == 1);
	check_consistent(h);
	CHECK_RC(tips_pool_close(&pool), 0);
	unlink(path);
}

/* Runs that lanes hold stay theirs only while there is room: when the heap is full,
 * empty runs of every lane go back to the chunk pool (and at open, too). */
struct small_allocs {
	struct tips_heap *heap;
	uint64_t *slots;
};

static void *alloc_two_and_free(void *arg)
{
	struct small_allocs *sa = arg;
	for (int i = 0; i < 2; i++)
		CHECK_RC(tips_heap_alloc_to(sa->heap, 16 + (size_t)i * 200, &sa->slots[i]), 0);
	for (int i = 0; i < 2; i++)
		CHECK_RC(tips_heap_free_from(sa->heap, &sa->slots[i]), 0);
	return NULL;
}

static void test_idle_runs_released(void)
{
	char path[256];
	struct tips_pool *pool = test_pool_create(path, sizeof(path), "idleruns", 32ull << 20);
	struct tips_heap *h = tips_pool_heap(pool);
	uint64_t *root = tips_pool_root(pool, NULL);
	enum { THREADS = 40 };
	pthread_t t[THREADS];
	struct small_allocs sa[THREADS];
	/* Threads start while others still run, so they hold distinct lanes and runs. */
	for (int i = 0; i < THREADS; i++) {
		sa[i] = (struct small_allocs){ h, &root[i * 8] };
		REQUIRE(pthread_create(&t[i], NULL, alloc_two_and_free, &sa[i]) == 0);
	}
	for (int i = 0; i < THREADS; i++)
		pthread_join(t[i], NULL);
	CHECK_RC(tips_heap_checkpoint(h, 0), 0);
	struct tips_heap_stats st;
	tips_heap_stats(h, &st);
	CHECK(st.bytes_in_use == 0);
	/* Nearly the whole heap in one extent: only possible if no run is kept. */
	size_t big = (size_t)st.bytes_total - (2u << 20);
	CHECK_RC(tips_heap_alloc_to(h, big, &root[1000]), 0);
	CHECK_RC(tips_heap_free_from(h, &root[1000]), 0);
	CHECK_RC(tips_pool_close(&pool), 0);
	CHECK_RC(tips_pool_open(path, NULL, &pool), 0);
	REQUIRE(pool != NULL);
	h = tips_pool_heap(pool);
	root = tips_pool_root(pool, NULL);
	CHECK_RC(tips_heap_alloc_to(h, big, &root[1000]), 0);
	check_consistent(h);
	CHECK_RC(tips_pool_close(&pool), 0);
	unlink(path);
}

/* A logged allocation held by a slot and freed through it, then rolled back: the block
 * is freed once, and the heap's accounting stays exact (a run is reused to the end). */
static void test_logged_then_slot_free_rollback(struct tips_heap *h, uint64_t *slots)
{
	CHECK_RC(tips_heap_checkpoint(h, 0), 0);
	struct tips_heap_stats before;
	tips_heap_stats(h, &before);
	void *p;
	CHECK_RC(tips_heap_alloc_logged(h, 60000, &p), 0);
	slots[0] = (uint64_t)p;
	tips_persist(&slots[0], sizeof(uint64_t));
	CHECK_RC(tips_heap_free_from(h, &slots[0]), 0);
	CHECK_RC(tips_heap_rollback(h), 0);
	struct tips_heap_stats after;
	tips_heap_stats(h, &after);
	CHECK(after.bytes_in_use == before.bytes_in_use);
	CHECK(heap_blocks(h) == 0);
	/* Five blocks of a class with three to a run: runs fill and refill exactly. */
	for (int i = 0; i < 5; i++)
		CHECK_RC(tips_heap_alloc_to(h, 60000, &slots[i]), 0);
	CHECK(heap_blocks(h) == 5);
	check_consistent(h);
	for (int i = 0; i < 5; i++)
		CHECK_RC(tips_heap_free_from(h, &slots[i]), 0);
	CHECK_RC(tips_heap_checkpoint(h, 0), 0);
}

/* A slot-owned block freed through the MLog, then a crash and a rollback: the free is
 * forgotten, so the block must still be owned by its slot. */
static void test_slot_block_logged_free_crash(void)
{
	char path[256];
	test_path(path, sizeof(path), "/dev/shm", "slotlogfree");
	struct tips_pool *pool = test_pool_create_at(path, 16u << 20, TIPS_MEDIA_SIM);
	struct tips_heap *h = tips_pool_heap(pool);
	uint64_t *slot = tips_pool_root(pool, NULL);
	CHECK_RC(tips_heap_alloc_to(h, 40, slot), 0);
	uint64_t a = *slot;
	CHECK_RC(tips_heap_free_logged(h, (void *)a), 0);
	CHECK_RC(tips_heap_alloc_to(h, 40, slot + 1), 0); /* its fence makes the free durable */
	CHECK_RC(tips_pool_sim_power_fail(&pool, 0.0, 5), 0);
	REQUIRE(tips_pool_open(path, NULL, &pool) == 0);
	h = tips_pool_heap(pool);
	slot = tips_pool_root(pool, NULL);
	CHECK_RC(tips_heap_rollback(h), 0);
	CHECK(*slot == a);
	CHECK(tips_heap_usable_size(h, (void *)a) >= 40);
	CHECK(heap_blocks(h) == 2);
	check_consistent(h);
	CHECK_RC(tips_pool_close(&pool), 0);
	unlink(path);
}

/*
 * Reserves (heap_set_logged_reserve): logged allocations come out of the lane's two
 * reserves, one size each, each block distinct and fresh; a third size is allocated one
 * by one; a checkpoint frees what is left of the reserves and keeps what was handed
 * out; a rollback frees every block of them, handed out or not.
 */
static void test_logged_reserve(struct tips_heap *h)
{
	CHECK_RC(tips_heap_checkpoint(h, 0), 0);
	uint64_t base = heap_blocks(h);
	struct tips_heap_stats st0, st;
	tips_heap_stats(h, &st0);
	heap_set_logged_reserve(h, 8);
	void *p[12], *other, *third;
	for (int i = 0; i < 3; i++) {
		CHECK_RC(tips_heap_alloc_logged(h, 64, &p[i]), 0);
		CHECK(tips_heap_usable_size(h, p[i]) >= 64);
		CHECK(tips_heap_block_is_fresh(h, p[i]));
		memset(p[i], 0xa5, 64);
		for (int j = 0; j < i; j++)
			CHECK(p[i] != p[j]);
	}
	CHECK(heap_blocks(h) == base + 8); /* 3 handed out, 5 waiting */
	CHECK_RC(tips_heap_alloc_logged(h, 200, &other), 0); /* the second reserve */
	CHECK(heap_blocks(h) == base + 16);
	CHECK_RC(tips_heap_alloc_logged(h, 1000, &third), 0); /* both taken: one by one */
	CHECK(heap_blocks(h) == base + 17);
	check_consistent(h);
	CHECK_RC(tips_heap_checkpoint(h, 0), 0);
	CHECK(heap_blocks(h) == base + 5); /* the 12 left are free again */
	check_consistent(h);
	for (int i = 0; i < 3; i++)
		CHECK(tips_heap_usable_size(h, p[i]) >= 64 && !tips_heap_block_is_fresh(h, p[i]));
	for (int i = 3; i < 12; i++) /* 8 from one reserve, the 9th from the next */
		CHECK_RC(tips_heap_alloc_logged(h, 64, &p[i]), 0);
	CHECK(heap_blocks(h) == base + 5 + 16);
	CHECK_RC(tips_heap_rollback(h), 0);
	CHECK(heap_blocks(h) == base + 5);
	check_consistent(h);
	tips_heap_stats(h, &st); /* the bytes of the 5 kept blocks, no more */
	uint64_t kept = tips_heap_usable_size(h, other) + tips_heap_usable_size(h, third);
	for (int i = 0; i < 3; i++)
		kept += tips_heap_usable_size(h, p[i]);
	CHECK(st.bytes_in_use == st0.bytes_in_use + kept);
	heap_set_logged_reserve(h, 0);
	for (int i = 0; i < 3; i++)
		CHECK_RC(tips_heap_free_logged(h, p[i]), 0);
	CHECK_RC(tips_heap_free_logged(h, other), 0);
	CHECK_RC(tips_heap_free_logged(h, third), 0);
	CHECK_RC(tips_heap_checkpoint(h, 0), 0);
	CHECK(heap_blocks(h) == base);
	tips_heap_stats(h, &st);
	CHECK(st.bytes_in_use == st0.bytes_in_use);
	check_consistent(h);
}

/* A power failure while a reserve is out (its records durable, some blocks handed
 * out): recovery's rollback frees every reserved block, whatever lines were evicted. */
static void test_logged_reserve_power_fail(double evict)
{
	char path[256];
	test_path(path, sizeof(path), "/dev/shm", "reservepf");
	struct tips_pool *pool = test_pool_create_at(path, 32u << 20, TIPS_MEDIA_SIM);
	struct tips_heap *h = tips_pool_heap(pool);
	uint64_t *slot = tips_pool_root(pool, NULL);
	CHECK_RC(tips_heap_alloc_to(h, 40, slot), 0); /* one block that stays */
	CHECK_RC(tips_heap_checkpoint(h, 0), 0);
	heap_set_logged_reserve(h, HEAP_RESERVE_MAX);
	void *p;
	for (int i = 0; i < 5; i++)
		CHECK_RC(tips_heap_alloc_logged(h, 48, &p), 0);
	CHECK(heap_blocks(h) == 1 + HEAP_RESERVE_MAX);
	CHECK_RC(tips_pool_sim_power_fail(&pool, evict, 7), 0);
	REQUIRE(tips_pool_open(path, NULL, &pool) == 0);
	h = tips_pool_heap(pool);
	CHECK_RC(tips_heap_rollback(h), 0);
	CHECK(heap_blocks(h) == 1);
	check_consistent(h);
	CHECK_RC(tips_pool_close(&pool), 0);
	unlink(path);
}

int main(void)
{
	test_slot_block_logged_free_crash();
	test_logged_reserve_power_fail(0.0);
	test_logged_reserve_power_fail(0.5);
	test_idle_runs_released();
	test_cross_lane_slot(1);
	test_cross_lane_slot(0);

	char path[256];
	struct tips_pool *pool = test_pool_create(path, sizeof(path), "heap", POOL_SIZE);
	struct tips_heap *h = tips_pool_heap(pool);
	size_t root_size;
	uint64_t *slots = tips_pool_root(pool, &root_size);
	size_t nslots = root_size / sizeof(uint64_t);
	CHECK(tips_heap_generation(h) >= 1);
	check_consistent(h);

	test_sizes(h, slots);
	test_usable_size_any_address(h, slots);
	test_deferred_reuse(h, slots);
	test_bad_frees(h, slots);
	test_freshness(h, slots);
	test_stale_header_not_fresh(h, slots);
	test_full(h, slots, nslots - 1);
	test_mlog(h, slots);
	test_logged_reserve(h);
	test_logged_then_slot_free_rollback(h, slots);
	test_reopen(path, &pool);

	CHECK_RC(tips_pool_close(&pool), 0);
	unlink(path);
	return test_finish("test_heap");
}
