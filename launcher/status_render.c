/*
 * status_render.c: prints a run's view (run_view.h) the way `slicectl
 * status --help` promises: text (a summary, the worker table, the stuck
 * workers' reasons, the target's view) or one JSON object, unknowns null.
 */
#include "launcher/run_view.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

/* ---- text ---- */

static void fmt_age(char *out, size_t cap, long long s)
{
	if (s < 0)
		snprintf(out, cap, "-");
	else if (s < 120)
		snprintf(out, cap, "%llds", s);
	else if (s < 2 * 3600)
		snprintf(out, cap, "%lldm", s / 60);
	else if (s < 2 * 86400)
		snprintf(out, cap, "%lldh", s / 3600);
	else
		snprintf(out, cap, "%lldd", s / 86400);
}

static void fmt_step(char *out, size_t cap, int64_t step)
{
	if (step < 0)
		snprintf(out, cap, "-");
	else
		snprintf(out, cap, "%" PRId64, step);
}

#define N_COLS 9

static const char *const headers[N_COLS] = {
	"WORKER", "STATE", "GEN", "STEP", "COMMITTED", "RESTARTS",
	"HEARTBEAT", "STUCK", "MESSAGE",
};

static void row_cells(const struct row *r, char cells[N_COLS][64],
		      const char **message)
{
	const struct worker_status *st = r->st;
	size_t n = 0;

	snprintf(cells[0], 64, "%u/%u", r->slice, r->worker);
	for (int c = 1; c < N_COLS; c++)
		snprintf(cells[c], 64, "-");
	*message = "";
	if (st) {
		snprintf(cells[1], 64, "%s", st->state);
		snprintf(cells[2], 64, "%" PRId64, st->generation);
		fmt_step(cells[3], 64, st->step);
		fmt_step(cells[4], 64, st->committed_step);
		snprintf(cells[5], 64, "%" PRIu64, st->restarts);
		fmt_age(cells[6], 64, r->age_s);
		*message = st->message;
	}
	for (int k = 0; k < N_RULES; k++) {
		if (!r->flagged[k])
			continue;
		if (n)
			strncat(cells[7], ",", 63 - strlen(cells[7]));
		else
			cells[7][0] = '\0';
		strncat(cells[7], run_view_rules[k], 63 - strlen(cells[7]));
		n++;
	}
}

static void print_table(const struct view *v)
{
	size_t width[N_COLS];
	char cells[N_COLS][64];
	const char *message;

	for (int c = 0; c < N_COLS; c++)
		width[c] = strlen(headers[c]);
	for (size_t i = 0; i < v->nrows; i++) {
		row_cells(&v->rows[i], cells, &message);
		for (int c = 0; c < N_COLS - 1; c++)
			if (strlen(cells[c]) > width[c])
				width[c] = strlen(cells[c]);
	}
	for (int c = 0; c < N_COLS - 1; c++)
		printf("%-*s  ", (int)width[c], headers[c]);
	printf("%s\n", headers[N_COLS - 1]);
	for (size_t i = 0; i < v->nrows; i++) {
		row_cells(&v->rows[i], cells, &message);
		for (int c = 0; c < N_COLS - 2; c++)
			printf("%-*s  ", (int)width[c], cells[c]);
		if (*message)
			printf("%-*s  %s\n", (int)width[N_COLS - 2],
			       cells[N_COLS - 2], message);
		else
			printf("%s\n", cells[N_COLS - 2]);
	}
}

/* The deadline and the queued resource, when known. */
static void print_schedule(const struct view *v)
{
	const struct control_deadline *d = &v->control.deadline;
	const struct watch_state *ws = &v->watch;

	if (v->have_control && d->kind[0])
		printf("deadline:   %s at %s%s: %s\n", d->kind, d->time,
		       d->checkpointed ? " (checkpointed for)" : "", d->about);
	if (!v->have_watch)
		return;
	printf("queued:     %s %s%s%s", ws->queued_resource,
	       *ws->state ? ws->state : "asked for", *ws->capacity ? ", " : "",
	       ws->capacity);
	if (*ws->window_end)
		printf(", window ends %s", ws->window_end);
	printf("; recreated %u of at most %u (slicectl job --watch, %s)\n",
	       ws->recreated, ws->budget, ws->time);
}

/* Left of a budget of max after used, never below 0. */
static int64_t left_of(int64_t max, int64_t used)
{
	return used < max ? max - used : 0;
}

