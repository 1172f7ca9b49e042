/*
 * tree_api.h - the plug-in boundary of the PiBench harness (VLDB'19, papers/004), as
 * our own C++ declaration: PiBench dlopen()s an index library (RTLD_NOW), looks up
 * create_tree() and drives the tree_api object it returns.
 *
 * Invariant: this is a binary interface, so the layout must match PiBench's
 * include/tree_api.hpp exactly: the member order and types of tree_options_t, and the
 * order of the virtual functions of tree_api (the vtable slots: destructor, bulk_load,
 * find, insert, update, remove, scan). bulk_load sits before find since PiBench added
 * it (its --bulk_load option); a plug-in built against a header without it would have
 * every later slot shifted by one. The harness and the plug-in must also share the
 * std::string ABI (both built with the same libstdc++ defaults).
 *
 * Keys and values cross the boundary as bytes with explicit sizes; nothing here says
 * how they are ordered (our plug-in's choice: docs/pibench.md).
 */
#ifndef TIPS_BENCH_PIBENCH_TREE_API_H
#define TIPS_BENCH_PIBENCH_TREE_API_H

#include <cstddef>
#include <string>

/* What the harness tells the plug-in when it creates the tree. */
struct tree_options_t {
	size_t key_size = 8;        /* bytes of every key (PiBench: prefix + key) */
	size_t value_size = 8;      /* bytes of every value */
	std::string pool_path = ""; /* --pool_path; "" when not given */
	size_t pool_size = 0;       /* --pool_size in bytes; 0 when not given */
	size_t num_threads = 1;     /* worker threads of each phase */
};

class tree_api;

/* The one symbol the harness looks up. Returns the tree, or nullptr on failure. */
extern "C" __attribute__((visibility("default"))) tree_api *
create_tree(const tree_options_t &options);

/*
 * A tree as the harness drives it. The harness creates it on its main thread, calls
 * the operations from its worker threads (any number of them over the tree's life,
 * several at once, with no per-thread set-up call) and deletes it on the main thread.
 */
class tree_api {
public:
	virtual ~tree_api() {}

	/* Loads @count records laid out as contiguous <key><value> (key_size + value_size
	 * bytes each). False if the tree cannot bulk load (the harness then gives up). */
	virtual bool bulk_load(const char *records, size_t count, size_t key_size,
			       size_t value_size)
	{
		(void)records, (void)count, (void)key_size, (void)value_size;
		return false;
	}

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
};

#endif /* TIPS_BENCH_PIBENCH_TREE_API_H */
