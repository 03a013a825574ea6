/*
 * shipper.c: the checkpoint shipper (see shipper.h).
 *
 * Two threads share one struct under one mutex:
 *   - the scanner takes finished steps out of the trainer's directory
 *     (a rename into the spool, then the .done marker goes), measures
 *     them, applies the spool bound, and deletes what was dropped;
 *   - the uploader owns the store: it uploads the newest waiting step
 *     (ckpt_save), retries failures with backoff, and, on worker 0,
 *     commits and prunes.
 * So steps keep leaving the trainer's directory while an upload is slow
 * or failing. Nothing slow runs under the mutex: only renames and
 * unlinks, never an upload, a walk over a step or a recursive delete.
 *
 * A step that is dropped is first renamed to a ".trash-*" name in the
 * spool (so its step-N name is free again at once) and deleted later by
 * the scanner.
 */
#include "supervisor/shipper.h"

#include "checkpoint/checkpoint.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define BACKOFF_BASE_MS 1000u
#define BACKOFF_MAX_MS 30000u
#define DEFAULT_POLL_MS 1000u
/* shipper_stop waits this long for the threads; an upload stuck inside
 * one HTTP request (which cannot be interrupted from here) is left to
 * finish on its own and frees the shipper when it does. */
#define STOP_WAIT_MS 600u
#define SPOOL_PATH 4096
#define DONE_SUFFIX ".done"
#define TRASH_PREFIX ".trash-"

/* Steps are ordered by when their .done marker appeared (seq), not by
 * number: a trainer told to stop may save a step older than one it
 * wrote before (the step its whole group completed), and that one is
 * the step that matters. */
struct spool_entry {
	uint64_t step;
	uint64_t seq;    /* arrival order: later is newer */
	struct timespec made; /* its .done marker's mtime */
	uint64_t bytes;
	bool in_flight;  /* the uploader is saving it */
	bool doomed;     /* reset while in flight: trash it when back */
};

struct shipper {
	/* The configuration, owned copies. */
	char *run_url, *ckpt_dir, *spool_dir, *part;
	unsigned parts_expected;
	bool prune;
	unsigned keep, keep_every;
	uint64_t spool_bytes;
	int notify_fd;
	unsigned poll_ms;

	pthread_mutex_t scan_mu; /* one pass over ckpt_dir at a time;
				    taken before mu, never after */
	pthread_mutex_t mu;      /* everything below */
	pthread_cond_t cv;       /* broadcast on every change */

	struct shipper_state st;
	struct shipper_state published;
	struct spool_entry *w;   /* the spool's steps, by arrival */
	size_t nw, capw;
	uint64_t last_seq;       /* of the newest arrival */
	uint64_t uploaded_seq;   /* of the newest arrival uploaded */
	uint64_t error_seq;      /* of the last step dropped for an error
				    (error_step, error_code); 0 none */
	struct strlist trash;    /* spool paths to delete */
	unsigned long long trash_seq;

	unsigned epoch;          /* bumped by shipper_reset */
	bool stop, kick;
	int64_t pending_commit;  /* worker 0: uploaded, not seen committed */
	uint64_t next_pass_ms;
	uint64_t retry_at_ms;    /* no upload attempt before this */
	struct backoff backoff;
	bool preempted;          /* a flush cancelled the upload in flight */
	bool draining;           /* a flush came: steps whose markers were
				    made in the same tick all go out */
	int64_t error_step;      /* last step dropped for an error... */
	int error_code;          /* ...and that error */
	int64_t warned_step;     /* "larger than the spool" said for it */
	int scan_errno;          /* last scan error logged, to say it once
				    (under scan_mu) */
	atomic_int cancel;       /* read by ckpt_save */

	/* Threads. */
	pthread_t scanner, uploader;
	bool scanner_started, uploader_started;
	bool scanner_done, uploader_done;
	bool abandoned;          /* stop gave up waiting: the last thread
				    out frees the shipper */
	unsigned flushers;
	bool opened;             /* the uploader's store_open is done */
	int open_rc;
	struct err open_err;
};

/* ---------------------------------------------------------------- files */

/* "step-N" with N decimal, no sign, no leading zero, within int64. */
static bool parse_step(const char *p, size_t n, uint64_t *out)
{
	uint64_t v = 0;

	if (n == 0 || n > 19 || (p[0] == '0' && n > 1))
		return false;
	for (size_t i = 0; i < n; i++) {
		if (p[i] < '0' || p[i] > '9')
			return false;
		v = v * 10u + (uint64_t)(p[i] - '0');
	}
	if (v > (uint64_t)INT64_MAX)
		return false;
	*out = v;
	return true;
}

/* DIR/step-N followed by suffix; false when it does not fit. */
static bool step_path(char *out, const char *dir, uint64_t step,
		      const char *suffix)
{
	int n = snprintf(out, SPOOL_PATH, "%s/step-%llu%s", dir,
			 (unsigned long long)step, suffix);

	return n > 0 && n < SPOOL_PATH;
}

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

/* Removes dirfd/name and everything below it without following
 * symlinks; directories are made writable first (a trainer may leave
 * read-only ones). Returns 0 or an errno. */
