/*
 * The watch lease (launcher/watch_lease.h) against tests/fakes/tpu_fake.py
 * and a file:// bucket: of two watchers of one run (slicectl job --watch
 * and slicectl watch) one holds the lease and the other waits, and each
 * preemption is recreated once; the holder SIGKILLed mid-recreation is
 * taken over within the lease, and the recreation finished, not repeated;
 * a lease record of bad JSON or of a foreign holder is said and waited
 * out; slicectl watch's refusals; a quarantined host gets its run one new
 * queued resource across watchers, and a run not running none.
 */
#include "cloud/cloud.h"
#include "run/run.h"
#include "tests/cloud/fake_tpu.h"
#include "tests/harness/harness.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define ZONE "us-central2-b"
#define QR_PATH "/v2alpha1/projects/proj/locations/" ZONE "/queuedResources"
#define LEASE "1.5"
#define LEASE_MS 1500

static struct fake_tpu tpu;
static char tmp[HARNESS_PATH], bucket[HARNESS_PATH + 32];
static char env_endpoint[128], env_home[HARNESS_PATH + 32];
static const char *env[10];
static pid_t pids[2];

static void up(void)
{
	cr_assert_eq(fake_tpu_start(&tpu, (const char *const[]){
					 "--delay", "0.05", NULL }),
		     0, "the TPU fake did not start");
	cr_assert_eq(make_temp_dir(tmp, sizeof(tmp), "lease"), 0);
	snprintf(bucket, sizeof(bucket), "file://%s/bucket", tmp);
	snprintf(env_endpoint, sizeof(env_endpoint), "SLICECTL_TPU_ENDPOINT=%s",
		 tpu.base);
	snprintf(env_home, sizeof(env_home), "SLICECTL_HOME=%s/home", tmp);
	env[0] = env_endpoint;
	env[1] = env_home;
	env[2] = "SLICECTL_ACCESS_TOKEN=test-token";
	env[3] = "SLICECTL_TPU_POLL_MS=20";
	env[4] = "SLICECTL_HTTP_RETRY_BASE_MS=10";
	env[5] = "CLOUDSDK_CORE_PROJECT=proj";
	env[6] = "CLOUDSDK_COMPUTE_ZONE=" ZONE;
	env[7] = NULL;
	for (size_t i = 0; env[i]; i++)
		cr_assert_eq(putenv((char *)env[i]), 0);
}

static void down(void)
{
	for (size_t i = 0; i < 2; i++)
		if (pids[i] > 0)
			wait_exit(pids[i], 1);
	fake_tpu_stop(&tpu);
	rm_rf(tmp);
}

TestSuite(lease, .init = up, .fini = down, .timeout = 120);

struct watcher {
	pid_t pid;
	char out[HARNESS_PATH + 32], err[HARNESS_PATH + 32];
};

/* slicectl argv in the background, its outputs under tmp as tag.out and
 * tag.err; slot says which pid down() stops should the test fail. */
static void spawn(struct watcher *w, int slot, const char *tag,
		  const char *const *argv)
{
	snprintf(w->out, sizeof(w->out), "%s/%s.out", tmp, tag);
	snprintf(w->err, sizeof(w->err), "%s/%s.err", tmp, tag);
	w->pid = spawn_slicectl(argv, w->out, w->err);
	cr_assert_gt(w->pid, 0);
	pids[slot] = w->pid;
}

static void job_watch(struct watcher *w, const char *run)
{
	spawn(w, 0, "a", (const char *const[]){
			"job", run, "--bucket", bucket, "--accelerator-type",
			"v4-8", "--command", "true", "--spot", "--watch",
			"--lease", LEASE, NULL });
}

static void watch(struct watcher *w, int slot, const char *tag,
		  const char *run)
{
	spawn(w, slot, tag, (const char *const[]){
			"watch", run, "--bucket", bucket, "--lease", LEASE,
			NULL });
}

static char *show(const char *path)
{
	char *t = read_file(path, NULL);

	return t ? t : strdup("");
}

