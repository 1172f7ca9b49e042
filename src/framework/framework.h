/*
 * framework.h - the TIPS framework's private state and the interfaces between its
 * modules: cache.c (DRAM cache + gc thread), olog.c (per-thread operational logs),
 * ulog.c (undo log), replay.c (persist thread, workers, adaptive scaling), reclaim.c
 * (UNO reclamation and recovery), timestamp.c (commit stamps), plugin.c (the API an
 * index calls), check.c (tips_db_check) and db.c (the facade). The design and its invariants: docs/framework.md and the TIPS paper §3-6.
 */
#ifndef TIPS_FRAMEWORK_FRAMEWORK_H
#define TIPS_FRAMEWORK_FRAMEWORK_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <tips/plugin.h>

#include "framework/fw_layout.h"
#include "util/scan_below.h"

/* ---- timestamps (timestamp.c) ---------------------------------------------------- */

/* A new commit stamp: unique, and larger than every stamp taken before. */
uint64_t ts_take(void);
/* @n consecutive stamps at once; returns the first (the others follow it). */
uint64_t ts_take_n(uint64_t n);
/* The last stamp taken: a scan starting now includes stamps up to this one. */
uint64_t ts_scan_point(void);

/* ---- the DRAM cache (cache.c) ---------------------------------------------------- */

struct cache_entry {
	struct cache_entry *_Atomic next; /* older entries of the bucket */
	uint64_t ts;                      /* commit timestamp of the write */
	_Atomic uint8_t applied;          /* 1 once replay applied it to the index */
	uint8_t tombstone : 1;            /* a delete */
	uint8_t pending_slot : 1;         /* the unapplied count it is in: its generation's
					   * low bit (cache.c) */
	uint16_t klen;
	uint32_t vlen;
	unsigned char data[];             /* key, then value */
};

struct cache_bucket {
	struct cache_entry *_Atomic head; /* newest first: readers stop at the first match */
	atomic_uint lock;
	uint16_t len;                     /* entries in the chain (under the lock) */
	atomic_uchar gc_queued;
};

struct cache;

int cache_new(uint64_t capacity, unsigned chain_bound, struct cache **out);
void cache_delete(struct cache *c);
uint64_t cache_key_hash(const void *key, size_t klen);
struct cache_bucket *cache_bucket_of(struct cache *c, uint64_t hash);
void cache_bucket_lock(struct cache_bucket *b);
void cache_bucket_unlock(struct cache_bucket *b);
/* Newest entry for the key in @b or NULL; caller holds the lock or an RCU read lock. */
struct cache_entry *cache_find(struct cache_bucket *b, const void *key, size_t klen);
/* Blocks until the cache has room for a batch of entries, counts them as live and
 * returns the batch size. When the caller has to wait, @may_wait is called (without
 * locks) before each wait and after each wake-up: it wakes whoever makes room and
 * returns false if waiting cannot help, and then this returns 0 (nothing reserved).
 * A thread keeps its batch as credit and gives back what it did not use. */
unsigned cache_reserve(struct cache *c, bool (*may_wait)(void *), void *arg);
/* Wakes every reservation waiting for room, to ask may_wait again. */
void cache_wake_waiters(struct cache *c);
void cache_unreserve(struct cache *c, unsigned n);
/* A thread's spare small entries (cache_entry_new takes from it); refilled a batch at
 * a time from the entries gc freed. */
struct cache_stash {
	struct cache_entry *head;
};
/* A new entry (not published). A small one (CACHE_SMALL_ENTRY bytes with its key and
 * value) comes from @stash (NULL: none), refilled from what gc recycled, else malloc;
 * either way it is a malloc block that free() may release. */
struct cache_entry *cache_entry_new(struct cache *c, struct cache_stash *stash,
				    const void *key, size_t klen, const void *val,
				    size_t vlen, bool tombstone);
