/*
 * idx_hooks.h - the three hooks every index in src/indexes/ is written against.
 *
 * design decision "One source, two builds": an index is one .c file compiled twice
 * (root CMakeLists.txt, TIPS_INDEXES):
 *
 *   -DIDX_PREFIX=dram_NAME               dram-NAME: malloc (through idx_dram_alloc(),
 *                                        idx_alloc.h, so tests can make it fail),
 *                                        free, no logging; the volatile original and
 *                                        our speed limit
 *   -DIDX_PREFIX=tips_NAME -DIDX_TIPS=1  tips-NAME: the TIPS plug-in (ATC'21, Figure 3
 *                                        and §3.2.6): tips_alloc, deferred tips_free,
 *                                        and an undo-log record before each store
 *
 * The hooks:
 *   IDX_ALLOC(size)      a new block, NOT zeroed; NULL when memory is exhausted. In the
 *                        tips build the block is fresh: stores into it need no IDX_LOG
 *                        during the operation that allocated it. Any call may return
 *                        NULL: an insert, update or remove that cannot get a block it
 *                        needs returns TIPS_ENOMEM with the index exactly as before
 *                        (nothing stored to existing memory, or every store undone;
 *                        its own blocks passed to IDX_FREE), so that the framework may
 *                        retry it once memory is reclaimed; growth that merely helps
 *                        (a resize, a smaller node) is skipped and tried again later.
 *   IDX_FREE(p)          release a block, deferred in both builds until every read
 *                        section open at the call has ended: dram, grace_free() (freed
 *                        by a reclaimer thread); tips, tips_free() (freed by the
 *                        next reclamation, which first waits for the read sections).
 *   IDX_LOG(addr, size)  must precede every store to memory that existed before the
 *                        current operation, covering exactly the bytes stored (size > 0).
 *                        A no-op in the dram build.
 *   IDX_LOG_VALUE(addr, size)
 *                        IDX_LOG for an update (or put) of key K that overwrites K's
 *                        value in place, where the bytes hold nothing but the value
 *                        (no key, length, pointer or kind): no undo record and no
 *                        fence, since recovery replays K's write again after any
 *                        rollback (tips_ulog_value in tips/plugin.h says why). A
 *                        store that changes what a word means, or which key owns it,
 *                        still takes IDX_LOG.
 *   IDX_LOG2(a1, s1, a2, s2)
 *                        IDX_LOG of two ranges with one fence instead of two: for an
 *                        operation that logs both before its first store to either
 *                        (the records are durable together when it returns).
 *   IDX_ALLOC_LOG(size, addr, lsize)
 *                        IDX_ALLOC(size) and IDX_LOG(addr, lsize) with one fence
 *                        instead of two: for an operation that allocates a block and
 *                        will store to [addr, addr+lsize) (the block's link, usually).
 *                        If it returns NULL, the range may still have been logged,
 *                        which is harmless: a logged range need not be stored to.
 *   IDX_CHECK_BLOCK(p, min_size)
 *                        true if @p may be followed: in the tips build, @p starts an
 *                        allocated heap block of >= min_size usable bytes
 *                        (tips_block_valid); in the dram build, @p is not NULL (malloc
 *                        blocks cannot be checked). open and walk use it on every
 *                        pointer read from PM, and IDX_CORRUPT(node, fmt, ...) to fail
 *                        with TIPS_ECORRUPT and a message naming the index and node.
 * An index never flushes or fences: the framework makes its stores durable.
 *
 * Safe memory reclamation for lock-free readers (part of the volatile original, the
 * same in both builds, not a conversion hook): any code that follows pointers without
 * holding a lock that excludes the writer who frees their target (lock-free lookups,
 * optimistic readers, lock-free writers' traversals) runs between IDX_READ_ENTER() and
 * IDX_READ_EXIT(). Sections nest and cost no fence. Never block on a lock inside one
 * if the holder may be waiting for a grace period; an index that frees through
 * IDX_FREE never does. Call IDX_FREE_BARRIER() in close() of an index that frees, so
 * that every deferred free of the dram build has run when close returns.
 *
 * Naming: the file defines IDX_BASE_NAME ("hash") before including this header;
 * IDX_SYM(ops) then names the build's ops table (dram_hash_ops / tips_hash_ops) and
 * IDX_NAME its user-visible name ("dram-hash" / "tips-hash"). Everything else in an
 * index file is static, so the two builds never export the same symbol.
 */
#ifndef TIPS_IDX_HOOKS_H
#define TIPS_IDX_HOOKS_H

#include <tips/plugin.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "indexes/idx_alloc.h"
#include "util/errors_internal.h"
#include "util/grace.h"
#include "util/seqcount.h"

