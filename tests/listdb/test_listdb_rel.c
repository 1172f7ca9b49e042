/*
 * test_listdb_rel.c - ListDB's reliability: what it does with bad arguments, with a full
 * pool and when DRAM runs out. The invariant every case checks: a call either returns 0
 * and its write is durable, or returns a code its header lists and leaves nothing behind;
 * the host process is never killed.
 *
 *   nullval  put/insert/update with a NULL value and vlen 8 or 65536: TIPS_EINVAL, nothing
 *            stored (these used to store bytes read past a string literal, or crash)
 *   args     the argument checks of every call against the TIPS facade's (a tips-hash
 *            database): the same code for the same mistake, with a message
 *   codes    each code that open, the writes, get and scan are made to return here is
 *            listed in their doc comment in include/tips/listdb.h
 *   delete   deletes work in a full pool; once merged they make room for puts again
 *   overwrite  rounds of overwrites (1 domain; 2, braided and oblivious; WAL) make chunks
 *            wholly obsolete; their reclamation unlinks their elements from L1: every
 *            key's last value, and tips_listdb_check, before and after a reopen
 *   dram     flush, compaction and view allocations fail (fault injection): writers get
 *            TIPS_ENOMEM instead of hanging, reads are served, nothing acknowledged is
 *            lost; a WAL database filled until its flushes find no room
 *   fill     a 32 MiB pool filled with 8..1000-byte values until the first error; deletes,
 *            merge, inserts again; reopen: every acknowledged key with its value
 *   kill     the fill in a child killed with SIGKILL at a random point; the parent
 *            verifies every key the child reported acknowledged through a pipe
 *   scan     a scan that meets a deleted key while Zipper's scan phase marks the key's
 *            version in L1 and then its tombstone in L0 obsolete, and, in a second run,
 *            its merge phase re-points the element before the tombstone into L1 (done
 *            by hand, from the scan's callback, at the worst moment): the key must not
 *            come back
 * Usage: test_listdb_rel [CASE] [--seed N] [--rounds N]
 */
#define _GNU_SOURCE
#include "listdb_test.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/wait.h>

#include "listdb/listdb_internal.h"
#include "util/kv.h" /* mix64 */

#ifndef LISTDB_HEADER
#error "LISTDB_HEADER (the path of include/tips/listdb.h) must be defined by the build"
#endif

static uint64_t seed;
static unsigned char valbuf[TIPS_MAX_VALUE + 1], valbuf2[TIPS_MAX_VALUE + 1];

/* Key @i: 8 bytes spread over every shard. */
static void key_of(uint64_t i, unsigned char k[8])
{
	be64(k, i * 0x9e3779b97f4a7c15ull);
}

/* Value of key @i: 8..1000 bytes, its contents a function of @i. */
static size_t value_of(uint64_t i, unsigned char *v)
{
	uint64_t h = mix64(i ^ seed);
	size_t n = 8 + (size_t)(h % 993);
	for (size_t j = 0; j < n; j++)
		v[j] = (unsigned char)((h >> (8 * (j % 8))) + j);
	return n;
}

static struct tips_listdb *open_db(const char *path, uint64_t pool_size,
				   void (*tune)(struct tips_listdb_config *))
{
	struct tips_listdb_config cfg;
	tips_listdb_config_init(&cfg);
	cfg.flags = TIPS_LISTDB_CREATE;
	cfg.pool_size = pool_size;
	cfg.expected_keys = 1u << 16;
	if (tune)
		tune(&cfg);
	struct tips_listdb *db = NULL;
	REQUIRE_RC(tips_listdb_open(path, &cfg, &db), 0);
	return db;
}

/* 1 if key @i has its value; 0 if absent; -1 (reported) if wrong. */
static int key_state(struct tips_listdb *db, uint64_t i)
{
	unsigned char k[8];
	key_of(i, k);
	size_t vl = 0;
	int rc = tips_listdb_get(db, k, 8, valbuf2, sizeof(valbuf2), &vl);
	if (rc == TIPS_ENOTFOUND)
		return 0;
	size_t want = value_of(i, valbuf);
	if (rc == 0 && vl == want && memcmp(valbuf, valbuf2, want) == 0)
		return 1;
	fprintf(stderr, "[%s] key %llu: get %d (%s), %zu bytes (want %zu)\n", ld_phase,
		(unsigned long long)i, rc, tips_strerror(rc), vl, want);
	return -1;
}

static void check_db(struct tips_listdb *db, const char *what)
{
	struct tips_listdb_report rep;
	int rc = tips_listdb_check(db, &rep);
	if (rc) {
		fprintf(stderr, "%s: tips_listdb_check: %s\n", what, tips_errormsg());
		test_failures++;
	}
}

/* ==== nullval ============================================================================ */

static void test_nullval(void)
{
	char path[256];
	ld_phase = "nullval";
	ld_path(path, sizeof(path));
	struct tips_listdb *db = open_db(path, 32ull << 20, NULL);
	static const size_t lens[] = { 8, 65536 };
	const unsigned char k[] = "nullval";
	for (unsigned i = 0; i < 2; i++) {
		CHECK_RC(tips_listdb_put(db, k, 7, NULL, lens[i]), TIPS_EINVAL);
		CHECK_RC(tips_listdb_insert(db, k, 7, NULL, lens[i]), TIPS_EINVAL);
		size_t vl = 0;
		CHECK_RC(tips_listdb_get(db, k, 7, valbuf, sizeof(valbuf), &vl), TIPS_ENOTFOUND);
		CHECK_RC(tips_listdb_put(db, k, 7, "x", 1), 0);
		CHECK_RC(tips_listdb_update(db, k, 7, NULL, lens[i]), TIPS_EINVAL);
		CHECK_RC(tips_listdb_get(db, k, 7, valbuf, sizeof(valbuf), &vl), 0);
		CHECK(vl == 1 && valbuf[0] == 'x'); /* the failed update left nothing */
		CHECK_RC(tips_listdb_delete(db, k, 7), 0);
	}
	/* A NULL value of 0 bytes is an empty value, as in the TIPS facade. */
	CHECK_RC(tips_listdb_put(db, k, 7, NULL, 0), 0);
	size_t vl = 99;
	CHECK_RC(tips_listdb_get(db, k, 7, valbuf, sizeof(valbuf), &vl), 0);
	CHECK(vl == 0);
	CHECK_RC(tips_listdb_close(&db), 0);
	tips_listdb_destroy(path);
}

/* ==== args: the same argument checks as the TIPS facade ============================== */

static int count_cb(const void *k, size_t kl, const void *v, size_t vl, void *arg)
{
	(void)k;
	(void)kl;
	(void)v;
	(void)vl;
	(*(long *)arg)++;
	return 0;
}

/* One bad (or borderline) call, made on both APIs. */
struct arg_case {
	const char *name;
	int (*tips)(struct tips_db *db);
	int (*ldb)(struct tips_listdb *db);
};

static unsigned char bigkey[TIPS_MAX_KEY + 2];

