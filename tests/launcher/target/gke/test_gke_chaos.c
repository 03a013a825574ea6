/*
 * slicectl job --target gke against the Kubernetes API fake:
 * examples/sgd on 2 slices x 2 workers under a trainer crash, a hang, a
 * pod eviction and the loss of a node pool, whose final parameters are
 * those of an uninterrupted run through the fake, to the bit; and a pod
 * whose preflight fails, which JobSet replaces. The fixture is
 * gke_live_check.c's.
 */
#include "tests/launcher/target/gke/gke_live_check.h"
#include "tests/harness/harness.h"
#include "tests/launcher/sgd_params.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

TestSuite(gke_live, .init = setup, .fini = cleanup, .timeout = 600);

/* The host pid of run's trainer of process p (the pods' PID namespaces
 * hide it from the supervisor's heartbeat), found by its environment. */
static pid_t trainer_pid(const char *run, int p)
{
	char sync[HARNESS_PATH + 64], proc[64];
	pid_t found;

	snprintf(sync, sizeof(sync), "\nSGD_SYNC_DIR=%s/sync-%s\n", dir, run);
	snprintf(proc, sizeof(proc), "\nSLICE_PROCESS_ID=%d\n", p);
	processes_with("train.py", NULL, sync + 1, proc, &found);
	return found;
}

static long long restart_attempt_max(const char *run)
{
	json_t *j = status_json(run), *p;
	long long most = -1;
	size_t i;

	json_array_foreach(json_object_get(json_object_get(j, "target"),
					   "pods"), i, p) {
		json_t *a = json_object_get(p, "restart_attempt");

		if (json_is_integer(a) && json_integer_value(a) > most)
			most = json_integer_value(a);
	}
	json_decref(j);
	return most;
}

/* The name of run's pod of slice s, worker w, as status shows it. */
static char *pod_name(const char *run, int s, int w)
{
	json_t *j = status_json(run), *p;
	char *name = NULL;
	size_t i;

	json_array_foreach(json_object_get(json_object_get(j, "target"),
					   "pods"), i, p) {
		if (json_integer_value(json_object_get(p, "slice")) == s &&
		    json_integer_value(json_object_get(p, "worker")) == w &&
		    !strcmp(jstr(p, "phase"), "Running"))
			name = strdup(jstr(p, "name"));
	}
	json_decref(j);
	cr_assert(name, "no running pod %d/%d of %s", s, w, run);
	return name;
}

static void run_job(const char *const *argv)
{
	struct run_result r;

	cr_assert_eq(run_slicectl(&r, argv, NULL), 0);
	cr_assert_eq(r.status, 0, "%s%s", r.out, r.err);
	cr_assert(strstr(r.out, "pods 4/4 running"), "%s", r.out);
	run_result_release(&r);
}

Test(gke_live, sgd_under_eviction_node_loss_crash_and_hang_ends_bit_exact)
{
	char body[512], *name, *chaos, *calm;
	long long gen;
	json_t *j;
	pid_t pid;

	start_fake((const char *const[]){ "--pass-env", "PYTHONUNBUFFERED",
					  NULL });
	make_queue(32);
	/* v4-16: 2 hosts of 4 chips a slice; 2 slices. */
	run_job(job_argv("chaos", "v4-16", "2", "exec python3 train.py",
			 sgd_flags("chaos", "600", "0.03", NULL)));

	/* A trainer crash: the group restarts in place (control.json). */
	j = wait_running("chaos", 4, 1, 50);
	gen = json_integer_value(json_object_get(j, "generation"));
	json_decref(j);
	pid = trainer_pid("chaos", 1);
	cr_assert_gt(pid, 0, "no trainer of process 1");
	cr_assert_eq(kill(pid, SIGKILL), 0);
	j = wait_running("chaos", 4, gen + 1, 100);
	cr_expect_eq(restart_attempt_max("chaos"), 0,
		     "a crash recreated pods");
	gen = json_integer_value(json_object_get(j, "generation"));
	json_decref(j);

	/* A hang: the hang timeout restarts it in place too. */
	pid = trainer_pid("chaos", 2);
	cr_assert_gt(pid, 0, "no trainer of process 2");
	cr_assert_eq(kill(pid, SIGSTOP), 0);
	j = wait_running("chaos", 4, gen + 1, 150);
	cr_expect_eq(restart_attempt_max("chaos"), 0,
		     "a hang recreated pods");
	gen = json_integer_value(json_object_get(j, "generation"));
	json_decref(j);

	/* A pod evicted: SIGTERM and its grace, the emergency checkpoint;
	 * JobSet recreates every pod (restart attempt 1). */
	name = pod_name("chaos", 0, 1);
	snprintf(body, sizeof(body),
		 "{\"namespace\": \"default\", \"name\": \"%s\"}", name);
	free(name);
	POST("/_fake/evict", body);
	j = wait_running("chaos", 4, gen + 1, 200);
	gen = json_integer_value(json_object_get(j, "generation"));
	json_decref(j);
	for (long long until = now_ms() + 60000;
	     restart_attempt_max("chaos") < 1; sleep_ms(500))
		cr_assert_lt(now_ms(), until, "JobSet did not restart");

	/* A node pool lost: slice 1's pods die at once; JobSet restarts. */
	j = wait_running("chaos", 4, gen, 250);
	json_decref(j);
	POST("/_fake/lose-node", "{\"jobset\": \"chaos\", \"slice\": 1, "
				 "\"namespace\": \"default\"}");
	for (long long until = now_ms() + 60000;
	     restart_attempt_max("chaos") < 2; sleep_ms(500))
		cr_assert_lt(now_ms(), until, "JobSet did not restart again");

	json_decref(wait_state("chaos", "done", 300000));
	j = wait_end("chaos", "Completed", 60000);
	cr_expect_geq(json_integer_value(json_object_get(j, "generation")), 5);
	json_decref(j);

	/* The same job, never interrupted. */
	run_job(job_argv("calm", "v4-16", "2", "exec python3 train.py",
			 sgd_flags("calm", "600", "0", NULL)));
	j = wait_state("calm", "done", 300000);
	cr_expect_eq(json_integer_value(json_object_get(j, "generation")), 1);
	json_decref(j);

	chaos = sgd_checkpoint_params(bucket, dir, "chaos", 600);
	calm = sgd_checkpoint_params(bucket, dir, "calm", 600);
	cr_assert_str_eq(chaos, calm);
	for (int p = 0; p < 4; p++) {
		char *a = sgd_logged_params(bucket, "chaos", p / 2, p % 2);
		char *b = sgd_logged_params(bucket, "calm", p / 2, p % 2);

		cr_assert_str_eq(a, chaos, "worker %d/%d", p / 2, p % 2);
		cr_assert_str_eq(b, calm);
		free(a);
		free(b);
	}
	free(chaos);
	free(calm);
	fake_stop(&fake);
}

