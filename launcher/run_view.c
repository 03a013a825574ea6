/*
 * run_view.c: builds the view of run_view.h: reads control.json, the
 * checkpoints, the heartbeats and watch.json, and judges each worker by
 * the rules `slicectl status --help` promises (stale, silent, behind,
 * lagging), only while the run is running, and by their recent step
 * times against each other's (stragglers).
 */
#include "launcher/run_view.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const run_view_rules[N_RULES] = { "stale", "silent", "behind",
					  "lagging" };

long long run_view_age(const char *t, time_t now)
{
	time_t at = rfc3339_parse(t);

	if (at == (time_t)-1)
		return -1;
	return now > at ? (long long)(now - at) : 0;
}

static void flag(struct row *r, int rule, const char *fmt, ...)
	ATTR_PRINTF(3, 4);

static void flag(struct row *r, int rule, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(r->why[rule], sizeof(r->why[rule]), fmt, ap);
	va_end(ap);
	r->flagged[rule] = true;
	r->stuck = true;
}

static bool has_part(const struct ckpt_step *st, unsigned slice,
		     unsigned worker)
{
	char want[96];

	run_worker_name(slice, worker, want, sizeof(want));
	strncat(want, ".tar.zst", sizeof(want) - strlen(want) - 1);
	for (size_t i = 0; i < st->nparts; i++)
		if (st->parts[i].name && !strcmp(st->parts[i].name, want))
			return true;
	return false;
}

static void judge(struct view *v, struct row *r)
{
	const struct worker_status *st = r->st;
	const struct control *c = &v->control;
	long long w = v->window_s;
	bool settled = v->control_age_s > w; /* control.json had time */
	/* Workers between two flex-start windows have no VM to beat on. */
	bool resting = st && (!strcmp(st->state, "finished") ||
			      !strcmp(st->state, "waiting"));

	if (!v->have_control || strcmp(c->state, "running"))
		return;
	if (st && !resting && r->age_s > w)
		flag(r, RULE_STALE,
		     "no heartbeat for %llds (the window is 3 x heartbeat_s "
		     "%u + 10 = %llds)", r->age_s, v->ro->job.heartbeat_s, w);
	if (!st && settled)
		flag(r, RULE_SILENT,
		     "no heartbeat yet, %llds after control.json last changed",
		     v->control_age_s);
	if (st && st->generation < c->generation && settled)
		flag(r, RULE_BEHIND,
		     "at generation %" PRId64 ", the run at %" PRId64
		     " for %llds", st->generation, c->generation,
		     v->control_age_s);
	if (v->pending.st && v->pending.quiet_s > w &&
	    !resting &&
	    !has_part(v->pending.st, r->slice, r->worker) &&
	    (!st || st->step < (int64_t)v->pending.st->step)) {
		char at[40] = "has written no step";

		if (st && st->step >= 0)
			snprintf(at, sizeof(at), "is at step %" PRId64,
				 st->step);
		flag(r, RULE_LAGGING,
		     "others saved step %" PRIu64 " (%zu part%s, the last "
		     "%llds ago); its trainer %s", v->pending.st->step,
		     v->pending.st->nparts,
		     v->pending.st->nparts == 1 ? "" : "s", v->pending.quiet_s,
		     at);
	}
	if (r->stuck)
		v->stuck++;
}

int run_view_checkpoints(struct view *v, struct ckpt_list *l, time_t now,
		     struct err *e)
{
	int rc = ckpt_list(v->ro->store, l, e);

	v->committed_step = v->fast_step = -1;
	if (rc)
		return rc;
	for (size_t i = l->n; i-- > 0;) {
		const struct ckpt_step *st = &l->v[i];

		/* Committed too, on the hosts: no save in progress. */
		if (st->fast) {
			if (v->fast_step < 0 && st->step <= INT64_MAX)
				v->fast_step = (int64_t)st->step;
			continue;
		}
		if (st->committed && !st->corrupt && st->step <= INT64_MAX) {
			v->committed_step = (int64_t)st->step;
			break;
		}
		/* Steps newer than the newest committed one, newest first:
		 * the first is the one the workers are saving now. */
		if (!st->committed && !v->pending.st) {
			v->pending.st = st;
			v->pending.quiet_s = run_view_age(st->time, now);
		}
	}
	return 0;
}

/* The workers running at the run's generation with a fresh heartbeat,
 * judged by their recent step times against each other's; -1 out of
 * memory. */
static int stragglers(struct row *rows, size_t n, const struct control *c,
		      unsigned *flagged)
{
	const struct worker_status **st = calloc(n ? n : 1, sizeof(*st));
	struct straggler_verdict *out = calloc(n ? n : 1, sizeof(*out));
	int r = !st || !out ? -1 : 0;

	*flagged = 0;
	/* A stale heartbeat's figure is old news, not a peer. */
	for (size_t i = 0; i < n && !r; i++)
		st[i] = rows[i].flagged[RULE_STALE] ? NULL : rows[i].st;
	if (!r)
		r = straggler_judge_workers(st, n, c ? c->generation : 0, out);
	for (size_t i = 0; i < n && !r; i++) {
		rows[i].straggler = out[i];
		*flagged += out[i].flagged;
	}
	free(st);
	free(out);
	return r;
}

/* Puts each heartbeat in its worker's row; others (a worker outside the
 * job's shape) are left out. */
int run_view_rows(struct view *v, const struct worker_status *sv, size_t n,
	       time_t now)
{
	const struct job *j = &v->ro->job;

	v->nrows = (size_t)j->num_slices * j->workers_per_slice;
	v->rows = calloc(v->nrows ? v->nrows : 1, sizeof(*v->rows));
	if (!v->rows)
		return -1;
	for (size_t i = 0; i < v->nrows; i++) {
		v->rows[i].slice = (unsigned)(i / j->workers_per_slice);
		v->rows[i].worker = (unsigned)(i % j->workers_per_slice);
		v->rows[i].age_s = -1;
	}
	for (size_t i = 0; i < n; i++) {
		struct row *r;

		if (sv[i].slice >= j->num_slices ||
		    sv[i].worker >= j->workers_per_slice) {
			log_debug("ignoring the heartbeat of slice %u worker "
				  "%u: not a worker of this run", sv[i].slice,
				  sv[i].worker);
			continue;
		}
		r = &v->rows[(size_t)sv[i].slice * j->workers_per_slice +
			     sv[i].worker];
		r->st = &sv[i];
		r->age_s = run_view_age(sv[i].time, now);
	}
	for (size_t i = 0; i < v->nrows; i++)
		judge(v, &v->rows[i]);
	return stragglers(v->rows, v->nrows,
			  v->have_control ? &v->control : NULL, &v->stragglers);
}

/* watch.json is a convenience: a run nobody watches has none, and one
 * that cannot be read is said and left out. */
void run_view_watch(struct view *v)
{
	struct err e;
	int rc;

	err_init(&e);
	rc = watch_state_get(v->ro->store, &v->watch, &e);
	v->have_watch = !rc;
	if (rc && rc != CLOUD_ENOTFOUND)
		log_warn("%s", e.msg);
}