static int remove_at(int dirfd, const char *name, unsigned depth)
{
	struct stat st;
	struct dirent *d;
	DIR *dir;
	int fd, rc = 0;

	if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0)
		return errno == ENOENT ? 0 : errno;
	if (!S_ISDIR(st.st_mode))
		return unlinkat(dirfd, name, 0) == 0 || errno == ENOENT
			       ? 0 : errno;
	if (depth > 256)
		return ELOOP;
	if ((st.st_mode & 0700) != 0700)
		(void)fchmodat(dirfd, name, 0700, 0);
	fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
				 O_CLOEXEC);
	if (fd < 0)
		return errno;
	dir = fdopendir(fd);
	if (!dir) {
		rc = errno;
		close(fd);
		return rc;
	}
	while ((d = readdir(dir))) {
		int r;

		if (!strcmp(d->d_name, ".") || !strcmp(d->d_name, ".."))
			continue;
		r = remove_at(fd, d->d_name, depth + 1);
		if (r && !rc)
			rc = r;
	}
	closedir(dir);
	if (unlinkat(dirfd, name, AT_REMOVEDIR) != 0 && errno != ENOENT &&
	    !rc)
		rc = errno;
	return rc;
}

/* ---------------------------------------------------------------- state */

static bool same_state(const struct shipper_state *a,
		       const struct shipper_state *b)
{
	return a->newest_done == b->newest_done &&
	       a->newest_uploaded == b->newest_uploaded &&
	       a->newest_committed == b->newest_committed &&
	       a->waiting == b->waiting && a->dropped == b->dropped &&
	       a->failures == b->failures &&
	       a->upload_bps == b->upload_bps &&
	       !strcmp(a->last_error, b->last_error);
}

/* Under mu, after any change: wakes every waiter, and tells notify_fd
 * when shipper_state changed. */
static void publish(struct shipper *s)
{
	unsigned waiting = 0;

	for (size_t i = 0; i < s->nw; i++)
		if (!s->w[i].doomed)
			waiting++;
	s->st.waiting = waiting;
	pthread_cond_broadcast(&s->cv);
	if (same_state(&s->st, &s->published))
		return;
	s->published = s->st;
	if (s->notify_fd >= 0) {
		const char byte = 's';
		ssize_t r;

		do {
			r = write(s->notify_fd, &byte, 1);
		} while (r < 0 && errno == EINTR);
	}
}

static void set_error(struct shipper *s, const char *msg)
{
	size_t n = strnlen(msg, sizeof(s->st.last_error) - 1);

	memcpy(s->st.last_error, msg, n);
	s->st.last_error[n] = '\0';
}

static ssize_t find_step(const struct shipper *s, uint64_t step)
{
	for (size_t i = 0; i < s->nw; i++)
		if (s->w[i].step == step)
			return (ssize_t)i;
	return -1;
}

/* Two markers made in the same clock tick: which came last is a guess
 * (file times are coarse). */
static bool same_time(const struct timespec *a, const struct timespec *b)
{
	return a->tv_sec == b->tv_sec && a->tv_nsec == b->tv_nsec;
}

/* Whether a flush for the newest arrival t must wait still: t, or a step
 * whose marker was made in the same tick before it, is not uploaded. */
static bool flush_waits(const struct shipper *s, const struct spool_entry *t)
{
	for (size_t i = 0; i < s->nw; i++)
		if (s->w[i].seq == t->seq ||
		    (s->w[i].seq < t->seq &&
		     same_time(&s->w[i].made, &t->made)))
			return true;
	return false;
}

/* Appends step as the newest arrival. */
static int insert_entry(struct shipper *s, uint64_t step,
			const struct timespec *made, uint64_t bytes)
{
	if (s->nw == s->capw) {
		size_t nc = s->capw ? 2 * s->capw : 8;
		struct spool_entry *nv = realloc(s->w, nc * sizeof(*nv));

		if (!nv)
			return ENOMEM;
		s->w = nv;
		s->capw = nc;
	}
	s->w[s->nw++] = (struct spool_entry){ .step = step,
					      .seq = ++s->last_seq,
					      .made = *made,
					      .bytes = bytes };
	return 0;
}

/* Under mu: renames path out of the way to a trash name and queues it
 * for deletion by the scanner. */
static void trash_path(struct shipper *s, const char *path)
{
	char to[SPOOL_PATH];

	for (int tries = 0; tries < 100; tries++) {
		int n = snprintf(to, sizeof(to), "%s/" TRASH_PREFIX "%llu-%llu",
				 s->spool_dir, (unsigned long long)getpid(),
				 s->trash_seq++);

		if (n <= 0 || n >= (int)sizeof(to))
			break;
		if (rename(path, to) == 0) {
			if (strlist_push(&s->trash, to))
				log_warn("out of memory: %s stays", to);
			return;
		}
		if (errno == ENOENT)
			return;
		if (errno != EEXIST && errno != ENOTEMPTY)
			break;
	}
	log_warn("could not move %s aside for deletion: %s", path,
		 strerror(errno));
}

