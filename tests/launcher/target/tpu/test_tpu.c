/*
 * The control plane end to end: slicectl create, describe, list, wait,
 * reset and delete against tests/fakes/tpu_fake.py (which checks every
 * request body against the discovery document), and run/push --tpu
 * reaching every worker through a real sshd, its host keys taken from the
 * fake's guest attributes.
 */
#include "tests/cloud/fake_tpu.h"
#include "tests/harness/harness.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ZONE "us-central2-b"
#define PARENT "projects/proj/locations/" ZONE
/* A well-formed ed25519 public key blob that no sshd here holds. */
#define OTHER_KEY "AAAAC3NzaC1lZDI1NTE5AAAAIBERERERERERERERERERERERERERERERERERERERERER"

static struct test_sshd sshd;
static struct fake_tpu tpu;
static char tmp[HARNESS_PATH];
static char home[HARNESS_PATH + 16];
static char env_endpoint[128], env_home[HARNESS_PATH + 32];
static char port_arg[16];
static const char *env[16];

static void up(void)
{
	char *pub, *sp;
	char cfg[512];

	cr_assert_eq(sshd_start(&sshd, NULL), 0, "sshd did not start");
	cr_assert_eq(fake_tpu_start(&tpu, (const char *const[]){
					 "--delay", "0.05", NULL }),
		     0, "the TPU fake did not start");
	cr_assert_eq(make_temp_dir(tmp, sizeof(tmp), "tpu"), 0);
	snprintf(home, sizeof(home), "%s/home", tmp);
	snprintf(env_endpoint, sizeof(env_endpoint), "SLICECTL_TPU_ENDPOINT=%s",
		 tpu.base);
	snprintf(env_home, sizeof(env_home), "SLICECTL_HOME=%s", home);
	snprintf(port_arg, sizeof(port_arg), "%u", sshd.port);
	env[0] = env_endpoint;
	env[1] = env_home;
	env[2] = "SLICECTL_ACCESS_TOKEN=test-token";
	env[3] = "CLOUDSDK_CORE_PROJECT=proj";
	env[4] = "CLOUDSDK_COMPUTE_ZONE=" ZONE;
	env[5] = "SLICECTL_TPU_POLL_MS=20";
	env[6] = "SLICECTL_HTTP_RETRY_BASE_MS=10";
	env[7] = NULL;
	/* Every worker's guest attributes carry this sshd's real host key. */
	pub = read_file(sshd.host_pub, NULL);
	cr_assert_not_null(pub);
	sp = strchr(pub, ' ');
	cr_assert_not_null(sp);
	sp[1 + strcspn(sp + 1, " \n")] = '\0';
	snprintf(cfg, sizeof(cfg), "{\"hostkeys\": {\"ssh-ed25519\": \"%s\"}}",
		 sp + 1);
	free(pub);
	cr_assert_eq(fake_tpu_config(&tpu, cfg), 0);
}

static void down(void)
{
	fake_tpu_stop(&tpu);
	sshd_stop(&sshd);
	rm_rf(tmp);
}

TestSuite(tpu, .init = up, .fini = down, .timeout = 240);

#define SLICECTL(r, ...)                                                       \
	cr_assert_eq(run_slicectl((r), (const char *const[]){ __VA_ARGS__, NULL }, \
				  env),                                        \
		     0)

static void ok(struct run_result *r)
{
	cr_assert_eq(r->status, 0, "exit %d\nstdout:\n%s\nstderr:\n%s",
		     r->status, r->out, r->err);
}

static void create_active(const char *name, const char *type,
			  const char *count)
{
	struct run_result r;

	SLICECTL(&r, "create", name, "--accelerator-type", type,
		 "--runtime-version", "tpu-ubuntu2204-base", "--node-count",
		 count, "--wait");
	ok(&r);
	run_result_release(&r);
}

/* The body of the last request of this method whose path ends so. */
static json_t *last_body(const char *method, const char *suffix)
{
	json_t *all = fake_tpu_requests(&tpu), *found = NULL, *q;
	size_t i;

	json_array_foreach(all, i, q) {
		const char *p = json_string_value(json_object_get(q, "path"));
		const char *m = json_string_value(json_object_get(q, "method"));

		if (p && m && !strcmp(m, method) && strlen(p) >= strlen(suffix) &&
		    !strcmp(p + strlen(p) - strlen(suffix), suffix))
			found = q;
	}
	cr_assert_not_null(found, "no %s ...%s request", method, suffix);
	json_incref(found);
	json_decref(all);
	return found;
}

