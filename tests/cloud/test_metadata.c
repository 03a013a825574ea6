/*
 * tests/cloud/test_metadata.c: the GCE metadata server client against
 * tests/fakes/metadata_fake.py (two workers): plain reads per worker, 404,
 * directories, the exact requests (Metadata-Flavor, wait_for_change,
 * timeout_sec, last_etag), long polls that answer at once, block until a
 * change made through the fake's control endpoint, or time out unchanged;
 * 503s and dropped connections retried within the watch's time, a stall
 * noticed by the client's own limit, and metadata_cancel from another
 * thread, during a long poll and during a retry's wait. Answers without
 * "Metadata-Flavor: Google" come from tiny_http, since the fake never
 * sends them.
 */
#include "cloud/cloud.h"
#include "tests/cloud/fake_metadata.h"
#include "tests/cloud/tiny_http.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PREEMPTED "instance/preempted"
#define ROOT "/computeMetadata/v1/"

static struct fake_metadata fake;
static struct metadata_client *md;

static void point_at(unsigned port)
{
	char host[64];

	snprintf(host, sizeof(host), "127.0.0.1:%u", port);
	setenv("GCE_METADATA_HOST", host, 1);
}

static struct metadata_client *open_at(unsigned worker)
{
	struct metadata_client *m;
	struct err e;

	point_at(fake_metadata_port(&fake, worker));
	err_init(&e);
	cr_assert_eq(metadata_open(&m, &e), 0, "%s", e.msg);
	return m;
}

static void setup(void)
{
	static const char *const extra[] = { "--workers", "2", NULL };

	setenv("SLICECTL_HTTP_RETRY_BASE_MS", "5", 1);
	/* The client's own limit on a long poll is timeout_s plus this. */
	setenv("SLICECTL_HTTP_STALL_SECONDS", "2", 1);
	setenv("no_proxy", "127.0.0.1", 1);
	cr_assert_eq(fake_metadata_start(&fake, extra), 0);
	cr_assert_neq(fake_metadata_port(&fake, 1), 0);
	md = open_at(0);
}

static void teardown(void)
{
	metadata_close(md);
	fake_metadata_stop(&fake);
}

TestSuite(metadata, .init = setup, .fini = teardown, .timeout = 60);

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* The fake's request log (decref it). */
static json_t *request_log(void)
{
	char *out = NULL;
	json_t *log;

	cr_assert_eq(fake_metadata_call(&fake, "GET", "/_fake/requests", NULL,
					&out), 200);
	log = json_loads(out, 0, NULL);
	free(out);
	cr_assert(json_is_array(log));
	return log;
}

static void clear_log(void)
{
	cr_assert_eq(fake_metadata_call(&fake, "DELETE", "/_fake/requests",
					NULL, NULL), 200);
}

static const char *query_of(json_t *entry, const char *name)
{
	return json_string_value(
		json_object_get(json_object_get(entry, "query"), name));
}

/* Requests for path in the log, and how many of them were long polls. */
static size_t logged(const char *path, size_t *polls)
{
	json_t *log = request_log(), *entry;
	char full[256];
	size_t i, n = 0;

	snprintf(full, sizeof(full), ROOT "%s", path);
	if (polls)
		*polls = 0;
	json_array_foreach(log, i, entry) {
		const char *p = json_string_value(
			json_object_get(entry, "path"));

		if (!p || strcmp(p, full) != 0)
			continue;
		n++;
		if (polls && query_of(entry, "wait_for_change"))
			(*polls)++;
	}
	json_decref(log);
	return n;
}

/* The current ETag of path on md, from an immediate watch. */
static char *current_etag(const char *path)
{
	char *value, *etag;
	bool changed;
	struct err e;

	cr_assert_eq(metadata_watch(md, path, "", 30, &value, &etag, &changed,
				    &e), 0, "%s", e.msg);
	free(value);
	return etag;
}

/* ---- plain reads */

