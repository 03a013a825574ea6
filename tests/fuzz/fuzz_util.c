/* tests/fuzz/fuzz_util.c: the private directory and its files (fuzz.h). */
#define _XOPEN_SOURCE 700 /* nftw */
#include "fuzz.h"

#include "common/common.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[PATH_MAX];

void fuzz_fail(const char *what, const char *file, int line)
{
	fprintf(stderr, "fuzz: %s:%d: %s does not hold\n", file, line, what);
	abort();
}

static int remove_entry(const char *path, const struct stat *st, int flag,
			struct FTW *ftw)
{
	(void)st;
	(void)ftw;
	if (flag == FTW_DP)
		rmdir(path);
	else
		unlink(path);
	return 0;
}

static void remove_dir(void)
{
	nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	const char *tmp = getenv("TMPDIR");
	int n;

	(void)argc;
	(void)argv;
	log_setup("fuzz", LOG_ERROR);
	n = snprintf(dir, sizeof(dir), "%s/slicectl-fuzz-XXXXXX",
		     tmp && *tmp ? tmp : "/tmp");
	if (n < 0 || (size_t)n >= sizeof(dir) || !mkdtemp(dir)) {
		fprintf(stderr, "fuzz: cannot make a directory in %s: %s\n",
			tmp && *tmp ? tmp : "/tmp", strerror(errno));
		abort();
	}
	atexit(remove_dir);
	return 0;
}

const char *fuzz_path(const char *name)
{
	static char path[PATH_MAX];

	if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, name) >=
	    sizeof(path))
		fuzz_fail("path fits", __FILE__, __LINE__);
	return path;
}

void fuzz_write(const char *name, const uint8_t *data, size_t size)
{
	const char *path = fuzz_path(name);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	size_t off = 0;

	if (fd < 0) {
		fprintf(stderr, "fuzz: cannot write %s: %s\n", path,
			strerror(errno));
		abort();
	}
	while (off < size) {
		ssize_t n = write(fd, data + off, size - off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			fprintf(stderr, "fuzz: cannot write %s: %s\n", path,
				strerror(errno));
			abort();
		}
		off += (size_t)n;
	}
	close(fd);
}