/* Waits up to ms for needle in the file at path; the ms it took. */
static long long wait_text(const char *path, const char *needle,
			   long long ms)
{
	long long start = monotonic_ms();

	for (;;) {
		char *t = show(path);
		bool found = strstr(t, needle) != NULL;

		if (found || monotonic_ms() - start > ms) {
			cr_assert(found, "no '%s' within %lld ms in %s:\n%s",
				  needle, ms, path, t);
			free(t);
			return monotonic_ms() - start;
		}
		free(t);
		sleep_ms(20);
	}
}

static void wait_qr_state(const char *name, const char *want)
{
	char path[256];

	snprintf(path, sizeof(path), QR_PATH "/%s", name);
	fake_tpu_wait_qr_state(&tpu, path, want);
}

static void assert_changes(const char *want)
{
	char got[512];

	fake_tpu_qr_changes(&tpu, got, sizeof(got));
	cr_assert_str_eq(got, want);
}

static struct store *run_store(const char *run)
{
	char url[HARNESS_PATH + 64];
	struct store *s;
	struct err e;

	snprintf(url, sizeof(url), "%s/%s", bucket, run);
	cr_assert_eq(store_open(&s, url, &e), 0, "%s", e.msg);
	return s;
}

static int64_t generation(const char *run)
{
	struct store *s = run_store(run);
	struct control c;
	struct err e;

	cr_assert_eq(control_load(s, &c, &e), 0, "%s", e.msg);
	store_close(s);
	return c.generation;
}

static void set_done(const char *run)
{
	struct store *s = run_store(run);
	struct control c;
	struct err e;

	cr_assert_eq(control_set_state(s, NULL, "done", "finished", "test", &c,
				       &e), 0, "%s", e.msg);
	store_close(s);
}

static void exits(struct watcher *w, int slot, int want)
{
	int status = wait_exit(w->pid, 30);
	char *o = show(w->out), *er = show(w->err);

	pids[slot] = 0;
	cr_assert_eq(status, want, "exit %d\nstdout:\n%s\nstderr:\n%s", status,
		     o, er);
	free(o);
	free(er);
}

/* How many queued resources the fake has. */
static size_t qrs(void)
{
	json_t *j = fake_tpu_get(&tpu, QR_PATH);
	size_t n = json_array_size(json_object_get(j, "queuedResources"));

	json_decref(j);
	return n;
}

Test(lease, two_watchers_one_holds_one_recreation_per_preemption)
{
	struct watcher a, b;
	char holder[64], *o;

	job_watch(&a, "l1");
	wait_qr_state("l1", "ACTIVE");
	wait_text(a.out, "holding the watch lease", 20000);
	watch(&b, 1, "b", "l1");
	snprintf(holder, sizeof(holder), ":%ld:", (long)a.pid);
	wait_text(b.out, "waiting", 20000);
	o = show(b.out);
	ASSERT_HAS(o, "the run is watched by");
	ASSERT_HAS(o, holder);
	ASSERT_HAS(o, "its lease expires at");
	free(o);

	for (int i = 0; i < 2; i++) {
		fake_tpu_suspend(&tpu, "l1");
		fake_tpu_wait_changes(&tpu, i ? "POST DELETE POST DELETE POST"
			       : "POST DELETE POST");
		wait_qr_state("l1", "ACTIVE");
	}
	/* A lease and more for the waiting watcher to act, if it would. */
	sleep_ms(2 * LEASE_MS);
	assert_changes("POST DELETE POST DELETE POST");
	cr_assert_eq(fake_tpu_count(&tpu, "POST", "/queuedResources"), 3);
	cr_assert_eq(generation("l1"), 3);
	o = show(b.out);
	cr_assert_null(strstr(o, "holding the watch lease"), "%s", o);
	free(o);

	/* The holder ends with the run and lets go; the other takes the
	 * lease, finds the run done and ends too. */
	set_done("l1");
	exits(&a, 0, 0);
	exits(&b, 1, 0);
	o = show(b.out);
	ASSERT_HAS(o, "holding the watch lease");
	ASSERT_HAS(o, "run: done");
	free(o);
	cr_assert_eq(qrs(), 1);
}

/* slicectl job --watch of run as a, holding the lease, and slicectl
 * watch of it as b, waiting. */
