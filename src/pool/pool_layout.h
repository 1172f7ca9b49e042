/*
 * pool_layout.h - the on-media layout of a pool file (layout version 1).
 *
 *   offset 0          struct pool_header (one 4 KiB page)
 *   root_offset       root area (root_size bytes, zeroed at create)
 *   log_offset        log area (log_size bytes) for the framework's logs
 *   heap_offset       the heap (src/heap/heap_layout.h) up to the end of the file
 *
 * Invariant: every field before `checksum` is covered by the checksum (crc32 of the bytes
 * before it) and written at create; only tips_pool_grow() changes three of them (size,
 * heap_size, checksum), and only while a valid grow intent (below) names both the old
 * and the new size, so a reader that finds the intent can finish or discount a torn
 * update. Fields that change while the pool is in use live on their own cache line
 * after it and are not covered by the header checksum.
 */
#ifndef TIPS_POOL_POOL_LAYOUT_H
#define TIPS_POOL_POOL_LAYOUT_H

#include <stdint.h>

#define POOL_MAGIC "TIPSPOOL"          /* 8 bytes, no NUL stored */
#define POOL_LAYOUT_VERSION 1u
#define POOL_HEADER_SIZE 4096u
#define POOL_DEFAULT_ROOT_SIZE (1ull << 20)
#define POOL_AREA_ALIGN (2ull << 20)    /* log and heap start on 2 MiB boundaries */

#define POOL_GROW_MAGIC 0x574f5247534c4f50ull /* "POLSGROW" */

/*
 * The redo record of tips_pool_grow(): valid iff magic is POOL_GROW_MAGIC and checksum
 * matches. It is written (one cache line, one fence) only after the file is extended
 * and the heap's new chunk-table entries are persistent; that is the grow's commit
 * point. Whoever finds it valid (open, grow) writes the new geometry to the pool and
 * heap headers and then clears magic. Pools made before grow existed hold zeros here.
 */
struct pool_grow_intent {
	uint64_t magic;        /* POOL_GROW_MAGIC while a committed grow is unfinished, else 0 */
	uint64_t old_size;     /* pool size before the grow */
	uint64_t new_size;     /* pool size after it; the file is at least this long */
	uint64_t heap_nchunks; /* the heap's chunk count after it */
	uint64_t checksum;     /* crc32 of the fields above */
};

struct pool_header {
	/* ---- checksummed; set at create, size and heap_size changed only by a grow ---- */
	char magic[8];            /* POOL_MAGIC */
	uint32_t layout_version;  /* POOL_LAYOUT_VERSION */
	uint32_t header_bytes;    /* offsetof(struct pool_header, checksum) */
	uint8_t uuid[16];         /* random, set at create */
	uint64_t size;            /* pool size in bytes; the file is at least this long */
	uint64_t map_addr;        /* the fixed virtual address of offset 0 */
	uint64_t root_offset, root_size;
	uint64_t log_offset, log_size;
	uint64_t heap_offset, heap_size; /* heap_size = size - heap_offset */
	uint64_t create_time;     /* seconds since the epoch */
	uint64_t checksum;        /* crc32 of the bytes before this field */
	/* ---- mutable, one cache line of its own ---- */
	uint64_t clean __attribute__((aligned(64))); /* 1 after a clean close, 0 while open */
	uint64_t open_count;      /* times opened; diagnostic */
	/* ---- grow intent, one cache line of its own ---- */
	struct pool_grow_intent grow __attribute__((aligned(64)));
};

_Static_assert(sizeof(struct pool_header) <= POOL_HEADER_SIZE, "pool header fits its page");

#endif
