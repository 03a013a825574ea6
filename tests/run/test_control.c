/*
 * tests/run/test_control.c: control.json against file:// stores in a
 * temporary directory: created once, bumped once per failure however many
 * workers (threads or processes) race, the restart budget, states, the
 * restore step fixed by the first to ask, and malformed objects.
 */
#include "run/run.h"
#include "tests/run/spec_check.h"

#include "checkpoint/checkpoint.h"

#include <criterion/criterion.h>

#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

TestSuite(control, .init = spec_setup, .fini = spec_teardown, .timeout = 30);

static struct control load_ok(struct store *s)
{
	struct control c;
	struct err e;

	cr_assert_eq(control_load(s, &c, &e), 0, "%s", e.msg);
	return c;
}

static struct control bump_ok(struct store *s, const struct control *seen,
			      unsigned max_restarts, const char *reason,
			      const char *by, int64_t restore_step)
{
	struct control out;
	struct err e;

	cr_assert_eq(control_bump(s, NULL, seen, max_restarts, reason, by,
				  restore_step, &out, &e), 0, "%s", e.msg);
	return out;
}

static struct control set_state_ok(struct store *s, const char *state,
				   const char *reason, const char *by)
{
	struct control out;
	struct err e;

	cr_assert_eq(control_set_state(s, NULL, state, reason, by, &out, &e), 0,
		     "%s", e.msg);
	return out;
}

static int64_t restore_ok(struct store *s, int64_t generation)
{
	int64_t step = -7;
	struct err e;

	cr_assert_eq(control_restore_step(s, generation, &step, &e), 0, "%s",
		     e.msg);
	return step;
}

Test(control, load_creates_generation_one)
{
	struct store *s = open_store();
	struct control c = load_ok(s), again;
	struct store_object o;
	struct err e;
	json_t *root;

	cr_expect_eq(c.generation, 1);
	cr_expect_str_eq(c.state, "running");
	cr_expect_eq(c.restore_step, -1);
	cr_expect(is_rfc3339_utc(c.time), "%s", c.time);
	cr_expect_gt(c.object_generation, 0);
	cr_assert_eq(store_stat(s, RUN_CONTROL, &o, &e), 0, "%s", e.msg);
	cr_expect_eq(o.generation, c.object_generation);
	store_object_release(&o);

	/* The object as run/run.h describes it. */
	root = read_json(s, RUN_CONTROL);
	cr_expect_eq(json_integer_value(json_object_get(root, "generation")),
		     1);
	cr_expect_str_eq(json_string_value(json_object_get(root, "state")),
			 "running");
	cr_expect(json_is_string(json_object_get(root, "reason")));
	cr_expect(json_is_string(json_object_get(root, "updated_by")));
	cr_expect(json_is_null(json_object_get(root, "restore_step")));
	cr_expect(is_rfc3339_utc(json_string_value(
		json_object_get(root, "time"))));
	cr_expect_eq(json_object_size(root), 6);
	json_decref(root);

	/* A second load reads it, creating nothing. */
	again = load_ok(s);
	cr_expect_eq(again.object_generation, c.object_generation);
	cr_expect_eq(again.generation, 1);
	store_close(s);
}

