/*
 * memtable.c - the MemTable: an insert-only lock-free skiplist in DRAM whose nodes point
 * at log entries in PM (ListDB, OSDI'22, Algorithm 1, line 11).
 *
 * Nodes are ordered like entries (key ascending, LSN descending), so a search meets the
 * newest version of a key first. A node keeps the first 8 key bytes (big-endian, zero
 * padded) so that most comparisons never touch PM.
 * Invariant: a node is linked at layer 0 before any upper layer (the bottom list holds
 * every node); links are published with release CAS and never removed, so readers
 * traverse without locks while writers insert.
 * Nodes of single puts come from the MemTable's arena: blocks of LD_ARENA_BLOCK bytes on
 * huge pages, cut into one piece per writer at a time (one fetch_add per piece), all
 * given back with the MemTable (a node is never freed alone, as nodes are never
 * unlinked) to the store's block cache, from which the next MemTables take them.
 */
#include "listdb/listdb_internal.h"
#include "util/hugepage.h"

#include <stdlib.h>
#include <string.h>
#include <tips/errors.h>

/* Node against (key, key8, lsn): <0 if the node sorts first. lsn UINT64_MAX sorts a
 * search key before every version of it. */
static int node_cmp(const struct ld_mnode *n, const void *k, size_t kl, uint64_t key8,
		    uint64_t lsn)
{
	if (n->key8 != key8)
		return n->key8 < key8 ? -1 : 1;
	int c = ld_cmp_entry_key(n->e, k, kl);
	if (c)
		return c;
	return (n->lsn < lsn) - (n->lsn > lsn);
}

#define LD_ARENA_BLOCK HUGEPAGE_MIN_BLOCK /* on 2 MiB pages: a search's misses skip the page walk */
#define LD_ARENA_PIECE (16u << 10)
_Static_assert(sizeof(struct ld_mnode) % 8 == 0, "nodes carved back to back stay 8-aligned");

/* Blocks of about two MemTables' nodes: a new MemTable is created before the oldest
 * flushed one is destroyed, so that many keep the steady state in faulted-in blocks. */
void ld_arena_cache_init(struct ld_arena_cache *c, uint64_t memtable_entries)
{
	pthread_mutex_init(&c->lock, NULL);
	c->free = NULL;
	c->n = 0;
	uint64_t per_mt = memtable_entries * (sizeof(struct ld_mnode) + 2 * sizeof(void *)) /
			  LD_ARENA_BLOCK + 2; /* a node has 1.33 layers on average */
	c->cap = (unsigned)(per_mt > 512 ? 1024 : 2 * per_mt); /* at most 2 GiB kept */
}

void ld_arena_cache_fini(struct ld_arena_cache *c)
{
	for (struct ld_arena_blk *b = c->free, *prev; b; b = prev) {
		prev = b->prev;
		free(b);
	}
	c->free = NULL;
	c->n = 0;
	pthread_mutex_destroy(&c->lock);
}

/* A cached block, or a fresh one; NULL when DRAM is out. */
static struct ld_arena_blk *block_get(struct ld_arena_cache *c)
{
	pthread_mutex_lock(&c->lock);
	struct ld_arena_blk *b = c->free;
	if (b) {
		c->free = b->prev;
		c->n--;
	}
	pthread_mutex_unlock(&c->lock);
	return b ? b : hugepage_alloc(LD_ARENA_BLOCK);
}

/* Gives back @b and the older blocks it links to. */
static void blocks_put(struct ld_arena_cache *c, struct ld_arena_blk *b)
{
	pthread_mutex_lock(&c->lock);
	while (b && c->n < c->cap) {
		struct ld_arena_blk *prev = b->prev;
		b->prev = c->free;
		c->free = b;
		c->n++;
		b = prev;
	}
	pthread_mutex_unlock(&c->lock);
	for (struct ld_arena_blk *prev; b; b = prev) {
		prev = b->prev;
		free(b);
	}
}

struct ld_memtable *ld_mt_create(uint64_t seq, uint64_t capacity, unsigned bloom_bits,
				 struct ld_arena_cache *blocks)
{
	struct ld_memtable *mt = aligned_alloc(64, sizeof(*mt)); /* its counters' own lines */
	if (!mt)
		return NULL;
	memset(mt, 0, sizeof(*mt));
	if (bloom_bits && !(mt->bloom = ld_bloom_create(capacity, bloom_bits))) {
		free(mt);
		return NULL;
	}
	mt->head = calloc(1, sizeof(struct ld_mnode) + LD_MAX_HEIGHT * sizeof(void *));
	if (!mt->head) {
		free(mt->bloom);
		free(mt);
		return NULL;
	}
	mt->head->height = LD_MAX_HEIGHT;
	pthread_mutex_init(&mt->arena_lock, NULL);
	mt->seq = seq;
	mt->capacity = capacity;
	mt->blocks = blocks;
	return mt;
}

