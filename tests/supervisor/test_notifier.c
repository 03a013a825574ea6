/*
 * Process 0's notifier (supervisor/notifier.c) against
 * tests/fakes/notify_receiver.py on loopback, over a file:// run whose
 * history the test writes: two notifiers racing on one history send each
 * notice once; a receiver that drops connections and answers 500 first,
 * or that is down when the first try goes, gets each notice once it
 * answers; a stalling one costs the notifier its tries and nothing else;
 * a dead sender's old claim is taken over while a live one's is left.
 * Then a real slice-supervisor whose run fails posts its restart, its
 * spent budget and "failed", each once.
 */
#include "cloud/cloud.h"
#include "run/run.h"
#include "supervisor/notifier.h"
#include "tests/cloud/fake_server.h"
#include "tests/harness/harness.h"
#include "tests/supervisor/run_check.h"

#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <jansson.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static struct {
	char dir[HARNESS_PATH], run_dir[HARNESS_PATH + 8];
	char run_url[HARNESS_PATH + 16], hook[128];
	struct fake_server rx;
	bool rx_up;
	struct job job;
	struct store *store;
	pid_t sup;
} w;

static void down(void)
{
	if (w.sup > 0) {
		kill(w.sup, SIGKILL);
		wait_child(&w.sup, 10);
	}
	kill_left_trainers(w.dir, "w*");
	if (w.rx_up)
		fake_server_stop(&w.rx);
	if (w.store)
		store_close(w.store);
	job_release(&w.job);
	if (w.dir[0])
		rm_rf(w.dir);
}

TestSuite(notifier, .fini = down, .timeout = 120);

static void receiver_start(const char *port)
{
	const char *args[] = { "--port", port, NULL };

	cr_assert_eq(fake_server_start(&w.rx, "tests/fakes/notify_receiver.py",
				       port ? args : NULL), 0);
	w.rx_up = true;
	snprintf(w.hook, sizeof(w.hook), "%s/services/T0/B0/SECRET",
		 w.rx.base);
}

/* A run whose job.json notifies hook (the receiver's, unless given). */
static void up(bool receiver)
{
	struct err e;
	char path[HARNESS_PATH + 32], text[1024];

	memset(&w, 0, sizeof(w));
	job_init(&w.job);
	cr_assert_eq(make_temp_dir(w.dir, sizeof(w.dir), "notifier"), 0);
	snprintf(w.run_dir, sizeof(w.run_dir), "%s/run", w.dir);
	snprintf(w.run_url, sizeof(w.run_url), "file://%s", w.run_dir);
	cr_assert_eq(sh("mkdir -p '%s/events' '%s/sync'", w.run_dir, w.dir),
		     0);
	setenv("no_proxy", "127.0.0.1", 1);
	if (receiver)
		receiver_start(NULL);
	w.job.name = strdup("exp1");
	w.job.command = strdup("true");
	w.job.max_restarts = 10;
	cr_assert_eq(strlist_push(&w.job.notify, w.hook), 0);
	cr_assert_eq(store_open(&w.store, w.run_url, &e), 0, "%s", e.msg);
	snprintf(path, sizeof(path), "%s/control.json", w.run_dir);
	snprintf(text, sizeof(text), "{\"generation\": 3, \"state\": "
		 "\"running\", \"reason\": \"\", \"updated_by\": \"x\", "
		 "\"restore_step\": null, \"time\": \"2026-01-01T00:00:00Z\"}");
	write_text(path, text);
}

/* The history of a run that crashed, was preempted and ended. */
static void history(bool ended)
{
	static const char *const cause[] = {
		"{\"class\":\"trainer\",\"kind\":\"exit\",\"worker\":"
		"\"slice-0-worker-1\",\"exit_code\":7}",
		"{\"class\":\"infrastructure\",\"kind\":\"preemption\","
		"\"worker\":\"slice-0-worker-0\",\"notice\":true}",
	};
	struct err e;

	cr_assert_eq(event_record_as(w.store, "slice-0-worker-1", "bump", 2,
				     "trainer exited 7", cause[0], &e), 0);
	cr_assert_eq(event_record_as(w.store, "slice-0-worker-0", "bump", 3,
				     "preempted", cause[1], &e), 0);
	if (ended)
		cr_assert_eq(event_record_as(w.store, "slice-0-worker-0",
					     "done", 3, "finished", NULL, &e),
			     0);
}

