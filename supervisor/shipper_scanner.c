/*
 * shipper_scanner.c: the checkpoint shipper's scanner thread. It takes
 * finished steps out of the trainer's directory (a rename into the spool,
 * then the .done marker goes), measures them, applies the spool bound,
 * and deletes what was dropped; so steps keep leaving the trainer's
 * directory while an upload is slow or failing.
 */
#include "supervisor/shipper_spool.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Sum of the sizes of the regular files below dirfd/name. */
static uint64_t measure_at(int dirfd, const char *name, unsigned depth)
{
	struct stat st;
	struct dirent *d;
	uint64_t sum = 0;
	DIR *dir;
	int fd;

	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
		return 0;
	if (S_ISREG(st.st_mode))
		return (uint64_t)st.st_size;
	if (!S_ISDIR(st.st_mode) || depth > 256)
		return 0;
	fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
				 O_CLOEXEC);
	if (fd < 0)
		return 0;
	dir = fdopendir(fd);
	if (!dir) {
		close(fd);
		return 0;
	}
	while ((d = readdir(dir))) {
		if (!strcmp(d->d_name, ".") || !strcmp(d->d_name, ".."))
			continue;
		sum += measure_at(fd, d->d_name, depth + 1);
	}
	closedir(dir);
	return sum;
}

static uint64_t measure(const char *path)
{
	return measure_at(AT_FDCWD, path, 0);
}

static int cmp_marker(const void *a, const void *b)
{
	const struct spool_marker *x = a, *y = b;

	if (x->made.tv_sec != y->made.tv_sec)
		return x->made.tv_sec < y->made.tv_sec ? -1 : 1;
	if (x->made.tv_nsec != y->made.tv_nsec)
		return x->made.tv_nsec < y->made.tv_nsec ? -1 : 1;
	return x->step < y->step ? -1 : x->step > y->step;
}

static bool ends_done(const char *name)
{
	size_t len = strlen(name);
	const size_t suf = sizeof(DONE_SUFFIX) - 1;

	return len > suf && !strcmp(name + len - suf, DONE_SUFFIX);
}

/* Whether name, ending in DONE_SUFFIX, is "step-N.done", with N in
 * *step. */
static bool step_marker(const char *name, uint64_t *step)
{
	size_t len = strlen(name);
	const size_t pre = sizeof("step-") - 1;
	const size_t suf = sizeof(DONE_SUFFIX) - 1;

	return len > pre + suf && !strncmp(name, "step-", pre) &&
	       spool_parse_step(name + pre, len - pre - suf, step);
}

/* Grows a marker list by one; false when out of memory. */
static bool marker_room(struct spool_marker **m, size_t n, size_t *cap)
{
	size_t nc = *cap ? 2 * *cap : 16;
	struct spool_marker *nv;

	if (n < *cap)
		return true;
	nv = realloc(*m, nc * sizeof(*nv));
	if (!nv)
		return false;
	*m = nv;
	*cap = nc;
	return true;
}

int shipper_list_done(struct shipper *s, struct spool_marker **out,
		      size_t *n)
{
	struct spool_marker *m = NULL;
	size_t cap = 0;
	struct dirent *d;
	DIR *dir;

	*out = NULL;
	*n = 0;
	dir = opendir(s->ckpt_dir);
	if (!dir)
		return errno;
	while ((d = readdir(dir))) {
		struct stat st;
		uint64_t step;

		if (!ends_done(d->d_name))
			continue;
		if (!step_marker(d->d_name, &step)) {
			log_debug("ignoring %s/%s: not step-N" DONE_SUFFIX,
				  s->ckpt_dir, d->d_name);
			continue;
		}
		if (fstatat(dirfd(dir), d->d_name, &st, AT_SYMLINK_NOFOLLOW))
			continue; /* gone meanwhile */
		if (!marker_room(&m, *n, &cap)) {
			closedir(dir);
			free(m);
			*n = 0;
			return ENOMEM;
		}
		m[(*n)++] = (struct spool_marker){ step, st.st_mtim };
	}
	closedir(dir);
	if (*n)
		qsort(m, *n, sizeof(*m), cmp_marker);
	*out = m;
	return 0;
}

