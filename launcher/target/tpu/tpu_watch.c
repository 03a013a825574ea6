/*
 * tpu_watch.c: `slicectl job --watch` on Cloud TPU (tpu.h): stays, says
 * the queued resource's and the run's state changes, and when a
 * preemption leaves the queued resource SUSPENDED (or it FAILED) bumps the
 * run's generation, deletes it and asks for it again, within the recreate
 * budget and with backoff; also between flex-start windows. What it saw
 * goes to RUN/watch.json for slicectl status.
 */
#include "launcher/job.h"
#include "launcher/launcher.h"
#include "launcher/target/target.h"
#include "launcher/target/tpu/tpu.h"
#include "launcher/watch_state.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* --watch's periods, in units of SLICECTL_TPU_POLL_MS (default 1000 ms):
 * the poll, and the backoff before recreating (base and cap). */
#define WATCH_POLL_UNITS 10
#define WATCH_BACKOFF_BASE_UNITS 30
#define WATCH_BACKOFF_MAX_UNITS 600
/* Polls in a row that may fail before --watch gives up. */
#define WATCH_MAX_ERRORS 30

struct watch {
	struct tpu_client *c;
	const struct tpu_qr_spec *spec;
	struct store *s;
	struct job budget_of;    /* the run's restart budgets alone */
	unsigned budget, recreated;
	uint64_t start_ms, unit_ms;
	struct backoff bo;
	char qr_state[64], run_state[64];
	char window_end[40];     /* the flex-start window's, "" none */
	int64_t generation;
};

/* control.json, a change said (job_follow_control). */
static int watch_run(struct watch *w, struct control *c)
{
	return job_follow_control(w->s, w->start_ms, w->run_state,
				  sizeof(w->run_state), &w->generation, c);
}

/* Whether every worker of a stopping run has left. */
static bool all_stopped(struct watch *w)
{
	struct worker_status *v = NULL;
	size_t n = 0, left = 0;
	struct err e;

	err_init(&e);
	if (status_list(w->s, &v, &n, &e))
		return false;
	for (size_t i = 0; i < n; i++)
		left += !strcmp(v[i].state, "exited") ||
			!strcmp(v[i].state, "finished") ||
			!strcmp(v[i].state, "failed") ||
			!strcmp(v[i].state, "preempted");
	free(v);
	return n && left == n;
}

/* RUN/watch.json for slicectl status (watch_state.h), q NULL when the
 * queued resource was just asked for again. A bucket that refuses it
 * costs the watch nothing. */
static void publish_watch(struct watch *w, const struct tpu_qr *q)
{
	struct watch_state ws = { .recreated = w->recreated,
				  .budget = w->budget };
	struct err e;

	snprintf(ws.queued_resource, sizeof(ws.queued_resource), "%s",
		 w->spec->id);
	if (q) {
		snprintf(ws.state, sizeof(ws.state), "%s", q->state);
		snprintf(ws.capacity, sizeof(ws.capacity), "%s", q->capacity);
		snprintf(ws.window_end, sizeof(ws.window_end), "%s",
			 q->termination_time);
	}
	err_init(&e);
	if (watch_state_put(w->s, &ws, &e))
		log_warn("%s", e.msg);
}

/* A new state or a new window's end: said, and kept for status. */
static void seen_qr(struct watch *w, const struct tpu_qr *q)
{
	if (!strcmp(q->state, w->qr_state) &&
	    !strcmp(q->termination_time, w->window_end))
		return;
	if (*q->termination_time && strcmp(q->termination_time, w->window_end))
		job_say(w->start_ms, "%s: its %s window ends at %s",
			w->spec->id, q->capacity, q->termination_time);
	snprintf(w->window_end, sizeof(w->window_end), "%s",
		 q->termination_time);
	publish_watch(w, q);
}

/* Why a queued resource is over: the end of a flex-start window is no
 * preemption. */
static const char *why_over(const struct tpu_qr *q)
{
	return !strcmp(q->state, "SUSPENDED") &&
			       !strcmp(q->capacity, "flex-start")
		       ? "the end of its flex-start window"
		       : q->state;
}

/* The run's history (run/run.h) keeps each queued resource asked for
 * again, or flex-start window queued, and why. */
