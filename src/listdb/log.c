/*
 * log.c - ListDB's pools and log chunks.
 *
 * A database is one pool per NUMA domain (listdb.h). Each pool's root (struct ld_root)
 * names it (magic, domain, the uuid of domain 0) and owns its log chunks: 1 MiB heap
 * blocks handed atomically to a root slot by tips_heap_alloc_to(), so a crash never
 * leaks or double-owns one. Threads append entries to a chunk of their own per domain
 * and kind; entries in a chunk are in LSN order.
 *
 * Invariant: the chunk header (kind, domain, created_seq) is persistent before the first
 * entry is written; every entry of a chunk has seq >= created_seq, so an entry left from
 * the block's previous life (seq < created_seq, since a chunk is only freed when all its
 * tables are merged) or a torn one (bad checksum) ends the parse.
 *
 * The spare. Each domain keeps one chunk of kind LD_CHUNK_SPARE, allocated before any
 * other LOG chunk (so puts and flushes cannot take the last block) and taken only by a
 * delete that finds the pool full: a delete is how a user makes room, so a full pool
 * still accepts about LD_CHUNK_SIZE bytes of tombstones per domain. Taking it rewrites
 * its header (created_seq, then kind LOG, one cache line, persisted) before the first
 * entry is written, so after a crash it is either an empty spare or an ordinary LOG
 * chunk. The next put that allocates a chunk allocates a new spare first. The thread
 * that took it writes only tombstones into it (ld_writer.from_spare).
 *
 * Parsing (ld_chunk_parse) reports entries only: a write batch's header (entry.h) is
 * checked with all its entries and then skipped; a batch that is not whole ends the log.
 */
#define _GNU_SOURCE
#include "listdb/listdb_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <tips/heap.h>

#include "pm/pm.h"
#include "util/errors_internal.h"
#include "util/thread_slot.h"

#define REGION_SHIFT 18 /* heap extents are made of 256 KiB chunks */

int tips_listdb_pool_path(const char *path, unsigned domain, char *buf, size_t cap)
{
	if (!path || (!buf && cap))
		return tips_set_error(TIPS_EINVAL, "tips_listdb_pool_path: NULL path or buffer");
	if (domain == 0)
		return snprintf(buf, cap, "%s", path);
	return snprintf(buf, cap, "%s.d%u", path, domain);
}

int tips_listdb_destroy(const char *path)
{
	if (!path)
		return tips_set_error(TIPS_EINVAL, "NULL path");
	char p[4096];
	int found = 0;
	for (unsigned d = 0; d < TIPS_LISTDB_MAX_DOMAINS; d++) {
		tips_listdb_pool_path(path, d, p, sizeof(p));
		found |= unlink(p) == 0;
	}
	return found ? 0 : tips_set_error(TIPS_ENOENT, "%s: no ListDB pool to remove", path);
}

static void init_head(unsigned char *mem)
{
	struct ld_entry *h = (struct ld_entry *)mem;
	memset(mem, 0, LD_HEAD_BYTES);
	h->height = LD_MAX_HEIGHT;
}

static int init_root(struct tips_listdb *db, unsigned d, const uint8_t *uuid)
{
	struct ld_root *r = db->dom[d].root;
	memset(r, 0, sizeof(*r));
	r->layout_version = LD_LAYOUT_VERSION;
	r->domain = d;
	r->domains = db->domains;
	r->braided = db->braided;
	r->shards = db->shards;
	memcpy(r->db_uuid, uuid, 16);
	r->merged_seq = 1;
	for (unsigned s = 0; s < LD_MAX_SHARDS; s++)
		for (unsigned x = 0; x < TIPS_LISTDB_MAX_DOMAINS; x++)
			init_head(r->l1_heads[s][x]);
	pm_persist(r, sizeof(*r));
	r->magic = LD_MAGIC; /* last: a root without it was never finished */
	pm_persist(&r->magic, sizeof(r->magic));
	return 0;
}

