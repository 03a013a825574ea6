/*
 * slicectl status end to end, and what every operator command does with
 * its arguments, the bucket and a missing run, against a run's state built
 * directly in a file:// bucket (run_state.c): no supervisor runs. What
 * status prints is compared whole, with heartbeat ages (which move with
 * the clock) written as "Ns" on both sides.
 */
#include "checkpoint/checkpoint.h"
#include "tests/launcher/run_state.h"

#include <criterion/criterion.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

TestSuite(status, .init = up, .fini = down, .timeout = 120);
TestSuite(args, .init = up, .fini = down, .timeout = 120);

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
		 "budgets:    restarts 98 of 100 left (trainer, hangs, "
		 "preflights); infrastructure 0 used, no limit; operator 0 "
		 "(no budget)\n"
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
	/* An older control.json: its two restarts were the trainer's, and
	 * it names no cause. */
	w = json_object_get(json_object_get(v, "budgets"), "restarts");
	cr_assert_eq(json_integer_value(json_object_get(w, "used")), 2);
	cr_assert_eq(json_integer_value(json_object_get(w, "left")), 98);
	w = json_object_get(json_object_get(v, "budgets"), "infra_restarts");
	cr_assert(json_is_null(json_object_get(w, "max")));
	cr_assert(json_is_null(json_object_get(v, "cause")));
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
	ASSERT_HAS(r.out, "state:      done, generation 2\n");
	ASSERT_HAS(r.out, "0 stuck\n");
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
		ASSERT_HAS(r.err, "no run nope under ");
		ASSERT_HAS(r.err, bucket);
		cr_assert_str_eq(r.out, "");
		run_result_release(&r);
	}
	snprintf(dir, sizeof(dir), "%s/bucket/nope", tmp);
	cr_assert_neq(stat(dir, &sb), 0, "%s was created", dir);

	/* A prefix that exists, a run without job.json. */
	put("logs/slice-0-worker-0/gen-1.log", "x\n");
	cr_assert_eq(ops(&r, (const char *[]){ "status", "run-1", NULL }), 4);
	ASSERT_HAS(r.err, "no run run-1 under ");
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
	ASSERT_HAS(r.err, "SLICECTL_BUCKET");
	run_result_release(&r);
	/* Not a URL. */
	cr_assert_eq(slicectl(&r, (const char *[]){ "status", "run-1",
						    "--bucket", "my-bucket",
						    NULL }), 2, "%s", r.err);
	run_result_release(&r);
	/* --help is no error, and says what the rules are. */
	cr_assert_eq(slicectl(&r, (const char *[]){ "status", "--help",
						    NULL }), 0);
	ASSERT_HAS(r.out, "usage: slicectl status RUN");
	ASSERT_HAS(r.out, "3 x heartbeat_s + 10 s");
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
	ASSERT_HAS(r.out, url);
	run_result_release(&r);

	/* --bucket wins over the environment. */
	snprintf(env, sizeof(env), "SLICECTL_BUCKET=file://%s/elsewhere", tmp);
	cr_assert_eq(run_slicectl(&r, (const char *[]){ "status", "run-1",
							NULL }, envs), 0);
	cr_assert_eq(r.status, 4, "%s", r.err);
	ASSERT_HAS(r.err, "elsewhere");
	run_result_release(&r);
	cr_assert_eq(run_slicectl(&r, (const char *[]){ "status", "run-1",
							"--bucket", bucket,
							NULL }, envs), 0);
	cr_assert_eq(r.status, 0, "%s", r.err);
	run_result_release(&r);
}

/* ---- stragglers ---- */

/* Worker slice/worker at generation 2 with a recent step figure, its
 * heartbeat age_s old. */
static void put_steps(unsigned slice, unsigned worker, const char *state,
		      double median_ms, unsigned n, double span_s, long age_s)
{
	char t[40], name[96];

	ago(t, sizeof(t), age_s);
	snprintf(name, sizeof(name), "status/slice-%u-worker-%u.json", slice,
		 worker);
	put(name, "{\"slice\": %u, \"worker\": %u, \"state\": \"%s\", "
	    "\"generation\": 2, \"step\": 50, \"committed_step\": -1, "
	    "\"time\": \"%s\", \"recent_steps\": {\"median_ms\": %.1f, "
	    "\"n\": %u, \"span_s\": %.1f}}\n", slice, worker, state, t,
	    median_ms, n, span_s);
}

