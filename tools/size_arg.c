/*
 * size_arg.c - see size_arg.h.
 */
#include "size_arg.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>

int size_arg_parse(const char *s, uint64_t *out)
{
	if (!s || !isdigit((unsigned char)*s))
		return -1;
	errno = 0;
	char *end;
	unsigned long long v = strtoull(s, &end, 0);
	if (errno)
		return -1;
	unsigned shift = 0;
	switch (toupper((unsigned char)*end)) {
	case 'K': shift = 10; break;
	case 'M': shift = 20; break;
	case 'G': shift = 30; break;
	case 'T': shift = 40; break;
	case '\0': break;
	default: return -1;
	}
	if (shift && *++end == 'i')
		end++;
	if (shift && (*end == 'B' || *end == 'b'))
		end++;
	if (*end != '\0' || (shift && v > (~0ull >> shift)))
		return -1;
	*out = (uint64_t)v << shift;
	return 0;
}
