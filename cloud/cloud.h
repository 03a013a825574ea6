/*
 * cloud/cloud.h: everything that speaks to Google Cloud, and the object
 * store facade that gives gs:// and file:// URLs the same semantics:
 * atomic create, create-only, compare-and-swap on a generation, streaming
 * uploads and downloads checked end to end with CRC32C.
 *
 * Object names are relative to the URL's prefix: store_open("gs://b/p/run")
 * then store_put(s, "control.json") writes gs://b/p/run/control.json.
 */
#ifndef SLICECTL_CLOUD_H
#define SLICECTL_CLOUD_H

#include "common/common.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <curl/curl.h>
#include <jansson.h>

enum cloud_error {
	CLOUD_OK = 0,
	CLOUD_ENOMEM = COMMON_ENOMEM,
	CLOUD_EINVAL = COMMON_EINVAL,
	CLOUD_EIO = COMMON_EIO,
	CLOUD_EURL = 30,     /* not a gs:// or file:// URL we can use */
	CLOUD_ENOTFOUND,     /* no such object or bucket (404, ENOENT) */
	CLOUD_EPRECONDITION, /* a generation precondition failed (412) */
	CLOUD_EAUTH,         /* no credentials, or refused (401, 403) */
	CLOUD_EHTTP,         /* any other HTTP error; the message has the
				server's own words */
	CLOUD_ENETWORK,      /* no answer after every retry */
	CLOUD_ECORRUPT,      /* CRC32C mismatch, or malformed server JSON */
	CLOUD_ENOSPACE,      /* a local disk (or file size limit) is full */
	CLOUD_EABORTED,      /* a caller's callback asked to stop */
	CLOUD_EEXISTS,       /* the name is taken (409) */
	CLOUD_EFAILED,       /* an operation or queued resource failed; the
				message has the API's own error */
	CLOUD_ETIMEDOUT,     /* a wait ran out of time */
};

/* Preconditions on the generation of the object being written or deleted. */
#define STORE_ANY_GENERATION (-1) /* none */
#define STORE_CREATE_ONLY 0       /* the object must not exist yet */

struct store;

struct store_object {
	char *name;          /* relative to the store's prefix */
	uint64_t size;
	int64_t generation;  /* > 0; changes on every write of the name */
	uint32_t crc32c;
	char updated[40];    /* RFC 3339 time of the last write */
};

void store_object_release(struct store_object *o);

/* Opens gs://BUCKET[/PREFIX] or file:///DIR (DIR created at the first
 * write: reads, lists and deletes of a missing DIR create nothing). */
int store_open(struct store **out, const char *url, struct err *e);
void store_close(struct store *s);
/* The URL of an object, for messages: "gs://b/p/name". Valid until the
 * next call on s. */
const char *store_url(struct store *s, const char *name);

/* Small objects in one request. if_generation_match is a generation,
 * STORE_CREATE_ONLY or STORE_ANY_GENERATION. out may be NULL. */
int store_put(struct store *s, const char *name, const void *data,
	      size_t len, int64_t if_generation_match,
	      struct store_object *out, struct err *e);

/* Streaming uploads of any size with bounded memory. Nothing is visible
 * under name until store_upload_finish succeeds; abort (or a crash) leaves
 * nothing behind that a reader could see. */
struct store_upload;
int store_upload_begin(struct store *s, const char *name,
		       int64_t if_generation_match, struct store_upload **out,
		       struct err *e);
int store_upload_write(struct store_upload *u, const void *data, size_t len,
		       struct err *e);
/* Commits and frees u, whatever the result. out may be NULL. */
int store_upload_finish(struct store_upload *u, struct store_object *out,
			struct err *e);
void store_upload_abort(struct store_upload *u);

/* Returns 0, or an error code after filling e (then the download stops
 * with CLOUD_EABORTED unless the callback's own code is a cloud_error). */
typedef int (*store_sink_fn)(void *ud, const void *data, size_t len,
			     struct err *e);

