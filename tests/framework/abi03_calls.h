/*
 * abi03_calls.h - the exported symbols of libtips 0.3 that the headers now name
 * wrappers, called by their symbol names (abi03_calls.c says why this is a file of
 * its own).
 */
#ifndef TIPS_TESTS_ABI03_CALLS_H
#define TIPS_TESTS_ABI03_CALLS_H

#include <stddef.h>

struct tips_db;
/* The symbol tips_lookup (now tips_get()). */
int abi03_lookup(struct tips_db *db, const void *key, size_t klen, void *val, size_t cap,
		 size_t *vlen);
/* The symbol tips_delete (now tips_remove(), the checked delete). */
int abi03_delete(struct tips_db *db, const void *key, size_t klen);

#endif
