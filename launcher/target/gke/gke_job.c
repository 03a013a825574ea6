/*
 * gke_job.c: `slicectl job --target gke`. The job flags are checked and
 * the JobSet rendered before anything is touched; --render prints it and
 * stops there. Otherwise the cluster is asked whether JobSet, Kueue and
 * the LocalQueue are there (so a missing piece is named before the run's
 * objects go up), job_prepare puts the run in its bucket, the JobSet is
 * created, and Kueue's admission is followed until the pods run.
 */
#include "launcher/target/gke/gke.h"
#include "launcher/job.h"
#include "launcher/launcher.h"
#include "launcher/target/target.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t options(struct job_flags *f, struct opt *opts)
{
	struct gke_options *g = &f->gke;
	const struct opt table[GKE_OPTIONS_COUNT] = {
		{ .name = "cluster", .kind = OPT_STRING, .value = &f->cluster,
		  .arg = "C", .help = "--target gke: the GKE cluster (its "
		  "endpoint and CA come from the GKE API)" },
		{ .name = "location", .kind = OPT_STRING,
		  .value = &g->location, .arg = "L",
		  .help = "--target gke: the cluster's region or zone" },
		{ .name = "namespace", .kind = OPT_STRING,
		  .value = &g->namespace, .arg = "NS",
		  .help = "--target gke: the namespace (default: the "
			  "kubeconfig context's, else default)" },
		{ .name = "queue", .kind = OPT_STRING, .value = &g->queue,
		  .arg = "LQ", .help = "--target gke: the Kueue LocalQueue" },
		{ .name = "priority-class", .kind = OPT_STRING,
		  .value = &g->priority_class, .arg = "P",
		  .help = "--target gke: the pods' PriorityClass" },
		{ .name = "image", .kind = OPT_STRING, .value = &g->image,
		  .arg = "IMG", .help = "--target gke: the trainer's image "
		  "(glibc and /bin/sh; unchanged)" },
		{ .name = "kubeconfig", .kind = OPT_STRING,
		  .value = &g->kubeconfig, .arg = "FILE",
		  .help = "--target gke: reach the cluster through this "
			  "kubeconfig instead (default $KUBECONFIG)" },
		{ .name = "context", .kind = OPT_STRING, .value = &g->context,
		  .arg = "X", .help = "--target gke: the kubeconfig's context "
		  "(default its current one)" },
		{ .name = "reservation", .kind = OPT_STRING,
		  .value = &g->reservation, .arg = "R",
		  .help = "--target gke: nodes of reservation R" },
		{ .name = "service-account", .kind = OPT_STRING,
		  .value = &g->service_account, .arg = "KSA",
		  .help = "--target gke: the pods' Kubernetes service "
			  "account (default: the namespace's default)" },
		{ .name = "cordon-on-preflight-failure", .kind = OPT_FLAG,
		  .value = &g->cordon,
		  .help = "--target gke, with --preflight: a pod whose "
			  "preflight fails cordons its node (the service "
			  "account may get and patch nodes: README)" },
		{ .name = "cordon-bad-hosts", .kind = OPT_FLAG,
		  .value = &g->cordon_bad_hosts,
		  .help = "--target gke: a pod whose node is quarantined (a "
			  "bad host) cordons it, so that JobSet's new pods "
			  "land elsewhere (the service account may get and "
			  "patch nodes: README)" },
		{ .name = "flex-start", .kind = OPT_FLAG,
		  .value = &g->flex_start,
		  .help = "--target gke: flex-start nodes (Dynamic Workload "
			  "Scheduler)" },
		{ .name = "queued-provisioning", .kind = OPT_FLAG,
		  .value = &g->queued_provisioning,
		  .help = "--target gke, with --flex-start: all-or-nothing "
			  "through Kueue's ProvisioningRequest" },
		{ .name = "max-run-duration", .kind = OPT_SECONDS,
		  .value = &f->max_run_ms, .arg = "S",
		  .help = "flex-start: each window's length (tpu-vm), or "
			  "with --queued-provisioning the nodes' lifetime "
			  "(default 7 days)" },
		{ .name = "render", .kind = OPT_FLAG, .value = &f->render,
		  .help = "--target gke: print the objects instead of "
			  "creating them (--format json: one v1 List); "
			  "--target slurm: the batch script" },
	};

	memcpy(opts, table, sizeof(table));
	return GKE_OPTIONS_COUNT;
}

