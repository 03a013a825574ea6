/*
 * slicectl job --target gke: the JobSet it renders for every family and
 * capacity mode, checked against the JobSet CRD's schema with unknown
 * fields refused (gke_validate.py beside this file, python3 jsonschema)
 * and its YAML read back to the same objects; the values docs/DESIGN.md "The
 * rendered JobSet" fixes; and what is refused before anything is touched
 * (webhook name rules, an unknown type, flags that do not go together).
 */
#include "tests/harness/harness.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[HARNESS_PATH];
static char bucket[HARNESS_PATH + 16];

static void setup(void)
{
	cr_assert_eq(make_temp_dir(dir, sizeof(dir), "gke"), 0);
	snprintf(bucket, sizeof(bucket), "file://%s/bucket", dir);
}

static void cleanup(void)
{
	if (dir[0])
		rm_rf(dir);
	dir[0] = '\0';
}

TestSuite(gke_render, .init = setup, .fini = cleanup, .timeout = 300);

/* The JobSet CRD check, relative to the source tree. */
#define VALIDATE "tests/launcher/target/gke/gke_validate.py"
#define MAX_ARGS 48

/* slicectl job --target gke --render with the usual flags, then extra
 * ones (NULL-terminated); *r holds what it said. */
static void render(struct run_result *r, const char *name, const char *type,
		   const char *format, const char *const *extra)
{
	const char *argv[MAX_ARGS] = {
		"job", "--target", "gke", "--render", "--name", name,
		"--bucket", bucket, "--accelerator-type", type,
		"--num-slices", "2", "--command", "python3 train.py",
		"--queue", "tpu-queue", "--image", "python:3.12",
		"--format", format,
	};
	size_t n = 20;

	for (size_t i = 0; extra && extra[i]; i++) {
		cr_assert_lt(n, MAX_ARGS - 1);
		argv[n++] = extra[i];
	}
	argv[n] = NULL;
	cr_assert_eq(run_slicectl(r, argv, NULL), 0);
}

static json_t *render_json(const char *name, const char *type,
			   const char *const *extra)
{
	struct run_result r = { 0 };
	json_error_t je;
	json_t *list;

	render(&r, name, type, "json", extra);
	cr_assert_eq(r.status, 0, "%s %s: %s", name, type, r.err);
	list = json_loads(r.out, 0, &je);
	cr_assert(list, "%s: %s", je.text, r.out);
	cr_assert_str_eq(json_string_value(json_object_get(list, "kind")),
			 "List");
	cr_assert_eq(json_array_size(json_object_get(list, "items")), 1);
	run_result_release(&r);
	return list;
}

static const char *const types[] = {
	"v4-8", "v4-16", "v4-4096", "v5litepod-1", "v5litepod-8",
	"v5litepod-16", "v5litepod-256", "v5p-8", "v5p-128", "v6e-4",
	"v6e-16", "v6e-256", "tpu7x-8", "tpu7x-128",
};

/* Capacity modes, each with the flags that select it. */
static const char *const *const modes[] = {
	(const char *const[]){ NULL },
	(const char *const[]){ "--spot", NULL },
	(const char *const[]){ "--flex-start", NULL },
	(const char *const[]){ "--flex-start", "--queued-provisioning",
			       "--max-run-duration", "3600", NULL },
	(const char *const[]){ "--reservation", "my-reservation",
			       "--priority-class", "high", "--namespace",
			       "team-a", "--env", "A=1", "--env", "B=x y",
			       "--service-account", "trainer", "--preflight",
			       "nvidia-smi", "--cordon-on-preflight-failure",
			       "--cordon-bad-hosts", NULL },
};

#define N_TYPES (sizeof(types) / sizeof(types[0]))
#define N_MODES (sizeof(modes) / sizeof(modes[0]))

/* Renders each of n types under each capacity mode, pre's flags first
 * (NULL-terminated), as JSON and as YAML into DIR/TAG.json and .yaml,
 * and checks them with gke_validate.py; returns how many. */
static unsigned validate_all(const char *tag, const char *const *types,
			     size_t n, const char *const *pre)
{
	json_t *all = json_pack("{s:s, s:s, s:[]}", "apiVersion", "v1", "kind",
				"List", "items");
	char json_path[HARNESS_PATH + 32], yaml_path[HARNESS_PATH + 32];
	FILE *yaml;
	unsigned rendered = 0;
	int rc;

	snprintf(json_path, sizeof(json_path), "%s/%s.json", dir, tag);
	snprintf(yaml_path, sizeof(yaml_path), "%s/%s.yaml", dir, tag);
	yaml = fopen(yaml_path, "w");
	cr_assert(yaml);
	for (size_t t = 0; t < n; t++) {
		for (size_t m = 0; m < N_MODES; m++) {
			const char *argv[MAX_ARGS];
			struct run_result r = { 0 };
			size_t k = 0;
			json_t *list;

			/* Flex-start has no TPU v4 (checked below). */
			if (!strncmp(types[t], "v4-", 3) && (m == 2 || m == 3))
				continue;
			for (size_t i = 0; pre && pre[i]; i++)
				argv[k++] = pre[i];
			for (size_t i = 0; modes[m][i]; i++)
				argv[k++] = modes[m][i];
			argv[k] = NULL;
			list = render_json("run", types[t], argv);
			json_array_extend(json_object_get(all, "items"),
					  json_object_get(list, "items"));
			json_decref(list);
			render(&r, "run", types[t], "text", argv);
			cr_assert_eq(r.status, 0, "%s", r.err);
			fprintf(yaml, "---\n%s", r.out);
			run_result_release(&r);
			rendered++;
		}
	}
	fclose(yaml);
	cr_assert_eq(json_dump_file(all, json_path, JSON_INDENT(1)), 0);
	json_decref(all);
	rc = sh("python3 '%s/" VALIDATE "' '%s' '%s'",
		getenv("SLICECTL_SRCDIR"), json_path, yaml_path);
	if (rc == 2)
		cr_skip_test("python3 with jsonschema and yaml is needed");
	cr_assert_eq(rc, 0, "the %s renders do not validate (see above)", tag);
	return rendered;
}