Test(control, bump)
{
	struct store *s = open_store();
	struct control c = load_ok(s), out, now;
	struct err e;
	json_t *root;

	out = bump_ok(s, &c, 100, "trainer exited with status 3",
		      "slice-1-worker-2", -1);
	cr_expect_eq(out.generation, 2);
	cr_expect_str_eq(out.state, "running");
	cr_expect_str_eq(out.reason, "trainer exited with status 3");
	cr_expect_str_eq(out.updated_by, "slice-1-worker-2");
	cr_expect_eq(out.restore_step, -1);
	cr_expect(is_rfc3339_utc(out.time));
	cr_expect_neq(out.object_generation, c.object_generation);
	now = load_ok(s);
	cr_expect_eq(now.generation, 2);
	cr_expect_eq(now.object_generation, out.object_generation);
	cr_expect_str_eq(now.reason, out.reason);
	cr_expect_str_eq(now.updated_by, out.updated_by);

	/* A bump from a generation that has moved on is not another bump. */
	out = bump_ok(s, &c, 100, "late", "slice-0-worker-0", -1);
	cr_expect_eq(out.generation, 2);
	cr_expect_eq(out.object_generation, now.object_generation);
	cr_expect_str_eq(out.reason, "trainer exited with status 3");

	/* The restore step travels into the new generation only. */
	out = bump_ok(s, &now, 100, "corrupt part", "slicectl", 41);
	cr_expect_eq(out.generation, 3);
	cr_expect_eq(out.restore_step, 41);
	root = read_json(s, RUN_CONTROL);
	cr_expect_eq(json_integer_value(json_object_get(root,
							"restore_step")), 41);
	json_decref(root);
	cr_expect_eq(restore_ok(s, 3), 41);
	now = out;
	out = bump_ok(s, &now, 100, "again", "slicectl", -1);
	cr_expect_eq(out.generation, 4);
	cr_expect_eq(out.restore_step, -1);

	cr_expect_eq(control_bump(s, NULL, &now, 100, "x", "y", -2, &out, &e),
		     CLOUD_EINVAL);
	store_close(s);
}

Test(control, long_and_odd_text_is_cut_and_kept_valid)
{
	struct store *s = open_store();
	struct control c = load_ok(s), out, now;
	char reason[600];

	/* 2-byte characters across the 255-byte limit, and a quote. */
	strcpy(reason, "\"q\"\n");
	for (size_t i = 4; i + 2 < sizeof(reason); i += 2)
		memcpy(reason + i, "\xc3\xa9", 2);
	reason[sizeof(reason) - 2] = '\0';
	out = bump_ok(s, &c, 100, reason, "a-very-long-updater-name"
		      "-that-goes-on-and-on-past-sixty-four-bytes", -1);
	now = load_ok(s);
	cr_expect_str_eq(now.reason, out.reason);
	cr_expect_lt(strlen(now.reason), sizeof(now.reason));
	cr_expect_eq(strncmp(now.reason, "\"q\"\n\xc3\xa9", 6), 0);
	/* Cut between characters, never inside one. */
	cr_expect_eq(strlen(now.reason) % 2, 0, "%zu", strlen(now.reason));
	cr_expect_eq(strlen(now.updated_by), sizeof(now.updated_by) - 1);
	store_close(s);
}

/* A thread with a store of its own, acting when all of them are ready,
 * so that they race. */
struct racer {
	int (*act)(struct store *s, struct racer *a, struct err *e);
	const struct control *seen; /* what a bump starts from */
	struct control out;         /* what a bump left */
	int64_t step;               /* the step a restore got */
	pthread_barrier_t *bar;
	int rc;
	char msg[1024];
};

static void *race(void *p)
{
	struct racer *a = p;
	struct store *s = NULL;
	struct err e;

	a->rc = store_open(&s, url, &e);
	pthread_barrier_wait(a->bar);
	if (!a->rc)
		a->rc = a->act(s, a, &e);
	snprintf(a->msg, sizeof(a->msg), "%s", e.msg);
	store_close(s);
	return NULL;
}

/* Runs v[0..n) at once and waits for them all. */
static void race_all(struct racer *v, int n)
{
	pthread_t th[16];
	pthread_barrier_t bar;

	cr_assert_leq(n, 16);
	cr_assert_eq(pthread_barrier_init(&bar, NULL, (unsigned)n), 0);
	for (int i = 0; i < n; i++) {
		v[i].bar = &bar;
		cr_assert_eq(pthread_create(&th[i], NULL, race, &v[i]), 0);
	}
	for (int i = 0; i < n; i++)
		pthread_join(th[i], NULL);
	pthread_barrier_destroy(&bar);
}

static int bump_for_hang(struct store *s, struct racer *a, struct err *e)
{
	char by[64];

	snprintf(by, sizeof(by), "thread-%p", (void *)a);
	return control_bump(s, NULL, a->seen, 100, "hang", by, -1, &a->out, e);
}

