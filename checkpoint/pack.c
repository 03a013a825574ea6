/*
 * checkpoint/pack.c: a directory (or one file) as a pax tar inside a zstd
 * frame with a content checksum, made in one pass over the tree and handed
 * to the caller's writer as it is compressed.
 *
 * libarchive walks the tree (symlinks stored, not followed) and writes the
 * tar headers; file contents are read here in large blocks; the tar stream
 * goes straight from libarchive into libzstd, not through a libarchive
 * filter, because libarchive 3.6's zstd filter cannot turn on content
 * checksums. Memory is bounded whatever the tree holds: one read block, one
 * output block, and zstd's workers, capped in number so that their buffers
 * fit PACK_ZSTD_BUDGET. A small tree costs little more than its size: the
 * start of the tar stream is held back, and a stream that ends within it
 * is compressed in one call, on this thread, by a context sized to it.
 */

/* For ZSTD_estimateCCtxSize and ZSTD_getCParams, used only to size the
 * worker pool; Debian's shared libzstd exports them. */
#define ZSTD_STATIC_LINKING_ONLY

#include "checkpoint/checkpoint.h"
#include "checkpoint/pack_test.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <langinfo.h>
#include <locale.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>
#include <zstd_errors.h>

#define PACK_READ_BLOCK ((size_t)1 << 20)
#define PACK_OUT_BLOCK ((size_t)1 << 20)
/* GNU tar and bsdtar write whole records of this size; readers that
 * check for it stay quiet. */
#define TAR_RECORD 10240u
/* What zstd's buffers may take, leaving room for ours under 256 MB. */
#define PACK_ZSTD_BUDGET ((size_t)192 << 20)
/* Smaller than zstd's default job (4 windows) so that more workers fit the
 * budget; compression ratio is the same for checkpoint data. */
#define PACK_JOB_MIN ((size_t)4 << 20)
/* Tar bytes held before compression starts: a stream that ends within
 * them never starts zstd's workers, whose buffers (PACK_JOB_MIN each and
 * more) dwarf it; one that goes on pays one copy of them. */
#define PACK_HOLD_MAX ((size_t)1 << 20)

void (*pack_test_before_data)(const char *path);

/* The compressed side: tar bytes in, zstd blocks out to the writer. */
struct zsink {
	ZSTD_CCtx *cctx;
	unsigned workers; /* for a stream longer than PACK_HOLD_MAX */
	size_t job;
	struct buf held;  /* the stream's start, until compression starts */
	bool started;
	unsigned char *out;
	size_t out_cap;
	size_t out_pos;
	pack_write_fn write;
	void *ud;
	uint64_t tar_bytes;
	uint64_t bytes_out;
	/* A failure inside a libarchive callback, reported after libarchive
	 * returns; libarchive itself only learns "-1". */
	struct err err;
	/* Set once the pack has failed: nothing more reaches the writer. */
	bool stopped;
};

struct packer {
	struct zsink sink;
	struct archive *disk;
	struct archive *tar;
	struct archive_entry_linkresolver *links;
	struct archive_entry *entry;
	unsigned char *block; /* as large as the largest file read, up to
				 PACK_READ_BLOCK */
	size_t block_cap;
	struct buf name;
	char *src;        /* as given, without trailing slashes */
	size_t prefix;    /* bytes of an entry's path that name src */
	bool single_file;
	bool at_root;
	struct pack_stats stats;
};

void pack_options_init(struct pack_options *o)
{
	o->level = 3;
	o->threads = 0;
}

static int zstd_fail(struct err *e, size_t code, const char *what)
{
	if (ZSTD_getErrorCode(code) == ZSTD_error_memory_allocation)
		return err_set(e, CKPT_ENOMEM, "zstd %s: out of memory", what);
	return err_set(e, CKPT_EIO, "zstd %s failed: %s", what,
		       ZSTD_getErrorName(code));
}

/*
 * zstd's multi-threaded compressor holds, per worker, a compression context
 * and about two jobs of input and output, plus two jobs of slack. One
 * worker per CPU on a large TPU host would take gigabytes, so the count is
 * capped to fit the budget. With no threading in libzstd, 0 workers.
 */