/* Streams an object to sink, pinned to one generation (0: the current
 * one) so a concurrent overwrite cannot mix versions; a broken stream is
 * resumed from where it broke; the CRC32C of all bytes is checked against
 * the object's before returning 0. out may be NULL. */
int store_get(struct store *s, const char *name, int64_t generation,
	      store_sink_fn sink, void *ud, struct store_object *out,
	      struct err *e);
/* Reads a small object whole (at most max bytes) into *data (malloc'd,
 * NUL-terminated). */
int store_read(struct store *s, const char *name, size_t max, char **data,
	       size_t *len, struct store_object *out, struct err *e);
int store_stat(struct store *s, const char *name, struct store_object *out,
	       struct err *e);
/* Whether name exists, in *yes. Returns 0 or the store's error (e
 * filled); a missing object is no error. */
int store_exists(struct store *s, const char *name, bool *yes,
		 struct err *e);

/* Lists objects under prefix in name order. With a delimiter ("/"), names
 * below the next delimiter are rolled up and reported once with
 * is_prefix set (o->name ends with the delimiter). The callback's non-zero
 * return stops the listing and is returned. */
typedef int (*store_list_fn)(void *ud, const struct store_object *o,
			     bool is_prefix);
int store_list(struct store *s, const char *prefix, const char *delimiter,
	       store_list_fn fn, void *ud, struct err *e);

int store_delete(struct store *s, const char *name,
		 int64_t if_generation_match, struct err *e);

/* Large gs:// uploads go as temporary pieces named NAME STORE_PIECE_MARK
 * NONCE.K, composed into NAME and deleted; a crash can leave some behind.
 * Whether name is one of those. */
#define STORE_PIECE_MARK ".xfer-piece."
bool store_is_piece(const char *name);

/* An append-only object (a log) as immutable segments under dir (ending
 * in "/"), each named by the offset of its first byte and written once,
 * create-only: bytes sent once, no object written twice. Putting a
 * segment that exists already succeeds (a writer restarted) and sets
 * *stored (may be NULL) to the size of the one there, else to len: the
 * writer goes on from offset + *stored. Reading
 * concatenates the segments from byte from onwards (a gap the writer left
 * is skipped) and sets *end (may be NULL) to the offset after the last
 * byte read: the next call's from, for following a growing log. */
int store_segment_put(struct store *s, const char *dir, uint64_t offset,
		      const void *data, size_t len, uint64_t *stored,
		      struct err *e);
int store_segments_read(struct store *s, const char *dir, uint64_t from,
			store_sink_fn sink, void *ud, uint64_t *end,
			struct err *e);

/*
 * The Cloud TPU API, v2alpha1 (queued resources, nodes, operations, guest
 * attributes), at https://tpu.googleapis.com/ or SLICECTL_TPU_ENDPOINT.
 * Create and delete carry a requestId, so they are retried like any
 * idempotent call (429, 5xx, dropped connections); errors carry the API's
 * own message and a hint for 400 (quota, invalid field), 403, 404 and 409.
 * Operations and states are polled with backoff starting at
 * SLICECTL_TPU_POLL_MS (default 1000) up to 15 s.
 */
struct tpu_client;

/* project and zone are required (the launcher resolves the defaults). */
int tpu_open(struct tpu_client **out, const char *project, const char *zone,
	     struct err *e);
void tpu_close(struct tpu_client *c);
/* "projects/P/locations/Z" */
const char *tpu_parent(const struct tpu_client *c);

/* How the capacity is sold: gcloud's --provisioning-model (standard,
 * spot, reservation-bound, flex-start) and the best-effort tier. */
enum tpu_capacity {
	TPU_CAPACITY_ON_DEMAND = 0, /* none of the fields below */
	TPU_CAPACITY_SPOT,          /* "spot": {} */
	TPU_CAPACITY_RESERVED,      /* "guaranteed": {"reserved": true} */
	TPU_CAPACITY_BEST_EFFORT,   /* "bestEffort": {} */
	/* "provisioningModel": "FLEX_START" with "runDuration":
	 * {"maxRunDuration"}, no tier: Dynamic Workload Scheduler capacity
	 * that ends with its run duration. */
	TPU_CAPACITY_FLEX_START,
};

