/*
 * scan_topk.h - ordered scans for unordered indexes (hash tables): keep the @limit
 * smallest keys offered, as private copies, then hand them out in key order.
 *
 * A hash index visits its whole table, offering each key >= the scan's start; the
 * keeper holds at most @limit copies in a max-heap (the largest kept key on top, so a
 * larger key is rejected in O(1) and a smaller one costs O(log limit)). Emitting sorts
 * the copies in place and calls the scan callback with no index lock held, so the
 * callback may call back into the index. Copies live in DRAM (malloc), in both builds.
 * Keys compare as byte strings: memcmp over the common length, the shorter first.
 */
#ifndef TIPS_SCAN_TOPK_H
#define TIPS_SCAN_TOPK_H

#include <stddef.h>

#include <tips/plugin.h>

struct topk_copy;

struct topk {
	struct topk_copy **a; /* max-heap by key: a[0] is the largest kept key */
	size_t n, cap;        /* copies kept, slots allocated */
	size_t limit;         /* keep at most this many (the scan's count, >= 1) */
};

/* Byte-string order of tips/base.h: memcmp over the common length, shorter first on a tie. */
int topk_key_cmp(const void *a, size_t alen, const void *b, size_t blen);

void topk_init(struct topk *t, size_t limit);

/* Offers one pair; kept if fewer than limit are kept or it is smaller than the largest
 * kept key. Returns 0 or TIPS_ENOMEM. */
int topk_offer(struct topk *t, const void *key, size_t klen, const void *val, size_t vlen);

/* Sorts what is kept and calls @fn for each pair in key order until it returns
 * non-zero. Returns the number of pairs passed to @fn (the stopping one included). */
long topk_emit(struct topk *t, tips_scan_fn fn, void *arg);

/* Frees the copies. */
void topk_free(struct topk *t);

#endif /* TIPS_SCAN_TOPK_H */
