/*
 * workload.c - the children that write: the workload (writer threads that announce each
 * operation to the parent before and after the call), the creating child and the
 * crashed recovery.
 * Invariant: an intent message precedes every write and an ack follows it, each one
 * write() of a small struct to the pipe, so the parent sees every operation that may
 * have reached the store, and each key has at most one operation in flight.
 */
#define _GNU_SOURCE
#include "crashtest.h"

/* ---- the workload child -------------------------------------------------------------- */

struct worker {
	struct bench_index *db;
	int fd;
	unsigned t, nthreads;
	uint64_t keys, nops, seq_base, rng;
	unsigned batch; /* --batch */
};

/* Announces op @op of record @j on @key to the parent (an intent message) and builds the
 * key and value it writes into @k and @v; returns the value's length (0: a delete). */
static uint32_t intent(struct worker *w, unsigned op, uint64_t key, uint64_t j,
		       unsigned char k[8], unsigned char v[LARGE_VALUE])
{
	uint32_t vlen = op == OP_DELETE ? 0
			: rng_below(&w->rng, 4) == 0 ? LARGE_VALUE : SMALL_VALUE;
	uint64_t seq = w->seq_base + j * w->nthreads + w->t;
	key_encode(key, k);
	if (vlen)
		value_make(key, seq, vlen, v);
	struct msg m = { .kind = MSG_INTENT, .thread = w->t, .op = op, .key = key,
			 .seq = seq, .vlen = vlen };
	msg_send(w->fd, &m);
	return vlen;
}

/* Batch mode: commits batches of up to w->batch operations on distinct keys of the
 * thread (an intent per operation, one ack per commit); never returns on failure. */
static void worker_batches(struct worker *w)
{
	struct tips_batch *b;
	if (tips_batch_new(&b) != 0)
		_exit(CHILD_OP_FAILED);
	uint64_t mine = (w->keys - w->t + w->nthreads - 1) / w->nthreads; /* keys % T == t */
	uint64_t chosen[MAX_BATCH];
	for (uint64_t j = 0; j < w->nops;) {
		unsigned n = w->batch;
		if (n > w->nops - j)
			n = (unsigned)(w->nops - j);
		if (n > mine)
			n = (unsigned)mine;
		tips_batch_clear(b);
		for (unsigned i = 0; i < n; i++, j++) {
			uint64_t key;
			bool again;
			do { /* distinct keys: the model holds one in-flight state per key */
				key = w->t + w->nthreads * rng_below(&w->rng, mine);
				again = false;
				for (unsigned x = 0; x < i; x++)
					again |= chosen[x] == key;
			} while (again);
			chosen[i] = key;
			unsigned op = rng_below(&w->rng, 4) == 0 ? OP_DELETE : OP_PUT;
			unsigned char k[8], v[LARGE_VALUE];
			uint32_t vlen = intent(w, op, key, j, k, v);
			int rc = op == OP_DELETE ? tips_batch_delete(b, k, 8)
						 : tips_batch_put(b, k, 8, v, vlen);
			if (rc)
				_exit(CHILD_OP_FAILED);
		}
		int rc = bench_batch_commit(w->db, b);
		struct msg a = { .kind = MSG_ACK, .thread = w->t, .rc = rc };
		msg_send(w->fd, &a);
		if (rc != 0) {
			fprintf(stderr, "tips-crashtest: child: batch of %u: %s (%s)\n", n,
				tips_strerror(rc), tips_errormsg());
			_exit(CHILD_OP_FAILED);
		}
	}
	tips_batch_free(&b);
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	if (w->batch) {
		worker_batches(w);
		return NULL;
	}
	uint64_t mine = (w->keys - w->t + w->nthreads - 1) / w->nthreads; /* keys % T == t */
	for (uint64_t j = 0; j < w->nops; j++) {
		uint64_t key = w->t + w->nthreads * rng_below(&w->rng, mine);
		uint64_t r = rng_below(&w->rng, 100);
		unsigned op = r < 30 ? OP_INSERT : r < 60 ? OP_UPDATE : r < 80 ? OP_PUT : OP_DELETE;
		unsigned char k[8], v[LARGE_VALUE];
		uint32_t vlen = intent(w, op, key, j, k, v);
		int rc;
		switch (op) {
		case OP_INSERT: rc = bench_insert(w->db, k, 8, v, vlen); break;
		case OP_UPDATE: rc = bench_update(w->db, k, 8, v, vlen); break;
		case OP_PUT: rc = bench_put(w->db, k, 8, v, vlen); break;
		default: rc = bench_remove(w->db, k, 8); break;
		}
		struct msg a = { .kind = MSG_ACK, .thread = w->t, .rc = rc };
		msg_send(w->fd, &a);
		if (rc != 0 && rc != TIPS_EKEYEXISTS && rc != TIPS_ENOTFOUND) {
			fprintf(stderr, "tips-crashtest: child: %s of key %llu: %s (%s)\n",
				op_names[op], (unsigned long long)key, tips_strerror(rc),
				tips_errormsg());
			_exit(CHILD_OP_FAILED);
		}
	}
	return NULL;
}

