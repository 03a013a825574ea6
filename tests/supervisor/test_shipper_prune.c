/*
 * The checkpoint shipper's pruning (worker 0 keeps the newest, the others
 * do not prune), malformed names and markers, and a bad URL refused; the
 * fixture and helpers are shipper_check.c's.
 */

#include "tests/supervisor/shipper_check.h"
#include "supervisor/shipper.h"
#include "checkpoint/checkpoint.h"
#include "tests/cloud/fake_gcs.h"
#include "tests/harness/harness.h"
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

TestSuite(shipper, .init = setup, .fini = teardown, .timeout = 120);

Test(shipper, worker_0_prunes_to_keep)
{
	struct shipper_config c;
	struct shipper *s;

	config_init(&c, file_url);
	c.prune = true;
	c.keep = 2;
	c.keep_every = 3;
	s = start(&c);
	commit_each(s, 7);
	/* Pruning follows each commit; give the last one a moment. */
	for (uint64_t until = mono_ms() + 5000;; sleep_ms(20)) {
		struct store *st = open_store(file_url);
		char got[256];

		describe_steps(st, got, sizeof(got));
		store_close(st);
		if (!strcmp(got, "3:c:1 6:c:1 7:c:1"))
			break;
		cr_assert_lt(mono_ms(), until, "after pruning: %s", got);
	}
	shipper_stop(s);
}

Test(shipper, other_workers_do_not_prune)
{
	struct shipper_config c;
	struct shipper *s;

	config_init(&c, file_url);
	c.keep = 1;
	s = start(&c);
	commit_each(s, 3);
	sleep_ms(200);
	expect_steps(file_url, "1:c:1 2:c:1 3:c:1");
	shipper_stop(s);
}

Test(shipper, odd_names_and_markers_without_steps)
{
	static const char *const garbage[] = {
		"step-x.done", "step-.done", "step-01.done", "step--1.done",
		"step-1.done.tmp", "stepx-1.done", ".done", "step-1done",
		"step-99999999999999999999.done", "step-1 .done",
	};
	struct shipper_config c;
	struct shipper_state st;
	struct shipper *s;
	char path[PATHLEN * 2];

	for (size_t i = 0; i < sizeof(garbage) / sizeof(*garbage); i++) {
		snprintf(path, sizeof(path), "%s/%s", ckpt_dir, garbage[i]);
		touch(path);
	}
	write_step_dir(ckpt_dir, 1, 1 * KiB);
	snprintf(path, sizeof(path), "%s/step-01", ckpt_dir);
	cr_assert_eq(mkdir(path, 0755), 0);
	mark_done(ckpt_dir, 9);          /* a marker without its step */
	write_step_dir(ckpt_dir, 4, 1 * KiB); /* in progress */
	snprintf(path, sizeof(path), "%s/step-6", ckpt_dir);
	touch(path);                     /* not a directory */
	mark_done(ckpt_dir, 6);
	/* Leftovers of an earlier supervisor in the spool. */
	cr_assert_eq(sh("mkdir -p '%s/step-8/sub' '%s/.trash-1-1' && "
			"echo x > '%s/step-8/sub/f' && chmod 500 "
			"'%s/step-8/sub'", spool_dir, spool_dir, spool_dir,
			spool_dir), 0);
	cr_assert_eq(sh("touch '%s/keep-me'", spool_dir), 0);

	config_init(&c, file_url);
	s = start(&c);
	make_step(ckpt_dir, 2, 10 * KiB);
	st = wait_state(s, committed_is, 2, 10000, "committed");
	sleep_ms(300);
	shipper_get(s, &st);
	cr_assert_eq(st.newest_done, 2);
	cr_assert_eq(st.dropped, 0);
	cr_assert(!exists("%s/step-9.done", ckpt_dir));
	cr_assert(!exists("%s/step-6.done", ckpt_dir));
	cr_assert(exists("%s/step-6", ckpt_dir));
	cr_assert(exists("%s/step-4", ckpt_dir));
	cr_assert(exists("%s/step-1", ckpt_dir));
	cr_assert(exists("%s/step-01", ckpt_dir));
	for (size_t i = 0; i < sizeof(garbage) / sizeof(*garbage); i++)
		cr_assert(exists("%s/%s", ckpt_dir, garbage[i]), "%s",
			  garbage[i]);
	/* Only what the shipper owns is cleared from the spool. */
	cr_assert(!exists("%s/step-8", spool_dir));
	cr_assert(!exists("%s/.trash-1-1", spool_dir));
	cr_assert(exists("%s/keep-me", spool_dir));
	expect_steps(file_url, "2:c:1");
	shipper_stop(s);
}

Test(shipper, start_refuses_a_bad_url)
{
	struct shipper_config c;
	struct shipper *s = (struct shipper *)&c;
	struct err e;

	config_init(&c, "s3://nope/run");
	cr_assert_eq(shipper_start(&s, &c, &e), CLOUD_EURL, "%s", e.msg);
	cr_assert_null(s);
	cr_assert(strstr(e.msg, "s3://nope/run"), "%s", e.msg);
}
