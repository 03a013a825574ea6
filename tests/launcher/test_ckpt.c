/*
 * slicectl ckpt, end to end, through file:// and through the GCS fake:
 * save, ls, verify, restore, prune, and what a user sees when things are
 * wrong.
 */
#include "tests/cloud/fake_gcs.h"
#include "tests/harness/harness.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char tmp[HARNESS_PATH];
static struct fake_gcs fake;
static char fake_env[96];

static void up(void)
{
	cr_assert_eq(make_temp_dir(tmp, sizeof(tmp), "ckpt"), 0);
}

static void down(void)
{
	if (fake.proc.pid > 0)
		fake_gcs_stop(&fake);
	rm_rf(tmp);
}

TestSuite(ckpt, .init = up, .fini = down, .timeout = 300);

/* A backend under test: its URL and the environment that reaches it. */
struct backend {
	char url[HARNESS_PATH + 32];
	const char *env[2];
};

static void file_backend(struct backend *b)
{
	snprintf(b->url, sizeof(b->url), "file://%s/store/run-1", tmp);
	b->env[0] = NULL;
}

static void gcs_backend(struct backend *b)
{
	cr_assert_eq(fake_gcs_start(&fake, NULL), 0, "GCS fake did not start");
	snprintf(fake_env, sizeof(fake_env), "STORAGE_EMULATOR_HOST=%s",
		 fake.base);
	snprintf(b->url, sizeof(b->url), "gs://bucket/prefix/run-1");
	b->env[0] = fake_env;
	b->env[1] = NULL;
}

static int ckpt(const struct backend *b, struct run_result *r,
		const char *const *args)
{
	const char *argv[32];
	size_t n = 0;

	argv[n++] = "ckpt";
	for (size_t i = 0; args[i]; i++)
		argv[n++] = strcmp(args[i], "URL") ? args[i] : b->url;
	argv[n] = NULL;
	cr_assert_eq(run_slicectl(r, argv, b->env), 0);
	return r->status;
}

static void make_tree(const char *dir, const char *salt)
{
	cr_assert_eq(sh("set -e; mkdir -p '%s/a b/empty' '%s/deep/1/2'; "
			"cd '%s'; printf '%s' > 'a b/f i l e'; "
			"printf '%%s' \"$(printf 'new\\nline')\" > \"$(printf "
			"'n\\nl')\"; head -c 3000000 /dev/urandom > deep/1/2/"
			"weights.bin; ln -sf '../a b' deep/link; chmod 751 deep",
			dir, dir, dir, salt), 0);
}

static void assert_same_tree(const char *a, const char *b)
{
	cr_assert_eq(sh("diff -r --no-dereference '%s' '%s' >&2 && "
			"test \"$(cd '%s' && find . -printf '%%P %%y %%m %%l\\n' "
			"| sort)\" = \"$(cd '%s' && find . -printf "
			"'%%P %%y %%m %%l\\n' | sort)\"", a, b, a, b), 0,
		     "%s and %s differ", a, b);
}

static void round_trip(const struct backend *b)
{
	struct run_result r;
	char src1[HARNESS_PATH + 8], src2[HARNESS_PATH + 8];
	char out[HARNESS_PATH + 8], out1[HARNESS_PATH + 8];

	snprintf(src1, sizeof(src1), "%s/src1", tmp);
	snprintf(src2, sizeof(src2), "%s/src2", tmp);
	snprintf(out, sizeof(out), "%s/out", tmp);
	snprintf(out1, sizeof(out1), "%s/out1", tmp);
	make_tree(src1, "one");
	make_tree(src2, "two");
	const char *save1[] = { "save", src1, "URL", "--step", "100", NULL };
	cr_assert_eq(ckpt(b, &r, save1), 0, "%s", r.err);
	cr_assert(strstr(r.out, "saved step 100 part slice-0-worker-0"), "%s",
		  r.out);
	cr_assert(strstr(r.out, "step committed"), "%s", r.out);
	run_result_release(&r);
	const char *save2[] = { "save", src2, "URL", "--step", "200",
				"--format", "json", NULL };
	cr_assert_eq(ckpt(b, &r, save2), 0, "%s", r.err);
	cr_assert(strstr(r.out, "\"step\":200,"), "%s", r.out);
	cr_assert(strstr(r.out, "\"committed\":true"), "%s", r.out);
	run_result_release(&r);

	const char *ls[] = { "ls", "URL", "--format", "json", NULL };
	cr_assert_eq(ckpt(b, &r, ls), 0, "%s", r.err);
	cr_assert_eq(count_substr(r.out, "\"committed\":true"), 2, "%s", r.out);
	cr_assert(strstr(r.out, "{\"step\":100,"), "%s", r.out);
	run_result_release(&r);

	const char *verify[] = { "verify", "URL", NULL };
	cr_assert_eq(ckpt(b, &r, verify), 0, "%s", r.err);
	cr_assert(strstr(r.out, "step 200 verified"), "%s", r.out);
	run_result_release(&r);

	const char *restore[] = { "restore", "URL", out, NULL };
	cr_assert_eq(ckpt(b, &r, restore), 0, "%s", r.err);
	cr_assert(strstr(r.out, "restored step 200"), "%s", r.out);
	run_result_release(&r);
	assert_same_tree(src2, out);

	const char *restore1[] = { "restore", "URL", out1, "--step", "100",
				   NULL };
	cr_assert_eq(ckpt(b, &r, restore1), 0, "%s", r.err);
	run_result_release(&r);
	assert_same_tree(src1, out1);
}

