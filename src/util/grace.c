/*
 * grace.c - read sections, grace periods and deferred frees over liburcu-bp
 * (see grace.h for the invariant).
 *
 * grace_free() appends to one process-wide batch under a mutex; a full batch is handed
 * to call_rcu, whose thread frees it after a grace period. Frees are rare next to
 * reads (removes and out-of-place updates), so one mutex is cheap enough, and unlike
 * per-thread batches it leaves nothing behind when a thread exits.
 *
 * ThreadSanitizer does not see RCU grace periods: a release on a token when a reader
 * leaves its section, and an acquire after each grace period, tell it that what the
 * reader did happens before the frees that follow.
 */
#define _GNU_SOURCE
#include "util/grace.h"

#include <pthread.h>
#include <stdlib.h>
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
	struct rcu_head head; /* call_rcu's link */
	size_t n;
	void *p[GRACE_BATCH];
};

static pthread_mutex_t batch_mu = PTHREAD_MUTEX_INITIALIZER;
static struct grace_batch *batch; /* being filled; NULL until the first free */

void grace_read_enter(void)
{
	urcu_bp_read_lock();
}

void grace_read_exit(void)
{
	GRACE_READER_DONE();
	urcu_bp_read_unlock();
}

void grace_wait(void)
{
	urcu_bp_synchronize_rcu();
	GRACE_PERIOD_DONE();
}

static void batch_free_cb(struct rcu_head *head)
{
	struct grace_batch *b = caa_container_of(head, struct grace_batch, head);
	GRACE_PERIOD_DONE();
	for (size_t i = 0; i < b->n; i++)
		free(b->p[i]);
	free(b);
}

/* Call with batch_mu held: hands the batch (if any) to call_rcu. */
static void batch_hand_over(void)
{
	if (batch && batch->n) {
		urcu_bp_call_rcu(&batch->head, batch_free_cb);
		batch = NULL;
	}
}

void grace_free(void *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&batch_mu);
	if (!batch) {
		batch = malloc(sizeof(*batch));
		if (!batch) {
			/* No memory for a batch: wait for the readers here instead. */
			pthread_mutex_unlock(&batch_mu);
			grace_wait();
			free(p);
			return;
		}
		batch->n = 0;
	}
	batch->p[batch->n++] = p;
	if (batch->n == GRACE_BATCH)
		batch_hand_over();
	pthread_mutex_unlock(&batch_mu);
}

void grace_free_barrier(void)
{
	pthread_mutex_lock(&batch_mu);
	batch_hand_over();
	pthread_mutex_unlock(&batch_mu);
	urcu_bp_barrier();
}
