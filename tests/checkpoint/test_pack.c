/*
 * tests/checkpoint/test_pack.c: pack_tree against the tools that unpack its
 * output on real hosts. Trees are built in a temporary directory, packed to
 * a file through a writer callback, unpacked with `zstd -dc | tar -xf -`
 * and compared with the source: contents, types, modes, symlink targets,
 * empty directories and odd names.
 */
#include "checkpoint/checkpoint.h"
#include "checkpoint/pack_test.h"

#include "tests/harness/harness.h"

#include <criterion/criterion.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>

#define PATHLEN 4096

/* ---- helpers ---- */

static char tmp_root[PATHLEN];

static void path_join(char *out, const char *a, const char *b)
{
	int n = snprintf(out, PATHLEN, "%s/%s", a, b);

	cr_assert(n > 0 && n < PATHLEN, "path too long: %s/%s", a, b);
}

static void setup_tmp(void)
{
	const char *base = getenv("TMPDIR");

	snprintf(tmp_root, sizeof(tmp_root), "%s/slicectl-pack-XXXXXX",
		 base && *base ? base : "/tmp");
	cr_assert(mkdtemp(tmp_root), "mkdtemp: %s", strerror(errno));
	/* Readable by the unprivileged user of the permission tests. */
	cr_assert_eq(chmod(tmp_root, 0755), 0);
}

static void teardown_tmp(void)
{
	pack_test_before_data = NULL;
	if (tmp_root[0])
		sh("chmod -R u+rwX '%s' 2>/dev/null; rm -rf '%s'",
		       tmp_root, tmp_root);
}

static void tmp_path(char *out, const char *name)
{
	path_join(out, tmp_root, name);
}

static void write_file(const char *path, const void *data, size_t len,
		       mode_t mode)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	const char *p = data;

	cr_assert(fd >= 0, "create %s: %s", path, strerror(errno));
	while (len) {
		ssize_t n = write(fd, p, len);

		cr_assert(n > 0, "write %s: %s", path, strerror(errno));
		p += n;
		len -= (size_t)n;
	}
	cr_assert_eq(close(fd), 0);
	cr_assert_eq(chmod(path, mode), 0, "chmod %s", path);
}

static void write_text(const char *dir, const char *name, const char *text,
		       mode_t mode)
{
	char path[PATHLEN];

	path_join(path, dir, name);
	write_file(path, text, strlen(text), mode);
}

/* Bytes that do not compress: zstd stores them raw, so only the content
 * checksum can notice a flipped byte. */
static void fill_random(unsigned char *p, size_t len, uint64_t seed)
{
	uint64_t x = seed | 1;

	for (size_t i = 0; i < len; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		p[i] = (unsigned char)(x >> 24);
	}
}

/* In blocks, so that the memory tests measure the packer, not this. */
static void write_random(const char *path, size_t len, uint64_t seed)
{
	size_t blk = 1 << 20;
	unsigned char *p = malloc(blk);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

	cr_assert(p);
	cr_assert(fd >= 0, "create %s: %s", path, strerror(errno));
	for (size_t done = 0; done < len; done += blk) {
		size_t n = len - done < blk ? len - done : blk;

		fill_random(p, n, seed + done);
		cr_assert_eq(write(fd, p, n), (ssize_t)n, "write %s", path);
	}
	cr_assert_eq(close(fd), 0);
	free(p);
}

static void make_dir(const char *dir, const char *name, mode_t mode)
{
	char path[PATHLEN];

	path_join(path, dir, name);
	cr_assert_eq(mkdir(path, 0700), 0, "mkdir %s: %s", path,
		     strerror(errno));
	cr_assert_eq(chmod(path, mode), 0);
}

static void make_symlink(const char *dir, const char *name,
			 const char *target)
{
	char path[PATHLEN];

	path_join(path, dir, name);
	cr_assert_eq(symlink(target, path), 0, "symlink %s", path);
}

/* A writer into a file, which can be told to fail. */
struct file_sink {
	int fd;
	size_t calls;
	size_t calls_after_failure;
	size_t short_chunks; /* smaller than ZSTD_CStreamOutSize() */
	uint64_t written;
	uint64_t fail_after; /* 0: never */
	bool failed;
};

