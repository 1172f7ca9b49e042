/*
 * batch_internal.h - the write batch as the stores see it (tips/batch.h is the public
 * side). A batch is a list of operations whose keys and values sit in one byte buffer.
 * Before a commit, batch_group() sorts the operations by key (stable: a key's
 * operations stay in the order they were added) so a store can lock each key once,
 * judge every condition with batch_group_check() and log only each key's last write
 * (batch_group_last()), which is the key's net effect ("last write wins").
 * Invariant: items[i].off + klen + vlen <= used for every item; error != 0 means the
 * batch must not be committed.
 */
#ifndef TIPS_UTIL_BATCH_INTERNAL_H
#define TIPS_UTIL_BATCH_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <tips/batch.h>

/* The public kinds (tips/batch.h) under the part's short names. */
enum batch_op {
	BATCH_PUT = TIPS_BATCH_PUT,
	BATCH_INSERT = TIPS_BATCH_INSERT, /* condition: absent */
	BATCH_UPDATE = TIPS_BATCH_UPDATE, /* condition: present */
	BATCH_DELETE = TIPS_BATCH_DELETE, /* none */
	BATCH_REMOVE = TIPS_BATCH_REMOVE, /* condition: present */
};

struct batch_item {
	uint8_t op;     /* enum batch_op */
	uint32_t klen;
	uint32_t vlen;
	size_t off;     /* key at buf + off, value right after it */
};

struct tips_batch {
	struct batch_item *items;
	size_t n, cap;
	unsigned char *buf;
	size_t used, buf_cap;
	int error;        /* a failed add: the commit returns it */
	size_t error_op;  /* position the failed add would have had */
	size_t failed_op; /* set by a commit that failed on one operation, else SIZE_MAX */
	/* batch_group()'s result: positions sorted by (key, position); group g is
	 * order[group_end[g-1] .. group_end[g]) (group_end[-1] = 0). */
	size_t *order, *group_end;
	size_t ngroups, group_cap;
	/* Scratch memory a store's commit may reuse from one commit to the next (freed
	 * with the batch): batch_scratch(). */
	void *scratch;
	size_t scratch_bytes;
};

static inline const unsigned char *batch_key(const struct tips_batch *b, size_t i)
{
	return b->buf + b->items[i].off;
}

static inline const unsigned char *batch_val(const struct tips_batch *b, size_t i)
{
	return b->buf + b->items[i].off + b->items[i].klen;
}

static inline bool batch_op_is_delete(unsigned op)
{
	return op == BATCH_DELETE || op == BATCH_REMOVE;
}

/* Sorts and groups the operations by key; 0 or TIPS_ENOMEM (with a message). */
int batch_group(struct tips_batch *b);

/* First and one-past-last index into b->order of group @g. */
static inline size_t batch_group_begin(const struct tips_batch *b, size_t g)
{
	return g ? b->group_end[g - 1] : 0;
}

/* The last operation (a position in items) of group @g: the key's net effect. */
static inline size_t batch_group_last(const struct tips_batch *b, size_t g)
{
	return b->order[b->group_end[g] - 1];
}

/* True if some operation of group @g has a condition (the store must then tell
 * batch_group_check() whether the key is present before the batch). */
bool batch_group_conditional(const struct tips_batch *b, size_t g);

/* Judges group @g's conditions in order, starting from @present; returns 0, or
 * TIPS_EKEYEXISTS / TIPS_ENOTFOUND with *failed set to the failing position. */
int batch_group_check(const struct tips_batch *b, size_t g, bool present, size_t *failed);

/* At least @bytes of the batch's scratch memory (kept for the next commit), or NULL
 * without DRAM. */
void *batch_scratch(struct tips_batch *b, size_t bytes);

/* A store's single writes, for batch_commit_single(). @delete is blind (NULL: the
 * store has none; @remove's TIPS_ENOTFOUND then counts as success). */
struct batch_single_ops {
	int (*put)(void *s, const void *k, size_t kl, const void *v, size_t vl);
	int (*insert)(void *s, const void *k, size_t kl, const void *v, size_t vl);
	int (*update)(void *s, const void *k, size_t kl, const void *v, size_t vl);
	int (*delete)(void *s, const void *k, size_t kl);
	int (*remove)(void *s, const void *k, size_t kl);
};

/* A batch of exactly one operation is that single write: one key is atomic by itself,
 * so the store's own call gives the same guarantee without the batch's bookkeeping
 * (grouping, a header entry, scratch). Call after batch_commit_check() with b->n == 1.
 * Returns the write's result; a failed condition sets failed_op to 0. */
int batch_commit_single(struct tips_batch *b, void *store, const struct batch_single_ops *ops);

/* The commit's argument checks: NULL batch, a failed add. 0 or the code (with a
 * message naming the operation; sets failed_op). */
int batch_commit_check(struct tips_batch *b, const char *who);

#endif /* TIPS_UTIL_BATCH_INTERNAL_H */
