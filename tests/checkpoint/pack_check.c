/* tests/checkpoint/pack_check.c: see pack_check.h. */
#include "tests/checkpoint/pack_check.h"

#include "checkpoint/checkpoint.h"
#include "checkpoint/pack_test.h"

#include "tests/harness/harness.h"

#include <criterion/criterion.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

char tmp_root[PATHLEN];

void path_join(char *out, const char *a, const char *b)
{
	int n = snprintf(out, PATHLEN, "%s/%s", a, b);

	cr_assert(n > 0 && n < PATHLEN, "path too long: %s/%s", a, b);
}

void setup_tmp(void)
{
	const char *base = getenv("TMPDIR");

	snprintf(tmp_root, sizeof(tmp_root), "%s/slicectl-pack-XXXXXX",
		 base && *base ? base : "/tmp");
	cr_assert(mkdtemp(tmp_root), "mkdtemp: %s", strerror(errno));
	/* Readable by the unprivileged user of the permission tests. */
	cr_assert_eq(chmod(tmp_root, 0755), 0);
}

void teardown_tmp(void)
{
	pack_test_before_data = NULL;
	if (tmp_root[0])
		sh("chmod -R u+rwX '%s' 2>/dev/null; rm -rf '%s'",
		       tmp_root, tmp_root);
}

void tmp_path(char *out, const char *name)
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

void write_text(const char *dir, const char *name, const char *text,
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
void write_random(const char *path, size_t len, uint64_t seed)
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

void make_dir(const char *dir, const char *name, mode_t mode)
{
	char path[PATHLEN];

	path_join(path, dir, name);
	cr_assert_eq(mkdir(path, 0700), 0, "mkdir %s: %s", path,
		     strerror(errno));
	cr_assert_eq(chmod(path, mode), 0);
}

void make_symlink(const char *dir, const char *name,
			 const char *target)
{
	char path[PATHLEN];

	path_join(path, dir, name);
	cr_assert_eq(symlink(target, path), 0, "symlink %s", path);
}

int file_write(void *ud, const void *data, size_t len, struct err *e)
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

int pack_to(const char *src, const char *out, unsigned threads,
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

void pack_ok(const char *src, const char *out, unsigned threads,
		    struct pack_stats *st)
{
	struct pack_stats local;
	struct err e;
	int r = pack_to(src, out, threads, st ? st : &local, &e);

	cr_assert_eq(r, 0, "pack_tree(%s) = %d: %s", src, r, e.msg);
}

char *unpack(const char *archive, const char *out_dir)
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

bool same_bytes(const char *a, const char *b)
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

void compare_trees(const char *a, const char *b)
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

void build_odd_tree(const char *src, struct tree_counts *c)
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
