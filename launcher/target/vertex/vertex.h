/*
 * vertex.h (private to launcher/): the Vertex AI target. A run there is
 * one CustomJob (aiplatform v1) at a time, labelled with the run's name:
 * vertex_render.c builds it from the job and checks what the API would
 * refuse, vertex_job.c is the target's row (target.h) and `slicectl job`
 * there, vertex_run.c serves status, delete, reset and --watch. The
 * CustomJobs of a run are found by their label, so job.json names none:
 * --watch submits new ones as capacity comes and goes.
 */
#ifndef SLICECTL_LAUNCHER_VERTEX_H
#define SLICECTL_LAUNCHER_VERTEX_H

#include "common/common.h"
#include "launcher/accelerator.h"

#include <jansson.h>
#include <stdbool.h>

/* The label every CustomJob of a run carries, its value the run's name
 * ("_" rather than "-": the key goes into list filters as labels.KEY,
 * and "-" is the filter language's negation). */
#define VERTEX_RUN_LABEL "slicectl_run"

/* What the CustomJob is rendered from. */
struct vertex_spec {
	const char *run;               /* the run's name: displayName, label */
	const char *image;             /* the trainer's image */
	const char *run_url;           /* BUCKET/RUN */
	const char *supervisor_sha256;
	struct accelerator acc;        /* a GPU type's: workers = --nodes */
	unsigned num_slices;
	const struct strlist *env;     /* "K=V" */
	bool spot, flex_start;
	unsigned max_wait_s;           /* with flex_start; 0: Vertex's own */
	const char *reservation;       /* projects/P/zones/Z/reservations/R */
	const char *service_account;   /* an IAM service account's email */
	const char *network;           /* projects/NUMBER/global/networks/N */
};

/* What the API would refuse and the schema cannot say (a label value, a
 * type Vertex has no machines of, capacity flags that do not go
 * together, a reservation or network not in its resource-name form).
 * Returns 0 or COMMON_EUSAGE with e naming the flag. */
int vertex_check(const struct vertex_spec *s, struct err *e);

/* The CustomJob body (docs/DESIGN.md "The Vertex CustomJob");
 * vertex_check first. */
int vertex_render(const struct vertex_spec *s, json_t **out, struct err *e);

/* `slicectl job --target vertex`'s own flags (--nodes, --image,
 * --flex-start, --reservation, --service-account and --render are the
 * gke and slurm rows'; --spot, --project and --watch cmd_job's). */
struct vertex_options {
	const char *region, *network;
	unsigned max_wait_ms;
};

/* Entries the row's options slot fills (target.h). */
#define VERTEX_OPTIONS_COUNT 3

/* Whether any of them was given; vertex_refuse_flags says so to another
 * target's check (EXIT_USAGE, or 0 when none was). */
struct job_flags;
bool vertex_flags_given(const struct vertex_options *o);
int vertex_refuse_flags(const struct job_flags *f);

struct job;
struct target_view;
struct vertex_client;
/* The run's newest CustomJob (by createTime) in *out, NULL when it has
 * none; *count (unless NULL) how many it has. */
int vertex_newest(struct vertex_client *c, const char *run, json_t **out,
		  long *count, struct err *e);
/* Whether a job in state ended through capacity: preempted (a SPOT job's
 * error), or flex-start's maxWaitDuration run out; the run then goes on
 * in a new CustomJob. */
bool vertex_capacity_end(const json_t *job);

/* The row's status, delete and reset (target.h) for a Vertex run (j from
 * its job.json): the newest CustomJob's state and error with the bucket's
 * workers, cancelling and deleting each of its CustomJobs, and
 * cancelling the running one and submitting it again. */
int vertex_describe(const struct job *j, struct target_view *out,
		    struct err *e);
int vertex_delete(const struct job *j, bool wait, unsigned timeout_ms,
		  bool *absent, struct err *e);
int vertex_reset(const struct job *j, bool wait, unsigned timeout_ms,
		 long *attempt, struct err *e);
/* --watch: follows the run at run_url (j its job.json) until it is done,
 * submitting its CustomJob again when one ended through capacity (the
 * run's generation bumped first, as tpu-vm's --watch does), at most
 * f's budget times, acting only while it holds the run's watch lease
 * (watch_lease.h). Returns the exit status. */
struct watch_flags;
int vertex_watch(const char *run_url, const struct job *j,
		 const struct watch_flags *f);

#endif
