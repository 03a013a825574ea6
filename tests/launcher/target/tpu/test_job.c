/*
 * slicectl job on the Cloud TPU path, against tests/fakes/tpu_fake.py and
 * a file:// bucket: the run's objects in the bucket, the queued resource
 * asked for with the rendered startup script, bad job specs refused before
 * any request, and --watch recreating a SUSPENDED queued resource (and
 * giving up when its budget is spent).
 */
#include "cloud/cloud.h"
#include "startup/startup.h"
#include "run/run.h"
#include "tests/cloud/fake_tpu.h"
#include "tests/harness/harness.h"

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
#define QR_PATH "/v2alpha1/projects/proj/locations/" ZONE "/queuedResources/"

static struct fake_tpu tpu;
static char tmp[HARNESS_PATH];
static char code[HARNESS_PATH + 16], bucket[HARNESS_PATH + 32];
static char env_endpoint[128], env_home[HARNESS_PATH + 32];
static const char *env[16];
#define ENV_DEFAULTS 5 /* env's entries before the project and zone */

static void up(void)
{
	cr_assert_eq(fake_tpu_start(&tpu, (const char *const[]){
					 "--delay", "0.05", NULL }),
		     0, "the TPU fake did not start");
	cr_assert_eq(make_temp_dir(tmp, sizeof(tmp), "job"), 0);
	snprintf(code, sizeof(code), "%s/code", tmp);
	snprintf(bucket, sizeof(bucket), "file://%s/bucket", tmp);
	cr_assert_eq(sh("mkdir -p '%s/sub' && echo 'print(1)' > '%s/train.py' "
			"&& echo data > '%s/sub/data.txt'", code, code, code),
		     0);
	snprintf(env_endpoint, sizeof(env_endpoint), "SLICECTL_TPU_ENDPOINT=%s",
		 tpu.base);
	snprintf(env_home, sizeof(env_home), "SLICECTL_HOME=%s/home", tmp);
	env[0] = env_endpoint;
	env[1] = env_home;
	env[2] = "SLICECTL_ACCESS_TOKEN=test-token";
	env[3] = "SLICECTL_TPU_POLL_MS=20";
	env[4] = "SLICECTL_HTTP_RETRY_BASE_MS=10";
	/* ENV_DEFAULTS: what env_without_defaults leaves out from here. */
	env[5] = "CLOUDSDK_CORE_PROJECT=proj";
	env[6] = "CLOUDSDK_COMPUTE_ZONE=" ZONE;
	env[7] = NULL;
}

static void down(void)
{
	fake_tpu_stop(&tpu);
	rm_rf(tmp);
}

TestSuite(job, .init = up, .fini = down, .timeout = 240);

static void slicectl_in(struct run_result *r, const char *const *e,
			const char *const *argv)
{
	cr_assert_eq(run_slicectl(r, argv, e), 0);
}

static void slicectl(struct run_result *r, const char *const *argv)
{
	slicectl_in(r, env, argv);
}

static void ok(const struct run_result *r)
{
	cr_assert_eq(r->status, 0, "exit %d\nstdout:\n%s\nstderr:\n%s",
		     r->status, r->out, r->err);
}

static json_t *create_body(void)
{
	json_t *all = fake_tpu_requests(&tpu), *q, *found = NULL;
	size_t i;

	json_array_foreach(all, i, q) {
		const char *p = json_string_value(json_object_get(q, "path"));
		const char *m = json_string_value(json_object_get(q, "method"));

		if (p && m && !strcmp(m, "POST") &&
		    strlen(p) > 16 && !strcmp(p + strlen(p) - 16, "/queuedResources"))
			found = json_object_get(q, "body");
	}
	cr_assert_not_null(found, "no create request");
	json_incref(found);
	json_decref(all);
	return found;
}

/* A copy of the state, "" when there is none. */
static char *state_of(json_t *j, json_t *state)
{
	const char *s = json_string_value(state);
	char *st = strdup(s ? s : "");

	json_decref(j);
	return st;
}

static char *qr_state(const char *name)
{
	char path[256];
	json_t *j;

	snprintf(path, sizeof(path), QR_PATH "%s", name);
	j = fake_tpu_get(&tpu, path);
	return state_of(j, json_object_get(json_object_get(j, "state"),
					   "state"));
}