/* Every request with a body passed the fake's check against the
 * discovery document (a 400 there names the field it refused). */
static void assert_bodies_valid(void)
{
	json_t *all = fake_tpu_requests(&tpu), *q;
	size_t i, bodies = 0;

	json_array_foreach(all, i, q) {
		json_t *st = json_object_get(q, "status");

		if (json_is_null(json_object_get(q, "body")) ||
		    !json_object_get(q, "body"))
			continue;
		bodies++;
		cr_assert(!json_is_integer(st) || json_integer_value(st) != 400,
			  "refused: %s", json_dumps(q, 0));
	}
	cr_assert_gt(bodies, 0);
	json_decref(all);
}

static void run_on_workers(struct run_result *r, const char *name,
			   const char *const *extra)
{
	const char *argv[32] = { "run", "--tpu", name, "--user", sshd.user,
				 "--identity", sshd.key, "--port", port_arg };
	size_t n = 9;

	for (; extra && *extra; extra++)
		argv[n++] = *extra;
	argv[n++] = "--";
	argv[n++] = "echo $SLICE_ID/$SLICE_NUM_SLICES/$SLICE_WORKER_ID/"
		    "$SLICE_WORKERS_PER_SLICE/$SLICE_PROCESS_ID/"
		    "$SLICE_NUM_PROCESSES";
	argv[n] = NULL;
	cr_assert_eq(run_slicectl(r, argv, env), 0);
}

Test(tpu, one_slice_from_create_to_delete)
{
	struct run_result r;
	char kh[HARNESS_PATH + 32], line[64];
	char *text;

	SLICECTL(&r, "create", "q1", "--accelerator-type", "v4-8",
		 "--runtime-version", "tpu-ubuntu2204-base", "--wait");
	ok(&r);
	ASSERT_HAS(r.err, "WAITING_FOR_RESOURCES");
	ASSERT_HAS(r.err, "PROVISIONING");
	ASSERT_HAS(r.out, "q1 is ACTIVE");
	run_result_release(&r);

	SLICECTL(&r, "describe", "q1");
	ok(&r);
	ASSERT_HAS(r.out, "state:        ACTIVE");
	ASSERT_HAS(r.out, "slice 0  q1  READY HEALTHY  workers: 127.0.1.1");
	run_result_release(&r);

	SLICECTL(&r, "list");
	ok(&r);
	ASSERT_HAS(r.out, "q1 ");
	ASSERT_HAS(r.out, "ACTIVE");
	run_result_release(&r);

	run_on_workers(&r, "q1", NULL);
	ok(&r);
	ASSERT_HAS(r.out, "s0-w0: 0/1/0/1/0/1");
	run_result_release(&r);
	/* The key came from the API into slicectl's own known_hosts. */
	snprintf(kh, sizeof(kh), "%s/known_hosts", home);
	text = read_file(kh, NULL);
	cr_assert_not_null(text);
	snprintf(line, sizeof(line), "[127.0.1.1]:%u ssh-ed25519 ", sshd.port);
	ASSERT_HAS(text, line);
	free(text);

	SLICECTL(&r, "reset", "q1", "--wait");
	ok(&r);
	ASSERT_HAS(r.out, "READY");
	run_result_release(&r);

	SLICECTL(&r, "delete", "q1");
	cr_assert_eq(r.status, 1, "%s", r.err);
	ASSERT_HAS(r.err, "--force");
	run_result_release(&r);

	SLICECTL(&r, "delete", "q1", "--force", "--wait");
	ok(&r);
	ASSERT_HAS(r.out, "q1 deleted");
	run_result_release(&r);

	SLICECTL(&r, "describe", "q1");
	cr_assert_eq(r.status, 4, "%s", r.err);
	ASSERT_HAS(r.err, "not found");
	run_result_release(&r);
	/* create, getGuestAttributes and reset each sent a body. */
	cr_assert_eq(fake_tpu_count(&tpu, "POST", ":reset"), 1);
	cr_assert_eq(fake_tpu_count(&tpu, "POST", ":getGuestAttributes"), 1);
	assert_bodies_valid();
}

