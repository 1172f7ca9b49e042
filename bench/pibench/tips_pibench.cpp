/*
 * tips_pibench.cpp - a PiBench plug-in (tree_api.h) over libtips's public API, built
 * once per PiBench layout (TIPS_PIBENCH_LAYOUT: libtips_pibench.so for master,
 * libtips_pibench_bulkload.so, libtips_pibench_tls.so); the index is chosen at run
 * time by TIPS_PIBENCH_INDEX (default tips-hash, said on stderr). tips-NAME runs
 * through the TIPS facade on a pool, dram-NAME (the volatile original) through its ops
 * table in DRAM; bench_index.h does both, as it does for tips-bench, so the two
 * harnesses measure the same paths.
 *
 * What it keeps:
 * - The layout. Only the #if blocks of tree_api.h and of this file differ between the
 *   libraries; each overrides exactly the virtual functions of its layout.
 * - Order. Our indexes order keys as byte strings (memcmp). PiBench's 8-byte keys are
 *   native uint64 values, so an 8-byte key is stored big-endian and turned back when
 *   a scan returns it: scans come out in numeric order. Other sizes pass as bytes.
 * - The tree_api contract: insert of a present key, update and remove of an absent
 *   one return false and change nothing; scan's buffer belongs to the calling thread
 *   (thread_local, grown as needed, valid until that thread's next scan); any thread
 *   may call at any time, as the facade and the indexes allow (tls_setup has nothing
 *   to do: libtips sets a thread up at its first call).
 * - Quiet failures. Any other error (pool full, key too long) returns false and is
 *   reported once per tree on stderr, not once per operation.
 * - The pool. pool_path is opened if it exists (with a warning on stderr if it holds
 *   keys: PiBench's load inserts would fail), else created, and kept; an empty
 *   pool_path gets a fresh /dev/shm file unlinked as soon as it is open, so it never
 *   outlives the process, whether or not the harness deletes the tree.
 * docs/pibench.md lists the environment variables and the defaults.
 */
#include "tree_api.h"

#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <new>
#include <vector>

#include <endian.h>
#include <unistd.h>

/* In C++, -Wshadow flags the public functions named like the struct they fill
 * (tips_stats(), tips_pool_info(), tips_heap_stats()); legal C++, so quiet it here. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wshadow"
#include <tips/tips.h>
#pragma GCC diagnostic pop

extern "C" {
#include "bench_index.h"
#include "size_arg.h"
}

namespace {

const char default_index[] = "tips-hash";
const uint64_t default_expected_keys = 1000000;
std::atomic<unsigned> temp_pools_made{0};

/* A key as the index sees it: 8-byte keys big-endian, other sizes unchanged. */
class index_key {
public:
	index_key(const char *key, size_t size) : bytes_(key), size_(size)
	{
		if (size == sizeof(uint64_t)) {
			uint64_t v;
			std::memcpy(&v, key, sizeof(v));
			v = htobe64(v);
			std::memcpy(big_endian_, &v, sizeof(v));
			bytes_ = big_endian_;
		}
	}
	const void *data() const { return bytes_; }
	size_t size() const { return size_; }

private:
	const char *bytes_;
	size_t size_;
	char big_endian_[sizeof(uint64_t)];
};

/* Where a scan writes: room for @capacity records of key_size + value_size bytes. */
struct scan_sink {
	char *out;
	size_t key_size, value_size;
	size_t written, capacity;
};

/* Copies @n bytes of @from into a field of @width bytes, zero-filling the rest. */
void copy_field(char *to, size_t width, const void *from, size_t n)
{
	size_t k = n < width ? n : width;
	std::memcpy(to, from, k);
	std::memset(to + k, 0, width - k);
}

/* The number in an environment variable such as "64M" (@bytes: a size in bytes, else
 * a count; size_arg.h); @fallback if unset. */
