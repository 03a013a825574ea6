/*
 * tpu_job.c: `slicectl job` on Cloud TPU, the default target: job_prepare
 * (job.h) puts the run in its bucket and renders the startup script, then
 * a queued resource is asked for whose startup script boots every worker
 * with it; --watch (tpu_watch.c) stays to recreate it after a preemption.
 */
#include "launcher/accelerator.h"
#include "launcher/job.h"
#include "launcher/launcher.h"
#include "launcher/qr_spec.h"
#include "launcher/target/target.h"
#include "launcher/target/tpu/tpu.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int unknown_type(const char *type)
{
	char known[512];

	accelerator_examples(known, sizeof(known));
	log_error("--accelerator-type '%s' is not a TPU type slicectl knows; "
		  "it knows %s (each family in the sizes Cloud TPU documents; "
		  "see slicectl job --help)", type, known);
	return EXIT_USAGE;
}

/* The flags the queued resource's spec is finished from (qr_spec.h). */
static struct qr_flags spec_flags(const struct job_flags *o)
{
	return (struct qr_flags){
		.provisioning_model = o->provisioning_model,
		.spot = o->r.spot,
		.reserved = o->r.reserved,
		.best_effort = o->r.best_effort,
		.max_run_ms = o->max_run_ms,
	};
}

/* The capacity flags, checked as slicectl create checks them, before
 * anything is written. */
static int check_capacity(const struct job_flags *o)
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
static int check_cloud(struct job_flags *o)
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
	if (tpu_options_resolve(&o->to, &e))
		return usage_error("%s", e.msg);
	r->project = o->to.project;
	r->zone = o->to.zone;
	if (o->local_dir || o->chaos || o->seed)
		return usage_error("--local-dir, --chaos and --seed are for "
				   "--local");
	return check_capacity(o);
}

static int build_spec(const struct job_flags *o,
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
	if (buf_appendf(&kv, "slicectl_run=%s", r->name) ||
	    strlist_push(&s->labels, kv.data))
		rc = err_set(e, COMMON_ENOMEM, "out of memory");
	buf_release(&kv);
	if (!rc)
		rc = qr_spec_build(s, &f, e);
	return rc;
}

static void print_follow(const struct job_flags *o,
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

int tpu_job_submit(struct job_flags *o)
{
	struct prepared_run run;
	struct tpu_qr_spec spec;
	struct tpu_client *c = NULL;
	struct err e;
	int status, rc;

	status = check_cloud(o);
	if (!status)
		status = tpu_options_open(&o->to, &c);
	if (status)
		return status;
	err_init(&e);
	tpu_qr_spec_init(&spec);
	/* TPU VM images (Ubuntu 20.04's glibc 2.31 and OpenSSL 1.1 among
	 * them) need not have the build machine's libraries. */
	o->r.portable = true;
	if (job_prepare(&o->r, &run, &e)) {
		status = job_exit_status(&e);
		goto out;
	}
	if (build_spec(o, &run, &spec, &e)) {
		status = job_exit_status(&e);
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
	if (o->watch)
		status = tpu_watch(c, spec.id, &spec, run.run_url, &run.job,
				   &(struct watch_flags){ o->recreate_budget,
							  o->lease_ms });
	else
		status = 0;
out_run:
	prepared_run_release(&run);
out:
	tpu_qr_spec_release(&spec);
	tpu_close(c);
	return status;
}

/* Refuses the other targets' flags, naming them. */
int tpu_job_check(const struct job_flags *f)
{
	int status = slurm_refuse_flags(f);

	if (!status)
		status = gke_refuse_flags(f);
	if (!status)
		status = vertex_refuse_flags(f);
	if (!status && f->local)
		status = usage_error("--local is --target local, not --target "
				     "%s", target_tpu_vm.name);
	if (!status && (f->r.workers_per_slice || f->quiet || f->format))
		status = usage_error("--workers-per-slice, --quiet and --format "
				     "are for --local (--format also for "
				     "--target gke --render)");
	return status;
}

size_t tpu_job_options(struct job_flags *f, struct opt *opts)
{
	tpu_options_table(&f->to, opts, 0);
	return opt_end(opts) - opts;
}
