/*
 * tests/launcher/target/tpu/test_flex.c: capacity that ends on a
 * schedule, end to end against tests/fakes/tpu_fake.py: a flex-start
 * queued resource's run duration, and maintenance announced on a node.
 *
 * Real slice-supervisor processes run tests/supervisor/toy_trainer.py as
 * the two workers of a queued resource that slicectl created in the TPU
 * fake (job.json names it, as slicectl job writes it); the run lives in a
 * file:// bucket. Worker 0 reads the queued resource and its nodes through
 * the TPU API and publishes the nearest deadline in control.json:
 *
 * - a flex-start window: the final step is committed before the
 *   queued resource's runDuration.terminationTime, after which the fake
 *   suspends it; the workers wait for capacity, the run is not failed;
 * - maintenance: announced on the node, checkpointed ahead of its window,
 *   the group resumes from that very step; `slicectl maintenance RUN
 *   --after-commit` performs it right after the next committed step, the
 *   VMs go away in it and come back, and the run resumes from that step.
 *
 * Nothing here depends on the machine's speed: every wait is for the
 * event it needs (a state, a commit, a heartbeat) with a generous bound,
 * and the TPU fake holds a queued resource in PROVISIONING until the
 * trainers run (so a window begins only then) and, where the test plays
 * the VMs going, in SUSPENDING until it has stopped them. What remains
 * timed is the supervisors' own lead, which the grace period makes
 * generous.
 */
#include "common/common.h"
#include "tests/cloud/fake_tpu.h"
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

#define ZONE "us-central2-b"
#define API "/v2alpha1/projects/proj/locations/" ZONE
#define MAXW 2
/* A long grace period makes a long lead: the supervisors have that long
 * to see a deadline and commit ahead of it, however slow the machine,
 * while the test waits only for the part of a window before the lead. */
#define GRACE_S 20
/* The supervisors' lead before a deadline: the grace period, no upload
 * measured yet (the steps are tiny), and deadline.h's 10 s margin. */
#define LEAD_S (GRACE_S + 10)
/* Bounds on waits for what takes long only on a slow machine. */
#define SLOW_S 120

static struct {
	char dir[HARNESS_PATH];
	char bucket[HARNESS_PATH + 16];   /* file://DIR/bucket */
	char run_dir[HARNESS_PATH + 32];
	char events[HARNESS_PATH + 16];
	struct fake_tpu tpu;
	bool tpu_up;
	pid_t sup[MAXW];
	pid_t cmd;                        /* slicectl in the background */
	unsigned boots;
} w;

static char env_tpu[128], env_home[HARNESS_PATH + 32];
static char env_bucket[HARNESS_PATH + 48];
static const char *env[16];

static void up(void)
{
	memset(&w, 0, sizeof(w));
	cr_assert_eq(make_temp_dir(w.dir, sizeof(w.dir), "flex"), 0);
	snprintf(w.bucket, sizeof(w.bucket), "file://%s/bucket", w.dir);
	snprintf(w.events, sizeof(w.events), "%s/events", w.dir);
	cr_assert_eq(sh("mkdir -p '%s/bucket' '%s/sync'", w.dir, w.dir), 0);
	cr_assert_eq(fake_tpu_start(&w.tpu, (const char *const[]){
					    "--delay", "0.05", NULL }),
		     0, "the TPU fake did not start");
	w.tpu_up = true;
	snprintf(env_tpu, sizeof(env_tpu), "SLICECTL_TPU_ENDPOINT=%s",
		 w.tpu.base);
	snprintf(env_home, sizeof(env_home), "SLICECTL_HOME=%s/home", w.dir);
	snprintf(env_bucket, sizeof(env_bucket), "SLICECTL_BUCKET=%s",
		 w.bucket);
	env[0] = env_tpu;
	env[1] = env_home;
	env[2] = "SLICECTL_ACCESS_TOKEN=test-token";
	env[3] = "CLOUDSDK_CORE_PROJECT=proj";
	env[4] = "CLOUDSDK_COMPUTE_ZONE=" ZONE;
	env[5] = "SLICECTL_TPU_POLL_MS=20";
	env[6] = "SLICECTL_HTTP_RETRY_BASE_MS=10";
	env[7] = env_bucket;
	env[8] = NULL;
}

