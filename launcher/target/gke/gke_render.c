/*
 * gke_render.c: the JobSet of a run (see gke.h and docs/DESIGN.md "The
 * rendered JobSet"). Every field is set explicitly where a webhook would
 * otherwise default it to something the supervisor does not expect
 * (restartPolicy, completion mode), and nothing is set that Kueue owns
 * (spec.suspend).
 */
#include "launcher/target/gke/gke.h"

#include <stdio.h>
#include <string.h>

#define LABEL_MAX 63
/* "-slice-" + "-" + the 5 random characters JobSet's pods get. */
#define POD_SUFFIX_FIXED (sizeof("-slice-") - 1 + 1 + 6)
#define SUPERVISOR_PATH "/slicectl/slice-supervisor"
/* Exit status of slice-supervisor --pod when the run failed for good:
 * the podFailurePolicy turns it into FailJob, the JobSet rule into a
 * failed JobSet, instead of a restart. Every other failure, a failed
 * preflight's 4 among them, fails the Job (backoffLimit 0) and the
 * JobSet restarts the set, within maxRestarts. */
#define EXIT_RUN_FAILED 3

static bool lower_alnum(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

bool gke_dns_label(const char *s, bool dns1035)
{
	size_t n = s ? strlen(s) : 0;

	if (!n || n > LABEL_MAX || !lower_alnum(s[0]) ||
	    !lower_alnum(s[n - 1]) || (dns1035 && !(s[0] >= 'a' && s[0] <= 'z')))
		return false;
	for (size_t i = 0; i < n; i++)
		if (!lower_alnum(s[i]) && s[i] != '-')
			return false;
	return true;
}

/* A label value: empty, or <= 63 of [A-Za-z0-9_.-] starting and ending
 * alphanumeric. */
static bool label_value(const char *s)
{
	size_t n = strlen(s);

	if (n > LABEL_MAX)
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = s[i];
		bool alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
			     (c >= '0' && c <= '9');

		if (!alnum && ((i == 0 || i == n - 1) ||
			       (c != '-' && c != '_' && c != '.')))
			return false;
	}
	return true;
}

/* A DNS-1123 subdomain: dot-separated labels, <= 253. */
static bool dns_subdomain(const char *s)
{
	char part[LABEL_MAX + 2];
	const char *p = s;
	size_t n;

	if (!*s || strlen(s) > 253)
		return false;
	for (;;) {
		n = strcspn(p, ".");
		if (!n || n > LABEL_MAX)
			return false;
		memcpy(part, p, n);
		part[n] = '\0';
		if (!gke_dns_label(part, false))
			return false;
		if (!p[n])
			return true;
		p += n + 1;
	}
}

static unsigned digits(unsigned v)
{
	unsigned d = 1;

	while (v >= 10) {
		v /= 10;
		d++;
	}
	return d;
}

