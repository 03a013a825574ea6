/*
 * local_chaos.c: chaos_parse (see local.h). A spec is a comma-separated
 * list of events, each KIND[:KEY=VALUE]@TIME:
 *   preempt:slice=S@T   the slice's VMs get a preemption notice, then go
 *   preempt@T           (every slice)
 *   reset@T             every worker is reset (the queued resource's reset)
 *   crash:worker=P@T    process P's trainer is killed (SIGKILL)
 *   hang:worker=P@T     process P's trainer is stopped (SIGSTOP)
 * TIME is seconds of training: 20, 20s, 1.5s, 500ms, 2m, 1h. The clock runs
 * only while every trainer runs at the current generation and no injected
 * failure is pending (local.c), so the same spec hits the same point of a
 * run on a fast or a loaded machine, and each event finds the group whole.
 * "random" draws a deterministic mix from the seed instead.
 */
#include "launcher/target/local/local.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static const char *const kind_names[] = { "preempt", "reset", "crash",
					   "hang" };

/* "20", "20s", "1.5s", "500ms", "2m", "1h" as milliseconds. */
static bool parse_time(const char *s, uint64_t *ms)
{
	char *end;
	double v, mult = 1000;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || !(v >= 0) || *s == '-' || *s == '+')
		return false;
	if (!strcmp(end, "ms"))
		mult = 1;
	else if (!strcmp(end, "") || !strcmp(end, "s"))
		mult = 1000;
	else if (!strcmp(end, "m"))
		mult = 60000;
	else if (!strcmp(end, "h"))
		mult = 3600000;
	else
		return false;
	v *= mult;
	if (v > 30.0 * 24 * 3600 * 1000)
		return false;
	*ms = (uint64_t)(v + 0.5);
	return true;
}

static bool parse_index(const char *s, int *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < 0 || v > 1000000)
		return false;
	*out = (int)v;
	return true;
}

