/*
 * goodput_show.c: a run's goodput from its bucket's history, and the ways
 * slicectl shows it (goodput, and the headline of status and report).
 */
#include "launcher/goodput.h"
#include "launcher/run_options.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int goodput_of_run(struct store *s, const struct job *j, int64_t window_ms,
		   struct goodput *g, struct err *e)
{
	struct goodput_input in = { .window_ms = window_ms,
				    .hang_timeout_s = j->hang_timeout_s };
	struct event *ev = NULL;
	struct timespec ts;
	int rc;

	memset(g, 0, sizeof(*g));
	clock_gettime(CLOCK_REALTIME, &ts);
	in.now_ms = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
	rc = events_list(s, &ev, &in.nev, e);
	in.ev = ev;
	if (!rc)
		rc = goodput_compute(&in, g, e);
	free(ev);
	return rc;
}

static json_t *failure_json(const struct goodput_failure *f)
{
	char at[40];
	time_t t = (time_t)(f->at_ms / 1000);
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(at, sizeof(at), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(at + strlen(at), sizeof(at) - strlen(at), ".%03dZ",
		 (int)(f->at_ms % 1000));
	return json_pack("{s:I, s:s, s:o, s:s, s:f, s:f, s:f, s:f, s:f, s:I, "
			 "s:f}", "generation", (json_int_t)f->generation,
			 "cause", f->cause, "reason", run_json_text(f->reason),
			 "at", at, "detection_s", f->detection_s, "hang_s",
			 f->hang_s, "restart_s", f->restart_s, "restore_s",
			 f->restore_s, "recompute_s", f->recompute_s,
			 "recomputed_steps", (json_int_t)f->recomputed_steps,
			 "total_s", goodput_failure_cost(f));
}

double goodput_failure_cost(const struct goodput_failure *f)
{
	return f->detection_s + f->hang_s + f->restart_s + f->restore_s +
	       f->recompute_s;
}

json_t *goodput_json(const struct goodput *g)
{
	json_t *o = json_object(), *b = json_object(), *f = json_array();

	if (!o || !b || !f) {
		json_decref(o);
		json_decref(b);
		json_decref(f);
		return NULL;
	}
	for (int k = 0; k < GP_NCATS; k++)
		json_object_set_new(b, goodput_cat_names[k],
				    json_real(g->badput_s[k]));
	for (size_t i = 0; i < g->nfailures; i++)
		json_array_append_new(f, failure_json(&g->failures[i]));
	json_object_set_new(o, "goodput", json_real(goodput_ratio(g)));
	json_object_set_new(o, "elapsed_s", json_real(g->elapsed_s));
	json_object_set_new(o, "productive_s", json_real(g->productive_s));
	json_object_set_new(o, "ideal_step_s", json_real(g->ideal_step_s));
	json_object_set_new(o, "final_step", g->final_step >= 0
						     ? json_integer(g->final_step)
						     : json_null());
	json_object_set_new(o, "step_samples", json_integer(
						       (json_int_t)g->step_samples));
	json_object_set_new(o, "precision", json_string(g->precision));
	json_object_set_new(o, "badput", b);
	json_object_set_new(o, "failures", f);
	return o;
}

void goodput_headline(const struct goodput *g, char *out, size_t cap)
{
	int worst = 0;

	for (int k = 1; k < GP_NCATS; k++)
		if (g->badput_s[k] > g->badput_s[worst])
			worst = k;
	snprintf(out, cap, "goodput %.1f%% (%.0f s of %.0f s trained; most "
		 "lost: %s %.0f s)", 100 * goodput_ratio(g), g->productive_s,
		 g->elapsed_s, goodput_cat_names[worst], g->badput_s[worst]);
}

void goodput_print_text(const struct goodput *g)
{
	char line[512];

	goodput_headline(g, line, sizeof(line));
	printf("%s\n", line);
	printf("elapsed      %10.1f s\n", g->elapsed_s);
	printf("productive   %10.1f s  (step %lld x ideal step %.4f s)\n",
	       g->productive_s, (long long)g->final_step, g->ideal_step_s);
	printf("step times   %llu, %s\n", (unsigned long long)g->step_samples,
	       g->precision);
	printf("badput\n");
	for (int k = 0; k < GP_NCATS; k++)
		printf("  %-28s %10.1f s  %5.1f%%\n", goodput_cat_names[k],
		       g->badput_s[k],
		       g->elapsed_s > 0 ? 100 * g->badput_s[k] / g->elapsed_s
					: 0);
	if (g->nfailures)
		printf("failures (generation, cause: detection, hang, "
		       "restart, restore, recompute = total)\n");
	for (size_t i = 0; i < g->nfailures; i++) {
		const struct goodput_failure *f = &g->failures[i];

		printf("  %lld %-11s %.1f + %.1f + %.1f + %.1f + %.1f = "
		       "%.1f s  %s\n", (long long)f->generation, f->cause,
		       f->detection_s, f->hang_s, f->restart_s, f->restore_s,
		       f->recompute_s, goodput_failure_cost(f), f->reason);
	}
}
