/*
 * entry.c - the checksum that tells a complete log entry from a torn or stale one
 * (entry.h). It covers everything the writer sets once (LSN, lengths, op, height, key,
 * value) and nothing that changes later (flags, next pointers).
 */
#include "listdb/entry.h"

static inline uint64_t mix(uint64_t h, uint64_t v)
{
	h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
	h *= 0xff51afd7ed558ccdull;
	return h ^ (h >> 32);
}

uint32_t ld_entry_checksum(const struct ld_entry *e)
{
	uint64_t h = 0x6c697374ull;
	h = mix(h, e->lsn);
	h = mix(h, ((uint64_t)e->klen << 32) | e->vlen);
	h = mix(h, ((uint64_t)e->op << 8) | e->height);
	const unsigned char *p = ld_key(e);
	size_t n = ld_pad8(e->klen) + ld_pad8(e->vlen); /* padding is written as zeros */
	for (size_t i = 0; i + 8 <= n; i += 8) {
		uint64_t w;
		memcpy(&w, p + i, 8);
		h = mix(h, w);
	}
	return (uint32_t)(h ^ (h >> 29));
}