/* Under mu: drops entry i (its spool directory goes to the trash). */
static void drop_entry(struct shipper *s, size_t i)
{
	char path[SPOOL_PATH];

	if (step_path(path, s->spool_dir, s->w[i].step, ""))
		trash_path(s, path);
	memmove(&s->w[i], &s->w[i + 1], (s->nw - i - 1) * sizeof(*s->w));
	s->nw--;
}

/* Under mu: the spool bound, after a step was added. The oldest waiting
 * steps go first; never the newest, nor the one being uploaded. */
static void enforce_bound(struct shipper *s)
{
	uint64_t total = 0;
	size_t i;

	if (!s->spool_bytes || !s->nw)
		return;
	for (i = 0; i < s->nw; i++)
		total += s->w[i].bytes;
	i = 0;
	while (total > s->spool_bytes && i + 1 < s->nw) {
		if (s->w[i].in_flight || s->w[i].doomed) {
			i++;
			continue;
		}
		log_warn("spool over its bound (%llu of %llu bytes): "
			 "dropping step %llu, older than step %llu",
			 (unsigned long long)total,
			 (unsigned long long)s->spool_bytes,
			 (unsigned long long)s->w[i].step,
			 (unsigned long long)s->w[s->nw - 1].step);
		total -= s->w[i].bytes;
		drop_entry(s, i);
		s->st.dropped++;
	}
	if (s->w[s->nw - 1].bytes > s->spool_bytes &&
	    s->warned_step != (int64_t)s->w[s->nw - 1].step) {
		s->warned_step = (int64_t)s->w[s->nw - 1].step;
		log_warn("step %llu alone is %llu bytes, more than the spool's "
			 "bound of %llu; keeping it anyway (raise spool_mb)",
			 (unsigned long long)s->w[s->nw - 1].step,
			 (unsigned long long)s->w[s->nw - 1].bytes,
			 (unsigned long long)s->spool_bytes);
	}
}

/* ---------------------------------------------------------------- scan */

struct marker {
	uint64_t step;
	struct timespec made;
};

static int cmp_marker(const void *a, const void *b)
{
	const struct marker *x = a, *y = b;

	if (x->made.tv_sec != y->made.tv_sec)
		return x->made.tv_sec < y->made.tv_sec ? -1 : 1;
	if (x->made.tv_nsec != y->made.tv_nsec)
		return x->made.tv_nsec < y->made.tv_nsec ? -1 : 1;
	return x->step < y->step ? -1 : x->step > y->step;
}

/* The steps with a .done marker in ckpt_dir, in the order the markers
 * were made (then by number) (*out malloc'd). Returns 0 or an errno
 * (ENOENT: no directory yet, no steps). */
