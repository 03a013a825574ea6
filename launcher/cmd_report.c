/*
 * cmd_report.c: `slicectl report RUN`: the run as one self-contained
 * HTML page (report.h), from what its bucket holds, whatever the target.
 */
#include "launcher/launcher.h"
#include "launcher/report.h"
#include "launcher/run_options.h"

#include "checkpoint/checkpoint.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char usage[] =
	"usage: slicectl report RUN [--output FILE.html] [--bucket URL]\n"
	"\n"
	"Draws what happened to the run as one HTML file that needs nothing\n"
	"else (inline SVG and CSS, no script, no fetched font): its goodput\n"
	"on top (slicectl goodput's first line), a time axis\n"
	"with one lane per worker (running, restoring, stopped, lost; above\n"
	"64 workers, a slice's workers that agree share a lane), every\n"
	"generation with its cause, the committed checkpoints, the step rate\n"
	"with the steps computed again after each failure shaded, and a table\n"
	"of failures (detection, upload, restore and restart times), links to\n"
	"each hang's forensics (the stacks and output its supervisor took\n"
	"before ending the trainer: forensics/gen-G/slice-S-worker-W.txt),\n"
	"and the stragglers among the running workers (slicectl status --help\n"
	"says the rule). It reads only the bucket (job.json, control.json,\n"
	"events/, checkpoints/, status/), so it works for runs of every\n"
	"target, finished or not.\n"
	"\n"
	"Writes FILE (default RUN-report.html) and prints its path.\n"
	"\n" RUN_USAGE_BUCKET "\n"
	"Exit status: 0 written; 1 the store or the file failed; 2 bad\n"
	"arguments; 4 no run RUN under BUCKET (no job.json).";

static int commits(struct store *s, struct report_commit **out, size_t *n,
		   struct err *e)
{
	struct ckpt_list l;
	int r = ckpt_list(s, &l, e);

	*out = NULL;
	*n = 0;
	if (r)
		return r;
	*out = malloc((l.n ? l.n : 1) * sizeof(**out));
	if (!*out) {
		ckpt_list_release(&l);
		return err_set(e, COMMON_ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < l.n; i++) {
		if (!l.v[i].committed || l.v[i].corrupt)
			continue;
		(*out)[*n].step = (int64_t)l.v[i].step;
		snprintf((*out)[*n].time, sizeof((*out)[*n].time), "%s",
			 l.v[i].time);
		++*n;
	}
	ckpt_list_release(&l);
	return 0;
}

/* A page half written (a full disk, ^C) never replaces a good one. */
static int write_file(const char *path, const struct buf *b)
{
	struct err e;

	err_init(&e);
	if (!fs_write_atomic(path, b->data, b->len, 0666, true, &e))
		return 0;
	log_error("%s", e.msg);
	return 1;
}

int cmd_report(int argc, char **argv)
{
	struct run_options ro = { 0 };
	const char *output = NULL;
	const struct opt own[] = {
		{ .name = "output", .short_name = 'o', .kind = OPT_STRING,
		  .value = &output, .arg = "FILE",
		  .help = "where to write the page (default RUN-report.html)" },
	};
	struct opt opts[OPT_COUNT(own) + RUN_OPTIONS_COUNT + 1] = { 0 };
	struct report_input in = { 0 };
	struct report_commit *cv = NULL;
	struct worker_status *sv = NULL;
	struct goodput g = { 0 };
	struct event *ev = NULL;
	struct control c;
	char path[4096];
	bool found;
	struct buf b;
	struct err e;
	int status, rc;

	buf_init(&b);
	memcpy(opts, own, sizeof(own));
	run_options_table(&ro, opt_end(opts));
	status = run_command_start(opts, argc, argv, usage, &ro);
	if (status >= 0)
		goto done;
	rc = run_control_peek(&ro, &c, &found, &e);
	if (!rc)
		rc = events_list(ro.store, &ev, &in.nev, &e);
	if (!rc)
		rc = commits(ro.store, &cv, &in.ncommits, &e);
	if (!rc)
		rc = status_list(ro.store, &sv, &in.nstatus, &e);
	if (rc) {
		status = run_exit_status(rc, &e);
		goto done;
	}
	in.run = ro.run;
	in.url = ro.url;
	in.job = &ro.job;
	in.control = &c;
	in.ev = ev;
	in.commits = cv;
	in.status = sv;
	/* The page stands without it: a history with nothing to measure. */
	in.goodput = goodput_of_run(ro.store, &ro.job, 0, &g, &e) ? NULL : &g;
	if (report_render(&in, &b)) {
		log_error("out of memory");
		status = 1;
		goto done;
	}
	snprintf(path, sizeof(path), "%s", output ? output : "");
	if (!output)
		snprintf(path, sizeof(path), "%s-report.html", ro.run);
	status = write_file(path, &b);
	if (!status)
		printf("%s\n", path);
done:
	goodput_release(&g);
	buf_release(&b);
	free(ev);
	free(cv);
	free(sv);
	run_options_release(&ro);
	return status;
}
