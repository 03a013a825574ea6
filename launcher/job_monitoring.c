/*
 * job_monitoring.c: the project `slicectl job --monitoring` exports
 * goodput to (job.h, job_monitoring_project).
 *
 * The run's own project first, so that a run's series sit next to its
 * TPUs or cluster: --project (or its defaults) on tpu-vm, the cluster's
 * --project on GKE. Slurm and local runs have none; gcloud's default
 * project (CLOUDSDK_CORE_PROJECT, `gcloud config set project`) then,
 * as every other command takes it, else the flag must say.
 */
#include "launcher/job.h"

#include <stdlib.h>
#include <string.h>

int job_monitoring_project(const struct job_request *r, char **out,
			   struct err *e)
{
	const char *p = r->monitoring;
	char buf[128];

	*out = NULL;
	if (!p)
		return 0;
	if (!*p)
		p = r->project ? r->project
		    : r->target && r->target->project ? r->target->project
						      : NULL;
	if ((!p || !*p) &&
	    gcloud_default(NULL, "core", "project", buf, sizeof(buf), &p, e))
		return e->code = COMMON_EUSAGE;
	if (!p || !*p)
		return err_set(e, COMMON_EUSAGE,
			       "--monitoring: the run has no project to write "
			       "its metrics to; give --monitoring=PROJECT, "
			       "set CLOUDSDK_CORE_PROJECT or run `gcloud "
			       "config set project PROJECT`");
	*out = strdup(p);
	return *out ? 0 : err_set(e, COMMON_ENOMEM, "out of memory");
}
