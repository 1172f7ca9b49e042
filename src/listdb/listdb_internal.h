/*
 * listdb_internal.h - the parts of ListDB and how they share state.
 *
 *   log.c       per-domain pools, log chunks (heap blocks owned by root slots), per-thread
 *               writers that append entries, the chunk registry, parsing chunks at open
 *   memtable.c  the MemTable: a lock-free insert-only skiplist in DRAM over log entries
 *   pmtable.c   PMTables in PM: linking sorted entries into per-shard, per-domain
 *               (braided) skiplists, searching them, iterating them
 *   zipper.c    Zipper compaction of one L0 table into L1 (Algorithm 3)
 *   gc.c        reclamation of log chunks whose every entry is obsolete
 *   lcache.c    the lookup caches (lcache.h)
 *   db.c        open/recovery (Algorithm 5), put/get/scan, write batches, the background
 *               threads
 *
 * Levels and shards. Keys are split into `shards` ranges by their first byte; every
 * PMTable (each L0 table and L1) is one skiplist per shard, so compaction threads merge
 * shards independently and a reader only ever follows one shard's list. In a list, the
 * bottom layer links every element; with braided lists, layer l >= 1 links only elements
 * of one domain and starts at that domain's head.
 *
 * Durability invariants:
 *   - a put returns after its entry is persisted (checksummed, next pointers 0);
 *   - L0 pointers are never flushed: L0 is rebuilt from the log at open;
 *   - L1: an element is made durable with all its next pointers before the first durable
 *     pointer to it is written; every L1 pointer store is flushed, and compaction fences
 *     before it records a table as merged (manifest.merged_seq);
 *   - every table with seq < merged_seq is wholly in L1; the table compacting_seq may be
 *     partly in L1 (entries flagged LD_F_IN_L1 and reachable from L1).
 */
#ifndef TIPS_LISTDB_INTERNAL_H
#define TIPS_LISTDB_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <tips/listdb.h>

#include "listdb/bloom.h"
#include "listdb/entry.h"
#include "listdb/lcache.h"

#define LD_MAGIC 0x31424474734c6954ull /* "TiLstDB1" */
#define LD_LAYOUT_VERSION 3u /* 2: entry checksum from hash_key (e01bf1c); 3: write
                                batch headers in the log (entry.h) */
#define LD_CHUNK_SIZE (1u << 20)
#define LD_MAX_CHUNKS 60000u
#define LD_MAX_SHARDS 16u
#define LD_HEAD_BYTES 256u /* a sentinel entry of LD_MAX_HEIGHT layers */

/* ---- PM layout --------------------------------------------------------------------- */

/* LD_CHUNK_SPARE: a block each domain keeps free for tombstones, so that a delete (the
 * way to make room) still finds log space in a full pool; it holds no entries and
 * becomes a LOG chunk when a delete takes it (log.c). */
enum ld_chunk_kind { LD_CHUNK_LOG = 1, LD_CHUNK_COPY = 2, LD_CHUNK_SPARE = 3 };

/* First bytes of every chunk; entries follow at LD_CHUNK_HDR. */
struct ld_chunk_hdr {
	uint64_t magic;
	uint32_t kind, domain;
	uint64_t created_seq; /* entries in it have seq >= this */
	uint64_t retired_max_seq; /* 0 while written; else the largest seq in it */
};
#define LD_CHUNK_HDR 64u

/* The root area of every domain pool. */
struct ld_root {
	uint64_t magic;
	uint32_t layout_version, domain;
	uint32_t domains, braided, shards, pad;
	uint8_t db_uuid[16]; /* uuid of the domain-0 pool: the pools belong together */
	/* MANIFEST (domain 0 only) */
	uint64_t merged_seq;     /* tables with seq < merged_seq are wholly in L1 */
	uint64_t compacting_seq; /* 0, or the table being merged (the micro-log) */
	uint64_t pad2[4];
	/* L1 sentinels: [shard][domain], each an entry of LD_MAX_HEIGHT layers, key "" */
	unsigned char l1_heads[LD_MAX_SHARDS][TIPS_LISTDB_MAX_DOMAINS][LD_HEAD_BYTES];
	uint64_t chunk_slots[LD_MAX_CHUNKS]; /* heap blocks of this domain's chunks */
};

