/*
 * tips.c - the `tips` command: create, describe, check and grow pool files.
 *
 *   tips pool create PATH --size SIZE [--root-size SIZE] [--log-size SIZE] [--addr ADDR]
 *   tips pool info PATH
 *   tips pool check PATH [--index NAME]
 *   tips pool grow PATH --size SIZE
 *
 * Exit codes: 0 success (check: consistent); 1 check found an inconsistency, a leak or
 * a damaged pool (check never crashes or hangs on any input);
 * 2 usage error; 3 the operation failed (message on stderr, naming the TIPS_E* cause).
 * Uses only the public API.
 */
#include "size_arg.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tips/tips.h>

enum { EXIT_OK = 0, EXIT_INCONSISTENT = 1, EXIT_USAGE = 2, EXIT_FAILED = 3 };

static const char usage_text[] =
	"usage: tips pool create PATH --size SIZE [--root-size SIZE] [--log-size SIZE]\n"
	"                        [--addr ADDR]\n"
	"       tips pool info PATH\n"
	"       tips pool check PATH [--index NAME]\n"
	"       tips pool grow PATH --size SIZE\n"
	"\n"
	"  create  make a new pool file (SIZE: a multiple of 2 MiB, at least 8 MiB; ADDR:\n"
	"          0x and hexadecimal digits). The file must not exist; its directory must.\n"
	"  info    print the header and the media the pool is (or would be) mapped with:\n"
	"          pmem (DAX), shm (tmpfs, emulated PM), file (msync), and why.\n"
	"  check   open the pool (recovering it if it was not closed cleanly) and verify\n"
	"          the heap: chunk table, run bitmaps, block headers, allocation logs.\n"
	"          With --index NAME (e.g. tips-hash), open it as that TIPS index (running\n"
	"          TIPS recovery) and also check that the heap's allocated blocks are\n"
	"          exactly the blocks the index owns (no leak, no double free). The open\n"
	"          checks every header, log record and index node before following it\n"
	"          (TIPS_VERIFY): a damaged pool is reported, never followed.\n"
	"  grow    make a pool that is not open larger: SIZE is the new total size (larger\n"
	"          than now, a multiple of 2 MiB); the heap gets the new room. Crash-safe:\n"
	"          an interruption leaves the old or the grown pool. A pool that crashed\n"
	"          can be grown; its next open recovers it as usual.\n"
	"\n"
	SIZE_ARG_RULE
	"exit codes: 0 ok, 1 check found an inconsistency or damage (the message names the\n"
	"region, the offset or address, and what was expected), 2 usage error, 3 failure\n";

static int usage(FILE *f, int code)
{
	fputs(usage_text, f);
	return code;
}

static int fail(const char *what, int rc)
{
	fprintf(stderr, "tips: %s: %s (%s)\n", what, tips_errormsg(), tips_strerror(rc));
	return EXIT_FAILED;
}

/* True if an open failed because the pool is damaged (a header, log, the heap or the
 * index): the check's answer, not a failure to check. A file that is no pool, or a
 * pool of another version or index, stays a failure (exit 3). */
static bool pool_unusable(int rc)
{
	return rc == TIPS_ECORRUPT;
}

/* Reports a pool the check rejects; the message names the region (pool header,
 * framework header, OLog n, heap, the index and its node), the offset or address,
 * and what was expected. */
static int inconsistent(const char *message)
{
	printf("result:          INCONSISTENT: %s\n", message);
	return EXIT_INCONSISTENT;
}

