/*
 * cmd_reset.c: `slicectl reset NAME`: restart every worker of a queued
 * resource (a run's, or one named directly), the way out for a slice that
 * is stuck.
 */
#include "launcher/launcher.h"
#include "launcher/run_qr.h"
#include "launcher/target/target.h"

#include <stdio.h>
#include <string.h>

static const char usage[] =
	"usage: slicectl reset NAME [--no-wait] [--timeout S] [--bucket URL]\n"
	"                      [--project P] [--zone Z] [--format text|json]\n"
	"\n"
	"Resets the queued resource of run NAME (or the queued resource NAME):\n"
	"every worker of every slice restarts and runs its startup script\n"
	"again; a run's supervisors then rejoin from the newest committed\n"
	"checkpoint. It waits until every node is READY again (--wait, the\n"
	"default); --no-wait returns once the API accepted the reset.\n"
	"\n" RUN_QR_USAGE_NAME "\n"
	"A run on GKE (slicectl job --target gke): every pod of its JobSet is\n"
	"deleted (each trainer gets SIGTERM and its grace) and JobSet\n"
	"recreates them all with a new restart attempt; it waits until every\n"
	"new pod runs (--no-wait: returns once they are deleted). That counts\n"
	"against the run's --max-restarts, as every JobSet restart does.\n"
	"A run on Slurm (--target slurm): its batch job is requeued (scontrol\n"
	"requeue); it waits until the job runs again with its restart count\n"
	"grown (Slurm may hold a requeued job for a while: see --timeout).\n"
	"\n"
	"Prints \"QR reset: every node is READY\" (\"QR is being reset\" with\n"
	"--no-wait); --format json prints {\"name\", \"url\", \"queued_resource\",\n"
	"\"project\", \"zone\", \"action\": \"reset\", \"state\": \"reset\" or\n"
	"\"resetting\"}.\n"
	"\n"
	"Exit status: 0 reset (or resetting, with --no-wait); 1 the API\n"
	"refused or failed (or the store did); 2 bad arguments, or a run of\n"
	"the local provider; 4 no such queued resource, or no run NAME under\n"
	"--bucket; 124 --timeout ran out.";

/* A run on another target: every worker started again there. */
static int reset_target(const struct run_qr *q, bool wait)
{
	const struct job_target *t = &q->ro.job.target;
	long attempt = -1;
	char what[300];
	struct err e;

	err_init(&e);
	target_what(&q->ro.job, what, sizeof(what));
	log_info("resetting every worker of %s of run %s", what, q->ro.url);
	if (target_reset(&q->ro.job, wait, q->to.timeout_ms, &attempt, &e)) {
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
			target_json_ids(o, t);
		run_print_json(o);
	} else if (wait) {
		printf("%s reset: every %s of restart attempt %ld runs\n",
		       what, target_of(&q->ro.job) == TARGET_SLURM ? "node"
								   : "pod",
		       attempt);
	} else {
		printf("%s is being reset\n", what);
	}
	return 0;
}

int cmd_reset(int argc, char **argv)
{
	struct run_qr q = { 0 };
	struct tpu_client *c = NULL;
	struct err e;
	bool wait = false, no_wait = false;
	int rc, status;
	const struct opt own[] = {
		{ .name = "wait", .kind = OPT_FLAG, .value = &wait,
		  .help = "return when every node is READY again (the "
			  "default)" },
		{ .name = "no-wait", .kind = OPT_FLAG, .value = &no_wait,
		  .help = "return once the API accepted the reset" },
	};
	struct opt opts[OPT_COUNT(own) + RUN_QR_OPTIONS_COUNT + 1] = { 0 };

	err_init(&e);
	memcpy(opts, own, sizeof(own));
	run_qr_table(&q, opt_end(opts), TPU_WITH_TIMEOUT);
	q.other_targets = true;
	status = run_qr_start(opts, argc, argv, usage, &q, &c);
	if (status >= 0)
		goto out;
	if (wait && no_wait) {
		log_error("--wait and --no-wait exclude each other");
		status = EXIT_USAGE;
		goto out;
	}
	if (!q.qr) {
		status = reset_target(&q, !no_wait);
		goto out;
	}
	status = 0;
	run_qr_say(&q, "resetting");
	rc = tpu_qr_reset(c, q.qr, !no_wait, q.to.timeout_ms, &e);
	if (rc) {
		status = tpu_exit_status(rc, &e);
		goto out;
	}
	if (q.ro.format == 1)
		run_qr_print_json(&q, "reset", no_wait ? "resetting" : "reset");
	else
		printf("%s %s\n", q.qr, no_wait ? "is being reset"
					       : "reset: every node is READY");
out:
	tpu_close(c);
	run_qr_release(&q);
	return status;
}
