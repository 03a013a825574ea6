/*
 * file.h (private to ssh/): opening the files the SSH part trusts (private
 * keys, known_hosts) so that no path can hang or exhaust slicectl: open()
 * never blocks (a FIFO without a writer would, and a signal handler that
 * restarts calls would keep it blocked), and only regular files of bounded
 * size are read (/dev/urandom never ends).
 */
#ifndef SLICECTL_SSH_FILE_H
#define SLICECTL_SSH_FILE_H

#include <stddef.h>
#include <sys/stat.h>

enum file_refusal {
	FILE_OPENED = 0,
	FILE_CANNOT_OPEN,  /* errno tells why */
	FILE_NOT_REGULAR,  /* st->st_mode tells what it is */
	FILE_TOO_LARGE,    /* st->st_size is over max */
};

/* Opens path read-only (close-on-exec, no controlling tty) into *fd and
 * fills *st; on a refusal *fd is -1 and nothing stays open. */
enum file_refusal file_open_regular(const char *path, size_t max, int *fd,
				    struct stat *st);

/* "a directory", "a FIFO", "a character device", ... for messages. */
const char *file_kind_name(mode_t mode);

#endif
