/*
 * tests/run/test_quarantine.c: bad hosts (run/quarantine.c, issue 26):
 * which failures blame their host, the rule that quarantines one blamed
 * by 2 of the last 3 failures and its near misses, and what control.json
 * and the history keep of it.
 */
#include "run/run.h"
#include "tests/run/spec_check.h"

#include <criterion/criterion.h>

#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

TestSuite(quarantine, .init = spec_setup, .fini = spec_teardown,
	  .timeout = 30);

#define XID "NVRM: Xid \\(PCI:[^)]*\\): (48|79)|uncorrectable ECC"

static struct gen_cause failure(const char *kind, const char *host)
{
	struct gen_cause c;

	gen_cause_init(&c, !strcmp(kind, "hang") ? CAUSE_HANG
			   : !strcmp(kind, "preflight") ? CAUSE_PREFLIGHT
			   : !strcmp(kind, "preemption") ? CAUSE_INFRA
			   : CAUSE_TRAINER, kind, "slice-0-worker-1");
	snprintf(c.host, sizeof(c.host), "%s", host);
	if (!strcmp(kind, "exit"))
		c.exit_code = 1;
	return c;
}

Test(quarantine, what_blames_a_host_and_what_does_not)
{
	struct gen_cause c = failure("signal", "h");

	c.signal = SIGSEGV;
	cause_blame(&c, "step 3\n", XID);
	cr_expect_str_eq(c.blame, "SIGSEGV");
	c.signal = SIGBUS;
	cause_blame(&c, NULL, NULL);
	cr_expect_str_eq(c.blame, "SIGBUS");
	/* Through a shell: exit 128 + the signal. */
	c = failure("exit", "h");
	c.exit_code = 128 + SIGSEGV;
	cause_blame(&c, NULL, NULL);
	cr_expect_str_eq(c.blame, "SIGSEGV");
	/* A plain failure, SIGKILL, SIGTERM: nothing about the machine. */
	c = failure("exit", "h");
	cause_blame(&c, "Traceback\nValueError: bad shape\n", XID);
	cr_expect_str_eq(c.blame, "");
	c = failure("signal", "h");
	c.signal = SIGKILL;
	cause_blame(&c, NULL, XID);
	cr_expect_str_eq(c.blame, "");
	/* The pattern finds its line anywhere in the output read, before
	 * the traceback it caused. */
	c = failure("exit", "h");
	cause_blame(&c, "step 9\nNVRM: Xid (PCI:0000:3b:00): 79, pid=42\n"
			"Traceback\nRuntimeError: CUDA error\n", XID);
	cr_expect_str_eq(c.blame, "log: NVRM: Xid (PCI:0000:3b:00): 79, "
				  "pid=42");
	cause_blame(&c, "NVRM: Xid (PCI:0000:3b:00): 13\n", XID);
	cr_expect_str_eq(c.blame, "", "Xid 13 is the application's");
	/* A hang and a failed preflight always do; the infrastructure's
	 * interruptions never. */
	c = failure("hang", "h");
	cause_blame(&c, NULL, NULL);
	cr_expect_str_eq(c.blame, "hang");
	c = failure("preflight", "h");
	cause_blame(&c, NULL, NULL);
	cr_expect_str_eq(c.blame, "preflight");
	c = failure("preemption", "h");
	cause_blame(&c, NULL, NULL);
	cr_expect_str_eq(c.blame, "");
}

Test(quarantine, a_pattern_that_is_no_regex_is_refused_saying_why)
{
	struct err e;

	err_init(&e);
	cr_expect_eq(job_check_pattern(XID, &e), 0, "%s", e.msg);
	cr_expect_eq(job_check_pattern("Xid (4", &e), COMMON_EINVAL);
	cr_expect(strstr(e.msg, "not a POSIX extended regular expression"),
		  "%s", e.msg);
	cr_expect_eq(job_check_pattern("", &e), COMMON_EINVAL);
	cr_expect(strstr(e.msg, "every line"), "%s", e.msg);
}

static struct gen_cause blamed(const char *host, const char *kind)
{
	struct gen_cause c = failure(kind, host);

	if (!strcmp(kind, "signal"))
		c.signal = SIGSEGV;
	cause_blame(&c, NULL, NULL);
	return c;
}

/* The rule alone, on a control.json in memory. */
Test(quarantine, two_of_the_last_three_and_the_near_misses)
{
	struct control c;
	struct gen_cause a = blamed("host-a", "signal");
	struct gen_cause plain = failure("exit", "host-b");
	struct gen_cause pre = failure("preemption", "host-a");

	memset(&c, 0, sizeof(c));
	c.generation = 1;
	cr_assert_not(quarantine_note(&c, &a));
	/* Two unrelated failures in between: host-a's first blame leaves
	 * the window before its second comes. */
	c.generation++;
	cr_assert_not(quarantine_note(&c, &plain));
	c.generation++;
	cr_assert_not(quarantine_note(&c, &plain));
	c.generation++;
	cr_assert_not(quarantine_note(&c, &a), "1 of the last 3");
	/* An interruption is no failure: it neither counts nor pushes a
	 * blame out of the window. */
	c.generation++;
	cr_assert_not(quarantine_note(&c, &pre));
	cr_assert_eq(c.nfailures, 3);
	/* Another host blamed between them does not save host-a. */
	c.generation++;
	struct gen_cause b = blamed("host-b", "hang");
	cr_assert_not(quarantine_note(&c, &b));
	c.generation++;
	cr_assert(quarantine_note(&c, &a), "2 of the last 3");
	cr_assert(c.quarantined_now);
	cr_assert_eq(c.nquarantined, 1);
	cr_expect_str_eq(c.quarantined[0].host, "host-a");
	cr_expect_str_eq(c.quarantined[0].why, "SIGSEGV");
	cr_expect_eq(c.quarantined[0].generation, 7);
	/* Once is enough: a host quarantined is not again. */
	c.generation++;
	cr_assert_not(quarantine_note(&c, &a));
	cr_assert_not(c.quarantined_now);
	cr_assert(quarantine_has(&c, "host-a"));
	cr_assert_not(quarantine_has(&c, "host-b"));
	/* A blame without a host (an older supervisor) blames nobody. */
	struct gen_cause anon = blamed("", "signal");
	c.generation++;
	cr_assert_not(quarantine_note(&c, &anon));
	c.generation++;
	cr_assert_not(quarantine_note(&c, &anon));
}

