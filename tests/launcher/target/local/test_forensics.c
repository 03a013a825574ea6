/*
 * Issue 26's hang forensics and stragglers, end to end through the
 * slicectl binary on the local target:
 *
 * - a hung Python trainer (faulthandler registered for SIGUSR1, run with
 *   --hang-signal SIGUSR1) leaves its stacks in the bucket, under
 *   forensics/gen-1/, within the size bound: the hanging function's
 *   frame and a wchan line; `slicectl events` and `slicectl report` point
 *   at the object;
 * - a hung trainer that is no Python (sleep) still leaves /proc's account
 *   and its output's tail;
 * - of four workers, the one whose trainer sleeps longer per step is the
 *   one `slicectl status --format json` flags as a straggler, and the
 *   report lists.
 *
 * py-spy is not installed here: the tests say so when its part of the
 * object says it was skipped. Every process started here is stopped by
 * its pid; the temporary directory is removed, and no process whose
 * environment names it may be left.
 */
#include "tests/harness/harness.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* The object's bound (supervisor/forensics.h). */
#define FORENSICS_MAX_BYTES (256 << 10)

static char dir[HARNESS_PATH];
static char bucket[HARNESS_PATH + 32];
static char scripts[HARNESS_PATH + 32];
static pid_t job_pid; /* a slicectl job --local started in the background */

static void cleanup(void)
{
	if (job_pid > 0)
		wait_exit(job_pid, 0);
	job_pid = 0;
	if (dir[0])
		rm_rf(dir);
	dir[0] = '\0';
}

TestSuite(forensics, .fini = cleanup, .timeout = 180);

static void setup_dir(void)
{
	char home[HARNESS_PATH + 16];

	cr_assert_eq(make_temp_dir(dir, sizeof(dir), "forensics"), 0);
	snprintf(bucket, sizeof(bucket), "file://%s/bucket", dir);
	snprintf(home, sizeof(home), "%s/home", dir);
	snprintf(scripts, sizeof(scripts), "%s/scripts", dir);
	cr_assert_eq(sh("mkdir -p '%s' '%s'", home, scripts), 0);
	/* spawn_slicectl and run_slicectl pass this environment on. */
	setenv("SLICECTL_HOME", home, 1);
	cr_assert_not_null(getenv("SLICE_SUPERVISOR_BIN"),
			   "SLICE_SUPERVISOR_BIN is not set");
}

/* A trainer that reports two steps, then waits for a peer that never
 * comes, silent. */
static const char hang_py[] =
	"import faulthandler, os, signal, time\n"
	"faulthandler.register(signal.SIGUSR1, all_threads=True)\n"
	"def wait_for_peer():\n"
	"    time.sleep(3600)\n"
	"for step in (1, 2):\n"
	"    print('step', step, flush=True)\n"
	"    with open(os.environ['SLICE_STEP_FILE'], 'w') as f:\n"
	"        f.write(str(step))\n"
	"wait_for_peer()\n";

/* Runs `slicectl job --local` of one worker running command until the
 * run ends: its one hang fails it (--max-restarts 0). */
static void run_hanging(const char *name, const char *command,
			const char *signal_name)
{
	/* Without a signal, the list ends at its flag. */
	const char *const argv[] = {
		"job", "--local", "--name", name, "--bucket", bucket,
		"--workers-per-slice", "1", "--script-dir", scripts,
		"--command", command, "--hang-timeout", "3s", "--grace", "2s",
		"--max-restarts", "0", "--quiet",
		signal_name ? "--hang-signal" : NULL, signal_name, NULL,
	};
	struct run_result r;

	cr_assert_eq(run_slicectl(&r, argv, NULL), 0);
	/* The run failed, as its one hang spent its budget. */
	cr_assert_neq(r.status, 0, "%s%s", r.out, r.err);
	run_result_release(&r);
	cr_assert_eq(processes_mentioning(dir), 0);
}

