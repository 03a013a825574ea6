/*
 * cloud/store_file.c: the file:// backend. Gives a local directory the
 * object semantics of GCS (cloud.h): an object NAME is the file DIR/NAME
 * ("/" in names makes subdirectories), written whole or not at all,
 * with a generation that changes on every write and a CRC32C checked on
 * every read.
 *
 * Writes go to DIR/.slicectl-tmp/ first, are fsync'd, and are renamed into
 * place. Each object's generation and CRC32C sit in a user extended
 * attribute of its file, set before the rename, so data and metadata
 * change together. Every change of the namespace (precondition check,
 * rename, unlink, creating and removing folders) happens under an
 * exclusive flock of DIR/.slicectl-tmp/lock, which makes create-only and
 * compare-and-swap atomic across processes; the same lock file holds the
 * last generation handed out, so generations only grow.
 *
 * Nothing is created until something is written: DIR and .slicectl-tmp/
 * appear at the first upload, so reading, listing or deleting in a store
 * that does not exist (a mistyped URL) finds nothing and leaves no trace.
 */
#include "cloud/backend.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#define TMP_DIR ".slicectl-tmp"
#define LOCK_FILE "lock"
#define META_XATTR "user.slicectl"
#define IO_BLOCK ((size_t)1 << 20)
/* A temporary file untouched this long whose writer holds no lock on it
 * was left by a writer that died. */
#define TMP_ABANDONED_S (3600)

struct store_backend {
	char *dir;    /* absolute, no trailing slash ("" for the root) */
	/* Opened on first use (-1 until then) and never changed after,
	 * under mu: a store may be used from several threads. */
	pthread_mutex_t mu;
	int dirfd;
	int tmpfd;
	int lockfd;
};

struct file_upload {
	struct store_upload base;
	struct store_backend *b;
	char *name;
	char tmpname[64];
	int fd;
	uint32_t crc;
	uint64_t size;
	int64_t if_gen;
};

struct file_meta {
	bool exists;
	int64_t generation;
	uint32_t crc32c;
	uint64_t size;
	struct timespec mtime;
};

static int store_dirs(struct store_backend *b, bool for_write, int *fd,
		      struct err *e);

/* The URL of a name, for messages. */
static const char *url_of(struct store_backend *b, const char *name,
			  char *out, size_t cap)
{
	snprintf(out, cap, "file://%s/%s", b->dir, name ? name : "");
	return out;
}

#define URL(b, name) url_of((b), (name), (char[1200]){ 0 }, 1200)

/* Errors of writing: full disks and file size limits are told apart. */
static int write_errno(struct err *e, int errnum, struct store_backend *b,
		       const char *name, const char *what)
{
	if (errnum == ENOSPC || errnum == EDQUOT)
		return err_errno(e, CLOUD_ENOSPACE, errnum,
				 "%s %s: the disk holding %s is full; free "
				 "space there (nothing was stored)", what,
				 URL(b, name), b->dir[0] ? b->dir : "/");
	if (errnum == EFBIG)
		return err_errno(e, CLOUD_ENOSPACE, errnum,
				 "%s %s: the file size limit was reached; "
				 "raise it (ulimit -f) (nothing was stored)",
				 what, URL(b, name));
	return err_errno(e, CLOUD_EIO, errnum, "%s %s", what, URL(b, name));
}

static void format_time(const struct timespec *ts, char *out, size_t cap)
{
	struct tm tm;
	time_t t = ts->tv_sec;
	char day[32];

	if (!gmtime_r(&t, &tm)) {
		snprintf(out, cap, "1970-01-01T00:00:00.000Z");
		return;
	}
	strftime(day, sizeof(day), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(out, cap, "%.20s.%03dZ", day,
		 (int)(ts->tv_nsec / 1000000 % 1000));
}

static int fill_object(struct store_object *o, const char *name,
		       const struct file_meta *m, struct err *e)
{
	if (!o)
		return 0;
	memset(o, 0, sizeof(*o));
	o->name = strdup(name);
	if (!o->name)
		return err_set(e, CLOUD_ENOMEM, "out of memory");
	o->size = m->size;
	o->generation = m->generation;
	o->crc32c = m->crc32c;
	format_time(&m->mtime, o->updated, sizeof(o->updated));
	return 0;
}

static int crc_of_fd(int fd, uint32_t *crc)
{
	unsigned char *blk = malloc(IO_BLOCK);
	off_t off = 0;
	uint32_t c = 0;

	if (!blk)
		return ENOMEM;
	for (;;) {
		ssize_t n = pread(fd, blk, IO_BLOCK, off);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			int errnum = errno;

			free(blk);
			return errnum;
		}
		if (n == 0)
			break;
		c = crc32c_update(c, blk, (size_t)n);
		off += n;
	}
	free(blk);
	*crc = c;
	return 0;
}

