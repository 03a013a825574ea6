/*
 * tests/supervisor/test_deadline.c: control.json's "deadline" (a
 * flex-start run's end, a node's maintenance window) and what the
 * supervisors make of it.
 *
 * The member itself against file:// stores: absent in older objects,
 * kept by every writer, marked once the group checkpointed for it, and
 * refused when malformed; the deadline worker 0 derives from a queued
 * resource and its nodes as the TPU API describes them. Then real
 * supervisor processes running tests/supervisor/toy_trainer.py, with the
 * deadline written into control.json by the test (test_flex.c has worker
 * 0 read it from the TPU fake): before a run's end the final step is
 * committed in time and the run waits for capacity; before maintenance
 * the final step is committed and the group resumes from exactly that
 * step, so nothing is computed twice.
 */
#include "run/run.h"
#include "supervisor/deadline.h"
#include "tests/harness/harness.h"
#include "tests/supervisor/run_check.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAXW 2
#define GRACE_S 2

static struct {
	char dir[HARNESS_PATH];
	char run_dir[HARNESS_PATH + 16];
	char run_url[HARNESS_PATH + 64];
	char events[HARNESS_PATH + 16];
	struct store *store;
	pid_t sup[MAXW];
} w;

static void up(void)
{
	struct err e;

	memset(&w, 0, sizeof(w));
	log_setup("test_deadline", LOG_ERROR);
	cr_assert_eq(make_temp_dir(w.dir, sizeof(w.dir), "deadline"), 0);
	snprintf(w.run_dir, sizeof(w.run_dir), "%s/run", w.dir);
	snprintf(w.run_url, sizeof(w.run_url), "file://%s", w.run_dir);
	snprintf(w.events, sizeof(w.events), "%s/events", w.dir);
	cr_assert_eq(sh("mkdir -p '%s' '%s/sync'", w.run_dir, w.dir), 0);
	err_init(&e);
	cr_assert_eq(store_open(&w.store, w.run_url, &e), 0, "%s", e.msg);
}

static void down(void)
{
	for (unsigned i = 0; i < MAXW; i++)
		if (w.sup[i] > 0) {
			kill(w.sup[i], SIGKILL);
			waitpid(w.sup[i], NULL, 0);
		}
	kill_left_trainers(w.dir, "w*");
	if (w.store)
		store_close(w.store);
	rm_rf(w.dir);
	memset(&w, 0, sizeof(w));
}

TestSuite(member, .init = up, .fini = down, .timeout = 30);
TestSuite(deadline, .init = up, .fini = down, .timeout = 180);

