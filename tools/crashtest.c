/*
 * crashtest.c - tips-crashtest: crash campaigns against a TIPS index through the facade.
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
 * in four, 24 bytes (key, seq, checksum), so updates change the value's length and the
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
 * The store. Every child reaches the index through a small table of operations
 * (struct store_kind): the TIPS facade for tips-* indexes (public API only, tips/tips.h),
 * or, with --index pmdk-hash, the libpmemobj baseline (src/baselines/pmdk_hash.h),
 * whose crash consistency is libpmemobj's transactions. For pmdk-hash the ownership
 * check compares the pool's objects (pmemobj_first/next) with those reachable from the
 * root (pmdk_hash_check), and the verifier runs pmemobj_check on the closed pool (its
 * errors count as double_free). Only --mode sigkill applies to pmdk-hash: sim mode
 * drops unflushed lines inside libtips's pool layer (src/pm), which libpmemobj does not
 * use (it maps and flushes its pool itself), so sim is refused with a usage error.
 * With --index listdb, the ListDB store (tips/listdb.h; see listdb_store below for how
 * its checked writes, its small MemTables and its ownership check map onto the above),
 * in both modes; its pools are PATH and, with --listdb-domains D, PATH.d1 ... PATH.d(D-1).
 */
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

#ifdef TIPS_HAVE_PMDK_HASH
#include "baselines/pmdk_hash.h"
#endif

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
#define LARGE_VALUE 24u             /* key, seq, checksum */
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

struct store_kind;

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
	const struct store_kind *store; /* how children reach the index (from --index) */
};

static const char usage_text[] =
	"usage: tips-crashtest --index NAME --pool PATH --crashes N --mode sigkill|sim\n"
	"                      [--evict P] [--seed S] [--keys K] [--ops M] [--threads T]\n"
	"                      [--pool-size BYTES] [--recovery-crash-share F] [--fresh]\n"
	"                      [--listdb-memtable N] [--listdb-domains D] [--verbose]\n"
	"                      [--keep-crashed] [--batch B]\n"
	"\n"
	"  Crashes a child running a mixed workload on index NAME (e.g. tips-hash) N times,\n"
	"  recovers and checks every key against a model of the acknowledged writes, and\n"
	"  the heap against the blocks the index owns. NAME may also be pmdk-hash (the\n"
	"  libpmemobj baseline; sigkill mode only) or listdb (tips/listdb.h).\n"
	"  --mode sigkill         SIGKILL after a random number of acknowledged writes\n"
	"  --mode sim             simulated power failure at a random persist event\n"
	"  --evict P              sim: share of dirty unflushed lines written back (0.5)\n"
	"  --seed S               PRNG seed (default: from the clock; printed)\n"
	"  --keys K               keys 0..K-1 (2000)\n"
	"  --ops M                operations per child run (3000)\n"
	"  --threads T            writer threads in the child (2)\n"
	"  --pool-size BYTES      pool size, K/M/G suffixes allowed (64M; listdb: of each\n"
	"                         domain pool, 128M)\n"
	"  --recovery-crash-share F  share of crashes whose recovery is crashed too (0.25)\n"
	"  --fresh                remove PATH first if it exists (else it must not exist;\n"
	"                         listdb: also PATH.d1 ...)\n"
	"  --listdb-memtable N    listdb: entries per MemTable (256: every run flushes\n"
	"                         MemTables and runs Zipper compactions)\n"
	"  --listdb-domains D     listdb: NUMA domains, one pool each (1)\n"
	"  --verbose              one line per run on stderr\n"
	"  --keep-crashed         after each crash until the first violation, copy the pool\n"
	"                         as the crash left it to PATH.crashed (listdb: and\n"
	"                         PATH.crashed.d1 ...); kept if the campaign fails, to\n"
	"                         replay the recovery that went wrong\n"
	"  --batch B              commit writes in atomic batches of B puts and deletes\n"
	"                         (1..64; tips-* and listdb); a batch found partly\n"
	"                         applied after a crash counts as torn\n"
	"\n"
	"  prints: crashes=N lost=L phantom=P leaked=X double_free=D max_recovery_ms=R\n"
	"          torn=T (with --batch)\n"
	"  exit codes: 0 no violation, 1 violations or failure, 2 usage error\n";

static int usage(int code)
{
	fputs(usage_text, code ? stderr : stdout);
	return code;
}

static bool parse_u64(const char *s, uint64_t *out)
{
	char *end;
	if (!s || !*s || *s == '-')
		return false;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 0);
	if (errno || *end)
		return false;
	*out = v;
	return true;
}

/* A number with an optional K, M, G or T suffix (powers of 1024). */
static bool parse_size(const char *s, uint64_t *out)
{
	char *end;
	if (!s || !*s || *s == '-')
		return false;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 0);
	if (errno || end == s)
		return false;
	unsigned shift = 0;
	switch (*end) {
	case '\0': break;
	case 'k': case 'K': shift = 10; break;
	case 'm': case 'M': shift = 20; break;
	case 'g': case 'G': shift = 30; break;
	case 't': case 'T': shift = 40; break;
	default: return false;
	}
	if (*end && end[1])
		return false;
	if (shift && v > (UINT64_MAX >> shift))
		return false;
	*out = (uint64_t)v << shift;
	return true;
}

static bool parse_share(const char *s, double *out)
{
	char *end;
	if (!s || !*s)
		return false;
	errno = 0;
	double v = strtod(s, &end);
	if (errno || *end || !(v >= 0.0 && v <= 1.0))
		return false;
	*out = v;
	return true;
}

#define PARSE_HELP (-1) /* parse_options(): --help was printed, exit 0 */

/* Fills @o from the command line: 0, PARSE_HELP, or EXIT_USAGE (message printed). */
static int parse_options(int argc, char **argv, struct options *o)
{
	memset(o, 0, sizeof(*o));
	o->evict = 0.5;
	o->keys = 2000;
	o->ops = 3000;
	o->threads = 2;
	o->pool_size = 64ull << 20;
	o->recovery_share = 0.25;
	o->listdb_memtable = 256;
	o->listdb_domains = 1;
	bool have_seed = false, have_mode = false, have_crashes = false;
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
			usage(EXIT_OK);
			return PARSE_HELP;
		}
		if (strcmp(a, "--fresh") == 0) {
			o->fresh = true;
			continue;
		}
		if (strcmp(a, "--keep-crashed") == 0) {
			o->keep_crashed = true;
			continue;
		}
		if (strcmp(a, "--verbose") == 0 || strcmp(a, "-v") == 0) {
			o->verbose = true;
			continue;
		}
		if (i + 1 >= argc) {
			fprintf(stderr, "tips-crashtest: option '%s' needs a value or is unknown\n", a);
			return EXIT_USAGE;
		}
		const char *v = argv[++i];
		uint64_t n;
		bool ok = true;
		if (strcmp(a, "--index") == 0)
			o->index_name = v;
		else if (strcmp(a, "--pool") == 0)
			o->pool = v;
		else if (strcmp(a, "--crashes") == 0)
			ok = have_crashes = parse_u64(v, &o->crashes);
		else if (strcmp(a, "--mode") == 0) {
			have_mode = true;
			if (strcmp(v, "sim") == 0)
				o->sim = true;
			else if (strcmp(v, "sigkill") != 0)
				ok = false;
		} else if (strcmp(a, "--evict") == 0)
			ok = parse_share(v, &o->evict);
		else if (strcmp(a, "--seed") == 0)
			ok = have_seed = parse_u64(v, &o->seed);
		else if (strcmp(a, "--keys") == 0)
			ok = parse_u64(v, &o->keys);
		else if (strcmp(a, "--ops") == 0)
			ok = parse_u64(v, &o->ops);
		else if (strcmp(a, "--threads") == 0) {
			ok = parse_u64(v, &n) && n >= 1 && n <= MAX_THREADS;
			o->threads = (unsigned)n;
		} else if (strcmp(a, "--pool-size") == 0)
			ok = o->pool_size_set = parse_size(v, &o->pool_size);
		else if (strcmp(a, "--listdb-memtable") == 0)
			ok = parse_u64(v, &o->listdb_memtable) && o->listdb_memtable >= 1;
		else if (strcmp(a, "--listdb-domains") == 0) {
			ok = parse_u64(v, &n) && n >= 1 && n <= TIPS_LISTDB_MAX_DOMAINS;
			o->listdb_domains = (unsigned)n;
		} else if (strcmp(a, "--batch") == 0) {
			ok = parse_u64(v, &n) && n >= 1 && n <= MAX_BATCH;
			o->batch = (unsigned)n;
		} else if (strcmp(a, "--recovery-crash-share") == 0)
			ok = parse_share(v, &o->recovery_share);
		else {
			fprintf(stderr, "tips-crashtest: unknown option '%s'\n", a);
			return usage(EXIT_USAGE);
		}
		if (!ok) {
			fprintf(stderr, "tips-crashtest: bad value '%s' for %s\n", v, a);
			return EXIT_USAGE;
		}
	}
	if (!o->index_name || !o->pool || !have_crashes || !have_mode) {
		fprintf(stderr, "tips-crashtest: --index, --pool, --crashes and --mode are "
			"required\n");
		return usage(EXIT_USAGE);
	}
	if (o->crashes == 0 || o->ops == 0 || o->keys < o->threads || o->keys > (1ull << 31)) {
		fprintf(stderr, "tips-crashtest: need --crashes >= 1, --ops >= 1 and "
			"--threads <= --keys <= 2^31\n");
		return EXIT_USAGE;
	}
	if (!have_seed) {
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		o->seed = (uint64_t)ts.tv_sec * 1000000007ull ^ (uint64_t)ts.tv_nsec ^
			  ((uint64_t)getpid() << 32);
	}
	return 0;
}