/* Frees the entries @stash holds (its thread leaves the database). */
void cache_stash_free(struct cache_stash *stash);
/* Publishes @e at the head of @b (the linearization point). Bucket lock held.
 * Returns true if the chain is now longer than the bound. */
bool cache_publish(struct cache *c, struct cache_bucket *b, struct cache_entry *e);
/* Hands a long chain to the gc thread (call without the bucket lock). */
void cache_queue_gc(struct cache *c, struct cache_bucket *b);
/*
 * Unapplied entries (cache.c, "Pending filter"): writers count their entries before
 * replay can see their records (so replay's subtraction never comes first) and mark
 * their keys in a filter, both before publishing; so a reader that finds nothing
 * unapplied, or its key unmarked, knows the index holds every write of its key that
 * completed before it began. The counts have two slots, by the low bit of a
 * generation: writers count in the current one, and after an epoch the persist thread
 * moves the generation on once the other slot's count is 0 (cache_pending_flip).
 *
 * cache_count_unapplied counts @n entries (a write's, a batch's) in the current slot
 * and returns the generation they are counted in (its low bit is the slot the entries
 * keep in pending_slot); cache_mark_pending marks a key's cache_filter_hash() for that
 * generation.
 */
uint64_t cache_count_unapplied(struct cache *c, uint64_t n);
void cache_mark_pending(struct cache *c, uint64_t gen, uint64_t filter_hash);
/* After an epoch (the persist thread only): the next generation, if the other slot
 * drained. */
void cache_pending_flip(struct cache *c);

/*
 * The filter: CACHE_PENDING_WORDS words (128 KiB), each a tag and two sets of
 * CACHE_PENDING_SET_BITS bits: bits 0-23 mark keys written in generation tag, bits
 * 24-47 keys written in generation tag - 1, bits 48-63 the tag's low 16 bits. A key's
 * word is the top bits of its filter hash, its bit in a set the next ones. No one
 * clears the filter: a writer of a newer generation retags the word, keeping the one
 * set that can still be unapplied, and a reader reads a set as meaningful only by the
 * tag's distance from the current generation (cache_pending_in_word). So a write
 * takes one line from the readers, once, where clearing took it a second time after
 * each epoch.
 */
#define CACHE_PENDING_WORDS_LOG 14
#define CACHE_PENDING_WORDS (1u << CACHE_PENDING_WORDS_LOG)
#define CACHE_PENDING_SET_BITS 24
#define CACHE_PENDING_SET_MASK ((1ull << CACHE_PENDING_SET_BITS) - 1)
#define CACHE_PENDING_TAG_SHIFT 48

/* The counters of entries published and not yet applied, per slot, the generation
 * (its low bit is the current slot) and the filter's address: the first member of
 * struct cache (cache.c), since every lookup reads the counters, inline. Alone on its
 * line: writers add, replay subtracts, and readers only read it. */
struct cache_unapplied_line {
	_Atomic uint64_t unapplied[2] __attribute__((aligned(64)));
	_Atomic uint64_t gen;
	_Atomic uint64_t *pending; /* [CACHE_PENDING_WORDS]; set once by cache_new */
	char pad[32];
};
_Static_assert(sizeof(struct cache_unapplied_line) == 64, "the counters' line is one line");

/* True if every counted entry has been applied: a lookup may go to the index. (An
 * entry published and not applied keeps its slot's count above 0 all along, so the
 * two loads cannot both miss it.) */
static inline bool cache_all_applied(const struct cache *c)
{
	const struct cache_unapplied_line *u = (const struct cache_unapplied_line *)c;
	return (atomic_load_explicit(&u->unapplied[0], memory_order_acquire) |
		atomic_load_explicit(&u->unapplied[1], memory_order_acquire)) == 0;
}