struct taken {
	uint64_t step;
	struct timespec made;
	uint64_t bytes;
};

/* A step directory for a marker: without one the marker is a leftover
 * and goes. */
static bool has_step_dir(const char *src, const char *done)
{
	struct stat st;

	if (lstat(src, &st) == 0 && S_ISDIR(st.st_mode))
		return true;
	log_warn("%s has no step directory %s; removing it", done, src);
	if (unlink(done) != 0 && errno != ENOENT)
		log_warn("cannot remove %s: %s", done, strerror(errno));
	return false;
}

/* Makes room in the spool for step (src, marked by done): false while
 * an upload of the same step is in flight (the new one is looked at once
 * it is over), or when the step was uploaded already (the new one goes);
 * a waiting copy is replaced. */
static bool make_room(struct shipper *s, uint64_t step, const char *src,
		      const char *done)
{
	ssize_t at;
	bool ok = true;

	pthread_mutex_lock(&s->mu);
	at = spool_find(s, step);
	if (at >= 0 && s->w[at].in_flight) {
		ok = false;
	} else if (spool_was_sent(s, step)) {
		log_info("step %llu was written again after its upload; the "
			 "uploaded one stands", (unsigned long long)step);
		spool_trash(s, src);
		if (unlink(done) != 0 && errno != ENOENT)
			log_warn("cannot remove %s: %s", done,
				 strerror(errno));
		ok = false;
	} else if (at >= 0) {
		log_info("step %llu was written again; the new one "
			 "replaces the waiting one", (unsigned long long)step);
		spool_drop(s, (size_t)at);
		spool_publish(s);
	}
	pthread_mutex_unlock(&s->mu);
	return ok;
}

/* Renames src to dst in the spool, moving a leftover by that name out
 * of the way first. Returns 0 or an errno. */
static int move_into_spool(struct shipper *s, const char *src,
			   const char *dst)
{
	if (rename(src, dst) == 0)
		return 0;
	if (errno != EEXIST && errno != ENOTEMPTY)
		return errno;
	pthread_mutex_lock(&s->mu);
	spool_trash(s, dst);
	pthread_mutex_unlock(&s->mu);
	return rename(src, dst) == 0 ? 0 : errno;
}

/* A step that could not be moved: said once, and shown as the last
 * error. */
static int move_failed(struct shipper *s, int errnum, const char *src,
		       const char *dst, struct err *e)
{
	int rc = err_errno(e, COMMON_EIO, errnum,
			   "cannot move %s into the spool as %s%s", src, dst,
			   errnum == EXDEV
			   ? " (the spool must be on the same filesystem as "
			     "the checkpoint directory)" : "");

	pthread_mutex_lock(&s->mu);
	if (strncmp(s->st.last_error, e->msg, sizeof(s->st.last_error) - 1)) {
		log_error("%s", e->msg);
		spool_set_error(s, e->msg);
		spool_publish(s);
	}
	pthread_mutex_unlock(&s->mu);
	return rc;
}

/* Takes one marked step into the spool (into *t). Returns 0 when taken,
 * -1 when skipped, or an error with e filled. */
static int take(struct shipper *s, const struct spool_marker *m,
		struct taken *t, struct err *e)
{
	char src[SPOOL_PATH], done[SPOOL_PATH], dst[SPOOL_PATH];
	int r;

	if (!spool_step_path(src, s->ckpt_dir, m->step, "") ||
	    !spool_step_path(done, s->ckpt_dir, m->step, DONE_SUFFIX) ||
	    !spool_step_path(dst, s->spool_dir, m->step, "") ||
	    !has_step_dir(src, done) || !make_room(s, m->step, src, done))
		return -1;
	r = move_into_spool(s, src, dst);
	if (r)
		return move_failed(s, r, src, dst, e);
	if (unlink(done) != 0 && errno != ENOENT)
		log_warn("cannot remove %s: %s", done, strerror(errno));
	*t = (struct taken){ m->step, m->made, measure(dst) };
	log_debug("took step %llu (%llu bytes) into %s",
		  (unsigned long long)t->step, (unsigned long long)t->bytes,
		  dst);
	return 0;
}

