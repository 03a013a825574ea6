/*
 * report_html.c: the run as a picture (report.h).
 *
 * The events are replayed into one lane of states per worker (running,
 * restoring, stopped, lost), quantized to the plot's pixel columns so a
 * run of weeks costs no more than a run of minutes; above LANES_FULL
 * workers, the workers of a slice whose lanes look the same at that
 * resolution share one lane, so 1024 healthy workers draw as their
 * slices. Generations, commits, the step rate with its recomputed steps,
 * and the failures (split as bench/recovery splits them) come from the
 * same events.
 */
#include "launcher/report.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum lstate { S_NONE, S_RUN, S_RESTORE, S_STOP, S_LOST, S_COUNT };

static const char *const state_names[S_COUNT] = { "none", "running",
						  "restoring", "stopped",
						  "lost" };

/* Geometry, in SVG pixels. */
#define LABEL_W 170
#define PLOT_W 1000
#define PAGE_W (LABEL_W + PLOT_W + 20)
#define LANES_FULL 64  /* up to this many workers: one lane each */
#define AXIS_H 46
#define COMMIT_H 22
#define RATE_H 120

struct seg {
	double t;             /* seconds after the run's first event */
	unsigned char s;
};

struct lane {
	struct seg *v;
	size_t n, cap;
	unsigned char cur;
};

struct gen_mark {
	double t;
	int64_t generation;
	const struct event *ev; /* NULL for generation 1 */
};

struct model {
	const struct report_input *in;
	time_t t0s;           /* whole seconds of the first event */
	double t0, span;      /* first event (since t0s), and the time shown */
	unsigned nw;
	struct lane *lanes;
	struct gen_mark *gens;
	size_t ngens;
	bool oom;
};

/* Seconds since m->t0s of an RFC 3339 time with milliseconds. */
static double when(const struct model *m, const char *t)
{
	time_t s = rfc3339_parse(t);
	const char *dot = strchr(t, '.');
	double frac = dot ? strtod(dot, NULL) : 0;

	if (s == (time_t)-1)
		return 0;
	return (double)(s - m->t0s) + (frac < 1 ? frac : 0) - m->t0;
}

static int worker_index(const struct model *m, const char *name)
{
	unsigned sl, w;
	char tail;

	if (sscanf(name, "slice-%u-worker-%u%c", &sl, &w, &tail) != 2 ||
	    sl >= m->in->job->num_slices || w >= m->in->job->workers_per_slice)
		return -1;
	return (int)(sl * m->in->job->workers_per_slice + w);
}

static void set_state(struct model *m, unsigned p, double t,
		      unsigned char s)
{
	struct lane *l = &m->lanes[p];

	if (l->cur == s && l->n)
		return;
	if (l->n == l->cap) {
		size_t cap = l->cap ? 2 * l->cap : 8;
		struct seg *v = realloc(l->v, cap * sizeof(*v));

		if (!v) {
			m->oom = true;
			return;
		}
		l->v = v;
		l->cap = cap;
	}
	/* Two changes at one instant: the later one stands. */
	if (l->n && l->v[l->n - 1].t >= t)
		l->v[l->n - 1].s = s;
	else
		l->v[l->n++] = (struct seg){ t, s };
	l->cur = s;
}

/* An integer member of an event's details, or -1. */
static long detail_int(const struct event *ev, const char *key)
{
	char pat[40];
	const char *p;

	snprintf(pat, sizeof(pat), "\"%s\":", key);
	p = strstr(ev->details, pat);
	return p ? strtol(p + strlen(pat), NULL, 10) : -1;
}

static bool detail_is(const struct event *ev, const char *text)
{
	return strstr(ev->details, text) != NULL;
}

/* Every worker of slice (-1: all) from its current state. */
static void set_many(struct model *m, long slice, double t,
		     unsigned char from_mask, unsigned char s)
{
	unsigned wps = m->in->job->workers_per_slice;

	for (unsigned p = 0; p < m->nw; p++)
		if ((slice < 0 || p / wps == (unsigned long)slice) &&
		    (from_mask & (1u << m->lanes[p].cur)))
			set_state(m, p, t, s);
}

#define ANY 0xff
#define BIT(s) (1u << (s))

