/*
 * cache.c - the DRAM cache of the TIPS frontend (TIPS §4.1.1-4.1.4).
 *
 * A chained hash table in DRAM. Writers lock one bucket (a spinlock that yields, since
 * this may run on 2 cores) and push their entry at the chain head with one release
 * store, so readers take no lock and stop at the first entry with their key: the
 * newest write of that key. A delete pushes a tombstone. Entries are immutable once
 * published except for `applied`, which replay sets after the index holds the write.
 *
 * Unapplied entries are counted, and their keys marked in the pending filter (by
 * cache_filter_hash, framework.h), before they are published, so a reader skips the
 * cache when nothing is unapplied or its key is unmarked ("Pending filter" below).
 *
 * The gc thread unlinks applied entries: those replay just applied (it hands gc their
 * keys' hashes after each epoch, cache_applied_keys), those of a bucket whose chain
 * passed the bound (shadowed entries first, then the oldest), and, when the cache is
 * nearly full (7/8 of its capacity: sweeping before it is full spares writers the
 * wait) or full, those of the buckets after where its last sweep stopped, until the
 * cache is down to 13/16. Unlinked entries are freed after a grace period
 * (util/grace.h), so a reader that still holds one reads valid memory.
 * Small entries (an 8-byte key and value: CACHE_SMALL_ENTRY bytes in all) are recycled
 * rather than freed: gc hands them, after the grace period, to a pool of batches that
 * writers take whole into their thread's stash, so a write's entry costs a pointer pop
 * instead of a malloc, and gc's frees (blocks of another thread's arena) go away. The
 * pool holds at most the cache's capacity of entries; beyond that they are freed.
 * Invariant: an entry leaves the chain only after it was applied, so a key absent from
 * the cache has all its writes in the index, and a key's newest entry leaves only once
 * no older entry of the key is linked (bucket_trim), so a lock-free reader that walks
 * past it meanwhile finds no stale entry; the cache never holds more entries than its
 * capacity (writers wait for replay and gc instead).
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#include "framework/framework.h"
#include "util/errors_internal.h"
#include "util/grace.h"
#include "util/hugepage.h"

struct cache {
	struct cache_unapplied_line u; /* first: cache_all_applied() reads it inline */
	struct cache_bucket *buckets;
	uint64_t mask;
	uint64_t capacity;
	uint64_t high_water;             /* past this many live entries, gc sweeps early */
	uint64_t low_water;              /* where a sweep stops */
	uint64_t hand;                   /* gc's: the bucket the next sweep starts at */
	unsigned chain_bound;
	_Atomic uint64_t live;           /* entries reserved or in chains */
	_Atomic int sweep_asked;         /* a high-water sweep is asked for and not done */
	_Atomic uint64_t unlinked;       /* statistics */
	_Atomic uint64_t room_waits;     /* statistics: reservations that waited */

	pthread_t gc_thread;
	pthread_mutex_t mu;
	pthread_cond_t gc_cv;            /* gc has work */
	pthread_cond_t room_cv;          /* writers waiting for capacity */
	unsigned waiting;                /* writers waiting (under mu) */
	uint64_t *queue;                 /* buckets whose chain passed the bound */
	size_t nqueue, queue_cap;
	uint64_t *gone;                  /* key hashes of entries replay applied */
	size_t ngone, gone_cap;
	bool sweep;                      /* the cache is full: sweep all buckets */
	/* Recycled small entries: batches of up to SPARE_BATCH linked through `next`. */
	pthread_mutex_t spare_mu;
	struct cache_entry **spare;      /* batch heads, each a full batch */
	size_t nspare, spare_cap;        /* batches held, room for */
	bool applied_more;               /* replay applied entries since the last pass */
	bool stop;
};

uint64_t cache_key_hash(const void *key, size_t klen)
{
	const unsigned char *p = key;
	uint64_t h = 0x9e3779b97f4a7c15ull ^ klen;
	while (klen >= 8) {
		uint64_t w;
		memcpy(&w, p, 8);
		h = (h ^ w) * 0xff51afd7ed558ccdull;
		h ^= h >> 32;
		p += 8;
		klen -= 8;
	}
	if (klen) {
		uint64_t w = 0;
		memcpy(&w, p, klen);
		h = (h ^ w) * 0xc4ceb9fe1a85ec53ull;
	}
	h ^= h >> 29;
	h *= 0x94d049bb133111ebull;
	return h ^ (h >> 31);
}