static uint64_t next_rand(uint64_t *s)
{
	/* splitmix64 */
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Four events, 20 to 40 s apart from 15 s on: each a preemption of one
 * slice, a reset, or a crash or hang of one process, drawn from seed. */
static int random_events(uint64_t seed, unsigned num_slices, unsigned wps,
			 struct chaos_event *v, size_t *n)
{
	uint64_t s = seed, at = 15000;
	unsigned nproc = num_slices * wps;

	*n = 0;
	for (int i = 0; i < 4; i++) {
		struct chaos_event *ev = &v[(*n)++];
		unsigned k = (unsigned)(next_rand(&s) % 4);

		ev->kind = k == 0 ? CHAOS_PREEMPT : k == 1 ? CHAOS_RESET
				 : k == 2 ? CHAOS_CRASH : CHAOS_HANG;
		ev->slice = ev->worker = -1;
		if (ev->kind == CHAOS_PREEMPT)
			ev->slice = (int)(next_rand(&s) % num_slices);
		else if (ev->kind != CHAOS_RESET)
			ev->worker = (int)(next_rand(&s) % nproc);
		ev->at_ms = at;
		at += 20000 + next_rand(&s) % 20001;
	}
	return 0;
}

static int cmp_at(const void *a, const void *b)
{
	const struct chaos_event *x = a, *y = b;

	return x->at_ms < y->at_ms ? -1 : x->at_ms > y->at_ms;
}

static int parse_one(char *item, unsigned num_slices, unsigned wps,
		     struct chaos_event *ev, struct err *e)
{
	char *at = strrchr(item, '@'), *colon, *arg = NULL;
	const char *example = "preempt:slice=1@20s, reset@45s, "
			      "crash:worker=3@60s, hang:worker=2@80s";
	unsigned nproc = num_slices * wps;
	int kind = -1;

	if (!at)
		return err_set(e, COMMON_EUSAGE,
			       "chaos event '%s' has no @TIME (write events "
			       "like %s)", item, example);
	*at++ = '\0';
	if (!parse_time(at, &ev->at_ms))
		return err_set(e, COMMON_EUSAGE,
			       "chaos event '%s': '%s' is not a time after "
			       "the start (like 20s, 1.5s, 500ms, 2m)",
			       item, at);
	colon = strchr(item, ':');
	if (colon) {
		*colon = '\0';
		arg = colon + 1;
	}
	for (int k = 0; k < 4; k++)
		if (!strcmp(item, kind_names[k]))
			kind = k;
	if (kind < 0)
		return err_set(e, COMMON_EUSAGE,
			       "chaos event kind '%s' is unknown: preempt, "
			       "reset, crash or hang (or the whole spec "
			       "'random')", item);
	ev->kind = kind == 0 ? CHAOS_PREEMPT : kind == 1 ? CHAOS_RESET
		 : kind == 2 ? CHAOS_CRASH : CHAOS_HANG;
	ev->slice = ev->worker = -1;
	if (ev->kind == CHAOS_RESET) {
		if (arg)
			return err_set(e, COMMON_EUSAGE,
				       "chaos event 'reset:%s': reset takes "
				       "no argument (it resets every worker)",
				       arg);
		return 0;
	}
	if (ev->kind == CHAOS_PREEMPT) {
		if (!arg)
			return 0; /* every slice */
		if (strncmp(arg, "slice=", 6) ||
		    !parse_index(arg + 6, &ev->slice))
			return err_set(e, COMMON_EUSAGE,
				       "chaos event 'preempt:%s': write "
				       "preempt:slice=S", arg);
		if ((unsigned)ev->slice >= num_slices)
			return err_set(e, COMMON_EUSAGE,
				       "chaos event 'preempt:%s': slice %d is "
				       "out of range (the run has %u slice%s: "
				       "0 to %u)", arg, ev->slice, num_slices,
				       num_slices == 1 ? "" : "s",
				       num_slices - 1);
		return 0;
	}
	if (!arg || strncmp(arg, "worker=", 7) ||
	    !parse_index(arg + 7, &ev->worker))
		return err_set(e, COMMON_EUSAGE,
			       "chaos event '%s%s%s': write %s:worker=P (P "
			       "the process index, slice * workers per slice "
			       "+ worker)", item, arg ? ":" : "",
			       arg ? arg : "", item);
	if ((unsigned)ev->worker >= nproc)
		return err_set(e, COMMON_EUSAGE,
			       "chaos event '%s:%s': worker %d is out of "
			       "range (the run has %u process%s: 0 to %u)",
			       item, arg, ev->worker, nproc,
			       nproc == 1 ? "" : "es", nproc - 1);
	return 0;
}

int chaos_parse(const char *spec, uint64_t seed, unsigned num_slices,
		unsigned workers_per_slice, struct chaos_event **out, size_t *n,
		struct err *e)
{
	struct chaos_event *v;
	char *copy, *save = NULL;
	size_t cap = 1;
	int rc = 0;

	*out = NULL;
	*n = 0;
	if (!num_slices || !workers_per_slice)
		return err_set(e, COMMON_EINVAL, "a run without workers");
	if (!spec || !*spec)
		return 0;
	for (const char *p = spec; *p; p++)
		cap += *p == ',';
	if (cap < 4)
		cap = 4;
	v = calloc(cap, sizeof(*v));
	copy = strdup(spec);
	if (!v || !copy) {
		free(v);
		free(copy);
		return err_set(e, COMMON_ENOMEM, "out of memory");
	}
	if (!strcmp(spec, "random")) {
		rc = random_events(seed, num_slices, workers_per_slice, v, n);
	} else {
		for (char *item = strtok_r(copy, ",", &save); item && !rc;
		     item = strtok_r(NULL, ",", &save)) {
			while (*item == ' ')
				item++;
			if (!*item)
				continue;
			rc = parse_one(item, num_slices, workers_per_slice,
				       &v[*n], e);
			if (!rc)
				(*n)++;
		}
		if (!rc && !*n)
			rc = err_set(e, COMMON_EUSAGE,
				     "chaos spec '%s' holds no event", spec);
	}
	free(copy);
	if (rc) {
		free(v);
		*n = 0;
		return rc;
	}
	if (*n)
		qsort(v, *n, sizeof(*v), cmp_at);
	*out = v;
	return 0;
}