Test(gke_render, every_family_and_capacity_validates)
{
	cr_assert_geq(validate_all("all", types, N_TYPES, NULL), 60u);
}

/* The validator itself refuses what the API server would. */
Test(gke_render, validator_refuses_unknown_fields)
{
	json_t *list = render_json("run", "v5litepod-16", NULL);
	json_t *pod = json_object_get(
		json_object_get(
			json_object_get(
				json_object_get(
					json_array_get(
						json_object_get(
							json_object_get(
								json_array_get(
									json_object_get(list,
											"items"),
									0),
								"spec"),
							"replicatedJobs"),
						0),
					"template"),
				"spec"),
			"template"),
		"spec");
	char path[HARNESS_PATH + 32];
	int rc;

	cr_assert(json_is_object(pod));
	json_object_set_new(pod, "hostNetwrok", json_true());
	snprintf(path, sizeof(path), "%s/bad.json", dir);
	cr_assert_eq(json_dump_file(list, path, 0), 0);
	json_decref(list);
	rc = sh("python3 '%s/" VALIDATE "' '%s' 2>/dev/null",
		getenv("SLICECTL_SRCDIR"), path);
	if (rc == 2)
		cr_skip_test("python3 with jsonschema and yaml is needed");
	cr_assert_eq(rc, 1);
}

static json_t *at(json_t *v, const char *path)
{
	char part[64];

	while (v && *path) {
		size_t n = strcspn(path, ".");
		char *end;
		unsigned long i;

		snprintf(part, sizeof(part), "%.*s", (int)n, path);
		i = strtoul(part, &end, 10);
		v = json_is_array(v) && !*end ? json_array_get(v, i)
					      : json_object_get(v, part);
		path += n + (path[n] == '.');
	}
	return v;
}

static const char *str(json_t *root, const char *path)
{
	json_t *v = at(root, path);

	cr_assert(json_is_string(v), "%s is not a string", path);
	return json_string_value(v);
}

static long long num(json_t *root, const char *path)
{
	json_t *v = at(root, path);

	cr_assert(json_is_integer(v), "%s is not an integer", path);
	return json_integer_value(v);
}

#define RJ "items.0.spec.replicatedJobs.0."
#define POD RJ "template.spec.template.spec."
#define WORKER POD "containers.0."

static const char *env_of(json_t *list, const char *name, bool field)
{
	json_t *env = at(list, WORKER "env"), *e;
	size_t i;

	json_array_foreach(env, i, e) {
		if (strcmp(json_string_value(json_object_get(e, "name")), name))
			continue;
		return field ? str(e, "valueFrom.fieldRef.fieldPath")
			     : str(e, "value");
	}
	cr_assert_fail("no env %s", name);
	return NULL;
}

static const char *key(json_t *map, const char *k)
{
	json_t *v = json_object_get(map, k);

	cr_assert(json_is_string(v), "no %s", k);
	return json_string_value(v);
}