struct cache_bucket *cache_bucket_of(struct cache *c, uint64_t hash)
{
	return &c->buckets[hash & c->mask];
}

void cache_bucket_lock(struct cache_bucket *b)
{
	for (unsigned spins = 0;; spins++) {
		unsigned expect = 0;
		if (atomic_load_explicit(&b->lock, memory_order_relaxed) == 0 &&
		    atomic_compare_exchange_weak_explicit(&b->lock, &expect, 1,
							  memory_order_acquire,
							  memory_order_relaxed))
			return;
		if (spins < 64)
			__builtin_ia32_pause();
		else
			sched_yield(); /* the holder may be descheduled: give it the core */
	}
}

void cache_bucket_unlock(struct cache_bucket *b)
{
	atomic_store_explicit(&b->lock, 0, memory_order_release);
}

static bool entry_has_key(const struct cache_entry *e, const void *key, size_t klen)
{
	if (e->klen != klen)
		return false;
	if (klen == 8) { /* the 8-byte fast path: one compare */
		uint64_t a, b;
		memcpy(&a, e->data, 8);
		memcpy(&b, key, 8);
		return a == b;
	}
	return memcmp(e->data, key, klen) == 0;
}

struct cache_entry *cache_find(struct cache_bucket *b, const void *key, size_t klen)
{
	for (struct cache_entry *e = atomic_load_explicit(&b->head, memory_order_acquire); e;
	     e = atomic_load_explicit(&e->next, memory_order_acquire))
		if (entry_has_key(e, key, klen))
			return e;
	return NULL;
}

void cache_read_lock(void)
{
	grace_read_enter();
}

void cache_read_unlock(void)
{
	grace_read_exit();
}

/* Every entry of up to this many bytes (header, key, value) is a block of exactly this
 * size, so that any of them can take any small write. */
#define CACHE_SMALL_ENTRY 64u
#define SPARE_BATCH 64u

static inline bool entry_small(size_t klen, size_t vlen)
{
	return sizeof(struct cache_entry) + klen + vlen <= CACHE_SMALL_ENTRY;
}

/* Takes a batch of recycled entries into @stash; false if the pool has none. */
static __attribute__((noinline)) bool stash_refill(struct cache *c, struct cache_stash *stash)
{
	pthread_mutex_lock(&c->spare_mu);
	bool got = c->nspare > 0;
	if (got)
		stash->head = c->spare[--c->nspare];
	pthread_mutex_unlock(&c->spare_mu);
	return got;
}

struct cache_entry *cache_entry_new(struct cache *c, struct cache_stash *stash,
				    const void *key, size_t klen, const void *val,
				    size_t vlen, bool tombstone)
{
	struct cache_entry *e;
	if (!entry_small(klen, vlen))
		e = malloc(sizeof(*e) + klen + vlen);
	else if (stash && (stash->head || stash_refill(c, stash))) {
		e = stash->head;
		stash->head = atomic_load_explicit(&e->next, memory_order_relaxed);
	} else {
		e = malloc(CACHE_SMALL_ENTRY);
	}
	if (!e)
		return NULL;
	atomic_init(&e->next, NULL);
	e->ts = 0;
	atomic_init(&e->applied, 0);
	e->tombstone = tombstone;
	e->klen = (uint16_t)klen;
	e->vlen = (uint32_t)vlen;
	memcpy(e->data, key, klen);
	if (vlen)
		memcpy(e->data + klen, val, vlen);
	return e;
}