/* ---- values, PRNG, time ------------------------------------------------------------- */

/* splitmix64: a small deterministic generator; the whole campaign follows --seed. */
static uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint64_t rng_below(uint64_t *s, uint64_t n)
{
	return n ? rng_next(s) % n : 0;
}

static double rng_unit(uint64_t *s)
{
	return (double)(rng_next(s) >> 11) / (double)(1ull << 53);
}

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static void key_encode(uint64_t key, unsigned char out[8])
{
	for (int i = 7; i >= 0; i--, key >>= 8)
		out[i] = (unsigned char)key;
}

static uint64_t key_decode(const unsigned char in[8])
{
	uint64_t k = 0;
	for (int i = 0; i < 8; i++)
		k = k << 8 | in[i];
	return k;
}

static uint64_t value_checksum(uint64_t key, uint64_t seq)
{
	uint64_t s = key * 0x2545f4914f6cdd1dull ^ seq;
	return rng_next(&s);
}

/* The value of the write with sequence number @seq to @key, @vlen 8 or 24 bytes. */
static void value_make(uint64_t key, uint64_t seq, uint32_t vlen, unsigned char *out)
{
	if (vlen == SMALL_VALUE) {
		uint64_t w = key << 32 | seq;
		memcpy(out, &w, 8);
	} else {
		uint64_t w[3] = { key, seq, value_checksum(key, seq) };
		memcpy(out, w, sizeof(w));
	}
}

