/*
 * pool.c - create, open and close pool files (tips/pool.h).
 *
 * Create builds the pool under a hidden temporary name in the target directory and
 * publishes it with renameat2(RENAME_NOREPLACE) only once header, root and heap are
 * persistent and the file is synced; the directory is synced after the rename. A
 * failure at any step removes the temporary file, so a path either holds a complete
 * pool or nothing new; temporary files of a create that crashed are removed by the next
 * create of the same name (their creator's lock is gone). Open validates the header (magic, version, checksum,
 * size) before mapping anything, takes an exclusive flock for as long as the pool is
 * open, and maps at the recorded address or fails.
 *
 * Grow (tips_pool_grow), crash-safe by redo. The header's geometry (size, heap_size)
 * is checksummed, and the heap's chunk count is in its own checksummed header; no
 * single 8-byte store can change them together, so a grow writes its decision down
 * first and applies it after:
 *   1. under the pool's flock, validate the header and plan: the new size must be
 *      larger and aligned, and the heap's chunk table must have entries for the new
 *      chunks (heap_grow_plan);
 *   2. extend the file with posix_fallocate and fsync it; the old pool is untouched
 *      (a file longer than its header's size is a valid pool);
 *   3. map the grown file and persist FREE table entries for the new chunks
 *      (heap_grow_prepare): memory no current structure uses;
 *   4. commit: persist the intent record {old size, new size, heap chunk count,
 *      checksum} on its own header cache line (struct pool_grow_intent);
 *   5. redo (grow_finish): heap chunk count and heap checksum, then the pool header's
 *      size, heap_size and checksum, each persisted; then clear the intent.
 * A crash before 4 leaves the old pool (with a longer file); after 4, every open and
 * every grow finds the valid intent and runs 5 again before anything else, and
 * tips_pool_stat reports the grown geometry. A torn step 5 (some of size, heap_size,
 * checksum new) is recognised because the intent names both geometries: the stored
 * checksum must match one of them (header_apply_intent). Grow never touches the clean
 * flag, the root and log areas or the heap's allocation logs, so an unclean pool is
 * recovered by its next open exactly as it would have been without the grow.
 */
#define _GNU_SOURCE
#include "pool/pool_grow.h"
#include "pool/pool_layout.h"
#include "heap/heap_internal.h"
#include "pm/map.h"
#include "pm/pm.h"
#include "pm/sim.h"
#include "util/errors_internal.h"
#include "util/version_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#define SIM_DEFAULT_EXIT_CODE 86

struct tips_pool {
	int fd;
	char *path;
	struct pool_header *hdr;
	struct pm_mapping map;
	struct pm_sim *sim;
	struct tips_heap *heap;
	int clean_at_open;
};

static void pool_options_defaults(struct tips_pool_options *o)
{
	memset(o, 0, sizeof(*o));
	o->struct_size = sizeof(*o);
	o->root_size = POOL_DEFAULT_ROOT_SIZE;
	o->log_size = UINT64_MAX; /* default: 1/8 of the pool */
	o->media = TIPS_MEDIA_AUTO;
	o->sim_crash_exit_code = SIM_DEFAULT_EXIT_CODE;
}

void tips_pool_options_init_sized(struct tips_pool_options *o, size_t size)
{
	struct tips_pool_options d;
	pool_options_defaults(&d);
	tips_struct_init(o, size, &d, sizeof(d));
}

/* The caller's options @in (NULL: the defaults) as this library's full struct in
 * @out: an older caller's missing fields take their defaults (version_internal.h). */
static int pool_options_read(const struct tips_pool_options *in,
			     struct tips_pool_options *out, const char *what)
{
	pool_options_defaults(out);
	return in ? tips_struct_read(out, sizeof(*out), in, what) : 0;
}

const char *tips_media_name(enum tips_media media)
{
	switch (media) {
	case TIPS_MEDIA_PMEM: return "pmem";
	case TIPS_MEDIA_SHM: return "shm";
	case TIPS_MEDIA_FILE: return "file";
	case TIPS_MEDIA_SIM: return "sim";
	default: return "auto";
	}
}

/* Media a caller may request: AUTO (detect) or SIM; PMEM, SHM and FILE as detected. */
static int media_request_check(enum tips_media media, const char *fn)
{
	int value = (int)media;
	if (value >= (int)TIPS_MEDIA_AUTO && value <= (int)TIPS_MEDIA_SIM)
		return 0;
	return tips_set_error(TIPS_EINVAL, "%s: media %d is not a valid value; use "
			      "TIPS_MEDIA_AUTO (0), PMEM (1), SHM (2), FILE (3) or SIM (4)", fn,
			      value);
}

static uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) & ~(a - 1); }

static uint64_t header_checksum(const struct pool_header *h)
{
	return crc32(0, (const Bytef *)h, offsetof(struct pool_header, checksum));
}

/* Fills the immutable header fields for a pool of opts->size bytes. */
static int layout_plan(const struct tips_pool_options *o, struct pool_header *h)
{
	if (o->size < TIPS_POOL_MIN_SIZE || o->size % TIPS_POOL_ALIGN != 0)
		return tips_set_error(TIPS_ESIZE, "pool size %llu: must be a multiple of 2 MiB "
				      "and at least %llu MiB", (unsigned long long)o->size,
				      TIPS_POOL_MIN_SIZE >> 20);
	uint64_t log_size = o->log_size == UINT64_MAX ? o->size / 8 : o->log_size;
	if (o->root_size > o->size || log_size > o->size) /* also keeps the sums below exact */
		return tips_set_error(TIPS_ESIZE, "root area (%llu bytes) or log area (%llu bytes) "
				      "larger than the pool (%llu bytes)",
				      (unsigned long long)o->root_size, (unsigned long long)log_size,
				      (unsigned long long)o->size);
	uint64_t root_size = align_up(o->root_size ? o->root_size : 4096, 4096);
	uint64_t log_off = align_up(POOL_HEADER_SIZE + root_size, POOL_AREA_ALIGN);
	log_size = align_up(log_size, POOL_AREA_ALIGN);
	uint64_t heap_off = log_off + log_size;
	if (heap_off >= o->size || o->size - heap_off < HEAP_MIN_SIZE)
		return tips_set_error(TIPS_ESIZE, "pool size %llu leaves less than %llu MiB for "
				      "the heap after a %llu-byte root area and a %llu-byte log area",
				      (unsigned long long)o->size, HEAP_MIN_SIZE >> 20,
				      (unsigned long long)root_size, (unsigned long long)log_size);
	memset(h, 0, sizeof(*h));
	memcpy(h->magic, POOL_MAGIC, 8);
	h->layout_version = POOL_LAYOUT_VERSION;
	h->header_bytes = offsetof(struct pool_header, checksum);
	if (getrandom(h->uuid, sizeof(h->uuid), 0) != sizeof(h->uuid))
		return tips_set_error(TIPS_EIO, "getrandom failed: %s", strerror(errno));
	h->uuid[6] = (h->uuid[6] & 0x0f) | 0x40; /* RFC 4122 version 4 */
	h->uuid[8] = (h->uuid[8] & 0x3f) | 0x80;
	h->size = o->size;
	h->root_offset = POOL_HEADER_SIZE;
	h->root_size = root_size;
	h->log_offset = log_off;
	h->log_size = log_size;
	h->heap_offset = heap_off;
	h->heap_size = o->size - heap_off;
	h->create_time = (uint64_t)time(NULL);
	return 0;
}

/* An area [off, off+len) inside a pool of @size bytes, computed without overflow. */
static bool area_fits(uint64_t off, uint64_t len, uint64_t size)
{
	return off <= size && len <= size - off;
}

/*
 * Whether the layout a header describes can be mapped and used safely: areas in order,
 * inside the pool, aligned; a mapping address that is aligned and leaves the range in
 * the user half of the address space. (The checksum has already matched: this guards
 * against headers written by someone else, not against media errors.)
 */
static bool layout_plausible(const struct pool_header *h)
{
	uint64_t root_end = h->root_offset + h->root_size, log_end = h->log_offset + h->log_size;
	return h->size >= TIPS_POOL_MIN_SIZE && h->size % TIPS_POOL_ALIGN == 0 &&
	       h->root_offset >= POOL_HEADER_SIZE && area_fits(h->root_offset, h->root_size, h->size) &&
	       area_fits(h->log_offset, h->log_size, h->size) &&
	       area_fits(h->heap_offset, h->heap_size, h->size) && root_end <= h->log_offset &&
	       log_end == h->heap_offset && h->heap_offset + h->heap_size == h->size &&
	       h->log_offset % POOL_AREA_ALIGN == 0 && h->heap_offset % POOL_AREA_ALIGN == 0 &&
	       h->map_addr != 0 && h->map_addr % TIPS_POOL_ALIGN == 0 &&
	       h->map_addr < (1ull << 47) && h->size <= (1ull << 47) - h->map_addr;
}

/* True if @h is a pool header of this layout whose magic or version alone was damaged:
 * with both restored, its checksum holds. */