static int check_root(struct tips_listdb *db, unsigned d, const uint8_t *uuid, const char *path)
{
	struct ld_root *r = db->dom[d].root;
	if (r->magic != LD_MAGIC)
		return tips_set_error(TIPS_EMISMATCH, "%s: a TIPS pool that does not hold a "
				      "ListDB database", path);
	if (r->layout_version != LD_LAYOUT_VERSION)
		return tips_set_error(TIPS_EVERSION, "%s: ListDB layout %u, this build reads %u",
				      path, r->layout_version, LD_LAYOUT_VERSION);
	if (r->domain != d || memcmp(r->db_uuid, uuid, 16) != 0)
		return tips_set_error(TIPS_ECORRUPT, "%s: domain pool of another database "
				      "(or of another domain)", path);
	if (r->domains == 0 || r->domains > TIPS_LISTDB_MAX_DOMAINS || r->shards == 0 ||
	    r->shards > LD_MAX_SHARDS || r->merged_seq == 0)
		return tips_set_error(TIPS_ECORRUPT, "%s: damaged ListDB root", path);
	return 0;
}

static int map_domain(struct tips_listdb *db, unsigned d)
{
	struct ld_domain *dm = &db->dom[d];
	struct tips_pool_info info;
	tips_pool_info(dm->pool, &info);
	size_t root_size = 0;
	dm->root = tips_pool_root(dm->pool, &root_size);
	if (root_size < sizeof(struct ld_root))
		return tips_set_error(TIPS_ESIZE, "pool root area of %zu bytes; ListDB needs %zu",
				      root_size, sizeof(struct ld_root));
	dm->base = (uintptr_t)info.map_addr;
	dm->end = dm->base + info.size;
	dm->chunks = calloc(LD_MAX_CHUNKS, sizeof(*dm->chunks));
	dm->region_chunk = calloc((info.size >> REGION_SHIFT) + 1, sizeof(uint32_t));
	if (!dm->chunks || !dm->region_chunk)
		return tips_set_error(TIPS_ENOMEM, "out of DRAM for the chunk registry");
	pthread_mutex_init(&dm->alloc_lock, NULL);
	return 0;
}

static void register_chunk(struct tips_listdb *db, unsigned d, unsigned slot, void *mem)
{
	struct ld_domain *dm = &db->dom[d];
	struct ld_chunk *c = &dm->chunks[slot];
	c->hdr = mem;
	c->domain = d;
	c->slot = slot;
	atomic_store(&c->entries, 0);
	atomic_store(&c->obsolete, 0);
	atomic_store(&c->max_seq, 0);
	uintptr_t a = (uintptr_t)mem - dm->base;
	for (uintptr_t r = a >> REGION_SHIFT; r <= (a + LD_CHUNK_SIZE - 1) >> REGION_SHIFT; r++)
		dm->region_chunk[r] = slot + 1;
}

static void unregister_chunk(struct tips_listdb *db, struct ld_chunk *c)
{
	struct ld_domain *dm = &db->dom[c->domain];
	uintptr_t a = (uintptr_t)c->hdr - dm->base;
	for (uintptr_t r = a >> REGION_SHIFT; r <= (a + LD_CHUNK_SIZE - 1) >> REGION_SHIFT; r++)
		if (dm->region_chunk[r] == c->slot + 1)
			dm->region_chunk[r] = 0;
	c->hdr = NULL;
	atomic_store(&c->state, LD_CS_FREE);
}

/* The root area listdb creates its pools with; a pool with another one is not ours. */
static uint64_t ld_root_area_size(void)
{
	return (sizeof(struct ld_root) + 65535) & ~(uint64_t)65535;
}

static uint64_t default_pool_size(const struct tips_listdb_config *cfg)
{
	uint64_t per = cfg->expected_keys / (cfg->domains ? cfg->domains : 1);
	uint64_t sz = per * 200 + (256ull << 20);
	return (sz + TIPS_POOL_ALIGN - 1) & ~(TIPS_POOL_ALIGN - 1);
}

