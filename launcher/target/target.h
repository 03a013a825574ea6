/*
 * target.h (private to launcher/): where a run's workers live, in the
 * shape of curl's backends: each target (launcher/target/NAME/) exports
 * one const struct target_ops, target.c's one table lists them, and the
 * commands call through it without asking which target they have. A new
 * run's target comes from `slicectl job --target NAME` (--local is
 * --target local), an existing run's from its job.json (target_of).
 */
#ifndef SLICECTL_LAUNCHER_TARGET_H
#define SLICECTL_LAUNCHER_TARGET_H

#include "launcher/job.h"
#include "launcher/target/gke/gke.h"
#include "launcher/target/slurm/slurm.h"
#include "launcher/target/vertex/vertex.h"
#include "launcher/tpu_options.h"
#include "run/run.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* The targets, in the table's order (target.c). */
enum target_kind {
	TARGET_TPU_VM,
	TARGET_GKE,
	TARGET_SLURM,
	TARGET_LOCAL,
	TARGET_VERTEX,
	TARGET_LAST
};

/* `slicectl job`'s flags, as parsed: the shared ones, and each target's
 * own (which the other targets refuse, naming them). */
struct job_flags {
	struct job_request r;
	const struct target_ops *target; /* --target's; NULL: not given */
	bool local;                      /* --local, i.e. --target local */
	int format;                      /* 0 text, 1 json */
	/* Shared by two targets: --cluster and --render by gke and slurm,
	 * --max-run-duration by gke and a flex-start queued resource. */
	const char *cluster;
	bool render;
	unsigned max_run_ms;
	/* tpu-vm's own, besides the capacity flags of r */
	struct tpu_options to;
	const char *provisioning_model;
	bool watch;
	unsigned recreate_budget;
	unsigned lease_ms;               /* --lease (watch_lease.h) */
	/* local's own, besides r.workers_per_slice */
	const char *local_dir, *chaos, *seed;
	bool quiet;
	struct gke_options gke;
	struct slurm_options slurm;
	struct vertex_options vertex;
};

/* Room the targets' options slots need in all. */
#define JOB_FLAGS_OPTIONS \
	(TPU_OPTIONS_COUNT + GKE_OPTIONS_COUNT + SLURM_OPTIONS_COUNT + \
	 VERTEX_OPTIONS_COUNT)

/* One worker as the target sees it (a pod, a Slurm node). */
struct target_worker {
	int slice, worker;            /* -1: not labelled */
	long restart_attempt;         /* -1: not labelled */
	char name[254], phase[32], node[254];
};

/* A run as its target sees it, beyond the bucket. */
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

void target_view_release(struct target_view *v);

/* A target's view in its own words, for `slicectl status` and `reset`. */
struct target_words {
	/* JSON keys: the scheduler's state ("kueue", "job_state"), the
	 * workers ("pods", "nodes"), each one's restart attempt
	 * ("restart_attempt", "requeue") and state ("phase", "state"). */
	const char *state_key, *workers_key, *attempt_key, *phase_key;
	/* The table's: whose state it is ("Kueue", "Slurm"), and the
	 * columns' headings ("POD", "ATTEMPT", "PHASE"). */
	const char *scheduler, *worker_heading, *attempt_heading,
		*phase_heading;
	const char *worker;   /* one worker: "pod", "node" */
	const char *object;   /* what `slicectl job` made: "JobSet" */
};

struct run_qr;

/* What a watcher of a run is told (`slicectl job --watch`, `slicectl
 * watch`): how many recreations it may make, and its lease. */
struct watch_flags {
	unsigned recreate_budget;
	unsigned lease_ms;
};

