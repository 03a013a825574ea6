/*
 * The checkpoint shipper's reset (waiting steps dropped, the upload in
 * flight aborted) and stop (prompt mid-upload, inside a stalled request,
 * during an outage); the fixture and helpers are shipper_check.c's.
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

Test(shipper, reset_drops_waiting_steps)
{
	struct shipper_config c;
	struct shipper_state st;
	struct shipper *s;
	const char *url = "gs://bkt/runs/reset";

	start_fake();
	faults(OUTAGE);
	config_init(&c, url);
	c.poll_ms = 60000;
	s = start(&c);
	for (uint64_t i = 1; i <= 3; i++)
		make_step(ckpt_dir, i, 20 * KiB);
	shipper_kick(s);
	wait_state(s, done_is, 3, 5000, "taken");
	wait_state(s, failures_at_least, 1, 5000, "failing");
	make_step(ckpt_dir, 4, 20 * KiB); /* done, not yet taken */
	write_step_dir(ckpt_dir, 5, 1 * KiB); /* in progress */

	shipper_reset(s);
	shipper_get(s, &st);
	cr_assert_eq(st.waiting, 0);
	cr_assert_eq(st.newest_done, -1);
	cr_assert_eq(st.newest_uploaded, -1);
	cr_assert_eq(st.failures, 0);
	cr_assert(!exists("%s/step-4", ckpt_dir));
	cr_assert(!exists("%s/step-4.done", ckpt_dir));
	cr_assert(exists("%s/step-5", ckpt_dir));
	wait_spool_entries(0, 5000);

	/* The new generation starts lower; nothing old goes up. */
	clear_faults();
	cr_assert_eq(sh("rm -rf '%s/step-5'", ckpt_dir), 0);
	make_step(ckpt_dir, 2, 20 * KiB);
	shipper_kick(s);
	wait_state(s, committed_is, 2, 10000, "committed");
	sleep_ms(200);
	expect_steps(url, "2:c:1");
	shipper_stop(s);
}

Test(shipper, reset_aborts_the_upload_in_flight)
{
	const char *url = "gs://bkt/runs/reset2";
	struct shipper *s = start_stalled(url, 1.5, 4, 20 * KiB);
	struct shipper_state st;

	shipper_reset(s);
	shipper_get(s, &st);
	cr_assert_eq(st.waiting, 0);
	sleep_ms(2500); /* the stalled request is over */
	wait_spool_entries(0, 5000);
	shipper_get(s, &st);
	cr_assert_eq(st.newest_uploaded, -1);
	expect_steps(url, "");
	shipper_stop(s);
}

Test(shipper, stop_is_prompt_mid_upload)
{
	struct shipper_config c;
	struct shipper *s;
	struct store *store;
	struct store_object o;
	const char *url = "gs://bkt/runs/stop";
	struct err e;
	char *log = NULL;
	uint64_t t0;

	start_fake();
	/* Every piece of the parallel upload (8 MiB) takes 0.4 s to be
	 * answered. */
	faults("{\"action\": \"stall\", \"seconds\": 0.4, \"method\": \"POST\", "
	       "\"path\": \"uploadType=media\", \"times\": -1}");
	config_init(&c, url);
	s = start(&c);
	make_step(ckpt_dir, 1, 40 * MiB);
	wait_state(s, done_is, 1, 10000, "taken");
	/* Wait for the first piece to be on its way. */
	for (t0 = mono_ms();; sleep_ms(20)) {
		cr_assert_eq(fake_gcs_call(&fake, "GET", "/_fake/requests",
					   NULL, &log), 200);
		bool put = strstr(log, "\"media\"") != NULL;
		free(log);
		if (put)
			break;
		cr_assert_lt(mono_ms() - t0, 10000, "no piece sent");
	}
	stop_within(s, 1000);
	/* The part never appeared. */
	sleep_ms(700);
	store = open_store(url);
	cr_assert_eq(store_stat(store,
				"checkpoints/step-0000000001/"
				"slice-0-worker-0.tar.zst", &o, &e),
		     CLOUD_ENOTFOUND, "%s", e.msg);
	store_close(store);
}

Test(shipper, stop_is_prompt_inside_a_stalled_request)
{
	stop_within(start_stalled("gs://bkt/runs/stall", 3, 1, 10 * KiB),
		    1200);
	/* The abandoned upload ends with the stall, cancelled. */
	sleep_ms(3500);
	expect_steps("gs://bkt/runs/stall", "");
}

Test(shipper, stop_is_prompt_during_an_outage)
{
	struct shipper *s = start_in_outage("gs://bkt/runs/outage-stop");

	wait_state(s, failures_at_least, 3, 10000, "failing");
	stop_within(s, 1000);
}
