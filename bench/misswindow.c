/*
 * misswindow.c - `tips-misswindow`: how many cache misses the processor keeps in flight
 * when each is followed by N other instructions. Backs docs/indexes.md, "Third pass":
 * a lookup's miss overlaps the next lookups' only while they fit in the instruction
 * window, so the instructions between two misses bound a read path's rate.
 *
 * Over a 64 MiB buffer of 64-byte lines (huge pages advised), it times
 *  - chase: each load's address is the previous load's value (no overlap: the latency);
 *  - independent loads at random lines, each followed by PAD independent instructions
 *    (register-only `lea`s that never wait), for every PAD asked for.
 * Prints nanoseconds per load, the median of REPEAT runs, and the overlap (latency
 * over time per load).
 *
 * usage: tips-misswindow [PAD ...]   (0 20 50 100 150 200 250); x86-64 only
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

#define BYTES (64ull << 20)
#define LINES (BYTES / 64)
#define LOADS 4000000ull
#define REPEAT 3
#define MAX_PAD 400

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static uint64_t xorshift(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* Two independent `lea`s, repeated: the padding between two loads (always executed
 * whole: a jump into the middle would cost a mispredicted branch per load). */
#define LEA2 "lea 1(%%r8),%%r9\n\tlea 1(%%r10),%%r11\n\t"
#define LEA10 LEA2 LEA2 LEA2 LEA2 LEA2

/* PAD is rounded down to tens; the inner loop adds 3 instructions per ten. */
static double independent(const char *buf, unsigned pad)
{
	uint64_t s = 0x9e3779b97f4a7c15ull, sum = 0;
	unsigned tens = pad / 10;
	double t0 = now_s();
	for (uint64_t i = 0; i < LOADS; i++) {
		sum += *(const volatile uint64_t *)(buf + (xorshift(&s) % LINES) * 64);
		for (unsigned j = 0; j < tens; j++) /* predicted: the same count every time */
			__asm__ volatile(LEA10 ::: "r8", "r9", "r10", "r11");
	}
	double t = now_s() - t0;
	if (sum == 1) /* keeps the loads */
		putchar(' ');
	return t / (double)LOADS * 1e9;
}

static double chase(const char *buf)
{
	uint64_t off = 0;
	double t0 = now_s();
	for (uint64_t i = 0; i < LOADS; i++)
		off = *(const volatile uint64_t *)(buf + off);
	double t = now_s() - t0;
	if (off == 1)
		putchar(' ');
	return t / (double)LOADS * 1e9;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double median_of(double (*f)(const char *, unsigned), const char *buf, unsigned pad)
{
	double v[REPEAT];
	for (int r = 0; r < REPEAT; r++)
		v[r] = f(buf, pad);
	qsort(v, REPEAT, sizeof(v[0]), cmp_double);
	return v[REPEAT / 2];
}

static double chase_pad(const char *buf, unsigned pad)
{
	(void)pad;
	return chase(buf);
}

int main(int argc, char **argv)
{
	char *buf = NULL;
	if (posix_memalign((void **)&buf, 2u << 20, BYTES)) {
		fprintf(stderr, "tips-misswindow: out of memory\n");
		return 3;
	}
	madvise(buf, BYTES, MADV_HUGEPAGE);
	/* One random cycle through every line, for the chase. */
	uint64_t *perm = malloc(LINES * sizeof(*perm));
	if (!perm) {
		fprintf(stderr, "tips-misswindow: out of memory\n");
		return 3;
	}
	for (uint64_t i = 0; i < LINES; i++)
		perm[i] = i;
	uint64_t s = 88172645463325252ull;
	for (uint64_t i = LINES - 1; i > 0; i--) {
		uint64_t j = xorshift(&s) % (i + 1), t = perm[i];
		perm[i] = perm[j];
		perm[j] = t;
	}
	for (uint64_t i = 0; i < LINES; i++)
		*(uint64_t *)(buf + perm[i] * 64) = perm[(i + 1) % LINES] * 64;
	free(perm);

	double lat = median_of(chase_pad, buf, 0);
	printf("chase: %.1f ns per load (the latency)\n", lat);
	static const unsigned dflt[] = { 0, 20, 50, 100, 150, 200, 250 };
	int n = argc > 1 ? argc - 1 : (int)(sizeof(dflt) / sizeof(dflt[0]));
	for (int i = 0; i < n; i++) {
		unsigned pad = argc > 1 ? (unsigned)strtoul(argv[i + 1], NULL, 10) : dflt[i];
		if (pad > MAX_PAD) {
			fprintf(stderr, "tips-misswindow: PAD at most %u\n", MAX_PAD);
			return 2;
		}
		double ns = median_of(independent, buf, pad);
		printf("independent loads, %3u instructions between two: %6.1f ns per load, "
		       "%.1f in flight\n", pad / 10 * 10, ns, lat / ns);
	}
	free(buf);
	return 0;
}