struct target_ops {
	/* --target NAME, and what messages and `status --format json`
	 * call it. Never NULL. */
	const char *name;
	/* Whether job.json's "target" kind names this target; NULL: the
	 * target writes no "target" object, and target_of recognises it
	 * by job.json's older shape (a "tpu" object: tpu-vm; neither:
	 * local). */
	const char *kind;
	/* Fills opts with the target's own `slicectl job` flags and
	 * returns how many (all rows together need JOB_FLAGS_OPTIONS at
	 * most). NULL: it has none beyond cmd_job's shared table. */
	size_t (*options)(struct job_flags *f, struct opt *opts);
	/* Refuses flags the target does not take, before anything is
	 * touched: 0, or EXIT_USAGE after usage_error named them. NULL:
	 * every flag goes. */
	int (*check)(const struct job_flags *f);
	/* `slicectl job` once check passed: puts the run in its bucket
	 * (job.h) and makes its workers exist; a target that stays
	 * (tpu-vm's --watch, which recreates a suspended queued resource;
	 * local, which runs the workers) returns when the run ends.
	 * Returns the exit status. Never NULL. */
	int (*submit)(struct job_flags *f);
	/* The run as the target sees it, for `slicectl status`; out was
	 * cleared (position and restarts -1). NULL: nothing beyond the
	 * bucket (status shows the bucket's view alone). */
	int (*status)(const struct job *j, struct target_view *out,
		      struct err *e);
	/* `slicectl delete`: removes what `slicectl job` made there (q is
	 * a run, or for tpu-vm also a queued resource named directly),
	 * says so and returns the exit status. NULL: nothing to delete
	 * (the local provider's workers end with `slicectl stop`). */
	int (*delete)(struct run_qr *q, bool force);
	/* `slicectl reset`: kills and starts every worker again, the way
	 * out for a stuck run; with wait, returns once they run again.
	 * Returns the exit status. NULL: no such thing. */
	int (*reset)(struct run_qr *q, bool wait);
	/* `slicectl watch`: stays with the run q (its job.json read) as
	 * `slicectl job --watch` does after submitting, until the run
	 * ends. Returns the exit status. NULL: nothing to watch, and
	 * no_watch says why. */
	int (*watch)(struct run_qr *q, const struct watch_flags *f);
	const char *no_watch;
	/* What `slicectl job` made for j, for messages ("JobSet NS/NAME",
	 * "Slurm job ID"). NULL: j's queued resource, or nothing. */
	void (*what)(const struct job *j, char *out, size_t len);
	/* status's words for the view; NULL exactly when status is. */
	const struct target_words *words;
};

/* The table, TARGET_LAST rows, each row's name its --target choice. */
extern const struct target_ops *const targets[TARGET_LAST];

/* The target named name, or NULL. */
const struct target_ops *target_find(const char *name);
/* Fills opts with every row's own `slicectl job` flags (room for
 * JOB_FLAGS_OPTIONS entries), bound to f; returns how many. */
size_t target_options(struct job_flags *f, struct opt *opts);
/* --target's choices: every row's name, NULL-terminated. */
const char *const *target_choices(void);
/* A new run's target: --target's, else --local's, else tpu-vm. */
const struct target_ops *target_chosen(const struct job_flags *f);
/* A run's target, from its job.json: the row whose kind "target"'s kind
 * is, else by the shape tpu-vm and local runs have (a "tpu" object is a
 * queued resource, neither the local provider). Never NULL. */
const struct target_ops *target_of(const struct job *j);

/* Helpers for the rows. */

/* Refuses cmd_job's tpu-vm and local flags for target name
 * ("--local, --watch, ... are not for --target NAME"). */
int target_refuse_vm_flags(const struct job_flags *f, const char *name);
/* The accelerator of a target that takes GPU machine types: a TPU
 * type's size is its own, a GPU type's workers are --nodes (one unit,
 * "pod" or "replica", on each node); slices: --num-slices makes a TPU
 * job larger. 0, or EXIT_USAGE after usage_error named the problem. */
int target_accelerator(const struct job_flags *f, const char *unit,
		       bool slices, struct accelerator *acc);
/* Adds job.json's target ids to a JSON answer: "jobset" and "namespace"
 * (GKE) or "job_id" and "partition" (Slurm). */
void target_json_ids(json_t *o, const struct job_target *t);
/* delete and reset for a target that has a view, through its own
 * del/rst (j from the run's job.json); they print what was done. */
int target_delete_run(const struct run_qr *q,
		      int (*del)(const struct job *j, bool wait,
				 unsigned timeout_ms, bool *absent,
				 struct err *e));
int target_reset_run(const struct run_qr *q, bool wait,
		     int (*rst)(const struct job *j, bool wait,
				unsigned timeout_ms, long *attempt,
				struct err *e));

extern const struct target_ops target_tpu_vm, target_gke, target_slurm,
	target_vertex, target_local;

#endif