/*
 * Reads what an open object file says about itself. A file put there by
 * other means (copied in by hand, or its attribute lost by a copy) has no
 * attribute: its CRC32C is computed and its generation taken from its
 * change time, which every write moves.
 */
static int meta_of_fd(struct store_backend *b, const char *name, int fd,
		      struct file_meta *m, struct err *e)
{
	char val[64];
	struct stat st;
	ssize_t n;
	long long g;
	unsigned long c;
	int r;

	memset(m, 0, sizeof(*m));
	if (fstat(fd, &st) != 0)
		return err_errno(e, CLOUD_EIO, errno, "reading %s",
				 URL(b, name));
	if (!S_ISREG(st.st_mode))
		return err_set(e, CLOUD_ENOTFOUND, "%s does not exist",
			       URL(b, name));
	m->exists = true;
	m->size = (uint64_t)st.st_size;
	m->mtime = st.st_mtim;
	n = fgetxattr(fd, META_XATTR, val, sizeof(val) - 1);
	if (n > 0) {
		val[n] = '\0';
		if (sscanf(val, "%lld %lu", &g, &c) == 2 && g > 0 &&
		    c <= UINT32_MAX) {
			m->generation = g;
			m->crc32c = (uint32_t)c;
			return 0;
		}
	} else if (n < 0 && errno != ENODATA && errno != ENOTSUP) {
		return err_errno(e, CLOUD_EIO, errno,
				 "reading the metadata of %s", URL(b, name));
	}
	r = crc_of_fd(fd, &m->crc32c);
	if (r)
		return err_errno(e, r == ENOMEM ? CLOUD_ENOMEM : CLOUD_EIO, r,
				 "reading %s", URL(b, name));
	m->generation = (int64_t)st.st_ctim.tv_sec * 1000000 +
			st.st_ctim.tv_nsec / 1000;
	if (m->generation < 1)
		m->generation = 1;
	return 0;
}

/* Opens an object for reading; ENOTFOUND when it is not there. */
static int open_object(struct store_backend *b, const char *name, int *fdp,
		       struct file_meta *m, struct err *e)
{
	int dirfd, fd, r;

	*fdp = -1;
	r = store_dirs(b, false, &dirfd, e);
	if (r)
		return r;
	fd = dirfd < 0 ? -1 : openat(dirfd, name, O_RDONLY | O_NOFOLLOW |
				     O_CLOEXEC | O_NONBLOCK);
	if (dirfd < 0)
		errno = ENOENT;
	if (fd < 0) {
		if (errno == ENOENT || errno == ENOTDIR || errno == ELOOP) {
			memset(m, 0, sizeof(*m));
			return err_set(e, CLOUD_ENOTFOUND,
				       "%s does not exist", URL(b, name));
		}
		return err_errno(e, CLOUD_EIO, errno, "opening %s",
				 URL(b, name));
	}
	r = meta_of_fd(b, name, fd, m, e);
	if (r) {
		close(fd);
		return r;
	}
	*fdp = fd;
	return 0;
}

/* What is under name now, for preconditions; m->exists false if nothing. */
static int current_meta(struct store_backend *b, const char *name,
			struct file_meta *m, struct err *e)
{
	int fd;
	int r = open_object(b, name, &fd, m, e);

	if (r == CLOUD_ENOTFOUND) {
		err_init(e);
		memset(m, 0, sizeof(*m));
		return 0;
	}
	if (!r)
		close(fd);
	return r;
}

static int check_precondition(struct store_backend *b, const char *name,
			      const struct file_meta *m, int64_t if_gen,
			      struct err *e)
{
	if (if_gen == STORE_ANY_GENERATION)
		return 0;
	if (if_gen == STORE_CREATE_ONLY && m->exists)
		return err_set(e, CLOUD_EPRECONDITION,
			       "%s already exists (generation %lld) and was "
			       "to be created only if missing", URL(b, name),
			       (long long)m->generation);
	if (if_gen > 0 && !m->exists)
		return err_set(e, CLOUD_EPRECONDITION,
			       "%s no longer exists; it was expected at "
			       "generation %lld", URL(b, name),
			       (long long)if_gen);
	if (if_gen > 0 && m->generation != if_gen)
		return err_set(e, CLOUD_EPRECONDITION,
			       "%s changed: it is at generation %lld, not "
			       "%lld", URL(b, name), (long long)m->generation,
			       (long long)if_gen);
	return 0;
}

