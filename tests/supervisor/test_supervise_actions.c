/*
 * tests/supervisor/test_supervise_actions.c: the supervisor's table
 * (supervise_table.c) acted on, where test_supervise_table.c reads what
 * it declares. Each test sets a supervisor (sup.h: set up for real, its
 * syncer and shipper against a file:// run in a temporary directory, its
 * trainer a real child process) in a phase, raises one event through the
 * pass's dispatcher (sup_dispatch), and checks the phase it leads to,
 * that the table declares it, and what the action did that others see:
 * the trainer signalled, the heartbeat, control.json, the state file.
 */
#include "supervisor/sup.h"
#include "tests/harness/harness.h"
#include "tests/supervisor/run_check.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define GRACE_S 1

static struct {
	char dir[HARNESS_PATH];
	char run_dir[HARNESS_PATH + 16];
	char run_url[HARNESS_PATH + 64];
	char state_dir[HARNESS_PATH + 16];
	struct supervise_options o;
	struct sup s;
	bool up;
} w;

static void down(void)
{
	if (w.up)
		sup_release(&w.s);
	rm_rf(w.dir);
	memset(&w, 0, sizeof(w));
}

TestSuite(action, .fini = down, .timeout = 60);

/* A supervisor of a one-worker run whose trainer is command, set up and
 * joined: control.json read (generation 1, running). */
static void up(const char *command)
{
	char job[1024], path[HARNESS_PATH + 32];
	struct control c;
	struct err e;

	memset(&w, 0, sizeof(w));
	log_setup("test_supervise_actions", LOG_ERROR);
	cr_assert_eq(make_temp_dir(w.dir, sizeof(w.dir), "actions"), 0);
	snprintf(w.run_dir, sizeof(w.run_dir), "%s/run", w.dir);
	snprintf(w.run_url, sizeof(w.run_url), "file://%s", w.run_dir);
	snprintf(w.state_dir, sizeof(w.state_dir), "%s/state", w.dir);
	cr_assert_eq(sh("mkdir -p '%s'", w.run_dir), 0);
	snprintf(job, sizeof(job),
		 "{\"name\": \"actions\", \"command\": \"%s\", "
		 "\"num_slices\": 1, \"workers_per_slice\": 1, "
		 "\"heartbeat_s\": 1, \"grace_s\": %d, \"hang_timeout_s\": 60}",
		 command, GRACE_S);
	snprintf(path, sizeof(path), "%s/job.json", w.run_dir);
	write_text(path, job);
	w.o = (struct supervise_options){ .run_url = w.run_url,
					  .state_dir = w.state_dir,
					  .no_metadata = true,
					  .control_poll_ms = 100 };
	err_init(&e);
	sup_init(&w.s, &w.o);
	w.up = true;
	cr_assert_eq(sup_setup(&w.s, &e), 0, "%s", e.msg);
	for (int i = 0; i < 200 && !syncer_control(w.s.sync, &c); i++)
		proc_sleep_ms(50, false);
	cr_assert(syncer_control(w.s.sync, &c), "control.json never read");
	cr_assert_eq(c.generation, 1);
	cr_assert_str_eq(c.state, "running");
}

/* control.json as last read, and the state it says. */
static struct control control_as(const char *state)
{
	struct control c;

	cr_assert(syncer_control(w.s.sync, &c));
	snprintf(c.state, sizeof(c.state), "%s", state);
	return c;
}

/* Raises ev in phase from: the phase the action leads to, which the
 * table must declare. */
static enum sup_phase raise_in(enum sup_phase from, enum sup_event ev,
			       const struct control *c)
{
	struct sup_cell_view v;
	enum sup_phase to;

	w.s.phase = from;
	to = sup_dispatch(&w.s, ev, c);
	cr_assert_eq(to, w.s.phase);
	sup_table_view(from, ev, &v);
	if (v.kind == SUP_CELL_ACTION)
		cr_assert(v.next & SUP_PHASE_BIT(to),
			  "%s in %s led to %s, which the table does not say",
			  sup_event_names[ev], sup_phase_names[from],
			  sup_phase_names[to]);
	return to;
}

/* The restore's result raised in RESTORE: the trainer starts, RUN. */
static pid_t run_trainer(void)
{
	struct control c = control_as("running");

	w.s.generation = c.generation;
	w.s.result = (struct syncer_result){ .task = TASK_RESTORE };
	w.s.have_result = true;
	cr_assert_eq(raise_in(P_RESTORE, EV_RESTORED, &c), P_RUN);
	cr_assert_gt(w.s.trainer.pid, 0);
	cr_assert_eq(kill(w.s.trainer.pid, 0), 0, "the trainer is not alive");
	return w.s.trainer.pid;
}

/* The trainer's end as the loop sees it (SIGCHLD, then the reap). */
static void wait_trainer(void)
{
	for (int i = 0; i < 400 && !trainer_reap(&w.s.trainer); i++)
		proc_sleep_ms(25, false);
	cr_assert(w.s.trainer.exited, "the trainer did not end");
}

