/*
 * slicectl create's and job's flags in gcloud's words and forms, with the
 * older spellings kept: job's run name as its argument or --name, one
 * slice count under --node-count and --num-slices, --labels and
 * --metadata as KEY=VALUE,... (repeatable, values with commas kept),
 * --internal-ips beside --external-ips, and help that fits 80 columns.
 * create runs against the TPU fake; job renders for --target gke, which
 * touches nothing.
 */
#include "tests/cloud/fake_tpu.h"
#include "tests/harness/harness.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ZONE "us-central2-b"

static struct fake_tpu tpu;
static char tmp[HARNESS_PATH];
static char bucket[HARNESS_PATH + 16];
static char env_endpoint[128], env_home[HARNESS_PATH + 32];
static const char *env[8];

static void up(void)
{
	cr_assert_eq(fake_tpu_start(&tpu, NULL), 0,
		     "the TPU fake did not start");
	cr_assert_eq(make_temp_dir(tmp, sizeof(tmp), "flags"), 0);
	snprintf(bucket, sizeof(bucket), "file://%s/bucket", tmp);
	snprintf(env_endpoint, sizeof(env_endpoint), "SLICECTL_TPU_ENDPOINT=%s",
		 tpu.base);
	snprintf(env_home, sizeof(env_home), "SLICECTL_HOME=%s/home", tmp);
	env[0] = env_endpoint;
	env[1] = env_home;
	env[2] = "SLICECTL_ACCESS_TOKEN=test-token";
	env[3] = "CLOUDSDK_CORE_PROJECT=proj";
	env[4] = "CLOUDSDK_COMPUTE_ZONE=" ZONE;
	env[5] = "SLICECTL_HTTP_RETRY_BASE_MS=10";
	env[6] = NULL;
}

static void down(void)
{
	fake_tpu_stop(&tpu);
	rm_rf(tmp);
}

TestSuite(flags, .init = up, .fini = down, .timeout = 120);

#define MAX_ARGS 40

/* slicectl create NAME --accelerator-type v4-8 --runtime-version rt
 * --no-ssh-key, then extra (NULL-terminated). */
static void create(struct run_result *r, const char *name,
		   const char *const *extra)
{
	const char *argv[MAX_ARGS] = { "create", name, "--accelerator-type",
				       "v4-8", "--runtime-version", "rt",
				       "--no-ssh-key" };
	size_t n = 7;

	for (size_t i = 0; extra[i]; i++) {
		cr_assert_lt(n, MAX_ARGS - 1);
		argv[n++] = extra[i];
	}
	argv[n] = NULL;
	cr_assert_eq(run_slicectl(r, argv, env), 0);
}

/* The node of the queued resource `name` create asked for, from the
 * fake's record of requests (decref it). */
static json_t *created_node(const char *name)
{
	json_t *all = fake_tpu_requests(&tpu), *q, *node = NULL;
	size_t i;

	json_array_foreach(all, i, q) {
		json_t *query = json_object_get(q, "query");
		const char *id = json_string_value(
			json_object_get(query, "queuedResourceId"));

		if (id && !strcmp(id, name))
			node = json_object_get(json_array_get(json_object_get(
				json_object_get(json_object_get(q, "body"),
						"tpu"), "nodeSpec"), 0),
					       "node");
	}
	cr_assert_not_null(node, "no create request for %s", name);
	json_incref(node);
	json_decref(all);
	return node;
}

static void create_ok(const char *name, const char *const *extra)
{
	struct run_result r;

	create(&r, name, extra);
	cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);
	run_result_release(&r);
}

static void assert_object(json_t *got, const char *want)
{
	json_t *w = json_loads(want, 0, NULL);

	cr_assert_not_null(w, "bad expected JSON %s", want);
	cr_assert(json_equal(got, w), "got %s, want %s",
		  json_dumps(got, JSON_SORT_KEYS), want);
	json_decref(w);
}