static char *node_state(const char *name)
{
	char path[256];
	json_t *j;

	snprintf(path, sizeof(path),
		 "/v2alpha1/projects/proj/locations/" ZONE "/nodes/%s", name);
	j = fake_tpu_get(&tpu, path);
	return state_of(j, json_object_get(j, "state"));
}

static void wait_qr_state(const char *name, const char *want)
{
	char path[256];

	snprintf(path, sizeof(path), QR_PATH "%s", name);
	fake_tpu_wait_qr_state(&tpu, path, want);
}

static char *sha256_of(const char *path)
{
	struct run_result r;
	char *sha;

	cr_assert_eq(run_program(&r, (const char *const[]){ "sha256sum", path,
							   NULL }, NULL), 0);
	cr_assert_eq(r.status, 0);
	sha = strndup(r.out, 64);
	run_result_release(&r);
	return sha;
}

Test(job, cloud_job_puts_the_run_in_the_bucket_and_asks_for_the_qr)
{
	const char *sup = getenv("SLICE_SUPERVISOR_BIN");
	char path[HARNESS_PATH * 2], url[HARNESS_PATH + 64], want_sha[65];
	struct startup_params sp = { 0 };
	struct run_result r;
	struct job j;
	struct err e;
	char *text, *sha, *script = NULL;
	size_t len, slen;
	json_t *body, *spec, *node, *md;

	cr_assert_not_null(sup, "SLICE_SUPERVISOR_BIN is not set");
	slicectl(&r, (const char *const[]){
			 "job", "--name", "r1", "--bucket", bucket,
			 "--accelerator-type", "v4-16", "--num-slices", "2",
			 "--script-dir", code, "--command", "python3 train.py",
			 "--env", "A=1", "--spot", NULL });
	ok(&r);
	ASSERT_HAS(r.out, "slicectl status r1 --bucket");
	ASSERT_HAS(r.out, "slicectl run --tpu r1");
	run_result_release(&r);

	/* job.json */
	snprintf(path, sizeof(path), "%s/bucket/r1/job.json", tmp);
	text = read_file(path, &len);
	cr_assert_not_null(text);
	cr_assert_eq(job_parse(text, len, &j, &e), 0, "%s", e.msg);
	cr_assert_str_eq(j.name, "r1");
	cr_assert_str_eq(j.command, "python3 train.py");
	cr_assert_eq(j.env.n, 1);
	cr_assert_str_eq(j.env.v[0], "A=1");
	cr_assert_eq(j.num_slices, 2);
	cr_assert_eq(j.workers_per_slice, 2);
	cr_assert_str_eq(j.tpu_project, "proj");
	cr_assert_str_eq(j.tpu_zone, ZONE);
	cr_assert_str_eq(j.tpu_name, "r1");
	job_release(&j);
	free(text);

	/* bundle.tar.zst holds the script dir's files */
	snprintf(path, sizeof(path), "%s/bucket/r1/bundle.tar.zst", tmp);
	cr_assert_eq(run_program(&r, (const char *const[]){
			 "/bin/sh", "-c", "zstd -dc \"$1\" | tar -tf - | sort",
			 "sh", path, NULL }, NULL), 0);
	cr_assert_eq(r.status, 0, "%s", r.err);
	ASSERT_HAS(r.out, "train.py\n");
	ASSERT_HAS(r.out, "sub/data.txt\n");
	run_result_release(&r);

	/* the supervisor, named by its sha256 */
	sha = sha256_of(sup);
	snprintf(want_sha, sizeof(want_sha), "%s", sha);
	snprintf(path, sizeof(path),
		 "%s/bucket/r1/supervisor/slice-supervisor-%s", tmp, sha);
	free(sha);
	sha = sha256_of(path);
	cr_assert_str_eq(sha, want_sha);
	free(sha);

	/* control.json, generation 1 */
	snprintf(path, sizeof(path), "%s/bucket/r1/control.json", tmp);
	text = read_file(path, NULL);
	cr_assert_not_null(text);
	ASSERT_HAS(text, "\"running\"");
	free(text);

	/* the queued resource: 2 nodes, the rendered script, the label */
	body = create_body();
	spec = json_array_get(json_object_get(json_object_get(body, "tpu"),
					      "nodeSpec"), 0);
	cr_assert_not_null(spec);
	cr_assert_eq(json_integer_value(json_object_get(
			     json_object_get(spec, "multiNodeParams"),
			     "nodeCount")), 2);
	node = json_object_get(spec, "node");
	cr_assert_str_eq(json_string_value(json_object_get(node,
							   "acceleratorType")),
			 "v4-16");
	cr_assert_str_eq(json_string_value(json_object_get(
				 json_object_get(node, "labels"),
				 "slicectl_run")), "r1");
	cr_assert_not_null(json_object_get(body, "spot"));
	md = json_object_get(node, "metadata");
	cr_assert_not_null(json_object_get(md, "ssh-keys"));
	snprintf(url, sizeof(url), "%s/r1", bucket);
	sp.run_url = url;
	sp.supervisor_sha256 = want_sha;
	sp.grace_s = 25;
	cr_assert_eq(startup_render(&sp, &script, &slen, &e), 0, "%s", e.msg);
	cr_assert_str_eq(json_string_value(json_object_get(md,
							   "startup-script")),
			 script);
	free(script);
	json_decref(body);

	/* the same command again resumes; other flags are refused */
	slicectl(&r, (const char *const[]){
			 "job", "--name", "r1", "--bucket", bucket,
			 "--accelerator-type", "v4-16", "--num-slices", "2",
			 "--script-dir", code, "--command", "python3 train.py",
			 "--env", "A=1", "--spot", NULL });
	ok(&r);
	run_result_release(&r);
	slicectl(&r, (const char *const[]){
			 "job", "--name", "r1", "--bucket", bucket,
			 "--accelerator-type", "v4-16", "--num-slices", "2",
			 "--command", "python3 other.py", "--spot", NULL });
	cr_assert_eq(r.status, 2, "exit %d: %s", r.status, r.err);
	ASSERT_HAS(r.err, "describes another job");
	run_result_release(&r);
}

