/*
 * slurm_job.c: `slicectl job --target slurm`. The flags are checked and
 * the batch script rendered before anything is touched; --render prints
 * it and stops there. Otherwise the job is submitted held (so its id can
 * go in job.json before any node runs), job_prepare puts the run in its
 * bucket, and the job is released. A run whose objects cannot go up
 * leaves no job behind.
 */
#include "launcher/job.h"
#include "launcher/launcher.h"
#include "launcher/target/slurm/slurm.h"
#include "launcher/target/target.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t options(struct job_flags *f, struct opt *opts)
{
	struct slurm_options *o = &f->slurm;
	const struct opt table[SLURM_OPTIONS_COUNT] = {
		{ .name = "partition", .kind = OPT_STRING,
		  .value = &o->partition, .arg = "P",
		  .help = "--target slurm: the partition" },
		{ .name = "nodes", .kind = OPT_UINT, .value = &o->nodes,
		  .arg = "N", .min = 1, .max = 65536,
		  .help = "--target slurm: nodes, one supervisor on each" },
		{ .name = "gpus-per-node", .kind = OPT_UINT,
		  .value = &o->gpus_per_node, .arg = "G", .max = 1024,
		  .help = "--target slurm: GPUs each node must have" },
		{ .name = "account", .kind = OPT_STRING, .value = &o->account,
		  .arg = "A", .help = "--target slurm: the account charged" },
		{ .name = "qos", .kind = OPT_STRING, .value = &o->qos,
		  .arg = "Q", .help = "--target slurm: the quality of service" },
		{ .name = "time", .kind = OPT_STRING, .value = &o->time_limit,
		  .arg = "LIMIT", .help = "--target slurm: the time limit "
		  "(D-H:M:S); the notice comes grace + 60 s before it" },
		{ .name = "constraint", .kind = OPT_STRING,
		  .value = &o->constraint, .arg = "C",
		  .help = "--target slurm: node features required" },
		{ .name = "slurmrestd", .kind = OPT_STRING,
		  .value = &o->slurmrestd, .arg = "URL",
		  .help = "--target slurm: submit, ask and delete through "
		  "slurmrestd (http://HOST:PORT or unix:/path/to/socket; "
		  "JWT from SLURM_JWT) instead of sbatch/scontrol/scancel" },
	};

	memcpy(opts, table, sizeof(table));
	return SLURM_OPTIONS_COUNT;
}

bool slurm_flags_given(const struct slurm_options *o)
{
	return o->partition || o->nodes || o->gpus_per_node || o->account ||
	       o->qos || o->time_limit || o->constraint || o->slurmrestd;
}

int slurm_refuse_flags(const struct job_flags *f)
{
	if (slurm_flags_given(&f->slurm))
		return usage_error("--partition, --nodes, --gpus-per-node, "
				   "--account, --qos, --time, --constraint and "
				   "--slurmrestd "
				   "are for --target slurm");
	return 0;
}

static int check(const struct job_flags *f)
{
	int status = target_refuse_vm_flags(f, target_slurm.name);

	if (!status && (gke_flags_given(&f->gke) || f->max_run_ms))
		status = usage_error("--location, --namespace, --queue, "
				     "--priority-class, --image, --kubeconfig, "
				     "--context, --reservation, --flex-start, "
				     "--queued-provisioning and --max-run-duration "
				     "are for --target gke");
	return status ? status : vertex_refuse_flags(f);
}

/* The flags only the other targets take, and the shape. */
static int check_flags(const struct job_request *r,
		       const struct slurm_options *o, struct err *e)
{
	if (r->reserved || r->best_effort || r->spot)
		return err_set(e, COMMON_EUSAGE,
			       "--spot, --reserved and --best-effort are "
			       "Cloud capacity tiers; on Slurm give --qos or "
			       "--partition");
	if (r->accelerator_type || r->runtime_version || r->zone ||
	    r->delete_on_finish || r->workers_per_slice)
		return err_set(e, COMMON_EUSAGE,
			       "--accelerator-type, --runtime-version, --zone, "
			       "--delete-on-finish and --workers-per-slice are "
			       "not for --target slurm (--nodes and "
			       "--gpus-per-node set the shape)");
	if (!o->nodes)
		return err_set(e, COMMON_EUSAGE,
			       "--nodes is required: one supervisor runs on "
			       "each");
	if (o->nodes % r->num_slices)
		return err_set(e, COMMON_EUSAGE,
			       "--nodes %u is not a multiple of --num-slices "
			       "%u", o->nodes, r->num_slices);
	return 0;
}

/* sbatch --parsable says "ID" or "ID;CLUSTER". */
static int parse_job_id(const char *out, char *id, size_t len, struct err *e)
{
	size_t n = strspn(out, "0123456789");

	if (!n || n >= len || (out[n] && !strchr(";\n", out[n])))
		return err_set(e, COMMON_EIO,
			       "sbatch --parsable said '%.80s', not a job id",
			       out);
	memcpy(id, out, n);
	id[n] = '\0';
	return 0;
}