/* The run's forensics object of generation 1, worker 0/0; to free. */
static char *forensics_of(const char *name)
{
	char path[HARNESS_PATH + 128];
	struct stat st;
	char *text;

	snprintf(path, sizeof(path),
		 "%s/bucket/%s/forensics/gen-1/slice-0-worker-0.txt", dir,
		 name);
	cr_assert_eq(stat(path, &st), 0, "no forensics object %s", path);
	cr_assert_leq(st.st_size, FORENSICS_MAX_BYTES);
	text = read_file(path, NULL);
	cr_assert_not_null(text);
	if (strstr(text, "skipped: py-spy is not on PATH"))
		fprintf(stderr, "forensics: py-spy is not on PATH: its part "
			"of the object was skipped\n");
	return text;
}

Test(forensics, a_hung_python_trainer_leaves_its_stacks_in_the_bucket)
{
	char path[HARNESS_PATH + 64], url[HARNESS_PATH + 128], *text;
	struct run_result r;
	FILE *f;

	setup_dir();
	snprintf(path, sizeof(path), "%s/hang.py", scripts);
	f = fopen(path, "w");
	cr_assert_not_null(f);
	fputs(hang_py, f);
	fclose(f);
	run_hanging("pyhang", "exec python3 hang.py", "SIGUSR1");

	text = forensics_of("pyhang");
	ASSERT_HAS(text, "slicectl hang forensics: run pyhang, "
			 "slice-0-worker-0");
	/* faulthandler's dump, through the hang signal: the frame of the
	 * function that hangs. */
	ASSERT_HAS(text, "== hang signal 10");
	ASSERT_HAS(text, "in wait_for_peer");
	ASSERT_HAS(text, "wchan: ");
	ASSERT_HAS(text, "step 2\n");
	free(text);

	/* events points at it ... */
	snprintf(url, sizeof(url),
		 "forensics: %s/pyhang/forensics/gen-1/slice-0-worker-0.txt",
		 bucket);
	cr_assert_eq(run_slicectl(&r, (const char *const[]){
					  "events", "pyhang", "--bucket",
					  bucket, NULL },
				  NULL),
		     0);
	cr_assert_eq(r.status, 0, "%s", r.err);
	ASSERT_HAS(r.out, " hang step 2 no output and no step "
			  "{\"forensics\":\"forensics/gen-1/"
			  "slice-0-worker-0.txt\"");
	ASSERT_HAS(r.out, url);
	run_result_release(&r);
	/* ... and so does the report, as a link. */
	snprintf(path, sizeof(path), "%s/report.html", dir);
	cr_assert_eq(run_slicectl(&r, (const char *const[]){
					  "report", "pyhang", "--bucket",
					  bucket, "--output", path, NULL },
				  NULL),
		     0);
	cr_assert_eq(r.status, 0, "%s", r.err);
	run_result_release(&r);
	text = read_file(path, NULL);
	cr_assert_not_null(text);
	snprintf(url, sizeof(url),
		 "<a href=\"%s/pyhang/forensics/gen-1/slice-0-worker-0.txt\">",
		 bucket);
	ASSERT_HAS(text, "<h2>Hang forensics</h2>");
	ASSERT_HAS(text, url);
	free(text);
}

Test(forensics, a_hung_trainer_that_is_no_python_leaves_proc_and_output)
{
	char *text;

	setup_dir();
	run_hanging("shhang", "echo about to wait; echo 1 > "
		    "\"$SLICE_STEP_FILE\"; exec sleep 3600", NULL);
	text = forensics_of("shhang");
	ASSERT_HAS(text, "(sleep)");
	ASSERT_HAS(text, "wchan: hrtimer_nanosleep");
	ASSERT_HAS(text, "about to wait\n");
	cr_assert_null(strstr(text, "== hang signal"), "%s", text);
	free(text);
}

/* ---- stragglers ---- */