static int file_write(void *ud, const void *data, size_t len, struct err *e)
{
	struct file_sink *s = ud;
	const char *p = data;

	s->calls++;
	if (len < ZSTD_CStreamOutSize())
		s->short_chunks++;
	if (s->failed)
		s->calls_after_failure++;
	if (s->fail_after && s->written + len > s->fail_after) {
		s->failed = true;
		return err_set(e, 42, "upload to host-7 failed: disk on fire");
	}
	while (len) {
		ssize_t n = s->fd >= 0 ? write(s->fd, p, len) : (ssize_t)len;

		if (n < 0)
			return err_errno(e, 1, errno, "writing the archive");
		p += n;
		len -= (size_t)n;
		s->written += (uint64_t)n;
	}
	return 0;
}

static int pack_to(const char *src, const char *out, unsigned threads,
		   struct pack_stats *st, struct err *e)
{
	struct pack_options o;
	struct file_sink s = { .fd = -1 };
	int r;

	pack_options_init(&o);
	o.threads = threads;
	if (out) {
		s.fd = open(out, O_WRONLY | O_CREAT | O_TRUNC, 0644);
		cr_assert(s.fd >= 0, "create %s", out);
	}
	err_init(e);
	r = pack_tree(src, &o, file_write, &s, st, e);
	if (s.fd >= 0)
		cr_assert_eq(close(s.fd), 0);
	/* Only the last chunk may be short. */
	if (!r)
		cr_assert_leq(s.short_chunks, 1, "%zu short chunks",
			      s.short_chunks);
	if (!r && st)
		cr_assert_eq(st->bytes_out, s.written,
			     "bytes_out %llu, writer got %llu",
			     (unsigned long long)st->bytes_out,
			     (unsigned long long)s.written);
	return r;
}

static void pack_ok(const char *src, const char *out, unsigned threads,
		    struct pack_stats *st)
{
	struct pack_stats local;
	struct err e;
	int r = pack_to(src, out, threads, st ? st : &local, &e);

	cr_assert_eq(r, 0, "pack_tree(%s) = %d: %s", src, r, e.msg);
}

/* Unpacks as the hosts do; returns what tar printed on stderr. */
static char *unpack(const char *archive, const char *out_dir)
{
	char errf[PATHLEN];
	char *text;
	size_t len = 0;
	FILE *f;

	cr_assert_eq(mkdir(out_dir, 0755), 0, "mkdir %s", out_dir);
	snprintf(errf, sizeof(errf), "%s.stderr", out_dir);
	cr_assert_eq(sh("zstd -q -t '%s'", archive), 0,
		     "zstd -t rejects %s", archive);
	cr_assert_eq(sh("zstd -q -dc '%s' | tar -xf - -C '%s' 2>'%s'",
			    archive, out_dir, errf), 0,
		     "tar -x failed for %s", archive);
	f = fopen(errf, "r");
	cr_assert(f);
	text = calloc(1, 65536);
	cr_assert(text);
	len = fread(text, 1, 65535, f);
	text[len] = '\0';
	fclose(f);
	return text;
}

static bool same_bytes(const char *a, const char *b)
{
	static char ba[1 << 16], bb[1 << 16];
	FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
	bool same = fa && fb;

	while (same) {
		size_t na = fread(ba, 1, sizeof(ba), fa);
		size_t nb = fread(bb, 1, sizeof(bb), fb);

		same = na == nb && !memcmp(ba, bb, na);
		if (na < sizeof(ba))
			break;
	}
	if (fa)
		fclose(fa);
	if (fb)
		fclose(fb);
	return same;
}

static bool packable(mode_t m)
{
	return S_ISREG(m) || S_ISDIR(m) || S_ISLNK(m);
}

/* Compares trees a (source) and b (unpacked); sockets, fifos and devices
 * in a are expected to be missing from b. */
