/*
 * slicectl job --target gke against the Kubernetes API fake: admission
 * waiting behind a higher-priority workload, then running; status, logs,
 * restart, reset, stop and delete against that live run. The fixture is
 * gke_live_check.c's.
 */
#include "tests/launcher/target/gke/gke_live_check.h"
#include "tests/harness/harness.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

TestSuite(gke_live, .init = setup, .fini = cleanup, .timeout = 600);

/* Runs slicectl with argv in the background; its output goes to
 * DIR/NAME.out and .err. */
static pid_t spawn(const char *const *argv, const char *name)
{
	char out[HARNESS_PATH + 64], err[HARNESS_PATH + 64];

	snprintf(out, sizeof(out), "%s/%s.out", dir, name);
	snprintf(err, sizeof(err), "%s/%s.err", dir, name);
	return spawn_slicectl(argv, out, err);
}

static char *output_of(const char *name, const char *ext)
{
	char path[HARNESS_PATH + 64];
	char *text;

	snprintf(path, sizeof(path), "%s/%s.%s", dir, name, ext);
	text = read_file(path, NULL);
	return text ? text : strdup("");
}

/* The JobSet's pods: name -> restart attempt, as the fake has them. */
static json_t *pods_of(const char *run)
{
	char path[256];
	json_t *list = NULL;

	snprintf(path, sizeof(path),
		 "/api/v1/namespaces/default/pods?labelSelector="
		 "jobset.sigs.k8s.io/jobset-name%%3D%s", run);
	cr_assert_eq(api("GET", path, NULL, &list), 200);
	return list;
}

