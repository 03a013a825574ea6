/*
 * supervisor/supervisor.h: slice-supervisor, the per-worker daemon that
 * keeps one worker's share of a run alive (DESIGN.md: trainer environment,
 * checkpoint hand-off, bucket layout, group restarts, signals).
 *
 * What other parts use: the job spec (job.json), which the launcher
 * writes and checks before anything is created, and the names of a run's
 * objects.
 */
#ifndef SLICECTL_SUPERVISOR_H
#define SLICECTL_SUPERVISOR_H

#include "common/common.h"

#include <stdbool.h>
#include <stdint.h>

/* job.json, written once by the launcher at RUN/job.json. */
struct job {
	char *name;              /* the run's name */
	char *command;           /* the trainer, as /bin/sh -c reads it */
	struct strlist env;      /* "NAME=VALUE", exported to the trainer */
	char *workdir;           /* trainer's working directory; NULL: the
				    unpacked code bundle, else $HOME */
	unsigned num_slices;     /* >= 1 */
	unsigned workers_per_slice; /* >= 1 */
	unsigned max_restarts;   /* group restarts before the run fails */
	unsigned hang_timeout_s; /* no output and no new step: hung; 0 off */
	unsigned grace_s;        /* SIGTERM to exit on preemption (25) */
	unsigned keep;           /* newest committed steps kept (>= 1) */
	unsigned keep_every;     /* also keep steps divisible by it; 0 no */
	unsigned heartbeat_s;    /* status object period (default 10) */
	unsigned spool_mb;       /* local disk for steps not yet uploaded */
	bool delete_on_finish;   /* worker 0 deletes the queued resource */
	/* The queued resource running the job (for delete_on_finish);
	 * NULL for the local provider. */
	char *tpu_project;
	char *tpu_zone;
	char *tpu_name;
};

void job_init(struct job *j); /* the defaults */
void job_release(struct job *j);
/* Parses job.json. Unknown fields, wrong types and out-of-range values
 * are COMMON_EINVAL with the field named; missing name or command too. */
int job_parse(const char *json, size_t len, struct job *out, struct err *e);
/* job.json for j (*out malloc'd, NUL-terminated). */
int job_to_json(const struct job *j, char **out, struct err *e);

/* Object names of a run, relative to its prefix (see DESIGN.md). */
#define RUN_JOB "job.json"
#define RUN_CONTROL "control.json"
#define RUN_BUNDLE "bundle.tar.zst"

/* "slice-S-worker-W": a worker's part, status and log names. */
void run_worker_name(unsigned slice, unsigned worker, char *out, size_t len);

#endif
