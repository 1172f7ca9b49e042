/*
 * bench_index.c - tips-bench's adapter over dram-NAME (ops table, malloc), tips-NAME
 * (facade, pool), pmdk-hash (libpmemobj baseline) indexes and listdb (tips/listdb.h);
 * see bench_index.h.
 */
#define _GNU_SOURCE
#include "bench_index.h"
#include "framework/framework.h" /* bench_lookup_past_facade: db->ops, db->index */

#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <tips/listdb.h>

#ifdef TIPS_HAVE_PMDK_HASH
#include "baselines/pmdk_hash.h"
#endif

static const char *const *names_list(void)
{
	static const char **names; /* built once, by the first caller */
	if (names)
		return names;
	size_t n = 0;
	const char *const *tips = tips_index_names();
	while (tips[n])
		n++;
	const char **v = calloc(n + 4, sizeof(*v));
	if (!v)
		return tips;
	memcpy(v, tips, n * sizeof(*v));
#ifdef TIPS_HAVE_PMDK_HASH
	v[n++] = PMDK_HASH_NAME;
#endif
	v[n++] = BENCH_LISTDB_NAME;
	v[n++] = BENCH_NULL_NAME;
	v[n] = NULL;
	names = v;
	return names;
}

/* ---- null: every operation succeeds and does nothing (the harness's own cost) ---- */

static char null_root;

static int null_create(const struct tips_index_config *cfg, void **root)
{
	(void)cfg;
	*root = &null_root;
	return 0;
}

static int null_open(void *root, void **index)
{
	*index = root;
	return 0;
}

static void null_close(void *index)
{
	(void)index;
}

static int null_write(void *index, const void *key, size_t klen, const void *val,
		      size_t vlen)
{
	(void)index, (void)key, (void)klen, (void)val, (void)vlen;
	return 0;
}

static int null_remove(void *index, const void *key, size_t klen)
{
	(void)index, (void)key, (void)klen;
	return 0;
}

static int null_lookup(void *index, const void *key, size_t klen, void *val, size_t cap,
		       size_t *vlen)
{
	(void)index, (void)key, (void)klen, (void)val, (void)cap;
	*vlen = 0;
	return 0;
}

static long null_scan(void *index, const void *start, size_t klen, size_t count,
		      tips_scan_fn fn, void *arg)
{
	(void)index, (void)start, (void)klen, (void)count, (void)fn, (void)arg;
	return 0;
}

static int null_walk(void *index, tips_walk_fn fn, void *arg)
{
	(void)index, (void)fn, (void)arg;
	return 0; /* owns no block (its root is static) */
}

static const struct tips_index_ops null_ops = {
	.name = BENCH_NULL_NAME,
	.concurrency = "none: every operation succeeds and does nothing (the harness alone)",
	.create = null_create, .open = null_open, .close = null_close,
	.insert = null_write, .update = null_write, .remove = null_remove,
	.lookup = null_lookup, .scan = null_scan, .walk = null_walk,
};

/* The ops table of @name among the volatile indexes (dram-*, null), or NULL. */
static const struct tips_index_ops *ops_named(const char *name)
{
	return strcmp(name, BENCH_NULL_NAME) == 0 ? &null_ops : tips_index_find(name);
}

const char *const *bench_index_names(void)
{
	return names_list();
}

static int is_pmdk(const char *name)
{
#ifdef TIPS_HAVE_PMDK_HASH
	return strcmp(name, PMDK_HASH_NAME) == 0;
#else
	(void)name;
	return 0;
#endif
}

static int is_listdb(const char *name)
{
	return strcmp(name, BENCH_LISTDB_NAME) == 0;
}

const char *bench_index_concurrency(const char *name)
{
	if (is_listdb(name))
		return "lock-free MemTable and readers; background flush + Zipper compaction";
#ifdef TIPS_HAVE_PMDK_HASH
	if (is_pmdk(name))
		return PMDK_HASH_CONCURRENCY;
#endif
	const struct tips_index_ops *ops = ops_named(name);
	return ops ? (ops->concurrency ? ops->concurrency : "") : NULL;
}