/* Submits the script held, through slurmrestd when rest names one; id
 * gets the job's id. */
static int submit(const struct slurm_spec *s, const char *script,
		  const char *cluster, const char *rest, char *id, size_t len,
		  struct err *e)
{
	const char *argv[] = { "sbatch", "--parsable", "--hold", NULL };
	struct buf out;
	int rc;

	if (rest)
		return slurm_rest_submit(rest, s, script, id, len, e);
	buf_init(&out);
	rc = slurm_exec(cluster, argv, script, &out, e);
	if (!rc)
		rc = parse_job_id(out.data ? out.data : "", id, len, e);
	buf_release(&out);
	return rc;
}

static int submit_job(struct job_flags *f)
{
	struct job_request *r = &f->r;
	const struct slurm_options *o = &f->slurm;
	const char *cluster = f->cluster;
	struct slurm_spec s = { 0 };
	struct prepared_run run;
	struct job_target t = { 0 };
	struct buf script;
	char id[32];
	struct err e;
	int status = 1;

	err_init(&e);
	if (check_flags(r, o, &e))
		return usage_error("%s", e.msg);
	r->workers_per_slice = o->nodes / r->num_slices;
	r->portable = true;
	r->target = NULL;
	if (job_plan(r, &run, &e)) {
		log_error("%s", e.msg);
		return e.code == COMMON_EUSAGE || e.code == COMMON_EINVAL
			       ? EXIT_USAGE
			       : 1;
	}
	s.run = r->name;
	s.partition = o->partition;
	s.account = o->account;
	s.qos = o->qos;
	s.time_limit = o->time_limit;
	s.constraint = o->constraint;
	s.nodes = o->nodes;
	s.gpus_per_node = o->gpus_per_node;
	s.grace_s = r->grace_s;
	s.run_url = run.run_url;
	s.supervisor_sha256 = run.supervisor_sha256;
	buf_init(&script);
	if (slurm_render(&s, &script, &e)) {
		status = e.code == COMMON_EUSAGE ? usage_error("%s", e.msg) : 1;
		if (status == 1)
			log_error("%s", e.msg);
		goto out;
	}
	if (f->render) {
		fwrite(script.data, 1, script.len, stdout);
		status = 0;
		goto out;
	}
	if (submit(&s, script.data, cluster, o->slurmrestd, id, sizeof(id),
		   &e)) {
		log_error("submitting the batch job: %s", e.msg);
		goto out;
	}
	t.kind = (char *)"slurm";
	t.partition = (char *)o->partition;
	t.job_id = id;
	t.cluster = (char *)cluster;
	t.slurmrestd = (char *)o->slurmrestd;
	r->target = &t;
	prepared_run_release(&run);
	if (job_prepare(r, &run, &e)) {
		struct err ce;

		log_error("%s", e.msg);
		err_init(&ce);
		if (o->slurmrestd ? slurm_rest_cancel(o->slurmrestd, id, &ce)
				  : slurm_job_command(cluster, "scancel", NULL,
						      id, &ce))
			log_error("cancelling held job %s: %s", id, ce.msg);
		status = e.code == COMMON_EUSAGE || e.code == COMMON_EINVAL
				 ? EXIT_USAGE
				 : 1;
		goto out;
	}
	if (o->slurmrestd ? slurm_rest_release(o->slurmrestd, id, &e)
			  : slurm_job_command(cluster, "scontrol", "release",
					      id, &e)) {
		log_error("releasing job %s: %s (it stays held: scontrol "
			  "release %s)", id, e.msg, id);
		goto out;
	}
	fprintf(stderr, "slicectl: batch job %s submitted to partition %s: "
			"%u node%s for run %s\n",
		id, o->partition, o->nodes, o->nodes == 1 ? "" : "s",
		run.run_url);
	printf("%s\n", id);
	status = 0;
out:
	r->target = NULL;
	buf_release(&script);
	prepared_run_release(&run);
	return status;
}

static const struct target_words words = {
	.state_key = "job_state", .workers_key = "nodes",
	.attempt_key = "requeue", .phase_key = "state",
	.scheduler = "Slurm", .worker_heading = "WORKER NODE",
	.attempt_heading = "REQUEUE", .phase_heading = "STATE",
	.worker = "node", .object = "batch job",
};

static void what(const struct job *j, char *out, size_t len)
{
	snprintf(out, len, "Slurm job %s", j->target.job_id);
}

static int delete_job(struct run_qr *q, bool force)
{
	(void)force;
	return target_delete_run(q, slurm_delete);
}

static int reset_job(struct run_qr *q, bool wait)
{
	return target_reset_run(q, wait, slurm_reset);
}

const struct target_ops target_slurm = {
	.name = "slurm",
	.kind = "slurm",
	.options = options,
	.check = check,
	.submit = submit_job,
	.status = slurm_describe,
	.delete = delete_job,
	.reset = reset_job,
	.no_watch = "the batch job requeues itself (sbatch --requeue): "
		    "nothing is left for a watcher to recreate",
	.what = what,
	.words = &words,
};
