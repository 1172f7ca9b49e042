/*
 * histogram.c - log-linear latency histograms (see histogram.h). Bucket of v: values
 * below 2^SUB_BITS have a bucket each; above, the bucket is (exponent, the SUB_BITS bits
 * after the leading one), so a bucket spans at most 1/32 of its values.
 */
#include "histogram.h"

#include <string.h>

static unsigned bucket_of(uint64_t v)
{
	if (v < (1u << HISTOGRAM_SUB_BITS))
		return (unsigned)v;
	unsigned msb = 63u - (unsigned)__builtin_clzll(v);
	unsigned shift = msb - HISTOGRAM_SUB_BITS;
	return ((shift + 1) << HISTOGRAM_SUB_BITS) + (unsigned)((v >> shift) & ((1u << HISTOGRAM_SUB_BITS) - 1));
}

/* The largest value that falls in bucket @b. */
static uint64_t bucket_top(unsigned b)
{
	if (b < (1u << HISTOGRAM_SUB_BITS))
		return b;
	unsigned shift = (b >> HISTOGRAM_SUB_BITS) - 1;
	uint64_t mant = (1u << HISTOGRAM_SUB_BITS) | (b & ((1u << HISTOGRAM_SUB_BITS) - 1));
	return ((mant + 1) << shift) - 1;
}

void histogram_clear(struct histogram *h)
{
	memset(h, 0, sizeof(*h));
}

void histogram_record(struct histogram *h, uint64_t value)
{
	h->count[bucket_of(value)]++;
	h->total++;
	if (value > h->max)
		h->max = value;
}

void histogram_merge(struct histogram *into, const struct histogram *from)
{
	for (unsigned b = 0; b < HISTOGRAM_BUCKETS; b++)
		into->count[b] += from->count[b];
	into->total += from->total;
	if (from->max > into->max)
		into->max = from->max;
}

uint64_t histogram_quantile(const struct histogram *h, double q)
{
	if (!h->total)
		return 0;
	uint64_t rank = (uint64_t)(q * (double)h->total);
	if (rank >= h->total)
		rank = h->total - 1;
	uint64_t seen = 0;
	for (unsigned b = 0; b < HISTOGRAM_BUCKETS; b++) {
		seen += h->count[b];
		if (seen > rank) {
			uint64_t top = bucket_top(b);
			return top < h->max ? top : h->max;
		}
	}
	return h->max;
}

size_t histogram_cdf(const struct histogram *h, uint64_t *value, double *fraction, size_t max)
{
	size_t n = 0;
	uint64_t seen = 0;
	for (unsigned b = 0; b < HISTOGRAM_BUCKETS && n < max && seen < h->total; b++) {
		if (!h->count[b])
			continue;
		seen += h->count[b];
		uint64_t top = bucket_top(b);
		value[n] = top < h->max ? top : h->max;
		fraction[n] = (double)seen / (double)h->total;
		n++;
	}
	return n;
}
