/*
 * test_grace.c - read sections and deferred frees (src/util/grace.c, grace.h).
 *
 * A grace period waits for a reader: a thread inside a read section (entered after a
 * first section that registered it, and nested once, so both the inline path and the
 * library's are used) holds grace_wait() until it leaves; grace_wait() must not
 * return before (the main thread gives a wrongly early return 200 ms to happen before
 * it lets the reader go; a correct one returns only after, whatever the timing), and
 * must return once the section has ended while the thread still lives (within 10 s;
 * a section whose exit is lost would hold it until the thread ends).
 *
 * Deferred frees across fork(): a process whose
 * reclaimer thread runs forks while another thread keeps freeing; in each child a
 * barrier must still return (the child has no reclaimer until it starts one) and
 * later frees must still be freed. A child that hangs is ended by alarm() and fails
 * the test.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <sched.h>
#include <sys/wait.h>
#include <time.h>

#include "test_util.h"
#include "util/grace.h"

static atomic_int stop;

static void *freer(void *arg)
{
	(void)arg;
	while (!atomic_load(&stop)) {
		void *p = malloc(64);
		REQUIRE(p != NULL);
		grace_free(p);
	}
	return NULL;
}

static atomic_int entered, release_reader, leaving, left, reader_may_end, waited, saw_leaving;

/* Registers (a first section), then stays in a nested section until released; after
 * leaving it, stays alive until told: so a grace period that still waited for it then
 * would be waiting for a section that has ended. */
static void *reader(void *arg)
{
	(void)arg;
	grace_read_enter(); /* the thread's first section: it registers */
	grace_read_exit();
	grace_read_enter();
	grace_read_enter(); /* nested */
	grace_read_exit();  /* still inside the outer one */
	atomic_store(&entered, 1);
	while (!atomic_load(&release_reader))
		sched_yield();
	atomic_store(&leaving, 1);
	grace_read_exit();
	atomic_store(&left, 1);
	while (!atomic_load(&reader_may_end))
		sched_yield();
	return NULL;
}

static void *waiter(void *arg)
{
	(void)arg;
	while (!atomic_load(&entered))
		sched_yield();
	grace_wait();
	atomic_store(&saw_leaving, atomic_load(&leaving));
	atomic_store(&waited, 1);
	return NULL;
}

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

/* Spins until @flag is set or @seconds have passed; its value. */
static int wait_flag(atomic_int *flag, double seconds)
{
	for (double t0 = now_s(); !atomic_load(flag) && now_s() - t0 < seconds;)
		sched_yield();
	return atomic_load(flag);
}

static void test_grace_waits_for_reader(void)
{
	pthread_t r, w;
	REQUIRE(pthread_create(&r, NULL, reader, NULL) == 0);
	REQUIRE(pthread_create(&w, NULL, waiter, NULL) == 0);
	while (!atomic_load(&entered))
		sched_yield();
	wait_flag(&waited, 0.2); /* time for a wrongly early return */
	atomic_store(&release_reader, 1);
	wait_flag(&left, 60);
	/* The reader has left but lives on: the grace period must end now. */
	int ended = wait_flag(&waited, 10);
	atomic_store(&reader_may_end, 1);
	pthread_join(r, NULL);
	pthread_join(w, NULL);
	CHECK(atomic_load(&saw_leaving) == 1); /* it waited for the section */
	CHECK(ended);                          /* and not for the thread's end */
}

int main(void)
{
	test_grace_waits_for_reader();
#ifdef __SANITIZE_THREAD__
	/* TSan does not support fork() in a process with threads: with die_after_fork=0
	 * (scripts/test.sh) its runtime goes on, but a child then hung 2 runs in 30 on a
	 * loaded machine (not diagnosed further: the TSan runtime forks unsupported).
	 * Reported as a skip, not a pass; the plain and ASan builds run it. */
	test_skip("test_grace", "fork() in a process with threads is not supported by ThreadSanitizer");
	return test_finish("test_grace");
#endif
	for (int i = 0; i < 1000; i++)
		grace_free(malloc(32));
	grace_free_barrier(); /* the reclaimer now runs */
	pthread_t t;
	REQUIRE(pthread_create(&t, NULL, freer, NULL) == 0);
	for (int round = 0; round < 20; round++) {
		pid_t pid = fork();
		REQUIRE(pid >= 0);
		if (pid == 0) {
			alarm(10);
			grace_free_barrier();
			for (int i = 0; i < 600; i++) /* more than a batch: a new reclaimer */
				grace_free(malloc(16));
			grace_free_barrier();
			_exit(0);
		}
		int status;
		REQUIRE(waitpid(pid, &status, 0) == pid);
		if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
			fprintf(stderr, "round %d: the child %s\n", round,
				WIFSIGNALED(status) ? "hung (ended by its alarm)" : "failed");
		CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}
	atomic_store(&stop, 1);
	pthread_join(t, NULL);
	grace_free_barrier();
	return test_finish("test_grace");
}