static int list_done(struct shipper *s, struct marker **out, size_t *n)
{
	struct marker *m = NULL;
	size_t cap = 0;
	struct dirent *d;
	DIR *dir;

	*out = NULL;
	*n = 0;
	dir = opendir(s->ckpt_dir);
	if (!dir)
		return errno;
	while ((d = readdir(dir))) {
		size_t len = strlen(d->d_name);
		const size_t pre = sizeof("step-") - 1;
		const size_t suf = sizeof(DONE_SUFFIX) - 1;
		struct stat st;
		uint64_t step;

		if (len <= suf || strcmp(d->d_name + len - suf, DONE_SUFFIX))
			continue;
		if (len <= pre + suf || strncmp(d->d_name, "step-", pre) ||
		    !parse_step(d->d_name + pre, len - pre - suf, &step)) {
			log_debug("ignoring %s/%s: not step-N" DONE_SUFFIX,
				  s->ckpt_dir, d->d_name);
			continue;
		}
		if (fstatat(dirfd(dir), d->d_name, &st, AT_SYMLINK_NOFOLLOW))
			continue; /* gone meanwhile */
		if (*n == cap) {
			size_t nc = cap ? 2 * cap : 16;
			struct marker *nv = realloc(m, nc * sizeof(*nv));

			if (!nv) {
				closedir(dir);
				free(m);
				*n = 0;
				return ENOMEM;
			}
			m = nv;
			cap = nc;
		}
		m[*n].step = step;
		m[*n].made = st.st_mtim;
		(*n)++;
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

/*
 * One pass over ckpt_dir (scan_mu held): every step-N with its .done
 * marker is renamed into the spool and its marker removed; then they
 * join the waiting steps all at once, so the uploader picks the newest
 * of them. Returns 0, or the error of the newest step that could not be
 * taken (its step in *failed_step), with e filled.
 */
static int scan(struct shipper *s, int64_t *failed_step, struct err *e)
{
	char src[SPOOL_PATH], done[SPOOL_PATH], dst[SPOOL_PATH];
	struct taken *taken = NULL;
	size_t ntaken = 0;
	struct marker *steps;
	size_t n;
	int rc = 0, r;

	*failed_step = -1;
	r = list_done(s, &steps, &n);
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
		uint64_t step = steps[i].step;
		struct stat st;
		ssize_t at;

		if (!step_path(src, s->ckpt_dir, step, "") ||
		    !step_path(done, s->ckpt_dir, step, DONE_SUFFIX) ||
		    !step_path(dst, s->spool_dir, step, ""))
			continue;
		if (lstat(src, &st) != 0 || !S_ISDIR(st.st_mode)) {
			log_warn("%s has no step directory %s; removing it",
				 done, src);
			if (unlink(done) != 0 && errno != ENOENT)
				log_warn("cannot remove %s: %s", done,
					 strerror(errno));
			continue;
		}
		pthread_mutex_lock(&s->mu);
		at = find_step(s, step);
		if (at >= 0 && s->w[at].in_flight) {
			/* Rewritten while the old one uploads: taken once
			 * that upload is over. */
			pthread_mutex_unlock(&s->mu);
			continue;
		}
		if (at >= 0) {
			log_info("step %llu was written again; the new one "
				 "replaces the waiting one",
				 (unsigned long long)step);
			drop_entry(s, (size_t)at);
			publish(s);
		}
		pthread_mutex_unlock(&s->mu);
		if (rename(src, dst) != 0) {
			int errnum = errno;

			if (errnum == EEXIST || errnum == ENOTEMPTY) {
				/* A leftover by that name: out of the way. */
				pthread_mutex_lock(&s->mu);
				trash_path(s, dst);
				pthread_mutex_unlock(&s->mu);
				if (rename(src, dst) == 0)
					goto moved;
				errnum = errno;
			}
			rc = err_errno(e, COMMON_EIO, errnum,
				       "cannot move %s into the spool as %s%s",
				       src, dst, errnum == EXDEV
				       ? " (the spool must be on the same "
					 "filesystem as the checkpoint "
					 "directory)" : "");
			*failed_step = (int64_t)step;
			pthread_mutex_lock(&s->mu);
			if (strncmp(s->st.last_error, e->msg,
				    sizeof(s->st.last_error) - 1)) {
				log_error("%s", e->msg);
				set_error(s, e->msg);
				publish(s);
			}
			pthread_mutex_unlock(&s->mu);
			continue;
		}
moved:
		if (unlink(done) != 0 && errno != ENOENT)
			log_warn("cannot remove %s: %s", done, strerror(errno));
		taken[ntaken].step = step;
		taken[ntaken].made = steps[i].made;
		taken[ntaken].bytes = measure(dst);
		ntaken++;
		log_debug("took step %llu (%llu bytes) into %s",
			  (unsigned long long)step,
			  (unsigned long long)taken[ntaken - 1].bytes, dst);
	}
	free(steps);
	if (!ntaken) {
		free(taken);
		return rc;
	}
	pthread_mutex_lock(&s->mu);
	for (size_t i = 0; i < ntaken; i++) {
		uint64_t step = taken[i].step;

		if ((int64_t)step > s->st.newest_done)
			s->st.newest_done = (int64_t)step;
		if (insert_entry(s, step, &taken[i].made, taken[i].bytes)) {
			log_error("out of memory: step %llu dropped",
				  (unsigned long long)step);
			if (step_path(dst, s->spool_dir, step, ""))
				trash_path(s, dst);
			s->st.dropped++;
			continue;
		}
		enforce_bound(s);
	}
	publish(s);
	pthread_mutex_unlock(&s->mu);
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
		r = remove_at(AT_FDCWD, path, 0);
		if (r)
			log_warn("cannot delete %s: %s", path, strerror(r));
		free(path);
		pthread_mutex_lock(&s->mu);
	}
	pthread_mutex_unlock(&s->mu);
}

/* ---------------------------------------------------------------- threads */

static void free_shipper(struct shipper *s)
{
	pthread_mutex_destroy(&s->scan_mu);
	pthread_mutex_destroy(&s->mu);
	pthread_cond_destroy(&s->cv);
	strlist_release(&s->trash);
	free(s->w);
	free(s->run_url);
	free(s->ckpt_dir);
	free(s->spool_dir);
	free(s->part);
	free(s);
}

/* A thread's last act (mu held on entry, released here). */
static void thread_done(struct shipper *s, bool *done)
{
	bool last;

	*done = true;
	last = s->abandoned && s->scanner_done && s->uploader_done;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	if (last) {
		log_info("checkpoint shipper: the last upload has ended");
		free_shipper(s);
	}
}

static void *scanner_main(void *arg)
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
		scan(s, &failed, &e);
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
	thread_done(s, &s->scanner_done);
	return NULL;
}

static bool permanent(int rc)
{
	/* The step itself is unusable (its spool directory is gone or
	 * unreadable) or the request is: retrying cannot help. */
	return rc == CKPT_ESOURCE || rc == CKPT_EINVAL || rc == CKPT_EUNSAFE;
}

/* Under mu: step was seen committed. Returns whether to prune. */
static bool saw_commit(struct shipper *s, uint64_t step)
{
	if (s->pending_commit >= 0 && (uint64_t)s->pending_commit <= step)
		s->pending_commit = -1;
	if ((int64_t)step <= s->st.newest_committed)
		return false;
	s->st.newest_committed = (int64_t)step;
	log_info("step %llu is committed", (unsigned long long)step);
	return s->prune;
}