/* What docs/DESIGN.md "The rendered JobSet" fixes, for v5litepod-16 x 2. */
Test(gke_render, contract_values)
{
	json_t *l = render_json("demo", "v5litepod-16",
				(const char *const[]){ "--max-restarts", "7",
						       "--max-infra-restarts",
						       "3", "--grace", "40",
						       "--priority-class", "high",
						       NULL });
	json_t *md = at(l, "items.0.metadata");
	json_t *sel = at(l, POD "nodeSelector");
	json_t *limits = at(l, WORKER "resources.limits");
	json_t *cmd = at(l, WORKER "command");
	json_t *init = at(l, POD "initContainers.0");

	cr_expect_str_eq(str(l, "items.0.apiVersion"),
			 "jobset.x-k8s.io/v1alpha2");
	cr_expect_str_eq(str(l, "items.0.kind"), "JobSet");
	cr_expect_str_eq(str(md, "name"), "demo");
	cr_expect_str_eq(str(md, "namespace"), "default");
	cr_expect_str_eq(key(json_object_get(md, "labels"),
			     "kueue.x-k8s.io/queue-name"), "tpu-queue");
	cr_expect_str_eq(key(json_object_get(md, "labels"),
			     "app.kubernetes.io/managed-by"), "slicectl");
	cr_expect_str_eq(key(json_object_get(md, "labels"),
			     "slicectl.dev/run"), "demo");
	cr_expect_str_eq(key(json_object_get(md, "annotations"),
			     "alpha.jobset.sigs.k8s.io/exclusive-topology"),
			 "cloud.google.com/gke-nodepool");
	cr_expect_null(at(l, "items.0.spec.suspend"));
	/* Both budgets (issue 26: JobSet's restarts are the
	 * infrastructure's, which it cannot tell from a preflight's). */
	cr_expect_eq(num(l, "items.0.spec.failurePolicy.maxRestarts"), 10);
	cr_expect_str_eq(str(l, "items.0.spec.failurePolicy.rules.0.action"),
			 "FailJobSet");
	cr_expect_str_eq(str(l, "items.0.spec.failurePolicy.rules.0."
			     "onJobFailureReasons.0"), "PodFailurePolicy");
	cr_expect(json_is_true(at(l, "items.0.spec.network.enableDNSHostnames")));
	cr_expect_str_eq(str(l, RJ "name"), "slice");
	cr_expect_eq(num(l, RJ "replicas"), 2);
	cr_expect_eq(num(l, RJ "template.spec.parallelism"), 4);
	cr_expect_eq(num(l, RJ "template.spec.completions"), 4);
	cr_expect_str_eq(str(l, RJ "template.spec.completionMode"), "Indexed");
	cr_expect_eq(num(l, RJ "template.spec.backoffLimit"), 0);
	cr_expect_eq(num(l, RJ "template.spec.podFailurePolicy.rules.0."
			 "onExitCodes.values.0"), 3);
	/* Only a failed run (3) fails the Job for good: a failed preflight
	 * (4) or a notice (143) fails it as any pod failure does, and the
	 * JobSet restarts the set. */
	cr_expect_eq(json_array_size(at(l, RJ "template.spec.podFailurePolicy."
					 "rules")), 1);
	cr_expect_eq(json_array_size(at(l, RJ "template.spec.podFailurePolicy."
					 "rules.0.onExitCodes.values")), 1);
	cr_expect_str_eq(str(l, POD "restartPolicy"), "Never");
	cr_expect_eq(num(l, POD "terminationGracePeriodSeconds"), 70);
	cr_expect_str_eq(str(l, POD "priorityClassName"), "high");
	cr_expect(json_is_true(at(l, POD "hostNetwork")));
	cr_expect_str_eq(str(l, POD "dnsPolicy"), "ClusterFirstWithHostNet");
	cr_expect_str_eq(str(l, POD "tolerations.0.key"), "google.com/tpu");
	cr_expect_str_eq(key(sel, "cloud.google.com/gke-tpu-accelerator"),
			 "tpu-v5-lite-podslice");
	cr_expect_str_eq(key(sel, "cloud.google.com/gke-tpu-topology"), "4x4");
	cr_expect_eq(json_object_size(sel), 2);
	cr_expect_str_eq(key(limits, "google.com/tpu"), "4");
	cr_expect_eq(num(l, WORKER "ports.0.containerPort"), 8471);
	cr_expect_eq(num(l, WORKER "ports.1.containerPort"), 8080);
	cr_expect(json_is_true(at(l, WORKER "securityContext.privileged")));
	cr_expect_str_eq(json_string_value(json_array_get(cmd, 0)),
			 "/slicectl/slice-supervisor");
	cr_expect_str_eq(json_string_value(json_array_get(cmd, 4)), "--pod");
	cr_expect(strstr(json_string_value(json_array_get(cmd, 3)), "/demo"));
	cr_expect_str_eq(str(init, "name"), "fetch-supervisor");
	cr_expect_str_eq(str(init, "volumeMounts.0.mountPath"), "/slicectl");
	cr_expect_str_eq(str(l, WORKER "volumeMounts.0.mountPath"), "/slicectl");
	cr_expect_str_eq(env_of(l, "SLICE_POD_SLICE", true),
			 "metadata.labels['jobset.sigs.k8s.io/job-index']");
	cr_expect_str_eq(env_of(l, "SLICE_POD_WORKER", true),
			 "metadata.labels['batch.kubernetes.io/"
			 "job-completion-index']");
	cr_expect_str_eq(env_of(l, "SLICE_POD_RESTART_ATTEMPT", true),
			 "metadata.labels['jobset.sigs.k8s.io/restart-attempt']");
	cr_expect_str_eq(env_of(l, "SLICE_POD_NODE", true), "spec.nodeName");
	cr_expect_str_eq(env_of(l, "MEGASCALE_COORDINATOR_ADDRESS", false),
			 "demo-slice-0-0.demo");
	cr_expect_str_eq(env_of(l, "MEGASCALE_NUM_SLICES", false), "2");
	cr_expect_str_eq(env_of(l, "MEGASCALE_PORT", false), "8080");
	cr_expect_str_eq(env_of(l, "SLICE_POD_COORDINATOR", false),
			 "demo-slice-0-0.demo");
	json_decref(l);
}

/* --cordon-on-preflight-failure tells the supervisor (which finds its
 * node in SLICE_POD_NODE); --service-account names whose RBAC it uses. */
