/*
 * kv.h - small key-value helpers shared by the indexes, ListDB and the pmdk-hash
 * baseline: an unaligned 8-byte load, a 64-bit mixer, the byte-string hash of the hash
 * tables (and of ListDB's lookup cache and Bloom filters), the argument check of a
 * write, and the key order of the framework's scans with its 8-byte prefix. Header-only (static inline), so each build of each index gets its own copy and
 * exports nothing.
 *
 * Invariant: pure functions of their arguments (no state, no allocation, no error
 * message), so any layer may use them. hash_key() reaches the media (ListDB's entry
 * checksums, src/listdb/entry.c): it must never change without a new ListDB layout
 * version (LD_LAYOUT_VERSION).
 */
#ifndef TIPS_UTIL_KV_H
#define TIPS_UTIL_KV_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <tips/base.h>

/* 8 bytes at @p, any alignment, in host order. Always inline, so that it takes the
 * caller's sanitizer attributes (a no_sanitize_thread racy read), also at -O0. */
static inline __attribute__((always_inline)) uint64_t load64(const void *p)
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

/*
 * 64-bit hash of a byte string: each 8-byte word (the tail zero-padded) is multiplied,
 * folded and combined by multiply-rotate; the length is in the seed so that "a" and
 * "a\0" differ; mix64 finishes. An 8-byte key costs one word step and the finalizer.
 */
static inline uint64_t hash_key(const void *key, size_t len)
{
	const unsigned char *p = key;
	uint64_t h = 0x9e3779b97f4a7c15ull ^ ((uint64_t)len * 0xff51afd7ed558ccdull);
	for (; len >= 8; p += 8, len -= 8) {
		uint64_t w = load64(p) * 0xc4ceb9fe1a85ec53ull;
		w ^= w >> 29;
		h = ((h ^ w) << 27 | (h ^ w) >> 37) * 0x9e3779b97f4a7c15ull;
	}
	if (len) {
		uint64_t w = 0;
		memcpy(&w, p, len);
		w *= 0xc4ceb9fe1a85ec53ull;
		w ^= w >> 29;
		h = ((h ^ w) << 27 | (h ^ w) >> 37) * 0x9e3779b97f4a7c15ull;
	}
	return mix64(h);
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

/* The first 8 bytes of a key as a big-endian number, zero-padded: kv_prefix64(a) <
 * kv_prefix64(b) implies a < b in kv_cmp order, and a <= b implies <=. */
static inline uint64_t kv_prefix64(const void *key, size_t klen)
{
	uint64_t w = 0;
	if (klen) /* the empty key may be NULL */
		memcpy(&w, key, klen < 8 ? klen : 8);
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	w = __builtin_bswap64(w);
#endif
	return w;
}

/* Byte-string order of keys (memcmp, then the shorter first); NULL, 0 is the empty key. */
static inline int kv_cmp(const void *a, size_t alen, const void *b, size_t blen)
{
	if (alen == 8 && blen == 8) { /* one word compare: big-endian order is byte order */
		uint64_t x = kv_prefix64(a, 8), y = kv_prefix64(b, 8);
		return (x > y) - (x < y);
	}
	size_t common = alen < blen ? alen : blen;
	int c = common ? memcmp(a, b, common) : 0;
	return c ? c : (alen > blen) - (alen < blen);
}

#endif /* TIPS_UTIL_KV_H */
