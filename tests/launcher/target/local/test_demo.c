/*
 * What scripts/demo shows, as tests, through the slicectl binary only:
 *
 * - a `slicectl job --local` run of examples/sgd/train.py on 2 slices x 2
 *   workers survives a crash, a hang, a preemption and a reset, and its
 *   final parameters (every worker's part of the newest committed
 *   checkpoint, and the trainers' "final params:" lines) are those of an
 *   uninterrupted run, to the bit;
 * - `slicectl status`, `logs`, `restart` and `stop` against a live local
 *   run started in the background.
 *
 * Every process started here is stopped by its pid; the temporary
 * directory is removed, and no process whose environment names it may be
 * left.
 */
#include "tests/harness/harness.h"
#include "tests/launcher/sgd_params.h"
#include "tests/launcher/target/local/local_summary.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char dir[HARNESS_PATH];
static char bucket[HARNESS_PATH + 32];
static pid_t job_pid; /* a slicectl job --local started in the background */

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Waits up to ms for job_pid; its wait status, or -1 while it runs. */
static int wait_job(long ms)
{
	long long until = now_ms() + ms;
	int status;

	for (;;) {
		pid_t r = waitpid(job_pid, &status, WNOHANG);

		if (r == job_pid) {
			job_pid = 0;
			return status;
		}
		if (r < 0 && errno != EINTR) {
			job_pid = 0;
			return -1;
		}
		if (now_ms() >= until)
			return -1;
		sleep_ms(100);
	}
}

/* SIGTERM (slicectl stops its workers), then SIGKILL if it lingers. */
static void stop_job(void)
{
	if (job_pid <= 0)
		return;
	kill(job_pid, SIGTERM);
	if (wait_job(40000) == -1 && job_pid > 0) {
		kill(job_pid, SIGKILL);
		waitpid(job_pid, NULL, 0);
		job_pid = 0;
	}
}

static void cleanup(void)
{
	stop_job();
	if (dir[0])
		rm_rf(dir);
	dir[0] = '\0';
}

TestSuite(demo, .fini = cleanup, .timeout = 240);

static void setup_dir(void)
{
	char home[HARNESS_PATH + 16], sync[HARNESS_PATH + 16];

	cr_assert_eq(make_temp_dir(dir, sizeof(dir), "demo"), 0);
	snprintf(bucket, sizeof(bucket), "file://%s/bucket", dir);
	snprintf(home, sizeof(home), "%s/home", dir);
	snprintf(sync, sizeof(sync), "%s/sync", dir);
	cr_assert_eq(sh("mkdir -p '%s' '%s'", home, sync), 0);
	/* spawn_slicectl passes this process's environment on. */
	setenv("SLICECTL_HOME", home, 1);
	cr_assert_not_null(getenv("SLICE_SUPERVISOR_BIN"),
			   "SLICE_SUPERVISOR_BIN is not set");
}

static const char *script_dir(void)
{
	static char path[HARNESS_PATH + 32];
	const char *src = getenv("SLICECTL_SRCDIR");

	snprintf(path, sizeof(path), "%s/examples/sgd", src ? src : ".");
	return path;
}

/* argv for `slicectl job --local` of the sgd example on 2 x 2 workers;
 * strings live in static storage until the next call. */
static const char *const *job_argv(const char *name, const char *steps,
				   const char *step_s, const char *chaos)
{
	static char sync[HARNESS_PATH + 32], s1[64], s2[64];
	static const char *argv[64];
	size_t n = 0;

	snprintf(sync, sizeof(sync), "SGD_SYNC_DIR=%s/sync", dir);
	snprintf(s1, sizeof(s1), "SGD_STEPS=%s", steps);
	snprintf(s2, sizeof(s2), "SGD_STEP_S=%s", step_s);
	argv[n++] = "job";
	argv[n++] = "--local";
	argv[n++] = "--name";
	argv[n++] = name;
	argv[n++] = "--bucket";
	argv[n++] = bucket;
	argv[n++] = "--num-slices";
	argv[n++] = "2";
	argv[n++] = "--workers-per-slice";
	argv[n++] = "2";
	argv[n++] = "--script-dir";
	argv[n++] = script_dir();
	argv[n++] = "--command";
	argv[n++] = "exec python3 train.py";
	argv[n++] = "--env";
	argv[n++] = s1;
	argv[n++] = "--env";
	argv[n++] = s2;
	argv[n++] = "--env";
	argv[n++] = "SGD_CKPT_EVERY=50";
	argv[n++] = "--env";
	argv[n++] = "SGD_PRINT_EVERY=25";
	argv[n++] = "--env";
	argv[n++] = sync;
	argv[n++] = "--env";
	argv[n++] = "PYTHONUNBUFFERED=1";
	argv[n++] = "--hang-timeout";
	argv[n++] = "8s";
	argv[n++] = "--grace";
	argv[n++] = "5s";
	argv[n++] = "--max-restarts";
	argv[n++] = "30";
	argv[n++] = "--format";
	argv[n++] = "json";
	if (chaos) {
		argv[n++] = "--chaos";
		argv[n++] = chaos;
	}
	argv[n] = NULL;
	return argv;
}