static unsigned zstd_workers(int level, unsigned threads, size_t *job)
{
	ZSTD_bounds b = ZSTD_cParam_getBounds(ZSTD_c_nbWorkers);
	ZSTD_compressionParameters cp;
	size_t per, cap;
	unsigned want = threads;

	*job = 0;
	if (ZSTD_isError(b.error) || b.upperBound < 1)
		return 0;
	if (!want) {
		long n = sysconf(_SC_NPROCESSORS_ONLN);
		want = n > 0 ? (unsigned)n : 1;
	}
	cp = ZSTD_getCParams(level, ZSTD_CONTENTSIZE_UNKNOWN, 0);
	*job = (size_t)1 << cp.windowLog;
	if (*job < PACK_JOB_MIN)
		*job = PACK_JOB_MIN;
	per = ZSTD_estimateCCtxSize(level) + 2 * *job;
	cap = PACK_ZSTD_BUDGET > 2 * *job
		      ? (PACK_ZSTD_BUDGET - 2 * *job) / per : 1;
	if (cap < 1)
		cap = 1;
	if (cap > (size_t)b.upperBound)
		cap = (size_t)b.upperBound;
	if (want > cap) {
		log_debug("pack: %u zstd workers asked, %zu used to stay "
			  "within %zu MiB at level %d", want, cap,
			  PACK_ZSTD_BUDGET >> 20, level);
		want = (unsigned)cap;
	}
	return want;
}

static int zsink_init(struct zsink *z, const struct pack_options *o,
		      pack_write_fn write, void *ud, struct err *e)
{
	size_t r;

	memset(z, 0, sizeof(*z));
	err_init(&z->err);
	buf_init(&z->held);
	z->write = write;
	z->ud = ud;
	z->workers = zstd_workers(o->level, o->threads, &z->job);
	z->cctx = ZSTD_createCCtx();
	if (!z->cctx)
		return err_set(e, CKPT_ENOMEM,
			       "out of memory setting up zstd compression");
	r = ZSTD_CCtx_setParameter(z->cctx, ZSTD_c_compressionLevel,
				   o->level);
	if (!ZSTD_isError(r))
		r = ZSTD_CCtx_setParameter(z->cctx, ZSTD_c_checksumFlag, 1);
	if (ZSTD_isError(r))
		return zstd_fail(e, r, "setup");
	return 0;
}

/* Before the first byte is compressed: the whole stream is the held
 * bytes (whole), so zstd sizes its window and tables to them and works
 * on this thread, or it is longer and gets the workers. */
static int zsink_start(struct zsink *z, bool whole, struct err *e)
{
	size_t r = 0;

	z->started = true;
	z->out_cap = PACK_OUT_BLOCK;
	if (whole) {
		r = ZSTD_CCtx_setPledgedSrcSize(z->cctx, z->held.len);
		if (ZSTD_compressBound(z->held.len) < z->out_cap)
			z->out_cap = ZSTD_compressBound(z->held.len);
	} else if (z->workers) {
		r = ZSTD_CCtx_setParameter(z->cctx, ZSTD_c_nbWorkers,
					   (int)z->workers);
		if (!ZSTD_isError(r))
			r = ZSTD_CCtx_setParameter(z->cctx, ZSTD_c_jobSize,
						   (int)z->job);
	}
	if (ZSTD_isError(r))
		return zstd_fail(e, r, "setup");
	z->out = malloc(z->out_cap);
	if (!z->out)
		return err_set(e, CKPT_ENOMEM,
			       "out of memory setting up zstd compression");
	return 0;
}

static void zsink_release(struct zsink *z)
{
	ZSTD_freeCCtx(z->cctx);
	free(z->out);
	buf_release(&z->held);
	z->cctx = NULL;
	z->out = NULL;
}

static int zsink_deliver(struct zsink *z, struct err *e)
{
	int r;

	if (!z->out_pos)
		return 0;
	err_init(e);
	r = z->write(z->ud, z->out, z->out_pos, e);
	if (r) {
		if (!e->msg[0])
			err_set(e, CKPT_EWRITE,
				"the writer of the packed stream failed "
				"(error %d)", r);
		e->code = CKPT_EWRITE;
		return CKPT_EWRITE;
	}
	z->bytes_out += z->out_pos;
	z->out_pos = 0;
	return 0;
}

/* Compresses len bytes; with ZSTD_e_end, also ends the frame. The writer
 * sees only full output blocks, and the last one. */
