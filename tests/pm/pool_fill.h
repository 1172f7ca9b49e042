/*
 * pool_fill.h - the grow tests' way to fill a pool's heap and to check it later: blocks
 * of BLOCK_BYTES (one heap chunk each) held by slots in the root area, each filled with
 * a pattern derived from its slot number and persisted, so that "the data is still
 * there" is checked byte for byte and "the new room is allocatable" is counted in
 * chunks. Include after test_util.h.
 */
#ifndef TIPS_TEST_PM_POOL_FILL_H
#define TIPS_TEST_PM_POOL_FILL_H

#include <stdint.h>

#define POOL_CHUNK_BYTES (256u * 1024u) /* a heap chunk (src/heap/heap_layout.h) */
#define BLOCK_BYTES 200000u
#define MAX_SLOTS 4096u

/* Byte @i of the block held by slot @s. */
static inline unsigned char pattern_byte(uint64_t s, size_t i)
{
	return (unsigned char)(s * 131 + i * 7 + (i >> 9));
}

/* Allocates blocks into slots from @first on until the heap is full; fills and persists
 * each. Returns the number of the first empty slot. */
static inline uint64_t fill_heap(struct tips_pool *pool, uint64_t first)
{
	uint64_t *slots = tips_pool_root(pool, NULL);
	struct tips_heap *heap = tips_pool_heap(pool);
	uint64_t s = first;
	for (; s < MAX_SLOTS; s++) {
		int rc = tips_heap_alloc_to(heap, BLOCK_BYTES, &slots[s]);
		if (rc == TIPS_ENOMEM)
			break;
		CHECK_RC(rc, 0);
		if (rc)
			break;
		unsigned char *b = (unsigned char *)(uintptr_t)slots[s];
		for (size_t i = 0; i < BLOCK_BYTES; i++)
			b[i] = pattern_byte(s, i);
		tips_persist(b, BLOCK_BYTES);
	}
	CHECK(s < MAX_SLOTS);
	return s;
}

/* Counts the slots in [0, @n) whose block holds its pattern; slots from @n on must be 0. */
static inline uint64_t intact_blocks(struct tips_pool *pool, uint64_t n)
{
	const uint64_t *slots = tips_pool_root(pool, NULL);
	uint64_t ok = 0;
	for (uint64_t s = 0; s < n; s++) {
		const unsigned char *b = (const unsigned char *)(uintptr_t)slots[s];
		if (!b || !tips_pool_contains(pool, b, BLOCK_BYTES))
			continue;
		size_t i = 0;
		while (i < BLOCK_BYTES && b[i] == pattern_byte(s, i))
			i++;
		ok += i == BLOCK_BYTES;
	}
	for (uint64_t s = n; s < MAX_SLOTS; s++)
		CHECK(slots[s] == 0);
	return ok;
}

static inline void expect_heap_clean(struct tips_pool *pool)
{
	struct tips_heap_report rep;
	CHECK_RC(tips_heap_check(tips_pool_heap(pool), &rep), 0);
	if (rep.errors)
		fprintf(stderr, "heap check: %s\n", rep.first_error);
}

static inline struct tips_pool *open_pool(const char *path)
{
	struct tips_pool *pool = NULL;
	int rc = tips_pool_open(path, NULL, &pool);
	if (rc) {
		fprintf(stderr, "open %s: %s\n", path, tips_errormsg());
		exit(1);
	}
	return pool;
}

#endif
