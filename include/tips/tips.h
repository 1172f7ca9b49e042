/*
 * tips/tips.h - umbrella header of libtips.
 *
 * libtips turns a volatile in-memory index into a crash-consistent, durably
 * linearizable one on persistent memory (the TIPS design, USENIX ATC'21). This layer
 * provides its foundation: pools mapped at a fixed address (tips/pool.h), persistence
 * primitives with counters (tips/pool.h) and a crash-safe allocator (tips/heap.h).
 */
#ifndef TIPS_TIPS_H
#define TIPS_TIPS_H

#include <tips/errors.h>
#include <tips/pool.h>
#include <tips/heap.h>

#define TIPS_VERSION_MAJOR 0
#define TIPS_VERSION_MINOR 1
#define TIPS_VERSION_PATCH 0

#endif /* TIPS_TIPS_H */