/* ---- chunks and writers (log.c) ------------------------------------------------------ */

enum ld_chunk_state { LD_CS_FREE = 0, LD_CS_ACTIVE, LD_CS_RETIRED, LD_CS_UNCOUNTED, LD_CS_SPARE };

struct ld_chunk {
	struct ld_chunk_hdr *hdr;
	unsigned domain, slot;
	_Atomic int state;
	_Atomic uint32_t entries, obsolete; /* valid entries; of which obsolete */
	_Atomic uint64_t max_seq;
};

struct ld_domain {
	struct tips_pool *pool;
	struct ld_root *root;
	uintptr_t base, end;
	struct ld_chunk *chunks;    /* [LD_MAX_CHUNKS] */
	uint32_t *region_chunk;     /* per 256 KiB of the pool: chunk slot + 1, or 0 */
	pthread_mutex_t alloc_lock; /* chunk slot search and heap allocation */
	struct ld_chunk *spare;     /* under alloc_lock: the LD_CHUNK_SPARE, or NULL */
};

/* A thread's current chunk in one domain, for one kind. */
struct ld_writer {
	struct ld_chunk *chunk;
	char *cur, *end;
	bool from_spare; /* chunk was the domain's spare: tombstones only */
};

/* ---- MemTable (memtable.c) ----------------------------------------------------------- */

struct ld_mnode {
	struct ld_entry *e;
	uint64_t key8;  /* first 8 key bytes, big-endian, zero padded */
	uint64_t lsn;
	uint32_t height;
	uint32_t heap; /* 1: from ld_mt_node_new (malloc); 0: from its MemTable's arena */
	_Atomic(struct ld_mnode *) next[];
};

/* A block of a MemTable's node arena (memtable.c). */
struct ld_arena_blk {
	struct ld_arena_blk *prev;
	_Atomic size_t used;
	char mem[];
};

/* The arena blocks of destroyed MemTables, kept for the next ones (one per store): a
 * reused block is already faulted in, where a fresh one costs the kernel's zeroing of
 * its huge page on first touch. At most @cap blocks are kept; the rest are freed. */
struct ld_arena_cache {
	pthread_mutex_t lock;
	struct ld_arena_blk *free;
	unsigned n, cap;
};
void ld_arena_cache_init(struct ld_arena_cache *c, uint64_t memtable_entries);
void ld_arena_cache_fini(struct ld_arena_cache *c);

struct ld_memtable {
	/* Read by every put, written rarely: one line the writers share without moving it. */
	uint64_t seq;
	uint64_t capacity;
	uint64_t sealed_count;     /* slots handed out before the seal */
	struct ld_bloom *bloom;    /* NULL: none */
	bool bloom_lent;           /* the L0 table made from this one owns the filter */
	struct ld_mnode *head;
	/* Node arena: nodes of single puts are carved from blocks freed with the MemTable
	 * (no malloc or free per put, no walk of the nodes to free them). Each writer
	 * carves its nodes from a piece of LD_ARENA_PIECE bytes of its own (ld_tls), so
	 * the block's shared offset moves once per piece, not once per put. */
	_Atomic(struct ld_arena_blk *) arena; /* newest block */
	struct ld_arena_cache *blocks;        /* where blocks come from and go back to */
	/* Each counter every put changes has a line of its own, so that a writer's
	 * update of one does not take the line the other fields are read from. */
	_Alignas(64) _Atomic uint64_t issued; /* slots handed out; LD_MT_SEALED bit once sealed */
	_Alignas(64) _Atomic uint64_t done;   /* puts finished inserting */
	_Alignas(64) pthread_mutex_t arena_lock; /* adding a block */
	_Atomic uint64_t heap_nodes;          /* linked nodes from ld_mt_node_new */
};
#define LD_MT_SEALED (1ull << 62)

struct ld_tls;
struct ld_memtable *ld_mt_create(uint64_t seq, uint64_t capacity, unsigned bloom_bits,
				 struct ld_arena_cache *blocks);
