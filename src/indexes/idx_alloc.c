/*
 * idx_alloc.c - idx_dram_alloc(), the IDX_ALLOC of the dram builds of the indexes, and
 * its fault injector for tests (see idx_alloc.h).
 *
 * Blocks come from hugepage_alloc(): malloc, and for blocks of 2 MiB or more (the big
 * arrays of the hash indexes) memory advised for transparent huge pages.
 *
 * The only mutable state is the countdown in struct alloc_faults: ALLOC_DISARMED (the
 * fast path: one relaxed load, then malloc), n >= 0 armed (n more allocations succeed),
 * ALLOC_EXHAUSTED once an allocation was refused: it stays there, so every allocation
 * after the first failure fails too, as on a full heap, until a test disarms the
 * injector, and the test can tell whether the injector refused anything.
 */
#include "indexes/idx_alloc.h"
#include "util/hugepage.h"

#include <stdatomic.h>
#include <stdlib.h>

#define ALLOC_DISARMED (-1L)
#define ALLOC_EXHAUSTED (-2L)

static struct alloc_faults {
	_Atomic long countdown; /* allocations left before one is refused; ALLOC_DISARMED:
				 never; ALLOC_EXHAUSTED: one was, all are */
} faults = { ALLOC_DISARMED };

/* The armed path: takes one allocation off the countdown, or fails at 0. */
static void *alloc_counted(size_t size)
{
	long left = atomic_load_explicit(&faults.countdown, memory_order_relaxed);
	for (;;) {
		if (left == ALLOC_DISARMED)
			return hugepage_alloc(size);
		if (left == ALLOC_EXHAUSTED)
			return NULL;
		long next = left == 0 ? ALLOC_EXHAUSTED : left - 1;
		if (atomic_compare_exchange_weak_explicit(&faults.countdown, &left, next,
							  memory_order_relaxed,
							  memory_order_relaxed))
			return next == ALLOC_EXHAUSTED ? NULL : hugepage_alloc(size);
	}
}

void *idx_dram_alloc(size_t size)
{
	if (__builtin_expect(atomic_load_explicit(&faults.countdown, memory_order_relaxed) ==
				     ALLOC_DISARMED,
			     1))
		return hugepage_alloc(size);
	return alloc_counted(size);
}

void idx_alloc_fail_after(long n)
{
	atomic_store_explicit(&faults.countdown, n < 0 ? 0 : n, memory_order_relaxed);
}

void idx_alloc_never_fail(void)
{
	atomic_store_explicit(&faults.countdown, ALLOC_DISARMED, memory_order_relaxed);
}

bool idx_alloc_has_failed(void)
{
	return atomic_load_explicit(&faults.countdown, memory_order_relaxed) == ALLOC_EXHAUSTED;
}
