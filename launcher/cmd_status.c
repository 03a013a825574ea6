/*
 * cmd_status.c: `slicectl status RUN`: a run's state from its bucket
 * alone: control.json, the newest committed checkpoint, and one row per
 * worker from its heartbeat, with the workers that look stuck flagged.
 */
#include "checkpoint/checkpoint.h"
#include "launcher/launcher.h"
#include "launcher/run_options.h"
#include "launcher/watch_state.h"
#include "launcher/target/target.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char usage[] =
	"usage: slicectl status RUN [--bucket URL] [--format text|json]\n"
	"\n"
	"Shows the run's state from control.json (state, generation, reason,\n"
	"who changed it last and when), the newest committed checkpoint step,\n"
	"and one row per worker of job.json's num_slices x workers_per_slice\n"
	"from its heartbeat (status/slice-S-worker-W.json): state, generation,\n"
	"step (the one its trainer last reported in SLICE_STEP_FILE, else\n"
	"its newest checkpoint), committed step, restarts, heartbeat age,\n"
	"message. A worker that has sent no heartbeat yet shows as \"-\".\n"
	"It also shows control.json's deadline (a flex-start window's end or a\n"
	"node's maintenance window, which the supervisors checkpoint ahead of)\n"
	"and, while slicectl job --watch looks after the run, the queued\n"
	"resource as it last saw it: its state (between two windows, the next\n"
	"one's place in the queue), its window's end, the recreations so far.\n"
	"\n"
	"While the run is running, a worker is flagged as stuck when\n"
	"  stale    its heartbeat is older than 3 x heartbeat_s + 10 s (the\n"
	"           window; a worker that finished, or waits for the next\n"
	"           flex-start window, is never stale);\n"
	"  silent   it has sent no heartbeat at all, and control.json last\n"
	"           changed more than the window ago;\n"
	"  behind   its generation is older than control.json's, which changed\n"
	"           more than the window ago (time enough to follow);\n"
	"  lagging  the newest checkpoint step that is not committed yet has\n"
	"           had no new part for more than the window, has no part from\n"
	"           this worker, and this worker's trainer has not reached\n"
	"           that step: the others moved on, it did not.\n"
	"\n"
	"--format json prints {\"run\", \"url\", \"state\", \"generation\",\n"
	"\"reason\", \"updated_by\", \"time\", \"committed_step\", \"heartbeat_s\",\n"
	"\"deadline\": {\"kind\", \"time\", \"about\", \"checkpointed\"},\n"
	"\"queued_resource\": {\"name\", \"state\", \"capacity\", \"window_end\",\n"
	"\"recreated\", \"recreate_budget\", \"time\"},\n"
	"\"stuck\" (how many), \"workers\": [{\"slice\", \"worker\", \"state\",\n"
	"\"generation\", \"step\", \"committed_step\", \"restarts\",\n"
	"\"upload_bytes_per_s\" (its newest checkpoint upload: whether a step\n"
	"fits in a preemption notice), \"heartbeat_age_s\", \"time\",\n"
	"\"message\", \"boot_id\", \"stuck\",\n"
	"\"stuck_reasons\": [{\"rule\", \"text\"}]}]}; what is not known (no\n"
	"control.json or heartbeat yet, no step) is null.\n"
	"\n"
	"A run on GKE (slicectl job --target gke) also shows its JobSet:\n"
	"Kueue's state (pending, with the workloads ahead of it in its\n"
	"LocalQueue when Kueue's visibility API tells: \"position\"; quota\n"
	"reserved, admitted, evicted, finished), JobSet's restarts, and\n"
	"each pod's slice, worker, restart attempt, phase and node; in JSON\n"
	"as \"target\": {\"kind\", \"object\", \"kueue\", \"message\",\n"
	"\"position\", \"restarts\", \"end\", \"pods\": [{\"name\", \"slice\",\n"
	"\"worker\", \"restart_attempt\", \"phase\", \"node\"}]}.\n"
	"A run on Slurm (--target slurm) shows its batch job the same way:\n"
	"Slurm's JobState and reason, its restart count, and one row per node\n"
	"with its slice, worker, requeue count and the job's state; in JSON\n"
	"\"job_state\" stands for \"kueue\", \"nodes\" for \"pods\", and each\n"
	"node has \"requeue\" and \"state\" for \"restart_attempt\" and\n"
	"\"phase\".\n"
	"\n" RUN_USAGE_BUCKET "\n"
	"Exit status: 0 shown (stuck workers or not); 1 the store failed; 2 bad\n"
	"arguments; 4 no run RUN under BUCKET (no job.json).";

