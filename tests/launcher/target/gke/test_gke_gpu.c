/*
 * slicectl job --target gke with a GPU machine type against the
 * Kubernetes API fake: examples/sgd on 2 g2-standard-24 nodes (2 L4 GPUs
 * each). Kueue admits it against nvidia.com/gpu quota (a ResourceFlavor
 * whose nodeLabels pick the L4 pool); its pods land on GPU nodes (the
 * gke-accelerator label, nvidia.com/gpu capacity and taint); a second,
 * identical job waits for the quota while the first survives a pod's
 * eviction, then runs uninterrupted, and both end with the same
 * parameters, to the bit. The fixture is gke_live_check.c's.
 */
#include "tests/launcher/target/gke/gke_live_check.h"
#include "tests/harness/harness.h"
#include "tests/launcher/sgd_params.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

TestSuite(gke_live, .init = setup, .fini = cleanup, .timeout = 600);

#define STEPS "300"
#define N_ARGS 64

/* job_argv for an sgd run of 2 g2-standard-24 nodes. */
static const char *const *gpu_job(const char *run, const char *step_s)
{
	static const char *argv[N_ARGS];
	const char *const *sgd = sgd_flags(run, STEPS, step_s, NULL);
	const char *const *base;
	size_t n = 0;

	while (sgd[n])
		n++;
	cr_assert_lt(n + 3, N_ARGS);
	memcpy(argv, sgd, n * sizeof(*argv));
	argv[n++] = "--nodes";
	argv[n++] = "2";
	argv[n] = NULL;
	base = job_argv(run, "g2-standard-24", "1", "exec python3 train.py",
			argv);
	return base;
}

static json_t *pods_target(const char *run)
{
	json_t *j = status_json(run);
	json_t *pods = json_incref(json_object_get(json_object_get(j, "target"),
						   "pods"));

	json_decref(j);
	return pods;
}

/* Node name's labels, GPU capacity and taint, as GKE's GPU pools have. */
static void expect_gpu_node(const char *name)
{
	char path[256];
	json_t *n = NULL, *taint;

	snprintf(path, sizeof(path), "/api/v1/nodes/%s", name);
	cr_assert_eq(api("GET", path, NULL, &n), 200, "%s", name);
	cr_expect_str_eq(jstr(json_object_get(json_object_get(n, "metadata"),
					      "labels"),
			      "cloud.google.com/gke-accelerator"), "nvidia-l4");
	cr_expect_str_eq(jstr(json_object_get(json_object_get(n, "status"),
					      "allocatable"),
			      "nvidia.com/gpu"), "2");
	taint = json_array_get(json_object_get(json_object_get(n, "spec"),
					       "taints"), 0);
	cr_expect_str_eq(jstr(taint, "key"), "nvidia.com/gpu");
	cr_expect_str_eq(jstr(taint, "effect"), "NoSchedule");
	json_decref(n);
}

/* The message of run's Workload's QuotaReserved condition. */
static char *quota_message(const char *run)
{
	json_t *list = NULL, *wl, *c;
	char *msg = NULL;
	size_t i, k;

	cr_assert_eq(api("GET", "/apis/kueue.x-k8s.io/v1beta2/namespaces/"
				"default/workloads", NULL, &list), 200);
	json_array_foreach(json_object_get(list, "items"), i, wl) {
		if (!strstr(jstr(json_object_get(wl, "metadata"), "name"), run))
			continue;
		json_array_foreach(json_object_get(json_object_get(wl, "status"),
						   "conditions"), k, c)
			if (!strcmp(jstr(c, "type"), "QuotaReserved"))
				msg = strdup(jstr(c, "message"));
	}
	json_decref(list);
	return msg ? msg : strdup("");
}

Test(gke_live, gpu_nodes_quota_eviction_and_a_waiting_job)
{
	char out[HARNESS_PATH + 32], err[HARNESS_PATH + 32];
	char *msg, *first, *second, *text;
	struct run_result r;
	json_t *pods, *p, *j;
	long long gen;
	pid_t waiting;
	size_t i;
	int status;

	start_fake((const char *const[]){ "--pass-env", "PYTHONUNBUFFERED",
					  NULL });
	/* Room for one job: 2 nodes x 2 GPUs. */
	make_queue_for("nvidia.com/gpu", "l4",
		       "{\"cloud.google.com/gke-accelerator\":\"nvidia-l4\"}",
		       4);
	cr_assert_eq(run_slicectl(&r, gpu_job("gpu", "0.03"), NULL), 0);
	cr_assert_eq(r.status, 0, "%s%s", r.out, r.err);
	cr_assert(strstr(r.out, "pods 2/2 running"), "%s", r.out);
	run_result_release(&r);

	/* Each pod on a GPU node of its own. */
	pods = pods_target("gpu");
	cr_assert_eq(json_array_size(pods), 2);
	json_array_foreach(pods, i, p) {
		cr_expect(!strncmp(jstr(p, "node"), "gke-gpu-slice-0-", 16),
			  "%s", jstr(p, "node"));
		expect_gpu_node(jstr(p, "node"));
	}
	cr_expect_str_neq(jstr(json_array_get(pods, 0), "node"),
			  jstr(json_array_get(pods, 1), "node"));
	json_decref(pods);

	/* The same job again waits: the quota is taken. */
	snprintf(out, sizeof(out), "%s/calm.out", dir);
	snprintf(err, sizeof(err), "%s/calm.err", dir);
	waiting = spawn_slicectl(gpu_job("calm", "0"), out, err);
	cr_assert_gt(waiting, 0);
	for (long long until = now_ms() + 30000;; sleep_ms(300)) {
		msg = quota_message("calm");
		if (strstr(msg, "insufficient unused quota for nvidia.com/gpu"))
			break;
		cr_assert_lt(now_ms(), until, "calm not waiting: '%s'", msg);
		free(msg);
	}
	free(msg);

	/* A pod evicted: JobSet recreates the pods, the run resumes. */
	j = wait_running("gpu", 2, 1, 50);
	gen = json_integer_value(json_object_get(j, "generation"));
	json_decref(j);
	evict_pod("gpu", 1);
	json_decref(wait_running("gpu", 2, gen + 1, 100));
	json_decref(wait_state("gpu", "done", 300000));
	json_decref(wait_end("gpu", "Completed", 60000));

	/* The quota freed, the waiting job runs, never interrupted. */
	status = wait_exit(waiting, 240);
	text = read_file(out, NULL);
	cr_assert_eq(status, 0, "%d: %s", status, text ? text : "");
	cr_expect(text && strstr(text, "calm: Kueue pending"), "%s", text);
	cr_expect(text && strstr(text, "pods 2/2 running"), "%s", text);
	free(text);
	j = wait_state("calm", "done", 300000);
	cr_expect_eq(json_integer_value(json_object_get(j, "generation")), 1);
	json_decref(j);

	first = sgd_checkpoint_params_of(bucket, dir, "gpu", 300, 1, 2);
	second = sgd_checkpoint_params_of(bucket, dir, "calm", 300, 1, 2);
	cr_assert_str_eq(first, second);
	for (int w = 0; w < 2; w++) {
		char *a = sgd_logged_params(bucket, "gpu", 0, w);

		cr_expect_str_eq(a, first, "worker 0/%d", w);
		free(a);
	}
	free(first);
	free(second);
	fake_stop(&fake);
}