int bench_index_pm_counted(const struct bench_index *b)
{
	return b->pmdk == NULL;
}

uint64_t bench_pmdk_pool_size(uint64_t expected_keys)
{
#ifdef TIPS_HAVE_PMDK_HASH
	return pmdk_hash_pool_size(expected_keys);
#else
	(void)expected_keys;
	return 0;
#endif
}

static int is_tips(const struct tips_index_ops *ops)
{
	return strncmp(ops->name, "tips-", 5) == 0;
}

static int prefault_pools;

void bench_set_prefault(int on)
{
	prefault_pools = on != 0;
}

int bench_prefault(void)
{
	return prefault_pools;
}

const char *bench_pool_dir(void)
{
	const char *d = getenv("TIPS_BENCH_POOL_DIR");
	return d && *d ? d : "/dev/shm";
}

/* Copies the mount point field @in of /proc/mounts to @out, decoding its octal escapes
 * (a space is written \040). */
static void mount_field_decode(const char *in, char *out, size_t cap)
{
	size_t n = 0;
	for (; *in && n + 1 < cap; in++) {
		if (in[0] == '\\' && in[1] >= '0' && in[1] <= '3' && in[2] >= '0' && in[2] <= '7' &&
		    in[3] >= '0' && in[3] <= '7') {
			out[n++] = (char)((in[1] - '0') * 64 + (in[2] - '0') * 8 + (in[3] - '0'));
			in += 3;
		} else {
			out[n++] = *in;
		}
	}
	out[n] = 0;
}

/* The kernel's shmem THP policy when it overrides every mount (force, deny), else "". */
static const char *shmem_override(void)
{
	char line[256];
	FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/shmem_enabled", "r");
	if (!f)
		return "";
	const char *r = "";
	if (fgets(line, sizeof(line), f))
		r = strstr(line, "[force]") ? "2M" : strstr(line, "[deny]") ? "4K" : "";
	fclose(f);
	return r;
}

/* The page size a tmpfs mount gives its files' mappings: its huge= option (always or
 * within_size: 2 MiB pages where they fit), else 4 KiB, unless the kernel's shmem policy
 * forces or denies huge pages for every mount. The mount is the one of /proc/mounts
 * whose mount point is the longest prefix of the directory's real path (the last such
 * line when several are stacked). */
const char *bench_pool_pages(void)
{
	char dir[PATH_MAX];
	if (!realpath(bench_pool_dir(), dir))
		return "unknown";
	FILE *f = fopen("/proc/mounts", "r");
	if (!f)
		return "unknown";
	char line[2048], best_fs[64] = "", best_opts[512] = "";
	size_t best = 0;
	while (fgets(line, sizeof(line), f)) {
		char dev[256], raw[1024], mnt[1024], fs[64], opts[512];
		if (sscanf(line, "%255s %1023s %63s %511s", dev, raw, fs, opts) != 4)
			continue;
		mount_field_decode(raw, mnt, sizeof(mnt));
		size_t n = strlen(mnt);
		bool under = strncmp(dir, mnt, n) == 0 &&
			     (dir[n] == '/' || dir[n] == 0 || (n == 1 && mnt[0] == '/'));
		if (under && n >= best) {
			best = n;
			snprintf(best_fs, sizeof(best_fs), "%s", fs);
			snprintf(best_opts, sizeof(best_opts), "%s", opts);
		}
	}
	fclose(f);
	if (strcmp(best_fs, "tmpfs") != 0)
		return "unknown";
	const char *forced = shmem_override();
	if (*forced)
		return forced;
	return strstr(best_opts, "huge=always") || strstr(best_opts, "huge=within_size") ? "2M"
												: "4K";
}

uint64_t bench_pool_size(uint64_t expected_keys)
{
	return ((expected_keys * 160 + (512ull << 20)) >> 21) << 21; /* 2 MiB granules */
}

uint64_t bench_listdb_pool_size(uint64_t expected_keys)
{
	uint64_t bytes = expected_keys * 200 + (256ull << 20);
	return (bytes + TIPS_POOL_ALIGN - 1) / TIPS_POOL_ALIGN * TIPS_POOL_ALIGN;
}