enum { RULE_STALE, RULE_SILENT, RULE_BEHIND, RULE_LAGGING, N_RULES };

static const char *const rule_names[N_RULES] = { "stale", "silent", "behind",
						 "lagging" };

/* One row of the table. */
struct row {
	unsigned slice, worker;
	const struct worker_status *st; /* NULL: no heartbeat yet */
	long long age_s;                /* -1: unknown */
	bool flagged[N_RULES];
	char why[N_RULES][200];
	bool stuck;
};

/* The newest step not committed yet, newer than every committed one, and
 * how long since its newest part arrived. */
struct pending_step {
	const struct ckpt_step *st;     /* NULL: none */
	long long quiet_s;              /* -1: unknown */
};

struct view {
	struct run_options *ro;
	/* The target's own view (GKE: Kueue and the pods; Slurm: the batch
	 * job and its nodes). */
	bool have_target;
	struct target_view tv;
	struct control control;
	bool have_control;
	long long control_age_s;        /* -1: unknown */
	int64_t committed_step;         /* -1: none */
	struct pending_step pending;
	struct row *rows;
	size_t nrows;
	unsigned stuck;
	long long window_s;
	struct watch_state watch;       /* slicectl job --watch's view */
	bool have_watch;
};

static long long age_of(const char *t, time_t now)
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

static int load_checkpoints(struct view *v, struct ckpt_list *l,
			    time_t now, struct err *e)
{
	int rc = ckpt_list(v->ro->store, l, e);

	v->committed_step = -1;
	if (rc)
		return rc;
	for (size_t i = l->n; i-- > 0;) {
		const struct ckpt_step *st = &l->v[i];

		if (st->committed && !st->corrupt && st->step <= INT64_MAX) {
			v->committed_step = (int64_t)st->step;
			break;
		}
		/* Steps newer than the newest committed one, newest first:
		 * the first is the one the workers are saving now. */
		if (!st->committed && !v->pending.st) {
			v->pending.st = st;
			v->pending.quiet_s = age_of(st->time, now);
		}
	}
	return 0;
}

/* Puts each heartbeat in its worker's row; others (a worker outside the
 * job's shape) are left out. */
static int build_rows(struct view *v, const struct worker_status *sv,
		      size_t n, time_t now)
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
		r->age_s = age_of(sv[i].time, now);
	}
	for (size_t i = 0; i < v->nrows; i++)
		judge(v, &v->rows[i]);
	return 0;
}

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
		strncat(cells[7], rule_names[k], 63 - strlen(cells[7]));
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