bool gke_flags_given(const struct gke_options *g)
{
	return g->location || g->namespace || g->queue || g->priority_class ||
	       g->image || g->kubeconfig || g->context || g->reservation ||
	       g->flex_start || g->queued_provisioning ||
	       g->service_account || g->cordon || g->cordon_bad_hosts;
}

int gke_refuse_flags(const struct job_flags *f)
{
	if (gke_flags_given(&f->gke) || f->cluster || f->render)
		return usage_error("--cluster, --location, --namespace, --queue, "
				   "--priority-class, --image, --kubeconfig, "
				   "--context, --reservation, --flex-start, "
				   "--queued-provisioning, --service-account, "
				   "--cordon-on-preflight-failure, "
				   "--cordon-bad-hosts and --render are for "
				   "--target gke (--cluster and --render also for "
				   "--target slurm)");
	return 0;
}

static int check(const struct job_flags *f)
{
	struct job_flags others = *f;
	int status = target_refuse_vm_flags(f, target_gke.name);

	/* --nodes is GKE's too: a GPU job's size. */
	others.slurm.nodes = 0;
	if (!status)
		status = slurm_refuse_flags(&others);
	return status ? status : vertex_refuse_flags(f);
}

/* The namespace: the flag's, else the kubeconfig context's (when the
 * cluster is reached through one), else "default". */
static const char *namespace_of(const struct gke_options *g,
				const char *from_kubeconfig)
{
	if (g->namespace && *g->namespace)
		return g->namespace;
	return from_kubeconfig && *from_kubeconfig ? from_kubeconfig
						   : "default";
}

static int print_render(const json_t *js, int format)
{
	struct buf b;
	struct err e;
	int status = 0;

	buf_init(&b);
	err_init(&e);
	if (format == 1) {
		json_t *list = json_pack("{s:s, s:s, s:[O]}", "apiVersion", "v1",
					 "kind", "List", "items", js);
		char *text = list ? json_dumps(list, JSON_INDENT(2)) : NULL;

		json_decref(list);
		if (!text) {
			log_error("out of memory");
			return 1;
		}
		printf("%s\n", text);
		free(text);
		return 0;
	}
	if (gke_yaml(js, &b, &e)) {
		log_error("%s", e.msg);
		status = 1;
	} else {
		fwrite(b.data, 1, b.len, stdout);
	}
	buf_release(&b);
	return status;
}

/* The flags only the other targets take. */
static int check_flags(const struct job_flags *f, struct err *e)
{
	const struct job_request *r = &f->r;
	const struct gke_options *g = &f->gke;

	if (r->reserved || r->best_effort)
		return err_set(e, COMMON_EUSAGE,
			       "--reserved and --best-effort are queued-resource "
			       "tiers; on GKE give --reservation R, --spot or "
			       "--flex-start");
	if (r->runtime_version || r->zone || r->delete_on_finish ||
	    r->workers_per_slice)
		return err_set(e, COMMON_EUSAGE,
			       "--runtime-version, --zone, --delete-on-finish "
			       "and --workers-per-slice are not for --target "
			       "gke (the node pools' TPU type sets the shape; "
			       "use --location)");
	if (f->max_run_ms % 1000)
		return err_set(e, COMMON_EUSAGE,
			       "--max-run-duration takes whole seconds");
	if (f->cluster && g->kubeconfig)
		return err_set(e, COMMON_EUSAGE,
			       "give --cluster (with --location) or "
			       "--kubeconfig, not both");
	if (f->cluster && !g->location)
		return err_set(e, COMMON_EUSAGE,
			       "--cluster needs --location (the cluster's "
			       "region or zone)");
	return 0;
}

/* job.json's "target" for this run. */
static int make_target(struct job_target *t, const struct job_flags *f,
		       const struct gke_conn *c, const char *ns,
		       const char *run)
{
	/* job_target holds its own copies; these are borrowed. */
	struct job_target view = {
		.kind = (char *)"gke",
		.cluster = (char *)f->cluster,
		.location = (char *)f->gke.location,
		.project = c->project,
		.namespace = (char *)ns,
		.jobset = (char *)run,
		.kubeconfig = c->kubeconfig,
		.context = c->context,
	};

	return job_target_copy(t, &view);
}