static void replay_one(struct model *m, const struct event *ev, double t)
{
	int p = worker_index(m, ev->worker);
	const char *k = ev->kind;

	if (p >= 0) {
		if (!strcmp(k, "boot") || !strcmp(k, "restore"))
			set_state(m, (unsigned)p, t, S_RESTORE);
		else if (!strcmp(k, "start"))
			set_state(m, (unsigned)p, t, S_RUN);
		else if (!strcmp(k, "exit"))
			set_state(m, (unsigned)p, t,
				  !strcmp(ev->cause, "exit 0") ? S_NONE
							       : S_LOST);
		else if (!strcmp(k, "hang"))
			set_state(m, (unsigned)p, t, S_LOST);
		else if (!strcmp(k, "notice"))
			set_state(m, (unsigned)p, t, S_STOP);
		else if (!strcmp(k, "end"))
			set_state(m, (unsigned)p, t,
				  detail_is(ev, "finished") ? S_NONE : S_STOP);
	}
	if (!strcmp(k, "gone")) {
		set_many(m, detail_int(ev, "slice"), t, ANY, S_STOP);
	} else if (!strcmp(k, "chaos")) {
		long proc = detail_int(ev, "process");

		if (detail_is(ev, "\"reset\""))
			set_many(m, -1, t, ANY, S_LOST);
		else if (proc >= 0 && (unsigned long)proc < m->nw &&
			 m->lanes[proc].cur == S_RUN)
			set_state(m, (unsigned)proc, t, S_LOST);
	} else if (!strcmp(k, "bump")) {
		set_many(m, -1, t, BIT(S_RUN) | BIT(S_LOST), S_RESTORE);
	} else if (!strcmp(k, "done") || !strcmp(k, "failed")) {
		set_many(m, -1, t, BIT(S_RUN) | BIT(S_RESTORE) | BIT(S_LOST),
			 S_NONE);
	}
}

static int add_gen(struct model *m, double t, int64_t g,
		   const struct event *ev)
{
	struct gen_mark *v = realloc(m->gens, (m->ngens + 1) * sizeof(*v));

	if (!v)
		return -1;
	m->gens = v;
	m->gens[m->ngens++] = (struct gen_mark){ t, g, ev };
	return 0;
}

static int build(struct model *m)
{
	const struct report_input *in = m->in;
	double last = 0;

	m->nw = in->job->num_slices * in->job->workers_per_slice;
	m->lanes = calloc(m->nw ? m->nw : 1, sizeof(*m->lanes));
	if (!m->lanes)
		return -1;
	if (in->nev) {
		const char *dot = strchr(in->ev[0].time, '.');

		m->t0s = rfc3339_parse(in->ev[0].time);
		m->t0 = dot ? strtod(dot, NULL) : 0;
	}
	if (add_gen(m, 0, 1, NULL))
		return -1;
	for (size_t i = 0; i < in->nev; i++) {
		const struct event *ev = &in->ev[i];
		double t = when(m, ev->time);

		replay_one(m, ev, t);
		if (!strcmp(ev->kind, "bump") &&
		    ev->generation > m->gens[m->ngens - 1].generation &&
		    add_gen(m, t, ev->generation, ev))
			return -1;
		if (t > last)
			last = t;
	}
	m->span = last > 1 ? last : 1;
	return m->oom ? -1 : 0;
}

/* ---- text ---- */

int report_esc(struct buf *b, const char *s)
{
	int r = 0;

	for (; *s && !r; s++) {
		switch (*s) {
		case '&': r = buf_appends(b, "&amp;"); break;
		case '<': r = buf_appends(b, "&lt;"); break;
		case '>': r = buf_appends(b, "&gt;"); break;
		case '"': r = buf_appends(b, "&quot;"); break;
		case '\'': r = buf_appends(b, "&#39;"); break;
		default: r = buf_append(b, s, 1);
		}
	}
	return r;
}

void report_duration(double s, char *out, size_t cap)
{
	long v = (long)s;

	if (s < 1)
		snprintf(out, cap, "%.0f ms", s * 1000);
	else if (s < 60)
		snprintf(out, cap, "%.1f s", s);
	else if (v < 3600)
		snprintf(out, cap, "%ld min %ld s", v / 60, v % 60);
	else if (v < 86400)
		snprintf(out, cap, "%ld h %ld min", v / 3600, v % 3600 / 60);
	else
		snprintf(out, cap, "%ld d %ld h", v / 86400, v % 86400 / 3600);
}

static double px(const struct model *m, double t)
{
	return LABEL_W + PLOT_W * (t < 0 ? 0 : t > m->span ? 1 : t / m->span);
}