Test(demo, chaos_run_ends_with_the_parameters_of_an_uninterrupted_run)
{
	struct run_result r;
	json_t *s, *by;
	char *chaos_params, *calm_params, *story;

	setup_dir();
	/* 900 steps at about 25 ms: over 20 s of training, well past the
	 * last event (at 12 s of training). With 600, a run whose steps went
	 * at 14 ms after the preemption ended 2 s after it, and the reset
	 * never came (fresh-check, three tests at once). */
	cr_assert_eq(run_slicectl(&r, job_argv("chaos", "900", "0.02",
					       "crash:worker=1@3s,"
					       "hang:worker=2@6s,"
					       "preempt:slice=1@9s,"
					       "reset@12s"),
				  NULL),
		     0);
	/* A failure below says what the run went through, event by
	 * event. */
	story = local_story(r.out);
	cr_assert_eq(r.status, 0, "status %d\n%s\n%s", r.status, story, r.err);
	s = local_summary(r.out);
	cr_assert_not_null(s, "no summary:\n%s", story);
	cr_assert_str_eq(json_string_value(json_object_get(s, "end")), "done",
			 "%s", story);
	cr_assert_eq(json_integer_value(json_object_get(s, "steps_done")), 900,
		     "%s", story);
	/* Every event landed while the run went on, and restarted it. */
	cr_assert_null(strstr(r.out, "skipped"), "%s", story);
	by = json_object_get(s, "restarts_by_cause");
	cr_assert_geq(json_integer_value(json_object_get(by, "crash")), 1,
		      "%s", story);
	cr_assert_geq(json_integer_value(json_object_get(by, "hang")), 1,
		      "%s", story);
	cr_assert_geq(json_integer_value(json_object_get(by, "preemption")),
		      1, "%s", story);
	cr_assert_geq(json_integer_value(json_object_get(by, "reset")), 1,
		      "%s", story);
	cr_assert_eq(json_integer_value(json_object_get(s, "failures")), 4,
		     "%s", story);
	json_decref(s);
	free(story);
	run_result_release(&r);
	cr_assert_eq(processes_mentioning(dir), 0);

	/* The same job, never interrupted (and without the sleep, which
	 * does not touch the arithmetic). */
	cr_assert_eq(run_slicectl(&r, job_argv("calm", "900", "0", NULL),
				  NULL),
		     0);
	story = local_story(r.out);
	cr_assert_eq(r.status, 0, "status %d\n%s\n%s", r.status, story, r.err);
	s = local_summary(r.out);
	cr_assert_not_null(s, "no summary:\n%s", story);
	cr_assert_eq(json_integer_value(json_object_get(s, "restarts")), 0,
		     "%s", story);
	json_decref(s);
	free(story);
	run_result_release(&r);

	chaos_params = sgd_checkpoint_params(bucket, dir, "chaos", 900);
	calm_params = sgd_checkpoint_params(bucket, dir, "calm", 900);
	cr_assert_str_eq(chaos_params, calm_params);
	for (int p = 0; p < 4; p++) {
		char *a = sgd_logged_params(bucket, "chaos", p / 2, p % 2);
		char *b = sgd_logged_params(bucket, "calm", p / 2, p % 2);

		cr_assert_str_eq(a, chaos_params, "worker %d/%d", p / 2,
				 p % 2);
		cr_assert_str_eq(b, calm_params);
		free(a);
		free(b);
	}
	free(chaos_params);
	free(calm_params);
	cr_assert_eq(processes_mentioning(dir), 0);
}