/* A flex-start run lasts at most 7 days (Cloud TPU's documented limit). */
#define TPU_MAX_RUN_DURATION_S (7u * 86400)

/* The capacity a --provisioning-model name means: standard (on demand),
 * spot, reservation-bound (reserved) or flex-start; CLOUD_EINVAL naming
 * the choices for anything else. */
int tpu_provisioning_model(const char *name, enum tpu_capacity *out,
			   struct err *e);

/* The capacity of a command line: --provisioning-model `model` (NULL: not
 * given) over `chosen`, what the older flags chose (flag: the one that
 * chose it, like "--spot"; NULL for none). The same capacity twice is a
 * synonym (--spot with spot); two different ones are CLOUD_EINVAL naming
 * both, as is a model name that is none of the four. */
int tpu_capacity_choose(const char *model, enum tpu_capacity chosen,
			const char *flag, enum tpu_capacity *out,
			struct err *e);

/* What `slicectl create` asks for. NULL strings and empty lists are left
 * out of the request body. */
struct tpu_qr_spec {
	const char *id;               /* the queued resource's id */
	const char *accelerator_type; /* node.acceleratorType */
	const char *runtime_version;  /* node.runtimeVersion */
	/* 1: nodeSpec[0].nodeId = id. More: nodeSpec[0].multiNodeParams
	 * {nodeCount, nodeIdPrefix = id}, nodes id-0 .. id-(N-1). */
	unsigned node_count;
	enum tpu_capacity capacity;
	/* reservationName; a bare name becomes
	 * projects/P/locations/Z/reservations/NAME. Implies reserved. */
	const char *reservation;
	/* runDuration.maxRunDuration: required with flex-start, refused
	 * without it. */
	uint64_t max_run_duration_s;
	uint64_t valid_until_s;       /* queueingPolicy.validUntilDuration */
	uint64_t valid_after_s;       /* queueingPolicy.validAfterDuration */
	const char *network;          /* node.networkConfig.network */
	const char *subnetwork;       /* node.networkConfig.subnetwork */
	bool external_ips;            /* node.networkConfig.enableExternalIps */
	const char *service_account;  /* node.serviceAccount.email */
	struct strlist scopes;        /* node.serviceAccount.scope */
	struct strlist tags;          /* node.tags */
	struct strlist labels;        /* node.labels, "KEY=VALUE" each */
	struct strlist metadata;      /* node.metadata, "KEY=VALUE" each */
	const char *description;      /* node.description */
};

void tpu_qr_spec_init(struct tpu_qr_spec *s);
void tpu_qr_spec_release(struct tpu_qr_spec *s);

/* The checks of s that need no server: capacity against reservation and
 * run duration (flex-start takes no reservation and needs a run duration
 * of 1 s to 7 days; only flex-start takes one), node count. CLOUD_EINVAL
 * with the reason. tpu_qr_body makes them too; callers that must refuse
 * before any request (slicectl job) call it first. */
int tpu_qr_spec_check(const struct tpu_qr_spec *s, struct err *e);

/* The queuedResources.create request body for s under parent, as
 * compact JSON (*out malloc'd). CLOUD_EINVAL names a bad field value. */
int tpu_qr_body(const struct tpu_qr_spec *s, const char *parent, char **out,
		struct err *e);

