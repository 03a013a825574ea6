/*
 * goodput.c: goodput and badput from a run's history (run.h).
 *
 * Every instant from the run's creation to its end goes to exactly one
 * category, so the figures add up by construction. Each generation g,
 * from its start S (the first boot, or the bump that made it) to its end
 * E (the next bump, or the run's end), is cut at its group-wide marks:
 * the old trainers stopped (B), the restore done (R), every trainer
 * started (T), the first timed step (F), the failure (X):
 *
 *   [S, B) boot   [B, R) restore   [R, F) boot   [F, X) steps   [X, E) lost
 *
 * The steps' span holds the steps kept (productive), those trained again
 * after the next restore, the slow steps' excess (checkpoint stalls), and
 * the rest (other). The lost span is the hang timeout and failure
 * detection, or a deadline's stop.
 */
#include "run/run.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *const goodput_cat_names[GP_NCATS] = {
	[GP_CAPACITY] = "waiting_for_capacity", [GP_BOOT] = "boot_and_start",
	[GP_RESTORE] = "restore", [GP_RECOMPUTE] = "steps_computed_again",
	[GP_CKPT_STALL] = "checkpoint_stalls",
	[GP_DETECTION] = "failure_detection", [GP_HANG] = "hang_timeout",
	[GP_MAINTENANCE] = "maintenance_and_window_ends", [GP_OTHER] = "other",
};

/* Far more group restarts than any run makes: a history naming more is
 * corrupt, not worth an array that large (about 25 MB here). */
#define GOODPUT_MAX_GENERATION 100000

/* The productive time's index beside the categories. */
#define GP_PRODUCTIVE GP_NCATS

struct gen {
	int64_t bump, bump_idx;  /* the bump that made it; -1 none */
	int64_t stopped;         /* its trainers' latest stop */
	int64_t restored, started; /* the latest restore and start */
	int64_t restore_step;    /* -1 none */
	int64_t last_step;       /* -1 none */
	int64_t first_timed;     /* its first timed step's start, -1 none */
	int64_t failed_at;       /* its training stopped being useful */
	int64_t crash, notice, chaos, hang, gone; /* earliest, -1 none */
	int64_t recreated;       /* the latest, -1 none */
	int64_t kept_to;         /* its steps up to here are kept (lineage) */
	int64_t again;           /* its steps trained again later */
	struct step_hist *hist;  /* its step times (NULL: none) */
	double cost[GP_NCATS + 1];
};


struct calc {
	const struct goodput_input *in;
	struct gen *g;           /* [1, ngen] */
	int64_t ngen;
	struct step_hist all;
	int64_t t0, end;
	int64_t cursor;          /* the end of the generations done so far */
	double ideal_ms;
	double carry_ms;         /* productive time its span had no room for */
	struct goodput_span *segs;
	size_t nsegs, cap;
};

static int64_t earliest(int64_t have, int64_t t)
{
	return have < 0 || t < have ? t : have;
}

static int64_t latest(int64_t have, int64_t t)
{
	return t > have ? t : have;
}

static int64_t clamp(int64_t v, int64_t lo, int64_t hi)
{
	return v < lo ? lo : v > hi ? hi : v;
}

static bool is(const struct event *ev, const char *kind)
{
	return !strcmp(ev->kind, kind);
}

/* A step the trainers of the event's generation finished. */
static bool says_trained(const struct event *ev)
{
	return ev->step >= 0 &&
	       (is(ev, "exit") || is(ev, "stop") || is(ev, "hang") ||
		is(ev, "progress") || is(ev, "commit"));
}

/* Room for one more segment. */
static int reserve(struct calc *c)
{
	if (c->nsegs == c->cap) {
		size_t cap = c->cap ? 2 * c->cap : 64;
		struct goodput_span *v = realloc(c->segs,
						   cap * sizeof(*v));

		if (!v)
			return -1;
		c->segs = v;
		c->cap = cap;
	}
	return 0;
}