/* An RFC 3339 time `from_now_s` seconds from now. */
static void time_in(double from_now_s, char *out, size_t cap)
{
	time_t t = (time_t)((double)deadline_now_ms() / 1000.0 + from_now_s);
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(out, cap, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static struct control_deadline deadline(const char *kind, double from_now_s)
{
	struct control_deadline d = { 0 };

	snprintf(d.kind, sizeof(d.kind), "%s", kind);
	time_in(from_now_s, d.time, sizeof(d.time));
	snprintf(d.about, sizeof(d.about), "a %s the test announced", kind);
	return d;
}

static struct control publish(const struct control_deadline *d)
{
	struct control c;
	struct err e;

	err_init(&e);
	cr_assert_eq(control_set_deadline(w.store, d, &c, &e), 0, "%s", e.msg);
	return c;
}

static struct control load(void)
{
	struct control c;
	struct err e;

	err_init(&e);
	cr_assert_eq(control_load(w.store, &c, &e), 0, "%s", e.msg);
	return c;
}

/* ---- the member */

Test(member, is_absent_until_published_and_kept_by_every_writer)
{
	struct control_deadline d = deadline("run-end", 3600);
	struct control c = load(), out;
	char path[HARNESS_PATH + 32], *text;
	struct err e;

	cr_assert_str_eq(c.deadline.kind, "");
	snprintf(path, sizeof(path), "%s/control.json", w.run_dir);
	text = read_file(path, NULL);
	cr_assert_null(strstr(text, "deadline"), "%s", text);
	free(text);

	c = publish(&d);
	cr_assert_str_eq(c.deadline.time, d.time);
	c = load();
	cr_assert_str_eq(c.deadline.kind, "run-end");
	cr_assert_str_eq(c.deadline.about, d.about);
	cr_assert_not(c.deadline.checkpointed);

	/* A bump keeps it, and so does a state change. */
	err_init(&e);
	cr_assert_eq(control_bump(w.store, NULL, &c, 10, "a crash", "w1", -1,
				  &out, &e), 0, "%s", e.msg);
	c = load();
	cr_assert_eq(c.generation, 2);
	cr_assert_str_eq(c.deadline.time, d.time);

	/* Published again unchanged: control.json is not rewritten. */
	out = publish(&d);
	cr_assert_eq(out.object_generation, c.object_generation);

	/* Removed. */
	memset(&d, 0, sizeof(d));
	publish(&d);
	c = load();
	cr_assert_str_eq(c.deadline.kind, "");
	cr_assert_eq(control_set_state(w.store, NULL, "stopping", "by hand",
				       "slicectl", &out, &e), 0);
	/* A run that is not running gets none. */
	d = deadline("maintenance", 60);
	out = publish(&d);
	cr_assert_str_eq(out.deadline.kind, "");
}

Test(member, the_checkpoint_bump_marks_it_and_a_new_time_is_a_new_one)
{
	struct control_deadline d = deadline("maintenance", 600);
	struct control c, seen, out;
	struct err e;

	load();
	seen = publish(&d);
	err_init(&e);
	cr_assert_eq(control_bump_deadline(w.store, &seen, NULL, "checkpointed",
					   "slice-0-worker-0", &out, &e),
		     0, "%s", e.msg);
	c = load();
	cr_assert_eq(c.generation, 2);
	cr_assert(c.deadline.checkpointed);
	/* Maintenance is the infrastructure's: it spends no max_restarts. */
	cr_assert_eq(c.restarts.infra, 1);
	cr_assert_eq(c.restarts.trainer, 0);
	cr_assert_str_eq(c.cause.kind, "maintenance");
	/* Its peers' bumps from the same generation collapse into it. */
	cr_assert_eq(control_bump_deadline(w.store, &seen, NULL, "checkpointed",
					   "slice-0-worker-1", &out, &e), 0);
	cr_assert_eq(load().generation, 2);
	/* Described anew, the same window keeps its mark... */
	snprintf(d.about, sizeof(d.about), "the same window, new words");
	publish(&d);
	c = load();
	cr_assert(c.deadline.checkpointed);
	cr_assert_eq(deadline_left_ms(&c.deadline, deadline_now_ms()),
		     INT64_MAX, "a checkpointed deadline is not ahead");
	/* ...a rescheduled one is ahead again. */
	d = deadline("maintenance", 1200);
	publish(&d);
	c = load();
	cr_assert_not(c.deadline.checkpointed);
	cr_assert_gt(deadline_left_ms(&c.deadline, deadline_now_ms()),
		     1100000);
}

Test(member, a_malformed_deadline_is_a_corrupt_control_object)
{
	static const char *const bad[] = {
		"\"deadline\": 5",
		"\"deadline\": {\"kind\": \"lunch\", \"time\": "
		"\"2030-01-01T00:00:00Z\"}",
		"\"deadline\": {\"kind\": \"run-end\", \"time\": \"soon\"}",
		"\"deadline\": {\"kind\": \"run-end\", \"time\": "
		"\"2030-01-01T00:00:00Z\", \"checkpointed\": 1}",
	};
	char path[HARNESS_PATH + 32], text[512];
	struct control c;
	struct err e;

	snprintf(path, sizeof(path), "%s/control.json", w.run_dir);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(text, sizeof(text),
			 "{\"generation\": 1, \"state\": \"running\", %s}",
			 bad[i]);
		write_text(path, text);
		err_init(&e);
		cr_expect_eq(control_load(w.store, &c, &e), CLOUD_ECORRUPT,
			     "%s", bad[i]);
		cr_expect(strstr(e.msg, "\"deadline\""), "%s", e.msg);
	}
	/* null is none, as the other optional members. */
	write_text(path, "{\"generation\": 1, \"state\": \"running\", "
			 "\"deadline\": null}");
	cr_assert_eq(control_load(w.store, &c, &e), 0, "%s", e.msg);
	cr_assert_str_eq(c.deadline.kind, "");
}

/* ---- worker 0's reading of a queued resource */

static void parse_qr(struct tpu_qr *q, const char *state, const char *end)
{
	char json[1024];
	struct err e;

	snprintf(json, sizeof(json),
		 "{\"name\": \"projects/p/locations/z/queuedResources/fx\", "
		 "\"tpu\": {\"nodeSpec\": [{\"parent\": "
		 "\"projects/p/locations/z\", \"multiNodeParams\": "
		 "{\"nodeCount\": 2, \"nodeIdPrefix\": \"fx\"}, \"node\": "
		 "{\"acceleratorType\": \"v5litepod-8\", \"runtimeVersion\": "
		 "\"v2-alpha-tpuv5-lite\"}}]}, \"provisioningModel\": "
		 "\"FLEX_START\", \"runDuration\": {\"maxRunDuration\": "
		 "\"3600s\"%s%s%s}, \"state\": {\"state\": \"%s\"}}",
		 end ? ", \"terminationTime\": \"" : "", end ? end : "",
		 end ? "\"" : "", state);
	err_init(&e);
	cr_assert_eq(tpu_qr_parse(json, strlen(json), q, &e), 0, "%s", e.msg);
}

static void parse_node(struct tpu_node *n, const char *id, const char *start)
{
	char json[1024];
	struct err e;

	snprintf(json, sizeof(json),
		 "{\"name\": \"projects/p/locations/z/nodes/%s\", \"state\": "
		 "\"READY\", \"acceleratorType\": \"v5litepod-8\"%s%s%s}", id,
		 start ? ", \"upcomingMaintenance\": {\"type\": "
			 "\"SCHEDULED\", \"maintenanceStatus\": \"PENDING\", "
			 "\"canReschedule\": true, \"windowStartTime\": \""
		       : "",
		 start ? start : "",
		 start ? "\", \"windowEndTime\": \"2030-01-01T06:00:00Z\"}"
		       : "");
	err_init(&e);
	cr_assert_eq(tpu_node_parse(json, strlen(json), n, &e), 0, "%s",
		     e.msg);
}

Test(member, the_nearest_of_the_run_end_and_the_maintenance_windows)
{
	struct tpu_qr q;
	struct tpu_node n[2];
	struct control_deadline d;

	parse_qr(&q, "ACTIVE", "2030-01-01T05:00:00Z");
	parse_node(&n[0], "fx-0", NULL);
	parse_node(&n[1], "fx-1", "2030-01-01T04:00:00Z");
	deadline_of(&q, n, 2, &d);
	cr_assert_str_eq(d.kind, "maintenance");
	cr_assert_str_eq(d.time, "2030-01-01T04:00:00Z");
	cr_assert(strstr(d.about, "SCHEDULED maintenance of node fx-1"), "%s",
		  d.about);
	tpu_node_release(&n[1]);
	parse_node(&n[1], "fx-1", "2030-01-01T06:00:00Z");
	deadline_of(&q, n, 2, &d);
	cr_assert_str_eq(d.kind, "run-end");
	cr_assert_str_eq(d.time, "2030-01-01T05:00:00Z");
	cr_assert(strstr(d.about, "flex-start run of queued resource fx"),
		  "%s", d.about);
	tpu_qr_release(&q);
	/* Suspended: its old termination time is behind it. */
	parse_qr(&q, "SUSPENDED", "2030-01-01T05:00:00Z");
	tpu_node_release(&n[1]);
	parse_node(&n[1], "fx-1", NULL);
	deadline_of(&q, n, 2, &d);
	cr_assert_str_eq(d.kind, "");
	tpu_qr_release(&q);
	for (int i = 0; i < 2; i++)
		tpu_node_release(&n[i]);
	cr_assert_eq(deadline_lead_ms(25, 4000),
		     25000 + 4000 + DEADLINE_MARGIN_MS);
}

/* ---- supervisors */

/* job.json for MAXW workers of the toy trainer, stepping every 0.1 s,
 * with checkpoints only when told to stop (TOY_CKPT_EVERY is out of
 * reach): a committed step can only be a deadline's. */
static void start_run(unsigned total)
{
	char job[2048], path[HARNESS_PATH + 32], state[HARNESS_PATH + 16];
	char log[HARNESS_PATH + 16];
	const char *src = getenv("SLICECTL_SRCDIR");

	snprintf(job, sizeof(job),
		 "{\"name\": \"toy\", \"command\": \"exec python3 "
		 "%s/tests/supervisor/toy_trainer.py\", \"num_slices\": 1, "
		 "\"workers_per_slice\": %d, \"heartbeat_s\": 1, "
		 "\"grace_s\": %d, \"env\": {\"TOY_EVENTS\": \"%s\", "
		 "\"TOY_SYNC_DIR\": \"%s/sync\", \"TOY_TOTAL\": \"%u\", "
		 "\"TOY_STEP_S\": \"0.1\", \"TOY_CKPT_EVERY\": \"100000\"}}",
		 src ? src : ".", MAXW, GRACE_S, w.events, w.dir, total);
	snprintf(path, sizeof(path), "%s/job.json", w.run_dir);
	write_text(path, job);
	for (unsigned i = 0; i < MAXW; i++) {
		snprintf(state, sizeof(state), "%s/w%u", w.dir, i);
		snprintf(log, sizeof(log), "%s/sup%u.log", w.dir, i);
		w.sup[i] = spawn_supervisor(w.run_url, state, i, log, NULL);
	}
	/* Both trainers run: the lead is counted from now on. */
	for (int t = 0; t < 600; t++) {
		if (toy_events(w.events, -1, 1, "start", NULL) == MAXW)
			return;
		sleep_ms(50);
	}
	cr_assert_fail("the trainers did not start");
}

/* Waits until the newest committed step is > 0; returns it and the Unix
 * time in ms when it was first seen. */
static long long first_commit(unsigned timeout_s, uint64_t *seen_ms)
{
	for (unsigned t = 0; t < timeout_s * 50; t++) {
		long long s = run_newest_committed(w.run_dir);

		if (s > 0) {
			*seen_ms = deadline_now_ms();
			return s;
		}
		sleep_ms(20);
	}
	cr_assert_fail("nothing was committed in %u s\n%s", timeout_s,
		       supervisor_log(w.dir, 0));
	return 0;
}

Test(deadline, a_run_end_gets_its_final_step_committed_and_the_run_waits)
{
	/* The lead is the grace period, no upload measured yet, and the
	 * margin; the deadline comes 4 s after it begins. */
	double lead_s = GRACE_S + DEADLINE_MARGIN_MS / 1000.0;
	struct control_deadline d = deadline("run-end", lead_s + 4);
	time_t end = rfc3339_parse(d.time);
	uint64_t seen_ms = 0;
	long long step, last = -1;
	char state[32];

	start_run(100000);
	publish(&d);
	step = first_commit(30, &seen_ms);
	cr_assert_lt(seen_ms, (uint64_t)end * 1000,
		     "step %lld committed %lld ms after the run's end", step,
		     (long long)(seen_ms - (uint64_t)end * 1000));
	/* That is the step each trainer saved when told to stop. */
	for (int p = 0; p < MAXW; p++) {
		cr_assert_eq(toy_events(w.events, p, 1, "final", &last), 1);
		cr_assert_eq(last, step);
	}
	/* Waiting for capacity: not failed, not preempted, still alive. */
	for (unsigned i = 0; i < MAXW; i++) {
		for (int t = 0; t < 200; t++) {
			run_heartbeat_state(w.run_dir, i, state, sizeof(state));
			if (!strcmp(state, "waiting"))
				break;
			sleep_ms(50);
		}
		cr_assert_str_eq(state, "waiting", "worker %u\n%s", i,
				 supervisor_log(w.dir, i));
		cr_assert_eq(wait_child(&w.sup[i], 0), -1, "worker %u ended",
			     i);
	}
	assert_run_control(w.run_dir, 1, "running", NULL);
	/* Past the end nothing else happens; then the VMs go away. */
	while ((uint64_t)deadline_now_ms() < (uint64_t)end * 1000 + 1000)
		sleep_ms(100);
	cr_assert_eq(run_newest_committed(w.run_dir), step);
	cr_assert_eq(toy_events(w.events, -1, -1, "start", NULL), MAXW,
		     "a trainer started again");
	for (unsigned i = 0; i < MAXW; i++) {
		kill(w.sup[i], SIGTERM);
		cr_assert_eq(wait_child(&w.sup[i], 30), 0);
		run_heartbeat_state(w.run_dir, i, state, sizeof(state));
		cr_assert_str_eq(state, "waiting");
	}
}

Test(deadline, maintenance_is_checkpointed_and_the_group_resumes_from_it)
{
	double lead_s = GRACE_S + DEADLINE_MARGIN_MS / 1000.0;
	struct control_deadline d = deadline("maintenance", lead_s + 4);
	time_t start = rfc3339_parse(d.time);
	uint64_t seen_ms = 0;
	long long step, saved = -1, restored = -1;
	struct control c;

	start_run(150);
	publish(&d);
	step = first_commit(30, &seen_ms);
	cr_assert_lt(seen_ms, (uint64_t)start * 1000,
		     "step %lld committed after the window began", step);
	for (unsigned i = 0; i < MAXW; i++) {
		int st = wait_child(&w.sup[i], 90);
		char *log = supervisor_log(w.dir, i);

		cr_assert_eq(st, 0, "worker %u: %d\n%s", i, st, log);
		free(log);
	}
	/* One bump, for the maintenance, marked done: the window did not
	 * stop the group again, nor did anything else. */
	c = load();
	cr_assert_str_eq(c.state, "done");
	cr_assert_eq(c.generation, 2, "generation %lld: %s",
		     (long long)c.generation, c.reason);
	cr_assert(c.deadline.checkpointed);
	for (int p = 0; p < MAXW; p++) {
		cr_assert_eq(toy_events(w.events, p, 1, "final", &saved), 1);
		cr_assert_eq(toy_events(w.events, p, 2, "restored", &restored),
			     1, "process %d did not restore", p);
		/* Nothing computed twice: generation 2 starts where
		 * generation 1 stopped. */
		cr_assert_eq(restored, saved);
		cr_assert_eq(restored, step);
		cr_assert_eq(toy_events(w.events, p, 2, "done", NULL), 1);
	}
}