static bool header_damaged(const struct pool_header *h)
{
	struct pool_header fixed = *h;
	memcpy(fixed.magic, POOL_MAGIC, 8);
	fixed.layout_version = POOL_LAYOUT_VERSION;
	return fixed.header_bytes == offsetof(struct pool_header, checksum) &&
	       fixed.checksum == header_checksum(&fixed);
}

static uint64_t intent_checksum(const struct pool_grow_intent *g)
{
	return crc32(0, (const Bytef *)g, offsetof(struct pool_grow_intent, checksum));
}

static bool intent_pending(const struct pool_header *h)
{
	return h->grow.magic == POOL_GROW_MAGIC && h->grow.checksum == intent_checksum(&h->grow);
}

/* Gives @h the geometry of a pool of @size bytes (the heap takes the rest). */
static void header_set_size(struct pool_header *h, uint64_t size)
{
	h->size = size;
	h->heap_size = size - h->heap_offset;
	h->checksum = header_checksum(h);
}

/*
 * Turns a header that has a pending grow intent into the header the finished grow
 * writes. The header on the media may hold the old geometry, the new one, or a mix of
 * the two (a finish torn by a crash: size, heap_size and checksum are separate 8-byte
 * stores), so its checksum must match the old or the new geometry; any other value is
 * corruption, as without an intent.
 */
static int header_apply_intent(struct pool_header *h, const char *path)
{
	const struct pool_grow_intent *g = &h->grow;
	if (g->old_size <= h->heap_offset || g->new_size <= g->old_size)
		return tips_set_error(TIPS_ECORRUPT, "%s: the pool's grow record describes an "
				      "impossible change of size", path);
	uint64_t stored = h->checksum;
	struct pool_header before = *h;
	header_set_size(&before, g->old_size);
	header_set_size(h, g->new_size);
	if (stored != before.checksum && stored != h->checksum)
		return tips_set_error(TIPS_ECORRUPT, "%s: pool header checksum mismatch (header "
				      "corrupted)", path);
	return 0;
}

/*
 * Checks a header read from a file of @file_size bytes. If a grow was committed and not
 * finished, @h becomes the header of the grown pool (see header_apply_intent).
 */
static int header_validate(struct pool_header *h, uint64_t file_size, const char *path)
{
	if (file_size >= POOL_HEADER_SIZE && (memcmp(h->magic, POOL_MAGIC, 8) != 0 ||
					      h->layout_version != POOL_LAYOUT_VERSION) &&
	    header_damaged(h))
		return tips_set_error(TIPS_ECORRUPT, "%s: pool header: magic or layout version "
				      "(offset 0..11) damaged: expected \"%.8s\" and version %u",
				      path, POOL_MAGIC, POOL_LAYOUT_VERSION);
	if (file_size < 8 || memcmp(h->magic, POOL_MAGIC, 8) != 0)
		return tips_set_error(TIPS_ENOTPOOL, "%s is not a TIPS pool (no pool magic)", path);
	if (file_size < POOL_HEADER_SIZE)
		return tips_set_error(TIPS_ETRUNCATED, "%s is truncated: %llu bytes, shorter than "
				      "the pool header", path, (unsigned long long)file_size);
	if (h->layout_version != POOL_LAYOUT_VERSION)
		return tips_set_error(TIPS_EVERSION, "%s has layout version %u; this build reads "
				      "version %u", path, h->layout_version, POOL_LAYOUT_VERSION);
	if (h->header_bytes != offsetof(struct pool_header, checksum))
		return tips_set_error(TIPS_ECORRUPT, "%s: pool header checksum mismatch (header "
				      "corrupted)", path);
	if (intent_pending(h)) {
		int rc = header_apply_intent(h, path);
		if (rc)
			return rc;
	} else if (h->checksum != header_checksum(h)) {
		return tips_set_error(TIPS_ECORRUPT, "%s: pool header checksum mismatch (header "
				      "corrupted)", path);
	}
	if (!layout_plausible(h))
		return tips_set_error(TIPS_ECORRUPT, "%s: pool header describes an impossible "
				      "layout", path);
	if (file_size < h->size)
		return tips_set_error(TIPS_ETRUNCATED, "%s is truncated: %llu bytes, the pool "
				      "needs %llu", path, (unsigned long long)file_size,
				      (unsigned long long)h->size);
	return 0;
}

static int lock_exclusive(int fd, const char *path)
{
	if (flock(fd, LOCK_EX | LOCK_NB) == 0)
		return 0;
	if (errno == EWOULDBLOCK)
		return tips_set_error(TIPS_ELOCKED, "%s is already open (in another process or "
				      "through another handle)", path);
	return tips_set_error(TIPS_EIO, "flock %s: %s", path, strerror(errno));
}

