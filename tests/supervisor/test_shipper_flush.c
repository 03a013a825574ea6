/*
 * The checkpoint shipper's flush (a final step uploaded within a deadline:
 * newest first, in flight, during an outage; a step written again once
 * uploaded); the fixture and helpers are shipper_check.c's.
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

static void *clear_faults_later(void *arg)
{
	(void)arg;
	sleep_ms(300);
	clear_faults();
	return NULL;
}

Test(shipper, flush_uploads_the_newest_first_within_the_deadline)
{
	pthread_t clearer;
	struct shipper_config c;
	struct shipper_state st;
	struct shipper *s;
	const char *url = "gs://bkt/runs/flush";
	struct err e;
	uint64_t t0;

	start_fake();
	config_init(&c, url);
	c.poll_ms = 60000; /* only kicks and flushes scan */
	s = start(&c);
	/* Nothing to flush: at once. */
	t0 = mono_ms();
	cr_assert_eq(shipper_flush(s, t0 + 5000, &e), 0, "%s", e.msg);
	cr_assert_lt(mono_ms() - t0, 1000);

	faults(OUTAGE);
	make_step(ckpt_dir, 1, 30 * KiB);
	make_step(ckpt_dir, 2, 30 * KiB);
	shipper_kick(s);
	wait_state(s, failures_at_least, 2, 10000, "failing");
	/* The trainer's final step, not yet scanned: flush finds it, and
	 * the bucket comes back while flush waits. */
	make_step(ckpt_dir, 3, 30 * KiB);
	cr_assert_eq(pthread_create(&clearer, NULL, clear_faults_later,
				    NULL), 0);
	t0 = mono_ms();
	cr_assert_eq(shipper_flush(s, t0 + 15000, &e), 0, "%s", e.msg);
	cr_assert_lt(mono_ms() - t0, 15000);
	pthread_join(clearer, NULL);
	shipper_get(s, &st);
	cr_assert_eq(st.newest_uploaded, 3);
	cr_assert_eq(st.newest_committed, 3);
	cr_assert_eq(st.dropped, 2);
	expect_steps(url, "3:c:1");
	shipper_stop(s);
}

/* A trainer told to stop saved step 15 (its peers never finished it),
 * then the step the group agreed on, 14: 14 is the one to upload. */
Test(shipper, flush_uploads_a_final_step_older_than_the_one_before)
{
	struct shipper_config c;
	struct shipper_state st;
	struct shipper *s;
	struct err e;

	config_init(&c, file_url);
	make_step(ckpt_dir, 15, 20 * KiB);
	sleep_ms(50); /* a later clock tick for the second marker */
	make_step(ckpt_dir, 14, 20 * KiB);
	/* The first scan takes both at once. */
	s = start(&c);
	cr_assert_eq(shipper_flush(s, mono_ms() + 15000, &e), 0, "%s", e.msg);
	shipper_get(s, &st);
	cr_assert_eq(st.newest_uploaded, 14);
	cr_assert_eq(st.newest_committed, 14);
	cr_assert_eq(st.dropped, 1);
	expect_steps(file_url, "14:c:1");
	shipper_stop(s);
}

/* The same two markers made in one clock tick: which is the final step
 * cannot be told, so the flush uploads both. */
Test(shipper, flush_uploads_both_steps_whose_order_is_a_guess)
{
	const struct timespec t[2] = { { 1700000000, 0 }, { 1700000000, 0 } };
	char path[PATHLEN * 2];
	struct shipper_config c;
	struct shipper *s;
	struct err e;

	config_init(&c, file_url);
	write_step_dir(ckpt_dir, 15, 20 * KiB);
	write_step_dir(ckpt_dir, 14, 20 * KiB);
	for (uint64_t step = 14; step <= 15; step++) {
		mark_done(ckpt_dir, step);
		snprintf(path, sizeof(path), "%s/step-%llu.done", ckpt_dir,
			 (unsigned long long)step);
		cr_assert_eq(utimensat(AT_FDCWD, path, t, 0), 0, "%s",
			     strerror(errno));
	}
	s = start(&c);
	cr_assert_eq(shipper_flush(s, mono_ms() + 15000, &e), 0, "%s", e.msg);
	expect_steps(file_url, "14:c:1 15:c:1");
	shipper_stop(s);
}