static void stop_workers(int sig)
{
	for (unsigned i = 0; i < MAXW; i++)
		if (w.sup[i] > 0) {
			kill(w.sup[i], sig);
			waitpid(w.sup[i], NULL, 0);
			w.sup[i] = 0;
		}
	kill_left_trainers(w.dir, "w*");
	kill_left_trainers(w.dir, "vm*/w*");
}

static void down(void)
{
	if (w.cmd > 0) {
		kill(w.cmd, SIGTERM);
		waitpid(w.cmd, NULL, 0);
	}
	stop_workers(SIGKILL);
	if (w.tpu_up)
		fake_tpu_stop(&w.tpu);
	rm_rf(w.dir);
	memset(&w, 0, sizeof(w));
}

TestSuite(flex, .init = up, .fini = down, .timeout = 240);

static void slicectl_ok(struct run_result *r, const char *const *argv)
{
	cr_assert_eq(run_slicectl(r, argv, env), 0);
	cr_assert_eq(r->status, 0, "exit %d\nstdout:\n%s\nstderr:\n%s",
		     r->status, r->out, r->err);
}

/* A queued resource of one v4-16 node (two workers), ACTIVE when
 * `wait`; extra arguments for slicectl create (NULL-terminated). */
static void create(const char *name, bool wait, const char *const *extra)
{
	const char *argv[24] = { "create", name, "--accelerator-type",
				 "v4-16", "--runtime-version", "rt",
				 "--no-ssh-key", "--wait" };
	struct run_result r;
	size_t n = wait ? 8 : 7;

	for (size_t i = 0; extra && extra[i]; i++)
		argv[n++] = extra[i];
	argv[n] = NULL;
	slicectl_ok(&r, argv);
	run_result_release(&r);
}

/* Starts both workers of run `run` (its job.json in place): boot ids
 * are new each time (a VM that comes back has another), and so are the
 * state directories when `fresh` (new VMs). */
static void boot_vms(const char *run, bool fresh)
{
	char path[HARNESS_PATH + 64], state[HARNESS_PATH + 32];
	char log[HARNESS_PATH + 16], boot_env[HARNESS_PATH + 96];
	char run_url[HARNESS_PATH + 64];
	/* What a VM's supervisor has: the TPU API, and worker 0 reads it
	 * every 0.3 s. */
	const char *const vm_env[] = { env_tpu, boot_env,
				       "SLICECTL_ACCESS_TOKEN=t",
				       "SLICE_DEADLINE_POLL_MS=300",
				       "SLICECTL_HTTP_RETRY_BASE_MS=50", NULL };

	snprintf(w.run_dir, sizeof(w.run_dir), "%s/bucket/%s", w.dir, run);
	snprintf(run_url, sizeof(run_url), "%s/%s", w.bucket, run);
	w.boots++;
	for (unsigned i = 0; i < MAXW; i++) {
		snprintf(path, sizeof(path), "%s/boot%u", w.dir, i);
		snprintf(log, sizeof(log), "boot-%u-%u\n", w.boots, i);
		write_text(path, log);
		snprintf(boot_env, sizeof(boot_env), "SLICE_BOOT_ID_FILE=%s",
			 path);
		if (fresh)
			snprintf(state, sizeof(state), "%s/vm%u/w%u", w.dir,
				 w.boots, i);
		else
			snprintf(state, sizeof(state), "%s/w%u", w.dir, i);
		snprintf(log, sizeof(log), "%s/sup%u.log", w.dir, i);
		w.sup[i] = spawn_supervisor(run_url, state, i, log, vm_env);
	}
}

/* Writes job.json for run `run` on queued resource `qr` (as slicectl job
 * would), the toy trainer taking `total` steps of 0.1 s with a checkpoint
 * every `every`, and boots its VMs. */
