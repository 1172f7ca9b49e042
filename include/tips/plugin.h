/*
 * tips/plugin.h - the TIPS plug-in API: what an index implements and what it may call.
 *
 * For index authors. An index is an ordinary volatile structure (hash table, tree,
 * trie) written against the ops table below; the framework (tips/tips.h) makes it
 * crash-consistent and durably linearizable by logging operations (OLog), undo-logging
 * the index's stores (tips_ulog_add), recording its allocations (tips_alloc,
 * tips_free) and replaying in the background. The calls below are valid only inside
 * the index's callbacks, made by the framework (each says which); applications never
 * call them. How to write and register an index: docs/framework.md and CONTRIBUTING.md
 * ("Add an index").
 *
 * Invariant an index keeps: every store to memory that existed at the last
 * reclamation is preceded by tips_ulog_add() of that memory (or, for the bytes of a
 * value overwritten in place by an update of its own key, tips_ulog_value()), and
 * every block it allocates or frees goes through tips_alloc()/tips_free(); then
 * recovery can roll the index back to the last reclamation and replay the OLog over
 * it.
 */
#ifndef TIPS_PLUGIN_H
#define TIPS_PLUGIN_H

#include <tips/tips.h>

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Hints an index may use when it creates its structure (e.g. bucket count). */
struct tips_index_config {
	uint64_t expected_keys; /* how many keys the user expects (never 0) */
};

/** At most this many ranges per record from tips_index_ops.log_ahead. */
#define TIPS_LOG_AHEAD_RANGES 2

/*
 * The ops table of an index. The framework calls create/open/close from one thread;
 * insert/update/remove from its replay workers, concurrently for different keys (never
 * for the same key at once); lookup/scan from any thread, concurrently with everything.
 * An index is written once against IDX_ALLOC/IDX_FREE/IDX_LOG (src/indexes/idx_hooks.h)
 * and built twice: dram-NAME (malloc, no logging: the volatile original) and tips-NAME
 * (tips_alloc, tips_free, tips_ulog_add before every store to memory that existed before,
 * or tips_ulog_value before an in-place overwrite of the updated key's value).
 * Keys compare as byte strings (memcmp, shorter first on a tie).
 */
struct tips_index_ops {
	const char *name; /* "tips-hash", "dram-hash", ... */
	const char *concurrency; /* its concurrency model, in a few words (for listings) */
	/* Builds an empty index; returns its root object (allocated with IDX_ALLOC). */
	int (*create)(const struct tips_index_config *cfg, void **root);
	/* Attaches to @root (rebuild volatile state such as locks); *index is the handle
	 * every other call takes. */
	int (*open)(void *root, void **index);
	/* Drops the volatile state open built; the persistent structure stays. */
	void (*close)(void *index);
	/* insert: TIPS_EKEYEXISTS if present. update: TIPS_ENOTFOUND if absent.
	 * remove: TIPS_ENOTFOUND if absent. */
	int (*insert)(void *index, const void *key, size_t klen, const void *val, size_t vlen);
	int (*update)(void *index, const void *key, size_t klen, const void *val, size_t vlen);
	int (*remove)(void *index, const void *key, size_t klen);
	/* Copies the value into @val (up to @cap bytes) and its length into *vlen.
	 * Return 0, TIPS_ENOTFOUND, or TIPS_ESIZE when the value is longer than @cap
	 * (@cap bytes copied, *vlen the full length). The indexes built into libtips
	 * return TIPS_ESIZE there, and tips_get() returns their result as it is (a tail
	 * call); for any other ops table tips_get() checks *vlen against @cap itself, so
	 * an index that returns 0 there is still served right. */
	int (*lookup)(void *index, const void *key, size_t klen, void *val, size_t cap,
		      size_t *vlen);
	/* Calls @fn for up to @count keys >= @start (klen 0: from the first key), in
	 * order. Returns the number of keys passed to @fn, or a negative code. */
	long (*scan)(void *index, const void *start, size_t klen, size_t count,
		     tips_scan_fn fn, void *arg);
	/* Calls @fn for every block the index owns (its root included); for leak checks.
	 * Not concurrent with writes. Before following a pointer read from PM it checks
	 * that the pointer is a block of plausible size (tips_block_valid) and that the
	 * node holds what a lookup relies on (counts, lengths, types); if not it returns
	 * TIPS_ECORRUPT with a message naming the index, the node and what was expected.
	 * open checks its root the same way. */
	int (*walk)(void *index, tips_walk_fn fn, void *arg);
	/* Optional (NULL: none). Starts loading, without waiting for it, what a write of
	 * @key will touch first: replay calls it for the records it applies a few
	 * operations later, so that their cache misses overlap the operations before them,
	 * and a writing thread (@deep 2) as a write with an outcome begins, so that what
	 * its outcome lookup reads loads while the write secures its room and locks its
	 * cache bucket (a write batch's conditions ask @deep 0).
	 * @deep 0: what the key alone locates (a bucket); 1: also what that points to (a
	 * chain's first node), which a call with @deep 0 for the same key has brought in
	 * a while before; 2 (from a writing thread, holding no lock): all that the write's
	 * outcome lookup of @key will read, which it makes after a locked instruction that
	 * no load passes, so that an index whose lookup follows dependent lines (a tree's
	 * path, a chain) may make that lookup now and discard it, waiting as its lookup
	 * waits; an index whose lookup reads only what @deep 0 brings may treat 2 as 0.
	 * Called concurrently with every other call. It stores nothing; at @deep 0 and 1
	 * it takes no lock, and a pointer it reads may be stale (a prefetch of any address
	 * is harmless). */
	void (*prefetch)(void *index, const void *key, size_t klen, int deep);
	/* Optional (NULL: none). The ranges an insert or update of @key with a value of
	 * @vlen bytes would log (its IDX_LOG or IDX_LOG2, exactly: the ULog matches a
	 * range by its address and size), if the index can tell: sets addr[i] and size[i]
	 * for i < the count it returns, at most TIPS_LOG_AHEAD_RANGES; 0: it cannot tell.
	 * Replay logs the ranges of several records under one ULog fence before it
	 * applies them, and an operation whose ranges are all logged already in this
	 * generation stores without a fence of its own.
	 * Called concurrently with writes of other keys, without a lock, for keys and
	 * values of records the framework accepted (valid lengths); it stores nothing.
	 * A wrong or stale range costs a record, never a wrong rollback (a rollback
	 * restores the oldest copy of every byte). */
	int (*log_ahead)(void *index, const void *key, size_t klen, size_t vlen,
			 void *addr[TIPS_LOG_AHEAD_RANGES], size_t size[TIPS_LOG_AHEAD_RANGES]);
};

