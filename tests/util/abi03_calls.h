/*
 * abi03_calls.h - the exported symbols of libtips 0.3 that the headers now name
 * wrappers, called by their symbol names (abi03_calls.c says why this is a file of
 * its own). Reports are passed as void *: a 0.3 program's structs are this release's.
 */
#ifndef TIPS_TESTS_ABI03_CALLS_H
#define TIPS_TESTS_ABI03_CALLS_H

#include <stddef.h>

struct tips_db;
struct tips_heap;
struct tips_listdb;
/* The symbol tips_lookup (now tips_get()). */
int abi03_lookup(struct tips_db *db, const void *key, size_t klen, void *val, size_t cap,
		 size_t *vlen);
/* The symbol tips_delete (now tips_remove(), the checked delete). */
int abi03_delete(struct tips_db *db, const void *key, size_t klen);
/* The symbols tips_heap_check, tips_db_check (no problem callback), tips_listdb_check
 * (now wrappers of the *_check_sized calls). */
int abi03_heap_check(struct tips_heap *heap, void *report);
int abi03_db_check(struct tips_db *db, void *report);
int abi03_listdb_check(struct tips_listdb *db, void *report);

#endif