Test(gke_live, admission_behind_higher_priority_then_operator_commands)
{
	struct run_result r;
	pid_t second;
	char *out, *err, *names_before;
	json_t *j, *t, *pods, *p;
	size_t i;
	int status;

	start_fake((const char *const[]){ "--pass-env", "PYTHONUNBUFFERED",
					  NULL });
	/* Room for one v5litepod-16 slice (16 chips) at a time. */
	make_queue(16);

	/* A high-priority run takes the quota: its trainers end after 8 s. */
	cr_assert_eq(run_slicectl(&r, job_argv("first", "v5litepod-16", "1",
					       "sleep 8",
					       (const char *const[]){
						       "--priority-class",
						       "high", NULL }),
				  NULL),
		     0);
	cr_assert_eq(r.status, 0, "%s%s", r.out, r.err);
	cr_assert(strstr(r.out, "pods 4/4 running"), "%s", r.out);
	run_result_release(&r);

	/* The low-priority one waits behind it, then runs. */
	second = spawn(job_argv("live", "v5litepod-16", "1",
				"exec python3 train.py",
				sgd_flags("live", "100000", "0.05", "low")),
		       "live");
	cr_assert_gt(second, 0);
	status = wait_exit(second, 120);
	out = output_of("live", "out");
	err = output_of("live", "err");
	cr_assert_eq(status, 0, "%d\n%s\n%s", status, out, err);
	cr_expect(strstr(out, "live: Kueue pending, 0 ahead of it in lq"),
		  "%s", out);
	cr_expect(strstr(out, "live: Kueue admitted"), "%s", out);
	cr_expect(strstr(out, "pods 4/4 running"), "%s", out);
	cr_expect(strstr(out, "slicectl status live --bucket"), "%s", out);
	cr_expect(strstr(out, "slicectl delete live --bucket"), "%s", out);
	free(out);
	free(err);

	/* The first run is done and its JobSet completed. */
	json_decref(wait_state("first", "done", 30000));
	json_decref(wait_end("first", "Completed", 30000));

	/* status: the bucket's view plus Kueue and the pods. */
	j = wait_running("live", 4, 1, 0);
	t = json_object_get(j, "target");
	cr_assert(json_is_object(t), "no target in status");
	cr_expect_str_eq(jstr(t, "kind"), "gke");
	cr_expect_str_eq(jstr(t, "object"), "JobSet default/live");
	cr_expect_str_eq(jstr(t, "kueue"), "admitted");
	cr_expect_eq(json_integer_value(json_object_get(t, "restarts")), 0);
	cr_expect_eq(json_array_size(json_object_get(t, "pods")), 4);
	json_array_foreach(json_object_get(t, "pods"), i, p) {
		cr_expect_str_eq(jstr(p, "phase"), "Running");
		cr_expect_str_eq(jstr(p, "node"), "gke-tpu-slice-0");
		cr_expect_eq(json_integer_value(json_object_get(p, "slice")), 0);
	}
	json_decref(j);
	cr_assert_eq(run_slicectl(&r, (const char *const[]){
		"status", "live", "--bucket", bucket, NULL }, NULL), 0);
	cr_expect(strstr(r.out, "JobSet default/live: Kueue admitted"), "%s",
		  r.out);
	cr_expect(strstr(r.out, "gke-tpu-slice-0"), "%s", r.out);
	run_result_release(&r);

	/* logs: the trainer's output, from the bucket. */
	for (long long until = now_ms() + 30000;;) {
		cr_assert_eq(run_slicectl(&r, (const char *const[]){
			"logs", "live", "--bucket", bucket, "--worker", "0/3",
			NULL }, NULL), 0);
		if (r.status == 0 && strstr(r.out, "step"))
			break;
		cr_assert_lt(now_ms(), until, "%s%s", r.out, r.err);
		run_result_release(&r);
		sleep_ms(500);
	}
	run_result_release(&r);

	/* restart: in place, through control.json; no pod is recreated. */
	pods = pods_of("live");
	names_before = json_dumps(json_object_get(pods, "items"), 0);
	json_decref(pods);
	cr_assert_eq(run_slicectl(&r, (const char *const[]){
		"restart", "live", "--bucket", bucket, NULL }, NULL), 0);
	cr_assert_eq(r.status, 0, "%s", r.err);
	run_result_release(&r);
	j = wait_running("live", 4, 2, 0);
	json_array_foreach(json_object_get(json_object_get(j, "target"), "pods"),
			   i, p) {
		cr_expect(strstr(names_before, jstr(p, "name")),
			  "pod %s is new", jstr(p, "name"));
		cr_expect_eq(json_integer_value(
				     json_object_get(p, "restart_attempt")), 0);
	}
	free(names_before);
	json_decref(j);

	/* reset: every pod deleted, JobSet recreates them (restart attempt
	 * 1); the supervisors rejoin at a new generation. */
	cr_assert_eq(run_slicectl(&r, (const char *const[]){
		"reset", "live", "--bucket", bucket, NULL }, NULL), 0);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_expect(strstr(r.out, "JobSet default/live reset: every pod of "
				"restart attempt 1 runs"), "%s", r.out);
	run_result_release(&r);
	j = wait_running("live", 4, 3, 0);
	json_array_foreach(json_object_get(json_object_get(j, "target"), "pods"),
			   i, p)
		cr_expect_eq(json_integer_value(
				     json_object_get(p, "restart_attempt")), 1);
	cr_expect_eq(json_integer_value(json_object_get(
			     json_object_get(j, "target"), "restarts")), 1);
	json_decref(j);

	/* stop: every trainer saves and exits; the pods end Succeeded and
	 * the JobSet completes. */
	cr_assert_eq(run_slicectl(&r, (const char *const[]){
		"stop", "live", "--bucket", bucket, NULL }, NULL), 0);
	cr_assert_eq(r.status, 0, "%s", r.err);
	run_result_release(&r);
	j = wait_end("live", "Completed", 60000);
	t = json_object_get(j, "target");
	json_array_foreach(json_object_get(t, "pods"), i, p)
		cr_expect_str_eq(jstr(p, "phase"), "Succeeded");
	json_decref(j);

	/* delete: the JobSet goes (its Workload and pods with it). */
	cr_assert_eq(run_slicectl(&r, (const char *const[]){
		"delete", "live", "--bucket", bucket, "--wait", NULL }, NULL),
		0);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_expect(strstr(r.out, "JobSet default/live deleted"), "%s", r.out);
	run_result_release(&r);
	cr_expect_eq(api("GET", "/apis/jobset.x-k8s.io/v1alpha2/namespaces/"
				"default/jobsets/live", NULL, NULL), 404);
	pods = pods_of("live");
	cr_expect_eq(json_array_size(json_object_get(pods, "items")), 0);
	json_decref(pods);
	cr_assert_eq(run_slicectl(&r, (const char *const[]){
		"delete", "live", "--bucket", bucket, NULL }, NULL), 0);
	cr_expect_eq(r.status, 4, "%s", r.err);
	run_result_release(&r);
	fake_stop(&fake);
}
