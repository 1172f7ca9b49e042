/*
 * pool_grow.h - tips_pool_grow() with pool options, for tests and tools inside the
 * library that grow a pool on simulated media (media SIM, sim_crash_at, sim_evict) to
 * crash it at a chosen persist event. The design is at the top of pool.c.
 */
#ifndef TIPS_POOL_POOL_GROW_H
#define TIPS_POOL_POOL_GROW_H

#include <stdint.h>
#include <tips/pool.h>

/* tips_pool_grow() mapping the pool as @opts says (NULL: defaults); same return codes. */
int pool_grow_with(const char *path, uint64_t new_size, const struct tips_pool_options *opts);

#endif