static int cmd_create(int argc, char **argv)
{
	if (argc < 1)
		return usage(stderr, EXIT_USAGE);
	const char *path = argv[0];
	struct tips_pool_options o;
	tips_pool_options_init(&o);
	for (int i = 1; i < argc; i++) {
		uint64_t *dst = NULL;
		if (strcmp(argv[i], "--size") == 0)
			dst = &o.size;
		else if (strcmp(argv[i], "--root-size") == 0)
			dst = &o.root_size;
		else if (strcmp(argv[i], "--log-size") == 0)
			dst = &o.log_size;
		else if (strcmp(argv[i], "--addr") == 0)
			dst = &o.map_addr;
		if (!dst || i + 1 >= argc) {
			fprintf(stderr, "tips: pool create: unknown or incomplete option '%s'\n",
				argv[i]);
			return usage(stderr, EXIT_USAGE);
		}
		if (size_arg_bytes(argv[++i], dst) != 0) {
			fprintf(stderr, "tips: pool create: '%s' is not a size\n", argv[i]);
			return EXIT_USAGE;
		}
	}
	if (o.size == 0) {
		fprintf(stderr, "tips: pool create: --size is required\n");
		return usage(stderr, EXIT_USAGE);
	}
	struct tips_pool *pool;
	int rc = tips_pool_create(path, &o, &pool);
	if (rc)
		return fail("pool create", rc);
	struct tips_pool_info info;
	tips_pool_info(pool, &info);
	rc = tips_pool_close(&pool);
	if (rc)
		return fail("pool create", rc);
	printf("created %s: %llu bytes at 0x%llx, media %s\n", path,
	       (unsigned long long)info.size, (unsigned long long)info.map_addr,
	       tips_media_name(info.media));
	return EXIT_OK;
}

static void print_uuid(const uint8_t *u)
{
	for (int i = 0; i < 16; i++)
		printf("%02x%s", u[i], (i == 3 || i == 5 || i == 7 || i == 9) ? "-" : "");
}

static int cmd_info(int argc, char **argv)
{
	if (argc != 1)
		return usage(stderr, EXIT_USAGE);
	struct tips_pool_info info;
	int rc = tips_pool_stat(argv[0], &info);
	if (rc)
		return fail("pool info", rc);
	printf("path:            %s\n", argv[0]);
	printf("layout version:  %u\n", info.layout_version);
	printf("uuid:            ");
	print_uuid(info.uuid);
	printf("\nsize:            %llu bytes\n", (unsigned long long)info.size);
	printf("mapping address: 0x%llx\n", (unsigned long long)info.map_addr);
	printf("root area:       %llu bytes at offset %llu\n", (unsigned long long)info.root_size,
	       (unsigned long long)info.root_offset);
	printf("log area:        %llu bytes at offset %llu\n", (unsigned long long)info.log_size,
	       (unsigned long long)info.log_offset);
	printf("heap:            %llu bytes at offset %llu\n", (unsigned long long)info.heap_size,
	       (unsigned long long)info.heap_offset);
	printf("clean shutdown:  %s\n", info.clean ? "yes" : "no (in use, or it crashed)");
	printf("media:           %s\n", tips_media_name(info.media));
	printf("media reason:    %s\n", info.media_reason);
	printf("flush:           %s\n", info.media == TIPS_MEDIA_FILE ? "msync"
							       : tips_flush_instruction());
	return EXIT_OK;
}

static void print_heap(const struct tips_heap_report *rep, const struct tips_heap_stats *st)
{
	printf("chunks:          %llu (%llu free, %llu in runs, %llu in extents)\n",
	       (unsigned long long)rep->chunks, (unsigned long long)rep->chunks_free,
	       (unsigned long long)rep->chunks_run, (unsigned long long)rep->chunks_extent);
	printf("blocks:          %llu allocated, %llu bytes requested\n",
	       (unsigned long long)rep->blocks_allocated, (unsigned long long)rep->bytes_allocated);
	printf("recovered:       %llu log records replayed at open\n",
	       (unsigned long long)st->recovered_records);
	printf("pending records: %llu\n", (unsigned long long)rep->log_records);
}

static void print_problem(enum tips_block_problem what, const void *block, size_t size,
			  void *arg)
{
	unsigned *shown = arg;
	if ((*shown)++ < 10)
		printf("problem:         block %p (%zu bytes): %s\n", block, size,
		       what == TIPS_BLOCK_LEAKED ? "allocated, owned by nobody (leak)"
		       : what == TIPS_BLOCK_FREE_BUT_OWNED ? "owned by the index, free in the heap"
							  : "owned twice by the index");
}