static void prune(struct shipper *s, struct store *store)
{
	struct ckpt_prune_options po;
	struct ckpt_prune_result pr;
	struct err e;
	int rc;

	ckpt_prune_options_init(&po);
	po.keep = s->keep ? s->keep : 1;
	po.keep_every = s->keep_every;
	rc = ckpt_prune(store, &po, &pr, &e);
	if (rc)
		log_warn("pruning checkpoints: %s", e.msg);
	else if (pr.steps_deleted)
		log_info("pruned %zu checkpoint steps (%zu objects, %llu "
			 "bytes)", pr.steps_deleted, pr.objects_deleted,
			 (unsigned long long)pr.bytes_freed);
}

/* Worker 0's pass: commits its newest uploaded step if every part is
 * there now (the writer of the last part may have died before it could
 * commit). Called and returns with mu held. */
static void commit_pass(struct shipper *s, struct store *store)
{
	uint64_t step = (uint64_t)s->pending_commit;
	unsigned epoch = s->epoch;
	bool committed = false, do_prune = false;
	struct err e;
	int rc;

	pthread_mutex_unlock(&s->mu);
	rc = ckpt_commit(store, step, s->parts_expected, &committed, &e);
	pthread_mutex_lock(&s->mu);
	s->next_pass_ms = mono_ms() + s->poll_ms;
	if (epoch != s->epoch)
		return;
	if (rc)
		log_debug("committing step %llu: %s",
			  (unsigned long long)step, e.msg);
	else if (committed)
		do_prune = saw_commit(s, step);
	publish(s);
	if (do_prune) {
		pthread_mutex_unlock(&s->mu);
		prune(s, store);
		pthread_mutex_lock(&s->mu);
	}
}

/* One upload attempt of the newest waiting step. Called and returns
 * with mu held. */
static void upload_newest(struct shipper *s, struct store *store)
{
	struct spool_entry *ent = &s->w[s->nw - 1];
	uint64_t step = ent->step, seq = ent->seq;
	struct timespec made = ent->made;
	unsigned epoch = s->epoch;
	struct ckpt_save_options o;
	struct ckpt_save_result res;
	char path[SPOOL_PATH];
	bool committed, do_prune = false;
	struct err e;
	ssize_t at;
	uint64_t t0;
	int rc;

	ent->in_flight = true;
	s->preempted = false;
	atomic_store(&s->cancel, s->stop ? 1 : 0);
	pthread_mutex_unlock(&s->mu);

	ckpt_save_options_init(&o);
	o.part = s->part;
	o.parts_expected = s->parts_expected;
	o.cancel = &s->cancel;
	t0 = mono_us();
	if (!step_path(path, s->spool_dir, step, ""))
		rc = err_set(&e, CKPT_EINVAL, "spool path too long");
	else
		rc = ckpt_save(store, path, step, &o, &res, &e);
	t0 = mono_us() - t0;
	committed = rc == CKPT_ECOMMITTED || (!rc && res.committed);

	pthread_mutex_lock(&s->mu);
	at = find_step(s, step);
	if (at < 0) /* cannot happen: in-flight entries stay */
		return;
	ent = &s->w[at];
	ent->in_flight = false;
	if (ent->doomed || epoch != s->epoch) {
		log_info("step %llu belongs to an earlier generation: "
			 "dropped%s", (unsigned long long)step,
			 rc == CLOUD_EABORTED ? " (its upload was aborted)"
					       : "");
		drop_entry(s, (size_t)at);
		publish(s);
		return;
	}
	if (!rc && res.bytes) {
		/* What an operator needs to know whether a step of this size
		 * fits in a preemption notice. */
		s->st.upload_bps = res.bytes * 1000000 / (t0 ? t0 : 1);
		log_info("step %llu: %.1f MiB uploaded in %.2f s (%.1f MiB/s)",
			 (unsigned long long)step, res.bytes / 1048576.0,
			 t0 / 1e6, s->st.upload_bps / 1048576.0);
	}
	if (!rc || rc == CKPT_ECOMMITTED) {
		log_info("step %llu uploaded as %s%s",
			 (unsigned long long)step, s->part,
			 rc == CKPT_ECOMMITTED ? " (it was already committed)"
			 : committed ? "; committed" : "");
		if (seq > s->uploaded_seq) {
			s->uploaded_seq = seq;
			s->st.newest_uploaded = (int64_t)step;
		}
		drop_entry(s, (size_t)at);
		/* Coalescing: the older waiting steps are not needed, but
		 * for a flush's those whose order is a guess. */
		for (size_t i = 0; i < s->nw;) {
			const struct spool_entry *o = &s->w[i];

			if (o->seq > seq || o->in_flight ||
			    (s->draining && same_time(&o->made, &made))) {
				i++;
				continue;
			}
			log_info("step %llu dropped: step %llu is uploaded",
				 (unsigned long long)o->step,
				 (unsigned long long)step);
			drop_entry(s, i);
			s->st.dropped++;
		}
		s->st.failures = 0;
		s->backoff.attempt = 0;
		s->retry_at_ms = 0;
		if (committed)
			do_prune = saw_commit(s, step);
		else if (s->prune && seq == s->uploaded_seq) {
			s->pending_commit = (int64_t)step;
			s->next_pass_ms = mono_ms() + s->poll_ms;
		}
	} else if (rc == CLOUD_EABORTED && (s->stop || s->preempted)) {
		log_info("upload of step %llu aborted%s",
			 (unsigned long long)step,
			 s->stop ? "" : ": a newer step goes first");
		s->retry_at_ms = 0;
	} else if (permanent(rc)) {
		log_error("step %llu cannot be uploaded, dropped: %s",
			  (unsigned long long)step, e.msg);
		s->st.failures++;
		set_error(s, e.msg);
		s->error_step = (int64_t)step;
		s->error_seq = seq;
		s->error_code = rc;
		drop_entry(s, (size_t)at);
		s->st.dropped++;
	} else {
		unsigned delay = backoff_next_ms(&s->backoff);

		s->st.failures++;
		set_error(s, e.msg);
		log_warn("uploading step %llu failed (%u in a row), next try "
			 "in %u ms: %s", (unsigned long long)step,
			 s->st.failures, delay, e.msg);
		s->retry_at_ms = mono_ms() + delay;
	}
	/* The step that was in flight may be dropped now if over bound. */
	enforce_bound(s);
	publish(s);
	if (do_prune) {
		pthread_mutex_unlock(&s->mu);
		prune(s, store);
		pthread_mutex_lock(&s->mu);
	}
}