static void compare_trees(const char *a, const char *b)
{
	DIR *d = opendir(a);
	struct dirent *de;
	size_t na = 0, nb = 0;

	cr_assert(d, "opendir %s", a);
	while ((de = readdir(d))) {
		char pa[PATHLEN], pb[PATHLEN];
		struct stat sa, sb;

		if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
			continue;
		path_join(pa, a, de->d_name);
		path_join(pb, b, de->d_name);
		cr_assert_eq(lstat(pa, &sa), 0);
		if (!packable(sa.st_mode)) {
			cr_assert_neq(lstat(pb, &sb), 0,
				      "%s should have been skipped", pb);
			continue;
		}
		na++;
		cr_assert_eq(lstat(pb, &sb), 0, "missing after unpack: %s", pb);
		cr_assert_eq(sa.st_mode & S_IFMT, sb.st_mode & S_IFMT,
			     "type differs: %s", pb);
		if (S_ISLNK(sa.st_mode)) {
			char ta[PATHLEN], tb[PATHLEN];
			ssize_t la = readlink(pa, ta, sizeof(ta) - 1);
			ssize_t lb = readlink(pb, tb, sizeof(tb) - 1);

			cr_assert(la >= 0 && lb >= 0);
			ta[la] = tb[lb] = '\0';
			cr_assert_str_eq(ta, tb, "symlink target differs: %s",
					 pb);
			continue;
		}
		cr_assert_eq(sa.st_mode & 07777, sb.st_mode & 07777,
			     "mode differs: %s (%o vs %o)", pb,
			     sa.st_mode & 07777, sb.st_mode & 07777);
		if (S_ISDIR(sa.st_mode)) {
			compare_trees(pa, pb);
			continue;
		}
		cr_assert_eq(sa.st_size, sb.st_size, "size differs: %s", pb);
		cr_assert_eq(sa.st_mtim.tv_sec, sb.st_mtim.tv_sec,
			     "mtime differs: %s", pb);
		cr_assert(same_bytes(pa, pb), "content differs: %s", pb);
	}
	closedir(d);

	/* Everything of a is in b; equal counts mean nothing extra. */
	d = opendir(b);
	cr_assert(d, "opendir %s", b);
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			nb++;
	closedir(d);
	cr_assert_eq(na, nb, "%s has %zu entries, %s has %zu", a, na, b, nb);
}

/* The tree every format test uses; returns its counts. */
struct tree_counts {
	uint64_t files, dirs, symlinks, bytes;
};

static void build_odd_tree(const char *src, struct tree_counts *c)
{
	char path[PATHLEN], deep[PATHLEN], longname[201];

	cr_assert_eq(mkdir(src, 0755), 0);
	write_text(src, "plain.txt", "hello\n", 0644);
	write_text(src, "with space", "space\n", 0644);
	write_text(src, "new\nline", "newline\n", 0644);
	write_text(src, "-leading-dash", "dash\n", 0644);
	write_text(src, "quote'single\"double", "quotes\n", 0644);
	write_text(src, "back\\slash", "backslash\n", 0644);
	write_text(src, "utf8-\xc3\xa9t\xc3\xa9-\xe6\x97\xa5\xe6\x9c\xac",
		   "utf8\n", 0644);
	write_text(src, "run.sh", "#!/bin/sh\necho hi\n", 0755);
	write_text(src, "private", "secret-ish\n", 0600);
	memset(longname, 'n', 200);
	longname[200] = '\0';
	write_text(src, longname, "long\n", 0644);
	write_text(src, "empty-file", "", 0644);
	make_dir(src, "empty-dir", 0755);
	make_dir(src, "locked-dir", 0700);
	write_text(src, "locked-dir/inside", "inside\n", 0640);
	make_dir(src, "sub", 0755);
	write_text(src, "sub/nested.txt", "nested\n", 0644);
	make_symlink(src, "link-to-dir", "sub");
	make_symlink(src, "dangling", "does/not/exist");
	make_symlink(src, "sub/up", "../plain.txt");
	path_join(path, src, "big.bin");
	/* Spans several read blocks, with a ragged end. */
	write_random(path, (3u << 20) + 17, 7);
	path_join(path, src, "sub/hard");
	{
		char target[PATHLEN];

		path_join(target, src, "plain.txt");
		cr_assert_eq(link(target, path), 0);
	}
	path_join(path, src, "fifo");
	cr_assert_eq(mkfifo(path, 0644), 0);

	snprintf(deep, sizeof(deep), "%s", src);
	for (int i = 0; i < 40; i++) {
		char level[16];

		snprintf(level, sizeof(level), "level%02d", i);
		make_dir(deep, level, 0755);
		strncat(deep, "/", sizeof(deep) - strlen(deep) - 1);
		strncat(deep, level, sizeof(deep) - strlen(deep) - 1);
	}
	write_text(deep, "bottom", "bottom\n", 0644);

	c->files = 16; /* 15 regular files and the hard link */
	c->dirs = 3 + 40;
	c->symlinks = 3;
	c->bytes = 6 + 6 + 8 + 5 + 7 + 10 + 5 + 18 + 11 + 5 + 0 + 7 + 7 +
		   (3u << 20) + 17 + 7;
}

/* ---- tests ---- */