/* The knobs of the next listdb open (bench_listdb_configure). */
static struct tips_listdb_config listdb_knobs;
static int listdb_knobs_set;

void bench_listdb_configure(const struct tips_listdb_config *cfg)
{
	listdb_knobs_set = cfg != NULL;
	if (cfg)
		listdb_knobs = *cfg;
}

/* @how's pool options (the defaults if none) with the prefault setting, in @o. */
static const struct tips_pool_options *pool_options_of(const struct bench_open_how *how,
						       struct tips_pool_options *o)
{
	if (how->pool)
		*o = *how->pool;
	else
		tips_pool_options_init(o);
	o->prefault = prefault_pools;
	return o;
}

static int listdb_open_at(struct bench_index *b, const struct bench_open_how *how)
{
	struct tips_pool_options popts;
	struct tips_listdb_config cfg;
	if (listdb_knobs_set)
		cfg = listdb_knobs;
	else
		tips_listdb_config_init(&cfg);
	if (how->existing)
		cfg.flags &= ~(unsigned)TIPS_LISTDB_CREATE;
	else
		cfg.flags |= TIPS_LISTDB_CREATE;
	cfg.expected_keys = how->expected_keys;
	cfg.pool_size = how->pool_size ? how->pool_size : bench_listdb_pool_size(how->expected_keys);
	if (how->pool || prefault_pools)
		cfg.pool = pool_options_of(how, &popts);
	return tips_listdb_open(b->pool, &cfg, &b->ldb);
}

enum bench_kind bench_index_kind(const char *name)
{
	if (is_listdb(name))
		return BENCH_LISTDB;
	if (is_pmdk(name))
		return BENCH_PMDK;
	const struct tips_index_ops *ops = ops_named(name);
	if (!ops)
		return BENCH_NONE;
	return is_tips(ops) ? BENCH_TIPS : BENCH_DRAM;
}

int bench_kind_persists_in_pools(enum bench_kind kind)
{
	return kind == BENCH_TIPS || kind == BENCH_LISTDB;
}

int bench_index_open(struct bench_index *b, const char *name, const char *pool_path,
		     uint64_t pool_size, uint64_t expected_keys, int keep)
{
	struct bench_open_how how = { pool_path, pool_size, expected_keys, keep, 0, NULL };
	return bench_index_open_with(b, name, &how);
}

int bench_index_open_with(struct bench_index *b, const char *name,
			  const struct bench_open_how *how)
{
	const char *pool_path = how->pool_path;
	uint64_t pool_size = how->pool_size, expected_keys = how->expected_keys;
	memset(b, 0, sizeof(*b));
	b->name = name;
	b->kind = bench_index_kind(name);
	b->ops = ops_named(name);
	if (b->kind == BENCH_NONE) {
		fprintf(stderr, "tips-bench: no index named '%s' (see --list)\n", name);
		return TIPS_EINVAL;
	}
	if (b->ops && !is_tips(b->ops)) {
		struct tips_index_config cfg = { expected_keys };
		void *root;
		int rc = b->ops->create(&cfg, &root);
		return rc ? rc : b->ops->open(root, &b->handle);
	}
	if (pool_path)
		snprintf(b->pool, sizeof(b->pool), "%s", pool_path);
	else if (snprintf(b->pool, sizeof(b->pool), "%s/tips-bench-%s%d.pool", bench_pool_dir(),
			  b->ops ? "" : is_listdb(name) ? "listdb-" : "pmdk-",
			  (int)getpid()) >= (int)sizeof(b->pool))
		return tips_set_error(TIPS_EINVAL, "TIPS_BENCH_POOL_DIR is too long (%zu bytes)",
				      strlen(bench_pool_dir()));
	b->remove_pool = !how->keep;
	if (is_listdb(name)) {
		if (!pool_path)
			tips_listdb_destroy(b->pool); /* a leftover of an earlier run with this pid */
		return listdb_open_at(b, how);
	}
	if (!pool_path)
		unlink(b->pool); /* a leftover of an earlier run with the same pid */
#ifdef TIPS_HAVE_PMDK_HASH
	if (!b->ops) {
		pmdk_hash_force_flushes();
		struct pmdk_hash_config pc = { how->existing ? 0 : PMDK_HASH_CREATE,
					       pool_size ? pool_size
							 : pmdk_hash_pool_size(expected_keys),
					       expected_keys, prefault_pools };
		return pmdk_hash_open(b->pool, &pc, &b->pmdk);
	}
#endif
	struct tips_config cfg;
	tips_config_init(&cfg);
	cfg.flags = how->existing ? 0 : TIPS_CREATE;
	cfg.expected_keys = expected_keys;
	cfg.pool_size = pool_size ? pool_size : bench_pool_size(expected_keys);
	struct tips_pool_options popts;
	cfg.pool = how->pool || prefault_pools ? pool_options_of(how, &popts) : NULL;
	return tips_open(b->pool, &cfg, b->ops, &b->db);
}

