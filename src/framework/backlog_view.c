/*
 * backlog_view.c - a scanning thread's own sorted index of the replay backlog (the OLog
 * records replay has not applied), kept up to date by reading only the records
 * appended since its last scan, so that a bounded scan (db.c) finds the smallest
 * unapplied key >= its start with a binary search instead of reading every unapplied
 * record (YCSB E on tips-art at 2 threads: about 44 records, a cache line each, on
 * every scan; docs/indexes.md, "Eighth pass").
 *
 * Invariant, when backlog_view_min() returns 0 (inside the caller's read section): for
 * every OLog i below the live bound, the entries of OLog i are exactly the records in
 * [applied_i, seen[i]), applied_i as read in this call and seen[i] its durable tail as
 * read in this call, each as {8-byte key prefix, position, address}; entries are sorted
 * by prefix. A record at or above `applied` is not overwritten before the read section
 * ends (reclaim.c), so the entries' addresses may be followed there. The view ignores
 * commit stamps: it may hold writes newer than the scan's stamp, which can only make
 * the bound smaller (more of the scan merged), never hide a write the scan must see.
 * When it returns -1 (the backlog outgrew the view) the view is marked `overflow`,
 * and the next call empties it and reads it again from every `applied` before use.
 */
#define _GNU_SOURCE
#include <stdlib.h>

#include "framework/framework.h"
#include "util/kv.h"

#define VIEW_MAX 512u /* entries; with a larger backlog scans merge (db.c) until it shrinks */

struct view_entry {
	uint64_t prefix; /* kv_prefix64 of the record's key */
	uint64_t pos;    /* the record's logical position in its OLog */
	const struct olog_rec *rec;
	unsigned log;
};

struct backlog_view {
	unsigned nlogs;
	bool overflow;     /* outgrew VIEW_MAX: emptied, rebuilt once the backlog is small */
	size_t n;
	uint64_t *seen;    /* per OLog: the tail read at the last call */
	uint64_t *applied; /* per OLog: its applied point read at the last call */
	struct view_entry e[VIEW_MAX];
	struct view_entry fresh[VIEW_MAX]; /* records read in this call, before the merge */
};

void backlog_view_free(struct backlog_view *v)
{
	if (v) {
		free(v->seen);
		free(v->applied);
		free(v);
	}
}

struct backlog_view *backlog_view_new(unsigned nlogs)
{
	struct backlog_view *v = calloc(1, sizeof(*v));
	if (!v)
		return NULL;
	v->nlogs = nlogs;
	v->seen = calloc(nlogs, sizeof(*v->seen));
	v->applied = calloc(nlogs, sizeof(*v->applied));
	if (!v->seen || !v->applied) {
		backlog_view_free(v);
		return NULL;
	}
	return v;
}

/* The first entry whose prefix is >= @p. */
static size_t view_search(const struct backlog_view *v, uint64_t p)
{
	size_t lo = 0, hi = v->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (v->e[mid].prefix < p)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Drops the entries of records below their OLog's applied point. */
static void view_purge(struct backlog_view *v)
{
	size_t w = 0;
	for (size_t i = 0; i < v->n; i++)
		if (v->e[i].pos >= v->applied[v->e[i].log])
			v->e[w++] = v->e[i];
	v->n = w;
}

/* Reads OLog @i's records from seen[i] to @tail into fresh[*@k...]; false if the view
 * would overflow. */
static bool view_gather(struct backlog_view *v, const struct olog *l, unsigned i,
			uint64_t tail, size_t *k)
{
	struct olog_cursor c = olog_cursor_at(l, v->seen[i], tail);
	const struct olog_rec *r;
	while ((r = olog_next(l, &c))) {
		if (v->n + *k == VIEW_MAX)
			return false;
		v->fresh[(*k)++] = (struct view_entry){ kv_prefix64(r->data, r->klen),
							c.pos - r->len, r, i };
	}
	v->seen[i] = tail;
	return true;
}

static int by_prefix(const void *pa, const void *pb)
{
	const struct view_entry *a = pa, *b = pb;
	return (a->prefix > b->prefix) - (a->prefix < b->prefix);
}

/* Sorts fresh[0..@k) and merges it into e[]: O(n + k log k), where inserting each one
 * would move O(n) entries per record. */
static void view_merge(struct backlog_view *v, size_t k)
{
	qsort(v->fresh, k, sizeof(v->fresh[0]), by_prefix);
	size_t i = v->n, j = k, w = v->n + k;
	while (j > 0) /* from the back: e[] has room for both */
		v->e[--w] = i > 0 && v->e[i - 1].prefix > v->fresh[j - 1].prefix ? v->e[--i]
										  : v->fresh[--j];
	v->n += k;
}

/* Brings the view up to date (see the invariant); false if the backlog is too large
 * for it (the caller makes the scan a merged one). */
static bool view_update(struct tips_db *db, struct backlog_view *v)
{
	unsigned live = olog_live(&db->ologs);
	bool moved = false;
	uint64_t backlog_bytes = 0;
	for (unsigned i = 0; i < live; i++) {
		const struct olog *l = &db->ologs.logs[i];
		uint64_t a = atomic_load_explicit(&l->applied, memory_order_acquire);
		moved |= a != v->applied[i];
		v->applied[i] = a;
		if (v->seen[i] < a)
			v->seen[i] = a;
		if (v->overflow)
			backlog_bytes += atomic_load_explicit(&l->durable_tail, memory_order_acquire) - a;
	}
	if (v->overflow) { /* every record takes at least 64 bytes */
		if (backlog_bytes > (uint64_t)VIEW_MAX / 2 * 64)
			return false;
		v->overflow = false;
		v->n = 0;
		for (unsigned i = 0; i < live; i++)
			v->seen[i] = v->applied[i];
	} else if (moved) {
		view_purge(v);
	}
	size_t k = 0;
	for (unsigned i = 0; i < live; i++) {
		const struct olog *l = &db->ologs.logs[i];
		uint64_t tail = atomic_load_explicit(&l->durable_tail, memory_order_acquire);
		if (tail != v->seen[i] && !view_gather(v, l, i, tail, &k)) {
			v->overflow = true;
			v->n = 0;
			return false;
		}
	}
	if (k)
		view_merge(v, k);
	return true;
}

int backlog_view_min(struct tips_db *db, struct backlog_view *v, const void *start,
		     size_t klen, const struct olog_rec **min)
{
	if (!view_update(db, v))
		return -1;
	uint64_t ps = kv_prefix64(start, klen);
	const struct olog_rec *best = NULL;
	uint64_t best_prefix = 0;
	/* In prefix order; among equal prefixes (a shared 8-byte head, or one key written
	 * more than once) the keys decide. */
	for (size_t j = view_search(v, ps); j < v->n; j++) {
		const struct view_entry *e = &v->e[j];
		if (best && e->prefix != best_prefix)
			break;
		const struct olog_rec *r = e->rec;
		if (e->prefix == ps && kv_cmp(r->data, r->klen, start, klen) < 0)
			continue;
		if (!best || kv_cmp(r->data, r->klen, best->data, best->klen) < 0) {
			best = r;
			best_prefix = e->prefix;
		}
	}
	*min = best;
	return 0;
}
