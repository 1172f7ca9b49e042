/*
 * store.c - the store of tips-server (store.h): one small set of calls that reaches
 * either a TIPS database or a ListDB, so the keyspace code never asks which it has.
 *
 * Invariant: every call maps to exactly one facade call of the engine, so the engine's
 * promises (durable on return, visible only once durable, batches all or nothing) hold
 * unchanged for the server.
 */
#include "store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The ordered indexes: a scan from a start key costs O(log n + count). */
static const char *const ordered_indexes[] = {"tips-art", "tips-bptree", "tips-bst",
					      "tips-lfbst", "listdb", NULL};

struct store {
	struct tips_db *tips;     /* one of these two is set */
	struct tips_listdb *ldb;
	struct store_info info;
	char index[32];
};

static int is_ordered(const char *index)
{
	for (int i = 0; ordered_indexes[i]; i++)
		if (!strcmp(index, ordered_indexes[i]))
			return 1;
	return 0;
}

/* The names a user may pick: every tips-* index and listdb. */
static int index_allowed(const char *index)
{
	if (!strcmp(index, "listdb"))
		return 1;
	return !strncmp(index, "tips-", 5) && tips_index_find(index) != NULL;
}

static void list_indexes(char *buf, size_t cap)
{
	size_t n = 0;
	buf[0] = 0;
	for (const char *const *p = tips_index_names(); *p && n < cap; p++)
		if (!strncmp(*p, "tips-", 5))
			n += (size_t)snprintf(buf + n, cap - n, "%s, ", *p);
	if (n < cap)
		snprintf(buf + n, cap - n, "listdb");
}

/*
 * A pool locked by a server that was just killed stays locked until the kernel has torn
 * down the dead process's mapping, which may finish after the process is reaped (another
 * process reading its /proc files holds the address space a moment): a restart waits
 * up to LOCK_WAIT_MS for it. A pool held by a live process is still refused, after
 * that wait, with the pool's own message.
 */
#define LOCK_WAIT_MS 3000u
#define LOCK_POLL_MS 20u

/* Keys a pool of @pool_size bytes is sized for (the DRAM cache, a hash index's table):
 * about 256 bytes a key, at least the library's default of 1M. */
static uint64_t expected_keys_of(uint64_t pool_size)
{
	uint64_t k = pool_size / 256;
	return k < (1ull << 20) ? (1ull << 20) : k;
}

/*
 * Tests only: with TIPS_SERVER_SIM_CRASH_AT=K in the environment the pool is opened on
 * the simulated media (tips/pool.h), armed to lose power at persist event K: unflushed
 * lines are dropped (a share TIPS_SERVER_SIM_EVICT, default 0.5, written back first)
 * and the process exits with status 86 (tests/server/test_crash.py --sim).
 */
static const struct tips_pool_options *sim_options(struct tips_pool_options *o)
{
	const char *at = getenv("TIPS_SERVER_SIM_CRASH_AT");
	if (!at || !*at)
		return NULL;
	const char *evict = getenv("TIPS_SERVER_SIM_EVICT");
	tips_pool_options_init(o);
	o->media = TIPS_MEDIA_SIM;
	o->sim_crash_at = strtoull(at, NULL, 10);
	o->sim_evict = evict ? strtod(evict, NULL) : 0.5;
	o->sim_seed = o->sim_crash_at;
	o->sim_crash_exit_code = 86;
	return o;
}

static int engine_open(struct store *s, const char *path, const char *index,
		       uint64_t pool_size)
{
	struct tips_pool_options sim;
	const struct tips_pool_options *popts = sim_options(&sim);
	if (!strcmp(index, "listdb")) {
		struct tips_listdb_config cfg;
		tips_listdb_config_init(&cfg);
		cfg.flags = TIPS_LISTDB_CREATE;
		cfg.pool_size = pool_size;
		cfg.expected_keys = expected_keys_of(pool_size);
		cfg.pool = popts;
		return tips_listdb_open(path, &cfg, &s->ldb);
	}
	struct tips_config cfg;
	tips_config_init(&cfg);
	cfg.flags = TIPS_CREATE;
	cfg.pool_size = pool_size;
	cfg.expected_keys = expected_keys_of(pool_size);
	cfg.pool = popts;
	return tips_open(path, &cfg, tips_index_find(index), &s->tips);
}