Test(tpu, four_slices_every_worker_in_order)
{
	struct run_result r;
	char want[64], dir[HARNESS_PATH + 16];

	create_active("q4", "v4-16", "4");
	run_on_workers(&r, "q4", NULL);
	ok(&r);
	for (unsigned s = 0; s < 4; s++)
		for (unsigned w = 0; w < 2; w++) {
			snprintf(want, sizeof(want), "s%u-w%u: %u/4/%u/2/%u/8",
				 s, w, s, w, s * 2 + w);
			ASSERT_HAS(r.out, want);
		}
	run_result_release(&r);

	SLICECTL(&r, "describe", "q4", "--format", "json");
	ok(&r);
	{
		json_t *j = json_loads(r.out, 0, NULL);

		cr_assert_not_null(j, "not JSON: %s", r.out);
		cr_assert_eq(json_array_size(json_object_get(j, "nodes")), 4);
		json_decref(j);
	}
	run_result_release(&r);

	/* push --tpu reaches the same workers. */
	snprintf(dir, sizeof(dir), "%s/src", tmp);
	cr_assert_eq(sh("mkdir -p '%s' && echo pushed > '%s/f'", dir, dir), 0);
	SLICECTL(&r, "push", "--tpu", "q4", "--user", sshd.user, "--identity",
		 sshd.key, "--port", port_arg, dir, "dest-q4");
	ok(&r);
	ASSERT_HAS(r.err, "8 hosts");
	ASSERT_HAS(r.err, "8 ok");
	run_result_release(&r);
}

struct body_case {
	const char *args[32];
	const char *body; /* expected, as JSON */
};

