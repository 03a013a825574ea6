/*
 * report.h (private to launcher/): `slicectl report`'s picture of a run,
 * drawn from what its bucket holds (job.json, events/, the committed
 * steps, control.json) as one self-contained HTML page: inline SVG and
 * CSS, no script, nothing fetched.
 */
#ifndef SLICECTL_LAUNCHER_REPORT_H
#define SLICECTL_LAUNCHER_REPORT_H

#include "common/common.h"
#include "launcher/goodput.h"
#include "run/run.h"

struct report_commit {
	int64_t step;
	char time[40];
};

struct report_input {
	const char *run;             /* its name */
	const char *url;             /* BUCKET/RUN */
	const struct job *job;
	const struct control *control; /* generation 0: none yet */
	const struct event *ev;      /* in time order */
	size_t nev;
	const struct report_commit *commits; /* ascending by step */
	size_t ncommits;
	const struct goodput *goodput; /* the headline; NULL none */
};

/* Appends the page to out. COMMON_ENOMEM when memory ran out. */
int report_render(const struct report_input *in, struct buf *out);

#endif
