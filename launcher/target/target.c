/*
 * target.c: see target.h. The kind comes from job.json: a "target" object
 * names it, a "tpu" object is a queued resource, neither the local
 * provider.
 */
#include "launcher/target/gke/gke.h"
#include "launcher/target/slurm/slurm.h"
#include "launcher/target/target.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum target_kind target_of(const struct job *j)
{
	if (j->target.kind && !strcmp(j->target.kind, "gke"))
		return TARGET_GKE;
	if (j->target.kind && !strcmp(j->target.kind, "slurm"))
		return TARGET_SLURM;
	return j->tpu_name ? TARGET_TPU_VM : TARGET_LOCAL;
}

const char *target_name(enum target_kind k)
{
	static const char *const names[] = { "tpu-vm", "local", "gke",
					     "slurm" };

	return names[k];
}

bool target_has_view(const struct job *j)
{
	enum target_kind k = target_of(j);

	return k == TARGET_GKE || k == TARGET_SLURM;
}

void target_what(const struct job *j, char *out, size_t len)
{
	const struct job_target *t = &j->target;

	if (target_of(j) == TARGET_SLURM)
		snprintf(out, len, "Slurm job %s", t->job_id);
	else
		snprintf(out, len, "JobSet %s/%s",
			 t->namespace ? t->namespace : "",
			 t->jobset ? t->jobset : "");
}

void target_json_ids(json_t *o, const struct job_target *t)
{
	const char *k[] = { "jobset", "namespace", "job_id", "partition" };
	const char *v[] = { t->jobset, t->namespace, t->job_id, t->partition };

	for (size_t i = 0; i < 4; i++)
		if (v[i])
			json_object_set_new(o, k[i], json_string(v[i]));
}

static int no_view(const struct job *j, struct err *e)
{
	return err_set(e, COMMON_EUSAGE,
		       "run %s is on the %s target, which has no view of "
		       "its own beyond the bucket", j->name,
		       target_name(target_of(j)));
}

int target_describe(const struct job *j, struct target_view *out,
		    struct err *e)
{
	memset(out, 0, sizeof(*out));
	out->position = out->restarts = -1;
	if (target_of(j) == TARGET_SLURM)
		return slurm_describe(&j->target, out, e);
	if (target_of(j) != TARGET_GKE)
		return no_view(j, e);
	return gke_describe(&j->target, out, e);
}

void target_view_release(struct target_view *v)
{
	if (!v)
		return;
	free(v->workers);
	memset(v, 0, sizeof(*v));
}

int target_delete(const struct job *j, bool wait, unsigned timeout_ms,
		  bool *absent, struct err *e)
{
	if (target_of(j) == TARGET_SLURM)
		return slurm_delete(&j->target, wait, timeout_ms, absent, e);
	if (target_of(j) != TARGET_GKE)
		return no_view(j, e);
	return gke_delete(&j->target, wait, timeout_ms, absent, e);
}

int target_reset(const struct job *j, bool wait, unsigned timeout_ms,
		 long *attempt, struct err *e)
{
	if (target_of(j) == TARGET_SLURM)
		return slurm_reset(&j->target, wait, timeout_ms, attempt, e);
	if (target_of(j) != TARGET_GKE)
		return no_view(j, e);
	return gke_reset(&j->target, j->num_slices * j->workers_per_slice,
			 wait, timeout_ms, attempt, e);
}
