/*
 * test_grace.c - deferred frees across fork() (src/util/grace.c): a process whose
 * reclaimer thread runs forks while another thread keeps freeing; in each child a
 * barrier must still return (the child has no reclaimer until it starts one) and
 * later frees must still be freed. A child that hangs is ended by alarm() and fails
 * the test.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <sys/wait.h>

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

int main(void)
{
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
