/*
 * goodput.h (private to launcher/): how much of a run's time trained the
 * model, and where the rest went, computed from its history alone
 * (docs/DESIGN.md "Goodput"). goodput.c is pure: events in memory in,
 * figures out; no store, no clock, so a test can feed it any history.
 *
 * Productive time is the final step count x the ideal step time, the mean
 * of the step times at or below median + 3 x MAD (as Google's
 * ml-goodput-measurement computes it). The step times come from worker
 * 0's progress events, which carry a histogram of the step times its
 * supervisor saw since the one before (supervisor/step_times.h).
 */
#ifndef SLICECTL_LAUNCHER_GOODPUT_H
#define SLICECTL_LAUNCHER_GOODPUT_H

#include "common/common.h"
#include "run/run.h"

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

/* Where the time that did not train went. The order is the JSON's. */
enum goodput_cat {
	GP_CAPACITY,    /* creation to the first boot; a preempted host
			   coming back */
	GP_BOOT,        /* boot, supervisor start, a restart's stop of the
			   old trainers, trainer start to its first step */
	GP_RESTORE,     /* a generation's restore of a committed step */
	GP_RECOMPUTE,   /* steps trained again after a restore */
	GP_CKPT_STALL,  /* steps slower than median + 3 x MAD: the trainer
			   blocked saving, most often */
	GP_DETECTION,   /* a failure to the generation's bump */
	GP_HANG,        /* the last step to the hang verdict */
	GP_MAINTENANCE, /* a deadline's (maintenance, window end) stop */
	GP_OTHER,       /* the rest: between the last step and a failure or
			   the end, the final upload, a running trainer's
			   time not covered by whole steps */
	GP_NCATS
};

extern const char *const goodput_cat_names[GP_NCATS];

/* What one generation's end cost (it and the restart after it). */
struct goodput_failure {
	int64_t generation;  /* the generation that ended */
	char cause[16];      /* crash, hang, preemption, maintenance,
				operator, other */
	char reason[256];    /* the bump's */
	int64_t at_ms;       /* the failure (the bump when not known) */
	double detection_s, hang_s, restart_s, restore_s, recompute_s;
	int64_t recomputed_steps;
};

/* A stretch of the run's time and what it went to, group-wide. */
struct goodput_span {
	int64_t from_ms, to_ms;    /* wall clock, ms since the epoch */
	int cat;                   /* enum goodput_cat; GP_NCATS: trained */
};

struct goodput {
	double elapsed_s, productive_s;
	double ideal_step_s;       /* 0: no step times known */
	double badput_s[GP_NCATS];
	int64_t final_step;        /* -1: none */
	uint64_t step_samples;     /* steps with a measured time */
	const char *precision;     /* how the step times were known */
	struct goodput_failure *failures; /* malloc'd */
	size_t nfailures;
	struct goodput_span *spans; /* malloc'd, generation by generation;
				       the whole run's, not the window's */
	size_t nspans;
};

struct goodput_input {
	const struct event *ev;    /* in time order */
	size_t nev;
	int64_t now_ms;            /* a live run's end */
	int64_t window_ms;         /* > 0: only the last window_ms, and the
				      failures in it */
	unsigned hang_timeout_s;   /* job.json's */
};

/* g filled (release it). COMMON_EINVAL when the history holds no event
 * with a time (nothing to measure), COMMON_ENOMEM. Malformed step
 * summaries are skipped: the step times are then fewer, not wrong. */
int goodput_compute(const struct goodput_input *in, struct goodput *g,
		    struct err *e);
void goodput_release(struct goodput *g);

/* productive / elapsed, 0 when nothing elapsed. */
double goodput_ratio(const struct goodput *g);
/* All that one failure cost. */
double goodput_failure_cost(const struct goodput_failure *f);

/* ---- goodput_steps.c: step times ---- */

/* The mean of h's step times at or below median + 3 x MAD, in ms; 0 when
 * h holds none. */
double goodput_ideal_ms(const struct step_hist *h);
/* What h's steps slower than all's median + 3 x MAD took beyond ideal,
 * in ms (h NULL: none). */
double goodput_slow_excess_ms(const struct step_hist *all,
			      const struct step_hist *h, double ideal);

/* ---- goodput_show.c: from a run's bucket, and shown ---- */

/* The goodput of the run at s (its history read now; a live run's ends
 * now) over its last window_ms (0: all of it). */
int goodput_of_run(struct store *s, const struct job *j, int64_t window_ms,
		   struct goodput *g, struct err *e);
/* {"goodput", "elapsed_s", "productive_s", "ideal_step_s", "final_step",
 * "step_samples", "precision", "badput": {CATEGORY: s}, "failures":
 * [{"generation", "cause", "reason", "at", "detection_s", "hang_s",
 * "restart_s", "restore_s", "recompute_s", "recomputed_steps",
 * "total_s"}]}; NULL when memory ran out. */
json_t *goodput_json(const struct goodput *g);
/* One line: the ratio, the time trained, the biggest loss. */
void goodput_headline(const struct goodput *g, char *out, size_t cap);
void goodput_print_text(const struct goodput *g);

#endif