unsigned cache_reserve(struct cache *c, bool (*may_wait)(void *), void *arg)
{
	/* Threads reserve in batches so that writers do not all update one counter; a
	 * batch is small against the capacity, so unused reservations cannot starve. */
	uint64_t batch = c->capacity / 256;
	batch = batch < 1 ? 1 : batch > 64 ? 64 : batch;
	uint64_t n = atomic_load_explicit(&c->live, memory_order_relaxed);
	for (;;) {
		if (n + batch <= c->capacity) {
			if (!atomic_compare_exchange_weak(&c->live, &n, n + batch))
				continue;
			if (n + batch > c->high_water && !atomic_load(&c->sweep_asked) &&
			    !atomic_exchange(&c->sweep_asked, 1)) {
				/* Nearly full: sweep now, so that writers rarely find the
				 * cache full and wait (one thread asks; gc clears the flag). */
				pthread_mutex_lock(&c->mu);
				c->sweep = true;
				pthread_cond_signal(&c->gc_cv);
				pthread_mutex_unlock(&c->mu);
			}
			return (unsigned)batch;
		}
		/* Full: ask gc to sweep and replay to apply, then wait for room. */
		atomic_fetch_add_explicit(&c->room_waits, 1, memory_order_relaxed);
		pthread_mutex_lock(&c->mu);
		c->sweep = true;
		pthread_cond_signal(&c->gc_cv);
		c->waiting++;
		pthread_mutex_unlock(&c->mu);
		bool hope = may_wait(arg);
		pthread_mutex_lock(&c->mu);
		while (hope && atomic_load(&c->live) + batch > c->capacity && !c->stop) {
			pthread_cond_wait(&c->room_cv, &c->mu);
			pthread_mutex_unlock(&c->mu);
			hope = may_wait(arg);
			pthread_mutex_lock(&c->mu);
		}
		c->waiting--;
		pthread_mutex_unlock(&c->mu);
		if (!hope)
			return 0;
		n = atomic_load(&c->live);
	}
}

void cache_wake_waiters(struct cache *c)
{
	pthread_mutex_lock(&c->mu);
	pthread_cond_broadcast(&c->room_cv);
	pthread_mutex_unlock(&c->mu);
}

void cache_unreserve(struct cache *c, unsigned n)
{
	if (!c || !n)
		return;
	atomic_fetch_sub(&c->live, n);
	pthread_mutex_lock(&c->mu);
	pthread_cond_broadcast(&c->room_cv);
	pthread_mutex_unlock(&c->mu);
}

/*
 * Pending filter. A reader with entries unapplied somewhere in the cache would have to
 * read its key's bucket (a DRAM miss in a table of the cache's capacity) and walk its
 * chain of mostly applied entries; the filter (128 KiB, which stays in the reader's
 * caches) tells it from one word whether its key can have an unapplied entry at all.
 * The reader's side (cache_may_be_pending, cache_pending_in_word) is inline in
 * framework.h, in front of every lookup made while a write is unapplied.
 *
 * Generations. A writer counts itself in the slot of the current generation g, then
 * reads the generation again: it keeps its count only if the generation did not move,
 * otherwise it uncounts and starts over. The persist thread moves the generation to
 * g + 1 only after reading the count of slot (g + 1) & 1, the one generation g - 1
 * used, as 0. So while an entry counted in g is unapplied, the generation is g or
 * g + 1; once it is g + 2, replay has applied the entry (its subtraction came before
 * the flip's read of 0).
 *
 * Invariant: an entry counted in generation g and not applied has its bit set in its
 * word, in the first set if the tag is g, in the second if the tag is g + 1, and the
 * tag is never g + 2 or more while it is unapplied. The writer marks with a CAS after
 * counting (and before publishing):
 * - tag g: set its bit in the first set; tag g + 1 (it counted just before a flip):
 *   in the second;
 * - tag g - 1: retag to g, the first set's bits moving to the second (they are of
 *   generation g - 1, which can still be unapplied), its bit alone in the first;
 * - any other tag (g - 2 or older, whose entries are all applied, or a tag 2^16 or
 *   more generations old that looks like anything): retag to g with its bit alone.
 * No writer ever sees a tag above g + 1: a tag is the generation of a writer still
 * counted when it marked, and generation g + 2 needs g's count to be 0. So a retag
 * drops only sets of applied generations, and a bit once set stays, in the set
 * matching the tag, for as long as its entry is unapplied; cache_pending_in_word then
 * finds it for any generation a reader can read meanwhile (g or g + 1), whichever of
 * the tags g or g + 1 it reads.
 *
 * Memory order: the writer's add and second read of the generation, and the flip's
 * store of it and read of the count, are a store-buffering pair and must stay seq_cst
 * (the defaults below). A reader that answers from the index although the tag is
 * recent (its bit clear in the sets that count) or old needs replay's index writes of
 * every write of its class counted in an older generation: replay's subtraction
 * releases them, the flip's seq_cst read of 0 and store of the generation pass them
 * on, and the reader acquires them through the generation it reads, or through the
 * marking CAS (release) of the writer whose newer tag it reads.
 */
