/*
 * cmd_job.c: `slicectl job`: hands a training job to the workers'
 * supervisors. job_prepare (job.c) puts the run's objects in the bucket
 * and renders the startup script; on Cloud TPU this file then creates the
 * queued resource that boots every worker with it, and with --watch stays
 * to recreate the queued resource when a preemption suspends it. With
 * --local the local provider (local.h) runs the workers here instead;
 * --target gke and --target slurm hand over to gke_job.c and slurm_job.c.
 */
#include "launcher/accelerator.h"
#include "launcher/target/gke/gke.h"
#include "launcher/hosts.h"
#include "launcher/job.h"
#include "launcher/launcher.h"
#include "launcher/target/local/local.h"
#include "launcher/qr_spec.h"
#include "launcher/target/slurm/slurm.h"
#include "launcher/tpu_options.h"
#include "launcher/watch_state.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define DEFAULT_RECREATE_BUDGET 10
/* --watch's periods, in units of SLICECTL_TPU_POLL_MS (default 1000 ms):
 * the poll, and the backoff before recreating (base and cap). */
#define WATCH_POLL_UNITS 10
#define WATCH_BACKOFF_BASE_UNITS 30
#define WATCH_BACKOFF_MAX_UNITS 600
/* Polls in a row that may fail before --watch gives up. */
#define WATCH_MAX_ERRORS 30

static const char usage[] =
	"usage: slicectl job RUN --bucket gs://BUCKET[/PREFIX] "
	"--accelerator-type T\n"
	"                    --command CMD [options]\n"
	"       slicectl job RUN --local --workers-per-slice W "
	"--bucket file:///DIR\n"
	"                    --command CMD [options]\n"
	"       slicectl job RUN --target gke --cluster C --location L "
	"--queue LQ\n"
	"                    --image IMG --bucket URL --accelerator-type T\n"
	"                    --command CMD [options]\n"
	"       slicectl job RUN --target slurm --partition P --nodes N "
	"--bucket URL\n"
	"                    --command CMD [options]\n"
	"\n"
	"RUN may be given as --name RUN too, and --node-count as --num-slices\n"
	"(the older spellings).\n"
	"\n"
	"Hands a training job to slice-supervisor on every worker. Checks\n"
	"everything first, then uploads to BUCKET/RUN the code bundle (the\n"
	"--script-dir, as bundle.tar.zst), the supervisor binary, job.json and\n"
	"control.json, and creates the queued resource RUN (--node-count\n"
	"slices) whose startup script installs and starts the supervisor on\n"
	"each worker. The supervisors run --command, ship checkpoints, and\n"
	"restart the whole group from the newest committed step after a\n"
	"crash, hang, reset or preemption. slicectl's ssh key goes into the\n"
	"nodes' metadata, so `slicectl run --tpu RUN` works too.\n"
	"\n"
	"A run's job.json is written once: the same command again resumes the\n"
	"run; other flags under the same name are refused.\n"
	"\n"
	"--watch stays and babysits: it prints the queued resource's and the\n"
	"run's state changes, and when a preemption leaves the queued\n"
	"resource SUSPENDED (or it FAILED) it bumps the run's generation,\n"
	"deletes and recreates it (at most --recreate-budget times, with\n"
	"exponential backoff from 30 s), so the run resumes from its last\n"
	"committed step. It ends when the run is done or failed.\n"
	"\n"
	"--provisioning-model flex-start --max-run-duration D asks for\n"
	"flex-start capacity (as slicectl create does): each window lasts D\n"
	"once ACTIVE. The supervisors commit a final step before it ends and\n"
	"wait; --watch then queues the next window with the same shape and the\n"
	"run resumes from that step, window after window, within the recreate\n"
	"budget. slicectl status shows the window's end and the queue state\n"
	"of the next.\n"
	"\n"
	"--target gke runs the job on Google Kubernetes Engine instead: one\n"
	"JobSet (jobset.x-k8s.io) admitted by Kueue through LocalQueue --queue,\n"
	"--node-count slices each on its own TPU node pool, one pod per host\n"
	"running --image with slice-supervisor (fetched from the bucket by an\n"
	"init container) as its entry point. The cluster is found through the\n"
	"GKE API (--cluster, --location, --project) or a kubeconfig\n"
	"(--kubeconfig, $KUBECONFIG; --context). It checks that JobSet, Kueue\n"
	"and the LocalQueue are there, creates the JobSet and shows Kueue's\n"
	"admission until every pod runs. --render prints the JobSet instead\n"
	"(YAML, or with --format json a v1 List) for kubectl apply -f.\n"
	"Capacity: --spot, --flex-start (with --queued-provisioning: Kueue's\n"
	"ProvisioningRequest, all or nothing), or --reservation R.\n"
	"\n"
	"--target slurm submits one batch job (sbatch, --requeue) to partition\n"
	"--partition on --nodes nodes (--gpus-per-node, --account, --qos,\n"
	"--time, --constraint as sbatch reads them; --cluster: sbatch -M). Its\n"
	"one step runs slice-supervisor --slurm on every node (srun\n"
	"--ntasks-per-node=1), fetched from the bucket (gs://, or file:// on a\n"
	"shared filesystem). SIGTERM grace + 60 s before --time commits an\n"
	"emergency step and requeues the job; the next allocation restores the\n"
	"newest committed step. It prints the job's id. --render prints the\n"
	"batch script instead. --slurmrestd URL (http://HOST:PORT, or\n"
	"unix:/path/to/socket) submits, asks and deletes through slurmrestd's\n"
	"REST API (openapi/v0.0.38, Slurm 22.05) instead, with the JWT in\n"
	"SLURM_JWT, or none on a unix socket (rest_auth/local).\n"
	"\n"
	"--local runs every worker here instead, as local processes started\n"
	"by the same startup script, with file:// storage; --chaos injects\n"
	"failures ('preempt:slice=1@20s,reset@45s,crash:worker=3@60s,\n"
	"hang:worker=2@80s', or 'random' with --seed).\n"
	"\n"
	"Exit status: 0 created (with --watch or --local: the run is done);\n"
	"1 the bucket, the API or sbatch failed, or the run failed; 2 bad arguments\n"
	"(nothing was created); 130 interrupted.";

