/*
 * histogram.h - latency histograms for tips-bench: log-linear buckets (each power of
 * two split in 32), so any recorded value is reported within 1/32 (about 3%) of itself
 * from 1 ns to centuries, in a fixed 16 KiB per histogram. Each thread records into
 * its own; the benchmark merges them and asks for percentiles.
 */
#ifndef TIPS_BENCH_HISTOGRAM_H
#define TIPS_BENCH_HISTOGRAM_H

#include <stddef.h>
#include <stdint.h>

#define HISTOGRAM_SUB_BITS 5 /* 32 sub-buckets per power of two */
#define HISTOGRAM_BUCKETS ((64 - HISTOGRAM_SUB_BITS + 1) << HISTOGRAM_SUB_BITS)

struct histogram {
	uint64_t count[HISTOGRAM_BUCKETS];
	uint64_t total, max;
};

void histogram_clear(struct histogram *h);
void histogram_record(struct histogram *h, uint64_t value);
/* Adds @from into @into. */
void histogram_merge(struct histogram *into, const struct histogram *from);
/* The value at quantile @q in [0, 1] (the bucket's upper bound, capped at the max seen);
 * 0 if empty. */
uint64_t histogram_quantile(const struct histogram *h, double q);
/* The cumulative distribution: for each non-empty bucket in order, its upper bound
 * (capped at the max seen) into @value[i] and the share of values at or below it into
 * @fraction[i]. Writes at most @max points; returns how many it wrote. */
size_t histogram_cdf(const struct histogram *h, uint64_t *value, double *fraction, size_t max);

#endif /* TIPS_BENCH_HISTOGRAM_H */