Test(control, racing_bumps_from_the_same_seen_collapse_into_one)
{
	enum { N = 8 };
	struct store *s = open_store();
	struct control seen = load_ok(s), now;
	struct racer args[N];

	for (int round = 0; round < 3; round++) {
		memset(args, 0, sizeof(args));
		for (int i = 0; i < N; i++) {
			args[i].act = bump_for_hang;
			args[i].seen = &seen;
		}
		race_all(args, N);
		now = load_ok(s);
		cr_expect_eq(now.generation, seen.generation + 1,
			     "round %d: generation %lld after %d bumps from "
			     "%lld", round, (long long)now.generation, N,
			     (long long)seen.generation);
		for (int i = 0; i < N; i++) {
			cr_expect_eq(args[i].rc, 0, "%s", args[i].msg);
			cr_expect_eq(args[i].out.generation, now.generation);
			cr_expect_eq(args[i].out.object_generation,
				     now.object_generation);
			cr_expect_str_eq(args[i].out.updated_by,
					 now.updated_by);
		}
		seen = now;
	}
	store_close(s);
}

Test(control, racing_bumps_across_processes)
{
	enum { N = 6 };
	struct store *s = open_store();
	struct control seen = load_ok(s), now;
	pid_t pids[N];
	int go[2];

	cr_assert_eq(pipe(go), 0);
	for (int i = 0; i < N; i++) {
		pids[i] = fork();
		cr_assert_geq(pids[i], 0);
		if (pids[i] == 0) {
			struct store *cs;
			struct control out;
			struct err e;
			char c;
			int rc;

			close(go[1]);
			if (store_open(&cs, url, &e))
				_exit(10);
			/* Everyone starts when the parent closes the pipe. */
			while (read(go[0], &c, 1) < 0)
				;
			rc = control_bump(cs, NULL, &seen, 100, "preempted",
					  "child", -1, &out, &e);
			store_close(cs);
			_exit(rc ? 11 : out.generation == 2 ? 0 : 12);
		}
	}
	close(go[0]);
	close(go[1]);
	for (int i = 0; i < N; i++) {
		int st;

		cr_assert_eq(waitpid(pids[i], &st, 0), pids[i]);
		cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0,
			  "child %d: status %d", i, st);
	}
	now = load_ok(s);
	cr_expect_eq(now.generation, 2);
	store_close(s);
}

Test(control, budget_spent_fails_the_run)
{
	struct store *s = open_store();
	struct control c = load_ok(s), out, failed;

	/* max_restarts 2: generations 2 and 3 are restarts; a third fails. */
	out = bump_ok(s, &c, 2, "one", "w", -1);
	cr_expect_eq(out.generation, 2);
	c = out;
	out = bump_ok(s, &c, 2, "two", "w", -1);
	cr_expect_eq(out.generation, 3);
	cr_expect_str_eq(out.state, "running");
	c = out;
	out = bump_ok(s, &c, 2, "three", "slice-0-worker-1", -1);
	cr_expect_eq(out.generation, 3);
	cr_expect_str_eq(out.state, "failed");
	cr_expect(strstr(out.reason, "restart budget"), "%s", out.reason);
	cr_expect(strstr(out.reason, "max_restarts 2"), "%s", out.reason);
	cr_expect(strstr(out.reason, "three"), "%s", out.reason);
	cr_expect_str_eq(out.updated_by, "slice-0-worker-1");
	failed = load_ok(s);
	cr_expect_str_eq(failed.state, "failed");
	cr_expect_eq(failed.generation, 3);
	cr_expect_eq(failed.object_generation, out.object_generation);

	/* Another worker's bump for the same failure changes nothing. */
	out = bump_ok(s, &c, 2, "three", "slice-0-worker-0", -1);
	cr_expect_str_eq(out.state, "failed");
	cr_expect_eq(out.object_generation, failed.object_generation);
	store_close(s);
}

Test(control, no_restarts_allowed)
{
	struct store *s = open_store();
	struct control c = load_ok(s), out;

	out = bump_ok(s, &c, 0, "crash", "w", -1);
	cr_expect_eq(out.generation, 1);
	cr_expect_str_eq(out.state, "failed");
	cr_expect(strstr(out.reason, "max_restarts 0"), "%s", out.reason);
	store_close(s);
}

