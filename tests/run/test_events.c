/*
 * The run's history (events/, run/run.h): complete and in time order
 * when every worker of a 2 x 4 run records and bumps at once (one
 * process each, as on the VMs), at most one object a second per writer,
 * and nothing lost to a store outage, not even one that outlasts the
 * writer (GCS fake's fault rules); and read back in time order with a
 * batch written twice counted once.
 */
#include "run/run.h"
#include "cloud/cloud.h"
#include "tests/cloud/fake_gcs.h"
#include "tests/harness/harness.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char root[1024];
static struct fake_gcs fake;
static bool fake_up;

static void setup(void)
{
	cr_assert_eq(make_temp_dir(root, sizeof(root), "events"), 0);
	unsetenv("SLICECTL_ACCESS_TOKEN");
	unsetenv("GOOGLE_APPLICATION_CREDENTIALS");
	setenv("GCE_METADATA_HOST", "127.0.0.1:9", 1);
	setenv("HOME", "/nonexistent", 1);
	setenv("SLICECTL_HTTP_RETRY_BASE_MS", "10", 1);
	log_setup("test_events", getenv("EVENTS_TEST_LOG") ? LOG_DEBUG
							  : LOG_ERROR);
}

static void teardown(void)
{
	if (fake_up)
		fake_gcs_stop(&fake);
	fake_up = false;
	if (root[0])
		rm_rf(root);
}

TestSuite(events, .init = setup, .fini = teardown, .timeout = 120);

static void record(struct events_writer *w, const char *writer,
		   const char *kind, int64_t gen, int64_t step)
{
	struct event ev;
	struct err e;

	event_init(&ev, kind, gen, writer);
	ev.step = step;
	cr_assert_eq(event_record(w, NULL, &ev, &e), 0, "%s", e.msg);
}

static struct store *open_store(const char *url)
{
	struct store *s;
	struct err e;

	cr_assert_eq(store_open(&s, url, &e), 0, "%s", e.msg);
	return s;
}

static size_t count_kind(const struct event *v, size_t n, const char *kind)
{
	size_t k = 0;

	for (size_t i = 0; i < n; i++)
		k += !strcmp(v[i].kind, kind);
	return k;
}

struct names {
	char writer[96];
	unsigned objects;
};

static int count_objects(void *ud, const struct store_object *o,
			 bool is_prefix)
{
	struct names *nm = ud;

	if (!is_prefix && strstr(o->name, nm->writer))
		nm->objects++;
	return 0;
}

/* One worker: its trainer "exits", it bumps the generation at the same
 * wall-clock moment as the seven others, then reports progress. All of
 * them saw generation `seen` fail: loaded before the fork, as a worker
 * that loaded it late (on a loaded machine, after another's bump) would
 * rightly bump the new generation again. */
static void worker(const char *url, unsigned p, time_t at,
		   const struct control *seen)
{
	char name[64], spool[1100];
	struct control out;
	struct events_writer *w;
	struct store *s;
	struct err e;
	int rc;

	run_worker_name(p / 4, p % 4, name, sizeof(name));
	snprintf(spool, sizeof(spool), "%s/w%u", root, p);
	if (sh("mkdir -p '%s'", spool) ||
	    events_writer_start(&w, url, name, spool, &e) ||
	    store_open(&s, url, &e))
		_exit(2);
	while (time(NULL) < at)
		sleep_ms(5);
	record(w, name, "exit", 1, 10);
	rc = control_bump(s, w, seen, 10, "its trainer ended", name, -1,
			  &out, &e);
	for (int i = 0; i < 3; i++)
		record(w, name, "progress", 2, 11 + i);
	events_writer_stop(w, mono_ms() + 20000);
	store_close(s);
	_exit(rc ? 1 : 0);
}