static int add_seg(struct calc *c, int64_t from, int64_t to, int cat,
		   int64_t gen)
{
	if (to <= from)
		return 0;
	if (reserve(c))
		return -1;
	c->segs[c->nsegs++] = (struct goodput_span){ from, to, cat };
	if (gen >= 1 && gen <= c->ngen)
		c->g[gen].cost[cat] += (double)(to - from) / 1000;
	return 0;
}

/* The run's span: its creation (or first event) to its end (or now). */
static int span(struct calc *c, struct err *e)
{
	const struct goodput_input *in = c->in;

	c->t0 = c->end = -1;
	for (size_t i = 0; i < in->nev; i++) {
		int64_t t = event_ms(&in->ev[i]);

		if (t < 0)
			continue;
		if (c->t0 < 0 || is(&in->ev[i], "created"))
			c->t0 = c->t0 < 0 || t < c->t0 ? t : c->t0;
		if (c->end < 0 && (is(&in->ev[i], "done") ||
				   is(&in->ev[i], "failed")))
			c->end = t;
		if (in->ev[i].generation > c->ngen)
			c->ngen = in->ev[i].generation;
	}
	if (c->t0 < 0)
		return err_set(e, COMMON_EINVAL, "the run's history holds no "
			       "event with a time: nothing to measure");
	if (c->ngen > GOODPUT_MAX_GENERATION)
		return err_set(e, COMMON_EINVAL, "the run's history names "
			       "generation %lld: more than %d is not a run's",
			       (long long)c->ngen, GOODPUT_MAX_GENERATION);
	if (c->end < 0)
		c->end = in->now_ms;
	c->end = c->end > c->t0 ? c->end : c->t0; /* a skewed clock's end */
	if (c->ngen < 1)
		c->ngen = 1;
	c->g = calloc((size_t)c->ngen + 2, sizeof(*c->g));
	if (!c->g)
		return err_set(e, COMMON_ENOMEM, "out of memory");
	for (int64_t k = 0; k <= c->ngen + 1; k++)
		c->g[k] = (struct gen){
			.bump = -1, .bump_idx = -1, .stopped = -1,
			.restored = -1, .started = -1, .restore_step = -1,
			.last_step = -1, .first_timed = -1, .failed_at = -1,
			.crash = -1,
			.notice = -1, .chaos = -1, .hang = -1, .gone = -1,
			.recreated = -1,
		};
	return 0;
}

/* A progress event's step times, into its generation's. */
static int take_times(struct gen *g, const struct event *ev, int64_t t)
{
	double before;
	struct err e;

	if (!*ev->details)
		return 0;
	if (!g->hist && !(g->hist = calloc(1, sizeof(*g->hist))))
		return -1;
	before = g->hist->sum_ms;
	if (step_hist_parse(ev->details, g->hist, &e))
		return 0;
	if (g->first_timed < 0)
		g->first_timed = t - (int64_t)llround(g->hist->sum_ms - before);
	return 0;
}

/* Every generation's step times, for the run's ideal step time. */
static void all_times(struct calc *c)
{
	for (int64_t k = 1; k <= c->ngen; k++) {
		const struct step_hist *h = c->g[k].hist;

		for (size_t b = 0; h && b < STEP_HIST_BUCKETS; b++)
			c->all.c[b] += h->c[b];
		if (h) {
			c->all.n += h->n;
			c->all.sum_ms += h->sum_ms;
		}
	}
}