void ld_mt_destroy(struct ld_memtable *mt)
{
	if (!mt)
		return;
	struct ld_mnode *n = atomic_load(&mt->heap_nodes) ? ld_mt_next(mt->head) : NULL;
	while (n) {
		struct ld_mnode *next = ld_mt_next(n);
		if (n->heap)
			free(n);
		n = next;
	}
	blocks_put(mt->blocks, atomic_load(&mt->arena));
	pthread_mutex_destroy(&mt->arena_lock);
	free(mt->head);
	if (!mt->bloom_lent)
		free(mt->bloom);
	free(mt);
}

/* preds/succs at every layer for the position of (k, lsn). */
static void find(struct ld_memtable *mt, const void *k, size_t kl, uint64_t key8, uint64_t lsn,
		 struct ld_mnode **preds, struct ld_mnode **succs)
{
	struct ld_mnode *x = mt->head;
	for (int l = LD_MAX_HEIGHT - 1; l >= 0; l--) {
		struct ld_mnode *n = atomic_load_explicit(&x->next[l], memory_order_acquire);
		while (n && node_cmp(n, k, kl, key8, lsn) < 0) {
			x = n;
			n = atomic_load_explicit(&x->next[l], memory_order_acquire);
		}
		preds[l] = x;
		succs[l] = n;
	}
}

struct ld_mnode *ld_mt_node_new(unsigned height)
{
	struct ld_mnode *n = malloc(sizeof(struct ld_mnode) + height * sizeof(void *));
	if (n) {
		n->height = height;
		n->heap = 1;
	}
	return n;
}


/* @sz bytes of @mt's current arena block for the calling thread's piece, a new block when
 * it is full; NULL when DRAM is out. */
static char *arena_carve(struct ld_memtable *mt, size_t sz)
{
	for (;;) {
		struct ld_arena_blk *b = atomic_load_explicit(&mt->arena, memory_order_acquire);
		if (b) {
			size_t off = atomic_fetch_add_explicit(&b->used, sz, memory_order_relaxed);
			if (off + sz <= LD_ARENA_BLOCK - sizeof(*b))
				return b->mem + off;
		}
		pthread_mutex_lock(&mt->arena_lock);
		if (atomic_load(&mt->arena) == b) { /* b is full (or there is none yet) */
			struct ld_arena_blk *nb = block_get(mt->blocks);
			if (!nb) {
				pthread_mutex_unlock(&mt->arena_lock);
				return NULL;
			}
			nb->prev = b;
			atomic_init(&nb->used, 0);
			atomic_store_explicit(&mt->arena, nb, memory_order_release);
		}
		pthread_mutex_unlock(&mt->arena_lock);
	}
}

struct ld_mnode *ld_mt_node_take(struct ld_memtable *mt, struct ld_tls *t, unsigned height)
{
	size_t sz = sizeof(struct ld_mnode) + height * sizeof(void *); /* 8-aligned */
	if (t->arena_seq != mt->seq || !t->arena_cur || (size_t)(t->arena_end - t->arena_cur) < sz) {
		char *piece = arena_carve(mt, LD_ARENA_PIECE);
		if (!piece)
			return NULL;
		t->arena_seq = mt->seq;
		t->arena_cur = piece;
		t->arena_end = piece + LD_ARENA_PIECE;
	}
	struct ld_mnode *n = (struct ld_mnode *)(void *)t->arena_cur;
	t->arena_cur += sz;
	n->height = height;
	n->heap = 0;
	return n;
}

void ld_mt_locate(struct ld_memtable *mt, struct ld_mnode *node, struct ld_entry *e,
		  const void *key, size_t klen, uint64_t lsn, struct ld_mt_pos *pos)
{
	node->e = e;
	node->key8 = ld_key8(key, klen);
	node->lsn = lsn;
	pos->key = key;
	pos->klen = klen;
	pos->bloom_hash = ld_bloom_hash(key, klen);
	ld_bloom_prefetch(mt->bloom, pos->bloom_hash);
	find(mt, key, klen, node->key8, lsn, pos->preds, pos->succs);
}

void ld_mt_link(struct ld_memtable *mt, struct ld_mnode *node, struct ld_mt_pos *pos)
{
	unsigned h = node->height;
	if (node->heap)
		atomic_fetch_add(&mt->heap_nodes, 1);
	ld_bloom_add(mt->bloom, pos->bloom_hash); /* before the node is reachable */
	for (unsigned l = 0; l < h; l++) {
		for (;;) {
			atomic_store_explicit(&node->next[l], pos->succs[l], memory_order_relaxed);
			struct ld_mnode *expect = pos->succs[l];
			if (atomic_compare_exchange_strong_explicit(&pos->preds[l]->next[l], &expect,
								    node, memory_order_release,
								    memory_order_acquire))
				break;
			find(mt, pos->key, pos->klen, node->key8, node->lsn, pos->preds, pos->succs);
		}
	}
}