struct block_list {
	void **v;
	size_t n, cap;
};

static int collect_block(const void *block, void *arg)
{
	struct block_list *l = arg;
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 1024;
		void **v = realloc(l->v, cap * sizeof(*v));
		if (!v)
			return 1;
		l->v = v;
		l->cap = cap;
	}
	l->v[l->n++] = (void *)block;
	return 0;
}

int bench_index_close(struct bench_index *b)
{
	int rc = 0;
	if (b->ldb) {
		rc = tips_listdb_close(&b->ldb);
		if (b->remove_pool)
			tips_listdb_destroy(b->pool);
	} else if (b->db) {
		rc = tips_close(&b->db);
		if (b->remove_pool)
			unlink(b->pool);
#ifdef TIPS_HAVE_PMDK_HASH
	} else if (b->pmdk) {
		pmdk_hash_close(&b->pmdk);
		if (b->remove_pool)
			unlink(b->pool);
#endif
	} else if (b->handle) {
		/* A volatile index has no destroy: free the blocks its walk reports. */
		struct block_list l = { 0 };
		int walked = b->ops->walk(b->handle, collect_block, &l);
		b->ops->close(b->handle);
		for (size_t i = 0; walked == 0 && i < l.n; i++)
			free(l.v[i]);
		free(l.v);
	}
	b->handle = NULL;
	return rc;
}

void bench_index_stats(struct bench_index *b, struct bench_store_stats *out)
{
	memset(out, 0, sizeof(*out));
	out->recovered = -1; /* pmdk-hash: libpmemobj recovers inside pmemobj_open and
			      * says nothing of it; dram: nothing to recover */
	if (b->db) {
		struct tips_stats st;
		tips_stats(b->db, &st);
		out->background = st.reclamations;
		out->recovery_ms = st.recovery_ms;
		out->recovered = st.recovered;
	} else if (b->ldb) {
		struct tips_listdb_stats st;
		tips_listdb_stats(b->ldb, &st);
		out->background = st.compactions;
		out->recovery_ms = st.recovery_ms;
		out->recovered = st.recovered;
	}
}

const char *bench_kind_background(enum bench_kind kind)
{
	return kind == BENCH_LISTDB ? "Zipper compactions" : "reclamations";
}

struct problem_relay {
	bench_problem_fn fn;
	void *arg;
};

static void relay_problem(enum tips_block_problem what, const void *block, size_t size,
			  void *arg)
{
	struct problem_relay *r = arg;
	r->fn(what, (uint64_t)(uintptr_t)block, size, r->arg);
}