static int lock_store(struct store_backend *b, struct err *e)
{
	while (flock(b->lockfd, LOCK_EX) != 0)
		if (errno != EINTR)
			return err_errno(e, CLOUD_EIO, errno,
					 "locking file://%s/%s/%s", b->dir,
					 TMP_DIR, LOCK_FILE);
	return 0;
}

static void unlock_store(struct store_backend *b)
{
	flock(b->lockfd, LOCK_UN);
}

/* Under the store lock: a generation greater than any handed out before,
 * close to the time in microseconds as GCS's are. */
static int64_t next_generation(struct store_backend *b)
{
	struct timespec now;
	uint64_t last = 0;
	int64_t g;

	if (pread(b->lockfd, &last, sizeof(last), 0) != sizeof(last))
		last = 0;
	clock_gettime(CLOCK_REALTIME, &now);
	g = (int64_t)now.tv_sec * 1000000 + now.tv_nsec / 1000;
	if (g <= (int64_t)last)
		g = (int64_t)last + 1;
	last = (uint64_t)g;
	if (pwrite(b->lockfd, &last, sizeof(last), 0) != sizeof(last))
		log_debug("file store %s: could not record generation %lld",
			  b->dir, (long long)g);
	return g;
}

/* Under the store lock: creates the folders above name. */
static int make_parents(struct store_backend *b, const char *name,
			struct err *e)
{
	char path[1100];
	size_t len = strlen(name);

	if (len >= sizeof(path))
		return err_set(e, CLOUD_EINVAL, "object name too long: %s",
			       name);
	memcpy(path, name, len + 1);
	for (char *p = strchr(path, '/'); p; p = strchr(p + 1, '/')) {
		*p = '\0';
		if (mkdirat(b->dirfd, path, 0755) != 0 && errno != EEXIST)
			return write_errno(e, errno, b, name,
					   "creating the folder for");
		*p = '/';
	}
	return 0;
}

/* Under the store lock: removes the folders above name left empty. */
static void remove_empty_parents(struct store_backend *b, const char *name)
{
	char path[1100];
	size_t len = strlen(name);
	char *p;

	if (len >= sizeof(path))
		return;
	memcpy(path, name, len + 1);
	while ((p = strrchr(path, '/'))) {
		*p = '\0';
		if (unlinkat(b->dirfd, path, AT_REMOVEDIR) != 0)
			return;
	}
}

/* Makes a rename or unlink in name's folder durable. */
static void sync_parent(struct store_backend *b, const char *name)
{
	const char *slash = strrchr(name, '/');
	char path[1100];
	int fd;

	if (!slash) {
		fsync(b->dirfd);
		return;
	}
	if ((size_t)(slash - name) >= sizeof(path))
		return;
	memcpy(path, name, (size_t)(slash - name));
	path[slash - name] = '\0';
	fd = openat(b->dirfd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd >= 0) {
		fsync(fd);
		close(fd);
	}
}

static int reserved_name(struct store_backend *b, const char *name,
			 struct err *e)
{
	size_t n = strlen(TMP_DIR);

	if (!strncmp(name, TMP_DIR, n) && (!name[n] || name[n] == '/'))
		return err_set(e, CLOUD_EINVAL,
			       "%s: names under %s/ are kept for the store's "
			       "own use", URL(b, name), TMP_DIR);
	return 0;
}

/* Leaves no temporary file behind from writers that died long ago. A live
 * writer holds a lock on its file, so a slow one is never touched. */