int ld_domains_open(struct tips_listdb *db, const char *path, bool create)
{
	char p[4096];
	struct tips_pool_options popts;
	if (db->cfg.pool)
		popts = *db->cfg.pool;
	else
		tips_pool_options_init(&popts);
	int rc = tips_pool_open(path, &popts, &db->dom[0].pool);
	bool fresh = false;
	if (rc == TIPS_ENOENT && create) {
		popts.size = db->cfg.pool_size ? db->cfg.pool_size : default_pool_size(&db->cfg);
		popts.root_size = ld_root_area_size();
		rc = tips_pool_create(path, &popts, &db->dom[0].pool);
		fresh = true;
	}
	if (rc)
		return rc;
	if ((rc = map_domain(db, 0)))
		return rc;
	struct ld_root *r0 = db->dom[0].root;
	struct tips_pool_info info;
	tips_pool_info(db->dom[0].pool, &info);
	if (r0->magic != LD_MAGIC) {
		/* A pool made by an interrupted create (root never finished) is adopted only
		 * when creating; anything else is somebody else's pool. */
		bool blank = info.root_size == ld_root_area_size();
		for (size_t i = 0; i < 4096 && blank; i++)
			blank = ((unsigned char *)r0)[i] == 0;
		if (blank) {
			struct tips_heap_stats hs;
			tips_heap_stats(tips_pool_heap(db->dom[0].pool), &hs);
			blank = hs.bytes_in_use == 0;
		}
		if (!fresh && !(create && blank))
			return create && r0->magic != LD_MAGIC
				       ? tips_set_error(TIPS_EEXIST, "%s: a TIPS pool that does not "
							"hold a ListDB database", path)
				       : check_root(db, 0, info.uuid, path);
		fresh = true;
	} else {
		db->domains = r0->domains;
		db->braided = r0->braided;
		db->shards = r0->shards;
	}
	for (unsigned d = 1; d < db->domains; d++) {
		tips_listdb_pool_path(path, d, p, sizeof(p));
		rc = tips_pool_open(p, &popts, &db->dom[d].pool);
		if (rc == TIPS_ENOENT && fresh) {
			popts.size = db->cfg.pool_size ? db->cfg.pool_size
						       : default_pool_size(&db->cfg);
			popts.root_size = ld_root_area_size();
			rc = tips_pool_create(p, &popts, &db->dom[d].pool);
		}
		if (rc)
			return rc;
		if ((rc = map_domain(db, d)))
			return rc;
		if (fresh)
			init_root(db, d, info.uuid);
		else if ((rc = check_root(db, d, info.uuid, p)))
			return rc;
	}
	if (fresh)
		init_root(db, 0, info.uuid); /* domain 0 last: its magic says all are made */
	else if ((rc = check_root(db, 0, info.uuid, path)))
		return rc;
	db->manifest = r0;
	/* The registry: every owned chunk, uncounted until parsed. */
	for (unsigned d = 0; d < db->domains; d++) {
		struct ld_root *r = db->dom[d].root;
		for (unsigned s = 0; s < LD_MAX_CHUNKS; s++) {
			if (!r->chunk_slots[s])
				continue;
			struct ld_chunk_hdr *h = (void *)(uintptr_t)r->chunk_slots[s];
			if (h->magic != LD_MAGIC || h->domain != d ||
			    (h->kind != LD_CHUNK_LOG && h->kind != LD_CHUNK_COPY &&
			     h->kind != LD_CHUNK_SPARE)) {
				/* chunk_alloc_locked() crashed between the allocation and the
				 * header's persist: the chunk was never handed out, so it holds
				 * no entry. Give the block back. */
				int frc = tips_heap_free_from(tips_pool_heap(db->dom[d].pool),
							      &r->chunk_slots[s]);
				if (frc)
					return frc;
				continue;
			}
			register_chunk(db, d, s, h);
			/* One spare is kept; another (none is ever made) would be parsed as
			 * an empty chunk and reclaimed. */
			bool spare = h->kind == LD_CHUNK_SPARE && !db->dom[d].spare;
			atomic_store(&db->dom[d].chunks[s].state, spare ? LD_CS_SPARE : LD_CS_UNCOUNTED);
			if (spare)
				db->dom[d].spare = &db->dom[d].chunks[s];
		}
	}
	return 0;
}

