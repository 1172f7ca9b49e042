/*
 * grow.h - room for @need elements in an array that grows by doubling (realloc), for
 * the lists a thread appends to and keeps for reuse (a batch's items, a replay queue,
 * the ranges a worker flushes).
 *
 * Invariant: on success *@cap >= @need and the first elements are kept; on failure
 * (out of memory, or a size that overflows) *@p and *@cap are unchanged, so the
 * caller's array is still whole and it may fall back or report.
 */
#ifndef TIPS_UTIL_GROW_H
#define TIPS_UTIL_GROW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

/* Grows *@p (*@cap elements of @elem bytes) to at least @need elements, from @first
 * elements when empty. */
static inline bool array_grow(void **p, size_t *cap, size_t need, size_t elem, size_t first)
{
	if (need <= *cap)
		return true;
	size_t c = *cap ? *cap : first;
	while (c < need) {
		if (c > SIZE_MAX / 2)
			return false;
		c *= 2;
	}
	if (c > SIZE_MAX / elem)
		return false;
	void *q = realloc(*p, c * elem);
	if (!q)
		return false;
	*p = q;
	*cap = c;
	return true;
}

#endif
