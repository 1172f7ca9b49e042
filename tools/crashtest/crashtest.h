/*
 * crashtest.h - tips-crashtest: crash campaigns against a TIPS index, ListDB or pmdk-hash.
 * What the files of tools/crashtest/ share; the whole design is described here.
 *
 *   tips-crashtest --index NAME --pool PATH --crashes N --mode sigkill|sim
 *                  [--evict P] [--seed S] [--keys K] [--ops M] [--threads T]
 *                  [--pool-size BYTES] [--recovery-crash-share F] [--fresh] [--verbose]
 *                  [--keep-crashed] [--listdb-memtable N] [--listdb-domains D]
 *                  [--batch B]
 *
 * The claim under test (TIPS §3.1, §4.4): every write the facade acknowledged survives
 * any crash, a write in flight at the crash is either wholly applied or not at all, no
 * value appears that was never written, and the heap neither leaks nor doubly owns a
 * block once recovery is done.
 *
 * How. A child process opens the pool and runs a mixed workload (30% insert, 30%
 * update, 20% put, 20% delete) over 8-byte big-endian keys in [0, K), in T writer
 * threads; thread t only touches keys with key % T == t, so each key's operations are
 * sequential and each key has at most one operation in flight. Before each call the
 * thread writes an "intent" message (thread, op, key, value) to a pipe, after it an
 * "ack" (thread, rc); each message is one write() of a small struct, which a pipe keeps
 * whole. Values are unique and self-describing: 8 bytes (key << 32 | seq) or, one write
 * in four, 120 bytes (key, seq, checksum, then bytes made from the checksum, which the
 * verifier checks: a TIPS OLog record of 3 lines that a power failure can tear), so
 * updates change the value's length and the
 * hash index replaces nodes (allocation and deferred free). seq is unique over the whole
 * campaign, so a value names the one intent that wrote it.
 *
 * The parent keeps a model of each key: the last acknowledged state, plus the in-flight
 * operation of the key's thread. It crashes the child:
 *   sigkill  after a number of acks drawn from [1, M], SIGKILL (process crash: what was
 *            stored to the shared mapping survives, unflushed or not);
 *   sim      the child opens the pool on TIPS_MEDIA_SIM armed to lose power at persist
 *            event k, k from [1, E], E the events of a whole run (measured by a
 *            calibration run first, then the maximum of every run that finished); the
 *            file then holds only what was flushed and fenced, plus a share --evict of
 *            the dirty lines. A run that finishes before event k counts as a run, not a
 *            crash; the campaign goes on until N crashes happened (at most 10N+10 runs).
 * With probability --recovery-crash-share the recovery is crashed too: a child opens
 * the pool (sim: armed at an event in [1, events of a recovery], 2000 until one was
 * measured; sigkill: killed after 0-20 ms).
 *
 * Then a verifier child opens the pool normally (its open time is the recovery time)
 * and, before anything else, compares the heap's allocated blocks (tips_heap_walk) with
 * the blocks the database owns (tips_db_walk) and runs tips_heap_check; then it looks up
 * every key and scans the whole index. The parent classifies each key:
 *   lost         the state is neither the acknowledged one nor the in-flight operation's
 *                result, but is a value once written for the key, or absent (an
 *                acknowledged write or delete was undone, or an older value came back);
 *                also a key present by lookup that the scan does not return;
 *   phantom      a value never written for that key (bad length, key, checksum, or a
 *                seq no intent of this key used), a key outside [0, K) or a value that
 *                differs from the lookup in the scan;
 *   leaked       an allocated block the database does not own;
 *   double_free  an owned block the heap holds free, a block owned twice, and every
 *                error tips_heap_check reports.
 * A leaked block stays leaked, so the parent remembers the blocks it counted and each
 * one counts once, at the first check that finds it (likewise an owned free block).
 * The model then takes the state found (the in-flight operation is resolved) and the
 * pool, closed by the verifier, goes on to the next run: state accumulates over the
 * campaign. The acknowledgements of a run are checked too: an insert acknowledged 0
 * on a key the model holds present is a lost key, and so on.
 *
 * The parent never opens the pool: every open happens in a forked child, so no child
 * inherits an open pool, a mapping or a background thread. Results come back through
 * the message pipe and a shared anonymous mapping made before the first fork. A child
 * still running after CHILD_TIMEOUT_S (300 s) is ended by SIGALRM and counts as failed.
 *
 * Output: details of each violation on stderr (crash number, key, expected, found),
 * the seed on stderr, and one line on stdout:
 *   crashes=N lost=L phantom=P leaked=X double_free=D max_recovery_ms=R
 * Exit codes: 0 every count is zero (and N crashes happened); 1 a violation, a child
 * that failed, or fewer crashes than asked; 2 usage error (PATH exists without --fresh).
 * On success the pool file is removed; on failure it is kept for inspection.
 *
 * Batch mode (--batch B, tips-* and listdb). Each thread commits write batches
 * (tips/batch.h) of B puts and deletes on B distinct keys of its own: an intent
 * message per operation, then one ack for the commit. The model holds the whole
 * batch in flight; an ack applies all of it. After a crash every key of an
 * unacknowledged batch may be at its old or its new state, but not some keys at one
 * and some at the other: such a batch counts as torn (a violation, counted with the
 * lost keys and printed as torn=N). Acknowledged batches are checked key by key like
 * single writes: all their values are in place unless later acknowledged writes
 * replaced them.
 *
 * The store. Every child reaches the index through the bench adapter
 * (bench/kit/bench_index.h, the calls tips-bench makes): the TIPS facade for tips-*
 * indexes (public API only, tips/tips.h), or, with --index pmdk-hash, the libpmemobj
 * baseline (src/baselines/pmdk_hash.h), whose crash consistency is libpmemobj's
 * transactions. For pmdk-hash the ownership check compares the pool's objects
 * (pmemobj_first/next) with those reachable from the root (pmdk_hash_check), and the
 * verifier runs pmemobj_check on the closed pool (its errors count as double_free).
 * Only --mode sigkill applies to pmdk-hash: sim mode drops unflushed lines inside
 * libtips's pool layer (src/pm), which libpmemobj does not use (it maps and flushes its
 * pool itself), so sim is refused with a usage error.
 * With --index listdb, the ListDB store (tips/listdb.h), in both modes; its pools are
 * PATH and, with --listdb-domains D, PATH.d1 ... PATH.d(D-1). The workload's insert,
 * update and delete go to the checked calls (tips_listdb_insert/update/remove: a lookup
 * and the write under a per-key lock, returning TIPS_EKEYEXISTS / TIPS_ENOTFOUND as
 * the facade does, which the model checks), put to the blind tips_listdb_put. Every
 * child opens with --listdb-memtable (default 256 entries: a run of 3000 operations
 * seals about a dozen MemTables, which the background thread flushes into L0 tables
 * and Zipper-merges into L1 while the writers go on), so crashes land in flushes,
 * compactions and chunk reclamation, and a crashed recovery in Algorithm 5 itself.
 * SIM media applies to every domain pool; each pool counts its own persist events, and
 * the power fails when the first of them reaches the armed event (the calibration
 * counts the events of all pools, so with D domains about 1/D of the runs crash). The
 * other pools then keep exactly what was flushed and fenced in them (no eviction): a
 * legal failure, if a narrower one. Ownership (bench_index_check): tips_listdb_check()
 * names no block, so a problem it finds counts as one heap error, which the verifier
 * adds to double_free (this tool's count for every inconsistency of the heap or of
 * ownership), with the message printed; it runs after tips_listdb_flush(db, 1), so it,
 * and every lookup and the scan after it, judge the recovered database after the whole
 * merge of what recovery rebuilt (a fixed point).
 *
 * The files (tools/crashtest/): crashtest.h (what they share: options, values,
 * messages, the shared mapping, the model), options.c, store.c (opening the store in a
 * child), workload.c (the workload, create and crashed-recovery children), verify.c
 * (the verifier child), model.c (the parent's model of every key) and campaign.c (the
 * campaign: runs, crashes, verifications; main).
 */