Test(events, every_worker_of_a_2x4_run_bumping_at_once)
{
	char url[1200];
	pid_t pids[8];
	time_t at = time(NULL) + 2;
	struct control seen;
	struct event *v;
	struct store *s;
	struct err e;
	size_t n;

	snprintf(url, sizeof(url), "file://%s/bucket/run", root);
	s = open_store(url);
	cr_assert_eq(control_load(s, &seen, &e), 0, "%s", e.msg);
	for (unsigned p = 0; p < 8; p++) {
		pids[p] = fork();
		cr_assert_geq(pids[p], 0);
		if (!pids[p])
			worker(url, p, at, &seen);
	}
	for (unsigned p = 0; p < 8; p++)
		cr_assert_eq(wait_exit(pids[p], 60), 0, "worker %u", p);
	cr_assert_eq(events_list(s, &v, &n, &e), 0, "%s", e.msg);
	/* 8 exits, 24 progress events, and one bump: the seven other
	 * bumps for the same failure collapsed into it. */
	cr_expect_eq(count_kind(v, n, "exit"), 8);
	cr_expect_eq(count_kind(v, n, "progress"), 24);
	cr_expect_eq(count_kind(v, n, "bump"), 1);
	cr_expect_eq(n, 33);
	for (size_t i = 0; i < n; i++) {
		if (i)
			cr_expect_leq(strcmp(v[i - 1].time, v[i].time), 0,
				      "%s before %s", v[i - 1].time,
				      v[i].time);
		if (!strcmp(v[i].kind, "bump")) {
			cr_expect_eq(v[i].generation, 2);
			cr_expect_str_eq(v[i].cause, "its trainer ended");
			cr_expect(!strncmp(v[i].by, "slice-", 6), "%s",
				  v[i].by);
		}
	}
	/* Each writer's progress comes in the order it was recorded. */
	for (unsigned p = 0; p < 8; p++) {
		char name[64];
		int64_t last = 0;
		struct names nm = { .objects = 0 };

		run_worker_name(p / 4, p % 4, name, sizeof(name));
		for (size_t i = 0; i < n; i++)
			if (!strcmp(v[i].worker, name) &&
			    !strcmp(v[i].kind, "progress")) {
				cr_expect_gt(v[i].step, last);
				last = v[i].step;
			}
		cr_expect_eq(last, 13, "%s", name);
		/* Everything it recorded within about a second: one or
		 * two objects (three with the bump's), never one an
		 * event. */
		snprintf(nm.writer, sizeof(nm.writer), "-%s.json", name);
		cr_assert_eq(store_list(s, "events/", NULL, count_objects, &nm,
					&e), 0);
		cr_expect_leq(nm.objects, 3, "%s wrote %u objects", name,
			      nm.objects);
	}
	free(v);
	store_close(s);
}

/* Every request fails with 503 until the faults are cleared. */
#define OUTAGE "{\"action\": \"status\", \"status\": 503, \"times\": -1}"

static size_t listed(const char *url)
{
	struct store *s = open_store(url);
	struct event *v;
	struct err e;
	size_t n;

	cr_assert_eq(events_list(s, &v, &n, &e), 0, "%s", e.msg);
	free(v);
	store_close(s);
	return n;
}

static unsigned spool_lines(const char *spool)
{
	char path[1200];
	char *text;
	unsigned k;

	snprintf(path, sizeof(path), "%s/events.spool", spool);
	text = read_file(path, NULL);
	k = text ? (unsigned)count_substr(text, "\n") : 0;
	free(text);
	return k;
}

