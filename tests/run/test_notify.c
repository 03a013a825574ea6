/*
 * A run's notifications as data (run/notify.c): which URLs may receive
 * them, job.json's "notify" both ways and its refusals, which events of a
 * history make a notice (a restart, the end, a budget running low, a
 * quarantine) under which stable id, and the exact body posted for each.
 */
#include "run/run.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

Test(notify, urls_that_may_receive_notifications)
{
	static const char *const good[] = {
		"https://hooks.slack.com/services/T0/B0/XYZ",
		"http://127.0.0.1:8080/hook", "HTTPS://example.com",
		"http://[::1]:9/x?y=1#z", "https://u:p@h:443/x",
		"http://[fe80::1]/",
	};
	static const struct {
		const char *url, *says;
	} bad[] = {
		{ "", "empty" },
		{ "ftp://example.com/x", "not http:// or https://" },
		{ "hooks.slack.com/services/x", "not http:// or https://" },
		{ "http://", "names no host" },
		{ "https:///path", "names no host" },
		{ "http://:80/x", "names no host" },
		{ "http://u:p@/x", "names no host" },
		{ "http://u@:80/x", "names no host" },
		{ "http://a b/", "space or control character" },
		{ "http://a/\tb", "space or control character" },
		{ "http://a/\x7f", "space or control character" },
		{ "http://127.0.0.1:/h", "bad port" },
		{ "http://h:0/", "bad port" },
		{ "http://h:65536", "bad port" },
		{ "http://h:8x/", "bad port" },
		{ "http://[::1]:/", "bad port" },
		{ "http://h:123456/", "bad port" },
	};
	char longer[NOTIFY_URL_MAX + 16];
	struct err e;

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		err_init(&e);
		cr_expect_eq(notify_url_check(good[i], &e), 0, "%s: %s",
			     good[i], e.msg);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err_init(&e);
		cr_expect_eq(notify_url_check(bad[i].url, &e), COMMON_EINVAL,
			     "%s", bad[i].url);
		cr_expect_not_null(strstr(e.msg, bad[i].says), "%s: %s",
				   bad[i].url, e.msg);
	}
	err_init(&e);
	cr_expect_eq(notify_url_check(NULL, &e), COMMON_EINVAL);
	snprintf(longer, sizeof(longer), "https://h/");
	memset(longer + 10, 'a', NOTIFY_URL_MAX);
	longer[NOTIFY_URL_MAX + 1] = '\0';
	err_init(&e);
	cr_expect_eq(notify_url_check(longer, &e), COMMON_EINVAL);
	cr_expect_not_null(strstr(e.msg, "at most 2048 bytes"), "%s", e.msg);
}

Test(notify, a_url_in_a_log_line_keeps_its_host_only)
{
	char out[128];

	notify_url_shown("https://hooks.slack.com/services/T0/B0/SECRET", out,
			 sizeof(out));
	cr_expect_str_eq(out, "https://hooks.slack.com/...");
	notify_url_shown("http://127.0.0.1:9", out, sizeof(out));
	cr_expect_str_eq(out, "http://127.0.0.1:9");
	notify_url_shown("http://h?token=SECRET", out, sizeof(out));
	cr_expect_str_eq(out, "http://h/...");
	notify_url_shown("https://user:SECRET@h:8443/x", out, sizeof(out));
	cr_expect_str_eq(out, "https://h:8443/...");
}

static const char *const minimal =
	"{\"name\": \"r\", \"command\": \"true\"";

static int parse_with(const char *notify, struct job *j, struct err *e)
{
	char text[4096];

	snprintf(text, sizeof(text), "%s, \"notify\": %s}", minimal, notify);
	return job_parse(text, strlen(text), j, e);
}