/* Why the current generation began, and what is left of each budget
 * (issue 26: the trainer's, the infrastructure's; an operator's
 * restarts spend none). */
static void print_causes(const struct control *c, const struct job *j)
{
	char what[512], infra[96];

	if (c->cause.cls >= 0) {
		cause_describe(&c->cause, what, sizeof(what));
		printf("cause:      %s, %s\n", cause_class_names[c->cause.cls],
		       what);
	}
	if (j->max_infra_restarts >= 0)
		snprintf(infra, sizeof(infra), "%" PRId64 " of %" PRId64
			 " left", left_of(j->max_infra_restarts,
					 c->restarts.infra),
			 j->max_infra_restarts);
	else
		snprintf(infra, sizeof(infra), "%" PRId64 " used, no limit",
			 c->restarts.infra);
	printf("budgets:    restarts %" PRId64 " of %u left (trainer, hangs, "
	       "preflights); infrastructure %s; operator %" PRId64 " (no "
	       "budget)\n", left_of(j->max_restarts, c->restarts.trainer),
	       j->max_restarts, infra, c->restarts.operator_);
	for (unsigned i = 0; i < c->nquarantined; i++)
		printf("%s %s (worker %s, generation %" PRId64 ": %s)\n",
		       i ? "           " : "quarantined:", c->quarantined[i].host,
		       c->quarantined[i].worker, c->quarantined[i].generation,
		       c->quarantined[i].why);
}

/* The hosts taken out (issue 26): [{host, worker, generation, why}]. */
static json_t *quarantined_json(const struct control *c)
{
	json_t *a = json_array();

	for (unsigned i = 0; a && i < c->nquarantined; i++)
		json_array_append_new(
			a, json_pack("{s:s, s:s, s:I, s:s}", "host",
				     c->quarantined[i].host, "worker",
				     c->quarantined[i].worker, "generation",
				     (json_int_t)c->quarantined[i].generation,
				     "why", c->quarantined[i].why));
	return a;
}

static json_t *budget_json(int64_t max, int64_t used)
{
	return json_pack("{s:I, s:o, s:o}", "used", (json_int_t)used, "max",
			 max >= 0 ? json_integer(max) : json_null(), "left",
			 max >= 0 ? json_integer(left_of(max, used))
				  : json_null());
}

static json_t *budgets_json(const struct control *c, const struct job *j)
{
	return json_pack("{s:o, s:o, s:I}", "restarts",
			 budget_json(j->max_restarts, c->restarts.trainer),
			 "infra_restarts",
			 budget_json(j->max_infra_restarts, c->restarts.infra),
			 "operator_restarts",
			 (json_int_t)c->restarts.operator_);
}

static json_t *cause_json(const struct control *c)
{
	char text[1024];

	if (c->cause.cls < 0 || cause_details(&c->cause, text, sizeof(text)))
		return json_null();
	return json_loads(text, 0, NULL);
}

void status_print_text(const struct view *v)
{
	const struct run_options *ro = v->ro;
	const struct control *c = &v->control;
	const struct job *j = &ro->job;
	char headline[512];

	if (v->have_goodput) {
		goodput_headline(&v->goodput, headline, sizeof(headline));
		printf("%s\n", headline);
	}
	printf("run:        %s (%s)\n", ro->run, ro->url);
	if (v->have_control) {
		printf("state:      %s, generation %" PRId64 "\n", c->state,
		       c->generation);
		printf("reason:     %s\n", *c->reason ? c->reason : "-");
		printf("updated:    %s by %s\n", *c->time ? c->time : "-",
		       *c->updated_by ? c->updated_by : "-");
		print_causes(c, j);
	} else {
		printf("state:      - (no control.json yet: no supervisor has "
		       "started)\n");
	}
	if (v->committed_step >= 0)
		printf("committed:  step %" PRId64 "\n", v->committed_step);
	else
		printf("committed:  none\n");
	if (v->fast_step >= 0)
		printf("fast tiers: step %" PRId64 " (on the hosts alone; "
		       "restored while a host holding each part lives)\n",
		       v->fast_step);
	print_schedule(v);
	printf("workers:    %zu (%u slice%s x %u), %u stuck\n", v->nrows,
	       j->num_slices, j->num_slices == 1 ? "" : "s",
	       j->workers_per_slice, v->stuck);
	printf("\n");
	print_table(v);
	if (v->stragglers) {
		printf("\nstragglers (recent median step time above median + "
		       "%d x MAD of the peers', sustained; see slicectl "
		       "status --help):\n", STRAGGLER_MADS);
		for (size_t i = 0; i < v->nrows; i++)
			if (v->rows[i].straggler.flagged)
				printf("  %u/%u: %s\n", v->rows[i].slice,
				       v->rows[i].worker,
				       v->rows[i].straggler.reason);
	}
	if (!v->stuck)
		return;
	printf("\nstuck (see slicectl status --help for the rules):\n");
	for (size_t i = 0; i < v->nrows; i++) {
		const struct row *r = &v->rows[i];

		for (int k = 0; k < N_RULES; k++)
			if (r->flagged[k])
				printf("  %u/%u %s: %s\n", r->slice, r->worker,
				       run_view_rules[k], r->why[k]);
	}
}