#define BOTH(name, tips_call, ldb_call)                                                  \
	static int t_##name(struct tips_db *db)                                          \
	{                                                                                \
		(void)db;                                                                \
		return (int)(tips_call);                                                 \
	}                                                                                \
	static int l_##name(struct tips_listdb *db)                                      \
	{                                                                                \
		(void)db;                                                                \
		return (int)(ldb_call);                                                  \
	}
#define CASE(name) { #name, t_##name, l_##name }

BOTH(put_null_db, tips_put(NULL, "k", 1, "v", 1), tips_listdb_put(NULL, "k", 1, "v", 1))
BOTH(put_null_key, tips_put(db, NULL, 1, "v", 1), tips_listdb_put(db, NULL, 1, "v", 1))
BOTH(put_empty_key, tips_put(db, "k", 0, "v", 1), tips_listdb_put(db, "k", 0, "v", 1))
BOTH(put_null_val, tips_put(db, "k", 1, NULL, 5), tips_listdb_put(db, "k", 1, NULL, 5))
BOTH(put_long_key, tips_put(db, bigkey, TIPS_MAX_KEY + 1, "v", 1),
     tips_listdb_put(db, bigkey, TIPS_MAX_KEY + 1, "v", 1))
BOTH(put_max_key, tips_put(db, bigkey, TIPS_MAX_KEY, "v", 1),
     tips_listdb_put(db, bigkey, TIPS_MAX_KEY, "v", 1))
BOTH(put_long_val, tips_put(db, "k", 1, valbuf, TIPS_MAX_VALUE + 1),
     tips_listdb_put(db, "k", 1, valbuf, TIPS_MAX_VALUE + 1))
BOTH(put_max_val, tips_put(db, "m", 1, valbuf, TIPS_MAX_VALUE),
     tips_listdb_put(db, "m", 1, valbuf, TIPS_MAX_VALUE))
BOTH(insert_null_val, tips_insert(db, "i", 1, NULL, 65536),
     tips_listdb_insert(db, "i", 1, NULL, 65536))
BOTH(update_null_val, tips_update(db, "k", 1, NULL, 8), tips_listdb_update(db, "k", 1, NULL, 8))
BOTH(insert_present, tips_insert(db, "k", 1, "v", 1), tips_listdb_insert(db, "k", 1, "v", 1))
BOTH(update_absent, tips_update(db, "zz", 2, "v", 1), tips_listdb_update(db, "zz", 2, "v", 1))
BOTH(remove_absent, tips_remove(db, "zz", 2), tips_listdb_remove(db, "zz", 2))
BOTH(remove_null_key, tips_remove(db, NULL, 2), tips_listdb_remove(db, NULL, 2))
BOTH(remove_long_key, tips_remove(db, bigkey, TIPS_MAX_KEY + 1),
     tips_listdb_remove(db, bigkey, TIPS_MAX_KEY + 1))
BOTH(get_null_vlen, tips_get(db, "k", 1, valbuf2, 8, NULL),
     tips_listdb_get(db, "k", 1, valbuf2, 8, NULL))
BOTH(get_null_key, tips_get(db, NULL, 1, valbuf2, 8, &(size_t){ 0 }),
     tips_listdb_get(db, NULL, 1, valbuf2, 8, &(size_t){ 0 }))
BOTH(get_empty_key, tips_get(db, "k", 0, valbuf2, 8, &(size_t){ 0 }),
     tips_listdb_get(db, "k", 0, valbuf2, 8, &(size_t){ 0 }))
BOTH(get_null_buf, tips_get(db, "k", 1, NULL, 8, &(size_t){ 0 }),
     tips_listdb_get(db, "k", 1, NULL, 8, &(size_t){ 0 }))
BOTH(get_long_key, tips_get(db, bigkey, TIPS_MAX_KEY + 1, valbuf2, 8, &(size_t){ 0 }),
     tips_listdb_get(db, bigkey, TIPS_MAX_KEY + 1, valbuf2, 8, &(size_t){ 0 }))
BOTH(get_small_buf, tips_get(db, "m", 1, valbuf2, 8, &(size_t){ 0 }),
     tips_listdb_get(db, "m", 1, valbuf2, 8, &(size_t){ 0 }))
BOTH(get_absent, tips_get(db, "zz", 2, valbuf2, 8, &(size_t){ 0 }),
     tips_listdb_get(db, "zz", 2, valbuf2, 8, &(size_t){ 0 }))
BOTH(scan_null_fn, tips_scan(db, "a", 1, 10, NULL, NULL), tips_listdb_scan(db, "a", 1, 10, NULL, NULL))
BOTH(scan_null_fn_count0, tips_scan(db, NULL, 0, 0, NULL, NULL),
     tips_listdb_scan(db, NULL, 0, 0, NULL, NULL))
BOTH(scan_null_start, tips_scan(db, NULL, 3, 10, count_cb, &(long){ 0 }),
     tips_listdb_scan(db, NULL, 3, 10, count_cb, &(long){ 0 }))
BOTH(scan_null_db, tips_scan(NULL, NULL, 0, 10, count_cb, &(long){ 0 }),
     tips_listdb_scan(NULL, NULL, 0, 10, count_cb, &(long){ 0 }))
BOTH(scan_long_start, tips_scan(db, bigkey, TIPS_MAX_KEY + 1, 10, count_cb, &(long){ 0 }),
     tips_listdb_scan(db, bigkey, TIPS_MAX_KEY + 1, 10, count_cb, &(long){ 0 }))
BOTH(scan_count0, tips_scan(db, NULL, 0, 0, count_cb, &(long){ 0 }),
     tips_listdb_scan(db, NULL, 0, 0, count_cb, &(long){ 0 }))

static const struct arg_case arg_cases[] = {
	CASE(put_null_db), CASE(put_null_key), CASE(put_empty_key), CASE(put_null_val),
	CASE(put_long_key), CASE(put_max_key), CASE(put_long_val), CASE(put_max_val),
	CASE(insert_null_val), CASE(update_null_val), CASE(insert_present),
	CASE(update_absent), CASE(remove_absent), CASE(remove_null_key), CASE(remove_long_key),
	CASE(get_null_vlen), CASE(get_null_key), CASE(get_empty_key), CASE(get_null_buf),
	CASE(get_long_key), CASE(get_small_buf), CASE(get_absent), CASE(scan_null_fn),
	CASE(scan_null_fn_count0), CASE(scan_null_start), CASE(scan_null_db),
	CASE(scan_long_start), CASE(scan_count0),
};

