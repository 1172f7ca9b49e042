/*
 * abi03_calls.c - calls of the symbols libtips 0.3 exported under names that the public
 * headers now give to static inline wrappers (deprecated aliases, size-versioned
 * calls), made as a program built against the 0.3 headers makes them: by plain
 * external name. This file includes no libtips header, so the names here are the
 * library's symbols (src/compat/abi_compat.c), not the wrappers; test_struct_size.c
 * checks through these that the old symbols behave as the new calls.
 */
#include <stddef.h>

#include "abi03_calls.h"

int tips_lookup(struct tips_db *db, const void *key, size_t klen, void *val, size_t cap,
		size_t *vlen);
int tips_delete(struct tips_db *db, const void *key, size_t klen);
int tips_heap_check(struct tips_heap *heap, void *report);
int tips_db_check(struct tips_db *db, void *fn, void *arg, void *report);
int tips_listdb_check(struct tips_listdb *db, void *report);

int abi03_lookup(struct tips_db *db, const void *key, size_t klen, void *val, size_t cap,
		 size_t *vlen)
{
	return tips_lookup(db, key, klen, val, cap, vlen);
}

int abi03_delete(struct tips_db *db, const void *key, size_t klen)
{
	return tips_delete(db, key, klen);
}

int abi03_heap_check(struct tips_heap *heap, void *report)
{
	return tips_heap_check(heap, report);
}

int abi03_db_check(struct tips_db *db, void *report)
{
	return tips_db_check(db, NULL, NULL, report);
}

int abi03_listdb_check(struct tips_listdb *db, void *report)
{
	return tips_listdb_check(db, report);
}
