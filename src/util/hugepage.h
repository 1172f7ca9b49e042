/*
 * hugepage.h - large DRAM blocks on transparent huge pages (private to libtips).
 *
 * The dram builds of the indexes take their big arrays (a hash table's buckets, a
 * CLHT table) from idx_dram_alloc(), and a lookup in an array far larger than the
 * TLB's reach pays a page walk on top of its cache miss with 4 KiB pages. Where THP
 * is in `madvise` mode, a block advised MADV_HUGEPAGE gets 2 MiB pages instead.
 *
 * Invariant: every block hugepage_alloc() returns is an ordinary malloc block, so
 * free() (directly or through grace_free()) releases it; the advice is only a hint
 * (a kernel without THP, or one that refuses it, leaves 4 KiB pages and nothing else
 * changes).
 */
#ifndef TIPS_UTIL_HUGEPAGE_H
#define TIPS_UTIL_HUGEPAGE_H

#include <stddef.h>

/* Blocks at least this big are aligned to and advised for huge pages. */
#define HUGEPAGE_MIN_BLOCK (2u << 20)

/* malloc(@size); a block of HUGEPAGE_MIN_BLOCK bytes or more starts on a 2 MiB
 * boundary and its whole 2 MiB pages are advised MADV_HUGEPAGE. NULL without memory. */
void *hugepage_alloc(size_t size);

#endif /* TIPS_UTIL_HUGEPAGE_H */
