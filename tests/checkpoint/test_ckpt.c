/*
 * tests/checkpoint/test_ckpt.c: checkpoints in a file:// store end to
 * end: save, commit, list, verify, restore and prune, with the failures
 * they exist for: processes killed mid-save, racing committers, corrupt,
 * missing and unsafe parts, malformed manifests and full disks.
 * test_unpack_object.c has the one-object unpack of a run's code bundle.
 */
#include "checkpoint/checkpoint.h"

#include "tests/checkpoint/ckpt_check.h"
#include "tests/harness/harness.h"

#include <criterion/criterion.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

TestSuite(ckpt, .init = ckpt_setup, .fini = ckpt_teardown, .timeout = 600);

static void save_ok(struct store *s, const char *dir, uint64_t step,
		    const char *part, unsigned expected, bool committed)
{
	struct ckpt_save_options o;
	struct ckpt_save_result r;
	struct err e;
	int rc;

	ckpt_save_options_init(&o);
	o.part = part;
	o.parts_expected = expected;
	o.pack.threads = 2;
	rc = ckpt_save(s, dir, step, &o, &r, &e);
	cr_assert_eq(rc, 0, "save step %llu: %d %s",
		     (unsigned long long)step, rc, e.msg);
	cr_expect_eq(r.committed, committed, "step %llu committed=%d",
		     (unsigned long long)step, r.committed);
	cr_expect_gt(r.bytes, 0);
}

static uint64_t restore_ok(struct store *s, const char *dest,
			   uint64_t step, const char *part)
{
	struct ckpt_restore_options o = { .step = step, .part = part };
	uint64_t got = 0;
	struct err e;
	int rc = ckpt_restore(s, dest, &o, &got, &e);

	cr_assert_eq(rc, 0, "restore: %d %s", rc, e.msg);
	return got;
}

static void store_file_path(char *out, uint64_t step, const char *leaf)
{
	snprintf(out, PATHLEN * 2, "%s/checkpoints/step-%010llu/%s", bucket,
		 (unsigned long long)step, leaf);
}

Test(ckpt, round_trip_list_verify_restore)
{
	char src[PATHLEN], src2[PATHLEN], dest[PATHLEN];
	struct store *s = open_store();
	struct ckpt_list l;
	struct ckpt_verify_result v;
	struct err e;

	path_of(src, "src");
	path_of(src2, "src2");
	path_of(dest, "out/dest");
	make_tree(src, "one\n");
	make_tree(src2, "two\n");
	save_ok(s, src, 100, NULL, 1, true);
	save_ok(s, src2, 200, NULL, 1, true);

	cr_assert_eq(ckpt_list(s, &l, &e), 0, "%s", e.msg);
	cr_assert_eq(l.n, 2);
	cr_expect_eq(l.v[0].step, 100);
	cr_expect_eq(l.v[1].step, 200);
	cr_expect(l.v[1].committed && !l.v[1].corrupt);
	cr_assert_eq(l.v[1].nparts, 1);
	cr_expect_str_eq(l.v[1].parts[0].name,
			 CKPT_DEFAULT_PART ".tar.zst");
	cr_expect_eq(l.v[1].bytes, l.v[1].parts[0].size);
	cr_expect_eq(strlen(l.v[1].time), 20, "%s", l.v[1].time);
	ckpt_list_release(&l);

	cr_assert_eq(ckpt_verify(s, 0, &v, &e), 0, "%s", e.msg);
	cr_expect_eq(v.step, 200);
	cr_expect_eq(v.parts_ok, 1);
	cr_expect_eq(v.parts_bad, 0);

	cr_expect_eq(restore_ok(s, dest, 0, NULL), 200);
	compare_trees(src2, dest);
	/* Replacing an existing restore; an explicit older step. */
	cr_expect_eq(restore_ok(s, dest, 100, NULL), 100);
	compare_trees(src, dest);
	cr_expect_eq(count_entries(root, ".dest"), 0);
	{
		char out[PATHLEN];

		path_of(out, "out");
		cr_expect_eq(count_entries(out, ".dest"), 0,
			     "temporary directories left in %s", out);
	}

	/* A committed step's parts are final. */
	{
		struct ckpt_save_options o;

		ckpt_save_options_init(&o);
		cr_expect_eq(ckpt_save(s, src, 200, &o, NULL, &e),
			     CKPT_ECOMMITTED);
		cr_expect(strstr(e.msg, "committed"), "%s", e.msg);
		o.part = "../evil";
		cr_expect_eq(ckpt_save(s, src, 300, &o, NULL, &e),
			     CKPT_EINVAL);
	}
	cr_expect_eq(ckpt_verify(s, 7, &v, &e), CLOUD_ENOTFOUND);
	store_close(s);
}

