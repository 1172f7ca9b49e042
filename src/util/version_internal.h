/*
 * version_internal.h - how the library reads and writes the size-versioned structs of
 * its API (src/util/version.c).
 *
 * Invariant: the library never reads or writes a byte of a caller's struct beyond the
 * size the caller declared, and every field the caller's struct lacks takes its
 * default. Input structs (tips_config, tips_pool_options, tips_listdb_config) carry
 * that size in their first field, struct_size; output structs (stats, counters) get it
 * from a static inline wrapper in the public header that passes sizeof(*out) as the
 * caller compiled it.
 */
#ifndef TIPS_UTIL_VERSION_INTERNAL_H
#define TIPS_UTIL_VERSION_INTERNAL_H

#include <stddef.h>

/*
 * Reads a caller's input struct @in (its first field a size_t struct_size) into @lib
 * (@lib_size bytes, already filled with the defaults): the first
 * min(struct_size, @lib_size) bytes are copied, lib->struct_size stays @lib_size.
 * A struct larger than @lib_size comes from newer headers; it is accepted only if
 * every byte this library does not know is zero (a newer field left at its default,
 * which by the growth rule of tips/version.h means "as before").
 * Return: 0, or TIPS_EINVAL (struct_size too small to be real, or a non-zero unknown
 * field) with a message that names @what.
 */
int tips_struct_read(void *lib, size_t lib_size, const void *in, const char *what);

/*
 * Writes the library's struct @lib (@lib_size bytes) to a caller's struct @out of
 * @out_size bytes: the common prefix is copied, a longer caller's tail is zeroed.
 */
void tips_struct_write(void *out, size_t out_size, const void *lib, size_t lib_size);

/*
 * An _init of an input struct: writes the defaults @lib into the caller's @out of
 * @out_size bytes (tips_struct_write) and sets its struct_size to @out_size, so that
 * the open call later knows how much of it the caller has.
 */
void tips_struct_init(void *out, size_t out_size, const void *lib, size_t lib_size);

#endif
