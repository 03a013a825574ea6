/*
 * goodput_steps.c: the ideal step time from step-time histograms
 * (run.h), as ml-goodput-measurement computes it from raw times.
 */
#include "run/run.h"

#include <math.h>
#include <stdlib.h>

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

/* The weighted median of v[i] with weights w (v sorted). */
static double weighted_median(const double *v, const uint64_t *w, size_t n,
			      uint64_t total)
{
	uint64_t seen = 0;

	for (size_t i = 0; i < n; i++) {
		seen += w[i];
		if (2 * seen >= total)
			return v[i];
	}
	return n ? v[n - 1] : 0;
}

/* The bucket pairs (middle, count) of h, ascending. */
struct pair {
	double v;
	uint64_t w;
};

static int cmp_pair(const void *a, const void *b)
{
	return cmp_double(&((const struct pair *)a)->v,
			  &((const struct pair *)b)->v);
}

/* Median + 3 x MAD of h's steps, each at its bucket's middle (the
 * median in *mid_med). The MAD is at least one bucket's width: steps all
 * in one bucket would otherwise put the next one out of range, which the
 * raw times would not. */
static double threshold_ms(const struct step_hist *h, double *mid_med)
{
	struct pair p[STEP_HIST_BUCKETS];
	double v[STEP_HIST_BUCKETS], med, mad;
	uint64_t w[STEP_HIST_BUCKETS];
	size_t n = 0;

	for (size_t b = 0; b < STEP_HIST_BUCKETS; b++)
		if (h->c[b]) {
			v[n] = step_hist_mid_ms((double)b);
			w[n++] = h->c[b];
		}
	med = weighted_median(v, w, n, h->n);
	for (size_t i = 0; i < n; i++)
		p[i] = (struct pair){ fabs(v[i] - med), w[i] };
	qsort(p, n, sizeof(*p), cmp_pair);
	for (size_t i = 0; i < n; i++) {
		v[i] = p[i].v;
		w[i] = p[i].w;
	}
	mad = weighted_median(v, w, n, h->n);
	if (mad < med * (STEP_HIST_RATIO - 1))
		mad = med * (STEP_HIST_RATIO - 1);
	*mid_med = med;
	return med + 3 * mad;
}

/* The in-range steps' sum is the exact total less the slow buckets'
 * middles: nearly exact, however wide the buckets. */
double goodput_ideal_ms(const struct step_hist *h)
{
	double med, thr, slow = 0;
	uint64_t in = 0;

	if (!h->n)
		return 0;
	thr = threshold_ms(h, &med);
	for (size_t b = 0; b < STEP_HIST_BUCKETS; b++) {
		double mid = step_hist_mid_ms((double)b);

		if (mid <= thr)
			in += h->c[b];
		else
			slow += mid * (double)h->c[b];
	}
	if (!in)
		return med;
	return h->sum_ms > slow ? (h->sum_ms - slow) / (double)in : med;
}

double goodput_slow_excess_ms(const struct step_hist *all,
			      const struct step_hist *h, double ideal)
{
	double med, thr, excess = 0;

	if (!h || !all->n)
		return 0;
	thr = threshold_ms(all, &med);
	for (size_t b = 0; b < STEP_HIST_BUCKETS; b++) {
		double mid = step_hist_mid_ms((double)b);

		if (mid > thr && h->c[b])
			excess += (mid - ideal) * (double)h->c[b];
	}
	return excess;
}
