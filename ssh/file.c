/*
 * file.c: see file.h.
 */
#include "ssh/file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <unistd.h>

enum file_refusal file_open_regular(const char *path, size_t max, int *fd,
				    struct stat *st)
{
	int saved;

	*fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
	if (*fd < 0)
		return FILE_CANNOT_OPEN;
	if (fstat(*fd, st)) {
		saved = errno;
		close(*fd);
		*fd = -1;
		errno = saved;
		return FILE_CANNOT_OPEN;
	}
	if (!S_ISREG(st->st_mode) || (uintmax_t)st->st_size > max) {
		close(*fd);
		*fd = -1;
		return S_ISREG(st->st_mode) ? FILE_TOO_LARGE : FILE_NOT_REGULAR;
	}
	return FILE_OPENED;
}

const char *file_kind_name(mode_t mode)
{
	if (S_ISDIR(mode))
		return "a directory";
	if (S_ISFIFO(mode))
		return "a FIFO (pipe)";
	if (S_ISCHR(mode))
		return "a character device";
	if (S_ISBLK(mode))
		return "a block device";
	if (S_ISSOCK(mode))
		return "a socket";
	return "something else";
}