static int read_events(struct calc *c)
{
	for (size_t i = 0; i < c->in->nev; i++) {
		const struct event *ev = &c->in->ev[i];
		int64_t t = event_ms(ev);
		struct gen *g;

		if (t < 0 || t > c->end || ev->generation < 1)
			continue;
		g = &c->g[ev->generation];
		if (is(ev, "bump") && g->bump < 0) {
			g->bump = t;
			g->bump_idx = (int64_t)i;
		} else if (is(ev, "stop")) {
			g->stopped = latest(g->stopped, t);
		} else if (is(ev, "restore")) {
			g->restored = latest(g->restored, t);
			g->restore_step = latest(g->restore_step, ev->step);
		} else if (is(ev, "start")) {
			g->started = latest(g->started, t);
		} else if (is(ev, "exit") && strcmp(ev->cause, "exit 0")) {
			g->crash = earliest(g->crash, t);
		} else if (is(ev, "notice")) {
			g->notice = earliest(g->notice, t);
		} else if (is(ev, "gone")) {
			g->gone = earliest(g->gone, t);
		} else if (is(ev, "chaos")) {
			g->chaos = earliest(g->chaos, t);
		} else if (is(ev, "hang")) {
			g->hang = earliest(g->hang, t);
		} else if (is(ev, "recreated")) {
			g->recreated = latest(g->recreated, t);
		}
		if (says_trained(ev))
			g->last_step = latest(g->last_step, ev->step);
		if (is(ev, "progress") && take_times(g, ev, t))
			return -1;
	}
	all_times(c);
	return 0;
}

/*
 * Without timed steps (no SLICE_STEP_FILE, or supervisors from before
 * they timed them): each generation's progress events, 5 s apart, step
 * on as checkpoints complete, and the time between two of them over the
 * steps between is a step time for each of those steps. Only as precise
 * as the checkpoint interval against 5 s.
 */
static void progress_times(struct calc *c)
{
	for (int64_t k = 1; k <= c->ngen; k++) {
		int64_t at = -1, step = -1;

		for (size_t i = 0; i < c->in->nev; i++) {
			const struct event *ev = &c->in->ev[i];
			int64_t t = event_ms(ev);

			if (ev->generation != k || !is(ev, "progress") ||
			    t < 0 || t > c->end || ev->step < 0)
				continue;
			if (at >= 0 && ev->step > step)
				step_hist_add(&c->all, (double)(t - at) /
						  (double)(ev->step - step),
					      (uint64_t)(ev->step - step));
			if (at < 0 || ev->step > step) {
				at = t;
				step = ev->step;
			}
		}
	}
}

/* A failure's span [x, e): detection until the bump, except that hosts
 * gone are waiting for capacity until they are back, and booting after:
 * the restart's, so the next generation's cost. */
static int failure_span(struct calc *c, int64_t k, int64_t x, int64_t e)
{
	const struct gen *g = &c->g[k];
	int64_t gone = g->gone >= 0 ? clamp(g->gone, x, e) : e;
	int64_t back = g->recreated >= 0 ? clamp(g->recreated, gone, e) : e;

	return add_seg(c, x, gone, GP_DETECTION, k) ||
	       add_seg(c, gone, back, GP_CAPACITY, k + 1) ||
	       add_seg(c, back, e, GP_BOOT, k + 1);
}

/* When generation k's training stopped being useful (*stop_at, within
 * [from, e]), and the categories of what followed until its end e. */
static int lost_span(struct calc *c, int64_t k, int64_t from, int64_t e,
		     int64_t *stop_at)
{
	const struct gen *g = &c->g[k];
	const struct gen *next = k < c->ngen ? &c->g[k + 1] : NULL;
	const struct event *bump = next && next->bump_idx >= 0
					   ? &c->in->ev[next->bump_idx]
					   : NULL;
	int64_t x, hang_from;

	*stop_at = e;
	if (!bump)
		return 0;
	x = g->crash;
	x = g->notice >= 0 ? earliest(x, g->notice) : x;
	x = g->chaos >= 0 ? earliest(x, g->chaos) : x;
	if (g->hang >= 0) {
		/* The hang began at the trainer's last sign of life: an
		 * injected hang's own time, else hang_timeout before. */
		hang_from = g->chaos >= 0 && g->chaos < g->hang
				    ? g->chaos
				    : g->hang - (int64_t)c->in->hang_timeout_s *
							1000;
		hang_from = clamp(hang_from, from, e);
		if (x < 0 || x >= g->hang || hang_from <= x) {
			*stop_at = hang_from;
			return add_seg(c, hang_from, clamp(g->hang, from, e),
				       GP_HANG, k) ||
			       failure_span(c, k, clamp(g->hang, from, e), e);
		}
	}
	x = x < 0 ? e : clamp(x, from, e);
	*stop_at = x;
	if (strstr(bump->cause, "deadline") ||
	    strstr(bump->cause, "maintenance") ||
	    strstr(bump->cause, "run-end"))
		return add_seg(c, x, e, GP_MAINTENANCE, k);
	return failure_span(c, k, x, e);
}