/* check --index NAME: through the framework, with reachability. */
static int check_index(const char *path, const char *name)
{
	const struct tips_index_ops *ops = tips_index_find(name);
	if (!ops) {
		fprintf(stderr, "tips: no index named '%s'; known:", name);
		for (const char *const *n = tips_index_names(); *n; n++)
			fprintf(stderr, " %s", *n);
		fprintf(stderr, "\n");
		return EXIT_USAGE;
	}
	struct tips_db *db;
	struct tips_config cfg;
	tips_config_init(&cfg);
	cfg.flags = TIPS_VERIFY; /* walk the index before recovery follows it */
	int rc = tips_open(path, &cfg, ops, &db);
	if (pool_unusable(rc))
		return inconsistent(tips_errormsg());
	if (rc)
		return fail("pool check", rc);
	struct tips_stats ts;
	tips_stats(db, &ts);
	struct tips_db_report rep;
	unsigned shown = 0;
	rc = tips_db_check(db, print_problem, &shown, &rep);
	struct tips_heap_stats st;
	tips_heap_stats(tips_pool_heap(tips_db_pool(db)), &st);
	print_heap(&rep.heap, &st);
	if (ts.recovered)
		printf("TIPS recovery:   %.1f ms, %llu OLog records replayed\n", ts.recovery_ms,
		       (unsigned long long)ts.replayed);
	else
		printf("TIPS recovery:   none needed (closed cleanly)\n");
	printf("reachability:    %llu blocks owned by %s; %llu leaked, %llu free but owned, "
	       "%llu owned twice\n", (unsigned long long)rep.blocks_owned, name,
	       (unsigned long long)rep.leaked, (unsigned long long)rep.free_but_owned,
	       (unsigned long long)rep.owned_twice);
	int close_rc = tips_close(&db);
	if (rc == TIPS_ECORRUPT)
		return inconsistent(tips_errormsg());
	if (rc || close_rc)
		return fail("pool check", rc ? rc : close_rc);
	printf("result:          consistent\n");
	return EXIT_OK;
}

static int cmd_check(int argc, char **argv)
{
	if (argc == 3 && strcmp(argv[1], "--index") == 0)
		return check_index(argv[0], argv[2]);
	if (argc != 1)
		return usage(stderr, EXIT_USAGE);
	struct tips_pool *pool;
	int rc = tips_pool_open(argv[0], NULL, &pool);
	if (pool_unusable(rc))
		return inconsistent(tips_errormsg());
	if (rc)
		return fail("pool check", rc);
	struct tips_heap *heap = tips_pool_heap(pool);
	struct tips_heap_report rep;
	rc = tips_heap_check(heap, &rep);
	struct tips_heap_stats st;
	tips_heap_stats(heap, &st);
	print_heap(&rep, &st);
	printf("reachability:    not checked (give --index NAME for a TIPS pool)\n");
	int close_rc = tips_pool_close(&pool);
	if (rc) {
		printf("result:          INCONSISTENT: heap: %llu problem(s); first: %s\n",
		       (unsigned long long)rep.errors, rep.first_error);
		return EXIT_INCONSISTENT;
	}
	if (close_rc)
		return fail("pool check", close_rc);
	printf("result:          consistent\n");
	return EXIT_OK;
}

static int cmd_grow(int argc, char **argv)
{
	uint64_t size = 0;
	if (argc != 3 || strcmp(argv[1], "--size") != 0)
		return usage(stderr, EXIT_USAGE);
	if (size_arg_bytes(argv[2], &size) != 0) {
		fprintf(stderr, "tips: pool grow: '%s' is not a size\n", argv[2]);
		return EXIT_USAGE;
	}
	struct tips_pool_info before;
	int rc = tips_pool_stat(argv[0], &before);
	if (rc == 0)
		rc = tips_pool_grow(argv[0], size);
	if (rc)
		return fail("pool grow", rc);
	printf("grew %s: %llu -> %llu bytes\n", argv[0], (unsigned long long)before.size,
	       (unsigned long long)size);
	return EXIT_OK;
}

int main(int argc, char **argv)
{
	if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0))
		return usage(stdout, EXIT_OK);
	if (argc < 3 || strcmp(argv[1], "pool") != 0)
		return usage(stderr, EXIT_USAGE);
	if (strcmp(argv[2], "--help") == 0)
		return usage(stdout, EXIT_OK);
	if (strcmp(argv[2], "create") == 0)
		return cmd_create(argc - 3, argv + 3);
	if (strcmp(argv[2], "info") == 0)
		return cmd_info(argc - 3, argv + 3);
	if (strcmp(argv[2], "check") == 0)
		return cmd_check(argc - 3, argv + 3);
	if (strcmp(argv[2], "grow") == 0)
		return cmd_grow(argc - 3, argv + 3);
	fprintf(stderr, "tips: unknown command 'pool %s'\n", argv[2]);
	return usage(stderr, EXIT_USAGE);
}