static void boot(const char *run, const char *qr, unsigned total,
		 unsigned every)
{
	char job[2048], path[HARNESS_PATH + 64];
	const char *src = getenv("SLICECTL_SRCDIR");

	snprintf(w.run_dir, sizeof(w.run_dir), "%s/bucket/%s", w.dir, run);
	cr_assert_eq(sh("mkdir -p '%s'", w.run_dir), 0);
	snprintf(job, sizeof(job),
		 "{\"name\": \"%s\", \"command\": \"exec python3 "
		 "%s/tests/supervisor/toy_trainer.py\", \"num_slices\": 1, "
		 "\"workers_per_slice\": %d, \"heartbeat_s\": 1, "
		 "\"grace_s\": %d, \"tpu\": {\"project\": \"proj\", \"zone\": "
		 "\"" ZONE "\", \"name\": \"%s\"}, \"env\": {\"TOY_EVENTS\": "
		 "\"%s\", \"TOY_SYNC_DIR\": \"%s/sync\", \"TOY_TOTAL\": "
		 "\"%u\", \"TOY_STEP_S\": \"0.1\", \"TOY_CKPT_EVERY\": "
		 "\"%u\"}}",
		 run, src ? src : ".", MAXW, GRACE_S, qr, w.events, w.dir,
		 total, every);
	snprintf(path, sizeof(path), "%s/job.json", w.run_dir);
	write_text(path, job);
	boot_vms(run, false);
}

static void wait_started(long long generation, unsigned timeout_s)
{
	double end = mono_s() + timeout_s;

	while (mono_s() < end) {
		if (toy_events(w.events, -1, generation, "start", NULL) == MAXW)
			return;
		sleep_ms(50);
	}
	cr_assert_fail("generation %lld did not start\n%s", generation,
		       supervisor_log(w.dir, 0));
}

/* The TPU fake keeps queued resources in `state` (a timed one) until
 * released; released, they leave it now. */
static void hold(const char *state, bool on)
{
	char body[128];

	snprintf(body, sizeof(body), "{\"delays\": {\"%s\": %s}}", state,
		 on ? "-1" : "null");
	cr_assert_eq(fake_tpu_config(&w.tpu, body), 0);
}

/* Waits until worker i's heartbeat state is `want`. */
static void wait_heartbeat(unsigned i, const char *want, unsigned timeout_s)
{
	char state[32] = "";
	double end = mono_s() + timeout_s;

	while (mono_s() < end) {
		run_heartbeat_state(w.run_dir, i, state, sizeof(state));
		if (!strcmp(state, want))
			return;
		sleep_ms(50);
	}
	cr_assert_fail("worker %u's heartbeat says '%s', never '%s'\n%s", i,
		       state, want, supervisor_log(w.dir, i));
}

/* Unix time now, in ms. */
static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static uint64_t parse_ms(const char *rfc3339)
{
	time_t t = rfc3339_parse(rfc3339);

	cr_assert_neq(t, (time_t)-1, "not a time: %s", rfc3339);
	return (uint64_t)t * 1000;
}

/* control.json's deadline member (a new reference, or NULL). */
static json_t *deadline_member(void)
{
	json_t *c = run_control(w.run_dir);
	json_t *d = json_incref(json_object_get(c, "deadline"));

	json_decref(c);
	return d;
}

/* Waits until control.json's deadline kind is `kind` ("" none). */
static void wait_deadline(const char *kind, unsigned timeout_s)
{
	const char *got = "";
	double end = mono_s() + timeout_s;

	while (mono_s() < end) {
		json_t *d = deadline_member();

		got = d ? json_string_value(json_object_get(d, "kind")) : "";
		got = !strcmp(got, kind) ? NULL : got[0] ? "another" : "none";
		json_decref(d);
		if (!got)
			return;
		sleep_ms(50);
	}
	cr_assert_fail("control.json's deadline is %s, never '%s'\n%s", got,
		       kind, supervisor_log(w.dir, 0));
}

/* The queued resource's state, "(gone)" when there is none. */
static void qr_state(const char *name, char *out, size_t cap)
{
	char path[256];
	json_t *qr;

	snprintf(path, sizeof(path), API "/queuedResources/%s", name);
	qr = fake_tpu_get(&w.tpu, path);
	snprintf(out, cap, "%s",
		 qr ? json_string_value(json_object_get(
			      json_object_get(qr, "state"), "state"))
		    : "(gone)");
	json_decref(qr);
}

/* Whether control.json says the run is done. */
static bool run_done(void)
{
	json_t *c = run_control(w.run_dir);
	const char *state = json_string_value(json_object_get(c, "state"));
	bool done = state && !strcmp(state, "done");

	json_decref(c);
	return done;
}