struct job_options {
	struct job_request r;
	struct tpu_options to;
	unsigned hang_timeout_ms, grace_ms;
	unsigned recreate_budget;
	bool watch;
	/* --max-run-duration is gke_options' max_run_ms, for both targets */
	const char *provisioning_model;
	int target;
	struct gke_options gke;
	struct slurm_options slurm;
	/* the local provider */
	bool local, quiet;
	const char *local_dir, *chaos, *seed;
	int format;
};

int usage_error(const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	log_error("%s (see slicectl job --help)", msg);
	return EXIT_USAGE;
}

static int unknown_type(const char *type)
{
	char known[512];

	accelerator_examples(known, sizeof(known));
	log_error("--accelerator-type '%s' is not a TPU type slicectl knows; "
		  "it knows %s (each family in the sizes Cloud TPU documents; "
		  "see slicectl job --help)", type, known);
	return EXIT_USAGE;
}

/* What job_prepare's error means for the exit status. */
static int prepare_status(const struct err *e)
{
	log_error("%s", e->msg);
	switch (e->code) {
	case COMMON_EUSAGE:
	case COMMON_EINVAL:
	case CLOUD_EURL:
		return EXIT_USAGE;
	default:
		return 1;
	}
}

/* The flags the queued resource's spec is finished from (qr_spec.h). */
static struct qr_flags spec_flags(const struct job_options *o)
{
	return (struct qr_flags){
		.provisioning_model = o->provisioning_model,
		.spot = o->r.spot,
		.reserved = o->r.reserved,
		.best_effort = o->r.best_effort,
		.max_run_ms = o->gke.max_run_ms,
	};
}

/* The capacity flags, checked as slicectl create checks them, before
 * anything is written. */
static int check_capacity(const struct job_options *o)
{
	const struct qr_flags f = spec_flags(o);
	struct tpu_qr_spec t;
	struct err e;
	int rc;

	err_init(&e);
	tpu_qr_spec_init(&t);
	t.id = o->r.name;
	t.accelerator_type = o->r.accelerator_type;
	t.node_count = o->r.num_slices;
	rc = qr_spec_capacity(&t, &f, &e);
	tpu_qr_spec_release(&t);
	return rc ? usage_error("%s", e.msg) : 0;
}