/* ---- the timeline ---- */

/* A lane at pixel resolution: (column, state) changes. */
struct qlane {
	int *x;
	unsigned char *s;
	size_t n;
};

static void q_push(struct qlane *q, int x, unsigned char s)
{
	q->x[q->n] = x;
	q->s[q->n++] = s;
}

/* Several states in one column: the column shows the gravest (the enum
 * is in that order), so a short loss stays visible at any scale, and the
 * last state goes on from the next column. */
static int quantize(const struct model *m, const struct lane *l,
		    struct qlane *q)
{
	unsigned char carry = S_NONE;
	bool pending = false;

	q->n = 0;
	q->x = malloc((2 * l->n + 1) * sizeof(*q->x));
	q->s = malloc(2 * l->n + 1);
	if (!q->x || !q->s)
		return -1;
	for (size_t i = 0; i < l->n; i++) {
		int x = (int)(px(m, l->v[i].t) + 0.5);
		unsigned char s = l->v[i].s;

		if (q->n && q->x[q->n - 1] == x) {
			if (s > q->s[q->n - 1])
				q->s[q->n - 1] = s;
			carry = s;
			pending = true;
			continue;
		}
		if (pending && carry != q->s[q->n - 1] &&
		    q->x[q->n - 1] + 1 < x)
			q_push(q, q->x[q->n - 1] + 1, carry);
		pending = false;
		if (q->n && q->s[q->n - 1] == s)
			continue;
		q_push(q, x, s);
	}
	if (pending && carry != q->s[q->n - 1])
		q_push(q, q->x[q->n - 1] + 1, carry);
	return 0;
}

static bool same_q(const struct qlane *a, const struct qlane *b)
{
	return a->n == b->n && !memcmp(a->x, b->x, a->n * sizeof(*a->x)) &&
	       !memcmp(a->s, b->s, a->n);
}

static int draw_lane(struct buf *b, const struct qlane *q, int y, int h)
{
	int r = 0;

	for (size_t i = 0; i < q->n && !r; i++) {
		int x2 = i + 1 < q->n ? q->x[i + 1] : LABEL_W + PLOT_W;
		int w = x2 - q->x[i];

		if (q->s[i] == S_NONE)
			continue;
		r = buf_appendf(b, "<rect class=\"%s\" x=\"%d\" y=\"%d\" "
				"width=\"%d\" height=\"%d\"/>",
				state_names[q->s[i]], q->x[i], y,
				w > 0 ? w : 1, h);
	}
	return r;
}

/* Lanes from y; *y_end past the last. */
static int draw_lanes(const struct model *m, struct buf *b, int y,
		      const unsigned char *went, int *y_end)
{
	unsigned wps = m->in->job->workers_per_slice;
	bool full = m->nw <= LANES_FULL;
	int h = full ? 14 : 8, r = 0;
	struct qlane *q = calloc(m->nw ? m->nw : 1, sizeof(*q));

	if (!q)
		return -1;
	for (unsigned p = 0; p < m->nw && !r; p++)
		r = quantize(m, &m->lanes[p], &q[p]);
	for (unsigned p = 0; p < m->nw && !r;) {
		unsigned sl = p / wps, end = p + 1;
		char name[64];

		while (!full && end < (sl + 1) * wps && same_q(&q[p], &q[end]))
			end++;
		run_worker_name(sl, p % wps, name, sizeof(name));
		if (end - p == 1)
			r = buf_appendf(b, "<g class=\"lane\" data-worker=\"%s\">"
					"<title>%s</title>", name, name);
		else
			r = buf_appendf(b, "<g class=\"lane collapsed\" "
					"data-first=\"%s\" data-workers=\"%u\">"
					"<title>slice %u, workers %u-%u: the "
					"same story</title>", name, end - p, sl,
					p % wps, (end - 1) % wps);
		/* Many lanes: a label per slice; the lanes say the rest
		 * in their tooltips. */
		if (!r && full)
			r = buf_appendf(b, "<text class=\"ll\" x=\"%d\" "
					"y=\"%d\">%u/%u</text>", LABEL_W - 6,
					y + h - 2, sl, p % wps);
		else if (!r && p % wps == 0)
			r = buf_appendf(b, "<text class=\"ll sl\" x=\"%d\" "
					"y=\"%d\">slice %u</text>", LABEL_W - 6,
					y + h, sl);
		if (!r)
			r = draw_lane(b, &q[p], y, h);
		/* Along its foot, what the group's time went to. */
		if (!r && went)
			r = report_goodput_strip(went, PLOT_W, LABEL_W,
						 y + h - h / 4, h / 4, b);
		if (!r)
			r = buf_appends(b, "</g>\n");
		y += h + 1;
		p = end;
		if (p % wps == 0)
			y += full ? 4 : 2;
	}
	for (unsigned p = 0; p < m->nw; p++) {
		free(q[p].x);
		free(q[p].s);
	}
	free(q);
	*y_end = y;
	return r;
}

