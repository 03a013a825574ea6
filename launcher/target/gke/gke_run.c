/*
 * gke_run.c: a run's JobSet in its cluster: reaching the cluster (the GKE
 * API's endpoint and CA, or a kubeconfig), checking that JobSet, Kueue
 * and the LocalQueue are there, creating the JobSet and following Kueue's
 * admission until the pods run, and, for the operator commands, the
 * Kueue state and pods of a run and its deletion (target.h).
 */
#include "cloud/cloud.h"
#include "kube/kube.h"
#include "launcher/target/gke/gke.h"
#include "launcher/job.h"
#include "launcher/launcher.h"
#include "launcher/target/target.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define JOBSET_API "/apis/jobset.x-k8s.io/v1alpha2"
#define KUEUE_GROUP "/apis/kueue.x-k8s.io/"
#define VISIBILITY_API "/apis/visibility.kueue.x-k8s.io/v1beta1"
#define JOBSET_INSTALL \
	"kubectl apply --server-side -f https://github.com/kubernetes-sigs/" \
	"jobset/releases/download/v0.10.1/manifests.yaml"
#define KUEUE_INSTALL \
	"kubectl apply --server-side -f https://github.com/kubernetes-sigs/" \
	"kueue/releases/download/v0.19.2/manifests.yaml"
#define DEFAULT_POLL_MS 2000

void gke_conn_init(struct gke_conn *c)
{
	memset(c, 0, sizeof(*c));
}

void gke_conn_release(struct gke_conn *c)
{
	kube_client_free(c->k);
	free(c->namespace);
	free(c->project);
	free(c->kubeconfig);
	free(c->context);
	gke_conn_init(c);
}

static int dup_into(char **dst, const char *s)
{
	if (!s)
		return 0;
	*dst = strdup(s);
	return *dst ? 0 : -1;
}

int gke_connect(const char *cluster, const char *location, const char *project,
		const char *kubeconfig, const char *context,
		struct gke_conn *out, struct err *e)
{
	struct kube_config cfg;
	int rc;

	kube_config_init(&cfg);
	if (cluster) {
		struct gke_cluster gc = { 0 };
		char project_buf[128];

		if (gcloud_default(project, "core", "project", project_buf,
				   sizeof(project_buf), &project, e))
			return COMMON_EUSAGE;
		if (!project)
			return err_set(e, COMMON_EUSAGE,
				       "no project for --cluster %s: pass "
				       "--project, set CLOUDSDK_CORE_PROJECT or "
				       "run `gcloud config set project PROJECT`",
				       cluster);
		rc = gke_cluster_get(project, location, cluster, &gc, e);
		if (!rc && *gc.status && strcmp(gc.status, "RUNNING") &&
		    strcmp(gc.status, "RECONCILING"))
			rc = err_set(e, COMMON_EIO,
				     "cluster %s is %s, not RUNNING", cluster,
				     gc.status);
		if (!rc)
			rc = kube_config_from_endpoint(gc.endpoint,
						       gc.ca_certificate,
						       gc.token, &cfg, e);
		gke_cluster_release(&gc);
		if (rc)
			err_prefix(e, "cluster %s in %s (project %s)", cluster,
				   location, project);
		else if (dup_into(&out->project, project))
			rc = err_set(e, COMMON_ENOMEM, "out of memory");
	} else {
		rc = kube_config_load(kubeconfig, context, &cfg, e);
		/* job.json keeps the path for commands run from elsewhere. */
		if (!rc && kubeconfig && !(out->kubeconfig = realpath(kubeconfig,
								      NULL)))
			rc = err_errno(e, COMMON_EIO, errno, "--kubeconfig %s",
				       kubeconfig);
		if (!rc && (dup_into(&out->context, cfg.context) ||
			    dup_into(&out->namespace, cfg.namespace)))
			rc = err_set(e, COMMON_ENOMEM, "out of memory");
	}
	if (!rc)
		rc = kube_client_new(&cfg, &out->k, e);
	kube_config_release(&cfg);
	return rc;
}

/* Appends a hint to the server's message. */
static void add_hint(struct err *e, const char *fmt, ...) ATTR_PRINTF(2, 3);

static void add_hint(struct err *e, const char *fmt, ...)
{
	size_t n = strlen(e->msg);
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(e->msg + n, sizeof(e->msg) - n, fmt, ap);
	va_end(ap);
}

