/*
 * hugepage.c - hugepage_alloc(): large DRAM blocks on transparent huge pages (see
 * hugepage.h for the invariant: every block is a malloc block that free() releases).
 *
 * A block of 2 MiB or more comes from posix_memalign() with 2 MiB alignment (glibc
 * serves it from its own mapping, which free() unmaps), and its whole 2 MiB pages are
 * advised MADV_HUGEPAGE before anything touches them, so the first write of each
 * faults in one huge page. Smaller blocks are plain malloc: they share pages with
 * other blocks, which a huge-page advice would not help.
 */
#define _GNU_SOURCE
#include "util/hugepage.h"

#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

#define HUGEPAGE_SIZE ((size_t)2 << 20)

void *hugepage_alloc(size_t size)
{
	if (size < HUGEPAGE_MIN_BLOCK)
		return malloc(size);
	void *p;
	if (posix_memalign(&p, HUGEPAGE_SIZE, size))
		return NULL;
#ifdef MADV_HUGEPAGE
	/* A hint: where THP is off or refused, the block keeps 4 KiB pages. */
	(void)madvise(p, size & ~(HUGEPAGE_SIZE - 1), MADV_HUGEPAGE);
#endif
	return p;
}
