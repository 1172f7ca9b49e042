/*
 * version.c - the loaded library's version (tips_version, tips_version_check) and the
 * copying rules of the size-versioned structs (version_internal.h).
 *
 * Invariant: no caller struct is read or written past the size its caller declared
 * (struct_size, or the size a header wrapper passed), and a newer caller's fields
 * that this library does not know are accepted only while they are zero.
 */
#include "util/version_internal.h"

#include "util/errors_internal.h"

#include <tips/version.h>

#include <stdint.h>
#include <string.h>

const char *tips_version(int *major, int *minor, int *patch)
{
	if (major)
		*major = TIPS_VERSION_MAJOR;
	if (minor)
		*minor = TIPS_VERSION_MINOR;
	if (patch)
		*patch = TIPS_VERSION_PATCH;
	return TIPS_VERSION_STRING;
}

int tips_version_check(int major, int minor)
{
	int ok = major == TIPS_VERSION_MAJOR &&
		 (TIPS_VERSION_MAJOR == 0 ? minor == TIPS_VERSION_MINOR
					  : minor <= TIPS_VERSION_MINOR);
	if (ok)
		return 0;
	return tips_set_error(TIPS_EVERSION, "libtips %s cannot serve a program built against "
			      "headers %d.%d (same major, and a minor no newer%s, are required)",
			      TIPS_VERSION_STRING, major, minor,
			      TIPS_VERSION_MAJOR == 0 ? "; while the major is 0, the same minor" : "");
}

static size_t size_min(size_t a, size_t b)
{
	return a < b ? a : b;
}

int tips_struct_read(void *lib, size_t lib_size, const void *in, const char *what)
{
	size_t in_size;
	memcpy(&in_size, in, sizeof(in_size));
	if (in_size < sizeof(size_t) || in_size > (1u << 20))
		return tips_set_error(TIPS_EINVAL, "%s: struct_size %zu is not a size (initialise "
				      "the struct with its _init function)", what, in_size);
	const unsigned char *tail = (const unsigned char *)in;
	for (size_t i = lib_size; i < in_size; i++)
		if (tail[i])
			return tips_set_error(TIPS_EINVAL, "%s: the caller's struct (%zu bytes) sets "
					      "a field at byte %zu that libtips %s (%zu bytes) does "
					      "not know", what, in_size, i, TIPS_VERSION_STRING,
					      lib_size);
	size_t n = size_min(in_size, lib_size);
	memcpy((char *)lib + sizeof(size_t), (const char *)in + sizeof(size_t),
	       n - sizeof(size_t));
	return 0;
}

void tips_struct_write(void *out, size_t out_size, const void *lib, size_t lib_size)
{
	size_t n = size_min(out_size, lib_size);
	memcpy(out, lib, n);
	if (out_size > n)
		memset((char *)out + n, 0, out_size - n);
}

void tips_struct_init(void *out, size_t out_size, const void *lib, size_t lib_size)
{
	tips_struct_write(out, out_size, lib, lib_size);
	if (out_size >= sizeof(size_t))
		memcpy(out, &out_size, sizeof(out_size));
}
