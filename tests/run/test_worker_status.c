/*
 * tests/run/test_worker_status.c: the workers' status objects
 * against file:// stores in a temporary directory: put and list, refusals,
 * all finished, malformed objects skipped, the period they are written at.
 */
#include "run/run.h"
#include "tests/run/spec_check.h"

#include <criterion/criterion.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

TestSuite(status, .init = spec_setup, .fini = spec_teardown, .timeout = 30);

static struct worker_status make_status(unsigned slice, unsigned worker,
					const char *state, int64_t gen)
{
	struct worker_status st;

	memset(&st, 0, sizeof(st));
	st.slice = slice;
	st.worker = worker;
	snprintf(st.state, sizeof(st.state), "%s", state);
	st.generation = gen;
	st.step = -1;
	st.committed_step = -1;
	return st;
}

static void put_ok(struct store *s, struct worker_status *st)
{
	struct err e;

	cr_assert_eq(status_put(s, st, &e), 0, "%s", e.msg);
}

static struct worker_status *list_ok(struct store *s, size_t *n)
{
	struct worker_status *v;
	struct err e;

	cr_assert_eq(status_list(s, &v, n, &e), 0, "%s", e.msg);
	return v;
}

Test(status, put_and_list)
{
	struct store *s = open_store();
	struct worker_status a = make_status(0, 1, "running", 3);
	struct worker_status b = make_status(1, 0, "restoring", 3);
	struct worker_status c = make_status(0, 0, "starting", 2);
	struct worker_status d = make_status(10, 2, "finished", 3);
	struct worker_status *v;
	size_t n;
	json_t *root;

	a.step = 1200;
	a.committed_step = 1000;
	a.restarts = 4;
	a.upload_bps = 123456789;
	snprintf(a.message, sizeof(a.message), "training \"fine\"\n\xc3\xa9");
	snprintf(a.boot_id, sizeof(a.boot_id),
		 "0e1c7f0a-4f27-4bb2-9d51-0f3b8ab8a7c1");
	put_ok(s, &a);
	cr_expect(is_rfc3339_utc(a.time), "%s", a.time);
	put_ok(s, &b);
	put_ok(s, &c);
	put_ok(s, &d);

	root = read_json(s, "status/slice-0-worker-1.json");
	cr_expect_eq(json_integer_value(json_object_get(root, "slice")), 0);
	cr_expect_eq(json_integer_value(json_object_get(root, "worker")), 1);
	cr_expect_str_eq(json_string_value(json_object_get(root, "state")),
			 "running");
	cr_expect_eq(json_integer_value(json_object_get(root, "generation")),
		     3);
	cr_expect_eq(json_integer_value(json_object_get(root, "step")), 1200);
	cr_expect_eq(json_integer_value(json_object_get(root,
							"committed_step")),
		     1000);
	cr_expect_eq(json_integer_value(json_object_get(root, "restarts")),
		     4);
	cr_expect_str_eq(json_string_value(json_object_get(root, "time")),
			 a.time);
	cr_expect_str_eq(json_string_value(json_object_get(root, "boot_id")),
			 a.boot_id);
	cr_expect_str_eq(json_string_value(json_object_get(root, "message")),
			 a.message);
	cr_expect_eq(json_integer_value(json_object_get(
			     root, "upload_bytes_per_s")), 123456789);
	json_decref(root);
	/* No upload measured yet: the member is left out, as before. */
	root = read_json(s, "status/slice-1-worker-0.json");
	cr_expect_null(json_object_get(root, "upload_bytes_per_s"));
	json_decref(root);

	v = list_ok(s, &n);
	cr_assert_eq(n, 4);
	/* Name order. */
	cr_expect(v[0].slice == 0 && v[0].worker == 0);
	cr_expect(v[1].slice == 0 && v[1].worker == 1);
	cr_expect(v[2].slice == 1 && v[2].worker == 0);
	cr_expect(v[3].slice == 10 && v[3].worker == 2);
	cr_expect_str_eq(v[1].state, "running");
	cr_expect_eq(v[1].generation, 3);
	cr_expect_eq(v[1].step, 1200);
	cr_expect_eq(v[1].committed_step, 1000);
	cr_expect_eq(v[1].restarts, 4);
	cr_expect_str_eq(v[1].message, a.message);
	cr_expect_str_eq(v[1].time, a.time);
	cr_expect_str_eq(v[1].boot_id, a.boot_id);
	cr_expect_eq(v[1].upload_bps, 123456789);
	cr_expect_eq(v[2].upload_bps, 0);
	cr_expect_eq(v[0].step, -1);
	cr_expect_eq(v[0].committed_step, -1);
	cr_expect_str_eq(v[0].state, "starting");
	free(v);

	/* A new heartbeat replaces the old one. */
	a = make_status(0, 1, "finished", 3);
	put_ok(s, &a);
	v = list_ok(s, &n);
	cr_assert_eq(n, 4);
	cr_expect_str_eq(v[1].state, "finished");
	cr_expect_eq(v[1].step, -1);
	free(v);
	store_close(s);
}