/*
 * The key's hash for the pending filter: not cache_key_hash, because it sits in front
 * of every lookup made while a write is unapplied, inline, and its latency there is
 * paid in full (the lookup's first miss waits for it: docs/framework.md, "Seventh
 * round"). So one multiply: the key's words folded by rotate and xor (every byte
 * counts; for an 8-byte key, the key itself), then multiplied by an odd constant,
 * whose top bits depend on every bit below them. Keys that fold alike share a bit,
 * which costs a needless trip through the cache, never a wrong answer (the fold is
 * linear: e.g. the rotations repeat every 64 words, so 512-byte keys of one repeated
 * word fall into 2 classes).
 */
static inline uint64_t cache_filter_hash(const void *key, size_t klen)
{
	const unsigned char *p = key;
	uint64_t x;
	if (klen >= 8) {
		memcpy(&x, p, 8);
		for (size_t i = 8; i < klen; i += 8) {
			uint64_t w;
			memcpy(&w, p + (i + 8 <= klen ? i : klen - 8), 8); /* the last word overlaps */
			x = ((x << 23) | (x >> 41)) ^ w;
		}
		x ^= (uint64_t)(klen - 8) << 58; /* lengths 8 and 16 differ */
	} else {
		x = (uint64_t)klen << 56;
		for (size_t i = 0; i < klen; i++)
			x ^= (uint64_t)p[i] << (8 * i);
	}
	return x * 0x9e3779b97f4a7c15ull;
}

/* The filter word of @filter_hash, and its bit in a set (below CACHE_PENDING_SET_BITS:
 * the next 32 bits of the hash scaled to the set's width). */
static inline uint32_t cache_pending_word(uint64_t filter_hash)
{
	return (uint32_t)(filter_hash >> (64 - CACHE_PENDING_WORDS_LOG));
}

static inline unsigned cache_pending_bit(uint64_t filter_hash)
{
	uint64_t next = (filter_hash >> (32 - CACHE_PENDING_WORDS_LOG)) & 0xffffffffu;
	return (unsigned)((next * CACHE_PENDING_SET_BITS) >> 32);
}

/*
 * Whether filter word @w marks @bit as possibly unapplied, read in generation @gen.
 * A write counted in generation g and not yet applied keeps the generation at g or
 * g + 1, and its bit in the word's first set while the tag is g, in its second while
 * the tag is g + 1 (a tag of g + 2 means it was applied). So by the tag's distance d
 * from @gen: d = 0, either set; d = -1, the first; d = +1 (retagged after @gen was
 * read), the second; any other, none. The distance is taken mod 2^16, so a tag 65536
 * generations old can look recent: that sends a lookup through the cache needlessly,
 * never the other way (cache.c, "Pending filter", has the argument).
 */
static inline bool cache_pending_in_word(uint64_t w, uint64_t gen, unsigned bit)
{
	int16_t d = (int16_t)(uint16_t)((w >> CACHE_PENDING_TAG_SHIFT) - gen);
	uint64_t sets = d == 0 ? w | w >> CACHE_PENDING_SET_BITS :
			d == -1 ? w : d == 1 ? w >> CACHE_PENDING_SET_BITS : 0;
	return (sets >> bit) & 1;
}

/* False if no unapplied entry of a key with @filter_hash is in the cache. */
static inline bool cache_may_be_pending(const struct cache *c, uint64_t filter_hash)
{
	const struct cache_unapplied_line *u = (const struct cache_unapplied_line *)c;
	uint64_t gen = atomic_load_explicit(&u->gen, memory_order_acquire);
	uint64_t w = atomic_load_explicit(&u->pending[cache_pending_word(filter_hash)],
					  memory_order_acquire);
	return cache_pending_in_word(w, gen, cache_pending_bit(filter_hash));
}

