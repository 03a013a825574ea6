/*
 * Notifications end to end, through the slicectl binary: `slicectl job
 * --local --notify URL` of examples/sgd on 2 slices x 1 worker, with a
 * trainer crash and a preemption of slice 1, posts to
 * tests/fakes/notify_receiver.py exactly one message per restart (its
 * cause: the trainer's, then the preemption) and one "done", none twice;
 * the receiver drops the first two posts and answers 500 to the next, and
 * the run trains to its last step all the same. A bad --notify is a usage
 * error before anything is created.
 *
 * Every process started here is stopped by its pid; the temporary
 * directory is removed.
 */
#include "tests/cloud/fake_server.h"
#include "tests/harness/harness.h"
#include "tests/launcher/target/local/local_summary.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define STEPS "400"

static char dir[HARNESS_PATH];
static char bucket[HARNESS_PATH + 32];
static struct fake_server rx;
static bool rx_up;

static void cleanup(void)
{
	if (rx_up)
		fake_server_stop(&rx);
	rx_up = false;
	if (dir[0])
		rm_rf(dir);
	dir[0] = '\0';
}

TestSuite(local_notify, .fini = cleanup, .timeout = 240);

static void setup(void)
{
	char home[HARNESS_PATH + 16];

	cr_assert_eq(make_temp_dir(dir, sizeof(dir), "notify"), 0);
	snprintf(bucket, sizeof(bucket), "file://%s/bucket", dir);
	snprintf(home, sizeof(home), "%s/home", dir);
	cr_assert_eq(sh("mkdir -p '%s' '%s/sync'", home, dir), 0);
	setenv("SLICECTL_HOME", home, 1);
	setenv("no_proxy", "127.0.0.1", 1);
	cr_assert_not_null(getenv("SLICE_SUPERVISOR_BIN"));
}

/* The notices delivered (answered 200), by kind; none twice. */
static json_t *delivered(void)
{
	char *body = NULL;
	json_t *v, *r, *by_kind = json_object(), *seen = json_object();
	size_t i;

	cr_assert_eq(fake_server_call(&rx, "GET", "/_fake/requests", NULL,
				      &body), 200);
	v = json_loads(body, 0, NULL);
	free(body);
	json_array_foreach(v, i, r) {
		json_t *ev = json_object_get(json_object_get(r, "json"),
					     "event");
		const char *id = json_string_value(json_object_get(ev, "id"));
		const char *kind = json_string_value(json_object_get(ev,
								     "kind"));
		json_t *list;

		if (json_integer_value(json_object_get(r, "status")) != 200)
			continue;
		cr_assert_not_null(id);
		cr_assert_null(json_object_get(seen, id), "%s posted twice",
			       id);
		json_object_set_new(seen, id, json_true());
		list = json_object_get(by_kind, kind);
		if (!list) {
			list = json_array();
			json_object_set_new(by_kind, kind, list);
		}
		json_array_append(list, ev);
	}
	json_decref(seen);
	json_decref(v);
	return by_kind;
}

Test(local_notify, a_crash_a_preemption_and_the_end_each_post_once)
{
	char hook[160], sync[HARNESS_PATH + 32], script[HARNESS_PATH + 32];
	const char *src = getenv("SLICECTL_SRCDIR");
	struct run_result r;
	json_t *s, *got, *restarts, *ev;
	bool trainer = false, preemption = false;
	size_t i;

	setup();
	cr_assert_eq(fake_server_start(&rx, "tests/fakes/notify_receiver.py",
				       NULL), 0);
	rx_up = true;
	cr_assert_eq(fake_server_faults(&rx, "[{\"method\": \"POST\", "
					"\"count\": 2, \"reset\": true}, "
					"{\"method\": \"POST\", \"count\": 1, "
					"\"status\": 500}]"), 0);
	snprintf(hook, sizeof(hook), "%s/hooks/run", rx.base);
	snprintf(sync, sizeof(sync), "SGD_SYNC_DIR=%s/sync", dir);
	snprintf(script, sizeof(script), "%s/examples/sgd", src ? src : ".");
	cr_assert_eq(run_slicectl(&r, (const char *const[]){
		"job", "--local", "--name", "noisy", "--bucket", bucket,
		"--num-slices", "2", "--workers-per-slice", "1",
		"--script-dir", script, "--command", "exec python3 train.py",
		"--env", "SGD_STEPS=" STEPS, "--env", "SGD_STEP_S=0.02",
		"--env", "SGD_CKPT_EVERY=50", "--env", sync,
		"--hang-timeout", "8s", "--grace", "5s",
		"--max-restarts", "30", "--format", "json",
		"--notify", hook,
		"--chaos", "crash:worker=1@1s,preempt:slice=1@3s", NULL },
		(const char *const[]){ "SLICECTL_HTTP_RETRY_BASE_MS=200",
				       "SLICE_NOTIFY_PERIOD_MS=500", NULL }),
		0);
	cr_assert_eq(r.status, 0, "status %d\n%s\n%s", r.status, r.out, r.err);
	s = local_summary(r.out);
	cr_assert_not_null(s, "no summary:\n%s", r.out);
	cr_assert_str_eq(json_string_value(json_object_get(s, "end")), "done");
	cr_assert_eq(json_integer_value(json_object_get(s, "steps_done")),
		     atoi(STEPS), "%s", r.out);

	got = delivered();
	restarts = json_object_get(got, "restart");
	cr_expect_eq(json_array_size(restarts),
		     (size_t)json_integer_value(json_object_get(s, "restarts")),
		     "%s", r.out);
	cr_expect_geq(json_array_size(restarts), 2);
	json_array_foreach(restarts, i, ev) {
		json_t *c = json_object_get(ev, "cause");
		const char *cls = json_string_value(json_object_get(c,
								    "class"));
		const char *kind = json_string_value(json_object_get(c,
								     "kind"));

		cr_assert_not_null(cls);
		cr_assert_not_null(json_object_get(c, "worker"));
		cr_assert_not_null(json_object_get(c, "why"));
		trainer |= !strcmp(cls, "trainer");
		preemption |= !strcmp(kind, "preemption");
	}
	cr_expect(trainer, "no restart of the trainer's");
	cr_expect(preemption, "no restart for the preemption");
	cr_expect_eq(json_array_size(json_object_get(got, "done")), 1);
	cr_expect_null(json_object_get(got, "failed"));
	json_decref(got);
	json_decref(s);
	run_result_release(&r);
	/* The receiver's environment names dir (SLICECTL_HOME). */
	fake_server_stop(&rx);
	rx_up = false;
	cr_assert_eq(processes_mentioning(dir), 0);
}

Test(local_notify, a_bad_notify_url_is_a_usage_error_before_anything)
{
	struct run_result r;
	char path[HARNESS_PATH + 64];
	struct stat st;

	setup();
	cr_assert_eq(run_slicectl(&r, (const char *const[]){
		"job", "--local", "--name", "bad", "--bucket", bucket,
		"--workers-per-slice", "1", "--command", "true",
		"--notify", "https://ok.example/x", "--notify",
		"slack.com/hook", NULL }, NULL), 0);
	cr_expect_eq(r.status, 2, "%s%s", r.out, r.err);
	cr_expect_not_null(strstr(r.err, "--notify: notification URL "
					 "\"slack.com/hook\" is not http:// "
					 "or https://"), "%s", r.err);
	run_result_release(&r);
	snprintf(path, sizeof(path), "%s/bucket/bad", dir);
	cr_expect_neq(stat(path, &st), 0, "the run was created");
}