#ifndef IDX_PREFIX
#error "IDX_PREFIX must be defined (dram_NAME or tips_NAME): see the root CMakeLists.txt"
#endif
#ifndef IDX_BASE_NAME
#error "define IDX_BASE_NAME (the index's name without its build prefix) before idx_hooks.h"
#endif

#define IDX_CAT_(a, b) a##_##b
#define IDX_CAT(a, b) IDX_CAT_(a, b)
/* IDX_SYM(ops) -> dram_hash_ops or tips_hash_ops (IDX_PREFIX pasted in front). */
#define IDX_SYM(x) IDX_CAT(IDX_PREFIX, x)

#ifdef IDX_TIPS
#define IDX_VARIANT "tips-"
#define IDX_ALLOC(size) tips_alloc(size)
#define IDX_FREE(p) tips_free(p)
#define IDX_LOG(addr, size) ((void)tips_ulog_add((addr), (size)))
#define IDX_LOG_VALUE(addr, size) ((void)tips_ulog_value((void *)(addr), (size)))
/* src/framework/plugin.c: the ranges' undo records, one fence for all of them. */
int fw_ulog_add_ranges(void *const addr[], const size_t size[], unsigned n);
#define IDX_LOG2(a1, s1, a2, s2)                                                     \
	((void)fw_ulog_add_ranges((void *const[]){ (void *)(a1), (void *)(a2) },     \
				  (const size_t[]){ (s1), (s2) }, 2))
/* src/framework/plugin.c: the block, and the range's undo record, under one fence. */
void *fw_alloc_logging(size_t size, void *addr, size_t lsize);
#define IDX_ALLOC_LOG(size, addr, lsize) fw_alloc_logging((size), (void *)(addr), (lsize))
#define IDX_FREE_BARRIER() ((void)0)
#define IDX_CHECK_BLOCK(p, min_size) (tips_block_valid((p), (min_size)) != 0)
#else
#define IDX_VARIANT "dram-"
#define IDX_ALLOC(size) idx_dram_alloc(size)
#define IDX_FREE(p) grace_free(p)
#define IDX_LOG(addr, size) ((void)(addr), (void)(size))
#define IDX_LOG_VALUE(addr, size) ((void)(addr), (void)(size))
#define IDX_LOG2(a1, s1, a2, s2) ((void)(a1), (void)(s1), (void)(a2), (void)(s2))
#define IDX_ALLOC_LOG(size, addr, lsize) ((void)(addr), (void)(lsize), idx_dram_alloc(size))
#define IDX_FREE_BARRIER() grace_free_barrier()
#define IDX_CHECK_BLOCK(p, min_size) ((void)(min_size), (p) != NULL)
#endif

#define IDX_READ_ENTER() grace_read_enter()
#define IDX_READ_EXIT() grace_read_exit()

/* "dram-hash" / "tips-hash" */
#define IDX_NAME IDX_VARIANT IDX_BASE_NAME

/* return IDX_CORRUPT(node, "what was expected", ...): TIPS_ECORRUPT with a message. */
#define IDX_CORRUPT(node, ...) idx_corrupt(IDX_NAME, (const void *)(node), __VA_ARGS__)

__attribute__((format(printf, 3, 4), unused))
static int idx_corrupt(const char *index, const void *node, const char *fmt, ...)
{
	char what[160];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	return tips_set_error(TIPS_ECORRUPT, "%s: node %p: %s", index, node, what);
}

/* prefetch(@deep 2) of an index whose lookup follows dependent lines (plugin.h): the
 * writer's outcome lookup, made with @lookup before the framework's bucket lock and
 * its answer discarded, so that the lookup made under the lock finds its lines cached.
 * The framework keeps the thread's error message across it. */
#define IDX_LOOKUP_AHEAD(lookup, index, key, klen)                                      \
	do {                                                                             \
		size_t ignored_vlen_;                                                    \
		(void)lookup((index), (key), (klen), NULL, 0, &ignored_vlen_);           \
	} while (0)

/*
 * What a lookup that found a value of @n bytes returns for a buffer of @cap bytes
 * (having copied min(@n, @cap) bytes and stored @n in *vlen): 0, or TIPS_ESIZE with a
 * message when the value is longer (plug-in contract, tips/plugin.h). Checked here,
 * where the length is at hand, so that tips_get() can end in a tail call to the
 * index: a check after the call, and the frame it needs, made tips-art's lookups
 * overlap less (docs/indexes.md, "Fifth pass").
 */
#define IDX_FOUND(n, cap) (__builtin_expect((size_t)(n) <= (size_t)(cap), 1) ? 0 : \
			   idx_value_too_long((size_t)(n), (size_t)(cap)))

__attribute__((cold, noinline, unused))
static int idx_value_too_long(size_t n, size_t cap)
{
	return tips_set_error_size(IDX_NAME " lookup", n, cap);
}

#endif /* TIPS_IDX_HOOKS_H */
