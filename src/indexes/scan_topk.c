/*
 * scan_topk.c - the bounded max-heap of copies behind ordered scans of hash indexes
 * (see scan_topk.h). Invariant: t->a[0..n) is a max-heap by key and n <= limit.
 */
#include "indexes/scan_topk.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct topk_copy {
	uint32_t klen, vlen;
	unsigned char data[]; /* key, then value */
};

int topk_key_cmp(const void *a, size_t alen, const void *b, size_t blen)
{
	int r = memcmp(a, b, alen < blen ? alen : blen);
	if (r)
		return r;
	return (alen > blen) - (alen < blen);
}

static inline int copy_cmp(const struct topk_copy *x, const struct topk_copy *y)
{
	return topk_key_cmp(x->data, x->klen, y->data, y->klen);
}

static void sift_down(struct topk_copy **a, size_t n, size_t i)
{
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, m = i;
		if (l < n && copy_cmp(a[l], a[m]) > 0)
			m = l;
		if (r < n && copy_cmp(a[r], a[m]) > 0)
			m = r;
		if (m == i)
			return;
		struct topk_copy *tmp = a[i];
		a[i] = a[m];
		a[m] = tmp;
		i = m;
	}
}

static void sift_up(struct topk_copy **a, size_t i)
{
	while (i > 0) {
		size_t p = (i - 1) / 2;
		if (copy_cmp(a[i], a[p]) <= 0)
			return;
		struct topk_copy *tmp = a[i];
		a[i] = a[p];
		a[p] = tmp;
		i = p;
	}
}

static struct topk_copy *copy_new(const void *key, size_t klen, const void *val, size_t vlen)
{
	struct topk_copy *c = malloc(sizeof(*c) + klen + vlen);
	if (!c)
		return NULL;
	c->klen = (uint32_t)klen;
	c->vlen = (uint32_t)vlen;
	memcpy(c->data, key, klen);
	if (vlen)
		memcpy(c->data + klen, val, vlen);
	return c;
}

void topk_init(struct topk *t, size_t limit)
{
	t->a = NULL;
	t->n = t->cap = 0;
	if (limit > SIZE_MAX / sizeof(struct topk_copy *))
		limit = SIZE_MAX / sizeof(struct topk_copy *);
	t->limit = limit ? limit : 1;
}

int topk_offer(struct topk *t, const void *key, size_t klen, const void *val, size_t vlen)
{
	if (t->n == t->limit) {
		/* Full: keep the pair only if it is smaller than the largest kept key. */
		const struct topk_copy *top = t->a[0];
		if (topk_key_cmp(key, klen, top->data, top->klen) >= 0)
			return 0;
		struct topk_copy *c = copy_new(key, klen, val, vlen);
		if (!c)
			return TIPS_ENOMEM;
		free(t->a[0]);
		t->a[0] = c;
		sift_down(t->a, t->n, 0);
		return 0;
	}
	if (t->n == t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 64;
		if (cap < t->cap || cap > t->limit)
			cap = t->limit;
		struct topk_copy **a = realloc(t->a, cap * sizeof(*a));
		if (!a)
			return TIPS_ENOMEM;
		t->a = a;
		t->cap = cap;
	}
	struct topk_copy *c = copy_new(key, klen, val, vlen);
	if (!c)
		return TIPS_ENOMEM;
	t->a[t->n] = c;
	sift_up(t->a, t->n++);
	return 0;
}

long topk_emit(struct topk *t, tips_scan_fn fn, void *arg)
{
	/* Heapsort in place: the largest goes last, so a[] ends ascending. */
	for (size_t i = t->n; i > 1; i--) {
		struct topk_copy *tmp = t->a[0];
		t->a[0] = t->a[i - 1];
		t->a[i - 1] = tmp;
		sift_down(t->a, i - 1, 0);
	}
	long passed = 0;
	for (size_t i = 0; i < t->n; i++) {
		const struct topk_copy *c = t->a[i];
		passed++;
		if (fn(c->data, c->klen, c->data + c->klen, c->vlen, arg))
			break;
	}
	return passed;
}

void topk_free(struct topk *t)
{
	for (size_t i = 0; i < t->n; i++)
		free(t->a[i]);
	free(t->a);
	t->a = NULL;
	t->n = t->cap = 0;
}