Test(metadata, get_per_worker)
{
	struct metadata_client *w1 = open_at(1);
	char *v;
	struct err e;
	json_t *log, *entry;

	cr_assert_eq(metadata_get(md, "instance/attributes/"
				  "agent-worker-number", &v, &e), 0, "%s",
		     e.msg);
	cr_assert_str_eq(v, "0");
	free(v);
	cr_assert_eq(metadata_get(w1, "instance/attributes/"
				  "agent-worker-number", &v, &e), 0, "%s",
		     e.msg);
	cr_assert_str_eq(v, "1");
	free(v);
	cr_assert_eq(metadata_get(w1, "/instance/attributes/tpu-env", &v, &e),
		     0, "%s", e.msg);
	cr_assert(strstr(v, "WORKER_ID: '1'\n"), "%s", v);
	free(v);
	cr_assert_eq(metadata_get(md, "instance/attributes/", &v, &e), 0,
		     "%s", e.msg);
	cr_assert(strstr(v, "agent-worker-number\n"), "%s", v);
	cr_assert(strstr(v, "worker-network-endpoints\n"), "%s", v);
	free(v);
	metadata_close(w1);

	log = request_log();
	cr_assert_eq(json_array_size(log), 4);
	entry = json_array_get(log, 0);
	cr_assert_str_eq(json_string_value(json_object_get(entry, "path")),
			 ROOT "instance/attributes/agent-worker-number");
	cr_assert_eq(json_object_size(json_object_get(entry, "query")), 0);
	cr_assert_str_eq(json_string_value(json_object_get(
		json_object_get(entry, "headers"), "metadata-flavor")),
		"Google");
	cr_assert_eq(json_integer_value(json_object_get(
		json_array_get(log, 1), "worker")), 1);
	json_decref(log);
}

Test(metadata, get_not_found)
{
	char *v = (char *)"untouched";
	struct err e;

	cr_assert_eq(metadata_get(md, "instance/attributes/no-such", &v, &e),
		     CLOUD_ENOTFOUND, "%s", e.msg);
	cr_assert_null(v);
	cr_assert(strstr(e.msg, "404"), "%s", e.msg);
	/* An attribute set and deleted again through the fake. */
	cr_assert_eq(fake_metadata_set(&fake, FAKE_METADATA_ALL_WORKERS,
				       "instance/attributes/slice-run",
				       "run-1"), 0);
	cr_assert_eq(metadata_get(md, "instance/attributes/slice-run", &v,
				  &e), 0, "%s", e.msg);
	cr_assert_str_eq(v, "run-1");
	free(v);
	cr_assert_eq(fake_metadata_set(&fake, FAKE_METADATA_ALL_WORKERS,
				       "instance/attributes/slice-run", NULL),
		     0);
	cr_assert_eq(metadata_get(md, "instance/attributes/slice-run", &v,
				  &e), CLOUD_ENOTFOUND, "%s", e.msg);
}

Test(metadata, get_directory_without_slash)
{
	char *v;
	struct err e;

	cr_assert_eq(metadata_get(md, "instance/attributes", &v, &e),
		     CLOUD_EHTTP);
	cr_assert(strstr(e.msg, "301"), "%s", e.msg);
	cr_assert(strstr(e.msg, "directory"), "%s", e.msg);
}

Test(metadata, get_retries_503)
{
	char *v;
	struct err e;

	cr_assert_eq(fake_metadata_faults(&fake, "{\"path\": \"preempted\", "
					  "\"status\": 503, \"count\": 2}"),
		     0);
	cr_assert_eq(metadata_get(md, PREEMPTED, &v, &e), 0, "%s", e.msg);
	cr_assert_str_eq(v, "FALSE");
	free(v);
	cr_assert_eq(logged(PREEMPTED, NULL), 3);
}

Test(metadata, get_bad_paths_and_hosts)
{
	struct metadata_client *m;
	char *v;
	struct err e;

	cr_assert_eq(metadata_get(md, "instance/id?x=1", &v, &e),
		     CLOUD_EINVAL);
	cr_assert_eq(metadata_get(md, "instance/../x", &v, &e),
		     CLOUD_EINVAL);
	setenv("GCE_METADATA_HOST", "https://169.254.169.254", 1);
	cr_assert_eq(metadata_open(&m, &e), CLOUD_EINVAL);
	setenv("GCE_METADATA_HOST", "host/path", 1);
	cr_assert_eq(metadata_open(&m, &e), CLOUD_EINVAL);
	setenv("GCE_METADATA_HOST", "http://host:80/", 1);
	cr_assert_eq(metadata_open(&m, &e), 0, "%s", e.msg);
	metadata_close(m);
}