static void remove_abandoned(struct store_backend *b)
{
	int fd = dup(b->tmpfd);
	DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
	struct dirent *de;
	time_t now = time(NULL);

	if (!d) {
		if (fd >= 0)
			close(fd);
		return;
	}
	while ((de = readdir(d))) {
		struct stat st;
		int f;

		if (strncmp(de->d_name, "up-", 3) ||
		    fstatat(b->tmpfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) ||
		    !S_ISREG(st.st_mode) ||
		    now - st.st_mtim.tv_sec < TMP_ABANDONED_S)
			continue;
		f = openat(b->tmpfd, de->d_name,
			   O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
		if (f < 0)
			continue;
		if (flock(f, LOCK_EX | LOCK_NB) == 0) {
			log_debug("file store %s: removing %s, left by a "
				  "writer that died", b->dir, de->d_name);
			unlinkat(b->tmpfd, de->d_name, 0);
		}
		close(f);
	}
	closedir(d);
}

/* The same, by writing: when .slicectl-tmp/ is made, a filesystem that
 * refuses user attributes on files is found before any upload. */
static int probe_xattr(struct store_backend *b, struct err *e)
{
	char name[64];
	int fd;
	int r = 0;

	snprintf(name, sizeof(name), "probe-%ld", (long)getpid());
	fd = openat(b->tmpfd, name, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC,
		    0600);
	if (fd < 0)
		return write_errno(e, errno, b, TMP_DIR, "writing into");
	if (fsetxattr(fd, META_XATTR, "1 0", 3, 0) != 0) {
		if (errno == ENOTSUP)
			r = err_set(e, CLOUD_EIO,
				    "file://%s: its filesystem has no user "
				    "extended attributes, which file:// "
				    "stores need; use a directory on ext4, "
				    "xfs, btrfs or tmpfs", b->dir);
		else
			r = write_errno(e, errno, b, TMP_DIR, "writing into");
	}
	close(fd);
	unlinkat(b->tmpfd, name, 0);
	return r;
}

static int make_store_dir(const char *dir, struct err *e)
{
	int errnum = fs_mkdir_p(dir, 0755, e);

	if (!errnum)
		return 0;
	err_prefix(e, "file://%s", dir);
	/* CLOUD_EIO and CLOUD_ENOMEM are common's codes already. */
	if (errnum == ENOSPC)
		e->code = CLOUD_ENOSPACE;
	return e->code;
}

static void file_close(struct store_backend *b)
{
	if (!b)
		return;
	if (b->lockfd >= 0)
		close(b->lockfd);
	if (b->tmpfd >= 0)
		close(b->tmpfd);
	if (b->dirfd >= 0)
		close(b->dirfd);
	pthread_mutex_destroy(&b->mu);
	free(b->dir);
	free(b);
}

/* Under mu: opens DIR if it exists (b->dirfd stays -1 if not). */
static int open_dir_locked(struct store_backend *b, struct err *e)
{
	if (b->dirfd >= 0)
		return 0;
	b->dirfd = open(b->dir[0] ? b->dir : "/",
			O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (b->dirfd >= 0 || errno == ENOENT)
		return 0;
	return err_errno(e, errno == ENOTDIR ? CLOUD_EURL : CLOUD_EIO,
			 errno, "opening the store folder file://%s", b->dir);
}

/* Under mu, DIR open: opens .slicectl-tmp/ and its lock, creating them
 * only when create is set. */
static int open_tmp_locked(struct store_backend *b, bool create,
			   struct err *e)
{
	int r;

	if (b->tmpfd >= 0)
		return 0;
	if (create && mkdirat(b->dirfd, TMP_DIR, 0755) != 0 &&
	    errno != EEXIST)
		return write_errno(e, errno, b, TMP_DIR, "creating");
	b->tmpfd = openat(b->dirfd, TMP_DIR,
			  O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (b->tmpfd < 0 && errno == ENOENT && !create)
		return 0;
	if (b->tmpfd >= 0)
		b->lockfd = openat(b->tmpfd, LOCK_FILE,
				   O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW,
				   0644);
	if (b->tmpfd < 0 || b->lockfd < 0) {
		r = err_errno(e, errno == ENOSPC ? CLOUD_ENOSPACE : CLOUD_EIO,
			      errno, "opening file://%s/%s/%s (the store's "
			      "lock; check permissions)", b->dir, TMP_DIR,
			      LOCK_FILE);
		if (b->tmpfd >= 0)
			close(b->tmpfd);
		b->tmpfd = -1;
		return r;
	}
	if (create) {
		r = probe_xattr(b, e);
		if (r)
			return r;
	}
	remove_abandoned(b);
	return 0;
}

/*
 * The store's folder for a read (*fd -1: it does not exist, so neither
 * does any object) or, with for_write, for a write: then DIR and
 * .slicectl-tmp/ are created if missing and *fd is always valid.
 */
static int store_dirs(struct store_backend *b, bool for_write, int *fd,
		      struct err *e)
{
	int r;

	pthread_mutex_lock(&b->mu);
	r = open_dir_locked(b, e);
	if (!r && b->dirfd < 0 && for_write) {
		r = make_store_dir(b->dir, e);
		if (!r)
			r = open_dir_locked(b, e);
		if (!r && b->dirfd < 0)
			r = err_errno(e, CLOUD_EIO, ENOENT, "opening the "
				      "store folder file://%s", b->dir);
	}
	if (!r && for_write)
		r = open_tmp_locked(b, true, e);
	*fd = b->dirfd;
	pthread_mutex_unlock(&b->mu);
	return r;
}

/* Objects' metadata lives in extended attributes: say so at open time on
 * a filesystem without them, without writing anything to find out. */
static int probe_xattr_read(struct store_backend *b, struct err *e)
{
	char val[64];

	if (fgetxattr(b->dirfd, META_XATTR, val, sizeof(val)) < 0 &&
	    errno == ENOTSUP)
		return err_set(e, CLOUD_EIO,
			       "file://%s: its filesystem has no user "
			       "extended attributes, which file:// stores "
			       "need; use a directory on ext4, xfs, btrfs "
			       "or tmpfs", b->dir);
	return 0;
}

static int file_open(struct store_backend **out, const char *where,
		     struct err *e)
{
	struct store_backend *b;
	size_t len;
	int r;

	*out = NULL;
	b = calloc(1, sizeof(*b));
	if (!b)
		return err_set(e, CLOUD_ENOMEM, "out of memory");
	b->dirfd = b->tmpfd = b->lockfd = -1;
	pthread_mutex_init(&b->mu, NULL);
	len = strlen(where);
	while (len && where[len - 1] == '/')
		len--;
	b->dir = strndup(where, len);
	if (!b->dir) {
		file_close(b);
		return err_set(e, CLOUD_ENOMEM, "out of memory");
	}
	/* A store that exists is checked now; one that does not is made
	 * by its first write. */
	r = open_dir_locked(b, e);
	if (!r && b->dirfd >= 0)
		r = probe_xattr_read(b, e);
	if (!r && b->dirfd >= 0)
		r = open_tmp_locked(b, false, e);
	if (r) {
		file_close(b);
		return r;
	}
	*out = b;
	return 0;
}

static void file_upload_abort(struct store_upload *su)
{
	struct file_upload *u = (struct file_upload *)su;

	if (!u)
		return;
	if (u->fd >= 0) {
		unlinkat(u->b->tmpfd, u->tmpname, 0);
		close(u->fd);
	}
	free(u->name);
	free(u);
}

static int file_upload_begin(struct store_backend *b, const char *name,
			     int64_t if_generation_match,
			     struct store_upload **out, struct err *e)
{
	static unsigned counter;
	struct file_upload *u;
	int fd;
	int r = reserved_name(b, name, e);

	*out = NULL;
	if (!r)
		r = store_dirs(b, true, &fd, e);
	if (r)
		return r;
	u = calloc(1, sizeof(*u));
	if (!u)
		return err_set(e, CLOUD_ENOMEM, "out of memory");
	u->b = b;
	u->fd = -1;
	u->if_gen = if_generation_match;
	u->name = strdup(name);
	if (!u->name) {
		free(u);
		return err_set(e, CLOUD_ENOMEM, "out of memory");
	}
	for (int tries = 0; u->fd < 0; tries++) {
		unsigned n = __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED);

		snprintf(u->tmpname, sizeof(u->tmpname), "up-%ld-%u-%llx",
			 (long)getpid(), n, (unsigned long long)mono_us());
		u->fd = openat(b->tmpfd, u->tmpname,
			       O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
		if (u->fd < 0 && (errno != EEXIST || tries > 100)) {
			r = write_errno(e, errno, b, name,
					"starting the upload of");
			free(u->name);
			free(u);
			return r;
		}
	}
	/* Held until the file is renamed or removed: a live upload. */
	flock(u->fd, LOCK_EX | LOCK_NB);
	*out = &u->base;
	return 0;
}

static int file_upload_write(struct store_upload *su, const void *data,
			     size_t len, struct err *e)
{
	struct file_upload *u = (struct file_upload *)su;
	int errnum;

	if (u->fd < 0)
		return err_set(e, CLOUD_EINVAL, "upload of %s already failed",
			       URL(u->b, u->name));
	u->crc = crc32c_update(u->crc, data, len);
	errnum = fs_write_all(u->fd, data, len);
	if (errnum)
		return write_errno(e, errnum, u->b, u->name, "uploading");
	u->size += len;
	return 0;
}

static int commit_locked(struct file_upload *u, struct file_meta *m,
			 struct err *e)
{
	struct store_backend *b = u->b;
	struct file_meta cur;
	struct stat st;
	char val[64];
	int r;

	r = current_meta(b, u->name, &cur, e);
	if (!r)
		r = check_precondition(b, u->name, &cur, u->if_gen, e);
	if (r)
		return r;
	m->generation = next_generation(b);
	m->crc32c = u->crc;
	snprintf(val, sizeof(val), "%lld %lu", (long long)m->generation,
		 (unsigned long)u->crc);
	if (fsetxattr(u->fd, META_XATTR, val, strlen(val), 0) != 0 ||
	    fsync(u->fd) != 0)
		return write_errno(e, errno, b, u->name, "uploading");
	if (fstat(u->fd, &st) != 0)
		return err_errno(e, CLOUD_EIO, errno, "uploading %s",
				 URL(b, u->name));
	m->exists = true;
	m->size = (uint64_t)st.st_size;
	m->mtime = st.st_mtim;
	r = make_parents(b, u->name, e);
	if (r)
		return r;
	if (renameat(b->tmpfd, u->tmpname, b->dirfd, u->name) != 0) {
		if (errno == EISDIR || errno == ENOTDIR || errno == ENOTEMPTY)
			return err_set(e, CLOUD_EINVAL,
				       "cannot store %s: in a file:// store a "
				       "name cannot be both an object and a "
				       "folder of other objects",
				       URL(b, u->name));
		return write_errno(e, errno, b, u->name, "storing");
	}
	sync_parent(b, u->name);
	return 0;
}

static int file_upload_finish(struct store_upload *su,
			      struct store_object *out, struct err *e)
{
	struct file_upload *u = (struct file_upload *)su;
	struct file_meta m;
	int r;

	if (u->fd < 0) {
		r = err_set(e, CLOUD_EINVAL, "upload of %s already failed",
			    URL(u->b, u->name));
		file_upload_abort(su);
		return r;
	}
	/* The data reaches the disk before the lock is taken, so other
	 * writers wait only for the rename. */
	if (fdatasync(u->fd) != 0) {
		r = write_errno(e, errno, u->b, u->name, "uploading");
		file_upload_abort(su);
		return r;
	}
	r = lock_store(u->b, e);
	if (r) {
		file_upload_abort(su);
		return r;
	}
	r = commit_locked(u, &m, e);
	unlock_store(u->b);
	if (!r) {
		close(u->fd);
		u->fd = -1;
		r = fill_object(out, u->name, &m, e);
	}
	file_upload_abort(su);
	return r;
}

static int file_put(struct store_backend *b, const char *name,
		    const void *data, size_t len, int64_t if_generation_match,
		    struct store_object *out, struct err *e)
{
	struct store_upload *u;
	int r = file_upload_begin(b, name, if_generation_match, &u, e);

	if (r)
		return r;
	r = file_upload_write(u, data, len, e);
	if (r) {
		file_upload_abort(u);
		return r;
	}
	return file_upload_finish(u, out, e);
}

static int file_get(struct store_backend *b, const char *name,
		    int64_t generation, store_sink_fn sink, void *ud,
		    struct store_object *out, struct err *e)
{
	struct file_meta m;
	unsigned char *blk;
	uint64_t got = 0;
	uint32_t crc = 0;
	int fd, r;

	/* The open file stays the generation it was, whatever replaces the
	 * name meanwhile. */
	r = open_object(b, name, &fd, &m, e);
	if (r)
		return r;
	if (generation && m.generation != generation) {
		close(fd);
		return err_set(e, CLOUD_ENOTFOUND,
			       "generation %lld of %s does not exist (it is "
			       "at generation %lld now)",
			       (long long)generation, URL(b, name),
			       (long long)m.generation);
	}
	blk = malloc(IO_BLOCK);
	if (!blk) {
		close(fd);
		return err_set(e, CLOUD_ENOMEM, "out of memory");
	}
	posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
	for (;;) {
		ssize_t n = read(fd, blk, IO_BLOCK);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			r = err_errno(e, CLOUD_EIO, errno, "reading %s",
				      URL(b, name));
			break;
		}
		if (n == 0)
			break;
		crc = crc32c_update(crc, blk, (size_t)n);
		got += (uint64_t)n;
		r = sink(ud, blk, (size_t)n, e);
		if (r)
			break;
	}
	free(blk);
	close(fd);
	if (r)
		return r;
	if (got != m.size || crc != m.crc32c)
		return err_set(e, CLOUD_ECORRUPT,
			       "%s is corrupt: read %llu bytes with CRC32C "
			       "%08x, but it was stored as %llu bytes with "
			       "CRC32C %08x", URL(b, name),
			       (unsigned long long)got, crc,
			       (unsigned long long)m.size, m.crc32c);
	return fill_object(out, name, &m, e);
}

static int file_stat(struct store_backend *b, const char *name,
		     struct store_object *out, struct err *e)
{
	struct file_meta m;
	int fd;
	int r = open_object(b, name, &fd, &m, e);

	if (r)
		return r;
	close(fd);
	return fill_object(out, name, &m, e);
}

static int file_del(struct store_backend *b, const char *name,
		    int64_t if_generation_match, struct err *e)
{
	struct file_meta m;
	int fd;
	int r = reserved_name(b, name, e);

	if (!r)
		r = store_dirs(b, false, &fd, e);
	if (!r && fd < 0)
		r = err_set(e, CLOUD_ENOTFOUND, "%s does not exist",
			    URL(b, name));
	if (!r)
		r = store_dirs(b, true, &fd, e);
	if (r)
		return r;
	r = lock_store(b, e);
	if (r)
		return r;
	r = current_meta(b, name, &m, e);
	if (!r)
		r = check_precondition(b, name, &m, if_generation_match, e);
	if (!r && !m.exists)
		r = err_set(e, CLOUD_ENOTFOUND, "%s does not exist",
			    URL(b, name));
	if (!r && unlinkat(b->dirfd, name, 0) != 0)
		r = err_errno(e, CLOUD_EIO, errno, "deleting %s",
			      URL(b, name));
	if (!r) {
		remove_empty_parents(b, name);
		sync_parent(b, name);
	}
	unlock_store(b);
	return r;
}

/* ---- listing ---- */

struct list_entry {
	char *name;  /* full name; folders end with "/" */
	bool is_dir;
};

struct lister {
	struct store_backend *b;
	const char *prefix;
	size_t plen;
	const char *delim;
	size_t dlen;
	store_list_fn fn;
	void *ud;
	struct buf last; /* the last rolled-up prefix reported */
	struct err *e;
};

static int entry_cmp(const void *a, const void *b)
{
	const struct list_entry *x = a, *y = b;

	return strcmp(x->name, y->name);
}

static void entries_free(struct list_entry *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i].name);
	free(v);
}