/* A queued resource as the API describes it. */
struct tpu_qr {
	char *name;             /* projects/P/locations/Z/queuedResources/ID */
	char *id;
	char *state;            /* QueuedResourceState.state, "" if absent */
	char *state_initiator;  /* "" if absent */
	char *create_time;      /* "" if absent */
	char *accelerator_type; /* of the first node spec */
	char *runtime_version;
	const char *capacity;   /* "spot", "reserved", "best-effort",
				   "flex-start" or "on-demand" (static) */
	char *reservation;      /* reservationName, "" if none */
	char *max_run_duration; /* runDuration.maxRunDuration ("259200s"),
				   "" if none */
	/* runDuration.terminationTime: when a flex-start run ends (set once
	 * ACTIVE), "" if none. */
	char *termination_time;
	int error_code;         /* state.failedData.error, when FAILED */
	char *error_message;    /* "" if none */
	char **node_ids;        /* in slice order: nodeId, or PREFIX-i */
	size_t nnodes;
	char *json;             /* the resource as the API sent it */
};

void tpu_qr_release(struct tpu_qr *q);

/* Parses one QueuedResource resource (CLOUD_ECORRUPT when malformed). */
int tpu_qr_parse(const char *json, size_t len, struct tpu_qr *out,
		 struct err *e);

struct tpu_endpoint {
	char *ip;          /* networkEndpoints[i].ipAddress */
	char *external_ip; /* accessConfig.externalIp, "" if none */
	unsigned port;     /* as the API gives it (not the SSH port) */
};

/* Node.upcomingMaintenance; every string "" when the API gave none. */
struct tpu_maintenance {
	bool announced;      /* upcomingMaintenance was there */
	char *type;          /* SCHEDULED, UNSCHEDULED */
	char *status;        /* PENDING, ONGOING */
	char *window_start;  /* windowStartTime */
	char *window_end;    /* windowEndTime */
	char *latest_start;  /* latestWindowStartTime */
	bool can_reschedule;
};

struct tpu_node {
	char *name;        /* projects/P/locations/Z/nodes/ID */
	char *id;          /* ID */
	char *uid;         /* the numeric "id" field, "" if absent */
	char *state;
	char *health;      /* "" if absent */
	char *accelerator_type;
	struct tpu_endpoint *endpoints; /* in worker order */
	size_t nendpoints;
	struct tpu_maintenance maintenance;
	char *json;
};

void tpu_node_release(struct tpu_node *n);
int tpu_node_parse(const char *json, size_t len, struct tpu_node *out,
		   struct err *e);

/* Called when a wait sees a new state (and once at the start). */
typedef void (*tpu_progress_fn)(void *ud, const struct tpu_qr *q,
				uint64_t elapsed_ms);

/* Creates the queued resource; returns once the API accepted it (the
 * create operation is done), not when it is ACTIVE. */
int tpu_qr_create(struct tpu_client *c, const struct tpu_qr_spec *s,
		  struct err *e);
/* tpu_qr_create with a body made already (tpu_qr_body's, or one kept
 * from an earlier create): queued resource id under the client's parent. */
int tpu_qr_post(struct tpu_client *c, const char *id, const char *body,
		struct err *e);
int tpu_qr_get(struct tpu_client *c, const char *id, struct tpu_qr *out,
	       struct err *e);
/* Every queued resource in the zone, all pages, in the API's order. */
int tpu_qr_list(struct tpu_client *c, struct tpu_qr **out, size_t *n,
		struct err *e);
/* Asks for deletion (force: delete its nodes too). wait: returns only
 * when the queued resource is gone (timeout_ms 0: no limit). */
int tpu_qr_delete(struct tpu_client *c, const char *id, bool force,
		  bool wait, unsigned timeout_ms, tpu_progress_fn progress,
		  void *ud, struct err *e);
/* Resets every node of the queued resource; wait: until the operation is
 * done and every node is READY again. */
int tpu_qr_reset(struct tpu_client *c, const char *id, bool wait,
		 unsigned timeout_ms, struct err *e);
/*
 * Polls until the state is `state` (out, when given, gets the resource).
 * Gives up early with CLOUD_EFAILED when the resource reaches FAILED
 * (with failedData's message), or SUSPENDED / SUSPENDING while waiting
 * for anything else; CLOUD_ENOTFOUND when it disappears; CLOUD_ETIMEDOUT
 * after timeout_ms (0: no limit).
 */