TestSuite(pack, .init = setup_tmp, .fini = teardown_tmp, .timeout = 240);

Test(pack, odd_tree_round_trip)
{
	char src[PATHLEN], arc[PATHLEN], out[PATHLEN];
	struct tree_counts c;
	struct pack_stats st;
	char *tar_err;
	struct stat as;

	tmp_path(src, "src");
	tmp_path(arc, "src.tar.zst");
	tmp_path(out, "out");
	build_odd_tree(src, &c);

	pack_ok(src, arc, 2, &st);
	tar_err = unpack(arc, out);
	cr_expect_str_empty(tar_err, "tar complained: %s", tar_err);
	free(tar_err);
	compare_trees(src, out);

	cr_expect_eq(st.files, c.files, "files %llu",
		     (unsigned long long)st.files);
	cr_expect_eq(st.dirs, c.dirs, "dirs %llu",
		     (unsigned long long)st.dirs);
	cr_expect_eq(st.symlinks, c.symlinks, "symlinks %llu",
		     (unsigned long long)st.symlinks);
	/* The hard link's bytes are read and stored once. */
	cr_expect_eq(st.bytes_in, c.bytes, "bytes_in %llu",
		     (unsigned long long)st.bytes_in);
	cr_assert_eq(stat(arc, &as), 0);
	cr_expect_eq((uint64_t)as.st_size, st.bytes_out);
}

Test(pack, names_are_relative_and_hard_links_kept)
{
	char src[PATHLEN], arc[PATHLEN], out[PATHLEN], a[PATHLEN], b[PATHLEN];
	struct tree_counts c;
	struct stat sa, sb;

	tmp_path(src, "src");
	tmp_path(arc, "src.tar.zst");
	tmp_path(out, "out");
	build_odd_tree(src, &c);
	pack_ok(src, arc, 1, NULL);
	cr_assert_eq(sh("zstd -q -dc '%s' | tar -tf - | "
			    "grep -q -e '^/' -e '^\\./' -e '^src'", arc), 1,
		     "an entry is not relative to the source");
	free(unpack(arc, out));
	path_join(a, out, "plain.txt");
	path_join(b, out, "sub/hard");
	cr_assert_eq(stat(a, &sa), 0);
	cr_assert_eq(stat(b, &sb), 0);
	cr_expect_eq(sa.st_ino, sb.st_ino, "hard link unpacked as a copy");
}

Test(pack, source_forms)
{
	char src[PATHLEN], slash[PATHLEN + 1], link[PATHLEN], arc[PATHLEN];
	char out[PATHLEN];

	tmp_path(src, "src");
	cr_assert_eq(mkdir(src, 0755), 0);
	write_text(src, "a", "a\n", 0644);
	make_dir(src, "d", 0755);

	snprintf(slash, sizeof(slash), "%s/", src);
	tmp_path(arc, "slash.tar.zst");
	tmp_path(out, "out-slash");
	pack_ok(slash, arc, 1, NULL);
	free(unpack(arc, out));
	compare_trees(src, out);

	/* A symlink given as the source is what the user meant. */
	tmp_path(link, "link");
	cr_assert_eq(symlink("src", link), 0);
	tmp_path(arc, "link.tar.zst");
	tmp_path(out, "out-link");
	pack_ok(link, arc, 1, NULL);
	free(unpack(arc, out));
	compare_trees(src, out);
}

Test(pack, single_file_is_stored_under_its_base_name)
{
	char dir[PATHLEN], file[PATHLEN], arc[PATHLEN], out[PATHLEN];
	char got[PATHLEN];
	struct pack_stats st;
	struct stat s;
	DIR *d;
	struct dirent *de;
	int n = 0;

	tmp_path(dir, "in");
	cr_assert_eq(mkdir(dir, 0755), 0);
	path_join(file, dir, "model weights.bin");
	write_random(file, 100000, 3);
	cr_assert_eq(chmod(file, 0751), 0);
	tmp_path(arc, "one.tar.zst");
	tmp_path(out, "out");

	pack_ok(file, arc, 2, &st);
	cr_expect_eq(st.files, 1);
	cr_expect_eq(st.dirs, 0);
	cr_expect_eq(st.bytes_in, 100000);
	free(unpack(arc, out));
	d = opendir(out);
	cr_assert(d);
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
			n++;
	closedir(d);
	cr_expect_eq(n, 1, "expected one entry, got %d", n);
	path_join(got, out, "model weights.bin");
	cr_assert_eq(stat(got, &s), 0, "not unpacked under its base name");
	cr_expect_eq(s.st_mode & 07777, 0751);
	cr_expect(same_bytes(file, got));
}

