/*
 * keygen.h - the key generators of tips-bench (PiBench semantics, VLDB'19, §4; the
 * distributions of Gray et al., "Quickly generating billion-record synthetic
 * databases", SIGMOD'94).
 *
 * A generator draws record ids in [0, n) from a distribution; the benchmark turns an
 * id into a key with keygen_scatter(), a multiplicative hash that is a bijection on
 * 64-bit integers, so the hot ids of a skewed distribution (the small ones) are spread
 * over the key space instead of sitting next to each other.
 *  - uniform:      every id equally likely;
 *  - selfsimilar:  skew h puts a share 1-h of draws on the first h*n ids, recursively
 *                  (h = 0.2: 80% of accesses on 20% of the keys);
 *  - zipfian:      P(rank r) proportional to 1/r^theta, theta = skew in (0, 1);
 *  - latest:       zipfian over recency: the newest ids are the hottest (YCSB D).
 * Each benchmark thread owns a struct keygen; the same seed and stream give the same
 * sequence of draws, so a run can be repeated exactly.
 */
#ifndef TIPS_BENCH_KEYGEN_H
#define TIPS_BENCH_KEYGEN_H

#include <stdint.h>

/* xoshiro256** (Blackman and Vigna): small, fast, good statistical quality. */
struct rng {
	uint64_t s[4];
};

/* Seeds @r for (@seed, @stream): distinct streams give independent sequences. */
void rng_seed(struct rng *r, uint64_t seed, uint64_t stream);

/* The draws are inline: they sit on every measured operation's path, and a call per
 * draw is a good part of the harness's own cost (tips-bench --index null). */
static inline uint64_t rng_rotl(uint64_t x, int k)
{
	return (x << k) | (x >> (64 - k));
}

static inline uint64_t rng_next(struct rng *r)
{
	uint64_t *s = r->s;
	uint64_t result = rng_rotl(s[1] * 5, 7) * 9;
	uint64_t t = s[1] << 17;
	s[2] ^= s[0];
	s[3] ^= s[1];
	s[1] ^= s[2];
	s[0] ^= s[3];
	s[2] ^= t;
	s[3] = rng_rotl(s[3], 45);
	return result;
}

/* Uniform in [0, 1). */
static inline double rng_double(struct rng *r)
{
	return (double)(rng_next(r) >> 11) * 0x1.0p-53;
}

/* Uniform in [0, n), n > 0, without modulo bias (Lemire's multiply-shift, rejecting
 * the biased low range). */
static inline uint64_t rng_below(struct rng *r, uint64_t n)
{
	unsigned __int128 m = (unsigned __int128)rng_next(r) * n;
	uint64_t low = (uint64_t)m;
	if (low < n) {
		uint64_t floor = -n % n;
		while (low < floor) {
			m = (unsigned __int128)rng_next(r) * n;
			low = (uint64_t)m;
		}
	}
	return (uint64_t)(m >> 64);
}

enum keydist {
	KEYDIST_UNIFORM,
	KEYDIST_SELFSIMILAR,
	KEYDIST_ZIPFIAN,
	KEYDIST_LATEST,
};

/* Parses "uniform", "selfsimilar", "zipfian" or "latest"; -1 if none. */
int keydist_parse(const char *name, enum keydist *out);
const char *keydist_name(enum keydist d);

/*
 * Zipfian constants for n items and exponent theta (Gray et al.): computing zeta(n)
 * takes O(n) once; a draw is O(1). Shared read-only by every thread.
 */
struct zipf {
	uint64_t n;
	double theta, alpha, zetan, eta, half_pow_theta;
};

/* 0, or -1 if theta is not in (0, 1) or n is 0. */
int zipf_init(struct zipf *z, uint64_t n, double theta);
/* A rank in [0, n): 0 is the most frequent. */
uint64_t zipf_draw(const struct zipf *z, struct rng *r);

struct keygen {
	enum keydist dist;
	double skew;
	double selfsimilar_exp;  /* log(skew) / log(1 - skew) */
	const struct zipf *zipf; /* zipfian and latest */
	struct rng rng;
};

/*
 * Sets up @g. @skew: selfsimilar h in (0, 0.5], zipfian/latest theta in (0, 1); @zipf:
 * constants for the id range (zipfian, latest), NULL otherwise.
 * Returns 0, or -1 if the parameters do not fit the distribution.
 */
int keygen_init(struct keygen *g, enum keydist dist, double skew, const struct zipf *zipf,
		uint64_t seed, uint64_t stream);

/* keygen_next() for every distribution but uniform. */
uint64_t keygen_next_skewed(struct keygen *g, uint64_t n);

/* An id in [0, n): for latest, the ids near n-1 (the newest) are the hottest. */
static inline uint64_t keygen_next(struct keygen *g, uint64_t n)
{
	return g->dist == KEYDIST_UNIFORM ? rng_below(&g->rng, n) : keygen_next_skewed(g, n);
}

/* The key of record @id: a bijection, so distinct ids give distinct keys. */
static inline uint64_t keygen_scatter(uint64_t id)
{
	return id * 0x9e3779b97f4a7c15ull; /* odd: invertible modulo 2^64 */
}

#endif /* TIPS_BENCH_KEYGEN_H */
