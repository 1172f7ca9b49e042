/*
 * grace.c - read sections, grace periods and deferred frees over liburcu-bp
 * (see grace.h for the invariant).
 *
 * grace_free() appends to one process-wide batch under a mutex; a full batch goes to a
 * queue served by one reclaimer thread (started on first use), which waits for a grace
 * period and frees the batch. Frees are rare next to reads (removes and out-of-place
 * updates), so one mutex is cheap enough, and unlike per-thread batches it leaves
 * nothing behind when a thread exits. The hand-over uses our own mutex and condition
 * variables rather than liburcu's call_rcu, whose internal synchronisation sanitizers
 * cannot see.
 *
 * fork(): only the forking thread lives on in the child, so the reclaimer is gone
 * there, and any lock it held at the fork stays held in the child. So the reclaimer
 * never runs allocator code while a fork may happen: a hand-over that starts it waits
 * until the thread runs our code (its start-up, a sanitizer's thread set-up included,
 * is over), and it frees only while holding `freeing_mu`, which an atfork handler
 * takes before the fork. (glibc's malloc locks itself around fork; ASan's allocator in
 * GCC 12 does not, and a child that forked during such a free hung on its first
 * allocation of that size class.) The handler also holds the mutex across the fork
 * and, in the child, forgets the reclaimer (the next hand-over starts one) and counts
 * the batches the parent's reclaimer had taken as freed: they leak in the child, and a
 * barrier in the child no longer waits for them forever.
 *
 * ThreadSanitizer does not see RCU grace periods: a release on a token when a reader
 * leaves its section, and an acquire after each grace period, tell it that what the
 * reader did happens before the frees that follow.
 */
#define _GNU_SOURCE
#include "util/grace.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
/* liburcu-bp's read side inline (its header marks the read lock and unlock as meeting
 * LGPL's 10-line criterion); grace.h includes it the same way in builds where the read
 * section is inline. */
#ifndef _LGPL_SOURCE
#define _LGPL_SOURCE
#endif
#include <urcu-bp.h>

#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
static char grace_token;
#define GRACE_READER_DONE() __tsan_release(&grace_token)
#define GRACE_PERIOD_DONE() __tsan_acquire(&grace_token)
#else
#define GRACE_READER_DONE() ((void)0)
#define GRACE_PERIOD_DONE() ((void)0)
#endif

#define GRACE_BATCH 256

struct grace_batch {
	struct grace_batch *next; /* queue link */
	uint64_t seq;             /* hand-over number, 1, 2, ... */
	size_t n;
	void *p[GRACE_BATCH];
};

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t freeing_mu = PTHREAD_MUTEX_INITIALIZER; /* held while the
								  reclaimer frees */
static pthread_cond_t work_cv = PTHREAD_COND_INITIALIZER; /* the queue is not empty */
static pthread_cond_t done_cv = PTHREAD_COND_INITIALIZER; /* freed_seq moved, or
								the reclaimer runs */
static struct grace_batch *filling;      /* being filled; NULL until the next free */
static struct grace_batch *queue_head, *queue_tail;
static uint64_t handed_seq, freed_seq;   /* last batch handed over / freed */
static uint64_t taken_seq;               /* last batch the reclaimer took to free */
static int reclaimer_started; /* a thread was created ... */
static int reclaimer_running; /* ... and runs reclaimer_main */
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void before_fork(void)
{
	pthread_mutex_lock(&freeing_mu);
	pthread_mutex_lock(&mu);
}

static void after_fork_parent(void)
{
	pthread_mutex_unlock(&mu);
	pthread_mutex_unlock(&freeing_mu);
}

static void after_fork_child(void)
{
	pthread_mutex_init(&mu, NULL);
	pthread_mutex_init(&freeing_mu, NULL);
	pthread_cond_init(&work_cv, NULL);
	pthread_cond_init(&done_cv, NULL);
	reclaimer_started = reclaimer_running = 0;
	if (freed_seq < taken_seq)
		freed_seq = taken_seq;
}

static void atfork_register(void)
{
	pthread_atfork(before_fork, after_fork_parent, after_fork_child);
}

