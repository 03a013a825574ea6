/*
 * cmd_status.c: `slicectl status RUN`: a run's state from its bucket
 * alone: control.json, the newest committed checkpoint, and one row per
 * worker from its heartbeat, with the workers that look stuck flagged.
 */
#include "launcher/run_view.h"

#include <string.h>
#include <time.h>

static const char usage[] =
	"usage: slicectl status RUN [--bucket URL] [--format text|json]\n"
	"\n"
	"Shows the run's state from control.json (state, generation, reason,\n"
	"who changed it last and when), the newest committed checkpoint step,\n"
	"and one row per worker of job.json's num_slices x workers_per_slice\n"
	"from its heartbeat (status/slice-S-worker-W.json): state, generation,\n"
	"step (the one its trainer last reported in SLICE_STEP_FILE, else\n"
	"its newest checkpoint), committed step, restarts, heartbeat age,\n"
	"message. A worker that has sent no heartbeat yet shows as \"-\".\n"
	"It also shows control.json's deadline (a flex-start window's end or a\n"
	"node's maintenance window, which the supervisors checkpoint ahead of)\n"
	"and, while slicectl job --watch looks after the run, the queued\n"
	"resource as it last saw it: its state (between two windows, the next\n"
	"one's place in the queue), its window's end, the recreations so far.\n"
	"\n"
	"While the run is running, a worker is flagged as stuck when\n"
	"  stale    its heartbeat is older than 3 x heartbeat_s + 10 s (the\n"
	"           window; a worker that finished, or waits for the next\n"
	"           flex-start window, is never stale);\n"
	"  silent   it has sent no heartbeat at all, and control.json last\n"
	"           changed more than the window ago;\n"
	"  behind   its generation is older than control.json's, which changed\n"
	"           more than the window ago (time enough to follow);\n"
	"  lagging  the newest checkpoint step that is not committed yet has\n"
	"           had no new part for more than the window, has no part from\n"
	"           this worker, and this worker's trainer has not reached\n"
	"           that step: the others moved on, it did not.\n"
	"\n"
	"A worker running at the run's generation, and not stale, is flagged\n"
	"as a straggler when its recent step time (its heartbeat's\n"
	"\"recent_steps\": the median of the steps its trainer reported in\n"
	"SLICE_STEP_FILE over the last 30 s, and at least its last 8) is\n"
	"above the median + 3 x MAD of its peers' (the MAD at least 5% of\n"
	"that median, and 1 ms), sustained: at least 8 steps covering at\n"
	"least 10 s (or 256 steps). Its peers are the other such workers\n"
	"with 8 steps or more; with fewer than 2 of them nobody is judged. A\n"
	"trainer whose steps wait for each other (a collective per step)\n"
	"shows the slowest's time on every worker: it finds stragglers only\n"
	"among hosts whose steps do not wait for the others' in\n"
	"SLICE_STEP_FILE.\n"
	"\n"
	"The first line is the run's goodput so far (slicectl goodput).\n"
	"\n"
	"--format json prints {\"goodput\" (slicectl goodput's object, null\n"
	"before the run has a history), \"run\", \"url\", \"state\", \"generation\",\n"
	"\"reason\", \"updated_by\", \"time\", \"committed_step\", \"heartbeat_s\",\n"
	"\"deadline\": {\"kind\", \"time\", \"about\", \"checkpointed\"},\n"
	"\"queued_resource\": {\"name\", \"state\", \"capacity\", \"window_end\",\n"
	"\"recreated\", \"recreate_budget\", \"time\"},\n"
	"\"stuck\" (how many), \"workers\": [{\"slice\", \"worker\", \"state\",\n"
	"\"generation\", \"step\", \"committed_step\", \"restarts\",\n"
	"\"upload_bytes_per_s\" (its newest checkpoint upload: whether a step\n"
	"fits in a preemption notice), \"heartbeat_age_s\", \"time\",\n"
	"\"message\", \"boot_id\", \"stuck\",\n"
	"\"stuck_reasons\": [{\"rule\", \"text\"}], \"recent_steps\":\n"
	"{\"median_ms\", \"n\", \"span_s\"}, \"straggler\", \"straggler_reason\"\n"
	"(why flagged, or a near miss: not yet sustained, not judged)}],\n"
	"\"stragglers\" (how many)}; what is not known (no\n"
	"control.json or heartbeat yet, no step) is null.\n"
	"\n"
	"A run on GKE (slicectl job --target gke) also shows its JobSet:\n"
	"Kueue's state (pending, with the workloads ahead of it in its\n"
	"LocalQueue when Kueue's visibility API tells: \"position\"; quota\n"
	"reserved, admitted, evicted, finished), JobSet's restarts, and\n"
	"each pod's slice, worker, restart attempt, phase and node; in JSON\n"
	"as \"target\": {\"kind\", \"object\", \"kueue\", \"message\",\n"
	"\"position\", \"restarts\", \"end\", \"pods\": [{\"name\", \"slice\",\n"
	"\"worker\", \"restart_attempt\", \"phase\", \"node\"}]}.\n"
	"A run on Slurm (--target slurm) shows its batch job the same way:\n"
	"Slurm's JobState and reason, its restart count, and one row per node\n"
	"with its slice, worker, requeue count and the job's state; in JSON\n"
	"\"job_state\" stands for \"kueue\", \"nodes\" for \"pods\", and each\n"
	"node has \"requeue\" and \"state\" for \"restart_attempt\" and\n"
	"\"phase\".\n"
	"\n" RUN_USAGE_BUCKET "\n"
	"Exit status: 0 shown (stuck workers or not); 1 the store failed; 2 bad\n"
	"arguments; 4 no run RUN under BUCKET (no job.json).";

