/*
 * batch.c - building write batches (tips/batch.h) and the store-independent half of
 * committing one: grouping the operations by key and judging their conditions
 * (batch_internal.h). Keys and values are copied into one growing buffer, so a batch
 * costs two allocations however many operations it holds, and is reused after
 * tips_batch_clear() without allocating again.
 * Invariant: a failed add changes nothing but `error`, so a committed batch is always
 * exactly the operations whose adds returned 0.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include <tips/base.h>

#include "util/batch_internal.h"
#include "util/grow.h"
#include "util/errors_internal.h"

int tips_batch_new(struct tips_batch **out)
{
	if (!out)
		return tips_set_error(TIPS_EINVAL, "tips_batch_new: out pointer required");
	*out = calloc(1, sizeof(**out));
	if (!*out)
		return tips_set_error(TIPS_ENOMEM, "tips_batch_new: out of DRAM");
	(*out)->failed_op = SIZE_MAX;
	return 0;
}

void tips_batch_free(struct tips_batch **pb)
{
	if (!pb || !*pb)
		return;
	struct tips_batch *b = *pb;
	free(b->items);
	free(b->buf);
	free(b->order);
	free(b->group_end);
	free(b->scratch);
	free(b);
	*pb = NULL;
}

void tips_batch_clear(struct tips_batch *b)
{
	if (!b)
		return;
	b->n = 0;
	b->used = 0;
	b->error = 0;
	b->error_op = 0;
	b->failed_op = SIZE_MAX;
	b->ngroups = 0;
}

static int add_failed(struct tips_batch *b, int rc)
{
	if (!b->error) {
		b->error = rc;
		b->error_op = b->n;
	}
	return rc;
}

static int add(struct tips_batch *b, unsigned op, const void *key, size_t klen,
	       const void *val, size_t vlen)
{
	if (!b)
		return tips_set_error(TIPS_EINVAL, "tips_batch: no batch");
	int rc = write_args_check(b, key, klen, val, vlen);
	if (rc)
		return add_failed(b, rc);
	if (b->n >= TIPS_BATCH_MAX_OPS)
		return add_failed(b, tips_set_error(TIPS_ETOOBIG, "tips_batch: a batch holds at "
						    "most %u operations", TIPS_BATCH_MAX_OPS));
	if (!array_grow((void **)&b->items, &b->cap, b->n + 1, sizeof(*b->items), 16) ||
	    !array_grow((void **)&b->buf, &b->buf_cap, b->used + klen + vlen, 1, 16))
		return add_failed(b, tips_set_error(TIPS_ENOMEM, "tips_batch: out of DRAM"));
	struct batch_item *it = &b->items[b->n++];
	it->op = (uint8_t)op;
	it->klen = (uint32_t)klen;
	it->vlen = (uint32_t)vlen;
	it->off = b->used;
	memcpy(b->buf + b->used, key, klen);
	if (vlen)
		memcpy(b->buf + b->used + klen, val, vlen);
	b->used += klen + vlen;
	return 0;
}

int tips_batch_put(struct tips_batch *b, const void *key, size_t klen, const void *val,
		   size_t vlen)
{
	return add(b, BATCH_PUT, key, klen, val, vlen);
}

int tips_batch_insert(struct tips_batch *b, const void *key, size_t klen, const void *val,
		      size_t vlen)
{
	return add(b, BATCH_INSERT, key, klen, val, vlen);
}

int tips_batch_update(struct tips_batch *b, const void *key, size_t klen, const void *val,
		      size_t vlen)
{
	return add(b, BATCH_UPDATE, key, klen, val, vlen);
}

int tips_batch_delete(struct tips_batch *b, const void *key, size_t klen)
{
	return add(b, BATCH_DELETE, key, klen, NULL, 0);
}

int tips_batch_remove(struct tips_batch *b, const void *key, size_t klen)
{
	return add(b, BATCH_REMOVE, key, klen, NULL, 0);
}

int tips_batch_get(const struct tips_batch *b, size_t i, enum tips_batch_kind *kind,
		   const void **key, size_t *klen, const void **val, size_t *vlen)
{
	if (!b || i >= b->n)
		return tips_set_error(TIPS_EINVAL, "tips_batch_get: no operation %zu", i);
	const struct batch_item *it = &b->items[i];
	bool del = batch_op_is_delete(it->op);
	if (kind)
		*kind = (enum tips_batch_kind)it->op;
	if (key)
		*key = batch_key(b, i);
	if (klen)
		*klen = it->klen;
	if (val)
		*val = del ? NULL : batch_val(b, i);
	if (vlen)
		*vlen = del ? 0 : it->vlen;
	return 0;
}

size_t tips_batch_count(const struct tips_batch *b)
{
	return b ? b->n : 0;
}

size_t tips_batch_bytes(const struct tips_batch *b)
{
	return b ? b->used : 0;
}

size_t tips_batch_failed_op(const struct tips_batch *b)
{
	return b ? b->failed_op : SIZE_MAX;
}

static int by_key_then_position(const void *pa, const void *pb, void *arg)
{
	const struct tips_batch *b = arg;
	size_t x = *(const size_t *)pa, y = *(const size_t *)pb;
	size_t lx = b->items[x].klen, ly = b->items[y].klen;
	int c = memcmp(batch_key(b, x), batch_key(b, y), lx < ly ? lx : ly);
	if (!c)
		c = (lx > ly) - (lx < ly);
	return c ? c : (x > y) - (x < y);
}

int batch_group(struct tips_batch *b)
{
	if (!array_grow((void **)&b->order, &b->group_cap, b->n, sizeof(size_t), 16))
		return tips_set_error(TIPS_ENOMEM, "batch commit: out of DRAM");
	size_t cap = b->group_cap;
	size_t *ge = realloc(b->group_end, cap * sizeof(size_t));
	if (!ge)
		return tips_set_error(TIPS_ENOMEM, "batch commit: out of DRAM");
	b->group_end = ge;
	for (size_t i = 0; i < b->n; i++)
		b->order[i] = i;
	qsort_r(b->order, b->n, sizeof(size_t), by_key_then_position, b);
	b->ngroups = 0;
	for (size_t i = 0; i < b->n; i++) {
		size_t x = b->order[i];
		bool next_same = i + 1 < b->n && b->items[b->order[i + 1]].klen == b->items[x].klen &&
				 memcmp(batch_key(b, b->order[i + 1]), batch_key(b, x),
					b->items[x].klen) == 0;
		if (!next_same)
			b->group_end[b->ngroups++] = i + 1;
	}
	return 0;
}

bool batch_group_conditional(const struct tips_batch *b, size_t g)
{
	for (size_t i = batch_group_begin(b, g); i < b->group_end[g]; i++) {
		unsigned op = b->items[b->order[i]].op;
		if (op == BATCH_INSERT || op == BATCH_UPDATE || op == BATCH_REMOVE)
			return true;
	}
	return false;
}

int batch_group_check(const struct tips_batch *b, size_t g, bool present, size_t *failed)
{
	for (size_t i = batch_group_begin(b, g); i < b->group_end[g]; i++) {
		size_t x = b->order[i];
		switch (b->items[x].op) {
		case BATCH_INSERT:
			if (present) {
				*failed = x;
				return TIPS_EKEYEXISTS;
			}
			present = true;
			break;
		case BATCH_UPDATE:
		case BATCH_REMOVE:
			if (!present) {
				*failed = x;
				return TIPS_ENOTFOUND;
			}
			present = b->items[x].op == BATCH_UPDATE;
			break;
		case BATCH_PUT:
			present = true;
			break;
		default: /* BATCH_DELETE */
			present = false;
		}
	}
	return 0;
}