Test(pack, non_utf8_name_survives)
{
	char src[PATHLEN], arc[PATHLEN], out[PATHLEN];

	tmp_path(src, "src");
	cr_assert_eq(mkdir(src, 0755), 0);
	write_text(src, "latin1-caf\xe9", "bytes\n", 0644);
	tmp_path(arc, "a.tar.zst");
	tmp_path(out, "out");
	pack_ok(src, arc, 1, NULL);
	/* tar may warn about the raw-bytes header; the name must survive. */
	free(unpack(arc, out));
	compare_trees(src, out);
}

Test(pack, content_checksum_catches_a_flipped_byte)
{
	char src[PATHLEN], file[PATHLEN], arc[PATHLEN];
	unsigned char hdr[5], byte;
	struct stat s;
	int fd;

	tmp_path(src, "src");
	cr_assert_eq(mkdir(src, 0755), 0);
	path_join(file, src, "noise");
	write_random(file, 1 << 20, 11);
	tmp_path(arc, "a.tar.zst");
	pack_ok(src, arc, 1, NULL);
	cr_assert_eq(sh("zstd -q -t '%s'", arc), 0);

	fd = open(arc, O_RDWR);
	cr_assert(fd >= 0);
	cr_assert_eq(pread(fd, hdr, sizeof(hdr), 0), (ssize_t)sizeof(hdr));
	cr_expect_eq(hdr[0] | hdr[1] << 8 | hdr[2] << 16 |
		     (uint32_t)hdr[3] << 24, 0xFD2FB528u, "not a zstd frame");
	cr_expect(hdr[4] & 0x04, "frame header has no content checksum");
	cr_assert_eq(fstat(fd, &s), 0);
	/* Mid-file is inside a raw block of the random file's bytes. */
	cr_assert_eq(pread(fd, &byte, 1, s.st_size / 2), 1);
	byte ^= 0x10;
	cr_assert_eq(pwrite(fd, &byte, 1, s.st_size / 2), 1);
	close(fd);
	cr_expect_neq(sh("zstd -q -t '%s' 2>/dev/null", arc), 0,
		      "zstd -t accepted a corrupted stream");
}

Test(pack, threads_do_not_change_the_tree)
{
	char src[PATHLEN], a1[PATHLEN], a2[PATHLEN], o1[PATHLEN];
	char o2[PATHLEN];
	struct tree_counts c;

	tmp_path(src, "src");
	tmp_path(a1, "t1.tar.zst");
	tmp_path(a2, "t2.tar.zst");
	tmp_path(o1, "o1");
	tmp_path(o2, "o2");
	build_odd_tree(src, &c);
	pack_ok(src, a1, 1, NULL);
	pack_ok(src, a2, 2, NULL);
	free(unpack(a1, o1));
	free(unpack(a2, o2));
	compare_trees(src, o1);
	compare_trees(src, o2);
	/* Same walk, same headers: the tar streams are identical. */
	cr_expect_eq(sh("zstd -q -dc '%s' > '%s.tar' && "
			    "zstd -q -dc '%s' > '%s.tar' && "
			    "cmp -s '%s.tar' '%s.tar'", a1, a1, a2, a2, a1,
			    a2), 0, "tar streams differ between thread counts");
}

Test(pack, writer_failure_propagates)
{
	char src[PATHLEN], file[PATHLEN];
	struct pack_options o;
	struct file_sink s = { .fd = -1, .fail_after = 3u << 20 };
	struct err e;
	int r;

	tmp_path(src, "src");
	cr_assert_eq(mkdir(src, 0755), 0);
	path_join(file, src, "noise");
	write_random(file, 8u << 20, 5);
	pack_options_init(&o);
	o.threads = 1;
	err_init(&e);
	r = pack_tree(src, &o, file_write, &s, NULL, &e);
	cr_assert_eq(r, CKPT_EWRITE, "got %d: %s", r, e.msg);
	cr_expect(strstr(e.msg, "upload to host-7 failed: disk on fire"),
		  "writer's message lost: %s", e.msg);
	cr_expect_eq(s.calls_after_failure, 0,
		     "the writer was called again after it failed");
}