static void test_args(void)
{
	char lpath[256], tpath[256];
	ld_phase = "args";
	ld_path(lpath, sizeof(lpath));
	ld_path(tpath, sizeof(tpath));
	memset(bigkey, 0xff, sizeof(bigkey));
	struct tips_listdb *ldb = open_db(lpath, 64ull << 20, NULL);
	struct tips_config cfg;
	tips_config_init(&cfg);
	cfg.flags = TIPS_CREATE;
	cfg.pool_size = 256ull << 20;
	cfg.expected_keys = 4096;
	cfg.workers_up = 1;
	struct tips_db *tdb = NULL;
	REQUIRE_RC(tips_open(tpath, &cfg, tips_index_find("tips-hash"), &tdb), 0);
	REQUIRE_RC(tips_put(tdb, "k", 1, "v", 1), 0);
	REQUIRE_RC(tips_listdb_put(ldb, "k", 1, "v", 1), 0);
	unsigned differ = 0;
	for (size_t i = 0; i < sizeof(arg_cases) / sizeof(arg_cases[0]); i++) {
		const struct arg_case *c = &arg_cases[i];
		int want = c->tips(tdb);
		int got = c->ldb(ldb);
		const char *msg = tips_errormsg();
		if (got != want) {
			fprintf(stderr, "args %s: tips_* returned %d (%s), tips_listdb_* %d (%s: %s)\n",
				c->name, want, tips_strerror(want), got, tips_strerror(got), msg);
			differ++;
		} else if (got == TIPS_EINVAL && msg[0] == '\0') {
			fprintf(stderr, "args %s: TIPS_EINVAL without a message\n", c->name);
			differ++;
		}
	}
	printf("args: %zu cases, %u differ from the TIPS facade\n",
	       sizeof(arg_cases) / sizeof(arg_cases[0]), differ);
	CHECK(differ == 0);
	/* Calls with no facade twin. */
	CHECK_RC(tips_listdb_thread_domain(NULL, 0), TIPS_EINVAL);
	CHECK_RC(tips_listdb_thread_domain(ldb, 1), TIPS_EINVAL);
	CHECK_RC(tips_listdb_flush(NULL, 0), TIPS_EINVAL);
	CHECK_RC(tips_listdb_check(NULL, NULL), TIPS_EINVAL);
	CHECK_RC(tips_listdb_close(NULL), TIPS_EINVAL);
	CHECK_RC(tips_listdb_destroy(NULL), TIPS_EINVAL);
	CHECK_RC(tips_listdb_pool_path(NULL, 0, NULL, 0), TIPS_EINVAL);
	CHECK_RC(tips_listdb_close(&ldb), 0);
	CHECK_RC(tips_close(&tdb), 0);
	tips_listdb_destroy(lpath);
	unlink(tpath);
}

/* ==== codes: what the header promises ============================================== */

static const struct {
	const char *name;
	int code;
} code_names[] = {
	{ "TIPS_EINVAL", TIPS_EINVAL }, { "TIPS_ENOENT", TIPS_ENOENT },
	{ "TIPS_ENODIR", TIPS_ENODIR }, { "TIPS_EEXIST", TIPS_EEXIST },
	{ "TIPS_ENOSPC", TIPS_ENOSPC }, { "TIPS_ESIZE", TIPS_ESIZE },
	{ "TIPS_ENOTPOOL", TIPS_ENOTPOOL }, { "TIPS_EVERSION", TIPS_EVERSION },
	{ "TIPS_ECORRUPT", TIPS_ECORRUPT }, { "TIPS_ETRUNCATED", TIPS_ETRUNCATED },
	{ "TIPS_ELOCKED", TIPS_ELOCKED }, { "TIPS_EADDRINUSE", TIPS_EADDRINUSE },
	{ "TIPS_ENOMEM", TIPS_ENOMEM }, { "TIPS_ETOOBIG", TIPS_ETOOBIG },
	{ "TIPS_EIO", TIPS_EIO }, { "TIPS_EPERM", TIPS_EPERM },
	{ "TIPS_ELOGFULL", TIPS_ELOGFULL }, { "TIPS_EBUSY", TIPS_EBUSY },
	{ "TIPS_EKEYEXISTS", TIPS_EKEYEXISTS }, { "TIPS_ENOTFOUND", TIPS_ENOTFOUND },
	{ "TIPS_EMISMATCH", TIPS_EMISMATCH },
};

static char *header_text;

/* The doc comment in front of the declaration of @fn in listdb.h (the nearest comment
 * before the TIPS_API line declaring @fn), or "" if there is none. */
static const char *doc_of(const char *fn, char *out, size_t cap)
{
	char pat[96];
	snprintf(pat, sizeof(pat), " %s(", fn);
	const char *decl = NULL; /* the TIPS_API line that declares @fn */
	for (const char *p = header_text; !decl && (p = strstr(p, "TIPS_API")); p++) {
		const char *eol = strchr(p, '\n');
		const char *f = strstr(p, pat);
		if (f && eol && f < eol)
			decl = p;
	}
	out[0] = '\0';
	if (!decl)
		return out;
	const char *end = NULL, *start = NULL;
	for (const char *p = header_text; p && p < decl; p = strstr(p + 2, "*/"))
		if (p != header_text)
			end = p;
	if (!end)
		return out;
	for (const char *p = header_text; (p = strstr(p, "/*")) && p < end; p += 2)
		start = p;
	if (start) {
		size_t n = (size_t)(end - start);
		snprintf(out, cap, "%.*s", (int)(n < cap ? n : cap - 1), start);
	}
	return out;
}

/* Whether the doc comment of any of @fns lists @code. */
static bool listed(const char *const *fns, unsigned nfns, int code)
{
	const char *name = NULL;
	for (size_t i = 0; i < sizeof(code_names) / sizeof(code_names[0]); i++)
		if (code_names[i].code == code)
			name = code_names[i].name;
	if (code == 0)
		return true;
	if (!name)
		return false;
	static char doc[8192];
	for (unsigned i = 0; i < nfns; i++) {
		doc_of(fns[i], doc, sizeof(doc));
		for (const char *p = doc; (p = strstr(p, name)); p++) {
			char after = p[strlen(name)];
			if (!(after >= 'A' && after <= 'Z'))
				return true;
		}
	}
	return false;
}

#define CHECK_LISTED(rc, want, ...)                                                       \
	do {                                                                             \
		const char *fns_[] = { __VA_ARGS__ };                                    \
		int got_ = (rc);                                                         \
		if (got_ != (want)) {                                                    \
			fprintf(stderr, "%s:%d: %s: got %d (%s: %s), wanted %d (%s)\n",    \
				__FILE__, __LINE__, ld_phase, got_, tips_strerror(got_),    \
				tips_errormsg(), (want), tips_strerror(want));            \
			test_failures++;                                                 \
		}                                                                        \
		if (!listed(fns_, sizeof(fns_) / sizeof(fns_[0]), got_)) {              \
			fprintf(stderr, "%s:%d: %s: %s returned %s, which its header does " \
				"not list\n", __FILE__, __LINE__, ld_phase, fns_[0],        \
				tips_strerror(got_));                                     \
			test_failures++;                                                 \
		}                                                                        \
	} while (0)

static char *read_file(const char *path)
{
	FILE *f = fopen(path, "r");
	REQUIRE(f != NULL);
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	fseek(f, 0, SEEK_SET);
	char *s = malloc((size_t)n + 1);
	REQUIRE(s && fread(s, 1, (size_t)n, f) == (size_t)n);
	s[n] = '\0';
	fclose(f);
	return s;
}

