/*
 * cmd_stop.c: `slicectl stop RUN`: asks every supervisor of the run to
 * stop its trainer gracefully, by setting control.json's state to
 * "stopping" (compare-and-swap).
 */
#include "launcher/launcher.h"
#include "launcher/run_options.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static const char usage[] =
	"usage: slicectl stop RUN [--reason TEXT] [--bucket URL] "
	"[--format text|json]\n"
	"\n"
	"Stops the run: sets control.json's state to \"stopping\". Every\n"
	"supervisor then sends its trainer SIGTERM, waits up to the job's\n"
	"grace_s for a final checkpoint step, uploads it, and leaves. Nothing\n"
	"restarts the run afterwards. The stop is recorded as an operator's\n"
	"(control.json's cause, and its event in `slicectl events`) with who\n"
	"asked (USER@HOST) and why.\n"
	"\n"
	"Prints \"RUN: OLD -> stopping (REASON)\"; --format json prints\n"
	"{\"run\", \"url\", \"previous_state\", \"state\", \"generation\",\n"
	"\"reason\", \"updated_by\", \"time\"}. A run already stopping is left\n"
	"as it is (exit 0, saying so); a run that is done or failed has\n"
	"nothing to stop.\n"
	"\n" RUN_USAGE_BUCKET "\n"
	"Exit status: 0 stopping; 1 the store failed, or the run is done or\n"
	"failed; 2 bad arguments; 4 no run RUN under BUCKET (no job.json).";

static void print_result(const struct run_options *ro, const char *previous,
			 const struct control *c)
{
	json_t *o;

	if (ro->format != 1) {
		if (!strcmp(previous, c->state))
			printf("%s: already %s (generation %" PRId64 ", by %s: "
			       "%s)\n", ro->run, c->state, c->generation,
			       c->updated_by, c->reason);
		else
			printf("%s: %s -> %s (%s)\n", ro->run, previous,
			       c->state, c->reason);
		return;
	}
	o = run_control_json(ro, c);
	json_object_set_new(o, "previous_state", run_json_text(previous));
	run_print_json(o);
}

static int over(const struct run_options *ro, const struct control *c)
{
	log_error("%s is already %s (generation %" PRId64 ", by %s: %s); "
		  "nothing to stop", ro->run, c->state, c->generation,
		  *c->updated_by ? c->updated_by : "-",
		  *c->reason ? c->reason : "-");
	return 1;
}

int cmd_stop(int argc, char **argv)
{
	struct run_options ro = { 0 };
	char reason[256];
	struct control seen, out;
	struct gen_cause cause;
	struct err e;
	int rc, status;

	status = run_change_start(argc, argv, usage, "stopped by hand", &ro,
				  reason, sizeof(reason));
	if (status >= 0)
		goto done;
	rc = control_load(ro.store, &seen, &e);
	if (rc) {
		status = run_exit_status(rc, &e);
		goto done;
	}
	if (!strcmp(seen.state, "stopping")) {
		print_result(&ro, seen.state, &seen);
		status = 0;
		goto done;
	}
	if (strcmp(seen.state, "running")) {
		status = over(&ro, &seen);
		goto done;
	}
	run_operator_cause(&cause, "stop", reason);
	rc = control_set_state_cause(ro.store, NULL, "stopping", reason,
				     "slicectl", &cause, &out, &e);
	if (rc) {
		status = run_exit_status(rc, &e);
		goto done;
	}
	/* A supervisor that ended the run while we asked has the last
	 * word (control_set_state keeps it). */
	if (!strcmp(out.state, "done") || !strcmp(out.state, "failed")) {
		status = over(&ro, &out);
		goto done;
	}
	print_result(&ro, seen.state, &out);
	status = 0;
done:
	run_options_release(&ro);
	return status;
}