int gke_check(const struct gke_spec *s, struct err *e)
{
	size_t longest;

	if (!gke_dns_label(s->run, true))
		return err_set(e, COMMON_EUSAGE,
			       "--name '%s' cannot name a JobSet: lowercase "
			       "letters, digits and '-', starting with a "
			       "letter, ending with a letter or digit",
			       s->run);
	longest = strlen(s->run) + POD_SUFFIX_FIXED +
		  digits(s->num_slices - 1) + digits(s->acc.workers - 1);
	if (longest > LABEL_MAX)
		return err_set(e, COMMON_EUSAGE,
			       "--name '%s' is too long for GKE: JobSet names "
			       "its pods %s-slice-%u-%u-xxxxx, %zu characters, "
			       "over Kubernetes' %d; use at most %zu",
			       s->run, s->run, s->num_slices - 1,
			       s->acc.workers - 1, longest, LABEL_MAX,
			       strlen(s->run) - (longest - LABEL_MAX));
	if (!s->namespace || !gke_dns_label(s->namespace, false))
		return err_set(e, COMMON_EUSAGE,
			       "--namespace '%s' is not a Kubernetes namespace "
			       "name (lowercase letters, digits and '-', at "
			       "most 63)", s->namespace ? s->namespace : "");
	if (!s->queue || !*s->queue)
		return err_set(e, COMMON_EUSAGE,
			       "--queue is required: the Kueue LocalQueue of "
			       "namespace %s that admits the JobSet (kubectl "
			       "get localqueues -n %s)", s->namespace,
			       s->namespace);
	if (!label_value(s->queue) || !gke_dns_label(s->queue, false))
		return err_set(e, COMMON_EUSAGE,
			       "--queue '%s' is not a LocalQueue name (a DNS "
			       "label: lowercase letters, digits and '-')",
			       s->queue);
	if (s->priority_class && !dns_subdomain(s->priority_class))
		return err_set(e, COMMON_EUSAGE,
			       "--priority-class '%s' is not a PriorityClass "
			       "name (a DNS subdomain)", s->priority_class);
	if (s->service_account && !dns_subdomain(s->service_account))
		return err_set(e, COMMON_EUSAGE,
			       "--service-account '%s' is not a Kubernetes "
			       "service account name (a DNS subdomain)",
			       s->service_account);
	if (!s->image || !*s->image || strpbrk(s->image, " \t\n"))
		return err_set(e, COMMON_EUSAGE,
			       "--image is required: the trainer's container "
			       "image (it needs glibc and /bin/sh; the "
			       "supervisor is added to it at run time)");
	if (!s->acc.gke_accelerator)
		return err_set(e, COMMON_EUSAGE,
			       "GKE has no TPU node pools of the %s family; "
			       "on GKE use v4, v5litepod, v5p, v6e or tpu7x "
			       "types", s->acc.family);
	if (s->acc.gpus_per_host && s->num_slices != 1)
		return err_set(e, COMMON_EUSAGE,
			       "--num-slices is for TPU slices: a GPU job is "
			       "one group of --nodes nodes (give --nodes %u)",
			       s->num_slices * s->acc.workers);
	if (s->spot + s->flex_start + (s->reservation != NULL) > 1)
		return err_set(e, COMMON_EUSAGE,
			       "choose one of --spot, --flex-start and "
			       "--reservation");
	if (s->flex_start && !strcmp(s->acc.family, "V4"))
		return err_set(e, COMMON_EUSAGE,
			       "GKE's flex-start has no TPU v4 (v5e, v5p, v6e "
			       "and TPU7x only)");
	if (s->queued_provisioning && !s->flex_start)
		return err_set(e, COMMON_EUSAGE,
			       "--queued-provisioning goes with --flex-start");
	if (s->max_run_s && !s->queued_provisioning)
		return err_set(e, COMMON_EUSAGE,
			       "--max-run-duration goes with "
			       "--queued-provisioning");
	if (s->reservation && !gke_dns_label(s->reservation, true))
		return err_set(e, COMMON_EUSAGE,
			       "--reservation '%s' is not a reservation name",
			       s->reservation);
	return 0;
}

static json_t *field_env(const char *name, const char *path)
{
	return json_pack("{s:s, s:{s:{s:s}}}", "name", name, "valueFrom",
			 "fieldRef", "fieldPath", path);
}

json_t *gke_value_env(const char *name, const char *value)
{
	return json_pack("{s:s, s:s}", "name", name, "value", value);
}

#define LABEL_REF(k) "metadata.labels['" k "']"

/* What a TPU pod's runtime reads to join the slices over the data-center
 * network (libtpu's multislice). */
static int megascale_env(const struct gke_spec *s, const char *coordinator,
			 json_t *env)
{
	char slices[16];
	json_t *more;
	int rc;

	snprintf(slices, sizeof(slices), "%u", s->num_slices);
	more = json_pack("[o, o, o, o]",
			       gke_value_env("MEGASCALE_COORDINATOR_ADDRESS",
					     coordinator),
			       gke_value_env("MEGASCALE_NUM_SLICES", slices),
			       field_env("MEGASCALE_SLICE_ID",
					 LABEL_REF("jobset.sigs.k8s.io/"
						   "job-index")),
			       gke_value_env("MEGASCALE_PORT", "8080"));
	rc = more ? json_array_extend(env, more) : -1;
	json_decref(more);
	return rc;
}

