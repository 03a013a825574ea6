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
	const struct worker_status *status; /* the heartbeats, for the
					       stragglers */
	size_t nstatus;
};

/* Appends the page to out. COMMON_ENOMEM when memory ran out. */
int report_render(const struct report_input *in, struct buf *out);

/* Appends s with HTML's special characters escaped. */
int report_esc(struct buf *b, const char *s);

/* ---- report_workers.c: what the workers' own records say ---- */

/* The hang forensics the history names, as links to their objects, and
 * the stragglers among the workers running at the run's generation. */
int report_workers(const struct report_input *in, struct buf *b);

/* "850 ms", "12.3 s", "4 min 5 s", "3 h 20 min", "2 d 4 h". */
void report_duration(double s, char *out, size_t cap);

/* ---- report_goodput.c: where the time went ---- */

/* An SVG bar width wide of the time trained and each badput category,
 * and its key. Non-zero when memory ran out. */
int report_goodput_bar(const struct goodput *g, struct buf *b, int width);
/* *out (malloc'd, columns long): per pixel column of the span_s seconds
 * from t0_ms (wall clock, ms), the category that took most of its time
 * (GP_NCATS: trained; 0xff: none). -1 when memory ran out. */
int report_goodput_columns(const struct goodput *g, double t0_ms,
			   double span_s, int columns, unsigned char **out);
/* The columns as rects from x0, at y, h high. */
int report_goodput_strip(const unsigned char *cat, int columns, int x0,
			 int y, int h, struct buf *b);

#endif