static int draw_axis(const struct model *m, struct buf *b, int y_top,
		     int y_bottom)
{
	static const double steps[] = { 1, 2, 5, 10, 15, 30, 60, 120, 300,
					600, 900, 1800, 3600, 7200, 10800,
					21600, 43200, 86400, 172800, 604800 };
	double step = steps[sizeof(steps) / sizeof(*steps) - 1];
	int r = 0;

	for (size_t i = 0; i < sizeof(steps) / sizeof(*steps); i++)
		if (m->span / steps[i] <= 10) {
			step = steps[i];
			break;
		}
	for (double t = 0; t <= m->span + 1e-9 && !r; t += step) {
		char d[40];

		report_duration(t, d, sizeof(d));
		r = buf_appendf(b, "<line class=\"tick\" x1=\"%.1f\" y1=\"%d\" "
				"x2=\"%.1f\" y2=\"%d\"/><text class=\"tl\" "
				"x=\"%.1f\" y=\"%d\">%s</text>\n", px(m, t),
				y_top + 4, px(m, t), y_bottom, px(m, t),
				y_top, t ? d : "0");
	}
	return r;
}

/* A word for a bump's reason, for the mark's label. */
static const char *cause_word(const char *reason)
{
	static const char *const words[][2] = {
		{ "preempt", "preemption" }, { "notice", "preemption" },
		{ "reset or rebooted", "reset" }, { "hung", "hang" },
		{ "ended", "crash" }, { "could not start", "crash" },
		{ "bad", "bad checkpoint" }, { "jobset restart", "jobset" },
		{ "by hand", "by hand" }, { "restarted", "by hand" },
	};

	for (size_t i = 0; i < sizeof(words) / sizeof(*words); i++)
		if (strstr(reason, words[i][0]))
			return words[i][1];
	return "";
}

/* The class a bump's details record (issue 26), "" none (older
 * supervisors). */
static void class_of(const struct event *ev, char *out, size_t cap)
{
	char kind[32];
	int k = ev ? cause_class_in(ev->details, kind, sizeof(kind)) : -1;

	snprintf(out, cap, "%s", k < 0 ? "" : cause_class_names[k]);
}

static int draw_gens(const struct model *m, struct buf *b, int y_label,
		     int y_bottom)
{
	double last_label = -1e9;
	int r = 0;

	for (size_t i = 0; i < m->ngens && !r; i++) {
		const struct gen_mark *g = &m->gens[i];
		const char *cause = g->ev ? g->ev->cause : "the run starts";
		double x = px(m, g->t);
		char cls[32];

		class_of(g->ev, cls, sizeof(cls));
		r = buf_appendf(b, "<g class=\"gen\" data-generation=\"%" PRId64
				"\" data-class=\"%s\" data-cause=\"",
				g->generation, cls);
		if (!r)
			r = report_esc(b, cause);
		if (!r)
			r = buf_appendf(b, "\"><line x1=\"%.1f\" y1=\"%d\" "
					"x2=\"%.1f\" y2=\"%d\"/>", x,
					y_label + 3, x, y_bottom);
		/* Labels that would overlap are left to the tooltip; the
		 * cause's word where there is room for it. */
		if (!r && x - last_label >= 26) {
			bool room = i + 1 == m->ngens ||
				    px(m, m->gens[i + 1].t) - x >= 90;

			last_label = x;
			r = buf_appendf(b, "<text x=\"%.1f\" y=\"%d\">g%" PRId64
					"%s%s</text>", x + 2, y_label,
					g->generation, room && g->ev ? " " : "",
					room && g->ev ? cause_word(cause) : "");
		}
		if (!r)
			r = buf_appendf(b, "<title>generation %" PRId64 ": ",
					g->generation);
		if (!r)
			r = report_esc(b, cause);
		if (!r && g->ev && *g->ev->by)
			r = buf_appends(b, " (by ") || report_esc(b, g->ev->by) ||
			    buf_appends(b, ")");
		if (!r)
			r = buf_appends(b, "</title></g>\n");
	}
	return r;
}

