/*
 * cmd_reset.c: `slicectl reset NAME`: restart every worker of a queued
 * resource, the way out for a slice that is stuck.
 */
#include "launcher/launcher.h"
#include "launcher/tpu_options.h"

#include <stdio.h>

static const char usage[] =
	"usage: slicectl reset NAME [--wait] [--timeout S] [--project P] "
	"[--zone Z]\n"
	"\n"
	"Resets the queued resource NAME: every worker of every slice\n"
	"restarts, and runs its startup script again. --wait returns once\n"
	"every node is READY again.\n"
	"\n"
	"Exit status: 0 reset (or resetting, without --wait); 1 the API\n"
	"refused or failed; 2 bad arguments; 4 no such queued resource; 124\n"
	"--timeout ran out.";

int cmd_reset(int argc, char **argv)
{
	struct tpu_options to = { 0 };
	struct tpu_client *c = NULL;
	struct strlist pos;
	struct err e;
	int rc, status;
	struct opt opts[1 + TPU_OPTIONS_COUNT] = { 0 };

	strlist_init(&pos);
	err_init(&e);
	tpu_options_table(&to, opts, TPU_WITH_WAIT | TPU_WITH_TIMEOUT);
	status = tpu_command_start(opts, argc, argv, usage, &pos, 1, &to, &c);
	if (status >= 0)
		goto out;
	status = 0;
	fprintf(stderr, "slicectl: resetting %s\n", pos.v[0]);
	rc = tpu_qr_reset(c, pos.v[0], to.wait, to.timeout_ms, &e);
	if (rc) {
		status = tpu_exit_status(rc, &e);
		goto out;
	}
	printf("%s %s\n", pos.v[0], to.wait ? "reset: every node is READY"
					 : "is being reset");
out:
	tpu_close(c);
	strlist_release(&pos);
	return status;
}