/* Answers no metadata server gives: tiny_http's. */
static int against_tiny(const char *raw, const char *path, char **v,
			struct err *e)
{
	const struct tiny_answer a[] = { { raw, 0, false } };
	struct metadata_client *m;
	struct tiny_http t;
	int rc;

	cr_assert_eq(tiny_start(&t, a, 1), 0);
	point_at(t.port);
	cr_assert_eq(metadata_open(&m, e), 0, "%s", e->msg);
	rc = metadata_get(m, path, v, e);
	metadata_close(m);
	tiny_stop(&t);
	return rc;
}

Test(metadata, get_answer_without_flavor)
{
	char *v = NULL;
	struct err e;

	cr_assert_eq(against_tiny("HTTP/1.1 200 OK\r\nContent-Length: *\r\n"
				  "\r\nFALSE", PREEMPTED, &v, &e),
		     CLOUD_ECORRUPT);
	cr_assert_null(v);
	cr_assert(strstr(e.msg, "Metadata-Flavor"), "%s", e.msg);
	/* Someone else's 404 is not "no such attribute". */
	cr_assert_eq(against_tiny("HTTP/1.1 404 Not Found\r\n"
				  "Content-Length: *\r\n\r\nnope",
				  "instance/attributes/x", &v, &e),
		     CLOUD_ECORRUPT);
	cr_assert_eq(against_tiny("HTTP/1.1 200 OK\r\nMetadata-Flavor: "
				  "Google\r\nContent-Length: *\r\n\r\nFALSE",
				  PREEMPTED, &v, &e), 0, "%s", e.msg);
	cr_assert_str_eq(v, "FALSE");
	free(v);
}

/* ---- long polls */

Test(metadata, watch_empty_etag_answers_at_once)
{
	char *v, *etag;
	bool changed = false;
	struct err e;
	uint64_t t0 = now_ms();
	json_t *log;

	cr_assert_eq(metadata_watch(md, PREEMPTED, "", 30, &v, &etag,
				    &changed, &e), 0, "%s", e.msg);
	cr_assert_lt(now_ms() - t0, 2000);
	cr_assert_str_eq(v, "FALSE");
	cr_assert(changed);
	cr_assert_eq(strlen(etag), 16, "%s", etag);
	free(v);
	free(etag);
	/* A plain read: wait_for_change without last_etag would wait for
	 * the next change. */
	log = request_log();
	cr_assert_eq(json_array_size(log), 1);
	cr_assert_null(query_of(json_array_get(log, 0), "wait_for_change"));
	json_decref(log);
}

struct later_set {
	unsigned after_ms;
	int worker;
	const char *path, *value;
	pthread_t thread;
};

static void *set_later(void *ud)
{
	struct later_set *s = ud;

	sleep_ms(s->after_ms);
	if (fake_metadata_set(&fake, s->worker, s->path, s->value))
		fprintf(stderr, "set_later: the fake refused\n");
	return NULL;
}

