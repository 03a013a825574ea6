/*
 * checkpoint/ckpt_restore.c: verify and restore committed steps.
 *
 * Restore streams a part from the store into libarchive without staging
 * it: store_get pushes bytes into one end of a socket pair from its own
 * thread while libarchive pulls from the other, so memory stays bounded
 * by the socket buffers. The tree is unpacked into a fresh directory next
 * to dest (same filesystem) and renamed into place only once the whole
 * part has arrived, unpacked and matched COMMIT's size and CRC32C, so any
 * failure leaves dest as it was. The newest committed step is tried
 * first; a missing, corrupt or unsafe part falls back to the one before.
 *
 * A part is checked entry by entry before anything of the entry is
 * written: its type (files, directories, symlinks, hard links only), its
 * mode (no setuid, setgid or sticky bit), and what it claims to write
 * against what the part may expand to. A failure writing it counts as
 * the disk's only when the disk says so (full, over quota, failing);
 * anything else is the part's, which makes it a bad part like any other.
 *
 * ckpt_unpack_object uses the same machinery for any one object (a run's
 * code bundle): the same streaming, the same checks on names, the same
 * atomic swap; only COMMIT's size and CRC32C are not there to match.
 */
/* For renameat2 and RENAME_EXCHANGE: dest is swapped, never missing. */
#define _GNU_SOURCE

#include "checkpoint/ckpt_internal.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#define RESTORE_READ_BLOCK ((size_t)1 << 20)

/* Copies as much of src as fits, NUL-terminated. */
static void copy_str(char *dst, size_t cap, const char *src)
{
	size_t n = strlen(src);

	if (n >= cap)
		n = cap - 1;
	memcpy(dst, src, n);
	dst[n] = '\0';
}

static bool bad_part_error(int code)
{
	return code == CLOUD_ENOTFOUND || code == CLOUD_ECORRUPT ||
	       code == CKPT_EUNSAFE;
}

/* ---- verify ---- */

struct count_sink {
	uint64_t bytes;
	uint32_t crc;
};

static int count_fn(void *ud, const void *data, size_t len, struct err *e)
{
	struct count_sink *c = ud;

	(void)e;
	c->bytes += len;
	c->crc = crc32c_update(c->crc, data, len);
	return 0;
}

/* Compares what arrived from where (a URL, a local copy's path) with what
 * COMMIT says of the part. */
static int match_commit(const char *where, const struct ckpt_part *p,
			uint64_t bytes, uint32_t crc, struct err *e)
{
	if (bytes != p->size || crc != p->crc32c)
		return err_set(e, CLOUD_ECORRUPT,
			       "%s does not match COMMIT: %llu bytes with "
			       "CRC32C %08x, COMMIT says %llu bytes with "
			       "%08x", where,
			       (unsigned long long)bytes, crc,
			       (unsigned long long)p->size, p->crc32c);
	return 0;
}

/* 0 with *bad set when the part is missing or corrupt; an error only
 * when it could not be checked. */
static int verify_part(struct store *s, uint64_t step,
		       const struct ckpt_part *p, bool *bad, struct err *e)
{
	struct count_sink c = { 0, 0 };
	char name[CKPT_NAME_MAX];
	int r;

	*bad = false;
	ckpt_object_name(name, sizeof(name), step, p->name);
	r = store_get(s, name, p->generation, count_fn, &c, NULL, e);
	if (r == CLOUD_ENOTFOUND)
		err_set(e, r, "%s is missing (or was replaced after COMMIT "
			"named generation %lld)", store_url(s, name),
			(long long)p->generation);
	if (!r)
		r = match_commit(store_url(s, name), p, c.bytes, c.crc, e);
	if (bad_part_error(r)) {
		*bad = true;
		return 0;
	}
	return r;
}

static struct ckpt_step *find_step(struct ckpt_list *l, uint64_t step)
{
	for (size_t i = l->n; i-- > 0;)
		if (l->v[i].committed && (!step || l->v[i].step == step))
			return &l->v[i];
	return NULL;
}

static int no_step(struct store *s, uint64_t step, struct err *e)
{
	if (step)
		return err_set(e, CLOUD_ENOTFOUND,
			       "step %llu is not committed in %s (see "
			       "`slicectl ckpt ls`)", (unsigned long long)step,
			       store_url(s, CKPT_ROOT));
	return err_set(e, CLOUD_ENOTFOUND,
		       "no committed checkpoint in %s",
		       store_url(s, CKPT_ROOT));
}

int ckpt_verify(struct store *s, uint64_t step, struct ckpt_verify_result *r,
		struct err *e)
{
	struct ckpt_list l;
	struct ckpt_step *st;
	struct err pe;
	int rc;