uint64_t cache_count_unapplied(struct cache *c, uint64_t n)
{
	for (;;) {
		uint64_t g = atomic_load(&c->u.gen);
		atomic_fetch_add(&c->u.unapplied[g & 1], n);
		if (atomic_load(&c->u.gen) == g)
			return g;
		atomic_fetch_sub(&c->u.unapplied[g & 1], n);
	}
}

void cache_mark_pending(struct cache *c, uint64_t gen, uint64_t filter_hash)
{
	_Atomic uint64_t *p = &c->u.pending[cache_pending_word(filter_hash)];
	uint64_t bit = 1ull << cache_pending_bit(filter_hash);
	uint64_t tag = (gen & 0xffff) << CACHE_PENDING_TAG_SHIFT;
	uint64_t w = atomic_load_explicit(p, memory_order_relaxed), next;
	do {
		int16_t d = (int16_t)(uint16_t)(gen - (w >> CACHE_PENDING_TAG_SHIFT));
		if (d == 0 || d == -1) { /* the tag is this generation, or the next one */
			uint64_t mine = d == 0 ? bit : bit << CACHE_PENDING_SET_BITS;
			if (w & mine)
				return; /* a store would take the line from readers for nothing */
			next = w | mine;
		} else if (d == 1) { /* the previous generation's set moves to the second */
			next = tag | (w & CACHE_PENDING_SET_MASK) << CACHE_PENDING_SET_BITS | bit;
		} else {
			next = tag | bit;
		}
	} while (!atomic_compare_exchange_weak_explicit(p, &w, next, memory_order_release,
							memory_order_relaxed));
}

void cache_pending_flip(struct cache *c)
{
	uint64_t g = atomic_load(&c->u.gen);
	if (atomic_load(&c->u.unapplied[(g + 1) & 1]) != 0)
		return;
	atomic_store(&c->u.gen, g + 1);
}

bool cache_publish(struct cache *c, struct cache_bucket *b, struct cache_entry *e)
{
	atomic_store_explicit(&e->next, atomic_load_explicit(&b->head, memory_order_relaxed),
			      memory_order_relaxed);
	atomic_store_explicit(&b->head, e, memory_order_release);
	if (b->len < UINT16_MAX)
		b->len++;
	return b->len > c->chain_bound;
}

void cache_queue_gc(struct cache *c, struct cache_bucket *b)
{
	if (atomic_load_explicit(&b->gc_queued, memory_order_relaxed) ||
	    atomic_exchange(&b->gc_queued, 1))
		return;
	pthread_mutex_lock(&c->mu);
	if (c->nqueue == c->queue_cap) {
		size_t cap = c->queue_cap ? c->queue_cap * 2 : 1024;
		uint64_t *q = realloc(c->queue, cap * sizeof(*q));
		if (!q) { /* no memory for the queue: a full sweep covers this bucket */
			c->sweep = true;
			atomic_store(&b->gc_queued, 0);
			pthread_cond_signal(&c->gc_cv);
			pthread_mutex_unlock(&c->mu);
			return;
		}
		c->queue = q;
		c->queue_cap = cap;
	}
	c->queue[c->nqueue++] = (uint64_t)(b - c->buckets);
	pthread_cond_signal(&c->gc_cv);
	pthread_mutex_unlock(&c->mu);
}

uint64_t cache_unapplied(const struct cache *c)
{
	return atomic_load_explicit(&c->u.unapplied[0], memory_order_relaxed) +
	       atomic_load_explicit(&c->u.unapplied[1], memory_order_relaxed);
}

void cache_applied(struct cache *c, const uint64_t n[2])
{
	for (unsigned s = 0; s < 2; s++)
		if (n[s])
			atomic_fetch_sub(&c->u.unapplied[s], n[s]);
}

void cache_applied_keys(struct cache *c, uint64_t **v, size_t *n, size_t *cap)
{
	if (!*n)
		return;
	pthread_mutex_lock(&c->mu);
	if (!c->ngone) { /* the usual case: gc took the last ones; swap arrays */
		uint64_t *g = c->gone;
		size_t gcap = c->gone_cap;
		c->gone = *v;
		c->ngone = *n;
		c->gone_cap = *cap;
		*v = g;
		*cap = gcap;
	} else {
		if (c->ngone + *n > c->gone_cap) {
			size_t want = c->gone_cap * 2 > c->ngone + *n ? c->gone_cap * 2
								       : c->ngone + *n;
			uint64_t *g = realloc(c->gone, want * sizeof(*g));
			if (g) {
				c->gone = g;
				c->gone_cap = want;
			}
		}
		/* Without DRAM for them the hashes are dropped: their entries stay linked
		 * until a sweep or a long chain takes them. */
		if (c->ngone + *n <= c->gone_cap) {
			memcpy(c->gone + c->ngone, *v, *n * sizeof(**v));
			c->ngone += *n;
		}
	}
	*n = 0;
	pthread_mutex_unlock(&c->mu);
}