Test(flags, metadata_takes_key_values_and_repeats)
{
	char file1[HARNESS_PATH + 16], file2[HARNESS_PATH + 16];
	char files[2 * HARNESS_PATH + 64];
	json_t *node;

	create_ok("m1", (const char *const[]){
		"--metadata", "a=1,b=x,y=z w,c=",
		"--metadata", "ssh-keys=bob:ssh-ed25519 AAAA bob,laptop",
		"--metadata", "foo=a=b", NULL });
	node = created_node("m1");
	assert_object(json_object_get(node, "metadata"),
		      "{\"a\": \"1\", \"b\": \"x\", \"y\": \"z w\", "
		      "\"c\": \"\", \"ssh-keys\": \"bob:ssh-ed25519 AAAA "
		      "bob,laptop\", \"foo\": \"a=b\"}");
	json_decref(node);

	/* gcloud's escape: another delimiter, so commas stay in values. */
	create_ok("m2", (const char *const[]){
		"--metadata", "^;^k=a,b=c;l=d", NULL });
	node = created_node("m2");
	assert_object(json_object_get(node, "metadata"),
		      "{\"k\": \"a,b=c\", \"l\": \"d\"}");
	json_decref(node);

	snprintf(file1, sizeof(file1), "%s/one", tmp);
	snprintf(file2, sizeof(file2), "%s/two", tmp);
	cr_assert_eq(sh("printf 1 > '%s' && printf 2 > '%s'", file1, file2),
		     0);
	snprintf(files, sizeof(files), "f1=%s,f2=%s", file1, file2);
	create_ok("m3", (const char *const[]){
		"--metadata-from-file", files, "--metadata", "g=3", NULL });
	node = created_node("m3");
	assert_object(json_object_get(node, "metadata"),
		      "{\"g\": \"3\", \"f1\": \"1\", \"f2\": \"2\"}");
	json_decref(node);
}

Test(flags, labels_take_key_values_and_repeat)
{
	json_t *node;

	create_ok("l1", (const char *const[]){
		"--labels", "k1=v1,k2=v2", "--labels", "k3=v3", NULL });
	node = created_node("l1");
	assert_object(json_object_get(node, "labels"),
		      "{\"k1\": \"v1\", \"k2\": \"v2\", \"k3\": \"v3\"}");
	json_decref(node);
}

Test(flags, node_count_and_num_slices_are_one_flag)
{
	char *out = NULL;
	json_t *all, *q, *counts = json_array();
	size_t i;

	create_ok("n1", (const char *const[]){ "--node-count", "3", NULL });
	create_ok("n2", (const char *const[]){ "--num-slices", "3", NULL });
	cr_assert_eq(fake_tpu_call(&tpu, "GET", "/_fake/requests", NULL, &out),
		     200);
	all = json_loads(out, 0, NULL);
	free(out);
	json_array_foreach(all, i, q) {
		json_t *mnp = json_object_get(json_array_get(json_object_get(
			json_object_get(json_object_get(q, "body"), "tpu"),
			"nodeSpec"), 0), "multiNodeParams");

		if (mnp)
			json_array_append(counts,
					  json_object_get(mnp, "nodeCount"));
	}
	assert_object(counts, "[3, 3]");
	json_decref(counts);
	json_decref(all);
}

Test(flags, internal_ips_is_the_default_and_external_ips_its_opposite)
{
	struct run_result r;
	json_t *node;

	create_ok("i1", (const char *const[]){ "--internal-ips", NULL });
	node = created_node("i1");
	cr_assert_null(json_object_get(node, "networkConfig"),
		       "--internal-ips sent a networkConfig");
	json_decref(node);
	create_ok("i2", (const char *const[]){ "--external-ips", NULL });
	node = created_node("i2");
	assert_object(json_object_get(node, "networkConfig"),
		      "{\"enableExternalIps\": true}");
	json_decref(node);
	create(&r, "i3", (const char *const[]){ "--internal-ips",
						"--external-ips", NULL });
	cr_assert_eq(r.status, 2, "exit %d: %s", r.status, r.err);
	ASSERT_HAS(r.err, "--internal-ips and --external-ips");
	run_result_release(&r);
}