Test(ckpt, multiple_parts_commit_when_all_present)
{
	char a[PATHLEN], b[PATHLEN], dest[PATHLEN], commit[PATHLEN * 2];
	struct store *s = open_store();
	struct ckpt_list l;
	struct err e;
	struct stat st;
	bool committed;

	path_of(a, "a");
	path_of(b, "b");
	path_of(dest, "dest");
	make_tree(a, "host a\n");
	make_tree(b, "host b\n");
	save_ok(s, a, 5, "slice-0-worker-0", 2, false);
	store_file_path(commit, 5, "COMMIT");
	cr_expect_neq(stat(commit, &st), 0, "committed with one part of 2");
	cr_assert_eq(ckpt_list(s, &l, &e), 0);
	cr_assert_eq(l.n, 1);
	cr_expect(!l.v[0].committed);
	cr_expect_eq(l.v[0].nparts, 1);
	ckpt_list_release(&l);
	cr_expect_eq(ckpt_restore(s, dest, NULL, NULL, &e), CLOUD_ENOTFOUND);

	/* Saving the same part again replaces its uncommitted part. */
	save_ok(s, a, 5, "slice-0-worker-0", 2, false);
	save_ok(s, b, 5, "slice-0-worker-1", 2, true);
	cr_assert_eq(ckpt_commit(s, 5, 2, &committed, &e), 0);
	cr_expect(committed);
	cr_assert_eq(ckpt_list(s, &l, &e), 0);
	cr_expect(l.v[0].committed);
	cr_expect_eq(l.v[0].nparts, 2);
	/* The committer learned the other host's unpacked size too. */
	for (size_t i = 0; i < l.v[0].nparts; i++)
		cr_expect_gt(l.v[0].parts[i].unpacked, l.v[0].parts[i].size,
			     "%s: %llu", l.v[0].parts[i].name,
			     (unsigned long long)l.v[0].parts[i].unpacked);
	ckpt_list_release(&l);

	cr_expect_eq(restore_ok(s, dest, 0, NULL), 5);
	compare_trees(a, dest);
	restore_ok(s, dest, 0, "slice-0-worker-1");
	compare_trees(b, dest);
	cr_expect_eq(ckpt_restore(s, dest,
				  &(struct ckpt_restore_options){ .step = 5, .part = "nope" },
				  NULL, &e), CLOUD_ENOTFOUND);
	store_close(s);
}

/* A save that is not the step's committer uploads its part and leaves
 * the commit to the committer, even when its part completes the step. */
Test(ckpt, a_non_committing_save_leaves_the_commit)
{
	char a[PATHLEN], commit[PATHLEN * 2];
	struct store *s = open_store();
	struct ckpt_save_options o;
	struct ckpt_save_result r;
	struct ckpt_list l;
	struct stat st;
	struct err e;
	bool committed;

	path_of(a, "a");
	make_tree(a, "host a\n");
	save_ok(s, a, 4, "slice-0-worker-0", 2, false);
	ckpt_save_options_init(&o);
	cr_expect(o.commit, "a save commits by default");
	o.part = "slice-0-worker-1";
	o.parts_expected = 2;
	o.commit = false;
	cr_assert_eq(ckpt_save(s, a, 4, &o, &r, &e), 0, "%s", e.msg);
	cr_expect(!r.committed);
	store_file_path(commit, 4, "COMMIT");
	cr_expect_neq(stat(commit, &st), 0, "a non-committer committed");
	cr_assert_eq(ckpt_commit(s, 4, 2, &committed, &e), 0, "%s", e.msg);
	cr_expect(committed);
	cr_assert_eq(ckpt_list(s, &l, &e), 0);
	cr_expect(l.v[0].committed);
	cr_expect_eq(l.v[0].nparts, 2);
	for (size_t i = 0; i < l.v[0].nparts; i++)
		cr_expect_gt(l.v[0].parts[i].unpacked, 0, "%s",
			     l.v[0].parts[i].name);
	ckpt_list_release(&l);
	store_close(s);
}

