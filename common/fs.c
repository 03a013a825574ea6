/* fs.c: writing files so that a reader (or a crash) never finds half of
 * one, making the folders they go in, and reading the end of one. */
#include "common.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int fs_write_all(int fd, const void *data, size_t len)
{
	const char *p = data;

	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return errno;
		/* write(2) returns 0 only for len 0, which the loop never asks
		 * for; treat it as no room rather than spinning. */
		if (n == 0)
			return ENOSPC;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* mkdir(2) that counts an existing directory as done; anything else in the
 * way is ENOTDIR. */
static int make_one(const char *path, mode_t mode)
{
	struct stat st;

	if (mkdir(path, mode) == 0)
		return 0;
	if (errno != EEXIST)
		return errno;
	if (stat(path, &st) != 0)
		return errno;
	return S_ISDIR(st.st_mode) ? 0 : ENOTDIR;
}

static int fail_dir(struct err *e, int errnum, const char *path)
{
	if (errnum == ENOTDIR)
		err_set(e, COMMON_EIO, "cannot create %s: it is not a "
			"directory", path);
	else
		err_errno(e, errnum == ENOMEM ? COMMON_ENOMEM : COMMON_EIO,
			  errnum, "cannot create %s", path);
	return errnum;
}

/* Makes every folder of path[0..upto) (the whole path when upto is its
 * length): one walk for fs_mkdir_p and fs_mkdir_parents. */
static int make_path(const char *path, size_t upto, mode_t mode,
		     struct err *e)
{
	char *copy = strndup(path, upto);
	int rc = 0;

	if (!copy)
		return fail_dir(e, ENOMEM, path);
	for (char *s = strchr(copy + 1, '/'); s && !rc; s = strchr(s + 1, '/')) {
		/* "a//b" and a trailing '/' name nothing new. */
		if (s[-1] == '/')
			continue;
		*s = '\0';
		rc = make_one(copy, mode);
		if (rc)
			fail_dir(e, rc, copy);
		*s = '/';
	}
	if (!rc && *copy && strcmp(copy, "/") && copy[upto - 1] != '/') {
		rc = make_one(copy, mode);
		if (rc)
			fail_dir(e, rc, copy);
	}
	free(copy);
	return rc;
}

int fs_mkdir_p(const char *path, mode_t mode, struct err *e)
{
	return make_path(path, strlen(path), mode, e);
}

int fs_mkdir_parents(const char *path, mode_t mode, struct err *e)
{
	const char *slash = strrchr(path, '/');

	return slash && slash != path
		       ? make_path(path, (size_t)(slash - path), mode, e)
		       : 0;
}

/* fsync of the folder holding path, so a rename or link in it survives a
 * crash. */
static int sync_dir_of(const char *path)
{
	const char *slash = strrchr(path, '/');
	char *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path))
			  : strdup(".");
	int fd, rc = 0;

	if (!dir)
		return ENOMEM;
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0 || fsync(fd) != 0)
		rc = errno;
	if (fd >= 0)
		close(fd);
	free(dir);
	return rc;
}

/* Creates a new file next to path, named ".BASE.tmp.PID.N", with mode as
 * open(2) gives it (umask applied; no umask(2) dance, which would race with
 * other threads creating files). A dot name in the same folder: the rename
 * cannot cross file systems and `ls` does not show a leftover. */
static int open_temp(const char *path, mode_t mode, struct buf *tmp)
{
	static unsigned counter;
	const char *slash = strrchr(path, '/');
	size_t dirlen = slash ? (size_t)(slash - path) + 1 : 0;

	for (int tries = 0; tries < 100; tries++) {
		int fd;

		buf_reset(tmp);
		if (buf_append(tmp, path, dirlen) ||
		    buf_appendf(tmp, ".%s.tmp.%ld.%u", path + dirlen,
				(long)getpid(),
				__atomic_fetch_add(&counter, 1,
						   __ATOMIC_RELAXED))) {
			errno = ENOMEM;
			return -1;
		}
		fd = open(tmp->data, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
			  mode);
		/* EEXIST: left by a dead process that had our pid. */
		if (fd >= 0 || errno != EEXIST)
			return fd;
	}
	return -1;
}

int fs_write_atomic(const char *path, const void *data, size_t len,
		      mode_t mode, bool replace, struct err *e)
{
	struct buf tmp;
	const char *what = "writing";
	int fd, rc = 0;

	buf_init(&tmp);
	fd = open_temp(path, mode, &tmp);
	if (fd < 0) {
		rc = errno;
		buf_release(&tmp);
		if (rc == ENOMEM)
			err_set(e, COMMON_ENOMEM, "out of memory");
		else
			err_errno(e, COMMON_EIO, rc,
				  "cannot create a file next to %s", path);
		return rc;
	}
	rc = fs_write_all(fd, data, len);
	if (!rc && fsync(fd) != 0)
		rc = errno;
	if (close(fd) != 0 && !rc)
		rc = errno;
	if (!rc) {
		what = replace ? "cannot replace" : "cannot create";
		/* link(2) fails when path exists: of two writers racing to
		 * create the file one wins, and neither sees half of the
		 * other's. */
		if (replace ? rename(tmp.data, path) != 0
			    : link(tmp.data, path) != 0)
			rc = errno;
	}
	if (rc || !replace)
		unlink(tmp.data);
	buf_release(&tmp);
	if (!rc && (rc = sync_dir_of(path)) != 0)
		what = "syncing the folder of";
	if (rc == EEXIST && !replace)
		err_set(e, COMMON_EIO, "%s already exists", path);
	else if (rc)
		err_errno(e, COMMON_EIO, rc, "%s %s", what, path);
	return rc;
}

char *fs_read_tail(const char *path, off_t from, size_t max, size_t *len)
{
	struct stat st;
	char *text;
	ssize_t n;
	off_t at;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return NULL;
	if (fstat(fd, &st) || !(text = malloc(max + 1))) {
		close(fd);
		return NULL;
	}
	at = st.st_size > (off_t)max ? st.st_size - (off_t)max : 0;
	if (at < from)
		at = from;
	n = pread(fd, text, max, at);
	close(fd);
	text[n > 0 ? n : 0] = '\0';
	if (len)
		*len = n > 0 ? (size_t)n : 0;
	return text;
}