/* A TIPS pool with a root area of @root_size bytes, holding nothing of ListDB. */
static void make_plain_pool(const char *path, uint64_t root_size, bool scribble)
{
	struct tips_pool_options o;
	tips_pool_options_init(&o);
	o.size = 32ull << 20;
	o.root_size = root_size;
	struct tips_pool *pool = NULL;
	REQUIRE_RC(tips_pool_create(path, &o, &pool), 0);
	if (scribble) {
		size_t rs = 0;
		char *root = tips_pool_root(pool, &rs);
		memcpy(root, "not a ListDB root", 17);
	}
	REQUIRE_RC(tips_pool_close(&pool), 0);
}

/* Rewrites a field of the ListDB root of domain 0 (through the pool API). */
static void poke_root(const char *path, void (*poke)(struct ld_root *))
{
	struct tips_pool_options o;
	tips_pool_options_init(&o);
	struct tips_pool *pool = NULL;
	REQUIRE_RC(tips_pool_open(path, &o, &pool), 0);
	size_t rs = 0;
	poke(tips_pool_root(pool, &rs));
	REQUIRE_RC(tips_pool_close(&pool), 0);
}

static void set_version_99(struct ld_root *r) { r->layout_version = 99; }
/* Layout 2: the log before write batches (its readers would stop at a batch header). */
static void set_version_2(struct ld_root *r) { r->layout_version = 2; }
static void set_domains_0(struct ld_root *r) { r->domains = 0; }

static void test_codes(void)
{
	char path[256];
	struct tips_listdb_config cfg;
	struct tips_listdb *db = NULL, *db2 = NULL;
	const uint64_t ld_root_area = (sizeof(struct ld_root) + 65535) & ~(uint64_t)65535;
	header_text = read_file(LISTDB_HEADER);
	tips_listdb_config_init(&cfg);

	ld_phase = "codes: open";
	ld_path(path, sizeof(path));
	CHECK_LISTED(tips_listdb_open(NULL, &cfg, &db), TIPS_EINVAL, "tips_listdb_open");
	CHECK_LISTED(tips_listdb_open(path, &cfg, &db), TIPS_ENOENT, "tips_listdb_open");
	cfg.shards = 99;
	cfg.flags = TIPS_LISTDB_CREATE;
	CHECK_LISTED(tips_listdb_open(path, &cfg, &db), TIPS_EINVAL, "tips_listdb_open");
	tips_listdb_config_init(&cfg);
	make_plain_pool(path, 4096, false); /* a root area too small for ListDB */
	CHECK_LISTED(tips_listdb_open(path, &cfg, &db), TIPS_ESIZE, "tips_listdb_open");
	unlink(path);
	make_plain_pool(path, ld_root_area, true); /* somebody else's pool */
	CHECK_LISTED(tips_listdb_open(path, &cfg, &db), TIPS_EMISMATCH, "tips_listdb_open");
	cfg.flags = TIPS_LISTDB_CREATE;
	CHECK_LISTED(tips_listdb_open(path, &cfg, &db), TIPS_EEXIST, "tips_listdb_open");
	unlink(path);
	int fd = open(path, O_CREAT | O_WRONLY, 0600);
	REQUIRE(fd >= 0 && write(fd, "garbage, not a pool", 19) == 19);
	close(fd);
	CHECK_LISTED(tips_listdb_open(path, &cfg, &db), TIPS_ENOTPOOL, "tips_listdb_open");
	unlink(path);
	cfg.pool_size = 32ull << 20;
	REQUIRE_RC(tips_listdb_open(path, &cfg, &db), 0);
	CHECK_LISTED(tips_listdb_open(path, &cfg, &db2), TIPS_ELOCKED, "tips_listdb_open");
	CHECK_RC(tips_listdb_close(&db), 0);
	poke_root(path, set_version_99);
	CHECK_LISTED(tips_listdb_open(path, &cfg, &db), TIPS_EVERSION, "tips_listdb_open");
	poke_root(path, set_version_2);
	CHECK_LISTED(tips_listdb_open(path, &cfg, &db), TIPS_EVERSION, "tips_listdb_open");
	tips_listdb_destroy(path);
	REQUIRE_RC(tips_listdb_open(path, &cfg, &db), 0);
	CHECK_RC(tips_listdb_close(&db), 0);
	poke_root(path, set_domains_0);
	CHECK_LISTED(tips_listdb_open(path, &cfg, &db), TIPS_ECORRUPT, "tips_listdb_open");
	tips_listdb_destroy(path);

	ld_phase = "codes: writes and reads";
	db = open_db(path, 16ull << 20, NULL);
	CHECK_LISTED(tips_listdb_put(db, "k", 0, "v", 1), TIPS_EINVAL, "tips_listdb_put");
	CHECK_LISTED(tips_listdb_put(db, bigkey, TIPS_MAX_KEY + 1, "v", 1), TIPS_ETOOBIG,
		     "tips_listdb_put");
	CHECK_LISTED(tips_listdb_delete(db, NULL, 1), TIPS_EINVAL, "tips_listdb_delete");
	CHECK_LISTED(tips_listdb_put(db, "k", 1, "v", 1), 0, "tips_listdb_put");
	CHECK_LISTED(tips_listdb_insert(db, "k", 1, "v", 1), TIPS_EKEYEXISTS,
		     "tips_listdb_insert", "tips_listdb_put");
	CHECK_LISTED(tips_listdb_update(db, "q", 1, "v", 1), TIPS_ENOTFOUND,
		     "tips_listdb_update", "tips_listdb_put");
	CHECK_LISTED(tips_listdb_remove(db, "q", 1), TIPS_ENOTFOUND, "tips_listdb_remove",
		     "tips_listdb_put");
	size_t vl;
	CHECK_LISTED(tips_listdb_get(db, "k", 1, valbuf2, 0, &vl), TIPS_ESIZE, "tips_listdb_get");
	CHECK_LISTED(tips_listdb_get(db, "q", 1, valbuf2, 8, &vl), TIPS_ENOTFOUND,
		     "tips_listdb_get");
	CHECK_LISTED(tips_listdb_get(db, "q", 1, valbuf2, 8, NULL), TIPS_EINVAL,
		     "tips_listdb_get");
	CHECK_LISTED((int)tips_listdb_scan(db, NULL, 0, 1, NULL, NULL), TIPS_EINVAL,
		     "tips_listdb_scan");
	CHECK_LISTED(tips_listdb_flush(NULL, 1), TIPS_EINVAL, "tips_listdb_flush");
	CHECK_LISTED(tips_listdb_thread_domain(db, 7), TIPS_EINVAL, "tips_listdb_thread_domain");
	/* The pool full: puts get TIPS_ENOMEM. */
	long i;
	int rc = 0;
	for (i = 0; i < 100000 && rc == 0; i++) {
		unsigned char k[8];
		key_of((uint64_t)i, k);
		rc = tips_listdb_put(db, k, 8, valbuf, 1000);
	}
	CHECK_LISTED(rc, TIPS_ENOMEM, "tips_listdb_put");
	CHECK_LISTED(tips_listdb_close(&db), 0, "tips_listdb_close");
	CHECK_LISTED(tips_listdb_close(&db), TIPS_EINVAL, "tips_listdb_close");
	CHECK_LISTED(tips_listdb_destroy(path), 0, "tips_listdb_destroy");
	CHECK_LISTED(tips_listdb_destroy(path), TIPS_ENOENT, "tips_listdb_destroy");
	free(header_text);
}