int cmd_status(int argc, char **argv)
{
	struct run_options ro = { 0 };
	struct opt opts[RUN_OPTIONS_COUNT + 1] = { 0 };
	const struct target_ops *target;
	struct worker_status *sv = NULL;
	struct ckpt_list cl = { 0 };
	struct view v;
	size_t n = 0;
	time_t now;
	struct err e;
	int rc, status;

	memset(&v, 0, sizeof(v));
	run_options_table(&ro, opts);
	status = run_command_start(opts, argc, argv, usage, &ro);
	if (status >= 0)
		goto out;
	status = 0;
	target = target_of(&ro.job);
	v.ro = &ro;
	v.window_s = 3LL * status_period_ms(ro.job.heartbeat_s,
					     ro.job.num_slices *
						     ro.job.workers_per_slice) /
			     1000 +
		     10;
	now = time(NULL);
	rc = run_control_peek(&ro, &v.control, &v.have_control, &e);
	v.control_age_s = v.have_control ? run_view_age(v.control.time, now) : -1;
	if (!rc)
		rc = run_view_checkpoints(&v, &cl, now, &e);
	if (!rc)
		rc = status_list(ro.store, &sv, &n, &e);
	if (!rc)
		run_view_watch(&v);
	/* A history with nothing to measure yet leaves the rest to show. */
	if (!rc)
		v.have_goodput = !goodput_of_run(ro.store, &ro.job, 0,
						 &v.goodput, &e);
	if (rc) {
		status = run_exit_status(rc, &e);
		goto out;
	}
	if (run_view_rows(&v, sv, n, now)) {
		log_error("out of memory");
		status = 1;
		goto out;
	}
	if (target->status) {
		/* The bucket's view stands on its own; the cluster's is
		 * added when it answers. */
		v.tv.position = v.tv.restarts = -1;
		v.have_target = !target->status(&ro.job, &v.tv, &e);
		if (!v.have_target)
			log_warn("%s: %s", v.tv.what, e.msg);
	}
	if (ro.format == 1) {
		status_print_json(&v);
	} else {
		status_print_text(&v);
		if (v.have_target)
			status_print_target(&v);
	}
out:
	goodput_release(&v.goodput);
	target_view_release(&v.tv);
	free(v.rows);
	free(sv);
	ckpt_list_release(&cl);
	run_options_release(&ro);
	return status;
}