/* Checks what only the cloud path needs, before anything is touched. */
static int check_cloud(struct job_options *o)
{
	struct job_request *r = &o->r;
	struct err e;

	if (!r->accelerator_type)
		return usage_error("--accelerator-type is required (for example "
				   "v4-32 or v5litepod-16)");
	r->workers_per_slice = job_workers_per_slice(r->accelerator_type);
	if (!r->workers_per_slice)
		return unknown_type(r->accelerator_type);
	if (!r->runtime_version)
		r->runtime_version = job_default_runtime(r->accelerator_type);
	if (!r->runtime_version)
		return usage_error("no default runtime for '%s': give "
				   "--runtime-version", r->accelerator_type);
	err_init(&e);
	if (gcloud_default(o->to.project, "core", "project",
			   o->to.project_buf, sizeof(o->to.project_buf),
			   &o->to.project, &e) ||
	    gcloud_default(o->to.zone, "compute", "zone", o->to.zone_buf,
			   sizeof(o->to.zone_buf), &o->to.zone, &e)) {
		log_error("%s", e.msg);
		return EXIT_USAGE;
	}
	r->project = o->to.project;
	r->zone = o->to.zone;
	if (!r->project)
		return usage_error("no project: pass --project, set "
				   "CLOUDSDK_CORE_PROJECT or run `gcloud config "
				   "set project PROJECT`");
	if (!r->zone)
		return usage_error("no zone: pass --zone (for example "
				   "us-central2-b), set CLOUDSDK_COMPUTE_ZONE or "
				   "run `gcloud config set compute/zone ZONE`");
	if (o->local_dir || o->chaos || o->seed)
		return usage_error("--local-dir, --chaos and --seed are for "
				   "--local");
	return check_capacity(o);
}

static int build_spec(const struct job_options *o,
		      const struct prepared_run *run, struct tpu_qr_spec *s,
		      struct err *e)
{
	const struct job_request *r = &o->r;
	struct qr_flags f = spec_flags(o);
	struct buf kv;
	int rc = 0;

	s->id = r->name;
	s->accelerator_type = r->accelerator_type;
	s->runtime_version = r->runtime_version;
	s->node_count = r->num_slices;
	f.startup_script = run->startup_script;
	buf_init(&kv);
	if (buf_appendf(&kv, "slicectl-run=%s", r->name) ||
	    strlist_push(&s->labels, kv.data))
		rc = err_set(e, COMMON_ENOMEM, "out of memory");
	buf_release(&kv);
	if (!rc)
		rc = qr_spec_build(s, &f, e);
	return rc;
}

static void print_follow(const struct job_options *o,
			 const struct prepared_run *run)
{
	const char *n = o->r.name, *b = o->r.bucket;

	printf("%s: queued resource %s asked for (%u slice%s of %s in %s); "
	       "its workers run %s\n", n, n, o->r.num_slices,
	       o->r.num_slices == 1 ? "" : "s", o->r.accelerator_type,
	       o->to.zone, run->run_url);
	printf("Follow the run:\n"
	       "  slicectl wait %s                      until the workers "
	       "are up\n"
	       "  slicectl status %s --bucket %s\n"
	       "  slicectl logs %s --bucket %s --worker 0/0 --follow\n"
	       "  slicectl run --tpu %s -- COMMAND      on every worker\n"
	       "  slicectl restart %s --bucket %s     a group restart\n"
	       "  slicectl stop %s --bucket %s\n"
	       "  slicectl delete %s                    when it is over\n"
	       "Run the same slicectl job command with --watch to recreate "
	       "the queued resource after a preemption.\n",
	       n, n, b, n, b, n, n, b, n, b, n);
	fflush(stdout);
}

/* --watch */

struct watch {
	struct tpu_client *c;
	const struct tpu_qr_spec *spec;
	struct store *s;
	unsigned max_restarts, budget, recreated;
	uint64_t start_ms, unit_ms;
	struct backoff bo;
	char qr_state[64], run_state[64];
	char window_end[40];     /* the flex-start window's, "" none */
	int64_t generation;
};

/* Reads control.json and reports a change. Returns 0, or -1 on a store
 * error (logged). */
static int watch_run(struct watch *w, struct control *c)
{
	struct err e;

	err_init(&e);
	if (control_load(w->s, c, &e)) {
		log_warn("reading the run's control.json: %s", e.msg);
		return -1;
	}
	if (strcmp(c->state, w->run_state) || c->generation != w->generation) {
		job_say(w->start_ms, "run: %s, generation %" PRId64 "%s%s%s",
			c->state, c->generation, *c->reason ? " (" : "",
			c->reason, *c->reason ? ")" : "");
		snprintf(w->run_state, sizeof(w->run_state), "%s", c->state);
		w->generation = c->generation;
	}
	return 0;
}

/* Whether every worker of a stopping run has left. */
static bool all_stopped(struct watch *w)
{
	struct worker_status *v = NULL;
	size_t n = 0, left = 0;
	struct err e;

	err_init(&e);
	if (status_list(w->s, &v, &n, &e))
		return false;
	for (size_t i = 0; i < n; i++)
		left += !strcmp(v[i].state, "exited") ||
			!strcmp(v[i].state, "finished") ||
			!strcmp(v[i].state, "failed") ||
			!strcmp(v[i].state, "preempted");
	free(v);
	return n && left == n;
}