/* Decodes a value found for @key: its seq if it is well formed for @key, else false. */
static bool value_decode(uint64_t key, const unsigned char *val, uint32_t vlen, uint64_t *seq)
{
	if (vlen == SMALL_VALUE) {
		uint64_t w;
		memcpy(&w, val, 8);
		*seq = w & 0xffffffffull;
		return w >> 32 == key;
	}
	if (vlen == LARGE_VALUE) {
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
	uint32_t vlen; /* INTENT: 8 or 24 (0 for a delete) */
	uint32_t pad;
};

static void msg_send(int fd, const struct msg *m)
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

/* ---- the store: how a child reaches the index ------------------------------------------ */

/* What a store's ownership check found (tips_db_check, or pmdk_hash_check). */
struct store_report {
	uint64_t allocated, owned; /* blocks allocated in the heap / owned by the index */
	uint64_t heap_errors;      /* the heap's own inconsistencies */
	char first_error[200];     /* the first of them ("" if none) */
};

/* One problem block (@block: an address or a pool offset, stable while the pool is). */
typedef void (*store_problem_fn)(enum tips_block_problem what, uint64_t block,
				 size_t size, void *arg);

/*
 * A store kind: the TIPS facade over a tips-* index, or pmdk-hash. Codes as the
 * facade's; open creates with @create and opens SIM media with @popts (facade only).
 */
struct store_kind {
	const char *name;  /* for messages */
	const char *background; /* what stats() counts as background work (plural noun) */
	bool sim_capable;  /* its persistence goes through libtips's pool layer */
	int (*open)(const struct options *o, bool create, const struct tips_pool_options *popts,
		    void **s);
	int (*close)(void **s);
	int (*insert)(void *s, const void *k, size_t kl, const void *v, size_t vl);
	int (*update)(void *s, const void *k, size_t kl, const void *v, size_t vl);
	int (*put)(void *s, const void *k, size_t kl, const void *v, size_t vl);
	int (*remove)(void *s, const void *k, size_t kl);
	int (*lookup)(void *s, const void *k, size_t kl, void *v, size_t cap, size_t *vl);
	long (*scan)(void *s, const void *start, size_t kl, size_t count, tips_scan_fn fn,
		     void *arg);
	/* Commits a write batch (NULL: the store has none; --batch is refused). */
	int (*batch)(void *s, struct tips_batch *b);
	/* background work so far (reclamations; listdb: Zipper compactions), the recovery
	 * time its open measured, whether it recovered */
	void (*stats)(void *s, uint64_t *background, double *recovery_ms, int *recovered);
	/* Ownership: every allocated block owned once. 0, TIPS_ECORRUPT (problems found,
	 * each passed to @fn), or another code. */
	int (*check)(void *s, store_problem_fn fn, void *arg, struct store_report *rep);
	/* After close (NULL: nothing): the closed pool's own consistency check; 0 or a
	 * code, message in tips_errormsg(). */
	int (*check_closed)(const struct options *o);
};

static void config_for(const struct options *o, struct tips_config *cfg,
		       const struct tips_pool_options *popts)
{
	tips_config_init(cfg);
	cfg->pool_size = o->pool_size;
	cfg->expected_keys = o->keys;
	cfg->pool = popts;
}

static int facade_open(const struct options *o, bool create,
		       const struct tips_pool_options *popts, void **s)
{
	struct tips_config cfg;
	config_for(o, &cfg, popts);
	if (create)
		cfg.flags = TIPS_CREATE;
	struct tips_db *db = NULL;
	int rc = tips_open(o->pool, &cfg, tips_index_find(o->index_name), &db);
	*s = db;
	return rc;
}

static int facade_close(void **s)
{
	struct tips_db *db = *s;
	int rc = tips_close(&db);
	*s = db;
	return rc;
}

static int facade_insert(void *s, const void *k, size_t kl, const void *v, size_t vl)
{
	return tips_insert(s, k, kl, v, vl);
}

static int facade_update(void *s, const void *k, size_t kl, const void *v, size_t vl)
{
	return tips_update(s, k, kl, v, vl);
}

static int facade_put(void *s, const void *k, size_t kl, const void *v, size_t vl)
{
	return tips_put(s, k, kl, v, vl);
}

static int facade_remove(void *s, const void *k, size_t kl)
{
	return tips_remove(s, k, kl);
}

static int facade_lookup(void *s, const void *k, size_t kl, void *v, size_t cap, size_t *vl)
{
	return tips_get(s, k, kl, v, cap, vl);
}

static int facade_batch(void *s, struct tips_batch *b)
{
	return tips_batch_commit(s, b);
}

static long facade_scan(void *s, const void *start, size_t kl, size_t count, tips_scan_fn fn,
			void *arg)
{
	return tips_scan(s, start, kl, count, fn, arg);
}

static void facade_stats(void *s, uint64_t *reclamations, double *recovery_ms, int *recovered)
{
	struct tips_stats st;
	tips_stats(s, &st);
	*reclamations = st.reclamations;
	*recovery_ms = st.recovery_ms;
	*recovered = st.recovered;
}

struct problem_relay {
	store_problem_fn fn;
	void *arg;
};

static void facade_problem(enum tips_block_problem what, const void *block, size_t size,
			   void *arg)
{
	struct problem_relay *r = arg;
	r->fn(what, (uint64_t)(uintptr_t)block, size, r->arg);
}

static int facade_check(void *s, store_problem_fn fn, void *arg, struct store_report *rep)
{
	struct tips_db_report dr;
	struct problem_relay relay = { fn, arg };
	memset(&dr, 0, sizeof(dr));
	int rc = tips_db_check(s, facade_problem, &relay, &dr);
	memset(rep, 0, sizeof(*rep));
	rep->allocated = dr.blocks_allocated;
	rep->owned = dr.blocks_owned;
	rep->heap_errors = dr.heap.errors;
	snprintf(rep->first_error, sizeof(rep->first_error), "%s", dr.heap.first_error);
	return rc;
}

static const struct store_kind facade_store = {
	.name = "the TIPS facade",
	.background = "reclamations",
	.sim_capable = true,
	.open = facade_open,
	.close = facade_close,
	.insert = facade_insert,
	.update = facade_update,
	.put = facade_put,
	.remove = facade_remove,
	.lookup = facade_lookup,
	.scan = facade_scan,
	.batch = facade_batch,
	.stats = facade_stats,
	.check = facade_check,
	.check_closed = NULL,
};

#ifdef TIPS_HAVE_PMDK_HASH
static int pmdk_open(const struct options *o, bool create,
		     const struct tips_pool_options *popts, void **s)
{
	(void)popts; /* never SIM: refused by main */
	struct pmdk_hash_config cfg = { create ? PMDK_HASH_CREATE : 0, o->pool_size, o->keys };
	struct pmdk_hash *h = NULL;
	int rc = pmdk_hash_open(o->pool, &cfg, &h);
	*s = h;
	return rc;
}

static int pmdk_close(void **s)
{
	struct pmdk_hash *h = *s;
	pmdk_hash_close(&h); /* every write is durable already */
	*s = NULL;
	return 0;
}

static int pmdk_insert(void *s, const void *k, size_t kl, const void *v, size_t vl)
{
	return pmdk_hash_insert(s, k, kl, v, vl);
}

static int pmdk_update(void *s, const void *k, size_t kl, const void *v, size_t vl)
{
	return pmdk_hash_update(s, k, kl, v, vl);
}

static int pmdk_put(void *s, const void *k, size_t kl, const void *v, size_t vl)
{
	return pmdk_hash_put(s, k, kl, v, vl);
}

static int pmdk_remove(void *s, const void *k, size_t kl)
{
	return pmdk_hash_remove(s, k, kl);
}

static int pmdk_lookup(void *s, const void *k, size_t kl, void *v, size_t cap, size_t *vl)
{
	return pmdk_hash_lookup(s, k, kl, v, cap, vl);
}

static long pmdk_scan(void *s, const void *start, size_t kl, size_t count, tips_scan_fn fn,
		      void *arg)
{
	return pmdk_hash_scan(s, start, kl, count, fn, arg);
}

static void pmdk_stats(void *s, uint64_t *reclamations, double *recovery_ms, int *recovered)
{
	(void)s; /* libpmemobj recovers inside pmemobj_open and says nothing of it */
	*reclamations = 0;
	*recovery_ms = 0;
	*recovered = -1;
}

static int pmdk_check(void *s, store_problem_fn fn, void *arg, struct store_report *rep)
{
	struct pmdk_hash_report pr;
	memset(&pr, 0, sizeof(pr));
	int rc = pmdk_hash_check(s, fn, arg, &pr);
	memset(rep, 0, sizeof(*rep));
	rep->allocated = pr.objects;
	rep->owned = pr.reachable;
	return rc;
}

static int pmdk_check_closed(const struct options *o)
{
	return pmdk_hash_check_file(o->pool); /* libpmemobj's pmemobj_check */
}

static const struct store_kind pmdk_store = {
	.name = "pmdk-hash (libpmemobj)",
	.background = "reclamations",
	.sim_capable = false,
	.open = pmdk_open,
	.close = pmdk_close,
	.insert = pmdk_insert,
	.update = pmdk_update,
	.put = pmdk_put,
	.remove = pmdk_remove,
	.lookup = pmdk_lookup,
	.scan = pmdk_scan,
	.stats = pmdk_stats,
	.check = pmdk_check,
	.check_closed = pmdk_check_closed,
};
#endif

/*
 * listdb (tips/listdb.h). The workload's insert, update and delete go to the checked
 * calls (tips_listdb_insert/update/remove: a lookup and the write under a per-key lock,
 * returning TIPS_EKEYEXISTS / TIPS_ENOTFOUND as the facade does, which the model
 * checks), put to the blind tips_listdb_put. Every child opens with --listdb-memtable
 * (default 256 entries: a run of 3000 operations seals about a dozen MemTables, which
 * the background thread flushes into L0 tables and Zipper-merges into L1 while the
 * writers go on), so crashes land in flushes, compactions and chunk reclamation, and a
 * crashed recovery in Algorithm 5 itself.
 * SIM media (cfg.pool) applies to every domain pool; each pool counts its own persist
 * events, and the power fails when the first of them reaches the armed event (the
 * calibration counts the events of all pools, so with D domains about 1/D of the runs
 * crash). The other pools then keep exactly what was flushed and fenced in them (no
 * eviction): a legal failure, if a narrower one.
 * Ownership: tips_listdb_check() verifies that every list of L1 and L0 is sorted at every
 * layer and braided right, that every element lies in a live chunk with a valid
 * checksum, and that the heap of every domain pool holds exactly the chunks the root
 * slots own (log chunks are the only blocks ListDB allocates). It reports counts, not
 * blocks: allocated = heap_blocks (allocated blocks of all domain pools), owned =
 * chunks (blocks owned by chunk slots); on success the two are equal. A problem is
 * TIPS_ECORRUPT with one message and no block (and no counts), so it cannot be told
 * apart as a leak or a double ownership here: it counts as one heap error, which the
 * caller adds to double_free (this tool's count for every inconsistency of the heap or
 * of ownership), with the message printed. The problem callback is never called.
 * Recovery leaves the recovered tables in L0 (and redoes an interrupted compaction);
 * the background thread merges them at once. The check first waits with
 * tips_listdb_flush(db, 1) until every table is merged into L1 and chunk reclamation is
 * done, so that it, and every lookup and the scan after it, judge the recovered
 * database after the whole merge of what recovery rebuilt (a fixed point, rather than
 * wherever the background thread happens to be; tips_listdb_check() itself holds the
 * compaction lock, so it would be safe at any point).
 */
static int ldb_open(const struct options *o, bool create, const struct tips_pool_options *popts,
		    void **s)
{
	struct tips_listdb_config cfg;
	tips_listdb_config_init(&cfg);
	cfg.flags = create ? TIPS_LISTDB_CREATE : 0;
	cfg.pool_size = o->pool_size;
	cfg.expected_keys = o->keys;
	cfg.domains = o->listdb_domains;
	cfg.memtable_entries = o->listdb_memtable;
	cfg.pool = popts;
	struct tips_listdb *db = NULL;
	int rc = tips_listdb_open(o->pool, &cfg, &db);
	*s = db;
	return rc;
}

static int ldb_close(void **s)
{
	struct tips_listdb *db = *s;
	int rc = tips_listdb_close(&db);
	*s = db;
	return rc;
}

static int ldb_insert(void *s, const void *k, size_t kl, const void *v, size_t vl)
{
	return tips_listdb_insert(s, k, kl, v, vl);
}

static int ldb_update(void *s, const void *k, size_t kl, const void *v, size_t vl)
{
	return tips_listdb_update(s, k, kl, v, vl);
}

static int ldb_put(void *s, const void *k, size_t kl, const void *v, size_t vl)
{
	return tips_listdb_put(s, k, kl, v, vl);
}

static int ldb_remove(void *s, const void *k, size_t kl)
{
	return tips_listdb_remove(s, k, kl);
}

static int ldb_lookup(void *s, const void *k, size_t kl, void *v, size_t cap, size_t *vl)
{
	return tips_listdb_get(s, k, kl, v, cap, vl);
}

static int ldb_batch(void *s, struct tips_batch *b)
{
	return tips_listdb_batch_commit(s, b);
}

static long ldb_scan(void *s, const void *start, size_t kl, size_t count, tips_scan_fn fn,
		     void *arg)
{
	return tips_listdb_scan(s, start, kl, count, fn, arg);
}

static void ldb_stats(void *s, uint64_t *background, double *recovery_ms, int *recovered)
{
	struct tips_listdb_stats st;
	tips_listdb_stats(s, &st);
	*background = st.compactions;
	*recovery_ms = st.recovery_ms;
	*recovered = st.recovered;
}

static int ldb_check(void *s, store_problem_fn fn, void *arg, struct store_report *rep)
{
	(void)fn, (void)arg; /* tips_listdb_check() names no block (see above) */
	memset(rep, 0, sizeof(*rep));
	int rc = tips_listdb_flush(s, 1); /* everything recovered merged into L1 (see above) */
	if (rc)
		return rc;
	struct tips_listdb_report lr;
	memset(&lr, 0, sizeof(lr));
	rc = tips_listdb_check(s, &lr);
	rep->allocated = lr.heap_blocks;
	rep->owned = lr.chunks;
	if (rc == TIPS_ECORRUPT) {
		rep->heap_errors = 1;
		snprintf(rep->first_error, sizeof(rep->first_error), "tips_listdb_check: %s",
			 tips_errormsg());
		return 0; /* counted as a heap error, not a failure of the check itself */
	}
	return rc;
}

static const struct store_kind listdb_store = {
	.name = "listdb",
	.background = "Zipper compactions",
	.sim_capable = true,
	.open = ldb_open,
	.close = ldb_close,
	.insert = ldb_insert,
	.update = ldb_update,
	.put = ldb_put,
	.remove = ldb_remove,
	.lookup = ldb_lookup,
	.scan = ldb_scan,
	.batch = ldb_batch,
	.stats = ldb_stats,
	.check = ldb_check,
	.check_closed = NULL,
};

/* ---- opening in a child ---------------------------------------------------------------- */

#define LOCK_WAIT_MS 5000u /* how long a child waits for a dead child's pool lock */

/*
 * Opens the store as st->open does, but waits up to LOCK_WAIT_MS while the pool is
 * locked (TIPS_ELOCKED). Only the previous child, already reaped, can hold it: its
 * flock lives as long as the open file, which its mapping of the pool keeps open, and
 * the kernel may drop that mapping after the process is gone (whoever else holds the
 * address space a moment, such as a `ps` reading /proc/PID/cmdline, puts it last). A
 * lock still held after the wait is reported.
 */
static int store_open(const struct store_kind *st, const struct options *o, bool create,
		      const struct tips_pool_options *popts, void **db)
{
	for (unsigned waited = 0;; waited += 10) {
		int rc = st->open(o, create, popts, db);
		if (rc != TIPS_ELOCKED || waited >= LOCK_WAIT_MS)
			return rc;
		struct timespec ts = { 0, 10 * 1000000 };
		nanosleep(&ts, NULL);
	}
}

/* ---- the workload child -------------------------------------------------------------- */

struct worker {
	const struct store_kind *st;
	void *db;
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
		int rc = w->st->batch(w->db, b);
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
		case OP_INSERT: rc = w->st->insert(w->db, k, 8, v, vlen); break;
		case OP_UPDATE: rc = w->st->update(w->db, k, 8, v, vlen); break;
		case OP_PUT: rc = w->st->put(w->db, k, 8, v, vlen); break;
		default: rc = w->st->remove(w->db, k, 8); break;
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

static void sim_options(struct tips_pool_options *p, uint64_t crash_at, double evict,
			uint64_t seed)
{
	tips_pool_options_init(p);
	p->media = TIPS_MEDIA_SIM;
	p->sim_crash_at = crash_at;
	p->sim_evict = evict;
	p->sim_seed = seed;
	p->sim_crash_exit_code = CRASH_EXIT;
}

/* Runs the workload; never returns. SIM media when @sim (armed at @crash_at, 0: never). */
static void child_workload(const struct options *o, int fd, bool sim, uint64_t crash_at,
			   uint64_t sim_seed, uint64_t seq_base, uint64_t rng_seed)
{
	struct tips_pool_options popts;
	sim_options(&popts, crash_at, o->evict, sim_seed);
	const struct store_kind *st = o->store;
	void *db;
	int rc = store_open(st, o, false, sim ? &popts : NULL, &db);
	if (rc) {
		fprintf(stderr, "tips-crashtest: child: open %s: %s (%s)\n", o->pool,
			tips_strerror(rc), tips_errormsg());
		_exit(CHILD_OPEN_FAILED);
	}
	struct worker w[MAX_THREADS];
	pthread_t tid[MAX_THREADS];
	for (unsigned t = 0; t < o->threads; t++) {
		w[t] = (struct worker){ st, db, fd, t, o->threads, o->keys,
					o->ops / o->threads + (t < o->ops % o->threads), seq_base,
					rng_seed ^ (0x100000001b3ull * (t + 1)), o->batch };
		if (pthread_create(&tid[t], NULL, worker_main, &w[t]) != 0)
			_exit(CHILD_NO_THREAD);
	}
	for (unsigned t = 0; t < o->threads; t++)
		pthread_join(tid[t], NULL);
	uint64_t reclamations;
	double recovery_ms;
	int recovered;
	st->stats(db, &reclamations, &recovery_ms, &recovered);
	if (st->close(&db) != 0)
		_exit(CHILD_CLOSE_FAILED);
	struct msg d = { .kind = MSG_DONE, .key = reclamations,
			 .seq = tips_pm_persist_events() };
	msg_send(fd, &d);
	_exit(CHILD_OK);
}

/* Creates the pool and the index; never returns. */
static void child_create(const struct options *o)
{
	void *db;
	int rc = store_open(o->store, o, true, NULL, &db);
	if (rc) {
		fprintf(stderr, "tips-crashtest: create %s: %s (%s)\n", o->pool, tips_strerror(rc),
			tips_errormsg());
		_exit(CHILD_OPEN_FAILED);
	}
	_exit(o->store->close(&db) == 0 ? CHILD_OK : CHILD_CLOSE_FAILED);
}

/* A recovery that is crashed (sim: armed at @crash_at); never returns. */
static void child_recovery(const struct options *o, struct shared *sh, uint64_t crash_at,
			   uint64_t sim_seed)
{
	struct tips_pool_options popts;
	sim_options(&popts, crash_at, o->evict, sim_seed);
	void *db;
	int rc = store_open(o->store, o, false, o->sim ? &popts : NULL, &db);
	if (rc) {
		fprintf(stderr, "tips-crashtest: recovery child: open %s: %s (%s)\n", o->pool,
			tips_strerror(rc), tips_errormsg());
		_exit(CHILD_OPEN_FAILED);
	}
	sh->recovery_events = tips_pm_persist_events();
	_exit(o->store->close(&db) == 0 ? CHILD_OK : CHILD_CLOSE_FAILED);
}

/* ---- the verifier child ---------------------------------------------------------------- */

struct addr_list {
	uint64_t *v;
	size_t n, cap;
};

static void addr_push(struct addr_list *l, uint64_t a)
{
	if (l->n == l->cap) {
		l->cap = l->cap ? l->cap * 2 : 4096;
		l->v = realloc(l->v, l->cap * sizeof(*l->v));
		if (!l->v)
			_exit(CHILD_CHECK_FAILED);
	}
	l->v[l->n++] = a;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

static bool addr_find(const struct addr_list *l, uint64_t a, size_t *at)
{
	size_t lo = 0, hi = l->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (l->v[mid] < a)
			lo = mid + 1;
		else
			hi = mid;
	}
	*at = lo;
	return lo < l->n && l->v[lo] == a;
}

/* Blocks already reported bad at an earlier check (sorted; inherited through fork). */
struct known_bad {
	struct addr_list leaks, free_owned;
};

struct ownership_check {
	struct shared *sh;
	uint64_t crash;
	const struct known_bad *known;
	unsigned details;
};

/* One problem block from the store's check (tips_db_check, pmdk_hash_check); a block in
 * the known lists was counted by an earlier check and is not counted again. */
static void ownership_problem(enum tips_block_problem what, uint64_t a, size_t size,
			      void *arg)
{
	struct ownership_check *c = arg;
	struct shared *sh = c->sh;
	size_t k;
	const char *why;
	if (what == TIPS_BLOCK_LEAKED) {
		if (addr_find(&c->known->leaks, a, &k))
			return;
		if (sh->n_new_leaks < MAX_NEW_BLOCKS)
			sh->new_leaks[sh->n_new_leaks++] = a;
		sh->leaked++;
		why = "leaked: allocated, owned by nobody";
	} else if (what == TIPS_BLOCK_FREE_BUT_OWNED) {
		if (addr_find(&c->known->free_owned, a, &k))
			return;
		if (sh->n_new_unowned_free < MAX_NEW_BLOCKS)
			sh->new_unowned_free[sh->n_new_unowned_free++] = a;
		sh->double_free++;
		why = "double_free: owned by the database, free in the heap";
	} else {
		sh->double_free++;
		why = "double_free: owned twice by the database";
	}
	if (c->details++ < MAX_DETAILS)
		fprintf(stderr, "crash %llu: %s: block %#llx (%zu bytes)\n",
			(unsigned long long)c->crash, why, (unsigned long long)a, size);
}

/* Heap blocks against owned blocks, and the heap's own check; counts into @sh. */
static void check_ownership(const struct store_kind *st, void *db, struct shared *sh,
			    uint64_t crash, const struct known_bad *known)
{
	struct ownership_check c = { sh, crash, known, 0 };
	struct store_report rep;
	int rc = st->check(db, ownership_problem, &c, &rep);
	if (rc && rc != TIPS_ECORRUPT) {
		fprintf(stderr, "crash %llu: ownership check: %s\n", (unsigned long long)crash,
			tips_errormsg());
		_exit(CHILD_CHECK_FAILED);
	}
	sh->heap_blocks = rep.allocated;
	sh->owned_blocks = rep.owned;
	if (c.details > MAX_DETAILS)
		fprintf(stderr, "crash %llu: ... %u more ownership violation(s)\n",
			(unsigned long long)crash, c.details - MAX_DETAILS);
	if (rep.heap_errors) {
		fprintf(stderr, "crash %llu: double_free: the heap check found %llu error(s), "
			"first: %s\n", (unsigned long long)crash, (unsigned long long)rep.heap_errors,
			rep.first_error);
		sh->double_free += rep.heap_errors;
	}
}

struct scan_state {
	struct shared *sh;
	uint64_t keys, crash, seen;
	unsigned char *returned; /* [keys] */
	unsigned details;
};

static int scan_visit(const void *key, size_t klen, const void *val, size_t vlen, void *arg)
{
	struct scan_state *s = arg;
	s->seen++;
	uint64_t k = klen == 8 ? key_decode(key) : UINT64_MAX;
	if (klen != 8 || k >= s->keys) {
		if (s->details++ < MAX_DETAILS)
			fprintf(stderr, "crash %llu: phantom: the scan returned a key of %zu bytes "
				"(%#llx as 8 bytes), outside [0, %llu)\n",
				(unsigned long long)s->crash, klen,
				(unsigned long long)(klen == 8 ? k : 0), (unsigned long long)s->keys);
		s->sh->scan_phantom++;
		return 0;
	}
	const struct found_key *f = &s->sh->found[k];
	if (s->returned[k]++) {
		if (s->details++ < MAX_DETAILS)
			fprintf(stderr, "crash %llu: phantom: the scan returned key %llu twice\n",
				(unsigned long long)s->crash, (unsigned long long)k);
		s->sh->scan_phantom++;
	} else if (f->rc != 0 || f->vlen != vlen ||
		   memcmp(f->val, val, vlen < VAL_MAX ? vlen : VAL_MAX) != 0) {
		if (s->details++ < MAX_DETAILS)
			fprintf(stderr, "crash %llu: phantom: key %llu: the scan returned a value "
				"of %zu bytes the lookup %s\n", (unsigned long long)s->crash,
				(unsigned long long)k, vlen,
				f->rc ? "does not find" : "returns otherwise");
		s->sh->scan_phantom++;
	}
	return 0;
}

/* Recovers the pool, checks ownership, reads every key; never returns. */
static void child_verify(const struct options *o, struct shared *sh, uint64_t crash,
			 const struct known_bad *known)
{
	const struct store_kind *st = o->store;
	void *db;
	double t0 = now_ms();
	int rc = store_open(st, o, false, NULL, &db);
	sh->open_ms = now_ms() - t0;
	sh->open_rc = rc;
	if (rc) {
		fprintf(stderr, "crash %llu: recovery failed: open %s: %s (%s)\n",
			(unsigned long long)crash, o->pool, tips_strerror(rc), tips_errormsg());
		_exit(CHILD_OPEN_FAILED);
	}
	uint64_t reclamations;
	st->stats(db, &reclamations, &sh->stats_recovery_ms, &sh->recovered);
	check_ownership(st, db, sh, crash, known); /* before anything else touches the index */
	for (uint64_t k = 0; k < o->keys; k++) {
		unsigned char kb[8];
		key_encode(k, kb);
		struct found_key *f = &sh->found[k];
		size_t vlen = 0;
		unsigned char buf[TIPS_MAX_VALUE < 4096 ? TIPS_MAX_VALUE : 4096];
		f->rc = st->lookup(db, kb, 8, buf, sizeof(buf), &vlen);
		if (f->rc == TIPS_ESIZE)
			f->rc = 0; /* longer than the buffer: still a (wrong) value */
		f->vlen = f->rc == 0 ? (uint32_t)vlen : 0;
		memset(f->val, 0, VAL_MAX);
		if (f->rc == 0)
			memcpy(f->val, buf, vlen < VAL_MAX ? vlen : VAL_MAX);
	}
	struct scan_state s = { sh, o->keys, crash, 0, calloc(o->keys, 1), 0 };
	if (!s.returned)
		_exit(CHILD_CHECK_FAILED);
	long n = st->scan(db, NULL, 0, (size_t)o->keys * 2 + 1024, scan_visit, &s);
	if (n < 0) {
		fprintf(stderr, "crash %llu: scan: %s (%s)\n", (unsigned long long)crash,
			tips_strerror((int)n), tips_errormsg());
		_exit(CHILD_CHECK_FAILED);
	}
	for (uint64_t k = 0; k < o->keys; k++)
		if (sh->found[k].rc == 0 && !s.returned[k]) {
			if (s.details++ < MAX_DETAILS)
				fprintf(stderr, "crash %llu: lost: key %llu is found by lookup but "
					"not by the scan\n", (unsigned long long)crash,
					(unsigned long long)k);
			sh->scan_lost++;
		}
	free(s.returned);
	if (st->close(&db) != 0)
		_exit(CHILD_CLOSE_FAILED);
	if (st->check_closed && (rc = st->check_closed(o)) != 0) {
		if (rc != TIPS_ECORRUPT) {
			fprintf(stderr, "crash %llu: pool check: %s\n", (unsigned long long)crash,
				tips_errormsg());
			_exit(CHILD_CHECK_FAILED);
		}
		fprintf(stderr, "crash %llu: double_free: %s\n", (unsigned long long)crash,
			tips_errormsg());
		sh->double_free++;
	}
	_exit(CHILD_OK);
}

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

static void state_of(struct key_state *s, bool present, const unsigned char *val,
		     uint32_t vlen)
{
	memset(s, 0, sizeof(*s));
	s->present = present;
	if (present) {
		s->vlen = vlen;
		memcpy(s->val, val, vlen < VAL_MAX ? vlen : VAL_MAX);
	}
}

static bool state_equal(const struct key_state *a, const struct key_state *b)
{
	if (a->present != b->present)
		return false;
	return !a->present || (a->vlen == b->vlen &&
			       memcmp(a->val, b->val, a->vlen < VAL_MAX ? a->vlen : VAL_MAX) == 0);
}

static void state_describe(uint64_t key, const struct key_state *s, char *out, size_t cap)
{
	uint64_t seq;
	if (!s->present) {
		snprintf(out, cap, "absent");
	} else if (value_decode(key, s->val, s->vlen, &seq)) {
		snprintf(out, cap, "value seq=%llu len=%u", (unsigned long long)seq, s->vlen);
	} else {
		int n = snprintf(out, cap, "undecodable value len=%u bytes=", s->vlen);
		for (uint32_t i = 0; i < s->vlen && i < VAL_MAX && n > 0 && (size_t)n + 3 < cap; i++)
			n += snprintf(out + n, cap - (size_t)n, "%02x", s->val[i]);
	}
}

/* The state after @f's operation is applied to @before (it succeeds or fails on it). */
static void state_after(const struct key_state *before, const struct inflight *f,
			struct key_state *after)
{
	unsigned char v[LARGE_VALUE];
	*after = *before;
	switch (f->op) {
	case OP_INSERT:
		if (before->present)
			return;
		break;
	case OP_UPDATE:
		if (!before->present)
			return;
		break;
	case OP_DELETE:
		state_of(after, false, NULL, 0);
		return;
	default:
		break;
	}
	value_make(f->key, f->seq, f->vlen, v);
	state_of(after, true, v, f->vlen);
}

static void seq_record(struct campaign *c, uint64_t seq, uint64_t key, uint32_t vlen)
{
	if (seq >= c->seq_cap) {
		uint64_t cap = c->seq_cap ? c->seq_cap : 1u << 16;
		while (cap <= seq)
			cap *= 2;
		struct seq_owner *w = realloc(c->written, cap * sizeof(*w));
		if (!w) {
			fprintf(stderr, "tips-crashtest: out of memory\n");
			exit(EXIT_VIOLATION);
		}
		memset(w + c->seq_cap, 0, (cap - c->seq_cap) * sizeof(*w));
		c->written = w;
		c->seq_cap = cap;
	}
	c->written[seq] = (struct seq_owner){ (uint32_t)(key + 1), vlen };
}

/* True if @s is a value some intent wrote for @key. */
static bool value_was_written(const struct campaign *c, uint64_t key, const struct key_state *s)
{
	uint64_t seq;
	if (!s->present || !value_decode(key, s->val, s->vlen, &seq))
		return false;
	return seq < c->seq_cap && c->written[seq].key1 == key + 1 &&
	       c->written[seq].vlen == s->vlen;
}

static bool detail_ok(struct campaign *c)
{
	return c->details++ < MAX_DETAILS;
}

/* Applies the acknowledged operation @f with result @rc to the model. A result the
 * model contradicts means the live database disagreed with it. */
static void model_apply(struct campaign *c, const struct inflight *f, int rc)
{
	struct key_state *s = &c->model[f->key];
	const char *contradiction = NULL;
	bool as_lost = false;
	if (rc == 0) {
		if (!s->unknown) {
			if (f->op == OP_INSERT && s->present)
				contradiction = "insert succeeded on a present key", as_lost = true;
			else if ((f->op == OP_UPDATE || (f->op == OP_DELETE && !c->o.batch)) &&
				 !s->present) /* a batch's delete is blind */
				contradiction = "succeeded on an absent key";
		}
		struct key_state before = *s;
		before.present = f->op == OP_UPDATE || f->op == OP_DELETE; /* as the db saw it */
		state_after(&before, f, s);
	} else if (rc == TIPS_EKEYEXISTS && f->op == OP_INSERT) {
		if (!s->unknown && !s->present)
			contradiction = "insert found an absent key present";
		if (!s->present)
			s->unknown = true;
	} else if (rc == TIPS_ENOTFOUND && (f->op == OP_UPDATE || f->op == OP_DELETE)) {
		if (!s->unknown && s->present)
			contradiction = "found a present key absent", as_lost = true;
		state_of(s, false, NULL, 0);
	} else {
		fprintf(stderr, "run %llu: %s of key %llu returned %s\n",
			(unsigned long long)c->runs, op_names[f->op], (unsigned long long)f->key,
			tips_strerror(rc));
		c->failed = true;
		return;
	}
	if (contradiction) {
		fprintf(stderr, "run %llu (after crash %llu): %s: key %llu: %s %s (seq %llu)\n",
			(unsigned long long)c->runs, (unsigned long long)c->crashes,
			as_lost ? "lost" : "phantom", (unsigned long long)f->key,
			op_names[f->op], contradiction, (unsigned long long)f->seq);
		if (as_lost)
			c->lost++;
		else
			c->phantom++;
	}
}

/* An ack: applies every in-flight operation of @thread (one, or a batch) with result
 * @rc to the model. */
static void model_ack(struct campaign *c, uint32_t thread, int rc)
{
	if (thread >= c->o.threads || c->n_inflight[thread] == 0) {
		fprintf(stderr, "tips-crashtest: protocol: ack without intent (thread %u)\n",
			thread);
		c->failed = true;
		return;
	}
	c->acks++;
	for (unsigned i = 0; i < c->n_inflight[thread] && !c->failed; i++)
		model_apply(c, &c->inflight[thread][i], rc);
	c->n_inflight[thread] = 0;
}

/* The in-flight operation on @key, or NULL. */
static const struct inflight *inflight_on(const struct campaign *c, uint64_t key)
{
	unsigned t = (unsigned)(key % c->o.threads);
	for (unsigned i = 0; i < c->n_inflight[t]; i++)
		if (c->inflight[t][i].key == key)
			return &c->inflight[t][i];
	return NULL;
}

/* Reads the child's messages until EOF; SIGKILLs it after @kill_after acks (0: never).
 * Returns the persist events the child reported at its end (0 if it did not finish). */
static uint64_t read_messages(struct campaign *c, int fd, pid_t child, uint64_t kill_after)
{
	uint64_t acks = 0, events = 0;
	struct msg m;
	size_t have = 0;
	for (;;) {
		ssize_t n = read(fd, (char *)&m + have, sizeof(m) - have);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			perror("tips-crashtest: read");
			c->failed = true;
			break;
		}
		if (n == 0)
			break;
		have += (size_t)n;
		if (have < sizeof(m))
			continue;
		have = 0;
		if (m.kind == MSG_INTENT) {
			unsigned most = c->o.batch ? c->o.batch : 1;
			if (m.thread >= c->o.threads || m.key >= c->o.keys ||
			    m.key % c->o.threads != m.thread || m.op > OP_DELETE ||
			    c->n_inflight[m.thread] >= most || inflight_on(c, m.key)) {
				fprintf(stderr, "tips-crashtest: protocol: bad intent\n");
				c->failed = true;
				continue;
			}
			if (m.vlen)
				seq_record(c, m.seq, m.key, m.vlen);
			c->inflight[m.thread][c->n_inflight[m.thread]++] =
				(struct inflight){ m.op, m.key, m.seq, m.vlen };
		} else if (m.kind == MSG_ACK) {
			model_ack(c, m.thread, m.rc);
			if (kill_after && ++acks == kill_after)
				kill(child, SIGKILL);
		} else if (m.kind == MSG_DONE) {
			events = m.seq;
			c->reclamations += m.key;
		}
	}
	if (have)
		fprintf(stderr, "tips-crashtest: a partial message (%zu bytes) at EOF\n", have);
	return events;
}

static int wait_child(pid_t pid)
{
	int status;
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR) {
			perror("tips-crashtest: waitpid");
			exit(EXIT_VIOLATION);
		}
	return status;
}