uint64_t cache_unapplied(const struct cache *c);
/* Replay applied n[s] entries of slot s (after setting their `applied` flags). */
void cache_applied(struct cache *c, const uint64_t n[2]);
/* Tells gc that entries became applied (after an epoch). */
void cache_applied_more(struct cache *c);
/* Hands gc the key hashes (cache_key_hash) of entries replay applied, whose buckets gc
 * then trims: *v's contents move to the cache (the caller gets an empty array back in
 * *v, *n, *cap, possibly another one). Call before cache_applied_more. */
void cache_applied_keys(struct cache *c, uint64_t **v, size_t *n, size_t *cap);
void cache_read_lock(void);
void cache_read_unlock(void);
uint64_t cache_entries(const struct cache *c);
uint64_t cache_capacity(const struct cache *c);
uint64_t cache_gc_unlinked(const struct cache *c);
/* Reservations that found the cache full and waited for room. */
uint64_t cache_room_waits(const struct cache *c);

/* ---- OLogs (olog.c) -------------------------------------------------------------- */

struct olog {
	struct olog_slot_pm *pm;  /* persistent head/tail words */
	unsigned char *ring;      /* the ring in PM */
	uint64_t size;            /* ring bytes */
	_Atomic uint64_t durable_tail; /* tail as persisted: what replay and scans may read */
	_Atomic uint64_t head;    /* volatile copy of pm->head */
	_Atomic uint64_t applied; /* replay has applied [head, applied): written by the
	                             persist thread, read by scans */
	_Atomic uint64_t appended; /* records made durable since open */
	uint64_t recovered_end;   /* records below were written before this open */
	uint64_t salt;            /* fw_header.olog_salt: seeds the seals' CRC */
	bool in_use;              /* owned by a thread (under olog_set.lock) */
};

struct olog_set {
	struct olog *logs;
	unsigned n;
	/* Slots [live, n) hold no record: no thread took them since the open, and they
	 * were empty at it. Only grows (olog_take stores it, release), so scans and the
	 * epoch's collect read only the slots in use: a pool sized for many threads has
	 * dozens of slots, and a scan looked at every one. */
	_Atomic unsigned live;
	pthread_mutex_t lock;     /* slot ownership, and waits for room */
	pthread_cond_t room;      /* signalled when a slot frees or heads advance */
};

uint64_t olog_record_size(size_t klen, size_t vlen);
/* True if @log has room for a record of @size bytes with @keep bytes left free after
 * it (the caller owns @log). */
bool olog_has_room(const struct olog *log, uint64_t size, uint64_t keep);
/* True if @log has room for @bytes more bytes of records and PADs with @keep left. */
bool olog_has_room_bytes(const struct olog *log, uint64_t bytes, uint64_t keep);
/* Writes one record at *@tail (after a PAD if it does not fit before the ring's end),
 * sealed or not (fw_layout.h), and flushes it without a fence; advances *@tail. Only
 * the log's owner calls it, and nothing reads past durable_tail until olog_commit() or
 * olog_append() moves it. */
void olog_put_record(struct olog *log, uint64_t *tail, bool sealed, unsigned op, uint64_t ts,
		     const void *key, size_t klen, const void *val, size_t vlen, uint64_t entry);
/* Makes every (unsealed) record below @tail durable: fence, then the tail persisted
 * (fence 2): a batch's commit. @records: how many records it covers (for the replay
 * rate). */
void olog_commit(struct olog *log, uint64_t tail, uint64_t records);
/* Appends a sealed record and fences: exactly one fence, the write's durability point. */
void olog_append(struct olog *log, unsigned op, uint64_t ts, const void *key, size_t klen,
		 const void *val, size_t vlen, uint64_t entry);
/* Persists durable_tail as the tail (no writer may be appending): at close. */
void olog_persist_tail(struct olog *log);
/* After a crash: walks the sealed records from max(head, tail) (at most a ring's
 * worth from head) to the end of the live records, flushes them and persists that end
 * as the tail. TIPS_ECORRUPT if a record fails its seal with a valid one after it.
 * Damaged head or tail words are left for olog_verify to report. */
