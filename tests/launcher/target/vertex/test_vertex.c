/*
 * slicectl job --target vertex: the CustomJob it renders for GPU and TPU
 * machine types under every capacity mode, checked as Vertex AI's create
 * reads it (vertex_validate.py beside this file: the gcloud 528 schema
 * with unknown fields refused, and what Vertex requires beyond it); the
 * values docs/DESIGN.md "The Vertex CustomJob" fixes; and what is refused
 * before anything is touched.
 */
#include "tests/harness/harness.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char dir[HARNESS_PATH];
static char bucket[HARNESS_PATH + 16];

static void setup(void)
{
	cr_assert_eq(make_temp_dir(dir, sizeof(dir), "vertex"), 0);
	snprintf(bucket, sizeof(bucket), "file://%s/bucket", dir);
	cr_assert_eq(sh("mkdir -p '%s/bucket'", dir), 0);
}

static void cleanup(void)
{
	if (dir[0])
		rm_rf(dir);
	dir[0] = '\0';
}

TestSuite(vertex_render, .init = setup, .fini = cleanup, .timeout = 300);

#define VALIDATE "tests/launcher/target/vertex/vertex_validate.py"
#define MAX_ARGS 48

/* slicectl job --target vertex --render with the usual flags, then extra
 * ones (NULL-terminated); *r holds what it said. */
static void render(struct run_result *r, const char *name, const char *type,
		   const char *const *extra)
{
	const char *argv[MAX_ARGS] = {
		"job", "--target", "vertex", "--render", "--name", name,
		"--bucket", bucket, "--accelerator-type", type,
		"--command", "python3 train.py", "--region", "us-central1",
		"--project", "proj", "--image", "python:3.12",
	};
	size_t n = 18;

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
	json_t *job;

	render(&r, name, type, extra);
	cr_assert_eq(r.status, 0, "%s %s: %s", name, type, r.err);
	job = json_loads(r.out, 0, &je);
	cr_assert(job, "%s: %s", je.text, r.out);
	run_result_release(&r);
	return job;
}

static const char *const gpu_types[] = {
	"a3-highgpu-8g", "a3-megagpu-8g", "a3-ultragpu-8g", "a4-highgpu-8g",
	"a2-highgpu-1g", "a2-megagpu-16g", "a2-ultragpu-8g", "g2-standard-4",
	"g2-standard-96",
};
static const char *const tpu_types[] = {
	"v5litepod-8", "v5litepod-16", "v5p-8", "v5p-128", "v6e-4", "v6e-16",
};

static const char *const *const modes[] = {
	(const char *const[]){ NULL },
	(const char *const[]){ "--spot", NULL },
	(const char *const[]){ "--flex-start", NULL },
	(const char *const[]){ "--flex-start", "--max-wait", "7200", NULL },
	(const char *const[]){ "--reservation",
			       "projects/proj/zones/us-central1-a/"
			       "reservations/res1",
			       "--service-account",
			       "trainer@proj.iam.gserviceaccount.com",
			       "--network",
			       "projects/123/global/networks/vpc", "--env",
			       "A=1", "--env", "B=x y", NULL },
};

#define N_MODES (sizeof(modes) / sizeof(modes[0]))

/* Adds each type's render under each mode (with --nodes N for GPU
 * types) to all. */
static void render_all(json_t *all, const char *const *types, size_t n,
		       const char *nodes)
{
	for (size_t t = 0; t < n; t++)
		for (size_t m = 0; m < N_MODES; m++) {
			const char *argv[MAX_ARGS];
			size_t k = 0;

			if (nodes) {
				argv[k++] = "--nodes";
				argv[k++] = nodes;
			}
			for (size_t i = 0; modes[m][i]; i++)
				argv[k++] = modes[m][i];
			argv[k] = NULL;
			json_array_append_new(all, render_json("run", types[t],
							       argv));
		}
}

Test(vertex_render, every_type_and_mode_is_a_valid_custom_job)
{
	json_t *all = json_array();
	char path[HARNESS_PATH + 32];
	int rc;

	render_all(all, gpu_types, sizeof(gpu_types) / sizeof(*gpu_types),
		   "3");
	render_all(all, tpu_types, sizeof(tpu_types) / sizeof(*tpu_types),
		   NULL);
	snprintf(path, sizeof(path), "%s/all.json", dir);
	cr_assert_eq(json_array_size(all), 75);
	cr_assert_eq(json_dump_file(all, path, 0), 0);
	json_decref(all);
	rc = sh("python3 '%s/" VALIDATE "' '%s'", getenv("SLICECTL_SRCDIR"),
		path);
	cr_assert_eq(rc, 0, "the renders do not validate (see above)");
	/* --render uploads nothing. */
	cr_assert_eq(sh("[ -z \"$(ls -A '%s/bucket')\" ]", dir), 0);
}

