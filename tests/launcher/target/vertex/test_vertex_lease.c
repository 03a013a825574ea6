/*
 * The watch lease on Vertex AI, against tests/fakes/vertex_fake.py with
 * no capacity (held PENDING, so no replica runs): a FLEX_START CustomJob
 * fails once its --max-wait passes, and the watchers of the run
 * (slicectl job --watch and slicectl watch) post it again. One holds the
 * lease and posts once per failure while the other waits; SIGKILLed, it
 * is taken over within the lease and the run goes on, each failure
 * answered by exactly one new CustomJob and one bump.
 */
#include "tests/harness/harness.h"
#include "tests/launcher/target/gke/gke_live_check.h"
#include "tests/launcher/target/vertex/vertex_check.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

TestSuite(vertex_lease, .init = setup, .fini = cleanup, .timeout = 180);

#define LEASE "1.5"
#define LEASE_MS 1500

static pid_t pids[2];

static void stop_all(void)
{
	for (size_t i = 0; i < 2; i++)
		if (pids[i] > 0)
			wait_exit(pids[i], 1);
}

/* How many CustomJobs were posted. */
static size_t posted(void)
{
	json_t *all = NULL, *q;
	size_t i, n = 0;

	cr_assert_eq(api("GET", "/_fake/requests", NULL, &all), 200);
	json_array_foreach(all, i, q) {
		const char *p = json_string_value(json_object_get(q, "path"));
		const char *m = json_string_value(json_object_get(q, "method"));

		n += p && m && !strcmp(m, "POST") &&
		     strlen(p) > 11 && !strcmp(p + strlen(p) - 11, "/customJobs");
	}
	json_decref(all);
	return n;
}

static char *text_of(const char *path)
{
	char *t = read_file(path, NULL);

	return t ? t : strdup("");
}

static void wait_text(const char *path, const char *needle, long long ms)
{
	for (long long until = now_ms() + ms;; sleep_ms(50)) {
		char *t = text_of(path);
		bool found = strstr(t, needle) != NULL;

		if (found || now_ms() > until)
			cr_assert(found, "no '%s' in %s:\n%s", needle, path, t);
		free(t);
		if (found)
			return;
	}
}

static void wait_posted(size_t n)
{
	for (long long until = now_ms() + 60000; posted() < n; sleep_ms(200))
		cr_assert_lt(now_ms(), until, "%zu CustomJobs posted, not %zu",
			     posted(), n);
}

Test(vertex_lease, one_watcher_posts_once_per_failure_and_another_takes_over,
     .fini = stop_all)
{
	char a_out[HARNESS_PATH + 16], a_err[HARNESS_PATH + 16];
	char b_out[HARNESS_PATH + 16], b_err[HARNESS_PATH + 16], *o;
	struct run_result r;
	long long gen, killed;
	size_t n;
	int status;

	vertex_fake_start();
	POST("/_fake/config", "{\"hold\": true}");
	snprintf(a_out, sizeof(a_out), "%s/a.out", dir);
	snprintf(a_err, sizeof(a_err), "%s/a.err", dir);
	snprintf(b_out, sizeof(b_out), "%s/b.out", dir);
	snprintf(b_err, sizeof(b_err), "%s/b.err", dir);
	pids[0] = spawn_slicectl((const char *const[]){
		"job", "vl", "--target", "vertex", "--region", "us-central1",
		"--project", "proj", "--accelerator-type", "g2-standard-4",
		"--nodes", "2", "--image", "python:3.12", "--bucket", bucket,
		"--command", "true", "--flex-start", "--max-wait", "1",
		"--watch", "--lease", LEASE, "--recreate-budget", "50", NULL },
		a_out, a_err);
	cr_assert_gt(pids[0], 0);
	wait_text(a_out, "holding the watch lease", 30000);
	pids[1] = spawn_slicectl((const char *const[]){
		"watch", "vl", "--bucket", bucket, "--lease", LEASE,
		"--recreate-budget", "50", NULL }, b_out, b_err);
	cr_assert_gt(pids[1], 0);
	wait_text(b_out, "waiting", 30000);

	/* Two failures, each posted again by the holder alone. */
	wait_posted(3);
	o = text_of(b_out);
	cr_assert_null(strstr(o, "holding the watch lease"), "%s", o);
	free(o);

	cr_assert_eq(kill(pids[0], SIGKILL), 0);
	cr_assert_eq(wait_exit(pids[0], 10), 128 + SIGKILL);
	pids[0] = 0;
	killed = now_ms();
	wait_text(b_out, "holding the watch lease", 3 * LEASE_MS);
	fprintf(stderr, "vertex takeover %lld ms after SIGKILL (lease %d "
		"ms)\n", now_ms() - killed, LEASE_MS);
	/* The run goes on under the new holder. */
	n = posted();
	wait_posted(n + 2);

	cr_assert_eq(run_slicectl(&r, (const char *const[]){
			"stop", "vl", "--bucket", bucket, NULL }, NULL), 0);
	cr_assert_eq(r.status, 0, "%s%s", r.out, r.err);
	run_result_release(&r);
	status = wait_exit(pids[1], 30);
	pids[1] = 0;
	o = text_of(b_out);
	cr_assert_eq(status, 0, "exit %d\n%s", status, o);
	free(o);
	/* Each failure: one bump and one CustomJob, across the takeover. */
	gen = generation_of(status_json("vl"));
	cr_assert_eq((long long)posted(), gen, "%zu posted, generation %lld",
		     posted(), gen);
}
