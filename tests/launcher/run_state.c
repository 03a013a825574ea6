/* tests/launcher/run_state.c: see run_state.h. */
#define _GNU_SOURCE /* vasprintf */

#include "tests/launcher/run_state.h"

#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

char tmp[HARNESS_PATH];
char bucket[HARNESS_PATH + 32];
char url[HARNESS_PATH + 64];
struct store *st;

void up(void)
{
	struct err e;

	unsetenv("SLICECTL_BUCKET");
	log_setup("run_state", LOG_ERROR);
	cr_assert_eq(make_temp_dir(tmp, sizeof(tmp), "ops"), 0);
	snprintf(bucket, sizeof(bucket), "file://%s/bucket", tmp);
	snprintf(url, sizeof(url), "%s/run-1", bucket);
	cr_assert_eq(store_open(&st, url, &e), 0, "%s", e.msg);
}

void down(void)
{
	store_close(st);
	st = NULL;
	rm_rf(tmp);
}

void put(const char *name, const char *fmt, ...)
{
	char *text;
	struct err e;
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vasprintf(&text, fmt, ap);
	va_end(ap);
	cr_assert_geq(n, 0);
	cr_assert_eq(store_put(st, name, text, (size_t)n, STORE_ANY_GENERATION,
			       NULL, &e), 0, "%s: %s", name, e.msg);
	free(text);
}

void put_job(unsigned slices, unsigned workers, unsigned heartbeat_s,
	     unsigned max_restarts)
{
	put(RUN_JOB, "{\"name\": \"run-1\", \"command\": \"python3 train.py\", "
	    "\"num_slices\": %u, \"workers_per_slice\": %u, \"heartbeat_s\": "
	    "%u, \"max_restarts\": %u}\n", slices, workers, heartbeat_s,
	    max_restarts);
}

void ago(char *out, size_t cap, long age_s)
{
	time_t t = time(NULL) - age_s;
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(out, cap, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

void put_control(long long gen, const char *state, const char *reason,
		 const char *by, long age_s)
{
	char t[40];

	ago(t, sizeof(t), age_s);
	put(RUN_CONTROL, "{\"generation\": %lld, \"state\": \"%s\", \"reason\": "
	    "\"%s\", \"updated_by\": \"%s\", \"restore_step\": null, \"time\": "
	    "\"%s\"}\n", gen, state, reason, by, t);
}

struct control control_now(void)
{
	struct control c;
	struct err e;

	cr_assert_eq(control_load(st, &c, &e), 0, "%s", e.msg);
	return c;
}

int slicectl(struct run_result *r, const char *const *args)
{
	const char *argv[32];
	size_t n = 0;

	for (size_t i = 0; args[i]; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	cr_assert_eq(run_slicectl(r, argv, NULL), 0);
	return r->status;
}

int ops(struct run_result *r, const char *const *args)
{
	const char *argv[32];
	size_t n = 0;

	for (size_t i = 0; args[i]; i++)
		argv[n++] = args[i];
	argv[n++] = "--bucket";
	argv[n++] = bucket;
	argv[n] = NULL;
	return slicectl(r, argv);
}

json_t *parse(const char *text)
{
	json_error_t je;
	json_t *v = json_loads(text, 0, &je);

	cr_assert_not_null(v, "not JSON (%s): %s", je.text, text);
	return v;
}