Test(ckpt, round_trip_file)
{
	struct backend b;

	file_backend(&b);
	round_trip(&b);
}

Test(ckpt, round_trip_gcs_fake)
{
	struct backend b;

	gcs_backend(&b);
	round_trip(&b);
}

static void parts(const struct backend *b)
{
	struct run_result r;
	char src[HARNESS_PATH + 8], out[HARNESS_PATH + 8];

	snprintf(src, sizeof(src), "%s/src", tmp);
	snprintf(out, sizeof(out), "%s/out", tmp);
	make_tree(src, "parts");
	const char *a[] = { "save", src, "URL", "--step", "7", "--part",
			    "slice-0-worker-0", "--parts-expected", "2", NULL };
	cr_assert_eq(ckpt(b, &r, a), 0, "%s", r.err);
	cr_assert(strstr(r.out, "waiting for the other parts"), "%s", r.out);
	run_result_release(&r);

	/* Nothing committed: nothing to restore, and DEST is not created. */
	const char *restore[] = { "restore", "URL", out, NULL };
	cr_assert_eq(ckpt(b, &r, restore), 1);
	cr_assert(strstr(r.err, "committed"), "%s", r.err);
	cr_assert_neq(sh("test -e '%s'", out), 0);
	run_result_release(&r);

	const char *bpart[] = { "save", src, "URL", "--step", "7", "--part",
				"slice-0-worker-1", "--parts-expected", "2",
				NULL };
	cr_assert_eq(ckpt(b, &r, bpart), 0, "%s", r.err);
	cr_assert(strstr(r.out, "step committed"), "%s", r.out);
	run_result_release(&r);

	const char *restore_b[] = { "restore", "URL", out, "--part",
				    "slice-0-worker-1", NULL };
	cr_assert_eq(ckpt(b, &r, restore_b), 0, "%s", r.err);
	run_result_release(&r);
	assert_same_tree(src, out);
}

Test(ckpt, parts_commit_when_all_are_there_file)
{
	struct backend b;

	file_backend(&b);
	parts(&b);
}

Test(ckpt, parts_commit_when_all_are_there_gcs_fake)
{
	struct backend b;

	gcs_backend(&b);
	parts(&b);
}

Test(ckpt, corrupt_part_is_found_and_restore_falls_back)
{
	struct backend b;
	struct run_result r;
	char src[HARNESS_PATH + 8], out[HARNESS_PATH + 8];

	file_backend(&b);
	snprintf(src, sizeof(src), "%s/src", tmp);
	snprintf(out, sizeof(out), "%s/out", tmp);
	make_tree(src, "x");
	for (int step = 1; step <= 2; step++) {
		char n[8];
		const char *save[] = { "save", src, "URL", "--step", n, NULL };

		snprintf(n, sizeof(n), "%d", step);
		cr_assert_eq(ckpt(&b, &r, save), 0, "%s", r.err);
		run_result_release(&r);
	}
	/* Flip one byte in the middle of step 2's part. */
	cr_assert_eq(sh("f='%s/store/run-1/checkpoints/step-0000000002/"
			"slice-0-worker-0.tar.zst' && "
			"printf '\\377' | dd of=\"$f\" bs=1 seek=100000 "
			"conv=notrunc 2>/dev/null", tmp), 0);
	const char *verify[] = { "verify", "URL", NULL };
	cr_assert_eq(ckpt(&b, &r, verify), 3, "%s", r.err);
	cr_assert(strstr(r.out, "step 2 is CORRUPT"), "%s", r.out);
	run_result_release(&r);

	const char *restore[] = { "restore", "URL", out, NULL };
	cr_assert_eq(ckpt(&b, &r, restore), 0, "%s", r.err);
	cr_assert(strstr(r.out, "restored step 1"), "%s", r.out);
	cr_assert(strstr(r.err, "step 2"), "says why it fell back: %s", r.err);
	run_result_release(&r);
	assert_same_tree(src, out);
}