static void held_and_waiting(struct watcher *a, struct watcher *b,
			     const char *run)
{
	job_watch(a, run);
	wait_qr_state(run, "ACTIVE");
	wait_text(a->out, "holding the watch lease", 20000);
	watch(b, 1, "b", run);
	wait_text(b->out, "waiting", 20000);
}

/* The watcher in slot ended by SIGKILL, leaving its lease behind. */
static void killed(struct watcher *w, int slot)
{
	cr_assert_eq(kill(w->pid, SIGKILL), 0);
	cr_assert_eq(wait_exit(w->pid, 10), 128 + SIGKILL);
	pids[slot] = 0;
}

Test(lease, the_holder_killed_mid_recreation_is_taken_over_within_the_lease)
{
	struct watcher a, b;
	long long took;
	char *o;

	held_and_waiting(&a, &b, "l2");

	/* The holder bumps, asks for the deletion and waits in it. */
	cr_assert_eq(fake_tpu_config(&tpu, "{\"delays\": {\"DELETING\": -1}}"),
		     0);
	fake_tpu_suspend(&tpu, "l2");
	wait_qr_state("l2", "DELETING");
	killed(&a, 0);
	took = wait_text(b.out, "holding the watch lease", 3 * LEASE_MS);
	fprintf(stderr, "takeover %lld ms after SIGKILL (lease %d ms)\n", took,
		LEASE_MS);
	/* Within the lease, with room for a loaded machine's polls. */
	cr_assert_leq(took, LEASE_MS + 1000, "took %lld ms", took);
	wait_text(b.out, "a recreation of l2", 5000);

	cr_assert_eq(fake_tpu_config(&tpu, "{\"delays\": {\"DELETING\": "
					   "0.05}}"), 0);
	fake_tpu_wait_changes(&tpu, "POST DELETE POST");
	wait_qr_state("l2", "ACTIVE");
	sleep_ms(LEASE_MS);
	assert_changes("POST DELETE POST");
	cr_assert_eq(qrs(), 1);
	/* One bump for one preemption, across the takeover. */
	cr_assert_eq(generation("l2"), 2);

	set_done("l2");
	exits(&b, 1, 0);
	/* It followed the deletion under way, or (when it looked after the
	 * deletion ended, as under ASan) asked for the queued resource
	 * again itself: either way once, as the changes above show. */
	o = show(b.out);
	cr_assert(strstr(o, "following it") || strstr(o, ": asked for again"),
		  "%s", o);
	free(o);
}

/* Writes text as run's watch.lease. */
static void put_lease(const char *run, const char *text)
{
	struct store *s = run_store(run);
	struct err e;

	cr_assert_eq(store_put(s, "watch.lease", text, strlen(text),
			       STORE_ANY_GENERATION, NULL, &e), 0, "%s", e.msg);
	store_close(s);
}