static int draw_commits(const struct model *m, struct buf *b, int y)
{
	int r = buf_appendf(b, "<text class=\"ll\" x=\"%d\" y=\"%d\">"
			    "committed</text>\n", LABEL_W - 6, y + 12);

	for (size_t i = 0; i < m->in->ncommits && !r; i++) {
		const struct report_commit *c = &m->in->commits[i];
		double x = px(m, when(m, c->time));

		r = buf_appendf(b, "<g class=\"commit\" data-step=\"%" PRId64
				"\"><path d=\"M%.1f %d l4 6 l-4 6 l-4 -6z\"/>"
				"<title>step %" PRId64 " committed at %s"
				"</title></g>\n", c->step, x, y + 2, c->step,
				c->time);
	}
	return r;
}

/* ---- progress: step rate and recomputed steps ---- */

struct point {
	double t;
	int64_t step;
	bool restart;         /* a trainer start: from here, a new run of
				 steps (after a restore) */
};

static int points(const struct model *m, struct point **out, size_t *n)
{
	struct point *v = malloc((m->in->nev + 1) * sizeof(*v));
	int64_t gen_started = 0;

	*n = 0;
	if (!v)
		return -1;
	for (size_t i = 0; i < m->in->nev; i++) {
		const struct event *ev = &m->in->ev[i];
		bool start = !strcmp(ev->kind, "start");

		if (ev->step < 0 || !(start || !strcmp(ev->kind, "progress")))
			continue;
		/* The first trainer start of each generation restarts the
		 * count; the others' starts add nothing. */
		if (start && ev->generation <= gen_started)
			continue;
		if (start)
			gen_started = ev->generation;
		v[(*n)++] = (struct point){ when(m, ev->time), ev->step, start };
	}
	*out = v;
	return 0;
}

struct progress {
	int64_t final_step, recomputed;
};

static void measure(const struct point *v, size_t n, struct progress *pr)
{
	memset(pr, 0, sizeof(*pr));
	for (size_t i = 0; i < n; i++)
		if (v[i].step > pr->final_step)
			pr->final_step = v[i].step;
}

/* The rate of each pixel column: the steps of the intervals over it
 * per second, weighted by their time in it; 0 where nothing ran. */
static void rate_columns(const struct model *m, const struct point *v,
			 size_t n, double *col)
{
	double *w = calloc(PLOT_W, sizeof(*w));

	for (size_t i = 1; w && i < n; i++) {
		double rate, per;
		int c1, c2;

		if (v[i].restart || v[i].t <= v[i - 1].t ||
		    v[i].step < v[i - 1].step)
			continue;
		rate = (double)(v[i].step - v[i - 1].step) /
		       (v[i].t - v[i - 1].t);
		c1 = (int)(px(m, v[i - 1].t)) - LABEL_W;
		c2 = (int)(px(m, v[i].t)) - LABEL_W;
		if (c2 <= c1)
			c2 = c1 + 1;
		per = (v[i].t - v[i - 1].t) / (c2 - c1);
		for (int c = c1; c < c2 && c < PLOT_W; c++) {
			col[c] += rate * per;
			w[c] += per;
		}
	}
	for (int c = 0; w && c < PLOT_W; c++)
		col[c] = w[c] > 0 ? col[c] / w[c] : 0;
	free(w);
}