Test(pack, missing_source)
{
	char src[PATHLEN];
	struct err e;
	int r;

	tmp_path(src, "no-such-dir");
	r = pack_to(src, NULL, 1, NULL, &e);
	cr_assert_eq(r, CKPT_ESOURCE);
	cr_expect(strstr(e.msg, src), "message does not name it: %s", e.msg);
	cr_expect(strstr(e.msg, "does not exist"), "%s", e.msg);
}

Test(pack, bad_options)
{
	char src[PATHLEN];
	struct pack_options o;
	struct file_sink s = { .fd = -1 };
	struct err e;

	tmp_path(src, "src");
	cr_assert_eq(mkdir(src, 0755), 0);
	pack_options_init(&o);
	cr_expect_eq(o.level, 3);
	cr_expect_eq(o.threads, 0);
	o.level = 0;
	cr_expect_eq(pack_tree(src, &o, file_write, &s, NULL, &e),
		     CKPT_EINVAL);
	o.level = 20;
	cr_expect_eq(pack_tree(src, &o, file_write, &s, NULL, &e),
		     CKPT_EINVAL);
	cr_expect(strstr(e.msg, "20"), "%s", e.msg);
	o.level = 3;
	cr_expect_eq(pack_tree(src, &o, NULL, NULL, NULL, &e), CKPT_EINVAL);
	cr_expect_eq(s.calls, 0);
}

/*
 * Packs src in a child that cannot read what root could: as root, the
 * child drops to nobody (65534), since root reads mode-000 files anyway.
 * Returns pack_tree's code and message.
 */
static int pack_unprivileged(const char *src, char *msg, size_t len)
{
	int fds[2];
	pid_t pid;
	int status, code = -1;
	ssize_t n;

	cr_assert_eq(pipe(fds), 0);
	pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		struct file_sink s = { .fd = -1 };
		struct err e;
		int r;

		close(fds[0]);
		if (geteuid() == 0 && (setgroups(0, NULL) != 0 ||
				       setgid(65534) != 0 ||
				       setuid(65534) != 0))
			_exit(99);
		err_init(&e);
		r = pack_tree(src, NULL, file_write, &s, NULL, &e);
		if (write(fds[1], &r, sizeof(r)) != sizeof(r) ||
		    write(fds[1], e.msg, sizeof(e.msg)) != sizeof(e.msg))
			_exit(98);
		_exit(0);
	}
	close(fds[1]);
	n = read(fds[0], &code, sizeof(code));
	if (n == sizeof(code))
		n = read(fds[0], msg, len);
	msg[len - 1] = '\0';
	close(fds[0]);
	cr_assert_eq(waitpid(pid, &status, 0), pid);
	cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
		  "child failed (status %d)", status);
	return code;
}

Test(pack, unreadable_file_is_named)
{
	char src[PATHLEN], bad[PATHLEN], msg[1024];
	int r;

	tmp_path(src, "src");
	cr_assert_eq(mkdir(src, 0755), 0);
	write_text(src, "ok", "fine\n", 0644);
	write_text(src, "secret", "no\n", 0000);
	path_join(bad, src, "secret");
	r = pack_unprivileged(src, msg, sizeof(msg));
	cr_assert_eq(r, CKPT_ESOURCE, "got %d: %s", r, msg);
	cr_expect(strstr(msg, bad), "does not name the file: %s", msg);
	cr_expect(strstr(msg, "Permission denied"), "%s", msg);
}

Test(pack, unreadable_dir_is_named)
{
	char src[PATHLEN], msg[1024];
	int r;

	tmp_path(src, "src");
	cr_assert_eq(mkdir(src, 0755), 0);
	make_dir(src, "closed", 0755);
	write_text(src, "closed/x", "x\n", 0644);
	{
		char p[PATHLEN];

		path_join(p, src, "closed");
		cr_assert_eq(chmod(p, 0000), 0);
	}
	r = pack_unprivileged(src, msg, sizeof(msg));
	cr_assert_eq(r, CKPT_ESOURCE, "got %d: %s", r, msg);
	cr_expect(strstr(msg, "closed"), "does not name the dir: %s", msg);
}

/* ---- files that change under the packer ---- */

/* For HOOK_DELETE_MIDDLE: the directory's entries in readdir order, which
 * is the order the tree reader visits them in. */
static char hook_names[50][NAME_MAX + 1];
static int hook_count;
static char hook_dir[PATHLEN];
static int hook_action;

enum { HOOK_SHRINK, HOOK_GROW, HOOK_REWRITE, HOOK_DELETE_MIDDLE };