/* `slicectl status slow --format json`; NULL before the run is there. */
static json_t *status_json(void)
{
	struct run_result r;
	json_t *j = NULL;

	cr_assert_eq(run_slicectl(&r, (const char *const[]){
					  "status", "slow", "--bucket", bucket,
					  "--format", "json", NULL },
				  NULL),
		     0);
	if (r.status == 0)
		j = json_loads(r.out, 0, NULL);
	else
		cr_assert_eq(r.status, 4, "status: %s%s", r.out, r.err);
	run_result_release(&r);
	return j;
}

/* A shell trainer of steps of 0.1 s, 0.5 s on process SLOW_PROCESS. */
static const char steps_sh[] =
	"d=0.1; [ \"$SLICE_PROCESS_ID\" = \"$SLOW_PROCESS\" ] && d=0.5; "
	"i=0; while :; do sleep $d; i=$((i+1)); "
	"echo $i > \"$SLICE_STEP_FILE\"; done";

Test(forensics, the_slow_worker_is_flagged_as_a_straggler)
{
	char out[HARNESS_PATH + 16], err[HARNESS_PATH + 16], *text;
	struct run_result r;
	long long until;
	json_t *j = NULL, *w;
	size_t i;

	setup_dir();
	snprintf(out, sizeof(out), "%s/job.out", dir);
	snprintf(err, sizeof(err), "%s/job.err", dir);
	job_pid = spawn_slicectl((const char *const[]){
					 "job", "--local", "--name", "slow",
					 "--bucket", bucket,
					 "--workers-per-slice", "4",
					 "--command", steps_sh, "--env",
					 "SLOW_PROCESS=2", "--quiet", NULL },
				 out, err);
	cr_assert_gt(job_pid, 0);
	/* Sustained: 8 steps over 10 s at least, then a heartbeat (every
	 * 10 s) to say so. */
	for (until = monotonic_ms() + 90000;; sleep_ms(1000)) {
		json_decref(j);
		cr_assert_eq(waitpid(job_pid, NULL, WNOHANG), 0,
			     "slicectl job ended early");
		j = status_json();
		w = json_array_get(json_object_get(j, "workers"), 2);
		if (json_is_true(json_object_get(w, "straggler")))
			break;
		cr_assert_lt(monotonic_ms(), until, "no straggler flagged: %s",
			     j ? json_dumps(j, JSON_INDENT(1)) : "(no run)");
	}
	cr_assert_eq(json_integer_value(json_object_get(j, "stragglers")), 1);
	json_array_foreach(json_object_get(j, "workers"), i, w) {
		cr_assert_eq(json_is_true(json_object_get(w, "straggler")),
			     i == 2, "worker %zu: %s", i,
			     json_string_value(json_object_get(
				     w, "straggler_reason")));
		cr_assert(json_is_object(json_object_get(w, "recent_steps")),
			  "worker %zu", i);
	}
	ASSERT_HAS(json_string_value(json_object_get(
			   json_array_get(json_object_get(j, "workers"), 2),
			   "straggler_reason")),
		   "> peers' median ");
	json_decref(j);
	/* The report lists it, while the run goes on. */
	snprintf(out, sizeof(out), "%s/report.html", dir);
	cr_assert_eq(run_slicectl(&r, (const char *const[]){
					  "report", "slow", "--bucket", bucket,
					  "--output", out, NULL },
				  NULL),
		     0);
	cr_assert_eq(r.status, 0, "%s", r.err);
	run_result_release(&r);
	text = read_file(out, NULL);
	cr_assert_not_null(text);
	ASSERT_HAS(text, "<h2>Stragglers</h2>");
	ASSERT_HAS(text, "data-worker=\"slice-0-worker-2\">");
	cr_assert_eq(count_substr(text, "class=\"straggler\""), 1);
	free(text);

	/* SIGTERM: slicectl job stops its workers and returns. */
	kill(job_pid, SIGTERM);
	cr_assert_neq(wait_exit(job_pid, 60), -1, "slicectl job lingers");
	job_pid = 0;
	cr_assert_eq(processes_mentioning(dir), 0);
}