/* Run `name` (v4-8) with env e and extra arguments (NULL-terminated):
 * wants the object supervisor/slice-supervisor-SHA of file `want` in the
 * bucket, and the startup script asked for saying whether it is the
 * portable one. */
static void uploads(const char *name, const char *const *e,
		    const char *const *extra, const char *want, bool portable)
{
	const char *argv[16] = { "job", name, "--bucket", bucket,
				 "--accelerator-type", "v4-8", "--command",
				 "true" };
	char path[HARNESS_PATH * 2];
	struct run_result r;
	size_t n = 8;
	char *sha = sha256_of(want);
	json_t *body;
	const char *script;

	for (size_t i = 0; extra && extra[i]; i++)
		argv[n++] = extra[i];
	argv[n] = NULL;
	slicectl_in(&r, e, argv);
	ok(&r);
	run_result_release(&r);
	snprintf(path, sizeof(path),
		 "%s/bucket/%s/supervisor/slice-supervisor-%s", tmp, name, sha);
	cr_assert_eq(access(path, F_OK), 0, "%s: not %s's supervisor", name,
		     want);
	free(sha);
	body = create_body();
	script = json_string_value(json_object_get(json_object_get(
		json_object_get(json_array_get(json_object_get(
			json_object_get(body, "tpu"), "nodeSpec"), 0), "node"),
		"metadata"), "startup-script"));
	cr_assert_not_null(script);
	ASSERT_HAS(script, portable ? "\nSUPERVISOR_PORTABLE='1'\n"
				    : "\nSUPERVISOR_PORTABLE='0'\n");
	json_decref(body);
}

/* A TPU VM image need not have the build machine's glibc and OpenSSL
 * (Ubuntu 20.04's have 2.31 and 1.1): by default a TPU VM run gets
 * slice-supervisor.portable from next to slicectl; $SLICE_SUPERVISOR_BIN
 * and --supervisor-bin (first) still choose. */
Test(job, a_tpu_vm_run_gets_the_portable_supervisor_unless_told)
{
	const char *plain = getenv("SLICE_SUPERVISOR_BIN");
	const char *build = getenv("SLICECTL_BUILDDIR");
	const char *no_env[16];
	char port[HARNESS_PATH + 64];
	size_t n = 0;

	cr_assert_not_null(plain, "SLICE_SUPERVISOR_BIN is not set");
	cr_assert_not_null(build, "SLICECTL_BUILDDIR is not set");
	snprintf(port, sizeof(port), "%s/supervisor/slice-supervisor.portable",
		 build);
	for (; env[n]; n++)
		no_env[n] = env[n];
	no_env[n++] = "SLICE_SUPERVISOR_BIN=";
	no_env[n] = NULL;
	uploads("p1", no_env, NULL, port, true);
	uploads("p2", env, NULL, plain, false);
	uploads("p3", env, (const char *const[]){ "--supervisor-bin", port,
						  NULL }, port, true);
	uploads("p4", no_env, (const char *const[]){ "--supervisor-bin",
						     plain, NULL }, plain,
		false);
}

