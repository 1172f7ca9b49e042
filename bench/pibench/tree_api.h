/*
 * tree_api.h - the plug-in boundary of the PiBench harness (VLDB'19), as
 * our own C++ declaration of each layout PiBench's branches use: PiBench dlopen()s an
 * index library (RTLD_NOW), looks up create_tree() and drives the tree_api object it
 * returns through its vtable.
 *
 * Invariant: this is a binary interface, so for the layout chosen with
 * TIPS_PIBENCH_LAYOUT (required) the member order and types of tree_options_t and the
 * order of tree_api's virtual functions (the vtable slots) match upstream's
 * include/tree_api.hpp at the commits named below. A plug-in built for one layout and
 * loaded by a PiBench of another has every call land in the wrong function. The
 * harness and the plug-in must also share the std::string ABI (both built with the
 * same libstdc++ defaults).
 *
 *   layout    PiBench commits (branch)                      vtable after ~tree_api
 *   MASTER    a78171a (master, the default branch)          find insert update remove scan
 *   BULKLOAD  cd88a61 (bulk-loading); the 2022 ebr family   bulk_load find insert update
 *             (343ac8d ebr, f5220fc, 9831817, 03af1e7,      remove scan
 *             a67ba25) has this vtable too
 *   TLS       11c74d6 (optiql), a9accea (tls-cleanup),      bulk_load find insert update
 *             794d1f8 (tls-cleanup-compact), 87c6f06        remove scan tls_setup
 *             (insert-remove), 84e673e (insert-faa-counter)
 * tree_options_t gains a trailing `void *data` in TLS (and in the ebr family, whose
 * options only the harness allocates: a plug-in reading the first five members of it
 * through the reference reads the same bytes).
 *
 * Keys and values cross the boundary as bytes with explicit sizes; nothing here says
 * how they are ordered (our plug-in's choice: docs/pibench.md).
 */
#ifndef TIPS_BENCH_PIBENCH_TREE_API_H
#define TIPS_BENCH_PIBENCH_TREE_API_H

#include <cstddef>
#include <string>

#define TIPS_PIBENCH_LAYOUT_MASTER 1
#define TIPS_PIBENCH_LAYOUT_BULKLOAD 2
#define TIPS_PIBENCH_LAYOUT_TLS 3

#if TIPS_PIBENCH_LAYOUT == TIPS_PIBENCH_LAYOUT_MASTER
#define TIPS_PIBENCH_LAYOUT_NAME "master layout (PiBench a78171a, no bulk_load)"
#elif TIPS_PIBENCH_LAYOUT == TIPS_PIBENCH_LAYOUT_BULKLOAD
#define TIPS_PIBENCH_LAYOUT_NAME "bulk-loading layout (PiBench cd88a61)"
#elif TIPS_PIBENCH_LAYOUT == TIPS_PIBENCH_LAYOUT_TLS
#define TIPS_PIBENCH_LAYOUT_NAME "tls layout (PiBench 11c74d6 optiql, 2023 branches)"
#else
#error "define TIPS_PIBENCH_LAYOUT as TIPS_PIBENCH_LAYOUT_MASTER, _BULKLOAD or _TLS"
#endif

/* What the harness tells the plug-in when it creates the tree. */
struct tree_options_t {
	size_t key_size = 8;        /* bytes of every key (PiBench: prefix + key) */
	size_t value_size = 8;      /* bytes of every value */
	std::string pool_path = ""; /* --pool_path; "" when not given */
	size_t pool_size = 0;       /* --pool_size in bytes; 0 when not given */
	size_t num_threads = 1;     /* worker threads of each phase */
#if TIPS_PIBENCH_LAYOUT == TIPS_PIBENCH_LAYOUT_TLS
	void *data = nullptr;       /* the harness's epoch manager (EBR builds), else unset */
#endif
};

class tree_api;

/* The one symbol the harness looks up. Returns the tree, or nullptr on failure. */
extern "C" __attribute__((visibility("default"))) tree_api *
create_tree(const tree_options_t &options);

/*
 * A tree as the harness drives it. The harness creates it on its main thread, calls
 * the operations from its worker threads (several at once) and deletes it on the
 * main thread.
 */
class tree_api {
public:
	virtual ~tree_api() {}

#if TIPS_PIBENCH_LAYOUT != TIPS_PIBENCH_LAYOUT_MASTER
	/* Loads @count records laid out as contiguous <key><value> (key_size + value_size
	 * bytes each), from one thread. False if the tree cannot bulk load (the harness
	 * then gives up). */
	virtual bool bulk_load(const char *records, size_t count, size_t key_size,
			       size_t value_size)
	{
		(void)records, (void)count, (void)key_size, (void)value_size;
		return false;
	}
#endif

	/* Copies the value of @key into @value_out; false if the key is absent. */
	virtual bool find(const char *key, size_t key_size, char *value_out) = 0;

	/* False if the key is already present (the tree is unchanged). */
	virtual bool insert(const char *key, size_t key_size, const char *value,
			    size_t value_size) = 0;

	/* False if the key is absent. */
	virtual bool update(const char *key, size_t key_size, const char *value,
			    size_t value_size) = 0;

	/* False if the key is absent. */
	virtual bool remove(const char *key, size_t key_size) = 0;

	/* Points @records_out at a buffer owned by the calling thread holding up to
	 * @count records <key><value> (key_size + value_size bytes each) in ascending key
	 * order, from the first key >= @key; returns how many. The buffer stays valid and
	 * unchanged until the same thread's next scan. */
	virtual int scan(const char *key, size_t key_size, int count, char *&records_out) = 0;

#if TIPS_PIBENCH_LAYOUT == TIPS_PIBENCH_LAYOUT_TLS
	/* Called by every load, verify and run thread before its first operation of a
	 * phase (so possibly several times on one thread). */
	virtual void tls_setup() {}
#endif
};

#endif /* TIPS_BENCH_PIBENCH_TREE_API_H */