void ld_mt_destroy(struct ld_memtable *mt);
/* A node of @height layers for ld_mt_insert (its height set; NULL when DRAM is out).
 * Taken before the entry is written, so that a put never persists an entry it cannot
 * index; the entry gets the node's height. ld_mt_node_new: malloc (write batches take
 * theirs before they know their MemTable; a node not inserted is freed with free());
 * ld_mt_node_take: from @mt's arena, for insertion into @mt only (never freed alone). */
struct ld_mnode *ld_mt_node_new(unsigned height);
struct ld_mnode *ld_mt_node_take(struct ld_memtable *mt, struct ld_tls *t, unsigned height);
/* Links @node (its height set by ld_mt_node_new or ld_mt_node_take; @e has that
 * height) for @e (lock-free); cannot fail. @key, @klen and @lsn are @e's, from the
 * caller: @e itself is not read, as its lines were just written back: on some CPUs, AMD
 * Zen among them, the line then leaves the core's near caches, and that load was most of
 * ld_mt_locate's time (docs/listdb.md, "Thirteenth round"). */
void ld_mt_insert(struct ld_memtable *mt, struct ld_mnode *node, struct ld_entry *e,
		  const void *key, size_t klen, uint64_t lsn);
/* ld_mt_insert in two steps. ld_mt_locate fills @node for @e and finds its place in
 * @pos, publishing nothing (a put runs it while its entry's flush is under way);
 * ld_mt_link then links it at @pos, searching again where another insert intervened.
 * @key stays the caller's until ld_mt_link returns. */
struct ld_mt_pos {
	struct ld_mnode *preds[LD_MAX_HEIGHT], *succs[LD_MAX_HEIGHT];
	uint64_t bloom_hash; /* of the entry's key: its Bloom block is prefetched */
	const void *key;     /* the entry's key (the caller's copy) */
	size_t klen;
};
void ld_mt_locate(struct ld_memtable *mt, struct ld_mnode *node, struct ld_entry *e,
		  const void *key, size_t klen, uint64_t lsn, struct ld_mt_pos *pos);
void ld_mt_link(struct ld_memtable *mt, struct ld_mnode *node, struct ld_mt_pos *pos);
/* The newest entry with this key, or NULL. */
struct ld_entry *ld_mt_get(struct ld_memtable *mt, const void *k, size_t kl);
/* First node with key >= k (bottom layer), NULL at the end; kl 0: the first node. */
struct ld_mnode *ld_mt_seek(struct ld_memtable *mt, const void *k, size_t kl);
static inline struct ld_mnode *ld_mt_next(const struct ld_mnode *n)
{
	return atomic_load_explicit(&n->next[0], memory_order_acquire);
}
/* The entries of a sealed MemTable that no writer changes any more, in list order, into
 * @out (room for every node); returns their number. */
size_t ld_mt_collect(const struct ld_memtable *mt, struct ld_entry **out);

/* ---- PMTables (pmtable.c) ------------------------------------------------------------ */

struct tips_listdb;
struct ld_tls;

/* An L0 table: per shard and domain, DRAM heads of its lists. */
struct ld_l0 {
	uint64_t seq;
	struct ld_bloom *bloom; /* of the MemTable it was, or rebuilt at recovery */
	struct ld_entry *heads[LD_MAX_SHARDS][TIPS_LISTDB_MAX_DOMAINS]; /* sentinels in DRAM */
	void *head_mem;
	size_t nshard[LD_MAX_SHARDS]; /* elements per shard */
	/* The elements in list order (DRAM): shard s is elems[first[s] .. first[s] +
	 * nshard[s]). Zipper's scan reads them from here rather than by following the
	 * L0 list, so it can look ahead and search several stretches at once. */
	struct ld_entry **elems;
	size_t first[LD_MAX_SHARDS];
	struct ld_l0 *newer; /* the next newer L0 table (list, oldest first) */
};

