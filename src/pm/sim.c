/*
 * sim.c - simulated power failure; see sim.h for the model and its invariant.
 *
 * Pending lines (flushed, not yet fenced) are kept per sim in one list, in flush order,
 * each with the flushing thread and the line's contents at the flush, under a mutex:
 * the sim is a test harness, so clarity beats speed. A power failure draws from a
 * splitmix64 stream seeded by the caller and visits pending lines in flush order and
 * dirty lines in address order, so the same seed on the same state gives the same file.
 */
#define _GNU_SOURCE
#include "pm/sim.h"
#include "pm/pm.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct pending_line {
	uintptr_t line;
	uint64_t owner; /* sim_thread_id() of the flushing thread */
	uint64_t seq; /* order of the flush among all flushes of this sim */
	unsigned char data[PM_CACHELINE]; /* the line's contents when it was flushed */
};

struct pm_sim {
	pthread_mutex_t lock;
	char *working, *media;
	size_t size;
	struct pending_line *pending;
	size_t npending, cap;
	uint64_t next_seq;
	uint64_t *line_seq; /* per line: seq of the copy on the media (write-backs are
			       coherent, so an older copy never replaces a newer one) */
	_Atomic uint64_t events;
	uint64_t crash_at;
	double evict;
	uint64_t seed;
	int exit_code;
};

static _Atomic uint64_t all_events;

/* A number for the calling thread that no other thread ever gets (pthread_t values are
 * reused after a thread exits, and an exited thread's unfenced lines must stay
 * unfenced). */
static uint64_t sim_thread_id(void)
{
	static _Atomic uint64_t next_id = 1;
	static _Thread_local uint64_t id;
	if (id == 0)
		id = atomic_fetch_add(&next_id, 1);
	return id;
}

uint64_t pm_sim_events_total(void) { return atomic_load(&all_events); }

struct pm_sim *pm_sim_new(void *working, void *media, size_t size, uint64_t crash_at,
			  double evict, uint64_t seed, int exit_code)
{
	struct pm_sim *sim = calloc(1, sizeof(*sim));
	if (!sim)
		return NULL;
	pthread_mutex_init(&sim->lock, NULL);
	sim->working = working;
	sim->media = media;
	sim->size = size;
	sim->line_seq = calloc(size / PM_CACHELINE, sizeof(uint64_t));
	if (!sim->line_seq) {
		free(sim);
		return NULL;
	}
	sim->crash_at = crash_at;
	sim->evict = evict;
	sim->seed = seed;
	sim->exit_code = exit_code;
	return sim;
}

void pm_sim_delete(struct pm_sim *sim)
{
	if (!sim)
		return;
	pthread_mutex_destroy(&sim->lock);
	free(sim->line_seq);
	free(sim->pending);
	free(sim);
}

void pm_sim_flush(struct pm_sim *sim, uintptr_t first, uintptr_t end)
{
	uint64_t self = sim_thread_id();
	pthread_mutex_lock(&sim->lock);
	for (uintptr_t line = first; line < end; line += PM_CACHELINE) {
		if (sim->npending == sim->cap) {
			size_t cap = sim->cap ? sim->cap * 2 : 1024;
			struct pending_line *p = realloc(sim->pending, cap * sizeof(*p));
			if (!p) {
				fprintf(stderr, "libtips sim: out of memory for pending lines\n");
				abort();
			}
			sim->pending = p;
			sim->cap = cap;
		}
		struct pending_line *p = &sim->pending[sim->npending++];
		p->line = line;
		p->owner = self;
		p->seq = ++sim->next_seq;
		memcpy(p->data, (const void *)line, PM_CACHELINE);
	}
	pthread_mutex_unlock(&sim->lock);
}

/* Writes a flushed line, as it was at its flush, to the media view, unless a newer copy
 * of the line is already there. */
static void pending_write_back(struct pm_sim *sim, const struct pending_line *p)
{
	size_t off = p->line - (uintptr_t)sim->working;
	if (off >= sim->size || sim->line_seq[off / PM_CACHELINE] > p->seq)
		return;
	memcpy(sim->media + off, p->data, PM_CACHELINE);
	sim->line_seq[off / PM_CACHELINE] = p->seq;
}

void pm_sim_drain(struct pm_sim *sim)
{
	uint64_t self = sim_thread_id();
	pthread_mutex_lock(&sim->lock);
	size_t kept = 0;
	for (size_t i = 0; i < sim->npending; i++) {
		if (sim->pending[i].owner == self)
			pending_write_back(sim, &sim->pending[i]);
		else
			sim->pending[kept++] = sim->pending[i];
	}
	sim->npending = kept;
	pthread_mutex_unlock(&sim->lock);
}

static uint64_t splitmix64(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static double draw(uint64_t *state)
{
	return (double)(splitmix64(state) >> 11) / 9007199254740992.0;
}

/* The failure itself; the sim's lock is held, so no other thread writes back meanwhile. */
static void power_fail_locked(struct pm_sim *sim, double evict, uint64_t seed)
{
	uint64_t rng = seed;
	/* Flushed but unfenced lines: each flush reached the media or not, a coin each,
	 * in flush order (a later flush of the same line carries newer contents). */
	for (size_t i = 0; i < sim->npending; i++)
		if (draw(&rng) < 0.5)
			pending_write_back(sim, &sim->pending[i]);
	sim->npending = 0;
	/* Dirty lines never flushed: the CPU may have evicted any of them. */
	if (evict > 0) {
		for (size_t off = 0; off < sim->size; off += PM_CACHELINE)
			if (memcmp(sim->working + off, sim->media + off, PM_CACHELINE) != 0)
				if (draw(&rng) < evict) /* the newest contents of all */
					memcpy(sim->media + off, sim->working + off, PM_CACHELINE);
	}
}

void pm_sim_power_fail(struct pm_sim *sim, double evict, uint64_t seed)
{
	pthread_mutex_lock(&sim->lock);
	power_fail_locked(sim, evict, seed);
	pthread_mutex_unlock(&sim->lock);
}

void pm_sim_event(struct pm_sim *sim)
{
	atomic_fetch_add_explicit(&all_events, 1, memory_order_relaxed);
	uint64_t n = atomic_fetch_add(&sim->events, 1) + 1;
	if (sim->crash_at != 0 && n == sim->crash_at) {
		/* The lock is kept to the end: other threads of the process stop at their
		 * next flush or fence on this pool, as they would when the power goes. */
		pthread_mutex_lock(&sim->lock);
		power_fail_locked(sim, sim->evict, sim->seed);
		_exit(sim->exit_code);
	}
}