void *batch_scratch(struct tips_batch *b, size_t bytes)
{
	if (bytes > b->scratch_bytes) {
		void *p = realloc(b->scratch, bytes);
		if (!p)
			return NULL;
		b->scratch = p;
		b->scratch_bytes = bytes;
	}
	return b->scratch;
}

int batch_commit_single(struct tips_batch *b, void *store, const struct batch_single_ops *ops)
{
	const struct batch_item *it = &b->items[0];
	const void *k = batch_key(b, 0), *v = batch_val(b, 0);
	int rc;
	switch (it->op) {
	case BATCH_PUT: return ops->put(store, k, it->klen, v, it->vlen);
	case BATCH_INSERT: rc = ops->insert(store, k, it->klen, v, it->vlen); break;
	case BATCH_UPDATE: rc = ops->update(store, k, it->klen, v, it->vlen); break;
	case BATCH_DELETE:
		if (ops->delete)
			return ops->delete(store, k, it->klen);
		rc = ops->remove(store, k, it->klen);
		return rc == TIPS_ENOTFOUND ? 0 : rc; /* absent: nothing to delete */
	default: rc = ops->remove(store, k, it->klen); break;
	}
	if (rc == TIPS_EKEYEXISTS || rc == TIPS_ENOTFOUND)
		b->failed_op = 0;
	return rc;
}

int batch_commit_check(struct tips_batch *b, const char *who)
{
	if (!b)
		return tips_set_error(TIPS_EINVAL, "%s: no batch", who);
	b->failed_op = SIZE_MAX;
	if (b->error) {
		b->failed_op = b->error_op;
		return tips_set_error(b->error, "%s: adding operation %zu failed (%s); the batch "
				      "applies nothing until tips_batch_clear()", who, b->error_op,
				      tips_strerror(b->error));
	}
	return 0;
}