	err_init(e);
	memset(r, 0, sizeof(*r));
	if (!s)
		return err_set(e, CKPT_EINVAL, "ckpt_verify needs a store");
	rc = ckpt_list(s, &l, e);
	if (rc)
		return rc;
	st = find_step(&l, step);
	if (!st) {
		ckpt_list_release(&l);
		return no_step(s, step, e);
	}
	r->step = st->step;
	if (st->corrupt) {
		struct ckpt_step again;

		memset(&again, 0, sizeof(again));
		err_init(&pe);
		rc = ckpt_read_manifest(s, st->step, CKPT_COMMIT, &again,
					&pe);
		ckpt_step_release(&again);
		r->parts_bad = 1;
		copy_str(r->problem, sizeof(r->problem),
			 rc ? pe.msg : "COMMIT is malformed");
		ckpt_list_release(&l);
		if (rc && !bad_part_error(rc)) {
			*e = pe;
			return rc;
		}
		return 0;
	}
	for (size_t i = 0; i < st->nparts; i++) {
		bool bad;

		err_init(&pe);
		rc = verify_part(s, st->step, &st->parts[i], &bad, &pe);
		if (rc) {
			*e = pe;
			break;
		}
		if (!bad) {
			r->parts_ok++;
			continue;
		}
		if (!r->parts_bad++)
			copy_str(r->problem, sizeof(r->problem), pe.msg);
	}
	ckpt_list_release(&l);
	return rc;
}

/* ---- restore ---- */

/* What is unpacked: one object, and when it is a step's part, what
 * COMMIT says of it. */
struct unpack_source {
	const char *name;             /* object name in the store */
	int64_t generation;           /* pinned; 0: the current one */
	const struct ckpt_part *part; /* NULL: not a checkpoint part */
	const char *what;             /* "the part", "the object" */
	const char *local;            /* read this file (a local tier's
					 copy of the part) instead */
	int64_t got_generation;       /* out: the generation unpacked */
};

struct bridge {
	struct store *s;
	const char *name;
	const char *local;  /* a file to read instead of the object */
	int64_t generation;
	int fd;             /* the writing end */
	bool reader_gone;
	_Atomic uint64_t bytes; /* read by the unpacker for its bound */
	uint32_t crc;
	struct store_object obj;
	int r;
	struct err e;
};

static int bridge_sink(void *ud, const void *data, size_t len,
		       struct err *e)
{
	struct bridge *b = ud;
	const char *p = data;

	b->bytes += len;
	b->crc = crc32c_update(b->crc, data, len);
	while (len) {
		ssize_t n = send(b->fd, p, len, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EPIPE || errno == ECONNRESET)) {
			b->reader_gone = true;
			return err_set(e, CLOUD_EABORTED,
				       "the unpacker stopped reading");
		}
		if (n < 0)
			return err_errno(e, CKPT_EIO, errno,
					 "passing the download to the "
					 "unpacker");
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* The local copy through the same sink as a download. */
static int read_local(struct bridge *b)
{
	static char chunk[1 << 20];
	int fd = open(b->local, O_RDONLY | O_CLOEXEC);
	ssize_t n = 0;
	int r = 0;

	if (fd < 0)
		return err_errno(&b->e, errno == ENOENT ? CLOUD_ENOTFOUND
							: CKPT_EIO,
				 errno, "opening %s", b->local);
	while (!r && (n = read(fd, chunk, sizeof(chunk))) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			r = err_errno(&b->e, CKPT_EIO, errno, "reading %s",
				      b->local);
		else
			r = bridge_sink(b, chunk, (size_t)n, &b->e);
	}
	close(fd);
	return r;
}

static void *bridge_main(void *ud)
{
	struct bridge *b = ud;

	err_init(&b->e);
	b->r = b->local ? read_local(b)
			: store_get(b->s, b->name, b->generation, bridge_sink,
				    b, &b->obj, &b->e);
	/* End of stream for the unpacker. */
	close(b->fd);
	b->fd = -1;
	return NULL;
}

/* Names in the archive stay inside the directory they are unpacked in.
 * libarchive's SECURE_NOABSOLUTEPATHS cannot be used because entries are
 * given the temporary directory's absolute path; this check takes its
 * place, before that prefix is added. */
static int check_entry_path(const char *path, const char *what,
			    struct err *e)
{
	const char *p = path;

