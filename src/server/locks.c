/*
 * locks.c - striped per-key locks and the keyspace lock (locks.h).
 *
 * Invariant: a thread takes the keyspace lock, then its stripes in ascending index
 * order, and releases them all together; so no cycle of waits can form.
 */
#include "locks.h"

#include <errno.h>
#include <string.h>

int locks_init(struct locks *l)
{
	/* writers first: FLUSHDB and KEYS must not starve behind a stream of commands
	 * (safe because no thread takes the keyspace lock twice) */
	pthread_rwlockattr_t attr;
	pthread_rwlockattr_init(&attr);
	pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	int rc = pthread_rwlock_init(&l->keyspace, &attr);
	pthread_rwlockattr_destroy(&attr);
	if (rc)
		return -rc;
	for (unsigned i = 0; i < LOCK_STRIPES; i++)
		pthread_mutex_init(&l->stripe[i], NULL);
	return 0;
}

void locks_destroy(struct locks *l)
{
	for (unsigned i = 0; i < LOCK_STRIPES; i++)
		pthread_mutex_destroy(&l->stripe[i]);
	pthread_rwlock_destroy(&l->keyspace);
}

void lockset_clear(struct lockset *s)
{
	memset(s, 0, sizeof(*s));
}

/* FNV-1a: the stripe only needs to spread keys, not resist an adversary. */
uint64_t lock_hash(const void *key, size_t len)
{
	const unsigned char *p = key;
	uint64_t h = 1469598103934665603ull;
	for (size_t i = 0; i < len; i++) {
		h ^= p[i];
		h *= 1099511628211ull;
	}
	return h;
}

unsigned lock_stripe(const void *key, size_t len)
{
	uint64_t h = lock_hash(key, len);
	return (unsigned)((h ^ (h >> 32)) % LOCK_STRIPES);
}

void lockset_add(struct lockset *s, const void *key, size_t len)
{
	lockset_add_stripe(s, lock_stripe(key, len));
}

void lockset_add_stripe(struct lockset *s, unsigned i)
{
	uint64_t bit = 1ull << (i % 64);
	if (!(s->bits[i / 64] & bit)) {
		s->bits[i / 64] |= bit;
		s->count++;
	}
}

void locks_bump(struct locks *l, const struct lockset *s)
{
	for (unsigned w = 0; w < LOCK_STRIPES / 64; w++)
		for (uint64_t bits = s->bits[w]; bits; bits &= bits - 1)
			atomic_fetch_add(&l->version[w * 64 + (unsigned)__builtin_ctzll(bits)], 1);
}

void locks_acquire(struct locks *l, const struct lockset *s, int exclusive)
{
	if (exclusive)
		pthread_rwlock_wrlock(&l->keyspace);
	else
		pthread_rwlock_rdlock(&l->keyspace);
	if (!s || !s->count)
		return;
	for (unsigned w = 0; w < LOCK_STRIPES / 64; w++)
		for (uint64_t bits = s->bits[w]; bits; bits &= bits - 1)
			pthread_mutex_lock(&l->stripe[w * 64 + (unsigned)__builtin_ctzll(bits)]);
}

void locks_release(struct locks *l, const struct lockset *s)
{
	if (s && s->count)
		for (unsigned w = 0; w < LOCK_STRIPES / 64; w++)
			for (uint64_t bits = s->bits[w]; bits; bits &= bits - 1)
				pthread_mutex_unlock(&l->stripe[w * 64 +
								(unsigned)__builtin_ctzll(bits)]);
	pthread_rwlock_unlock(&l->keyspace);
}
