/*
 * test_histogram.c - latency histograms: exact for small values, within 1/32 above,
 * percentiles of known sets, merge, and the largest values.
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
