/* fs_tree.c: removing a tree we made, at any depth: one directory open at
 * a time, walking down by name and back up by "..", so neither PATH_MAX
 * nor the descriptor limit bounds it (nftw's walk gives up past PATH_MAX,
 * and a recursion one descriptor per level runs out of them). */
#include "common.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/*
 * One pass over the directory open at fd: removes what it can and names,
 * in *sub, a non-empty directory to descend into (made searchable and
 * writable first: trainers and restored trees may leave read-only ones).
 * Returns 0 or the errno of what cannot be removed.
 */
static int rm_pass(int fd, char *sub, size_t cap)
{
	int dfd = dup(fd);
	DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
	struct dirent *de;
	int r = 0;

	sub[0] = '\0';
	if (!d) {
		r = errno;
		if (dfd >= 0)
			close(dfd);
		return r;
	}
	rewinddir(d);
	while (!sub[0] && (de = readdir(d))) {
		const char *n = de->d_name;

		if (!strcmp(n, ".") || !strcmp(n, ".."))
			continue;
		if (unlinkat(fd, n, 0) == 0 || errno == ENOENT)
			continue;
		if (errno != EISDIR && errno != EPERM) {
			r = errno;
			break;
		}
		if (unlinkat(fd, n, AT_REMOVEDIR) == 0 || errno == ENOENT)
			continue;
		if (errno != ENOTEMPTY && errno != EEXIST) {
			r = errno;
			break;
		}
		if (strlen(n) >= cap) {
			r = ENAMETOOLONG;
			break;
		}
		if (fchmodat(fd, n, S_IRWXU, 0) != 0) {
			r = errno;
			break;
		}
		memcpy(sub, n, strlen(n) + 1);
	}
	closedir(d);
	return r;
}

int fs_remove_tree(const char *path)
{
	char sub[NAME_MAX + 1];
	struct stat st;
	size_t depth = 0;
	int fd, r = 0;

	if (lstat(path, &st) != 0)
		return errno == ENOENT ? 0 : errno;
	if (!S_ISDIR(st.st_mode))
		return unlink(path) == 0 || errno == ENOENT ? 0 : errno;
	chmod(path, S_IRWXU);
	fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return errno;
	for (;;) {
		int next;

		r = rm_pass(fd, sub, sizeof(sub));
		if (r)
			break;
		if (sub[0]) {
			next = openat(fd, sub, O_RDONLY | O_DIRECTORY |
				      O_NOFOLLOW | O_CLOEXEC);
			depth++;
		} else if (depth) {
			/* Empty now: its parent's next pass removes it. */
			next = openat(fd, "..", O_RDONLY | O_DIRECTORY |
				      O_CLOEXEC);
			depth--;
		} else {
			close(fd);
			return rmdir(path) == 0 || errno == ENOENT ? 0 : errno;
		}
		close(fd);
		fd = next;
		if (fd < 0)
			return errno;
	}
	close(fd);
	return r;
}