Test(tpu, every_capacity_mode_and_flag_maps_to_the_body)
{
	char script[HARNESS_PATH + 32], cfg[HARNESS_PATH + 32];
	struct body_case cases[] = {
		{ { "b1" },
		  "{\"tpu\": {\"nodeSpec\": [{\"parent\": \"" PARENT "\", "
		  "\"nodeId\": \"b1\", \"node\": {\"acceleratorType\": "
		  "\"v4-8\", \"runtimeVersion\": \"rt\"}}]}}" },
		{ { "b2", "--spot" },
		  "{\"spot\": {}, \"tpu\": {\"nodeSpec\": [{\"parent\": \"" PARENT
		  "\", \"nodeId\": \"b2\", \"node\": {\"acceleratorType\": "
		  "\"v4-8\", \"runtimeVersion\": \"rt\"}}]}}" },
		{ { "b3", "--reserved" },
		  "{\"guaranteed\": {\"reserved\": true}, \"tpu\": {\"nodeSpec\": "
		  "[{\"parent\": \"" PARENT "\", \"nodeId\": \"b3\", \"node\": "
		  "{\"acceleratorType\": \"v4-8\", \"runtimeVersion\": "
		  "\"rt\"}}]}}" },
		{ { "b4", "--reservation", "r1" },
		  "{\"guaranteed\": {\"reserved\": true}, \"reservationName\": \""
		  PARENT "/reservations/r1\", \"tpu\": {\"nodeSpec\": "
		  "[{\"parent\": \"" PARENT "\", \"nodeId\": \"b4\", \"node\": "
		  "{\"acceleratorType\": \"v4-8\", \"runtimeVersion\": "
		  "\"rt\"}}]}}" },
		{ { "b5", "--best-effort" },
		  "{\"bestEffort\": {}, \"tpu\": {\"nodeSpec\": [{\"parent\": \""
		  PARENT "\", \"nodeId\": \"b5\", \"node\": {\"acceleratorType\": "
		  "\"v4-8\", \"runtimeVersion\": \"rt\"}}]}}" },
		{ { "b6", "--node-count", "3", "--valid-until-duration", "6h",
		    "--valid-after-duration", "90s", "--network", "net",
		    "--subnetwork", "sub", "--external-ips", "--service-account",
		    "sa@p.iam.gserviceaccount.com", "--scopes", "s1,s2", "--tags",
		    "t1,t2", "--labels", "k1=v1,k2=v2", "--metadata", "foo=a=b",
		    "--metadata-from-file", cfg, "--startup-script", script,
		    "--description", "d" },
		  "{\"queueingPolicy\": {\"validUntilDuration\": \"21600s\", "
		  "\"validAfterDuration\": \"90s\"}, \"tpu\": {\"nodeSpec\": "
		  "[{\"parent\": \"" PARENT "\", \"multiNodeParams\": "
		  "{\"nodeCount\": 3, \"nodeIdPrefix\": \"b6\"}, \"node\": "
		  "{\"acceleratorType\": \"v4-8\", \"runtimeVersion\": \"rt\", "
		  "\"description\": \"d\", \"networkConfig\": {\"network\": "
		  "\"net\", \"subnetwork\": \"sub\", \"enableExternalIps\": "
		  "true}, \"serviceAccount\": {\"email\": "
		  "\"sa@p.iam.gserviceaccount.com\", \"scope\": [\"s1\", "
		  "\"s2\"]}, \"tags\": [\"t1\", \"t2\"], \"labels\": {\"k1\": "
		  "\"v1\", \"k2\": \"v2\"}, \"metadata\": {\"foo\": \"a=b\", "
		  "\"cfg\": \"x: 1\\n\", \"startup-script\": "
		  "\"#!/bin/sh\\necho 'hi'\\n\"}}}]}}" },
		/* gcloud 528's flex-start body (research/gke.md 4.1). */
		{ { "b7", "--provisioning-model", "flex-start",
		    "--max-run-duration", "72h", "--node-count", "2" },
		  "{\"provisioningModel\": \"FLEX_START\", \"runDuration\": "
		  "{\"maxRunDuration\": \"259200s\"}, \"tpu\": {\"nodeSpec\": "
		  "[{\"parent\": \"" PARENT "\", \"multiNodeParams\": "
		  "{\"nodeCount\": 2, \"nodeIdPrefix\": \"b7\"}, \"node\": "
		  "{\"acceleratorType\": \"v4-8\", \"runtimeVersion\": "
		  "\"rt\"}}]}}" },
		{ { "b8", "--provisioning-model", "spot", "--spot" },
		  "{\"spot\": {}, \"tpu\": {\"nodeSpec\": [{\"parent\": \"" PARENT
		  "\", \"nodeId\": \"b8\", \"node\": {\"acceleratorType\": "
		  "\"v4-8\", \"runtimeVersion\": \"rt\"}}]}}" },
		{ { "b9", "--provisioning-model", "reservation-bound",
		    "--reservation", "r1" },
		  "{\"guaranteed\": {\"reserved\": true}, \"reservationName\": \""
		  PARENT "/reservations/r1\", \"tpu\": {\"nodeSpec\": "
		  "[{\"parent\": \"" PARENT "\", \"nodeId\": \"b9\", \"node\": "
		  "{\"acceleratorType\": \"v4-8\", \"runtimeVersion\": "
		  "\"rt\"}}]}}" },
		{ { "b10", "--provisioning-model", "standard" },
		  "{\"tpu\": {\"nodeSpec\": [{\"parent\": \"" PARENT "\", "
		  "\"nodeId\": \"b10\", \"node\": {\"acceleratorType\": "
		  "\"v4-8\", \"runtimeVersion\": \"rt\"}}]}}" },
	};

	snprintf(script, sizeof(script), "%s/startup.sh", tmp);
	cr_assert_eq(sh("printf '#!/bin/sh\\necho '\"'\"'hi'\"'\"'\\n' > '%s'",
			script), 0);
	{
		char path[HARNESS_PATH + 16];

		snprintf(path, sizeof(path), "%s/cfg.yaml", tmp);
		cr_assert_eq(sh("printf 'x: 1\\n' > '%s'", path), 0);
		snprintf(cfg, sizeof(cfg), "cfg=%s", path);
	}
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *argv[48] = { "create" };
		size_t n = 1;
		struct run_result r;
		json_t *req, *want, *query;
		const char *rid;

		for (size_t j = 0; cases[i].args[j]; j++)
			argv[n++] = cases[i].args[j];
		argv[n++] = "--accelerator-type";
		argv[n++] = "v4-8";
		argv[n++] = "--runtime-version";
		argv[n++] = "rt";
		argv[n++] = "--no-ssh-key";
		argv[n] = NULL;
		cr_assert_eq(run_slicectl(&r, argv, env), 0);
		ok(&r);
		run_result_release(&r);
		req = last_body("POST", "/queuedResources");
		want = json_loads(cases[i].body, 0, NULL);
		cr_assert_not_null(want, "case %zu: bad expected JSON", i);
		cr_assert(json_equal(json_object_get(req, "body"), want),
			  "case %s: got %s", cases[i].args[0],
			  json_dumps(json_object_get(req, "body"), JSON_SORT_KEYS));
		query = json_object_get(req, "query");
		cr_assert_str_eq(json_string_value(json_object_get(
					 query, "queuedResourceId")),
				 cases[i].args[0]);
		rid = json_string_value(json_object_get(query, "requestId"));
		cr_assert(rid && strlen(rid) == 36 && rid[14] == '4',
			  "requestId '%s' is not a v4 UUID", rid ? rid : "");
		/* The fake accepted it: no output-only field was sent. */
		cr_assert_eq(json_array_size(json_object_get(req, "ignored")), 0);
		json_decref(want);
		json_decref(req);
	}
	assert_bodies_valid();
}