unsigned ld_shard_of(const struct tips_listdb *db, const void *k, size_t kl);
unsigned ld_domain_of(const struct tips_listdb *db, const void *p);
/* Builds @t's lists from @n entries sorted by ld_cmp_entries (newest first per key);
 * writes their next pointers (not flushed). Inserts each key's newest into @hc.
 * Keeps a copy of @sorted in t->elems. 0, or TIPS_ENOMEM (no DRAM for the heads or
 * that copy) before any pointer was written. */
int ld_l0_link(struct tips_listdb *db, struct ld_l0 *t, struct ld_entry **sorted, size_t n,
	       struct ld_hcache *hc);
void ld_l0_free(struct ld_l0 *t);
/* recover.c: rebuilds the L0 tables from the log at open (Algorithm 5); sets
 * next_seq, recovered_entries, recovery_ms. 0, or TIPS_ENOMEM. */
int ld_recover(struct tips_listdb *db);
struct ld_entry *ld_l1_head(const struct tips_listdb *db, unsigned shard, unsigned domain);
/* Every domain's L1 sentinel of @shard into @heads[0..domains). */
void ld_l1_heads(const struct tips_listdb *db, unsigned shard, struct ld_entry **heads);
/* Newest live (not obsolete) element with key @k in the list headed by @heads (one
 * sentinel per domain), searched as a thread of @t's domain (@t NULL: no counting),
 * from @start (an element of the list with key < k) if not NULL; @above, if not NULL,
 * is an element of the list with key >= k, which the search then never reads.
 * @stop_at_l1: give up on meeting an element flagged LD_F_IN_L1 (an L0 table being
 * merged). */
struct ld_entry *ld_list_get(struct tips_listdb *db, struct ld_tls *t, struct ld_entry *const *heads,
			     struct ld_entry *start, const struct ld_entry *above, const void *k,
			     size_t kl, bool stop_at_l1);
/* First element with key >= k (kl 0: the first element) at the bottom layer, or NULL. */
struct ld_entry *ld_list_seek(struct tips_listdb *db, struct ld_entry *const *heads,
			      const void *k, size_t kl);
/* Asks for both lines a comparison with @n reads: its header, and its key, which lies
 * past the first line when the element is 5 or more layers tall (24 header bytes and
 * 8 per layer), and whose address depends on the height read from the first: left to
 * the load, the second miss waits for the first (Zipper's scan, reclamation's search). */
static inline void ld_prefetch_compared(const struct ld_entry *n)
{
	__builtin_prefetch(n);
	__builtin_prefetch((const char *)n + 64);
}
/* One step of a search on layer @l, standing at *@x with *@n its successor: if *@n sorts
 * before @e, moves to it, loads its successor into *@n and prefetches it, and returns
 * true (the caller yields if *@n is not NULL); false: *@x is @e's predecessor. */
static inline bool ld_walk_step(struct ld_entry **x, struct ld_entry **n, const struct ld_entry *e,
				unsigned l)
{
	if (!*n || ld_cmp_entries(*n, e) >= 0)
		return false;
	*x = *n;
	*n = ld_next(*x, l);
	if (*n)
		ld_prefetch_compared(*n);
	return true;
}
/* The one of two elements of the same list that comes later (sentinels, of key length
 * 0, come first). */
static inline struct ld_entry *ld_later(struct ld_entry *a, struct ld_entry *b)
{
	if (a->klen == 0)
		return b;
	if (b->klen == 0)
		return a;
	return ld_cmp_entries(a, b) >= 0 ? a : b;
}
/* The predecessors of @e's position, layer by layer: layers >= 1 in the lists of domain
 * @d (braided) or the shared ones, layer 0 in the bottom list. @resume: @preds holds
 * start points (NULL or a sentinel: none), the predecessors found by the last call
 * for an element of the same lists ordered before @e and still linked; the search
 * then walks only the gap between the two (a finger search). */
void ld_list_preds(struct tips_listdb *db, struct ld_entry *const *heads, const struct ld_entry *e,
		   unsigned d, struct ld_entry **preds, bool resume);
/* 1 if @e is linked in the bottom layer of the list, for entries asked in ascending
 * ld_cmp_entries order (recovery's check of an interrupted compaction): @finger is
 * LD_MAX_HEIGHT pointers, all NULL before the first call on the list, that carry each
 * layer's predecessor from one call to the next, so each search starts where the last
 * one stopped. */