int gke_exit_status(const struct err *e)
{
	log_error("%s", e->msg);
	switch (e->code) {
	case COMMON_EUSAGE:
	case COMMON_EINVAL:
	case KUBE_ECONFIG:
		return EXIT_USAGE;
	default:
		return 1;
	}
}

/* The exit status of a run whose JobSet a request refused, after adding
 * the hint for a 403. */
static int kube_status(struct err *e, const char *ns)
{
	if (e->code == KUBE_EFORBIDDEN)
		add_hint(e, "; slicectl needs to create and delete jobsets "
			      "and to get localqueues, workloads and pods in "
			      "namespace %s (roles/container.developer on GKE, "
			      "or a Role with those verbs)", ns);
	return gke_exit_status(e);
}

/* Whether an API group version is served (404: not installed). */
static int api_served(struct kube_client *k, const char *path, bool *served,
		      struct err *e)
{
	json_t *out = NULL;
	int rc = kube_get(k, path, &out, e);

	json_decref(out);
	*served = !rc;
	if (rc == KUBE_ENOTFOUND) {
		err_init(e);
		return 0;
	}
	return rc;
}

int gke_preflight(struct gke_conn *c, const struct gke_spec *s)
{
	char path[512];
	json_t *lq = NULL;
	bool served;
	struct err e;
	int rc;

	err_init(&e);
	rc = api_served(c->k, JOBSET_API, &served, &e);
	if (!rc && !served) {
		log_error("JobSet is not installed in this cluster (it does not "
			  "serve %s); install it: %s", JOBSET_API,
			  JOBSET_INSTALL);
		return 1;
	}
	for (int v = 0; !rc && v < 2; v++) {
		snprintf(c->kueue, sizeof(c->kueue), "%s%s", KUEUE_GROUP,
			 v ? "v1beta1" : "v1beta2");
		rc = api_served(c->k, c->kueue, &served, &e);
		if (served)
			break;
	}
	if (!rc && !served) {
		log_error("Kueue is not installed in this cluster (it does not "
			  "serve %sv1beta2); install it: %s", KUEUE_GROUP,
			  KUEUE_INSTALL);
		return 1;
	}
	if (!rc) {
		snprintf(path, sizeof(path), "%s/namespaces/%s/localqueues/%s",
			 c->kueue, s->namespace, s->queue);
		rc = kube_get(c->k, path, &lq, &e);
		json_decref(lq);
		if (rc == KUBE_ENOTFOUND) {
			log_error("there is no LocalQueue %s in namespace %s: "
				  "kubectl get localqueues -n %s lists them "
				  "(an admin creates one in front of a "
				  "ClusterQueue with google.com/tpu quota)",
				  s->queue, s->namespace, s->namespace);
			return 1;
		}
	}
	return rc ? kube_status(&e, s->namespace) : 0;
}

static const char *str_at(const json_t *o, const char *a, const char *b)
{
	const json_t *v = json_object_get(o, a);

	if (b)
		v = json_object_get(v, b);
	return json_is_string(v) ? json_string_value(v) : NULL;
}

/* A condition of status.conditions that is "True", or NULL. */
static const json_t *condition(const json_t *obj, const char *type)
{
	const json_t *list = json_object_get(json_object_get(obj, "status"),
					     "conditions");
	size_t i;
	json_t *c;

	json_array_foreach(list, i, c) {
		const char *t = str_at(c, "type", NULL);
		const char *st = str_at(c, "status", NULL);

		if (t && st && !strcmp(t, type) && !strcmp(st, "True"))
			return c;
	}
	return NULL;
}

/* *out: the Kueue Workload of JobSet run (owned by it), or NULL when
 * Kueue has none (yet). Returns 0 or the kube error of the listing. */
static int find_workload(struct gke_conn *c, const char *ns, const char *run,
			 json_t **out, struct err *e)
{
	char path[512];
	json_t *list = NULL, *found = NULL, *w;
	size_t i;
	int rc;

	*out = NULL;
	snprintf(path, sizeof(path), "%s/namespaces/%s/workloads", c->kueue,
		 ns);
	rc = kube_list(c->k, path, NULL, &list, e);
	if (rc)
		return rc;
	json_array_foreach(json_object_get(list, "items"), i, w) {
		const json_t *owners = json_object_get(
			json_object_get(w, "metadata"), "ownerReferences");
		size_t j;
		json_t *o;

		json_array_foreach(owners, j, o) {
			const char *kind = str_at(o, "kind", NULL);
			const char *name = str_at(o, "name", NULL);

			if (kind && name && !strcmp(kind, "JobSet") &&
			    !strcmp(name, run))
				found = json_incref(w);
		}
		if (found)
			break;
	}
	json_decref(list);
	*out = found;
	return 0;
}