/* The steps' span [f, x) of generation k: kept, trained again, stalled,
 * the rest. */
static int steps_span(struct calc *c, int64_t k, int64_t f, int64_t x)
{
	const struct gen *g = &c->g[k];
	int64_t from = g->restore_step > 0 ? g->restore_step : 0;
	double parts[3];
	const int cats[3] = { GP_PRODUCTIVE, GP_RECOMPUTE, GP_CKPT_STALL };
	int64_t at = f;

	parts[0] = g->kept_to > from ? (double)(g->kept_to - from) * c->ideal_ms
				     : 0;
	parts[1] = (double)g->again * c->ideal_ms;
	parts[2] = goodput_slow_excess_ms(&c->all, g->hist, c->ideal_ms);
	for (int i = 0; i < 3; i++) {
		double room = (double)(x - at);
		int64_t to = parts[i] < room ? at + (int64_t)llround(parts[i])
					     : x;

		if (i == 0 && parts[0] > room)
			c->carry_ms += parts[0] - room;
		if (add_seg(c, at, to, cats[i], k))
			return -1;
		at = to > at ? to : at;
	}
	return add_seg(c, at, x, GP_OTHER, k);
}

/*
 * Which steps each generation kept: the run's lineage, followed back
 * from its last generation. The steps a generation trained are kept up
 * to the step the lineage needs of it, when it is the one that trained
 * that step (it restored below it and reached it); the rest of its
 * steps are trained again. Only the next generation's restore is not
 * enough: a generation that restored an older step and trained nothing
 * (its peers were still gone) is followed by one that restored the
 * newer step after all (CI at a6e195a read 2.47 s too little productive
 * time for such a run).
 */
static void lineage(struct calc *c)
{
	int64_t need = -1; /* -1: the last generation, all it trained */

	for (int64_t k = c->ngen; k >= 1; k--) {
		struct gen *g = &c->g[k];
		int64_t from = g->restore_step > 0 ? g->restore_step : 0;
		int64_t trained = g->last_step > from ? g->last_step - from : 0;
		bool makes = trained && (need < 0 || (from < need &&
						      g->last_step >= need));

		g->kept_to = makes ? (need < 0 ? g->last_step : need) : from;
		g->again = trained - (g->kept_to - from);
		if (makes || (need < 0 && g->restore_step >= 0))
			need = from;
	}
}

/*
 * A generation whose steps went faster than the ideal (the run's mean)
 * had no room for all its steps' ideal time. It is productive time all
 * the same: it takes the place of the run's rest (other), earliest
 * first, in whichever generation ran slower, so that the run's
 * productive time is its steps kept x ideal as the trainer counts it,
 * however the load changed between generations.
 */
static int settle_carry(struct calc *c)
{
	for (size_t i = 0; i < c->nsegs && c->carry_ms >= 1; i++) {
		struct goodput_span *s = &c->segs[i];
		int64_t len = s->to_ms - s->from_ms;

		if (s->cat != GP_OTHER)
			continue;
		if (c->carry_ms < (double)len) {
			/* Its first part productive, the rest still other. */
			if (reserve(c))
				return -1;
			s = &c->segs[i];
			memmove(s + 1, s, (c->nsegs - i) * sizeof(*s));
			c->nsegs++;
			s[0].to_ms = s[1].from_ms =
				s[0].from_ms + (int64_t)c->carry_ms;
		}
		s->cat = GP_PRODUCTIVE;
		c->carry_ms -= (double)(s->to_ms - s->from_ms);
	}
	return 0;
}

