/*
 * identity.c: see identity.h.
 */
#include "supervisor/identity.h"
#include "cloud/cloud.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void identity_init(struct identity *id)
{
	memset(id, 0, sizeof(*id));
	strlist_init(&id->megascale);
}

static bool take_env(const char *name, char *out, size_t cap)
{
	const char *v = getenv(name);

	if (!v || !*v)
		return false;
	snprintf(out, cap, "%s", v);
	return true;
}

void identity_host(struct identity *id, bool slurm, bool pod)
{
	char *h = id->host;
	size_t cap = sizeof(id->host);

	if (take_env("SLICE_HOST_NAME", h, cap) ||
	    (slurm && take_env("SLURMD_NODENAME", h, cap)) ||
	    (pod && take_env("SLICE_POD_NODE", h, cap)))
		return;
	if (gethostname(h, cap - 1) || !*h)
		snprintf(h, cap, "%s", id->name);
	h[cap - 1] = '\0';
}

void identity_release(struct identity *id)
{
	strlist_release(&id->megascale);
	identity_init(id);
}

static bool parse_uint(const char *s, int *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || v < 0 || v > 1000000)
		return false;
	while (*end == ' ' || *end == '\n' || *end == '\'' || *end == '"')
		end++;
	if (*end)
		return false;
	*out = (int)v;
	return true;
}

int identity_parse_tpu_env(const char *text, struct strlist *megascale,
			   int *worker_id, int *slice_id)
{
	const char *p = text;

	*worker_id = *slice_id = -1;
	while (p && *p) {
		const char *nl = strchr(p, '\n');
		size_t len = nl ? (size_t)(nl - p) : strlen(p);
		char line[1024], *colon, *v;

		snprintf(line, sizeof(line), "%.*s", (int)len, p);
		p = nl ? nl + 1 : NULL;
		colon = strchr(line, ':');
		if (!colon)
			continue;
		*colon = '\0';
		v = colon + 1;
		while (*v == ' ')
			v++;
		if (*v == '\'' || *v == '"') {
			char q = *v++;
			char *end = strrchr(v, q);

			if (end)
				*end = '\0';
		}
		if (!strcmp(line, "WORKER_ID"))
			parse_uint(v, worker_id);
		else if (!strcmp(line, "MEGASCALE_SLICE_ID"))
			parse_uint(v, slice_id);
		if (!strncmp(line, "MEGASCALE_", 10) &&
		    env_name_valid(line, strlen(line))) {
			struct buf kv;
			int rc;

			buf_init(&kv);
			rc = buf_appendf(&kv, "%s=%s", line, v) ||
			     strlist_push(megascale, kv.data);
			buf_release(&kv);
			if (rc)
				return COMMON_ENOMEM;
		}
	}
	return 0;
}

/* Sets the coordinator to addr, without a ":PORT" (MEGASCALE_* may carry
 * one; an IPv6 address has more than one colon and is kept whole). */
static bool set_coordinator(struct identity *id, const char *addr)
{
	const char *colon = strchr(addr, ':');
	size_t n = colon && !strchr(colon + 1, ':') ? (size_t)(colon - addr)
						     : strlen(addr);

	if (!n || n >= sizeof(id->coordinator))
		return false;
	memcpy(id->coordinator, addr, n);
	id->coordinator[n] = '\0';
	return true;
}

/* The value of NAME in "NAME=value" entries, or NULL. */
static const char *entry_value(const struct strlist *l, const char *name)
{
	size_t n = strlen(name);

	for (size_t i = 0; i < l->n; i++)
		if (!strncmp(l->v[i], name, n) && l->v[i][n] == '=')
			return l->v[i] + n + 1;
	return NULL;
}

/* worker-network-endpoints lists the slice's workers ("uid:0:10.0.0.5,
 * uid:1:10.0.0.6"): a job sized otherwise was written for another slice.
 * The first worker's address becomes the coordinator, unless tpu-env
 * named one. */
static void read_endpoints(struct metadata_client *m, const struct job *j,
			   struct identity *id)
{
	char *text = NULL, *addr;
	unsigned n = 1;
	struct err e;

