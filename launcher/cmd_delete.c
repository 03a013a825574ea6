/*
 * cmd_delete.c: `slicectl delete NAME`: a queued resource (a run's, or
 * one named directly), and with --force the nodes it holds.
 */
#include "launcher/launcher.h"
#include "launcher/run_qr.h"
#include "launcher/target/target.h"

#include <stdio.h>
#include <string.h>

static const char usage[] =
	"usage: slicectl delete NAME [--force] [--wait] [--timeout S] "
	"[--bucket URL]\n"
	"                       [--project P] [--zone Z] [--format text|json]\n"
	"\n"
	"Deletes the queued resource of run NAME (or the queued resource\n"
	"NAME). The API refuses while its nodes exist (a QR that is ACTIVE,\n"
	"say) unless --force, which deletes the nodes first. --wait returns\n"
	"only once it is gone. A run's objects stay in its bucket.\n"
	"\n" RUN_QR_USAGE_NAME "\n"
	"A run on GKE (slicectl job --target gke): deletes its JobSet, and\n"
	"with it Kueue's Workload and every pod (each trainer gets SIGTERM\n"
	"and its grace); the cluster comes from the run's job.json. A run on\n"
	"Slurm (--target slurm): cancels its batch job (scancel).\n"
	"\n"
	"Prints \"QR deleted\" (\"QR is being deleted\" without --wait);\n"
	"--format json prints {\"name\", \"url\", \"queued_resource\", \"project\",\n"
	"\"zone\", \"action\": \"delete\", \"state\": \"deleted\" or \"deleting\"}.\n"
	"\n"
	"Exit status: 0 deleted (or deleting, without --wait); 1 the API\n"
	"refused or failed (or the store did); 2 bad arguments, or a run of\n"
	"the local provider; 4 no such queued resource, or no run NAME under\n"
	"--bucket; 124 --timeout ran out.";

/* A run on another target: what slicectl job created there. */
static int delete_target(const struct run_qr *q)
{
	const struct job_target *t = &q->ro.job.target;
	bool absent = false;
	char what[300];
	struct err e;

	err_init(&e);
	target_what(&q->ro.job, what, sizeof(what));
	log_info("deleting %s of run %s", what, q->ro.url);
	if (target_delete(&q->ro.job, q->to.wait, q->to.timeout_ms, &absent,
			  &e)) {
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
			target_json_ids(o, t);
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

int cmd_delete(int argc, char **argv)
{
	struct run_qr q = { 0 };
	struct tpu_client *c = NULL;
	struct err e;
	bool force = false;
	int rc, status;
	const struct opt own[] = {
		{ .name = "force", .kind = OPT_FLAG, .value = &force,
		  .help = "delete the queued resource's nodes too" },
	};
	struct opt opts[OPT_COUNT(own) + RUN_QR_OPTIONS_COUNT + 1] = { 0 };

	err_init(&e);
	memcpy(opts, own, sizeof(own));
	run_qr_table(&q, opt_end(opts), TPU_WITH_WAIT | TPU_WITH_TIMEOUT);
	q.other_targets = true;
	status = run_qr_start(opts, argc, argv, usage, &q, &c);
	if (status >= 0)
		goto out;
	if (!q.qr) {
		status = delete_target(&q);
		goto out;
	}
	status = 0;
	run_qr_say(&q, "deleting");
	rc = tpu_qr_delete(c, q.qr, force, q.to.wait, q.to.timeout_ms,
			   tpu_print_progress, NULL, &e);
	if (rc) {
		status = tpu_exit_status(rc, &e);
		goto out;
	}
	if (q.ro.format == 1)
		run_qr_print_json(&q, "delete",
				  q.to.wait ? "deleted" : "deleting");
	else
		printf("%s %s\n", q.qr,
		       q.to.wait ? "deleted" : "is being deleted");
out:
	tpu_close(c);
	run_qr_release(&q);
	return status;
}