/* ---- the operator commands against a live run ---- */

/* `slicectl status live --format json`; NULL when the run is not there
 * yet (exit status 4) and that is allowed. */
static json_t *status_json(bool may_be_missing)
{
	struct run_result r;
	json_t *j;

	cr_assert_eq(run_slicectl(&r, (const char *const[]){
					  "status", "live", "--bucket", bucket,
					  "--format", "json", NULL },
				  NULL),
		     0);
	if (may_be_missing && r.status == 4) {
		run_result_release(&r);
		return NULL;
	}
	cr_assert_eq(r.status, 0, "status: %s%s", r.out, r.err);
	j = json_loads(r.out, 0, NULL);
	cr_assert_not_null(j, "status printed no JSON: %s", r.out);
	run_result_release(&r);
	return j;
}

/* Waits (up to 60 s) until every one of the 4 workers reports its
 * trainer running at generation gen, with a committed step at least
 * min_step; returns that status. */
static json_t *wait_running(long long gen, long long min_step)
{
	long long until = now_ms() + 60000;
	json_t *j = NULL;

	for (;;) {
		json_t *ws, *w;
		size_t i, ok = 0;

		json_decref(j);
		cr_assert_gt(job_pid, 0);
		if (waitpid(job_pid, NULL, WNOHANG) == job_pid) {
			job_pid = 0;
			cr_assert_fail("slicectl job ended early");
		}
		j = status_json(true); /* job.json may not be there yet */
		ws = json_object_get(j, "workers");
		json_array_foreach(ws, i, w) {
			const char *st = json_string_value(
				json_object_get(w, "state"));

			if (st && !strcmp(st, "running") &&
			    json_integer_value(json_object_get(
				    w, "generation")) == gen)
				ok++;
		}
		if (ok == 4 && json_array_size(ws) == 4 &&
		    json_integer_value(json_object_get(j, "generation")) ==
			    gen &&
		    json_is_integer(json_object_get(j, "committed_step")) &&
		    json_integer_value(json_object_get(j, "committed_step")) >=
			    min_step)
			return j;
		if (now_ms() >= until) {
			char *text = j ? json_dumps(j, JSON_INDENT(1))
				       : strdup("(no run yet)");

			cr_assert_fail("workers not running at generation %lld:"
				       "\n%s", gen, text);
		}
		sleep_ms(500);
	}
}

/* A worker's log at generation gen as `slicectl logs` prints it, once
 * it holds needle (logs are uploaded as they grow: waits up to 30 s). */
static char *worker_log(const char *worker, const char *gen,
			const char *needle)
{
	long long until = now_ms() + 30000;
	struct run_result r;
	char *text;

	for (;;) {
		cr_assert_eq(run_slicectl(&r, (const char *const[]){
						  "logs", "live", "--worker",
						  worker, "--generation", gen,
						  "--bucket", bucket, NULL },
					  NULL),
			     0);
		/* 4: no such log yet. */
		cr_assert(r.status == 0 || r.status == 4, "logs %s gen %s: %s",
			  worker, gen, r.err);
		if (r.status == 0 && strstr(r.out, needle))
			break;
		cr_assert_lt(now_ms(), until,
			     "worker %s's log of generation %s lacks '%s':\n%s%s",
			     worker, gen, needle, r.out, r.err);
		run_result_release(&r);
		sleep_ms(500);
	}
	text = strdup(r.out);
	run_result_release(&r);
	return text;
}

