/*
 * indexes.h - the ops tables of the built-in indexes (private to libtips).
 *
 * Each index source in src/indexes/ is compiled twice (idx_hooks.h) and defines one ops
 * table per build: dram_NAME_ops (volatile original) and tips_NAME_ops (TIPS plug-in).
 * registry.c lists them for tips_index_find() and tips_index_names(); nothing else
 * should name them directly. Add a new index here, in registry.c and in TIPS_INDEXES
 * (root CMakeLists.txt).
 */
#ifndef TIPS_INDEXES_H
#define TIPS_INDEXES_H

#include <tips/tips.h>

/* hash.c: chained hash table, a reader-writer lock per bucket stripe (ATC'21, Fig. 3). */
extern const struct tips_index_ops dram_hash_ops, tips_hash_ops;

#endif /* TIPS_INDEXES_H */
