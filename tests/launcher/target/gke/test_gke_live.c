/*
 * slicectl job --target gke against the Kubernetes API fake
 * (tests/fakes/kube_fake.py: JobSet, Kueue and Job controllers, pods run
 * as local process trees of the real slice-supervisor --pod), reached
 * through a kubeconfig, the GKE API or an exec credential plugin:
 *
 * - each error before a run starts, with its hint: JobSet not installed,
 *   Kueue not installed, an unknown LocalQueue, 403;
 * - the cluster found through the GKE API (its CA pinned, a bearer
 *   token), and a kubeconfig whose user is an exec credential plugin.
 *
 * A live run and the operator commands are in test_gke_operator.c,
 * examples/sgd under chaos in test_gke_chaos.c; the fixture is
 * gke_live_check.c's.
 */
#include "tests/launcher/target/gke/gke_live_check.h"
#include "tests/harness/harness.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

TestSuite(gke_live, .init = setup, .fini = cleanup, .timeout = 600);

static void expect_refused(const char *name, const char *queue,
			   const char *hint)
{
	struct run_result r;
	const char *const *argv = job_argv(name, "v5litepod-16", "1", "true",
					   NULL);

	/* job_argv's --queue lq, unless the test names another. */
	((const char **)argv)[6] = queue;
	cr_assert_eq(run_slicectl(&r, argv, NULL), 0);
	cr_expect_eq(r.status, 1, "status %d: %s", r.status, r.err);
	cr_expect(strstr(r.err, hint), "expected '%s' in:\n%s", hint, r.err);
	run_result_release(&r);
}

Test(gke_live, errors_with_hints)
{
	struct run_result r;
	char job_json[64];

	start_fake((const char *const[]){ "--without-group", "jobset.x-k8s.io",
					  NULL });
	expect_refused("nojobset", "lq", "JobSet is not installed in this "
					 "cluster");
	expect_refused("nojobset", "lq", "kubectl apply --server-side -f "
					 "https://github.com/kubernetes-sigs/"
					 "jobset/releases/download/v0.10.1/");
	fake_stop(&fake);

	start_fake((const char *const[]){ "--without-group", "kueue.x-k8s.io",
					  NULL });
	expect_refused("nokueue", "lq", "Kueue is not installed in this "
					"cluster");
	fake_stop(&fake);

	start_fake(NULL);
	make_queue(16);
	expect_refused("noqueue", "other-queue",
		       "there is no LocalQueue other-queue in namespace "
		       "default: kubectl get localqueues -n default");
	/* Nothing of those runs went into the bucket. */
	cr_expect(!exists("bucket/nojobset/job.json"));
	cr_expect(!exists("bucket/nokueue/job.json"));
	cr_expect(!exists("bucket/noqueue/job.json"));

	POST("/_fake/forbid", "{\"verb\":\"create\",\"resource\":\"jobsets\"}");
	expect_refused("forbidden", "lq", "403");
	expect_refused("forbidden", "lq", "slicectl needs to create and "
					  "delete jobsets");
	api("DELETE", "/_fake/forbid", NULL, NULL);
	POST("/_fake/forbid", "{\"verb\":\"get\",\"resource\":\"localqueues\"}");
	expect_refused("forbidden2", "lq", "403");
	api("DELETE", "/_fake/forbid", NULL, NULL);

	/* A kubeconfig that is not there is a usage error. */
	cr_assert_eq(run_slicectl(&r, (const char *const[]){
		"job", "--target", "gke", "--kubeconfig", "/nonexistent/kc",
		"--queue", "lq", "--image", "i", "--name", "r", "--bucket",
		bucket, "--accelerator-type", "v6e-16", "--command", "true",
		NULL }, NULL), 0);
	cr_expect_eq(r.status, 2, "%d: %s", r.status, r.err);
	run_result_release(&r);
	snprintf(job_json, sizeof(job_json), "bucket/r/job.json");
	cr_expect(!exists(job_json));
}

/* ---- reaching the cluster: the GKE API, an exec credential plugin ---- */

static void write_file(const char *path, const char *text, mode_t mode)
{
	FILE *f = fopen(path, "w");

	cr_assert(f, "%s", path);
	fputs(text, f);
	fclose(f);
	chmod(path, mode);
}

