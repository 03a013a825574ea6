/*
 * tests/supervisor/test_shipper.c: the checkpoint shipper end to end, with
 * a trainer simulated by the test (step-N/ then step-N.done): taking,
 * uploading and committing steps into file:// stores and the GCS fake;
 * two workers' parts; coalescing; a 20 s outage; the spool bound.
 * test_shipper_flush.c, test_shipper_stop.c and test_shipper_prune.c
 * have the rest; shipper_check.c what they share.
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

Test(shipper, a_step_is_taken_uploaded_and_committed)
{
	struct shipper_config c;
	struct shipper_state st;
	struct shipper *s;
	struct store *store;
	struct ckpt_verify_result vr;
	uint64_t restored;
	char dest[PATHLEN];
	struct err e;
	int fds[2];

	cr_assert_eq(pipe(fds), 0);
	cr_assert_eq(fcntl(fds[0], F_SETFL, O_NONBLOCK), 0);
	config_init(&c, file_url);
	c.notify_fd = fds[1];
	make_step(ckpt_dir, 7, 300 * KiB);
	s = start(&c);
	st = wait_state(s, committed_is, 7, 10000, "committed");
	cr_assert_eq(st.newest_done, 7);
	cr_assert_eq(st.newest_uploaded, 7);
	cr_assert_eq(st.waiting, 0);
	cr_assert_eq(st.dropped, 0);
	cr_assert_eq(st.failures, 0);
	cr_assert_gt(st.upload_bps, 0);
	/* Moved out of the trainer's directory, marker gone, spool empty. */
	cr_assert(!exists("%s/step-7", ckpt_dir));
	cr_assert(!exists("%s/step-7.done", ckpt_dir));
	wait_spool_entries(0, 5000);
	cr_assert_gt(drain(fds[0]), 0, "no notification");

	/* What was uploaded is what the trainer wrote. */
	expect_steps(file_url, "7:c:1");
	store = open_store(file_url);
	cr_assert_eq(ckpt_verify(store, 7, &vr, &e), 0, "%s", e.msg);
	cr_assert_eq(vr.parts_ok, 1);
	cr_assert_eq(vr.parts_bad, 0);
	snprintf(dest, sizeof(dest), "%s/restored", root);
	cr_assert_eq(ckpt_restore(store, dest, NULL, &restored, &e), 0, "%s",
		     e.msg);
	cr_assert_eq(restored, 7);
	store_close(store);
	write_step_dir(root, 7, 300 * KiB); /* the same bytes again */
	cr_assert_eq(sh("cmp -s '%s/step-7/state.bin' '%s/state.bin' && "
			"cmp -s '%s/step-7/meta.json' '%s/meta.json'", root,
			dest, root, dest), 0);

	/* Nothing changes: no more notifications. */
	sleep_ms(300);
	drain(fds[0]);
	sleep_ms(300);
	cr_assert_eq(drain(fds[0]), 0);

	/* A step older than the newest uploaded one, written after it,
	 * goes out too: a trainer that went back to it means it. */
	make_step(ckpt_dir, 5, 10 * KiB);
	shipper_kick(s);
	st = wait_state(s, uploaded_is, 5, 5000, "step 5 uploaded");
	cr_assert_eq(st.dropped, 0);
	cr_assert_eq(st.newest_committed, 7);
	cr_assert(!exists("%s/step-5.done", ckpt_dir));
	wait_spool_entries(0, 5000);
	expect_steps(file_url, "5:c:1 7:c:1");
	cr_assert_gt(drain(fds[0]), 0, "no notification for the upload");
	shipper_stop(s);
	close(fds[0]);
	close(fds[1]);
}