static void *uploader_main(void *arg)
{
	struct shipper *s = arg;
	struct store *store = NULL;
	struct err e;
	int rc;

	rc = store_open(&store, s->run_url, &e);
	pthread_mutex_lock(&s->mu);
	s->open_rc = rc;
	s->open_err = e;
	s->opened = true;
	pthread_cond_broadcast(&s->cv);
	while (!rc && !s->stop) {
		uint64_t now = mono_ms(), until = UINT64_MAX;
		bool pass_due = s->prune && s->pending_commit >= 0;

		if (s->nw && now >= s->retry_at_ms) {
			upload_newest(s, store);
			continue;
		}
		/* Worker 0's commit pass, unless a flush is in a hurry. */
		if (pass_due && now >= s->next_pass_ms && !s->flushers) {
			commit_pass(s, store);
			continue;
		}
		if (s->nw)
			until = s->retry_at_ms;
		if (pass_due && s->next_pass_ms < until)
			until = s->next_pass_ms;
		mono_cond_wait_until(&s->cv, &s->mu, until);
	}
	pthread_mutex_unlock(&s->mu);
	store_close(store);
	pthread_mutex_lock(&s->mu);
	thread_done(s, &s->uploader_done);
	return NULL;
}

/* ---------------------------------------------------------------- API */

static char *dup_or_null(const char *v, bool *ok)
{
	char *d;

	if (!v)
		return NULL;
	d = strdup(v);
	if (!d)
		*ok = false;
	return d;
}

/* Leftovers of an earlier supervisor in the spool: steps of a run that
 * has restarted since (never to be committed late) and trash. */
static void clear_spool(struct shipper *s)
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
			   parse_step(d->d_name + 5, len - 5, &step)) {
			log_info("removing %s, left by an earlier run", path);
			trash_path(s, path);
		}
	}
	closedir(dir);
}

int shipper_start(struct shipper **out, const struct shipper_config *c,
		  struct err *e)
{
	struct shipper *s;
	unsigned base = BACKOFF_BASE_MS, max = BACKOFF_MAX_MS, ms;
	bool ok = true;
	int r, rc;

	*out = NULL;
	err_init(e);
	if (!c || !c->run_url || !c->ckpt_dir || !c->spool_dir ||
	    !*c->ckpt_dir || !*c->spool_dir)
		return err_set(e, COMMON_EINVAL, "the checkpoint shipper needs "
			       "a run URL, a checkpoint directory and a spool "
			       "directory");
	s = calloc(1, sizeof(*s));
	if (!s)
		return err_set(e, COMMON_ENOMEM, "out of memory");
	s->run_url = dup_or_null(c->run_url, &ok);
	s->ckpt_dir = dup_or_null(c->ckpt_dir, &ok);
	s->spool_dir = dup_or_null(c->spool_dir, &ok);
	s->part = dup_or_null(c->part ? c->part : CKPT_DEFAULT_PART, &ok);
	s->parts_expected = c->parts_expected ? c->parts_expected : 1;
	s->prune = c->prune;
	s->keep = c->keep;
	s->keep_every = c->keep_every;
	s->spool_bytes = c->spool_bytes;
	s->notify_fd = c->notify_fd;
	s->poll_ms = c->poll_ms ? c->poll_ms : DEFAULT_POLL_MS;
	s->st.newest_done = s->st.newest_uploaded = -1;
	s->st.newest_committed = -1;
	s->published = s->st;
	s->pending_commit = s->error_step = s->warned_step = -1;
	strlist_init(&s->trash);
	atomic_init(&s->cancel, 0);
	pthread_mutex_init(&s->scan_mu, NULL);
	pthread_mutex_init(&s->mu, NULL);
	mono_cond_init(&s->cv);
	s->scanner_done = s->uploader_done = true;
	if (!ok) {
		free_shipper(s);
		return err_set(e, COMMON_ENOMEM, "out of memory");
	}