Test(tpu, create_puts_slicectls_key_into_ssh_keys)
{
	struct run_result r;
	json_t *req;
	const char *keys;
	char pubpath[HARNESS_PATH + 32], *pub;

	SLICECTL(&r, "create", "k1", "--accelerator-type", "v4-8",
		 "--runtime-version", "rt", "--user", "alice", "--metadata",
		 "ssh-keys=bob:ssh-ed25519 " OTHER_KEY " bob");
	ok(&r);
	run_result_release(&r);
	snprintf(pubpath, sizeof(pubpath), "%s/id_ed25519.pub", home);
	pub = read_file(pubpath, NULL);
	cr_assert_not_null(pub, "slicectl made no key in %s", home);
	pub[strcspn(pub, "\n")] = '\0';
	req = last_body("POST", "/queuedResources");
	keys = json_string_value(json_object_get(
		json_object_get(json_object_get(
			json_array_get(json_object_get(json_object_get(
				json_object_get(req, "body"), "tpu"),
				"nodeSpec"), 0), "node"), "metadata"),
		"ssh-keys"));
	cr_assert_not_null(keys);
	ASSERT_HAS(keys, "bob:ssh-ed25519 " OTHER_KEY " bob\nalice:");
	ASSERT_HAS(keys, pub);
	free(pub);
	json_decref(req);
}

Test(tpu, bad_arguments_are_refused_before_any_request)
{
	static const char *const cases[][12] = {
		{ "create", "x", "--runtime-version", "rt", NULL },
		{ "create", "x", "--accelerator-type", "v4-8", NULL },
		{ "create", "x", "--accelerator-type", "v4-8",
		  "--runtime-version", "rt", "--spot", "--best-effort" },
		{ "create", "x", "--accelerator-type", "v4-8",
		  "--runtime-version", "rt", "--node-count", "0" },
		{ "create", "x", "--accelerator-type", "v4-8",
		  "--runtime-version", "rt", "--startup-script", "/nonexistent" },
		{ "create", "x", "--accelerator-type", "v4-8",
		  "--runtime-version", "rt", "--valid-until-duration", "soon" },
		{ "describe", NULL },
		{ "wait", "x", "--state", "DONE", NULL },
		{ "run", "--tpu", "x", "--host", "h", "--", "true", NULL },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct run_result r;

		cr_assert_eq(run_slicectl(&r, cases[i], env), 0);
		cr_assert_eq(r.status, 2, "case %zu: exit %d: %s", i, r.status,
			     r.err);
		cr_assert(r.err_len > 0, "case %zu says nothing", i);
		run_result_release(&r);
	}
	cr_assert_eq(fake_tpu_count(&tpu, "POST", "/queuedResources"), 0);
}