/* `slicectl status run-1 --format json`, parsed (to json_decref). */
static json_t *status_now(void)
{
	struct run_result r;
	json_t *v;

	cr_assert_eq(ops(&r, (const char *[]){ "status", "run-1", "--format",
					       "json", NULL }), 0);
	v = parse(r.out);
	run_result_release(&r);
	return v;
}

/* One of four workers steps at 400 ms against its peers' 100: flagged in
 * the text and the JSON, the others not; one slow for too short a time
 * is a near miss, said but not flagged; a finished worker takes no
 * part. */
Test(status, a_straggler_is_flagged_with_its_reason)
{
	struct run_result r;
	json_t *v, *w;
	size_t i;

	put_job(1, 5, 10, 100);
	put_control(2, "running", "test", "slicectl", 100);
	put_steps(0, 0, "running", 100, 40, 12, 1);
	put_steps(0, 1, "running", 104, 40, 12, 1);
	put_steps(0, 2, "running", 400, 24, 11, 1);
	put_steps(0, 3, "running", 96, 40, 12, 1);
	put_steps(0, 4, "finished", 900, 40, 12, 1);
	cr_assert_eq(ops(&r, (const char *[]){ "status", "run-1", NULL }), 0,
		     "%s", r.err);
	ASSERT_HAS(r.out, "\nstragglers (recent median step time above "
			  "median + 3 x MAD of the peers', sustained; see "
			  "slicectl status --help):\n  0/2: median step 400.0 "
			  "ms over its last 24 steps (11.0 s) > peers' median "
			  "100.0 ms + 3 x MAD 5.0 ms = 115.0 ms\n");
	cr_assert_eq(count_substr(r.out, ": median step "), 1, "%s", r.out);
	run_result_release(&r);
	v = status_now();
	cr_assert_eq(json_integer_value(json_object_get(v, "stragglers")), 1);
	json_array_foreach(json_object_get(v, "workers"), i, w) {
		cr_assert_eq(json_is_true(json_object_get(w, "straggler")),
			     i == 2, "worker %zu", i);
		cr_assert_eq(json_is_string(json_object_get(
				     w, "straggler_reason")), i == 2,
			     "worker %zu", i);
	}
	w = json_array_get(json_object_get(v, "workers"), 2);
	cr_assert_float_eq(json_number_value(json_object_get(
				   json_object_get(w, "recent_steps"),
				   "median_ms")), 400, 1e-9);
	json_decref(v);

	/* Slow for 9 s only: not yet. */
	put_steps(0, 2, "running", 400, 24, 9, 1);
	v = status_now();
	cr_assert_eq(json_integer_value(json_object_get(v, "stragglers")), 0);
	w = json_array_get(json_object_get(v, "workers"), 2);
	cr_assert(json_is_false(json_object_get(w, "straggler")));
	cr_assert(strstr(json_string_value(json_object_get(
				 w, "straggler_reason")), "not yet sustained"));
	json_decref(v);

	/* A stale heartbeat (older than the 40 s window) is old news:
	 * neither judged nor a peer (with it, the peers' median would be
	 * 104 ms and their MAD 8). */
	put_steps(0, 2, "running", 400, 24, 11, 1);
	put_steps(0, 0, "running", 900, 40, 12, 100);
	v = status_now();
	cr_assert_eq(json_integer_value(json_object_get(v, "stragglers")), 1);
	w = json_array_get(json_object_get(v, "workers"), 0);
	cr_assert(json_is_false(json_object_get(w, "straggler")));
	cr_assert(json_is_null(json_object_get(w, "straggler_reason")));
	cr_assert(json_is_true(json_object_get(w, "stuck")));
	w = json_array_get(json_object_get(v, "workers"), 2);
	cr_assert(json_is_true(json_object_get(w, "straggler")));
	cr_assert(strstr(json_string_value(json_object_get(
				 w, "straggler_reason")),
			 "peers' median 100.0 ms + 3 x MAD 5.0 ms = 115.0 "
			 "ms"));
	json_decref(v);
}

