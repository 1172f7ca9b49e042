/*
 * registry.c - the built-in indexes by name: tips_index_find() and tips_index_names()
 * (tips/tips.h).
 *
 * Invariant: index_names[i] is exactly builtin[i]->name. tips_index_find() compares
 * against the ops tables' own names, so a drift in index_names could only make the
 * list wrong, never a lookup; the conformance test (tests/indexes) checks that every
 * listed name finds a table of that name. Both tables are immutable: no locking.
 */
#include "indexes/indexes.h"

#include <string.h>

/* Each index in TIPS_INDEXES order, its dram build then its tips build. */
static const struct tips_index_ops *const builtin[] = {
#define IDX_ENTRY(name) &dram_##name##_ops, &tips_##name##_ops,
#include "indexes_list.h"
#undef IDX_ENTRY
};

#define IDX_ENTRY(name) "dram-" #name, "tips-" #name,
static const char *const index_names[] = {
#include "indexes_list.h"
	NULL,
};
#undef IDX_ENTRY

TIPS_API const struct tips_index_ops *tips_index_find(const char *name)
{
	if (!name)
		return NULL;
	for (size_t i = 0; i < sizeof(builtin) / sizeof(builtin[0]); i++)
		if (strcmp(builtin[i]->name, name) == 0)
			return builtin[i];
	return NULL;
}

static const struct idx_scan_below *const bounded[] = {
	&dram_art_scan_below, &tips_art_scan_below,
};

idx_scan_below_fn idx_scan_below_of(const struct tips_index_ops *ops)
{
	for (size_t i = 0; i < sizeof(bounded) / sizeof(bounded[0]); i++)
		if (bounded[i]->ops == ops)
			return bounded[i]->scan;
	return NULL;
}

TIPS_API const char *const *tips_index_names(void)
{
	return index_names;
}