int olog_recover(struct olog *log, unsigned slot);
static inline unsigned olog_live(const struct olog_set *s)
{
	return atomic_load_explicit(&s->live, memory_order_acquire);
}

/* A reader's place in an OLog: the logical offset, its offset in the ring (kept, so
 * that stepping to the next record costs no division by the ring's size, which need
 * not be a power of two), and the end of what it may read. */
struct olog_cursor {
	uint64_t pos, off, end;
};

static inline struct olog_cursor olog_cursor_at(const struct olog *log, uint64_t pos,
						uint64_t end)
{
	return (struct olog_cursor){ pos, pos % log->size, end };
}

/* The record at the cursor (never a PAD: they are skipped), or NULL at its end;
 * advances the cursor past it. */
const struct olog_rec *olog_next(const struct olog *log, struct olog_cursor *c);
/* Checks the persistent head and tail of @log (slot @slot) and every record between
 * them; 0 or TIPS_ECORRUPT with a message naming the slot, offset and expectation. */
int olog_verify(const struct olog *log, unsigned slot);

/* ---- ULog (ulog.c) --------------------------------------------------------------- */

struct ulog;

int ulog_new(void *ring, uint64_t size, uint64_t gen, struct ulog **out);
void ulog_delete(struct ulog *u);
/* Logs the old bytes of [addr, addr+size) unless fresh or already logged. */
int ulog_add(struct ulog *u, struct tips_heap *heap, struct tips_pool *pool, void *addr,
	     size_t size);
/* Logs up to ULOG_GROUP_MAX ranges with one fence (see ulog.c); the caller stores to
 * none of them before it returns. */
#define ULOG_GROUP_MAX 16u
int ulog_add_group(struct ulog *u, struct tips_heap *heap, struct tips_pool *pool,
		   void *const addr[], const size_t size[], unsigned n);
/* ulog_add_group() for replay's log_ahead batches: the calling thread also remembers the
 * ranges, so that its operations that log only those skip the lock and the set. */
int ulog_log_ahead(struct ulog *u, struct tips_heap *heap, struct tips_pool *pool,
		   void *const addr[], const size_t size[], unsigned n);
/* Adds the calling thread's skips of ranges it logged ahead to the statistics. */
void ulog_ahead_done(struct ulog *u);
/* ulog_add_group, then @then(@arg) under the ULog's lock, after the records are written
 * and flushed and before their fence. If @then returns true it has fenced (covering the
 * records), and the group takes no fence of its own: an allocation's record and an
 * undo record durable together (fw_alloc_logging). */
int ulog_add_group_then(struct ulog *u, struct tips_heap *heap, struct tips_pool *pool,
			void *const addr[], const size_t size[], unsigned n,
			bool (*then)(void *), void *arg);
/* CRC32C (Castagnoli) of the ULog's records: hardware when the CPU has SSE4.2. */
uint32_t fw_crc32c(uint32_t crc, const void *buf, size_t len);
uint32_t fw_crc32c_portable(uint32_t crc, const void *buf, size_t len);
bool fw_crc32c_is_hardware(void);
/* Flushes every logged address (no fence: the caller drains). */
void ulog_flush_targets(struct ulog *u);
/* Empties the volatile view after the generation moved on to @gen. */
void ulog_reset(struct ulog *u, uint64_t gen);
/* Restores the bytes of every valid record of @gen, newest first, and persists them. */
int ulog_rollback(void *ring, uint64_t size, uint64_t gen, struct tips_pool *pool);
uint64_t ulog_used(const struct ulog *u);
void ulog_counters(const struct ulog *u, uint64_t *bytes, uint64_t *logged,
		   uint64_t *skipped_fresh, uint64_t *skipped_logged);

/* ---- per-thread state (db.c) ----------------------------------------------------- */

struct thread_counters {
	_Atomic uint64_t hits, misses, writes, batches, olog_bytes, waits;
};