static void change_file(const char *path)
{
	static const char more[] = "more";
	int fd;

	switch (hook_action) {
	case HOOK_SHRINK:
		cr_assert_eq(truncate(path, 10), 0);
		break;
	case HOOK_GROW:
		fd = open(path, O_WRONLY | O_APPEND);
		cr_assert(fd >= 0);
		cr_assert_eq(write(fd, more, 4), 4);
		close(fd);
		break;
	case HOOK_REWRITE: {
		struct timespec ts[2] = { { 0, UTIME_OMIT }, { 0, 0 } };

		/* Same size, new bytes: only the mtime tells. */
		fd = open(path, O_WRONLY);
		cr_assert(fd >= 0);
		cr_assert_eq(pwrite(fd, more, 4, 0), 4);
		clock_gettime(CLOCK_REALTIME, &ts[1]);
		ts[1].tv_sec += 5;
		cr_assert_eq(futimens(fd, ts), 0);
		close(fd);
		break;
	}
	case HOOK_DELETE_MIDDLE:
		/* Called for the first entry; all but the last go. */
		for (int i = 1; i < hook_count - 1; i++) {
			char other[PATHLEN];

			path_join(other, hook_dir, hook_names[i]);
			cr_assert_eq(unlink(other), 0);
		}
		pack_test_before_data = NULL;
		break;
	}
}

static void pack_changing(int action, const char *expect)
{
	char src[PATHLEN], file[PATHLEN];
	struct err e;
	int r;

	tmp_path(src, "src");
	cr_assert_eq(mkdir(src, 0755), 0);
	path_join(file, src, "growing.log");
	write_random(file, (2u << 20) + 5, 9);
	hook_action = action;
	pack_test_before_data = change_file;
	r = pack_to(src, NULL, 1, NULL, &e);
	cr_assert_eq(r, CKPT_ESOURCE, "got %d: %s", r, e.msg);
	cr_expect(strstr(e.msg, file), "does not name the file: %s", e.msg);
	cr_expect(strstr(e.msg, expect), "%s", e.msg);
}

Test(pack, file_that_shrinks_fails)
{
	pack_changing(HOOK_SHRINK, "changed while");
}

Test(pack, file_that_grows_fails)
{
	pack_changing(HOOK_GROW, "changed while");
}

Test(pack, file_rewritten_in_place_fails)
{
	pack_changing(HOOK_REWRITE, "changed while");
}

Test(pack, entries_that_vanish_are_left_out)
{
	char src[PATHLEN], arc[PATHLEN], out[PATHLEN];
	struct pack_stats st;
	struct dirent *de;
	DIR *d;

	tmp_path(src, "src");
	cr_assert_eq(mkdir(src, 0755), 0);
	for (int i = 0; i < 50; i++) {
		char name[16];

		snprintf(name, sizeof(name), "f%02d", i);
		write_text(src, name, "data\n", 0644);
	}
	hook_count = 0;
	d = opendir(src);
	cr_assert(d);
	while ((de = readdir(d)))
		if (de->d_name[0] == 'f')
			snprintf(hook_names[hook_count++], sizeof(hook_names[0]),
				 "%s", de->d_name);
	closedir(d);
	cr_assert_eq(hook_count, 50);
	/*
	 * The tree reader has listed the directory when the first file is
	 * read; the entries after it vanish before it looks at them, but for
	 * the last. (With the last gone too, libarchive 3.6.2 leaks its note
	 * of the vanished names, which AddressSanitizer would report.) The
	 * archive must be the tree as it is afterwards, not a broken one.
	 */
	snprintf(hook_dir, sizeof(hook_dir), "%s", src);
	hook_action = HOOK_DELETE_MIDDLE;
	pack_test_before_data = change_file;
	tmp_path(arc, "a.tar.zst");
	tmp_path(out, "out");
	pack_ok(src, arc, 1, &st);
	cr_expect_eq(st.files, 2, "files %llu", (unsigned long long)st.files);
	free(unpack(arc, out));
	compare_trees(src, out);
}

/* ---- memory ---- */

/* AddressSanitizer's shadow memory and quarantine dwarf what the packer
 * uses, so the sanitized build checks everything but the peak. */
static void expect_peak_rss_below_256_mib(void)
{
	struct rusage ru;

	cr_assert_eq(getrusage(RUSAGE_SELF, &ru), 0);
#ifdef __SANITIZE_ADDRESS__
	cr_log_info("peak RSS %ld MiB, not checked under AddressSanitizer",
		    ru.ru_maxrss / 1024);
#else
	cr_expect_lt(ru.ru_maxrss / 1024, 256, "peak RSS %ld MiB",
		     ru.ru_maxrss / 1024);
#endif
}

