/*
 * job.h (private to launcher/): what `slicectl job` does before any worker
 * exists, shared by every target's submit (launcher/target/NAME/): check
 * the request, then put the run's
 * objects under BUCKET/RUN (job.json, bundle.tar.zst, the supervisor,
 * control.json) and render the startup script that boots every worker.
 */
#ifndef SLICECTL_LAUNCHER_JOB_H
#define SLICECTL_LAUNCHER_JOB_H

#include "cloud/cloud.h"
#include "run/run.h"

/* `slicectl job`'s flags, as given. */
/* --max-infra-restarts not given: no limit. */
#define JOB_NO_LIMIT UINT_MAX

struct job_request {
	const char *name;             /* RUN */
	const char *bucket;           /* gs://B[/PREFIX] or file:///DIR */
	const char *accelerator_type;
	const char *runtime_version;  /* NULL: the default for the type */
	unsigned num_slices;          /* >= 1 */
	unsigned workers_per_slice;   /* local: given; cloud: from the type */
	const char *script_dir;       /* packed as bundle.tar.zst; NULL none */
	const char *command;
	struct strlist env;           /* "K=V" */
	unsigned max_restarts, hang_timeout_s, grace_s, keep, keep_every;
	unsigned local_keep;          /* the local tier's steps, 0 none */
	unsigned persist_every;       /* job.json persist_every */
	const char *local_dir;        /* NULL: each state directory's */
	unsigned max_infra_restarts;  /* JOB_NO_LIMIT: none */
	int hang_signal;              /* 0: none */
	unsigned rendezvous_port;     /* 0: job.json's default */
	/* The launcher chose rendezvous_port (the local target): a run
	 * resumed keeps the one its job.json has. */
	bool rendezvous_port_picked;
	const char *preflight;        /* NULL: none */
	const char *bad_host_pattern; /* NULL: none */
	unsigned preflight_timeout_s;
	bool spot, reserved, best_effort, delete_on_finish;
	const char *project, *zone;   /* cloud only (flags or CLOUDSDK_*) */
	/* --monitoring: "" the run's project (job_monitoring_project),
	 * else the project given; NULL: no export. */
	const char *monitoring;
	struct strlist notify;        /* --notify URLs, job.json's "notify" */
	const char *supervisor_bin;   /* NULL: found next to slicectl */
	/* Prefer slice-supervisor.portable next to slicectl: workers whose
	 * libraries are not the build machine's (TPU VM images, pods,
	 * Slurm nodes). */
	bool portable;
	/* job.json's "target" (gke, slurm); NULL: the kind alone, tpu-vm
	 * with project and zone, else local. Not owned. */
	const struct job_target *target;
};

void job_request_init(struct job_request *r); /* the defaults */
void job_request_release(struct job_request *r);

/* job.json's monitoring project for r (*out malloc'd; NULL when
 * --monitoring is not given): the project given, else the run's own
 * (tpu-vm's, the GKE cluster's), else gcloud's default; none is
 * COMMON_EUSAGE saying how to give one. */
int job_monitoring_project(const struct job_request *r, char **out,
			   struct err *e);

/* A run whose objects are in place. */
struct prepared_run {
	char run_url[2048];           /* BUCKET/RUN */
	char supervisor_sha256[65];
	bool supervisor_portable;     /* it is a slice-supervisor.portable */
	char *startup_script;         /* rendered, malloc'd */
	size_t startup_len;
	struct job job;               /* as written to job.json */
};

/*
 * Checks r (every problem named before anything is created: a bad name,
 * an unreachable or unwritable bucket, a missing script dir or supervisor
 * binary), then uploads job.json, bundle.tar.zst, the supervisor
 * (supervisor/slice-supervisor-SHA256) and control.json (generation 1)
 * under BUCKET/RUN, and renders the startup script. A RUN that already has
 * a job.json is refused unless its job.json is the same (re-running the
 * same command resumes it). Returns 0 or a cloud/common error with e set.
 */
int job_prepare(const struct job_request *r, struct prepared_run *out,
		struct err *e);
void prepared_run_release(struct prepared_run *p);
/* Logs job_prepare's error and returns the exit status it means:
 * EXIT_USAGE for a bad request (nothing was started), else 1. */
int job_exit_status(const struct err *e);
/* job_prepare's checks and out's run_url, supervisor_sha256 and job,
 * with nothing read or written in the bucket (startup_script NULL). */
int job_plan(const struct job_request *r, struct prepared_run *out,
	     struct err *e);

/* Following a job (cmd_job.c's --watch, the GKE target's admission):
 * a progress line "[   12.3 s] ..." timed from start_ms (mono_ms()), and
 * a period from environment variable var (1 to 60000 ms; else dflt). */
void job_say(uint64_t start_ms, const char *fmt, ...) ATTR_PRINTF(2, 3);
unsigned job_env_ms(const char *var, unsigned dflt);
/* A watch's look at the run's control.json (into c): a new state or
 * generation than state/generation (the last seen, updated) is said.
 * Returns 0, or -1 when it could not be read (logged). */
int job_follow_control(struct store *s, uint64_t start_ms, char *state,
		       size_t len, int64_t *generation, struct control *c);
/* Whether c says the run is over: 0 done, 1 failed (each said), -1 it
 * goes on. */
int job_run_over(uint64_t start_ms, const struct control *c);
/* A watch's loop: once every poll_ms until it returns an exit status
 * (>= 0), each time only while the run's watch lease is held
 * (watch_lease.h): without it, it waits to take it first. It counts the
 * looks that failed in a row in *errors, and max_errors of them end the
 * watch (status 1; the run goes on). */
struct watch_lease;
int job_watch_loop(int (*once)(void *ud, unsigned *errors), void *ud,
		   unsigned max_errors, uint64_t poll_ms,
		   struct watch_lease *lease);

/* The runtime version a TPU type needs by default
 * ("tpu-ubuntu2204-base", "v2-alpha-tpuv5-lite", ...). */
const char *job_default_runtime(const char *accelerator_type);
/* Workers per slice of a TPU type (v4-32: 4); 0 when unknown, and for a
 * GPU machine type (GKE runs those, on --nodes nodes). */
unsigned job_workers_per_slice(const char *accelerator_type);

#endif