static void assert_killed_by(int sig)
{
	wait_trainer();
	cr_assert(WIFSIGNALED(w.s.trainer.status) &&
			  WTERMSIG(w.s.trainer.status) == sig,
		  "trainer status %#x, not signal %d", w.s.trainer.status,
		  sig);
}

/* The heartbeat in the bucket comes to say state (within 10 s: the
 * syncer writes an object at most once a second). */
static void assert_heartbeat(const char *state)
{
	char got[32] = "";

	for (int i = 0; i < 200; i++) {
		run_heartbeat_state(w.run_dir, 0, got, sizeof(got));
		if (!strcmp(got, state))
			return;
		proc_sleep_ms(50, false);
	}
	cr_assert_str_eq(got, state, "heartbeat");
}

/* control.json in the bucket comes to be generation, state. */
static void assert_control(long long generation, const char *state,
			   const char *reason_has)
{
	json_t *j = NULL;

	for (int i = 0; i < 200; i++) {
		j = run_control(w.run_dir);
		if (j && json_integer_value(json_object_get(j, "generation")) ==
				 generation)
			break;
		json_decref(j);
		j = NULL;
		proc_sleep_ms(50, false);
	}
	json_decref(j);
	assert_run_control(w.run_dir, generation, state, reason_has);
}

Test(action, restored_starts_the_trainer)
{
	char path[HARNESS_PATH + 64], *state;

	up("exec sleep 600");
	run_trainer();
	cr_assert_eq(w.s.starts, 1);
	assert_heartbeat("running");
	snprintf(path, sizeof(path), "%s/state.json", w.state_dir);
	state = read_file(path, NULL);
	cr_assert_not_null(state);
	cr_assert_not_null(strstr(state, "trainer_pgid"), "%s", state);
	free(state);
}

/* A notice with the trainer running: SIGTERM for its final step, then
 * its end ends the supervisor, "preempted". */
Test(action, notice_in_run_signals_the_trainer)
{
	up("exec sleep 600");
	run_trainer();
	w.s.notice = true;
	snprintf(w.s.why, sizeof(w.s.why), "SIGTERM: test");
	cr_assert_eq(raise_in(P_RUN, EV_NOTICE, NULL), P_EMERGENCY);
	cr_assert(w.s.st.preempted);
	cr_assert_gt(w.s.deadline_ms, mono_ms(), "no grace period");
	assert_killed_by(SIGTERM);
	cr_assert_eq(raise_in(P_EMERGENCY, EV_EXITED, NULL), P_END);
	cr_assert_str_eq(w.s.end_state, "preempted");
	cr_assert_eq(w.s.trainer.pid, 0, "the trainer is not forgotten");
	assert_heartbeat("preempted");
}

Test(action, run_ended_stops_the_trainer_then_ends)
{
	struct control c;

	up("exec sleep 600");
	run_trainer();
	c = control_as("stopped");
	cr_assert_eq(raise_in(P_RUN, EV_RUN_ENDED, &c), P_STOP);
	cr_assert_eq(w.s.after_stop, P_END);
	assert_heartbeat("stopping");
	assert_killed_by(SIGTERM);
	cr_assert_eq(raise_in(P_STOP, EV_EXITED, &c), P_END);
	cr_assert_str_eq(w.s.end_state, "exited");
}

/* A new generation stops the trainer; one that ignores SIGTERM is
 * killed when the grace period runs out, and the restore is asked. */
Test(action, new_generation_stops_then_grace_kills)
{
	struct control c;
	pid_t pid;

	up("trap '' TERM; sleep 600");
	pid = run_trainer();
	c = control_as("running");
	c.generation = 2;
	cr_assert_eq(raise_in(P_RUN, EV_NEW_GENERATION, &c), P_STOP);
	cr_assert_eq(w.s.after_stop, P_RESTORE);
	cr_assert_eq(w.s.generation, 2);
	proc_sleep_ms(300, false);
	cr_assert_eq(kill(pid, 0), 0, "the trainer should ignore SIGTERM");
	cr_assert_eq(raise_in(P_STOP, EV_GRACE, &c), P_RESTORE);
	cr_assert_eq(w.s.trainer.pid, 0);
	cr_assert(kill(pid, 0) && errno == ESRCH, "the trainer outlived it");
	cr_assert_eq(w.s.last_req.task, TASK_RESTORE);
	cr_assert_eq(w.s.last_req.generation, 2);
	assert_heartbeat("restoring");
}

Test(action, trainer_done_finishes)
{
	up("exit 0");
	run_trainer();
	wait_trainer();
	cr_assert_eq(raise_in(P_RUN, EV_EXITED, NULL), P_FINISHED);
	cr_assert_eq(w.s.last_req.task, TASK_CHECK_DONE);
	assert_heartbeat("finished");
}

/* A failed trainer has the group restart: control.json is bumped. */
Test(action, trainer_failure_bumps_the_generation)
{
	up("exit 3");
	run_trainer();
	wait_trainer();
	cr_assert_eq(raise_in(P_RUN, EV_EXITED, NULL), P_WAIT_GEN);
	cr_assert_str_eq(w.s.message, "trainer exit 3");
	assert_control(2, "running", "exit 3");
	assert_heartbeat("failed");
}