/* Whether name (a folder "x/" or an object) can hold or be a match. */
static bool may_match(struct lister *l, const char *name, bool is_dir)
{
	size_t n = strlen(name);

	if (n >= l->plen)
		return !strncmp(name, l->prefix, l->plen);
	return is_dir && !strncmp(l->prefix, name, n);
}

/*
 * Reads one folder (rel is "" or ends with "/"), sorted as GCS sorts
 * names: a folder sorts as its name with "/" appended, so that "a.txt"
 * comes before everything in "a/".
 */
static int read_folder(struct lister *l, const char *rel,
		       struct list_entry **out, size_t *count)
{
	struct list_entry *v = NULL;
	size_t n = 0, cap = 0;
	struct dirent *de;
	DIR *d;
	int fd;

	*out = NULL;
	*count = 0;
	fd = *rel ? openat(l->b->dirfd, rel,
			   O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)
		  : dup(l->b->dirfd);
	if (fd < 0) {
		if (errno == ENOENT || errno == ENOTDIR)
			return 0;
		return err_errno(l->e, CLOUD_EIO, errno, "listing %s",
				 URL(l->b, rel));
	}
	d = fdopendir(fd);
	if (!d) {
		close(fd);
		return err_errno(l->e, CLOUD_EIO, errno, "listing %s",
				 URL(l->b, rel));
	}
	rewinddir(d);
	while ((de = readdir(d))) {
		unsigned char type = de->d_type;
		struct buf name;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (!*rel && !strcmp(de->d_name, TMP_DIR))
			continue;
		if (type == DT_UNKNOWN) {
			struct stat st;

			if (fstatat(dirfd(d), de->d_name, &st,
				    AT_SYMLINK_NOFOLLOW) != 0)
				continue;
			type = S_ISDIR(st.st_mode) ? DT_DIR
			       : S_ISREG(st.st_mode) ? DT_REG : DT_UNKNOWN;
		}
		if (type != DT_DIR && type != DT_REG)
			continue;
		buf_init(&name);
		if (buf_appendf(&name, "%s%s%s", rel, de->d_name,
				type == DT_DIR ? "/" : "")) {
			closedir(d);
			entries_free(v, n);
			return err_set(l->e, CLOUD_ENOMEM, "out of memory");
		}
		if (!may_match(l, name.data, type == DT_DIR)) {
			buf_release(&name);
			continue;
		}
		if (n == cap) {
			size_t nc = cap ? 2 * cap : 64;
			struct list_entry *nv = realloc(v, nc * sizeof(*v));

			if (!nv) {
				buf_release(&name);
				closedir(d);
				entries_free(v, n);
				return err_set(l->e, CLOUD_ENOMEM,
					       "out of memory");
			}
			v = nv;
			cap = nc;
		}
		v[n].name = buf_detach(&name);
		v[n].is_dir = type == DT_DIR;
		n++;
	}
	closedir(d);
	if (n)
		qsort(v, n, sizeof(*v), entry_cmp);
	*out = v;
	*count = n;
	return 0;
}