	err_init(&e);
	if (metadata_get(m, "instance/attributes/worker-network-endpoints",
			 &text, &e) || !text || !*text) {
		free(text);
		return;
	}
	for (const char *p = text; *p; p++)
		n += *p == ',';
	if (n != j->workers_per_slice)
		log_warn("this slice has %u workers (worker-network-endpoints) "
			 "but the job expects %u per slice: its workers will "
			 "wait for peers that do not exist",
			 n, j->workers_per_slice);
	text[strcspn(text, ",")] = '\0';
	addr = strrchr(text, ':');
	if (!id->coordinator[0] && !set_coordinator(id, addr ? addr + 1 : text))
		log_warn("worker-network-endpoints starts with '%.80s', not an "
			 "address", text);
	free(text);
}

/* Worker and slice from the metadata server. */
static int from_metadata(struct identity *id, const struct job *j, int *slice,
			 int *worker, struct err *e)
{
	struct metadata_client *m;
	const char *coord;
	char *text = NULL;
	int rc, wid = -1, sid = -1;

	rc = metadata_open(&m, e);
	if (rc)
		return rc;
	rc = metadata_get(m, "instance/attributes/tpu-env", &text, e);
	if (rc == CLOUD_ENOTFOUND)
		rc = 0;
	if (!rc && text &&
	    identity_parse_tpu_env(text, &id->megascale, &wid, &sid))
		rc = err_set(e, COMMON_ENOMEM, "out of memory");
	free(text);
	text = NULL;
	if (!rc && (coord = entry_value(&id->megascale,
					"MEGASCALE_COORDINATOR_ADDRESS")))
		set_coordinator(id, coord);
	if (!rc && *worker < 0 && wid < 0) {
		rc = metadata_get(m, "instance/attributes/agent-worker-number",
				  &text, e);
		if (!rc && !parse_uint(text, &wid))
			rc = err_set(e, COMMON_EINVAL,
				     "metadata agent-worker-number is '%.40s', "
				     "not a number", text);
		free(text);
	}
	if (!rc)
		read_endpoints(m, j, id);
	metadata_close(m);
	if (rc) {
		err_prefix(e, "finding which worker this is (pass --slice "
			      "and --worker outside a TPU VM)");
		return rc;
	}
	if (*worker < 0)
		*worker = wid;
	if (*slice < 0)
		*slice = sid < 0 ? 0 : sid;
	return 0;
}

/* Sets id from slice and worker, checked against the job's sizes. */
static int place(struct identity *id, const struct job *j, int slice,
		 int worker, struct err *e)
{
	if ((unsigned)slice >= j->num_slices ||
	    (unsigned)worker >= j->workers_per_slice)
		return err_set(e, COMMON_EINVAL,
			       "this is worker %d of slice %d, but the job "
			       "has %u slice%s of %u worker%s",
			       worker, slice, j->num_slices,
			       j->num_slices == 1 ? "" : "s",
			       j->workers_per_slice,
			       j->workers_per_slice == 1 ? "" : "s");
	id->slice = (unsigned)slice;
	id->worker = (unsigned)worker;
	id->num_slices = j->num_slices;
	id->workers_per_slice = j->workers_per_slice;
	id->num_processes = j->num_slices * j->workers_per_slice;
	id->process_id = id->slice * j->workers_per_slice + id->worker;
	run_worker_name(id->slice, id->worker, id->name, sizeof(id->name));
	return 0;
}

int identity_resolve(struct identity *id, const struct job *j, int slice,
		     int worker, struct err *e)
{
	int rc;

	if ((slice < 0 || worker < 0) &&
	    (rc = from_metadata(id, j, &slice, &worker, e)))
		return rc;
	if ((rc = place(id, j, slice, worker, e)))
		return rc;
	/* Flags alone: the local provider's workers, all on this machine. */
	if (!id->coordinator[0]) {
		if (id->num_processes > 1 && (slice < 0 || worker < 0))
			log_warn("the metadata server names no coordinator "
				 "(tpu-env, worker-network-endpoints): the "
				 "trainers' rendezvous is 127.0.0.1");
		set_coordinator(id, "127.0.0.1");
	}
	return 0;
}

