/*
 * slicectl job --target gke against the Kubernetes API fake
 * (tests/fakes/kube_fake.py: JobSet, Kueue and Job controllers, pods run
 * as local process trees of the real slice-supervisor --pod), reached
 * through a kubeconfig:
 *
 * - each error before a run starts, with its hint: JobSet not installed,
 *   Kueue not installed, an unknown LocalQueue, 403;
 * - admission waiting behind a higher-priority workload, then running;
 *   status, logs, restart, reset, stop and delete against that live run;
 * - examples/sgd on 2 slices x 2 workers under a trainer crash, a hang,
 *   a pod eviction and the loss of a node pool, whose final parameters
 *   are those of an uninterrupted run through the fake, to the bit.
 *
 * The fake is started here and stopped by its pid (it kills every
 * process group it started); the temporary directory is removed and no
 * process naming it may be left.
 */
#include "tests/harness/harness.h"
#include "tests/launcher/sgd_params.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char dir[HARNESS_PATH];
static char bucket[HARNESS_PATH + 32];
static char kubeconfig[HARNESS_PATH + 32];
static struct test_fake fake;
static int api_port;

static long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Starts the fake with extra flags (NULL-terminated), writes the
 * kubeconfig that reaches it. */
static void start_fake(const char *const *extra)
{
	char state[HARNESS_PATH + 32];
	const char *argv[32];
	size_t n = 0;
	FILE *f;

	snprintf(state, sizeof(state), "%s/fake", dir);
	rm_rf(state);
	argv[n++] = "--state-dir";
	argv[n++] = state;
	for (size_t i = 0; extra && extra[i]; i++)
		argv[n++] = extra[i];
	argv[n] = NULL;
	cr_assert_eq(fake_start(&fake, "tests/fakes/kube_fake.py", argv, 2,
				30000), 0, "the fake did not start");
	/* The plain port: the API, the container API and /_fake/. */
	api_port = (int)fake.ports[1];
	snprintf(kubeconfig, sizeof(kubeconfig), "%s/kubeconfig", dir);
	f = fopen(kubeconfig, "w");
	cr_assert(f);
	fprintf(f, "apiVersion: v1\nkind: Config\nclusters:\n- name: fake\n"
		   "  cluster:\n    server: http://127.0.0.1:%d\n"
		   "users:\n- name: dev\n  user:\n    token: t0ken\n"
		   "contexts:\n- name: fake\n  context:\n    cluster: fake\n"
		   "    user: dev\n    namespace: default\n"
		   "current-context: fake\n", api_port);
	fclose(f);
}

static void cleanup(void)
{
	fake_stop(&fake);
	if (dir[0]) {
		cr_expect_eq(processes_mentioning(dir), 0);
		rm_rf(dir);
	}
	dir[0] = '\0';
}

static void setup(void)
{
	char home[HARNESS_PATH + 16];

	cr_assert_eq(make_temp_dir(dir, sizeof(dir), "gke-live"), 0);
	snprintf(bucket, sizeof(bucket), "file://%s/bucket", dir);
	snprintf(home, sizeof(home), "%s/home", dir);
	cr_assert_eq(sh("mkdir -p '%s'", home), 0);
	setenv("SLICECTL_HOME", home, 1);
	setenv("SLICECTL_GKE_POLL_MS", "300", 1);
}

TestSuite(gke_live, .init = setup, .fini = cleanup, .timeout = 600);

/* A request to the fake; *out (may be NULL) its JSON answer. Returns the
 * HTTP status. */
static long api(const char *method, const char *path, const char *body,
		json_t **out)
{
	char url[256], outfile[HARNESS_PATH + 32];
	struct run_result r;
	long code;

	snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", api_port, path);
	snprintf(outfile, sizeof(outfile), "%s/api.out", dir);
	cr_assert_eq(run_program(&r, (const char *const[]){
					 "curl", "-s", "-o", outfile, "-w",
					 "%{http_code}", "-X", method, "-H",
					 "Content-Type: application/json",
					 "-H", "Authorization: Bearer t0ken",
					 "--data-binary", body ? body : "", url,
					 NULL },
				 NULL),
		     0);
	code = strtol(r.out, NULL, 10);
	run_result_release(&r);
	if (out) {
		*out = json_load_file(outfile, 0, NULL);
		cr_assert(*out || code == 0, "%s %s: no JSON", method, path);
	}
	return code;
}