Test(tpu, provisioning_model_contradictions_are_refused_with_the_reason)
{
	static const struct {
		const char *args[8]; /* NULL-terminated */
		const char *reason;
	} cases[] = {
		{ { "--provisioning-model", "flex-start" },
		  "needs a maximum run duration (--max-run-duration" },
		{ { "--max-run-duration", "1h" },
		  "for flex-start capacity only" },
		{ { "--provisioning-model", "flex-start", "--max-run-duration",
		    "8d" },
		  "longer than the 7 days" },
		{ { "--provisioning-model", "flex-start", "--max-run-duration",
		    "1h", "--spot" },
		  "--spot contradicts --provisioning-model flex-start" },
		{ { "--provisioning-model", "flex-start", "--max-run-duration",
		    "1h", "--reservation", "r1" },
		  "--reservation contradicts --provisioning-model flex-start" },
		{ { "--provisioning-model", "spot", "--reserved" },
		  "--reserved contradicts --provisioning-model spot" },
		{ { "--provisioning-model", "flex" },
		  "--provisioning-model: provisioning model 'flex' is none of "
		  "standard, spot, reservation-bound and flex-start" },
		{ { "--provisioning-model", "flex-start", "--max-run-duration",
		    "1.5" },
		  "take whole seconds" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const char *argv[16] = { "create", "x", "--accelerator-type",
					 "v4-8", "--runtime-version", "rt",
					 "--no-ssh-key" };
		size_t n = 7;
		struct run_result r;

		for (size_t j = 0; cases[i].args[j]; j++)
			argv[n++] = cases[i].args[j];
		cr_assert_eq(run_slicectl(&r, argv, env), 0);
		cr_assert_eq(r.status, 2, "case %zu: exit %d: %s", i, r.status,
			     r.err);
		ASSERT_HAS(r.err, cases[i].reason);
		run_result_release(&r);
	}
	cr_assert_eq(fake_tpu_count(&tpu, "POST", "/queuedResources"), 0);
}

Test(tpu, no_project_or_zone_says_how_to_give_them)
{
	struct run_result r;
	char config[600], env_config[700];
	const char *bare[] = { env[0], env[1], env[2],
			       "CLOUDSDK_CORE_PROJECT=",
			       "CLOUDSDK_COMPUTE_ZONE=", env_config, NULL };

	/* A gcloud configuration directory of the test's own, so the
	 * machine's is never read. */
	snprintf(config, sizeof(config), "%s/gcloud", tmp);
	snprintf(env_config, sizeof(env_config), "CLOUDSDK_CONFIG=%s",
		 config);
	cr_assert_eq(run_slicectl(&r, (const char *const[]){ "list", NULL },
				  bare), 0);
	cr_assert_eq(r.status, 2, "%s", r.err);
	ASSERT_HAS(r.err, "--project");
	ASSERT_HAS(r.err, "gcloud config set project");
	run_result_release(&r);

	/* What `gcloud config set project/compute/zone` writes is enough. */
	cr_assert_eq(sh("mkdir -p '%s/configurations' && printf work > "
			"'%s/active_config' && printf '[core]\\nproject = "
			"proj\\n\\n[compute]\\nzone = %s\\n' > "
			"'%s/configurations/config_work'",
			config, config, ZONE, config), 0);
	cr_assert_eq(run_slicectl(&r, (const char *const[]){ "list", NULL },
				  bare), 0);
	cr_assert_eq(r.status, 0, "%s", r.err);
	run_result_release(&r);
}

Test(tpu, api_errors_carry_the_apis_message_and_a_hint)
{
	struct run_result r;

	create_active("dup", "v4-8", "1");
	/* 409: the name is taken. */
	SLICECTL(&r, "create", "dup", "--accelerator-type", "v4-8",
		 "--runtime-version", "rt", "--no-ssh-key");
	cr_assert_eq(r.status, 1, "%s", r.err);
	ASSERT_HAS(r.err, "already exists");
	ASSERT_HAS(r.err, "slicectl delete");
	run_result_release(&r);

	/* 400: the field the API refused is named. */
	SLICECTL(&r, "create", "bad", "--accelerator-type", "v9-8",
		 "--runtime-version", "rt", "--no-ssh-key");
	cr_assert_eq(r.status, 1, "%s", r.err);
	ASSERT_HAS(r.err, "HTTP 400");
	ASSERT_HAS(r.err, "accelerator");
	run_result_release(&r);

	/* 403: a permission. */
	cr_assert_eq(fake_tpu_faults(&tpu,
				     "{\"method\": \"POST\", \"path\": "
				     "\"queuedResources\\\\?\", \"status\": 403, "
				     "\"message\": \"Permission "
				     "'tpu.queuedResources.create' denied\"}"),
		     0);
	SLICECTL(&r, "create", "p1", "--accelerator-type", "v4-8",
		 "--runtime-version", "rt", "--no-ssh-key");
	cr_assert_eq(r.status, 1, "%s", r.err);
	ASSERT_HAS(r.err, "tpu.queuedResources.create");
	ASSERT_HAS(r.err, "roles/tpu.admin");
	run_result_release(&r);

	/* 404: which project and zone were looked in. */
	SLICECTL(&r, "describe", "nope");
	cr_assert_eq(r.status, 4, "%s", r.err);
	ASSERT_HAS(r.err, "was not found");
	ASSERT_HAS(r.err, "--zone");
	run_result_release(&r);
}

Test(tpu, busy_api_is_retried)
{
	struct run_result r;

	create_active("r1", "v4-8", "1");
	cr_assert_eq(fake_tpu_call(&tpu, "DELETE", "/_fake/requests", NULL,
				   NULL), 200);
	cr_assert_eq(fake_tpu_faults(&tpu,
				     "[{\"method\": \"GET\", \"path\": "
				     "\"queuedResources/r1$\", \"status\": 503, "
				     "\"count\": 1}, {\"method\": \"GET\", "
				     "\"path\": \"queuedResources/r1$\", "
				     "\"status\": 429, \"count\": 1}]"),
		     0);
	SLICECTL(&r, "describe", "r1");
	ok(&r);
	ASSERT_HAS(r.out, "ACTIVE");
	run_result_release(&r);
	cr_assert_eq(fake_tpu_count(&tpu, "GET", "/queuedResources/r1"), 3);

	/* A create whose answer was lost is retried with the same requestId:
	 * one queued resource, no 409. */
	cr_assert_eq(fake_tpu_faults(&tpu, "{\"method\": \"POST\", \"path\": "
					   "\"queuedResources\\\\?\", \"status\": "
					   "503, \"count\": 2}"),
		     0);
	SLICECTL(&r, "create", "r2", "--accelerator-type", "v4-8",
		 "--runtime-version", "rt", "--no-ssh-key");
	ok(&r);
	run_result_release(&r);
	cr_assert_eq(fake_tpu_count(&tpu, "POST", "/queuedResources"), 3);
}

Test(tpu, failed_queued_resource_shows_the_apis_error)
{
	struct run_result r;

	cr_assert_eq(fake_tpu_config(&tpu,
				     "{\"fail_at\": {\"qf\": {\"state\": "
				     "\"PROVISIONING\", \"code\": 8, "
				     "\"message\": \"no v4 capacity in zone\"}}}"),
		     0);
	SLICECTL(&r, "create", "qf", "--accelerator-type", "v4-8",
		 "--runtime-version", "rt", "--no-ssh-key", "--wait");
	cr_assert_eq(r.status, 3, "%s", r.err);
	ASSERT_HAS(r.err, "FAILED");
	ASSERT_HAS(r.err, "no v4 capacity in zone");
	run_result_release(&r);

	SLICECTL(&r, "describe", "qf");
	ok(&r);
	ASSERT_HAS(r.out, "error:        code 8: no v4 capacity in zone");
	run_result_release(&r);

	SLICECTL(&r, "wait", "qf", "--state", "FAILED");
	ok(&r);
	run_result_release(&r);
}

Test(tpu, suspended_spot_ends_the_wait)
{
	struct run_result r;

	SLICECTL(&r, "create", "sp", "--accelerator-type", "v4-8",
		 "--runtime-version", "rt", "--no-ssh-key", "--spot", "--wait");
	ok(&r);
	run_result_release(&r);
	cr_assert_eq(fake_tpu_call(&tpu, "POST", "/_fake/suspend",
				   "{\"name\": \"sp\"}", NULL), 200);
	SLICECTL(&r, "wait", "sp", "--timeout", "20");
	cr_assert_eq(r.status, 3, "%s", r.err);
	ASSERT_HAS(r.err, "SUSPEND");
	run_result_release(&r);
	SLICECTL(&r, "wait", "sp", "--state", "SUSPENDED");
	ok(&r);
	run_result_release(&r);
	/* A suspended QR may be deleted without --force. */
	SLICECTL(&r, "delete", "sp", "--wait");
	ok(&r);
	run_result_release(&r);
}

Test(tpu, flex_start_runs_until_its_end_then_is_suspended)
{
	struct run_result r;
	json_t *qr, *run;

	SLICECTL(&r, "create", "fx", "--accelerator-type", "v6e-8",
		 "--runtime-version", "rt", "--no-ssh-key",
		 "--provisioning-model", "flex-start", "--max-run-duration",
		 "2h", "--wait", "--format", "json");
	ok(&r);
	qr = json_loads(r.out, 0, NULL);
	cr_assert_not_null(qr, "not JSON: %s", r.out);
	run = json_object_get(qr, "runDuration");
	cr_assert_str_eq(json_string_value(json_object_get(
				 run, "maxRunDuration")), "7200s");
	cr_assert(json_is_string(json_object_get(run, "terminationTime")),
		  "no end once ACTIVE: %s", r.out);
	json_decref(qr);
	run_result_release(&r);
	/* The end of the run: the VMs go, the queued resource is
	 * SUSPENDED, which a wait for anything else reports. */
	cr_assert_eq(fake_tpu_call(&tpu, "POST", "/_fake/end_run",
				   "{\"name\": \"fx\"}", NULL), 200);
	SLICECTL(&r, "wait", "fx", "--timeout", "20");
	cr_assert_eq(r.status, 3, "%s", r.err);
	ASSERT_HAS(r.err, "SUSPEND");
	run_result_release(&r);
	SLICECTL(&r, "wait", "fx", "--state", "SUSPENDED");
	ok(&r);
	run_result_release(&r);
	SLICECTL(&r, "describe", "fx");
	ok(&r);
	ASSERT_HAS(r.out, "capacity:     flex-start");
	run_result_release(&r);
}

Test(tpu, wait_gives_up_at_the_timeout)
{
	struct run_result r;

	cr_assert_eq(fake_tpu_config(&tpu, "{\"delays\": "
					   "{\"WAITING_FOR_RESOURCES\": 60}}"),
		     0);
	SLICECTL(&r, "create", "slow", "--accelerator-type", "v4-8",
		 "--runtime-version", "rt", "--no-ssh-key", "--wait",
		 "--timeout", "1");
	cr_assert_eq(r.status, 124, "%s", r.err);
	ASSERT_HAS(r.err, "WAITING_FOR_RESOURCES");
	run_result_release(&r);
}

Test(tpu, changed_host_key_is_refused)
{
	struct run_result r;

	cr_assert_eq(fake_tpu_config(&tpu, "{\"hostkey_overrides\": "
					   "{\"hk-1/0\": {\"ssh-ed25519\": \""
					   OTHER_KEY "\"}}}"),
		     0);
	create_active("hk", "v4-8", "2");
	run_on_workers(&r, "hk", NULL);
	cr_assert_eq(r.status, 255, "%s", r.err);
	ASSERT_HAS(r.out, "s0-w0: 0/2/0/1/0/2");
	cr_assert(!strstr(r.out, "s1-w0: "), "%s", r.out);
	ASSERT_HAS(r.err, "s1-w0");
	ASSERT_HAS(r.err, "CHANGED");
	run_result_release(&r);
}

Test(tpu, stale_known_hosts_entries_are_replaced_by_the_apis_keys)
{
	struct run_result r;
	char kh[HARNESS_PATH + 32];

	snprintf(kh, sizeof(kh), "%s/known_hosts", home);
	cr_assert_eq(sh("mkdir -p '%s' && printf '# mine\\n[127.0.1.1]:%u "
			"ssh-ed25519 %s\\nother.example ssh-ed25519 %s\\n' > '%s'",
			home, sshd.port, OTHER_KEY, OTHER_KEY, kh), 0);
	create_active("st", "v4-8", "1");
	run_on_workers(&r, "st", NULL);
	ok(&r);
	run_result_release(&r);
	{
		char *text = read_file(kh, NULL);

		cr_assert_not_null(text);
		ASSERT_HAS(text, "# mine\n");
		ASSERT_HAS(text, "other.example ssh-ed25519 " OTHER_KEY);
		cr_assert_eq(count_substr(text, OTHER_KEY), 1, "%s", text);
		free(text);
	}
}

Test(tpu, unpublished_host_keys_are_not_trusted_blindly)
{
	struct run_result r;

	cr_assert_eq(fake_tpu_config(&tpu, "{\"publish_hostkeys\": false}"), 0);
	create_active("np", "v4-8", "1");
	run_on_workers(&r, "np", NULL);
	cr_assert_eq(r.status, 255, "%s", r.err);
	ASSERT_HAS(r.err, "published no SSH host keys");
	ASSERT_HAS(r.err, "accept-new");
	run_result_release(&r);
	run_on_workers(&r, "np", (const char *const[]){
				   "--strict-host-key-checking", "accept-new",
				   NULL });
	ok(&r);
	ASSERT_HAS(r.out, "s0-w0: 0/1/0/1/0/1");
	run_result_release(&r);
}

Test(tpu, run_on_a_queued_resource_that_is_not_active)
{
	struct run_result r;

	cr_assert_eq(fake_tpu_config(&tpu, "{\"delays\": "
					   "{\"WAITING_FOR_RESOURCES\": 60}}"),
		     0);
	SLICECTL(&r, "create", "na", "--accelerator-type", "v4-8",
		 "--runtime-version", "rt", "--no-ssh-key");
	ok(&r);
	run_result_release(&r);
	run_on_workers(&r, "na", NULL);
	cr_assert_eq(r.status, 2, "%s", r.err);
	ASSERT_HAS(r.err, "not ACTIVE");
	ASSERT_HAS(r.err, "slicectl wait na");
	run_result_release(&r);
}
