/*
 * libtips.h - the umbrella header of libtips: every public header, for a program that
 * wants all of it in one include.
 *
 * The headers, by audience:
 *   tips/tips.h     applications of the TIPS framework: open a database over an index,
 *                   get, put, insert, update, remove, scan, batches, stats, checks;
 *   tips/plugin.h   index authors: the ops table an index implements and the calls it
 *                   may make inside its callbacks (tips_alloc, tips_free, tips_ulog_add,
 *                   tips_root, tips_block_valid);
 *   tips/listdb.h   ListDB, the write-optimized key-value store;
 *   tips/pool.h     pools mapped at a fixed address, persistence primitives, counters;
 *   tips/heap.h     the crash-safe persistent allocator of every pool;
 *   tips/batch.h    write batches, committed to either store;
 *   tips/base.h     key and value limits, scan and walk callbacks (both stores);
 *   tips/errors.h   error codes and messages;
 *   tips/version.h  the version of the headers and of the loaded library.
 * Each of them compiles on its own and includes what its declarations need.
 */
#ifndef LIBTIPS_H
#define LIBTIPS_H

#include <tips/base.h>
#include <tips/batch.h>
#include <tips/errors.h>
#include <tips/heap.h>
#include <tips/listdb.h>
#include <tips/plugin.h>
#include <tips/pool.h>
#include <tips/tips.h>
#include <tips/version.h>

#endif /* LIBTIPS_H */