void ld_domains_close(struct tips_listdb *db)
{
	for (unsigned d = 0; d < TIPS_LISTDB_MAX_DOMAINS; d++) {
		struct ld_domain *dm = &db->dom[d];
		if (dm->pool)
			tips_pool_close(&dm->pool);
		free(dm->chunks);
		free(dm->region_chunk);
		dm->chunks = NULL;
		dm->region_chunk = NULL;
	}
}

struct ld_chunk *ld_chunk_of(struct tips_listdb *db, const void *p)
{
	uintptr_t a = (uintptr_t)p;
	for (unsigned d = 0; d < db->domains; d++) {
		struct ld_domain *dm = &db->dom[d];
		if (a >= dm->base && a < dm->end) {
			uint32_t s = dm->region_chunk[(a - dm->base) >> REGION_SHIFT];
			if (!s)
				return NULL;
			struct ld_chunk *c = &dm->chunks[s - 1];
			if (a < (uintptr_t)c->hdr || a >= (uintptr_t)c->hdr + LD_CHUNK_SIZE) {
				/* two chunks share this region: the other one */
				return NULL;
			}
			return c;
		}
	}
	return NULL;
}

/* Allocates a chunk of @kind for entries of seq >= @seq into a free root slot of domain
 * @d; the caller holds alloc_lock. */
static int chunk_alloc_locked(struct tips_listdb *db, unsigned d, enum ld_chunk_kind kind,
			      uint64_t seq, struct ld_chunk **out)
{
	struct ld_domain *dm = &db->dom[d];
	unsigned s;
	for (s = 0; s < LD_MAX_CHUNKS; s++)
		if (dm->root->chunk_slots[s] == 0 && atomic_load(&dm->chunks[s].state) == LD_CS_FREE)
			break;
	if (s == LD_MAX_CHUNKS)
		return tips_set_error(TIPS_ENOMEM, "domain %u: all %u chunk slots in use", d,
				      LD_MAX_CHUNKS);
	int rc = tips_heap_alloc_to(tips_pool_heap(dm->pool), LD_CHUNK_SIZE,
				    &dm->root->chunk_slots[s]);
	if (rc)
		return rc == TIPS_ENOMEM ? tips_set_error(rc, "ListDB: domain %u pool is full", d)
					 : rc;
	struct ld_chunk_hdr *h = (void *)(uintptr_t)dm->root->chunk_slots[s];
	memset(h, 0, LD_CHUNK_HDR + sizeof(struct ld_entry));
	h->kind = kind;
	h->domain = d;
	h->created_seq = seq;
	h->magic = LD_MAGIC;
	pm_persist(h, LD_CHUNK_HDR + sizeof(struct ld_entry));
	register_chunk(db, d, s, h);
	atomic_store(&dm->chunks[s].state, kind == LD_CHUNK_SPARE ? LD_CS_SPARE : LD_CS_ACTIVE);
	*out = &dm->chunks[s];
	return 0;
}

/* Turns the domain's spare into an active LOG chunk for entries of seq >= @seq; the
 * caller holds alloc_lock and dm->spare is set. */
static struct ld_chunk *spare_take_locked(struct ld_domain *dm, uint64_t seq)
{
	struct ld_chunk *c = dm->spare;
	struct ld_chunk_hdr *h = c->hdr;
	h->created_seq = seq;
	h->retired_max_seq = 0;
	h->kind = LD_CHUNK_LOG; /* the header is one cache line: persisted at once */
	pm_persist(h, LD_CHUNK_HDR);
	atomic_store(&c->max_seq, 0);
	atomic_store(&c->state, LD_CS_ACTIVE);
	dm->spare = NULL;
	return c;
}

/* A new chunk of @kind in domain @d (see "The spare" above); *@from_spare says whether
 * it is the spare, which only a @tombstone may take. */
