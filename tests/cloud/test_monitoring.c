/*
 * tests/cloud/test_monitoring.c: the Cloud Monitoring client against
 * tests/fakes/monitoring_fake.py: the exact request (path, token, body:
 * custom metrics on a generic_task labelled with the run, one gauge point
 * each), the fake's own refusals reaching the caller (a point sooner than
 * the sampling period, more than 200 series refused before sending), 503s
 * retried, and monitoring_cancel ending a write stuck on a stalled server.
 */
#include "cloud/cloud.h"
#include "tests/cloud/fake_server.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define GOODPUT "custom.googleapis.com/slicectl/goodput"
#define BADPUT "custom.googleapis.com/slicectl/badput_time"

static struct fake_server fake;
static struct monitoring_client *mon;

static void setup(void)
{
	static const struct monitoring_target t = {
		.project = "p", .location = "us-east5-a", .run = "r1" };
	struct err e;

	setenv("SLICECTL_HTTP_RETRY_BASE_MS", "5", 1);
	setenv("SLICECTL_ACCESS_TOKEN", "tok", 1);
	setenv("no_proxy", "127.0.0.1", 1);
	cr_assert_eq(fake_server_start(&fake, "tests/fakes/monitoring_fake.py",
				       NULL), 0);
	setenv("SLICECTL_MONITORING_ENDPOINT", fake.base, 1);
	err_init(&e);
	cr_assert_eq(monitoring_open(&mon, &t, &e), 0, "%s", e.msg);
}

static void teardown(void)
{
	monitoring_close(mon);
	fake_server_stop(&fake);
}

TestSuite(monitoring, .init = setup, .fini = teardown, .timeout = 60);

static int64_t wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* The fake's request log (decref it). */
static json_t *request_log(void)
{
	char *body = NULL;
	json_t *log;

	cr_assert_eq(fake_server_call(&fake, "GET", "/_fake/requests", NULL,
				      &body), 200);
	log = json_loads(body, 0, NULL);
	free(body);
	cr_assert(json_is_array(log));
	return log;
}

static const struct monitoring_point points[] = {
	{ .type = GOODPUT, .value = 0.5 },
	{ .type = BADPUT, .label_key = "category", .label_value = "restore",
	  .value = 12.0 },
};

Test(monitoring, writes_custom_metrics_labelled_with_the_run)
{
	struct err e;
	json_t *log, *ts, *s0, *s1;

	err_init(&e);
	cr_assert_eq(monitoring_write(mon, points, 2, wall_ms(), &e), 0,
		     "%s", e.msg);
	log = request_log();
	cr_assert_eq(json_array_size(log), 1);
	s0 = json_array_get(log, 0);
	cr_assert_str_eq(json_string_value(json_object_get(s0, "path")),
			 "/v3/projects/p/timeSeries");
	cr_assert(json_is_true(json_object_get(s0, "authorization")));
	ts = json_object_get(json_object_get(s0, "json"), "timeSeries");
	cr_assert_eq(json_array_size(ts), 2);
	s0 = json_array_get(ts, 0);
	s1 = json_array_get(ts, 1);
	cr_assert_str_eq(json_string_value(json_object_get(
		json_object_get(json_object_get(s0, "metric"), "labels"),
		"run")), "r1");
	cr_assert_str_eq(json_string_value(json_object_get(
		json_object_get(json_object_get(s1, "metric"), "labels"),
		"category")), "restore");
	cr_assert_str_eq(json_string_value(json_object_get(
		json_object_get(s0, "resource"), "type")), "generic_task");
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(
		json_object_get(s0, "resource"), "labels"), "job")), "r1");
	cr_assert_eq(json_integer_value(json_object_get(json_array_get(log, 0),
							"status")), 200);
	json_decref(log);
}

Test(monitoring, a_point_sooner_than_the_sampling_period_is_refused)
{
	int64_t t = wall_ms();
	struct err e;

	err_init(&e);
	cr_assert_eq(monitoring_write(mon, points, 1, t, &e), 0, "%s", e.msg);
	cr_assert_eq(monitoring_write(mon, points, 1, t + 5000, &e),
		     CLOUD_EHTTP, "%s", e.msg);
	cr_assert(strstr(e.msg, "sampling period"), "%s", e.msg);
	err_init(&e);
	cr_assert_eq(monitoring_write(mon, points, 1, t + 10000, &e), 0,
		     "%s", e.msg);
}

Test(monitoring, more_than_200_series_are_refused_before_sending)
{
	static struct monitoring_point many[MONITORING_MAX_SERIES + 1];
	struct err e;
	json_t *log;

	for (size_t i = 0; i < MONITORING_MAX_SERIES + 1; i++)
		many[i] = points[0];
	err_init(&e);
	cr_assert_eq(monitoring_write(mon, many, MONITORING_MAX_SERIES + 1,
				      wall_ms(), &e), CLOUD_EINVAL);
	log = request_log();
	cr_assert_eq(json_array_size(log), 0);
	json_decref(log);
}

Test(monitoring, unavailable_is_retried)
{
	struct err e;
	json_t *log;

	cr_assert_eq(fake_server_faults(&fake, "{\"path\": \"timeSeries\", "
					"\"status\": 503, \"count\": 2}"), 0);
	err_init(&e);
	cr_assert_eq(monitoring_write(mon, points, 2, wall_ms(), &e), 0,
		     "%s", e.msg);
	log = request_log();
	cr_assert_eq(json_array_size(log), 3);
	json_decref(log);
}

static void *cancel_later(void *ud)
{
	struct timespec ts = { .tv_sec = 1 };

	nanosleep(&ts, NULL);
	monitoring_cancel(ud);
	return NULL;
}

Test(monitoring, cancel_ends_a_write_to_a_stalled_server)
{
	struct err e;
	pthread_t th;
	time_t start = time(NULL);

	cr_assert_eq(fake_server_faults(&fake, "{\"path\": \"timeSeries\", "
					"\"stall\": 30, \"count\": -1}"), 0);
	cr_assert_eq(pthread_create(&th, NULL, cancel_later, mon), 0);
	err_init(&e);
	cr_assert_eq(monitoring_write(mon, points, 1, wall_ms(), &e),
		     CLOUD_EABORTED, "%s", e.msg);
	pthread_join(th, NULL);
	cr_assert_lt(time(NULL) - start, 10);
}