/* Kueue's word for a workload: admitted, quota reserved, evicted,
 * finished or pending, with the message of the condition that says so. */
static const char *workload_state(const json_t *w, const char **msg)
{
	static const char *const order[][2] = {
		{ "Finished", "finished" },   { "Evicted", "evicted" },
		{ "Admitted", "admitted" },   { "QuotaReserved", "quota reserved" },
	};
	const json_t *c;

	*msg = NULL;
	if (!w)
		return "no workload yet";
	for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++) {
		c = condition(w, order[i][0]);
		if (c) {
			*msg = str_at(c, "message", NULL);
			return order[i][1];
		}
	}
	c = json_array_get(json_object_get(json_object_get(w, "status"),
					   "conditions"), 0);
	*msg = c ? str_at(c, "message", NULL) : NULL;
	return "pending";
}

/* The workload's position in its LocalQueue, from Kueue's visibility API
 * (-1 when the cluster does not serve it or does not list the run). */
static long queue_position(struct gke_conn *c, const char *ns,
			   const char *queue, const char *workload)
{
	char path[512];
	json_t *list = NULL, *item;
	long pos = -1;
	struct err e;
	size_t i;

	if (c->no_visibility || !workload)
		return -1;
	err_init(&e);
	snprintf(path, sizeof(path),
		 VISIBILITY_API "/namespaces/%s/localqueues/%s/pendingworkloads",
		 ns, queue);
	if (kube_get(c->k, path, &list, &e)) {
		c->no_visibility = true;
		return -1;
	}
	json_array_foreach(json_object_get(list, "items"), i, item) {
		const char *name = str_at(item, "metadata", "name");
		json_t *p = json_object_get(item, "positionInLocalQueue");

		if (name && !strcmp(name, workload) && json_is_integer(p))
			pos = (long)json_integer_value(p);
	}
	json_decref(list);
	return pos;
}

/* Pods of the run by phase. */
struct pod_count {
	unsigned total, running, pending, succeeded, failed;
};

static int list_pods(struct gke_conn *c, const char *ns, const char *run,
		     json_t **out, struct err *e)
{
	char path[512], selector[300];

	snprintf(path, sizeof(path), "/api/v1/namespaces/%s/pods", ns);
	snprintf(selector, sizeof(selector),
		 "jobset.sigs.k8s.io/jobset-name=%s", run);
	return kube_list(c->k, path, selector, out, e);
}

static void count_pods(const json_t *list, struct pod_count *n)
{
	json_t *p;
	size_t i;

	memset(n, 0, sizeof(*n));
	json_array_foreach(json_object_get(list, "items"), i, p) {
		const char *phase = str_at(p, "status", "phase");

		if (json_object_get(json_object_get(p, "metadata"),
				    "deletionTimestamp"))
			continue;
		n->total++;
		if (!phase)
			n->pending++;
		else if (!strcmp(phase, "Running"))
			n->running++;
		else if (!strcmp(phase, "Succeeded"))
			n->succeeded++;
		else if (!strcmp(phase, "Failed"))
			n->failed++;
		else
			n->pending++;
	}
}

/* JobSet's own end: "Completed", "Failed", or NULL while it runs. */
static const char *jobset_end(const json_t *js)
{
	const char *t = str_at(json_object_get(js, "status"), "terminalState",
			       NULL);

	if (t && *t)
		return t;
	if (condition(js, "Completed"))
		return "Completed";
	if (condition(js, "Failed"))
		return "Failed";
	return NULL;
}

static unsigned poll_ms(void)
{
	return job_env_ms("SLICECTL_GKE_POLL_MS", DEFAULT_POLL_MS);
}

/* Follows the JobSet until its pods all run (0) or it ends (0 when it
 * completed, 1 when it failed). */