/* slicectl job for --target gke --render, name given by `how` (and the
 * slices by `count_flag`); what it prints. */
static void render(struct run_result *r, const char *const *how,
		   const char *count_flag)
{
	const char *argv[MAX_ARGS] = { "job" };
	const char *const rest[] = {
		"--target", "gke", "--render", "--bucket", bucket,
		"--accelerator-type", "v5litepod-16", count_flag, "2",
		"--command", "python3 train.py", "--queue", "tpu-queue",
		"--image", "python:3.12", NULL,
	};
	size_t n = 1;

	for (size_t i = 0; how[i]; i++)
		argv[n++] = how[i];
	for (size_t i = 0; rest[i]; i++)
		argv[n++] = rest[i];
	argv[n] = NULL;
	cr_assert_eq(run_slicectl(r, argv, env), 0);
}

Test(flags, job_takes_the_run_as_its_argument_or_name)
{
	const char *const *const hows[] = {
		(const char *const[]){ "r1", NULL },
		(const char *const[]){ "--name", "r1", NULL },
		(const char *const[]){ "r1", "--name", "r1", NULL },
	};
	struct run_result first, r;

	render(&first, (const char *const[]){ "--name", "r1", NULL },
	       "--num-slices");
	cr_assert_eq(first.status, 0, "exit %d: %s", first.status, first.err);
	ASSERT_HAS(first.out, "r1");
	for (size_t i = 0; i < sizeof(hows) / sizeof(hows[0]); i++) {
		for (size_t c = 0; c < 2; c++) {
			render(&r, hows[i],
			       c ? "--num-slices" : "--node-count");
			cr_assert_eq(r.status, 0, "case %zu: exit %d: %s", i,
				     r.status, r.err);
			cr_assert_str_eq(r.out, first.out, "case %zu", i);
			run_result_release(&r);
		}
	}
	run_result_release(&first);
}

Test(flags, job_refuses_two_different_names)
{
	struct run_result r;

	render(&r, (const char *const[]){ "r1", "--name", "r2", NULL },
	       "--num-slices");
	cr_assert_eq(r.status, 2, "exit %d: %s", r.status, r.err);
	ASSERT_HAS(r.err, "named twice: 'r1' and --name 'r2'");
	run_result_release(&r);
	render(&r, (const char *const[]){ "r1", "r2", NULL }, "--num-slices");
	cr_assert_eq(r.status, 2, "exit %d: %s", r.status, r.err);
	ASSERT_HAS(r.err, "unexpected argument 'r2'");
	run_result_release(&r);
	render(&r, (const char *const[]){ NULL }, "--num-slices");
	cr_assert_eq(r.status, 2, "exit %d: %s", r.status, r.err);
	ASSERT_HAS(r.err, "no run name");
	run_result_release(&r);
}

Test(flags, job_refuses_bad_preflights_naming_the_flag)
{
	const struct {
		const char *const *how;
		const char *want;
	} cases[] = {
		{ (const char *const[]){ "r1", "--preflight", "", NULL },
		  "--preflight is empty" },
		{ (const char *const[]){ "r1", "--preflight", "true",
					 "--preflight-timeout", "0", NULL },
		  "--preflight-timeout takes whole seconds" },
		{ (const char *const[]){ "r1", "--preflight", "true",
					 "--preflight-timeout", "1.5", NULL },
		  "--preflight-timeout takes whole seconds" },
		{ (const char *const[]){ "r1", "--preflight", "true",
					 "--preflight-timeout", "2d", NULL },
		  "--preflight-timeout takes whole seconds" },
		{ (const char *const[]){ "r1", "--preflight-timeout", "30",
					 NULL },
		  "--preflight-timeout bounds --preflight" },
	};
	struct run_result r;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		render(&r, cases[i].how, "--num-slices");
		cr_assert_eq(r.status, 2, "case %zu: exit %d: %s", i, r.status,
			     r.err);
		ASSERT_HAS(r.err, cases[i].want);
		run_result_release(&r);
	}
	render(&r, (const char *const[]){ "r1", "--preflight", "nvidia-smi",
					  "--preflight-timeout", "2m", NULL },
	       "--num-slices");
	cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);
	run_result_release(&r);
}