/* ==== the fill workload, shared by fill, delete and kill ============================== */

/* What a filling process reports through its pipe, one record per event. */
enum { REC_INTENT = 1, REC_ACK = 2 };
enum { OP_PUT = 1, OP_DEL = 2 };
struct rec {
	uint8_t kind, op;
	uint8_t pad[6];
	uint64_t key;
};

struct fill_result {
	long acked_first;   /* puts acknowledged before the first error */
	int first_error;    /* its code */
	long deletes_ok, deletes_tried;
	int merge_rc;       /* tips_listdb_flush(db, 1) after the deletes */
	long acked_again;   /* puts acknowledged after the merge, until the next error */
	int second_error;
	uint64_t next_key;  /* keys [0, next_key) were tried */
	uint64_t fail1, fail2; /* the keys whose puts failed */
};

static void report(int fd, uint8_t kind, uint8_t op, uint64_t key)
{
	if (fd < 0)
		return;
	struct rec r = { kind, op, { 0 }, key };
	if (write(fd, &r, sizeof(r)) != (ssize_t)sizeof(r))
		_exit(4);
}

/* Puts fresh keys from *@next until the first error (at most @max puts). */
static long put_until_error(struct tips_listdb *db, uint64_t *next, long max, int fd, int *err,
			    uint64_t *failed_key)
{
	long ok = 0;
	unsigned char k[8];
	for (long n = 0; n < max; n++) {
		uint64_t i = (*next)++;
		key_of(i, k);
		size_t vl = value_of(i, valbuf);
		report(fd, REC_INTENT, OP_PUT, i);
		int rc = tips_listdb_put(db, k, 8, valbuf, vl);
		if (rc) {
			*err = rc;
			*failed_key = i;
			return ok;
		}
		report(fd, REC_ACK, OP_PUT, i);
		ok++;
	}
	*err = 0;
	return ok;
}

/* Fill until the first error, delete the first fifth of the keys, merge, fill again. */
static void run_fill(struct tips_listdb *db, int fd, struct fill_result *r)
{
	memset(r, 0, sizeof(*r));
	uint64_t next = 0;
	r->acked_first = put_until_error(db, &next, 10000000, fd, &r->first_error, &r->fail1);
	r->deletes_tried = r->acked_first / 5;
	unsigned char k[8];
	for (long i = 0; i < r->deletes_tried; i++) {
		key_of((uint64_t)i, k);
		report(fd, REC_INTENT, OP_DEL, (uint64_t)i);
		int rc = tips_listdb_delete(db, k, 8);
		if (rc == 0) {
			report(fd, REC_ACK, OP_DEL, (uint64_t)i);
			r->deletes_ok++;
		} else if (r->deletes_ok == i) {
			fprintf(stderr, "[%s] delete %ld in the full pool: %d (%s: %s)\n", ld_phase,
				i, rc, tips_strerror(rc), tips_errormsg());
		}
	}
	r->merge_rc = tips_listdb_flush(db, 1);
	r->acked_again = put_until_error(db, &next, 10000000, fd, &r->second_error, &r->fail2);
	r->next_key = next;
}

/* The expected state of key @i after run_fill() with result @r: 1 present, 0 absent. */
static int expected_after_fill(const struct fill_result *r, uint64_t i)
{
	if (i == r->fail1 || i == r->fail2)
		return 0;
	if ((long)i < r->deletes_tried)
		return 0; /* every delete must have succeeded (checked separately) */
	return i < r->next_key;
}

static long verify_fill(struct tips_listdb *db, const struct fill_result *r)
{
	long bad = 0, present = 0;
	for (uint64_t i = 0; i < r->next_key + 10; i++) {
		int st = key_state(db, i);
		int want = expected_after_fill(r, i);
		if (st == 1)
			present++;
		if (st != want && bad++ < 5)
			fprintf(stderr, "[%s] key %llu: state %d, expected %d\n", ld_phase,
				(unsigned long long)i, st, want);
	}
	CHECK(bad == 0);
	return present;
}

static void tune_fill(struct tips_listdb_config *cfg)
{
	cfg->memtable_entries = 4096;
}

#define FILL_POOL (32ull << 20)

static struct fill_result fill_figures; /* of the fill case, for the kill case's random point */

static void test_fill(void)
{
	char path[256];
	ld_phase = "fill";
	ld_path(path, sizeof(path));
	struct tips_listdb *db = open_db(path, FILL_POOL, tune_fill);
	struct fill_result r;
	double t0 = ld_now();
	run_fill(db, -1, &r);
	CHECK(r.acked_first > 0);
	CHECK_RC(r.first_error, TIPS_ENOMEM);
	CHECK(r.deletes_ok == r.deletes_tried);
	CHECK_RC(r.merge_rc, 0);
	CHECK(r.acked_again > 0);
	CHECK_RC(r.second_error, TIPS_ENOMEM);
	ld_phase = "fill: live";
	long live = verify_fill(db, &r);
	check_db(db, "fill: live");
	CHECK_RC(tips_listdb_close(&db), 0);
	struct tips_listdb_config cfg;
	tips_listdb_config_init(&cfg);
	REQUIRE_RC(tips_listdb_open(path, &cfg, &db), 0);
	ld_phase = "fill: after reopen";
	long back = verify_fill(db, &r);
	check_db(db, "fill: after reopen");
	long expected = r.acked_first - r.deletes_ok + r.acked_again;
	CHECK(back == expected && live == expected);
	printf("fill: %llu MiB pool: %ld puts acknowledged, then %s; %ld/%ld deletes in the full "
	       "pool; merge %s; %ld more puts, then %s; %ld keys live, %ld back after reopen "
	       "(expected %ld); %.1f s\n",
	       (unsigned long long)(FILL_POOL >> 20), r.acked_first, tips_strerror(r.first_error),
	       r.deletes_ok, r.deletes_tried, tips_strerror(r.merge_rc), r.acked_again,
	       tips_strerror(r.second_error), live, back, expected, ld_now() - t0);
	CHECK_RC(tips_listdb_close(&db), 0);
	tips_listdb_destroy(path);
	fill_figures = r;
}

/* ==== overwrite: rounds of overwrites make whole chunks obsolete; reclaiming them unlinks
 * their elements from L1 (gc.c: sorted, searched in windows, unlinked last to first) ==== */

#define OW_KEYS 20000u
#define OW_ROUNDS 10u

/* A configuration of the overwrite case. */
struct ow_config {
	const char *name;
	unsigned domains;
	int braided;
	int wal;
};
static const struct ow_config *ow_cfg;

