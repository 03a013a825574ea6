/*
 * portable.c: the head of slice-supervisor.portable, the supervisor as one
 * file that starts on any x86-64 (or arm64) Linux whatever its libraries:
 * a glibc >= 2.17 image, Ubuntu 20.04 (glibc 2.31, OpenSSL 1.1), a user's
 * container image without a shell, while the build machine is Debian 12.
 *
 * Why this shape. A supervisor linked statically is not clean with
 * Debian's libraries: libcurl's static closure wants libgssapi_krb5,
 * libldap and friends, which Debian ships without .a files, and static
 * glibc still loads NSS modules of the running system's glibc. So the
 * supervisor keeps its shared libraries and carries them: the file is
 *
 *   this program, linked statically (system calls and libzstd only)
 *   the payload, one zstd frame of entries "NAME\0" MODE(u32le)
 *     SIZE(u64le) DATA: the directories lib and bin, ld.so (the build
 *     machine's dynamic loader), lib/<soname> for every library of the
 *     supervisor's DT_NEEDED closure, bin/slice-supervisor; then "\0"
 *   a trailer: "SLICEPB1" OFFSET(u64le) SIZE(u64le) ID(8 bytes), SIZE
 *     being the compressed payload's and ID its sha256's first bytes
 *
 * made by supervisor/portable.py from the built binary. Run, it unpacks
 * the payload once into a directory next to itself, .NAME.ID/ (else under
 * $TMPDIR or /tmp when that is not writable), atomically (a temporary
 * directory renamed into place, so concurrent first starts agree), then
 * execs ld.so --library-path DIR/lib --argv0 ARGV0 DIR/bin/slice-supervisor
 * ARGS: the host's loader, libc and /etc/ld.so.cache are never used, and
 * the process (pid, signals) stays the one that was started. It needs no
 * /bin/sh, tar or anything else from the host.
 *
 * Installing it: copy the file anywhere writable and executable and run
 * it (the GKE init container copies it to /slicectl/slice-supervisor and
 * runs `--version` once, which unpacks it into the emptyDir).
 */
#define _GNU_SOURCE /* O_CLOEXEC, mkdtemp */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#define MAGIC "SLICEPB1"
#define TRAILER 32
#define NAME_MAX_LEN 255

static const char *self_name = "slice-supervisor";

static int fail(const char *fmt, const char *a, int err)
{
	fprintf(stderr, "%s: ", self_name);
	fprintf(stderr, fmt, a);
	if (err)
		fprintf(stderr, ": %s", strerror(err));
	fputc('\n', stderr);
	return 1;
}

static uint64_t le64(const unsigned char *p)
{
	uint64_t v = 0;

	for (int i = 7; i >= 0; i--)
		v = v << 8 | p[i];
	return v;
}

