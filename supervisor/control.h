/*
 * control.h (private to supervisor/): the run's control.json and the
 * workers' status objects, the only state the workers of a run share.
 *
 * control.json is {"generation": G, "state": S, "reason": R,
 * "updated_by": W, "restore_step": N or null, "time": T} and changes only
 * by compare-and-swap on its object generation, so two workers bumping
 * the generation for the same failure produce one bump, and every worker
 * of generation G restores the same step (the first to ask fixes it).
 * States: "running", "stopping" (slicectl stop), "done", "failed".
 */
#ifndef SLICECTL_SUPERVISOR_CONTROL_H
#define SLICECTL_SUPERVISOR_CONTROL_H

#include "cloud/cloud.h"
#include "supervisor/supervisor.h"

struct control {
	int64_t generation;      /* group restart counter, from 1 */
	char state[16];
	char reason[256];
	char updated_by[64];     /* "slice-S-worker-W" or "slicectl" */
	int64_t restore_step;    /* -1: not chosen yet for this generation;
				    0: start fresh (nothing committed) */
	char time[40];           /* RFC 3339, of the last change */
	int64_t object_generation; /* the store's, for compare-and-swap */
};

/* Reads control.json; when there is none, creates it (create-only) as
 * generation 1, "running". */
int control_load(struct store *s, struct control *out, struct err *e);

/*
 * Moves the run to generation seen->generation + 1 with reason, unless
 * another writer got there first (then *out is what it wrote). When the
 * bump would exceed max_restarts (generation > max_restarts + 1) the run
 * is set "failed" instead. restore_step: -1 lets the next generation
 * choose, or the step it must restore (after a corrupt part). A run that
 * is done, failed or stopping is left as it is.
 */
int control_bump(struct store *s, const struct control *seen,
		 unsigned max_restarts, const char *reason, const char *by,
		 int64_t restore_step, struct control *out, struct err *e);

/* Sets state (and reason) by compare-and-swap, retrying on races while
 * the state it would replace is "running". */
int control_set_state(struct store *s, const char *state, const char *reason,
		      const char *by, struct control *out, struct err *e);

/*
 * The step generation `generation` restores: restore_step when already
 * chosen; else the newest committed, uncorrupt step (0 when none), written
 * into control.json by compare-and-swap so every worker gets the same
 * answer. CLOUD_EPRECONDITION when control.json has moved to another
 * generation meanwhile.
 */
int control_restore_step(struct store *s, int64_t generation, int64_t *step,
			 struct err *e);

/* status/slice-S-worker-W.json: a worker's heartbeat. */
struct worker_status {
	unsigned slice, worker;
	char state[24];          /* "starting", "restoring", "running",
				    "stopping", "finished", "failed",
				    "preempted", "exited" */
	int64_t generation;
	int64_t step;            /* newest step the trainer wrote; -1 none */
	int64_t committed_step;  /* newest step this worker saw committed */
	uint64_t restarts;       /* trainer starts by this supervisor */
	char message[256];
	char time[40];           /* RFC 3339, set by status_put */
	char boot_id[40];
};

int status_put(struct store *s, struct worker_status *st, struct err *e);
/* Every worker's status, in name order (*out malloc'd). */
int status_list(struct store *s, struct worker_status **out, size_t *n,
		struct err *e);

/* Whether all n_workers workers report "finished" at generation. */
bool status_all_finished(const struct worker_status *v, size_t n,
			 unsigned n_workers, int64_t generation);

#endif
