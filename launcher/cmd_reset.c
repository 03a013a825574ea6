/*
 * cmd_reset.c: `slicectl reset NAME`: restart every worker of a run on its
 * target (target.h), or of a queued resource named directly, the way out
 * for a slice that is stuck.
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
	"new pod runs (--no-wait: returns once they are deleted). Its pods\n"
	"cannot tell it from an eviction: it is recorded as the\n"
	"infrastructure's and spends --max-infra-restarts, as every JobSet\n"
	"restart does.\n"
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

int cmd_reset(int argc, char **argv)
{
	struct run_qr q = { 0 };
	const struct target_ops *t;
	bool wait = false, no_wait = false;
	int status;
	const struct opt own[] = {
		{ .name = "wait", .kind = OPT_FLAG, .value = &wait,
		  .help = "return when every node is READY again (the "
			  "default)" },
		{ .name = "no-wait", .kind = OPT_FLAG, .value = &no_wait,
		  .help = "return once the API accepted the reset" },
	};
	struct opt opts[OPT_COUNT(own) + RUN_QR_OPTIONS_COUNT + 1] = { 0 };

	memcpy(opts, own, sizeof(own));
	run_qr_table(&q, opt_end(opts), TPU_WITH_TIMEOUT);
	status = run_qr_start(opts, argc, argv, usage, &q);
	if (status < 0 && wait && no_wait) {
		log_error("--wait and --no-wait exclude each other");
		status = EXIT_USAGE;
	}
	if (status < 0) {
		t = run_qr_target(&q);
		status = t->reset ? t->reset(&q, !no_wait)
				  : run_qr_unsupported(&q, "reset");
	}
	run_qr_release(&q);
	return status;
}