Test(gke_render, cordon_and_service_account)
{
	json_t *l = render_json("demo", "v5litepod-16", (const char *const[]){
		"--preflight", "nvidia-smi", "--cordon-on-preflight-failure",
		"--service-account", "trainer", NULL });
	json_t *plain = render_json("demo", "v5litepod-16", NULL);
	json_t *e;
	size_t i;

	cr_expect_str_eq(env_of(l, "SLICE_PREFLIGHT_CORDON", false), "1");
	cr_expect_str_eq(env_of(l, "SLICE_POD_NODE", true), "spec.nodeName");
	cr_expect_str_eq(str(l, POD "serviceAccountName"), "trainer");
	json_array_foreach(at(plain, WORKER "env"), i, e)
		cr_expect_str_neq(str(e, "name"), "SLICE_PREFLIGHT_CORDON");
	cr_expect_null(at(plain, POD "serviceAccountName"));
	json_decref(l);
	json_decref(plain);
}

/* --cordon-bad-hosts tells the supervisor to cordon a node its run
 * quarantines; unlike the preflight's cordon it needs no --preflight, and
 * each flag asks for its own cordon only. */
Test(gke_render, cordon_bad_hosts)
{
	json_t *l = render_json("demo", "v5litepod-16", (const char *const[]){
		"--cordon-bad-hosts", NULL });
	json_t *both = render_json("demo", "v5litepod-16",
				   (const char *const[]){
		"--preflight", "nvidia-smi", "--cordon-on-preflight-failure",
		"--cordon-bad-hosts", NULL });
	json_t *plain = render_json("demo", "v5litepod-16", NULL);
	json_t *e;
	size_t i;

	cr_expect_str_eq(env_of(l, "SLICE_CORDON_BAD_HOSTS", false), "1");
	cr_expect_str_eq(env_of(l, "SLICE_POD_NODE", true), "spec.nodeName");
	json_array_foreach(at(l, WORKER "env"), i, e)
		cr_expect_str_neq(str(e, "name"), "SLICE_PREFLIGHT_CORDON");
	cr_expect_str_eq(env_of(both, "SLICE_CORDON_BAD_HOSTS", false), "1");
	cr_expect_str_eq(env_of(both, "SLICE_PREFLIGHT_CORDON", false), "1");
	json_array_foreach(at(plain, WORKER "env"), i, e)
		cr_expect_str_neq(str(e, "name"), "SLICE_CORDON_BAD_HOSTS");
	json_decref(l);
	json_decref(both);
	json_decref(plain);
}

/* Each family's node labels and pod shape, as GKE documents them. */
Test(gke_render, shapes)
{
	static const struct {
		const char *type, *accel, *topo, *chips;
		long long pods;
	} want[] = {
		{ "v4-16", "tpu-v4-podslice", "2x2x2", "4", 2 },
		{ "v5litepod-16", "tpu-v5-lite-podslice", "4x4", "4", 4 },
		{ "v5litepod-8", "tpu-v5-lite-podslice", "2x4", "8", 1 },
		{ "v5p-128", "tpu-v5p-slice", "4x4x4", "4", 16 },
		{ "v6e-16", "tpu-v6e-slice", "4x4", "4", 4 },
		{ "v6e-1", "tpu-v6e-slice", "1x1", "1", 1 },
		{ "tpu7x-128", "tpu7x", "4x4x4", "4", 16 },
	};

	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
		json_t *l = render_json("shape", want[i].type, NULL);
		json_t *sel = at(l, POD "nodeSelector");

		cr_expect_str_eq(key(sel, "cloud.google.com/gke-tpu-accelerator"),
				 want[i].accel, "%s", want[i].type);
		cr_expect_str_eq(key(sel, "cloud.google.com/gke-tpu-topology"),
				 want[i].topo, "%s", want[i].type);
		cr_expect_str_eq(key(at(l, WORKER "resources.requests"),
				     "google.com/tpu"), want[i].chips, "%s",
				 want[i].type);
		cr_expect_eq(num(l, RJ "template.spec.parallelism"),
			     want[i].pods, "%s", want[i].type);
		json_decref(l);
	}
}

Test(gke_render, capacity)
{
	json_t *l, *sel;

	l = render_json("c", "v6e-16", (const char *const[]){ "--spot", NULL });
	sel = at(l, POD "nodeSelector");
	cr_expect_str_eq(key(sel, "cloud.google.com/gke-spot"), "true");
	json_decref(l);

	l = render_json("c", "v6e-16",
			(const char *const[]){ "--flex-start", NULL });
	sel = at(l, POD "nodeSelector");
	cr_expect_str_eq(key(sel, "cloud.google.com/gke-flex-start"), "true");
	cr_expect_null(json_object_get(sel, "cloud.google.com/gke-queued"));
	cr_expect_null(json_object_get(at(l, "items.0.metadata.annotations"),
				       "provreq.kueue.x-k8s.io/"
				       "maxRunDurationSeconds"));
	json_decref(l);

	l = render_json("c", "v6e-16",
			(const char *const[]){ "--flex-start",
					       "--queued-provisioning", NULL });
	sel = at(l, POD "nodeSelector");
	cr_expect_str_eq(key(sel, "cloud.google.com/gke-flex-start"), "true");
	cr_expect_str_eq(key(sel, "cloud.google.com/gke-queued"), "true");
	cr_expect_str_eq(str(l, POD "tolerations.1.key"),
			 "cloud.google.com/gke-queued");
	cr_expect_str_eq(str(l, POD "tolerations.1.effect"), "NoSchedule");
	cr_expect_str_eq(key(at(l, "items.0.metadata.annotations"),
			     "provreq.kueue.x-k8s.io/maxRunDurationSeconds"),
			 "604800");
	json_decref(l);

	l = render_json("c", "v6e-16",
			(const char *const[]){ "--reservation", "res-1", NULL });
	sel = at(l, POD "nodeSelector");
	cr_expect_str_eq(key(sel, "cloud.google.com/reservation-name"), "res-1");
	cr_expect_str_eq(key(sel, "cloud.google.com/reservation-affinity"),
			 "specific");
	json_decref(l);
}