/* A new generation from step 5: worker 1's parts of steps 7 and 9 (never
 * committed) go; the committed step, an older uncommitted one and
 * worker 0's parts stay. */
Test(ckpt, discard_newer_removes_only_this_hosts_uncommitted_parts)
{
	char a[PATHLEN], path[PATHLEN * 2];
	struct store *s = open_store();
	struct stat st;
	struct err e;
	size_t n = 99;

	path_of(a, "a");
	make_tree(a, "a\n");
	save_ok(s, a, 3, "slice-0-worker-1", 2, false);
	save_ok(s, a, 5, "slice-0-worker-0", 2, false);
	save_ok(s, a, 5, "slice-0-worker-1", 2, true);
	save_ok(s, a, 7, "slice-0-worker-0", 2, false);
	save_ok(s, a, 7, "slice-0-worker-1", 2, true);
	cr_assert_eq(store_delete(s, "checkpoints/step-0000000007/COMMIT",
				  STORE_ANY_GENERATION, &e),
		     0, "%s", e.msg);
	save_ok(s, a, 9, "slice-0-worker-1", 2, false);

	cr_assert_eq(ckpt_discard_newer(s, "slice-0-worker-1", 5, &n, &e), 0,
		     "%s", e.msg);
	cr_expect_eq(n, 2);
	store_file_path(path, 7, "slice-0-worker-1.tar.zst");
	cr_expect_neq(stat(path, &st), 0, "step 7's part stayed");
	store_file_path(path, 9, "slice-0-worker-1.tar.zst");
	cr_expect_neq(stat(path, &st), 0, "step 9's part stayed");
	store_file_path(path, 7, "slice-0-worker-0.tar.zst");
	cr_expect_eq(stat(path, &st), 0, "another host's part went");
	store_file_path(path, 5, "slice-0-worker-1.tar.zst");
	cr_expect_eq(stat(path, &st), 0, "a committed step's part went");
	store_file_path(path, 3, "slice-0-worker-1.tar.zst");
	cr_expect_eq(stat(path, &st), 0, "an older step's part went");

	/* Nothing left to do: a second call deletes nothing. */
	cr_assert_eq(ckpt_discard_newer(s, "slice-0-worker-1", 5, &n, &e), 0,
		     "%s", e.msg);
	cr_expect_eq(n, 0);
	cr_expect_eq(ckpt_discard_newer(s, "", 5, &n, &e), CKPT_EINVAL);
	store_close(s);
}

/* Processes racing to commit one step: one COMMIT, seen by all. */
Test(ckpt, concurrent_committers)
{
	enum { PROCS = 4 };
	char src[PATHLEN];
	struct store *s = open_store();
	struct ckpt_list l;
	struct err e;
	pid_t pids[PROCS];
	int go[2];

	path_of(src, "src");
	make_tree(src, "race\n");
	for (int i = 0; i < PROCS; i++) {
		char part[32];

		snprintf(part, sizeof(part), "slice-0-worker-%d", i);
		save_ok(s, src, 9, part, PROCS + 1, false);
	}
	cr_assert_eq(pipe(go), 0);
	for (int i = 0; i < PROCS; i++) {
		pids[i] = fork();
		cr_assert(pids[i] >= 0);
		if (pids[i] == 0) {
			struct store *c;
			bool committed = false;
			char x;

			close(go[1]);
			if (read(go[0], &x, 1) < 0 ||
			    store_open(&c, url, &e) ||
			    ckpt_commit(c, 9, PROCS, &committed, &e))
				_exit(2);
			store_close(c);
			_exit(committed ? 0 : 1);
		}
	}
	close(go[0]);
	close(go[1]);
	for (int i = 0; i < PROCS; i++) {
		int st;

		cr_assert_eq(waitpid(pids[i], &st, 0), pids[i]);
		cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0,
			  "committer %d: %d", i, WEXITSTATUS(st));
	}
	cr_assert_eq(ckpt_list(s, &l, &e), 0);
	cr_assert_eq(l.n, 1);
	cr_expect(l.v[0].committed && !l.v[0].corrupt);
	cr_expect_eq(l.v[0].nparts, PROCS);
	ckpt_list_release(&l);
	store_close(s);
}

