/*
 * size_arg.h - parse sizes such as "64M", "1G", "4096" for the command-line tools.
 */
#ifndef TIPS_TOOLS_SIZE_ARG_H
#define TIPS_TOOLS_SIZE_ARG_H
#include <stdint.h>
/* Parses @s (a number with an optional K, M, G or T suffix, powers of 1024) into
 * *@out. Returns 0, or -1 if @s is not such a size. */
int size_arg_parse(const char *s, uint64_t *out);
#endif