static int open_error(int err, const char *path)
{
	if (err == EISDIR)
		return tips_set_error(TIPS_ENOTPOOL, "%s is a directory, not a pool", path);
	int code = tips_errno_code(err);
	if (code == TIPS_ENOENT)
		return tips_set_error(code, "no pool file at %s", path);
	return tips_set_error(code, "cannot open %s: %s", path, strerror(err));
}

/* Maps the pool described by @hdr_copy and builds the handle (not yet registered). */
static int pool_attach(int fd, const char *path, const struct pool_header *h,
		       const struct tips_pool_options *o, struct tips_pool **out)
{
	struct tips_pool *p = calloc(1, sizeof(*p));
	char *path_copy = strdup(path);
	if (!p || !path_copy) {
		free(p);
		free(path_copy);
		return tips_set_error(TIPS_ENOMEM, "out of DRAM");
	}
	p->fd = fd;
	p->path = path_copy;
	enum tips_media req = o ? o->media : TIPS_MEDIA_AUTO;
	int rc = pm_map(fd, h->map_addr, h->size, req, &p->map);
	if (rc) {
		free(p->path);
		free(p);
		return rc;
	}
	if (o && o->prefault && p->map.media != TIPS_MEDIA_SIM)
		pm_prefault(&p->map);
	if (p->map.media == TIPS_MEDIA_SIM) {
		p->sim = pm_sim_new(p->map.addr, p->map.media_view, p->map.size, o->sim_crash_at,
				    o->sim_evict, o->sim_seed, o->sim_crash_exit_code);
		if (!p->sim) {
			pm_unmap(&p->map);
			free(p->path);
			free(p);
			return tips_set_error(TIPS_ENOMEM, "out of DRAM");
		}
	}
	struct pm_region region = { (uintptr_t)p->map.addr, (uintptr_t)p->map.addr + h->size,
				    p->map.media, p->sim };
	rc = pm_region_register(&region);
	if (rc) {
		pm_sim_delete(p->sim);
		pm_unmap(&p->map);
		free(p->path);
		free(p);
		return rc;
	}
	p->hdr = p->map.addr;
	*out = p;
	return 0;
}

static void pool_detach(struct tips_pool *p)
{
	pm_region_unregister((uintptr_t)p->map.addr);
	pm_unmap(&p->map);
	pm_sim_delete(p->sim);
	close(p->fd);
	free(p->path);
	free(p);
}

/* Marks the pool in use and opens its heap (recovering it if needed). */
static int pool_start(struct tips_pool *p)
{
	uint64_t was_clean = p->hdr->clean;
	p->clean_at_open = was_clean == 1;
	p->hdr->clean = 0;
	p->hdr->open_count++;
	pm_persist(&p->hdr->clean, 2 * sizeof(uint64_t));
	char *base = p->map.addr;
	int rc = heap_open(base + p->hdr->heap_offset, p->hdr->heap_size,
			   base + p->hdr->root_offset, base + p->hdr->size, &p->heap);
	if (rc) { /* refused before changing anything: leave the flag as it was */
		p->hdr->clean = was_clean;
		pm_persist(&p->hdr->clean, sizeof(uint64_t));
	}
	return rc;
}

/*
 * Removes the temporary files of creates of @base that crashed. A creator holds an
 * exclusive lock on its file from creation to rename, so a file whose lock can be
 * taken is abandoned (a creator that finds its file unlinked starts again).
 */
static void remove_abandoned_temps(const char *dir, const char *base)
{
	DIR *d = opendir(dir);
	if (!d)
		return;
	char prefix[PATH_MAX];
	int plen = snprintf(prefix, sizeof(prefix), ".%s.creating-", base);
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		if (strncmp(e->d_name, prefix, (size_t)plen) != 0 ||
		    strlen(e->d_name) != (size_t)plen + 6)
			continue;
		int fd = openat(dirfd(d), e->d_name,
				O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
		if (fd < 0)
			continue;
		struct stat st;
		if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && flock(fd, LOCK_EX | LOCK_NB) == 0)
			unlinkat(dirfd(d), e->d_name, 0);
		close(fd);
	}
	closedir(d);
}

