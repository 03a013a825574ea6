/*
 * Worker 0's goodput export (supervisor/exporter.c) end to end: two
 * slice-supervisors run the toy trainer with job.json's "monitoring" and
 * SLICE_MONITORING_PERIOD_S=10 against tests/fakes/monitoring_fake.py.
 * The run's 13 series arrive labelled with the run, goodput within
 * [0, 1], every badput category there, and no point refused (the fake
 * refuses a point sooner than 10 s after its series' last). With every
 * write failing the run ends as it would have, and worker 0 says so
 * once. Outcomes only, never a pace.
 */
#include "cloud/cloud.h"
#include "run/run.h"
#include "tests/cloud/fake_server.h"
#include "tests/harness/harness.h"
#include "tests/supervisor/run_check.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WORKERS 2
#define TOTAL 300 /* steps of 0.1 s: each run trains 30 s or more */
#define GOODPUT "custom.googleapis.com/slicectl/goodput"

static struct {
	char dir[HARNESS_PATH], run_dir[HARNESS_PATH + 8];
	char run_url[HARNESS_PATH + 16];
	struct fake_server mon;
	bool mon_up;
	pid_t sup[WORKERS];
} w;

static void down(void)
{
	for (int i = 0; i < WORKERS; i++)
		if (w.sup[i] > 0) {
			kill(w.sup[i], SIGKILL);
			wait_child(&w.sup[i], 10);
		}
	kill_left_trainers(w.dir, "w*");
	if (w.mon_up)
		fake_server_stop(&w.mon);
	if (w.dir[0])
		rm_rf(w.dir);
}

TestSuite(exporter, .fini = down, .timeout = 300);

static void up(void)
{
	memset(&w, 0, sizeof(w));
	cr_assert_eq(make_temp_dir(w.dir, sizeof(w.dir), "exporter"), 0);
	snprintf(w.run_dir, sizeof(w.run_dir), "%s/run", w.dir);
	snprintf(w.run_url, sizeof(w.run_url), "file://%s", w.run_dir);
	cr_assert_eq(sh("mkdir -p '%s' '%s/sync'", w.run_dir, w.dir), 0);
	setenv("no_proxy", "127.0.0.1", 1);
	cr_assert_eq(fake_server_start(&w.mon, "tests/fakes/monitoring_fake.py",
				       NULL), 0);
	w.mon_up = true;
}

/* The toy run with "monitoring", every supervisor started. */
static void run(void)
{
	static char endpoint[128];
	const char *env[] = { endpoint, "SLICECTL_ACCESS_TOKEN=t",
			      "SLICE_MONITORING_PERIOD_S=10",
			      "SLICECTL_HTTP_RETRY_BASE_MS=50", NULL };
	char job[2048], path[HARNESS_PATH + 32], state[HARNESS_PATH + 16];
	char log[HARNESS_PATH + 16];
	const char *src = getenv("SLICECTL_SRCDIR");

	snprintf(endpoint, sizeof(endpoint), "SLICECTL_MONITORING_ENDPOINT=%s",
		 w.mon.base);
	snprintf(job, sizeof(job),
		 "{\"name\": \"toy\", \"command\": \"exec python3 "
		 "%s/tests/supervisor/toy_trainer.py\", \"num_slices\": 1, "
		 "\"workers_per_slice\": %d, \"heartbeat_s\": 1, "
		 "\"grace_s\": 2, \"monitoring\": {\"project\": \"p\"}, "
		 "\"env\": {\"TOY_SYNC_DIR\": \"%s/sync\", \"TOY_TOTAL\": "
		 "\"%d\", \"TOY_STEP_S\": \"0.1\", \"TOY_CKPT_EVERY\": "
		 "\"50\"}}", src ? src : ".", WORKERS, w.dir, TOTAL);
	snprintf(path, sizeof(path), "%s/job.json", w.run_dir);
	write_text(path, job);
	for (unsigned i = 0; i < WORKERS; i++) {
		snprintf(state, sizeof(state), "%s/w%u", w.dir, i);
		snprintf(log, sizeof(log), "%s/sup%u.log", w.dir, i);
		w.sup[i] = spawn_supervisor(w.run_url, state, i, log, env);
	}
}

/* Every supervisor exits 0, the run is done, and its newest committed
 * step is the toy's last: the result the run has without an export. */