static int submit(struct job_flags *f)
{
	struct job_request *r = &f->r;
	const struct gke_options *g = &f->gke;
	struct gke_spec s = { 0 };
	struct prepared_run run;
	struct job_target t = { 0 };
	struct gke_conn conn;
	json_t *js = NULL;
	struct err e;
	int status = 0;

	err_init(&e);
	gke_conn_init(&conn);
	if (check_flags(f, &e))
		return usage_error("%s", e.msg);
	status = target_accelerator(f, "pod", true, &s.acc);
	if (status)
		return status;
	if (!f->render || g->kubeconfig || g->context) {
		/* The namespace default and the project come from here. */
		if (gke_connect(f->cluster, g->location, r->project,
				g->kubeconfig, g->context, &conn, &e)) {
			status = gke_exit_status(&e);
			goto out;
		}
	}
	s.run = r->name;
	s.namespace = namespace_of(g, conn.namespace);
	s.queue = g->queue;
	s.priority_class = g->priority_class;
	s.service_account = g->service_account;
	s.cordon = g->cordon;
	s.cordon_bad_hosts = g->cordon_bad_hosts;
	s.image = g->image;
	s.num_slices = r->num_slices;
	/* JobSet restarts the set for the infrastructure (an eviction, a
	 * Kueue preemption, a lost node) and for a failed preflight (exit
	 * 4); the trainer's crashes and hangs restart in place. The
	 * supervisors hold each class to its own budget in control.json, so
	 * JobSet's count (which cannot tell them apart: jobset#1117) only
	 * stands behind them: both budgets, or JobSet's largest when the
	 * infrastructure's has no limit. */
	s.jobset_restarts = r->max_infra_restarts == JOB_NO_LIMIT
				    ? GKE_NO_LIMIT
				    : r->max_infra_restarts + r->max_restarts;
	s.grace_s = r->grace_s;
	s.env = &r->env;
	s.spot = r->spot;
	s.flex_start = g->flex_start;
	s.queued_provisioning = g->queued_provisioning;
	s.reservation = g->reservation;
	s.max_run_s = f->max_run_ms / 1000;
	if (g->cordon && !r->preflight) {
		status = usage_error("--cordon-on-preflight-failure goes with "
				     "--preflight");
		goto out;
	}
	if (gke_check(&s, &e)) {
		status = usage_error("%s", e.msg);
		goto out;
	}
	if (!f->render) {
		status = gke_preflight(&conn, &s);
		if (status)
			goto out;
	}
	if (make_target(&t, f, &conn, s.namespace, r->name)) {
		log_error("out of memory");
		status = 1;
		goto out;
	}
	r->target = &t;
	r->workers_per_slice = s.acc.workers;
	r->portable = true;
	r->zone = NULL;
	if (f->render ? job_plan(r, &run, &e) : job_prepare(r, &run, &e)) {
		log_error("%s", e.msg);
		status = e.code == COMMON_EUSAGE || e.code == COMMON_EINVAL
				 ? EXIT_USAGE
				 : 1;
		goto out;
	}
	s.run_url = run.run_url;
	s.supervisor_sha256 = run.supervisor_sha256;
	if (gke_render(&s, &js, &e)) {
		log_error("%s", e.msg);
		status = 1;
	} else if (f->render) {
		status = print_render(js, f->format);
	} else {
		status = gke_submit(&conn, &s, js, run.run_url);
	}
	json_decref(js);
	prepared_run_release(&run);
out:
	r->target = NULL;
	job_target_release(&t);
	gke_conn_release(&conn);
	return status;
}

static const struct target_words words = {
	.state_key = "kueue", .workers_key = "pods",
	.attempt_key = "restart_attempt", .phase_key = "phase",
	.scheduler = "Kueue", .worker_heading = "POD",
	.attempt_heading = "ATTEMPT", .phase_heading = "PHASE",
	.worker = "pod", .object = "JobSet",
};

static void what(const struct job *j, char *out, size_t len)
{
	const struct job_target *t = &j->target;

	snprintf(out, len, "JobSet %s/%s", t->namespace ? t->namespace : "",
		 t->jobset ? t->jobset : "");
}

static int delete_jobset(struct run_qr *q, bool force)
{
	(void)force;
	return target_delete_run(q, gke_delete);
}

static int reset_pods(struct run_qr *q, bool wait)
{
	return target_reset_run(q, wait, gke_reset);
}

const struct target_ops target_gke = {
	.name = "gke",
	.kind = "gke",
	.options = options,
	.check = check,
	.submit = submit,
	.status = gke_describe,
	.delete = delete_jobset,
	.reset = reset_pods,
	.no_watch = "JobSet restarts its pods itself (within maxRestarts) "
		    "and Kueue admits them again: nothing is left for a "
		    "watcher to recreate",
	.what = what,
	.words = &words,
};
