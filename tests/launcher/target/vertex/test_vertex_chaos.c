/*
 * slicectl job --target vertex against the Vertex AI fake
 * (tests/fakes/vertex_fake.py): examples/sgd as 1 primary + 2 workers
 * (g2-standard-4 --nodes 3, Spot, --watch) under a trainer crash, a lost
 * VM, a maintenance event and a Spot preemption, whose final parameters
 * are those of an uninterrupted run through the fake, to the bit. The
 * temporary directory, status waits and sgd flags are gke_live_check.c's
 * (nothing in them is GKE's but their name); the fake is vertex_check.c's.
 */
#include "tests/launcher/target/gke/gke_live_check.h"
#include "tests/harness/harness.h"
#include "tests/launcher/target/vertex/vertex_check.h"
#include "tests/launcher/sgd_params.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

TestSuite(vertex_live, .init = setup, .fini = cleanup, .timeout = 600);

#define STEPS "600"
#define MAX_ARGS 64

/* slicectl job --target vertex for run, with extra flags
 * (NULL-terminated). */
static const char *const *vertex_argv(const char *run,
				      const char *const *extra)
{
	static const char *argv[MAX_ARGS];
	const char *const *sgd = sgd_flags(run, STEPS, "0.03", NULL);
	size_t n = 0;
	const char *const head[] = {
		"job", "--target", "vertex", "--region", "us-central1",
		"--project", "proj", "--accelerator-type", "g2-standard-4",
		"--nodes", "3", "--image", "python:3.12", "--name", run,
		"--bucket", bucket, "--command", "exec python3 train.py",
		"--grace", "5s",
	};

	for (size_t i = 0; i < sizeof(head) / sizeof(*head); i++)
		argv[n++] = head[i];
	for (size_t i = 0; sgd[i]; i++)
		argv[n++] = sgd[i];
	for (size_t i = 0; extra && extra[i]; i++) {
		cr_assert_lt(n, MAX_ARGS - 1);
		argv[n++] = extra[i];
	}
	argv[n] = NULL;
	return argv;
}

/* The run's newest CustomJob's name, as status shows it. */
static char *job_name(const char *run)
{
	json_t *j = status_json(run);
	const char *what = jstr(json_object_get(j, "target"), "object");
	char *name;

	cr_assert(what && !strncmp(what, "CustomJob ", 10), "%s",
		  what ? what : "(no target)");
	name = strdup(what + 10);
	json_decref(j);
	return name;
}

