/*
 * supervise.h (private to supervisor/): one worker's supervision, from
 * start to the end of the run or of this machine.
 */
#ifndef SLICECTL_SUPERVISOR_SUPERVISE_H
#define SLICECTL_SUPERVISOR_SUPERVISE_H

#include "common/common.h"

struct supervise_options {
	const char *run_url;
	const char *state_dir;    /* state file, checkpoints, spool, logs */
	int slice, worker;        /* -1: from the metadata server */
	/* A scheduler owns the group (a JobSet's pod, a Slurm job step):
	 * identity from its environment, a new restart attempt joins as
	 * the next generation, SIGTERM is the notice, the exit status
	 * tells the scheduler whether to restart. */
	bool managed;
	bool slurm;               /* with managed: a Slurm job step
				     (identity_from_slurm), */
	bool vertex;              /* a Vertex AI replica
				     (identity_from_vertex), else a pod
				     (identity_from_pod) */
	bool no_metadata;         /* no preemption watch (not on a VM) */
	unsigned control_poll_ms; /* how often control.json is read */
};

/* Pod mode's exit statuses besides 0 and 1: the run failed for good (the
 * JobSet's podFailurePolicy fails it on this one), and this worker left
 * after SIGTERM (the pod is Failed, so JobSet restarts the set). */
#define SUPERVISE_EXIT_FAILED 3
#define SUPERVISE_EXIT_NOTICE 143
/* This host's preflight failed (the generation did not start here), or
 * it was quarantined (in a pod allowed to cordon its node, or a Slurm
 * step). The JobSet restarts the set (not a run failure); Slurm's batch
 * script requeues the job without this node. */
#define SUPERVISE_EXIT_PREFLIGHT 4

/* Returns the process exit status: 1 when it could not start (its message
 * logged). Otherwise 0, except in a pod: 0 when the run is done or
 * stopped, SUPERVISE_EXIT_FAILED when it failed, SUPERVISE_EXIT_PREFLIGHT
 * when its preflight failed or its host was quarantined, SUPERVISE_EXIT_NOTICE
 * after SIGTERM. */
int supervise(const struct supervise_options *o);

#endif