static int generation(struct calc *c, int64_t k)
{
	struct gen *g = &c->g[k];
	int64_t s = k == 1 ? -1 : g->bump, e, b, r, t, f, x;

	if (k == 1) {
		for (size_t i = 0; i < c->in->nev && s < 0; i++)
			if (is(&c->in->ev[i], "boot") ||
			    c->in->ev[i].generation >= 1)
				s = event_ms(&c->in->ev[i]);
		s = clamp(s < 0 ? c->end : s, c->t0, c->end);
		if (add_seg(c, c->t0, s, GP_CAPACITY, k))
			return -1;
	}
	if (s < 0)
		return 0; /* no bump made it: folded into the one before */
	e = c->end;
	for (int64_t n = k + 1; n <= c->ngen; n++)
		if (c->g[n].bump >= 0) {
			e = c->g[n].bump;
			break;
		}
	/* Writers' clocks disagree: a bump may be stamped before the one
	 * it follows. Generations never overlap. */
	s = clamp(s, c->cursor > c->t0 ? c->cursor : c->t0, c->end);
	e = clamp(e, s, c->end);
	c->cursor = e;
	b = k > 1 ? clamp(c->g[k - 1].stopped, s, e) : s;
	r = g->restored >= 0 ? clamp(g->restored, b, e) : b;
	t = g->started >= 0 ? clamp(g->started, r, e) : e;
	if (g->recreated >= 0 && add_seg(c, s, clamp(g->recreated, s, b),
					 GP_CAPACITY, k))
		return -1;
	if (add_seg(c, g->recreated >= 0 ? clamp(g->recreated, s, b) : s, b,
		    GP_BOOT, k) ||
	    add_seg(c, b, r, g->restore_step > 0 ? GP_RESTORE : GP_BOOT, k) ||
	    lost_span(c, k, t, e, &x))
		return -1;
	/* Trainers that never stepped on were starting all along. */
	if (g->first_timed >= 0)
		f = clamp(g->first_timed, t, x);
	else if (g->last_step > (g->restore_step > 0 ? g->restore_step : 0))
		f = t;
	else
		f = x;
	g->failed_at = x;
	if (add_seg(c, r, f, GP_BOOT, k) || steps_span(c, k, f, x))
		return -1;
	return 0;
}

/* The failure's word from the cause the bump recorded (issue 26), NULL
 * when it recorded none (an older supervisor). */
static const char *recorded_cause(const struct event *bump)
{
	static const char *const words[CAUSE_NCLASSES] = {
		[CAUSE_TRAINER] = "crash", [CAUSE_HANG] = "hang",
		[CAUSE_PREFLIGHT] = "other", [CAUSE_INFRA] = "preemption",
		[CAUSE_OPERATOR] = "operator",
	};
	char kind[32];
	int k = cause_class_in(bump->details, kind, sizeof(kind));

	if (k < 0)
		return NULL;
	if (k == CAUSE_INFRA && !strcmp(kind, "maintenance"))
		return "maintenance";
	if (k == CAUSE_INFRA && !strcmp(kind, "reset"))
		return "other";
	return words[k];
}

static const char *cause_of(const struct calc *c, int64_t k,
			    const struct event *bump)
{
	const struct gen *g = &c->g[k];
	const char *recorded = recorded_cause(bump);

	if (recorded)
		return recorded;
	if (!strcmp(bump->by, "slicectl"))
		return "operator";
	if (strstr(bump->cause, "deadline") ||
	    strstr(bump->cause, "maintenance") ||
	    strstr(bump->cause, "run-end"))
		return "maintenance";
	if (g->hang >= 0)
		return "hang";
	if (g->notice >= 0 || strstr(bump->cause, "preempt"))
		return "preemption";
	if (g->crash >= 0 || strstr(bump->cause, "trainer ended"))
		return "crash";
	return "other";
}