Test(ckpt, prune_keeps_newest_and_every_mth)
{
	struct backend b;
	struct run_result r;
	char src[HARNESS_PATH + 8];

	file_backend(&b);
	snprintf(src, sizeof(src), "%s/src", tmp);
	cr_assert_eq(sh("mkdir -p '%s' && echo w > '%s/w'", src, src), 0);
	for (int step = 1; step <= 6; step++) {
		char n[8];
		const char *save[] = { "save", src, "URL", "--step", n, NULL };

		snprintf(n, sizeof(n), "%d", step);
		cr_assert_eq(ckpt(&b, &r, save), 0, "%s", r.err);
		run_result_release(&r);
	}
	const char *prune[] = { "prune", "URL", "--keep", "2", "--keep-every",
				"3", "--format", "json", NULL };
	cr_assert_eq(ckpt(&b, &r, prune), 0, "%s", r.err);
	cr_assert(strstr(r.out, "\"steps_deleted\":3"), "%s", r.out);
	run_result_release(&r);
	const char *ls[] = { "ls", "URL", NULL };
	cr_assert_eq(ckpt(&b, &r, ls), 0, "%s", r.err);
	cr_assert(strstr(r.out, "\n3 "), "%s", r.out);
	cr_assert(strstr(r.out, "\n5 "), "%s", r.out);
	cr_assert(strstr(r.out, "\n6 "), "%s", r.out);
	cr_assert_null(strstr(r.out, "\n1 "), "%s", r.out);
	cr_assert_null(strstr(r.out, "\n4 "), "%s", r.out);
	run_result_release(&r);
}

/* A file-size limit stands in for a full disk: the restore fails with a
 * clear error and DEST keeps what it had. */
Test(ckpt, restore_into_a_full_disk_leaves_dest_intact)
{
	struct backend b;
	struct run_result r;
	char src[HARNESS_PATH + 8], out[HARNESS_PATH + 8];

	file_backend(&b);
	snprintf(src, sizeof(src), "%s/src", tmp);
	snprintf(out, sizeof(out), "%s/out", tmp);
	make_tree(src, "full");
	const char *save[] = { "save", src, "URL", "--step", "1", NULL };
	cr_assert_eq(ckpt(&b, &r, save), 0, "%s", r.err);
	run_result_release(&r);
	cr_assert_eq(sh("mkdir -p '%s' && echo precious > '%s/keep'", out,
			out), 0);
	cr_assert_neq(sh("ulimit -f 1000 && '%s' ckpt restore '%s' '%s' "
			 "2> '%s/err'", slicectl_bin(), b.url, out, tmp), 0);
	cr_assert_eq(sh("test \"$(cat '%s/keep')\" = precious && "
			"test \"$(ls '%s')\" = keep", out, out), 0,
		     "DEST changed");
	char path[HARNESS_PATH + 8];
	snprintf(path, sizeof(path), "%s/err", tmp);
	char *err = read_file(path, NULL);
	cr_assert(err && (strstr(err, "full") || strstr(err, "too large") ||
			  strstr(err, "limit")), "%s", err ? err : "");
	free(err);
}

Test(ckpt, bad_arguments_and_urls)
{
	static const char *const cases[][6] = {
		{ "ckpt", "save", "/tmp", "file:///tmp/x", NULL },
		{ "ckpt", "ls", "http://example/x", NULL },
		{ "ckpt", "ls", "gs://", NULL },
		{ "ckpt", "ls", "file://relative/path", NULL },
		{ "ckpt", "restore", "file:///tmp/x", NULL },
		{ "ckpt", "frobnicate", NULL },
		{ "ckpt", "prune", "file:///tmp/x", NULL },
	};
	static const char *const messages[] = {
		"--step", "http://example/x", "gs://", "file://relative/path",
		"takes 2 arguments", "not a ckpt command", "--keep",
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct run_result r;

		cr_assert_eq(run_slicectl(&r, cases[i], NULL), 0);
		cr_assert_eq(r.status, 2, "case %zu: %s", i, r.err);
		cr_assert(strstr(r.err, messages[i]), "case %zu: %s", i, r.err);
		run_result_release(&r);
	}
}
