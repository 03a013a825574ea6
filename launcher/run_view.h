/*
 * run_view.h (private to launcher/): a run's state as `slicectl status`
 * sees it from the bucket alone: control.json, the newest committed
 * checkpoint and the one being saved, one row per worker from its
 * heartbeat, which workers look stuck by which rule and which are
 * stragglers (the rules are in `slicectl status --help`). status_render.c prints it.
 */
#ifndef SLICECTL_LAUNCHER_RUN_VIEW_H
#define SLICECTL_LAUNCHER_RUN_VIEW_H

#include "checkpoint/checkpoint.h"
#include "launcher/goodput.h"
#include "launcher/launcher.h"
#include "launcher/run_options.h"
#include "launcher/watch_state.h"
#include "launcher/target/target.h"

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

enum { RULE_STALE, RULE_SILENT, RULE_BEHIND, RULE_LAGGING, N_RULES };

extern const char *const run_view_rules[N_RULES];

/* One row of the table. */
struct row {
	unsigned slice, worker;
	const struct worker_status *st; /* NULL: no heartbeat yet */
	long long age_s;                /* -1: unknown */
	bool flagged[N_RULES];
	char why[N_RULES][200];
	bool stuck;
	struct straggler_verdict straggler; /* run/run.h's rule */
};

/* The newest step not committed yet, newer than every committed one, and
 * how long since its newest part arrived. */
struct pending_step {
	const struct ckpt_step *st;     /* NULL: none */
	long long quiet_s;              /* -1: unknown */
};

struct view {
	struct run_options *ro;
	/* The target's own view (GKE: Kueue and the pods; Slurm: the batch
	 * job and its nodes). */
	bool have_target;
	struct target_view tv;
	struct control control;
	bool have_control;
	long long control_age_s;        /* -1: unknown */
	int64_t committed_step;         /* -1: none */
	/* The newest step committed on the fast tiers alone (--persist-
	 * every), newer than committed_step; -1: none. */
	int64_t fast_step;
	struct pending_step pending;
	struct row *rows;
	size_t nrows;
	unsigned stuck;
	unsigned stragglers;
	long long window_s;
	struct watch_state watch;       /* slicectl job --watch's view */
	bool have_watch;
	struct goodput goodput;         /* the run's so far, on top */
	bool have_goodput;
};

/* Seconds from RFC 3339 time t to now; -1 when t is not one. */
long long run_view_age(const char *t, time_t now);
/* Lists the checkpoints into l (which the view then points into): the
 * newest committed step and the step being saved after it. */
int run_view_checkpoints(struct view *v, struct ckpt_list *l, time_t now,
		     struct err *e);
/* One row per worker of the job's shape from heartbeats sv[n] (which the
 * rows point into), each judged; -1 out of memory. */
int run_view_rows(struct view *v, const struct worker_status *sv, size_t n,
	       time_t now);
/* What slicectl job --watch last saw, when it wrote anything. */
void run_view_watch(struct view *v);

/* status_render.c: the view as text (and the target's own view), or as
 * one JSON object. */
void status_print_text(const struct view *v);
void status_print_target(const struct view *v);
void status_print_json(const struct view *v);

#endif
