/*
 * step_hist.c: step times as a compact histogram (run.h), written by
 * worker 0's supervisor into its progress events and read by slicectl
 * goodput. Buckets 2% wide keep the ideal step time within 1% of the
 * raw times' whatever the step time, in a fixed 256 bytes a 5 s event.
 */
#include "run/run.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

static unsigned bucket_of(double ms)
{
	double b = ms >= 1 ? floor(log(ms) / log(STEP_HIST_RATIO)) : 0;

	return b >= STEP_HIST_BUCKETS ? STEP_HIST_BUCKETS - 1 : (unsigned)b;
}

double step_hist_mid_ms(double b)
{
	return pow(STEP_HIST_RATIO, b + 0.5);
}

void step_hist_add(struct step_hist *h, double ms, uint64_t count)
{
	h->c[bucket_of(ms)] += count;
	h->n += count;
	h->sum_ms += ms * (double)count;
}

/* The text with buckets w wide, or -1 when it does not fit. */
static int format_width(const struct step_hist *h, unsigned w, char *out,
			size_t cap)
{
	unsigned lo = STEP_HIST_BUCKETS, hi = 0;
	size_t len;
	int k;

	for (unsigned b = 0; b < STEP_HIST_BUCKETS; b++)
		if (h->c[b]) {
			lo = lo < b ? lo : b;
			hi = b;
		}
	lo -= lo % w;
	k = snprintf(out, cap, "{\"n\":%llu,\"sum_us\":%.0f,\"b\":%u,"
		     "\"w\":%u,\"h\":[", (unsigned long long)h->n,
		     h->sum_ms * 1000, lo, w);
	if (k < 0 || (size_t)k >= cap)
		return -1;
	len = (size_t)k;
	for (unsigned b = lo; b <= hi; b += w) {
		unsigned long long sum = 0;

		for (unsigned i = b; i < b + w && i < STEP_HIST_BUCKETS; i++)
			sum += h->c[i];
		k = snprintf(out + len, cap - len, "%s%llu", b > lo ? "," : "",
			     sum);
		if (k < 0 || (size_t)k >= cap - len)
			return -1;
		len += (size_t)k;
	}
	k = snprintf(out + len, cap - len, "]}");
	return k < 0 || (size_t)k >= cap - len ? -1 : 0;
}

int step_hist_format(const struct step_hist *h, char *out, size_t cap)
{
	if (cap)
		*out = '\0';
	if (!h->n)
		return 0;
	for (unsigned w = 1; w <= STEP_HIST_BUCKETS; w *= 2)
		if (!format_width(h, w, out, cap))
			return 0;
	return -1;
}

int step_hist_parse(const char *details, struct step_hist *into,
		    struct err *e)
{
	json_t *o = json_loads(details, 0, NULL);
	json_t *h = json_object_get(o, "h"), *c;
	json_int_t n = json_integer_value(json_object_get(o, "n"));
	json_int_t b = json_integer_value(json_object_get(o, "b"));
	json_int_t w = json_integer_value(json_object_get(o, "w"));
	double sum = json_number_value(json_object_get(o, "sum_us")) / 1000;
	json_int_t total = 0;
	size_t i;
	int rc = 0;

	/* No step outlasts the last bucket. */
	if (!json_is_array(h) || n <= 0 || b < 0 || w <= 0 || (w & (w - 1)) ||
	    !(sum >= 0) ||
	    sum > (double)n * step_hist_mid_ms(STEP_HIST_BUCKETS) ||
	    (size_t)b + json_array_size(h) * (size_t)w >
		    STEP_HIST_BUCKETS + (size_t)w)
		rc = err_set(e, COMMON_EINVAL, "not a step summary: %.80s",
			     details);
	json_array_foreach(rc ? NULL : h, i, c) {
		if (!json_is_integer(c) || json_integer_value(c) < 0)
			rc = err_set(e, COMMON_EINVAL, "step summary count %zu "
				     "is not a count", i);
		total += json_integer_value(c);
	}
	if (!rc && total != n)
		rc = err_set(e, COMMON_EINVAL, "step summary counts add up "
			     "to %lld, not n %lld", (long long)total,
			     (long long)n);
	json_array_foreach(rc ? NULL : h, i, c) {
		/* A wide bucket's steps go to its middle. */
		size_t at = (size_t)b + i * (size_t)w + (size_t)w / 2;

		into->c[at < STEP_HIST_BUCKETS ? at : STEP_HIST_BUCKETS - 1] +=
			(uint64_t)json_integer_value(c);
	}
	if (!rc) {
		into->n += (uint64_t)n;
		into->sum_ms += sum;
	}
	json_decref(o);
	return rc;
}

void step_clock_start(struct step_clock *c)
{
	c->step = -1;
}

double step_clock_saw(struct step_clock *c, int64_t step, uint64_t now_us)
{
	double ms = 0;

	if (c->step >= 0 && step > c->step) {
		ms = (double)(now_us - c->at_us) / 1000 /
		     (double)(step - c->step);
		step_hist_add(&c->h, ms, (uint64_t)(step - c->step));
	}
	if (step > c->step) {
		c->step = step;
		c->at_us = now_us;
	}
	return ms;
}

int step_clock_take(struct step_clock *c, char *out, size_t cap)
{
	int rc = step_hist_format(&c->h, out, cap);

	memset(&c->h, 0, sizeof(c->h));
	return rc;
}