/* Whether any object lies under folder rel. */
static int folder_has_object(struct lister *l, const char *rel, bool *has)
{
	struct lister any = *l;
	struct list_entry *v;
	size_t n;
	int r;

	*has = false;
	any.prefix = rel;
	any.plen = strlen(rel);
	r = read_folder(&any, rel, &v, &n);
	for (size_t i = 0; !r && !*has && i < n; i++) {
		if (!v[i].is_dir)
			*has = true;
		else
			r = folder_has_object(l, v[i].name, has);
	}
	entries_free(v, n);
	return r;
}

/* Reports a rolled-up prefix once: matches come in name order, so all
 * names sharing it come one after another. */
static int roll_up(struct lister *l, const char *name, size_t len)
{
	struct store_object o;
	char *p;
	int r;

	if (l->last.data && l->last.len == len &&
	    !memcmp(l->last.data, name, len))
		return 0;
	buf_reset(&l->last);
	if (buf_append(&l->last, name, len))
		return err_set(l->e, CLOUD_ENOMEM, "out of memory");
	p = l->last.data;
	memset(&o, 0, sizeof(o));
	o.name = p;
	r = l->fn(l->ud, &o, true);
	return r;
}

/* The length of name up to and including the first delimiter after the
 * prefix, or 0. */