Test(gke_live, cluster_from_the_gke_api_and_an_exec_plugin)
{
	char endpoint[64], plugin[HARNESS_PATH + 32], kc[HARNESS_PATH + 32];
	char text[2048], *job, portable[HARNESS_PATH + 64];
	/* The pods run slice-supervisor.portable, as on GKE by default. */
	const char *env[] = { endpoint, "SLICECTL_ACCESS_TOKEN=t0ken",
			      portable, NULL };
	const char *cluster_job[] = {
		"job", "--target", "gke", "--cluster", "tpu-cluster",
		"--location", "us-central2", "--project", "proj", "--queue",
		"lq", "--image", "img", "--name", "viagke", "--bucket", bucket,
		"--accelerator-type", "v5litepod-16", "--command", "sleep 2",
		NULL,
	};
	struct run_result r;
	json_t *j;

	/* The API over TLS (its CA from the GKE API) and a bearer token. */
	start_fake((const char *const[]){ "--tls", "--require-token", "t0ken",
					  "--cluster",
					  "proj/us-central2/tpu-cluster",
					  NULL });
	make_queue(16);
	snprintf(endpoint, sizeof(endpoint),
		 "SLICECTL_CONTAINER_ENDPOINT=http://127.0.0.1:%d", api_port);
	snprintf(portable, sizeof(portable),
		 "SLICE_SUPERVISOR_BIN=%s/supervisor/slice-supervisor.portable",
		 getenv("SLICECTL_BUILDDIR"));
	cr_assert_eq(run_slicectl(&r, cluster_job, env), 0);
	cr_assert_eq(r.status, 0, "%s%s", r.out, r.err);
	cr_expect(strstr(r.out, "pods 4/4 running"), "%s", r.out);
	run_result_release(&r);
	snprintf(kc, sizeof(kc), "%s/bucket/viagke/job.json", dir);
	job = read_file(kc, NULL);
	cr_assert(job);
	j = json_loads(job, 0, NULL);
	free(job);
	cr_assert(j);
	cr_expect_str_eq(jstr(json_object_get(j, "target"), "kind"), "gke");
	cr_expect_str_eq(jstr(json_object_get(j, "target"), "cluster"),
			 "tpu-cluster");
	cr_expect_str_eq(jstr(json_object_get(j, "target"), "location"),
			 "us-central2");
	cr_expect_str_eq(jstr(json_object_get(j, "target"), "project"), "proj");
	cr_expect(json_is_null(json_object_get(json_object_get(j, "target"),
					       "kubeconfig")));
	json_decref(j);
	/* The same command again resumes the run: the JobSet is kept. */
	cr_assert_eq(run_slicectl(&r, cluster_job, env), 0);
	cr_expect_eq(r.status, 0, "%s%s", r.out, r.err);
	cr_expect(strstr(r.err, "JobSet default/viagke exists already: "
				"keeping it"), "%s", r.err);
	run_result_release(&r);
	/* The operator commands find the cluster from job.json. */
	cr_assert_eq(run_slicectl(&r, (const char *const[]){
		"status", "viagke", "--bucket", bucket, NULL }, env), 0);
	cr_expect(strstr(r.out, "JobSet default/viagke: Kueue"), "%s%s", r.out,
		  r.err);
	run_result_release(&r);
	cr_assert_eq(run_slicectl(&r, (const char *const[]){
		"delete", "viagke", "--bucket", bucket, "--wait", NULL }, env),
		0);
	cr_expect_eq(r.status, 0, "%s", r.err);
	run_result_release(&r);

	/* A cluster the API does not know. */
	cluster_job[4] = "nope";
	cluster_job[14] = "other";
	cr_assert_eq(run_slicectl(&r, cluster_job, env), 0);
	cr_expect_eq(r.status, 1, "%s", r.err);
	cr_expect(strstr(r.err, "cluster nope in us-central2 (project proj)"),
		  "%s", r.err);
	run_result_release(&r);

	/* A kubeconfig whose user is an exec credential plugin (as
	 * gke-gcloud-auth-plugin), over the plain port. */
	snprintf(plugin, sizeof(plugin), "%s/auth-plugin", dir);
	write_file(plugin,
		   "#!/bin/sh\n"
		   "printf '{\"apiVersion\": \"client.authentication.k8s.io/"
		   "v1beta1\", \"kind\": \"ExecCredential\", \"status\": "
		   "{\"token\": \"%s\"}}\\n' \"${FAKE_TOKEN:-t0ken}\"\n",
		   0755);
	snprintf(kc, sizeof(kc), "%s/kubeconfig-exec", dir);
	snprintf(text, sizeof(text),
		 "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
		 "clusters:\n- name: k\n  cluster:\n"
		 "    server: http://127.0.0.1:%d\n"
		 "users:\n- name: u\n  user:\n    exec:\n"
		 "      apiVersion: client.authentication.k8s.io/v1beta1\n"
		 "      command: %s\n"
		 "      installHint: install the plugin\n"
		 "contexts:\n- name: c\n  context:\n    cluster: k\n"
		 "    user: u\n", api_port, plugin);
	write_file(kc, text, 0600);
	cr_assert_eq(run_slicectl(&r, (const char *const[]){
		"job", "--target", "gke", "--kubeconfig", kc, "--queue", "lq",
		"--image", "img", "--name", "viaexec", "--bucket", bucket,
		"--accelerator-type", "v5litepod-16", "--command", "sleep 2",
		NULL }, NULL), 0);
	cr_expect_eq(r.status, 0, "%s%s", r.out, r.err);
	cr_expect(strstr(r.out, "pods 4/4 running"), "%s", r.out);
	run_result_release(&r);
	/* The same plugin handing out a wrong token: 401, nothing made. */
	cr_assert_eq(run_slicectl(&r, (const char *const[]){
		"job", "--target", "gke", "--kubeconfig", kc, "--queue", "lq",
		"--image", "img", "--name", "badtoken", "--bucket", bucket,
		"--accelerator-type", "v5litepod-16", "--command", "true",
		NULL }, (const char *const[]){ "FAKE_TOKEN=wrong", NULL }), 0);
	cr_expect_eq(r.status, 1, "%s%s", r.out, r.err);
	cr_expect(strstr(r.err, "401"), "%s", r.err);
	cr_expect(!exists("bucket/badtoken/job.json"));
	run_result_release(&r);
	fake_stop(&fake);
}