void cache_applied_more(struct cache *c)
{
	pthread_mutex_lock(&c->mu);
	c->applied_more = true;
	if (c->nqueue || c->ngone || c->sweep || c->waiting)
		pthread_cond_signal(&c->gc_cv);
	pthread_mutex_unlock(&c->mu);
}

/* ---- gc ----------------------------------------------------------------------------- */

struct unlinked {
	struct cache_entry **v;
	size_t n, cap;
	/* Small entries freed since the last full batch went to the pool (gc's own). */
	struct cache_entry *batch;
	unsigned in_batch;
};

/* Room for one more unlinked entry; false without DRAM (the entry then stays linked
 * until a later pass: gc never unlinks what it could not free). */
static bool unlinked_reserve(struct unlinked *u)
{
	if (u->n == u->cap) {
		size_t cap = u->cap ? u->cap * 2 : 256;
		struct cache_entry **v = realloc(u->v, cap * sizeof(*v));
		if (!v)
			return false;
		u->v = v;
		u->cap = cap;
	}
	return true;
}

/* True if an entry newer than @e (before it in the chain) has the same key. */
static bool entry_shadowed(struct cache_bucket *b, const struct cache_entry *e)
{
	for (struct cache_entry *x = atomic_load_explicit(&b->head, memory_order_relaxed); x != e;
	     x = atomic_load_explicit(&x->next, memory_order_relaxed))
		if (entry_has_key(x, e->data, e->klen))
			return true;
	return false;
}

/* True if an entry older than @e (after it in the chain) has the same key. */
static bool entry_shadows(const struct cache_entry *e)
{
	for (struct cache_entry *x = atomic_load_explicit(&e->next, memory_order_relaxed); x;
	     x = atomic_load_explicit(&x->next, memory_order_relaxed))
		if (entry_has_key(x, e->data, e->klen))
			return true;
	return false;
}

/*
 * Unlinks applied entries of one bucket: shadowed ones (pass 0), then the oldest until
 * the chain is at most @keep long (passes 1 and 2). Returns the chain's length after.
 * Invariant: a key's newest entry leaves the chain only when no older entry of that key
 * is linked. Readers walk without the lock: one that stands before the newest entry
 * when it is unlinked goes on past it, and would return an older entry of the key still
 * linked further down (an old value, though the index holds the new one) instead of
 * missing the key and reading the index. Older entries of an applied entry are applied
 * too (replay applies a key's records in stamp order), but one that became applied after
 * pass 0 looked at it is still linked: passes 1 and 2 therefore only take an entry with
 * no older entry of its key below it, so pass 1 takes the older ones and pass 2 the
 * newest. Unlinking a shadowed entry is always safe: a reader meets the newer one first.
 */
static unsigned bucket_trim(struct cache_bucket *b, unsigned keep, struct unlinked *out)
{
	cache_bucket_lock(b);
	for (int pass = 0; pass < 3 && b->len > keep; pass++) {
		/* Walk with a pointer to the link, so unlinking is one store. */
		struct cache_entry *_Atomic *link = &b->head;
		unsigned pos = 0;
		struct cache_entry *e;
		while ((e = atomic_load_explicit(link, memory_order_relaxed))) {
			bool drop = atomic_load_explicit(&e->applied, memory_order_acquire) &&
				    (pass == 0 ? entry_shadowed(b, e)
					       : pos >= keep && !entry_shadows(e));
			if (drop && b->len > keep && unlinked_reserve(out)) {
				atomic_store_explicit(link, atomic_load_explicit(&e->next,
						      memory_order_relaxed), memory_order_release);
				b->len--;
				out->v[out->n++] = e;
			} else {
				link = &e->next;
				pos++;
			}
		}
	}
	unsigned len = b->len;
	cache_bucket_unlock(b);
	return len;
}