/* After a window's end: whether the run is done (it may have finished
 * just as the window ended), else waits until every worker waits for
 * the next window. */
static bool done_or_waiting(unsigned timeout_s)
{
	double end = mono_s() + timeout_s;
	char state[32] = "";

	while (mono_s() < end) {
		unsigned waiting = 0;

		if (run_done())
			return true;
		for (unsigned i = 0; i < MAXW; i++) {
			run_heartbeat_state(w.run_dir, i, state, sizeof(state));
			waiting += !strcmp(state, "waiting");
		}
		if (waiting == MAXW)
			return false;
		sleep_ms(50);
	}
	cr_assert_fail("the window ended; the run is not done and the workers "
		       "do not all wait (worker 0's heartbeat says '%s')\n%s",
		       state, supervisor_log(w.dir, 0));
	return false;
}

/* Waits until queued resource name's state is `want`. */
static void wait_qr(const char *name, const char *want, unsigned timeout_s)
{
	char state[32] = "";
	double end = mono_s() + timeout_s;

	while (mono_s() < end) {
		qr_state(name, state, sizeof(state));
		if (!strcmp(state, want))
			return;
		sleep_ms(50);
	}
	cr_assert_fail("queued resource %s is %s, never %s", name, state,
		       want);
}

/* ---- a flex-start window */

Test(flex, a_window_ends_after_the_final_step_is_committed)
{
	char state[32], window[16];
	uint64_t end_ms, seen_ms = 0;
	long long step = 0, last = -1;
	json_t *qr;

	/* The window begins (ACTIVE) once the trainers run: then 13 s of
	 * training, and the lead. */
	hold("PROVISIONING", true);
	snprintf(window, sizeof(window), "%ds", LEAD_S + 13);
	create("fx", false, (const char *const[]){
		"--provisioning-model", "flex-start", "--max-run-duration",
		window, NULL });
	wait_qr("fx", "PROVISIONING", SLOW_S);
	boot("f1", "fx", 100000, 100000);
	wait_started(1, SLOW_S);
	hold("PROVISIONING", false);
	wait_qr("fx", "ACTIVE", SLOW_S);
	qr = fake_tpu_get(&w.tpu, API "/queuedResources/fx");
	cr_assert_not_null(qr);
	end_ms = parse_ms(json_string_value(json_object_get(
		json_object_get(qr, "runDuration"), "terminationTime")));
	json_decref(qr);
	wait_deadline("run-end", SLOW_S);
	while (!step && now_ms() < end_ms + 5000) {
		step = run_newest_committed(w.run_dir);
		seen_ms = now_ms();
		sleep_ms(20);
	}
	cr_assert_gt(step, 0, "nothing committed by the end of the window\n%s",
		     supervisor_log(w.dir, 0));
	cr_assert_lt(seen_ms, end_ms, "step %lld committed %lld ms after the "
		     "window's end", step, (long long)(seen_ms - end_ms));
	fprintf(stderr, "final step %lld committed %lld ms before the "
		"window's end\n", step, (long long)(end_ms - seen_ms));
	for (int p = 0; p < MAXW; p++) {
		cr_assert_eq(toy_events(w.events, p, 1, "final", &last), 1);
		cr_assert_eq(last, step);
	}
	/* The fake ends the run at its time: SUSPENDED, and the workers
	 * wait for capacity. */
	wait_qr("fx", "SUSPENDED", SLOW_S);
	for (unsigned i = 0; i < MAXW; i++)
		wait_heartbeat(i, "waiting", SLOW_S);
	assert_run_control(w.run_dir, 1, "running", NULL);
	/* Worker 0 no longer sees a run end ahead. */
	wait_deadline("", SLOW_S);
	/* The VMs go with the window; they were waiting, and still are. */
	stop_workers(SIGTERM);
	for (unsigned i = 0; i < MAXW; i++) {
		run_heartbeat_state(w.run_dir, i, state, sizeof(state));
		cr_assert_str_eq(state, "waiting", "worker %u\n%s", i,
				 supervisor_log(w.dir, i));
	}
	cr_assert_eq(run_newest_committed(w.run_dir), step);
}

/* ---- maintenance */