bool ld_list_contains(struct tips_listdb *db, struct ld_entry *const *heads, const struct ld_entry *e,
		      struct ld_entry **finger);

/* db.c: CLOCK_MONOTONIC in ns (stall and recovery timings). */
uint64_t ld_now_ns(void);

/* ---- the database ------------------------------------------------------------------ */

struct ld_view {
	struct ld_memtable *mutable_mt;
	unsigned nimm;
	struct ld_memtable *imm[32]; /* newest first */
	unsigned nl0, cap;           /* cap: room in l0[], allocated before any change */
	struct ld_l0 *l0[];          /* [nl0], newest first */
};

/* DRAM allocations of the background work that tests can make fail (struct
 * tips_listdb.dram_faults); each has an error path that leaves the database as it was. */
enum ld_dram_site {
	LD_DRAM_VIEW = 1u,   /* a readers' view (MemTable switch, flush, compaction) */
	LD_DRAM_FLUSH = 2u,  /* a flush's sorted entries, L0 table and heads */
	LD_DRAM_ZIPPER = 4u, /* a compaction thread's stack and tombstone list */
};

struct ld_tls;

struct tips_listdb {
	struct tips_listdb_config cfg;
	unsigned domains, shards;
	bool braided;
	struct ld_domain dom[TIPS_LISTDB_MAX_DOMAINS];
	struct ld_root *manifest; /* dom[0].root */

	_Atomic(struct ld_memtable *) mutable_mt;
	_Atomic(struct ld_view *) view;  /* readers' snapshot (RCU) */
	pthread_mutex_t view_lock;       /* writers of the table lists */
	struct ld_arena_cache arena_blocks; /* MemTable arena blocks to reuse */
	struct ld_memtable *imm_oldest[32]; /* oldest first */
	_Atomic unsigned nimm;   /* changed under view_lock */
	struct ld_l0 *l0_oldest; /* oldest first, linked by newer */
	_Atomic unsigned nl0;    /* changed under view_lock */
	pthread_cond_t bg_cond, stall_cond;
	pthread_mutex_t bg_lock;
	bool stop;               /* under bg_lock: */
	bool flushing, compaction_busy, recount_pending;
	unsigned helpers_in;     /* threads merging shards of db->compacting */
	unsigned bg_running;
	pthread_t bg[8];
	_Atomic int bg_error;    /* 0, or the code of the last failed flush or compaction
	                            (retried every LD_RETRY_MS; cleared by a success) */
	_Atomic uint64_t bg_started;  /* flushes and compactions begun so far (written
	                                 under bg_lock): an attempt's number */
	_Atomic uint64_t bg_failed;   /* the number of the newest attempt that failed */
	_Atomic unsigned dram_faults; /* tests: ld_dram_site bits whose allocations fail */
	pthread_mutex_t compaction_lock; /* L1 writers: compaction, gc */
	/* compaction work shared by the threads */
	struct ld_l0 *compacting; /* under bg_lock */
	_Atomic unsigned next_shard; /* set under bg_lock with compacting; >= shards
	                                 whenever no compaction runs */

	struct ld_hcache *hcache;
	struct ld_scache *scache;
	pthread_mutex_t scache_lock;

	pthread_mutex_t key_locks[256];
	pthread_key_t tls_key;
	struct ld_tls *tls_all; /* every thread's state, freed at close */
	pthread_mutex_t tls_lock;

	struct {
		_Atomic uint64_t memtables_flushed, entries_flushed;
		_Atomic uint64_t compactions, entries_merged;
		_Atomic uint64_t obsolete_marked, chunks_reclaimed;
		_Atomic uint64_t write_stall_ns, write_stalls;
		_Atomic uint64_t ctrav, ccross;
		_Atomic uint64_t compaction_fences; /* by Zipper's merges */
		_Atomic uint64_t flush_cpu_ns, compaction_cpu_ns; /* thread CPU time */
	} st;
	double recovery_ms;
	uint64_t recovered_entries;
	int recovered;
	uint64_t next_seq; /* seq of the next MemTable */
};