	if (!path)
		return 0;
	if (path[0] == '/')
		return err_set(e, CKPT_EUNSAFE,
			       "the archive holds an absolute %s \"%s\"; "
			       "refused", what, path);
	while (*p) {
		size_t n = strcspn(p, "/");

		if (n == 2 && p[0] == '.' && p[1] == '.')
			return err_set(e, CKPT_EUNSAFE,
				       "the archive holds a %s with \"..\" "
				       "(\"%s\"); refused", what, path);
		p += n;
		while (*p == '/')
			p++;
	}
	return 0;
}

struct unpacker {
	struct archive *a;
	struct archive *w;
	struct archive_entry *entry;
	const char *tmpdir;
	const char *dest;
	const char *what;   /* "the part", for messages */
	struct buf path;
	/* What the stream may expand to: COMMIT's "unpacked" when known
	 * (exact), else CKPT_RESTORE_RATIO times the compressed size (the
	 * larger of what the store said and what arrived) plus
	 * CKPT_RESTORE_FLOOR. Both the tar bytes read and the sizes the
	 * entries claim (a sparse entry's holes included) count. */
	uint64_t exact;
	uint64_t compressed;
	const _Atomic uint64_t *received;
	uint64_t claimed;   /* sum of the entries' sizes so far */
};

static uint64_t unpack_limit(const struct unpacker *u)
{
	uint64_t c = atomic_load(u->received);

	if (u->exact)
		return u->exact;
	if (c < u->compressed)
		c = u->compressed;
	if (c > (UINT64_MAX - CKPT_RESTORE_FLOOR) / CKPT_RESTORE_RATIO)
		return UINT64_MAX;
	return c * CKPT_RESTORE_RATIO + CKPT_RESTORE_FLOOR;
}

static int too_big(struct unpacker *u, const char *path, uint64_t n,
		   const char *how, struct err *e)
{
	return err_set(e, CLOUD_ECORRUPT,
		       "%s expands beyond %s: at \"%s\", %s %llu bytes, "
		       "more than the %llu it may unpack to; refused",
		       u->what, u->exact ? "the size COMMIT records for it"
					 : "any plausible compression ratio",
		       path, how, (unsigned long long)n,
		       (unsigned long long)unpack_limit(u));
}

/* The tar bytes read so far stay within the bound. */
static int check_read(struct unpacker *u, const char *path, struct err *e)
{
	la_int64_t n = archive_filter_bytes(u->a, 0);

	if (n > 0 && (uint64_t)n > unpack_limit(u))
		return too_big(u, path, (uint64_t)n, "its tar stream reached",
			       e);
	return 0;
}

/* The file size limit (ulimit -f), or 0 when there is none. */
static uint64_t fsize_limit(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_FSIZE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY)
		return 0;
	return (uint64_t)rl.rlim_cur;
}

/*
 * A failure writing path. Only what the disk itself says (full, over
 * quota, failing, read-only, out of descriptors) is the disk's problem,
 * kept apart so that restore does not fall back over it; anything else
 * comes from what the part holds, which makes it a bad part.
 */
static int disk_error(struct unpacker *u, const char *path, struct err *e)
{
	int errnum = archive_errno(u->w);
	const char *msg = archive_error_string(u->w);
	uint64_t fsize;

	if (!msg)
		msg = "unknown error";
	switch (errnum) {
	case ENOSPC:
	case EDQUOT:
		return err_set(e, CLOUD_ENOSPACE,
			       "restoring into %s: the disk is full (%s); "
			       "free space there and restore again (%s is "
			       "unchanged)", u->dest, path, u->dest);
	case EFBIG:
		fsize = fsize_limit();
		if (!fsize)
			return err_set(e, CLOUD_ENOSPACE,
				       "restoring into %s: its filesystem "
				       "cannot hold %s, of %lld bytes (%s is "
				       "unchanged)", u->dest, path,
				       (long long)archive_entry_size(u->entry),
				       u->dest);
		/* The limit is to blame only when the entry itself claims
		 * more; writing past its own claim is the part's fault. */
		if ((uint64_t)archive_entry_size(u->entry) > fsize)
			return err_set(e, CLOUD_ENOSPACE,
				       "restoring into %s: %s holds %lld "
				       "bytes, over the file size limit of "
				       "%llu; raise it (ulimit -f) and "
				       "restore again (%s is unchanged)",
				       u->dest, path,
				       (long long)archive_entry_size(u->entry),
				       (unsigned long long)fsize, u->dest);
		return err_set(e, CLOUD_ECORRUPT,
			       "%s cannot be restored: \"%s\" writes beyond "
			       "the %lld bytes it claims (%s); refused",
			       u->what, path,
			       (long long)archive_entry_size(u->entry), msg);
	case ENOMEM:
		return err_set(e, CKPT_ENOMEM, "out of memory restoring %s",
			       path);
	case EIO:
	case EROFS:
	case EMFILE:
	case ENFILE:
		return err_set(e, CKPT_EIO, "restoring %s into %s: %s", path,
			       u->dest, msg);
	default:
		break;
	}
	if (strstr(msg, "symlink") || strstr(msg, ".."))
		return err_set(e, CKPT_EUNSAFE,
			       "the archive would write %s through a symlink "
			       "or outside %s; refused (%s)", path, u->dest,
			       msg);
	return err_set(e, CLOUD_ECORRUPT, "%s cannot be restored: \"%s\": %s",
		       u->what, path, msg);
}

