/* tests/launcher/target/gke/gke_live_check.c: see gke_live_check.h. */
#include "tests/launcher/target/gke/gke_live_check.h"

#include "tests/harness/harness.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_ARGS 64

char dir[HARNESS_PATH];
char bucket[HARNESS_PATH + 32];
char kubeconfig[HARNESS_PATH + 32];
struct test_fake fake;
int api_port;

long long now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void start_fake(const char *const *extra)
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

void cleanup(void)
{
	fake_stop(&fake);
	if (dir[0]) {
		cr_expect_eq(processes_mentioning(dir), 0);
		rm_rf(dir);
	}
	dir[0] = '\0';
}

void setup(void)
{
	char home[HARNESS_PATH + 16];

	cr_assert_eq(make_temp_dir(dir, sizeof(dir), "gke-live"), 0);
	snprintf(bucket, sizeof(bucket), "file://%s/bucket", dir);
	snprintf(home, sizeof(home), "%s/home", dir);
	cr_assert_eq(sh("mkdir -p '%s'", home), 0);
	setenv("SLICECTL_HOME", home, 1);
	setenv("SLICECTL_GKE_POLL_MS", "300", 1);
}

long api(const char *method, const char *path, const char *body,
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

void make_queue_for(const char *resource, const char *flavor,
		    const char *node_labels, unsigned quota)
{
	char cq[1024], rf[512], spec[256] = "";

	if (node_labels)
		snprintf(spec, sizeof(spec), ",\"spec\":{\"nodeLabels\":%s}",
			 node_labels);
	snprintf(rf, sizeof(rf),
		 "{\"apiVersion\":\"kueue.x-k8s.io/v1beta2\",\"kind\":"
		 "\"ResourceFlavor\",\"metadata\":{\"name\":\"%s\"}%s}",
		 flavor, spec);
	POST("/apis/kueue.x-k8s.io/v1beta2/resourceflavors", rf);
	snprintf(cq, sizeof(cq),
		 "{\"apiVersion\":\"kueue.x-k8s.io/v1beta2\",\"kind\":"
		 "\"ClusterQueue\",\"metadata\":{\"name\":\"cq\"},\"spec\":{"
		 "\"namespaceSelector\":{},\"preemption\":{"
		 "\"withinClusterQueue\":\"LowerPriority\"},"
		 "\"resourceGroups\":[{\"coveredResources\":"
		 "[\"%s\"],\"flavors\":[{\"name\":\"%s\","
		 "\"resources\":[{\"name\":\"%s\","
		 "\"nominalQuota\":%u}]}]}]}}", resource, flavor, resource, quota);
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

void make_queue(unsigned chips)
{
	make_queue_for("google.com/tpu", "tpu", NULL, chips);
}

const char *const *job_argv(const char *name, const char *type,
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

bool exists(const char *rel)
{
	char path[HARNESS_PATH + 128];

	snprintf(path, sizeof(path), "%s/%s", dir, rel);
	return access(path, F_OK) == 0;
}

/* status_json, or NULL while the run is not there yet (exit status 4)
 * when that is allowed. */
static json_t *status_of(const char *run, bool may_be_missing)
{
	struct run_result r;
	json_t *j;

	cr_assert_eq(run_slicectl(&r, (const char *const[]){
					  "status", run, "--bucket", bucket,
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

json_t *status_json(const char *run)
{
	return status_of(run, false);
}

/* The run's history (`slicectl events RUN`), for a failed wait's message:
 * it names every change of control.json, who made it and why. Static
 * storage until the next call. */
static const char *history_of(const char *run)
{
	static char text[8192];
	struct run_result r;
	const char *out;
	size_t len, keep = sizeof(text) - 1;

	if (run_slicectl(&r, (const char *const[]){ "events", run, "--bucket",
						     bucket, NULL },
			 NULL))
		return "(slicectl events did not run)";
	/* The newest events matter most: keep the end. */
	out = r.out ? r.out : "";
	len = strlen(out);
	snprintf(text, sizeof(text), "%s", len > keep ? out + len - keep : out);
	run_result_release(&r);
	return text;
}

const char *jstr(json_t *o, const char *k)
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

json_t *wait_running(const char *run, size_t n, long long gen,
			    long long min_step)
{
	long long until = now_ms() + 120000;
	json_t *j = NULL;

	for (;;) {
		json_decref(j);
		/* A job started in the background may not be there yet. */
		j = status_of(run, true);
		if (all_running(j, n, gen, min_step))
			return j;
		if (now_ms() >= until) {
			char *text = j ? json_dumps(j, JSON_COMPACT)
				 : strdup("(no run yet)");

			cr_assert_fail("%s: workers not running at generation "
				       ">= %lld, step %lld:\n%s\nhistory:\n%s",
				       run, gen, min_step, text,
				       history_of(run));
		}
		sleep_ms(500);
	}
}

json_t *wait_state(const char *run, const char *state, long ms)
{
	long long until = now_ms() + ms;
	json_t *j = NULL;

	for (;;) {
		json_decref(j);
		/* A job started in the background may not be there yet. */
		j = status_of(run, true);
		if (jstr(j, "state") && !strcmp(jstr(j, "state"), state))
			return j;
		if (now_ms() >= until) {
			char *text = j ? json_dumps(j, JSON_COMPACT)
				 : strdup("(no run yet)");

			cr_assert_fail("%s never got %s:\n%s\nhistory:\n%s",
				       run, state, text, history_of(run));
		}
		sleep_ms(500);
	}
}

json_t *wait_end(const char *run, const char *end, long ms)
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
			char *text = json_dumps(j, JSON_COMPACT);

			cr_assert_fail("%s's JobSet never got %s:\n%s\n"
				       "history:\n%s", run, end, text,
				       history_of(run));
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

void evict_pod(const char *run, size_t i)
{
	json_t *status = status_json(run);
	json_t *pods = json_object_get(json_object_get(status, "target"),
				       "pods");
	char body[512];

	cr_assert_lt(i, json_array_size(pods), "%s has no pod %zu", run, i);
	snprintf(body, sizeof(body),
		 "{\"namespace\": \"default\", \"name\": \"%s\"}",
		 jstr(json_array_get(pods, i), "name"));
	json_decref(status);
	POST("/_fake/evict", body);
}

const char *const *sgd_flags(const char *run, const char *steps,
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
