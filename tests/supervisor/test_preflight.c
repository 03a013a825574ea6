/*
 * job.json's preflight (supervisor/preflight.c): two real supervisors of
 * a file:// run, each running the preflight before every generation's
 * trainer. One host's failing preflight keeps its trainer from starting,
 * is in the history and its heartbeat, and restarts the group until it
 * passes; one that never passes, or outlives its timeout, ends the run
 * failed, naming the host.
 */
#include "tests/harness/harness.h"
#include "tests/supervisor/run_check.h"

#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static char dir[HARNESS_PATH], run_dir[HARNESS_PATH + 16];
static pid_t sup[2];

static void down(void)
{
	end_supervisors(sup, 2, dir);
}

TestSuite(preflight, .fini = down, .timeout = 180);

/* The test's directory, which the preflights name. */
static void make_dir(void)
{
	cr_assert_eq(make_temp_dir(dir, sizeof(dir), "preflight"), 0);
	snprintf(run_dir, sizeof(run_dir), "%s/run", dir);
	cr_assert_eq(sh("mkdir -p '%s'", run_dir), 0);
}

/* A run of 2 workers whose trainer marks DIR/trained-RANK-GEN and then
 * does `then`, with job.json's extra fields; both supervisors started
 * with a back-off of 200 ms after a failed preflight. */
static void up(const char *then, const char *fields)
{
	static const char *const env[] = { "SLICE_PREFLIGHT_BACKOFF_MS=200",
					   NULL };
	char job[2048], path[HARNESS_PATH + 64], url[HARNESS_PATH + 32];

	snprintf(job, sizeof(job),
		 "{\"name\": \"pre\", \"command\": \"touch "
		 "%s/trained-$RANK-$SLICE_GENERATION; %s\", "
		 "\"workers_per_slice\": 2, \"heartbeat_s\": 1, "
		 "\"grace_s\": 2, %s}", dir, then, fields);
	snprintf(path, sizeof(path), "%s/job.json", run_dir);
	write_text(path, job);
	snprintf(url, sizeof(url), "file://%s", run_dir);
	for (unsigned i = 0; i < 2; i++) {
		char state[HARNESS_PATH + 16], log[HARNESS_PATH + 16];

		snprintf(state, sizeof(state), "%s/w%u", dir, i);
		snprintf(log, sizeof(log), "%s/sup%u.log", dir, i);
		sup[i] = spawn_supervisor(url, state, i, log, env);
	}
}

static void both_exit_0(unsigned timeout_s)
{
	for (int i = 0; i < 2; i++)
		cr_assert_eq(wait_child(&sup[i], timeout_s), 0,
			     "supervisor %d: %s", i,
			     supervisor_log(dir, (unsigned)i));
}

static bool trained(unsigned rank, unsigned generation)
{
	char path[HARNESS_PATH + 32];

	snprintf(path, sizeof(path), "%s/trained-%u-%u", dir, rank,
		 generation);
	return access(path, F_OK) == 0;
}

/* Running, not a zombie waiting for whoever inherited it. */
static bool alive(long pid)
{
	char path[64], *text, *state;
	bool running;

	snprintf(path, sizeof(path), "/proc/%ld/stat", pid);
	text = read_file(path, NULL);
	if (!text)
		return false;
	state = strrchr(text, ')');
	running = state && state[1] && state[2] != 'Z';
	free(text);
	return running;
}

static const char *member(json_t *o, const char *key)
{
	const char *v = json_string_value(json_object_get(o, key));

	return v ? v : "";
}

static void assert_heartbeat_says(unsigned worker, const char *has)
{
	char path[HARNESS_PATH + 64], *text;

	snprintf(path, sizeof(path), "%s/status/slice-0-worker-%u.json",
		 run_dir, worker);
	text = read_file(path, NULL);
	cr_assert_not_null(text, "no heartbeat of worker %u", worker);
	cr_assert(strstr(text, has), "%s", text);
	free(text);
}

/* Worker 1's preflight fails (a GPU with an Xid, say) until the test
 * takes the fault away: no trainer of worker 1 starts meanwhile, each
 * failure is an event with the exit status and the output's end, and
 * the group restarts until the preflight passes and the run is done. */