int store_open(const char *path, const char *index, uint64_t pool_size, struct store **out,
	       char *err, size_t errlen)
{
	if (!index_allowed(index)) {
		char names[512];
		list_indexes(names, sizeof(names));
		snprintf(err, errlen, "unknown index '%s' (choose one of: %s)", index, names);
		return TIPS_EINVAL;
	}
	struct store *s = calloc(1, sizeof(*s));
	if (!s) {
		snprintf(err, errlen, "out of memory");
		return TIPS_ENOMEM;
	}
	snprintf(s->index, sizeof(s->index), "%s", index);
	int created = access(path, F_OK) != 0;
	/* Pools come in 2 MiB granules: round the size up rather than refuse "2gb" */
	pool_size = (pool_size + TIPS_POOL_ALIGN - 1) / TIPS_POOL_ALIGN * TIPS_POOL_ALIGN;
	int rc;
	for (unsigned waited_ms = 0;; waited_ms += LOCK_POLL_MS) {
		rc = engine_open(s, path, index, pool_size);
		if (rc != TIPS_ELOCKED || waited_ms >= LOCK_WAIT_MS)
			break;
		struct timespec ts = { 0, LOCK_POLL_MS * 1000000L };
		nanosleep(&ts, NULL);
	}
	if (rc) {
		snprintf(err, errlen, "cannot open pool %s with index %s: %s: %s", path, index,
			 tips_strerror(rc), tips_errormsg());
		free(s);
		return rc;
	}
	struct tips_pool_info pi;
	memset(&pi, 0, sizeof(pi));
	tips_pool_stat(path, &pi);
	s->info.index = s->index;
	s->info.ordered = is_ordered(index);
	s->info.media = tips_media_name(pi.media);
	snprintf(s->info.media_reason, sizeof(s->info.media_reason), "%s", pi.media_reason);
	s->info.pool_size = pi.size;
	s->info.created = created;
	if (s->tips) {
		struct tips_stats st;
		tips_stats(s->tips, &st);
		s->info.recovered = st.recovered;
		s->info.recovery_ms = st.recovery_ms;
	} else {
		struct tips_listdb_stats st;
		tips_listdb_stats(s->ldb, &st);
		s->info.recovered = st.recovered;
		s->info.recovery_ms = st.recovery_ms;
	}
	*out = s;
	return 0;
}

int store_close(struct store **sp)
{
	struct store *s = *sp;
	*sp = NULL;
	if (!s)
		return 0;
	int rc = s->tips ? tips_close(&s->tips) : tips_listdb_close(&s->ldb);
	free(s);
	return rc;
}

int store_get(struct store *s, const void *key, size_t klen, void *val, size_t cap,
	      size_t *vlen)
{
	if (s->tips)
		return tips_get(s->tips, key, klen, val, cap, vlen);
	return tips_listdb_get(s->ldb, key, klen, val, cap, vlen);
}

static long engine_scan(struct store *s, const void *start, size_t klen, size_t count,
			tips_scan_fn fn, void *arg)
{
	if (s->tips)
		return tips_scan(s->tips, start, klen, count, fn, arg);
	return tips_listdb_scan(s->ldb, start, klen, count, fn, arg);
}

/* One chunk of a chunked scan: forwards to the caller's callback, remembering the last
 * key passed and skipping the key the chunk started from (it was passed before). */