/* backlog_view.c: a scanning thread's sorted index of the replay backlog. _new: an
 * empty view for a database of @nlogs OLog slots, or NULL (out of DRAM). _min: sets
 * *@min to the smallest key >= @start among the OLog records not applied yet (or
 * NULL); inside a read section. Returns -1 when the view cannot answer (a backlog
 * larger than it holds): the caller merges the OLogs' records itself. */
struct backlog_view;
struct backlog_view *backlog_view_new(unsigned nlogs);
int backlog_view_min(struct tips_db *db, struct backlog_view *view, const void *start,
		     size_t klen, const struct olog_rec **min);
void backlog_view_free(struct backlog_view *view);

struct thread_ctx {
	uint64_t db_id;
	struct tips_db *db;           /* NULL once the db closed (under ctx_lock) */
	struct olog *log;             /* this thread's OLog slot, or NULL */
	unsigned cache_credit;        /* cache entries reserved and not used yet */
	uint64_t heap_credit;         /* heap bytes admitted (admit.c) and not used yet */
	struct cache_stash stash;     /* spare small cache entries */
	struct thread_counters c;
	struct backlog_view *view;    /* this thread's index of the replay backlog, or NULL */
	struct thread_ctx *next_in_db;
	struct thread_ctx *next_in_thread;
};


/* ---- the database ---------------------------------------------------------------- */

struct worker;

struct collect_cursor {
	struct olog_cursor c;
	const struct olog_rec *rec;
};

struct tips_db {
	uint64_t id;                      /* unique in the process: keys thread contexts */
	struct tips_pool *pool;
	struct tips_heap *heap;
	struct fw_header *fw;
	const struct tips_index_ops *ops;
	void *root;                       /* the index's root object */
	void *index;                      /* the index's open handle */
	bool lookup_sizes;                /* ops is built in: its lookup returns TIPS_ESIZE
	                                     itself (tips_get's fast path) */
	idx_scan_below_fn scan_below;     /* the index's bounded scan, or NULL */
	bool scan_bounded;                /* ops->scan is a built-in index's: it calls the
	                                     callback outside its locks and read sections,
	                                     so tips_scan may pass the caller's function
	                                     (the bounded scan) */
	struct tips_config cfg;           /* with defaults filled in */

	struct cache *cache;
	struct olog_set ologs;
	struct ulog *ulog;
	void *ulog_ring;
	uint64_t ulog_size;

	/* Scans read OLogs under the read side; reclamation moves heads under the write. */
	pthread_rwlock_t scan_lock;
	_Atomic int scanned;              /* a bounded scan read OLog records since the last
	                                     reclamation (reclaim.c: its grace period) */

	/* Persist thread (replay.c). */
	pthread_t persist_thread;
	bool persist_started;
	pthread_mutex_t persist_mu;
	pthread_cond_t persist_cv;        /* work arrived, or stop */
	_Atomic int persist_idle;         /* 1 while it sleeps without a timeout */
	_Atomic int reclaim_wanted;       /* a worker's MLog lane is half full */
	_Atomic int room_wanted;          /* a writer waits for OLog room */
	_Atomic int stopping;             /* close: drain everything, then exit */

	/* Replay workers and adaptive scaling (replay.c). */
	struct worker *workers;
	unsigned nworkers_made;
	unsigned workers_now;             /* W_e */
	unsigned workers_best;            /* W_max */
	double best_rate;
	bool capped;                      /* fell back to W_max at W_up */
	pthread_mutex_t work_mu;
	pthread_cond_t work_cv, done_cv;
	uint64_t work_epoch;
	unsigned work_pending;
	unsigned work_count;              /* workers in the current epoch (under work_mu) */
	struct collect_cursor *cursors;   /* one per OLog (persist thread) */
	uint64_t epoch_records_per_worker; /* bounds one worker's MLog use per epoch */
	uint64_t lane_capacity;           /* reclaim when a worker's lane has less room */
	bool recovering;                  /* replaying a previous process's records */

