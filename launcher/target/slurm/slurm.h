/*
 * slurm.h (private to launcher/): the Slurm target. A run there is one
 * batch job whose single step starts one slice-supervisor per node (srun
 * --ntasks-per-node=1): slurm_render.c writes its batch script,
 * slurm_exec.c runs Slurm's commands (sbatch, squeue, scontrol, scancel),
 * slurm_job.c submits it and is the target's row (target.h), slurm_run.c
 * serves status, delete and reset;
 * slurm_rest.c does the same through slurmrestd when the run names one.
 */
#ifndef SLICECTL_LAUNCHER_SLURM_H
#define SLICECTL_LAUNCHER_SLURM_H

#include "common/common.h"
#include "run/run.h"

#include <stdbool.h>

/* Time between the notice (--signal=B:TERM@S) and the job's end that is
 * not the grace period: the emergency step's upload. */
#define SLURM_UPLOAD_S 60u

/* What the batch script is rendered from. */
struct slurm_spec {
	const char *run;               /* also the job's name */
	const char *partition;
	const char *account, *qos;     /* NULL: the user's default */
	const char *time_limit;        /* --time as Slurm reads it; NULL */
	const char *constraint;        /* NULL: none */
	unsigned nodes, gpus_per_node; /* gpus 0: none asked */
	unsigned grace_s;
	const char *run_url;           /* BUCKET/RUN */
	const char *supervisor_sha256;
};

/* Checks what sbatch would refuse before anything is submitted (a
 * partition, account or QOS with spaces, a time limit Slurm cannot
 * read). Returns 0 or COMMON_EUSAGE naming the flag. */
int slurm_check(const struct slurm_spec *s, struct err *e);

/* The batch script, appended to b; slurm_check first. */
int slurm_render(const struct slurm_spec *s, struct buf *b, struct err *e);

/*
 * Runs Slurm command args (NULL-terminated, at most SLURM_EXEC_MAX_ARGS;
 * found on PATH) against cluster (-M; NULL: the default one), input on
 * its standard input when not NULL, and keeps its standard output in out.
 * Exit status 0: 0. Otherwise COMMON_EIO with e holding the command and
 * the first line of its standard error; one not installed: COMMON_EUSAGE;
 * one that does not end within $SLICECTL_SLURM_TIMEOUT_MS (default
 * 60000) is killed: COMMON_EIO saying the controller did not answer.
 */
#define SLURM_EXEC_MAX_ARGS 12
int slurm_exec(const char *cluster, const char *const *args,
	       const char *input, struct buf *out, struct err *e);

/* `tool [verb] job_id` (scancel ID, scontrol release ID, ...), its
 * output dropped. */
int slurm_job_command(const char *cluster, const char *tool, const char *verb,
		      const char *job_id, struct err *e);

/* `slicectl job --target slurm`'s own flags (--cluster and --render are
 * shared with gke: target.h's struct job_flags). */
struct slurm_options {
	const char *partition, *account, *qos, *time_limit, *constraint;
	const char *slurmrestd; /* URL or unix:/path; NULL: the commands */
	unsigned nodes, gpus_per_node;
};

/* Entries the row's options slot fills (target.h). */
#define SLURM_OPTIONS_COUNT 8

/* Whether any of them was given; slurm_refuse_flags says so to another
 * target's check (EXIT_USAGE, or 0 when none was). The row's submit
 * (slurm_job.c): the batch job is submitted held, the run's objects go
 * up with its id in job.json, then it is released; --render prints the
 * script instead. */
struct job_flags;
bool slurm_flags_given(const struct slurm_options *o);
int slurm_refuse_flags(const struct job_flags *f);

/* The job as scontrol or slurmrestd sees it. */
struct slurm_job_info {
	char state[32], reason[128], nodes[256];
	long restarts;
	bool missing;
};

/*
 * slurmrestd's OpenAPI v0.0.38 (Slurm 22.05) at base ("http[s]://HOST:PORT"
 * or "unix:/path/to/socket"). Each returns 0, or COMMON_EIO with e saying
 * that slurmrestd did not answer (within $SLICECTL_SLURM_TIMEOUT_MS) or
 * the first message of its "errors" array.
 */
/* Submits the rendered script held, with the spec's properties; id gets
 * the job's id. */
int slurm_rest_submit(const char *base, const struct slurm_spec *s,
		      const char *script, char *id, size_t len, struct err *e);
int slurm_rest_release(const char *base, const char *id, struct err *e);
int slurm_rest_cancel(const char *base, const char *id, struct err *e);
/* A job slurmrestd no longer knows is out->missing, not an error. */
int slurm_rest_job(const char *base, const char *id,
		   struct slurm_job_info *out, struct err *e);
/* Calls fn with each host of a Slurm hostlist ("n[1-3,07],gpu2") in
 * order; fn's non-zero return stops it and is returned; -1: malformed. */
int slurm_hostlist_each(const char *list, int (*fn)(void *, const char *),
			void *ud);

struct job;
struct target_view;
/* The row's status, delete and reset (target.h) for a Slurm run (j from
 * its job.json): scontrol show job, scancel, scontrol requeue (or
 * slurmrestd's). */
int slurm_describe(const struct job *j, struct target_view *out,
		   struct err *e);
int slurm_delete(const struct job *j, bool wait, unsigned timeout_ms,
		 bool *absent, struct err *e);
int slurm_reset(const struct job *j, bool wait, unsigned timeout_ms,
		long *attempt, struct err *e);

#endif