static int chunk_new(struct tips_listdb *db, unsigned d, enum ld_chunk_kind kind, uint64_t seq,
		     bool tombstone, struct ld_chunk **out, bool *from_spare)
{
	struct ld_domain *dm = &db->dom[d];
	int rc = 0;
	*from_spare = false;
	pthread_mutex_lock(&dm->alloc_lock);
	if (kind == LD_CHUNK_LOG && !tombstone && !dm->spare)
		rc = chunk_alloc_locked(db, d, LD_CHUNK_SPARE, seq, &dm->spare);
	if (rc == 0)
		rc = chunk_alloc_locked(db, d, kind, seq, out);
	if (rc == TIPS_ENOMEM && tombstone && dm->spare) {
		*out = spare_take_locked(dm, seq);
		*from_spare = true;
		rc = 0;
	}
	pthread_mutex_unlock(&dm->alloc_lock);
	return rc;
}

static void chunk_retire(struct ld_chunk *c)
{
	uint64_t m = atomic_load(&c->max_seq);
	c->hdr->retired_max_seq = m ? m : c->hdr->created_seq;
	pm_persist(&c->hdr->retired_max_seq, 8);
	atomic_store(&c->state, LD_CS_RETIRED);
}

int ld_log_reserve(struct tips_listdb *db, struct ld_tls *t, enum ld_chunk_kind kind, size_t size,
		   uint64_t seq, bool tombstone, struct ld_entry **out, struct ld_chunk **chunk)
{
	if (size > LD_CHUNK_SIZE - LD_CHUNK_HDR)
		return tips_set_error(TIPS_ETOOBIG, "entry of %zu bytes", size);
	struct ld_writer *w = &t->w[t->domain][kind - 1];
	if (!w->chunk || w->cur + size > w->end || (w->from_spare && !tombstone)) {
		/* The new chunk first: on failure the thread keeps its current one (and a
		 * chunk that was the spare keeps its room for tombstones). */
		struct ld_chunk *c = NULL;
		bool from_spare;
		int rc = chunk_new(db, t->domain, kind, seq, tombstone, &c, &from_spare);
		if (rc)
			return rc;
		if (w->chunk)
			chunk_retire(w->chunk);
		w->chunk = c;
		w->from_spare = from_spare;
		w->cur = (char *)c->hdr + LD_CHUNK_HDR;
		w->end = (char *)c->hdr + LD_CHUNK_SIZE;
	}
	*out = (struct ld_entry *)w->cur;
	*chunk = w->chunk;
	w->cur += size;
	return 0;
}

/* Whether @e, at most @end, looks like an entry of this chunk's life (LSN >= @floor)
 * and its checksum matches. */
static bool entry_intact(const struct ld_entry *e, const char *end, uint64_t floor)
{
	if ((const char *)e + sizeof(struct ld_entry) > end || e->lsn < floor || e->lsn == 0 ||
	    e->height == 0 || e->height > LD_MAX_HEIGHT || e->klen == 0 ||
	    e->klen > TIPS_MAX_KEY || e->vlen > TIPS_MAX_VALUE ||
	    (e->op != LD_OP_PUT && e->op != LD_OP_DELETE && e->op != LD_OP_BATCH))
		return false;
	return (const char *)e + ld_entry_bytes(e) <= end && ld_entry_checksum(e) == e->csum;
}

/* The entries of the batch whose header is @h: how many (0 when the batch is not whole:
 * a commit that never finished, so the log ends at its header). */
static uint64_t batch_entries(const struct ld_entry *h, const char *end, uint64_t floor)
{
	uint64_t n, digest;
	if (h->height != 1 || h->klen != 8 || h->vlen != 8)
		return 0;
	memcpy(&n, ld_key(h), 8);
	memcpy(&digest, ld_val(h), 8);
	const char *p = (const char *)h + ld_entry_bytes(h);
	uint64_t d = h->lsn;
	for (uint64_t i = 0; i < n; i++) {
		const struct ld_entry *e = (const void *)p;
		if (!entry_intact(e, end, floor) || e->op == LD_OP_BATCH || e->lsn != h->lsn + i)
			return 0;
		d = ld_batch_digest(d, e);
		p += ld_entry_bytes(e);
	}
	return d == digest ? n : 0;
}