Test(vertex_live, sgd_under_crash_lost_vm_maintenance_and_preemption_is_exact)
{
	char out[HARNESS_PATH + 16], err[HARNESS_PATH + 16], body[512];
	char sync[HARNESS_PATH + 32], *name, *chaos, *calm;
	struct run_result r;
	long long gen;
	pid_t watch, pid;
	int status;

	vertex_fake_start();
	snprintf(out, sizeof(out), "%s/watch.out", dir);
	snprintf(err, sizeof(err), "%s/watch.err", dir);
	watch = spawn_slicectl(vertex_argv("chaos", (const char *const[]){
					       "--spot", "--watch", NULL }),
			       out, err);
	cr_assert_gt(watch, 0);
	/* The same job, never interrupted, alongside. */
	cr_assert_eq(run_slicectl(&r, vertex_argv("calm", NULL), NULL), 0);
	cr_assert_eq(r.status, 0, "%s%s", r.out, r.err);
	run_result_release(&r);

	/* A trainer crash: the supervisors restart the group in place;
	 * Vertex sees nothing. */
	gen = generation_of(wait_running("chaos", 3, 1, 100));
	snprintf(sync, sizeof(sync), "SGD_SYNC_DIR=%s/sync-chaos", dir);
	processes_with("train.py", NULL, sync, "SLICE_PROCESS_ID=1", &pid);
	cr_assert_gt(pid, 0, "no trainer of process 1");
	cr_assert_eq(kill(pid, SIGKILL), 0);
	gen = generation_of(wait_running("chaos", 3, gen + 1, 200));

	/* A replica's VM lost: Vertex restarts it elsewhere, and with
	 * restartJobOnWorkerRestart every replica; the new supervisors
	 * restart the group from the newest committed step. */
	name = job_name("chaos");
	snprintf(body, sizeof(body),
		 "{\"name\": \"%s\", \"pool\": 1, \"replica\": 0}", name);
	POST("/_fake/lose_vm", body);
	gen = generation_of(wait_running("chaos", 3, gen + 1, 350));

	/* A maintenance event on another worker's VM (the torch test
	 * loses the primary's): SIGTERM, the emergency step, every replica
	 * restarted. */
	snprintf(body, sizeof(body),
		 "{\"name\": \"%s\", \"pool\": 1, \"replica\": 1}", name);
	POST("/_fake/maintenance", body);
	gen = generation_of(wait_running("chaos", 3, gen + 1, 420));

	/* The Spot job preempted: SIGTERM, the emergency step, the job
	 * FAILED; --watch submits it again. */
	preempt_until_posted_again("chaos", name);
	free(name);
	json_decref(wait_running("chaos", 3, gen + 1, 0));

	cr_expect_geq(generation_of(wait_state("chaos", "done", 300000)), 5,
		      "a crash, a lost VM, maintenance and a preemption: "
		      "4 restarts");
	status = wait_exit(watch, 60);
	cr_expect_eq(status, 0, "slicectl job --watch exited %d", status);
	json_decref(wait_end("chaos", "Completed", 60000));
	cr_expect_geq(generation_of(wait_state("calm", "done", 300000)), 1);

	chaos = sgd_checkpoint_params_of(bucket, dir, "chaos", 600, 1, 3);
	calm = sgd_checkpoint_params_of(bucket, dir, "calm", 600, 1, 3);
	cr_assert_str_eq(chaos, calm);
	for (int w = 0; w < 3; w++) {
		char *a = sgd_logged_params(bucket, "chaos", 0, w);
		char *b = sgd_logged_params(bucket, "calm", 0, w);

		cr_assert_str_eq(a, chaos, "worker %d", w);
		cr_assert_str_eq(b, calm, "worker %d", w);
		free(a);
		free(b);
	}
	free(chaos);
	free(calm);

	/* delete cancels and deletes every CustomJob of the run. */
	cr_assert_eq(run_slicectl(&r, (const char *const[]){
			"delete", "chaos", "--bucket", bucket, NULL }, NULL),
		     0);
	cr_expect_eq(r.status, 0, "%s%s", r.out, r.err);
	run_result_release(&r);
	cr_expect_eq(custom_jobs_submitted_again("chaos"), -1);
	fake_stop(&fake);
}

/* slicectl job for run with the fault rule (a JSON object) on create;
 * its exit status, stderr in *err (to be freed). */
static int job_with_fault(const char *run, const char *rule, char **err)
{
	struct run_result r;
	int status;

	api("DELETE", "/_fake/faults", NULL, NULL);
	POST("/_fake/faults", rule);
	cr_assert_eq(run_slicectl(&r, vertex_argv(run, NULL),
				  (const char *const[]){
					  "SLICECTL_HTTP_RETRY_BASE_MS=1",
					  NULL }),
		     0);
	status = r.status;
	*err = strdup(r.err);
	run_result_release(&r);
	return status;
}