static pid_t fork_or_die(void)
{
	fflush(NULL); /* no buffered output is written twice */
	pid_t pid = fork();
	if (pid < 0) {
		perror("tips-crashtest: fork");
		exit(EXIT_VIOLATION);
	}
	if (pid == 0)
		alarm(CHILD_TIMEOUT_S);
	return pid;
}

static const char *status_text(int status, char *buf, size_t cap)
{
	if (WIFEXITED(status))
		snprintf(buf, cap, "exit %d", WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		snprintf(buf, cap, "signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
	else
		snprintf(buf, cap, "status %#x", status);
	return buf;
}

/* One workload run. Returns the child's wait status; *events: persist events of a
 * finished run. */
static int run_workload(struct campaign *c, uint64_t crash_at, uint64_t kill_after,
			uint64_t *events)
{
	uint64_t per_thread = (c->o.ops + c->o.threads - 1) / c->o.threads;
	uint64_t seq_base = c->next_seq;
	c->next_seq += per_thread * c->o.threads;
	if (c->next_seq > 0xffffffffull) {
		fprintf(stderr, "tips-crashtest: sequence numbers exhausted (32 bits)\n");
		exit(EXIT_VIOLATION);
	}
	uint64_t sim_seed = rng_next(&c->rng), rng_seed = rng_next(&c->rng);
	int fds[2];
	if (pipe(fds) != 0) {
		perror("tips-crashtest: pipe");
		exit(EXIT_VIOLATION);
	}
	pid_t pid = fork_or_die();
	if (pid == 0) {
		close(fds[0]);
		child_workload(&c->o, fds[1], c->o.sim, crash_at, sim_seed, seq_base, rng_seed);
	}
	close(fds[1]);
	*events = read_messages(c, fds[0], pid, kill_after);
	close(fds[0]);
	return wait_child(pid);
}

/* Crashes a recovery of the pool (see the top of the file). */
static void crash_recovery(struct campaign *c)
{
	uint64_t bound = c->recovery_events ? c->recovery_events : DEFAULT_RECOVERY_EVENTS;
	uint64_t crash_at = 1 + rng_below(&c->rng, bound);
	uint64_t sim_seed = rng_next(&c->rng);
	long delay_us = (long)rng_below(&c->rng, 20001);
	c->sh->recovery_events = 0;
	pid_t pid = fork_or_die();
	if (pid == 0)
		child_recovery(&c->o, c->sh, crash_at, sim_seed);
	if (!c->o.sim) {
		struct timespec ts = { delay_us / 1000000, (delay_us % 1000000) * 1000 };
		while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
			;
		kill(pid, SIGKILL); /* harmless if it already exited: it is a zombie until
				       waited for */
	}
	int status = wait_child(pid);
	char buf[64];
	bool crashed = (WIFEXITED(status) && WEXITSTATUS(status) == CRASH_EXIT && c->o.sim) ||
		       (WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL && !c->o.sim);
	if (crashed)
		c->recovery_crashes++;
	else if (WIFEXITED(status) && WEXITSTATUS(status) == CHILD_OK) {
		if (c->o.sim && c->sh->recovery_events > c->recovery_events)
			c->recovery_events = c->sh->recovery_events;
	} else {
		fprintf(stderr, "crash %llu: the recovery child failed: %s\n",
			(unsigned long long)c->crashes, status_text(status, buf, sizeof(buf)));
		c->failed = true;
	}
	if (c->o.verbose)
		fprintf(stderr, "crash %llu: recovery %s (%s %llu)\n",
			(unsigned long long)c->crashes, crashed ? "crashed" : "completed",
			c->o.sim ? "armed at event" : "killed after us",
			(unsigned long long)(c->o.sim ? crash_at : (uint64_t)delay_us));
}

/* Batch mode: each thread's unacknowledged batch must be found wholly applied or not
 * at all (keys whose old and new states are equal say nothing either way). */
static void check_batches_whole(struct campaign *c)
{
	for (unsigned t = 0; t < c->o.threads; t++) {
		unsigned applied = 0, not_applied = 0;
		uint64_t key_new = 0, key_old = 0;
		for (unsigned i = 0; i < c->n_inflight[t] && c->o.batch; i++) {
			const struct inflight *f = &c->inflight[t][i];
			const struct found_key *fk = &c->sh->found[f->key];
			struct key_state got, after, *before = &c->model[f->key];
			state_of(&got, fk->rc == 0, fk->val, fk->vlen);
			state_after(before, f, &after);
			if (before->unknown || state_equal(before, &after))
				continue;
			if (state_equal(&got, &after))
				applied++, key_new = f->key;
			else if (state_equal(&got, before))
				not_applied++, key_old = f->key;
		}
		if (applied && not_applied) {
			c->torn++;
			c->lost++;
			if (detail_ok(c))
				fprintf(stderr, "crash %llu: torn batch of thread %u: %u keys new "
					"(e.g. key %llu), %u keys old (e.g. key %llu)\n",
					(unsigned long long)c->crashes, t, applied,
					(unsigned long long)key_new, not_applied,
					(unsigned long long)key_old);
		}
	}
}

/* Recovers and checks the pool against the model, then adopts what was found. */
static void verify(struct campaign *c)
{
	struct shared *sh = c->sh;
	memset(sh, 0, c->sh_size);
	pid_t pid = fork_or_die();
	if (pid == 0)
		child_verify(&c->o, sh, c->crashes, &c->known);
	int status = wait_child(pid);
	char buf[64];
	if (!WIFEXITED(status) || WEXITSTATUS(status) != CHILD_OK) {
		fprintf(stderr, "crash %llu: the verifier failed: %s\n",
			(unsigned long long)c->crashes, status_text(status, buf, sizeof(buf)));
		c->failed = true;
		return;
	}
	if (sh->open_ms > c->max_recovery_ms)
		c->max_recovery_ms = sh->open_ms;
	c->leaked += sh->leaked;
	c->double_free += sh->double_free;
	for (uint32_t i = 0; i < sh->n_new_leaks; i++)
		addr_push(&c->known.leaks, sh->new_leaks[i]);
	for (uint32_t i = 0; i < sh->n_new_unowned_free; i++)
		addr_push(&c->known.free_owned, sh->new_unowned_free[i]);
	if (c->known.leaks.n > 1)
		qsort(c->known.leaks.v, c->known.leaks.n, sizeof(uint64_t), cmp_u64);
	if (c->known.free_owned.n > 1)
		qsort(c->known.free_owned.v, c->known.free_owned.n, sizeof(uint64_t), cmp_u64);
	c->phantom += sh->scan_phantom;
	c->lost += sh->scan_lost;
	c->details = 0;
	uint64_t lost0 = c->lost, phantom0 = c->phantom;
	check_batches_whole(c);
	for (uint64_t k = 0; k < c->o.keys; k++) {
		const struct found_key *f = &sh->found[k];
		if (f->rc != 0 && f->rc != TIPS_ENOTFOUND) {
			fprintf(stderr, "crash %llu: key %llu: lookup failed: %s\n",
				(unsigned long long)c->crashes, (unsigned long long)k,
				tips_strerror(f->rc));
			c->failed = true;
			continue;
		}
		struct key_state got;
		state_of(&got, f->rc == 0, f->val, f->vlen);
		struct key_state *e = &c->model[k];
		const struct inflight *fl = inflight_on(c, k);
		bool inflight = fl != NULL;
		struct key_state alt;
		if (inflight)
			state_after(e, fl, &alt);
		if (e->unknown || state_equal(&got, e) || (inflight && state_equal(&got, &alt))) {
			*e = got;
			continue;
		}
		bool phantom = got.present && !value_was_written(c, k, &got);
		if (phantom)
			c->phantom++;
		else
			c->lost++;
		if (detail_ok(c)) {
			char want[128], have[128], alt_s[128];
			state_describe(k, e, want, sizeof(want));
			state_describe(k, &got, have, sizeof(have));
			if (inflight)
				state_describe(k, &alt, alt_s, sizeof(alt_s));
			fprintf(stderr, "crash %llu: %s: key %llu: expected %s%s%s%s%s, found %s\n",
				(unsigned long long)c->crashes, phantom ? "phantom" : "lost",
				(unsigned long long)k, want,
				inflight ? " or (in-flight " : "",
				inflight ? op_names[fl->op] : "", inflight ? ") " : "",
				inflight ? alt_s : "", have);
		}
		*e = got;
	}
	if (c->details > MAX_DETAILS)
		fprintf(stderr, "crash %llu: ... %u more violation(s) not shown\n",
			(unsigned long long)c->crashes, c->details - MAX_DETAILS);
	for (unsigned t = 0; t < c->o.threads; t++)
		c->n_inflight[t] = 0;
	if (c->o.verbose || c->lost != lost0 || c->phantom != phantom0 || sh->leaked ||
	    sh->double_free)
		fprintf(stderr, "crash %llu (run %llu): recovery %.1f ms (stats %.1f ms, "
			"recovered=%d); blocks: heap %llu, owned %llu; lost +%llu phantom +%llu "
			"leaked +%llu double_free +%llu\n",
			(unsigned long long)c->crashes, (unsigned long long)c->runs, sh->open_ms,
			sh->stats_recovery_ms, sh->recovered, (unsigned long long)sh->heap_blocks,
			(unsigned long long)sh->owned_blocks,
			(unsigned long long)(c->lost - lost0),
			(unsigned long long)(c->phantom - phantom0),
			(unsigned long long)sh->leaked, (unsigned long long)sh->double_free);
}

/* File @d of the store at @base (0: @base; listdb: @base.dN) into @out. */
static void store_file(const char *base, unsigned d, char *out, size_t cap)
{
	tips_listdb_pool_path(base, d, out, cap);
}

static unsigned store_files(const struct options *o)
{
	return o->store == &listdb_store ? o->listdb_domains : 1;
}

/* Copies @from to @to (replaced); false on an error (printed). */
static bool copy_file(const char *from, const char *to)
{
	static char buf[1 << 20];
	FILE *in = fopen(from, "rb"), *out = in ? fopen(to, "wb") : NULL;
	bool ok = in && out;
	size_t n;
	while (ok && (n = fread(buf, 1, sizeof(buf), in)) > 0)
		ok = fwrite(buf, 1, n, out) == n;
	ok = ok && !ferror(in);
	if (in)
		fclose(in);
	if (out && fclose(out) != 0)
		ok = false;
	if (!ok)
		fprintf(stderr, "tips-crashtest: cannot copy %s to %s: %s\n", from, to,
			strerror(errno));
	return ok;
}

/* --keep-crashed: the pool as the crash left it, before any recovery, at PATH.crashed;
 * only until the first violation, so that the copy is the state whose recovery (or the
 * run after it) went wrong first. */
static void keep_crashed_copy(struct campaign *c)
{
	char base[4096], from[4200], to[4200];
	snprintf(base, sizeof(base), "%s.crashed", c->o.pool);
	for (unsigned d = 0; d < store_files(&c->o); d++) {
		store_file(c->o.pool, d, from, sizeof(from));
		store_file(base, d, to, sizeof(to));
		if (!copy_file(from, to))
			c->failed = true;
	}
	c->kept_crash = c->crashes;
}

static void remove_crashed_copy(const struct options *o)
{
	char base[4096], p[4200];
	snprintf(base, sizeof(base), "%s.crashed", o->pool);
	for (unsigned d = 0; d < store_files(o); d++) {
		store_file(base, d, p, sizeof(p));
		unlink(p);
	}
}

static void campaign_run(struct campaign *c)
{
	char buf[64];
	pid_t pid = fork_or_die();
	if (pid == 0)
		child_create(&c->o);
	int status = wait_child(pid);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != CHILD_OK) {
		fprintf(stderr, "tips-crashtest: creating %s failed: %s\n", c->o.pool,
			status_text(status, buf, sizeof(buf)));
		c->failed = true;
		return;
	}
	if (c->o.sim) { /* calibration: a whole run on SIM media, never armed */
		uint64_t events = 0;
		c->runs++;
		status = run_workload(c, 0, 0, &events);
		if (!WIFEXITED(status) || WEXITSTATUS(status) != CHILD_OK || events == 0) {
			fprintf(stderr, "tips-crashtest: the calibration run failed: %s\n",
				status_text(status, buf, sizeof(buf)));
			c->failed = true;
			return;
		}
		c->finished_runs++;
		c->run_events = events;
		fprintf(stderr, "tips-crashtest: calibration: %llu persist events per run\n",
			(unsigned long long)events);
		verify(c);
	}
	uint64_t max_runs = c->o.crashes * 10 + 10;
	while (!c->failed && c->crashes < c->o.crashes && c->runs < max_runs) {
		c->runs++;
		uint64_t crash_at = c->o.sim ? 1 + rng_below(&c->rng, c->run_events) : 0;
		uint64_t acks_per_run = c->o.batch ? c->o.ops / c->o.batch : c->o.ops;
		uint64_t kill_after = c->o.sim ? 0
				    : 1 + rng_below(&c->rng, acks_per_run ? acks_per_run : 1);
		uint64_t events = 0;
		status = run_workload(c, crash_at, kill_after, &events);
		bool crashed = c->o.sim ? WIFEXITED(status) && WEXITSTATUS(status) == CRASH_EXIT
					: WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
		if (crashed) {
			c->crashes++;
		} else if (WIFEXITED(status) && WEXITSTATUS(status) == CHILD_OK) {
			c->finished_runs++;
			if (events > c->run_events)
				c->run_events = events;
		} else {
			fprintf(stderr, "run %llu: the workload child failed: %s\n",
				(unsigned long long)c->runs, status_text(status, buf, sizeof(buf)));
			c->failed = true;
			break;
		}
		if (c->o.verbose)
			fprintf(stderr, "run %llu: %s (%s %llu), %llu acks so far\n",
				(unsigned long long)c->runs, crashed ? "crashed" : "finished",
				c->o.sim ? "armed at event" : "kill after ack",
				(unsigned long long)(c->o.sim ? crash_at : kill_after),
				(unsigned long long)c->acks);
		if (crashed && c->o.keep_crashed &&
		    !(c->lost || c->phantom || c->leaked || c->double_free))
			keep_crashed_copy(c);
		if (crashed && rng_unit(&c->rng) < c->o.recovery_share)
			crash_recovery(c);
		if (!c->failed)
			verify(c);
	}
	if (!c->failed && c->crashes < c->o.crashes) {
		fprintf(stderr, "tips-crashtest: only %llu crashes in %llu runs (asked %llu)\n",
			(unsigned long long)c->crashes, (unsigned long long)c->runs,
			(unsigned long long)c->o.crashes);
		c->failed = true;
	}
}

int main(int argc, char **argv)
{
	struct campaign c;
	memset(&c, 0, sizeof(c));
	int rc = parse_options(argc, argv, &c.o);
	if (rc)
		return rc == PARSE_HELP ? EXIT_OK : rc;
	if (tips_index_find(c.o.index_name))
		c.o.store = &facade_store;
	else if (strcmp(c.o.index_name, "listdb") == 0)
		c.o.store = &listdb_store;
#ifdef TIPS_HAVE_PMDK_HASH
	else if (strcmp(c.o.index_name, PMDK_HASH_NAME) == 0)
		c.o.store = &pmdk_store;
#endif
	if (!c.o.store) {
		fprintf(stderr, "tips-crashtest: no index named '%s'; built in:",
			c.o.index_name);
		for (const char *const *n = tips_index_names(); *n; n++)
			fprintf(stderr, " %s", *n);
#ifdef TIPS_HAVE_PMDK_HASH
		fprintf(stderr, " %s", PMDK_HASH_NAME);
#endif
		fprintf(stderr, " listdb\n");
		return EXIT_USAGE;
	}
	if (c.o.batch && !c.o.store->batch) {
		fprintf(stderr, "tips-crashtest: --batch needs a store with write batches "
			"(tips-* indexes, listdb), not %s\n", c.o.index_name);
		return EXIT_USAGE;
	}
	if (c.o.sim && !c.o.store->sim_capable) {
		fprintf(stderr, "tips-crashtest: --mode sim does not apply to %s: it simulates "
			"power failure inside libtips's pool layer (dropping unflushed lines), "
			"which %s does not use (libpmemobj maps and flushes its pool itself); use "
			"--mode sigkill\n", c.o.index_name, c.o.store->name);
		return EXIT_USAGE;
	}
#ifdef TIPS_HAVE_PMDK_HASH
	if (c.o.store == &pmdk_store)
		pmdk_hash_force_flushes(); /* cache-line flushes, not msync, as on tips pools */
#endif
	bool listdb = c.o.store == &listdb_store;
	if (listdb && !c.o.pool_size_set)
		c.o.pool_size = TIPS_LISTDB_POOL_SIZE;
	/* The files of the store: PATH, and for listdb its domain pools PATH.d1 ... */
	unsigned nfiles = listdb ? TIPS_LISTDB_MAX_DOMAINS : 1;
	for (unsigned d = 0; d < nfiles; d++) {
		char path[4096];
		struct stat stbuf;
		tips_listdb_pool_path(c.o.pool, d, path, sizeof(path));
		if (lstat(path, &stbuf) != 0)
			continue;
		if (!c.o.fresh) {
			fprintf(stderr, "tips-crashtest: %s exists; remove it or pass --fresh\n",
				path);
			return EXIT_USAGE;
		}
		if (unlink(path) != 0) {
			fprintf(stderr, "tips-crashtest: cannot remove %s: %s\n", path,
				strerror(errno));
			return EXIT_USAGE;
		}
	}
	c.sh_size = sizeof(struct shared) + c.o.keys * sizeof(struct found_key);
	c.sh = mmap(NULL, c.sh_size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	c.model = calloc(c.o.keys, sizeof(*c.model));
	if (c.sh == MAP_FAILED || !c.model) {
		fprintf(stderr, "tips-crashtest: out of memory\n");
		return EXIT_VIOLATION;
	}
	c.rng = c.o.seed;
	c.next_seq = 1;
	fprintf(stderr, "tips-crashtest: index=%s mode=%s seed=%llu crashes=%llu keys=%llu "
		"ops=%llu threads=%u evict=%.2f recovery-crash-share=%.2f", c.o.index_name,
		c.o.sim ? "sim" : "sigkill", (unsigned long long)c.o.seed,
		(unsigned long long)c.o.crashes, (unsigned long long)c.o.keys,
		(unsigned long long)c.o.ops, c.o.threads, c.o.evict, c.o.recovery_share);
	if (listdb)
		fprintf(stderr, " memtable=%llu domains=%u",
			(unsigned long long)c.o.listdb_memtable, c.o.listdb_domains);
	if (c.o.batch)
		fprintf(stderr, " batch=%u", c.o.batch);
	fputc('\n', stderr);
	double t0 = now_ms();
	campaign_run(&c);
	bool bad = c.failed || c.lost || c.phantom || c.leaked || c.double_free;
	fprintf(stderr, "tips-crashtest: %llu runs (%llu finished without a crash, with %llu "
		"%s before close), %llu acks, %llu recoveries crashed, %.1f s; "
		"seed=%llu\n", (unsigned long long)c.runs, (unsigned long long)c.finished_runs,
		(unsigned long long)c.reclamations, c.o.store->background,
		(unsigned long long)c.acks,
		(unsigned long long)c.recovery_crashes, (now_ms() - t0) / 1e3,
		(unsigned long long)c.o.seed);
	printf("crashes=%llu lost=%llu phantom=%llu leaked=%llu double_free=%llu "
	       "max_recovery_ms=%.1f", (unsigned long long)c.crashes,
	       (unsigned long long)c.lost, (unsigned long long)c.phantom,
	       (unsigned long long)c.leaked, (unsigned long long)c.double_free,
	       c.max_recovery_ms);
	if (c.o.batch)
		printf(" torn=%llu", (unsigned long long)c.torn);
	putchar('\n');
	if (bad && c.o.keep_crashed && c.kept_crash)
		fprintf(stderr, "tips-crashtest: the pool as crash %llu left it (before its "
			"recovery) is kept at %s.crashed%s\n", (unsigned long long)c.kept_crash,
			c.o.pool, listdb && c.o.listdb_domains > 1 ? " (and .d1 ...)" : "");
	else if (c.o.keep_crashed)
		remove_crashed_copy(&c.o);
	if (bad)
		fprintf(stderr, "tips-crashtest: FAILED (seed %llu); the pool is kept at %s%s\n",
			(unsigned long long)c.o.seed, c.o.pool,
			listdb && c.o.listdb_domains > 1 ? " (and .d1 ...)" : "");
	else if (listdb)
		tips_listdb_destroy(c.o.pool);
	else
		unlink(c.o.pool);
	free(c.model);
	free(c.written);
	free(c.known.leaks.v);
	free(c.known.free_owned.v);
	munmap(c.sh, c.sh_size);
	return bad ? EXIT_VIOLATION : EXIT_OK;
}