/* RUN/watch.json for slicectl status (watch_state.h), q NULL when the
 * queued resource was just asked for again. A bucket that refuses it
 * costs the watch nothing. */
static void publish_watch(struct watch *w, const struct tpu_qr *q)
{
	struct watch_state ws = { .recreated = w->recreated,
				  .budget = w->budget };
	struct err e;

	snprintf(ws.queued_resource, sizeof(ws.queued_resource), "%s",
		 w->spec->id);
	if (q) {
		snprintf(ws.state, sizeof(ws.state), "%s", q->state);
		snprintf(ws.capacity, sizeof(ws.capacity), "%s", q->capacity);
		snprintf(ws.window_end, sizeof(ws.window_end), "%s",
			 q->termination_time);
	}
	err_init(&e);
	if (watch_state_put(w->s, &ws, &e))
		log_warn("%s", e.msg);
}

/* A new state or a new window's end: said, and kept for status. */
static void seen_qr(struct watch *w, const struct tpu_qr *q)
{
	if (!strcmp(q->state, w->qr_state) &&
	    !strcmp(q->termination_time, w->window_end))
		return;
	if (*q->termination_time && strcmp(q->termination_time, w->window_end))
		job_say(w->start_ms, "%s: its %s window ends at %s",
			w->spec->id, q->capacity, q->termination_time);
	snprintf(w->window_end, sizeof(w->window_end), "%s",
		 q->termination_time);
	publish_watch(w, q);
}

/* Why a queued resource is over: the end of a flex-start window is no
 * preemption. */
static const char *why_over(const struct tpu_qr *q)
{
	return !strcmp(q->state, "SUSPENDED") &&
			       !strcmp(q->capacity, "flex-start")
		       ? "the end of its flex-start window"
		       : q->state;
}

/* The run's history (supervisor.h) keeps each queued resource asked for
 * again, or flex-start window queued, and why. */
