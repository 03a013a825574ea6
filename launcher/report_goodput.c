/*
 * report_goodput.c: where the run's time went, drawn for the report
 * (report.h). A bar of the time trained and of each badput category, with
 * its key; and a strip along every lane coloured by what the group's time
 * went to at each moment (goodput.h's spans), at the plot's pixel
 * resolution so that a week of restarts costs no more than an hour.
 */
#include "launcher/report.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BAR_H 18
#define TRAINED GP_NCATS

static const char *const colours[GP_NCATS + 1] = {
	[GP_CAPACITY] = "#9aa0a6", [GP_BOOT] = "#a142f4",
	[GP_RESTORE] = "#4285f4", [GP_RECOMPUTE] = "#ff9800",
	[GP_CKPT_STALL] = "#fbbc04", [GP_DETECTION] = "#ea4335",
	[GP_HANG] = "#b31412", [GP_MAINTENANCE] = "#5f6368",
	[GP_OTHER] = "#dadce0", [TRAINED] = "#34a853",
};

static const char *cat_name(int k)
{
	return k == TRAINED ? "trained" : goodput_cat_names[k];
}

static double seconds_of(const struct goodput *g, int k)
{
	return k == TRAINED ? g->productive_s : g->badput_s[k];
}

int report_goodput_bar(const struct goodput *g, struct buf *b, int width)
{
	double x = 0, all = g->elapsed_s > 0 ? g->elapsed_s : 1;
	int r = buf_appendf(b, "<svg class=\"badput\" xmlns=\"http://www.w3."
			    "org/2000/svg\" width=\"%d\" height=\"%d\">",
			    width, BAR_H);

	/* Trained first, then the categories in the JSON's order. */
	for (int i = 0; i <= GP_NCATS && !r; i++) {
		int k = i == 0 ? TRAINED : i - 1;
		double w = width * seconds_of(g, k) / all;
		char d[32];

		if (w <= 0)
			continue;
		report_duration(seconds_of(g, k), d, sizeof(d));
		r = buf_appendf(b, "<rect class=\"gp-%s\" x=\"%.1f\" y=\"0\" "
				"width=\"%.1f\" height=\"%d\" fill=\"%s\">"
				"<title>%s: %s (%.1f%%)</title></rect>",
				cat_name(k), x, w, BAR_H, colours[k],
				cat_name(k), d,
				100 * seconds_of(g, k) / all);
		x += w;
	}
	if (!r)
		r = buf_appends(b, "</svg>\n<p class=\"key\">");
	for (int i = 0; i <= GP_NCATS && !r; i++) {
		int k = i == 0 ? TRAINED : i - 1;
		char d[32];

		if (seconds_of(g, k) <= 0)
			continue;
		report_duration(seconds_of(g, k), d, sizeof(d));
		r = buf_appendf(b, "<span style=\"background:%s\"></span>%s "
				"%s (%.1f%%)", colours[k], cat_name(k), d,
				100 * seconds_of(g, k) / all);
	}
	return r ? r : buf_appends(b, "</p>\n");
}

int report_goodput_columns(const struct goodput *g, double t0_ms,
			   double span_s, int columns, unsigned char **out)
{
	double (*in)[TRAINED + 1] = calloc((size_t)columns, sizeof(*in));
	unsigned char *cat = malloc((size_t)columns);
	double per = span_s * 1000 / columns;

	*out = NULL;
	if (!in || !cat) {
		free(in);
		free(cat);
		return -1;
	}
	for (size_t i = 0; per > 0 && i < g->nspans; i++) {
		const struct goodput_span *s = &g->spans[i];
		double a = ((double)s->from_ms - t0_ms) / per;
		double z = ((double)s->to_ms - t0_ms) / per;

		if (s->cat < 0 || s->cat > TRAINED || z <= 0 || a >= columns)
			continue;
		for (int c = a < 0 ? 0 : (int)a; c < columns && c < z; c++)
			in[c][s->cat] += (z < c + 1 ? z : c + 1) -
					 (a > c ? a : c);
	}
	/* Each column shows what took most of its time; none: nothing. */
	for (int c = 0; c < columns; c++) {
		int best = -1;

		for (int k = 0; k <= TRAINED; k++)
			if (in[c][k] > 0 && (best < 0 || in[c][k] > in[c][best]))
				best = k;
		cat[c] = best < 0 ? 0xff : (unsigned char)best;
	}
	free(in);
	*out = cat;
	return 0;
}

int report_goodput_strip(const unsigned char *cat, int columns, int x0,
			 int y, int h, struct buf *b)
{
	int r = 0;

	for (int c = 0; c < columns && !r;) {
		int e = c + 1;

		while (e < columns && cat[e] == cat[c])
			e++;
		if (cat[c] <= TRAINED)
			r = buf_appendf(b, "<rect class=\"went\" x=\"%d\" "
					"y=\"%d\" width=\"%d\" height=\"%d\" "
					"fill=\"%s\"><title>%s</title></rect>",
					x0 + c, y, e - c, h, colours[cat[c]],
					cat_name(cat[c]));
		c = e;
	}
	return r;
}
