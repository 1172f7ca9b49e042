/*
 * glob.c - glob matching (glob.h). Iterative with one backtrack point for the last '*'
 * seen, so the cost is O(pattern * string) and the stack is constant.
 */
#include "glob.h"

#include <ctype.h>

static int lower(int c, int nocase)
{
	return nocase ? tolower(c) : c;
}

/* Matches one class "[...]" at @p (after '['): *@adv gets its length past '['. */
static int match_class(const char *p, size_t plen, int c, int nocase, size_t *adv)
{
	size_t i = 0;
	int neg = 0, match = 0;
	if (i < plen && p[i] == '^') {
		neg = 1;
		i++;
	}
	for (; i < plen && p[i] != ']'; i++) {
		if (p[i] == '\\' && i + 1 < plen) {
			i++;
			if (lower((unsigned char)p[i], nocase) == c)
				match = 1;
		} else if (i + 2 < plen && p[i + 1] == '-' && p[i + 2] != ']') {
			int a = lower((unsigned char)p[i], nocase);
			int b = lower((unsigned char)p[i + 2], nocase);
			if (a > b) {
				int t = a;
				a = b;
				b = t;
			}
			if (c >= a && c <= b)
				match = 1;
			i += 2;
		} else if (lower((unsigned char)p[i], nocase) == c) {
			match = 1;
		}
	}
	*adv = i < plen ? i + 1 : i; /* past ']' (an unclosed class ends the pattern) */
	return neg ? !match : match;
}

int glob_match(const char *pat, size_t plen, const char *s, size_t slen, int nocase)
{
	size_t p = 0, i = 0, star_p = (size_t)-1, star_i = 0;
	while (i < slen) {
		if (p < plen) {
			char pc = pat[p];
			int c = lower((unsigned char)s[i], nocase);
			if (pc == '*') {
				while (p < plen && pat[p] == '*')
					p++;
				if (p == plen)
					return 1;
				star_p = p;
				star_i = i;
				continue;
			}
			if (pc == '?') {
				p++;
				i++;
				continue;
			}
			if (pc == '[') {
				size_t adv;
				if (match_class(pat + p + 1, plen - p - 1, c, nocase, &adv)) {
					p += 1 + adv;
					i++;
					continue;
				}
			} else {
				size_t q = p;
				if (pc == '\\' && p + 1 < plen)
					q = p + 1;
				if (lower((unsigned char)pat[q], nocase) == c) {
					p = q + 1;
					i++;
					continue;
				}
			}
		}
		if (star_p == (size_t)-1)
			return 0;
		p = star_p;
		i = ++star_i;
	}
	while (p < plen && pat[p] == '*')
		p++;
	return p == plen;
}
