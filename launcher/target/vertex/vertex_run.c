/*
 * vertex_run.c: a Vertex run's CustomJobs after `slicectl job` (see
 * vertex.h): found by the run's label, shown, cancelled and deleted,
 * submitted again by reset and by --watch (only while it holds the run's
 * watch lease, watch_lease.h).
 */
#include "launcher/target/vertex/vertex.h"
#include "cloud/cloud.h"
#include "launcher/job.h"
#include "launcher/launcher.h"
#include "launcher/target/target.h"
#include "launcher/watch_lease.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* --watch's poll and the longest wait for a cancel, in units of
 * SLICECTL_VERTEX_POLL_MS (default 1000 ms). */
#define POLL_UNITS 10
#define CANCEL_UNITS 600
/* Polls in a row that may fail before --watch gives up. */
#define MAX_ERRORS 30

static const char *str(const json_t *o, const char *k)
{
	const char *v = json_string_value(json_object_get(o, k));

	return v ? v : "";
}

static bool ended(const char *state)
{
	static const char *const over[] = {
		"JOB_STATE_SUCCEEDED", "JOB_STATE_FAILED",
		"JOB_STATE_CANCELLED", "JOB_STATE_EXPIRED",
		"JOB_STATE_PARTIALLY_SUCCEEDED",
	};

	for (size_t i = 0; i < sizeof(over) / sizeof(*over); i++)
		if (!strcmp(state, over[i]))
			return true;
	return false;
}

static bool of_run(const json_t *job, const char *run)
{
	return !strcmp(str(json_object_get(job, "labels"), VERTEX_RUN_LABEL),
		       run);
}

/* The run's CustomJobs (and perhaps others: of_run says), through the
 * list's label filter, so that a project's other jobs are not paged. */
static int run_jobs(struct vertex_client *c, const char *run, json_t **jobs,
		    struct err *e)
{
	char filter[128];

	/* The name is a label value (vertex_check): nothing to quote. */
	snprintf(filter, sizeof(filter), "labels.%s=\"%s\"", VERTEX_RUN_LABEL,
		 run);
	return vertex_job_list(c, filter, jobs, e);
}

int vertex_newest(struct vertex_client *c, const char *run, json_t **out,
		  long *count, struct err *e)
{
	json_t *jobs = NULL, *job, *best = NULL;
	size_t i;
	int rc = run_jobs(c, run, &jobs, e);

	*out = NULL;
	if (count)
		*count = 0;
	if (rc)
		return rc;
	/* RFC 3339 times of one API compare as strings. */
	json_array_foreach(jobs, i, job) {
		if (!of_run(job, run))
			continue;
		if (count)
			++*count;
		if (!best || strcmp(str(job, "createTime"),
				    str(best, "createTime")) >= 0)
			best = job;
	}
	*out = json_incref(best);
	json_decref(jobs);
	return 0;
}

bool vertex_capacity_end(const json_t *job)
{
	const char *state = str(job, "state");
	const json_t *error = json_object_get(job, "error");
	const char *msg = str(error, "message");
	json_int_t code = json_integer_value(json_object_get(error, "code"));

	if (!strcmp(state, "JOB_STATE_EXPIRED"))
		return true;
	if (strcmp(state, "JOB_STATE_FAILED"))
		return false;
	/* UNAVAILABLE and RESOURCE_EXHAUSTED are google.rpc's codes for
	 * capacity taken away or never found. */
	return code == 14 || code == 8 || strstr(msg, "preempt") ||
	       strstr(msg, "Preempt") || strstr(msg, "maxWaitDuration") ||
	       strstr(msg, "stockout");
}

static int open_client(const struct job *j, struct vertex_client **c,
		       struct err *e)
{
	return vertex_open(c, j->target.project, j->target.location, e);
}

/* Each replica, named as Vertex names it, for the worker it is, of the
 * run's attempt-th CustomJob (0 the first). */
static int replicas(const struct job *j, const char *state, long attempt,
		    struct target_view *out)
{
	unsigned n = j->num_slices * j->workers_per_slice;

	out->workers = calloc(n, sizeof(*out->workers));
	if (!out->workers)
		return -1;
	out->n = n;
	for (unsigned i = 0; i < n; i++) {
		struct target_worker *w = &out->workers[i];

		w->slice = 0;
		w->worker = (int)i;
		w->restart_attempt = attempt;
		if (i == 0)
			snprintf(w->name, sizeof(w->name), "workerpool0-0");
		else
			snprintf(w->name, sizeof(w->name), "workerpool1-%u",
				 i - 1);
		snprintf(w->phase, sizeof(w->phase), "%s",
			 ended(state) ? "ended" : "scheduled");
	}
	return 0;
}