static int draw_rate(const struct model *m, struct buf *b, int y,
		     const struct point *v, size_t n, struct progress *pr)
{
	double *col = calloc(PLOT_W, sizeof(*col)), top = 0, scale;
	int64_t furthest = 0;
	int r;

	if (!col)
		return -1;
	measure(v, n, pr);
	/* The last commit may come after the last progress report. */
	if (m->in->ncommits &&
	    m->in->commits[m->in->ncommits - 1].step > pr->final_step)
		pr->final_step = m->in->commits[m->in->ncommits - 1].step;
	rate_columns(m, v, n, col);
	for (int c = 0; c < PLOT_W; c++)
		if (col[c] > top)
			top = col[c];
	scale = top > 0 ? (RATE_H - 20) / top : 0;
	r = buf_appendf(b, "<text class=\"ll\" x=\"%d\" y=\"%d\">steps/s"
			"</text><text class=\"ll\" x=\"%d\" y=\"%d\">%.3g"
			"</text><line class=\"tick\" x1=\"%d\" y1=\"%d\" "
			"x2=\"%d\" y2=\"%d\"/>\n", LABEL_W - 6, y + RATE_H / 2,
			LABEL_W - 6, y + 24, top, LABEL_W, y + RATE_H,
			LABEL_W + PLOT_W, y + RATE_H);
	for (size_t i = 0; i < n && !r; i++) {
		/* A restart below the furthest step reached: the steps up
		 * to it are computed again, shaded until it is passed. */
		if (v[i].restart && v[i].step < furthest) {
			size_t j = i + 1;
			double t_end;

			while (j < n && v[j].step < furthest && !v[j].restart)
				j++;
			t_end = j < n ? v[j].t : m->span;
			pr->recomputed += furthest - v[i].step;
			r = buf_appendf(b, "<rect class=\"recomputed\" x=\"%.1f"
					"\" y=\"%d\" width=\"%.1f\" height=\"%d"
					"\"><title>steps %" PRId64 "-%" PRId64
					" computed again</title></rect>\n",
					px(m, v[i].t), y,
					px(m, t_end) - px(m, v[i].t) + 1,
					RATE_H, v[i].step + 1, furthest);
		}
		if (v[i].step > furthest)
			furthest = v[i].step;
	}
	/* One bar per run of columns of the same height. */
	for (int c = 0; c < PLOT_W && !r;) {
		int h = (int)(col[c] * scale + 0.5), e = c + 1;

		while (e < PLOT_W && (int)(col[e] * scale + 0.5) == h)
			e++;
		if (h > 0)
			r = buf_appendf(b, "<rect class=\"rate\" x=\"%d\" "
					"y=\"%d\" width=\"%d\" height=\"%d\"/>",
					LABEL_W + c, y + RATE_H - h, e - c, h);
		c = e;
	}
	free(col);
	return r;
}

/* ---- the failures ---- */

static bool is_failure(const struct event *ev)
{
	return !strcmp(ev->kind, "chaos") || !strcmp(ev->kind, "hang") ||
	       !strcmp(ev->kind, "notice") || !strcmp(ev->kind, "gone") ||
	       (!strcmp(ev->kind, "exit") && strcmp(ev->cause, "exit 0"));
}

static int cell_time(struct buf *b, double s, bool known)
{
	char d[40];

	if (!known)
		return buf_appends(b, "<td>-</td>");
	report_duration(s, d, sizeof(d));
	return buf_appendf(b, "<td>%s</td>", d);
}

static int failures_table(const struct model *m, struct buf *b)
{
	const struct report_input *in = m->in;
	int r = buf_appends(b, "<h2>Failures</h2>\n<table class=\"failures\">"
			    "<tr><th>at</th><th>generation</th><th>cause"
			    "</th><th>first sign</th><th>detection</th><th>"
			    "upload</th><th>restore</th><th>restart</th>"
			    "<th>steps lost</th></tr>\n");
	size_t e0 = 0;

	for (size_t gi = 1; gi < m->ngens && !r; gi++) {
		const struct gen_mark *g = &m->gens[gi];
		const struct event *first = NULL, *notice = NULL;
		double t_commit = -1, t_restore = -1, t_start = -1;
		int64_t before = -1, restored = -1;
		char d[40], cls[32];

		for (size_t i = e0; i < in->nev; i++) {
			const struct event *ev = &in->ev[i];
			double t = when(m, ev->time);

			if (t <= g->t) {
				if (!first && is_failure(ev) &&
				    t >= m->gens[gi - 1].t)
					first = ev;
				if (ev->step > before &&
				    (!strcmp(ev->kind, "progress") ||
				     !strcmp(ev->kind, "commit")))
					before = ev->step;
				if (!strcmp(ev->kind, "notice") && !notice &&
				    t >= m->gens[gi - 1].t)
					notice = ev;
			}
			if (notice && !strcmp(ev->kind, "commit") &&
			    t >= when(m, notice->time) && t_commit < 0 &&
			    ev->generation < g->generation)
				t_commit = t;
			if (ev->generation != g->generation)
				continue;
			if (!strcmp(ev->kind, "restore") && t > t_restore)
				t_restore = t;
			if (!strcmp(ev->kind, "start") && t > t_start) {
				t_start = t;
				restored = ev->step;
			}
		}
		report_duration(g->t, d, sizeof(d));
		r = buf_appendf(b, "<tr class=\"failure\" data-generation=\"%"
				PRId64 "\"><td>%s</td><td>%" PRId64 "</td><td>",
				g->generation, d, g->generation);
		class_of(g->ev, cls, sizeof(cls));
		if (!r && *cls)
			r = buf_appendf(b, "%s: ", cls);
		if (!r)
			r = report_esc(b, g->ev->cause);
		if (!r)
			r = buf_appends(b, "</td><td>");
		if (!r && first)
			r = report_esc(b, first->kind) || buf_appends(b, ": ") ||
			    report_esc(b, strcmp(first->worker, "local")
					   ? first->worker
					   : first->details);
		if (!r)
			r = buf_appends(b, "</td>");
		if (!r)
			r = cell_time(b, first ? g->t - when(m, first->time)
					       : 0, first != NULL);
		if (!r)
			r = cell_time(b, t_commit - when(m, notice ? notice->time
								 : ""),
				      notice && t_commit >= 0);
		if (!r)
			r = cell_time(b, t_restore - g->t, t_restore >= 0);
		if (!r)
			r = cell_time(b, t_start - g->t, t_start >= 0);
		if (!r && before >= 0 && restored >= 0)
			r = buf_appendf(b, "<td>%" PRId64 "</td></tr>\n",
					before > restored ? before - restored
							  : 0);
		else if (!r)
			r = buf_appends(b, "<td>-</td></tr>\n");
	}
	if (!r)
		r = buf_appends(b, "</table>\n<p class=\"note\">first sign: the "
				"earliest failure event of the generation "
				"before; detection: from it to the bump; "
				"upload: from a preemption notice to the "
				"final step's commit; restore and restart: "
				"from the bump to the last worker's restore "
				"and trainer start (bench/recovery's "
				"follow + restore).</p>\n");
	return r;
}

