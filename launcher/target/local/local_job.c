/*
 * local_job.c: `slicectl job --target local` (or --local): the local
 * provider (local.h) runs every worker of the run here until it ends.
 */
#include "launcher/job.h"
#include "launcher/launcher.h"
#include "launcher/target/local/local.h"
#include "launcher/target/target.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static int submit(struct job_flags *o)
{
	struct local_options lo = { 0 };
	struct prepared_run run;
	struct err e;
	int status;

	if (!o->r.workers_per_slice)
		return usage_error("--local needs --workers-per-slice W");
	if (o->watch || o->r.spot || o->r.reserved || o->r.best_effort ||
	    o->provisioning_model || o->max_run_ms || o->to.project ||
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
	if (!o->r.rendezvous_port) {
		if (local_rendezvous_port(&o->r.rendezvous_port, &e))
			return job_exit_status(&e);
		o->r.rendezvous_port_picked = true;
	}
	if (job_prepare(&o->r, &run, &e))
		return job_exit_status(&e);
	status = local_run(&run, &lo);
	prepared_run_release(&run);
	return status;
}

/* Refuses the other targets' own flags, naming them. */
static int check(const struct job_flags *f)
{
	int status = slurm_refuse_flags(f);

	if (!status)
		status = gke_refuse_flags(f);
	return status ? status : vertex_refuse_flags(f);
}

/* The local provider's workers are local processes: nothing beyond the
 * bucket to show, delete or reset (slicectl stop ends the run). */
const struct target_ops target_local = {
	.name = "local",
	.check = check,
	.submit = submit,
	.no_watch = "slicectl job --target local runs the workers itself and "
		    "stays with them until the run ends: there is nothing "
		    "else to watch",
};
