/*
 * indexes.h - the ops tables of the built-in indexes (private to libtips).
 *
 * Each index source in src/indexes/ is compiled twice (idx_hooks.h) and defines one ops
 * table per build: dram_NAME_ops (volatile original) and tips_NAME_ops (TIPS plug-in).
 * registry.c lists them for tips_index_find() and tips_index_names(); nothing else
 * should name them directly. The list of indexes is TIPS_INDEXES in the root
 * CMakeLists.txt, which writes it into indexes_list.h as IDX_ENTRY(NAME) lines: adding
 * an index is adding its name there.
 */
#ifndef TIPS_INDEXES_H
#define TIPS_INDEXES_H

#include <tips/plugin.h>

#include "util/scan_below.h"

#define IDX_ENTRY(name) extern const struct tips_index_ops dram_##name##_ops, tips_##name##_ops;
#include "indexes_list.h"
#undef IDX_ENTRY

/* The built-in indexes with a bounded scan (util/scan_below.h). */
extern const struct idx_scan_below dram_art_scan_below, tips_art_scan_below;

#endif /* TIPS_INDEXES_H */
