/*
 * vertex_job.c: `slicectl job --target vertex`. The flags are checked
 * and the CustomJob rendered before anything is touched; --render prints
 * it and stops there. Otherwise job_prepare puts the run in its bucket
 * and the CustomJob is posted; --watch stays, submitting it again when
 * capacity ends it (vertex_run.c).
 */
#include "launcher/target/vertex/vertex.h"
#include "cloud/cloud.h"
#include "launcher/job.h"
#include "launcher/launcher.h"
#include "launcher/run_qr.h"
#include "launcher/target/target.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t options(struct job_flags *f, struct opt *opts)
{
	struct vertex_options *o = &f->vertex;
	const struct opt table[VERTEX_OPTIONS_COUNT] = {
		{ .name = "region", .kind = OPT_STRING, .value = &o->region,
		  .arg = "R", .help = "--target vertex: the Vertex AI region "
		  "(default $CLOUDSDK_AI_REGION, else gcloud's ai/region)" },
		{ .name = "network", .kind = OPT_STRING, .value = &o->network,
		  .arg = "NET", .help = "--target vertex: the peered VPC "
		  "network (projects/NUMBER/global/networks/NAME)" },
		{ .name = "max-wait", .kind = OPT_SECONDS,
		  .value = &o->max_wait_ms, .arg = "S",
		  .help = "--target vertex, with --flex-start: how long Vertex "
			  "may wait for the machines (maxWaitDuration)" },
	};

	memcpy(opts, table, sizeof(table));
	return VERTEX_OPTIONS_COUNT;
}

bool vertex_flags_given(const struct vertex_options *o)
{
	return o->region || o->network || o->max_wait_ms;
}

int vertex_refuse_flags(const struct job_flags *f)
{
	if (vertex_flags_given(&f->vertex))
		return usage_error("--region, --network and --max-wait are for "
				   "--target vertex");
	return 0;
}

static int check(const struct job_flags *f)
{
	const struct gke_options *g = &f->gke;
	const struct job_request *r = &f->r;

	if (f->local || f->local_dir || f->chaos || f->seed || f->quiet ||
	    f->provisioning_model)
		return usage_error("--local, --local-dir, --chaos, --seed, "
				   "--quiet and --provisioning-model are not "
				   "for --target vertex");
	if (f->cluster || g->location || g->namespace || g->queue ||
	    g->priority_class || g->kubeconfig || g->context ||
	    g->queued_provisioning || g->cordon || g->cordon_bad_hosts ||
	    f->max_run_ms)
		return usage_error("--cluster, --location, --namespace, --queue, "
				   "--priority-class, --kubeconfig, --context, "
				   "--queued-provisioning, "
				   "--cordon-on-preflight-failure, "
				   "--cordon-bad-hosts and "
				   "--max-run-duration are for --target gke");
	if (f->slurm.partition || f->slurm.gpus_per_node || f->slurm.account ||
	    f->slurm.qos || f->slurm.time_limit || f->slurm.constraint ||
	    f->slurm.slurmrestd)
		return usage_error("--partition, --gpus-per-node, --account, "
				   "--qos, --time, --constraint and "
				   "--slurmrestd are for --target slurm");
	if (r->reserved || r->best_effort)
		return usage_error("--reserved and --best-effort are "
				   "queued-resource tiers; on Vertex AI give "
				   "--reservation R, --spot or --flex-start");
	if (r->runtime_version || r->zone || r->delete_on_finish ||
	    r->workers_per_slice)
		return usage_error("--runtime-version, --zone, "
				   "--delete-on-finish and --workers-per-slice "
				   "are not for --target vertex (the machine "
				   "type and --nodes set the shape; use "
				   "--region)");
	if (f->vertex.max_wait_ms % 1000)
		return usage_error("--max-wait takes whole seconds");
	return 0;
}

static int print_render(const json_t *body)
{
	char *text = json_dumps(body, JSON_INDENT(2));

	if (!text) {
		log_error("out of memory");
		return 1;
	}
	printf("%s\n", text);
	free(text);
	return 0;
}

static int region_and_project(struct job_flags *f, char *rbuf, size_t rlen,
			      char *pbuf, size_t plen)
{
	struct err e;

	err_init(&e);
	if (gcloud_default(f->vertex.region, "ai", "region", rbuf, rlen,
			   &f->vertex.region, &e) ||
	    gcloud_default(f->r.project, "core", "project", pbuf, plen,
			   &f->r.project, &e))
		return usage_error("%s", e.msg);
	if (!f->vertex.region)
		return usage_error("--region is required (for example "
				   "us-central1; or set CLOUDSDK_AI_REGION)");
	if (strpbrk(f->vertex.region, "/?#% "))
		return usage_error("--region '%s' is not a region",
				   f->vertex.region);
	if (!f->r.project)
		return usage_error("no project: pass --project, set "
				   "CLOUDSDK_CORE_PROJECT or run `gcloud config "
				   "set project PROJECT`");
	return 0;
}