static int zsink_compress(struct zsink *z, const void *data, size_t len,
			  ZSTD_EndDirective end, struct err *e)
{
	ZSTD_inBuffer in = { data, len, 0 };

	for (;;) {
		ZSTD_outBuffer out = { z->out, z->out_cap, z->out_pos };
		size_t left = ZSTD_compressStream2(z->cctx, &out, &in, end);
		bool done;
		int r;

		z->out_pos = out.pos;
		if (ZSTD_isError(left))
			return zstd_fail(e, left, "compression");
		done = end == ZSTD_e_end ? left == 0 : in.pos == in.size;
		if (z->out_pos == z->out_cap ||
		    (done && end == ZSTD_e_end)) {
			r = zsink_deliver(z, e);
			if (r)
				return r;
		}
		if (done)
			return 0;
	}
}

/* zsink_compress, once the stream is known to end within PACK_HOLD_MAX
 * bytes or to go beyond them: until then the bytes are held. */
static int zsink_put(struct zsink *z, const void *data, size_t len,
		     ZSTD_EndDirective end, struct err *e)
{
	bool fits = z->held.len + len <= PACK_HOLD_MAX;
	int r;

	if (z->started)
		return zsink_compress(z, data, len, end, e);
	if (fits && buf_append(&z->held, data, len))
		return err_set(e, CKPT_ENOMEM, "out of memory");
	if (fits && end != ZSTD_e_end)
		return 0;
	r = zsink_start(z, fits, e);
	if (!r)
		r = zsink_compress(z, z->held.data, z->held.len,
				   fits ? end : ZSTD_e_continue, e);
	buf_release(&z->held);
	if (r || fits)
		return r;
	return zsink_compress(z, data, len, end, e);
}

static la_ssize_t tar_write(struct archive *a, void *ud, const void *data,
			    size_t len)
{
	struct zsink *z = ud;

	(void)a;
	if (z->stopped)
		return -1;
	if (zsink_put(z, data, len, ZSTD_e_continue, &z->err)) {
		z->stopped = true;
		return -1;
	}
	z->tar_bytes += len;
	return (la_ssize_t)len;
}

/* Reports a libarchive failure, unless it was ours: then our message, which
 * is better than libarchive's "write callback failed". */
static int tar_fail(struct packer *p, struct err *e, const char *what)
{
	struct archive *a = p->tar;

	if (p->sink.err.code) {
		*e = p->sink.err;
		return p->sink.err.code;
	}
	return err_set(e, archive_errno(a) == ENOMEM ? CKPT_ENOMEM : CKPT_EIO,
		       "writing the tar stream for %s: %s: %s", p->src, what,
		       archive_error_string(a) ? archive_error_string(a)
					       : "unknown error");
}

static int packer_init(struct packer *p, const char *src,
		       const struct pack_options *o, pack_write_fn write,
		       void *ud, struct err *e)
{
	struct stat st;
	size_t len;
	int r;

	memset(p, 0, sizeof(*p));
	buf_init(&p->name);
	/* Follows a symlink given as src: the user named what they mean. */
	if (stat(src, &st) != 0) {
		if (errno == ENOENT)
			return err_set(e, CKPT_ESOURCE,
				       "%s does not exist; check the path to "
				       "pack", src);
		return err_errno(e, CKPT_ESOURCE, errno,
				 "cannot pack %s", src);
	}
	if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode))
		return err_set(e, CKPT_ESOURCE,
			       "cannot pack %s: it is neither a directory nor "
			       "a regular file", src);
	p->single_file = S_ISREG(st.st_mode);
	p->at_root = true;

	p->src = strdup(src);
	if (!p->src)
		return err_set(e, CKPT_ENOMEM, "out of memory");
	len = strlen(p->src);
	while (len > 1 && p->src[len - 1] == '/')
		p->src[--len] = '\0';
	p->prefix = len + (p->src[len - 1] != '/');

	p->entry = archive_entry_new();
	p->links = archive_entry_linkresolver_new();
	p->disk = archive_read_disk_new();
	p->tar = archive_write_new();
	if (!p->entry || !p->links || !p->disk || !p->tar)
		return err_set(e, CKPT_ENOMEM, "out of memory");

	r = zsink_init(&p->sink, o, write, ud, e);
	if (r)
		return r;

	/* xattrs, ACLs and file flags would add vendor pax records that GNU
	 * tar warns about; sparse maps are not needed (holes read as
	 * zeros). */
	if (archive_read_disk_set_symlink_hybrid(p->disk) != ARCHIVE_OK ||
	    archive_read_disk_set_behavior(p->disk,
			ARCHIVE_READDISK_NO_XATTR | ARCHIVE_READDISK_NO_ACL |
			ARCHIVE_READDISK_NO_FFLAGS |
			ARCHIVE_READDISK_NO_SPARSE) != ARCHIVE_OK ||
	    archive_read_disk_set_standard_lookup(p->disk) != ARCHIVE_OK)
		return err_set(e, CKPT_EIO, "setting up the tree reader: %s",
			       archive_error_string(p->disk));
	if (archive_read_disk_open(p->disk, p->src) != ARCHIVE_OK)
		return err_set(e, CKPT_ESOURCE, "cannot open %s: %s", p->src,
			       archive_error_string(p->disk));

	/* No blocking inside libarchive: each write goes to zstd as is, and
	 * the last record is padded here. */
	if (archive_write_set_format_pax_restricted(p->tar) != ARCHIVE_OK ||
	    archive_write_set_bytes_per_block(p->tar, 0) != ARCHIVE_OK ||
	    archive_write_open2(p->tar, &p->sink, NULL, tar_write, NULL,
				NULL) != ARCHIVE_OK)
		return tar_fail(p, e, "setup");
	archive_entry_linkresolver_set_strategy(p->links,
						archive_format(p->tar));
	return 0;
}