/* Frees a chain of entries linked through `next` (unpublished, or no reader left). */
static void free_chain(struct cache_entry *e)
{
	while (e) {
		struct cache_entry *next = atomic_load_explicit(&e->next, memory_order_relaxed);
		free(e);
		e = next;
	}
}

void cache_stash_free(struct cache_stash *stash)
{
	free_chain(stash->head);
	stash->head = NULL;
}

/* Gives a full batch of SPARE_BATCH small entries, linked from @head, to the pool, or
 * frees it when the pool holds the cache's capacity already (or cannot grow). */
static void spare_put(struct cache *c, struct cache_entry *head)
{
	pthread_mutex_lock(&c->spare_mu);
	bool kept = false;
	if ((c->nspare + 1) * SPARE_BATCH <= c->capacity) {
		if (c->nspare == c->spare_cap) {
			size_t cap = c->spare_cap ? c->spare_cap * 2 : 64;
			struct cache_entry **v = realloc(c->spare, cap * sizeof(*v));
			if (v) {
				c->spare = v;
				c->spare_cap = cap;
			}
		}
		if (c->nspare < c->spare_cap) {
			c->spare[c->nspare++] = head;
			kept = true;
		}
	}
	pthread_mutex_unlock(&c->spare_mu);
	if (!kept)
		free_chain(head);
}

static void free_after_grace(struct cache *c, struct unlinked *u)
{
	if (!u->n)
		return;
	grace_wait(); /* no reader can still hold an unlinked entry */
	for (size_t i = 0; i < u->n; i++) {
		struct cache_entry *e = u->v[i];
		if (!entry_small(e->klen, e->vlen)) {
			free(e);
			continue;
		}
		atomic_store_explicit(&e->next, u->batch, memory_order_relaxed);
		u->batch = e;
		if (++u->in_batch == SPARE_BATCH) {
			spare_put(c, u->batch);
			u->batch = NULL;
			u->in_batch = 0;
		}
	}
	/* Counted as unlinked before they stop counting as live: a tips_stats snapshot,
	 * which reads the live count first (acquire), then never shows entries that are
	 * neither (test_applied_leave_cache relies on it). */
	atomic_fetch_add(&c->unlinked, u->n);
	atomic_fetch_sub(&c->live, u->n);
	u->n = 0;
	pthread_mutex_lock(&c->mu);
	pthread_cond_broadcast(&c->room_cv);
	pthread_mutex_unlock(&c->mu);
}

/*
 * A sweep's misses are the entries: the bucket array is read in order (the hardware
 * prefetcher keeps ahead of it), but each chain's first entry is a random line, and
 * bucket_trim stalled on its `applied` flag (89% of its samples in a 10 s load of
 * tips-hash), one miss at a time. So the sweep starts the miss of the first entry
 * SWEEP_AHEAD_FAR buckets ahead and, once that line has come in, of the second one
 * SWEEP_AHEAD_NEAR buckets ahead. A prefetch is only a hint: an entry unlinked and
 * freed meanwhile costs a wasted line, never a wrong read (gc is the only unlinker,
 * and a head whose entry is read is loaded with acquire, as a reader does).
 */
#define SWEEP_AHEAD_FAR 16u
#define SWEEP_AHEAD_NEAR 8u

static inline void sweep_look_ahead(struct cache *c, uint64_t i)
{
	struct cache_entry *e = atomic_load_explicit(
		&c->buckets[(i + SWEEP_AHEAD_FAR) & c->mask].head, memory_order_relaxed);
	if (e)
		__builtin_prefetch(e, 1, 3);
	/* Acquire, as a reader's: this one reads the entry the writer published. */
	e = atomic_load_explicit(&c->buckets[(i + SWEEP_AHEAD_NEAR) & c->mask].head,
				 memory_order_acquire);
	if (e && (e = atomic_load_explicit(&e->next, memory_order_relaxed)))
		__builtin_prefetch(e, 1, 3);
}

/* Unlinked entries gc frees (after a grace period) as it goes, so that the room a sweep
 * makes comes back during the sweep: a sweep of a full cache (500K entries) takes
 * 100-150 ms, and writers that found the cache full waited for the whole of it. */
#define GC_FREE_BATCH 8192u