static int copy_data(struct unpacker *u, const char *path, struct err *e)
{
	la_int64_t size = archive_entry_size(u->entry);

	for (;;) {
		const void *block;
		size_t len;
		la_int64_t off;
		int r = archive_read_data_block(u->a, &block, &len, &off);

		if (r == ARCHIVE_EOF)
			return 0;
		if (r != ARCHIVE_OK)
			return err_set(e, CLOUD_ECORRUPT,
				       "%s is not a valid tar+zstd stream: %s",
				       u->what, archive_error_string(u->a));
		if (off < 0 || off > size || (la_int64_t)len > size - off)
			return err_set(e, CLOUD_ECORRUPT,
				       "%s cannot be restored: \"%s\" has "
				       "data at %lld, outside its %lld bytes; "
				       "refused", u->what, path,
				       (long long)off, (long long)size);
		r = check_read(u, path, e);
		if (r)
			return r;
		if (archive_write_data_block(u->w, block, len, off) !=
		    ARCHIVE_OK)
			return disk_error(u, path, e);
	}
}

/* Checkpoints hold files, directories and symlinks (pack_tree skips the
 * rest); anything else in a part was put there by someone else. */
static int check_entry_type(struct unpacker *u, const char *path,
			    struct err *e)
{
	static const struct {
		mode_t type;
		const char *name;
	} refused[] = {
		{ AE_IFBLK, "a block device" },
		{ AE_IFCHR, "a character device" },
		{ AE_IFIFO, "a fifo" },
		{ AE_IFSOCK, "a socket" },
	};
	mode_t type = archive_entry_filetype(u->entry);

	if (type == AE_IFREG || type == AE_IFDIR || type == AE_IFLNK ||
	    (type == 0 && archive_entry_hardlink(u->entry)))
		return 0;
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++)
		if (type == refused[i].type)
			return err_set(e, CKPT_EUNSAFE,
				       "%s holds %s, \"%s\"; checkpoints hold "
				       "only files, directories and symlinks: "
				       "refused", u->what, refused[i].name,
				       path);
	return err_set(e, CKPT_EUNSAFE,
		       "%s holds \"%s\" of unknown type %06o; refused",
		       u->what, path, (unsigned)type);
}

/* A hard link's target must already be in the tree: a file, or (without
 * data, as pack_tree writes a symlink's second name) a symlink. Data on
 * a link to anything but a file would be dropped without a word. */
static int check_hardlink(struct unpacker *u, const char *path,
			  const char *link, struct err *e)
{
	struct stat st;

	if (fstatat(AT_FDCWD, link, &st, AT_SYMLINK_NOFOLLOW) != 0)
		return err_set(e, CLOUD_ECORRUPT,
			       "%s cannot be restored: \"%s\" is a hard link "
			       "to \"%s\", which is not in the archive "
			       "before it", u->what, path,
			       link + strlen(u->tmpdir) + 1);
	if (S_ISREG(st.st_mode) ||
	    (S_ISLNK(st.st_mode) && archive_entry_size(u->entry) <= 0))
		return 0;
	return err_set(e, CLOUD_ECORRUPT,
		       "%s cannot be restored: \"%s\" is a hard link %sto "
		       "\"%s\", which is a %s; refused", u->what, path,
		       archive_entry_size(u->entry) > 0 ? "carrying data "
							: "",
		       link + strlen(u->tmpdir) + 1,
		       S_ISLNK(st.st_mode) ? "symlink" : S_ISDIR(st.st_mode)
		       ? "directory" : "special file");
}

/* What an entry claims to write, against the bound, before any of it is
 * written: a sparse entry of 2^62 bytes is refused here, not by a seek
 * that fails half-way. */
static int check_claim(struct unpacker *u, const char *path, struct err *e)
{
	la_int64_t size = archive_entry_size(u->entry);
	uint64_t limit = unpack_limit(u);

	if (size < 0)
		return err_set(e, CLOUD_ECORRUPT,
			       "%s cannot be restored: \"%s\" has a negative "
			       "size", u->what, path);
	if ((uint64_t)size > limit || u->claimed > limit - (uint64_t)size)
		return too_big(u, path, u->claimed + (uint64_t)size,
			       "its entries claim", e);
	u->claimed += (uint64_t)size;
	return check_read(u, path, e);
}

