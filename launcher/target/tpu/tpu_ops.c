/*
 * tpu_ops.c: the tpu-vm row (target.h), with `slicectl delete` and
 * `reset` of a run's queued resource, or of one named directly.
 */
#include "launcher/launcher.h"
#include "launcher/run_qr.h"
#include "launcher/target/target.h"
#include "launcher/target/tpu/tpu.h"

#include <stdio.h>

/* The queued resource's client, with what is being done to it said.
 * Returns 0 or an exit status. */
static int open_qr(struct run_qr *q, const char *doing, struct tpu_client **c)
{
	int status = run_qr_open(q, c);

	if (!status)
		run_qr_say(q, doing);
	return status;
}

static int delete_qr(struct run_qr *q, bool force)
{
	struct tpu_client *c = NULL;
	struct err e;
	int status, rc;

	err_init(&e);
	status = open_qr(q, "deleting", &c);
	if (status)
		goto out;
	rc = tpu_qr_delete(c, q->qr, force, q->to.wait, q->to.timeout_ms,
			   tpu_print_progress, NULL, &e);
	if (rc) {
		status = tpu_exit_status(rc, &e);
		goto out;
	}
	if (q->ro.format == 1)
		run_qr_print_json(q, "delete",
				  q->to.wait ? "deleted" : "deleting");
	else
		printf("%s %s\n", q->qr,
		       q->to.wait ? "deleted" : "is being deleted");
out:
	tpu_close(c);
	return status;
}

static int reset_qr(struct run_qr *q, bool wait)
{
	struct tpu_client *c = NULL;
	struct err e;
	int status, rc;

	err_init(&e);
	status = open_qr(q, "resetting", &c);
	if (status)
		goto out;
	rc = tpu_qr_reset(c, q->qr, wait, q->to.timeout_ms, &e);
	if (rc) {
		status = tpu_exit_status(rc, &e);
		goto out;
	}
	if (q->ro.format == 1)
		run_qr_print_json(q, "reset", wait ? "reset" : "resetting");
	else
		printf("%s %s\n", q->qr, wait ? "reset: every node is READY"
					      : "is being reset");
out:
	tpu_close(c);
	return status;
}

/* `slicectl watch` of a run: its queued resource asked for again as the
 * API describes it, since job.json does not keep its shape. */
static int watch_qr(struct run_qr *q, const struct watch_flags *f)
{
	struct tpu_client *c = NULL;
	int status = open_qr(q, "watching", &c);

	if (!status)
		status = tpu_watch(c, q->qr, NULL, q->ro.url, &q->ro.job, f);
	tpu_close(c);
	return status;
}

/* job.json has no "target" object here but a "tpu" one (project, zone,
 * name): the supervisor's worker 0 reads it to delete the queued
 * resource once the run is done. */
const struct target_ops target_tpu_vm = {
	.name = "tpu-vm",
	.options = tpu_job_options,
	.check = tpu_job_check,
	.submit = tpu_job_submit,
	.delete = delete_qr,
	.reset = reset_qr,
	.watch = watch_qr,
};
