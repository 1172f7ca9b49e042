/*
 * tips/batch.h - write batches: several puts and deletes committed as one durable unit.
 *
 * A batch is built in DRAM with the calls below and then committed to a TIPS database
 * (tips_batch_commit(), tips.h) or to a ListDB (tips_listdb_batch_commit(), listdb.h).
 * The same batch may be committed several times, to either store; building one touches
 * no pool. A batch is not thread-safe: one thread builds and commits it.
 *
 * What a commit promises (both stores):
 *  - All or nothing. When the commit returns 0 every operation is durable; after any
 *    crash either every operation of an acknowledged batch is visible, or the commit had
 *    not returned and none is. A commit that fails applies nothing.
 *  - One durability point: TIPS makes the whole batch durable with two fences (one for
 *    all the records, one for the OLog tail; a batch of one operation is a single write,
 *    one fence), ListDB with one fence (the commit
 *    word of its batch), whatever the batch's size. This is also group commit: a client
 *    that pipelines writes pays the fences once per batch.
 *  - Order inside the batch: operations take effect in the order they were added. A key
 *    written twice keeps the last write ("last write wins"); a condition (insert, update,
 *    remove) is judged against the state the batch's earlier operations left.
 *  - Conditions are atomic with the commit: the keys are locked while they are judged,
 *    so no other writer changes them in between. One failed condition fails the whole
 *    batch (TIPS_EKEYEXISTS or TIPS_ENOTFOUND) and nothing is applied;
 *    tips_batch_failed_op() says which operation failed.
 *  - Isolation for readers: each key switches atomically from its old value to the
 *    batch's value (a lookup sees one or the other, never a mix of bytes). A reader of
 *    several keys during the commit may see some keys new and others still old; once the
 *    commit returned, every later lookup and scan sees the whole batch. Scans obey the
 *    same rule per key. Applications that need several keys read as one snapshot take
 *    their own locks (tips-server does, with per-key locks).
 *
 * Limits. Keys are 1..TIPS_MAX_KEY bytes, values 0..TIPS_MAX_VALUE bytes, as for single
 * writes. A batch holds at most TIPS_BATCH_MAX_OPS operations; each store also bounds
 * the bytes one commit may log (tips_batch_limit(), tips_listdb_batch_limit()), and a
 * batch past either bound fails at once with TIPS_ETOOBIG, never waits for room it can
 * never get. Empty batches commit successfully and write nothing (no fence).
 *
 * A failed add (bad argument, out of DRAM) leaves the batch unchanged but marks it
 * failed: every commit then returns that error and applies nothing, until
 * tips_batch_clear(). So a bad key in the middle of a batch can never let the rest of
 * it through.
 */
#ifndef TIPS_BATCH_H
#define TIPS_BATCH_H

#include <stddef.h>
#include <stdint.h>
#include <tips/errors.h>

#ifdef __cplusplus
extern "C" {
#endif

struct tips_batch;

/* Most operations one batch may hold. */
#define TIPS_BATCH_MAX_OPS 65536u

/** tips_batch_new() - an empty batch in *@out. Return: 0, TIPS_EINVAL, TIPS_ENOMEM. */
TIPS_API int tips_batch_new(struct tips_batch **out);

/** tips_batch_free() - frees *@b (NULL is fine) and sets it to NULL. */
TIPS_API void tips_batch_free(struct tips_batch **b);

/** tips_batch_clear() - empties @b and forgets a failed add; keeps its memory. */
TIPS_API void tips_batch_clear(struct tips_batch *b);

/*
 * Adding operations. Each copies the key and value into the batch. Return: 0;
 * TIPS_EINVAL (NULL @b or @key, @klen 0, @val NULL with @vlen > 0); TIPS_ETOOBIG (key or
 * value too long, or the batch already holds TIPS_BATCH_MAX_OPS operations);
 * TIPS_ENOMEM. On an error the operation is not added and the batch is marked failed.
 *
 * tips_batch_put()    - insert or overwrite.
 * tips_batch_insert() - insert; the commit fails with TIPS_EKEYEXISTS if the key is present.
 * tips_batch_update() - overwrite; the commit fails with TIPS_ENOTFOUND if the key is absent.
 * tips_batch_delete() - delete if present; an absent key is not an error.
 * tips_batch_remove() - delete; the commit fails with TIPS_ENOTFOUND if the key is absent.
 */
TIPS_API int tips_batch_put(struct tips_batch *b, const void *key, size_t klen,
			    const void *val, size_t vlen);
TIPS_API int tips_batch_insert(struct tips_batch *b, const void *key, size_t klen,
			       const void *val, size_t vlen);
TIPS_API int tips_batch_update(struct tips_batch *b, const void *key, size_t klen,
			       const void *val, size_t vlen);
TIPS_API int tips_batch_delete(struct tips_batch *b, const void *key, size_t klen);
TIPS_API int tips_batch_remove(struct tips_batch *b, const void *key, size_t klen);

/** The kinds of operation a batch holds (tips_batch_get()). */
enum tips_batch_kind {
	TIPS_BATCH_PUT = 1,
	TIPS_BATCH_INSERT,
	TIPS_BATCH_UPDATE,
	TIPS_BATCH_DELETE,
	TIPS_BATCH_REMOVE,
};

/**
 * tips_batch_get() - operation @i (0-based, in the order added) of @b: its kind, key
 * and value (pointers into the batch, valid until it changes; @val NULL and @vlen 0 for
 * deletes). Any out-pointer may be NULL. For stores without batches, e.g. to apply the
 * operations one by one. Return: 0, TIPS_EINVAL (NULL @b, @i out of range).
 */
TIPS_API int tips_batch_get(const struct tips_batch *b, size_t i, enum tips_batch_kind *kind,
			    const void **key, size_t *klen, const void **val, size_t *vlen);

/** tips_batch_count() - operations in @b (0 for NULL). */
TIPS_API size_t tips_batch_count(const struct tips_batch *b);

/** tips_batch_bytes() - key and value bytes in @b (what the commit logs, before each
 * store's per-record overhead). */
TIPS_API size_t tips_batch_bytes(const struct tips_batch *b);

/**
 * tips_batch_failed_op() - after a commit failed because of one operation (a failed
 * add, a failed condition), the 0-based position of that operation; (size_t)-1 if the
 * last commit failed for another reason or succeeded.
 */
TIPS_API size_t tips_batch_failed_op(const struct tips_batch *b);

#ifdef __cplusplus
}
#endif

#endif /* TIPS_BATCH_H */