static void announce(const char *node, double in_s)
{
	char body[512], start[40], stop[40];
	time_t t = (time_t)((double)now_ms() / 1000.0 + in_s);
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(start, sizeof(start), "%Y-%m-%dT%H:%M:%SZ", &tm);
	t += 3600;
	gmtime_r(&t, &tm);
	strftime(stop, sizeof(stop), "%Y-%m-%dT%H:%M:%SZ", &tm);
	snprintf(body, sizeof(body),
		 "{\"name\": \"%s\", \"upcomingMaintenance\": {\"type\": "
		 "\"SCHEDULED\", \"maintenanceStatus\": \"PENDING\", "
		 "\"canReschedule\": true, \"windowStartTime\": \"%s\", "
		 "\"windowEndTime\": \"%s\"}}", node, start, stop);
	cr_assert_eq(fake_tpu_call(&w.tpu, "POST", "/_fake/node", body, NULL),
		     200);
}

/* The maintenance performed (the TPU fake's log of it), within
 * timeout_s: its JSON (an array of one), to json_decref. */
static json_t *wait_performed(unsigned timeout_s)
{
	double end = mono_s() + timeout_s;
	char *text = NULL;
	json_t *log = NULL;

	while (mono_s() < end) {
		cr_assert_eq(fake_tpu_call(&w.tpu, "GET", "/_fake/maintenance",
					   NULL, &text), 200);
		log = json_loads(text, 0, NULL);
		free(text);
		text = NULL;
		if (json_array_size(log))
			return log;
		json_decref(log);
		sleep_ms(20);
	}
	cr_assert_fail("no maintenance performed in %u s", timeout_s);
	return NULL;
}

Test(flex, maintenance_announced_checkpointed_performed_resumed)
{
	long long saved = -1, restored = -1, after = -1;
	char out_path[HARNESS_PATH + 32], err_path[HARNESS_PATH + 32];
	char *o;
	json_t *out, *log;
	int status;

	create("mx", true, NULL);
	boot("m1", "mx", 100000, 40);
	wait_started(1, SLOW_S);
	/* The lead begins 4 s from now; the supervisors have until the
	 * window (LEAD_S more) to see it. */
	announce("mx", LEAD_S + 4);
	wait_deadline("maintenance", SLOW_S);

	/* Checkpointed ahead of the window: generation 2 restores exactly
	 * the step generation 1 saved when told to stop. */
	wait_started(2, SLOW_S);
	for (int p = 0; p < MAXW; p++) {
		cr_assert_eq(toy_events(w.events, p, 1, "final", &saved), 1,
			     "%s", supervisor_log(w.dir, (unsigned)p));
		cr_assert_eq(toy_events(w.events, p, 2, "restored", &restored),
			     1);
		cr_assert_eq(restored, saved);
	}
	assert_run_control(w.run_dir, 2, "running", "resuming from it");
	{
		json_t *d = deadline_member();

		cr_assert(json_is_true(json_object_get(d, "checkpointed")));
		json_decref(d);
	}

	/* The operator takes it now, right after the next committed step;
	 * the VMs go away in it: the test ends them as soon as the fake
	 * performs it (the next step commits 4 s of steps later), not when
	 * the command has also waited for its end. */
	for (size_t i = 0; env[i]; i++)
		cr_assert_eq(putenv((char *)env[i]), 0);
	snprintf(out_path, sizeof(out_path), "%s/maintenance.out", w.dir);
	snprintf(err_path, sizeof(err_path), "%s/maintenance.err", w.dir);
	w.cmd = spawn_slicectl((const char *const[]){
		"maintenance", "m1", "--after-commit", "--wait", "--timeout",
		"300", "--format", "json", NULL }, out_path, err_path);
	cr_assert_gt(w.cmd, 0);
	log = wait_performed(SLOW_S + 60);
	stop_workers(SIGKILL);
	status = wait_exit(w.cmd, SLOW_S);
	w.cmd = 0;
	o = read_file(out_path, NULL);
	cr_assert_eq(status, 0, "maintenance: exit %d\n%s%s", status,
		     o ? o : "", read_file(err_path, NULL));
	out = json_loads(o, 0, NULL);
	cr_assert_not_null(out, "%s", o);
	cr_assert_str_eq(json_string_value(json_object_get(
				 out, "queued_resource")), "mx");
	cr_assert_str_eq(json_string_value(json_object_get(out, "run")), "m1");
	after = json_integer_value(json_object_get(out, "after_step"));
	cr_assert_gt(after, restored, "%s", o);
	cr_assert(json_is_true(json_object_get(out, "done")));
	json_decref(out);
	free(o);
	cr_assert_eq(json_array_size(log), 1);
	cr_assert_str_eq(json_string_value(json_object_get(
				 json_array_get(log, 0), "kind")),
			 "performMaintenance");
	json_decref(log);

	/* Back from maintenance: new boots, and the run resumes from the
	 * step committed just before it. */
	boot("m1", "mx", 100000, 40);
	wait_started(3, SLOW_S);
	for (int p = 0; p < MAXW; p++) {
		cr_assert_eq(toy_events(w.events, p, 3, "restored", &restored),
			     1);
		cr_assert_eq(restored, after);
	}
	/* Nothing is announced any more. */
	wait_deadline("", SLOW_S);
}