static int unpack_entry(struct unpacker *u, struct err *e)
{
	const char *path = archive_entry_pathname(u->entry);
	const char *link = archive_entry_hardlink(u->entry);
	int r;

	r = check_entry_path(path, "name", e);
	if (!r)
		r = check_entry_path(link, "hard link target", e);
	if (r)
		return r;
	while (path && path[0] == '.' && path[1] == '/')
		path += 2;
	if (!path || !*path || !strcmp(path, "."))
		return 0;
	buf_reset(&u->path);
	if (buf_appendf(&u->path, "%s/%s", u->tmpdir, path))
		return err_set(e, CKPT_ENOMEM, "out of memory");
	archive_entry_copy_pathname(u->entry, u->path.data);
	/* The entry's own copy of the name is gone: use ours. */
	path = u->path.data + strlen(u->tmpdir) + 1;
	r = check_entry_type(u, path, e);
	if (!r)
		r = check_claim(u, path, e);
	if (r)
		return r;
	/* Owners are never restored (no ARCHIVE_EXTRACT_OWNER); setuid,
	 * setgid and sticky bits are dropped even for root. */
	archive_entry_set_perm(u->entry, archive_entry_perm(u->entry) & 0777);
	if (link) {
		struct buf target;

		buf_init(&target);
		if (buf_appendf(&target, "%s/%s", u->tmpdir, link)) {
			buf_release(&target);
			return err_set(e, CKPT_ENOMEM, "out of memory");
		}
		r = check_hardlink(u, path, target.data, e);
		if (!r)
			archive_entry_copy_hardlink(u->entry, target.data);
		buf_release(&target);
		if (r)
			return r;
	}
	r = archive_write_header(u->w, u->entry);
	if (r == ARCHIVE_WARN)
		log_warn("restoring %s: %s", path,
			 archive_error_string(u->w));
	else if (r != ARCHIVE_OK)
		return disk_error(u, path, e);
	if (archive_entry_size(u->entry) > 0) {
		r = copy_data(u, path, e);
		if (r)
			return r;
	}
	if (archive_write_finish_entry(u->w) < ARCHIVE_WARN)
		return disk_error(u, path, e);
	return 0;
}

static int unpack_all(struct unpacker *u, int fd, struct err *e)
{
	int flags = ARCHIVE_EXTRACT_TIME | ARCHIVE_EXTRACT_PERM |
		    ARCHIVE_EXTRACT_SECURE_SYMLINKS |
		    ARCHIVE_EXTRACT_SECURE_NODOTDOT;
	int r;

	u->a = archive_read_new();
	u->w = archive_write_disk_new();
	if (!u->a || !u->w)
		return err_set(e, CKPT_ENOMEM, "out of memory");
	if (archive_read_support_filter_zstd(u->a) != ARCHIVE_OK ||
	    archive_read_support_format_tar(u->a) != ARCHIVE_OK ||
	    archive_write_disk_set_options(u->w, flags) != ARCHIVE_OK)
		return err_set(e, CKPT_EIO, "setting up the unpacker: %s",
			       archive_error_string(u->a));
	if (archive_read_open_fd(u->a, fd, RESTORE_READ_BLOCK) != ARCHIVE_OK)
		return err_set(e, CLOUD_ECORRUPT,
			       "%s is not a tar+zstd stream: %s", u->what,
			       archive_error_string(u->a));
	for (;;) {
		r = archive_read_next_header(u->a, &u->entry);
		if (r == ARCHIVE_EOF)
			break;
		if (r == ARCHIVE_WARN)
			log_warn("restoring: %s", archive_error_string(u->a));
		else if (r != ARCHIVE_OK)
			return err_set(e, CLOUD_ECORRUPT,
				       "%s is not a valid tar+zstd stream: %s",
				       u->what, archive_error_string(u->a));
		r = unpack_entry(u, e);
		if (r)
			return r;
	}
	/* Directory modes and times are set here, last. */
	if (archive_write_close(u->w) != ARCHIVE_OK)
		return disk_error(u, "directories", e);
	return 0;
}

/* Reads what libarchive left unread (the end of the zstd frame), so the
 * download completes and its CRC32C is checked. */
static void drain(int fd)
{
	char block[16384];
	ssize_t n;

	do
		n = read(fd, block, sizeof(block));
	while (n > 0 || (n < 0 && errno == EINTR));
}

/* Streams src's object into tmpdir (dest is named in messages). */
static int unpack_stream(struct store *s, struct unpack_source *src,
			 const char *tmpdir, const char *dest, struct err *e)
{
	const struct ckpt_part *p = src->part;
	const char *name = src->name;
	struct bridge b;
	struct unpacker u;
	pthread_t thread;
	int sv[2];
	int r;

	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0)
		return err_errno(e, CKPT_EIO, errno, "socketpair");
	/* Large socket buffers let the download run ahead of the unpacking
	 * by a few megabytes instead of switching threads every 200 KB. */
	for (int i = 0; i < 2; i++) {
		int size = 4 << 20;

		setsockopt(sv[i], SOL_SOCKET, i ? SO_SNDBUF : SO_RCVBUF, &size,
			   sizeof(size));
	}
	memset(&b, 0, sizeof(b));
	b.s = s;
	b.name = name;
	b.local = src->local;
	b.generation = src->generation;
	b.fd = sv[1];
	r = thread_start(&thread, bridge_main, &b);
	if (r) {
		close(sv[0]);
		close(sv[1]);
		return err_errno(e, CKPT_EIO, r, "starting the download");
	}
	memset(&u, 0, sizeof(u));
	u.tmpdir = tmpdir;
	u.dest = dest;
	u.what = src->what;
	u.received = &b.bytes;
	if (p) {
		u.exact = p->unpacked;
		u.compressed = p->size;
	}
	buf_init(&u.path);
	r = unpack_all(&u, sv[0], e);
	if (u.a)
		archive_read_free(u.a);
	if (u.w)
		archive_write_free(u.w);
	buf_release(&u.path);
	if (!r)
		drain(sv[0]);
	/* A reader that stopped early makes the writer fail, not wait. */
	close(sv[0]);
	pthread_join(thread, NULL);

	/* The download's own failure explains a broken stream best (and
	 * names the object already). */
	if (b.r && !b.reader_gone) {
		*e = b.e;
		r = b.r;
	} else if (!r && p) {
		r = match_commit(src->local ? src->local : store_url(s, name),
				 p, b.bytes, b.crc, e);
	} else if (r == CKPT_EUNSAFE || r == CLOUD_ECORRUPT) {
		/* The unpacker's: say which object. */
		err_prefix(e, "%s", src->local ? src->local
					       : store_url(s, name));
	}
	if (!r)
		src->got_generation = b.obj.generation;
	store_object_release(&b.obj);
	if (r == CLOUD_ENOTFOUND && p)
		err_set(e, r, "%s is missing (or was replaced after COMMIT "
			"named generation %lld)", store_url(s, name),
			(long long)p->generation);
	return r;
}