void ld_mt_insert(struct ld_memtable *mt, struct ld_mnode *node, struct ld_entry *e,
		  const void *key, size_t klen, uint64_t lsn)
{
	struct ld_mt_pos pos;
	ld_mt_locate(mt, node, e, key, klen, lsn, &pos);
	ld_mt_link(mt, node, &pos);
}

static struct ld_mnode *seek(struct ld_memtable *mt, const void *k, size_t kl)
{
	uint64_t key8 = ld_key8(k, kl);
	struct ld_mnode *x = mt->head, *n = NULL;
	for (int l = LD_MAX_HEIGHT - 1; l >= 0; l--) {
		n = atomic_load_explicit(&x->next[l], memory_order_acquire);
		while (n && node_cmp(n, k, kl, key8, UINT64_MAX) < 0) {
			x = n;
			n = atomic_load_explicit(&x->next[l], memory_order_acquire);
		}
	}
	return n;
}

struct ld_entry *ld_mt_get(struct ld_memtable *mt, const void *k, size_t kl)
{
	struct ld_mnode *n = seek(mt, k, kl);
	if (n && ld_cmp_entry_key(n->e, k, kl) == 0)
		return n->e;
	return NULL;
}

/* ld_mt_collect: the bottom list is in key order and its nodes in arrival order, so a
 * walk of it is a chain of cache misses, one in flight at a time (6% of all samples of
 * a put run went to that walk). So the list is cut into segments at its nodes of layer
 * COLLECT_LAYER (about 4^3 nodes each), and COLLECT_WAYS segments are walked at once,
 * each step prefetching its node's successor: a first pass counts each segment's
 * nodes, a second (the nodes now cached) writes their entries where they belong. */
#define COLLECT_LAYER 3
#define COLLECT_WAYS 8

struct seg_cursor {
	struct ld_mnode *n, *end; /* the next node of segment k; the first of segment k+1 */
	size_t k, i;              /* the segment; its nodes so far (with @out: where the
				     next one goes) */
};

static void seg_begin(struct seg_cursor *c, struct ld_mnode *const *starts, size_t nseg,
		      size_t k, const size_t *pos, bool writing)
{
	c->k = k;
	c->n = starts[k];
	c->end = k + 1 < nseg ? starts[k + 1] : NULL;
	c->i = writing ? pos[k] : 0;
}

/* Walks the @nseg segments: without @out, pos[k] = the number of nodes of segment k;
 * with it, the entries of segment k go to out[pos[k]...]. */
static void walk_segments(struct ld_mnode *const *starts, size_t nseg, size_t *pos,
			  struct ld_entry **out)
{
	struct seg_cursor c[COLLECT_WAYS];
	size_t next = 0, live = 0;
	while (live < COLLECT_WAYS && next < nseg)
		seg_begin(&c[live++], starts, nseg, next++, pos, out != NULL);
	while (live > 0)
		for (size_t w = 0; w < live;) {
			struct seg_cursor *x = &c[w];
			if (x->n == x->end) {
				if (!out)
					pos[x->k] = x->i;
				if (next < nseg)
					seg_begin(x, starts, nseg, next++, pos, out != NULL);
				else
					c[w] = c[--live];
				continue;
			}
			if (out)
				out[x->i] = x->n->e;
			x->i++;
			x->n = ld_mt_next(x->n);
			if (x->n)
				__builtin_prefetch(x->n);
			w++;
		}
}

size_t ld_mt_collect(const struct ld_memtable *mt, struct ld_entry **out)
{
	size_t cap = (mt->capacity >> (2 * COLLECT_LAYER)) * 2 + 16, nseg = 0;
	struct ld_mnode **starts = malloc(cap * sizeof(*starts));
	if (starts) {
		starts[nseg++] = ld_mt_next(mt->head);
		for (struct ld_mnode *s = atomic_load(&mt->head->next[COLLECT_LAYER]); s;
		     s = atomic_load(&s->next[COLLECT_LAYER])) {
			if (nseg == cap) {
				struct ld_mnode **more = realloc(starts, 2 * cap * sizeof(*starts));
				if (!more) {
					free(starts);
					starts = NULL;
					break;
				}
				starts = more;
				cap *= 2;
			}
			starts[nseg++] = s;
		}
	}
	size_t *pos = starts ? malloc(nseg * sizeof(*pos)) : NULL;
	size_t n = 0;
	if (!pos) { /* out of DRAM for the segments: one walk, one miss at a time */
		free(starts);
		for (struct ld_mnode *m = ld_mt_next(mt->head); m; m = ld_mt_next(m))
			out[n++] = m->e;
		return n;
	}
	walk_segments(starts, nseg, pos, NULL);
	for (size_t k = 0; k < nseg; k++) {
		size_t cnt = pos[k];
		pos[k] = n;
		n += cnt;
	}
	walk_segments(starts, nseg, pos, out);
	free(pos);
	free(starts);
	return n;
}

struct ld_mnode *ld_mt_seek(struct ld_memtable *mt, const void *k, size_t kl)
{
	if (kl == 0)
		return ld_mt_next(mt->head);
	return seek(mt, k, kl);
}