Test(vertex_live, errors_name_the_problem_and_the_fix_and_reset_posts_anew)
{
	struct run_result r;
	char *err;
	json_t *j;

	vertex_fake_start();
	cr_expect_eq(job_with_fault("e1", "{\"method\": \"POST\", \"path\": "
				    "\"customJobs$\", \"status\": 403, "
				    "\"message\": \"Vertex AI API has not "
				    "been used in project proj before or it "
				    "is disabled.\"}", &err), 1);
	cr_expect(strstr(err, "gcloud services enable "
			      "aiplatform.googleapis.com"), "%s", err);
	free(err);
	cr_expect_eq(job_with_fault("e2", "{\"method\": \"POST\", \"path\": "
				    "\"customJobs$\", \"status\": 403, "
				    "\"message\": \"Permission "
				    "'aiplatform.customJobs.create' denied\"}",
				    &err), 1);
	cr_expect(strstr(err, "roles/aiplatform.user"), "%s", err);
	free(err);
	cr_expect_eq(job_with_fault("e3", "{\"method\": \"POST\", \"path\": "
				    "\"customJobs$\", \"count\": -1, \"status\": "
				    "429, \"message\": \"Quota exceeded for "
				    "custom_model_training_nvidia_l4_gpus\"}",
				    &err), 1);
	cr_expect(strstr(err, "quota"), "%s", err);
	cr_expect(strstr(err, "the same command submits it again"), "%s",
		  err);
	free(err);
	cr_expect_eq(job_with_fault("e4", "{\"method\": \"POST\", \"path\": "
				    "\"customJobs$\", \"status\": 400, "
				    "\"message\": \"Invalid value at "
				    "'custom_job.job_spec'\"}", &err), 1);
	cr_expect(strstr(err, "custom_job.job_spec"), "%s", err);
	cr_expect(strstr(err, "--render prints the body"), "%s", err);
	free(err);
	api("DELETE", "/_fake/faults", NULL, NULL);

	/* reset: the CustomJob cancelled and posted again. */
	cr_assert_eq(run_slicectl(&r, vertex_argv("rst", NULL), NULL), 0);
	cr_assert_eq(r.status, 0, "%s%s", r.out, r.err);
	run_result_release(&r);
	json_decref(wait_running("rst", 3, 1, 0));
	cr_assert_eq(run_slicectl(&r, (const char *const[]){
			"reset", "rst", "--bucket", bucket, "--wait", NULL },
			NULL), 0);
	cr_expect_eq(r.status, 0, "%s%s", r.out, r.err);
	cr_expect(strstr(r.out, "every replica of restart attempt 1 runs"),
		  "%s", r.out);
	run_result_release(&r);
	cr_expect_eq(custom_jobs_submitted_again("rst"), 1);
	j = wait_running("rst", 3, 2, 0);
	cr_expect_str_eq(jstr(json_object_get(j, "target"), "job_state"),
			 "JOB_STATE_RUNNING");
	json_decref(j);
	cr_assert_eq(run_slicectl(&r, (const char *const[]){
			"delete", "rst", "--bucket", bucket, NULL }, NULL), 0);
	cr_expect_eq(r.status, 0, "%s%s", r.out, r.err);
	run_result_release(&r);
	fake_stop(&fake);
}

/* A FLEX_START job that waits past --max-wait fails (RESOURCE_EXHAUSTED);
 * --watch posts it again, and the run goes on once capacity comes. */
Test(vertex_live, watch_posts_a_flex_start_job_again_after_max_wait)
{
	const char *const *argv;
	const char *v[MAX_ARGS];
	char out[HARNESS_PATH + 16], err[HARNESS_PATH + 16];
	size_t n = 0;
	pid_t watch;
	int status;

	vertex_fake_start();
	POST("/_fake/config", "{\"hold\": true}");
	argv = vertex_argv("flex", (const char *const[]){
		"--flex-start", "--max-wait", "1", "--watch",
		"--recreate-budget", "2", NULL });
	for (; argv[n]; n++)
		v[n] = argv[n];
	/* A short run: the point is the watch. */
	for (size_t i = 0; i < n; i++)
		if (!strcmp(v[i], "SGD_STEPS=" STEPS))
			v[i] = "SGD_STEPS=60";
	v[n] = NULL;
	snprintf(out, sizeof(out), "%s/flex.out", dir);
	snprintf(err, sizeof(err), "%s/flex.err", dir);
	watch = spawn_slicectl(v, out, err);
	cr_assert_gt(watch, 0);
	for (long long until = now_ms() + 60000;
	     !exists("bucket/flex/control.json") ||
	     custom_jobs_submitted_again("flex") < 1;
	     sleep_ms(300))
		cr_assert_lt(now_ms(), until, "--watch did not post it "
			     "again:\n%s", read_file(err, NULL));
	POST("/_fake/config", "{\"hold\": false}");
	cr_expect_geq(generation_of(wait_state("flex", "done", 120000)), 2);
	status = wait_exit(watch, 60);
	cr_expect_eq(status, 0, "slicectl job --watch exited %d", status);
	fake_stop(&fake);
}