static json_t *worker_env(const struct gke_spec *s)
{
	char coordinator[128];
	json_t *env;

	/* The first pod's name under the JobSet's headless service. */
	snprintf(coordinator, sizeof(coordinator), "%s-slice-0-0.%s", s->run,
		 s->run);
	env = json_pack(
		"[o, o, o, o, o, o]",
		field_env("SLICE_POD_SLICE",
			  LABEL_REF("jobset.sigs.k8s.io/job-index")),
		field_env("SLICE_POD_WORKER",
			  LABEL_REF("batch.kubernetes.io/job-completion-index")),
		field_env("SLICE_POD_RESTART_ATTEMPT",
			  LABEL_REF("jobset.sigs.k8s.io/restart-attempt")),
		field_env("SLICE_POD_NAME", "metadata.name"),
		field_env("SLICE_POD_NODE", "spec.nodeName"),
		gke_value_env("SLICE_POD_COORDINATOR", coordinator));
	/* The supervisor cordons SLICE_POD_NODE when its preflight fails,
	 * and when its bump quarantines the node. */
	if (env && ((s->cordon && json_array_append_new(env,
			gke_value_env("SLICE_PREFLIGHT_CORDON", "1"))) ||
		    (s->cordon_bad_hosts && json_array_append_new(env,
			gke_value_env("SLICE_CORDON_BAD_HOSTS", "1"))))) {
		json_decref(env);
		return NULL;
	}
	if (env && !s->acc.gpus_per_host && megascale_env(s, coordinator, env)) {
		json_decref(env);
		return NULL;
	}
	return env;
}

/* The job's --env, last, so that it overrides what came before. */
static int user_env(const struct gke_spec *s, json_t *worker)
{
	json_t *env = json_object_get(worker, "env");

	for (size_t i = 0; i < s->env->n; i++) {
		const char *kv = s->env->v[i], *eq = strchr(kv, '=');
		char name[256];

		if (!eq || (size_t)(eq - kv) >= sizeof(name))
			return -1;
		memcpy(name, kv, (size_t)(eq - kv));
		name[eq - kv] = '\0';
		if (json_array_append_new(env, gke_value_env(name, eq + 1)))
			return -1;
	}
	return 0;
}

/* The init container: copies the run's supervisor into the shared
 * emptyDir and checks it is the one job_prepare uploaded. */
static json_t *fetch_container(const struct gke_spec *s)
{
	static const char script[] =
		"set -eu\n"
		"$SLICECTL_COPY \"$SLICECTL_SUPERVISOR_SRC\" " SUPERVISOR_PATH
		".part\n"
		"echo \"$SLICECTL_SUPERVISOR_SHA256  " SUPERVISOR_PATH ".part\" "
		"| sha256sum -c -\n"
		"chmod 0755 " SUPERVISOR_PATH ".part\n"
		"mv " SUPERVISOR_PATH ".part " SUPERVISOR_PATH "\n";
	bool gs = !strncmp(s->run_url, "gs://", 5);
	char src[2304];

	/* file:// buckets are a shared filesystem the pod sees at the same
	 * path (tests, NFS); gs:// ones go through gcloud. */
	snprintf(src, sizeof(src), "%s/supervisor/slice-supervisor-%s",
		 gs ? s->run_url : s->run_url + strlen("file://"),
		 s->supervisor_sha256);
	return json_pack(
		"{s:s, s:s, s:[s, s, s], s:[o, o, o], s:[{s:s, s:s}]}",
		"name", "fetch-supervisor", "image",
		gs ? GKE_FETCH_IMAGE : s->image, "command", "/bin/sh", "-c",
		script, "env",
		gke_value_env("SLICECTL_COPY", gs ? "gcloud storage cp" : "cp"),
		gke_value_env("SLICECTL_SUPERVISOR_SRC", src),
		gke_value_env("SLICECTL_SUPERVISOR_SHA256",
			      s->supervisor_sha256),
		"volumeMounts", "name", "slicectl", "mountPath", "/slicectl");
}

/* The trainer's container: TPU pods take the chips, the TPU runtime's
 * ports and privileged access to /dev/accel*; GPU pods take the GPUs,
 * which the device plugin hands them without privilege. */