int bench_index_check(struct bench_index *b, bench_problem_fn fn, void *arg,
		      struct bench_check_report *rep)
{
	memset(rep, 0, sizeof(*rep));
	if (b->db) {
		struct tips_db_report dr;
		struct problem_relay relay = { fn, arg };
		memset(&dr, 0, sizeof(dr));
		int rc = tips_db_check(b->db, fn ? relay_problem : NULL, &relay, &dr);
		rep->allocated = dr.blocks_allocated;
		rep->owned = dr.blocks_owned;
		rep->heap_errors = dr.heap.errors;
		snprintf(rep->first_error, sizeof(rep->first_error), "%s", dr.heap.first_error);
		return rc;
	}
	if (b->ldb) {
		int rc = tips_listdb_flush(b->ldb, 1); /* the fixed point (see the header) */
		if (rc)
			return rc;
		struct tips_listdb_report lr;
		memset(&lr, 0, sizeof(lr));
		rc = tips_listdb_check(b->ldb, &lr);
		rep->allocated = lr.heap_blocks;
		rep->owned = lr.chunks;
		if (rc == TIPS_ECORRUPT) {
			rep->heap_errors = 1;
			snprintf(rep->first_error, sizeof(rep->first_error),
				 "tips_listdb_check: %s", tips_errormsg());
			return 0; /* a heap error, not a failure of the check itself */
		}
		return rc;
	}
#ifdef TIPS_HAVE_PMDK_HASH
	if (b->pmdk) {
		struct pmdk_hash_report pr;
		memset(&pr, 0, sizeof(pr));
		int rc = pmdk_hash_check(b->pmdk, fn, arg, &pr);
		rep->allocated = pr.objects;
		rep->owned = pr.reachable;
		return rc;
	}
#endif
	return TIPS_EINVAL;
}

int bench_index_check_closed(const struct bench_index *b)
{
#ifdef TIPS_HAVE_PMDK_HASH
	if (b->kind == BENCH_PMDK)
		return pmdk_hash_check_file(b->pool); /* libpmemobj's pmemobj_check */
#endif
	(void)b;
	return 0;
}

#ifdef TIPS_HAVE_PMDK_HASH
#define IF_PMDK_RETURN(b, call) if ((b)->pmdk) return call
#else
#define IF_PMDK_RETURN(b, call) (void)0
#endif

int bench_insert(struct bench_index *b, const void *k, size_t kl, const void *v, size_t vl)
{
	IF_PMDK_RETURN(b, pmdk_hash_insert(b->pmdk, k, kl, v, vl));
	if (b->ldb)
		return tips_listdb_insert(b->ldb, k, kl, v, vl);
	return b->db ? tips_insert(b->db, k, kl, v, vl) : b->ops->insert(b->handle, k, kl, v, vl);
}

int bench_update(struct bench_index *b, const void *k, size_t kl, const void *v, size_t vl)
{
	IF_PMDK_RETURN(b, pmdk_hash_update(b->pmdk, k, kl, v, vl));
	if (b->ldb)
		return tips_listdb_update(b->ldb, k, kl, v, vl);
	return b->db ? tips_update(b->db, k, kl, v, vl) : b->ops->update(b->handle, k, kl, v, vl);
}

int bench_remove(struct bench_index *b, const void *k, size_t kl)
{
	IF_PMDK_RETURN(b, pmdk_hash_remove(b->pmdk, k, kl));
	if (b->ldb)
		return tips_listdb_remove(b->ldb, k, kl);
	return b->db ? tips_remove(b->db, k, kl) : b->ops->remove(b->handle, k, kl);
}

int bench_put(struct bench_index *b, const void *k, size_t kl, const void *v, size_t vl)
{
	IF_PMDK_RETURN(b, pmdk_hash_put(b->pmdk, k, kl, v, vl));
	if (b->ldb)
		return tips_listdb_put(b->ldb, k, kl, v, vl);
	if (b->db)
		return tips_put(b->db, k, kl, v, vl);
	for (;;) { /* dram-*: no blind write in the ops table */
		int rc = b->ops->insert(b->handle, k, kl, v, vl);
		if (rc != TIPS_EKEYEXISTS)
			return rc;
		rc = b->ops->update(b->handle, k, kl, v, vl);
		if (rc != TIPS_ENOTFOUND)
			return rc; /* else removed since the insert: insert again */
	}
}

int bench_index_has_batches(const struct bench_index *b)
{
	return !b->pmdk;
}