Test(demo, status_logs_restart_and_stop_against_a_live_run)
{
	char out[HARNESS_PATH + 16], err[HARNESS_PATH + 16], *log;
	struct run_result r;
	json_t *j, *w, *s;
	size_t i;
	int status;

	setup_dir();
	snprintf(out, sizeof(out), "%s/job.out", dir);
	snprintf(err, sizeof(err), "%s/job.err", dir);
	/* Long enough not to end by itself during the test. */
	job_pid = spawn_slicectl(job_argv("live", "100000", "0.02", NULL), out,
				 err);
	cr_assert_gt(job_pid, 0);

	/* status: one row per worker, each heartbeating at generation 1. */
	j = wait_running(1, 50);
	cr_assert_str_eq(json_string_value(json_object_get(j, "run")), "live");
	cr_assert_str_eq(json_string_value(json_object_get(j, "state")),
			 "running");
	cr_assert_eq(json_integer_value(json_object_get(j, "stuck")), 0);
	json_array_foreach(json_object_get(j, "workers"), i, w) {
		cr_assert_eq(json_integer_value(json_object_get(w, "slice")),
			     (json_int_t)(i / 2));
		cr_assert_eq(json_integer_value(json_object_get(w, "worker")),
			     (json_int_t)(i % 2));
		cr_assert(json_is_number(json_object_get(w,
							 "heartbeat_age_s")));
		cr_assert_lt(json_number_value(json_object_get(
				     w, "heartbeat_age_s")), 30.0);
		cr_assert(json_is_false(json_object_get(w, "stuck")));
	}
	json_decref(j);
	/* The text form has the same rows. */
	cr_assert_eq(run_slicectl(&r, (const char *const[]){
					  "status", "live", "--bucket", bucket,
					  NULL },
				  NULL),
		     0);
	cr_assert_eq(r.status, 0);
	cr_assert(strstr(r.out, "state:      running, generation 1\n") &&
		  strstr(r.out, "workers:    4 (2 slices x 2), 0 stuck\n") &&
		  strstr(r.out, "\n0/0 ") && strstr(r.out, "\n0/1 ") &&
		  strstr(r.out, "\n1/0 ") && strstr(r.out, "\n1/1 "),
		  "%s", r.out);
	cr_assert_eq(count_substr(r.out, " running "), 4, "%s", r.out);
	run_result_release(&r);

	/* logs: worker 1/1 (process 3 of 4) started at generation 1. */
	log = worker_log("1/1", "1", "step 50 loss");
	cr_assert(strstr(log, "process 3/4 generation 1 starts"), "%s", log);
	cr_assert(strstr(log, "step 25 loss"), "%s", log);
	free(log);

	/* restart: generation 2, and every trainer restarts at it from the
	 * newest committed step. */
	cr_assert_eq(run_slicectl(&r, (const char *const[]){
					  "restart", "live", "--reason",
					  "test restart", "--bucket", bucket,
					  NULL },
				  NULL),
		     0);
	cr_assert_eq(r.status, 0, "%s%s", r.out, r.err);
	cr_assert(strstr(r.out, "generation 1 -> 2"), "%s", r.out);
	run_result_release(&r);
	j = wait_running(2, 50);
	cr_assert_str_eq(json_string_value(json_object_get(j, "reason")),
			 "test restart");
	json_decref(j);
	for (int p = 0; p < 4; p++) {
		char worker[16];
		const char *at;

		snprintf(worker, sizeof(worker), "%d/%d", p / 2, p % 2);
		log = worker_log(worker, "2", "generation 2 resumes from step ");
		at = strstr(log, "generation 2 resumes from step ");
		cr_assert_gt(strtol(at + strlen("generation 2 resumes from "
						"step "), NULL, 10), 0);
		free(log);
	}

	/* stop: the run ends, the job's slicectl returns with its summary
	 * and nothing of the run is left. */
	cr_assert_eq(run_slicectl(&r, (const char *const[]){
					  "stop", "live", "--bucket", bucket,
					  NULL },
				  NULL),
		     0);
	cr_assert_eq(r.status, 0, "%s%s", r.out, r.err);
	cr_assert(strstr(r.out, "running -> stopping"), "%s", r.out);
	run_result_release(&r);
	status = wait_job(60000);
	cr_assert_neq(status, -1, "slicectl job still runs after stop");
	cr_assert(WIFEXITED(status), "slicectl job: wait status %d", status);
	{
		char *text = read_file(out, NULL);

		cr_assert_not_null(text);
		s = local_summary(text);
		cr_assert_not_null(s, "no summary:\n%s", text);
		cr_assert_str_eq(json_string_value(json_object_get(s, "end")),
				 "stopped", "%s", text);
		/* The restart by hand is the one restart, put down to
		 * "other". */
		cr_assert_eq(json_integer_value(json_object_get(
				     json_object_get(s, "restarts_by_cause"),
				     "other")), 1, "%s", text);
		json_decref(s);
		free(text);
	}
	j = status_json(false);
	cr_assert_str_eq(json_string_value(json_object_get(j, "state")),
			 "stopping");
	json_decref(j);
	cr_assert_eq(processes_mentioning(dir), 0);
}