/*
 * A sweep unlinks every applied entry of the buckets it visits, from the hand on, and
 * stops once the cache is down to its low water (or after one round of the table, when
 * replay has not applied enough); the next sweep goes on from there. A sweep used to
 * take every applied entry of the whole table: with a large cache (13M entries for 52M
 * expected keys) that kept gc busy for about a second, and the writers' throughput
 * fell by half meanwhile. Sweeps are the fallback now (entries whose hashes gc did
 * not get, or a replay far behind): trim_gone takes applied entries as they come.
 */
static void sweep_from_hand(struct cache *c, struct unlinked *u)
{
	for (uint64_t n = 0; n <= c->mask; n++) {
		uint64_t i = c->hand;
		c->hand = (i + 1) & c->mask;
		sweep_look_ahead(c, i);
		if (atomic_load_explicit(&c->buckets[i].head, memory_order_relaxed))
			bucket_trim(&c->buckets[i], 0, u);
		if (u->n >= GC_FREE_BATCH) {
			free_after_grace(c, u);
			if (atomic_load(&c->live) <= c->low_water)
				return;
		}
	}
}

/*
 * Unlinks the applied entries of the buckets of @h's key hashes (what replay applied in
 * an epoch or a few). Those entries serve almost nothing: a reader skips the cache for
 * a key with nothing unapplied (the pending filter), and a writer's outcome lookup
 * finds the key in the index as well. Kept until the cache neared its capacity, they
 * cost: every chain a writer walks is longer (a miss per entry), the cache's lines
 * crowd out the index's, and a sweep of a large, sparse table reads every empty bucket
 * for the few entries it unlinks (docs/framework.md, "Sixteenth round"). Trimming them
 * an epoch after they were applied reads lines replay touched a moment ago, and
 * nothing else. The bucket and then its first entry are prefetched some hashes ahead.
 */
#define GONE_AHEAD_FAR 16u
#define GONE_AHEAD_NEAR 8u

static void trim_gone(struct cache *c, const uint64_t *h, size_t n, struct unlinked *u)
{
	for (size_t i = 0; i < n; i++) {
		if (i + GONE_AHEAD_FAR < n)
			__builtin_prefetch(&c->buckets[h[i + GONE_AHEAD_FAR] & c->mask], 1, 3);
		if (i + GONE_AHEAD_NEAR < n) {
			struct cache_entry *e = atomic_load_explicit(
				&c->buckets[h[i + GONE_AHEAD_NEAR] & c->mask].head,
				memory_order_relaxed);
			if (e)
				__builtin_prefetch(e, 1, 3);
		}
		struct cache_bucket *b = &c->buckets[h[i] & c->mask];
		if (atomic_load_explicit(&b->head, memory_order_relaxed))
			bucket_trim(b, 0, u);
		if (u->n >= GC_FREE_BATCH)
			free_after_grace(c, u);
	}
}

static void *gc_main(void *arg)
{
	pthread_setname_np(pthread_self(), "tips-gc"); /* for perf and top */
	struct cache *c = arg;
	struct unlinked u = { 0 };
	uint64_t *work = NULL, *gone = NULL;
	size_t nwork = 0, ngone = 0, gone_cap = 0;
	pthread_mutex_lock(&c->mu);
	for (;;) {
		while (!c->stop && !c->applied_more && !c->sweep)
			pthread_cond_wait(&c->gc_cv, &c->mu);
		if (c->stop)
			break;
		c->applied_more = false;
		bool sweep = c->sweep || c->waiting;
		c->sweep = false;
		/* Take the queue; buckets whose entries are not applied yet come back. */
		free(work);
		work = c->queue;
		nwork = c->nqueue;
		c->queue = NULL;
		c->nqueue = c->queue_cap = 0;
		/* Take the hashes and leave the array just worked through, empty, for
		 * replay's next hand-over (arrays go round instead of being allocated). */
		uint64_t *g = c->gone;
		size_t ng = c->ngone, gcap = c->gone_cap;
		c->gone = gone;
		c->ngone = 0;
		c->gone_cap = gone_cap;
		gone = g;
		ngone = ng;
		gone_cap = gcap;
		pthread_mutex_unlock(&c->mu);

		trim_gone(c, gone, ngone, &u);

		for (size_t i = 0; i < nwork; i++) {
			struct cache_bucket *b = &c->buckets[work[i]];
			atomic_store(&b->gc_queued, 0);
			if (bucket_trim(b, c->chain_bound > 1 ? c->chain_bound - 1 : 1, &u) >
			    c->chain_bound)
				cache_queue_gc(c, b); /* not applied yet: look again later */
			if (u.n >= GC_FREE_BATCH)
				free_after_grace(c, &u);
		}
		if (sweep) /* nearly full: applied entries go until low water */
			sweep_from_hand(c, &u);
		free_after_grace(c, &u);
		/* Writers may ask for the next early sweep once this one brought the cache
		 * below high water, or after a pass for newly applied entries: not in a loop
		 * of sweeps that find nothing applied. */
		if (!sweep || atomic_load(&c->live) <= c->high_water)
			atomic_store(&c->sweep_asked, 0);
		pthread_mutex_lock(&c->mu);
	}
	pthread_mutex_unlock(&c->mu);
	free(work);
	free(gone);
	free(u.v);
	free_chain(u.batch);
	return NULL;
}