Test(control, runs_not_running_are_not_bumped)
{
	static const char *const states[] = { "stopping", "done", "failed" };
	struct store *s = open_store();

	for (size_t i = 0; i < 3; i++) {
		struct control c = load_ok(s), set, out, now;

		set = set_state_ok(s, states[i], "by hand", "slicectl");
		cr_expect_str_eq(set.state, states[i]);
		out = bump_ok(s, &c, 100, "crash", "w", -1);
		cr_expect_str_eq(out.state, states[i]);
		cr_expect_eq(out.generation, c.generation);
		cr_expect_eq(out.object_generation, set.object_generation);
		now = load_ok(s);
		cr_expect_eq(now.object_generation, set.object_generation);
		cr_expect_str_eq(now.reason, "by hand");
		/* An ended run stays ended: start afresh for the next. */
		{
			struct err e;

			cr_assert_eq(store_delete(s, "control.json",
						  STORE_ANY_GENERATION, &e),
				     0, "%s", e.msg);
		}
	}
	store_close(s);
}

Test(control, an_ended_run_stays_ended)
{
	static const char *const ends[] = { "done", "failed" };

	for (size_t i = 0; i < 2; i++) {
		struct store *s = open_store();
		struct control out;
		struct err e;

		load_ok(s);
		set_state_ok(s, ends[i], "ended", "w");
		cr_assert_eq(control_set_state(s, NULL, "stopping", "too late",
					       "slicectl", &out, &e),
			     0, "%s", e.msg);
		cr_expect_str_eq(out.state, ends[i]);
		cr_expect_str_eq(out.reason, "ended");
		cr_assert_eq(store_delete(s, "control.json",
					  STORE_ANY_GENERATION, &e),
			     0, "%s", e.msg);
		store_close(s);
	}
}

Test(control, set_state)
{
	struct store *s = open_store();
	struct control c = load_ok(s), out, now;
	struct err e;

	out = set_state_ok(s, "stopping", "slicectl stop", "slicectl");
	cr_expect_str_eq(out.state, "stopping");
	cr_expect_str_eq(out.reason, "slicectl stop");
	cr_expect_str_eq(out.updated_by, "slicectl");
	cr_expect_eq(out.generation, c.generation);
	cr_expect_eq(out.restore_step, c.restore_step);
	now = load_ok(s);
	cr_expect_str_eq(now.state, "stopping");
	cr_expect_eq(now.object_generation, out.object_generation);

	out = set_state_ok(s, "done", NULL, NULL);
	cr_expect_str_eq(out.state, "done");
	cr_expect_str_eq(out.reason, "");
	cr_expect_str_eq(out.updated_by, "");

	cr_expect_eq(control_set_state(s, NULL, "paused", "x", "y", &out, &e),
		     CLOUD_EINVAL);
	cr_expect(strstr(e.msg, "paused"), "%s", e.msg);
	now = load_ok(s);
	cr_expect_str_eq(now.state, "done");
	store_close(s);
}

/* A trainer's checkpoint directory: dir/weights holding text. */
static void make_source(const char *dir, const char *text)
{
	char file[800];
	FILE *f;

	snprintf(file, sizeof(file), "%s/weights", dir);
	cr_assert_eq(mkdir(dir, 0755), 0, "mkdir %s", dir);
	f = fopen(file, "w");
	cr_assert(f && fputs(text, f) >= 0 && !fclose(f), "write %s", file);
}

/* A committed step made the way workers make them. */
static void save_step(struct store *s, uint64_t step, unsigned expected)
{
	struct ckpt_save_options o;
	struct ckpt_save_result r;
	char dir[700], text[64];
	struct err e;

	snprintf(dir, sizeof(dir), "%s/src-%llu", root,
		 (unsigned long long)step);
	snprintf(text, sizeof(text), "step %llu\n", (unsigned long long)step);
	make_source(dir, text);
	ckpt_save_options_init(&o);
	o.pack.threads = 1;
	o.parts_expected = expected;
	cr_assert_eq(ckpt_save(s, dir, step, &o, &r, &e), 0, "%s", e.msg);
	cr_assert_eq(r.committed, expected == 1);
}