extern char **environ;

/* The number in environment variable name (*found false when unset). */
static int pod_number(const char *name, const char *what, int *out,
		      bool *found, struct err *e)
{
	const char *v = getenv(name);

	*found = v && *v;
	if (!*found)
		return 0;
	if (!parse_uint(v, out))
		return err_set(e, COMMON_EINVAL,
			       "%s is '%.40s', not a number: it should hold "
			       "the pod's %s", name, v, what);
	return 0;
}

/* SLICE_POD_COORDINATOR, else MEGASCALE_COORDINATOR_ADDRESS; a pod alone
 * may have neither. */
static int pod_coordinator(struct identity *id, struct err *e)
{
	const char *var = "SLICE_POD_COORDINATOR";
	const char *v = getenv(var);

	if (!v || !*v) {
		var = "MEGASCALE_COORDINATOR_ADDRESS";
		v = getenv(var);
	}
	if (v && *v) {
		if (!set_coordinator(id, v))
			return err_set(e, COMMON_EINVAL,
				       "%s is '%.80s', not a host name or "
				       "address", var, v);
		return 0;
	}
	if (id->num_processes > 1)
		return err_set(e, COMMON_EINVAL,
			       "neither SLICE_POD_COORDINATOR nor "
			       "MEGASCALE_COORDINATOR_ADDRESS is set: --pod "
			       "takes the trainers' rendezvous host (the first "
			       "pod's DNS name) from one of them");
	set_coordinator(id, "127.0.0.1");
	return 0;
}

int identity_from_pod(struct identity *id, const struct job *j,
		      struct err *e)
{
	static const char slice_what[] =
		"JobSet job index (label jobset.sigs.k8s.io/job-index)";
	static const char worker_what[] =
		"Job completion index (label "
		"batch.kubernetes.io/job-completion-index)";
	const char *worker_var = "SLICE_POD_WORKER";
	int slice = -1, worker = -1, attempt = 0, rc;
	bool found;

	if ((rc = pod_number("SLICE_POD_SLICE", slice_what, &slice, &found,
			     e)))
		return rc;
	if (!found)
		return err_set(e, COMMON_EINVAL,
			       "SLICE_POD_SLICE is not set: --pod takes the "
			       "slice from the pod's %s through the downward "
			       "API", slice_what);
	if ((rc = pod_number(worker_var, worker_what, &worker, &found, e)))
		return rc;
	if (!found) {
		worker_var = "JOB_COMPLETION_INDEX";
		if ((rc = pod_number(worker_var, worker_what, &worker, &found,
				     e)))
			return rc;
	}
	if (!found)
		return err_set(e, COMMON_EINVAL,
			       "neither SLICE_POD_WORKER nor "
			       "JOB_COMPLETION_INDEX is set: --pod takes the "
			       "worker from the pod's %s", worker_what);
	if ((rc = pod_number("SLICE_POD_RESTART_ATTEMPT",
			     "JobSet restart attempt (label "
			     "jobset.sigs.k8s.io/restart-attempt)",
			     &attempt, &found, e)))
		return rc;
	if ((rc = place(id, j, slice, worker, e))) {
		err_prefix(e, "SLICE_POD_SLICE=%d, %s=%d", slice, worker_var,
			   worker);
		return rc;
	}
	id->restart_attempt = (unsigned)attempt;
	for (char **p = environ; *p; p++) {
		const char *eq = strchr(*p, '=');

		if (!strncmp(*p, "MEGASCALE_", 10) && eq &&
		    env_name_valid(*p, (size_t)(eq - *p)) &&
		    strlist_push(&id->megascale, *p))
			return err_set(e, COMMON_ENOMEM, "out of memory");
	}
	return pod_coordinator(id, e);
}

