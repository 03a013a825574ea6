/*
 * run/step_recent.c: a worker's recent step times and the figure its
 * heartbeat carries (run.h): the median of the last window's steps,
 * how many they are and the time they cover.
 */
#include "run/run.h"

#include <stdlib.h>

void step_recent_add(struct step_recent *r, double ms, uint64_t count,
		     uint64_t end_ms)
{
	if (count > STEP_RECENT_MAX)
		count = STEP_RECENT_MAX;
	while (count--) {
		r->ms[r->next] = (float)ms;
		r->end_ms[r->next] = end_ms;
		r->next = (r->next + 1) % STEP_RECENT_MAX;
		if (r->n < STEP_RECENT_MAX)
			r->n++;
	}
}

static int cmp_float(const void *a, const void *b)
{
	float x = *(const float *)a, y = *(const float *)b;

	return (x > y) - (x < y);
}

void step_recent_figure(const struct step_recent *r, uint64_t now_ms,
			struct step_figure *out)
{
	float v[STEP_RECENT_MAX];
	unsigned k = 0;
	uint64_t first_start = now_ms;

	/* Newest first, while within the window or among the newest
	 * STEP_RECENT_MIN. */
	for (unsigned i = 0; i < r->n; i++) {
		unsigned at = (r->next + STEP_RECENT_MAX - 1 - i) %
			      STEP_RECENT_MAX;
		uint64_t end = r->end_ms[at];
		uint64_t start = end > (uint64_t)r->ms[at]
					 ? end - (uint64_t)r->ms[at]
					 : 0;

		if (k >= STEP_RECENT_MIN && end + STEP_RECENT_WINDOW_MS < now_ms)
			break;
		v[k++] = r->ms[at];
		if (start < first_start)
			first_start = start;
	}
	out->n = k;
	out->median_ms = 0;
	out->span_s = 0;
	if (!k)
		return;
	qsort(v, k, sizeof(*v), cmp_float);
	out->median_ms = k % 2 ? v[k / 2] : ((double)v[k / 2 - 1] + v[k / 2]) / 2;
	out->span_s = (double)(now_ms - first_start) / 1000;
}
