/*
 * cmd_delete.c: `slicectl delete NAME`: a queued resource, and with --force
 * the nodes it holds.
 */
#include "launcher/launcher.h"
#include "launcher/tpu_options.h"

#include <stdio.h>

static const char usage[] =
	"usage: slicectl delete NAME [--force] [--wait] [--timeout S] "
	"[--project P] [--zone Z]\n"
	"\n"
	"Deletes the queued resource NAME. The API refuses while its nodes\n"
	"exist (a QR that is ACTIVE, say) unless --force, which deletes the\n"
	"nodes first. --wait returns only once it is gone.\n"
	"\n"
	"Exit status: 0 deleted (or deleting, without --wait); 1 the API\n"
	"refused or failed; 2 bad arguments; 4 no such queued resource; 124\n"
	"--timeout ran out.";

int cmd_delete(int argc, char **argv)
{
	struct tpu_options to = { 0 };
	struct tpu_client *c = NULL;
	struct strlist pos;
	struct err e;
	bool force = false;
	int rc, status;
	struct opt opts[2 + TPU_OPTIONS_COUNT] = {
		{ .name = "force", .kind = OPT_FLAG, .value = &force,
		  .help = "delete the queued resource's nodes too" },
	};

	strlist_init(&pos);
	err_init(&e);
	tpu_options_table(&to, &opts[1], TPU_WITH_WAIT | TPU_WITH_TIMEOUT);
	status = tpu_command_start(opts, argc, argv, usage, &pos, 1, &to, &c);
	if (status >= 0)
		goto out;
	status = 0;
	rc = tpu_qr_delete(c, pos.v[0], force, to.wait, to.timeout_ms,
			   tpu_print_progress, NULL, &e);
	if (rc) {
		status = tpu_exit_status(rc, &e);
		goto out;
	}
	printf("%s %s\n", pos.v[0], to.wait ? "deleted" : "is being deleted");
out:
	tpu_close(c);
	strlist_release(&pos);
	return status;
}