/* A gs:// bucket: the init container is gcloud's image. */
Test(gke_render, gs_bucket_fetches_with_gcloud)
{
	struct run_result r = { 0 };

	cr_assert_eq(run_slicectl(&r, (const char *const[]){
		"job", "--target", "gke", "--render", "--name", "g",
		"--bucket", "gs://my-bucket/runs", "--accelerator-type",
		"v6e-16", "--command", "true", "--queue", "q", "--image",
		"img", NULL }, NULL), 0);
	cr_assert_eq(r.status, 0, "%s", r.err);
	cr_expect(strstr(r.out, "image: gcr.io/google.com/cloudsdktool/"
				"google-cloud-cli:slim"), "%s", r.out);
	cr_expect(strstr(r.out, "value: gcloud storage cp"), "%s", r.out);
	cr_expect(strstr(r.out, "value: gs://my-bucket/runs/g/supervisor/"
				"slice-supervisor-"), "%s", r.out);
	cr_expect(strstr(r.out, "- gs://my-bucket/runs/g\n"), "%s", r.out);
	run_result_release(&r);
}

static void refused(const char *why, const char *name, const char *type,
		    const char *const *extra)
{
	struct run_result r = { 0 };

	render(&r, name, type, "json", extra);
	cr_expect_eq(r.status, 2, "%s %s: %d\n%s", name, type, r.status, r.err);
	cr_expect(strstr(r.err, why), "expected '%s' in:\n%s", why, r.err);
	cr_expect_eq(r.out_len, 0u, "%s", r.out);
	run_result_release(&r);
}

/* What the API server's webhooks (or GKE) would refuse, refused first. */
Test(gke_render, refused)
{
	/* 63 - len("-slice-1-3-xxxxx") = 47 characters is the most. */
	static const char n47[] =
		"a2345678901234567890123456789012345678901234567";
	static const char n48[] =
		"a23456789012345678901234567890123456789012345678";
	struct run_result r = { 0 };

	render(&r, n47, "v5litepod-16", "json", NULL);
	cr_expect_eq(r.status, 0, "%s", r.err);
	run_result_release(&r);
	refused("JobSet names its pods", n48, "v5litepod-16", NULL);
	refused("use at most 47", n48, "v5litepod-16", NULL);
	refused("cannot name a JobSet", "Big", "v5litepod-16", NULL);
	refused("cannot name a JobSet", "1run", "v5litepod-16", NULL);
	refused("is not a TPU type slicectl knows", "r", "v5litepod-24", NULL);
	refused("v5litepod-1 ... v5litepod-256", "r", "v5e-16", NULL);
	refused("GKE has no TPU node pools of the V3", "r", "v3-8", NULL);
	refused("choose one of --spot, --flex-start and --reservation", "r",
		"v6e-16", (const char *const[]){ "--spot", "--flex-start",
						  NULL });
	refused("flex-start has no TPU v4", "r", "v4-16",
		(const char *const[]){ "--flex-start", NULL });
	refused("--queued-provisioning goes with --flex-start", "r", "v6e-16",
		(const char *const[]){ "--queued-provisioning", NULL });
	refused("not a Kubernetes namespace", "r", "v6e-16",
		(const char *const[]){ "--namespace", "Team_A", NULL });
	refused("not a PriorityClass", "r", "v6e-16",
		(const char *const[]){ "--priority-class", "High!", NULL });
	refused("queued-resource tiers", "r", "v6e-16",
		(const char *const[]){ "--reserved", NULL });
	refused("not for --target gke", "r", "v6e-16",
		(const char *const[]){ "--local", NULL });
	refused("is not NAME=VALUE", "r", "v6e-16",
		(const char *const[]){ "--env", "1X=2", NULL });
	refused("--cordon-on-preflight-failure goes with --preflight", "r",
		"v6e-16", (const char *const[]){
			"--cordon-on-preflight-failure", NULL });
	refused("not a Kubernetes service account", "r", "v6e-16",
		(const char *const[]){ "--service-account", "SA!", NULL });
	refused("--nodes is for GPU machine types", "r", "v6e-16",
		(const char *const[]){ "--nodes", "2", NULL });

	/* GKE flags without --target gke. */
	cr_assert_eq(run_slicectl(&r, (const char *const[]){
		"job", "--name", "r", "--bucket", bucket, "--accelerator-type",
		"v6e-16", "--command", "true", "--queue", "q", NULL }, NULL), 0);
	cr_expect_eq(r.status, 2);
	cr_expect(strstr(r.err, "are for --target gke"), "%s", r.err);
	run_result_release(&r);
	cr_assert_eq(run_slicectl(&r, (const char *const[]){
		"job", "--name", "r", "--bucket", bucket, "--accelerator-type",
		"v6e-16", "--command", "true", "--cordon-bad-hosts", NULL },
				  NULL), 0);
	cr_expect_eq(r.status, 2);
	cr_expect(strstr(r.err, "--cordon-bad-hosts and --render are for "
			 "--target gke"), "%s", r.err);
	run_result_release(&r);
}