int tpu_qr_wait(struct tpu_client *c, const char *id, const char *state,
		unsigned timeout_ms, tpu_progress_fn progress, void *ud,
		struct tpu_qr *out, struct err *e);

int tpu_node_get(struct tpu_client *c, const char *id, struct tpu_node *out,
		 struct err *e);

/* Starts the maintenance announced on the queued resource's nodes
 * (performMaintenanceQueuedResource, v2alpha1): those named in nodes (ids,
 * sent as given), or every node with maintenance announced when nodes is
 * NULL or empty. wait: until the operation is done (timeout_ms 0: no
 * limit). */
int tpu_qr_perform_maintenance(struct tpu_client *c, const char *id,
			       const struct strlist *nodes, bool wait,
			       unsigned timeout_ms, struct err *e);

/* What `slicectl describe` adds after a queued resource: when a
 * flex-start run ends, and each node's announced maintenance (window,
 * status, whether it can be rescheduled). Prints nothing when there is
 * neither. */
void tpu_print_schedule(FILE *f, const struct tpu_qr *q,
			const struct tpu_node *nodes, size_t nnodes);

/* One worker's SSH host keys from guest attributes ("hostkeys/"): lines
 * "TYPE BASE64" as in known_hosts (ssh-ed25519, ecdsa-sha2-nistp256...). */
struct tpu_hostkeys {
	struct strlist keys;
};

/* Every worker's host keys, in worker order (*n is the number of workers
 * the API answered for; a worker that has published none has no keys). */
int tpu_node_hostkeys(struct tpu_client *c, const char *id,
		      struct tpu_hostkeys **out, size_t *n, struct err *e);
void tpu_hostkeys_release(struct tpu_hostkeys *h, size_t n);

/*
 * The GCE metadata server (a TPU VM's worker identity, preemption and
 * maintenance notices), at metadata.google.internal or GCE_METADATA_HOST
 * ("host:port"). Paths are below /computeMetadata/v1/, for example
 * "instance/attributes/agent-worker-number". Every request carries
 * "Metadata-Flavor: Google"; 503s and dropped connections are retried.
 */
struct metadata_client;

int metadata_open(struct metadata_client **out, struct err *e);
void metadata_close(struct metadata_client *m);

/* A value as text (*value malloc'd, NUL-terminated). CLOUD_ENOTFOUND when
 * the server has no such path (an attribute that is not set). */
int metadata_get(struct metadata_client *m, const char *path, char **value,
		 struct err *e);

/*
 * Long-polls path with wait_for_change=true: returns when the value
 * differs from the one etag names (etag "" returns the current value at
 * once), or after timeout_s (then *changed is false and *value the
 * current value). *value and *etag_out are malloc'd. The server's timeout
 * (timeout_sec) is timeout_s; the client's own is a little longer, so a
 * server that stalls is noticed. A 503 or a dropped connection is retried
 * with backoff within timeout_s.
 */
int metadata_watch(struct metadata_client *m, const char *path,
		   const char *etag, unsigned timeout_s, char **value,
		   char **etag_out, bool *changed, struct err *e);

/* Safe from another thread: a metadata_watch in progress on m returns
 * CLOUD_EABORTED within about a second, and so do later calls. */
void metadata_cancel(struct metadata_client *m);

/*
 * Cloud Monitoring (monitoring.googleapis.com v3, or
 * SLICECTL_MONITORING_ENDPOINT): gauge points of custom metrics written
 * with projects.timeSeries.create on a generic_task resource (namespace
 * "slicectl", job and metric label "run" the run's id, task_id "0"). One
 * request holds at most MONITORING_MAX_SERIES series, one point each; the
 * API refuses a point sooner than 10 s after its series' last
 * (docs/DESIGN.md "Goodput").
 */
#define MONITORING_MAX_SERIES 200

struct monitoring_client;

struct monitoring_target {
	const char *project;
	const char *location;   /* a zone or region; NULL: "global" */
	const char *run;
	/* A write gives up after about this long, with one retry at most:
	 * a point not written by then is stale, and the next one follows.
	 * 0: the usual retry policy. */
	unsigned write_ms;
};