Test(flags, job_takes_a_hang_signal_by_name)
{
	static const char *const bad[] = { "KILL", "SIGSEGV", "usr1", "10",
					   "" };
	static const char *const good[] = { "SIGUSR1", "USR2", "SIGQUIT" };
	struct run_result r;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		render(&r, (const char *const[]){ "r1", "--hang-signal",
						  bad[i], NULL },
		       "--num-slices");
		cr_assert_eq(r.status, 2, "'%s': exit %d: %s", bad[i],
			     r.status, r.err);
		ASSERT_HAS(r.err, "--hang-signal takes SIGHUP, SIGINT, SIGQUIT, "
				  "SIGUSR1");
		run_result_release(&r);
	}
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		render(&r, (const char *const[]){ "r1", "--hang-signal",
						  good[i], NULL },
		       "--num-slices");
		cr_assert_eq(r.status, 0, "'%s': exit %d: %s", good[i],
			     r.status, r.err);
		run_result_release(&r);
	}
}

/* The bad-host pattern and the local and fast tiers' flags are checked
 * before anything is made, and say what is wrong. */
Test(flags, job_checks_the_bad_host_pattern_and_the_local_tier)
{
	static const struct {
		const char *const how[6];
		const char *want;
	} cases[] = {
		{ { "r1", "--bad-host-pattern", "Xid (79", NULL },
		  "--bad-host-pattern: the bad-host pattern \"Xid (79\" is not "
		  "a POSIX extended regular expression" },
		{ { "r1", "--bad-host-pattern", "", NULL },
		  "it would match every line" },
		{ { "r1", "--local-tier-dir", "shm/x", NULL },
		  "--local-tier-dir takes an absolute path, not 'shm/x'" },
		{ { "r1", "--local-keep", "1001", NULL }, "--local-keep" },
		{ { "r1", "--persist-every", "10", "--local-keep", "0" },
		  "--persist-every 10 keeps the other steps on the local and "
		  "peer tiers, and --local-keep 0 turns them off" },
		{ { "r1", "--persist-every", "x", NULL }, "--persist-every" },
	};
	struct run_result r;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		render(&r, cases[i].how, "--num-slices");
		cr_assert_eq(r.status, 2, "case %zu: exit %d: %s", i, r.status,
			     r.err);
		ASSERT_HAS(r.err, cases[i].want);
		run_result_release(&r);
	}
	render(&r, (const char *const[]){ "r1", "--bad-host-pattern",
					  "Xid (48|79)|ECC", "--local-keep",
					  "0", "--local-tier-dir", "/dev/shm/s",
					  NULL },
	       "--num-slices");
	cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);
	run_result_release(&r);
	render(&r, (const char *const[]){ "r1", "--persist-every", "10",
					  NULL },
	       "--num-slices");
	cr_assert_eq(r.status, 0, "exit %d: %s", r.status, r.err);
	run_result_release(&r);
}

Test(flags, help_fits_80_columns)
{
	static const char *const commands[] = { "create", "job" };

	for (size_t i = 0; i < 2; i++) {
		struct run_result r;
		const char *line;
		size_t lines = 0;

		cr_assert_eq(run_slicectl(&r, (const char *const[]){
						  commands[i], "--help", NULL },
					  env), 0);
		cr_assert_eq(r.status, 0);
		for (line = r.out; *line; lines++) {
			size_t len = strcspn(line, "\n");

			cr_assert_leq(len, 80, "%s --help: %.*s", commands[i],
				      (int)len, line);
			line += len + (line[len] == '\n');
		}
		cr_assert_gt(lines, 20, "%s --help is short", commands[i]);
		run_result_release(&r);
	}
}