static size_t rolled_len(struct lister *l, const char *name)
{
	const char *d;

	if (!l->delim || strlen(name) < l->plen)
		return 0;
	d = strstr(name + l->plen, l->delim);
	return d ? (size_t)(d - name) + l->dlen : 0;
}

static int list_object(struct lister *l, const char *name)
{
	struct store_object o;
	struct file_meta m;
	int fd, r;

	r = open_object(l->b, name, &fd, &m, l->e);
	if (r == CLOUD_ENOTFOUND) {
		/* Deleted since the folder was read. */
		err_init(l->e);
		return 0;
	}
	if (r)
		return r;
	close(fd);
	r = fill_object(&o, name, &m, l->e);
	if (r)
		return r;
	r = l->fn(l->ud, &o, false);
	store_object_release(&o);
	return r;
}

static int walk(struct lister *l, const char *rel)
{
	struct list_entry *v;
	size_t n;
	int r = read_folder(l, rel, &v, &n);

	for (size_t i = 0; !r && i < n; i++) {
		const char *name = v[i].name;
		size_t roll = rolled_len(l, name);

		if (v[i].is_dir && roll && roll <= strlen(name)) {
			bool has;

			/* Everything below rolls up to the same prefix. */
			r = folder_has_object(l, name, &has);
			if (!r && has)
				r = roll_up(l, name, roll);
		} else if (v[i].is_dir) {
			r = walk(l, name);
		} else if (roll) {
			r = roll_up(l, name, roll);
		} else {
			r = list_object(l, name);
		}
	}
	entries_free(v, n);
	return r;
}

static int file_list(struct store_backend *b, const char *prefix,
		     const char *delimiter, store_list_fn fn, void *ud,
		     struct err *e)
{
	struct lister l = {
		.b = b, .prefix = prefix, .plen = strlen(prefix),
		.delim = delimiter, .dlen = delimiter ? strlen(delimiter) : 0,
		.fn = fn, .ud = ud, .e = e,
	};
	int fd;
	int r = store_dirs(b, false, &fd, e);

	if (r || fd < 0)
		return r;
	buf_init(&l.last);
	r = walk(&l, "");
	buf_release(&l.last);
	return r;
}

const struct store_ops store_file_ops = {
	.scheme = "file",
	.open = file_open,
	.close = file_close,
	.put = file_put,
	.upload_begin = file_upload_begin,
	.upload_write = file_upload_write,
	.upload_finish = file_upload_finish,
	.upload_abort = file_upload_abort,
	.get = file_get,
	.stat = file_stat,
	.list = file_list,
	.del = file_del,
};
