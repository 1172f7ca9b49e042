/*
 * map.h - mapping a pool file at its fixed address on the right media.
 *
 * Invariant: a mapping is either at exactly the requested address or not made at all
 * (MAP_FIXED_NOREPLACE, and the result is checked on kernels that ignore the flag).
 */
#ifndef TIPS_PM_MAP_H
#define TIPS_PM_MAP_H

#include <stddef.h>
#include <stdint.h>
#include <tips/pool.h>

struct pm_mapping {
	void *addr;            /* the working view at the fixed address */
	void *media_view;      /* SIM only: the shared view that stands for the media */
	size_t size;
	enum tips_media media;
	char reason[160];
};

/* Maps @fd (size bytes) at @addr. Returns 0, TIPS_EADDRINUSE or TIPS_EIO. */
int pm_map(int fd, uint64_t addr, size_t size, enum tips_media requested,
	   struct pm_mapping *m);
void pm_unmap(struct pm_mapping *m);
/* Faults every page of @m in: writable with MADV_POPULATE_WRITE, or, where the kernel
 * lacks it, by reading each page. */
void pm_prefault(const struct pm_mapping *m);

/* Says which media pm_map would choose for @fd, without mapping at a fixed address. */
enum tips_media pm_media_probe(int fd, char *reason, size_t reason_len);

/* A free address for a new pool of @size bytes, in the region reserved for pools. */
int pm_choose_address(size_t size, uint64_t *addr);

#endif