/* The steps taken join the waiting ones, all at once. */
static void join_spool(struct shipper *s, const struct taken *taken,
		       size_t n)
{
	char dst[SPOOL_PATH];

	pthread_mutex_lock(&s->mu);
	for (size_t i = 0; i < n; i++) {
		uint64_t step = taken[i].step;

		if ((int64_t)step > s->st.newest_done)
			s->st.newest_done = (int64_t)step;
		if (spool_insert(s, step, &taken[i].made, taken[i].bytes)) {
			log_error("out of memory: step %llu dropped",
				  (unsigned long long)step);
			if (spool_step_path(dst, s->spool_dir, step, ""))
				spool_trash(s, dst);
			s->st.dropped++;
			continue;
		}
		spool_enforce_bound(s);
	}
	spool_publish(s);
	pthread_mutex_unlock(&s->mu);
}

int shipper_scan(struct shipper *s, int64_t *failed_step, struct err *e)
{
	struct taken *taken = NULL;
	size_t ntaken = 0, n;
	struct spool_marker *steps;
	int rc = 0, r;

	*failed_step = -1;
	r = shipper_list_done(s, &steps, &n);
	if (r) {
		if (r != ENOENT && r != s->scan_errno)
			log_warn("cannot read %s: %s", s->ckpt_dir,
				 strerror(r));
		s->scan_errno = r;
		return 0;
	}
	s->scan_errno = 0;
	if (n)
		taken = calloc(n, sizeof(*taken));
	if (n && !taken) {
		free(steps);
		return err_set(e, COMMON_ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < n; i++) {
		r = take(s, &steps[i], &taken[ntaken], e);
		if (r == 0)
			ntaken++;
		else if (r > 0) {
			rc = r;
			*failed_step = (int64_t)steps[i].step;
		}
	}
	free(steps);
	if (ntaken)
		join_spool(s, taken, ntaken);
	free(taken);
	return rc;
}

static void empty_trash(struct shipper *s)
{
	pthread_mutex_lock(&s->mu);
	while (s->trash.n) {
		char *path = s->trash.v[--s->trash.n];
		int r;

		pthread_mutex_unlock(&s->mu);
		r = fs_remove_tree(path);
		if (r)
			log_warn("cannot delete %s: %s", path, strerror(r));
		free(path);
		pthread_mutex_lock(&s->mu);
	}
	pthread_mutex_unlock(&s->mu);
}

void *shipper_scanner_main(void *arg)
{
	struct shipper *s = arg;
	int64_t failed;
	struct err e;

	pthread_mutex_lock(&s->mu);
	while (!s->stop) {
		uint64_t until;

		s->kick = false;
		pthread_mutex_unlock(&s->mu);
		pthread_mutex_lock(&s->scan_mu);
		err_init(&e);
		shipper_scan(s, &failed, &e);
		pthread_mutex_unlock(&s->scan_mu);
		empty_trash(s);
		pthread_mutex_lock(&s->mu);
		until = mono_ms() + s->poll_ms;
		while (!s->stop && !s->kick && !s->trash.n &&
		       mono_ms() < until)
			mono_cond_wait_until(&s->cv, &s->mu, until);
	}
	pthread_mutex_unlock(&s->mu);
	empty_trash(s);
	pthread_mutex_lock(&s->mu);
	shipper_thread_done(s, &s->scanner_done);
	return NULL;
}

void shipper_clear_spool(struct shipper *s)
{
	struct dirent *d;
	DIR *dir = opendir(s->spool_dir);
	char path[SPOOL_PATH];

	if (!dir)
		return;
	while ((d = readdir(dir))) {
		size_t len = strlen(d->d_name);
		uint64_t step;

		if (snprintf(path, sizeof(path), "%s/%s", s->spool_dir,
			     d->d_name) >= (int)sizeof(path))
			continue;
		if (!strncmp(d->d_name, TRASH_PREFIX,
			     sizeof(TRASH_PREFIX) - 1)) {
			if (strlist_push(&s->trash, path))
				break;
		} else if (len > 5 && !strncmp(d->d_name, "step-", 5) &&
			   spool_parse_step(d->d_name + 5, len - 5, &step)) {
			log_info("removing %s, left by an earlier run", path);
			spool_trash(s, path);
		}
	}
	closedir(dir);
}