/**
 * tips_alloc() - allocate persistent memory for the index (MLog-recorded).
 * Only valid inside an ops call made by the framework (create, insert, update,
 * remove). The block's contents need no logging until the next reclamation, and it
 * is freed again if a crash rolls back the operation that allocated it.
 * Return: the block, or NULL (heap full; tips_errormsg() says why).
 */
TIPS_API void *tips_alloc(size_t size);

/**
 * tips_free() - free a block of the index, deferred: the block stays valid (for
 * concurrent readers and for a replay after a crash) until the next reclamation.
 */
TIPS_API void tips_free(void *ptr);

/**
 * tips_ulog_add() - undo-log [@addr, @addr+@size) before the index stores to it.
 * Persists the old bytes before returning, unless the memory was allocated since the
 * last reclamation (OLog replay recreates it) or this range was already logged since
 * then. The index never flushes: stores are made durable by the next reclamation.
 * Return: 0, or a negative code (size 0 or > TIPS_MAX_VALUE, address outside the pool).
 */
TIPS_API int tips_ulog_add(void *addr, size_t size);

/**
 * tips_ulog_value() - announce, before storing, that an update (or put) of key K
 * overwrites [@addr, @addr+@size) in place, and that those bytes hold nothing but K's
 * value: no key, length, pointer, kind or anything else an operation reads to choose
 * its path or to find memory. No undo record is written: after a crash, recovery
 * rolls back every logged store and then replays every write since the last
 * reclamation, K's own included, in order, so K's value bytes are written again
 * before anything reads them (a rollback that restores the bytes to another key's
 * role restores them from that key's older, logged copy). Only an update of the key
 * that owns the bytes may use it; a store that changes which key owns memory, or what
 * a word means, still needs tips_ulog_add(). The framework flushes the range before
 * the next reclamation. Falls back to tips_ulog_add() where it cannot (a thread that
 * is not a replay worker, no DRAM to remember the range) or should not (a pool on
 * msync media, TIPS_MEDIA_FILE, where each flush is an msync and a record is written
 * only once per range and reclamation interval).
 * Return: 0, or a negative code (size 0 or > TIPS_MAX_VALUE, address outside the pool).
 */
TIPS_API int tips_ulog_value(void *addr, size_t size);

/** tips_root() - the root object of the index being called (inside an ops call). */
TIPS_API void *tips_root(void);

/**
 * tips_block_valid() - 1 if @ptr is the start of a block allocated in the heap of the
 * database being called, with at least @min_size usable bytes; else 0. Safe on any
 * address (it reads only the heap's metadata, never *@ptr). Valid inside an index's
 * callbacks (create, open, insert, update, remove, walk); outside them it returns 0.
 * An index's open and walk call it before following a pointer read from PM, so that a
 * corrupted pool is reported (TIPS_ECORRUPT) instead of crashing. Thread-safe.
 */
TIPS_API int tips_block_valid(const void *ptr, size_t min_size);

#ifdef __cplusplus
}
#endif
#endif /* TIPS_PLUGIN_H */
