/*
 * target.h (private to launcher/): where a run's workers live, as its
 * job.json says, and what the operator commands ask of that place beyond
 * the bucket: its own view of the run (for a GKE run: Kueue's state and
 * each pod's phase and node) and deleting what `slicectl job` created
 * there. Cloud TPU runs keep their queued-resource commands (run_qr.h);
 * the local provider's workers are local processes.
 */
#ifndef SLICECTL_LAUNCHER_TARGET_H
#define SLICECTL_LAUNCHER_TARGET_H

#include "supervisor/supervisor.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

enum target_kind { TARGET_TPU_VM, TARGET_LOCAL, TARGET_GKE, TARGET_SLURM };

enum target_kind target_of(const struct job *j);
const char *target_name(enum target_kind k); /* "tpu-vm", "local", "gke",
						"slurm" */
/* Whether the target has a view of its own (GKE, Slurm): what
 * target_describe, target_delete and target_reset serve. */
bool target_has_view(const struct job *j);
/* What `slicectl job` created there, for messages: "JobSet NS/NAME",
 * "Slurm job ID". */
void target_what(const struct job *j, char *out, size_t len);
/* Adds t's ids to a JSON answer: "jobset" and "namespace" (GKE) or
 * "job_id" and "partition" (Slurm). */
void target_json_ids(json_t *o, const struct job_target *t);

/* One worker as the target sees it (a pod, a Slurm node). */
struct target_worker {
	int slice, worker;            /* -1: not labelled */
	long restart_attempt;         /* -1: not labelled */
	char name[254], phase[32], node[254];
};

struct target_view {
	char what[300];       /* "JobSet NS/NAME", "Slurm job ID ..." */
	char state[64];       /* "admitted", "pending", ...; Slurm's
				 JobState */
	char message[256];    /* the condition's message, or "" */
	long position;        /* workloads ahead of it in its LocalQueue
				 (Kueue's positionInLocalQueue); -1 unknown */
	long restarts;        /* the JobSet's status.restarts, the Slurm
				 job's restart count; -1 unknown */
	char end[32];         /* "Completed", "Failed" or "" */
	struct target_worker *workers;
	size_t n;
	bool missing;         /* the JobSet is gone */
};

/* Fills *out for a run on a target that has a view (GKE). */
int target_describe(const struct job *j, struct target_view *out,
		    struct err *e);
void target_view_release(struct target_view *v);

/* Deletes what `slicectl job` created on the target (the JobSet; Kueue's
 * Workload and the pods go with it). *absent true when it was not there.
 * With wait, returns once it is gone (or timeout_ms passed: COMMON_EIO). */
int target_delete(const struct job *j, bool wait, unsigned timeout_ms,
		  bool *absent, struct err *e);

/* Every worker killed and started again, the way out for a stuck run
 * (a queued resource's reset): on GKE every pod of the JobSet is deleted
 * (SIGTERM and its grace), and JobSet recreates them all with a new
 * restart attempt; the supervisors rejoin from the newest committed step.
 * With wait, returns once every pod of the new attempt runs (timeout_ms:
 * COMMON_EIO). *attempt gets that restart attempt (-1 without wait). */
int target_reset(const struct job *j, bool wait, unsigned timeout_ms,
		 long *attempt, struct err *e);

#endif