/* Runs the workload; never returns. SIM media when @sim (armed at @crash_at, 0: never). */
void child_workload(const struct options *o, int fd, bool sim, uint64_t crash_at,
			   uint64_t sim_seed, uint64_t seq_base, uint64_t rng_seed)
{
	struct tips_pool_options popts;
	sim_options(&popts, crash_at, o->evict, sim_seed);
	struct bench_index db;
	int rc = store_open(o, false, sim ? &popts : NULL, &db);
	if (rc) {
		fprintf(stderr, "tips-crashtest: child: open %s: %s (%s)\n", o->pool,
			tips_strerror(rc), tips_errormsg());
		_exit(CHILD_OPEN_FAILED);
	}
	struct worker w[MAX_THREADS];
	pthread_t tid[MAX_THREADS];
	for (unsigned t = 0; t < o->threads; t++) {
		w[t] = (struct worker){ &db, fd, t, o->threads, o->keys,
					o->ops / o->threads + (t < o->ops % o->threads), seq_base,
					rng_seed ^ (0x100000001b3ull * (t + 1)), o->batch };
		if (pthread_create(&tid[t], NULL, worker_main, &w[t]) != 0)
			_exit(CHILD_NO_THREAD);
	}
	for (unsigned t = 0; t < o->threads; t++)
		pthread_join(tid[t], NULL);
	struct bench_store_stats stats;
	bench_index_stats(&db, &stats);
	if (bench_index_close(&db) != 0)
		_exit(CHILD_CLOSE_FAILED);
	struct msg d = { .kind = MSG_DONE, .key = stats.background,
			 .seq = tips_pm_persist_events() };
	msg_send(fd, &d);
	_exit(CHILD_OK);
}

/* Creates the pool and the index; never returns. */
void child_create(const struct options *o)
{
	struct bench_index db;
	int rc = store_open(o, true, NULL, &db);
	if (rc) {
		fprintf(stderr, "tips-crashtest: create %s: %s (%s)\n", o->pool, tips_strerror(rc),
			tips_errormsg());
		_exit(CHILD_OPEN_FAILED);
	}
	_exit(bench_index_close(&db) == 0 ? CHILD_OK : CHILD_CLOSE_FAILED);
}

/* A recovery that is crashed (sim: armed at @crash_at); never returns. */
void child_recovery(const struct options *o, struct shared *sh, uint64_t crash_at,
			   uint64_t sim_seed)
{
	struct tips_pool_options popts;
	sim_options(&popts, crash_at, o->evict, sim_seed);
	struct bench_index db;
	int rc = store_open(o, false, o->sim ? &popts : NULL, &db);
	if (rc) {
		fprintf(stderr, "tips-crashtest: recovery child: open %s: %s (%s)\n", o->pool,
			tips_strerror(rc), tips_errormsg());
		_exit(CHILD_OPEN_FAILED);
	}
	sh->recovery_events = tips_pm_persist_events();
	_exit(bench_index_close(&db) == 0 ? CHILD_OK : CHILD_CLOSE_FAILED);
}