bool identity_first_host(const char *list, char *out, size_t len)
{
	size_t n = strcspn(list, "[,");
	size_t digits;

	if (!n || n >= len)
		return false;
	memcpy(out, list, n);
	out[n] = '\0';
	if (list[n] != '[')
		return true;
	/* The range's first number, zero padding kept. */
	digits = strspn(list + n + 1, "0123456789");
	if (!digits || n + digits >= len ||
	    !strchr("-,]", list[n + 1 + digits]))
		return false;
	memcpy(out + n, list + n + 1, digits);
	out[n + digits] = '\0';
	return true;
}

/* Slurm's number in name; required unless dflt >= 0. */
static int slurm_number(const char *name, int dflt, int *out, struct err *e)
{
	bool found;
	int rc = pod_number(name, "value srun gives each task", out, &found,
			    e);

	if (rc)
		return rc;
	if (found)
		return 0;
	if (dflt < 0)
		return err_set(e, COMMON_EINVAL,
			       "%s is not set: --slurm runs as a task of "
			       "`srun --ntasks-per-node=1` in the run's batch "
			       "job", name);
	*out = dflt;
	return 0;
}

int identity_from_slurm(struct identity *id, const struct job *j,
			struct err *e)
{
	const char *list = getenv("SLURM_JOB_NODELIST");
	int node, proc, nnodes, restarts, rc;
	unsigned wps = j->workers_per_slice;
	char first[256], kv[3][320];

	if ((rc = slurm_number("SLURM_NODEID", -1, &node, e)) ||
	    (rc = slurm_number("SLURM_PROCID", -1, &proc, e)) ||
	    (rc = slurm_number("SLURM_NNODES", -1, &nnodes, e)) ||
	    (rc = slurm_number("SLURM_RESTART_COUNT", 0, &restarts, e)))
		return rc;
	if (proc != node)
		return err_set(e, COMMON_EINVAL,
			       "SLURM_PROCID=%d but SLURM_NODEID=%d: the "
			       "supervisor runs one task per node (srun "
			       "--ntasks-per-node=1)", proc, node);
	if ((unsigned)nnodes != j->num_slices * wps)
		return err_set(e, COMMON_EINVAL,
			       "SLURM_NNODES=%d but the job has %u worker%s: "
			       "the batch job must ask for one node per "
			       "worker", nnodes, j->num_slices * wps,
			       j->num_slices * wps == 1 ? "" : "s");
	if (!list || !*list)
		list = getenv("SLURM_NODELIST");
	if (!list || !identity_first_host(list, first, sizeof(first)))
		return err_set(e, COMMON_EINVAL,
			       "SLURM_JOB_NODELIST is '%.80s', not a Slurm "
			       "hostlist: the coordinator is its first node",
			       list ? list : "(unset)");
	if ((rc = place(id, j, node / (int)wps, node % (int)wps, e)))
		return rc;
	id->restart_attempt = (unsigned)restarts;
	if (!set_coordinator(id, first))
		return err_set(e, COMMON_EINVAL,
			       "the first node of SLURM_JOB_NODELIST, '%.80s', "
			       "is too long a name", first);
	snprintf(kv[0], sizeof(kv[0]), "MEGASCALE_COORDINATOR_ADDRESS=%s",
		 first);
	snprintf(kv[1], sizeof(kv[1]), "MEGASCALE_NUM_SLICES=%u",
		 j->num_slices);
	snprintf(kv[2], sizeof(kv[2]), "MEGASCALE_SLICE_ID=%u", id->slice);
	for (size_t i = 0; i < 3; i++)
		if (strlist_push(&id->megascale, kv[i]))
			return err_set(e, COMMON_ENOMEM, "out of memory");
	return 0;
}

/* "host:port" (or "[v6]:port") without its port, into id's coordinator. */
static bool vertex_host(struct identity *id, const char *addr)
{
	char host[sizeof(id->coordinator)];
	const char *colon = strrchr(addr, ':');
	size_t n = colon ? (size_t)(colon - addr) : strlen(addr);

	if (n && addr[0] == '[' && addr[n - 1] == ']') {
		addr++;
		n -= 2;
	}
	if (!n || n >= sizeof(host))
		return false;
	memcpy(host, addr, n);
	host[n] = '\0';
	snprintf(id->coordinator, sizeof(id->coordinator), "%s", host);
	return true;
}