int vertex_describe(const struct job *j, struct target_view *out,
		    struct err *e)
{
	struct vertex_client *c;
	json_t *job = NULL;
	long count = 0;
	int rc = open_client(j, &c, e);

	snprintf(out->what, sizeof(out->what), "CustomJob of run %s",
		 j->name);
	if (!rc)
		rc = vertex_newest(c, j->name, &job, &count, e);
	vertex_close(c);
	if (rc)
		return rc;
	if (!job) {
		out->missing = true;
		snprintf(out->state, sizeof(out->state), "none");
		return 0;
	}
	snprintf(out->what, sizeof(out->what), "CustomJob %s",
		 str(job, "name"));
	snprintf(out->state, sizeof(out->state), "%s", str(job, "state"));
	snprintf(out->message, sizeof(out->message), "%s",
		 str(json_object_get(job, "error"), "message"));
	if (!strcmp(out->state, "JOB_STATE_SUCCEEDED"))
		snprintf(out->end, sizeof(out->end), "Completed");
	else if (ended(out->state))
		snprintf(out->end, sizeof(out->end), "Failed");
	/* The CustomJobs submitted again (reset, --watch) play the
	 * restarts. */
	out->restarts = count - 1;
	rc = replicas(j, out->state, count - 1, out) ? err_set(e, COMMON_ENOMEM,
						    "out of memory")
					  : 0;
	json_decref(job);
	return rc;
}

static bool running_or_ended(const char *state)
{
	return !strcmp(state, "JOB_STATE_RUNNING") || ended(state);
}

/* Polls CustomJob name until done says yes of its state, within
 * timeout_ms (0: CANCEL_UNITS polls); what says what is awaited. */
static int await(struct vertex_client *c, const char *name,
		 bool (*done)(const char *state), unsigned timeout_ms,
		 const char *what, struct err *e)
{
	uint64_t unit = job_env_ms("SLICECTL_VERTEX_POLL_MS", 1000);
	uint64_t deadline = mono_ms() + (timeout_ms ? timeout_ms
						    : CANCEL_UNITS * unit);

	for (;;) {
		json_t *now = NULL;
		int rc = vertex_job_get(c, name, &now, e);
		bool over = !rc && done(str(now, "state"));

		json_decref(now);
		if (rc || over)
			return rc;
		if (mono_ms() >= deadline)
			return err_set(e, CLOUD_ETIMEDOUT, "CustomJob %s is "
				       "still not %s", name, what);
		proc_sleep_ms((unsigned)unit, true);
	}
}

/* Cancels job and returns once it has ended. */
static int cancel(struct vertex_client *c, const json_t *job,
		  unsigned timeout_ms, struct err *e)
{
	const char *name = str(job, "name");
	int rc;

	if (ended(str(job, "state")))
		return 0;
	rc = vertex_job_cancel(c, name, e);
	return rc ? rc : await(c, name, ended, timeout_ms, "cancelled", e);
}

int vertex_delete(const struct job *j, bool wait, unsigned timeout_ms,
		  bool *absent, struct err *e)
{
	struct vertex_client *c;
	json_t *jobs = NULL, *job;
	size_t i, n = 0;
	int rc = open_client(j, &c, e);

	if (!rc)
		rc = run_jobs(c, j->name, &jobs, e);
	/* Vertex deletes only jobs that have ended: each is cancelled
	 * (and waited for) first. */
	json_array_foreach(jobs, i, job) {
		if (rc || !of_run(job, j->name))
			continue;
		n++;
		rc = cancel(c, job, timeout_ms, e);
		if (!rc)
			rc = vertex_job_delete(c, str(job, "name"), e);
		if (rc == CLOUD_ENOTFOUND)
			rc = 0;
	}
	(void)wait; /* Vertex deletes only ended jobs: always waited */
	json_decref(jobs);
	vertex_close(c);
	*absent = !rc && !n;
	return rc;
}

/* A new CustomJob with job's spec: what reset and --watch submit. */
static int submit_again(struct vertex_client *c, const json_t *job,
			char *name, size_t len, struct err *e)
{
	json_t *body = json_pack("{s:s, s:O, s:O}", "displayName",
				 str(job, "displayName"), "labels",
				 json_object_get(job, "labels"), "jobSpec",
				 json_object_get(job, "jobSpec"));
	json_t *made = NULL;
	int rc;

	if (!body)
		return err_set(e, COMMON_ENOMEM, "out of memory");
	rc = vertex_job_create(c, body, &made, e);
	if (!rc)
		snprintf(name, len, "%s", str(made, "name"));
	json_decref(made);
	json_decref(body);
	return rc;
}