Test(preflight, a_failing_host_keeps_its_trainer_back_until_it_passes)
{
	char fields[HARNESS_PATH * 2 + 256];
	json_t *ev = NULL, *details;
	long long generation;
	json_t *c;

	make_dir();
	cr_assert_eq(sh("touch '%s/broken'", dir), 0);
	snprintf(fields, sizeof(fields),
		 "\"preflight\": \"if [ $RANK = 1 ] && [ -e %s/broken ]; "
		 "then echo checking GPUs; echo GPU 1: Xid 79 >&2; exit 7; "
		 "fi\"", dir);
	up("exit 0", fields);
	for (int t = 0; t < 1200 && !run_events(run_dir, "preflight_fail",
						 "slice-0-worker-1", NULL);
	     t++)
		usleep(50000);
	cr_assert_eq(run_events(run_dir, "preflight_fail", "slice-0-worker-0",
				NULL), 0);
	cr_assert_geq(run_events(run_dir, "preflight_fail", "slice-0-worker-1",
				 &ev), 1, "%s", supervisor_log(dir, 1));
	cr_expect_str_eq(member(ev, "cause"), "exit 7");
	details = json_object_get(ev, "details");
	cr_expect(strstr(member(details, "output"), "GPU 1: Xid 79"), "%s",
		  member(details, "output"));
	cr_expect(*member(details, "host"));
	json_decref(ev);
	cr_assert_eq(sh("rm '%s/broken'", dir), 0);
	both_exit_0(120);
	c = run_control(run_dir);
	generation = json_integer_value(json_object_get(c, "generation"));
	json_decref(c);
	assert_run_control(run_dir, generation, "done", NULL);
	cr_assert_geq(generation, 2);
	for (long long g = 1; g < generation; g++)
		cr_expect(!trained(1, (unsigned)g),
			  "worker 1 trained at generation %lld", g);
	cr_expect(trained(0, (unsigned)generation));
	cr_expect(trained(1, (unsigned)generation));
	/* A pass before every generation each worker started. */
	cr_expect_geq(run_events(run_dir, "preflight", "slice-0-worker-0",
				 NULL), 1);
	cr_expect_geq(run_events(run_dir, "preflight", "slice-0-worker-1",
				 NULL), 1);
	cr_expect_geq(run_events(run_dir, "bump", NULL, NULL), 1);
}

/* A preflight that never passes fails the run once the restarts are
 * spent, control.json's reason and the heartbeat naming the host. */
Test(preflight, a_host_that_never_passes_fails_the_run)
{
	make_dir();
	up("sleep 60", "\"max_restarts\": 1, \"preflight\": "
		       "\"[ $RANK != 1 ] || { echo no GPU found; exit 3; }\"");
	both_exit_0(120);
	assert_run_control(run_dir, 2, "failed", "preflight failed on");
	cr_expect_eq(run_events(run_dir, "preflight_fail", "slice-0-worker-1",
				NULL), 2);
	cr_expect(!trained(1, 1) && !trained(1, 2));
	assert_heartbeat_says(1, "preflight failed on");
	assert_heartbeat_says(1, "no GPU found");
}

/* A preflight past its timeout is killed with its process group and
 * counts as failed. */
Test(preflight, a_preflight_past_its_timeout_is_ended_and_fails)
{
	char fields[HARNESS_PATH + 256], path[HARNESS_PATH + 32], *text;
	json_t *ev = NULL;
	long pid;

	make_dir();
	snprintf(fields, sizeof(fields),
		 "\"max_restarts\": 0, \"preflight_timeout_s\": 1, "
		 "\"preflight\": \"[ $RANK != 1 ] || { sleep 300 & echo $! > "
		 "%s/sleeper; wait; }\"", dir);
	up("sleep 60", fields);
	both_exit_0(120);
	assert_run_control(run_dir, 1, "failed", "timed out after 1 s");
	cr_assert_eq(run_events(run_dir, "preflight_fail", "slice-0-worker-1",
				&ev), 1);
	cr_expect_str_eq(member(ev, "cause"), "timed out after 1 s");
	json_decref(ev);
	snprintf(path, sizeof(path), "%s/sleeper", dir);
	text = read_file(path, NULL);
	cr_assert_not_null(text, "the preflight did not run");
	pid = strtol(text, NULL, 10);
	free(text);
	cr_assert_gt(pid, 1);
	cr_expect(!alive(pid), "the preflight's child %ld outlived it", pid);
	cr_expect(!trained(1, 1));
}