/* Creates and locks the temporary file; 0 and *fd_out, or a TIPS_E* code. */
static int temp_create(char *tmp, size_t len, const char *dir, const char *base, int *fd_out)
{
	for (int attempt = 0; attempt < 8; attempt++) {
		if (snprintf(tmp, len, "%s/.%s.creating-XXXXXX", dir, base) >= (int)len)
			return tips_set_error(TIPS_EINVAL, "path too long: %s/%s", dir, base);
		int fd = mkostemp(tmp, O_CLOEXEC);
		if (fd < 0)
			return tips_set_error(tips_errno_code(errno), "cannot create a file in %s: %s",
					      dir, strerror(errno));
		struct stat st;
		if (flock(fd, LOCK_EX | LOCK_NB) == 0 && fstat(fd, &st) == 0 && st.st_nlink > 0) {
			*fd_out = fd;
			return 0;
		}
		close(fd); /* a concurrent cleaner took it for abandoned: start again */
	}
	return tips_set_error(TIPS_EIO, "cannot create a locked temporary file in %s", dir);
}

/* Makes the rename of a new pool durable. A directory this process may not read cannot
 * be synced; that is not an error (the file system still orders the rename). */
static int dir_sync(const char *dir)
{
	int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0 && (errno == EACCES || errno == EPERM))
		return 0;
	if (dfd < 0)
		return tips_set_error(TIPS_EIO, "open directory %s: %s", dir, strerror(errno));
	int rc = fsync(dfd) == 0 ? 0 : tips_set_error(TIPS_EIO, "fsync of directory %s: %s", dir,
						     strerror(errno));
	close(dfd);
	return rc;
}

int tips_pool_create(const char *path, const struct tips_pool_options *o,
		     struct tips_pool **out)
{
	if (!path || !o || !out)
		return tips_set_error(TIPS_EINVAL, "tips_pool_create: path, options (initialised "
				      "with tips_pool_options_init) and out are required");
	struct tips_pool_options opts;
	int rc = pool_options_read(o, &opts, "tips_pool_create");
	if (rc)
		return rc;
	o = &opts;
	rc = media_request_check(o->media, "tips_pool_create");
	if (rc)
		return rc;
	struct pool_header h;
	rc = layout_plan(o, &h);
	if (rc)
		return rc;

	char dir_buf[PATH_MAX], base_buf[PATH_MAX];
	snprintf(dir_buf, sizeof(dir_buf), "%s", path);
	snprintf(base_buf, sizeof(base_buf), "%s", path);
	const char *dir = dirname(dir_buf), *base = basename(base_buf);
	struct stat st;
	if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
		return tips_set_error(TIPS_ENODIR, "cannot create %s: directory %s does not exist",
				      path, dir);
	if (lstat(path, &st) == 0)
		return tips_set_error(TIPS_EEXIST, "cannot create %s: a file already exists there",
				      path);

	remove_abandoned_temps(dir, base);
	char tmp[PATH_MAX];
	int fd = -1;
	if ((rc = temp_create(tmp, sizeof(tmp), dir, base, &fd)) != 0)
		return rc;
	int err = posix_fallocate(fd, 0, (off_t)o->size);
	if (err) {
		rc = tips_set_error(tips_errno_code(err), "cannot reserve %llu bytes for %s: %s",
				    (unsigned long long)o->size, path, strerror(err));
		goto fail_file;
	}
	if (o->map_addr) {
		if (o->map_addr % TIPS_POOL_ALIGN) {
			rc = tips_set_error(TIPS_EINVAL, "map address 0x%llx is not 2 MiB aligned",
					    (unsigned long long)o->map_addr);
			goto fail_file;
		}
		h.map_addr = o->map_addr;
	} else if ((rc = pm_choose_address(o->size, &h.map_addr)) != 0) {
		goto fail_file;
	}
	h.checksum = header_checksum(&h);

	struct tips_pool *p;
	rc = pool_attach(fd, path, &h, o, &p);
	if (rc)
		goto fail_file;
	memcpy(p->hdr, &h, sizeof(h));
	p->hdr->clean = 1;
	pm_persist(p->hdr, sizeof(h));
	rc = heap_format((char *)p->map.addr + h.heap_offset, h.heap_size);
	if (rc == 0)
		rc = pool_start(p);
	if (rc == 0 && fsync(fd) != 0) /* the file's size and blocks, before its name */
		rc = tips_set_error(TIPS_EIO, "fsync of %s: %s", tmp, strerror(errno));
	if (rc == 0 && renameat2(AT_FDCWD, tmp, AT_FDCWD, path, RENAME_NOREPLACE) != 0)
		rc = errno == EEXIST
			     ? tips_set_error(TIPS_EEXIST, "cannot create %s: a file appeared there",
					      path)
			     : tips_set_error(tips_errno_code(errno), "rename to %s: %s", path,
					      strerror(errno));
	if (rc == 0 && (rc = dir_sync(dir)) != 0)
		unlink(path); /* its name may not survive a crash: do not leave it behind */
	if (rc) {
		if (p->heap)
			heap_close(p->heap, 1);
		pool_detach(p); /* closes fd */
		unlink(tmp);
		return rc;
	}
	*out = p;
	return 0;

fail_file:
	close(fd);
	unlink(tmp);
	return rc;
}

