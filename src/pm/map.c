/*
 * map.c - media detection and fixed-address mapping.
 *
 * Detection per file: MAP_SHARED_VALIDATE|MAP_SYNC is accepted only on a DAX file
 * system, so acceptance means real PM (pmem); otherwise a tmpfs file (statfs magic)
 * emulates PM with the same flush instructions (shm); anything else needs msync (file).
 *
 * Addresses: new pools are placed at a random 1 GiB-aligned address inside a region
 * that neither the kernel's default mmap placement nor the sanitizers use: 32-64 TiB,
 * or, under ThreadSanitizer (whose application memory is limited), 64-448 GiB.
 */
#define _GNU_SOURCE
#include "pm/map.h"
#include "util/errors_internal.h"

#include <errno.h>
#include <linux/magic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/vfs.h>
#include <unistd.h>

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif
#ifndef MAP_SYNC
#define MAP_SYNC 0x80000
#endif
#ifndef MAP_SHARED_VALIDATE
#define MAP_SHARED_VALIDATE 0x03
#endif

#if defined(__SANITIZE_THREAD__)
#define REGION_START 0x1000000000ull /* 64 GiB */
#define REGION_END 0x7000000000ull   /* 448 GiB */
#else
#define REGION_START 0x200000000000ull /* 32 TiB */
#define REGION_END 0x400000000000ull   /* 64 TiB */
#endif
#define REGION_ALIGN (1ull << 30)

#define PMEM_REASON "DAX file system (MAP_SYNC accepted): cache-line write-back to real PM"

static void *map_fixed(uint64_t addr, size_t size, int flags, int fd)
{
	void *p = mmap((void *)addr, size, PROT_READ | PROT_WRITE, flags | MAP_FIXED_NOREPLACE,
		       fd, 0);
	if (p != MAP_FAILED && (uint64_t)p != addr) { /* old kernel took it as a hint */
		munmap(p, size);
		errno = EEXIST;
		return MAP_FAILED;
	}
	return p;
}

static int map_error(uint64_t addr, size_t size)
{
	if (errno == EEXIST)
		return tips_set_error(TIPS_EADDRINUSE,
				      "address range 0x%llx-0x%llx is already mapped in this "
				      "process; the pool can only be mapped there",
				      (unsigned long long)addr, (unsigned long long)(addr + size));
	if (errno == ENOMEM)
		return tips_set_error(TIPS_EADDRINUSE,
				      "cannot map %zu bytes at 0x%llx: %s", size,
				      (unsigned long long)addr, strerror(errno));
	return tips_set_error(TIPS_EIO, "mmap at 0x%llx failed: %s", (unsigned long long)addr,
			      strerror(errno));
}

static enum tips_media media_of_fs(int fd, char *reason, size_t len)
{
	struct statfs fs;
	if (fstatfs(fd, &fs) == 0 && fs.f_type == TMPFS_MAGIC) {
		snprintf(reason, len, "tmpfs file, not DAX: CPU cache flushes emulate PM "
				      "(survives process crashes, not power loss)");
		return TIPS_MEDIA_SHM;
	}
	snprintf(reason, len, "file system is not DAX (MAP_SYNC refused): persisted with "
			      "msync");
	return TIPS_MEDIA_FILE;
}

enum tips_media pm_media_probe(int fd, char *reason, size_t len)
{
	void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED_VALIDATE | MAP_SYNC, fd, 0);
	if (p != MAP_FAILED) {
		munmap(p, 4096);
		snprintf(reason, len, "%s", PMEM_REASON);
		return TIPS_MEDIA_PMEM;
	}
	return media_of_fs(fd, reason, len);
}

int pm_map(int fd, uint64_t addr, size_t size, enum tips_media requested, struct pm_mapping *m)
{
	memset(m, 0, sizeof(*m));
	m->size = size;
	if (requested == TIPS_MEDIA_SIM) {
		void *work = map_fixed(addr, size, MAP_PRIVATE, fd);
		if (work == MAP_FAILED)
			return map_error(addr, size);
		void *media = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (media == MAP_FAILED) {
			munmap(work, size);
			return tips_set_error(TIPS_EIO, "mmap of the media view failed: %s",
					      strerror(errno));
		}
		m->addr = work;
		m->media_view = media;
		m->media = TIPS_MEDIA_SIM;
		snprintf(m->reason, sizeof(m->reason), "requested: simulated power failure "
				"(private working view, only flushed+fenced lines reach the file)");
		return 0;
	}
	void *p = map_fixed(addr, size, MAP_SHARED_VALIDATE | MAP_SYNC, fd);
	if (p != MAP_FAILED) {
		m->addr = p;
		m->media = TIPS_MEDIA_PMEM;
		snprintf(m->reason, sizeof(m->reason), "%s", PMEM_REASON);
		return 0;
	}
	if (errno == EEXIST)
		return map_error(addr, size);
	p = map_fixed(addr, size, MAP_SHARED, fd);
	if (p == MAP_FAILED)
		return map_error(addr, size);
	m->addr = p;
	m->media = media_of_fs(fd, m->reason, sizeof(m->reason));
	return 0;
}

void pm_unmap(struct pm_mapping *m)
{
	if (m->addr)
		munmap(m->addr, m->size);
	if (m->media_view)
		munmap(m->media_view, m->size);
	m->addr = m->media_view = NULL;
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif

void pm_prefault(const struct pm_mapping *m)
{
	if (madvise(m->addr, m->size, MADV_POPULATE_WRITE) == 0)
		return;
	/* An older kernel: a read of each page faults it in (a tmpfs or file page). */
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	for (size_t off = 0; off < m->size; off += page)
		(void)*(volatile const char *)((const char *)m->addr + off);
}

int pm_choose_address(size_t size, uint64_t *addr)
{
	uint64_t span = (size + REGION_ALIGN - 1) & ~(REGION_ALIGN - 1);
	if (span >= REGION_END - REGION_START)
		return tips_set_error(TIPS_ESIZE, "pool of %zu bytes is larger than the address "
					       "region reserved for pools", size);
	uint64_t slots = (REGION_END - REGION_START - span) / REGION_ALIGN + 1;
	for (int attempt = 0; attempt < 64; attempt++) {
		uint64_t r;
		if (getrandom(&r, sizeof(r), 0) != sizeof(r))
			r = (uint64_t)getpid() * 0x9e3779b97f4a7c15ull + (uint64_t)attempt;
		uint64_t a = REGION_START + (r % slots) * REGION_ALIGN;
		/* Probe: reserve the range to see that it is free in this process. */
		void *p = mmap((void *)a, size, PROT_NONE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE,
			       -1, 0);
		if (p == MAP_FAILED)
			continue;
		munmap(p, size);
		if ((uint64_t)p != a)
			continue;
		*addr = a;
		return 0;
	}
	return tips_set_error(TIPS_EADDRINUSE, "found no free address range for a pool of %zu "
					       "bytes", size);
}