#define POST(path, body) cr_assert_lt(api("POST", path, body, NULL), 300, \
				      "POST %s", path)

/* A ClusterQueue with quota chips of google.com/tpu that lets higher
 * priorities preempt lower ones, LocalQueue "lq" in default, and
 * PriorityClasses high and low. */
static void make_queue(unsigned chips)
{
	char cq[1024];

	POST("/apis/kueue.x-k8s.io/v1beta2/resourceflavors",
	     "{\"apiVersion\":\"kueue.x-k8s.io/v1beta2\",\"kind\":"
	     "\"ResourceFlavor\",\"metadata\":{\"name\":\"tpu\"}}");
	snprintf(cq, sizeof(cq),
		 "{\"apiVersion\":\"kueue.x-k8s.io/v1beta2\",\"kind\":"
		 "\"ClusterQueue\",\"metadata\":{\"name\":\"cq\"},\"spec\":{"
		 "\"namespaceSelector\":{},\"preemption\":{"
		 "\"withinClusterQueue\":\"LowerPriority\"},"
		 "\"resourceGroups\":[{\"coveredResources\":"
		 "[\"google.com/tpu\"],\"flavors\":[{\"name\":\"tpu\","
		 "\"resources\":[{\"name\":\"google.com/tpu\","
		 "\"nominalQuota\":%u}]}]}]}}", chips);
	POST("/apis/kueue.x-k8s.io/v1beta2/clusterqueues", cq);
	POST("/apis/kueue.x-k8s.io/v1beta2/namespaces/default/localqueues",
	     "{\"apiVersion\":\"kueue.x-k8s.io/v1beta2\",\"kind\":"
	     "\"LocalQueue\",\"metadata\":{\"name\":\"lq\",\"namespace\":"
	     "\"default\"},\"spec\":{\"clusterQueue\":\"cq\"}}");
	POST("/apis/scheduling.k8s.io/v1/priorityclasses",
	     "{\"apiVersion\":\"scheduling.k8s.io/v1\",\"kind\":"
	     "\"PriorityClass\",\"metadata\":{\"name\":\"high\"},\"value\":"
	     "1000}");
	POST("/apis/scheduling.k8s.io/v1/priorityclasses",
	     "{\"apiVersion\":\"scheduling.k8s.io/v1\",\"kind\":"
	     "\"PriorityClass\",\"metadata\":{\"name\":\"low\"},\"value\":"
	     "100}");
}

#define MAX_ARGS 64

/* argv for slicectl job --target gke of run name (NULL-terminated extra
 * flags after the usual ones); static storage until the next call. */
static const char *const *job_argv(const char *name, const char *type,
				   const char *slices, const char *command,
				   const char *const *extra)
{
	static const char *argv[MAX_ARGS];
	size_t n = 0;

	argv[n++] = "job";
	argv[n++] = "--target";
	argv[n++] = "gke";
	argv[n++] = "--kubeconfig";
	argv[n++] = kubeconfig;
	argv[n++] = "--queue";
	argv[n++] = "lq";
	argv[n++] = "--image";
	argv[n++] = "python:3.12";
	argv[n++] = "--name";
	argv[n++] = name;
	argv[n++] = "--bucket";
	argv[n++] = bucket;
	argv[n++] = "--accelerator-type";
	argv[n++] = type;
	argv[n++] = "--num-slices";
	argv[n++] = slices;
	argv[n++] = "--command";
	argv[n++] = command;
	argv[n++] = "--grace";
	argv[n++] = "3s";
	for (size_t i = 0; extra && extra[i]; i++) {
		cr_assert_lt(n, MAX_ARGS - 1);
		argv[n++] = extra[i];
	}
	argv[n] = NULL;
	return argv;
}

static bool exists(const char *rel)
{
	char path[HARNESS_PATH + 128];

	snprintf(path, sizeof(path), "%s/%s", dir, rel);
	return access(path, F_OK) == 0;
}

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

/* ---- a live run ---- */

/* `slicectl status RUN --format json`. */
static json_t *status_json(const char *run)
{
	struct run_result r;
	json_t *j;

	cr_assert_eq(run_slicectl(&r, (const char *const[]){
					  "status", run, "--bucket", bucket,
					  "--format", "json", NULL },
				  NULL),
		     0);
	cr_assert_eq(r.status, 0, "status: %s%s", r.out, r.err);
	j = json_loads(r.out, 0, NULL);
	cr_assert_not_null(j, "status printed no JSON: %s", r.out);
	run_result_release(&r);
	return j;
}

