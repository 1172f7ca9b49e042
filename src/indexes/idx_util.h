/*
 * idx_util.h - small helpers every index (and the pmdk-hash baseline) shares: an
 * unaligned 8-byte load, a 64-bit mixer, and the argument check of a write. Header-only
 * (static inline), so each build of each index gets its own copy and exports nothing.
 */
#ifndef TIPS_IDX_UTIL_H
#define TIPS_IDX_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <tips/tips.h>

/* 8 bytes at @p, any alignment, in host order. */
static inline uint64_t load64(const void *p)
{
	uint64_t w;
	memcpy(&w, p, sizeof(w));
	return w;
}

/* splitmix64's finalizer: every input bit flips each output bit with p ~ 1/2. */
static inline uint64_t mix64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 31;
	return x;
}

/* 0 if @key/@klen and @val/@vlen are acceptable to a write, else the code to return. */
static inline int check_kv(const void *key, size_t klen, const void *val, size_t vlen)
{
	if (!key || klen == 0 || (vlen && !val))
		return TIPS_EINVAL;
	if (klen > TIPS_MAX_KEY || vlen > TIPS_MAX_VALUE)
		return TIPS_ETOOBIG;
	return 0;
}

#endif /* TIPS_IDX_UTIL_H */