int vertex_reset(const struct job *j, bool wait, unsigned timeout_ms,
		 long *attempt, struct err *e)
{
	struct vertex_client *c;
	json_t *job = NULL;
	char name[512];
	long count = 0;
	int rc = open_client(j, &c, e);

	*attempt = -1;
	if (!rc)
		rc = vertex_newest(c, j->name, &job, &count, e);
	if (!rc && !job)
		rc = err_set(e, CLOUD_ENOTFOUND,
			     "run %s has no CustomJob in %s to reset", j->name,
			     j->target.location);
	/* Vertex has no restart of a running job: the closest is a new
	 * one, whose replicas the supervisors take for a new pod set. */
	if (!rc)
		rc = cancel(c, job, timeout_ms, e);
	if (!rc)
		rc = submit_again(c, job, name, sizeof(name), e);
	if (!rc) {
		log_info("CustomJob %s replaces %s", name, str(job, "name"));
		/* status's JOB column: the run's CustomJobs from 0. */
		*attempt = count;
	}
	if (!rc && wait)
		rc = await(c, name, running_or_ended, timeout_ms, "running",
			   e);
	json_decref(job);
	vertex_close(c);
	return rc;
}

struct watch {
	struct vertex_client *c;
	const struct job *j;
	struct store *s;
	struct watch_lease *lease;
	unsigned budget, recreated;
	uint64_t start_ms, unit_ms;
	char job_state[64], run_state[64];
	int64_t generation;
};

/* control.json, a change said (job_follow_control). */
static int watch_run(struct watch *w, struct control *c)
{
	return job_follow_control(w->s, w->start_ms, w->run_state,
				  sizeof(w->run_state), &w->generation, c);
}

/* The lease is lost mid-recreation: the next holder finishes it. */
static int lost(struct watch *w, const char *step, const struct err *e)
{
	job_say(w->start_ms, "not %s: %s", step, e->msg);
	return -1;
}

/* Starts replacing job: the budget checked, the recreation written into
 * the lease record. 0, 1 (an exit status) or -1: the lease is lost. */
static int begin(struct watch *w, const struct control *seen,
		 const json_t *job, struct lease_note *n)
{
	struct err e;

	if (w->recreated >= w->budget) {
		log_error("CustomJob %s ended (%s) and the recreate budget "
			  "(%u) is spent: run slicectl watch %s again with a "
			  "larger --recreate-budget", str(job, "name"),
			  str(job, "state"), w->budget, w->j->name);
		return 1;
	}
	snprintf(n->about, sizeof(n->about), "%s", str(job, "name"));
	snprintf(n->why, sizeof(n->why), "%.150s",
		 str(json_object_get(job, "error"), "message"));
	n->from_generation = seen->generation;
	return watch_lease_act(w->lease, n, &e) ? lost(w, "resubmitting", &e)
						: 0;
}

/* A recreation done (or found done after a takeover): counted, and
 * cleared from the lease record. */
static void done(struct watch *w)
{
	const struct lease_note none = { .about = "" };
	struct err e;

	w->recreated++;
	w->job_state[0] = '\0';
	if (watch_lease_act(w->lease, &none, &e))
		log_warn("clearing the recreation from the lease: %s", e.msg);
}

/* A job that ended through capacity while the run goes on: the
 * generation moves on and a new CustomJob is posted, each step only
 * right after the lease was renewed; a recreation of the same job that
 * a watcher before began is finished, not made again. Returns -1 to go
 * on watching, or an exit status. */