	/* Backoff between attempts: 1 s to 30 s, scaled down the way the
	 * HTTP retry policy is by SLICECTL_HTTP_RETRY_BASE_MS. */
	ms = http_retry_base_ms();
	if (ms && ms < BACKOFF_BASE_MS) {
		base = ms;
		max = BACKOFF_MAX_MS / BACKOFF_BASE_MS * ms;
	}
	backoff_init(&s->backoff, base, max,
		     mono_us() ^ ((uint64_t)getpid() << 32) ^
		     (uint64_t)(uintptr_t)s);

	r = fs_mkdir_p(s->spool_dir, 0755, NULL);
	if (r) {
		rc = err_errno(e, COMMON_EIO, r, "cannot create the spool "
			       "directory %s", s->spool_dir);
		free_shipper(s);
		return rc;
	} else {
		struct stat a, b;

		if (stat(s->spool_dir, &a) == 0 &&
		    stat(s->ckpt_dir, &b) == 0 && a.st_dev != b.st_dev)
			log_warn("the spool %s is not on the filesystem of %s: "
				 "steps cannot be moved into it",
				 s->spool_dir, s->ckpt_dir);
	}
	if (s->notify_fd >= 0) {
		int fl = fcntl(s->notify_fd, F_GETFL);

		if (fl >= 0 && !(fl & O_NONBLOCK))
			(void)fcntl(s->notify_fd, F_SETFL, fl | O_NONBLOCK);
	}
	clear_spool(s);

	/* The threads take no signals: the supervisor's loop does. */
	s->uploader_done = false;
	r = thread_start(&s->uploader, uploader_main, s);
	if (r)
		s->uploader_done = true;
	if (!r) {
		s->uploader_started = true;
		pthread_mutex_lock(&s->mu);
		while (!s->opened)
			pthread_cond_wait(&s->cv, &s->mu);
		rc = s->open_rc;
		if (rc)
			*e = s->open_err;
		pthread_mutex_unlock(&s->mu);
		if (rc) {
			pthread_join(s->uploader, NULL);
			err_prefix(e, "checkpoint shipper");
			free_shipper(s);
			return rc;
		}
		pthread_mutex_lock(&s->mu);
		s->scanner_done = false;
		pthread_mutex_unlock(&s->mu);
		r = thread_start(&s->scanner, scanner_main, s);
		if (!r)
			s->scanner_started = true;
		else {
			pthread_mutex_lock(&s->mu);
			s->scanner_done = true;
			pthread_mutex_unlock(&s->mu);
		}
	}
	if (r) {
		rc = err_errno(e, COMMON_EIO, r, "cannot start the checkpoint "
			       "shipper's threads");
		shipper_stop(s);
		return rc;
	}
	log_debug("checkpoint shipper: %s -> %s via %s, part %s of %u",
		  s->ckpt_dir, s->run_url, s->spool_dir, s->part,
		  s->parts_expected);
	*out = s;
	return 0;
}

void shipper_get(struct shipper *s, struct shipper_state *out)
{
	pthread_mutex_lock(&s->mu);
	*out = s->st;
	pthread_mutex_unlock(&s->mu);
}

void shipper_kick(struct shipper *s)
{
	pthread_mutex_lock(&s->mu);
	s->kick = true;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
}