Test(metadata, watch_blocks_until_changed)
{
	char *old = current_etag(PREEMPTED), *v, *etag;
	struct later_set s = { 700, 0, PREEMPTED, "TRUE", 0 };
	bool changed = false;
	struct err e;
	uint64_t t0, took;
	json_t *log, *entry;

	clear_log();
	cr_assert_eq(pthread_create(&s.thread, NULL, set_later, &s), 0);
	t0 = now_ms();
	cr_assert_eq(metadata_watch(md, PREEMPTED, old, 30, &v, &etag,
				    &changed, &e), 0, "%s", e.msg);
	took = now_ms() - t0;
	pthread_join(s.thread, NULL);
	cr_assert_geq(took, 600, "%llu ms", (unsigned long long)took);
	cr_assert_lt(took, 10000);
	cr_assert_str_eq(v, "TRUE");
	cr_assert(changed);
	cr_assert_str_neq(etag, old);
	log = request_log();
	cr_assert_eq(json_array_size(log), 1);
	entry = json_array_get(log, 0);
	cr_assert_str_eq(query_of(entry, "wait_for_change"), "true");
	cr_assert_str_eq(query_of(entry, "timeout_sec"), "30");
	cr_assert_str_eq(query_of(entry, "last_etag"), old);
	json_decref(log);
	free(v);

	/* The next watch with the new ETag waits again; the change back
	 * ends it. */
	s = (struct later_set){ 300, 0, PREEMPTED, "FALSE", 0 };
	cr_assert_eq(pthread_create(&s.thread, NULL, set_later, &s), 0);
	free(old);
	old = etag;
	cr_assert_eq(metadata_watch(md, PREEMPTED, old, 30, &v, &etag,
				    &changed, &e), 0, "%s", e.msg);
	pthread_join(s.thread, NULL);
	cr_assert_str_eq(v, "FALSE");
	cr_assert(changed);
	free(v);
	free(etag);
	free(old);
}

Test(metadata, watch_answers_at_once_when_already_changed)
{
	char *old = current_etag("instance/maintenance-event"), *v, *etag;
	bool changed = false;
	struct err e;
	uint64_t t0;

	cr_assert_eq(fake_metadata_set(&fake, 0, "instance/maintenance-event",
				       "TERMINATE_ON_HOST_MAINTENANCE"), 0);
	t0 = now_ms();
	cr_assert_eq(metadata_watch(md, "instance/maintenance-event", old, 30,
				    &v, &etag, &changed, &e), 0, "%s", e.msg);
	cr_assert_lt(now_ms() - t0, 2000);
	cr_assert_str_eq(v, "TERMINATE_ON_HOST_MAINTENANCE");
	cr_assert(changed);
	free(v);
	free(etag);
	free(old);
}

Test(metadata, watch_times_out_unchanged)
{
	char *old = current_etag(PREEMPTED), *v, *etag;
	bool changed = true;
	struct err e;
	uint64_t t0 = now_ms(), took;

	/* Another worker's preemption does not end this worker's wait. */
	cr_assert_eq(fake_metadata_set(&fake, 1, PREEMPTED, "TRUE"), 0);
	cr_assert_eq(metadata_watch(md, PREEMPTED, old, 1, &v, &etag,
				    &changed, &e), 0, "%s", e.msg);
	took = now_ms() - t0;
	cr_assert_geq(took, 900, "%llu ms", (unsigned long long)took);
	cr_assert_lt(took, 5000, "%llu ms", (unsigned long long)took);
	cr_assert_not(changed);
	cr_assert_str_eq(v, "FALSE");
	cr_assert_str_eq(etag, old);
	free(v);
	free(etag);
	free(old);
	cr_assert_eq(metadata_watch(md, PREEMPTED, "x", 0, &v, &etag,
				    &changed, &e), CLOUD_EINVAL);
}

/* Changes the value, then watches with the old ETag through faults. */
static void watch_through(const char *rules, size_t want_polls)
{
	char *old = current_etag(PREEMPTED), *v, *etag;
	bool changed = false;
	size_t polls;
	struct err e;

	cr_assert_eq(fake_metadata_set(&fake, 0, PREEMPTED, "TRUE"), 0);
	cr_assert_eq(fake_metadata_faults(&fake, rules), 0);
	clear_log();
	cr_assert_eq(metadata_watch(md, PREEMPTED, old, 5, &v, &etag,
				    &changed, &e), 0, "%s", e.msg);
	cr_assert_str_eq(v, "TRUE");
	cr_assert(changed);
	logged(PREEMPTED, &polls);
	cr_assert_eq(polls, want_polls);
	free(v);
	free(etag);
	free(old);
}

Test(metadata, watch_retries_503)
{
	watch_through("{\"path\": \"wait_for_change\", \"status\": 503, "
		      "\"count\": 2}", 3);
}

Test(metadata, watch_retries_reset)
{
	watch_through("{\"path\": \"wait_for_change\", \"reset\": true}", 2);
}