Test(status, empty_listing)
{
	struct store *s = open_store();
	struct worker_status *v = NULL;
	size_t n = 99;

	v = list_ok(s, &n);
	cr_expect_eq(n, 0);
	cr_expect_not_null(v);
	free(v);
	store_close(s);
}

Test(status, put_refuses_bad_values)
{
	struct store *s = open_store();
	struct worker_status st = make_status(0, 0, "napping", 1);
	struct worker_status *v;
	size_t n;
	struct err e;

	cr_expect_eq(status_put(s, &st, &e), CLOUD_EINVAL);
	cr_expect(strstr(e.msg, "napping"), "%s", e.msg);
	st = make_status(0, 0, "running", 1);
	st.step = -2;
	cr_expect_eq(status_put(s, &st, &e), CLOUD_EINVAL);
	v = list_ok(s, &n);
	cr_expect_eq(n, 0);
	free(v);
	store_close(s);
}

Test(status, all_finished)
{
	struct worker_status v[4] = {
		make_status(0, 0, "finished", 2),
		make_status(0, 1, "finished", 2),
		make_status(1, 0, "finished", 2),
		make_status(1, 1, "running", 2),
	};

	cr_expect_not(status_all_finished(v, 4, 4, 2));
	cr_expect(status_all_finished(v, 3, 3, 2));
	cr_expect_not(status_all_finished(v, 3, 3, 1), "another generation");
	cr_expect_not(status_all_finished(v, 3, 4, 2), "a worker missing");
	cr_expect_not(status_all_finished(v, 0, 1, 2));
	cr_expect_not(status_all_finished(NULL, 0, 0, 2), "no workers");
	snprintf(v[3].state, sizeof(v[3].state), "finished");
	cr_expect(status_all_finished(v, 4, 4, 2));
	v[3].generation = 1;
	cr_expect_not(status_all_finished(v, 4, 4, 2));
	/* The same worker twice counts once. */
	v[3] = v[0];
	cr_expect_not(status_all_finished(v, 4, 4, 2));
	cr_expect(status_all_finished(v, 4, 3, 2));
}