	/* Admission against the heap (admit.c) and replay that found it full (replay.c). */
	_Atomic uint64_t heap_reserved;   /* cost of admitted writes not applied yet */
	uint64_t heap_headroom;           /* room puts leave free (deletes may use it),
	                                     besides twice the largest block below */
	_Atomic uint64_t grown_block;     /* fw->grown_block, read on the write path: a
	                                     table the index grew into and may double */
	_Atomic int stalled;              /* 0, or why replay stopped (TIPS_ENOMEM: the
	                                     heap is full; puts get TIPS_ENOSPC meanwhile) */
	_Atomic uint64_t space_req;       /* writers' requests to apply all and reclaim */
	uint64_t space_done;              /* the last request served (under ologs.lock) */
	_Atomic uint64_t ulog_op_max;     /* most ULog bytes seen used by one operation */
	bool admit_all;                   /* tests only: admit every write, as before
	                                     admission existed (fw_debug_admit_all) */
	int epoch_rc;                     /* the last epoch's failure, 0 if none (persist
	                                     thread, or the recovering thread) */
	bool epoch_moved;                 /* it moved some OLog's applied point */
	uint64_t *next_applied;           /* epoch scratch, one per OLog */

	/* Statistics. */
	_Atomic uint64_t refused;         /* writes refused with TIPS_ENOSPC */
	_Atomic uint64_t replay_stalls;   /* epochs that stopped on a failed operation */
	_Atomic uint64_t leaked_frees;    /* tips_free calls the heap could not record */
	struct thread_counters retired;   /* of threads that exited */
	_Atomic uint64_t reclamations, reclaim_graces, epochs, replayed, worker_sum;
	_Atomic uint64_t mlog_allocs, mlog_frees;
	_Atomic uint64_t ulog_values; /* tips_ulog_value ranges flushed (no undo record) */
	/* The pool persists by msync (TIPS_MEDIA_FILE): tips_ulog_value writes undo records,
	 * since a flush per value would be an msync per update, where a record is written
	 * once per range and reclamation interval. */
	bool values_logged;
	_Atomic unsigned workers_published;
	double recovery_ms;
	int recovered;

	/* Thread contexts attached to this db (under the global context lock). */
	struct thread_ctx *ctxs;
};

/* db.c: the write path's steps, shared by single writes and batches (batch_commit.c). */
/* The calling thread's context for @db; NULL only when DRAM ran out. */
struct thread_ctx *ctx_get(struct tips_db *db);
/* Adds @n to a counter only its owning thread writes: a plain add. */
static inline void count(_Atomic uint64_t *counter, uint64_t n)
{
	atomic_store_explicit(counter, atomic_load_explicit(counter, memory_order_relaxed) + n,
			      memory_order_relaxed);
}
/* A free OLog slot for the calling thread; waits while every slot is taken. */
struct olog *olog_take(struct tips_db *db, struct thread_ctx *ctx);
/* Counts a refused write; TIPS_ENOSPC with a message starting with @what. */
int refuse(struct tips_db *db, const char *what);
/* Waits until the thread's OLog has room for a record of @size bytes (@batch: for
 * @size bytes of records and PADs); puts leave 1/8 of it for deletes. TIPS_ENOSPC if
 * replay is stalled on a full heap. */
int olog_wait_room(struct tips_db *db, struct thread_ctx *ctx, uint64_t size,
		   bool is_delete, bool batch);
/* cache_reserve()'s may_wait for writers (@arg: the db). */
bool cache_may_wait(void *arg);
/* Admits @cost heap bytes for a write of @op (admit.c), from the thread's credit or a
 * new reservation; TIPS_ENOSPC if the heap cannot promise them. */
