/*
 * json_str.h - writes a C string as a JSON string literal (quotes, backslashes and
 * control characters escaped), for values the user controls (paths, names).
 */
#ifndef TIPS_BENCH_JSON_STR_H
#define TIPS_BENCH_JSON_STR_H

#include <stdio.h>

void json_string(FILE *f, const char *s);

#endif /* TIPS_BENCH_JSON_STR_H */
