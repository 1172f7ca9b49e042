/*
 * options.c - tips-crashtest's command line: the usage text and parse_options(), which
 * fills struct options and refuses what the campaign cannot honour (crashtest.h).
 * Invariant: options are checked here (ranges, PATH not existing without --fresh is
 * checked in main), so the campaign meets no value it cannot use; numbers follow the one
 * rule of bench/kit/size_arg.h.
 */
#define _GNU_SOURCE
#include "crashtest.h"

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
	"  --pool-size BYTES      pool size (64M; listdb: of each\n"
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
	"  exit codes: 0 no violation, 1 violations or failure, 2 usage error\n"
	SIZE_ARG_RULE;

static int usage(int code)
{
	fputs(usage_text, code ? stderr : stdout);
	return code;
}

/* A count, a seed or a size (bench/kit/size_arg.h). */
static bool parse_u64(const char *s, uint64_t *out)
{
	return size_arg_count(s, out) == 0;
}

static bool parse_size(const char *s, uint64_t *out)
{
	return size_arg_bytes(s, out) == 0;
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
int parse_options(int argc, char **argv, struct options *o)
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