/*
 * Redo of a committed grow (idempotent): the heap's chunk count, then the pool header's
 * geometry as @grown (the header header_validate made), then the intent is cleared.
 * Each step is persisted before the next, and until the last one the intent stays
 * valid, so a crash anywhere here leaves a pool that the next open finishes again.
 */
static void grow_finish(struct tips_pool *p, const struct pool_header *grown)
{
	struct pool_header *hdr = p->hdr;
	heap_grow_apply((char *)p->map.addr + hdr->heap_offset, hdr->grow.heap_nchunks);
	hdr->size = grown->size;
	hdr->heap_size = grown->heap_size;
	hdr->checksum = grown->checksum;
	pm_persist(hdr, offsetof(struct pool_header, clean));
	hdr->grow.magic = 0;
	pm_persist(&hdr->grow, sizeof(hdr->grow.magic));
}

/* Opens @path and reads and validates its header. On success *fd_out is open. */
static int read_header(const char *path, int flags, struct pool_header *h, int *fd_out,
		       uint64_t *file_size)
{
	int fd = open(path, flags | O_CLOEXEC);
	if (fd < 0)
		return open_error(errno, path);
	struct stat st;
	if (fstat(fd, &st) != 0) {
		int e = errno;
		close(fd);
		return open_error(e, path);
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		return tips_set_error(TIPS_ENOTPOOL, "%s is not a regular file", path);
	}
	memset(h, 0, sizeof(*h));
	ssize_t n = pread(fd, h, sizeof(*h), 0);
	if (n < 0) {
		int e = errno;
		close(fd);
		return tips_set_error(TIPS_EIO, "read %s: %s", path, strerror(e));
	}
	*fd_out = fd;
	*file_size = (uint64_t)st.st_size;
	return 0;
}

int tips_pool_open(const char *path, const struct tips_pool_options *o, struct tips_pool **out)
{
	if (!path || !out)
		return tips_set_error(TIPS_EINVAL, "tips_pool_open: path and out are required");
	struct tips_pool_options opts;
	int rc = pool_options_read(o, &opts, "tips_pool_open");
	if (rc)
		return rc;
	o = &opts;
	rc = media_request_check(o->media, "tips_pool_open");
	if (rc)
		return rc;
	struct pool_header h;
	int fd;
	uint64_t file_size;
	rc = read_header(path, O_RDWR, &h, &fd, &file_size);
	if (rc)
		return rc;
	if ((rc = lock_exclusive(fd, path)) != 0 ||
	    (rc = header_validate(&h, file_size, path)) != 0) {
		close(fd);
		return rc;
	}
	struct tips_pool *p;
	if ((rc = pool_attach(fd, path, &h, o, &p)) != 0) {
		close(fd);
		return rc;
	}
	if (intent_pending(p->hdr))
		grow_finish(p, &h);
	/* The mapping must show the header we validated (no one else holds the lock). */
	if (memcmp(p->hdr, &h, offsetof(struct pool_header, clean)) != 0) {
		pool_detach(p);
		return tips_set_error(TIPS_ECORRUPT, "%s changed while it was being opened", path);
	}
	if ((rc = pool_start(p)) != 0) {
		pool_detach(p);
		return rc;
	}
	*out = p;
	return 0;
}

/* ---- grow ------------------------------------------------------------------------- */

/* Whether a pool with header @h may become @new_size bytes; the heap's side is checked
 * by grow_plan_heap. */
static int grow_check_size(const struct pool_header *h, uint64_t new_size, const char *path)
{
	if (new_size <= h->size)
		return tips_set_error(TIPS_ESIZE, "cannot grow %s to %llu bytes: the pool already "
				      "has %llu bytes (a pool only grows)", path,
				      (unsigned long long)new_size, (unsigned long long)h->size);
	if (new_size % TIPS_POOL_ALIGN != 0)
		return tips_set_error(TIPS_ESIZE, "cannot grow %s to %llu bytes: pool sizes are "
				      "multiples of 2 MiB", path, (unsigned long long)new_size);
	if (new_size > (1ull << 47) - h->map_addr)
		return tips_set_error(TIPS_ESIZE, "cannot grow %s to %llu bytes: at its fixed "
				      "address 0x%llx it would end beyond the user address space",
				      path, (unsigned long long)new_size,
				      (unsigned long long)h->map_addr);
	return 0;
}