Test(status, malformed_objects_are_skipped)
{
	struct store *s = open_store();
	struct worker_status good = make_status(0, 3, "running", 1);
	struct worker_status *v;
	size_t n;

	put_ok(s, &good);
	put_raw(s, "status/slice-0-worker-0.json", "{not json");
	put_raw(s, "status/slice-0-worker-1.json", "[]");
	put_raw(s, "status/slice-0-worker-2.json",
		"{\"slice\": 0, \"worker\": 2, \"state\": 7, "
		"\"generation\": 1}");
	put_raw(s, "status/slice-0-worker-4.json",
		"{\"slice\": 1, \"worker\": 4, \"state\": \"running\", "
		"\"generation\": 1}");
	put_raw(s, "status/slice-0-worker-5.json",
		"{\"slice\": 0, \"worker\": 5, \"state\": \"running\", "
		"\"generation\": -1}");
	put_raw(s, "status/slice-0-worker-6.json",
		"{\"slice\": 0, \"worker\": 6, \"state\": \"running\", "
		"\"generation\": 1, \"step\": \"12\"}");
	put_raw(s, "status/slice-0-worker-7.json", "");
	/* Not status objects at all: ignored. */
	put_raw(s, "status/notes.txt", "hello");
	put_raw(s, "status/slice-01-worker-0.json", "{}");
	put_raw(s, "status/slice-0-worker-8.json.tmp", "{}");
	put_raw(s, "status/sub/slice-0-worker-9.json", "{}");
	/* Sound, with the optional fields left out, and a state from a
	 * newer supervisor. */
	put_raw(s, "status/slice-2-worker-0.json",
		"{\"slice\": 2, \"worker\": 0, \"state\": \"draining\", "
		"\"generation\": 1}");

	v = list_ok(s, &n);
	cr_assert_eq(n, 2);
	cr_expect(v[0].slice == 0 && v[0].worker == 3);
	cr_expect_str_eq(v[0].state, "running");
	cr_expect(v[1].slice == 2 && v[1].worker == 0);
	cr_expect_str_eq(v[1].state, "draining");
	cr_expect_eq(v[1].step, -1);
	cr_expect_eq(v[1].committed_step, -1);
	cr_expect_eq(v[1].restarts, 0);
	cr_expect_str_eq(v[1].message, "");
	free(v);
	store_close(s);
}

/* The recent step-time figure goes out only when known, reads back,
 * and a malformed one makes the object malformed. */
Test(status, recent_steps_round_trip)
{
	struct store *s = open_store();
	struct worker_status a = make_status(0, 0, "running", 1);
	struct worker_status b = make_status(0, 1, "running", 1);
	struct worker_status *v;
	json_t *root;
	size_t n;

	a.recent = (struct step_figure){ 101.25, 16, 12.5 };
	put_ok(s, &a);
	put_ok(s, &b);
	root = read_json(s, "status/slice-0-worker-1.json");
	cr_expect_null(json_object_get(root, "recent_steps"));
	json_decref(root);
	put_raw(s, "status/slice-0-worker-2.json",
		"{\"slice\": 0, \"worker\": 2, \"state\": \"running\", "
		"\"generation\": 1, \"recent_steps\": {\"median_ms\": -1, "
		"\"n\": 3, \"span_s\": 1}}");
	put_raw(s, "status/slice-0-worker-3.json",
		"{\"slice\": 0, \"worker\": 3, \"state\": \"running\", "
		"\"generation\": 1, \"recent_steps\": [1, 2]}");
	v = list_ok(s, &n);
	cr_assert_eq(n, 2);
	cr_expect_float_eq(v[0].recent.median_ms, 101.25, 1e-9);
	cr_expect_eq(v[0].recent.n, 16);
	cr_expect_float_eq(v[0].recent.span_s, 12.5, 1e-9);
	cr_expect_eq(v[1].recent.n, 0);
	free(v);
	store_close(s);
}

/* Heartbeats of a large run share half the bucket's initial write rate
 * (two writes each: status and a log segment). */
Test(status, period_grows_with_the_run_beyond_its_share)
{
	cr_expect_eq(status_period_ms(10, 8), 10000);
	cr_expect_eq(status_period_ms(10, 1000), 10000);
	cr_expect_eq(status_period_ms(1, 1000), 4000);
	cr_expect_eq(status_period_ms(10, 4096), 16384);
	cr_expect_eq(status_period_ms(10, 10000000), 3600000);
}
