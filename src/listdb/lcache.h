/*
 * lcache.h - ListDB's two lookup caches in DRAM (ListDB, OSDI'22, §3.5, Algorithm 4).
 *
 * The hash cache is a fixed-size table of PM addresses of log entries, one per slot,
 * indexed by a hash of the key. Flushing a MemTable inserts the newest entry of each key;
 * a collision overwrites (FIFO). It never copies keys or values, so it is never stale:
 * an entry's address and contents do not change while it is live. Lookup returns the
 * cached entry only if its key equals the search key.
 *
 * The second-chance cache keeps tall L1 elements (SIZE policy: when full, the shortest
 * go first) in a sorted array that is rebuilt by the single compaction writer and
 * published to readers through an RCU pointer; a reader asks it for the closest cached
 * element with a key smaller than its search key and starts its L1 search there.
 *
 * Invariant: every address either cache hands out is a live entry while the reader is
 * in its grace read section; the garbage collector calls the _forget functions, then
 * waits for a grace period, before it frees a chunk.
 * Thread safety: lookups from any thread inside grace_read_enter/exit; inserts to the
 * hash cache from any thread; the second-chance add/publish/forget from one writer at a
 * time (the caller serialises them).
 */
#ifndef TIPS_LISTDB_LCACHE_H
#define TIPS_LISTDB_LCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "listdb/entry.h"

struct ld_hcache;
/* NULL if @slots is 0 (cache disabled: every call below accepts NULL) or on ENOMEM
 * (the caller tells these apart by @slots). */
struct ld_hcache *ld_hcache_create(uint64_t slots);
void ld_hcache_destroy(struct ld_hcache *c);
void ld_hcache_insert(struct ld_hcache *c, struct ld_entry *e);
/* The cached entry with exactly this key, or NULL. */
struct ld_entry *ld_hcache_lookup(struct ld_hcache *c, const void *key, size_t klen);
/* Clears the slot of @e if it still holds @e. */
void ld_hcache_forget(struct ld_hcache *c, const struct ld_entry *e);
uint64_t ld_hcache_slots(const struct ld_hcache *c);

struct ld_scache;
struct ld_scache *ld_scache_create(uint64_t capacity);
void ld_scache_destroy(struct ld_scache *c);
/* Offer an element just merged into L1 (buffered until the next publish). */
void ld_scache_add(struct ld_scache *c, struct ld_entry *e);
/* Merge the offered elements into a new sorted snapshot (keeping the tallest
 * @capacity), publish it, free the old one after a grace period. */
void ld_scache_publish(struct ld_scache *c);
/* True when enough offers wait that a publish is worth its cost: at least an eighth of
 * the snapshot's size (a publish copies the whole snapshot, so this keeps the copying
 * at a few times the elements offered; an unpublished offer only makes some searches
 * start a little farther from their key). */
bool ld_scache_publish_due(const struct ld_scache *c);
/* The cached element with the largest key strictly smaller than (key, klen), or NULL;
 * *@above (if not NULL): the cached element after it (key >= the search key), or NULL. */
struct ld_entry *ld_scache_floor(struct ld_scache *c, const void *key, size_t klen,
				 struct ld_entry **above);
/* Drop every cached or offered element for which @dead returns true; publishes. */
void ld_scache_forget(struct ld_scache *c, bool (*dead)(const struct ld_entry *, void *),
		      void *arg);
uint64_t ld_scache_size(const struct ld_scache *c);

#endif /* TIPS_LISTDB_LCACHE_H */
