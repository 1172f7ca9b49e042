/*
 * tips/errors.h - the error codes every part of libtips returns.
 *
 * Every function that can fail returns 0 on success or a negative code: either one of
 * the TIPS_E* codes below (a reserved range, so they never collide with -errno), or a
 * plain -errno for failures of the operating system that have no better name.
 * tips_strerror() names a code; tips_errormsg() gives the detail of the last failure
 * on the calling thread (which file, which size, which address).
 */
#ifndef TIPS_ERRORS_H
#define TIPS_ERRORS_H

#ifdef __cplusplus
extern "C" {
#endif

#define TIPS_API __attribute__((visibility("default")))

/* The reserved range: TIPS_E_FIRST >= code >= TIPS_E_LAST. */
enum tips_error {
	TIPS_E_FIRST = -30000,
	TIPS_EINVAL = -30000,     /* an argument is invalid (NULL, out of range) */
	TIPS_ENOENT = -30001,     /* no file at the given path */
	TIPS_ENODIR = -30002,     /* the directory of the path does not exist */
	TIPS_EEXIST = -30003,     /* a file already exists at the path */
	TIPS_ENOSPC = -30004,     /* no room: the file system has none for the pool, or the
	                             pool's heap cannot take a write (a TIPS write that
	                             replay could not apply; delete keys or grow the pool) */
	TIPS_ESIZE = -30005,      /* a size is wrong: pool size too small, too large or not
	                             aligned (create, grow), or the caller's buffer is too
	                             small for the value (lookup: the length is returned) */
	TIPS_ENOTPOOL = -30006,   /* the file is not a TIPS pool */
	TIPS_EVERSION = -30007,   /* the pool has a layout version this build cannot read */
	TIPS_ECORRUPT = -30008,   /* header checksum or on-media structure is wrong */
	TIPS_ETRUNCATED = -30009, /* the file is shorter than the size in its header */
	TIPS_ELOCKED = -30010,    /* the pool is open elsewhere (another process or handle) */
	TIPS_EADDRINUSE = -30011, /* the pool's fixed mapping address is taken */
	TIPS_ENOMEM = -30012,     /* the pool's heap is full, or DRAM ran out */
	TIPS_ETOOBIG = -30013,    /* a request exceeds a hard limit (allocation size...) */
	TIPS_EIO = -30014,        /* an I/O call failed; tips_errormsg() has errno */
	TIPS_EPERM = -30015,      /* permission denied on the pool file */
	TIPS_ELOGFULL = -30016,   /* an allocation log is full and only its owner may checkpoint */
	TIPS_EBUSY = -30017,      /* the object is in use (e.g. closed while threads run) */
	TIPS_EKEYEXISTS = -30018, /* tips_insert: the key is already present */
	TIPS_ENOTFOUND = -30019,  /* the key is absent (update, delete, lookup) */
	TIPS_EMISMATCH = -30020,  /* the pool holds another index or framework layout */
	TIPS_E_LAST = -30020,
};

/**
 * tips_strerror() - name an error code.
 * @code: a TIPS_E* code, a negative errno, or 0.
 *
 * Return: a static string; never NULL. Thread-safe.
 */
TIPS_API const char *tips_strerror(int code);

/**
 * tips_errormsg() - detail of the last failure on this thread.
 *
 * Return: a thread-local string describing the most recent error a libtips call
 * returned on the calling thread ("" if none). Valid until the next failing call.
 */
TIPS_API const char *tips_errormsg(void);

/**
 * tips_set_error() - set the calling thread's tips_errormsg() and return @code.
 * @code: the code the caller is about to return (a TIPS_E* code or a negative errno).
 * @fmt:  printf format of the detail (truncated to 511 bytes).
 *
 * For code that extends libtips and reports its failures the way libtips does: an
 * index's callbacks (e.g. a walk that finds a damaged node), or a store written beside
 * the library (the pmdk-hash baseline). Pattern: `return tips_set_error(TIPS_EINVAL,
 * "...", ...);`. Thread-safe.
 */
TIPS_API int tips_set_error(int code, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

/**
 * tips_errno_code() - the TIPS_E* code closest to the errno value @err (ENOENT:
 * TIPS_ENOENT, EEXIST: TIPS_EEXIST, ENOSPC/EFBIG/EDQUOT: TIPS_ENOSPC, EACCES/EPERM/
 * EROFS: TIPS_EPERM, ENOMEM: TIPS_ENOMEM, EINVAL: TIPS_EINVAL, anything else:
 * TIPS_EIO), so that extensions map system failures as libtips does.
 */
TIPS_API int tips_errno_code(int err);

#ifdef __cplusplus
}
#endif
#endif /* TIPS_ERRORS_H */