Test(shipper, two_workers_commit_once_both_parts_are_up)
{
	char dir0[PATHLEN], dir1[PATHLEN], sp0[PATHLEN], sp1[PATHLEN];
	struct shipper_config c0, c1;
	struct shipper *s0, *s1;
	struct shipper_state st;

	snprintf(dir0, sizeof(dir0), "%s/w0", root);
	snprintf(dir1, sizeof(dir1), "%s/w1", root);
	snprintf(sp0, sizeof(sp0), "%s/spool0", root);
	snprintf(sp1, sizeof(sp1), "%s/spool1", root);
	cr_assert_eq(mkdir(dir0, 0755), 0);
	cr_assert_eq(mkdir(dir1, 0755), 0);
	config_init(&c0, file_url);
	c0.ckpt_dir = dir0;
	c0.spool_dir = sp0;
	c0.parts_expected = 2;
	c0.prune = true;
	c1 = c0;
	c1.ckpt_dir = dir1;
	c1.spool_dir = sp1;
	c1.part = "slice-0-worker-1";
	c1.rank = 1;
	c1.takeover_ms = 500;
	c1.prune = false;
	s0 = start(&c0);
	s1 = start(&c1);

	make_step(dir0, 10, 100 * KiB);
	st = wait_state(s0, uploaded_is, 10, 10000, "worker 0 uploaded");
	sleep_ms(200);
	shipper_get(s0, &st);
	cr_assert_eq(st.newest_committed, -1);
	expect_steps(file_url, "10:u:1");

	make_step(dir1, 10, 120 * KiB);
	/* Worker 0, the committer, commits on its next pass; worker 1
	 * only uploads, and sees the commit on its takeover turn. */
	wait_state(s0, committed_is, 10, 10000, "worker 0 committed");
	wait_state(s1, committed_is, 10, 10000, "worker 1 saw the commit");
	expect_steps(file_url, "10:c:2");
	shipper_stop(s1);
	shipper_stop(s0);
}

Test(shipper, worker_0_commits_for_a_writer_that_died)
{
	struct shipper_config c;
	struct ckpt_save_options o;
	struct ckpt_save_result r;
	struct shipper *s;
	struct store *store;
	char other[PATHLEN];
	struct err e;

	config_init(&c, file_url);
	c.parts_expected = 2;
	c.prune = true;
	s = start(&c);
	make_step(ckpt_dir, 3, 50 * KiB);
	wait_state(s, uploaded_is, 3, 10000, "uploaded");
	expect_steps(file_url, "3:u:1");

	/* The other worker's part arrives, but its writer dies before it
	 * can commit (it believes more parts are needed). */
	snprintf(other, sizeof(other), "%s/other", root);
	cr_assert_eq(mkdir(other, 0755), 0);
	write_step_dir(other, 3, 10 * KiB);
	snprintf(other, sizeof(other), "%s/other/step-3", root);
	store = open_store(file_url);
	ckpt_save_options_init(&o);
	o.part = "slice-0-worker-1";
	o.parts_expected = 99;
	cr_assert_eq(ckpt_save(store, other, 3, &o, &r, &e), 0, "%s", e.msg);
	cr_assert(!r.committed);
	store_close(store);

	wait_state(s, committed_is, 3, 10000, "worker 0 committed");
	expect_steps(file_url, "3:c:2");
	shipper_stop(s);
}

Test(shipper, newest_first_coalesces_older_waiting_steps)
{
	const char *url = "gs://bkt/runs/r1";
	struct shipper_state st;
	/* Step 1's upload session takes 3 s to start. */
	struct shipper *s = start_stalled(url, 3, 1, 20 * KiB);

	/* Five more at once while step 1 is in upload. */
	for (uint64_t i = 2; i <= 6; i++)
		write_step_dir(ckpt_dir, i, 20 * KiB);
	for (uint64_t i = 2; i <= 6; i++)
		mark_done(ckpt_dir, i);
	st = wait_state(s, done_is, 6, 2000, "steps 2-6 taken");
	shipper_get(s, &st);
	cr_assert_eq(st.newest_uploaded, -1, "step 1 was not slowed");

	st = wait_state(s, committed_is, 6, 20000, "step 6 committed");
	cr_assert_eq(st.newest_uploaded, 6);
	cr_assert_eq(st.dropped, 4);
	cr_assert_eq(st.waiting, 0);
	/* Step 1 was in upload: it finished. 2 to 5 never went. */
	expect_steps(url, "1:c:1 6:c:1");
	wait_spool_entries(0, 5000);
	shipper_stop(s);
}

