/*
 * vertex_render.c: the CustomJob of a run (see vertex.h and
 * docs/DESIGN.md "The Vertex CustomJob"). workerpool0 is the primary
 * alone, the other workers are workerpool1, each replica a container
 * whose command fetches the run's supervisor from the bucket (checked
 * against its SHA-256, as a GKE pod's init container does) and runs it
 * with --vertex, which reads the replica's place from CLUSTER_SPEC.
 */
#include "launcher/target/vertex/vertex.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#define LABEL_MAX 63

/*
 * sh, so that any image with /bin/sh runs it. gs:// goes through gcloud
 * when the image has it, else the JSON API with the metadata server's
 * token (Vertex's replicas have one: the job's service account); file://
 * buckets are a filesystem the replica sees at the same path (tests,
 * NFS). Each start gets its own directory: a container that Vertex
 * restarts starts afresh, as a pod does.
 */
static const char fetch_script[] =
	"set -eu\n"
	"d=$(mktemp -d \"${TMPDIR:-/tmp}/slicectl.XXXXXX\")\n"
	"sup=\"$d/slice-supervisor\"\n"
	"case \"$SLICECTL_SUPERVISOR_SRC\" in\n"
	"gs://*)\n"
	"  if command -v gcloud >/dev/null 2>&1; then\n"
	"    gcloud storage cp \"$SLICECTL_SUPERVISOR_SRC\" \"$sup.part\"\n"
	"  else\n"
	"    md=http://metadata.google.internal/computeMetadata/v1\n"
	"    tok=$(curl -sf -H 'Metadata-Flavor: Google' "
	"\"$md/instance/service-accounts/default/token\" | "
	"sed 's/.*\"access_token\": *\"\\([^\"]*\\)\".*/\\1/')\n"
	"    o=${SLICECTL_SUPERVISOR_SRC#gs://}\n"
	"    curl -sf -H \"Authorization: Bearer $tok\" -o \"$sup.part\" "
	"\"https://storage.googleapis.com/storage/v1/b/${o%%/*}/o/"
	"$(printf %s \"${o#*/}\" | sed 's|/|%2F|g')?alt=media\"\n"
	"  fi ;;\n"
	"*) cp \"${SLICECTL_SUPERVISOR_SRC#file://}\" \"$sup.part\" ;;\n"
	"esac\n"
	"echo \"$SLICECTL_SUPERVISOR_SHA256  $sup.part\" | sha256sum -c - "
	">/dev/null\n"
	"chmod 0755 \"$sup.part\"\n"
	"mv \"$sup.part\" \"$sup\"\n"
	"exec \"$sup\" run --job \"$SLICECTL_RUN_URL\" --vertex --state-dir "
	"\"$d/state\"\n";

/* A label value: <= 63 of lowercase letters, digits, '_' and '-'. */
static bool label_value(const char *s)
{
	size_t n = strlen(s);

	if (!n || n > LABEL_MAX)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!islower((unsigned char)s[i]) &&
		    !isdigit((unsigned char)s[i]) && s[i] != '_' && s[i] != '-')
			return false;
	return true;
}

/* Whether s is "prefix" followed by segments as pattern says: each '*'
 * a non-empty segment without '/'. */
static bool resource_name(const char *s, const char *pattern)
{
	while (*pattern) {
		if (*pattern == '*') {
			size_t n = strcspn(s, "/");

			if (!n)
				return false;
			s += n;
			pattern++;
		} else if (*s++ != *pattern++) {
			return false;
		}
	}
	return !*s;
}