/* The replicas' addresses of pool in spec's "cluster" (NULL: none). */
static json_t *vertex_pool(const json_t *spec, const char *pool)
{
	json_t *a = json_object_get(json_object_get(spec, "cluster"), pool);

	return json_is_array(a) ? a : NULL;
}

/* CLUSTER_SPEC's task: the process of the run it is. */
static int vertex_task(const json_t *spec, int *process, struct err *e)
{
	const json_t *task = json_object_get(spec, "task");
	const char *type = json_string_value(json_object_get(task, "type"));
	const json_t *index = json_object_get(task, "index");
	json_int_t i = json_integer_value(index);

	if (!type || !json_is_integer(index) || i < 0)
		return err_set(e, COMMON_EINVAL,
			       "CLUSTER_SPEC has no task {\"type\", \"index\"}: "
			       "--vertex runs in a Vertex AI custom job's "
			       "replica");
	if (!strcmp(type, "workerpool0") && i == 0) {
		*process = 0;
		return 0;
	}
	if (!strcmp(type, "workerpool1") && i < 1000000) {
		*process = 1 + (int)i;
		return 0;
	}
	return err_set(e, COMMON_EINVAL,
		       "CLUSTER_SPEC's task is %s %lld: the run's CustomJob has "
		       "the primary alone in workerpool0 and the other workers "
		       "in workerpool1", type, (long long)i);
}

static const char *primary_address(const json_t *primary)
{
	const char *a = json_string_value(json_array_get(primary, 0));

	return a ? a : "";
}

int identity_from_vertex(struct identity *id, const struct job *j,
			 struct err *e)
{
	const char *text = getenv("CLUSTER_SPEC");
	unsigned n = j->num_slices * j->workers_per_slice;
	json_t *spec, *primary;
	json_error_t je;
	size_t replicas;
	int process = -1, rc;

	if (!text || !*text)
		return err_set(e, COMMON_EINVAL,
			       "CLUSTER_SPEC is not set: --vertex takes this "
			       "replica's place from the variable Vertex AI "
			       "sets in a custom job's containers");
	spec = json_loads(text, 0, &je);
	if (!json_is_object(spec)) {
		json_decref(spec);
		return err_set(e, COMMON_EINVAL,
			       "CLUSTER_SPEC is not a JSON object: %s", je.text);
	}
	primary = vertex_pool(spec, "workerpool0");
	replicas = (primary ? json_array_size(primary) : 0) +
		   (vertex_pool(spec, "workerpool1")
			    ? json_array_size(vertex_pool(spec, "workerpool1"))
			    : 0);
	if (replicas == 1 && n > 1) {
		/* A TPU slice is one replica whose hosts each run the
		 * container: which host this is, the TPU VM's metadata
		 * server says. */
		json_decref(spec);
		return identity_resolve(id, j, -1, -1, e);
	}
	rc = vertex_task(spec, &process, e);
	if (!rc && (replicas != n || !json_array_size(primary)))
		rc = err_set(e, COMMON_EINVAL,
			     "CLUSTER_SPEC lists %zu replica%s but the job has "
			     "%u worker%s: the CustomJob was not rendered for "
			     "this run", replicas, replicas == 1 ? "" : "s", n,
			     n == 1 ? "" : "s");
	if (!rc && !vertex_host(id, primary_address(primary)))
		rc = err_set(e, COMMON_EINVAL,
			     "CLUSTER_SPEC's workerpool0[0] is not host:port");
	json_decref(spec);
	if (rc)
		return rc;
	/* Every worker's host reaches the primary's: the trainers'
	 * rendezvous (MASTER_ADDR). A restart brings new containers, not
	 * a count: the bucket's heartbeats say an earlier one ran. */
	return place(id, j, process / (int)j->workers_per_slice,
		     process % (int)j->workers_per_slice, e);
}