static json_t *requests(void)
{
	char *body = NULL;
	json_t *v;

	cr_assert_eq(fake_server_call(&w.rx, "GET", "/_fake/requests", NULL,
				      &body), 200);
	v = json_loads(body, 0, NULL);
	free(body);
	cr_assert(json_is_array(v));
	return v;
}

/* Notices delivered (answered 200), each id at most once, else the test
 * fails; of kind when not NULL. */
static unsigned delivered(const char *kind)
{
	json_t *v = requests(), *r, *seen = json_object();
	unsigned n = 0;
	size_t i;

	json_array_foreach(v, i, r) {
		json_t *ev = json_object_get(json_object_get(r, "json"),
					     "event");
		const char *id = json_string_value(json_object_get(ev, "id"));
		const char *k = json_string_value(json_object_get(ev, "kind"));

		if (json_integer_value(json_object_get(r, "status")) != 200)
			continue;
		cr_assert_not_null(id);
		cr_assert_null(json_object_get(seen, id), "%s sent twice",
			       id);
		json_object_set_new(seen, id, json_true());
		if (!kind || !strcmp(kind, k))
			n++;
	}
	json_decref(seen);
	json_decref(v);
	return n;
}

static void wait_delivered(unsigned n, unsigned timeout_s)
{
	double until = mono_s() + timeout_s;

	while (delivered(NULL) < n) {
		cr_assert_lt(mono_s(), until, "%u of %u notices after %u s",
			     delivered(NULL), n, timeout_s);
		sleep_ms(100);
	}
}

/* The state notify/ID's record says (to free). */
static char *record_state(const char *id_prefix)
{
	char cmd[HARNESS_PATH * 2];
	FILE *f;
	char line[512] = "";

	snprintf(cmd, sizeof(cmd), "cat '%s/notify/'%s* 2>/dev/null",
		 w.run_dir, id_prefix);
	f = popen(cmd, "r");
	cr_assert_not_null(f);
	if (!fgets(line, sizeof(line), f))
		line[0] = '\0';
	pclose(f);
	return strdup(strstr(line, "\"sent\"")	      ? "sent"
		      : strstr(line, "\"gave-up\"")   ? "gave-up"
		      : strstr(line, "\"sending\"")   ? "sending"
						      : "");
}

static struct notifier *start(const char *who)
{
	struct notifier *n = NULL;
	struct err e;

	cr_assert_eq(notifier_start(&n, w.run_url, &w.job, who, &e), 0, "%s",
		     e.msg);
	return n;
}

Test(notifier, two_notifiers_racing_on_one_history_send_each_notice_once)
{
	struct notifier *a, *b;
	char *st;
	json_t *v, *r;
	size_t i;

	setenv("SLICE_NOTIFY_PERIOD_MS", "100", 1);
	up(true);
	history(true);
	a = start("slice-0-worker-0");
	b = start("slice-0-worker-0-again");
	wait_delivered(3, 30);
	sleep_ms(1000); /* time for a second copy, were there one */
	notifier_stop(a, mono_ms() + 5000);
	notifier_stop(b, mono_ms() + 5000);
	cr_expect_eq(delivered("restart"), 2);
	cr_expect_eq(delivered("done"), 1);
	cr_expect_eq(delivered(NULL), 3);
	st = record_state("done-");
	cr_expect_str_eq(st, "sent");
	free(st);
	/* What the receiver got is what a person reads, and the path the
	 * webhook's secret is in is the one given. */
	v = requests();
	json_array_foreach(v, i, r) {
		const char *text = json_string_value(json_object_get(
			json_object_get(r, "json"), "text"));

		cr_expect_eq(strncmp(text, "slicectl run exp1: ", 19), 0,
			     "%s", text);
		cr_expect_str_eq(json_string_value(json_object_get(r, "path")),
				 "/services/T0/B0/SECRET");
	}
	json_decref(v);
}

