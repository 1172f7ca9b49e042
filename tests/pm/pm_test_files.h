/*
 * pm_test_files.h - file helpers shared by the tests of src/pm/: read a whole file,
 * write or patch one, copy a pool file, find leftover temporary files of
 * tips_pool_create(), and remove every scratch file a test made when it exits (also
 * when a REQUIRE fails), so that no test leaves anything in /dev/shm or /tmp.
 *
 * Child processes end with _exit(), which skips the cleanup, and a child killed by a
 * signal skips it too: only the parent, which registered the paths, removes them.
 */
#ifndef TIPS_TEST_PM_TEST_FILES_H
#define TIPS_TEST_PM_TEST_FILES_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define CLEANUP_MAX 256

static char cleanup_paths[CLEANUP_MAX][PATH_MAX];
static int cleanup_dir[CLEANUP_MAX];
static int cleanup_count;
static pid_t cleanup_owner;

static inline void cleanup_run(void)
{
	if (getpid() != cleanup_owner)
		return;
	for (int i = cleanup_count - 1; i >= 0; i--) {
		if (cleanup_dir[i])
			rmdir(cleanup_paths[i]);
		else
			unlink(cleanup_paths[i]);
	}
}

/* A fatal signal (a crash in the library, an abort) still removes the files. */
static inline void cleanup_on_signal(int sig)
{
	cleanup_run(); /* unlink, rmdir and getpid are async-signal-safe */
	signal(sig, SIG_DFL);
	raise(sig);
}

/* Remembers @path (a file, or a directory if @is_dir) for removal at exit. */
static inline void cleanup_track(const char *path, int is_dir)
{
	if (cleanup_count == 0) {
		static const int fatal[] = { SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTERM };
		cleanup_owner = getpid();
		atexit(cleanup_run);
		for (size_t i = 0; i < sizeof(fatal) / sizeof(fatal[0]); i++)
			signal(fatal[i], cleanup_on_signal);
	}
	if (cleanup_count == CLEANUP_MAX) {
		fprintf(stderr, "too many scratch files\n");
		exit(1);
	}
	snprintf(cleanup_paths[cleanup_count], PATH_MAX, "%s", path);
	cleanup_dir[cleanup_count++] = is_dir;
}

/* A fresh scratch path under @dir, removed at exit. */
static inline void scratch_path(char *out, size_t len, const char *dir, const char *name)
{
	test_path(out, len, dir, name);
	cleanup_track(out, 0);
}

/* Creates a closed pool of @size bytes at a fresh scratch path under @dir. */
static inline void make_closed_pool_in(char *path, size_t len, const char *dir,
				       const char *name, uint64_t size)
{
	scratch_path(path, len, dir, name);
	struct tips_pool *pool = test_pool_create_at(path, size, TIPS_MEDIA_AUTO);
	REQUIRE(tips_pool_close(&pool) == 0);
	REQUIRE(pool == NULL);
}

static inline int file_exists(const char *path)
{
	struct stat st;
	return lstat(path, &st) == 0;
}

/* Reads the whole file; returns NULL if it cannot. *len receives its size. */
static inline unsigned char *file_read_all(const char *path, size_t *len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	struct stat st;
	if (fstat(fd, &st) != 0) {
		close(fd);
		return NULL;
	}
	size_t n = (size_t)st.st_size;
	unsigned char *buf = malloc(n ? n : 1);
	size_t got = 0;
	while (buf && got < n) {
		ssize_t r = pread(fd, buf + got, n - got, (off_t)got);
		if (r <= 0) {
			free(buf);
			buf = NULL;
			break;
		}
		got += (size_t)r;
	}
	close(fd);
	if (buf)
		*len = n;
	return buf;
}

/* Creates (or replaces) @path with exactly @len bytes of @buf; 0 on success. */
static inline int file_write_all(const char *path, const void *buf, size_t len)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		return -1;
	size_t done = 0;
	while (done < len) {
		ssize_t w = pwrite(fd, (const char *)buf + done, len - done, (off_t)done);
		if (w <= 0) {
			close(fd);
			return -1;
		}
		done += (size_t)w;
	}
	return close(fd);
}

/* Overwrites @len bytes at @off of an existing file; 0 on success. */
static inline int file_patch(const char *path, off_t off, const void *buf, size_t len)
{
	int fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t w = pwrite(fd, buf, len, off);
	close(fd);
	return w == (ssize_t)len ? 0 : -1;
}

/* Reads @len bytes at @off; 0 on success. */
static inline int file_peek(const char *path, off_t off, void *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t r = pread(fd, buf, len, off);
	close(fd);
	return r == (ssize_t)len ? 0 : -1;
}

/* 1 if the file at @path holds exactly the @len bytes of @want. */
static inline int file_equals(const char *path, const void *want, size_t len)
{
	size_t n = 0;
	unsigned char *got = file_read_all(path, &n);
	int same = got && n == len && memcmp(got, want, len) == 0;
	free(got);
	return same;
}

/* Copies @src to @dst (replacing it); 0 on success. */
static inline int file_copy(const char *src, const char *dst)
{
	size_t n = 0;
	unsigned char *buf = file_read_all(src, &n);
	if (!buf)
		return -1;
	int rc = file_write_all(dst, buf, n);
	free(buf);
	return rc;
}

/* Number of hidden ".BASENAME.creating-*" temporaries of @path left in its directory. */
static inline int creating_leftovers(const char *path)
{
	char dir_buf[PATH_MAX], base_buf[PATH_MAX], prefix[PATH_MAX + 16];
	snprintf(dir_buf, sizeof(dir_buf), "%s", path);
	snprintf(base_buf, sizeof(base_buf), "%s", path);
	snprintf(prefix, sizeof(prefix), ".%s.creating-", basename(base_buf));
	DIR *d = opendir(dirname(dir_buf));
	if (!d)
		return 0;
	int n = 0;
	struct dirent *e;
	while ((e = readdir(d)) != NULL)
		if (strncmp(e->d_name, prefix, strlen(prefix)) == 0)
			n++;
	closedir(d);
	return n;
}

/* Waits for @pid; returns its exit status, or 1000 + signal if it was killed. */
static inline int child_status(pid_t pid)
{
	int st;
	while (waitpid(pid, &st, 0) < 0)
		if (errno != EINTR)
			return -1;
	if (WIFEXITED(st))
		return WEXITSTATUS(st);
	if (WIFSIGNALED(st))
		return 1000 + WTERMSIG(st);
	return -1;
}

/* Checks that the thread's error message mentions @needle. */
#define CHECK_MSG_HAS(needle)                                                            \
	do {                                                                             \
		const char *m_ = tips_errormsg();                                        \
		if (!m_ || !*m_ || !strstr(m_, (needle))) {                              \
			fprintf(stderr, "%s:%d: error message \"%s\" does not mention \"%s\"\n", \
				__FILE__, __LINE__, m_ ? m_ : "(null)", (needle));       \
			test_failures++;                                                 \
		}                                                                        \
	} while (0)

#endif
