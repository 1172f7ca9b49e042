/*
 * store.h - the one interface tips-server uses to reach its persistent index: a TIPS
 * database (any tips-* index) or a ListDB, chosen by name at start.
 *
 * The store promises what both engines promise: a write (put, delete, commit) is durable
 * when it returns 0 and only then visible to gets and scans; a batch is applied whole or
 * not at all, also across a crash. Keys are 1..TIPS_MAX_KEY bytes ordered by memcmp,
 * values 0..TIPS_MAX_VALUE bytes. Every call is thread-safe except open and close.
 * Scans return keys in order on every engine; on the hash tables (tips-hash,
 * tips-lfhash, tips-clht) a scan visits the whole table, so store_info() says
 * ordered = 0 and commands that scan a small range of members refuse to run there
 * (ks_db_ordered()).
 */
#ifndef TIPS_SERVER_STORE_H
#define TIPS_SERVER_STORE_H

#include <stddef.h>
#include <stdint.h>
#include <tips/tips.h>
#include <tips/listdb.h>

struct store;

/** What INFO and the start-up log report about the store. */
struct store_info {
	const char *index;          /* "tips-art", ..., "listdb" */
	int ordered;                /* 1: scans of a small range are cheap */
	const char *media;          /* tips_media_name() of the pool */
	char media_reason[160];     /* the words `tips pool info` prints for it */
	uint64_t pool_size;         /* bytes */
	int created;                /* 1 if this open created the pool */
	int recovered;              /* 1 if the open ran crash recovery */
	double recovery_ms;         /* time the open spent recovering */
};

/**
 * store_open() - open the pool at @path with the index @index ("tips-art", "listdb"...),
 * creating it (@pool_size bytes, 0: the engine's default) if the file does not exist.
 * Return: 0, or a negative TIPS_E* code with a one-line explanation in @err (the index
 * name is unknown, the directory is missing, the pool holds another index, ...).
 * A failed open leaves an existing pool untouched.
 */
int store_open(const char *path, const char *index, uint64_t pool_size, struct store **out,
	       char *err, size_t errlen);
/** store_close() - close cleanly (the next open replays nothing); *@s becomes NULL. */
int store_close(struct store **s);

/** store_get() - as tips_get(): 0, TIPS_ENOTFOUND, TIPS_ESIZE (*@vlen: the length). */
int store_get(struct store *s, const void *key, size_t klen, void *val, size_t cap,
	      size_t *vlen);
/** store_scan() - as tips_scan(): up to @count pairs with keys >= @start, in order. */
long store_scan(struct store *s, const void *start, size_t klen, size_t count,
		tips_scan_fn fn, void *arg);
/** store_put(), store_delete() - one durable write (delete of an absent key: 0). */
int store_put(struct store *s, const void *key, size_t klen, const void *val, size_t vlen);
int store_delete(struct store *s, const void *key, size_t klen);
/** store_commit() - commit @b as one atomic, durable write (tips_batch_commit() or
 * tips_listdb_batch_commit()). Return: 0 or their codes; nothing applied on error. */
int store_commit(struct store *s, struct tips_batch *b);
/** store_batch_limit() - the most operations and bytes store_commit() accepts. */
void store_batch_limit(struct store *s, size_t *max_ops, size_t *max_bytes);

/** store_info() - facts for the log and INFO. */
void store_info(struct store *s, struct store_info *out);
/** store_stats() - the engine's counters: @tips for a TIPS store (else zeroed), @ldb for
 * a ListDB (else zeroed). Either may be NULL. */
void store_stats(struct store *s, struct tips_stats *tips, struct tips_listdb_stats *ldb);

#endif /* TIPS_SERVER_STORE_H */
