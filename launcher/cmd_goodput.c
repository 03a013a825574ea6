/*
 * cmd_goodput.c: `slicectl goodput RUN`: how much of the run's time
 * trained the model, and where the rest went (goodput.h), from its
 * bucket's history.
 */
#include "launcher/goodput.h"
#include "launcher/launcher.h"
#include "launcher/run_options.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char usage[] =
	"usage: slicectl goodput RUN [--window D] [--format text|json]\n"
	"                        [--bucket URL]\n"
	"\n"
	"The share of the run's time that trained the model: productive time\n"
	"(the final step x the ideal step time, the mean of the step times at\n"
	"or below median + 3 x MAD) over the time from the run's creation to\n"
	"its end (now, for a live run). The rest, by category, adds up with\n"
	"it to the elapsed time: waiting_for_capacity, boot_and_start,\n"
	"restore, steps_computed_again, checkpoint_stalls, failure_detection,\n"
	"hang_timeout, maintenance_and_window_ends, other (the last step to a\n"
	"failure or the end, the final upload, time no whole step covers).\n"
	"Then each failure, by generation and cause, with what it cost.\n"
	"\n"
	"Step times are timed to the step when the trainer writes\n"
	"SLICE_STEP_FILE after each step; without it, from the checkpoints\n"
	"(within one checkpoint interval). \"precision\" says which.\n"
	"\n"
	"--window D counts only the last D (90s, 30m, 1h, 2d) of the run,\n"
	"and lists the failures within it.\n"
	"--format json prints {\"goodput\", \"elapsed_s\", \"productive_s\",\n"
	"\"ideal_step_s\", \"final_step\", \"step_samples\", \"precision\",\n"
	"\"badput\": {CATEGORY: seconds}, \"failures\": [{\"generation\",\n"
	"\"cause\", \"reason\", \"at\", \"detection_s\", \"hang_s\", \"restart_s\",\n"
	"\"restore_s\", \"recompute_s\", \"recomputed_steps\", \"total_s\"}]}.\n"
	"\n" RUN_USAGE_BUCKET "\n"
	"Exit status: 0 shown; 1 the store failed or the run's history holds\n"
	"nothing to measure; 2 bad arguments; 4 no run RUN under BUCKET (no\n"
	"job.json).";

int cmd_goodput(int argc, char **argv)
{
	struct run_options ro = { 0 };
	unsigned window_ms = 0;
	const struct opt own[] = {
		{ .name = "window", .kind = OPT_SECONDS, .value = &window_ms,
		  .arg = "D", .help = "only the last D of the run (e.g. 1h)" },
	};
	struct opt opts[OPT_COUNT(own) + RUN_OPTIONS_COUNT + 1] = { 0 };
	struct goodput g = { 0 };
	struct err e;
	int status, rc;

	memcpy(opts, own, sizeof(own));
	run_options_table(&ro, opt_end(opts));
	status = run_command_start(opts, argc, argv, usage, &ro);
	if (status >= 0)
		goto done;
	rc = goodput_of_run(ro.store, &ro.job, window_ms, &g, &e);
	if (rc) {
		status = rc == COMMON_EINVAL || rc == COMMON_ENOMEM
				 ? (log_error("%s: %s", ro.run, e.msg), 1)
				 : run_exit_status(rc, &e);
		goto done;
	}
	status = 0;
	if (ro.format == 1)
		run_print_json(goodput_json(&g));
	else
		goodput_print_text(&g);
done:
	goodput_release(&g);
	run_options_release(&ro);
	return status;
}
