/*
 * cmd_wait.c: `slicectl wait NAME`: follow a queued resource until it
 * reaches a state, showing every state it passes through.
 */
#include "launcher/launcher.h"
#include "launcher/tpu_options.h"

#include <stdio.h>
#include <string.h>

static const char usage[] =
	"usage: slicectl wait NAME [--state S] [--timeout S] [--project P]\n"
	"                     [--zone Z] [--format text|json]\n"
	"\n"
	"Waits until the queued resource NAME is in state S (default ACTIVE),\n"
	"printing each state it passes through with the time elapsed.\n"
	"Waiting ends early when it FAILED (the API's error is shown), or was\n"
	"SUSPENDED while waiting for another state.\n"
	"\n"
	"Exit status: 0 reached; 1 the API failed; 2 bad arguments; 3 it\n"
	"ended FAILED or SUSPENDED; 4 no such queued resource; 124 --timeout\n"
	"ran out.";

static const char *const states[] = {
	"ACTIVE", "ACCEPTED", "WAITING_FOR_RESOURCES", "PROVISIONING",
	"SUSPENDED", "FAILED", NULL,
};

int cmd_wait(int argc, char **argv)
{
	struct tpu_options to = { 0 };
	struct tpu_client *c = NULL;
	struct tpu_qr q = { 0 };
	struct strlist pos;
	struct err e;
	int state = 0, rc, status;
	const struct opt own[] = {
		{ .name = "state", .kind = OPT_CHOICE, .value = &state,
		  .arg = "S", .choices = states,
		  .help = "ACTIVE (default), ACCEPTED, WAITING_FOR_RESOURCES, "
			  "PROVISIONING, SUSPENDED or FAILED" },
	};
	struct opt opts[OPT_COUNT(own) + TPU_OPTIONS_COUNT + 1] = { 0 };

	strlist_init(&pos);
	err_init(&e);
	memcpy(opts, own, sizeof(own));
	tpu_options_table(&to, opt_end(opts), TPU_WITH_FORMAT | TPU_WITH_TIMEOUT);
	status = tpu_command_start(opts, argc, argv, usage, &pos, 1, &to, &c);
	if (status >= 0)
		goto out;
	status = 0;
	rc = tpu_qr_wait(c, pos.v[0], states[state], to.timeout_ms,
			 tpu_print_progress, NULL, &q, &e);
	if (rc) {
		status = tpu_exit_status(rc, &e);
		goto out;
	}
	if (to.format == 1)
		printf("%s\n", q.json);
	else
		printf("%s is %s\n", pos.v[0], q.state);
out:
	tpu_qr_release(&q);
	tpu_close(c);
	strlist_release(&pos);
	return status;
}
