/*
 * size_arg.h - the one parser of numbers given on the command line or in the
 * environment by every tool and benchmark (tips, tips-bench, tips-fwbench,
 * tips-allocbench, tips-crashtest, tips-listdb-bench, the PiBench plug-ins).
 *
 * The rule, the same in every tool (SIZE_ARG_RULE, printed by their --help):
 *   a decimal number, optionally with a fraction ("1.5M"), and an optional suffix;
 *   K, M, G, T are 10^3, 10^6, 10^9, 10^12 in a count (records, operations, keys)
 *   and 2^10, 2^20, 2^30, 2^40 in a size in bytes (pools, values, memory);
 *   Ki, Mi, Gi, Ti are always 2^10, 2^20, 2^30, 2^40; a size in bytes may end in B
 *   ("64MiB", "64MB" and "64M" are all 64 MiB). Suffixes are case-insensitive but for
 *   the i. The result must be a whole number that fits 64 bits. A number may also be
 *   written 0x followed by hexadecimal digits, without a suffix (addresses).
 * Invariant: one grammar, whose only difference between counts and sizes is the base
 * of K, M, G, T.
 */
#ifndef TIPS_BENCHKIT_SIZE_ARG_H
#define TIPS_BENCHKIT_SIZE_ARG_H
#include <stdint.h>

/* The rule above in two lines, for --help texts. */
#define SIZE_ARG_RULE                                                                   \
	"numbers take K, M, G, T: powers of 1000 in counts, of 1024 in sizes in bytes;\n" \
	"Ki, Mi, Gi, Ti are powers of 1024 in both (1M records = 1,000,000; 64M = 64 MiB)\n"

/* A count (records, operations, keys...): K = 1000. 0, or -1 if @s is no such count. */
int size_arg_count(const char *s, uint64_t *out);
/* A size in bytes: K = 1024, a trailing B allowed. 0, or -1 if @s is no such size. */
int size_arg_bytes(const char *s, uint64_t *out);

#endif