Test(pack, sparse_2gib_file_streams_in_bounded_memory)
{
	char src[PATHLEN], file[PATHLEN], arc[PATHLEN];
	struct pack_stats st;
	int fd;

	tmp_path(src, "src");
	cr_assert_eq(mkdir(src, 0755), 0);
	path_join(file, src, "sparse.bin");
	fd = open(file, O_WRONLY | O_CREAT, 0644);
	cr_assert(fd >= 0);
	cr_assert_eq(pwrite(fd, "head", 4, 0), 4);
	cr_assert_eq(pwrite(fd, "middle", 6, 1ll << 30), 6);
	cr_assert_eq(ftruncate(fd, 2ll << 30), 0);
	close(fd);
	tmp_path(arc, "a.tar.zst");

	pack_ok(src, arc, 0, &st);
	cr_expect_eq(st.bytes_in, 2ull << 30);
	expect_peak_rss_below_256_mib();
	cr_expect_eq(sh("zstd -q -dc '%s' | tar -xOf - sparse.bin | "
			    "cmp -s - '%s'", arc, file), 0,
		     "sparse file content differs after unpack");
}

Test(pack, many_threads_stay_in_bounded_memory)
{
	char src[PATHLEN], file[PATHLEN];
	struct pack_stats st;

	tmp_path(src, "src");
	cr_assert_eq(mkdir(src, 0755), 0);
	path_join(file, src, "noise");
	write_random(file, 256u << 20, 13);
	pack_ok(src, NULL, 64, &st);
	cr_expect_eq(st.bytes_in, 256u << 20);
	expect_peak_rss_below_256_mib();
}

/* Live heap of the whole process: the main arena and every mmapped block
 * (zstd's workers' buffers are one or the other). */
static size_t heap_in_use(void)
{
	struct mallinfo2 mi = mallinfo2();

	return mi.uordblks + mi.hblkhd;
}

struct heap_sink {
	size_t base, peak;
};

static int heap_write(void *ud, const void *data, size_t len, struct err *e)
{
	struct heap_sink *h = ud;
	size_t now = heap_in_use();

	(void)data;
	(void)len;
	(void)e;
	if (now > h->base && now - h->base > h->peak)
		h->peak = now - h->base;
	return 0;
}

/* A step of a few KB must not cost zstd's workers' buffers (tens of MB,
 * each byte of them written over under MALLOC_PERTURB_), however many
 * threads are asked for. */
Test(pack, small_tree_allocates_about_its_size)
{
	struct pack_options o;
	struct heap_sink h;
	struct err e;
	char src[PATHLEN], file[PATHLEN];

	tmp_path(src, "src");
	cr_assert_eq(mkdir(src, 0755), 0);
	write_text(src, "params", "w = [0.5, 0.25]\n", 0644);
	path_join(file, src, "opt.bin");
	write_random(file, 4000, 5);
	pack_options_init(&o);
	o.threads = 16;
	h.base = heap_in_use();
	h.peak = 0;
	cr_assert_eq(pack_tree(src, &o, heap_write, &h, NULL, &e), 0, "%s",
		     e.msg);
	cr_expect_lt(h.peak, (size_t)2 << 20,
		     "packing 4 KB held %zu KiB while writing", h.peak >> 10);
}

/* Tar streams that end just within the bytes held before compression
 * starts, and just beyond them, round-trip alike. */
Test(pack, streams_either_side_of_the_held_start)
{
	static const size_t sizes[] = { (1u << 20) - 12 * 1024, 1u << 20,
					3u << 20 };

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		char src[PATHLEN], arc[PATHLEN], out[PATHLEN], file[PATHLEN];
		char name[32];
		struct pack_stats st;

		snprintf(name, sizeof(name), "src%zu", i);
		tmp_path(src, name);
		cr_assert_eq(mkdir(src, 0755), 0);
		path_join(file, src, "blob");
		write_random(file, sizes[i], 11 + i);
		snprintf(name, sizeof(name), "a%zu.tar.zst", i);
		tmp_path(arc, name);
		snprintf(name, sizeof(name), "out%zu", i);
		tmp_path(out, name);
		pack_ok(src, arc, 2, &st);
		free(unpack(arc, out));
		compare_trees(src, out);
	}
}
