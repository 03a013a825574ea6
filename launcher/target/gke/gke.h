/*
 * gke.h (private to launcher/): the GKE target. A run there is one JobSet
 * (jobset.x-k8s.io/v1alpha2) admitted by Kueue: gke_render.c builds it
 * from the job and checks what the API server's webhooks would refuse,
 * gke_gpu.c adds a GPU family's plumbing to its pods,
 * gke_yaml.c prints it for `kubectl apply -f`, gke_run.c creates it,
 * follows its admission, and serves status, delete and reset; gke_job.c
 * is the target's row (target.h) and `slicectl job` there.
 */
#ifndef SLICECTL_LAUNCHER_GKE_H
#define SLICECTL_LAUNCHER_GKE_H

#include "common/common.h"
#include "launcher/accelerator.h"

#include <jansson.h>
#include <stdbool.h>

/* The init container's image for a gs:// bucket (gcloud storage cp,
 * authenticated by Workload Identity). */
#define GKE_FETCH_IMAGE "gcr.io/google.com/cloudsdktool/google-cloud-cli:slim"
/* Kueue's ProvisioningRequest max run duration when none is given
 * (GKE's own default: 7 days). */
#define GKE_DEFAULT_MAX_RUN_S 604800u

/* JobSet's largest maxRestarts (an int32): no limit. */
#define GKE_NO_LIMIT 2147483647u

/* What the JobSet is rendered from. */
struct gke_spec {
	const char *run;               /* the run's (and JobSet's) name */
	const char *namespace;
	const char *queue;             /* the LocalQueue */
	const char *priority_class;    /* NULL: none */
	const char *service_account;   /* the pods' Kubernetes one; NULL:
					  the namespace's default */
	bool cordon;                   /* a node whose preflight fails is
					  cordoned (docs/DESIGN.md) */
	bool cordon_bad_hosts;         /* and a quarantined one */
	const char *image;             /* the trainer's image */
	const char *run_url;           /* BUCKET/RUN */
	const char *supervisor_sha256;
	struct accelerator acc;        /* a GPU type's workers: --nodes */
	/* jobset_restarts: JobSet's failurePolicy.maxRestarts, a backstop
	 * behind control.json's budgets (gke_job.c says why). */
	unsigned num_slices, jobset_restarts, grace_s;
	const struct strlist *env;     /* "K=V" */
	bool spot, flex_start, queued_provisioning;
	const char *reservation;       /* NULL: none */
	unsigned max_run_s;            /* with queued_provisioning; 0: default */
};

/*
 * Checks what the API server's schemas and webhooks would refuse and the
 * schema cannot say: DNS names and label values, the pod names JobSet
 * derives (RUN-slice-J-P-xxxxx within 63 characters), a type GKE has no
 * node pools of, and capacity flags that do not go together. Returns 0 or
 * COMMON_EUSAGE with e naming the flag.
 */
int gke_check(const struct gke_spec *s, struct err *e);

/* The JobSet (docs/DESIGN.md "The rendered JobSet"); gke_check first. */
int gke_render(const struct gke_spec *s, json_t **out, struct err *e);

/* An env entry {name, value}. */
json_t *gke_value_env(const char *name, const char *value);

/* A GPU pod's plumbing for its network stack (s->acc.net): the
 * memory-backed /dev/shm, the host paths and environment its NCCL plugin
 * needs, the multi-network annotations (added to annotations, the pod
 * template's) and the RxDM daemon as a sidecar (appended to pod's
 * initContainers). pod must have "volumes" and "initContainers" arrays,
 * worker "env" and "volumeMounts". Returns 0, or -1 out of memory. */
int gke_gpu_plumb(const struct gke_spec *s, json_t *annotations, json_t *pod,
		  json_t *worker);
/* Whether pods of that stack use the node's network: the GPUDirect
 * stacks need the pod network with its extra NICs. */
bool gke_gpu_host_network(enum gpu_net net);

/* obj as a YAML document (block style, keys in their order), appended to
 * b. Strings that YAML would read as something else are quoted. */
int gke_yaml(const json_t *obj, struct buf *b, struct err *e);

/* `slicectl job --target gke`'s own flags (--cluster, --render and
 * --max-run-duration are shared: target.h's struct job_flags). */
struct gke_options {
	const char *location, *namespace, *queue;
	const char *priority_class, *image, *kubeconfig, *context;
	const char *reservation, *service_account;
	bool flex_start, queued_provisioning, cordon, cordon_bad_hosts;
};

/* Entries the row's options slot fills (target.h), the shared three
 * among them. */
#define GKE_OPTIONS_COUNT 16

/* Whether any of GKE's own flags was given; gke_refuse_flags says so
 * (with --cluster and --render) to the tpu-vm and local targets' checks:
 * EXIT_USAGE, or 0 when none was. */
struct job_flags;
bool gke_flags_given(const struct gke_options *g);
int gke_refuse_flags(const struct job_flags *f);

/* A cluster reached, and what the way it was reached says. */
struct kube_client;
struct gke_conn {
	struct kube_client *k;
	char *namespace;      /* the kubeconfig context's, or NULL */
	char *project;        /* --cluster's project, or NULL */
	char *kubeconfig;     /* --kubeconfig as given, or NULL */
	char *context;        /* the kubeconfig context used, or NULL */
	char kueue[64];       /* "/apis/kueue.x-k8s.io/v1beta2" (or v1beta1) */
	bool no_visibility;   /* Kueue's visibility API is not served */
};

void gke_conn_init(struct gke_conn *c);
void gke_conn_release(struct gke_conn *c);
/* cluster (+ location, project or $CLOUDSDK_CORE_PROJECT) through the
 * GKE API; else kubeconfig (NULL: $KUBECONFIG, ~/.kube/config) and its
 * context (NULL: the current one). */
int gke_connect(const char *cluster, const char *location, const char *project,
		const char *kubeconfig, const char *context,
		struct gke_conn *out, struct err *e);
/* Logs e and returns the exit status it means (2 for configuration). */
int gke_exit_status(const struct err *e);
/* Whether JobSet, Kueue and s's LocalQueue are there; logs what is
 * missing and returns the exit status (0: all there). */
int gke_preflight(struct gke_conn *c, const struct gke_spec *s);
/* Creates js (an existing JobSet of the same run is kept), follows
 * Kueue's admission until every pod runs, prints the follow-up commands.
 * Returns the exit status. */
int gke_submit(struct gke_conn *c, const struct gke_spec *s, json_t *js,
	       const char *run_url);

struct job;
struct target_view;
/* The row's status, delete and reset (target.h) for a GKE run (j from
 * its job.json): the JobSet's view, deleting the JobSet, deleting every
 * pod for JobSet to recreate. */
int gke_describe(const struct job *j, struct target_view *out,
		 struct err *e);
int gke_delete(const struct job *j, bool wait, unsigned timeout_ms,
	       bool *absent, struct err *e);
int gke_reset(const struct job *j, bool wait, unsigned timeout_ms,
	      long *attempt, struct err *e);

/* DNS-1123 label (RFC 1123: [a-z0-9]([-a-z0-9]*[a-z0-9])?, <= 63);
 * DNS-1035 as well when it must start with a letter. */
bool gke_dns_label(const char *s, bool dns1035);

#endif