static void print_text(const struct view *v)
{
	const struct run_options *ro = v->ro;
	const struct control *c = &v->control;
	const struct job *j = &ro->job;

	printf("run:        %s (%s)\n", ro->run, ro->url);
	if (v->have_control) {
		printf("state:      %s, generation %" PRId64 "\n", c->state,
		       c->generation);
		printf("reason:     %s\n", *c->reason ? c->reason : "-");
		printf("updated:    %s by %s\n", *c->time ? c->time : "-",
		       *c->updated_by ? c->updated_by : "-");
	} else {
		printf("state:      - (no control.json yet: no supervisor has "
		       "started)\n");
	}
	if (v->committed_step >= 0)
		printf("committed:  step %" PRId64 "\n", v->committed_step);
	else
		printf("committed:  none\n");
	print_schedule(v);
	printf("workers:    %zu (%u slice%s x %u), %u stuck\n", v->nrows,
	       j->num_slices, j->num_slices == 1 ? "" : "s",
	       j->workers_per_slice, v->stuck);
	printf("\n");
	print_table(v);
	if (!v->stuck)
		return;
	printf("\nstuck (see slicectl status --help for the rules):\n");
	for (size_t i = 0; i < v->nrows; i++) {
		const struct row *r = &v->rows[i];

		for (int k = 0; k < N_RULES; k++)
			if (r->flagged[k])
				printf("  %u/%u %s: %s\n", r->slice, r->worker,
				       rule_names[k], r->why[k]);
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
			json_array_append_new(why,
				json_pack("{s:s, s:o}", "rule", rule_names[k],
					  "text", run_json_text(r->why[k])));
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
				  "worker", int_or_null(w->worker >= 0, w->worker),
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

static void print_json(const struct view *v)
{
	const struct control *c = &v->control;
	bool k = v->have_control;
	json_t *o = json_object(), *workers = json_array();

	for (size_t i = 0; i < v->nrows; i++)
		json_array_append_new(workers, worker_json(&v->rows[i]));
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
	json_object_set_new(o, "heartbeat_s",
			    json_integer(v->ro->job.heartbeat_s));
	json_object_set_new(o, "deadline", deadline_json(v));
	json_object_set_new(o, "queued_resource", watch_json(v));
	json_object_set_new(o, "stuck", json_integer(v->stuck));
	json_object_set_new(o, "workers", workers);
	if (v->have_target)
		json_object_set_new(o, "target", target_json(v));
	run_print_json(o);
}

/* watch.json is a convenience: a run nobody watches has none, and one
 * that cannot be read is said and left out. */
static void load_watch(struct view *v)
{
	struct err e;
	int rc;

	err_init(&e);
	rc = watch_state_get(v->ro->store, &v->watch, &e);
	v->have_watch = !rc;
	if (rc && rc != CLOUD_ENOTFOUND)
		log_warn("%s", e.msg);
}

static void print_target(const struct view *v)
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

int cmd_status(int argc, char **argv)
{
	struct run_options ro = { 0 };
	struct opt opts[RUN_OPTIONS_COUNT + 1] = { 0 };
	const struct target_ops *target;
	struct worker_status *sv = NULL;
	struct ckpt_list cl = { 0 };
	struct view v;
	size_t n = 0;
	time_t now;
	struct err e;
	int rc, status;

	memset(&v, 0, sizeof(v));
	run_options_table(&ro, opts);
	status = run_command_start(opts, argc, argv, usage, &ro);
	if (status >= 0)
		goto out;
	status = 0;
	target = target_of(&ro.job);
	v.ro = &ro;
	v.window_s = 3LL * status_period_ms(ro.job.heartbeat_s,
					     ro.job.num_slices *
						     ro.job.workers_per_slice) /
			     1000 +
		     10;
	now = time(NULL);
	rc = run_control_peek(&ro, &v.control, &v.have_control, &e);
	v.control_age_s = v.have_control ? age_of(v.control.time, now) : -1;
	if (!rc)
		rc = load_checkpoints(&v, &cl, now, &e);
	if (!rc)
		rc = status_list(ro.store, &sv, &n, &e);
	if (!rc)
		load_watch(&v);
	if (rc) {
		status = run_exit_status(rc, &e);
		goto out;
	}
	if (build_rows(&v, sv, n, now)) {
		log_error("out of memory");
		status = 1;
		goto out;
	}
	if (target->status) {
		/* The bucket's view stands on its own; the cluster's is
		 * added when it answers. */
		v.tv.position = v.tv.restarts = -1;
		v.have_target = !target->status(&ro.job, &v.tv, &e);
		if (!v.have_target)
			log_warn("%s: %s", v.tv.what, e.msg);
	}
	if (ro.format == 1) {
		print_json(&v);
	} else {
		print_text(&v);
		if (v.have_target)
			print_target(&v);
	}
out:
	target_view_release(&v.tv);
	free(v.rows);
	free(sv);
	ckpt_list_release(&cl);
	run_options_release(&ro);
	return status;
}