int vertex_check(const struct vertex_spec *s, struct err *e)
{
	if (!label_value(s->run))
		return err_set(e, COMMON_EUSAGE,
			       "--name '%s' cannot label a CustomJob: at most "
			       "63 lowercase letters, digits, '_' and '-'",
			       s->run);
	if (!s->image || !*s->image || strpbrk(s->image, " \t\n"))
		return err_set(e, COMMON_EUSAGE,
			       "--image is required: the trainer's container "
			       "image (it needs glibc and /bin/sh; the "
			       "supervisor is fetched into it at run time)");
	if (!s->acc.gpus_per_host && !s->acc.gke_machine_type)
		return err_set(e, COMMON_EUSAGE,
			       "Vertex AI has no machine type for TPU %s "
			       "slices of %u chip%s a host; use v5litepod, "
			       "v5p or v6e types, or a GPU machine type",
			       s->acc.family, s->acc.chips_per_host,
			       s->acc.chips_per_host == 1 ? "" : "s");
	if (s->num_slices != 1)
		return err_set(e, COMMON_EUSAGE,
			       "--num-slices: a Vertex AI custom job is one "
			       "group (one TPU slice, or --nodes GPU "
			       "machines)");
	if (s->spot + s->flex_start + (s->reservation != NULL) > 1)
		return err_set(e, COMMON_EUSAGE,
			       "choose one of --spot, --flex-start and "
			       "--reservation");
	if (s->max_wait_s && !s->flex_start)
		return err_set(e, COMMON_EUSAGE,
			       "--max-wait goes with --flex-start (how long "
			       "Vertex AI may wait for the machines)");
	if (s->reservation &&
	    !resource_name(s->reservation, "projects/*/zones/*/reservations/*"))
		return err_set(e, COMMON_EUSAGE,
			       "--reservation '%s' is not a reservation's "
			       "name: give projects/PROJECT/zones/ZONE/"
			       "reservations/NAME", s->reservation);
	if (s->network &&
	    !resource_name(s->network, "projects/*/global/networks/*"))
		return err_set(e, COMMON_EUSAGE,
			       "--network '%s' is not a VPC network's name: "
			       "give projects/PROJECT_NUMBER/global/networks/"
			       "NAME (peered with Vertex AI)", s->network);
	if (s->service_account &&
	    (!strchr(s->service_account, '@') ||
	     strpbrk(s->service_account, " /")))
		return err_set(e, COMMON_EUSAGE,
			       "--service-account '%s' is not a service "
			       "account's email (NAME@PROJECT.iam."
			       "gserviceaccount.com)", s->service_account);
	return 0;
}

/* The GPU's enum in MachineSpec.acceleratorType: its GKE label in
 * capitals, '-' as '_' ("nvidia-h100-mega-80gb": NVIDIA_H100_MEGA_80GB);
 * the schema test holds every one of the table's to the enum. */
static void gpu_enum(const char *label, char *out, size_t len)
{
	size_t i = 0;

	for (; label[i] && i + 1 < len; i++)
		out[i] = label[i] == '-' ? '_'
					 : (char)toupper((unsigned char)label[i]);
	out[i] = '\0';
}

static json_t *machine_spec(const struct vertex_spec *s)
{
	json_t *m;
	char acc[64];

	if (s->acc.gpus_per_host) {
		gpu_enum(s->acc.gke_accelerator, acc, sizeof(acc));
		m = json_pack("{s:s, s:s, s:I}", "machineType",
			      s->acc.gke_machine_type, "acceleratorType", acc,
			      "acceleratorCount",
			      (json_int_t)s->acc.gpus_per_host);
	} else {
		m = json_pack("{s:s, s:s}", "machineType",
			      s->acc.gke_machine_type, "tpuTopology",
			      s->acc.topology);
	}
	if (m && s->reservation &&
	    json_object_set_new(m, "reservationAffinity",
				json_pack("{s:s, s:s, s:[s]}",
					  "reservationAffinityType",
					  "SPECIFIC_RESERVATION", "key",
					  "compute.googleapis.com/"
					  "reservation-name",
					  "values", s->reservation))) {
		json_decref(m);
		return NULL;
	}
	return m;
}

static json_t *env_var(const char *name, const char *value)
{
	return json_pack("{s:s, s:s}", "name", name, "value", value);
}

/* The supervisor's source and digest, then the job's --env (last, so
 * that it overrides). */