static void packer_release(struct packer *p)
{
	if (p->disk)
		archive_read_free(p->disk);
	/* Freeing an archive that was not closed closes it, which would
	 * finish the last entry with zeros and end the archive: after a
	 * failure that must not reach the writer. */
	p->sink.stopped = true;
	if (p->tar)
		archive_write_free(p->tar);
	if (p->links)
		archive_entry_linkresolver_free(p->links);
	if (p->entry)
		archive_entry_free(p->entry);
	zsink_release(&p->sink);
	buf_release(&p->name);
	free(p->block);
	free(p->src);
}

/* The entry's name inside the archive: relative to src, or src's base name
 * when src is a file. */
static int entry_name(struct packer *p, struct err *e)
{
	const char *path = archive_entry_pathname(p->entry);
	const char *name;

	if (!path)
		return err_set(e, CKPT_EIO, "a file under %s has no name",
			       p->src);
	if (p->single_file) {
		name = strrchr(path, '/');
		name = name && name[1] ? name + 1 : path;
	} else {
		size_t len = strlen(p->src);

		if (strncmp(path, p->src, len) != 0 ||
		    (p->src[len - 1] != '/' && path[len] != '/') ||
		    strlen(path) <= p->prefix)
			return err_set(e, CKPT_EIO,
				       "%s: unexpected path from the tree "
				       "reader under %s", path, p->src);
		name = path + p->prefix;
	}
	buf_reset(&p->name);
	if (buf_appends(&p->name, name))
		return err_set(e, CKPT_ENOMEM, "out of memory");
	archive_entry_copy_pathname(p->entry, p->name.data);
	return 0;
}

static bool same_content_stat(const struct stat *st,
			      struct archive_entry *entry)
{
	return st->st_size == archive_entry_size(entry) &&
	       st->st_mtim.tv_sec == archive_entry_mtime(entry) &&
	       st->st_mtim.tv_nsec == archive_entry_mtime_nsec(entry);
}

static int changed(const char *path, struct err *e)
{
	return err_set(e, CKPT_ESOURCE,
		       "%s changed while it was being packed; pack again once "
		       "nothing writes to it", path);
}

/* Opens the file the tree reader just described, making sure it is still
 * that file. One deleted since is left out, as the tree reader does with
 * entries deleted before it looks at them: *fdp stays -1. */
static int open_contents(struct packer *p, const char *path, int *fdp,
			 struct err *e)
{
	int flags = O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK;
	struct stat st;
	int fd;