bool env_number(const char *name, bool bytes, uint64_t fallback, uint64_t *out)
{
	const char *s = std::getenv(name);
	*out = fallback;
	if (!s || !*s)
		return true;
	if ((bytes ? size_arg_bytes(s, out) : size_arg_count(s, out)) == 0 && *out > 0)
		return true;
	std::fprintf(stderr, "tips_pibench: %s=%s is not a number (%s)\n%s", name, s,
		     bytes ? "a size in bytes" : "a count", SIZE_ARG_RULE);
	return false;
}

} // namespace

extern "C" {
/* tips_scan_fn: appends one record in PiBench's layout; stops when the buffer is full. */
static int scan_record(const void *key, size_t klen, const void *val, size_t vlen, void *arg)
{
	scan_sink *sink = static_cast<scan_sink *>(arg);
	if (sink->written == sink->capacity)
		return 1;
	char *rec = sink->out + sink->written * (sink->key_size + sink->value_size);
	if (klen == sizeof(uint64_t)) {
		uint64_t v;
		std::memcpy(&v, key, sizeof(v));
		v = be64toh(v);
		copy_field(rec, sink->key_size, &v, sizeof(v));
	} else {
		copy_field(rec, sink->key_size, key, klen);
	}
	copy_field(rec + sink->key_size, sink->value_size, val, vlen);
	sink->written++;
	return 0;
}

/* tips_scan_fn: takes nothing (the caller wants the count tips_scan returns). */
static int ignore_record(const void *, size_t, const void *, size_t, void *)
{
	return 0;
}
}

namespace {

thread_local std::vector<char> scan_records; /* each thread's scan buffer */

/* The index TIPS_PIBENCH_INDEX names (@defaulted: it was unset), or nullptr with the
 * list of names on stderr. */
const tips_index_ops *chosen_index(const char **name, bool *defaulted)
{
	const char *env = std::getenv("TIPS_PIBENCH_INDEX");
	*defaulted = !env || !*env;
	*name = *defaulted ? default_index : env;
	const tips_index_ops *ops = tips_index_find(*name);
	if (!ops) {
		std::fprintf(stderr, "tips_pibench: no index named '%s' (TIPS_PIBENCH_INDEX); "
			     "built in:", *name);
		for (const char *const *n = tips_index_names(); *n; n++)
			std::fprintf(stderr, " %s", *n);
		std::fprintf(stderr, "\n");
	}
	return ops;
}

/* Where a tips-* index lives. */
struct pool_choice {
	char path[sizeof(bench_index::pool)];
	bool temporary; /* no pool_path: a fresh file, unlinked once open */
	bool existed;   /* pool_path named a file that exists */
};

/* Fills @pool from pool_path (empty: a fresh /dev/shm name); false if it is too long. */
bool choose_pool(const tree_options_t &options, pool_choice *pool)
{
	pool->temporary = options.pool_path.empty();
	pool->existed = false;
	if (pool->temporary) {
		std::snprintf(pool->path, sizeof(pool->path), "/dev/shm/tips-pibench-%d-%u.pool",
			      (int)getpid(), temp_pools_made.fetch_add(1));
		unlink(pool->path); /* a leftover of an earlier process with the same pid */
		return true;
	}
	if (options.pool_path.size() >= sizeof(pool->path)) {
		std::fprintf(stderr, "tips_pibench: pool_path longer than %zu bytes\n",
			     sizeof(pool->path) - 1);
		return false;
	}
	std::snprintf(pool->path, sizeof(pool->path), "%s", options.pool_path.c_str());
	pool->existed = access(pool->path, F_OK) == 0;
	return true;
}

/* The one line saying what runs: index (and whether by default), layout, pool. */
void announce(const char *name, bool defaulted, const pool_choice *pool)
{
	std::fprintf(stderr, "tips_pibench: index %s%s, %s, ", name,
		     defaulted ? " (TIPS_PIBENCH_INDEX unset: the default)" : "",
		     TIPS_PIBENCH_LAYOUT_NAME);
	if (!pool)
		std::fprintf(stderr, "in DRAM (no pool)\n");
	else if (pool->temporary)
		std::fprintf(stderr, "temporary pool (unlinked once open)\n");
	else
		std::fprintf(stderr, "pool %s (%s, kept)\n", pool->path,
			     pool->existed ? "reopened" : "created");
}

/* Warns when a reopened pool already holds keys: a load inserting them again fails
 * every such insert (false), and PiBench's load does not check what insert returns.
 * (The plug-in cannot see --skip_load, under which the warning is expected.) */
void warn_if_not_empty(struct tips_db *db, const char *path)
{
	if (tips_scan(db, nullptr, 0, 1, ignore_record, nullptr) <= 0)
		return;
	std::fprintf(stderr, "tips_pibench: warning: pool %s already holds keys; unless "
		     "PiBench runs with --skip_load, its load inserts keys the pool holds, each "
		     "such insert fails unchecked and the load time measures failed inserts "
		     "(remove the file first)\n", path);
}

class tips_tree final : public tree_api {
public:
	/* Opens the index TIPS_PIBENCH_INDEX names; nullptr (and a message) on failure. */
	static tips_tree *make(const tree_options_t &options);
	~tips_tree() override;

#if TIPS_PIBENCH_LAYOUT != TIPS_PIBENCH_LAYOUT_MASTER
	bool bulk_load(const char *records, size_t count, size_t key_size,
		       size_t value_size) override;
#endif
	bool find(const char *key, size_t key_size, char *value_out) override;
	bool insert(const char *key, size_t key_size, const char *value,
		    size_t value_size) override;
	bool update(const char *key, size_t key_size, const char *value,
		    size_t value_size) override;
	bool remove(const char *key, size_t key_size) override;
	int scan(const char *key, size_t key_size, int count, char *&records_out) override;
#if TIPS_PIBENCH_LAYOUT == TIPS_PIBENCH_LAYOUT_TLS
	void tls_setup() override {} /* libtips sets a thread up at its first call */
#endif

private:
	tips_tree(size_t key_size, size_t value_size)
		: index_(), key_size_(key_size), value_size_(value_size)
	{
	}
	/* Opens the index on @pool (nullptr: in DRAM); 0 or a TIPS_E* code, reported. */
	int open(const char *name, const pool_choice *pool, uint64_t pool_size,
		 uint64_t expected_keys);
	/* True for rc 0; false for @expected (silently) and for any other code (reported
	 * on the first such failure of this tree only). */
	bool outcome(const char *op, int rc, int expected);