static const char *jstr(json_t *o, const char *k)
{
	return json_string_value(json_object_get(o, k));
}

/* Whether every one of n workers reports running at the run's
 * generation, which is at least gen, and the run's committed step is at
 * least min_step. */
static bool all_running(json_t *j, size_t n, long long gen, long long min_step)
{
	json_t *ws = json_object_get(j, "workers"), *w;
	size_t i, ok = 0;

	json_array_foreach(ws, i, w) {
		const char *st = jstr(w, "state");

		if (st && !strcmp(st, "running") &&
		    json_integer_value(json_object_get(w, "generation")) ==
			    json_integer_value(json_object_get(j, "generation")))
			ok++;
	}
	return ok == n &&
	       json_integer_value(json_object_get(j, "generation")) >= gen &&
	       json_integer_value(json_object_get(j, "committed_step")) >=
		       min_step;
}

static json_t *wait_running(const char *run, size_t n, long long gen,
			    long long min_step)
{
	long long until = now_ms() + 120000;
	json_t *j = NULL;

	for (;;) {
		json_decref(j);
		j = status_json(run);
		if (all_running(j, n, gen, min_step))
			return j;
		if (now_ms() >= until) {
			char *text = json_dumps(j, JSON_INDENT(1));

			cr_assert_fail("%s: workers not running at generation "
				       ">= %lld, step %lld:\n%s", run, gen,
				       min_step, text);
		}
		sleep_ms(500);
	}
}

/* Waits until the run's control.json state is state. */
static json_t *wait_state(const char *run, const char *state, long ms)
{
	long long until = now_ms() + ms;
	json_t *j = NULL;

	for (;;) {
		json_decref(j);
		j = status_json(run);
		if (jstr(j, "state") && !strcmp(jstr(j, "state"), state))
			return j;
		if (now_ms() >= until) {
			char *text = json_dumps(j, JSON_INDENT(1));

			cr_assert_fail("%s never got %s:\n%s", run, state, text);
		}
		sleep_ms(500);
	}
}

/* Waits until the run's JobSet has ended as end; returns the status. */
static json_t *wait_end(const char *run, const char *end, long ms)
{
	long long until = now_ms() + ms;
	json_t *j = NULL;

	for (;;) {
		const char *e;

		json_decref(j);
		j = status_json(run);
		e = jstr(json_object_get(j, "target"), "end");
		if (e && !strcmp(e, end))
			return j;
		if (now_ms() >= until) {
			char *text = json_dumps(j, JSON_INDENT(1));

			cr_assert_fail("%s's JobSet never got %s:\n%s", run,
				       end, text);
		}
		sleep_ms(500);
	}
}

static const char *sgd_dir(void)
{
	static char path[HARNESS_PATH + 32];

	snprintf(path, sizeof(path), "%s/examples/sgd",
		 getenv("SLICECTL_SRCDIR"));
	return path;
}

/* examples/sgd's flags for run (sync directory its own). */
static const char *const *sgd_flags(const char *run, const char *steps,
				    const char *step_s, const char *extra)
{
	static char sync[HARNESS_PATH + 64], s1[64], s2[64];
	static const char *v[40];
	size_t n = 0;

	snprintf(sync, sizeof(sync), "SGD_SYNC_DIR=%s/sync-%s", dir, run);
	snprintf(s1, sizeof(s1), "SGD_STEPS=%s", steps);
	snprintf(s2, sizeof(s2), "SGD_STEP_S=%s", step_s);
	v[n++] = "--script-dir";
	v[n++] = sgd_dir();
	v[n++] = "--env";
	v[n++] = s1;
	v[n++] = "--env";
	v[n++] = s2;
	v[n++] = "--env";
	v[n++] = "SGD_CKPT_EVERY=50";
	v[n++] = "--env";
	v[n++] = "SGD_PRINT_EVERY=25";
	v[n++] = "--env";
	v[n++] = sync;
	v[n++] = "--env";
	v[n++] = "PYTHONUNBUFFERED=1";
	v[n++] = "--hang-timeout";
	v[n++] = "4s";
	v[n++] = "--max-restarts";
	v[n++] = "30";
	if (extra) {
		v[n++] = "--priority-class";
		v[n++] = extra;
	}
	v[n] = NULL;
	return v;
}

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

/* ---- examples/sgd under chaos, to the bit ---- */

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