static const char *at(json_t *o, const char *path)
{
	char key[64];

	while (o && *path) {
		size_t n = strcspn(path, ".");

		snprintf(key, sizeof(key), "%.*s", (int)n, path);
		o = key[0] >= '0' && key[0] <= '9'
			    ? json_array_get(o, strtoul(key, NULL, 10))
			    : json_object_get(o, key);
		path += n + (path[n] == '.');
	}
	if (json_is_integer(o)) {
		static char num[32];

		snprintf(num, sizeof(num), "%lld",
			 (long long)json_integer_value(o));
		return num;
	}
	if (json_is_true(o))
		return "true";
	return json_string_value(o);
}

#define EXPECT_AT(o, path, want)                                          \
	do {                                                              \
		const char *got_ = at((o), (path));                       \
		cr_expect(got_ && !strcmp(got_, (want)), "%s: %s, not %s", \
			  (path), got_ ? got_ : "(absent)", (want));      \
	} while (0)

Test(vertex_render, gpu_nodes_are_one_primary_and_the_rest_in_workerpool1)
{
	json_t *j = render_json("run", "a3-megagpu-8g",
				(const char *const[]){
					"--nodes", "3", "--spot", "--env",
					"SGD_STEPS=5", NULL });
	json_t *pools = json_object_get(json_object_get(j, "jobSpec"),
					"workerPoolSpecs");
	char out[HARNESS_PATH + 64];

	cr_assert_eq(json_array_size(pools), 2);
	EXPECT_AT(j, "displayName", "run");
	EXPECT_AT(j, "labels.slicectl_run", "run");
	EXPECT_AT(j, "jobSpec.workerPoolSpecs.0.replicaCount", "1");
	EXPECT_AT(j, "jobSpec.workerPoolSpecs.1.replicaCount", "2");
	EXPECT_AT(j, "jobSpec.workerPoolSpecs.0.machineSpec.machineType",
		  "a3-megagpu-8g");
	EXPECT_AT(j, "jobSpec.workerPoolSpecs.1.machineSpec.acceleratorType",
		  "NVIDIA_H100_MEGA_80GB");
	EXPECT_AT(j, "jobSpec.workerPoolSpecs.1.machineSpec.acceleratorCount",
		  "8");
	EXPECT_AT(j, "jobSpec.workerPoolSpecs.0.containerSpec.imageUri",
		  "python:3.12");
	EXPECT_AT(j, "jobSpec.workerPoolSpecs.0.containerSpec.command.0",
		  "/bin/sh");
	cr_expect(strstr(at(j, "jobSpec.workerPoolSpecs.0.containerSpec."
			       "command.2"), "--vertex"));
	/* The job's --env last, after the supervisor's source. */
	EXPECT_AT(j, "jobSpec.workerPoolSpecs.1.containerSpec.env.3.name",
		  "SGD_STEPS");
	EXPECT_AT(j, "jobSpec.scheduling.strategy", "SPOT");
	EXPECT_AT(j, "jobSpec.scheduling.restartJobOnWorkerRestart", "true");
	snprintf(out, sizeof(out), "%s/run/vertex", bucket);
	EXPECT_AT(j, "jobSpec.baseOutputDirectory.outputUriPrefix", out);
	json_decref(j);

	j = render_json("run", "a2-highgpu-1g",
			(const char *const[]){ "--nodes", "1", NULL });
	cr_expect_eq(json_array_size(json_object_get(
			     json_object_get(j, "jobSpec"), "workerPoolSpecs")),
		     1, "one node is the primary alone");
	json_decref(j);
}