/* A save killed at any moment leaves no committed step and no visible
 * partial part: a part, if there, is whole and verifies. */
Test(ckpt, killed_saves_never_leave_a_partial_part)
{
	char src[PATHLEN], big[PATHLEN * 2];
	struct store *s = open_store();
	unsigned seed = (unsigned)time(NULL);

	path_of(src, "src");
	make_tree(src, "kill\n");
	snprintf(big, sizeof(big), "%s/big2.bin", src);
	write_random(big, 48u << 20, 99);
	srand(seed);
	for (int round = 0; round < 6; round++) {
		struct ckpt_list l;
		struct err e;
		pid_t pid = fork();
		int st;

		cr_assert(pid >= 0);
		if (pid == 0) {
			struct store *c;
			struct ckpt_save_options o;

			ckpt_save_options_init(&o);
			o.pack.threads = 1;
			if (store_open(&c, url, &e) ||
			    ckpt_save(c, src, 1000 + (uint64_t)round, &o,
				      NULL, &e))
				_exit(1);
			_exit(0);
		}
		usleep((useconds_t)(rand() % 600000));
		kill(pid, SIGKILL);
		cr_assert_eq(waitpid(pid, &st, 0), pid);
		cr_assert_eq(ckpt_list(s, &l, &e), 0, "%s", e.msg);
		for (size_t i = 0; i < l.n; i++) {
			struct ckpt_step *step = &l.v[i];

			/* A save killed between writing COMMIT and
			 * returning has committed (ASan's slower exit
			 * showed the window): what must never be is a
			 * part that is not whole, committed or not. */
			cr_assert(step->step >= 1000 && step->step < 1006);
			for (size_t k = 0; k < step->nparts; k++) {
				char part[PATHLEN * 2];

				store_file_path(part, step->step,
						step->parts[k].name);
				cr_expect_eq(sh("zstd -q -t '%s'", part),
					     0, "seed %u: partial part %s "
					     "visible", seed, part);
			}
		}
		ckpt_list_release(&l);
	}
	store_close(s);
}

static void flip_byte(const char *path, off_t off)
{
	int fd = open(path, O_RDWR);
	unsigned char c;

	cr_assert(fd >= 0, "%s", path);
	cr_assert_eq(pread(fd, &c, 1, off), 1);
	c ^= 0x40;
	cr_assert_eq(pwrite(fd, &c, 1, off), 1);
	close(fd);
}