#ifndef TIPS_TOOLS_CRASHTEST_H
#define TIPS_TOOLS_CRASHTEST_H
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <tips/listdb.h>
#include <tips/tips.h>

#include "bench_index.h"
#include "size_arg.h"


enum { EXIT_OK = 0, EXIT_VIOLATION = 1, EXIT_USAGE = 2 };

/* Exit codes of the children (besides the SIM power failure's). */
enum {
	CHILD_OK = 0,
	CHILD_OPEN_FAILED = 3,
	CHILD_OP_FAILED = 4,
	CHILD_CLOSE_FAILED = 5,
	CHILD_NO_THREAD = 6,
	CHILD_PIPE_FAILED = 7,
	CHILD_CHECK_FAILED = 8,
};

#define CRASH_EXIT 86               /* sim_crash_exit_code of every armed pool */
#define SMALL_VALUE 8u              /* key << 32 | seq */
#define LARGE_VALUE 120u            /* key, seq, checksum, then bytes made from the
                                       checksum: a TIPS OLog record of 3 lines, so a
                                       power failure can tear one */
#define LARGE_VALUE_HEAD 24u        /* the key, seq and checksum words */
#define VAL_MAX 32u                 /* bytes of a value the model and the verifier keep */
#define DEFAULT_RECOVERY_EVENTS 2000u
#define MAX_DETAILS 20u             /* detail lines per verification, then a count */
#define MAX_THREADS 64u
#define MAX_BATCH 64u               /* --batch: operations per commit, at most */
#define MAX_NEW_BLOCKS 1024u        /* newly bad blocks one verification hands back */
#define TIPS_LISTDB_POOL_SIZE (128ull << 20) /* listdb's default --pool-size (each domain) */
/* Every child is ended by SIGALRM after this long (a run takes well under a second, a
 * sanitizer build's tens of seconds): a hung child (a cycle in a damaged list, a lost
 * wake-up) then fails the campaign with a message instead of stalling it. */