static json_t *worker_container(const struct gke_spec *s)
{
	const char *resource = s->acc.gpus_per_host ? "nvidia.com/gpu"
						    : "google.com/tpu";
	char chips[16];
	json_t *env = worker_env(s), *c;

	snprintf(chips, sizeof(chips), "%u", s->acc.chips_per_host);
	if (!env)
		return NULL;
	c = json_pack("{s:s, s:s, s:[s, s, s, s, s, s, s], s:o, "
		      "s:{s:{s:s}, s:{s:s}}, s:[{s:s, s:s}]}",
		      "name", "worker", "image", s->image, "command",
		      SUPERVISOR_PATH, "run", "--job", s->run_url, "--pod",
		      "--state-dir", "/slicectl/state", "env", env, "resources",
		      "limits", resource, chips, "requests", resource, chips,
		      "volumeMounts", "name", "slicectl", "mountPath",
		      "/slicectl");
	if (c && !s->acc.gpus_per_host &&
	    (json_object_set_new(c, "ports",
				 json_pack("[{s:i}, {s:i}]", "containerPort",
					   8471, "containerPort", 8080)) ||
	     json_object_set_new(c, "securityContext",
				 json_pack("{s:b}", "privileged", 1)))) {
		json_decref(c);
		return NULL;
	}
	return c;
}

static int capacity(const struct gke_spec *s, json_t *selector,
		    json_t *tolerations, json_t *annotations)
{
	int bad = 0;

	if (s->spot)
		bad |= json_object_set_new(selector, "cloud.google.com/gke-spot",
					   json_string("true"));
	if (s->flex_start)
		bad |= json_object_set_new(selector,
					   "cloud.google.com/gke-flex-start",
					   json_string("true"));
	if (s->queued_provisioning) {
		char secs[16];

		/* Queued-provisioning pools carry this label and a NoSchedule
		 * taint; Kueue's ProvisioningRequest reads its parameters from
		 * provreq.kueue.x-k8s.io/ annotations on the workload. */
		snprintf(secs, sizeof(secs), "%u",
			 s->max_run_s ? s->max_run_s : GKE_DEFAULT_MAX_RUN_S);
		bad |= json_object_set_new(selector, "cloud.google.com/gke-queued",
					   json_string("true"));
		bad |= json_array_append_new(
			tolerations,
			json_pack("{s:s, s:s, s:s}", "key",
				  "cloud.google.com/gke-queued", "operator",
				  "Exists", "effect", "NoSchedule"));
		bad |= json_object_set_new(
			annotations,
			"provreq.kueue.x-k8s.io/maxRunDurationSeconds",
			json_string(secs));
	}
	if (s->reservation) {
		bad |= json_object_set_new(selector,
					   "cloud.google.com/reservation-name",
					   json_string(s->reservation));
		bad |= json_object_set_new(
			selector, "cloud.google.com/reservation-affinity",
			json_string("specific"));
	}
	return bad;
}

/* The node selector and toleration of the accelerator's node pools. */
static int accelerator_nodes(const struct gke_spec *s, json_t **selector,
			     json_t **tolerations)
{
	if (s->acc.gpus_per_host) {
		*selector = json_pack("{s:s}", "cloud.google.com/gke-accelerator",
				      s->acc.gke_accelerator);
		*tolerations = json_pack("[{s:s, s:s, s:s}]", "key",
					 "nvidia.com/gpu", "operator", "Exists",
					 "effect", "NoSchedule");
	} else {
		*selector = json_pack("{s:s, s:s}",
				      "cloud.google.com/gke-tpu-accelerator",
				      s->acc.gke_accelerator,
				      "cloud.google.com/gke-tpu-topology",
				      s->acc.topology);
		*tolerations = json_pack("[{s:s, s:s}]", "key",
					 "google.com/tpu", "operator", "Exists");
	}
	if (*selector && *tolerations)
		return 0;
	json_decref(*selector);
	json_decref(*tolerations);
	return -1;
}

/* The pod template's spec; a GPU family's annotations go to
 * pod_annotations. */
