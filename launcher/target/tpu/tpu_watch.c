/*
 * tpu_watch.c: `slicectl job --watch` on Cloud TPU (tpu.h): stays, says
 * the queued resource's and the run's state changes, and when a
 * preemption leaves the queued resource SUSPENDED (or it FAILED) bumps the
 * run's generation, deletes it and asks for it again, within the recreate
 * budget and with backoff (tpu_recreate.c); also between flex-start
 * windows, and when control.json quarantines a host (tpu_quarantine.c). It acts only while it holds the run's watch lease
 * (watch_lease.h). What it saw goes to RUN/watch.json for slicectl
 * status.
 */
#include "launcher/job.h"
#include "launcher/launcher.h"
#include "launcher/target/target.h"
#include "launcher/target/tpu/tpu.h"
#include "launcher/watch_lease.h"
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


/* control.json, a change said (job_follow_control). */
static int watch_run(struct tpu_watch *w, struct control *c)
{
	return job_follow_control(w->s, w->start_ms, w->run_state,
				  sizeof(w->run_state), &w->generation, c);
}

/* Whether every worker of a stopping run has left. */
static bool all_stopped(struct tpu_watch *w)
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

void tpu_watch_catch_up(struct tpu_watch *w)
{
	struct watch_state ws;
	struct err e;

	err_init(&e);
	if (watch_state_get(w->s, &ws, &e) || strcmp(ws.queued_resource, w->id))
		return;
	if (ws.recreated > w->recreated)
		w->recreated = ws.recreated;
	if (ws.quarantines_acted > w->quarantines_acted)
		w->quarantines_acted = ws.quarantines_acted;
}

/* A bucket that refuses watch.json costs the watch nothing. A watcher
 * that just took the lease over writes no counts lower than its
 * predecessor's. */
void tpu_watch_publish(struct tpu_watch *w, const struct tpu_qr *q)
{
	struct watch_state ws = { .budget = w->budget };
	struct err e;

	tpu_watch_catch_up(w);
	ws.recreated = w->recreated;
	ws.quarantines_acted = w->quarantines_acted;
	snprintf(ws.queued_resource, sizeof(ws.queued_resource), "%s",
		 w->id);
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
static void seen_qr(struct tpu_watch *w, const struct tpu_qr *q)
{
	if (!strcmp(q->state, w->qr_state) &&
	    !strcmp(q->termination_time, w->window_end))
		return;
	if (*q->termination_time && strcmp(q->termination_time, w->window_end))
		job_say(w->start_ms, "%s: its %s window ends at %s",
			w->id, q->capacity, q->termination_time);
	snprintf(w->window_end, sizeof(w->window_end), "%s",
		 q->termination_time);
	tpu_watch_publish(w, q);
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

/* One look at the run and the queued resource. Returns -1 to go on, or
 * an exit status. */
static int watch_once(void *ud, unsigned *errors)
{
	struct tpu_watch *w = ud;
	struct tpu_qr q = { 0 };
	struct control c;
	char why[160];
	struct err e;
	int rc;

	if (watch_run(w, &c)) {
		++*errors;
		return -1;
	}
	if ((rc = job_run_over(w->start_ms, &c)) >= 0)
		return rc;
	err_init(&e);
	rc = tpu_qr_get(w->c, w->id, &q, &e);
	if (rc == CLOUD_ENOTFOUND) {
		tpu_qr_release(&q);
		if (!strcmp(c.state, "stopping")) {
			job_say(w->start_ms, "%s is gone and the run is "
				"stopping: done watching", w->id);
			return 0;
		}
		if (tpu_recreate_pending(w))
			return tpu_recreate(w, &c, NULL, "gone");
		/* Worker 0 deletes it once the run is done. */
		if (!watch_run(w, &c) && !strcmp(c.state, "done")) {
			job_say(w->start_ms, "run: done");
			return 0;
		}
		log_error("queued resource %s is gone while the run is %s; "
			  "run the same slicectl job command again to ask for "
			  "it again", w->id, c.state);
		return 1;
	}
	if (rc) {
		log_warn("reading queued resource %s: %s", w->id, e.msg);
		tpu_qr_release(&q);
		++*errors;
		return -1;
	}
	*errors = 0;
	seen_qr(w, &q);
	if (strcmp(q.state, w->qr_state)) {
		job_say(w->start_ms, "%s: %s%s%s", w->id,
			*q.state ? q.state : "accepted",
			*q.error_message ? ": " : "", q.error_message);
		snprintf(w->qr_state, sizeof(w->qr_state), "%s", q.state);
	}
	rc = -1;
	if (!strcmp(q.state, "SUSPENDED") || !strcmp(q.state, "FAILED")) {
		if (!strcmp(c.state, "stopping")) {
			job_say(w->start_ms, "%s is %s and the run is "
				"stopping: done watching", w->id,
				q.state);
			rc = 0;
		} else {
			rc = tpu_recreate(w, &c, &q, why_over(&q));
		}
	} else if (!strcmp(q.state, "DELETING") && tpu_recreate_pending(w)) {
		job_say(w->start_ms, "%s: being deleted by the recreation under "
			"way: following it", w->id);
	} else if (tpu_recreate_landed(w, &c, &q)) {
		job_say(w->start_ms, "%s: the recreation under way had asked "
			"for it again already: following it", w->id);
	} else if (tpu_recreate_begun_from(w, &q)) {
		rc = tpu_recreate(w, &c, &q, "");
	} else if (tpu_quarantine_due(w, &c, &q, why, sizeof(why))) {
		rc = tpu_recreate(w, &c, &q, why);
	} else if (!strcmp(c.state, "stopping") && all_stopped(w)) {
		job_say(w->start_ms, "run: every worker has stopped");
		rc = 0;
	}
	tpu_qr_release(&q);
	return rc;
}

int tpu_watch(struct tpu_client *c, const char *id,
	      const struct tpu_qr_spec *spec, const char *run_url,
	      const struct job *j, const struct watch_flags *f)
{
	struct tpu_watch w = { 0 };
	struct err e;
	int status = -1;

	err_init(&e);
	w.start_ms = mono_ms();
	if (store_open(&w.s, run_url, &e) ||
	    watch_lease_open(run_url, f->lease_ms, w.start_ms, &w.lease, &e)) {
		log_error("%s", e.msg);
		store_close(w.s);
		return 1;
	}
	w.c = c;
	w.id = id;
	w.spec = spec;
	/* Its own: job_init allocates nothing, so nothing to release. */
	job_init(&w.budget_of);
	w.budget_of.max_restarts = j->max_restarts;
	w.budget_of.max_infra_restarts = j->max_infra_restarts;
	w.budget = f->recreate_budget;
	w.unit_ms = job_env_ms("SLICECTL_TPU_POLL_MS", 1000);
	backoff_init(&w.bo, (unsigned)(WATCH_BACKOFF_BASE_UNITS * w.unit_ms),
		     (unsigned)(WATCH_BACKOFF_MAX_UNITS * w.unit_ms),
		     (uint64_t)time(NULL) ^ (uint64_t)mono_us());
	job_say(w.start_ms, "watching %s and %s (recreate budget %u)", id,
		run_url, w.budget);
	status = job_watch_loop(watch_once, &w, WATCH_MAX_ERRORS,
				WATCH_POLL_UNITS * w.unit_ms, w.lease);
	watch_lease_close(w.lease);
	store_close(w.s);
	return status;
}