static int read_full(int fd, void *buf, size_t len)
{
	unsigned char *p = buf;

	while (len) {
		ssize_t n = read(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n < 0 ? errno : EIO;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* The payload as a stream: compressed bytes from fd, at most left of
 * them, decompressed on demand. */
struct stream {
	int fd;
	uint64_t left;
	ZSTD_DCtx *z;
	unsigned char in[1 << 16], out[1 << 17];
	ZSTD_inBuffer ib;
	size_t out_pos, out_len;
};

/* Fills s->out; 0, or an errno value (EIO: damaged or truncated). */
static int stream_fill(struct stream *s)
{
	while (s->out_pos == s->out_len) {
		ZSTD_outBuffer ob = { s->out, sizeof(s->out), 0 };
		size_t r;

		if (s->ib.pos == s->ib.size) {
			size_t n = s->left < sizeof(s->in) ? (size_t)s->left
							    : sizeof(s->in);
			int err;

			if (!n)
				return EIO;
			if ((err = read_full(s->fd, s->in, n)))
				return err;
			s->left -= n;
			s->ib.src = s->in;
			s->ib.size = n;
			s->ib.pos = 0;
		}
		r = ZSTD_decompressStream(s->z, &ob, &s->ib);
		if (ZSTD_isError(r))
			return EIO;
		s->out_pos = 0;
		s->out_len = ob.pos;
	}
	return 0;
}

static int stream_read(struct stream *s, void *buf, size_t len)
{
	unsigned char *p = buf;

	while (len) {
		size_t n;
		int err = stream_fill(s);

		if (err)
			return err;
		n = s->out_len - s->out_pos;
		if (n > len)
			n = len;
		memcpy(p, s->out + s->out_pos, n);
		s->out_pos += n;
		p += n;
		len -= n;
	}
	return 0;
}

static int write_full(int fd, const void *buf, size_t len)
{
	const unsigned char *p = buf;

	while (len) {
		ssize_t n = write(fd, p, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return errno;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

/* A payload name must stay inside the directory: relative, no "..". */
static int name_safe(const char *name)
{
	const char *p = name;

	if (!*name || *name == '/')
		return 0;
	while (*p) {
		if (p[0] == '.' && p[1] == '.' && (p[2] == '/' || !p[2]))
			return 0;
		p = strchr(p, '/');
		if (!p)
			break;
		p++;
	}
	return 1;
}

/* Copies size bytes from fd into a new file path with mode. */
static int copy_out(struct stream *in, const char *path, unsigned mode,
		    uint64_t size)
{
	static unsigned char chunk[1 << 16];
	int out = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC,
		       mode & 0755);
	int err = 0;

	if (out < 0)
		return fail("cannot create %s", path, errno);
	while (!err && size) {
		size_t n = size < sizeof(chunk) ? (size_t)size : sizeof(chunk);

		err = stream_read(in, chunk, n);
		if (err) {
			fail("reading the payload for %s", path, err);
			break;
		}
		err = write_full(out, chunk, n);
		if (err)
			fail("writing %s", path, err);
		size -= n;
	}
	if (close(out) && !err)
		err = fail("writing %s", path, errno);
	return err ? 1 : 0;
}

/* Unpacks every entry of the stream into dir. */
static int unpack(struct stream *in, const char *dir)
{
	for (;;) {
		char name[NAME_MAX_LEN + 1], path[PATH_MAX];
		unsigned char hdr[12];
		uint64_t len;
		unsigned mode;
		size_t n = 0;
		int err;

		for (;; n++) {
			if (n > NAME_MAX_LEN)
				return fail("%s: a payload name is too long",
					    dir, 0);
			if ((err = stream_read(in, name + n, 1)))
				return fail("reading the payload into %s", dir,
					    err);
			if (!name[n])
				break;
		}
		/* An empty name ends the payload. */
		if (!n)
			return 0;
		if ((err = stream_read(in, hdr, sizeof(hdr))))
			return fail("reading the payload into %s", dir, err);
		mode = (unsigned)hdr[0] | (unsigned)hdr[1] << 8 |
		       (unsigned)hdr[2] << 16 | (unsigned)hdr[3] << 24;
		len = le64(hdr + 4);
		if (!name_safe(name))
			return fail("payload entry '%s' leaves its directory",
				    name, 0);
		if (snprintf(path, sizeof(path), "%s/%s", dir, name) >=
		    (int)sizeof(path))
			return fail("%s: path too long", dir, 0);
		/* Entries name their directory first: lib/ before lib/x. */
		if (mode & 040000) {
			if (mkdir(path, 0755))
				return fail("cannot create %s", path, errno);
		} else if (copy_out(in, path, mode, len)) {
			return 1;
		}
	}
}

/* Removes a half-unpacked temporary directory (best effort). */
static void remove_tree(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;

	while (d && (de = readdir(d))) {
		char path[PATH_MAX];
		struct stat st;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		if (snprintf(path, sizeof(path), "%s/%s", dir, de->d_name) >=
		    (int)sizeof(path))
			continue;
		if (!lstat(path, &st) && S_ISDIR(st.st_mode))
			remove_tree(path);
		else
			unlink(path);
	}
	if (d)
		closedir(d);
	rmdir(dir);
}

/* The directory to unpack into for self (the file's own path) and id;
 * false when the path would be too long. */
static int choose_dir(const char *self, const char *id, char *out,
		      size_t cap, int fallback)
{
	const char *slash = strrchr(self, '/');
	const char *base = slash ? slash + 1 : self;
	const char *tmp = getenv("TMPDIR");
	int n;

	if (!fallback)
		n = snprintf(out, cap, "%.*s.%s.%s", (int)(base - self), self,
			     base, id);
	else
		n = snprintf(out, cap, "%s/slice-supervisor.%u.%s",
			     tmp && *tmp == '/' ? tmp : "/tmp",
			     (unsigned)getuid(), id);
	return n > 0 && (size_t)n < cap;
}

static int ready(const char *dir)
{
	char path[PATH_MAX];

	snprintf(path, sizeof(path), "%s/bin/slice-supervisor", dir);
	return access(path, X_OK) == 0;
}

/* Unpacks into dir through a temporary sibling renamed into place. */
static int install(int fd, uint64_t off, uint64_t size, const char *dir)
{
	char tmp[PATH_MAX];
	struct stream *in;
	int rc;

	if (snprintf(tmp, sizeof(tmp), "%s.tmp.XXXXXX", dir) >=
	    (int)sizeof(tmp))
		return ENAMETOOLONG;
	if (!mkdtemp(tmp))
		return errno;
	chmod(tmp, 0755);
	in = calloc(1, sizeof(*in));
	if (in) {
		in->fd = fd;
		in->left = size;
		in->z = ZSTD_createDCtx();
	}
	rc = !in || !in->z || lseek(fd, (off_t)off, SEEK_SET) < 0 ||
	     unpack(in, tmp);
	if (in)
		ZSTD_freeDCtx(in->z);
	free(in);
	if (rc) {
		/* unpack said what went wrong. */
		remove_tree(tmp);
		return EIO;
	}
	if (rename(tmp, dir)) {
		int err = errno;

		remove_tree(tmp);
		/* Another start unpacked it first. */
		if ((err == EEXIST || err == ENOTEMPTY) && ready(dir))
			return 0;
		return err;
	}
	return 0;
}

int main(int argc, char **argv)
{
	unsigned char tr[TRAILER];
	char self[PATH_MAX], dir[PATH_MAX], id[17], loader[PATH_MAX + 8];
	char libs[PATH_MAX + 8], bin[PATH_MAX + 24];
	uint64_t off, size;
	struct stat st;
	ssize_t n;
	int fd, err;
	char **args;

	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n > 0) {
		self[n] = '\0';
	} else if (argc > 0 && strchr(argv[0], '/') &&
		   strlen(argv[0]) < sizeof(self)) {
		/* No /proc (a bare chroot): the path it was started by. */
		snprintf(self, sizeof(self), "%s", argv[0]);
	} else {
		return fail("cannot find itself (%s)", "/proc/self/exe", errno);
	}
	fd = open(self, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) || st.st_size < TRAILER ||
	    lseek(fd, st.st_size - TRAILER, SEEK_SET) < 0 ||
	    read_full(fd, tr, sizeof(tr)) || memcmp(tr, MAGIC, 8))
		return fail("%s carries no supervisor (damaged or truncated)",
			    self, 0);
	off = le64(tr + 8);
	size = le64(tr + 16);
	if (off + size + TRAILER != (uint64_t)st.st_size)
		return fail("%s: its payload does not add up (truncated?)",
			    self, 0);
	for (int i = 0; i < 8; i++)
		snprintf(id + 2 * i, 3, "%02x", tr[24 + i]);
	if (!choose_dir(self, id, dir, sizeof(dir), 0))
		return fail("%s: path too long", self, 0);
	if (!ready(dir)) {
		err = install(fd, off, size, dir);
		if (err == EACCES || err == EROFS || err == EPERM) {
			if (!choose_dir(self, id, dir, sizeof(dir), 1))
				return fail("%s: path too long", "$TMPDIR", 0);
			err = ready(dir) ? 0 : install(fd, off, size, dir);
		}
		if (err)
			return fail("cannot unpack into %s", dir, err);
	}
	close(fd);
	snprintf(loader, sizeof(loader), "%s/ld.so", dir);
	snprintf(libs, sizeof(libs), "%s/lib", dir);
	snprintf(bin, sizeof(bin), "%s/bin/slice-supervisor", dir);
	args = calloc((size_t)argc + 7, sizeof(*args));
	if (!args)
		return fail("%s", "out of memory", 0);
	args[0] = loader;
	args[1] = "--library-path";
	args[2] = libs;
	args[3] = "--argv0";
	args[4] = argv[0];
	args[5] = bin;
	for (int i = 1; i < argc; i++)
		args[5 + i] = argv[i];
	execv(loader, args);
	err = errno;
	free(args);
	return fail("cannot run %s", loader, err);
}
