/*
 * test_histogram.c - latency histograms: exact for small values, within 1/32 above,
 * percentiles of known sets, the cumulative distribution, merge, and the largest values.
 */
#include "histogram.h"
#include "test_util.h"

static struct histogram h, other;

int main(void)
{
	histogram_clear(&h);
	CHECK(histogram_quantile(&h, 0.5) == 0);
	/* 1..100000: the q-quantile is q*100000 within 1/32. */
	for (uint64_t v = 1; v <= 100000; v++)
		histogram_record(&h, v);
	const double qs[] = { 0.5, 0.9, 0.99, 0.999, 0.9999 };
	for (int i = 0; i < 5; i++) {
		double want = qs[i] * 100000, got = (double)histogram_quantile(&h, qs[i]);
		CHECK(got >= want && got <= want * (1 + 1.0 / 32) + 1);
	}
	CHECK(histogram_quantile(&h, 1.0) == 100000 && h.max == 100000 && h.total == 100000);
	/* The CDF: increasing values and fractions, ending at the max with 1; each point's
	 * fraction is the share of 1..100000 at or below its value, within 1/32. */
	static uint64_t cv[HISTOGRAM_BUCKETS];
	static double cf[HISTOGRAM_BUCKETS];
	size_t n = histogram_cdf(&h, cv, cf, HISTOGRAM_BUCKETS);
	CHECK(n > 100 && n < 1000);
	CHECK(cv[n - 1] == 100000 && cf[n - 1] == 1.0);
	for (size_t i = 0; i < n; i++) {
		CHECK(i == 0 || (cv[i] > cv[i - 1] && cf[i] > cf[i - 1]));
		double want = (double)cv[i] / 100000;
		CHECK(cf[i] <= want + 1e-9 && cf[i] >= want / (1 + 1.0 / 32) - 1e-9);
	}
	CHECK(histogram_cdf(&h, cv, cf, 3) == 3);
	/* Small values are exact. */
	histogram_clear(&other);
	for (uint64_t v = 0; v < 32; v++)
		histogram_record(&other, v);
	CHECK(histogram_quantile(&other, 0.5) == 16);
	/* Merge, and a huge value. */
	histogram_record(&other, UINT64_MAX);
	histogram_merge(&h, &other);
	CHECK(h.total == 100033 && h.max == UINT64_MAX);
	CHECK(histogram_quantile(&h, 1.0) == UINT64_MAX);
	CHECK(histogram_quantile(&h, 0.0) == 0);
	return test_finish("test_histogram");
}