Test(control, restore_step_is_zero_when_nothing_is_committed)
{
	struct store *s = open_store();
	struct control c = load_ok(s), now;

	save_step(s, 5, 2); /* a part, never committed */
	cr_expect_eq(restore_ok(s, 1), 0);
	now = load_ok(s);
	cr_expect_eq(now.restore_step, 0);
	cr_expect_eq(now.generation, c.generation);
	/* Chosen once: a step committed later does not change it. */
	save_step(s, 9, 1);
	cr_expect_eq(restore_ok(s, 1), 0);
	store_close(s);
}

Test(control, restore_step_is_the_newest_committed_sound_step)
{
	struct store *s = open_store();
	struct control c = load_ok(s), now;
	struct err e;

	save_step(s, 3, 1);
	save_step(s, 7, 1);
	save_step(s, 9, 2); /* uncommitted */
	/* A malformed COMMIT: the step cannot be restored. */
	cr_assert_eq(store_put(s, "checkpoints/step-0000000008/COMMIT",
			       "{garbage", 8, STORE_CREATE_ONLY, NULL, &e), 0,
		     "%s", e.msg);
	cr_expect_eq(restore_ok(s, 1), 7);
	now = load_ok(s);
	cr_expect_eq(now.restore_step, 7);
	cr_expect_str_eq(now.state, c.state);
	cr_expect_str_eq(now.reason, c.reason);

	save_step(s, 12, 1);
	cr_expect_eq(restore_ok(s, 1), 7, "chosen once per generation");

	/* The next generation chooses again. */
	bump_ok(s, &now, 100, "crash", "w", -1);
	cr_expect_eq(restore_ok(s, 2), 12);
	store_close(s);
}

Test(control, restore_step_of_a_generation_that_moved)
{
	struct store *s = open_store();
	struct control c = load_ok(s), before;
	int64_t step = -7;
	struct err e;

	bump_ok(s, &c, 100, "crash", "w", -1);
	before = load_ok(s);
	cr_expect_eq(control_restore_step(s, 1, &step, &e),
		     CLOUD_EPRECONDITION);
	cr_expect(strstr(e.msg, "control.json"), "%s", e.msg);
	cr_expect(strstr(e.msg, "generation 2"), "%s", e.msg);
	cr_expect_eq(load_ok(s).object_generation, before.object_generation);
	cr_expect_eq(control_restore_step(s, 3, &step, &e),
		     CLOUD_EPRECONDITION);
	cr_expect_eq(control_restore_step(s, 0, &step, &e), CLOUD_EINVAL);
	store_close(s);
}

static int restore_gen_1(struct store *s, struct racer *a, struct err *e)
{
	return control_restore_step(s, 1, &a->step, e);
}

static int commit_late(struct store *s, struct racer *a, struct err *e)
{
	struct ckpt_save_options o;
	char dir[700];

	(void)a;
	snprintf(dir, sizeof(dir), "%s/src-late", root);
	ckpt_save_options_init(&o);
	o.pack.threads = 1;
	return ckpt_save(s, dir, 11, &o, NULL, e);
}

Test(control, racing_callers_restore_the_same_step)
{
	enum { N = 8 };
	struct store *s = open_store();
	struct racer args[N + 1];
	struct control now;
	char dir[700];

	load_ok(s);
	save_step(s, 7, 1);
	/* Step 11 is committed while they choose: whichever they get, they
	 * all get the same. */
	snprintf(dir, sizeof(dir), "%s/src-late", root);
	make_source(dir, "late\n");
	memset(args, 0, sizeof(args));
	for (int i = 0; i <= N; i++) {
		args[i].act = i < N ? restore_gen_1 : commit_late;
		args[i].step = -7;
	}
	race_all(args, N + 1);
	cr_expect_eq(args[N].rc, 0, "commit: %s", args[N].msg);
	now = load_ok(s);
	cr_expect(now.restore_step == 7 || now.restore_step == 11, "%lld",
		  (long long)now.restore_step);
	for (int i = 0; i < N; i++) {
		cr_expect_eq(args[i].rc, 0, "%s", args[i].msg);
		cr_expect_eq(args[i].step, now.restore_step, "caller %d: %lld "
			     "vs %lld", i, (long long)args[i].step,
			     (long long)now.restore_step);
	}
	store_close(s);
}

