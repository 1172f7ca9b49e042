/*
 * idx_alloc.h - the allocator of the dram builds of the indexes, with a fault injector
 * for tests (private to libtips and its tests).
 *
 * IDX_ALLOC of a dram-NAME build (idx_hooks.h) is idx_dram_alloc(): malloc (through
 * hugepage_alloc(), which puts blocks of 2 MiB or more on huge pages), unless a test
 * armed the injector. The injector models a heap that fills up: after
 * idx_alloc_fail_after(n), n more allocations succeed and every later one returns NULL
 * until idx_alloc_never_fail(). It lets tests check the contract of idx_hooks.h that an
 * operation whose allocation fails returns TIPS_ENOMEM and leaves the index exactly as
 * it was (tests/indexes/test_index_nomem.c).
 *
 * Invariant: with the injector disarmed (the default, and the state every program but
 * a fault-injection test stays in), idx_dram_alloc(size) is hugepage_alloc(size) plus
 * one relaxed atomic load; its blocks are malloc blocks (free() releases them). The
 * countdown is per process and shared by all threads; arm it only while a single
 * thread allocates, or accept that which thread's allocation fails is not defined.
 */
#ifndef TIPS_IDX_ALLOC_H
#define TIPS_IDX_ALLOC_H

#include <stdbool.h>
#include <stddef.h>

/* hugepage_alloc(@size), or NULL when the injector's countdown has run out.
 * Thread-safe. */
void *idx_dram_alloc(size_t size);

/* Tests only. Arms the injector: @n (>= 0) more idx_dram_alloc() calls succeed, then
 * every call fails until idx_alloc_never_fail(). */
void idx_alloc_fail_after(long n);

/* Tests only. Disarms the injector: every call allocates again. */
void idx_alloc_never_fail(void);

/* Tests only. True if the armed injector has refused an allocation (it then refuses
 * every one until idx_alloc_never_fail(), which clears this). */
bool idx_alloc_has_failed(void);

#endif /* TIPS_IDX_ALLOC_H */