/* Reads the heap header from the file and asks the heap for the chunk count at
 * @new_size; TIPS_ESIZE if its chunk table has no room for that many chunks. */
static int grow_plan_heap(int fd, const struct pool_header *h, uint64_t new_size,
			  const char *path, uint64_t *nchunks)
{
	uint64_t buf[HEAP_GROW_PLAN_BYTES / sizeof(uint64_t)] __attribute__((aligned(64)));
	ssize_t n = pread(fd, buf, sizeof(buf), (off_t)h->heap_offset);
	if (n != (ssize_t)sizeof(buf))
		return tips_set_error(TIPS_EIO, "read of the heap header of %s failed", path);
	uint64_t max_heap;
	int rc = heap_grow_plan(buf, h->heap_size, new_size - h->heap_offset, nchunks, &max_heap);
	if (rc)
		return tips_set_error(rc, "%s: %s", path, tips_errormsg());
	if (new_size - h->heap_offset > max_heap) {
		uint64_t max_pool = (h->heap_offset + max_heap) / TIPS_POOL_ALIGN * TIPS_POOL_ALIGN;
		return tips_set_error(TIPS_ESIZE, "cannot grow %s to %llu bytes: its heap's chunk "
				      "table has room for a pool of at most %llu bytes", path,
				      (unsigned long long)new_size, (unsigned long long)max_pool);
	}
	return 0;
}

/* Makes the file @new_size bytes long with its blocks reserved, durably. */
static int grow_file(int fd, uint64_t new_size, const char *path)
{
	int err = posix_fallocate(fd, 0, (off_t)new_size);
	if (err)
		return tips_set_error(tips_errno_code(err), "cannot extend %s to %llu bytes: %s",
				      path, (unsigned long long)new_size, strerror(err));
	if (fsync(fd) != 0)
		return tips_set_error(TIPS_EIO, "fsync of %s: %s", path, strerror(errno));
	return 0;
}

/* Maps the pool as @h describes it through a duplicate of @fd (the caller's descriptor
 * keeps the lock when the mapping's is closed). */
static int grow_attach(int fd, const char *path, const struct pool_header *h,
		       const struct tips_pool_options *o, struct tips_pool **out)
{
	int dup_fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
	if (dup_fd < 0)
		return tips_set_error(TIPS_EIO, "dup of the descriptor of %s: %s", path,
				      strerror(errno));
	int rc = pool_attach(dup_fd, path, h, o, out);
	if (rc)
		close(dup_fd);
	return rc;
}

/* Finishes a grow that a crash interrupted after its commit; @h is the grown header. */
static int grow_finish_pending(int fd, const char *path, const struct pool_header *h,
			       const struct tips_pool_options *o)
{
	struct tips_pool *p;
	int rc = grow_attach(fd, path, h, o, &p);
	if (rc)
		return rc;
	if (intent_pending(p->hdr))
		grow_finish(p, h);
	pool_detach(p);
	return 0;
}

/* The grow proper, on a locked pool whose header @h is valid and has no pending grow. */
static int grow_locked(int fd, const char *path, const struct pool_header *h,
		       uint64_t new_size, const struct tips_pool_options *o)
{
	uint64_t nchunks;
	int rc = grow_check_size(h, new_size, path);
	if (rc == 0)
		rc = grow_plan_heap(fd, h, new_size, path, &nchunks);
	if (rc == 0)
		rc = grow_file(fd, new_size, path);
	if (rc)
		return rc;
	struct pool_header grown = *h;
	header_set_size(&grown, new_size);
	struct tips_pool *p;
	if ((rc = grow_attach(fd, path, &grown, o, &p)) != 0)
		return rc;
	/* Before the commit: entries only the grown heap will use. */
	heap_grow_prepare((char *)p->map.addr + h->heap_offset, nchunks);
	/* The commit point: one line, one fence. A crash may leave any subset of its
	 * words on the media; only all of them together match the checksum. */
	struct pool_grow_intent intent = { POOL_GROW_MAGIC, h->size, new_size, nchunks, 0 };
	intent.checksum = intent_checksum(&intent);
	p->hdr->grow = intent;
	pm_persist(&p->hdr->grow, sizeof(intent));
	grow_finish(p, &grown);
	pool_detach(p);
	return 0;
}