Test(notify, job_json_notify_round_trips_and_is_absent_when_empty)
{
	struct job j, back;
	struct err e;
	char *json = NULL;

	cr_assert_eq(parse_with("[\"https://a.example/x\", "
				"\"http://127.0.0.1:1/y\"]", &j, &e), 0,
		     "%s", e.msg);
	cr_assert_eq(j.notify.n, 2);
	cr_expect_str_eq(j.notify.v[1], "http://127.0.0.1:1/y");
	cr_assert_eq(job_to_json(&j, &json, &e), 0, "%s", e.msg);
	cr_assert_eq(job_parse(json, strlen(json), &back, &e), 0, "%s",
		     e.msg);
	cr_expect_eq(back.notify.n, 2);
	cr_expect_str_eq(back.notify.v[0], "https://a.example/x");
	free(json);
	job_release(&back);
	job_release(&j);

	/* null or empty: none, and no field written (older supervisors
	 * refuse a field they do not know). */
	cr_assert_eq(parse_with("null", &j, &e), 0, "%s", e.msg);
	cr_expect_eq(j.notify.n, 0);
	cr_assert_eq(job_to_json(&j, &json, &e), 0, "%s", e.msg);
	cr_expect_null(strstr(json, "notify"), "%s", json);
	free(json);
	job_release(&j);
}

Test(notify, job_json_refuses_bad_notify_lists)
{
	static const struct {
		const char *v, *says;
	} bad[] = {
		{ "\"https://a/x\"", "must be a list of URLs or null" },
		{ "{}", "must be a list of URLs or null" },
		{ "[7]", "item 0 must be a URL string" },
		{ "[\"https://a/\", null]", "item 1 must be a URL string" },
		{ "[\"ftp://a/\"]", "not http:// or https://" },
		{ "[\"http://a\",\"http://a\",\"http://a\",\"http://a\","
		  "\"http://a\",\"http://a\",\"http://a\",\"http://a\","
		  "\"http://a\"]", "lists 9 URLs; at most 8" },
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct job j;
		struct err e;

		err_init(&e);
		cr_expect_eq(parse_with(bad[i].v, &j, &e), COMMON_EINVAL,
			     "%s", bad[i].v);
		cr_expect_not_null(strstr(e.msg, bad[i].says), "%s: %s",
				   bad[i].v, e.msg);
		cr_expect_not_null(strstr(e.msg, "\"notify\""), "%s", e.msg);
		job_release(&j);
	}
}

/* An event of the history as control.c and the writers record it. */
static struct event ev_at(const char *time, const char *kind, int64_t gen,
			  const char *cause, const char *details)
{
	struct event ev;

	event_init(&ev, kind, gen, "slice-0-worker-1");
	snprintf(ev.time, sizeof(ev.time), "%s", time);
	snprintf(ev.cause, sizeof(ev.cause), "%s", cause);
	snprintf(ev.details, sizeof(ev.details), "%s", details);
	return ev;
}

#define TRAINER_EXIT "{\"class\":\"trainer\",\"kind\":\"exit\"," \
		     "\"worker\":\"slice-0-worker-1\",\"exit_code\":7," \
		     "\"step\":12,\"restored\":10}"
#define PREEMPTION "{\"class\":\"infrastructure\",\"kind\":\"preemption\"," \
		   "\"worker\":\"slice-1-worker-0\",\"notice\":true}"

Test(notify, the_notices_of_a_history_and_their_ids)
{
	struct event v[] = {
		ev_at("2026-01-01T00:00:00.000Z", "boot", 1, "started", ""),
		ev_at("2026-01-01T00:00:10.000Z", "bump", 2,
		      "slice-0-worker-1: trainer exited 7", TRAINER_EXIT),
		ev_at("2026-01-01T00:00:11.000Z", "commit", 2, "", ""),
		ev_at("2026-01-01T00:00:20.000Z", "bump", 3,
		      "slice-1-worker-0: preempted", PREEMPTION),
		ev_at("2026-01-01T00:00:25.000Z", "quarantine", 3,
		      "preflight failed 3 times", "{\"host\":\"tpu-vm-7\"}"),
		ev_at("2026-01-01T00:00:30.000Z", "done", 3, "finished", ""),
	};
	struct job j;
	struct notice *n = NULL, *again = NULL;
	size_t nn = 0, na = 0;
	struct err e;

	job_init(&j);
	cr_assert_eq(notices_of(&j, v, 6, &n, &nn, &e), 0);
	cr_assert_eq(nn, 4);
	cr_expect_eq(n[0].kind, NOTICE_RESTART);
	cr_expect_eq(n[1].kind, NOTICE_RESTART);
	cr_expect_eq(n[2].kind, NOTICE_QUARANTINE);
	cr_expect_eq(n[3].kind, NOTICE_DONE);
	cr_expect_eq(strncmp(n[0].id, "restart-000002-", 15), 0, "%s",
		     n[0].id);
	cr_expect_eq(strncmp(n[1].id, "restart-000003-", 15), 0, "%s",
		     n[1].id);
	cr_expect_eq(strncmp(n[2].id, "quarantine-000003-", 18), 0, "%s",
		     n[2].id);
	cr_expect_eq(strncmp(n[3].id, "done-000003-", 12), 0, "%s", n[3].id);
	cr_expect_str_neq(n[0].id, n[1].id);
	/* The same history read again (another sender, a restart) names
	 * every notice alike. */
	cr_assert_eq(notices_of(&j, v, 6, &again, &na, &e), 0);
	cr_assert_eq(na, nn);
	for (size_t i = 0; i < nn; i++)
		cr_expect_str_eq(again[i].id, n[i].id);
	free(again);
	free(n);
	job_release(&j);
}

