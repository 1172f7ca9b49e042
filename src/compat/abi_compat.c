/*
 * abi_compat.c - the exported symbols of older releases whose names the public headers
 * now give to something else: a deprecated alias (a static inline wrapper of the new
 * name) or a size-versioned wrapper. Programs built against those older headers call
 * the symbols by their old names, so the library keeps defining them.
 *
 * Invariant: every symbol a release exported stays exported with the same behaviour
 * (tests/tools/abi_0.3.txt lists those of 0.3; install_test checks them). Each
 * definition here takes the old symbol name through an assembler label, because the
 * C name is the header's static inline wrapper; this file never calls those wrappers,
 * so no local copy of them is emitted beside the global symbol.
 */
#include <tips/listdb.h>
#include <tips/tips.h>

/* tips_lookup (0.3): now tips_get(). */
TIPS_API int abi03_tips_lookup(struct tips_db *db, const void *key, size_t klen, void *val,
			       size_t cap, size_t *vlen) __asm__("tips_lookup");
int abi03_tips_lookup(struct tips_db *db, const void *key, size_t klen, void *val,
		      size_t cap, size_t *vlen)
{
	return tips_get(db, key, klen, val, cap, vlen);
}

/* tips_delete (0.3): now tips_remove(), the checked delete. */
TIPS_API int abi03_tips_delete(struct tips_db *db, const void *key, size_t klen)
	__asm__("tips_delete");
int abi03_tips_delete(struct tips_db *db, const void *key, size_t klen)
{
	return tips_remove(db, key, klen);
}

/* tips_heap_check (0.3): now a wrapper of tips_heap_check_sized(); a 0.3 program's
 * report is this release's struct, unchanged since. */
TIPS_API int abi03_tips_heap_check(struct tips_heap *heap, struct tips_heap_report *report)
	__asm__("tips_heap_check");
int abi03_tips_heap_check(struct tips_heap *heap, struct tips_heap_report *report)
{
	return tips_heap_check_sized(heap, report, sizeof(*report));
}

/* tips_db_check (0.3): now a wrapper of tips_db_check_sized(). */
TIPS_API int abi03_tips_db_check(struct tips_db *db, tips_block_problem_fn fn, void *arg,
				 struct tips_db_report *out) __asm__("tips_db_check");
int abi03_tips_db_check(struct tips_db *db, tips_block_problem_fn fn, void *arg,
			struct tips_db_report *out)
{
	return tips_db_check_sized(db, fn, arg, out, sizeof(*out));
}

/* tips_listdb_check (0.3): now a wrapper of tips_listdb_check_sized(). */
TIPS_API int abi03_tips_listdb_check(struct tips_listdb *db, struct tips_listdb_report *rep)
	__asm__("tips_listdb_check");
int abi03_tips_listdb_check(struct tips_listdb *db, struct tips_listdb_report *rep)
{
	return tips_listdb_check_sized(db, rep, sizeof(*rep));
}
