/*
 * checkpoint/ckpt_local.c: the local tier (docs/DESIGN.md, "The local
 * tier"): a save's compressed stream also written to this host's disk as
 * DIR/step-NNNNNNNNNN/PART.tar.zst, and the pruning that keeps the newest
 * committed copies.
 *
 * The copy is the packed part, byte for byte what went to the store, so
 * a restore checks it exactly as it checks a download: its size and
 * CRC32C against COMMIT, then the same safe unpacking. An unpacked tree
 * would restore without the unpacking, but proving it matches COMMIT
 * would mean packing it again. The copy is best effort: a full disk or
 * any other failure drops it and the save goes on; but for a fast-tier
 * step, whose only copies these are, it fails the save.
 */
#include "checkpoint/ckpt_internal.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define STEP_DIR_FMT "%s/step-%010" PRIu64
/* Copies newer than the newest step known committed kept beyond keep: a
 * worker that learns of commits late still holds the one committed
 * meanwhile, and the disk they take stays bounded. */
#define AHEAD_SPARE 2

void ckpt_local_path(char *out, size_t cap, const char *dir, uint64_t step,
		     const char *part)
{
	snprintf(out, cap, STEP_DIR_FMT "/%s" CKPT_PART_SUFFIX, dir, step,
		 part);
}

int ckpt_local_mkdir(const char *dir, uint64_t step, struct err *e)
{
	char sdir[PATH_MAX];

	snprintf(sdir, sizeof(sdir), STEP_DIR_FMT, dir, step);
	return fs_mkdir_p(sdir, 0700, e);
}

int ckpt_local_begin(struct ckpt_local_copy *c, const char *dir,
		     uint64_t step, const char *part)
{
	struct err e;

	memset(c, 0, sizeof(*c));
	c->fd = -1;
	ckpt_local_path(c->path, sizeof(c->path), dir, step, part);
	snprintf(c->tmp, sizeof(c->tmp), "%s.tmp-%ld", c->path, (long)getpid());
	err_init(&e);
	if (ckpt_local_mkdir(dir, step, &e)) {
		log_warn("local tier: %s; keeping no local copy", e.msg);
		return -1;
	}
	c->fd = open(c->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (c->fd < 0) {
		log_warn("local tier: cannot create %s: %s; keeping no local "
			 "copy", c->tmp, strerror(errno));
		return -1;
	}
	return 0;
}

void ckpt_local_write(struct ckpt_local_copy *c, const void *data,
		      size_t len)
{
	if (c->fd < 0)
		return;
	if (fs_write_all(c->fd, data, len)) {
		log_warn("local tier: writing %s: %s; keeping no local copy",
			 c->tmp, strerror(errno));
		ckpt_local_abort(c);
	}
}

void ckpt_local_abort(struct ckpt_local_copy *c)
{
	if (c->fd < 0)
		return;
	close(c->fd);
	c->fd = -1;
	unlink(c->tmp);
}

int ckpt_local_finish(struct ckpt_local_copy *c)
{
	int fd = c->fd;

	if (fd < 0)
		return -1;
	c->fd = -1;
	/* Not forced to disk: a copy torn by a crash is one whose CRC32C
	 * does not match COMMIT, which restore deletes; the upload it
	 * follows should not wait for it. */
	if (close(fd)) {
		log_warn("local tier: %s: %s; keeping no local copy", c->tmp,
			 strerror(errno));
		unlink(c->tmp);
		return -1;
	}
	if (rename(c->tmp, c->path)) {
		log_warn("local tier: naming %s: %s", c->path,
			 strerror(errno));
		unlink(c->tmp);
		return -1;
	}
	return 0;
}

/* "step-NNNNNNNNNN" as its number; false for anything else. */
static bool step_of(const char *name, uint64_t *step)
{
	char *end;

	if (strncmp(name, "step-", 5) || strlen(name) != 15)
		return false;
	errno = 0;
	*step = strtoull(name + 5, &end, 10);
	return !errno && !*end;
}

static int cmp_desc(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? 1 : x > y ? -1 : 0;
}

/* Removes step's folder: this part's copy and anything left of it. */
static void drop_step(const char *dir, uint64_t step)
{
	char path[PATH_MAX];
	int err;

	snprintf(path, sizeof(path), STEP_DIR_FMT, dir, step);
	err = fs_remove_tree(path);
	if (err)
		log_warn("local tier: cannot remove %s: %s", path,
			 strerror(err));
}

int ckpt_local_prune(const char *dir, unsigned keep, uint64_t committed,
		     uint64_t above, size_t *dropped)
{
	uint64_t *v = NULL, step;
	size_t n = 0, cap = 0, kept = 0, ahead = 0;
	struct dirent *d;
	DIR *dp;

	*dropped = 0;
	dp = opendir(dir);
	if (!dp)
		return errno == ENOENT ? 0 : -1;
	while ((d = readdir(dp))) {
		if (!step_of(d->d_name, &step))
			continue;
		if (n == cap) {
			size_t ncap = cap ? cap * 2 : 16;
			uint64_t *nv = realloc(v, ncap * sizeof(*v));

			if (!nv) {
				closedir(dp);
				free(v);
				return -1;
			}
			v = nv;
			cap = ncap;
		}
		v[n++] = step;
	}
	closedir(dp);
	if (n) /* v is NULL then, which qsort may not be given */
		qsort(v, n, sizeof(*v), cmp_desc);
	for (size_t i = 0; i < n; i++) {
		/* Newer than committed: its COMMIT may still come, unless a
		 * new generation restored below it (above), which discards
		 * such steps in the bucket too. */
		if (v[i] > committed && v[i] <= above &&
		    ahead < (size_t)keep + AHEAD_SPARE) {
			ahead++;
			continue;
		}
		if (v[i] <= committed && kept < keep) {
			kept++;
			continue;
		}
		drop_step(dir, v[i]);
		(*dropped)++;
	}
	free(v);
	return 0;
}
