/*
 * test_disk.h - where a test finds a disk file system, on which pools persist by msync
 * (TIPS_MEDIA_FILE), for the tests of that path. A case that finds none skips
 * (test_skip), so it is registered as a test of its own. Needs _GNU_SOURCE (readlink).
 */
#ifndef TIPS_TEST_DISK_H
#define TIPS_TEST_DISK_H

#include <limits.h>
#include <linux/magic.h>
#include <stdio.h>
#include <string.h>
#include <sys/vfs.h>
#include <unistd.h>

/* A directory on a disk file system (where pools persist by msync): /tmp, or the test
 * binary's own directory; 0 if neither is one. */
static inline int test_disk_dir(char *out, size_t len)
{
	struct statfs fs;
	if (statfs("/tmp", &fs) == 0 && fs.f_type != TMPFS_MAGIC) {
		snprintf(out, len, "/tmp");
		return 1;
	}
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	if (n <= 0)
		return 0;
	exe[n] = '\0';
	char *slash = strrchr(exe, '/');
	if (!slash)
		return 0;
	*slash = '\0';
	if (statfs(exe, &fs) != 0 || fs.f_type == TMPFS_MAGIC)
		return 0;
	snprintf(out, len, "%s", exe);
	return 1;
}

#endif
