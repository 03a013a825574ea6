/*
 * tests/run/test_cause.c: why generations end (run/cause.c) and what
 * control.json makes of it (issue 26): signatures, the same-way rule and
 * its near misses, a deterministic failure ending the run at the third,
 * the streak broken by the infrastructure, and the budget of each class.
 */
#include "run/run.h"
#include "tests/run/spec_check.h"

#include <criterion/criterion.h>

#include <jansson.h>
#include <stdio.h>
#include <string.h>

TestSuite(cause, .init = spec_setup, .fini = spec_teardown, .timeout = 30);

Test(cause, signature_hides_numbers_hex_and_addresses)
{
	char sig[96];

	cause_signature("step 1 loss 0.5\n\nRuntimeError: port 29503 in use "
			"by pid 4242 at 0x7f3a2b10 (7f3a2b10c0de)\n  \n",
			sig, sizeof(sig));
	cr_assert_str_eq(sig, "RuntimeError: port # in use by pid # at # (#)");
	cause_signature("", sig, sizeof(sig));
	cr_assert_str_eq(sig, "");
	/* Words are kept: "deadbeef" is a word, not a number. */
	cause_signature("cafe deadbeef failed", sig, sizeof(sig));
	cr_assert_str_eq(sig, "cafe deadbeef failed");
}

Test(cause, tail_is_the_last_lines_in_order)
{
	char tail[160];

	cause_tail("a\nb\n\nc\nd\n", 3, tail, sizeof(tail));
	cr_assert_str_eq(tail, "b | c | d");
	cause_tail("only", 3, tail, sizeof(tail));
	cr_assert_str_eq(tail, "only");
}

/* Exit 1 before any step of a generation that restored step 100, with
 * the bad rendezvous port's last line. */
static struct gen_cause port_failure(int64_t restored, int64_t step,
				     const char *line)
{
	struct gen_cause c;

	gen_cause_init(&c, CAUSE_TRAINER, "exit", "slice-0-worker-1");
	c.exit_code = 1;
	c.restored = restored;
	c.step = step;
	cause_signature(line, c.signature, sizeof(c.signature));
	cause_tail(line, 3, c.tail, sizeof(c.tail));
	return c;
}

Test(cause, the_same_way_and_its_near_misses)
{
	const char *line = "OSError: port 29501 taken";
	struct gen_cause a = port_failure(100, -1, line), b;

	/* Another port, another worker, one step in: the same way. */
	b = port_failure(100, 102, "OSError: port 29502 taken");
	snprintf(b.worker, sizeof(b.worker), "slice-1-worker-0");
	cr_assert(cause_same_way(&a, &b));
	/* The same exit code further on: the trainer made progress. */
	b = port_failure(100, 103, line);
	cr_assert_not(cause_same_way(&a, &b));
	/* ... or from another restored step. */
	b = port_failure(120, 120, line);
	cr_assert_not(cause_same_way(&a, &b));
	/* Another exit code, another last line, a signal instead. */
	b = port_failure(100, -1, line);
	b.exit_code = 2;
	cr_assert_not(cause_same_way(&a, &b));
	b = port_failure(100, -1, "NCCL error: unhandled system error");
	cr_assert_not(cause_same_way(&a, &b));
	b = port_failure(100, -1, line);
	b.exit_code = -1;
	b.signal = 11;
	snprintf(b.kind, sizeof(b.kind), "signal");
	cr_assert_not(cause_same_way(&a, &b));
	/* A hang is never the trainer's same failure. */
	b = a;
	b.cls = CAUSE_HANG;
	cr_assert_not(cause_same_way(&a, &b));
}

static struct job budgets(unsigned max_restarts, int64_t max_infra)
{
	struct job j;

	job_init(&j);
	j.max_restarts = max_restarts;
	j.max_infra_restarts = max_infra;
	return j;
}

static struct control bump(struct store *s, const struct job *j,
			   const struct gen_cause *c)
{
	struct control seen, out;
	struct err e;

	cr_assert_eq(control_load(s, &seen, &e), 0, "%s", e.msg);
	cr_assert_eq(control_bump_cause(s, NULL, &seen, j, c, "test", "w", -1,
					&out, &e),
		     0, "%s", e.msg);
	return out;
}

static struct gen_cause infra(const char *kind)
{
	struct gen_cause c;

	gen_cause_init(&c, CAUSE_INFRA, kind, "slice-1-worker-0");
	return c;
}

/* Whatever max_restarts is, the third same failure in a row fails the
 * run, naming the exit code, the step, the worker and the tail. */