	/* Only src itself may be a symlink to follow. */
	if (!p->single_file)
		flags |= O_NOFOLLOW;
	*fdp = -1;
	fd = open(path, flags);
	if (fd < 0) {
		if (errno == ENOENT) {
			log_warn("%s: deleted while packing; left out", path);
			return 0;
		}
		return err_errno(e, CKPT_ESOURCE, errno,
				 "cannot read %s (make it readable, or move "
				 "it out of the tree)", path);
	}
	if (fstat(fd, &st) != 0) {
		err_errno(e, CKPT_ESOURCE, errno, "cannot read %s", path);
		close(fd);
		return CKPT_ESOURCE;
	}
	if (!S_ISREG(st.st_mode) ||
	    (uint64_t)st.st_ino != (uint64_t)archive_entry_ino64(p->entry) ||
	    (uint64_t)st.st_dev != (uint64_t)archive_entry_dev(p->entry) ||
	    !same_content_stat(&st, p->entry)) {
		close(fd);
		return changed(path, e);
	}
	posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
	*fdp = fd;
	return 0;
}

static int grow_block(struct packer *p, size_t want, struct err *e)
{
	if (want <= p->block_cap)
		return 0;
	free(p->block);
	p->block_cap = 0;
	p->block = malloc(want);
	if (!p->block)
		return err_set(e, CKPT_ENOMEM, "out of memory");
	p->block_cap = want;
	return 0;
}

/* Copies exactly the size written in the header. A file that shrinks,
 * grows or is rewritten meanwhile fails the pack instead of storing a
 * mix of old and new contents. */
static int copy_contents(struct packer *p, const char *path, int fd,
			 struct err *e)
{
	int64_t left = archive_entry_size(p->entry);
	struct stat st;

	while (left > 0) {
		size_t want = left < (int64_t)PACK_READ_BLOCK
				      ? (size_t)left : PACK_READ_BLOCK;
		ssize_t n;
		la_ssize_t w;

		if (grow_block(p, want, e))
			return CKPT_ENOMEM;
		n = read(fd, p->block, want);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return err_errno(e, CKPT_ESOURCE, errno,
					 "reading %s", path);
		if (n == 0)
			return changed(path, e);
		w = archive_write_data(p->tar, p->block, (size_t)n);
		if (w != n)
			return tar_fail(p, e, path);
		left -= n;
		p->stats.bytes_in += (uint64_t)n;
	}
	if (fstat(fd, &st) != 0)
		return err_errno(e, CKPT_ESOURCE, errno, "cannot read %s",
				 path);
	if (!same_content_stat(&st, p->entry))
		return changed(path, e);
	return 0;
}

/* Regular files are opened before their header is written, so that an
 * unreadable one fails the pack before anything of it is emitted, and one
 * deleted meanwhile is left out whole. */
static int write_entry(struct packer *p, const char *path, bool *written,
		       struct err *e)
{
	struct archive_entry *spare = NULL;
	int fd = -1;
	int r;

	*written = false;
	if (archive_entry_filetype(p->entry) == AE_IFREG &&
	    archive_entry_size(p->entry) > 0) {
		r = open_contents(p, path, &fd, e);
		if (r || fd < 0)
			return r;
	}
	/* Not wanted in a checkpoint: they change on every read or copy. */
	archive_entry_unset_atime(p->entry);
	archive_entry_unset_ctime(p->entry);
	archive_entry_unset_birthtime(p->entry);
	if (archive_entry_filetype(p->entry) != AE_IFREG)
		archive_entry_set_size(p->entry, 0);
	/* The second and later names of a file become hard links of size 0;
	 * for tar formats the resolver never holds an entry back. */
	archive_entry_linkify(p->links, &p->entry, &spare);
	if (fd >= 0 && archive_entry_hardlink(p->entry)) {
		close(fd);
		fd = -1;
	}

	r = archive_write_header(p->tar, p->entry);
	if (r == ARCHIVE_WARN) {
		log_warn("%s: %s", path, archive_error_string(p->tar));
	} else if (r != ARCHIVE_OK) {
		r = tar_fail(p, e, path);
		goto out;
	}
	r = 0;
	if (fd >= 0) {
		if (pack_test_before_data)
			pack_test_before_data(path);
		r = copy_contents(p, path, fd, e);
	}
	*written = !r;
out:
	if (fd >= 0)
		close(fd);
	return r;
}