/* Runs a bad job: status want, stderr mentioning needle, no API request. */
static void refused(int want, const char *needle, const char *const *argv)
{
	struct run_result r;
	char changes[256];
	json_t *all;

	slicectl(&r, argv);
	cr_assert_eq(r.status, want, "exit %d (not %d)\nstderr:\n%s", r.status,
		     want, r.err);
	ASSERT_HAS(r.err, needle);
	run_result_release(&r);
	all = fake_tpu_requests(&tpu);
	fake_tpu_qr_changes(&tpu, changes, sizeof(changes));
	cr_assert_eq(json_array_size(all), 0, "requests were made: %s",
		     changes);
	json_decref(all);
}

Test(job, bad_job_specs_fail_before_any_request)
{
	char missing[HARNESS_PATH + 32];

	snprintf(missing, sizeof(missing), "%s/no-such-dir", tmp);
	refused(2, "not a valid run name", (const char *const[]){
			"job", "--name", "Bad_Name", "--bucket", bucket,
			"--accelerator-type", "v4-8", "--command", "true", NULL });
	refused(2, "--command is required", (const char *const[]){
			"job", "--name", "r2", "--bucket", bucket,
			"--accelerator-type", "v4-8", NULL });
	refused(2, "--env '1X=2'", (const char *const[]){
			"job", "--name", "r2", "--bucket", bucket,
			"--accelerator-type", "v4-8", "--command", "true",
			"--env", "1X=2", NULL });
	refused(2, "--script-dir", (const char *const[]){
			"job", "--name", "r2", "--bucket", bucket,
			"--accelerator-type", "v4-8", "--command", "true",
			"--script-dir", missing, NULL });
	refused(2, "--accelerator-type", (const char *const[]){
			"job", "--name", "r2", "--bucket", bucket,
			"--accelerator-type", "tpu-9000", "--command", "true",
			NULL });
	refused(2, "--bucket", (const char *const[]){
			"job", "--name", "r2", "--bucket", "s3://nope/x",
			"--accelerator-type", "v4-8", "--command", "true", NULL });
	refused(1, "--bucket", (const char *const[]){
			"job", "--name", "r2", "--bucket",
			"file:///proc/slicectl-no/bucket",
			"--accelerator-type", "v4-8", "--command", "true", NULL });
	cr_assert_neq(access(missing, F_OK), 0);
}

static void set_env(void)
{
	for (size_t i = 0; env[i]; i++)
		cr_assert_eq(putenv((char *)env[i]), 0);
}

static pid_t spawn_watch(const char *name, const char *budget,
			 char *out_path, char *err_path, size_t cap)
{
	pid_t pid;

	set_env();
	snprintf(out_path, cap, "%s/%s.out", tmp, name);
	snprintf(err_path, cap, "%s/%s.err", tmp, name);
	pid = spawn_slicectl((const char *const[]){
			"job", "--name", name, "--bucket", bucket,
			"--accelerator-type", "v4-8", "--command", "true",
			"--spot", "--watch", "--recreate-budget", budget,
			NULL }, out_path, err_path);
	cr_assert_gt(pid, 0);
	return pid;
}

static char *show(const char *path)
{
	char *t = read_file(path, NULL);

	return t ? t : strdup("(none)");
}