Test(flex, maintenance_refuses_what_it_cannot_do)
{
	struct run_result r;

	create("qx", true, NULL);
	/* Nothing announced: the API's refusal, said. */
	cr_assert_eq(run_slicectl(&r, (const char *const[]){
				  "maintenance", "qx", NULL }, env), 0);
	cr_assert_eq(r.status, 1, "%s", r.err);
	ASSERT_HAS(r.err, "No maintenance is pending");
	run_result_release(&r);
	/* A queued resource that is not there. */
	cr_assert_eq(run_slicectl(&r, (const char *const[]){
				  "maintenance", "nope", NULL }, env), 0);
	cr_assert_eq(r.status, 4, "%s", r.err);
	run_result_release(&r);
	/* --after-commit needs a run. */
	cr_assert_eq(run_slicectl(&r, (const char *const[]){
				  "maintenance", "qx", "--after-commit", NULL },
				  env), 0);
	cr_assert_eq(r.status, 2, "%s", r.err);
	ASSERT_HAS(r.err, "needs a run");
	run_result_release(&r);
	/* Named nodes go to the API as given. */
	announce("qx", 3600);
	cr_assert_eq(run_slicectl(&r, (const char *const[]){
				  "maintenance", "qx", "--nodes", "qx",
				  NULL }, env), 0);
	cr_assert_eq(r.status, 0, "%s", r.err);
	ASSERT_HAS(r.out, "qx: maintenance started on qx");
	run_result_release(&r);
	cr_assert_eq(run_slicectl(&r, (const char *const[]){
				  "maintenance", "qx", "--nodes", "a,,b",
				  NULL }, env), 0);
	cr_assert_eq(r.status, 2, "%s", r.err);
	run_result_release(&r);
}

/* slicectl job's capacity flags are checked as create's are, before
 * anything is uploaded or asked for. */
Test(flex, job_refuses_contradicting_capacity_before_any_request)
{
	static const struct {
		const char *flags[5];
		const char *says;
	} bad[] = {
		{ { "--provisioning-model", "flex-start" },
		  "--max-run-duration" },
		{ { "--provisioning-model", "flex-start", "--spot",
		    "--max-run-duration", "1h" }, "--spot contradicts" },
		{ { "--max-run-duration", "1h" }, "flex-start" },
		{ { "--provisioning-model", "flex-start", "--max-run-duration",
		    "8d" }, "7 days" },
		{ { "--provisioning-model", "flexible" }, "none of" },
	};
	struct run_result r;
	char *names;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *argv[24] = { "job", "--name", "cj",
					 "--accelerator-type", "v4-16",
					 "--command", "true" };
		size_t n = 7;

		for (size_t k = 0; k < 5 && bad[i].flags[k]; k++)
			argv[n++] = bad[i].flags[k];
		argv[n] = NULL;
		cr_assert_eq(run_slicectl(&r, argv, env), 0);
		cr_assert_eq(r.status, 2, "%s: exit %d\n%s", bad[i].says,
			     r.status, r.err);
		ASSERT_HAS(r.err, bad[i].says);
		run_result_release(&r);
	}
	cr_assert_eq(run_slicectl(&r, (const char *const[]){
				  "job", "--name", "cj", "--local",
				  "--workers-per-slice", "1", "--command",
				  "true", "--provisioning-model", "spot",
				  NULL }, env), 0);
	cr_assert_eq(r.status, 2, "%s", r.err);
	ASSERT_HAS(r.err, "not --local");
	run_result_release(&r);
	/* Nothing asked of the TPU API, nothing in the bucket. */
	cr_assert_eq(fake_tpu_call(&w.tpu, "GET", "/_fake/requests", NULL,
				   &names), 200);
	cr_assert_eq(strspn(names, "[] \n"), strlen(names), "%s", names);
	free(names);
	cr_assert_eq(sh("[ -z \"$(ls -A '%s/bucket')\" ]", w.dir), 0,
		     "the bucket is not empty");
}

