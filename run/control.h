/*
 * control.h (private to supervisor/): what only the supervisors do to the
 * run's shared state: fix the step a generation restores, and write their
 * own heartbeats. struct control, struct worker_status and what slicectl
 * also uses (control_load, control_bump, control_set_state, status_list,
 * status_all_finished) are public, in supervisor/supervisor.h.
 */
#ifndef SLICECTL_SUPERVISOR_CONTROL_H
#define SLICECTL_SUPERVISOR_CONTROL_H

#include "cloud/cloud.h"
#include "supervisor/supervisor.h"

/*
 * The step generation `generation` restores: restore_step when already
 * chosen; else the newest committed, uncorrupt step (0 when none), written
 * into control.json by compare-and-swap so every worker gets the same
 * answer. CLOUD_EPRECONDITION when control.json has moved to another
 * generation meanwhile.
 */
int control_restore_step(struct store *s, int64_t generation, int64_t *step,
			 struct err *e);

/*
 * The pods of JobSet restart attempt `attempt` join the run: the first of
 * them moves control.json to the next generation (reason "jobset restart
 * N", restoring the newest committed step) and records the attempt in
 * "jobset_restart", so every other pod of it, and any later bump racing
 * it, makes no second one. The restart counts against max_restarts like
 * any other: a spent budget sets the run "failed". A run that is not
 * running is left as it is; *out is control.json as it now stands.
 */
int control_join_restart(struct store *s, int64_t attempt,
			 unsigned max_restarts, const char *by,
			 struct control *out, struct err *e);

/*
 * Publishes d as control.json's deadline (kind "" removes it), unless the
 * run is not running or d is there already. The same kind and time keep
 * their "checkpointed" mark.
 */
int control_set_deadline(struct store *s, const struct control_deadline *d,
			 struct control *out, struct err *e);

/*
 * control_bump (restoring the newest committed step) after the group's
 * checkpoint for seen->deadline: the next generation also marks that
 * deadline "checkpointed", so it is not taken again.
 */
int control_bump_deadline(struct store *s, const struct control *seen,
			  unsigned max_restarts, const char *reason,
			  const char *by, struct control *out, struct err *e);

/* Writes st (its time set to now) as status/slice-S-worker-W.json. */
int status_put(struct store *s, struct worker_status *st, struct err *e);

#endif