Test(events, a_bucket_outage_delays_them_and_loses_none)
{
	const char *url = "gs://bkt/runs/outage";
	const char *me = "slice-0-worker-0";
	char spool[1100];
	struct events_writer *w;
	struct event *v;
	struct store *s;
	struct err e;
	uint64_t t;
	size_t n;

	cr_assert_eq(fake_gcs_start(&fake, NULL), 0);
	fake_up = true;
	setenv("STORAGE_EMULATOR_HOST", fake.base, 1);
	snprintf(spool, sizeof(spool), "%s/spool", root);
	cr_assert_eq(sh("mkdir -p '%s'", spool), 0);

	/* An outage while the writer runs: the events wait, then go. */
	cr_assert_eq(events_writer_start(&w, url, me, spool, &e), 0, "%s",
		     e.msg);
	cr_assert_eq(fake_gcs_faults(&fake, OUTAGE), 0);
	for (int i = 1; i <= 3; i++) {
		record(w, me, "progress", 1, i);
		sleep_ms(700);
	}
	cr_expect_eq(spool_lines(spool), 3);
	cr_assert_eq(fake_gcs_call(&fake, "DELETE", "/_fake/faults", NULL,
				   NULL), 200);
	for (t = mono_ms(); listed(url) < 3 && mono_ms() < t + 40000;)
		sleep_ms(200);
	cr_expect_eq(listed(url), 3, "written once the store is back");
	for (t = mono_ms(); spool_lines(spool) && mono_ms() < t + 5000;)
		sleep_ms(50);
	cr_expect_eq(spool_lines(spool), 0);

	/* An outage that outlasts the writer: its events stay in the
	 * spool, and the worker's next start writes them. */
	cr_assert_eq(fake_gcs_faults(&fake, OUTAGE), 0);
	record(w, me, "notice", 1, 4);
	record(w, me, "end", 1, -1);
	events_writer_stop(w, mono_ms() + 1500);
	cr_expect_eq(spool_lines(spool), 2);
	cr_assert_eq(fake_gcs_call(&fake, "DELETE", "/_fake/faults", NULL,
				   NULL), 200);
	cr_assert_eq(events_writer_start(&w, url, me, spool, &e), 0, "%s",
		     e.msg);
	record(w, me, "boot", 2, -1);
	events_writer_stop(w, mono_ms() + 20000);
	cr_expect_eq(spool_lines(spool), 0);

	s = open_store(url);
	cr_assert_eq(events_list(s, &v, &n, &e), 0, "%s", e.msg);
	cr_assert_eq(n, 6);
	cr_expect_str_eq(v[3].kind, "notice");
	cr_expect_str_eq(v[4].kind, "end");
	cr_expect_str_eq(v[5].kind, "boot");
	for (size_t i = 0; i < 3; i++)
		cr_expect_eq(v[i].step, (int64_t)i + 1);
	free(v);
	store_close(s);
}

/* Batches in any order, one of them written twice, come back in time
 * order (ties by writer), the copy once; a time in another form than the
 * writers stamp comes after every stamped one. */
Test(events, listed_in_time_order_without_copies)
{
	static const char *const batches[][2] = {
		{ "events/000002-0000000002-b.json",
		  "{\"writer\":\"b\",\"events\":["
		  "{\"time\":\"2026-11-28T01:00:02.000Z\",\"kind\":\"exit\","
		  "\"worker\":\"b\"},"
		  "{\"time\":\"2026-11-28T01:00:00.500Z\",\"kind\":\"boot\","
		  "\"worker\":\"b\"}]}" },
		{ "events/000001-0000000001-a.json",
		  "{\"writer\":\"a\",\"events\":["
		  "{\"time\":\"2026-11-28T01:00:00.500Z\",\"kind\":\"boot\","
		  "\"worker\":\"a\"},"
		  "{\"time\":\"2026-11-28 01:00:00\",\"kind\":\"odd\","
		  "\"worker\":\"a\"}]}" },
		{ "events/000001-0000000002-a.json",
		  "{\"writer\":\"a\",\"events\":["
		  "{\"time\":\"2026-11-28T01:00:00.500Z\",\"kind\":\"boot\","
		  "\"worker\":\"a\"},"
		  "{\"time\":\"2026-11-28 01:00:00\",\"kind\":\"odd\","
		  "\"worker\":\"a\"}]}" },
		{ "events/000001-0000000003-a.json",
		  "{\"writer\":\"a\",\"events\":["
		  "{\"time\":\"2026-11-28T00:59:59.999Z\",\"kind\":\"created\","
		  "\"worker\":\"a\"}]}" },
	};
	static const char *const want[][2] = {
		{ "created", "a" }, { "boot", "a" }, { "boot", "b" },
		{ "exit", "b" }, { "odd", "a" },
	};
	char url[1100];
	struct store *s;
	struct event *v;
	struct err e;
	size_t n;

	snprintf(url, sizeof(url), "file://%s/run", root);
	s = open_store(url);
	for (size_t i = 0; i < sizeof(batches) / sizeof(*batches); i++)
		cr_assert_eq(store_put(s, batches[i][0], batches[i][1],
				       strlen(batches[i][1]),
				       STORE_CREATE_ONLY, NULL, &e),
			     0, "%s", e.msg);
	cr_assert_eq(events_list(s, &v, &n, &e), 0, "%s", e.msg);
	cr_assert_eq(n, sizeof(want) / sizeof(*want));
	for (size_t i = 0; i < n; i++) {
		cr_expect_str_eq(v[i].kind, want[i][0], "event %zu", i);
		cr_expect_str_eq(v[i].worker, want[i][1], "event %zu", i);
	}
	free(v);
	store_close(s);
}
