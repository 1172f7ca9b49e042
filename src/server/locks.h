/*
 * locks.h - the per-key striped locks of tips-server, and the one lock over the keyspace.
 *
 * Every command that names keys runs with the stripes of its keys held, so it is atomic
 * to every other client, as in Redis (design decision "Write batches and the server"). A key
 * maps to one of LOCK_STRIPES mutexes by a hash of its bytes; a command collects the
 * stripes of all its keys into a lockset (a bitmap, so duplicates vanish) and takes them
 * in ascending stripe order. Because every thread takes stripes in that one order, two
 * multi-key commands can never deadlock. A lockset is taken and released whole: no
 * stripe is taken while another set is held by the same thread.
 *
 * Above the stripes sits the keyspace lock, a rwlock: keyed commands hold it shared,
 * commands over the whole keyspace that must be atomic (FLUSHDB, FLUSHALL, KEYS) hold it
 * exclusive and take no stripes. Order: keyspace lock first, then the stripes.
 */
#ifndef TIPS_SERVER_LOCKS_H
#define TIPS_SERVER_LOCKS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define LOCK_STRIPES 4096u

/* The stripes of one command's keys: bit i set = stripe i wanted. */
struct lockset {
	uint64_t bits[LOCK_STRIPES / 64];
	unsigned count; /* stripes set */
};

struct locks {
	pthread_rwlock_t keyspace;
	pthread_mutex_t stripe[LOCK_STRIPES];
	/* WATCH: a stripe's version grows each time a command that wrote one of its keys
	 * commits (bumped with the stripe held); flushes grows on FLUSHDB/FLUSHALL */
	_Atomic uint64_t version[LOCK_STRIPES];
	_Atomic uint64_t flushes;
};

/** locks_init() - initialise every lock. Return: 0 or -errno. */
int locks_init(struct locks *l);
/** locks_destroy() - destroy them; none may be held. */
void locks_destroy(struct locks *l);

/** lock_hash() - the hash that picks a key's stripe (FNV-1a 64); also good for any
 * DRAM table of keys. */
uint64_t lock_hash(const void *key, size_t len);

/** lock_stripe() - the stripe of @key. */
unsigned lock_stripe(const void *key, size_t len);
/** locks_bump() - a write to the keys of @s committed: grow their stripes' versions.
 * Call with @s held. */
void locks_bump(struct locks *l, const struct lockset *s);

/** lockset_clear() - an empty set. */
void lockset_clear(struct lockset *s);
/** lockset_add() - add the stripe of @key (any bytes). */
void lockset_add(struct lockset *s, const void *key, size_t len);
/** lockset_add_stripe() - add stripe @i (< LOCK_STRIPES). */
void lockset_add_stripe(struct lockset *s, unsigned i);

/**
 * locks_acquire() - take the keyspace lock (exclusive if @exclusive, else shared), then
 * every stripe of @s in ascending order. The calling thread must hold none of them.
 */
void locks_acquire(struct locks *l, const struct lockset *s, int exclusive);
/** locks_release() - release what locks_acquire() took with the same @s. */
void locks_release(struct locks *l, const struct lockset *s);

#endif /* TIPS_SERVER_LOCKS_H */