int pool_grow_with(const char *path, uint64_t new_size, const struct tips_pool_options *o)
{
	if (!path)
		return tips_set_error(TIPS_EINVAL, "tips_pool_grow: a path is required");
	struct tips_pool_options opts;
	int rc = pool_options_read(o, &opts, "tips_pool_grow");
	if (rc)
		return rc;
	o = &opts;
	rc = media_request_check(o->media, "tips_pool_grow");
	if (rc)
		return rc;
	struct pool_header h;
	int fd;
	uint64_t file_size;
	if ((rc = read_header(path, O_RDWR, &h, &fd, &file_size)) != 0)
		return rc;
	bool pending = intent_pending(&h);
	if ((rc = lock_exclusive(fd, path)) == 0 &&
	    (rc = header_validate(&h, file_size, path)) == 0 && pending)
		rc = grow_finish_pending(fd, path, &h, o);
	if (rc == 0)
		rc = grow_locked(fd, path, &h, new_size, o);
	close(fd); /* releases the lock */
	return rc;
}

int tips_pool_grow(const char *path, uint64_t new_size)
{
	return pool_grow_with(path, new_size, NULL);
}

int tips_pool_close(struct tips_pool **pool)
{
	if (!pool || !*pool)
		return tips_set_error(TIPS_EINVAL, "tips_pool_close: no pool");
	struct tips_pool *p = *pool;
	int mlog_pending = heap_close(p->heap, 0);
	p->hdr->clean = mlog_pending ? 0 : 1; /* an undecided MLog still needs recovery */
	pm_persist(&p->hdr->clean, sizeof(p->hdr->clean));
	pool_detach(p);
	*pool = NULL;
	return 0;
}

int tips_pool_sim_power_fail(struct tips_pool **pool, double evict, uint64_t seed)
{
	if (!pool || !*pool || !(*pool)->sim)
		return tips_set_error(TIPS_EINVAL, "power failure needs a pool on SIM media");
	struct tips_pool *p = *pool;
	pm_sim_power_fail(p->sim, evict, seed);
	heap_close(p->heap, 1);
	pool_detach(p);
	*pool = NULL;
	return 0;
}

static void info_from_header(const struct pool_header *h, struct tips_pool_info *info)
{
	memset(info, 0, sizeof(*info));
	info->layout_version = h->layout_version;
	memcpy(info->uuid, h->uuid, sizeof(info->uuid));
	info->size = h->size;
	info->map_addr = h->map_addr;
	info->root_offset = h->root_offset;
	info->root_size = h->root_size;
	info->log_offset = h->log_offset;
	info->log_size = h->log_size;
	info->heap_offset = h->heap_offset;
	info->heap_size = h->heap_size;
	info->clean = h->clean == 1;
}

static int pool_stat_fill(const char *path, struct tips_pool_info *info)
{
	if (!path || !info)
		return tips_set_error(TIPS_EINVAL, "tips_pool_stat: path and info are required");
	struct pool_header h;
	int fd;
	uint64_t file_size;
	int rc = read_header(path, O_RDWR, &h, &fd, &file_size);
	if (rc == TIPS_EPERM)
		rc = read_header(path, O_RDONLY, &h, &fd, &file_size);
	if (rc)
		return rc;
	rc = header_validate(&h, file_size, path);
	if (rc == 0) {
		info_from_header(&h, info);
		info->media = pm_media_probe(fd, info->media_reason, sizeof(info->media_reason));
	}
	close(fd);
	return rc;
}

int tips_pool_stat_sized(const char *path, struct tips_pool_info *info, size_t size)
{
	if (!info)
		return tips_set_error(TIPS_EINVAL, "tips_pool_stat: path and info are required");
	struct tips_pool_info full;
	int rc = pool_stat_fill(path, &full);
	if (rc == 0)
		tips_struct_write(info, size, &full, sizeof(full));
	return rc;
}

void tips_pool_info_sized(const struct tips_pool *p, struct tips_pool_info *info, size_t size)
{
	struct tips_pool_info full;
	info_from_header(p->hdr, &full);
	full.clean = p->clean_at_open;
	full.media = p->map.media;
	snprintf(full.media_reason, sizeof(full.media_reason), "%s", p->map.reason);
	tips_struct_write(info, size, &full, sizeof(full));
}

void *tips_pool_root(const struct tips_pool *p, size_t *size)
{
	if (size)
		*size = p->hdr->root_size;
	return (char *)p->map.addr + p->hdr->root_offset;
}

void *tips_pool_log_area(const struct tips_pool *p, size_t *size)
{
	if (size)
		*size = p->hdr->log_size;
	return (char *)p->map.addr + p->hdr->log_offset;
}

struct tips_heap *tips_pool_heap(const struct tips_pool *p) { return p->heap; }

int tips_pool_contains(const struct tips_pool *p, const void *addr, size_t len)
{
	uintptr_t a = (uintptr_t)addr, s = (uintptr_t)p->map.addr;
	return a >= s && len <= p->map.size && a - s <= p->map.size - len;
}