Test(shipper, flush_preempts_an_older_upload_in_flight)
{
	const char *url = "gs://bkt/runs/preempt";
	struct shipper *s = start_stalled(url, 2, 1, 30 * KiB);
	struct err e;

	make_step(ckpt_dir, 2, 30 * KiB);
	cr_assert_eq(shipper_flush(s, mono_ms() + 15000, &e), 0, "%s",
		     e.msg);
	/* Step 1 gave way and was never stored. */
	expect_steps(url, "2:c:1");
	shipper_stop(s);
}

Test(shipper, flush_times_out_during_an_outage)
{
	struct shipper *s = start_in_outage("gs://bkt/runs/timeout");
	struct err e;
	uint64_t t0, took;

	t0 = mono_ms();
	cr_assert_eq(shipper_flush(s, t0 + 1500, &e), CLOUD_ETIMEDOUT, "%s",
		     e.msg);
	took = mono_ms() - t0;
	cr_assert(took >= 1490 && took < 2500, "took %llu ms",
		  (unsigned long long)took);
	cr_assert(strstr(e.msg, "step 1"), "%s", e.msg);
	cr_assert(strstr(e.msg, "503"), "%s", e.msg);
	stop_within(s, 1000);
}

/* The generation of worker 1's part of step in the store at url. */
static int64_t part_generation(const char *url, uint64_t step)
{
	struct store *st = open_store(url);
	struct store_object o;
	char name[256];
	struct err e;
	int64_t g;

	snprintf(name, sizeof(name),
		 "checkpoints/step-%010llu/slice-0-worker-1.tar.zst",
		 (unsigned long long)step);
	cr_assert_eq(store_stat(st, name, &o, &e), 0, "%s", e.msg);
	g = o.generation;
	store_object_release(&o);
	store_close(st);
	return g;
}

/* A trainer told to stop saves its current step again, one the shipper
 * uploaded already: a second upload would replace the part a COMMIT may
 * name by then (supervisor-pod under ASan, s-commit), so the uploaded
 * one stands and the new copy goes. In a new generation the step is
 * uploaded again: its old part may have been discarded. */
Test(shipper, a_step_written_again_after_its_upload_is_not_uploaded_again)
{
	struct shipper_config c;
	struct shipper *s;
	struct err e;
	int64_t first;

	config_init(&c, file_url);
	c.part = "slice-0-worker-1";
	c.parts_expected = 2;
	s = start(&c);
	make_step(ckpt_dir, 15, 20 * KiB);
	wait_state(s, uploaded_is, 15, 10000, "step 15 uploaded");
	first = part_generation(file_url, 15);

	make_step(ckpt_dir, 15, 20 * KiB);
	cr_assert_eq(shipper_flush(s, mono_ms() + 15000, &e), 0, "%s", e.msg);
	cr_assert_eq(part_generation(file_url, 15), first);
	cr_assert_eq(count_entries(ckpt_dir), 0,
		     "the copy written again is still there");

	/* The new generation's first upload is another step: what the
	 * shipper recorded before the reset is forgotten all the same. */
	shipper_reset(s);
	make_step(ckpt_dir, 20, 20 * KiB);
	wait_state(s, uploaded_is, 20, 10000, "step 20 uploaded");
	make_step(ckpt_dir, 15, 20 * KiB);
	wait_state(s, uploaded_is, 15, 10000, "step 15 uploaded again");
	cr_assert_gt(part_generation(file_url, 15), first);
	expect_steps(file_url, "15:u:1 20:u:1");
	shipper_stop(s);
}
