/*
 * tips/base.h - what both stores of libtips share: the limits on keys and values and
 * the callbacks of scans and walks.
 *
 * The TIPS framework (tips/tips.h), the index plug-in API (tips/plugin.h) and ListDB
 * (tips/listdb.h) all take keys of 1..TIPS_MAX_KEY bytes and values of
 * 0..TIPS_MAX_VALUE bytes, ordered as byte strings (memcmp, shorter first on a tie),
 * and report scans through the same callback. Invariant: these limits are the same for
 * every store, so a key or value one accepts, the other accepts too.
 */
#ifndef TIPS_BASE_H
#define TIPS_BASE_H

#include <stddef.h>
#include <tips/errors.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Longest key and value the stores accept (TIPS_ETOOBIG beyond). */
#define TIPS_MAX_KEY 1024u
#define TIPS_MAX_VALUE (64u * 1024u)

/** Called by a scan for each key in order; non-zero stops the scan. */
typedef int (*tips_scan_fn)(const void *key, size_t klen, const void *val, size_t vlen,
			    void *arg);
/** Called by a walk for each block a database or an index owns (tips_db_walk(), and an
 * index's ops->walk: each a tips_alloc() result). */
typedef int (*tips_walk_fn)(const void *block, void *arg);

#ifdef __cplusplus
}
#endif
#endif /* TIPS_BASE_H */