static void remove_tree(const char *path)
{
	int r = fs_remove_tree(path);

	if (r)
		log_warn("could not remove all of %s (%s); remove it by hand",
			 path, strerror(r));
}

/* dest as the folder holding it and its base name, refusing what cannot
 * be replaced by a directory: ".", "..", and "/" itself. */
static int dest_names(const char *dest, char *dir, size_t cap, char *base,
		      struct err *e)
{
	size_t len = strlen(dest);
	char *slash;

	while (len > 1 && dest[len - 1] == '/')
		len--;
	if (!len || len >= cap)
		return err_set(e, CKPT_EINVAL, "bad restore destination "
			       "\"%s\"", dest);
	memcpy(dir, dest, len);
	dir[len] = '\0';
	slash = strrchr(dir, '/');
	if (!slash) {
		copy_str(base, NAME_MAX + 1, dir);
		copy_str(dir, cap, ".");
	} else {
		copy_str(base, NAME_MAX + 1, slash + 1);
		if (slash == dir)
			slash[1] = '\0';
		else
			*slash = '\0';
	}
	if (!*base || !strcmp(base, ".") || !strcmp(base, ".."))
		return err_set(e, CKPT_EINVAL,
			       "restore destination \"%s\" must name a "
			       "directory to create or replace", dest);
	return 0;
}

/* dest as parent (without symlinks, so that SECURE_SYMLINKS judges only
 * the archive's own names) and base name. */
static int split_dest(const char *dest, char *parent, char *base,
		      struct err *e)
{
	char tmp[PATH_MAX];
	int errnum, r = dest_names(dest, tmp, sizeof(tmp), base, e);

	if (!r && (errnum = fs_mkdir_p(tmp, 0755, e)) != 0)
		/* e->code is CKPT_EIO or CKPT_ENOMEM: common's codes. */
		r = errnum == ENOSPC ? (e->code = CLOUD_ENOSPACE) : e->code;
	if (r)
		return r;
	if (!realpath(tmp, parent))
		return err_errno(e, CKPT_EIO, errno, "resolving %s", tmp);
	return 0;
}

/* Refuses a destination that can never work before the store is read. */
static int check_dest(const char *dest, struct err *e)
{
	char dir[PATH_MAX], base[NAME_MAX + 1];

	return dest_names(dest, dir, sizeof(dir), base, e);
}

/* Puts the unpacked tree in dest's place; dest is never missing while a
 * directory of that name is being replaced. */
static int swap_in(const char *tmpdir, const char *target, bool exists,
		   struct err *e)
{
	char aside[PATH_MAX + NAME_MAX + 64];

	if (!exists) {
		if (rename(tmpdir, target) != 0)
			return err_errno(e, CKPT_EIO, errno,
					 "moving the restored tree to %s",
					 target);
		return 0;
	}
	if (renameat2(AT_FDCWD, tmpdir, AT_FDCWD, target,
		      RENAME_EXCHANGE) == 0) {
		remove_tree(tmpdir);
		return 0;
	}
	if (errno != EINVAL && errno != ENOSYS)
		return err_errno(e, CKPT_EIO, errno,
				 "moving the restored tree to %s", target);
	/* No atomic exchange on this filesystem: aside, in, drop. */
	snprintf(aside, sizeof(aside), "%s.old", tmpdir);
	if (rename(target, aside) != 0)
		return err_errno(e, CKPT_EIO, errno, "moving %s aside",
				 target);
	if (rename(tmpdir, target) != 0) {
		int errnum = errno;

		rename(aside, target);
		return err_errno(e, CKPT_EIO, errnum,
				 "moving the restored tree to %s", target);
	}
	remove_tree(aside);
	return 0;
}

/* Unpacks src's object into a fresh sibling of dest, then swaps it into
 * dest's place; on any failure dest is as it was. */