int shipper_flush(struct shipper *s, uint64_t deadline_ms, struct err *e)
{
	int64_t failed_step;
	struct err scan_err;
	struct spool_entry target;
	unsigned epoch;
	int scan_rc, rc;

	err_init(e);
	err_init(&scan_err);
	pthread_mutex_lock(&s->mu);
	s->flushers++;
	pthread_mutex_unlock(&s->mu);
	pthread_mutex_lock(&s->scan_mu);
	scan_rc = scan(s, &failed_step, &scan_err);
	pthread_mutex_unlock(&s->scan_mu);

	pthread_mutex_lock(&s->mu);
	if (scan_rc && failed_step >= 0 &&
	    (!s->nw || (int64_t)s->w[s->nw - 1].step < failed_step)) {
		/* The newest done step could not even be taken. */
		*e = scan_err;
		rc = scan_rc;
		goto out;
	}
	/* From now on no step is dropped for one whose marker was made in
	 * the same tick: which of them is the final one is a guess. */
	s->draining = true;
	if (!s->nw) {
		rc = 0;
		if (s->error_seq && s->error_seq == s->last_seq)
			rc = err_set(e, s->error_code, "step %lld could not "
				     "be uploaded: %s",
				     (long long)s->error_step,
				     s->st.last_error);
		goto out;
	}
	/* The newest arrival first: an older upload in flight gives way,
	 * and the next attempt is now, with the backoff started afresh. */
	target = s->w[s->nw - 1];
	for (size_t i = 0; i + 1 < s->nw; i++) {
		if (s->w[i].in_flight) {
			s->preempted = true;
			atomic_store(&s->cancel, 1);
		}
	}
	s->retry_at_ms = 0;
	s->backoff.attempt = 0;
	pthread_cond_broadcast(&s->cv);
	epoch = s->epoch;
	for (;;) {
		if (s->error_seq == target.seq) {
			rc = err_set(e, s->error_code, "step %llu could not be "
				     "uploaded: %s",
				     (unsigned long long)target.step,
				     s->st.last_error);
			break;
		}
		if (!flush_waits(s, &target)) {
			rc = 0;
			break;
		}
		if (s->stop || s->epoch != epoch) {
			rc = err_set(e, CLOUD_EABORTED, "the checkpoint "
				     "shipper was %s before step %llu was "
				     "uploaded",
				     s->stop ? "stopped" : "reset",
				     (unsigned long long)target.step);
			break;
		}
		if (mono_ms() >= deadline_ms && s->uploaded_seq >= target.seq) {
			/* Only older steps are left behind. */
			rc = 0;
			break;
		}
		if (mono_ms() >= deadline_ms) {
			rc = err_set(e, CLOUD_ETIMEDOUT, "step %llu was not "
				     "uploaded in time%s%s",
				     (unsigned long long)target.step,
				     s->st.failures ? "; the last attempt: "
						    : "",
				     s->st.failures ? s->st.last_error : "");
			break;
		}
		mono_cond_wait_until(&s->cv, &s->mu, deadline_ms);
	}
out:
	s->flushers--;
	pthread_cond_broadcast(&s->cv);
	pthread_mutex_unlock(&s->mu);
	return rc;
}

void shipper_reset(struct shipper *s)
{
	char src[SPOOL_PATH], done[SPOOL_PATH];
	unsigned dropped = 0;
	struct marker *steps;
	size_t n;

	pthread_mutex_lock(&s->scan_mu);
	pthread_mutex_lock(&s->mu);
	s->epoch++;
	for (size_t i = 0; i < s->nw;) {
		if (s->w[i].in_flight) {
			s->w[i].doomed = true;
			atomic_store(&s->cancel, 1);
			i++;
			continue;
		}
		drop_entry(s, i);
		dropped++;
	}
	/* Finished steps the old trainer left behind go too. */
	if (!list_done(s, &steps, &n)) {
		for (size_t i = 0; i < n; i++) {
			if (!step_path(src, s->ckpt_dir, steps[i].step, "") ||
			    !step_path(done, s->ckpt_dir, steps[i].step,
				       DONE_SUFFIX))
				continue;
			trash_path(s, src);
			if (unlink(done) != 0 && errno != ENOENT)
				log_warn("cannot remove %s: %s", done,
					 strerror(errno));
			dropped++;
		}
		free(steps);
	}
	if (dropped)
		log_info("reset: %u waiting checkpoint steps dropped",
			 dropped);
	s->st.newest_done = -1;
	s->st.newest_uploaded = -1;
	s->st.failures = 0;
	s->pending_commit = -1;
	s->error_step = -1;
	s->error_seq = 0;
	s->draining = false;
	s->retry_at_ms = 0;
	s->backoff.attempt = 0;
	publish(s);
	pthread_mutex_unlock(&s->mu);
	pthread_mutex_unlock(&s->scan_mu);
}

void shipper_stop(struct shipper *s)
{
	uint64_t until;
	bool join_scanner, join_uploader;
	pthread_t scanner, uploader;

	if (!s)
		return;
	pthread_mutex_lock(&s->mu);
	s->stop = true;
	atomic_store(&s->cancel, 1);
	pthread_cond_broadcast(&s->cv);
	until = mono_ms() + STOP_WAIT_MS;
	while ((!s->scanner_done || !s->uploader_done || s->flushers) &&
	       mono_ms() < until)
		mono_cond_wait_until(&s->cv, &s->mu, until);
	while (s->flushers) /* they leave at once on stop */
		pthread_cond_wait(&s->cv, &s->mu);
	scanner = s->scanner;
	uploader = s->uploader;
	join_scanner = s->scanner_started && s->scanner_done;
	join_uploader = s->uploader_started && s->uploader_done;
	if (!s->scanner_done || !s->uploader_done) {
		bool detach_scanner = s->scanner_started && !s->scanner_done;
		bool detach_uploader = s->uploader_started &&
				       !s->uploader_done;

		log_warn("checkpoint shipper: still busy after %u ms (an "
			 "upload inside one request); left to end on its own",
			 STOP_WAIT_MS);
		s->abandoned = true;
		pthread_mutex_unlock(&s->mu);
		if (join_scanner)
			pthread_join(scanner, NULL);
		if (join_uploader)
			pthread_join(uploader, NULL);
		if (detach_scanner)
			pthread_detach(scanner);
		if (detach_uploader)
			pthread_detach(uploader);
		return;
	}
	pthread_mutex_unlock(&s->mu);
	if (join_scanner)
		pthread_join(scanner, NULL);
	if (join_uploader)
		pthread_join(uploader, NULL);
	free_shipper(s);
}