static struct control bump(struct store *s, const struct gen_cause *c)
{
	struct control seen, out;
	struct job j;
	struct err e;

	job_init(&j);
	j.max_restarts = 50;
	cr_assert_eq(control_load(s, &seen, &e), 0, "%s", e.msg);
	cr_assert_eq(control_bump_cause(s, NULL, &seen, &j, c, "test",
					"slice-0-worker-1", -1, &out, &e),
		     0, "%s", e.msg);
	job_release(&j);
	return out;
}

/* Through control.json: the window and the quarantine are kept across
 * writers, and the bump that quarantines records the event once. */
Test(quarantine, control_json_keeps_it_and_the_history_says_it_once)
{
	struct store *s = open_store();
	struct gen_cause a = blamed("node-7", "signal");
	struct gen_cause x = failure("exit", "node-3");
	struct control c;
	struct event *ev = NULL;
	size_t n = 0, seen = 0;
	struct err e;
	json_t *o, *q;

	bump(s, &a);
	c = bump(s, &x);
	cr_assert_eq(c.nquarantined, 0);
	c = bump(s, &a);
	cr_assert(c.quarantined_now);
	cr_assert_str_eq(c.state, "running", "a quarantine fails nothing");
	c = bump(s, &a);
	cr_assert_not(c.quarantined_now);
	o = read_json(s, RUN_CONTROL);
	q = json_array_get(json_object_get(o, "quarantined"), 0);
	cr_assert_str_eq(json_string_value(json_object_get(q, "host")),
			 "node-7");
	cr_assert_str_eq(json_string_value(json_object_get(q, "why")),
			 "SIGSEGV");
	cr_assert_eq(json_integer_value(json_object_get(q, "generation")), 3);
	cr_assert_eq(json_array_size(json_object_get(o, "failures")), 3);
	cr_assert_str_eq(json_string_value(json_object_get(json_object_get(
				 o, "cause"), "blame")), "SIGSEGV");
	json_decref(o);
	cr_assert_eq(events_list(s, &ev, &n, &e), 0, "%s", e.msg);
	for (size_t i = 0; i < n; i++) {
		if (strcmp(ev[i].kind, EVENT_QUARANTINE))
			continue;
		seen++;
		cr_expect_eq(ev[i].generation, 3);
		cr_expect(strstr(ev[i].details, "\"host\":\"node-7\""), "%s",
			  ev[i].details);
		cr_expect(strstr(ev[i].cause, "2 of the last 3 failures"),
			  "%s", ev[i].cause);
	}
	cr_expect_eq(seen, 1);
	free(ev);
	store_close(s);
}

/* A control.json whose lists are of the wrong shape still reads: only
 * the quarantine looks at them. */
Test(quarantine, odd_lists_are_skipped)
{
	struct store *s = open_store();
	struct control c;
	struct err e;

	put_raw(s, RUN_CONTROL,
		"{\"generation\": 4, \"state\": \"running\", \"failures\": "
		"[1, {\"host\": 7}, {\"host\": \"h\", \"generation\": -3}], "
		"\"quarantined\": {\"host\": \"x\"}}");
	cr_assert_eq(control_load(s, &c, &e), 0, "%s", e.msg);
	cr_expect_eq(c.nfailures, 2);
	cr_expect_str_eq(c.failures[0].host, "");
	cr_expect_str_eq(c.failures[1].host, "h");
	cr_expect_eq(c.nquarantined, 0);
	store_close(s);
}

/* job.json carries the pattern, written only when set, and refuses one
 * that does not compile. */
Test(quarantine, job_json_carries_the_pattern)
{
	static const char good[] =
		"{\"name\": \"r\", \"command\": \"t\", \"bad_host_pattern\": "
		"\"Xid (48|79)\"}";
	static const char bad[] =
		"{\"name\": \"r\", \"command\": \"t\", \"bad_host_pattern\": "
		"\"Xid (48\"}";
	struct job j, back;
	char *text = NULL;
	struct err e;

	cr_assert_eq(job_parse(good, strlen(good), &j, &e), 0, "%s", e.msg);
	cr_assert_str_eq(j.bad_host_pattern, "Xid (48|79)");
	cr_assert_eq(job_to_json(&j, &text, &e), 0, "%s", e.msg);
	cr_assert_eq(job_parse(text, strlen(text), &back, &e), 0, "%s",
		     e.msg);
	cr_expect_str_eq(back.bad_host_pattern, "Xid (48|79)");
	job_release(&back);
	job_release(&j);
	free(text);
	cr_assert_eq(job_parse(bad, strlen(bad), &j, &e), COMMON_EINVAL);
	cr_expect(strstr(e.msg, "bad-host pattern"), "%s", e.msg);
}