static int unpack_into(struct store *s, struct unpack_source *src,
		       const char *dest, struct err *e)
{
	char parent[PATH_MAX], base[NAME_MAX + 1];
	char tmpdir[PATH_MAX + NAME_MAX + 32], target[PATH_MAX + NAME_MAX + 2];
	struct stat st;
	bool exists;
	mode_t mode = 0755;
	int r;

	r = split_dest(dest, parent, base, e);
	if (r)
		return r;
	snprintf(target, sizeof(target), "%s/%s",
		 strcmp(parent, "/") ? parent : "", base);
	exists = lstat(target, &st) == 0;
	if (exists && !S_ISDIR(st.st_mode))
		return err_set(e, CKPT_EINVAL,
			       "%s exists and is not a directory; move it "
			       "away or restore elsewhere", dest);
	if (exists)
		mode = st.st_mode & 07777;
	snprintf(tmpdir, sizeof(tmpdir), "%s/.%s.restore-XXXXXX",
		 strcmp(parent, "/") ? parent : "", base);
	if (!mkdtemp(tmpdir))
		return err_errno(e, errno == ENOSPC ? CLOUD_ENOSPACE : CKPT_EIO,
				 errno, "creating a directory next to %s",
				 dest);
	r = unpack_stream(s, src, tmpdir, dest, e);
	if (!r && chmod(tmpdir, mode) != 0)
		r = err_errno(e, CKPT_EIO, errno, "chmod %s", tmpdir);
	if (!r)
		r = swap_in(tmpdir, target, exists, e);
	if (r)
		remove_tree(tmpdir);
	return r;
}

/* No local copy: asks the peer tier for one, into path. */
static bool fetch_from_peer(const struct ckpt_restore_options *o,
			    uint64_t step, const char *part,
			    const struct ckpt_part *p, const char *local_dir,
			    const char *path, struct stat *st)
{
	struct err e;

	if (!o->fetch)
		return false;
	err_init(&e);
	if (ckpt_local_mkdir(local_dir, step, &e) ||
	    o->fetch(o->fetch_ud, step, part, p->size, p->crc32c, path, &e)) {
		log_warn("step %llu: no copy from a peer: %s; reading the "
			 "bucket's", (unsigned long long)step, e.msg);
		return false;
	}
	if (stat(path, st))
		return false;
	if (o->from_peer)
		*o->from_peer = true;
	return true;
}

/* The local tier's copy of p, when there is one of COMMIT's size: true
 * when it was unpacked into dest. One that fails for what it holds is
 * deleted (the store's is read instead); *r gets any other failure (a
 * full disk: the store's would fail alike). *peer: the copy was a peer's,
 * fetched for want of one; *dropped: a copy of this host's own was
 * deleted (the partner's may still be good). */
static bool restore_local(struct store *s, const char *dest, uint64_t step,
			  const struct ckpt_part *p,
			  const struct ckpt_restore_options *o, bool *peer,
			  bool *dropped, int *r, struct err *e)
{
	const char *local_dir = o->local_dir;
	char path[PATH_MAX], part[256];
	size_t n = strlen(p->name) - strlen(CKPT_PART_SUFFIX);
	struct unpack_source src = { .name = p->name, .part = p,
				     .what = "the local copy", .local = path };
	struct stat st;

	snprintf(part, sizeof(part), "%.*s", (int)n, p->name);
	ckpt_local_path(path, sizeof(path), local_dir, step, part);
	if (stat(path, &st) || !S_ISREG(st.st_mode)) {
		if (!fetch_from_peer(o, step, part, p, local_dir, path, &st))
			return false;
		*peer = true;
	}
	if ((uint64_t)st.st_size != p->size) {
		log_warn("local copy %s has %lld bytes, COMMIT says %llu: "
			 "deleting it", path, (long long)st.st_size,
			 (unsigned long long)p->size);
		unlink(path);
		*dropped = !*peer;
		return false;
	}
	*r = unpack_into(s, &src, dest, e);
	if (!*r) {
		log_info("restored step %llu from the local copy %s (no byte "
			 "of it read from %s)", (unsigned long long)step, path,
			 store_url(s, ""));
		return true;
	}
	if (!bad_part_error(*r))
		return true;
	log_warn("local copy does not verify: %s; deleting it", e->msg);
	unlink(path);
	*dropped = !*peer;
	err_init(e);
	*r = 0;
	return false;
}