/* Posts body; says where the job is and what to run next. */
static int post(const struct job_flags *f, const json_t *body,
		const char *run_url)
{
	struct vertex_client *c;
	json_t *job = NULL;
	struct err e;
	int rc;

	err_init(&e);
	rc = vertex_open(&c, f->r.project, f->vertex.region, &e);
	if (!rc)
		rc = vertex_job_create(c, body, &job, &e);
	vertex_close(c);
	if (rc) {
		log_error("creating the CustomJob: %s (the run's objects are in "
			  "place: the same command submits it again)", e.msg);
		return rc == CLOUD_EINVAL ? EXIT_USAGE : 1;
	}
	fprintf(stderr, "slicectl: CustomJob %s created for run %s; follow it "
			"with `slicectl status %s`\n",
		json_string_value(json_object_get(job, "name")), run_url,
		f->r.name);
	printf("%s\n", json_string_value(json_object_get(job, "name")));
	json_decref(job);
	return 0;
}

static int submit(struct job_flags *f)
{
	struct job_request *r = &f->r;
	const struct gke_options *g = &f->gke;
	struct vertex_spec s = { 0 };
	struct job_target t = { 0 };
	struct prepared_run run;
	char rbuf[128], pbuf[128];
	json_t *body = NULL;
	struct err e;
	int status;

	err_init(&e);
	status = target_accelerator(f, "replica", false, &s.acc);
	if (!status)
		status = region_and_project(f, rbuf, sizeof(rbuf), pbuf,
					    sizeof(pbuf));
	if (status)
		return status;
	s.run = r->name;
	s.image = g->image;
	s.num_slices = r->num_slices;
	s.env = &r->env;
	s.spot = r->spot;
	s.flex_start = g->flex_start;
	s.max_wait_s = f->vertex.max_wait_ms / 1000;
	s.reservation = g->reservation;
	s.service_account = g->service_account;
	s.network = f->vertex.network;
	if (vertex_check(&s, &e))
		return usage_error("%s", e.msg);
	t.kind = (char *)"vertex";
	t.location = (char *)f->vertex.region;
	t.project = (char *)r->project;
	r->target = &t;
	r->workers_per_slice = s.acc.workers;
	r->portable = true;
	r->zone = NULL;
	if (f->render ? job_plan(r, &run, &e) : job_prepare(r, &run, &e)) {
		r->target = NULL;
		return job_exit_status(&e);
	}
	s.run_url = run.run_url;
	s.supervisor_sha256 = run.supervisor_sha256;
	if (vertex_render(&s, &body, &e)) {
		log_error("%s", e.msg);
		status = 1;
	} else if (f->render) {
		status = print_render(body);
	} else {
		status = post(f, body, run.run_url);
		if (!status && f->watch)
			status = vertex_watch(run.run_url, &run.job,
					      &(struct watch_flags){
						      f->recreate_budget,
						      f->lease_ms });
	}
	json_decref(body);
	prepared_run_release(&run);
	r->target = NULL;
	return status;
}

static const struct target_words words = {
	.state_key = "job_state", .workers_key = "replicas",
	.attempt_key = "custom_job", .phase_key = "state",
	.scheduler = "Vertex AI", .worker_heading = "REPLICA",
	.attempt_heading = "JOB", .phase_heading = "STATE",
	.worker = "replica", .object = "CustomJob",
};

static void what(const struct job *j, char *out, size_t len)
{
	snprintf(out, len, "the CustomJobs of run %s in %s", j->name,
		 j->target.location);
}

static int delete_jobs(struct run_qr *q, bool force)
{
	(void)force;
	return target_delete_run(q, vertex_delete);
}

static int reset_job(struct run_qr *q, bool wait)
{
	return target_reset_run(q, wait, vertex_reset);
}

static int watch_jobs(struct run_qr *q, const struct watch_flags *f)
{
	return vertex_watch(q->ro.url, &q->ro.job, f);
}

const struct target_ops target_vertex = {
	.name = "vertex",
	.kind = "vertex",
	.options = options,
	.check = check,
	.submit = submit,
	.status = vertex_describe,
	.delete = delete_jobs,
	.reset = reset_job,
	.watch = watch_jobs,
	.what = what,
	.words = &words,
};
