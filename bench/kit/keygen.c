/*
 * keygen.c - random numbers and key distributions for tips-bench (see keygen.h).
 * Invariant: every draw is a function of (seed, stream, number of draws so far), so a
 * thread's operation sequence repeats exactly under the same seed.
 */
#include "keygen.h"

#include <math.h>
#include <string.h>

static uint64_t splitmix64(uint64_t *x)
{
	uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

void rng_seed(struct rng *r, uint64_t seed, uint64_t stream)
{
	uint64_t x = seed ^ (stream * 0xd1342543de82ef95ull);
	for (int i = 0; i < 4; i++)
		r->s[i] = splitmix64(&x);
}

static const char *const dist_names[] = { "uniform", "selfsimilar", "zipfian", "latest" };

int keydist_parse(const char *name, enum keydist *out)
{
	for (int i = 0; i < 4; i++)
		if (strcmp(name, dist_names[i]) == 0) {
			*out = (enum keydist)i;
			return 0;
		}
	return -1;
}

const char *keydist_name(enum keydist d)
{
	return (unsigned)d < 4 ? dist_names[d] : "?";
}

int zipf_init(struct zipf *z, uint64_t n, double theta)
{
	if (n == 0 || !(theta > 0.0 && theta < 1.0))
		return -1;
	double zetan = 0.0;
	for (uint64_t i = 1; i <= n; i++)
		zetan += 1.0 / pow((double)i, theta);
	double zeta2 = 1.0 + 1.0 / pow(2.0, theta);
	z->n = n;
	z->theta = theta;
	z->alpha = 1.0 / (1.0 - theta);
	z->zetan = zetan;
	z->eta = (1.0 - pow(2.0 / (double)n, 1.0 - theta)) / (1.0 - zeta2 / zetan);
	z->half_pow_theta = 1.0 + pow(0.5, theta);
	return 0;
}

uint64_t zipf_draw(const struct zipf *z, struct rng *r)
{
	double u = rng_double(r), uz = u * z->zetan;
	if (uz < 1.0)
		return 0;
	if (uz < z->half_pow_theta)
		return z->n > 1 ? 1 : 0;
	uint64_t v = (uint64_t)((double)z->n * pow(z->eta * u - z->eta + 1.0, z->alpha));
	return v < z->n ? v : z->n - 1;
}

int keygen_init(struct keygen *g, enum keydist dist, double skew, const struct zipf *zipf,
		uint64_t seed, uint64_t stream)
{
	memset(g, 0, sizeof(*g));
	g->dist = dist;
	g->skew = skew;
	rng_seed(&g->rng, seed, stream);
	switch (dist) {
	case KEYDIST_UNIFORM:
		return 0;
	case KEYDIST_SELFSIMILAR:
		if (!(skew > 0.0 && skew <= 0.5))
			return -1;
		g->selfsimilar_exp = log(skew) / log(1.0 - skew);
		return 0;
	case KEYDIST_ZIPFIAN:
	case KEYDIST_LATEST:
		if (!zipf)
			return -1;
		g->zipf = zipf;
		return 0;
	}
	return -1;
}

uint64_t keygen_next_skewed(struct keygen *g, uint64_t n)
{
	switch (g->dist) {
	case KEYDIST_SELFSIMILAR: {
		uint64_t v = (uint64_t)((double)n * pow(rng_double(&g->rng), g->selfsimilar_exp));
		return v < n ? v : n - 1;
	}
	case KEYDIST_ZIPFIAN: {
		/* Ranks beyond n (a table made for a larger range) fold back into it. */
		uint64_t v = zipf_draw(g->zipf, &g->rng);
		return v < n ? v : v % n;
	}
	case KEYDIST_LATEST: {
		uint64_t back = zipf_draw(g->zipf, &g->rng);
		return back < n ? n - 1 - back : n - 1 - back % n;
	}
	case KEYDIST_UNIFORM:
	default:
		return rng_below(&g->rng, n);
	}
}