/* Bump, set_state and restore_step all fail with code, naming
 * control.json. */
static void changes_fail(struct store *s, int code)
{
	struct control c, out;
	int64_t step;
	struct err e;

	memset(&c, 0, sizeof(c));
	c.generation = 1;
	cr_expect_eq(control_bump(s, NULL, &c, 100, "x", "y", -1, &out, &e),
		     code);
	cr_expect_eq(control_set_state(s, NULL, "done", "x", "y", &out, &e),
		     code);
	cr_expect_eq(control_restore_step(s, 1, &step, &e), code);
	cr_expect(strstr(e.msg, "control.json"), "%s", e.msg);
}

Test(control, malformed_control_is_corrupt)
{
	static const char *const bad[] = {
		"",
		"not json",
		"[1]",
		"{\"state\": \"running\"}",
		"{\"generation\": 0, \"state\": \"running\"}",
		"{\"generation\": \"2\", \"state\": \"running\"}",
		"{\"generation\": 2.5, \"state\": \"running\"}",
		"{\"generation\": 2}",
		"{\"generation\": 2, \"state\": \"sleeping\"}",
		"{\"generation\": 2, \"state\": \"running\", "
		"\"restore_step\": -3}",
		"{\"generation\": 2, \"state\": \"running\", "
		"\"restore_step\": \"7\"}",
		"{\"generation\": 2, \"state\": \"running\", \"reason\": 5}",
		"{\"generation\": 2, \"state\": \"running\", "
		"\"updated_by\": []}",
		"{\"generation\": 2, \"state\": \"running\", \"time\": {}}",
		"{\"generation\": 99999999999999999999999, "
		"\"state\": \"running\"}",
	};
	struct store *s = open_store();
	struct control c;
	struct err e;

	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		put_raw(s, RUN_CONTROL, bad[i]);
		cr_expect_eq(control_load(s, &c, &e), CLOUD_ECORRUPT,
			     "\"%s\" loaded", bad[i]);
		cr_expect(strstr(e.msg, "control.json"), "%s", e.msg);
		cr_expect(strstr(e.msg, "file://"), "%s", e.msg);
	}
	/* Every function says so, none repairs it. */
	changes_fail(s, CLOUD_ECORRUPT);
	{
		char *data;
		size_t len;

		cr_assert_eq(store_read(s, RUN_CONTROL, 1 << 20, &data, &len,
					NULL, &e), 0);
		cr_expect_str_eq(data, bad[sizeof(bad) / sizeof(*bad) - 1]);
		free(data);
	}

	/* Too large to be ours. */
	{
		size_t n = 100 << 10;
		char *big = malloc(n + 1);
		const char *head = "{\"generation\": 1, \"state\": \"running\"}";

		cr_assert(big);
		memset(big, ' ', n);
		memcpy(big, head, strlen(head));
		big[n] = '\0';
		put_raw(s, RUN_CONTROL, big);
		free(big);
		cr_expect_eq(control_load(s, &c, &e), CLOUD_ECORRUPT, "%s",
			     e.msg);
		cr_expect(strstr(e.msg, "control.json"), "%s", e.msg);
	}

	/* Minimal but sound: the optional fields default. */
	put_raw(s, RUN_CONTROL, "{\"generation\": 4, \"state\": \"stopping\", "
		    "\"extra\": true}");
	cr_assert_eq(control_load(s, &c, &e), 0, "%s", e.msg);
	cr_expect_eq(c.generation, 4);
	cr_expect_str_eq(c.state, "stopping");
	cr_expect_eq(c.restore_step, -1);
	cr_expect_str_eq(c.reason, "");
	store_close(s);
}

Test(control, missing_control_is_not_found_except_for_load)
{
	struct store *s = open_store();
	struct control c;
	struct err e;

	changes_fail(s, CLOUD_ENOTFOUND);
	cr_expect_eq(control_load(s, &c, &e), 0, "%s", e.msg);
	store_close(s);
}