/* ---- json ---- */

static json_t *int_or_null(bool known, int64_t v)
{
	return known ? json_integer((json_int_t)v) : json_null();
}

static json_t *worker_json(const struct row *r)
{
	const struct worker_status *st = r->st;
	json_t *o = json_object(), *why = json_array();

	for (int k = 0; k < N_RULES; k++)
		if (r->flagged[k])
			json_array_append_new(
				why, json_pack("{s:s, s:o}", "rule",
					       run_view_rules[k], "text",
					       run_json_text(r->why[k])));
	json_object_set_new(o, "slice", json_integer(r->slice));
	json_object_set_new(o, "worker", json_integer(r->worker));
	json_object_set_new(o, "state", run_json_text(st ? st->state : NULL));
	json_object_set_new(o, "generation",
			    int_or_null(st, st ? st->generation : 0));
	json_object_set_new(o, "step",
			    int_or_null(st && st->step >= 0,
					st ? st->step : 0));
	json_object_set_new(o, "committed_step",
			    int_or_null(st && st->committed_step >= 0,
					st ? st->committed_step : 0));
	json_object_set_new(o, "restarts",
			    int_or_null(st, st ? (int64_t)st->restarts : 0));
	json_object_set_new(o, "upload_bytes_per_s",
			    int_or_null(st && st->upload_bps,
					st ? (int64_t)st->upload_bps : 0));
	json_object_set_new(o, "heartbeat_age_s",
			    int_or_null(r->age_s >= 0, r->age_s));
	json_object_set_new(o, "time",
			    run_json_text(st && *st->time ? st->time : NULL));
	json_object_set_new(o, "message", run_json_text(st ? st->message
							    : NULL));
	json_object_set_new(o, "boot_id",
			    run_json_text(st && *st->boot_id ? st->boot_id
							     : NULL));
	json_object_set_new(o, "stuck", json_boolean(r->stuck));
	json_object_set_new(o, "stuck_reasons", why);
	json_object_set_new(o, "recent_steps",
			    st && st->recent.n
				    ? json_pack("{s:f, s:i, s:f}", "median_ms",
						st->recent.median_ms, "n",
						(json_int_t)st->recent.n,
						"span_s", st->recent.span_s)
				    : json_null());
	json_object_set_new(o, "straggler",
			    json_boolean(r->straggler.flagged));
	json_object_set_new(o, "straggler_reason",
			    run_json_text(*r->straggler.reason
						  ? r->straggler.reason
						  : NULL));
	return o;
}

static json_t *deadline_json(const struct view *v)
{
	const struct control_deadline *d = &v->control.deadline;

	if (!v->have_control || !d->kind[0])
		return json_null();
	return json_pack("{s:s, s:s, s:o, s:b}", "kind", d->kind, "time",
			 d->time, "about", run_json_text(d->about),
			 "checkpointed", d->checkpointed);
}

static json_t *watch_json(const struct view *v)
{
	const struct watch_state *ws = &v->watch;

	if (!v->have_watch)
		return json_null();
	return json_pack("{s:o, s:o, s:o, s:o, s:i, s:i, s:o}", "name",
			 run_json_text(ws->queued_resource), "state",
			 run_json_text(*ws->state ? ws->state : NULL),
			 "capacity",
			 run_json_text(*ws->capacity ? ws->capacity : NULL),
			 "window_end",
			 run_json_text(*ws->window_end ? ws->window_end : NULL),
			 "recreated", (json_int_t)ws->recreated,
			 "recreate_budget", (json_int_t)ws->budget, "time",
			 run_json_text(ws->time));
}