static int follow(struct gke_conn *c, const struct gke_spec *s)
{
	unsigned want = s->num_slices * s->acc.workers, errors = 0;
	char path[512], last[512] = "", line[512];
	uint64_t start = mono_ms();

	snprintf(path, sizeof(path), JOBSET_API "/namespaces/%s/jobsets/%s",
		 s->namespace, s->run);
	for (;;) {
		json_t *js = NULL, *w = NULL, *pods = NULL;
		const char *state, *msg, *end;
		struct pod_count n = { 0 };
		char where[64] = "";
		struct err e;
		long pos;
		int rc;

		err_init(&e);
		rc = kube_get(c->k, path, &js, &e);
		if (!rc)
			rc = find_workload(c, s->namespace, s->run, &w, &e);
		if (!rc)
			rc = list_pods(c, s->namespace, s->run, &pods, &e);
		if (rc) {
			json_decref(js);
			json_decref(w);
			if (rc == KUBE_ENOTFOUND || ++errors >= 30)
				return kube_status(&e, s->namespace);
			log_warn("%s", e.msg);
			proc_sleep_ms(poll_ms(), true);
			continue;
		}
		errors = 0;
		count_pods(pods, &n);
		json_decref(pods);
		state = workload_state(w, &msg);
		pos = strcmp(state, "pending")
			      ? -1
			      : queue_position(c, s->namespace, s->queue,
					       str_at(w, "metadata", "name"));
		if (pos >= 0)
			snprintf(where, sizeof(where), ", %ld ahead of it in %s",
				 pos, s->queue);
		snprintf(line, sizeof(line),
			 "%s: Kueue %s%s%s%s; pods %u/%u running", s->run,
			 state, where, msg ? ": " : "", msg ? msg : "",
			 n.running, want);
		if (strcmp(line, last)) {
			job_say(start, "%s", line);
			snprintf(last, sizeof(last), "%s", line);
		}
		end = jobset_end(js);
		if (end) {
			bool ok = !strcmp(end, "Completed");

			job_say(start, "%s: JobSet %s", s->run, end);
			json_decref(js);
			json_decref(w);
			return ok ? 0 : 1;
		}
		json_decref(js);
		json_decref(w);
		if (n.running >= want && !strcmp(state, "admitted"))
			return 0;
		proc_sleep_ms(poll_ms(), true);
	}
}

static void print_follow(const struct gke_spec *s)
{
	const char *n = s->run;
	char bucket[2048];
	size_t blen = strlen(s->run_url) - strlen(n) - 1;

	snprintf(bucket, sizeof(bucket), "%.*s", (int)blen, s->run_url);
	printf("Follow the run:\n"
	       "  slicectl status %s --bucket %s       Kueue, pods, workers\n"
	       "  slicectl logs %s --bucket %s --worker 0/0 --follow\n"
	       "  slicectl restart %s --bucket %s      a group restart\n"
	       "  slicectl stop %s --bucket %s\n"
	       "  slicectl delete %s --bucket %s       deletes the JobSet\n"
	       "  kubectl get jobset,workload,pods -n %s -l "
	       "slicectl.dev/run=%s\n",
	       n, bucket, n, bucket, n, bucket, n, bucket, n, bucket,
	       s->namespace, n);
	fflush(stdout);
}

int gke_submit(struct gke_conn *c, const struct gke_spec *s, json_t *js,
	       const char *run_url)
{
	char coll[512], path[600];
	json_t *old = NULL;
	struct err e;
	int rc, status;

	err_init(&e);
	snprintf(coll, sizeof(coll), JOBSET_API "/namespaces/%s/jobsets",
		 s->namespace);
	fprintf(stderr, "slicectl: creating JobSet %s/%s: %u slice%s of %s "
		"(%u pods of google.com/tpu %u), queue %s\n", s->namespace,
		s->run, s->num_slices, s->num_slices == 1 ? "" : "s",
		s->acc.family, s->num_slices * s->acc.workers,
		s->acc.chips_per_host, s->queue);
	rc = kube_create(c->k, coll, js, false, NULL, &e);
	if (rc == KUBE_ECONFLICT) {
		const char *owner;

		snprintf(path, sizeof(path), "%s/%s", coll, s->run);
		err_init(&e);
		rc = kube_get(c->k, path, &old, &e);
		owner = str_at(json_object_get(json_object_get(old, "metadata"),
					       "labels"),
			       "slicectl.dev/run", NULL);
		if (!rc && (!owner || strcmp(owner, s->run))) {
			log_error("JobSet %s/%s exists and is not this run's; "
				  "choose another --name", s->namespace, s->run);
			json_decref(old);
			return 1;
		}
		json_decref(old);
		if (!rc)
			log_info("JobSet %s/%s exists already: keeping it",
				 s->namespace, s->run);
	} else if (rc == KUBE_ENOTFOUND) {
		add_hint(&e, "; is JobSet installed? %s", JOBSET_INSTALL);
	}
	if (rc)
		return kube_status(&e, s->namespace);
	printf("%s: JobSet %s/%s created; its workers run %s\n", s->run,
	       s->namespace, s->run, run_url);
	fflush(stdout);
	status = follow(c, s);
	print_follow(s);
	return status;
}

