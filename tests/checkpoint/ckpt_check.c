/* tests/checkpoint/ckpt_check.c: see ckpt_check.h. */
#include "tests/checkpoint/ckpt_check.h"

#include "tests/harness/harness.h"

#include <criterion/criterion.h>

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

char root[1024];
char bucket[1200];
char url[1300];

void ckpt_setup(void)
{
	const char *base = getenv("TMPDIR");

	snprintf(root, sizeof(root), "%s/slicectl-ckpt-XXXXXX",
		 base && *base ? base : "/tmp");
	cr_assert(mkdtemp(root));
	snprintf(bucket, sizeof(bucket), "%s/bucket/run-1", root);
	snprintf(url, sizeof(url), "file://%s", bucket);
	log_setup("test_ckpt", LOG_ERROR);
}

void ckpt_teardown(void)
{
	if (root[0])
		sh("chmod -R u+rwX '%s' 2>/dev/null; rm -rf '%s'", root,
		       root);
}

void path_of(char *out, const char *name)
{
	snprintf(out, PATHLEN, "%s/%s", root, name);
}

void write_text(const char *dir, const char *name, const char *text,
		       mode_t mode)
{
	char path[PATHLEN * 2];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "w");
	cr_assert(f, "create %s", path);
	fputs(text, f);
	cr_assert_eq(fclose(f), 0);
	cr_assert_eq(chmod(path, mode), 0);
}

void write_random(const char *path, size_t len, uint64_t seed)
{
	unsigned char *p = malloc(1 << 20);
	uint64_t x = seed | 1;
	FILE *f = fopen(path, "w");

	cr_assert(p && f);
	for (size_t done = 0; done < len;) {
		size_t n = len - done < (1u << 20) ? len - done : 1u << 20;

		for (size_t i = 0; i < n; i++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			p[i] = (unsigned char)(x >> 24);
		}
		cr_assert_eq(fwrite(p, 1, n, f), n);
		done += n;
	}
	cr_assert_eq(fclose(f), 0);
	free(p);
}

void make_tree(const char *dir, const char *tag)
{
	char path[PATHLEN * 2];

	cr_assert_eq(sh("mkdir -p '%s/sub/deeper' '%s/empty' "
			    "'%s/locked'", dir, dir, dir), 0);
	write_text(dir, "tag.txt", tag, 0644);
	write_text(dir, "run.sh", "#!/bin/sh\n", 0755);
	write_text(dir, "sub/deeper/x.json", "{\"a\": 1}\n", 0600);
	write_text(dir, "locked/inner", "inner\n", 0640);
	snprintf(path, sizeof(path), "%s/sub/up", dir);
	cr_assert_eq(symlink("../tag.txt", path), 0);
	snprintf(path, sizeof(path), "%s/dangling", dir);
	cr_assert_eq(symlink("no/such/thing", path), 0);
	snprintf(path, sizeof(path), "%s/big.bin", dir);
	write_random(path, (3u << 20) + 5, (uint64_t)tag[0]);
	snprintf(path, sizeof(path), "%s/locked", dir);
	cr_assert_eq(chmod(path, 0500), 0);
}

void compare_trees(const char *a, const char *b)
{
	cr_assert_eq(sh("cd '%s' && find . -printf '%%p %%y %%m %%l\\n' "
			    "| sort > '%s/.a.list' && cd '%s' && find . "
			    "-printf '%%p %%y %%m %%l\\n' | sort > "
			    "'%s/.b.list' && cmp -s '%s/.a.list' "
			    "'%s/.b.list' && diff -r --no-dereference "
			    "'%s' '%s' >/dev/null",
			    a, root, b, root, root, root, a, b), 0,
		     "trees differ: %s and %s", a, b);
}

struct store *open_store(void)
{
	struct store *s;
	struct err e;

	cr_assert_eq(store_open(&s, url, &e), 0, "%s", e.msg);
	return s;
}

size_t count_entries(const char *dir, const char *prefix)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	size_t n = 0;

	cr_assert(d, "%s", dir);
	while ((de = readdir(d)))
		if (!strncmp(de->d_name, prefix, strlen(prefix)))
			n++;
	closedir(d);
	return n;
}

void write_evil_tar(const char *spec, const char *tarf)
{
	cr_assert_eq(sh(
		"python3 -c \"\nimport io, tarfile, sys\n"
		"t = tarfile.open(fileobj=sys.stdout.buffer, "
		"mode='w|', format=tarfile.PAX_FORMAT)\n"
		"for name, kind, target in %s:\n"
		"    i = tarfile.TarInfo(name)\n"
		"    if kind == 's': i.type = tarfile.SYMTYPE; "
		"i.linkname = target\n"
		"    elif kind == 'h': i.type = tarfile.LNKTYPE; "
		"i.linkname = target\n"
		"    else: i.size = 4\n"
		"    t.addfile(i, io.BytesIO(b'evil') if kind == 'f' "
		"else None)\n"
		"t.close()\n\" | zstd -q -c > '%s'", spec, tarf), 0);
}