/* A quarantined host (issue 26) is named in the text with its worker,
 * generation and why, and in the JSON's "quarantined"; a run without one
 * has an empty list. */
Test(status, a_quarantined_host_is_named)
{
	struct run_result r;
	json_t *v, *q;

	put_job(1, 2, 10, 100);
	put_control(3, "running", "test", "slice-0-worker-1", 100);
	v = status_now();
	cr_assert_eq(json_array_size(json_object_get(v, "quarantined")), 0);
	json_decref(v);
	put("control.json",
	    "{\"generation\": 3, \"state\": \"running\", \"reason\": \"r\", "
	    "\"updated_by\": \"slice-0-worker-1\", \"restore_step\": null, "
	    "\"failures\": [{\"generation\": 1, \"host\": \"node-7\", "
	    "\"why\": \"SIGSEGV\", \"worker\": \"slice-0-worker-1\"}, "
	    "{\"generation\": 2, \"host\": \"node-7\", \"why\": \"SIGBUS\", "
	    "\"worker\": \"slice-0-worker-1\"}], \"quarantined\": "
	    "[{\"generation\": 2, \"host\": \"node-7\", \"why\": \"SIGBUS\", "
	    "\"worker\": \"slice-0-worker-1\"}]}\n");
	cr_assert_eq(ops(&r, (const char *[]){ "status", "run-1", NULL }), 0,
		     "%s", r.err);
	ASSERT_HAS(r.out, "\nquarantined: node-7 (worker slice-0-worker-1, "
			  "generation 2: SIGBUS)\n");
	run_result_release(&r);
	v = status_now();
	q = json_array_get(json_object_get(v, "quarantined"), 0);
	cr_assert_str_eq(json_string_value(json_object_get(q, "host")),
			 "node-7");
	cr_assert_str_eq(json_string_value(json_object_get(q, "why")),
			 "SIGBUS");
	cr_assert_eq(json_integer_value(json_object_get(q, "generation")), 2);
	json_decref(v);
}

/* A step committed on the fast tiers alone (--persist-every) is shown as
 * such, and is no save in progress: no worker is stuck on it, however
 * old it is. */
Test(status, a_fast_tier_step_is_shown_and_no_save_in_progress)
{
	struct run_result r;
	json_t *v;

	put_job(1, 2, 10, 100);
	put_control(3, "running", "test", "slice-0-worker-1", 100);
	save_part(0, 0, 200, 2);
	save_part(0, 1, 200, 2);
	put("checkpoints/step-0000000250/FAST",
	    "{\"step\": 250, \"time\": \"2026-01-01T00:00:00Z\", \"parts\": "
	    "[{\"name\": \"slice-0-worker-0.tar.zst\", \"size\": 9, "
	    "\"crc32c\": 1, \"generation\": 1, \"holders\": [{\"host\": "
	    "\"slice-0-worker-0\", \"tier\": 5}]}, {\"name\": "
	    "\"slice-0-worker-1.tar.zst\", \"size\": 9, \"crc32c\": 1, "
	    "\"generation\": 1, \"holders\": [{\"host\": \"slice-0-worker-1\", "
	    "\"tier\": 6}]}]}\n");
	age_step(250, 1000);
	put_status(0, 0, "running", 3, 260, 250, 3, "training", 2);
	put_status(0, 1, "running", 3, 260, 250, 3, "training", 2);
	cr_assert_eq(ops(&r, (const char *[]){ "status", "run-1", NULL }), 0,
		     "%s", r.err);
	ASSERT_HAS(r.out, "\ncommitted:  step 200\nfast tiers: step 250 (on "
			  "the hosts alone; restored while a host holding "
			  "each part lives)\n");
	ASSERT_HAS(r.out, "2 (1 slice x 2), 0 stuck\n");
	run_result_release(&r);
	v = status_now();
	cr_assert_eq(json_integer_value(json_object_get(v, "committed_step")),
		     200);
	cr_assert_eq(json_integer_value(json_object_get(v, "fast_step")), 250);
	json_decref(v);
}