Test(job, watch_recreates_a_suspended_qr_until_the_run_is_done)
{
	char out_path[HARNESS_PATH + 32], err_path[HARNESS_PATH + 32];
	char url[HARNESS_PATH + 64], *o, *er;
	struct control c;
	struct store *s;
	struct err e;
	pid_t pid;
	int status;

	pid = spawn_watch("w1", "3", out_path, err_path, sizeof(out_path));
	wait_qr_state("w1", "ACTIVE");
	fake_tpu_suspend(&tpu, "w1");
	fake_tpu_wait_changes(&tpu, "POST DELETE POST");
	wait_qr_state("w1", "ACTIVE");

	snprintf(url, sizeof(url), "%s/w1", bucket);
	cr_assert_eq(store_open(&s, url, &e), 0, "%s", e.msg);
	cr_assert_eq(control_load(s, &c, &e), 0, "%s", e.msg);
	cr_assert_eq(c.generation, 2);
	cr_assert_str_eq(c.updated_by, "slicectl");
	cr_assert_str_eq(c.reason, "queued resource recreated after SUSPENDED");
	cr_assert_eq(control_set_state(s, NULL, "done", "finished", "test", &c,
				       &e), 0, "%s", e.msg);
	store_close(s);

	status = wait_exit(pid, 60);
	o = show(out_path);
	er = show(err_path);
	cr_assert_eq(status, 0, "exit %d\nstdout:\n%s\nstderr:\n%s", status, o,
		     er);
	ASSERT_HAS(o, "SUSPENDED");
	ASSERT_HAS(o, "run: done");
	free(o);
	free(er);
}

Test(job, watch_gives_up_when_the_recreate_budget_is_spent)
{
	char out_path[HARNESS_PATH + 32], err_path[HARNESS_PATH + 32];
	char *o, *er;
	pid_t pid;
	int status;

	pid = spawn_watch("w2", "1", out_path, err_path, sizeof(out_path));
	wait_qr_state("w2", "ACTIVE");
	fake_tpu_suspend(&tpu, "w2");
	fake_tpu_wait_changes(&tpu, "POST DELETE POST");
	wait_qr_state("w2", "ACTIVE");
	fake_tpu_suspend(&tpu, "w2");
	status = wait_exit(pid, 60);
	o = show(out_path);
	er = show(err_path);
	cr_assert_eq(status, 1, "exit %d\nstdout:\n%s\nstderr:\n%s", status, o,
		     er);
	ASSERT_HAS(er, "recreate budget (1) is spent");
	free(o);
	free(er);
	fake_tpu_qr_changes(&tpu, out_path, sizeof(out_path));
	cr_assert_str_eq(out_path, "POST DELETE POST");
}

/* ---- reset and delete of a run's queued resource ---- */

/* The environment of an operator's machine that reaches the API and the
 * bucket but has no default project, zone or bucket (plus one optional
 * "K=V"): everything must come from the run's job.json. */
static const char *const *env_without_defaults(const char *extra)
{
	static const char *e[ENV_DEFAULTS + 4];

	memcpy(e, env, ENV_DEFAULTS * sizeof(*e));
	e[ENV_DEFAULTS] = "CLOUDSDK_CORE_PROJECT=";
	e[ENV_DEFAULTS + 1] = "CLOUDSDK_COMPUTE_ZONE=";
	e[ENV_DEFAULTS + 2] = extra ? extra : "SLICECTL_BUCKET=";
	e[ENV_DEFAULTS + 3] = NULL;
	return e;
}

/* A run on the TPU path whose queued resource is ACTIVE. */
static void active_run(const char *name, const char *slices)
{
	struct run_result r;

	slicectl(&r, (const char *const[]){
			 "job", "--name", name, "--bucket", bucket,
			 "--accelerator-type", "v4-16", "--num-slices", slices,
			 "--command", "true", "--spot", NULL });
	ok(&r);
	run_result_release(&r);
	wait_qr_state(name, "ACTIVE");
}

/* Parses what --format json printed: one object on one line. */
static json_t *one_object(const struct run_result *r)
{
	json_error_t je;
	json_t *j = json_loads(r->out, 0, &je);

	cr_assert_not_null(j, "not JSON (%s):\n%s", je.text, r->out);
	cr_assert(json_is_object(j));
	cr_assert_eq(strchr(r->out, '\n'), r->out + strlen(r->out) - 1,
		     "not one line:\n%s", r->out);
	return j;
}

static void assert_field(json_t *j, const char *key, const char *want)
{
	json_t *v = json_object_get(j, key);

	if (!want) {
		cr_assert(json_is_null(v), "%s is not null", key);
		return;
	}
	cr_assert_str_eq(json_string_value(v) ? json_string_value(v) : "(none)",
			 want, "%s", key);
}

/* Checks the JSON a reset or delete printed for NAME, a run of bucket
 * (run_url true) or a plain queued resource. */
