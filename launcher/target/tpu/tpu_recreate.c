/*
 * tpu_recreate.c: a watcher's recreation of a run's queued resource (see
 * tpu.h): the run's generation bumped, the queued resource deleted and
 * asked for again, within the recreate budget. Each step is taken only
 * right after the watch lease was renewed, and the whole is written into
 * the lease record before the first (with the create body), so that a
 * watcher taking over after this one died finishes it: a second bump from
 * the same generation collapses into the first, a delete of what is gone
 * is done, and a queued resource that exists again is followed.
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

bool tpu_recreate_pending(struct tpu_watch *w)
{
	struct lease_note n;
	bool pending;

	watch_lease_note(w->lease, &n);
	pending = !strcmp(n.about, w->id);
	lease_note_release(&n);
	return pending;
}

/* The run's history (run/run.h) keeps each queued resource asked for
 * again, or flex-start window queued, and why. */
static void note_recreated(struct tpu_watch *w, int64_t generation,
			   const char *why)
{
	json_t *d = json_pack("{s:s, s:i, s:i}", "queued_resource", w->id,
			      "recreation", (int)w->recreated, "budget",
			      (int)w->budget);
	char *details = d ? json_dumps(d, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
	struct err e;

	if (event_record_as(w->s, "slicectl", "recreated", generation, why,
			    details, &e))
		log_warn("event not recorded: %s", e.msg);
	free(details);
	json_decref(d);
}

/* A recreation done: counted with the quarantines it answered, the lease
 * record's note cleared, kept for status and in the history. */
static void done(struct tpu_watch *w, const struct control *seen,
		 const struct lease_note *n)
{
	const struct lease_note none = { .about = "" };
	unsigned answered = tpu_quarantines_answered(seen, n->from_generation);
	struct err e;

	/* A watcher finishing another's recreation counts on from theirs. */
	tpu_watch_catch_up(w);
	w->recreated++;
	if (answered > w->quarantines_acted)
		w->quarantines_acted = answered;
	w->qr_state[0] = '\0';
	w->window_end[0] = '\0';
	if (watch_lease_act(w->lease, &none, &e))
		log_warn("clearing the recreation from the lease: %s", e.msg);
	tpu_watch_publish(w, NULL);
	note_recreated(w, n->from_generation + 1, n->why);
}

/* Whether q is the queued resource n's recreation replaces. */
static bool replaced_by(const struct lease_note *n, const struct tpu_qr *q)
{
	return *n->replaces && !strcmp(q->create_time, n->replaces);
}

bool tpu_recreate_landed(struct tpu_watch *w, const struct control *seen,
			 const struct tpu_qr *q)
{
	static const char *const old[] = { "SUSPENDED", "SUSPENDING", "FAILED",
					   "DELETING" };
	struct lease_note n;
	bool landed;

	for (size_t i = 0; i < sizeof(old) / sizeof(*old); i++)
		if (!strcmp(q->state, old[i]))
			return false;
	watch_lease_note(w->lease, &n);
	landed = !strcmp(n.about, w->id) && !replaced_by(&n, q);
	if (landed)
		done(w, seen, &n);
	lease_note_release(&n);
	return landed;
}

bool tpu_recreate_begun_from(struct tpu_watch *w, const struct tpu_qr *q)
{
	struct lease_note n;
	bool begun;

	watch_lease_note(w->lease, &n);
	begun = !strcmp(n.about, w->id) && replaced_by(&n, q);
	lease_note_release(&n);
	return begun;
}

/* The create body: what slicectl job asked for, else the resource as the
 * API describes it, less what only the API writes. */
static int body_of(struct tpu_watch *w, const struct tpu_qr *q, char **out,
		   struct err *e)
{
	static const char *const output_only[] = { "name", "state",
						   "createTime" };
	json_t *o;

	if (w->spec)
		return tpu_qr_body(w->spec, tpu_parent(w->c), out, e);
	o = q && q->json ? json_loads(q->json, 0, NULL) : NULL;
	if (!json_is_object(o)) {
		json_decref(o);
		return err_set(e, CLOUD_ECORRUPT, "queued resource %s: the API "
			       "described it in no way it can be asked for "
			       "again", w->id);
	}
	for (size_t i = 0; i < sizeof(output_only) / sizeof(*output_only); i++)
		json_object_del(o, output_only[i]);
	json_object_del(json_object_get(o, "runDuration"), "terminationTime");
	*out = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	return *out ? 0 : err_set(e, COMMON_ENOMEM, "out of memory");
}

/* Starts a recreation: the budget checked, the note (with the create
 * body) written into the lease record. 0, 1 (an exit status) or -1: the
 * lease is lost. */
static int begin(struct tpu_watch *w, const struct control *seen,
		 const struct tpu_qr *q, const char *why, struct lease_note *n)
{
	struct err e;

	tpu_watch_catch_up(w);
	if (w->recreated >= w->budget) {
		log_error("%s: %s, and the recreate budget (%u) is spent: "
			  "giving up. Delete it with slicectl delete %s, or "
			  "run slicectl watch %s again with a larger "
			  "--recreate-budget", w->id, why, w->budget, w->id,
			  w->id);
		return 1;
	}
	err_init(&e);
	snprintf(n->about, sizeof(n->about), "%s", w->id);
	snprintf(n->why, sizeof(n->why), "%s", why);
	snprintf(n->replaces, sizeof(n->replaces), "%s",
		 q ? q->create_time : "");
	n->from_generation = seen->generation;
	if (body_of(w, q, &n->body, &e)) {
		log_error("%s", e.msg);
		return 1;
	}
	if (watch_lease_act(w->lease, n, &e))
		return -1;
	return 0;
}

/* The lease is lost mid-recreation: the next holder finishes it. */
static int lost(struct tpu_watch *w, const char *step, const struct err *e)
{
	job_say(w->start_ms, "%s: not %s: %s", w->id, step, e->msg);
	return -1;
}

static int bump(struct tpu_watch *w, const struct control *seen,
		const struct lease_note *n)
{
	struct control from = *seen, after;
	struct gen_cause cause;
	char reason[128];
	struct err e;

	if (watch_lease_act(w->lease, NULL, &e))
		return lost(w, "bumping the run's generation", &e);
	/* From the generation the recreation began at: a bump made before
	 * a takeover is not made twice. */
	from.generation = n->from_generation;
	snprintf(reason, sizeof(reason),
		 "queued resource recreated after %.90s", n->why);
	gen_cause_init(&cause, CAUSE_INFRA, "recreated", "slicectl");
	cause_set_tail(&cause, n->why);
	if (control_bump_cause(w->s, NULL, &from, &w->budget_of, &cause,
			       reason, "slicectl", -1, &after, &e)) {
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
	/* Done or stopping meanwhile: the next look ends the watch. */
	return strcmp(after.state, "running") ? -1 : 0;
}

static int delete_then_wait(struct tpu_watch *w, const char *why)
{
	unsigned wait_ms = backoff_next_ms(&w->bo);
	struct err e;

	if (watch_lease_act(w->lease, NULL, &e))
		return lost(w, "deleting it", &e);
	job_say(w->start_ms, "%s: %s; deleting it, then asking again in %.1f "
		"s (recreation %u of at most %u)", w->id, why, wait_ms / 1000.0,
		w->recreated + 1, w->budget);
	if (tpu_qr_delete(w->c, w->id, true, true, 0, tpu_print_progress, NULL,
			  &e) &&
	    e.code != CLOUD_ENOTFOUND) {
		log_error("deleting %s: %s", w->id, e.msg);
		return 1;
	}
	proc_sleep_ms(wait_ms, true);
	return 0;
}

static int create(struct tpu_watch *w, const struct lease_note *n)
{
	struct err e;
	int rc;

	if (watch_lease_act(w->lease, NULL, &e))
		return lost(w, "asking for it again", &e);
	rc = tpu_qr_post(w->c, w->id, n->body, &e);
	if (rc == CLOUD_EEXISTS) {
		job_say(w->start_ms, "%s exists already: following it", w->id);
	} else if (rc) {
		log_error("creating %s again: %s", w->id, e.msg);
		return 1;
	}
	job_say(w->start_ms, "%s: asked for again", w->id);
	return 0;
}

int tpu_recreate(struct tpu_watch *w, const struct control *seen,
		 const struct tpu_qr *q, const char *why)
{
	struct lease_note n;
	int rc = 0;

	watch_lease_note(w->lease, &n);
	if (strcmp(n.about, w->id) || !n.body) {
		lease_note_release(&n);
		rc = begin(w, seen, q, why, &n);
	} else {
		job_say(w->start_ms, "%s: finishing the recreation under way "
			"(%s, from generation %" PRId64 ")", w->id, n.why,
			n.from_generation);
	}
	if (!rc)
		rc = bump(w, seen, &n);
	if (!rc && q)
		rc = delete_then_wait(w, n.why);
	if (!rc)
		rc = create(w, &n);
	if (!rc)
		done(w, seen, &n);
	lease_note_release(&n);
	return rc ? rc : -1;
}