/* Three trainer failures and two preemptions of a run whose budgets are
 * 6 (trainer) and 2 (infrastructure). */
Test(notify, a_budget_warns_once_when_low_and_once_when_spent)
{
	struct event v[8];
	struct job j;
	struct notice *n = NULL;
	size_t nn = 0, k = 0;
	struct err e;
	char t[40];

	job_init(&j);
	j.max_restarts = 6;
	j.max_infra_restarts = 2;
	for (int i = 0; i < 6; i++) {
		snprintf(t, sizeof(t), "2026-01-01T00:00:%02d.000Z", i);
		v[i] = ev_at(t, "bump", i + 2, "why", TRAINER_EXIT);
	}
	v[6] = ev_at("2026-01-01T00:01:00.000Z", "bump", 8, "p", PREEMPTION);
	v[7] = ev_at("2026-01-01T00:01:01.000Z", "bump", 9, "p", PREEMPTION);
	cr_assert_eq(notices_of(&j, v, 8, &n, &nn, &e), 0);
	/* 8 restarts; trainer: 2 left after the 4th (low), none after the
	 * 6th (spent); infrastructure: 1 of 2 left after the first (low),
	 * none after the second (spent). */
	cr_assert_eq(nn, 12, "%zu notices", nn);
	for (size_t i = 0; i < nn; i++) {
		if (n[i].kind != NOTICE_BUDGET_LOW)
			continue;
		k++;
		if (k == 1) {
			cr_expect_str_eq(n[i].id, "budget-trainer-low");
			cr_expect_eq(n[i].spent, 4);
			cr_expect_eq(n[i - 1].ev.generation, 5);
		} else if (k == 2) {
			cr_expect_str_eq(n[i].id, "budget-trainer-spent");
			cr_expect_eq(n[i].spent, 6);
		} else if (k == 3) {
			cr_expect_str_eq(n[i].id, "budget-infrastructure-low");
			cr_expect_eq(n[i].limit, 2);
		} else {
			cr_expect_str_eq(n[i].id,
					 "budget-infrastructure-spent");
		}
	}
	cr_expect_eq(k, 4);
	free(n);
	/* No limit on the infrastructure (the default): no warning. */
	j.max_infra_restarts = -1;
	cr_assert_eq(notices_of(&j, v + 6, 2, &n, &nn, &e), 0);
	cr_expect_eq(nn, 2);
	free(n);
	job_release(&j);
}

static json_t *render(const struct notice *n)
{
	char *body = NULL;
	struct err e;
	json_t *j;

	cr_assert_eq(notice_render("exp1", n, &body, &e), 0, "%s", e.msg);
	j = json_loads(body, 0, NULL);
	cr_assert_not_null(j, "%s", body);
	free(body);
	return j;
}