#if GRACE_READ_INLINE
void grace_read_enter_call(void)
{
	urcu_bp_read_lock();
}

void grace_read_exit_call(void)
{
	urcu_bp_read_unlock();
}
#else
void grace_read_enter(void)
{
	urcu_bp_read_lock();
}

void grace_read_exit(void)
{
	GRACE_READER_DONE();
	urcu_bp_read_unlock();
}
#endif

void grace_wait(void)
{
	urcu_bp_synchronize_rcu();
	GRACE_PERIOD_DONE();
}

static uint64_t free_batches(struct grace_batch *b);

static void *reclaimer_main(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&mu);
	reclaimer_running = 1;
	pthread_cond_broadcast(&done_cv);
	for (;;) {
		while (!queue_head)
			pthread_cond_wait(&work_cv, &mu);
		struct grace_batch *b = queue_head;
		taken_seq = queue_tail->seq;
		queue_head = queue_tail = NULL;
		pthread_mutex_unlock(&mu);
		grace_wait();
		pthread_mutex_lock(&freeing_mu);
		uint64_t last = free_batches(b);
		pthread_mutex_unlock(&freeing_mu);
		pthread_mutex_lock(&mu);
		freed_seq = last;
		pthread_cond_broadcast(&done_cv);
	}
	return NULL;
}

/* Frees a chain of batches; returns the last one's seq. */
static uint64_t free_batches(struct grace_batch *b)
{
	uint64_t last = 0;
	while (b) {
		struct grace_batch *next = b->next;
		for (size_t i = 0; i < b->n; i++)
			free(b->p[i]);
		last = b->seq;
		free(b);
		b = next;
	}
	return last;
}

/* Call with mu held: queues the batch being filled (if any) and makes sure the
 * reclaimer runs. Returns 0, or -1 if the reclaimer cannot be started (the batches
 * stay queued; the next hand-over tries again, and a barrier frees them itself). */
static int hand_over(void)
{
	if (filling && filling->n) {
		filling->seq = ++handed_seq;
		filling->next = NULL;
		if (queue_tail)
			queue_tail->next = filling;
		else
			queue_head = filling;
		queue_tail = filling;
		filling = NULL;
	}
	if (!reclaimer_started) {
		pthread_once(&atfork_once, atfork_register);
		pthread_t t;
		pthread_attr_t attr;
		pthread_attr_init(&attr);
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		int rc = pthread_create(&t, &attr, reclaimer_main, NULL);
		pthread_attr_destroy(&attr);
		if (rc)
			return -1;
		reclaimer_started = 1;
		while (!reclaimer_running) /* its start-up may allocate: not across a fork */
			pthread_cond_wait(&done_cv, &mu);
	}
	pthread_cond_signal(&work_cv);
	return 0;
}

/*
 * Never waits for a grace period or for another thread's locks (only, once, for the
 * reclaimer thread it starts to run): a writer may call it inside a read section or
 * holding its locks. With no
 * memory for a batch the block is leaked rather than freed unsafely (it is DRAM of a
 * volatile index, and only under memory exhaustion).
 */
void grace_free(void *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&mu);
	if (!filling) {
		filling = malloc(sizeof(*filling));
		if (!filling) {
			pthread_mutex_unlock(&mu);
			return;
		}
		filling->n = 0;
	}
	filling->p[filling->n++] = p;
	if (filling->n == GRACE_BATCH)
		(void)hand_over();
	pthread_mutex_unlock(&mu);
}

void grace_free_barrier(void)
{
	pthread_mutex_lock(&mu);
	if (hand_over() == 0) {
		uint64_t want = handed_seq;
		while (freed_seq < want)
			pthread_cond_wait(&done_cv, &mu);
	} else {
		/* No reclaimer thread: free what is queued here, after a grace period. */
		struct grace_batch *b = queue_head;
		queue_head = queue_tail = NULL;
		pthread_mutex_unlock(&mu);
		grace_wait();
		uint64_t last = free_batches(b);
		pthread_mutex_lock(&mu);
		if (last > freed_seq)
			freed_seq = last;
	}
	pthread_mutex_unlock(&mu);
}