static json_t *pod_spec(const struct gke_spec *s, json_t *annotations,
			json_t *pod_annotations)
{
	bool host_net = !s->acc.gpus_per_host ||
			gke_gpu_host_network(s->acc.net);
	json_t *selector, *tolerations, *pod, *worker = worker_container(s);
	int bad;

	if (!worker || accelerator_nodes(s, &selector, &tolerations)) {
		json_decref(worker);
		return NULL;
	}
	bad = capacity(s, selector, tolerations, annotations);
	pod = json_pack("{s:s, s:I, s:o, s:o, s:b, s:s, s:[o], s:[O], "
			"s:[{s:s, s:{}}]}",
			"restartPolicy", "Never", "terminationGracePeriodSeconds",
			(json_int_t)s->grace_s + 30, "nodeSelector", selector,
			"tolerations", tolerations, "hostNetwork", host_net,
			"dnsPolicy",
			host_net ? "ClusterFirstWithHostNet" : "ClusterFirst",
			"initContainers", fetch_container(s), "containers",
			worker, "volumes", "name", "slicectl", "emptyDir");
	if (pod && s->acc.gpus_per_host)
		bad |= gke_gpu_plumb(s, pod_annotations, pod, worker);
	bad |= user_env(s, worker);
	json_decref(worker);
	if (pod && s->priority_class)
		bad |= json_object_set_new(pod, "priorityClassName",
					   json_string(s->priority_class));
	if (pod && s->service_account)
		bad |= json_object_set_new(pod, "serviceAccountName",
					   json_string(s->service_account));
	if (bad) {
		json_decref(pod);
		return NULL;
	}
	return pod;
}

/* The pod template: its metadata only when a GPU family annotates it. */
static json_t *pod_template(const struct gke_spec *s, json_t *annotations)
{
	json_t *pod_annotations = json_object(), *spec, *t;

	spec = pod_annotations ? pod_spec(s, annotations, pod_annotations)
			       : NULL;
	if (!spec) {
		json_decref(pod_annotations);
		return NULL;
	}
	if (!json_object_size(pod_annotations)) {
		json_decref(pod_annotations);
		return json_pack("{s:o}", "spec", spec);
	}
	t = json_pack("{s:{s:o}, s:o}", "metadata", "annotations",
		      pod_annotations, "spec", spec);
	return t;
}

int gke_render(const struct gke_spec *s, json_t **out, struct err *e)
{
	json_t *annotations, *pod = NULL, *js = NULL;

	*out = NULL;
	/* A TPU slice is a node pool of its own; a GPU job's nodes are some
	 * of a pool that other jobs may share. */
	annotations = s->acc.gpus_per_host
			      ? json_object()
			      : json_pack("{s:s}",
					  "alpha.jobset.sigs.k8s.io/"
					  "exclusive-topology",
					  "cloud.google.com/gke-nodepool");
	if (annotations)
		pod = pod_template(s, annotations);
	if (pod)
		js = json_pack(
		"{s:s, s:s, s:{s:s, s:s, s:{s:s, s:s, s:s}}, "
		"s:{s:{s:I, s:[{s:s, s:s, s:[s]}]}, s:{s:b}, "
		"s:[{s:s, s:I, s:{s:{s:I, s:I, s:s, s:i, "
		"s:{s:[{s:s, s:{s:s, s:s, s:[i]}}]}, s:o}}}]}}",
		"apiVersion", "jobset.x-k8s.io/v1alpha2", "kind", "JobSet",
		"metadata", "name", s->run, "namespace", s->namespace, "labels",
		"kueue.x-k8s.io/queue-name", s->queue,
		"app.kubernetes.io/managed-by", "slicectl", "slicectl.dev/run",
		s->run, "spec", "failurePolicy",
		"maxRestarts", (json_int_t)s->jobset_restarts, "rules", "name",
		"runFailed", "action", "FailJobSet", "onJobFailureReasons",
		"PodFailurePolicy", "network", "enableDNSHostnames", 1,
		"replicatedJobs", "name", "slice", "replicas",
		(json_int_t)s->num_slices, "template", "spec", "parallelism",
		(json_int_t)s->acc.workers, "completions",
		(json_int_t)s->acc.workers, "completionMode", "Indexed",
		"backoffLimit", 0, "podFailurePolicy", "rules", "action",
		"FailJob", "onExitCodes", "containerName", "worker", "operator",
		"In", "values", EXIT_RUN_FAILED, "template", pod);
	if (js && json_object_size(annotations) &&
	    json_object_set(json_object_get(js, "metadata"), "annotations",
			    annotations)) {
		json_decref(js);
		js = NULL;
	}
	json_decref(annotations);
	if (!js)
		return err_set(e, COMMON_ENOMEM, "out of memory");
	*out = js;
	return 0;
}