Test(notifier, a_refusing_then_failing_receiver_gets_each_notice_once)
{
	struct notifier *a;

	setenv("SLICE_NOTIFY_PERIOD_MS", "100", 1);
	setenv("SLICECTL_HTTP_RETRY_BASE_MS", "50", 1);
	up(true);
	cr_assert_eq(fake_server_faults(&w.rx, "[{\"method\": \"POST\", "
					"\"count\": 2, \"reset\": true}, "
					"{\"method\": \"POST\", \"count\": 1, "
					"\"status\": 500}]"), 0);
	history(false);
	a = start("slice-0-worker-0");
	wait_delivered(2, 30);
	sleep_ms(500);
	notifier_stop(a, mono_ms() + 5000);
	cr_expect_eq(delivered("restart"), 2);
	json_t *v = requests();
	cr_expect_eq(json_array_size(v), 5, "2 dropped, one 500, 2 sent");
	json_decref(v);
}

/* A port on 127.0.0.1 that nothing listens on (for now). */
static unsigned free_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET };
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	cr_assert_geq(fd, 0);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	cr_assert_eq(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	cr_assert_eq(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	close(fd);
	return ntohs(a.sin_port);
}

Test(notifier, a_receiver_down_at_first_gets_the_notice_once_it_is_up)
{
	struct notifier *a;
	char port[16];
	double t0;

	setenv("SLICE_NOTIFY_PERIOD_MS", "100", 1);
	up(false);
	snprintf(port, sizeof(port), "%u", free_port());
	/* job.json's URL before the receiver exists: connections refused. */
	free(w.job.notify.v[0]);
	w.job.notify.v[0] = NULL;
	snprintf(w.hook, sizeof(w.hook), "http://127.0.0.1:%s/hook", port);
	cr_assert_not_null(w.job.notify.v[0] = strdup(w.hook));
	history(false);
	t0 = mono_s();
	a = start("slice-0-worker-0");
	sleep_ms(1500);
	receiver_start(port);
	/* The tries are jittered from 2 s up: all five within a minute. */
	wait_delivered(2, 90);
	notifier_stop(a, mono_ms() + 5000);
	cr_expect_eq(delivered("restart"), 2);
	cr_expect_gt(mono_s() - t0, 1.5);
}

Test(notifier, a_stalling_receiver_costs_the_notifier_its_tries_only)
{
	struct notifier *a;
	uint64_t t0;
	char *st;

	setenv("SLICE_NOTIFY_PERIOD_MS", "100", 1);
	setenv("SLICE_NOTIFY_TRY_MS", "500", 1);
	setenv("SLICECTL_HTTP_RETRY_BASE_MS", "50", 1);
	up(true);
	cr_assert_eq(fake_server_faults(&w.rx, "{\"method\": \"POST\", "
					"\"count\": -1, \"stall\": 30}"), 0);
	history(false);
	a = start("slice-0-worker-0");
	/* Five tries of 0.5 s each, then given up; the next notice too. */
	for (double until = mono_s() + 40;; sleep_ms(200)) {
		char *s2 = record_state("restart-000003-");

		if (!strcmp(s2, "gave-up")) {
			free(s2);
			break;
		}
		free(s2);
		cr_assert_lt(mono_s(), until, "never given up");
	}
	st = record_state("restart-000002-");
	cr_expect_str_eq(st, "gave-up");
	free(st);
	t0 = mono_ms();
	notifier_stop(a, mono_ms() + 2000);
	cr_expect_lt(mono_ms() - t0, 4000);
	cr_expect_eq(delivered(NULL), 0);
}

Test(notifier, a_dead_senders_old_claim_is_taken_over_a_live_one_left)
{
	struct notifier *a;
	struct notice *nv = NULL;
	struct event *ev = NULL;
	size_t n = 0, nn = 0;
	char path[HARNESS_PATH + 128], *st;
	struct err e;

	setenv("SLICE_NOTIFY_PERIOD_MS", "100", 1);
	up(true);
	history(false);
	cr_assert_eq(events_list(w.store, &ev, &n, &e), 0);
	cr_assert_eq(notices_of(&w.job, ev, n, &nv, &nn, &e), 0);
	cr_assert_eq(nn, 2);
	cr_assert_eq(sh("mkdir -p '%s/notify'", w.run_dir), 0);
	/* Generation 2's claimed long ago by a sender that died; 3's just
	 * now by one still sending. */
	snprintf(path, sizeof(path), "%s/notify/%s", w.run_dir, nv[0].id);
	write_text(path, "{\"state\":\"sending\",\"by\":\"gone\","
			 "\"time\":\"2020-01-01T00:00:00Z\"}");
	snprintf(path, sizeof(path), "%s/notify/%s", w.run_dir, nv[1].id);
	{
		char now[40], text[160];

		rfc3339_now(now, sizeof(now));
		snprintf(text, sizeof(text), "{\"state\":\"sending\",\"by\":"
			 "\"alive\",\"time\":\"%s\"}", now);
		write_text(path, text);
	}
	a = start("slice-0-worker-0");
	wait_delivered(1, 30);
	sleep_ms(1000);
	notifier_stop(a, mono_ms() + 5000);
	cr_expect_eq(delivered(NULL), 1);
	st = record_state("restart-000002-");
	cr_expect_str_eq(st, "sent");
	free(st);
	st = record_state("restart-000003-");
	cr_expect_str_eq(st, "sending");
	free(st);
	free(nv);
	free(ev);
}

/* A real supervisor: a trainer that exits 7 spends the one restart the
 * run has (a restart, and its budget spent), then fails the run; each
 * notice leaves before the supervisor, once. */
Test(notifier, a_failing_run_posts_its_restart_spent_budget_and_failure)
{
	const char *env[] = { "SLICE_NOTIFY_PERIOD_MS=200", NULL };
	char job[1024], path[HARNESS_PATH + 32], state[HARNESS_PATH + 16];
	char log[HARNESS_PATH + 16];
	json_t *v, *r;
	size_t i;
	int st;

	up(true);
	snprintf(job, sizeof(job),
		 "{\"name\": \"exp1\", \"command\": \"echo boom; exit 7\", "
		 "\"num_slices\": 1, \"workers_per_slice\": 1, "
		 "\"max_restarts\": 1, \"heartbeat_s\": 1, \"grace_s\": 2, "
		 "\"notify\": [\"%s\"]}", w.hook);
	snprintf(path, sizeof(path), "%s/job.json", w.run_dir);
	write_text(path, job);
	snprintf(path, sizeof(path), "%s/control.json", w.run_dir);
	unlink(path);
	snprintf(state, sizeof(state), "%s/w0", w.dir);
	snprintf(log, sizeof(log), "%s/sup0.log", w.dir);
	w.sup = spawn_supervisor(w.run_url, state, 0, log, env);
	st = wait_child(&w.sup, 90);
	cr_assert_neq(st, -1, "the supervisor did not end");
	assert_run_control(w.run_dir, 2, "failed", NULL);
	cr_expect_eq(delivered("restart"), 1);
	cr_expect_eq(delivered("budget_low"), 1);
	cr_expect_eq(delivered("failed"), 1);
	cr_expect_eq(delivered(NULL), 3);
	v = requests();
	json_array_foreach(v, i, r) {
		json_t *ev = json_object_get(json_object_get(r, "json"),
					     "event");
		json_t *c = json_object_get(ev, "cause");
		const char *kind = json_string_value(json_object_get(ev,
								     "kind"));

		if (!strcmp(kind, "budget_low")) {
			cr_expect_str_eq(json_string_value(json_object_get(
						 ev, "id")),
					 "budget-trainer-spent");
			continue;
		}
		cr_expect_str_eq(json_string_value(json_object_get(c,
								   "class")),
				 "trainer", "%s", kind);
		cr_expect_eq(json_integer_value(json_object_get(c,
								"exit_code")),
			     7, "%s", kind);
	}
	json_decref(v);
}