static void tune_overwrite(struct tips_listdb_config *cfg)
{
	cfg->memtable_entries = 4096;
	cfg->domains = ow_cfg->domains;
	cfg->braided = ow_cfg->braided;
	if (ow_cfg->wal)
		cfg->flush_mode = TIPS_LISTDB_FLUSH_WAL;
}

/* Every key holds round @last's value; the count of those that do not. */
static long overwrite_verify(struct tips_listdb *db, uint64_t last)
{
	long bad = 0;
	unsigned char k[8];
	for (uint64_t i = 0; i < OW_KEYS; i++) {
		key_of(i, k);
		uint64_t v = 0, want = last * OW_KEYS + i;
		size_t vl = 0;
		int rc = tips_listdb_get(db, k, 8, &v, sizeof(v), &vl);
		if ((rc != 0 || vl != 8 || v != want) && bad++ < 5)
			fprintf(stderr, "[%s] key %llu: get %d, %zu bytes, value %llu (want %llu)\n",
				ld_phase, (unsigned long long)i, rc, vl, (unsigned long long)v,
				(unsigned long long)want);
	}
	return bad;
}

static void test_overwrite(const struct ow_config *oc)
{
	char path[256];
	ld_phase = oc->name;
	ld_path(path, sizeof(path));
	ow_cfg = oc;
	struct tips_listdb *db = open_db(path, 64ull << 20, tune_overwrite);
	unsigned char k[8];
	for (uint64_t r = 0; r < OW_ROUNDS; r++)
		for (uint64_t i = 0; i < OW_KEYS; i++) {
			key_of(i, k);
			uint64_t v = r * OW_KEYS + i;
			REQUIRE_RC(tips_listdb_put(db, k, 8, &v, 8), 0);
		}
	CHECK_RC(tips_listdb_flush(db, 1), 0);
	struct tips_listdb_stats st;
	tips_listdb_stats(db, &st);
	CHECK(st.chunks_reclaimed > 0);
	CHECK(overwrite_verify(db, OW_ROUNDS - 1) == 0);
	check_db(db, ld_phase);
	CHECK_RC(tips_listdb_close(&db), 0);
	struct tips_listdb_config cfg;
	tips_listdb_config_init(&cfg);
	REQUIRE_RC(tips_listdb_open(path, &cfg, &db), 0);
	CHECK(overwrite_verify(db, OW_ROUNDS - 1) == 0);
	check_db(db, ld_phase);
	printf("%s: %u keys x %u rounds; %llu chunks reclaimed; every key's last value back "
	       "after reopen\n", ld_phase, OW_KEYS, OW_ROUNDS,
	       (unsigned long long)st.chunks_reclaimed);
	CHECK_RC(tips_listdb_close(&db), 0);
	tips_listdb_destroy(path);
}

/* ==== delete: a full pool accepts deletes, and they make room ======================== */

static void test_delete(void)
{
	char path[256];
	ld_phase = "delete";
	ld_path(path, sizeof(path));
	struct tips_listdb *db = open_db(path, 16ull << 20, tune_fill);
	uint64_t next = 0, failed;
	int err;
	long acked = put_until_error(db, &next, 10000000, -1, &err, &failed);
	CHECK_RC(err, TIPS_ENOMEM);
	REQUIRE(acked > 1000);
	/* The pool is full: both kinds of delete still work. */
	long want = acked * 2 / 5, ok = 0; /* frees more chunks than the spare and one more */
	unsigned char k[8];
	for (long i = 0; i < want; i++) {
		key_of((uint64_t)i, k);
		int rc = (i & 1) ? tips_listdb_remove(db, k, 8) : tips_listdb_delete(db, k, 8);
		if (rc == 0)
			ok++;
		else if (ok == i)
			fprintf(stderr, "delete %ld of %ld in a full pool: %d (%s: %s)\n", i, want, rc,
				tips_strerror(rc), tips_errormsg());
	}
	CHECK(ok == want);
	/* Merged, the deletes free the chunks of the deleted keys. */
	CHECK_RC(tips_listdb_flush(db, 1), 0);
	struct tips_listdb_stats st;
	tips_listdb_stats(db, &st);
	CHECK(st.chunks_reclaimed > 0);
	long again = put_until_error(db, &next, 10000000, -1, &err, &failed);
	CHECK(again > 0);
	printf("delete: 16 MiB pool full after %ld puts; %ld/%ld deletes accepted; merged, "
	       "%llu chunks freed, %ld puts more\n", acked, ok, want,
	       (unsigned long long)st.chunks_reclaimed, again);
	CHECK_RC(tips_listdb_close(&db), 0);
	struct tips_listdb_config cfg;
	tips_listdb_config_init(&cfg);
	REQUIRE_RC(tips_listdb_open(path, &cfg, &db), 0);
	long bad = 0;
	for (uint64_t i = 0; i < next; i++) {
		int want_state = i < (uint64_t)want ? 0 : i != failed && i != (uint64_t)acked;
		if (key_state(db, i) != want_state && bad++ < 5)
			fprintf(stderr, "delete: after reopen key %llu wrong\n", (unsigned long long)i);
	}
	CHECK(bad == 0);
	check_db(db, "delete: after reopen");
	CHECK_RC(tips_listdb_close(&db), 0);
	tips_listdb_destroy(path);
}

/* ==== dram: the background runs out of DRAM ============================================ */

static enum tips_listdb_flush_mode dram_mode;

static void tune_dram(struct tips_listdb_config *cfg)
{
	cfg->flush_mode = dram_mode;
	cfg->memtable_entries = 256;
	cfg->max_immutable = 2;
	cfg->max_l0 = 3;
}

/* Puts until one fails (expected: @want) or @max succeed; marks acked[] */
static void put_until_fault(struct tips_listdb *db, uint64_t *next, uint8_t *acked, long max,
			    int want, const char *what)
{
	int rc = 0;
	for (long n = 0; n < max && rc == 0; n++) {
		uint64_t i = (*next)++;
		unsigned char k[8];
		key_of(i, k);
		size_t vl = value_of(i, valbuf);
		rc = tips_listdb_put(db, k, 8, valbuf, vl);
		acked[i] = rc == 0;
	}
	if (rc != want) {
		fprintf(stderr, "dram %s: the puts ended with %d (%s: %s), wanted %d (%s)\n", what,
			rc, tips_strerror(rc), tips_errormsg(), want, tips_strerror(want));
		test_failures++;
	}
}

static void verify_acked(struct tips_listdb *db, const uint8_t *acked, uint64_t n, const char *what)
{
	long bad = 0;
	for (uint64_t i = 0; i < n; i++)
		if (key_state(db, i) != acked[i] && bad++ < 5)
			fprintf(stderr, "dram %s: key %llu: wrong state (acked %d)\n", what,
				(unsigned long long)i, acked[i]);
	CHECK(bad == 0);
}

enum { MAXKEYS = 200000 };
static uint8_t acked[MAXKEYS];

