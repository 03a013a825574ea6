/*
 * cmd_delete.c: `slicectl delete NAME`: what `slicectl job` made for a run
 * on its target (target.h), or a queued resource named directly, and with
 * --force the nodes it holds.
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

int cmd_delete(int argc, char **argv)
{
	struct run_qr q = { 0 };
	const struct target_ops *t;
	bool force = false;
	int status;
	const struct opt own[] = {
		{ .name = "force", .kind = OPT_FLAG, .value = &force,
		  .help = "delete the queued resource's nodes too" },
	};
	struct opt opts[OPT_COUNT(own) + RUN_QR_OPTIONS_COUNT + 1] = { 0 };

	memcpy(opts, own, sizeof(own));
	run_qr_table(&q, opt_end(opts), TPU_WITH_WAIT | TPU_WITH_TIMEOUT);
	status = run_qr_start(opts, argc, argv, usage, &q);
	if (status < 0) {
		t = run_qr_target(&q);
		status = t->delete ? t->delete(&q, force)
				   : run_qr_unsupported(&q, "delete");
	}
	run_qr_release(&q);
	return status;
}
