/*
 * pool_layout.h - the on-media layout of a pool file (layout version 1).
 *
 *   offset 0          struct pool_header (one 4 KiB page)
 *   root_offset       root area (root_size bytes, zeroed at create)
 *   log_offset        log area (log_size bytes) for the framework's logs
 *   heap_offset       the heap (src/heap/heap_layout.h) up to the end of the file
 *
 * Invariant: every field before `checksum` is written once, at create, and covered by
 * the checksum (crc32 of the bytes before it). Fields that change while the pool is in
 * use live on their own cache line after it and are never checksummed.
 */
#ifndef TIPS_PM_POOL_LAYOUT_H
#define TIPS_PM_POOL_LAYOUT_H

#include <stdint.h>

#define POOL_MAGIC "TIPSPOOL"          /* 8 bytes, no NUL stored */
#define POOL_LAYOUT_VERSION 1u
#define POOL_HEADER_SIZE 4096u
#define POOL_DEFAULT_ROOT_SIZE (1ull << 20)
#define POOL_AREA_ALIGN (2ull << 20)    /* log and heap start on 2 MiB boundaries */

struct pool_header {
	/* ---- immutable, checksummed ---- */
	char magic[8];            /* POOL_MAGIC */
	uint32_t layout_version;  /* POOL_LAYOUT_VERSION */
	uint32_t header_bytes;    /* offsetof(struct pool_header, checksum) */
	uint8_t uuid[16];         /* random, set at create */
	uint64_t size;            /* pool size in bytes; the file is at least this long */
	uint64_t map_addr;        /* the fixed virtual address of offset 0 */
	uint64_t root_offset, root_size;
	uint64_t log_offset, log_size;
	uint64_t heap_offset, heap_size;
	uint64_t create_time;     /* seconds since the epoch */
	uint64_t checksum;        /* crc32 of the bytes before this field */
	/* ---- mutable, one cache line of its own ---- */
	uint64_t clean __attribute__((aligned(64))); /* 1 after a clean close, 0 while open */
	uint64_t open_count;      /* times opened; diagnostic */
};

_Static_assert(sizeof(struct pool_header) <= POOL_HEADER_SIZE, "pool header fits its page");

#endif