Test(ckpt, corrupt_missing_and_uncommitted_fall_back)
{
	char s1[PATHLEN], s2[PATHLEN], dest[PATHLEN], part[PATHLEN * 2];
	struct store *s = open_store();
	struct ckpt_verify_result v;
	struct ckpt_list l;
	struct err e;

	path_of(s1, "s1");
	path_of(s2, "s2");
	path_of(dest, "dest");
	make_tree(s1, "first\n");
	make_tree(s2, "second\n");
	save_ok(s, s1, 1, NULL, 1, true);
	save_ok(s, s2, 2, NULL, 1, true);

	/* Corrupt part of the newest step. */
	store_file_path(part, 2, CKPT_DEFAULT_PART ".tar.zst");
	flip_byte(part, 1000);
	cr_assert_eq(ckpt_verify(s, 0, &v, &e), 0, "%s", e.msg);
	cr_expect_eq(v.step, 2);
	cr_expect_eq(v.parts_bad, 1);
	cr_expect(strstr(v.problem, "corrupt"), "%s", v.problem);
	cr_expect_eq(restore_ok(s, dest, 0, NULL), 1);
	compare_trees(s1, dest);
	/* Asked for by number, it is not replaced by another. */
	cr_expect_eq(ckpt_restore(s, dest,
				  &(struct ckpt_restore_options){ .step = 2, .part = NULL },
				  NULL, &e), CLOUD_ECORRUPT);
	compare_trees(s1, dest);

	/* Missing part. */
	save_ok(s, s2, 3, NULL, 1, true);
	store_file_path(part, 3, CKPT_DEFAULT_PART ".tar.zst");
	cr_assert_eq(unlink(part), 0);
	cr_assert_eq(ckpt_verify(s, 3, &v, &e), 0);
	cr_expect_eq(v.parts_bad, 1);
	cr_expect(strstr(v.problem, "missing"), "%s", v.problem);
	cr_expect_eq(restore_ok(s, dest, 0, NULL), 1);

	/* Missing COMMIT: not a step restore looks at. */
	save_ok(s, s2, 4, NULL, 1, true);
	store_file_path(part, 4, "COMMIT");
	cr_assert_eq(unlink(part), 0);
	/* Malformed COMMIT: listed as corrupt, skipped. */
	save_ok(s, s2, 5, NULL, 1, true);
	{
		const char *bad = "{\"step\": 5, \"parts\": [}";

		cr_assert_eq(store_put(s, "checkpoints/step-0000000005/COMMIT",
				       bad, strlen(bad), STORE_ANY_GENERATION,
				       NULL, &e), 0, "%s", e.msg);
	}
	cr_assert_eq(ckpt_list(s, &l, &e), 0, "%s", e.msg);
	cr_assert_eq(l.n, 5);
	cr_expect(!l.v[3].committed);
	cr_expect(l.v[4].committed && l.v[4].corrupt);
	ckpt_list_release(&l);
	cr_assert_eq(ckpt_verify(s, 0, &v, &e), 0);
	cr_expect_eq(v.step, 5);
	cr_expect_eq(v.parts_bad, 1);
	cr_expect(strstr(v.problem, "manifest"), "%s", v.problem);
	cr_expect_eq(restore_ok(s, dest, 0, NULL), 1);
	compare_trees(s1, dest);

	/* Nothing restorable: an error, dest unchanged. */
	store_file_path(part, 1, CKPT_DEFAULT_PART ".tar.zst");
	cr_assert_eq(truncate(part, 100), 0);
	cr_expect_eq(ckpt_restore(s, dest, NULL, NULL, &e), CLOUD_ECORRUPT);
	cr_expect(strstr(e.msg, "no committed step"), "%s", e.msg);
	compare_trees(s1, dest);
	store_close(s);
}

Test(ckpt, prune_keeps_what_it_must)
{
	char src[PATHLEN], commit[PATHLEN * 2];
	struct store *s = open_store();
	struct ckpt_prune_options o;
	struct ckpt_prune_result r;
	struct ckpt_list l;
	struct err e;
	struct stat st;
	char got[256] = "";

	path_of(src, "src");
	cr_assert_eq(mkdir(src, 0755), 0);
	write_text(src, "w", "weights\n", 0644);
	for (uint64_t step = 10; step <= 60; step += 10)
		save_ok(s, src, step, NULL, 1, true);
	/* An uncommitted step older than the newest committed, fresh: a
	 * live writer. And one newer than it. */
	save_ok(s, src, 35, NULL, 2, false);
	save_ok(s, src, 70, NULL, 2, false);

	ckpt_prune_options_init(&o);
	o.keep = 2;
	o.keep_every = 20;
	cr_assert_eq(ckpt_prune(s, &o, &r, &e), 0, "%s", e.msg);
	cr_expect_eq(r.steps_deleted, 2, "%zu", r.steps_deleted);
	/* Each: COMMIT, the part and the part's unpacked-size object. */
	cr_expect_eq(r.objects_deleted, 6, "%zu", r.objects_deleted);
	cr_expect_gt(r.bytes_freed, 0);
	cr_assert_eq(ckpt_list(s, &l, &e), 0);
	for (size_t i = 0; i < l.n; i++) {
		char one[32];

		snprintf(one, sizeof(one), "%llu%s ",
			 (unsigned long long)l.v[i].step,
			 l.v[i].committed ? "" : "u");
		strcat(got, one);
	}
	ckpt_list_release(&l);
	cr_expect_str_eq(got, "20 35u 40 50 60 70u ");
	/* The folders of deleted steps are gone too. */
	store_file_path(commit, 10, "");
	cr_expect_neq(stat(commit, &st), 0);

	/* Stale uncommitted steps older than the newest committed go. */
	o.stale_s = 0;
	cr_assert_eq(ckpt_prune(s, &o, &r, &e), 0, "%s", e.msg);
	cr_expect_eq(r.steps_deleted, 1);
	cr_assert_eq(ckpt_list(s, &l, &e), 0);
	cr_expect_eq(l.n, 5);
	ckpt_list_release(&l);

	o.keep = 0;
	cr_expect_eq(ckpt_prune(s, &o, &r, &e), CKPT_EINVAL);
	/* keep 1 never deletes the newest committed step. */
	o.keep = 1;
	o.keep_every = 0;
	cr_assert_eq(ckpt_prune(s, &o, &r, &e), 0);
	cr_assert_eq(ckpt_list(s, &l, &e), 0);
	cr_expect_eq(l.n, 2);
	cr_expect_eq(l.v[0].step, 60);
	cr_expect(l.v[0].committed);
	ckpt_list_release(&l);
	store_close(s);
}

