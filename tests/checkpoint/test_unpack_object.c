/*
 * tests/checkpoint/test_unpack_object.c: ckpt_unpack_object, one object (a
 * run's code bundle) unpacked into a directory in a file:// store: round
 * trip, replacing what is there, failures that leave it as it was, and
 * archives crafted to write outside it.
 */
#include "checkpoint/checkpoint.h"

#include "tests/checkpoint/ckpt_check.h"
#include "tests/harness/harness.h"

#include <criterion/criterion.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

TestSuite(ckpt, .init = ckpt_setup, .fini = ckpt_teardown, .timeout = 600);

static int upload_fn(void *ud, const void *data, size_t len, struct err *e)
{
	return store_upload_write(ud, data, len, e);
}

/* Packs dir with pack_tree into the object name; returns its generation. */
static int64_t put_tree(struct store *s, const char *name, const char *dir)
{
	struct store_upload *u;
	struct store_object o;
	struct err e;
	int64_t g;
	int r;

	cr_assert_eq(store_upload_begin(s, name, STORE_ANY_GENERATION, &u, &e),
		     0, "%s", e.msg);
	r = pack_tree(dir, NULL, upload_fn, u, NULL, &e);
	if (r) {
		store_upload_abort(u);
		cr_assert_fail("pack %s: %d %s", dir, r, e.msg);
	}
	cr_assert_eq(store_upload_finish(u, &o, &e), 0, "%s", e.msg);
	g = o.generation;
	store_object_release(&o);
	cr_assert_gt(g, 0);
	return g;
}

/* Uploads a local file as it is under name. */
static void put_file(struct store *s, const char *name, const char *path)
{
	struct store_upload *u;
	struct err e;
	char buf[65536];
	size_t n;
	FILE *f = fopen(path, "rb");

	cr_assert(f, "%s", path);
	cr_assert_eq(store_upload_begin(s, name, STORE_ANY_GENERATION, &u, &e),
		     0, "%s", e.msg);
	while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
		cr_assert_eq(store_upload_write(u, buf, n, &e), 0, "%s",
			     e.msg);
	fclose(f);
	cr_assert_eq(store_upload_finish(u, NULL, &e), 0, "%s", e.msg);
}

Test(ckpt, unpack_object_round_trip_replace_and_failures)
{
	char src[PATHLEN], src2[PATHLEN], dest[PATHLEN], out[PATHLEN];
	char junk[PATHLEN], stray[PATHLEN + 16];
	struct store *s = open_store();
	int64_t g1, g2, g = -1;
	struct err e;
	int r;

	path_of(src, "code1");
	path_of(src2, "code2");
	path_of(dest, "state/code");
	path_of(out, "state");
	make_tree(src, "code one\n");
	make_tree(src2, "code two\n");
	g1 = put_tree(s, "bundle.tar.zst", src);

	/* Into a directory that does not exist yet (nor its parent). */
	r = ckpt_unpack_object(s, "bundle.tar.zst", dest, &g, &e);
	cr_assert_eq(r, 0, "%d %s", r, e.msg);
	cr_expect_eq(g, g1);
	compare_trees(src, dest);

	/* A new generation replaces the whole tree: what was there and is
	 * not in the object is gone. */
	snprintf(stray, sizeof(stray), "%s/stray", dest);
	write_text(dest, "stray", "left by a trainer\n", 0644);
	g2 = put_tree(s, "bundle.tar.zst", src2);
	cr_assert_neq(g2, g1);
	r = ckpt_unpack_object(s, "bundle.tar.zst", dest, &g, &e);
	cr_assert_eq(r, 0, "%d %s", r, e.msg);
	cr_expect_eq(g, g2);
	compare_trees(src2, dest);
	cr_expect_neq(access(stray, F_OK), 0);
	cr_expect_eq(count_entries(out, ".code"), 0,
		     "temporary directories left in %s", out);

	/* Failures leave dest as it was. */
	g = -1;
	r = ckpt_unpack_object(s, "missing.tar.zst", dest, &g, &e);
	cr_expect_eq(r, CLOUD_ENOTFOUND, "%d %s", r, e.msg);
	cr_expect_eq(g, 0);
	path_of(junk, "junk");
	cr_assert_eq(sh("head -c 100000 /dev/urandom > '%s'", junk), 0);
	put_file(s, "junk.tar.zst", junk);
	r = ckpt_unpack_object(s, "junk.tar.zst", dest, &g, &e);
	cr_expect_eq(r, CLOUD_ECORRUPT, "%d %s", r, e.msg);
	cr_expect(strstr(e.msg, "junk.tar.zst") &&
		  strstr(e.msg, "not a") != NULL, "%s", e.msg);
	/* zstd, but not a tar inside. */
	cr_assert_eq(sh("head -c 5000 /dev/urandom | zstd -q -c > '%s'",
			junk), 0);
	put_file(s, "junk.tar.zst", junk);
	r = ckpt_unpack_object(s, "junk.tar.zst", dest, &g, &e);
	cr_expect_eq(r, CLOUD_ECORRUPT, "%d %s", r, e.msg);
	compare_trees(src2, dest);
	cr_expect_eq(count_entries(out, ".code"), 0);

	cr_expect_eq(ckpt_unpack_object(s, "", dest, &g, &e), CKPT_EINVAL);
	cr_expect_eq(ckpt_unpack_object(s, "bundle.tar.zst", "", &g, &e),
		     CKPT_EINVAL);
	path_of(junk, "state/..");
	cr_expect_eq(ckpt_unpack_object(s, "bundle.tar.zst", junk, NULL, &e),
		     CKPT_EINVAL, "%s", e.msg);
	/* generation may be NULL. */
	cr_expect_eq(ckpt_unpack_object(s, "bundle.tar.zst", dest, NULL, &e),
		     0, "%s", e.msg);
	store_close(s);
}