int cache_new(uint64_t capacity, unsigned chain_bound, struct cache **out)
{
	struct cache *c = calloc(1, sizeof(*c));
	if (!c)
		return tips_set_error(TIPS_ENOMEM, "cache: out of DRAM");
	uint64_t nb = 1024; /* as many buckets as entries: a miss reads about one entry */
	while (nb < capacity)
		nb <<= 1;
	/* On 2 MiB pages where the array is that large: every write and every read of an
	 * unapplied key loads a random bucket, and with 4 KiB pages that is a page walk
	 * on top of the miss. */
	c->buckets = hugepage_alloc(nb * sizeof(*c->buckets));
	if (c->buckets)
		memset(c->buckets, 0, nb * sizeof(*c->buckets));
	c->u.pending = aligned_alloc(64, CACHE_PENDING_WORDS * sizeof(*c->u.pending));
	if (!c->buckets || !c->u.pending) {
		free(c->buckets);
		free(c->u.pending);
		free(c);
		return tips_set_error(TIPS_ENOMEM, "cache: out of DRAM for %llu buckets",
				      (unsigned long long)nb);
	}
	for (size_t i = 0; i < CACHE_PENDING_WORDS; i++)
		atomic_init(&c->u.pending[i], 0);
	c->mask = nb - 1;
	c->capacity = capacity;
	c->high_water = capacity - capacity / 8;
	c->low_water = c->high_water - capacity / 16;
	c->chain_bound = chain_bound;
	pthread_mutex_init(&c->mu, NULL);
	pthread_mutex_init(&c->spare_mu, NULL);
	pthread_cond_init(&c->gc_cv, NULL);
	pthread_cond_init(&c->room_cv, NULL);
	if (pthread_create(&c->gc_thread, NULL, gc_main, c)) {
		free(c->buckets);
		free(c->u.pending);
		free(c);
		return tips_set_error(TIPS_ENOMEM, "cache: cannot start the gc thread");
	}
	*out = c;
	return 0;
}

void cache_delete(struct cache *c)
{
	if (!c)
		return;
	pthread_mutex_lock(&c->mu);
	c->stop = true;
	pthread_cond_broadcast(&c->gc_cv);
	pthread_cond_broadcast(&c->room_cv);
	pthread_mutex_unlock(&c->mu);
	pthread_join(c->gc_thread, NULL);
	/* No reader may run now (close is exclusive): free without a grace period. */
	for (uint64_t i = 0; i <= c->mask; i++)
		free_chain(atomic_load(&c->buckets[i].head));
	for (size_t i = 0; i < c->nspare; i++)
		free_chain(c->spare[i]);
	free(c->spare);
	pthread_mutex_destroy(&c->spare_mu);
	free(c->queue);
	free(c->gone);
	free(c->buckets);
	free(c->u.pending);
	pthread_mutex_destroy(&c->mu);
	pthread_cond_destroy(&c->gc_cv);
	pthread_cond_destroy(&c->room_cv);
	free(c);
}

uint64_t cache_entries(const struct cache *c)
{
	return atomic_load_explicit(&c->live, memory_order_acquire); /* free_after_grace */
}

uint64_t cache_capacity(const struct cache *c)
{
	return c->capacity;
}

uint64_t cache_gc_unlinked(const struct cache *c)
{
	return atomic_load_explicit(&c->unlinked, memory_order_relaxed);
}

uint64_t cache_room_waits(const struct cache *c)
{
	return atomic_load_explicit(&c->room_waits, memory_order_relaxed);
}