static int recreate(struct watch *w, const struct control *seen,
		    const json_t *job)
{
	struct control from = *seen, after;
	char name[512], reason[160];
	struct gen_cause cause;
	struct lease_note n;
	struct err e;
	int rc = 0;

	watch_lease_note(w->lease, &n);
	if (strcmp(n.about, str(job, "name")))
		rc = begin(w, seen, job, &n);
	else
		job_say(w->start_ms, "finishing the resubmission of %s under "
			"way", n.about);
	/* From the generation the recreation began at: a takeover bumps
	 * once. */
	from.generation = n.from_generation;
	lease_note_release(&n);
	if (rc)
		return rc;
	if (watch_lease_act(w->lease, NULL, &e))
		return lost(w, "bumping the run's generation", &e);
	snprintf(reason, sizeof(reason), "CustomJob submitted again after "
		 "%.100s", str(json_object_get(job, "error"), "message"));
	/* Capacity ended the job: the infrastructure's budget pays, as
	 * for a recreated queued resource (tpu_recreate.c). */
	gen_cause_init(&cause, CAUSE_INFRA, "recreated", "slicectl");
	cause_set_tail(&cause, str(json_object_get(job, "error"), "message"));
	if (control_bump_cause(w->s, NULL, &from, w->j, &cause, reason,
			       "slicectl", -1, &after, &e)) {
		log_error("bumping the run's generation: %s", e.msg);
		return 1;
	}
	if (!strcmp(after.state, "failed")) {
		log_error("the run failed: %s", after.reason);
		return 1;
	}
	/* Done or stopping meanwhile: the next look ends the watch. */
	if (strcmp(after.state, "running"))
		return -1;
	if (watch_lease_act(w->lease, NULL, &e))
		return lost(w, "resubmitting", &e);
	if (submit_again(w->c, job, name, sizeof(name), &e)) {
		log_error("submitting the CustomJob again: %s", e.msg);
		return 1;
	}
	done(w);
	job_say(w->start_ms, "CustomJob %s submitted (recreation %u of at most "
		"%u)", name, w->recreated, w->budget);
	return -1;
}

/* A resubmission a watcher before began whose new CustomJob is there
 * (newest, not the one it replaced): counted and cleared. */
static void landed(struct watch *w, const json_t *job)
{
	struct lease_note n;

	watch_lease_note(w->lease, &n);
	if (*n.about && strcmp(n.about, str(job, "name"))) {
		job_say(w->start_ms, "the resubmission of %s under way had "
			"posted %s already: following it", n.about,
			str(job, "name"));
		done(w);
	}
	lease_note_release(&n);
}

static int watch_once(void *ud, unsigned *errors)
{
	struct watch *w = ud;
	struct control c;
	json_t *job = NULL;
	struct err e;
	int rc;

	if (watch_run(w, &c)) {
		++*errors;
		return -1;
	}
	if ((rc = job_run_over(w->start_ms, &c)) >= 0)
		return rc;
	err_init(&e);
	if (vertex_newest(w->c, w->j->name, &job, NULL, &e)) {
		log_warn("reading the run's CustomJob: %s", e.msg);
		++*errors;
		return -1;
	}
	*errors = 0;
	if (!job) {
		log_error("run %s has no CustomJob any more (deleted?)",
			  w->j->name);
		return 1;
	}
	if (strcmp(str(job, "state"), w->job_state)) {
		const char *msg = str(json_object_get(job, "error"), "message");

		job_say(w->start_ms, "CustomJob %s: %s%s%s", str(job, "name"),
			str(job, "state"), *msg ? ": " : "", msg);
		snprintf(w->job_state, sizeof(w->job_state), "%s",
			 str(job, "state"));
	}
	rc = -1;
	if (!ended(str(job, "state")))
		landed(w, job);
	else if (!strcmp(c.state, "stopping") ||
		 !strcmp(str(job, "state"), "JOB_STATE_SUCCEEDED"))
		rc = 0;
	else if (vertex_capacity_end(job))
		rc = recreate(w, &c, job);
	else
		rc = (log_error("CustomJob %s is %s, not through capacity: "
				"--watch does not submit it again",
				str(job, "name"), str(job, "state")),
		      1);
	json_decref(job);
	return rc;
}

int vertex_watch(const char *run_url, const struct job *j,
		 const struct watch_flags *f)
{
	struct watch w = { .j = j, .budget = f->recreate_budget };
	struct err e;
	int status = -1;

	err_init(&e);
	w.start_ms = mono_ms();
	if (store_open(&w.s, run_url, &e) || open_client(j, &w.c, &e) ||
	    watch_lease_open(run_url, f->lease_ms, w.start_ms, &w.lease, &e)) {
		log_error("%s", e.msg);
		vertex_close(w.c);
		store_close(w.s);
		return 1;
	}
	w.unit_ms = job_env_ms("SLICECTL_VERTEX_POLL_MS", 1000);
	job_say(w.start_ms, "watching run %s's CustomJobs (recreate budget "
		"%u)", j->name, w.budget);
	status = job_watch_loop(watch_once, &w, MAX_ERRORS,
				POLL_UNITS * w.unit_ms, w.lease);
	watch_lease_close(w.lease);
	vertex_close(w.c);
	store_close(w.s);
	return status;
}