/* The objects crafted to write outside dest that restores refuse are
 * refused here too, and dest stays as it was. */
Test(ckpt, unpack_object_refuses_unsafe_archives)
{
	static const char *const cases[] = {
		"[('ok', 'f', ''), ('../escape', 'f', '')]",
		"[('/tmp/slicectl-abs-escape2', 'f', '')]",
		"[('link', 's', '%s'), ('link/escape', 'f', '')]",
		"[('hl', 'h', '../../escape')]",
	};
	char good[PATHLEN], dest[PATHLEN], tarf[PATHLEN], outside[PATHLEN];
	char parent[PATHLEN];
	struct store *s = open_store();
	struct err e;

	path_of(good, "good");
	path_of(dest, "d/code");
	path_of(parent, "d");
	path_of(tarf, "evil.tar.zst");
	path_of(outside, "outside");
	make_tree(good, "good\n");
	cr_assert_eq(mkdir(outside, 0755), 0);
	put_tree(s, "bundle.tar.zst", good);
	cr_assert_eq(ckpt_unpack_object(s, "bundle.tar.zst", dest, NULL, &e),
		     0, "%s", e.msg);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char spec[PATHLEN * 2];
		int64_t g = -1;
		int r;

		snprintf(spec, sizeof(spec), cases[i], outside);
		write_evil_tar(spec, tarf);
		put_file(s, "bundle.tar.zst", tarf);
		r = ckpt_unpack_object(s, "bundle.tar.zst", dest, &g, &e);
		cr_expect_eq(r, CKPT_EUNSAFE, "case %zu: %d %s", i, r, e.msg);
		cr_expect(strstr(e.msg, "refused") &&
			  strstr(e.msg, "bundle.tar.zst"), "case %zu: %s", i,
			  e.msg);
		cr_expect_eq(g, 0);
		cr_expect_eq(count_entries(outside, ""), 2,
			     "case %zu wrote outside dest", i);
		cr_expect_neq(access("/tmp/slicectl-abs-escape2", F_OK), 0);
		compare_trees(good, dest);
		cr_expect_eq(count_entries(parent, ".code"), 0,
			     "case %zu left a temporary directory", i);
	}
	{
		char esc[PATHLEN];

		path_of(esc, "escape");
		cr_expect_neq(access(esc, F_OK), 0);
		path_of(esc, "d/escape");
		cr_expect_neq(access(esc, F_OK), 0);
	}
	store_close(s);
}