/* ---- the page ---- */

static const char style[] =
	"<style>\n"
	"body{font:14px/1.4 system-ui,sans-serif;margin:16px;color:#202124}"
	"h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:18px 0 6px}"
	"dl{display:grid;grid-template-columns:max-content auto;gap:2px 12px;"
	"margin:8px 0}dt{color:#5f6368}dd{margin:0}"
	"svg{display:block;background:#fff}"
	"text{font:11px system-ui,sans-serif;fill:#3c4043}"
	".ll{text-anchor:end}.sl{font-size:9px}.tl{text-anchor:middle}"
	".tick{stroke:#e0e0e0}.running{fill:#34a853}.restoring{fill:#4285f4}"
	".stopped{fill:#9aa0a6}.lost{fill:#ea4335}"
	".gen line{stroke:#202124;stroke-dasharray:3 3;stroke-width:1}"
	".gen text{font-weight:600}"
	".commit path{fill:#fbbc04;stroke:#8a6d00}"
	".rate{fill:#34a853;opacity:.8}.recomputed{fill:#ff9800;opacity:.3}"
	"table{border-collapse:collapse}td,th{border:1px solid #dadce0;"
	"padding:2px 8px;text-align:left}th{background:#f1f3f4}"
	".failures td{white-space:nowrap}.failures td:nth-child(3),"
	".failures td:nth-child(4){white-space:normal}"
	".key span{display:inline-block;width:12px;height:12px;margin:0 4px "
	"0 12px;vertical-align:-2px}.note{color:#5f6368;font-size:12px}\n"
	"</style>\n";