int admit(struct tips_db *db, struct thread_ctx *ctx, unsigned op, uint64_t cost);
/* Is @key present, judged under its bucket lock (cache first, then the index). */
bool key_present(struct tips_db *db, struct cache_bucket *b, const void *key, size_t klen);

/* admit.c */
/* Heap bytes that applying one record may allocate (a bound, see admit.c). */
uint64_t admit_cost(unsigned op, size_t klen, size_t vlen);
/* Room puts keep free in a heap of @heap_bytes. */
uint64_t admit_headroom(uint64_t heap_bytes);
/* Room puts leave free now (the headroom and the growth reserve), and the free-chunk
 * bytes they need besides. */
uint64_t admit_keep(struct tips_db *db);
uint64_t admit_chunk_margin(const struct tips_db *db);
/* Reserves between @need and @want bytes of heap room; returns how many, or 0 if even
 * @need does not fit (deletes may use the headroom). */
uint64_t admit_reserve(struct tips_db *db, uint64_t need, uint64_t want, bool is_delete);
void admit_release(struct tips_db *db, uint64_t bytes);
/* Asks the persist thread to apply every record and reclaim; returns when it did. */
void admit_make_room(struct tips_db *db);

/* Tests only: from now on admit every write without checking the heap (the behaviour
 * before admission existed), to build the pools that behaviour left behind. */
void fw_debug_admit_all(struct tips_db *db);

/* plugin.c: the database the calling thread's ops calls act on. */
void fw_set_current(struct tips_db *db);
/* The value ranges a replay worker's operations overwrote in place without an undo
 * record (tips_ulog_value): the worker flushes them, with one fence, before it reports
 * its queue applied, so they are durable before any reclamation. */
struct fw_value_ranges {
	struct fw_range { void *addr; size_t size; } *r;
	size_t n, cap;
};
/* The calling thread's list (NULL: tips_ulog_value logs an undo record instead). */
void fw_set_value_ranges(struct fw_value_ranges *v);
/* Flushes @v's ranges, fences once if there were any, adds their count to
 * db->ulog_values and empties @v. */
void fw_value_ranges_flush(struct tips_db *db, struct fw_value_ranges *v);

/* replay.c */
/* Starts the W_up worker threads (idle until an epoch). */
int replay_workers_start(struct tips_db *db);
/* Starts the persist thread. */
int replay_start(struct tips_db *db);
/* Applies everything it can, reclaims, and stops the threads. Returns the bytes of
 * records left unapplied (0 after a clean drain; more only if the heap was full). */
uint64_t replay_stop(struct tips_db *db);
void replay_wake(struct tips_db *db);
/* Applies every record in the OLogs with all workers, reclaiming as needed (recovery,
 * from the opening thread, before the persist thread starts). */
int replay_recovered(struct tips_db *db);

/* check.c */
/* Range-checks the index root of @fw (state, flush_done, root block) before open
 * follows it; 0 or TIPS_ECORRUPT with a message. */
int fw_check_root(const struct fw_header *fw, struct tips_heap *heap, const char *path);
/* Opens the index on db->root (ops->open, with tips_block_valid usable), then checks
 * every OLog, and with TIPS_VERIFY walks the whole index (fw_verify_index): run before
 * recovery replays anything. Every failure carries a message. */
int fw_index_attach(struct tips_db *db);
/* The structural check of ops->walk, bounded by the heap's allocated blocks. */
int fw_verify_index(struct tips_db *db);

/* reclaim.c */
/* UNO reclamation; called by the persist thread between epochs (or at open/close). */
void reclaim_run(struct tips_db *db);
/* Step 2 alone: after a crash that left flush_done set; @grace: wait for the open read
 * sections first. */
void reclaim_finish(struct tips_db *db, bool grace);
/* Crash recovery at open (state OPEN found). */
int recover(struct tips_db *db);

#endif /* TIPS_FRAMEWORK_FRAMEWORK_H */