Test(shipper, a_20_s_outage_loses_nothing_that_fits, .timeout = 120)
{
	struct shipper_config c;
	struct shipper_state st;
	struct shipper *s;
	const char *url = "gs://bkt/runs/outage";
	const unsigned steps = 8;

	start_fake();
	config_init(&c, url);
	s = start(&c);
	faults(OUTAGE);
	uint64_t t0 = mono_ms();
	for (uint64_t i = 1; i <= steps; i++) {
		make_step(ckpt_dir, i, 64 * KiB);
		wait_state(s, done_is, (int64_t)i, 3000, "taken");
		cr_assert(!exists("%s/step-%llu", ckpt_dir,
				  (unsigned long long)i));
		shipper_get(s, &st);
		cr_assert_eq(st.waiting, i);
		cr_assert_eq(st.dropped, 0);
		cr_assert_eq(st.newest_uploaded, -1);
		while (mono_ms() < t0 + i * 20000 / steps)
			sleep_ms(20);
	}
	cr_assert_geq(mono_ms() - t0, 20000);
	shipper_get(s, &st);
	cr_assert_gt(st.failures, 3);
	cr_assert(strstr(st.last_error, "503"), "%s", st.last_error);
	cr_assert_eq(count_entries(spool_dir), steps);
	cr_assert_eq(count_entries(ckpt_dir), 0);

	clear_faults();
	st = wait_state(s, committed_is, steps, 30000, "committed after");
	cr_assert_eq(st.newest_uploaded, steps);
	cr_assert_eq(st.failures, 0);
	cr_assert_eq(st.waiting, 0);
	cr_assert_eq(st.dropped, steps - 1);
	expect_steps(url, "8:c:1");
	wait_spool_entries(0, 5000);
	shipper_stop(s);
}

Test(shipper, the_spool_bound_drops_the_oldest_and_keeps_the_newest)
{
	struct shipper_config c;
	struct shipper_state st;
	struct shipper *s;
	const char *url = "gs://bkt/runs/spool";

	start_fake();
	faults(OUTAGE);
	/* Five steps of about 100 KiB wait; 250 KiB fit. */
	for (uint64_t i = 1; i <= 5; i++)
		make_step(ckpt_dir, i, 100 * KiB);
	config_init(&c, url);
	c.spool_bytes = 250 * KiB;
	s = start(&c);
	st = wait_state(s, done_is, 5, 5000, "taken");
	cr_assert_eq(st.dropped, 3);
	cr_assert_eq(st.waiting, 2);
	wait_spool_entries(2, 5000);
	cr_assert(exists("%s/step-4", spool_dir));
	cr_assert(exists("%s/step-5", spool_dir));

	/* One more: the oldest goes. */
	make_step(ckpt_dir, 6, 100 * KiB);
	st = wait_state(s, done_is, 6, 5000, "taken");
	cr_assert_eq(st.dropped, 4);
	wait_spool_entries(2, 5000);
	cr_assert(exists("%s/step-5", spool_dir));
	cr_assert(exists("%s/step-6", spool_dir));

	/* A step larger than the whole spool is kept, alone. */
	make_step(ckpt_dir, 7, 400 * KiB);
	wait_state(s, done_is, 7, 5000, "taken");
	st = wait_state(s, waiting_is, 1, 5000, "only the newest left");
	cr_assert_eq(st.dropped, 6);
	wait_spool_entries(1, 5000);
	cr_assert(exists("%s/step-7", spool_dir));

	clear_faults();
	wait_state(s, committed_is, 7, 20000, "committed");
	expect_steps(url, "7:c:1");
	shipper_stop(s);
}
