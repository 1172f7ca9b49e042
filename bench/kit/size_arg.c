/*
 * size_arg.c - the command-line number parser of every tool (rule in size_arg.h).
 * Exact integer arithmetic: a value that is not a whole number, or exceeds 64 bits, is
 * refused rather than rounded.
 */
#include "size_arg.h"

#include <stdbool.h>
#include <stddef.h>

#define MAX_FRACTION_DIV 1000000000000ull /* at most 12 digits after the point */

/* The digits of a 0x number, nothing after them (addresses: tips pool create --addr). */
static int parse_hex(const char *s, uint64_t *out)
{
	uint64_t v = 0;
	const char *first = s;
	for (;; s++) {
		unsigned d;
		if (*s >= '0' && *s <= '9')
			d = (unsigned)(*s - '0');
		else if (*s >= 'a' && *s <= 'f')
			d = (unsigned)(*s - 'a' + 10);
		else if (*s >= 'A' && *s <= 'F')
			d = (unsigned)(*s - 'A' + 10);
		else
			break;
		if (v >> 60)
			return -1;
		v = v << 4 | d;
	}
	if (s == first || *s != '\0')
		return -1;
	*out = v;
	return 0;
}

/* Parses @s; @binary: K, M, G, T are powers of 1024 (sizes in bytes). */
static int parse(const char *s, bool binary, uint64_t *out)
{
	if (!s || *s < '0' || *s > '9')
		return -1;
	if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
		return parse_hex(s + 2, out);
	uint64_t whole = 0;
	for (; *s >= '0' && *s <= '9'; s++) {
		unsigned d = (unsigned)(*s - '0');
		if (whole > (UINT64_MAX - d) / 10)
			return -1;
		whole = whole * 10 + d;
	}
	uint64_t frac = 0, frac_div = 1; /* the fraction is frac / frac_div */
	if (*s == '.') {
		s++;
		if (*s < '0' || *s > '9')
			return -1;
		for (; *s >= '0' && *s <= '9'; s++) {
			if (frac_div == MAX_FRACTION_DIV)
				return -1;
			frac = frac * 10 + (unsigned)(*s - '0');
			frac_div *= 10;
		}
	}
	unsigned power = 0; /* K = 1, M = 2, G = 3, T = 4 */
	switch (*s) {
	case 'k': case 'K': power = 1; break;
	case 'm': case 'M': power = 2; break;
	case 'g': case 'G': power = 3; break;
	case 't': case 'T': power = 4; break;
	default: break;
	}
	uint64_t mult = 1;
	if (power) {
		s++;
		if (*s == 'i') {
			binary = true;
			s++;
		}
		for (unsigned i = 0; i < power; i++)
			mult *= binary ? 1024 : 1000;
		if (binary && (*s == 'B' || *s == 'b'))
			s++;
	} else if (binary && (*s == 'B' || *s == 'b')) {
		s++; /* "4096B" */
	}
	if (*s != '\0')
		return -1;
	if (whole > UINT64_MAX / mult)
		return -1;
	uint64_t v = whole * mult;
	if (frac) {
		/* frac * mult / frac_div must be whole (frac < 10^12, mult <= 2^40: the
		 * product needs more than 64 bits). */
		unsigned __int128 p = (unsigned __int128)frac * mult;
		if (p % frac_div)
			return -1;
		uint64_t add = (uint64_t)(p / frac_div);
		if (v > UINT64_MAX - add)
			return -1;
		v += add;
	}
	*out = v;
	return 0;
}

int size_arg_count(const char *s, uint64_t *out)
{
	return parse(s, false, out);
}

int size_arg_bytes(const char *s, uint64_t *out)
{
	return parse(s, true, out);
}
