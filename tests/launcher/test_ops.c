/*
 * slicectl status, logs, restart and stop, end to end, against a run's
 * state built directly in a file:// bucket (job.json, control.json,
 * heartbeats, logs, checkpoints): no supervisor runs. What each command
 * prints is compared whole, with heartbeat ages (which move with the
 * clock) written as "Ns" on both sides.
 */
#define _GNU_SOURCE /* asprintf */

#include "checkpoint/checkpoint.h"
#include "cloud/cloud.h"
#include "supervisor/supervisor.h"
#include "tests/harness/harness.h"

#include <criterion/criterion.h>

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char tmp[HARNESS_PATH];
static char bucket[HARNESS_PATH + 32];
static char url[HARNESS_PATH + 64];
static struct store *st;

static void up(void)
{
	struct err e;

	unsetenv("SLICECTL_BUCKET");
	log_setup("test_ops", LOG_ERROR);
	cr_assert_eq(make_temp_dir(tmp, sizeof(tmp), "ops"), 0);
	snprintf(bucket, sizeof(bucket), "file://%s/bucket", tmp);
	snprintf(url, sizeof(url), "%s/run-1", bucket);
	cr_assert_eq(store_open(&st, url, &e), 0, "%s", e.msg);
}

static void down(void)
{
	store_close(st);
	st = NULL;
	rm_rf(tmp);
}

TestSuite(status, .init = up, .fini = down, .timeout = 120);
TestSuite(args, .init = up, .fini = down, .timeout = 120);
TestSuite(restart, .init = up, .fini = down, .timeout = 120);
TestSuite(stop, .init = up, .fini = down, .timeout = 120);
TestSuite(logs, .init = up, .fini = down, .timeout = 120);

/* ---- building a run ---- */

