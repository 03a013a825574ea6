/*
 * slicectl restart and stop end to end, against a run's state built
 * directly in a file:// bucket (run_state.c): no supervisor runs.
 */
#include "tests/launcher/run_state.h"

#include <criterion/criterion.h>

#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

TestSuite(restart, .init = up, .fini = down, .timeout = 120);
TestSuite(stop, .init = up, .fini = down, .timeout = 120);

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
	cr_assert_eq(control_set_state(st, NULL, "stopping", "maintenance",
				       "test", &c, &e), 0, "%s", e.msg);
	cr_assert_eq(ops(&r, (const char *[]){ "restart", "run-1", NULL }), 1);
	ASSERT_HAS(r.err, "run-1 is stopping (generation 1, by test: "
			  "maintenance); not restarting it");
	cr_assert_str_eq(r.out, "");
	run_result_release(&r);
	c = control_now();
	cr_assert_eq(c.generation, 1);
	cr_assert_str_eq(c.state, "stopping");
}

/* Issue 26: an operator's restarts spend no budget (they used to spend
 * max_restarts, and the second of these failed the run). */
Test(restart, spends_no_budget)
{
	struct run_result r;
	struct control c;

	put_job(1, 1, 10, 1);
	for (int i = 0; i < 2; i++) {
		cr_assert_eq(ops(&r, (const char *[]){ "restart", "run-1",
						       NULL }),
			     0, "%s", r.err);
		run_result_release(&r);
	}
	c = control_now();
	cr_assert_eq(c.generation, 3);
	cr_assert_str_eq(c.state, "running");
	cr_assert_eq(c.restarts.operator_, 2);
	cr_assert_eq(c.restarts.trainer, 0);
	cr_assert_str_eq(cause_class_names[c.cause.cls], "operator");
	cr_assert(strchr(c.cause.worker, '@'), "%s", c.cause.worker);
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
	/* An operator's stop, with who asked. */
	cr_assert_str_eq(cause_class_names[c.cause.cls], "operator");
	cr_assert_str_eq(c.cause.kind, "stop");
	cr_assert(strchr(c.cause.worker, '@'), "%s", c.cause.worker);

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
	ASSERT_HAS(r.out, "state:      stopping, generation 4\n"
			  "reason:     budget\n");
	ASSERT_HAS(r.out, "cause:      operator, ");
	run_result_release(&r);
	/* And the run's history. */
	cr_assert_eq(ops(&r, (const char *[]){ "events", "run-1", NULL }), 0);
	ASSERT_HAS(r.out, " stopping ");
	ASSERT_HAS(r.out, "{\"class\":\"operator\",\"kind\":\"stop\"");
	run_result_release(&r);
}

Test(stop, a_finished_run_has_nothing_to_stop)
{
	struct run_result r;

	put_job(1, 1, 10, 100);
	put_control(2, "done", "every worker finished", "slice-0-worker-0", 5);
	cr_assert_eq(ops(&r, (const char *[]){ "stop", "run-1", NULL }), 1);
	ASSERT_HAS(r.err, "run-1 is already done");
	cr_assert_str_eq(r.out, "");
	run_result_release(&r);
	cr_assert_str_eq(control_now().state, "done");
}