static void assert_qr_json(const struct run_result *r, const char *name,
			   bool run_url, const char *action, const char *state)
{
	char url[HARNESS_PATH + 64];
	json_t *j = one_object(r);

	snprintf(url, sizeof(url), "%s/%s", bucket, name);
	assert_field(j, "name", name);
	assert_field(j, "url", run_url ? url : NULL);
	assert_field(j, "queued_resource", name);
	assert_field(j, "project", "proj");
	assert_field(j, "zone", ZONE);
	assert_field(j, "action", action);
	assert_field(j, "state", state);
	json_decref(j);
}

static void assert_state(char *got, const char *want, const char *what)
{
	cr_assert_str_eq(got, want, "%s is %s, not %s", what, got, want);
	free(got);
}

Test(job, reset_a_run_from_its_job_json_and_wait_for_its_nodes)
{
	struct run_result r;

	active_run("rr", "2");
	slicectl_in(&r, env_without_defaults(NULL), (const char *const[]){
			 "reset", "rr", "--bucket", bucket, "--format",
			 "json", NULL });
	ok(&r);
	assert_qr_json(&r, "rr", true, "reset", "reset");
	ASSERT_HAS(r.err, "the queued resource of run");
	run_result_release(&r);
	/* It waited: the reset is done, every node READY again. */
	cr_assert_eq(fake_tpu_count(&tpu, "POST", QR_PATH "rr:reset"), 1);
	assert_state(qr_state("rr"), "ACTIVE", "the queued resource");
	assert_state(node_state("rr-0"), "READY", "node rr-0");
	assert_state(node_state("rr-1"), "READY", "node rr-1");

	slicectl_in(&r, env_without_defaults(NULL), (const char *const[]){
			 "reset", "rr", "--bucket", bucket, "--no-wait",
			 "--format", "json", NULL });
	ok(&r);
	assert_qr_json(&r, "rr", true, "reset", "resetting");
	run_result_release(&r);
	cr_assert_eq(fake_tpu_count(&tpu, "POST", QR_PATH "rr:reset"), 2);

	/* Text stays as it was. */
	slicectl_in(&r, env_without_defaults(NULL), (const char *const[]){
			 "reset", "rr", "--bucket", bucket, "--wait",
			 NULL });
	ok(&r);
	cr_assert_str_eq(r.out, "rr reset: every node is READY\n");
	run_result_release(&r);
}

Test(job, delete_a_run_s_queued_resource_and_keep_its_objects)
{
	char path[HARNESS_PATH + 32];
	struct run_result r;

	active_run("rd", "1");
	slicectl_in(&r, env_without_defaults(NULL), (const char *const[]){
			 "delete", "rd", "--bucket", bucket, "--force",
			 "--wait", "--format", "json", NULL });
	ok(&r);
	assert_qr_json(&r, "rd", true, "delete", "deleted");
	run_result_release(&r);
	slicectl(&r, (const char *const[]){ "describe", "rd", NULL });
	cr_assert_eq(r.status, 4, "exit %d: %s", r.status, r.err);
	run_result_release(&r);
	snprintf(path, sizeof(path), "%s/bucket/rd/job.json", tmp);
	cr_assert_eq(access(path, F_OK), 0, "job.json went with the QR");
}

/* Runs slicectl without defaults: status want, stderr mentioning needle,
 * nothing on stdout, no API request. */
static void refused_early(int want, const char *needle,
			 const char *const *argv)
{
	struct run_result r;
	json_t *all;

	slicectl_in(&r, env_without_defaults(NULL), argv);
	cr_assert_eq(r.status, want, "exit %d (not %d)\nstderr:\n%s", r.status,
		     want, r.err);
	ASSERT_HAS(r.err, needle);
	cr_assert_str_eq(r.out, "");
	run_result_release(&r);
	all = fake_tpu_requests(&tpu);
	cr_assert_eq(json_array_size(all), 0);
	json_decref(all);
}