Test(vertex_render, tpu_slices_and_capacity)
{
	json_t *j = render_json("run", "v6e-16", (const char *const[]){
		"--flex-start", "--max-wait", "1800", NULL });

	EXPECT_AT(j, "jobSpec.workerPoolSpecs.0.machineSpec.machineType",
		  "ct6e-standard-4t");
	EXPECT_AT(j, "jobSpec.workerPoolSpecs.0.machineSpec.tpuTopology",
		  "4x4");
	EXPECT_AT(j, "jobSpec.workerPoolSpecs.0.replicaCount", "1");
	cr_expect_null(at(j, "jobSpec.workerPoolSpecs.1.replicaCount"));
	EXPECT_AT(j, "jobSpec.scheduling.strategy", "FLEX_START");
	EXPECT_AT(j, "jobSpec.scheduling.maxWaitDuration", "1800s");
	json_decref(j);

	j = render_json("run", "v5litepod-8", (const char *const[]){
		"--reservation", "projects/p/zones/z/reservations/r",
		"--service-account", "sa@p.iam.gserviceaccount.com",
		"--network", "projects/9/global/networks/n", NULL });
	EXPECT_AT(j, "jobSpec.workerPoolSpecs.0.machineSpec."
		     "reservationAffinity.reservationAffinityType",
		  "SPECIFIC_RESERVATION");
	EXPECT_AT(j, "jobSpec.workerPoolSpecs.0.machineSpec."
		     "reservationAffinity.values.0",
		  "projects/p/zones/z/reservations/r");
	EXPECT_AT(j, "jobSpec.serviceAccount", "sa@p.iam.gserviceaccount.com");
	EXPECT_AT(j, "jobSpec.network", "projects/9/global/networks/n");
	cr_expect_null(at(j, "jobSpec.scheduling.strategy"));
	json_decref(j);
}

static void refused(const char *why, const char *name, const char *type,
		    const char *const *extra)
{
	struct run_result r = { 0 };

	render(&r, name, type, extra);
	cr_expect_eq(r.status, 2, "%s %s: %d\n%s", name, type, r.status, r.err);
	cr_expect(strstr(r.err, why), "expected '%s' in:\n%s", why, r.err);
	cr_expect_eq(r.out_len, 0u, "%s", r.out);
	run_result_release(&r);
}

Test(vertex_render, refused_before_anything_is_touched)
{
	struct run_result r = { 0 };

	refused("cannot label a CustomJob", "Big", "v6e-16", NULL);
	refused("--nodes is required with GPU machine type", "r",
		"a3-highgpu-8g", NULL);
	refused("--nodes is for GPU machine types", "r", "v6e-16",
		(const char *const[]){ "--nodes", "2", NULL });
	refused("is not a TPU type slicectl knows", "r", "h100", NULL);
	refused("Vertex AI has no machine type for TPU V3", "r", "v3-8", NULL);
	refused("a Vertex AI custom job is one group", "r", "v6e-16",
		(const char *const[]){ "--num-slices", "2", NULL });
	refused("choose one of --spot, --flex-start and --reservation", "r",
		"v6e-16", (const char *const[]){ "--spot", "--flex-start",
						  NULL });
	refused("--max-wait goes with --flex-start", "r", "v6e-16",
		(const char *const[]){ "--max-wait", "60", NULL });
	refused("not a reservation's name", "r", "v6e-16",
		(const char *const[]){ "--reservation", "res1", NULL });
	refused("not a VPC network's name", "r", "v6e-16",
		(const char *const[]){ "--network", "default", NULL });
	refused("not a service account's email", "r", "v6e-16",
		(const char *const[]){ "--service-account", "trainer", NULL });
	refused("queued-resource tiers", "r", "v6e-16",
		(const char *const[]){ "--reserved", NULL });
	refused("are for --target gke", "r", "v6e-16",
		(const char *const[]){ "--queue", "q", NULL });
	refused("--cordon-bad-hosts and --max-run-duration are for --target "
		"gke", "r", "v6e-16",
		(const char *const[]){ "--cordon-bad-hosts", NULL });
	refused("are for --target slurm", "r", "v6e-16",
		(const char *const[]){ "--partition", "p", NULL });
	refused("not for --target vertex", "r", "v6e-16",
		(const char *const[]){ "--zone", "us-central1-a", NULL });
	refused("--image is required", "r", "v6e-16",
		(const char *const[]){ "--image", "", NULL });

	/* Vertex's flags without --target vertex. */
	cr_assert_eq(run_slicectl(&r, (const char *const[]){
		"job", "--name", "r", "--bucket", bucket, "--accelerator-type",
		"v6e-16", "--command", "true", "--region", "us-central1",
		NULL }, NULL), 0);
	cr_expect_eq(r.status, 2);
	cr_expect(strstr(r.err, "are for --target vertex"), "%s", r.err);
	run_result_release(&r);
	cr_assert_eq(sh("[ -z \"$(ls -A '%s/bucket')\" ]", dir), 0);
}