/* Per-thread state (log.c). */
struct ld_tls {
	struct tips_listdb *db;
	unsigned domain;
	uint64_t rng;
	struct ld_writer w[TIPS_LISTDB_MAX_DOMAINS][2]; /* [domain][kind-1] */
	/* Counters of the calling thread's operations, written by it alone (no shared
	 * cache line on the hot path); tips_listdb_stats() sums every thread's. */
	struct {
		_Atomic uint64_t puts, deletes, gets;
		_Atomic uint64_t cache_lookups, cache_hits, second_chance_hits;
		_Atomic uint64_t traversals, cross;
	} n;
	/* This thread's piece of a MemTable's node arena (memtable.c): nodes are carved
	 * from [arena_cur, arena_end) while arena_seq is the MemTable's seq. */
	uint64_t arena_seq;
	char *arena_cur, *arena_end;
	struct ld_tls *next_all;
};
/* Adds @k to the calling thread's counter @f of @t (a plain load and store: one writer). */
#define LD_COUNT(t, f, k)                                                                \
	atomic_store_explicit(&(t)->n.f,                                                 \
			      atomic_load_explicit(&(t)->n.f, memory_order_relaxed) + (k),      \
			      memory_order_relaxed)
struct ld_tls *ld_tls_get(struct tips_listdb *db);

#define LD_RETRY_MS 10 /* a failed flush or compaction is tried again after this */

/* db.c: calloc(1, @n), unless a test made @site fail (then NULL, like real exhaustion). */
void *ld_dram_calloc(struct tips_listdb *db, enum ld_dram_site site, size_t n);

/* log.c */
int ld_domains_open(struct tips_listdb *db, const char *path, bool create);
void ld_domains_close(struct tips_listdb *db);
/* Reserves room for an entry of @size bytes in this thread's chunk of @kind in its
 * domain (a new chunk when full); returns the address and its chunk. @tombstone: the
 * entry is a delete, which may take the domain's spare chunk when the pool is full;
 * other LOG entries keep the spare in place (allocate it first) and never write into
 * it. 0, TIPS_ENOMEM (the pool is full), TIPS_ETOOBIG. */
int ld_log_reserve(struct tips_listdb *db, struct ld_tls *t, enum ld_chunk_kind kind,
		   size_t size, uint64_t seq, bool tombstone, struct ld_entry **out,
		   struct ld_chunk **chunk);
struct ld_chunk *ld_chunk_of(struct tips_listdb *db, const void *p);
/* Parses the valid entries of a chunk; calls fn for each; returns the count. */
typedef void (*ld_entry_fn)(struct ld_chunk *c, struct ld_entry *e, void *arg);
uint64_t ld_chunk_parse(struct ld_chunk *c, ld_entry_fn fn, void *arg);
int ld_chunk_free(struct tips_listdb *db, struct ld_chunk *c);
void ld_mark_obsolete(struct tips_listdb *db, struct ld_entry *e);

/* zipper.c: a compaction thread's buffers for merging @t (sized by its largest shard);
 * NULL when DRAM is out, before anything was changed. */
struct ld_zipper_mem *ld_zipper_mem_new(struct tips_listdb *db, const struct ld_l0 *t);
void ld_zipper_mem_free(struct ld_zipper_mem *m);
/* Merges shards of db->compacting (@t) until none is left to take; run by every
 * compaction thread of the round, each with its own @m. Cannot fail. */
void ld_zipper_shards(struct tips_listdb *db, struct ld_l0 *t, struct ld_zipper_mem *m);
/* gc.c: reclaims fully obsolete chunks; the caller holds compaction_lock. */
void ld_gc_run(struct tips_listdb *db);
void ld_gc_recount(struct tips_listdb *db);

/* log.c: per-thread state */
int ld_tls_init(struct tips_listdb *db);
void ld_tls_fini(struct tips_listdb *db);
void ld_tls_retire_all(struct tips_listdb *db);

#endif /* TIPS_LISTDB_INTERNAL_H */