Test(metadata, watch_retries_answer_lost_after_the_wait)
{
	watch_through("{\"path\": \"wait_for_change\", \"reset\": true, "
		      "\"processed\": true}", 2);
}

Test(metadata, watch_503_retried_only_within_timeout)
{
	char *old = current_etag(PREEMPTED), *v, *etag;
	bool changed;
	size_t polls;
	struct err e;
	uint64_t t0;

	cr_assert_eq(fake_metadata_faults(&fake, "{\"path\": "
					  "\"wait_for_change\", \"status\": "
					  "503, \"count\": -1}"), 0);
	clear_log();
	t0 = now_ms();
	cr_assert_eq(metadata_watch(md, PREEMPTED, old, 1, &v, &etag,
				    &changed, &e), CLOUD_EHTTP);
	cr_assert_lt(now_ms() - t0, 3000);
	cr_assert(strstr(e.msg, "503"), "%s", e.msg);
	cr_assert_null(v);
	cr_assert_null(etag);
	logged(PREEMPTED, &polls);
	cr_assert_gt(polls, 1);
	free(old);
}

Test(metadata, watch_notices_a_stall)
{
	char *old = current_etag(PREEMPTED), *v, *etag;
	bool changed;
	struct err e;
	uint64_t t0, took;

	/* The server holds the request far past its own timeout_sec; the
	 * client gives up after timeout_s plus its margin (2 s here). */
	cr_assert_eq(fake_metadata_faults(&fake, "{\"path\": "
					  "\"wait_for_change\", \"stall\": 30, "
					  "\"count\": -1}"), 0);
	t0 = now_ms();
	cr_assert_eq(metadata_watch(md, PREEMPTED, old, 1, &v, &etag,
				    &changed, &e), CLOUD_ENETWORK);
	took = now_ms() - t0;
	cr_assert_geq(took, 2500, "%llu ms", (unsigned long long)took);
	cr_assert_lt(took, 8000, "%llu ms", (unsigned long long)took);
	cr_assert_null(v);
	free(old);
}

struct later_cancel {
	unsigned after_ms;
	uint64_t at_ms;
	pthread_t thread;
};

static void *cancel_later(void *ud)
{
	struct later_cancel *c = ud;

	sleep_ms(c->after_ms);
	c->at_ms = now_ms();
	metadata_cancel(md);
	return NULL;
}

/* A watch from old that another thread cancels after after_ms must end,
 * aborted, within 2 s of the cancel. */
static void watch_until_cancelled(const char *old, unsigned after_ms)
{
	struct later_cancel c = { after_ms, 0, 0 };
	char *v, *etag;
	bool changed;
	struct err e;
	uint64_t done;

	cr_assert_eq(pthread_create(&c.thread, NULL, cancel_later, &c), 0);
	cr_assert_eq(metadata_watch(md, PREEMPTED, old, 60, &v, &etag,
				    &changed, &e), CLOUD_EABORTED, "%s",
		     e.msg);
	done = now_ms();
	pthread_join(c.thread, NULL);
	cr_assert_lt(done - c.at_ms, 2000, "%llu ms",
		     (unsigned long long)(done - c.at_ms));
	cr_assert_null(v);
}

Test(metadata, cancel_ends_a_long_poll)
{
	char *old = current_etag(PREEMPTED), *v, *etag;
	bool changed;
	struct err e;

	watch_until_cancelled(old, 500);
	/* And so do later calls, at once. */
	cr_assert_eq(metadata_get(md, PREEMPTED, &v, &e), CLOUD_EABORTED);
	cr_assert_eq(metadata_watch(md, PREEMPTED, "", 60, &v, &etag,
				    &changed, &e), CLOUD_EABORTED);
	free(old);
}

Test(metadata, cancel_ends_a_retry_wait)
{
	char *old = current_etag(PREEMPTED);

	/* Backoff of seconds between 503s: cancel must not wait it out. */
	metadata_close(md);
	setenv("SLICECTL_HTTP_RETRY_BASE_MS", "8000", 1);
	md = open_at(0);
	cr_assert_eq(fake_metadata_faults(&fake, "{\"status\": 503, "
					  "\"count\": -1}"), 0);
	watch_until_cancelled(old, 300);
	free(old);
}