uint64_t ld_chunk_parse(struct ld_chunk *c, ld_entry_fn fn, void *arg)
{
	char *p = (char *)c->hdr + LD_CHUNK_HDR, *end = (char *)c->hdr + LD_CHUNK_SIZE;
	uint64_t n = 0, last = 0, floor = c->hdr->created_seq << 32;
	/* A log chunk is written in LSN order; a copy chunk (WAL flush) in key order. */
	bool ordered = c->hdr->kind == LD_CHUNK_LOG;
	while (p < end) {
		struct ld_entry *e = (struct ld_entry *)p;
		if (!entry_intact(e, end, floor) || (ordered && e->lsn <= last))
			break;
		/* A batch header: its entries follow, all of them or the log ends here. */
		uint64_t k = 1;
		if (e->op == LD_OP_BATCH) {
			if (!ordered || !(k = batch_entries(e, end, floor)))
				break;
			p += ld_entry_bytes(e);
		}
		for (uint64_t i = 0; i < k; i++) {
			e = (struct ld_entry *)p;
			last = e->lsn;
			n++;
			if (fn)
				fn(c, e, arg);
			p += ld_entry_bytes(e);
		}
	}
	return n;
}

int ld_chunk_free(struct tips_listdb *db, struct ld_chunk *c)
{
	struct ld_domain *dm = &db->dom[c->domain];
	pthread_mutex_lock(&dm->alloc_lock);
	unregister_chunk(db, c);
	int rc = tips_heap_free_from(tips_pool_heap(dm->pool), &dm->root->chunk_slots[c->slot]);
	pthread_mutex_unlock(&dm->alloc_lock);
	return rc;
}

void ld_mark_obsolete(struct tips_listdb *db, struct ld_entry *e)
{
	uint8_t old = atomic_fetch_or(&e->flags, LD_F_OBSOLETE);
	if (old & LD_F_OBSOLETE)
		return;
	pm_flush((const void *)&e->flags, 1);
	atomic_fetch_add(&db->st.obsolete_marked, 1);
	struct ld_chunk *c = ld_chunk_of(db, e);
	if (c)
		atomic_fetch_add(&c->obsolete, 1);
}

/* ---- per-thread state ------------------------------------------------------------------ */

static void tls_retire(struct ld_tls *t)
{
	for (unsigned d = 0; d < TIPS_LISTDB_MAX_DOMAINS; d++)
		for (unsigned k = 0; k < 2; k++)
			if (t->w[d][k].chunk) {
				chunk_retire(t->w[d][k].chunk);
				t->w[d][k].chunk = NULL;
			}
}

/* Thread exit: its chunks get no more entries. The struct stays on db->tls_all. */
static void tls_destructor(void *p)
{
	struct ld_tls *t = p;
	tls_retire(t);
}

int ld_tls_init(struct tips_listdb *db)
{
	pthread_mutex_init(&db->tls_lock, NULL);
	return pthread_key_create(&db->tls_key, tls_destructor) ? TIPS_ENOMEM : 0;
}

void ld_tls_fini(struct tips_listdb *db)
{
	pthread_key_delete(db->tls_key);
	struct ld_tls *t = db->tls_all;
	while (t) {
		struct ld_tls *n = t->next_all;
		free(t);
		t = n;
	}
	db->tls_all = NULL;
}

void ld_tls_retire_all(struct tips_listdb *db)
{
	pthread_mutex_lock(&db->tls_lock);
	for (struct ld_tls *t = db->tls_all; t; t = t->next_all)
		tls_retire(t);
	pthread_mutex_unlock(&db->tls_lock);
}

struct ld_tls *ld_tls_get(struct tips_listdb *db)
{
	struct ld_tls *t = pthread_getspecific(db->tls_key);
	if (t)
		return t;
	t = calloc(1, sizeof(*t));
	if (!t)
		return NULL;
	t->db = db;
	t->domain = thread_slot_get() % db->domains;
	t->rng = ((uint64_t)(uintptr_t)t * 0x9e3779b97f4a7c15ull) ^ 0x5851f42d4c957f2dull;
	if (!t->rng)
		t->rng = 1;
	pthread_mutex_lock(&db->tls_lock);
	t->next_all = db->tls_all;
	db->tls_all = t;
	pthread_mutex_unlock(&db->tls_lock);
	pthread_setspecific(db->tls_key, t);
	return t;
}