/* --render touches no bucket. */
Test(gke_render, creates_nothing)
{
	json_t *l = render_json("quiet", "v6e-16", NULL);
	char path[HARNESS_PATH + 32];

	json_decref(l);
	snprintf(path, sizeof(path), "%s/bucket", dir);
	cr_expect_neq(access(path, F_OK), 0, "%s exists", path);
}

/* ---- GPU machine types ---- */

static const char *const gpu_types[] = {
	"a3-highgpu-8g", "a3-megagpu-8g", "a3-ultragpu-8g", "a4-highgpu-8g",
	"a2-highgpu-1g", "a2-megagpu-16g", "a2-ultragpu-8g", "g2-standard-4",
	"g2-standard-24", "g2-standard-96",
};

#define N_GPU_TYPES (sizeof(gpu_types) / sizeof(gpu_types[0]))

/* A GPU job of nodes nodes: render's --num-slices 2 undone (the last
 * one counts), then extra. */
static json_t *render_gpu(const char *type, const char *nodes,
			  const char *const *extra)
{
	const char *argv[MAX_ARGS] = { "--num-slices", "1", "--nodes", nodes };
	size_t n = 4;

	for (size_t i = 0; extra && extra[i]; i++)
		argv[n++] = extra[i];
	argv[n] = NULL;
	return render_json("gpu", type, argv);
}

/* The element of array arr named name, or NULL. */
static json_t *named(json_t *arr, const char *name)
{
	json_t *x;
	size_t i;

	json_array_foreach(arr, i, x)
		if (!strcmp(json_string_value(json_object_get(x, "name")), name))
			return x;
	return NULL;
}

static bool has_env(json_t *l, const char *name)
{
	return named(at(l, WORKER "env"), name) != NULL;
}

Test(gke_render, gpu_types_and_capacity_validate)
{
	cr_assert_geq(validate_all("gpu", gpu_types, N_GPU_TYPES,
				   (const char *const[]){ "--num-slices", "1",
							  "--nodes", "3",
							  NULL }),
		      50u);
}

/* What every GPU pod has, whatever its family. */
static void expect_gpu_pod(json_t *l, const char *type, const char *label,
			   const char *gpus, long long nodes)
{
	json_t *sel = at(l, POD "nodeSelector"), *tol = at(l, POD "tolerations");
	json_t *dshm = named(at(l, POD "volumes"), "dshm");

	cr_expect_eq(num(l, RJ "replicas"), 1, "%s", type);
	cr_expect_eq(num(l, RJ "template.spec.parallelism"), nodes, "%s", type);
	cr_expect_eq(num(l, RJ "template.spec.completions"), nodes, "%s", type);
	cr_expect_str_eq(key(sel, "cloud.google.com/gke-accelerator"), label,
			 "%s", type);
	cr_expect_eq(json_object_size(sel), 1, "%s: only the GPU label", type);
	cr_expect_eq(json_array_size(tol), 1, "%s", type);
	cr_expect_str_eq(str(tol, "0.key"), "nvidia.com/gpu");
	cr_expect_str_eq(str(tol, "0.operator"), "Exists");
	cr_expect_str_eq(str(tol, "0.effect"), "NoSchedule");
	cr_expect_str_eq(key(at(l, WORKER "resources.limits"), "nvidia.com/gpu"),
			 gpus, "%s", type);
	cr_expect_str_eq(key(at(l, WORKER "resources.requests"),
			     "nvidia.com/gpu"), gpus, "%s", type);
	cr_expect_null(json_object_get(at(l, WORKER "resources.limits"),
				       "google.com/tpu"));
	cr_expect_null(at(l, WORKER "securityContext"), "%s: privileged", type);
	cr_expect_null(at(l, WORKER "ports"), "%s: TPU ports", type);
	cr_assert(dshm, "%s: no dshm volume", type);
	cr_expect_str_eq(str(dshm, "emptyDir.medium"), "Memory");
	cr_expect_str_eq(str(named(at(l, WORKER "volumeMounts"), "dshm"),
			     "mountPath"), "/dev/shm");
	cr_expect_str_eq(env_of(l, "SLICE_POD_COORDINATOR", false),
			 "gpu-slice-0-0.gpu");
	cr_expect(!has_env(l, "MEGASCALE_COORDINATOR_ADDRESS"), "%s", type);
	cr_expect(!has_env(l, "MEGASCALE_NUM_SLICES"), "%s", type);
	cr_expect_null(json_object_get(at(l, "items.0.metadata.annotations"),
				       "alpha.jobset.sigs.k8s.io/"
				       "exclusive-topology"), "%s", type);
}

static const char *annotation(json_t *l, const char *k)
{
	return key(at(l, RJ "template.spec.template.metadata.annotations"), k);
}

static const char *host_path(json_t *l, const char *volume)
{
	json_t *v = named(at(l, POD "volumes"), volume);

	cr_assert(v, "no volume %s", volume);
	return str(v, "hostPath.path");
}

static const char *mount_of(json_t *container, const char *volume)
{
	json_t *m = named(json_object_get(container, "volumeMounts"), volume);

	cr_assert(m, "no mount of %s", volume);
	return str(m, "mountPath");
}

