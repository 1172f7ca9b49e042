/*
 * glob.h - the glob patterns of KEYS, SCAN MATCH and CONFIG GET: '*', '?', "[a-z]",
 * "[^x]" and "\x", over bytes, as Redis matches them.
 */
#ifndef TIPS_SERVER_GLOB_H
#define TIPS_SERVER_GLOB_H

#include <stddef.h>

/** glob_match() - 1 if @s matches @pat; @nocase: ignore ASCII case. Recursion is bounded
 * by the pattern's stars, so a hostile pattern costs time, not stack. */
int glob_match(const char *pat, size_t plen, const char *s, size_t slen, int nocase);

#endif /* TIPS_SERVER_GLOB_H */
