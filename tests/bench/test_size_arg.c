/*
 * test_size_arg.c - the command-line number parser of every tool (bench/kit/size_arg.h):
 * K, M, G, T are powers of 1000 in counts and of 1024 in sizes, Ki..Ti always powers of
 * 1024, fractions only when the result is whole, 0x numbers, and every malformed or
 * overflowing input refused (with *out left alone).
 */
#include "size_arg.h"
#include "test_util.h"

#include <stdint.h>

static uint64_t count(const char *s)
{
	uint64_t v = 12345;
	REQUIRE(size_arg_count(s, &v) == 0);
	return v;
}

static uint64_t bytes(const char *s)
{
	uint64_t v = 12345;
	REQUIRE(size_arg_bytes(s, &v) == 0);
	return v;
}

static void refused(const char *s)
{
	uint64_t v = 777;
	CHECK(size_arg_count(s, &v) == -1);
	CHECK(size_arg_bytes(s, &v) == -1);
	CHECK(v == 777);
}

int main(void)
{
	/* counts: decimal suffixes */
	CHECK(count("0") == 0);
	CHECK(count("4096") == 4096);
	CHECK(count("1K") == 1000);
	CHECK(count("1k") == 1000);
	CHECK(count("8M") == 8000000);
	CHECK(count("2G") == 2000000000ull);
	CHECK(count("3T") == 3000000000000ull);
	CHECK(count("1.5M") == 1500000);
	CHECK(count("0.25K") == 250);
	CHECK(count("8Mi") == 8ull << 20);
	CHECK(count("1Ki") == 1024);
	CHECK(count("0x10") == 16);
	/* sizes in bytes: binary suffixes, optional i and B */
	CHECK(bytes("4096") == 4096);
	CHECK(bytes("4096B") == 4096);
	CHECK(bytes("64M") == 64ull << 20);
	CHECK(bytes("64Mi") == 64ull << 20);
	CHECK(bytes("64MiB") == 64ull << 20);
	CHECK(bytes("64MB") == 64ull << 20);
	CHECK(bytes("64mb") == 64ull << 20);
	CHECK(bytes("1G") == 1ull << 30);
	CHECK(bytes("2T") == 2ull << 40);
	CHECK(bytes("1.5G") == 3ull << 29);
	CHECK(bytes("0x7f0000000000") == 0x7f0000000000ull);
	CHECK(bytes("18446744073709551615") == UINT64_MAX);
	/* refused */
	refused(NULL);
	refused("");
	refused("-1");
	refused(" 1");
	refused("1 ");
	refused("M");
	refused("1X");
	refused("1MM");
	refused("1.");
	refused(".5");
	refused("1.0001K");       /* 1000.1: not whole */
	refused("0.5");           /* not whole */
	refused("1Mx");
	refused("0x");
	refused("0x1G");
	refused("0x10000000000000000"); /* 2^64 */
	refused("18446744073709551616"); /* 2^64 */
	refused("20000000T");           /* 2*10^19 and 2*10^7 * 2^40: beyond 2^64 */
	refused("1.0000000000001");     /* more than 12 fraction digits */
	uint64_t v = 0;
	CHECK(size_arg_count("1MB", &v) == -1); /* B only for sizes in bytes */
	CHECK(size_arg_count("4096B", &v) == -1);
	CHECK(size_arg_count("18446744073709551615", &v) == 0 && v == UINT64_MAX);
	return test_finish("test_size_arg");
}