static bool has_cap(json_t *c, const char *cap)
{
	json_t *caps = at(c, "securityContext.capabilities.add"), *x;
	size_t i;

	json_array_foreach(caps, i, x)
		if (!strcmp(json_string_value(x), cap))
			return true;
	return false;
}

Test(gke_render, gpu_tcpxo_a3_mega)
{
	json_t *l = render_gpu("a3-megagpu-8g", "4", NULL);
	json_t *daemon = named(at(l, POD "initContainers"), "tcpxo-daemon");
	json_t *worker = at(l, WORKER "");

	expect_gpu_pod(l, "a3-megagpu-8g", "nvidia-h100-mega-80gb", "8", 4);
	cr_expect(json_is_false(at(l, POD "hostNetwork")));
	cr_expect_str_eq(annotation(l, "networking.gke.io/default-interface"),
			 "eth0");
	cr_expect(strstr(annotation(l, "networking.gke.io/interfaces"),
			 "{\"interfaceName\":\"eth8\",\"network\":\"vpc8\"}"));
	cr_expect(strstr(annotation(l, "devices.gke.io/container.tcpxo-daemon"),
			 "- path: /dev/nvidia7\n"));
	cr_expect(strstr(annotation(l, "devices.gke.io/container.tcpxo-daemon"),
			 "- path: /dev/dmabuf_import_helper\n"));
	cr_assert(daemon, "no tcpxo-daemon");
	cr_expect_str_eq(str(daemon, "restartPolicy"), "Always");
	cr_expect(strstr(str(daemon, "image"), "gpudirect-tcpxo/tcpgpudmarxd"));
	cr_expect(has_cap(daemon, "NET_ADMIN"));
	cr_expect(has_cap(daemon, "NET_BIND_SERVICE"));
	cr_expect_null(at(daemon, "securityContext.privileged"));
	cr_expect_str_eq(mount_of(daemon, "libraries"), "/usr/local/nvidia");
	cr_expect_str_eq(host_path(l, "libraries"), "/home/kubernetes/bin/nvidia");
	cr_expect_str_eq(host_path(l, "aperture-devices"),
			 "/dev/aperture_devices");
	cr_expect_str_eq(mount_of(worker, "libraries"), "/usr/local/nvidia");
	cr_expect_str_eq(mount_of(worker, "aperture-devices"),
			 "/dev/aperture_devices");
	cr_expect_str_eq(env_of(l, "LD_LIBRARY_PATH", false),
			 "/usr/local/nvidia/lib64");
	cr_expect_str_eq(env_of(l, "NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY", false),
			 "/dev/aperture_devices");
	/* The supervisor is fetched before the daemon starts. */
	cr_expect_str_eq(str(l, POD "initContainers.0.name"), "fetch-supervisor");
	json_decref(l);
}

Test(gke_render, gpu_tcpx_a3_high)
{
	json_t *l = render_gpu("a3-highgpu-8g", "2", NULL);
	json_t *daemon = named(at(l, POD "initContainers"), "tcpx-daemon");

	expect_gpu_pod(l, "a3-highgpu-8g", "nvidia-h100-80gb", "8", 2);
	cr_expect(json_is_false(at(l, POD "hostNetwork")));
	cr_expect(strstr(annotation(l, "networking.gke.io/interfaces"),
			 "{\"interfaceName\":\"eth4\",\"network\":\"vpc4\"}]"));
	cr_expect(strstr(annotation(l, "devices.gke.io/container.tcpx-daemon"),
			 "- path: /dev/nvidia-uvm\n"));
	cr_assert(daemon, "no tcpx-daemon");
	cr_expect_str_eq(str(daemon, "restartPolicy"), "Always");
	cr_expect(has_cap(daemon, "NET_ADMIN"));
	cr_expect_str_eq(mount_of(daemon, "tcpx-socket"), "/run/tcpx");
	cr_expect_str_eq(host_path(l, "tcpx-socket"), "/run/tcpx");
	cr_expect_str_eq(mount_of(at(l, WORKER ""), "tcpx-socket"), "/tmp");
	cr_expect_str_eq(env_of(l, "LD_LIBRARY_PATH", false),
			 "/usr/local/nvidia/lib64");
	cr_expect(!has_env(l, "NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY"));
	json_decref(l);
}

Test(gke_render, gpu_rdma_a3_ultra_and_a4)
{
	static const char *const types[][2] = {
		{ "a3-ultragpu-8g", "nvidia-h200-141gb" },
		{ "a4-highgpu-8g", "nvidia-b200" },
	};

	for (size_t i = 0; i < 2; i++) {
		json_t *l = render_gpu(types[i][0], "2", NULL);
		const char *ifs = annotation(l, "networking.gke.io/interfaces");

		expect_gpu_pod(l, types[i][0], types[i][1], "8", 2);
		cr_expect(json_is_false(at(l, POD "hostNetwork")));
		cr_expect(strstr(ifs, "{\"interfaceName\":\"eth1\",\"network\":"
				      "\"gvnic-1\"}"), "%s", ifs);
		cr_expect(strstr(ifs, "{\"interfaceName\":\"eth9\",\"network\":"
				      "\"rdma-7\"}]"), "%s", ifs);
		cr_expect_eq(json_array_size(at(l, POD "initContainers")), 1,
			     "%s: no daemon", types[i][0]);
		cr_expect_str_eq(host_path(l, "gib"), "/home/kubernetes/bin/gib");
		cr_expect_str_eq(mount_of(at(l, WORKER ""), "gib"),
				 "/usr/local/gib");
		cr_expect_str_eq(mount_of(at(l, WORKER ""), "libraries"),
				 "/usr/local/nvidia");
		cr_expect_str_eq(env_of(l, "LD_LIBRARY_PATH", false),
				 "/usr/local/nvidia/lib64");
		json_decref(l);
	}
}