struct monitoring_point {
	const char *type;       /* "custom.googleapis.com/slicectl/goodput" */
	const char *label_key;  /* one more metric label, or NULL */
	const char *label_value;
	double value;
};

int monitoring_open(struct monitoring_client **out,
		    const struct monitoring_target *t, struct err *e);
void monitoring_close(struct monitoring_client *c);
/* n points, each of its own series, all at end_ms (ms since the epoch). */
int monitoring_write(struct monitoring_client *c,
		     const struct monitoring_point *pts, size_t n,
		     int64_t end_ms, struct err *e);
/* Safe from another thread: a monitoring_write in progress returns
 * CLOUD_EABORTED within about a second, and so do later ones. */
void monitoring_cancel(struct monitoring_client *c);

/* crc32c.c: CRC-32C (Castagnoli), as GCS computes it. Start with 0. */
uint32_t crc32c_update(uint32_t crc, const void *data, size_t len);

/*
 * The GKE API (container.googleapis.com v1, or SLICECTL_CONTAINER_ENDPOINT):
 * where a cluster's control plane is, for kube_config_from_endpoint.
 * Sent with the same credentials as every other call here; the access
 * token is handed over too, for the Kubernetes API (GKE accepts Google
 * OAuth tokens with the cloud-platform scope).
 */
struct gke_cluster {
	char *endpoint;       /* "1.2.3.4" (or what the API gives) */
	char *ca_certificate; /* masterAuth.clusterCaCertificate: base64 of
				 a PEM; "" when absent */
	char *status;         /* "RUNNING", "PROVISIONING"...; "" if absent */
	char *token;          /* the access token used; valid an hour or so */
};

/* projects/P/locations/L/clusters/C; location is a zone or a region. A
 * missing cluster is CLOUD_ENOTFOUND with a hint. */
int gke_cluster_get(const char *project, const char *location,
		    const char *cluster, struct gke_cluster *out,
		    struct err *e);
void gke_cluster_release(struct gke_cluster *c);

/*
 * Vertex AI's customJobs (aiplatform v1) in one project and region, on
 * https://REGION-aiplatform.googleapis.com/ or SLICECTL_VERTEX_ENDPOINT.
 * Each returns 0 or a cloud error whose message has the API's own words
 * and what to do (enable the API, a role, a quota). A job's name is its
 * resource name, "projects/P/locations/R/customJobs/ID".
 */
struct vertex_client;

int vertex_open(struct vertex_client **out, const char *project,
		const char *region, struct err *e);
void vertex_close(struct vertex_client *c);
/* "projects/P/locations/R". */
const char *vertex_parent(const struct vertex_client *c);
/* Posts body (a CustomJob); *out the job as created (its "name"). */
int vertex_job_create(struct vertex_client *c, const json_t *body,
		      json_t **out, struct err *e);
int vertex_job_get(struct vertex_client *c, const char *name, json_t **out,
		   struct err *e);
/* Every page of the list, filter (the API's syntax) when not NULL; *jobs
 * an array of CustomJobs. */
int vertex_job_list(struct vertex_client *c, const char *filter,
		    json_t **jobs, struct err *e);
int vertex_job_cancel(struct vertex_client *c, const char *name,
		      struct err *e);
int vertex_job_delete(struct vertex_client *c, const char *name,
		      struct err *e);

/*
 * gcloud_config.c: project, zone and region defaults the way every Google
 * tool takes them, so a user who ran `gcloud config set project P` needs
 * nothing more. The configuration directory is CLOUDSDK_CONFIG, else
 * ~/.config/gcloud; the active configuration is CLOUDSDK_ACTIVE_CONFIG_NAME,
 * else the one named in DIR/active_config, else "default"; its properties
 * are DIR/configurations/config_NAME, an INI file ("[core]" "project = P").
 */

