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

/*
 * The sim reads lines of the working copy that other threads may be storing into at that
 * moment, as a CPU writes back a line while cores keep storing to it: a flush snapshots a
 * line whose neighbouring bytes another thread is writing (ListDB packs entries, so one
 * thread persists its entry while another links its neighbour), and a power failure
 * snapshots every dirty line while the other threads run on to their next flush. Each
 * 8-byte word is read whole (no torn word). These reads are the race being simulated, so
 * they are exempt from ThreadSanitizer; every other access of the sim is under its lock.
 */
#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SIM_RACY_READ __attribute__((no_sanitize("thread")))
#endif
#endif
#if !defined(SIM_RACY_READ) && defined(__SANITIZE_THREAD__)
#define SIM_RACY_READ __attribute__((no_sanitize_thread))
#endif
#ifndef SIM_RACY_READ
#define SIM_RACY_READ
#endif

SIM_RACY_READ static void read_line(unsigned char *dst, const void *line)
{
	for (unsigned i = 0; i < PM_CACHELINE; i += 8) {
		uint64_t w = __atomic_load_n((const uint64_t *)((const char *)line + i),
					     __ATOMIC_RELAXED);
		memcpy(dst + i, &w, 8);
	}
}

/* 1 if the working copy's line differs from the media's (the media is the sim's own). */
SIM_RACY_READ static int line_dirty(const void *working, const void *media)
{
	for (unsigned i = 0; i < PM_CACHELINE; i += 8)
		if (__atomic_load_n((const uint64_t *)((const char *)working + i), __ATOMIC_RELAXED) !=
		    *(const uint64_t *)((const char *)media + i))
			return 1;
	return 0;
}

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
		read_line(p->data, (const void *)line);
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
			if (line_dirty(sim->working + off, sim->media + off))
				if (draw(&rng) < evict) /* the newest contents of all */
					read_line((unsigned char *)sim->media + off,
						  sim->working + off);
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
