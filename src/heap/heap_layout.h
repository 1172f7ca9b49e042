/*
 * heap_layout.h - on-media layout of the heap (layout version 1).
 *
 *   base + 0              struct heap_header (4 KiB)
 *   base + lanes_offset   nlanes lane logs, lane_records struct heap_record each
 *   base + table_offset   chunk table: one uint64 per chunk (see CHUNK_* below), with
 *                         room for more chunks up to chunks_offset
 *   base + chunks_offset  nchunks chunks of HEAP_CHUNK_SIZE bytes, chunk-aligned
 *
 * Growth. The heap area may grow at its end (tips_pool_grow): the new chunks follow the
 * last one, and their table entries, FREE, fill the table's spare room; only nchunks
 * and the checksum change, so a grown heap is an ordinary version-1 heap. A new heap's
 * table has room for HEAP_TABLE_GROWTH times its chunks (1/512 of the heap); heaps made
 * before that have the room that rounding the table up to a chunk left.
 *
 * A chunk is FREE, the head of an EXTENT (one large block spanning `count` chunks),
 * a CONTinuation of an extent (its distance to the head in the low bits), or a RUN of
 * equal blocks of one size class: a bitmap (bit set = allocated) in its first
 * RUN_BITMAP_BYTES, then the blocks. Every block starts with a struct block_header.
 *
 * Invariants:
 *  - a record is valid iff its tag's generation equals header.generation and its check
 *    matches its fields; advancing the generation (one 8-byte persisted store) retires
 *    every record at once;
 *  - a valid record was persistent before any metadata, slot or block change it
 *    describes could reach the media (stores to those happen after its fence), so
 *    replaying the valid records reconstructs every change since the last checkpoint;
 *  - within one generation a block has at most one ALLOC and one FREE record, ALLOC
 *    first (freed blocks are not reused before the generation advances);
 *  - frees reach the media only in a checkpoint, and until its generation advances the
 *    replay marks every block named by a record allocated again, so an interrupted
 *    checkpoint (or rollback) is undone whole and can be redone either way: the
 *    generation store is a checkpoint's single commit point;
 *  - a slot's last value needs no global order of records: it is the one block
 *    allocated into it in this generation that no FREE_SLOT record frees, else 0 if a
 *    FREE_SLOT record names the slot, else unchanged (callers change slots only through
 *    the heap, and allocate only into empty slots).
 */
#ifndef TIPS_HEAP_HEAP_LAYOUT_H
#define TIPS_HEAP_HEAP_LAYOUT_H

#include <stdint.h>

#define HEAP_MAGIC 0x5041454853504954ull /* "TIPSHEAP" */
#define HEAP_LAYOUT_VERSION 1u
#define HEAP_HEADER_SIZE 4096u
#define HEAP_CHUNK_SIZE (256u * 1024u)
#define HEAP_MAX_LANES 64u
/* Lanes a new heap gets. ThreadSanitizer's deadlock detector follows at most 64 held
 * locks, and a checkpoint holds every lane lock, so its builds format fewer lanes. */
#if defined(__SANITIZE_THREAD__)
#define HEAP_DEFAULT_LANES 16u
#else
#define HEAP_DEFAULT_LANES 64u
#endif
/* A new heap's chunk table holds this many times its chunks, so it can grow 64-fold. */
#define HEAP_TABLE_GROWTH 64u
#define RUN_BITMAP_BYTES 1024u
#define BLOCK_HEADER_SIZE 16u

struct heap_header {
	uint64_t magic;          /* HEAP_MAGIC */
	uint32_t layout_version; /* HEAP_LAYOUT_VERSION */
	uint32_t nlanes;         /* lane logs */
	uint64_t lane_records;   /* records per lane log */
	uint64_t nchunks;        /* changes only when the heap grows (heap_grow_apply) */
	uint64_t lanes_offset, table_offset, chunks_offset; /* from the heap base */
	uint64_t checksum;       /* crc32 of the fields above */
	/* Mutable, own cache line: the checkpoint generation, starts at 1. */
	uint64_t generation __attribute__((aligned(64)));
};

/* Chunk table entry: kind in the top byte, size class or count below it. */
#define CHUNK_FREE 0ull
#define CHUNK_RUN 1ull
#define CHUNK_EXTENT 2ull
#define CHUNK_CONT 3ull
#define CHUNK_KIND(e) ((e) >> 56)
#define CHUNK_ARG(e) ((e) & ((1ull << 56) - 1))
#define CHUNK_ENTRY(kind, arg) (((uint64_t)(kind) << 56) | (uint64_t)(arg))

/* Record types. LOGGED ones belong to the MLog and wait for checkpoint or rollback. */
enum heap_record_type {
	REC_ALLOC_SLOT = 1,
	REC_FREE_SLOT = 2,
	REC_ALLOC_LOGGED = 3,
	REC_FREE_LOGGED = 4,
};

/* One ownership change; 32 bytes, so it never straddles a cache line. */
struct heap_record {
	uint64_t block; /* address of the block header */
	uint64_t slot;  /* address of the slot, 0 for LOGGED records */
	uint64_t size;  /* requested size of the block */
	uint64_t tag;   /* generation << 24 | check << 8 | type; written last */
} __attribute__((aligned(32)));

/* The check (16 bits of a hash of the other fields) makes a record whose fields did not
 * all reach the media read as invalid: media guarantee only 8-byte atomic writes. */
static inline unsigned rec_check(uint64_t gen, uint64_t block, uint64_t slot, uint64_t size,
				 unsigned type)
{
	uint64_t x = block ^ (slot * 0x9e3779b97f4a7c15ull) ^ (size * 0xc2b2ae3d27d4eb4full) ^
		     ((gen << 8) | type);
	x ^= x >> 29;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 32;
	return (unsigned)(x & 0xffff);
}

#define REC_TAG(gen, check, type) (((gen) << 24) | ((uint64_t)(check) << 8) | (uint64_t)(type))
#define REC_GEN(tag) ((tag) >> 24)
#define REC_CHECK(tag) ((unsigned)(((tag) >> 8) & 0xffff))
#define REC_TYPE(tag) ((unsigned)((tag) & 0xff))

/* In front of every block. */
struct block_header {
	uint64_t alloc_gen; /* generation the block was allocated in */
	uint64_t size;      /* requested size */
};

#endif
