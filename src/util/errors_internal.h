/*
 * errors_internal.h - how parts of libtips report a failure.
 *
 * Pattern: `return tips_set_error(TIPS_EXXX, "pool %s: ...", path);` sets the thread's
 * message (tips_errormsg()) and returns the code in one step. tips_set_error() and
 * tips_errno_code() are public (tips/errors.h), for extensions too; what is here is
 * only for the library's own sources.
 */
#ifndef TIPS_UTIL_ERRORS_INTERNAL_H
#define TIPS_UTIL_ERRORS_INTERNAL_H

#include <errno.h>
#include <stddef.h>
#include <tips/errors.h>

/* The argument rule every key-value write of the library shares (the TIPS facade and
 * ListDB): a handle, a key of 1..TIPS_MAX_KEY bytes, a value pointer when vlen > 0
 * and vlen <= TIPS_MAX_VALUE. 0, TIPS_EINVAL or TIPS_ETOOBIG with the message set. */
int write_args_check(const void *handle, const void *key, size_t klen, const void *val,
		     size_t vlen);

/* TIPS_ESIZE for a value of @vlen bytes and a buffer of @cap: the message ("@who: the
 * value has ... bytes, the buffer ...") is formatted only if tips_errormsg() asks for
 * it. @who must be a string that outlives the thread (a literal). */
int tips_set_error_size(const char *who, size_t vlen, size_t cap);

/* The thread's deferred TIPS_ESIZE message (who == NULL: none), saved before and put
 * back after a lookup the library makes only to learn whether a key is present, with
 * no buffer: that lookup's TIPS_ESIZE is no failure of the caller's call, and the
 * caller's last failure keeps its message (tips/errors.h). Both are on every write's
 * path: inline, on initial-exec TLS (no __tls_get_addr call in libtips.so). */
struct error_size_state {
	const char *who;
	size_t vlen, cap;
};
extern _Thread_local struct error_size_state tips_pending_size
	__attribute__((tls_model("initial-exec")));

static inline struct error_size_state error_size_save(void)
{
	return tips_pending_size;
}

static inline void error_size_restore(struct error_size_state saved)
{
	tips_pending_size = saved;
}

/* Aborts with a message naming the broken invariant; for internal bugs only. */
#define TIPS_INVARIANT(cond, what)                                                       \
	do {                                                                             \
		if (!(cond))                                                             \
			tips_invariant_failed(__FILE__, __LINE__, what);                 \
	} while (0)
void tips_invariant_failed(const char *file, int line, const char *what)
	__attribute__((noreturn));

#endif