static int connect_run(const struct job_target *t, struct gke_conn *c,
		       struct err *e)
{
	bool served = false;
	int rc;

	gke_conn_init(c);
	rc = gke_connect(t->cluster, t->location, t->project, t->kubeconfig,
			 t->context, c, e);
	for (int v = 0; !rc && !served && v < 2; v++) {
		snprintf(c->kueue, sizeof(c->kueue), "%s%s", KUEUE_GROUP,
			 v ? "v1beta1" : "v1beta2");
		rc = api_served(c->k, c->kueue, &served, e);
	}
	return rc;
}

static long label_num(const json_t *labels, const char *key)
{
	const char *v = str_at(labels, key, NULL);
	char *end;
	long n;

	if (!v || !*v)
		return -1;
	errno = 0;
	n = strtol(v, &end, 10);
	return errno || *end ? -1 : n;
}

static int take_pods(const json_t *list, struct target_view *out)
{
	size_t n = json_array_size(json_object_get(list, "items")), i;
	json_t *p;

	out->workers = n ? calloc(n, sizeof(*out->workers)) : NULL;
	if (n && !out->workers)
		return -1;
	json_array_foreach(json_object_get(list, "items"), i, p) {
		const json_t *md = json_object_get(p, "metadata");
		const json_t *labels = json_object_get(md, "labels");
		struct target_worker *w = &out->workers[out->n++];
		const char *s;

		w->slice = (int)label_num(labels, "jobset.sigs.k8s.io/job-index");
		w->worker = (int)label_num(
			labels, "batch.kubernetes.io/job-completion-index");
		w->restart_attempt =
			label_num(labels, "jobset.sigs.k8s.io/restart-attempt");
		s = str_at(md, "name", NULL);
		snprintf(w->name, sizeof(w->name), "%s", s ? s : "");
		s = str_at(p, "status", "phase");
		snprintf(w->phase, sizeof(w->phase), "%s",
			 json_object_get(md, "deletionTimestamp") ? "Terminating"
			 : s					  ? s
								  : "Pending");
		s = str_at(p, "spec", "nodeName");
		snprintf(w->node, sizeof(w->node), "%s", s ? s : "");
	}
	return 0;
}

int gke_describe(const struct job *j, struct target_view *out,
		 struct err *e)
{
	const struct job_target *t = &j->target;
	json_t *js = NULL, *w = NULL, *pods = NULL;
	struct gke_conn c;
	char path[512];
	const char *state, *msg, *end, *queue;
	int rc;

	snprintf(out->what, sizeof(out->what), "JobSet %s/%s", t->namespace,
		 t->jobset);
	rc = connect_run(t, &c, e);
	if (!rc) {
		snprintf(path, sizeof(path),
			 JOBSET_API "/namespaces/%s/jobsets/%s", t->namespace,
			 t->jobset);
		rc = kube_get(c.k, path, &js, e);
		if (rc == KUBE_ENOTFOUND) {
			out->missing = true;
			snprintf(out->state, sizeof(out->state), "deleted");
			err_init(e);
			rc = 0;
		}
	}
	if (!rc && js) {
		const json_t *r = json_object_get(json_object_get(js, "status"),
						  "restarts");

		out->restarts = json_is_integer(r) ? (long)json_integer_value(r)
						   : 0;
		end = jobset_end(js);
		snprintf(out->end, sizeof(out->end), "%s", end ? end : "");
		rc = find_workload(&c, t->namespace, t->jobset, &w, e);
	}
	if (!rc && js) {
		state = workload_state(w, &msg);
		snprintf(out->state, sizeof(out->state), "%s", state);
		snprintf(out->message, sizeof(out->message), "%s",
			 msg ? msg : "");
		queue = str_at(json_object_get(json_object_get(js, "metadata"),
					       "labels"),
			       "kueue.x-k8s.io/queue-name", NULL);
		if (queue && !strcmp(state, "pending"))
			out->position = queue_position(
				&c, t->namespace, queue,
				str_at(w, "metadata", "name"));
	}
	if (!rc)
		rc = list_pods(&c, t->namespace, t->jobset, &pods, e);
	if (!rc && take_pods(pods, out))
		rc = err_set(e, COMMON_ENOMEM, "out of memory");
	json_decref(js);
	json_decref(w);
	json_decref(pods);
	gke_conn_release(&c);
	return rc;
}