static void run_ends_done(void)
{
	for (unsigned i = 0; i < WORKERS; i++) {
		int st = wait_child(&w.sup[i], 240);
		char *log = supervisor_log(w.dir, i);

		cr_assert_eq(st, 0, "supervisor %u: %d\n%s", i, st, log);
		free(log);
	}
	assert_run_control(w.run_dir, 1, "done", NULL);
	cr_assert_eq(run_newest_committed(w.run_dir), TOTAL);
}

static json_t *fake_get(const char *path)
{
	char *body = NULL;
	json_t *v;

	cr_assert_eq(fake_server_call(&w.mon, "GET", path, NULL, &body), 200);
	v = json_loads(body, 0, NULL);
	free(body);
	cr_assert(json_is_array(v), "%s", path);
	return v;
}

static const char *text_at(json_t *o, const char *a, const char *b)
{
	return json_string_value(json_object_get(json_object_get(o, a), b));
}

/* Checks one series of the run; returns its point count. */
static size_t check_series(json_t *s, bool *seen_cat, size_t ncat)
{
	json_t *labels = json_object_get(json_object_get(s, "metric"),
					 "labels");
	const char *type = text_at(s, "metric", "type");
	const char *cat = json_string_value(json_object_get(labels,
							    "category"));
	json_t *pts = json_object_get(s, "points"), *p;
	time_t last = 0;
	size_t i;

	cr_assert_str_eq(json_string_value(json_object_get(labels, "run")),
			 "toy");
	cr_assert_str_eq(text_at(s, "resource", "type"), "generic_task");
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(
		json_object_get(s, "resource"), "labels"), "task_id")), "0");
	for (size_t k = 0; cat && k < ncat; k++)
		if (!strcmp(cat, goodput_cat_names[k]))
			seen_cat[k] = true;
	json_array_foreach(pts, i, p) {
		double v = json_number_value(json_object_get(json_object_get(
			p, "value"), "doubleValue"));
		time_t at = rfc3339_parse(text_at(p, "interval", "endTime"));

		cr_assert_neq(at, (time_t)-1);
		cr_assert_geq(v, 0.0, "%s: %f", type, v);
		if (!strcmp(type, GOODPUT))
			cr_assert_leq(v, 1.0, "goodput %f", v);
		/* Whole seconds: 10 s apart may show as 9. */
		cr_assert(!last || at - last >= 9, "%s: points %lld s apart",
			  type, (long long)(at - last));
		last = at;
	}
	return json_array_size(pts);
}

Test(exporter, the_runs_goodput_reaches_cloud_monitoring)
{
	bool seen_cat[GP_NCATS] = { false };
	json_t *series, *reqs, *s, *r;
	size_t i, goodput_points = 0;

	up();
	run();
	run_ends_done();
	series = fake_get("/_fake/series");
	cr_assert_eq(json_array_size(series), 4 + GP_NCATS, "%zu series",
		     json_array_size(series));
	json_array_foreach(series, i, s) {
		size_t n = check_series(s, seen_cat, GP_NCATS);

		if (!strcmp(text_at(s, "metric", "type"), GOODPUT))
			goodput_points = n;
	}
	for (int k = 0; k < GP_NCATS; k++)
		cr_expect(seen_cat[k], "no badput_time of %s",
			  goodput_cat_names[k]);
	cr_assert_geq(goodput_points, 2);
	reqs = fake_get("/_fake/requests");
	json_array_foreach(reqs, i, r)
		cr_expect_eq(json_integer_value(json_object_get(r, "status")),
			     200, "request %zu refused", i);
	json_decref(reqs);
	json_decref(series);
}

Test(exporter, a_monitoring_outage_leaves_the_run_as_it_was)
{
	json_t *reqs;
	char *log;

	up();
	cr_assert_eq(fake_server_faults(&w.mon, "{\"method\": \"POST\", "
					"\"path\": \"timeSeries\", \"count\": "
					"-1, \"status\": 503}"), 0);
	run();
	run_ends_done();
	reqs = fake_get("/_fake/requests");
	cr_assert_geq(json_array_size(reqs), 1, "no write was tried");
	json_decref(reqs);
	reqs = fake_get("/_fake/series");
	cr_assert_eq(json_array_size(reqs), 0);
	json_decref(reqs);
	log = supervisor_log(w.dir, 0);
	cr_assert_not_null(strstr(log, "not exported to Cloud Monitoring"),
			   "%s", log);
	cr_assert_null(strstr(strstr(log, "not exported to Cloud Monitoring")
			      + 1, "not exported to Cloud Monitoring"),
		       "said more than once:\n%s", log);
	free(log);
}