/* The target's view, in the target's own words (its JSON keys). */
static json_t *target_json(const struct view *v)
{
	const struct target_view *t = &v->tv;
	const struct target_ops *ops = target_of(&v->ro->job);
	const struct target_words *k = ops->words;
	json_t *o = json_object(), *workers = json_array();

	for (size_t i = 0; i < t->n; i++) {
		const struct target_worker *w = &t->workers[i];

		json_array_append_new(
			workers,
			json_pack("{s:s, s:o, s:o, s:o, s:s, s:o}", "name",
				  w->name, "slice",
				  int_or_null(w->slice >= 0, w->slice),
				  "worker",
				  int_or_null(w->worker >= 0, w->worker),
				  k->attempt_key,
				  int_or_null(w->restart_attempt >= 0,
					      w->restart_attempt),
				  k->phase_key, w->phase, "node",
				  run_json_text(*w->node ? w->node : NULL)));
	}
	json_object_set_new(o, "kind", json_string(ops->name));
	json_object_set_new(o, "object", json_string(t->what));
	json_object_set_new(o, k->state_key, json_string(t->state));
	json_object_set_new(o, "message",
			    run_json_text(*t->message ? t->message : NULL));
	json_object_set_new(o, "position",
			    int_or_null(t->position >= 0, t->position));
	json_object_set_new(o, "restarts",
			    int_or_null(t->restarts >= 0, t->restarts));
	json_object_set_new(o, "end", run_json_text(*t->end ? t->end : NULL));
	json_object_set_new(o, k->workers_key, workers);
	return o;
}

void status_print_json(const struct view *v)
{
	const struct control *c = &v->control;
	bool k = v->have_control;
	json_t *o = json_object(), *workers = json_array();

	for (size_t i = 0; i < v->nrows; i++)
		json_array_append_new(workers, worker_json(&v->rows[i]));
	json_object_set_new(o, "goodput", v->have_goodput
						  ? goodput_json(&v->goodput)
						  : json_null());
	json_object_set_new(o, "run", run_json_text(v->ro->run));
	json_object_set_new(o, "url", run_json_text(v->ro->url));
	json_object_set_new(o, "state", run_json_text(k ? c->state : NULL));
	json_object_set_new(o, "generation", int_or_null(k, c->generation));
	json_object_set_new(o, "reason", run_json_text(k ? c->reason : NULL));
	json_object_set_new(o, "updated_by",
			    run_json_text(k ? c->updated_by : NULL));
	json_object_set_new(o, "time",
			    run_json_text(k && *c->time ? c->time : NULL));
	json_object_set_new(o, "committed_step",
			    int_or_null(v->committed_step >= 0,
					v->committed_step));
	json_object_set_new(o, "fast_step",
			    int_or_null(v->fast_step >= 0, v->fast_step));
	json_object_set_new(o, "heartbeat_s",
			    json_integer(v->ro->job.heartbeat_s));
	json_object_set_new(o, "cause", k ? cause_json(c) : json_null());
	json_object_set_new(o, "budgets", k ? budgets_json(c, &v->ro->job)
					    : json_null());
	json_object_set_new(o, "quarantined", k ? quarantined_json(c)
						: json_array());
	json_object_set_new(o, "deadline", deadline_json(v));
	json_object_set_new(o, "queued_resource", watch_json(v));
	json_object_set_new(o, "stuck", json_integer(v->stuck));
	json_object_set_new(o, "stragglers", json_integer(v->stragglers));
	json_object_set_new(o, "workers", workers);
	if (v->have_target)
		json_object_set_new(o, "target", target_json(v));
	run_print_json(o);
}

void status_print_target(const struct view *v)
{
	const struct target_view *t = &v->tv;
	const struct target_words *k = target_of(&v->ro->job)->words;

	printf("\n%s: %s %s%s%s", t->what, k->scheduler,
	       t->state, *t->message ? ": " : "", t->message);
	if (t->position >= 0)
		printf(", %ld ahead of it in its queue", t->position);
	if (t->restarts >= 0)
		printf("; restarts %ld", t->restarts);
	if (*t->end)
		printf("; %s", t->end);
	printf("\n");
	if (!t->n)
		return;
	printf("%-40s %5s %6s %7s %-11s %s\n", k->worker_heading, "SLICE",
	       "WORKER", k->attempt_heading, k->phase_heading, "NODE");
	for (size_t i = 0; i < t->n; i++) {
		const struct target_worker *w = &t->workers[i];

		printf("%-40s %5d %6d %7ld %-11s %s\n", w->name, w->slice,
		       w->worker, w->restart_attempt, w->phase,
		       *w->node ? w->node : "-");
	}
}