struct chunk_state {
	tips_scan_fn fn;
	void *arg;
	unsigned char last[TIPS_MAX_KEY];
	size_t last_len;
	int skip_first;   /* the chunk starts at the previous chunk's last key */
	int stopped;      /* the caller's callback returned non-zero */
	long passed;      /* pairs passed to the caller in all chunks */
	size_t seen;      /* pairs this chunk produced */
};

static int chunk_visit(const void *k, size_t kl, const void *v, size_t vl, void *a)
{
	struct chunk_state *c = a;
	c->seen++;
	if (c->skip_first && c->seen == 1 && kl == c->last_len && !memcmp(k, c->last, kl))
		return 0;
	memcpy(c->last, k, kl);
	c->last_len = kl;
	c->passed++;
	if (c->fn(k, kl, v, vl, c->arg)) {
		c->stopped = 1;
		return 1;
	}
	return 0;
}

/*
 * A scan of an ordered store goes in chunks of SCAN_CHUNK pairs, each one started from
 * the last key of the one before: the engines copy every pair a scan asks for before
 * the first callback, so one scan of "everything from here" would copy the rest of the
 * keyspace to find the few keys of a prefix. A hash table visits every bucket for any
 * scan, so there one scan is cheapest. Each chunk, like a single scan, sees every
 * write completed before it began.
 */
#define SCAN_CHUNK 256u

long store_scan(struct store *s, const void *start, size_t klen, size_t count,
		tips_scan_fn fn, void *arg)
{
	if (!s->info.ordered || count <= SCAN_CHUNK)
		return engine_scan(s, start, klen, count, fn, arg);
	struct chunk_state *c = malloc(sizeof(*c));
	if (!c)
		return TIPS_ENOMEM;
	*c = (struct chunk_state){ .fn = fn, .arg = arg };
	const void *from = start;
	size_t from_len = klen;
	long rc = 0;
	while ((size_t)c->passed < count) {
		size_t want = count - (size_t)c->passed + (size_t)c->skip_first;
		c->seen = 0;
		rc = engine_scan(s, from, from_len, want < SCAN_CHUNK ? want : SCAN_CHUNK,
				 chunk_visit, c);
		if (rc < 0 || c->stopped || c->seen < (want < SCAN_CHUNK ? want : SCAN_CHUNK))
			break;
		from = c->last;
		from_len = c->last_len;
		c->skip_first = 1;
	}
	long passed = c->passed;
	free(c);
	return rc < 0 ? rc : passed;
}

int store_put(struct store *s, const void *key, size_t klen, const void *val, size_t vlen)
{
	if (s->tips)
		return tips_put(s->tips, key, klen, val, vlen);
	return tips_listdb_put(s->ldb, key, klen, val, vlen);
}

int store_delete(struct store *s, const void *key, size_t klen)
{
	if (s->tips) {
		int rc = tips_remove(s->tips, key, klen);
		return rc == TIPS_ENOTFOUND ? 0 : rc;
	}
	return tips_listdb_delete(s->ldb, key, klen);
}

int store_commit(struct store *s, struct tips_batch *b)
{
	if (s->tips)
		return tips_batch_commit(s->tips, b);
	return tips_listdb_batch_commit(s->ldb, b);
}

void store_batch_limit(struct store *s, size_t *max_ops, size_t *max_bytes)
{
	if (s->tips)
		tips_batch_limit(s->tips, max_ops, max_bytes);
	else
		tips_listdb_batch_limit(s->ldb, max_ops, max_bytes);
}

void store_info(struct store *s, struct store_info *out)
{
	*out = s->info;
}

void store_stats(struct store *s, struct tips_stats *tips, struct tips_listdb_stats *ldb)
{
	if (tips) {
		memset(tips, 0, sizeof(*tips));
		if (s->tips)
			tips_stats(s->tips, tips);
	}
	if (ldb) {
		memset(ldb, 0, sizeof(*ldb));
		if (s->ldb)
			tips_listdb_stats(s->ldb, ldb);
	}
}