static int restore_part(struct store *s, const char *dest, uint64_t step,
			bool fast, const struct ckpt_part *p,
			const struct ckpt_restore_options *o, struct err *e)
{
	char name[CKPT_NAME_MAX];
	struct unpack_source src = { .name = name,
				     .generation = p->generation,
				     .part = p,
				     .what = "the part" };
	bool peer = false, dropped = false, done = false;
	int r = 0;

	if (o->local_dir)
		done = restore_local(s, dest, step, p, o, &peer, &dropped, &r,
				     e);
	/* This host's own copy was bad: its partner's is the next best. */
	if (!done && dropped && o->fetch)
		done = restore_local(s, dest, step, p, o, &peer, &dropped, &r,
				     e);
	if (done) {
		if (!r && o->from_local)
			*o->from_local = !peer;
		return r;
	}
	if (fast)
		return err_set(e, CLOUD_ENOTFOUND, "step %llu lives on the fast "
			       "tiers alone (--persist-every) and neither this "
			       "host's local tier%s holds a copy of %s that "
			       "matches FAST: an older step must be restored",
			       (unsigned long long)step,
			       o->fetch ? " nor its partner" : "", p->name);
	if (o->local_dir)
		log_info("step %llu: reading the bucket's part",
			 (unsigned long long)step);
	if (o->from_peer)
		*o->from_peer = false;
	ckpt_object_name(name, sizeof(name), step, p->name);
	return unpack_into(s, &src, dest, e);
}

int ckpt_unpack_object(struct store *s, const char *name, const char *dest,
		       int64_t *generation, struct err *e)
{
	struct unpack_source src = { .name = name, .what = "the object" };
	int r;

	err_init(e);
	if (generation)
		*generation = 0;
	if (!s || !name || !*name || !dest || !*dest)
		return err_set(e, CKPT_EINVAL,
			       "ckpt_unpack_object needs a store, an object "
			       "name and a destination");
	r = check_dest(dest, e);
	if (r)
		return r;
	r = unpack_into(s, &src, dest, e);
	if (r)
		return r;
	if (generation)
		*generation = src.got_generation;
	log_info("unpacked %s (generation %lld) into %s", store_url(s, name),
		 (long long)src.got_generation, dest);
	return 0;
}

static const struct ckpt_part *choose_part(const struct ckpt_step *st,
					   const char *want)
{
	char leaf[256];

	if (!want && st->nparts == 1)
		return &st->parts[0];
	snprintf(leaf, sizeof(leaf), "%s" CKPT_PART_SUFFIX,
		 want ? want : CKPT_DEFAULT_PART);
	for (size_t i = 0; i < st->nparts; i++)
		if (!strcmp(st->parts[i].name, leaf))
			return &st->parts[i];
	return NULL;
}

static int restore_step(struct store *s, const char *dest,
			const struct ckpt_step *st,
			const struct ckpt_restore_options *o, struct err *e)
{
	const char *want = o->part;
	const struct ckpt_part *p = choose_part(st, want);

	if (!p)
		return err_set(e, CLOUD_ENOTFOUND,
			       "step %llu has no part %s" CKPT_PART_SUFFIX
			       " (it has %zu parts; pick one with --part)",
			       (unsigned long long)st->step,
			       want ? want : CKPT_DEFAULT_PART, st->nparts);
	return restore_part(s, dest, st->step, st->fast, p, o, e);
}

int ckpt_restore(struct store *s, const char *dest,
		 const struct ckpt_restore_options *o, uint64_t *restored,
		 struct err *e)
{
	struct ckpt_restore_options defaults = { .step = 0 };
	struct ckpt_list l;
	struct err first;
	int first_code = 0;
	int r;

	err_init(e);
	err_init(&first);
	if (restored)
		*restored = 0;
	if (!o)
		o = &defaults;
	if (o->from_local)
		*o->from_local = false;
	if (o->from_peer)
		*o->from_peer = false;
	if (!s || !dest || !*dest)
		return err_set(e, CKPT_EINVAL,
			       "ckpt_restore needs a store and a destination");
	r = check_dest(dest, e);
	if (r)
		return r;
	r = ckpt_list(s, &l, e);
	if (r)
		return r;
	for (size_t i = l.n; i-- > 0;) {
		struct ckpt_step *st = &l.v[i];

		/* A fast step only when asked for: whether its holders are
		 * live is ckpt_choose_step's to say. */
		if (!(st->committed || (st->fast && o->step)) ||
		    (o->step && st->step != o->step))
			continue;
		if (st->corrupt) {
			err_set(e, CLOUD_ECORRUPT, "step %llu has a malformed "
				"COMMIT", (unsigned long long)st->step);
		} else {
			r = restore_step(s, dest, st, o, e);
			if (!r) {
				if (restored)
					*restored = st->step;
				log_info("restored step %llu into %s",
					 (unsigned long long)st->step, dest);
				ckpt_list_release(&l);
				return 0;
			}
			if (!bad_part_error(r) || o->step) {
				ckpt_list_release(&l);
				return r;
			}
		}
		log_warn("step %llu cannot be restored: %s; trying an older "
			 "step", (unsigned long long)st->step, e->msg);
		if (!first_code) {
			first = *e;
			first_code = e->code;
		}
	}
	ckpt_list_release(&l);
	if (first_code) {
		*e = first;
		err_prefix(e, "no committed step could be restored; the "
			   "newest failed");
		return first_code;
	}
	return no_step(s, o->step, e);
}