static void put(const char *name, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void put(const char *name, const char *fmt, ...)
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

static void put_job(unsigned slices, unsigned workers, unsigned heartbeat_s,
		    unsigned max_restarts)
{
	put(RUN_JOB, "{\"name\": \"run-1\", \"command\": \"python3 train.py\", "
	    "\"num_slices\": %u, \"workers_per_slice\": %u, \"heartbeat_s\": "
	    "%u, \"max_restarts\": %u}\n", slices, workers, heartbeat_s,
	    max_restarts);
}

/* An RFC 3339 time age_s seconds ago. */
static void ago(char *out, size_t cap, long age_s)
{
	time_t t = time(NULL) - age_s;
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(out, cap, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static void put_control(long long gen, const char *state, const char *reason,
			const char *by, long age_s)
{
	char t[40];

	ago(t, sizeof(t), age_s);
	put(RUN_CONTROL, "{\"generation\": %lld, \"state\": \"%s\", \"reason\": "
	    "\"%s\", \"updated_by\": \"%s\", \"restore_step\": null, \"time\": "
	    "\"%s\"}\n", gen, state, reason, by, t);
}

static void put_status(unsigned slice, unsigned worker, const char *state,
		       long long gen, long long step, long long committed,
		       unsigned restarts, const char *message, long age_s)
{
	char t[40], name[96];

	ago(t, sizeof(t), age_s);
	snprintf(name, sizeof(name), "status/slice-%u-worker-%u.json", slice,
		 worker);
	/* Worker 0/0 has measured an upload; the others have not. */
	put(name, "{\"slice\": %u, \"worker\": %u, \"state\": \"%s\", "
	    "\"generation\": %lld, \"step\": %lld, \"committed_step\": %lld, "
	    "\"restarts\": %u, \"message\": \"%s\", \"time\": \"%s\", "
	    "\"boot_id\": \"b-%u-%u\"%s}\n", slice, worker, state, gen, step,
	    committed, restarts, message, t, slice, worker,
	    slice || worker ? "" : ", \"upload_bytes_per_s\": 1048576");
}

/* This worker's part of step, in a step of `parts` parts. */
static void save_part(unsigned slice, unsigned worker, uint64_t step,
		      unsigned parts)
{
	struct ckpt_save_options o;
	struct ckpt_save_result r;
	char dir[HARNESS_PATH + 32], part[64];
	struct err e;

	snprintf(dir, sizeof(dir), "%s/ckpt-%u-%u", tmp, slice, worker);
	cr_assert_eq(sh("mkdir -p '%s' && echo %u-%u-%llu > '%s/weights'", dir,
			slice, worker, (unsigned long long)step, dir), 0);
	snprintf(part, sizeof(part), "slice-%u-worker-%u", slice, worker);
	ckpt_save_options_init(&o);
	o.part = part;
	o.parts_expected = parts;
	cr_assert_eq(ckpt_save(st, dir, step, &o, &r, &e), 0, "%s", e.msg);
}

/* Moves the time every object under checkpoints/step-N/ was written to
 * age_s seconds ago. */
static void age_step(uint64_t step, long age_s)
{
	cr_assert_eq(sh("find '%s/bucket/run-1/checkpoints/step-%010llu' "
			"-type f -exec touch -d '@%lld' {} +", tmp,
			(unsigned long long)step,
			(long long)(time(NULL) - age_s)), 0);
}

static struct control control_now(void)
{
	struct control c;
	struct err e;

	cr_assert_eq(control_load(st, &c, &e), 0, "%s", e.msg);
	return c;
}

/* ---- running slicectl ---- */

static int slicectl(struct run_result *r, const char *const *args)
{
	const char *argv[32];
	size_t n = 0;

	for (size_t i = 0; args[i]; i++)
		argv[n++] = args[i];
	argv[n] = NULL;
	cr_assert_eq(run_slicectl(r, argv, NULL), 0);
	return r->status;
}

/* Runs slicectl with "--bucket BUCKET" after args. */
static int ops(struct run_result *r, const char *const *args)
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

/* Heartbeat ages move with the clock: "17s" becomes "Ns". */
static char *ages_out(const char *s)
{
	char *out = malloc(strlen(s) + 1), *o = out;

	cr_assert_not_null(out);
	while (*s) {
		size_t d = strspn(s, "0123456789");

		if (d && s[d] == 's' && (o == out || o[-1] == ' ' ||
					 o[-1] == '(') &&
		    (!s[d + 1] || s[d + 1] == ' ' || s[d + 1] == '\n' ||
		     s[d + 1] == ')' || s[d + 1] == ';' || s[d + 1] == ',')) {
			*o++ = 'N';
			s += d;
			continue;
		}
		if (d) {
			memcpy(o, s, d);
			o += d;
			s += d;
			continue;
		}
		*o++ = *s++;
	}
	*o = '\0';
	return out;
}

#define assert_text(got, want) \
	do { \
		char *g_ = ages_out(got), *w_ = ages_out(want); \
		cr_assert_str_eq(g_, w_, "got:\n%s\nwanted:\n%s", g_, w_); \
		free(g_); \
		free(w_); \
	} while (0)

#define assert_has(text, needle) \
	cr_assert(strstr((text), (needle)), "expected '%s' in:\n%s", (needle), \
		  (text))

static json_t *parse(const char *text)
{
	json_error_t je;
	json_t *v = json_loads(text, 0, &je);

	cr_assert_not_null(v, "not JSON (%s): %s", je.text, text);
	return v;
}

/* A run of 3 slices x 2 workers at generation 3 (the last change 200 s
 * ago), heartbeat_s 10 (the window is 40 s): step 200 committed by all,
 * step 300 saved by four workers 100 s ago; one worker stale and behind,
 * one lagging, one finished long ago, one that never reported. */
static void busy_run(void)
{
	put_job(3, 2, 10, 100);
	put_control(3, "running", "trainer exited with status 1 on "
		    "slice-0-worker-1", "slice-0-worker-1", 200);
	for (unsigned i = 0; i < 6; i++)
		save_part(i / 2, i % 2, 200, 6);
	save_part(0, 0, 300, 6);
	save_part(0, 1, 300, 6);
	save_part(1, 0, 300, 6);
	save_part(2, 0, 300, 6);
	age_step(300, 100);
	put_status(0, 0, "running", 3, 300, 200, 3, "training", 2);
	put_status(0, 1, "running", 3, 300, 200, 3, "", 5);
	put_status(1, 0, "restoring", 2, 300, 200, 2,
		   "restoring for generation 2", 100);
	put_status(1, 1, "running", 3, 200, 200, 3, "training", 1);
	put_status(2, 0, "finished", 3, 300, 200, 3, "trainer exited 0", 100);
}

/* ---- status ---- */

Test(status, text_rows_and_stuck_workers)
{
	struct run_result r;
	char want[4096];

	busy_run();
	cr_assert_eq(ops(&r, (const char *[]){ "status", "run-1", NULL }), 0,
		     "%s", r.err);
	snprintf(want, sizeof(want),
		 "run:        run-1 (%s)\n"
		 "state:      running, generation 3\n"
		 "reason:     trainer exited with status 1 on slice-0-worker-1\n"
		 "updated:    %s by slice-0-worker-1\n"
		 "committed:  step 200\n"
		 "workers:    6 (3 slices x 2), 3 stuck\n"
		 "\n"
		 "WORKER  STATE      GEN  STEP  COMMITTED  RESTARTS  HEARTBEAT  "
		 "STUCK           MESSAGE\n"
		 "0/0     running    3    300   200        3         2s         "
		 "-               training\n"
		 "0/1     running    3    300   200        3         5s         "
		 "-\n"
		 "1/0     restoring  2    300   200        2         100s       "
		 "stale,behind    restoring for generation 2\n"
		 "1/1     running    3    200   200        3         1s         "
		 "lagging         training\n"
		 "2/0     finished   3    300   200        3         100s       "
		 "-               trainer exited 0\n"
		 "2/1     -          -    -     -          -         -          "
		 "silent,lagging\n"
		 "\n"
		 "stuck (see slicectl status --help for the rules):\n"
		 "  1/0 stale: no heartbeat for 100s (the window is 3 x "
		 "heartbeat_s 10 + 10 = 40s)\n"
		 "  1/0 behind: at generation 2, the run at 3 for 200s\n"
		 "  1/1 lagging: others saved step 300 (4 parts, the last 100s "
		 "ago); its trainer is at step 200\n"
		 "  2/1 silent: no heartbeat yet, 200s after control.json last "
		 "changed\n"
		 "  2/1 lagging: others saved step 300 (4 parts, the last 100s "
		 "ago); its trainer has written no step\n",
		 url, control_now().time);
	assert_text(r.out, want);
	cr_assert_str_eq(r.err, "");
	run_result_release(&r);
}

Test(status, json)
{
	struct run_result r;
	json_t *v, *w, *why;

	busy_run();
	cr_assert_eq(ops(&r, (const char *[]){ "status", "run-1", "--format",
					       "json", NULL }), 0, "%s", r.err);
	cr_assert_eq(count_substr(r.out, "\n"), 1, "one line: %s", r.out);
	v = parse(r.out);
	cr_assert_str_eq(json_string_value(json_object_get(v, "run")), "run-1");
	cr_assert_str_eq(json_string_value(json_object_get(v, "url")), url);
	cr_assert_str_eq(json_string_value(json_object_get(v, "state")),
			 "running");
	cr_assert_eq(json_integer_value(json_object_get(v, "generation")), 3);
	cr_assert_str_eq(json_string_value(json_object_get(v, "reason")),
			 "trainer exited with status 1 on slice-0-worker-1");
	cr_assert_str_eq(json_string_value(json_object_get(v, "updated_by")),
			 "slice-0-worker-1");
	cr_assert_eq(json_integer_value(json_object_get(v, "committed_step")),
		     200);
	cr_assert_eq(json_integer_value(json_object_get(v, "stuck")), 3);
	w = json_object_get(v, "workers");
	cr_assert_eq(json_array_size(w), 6);

	/* 0/1: fine, its heartbeat 5 s old. */
	cr_assert_eq(json_integer_value(json_object_get(json_array_get(w, 1),
							"slice")), 0);
	cr_assert_eq(json_integer_value(json_object_get(json_array_get(w, 1),
							"worker")), 1);
	cr_assert(json_is_false(json_object_get(json_array_get(w, 1),
						"stuck")));
	cr_assert_geq(json_integer_value(json_object_get(json_array_get(w, 1),
						"heartbeat_age_s")), 5);
	cr_assert_leq(json_integer_value(json_object_get(json_array_get(w, 1),
						"heartbeat_age_s")), 30);
	cr_assert_str_eq(json_string_value(json_object_get(
				 json_array_get(w, 1), "boot_id")), "b-0-1");
	/* The upload rate a worker measured, null before it has one. */
	cr_assert_eq(json_integer_value(json_object_get(json_array_get(w, 0),
						"upload_bytes_per_s")),
		     1048576);
	cr_assert(json_is_null(json_object_get(json_array_get(w, 1),
					       "upload_bytes_per_s")));

	/* 1/0: stale and behind. */
	why = json_object_get(json_array_get(w, 2), "stuck_reasons");
	cr_assert_eq(json_array_size(why), 2);
	cr_assert_str_eq(json_string_value(json_object_get(
				 json_array_get(why, 0), "rule")), "stale");
	cr_assert_str_eq(json_string_value(json_object_get(
				 json_array_get(why, 1), "rule")), "behind");
	cr_assert_eq(json_integer_value(json_object_get(json_array_get(w, 2),
							"generation")), 2);

	/* 2/1: never reported: nulls, silent and lagging. */
	cr_assert(json_is_null(json_object_get(json_array_get(w, 5), "state")));
	cr_assert(json_is_null(json_object_get(json_array_get(w, 5), "step")));
	cr_assert(json_is_null(json_object_get(json_array_get(w, 5),
					       "heartbeat_age_s")));
	cr_assert(json_is_true(json_object_get(json_array_get(w, 5), "stuck")));
	why = json_object_get(json_array_get(w, 5), "stuck_reasons");
	cr_assert_eq(json_array_size(why), 2);
	cr_assert_str_eq(json_string_value(json_object_get(
				 json_array_get(why, 0), "rule")), "silent");
	cr_assert_str_eq(json_string_value(json_object_get(
				 json_array_get(why, 1), "rule")), "lagging");
	json_decref(v);
	run_result_release(&r);
}

/* A run no supervisor has joined yet: nothing is flagged, and looking
 * creates nothing. */
Test(status, new_run_is_not_changed_by_looking)
{
	struct run_result r;
	struct store_object o;
	struct err e;
	json_t *v;

	put_job(1, 2, 10, 100);
	cr_assert_eq(ops(&r, (const char *[]){ "status", "run-1", NULL }), 0,
		     "%s", r.err);
	{
		char want[2048];

		snprintf(want, sizeof(want),
			 "run:        run-1 (%s)\n"
			 "state:      - (no control.json yet: no supervisor has "
			 "started)\n"
			 "committed:  none\n"
			 "workers:    2 (1 slice x 2), 0 stuck\n"
			 "\n"
			 "WORKER  STATE  GEN  STEP  COMMITTED  RESTARTS  "
			 "HEARTBEAT  STUCK  MESSAGE\n"
			 "0/0     -      -    -     -          -         -    "
			 "      -\n"
			 "0/1     -      -    -     -          -         -    "
			 "      -\n", url);
		assert_text(r.out, want);
	}
	run_result_release(&r);
	cr_assert_eq(ops(&r, (const char *[]){ "status", "run-1", "--format",
					       "json", NULL }), 0);
	v = parse(r.out);
	cr_assert(json_is_null(json_object_get(v, "state")));
	cr_assert(json_is_null(json_object_get(v, "generation")));
	cr_assert(json_is_null(json_object_get(v, "committed_step")));
	cr_assert_eq(json_array_size(json_object_get(v, "workers")), 2);
	json_decref(v);
	run_result_release(&r);
	cr_assert_eq(store_stat(st, RUN_CONTROL, &o, &e), CLOUD_ENOTFOUND);
}

/* The run ended: old heartbeats are no sign of trouble then. */
Test(status, nothing_is_stuck_when_the_run_is_over)
{
	struct run_result r;

	put_job(1, 2, 1, 100);
	put_control(2, "done", "every worker finished", "slice-0-worker-0",
		    500);
	put_status(0, 0, "finished", 2, 10, 10, 2, "", 400);
	put_status(0, 1, "exited", 1, 9, 9, 1, "", 400);
	cr_assert_eq(ops(&r, (const char *[]){ "status", "run-1", NULL }), 0);
	assert_has(r.out, "state:      done, generation 2\n");
	assert_has(r.out, "0 stuck\n");
	cr_assert_null(strstr(r.out, "stuck ("), "%s", r.out);
	run_result_release(&r);
}

/* ---- arguments, the bucket, missing runs ---- */

Test(args, missing_run_is_exit_4_and_creates_nothing)
{
	struct run_result r;
	const char *const cmds[] = { "status", "logs", "restart", "stop" };
	char dir[HARNESS_PATH + 64];
	struct stat sb;

	for (size_t i = 0; i < 4; i++) {
		cr_assert_eq(ops(&r, (const char *[]){ cmds[i], "nope",
						       NULL }), 4,
			     "%s: %d %s", cmds[i], r.status, r.err);
		assert_has(r.err, "no run nope under ");
		assert_has(r.err, bucket);
		cr_assert_str_eq(r.out, "");
		run_result_release(&r);
	}
	snprintf(dir, sizeof(dir), "%s/bucket/nope", tmp);
	cr_assert_neq(stat(dir, &sb), 0, "%s was created", dir);

	/* A prefix that exists, a run without job.json. */
	put("logs/slice-0-worker-0/gen-1.log", "x\n");
	cr_assert_eq(ops(&r, (const char *[]){ "status", "run-1", NULL }), 4);
	assert_has(r.err, "no run run-1 under ");
	run_result_release(&r);
}

Test(args, bad_flags_are_exit_2)
{
	struct run_result r;
	const char *const *cases[] = {
		(const char *[]){ "status", NULL },
		(const char *[]){ "status", "run-1", "run-2", NULL },
		(const char *[]){ "status", "run-1", "--nope", NULL },
		(const char *[]){ "status", "run-1", "--format", "xml", NULL },
		(const char *[]){ "status", "a/b", NULL },
		(const char *[]){ "logs", "run-1", "--worker", "1", NULL },
		(const char *[]){ "logs", "run-1", "--worker", "0/x", NULL },
		(const char *[]){ "logs", "run-1", "--generation", "0", NULL },
		(const char *[]){ "logs", "run-1", "--interval", "0.01", "-f",
				  NULL },
		(const char *[]){ "restart", "run-1", "--reason", "a\nb", NULL },
		(const char *[]){ "stop", "run-1", "--reason", NULL },
		NULL,
	};

	put_job(1, 1, 10, 100);
	for (size_t i = 0; cases[i]; i++) {
		cr_assert_eq(ops(&r, cases[i]), 2, "case %zu: %d\n%s", i,
			     r.status, r.err);
		cr_assert_str_eq(r.out, "", "case %zu", i);
		cr_assert_neq(r.err[0], '\0', "case %zu says nothing", i);
		run_result_release(&r);
	}
	/* Nothing was changed by any of them. */
	{
		struct store_object o;
		struct err e;

		cr_assert_eq(store_stat(st, RUN_CONTROL, &o, &e),
			     CLOUD_ENOTFOUND);
	}
	/* No bucket at all. */
	cr_assert_eq(slicectl(&r, (const char *[]){ "status", "run-1", NULL }),
		     2);
	assert_has(r.err, "SLICECTL_BUCKET");
	run_result_release(&r);
	/* Not a URL. */
	cr_assert_eq(slicectl(&r, (const char *[]){ "status", "run-1",
						    "--bucket", "my-bucket",
						    NULL }), 2, "%s", r.err);
	run_result_release(&r);
	/* --help is no error, and says what the rules are. */
	cr_assert_eq(slicectl(&r, (const char *[]){ "status", "--help",
						    NULL }), 0);
	assert_has(r.out, "usage: slicectl status RUN");
	assert_has(r.out, "3 x heartbeat_s + 10 s");
	run_result_release(&r);
}

Test(args, bucket_from_the_environment)
{
	struct run_result r;
	char env[HARNESS_PATH + 64];
	const char *const envs[] = { env, NULL };

	put_job(1, 1, 10, 100);
	snprintf(env, sizeof(env), "SLICECTL_BUCKET=%s", bucket);
	cr_assert_eq(run_slicectl(&r, (const char *[]){ "status", "run-1",
							NULL }, envs), 0);
	cr_assert_eq(r.status, 0, "%s", r.err);
	assert_has(r.out, url);
	run_result_release(&r);

	/* --bucket wins over the environment. */
	snprintf(env, sizeof(env), "SLICECTL_BUCKET=file://%s/elsewhere", tmp);
	cr_assert_eq(run_slicectl(&r, (const char *[]){ "status", "run-1",
							NULL }, envs), 0);
	cr_assert_eq(r.status, 4, "%s", r.err);
	assert_has(r.err, "elsewhere");
	run_result_release(&r);
	cr_assert_eq(run_slicectl(&r, (const char *[]){ "status", "run-1",
							"--bucket", bucket,
							NULL }, envs), 0);
	cr_assert_eq(r.status, 0, "%s", r.err);
	run_result_release(&r);
}

/* ---- restart ---- */

Test(restart, bumps_once_per_call)
{
	struct run_result r;
	struct control c;
	json_t *v;

	put_job(2, 2, 10, 100);
	c = control_now();
	cr_assert_eq(c.generation, 1);
	cr_assert_eq(ops(&r, (const char *[]){ "restart", "run-1", "--reason",
					       "loss went NaN", NULL }), 0,
		     "%s", r.err);
	cr_assert_str_eq(r.out, "run-1: generation 1 -> 2 (loss went NaN)\n");
	run_result_release(&r);
	c = control_now();
	cr_assert_eq(c.generation, 2);
	cr_assert_str_eq(c.state, "running");
	cr_assert_str_eq(c.updated_by, "slicectl");
	cr_assert_str_eq(c.reason, "loss went NaN");

	/* The same again: a second generation, not a collapsed one. */
	cr_assert_eq(ops(&r, (const char *[]){ "restart", "run-1", "--reason",
					       "loss went NaN", NULL }), 0);
	cr_assert_str_eq(r.out, "run-1: generation 2 -> 3 (loss went NaN)\n");
	run_result_release(&r);

	/* The default reason, and JSON. */
	cr_assert_eq(ops(&r, (const char *[]){ "restart", "run-1", "--format",
					       "json", NULL }), 0);
	v = parse(r.out);
	cr_assert_eq(json_integer_value(json_object_get(v, "old_generation")),
		     3);
	cr_assert_eq(json_integer_value(json_object_get(v, "generation")), 4);
	cr_assert_str_eq(json_string_value(json_object_get(v, "state")),
			 "running");
	cr_assert_str_eq(json_string_value(json_object_get(v, "updated_by")),
			 "slicectl");
	cr_assert(!strncmp(json_string_value(json_object_get(v, "reason")),
			   "restarted by hand by ", 21), "%s", r.out);
	json_decref(v);
	run_result_release(&r);
	cr_assert_eq(control_now().generation, 4);
}

/* Several restarts at once, each from a view the others make stale
 * before it writes: every call still makes exactly one generation. */
Test(restart, concurrent_calls_each_bump_once)
{
	enum { N = 6 };
	pid_t pids[N];
	char out[N][HARNESS_PATH + 32], err[N][HARNESS_PATH + 32];
	char reason[N][32];
	bool seen_old[N + 2] = { false };

	put_job(1, 1, 10, 100);
	control_now();
	for (int i = 0; i < N; i++) {
		snprintf(out[i], sizeof(out[i]), "%s/out-%d", tmp, i);
		snprintf(err[i], sizeof(err[i]), "%s/err-%d", tmp, i);
		snprintf(reason[i], sizeof(reason[i]), "operator %d", i);
		pids[i] = spawn_slicectl((const char *[]){ "restart", "run-1",
							   "--bucket", bucket,
							   "--reason",
							   reason[i], NULL },
					 out[i], err[i]);
		cr_assert_gt(pids[i], 0);
	}
	for (int i = 0; i < N; i++) {
		int ws;
		char *o, *e;
		long long old, now;

		cr_assert_eq(waitpid(pids[i], &ws, 0), pids[i]);
		o = read_file(out[i], NULL);
		e = read_file(err[i], NULL);
		cr_assert(WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "%d: %s%s", i,
			  o, e);
		cr_assert_eq(sscanf(o, "run-1: generation %lld -> %lld", &old,
				    &now), 2, "%s", o);
		cr_assert_eq(now, old + 1);
		cr_assert(old >= 1 && old <= N, "%s", o);
		cr_assert(!seen_old[old], "two calls bumped from %lld", old);
		seen_old[old] = true;
		free(o);
		free(e);
	}
	cr_assert_eq(control_now().generation, 1 + N);
}

Test(restart, a_run_not_running_is_left_alone)
{
	struct run_result r;
	struct control c;
	struct err e;

	put_job(1, 1, 10, 100);
	control_now();
	cr_assert_eq(control_set_state(st, "stopping", "maintenance", "test",
				       &c, &e), 0, "%s", e.msg);
	cr_assert_eq(ops(&r, (const char *[]){ "restart", "run-1", NULL }), 1);
	assert_has(r.err, "run-1 is stopping (generation 1, by test: "
			  "maintenance); not restarting it");
	cr_assert_str_eq(r.out, "");
	run_result_release(&r);
	c = control_now();
	cr_assert_eq(c.generation, 1);
	cr_assert_str_eq(c.state, "stopping");
}

Test(restart, a_spent_budget_fails_the_run)
{
	struct run_result r;
	struct control c;

	put_job(1, 1, 10, 1);
	cr_assert_eq(ops(&r, (const char *[]){ "restart", "run-1", NULL }), 0,
		     "%s", r.err);
	run_result_release(&r);
	cr_assert_eq(ops(&r, (const char *[]){ "restart", "run-1", NULL }), 1);
	assert_has(r.err, "the restart budget is spent (max_restarts 1)");
	run_result_release(&r);
	c = control_now();
	cr_assert_eq(c.generation, 2);
	cr_assert_str_eq(c.state, "failed");
	/* And then it is a run that is not running. */
	cr_assert_eq(ops(&r, (const char *[]){ "restart", "run-1", NULL }), 1);
	assert_has(r.err, "run-1 is failed");
	run_result_release(&r);
}

/* ---- stop ---- */

Test(stop, sets_stopping)
{
	struct run_result r;
	struct control c;
	json_t *v;

	put_job(1, 2, 10, 100);
	put_control(4, "running", "new run", "slice-0-worker-0", 60);
	cr_assert_eq(ops(&r, (const char *[]){ "stop", "run-1", "--reason",
					       "budget", NULL }), 0, "%s",
		     r.err);
	cr_assert_str_eq(r.out, "run-1: running -> stopping (budget)\n");
	run_result_release(&r);
	c = control_now();
	cr_assert_str_eq(c.state, "stopping");
	cr_assert_eq(c.generation, 4);
	cr_assert_str_eq(c.updated_by, "slicectl");
	cr_assert_str_eq(c.reason, "budget");

	/* Again: nothing to change, and no error. */
	cr_assert_eq(ops(&r, (const char *[]){ "stop", "run-1", "--format",
					       "json", NULL }), 0);
	v = parse(r.out);
	cr_assert_str_eq(json_string_value(json_object_get(v,
							   "previous_state")),
			 "stopping");
	cr_assert_str_eq(json_string_value(json_object_get(v, "state")),
			 "stopping");
	cr_assert_str_eq(json_string_value(json_object_get(v, "reason")),
			 "budget");
	json_decref(v);
	run_result_release(&r);

	/* status shows it. */
	cr_assert_eq(ops(&r, (const char *[]){ "status", "run-1", NULL }), 0);
	assert_has(r.out, "state:      stopping, generation 4\n"
			  "reason:     budget\n");
	run_result_release(&r);
}

Test(stop, a_finished_run_has_nothing_to_stop)
{
	struct run_result r;

	put_job(1, 1, 10, 100);
	put_control(2, "done", "every worker finished", "slice-0-worker-0", 5);
	cr_assert_eq(ops(&r, (const char *[]){ "stop", "run-1", NULL }), 1);
	assert_has(r.err, "run-1 is already done");
	cr_assert_str_eq(r.out, "");
	run_result_release(&r);
	cr_assert_str_eq(control_now().state, "done");
}

/* ---- logs ---- */

static void two_by_two_with_logs(void)
{
	put_job(2, 2, 10, 100);
	put("logs/slice-0-worker-0/gen-1.log", "g1 line 1\ng1 line 2\n");
	put("logs/slice-0-worker-0/gen-2.log", "g2 line 1\ng2 partial");
	put("logs/slice-1-worker-1/gen-1.log", "w11 says hi\n");
	put("logs/slice-1-worker-1/gen-10.log", "w11 gen 10\n");
}

Test(logs, newest_generation_of_a_worker)
{
	struct run_result r;

	two_by_two_with_logs();
	cr_assert_eq(ops(&r, (const char *[]){ "logs", "run-1", NULL }), 0,
		     "%s", r.err);
	cr_assert_str_eq(r.out, "g2 line 1\ng2 partial");
	cr_assert_str_eq(r.err, "slicectl: run-1 has 4 workers; showing worker "
				"0/0 (choose another with --worker S/W)\n");
	run_result_release(&r);

	/* Generations order as numbers: 10 after 1. */
	cr_assert_eq(ops(&r, (const char *[]){ "logs", "run-1", "--worker",
					       "1/1", NULL }), 0);
	cr_assert_str_eq(r.out, "w11 gen 10\n");
	cr_assert_str_eq(r.err, "");
	run_result_release(&r);
	cr_assert_eq(ops(&r, (const char *[]){ "logs", "run-1", "-w", "1/1",
					       "--generation", "1", NULL }), 0);
	cr_assert_str_eq(r.out, "w11 says hi\n");
	run_result_release(&r);
	cr_assert_eq(ops(&r, (const char *[]){ "logs", "run-1", "--worker",
					       "0/0", "--generation", "1",
					       NULL }), 0);
	cr_assert_str_eq(r.out, "g1 line 1\ng1 line 2\n");
	run_result_release(&r);
}

Test(logs, json_lines)
{
	struct run_result r;
	char *line, *save = NULL;
	const char *const want[] = { "g2 line 1", "g2 partial" };
	size_t n = 0;

	two_by_two_with_logs();
	cr_assert_eq(ops(&r, (const char *[]){ "logs", "run-1", "--worker",
					       "0/0", "--format", "json",
					       NULL }), 0, "%s", r.err);
	for (line = strtok_r(r.out, "\n", &save); line;
	     line = strtok_r(NULL, "\n", &save), n++) {
		json_t *v = parse(line);

		cr_assert_lt(n, 2, "%s", line);
		cr_assert_str_eq(json_string_value(json_object_get(v, "type")),
				 "line");
		cr_assert_eq(json_integer_value(json_object_get(v, "slice")),
			     0);
		cr_assert_eq(json_integer_value(json_object_get(v, "worker")),
			     0);
		cr_assert_eq(json_integer_value(json_object_get(v,
								"generation")),
			     2);
		cr_assert_str_eq(json_string_value(json_object_get(v, "text")),
				 want[n]);
		json_decref(v);
	}
	cr_assert_eq(n, 2);
	run_result_release(&r);
}

Test(logs, missing_worker_generation_or_log_is_exit_4)
{
	struct run_result r;

	two_by_two_with_logs();
	cr_assert_eq(ops(&r, (const char *[]){ "logs", "run-1", "--worker",
					       "2/0", NULL }), 4);
	assert_has(r.err, "run-1 has 2 slices of 2 workers: there is no worker "
			  "2/0");
	run_result_release(&r);
	cr_assert_eq(ops(&r, (const char *[]){ "logs", "run-1", "--worker",
					       "0/0", "--generation", "5",
					       NULL }), 4);
	assert_has(r.err, "no log of generation 5 for slice-0-worker-0 under ");
	assert_has(r.err, "(it has generations 1, 2)");
	run_result_release(&r);
	cr_assert_eq(ops(&r, (const char *[]){ "logs", "run-1", "--worker",
					       "1/0", NULL }), 4);
	assert_has(r.err, "no log of slice-1-worker-0 under ");
	cr_assert_str_eq(r.out, "");
	run_result_release(&r);
}

/* Waits until path holds want (whole, or within it when part), or fails
 * after 20 s. */
static void wait_for(const char *path, const char *want, bool part)
{
	char *got = NULL;

	for (int i = 0; i < 400; i++) {
		free(got);
		got = read_file(path, NULL);
		if (got && (part ? strstr(got, want) != NULL
				 : !strcmp(got, want))) {
			free(got);
			return;
		}
		usleep(50 * 1000);
	}
	cr_assert_fail("%s holds:\n%s\nnot:\n%s", path, got ? got : "(none)",
		       want);
}

static void wait_for_file(const char *path, const char *want)
{
	wait_for(path, want, false);
}

/* Waits for slicectl to end within 20 s; its exit status. */
static int slicectl_ended(pid_t pid)
{
	int rc = wait_exit(pid, 20);

	cr_assert_neq(rc, -1, "slicectl did not end");
	return rc;
}

/* Numbered lines first..last-1, as a log holds them. */
static char *lines(int first, int last)
{
	struct buf b;

	buf_init(&b);
	for (int i = first; i < last; i++)
		cr_assert_eq(buf_appendf(&b, "step %06d loss 0.%06d\n", i,
					 i * 7 % 1000000), 0);
	return buf_detach(&b);
}

Test(logs, follow_prints_what_comes_and_ends_with_the_run)
{
	char out[HARNESS_PATH + 16], err[HARNESS_PATH + 16], want[256];
	char *big, *slid, *part, *got, *wanted;
	struct control c;
	struct err e;
	pid_t pid;

	put_job(1, 1, 10, 100);
	control_now();
	put("logs/slice-0-worker-0/gen-1.log", "one\n");
	snprintf(out, sizeof(out), "%s/out", tmp);
	snprintf(err, sizeof(err), "%s/err", tmp);
	pid = spawn_slicectl((const char *[]){ "logs", "run-1", "--bucket",
					       bucket, "--follow",
					       "--interval", "0.1", NULL },
			     out, err);
	cr_assert_gt(pid, 0);
	wait_for_file(out, "one\n");

	/* It grows: re-uploaded whole, only the new bytes are printed. */
	put("logs/slice-0-worker-0/gen-1.log", "one\ntwo\n");
	wait_for_file(out, "one\ntwo\n");

	/* A new generation: the follower moves on to it. */
	put("logs/slice-0-worker-0/gen-2.log", "three\n");
	wait_for_file(out, "one\ntwo\nthree\n");
	put("logs/slice-0-worker-0/gen-2.log", "three\nfour\n");
	wait_for_file(out, "one\ntwo\nthree\nfour\n");

	/* Rewritten shorter: printed again from its start, after a marker
	 * on stderr. */
	put("logs/slice-0-worker-0/gen-2.log", "again\n");
	wait_for_file(out, "one\ntwo\nthree\nfour\nagain\n");

	/* Past the supervisor's cap the object slides: what is new is what
	 * follows the bytes printed last, wherever they are now. */
	big = lines(0, 2000);
	put("logs/slice-0-worker-0/gen-3.log", "%s", big);
	if (asprintf(&wanted, "one\ntwo\nthree\nfour\nagain\n%s", big) < 0)
		cr_assert_fail("asprintf");
	wait_for_file(out, wanted);
	free(wanted);
	slid = lines(500, 2100);
	put("logs/slice-0-worker-0/gen-3.log", "%s", slid);
	part = lines(2000, 2100);
	if (asprintf(&wanted, "one\ntwo\nthree\nfour\nagain\n%s%s", big,
		     part) < 0)
		cr_assert_fail("asprintf");
	wait_for_file(out, wanted);

	/* The run ends: nothing more comes, the follower ends. */
	cr_assert_eq(control_set_state(st, "done", "every worker finished",
				       "slice-0-worker-0", &c, &e), 0, "%s",
		     e.msg);
	cr_assert_eq(slicectl_ended(pid), 0);
	got = read_file(out, NULL);
	cr_assert_str_eq(got, wanted);
	free(got);
	got = read_file(err, NULL);
	snprintf(want, sizeof(want), "slicectl: ---- generation 2: "
		 "logs/slice-0-worker-0/gen-2.log ----\n");
	assert_has(got, want);
	assert_has(got, "slicectl: ---- logs/slice-0-worker-0/gen-2.log was "
			"rewritten (6 bytes, was 11): printing it again from "
			"its start ----\n");
	assert_has(got, "generation 3: logs/slice-0-worker-0/gen-3.log");
	cr_assert_eq(count_substr(got, "rewritten"), 1, "%s", got);
	free(got);
	free(big);
	free(slid);
	free(part);
	free(wanted);
}

/* A segment of a log as supervisors publish it now. */
static void put_segment(const char *dir, uint64_t off, const char *text)
{
	struct err e;

	cr_assert_eq(store_segment_put(st, dir, off, text, strlen(text), NULL,
				       &e), 0, "%s%" PRIu64 ": %s", dir, off,
		     e.msg);
}

Test(logs, segments_printed_and_followed_beside_old_logs)
{
	char out[HARNESS_PATH + 16], err[HARNESS_PATH + 16];
	struct run_result r;
	struct control c;
	struct err e;
	char *got;
	pid_t pid;

	put_job(1, 1, 10, 100);
	control_now();
	put("logs/slice-0-worker-0/gen-1.log", "old kind\n");
	put_segment("logs/slice-0-worker-0/gen-2/", 0, "seg one\n");
	put_segment("logs/slice-0-worker-0/gen-2/", 8, "seg two\n");
	cr_assert_eq(ops(&r, (const char *[]){ "logs", "run-1", NULL }), 0,
		     "%s", r.err);
	cr_assert_str_eq(r.out, "seg one\nseg two\n");
	run_result_release(&r);
	cr_assert_eq(ops(&r, (const char *[]){ "logs", "run-1", "-g", "1",
					       NULL }), 0, "%s", r.err);
	cr_assert_str_eq(r.out, "old kind\n");
	run_result_release(&r);

	snprintf(out, sizeof(out), "%s/out", tmp);
	snprintf(err, sizeof(err), "%s/err", tmp);
	pid = spawn_slicectl((const char *[]){ "logs", "run-1", "--bucket",
					       bucket, "--follow", "-g", "1",
					       "--interval", "0.1", NULL },
			     out, err);
	cr_assert_gt(pid, 0);
	wait_for_file(out, "old kind\nseg one\nseg two\n");
	/* A new segment: only it is printed. */
	put_segment("logs/slice-0-worker-0/gen-2/", 16, "three\n");
	wait_for_file(out, "old kind\nseg one\nseg two\nthree\n");
	put_segment("logs/slice-0-worker-0/gen-3/", 0, "gen three\n");
	wait_for_file(out, "old kind\nseg one\nseg two\nthree\ngen three\n");
	cr_assert_eq(control_set_state(st, "done", "every worker finished",
				       "slice-0-worker-0", &c, &e), 0, "%s",
		     e.msg);
	cr_assert_eq(slicectl_ended(pid), 0);
	got = read_file(err, NULL);
	assert_has(got, "slicectl: ---- generation 2: "
			"logs/slice-0-worker-0/gen-2/ ----\n");
	assert_has(got, "generation 3: logs/slice-0-worker-0/gen-3/");
	cr_assert_eq(count_substr(got, "rewritten"), 0, "%s", got);
	free(got);
}

Test(logs, follow_waits_for_a_log_and_ends_on_ctrl_c)
{
	char out[HARNESS_PATH + 16], err[HARNESS_PATH + 16];
	char *got, *line, *save = NULL;
	json_t *v;
	pid_t pid;

	put_job(2, 1, 10, 100);
	control_now();
	snprintf(out, sizeof(out), "%s/out", tmp);
	snprintf(err, sizeof(err), "%s/err", tmp);
	pid = spawn_slicectl((const char *[]){ "logs", "run-1", "--bucket",
					       bucket, "-f", "-w", "1/0",
					       "--generation", "2",
					       "--interval", "0.1",
					       "--format", "json", NULL },
			     out, err);
	cr_assert_gt(pid, 0);
	wait_for(err, "slicectl: waiting for a log of slice-1-worker-0 under ",
		 true);

	/* Generation 2 never had a log here: the first one after it is
	 * where following starts; generation 1 is before it. */
	put("logs/slice-1-worker-0/gen-1.log", "old\n");
	put("logs/slice-1-worker-0/gen-3.log", "hello \xff\n");
	wait_for(out, "hello", true);
	usleep(300 * 1000);
	cr_assert_eq(kill(pid, SIGINT), 0);
	cr_assert_eq(slicectl_ended(pid), 130);

	got = read_file(out, NULL);
	line = strtok_r(got, "\n", &save);
	cr_assert_not_null(line);
	v = parse(line);
	cr_assert_str_eq(json_string_value(json_object_get(v, "type")),
			 "generation");
	cr_assert_eq(json_integer_value(json_object_get(v, "slice")), 1);
	cr_assert_eq(json_integer_value(json_object_get(v, "worker")), 0);
	cr_assert_eq(json_integer_value(json_object_get(v, "generation")), 3);
	cr_assert_str_eq(json_string_value(json_object_get(v, "object")),
			 "logs/slice-1-worker-0/gen-3.log");
	json_decref(v);
	line = strtok_r(NULL, "\n", &save);
	cr_assert_not_null(line);
	v = parse(line);
	cr_assert_str_eq(json_string_value(json_object_get(v, "type")), "line");
	cr_assert_eq(json_integer_value(json_object_get(v, "generation")), 3);
	/* Invalid UTF-8 becomes U+FFFD. */
	cr_assert_str_eq(json_string_value(json_object_get(v, "text")),
			 "hello \xef\xbf\xbd");
	json_decref(v);
	cr_assert_null(strtok_r(NULL, "\n", &save));
	free(got);
}