/* A restore that runs out of room (a file size limit in a child) leaves
 * dest as it was and no temporary directory. */
Test(ckpt, restore_into_full_disk_leaves_dest)
{
	char src[PATHLEN], small[PATHLEN], dest[PATHLEN];
	struct store *s = open_store();
	pid_t pid;
	int st;

	path_of(src, "src");
	path_of(small, "small");
	path_of(dest, "dest");
	make_tree(src, "big one\n");
	cr_assert_eq(mkdir(small, 0755), 0);
	write_text(small, "only", "only\n", 0644);
	save_ok(s, small, 1, NULL, 1, true);
	restore_ok(s, dest, 0, NULL);
	save_ok(s, src, 2, NULL, 1, true);
	store_close(s);

	pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		struct rlimit rl = { 1 << 20, 1 << 20 };
		struct err e;
		int r;

		signal(SIGXFSZ, SIG_IGN);
		if (setrlimit(RLIMIT_FSIZE, &rl) ||
		    store_open(&s, url, &e))
			_exit(90);
		r = ckpt_restore(s, dest, NULL, NULL, &e);
		if (r != CLOUD_ENOSPACE || !strstr(e.msg, "limit")) {
			fprintf(stderr, "restore gave %d: %s\n", r, e.msg);
			_exit(91);
		}
		_exit(0);
	}
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFEXITED(st), "signal %d", WTERMSIG(st));
	cr_expect_eq(WEXITSTATUS(st), 0);
	compare_trees(small, dest);
	cr_expect_eq(count_entries(root, ".dest"), 0);
}

/* Archives crafted to write outside dest are refused, and nothing lands
 * outside. */