int gke_delete(const struct job *j, bool wait, unsigned timeout_ms,
	       bool *absent, struct err *e)
{
	const struct job_target *t = &j->target;
	uint64_t deadline = mono_ms() + timeout_ms;
	struct gke_conn c;
	char path[512];
	int rc;

	*absent = false;
	gke_conn_init(&c);
	rc = gke_connect(t->cluster, t->location, t->project, t->kubeconfig,
			 t->context, &c, e);
	snprintf(path, sizeof(path), JOBSET_API "/namespaces/%s/jobsets/%s",
		 t->namespace, t->jobset);
	if (!rc) {
		/* Foreground: the JobSet goes once its Jobs and pods have. */
		rc = kube_delete(c.k, path, "Foreground", e);
		*absent = rc == KUBE_ENOTFOUND;
		if (*absent) {
			err_init(e);
			rc = 0;
			wait = false;
		}
	}
	while (!rc && wait) {
		json_t *js = NULL;

		rc = kube_get(c.k, path, &js, e);
		json_decref(js);
		if (rc == KUBE_ENOTFOUND) {
			err_init(e);
			rc = 0;
			break;
		}
		if (!rc && timeout_ms && mono_ms() >= deadline)
			rc = err_set(e, COMMON_EIO,
				     "JobSet %s/%s is still being deleted",
				     t->namespace, t->jobset);
		if (!rc)
			proc_sleep_ms(poll_ms(), true);
	}
	gke_conn_release(&c);
	return rc;
}

/* The highest restart attempt among the pods of list, and how many of
 * that attempt run. */
static long newest_attempt(const json_t *list, unsigned *running)
{
	long most = -1;
	size_t i;
	json_t *p;

	*running = 0;
	json_array_foreach(json_object_get(list, "items"), i, p) {
		long a = label_num(json_object_get(json_object_get(p,
								   "metadata"),
						   "labels"),
				   "jobset.sigs.k8s.io/restart-attempt");
		const char *phase = str_at(p, "status", "phase");
		bool run = phase && !strcmp(phase, "Running") &&
			   !json_object_get(json_object_get(p, "metadata"),
					    "deletionTimestamp");

		if (a > most) {
			most = a;
			*running = 0;
		}
		if (a == most && run)
			++*running;
	}
	return most;
}

int gke_reset(const struct job *j, bool wait, unsigned timeout_ms,
	      long *attempt, struct err *e)
{
	const struct job_target *t = &j->target;
	unsigned pods = j->num_slices * j->workers_per_slice;
	uint64_t deadline = mono_ms() + timeout_ms;
	json_t *list = NULL;
	unsigned running;
	struct gke_conn c;
	char path[512];
	long before = -1;
	int rc;

	*attempt = -1;
	gke_conn_init(&c);
	rc = gke_connect(t->cluster, t->location, t->project, t->kubeconfig,
			 t->context, &c, e);
	if (!rc)
		rc = list_pods(&c, t->namespace, t->jobset, &list, e);
	if (!rc) {
		before = newest_attempt(list, &running);
		if (!json_array_size(json_object_get(list, "items")))
			rc = err_set(e, KUBE_ENOTFOUND,
				     "JobSet %s/%s has no pods to reset (is it "
				     "admitted? slicectl status shows Kueue's "
				     "state)", t->namespace, t->jobset);
	}
	json_decref(list);
	list = NULL;
	if (!rc) {
		json_t *out = NULL;
		long status;

		/* All at once (deletecollection), as a reset takes every VM
		 * of a queued resource together. */
		snprintf(path, sizeof(path),
			 "/api/v1/namespaces/%s/pods?labelSelector="
			 "jobset.sigs.k8s.io%%2Fjobset-name%%3D%s",
			 t->namespace, t->jobset);
		rc = kube_request(c.k, "DELETE", path, NULL, &status, &out, e);
		json_decref(out);
	}
	while (!rc && wait) {
		rc = list_pods(&c, t->namespace, t->jobset, &list, e);
		if (!rc) {
			long now = newest_attempt(list, &running);

			if (now > before && running >= pods) {
				*attempt = now;
				wait = false;
			}
		}
		json_decref(list);
		list = NULL;
		if (!rc && wait && timeout_ms && mono_ms() >= deadline)
			rc = err_set(e, COMMON_EIO,
				     "JobSet %s/%s's pods are not all running "
				     "again yet", t->namespace, t->jobset);
		if (!rc && wait)
			proc_sleep_ms(poll_ms(), true);
	}
	gke_conn_release(&c);
	return rc;
}
