/*
 * timestamp.c - commit timestamps (TIPS §6).
 *
 * Stamps come from the invariant TSC (rdtscp), which costs no shared cache line. Two
 * things make them safe to order by:
 *  - conflicting writes (same key) are stamped under their cache bucket's lock, and the
 *    bucket lifts a stamp above the last one it gave (cache_bucket_stamp), so the order
 *    of stamps is the commit order whatever the skew between cores;
 *  - a scan that must see every write completed before it starts adds the ORDO-style
 *    uncertainty bound below to its own stamp. The bound is measured once, as the
 *    largest apparent backwards step of the TSC seen across a cache-line handoff
 *    between two threads, plus a margin; a machine without an invariant TSC would need
 *    a shared counter instead (docs/framework.md gives the measurement).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <x86intrin.h>

#include "tips/framework.h"

uint64_t ts_now(void)
{
	unsigned aux;
	return __rdtscp(&aux);
}

static uint64_t uncertainty;
static pthread_once_t measured = PTHREAD_ONCE_INIT;

/* Ping-pong of a stamp through one cache line: each side checks that the stamp it
 * receives is not ahead of its own clock; the largest lead seen is the skew. */
struct pingpong {
	_Atomic uint64_t stamp;
	_Atomic int turn;
	uint64_t max_lead;
};

#define PINGPONG_ROUNDS 2000

static void wait_turn(_Atomic int *turn, int want)
{
	for (unsigned spins = 0; atomic_load(turn) != want; spins++)
		if (spins < 100)
			__builtin_ia32_pause();
		else
			sched_yield(); /* the other side may need this core */
}

static void *pong(void *arg)
{
	struct pingpong *p = arg;
	for (int i = 0; i < PINGPONG_ROUNDS; i++) {
		wait_turn(&p->turn, 1);
		uint64_t seen = atomic_load(&p->stamp), now = ts_now();
		if (seen > now && seen - now > p->max_lead)
			p->max_lead = seen - now;
		atomic_store(&p->stamp, ts_now());
		atomic_store(&p->turn, 0);
	}
	return NULL;
}

static void measure(void)
{
	struct pingpong p = { .max_lead = 0 };
	atomic_init(&p.stamp, 0);
	atomic_init(&p.turn, 0);
	pthread_t t;
	uint64_t lead = 0;
	if (pthread_create(&t, NULL, pong, &p) == 0) {
		for (int i = 0; i < PINGPONG_ROUNDS; i++) {
			uint64_t seen = atomic_load(&p.stamp), now = ts_now();
			if (seen > now && seen - now > lead)
				lead = seen - now;
			atomic_store(&p.stamp, ts_now());
			atomic_store(&p.turn, 1);
			wait_turn(&p.turn, 0);
		}
		pthread_join(t, NULL);
	}
	if (p.max_lead > lead)
		lead = p.max_lead;
	uncertainty = 2 * lead + 1000; /* margin: ~0.3 us at 3 GHz */
}

uint64_t ts_uncertainty(void)
{
	pthread_once(&measured, measure);
	return uncertainty;
}