/* dram-*: the batch's operations one by one, in order (the volatile baseline keeps no
 * atomicity); the first failure is returned. */
static int batch_one_by_one(struct bench_index *b, const struct tips_batch *batch)
{
	for (size_t i = 0; i < tips_batch_count(batch); i++) {
		enum tips_batch_kind kind;
		const void *k, *v;
		size_t kl, vl;
		tips_batch_get(batch, i, &kind, &k, &kl, &v, &vl);
		int rc;
		switch (kind) {
		case TIPS_BATCH_PUT: rc = bench_put(b, k, kl, v, vl); break;
		case TIPS_BATCH_INSERT: rc = bench_insert(b, k, kl, v, vl); break;
		case TIPS_BATCH_UPDATE: rc = bench_update(b, k, kl, v, vl); break;
		case TIPS_BATCH_DELETE:
			rc = bench_remove(b, k, kl);
			rc = rc == TIPS_ENOTFOUND ? 0 : rc;
			break;
		default: rc = bench_remove(b, k, kl); break;
		}
		if (rc)
			return rc;
	}
	return 0;
}

int bench_batch_commit(struct bench_index *b, struct tips_batch *batch)
{
	if (!bench_index_has_batches(b))
		return TIPS_EINVAL;
	if (b->ldb)
		return tips_listdb_batch_commit(b->ldb, batch);
	return b->db ? tips_batch_commit(b->db, batch) : batch_one_by_one(b, batch);
}

int bench_lookup(struct bench_index *b, const void *k, size_t kl, void *v, size_t cap,
		 size_t *vl)
{
	void *store;
	int rc = bench_lookup_direct(b, &store)(store, k, kl, v, cap, vl);
	return rc == TIPS_ESIZE ? 0 : rc; /* found, longer than the buffer: still found */
}

/* Adapters to bench_lookup_fn's signature: each compiles to one jump. */
static int lookup_listdb(void *s, const void *k, size_t kl, void *v, size_t cap, size_t *vl)
{
	return tips_listdb_get(s, k, kl, v, cap, vl);
}

#ifdef TIPS_HAVE_PMDK_HASH
static int lookup_pmdk(void *s, const void *k, size_t kl, void *v, size_t cap, size_t *vl)
{
	return pmdk_hash_lookup(s, k, kl, v, cap, vl);
}
#endif

static int lookup_tips(void *s, const void *k, size_t kl, void *v, size_t cap, size_t *vl)
{
	return tips_get(s, k, kl, v, cap, vl);
}

bench_lookup_fn bench_lookup_direct(const struct bench_index *b, void **store)
{
	if (b->ldb) {
		*store = b->ldb;
		return lookup_listdb;
	}
#ifdef TIPS_HAVE_PMDK_HASH
	if (b->pmdk) {
		*store = b->pmdk;
		return lookup_pmdk;
	}
#endif
	if (b->db) {
		*store = b->db;
		return lookup_tips;
	}
	*store = b->handle;
	return b->ops->lookup;
}

bench_lookup_fn bench_lookup_past_facade(const struct bench_index *b, void **store)
{
	if (!b->db)
		return bench_lookup_direct(b, store);
	*store = b->db->index;
	return b->db->ops->lookup;
}

static int count_pair(const void *k, size_t kl, const void *v, size_t vl, void *arg)
{
	(void)k, (void)kl, (void)v, (void)vl, (void)arg;
	return 0;
}

long bench_scan(struct bench_index *b, const void *start, size_t kl, size_t count)
{
	return bench_scan_each(b, start, kl, count, count_pair, NULL);
}

long bench_scan_each(struct bench_index *b, const void *start, size_t kl, size_t count,
		     tips_scan_fn fn, void *arg)
{
	IF_PMDK_RETURN(b, pmdk_hash_scan(b->pmdk, start, kl, count, fn, arg));
	if (b->ldb)
		return tips_listdb_scan(b->ldb, start, kl, count, fn, arg);
	return b->db ? tips_scan(b->db, start, kl, count, fn, arg)
		     : b->ops->scan(b->handle, start, kl, count, fn, arg);
}
