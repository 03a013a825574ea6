/*
 * target.c: see target.h. The one table of targets, and what the rows
 * share.
 */
#include "launcher/launcher.h"
#include "launcher/run_qr.h"
#include "launcher/target/target.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const struct target_ops *const targets[TARGET_LAST] = {
	[TARGET_TPU_VM] = &target_tpu_vm,
	[TARGET_GKE] = &target_gke,
	[TARGET_SLURM] = &target_slurm,
	[TARGET_LOCAL] = &target_local,
	[TARGET_VERTEX] = &target_vertex,
};

const struct target_ops *target_find(const char *name)
{
	for (size_t i = 0; i < TARGET_LAST; i++)
		if (!strcmp(targets[i]->name, name))
			return targets[i];
	return NULL;
}

size_t target_options(struct job_flags *f, struct opt *opts)
{
	size_t n = 0;

	for (size_t i = 0; i < TARGET_LAST; i++)
		if (targets[i]->options)
			n += targets[i]->options(f, opts + n);
	return n;
}

const char *const *target_choices(void)
{
	static const char *names[TARGET_LAST + 1];

	for (size_t i = 0; i < TARGET_LAST; i++)
		names[i] = targets[i]->name;
	return names;
}

const struct target_ops *target_chosen(const struct job_flags *f)
{
	if (f->target)
		return f->target;
	return f->local ? &target_local : &target_tpu_vm;
}

const struct target_ops *target_of(const struct job *j)
{
	for (size_t i = 0; j->target.kind && i < TARGET_LAST; i++)
		if (targets[i]->kind &&
		    !strcmp(targets[i]->kind, j->target.kind))
			return targets[i];
	/* A job.json from before tpu-vm and local runs recorded their kind
	 * (run/job.c): a "tpu" object is a queued resource's run. */
	return j->tpu_name ? &target_tpu_vm : &target_local;
}

int target_refuse_vm_flags(const struct job_flags *f, const char *name)
{
	if (f->local || f->watch || f->local_dir || f->chaos || f->seed ||
	    f->quiet || f->provisioning_model)
		return usage_error("--local, --watch, --local-dir, --chaos, "
				   "--seed, --quiet and --provisioning-model are "
				   "not for --target %s", name);
	return 0;
}

void target_json_ids(json_t *o, const struct job_target *t)
{
	const char *k[] = { "jobset", "namespace", "job_id", "partition" };
	const char *v[] = { t->jobset, t->namespace, t->job_id, t->partition };

	for (size_t i = 0; i < 4; i++)
		if (v[i])
			json_object_set_new(o, k[i], json_string(v[i]));
}

void target_view_release(struct target_view *v)
{
	if (!v)
		return;
	free(v->workers);
	memset(v, 0, sizeof(*v));
}

int target_delete_run(const struct run_qr *q,
		      int (*del)(const struct job *j, bool wait,
				 unsigned timeout_ms, bool *absent,
				 struct err *e))
{
	const struct job *j = &q->ro.job;
	bool absent = false;
	char what[300];
	struct err e;

	err_init(&e);
	target_of(j)->what(j, what, sizeof(what));
	log_info("deleting %s of run %s", what, q->ro.url);
	if (del(j, q->to.wait, q->to.timeout_ms, &absent, &e)) {
		log_error("%s", e.msg);
		return e.code == COMMON_EUSAGE ? EXIT_USAGE : 1;
	}
	if (absent) {
		log_error("%s is not there (deleted or ended already?)", what);
		return EXIT_NOT_FOUND;
	}
	if (q->ro.format == 1) {
		json_t *o = json_pack("{s:s, s:s, s:s}", "name", q->name,
				      "url", q->ro.url, "action", "delete");

		if (o)
			target_json_ids(o, &j->target);
		if (o)
			json_object_set_new(o, "state",
					    json_string(q->to.wait ? "deleted"
								   : "deleting"));
		run_print_json(o);
	} else {
		printf("%s %s\n", what,
		       q->to.wait ? "deleted" : "is being deleted");
	}
	return 0;
}

int target_reset_run(const struct run_qr *q, bool wait,
		     int (*rst)(const struct job *j, bool wait,
				unsigned timeout_ms, long *attempt,
				struct err *e))
{
	const struct job *j = &q->ro.job;
	const struct target_ops *t = target_of(j);
	long attempt = -1;
	char what[300];
	struct err e;

	err_init(&e);
	t->what(j, what, sizeof(what));
	log_info("resetting every worker of %s of run %s", what, q->ro.url);
	if (rst(j, wait, q->to.timeout_ms, &attempt, &e)) {
		log_error("%s", e.msg);
		return e.code == COMMON_EUSAGE ? EXIT_USAGE : 1;
	}
	if (q->ro.format == 1) {
		json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:o}",
				      "name", q->name, "url", q->ro.url,
				      "action", "reset", "state",
				      wait ? "reset" : "resetting",
				      "restart_attempt",
				      attempt >= 0 ? json_integer(attempt)
						   : json_null());

		if (o)
			target_json_ids(o, &j->target);
		run_print_json(o);
	} else if (wait) {
		printf("%s reset: every %s of restart attempt %ld runs\n",
		       what, t->words->worker, attempt);
	} else {
		printf("%s is being reset\n", what);
	}
	return 0;
}

int target_accelerator(const struct job_flags *f, const char *unit,
		       bool slices, struct accelerator *acc)
{
	const char *type = f->r.accelerator_type;
	unsigned nodes = f->slurm.nodes;

	if (!type)
		return usage_error("--accelerator-type is required (for example "
				   "v5litepod-16, v6e-16, or a GPU machine "
				   "type such as a3-megagpu-8g with --nodes N)");
	if (!accelerator_lookup(type, acc)) {
		char tpus[512], gpus[512];

		accelerator_examples(tpus, sizeof(tpus));
		accelerator_gpu_examples(gpus, sizeof(gpus));
		return usage_error("--accelerator-type '%s' is not a TPU type "
				   "slicectl knows; it knows %s; nor a GPU "
				   "machine type (%s, with --nodes N)", type,
				   tpus, gpus);
	}
	if (!acc->gpus_per_host) {
		if (nodes)
			return usage_error("--nodes is for GPU machine types: "
					   "TPU type %s is %u host%s a slice%s",
					   type, acc->workers,
					   acc->workers == 1 ? "" : "s",
					   slices ? "; give --num-slices for "
						    "more"
						  : "");
		return 0;
	}
	if (!nodes)
		return usage_error("--nodes is required with GPU machine type "
				   "%s: how many nodes (one %s of %u GPUs on "
				   "each)", type, unit, acc->gpus_per_host);
	acc->workers = nodes;
	acc->chips = nodes * acc->gpus_per_host;
	return 0;
}