Test(ckpt, unsafe_archives_refused)
{
	static const char *const cases[] = {
		/* python tarfile: (name, type, target) */
		"[('ok', 'f', ''), ('../escape', 'f', '')]",
		"[('/tmp/slicectl-abs-escape', 'f', '')]",
		"[('link', 's', '%s'), ('link/escape', 'f', '')]",
		"[('hl', 'h', '../../escape')]",
	};
	char dest[PATHLEN], tarf[PATHLEN], outside[PATHLEN];
	struct store *s = open_store();

	path_of(dest, "d/dest");
	path_of(tarf, "evil.tar.zst");
	path_of(outside, "outside");
	cr_assert_eq(mkdir(outside, 0755), 0);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char spec[PATHLEN * 2], name[128];
		struct store_upload *u;
		struct ckpt_list l;
		struct err e;
		bool committed;
		FILE *f;
		char buf[65536];
		size_t n;
		int r;

		snprintf(spec, sizeof(spec), cases[i], outside);
		write_evil_tar(spec, tarf);
		snprintf(name, sizeof(name),
			 "checkpoints/step-%010zu/" CKPT_DEFAULT_PART
			 ".tar.zst", i + 1);
		cr_assert_eq(store_upload_begin(s, name, STORE_CREATE_ONLY,
						&u, &e), 0);
		f = fopen(tarf, "rb");
		cr_assert(f);
		while ((n = fread(buf, 1, sizeof(buf), f)) > 0)
			cr_assert_eq(store_upload_write(u, buf, n, &e), 0);
		fclose(f);
		cr_assert_eq(store_upload_finish(u, NULL, &e), 0);
		cr_assert_eq(ckpt_commit(s, i + 1, 1, &committed, &e), 0);
		cr_assert(committed);

		r = ckpt_restore(s, dest,
				 &(struct ckpt_restore_options){ .step = i + 1, .part = NULL },
				 NULL, &e);
		cr_expect_eq(r, CKPT_EUNSAFE, "case %zu: %d %s", i, r, e.msg);
		cr_expect(strstr(e.msg, "refused"), "case %zu: %s", i, e.msg);
		cr_expect_eq(count_entries(outside, ""), 2,
			     "case %zu wrote outside dest", i);
		cr_expect_neq(access("/tmp/slicectl-abs-escape", F_OK), 0);
		cr_assert_eq(ckpt_list(s, &l, &e), 0);
		ckpt_list_release(&l);
	}
	{
		char esc[PATHLEN];

		path_of(esc, "escape");
		cr_expect_neq(access(esc, F_OK), 0);
		path_of(esc, "d/escape");
		cr_expect_neq(access(esc, F_OK), 0);
	}
	cr_expect_eq(count_entries(root, ".dest"), 0);
	store_close(s);
}

Test(ckpt, ten_thousand_small_files)
{
	char src[PATHLEN], dest[PATHLEN];
	struct store *s = open_store();

	path_of(src, "src");
	path_of(dest, "dest");
	cr_assert_eq(sh("mkdir -p '%s' && cd '%s' && for d in $(seq 0 "
			    "99); do mkdir d$d; for f in $(seq 0 99); do "
			    "echo \"$d $f\" > d$d/f$f; done; done", src,
			    src), 0);
	save_ok(s, src, 1, NULL, 1, true);
	restore_ok(s, dest, 0, NULL);
	cr_expect_eq(sh("test $(find '%s' -type f | wc -l) -eq 10000",
			    dest), 0);
	compare_trees(src, dest);
	store_close(s);
}

/* A 2 GiB sparse file saves and restores with bounded memory. */
Test(ckpt, sparse_2gib_bounded_memory)
{
	char src[PATHLEN], dest[PATHLEN], file[PATHLEN * 2];
	pid_t pid;
	int st;

	path_of(src, "src");
	path_of(dest, "dest");
	cr_assert_eq(mkdir(src, 0755), 0);
	snprintf(file, sizeof(file), "%s/sparse.bin", src);
	cr_assert_eq(sh("truncate -s 2G '%s' && printf tail | dd "
			    "of='%s' bs=1 seek=2147483000 conv=notrunc "
			    "status=none", file, file), 0);
	pid = fork();
	cr_assert(pid >= 0);
	if (pid == 0) {
		struct ckpt_save_options o;
		struct rusage ru;
		struct store *s;
		struct err e;

		ckpt_save_options_init(&o);
		o.pack.threads = 2;
		if (store_open(&s, url, &e) ||
		    ckpt_save(s, src, 1, &o, NULL, &e) ||
		    ckpt_restore(s, dest, NULL, NULL, &e)) {
			fprintf(stderr, "%s\n", e.msg);
			_exit(1);
		}
		getrusage(RUSAGE_SELF, &ru);
		/* KiB: well under the 2 GiB that staging would take. */
		if (ru.ru_maxrss > 400 * 1024) {
			fprintf(stderr, "max RSS %ld KiB\n", ru.ru_maxrss);
			_exit(2);
		}
		_exit(0);
	}
	cr_assert_eq(waitpid(pid, &st, 0), pid);
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child: %d",
		  WEXITSTATUS(st));
	snprintf(file, sizeof(file), "%s/sparse.bin", dest);
	cr_expect_eq(sh("cmp -s '%s/sparse.bin' '%s'", src, file), 0);
}