	bench_index index_;
	size_t key_size_, value_size_;
	std::atomic<bool> failure_reported_{false};
};

tips_tree *tips_tree::make(const tree_options_t &options)
{
	const char *name;
	bool defaulted;
	if (!chosen_index(&name, &defaulted))
		return nullptr;
	uint64_t expected_keys, pool_size;
	if (!env_number("TIPS_PIBENCH_EXPECTED_KEYS", false, default_expected_keys,
			&expected_keys) ||
	    !env_number("TIPS_PIBENCH_POOL_SIZE", true, 0, &pool_size))
		return nullptr;
	if (options.pool_size)
		pool_size = options.pool_size;

	bool is_tips = std::strncmp(name, "tips-", 5) == 0;
	pool_choice pool;
	if (is_tips && !choose_pool(options, &pool))
		return nullptr;
	if (!is_tips && !options.pool_path.empty())
		std::fprintf(stderr, "tips_pibench: %s is volatile (DRAM); pool_path %s is not "
			     "used\n", name, options.pool_path.c_str());
	announce(name, defaulted, is_tips ? &pool : nullptr);

	tips_tree *tree = new (std::nothrow) tips_tree(options.key_size, options.value_size);
	if (!tree) {
		std::fprintf(stderr, "tips_pibench: out of memory\n");
		return nullptr;
	}
	if (tree->open(name, is_tips ? &pool : nullptr, pool_size, expected_keys)) {
		delete tree;
		return nullptr;
	}
	return tree;
}

int tips_tree::open(const char *name, const pool_choice *pool, uint64_t pool_size,
		    uint64_t expected_keys)
{
	/* keep=1: a temporary pool is unlinked here, not by bench_index_close */
	int rc = bench_index_open(&index_, name, pool ? pool->path : nullptr, pool_size,
				  expected_keys, /*keep=*/1);
	if (pool && pool->temporary)
		unlink(pool->path); /* the mapping stays; the file goes with the process */
	if (rc) {
		std::fprintf(stderr, "tips_pibench: cannot open %s%s%s: %s (%s)\n", name,
			     pool ? " on " : "", pool ? pool->path : "", tips_strerror(rc),
			     tips_errormsg());
		return rc;
	}
	if (pool && pool->existed)
		warn_if_not_empty(index_.db, pool->path);
	return 0;
}

tips_tree::~tips_tree()
{
	bench_index_close(&index_); /* tips_close; a temporary pool is already unlinked */
}

bool tips_tree::outcome(const char *op, int rc, int expected)
{
	if (rc == 0)
		return true;
	if (rc != expected && !failure_reported_.exchange(true)) {
		bool detail = index_.db != nullptr && *tips_errormsg();
		std::fprintf(stderr, "tips_pibench: %s on %s failed: %s%s%s (later failures of "
			     "this tree are not reported)\n", op, index_.ops->name,
			     tips_strerror(rc), detail ? ": " : "", detail ? tips_errormsg() : "");
	}
	return false;
}

#if TIPS_PIBENCH_LAYOUT != TIPS_PIBENCH_LAYOUT_MASTER
bool tips_tree::bulk_load(const char *records, size_t count, size_t key_size,
			  size_t value_size)
{
	for (size_t i = 0; i < count; i++) {
		const char *rec = records + i * (key_size + value_size);
		if (!insert(rec, key_size, rec + key_size, value_size))
			return false;
	}
	return true;
}
#endif

bool tips_tree::find(const char *key, size_t key_size, char *value_out)
{
	index_key k(key, key_size);
	size_t cap = value_out ? value_size_ : 0, vlen = 0;
	int rc = bench_lookup(&index_, k.data(), k.size(), value_out, cap, &vlen);
	if (rc == 0 && vlen < cap)
		std::memset(value_out + vlen, 0, cap - vlen);
	return outcome("find", rc, TIPS_ENOTFOUND);
}

bool tips_tree::insert(const char *key, size_t key_size, const char *value, size_t value_size)
{
	index_key k(key, key_size);
	return outcome("insert", bench_insert(&index_, k.data(), k.size(), value, value_size),
		       TIPS_EKEYEXISTS);
}

bool tips_tree::update(const char *key, size_t key_size, const char *value, size_t value_size)
{
	index_key k(key, key_size);
	return outcome("update", bench_update(&index_, k.data(), k.size(), value, value_size),
		       TIPS_ENOTFOUND);
}

bool tips_tree::remove(const char *key, size_t key_size)
{
	index_key k(key, key_size);
	return outcome("remove", bench_remove(&index_, k.data(), k.size()), TIPS_ENOTFOUND);
}

int tips_tree::scan(const char *key, size_t key_size, int count, char *&records_out)
{
	records_out = scan_records.data();
	if (count <= 0)
		return 0;
	size_t need = (size_t)count * (key_size_ + value_size_);
	if (scan_records.size() < need) {
		try {
			scan_records.resize(need);
		} catch (const std::bad_alloc &) {
			outcome("scan", TIPS_ENOMEM, 0);
			return 0;
		}
	}
	records_out = scan_records.data();
	scan_sink sink = { records_out, key_size_, value_size_, 0, (size_t)count };
	index_key k(key, key_size);
	long n = index_.db ? tips_scan(index_.db, k.data(), k.size(), sink.capacity,
				       scan_record, &sink)
			   : index_.ops->scan(index_.handle, k.data(), k.size(), sink.capacity,
					      scan_record, &sink);
	if (n < 0) {
		outcome("scan", (int)n, 0);
		return 0;
	}
	return (int)sink.written;
}

} // namespace

extern "C" tree_api *create_tree(const tree_options_t &options)
{
	return tips_tree::make(options);
}