Test(notify, the_bodies_slack_shows_and_a_program_reads)
{
	struct event v[] = {
		ev_at("2026-01-01T00:00:10.000Z", "bump", 2,
		      "slice-0-worker-1: trainer exited 7", TRAINER_EXIT),
		ev_at("2026-01-01T00:00:40.000Z", "failed", 2,
		      "restart budget spent", TRAINER_EXIT),
		ev_at("2026-01-01T00:00:30.000Z", "done", 2, "finished", ""),
		ev_at("2026-01-01T00:00:25.000Z", "quarantine", 2,
		      "preflight failed 3 times", "{\"host\":\"tpu-vm-7\"}"),
	};
	struct job j;
	struct notice *n = NULL;
	size_t nn = 0;
	struct err e;
	json_t *b, *ev, *c;
	char *text;

	job_init(&j);
	j.max_restarts = 1;
	cr_assert_eq(notices_of(&j, v, 4, &n, &nn, &e), 0);
	cr_assert_eq(nn, 5);

	b = render(&n[0]);
	cr_expect_str_eq(json_string_value(json_object_get(b, "text")),
			 "slicectl run exp1: restarted as generation 2 "
			 "(trainer/exit on slice-0-worker-1): slice-0-worker-1:"
			 " trainer exited 7");
	ev = json_object_get(b, "event");
	text = json_dumps(ev, JSON_COMPACT | JSON_PRESERVE_ORDER);
	cr_expect_str_eq(text,
			 "{\"id\":\"restart-000002-ee4ba9b3\",\"kind\":"
			 "\"restart\",\"run\":\"exp1\",\"time\":"
			 "\"2026-01-01T00:00:10.000Z\",\"generation\":2,"
			 "\"worker\":\"slice-0-worker-1\",\"cause\":{"
			 "\"class\":\"trainer\",\"kind\":\"exit\",\"worker\":"
			 "\"slice-0-worker-1\",\"exit_code\":7,\"step\":12,"
			 "\"restored\":10,\"why\":\"slice-0-worker-1: trainer "
			 "exited 7\"}}");
	free(text);
	json_decref(b);

	b = render(&n[1]);
	cr_expect_str_eq(json_string_value(json_object_get(b, "text")),
			 "slicectl run exp1: the trainer restart budget is "
			 "spent (1 of 1): the next such failure fails the run");
	c = json_object_get(json_object_get(b, "event"), "budget");
	cr_expect_str_eq(json_string_value(json_object_get(c, "class")),
			 "trainer");
	cr_expect_eq(json_integer_value(json_object_get(c, "left")), 0);
	json_decref(b);

	b = render(&n[2]);
	cr_expect_str_eq(json_string_value(json_object_get(b, "text")),
			 "slicectl run exp1: failed at generation 2: restart "
			 "budget spent");
	c = json_object_get(json_object_get(b, "event"), "cause");
	cr_expect_eq(json_integer_value(json_object_get(c, "exit_code")), 7);
	json_decref(b);

	b = render(&n[3]);
	cr_expect_str_eq(json_string_value(json_object_get(b, "text")),
			 "slicectl run exp1: done at generation 2");
	cr_expect_str_eq(json_string_value(json_object_get(
				 json_object_get(b, "event"), "kind")),
			 "done");
	json_decref(b);

	b = render(&n[4]);
	cr_expect_str_eq(json_string_value(json_object_get(b, "text")),
			 "slicectl run exp1: host tpu-vm-7 quarantined: "
			 "preflight failed 3 times");
	ev = json_object_get(b, "event");
	cr_expect_str_eq(json_string_value(json_object_get(ev, "kind")),
			 "quarantine");
	cr_expect_str_eq(json_string_value(json_object_get(json_object_get(
				 ev, "details"), "host")), "tpu-vm-7");
	json_decref(b);
	free(n);
	job_release(&j);
}

Test(notify, a_bump_of_an_older_writer_still_renders)
{
	struct event v = ev_at("2026-01-01T00:00:10.000Z", "bump", 4,
			       "restart by hand", "");
	struct job j;
	struct notice *n = NULL;
	size_t nn = 0;
	struct err e;
	json_t *b;

	job_init(&j);
	cr_assert_eq(notices_of(&j, &v, 1, &n, &nn, &e), 0);
	cr_assert_eq(nn, 1);
	b = render(&n[0]);
	cr_expect_str_eq(json_string_value(json_object_get(b, "text")),
			 "slicectl run exp1: restarted as generation 4 "
			 "(trainer/unknown on slice-0-worker-1): restart by "
			 "hand");
	cr_expect_str_eq(json_string_value(json_object_get(json_object_get(
				 json_object_get(b, "event"), "cause"), "why")),
			 "restart by hand");
	json_decref(b);
	free(n);
	job_release(&j);
}