/* Each fault site in turn, on a database that flushes in @mode. */
static void dram_faults_case(enum tips_listdb_flush_mode mode)
{
	static const struct {
		unsigned site;
		const char *name;
	} sites[] = {
		{ LD_DRAM_FLUSH, "flush" },
		{ LD_DRAM_ZIPPER, "compaction" },
		{ LD_DRAM_VIEW, "view" },
	};
	char path[256];
	dram_mode = mode;
	const char *mname = mode == TIPS_LISTDB_FLUSH_IUL ? "IUL" : "WAL";
	ld_path(path, sizeof(path));
	struct tips_listdb *db = open_db(path, 128ull << 20, tune_dram);
	uint64_t next = 0;
	memset(acked, 0, sizeof(acked));
	for (unsigned s = 0; s < 3; s++) {
		ld_phase = sites[s].name;
		put_until_fault(db, &next, acked, 1000, 0, "before the fault");
		atomic_store(&db->dram_faults, sites[s].site);
		/* Writers run into the stall the failing background causes: TIPS_ENOMEM. */
		put_until_fault(db, &next, acked, 50000, TIPS_ENOMEM, sites[s].name);
		verify_acked(db, acked, next, "during the fault"); /* reads are served */
		CHECK_RC(tips_listdb_flush(db, 1), TIPS_ENOMEM);
		atomic_store(&db->dram_faults, 0);
		CHECK_RC(tips_listdb_flush(db, 1), 0); /* retried, and now it works */
		put_until_fault(db, &next, acked, 1000, 0, "after the fault");
		verify_acked(db, acked, next, "after the fault");
		printf("dram %s: %s allocations failing: writers got TIPS_ENOMEM, reads served; "
		       "after the fault, merged and writing again (%llu keys tried)\n", mname,
		       sites[s].name, (unsigned long long)next);
	}
	check_db(db, "dram: live");
	CHECK_RC(tips_listdb_close(&db), 0);
	struct tips_listdb_config cfg;
	tips_listdb_config_init(&cfg);
	REQUIRE_RC(tips_listdb_open(path, &cfg, &db), 0);
	verify_acked(db, acked, next, "after reopen");
	check_db(db, "dram: after reopen");
	CHECK_RC(tips_listdb_close(&db), 0);
	tips_listdb_destroy(path);
}

static void test_dram(void)
{
	char path[256];
	struct tips_listdb *db;
	uint64_t next;
	dram_faults_case(TIPS_LISTDB_FLUSH_IUL);
	dram_faults_case(TIPS_LISTDB_FLUSH_WAL);

	/* WAL: flushes copy entries out of the log and find the pool full. */
	ld_phase = "dram: WAL full pool";
	ld_path(path, sizeof(path));
	struct tips_listdb_config wcfg;
	tips_listdb_config_init(&wcfg);
	wcfg.flags = TIPS_LISTDB_CREATE;
	wcfg.pool_size = 16ull << 20;
	wcfg.flush_mode = TIPS_LISTDB_FLUSH_WAL;
	wcfg.memtable_entries = 512;
	REQUIRE_RC(tips_listdb_open(path, &wcfg, &db), 0);
	memset(acked, 0, sizeof(acked));
	next = 0;
	put_until_fault(db, &next, acked, MAXKEYS - 1, TIPS_ENOMEM, "WAL fill");
	int frc = tips_listdb_flush(db, 1);
	CHECK(frc == 0 || frc == TIPS_ENOMEM);
	verify_acked(db, acked, next, "WAL full");
	CHECK_RC(tips_listdb_close(&db), 0);
	wcfg.flags = 0;
	REQUIRE_RC(tips_listdb_open(path, &wcfg, &db), 0);
	verify_acked(db, acked, next, "WAL after reopen");
	check_db(db, "dram: WAL after reopen");
	long n_acked = 0;
	for (uint64_t i = 0; i < next; i++)
		n_acked += acked[i];
	printf("dram: WAL 16 MiB pool: %ld puts acknowledged, then TIPS_ENOMEM; the final flush "
	       "returned %s; all back after reopen\n", n_acked, tips_strerror(frc));
	CHECK_RC(tips_listdb_close(&db), 0);
	tips_listdb_destroy(path);
}

/* ==== kill: the fill in a child killed at a random point =============================== */

enum { K_ABSENT = 0, K_PRESENT = 1, K_EITHER = 2 };

