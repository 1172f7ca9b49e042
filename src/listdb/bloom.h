/*
 * bloom.h - a blocked Bloom filter per MemTable and L0 table, so that a get skips the
 * tables that cannot hold its key (an LSM-tree staple the ListDB paper does not use;
 * `bloom_bits` in listdb_config, 0 turns it off, see docs/listdb.md).
 *
 * Each key sets 6 bits inside one 64-byte block chosen by its hash, so a query costs
 * one cache line. Bits are set with atomic OR before the key's node is linked, so any
 * reader that can find the node also sees its bits; a filter never gives a false "no".
 */
#ifndef TIPS_LISTDB_BLOOM_H
#define TIPS_LISTDB_BLOOM_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

#include "util/kv.h"

struct ld_bloom {
	uint64_t blocks; /* 64-byte blocks */
	_Atomic uint64_t words[];
};

static inline struct ld_bloom *ld_bloom_create(uint64_t keys, unsigned bits_per_key)
{
	if (!bits_per_key)
		return NULL;
	uint64_t blocks = (keys * bits_per_key + 511) / 512;
	if (blocks == 0)
		blocks = 1;
	struct ld_bloom *b = aligned_alloc(64, (sizeof(*b) + blocks * 64 + 63) & ~(size_t)63);
	if (!b)
		return NULL;
	b->blocks = blocks;
	for (uint64_t i = 0; i < blocks * 8; i++)
		atomic_init(&b->words[i], 0);
	return b;
}

static inline uint64_t ld_bloom_hash(const void *k, size_t kl)
{
	return hash_key(k, kl);
}

/* The block's 8 words and the 6 bits of @h in it. */
#define LD_BLOOM_BITS(h, i) (((h) >> (16 + 8 * (i))) & 511)

/* Asks for @h's block, for writing, ahead of ld_bloom_add. */
static inline void ld_bloom_prefetch(const struct ld_bloom *b, uint64_t h)
{
	if (b)
		__builtin_prefetch(&b->words[(h % b->blocks) * 8], 1);
}

/* Sets @h's bits: one atomic OR per word that lacks some of them (a locked instruction
 * is a full barrier, so one per word rather than one per bit). */
static inline void ld_bloom_add(struct ld_bloom *b, uint64_t h)
{
	if (!b)
		return;
	_Atomic uint64_t *w = &b->words[(h % b->blocks) * 8];
	uint64_t mask[8] = { 0 };
	for (int i = 0; i < 6; i++) {
		unsigned bit = (unsigned)LD_BLOOM_BITS(h, i);
		mask[bit >> 6] |= 1ull << (bit & 63);
	}
	for (int i = 0; i < 8; i++)
		if (mask[i] && (atomic_load_explicit(&w[i], memory_order_relaxed) & mask[i]) != mask[i])
			atomic_fetch_or_explicit(&w[i], mask[i], memory_order_release);
}

static inline bool ld_bloom_maybe(const struct ld_bloom *b, uint64_t h)
{
	if (!b)
		return true;
	const _Atomic uint64_t *w = &b->words[(h % b->blocks) * 8];
	for (int i = 0; i < 6; i++) {
		unsigned bit = (unsigned)LD_BLOOM_BITS(h, i);
		if (!(atomic_load_explicit(&w[bit >> 6], memory_order_acquire) & (1ull << (bit & 63))))
			return false;
	}
	return true;
}

#endif /* TIPS_LISTDB_BLOOM_H */
