/*
 * thread_slot.c - dense per-thread numbers, reused after a thread exits.
 *
 * A bitmap of slots in use, guarded by a mutex (taken once per thread, at first use and
 * at exit); a pthread key's destructor gives the slot back. See thread_slot.h.
 */
#include "util/thread_slot.h"

#include <pthread.h>
#include <stdint.h>

static struct {
	pthread_mutex_t lock;
	pthread_once_t once;
	pthread_key_t key;
	uint64_t used[THREAD_SLOT_MAX / 64];
	unsigned overflow; /* next slot to share once all are in use */
} slots = { .lock = PTHREAD_MUTEX_INITIALIZER, .once = PTHREAD_ONCE_INIT };

static _Thread_local unsigned my_slot_plus_one;

/* Runs in the exiting thread: it forgets its slot too, so that a later call from
 * another destructor of the same thread takes a fresh slot instead of a shared one. */
static void slot_release(void *value)
{
	unsigned slot = (unsigned)(uintptr_t)value - 1;
	my_slot_plus_one = 0;
	pthread_mutex_lock(&slots.lock);
	slots.used[slot / 64] &= ~(1ull << (slot % 64));
	pthread_mutex_unlock(&slots.lock);
}

static void slots_init(void)
{
	pthread_key_create(&slots.key, slot_release);
}

static unsigned slot_acquire(void)
{
	pthread_mutex_lock(&slots.lock);
	for (unsigned w = 0; w < THREAD_SLOT_MAX / 64; w++) {
		if (slots.used[w] != UINT64_MAX) {
			unsigned bit = (unsigned)__builtin_ctzll(~slots.used[w]);
			slots.used[w] |= 1ull << bit;
			pthread_mutex_unlock(&slots.lock);
			return w * 64 + bit;
		}
	}
	unsigned shared = slots.overflow++ % THREAD_SLOT_MAX;
	pthread_mutex_unlock(&slots.lock);
	return shared + THREAD_SLOT_MAX; /* marked as shared: not released */
}

unsigned thread_slot_get(void)
{
	if (__builtin_expect(my_slot_plus_one != 0, 1))
		return (my_slot_plus_one - 1) % THREAD_SLOT_MAX;
	pthread_once(&slots.once, slots_init);
	unsigned slot = slot_acquire();
	my_slot_plus_one = slot + 1;
	if (slot < THREAD_SLOT_MAX)
		pthread_setspecific(slots.key, (void *)(uintptr_t)(slot + 1));
	return slot % THREAD_SLOT_MAX;
}
