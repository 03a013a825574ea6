/*
 * cmd_restart.c: `slicectl restart RUN`: a group restart by hand, the
 * same compare-and-swap bump of control.json's generation a supervisor
 * makes after a failure (docs/DESIGN.md, "Group restarts").
 */
#include "launcher/launcher.h"
#include "launcher/run_options.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static const char usage[] =
	"usage: slicectl restart RUN [--reason TEXT] [--bucket URL] "
	"[--format text|json]\n"
	"\n"
	"Restarts every worker of the run together: bumps control.json's\n"
	"generation by compare-and-swap, as a supervisor does after a failure.\n"
	"Every supervisor then stops its trainer, restores the newest committed\n"
	"step and starts it again. Each call makes one new generation: when\n"
	"control.json changes between reading and writing (a supervisor's own\n"
	"bump), slicectl reads it again and bumps from there.\n"
	"\n"
	"A run that is not running (stopping, done, failed) is left alone. The\n"
	"restart is an operator's: it is recorded with who asked (USER@HOST)\n"
	"and why, and spends neither max_restarts nor max_infra_restarts.\n"
	"\n"
	"Prints \"RUN: generation OLD -> NEW (REASON)\"; --format json\n"
	"prints {\"run\", \"url\", \"old_generation\", \"generation\", \"state\",\n"
	"\"reason\", \"updated_by\", \"time\"}.\n"
	"\n" RUN_USAGE_BUCKET "\n"
	"Exit status: 0 restarted; 1 the store failed or the run is not\n"
	"running; 2 bad arguments;\n"
	"4 no run RUN under BUCKET (no job.json).";

/* Attempts when other writers keep changing control.json first. */
#define RESTART_TRIES 20

static void print_result(const struct run_options *ro, int64_t old,
			 const struct control *c)
{
	json_t *o;

	if (ro->format != 1) {
		printf("%s: generation %" PRId64 " -> %" PRId64 " (%s)\n",
		       ro->run, old, c->generation, c->reason);
		return;
	}
	o = run_control_json(ro, c);
	json_object_set_new(o, "old_generation", json_integer(old));
	run_print_json(o);
}

static int not_running(const struct run_options *ro, const struct control *c,
		       const char *when)
{
	log_error("%s is %s%s (generation %" PRId64 ", by %s: %s); not "
		  "restarting it", ro->run, when, c->state, c->generation,
		  *c->updated_by ? c->updated_by : "-",
		  *c->reason ? c->reason : "-");
	return 1;
}

int cmd_restart(int argc, char **argv)
{
	struct run_options ro = { 0 };
	char reason[256];
	struct control seen, out;
	struct gen_cause cause;
	struct err e;
	int rc = 0, status;

	status = run_change_start(argc, argv, usage, "restarted by hand", &ro,
				  reason, sizeof(reason));
	if (status >= 0)
		goto done;
	status = 1;
	run_operator_cause(&cause, "restart", reason);
	for (int t = 0; t < RESTART_TRIES; t++) {
		rc = control_load(ro.store, &seen, &e);
		if (!rc && strcmp(seen.state, "running")) {
			status = not_running(&ro, &seen, t ? "now " : "");
			goto done;
		}
		if (!rc)
			rc = control_bump_cause(ro.store, NULL, &seen, &ro.job,
						&cause, reason, "slicectl", -1,
						&out, &e);
		if (rc) {
			status = run_exit_status(rc, &e);
			goto done;
		}
		/* Ours: one generation on, by slicectl, for this reason.
		 * (Two calls at the same moment with the very same reason
		 * cannot be told apart, and make one generation; the
		 * default reason names the process.) */
		if (out.generation == seen.generation + 1 &&
		    !strcmp(out.updated_by, "slicectl") &&
		    !strcmp(out.reason, reason)) {
			print_result(&ro, seen.generation, &out);
			status = 0;
			goto done;
		}
		if (strcmp(out.state, "running")) {
			status = not_running(&ro, &out, "now ");
			goto done;
		}
		/* Another writer got there first: bump from what it wrote. */
		log_debug("control.json moved to generation %" PRId64
			  " (by %s) meanwhile; bumping again", out.generation,
			  out.updated_by);
	}
	log_error("%s: control.json changed under each of %d attempts to "
		  "bump it; try again", ro.run, RESTART_TRIES);
done:
	run_options_release(&ro);
	return status;
}