Test(action, hang_kills_the_trainer_and_bumps)
{
	pid_t pid;

	up("exec sleep 600");
	pid = run_trainer();
	cr_assert_eq(raise_in(P_RUN, EV_HANG, NULL), P_WAIT_GEN);
	cr_assert_eq(w.s.trainer.pid, 0);
	cr_assert(kill(pid, 0) && errno == ESRCH, "the trainer outlived it");
	assert_control(2, "running", "hung");
}

/* The look reads the step file inotify said changed: progress. */
Test(action, look_reads_the_step_file)
{
	struct control c;
	uint64_t before;

	up("exec sleep 600");
	run_trainer();
	c = control_as("running");
	write_text(w.s.step_path, "7\n");
	w.s.step_news = true;
	before = w.s.progress_ms = 0;
	cr_assert_eq(raise_in(P_RUN, EV_LOOK, &c), P_RUN);
	cr_assert_eq(w.s.trained, 7);
	cr_assert_gt(w.s.progress_ms, before);
	cr_assert_not(w.s.step_news);
}

/* control.json's run-end within the lead: SIGTERM for a final step. */
Test(action, deadline_in_run_signals_the_trainer)
{
	struct control c;
	time_t t = time(NULL) + 5;

	up("exec sleep 600");
	run_trainer();
	c = control_as("running");
	snprintf(c.deadline.kind, sizeof(c.deadline.kind), "run-end");
	strftime(c.deadline.time, sizeof(c.deadline.time),
		 "%Y-%m-%dT%H:%M:%SZ", gmtime(&t));
	cr_assert_eq(raise_in(P_RUN, EV_DEADLINE, &c), P_EMERGENCY);
	cr_assert_str_eq(w.s.deadline.kind, "run-end");
	assert_killed_by(SIGTERM);
}

Test(action, join_of_a_stopped_run_ends)
{
	struct control c;

	up("exec sleep 600");
	c = control_as("stopped");
	cr_assert_eq(raise_in(P_JOIN, EV_CONTROL, &c), P_END);
	cr_assert_str_eq(w.s.end_state, "exited");
}

/* A cell that is not an action does nothing. */
Test(action, impossible_and_ignored_cells_do_nothing)
{
	up("exec sleep 600");
	cr_assert_eq(raise_in(P_JOIN, EV_EXITED, NULL), P_JOIN);
	cr_assert_eq(raise_in(P_WAITING, EV_LOOK, NULL), P_WAITING);
	cr_assert_eq(w.s.starts, 0);
}

/* The run phase sleeps until its nearest clock (here the hang, 60 s
 * after the start's grace), not on a tick: inotify tells it of a new
 * step file and of a step's marker. */
Test(action, run_phase_sleeps_until_news)
{
	char tmp[sizeof(w.s.step_path) + 8], marker[sizeof(w.s.ckpt_dir) + 16];
	struct control c;
	int ms;

	up("exec sleep 600");
	run_trainer();
	c = control_as("running");
	cr_assert_eq(raise_in(P_RUN, EV_LOOK, &c), P_RUN);
	cr_assert_geq(w.s.steps.fd, 0, "no inotify here");
	ms = sup_wait_ms(&w.s);
	cr_assert_gt(ms, 50000, "the run phase wakes in %d ms", ms);
	cr_assert_leq(ms, (GRACE_S + 60) * 1000 + 1);

	cr_assert_eq(step_watch_read(&w.s.steps), 0);
	snprintf(tmp, sizeof(tmp), "%s.tmp", w.s.step_path);
	write_text(tmp, "3\n");
	cr_assert_eq(rename(tmp, w.s.step_path), 0);
	cr_assert(step_watch_read(&w.s.steps) & STEP_NEWS_STEP);
	snprintf(marker, sizeof(marker), "%s/step-3.done", w.s.ckpt_dir);
	write_text(marker, "");
	cr_assert_eq(step_watch_read(&w.s.steps), STEP_NEWS_DONE);
}

/* Without inotify (a directory it cannot watch here) the step file is
 * read on a timer, a second apart. */
Test(action, without_inotify_the_run_phase_looks_every_second)
{
	struct step_watch none;
	struct control c;
	int ms;

	step_watch_open(&none, "/nonexistent/checkpoints", "/nonexistent");
	cr_assert_eq(none.fd, -1);
	cr_assert(none.said);
	up("exec sleep 600");
	step_watch_close(&w.s.steps);
	run_trainer();
	c = control_as("running");
	cr_assert_eq(raise_in(P_RUN, EV_LOOK, &c), P_RUN);
	ms = sup_wait_ms(&w.s);
	cr_assert(ms > 0 && ms <= 1000, "the run phase wakes in %d ms", ms);
	write_text(w.s.step_path, "4\n");
	proc_sleep_ms((unsigned)ms + 10, false);
	cr_assert_eq(raise_in(P_RUN, EV_LOOK, &c), P_RUN);
	cr_assert_eq(w.s.trained, 4);
}