/* ---- flex-start windows chained by slicectl job --watch */

/* The toy trainer's parameters after `steps` uninterrupted steps. */
static long long toy_params(long long steps)
{
	long long p = 1;

	for (long long s = 1; s <= steps; s++)
		p = (p * 31 + s) % 1000003;
	return p;
}

/* Worker `worker`'s part of step `step`, restored by slicectl ckpt:
 * its "params". */
static long long restored_params(const char *run, long long step,
				 unsigned worker)
{
	char url[HARNESS_PATH + 64], dest[HARNESS_PATH + 32], n[32];
	char part[32], path[HARNESS_PATH + 64];
	struct run_result r;
	long long p;
	json_t *j;

	snprintf(url, sizeof(url), "%s/%s", w.bucket, run);
	snprintf(dest, sizeof(dest), "%s/check%u", w.dir, worker);
	snprintf(n, sizeof(n), "%lld", step);
	snprintf(part, sizeof(part), "slice-0-worker-%u", worker);
	slicectl_ok(&r, (const char *const[]){ "ckpt", "restore", url, dest,
					       "--step", n, "--part", part,
					       NULL });
	run_result_release(&r);
	snprintf(path, sizeof(path), "%s/state.json", dest);
	j = json_load_file(path, 0, NULL);
	cr_assert_not_null(j, "no %s", path);
	cr_assert_eq(json_integer_value(json_object_get(j, "step")), step);
	p = json_integer_value(json_object_get(j, "params"));
	json_decref(j);
	return p;
}

#define TOTAL 250