/* The failures whose failure is at or after `from`. */
static int failures(struct calc *c, int64_t from, struct goodput *out)
{
	out->failures = calloc((size_t)c->ngen, sizeof(*out->failures));
	if (!out->failures)
		return -1;
	for (int64_t k = 1; k < c->ngen; k++) {
		const struct gen *g = &c->g[k], *n = &c->g[k + 1];
		struct goodput_failure *f = &out->failures[out->nfailures];
		int64_t at = g->failed_at >= 0 ? g->failed_at : n->bump;
		const struct event *bump;

		if (n->bump_idx < 0 || at < from)
			continue;
		bump = &c->in->ev[n->bump_idx];
		out->nfailures++;
		f->generation = k;
		snprintf(f->cause, sizeof(f->cause), "%s",
			 cause_of(c, k, bump));
		snprintf(f->reason, sizeof(f->reason), "%s", bump->cause);
		f->at_ms = at;
		f->detection_s = g->cost[GP_DETECTION] + g->cost[GP_MAINTENANCE];
		f->hang_s = g->cost[GP_HANG];
		f->restart_s = n->cost[GP_CAPACITY] + n->cost[GP_BOOT];
		f->restore_s = n->cost[GP_RESTORE];
		f->recompute_s = g->cost[GP_RECOMPUTE];
		f->recomputed_steps = g->again;
	}
	return 0;
}

/* The segments' totals within [from, c->end). */
static void totals(const struct calc *c, int64_t from, struct goodput *out)
{
	for (size_t i = 0; i < c->nsegs; i++) {
		const struct goodput_span *s = &c->segs[i];
		int64_t a = s->from_ms > from ? s->from_ms : from;
		double d = s->to_ms > a ? (double)(s->to_ms - a) / 1000 : 0;

		if (s->cat == GP_PRODUCTIVE)
			out->productive_s += d;
		else
			out->badput_s[s->cat] += d;
	}
	out->elapsed_s = (double)(c->end - from) / 1000;
}

int goodput_compute(const struct goodput_input *in, struct goodput *out,
		    struct err *e)
{
	struct calc c = { .in = in };
	int64_t from;
	int rc;

	memset(out, 0, sizeof(*out));
	out->final_step = -1;
	rc = span(&c, e);
	if (!rc && read_events(&c))
		rc = err_set(e, COMMON_ENOMEM, "out of memory");
	if (!rc && !c.all.n) {
		out->precision = "checkpoints: step times from worker 0's "
				 "progress events (every 5 s, stepping as "
				 "checkpoints complete), within one checkpoint "
				 "interval";
		progress_times(&c);
	}
	c.ideal_ms = rc ? 0 : goodput_ideal_ms(&c.all);
	if (!rc)
		lineage(&c);
	for (int64_t k = 1; !rc && k <= c.ngen; k++)
		if (generation(&c, k))
			rc = err_set(e, COMMON_ENOMEM, "out of memory");
	if (!rc && settle_carry(&c))
		rc = err_set(e, COMMON_ENOMEM, "out of memory");
	from = in->window_ms > 0 && c.end - in->window_ms > c.t0
		       ? c.end - in->window_ms
		       : c.t0;
	if (!rc && failures(&c, from, out))
		rc = err_set(e, COMMON_ENOMEM, "out of memory");
	if (!rc) {
		totals(&c, from, out);
		out->ideal_step_s = c.ideal_ms / 1000;
		out->step_samples = c.all.n;
		for (int64_t k = c.ngen; k >= 1 && out->final_step < 0; k--)
			out->final_step = c.g[k].last_step;
		if (!out->precision)
			out->precision = "steps: SLICE_STEP_FILE, each step "
					 "timed by worker 0's supervisor";
		if (!c.all.n)
			out->precision = "none: no step times and no "
					 "progress";
		out->spans = c.segs;
		out->nspans = c.nsegs;
		c.segs = NULL;
	}
	for (int64_t k = 0; c.g && k <= c.ngen + 1; k++)
		free(c.g[k].hist);
	free(c.g);
	free(c.segs);
	if (rc)
		goodput_release(out);
	return rc;
}

void goodput_release(struct goodput *g)
{
	free(g->failures);
	g->failures = NULL;
	g->nfailures = 0;
	free(g->spans);
	g->spans = NULL;
	g->nspans = 0;
}

double goodput_ratio(const struct goodput *g)
{
	return g->elapsed_s > 0 ? g->productive_s / g->elapsed_s : 0;
}