Test(cause, three_same_failures_end_the_run)
{
	struct store *s = open_store();
	struct job j = budgets(50, -1);
	struct gen_cause f = port_failure(0, -1, "OSError: port 29501 taken");
	struct control c;

	c = bump(s, &j, &f);
	cr_assert_eq(c.generation, 2);
	cr_assert_eq(c.same_way, 1);
	c = bump(s, &j, &f);
	cr_assert_eq(c.same_way, 2);
	cr_assert_str_eq(c.state, "running");
	c = bump(s, &j, &f);
	cr_assert_str_eq(c.state, "failed");
	cr_assert_eq(c.generation, 3);
	cr_assert(strstr(c.reason, "deterministic failure: 3 generations"),
		  "%s", c.reason);
	cr_assert(strstr(c.reason, "exit 1 before a step (restored 0) on "
				   "slice-0-worker-1: OSError: port 29501 "
				   "taken"), "%s", c.reason);
	store_close(s);
}

/* Near misses keep restarting: the same exit code at other steps, and an
 * infrastructure restart between two same failures, which starts the
 * count again. */
Test(cause, near_misses_and_interruptions_do_not)
{
	struct store *s = open_store();
	struct job j = budgets(50, -1);
	struct gen_cause f = port_failure(0, -1, "OSError: port 29501 taken");
	struct gen_cause later = port_failure(0, 40, "OSError: port 7 taken");
	struct gen_cause pre = infra("preemption");
	struct control c;

	bump(s, &j, &f);
	bump(s, &j, &f);
	c = bump(s, &j, &pre);
	cr_assert_eq(c.same_way, 0);
	bump(s, &j, &f);
	c = bump(s, &j, &f);
	cr_assert_str_eq(c.state, "running");
	cr_assert_eq(c.same_way, 2);
	c = bump(s, &j, &later);
	cr_assert_eq(c.same_way, 1, "step 40 is not step 0's failure");
	c = bump(s, &j, &f);
	cr_assert_eq(c.same_way, 1);
	cr_assert_str_eq(c.state, "running");
	cr_assert_eq(c.restarts.trainer, 6);
	cr_assert_eq(c.restarts.infra, 1);
	store_close(s);
}

/* max_restarts 1 outlives any number of preemptions; the infrastructure
 * budget, when given, is its own. */
Test(cause, each_class_spends_its_own_budget)
{
	struct store *s = open_store();
	struct job j = budgets(1, 2);
	struct gen_cause pre = infra("preemption"), f = port_failure(0, 5, "x");
	struct gen_cause op;
	struct control c;
	json_t *o;

	gen_cause_init(&op, CAUSE_OPERATOR, "restart", "ann@runner");
	bump(s, &j, &pre);
	bump(s, &j, &op);
	bump(s, &j, &f);
	c = bump(s, &j, &pre);
	cr_assert_str_eq(c.state, "running");
	cr_assert_eq(c.generation, 5);
	c = bump(s, &j, &pre);
	cr_assert_str_eq(c.state, "failed");
	cr_assert(strstr(c.reason, "max_infra_restarts 2"), "%s", c.reason);
	o = read_json(s, RUN_CONTROL);
	cr_assert_eq(json_integer_value(json_object_get(
			     json_object_get(o, "restarts"), "operator")), 1);
	json_decref(o);
	store_close(s);

	/* The trainer's budget, with no infrastructure limit. */
	spec_teardown();
	spec_setup();
	s = open_store();
	j = budgets(1, -1);
	for (int i = 0; i < 5; i++)
		bump(s, &j, &pre);
	c = bump(s, &j, &f);
	cr_assert_str_eq(c.state, "running");
	c = bump(s, &j, &f);
	cr_assert_str_eq(c.state, "failed");
	cr_assert(strstr(c.reason, "max_restarts 1"), "%s", c.reason);
	store_close(s);
}

/* A control.json of an older writer: its restarts were all counted
 * against max_restarts. */
Test(cause, an_older_control_counts_every_restart)
{
	struct store *s = open_store();
	struct control c;
	struct err e;

	put_raw(s, RUN_CONTROL, "{\"generation\": 4, \"state\": \"running\", "
		"\"reason\": \"r\", \"updated_by\": \"w\", "
		"\"restore_step\": null, \"time\": \"2026-11-24T08:00:00Z\"}");
	cr_assert_eq(control_load(s, &c, &e), 0, "%s", e.msg);
	cr_assert_eq(c.restarts.trainer, 3);
	cr_assert_eq(c.cause.cls, -1);
	store_close(s);
}