Test(job, reset_and_delete_refuse_before_any_request)
{
	char want[HARNESS_PATH + 64];

	/* No such run under --bucket. */
	cr_assert_eq(sh("mkdir -p '%s/bucket'", tmp), 0);
	snprintf(want, sizeof(want), "no run nope under %s", bucket);
	refused_early(4, want, (const char *const[]){
			     "reset", "nope", "--bucket", bucket, "--format",
			     "json", NULL });
	refused_early(4, want, (const char *const[]){
			     "delete", "nope", "--bucket", bucket, "--force",
			     NULL });

	/* A run of the local provider: job.json without tpu_* fields. */
	cr_assert_eq(sh("mkdir -p '%s/bucket/loc' && printf '%%s' '{\"name\": "
			"\"loc\", \"command\": \"true\"}' > "
			"'%s/bucket/loc/job.json'", tmp, tmp), 0);
	refused_early(2, "slicectl restart loc", (const char *const[]){
			     "reset", "loc", "--bucket", bucket, NULL });
	refused_early(2, "slicectl stop loc", (const char *const[]){
			     "delete", "loc", "--bucket", bucket, "--force",
			     "--format", "json", NULL });

	/* --wait is the default; asking for both is a mistake. */
	refused_early(2, "exclude each other", (const char *const[]){
			     "reset", "q", "--wait", "--no-wait", "--project",
			     "proj", "--zone", ZONE, NULL });
}

Test(job, slicectl_bucket_in_the_environment_leaves_plain_qr_names_alone)
{
	char env_bucket[HARNESS_PATH + 64];
	const char *const *only_bucket;
	struct run_result r;

	snprintf(env_bucket, sizeof(env_bucket), "SLICECTL_BUCKET=%s", bucket);
	only_bucket = env_without_defaults(env_bucket);

	/* A run under $SLICECTL_BUCKET is found there... */
	active_run("re", "1");
	slicectl_in(&r, only_bucket, (const char *const[]){
			 "reset", "re", "--no-wait", NULL });
	ok(&r);
	cr_assert_str_eq(r.out, "re is being reset\n");
	run_result_release(&r);
	cr_assert_eq(fake_tpu_count(&tpu, "POST", QR_PATH "re:reset"), 1);

	/* ...and a queued resource made without slicectl job is still
	 * reset and deleted by its own name. */
	slicectl(&r, (const char *const[]){
			 "create", "plain", "--accelerator-type", "v4-8",
			 "--runtime-version", "tpu-ubuntu2204-base", "--wait",
			 NULL });
	ok(&r);
	run_result_release(&r);
	slicectl_in(&r, only_bucket, (const char *const[]){
			 "reset", "plain", "--project", "proj", "--zone",
			 ZONE, "--format", "json", NULL });
	ok(&r);
	assert_qr_json(&r, "plain", false, "reset", "reset");
	ASSERT_HAS(r.err, "taking plain as a queued resource's own name");
	run_result_release(&r);
	cr_assert_eq(fake_tpu_count(&tpu, "POST", QR_PATH "plain:reset"), 1);
	assert_state(node_state("plain"), "READY", "node plain");

	slicectl_in(&r, only_bucket, (const char *const[]){
			 "delete", "plain", "--force", "--wait",
			 "--project", "proj", "--zone", ZONE, NULL });
	ok(&r);
	cr_assert_str_eq(r.out, "plain deleted\n");
	run_result_release(&r);
	assert_state(qr_state("plain"), "", "the deleted queued resource");
}

/* --monitoring writes job.json's monitoring project: the run's own
 * (--project's) alone, or the one given after '='. */
Test(job, monitoring_takes_the_runs_project_unless_given_one)
{
	static const char *const runs[][3] = { { "m1", "--monitoring", "proj" },
					       { "m2", "--monitoring=other",
						 "other" } };
	char path[HARNESS_PATH * 2];
	struct run_result r;
	struct job j;
	struct err e;
	char *text;
	size_t len;

	for (size_t i = 0; i < 2; i++) {
		slicectl(&r, (const char *const[]){
				 "job", runs[i][0], runs[i][1], "--bucket",
				 bucket, "--accelerator-type", "v4-8",
				 "--command", "true", NULL });
		ok(&r);
		run_result_release(&r);
		snprintf(path, sizeof(path), "%s/bucket/%s/job.json", tmp,
			 runs[i][0]);
		text = read_file(path, &len);
		cr_assert_not_null(text);
		cr_assert_eq(job_parse(text, len, &j, &e), 0, "%s", e.msg);
		cr_assert_str_eq(j.monitoring_project, runs[i][2]);
		job_release(&j);
		free(text);
	}
}
