/*
 * report_workers.c: the report's sections from what the workers recorded
 * themselves (report.h): the forensics each hang left, linked where a
 * browser can open them, and the stragglers by run.h's rule over the
 * heartbeats of the workers running at the run's generation.
 */
#include "launcher/report.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* Where a browser opens an object of the run: a gs:// object through the
 * Cloud console's authenticated download, file:// as it is. */
static int object_href(struct buf *b, const char *url, const char *name)
{
	int r;

	if (!strncmp(url, "gs://", 5))
		r = buf_appends(b, "https://storage.cloud.google.com/") ||
		    report_esc(b, url + 5);
	else
		r = report_esc(b, url);
	return r || buf_appends(b, "/") || report_esc(b, name);
}

static int forensics_section(const struct report_input *in, struct buf *b)
{
	char name[256];
	size_t n = 0;
	int r = 0;

	for (size_t i = 0; i < in->nev && !r; i++) {
		const struct event *ev = &in->ev[i];

		if (!event_forensics(ev, name, sizeof(name)))
			continue;
		if (!n++)
			r = buf_appends(b, "<h2>Hang forensics</h2>\n<ul "
					"class=\"forensics\">\n");
		if (!r)
			r = buf_appendf(b, "<li>generation %" PRId64 ", ",
					ev->generation) ||
			    report_esc(b, ev->worker) ||
			    buf_appendf(b, " at %s: <a href=\"", ev->time) ||
			    object_href(b, in->url, name) ||
			    buf_appends(b, "\">") || report_esc(b, name) ||
			    buf_appends(b, "</a></li>\n");
	}
	if (n && !r)
		r = buf_appends(b, "</ul>\n<p class=\"note\">the stacks of "
				"every thread of the hung trainer's processes "
				"(/proc, py-spy, the job's hang signal) and its "
				"output's tail, taken before it was ended.</p>"
				"\n");
	return r;
}

static int stragglers_section(const struct report_input *in, struct buf *b)
{
	size_t n = in->nstatus, judged = 0, flagged = 0;
	const struct worker_status **st = calloc(n ? n : 1, sizeof(*st));
	struct straggler_verdict *v = calloc(n ? n : 1, sizeof(*v));
	int r = !st || !v;

	for (size_t i = 0; i < n && !r; i++)
		st[i] = &in->status[i];
	if (!r)
		r = straggler_judge_workers(st, n, in->control->generation, v);
	for (size_t i = 0; i < n && !r; i++) {
		char worker[64];

		judged += v[i].judged;
		if (!v[i].flagged)
			continue;
		if (!flagged++)
			r = buf_appends(b, "<h2>Stragglers</h2>\n<ul class=\""
					"stragglers\">\n");
		run_worker_name(in->status[i].slice, in->status[i].worker,
				worker, sizeof(worker));
		if (!r)
			r = buf_appendf(b, "<li class=\"straggler\" data-worker="
					"\"%s\">%s: ", worker, worker) ||
			    report_esc(b, v[i].reason) ||
			    buf_appends(b, "</li>\n");
	}
	if (flagged && !r)
		r = buf_appendf(b, "</ul>\n<p class=\"note\">%zu of %zu workers "
				"judged by their heartbeats' recent step times "
				"(slicectl status --help has the rule).</p>\n",
				flagged, judged);
	free(st);
	free(v);
	return r;
}

/* The hosts control.json says were quarantined, and why. */
static int quarantine_section(const struct report_input *in, struct buf *b)
{
	const struct control *c = in->control;
	int r = 0;

	if (!c->nquarantined)
		return 0;
	r = buf_appends(b, "<h2>Quarantined hosts</h2>\n<ul class=\""
			"quarantined\">\n");
	for (unsigned i = 0; i < c->nquarantined && !r; i++)
		r = buf_appends(b, "<li class=\"quarantined\" data-host=\"") ||
		    report_esc(b, c->quarantined[i].host) ||
		    buf_appends(b, "\">") ||
		    report_esc(b, c->quarantined[i].host) ||
		    buf_appends(b, " (worker ") ||
		    report_esc(b, c->quarantined[i].worker) ||
		    buf_appendf(b, ", generation %lld): ",
				(long long)c->quarantined[i].generation) ||
		    report_esc(b, c->quarantined[i].why) ||
		    buf_appends(b, "</li>\n");
	if (!r)
		r = buf_appendf(b, "</ul>\n<p class=\"note\">A host blamed by "
				"%d of the last %d failures (SIGSEGV, SIGBUS, "
				"a hang, a failed preflight, or a line "
				"matching --bad-host-pattern).</p>\n",
				QUARANTINE_HITS, QUARANTINE_WINDOW);
	return r;
}

int report_workers(const struct report_input *in, struct buf *b)
{
	return quarantine_section(in, b) || forensics_section(in, b) ||
	       stragglers_section(in, b);
}
