/*
 * seqcount.h - a sequence counter for optimistic readers (a seqlock's counter, without
 * the lock: writers already exclude each other by a lock of their own), and the pause
 * that spinning and retrying threads take.
 *
 * Invariant: the counter is odd exactly while a writer stores to what it guards
 * (seq_write_begin .. seq_write_end), so a reader whose seq_read_begin returned an
 * even value and whose seq_read_valid then holds read none of those stores half-done.
 * A reader that fails validation must discard everything it read, and must only have
 * followed pointers that stay valid whatever the writers do (the indexes' frees are
 * deferred past read sections, util/grace.h; pmdk-hash bounds-checks pool offsets).
 */
#ifndef TIPS_UTIL_SEQCOUNT_H
#define TIPS_UTIL_SEQCOUNT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* A spin-wait hint, for retry loops and spinning locks. */
static inline void cpu_pause(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

/* A reader's wait before its retry number @attempt (0, 1, ...): 2^attempt pauses. */
static inline void seq_backoff(unsigned attempt)
{
	for (unsigned i = 0; i < 1u << attempt; i++)
		cpu_pause();
}

/* Writer, holding its lock: the counter odd before any store that follows. */
static inline void seq_write_begin(_Atomic uint64_t *seq)
{
	atomic_store_explicit(seq, atomic_load_explicit(seq, memory_order_relaxed) + 1,
			      memory_order_relaxed);
	atomic_thread_fence(memory_order_release);
}

/* Writer: the counter even again, after every store that preceded. */
static inline void seq_write_end(_Atomic uint64_t *seq)
{
	atomic_store_explicit(seq, atomic_load_explicit(seq, memory_order_relaxed) + 1,
			      memory_order_release);
}

/* Reader: the value to validate against; odd means a writer is storing (retry). */
static inline uint64_t seq_read_begin(_Atomic uint64_t *seq)
{
	return atomic_load_explicit(seq, memory_order_acquire);
}

/* Reader, after its reads: true if they saw no store of a writer half-done. */
static inline bool seq_read_valid(_Atomic uint64_t *seq, uint64_t s0)
{
	atomic_thread_fence(memory_order_acquire); /* the reads above before the check */
	return !(s0 & 1) && atomic_load_explicit(seq, memory_order_relaxed) == s0;
}

/*
 * memcpy and memcmp == 0 for an optimistic reader, whose reads race with a writer by
 * design. Under ThreadSanitizer plain loops of volatile loads, since TSan intercepts
 * memcpy and memcmp themselves (call them from no_sanitize_thread functions);
 * otherwise the library's.
 */
#if defined(__SANITIZE_THREAD__)
__attribute__((no_sanitize_thread)) static inline void seq_racy_copy(void *dst,
								     const void *src,
								     size_t n)
{
	const volatile unsigned char *s = src;
	unsigned char *d = dst;
	for (size_t i = 0; i < n; i++)
		d[i] = s[i];
}

__attribute__((no_sanitize_thread)) static inline bool seq_racy_equal(const void *a,
								      const void *b,
								      size_t n)
{
	const volatile unsigned char *x = a;
	const unsigned char *y = b;
	for (size_t i = 0; i < n; i++)
		if (x[i] != y[i])
			return false;
	return true;
}
#else
static inline void seq_racy_copy(void *dst, const void *src, size_t n)
{
	memcpy(dst, src, n);
}

static inline bool seq_racy_equal(const void *a, const void *b, size_t n)
{
	if (n == 8) { /* the common key: one load each, no call */
		uint64_t x, y;
		memcpy(&x, a, 8);
		memcpy(&y, b, 8);
		return x == y;
	}
	return memcmp(a, b, n) == 0;
}
#endif

#endif /* TIPS_UTIL_SEQCOUNT_H */