/* The active configuration's value of key in [section] into out (cap
 * len); "" when the file, the section or the key is absent or the value
 * empty. CLOUD_EINVAL names the file, the line and the fix when the file
 * is malformed, the configuration name invalid or the value longer than
 * len - 1; CLOUD_EIO when a file exists but cannot be read. */
int gcloud_config_get(const char *section, const char *key, char *out,
		      size_t len, struct err *e);

/* A gcloud property in gcloud's order: flag when non-empty, else the
 * environment variable CLOUDSDK_SECTION_KEY (upper case: for [core]
 * project, CLOUDSDK_CORE_PROJECT), else gcloud_config_get into buf (cap
 * len). *out is flag, the variable's value or buf; NULL when none gives
 * one. Errors as gcloud_config_get's. */
int gcloud_default(const char *flag, const char *section, const char *key,
		   char *buf, size_t len, const char **out, struct err *e);


/*
 * The HTTP transport: every request slicectl sends, to Google's APIs, the
 * Kubernetes API (kube/) and slurmrestd (launcher/), over one reused
 * libcurl easy handle per client (so connections are kept alive between
 * calls). It owns the retry policy: transient statuses (408, 429, 5xx but
 * 501, unless the policy says otherwise), dropped connections and stalls
 * are retried with exponential backoff and full jitter, honouring
 * Retry-After, within a bounded number of attempts and a bounded time; a
 * request that is not idempotent is retried only when it carries a
 * precondition, or when the connection was never made (nothing was sent).
 * Failures that cannot heal (a certificate that does not verify, a URL
 * that cannot work) are not retried. Other 4xx answers become cloud errors
 * carrying the server's own message and a hint.
 *
 * Debug logs name the method, URL and status with credentials redacted;
 * nothing here ever prints a header's value or a request body.
 */

struct http_policy {
	unsigned max_attempts;       /* per request, the first included */
	unsigned max_total_ms;       /* per request, waits included */
	unsigned backoff_base_ms;
	unsigned backoff_max_ms;
	unsigned connect_timeout_ms;
	unsigned stall_ms;           /* no byte moved for this long: retry */
	unsigned retry_after_max_ms; /* a longer Retry-After is cut to this;
					0: none */
	/* Which error statuses are worth another attempt; NULL: 408, 429
	 * and 5xx but 501. (slurmrestd reports Slurm's own refusals as 500:
	 * those do not heal.) */
	bool (*transient_status)(long status);
};

/* The defaults, with SLICECTL_HTTP_STALL_SECONDS and
 * SLICECTL_HTTP_RETRY_BASE_MS (for tests and slow links) applied. */
void http_policy_default(struct http_policy *p);

struct http_client {
	CURL *curl;
	struct http_policy policy;
	uint64_t seed;
	char errbuf[CURL_ERROR_SIZE];
	/* Optional: asked about once a second during a transfer and during
	 * the waits between retries (it may be made true from any thread);
	 * true ends the request with CLOUD_EABORTED. */
	bool (*cancelled)(void *ud);
	void *cancel_ud;
};

/* A body pulled by callbacks: read returns the bytes copied (0 at the
 * end) or (size_t)-1 on failure; rewind, when given, makes the request
 * retryable after its body was sent. */
struct http_body_source {
	size_t (*read)(void *ud, char *buf, size_t len);
	int (*rewind)(void *ud);
	void *ud;
};

/* TLS beyond the system's defaults (PEM text, not file names). */
struct http_tls {
	const char *ca_pem;   /* the only CA trusted; NULL: the system's */
	const char *cert_pem; /* a client certificate and its key, or NULL */
	const char *key_pem;
	bool insecure;        /* no verification at all */
};