static void note_recreated(struct watch *w, int64_t generation,
			   const char *why)
{
	json_t *d = json_pack("{s:s, s:i, s:i}", "queued_resource",
			      w->spec->id, "recreation", (int)w->recreated,
			      "budget", (int)w->budget);
	char *details = d ? json_dumps(d, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
	struct err e;

	if (event_record_as(w->s, "slicectl", "recreated", generation, why,
			    details, &e))
		log_warn("event not recorded: %s", e.msg);
	free(details);
	json_decref(d);
}

/* Bumps the run's generation, deletes the queued resource and asks for
 * it again. Returns -1 to go on watching, or an exit status. */
static int recreate(struct watch *w, const struct control *seen,
		    const char *why)
{
	struct control after;
	char reason[128];
	unsigned wait_ms;
	struct err e;

	if (w->recreated >= w->budget) {
		log_error("%s is %s and the recreate budget (%u) is spent: "
			  "giving up. Delete it with slicectl delete %s, or "
			  "run slicectl job again with --watch and a larger "
			  "--recreate-budget", w->spec->id, why, w->budget,
			  w->spec->id);
		return 1;
	}
	err_init(&e);
	snprintf(reason, sizeof(reason),
		 "queued resource recreated after %s", why);
	if (control_bump(w->s, seen, w->max_restarts, reason, "slicectl", -1,
			 &after, &e)) {
		log_error("bumping the run's generation: %s", e.msg);
		return 1;
	}
	job_say(w->start_ms, "run: generation %" PRId64 " (%s), %s",
		after.generation, after.state, after.reason);
	snprintf(w->run_state, sizeof(w->run_state), "%s", after.state);
	w->generation = after.generation;
	if (!strcmp(after.state, "failed")) {
		log_error("the run failed: %s", after.reason);
		return 1;
	}
	wait_ms = backoff_next_ms(&w->bo);
	job_say(w->start_ms, "%s: %s; deleting it, then asking again in %.1f s "
	    "(recreation %u of at most %u)", w->spec->id, why,
	    wait_ms / 1000.0, w->recreated + 1, w->budget);
	if (tpu_qr_delete(w->c, w->spec->id, true, true, 0, tpu_print_progress,
			  NULL, &e) &&
	    e.code != CLOUD_ENOTFOUND) {
		log_error("deleting %s: %s", w->spec->id, e.msg);
		return 1;
	}
	proc_sleep_ms(wait_ms, true);
	err_init(&e);
	if (tpu_qr_create(w->c, w->spec, &e)) {
		log_error("creating %s again: %s", w->spec->id, e.msg);
		return 1;
	}
	w->recreated++;
	w->qr_state[0] = '\0';
	w->window_end[0] = '\0';
	job_say(w->start_ms, "%s: asked for again", w->spec->id);
	publish_watch(w, NULL);
	note_recreated(w, after.generation, why);
	return -1;
}

/* One look at the run and the queued resource. Returns -1 to go on, or
 * an exit status. */
static int watch_once(struct watch *w, unsigned *errors)
{
	struct tpu_qr q = { 0 };
	struct control c;
	struct err e;
	int rc;

	if (watch_run(w, &c)) {
		++*errors;
		return -1;
	}
	if (!strcmp(c.state, "done")) {
		job_say(w->start_ms, "run: done");
		return 0;
	}
	if (!strcmp(c.state, "failed")) {
		log_error("the run failed: %s", c.reason);
		return 1;
	}
	err_init(&e);
	rc = tpu_qr_get(w->c, w->spec->id, &q, &e);
	if (rc == CLOUD_ENOTFOUND) {
		tpu_qr_release(&q);
		if (!strcmp(c.state, "stopping")) {
			job_say(w->start_ms, "%s is gone and the run is "
				"stopping: done watching", w->spec->id);
			return 0;
		}
		/* Worker 0 deletes it once the run is done. */
		if (!watch_run(w, &c) && !strcmp(c.state, "done")) {
			job_say(w->start_ms, "run: done");
			return 0;
		}
		log_error("queued resource %s is gone while the run is %s; "
			  "run the same slicectl job command again to ask for "
			  "it again", w->spec->id, c.state);
		return 1;
	}
	if (rc) {
		log_warn("reading queued resource %s: %s", w->spec->id, e.msg);
		tpu_qr_release(&q);
		++*errors;
		return -1;
	}
	*errors = 0;
	seen_qr(w, &q);
	if (strcmp(q.state, w->qr_state)) {
		job_say(w->start_ms, "%s: %s%s%s", w->spec->id,
			*q.state ? q.state : "accepted",
			*q.error_message ? ": " : "", q.error_message);
		snprintf(w->qr_state, sizeof(w->qr_state), "%s", q.state);
	}
	rc = -1;
	if (!strcmp(q.state, "SUSPENDED") || !strcmp(q.state, "FAILED")) {
		if (!strcmp(c.state, "stopping")) {
			job_say(w->start_ms, "%s is %s and the run is "
				"stopping: done watching", w->spec->id,
				q.state);
			rc = 0;
		} else {
			rc = recreate(w, &c, why_over(&q));
		}
	} else if (!strcmp(c.state, "stopping") && all_stopped(w)) {
		job_say(w->start_ms, "run: every worker has stopped");
		rc = 0;
	}
	tpu_qr_release(&q);
	return rc;
}

static int watch(struct tpu_client *c, const struct tpu_qr_spec *spec,
		 const struct job_options *o, const struct prepared_run *run)
{
	struct watch w = { 0 };
	unsigned errors = 0;
	struct err e;
	int status = -1;

	err_init(&e);
	if (store_open(&w.s, run->run_url, &e)) {
		log_error("%s", e.msg);
		return 1;
	}
	w.c = c;
	w.spec = spec;
	w.max_restarts = o->r.max_restarts;
	w.budget = o->recreate_budget;
	w.start_ms = mono_ms();
	w.unit_ms = job_env_ms("SLICECTL_TPU_POLL_MS", 1000);
	backoff_init(&w.bo, (unsigned)(WATCH_BACKOFF_BASE_UNITS * w.unit_ms),
		     (unsigned)(WATCH_BACKOFF_MAX_UNITS * w.unit_ms),
		     (uint64_t)time(NULL) ^ (uint64_t)mono_us());
	job_say(w.start_ms, "watching %s and %s (recreate budget %u)", spec->id,
	    run->run_url, w.budget);
	for (;;) {
		status = watch_once(&w, &errors);
		if (status >= 0)
			break;
		if (errors >= WATCH_MAX_ERRORS) {
			log_error("%u looks in a row failed: giving up "
				  "watching (the run goes on)", errors);
			status = 1;
			break;
		}
		proc_sleep_ms(WATCH_POLL_UNITS * w.unit_ms, true);
	}
	store_close(w.s);
	return status;
}

static int run_cloud(struct job_options *o)
{
	struct prepared_run run;
	struct tpu_qr_spec spec;
	struct tpu_client *c = NULL;
	struct err e;
	int status, rc;

	status = check_cloud(o);
	if (status)
		return status;
	err_init(&e);
	rc = tpu_open(&c, o->to.project, o->to.zone, &e);
	if (rc) {
		log_error("%s", e.msg);
		return rc == CLOUD_EINVAL ? EXIT_USAGE : 1;
	}
	tpu_qr_spec_init(&spec);
	/* TPU VM images (Ubuntu 20.04's glibc 2.31 and OpenSSL 1.1 among
	 * them) need not have the build machine's libraries. */
	o->r.portable = true;
	if (job_prepare(&o->r, &run, &e)) {
		status = prepare_status(&e);
		goto out;
	}
	if (build_spec(o, &run, &spec, &e)) {
		status = prepare_status(&e);
		goto out_run;
	}
	fprintf(stderr, "slicectl: creating %s: %u slice%s of %s in %s\n",
		spec.id, spec.node_count, spec.node_count == 1 ? "" : "s",
		spec.accelerator_type, o->to.zone);
	rc = tpu_qr_create(c, &spec, &e);
	if (rc == CLOUD_EEXISTS) {
		log_info("queued resource %s exists already: keeping it",
			 spec.id);
	} else if (rc) {
		status = tpu_exit_status(rc, &e);
		goto out_run;
	}
	print_follow(o, &run);
	status = o->watch ? watch(c, &spec, o, &run) : 0;
out_run:
	prepared_run_release(&run);
out:
	tpu_qr_spec_release(&spec);
	tpu_close(c);
	return status;
}

static int run_local(struct job_options *o)
{
	struct local_options lo = { 0 };
	struct prepared_run run;
	struct err e;
	int status;

	if (!o->r.workers_per_slice)
		return usage_error("--local needs --workers-per-slice W");
	if (o->watch || o->r.spot || o->r.reserved || o->r.best_effort ||
	    o->provisioning_model || o->gke.max_run_ms || o->to.project ||
	    o->to.zone)
		return usage_error("--watch, --spot, --reserved, --best-effort, "
				   "--provisioning-model, --max-run-duration, "
				   "--project and --zone are for Cloud TPU, not "
				   "--local");
	if (o->seed) {
		char *end;

		errno = 0;
		lo.seed = strtoull(o->seed, &end, 10);
		if (errno || *end || !*o->seed)
			return usage_error("--seed '%s' is not a number",
					   o->seed);
	}
	if (o->seed && (!o->chaos || strcmp(o->chaos, "random")))
		return usage_error("--seed goes with --chaos random");
	lo.dir = o->local_dir;
	lo.chaos = o->chaos;
	lo.quiet = o->quiet;
	lo.format = o->format;
	o->r.project = o->r.zone = NULL;
	err_init(&e);
	if (job_prepare(&o->r, &run, &e))
		return prepare_status(&e);
	status = local_run(&run, &lo);
	prepared_run_release(&run);
	return status;
}

static const char *const target_names[] = { "tpu-vm", "gke", "slurm",
					     NULL };
enum { TARGET_FLAG_GKE = 1, TARGET_FLAG_SLURM = 2 };

/* Flags of one target given to another: named, nothing started. */
static int check_target_flags(const struct job_options *o)
{
	const struct gke_options *g = &o->gke;
	const struct slurm_options *sl = &o->slurm;
	/* --cluster and --render serve gke and slurm; --max-run-duration
	 * serves gke and a flex-start queued resource. */
	bool gke_flags = g->location || g->namespace || g->queue ||
			 g->priority_class || g->image || g->kubeconfig ||
			 g->context || g->reservation || g->flex_start ||
			 g->queued_provisioning;
	bool slurm_flags = sl->partition || sl->nodes || sl->gpus_per_node ||
			   sl->account || sl->qos || sl->time_limit ||
			   sl->constraint || sl->slurmrestd;

	if (o->target && (o->local || o->watch || o->local_dir || o->chaos ||
			  o->seed || o->quiet || o->provisioning_model))
		return usage_error("--local, --watch, --local-dir, --chaos, "
				   "--seed, --quiet and --provisioning-model are "
				   "not for --target %s", target_names[o->target]);
	if (o->target == TARGET_FLAG_SLURM && (gke_flags || g->max_run_ms))
		return usage_error("--location, --namespace, --queue, "
				   "--priority-class, --image, --kubeconfig, "
				   "--context, --reservation, --flex-start, "
				   "--queued-provisioning and --max-run-duration "
				   "are for --target gke");
	if (o->target != TARGET_FLAG_SLURM && slurm_flags)
		return usage_error("--partition, --nodes, --gpus-per-node, "
				   "--account, --qos, --time, --constraint and "
				   "--slurmrestd "
				   "are for --target slurm");
	if (!o->target && (gke_flags || g->cluster || g->render))
		return usage_error("--cluster, --location, --namespace, --queue, "
				   "--priority-class, --image, --kubeconfig, "
				   "--context, --reservation, --flex-start, "
				   "--queued-provisioning and --render are for "
				   "--target gke (--cluster and --render also for "
				   "--target slurm)");
	return 0;
}

/* RUN, as the argument every run command takes or as --name (the older
 * spelling); both given must agree. */
static int run_name(struct job_request *r, const char *name,
		    const struct strlist *pos)
{
	if (pos->n > 1)
		return usage_error("unexpected argument '%s': the run's name "
				   "is the only argument", pos->v[1]);
	if (pos->n && name && strcmp(name, pos->v[0]))
		return usage_error("the run is named twice: '%s' and --name "
				   "'%s'", pos->v[0], name);
	r->name = pos->n ? pos->v[0] : name;
	if (!r->name || !*r->name)
		return usage_error("no run name: slicectl job RUN ...");
	return 0;
}

int cmd_job(int argc, char **argv)
{
	struct job_options o = { 0 };
	struct job_request *r = &o.r;
	const char *name = NULL;
	struct strlist pos;
	int status;

	job_request_init(r);
	o.recreate_budget = DEFAULT_RECREATE_BUDGET;
	o.hang_timeout_ms = r->hang_timeout_s * 1000u;
	o.grace_ms = r->grace_s * 1000u;
	const struct opt own[] = {
		{ .name = "name", .kind = OPT_STRING, .value = &name,
		  .arg = "RUN", .help = "the run's name, as the argument RUN: "
		  "also the queued resource's (lowercase letters, digits, "
		  "'-')" },
		{ .name = "bucket", .kind = OPT_STRING, .value = &r->bucket,
		  .arg = "URL", .help = "where runs live: gs://BUCKET[/PREFIX] "
		  "(or file:///DIR; default: $SLICECTL_BUCKET)" },
		{ .name = "accelerator-type", .kind = OPT_STRING,
		  .value = &r->accelerator_type, .arg = "T",
		  .help = "each slice's type, for example v4-32 or "
			  "v5litepod-16" },
		{ .name = "runtime-version", .kind = OPT_STRING,
		  .value = &r->runtime_version, .arg = "V",
		  .help = "the TPU VM image (default: the type's usual one)" },
		{ .name = "node-count", .kind = OPT_UINT, .value = &r->num_slices,
		  .arg = "N", .min = 1, .max = 4096,
		  .help = "slices (default 1); more than 1 is multislice" },
		{ .name = "num-slices", .kind = OPT_UINT, .value = &r->num_slices,
		  .arg = "N", .min = 1, .max = 4096, .help = "as --node-count" },
		{ .name = "script-dir", .kind = OPT_STRING,
		  .value = &r->script_dir, .arg = "DIR",
		  .help = "your code, unpacked on every worker as the "
			  "trainer's working directory" },
		{ .name = "command", .kind = OPT_STRING, .value = &r->command,
		  .arg = "CMD", .help = "the trainer, as /bin/sh -c reads it" },
		{ .name = "env", .kind = OPT_LIST, .value = &r->env,
		  .arg = "K=V", .help = "an environment variable for the "
		  "trainer (repeatable)" },
		{ .name = "max-restarts", .kind = OPT_UINT,
		  .value = &r->max_restarts, .arg = "N", .max = 1000000,
		  .help = "group restarts before the run fails (default 100)" },
		{ .name = "hang-timeout", .kind = OPT_SECONDS,
		  .value = &o.hang_timeout_ms, .arg = "S",
		  .help = "no output and no new step for S: hung (default "
			  "30m; 0 off)" },
		{ .name = "grace", .kind = OPT_SECONDS, .value = &o.grace_ms,
		  .arg = "S", .help = "on preemption, time for a final step "
		  "(default 25s)" },
		{ .name = "keep", .kind = OPT_UINT, .value = &r->keep,
		  .arg = "K", .min = 1, .max = 1000000,
		  .help = "newest committed steps kept (default 3)" },
		{ .name = "keep-every", .kind = OPT_UINT, .value = &r->keep_every,
		  .arg = "M", .max = 4000000000u,
		  .help = "also keep every step divisible by M" },
		{ .name = "spot", .kind = OPT_FLAG, .value = &r->spot,
		  .help = "spot capacity: cheaper, may be preempted" },
		{ .name = "reserved", .kind = OPT_FLAG, .value = &r->reserved,
		  .help = "the project's reserved capacity" },
		{ .name = "best-effort", .kind = OPT_FLAG,
		  .value = &r->best_effort, .help = "best-effort capacity" },
		{ .name = "provisioning-model", .kind = OPT_STRING,
		  .value = &o.provisioning_model, .arg = "M",
		  .help = "standard, spot, reservation-bound or flex-start" },
		{ .name = "delete-on-finish", .kind = OPT_FLAG,
		  .value = &r->delete_on_finish,
		  .help = "delete the queued resource when the run is done" },
		{ .name = "watch", .kind = OPT_FLAG, .value = &o.watch,
		  .help = "stay, and recreate the queued resource after a "
			  "preemption" },
		{ .name = "recreate-budget", .kind = OPT_UINT,
		  .value = &o.recreate_budget, .arg = "N", .max = 1000000,
		  .help = "recreations --watch may make (default 10)" },
		{ .name = "supervisor-bin", .kind = OPT_STRING,
		  .value = &r->supervisor_bin, .arg = "PATH",
		  .help = "the slice-supervisor to upload (default: "
			  "$SLICE_SUPERVISOR_BIN, or next to slicectl)" },
		{ .name = "target", .kind = OPT_CHOICE, .value = &o.target,
		  .arg = "tpu-vm|gke|slurm", .choices = target_names,
		  .help = "where the workers run: Cloud TPU queued resources "
			  "(default), GKE or a Slurm cluster" },
		{ .name = "local", .kind = OPT_FLAG, .value = &o.local,
		  .help = "run every worker here (the local provider)" },
		{ .name = "workers-per-slice", .kind = OPT_UINT,
		  .value = &r->workers_per_slice, .arg = "W", .min = 1,
		  .max = 65536, .help = "--local: workers in each slice" },
		{ .name = "local-dir", .kind = OPT_STRING, .value = &o.local_dir,
		  .arg = "DIR", .help = "--local: the workers' roots (default "
		  "$SLICECTL_HOME/local/RUN)" },
		{ .name = "chaos", .kind = OPT_STRING, .value = &o.chaos,
		  .arg = "SPEC", .help = "--local: failures to inject, or "
		  "'random'" },
		{ .name = "seed", .kind = OPT_STRING, .value = &o.seed,
		  .arg = "S", .help = "--local: the seed of --chaos random" },
		{ .name = "quiet", .short_name = 'q', .kind = OPT_FLAG,
		  .value = &o.quiet, .help = "--local: no live timeline" },
		{ .name = "format", .kind = OPT_CHOICE, .value = &o.format,
		  .arg = "text|json", .choices = format_names,
		  .help = "--local: json prints the timeline and summary as "
			  "NDJSON; --render: a v1 List" },
	};
	struct opt opts[OPT_COUNT(own) + GKE_OPTIONS_COUNT +
			SLURM_OPTIONS_COUNT + TPU_OPTIONS_COUNT + 1] = { 0 };

	strlist_init(&pos);
	memcpy(opts, own, sizeof(own));
	gke_options_table(&o.gke, opt_end(opts));
	slurm_options_table(&o.slurm, opt_end(opts));
	tpu_options_table(&o.to, opt_end(opts), 0);
	status = opt_parse_command(opts, argc, argv, "slicectl job", usage,
				   false, &pos);
	if (status >= 0)
		goto out;
	status = run_name(r, name, &pos);
	if (status)
		goto out;
	if (o.hang_timeout_ms % 1000 || o.grace_ms % 1000) {
		status = usage_error("--hang-timeout and --grace take whole "
				     "seconds");
		goto out;
	}
	r->hang_timeout_s = o.hang_timeout_ms / 1000;
	r->grace_s = o.grace_ms / 1000;
	if (!r->bucket || !*r->bucket)
		r->bucket = getenv("SLICECTL_BUCKET");
	r->project = o.to.project;
	r->zone = o.to.zone;
	status = check_target_flags(&o);
	if (status)
		goto out;
	if (o.target == TARGET_FLAG_GKE)
		status = gke_job(r, &o.gke, o.format);
	else if (o.target == TARGET_FLAG_SLURM)
		status = slurm_job(r, &o.slurm, o.gke.cluster, o.gke.render);
	else if (o.local)
		status = run_local(&o);
	else if (r->workers_per_slice || o.quiet || o.format)
		status = usage_error("--workers-per-slice, --quiet and --format "
				     "are for --local (--format also for "
				     "--target gke --render)");
	else
		status = run_cloud(&o);
out:
	strlist_release(&pos);
	job_request_release(r);
	return status;
}