/* Another host's lease on run, expiring in ms. */
static void put_foreign(const char *run, const char *holder, long long ms)
{
	struct timespec ts;
	char text[512];

	clock_gettime(CLOCK_REALTIME, &ts);
	snprintf(text, sizeof(text),
		 "{\"holder\": \"%s\", \"acquired\": "
		 "\"2026-01-01T00:00:00Z\", \"expires_ms\": %lld, "
		 "\"lease_ms\": 30000, \"recreating\": null}", holder,
		 (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000 + ms);
	put_lease(run, text);
}

static bool lease_exists(const char *run)
{
	struct store *s = run_store(run);
	struct store_object o = { 0 };
	struct err e;
	int rc = store_stat(s, "watch.lease", &o, &e);

	store_object_release(&o);
	store_close(s);
	return rc == 0;
}

static void plain_job(const char *run)
{
	struct run_result r;

	cr_assert_eq(run_slicectl(&r, (const char *const[]){
			"job", run, "--bucket", bucket, "--accelerator-type",
			"v4-8", "--command", "true", "--spot", NULL }, NULL), 0);
	cr_assert_eq(r.status, 0, "%s%s", r.out, r.err);
	run_result_release(&r);
	wait_qr_state(run, "ACTIVE");
}

Test(lease, a_foreign_holder_and_bad_json_are_said_and_waited_out)
{
	struct watcher b, c;
	char *o;
	long long took;

	plain_job("l3");
	put_foreign("l3", "elsewhere:1:cafe", 2500);
	watch(&b, 1, "b", "l3");
	wait_text(b.out, "the run is watched by elsewhere:1:cafe", 10000);
	took = wait_text(b.out, "the lease of elsewhere:1:cafe has expired: "
				"taking over", 10000);
	cr_assert_geq(took, 1000, "took it over after %lld ms", took);
	wait_text(b.out, "holding the watch lease", 5000);
	set_done("l3");
	exits(&b, 1, 0);
	/* Released as it ended. */
	cr_assert_not(lease_exists("l3"));

	put_lease("l3", "{\"holder\": tru");
	watch(&c, 1, "c", "l3");
	wait_text(c.err, "is not a watch lease (it is not JSON", 10000);
	took = wait_text(c.out, "holding the watch lease", 10000);
	exits(&c, 1, 0);
	o = show(c.err);
	ASSERT_HAS(o, "watch.lease");
	free(o);
	cr_assert_geq(took, LEASE_MS / 2, "took it over after %lld ms", took);
}

static void refused(int want, const char *needle, const char *const *argv)
{
	struct run_result r;

	cr_assert_eq(run_slicectl(&r, argv, (const char *const[]){
					  "SLICECTL_BUCKET=", NULL }), 0);
	cr_assert_eq(r.status, want, "exit %d\n%s%s", r.status, r.out, r.err);
	ASSERT_HAS(r.err, needle);
	run_result_release(&r);
}

/* job.json of run as another target's (kind and its fields, JSON),
 * through the store, which keeps each object's CRC32C. */
static void retarget(const char *run, const char *target)
{
	struct store *s = run_store(run);
	char *data = NULL, *text;
	size_t len = 0;
	json_t *j;
	struct err e;

	cr_assert_eq(store_read(s, "job.json", 1 << 20, &data, &len, NULL, &e),
		     0, "%s", e.msg);
	j = json_loads(data, 0, NULL);
	free(data);
	cr_assert(json_is_object(j));
	json_object_del(j, "tpu");
	json_object_set_new(j, "target", json_loads(target, 0, NULL));
	text = json_dumps(j, JSON_COMPACT);
	json_decref(j);
	cr_assert_eq(store_put(s, "job.json", text, strlen(text),
			       STORE_ANY_GENERATION, NULL, &e), 0, "%s", e.msg);
	free(text);
	store_close(s);
}

Test(lease, watch_refuses_what_it_cannot_watch)
{
	plain_job("l4");
	refused(4, "no run nope under", (const char *const[]){
			"watch", "nope", "--bucket", bucket, NULL });
	refused(2, "needs the run's bucket", (const char *const[]){
			"watch", "l4", NULL });
	refused(2, "progress lines only", (const char *const[]){
			"watch", "l4", "--bucket", bucket, "--format", "json",
			NULL });
	refused(2, "--lease takes from 0.3 s to 1 h", (const char *const[]){
			"watch", "l4", "--bucket", bucket, "--lease", "0.1",
			NULL });
	refused(2, "--lease is the lease of --watch", (const char *const[]){
			"job", "l5", "--bucket", bucket, "--accelerator-type",
			"v4-8", "--command", "true", "--lease", "5", NULL });
	retarget("l4", "{\"kind\": \"slurm\", \"partition\": \"p\", "
		       "\"job_id\": \"7\"}");
	refused(2, "requeues itself", (const char *const[]){
			"watch", "l4", "--bucket", bucket, NULL });
	retarget("l4", "{\"kind\": \"local\"}");
	refused(2, "runs the workers itself", (const char *const[]){
			"watch", "l4", "--bucket", bucket, NULL });
	cr_assert_not(lease_exists("l4"));
}

/* The create body of the n-th create (from 0), as the fake recorded it. */
static json_t *create_body(size_t n)
{
	json_t *all = fake_tpu_requests(&tpu), *q, *found = NULL;
	size_t i;

	json_array_foreach(all, i, q) {
		const char *p = json_string_value(json_object_get(q, "path"));
		const char *m = json_string_value(json_object_get(q, "method"));

		if (p && m && !strcmp(m, "POST") && strstr(p, "queuedResources") &&
		    !strstr(p, ":") && !n--) {
			found = json_incref(json_object_get(q, "body"));
			break;
		}
	}
	json_decref(all);
	cr_assert_not_null(found, "no such create");
	return found;
}

/* slicectl watch alone asks again for what the queued resource says it
 * is: job.json does not keep its shape. */
Test(lease, slicectl_watch_recreates_the_qr_as_it_was)
{
	struct watcher b;
	json_t *first, *again;

	plain_job("l6");
	watch(&b, 1, "b", "l6");
	wait_text(b.out, "holding the watch lease", 20000);
	fake_tpu_suspend(&tpu, "l6");
	fake_tpu_wait_changes(&tpu, "POST DELETE POST");
	wait_qr_state("l6", "ACTIVE");
	first = create_body(0);
	again = create_body(1);
	cr_assert(json_equal(json_object_get(first, "tpu"),
			     json_object_get(again, "tpu")),
		  "asked for %s\nthen %s", json_dumps(first, 0),
		  json_dumps(again, 0));
	cr_assert(json_equal(json_object_get(first, "spot"),
			     json_object_get(again, "spot")));
	json_decref(first);
	json_decref(again);
	cr_assert_eq(generation("l6"), 2);
	set_done("l6");
	exits(&b, 1, 0);
}

/* A holder whose lease another wrote over stops acting at once, says so,
 * and waits for that lease to expire before it acts again. */
Test(lease, a_holder_that_loses_its_lease_stops_acting_and_waits)
{
	struct watcher b;
	char *o;

	plain_job("l7");
	watch(&b, 1, "b", "l7");
	wait_text(b.out, "holding the watch lease", 20000);
	put_foreign("l7", "thief:2:beef", 4000);
	wait_text(b.out, "lost the watch lease (another watcher wrote it", 5000);
	wait_text(b.out, "the run is watched by thief:2:beef", 5000);
	fake_tpu_suspend(&tpu, "l7");
	wait_qr_state("l7", "SUSPENDED");
	/* The thief's lease still runs: nothing is done meanwhile. */
	sleep_ms(1500);
	assert_changes("POST");
	cr_assert_eq(generation("l7"), 1);
	wait_text(b.out, "the lease of thief:2:beef has expired", 10000);
	fake_tpu_wait_changes(&tpu, "POST DELETE POST");
	wait_qr_state("l7", "ACTIVE");
	cr_assert_eq(generation("l7"), 2);
	set_done("l7");
	exits(&b, 1, 0);
	o = show(b.out);
	cr_assert_eq(count_substr(o, "holding the watch lease"), 2, "%s", o);
	free(o);
}

/* Two failures of run's trainer on host, both blamed on it (SIGSEGV):
 * the second quarantines it, and fails the run when max_restarts is 1. */
static void quarantine(const char *run, const char *host,
		       unsigned max_restarts)
{
	struct store *s = run_store(run);
	struct control c, after;
	struct gen_cause cause;
	struct job j;
	struct err e;

	job_init(&j);
	j.max_restarts = max_restarts;
	for (int i = 0; i < 2; i++) {
		cr_assert_eq(control_load(s, &c, &e), 0, "%s", e.msg);
		gen_cause_init(&cause, CAUSE_TRAINER, "signal",
			       "slice-0-worker-0");
		cause.signal = SIGSEGV;
		snprintf(cause.host, sizeof(cause.host), "%s", host);
		snprintf(cause.blame, sizeof(cause.blame), "SIGSEGV");
		cr_assert_eq(control_bump_cause(s, NULL, &c, &j, &cause,
						"trainer crashed",
						"slice-0-worker-0", -1, &after,
						&e), 0, "%s", e.msg);
	}
	cr_assert_eq(after.nquarantined, 1);
	job_release(&j);
	store_close(s);
}

/* How many "recreated" events run's history holds, and whether one has
 * cause why. */
static size_t recreated_events(const char *run, const char *why,
			       bool *found)
{
	struct run_result r;
	size_t n = 0;

	cr_assert_eq(run_slicectl(&r, (const char *const[]){
			"events", run, "--bucket", bucket, "--format", "json",
			NULL }, NULL), 0);
	cr_assert_eq(r.status, 0, "%s%s", r.out, r.err);
	*found = false;
	for (char *save = NULL, *line = strtok_r(r.out, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save)) {
		json_t *ev = json_loads(line, 0, NULL);
		const char *kind = json_string_value(json_object_get(ev,
								     "kind"));
		const char *cause = json_string_value(json_object_get(ev,
								      "cause"));

		if (kind && !strcmp(kind, "recreated")) {
			n++;
			*found |= cause && !strcmp(cause, why);
		}
		json_decref(ev);
	}
	run_result_release(&r);
	return n;
}

/* watch.json's quarantines_acted. */
static json_int_t quarantines_acted(const char *run)
{
	char path[HARNESS_PATH + 64];
	json_t *j;
	json_int_t n;

	snprintf(path, sizeof(path), "%s/bucket/%s/watch.json", tmp, run);
	j = json_load_file(path, 0, NULL);
	cr_assert_not_null(j, "no %s", path);
	n = json_integer_value(json_object_get(j, "quarantines_acted"));
	json_decref(j);
	return n;
}

/* A quarantined host takes a new VM set: the holder recreates the queued
 * resource once, and neither the watcher that takes its lease over nor
 * one started afresh does so again for that host. */
Test(lease, a_quarantined_host_is_recreated_once_across_watchers)
{
	struct watcher a, b, c;
	bool found;
	char *o;

	held_and_waiting(&a, &b, "q1");

	quarantine("q1", "host-7", 5);
	fake_tpu_wait_changes(&tpu, "POST DELETE POST");
	wait_qr_state("q1", "ACTIVE");
	wait_text(a.out, "q1: asked for again", 5000);
	cr_assert_eq(recreated_events("q1", "host host-7 quarantined: SIGSEGV",
				      &found), 1);
	cr_assert(found);
	cr_assert_eq(quarantines_acted("q1"), 1);
	/* Two trainer failures, then the recreation's bump. */
	cr_assert_eq(generation("q1"), 4);

	killed(&a, 0);
	wait_text(b.out, "holding the watch lease", 3 * LEASE_MS);
	sleep_ms(2 * LEASE_MS);
	killed(&b, 1);
	watch(&c, 1, "c", "q1");
	wait_text(c.out, "holding the watch lease", 3 * LEASE_MS);
	sleep_ms(2 * LEASE_MS);

	assert_changes("POST DELETE POST");
	cr_assert_eq(fake_tpu_count(&tpu, "POST", "/queuedResources"), 2);
	cr_assert_eq(generation("q1"), 4);
	cr_assert_eq(quarantines_acted("q1"), 1);
	set_done("q1");
	exits(&c, 1, 0);
	o = show(c.out);
	cr_assert_null(strstr(o, "deleting it"), "%s", o);
	free(o);
}

/* Only a running run gets a new VM set: not one the quarantining failure
 * failed (its budget spent), nor one stopping. */
Test(lease, a_quarantine_of_a_run_not_running_recreates_nothing)
{
	struct watcher a, b;
	struct store *s;
	struct control c;
	struct err e;
	bool found;
	char *o;

	job_watch(&a, "q2");
	wait_qr_state("q2", "ACTIVE");
	wait_text(a.out, "holding the watch lease", 20000);
	quarantine("q2", "host-3", 1);
	exits(&a, 0, 1);
	o = show(a.err);
	ASSERT_HAS(o, "the run failed");
	free(o);

	plain_job("q3");
	quarantine("q3", "host-4", 5);
	s = run_store("q3");
	cr_assert_eq(control_set_state(s, NULL, "stopping", "stop", "test", &c,
				       &e), 0, "%s", e.msg);
	store_close(s);
	watch(&b, 1, "b", "q3");
	wait_text(b.out, "holding the watch lease", 20000);
	sleep_ms(2 * LEASE_MS);
	set_done("q3");
	exits(&b, 1, 0);

	assert_changes("POST POST");
	cr_assert_eq(recreated_events("q2", "", &found), 0);
	cr_assert_eq(recreated_events("q3", "", &found), 0);
	cr_assert_eq(generation("q3"), 3);
}
