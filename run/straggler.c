/*
 * run/straggler.c: which workers are stragglers (run.h): each worker's
 * recent median step time against median + 3 x MAD of its peers',
 * sustained over STEP_RECENT_MIN steps and STRAGGLER_MIN_SPAN_S. Pure:
 * figures in, verdicts out, so that `slicectl status` and `slicectl
 * report` judge alike and a test can feed it any figures.
 */
#include "run/run.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* The median of v[0..n), n > 0, sorting v. */
static double median_of(double *v, size_t n)
{
	qsort(v, n, sizeof(*v), cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static bool counts(const struct step_figure *f)
{
	return f->n >= STEP_RECENT_MIN && isfinite(f->median_ms) &&
	       f->median_ms >= 0;
}

/* Worker i against the peers in f; v is scratch for n values. */
static void judge_one(const struct step_figure *f, size_t n, size_t i,
		      double *v, struct straggler_verdict *out)
{
	const struct step_figure *me = &f[i];
	size_t k = 0;
	double med, mad, floor;
	bool sustained;

	for (size_t j = 0; j < n; j++)
		if (j != i && counts(&f[j]))
			v[k++] = f[j].median_ms;
	if (k < 2) {
		snprintf(out->reason, sizeof(out->reason),
			 "not judged: fewer than 3 workers report %u steps "
			 "or more", STEP_RECENT_MIN);
		return;
	}
	med = median_of(v, k);
	for (size_t j = 0; j < k; j++)
		v[j] = fabs(v[j] - med);
	mad = median_of(v, k);
	/* Peers in lockstep have a MAD of 0: a few percent then is not a
	 * straggler. */
	floor = med * STRAGGLER_MAD_FLOOR > 1.0 ? med * STRAGGLER_MAD_FLOOR
						: 1.0;
	if (mad < floor)
		mad = floor;
	out->judged = true;
	out->peers_median_ms = med;
	out->threshold_ms = med + STRAGGLER_MADS * mad;
	if (me->median_ms <= out->threshold_ms)
		return;
	sustained = me->span_s >= STRAGGLER_MIN_SPAN_S ||
		    me->n >= STEP_RECENT_MAX;
	out->flagged = sustained;
	snprintf(out->reason, sizeof(out->reason),
		 "%smedian step %.1f ms over its last %u steps (%.1f s) > "
		 "peers' median %.1f ms + %d x MAD %.1f ms = %.1f ms",
		 sustained ? "" : "not yet sustained: ", me->median_ms, me->n,
		 me->span_s, med, STRAGGLER_MADS, mad, out->threshold_ms);
}

void straggler_judge(const struct step_figure *f, size_t n,
		     struct straggler_verdict *out)
{
	double *v = n ? malloc(n * sizeof(*v)) : NULL;

	for (size_t i = 0; i < n; i++) {
		memset(&out[i], 0, sizeof(out[i]));
		if (!counts(&f[i]))
			continue;
		if (!v) {
			snprintf(out[i].reason, sizeof(out[i].reason),
				 "not judged: out of memory");
			continue;
		}
		judge_one(f, n, i, v, &out[i]);
	}
	free(v);
}

int straggler_judge_workers(const struct worker_status *const *st, size_t n,
			    int64_t generation, struct straggler_verdict *out)
{
	struct step_figure *f = calloc(n ? n : 1, sizeof(*f));

	if (!f)
		return -1;
	for (size_t i = 0; i < n; i++)
		if (st[i] && !strcmp(st[i]->state, "running") &&
		    (!generation || st[i]->generation == generation))
			f[i] = st[i]->recent;
	straggler_judge(f, n, out);
	free(f);
	return 0;
}