Test(flex, a_watched_job_runs_through_windows_to_an_uninterrupted_result,
     .timeout = 580)
{
	char out_path[HARNESS_PATH + 32], err_path[HARNESS_PATH + 32];
	char command[HARNESS_PATH + 64], e_events[HARNESS_PATH + 32];
	char e_sync[HARNESS_PATH + 32], qrs[32] = "", state[32];
	const char *src = getenv("SLICECTL_SRCDIR");
	unsigned windows = 0;
	bool done = false, checked_between = false;
	struct run_result r;
	json_t *st;
	int status;

	snprintf(command, sizeof(command),
		 "exec python3 %s/tests/supervisor/toy_trainer.py",
		 src ? src : ".");
	snprintf(e_events, sizeof(e_events), "TOY_EVENTS=%s", w.events);
	snprintf(e_sync, sizeof(e_sync), "TOY_SYNC_DIR=%s/sync", w.dir);
	snprintf(out_path, sizeof(out_path), "%s/watch.out", w.dir);
	snprintf(err_path, sizeof(err_path), "%s/watch.err", w.dir);
	for (size_t i = 0; env[i]; i++)
		cr_assert_eq(putenv((char *)env[i]), 0);
	/* Each window begins once its trainers run, and ends (SUSPENDING)
	 * for as long as the test takes to end its VMs, before the watch
	 * sees SUSPENDED and moves the run to its next window. */
	hold("PROVISIONING", true);
	hold("SUSPENDING", true);
	/* Each 30 s window trains for about 18 s (less the 12 s lead), some
	 * 150 steps: the run needs two windows, or more on a slow machine. */
	w.cmd = spawn_slicectl((const char *const[]){
		"job", "--name", "fj", "--accelerator-type", "v4-16",
		"--command", command, "--env", e_events, "--env", e_sync,
		"--env", "TOY_TOTAL=250", "--env", "TOY_STEP_S=0.1", "--env",
		"TOY_CKPT_EVERY=50", "--grace", "2", "--provisioning-model",
		"flex-start", "--max-run-duration", "30s", "--watch",
		"--recreate-budget", "4", NULL }, out_path, err_path);
	cr_assert_gt(w.cmd, 0);
	while (!done) {
		double end;

		for (double t = mono_s() + SLOW_S;
		     strcmp(qrs, "PROVISIONING") && mono_s() < t;
		     sleep_ms(50))
			qr_state("fj", qrs, sizeof(qrs));
		cr_assert_str_eq(qrs, "PROVISIONING", "window %u never came"
				 "\n%s", windows + 1,
				 read_file(err_path, NULL));
		windows++;
		cr_assert_leq(windows, 4, "more windows than the budget");
		boot_vms("fj", true);
		wait_started(windows, SLOW_S);
		hold("PROVISIONING", false);
		hold("PROVISIONING", true);
		/* Until the run is done or the window is over. */
		end = mono_s() + 30 + SLOW_S;
		while (strcmp(qrs, "SUSPENDING") && !(done = run_done())) {
			cr_assert_lt(mono_s(), end, "window %u: the queued "
				     "resource is %s, the run not done",
				     windows, qrs);
			qr_state("fj", qrs, sizeof(qrs));
			sleep_ms(100);
		}
		if (done || done_or_waiting(SLOW_S))
			break;
		/* Between two windows: the workers wait (also once their VMs
		 * went with the nodes), nobody is stuck, and status shows
		 * the queued resource. */
		stop_workers(SIGTERM);
		for (unsigned i = 0; i < MAXW; i++) {
			run_heartbeat_state(w.run_dir, i, state, sizeof(state));
			cr_assert_str_eq(state, "waiting", "worker %u\n%s", i,
					 supervisor_log(w.dir, i));
		}
		if (!checked_between) {
			slicectl_ok(&r, (const char *const[]){
				"status", "fj", "--format", "json", NULL });
			st = json_loads(r.out, 0, NULL);
			cr_assert_not_null(st, "%s", r.out);
			cr_assert_eq(json_integer_value(json_object_get(
					     st, "stuck")), 0, "%s", r.out);
			cr_assert_str_eq(json_string_value(json_object_get(
				json_object_get(st, "queued_resource"),
				"name")), "fj", "%s", r.out);
			json_decref(st);
			run_result_release(&r);
			checked_between = true;
		}
		hold("SUSPENDING", false);
		hold("SUSPENDING", true);
	}
	cr_assert_geq(windows, 2, "the run fit in one window");
	fprintf(stderr, "%d steps in %u flex-start windows of 30 s\n", TOTAL,
		windows);
	for (unsigned i = 0; i < MAXW; i++)
		cr_assert_eq(wait_child(&w.sup[i], SLOW_S), 0, "worker %u\n%s", i,
			     supervisor_log(w.dir, i));
	status = wait_exit(w.cmd, SLOW_S);
	w.cmd = 0;
	cr_assert_eq(status, 0, "watch: exit %d\n%s", status,
		     read_file(err_path, NULL));
	/* Each window resumed from the step the last one saved before its
	 * end: nothing was computed twice. */
	for (long long g = 2; g <= windows; g++)
		for (int p = 0; p < MAXW; p++) {
			long long saved = -1, restored = -1;

			cr_assert_eq(toy_events(w.events, p, g - 1, "final",
						&saved), 1, "generation %lld",
				     g - 1);
			cr_assert_eq(toy_events(w.events, p, g, "restored",
						&restored), 1);
			cr_assert_eq(restored, saved, "generation %lld", g);
		}
	/* And the result is an uninterrupted run's, to the bit. */
	cr_assert_eq(run_newest_committed(w.run_dir), TOTAL);
	for (unsigned i = 0; i < MAXW; i++)
		cr_assert_eq(restored_params("fj", TOTAL, i),
			     toy_params(TOTAL), "worker %u", i);
	{
		char *o = read_file(out_path, NULL);

		ASSERT_HAS(o, "its flex-start window ends at");
		ASSERT_HAS(o, "the end of its flex-start window");
		ASSERT_HAS(o, "run: done");
		free(o);
	}
}
