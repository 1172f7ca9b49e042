/*
 * errors.c - names of the TIPS_E* codes and the per-thread error message.
 *
 * Invariant: tips_errormsg() always returns a NUL-terminated thread-local string; a
 * failing call sets it through tips_set_error() (or, for a value longer than a
 * lookup's buffer, tips_set_error_size()) before it returns the code.
 *
 * tips_set_error_size() only records its numbers; tips_errormsg() formats them when
 * it is asked. A buffer too small is an ordinary outcome on hot paths (a write that
 * asks the index whether its key exists looks it up with no buffer), and formatting
 * a message there cost more than the lookup.
 */
#include "util/errors_internal.h"

#include <tips/base.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static _Thread_local char last_message[512];
/* A message not formatted yet (tips_set_error_size): who, the value's length, the
 * buffer's; who == NULL when last_message is current. Shared with the inline
 * error_size_save/restore (errors_internal.h). */
_Thread_local struct error_size_state tips_pending_size
	__attribute__((tls_model("initial-exec")));

static const char *const error_names[] = {
	[0] = "invalid argument",
	[1] = "no pool file at that path",
	[2] = "directory does not exist",
	[3] = "file already exists",
	[4] = "no space left: the file system has no room for the pool, or the pool's heap "
	      "cannot take the write",
	[5] = "pool size too small, too large or not aligned, or a buffer too small for the value",
	[6] = "file is not a TIPS pool",
	[7] = "pool has a foreign layout version",
	[8] = "pool is corrupted",
	[9] = "pool file is truncated",
	[10] = "pool is already open elsewhere",
	[11] = "pool mapping address is taken",
	[12] = "out of pool memory",
	[13] = "request too large",
	[14] = "I/O error",
	[15] = "permission denied",
	[16] = "allocation log full",
	[17] = "busy",
	[18] = "key already exists",
	[19] = "key not found",
	[20] = "pool holds another index",
};

const char *tips_strerror(int code)
{
	if (code == 0)
		return "success";
	if (code <= TIPS_E_FIRST && code >= TIPS_E_LAST)
		return error_names[TIPS_E_FIRST - code];
	if (code < 0 && code > -4096)
		return strerror(-code);
	return "unknown error";
}

const char *tips_errormsg(void)
{
	if (tips_pending_size.who) {
		snprintf(last_message, sizeof(last_message),
			 "%s: the value has %zu bytes, the buffer %zu", tips_pending_size.who,
			 tips_pending_size.vlen, tips_pending_size.cap);
		tips_pending_size.who = NULL;
	}
	return last_message;
}

int tips_set_error_size(const char *who, size_t vlen, size_t cap)
{
	tips_pending_size.who = who;
	tips_pending_size.vlen = vlen;
	tips_pending_size.cap = cap;
	return TIPS_ESIZE;
}

int tips_set_error(int code, const char *fmt, ...)
{
	tips_pending_size.who = NULL;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(last_message, sizeof(last_message), fmt, ap);
	va_end(ap);
	return code;
}

int tips_errno_code(int err)
{
	switch (err) {
	case ENOENT: return TIPS_ENOENT;
	case EEXIST: return TIPS_EEXIST;
	case ENOSPC: case EFBIG: case EDQUOT: return TIPS_ENOSPC;
	case EACCES: case EPERM: case EROFS: return TIPS_EPERM;
	case ENOMEM: return TIPS_ENOMEM;
	case EINVAL: return TIPS_EINVAL;
	default: return TIPS_EIO;
	}
}

void tips_invariant_failed(const char *file, int line, const char *what)
{
	fprintf(stderr, "libtips: broken invariant at %s:%d: %s\n", file, line, what);
	abort();
}

int write_args_check(const void *handle, const void *key, size_t klen, const void *val,
		     size_t vlen)
{
	if (!handle || !key || klen == 0 || (vlen && !val))
		return tips_set_error(TIPS_EINVAL, "a write needs a database, a key of 1 byte "
				      "or more, and a value pointer when vlen > 0");
	if (klen > TIPS_MAX_KEY || vlen > TIPS_MAX_VALUE)
		return tips_set_error(TIPS_ETOOBIG, "key of %zu bytes or value of %zu bytes: the "
				      "limits are %u and %u", klen, vlen, TIPS_MAX_KEY,
				      TIPS_MAX_VALUE);
	return 0;
}
