/*
 * persistbench.c - `tips-persistbench`: what persisting one log record costs, by the
 * way it is written: plain stores flushed (pm_flush, clwb) or streaming stores
 * (pm_copy_flush_streaming), each followed by the fence (pm_drain) that makes it
 * durable. Which is cheaper depends on the CPU (docs/framework.md, "Ninth round" and
 * "Tenth round"); the figures back pm_copy_flush's choice, which it also prints.
 *
 * Over a file of SIZE MiB in DIR (mapped shared, touched once before timing), appends
 * records of 64 bytes one after another (wrapping), and rewrites one 8-byte word in
 * place (an OLog tail), each way:
 *   store+flush   memcpy into the file, pm_flush, pm_drain
 *   streaming     pm_copy_flush_streaming, pm_drain
 *   ... then read back: the same, and the next record depends on a byte loaded from the
 *                 one just persisted (what costs a put that read its entry back after
 *                 its flush: on the AMD machine clwb leaves the line out of the core's
 *                 caches; docs/listdb.md, "Thirteenth round")
 * Prints nanoseconds per record, the median of REPEAT runs of COUNT records each. The
 * file is not registered as a pool, so the primitives take their path for PM media
 * (CPU flushes), as for a pool on /dev/shm or /mnt/tips-pm.
 *
 * usage: tips-persistbench [DIR [SIZE_MIB]]   (/dev/shm, 32)
 */
#define _GNU_SOURCE
#include "pm/pm.h"

#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define COUNT 200000u
#define REPEAT 5
#define RECORD 64u

enum way { STORE_FLUSH, STREAMING };

static double now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1e9 + t.tv_nsec;
}

static void persist(enum way way, unsigned char *dst, const unsigned char *src, size_t len)
{
	if (way == STORE_FLUSH) {
		memcpy(dst, src, len);
		pm_flush(dst, len);
	} else {
		pm_copy_flush_streaming(dst, src, len);
	}
	pm_drain();
}

/* ns per record: COUNT records of @len bytes, appended (@stride apart, wrapping
 * in @size) or, with stride 0, all at the same place; @reread: each record's last byte
 * is loaded after its fence and goes into the next record. */
static double run(enum way way, unsigned char *map, size_t size, size_t len, size_t stride,
		  bool reread)
{
	_Alignas(64) unsigned char rec[RECORD];
	memset(rec, 0x5a, sizeof(rec));
	size_t off = 0;
	double t0 = now_ns();
	for (unsigned i = 0; i < COUNT; i++) {
		rec[0] = (unsigned char)i;
		persist(way, map + off, rec, len);
		if (reread)
			rec[1] = *(volatile unsigned char *)(map + off + len - 1);
		off = (off + stride) % size;
	}
	return (now_ns() - t0) / COUNT;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double median(enum way way, unsigned char *map, size_t size, size_t len, size_t stride,
		     bool reread)
{
	double t[REPEAT];
	for (int r = 0; r < REPEAT; r++)
		t[r] = run(way, map, size, len, stride, reread);
	qsort(t, REPEAT, sizeof(t[0]), cmp_double);
	return t[REPEAT / 2];
}

int main(int argc, char **argv)
{
	const char *dir = argc > 1 ? argv[1] : "/dev/shm";
	size_t size = (size_t)(argc > 2 ? strtoull(argv[2], NULL, 10) : 32) << 20;
	if (size < RECORD) {
		fprintf(stderr, "tips-persistbench: SIZE_MIB must be at least 1\n");
		return 2;
	}
	char path[4096];
	snprintf(path, sizeof(path), "%s/tips-persistbench-%d", dir, (int)getpid());
	int fd = open(path, O_CREAT | O_EXCL | O_RDWR, 0600);
	if (fd < 0 || ftruncate(fd, (off_t)size) != 0) {
		perror(path);
		return 1;
	}
	unsigned char *map = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	unlink(path);
	if (map == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	memset(map, 0, size);
	printf("tips-persistbench: %s, %zu MiB, flush instruction %s, pm_copy_flush by %s, "
	       "medians of %d runs of %u\n", dir, size >> 20, tips_flush_instruction(),
	       pm_copy_way(), REPEAT, COUNT);
	printf("%-34s %12s %12s\n", "record", "store+flush", "streaming");
	printf("%-34s %9.1f ns %9.1f ns\n", "64 B, appended",
	       median(STORE_FLUSH, map, size, RECORD, RECORD, false),
	       median(STREAMING, map, size, RECORD, RECORD, false));
	printf("%-34s %9.1f ns %9.1f ns\n", "64 B, appended, then read back",
	       median(STORE_FLUSH, map, size, RECORD, RECORD, true),
	       median(STREAMING, map, size, RECORD, RECORD, true));
	printf("%-34s %9.1f ns %9.1f ns\n", "8 B, the same word each time",
	       median(STORE_FLUSH, map, size, 8, 0, false),
	       median(STREAMING, map, size, 8, 0, false));
	munmap(map, size);
	return 0;
}