/* Starts run with the sgd trainer, preflight and the extra flag (or
 * NULL) and waits until it is done and its JobSet completed. */
static void run_preflight_job(const char *run, const char *preflight,
			      const char *flag)
{
	const char *const *flags = sgd_flags(run, "100", "0.02", NULL);
	const char *extra[48];
	struct run_result r;
	size_t n = 0;
	json_t *j;

	for (; flags[n] && n < 44; n++)
		extra[n] = flags[n];
	extra[n++] = "--preflight";
	extra[n++] = preflight;
	if (flag)
		extra[n++] = flag;
	extra[n] = NULL;
	cr_assert_eq(run_slicectl(&r, job_argv(run, "v4-16", "2",
					       "exec python3 train.py", extra),
				  NULL), 0);
	cr_assert_eq(r.status, 0, "%s%s", r.out, r.err);
	run_result_release(&r);
	j = wait_state(run, "done", 300000);
	cr_expect_geq(json_integer_value(json_object_get(j, "generation")), 2);
	json_decref(j);
	json_decref(wait_end(run, "Completed", 60000));
}

/* Worker 1's pod fails its preflight once (the preflight takes its fault
 * away): it exits 4, which is not the run's failure, so JobSet restarts
 * the set; the new pods pass it and the run is done. Its cordon was
 * asked for but the service account may not patch nodes: the pod says
 * so and exits 4 all the same. */
Test(gke_live, a_failed_preflight_restarts_the_jobset_and_the_run_goes_on)
{
	char preflight[HARNESS_PATH * 2 + 128], marker[HARNESS_PATH + 16];

	start_fake((const char *const[]){ "--pass-env", "PYTHONUNBUFFERED",
					  "--tls", NULL });
	make_queue(32);
	POST("/_fake/forbid", "{\"verb\": \"patch\", \"resource\": "
			      "\"nodes\"}");
	snprintf(marker, sizeof(marker), "%s/bad-node", dir);
	cr_assert_eq(sh("touch '%s'", marker), 0);
	snprintf(preflight, sizeof(preflight),
		 "[ $RANK != 1 ] || [ ! -e %s ] || { rm -f %s; "
		 "echo GPU 0: Xid 79; exit 1; }", marker, marker);
	run_preflight_job("pre", preflight, "--cordon-on-preflight-failure");
	cr_expect(!exists("bad-node"));
	cr_expect_eq(sh("grep -l '\"kind\": *\"preflight_fail\"' "
			"'%s'/bucket/pre/events/*.json | xargs grep -q "
			"'Xid 79'", dir), 0);
	cr_expect_eq(sh("grep -l '\"kind\": *\"cordon\"' "
			"'%s'/bucket/pre/events/*.json | xargs grep -q "
			"'not cordoned.*forbidden (403)'", dir), 0);
	fake_stop(&fake);
}

/* Slice 1's node fails every preflight: its pods cordon it (the fake's
 * service account may), so JobSet's new pods land on the pool's spare
 * node, pass, and the run is done. */
Test(gke_live, a_node_that_fails_the_preflight_is_cordoned_and_avoided)
{
	json_t *node = NULL;

	start_fake((const char *const[]){ "--pass-env", "PYTHONUNBUFFERED",
					  "--tls", NULL });
	make_queue(32);
	run_preflight_job("cordon",
			  "[ \"$SLICE_NODE_NAME\" != gke-tpu-slice-1 ] || "
			  "{ echo GPU 0: Xid 79; exit 1; }",
			  "--cordon-on-preflight-failure");
	cr_assert_eq(api("GET", "/api/v1/nodes/gke-tpu-slice-1", NULL, &node),
		     200);
	cr_expect(json_is_true(json_object_get(json_object_get(node, "spec"),
					       "unschedulable")));
	json_decref(node);
	cr_expect_eq(api("GET", "/api/v1/nodes/gke-tpu-slice-1-spare-1", NULL,
			 NULL), 200, "no pod went to the spare node");
	cr_expect_eq(sh("grep -l '\"kind\": *\"cordon\"' "
			"'%s'/bucket/cordon/events/*.json | xargs grep -q "
			"'gke-tpu-slice-1'", dir), 0);
	fake_stop(&fake);
}