static json_t *container_env(const struct vertex_spec *s)
{
	char src[2304];
	json_t *env;

	snprintf(src, sizeof(src), "%s/supervisor/slice-supervisor-%s",
		 s->run_url, s->supervisor_sha256);
	env = json_pack("[o, o, o]", env_var("SLICECTL_SUPERVISOR_SRC", src),
			env_var("SLICECTL_SUPERVISOR_SHA256",
				s->supervisor_sha256),
			env_var("SLICECTL_RUN_URL", s->run_url));
	for (size_t i = 0; env && i < s->env->n; i++) {
		const char *kv = s->env->v[i], *eq = strchr(kv, '=');
		char name[256];

		if (!eq || (size_t)(eq - kv) >= sizeof(name) ||
		    (memcpy(name, kv, (size_t)(eq - kv)), name[eq - kv] = '\0',
		     json_array_append_new(env, env_var(name, eq + 1)))) {
			json_decref(env);
			return NULL;
		}
	}
	return env;
}

static json_t *pool(const struct vertex_spec *s, unsigned replicas)
{
	char count[16];

	/* replicaCount is an int64, which the JSON mapping writes as a
	 * string. */
	snprintf(count, sizeof(count), "%u", replicas);
	return json_pack("{s:o, s:s, s:{s:s, s:[s, s, s], s:o}}",
			 "machineSpec", machine_spec(s), "replicaCount", count,
			 "containerSpec", "imageUri", s->image, "command",
			 "/bin/sh", "-c", fetch_script, "env",
			 container_env(s));
}

static json_t *scheduling(const struct vertex_spec *s)
{
	/* A replica that Vertex restarts (its VM lost or under maintenance)
	 * comes back with a new address: every replica must start again
	 * to read it from CLUSTER_SPEC, and the supervisors then restart
	 * the group from the newest committed step. */
	json_t *sc = json_pack("{s:b}", "restartJobOnWorkerRestart", 1);
	char wait[32];
	int bad = !sc;

	if (!bad && (s->spot || s->flex_start))
		bad = json_object_set_new(sc, "strategy",
					  json_string(s->spot ? "SPOT"
							      : "FLEX_START"));
	if (!bad && s->max_wait_s) {
		snprintf(wait, sizeof(wait), "%us", s->max_wait_s);
		bad = json_object_set_new(sc, "maxWaitDuration",
					  json_string(wait));
	}
	if (bad) {
		json_decref(sc);
		return NULL;
	}
	return sc;
}

int vertex_render(const struct vertex_spec *s, json_t **out, struct err *e)
{
	/* A TPU slice is one replica whose hosts all run the container;
	 * GPU machines are one replica each. */
	unsigned workers = s->acc.gpus_per_host ? s->acc.workers : 1;
	json_t *pools = json_array(), *spec = NULL, *job = NULL;
	char output[2304];
	int bad = !pools;

	*out = NULL;
	bad = bad || json_array_append_new(pools, pool(s, 1));
	if (!bad && workers > 1)
		bad = json_array_append_new(pools, pool(s, workers - 1));
	snprintf(output, sizeof(output), "%s/vertex", s->run_url);
	if (!bad)
		spec = json_pack("{s:O, s:o, s:{s:s}}", "workerPoolSpecs",
				 pools, "scheduling", scheduling(s),
				 "baseOutputDirectory", "outputUriPrefix",
				 output);
	bad = !spec;
	if (!bad && s->service_account)
		bad = json_object_set_new(spec, "serviceAccount",
					  json_string(s->service_account));
	if (!bad && s->network)
		bad = json_object_set_new(spec, "network",
					  json_string(s->network));
	if (!bad)
		job = json_pack("{s:s, s:{s:s, s:s}, s:O}", "displayName",
				s->run, "labels", VERTEX_RUN_LABEL, s->run,
				"managed-by", "slicectl", "jobSpec", spec);
	json_decref(pools);
	json_decref(spec);
	if (!job)
		return err_set(e, COMMON_ENOMEM, "out of memory");
	*out = job;
	return 0;
}
