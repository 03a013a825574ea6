/*
 * tests/supervisor/test_state_lock.c: two supervisors never share a state
 * directory. A second one started on a running supervisor's directory
 * exits 1 at once, naming the directory and the first one's pid, and the
 * first runs on undisturbed; once the first has ended, the directory can
 * be taken again.
 */
#include "tests/harness/harness.h"
#include "tests/supervisor/run_check.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static struct {
	char dir[HARNESS_PATH];
	char run_dir[HARNESS_PATH + 16];
	char run_url[HARNESS_PATH + 64];
	char state[HARNESS_PATH + 16];
	char events[HARNESS_PATH + 16];
	pid_t sup[3];
} w;

static void down(void)
{
	for (unsigned i = 0; i < 3; i++)
		if (w.sup[i] > 0) {
			kill(w.sup[i], SIGKILL);
			waitpid(w.sup[i], NULL, 0);
		}
	kill_left_trainers(w.dir, "w*");
	rm_rf(w.dir);
	memset(&w, 0, sizeof(w));
}

TestSuite(lock, .fini = down, .timeout = 120);

/* One worker of the toy trainer, stepping every 0.1 s for long. */
static void up(void)
{
	char job[2048], path[HARNESS_PATH + 32];
	const char *src = getenv("SLICECTL_SRCDIR");

	memset(&w, 0, sizeof(w));
	cr_assert_eq(make_temp_dir(w.dir, sizeof(w.dir), "lock"), 0);
	snprintf(w.run_dir, sizeof(w.run_dir), "%s/run", w.dir);
	snprintf(w.run_url, sizeof(w.run_url), "file://%s", w.run_dir);
	snprintf(w.state, sizeof(w.state), "%s/w0", w.dir);
	snprintf(w.events, sizeof(w.events), "%s/events", w.dir);
	cr_assert_eq(sh("mkdir -p '%s'", w.run_dir), 0);
	snprintf(job, sizeof(job),
		 "{\"name\": \"toy\", \"command\": \"exec python3 "
		 "%s/tests/supervisor/toy_trainer.py\", \"num_slices\": 1, "
		 "\"workers_per_slice\": 1, \"heartbeat_s\": 1, "
		 "\"grace_s\": 2, \"env\": {\"TOY_EVENTS\": \"%s\", "
		 "\"TOY_TOTAL\": \"100000\", \"TOY_STEP_S\": \"0.1\"}}",
		 src ? src : ".", w.events);
	snprintf(path, sizeof(path), "%s/job.json", w.run_dir);
	write_text(path, job);
}

static pid_t start(unsigned i)
{
	char log[HARNESS_PATH + 16];

	snprintf(log, sizeof(log), "%s/sup%u.log", w.dir, i);
	w.sup[i] = spawn_supervisor(w.run_url, w.state, 0, log, NULL);
	return w.sup[i];
}

static void wait_starts(unsigned n)
{
	for (int t = 0; t < 600; t++) {
		if (toy_events(w.events, -1, -1, "start", NULL) >= n)
			return;
		sleep_ms(50);
	}
	cr_assert_fail("the trainer did not start (%u)\n%s", n,
		       supervisor_log(w.dir, 0));
}

/* The step in worker 0's heartbeat, -1 none. */
static long long heartbeat_step(void)
{
	char path[HARNESS_PATH + 64];
	json_t *j;
	long long step;

	snprintf(path, sizeof(path), "%s/status/slice-0-worker-0.json",
		 w.run_dir);
	j = json_load_file(path, 0, NULL);
	step = j ? json_integer_value(json_object_get(j, "step")) : -1;
	json_decref(j);
	return step;
}

Test(lock, a_second_supervisor_on_the_same_state_dir_exits_1)
{
	char want[HARNESS_PATH + 128], state[32];
	pid_t first;
	long long before;
	char *log;
	int status;

	up();
	first = start(0);
	wait_starts(1);
	before = heartbeat_step();

	start(1);
	status = wait_child(&w.sup[1], 20);
	log = supervisor_log(w.dir, 1);
	cr_assert_eq(status, 1, "the second supervisor: status %d\n%s", status,
		     log);
	snprintf(want, sizeof(want),
		 "state directory %s is in use by another supervisor (pid %ld",
		 w.state, (long)first);
	cr_assert(strstr(log, want), "want \"%s\" in:\n%s", want, log);
	/* It stopped before anything of its own: no trainer, no heartbeat. */
	cr_assert_null(strstr(log, "trainer started"), "%s", log);
	free(log);

	/* The first runs on: alive, its trainer stepping, its heartbeat
	 * going. */
	sleep_ms(2500);
	cr_assert_eq(kill(first, 0), 0);
	cr_assert_eq(toy_events(w.events, -1, -1, "start", NULL), 1);
	run_heartbeat_state(w.run_dir, 0, state, sizeof(state));
	cr_assert_str_eq(state, "running");
	cr_assert_gt(heartbeat_step(), before, "%s",
		     supervisor_log(w.dir, 0));
	log = supervisor_log(w.dir, 0);
	cr_assert_null(strstr(log, "in use"), "%s", log);
	free(log);

	/* Once it ended, the directory is free again. */
	kill(first, SIGTERM);
	status = wait_child(&w.sup[0], 30);
	cr_assert_eq(status, 0, "the first supervisor: status %d\n%s", status,
		     supervisor_log(w.dir, 0));
	start(2);
	wait_starts(2);
	log = supervisor_log(w.dir, 2);
	cr_assert_null(strstr(log, "in use"), "%s", log);
	free(log);
}