#define CHILD_TIMEOUT_S 300u


/* ---- options ------------------------------------------------------------------------ */

struct options {
	const char *index_name;
	const char *pool;
	uint64_t crashes;
	bool sim;
	double evict;
	uint64_t seed;
	uint64_t keys;
	uint64_t ops;
	unsigned threads;
	uint64_t pool_size;
	bool pool_size_set;
	double recovery_share;
	uint64_t listdb_memtable; /* listdb: entries per MemTable */
	unsigned listdb_domains;  /* listdb: NUMA domains (pools PATH, PATH.d1, ...) */
	bool fresh;
	bool verbose;
	bool keep_crashed; /* copy the pool after each crash to PATH.crashed */
	unsigned batch;    /* --batch: operations per batch commit (0: single writes) */
	enum bench_kind kind; /* the store --index names (bench_index_kind) */
};


#define PARSE_HELP (-1) /* parse_options(): --help was printed, exit 0 */

/* ---- values, PRNG, time ------------------------------------------------------------- */

/* splitmix64: a small deterministic generator; the whole campaign follows --seed. */
static inline uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static inline uint64_t rng_below(uint64_t *s, uint64_t n)
{
	return n ? rng_next(s) % n : 0;
}

static inline double rng_unit(uint64_t *s)
{
	return (double)(rng_next(s) >> 11) / (double)(1ull << 53);
}

static inline double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static inline void key_encode(uint64_t key, unsigned char out[8])
{
	for (int i = 7; i >= 0; i--, key >>= 8)
		out[i] = (unsigned char)key;
}

static inline uint64_t key_decode(const unsigned char in[8])
{
	uint64_t k = 0;
	for (int i = 0; i < 8; i++)
		k = k << 8 | in[i];
	return k;
}

static inline uint64_t value_checksum(uint64_t key, uint64_t seq)
{
	uint64_t s = key * 0x2545f4914f6cdd1dull ^ seq;
	return rng_next(&s);
}

/* Byte @i (>= LARGE_VALUE_HEAD) of a large value whose checksum word is @sum. */
static inline unsigned char value_tail_byte(uint64_t sum, uint32_t i)
{
	return (unsigned char)((sum >> (8 * (i % 8))) ^ i);
}