struct http_request {
	const char *method;           /* "GET", "POST", "PUT", "DELETE" */
	const char *url;
	const char *unix_socket;      /* connect here instead; NULL: no */
	const struct http_tls *tls;   /* NULL: the system's CAs */
	const char *const *headers;   /* "Name: value", NULL-terminated */
	const void *body;             /* from memory... */
	size_t body_len;
	const struct http_body_source *source; /* ...or from callbacks */
	/* Sends that may change state twice must say so: they are retried
	 * only when precondition is also set, or when the connection could
	 * not be made (nothing was sent). */
	bool not_idempotent;
	bool precondition;
	unsigned max_attempts;        /* 0: the client's policy */
	/* 0: none. Else each attempt's own time limit, which also replaces
	 * the policy's stall limit when longer: for long polls and streams
	 * (a Kubernetes watch), where the server is silent by design. */
	unsigned timeout_ms;
	/* 2xx bodies go to sink when given, else to memory up to max_body
	 * (0: 16 MiB). Error bodies always go to memory. */
	store_sink_fn sink;
	void *sink_ud;
	size_t max_body;
	/* The advice appended to a 4xx error ("; ..."), given the status and
	 * the server's message; NULL or "" falls back to the generic one. */
	const char *(*hint)(long status, const char *message);
};

struct http_response {
	long status;          /* 0 when no answer came */
	struct buf body;
	struct buf headers;   /* "name: value\r\n" lines of the last answer */
	uint64_t delivered;   /* bytes handed to the sink */
	unsigned attempts;
	unsigned retry_after_ms;
	CURLcode curl_code;   /* of the last attempt */
};

void http_response_init(struct http_response *r);
void http_response_release(struct http_response *r);
/* The value of the first header called name (any case), NUL-terminated
 * into out; false when absent or too long. */
bool http_response_header(const struct http_response *r, const char *name,
			  char *out, size_t len);

int http_client_init(struct http_client *c, const struct http_policy *p,
		     struct err *e);
void http_client_release(struct http_client *c);

/*
 * Sends req, retrying as the policy allows. Returns 0 when an answer with a
 * status below 400 came (resp->status says which); otherwise the cloud
 * error for the last answer or transport failure, with e naming the
 * request and the server's message. A sink's error stops at once and is
 * returned as it is (CLOUD_EABORTED when not a cloud error); a transfer that
 * broke after bytes reached the sink is not retried here, since only the
 * caller knows how to resume it.
 */
int http_do(struct http_client *c, const struct http_request *req,
	    struct http_response *resp, struct err *e);

/* For callers that run their own resume loops with the same policy. */
struct http_retry {
	const struct http_policy *policy;
	struct http_client *client;
	struct backoff backoff;
	unsigned attempts;
	uint64_t start_ms;
};

void http_retry_init(struct http_retry *r, struct http_client *c);
/* After a failed attempt: whether it may be retried (transient status or
 * transport failure, within the budget); if so sleeps first (cut short
 * when the client's cancel hook fires: the next attempt then ends with
 * CLOUD_EABORTED). */
bool http_retry_again(struct http_retry *r, int rc,
		      const struct http_response *resp);
/* Progress was made: the next failure starts the backoff afresh. */
void http_retry_progress(struct http_retry *r);

/* Whether a failure of this kind is worth another attempt under p. */
bool http_transient(const struct http_policy *p, int rc,
		    const struct http_response *resp);
/* Whether the connection of an attempt that failed with cc was never
 * made, so nothing of the request was sent. */
bool http_unsent(CURLcode cc);

/* Percent-encodes s (all but A-Z a-z 0-9 - . _ ~) onto b. */
int http_escape_append(struct buf *b, const char *s);
/* Appends "?name=value", or "&name=value" once u has a query; value
 * escaped as above. */
int http_query_append(struct buf *u, const char *name, const char *value);

/* Copies text to out with the values of credentials (Authorization and
 * X-SLURM-USER-TOKEN headers, bearer tokens, access, refresh and ID
 * tokens, assertions, client secrets, upload ids, SLURM_JWT) replaced by
 * "<redacted>". Anything logged or put in an error message that may hold
 * a server's or a caller's text goes through it. */
int http_redact(struct buf *out, const char *text);

/* The message of an error body: GCS's {"error": {"message"}}, OAuth's
 * {"error", "error_description"}, or the start of a text body. */
void http_error_message(const struct http_response *resp, char *out,
			size_t len);

#endif