static void kill_round(unsigned round, uint64_t rseed, long total_events)
{
	char path[256];
	ld_path(path, sizeof(path));
	uint64_t rs = rseed;
	long kill_after = 1 + (long)(rnd(&rs) % (uint64_t)total_events);
	int pfd[2];
	REQUIRE(pipe(pfd) == 0);
	pid_t pid = fork();
	REQUIRE(pid >= 0);
	if (pid == 0) {
		close(pfd[0]);
		alarm(0);
		struct tips_listdb *db = open_db(path, FILL_POOL, tune_fill);
		struct fill_result r;
		run_fill(db, pfd[1], &r);
		tips_listdb_close(&db);
		_exit(0);
	}
	close(pfd[1]);
	size_t cap = 1 << 16, n = 0;
	uint8_t *state = calloc(cap, 1);
	REQUIRE(state);
	long acks = 0;
	bool killed = false;
	struct rec r;
	ssize_t got;
	while ((got = read(pfd[0], &r, sizeof(r))) == (ssize_t)sizeof(r)) {
		if (r.key >= cap) {
			size_t ncap = cap;
			while (r.key >= ncap)
				ncap *= 2;
			state = realloc(state, ncap);
			REQUIRE(state);
			memset(state + cap, 0, ncap - cap);
			cap = ncap;
		}
		if (r.key + 1 > n)
			n = r.key + 1;
		if (r.kind == REC_INTENT)
			state[r.key] = K_EITHER; /* the op may or may not have happened */
		else
			state[r.key] = r.op == OP_PUT ? K_PRESENT : K_ABSENT;
		if (r.kind == REC_ACK && ++acks == kill_after && !killed) {
			kill(pid, SIGKILL);
			killed = true;
		}
	}
	REQUIRE(got == 0);
	close(pfd[0]);
	int status;
	REQUIRE(waitpid(pid, &status, 0) == pid);
	bool died = WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
	if (!died && !(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
		fprintf(stderr, "kill round %u: the child ended with status %d\n", round, status);
		test_failures++;
	}
	/* Reopen: every acknowledged key with its value, nothing that was never tried. */
	struct tips_listdb_config cfg;
	tips_listdb_config_init(&cfg);
	struct tips_listdb *db = NULL;
	REQUIRE_RC(tips_listdb_open(path, &cfg, &db), 0);
	long bad = 0, present = 0, acked_present = 0;
	for (uint64_t i = 0; i < n + 16; i++) {
		int st = key_state(db, i);
		int want = i < n ? state[i] : K_ABSENT;
		present += st == 1;
		acked_present += st == 1 && want == K_PRESENT;
		if (st < 0 || (want != K_EITHER && st != want)) {
			if (bad++ < 5)
				fprintf(stderr, "kill round %u: key %llu: state %d, expected %d\n", round,
					(unsigned long long)i, st, want);
		}
	}
	CHECK(bad == 0);
	check_db(db, "kill: after reopen");
	printf("kill round %u (seed %llu): %s after %ld acknowledged ops; reopened: %ld keys "
	       "present, every acknowledged one with its value (%ld), %ld wrong\n", round,
	       (unsigned long long)rseed, died ? "SIGKILL" : "child finished first", acks,
	       present, acked_present, bad);
	CHECK_RC(tips_listdb_close(&db), 0);
	tips_listdb_destroy(path);
	free(state);
}

static void test_kill(unsigned rounds)
{
	ld_phase = "kill";
	/* A fill acknowledges this many ops (the fill case's figures, else an estimate). */
	long total = fill_figures.acked_first ? fill_figures.acked_first + fill_figures.deletes_ok +
							 fill_figures.acked_again
					      : 60000;
	uint64_t s = seed;
	for (unsigned i = 0; i < rounds; i++)
		kill_round(i, rnd(&s) | 1, total);
}

/* ---- scan against a merge's obsolete marks -------------------------------------------- */

struct scan_race {
	struct tips_listdb *db;
	struct ld_entry *old_version, *tombstone;
	struct ld_entry *before_tomb; /* bypass: B, re-pointed into L1 past the tombstone */
	unsigned char ka[8], kk[8];
	bool marked;
	long seen_deleted;
};

static int scan_race_cb(const void *k, size_t kl, const void *v, size_t vl, void *arg)
{
	(void)v;
	(void)vl;
	struct scan_race *r = arg;
	if (kl == 8 && !memcmp(k, r->kk, 8))
		r->seen_deleted++;
	if (!r->marked && kl == 8 && !memcmp(k, r->ka, 8)) {
		/* What Zipper's scan phase does when it merges the tombstone: the older
		 * version in L1 first, the tombstone at the end of the phase. The scan's L1
		 * cursor has already read the older version as live (it moved to it when it
		 * emitted A); its L0 cursor has not reached the tombstone yet. */
		ld_mark_obsolete(r->db, r->old_version);
		ld_mark_obsolete(r->db, r->tombstone);
		if (r->before_tomb) /* the merge phase links B: B now leads into L1, past T */
			ld_set_next(r->before_tomb, 0, r->old_version);
		r->marked = true;
	}
	return 0;
}

/* The element of @key in the bottom list starting after sentinel @head, or NULL. */
static struct ld_entry *find_in_list(struct ld_entry *head, const unsigned char *key)
{
	for (struct ld_entry *e = ld_next(head, 0); e; e = ld_next(e, 0))
		if (e->klen == 8 && !memcmp(ld_key(e), key, 8))
			return e;
	return NULL;
}

static void tune_no_compaction(struct tips_listdb_config *cfg)
{
	cfg->compaction = 0;
}

/* @bypass: also re-point B (before the tombstone in L0) into L1, as merging B does, so
 * that the scan's L0 cursor never meets the tombstone at all. */
static void scan_race(bool bypass)
{
	ld_phase = bypass ? "scan race, tombstone bypassed" : "scan race";
	char path[256];
	ld_path(path, sizeof(path));
	struct scan_race r = { .ka = "a0000000", .kk = "a0000002" };
	const unsigned char kb[8] = "a0000001"; /* A < B < K, one shard */
	struct tips_listdb *db = open_db(path, 64ull << 20, NULL);
	CHECK_RC(tips_listdb_put(db, r.ka, 8, "va", 2), 0);
	CHECK_RC(tips_listdb_put(db, r.kk, 8, "vk", 2), 0);
	CHECK_RC(tips_listdb_flush(db, 1), 0); /* A and K in L1 */
	CHECK_RC(tips_listdb_close(&db), 0);
	struct tips_listdb_config cfg;
	tips_listdb_config_init(&cfg);
	cfg.pool_size = 64ull << 20;
	cfg.expected_keys = 1u << 16;
	tune_no_compaction(&cfg);
	REQUIRE_RC(tips_listdb_open(path, &cfg, &db), 0); /* no merge from here on */
	CHECK_RC(tips_listdb_put(db, kb, 8, "vb", 2), 0);
	CHECK_RC(tips_listdb_delete(db, r.kk, 8), 0);
	CHECK_RC(tips_listdb_flush(db, 0), 0); /* B and K's tombstone in an L0 table */
	unsigned s = ld_shard_of(db, r.kk, 8);
	struct ld_view *v = atomic_load(&db->view);
	REQUIRE(v->nl0 == 1);
	r.db = db;
	r.old_version = find_in_list(ld_l1_head(db, s, 0), r.kk);
	r.tombstone = find_in_list(v->l0[0]->heads[s][0], r.kk);
	REQUIRE(r.old_version && r.tombstone && r.tombstone->op == LD_OP_DELETE &&
		r.old_version->op == LD_OP_PUT);
	if (bypass) {
		r.before_tomb = find_in_list(v->l0[0]->heads[s][0], kb);
		REQUIRE(r.before_tomb && ld_next(r.before_tomb, 0) == r.tombstone);
	}
	long n = tips_listdb_scan(db, r.ka, 8, 10, scan_race_cb, &r);
	CHECK(r.marked);
	CHECK(n == 2); /* A and B */
	CHECK(r.seen_deleted == 0);
	size_t vl;
	if (!bypass) /* (the bypass left the L0 table unlike any a merge leaves) */
		CHECK_RC(tips_listdb_get(db, r.kk, 8, valbuf, sizeof(valbuf), &vl), TIPS_ENOTFOUND);
	CHECK_RC(tips_listdb_close(&db), 0);
	tips_listdb_destroy(path);
}

static void test_scan_race(void)
{
	scan_race(false);
	scan_race(true);
}

int main(int argc, char **argv)
{
	const char *only;
	unsigned rounds = 4;
	int rc = ld_test_args(argc, argv, "listdb_rel", "test_listdb_rel [nullval|args|codes|"
			      "delete|overwrite|dram|fill|kill|scan] [--seed N] [--rounds N]", &only, &seed,
			      &rounds);
	if (rc)
		return rc;
	if (!only || !strcmp(only, "nullval"))
		test_nullval();
	if (!only || !strcmp(only, "args"))
		test_args();
	if (!only || !strcmp(only, "codes"))
		test_codes();
	if (!only || !strcmp(only, "delete"))
		test_delete();
	if (!only || !strcmp(only, "overwrite")) {
		static const struct ow_config ocs[] = {
			{ "overwrite, 1 domain", 1, 1, 0 },
			{ "overwrite, 2 domains, braided", 2, 1, 0 },
			{ "overwrite, 2 domains, oblivious", 2, 0, 0 },
			{ "overwrite, WAL", 1, 1, 1 },
		};
		for (size_t i = 0; i < sizeof(ocs) / sizeof(ocs[0]); i++)
			test_overwrite(&ocs[i]);
	}
	if (!only || !strcmp(only, "dram"))
		test_dram();
	if (!only || !strcmp(only, "fill") || !strcmp(only, "kill"))
		test_fill();
	if (!only || !strcmp(only, "kill"))
		test_kill(rounds);
	if (!only || !strcmp(only, "scan"))
		test_scan_race();
	return test_finish("test_listdb_rel");
}