/* The value of the write with sequence number @seq to @key, @vlen SMALL_VALUE or
 * LARGE_VALUE bytes. */
static inline void value_make(uint64_t key, uint64_t seq, uint32_t vlen, unsigned char *out)
{
	if (vlen == SMALL_VALUE) {
		uint64_t w = key << 32 | seq;
		memcpy(out, &w, 8);
	} else {
		uint64_t w[3] = { key, seq, value_checksum(key, seq) };
		memcpy(out, w, sizeof(w));
		for (uint32_t i = LARGE_VALUE_HEAD; i < LARGE_VALUE; i++)
			out[i] = value_tail_byte(w[2], i);
	}
}

/* False if a large value's bytes after its head are not the ones value_make wrote
 * (the model keeps only VAL_MAX bytes of a value, so the verifier checks these). */
static inline bool value_tail_ok(const unsigned char *val, uint32_t vlen)
{
	if (vlen != LARGE_VALUE)
		return true;
	uint64_t sum;
	memcpy(&sum, val + 16, 8);
	for (uint32_t i = LARGE_VALUE_HEAD; i < LARGE_VALUE; i++)
		if (val[i] != value_tail_byte(sum, i))
			return false;
	return true;
}

/* Decodes a value found for @key: its seq if it is well formed for @key, else false. */
static inline bool value_decode(uint64_t key, const unsigned char *val, uint32_t vlen, uint64_t *seq)
{
	if (vlen == SMALL_VALUE) {
		uint64_t w;
		memcpy(&w, val, 8);
		*seq = w & 0xffffffffull;
		return w >> 32 == key;
	}
	if (vlen == LARGE_VALUE) { /* the head only: see value_tail_ok */
		uint64_t w[3];
		memcpy(w, val, sizeof(w));
		*seq = w[1];
		return w[0] == key && w[1] <= 0xffffffffull && w[2] == value_checksum(key, w[1]);
	}
	return false;
}


/* ---- messages from a child ---------------------------------------------------------- */

enum op_kind { OP_INSERT = 0, OP_UPDATE = 1, OP_PUT = 2, OP_DELETE = 3 };
static const char *const op_names[] = { "insert", "update", "put", "delete" };

enum msg_kind { MSG_INTENT = 1, MSG_ACK = 2, MSG_DONE = 3 };

/* One message: one write() of 40 bytes, far below PIPE_BUF, so it arrives whole. */
struct msg {
	uint32_t kind;
	uint32_t thread;
	uint32_t op;   /* INTENT: enum op_kind */
	int32_t rc;    /* ACK: what the facade returned */
	uint64_t key;  /* INTENT; DONE: background work during the run (before close) */
	uint64_t seq;  /* INTENT: the value's sequence number; DONE: persist events */
	uint32_t vlen; /* INTENT: SMALL_VALUE or LARGE_VALUE (0 for a delete) */
	uint32_t pad;
};

static inline void msg_send(int fd, const struct msg *m)
{
	ssize_t n;
	do
		n = write(fd, m, sizeof(*m));
	while (n < 0 && errno == EINTR);
	if (n != (ssize_t)sizeof(*m))
		_exit(CHILD_PIPE_FAILED);
}


/* ---- what the children report through shared memory --------------------------------- */

/* One key as the verifier found it. */
struct found_key {
	int32_t rc;            /* 0 present, TIPS_ENOTFOUND absent, another code: failed */
	uint32_t vlen;         /* full length of the value */
	unsigned char val[VAL_MAX]; /* its first VAL_MAX bytes */
};

/* Shared between the parent and its children (MAP_SHARED, made before any fork). */
struct shared {
	/* Written by a recovery child once its open returned (sim: persist events). */
	uint64_t recovery_events;
	/* Written by the verifier. */
	int32_t open_rc;
	double open_ms, stats_recovery_ms;
	int recovered;
	uint64_t leaked, double_free;
	uint64_t scan_phantom, scan_lost;
	uint64_t heap_blocks, owned_blocks;
	/* Blocks found bad for the first time (the parent remembers them, so a leak that
	 * persists is counted once, at the check that found it). */
	uint32_t n_new_leaks, n_new_unowned_free;
	uint64_t new_leaks[MAX_NEW_BLOCKS];
	uint64_t new_unowned_free[MAX_NEW_BLOCKS]; /* owned by the db, free in the heap */
	struct found_key found[]; /* [keys] */
};