static int pack_entry(struct packer *p, struct err *e)
{
	const char *path = archive_entry_sourcepath(p->entry);
	mode_t type = archive_entry_filetype(p->entry);
	bool root = p->at_root;
	bool written;
	int r;

	p->at_root = false;
	if (type == AE_IFDIR &&
	    archive_read_disk_descend(p->disk) != ARCHIVE_OK)
		return err_set(e, CKPT_ESOURCE, "cannot enter %s: %s", path,
			       archive_error_string(p->disk));
	if (root && !p->single_file)
		return 0;
	if (type != AE_IFDIR && type != AE_IFLNK && type != AE_IFREG) {
		log_warn("%s: skipped: sockets, fifos and devices cannot be "
			 "packed", path);
		return 0;
	}
	r = entry_name(p, e);
	if (!r)
		r = write_entry(p, path, &written, e);
	if (r || !written)
		return r;
	if (type == AE_IFDIR)
		p->stats.dirs++;
	else if (type == AE_IFLNK)
		p->stats.symlinks++;
	else
		p->stats.files++;
	return 0;
}

static int pack_all(struct packer *p, struct err *e)
{
	static const unsigned char zeros[TAR_RECORD];
	size_t pad;
	int r;

	for (;;) {
		archive_entry_clear(p->entry);
		r = archive_read_next_header2(p->disk, p->entry);
		if (r == ARCHIVE_EOF)
			break;
		if (r == ARCHIVE_WARN)
			log_warn("%s", archive_error_string(p->disk));
		else if (r != ARCHIVE_OK)
			return err_set(e, archive_errno(p->disk) == ENOMEM
					      ? CKPT_ENOMEM : CKPT_ESOURCE,
				       "cannot read %s: %s (check that it is "
				       "readable and that nothing changes it "
				       "while packing)", p->src,
				       archive_error_string(p->disk));
		r = pack_entry(p, e);
		if (r)
			return r;
	}
	if (archive_write_close(p->tar) != ARCHIVE_OK)
		return tar_fail(p, e, "end of archive");
	pad = (TAR_RECORD - p->sink.tar_bytes % TAR_RECORD) % TAR_RECORD;
	r = zsink_put(&p->sink, zeros, pad, ZSTD_e_end, e);
	if (r)
		return r;
	p->sink.tar_bytes += pad;
	return 0;
}

/*
 * In the C locale libarchive cannot read any non-ASCII name as text and
 * stores it with "hdrcharset=BINARY", which GNU tar warns about on every
 * entry. Names on Linux are UTF-8 in practice, so pack in C.UTF-8 then;
 * other locales' names convert to UTF-8 as they are. Thread-local, and
 * undone by locale_restore.
 */
static locale_t locale_for_names(locale_t *saved)
{
	const char *cs = nl_langinfo(CODESET);
	locale_t utf8;

	*saved = (locale_t)0;
	if (strcmp(cs, "ANSI_X3.4-1968") != 0 && strcmp(cs, "ASCII") != 0)
		return (locale_t)0;
	utf8 = newlocale(LC_CTYPE_MASK, "C.UTF-8", (locale_t)0);
	if (utf8 == (locale_t)0) {
		log_debug("pack: no C.UTF-8 locale; non-ASCII names will be "
			  "stored as raw bytes");
		return (locale_t)0;
	}
	*saved = uselocale(utf8);
	return utf8;
}

static void locale_restore(locale_t utf8, locale_t saved)
{
	if (utf8 == (locale_t)0)
		return;
	uselocale(saved);
	freelocale(utf8);
}

int pack_tree(const char *src, const struct pack_options *o,
	      pack_write_fn write, void *ud, struct pack_stats *stats,
	      struct err *e)
{
	struct pack_options defaults;
	struct packer p;
	struct err local;
	locale_t utf8, saved;
	int r;

	if (!e)
		e = &local;
	err_init(e);
	if (!o) {
		pack_options_init(&defaults);
		o = &defaults;
	}
	if (!src || !*src || !write)
		return err_set(e, CKPT_EINVAL,
			       "pack_tree needs a source path and a writer");
	if (o->level < 1 || o->level > 19)
		return err_set(e, CKPT_EINVAL,
			       "zstd level %d is out of range; use 1 to 19 "
			       "(3 is the default)", o->level);
	utf8 = locale_for_names(&saved);
	r = packer_init(&p, src, o, write, ud, e);
	if (!r)
		r = pack_all(&p, e);
	if (!r && stats) {
		*stats = p.stats;
		stats->bytes_out = p.sink.bytes_out;
		stats->bytes_unpacked = p.sink.tar_bytes;
	}
	packer_release(&p);
	locale_restore(utf8, saved);
	return r;
}