static int header(const struct model *m, struct buf *b,
		  const struct progress *pr)
{
	const struct report_input *in = m->in;
	const struct control *c = in->control;
	char span[40];
	double worker_h = m->span * m->nw / 3600.0;
	int r = buf_appends(b, "<!DOCTYPE html>\n<html lang=\"en\"><head>"
			    "<meta charset=\"utf-8\"><title>slicectl report: ");

	report_duration(m->span, span, sizeof(span));
	if (!r)
		r = report_esc(b, in->run);
	if (!r)
		r = buf_appendf(b, "</title>\n%s</head><body>\n<h1>", style);
	if (!r)
		r = report_esc(b, in->run);
	if (!r)
		r = buf_appends(b, "</h1>\n");
	if (!r && in->goodput) {
		char line[512];

		goodput_headline(in->goodput, line, sizeof(line));
		r = buf_appends(b, "<p class=\"goodput\"><b>");
		if (!r)
			r = report_esc(b, line);
		if (!r)
			r = buf_appends(b, "</b></p>\n");
		if (!r)
			r = report_goodput_bar(in->goodput, b, PLOT_W);
	}
	if (!r)
		r = buf_appends(b, "<dl><dt>run</dt><dd>");
	if (!r)
		r = report_esc(b, in->url);
	if (!r)
		r = buf_appendf(b, "</dd><dt>workers</dt><dd>%u (%u slice%s "
				"of %u)</dd><dt>from</dt><dd>%s</dd><dt>shown"
				"</dt><dd>%s</dd>", m->nw,
				in->job->num_slices,
				in->job->num_slices == 1 ? "" : "s",
				in->job->workers_per_slice,
				in->nev ? in->ev[0].time : "-", span);
	if (!r && c->generation)
		r = buf_appendf(b, "<dt>state</dt><dd>%s at generation %"
				PRId64 " (max_restarts %u)</dd>", c->state,
				c->generation, in->job->max_restarts);
	if (!r)
		r = buf_appendf(b, "<dt>steps</dt><dd>%" PRId64 " reached, %"
				PRId64 " computed again</dd><dt>commits</dt>"
				"<dd>%zu held by the bucket</dd><dt>events</dt>"
				"<dd>%zu (%.1f per worker-hour)</dd></dl>\n",
				pr->final_step, pr->recomputed, in->ncommits,
				in->nev, worker_h > 0 ? in->nev / worker_h : 0);
	if (!r)
		r = buf_appends(b, "<p class=\"key\"><span class=\"k running\" "
				"style=\"background:#34a853\"></span>running"
				"<span style=\"background:#4285f4\"></span>"
				"restoring<span style=\"background:#9aa0a6\">"
				"</span>stopped (notice, VMs gone)<span style="
				"\"background:#ea4335\"></span>lost (failed, "
				"not yet restarted)<span style=\"background:"
				"#fbbc04\"></span>committed step<span style="
				"\"background:#ff9800;opacity:.4\"></span>"
				"steps computed again</p>\n");
	return r;
}

int report_render(const struct report_input *in, struct buf *out)
{
	struct model m = { .in = in };
	struct buf svg;
	struct point *pts = NULL;
	struct progress pr;
	unsigned char *went = NULL;
	size_t npts = 0;
	int y_lanes = AXIS_H, y, r;

	buf_init(&svg);
	r = build(&m) || points(&m, &pts, &npts);
	if (!r && in->goodput && in->goodput->nspans)
		r = report_goodput_columns(in->goodput,
					   ((double)m.t0s + m.t0) * 1000,
					   m.span, PLOT_W, &went);
	if (!r && went) {
		r = buf_appendf(&svg, "<g class=\"lane went\"><title>what the "
				"group's time went to</title><text class="
				"\"ll\" x=\"%d\" y=\"%d\">time went to</text>",
				LABEL_W - 6, y_lanes + 9);
		if (!r)
			r = report_goodput_strip(went, PLOT_W, LABEL_W, y_lanes,
						 10, &svg);
		if (!r)
			r = buf_appends(&svg, "</g>\n");
		y_lanes += 14;
	}
	if (!r)
		r = draw_lanes(&m, &svg, y_lanes, went, &y);
	if (!r)
		r = draw_commits(&m, &svg, y + 4);
	y += COMMIT_H + 10;
	if (!r)
		r = draw_rate(&m, &svg, y, pts, npts, &pr);
	y += RATE_H + 4;
	if (!r)
		r = header(&m, out, &pr);
	if (!r)
		r = buf_appendf(out, "<svg xmlns=\"http://www.w3.org/2000/svg\" "
				"width=\"%d\" height=\"%d\" viewBox=\"0 0 %d "
				"%d\">\n", PAGE_W, y, PAGE_W, y);
	if (!r)
		r = draw_axis(&m, out, 14, y - 4);
	if (!r)
		r = buf_append(out, svg.data, svg.len);
	if (!r)
		r = draw_gens(&m, out, 32, y - 4);
	if (!r)
		r = buf_appends(out, "</svg>\n");
	if (!r)
		r = failures_table(&m, out);
	if (!r)
		r = report_workers(in, out);
	if (!r)
		r = buf_appends(out, "</body></html>\n");
	buf_release(&svg);
	free(went);
	free(pts);
	for (unsigned p = 0; m.lanes && p < m.nw; p++)
		free(m.lanes[p].v);
	free(m.lanes);
	free(m.gens);
	return r ? COMMON_ENOMEM : 0;
}