/* ---- lists of block addresses (verify.c) ------------------------------------------- */

struct addr_list {
	uint64_t *v;
	size_t n, cap;
};


/* Blocks already reported bad at an earlier check (sorted; inherited through fork). */
struct known_bad {
	struct addr_list leaks, free_owned;
};


/* ---- the parent: model and campaign --------------------------------------------------- */

/* The model of one key. */
struct key_state {
	bool present;
	bool unknown;          /* a contradiction made it unknown: the next check adopts it */
	uint32_t vlen;
	unsigned char val[VAL_MAX];
};

/* An operation a writer thread has in flight (intent without ack). */
struct inflight {
	unsigned op;
	uint64_t key, seq;
	uint32_t vlen;
};

/* Who wrote a sequence number: key + 1 (0: nobody) and the value's length. */
struct seq_owner {
	uint32_t key1;
	uint32_t vlen;
};

struct campaign {
	struct options o;
	struct shared *sh;
	size_t sh_size;
	uint64_t rng;
	struct key_state *model;            /* [keys] */
	struct inflight inflight[MAX_THREADS][MAX_BATCH]; /* each thread's in-flight ops */
	unsigned n_inflight[MAX_THREADS];
	struct seq_owner *written;          /* [seq_cap], indexed by seq */
	uint64_t seq_cap, next_seq;
	uint64_t run_events, recovery_events; /* sim: E and the recovery's events */
	/* results */
	uint64_t runs, crashes, acks, recovery_crashes, finished_runs;
	uint64_t reclamations;              /* background work (store_kind.background) in
					       finished runs, before their close */
	uint64_t lost, phantom, leaked, double_free;
	uint64_t torn;                      /* batches found partly applied (in `lost`) */
	double max_recovery_ms;
	struct known_bad known;             /* blocks counted bad already */
	uint64_t kept_crash;                /* --keep-crashed: the crash of the copy */
	bool failed;                        /* a child failed: the campaign stops */
	unsigned details;                   /* detail lines printed in this verification */
};


/* ---- calls between the files ------------------------------------------------------- */

/* options.c: the command line */
int parse_options(int argc, char **argv, struct options *o);

/* store.c: opening the store in a child */
int store_open(const struct options *o, bool create, const struct tips_pool_options *popts,
		struct bench_index *db);
void sim_options(struct tips_pool_options *p, uint64_t crash_at, double evict,
		uint64_t seed);

/* workload.c: the children that write (each never returns) */
void child_workload(const struct options *o, int fd, bool sim, uint64_t crash_at,
		uint64_t sim_seed, uint64_t seq_base, uint64_t rng_seed);
void child_create(const struct options *o);
void child_recovery(const struct options *o, struct shared *sh, uint64_t crash_at,
		uint64_t sim_seed);

/* verify.c: the verifier child (never returns) and address lists */
void addr_push(struct addr_list *l, uint64_t a);
int cmp_u64(const void *a, const void *b);
void child_verify(const struct options *o, struct shared *sh, uint64_t crash,
		const struct known_bad *known);

/* model.c: the model of every key */
void state_of(struct key_state *s, bool present, const unsigned char *val, uint32_t vlen);
bool state_equal(const struct key_state *a, const struct key_state *b);
void state_describe(uint64_t key, const struct key_state *s, char *out, size_t cap);
void state_after(const struct key_state *before, const struct inflight *f,
		struct key_state *after);
bool value_was_written(const struct campaign *c, uint64_t key, const struct key_state *s);
bool detail_ok(struct campaign *c);
const struct inflight *inflight_on(const struct campaign *c, uint64_t key);
uint64_t read_messages(struct campaign *c, int fd, pid_t child, uint64_t kill_after);

#endif /* TIPS_TOOLS_CRASHTEST_H */