/* G2 and A2: the node's own network, nothing but the GPUs and /dev/shm;
 * a user's --env comes last and wins. */
Test(gke_render, gpu_plain_g2_and_a2)
{
	static const char *const types[][3] = {
		{ "g2-standard-24", "nvidia-l4", "2" },
		{ "g2-standard-8", "nvidia-l4", "1" },
		{ "a2-highgpu-4g", "nvidia-tesla-a100", "4" },
		{ "a2-ultragpu-8g", "nvidia-a100-80gb", "8" },
	};

	for (size_t i = 0; i < 4; i++) {
		json_t *l = render_gpu(types[i][0], "3",
				       (const char *const[]){
					       "--env", "NCCL_DEBUG=INFO", NULL });
		json_t *env = at(l, WORKER "env");

		expect_gpu_pod(l, types[i][0], types[i][1], types[i][2], 3);
		cr_expect(json_is_true(at(l, POD "hostNetwork")));
		cr_expect_str_eq(str(l, POD "dnsPolicy"),
				 "ClusterFirstWithHostNet");
		cr_expect_null(at(l, RJ "template.spec.template.metadata"));
		cr_expect_eq(json_array_size(at(l, POD "initContainers")), 1);
		cr_expect_eq(json_array_size(at(l, POD "volumes")), 2);
		cr_expect_str_eq(json_string_value(json_object_get(
				 json_array_get(env, json_array_size(env) - 1),
				 "name")), "NCCL_DEBUG");
		json_decref(l);
	}
}

/* Capacity on GPU node pools: the same selectors as for TPUs. */
Test(gke_render, gpu_capacity)
{
	json_t *l = render_gpu("a3-megagpu-8g", "2",
			       (const char *const[]){ "--flex-start",
						      "--queued-provisioning",
						      NULL });
	json_t *sel = at(l, POD "nodeSelector");

	cr_expect_str_eq(key(sel, "cloud.google.com/gke-accelerator"),
			 "nvidia-h100-mega-80gb");
	cr_expect_str_eq(key(sel, "cloud.google.com/gke-flex-start"), "true");
	cr_expect_str_eq(key(sel, "cloud.google.com/gke-queued"), "true");
	cr_expect_str_eq(str(l, POD "tolerations.1.key"),
			 "cloud.google.com/gke-queued");
	cr_expect_str_eq(key(at(l, "items.0.metadata.annotations"),
			     "provreq.kueue.x-k8s.io/maxRunDurationSeconds"),
			 "604800");
	json_decref(l);
	l = render_gpu("a3-ultragpu-8g", "2",
		       (const char *const[]){ "--reservation", "res-1", NULL });
	sel = at(l, POD "nodeSelector");
	cr_expect_str_eq(key(sel, "cloud.google.com/reservation-name"), "res-1");
	json_decref(l);
	l = render_gpu("g2-standard-24", "2",
		       (const char *const[]){ "--spot", NULL });
	cr_expect_str_eq(key(at(l, POD "nodeSelector"),
			     "cloud.google.com/gke-spot"), "true");
	json_decref(l);
}

Test(gke_render, gpu_refused)
{
	refused("--nodes is required with GPU machine type a3-megagpu-8g", "r",
		"a3-megagpu-8g",
		(const char *const[]){ "--num-slices", "1", NULL });
	refused("--nodes wants a whole number from 1", "r", "a3-megagpu-8g",
		(const char *const[]){ "--num-slices", "1", "--nodes", "0",
				       NULL });
	/* render's --num-slices 2 is a TPU flag. */
	refused("--num-slices is for TPU slices", "r", "a3-megagpu-8g",
		(const char *const[]){ "--nodes", "2", NULL });
	refused("a3-megagpu-8g, a3-ultragpu-8g, a4-highgpu-8g", "r",
		"a3-megagpu-16g",
		(const char *const[]){ "--nodes", "2", NULL });
	refused("g2-standard-96, with --nodes N", "r", "h100",
		(const char *const[]){ "--nodes", "2", NULL });
	refused("are for --target slurm", "r", "g2-standard-24",
		(const char *const[]){ "--num-slices", "1", "--nodes", "2",
				       "--gpus-per-node", "2", NULL });
}

/* The TPU VM target takes no GPU machine type. */
Test(gke_render, gpu_type_not_for_tpu_vms)
{
	struct run_result r = { 0 };

	cr_assert_eq(run_slicectl(&r, (const char *const[]){
		"job", "--name", "r", "--bucket", bucket, "--accelerator-type",
		"a3-megagpu-8g", "--command", "true", "--zone", "us-east5-a",
		"--project", "p", NULL }, NULL), 0);
	cr_expect_eq(r.status, 2, "%s", r.err);
	cr_expect(strstr(r.err, "is not a TPU type slicectl knows"), "%s",
		  r.err);
	run_result_release(&r);
}
