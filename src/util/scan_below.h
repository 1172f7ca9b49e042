/*
 * scan_below.h - the bounded scan that built-in indexes offer the framework's tips_scan
 * (src/framework/db.c, "Bounded scans"): as an ops table's scan, but only keys below a
 * bound are passed. Declared in util, the one folder both the framework and the
 * indexes may include (tests/tools/layering_check.py); defined by src/indexes/.
 *
 * Contract of a bounded scan: calls @fn, in order, for up to @count keys >= @start and
 * < @below (@blen bytes; the byte-string order of tips/base.h), with the same
 * concurrency and callback rules as the index's scan; returns the number of keys passed
 * to @fn (the one at which @fn asked to stop included) or a negative code; sets *@more
 * when keys may remain that the caller must get elsewhere: the bound was reached, or
 * the index ran out of keys before @count, and @fn did not stop the scan.
 */
#ifndef TIPS_UTIL_SCAN_BELOW_H
#define TIPS_UTIL_SCAN_BELOW_H

#include <stdbool.h>
#include <stddef.h>

#include <tips/plugin.h>

typedef long (*idx_scan_below_fn)(void *index, const void *start, size_t klen, size_t count,
				  const void *below, size_t blen, bool *more, tips_scan_fn fn,
				  void *arg);

struct idx_scan_below {
	const struct tips_index_ops *ops; /* the built-in table it belongs to */
	idx_scan_below_fn scan;
};

/* The bounded scan of @ops, a built-in index's table, or NULL if it has none
 * (src/indexes/registry.c). */
idx_scan_below_fn idx_scan_below_of(const struct tips_index_ops *ops);

#endif /* TIPS_UTIL_SCAN_BELOW_H */
