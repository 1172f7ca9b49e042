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