static void note_recreated(struct watch *w, int64_t generation,
			   const char *why)
{
	json_t *d = json_pack("{s:s, s:i, s:i}", "queued_resource",
			      w->spec->id, "recreation", (int)w->recreated,
			      "budget", (int)w->budget);
	char *details = d ? json_dumps(d, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
	struct err e;

	if (event_record_as(w->s, "slicectl", "recreated", generation, why,
			    details, &e))
		log_warn("event not recorded: %s", e.msg);
	free(details);
	json_decref(d);
}

/* Bumps the run's generation, deletes the queued resource and asks for
 * it again. Returns -1 to go on watching, or an exit status. */
static int recreate(struct watch *w, const struct control *seen,
		    const char *why)
{
	struct control after;
	struct gen_cause cause;
	char reason[128];
	unsigned wait_ms;
	struct err e;

	if (w->recreated >= w->budget) {
		log_error("%s is %s and the recreate budget (%u) is spent: "
			  "giving up. Delete it with slicectl delete %s, or "
			  "run slicectl job again with --watch and a larger "
			  "--recreate-budget", w->spec->id, why, w->budget,
			  w->spec->id);
		return 1;
	}
	err_init(&e);
	snprintf(reason, sizeof(reason),
		 "queued resource recreated after %s", why);
	gen_cause_init(&cause, CAUSE_INFRA, "recreated", "slicectl");
	cause_set_tail(&cause, why);
	if (control_bump_cause(w->s, NULL, seen, &w->budget_of, &cause, reason,
			       "slicectl", -1, &after, &e)) {
		log_error("bumping the run's generation: %s", e.msg);
		return 1;
	}
	job_say(w->start_ms, "run: generation %" PRId64 " (%s), %s",
		after.generation, after.state, after.reason);
	snprintf(w->run_state, sizeof(w->run_state), "%s", after.state);
	w->generation = after.generation;
	if (!strcmp(after.state, "failed")) {
		log_error("the run failed: %s", after.reason);
		return 1;
	}
	wait_ms = backoff_next_ms(&w->bo);
	job_say(w->start_ms, "%s: %s; deleting it, then asking again in %.1f s "
	    "(recreation %u of at most %u)", w->spec->id, why,
	    wait_ms / 1000.0, w->recreated + 1, w->budget);
	if (tpu_qr_delete(w->c, w->spec->id, true, true, 0, tpu_print_progress,
			  NULL, &e) &&
	    e.code != CLOUD_ENOTFOUND) {
		log_error("deleting %s: %s", w->spec->id, e.msg);
		return 1;
	}
	proc_sleep_ms(wait_ms, true);
	err_init(&e);
	if (tpu_qr_create(w->c, w->spec, &e)) {
		log_error("creating %s again: %s", w->spec->id, e.msg);
		return 1;
	}
	w->recreated++;
	w->qr_state[0] = '\0';
	w->window_end[0] = '\0';
	job_say(w->start_ms, "%s: asked for again", w->spec->id);
	publish_watch(w, NULL);
	note_recreated(w, after.generation, why);
	return -1;
}

/* One look at the run and the queued resource. Returns -1 to go on, or
 * an exit status. */
static int watch_once(void *ud, unsigned *errors)
{
	struct watch *w = ud;
	struct tpu_qr q = { 0 };
	struct control c;
	struct err e;
	int rc;

	if (watch_run(w, &c)) {
		++*errors;
		return -1;
	}
	if ((rc = job_run_over(w->start_ms, &c)) >= 0)
		return rc;
	err_init(&e);
	rc = tpu_qr_get(w->c, w->spec->id, &q, &e);
	if (rc == CLOUD_ENOTFOUND) {
		tpu_qr_release(&q);
		if (!strcmp(c.state, "stopping")) {
			job_say(w->start_ms, "%s is gone and the run is "
				"stopping: done watching", w->spec->id);
			return 0;
		}
		/* Worker 0 deletes it once the run is done. */
		if (!watch_run(w, &c) && !strcmp(c.state, "done")) {
			job_say(w->start_ms, "run: done");
			return 0;
		}
		log_error("queued resource %s is gone while the run is %s; "
			  "run the same slicectl job command again to ask for "
			  "it again", w->spec->id, c.state);
		return 1;
	}
	if (rc) {
		log_warn("reading queued resource %s: %s", w->spec->id, e.msg);
		tpu_qr_release(&q);
		++*errors;
		return -1;
	}
	*errors = 0;
	seen_qr(w, &q);
	if (strcmp(q.state, w->qr_state)) {
		job_say(w->start_ms, "%s: %s%s%s", w->spec->id,
			*q.state ? q.state : "accepted",
			*q.error_message ? ": " : "", q.error_message);
		snprintf(w->qr_state, sizeof(w->qr_state), "%s", q.state);
	}
	rc = -1;
	if (!strcmp(q.state, "SUSPENDED") || !strcmp(q.state, "FAILED")) {
		if (!strcmp(c.state, "stopping")) {
			job_say(w->start_ms, "%s is %s and the run is "
				"stopping: done watching", w->spec->id,
				q.state);
			rc = 0;
		} else {
			rc = recreate(w, &c, why_over(&q));
		}
	} else if (!strcmp(c.state, "stopping") && all_stopped(w)) {
		job_say(w->start_ms, "run: every worker has stopped");
		rc = 0;
	}
	tpu_qr_release(&q);
	return rc;
}

int tpu_watch(struct tpu_client *c, const struct tpu_qr_spec *spec,
	      const struct job_flags *f, const struct prepared_run *run)
{
	struct watch w = { 0 };
	struct err e;
	int status = -1;

	err_init(&e);
	if (store_open(&w.s, run->run_url, &e)) {
		log_error("%s", e.msg);
		return 1;
	}
	w.c = c;
	w.spec = spec;
	/* Its own: job_init allocates nothing, so nothing to release. */
	job_init(&w.budget_of);
	w.budget_of.max_restarts = run->job.max_restarts;
	w.budget_of.max_infra_restarts = run->job.max_infra_restarts;
	w.budget = f->recreate_budget;
	w.start_ms = mono_ms();
	w.unit_ms = job_env_ms("SLICECTL_TPU_POLL_MS", 1000);
	backoff_init(&w.bo, (unsigned)(WATCH_BACKOFF_BASE_UNITS * w.unit_ms),
		     (unsigned)(WATCH_BACKOFF_MAX_UNITS * w.unit_ms),
		     (uint64_t)time(NULL) ^ (uint64_t)mono_us());
	job_say(w.start_ms, "watching %s and %s (recreate budget %u)", spec->id,
	    run->run_url, w.budget);
	status = job_watch_loop(watch_once, &w, WATCH_MAX_ERRORS,
				WATCH_POLL_UNITS * w.unit_ms);
	store_close(w.s);
	return status;
}
