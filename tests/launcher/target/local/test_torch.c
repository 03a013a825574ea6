/*
 * examples/torch/train.py (real torch.distributed, gloo, env://) on the
 * local target, through the launch contract the supervisor sets:
 *
 * - 2 slices x 2 workers, one process per host, under a crash and a
 *   preemption;
 * - 2 slices x 1 worker with 2 processes per host under torchrun
 *   (--max-restarts 0), under a preemption and a hang of one of torchrun's
 *   processes (SIGSTOP), seen through SLICE_STEP_FILE;
 *
 * each ending with every rank's parameters equal to an uninterrupted
 * run's, to the bit. PyTorch comes from Debian (python3-torch); without an
 * interpreter that imports torch the tests are skipped, saying so.
 */
#include "tests/harness/harness.h"
#include "tests/launcher/target/local/local_summary.h"
#include "tests/launcher/torch_params.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

static char dir[HARNESS_PATH];
static char bucket[HARNESS_PATH + 32];
static const char *python;
static pid_t job_pid; /* a slicectl job --local in the background */

static void cleanup(void)
{
	if (job_pid > 0) {
		kill(job_pid, SIGTERM);
		for (int i = 0; i < 400 && waitpid(job_pid, NULL, WNOHANG) !=
						    job_pid; i++)
			sleep_ms(100);
		kill(job_pid, SIGKILL);
		waitpid(job_pid, NULL, 0);
		job_pid = 0;
	}
	if (dir[0])
		rm_rf(dir);
	dir[0] = '\0';
}

TestSuite(torch, .fini = cleanup, .timeout = 600);

static void setup(void)
{
	char home[HARNESS_PATH + 16];

	python = torch_python();
	cr_assert_eq(make_temp_dir(dir, sizeof(dir), "torch"), 0);
	snprintf(bucket, sizeof(bucket), "file://%s/bucket", dir);
	snprintf(home, sizeof(home), "%s/home", dir);
	cr_assert_eq(sh("mkdir -p '%s'", home), 0);
	setenv("SLICECTL_HOME", home, 1);
}

/* argv of `slicectl job --local` for examples/torch on slices x workers
 * hosts, procs processes each (2: under torchrun); static storage. */
static const char *const *job_argv(const char *name, unsigned slices,
				   unsigned workers, unsigned procs,
				   const char *step_s, const char *chaos)
{
	static char script[HARNESS_PATH + 32], cmd[512], s[8], w[8];
	static char sleep[64];
	static const char *argv[48];
	const char *src = getenv("SLICECTL_SRCDIR");
	size_t n = 0;

	snprintf(script, sizeof(script), "%s/examples/torch",
		 src ? src : ".");
	if (procs > 1)
		/* Debian's torch 1.13 parses --redirects' and --tee's
		 * default "0" as None under Python 3.11; a map naming no
		 * local rank means the same. */
		snprintf(cmd, sizeof(cmd),
			 "exec %s -m torch.distributed.run --nnodes "
			 "\"$WORLD_SIZE\" --node_rank \"$NODE_RANK\" "
			 "--nproc_per_node %u --master_addr \"$MASTER_ADDR\" "
			 "--master_port \"$MASTER_PORT\" --max_restarts 0 "
			 "--redirects 9:0 --tee 9:0 train.py", python, procs);
	else
		snprintf(cmd, sizeof(cmd), "exec %s train.py", python);
	snprintf(s, sizeof(s), "%u", slices);
	snprintf(w, sizeof(w), "%u", workers);
	snprintf(sleep, sizeof(sleep), "TORCH_STEP_S=%s", step_s);
	argv[n++] = "job";
	argv[n++] = "--local";
	argv[n++] = "--name";
	argv[n++] = name;
	argv[n++] = "--bucket";
	argv[n++] = bucket;
	argv[n++] = "--num-slices";
	argv[n++] = s;
	argv[n++] = "--workers-per-slice";
	argv[n++] = w;
	argv[n++] = "--script-dir";
	argv[n++] = script;
	argv[n++] = "--command";
	argv[n++] = cmd;
	argv[n++] = "--env";
	argv[n++] = "TORCH_STEPS=100";
	argv[n++] = "--env";
	argv[n++] = "TORCH_CKPT_EVERY=5";
	argv[n++] = "--env";
	argv[n++] = sleep;
	argv[n++] = "--env";
	argv[n++] = "PYTHONUNBUFFERED=1";
	argv[n++] = "--rendezvous-port";
	argv[n++] = torch_rendezvous_base();
	argv[n++] = "--hang-timeout";
	argv[n++] = "20s";
	argv[n++] = "--grace";
	argv[n++] = "10s";
	argv[n++] = "--max-restarts";
	argv[n++] = "20";
	argv[n++] = "--format";
	argv[n++] = "json";
	argv[n++] = "--quiet";
	if (chaos) {
		argv[n++] = "--chaos";
		argv[n++] = chaos;
	}
	argv[n] = NULL;
	return argv;
}

/* Asserts the run ended done, restarted at least once for each cause
 * named (NULL-terminated), or not at all when there is none. */
static void expect_summary(const char *out, const char *const *causes)
{
	json_t *s = local_summary(out), *by;

	cr_assert_not_null(s, "no summary:\n%s", out);
	by = json_object_get(s, "restarts_by_cause");

	cr_assert_str_eq(json_string_value(json_object_get(s, "end")), "done",
			 "%s", out);
	if (!causes[0])
		cr_assert_eq(json_integer_value(json_object_get(s,
								"restarts")),
			     0, "%s", out);
	for (size_t i = 0; causes[i]; i++)
		cr_assert_geq(json_integer_value(json_object_get(by,
								 causes[i])),
			      1, "no restart for %s:\n%s", causes[i], out);
	json_decref(s);
}

/* Runs the job to its end; its output (malloc'd). */
static char *run_job(const char *const *argv)
{
	struct run_result r;
	char *out;

	cr_assert_eq(run_slicectl(&r, argv, NULL), 0);
	cr_assert_eq(r.status, 0, "status %d\n%s\n%s", r.status, r.out, r.err);
	out = strdup(r.out);
	run_result_release(&r);
	return out;
}

Test(torch, one_process_per_host_under_a_crash_and_a_preemption_is_exact)
{
	char *out, *chaos, *calm;

	setup();
	out = run_job(job_argv("chaos", 2, 2, 1, "0.25",
			       "crash:worker=1@8s,preempt:slice=1@16s"));
	expect_summary(out, (const char *const[]){ "crash", "preemption",
						   NULL });
	free(out);
	out = run_job(job_argv("calm", 2, 2, 1, "0", NULL));
	expect_summary(out, (const char *const[]){ NULL });
	free(out);
	chaos = torch_final_params(bucket, "chaos", 2, 2, 1);
	calm = torch_final_params(bucket, "calm", 2, 2, 1);
	cr_assert_str_eq(chaos, calm);
	free(chaos);
	free(calm);
	cr_assert_eq(processes_mentioning(dir), 0);
}

/* BUCKET/run/NAME, parsed (NULL when it is not there yet). */
static json_t *run_object(const char *run, const char *name)
{
	char path[HARNESS_PATH + 128];

	snprintf(path, sizeof(path), "%s/bucket/%s/%s", dir, run, name);
	return json_load_file(path, 0, NULL);
}

static long long int_of(json_t *j, const char *key)
{
	return json_integer_value(json_object_get(j, key));
}

/* Waits (up to 5 minutes) until run is at generation gen or later and
 * its worker 0/0 reported a step past the one that generation restored;
 * returns that generation. */
static long long wait_stepping(const char *run, long long gen)
{
	for (int i = 0;; i++) {
		json_t *c = run_object(run, "control.json");
		json_t *h = run_object(run, "status/slice-0-worker-0.json");
		long long at = int_of(c, "generation");
		bool there = at >= gen &&
			     json_is_integer(json_object_get(c,
							     "restore_step")) &&
			     int_of(h, "generation") == at &&
			     int_of(h, "step") > int_of(c, "restore_step");

		json_decref(c);
		json_decref(h);
		if (there)
			return at;
		cr_assert_lt(i, 3000, "%s never stepped at generation %lld",
			     run, gen);
		if (waitpid(job_pid, NULL, WNOHANG) == job_pid) {
			char path[HARNESS_PATH + 16];

			job_pid = 0;
			snprintf(path, sizeof(path), "%s/out", dir);
			cr_assert_fail("slicectl job ended early:\n%s",
				       read_file(path, NULL));
		}
		sleep_ms(100);
	}
}

/* A trainer of local rank 1 (torchrun's) at generation gen. */
static pid_t rank1(long long gen)
{
	char g[48];
	pid_t pid = 0;

	snprintf(g, sizeof(g), "\nSLICE_GENERATION=%lld\n", gen);
	for (int i = 0; i < 100; i++) {
		if (processes_with("train.py", NULL, "\nLOCAL_RANK=1\n", g,
				   &pid) && pid > 0)
			return pid;
		sleep_ms(100);
	}
	cr_assert_fail("no trainer of local rank 1 at generation %lld", gen);
	return 0;
}

Test(torch, torchrun_with_2_per_host_under_a_preemption_and_a_hang_is_exact)
{
	const char *const *argv;
	char out_path[HARNESS_PATH + 16], err_path[HARNESS_PATH + 16];
	char *out, *chaos, *calm;
	long long gen;
	int status;

	setup();
	snprintf(out_path, sizeof(out_path), "%s/out", dir);
	snprintf(err_path, sizeof(err_path), "%s/err", dir);
	argv = job_argv("trchaos", 2, 1, 2, "0.25", "preempt:slice=1@10s");
	job_pid = spawn_slicectl(argv, out_path, err_path);
	cr_assert_gt(job_pid, 0);
	/* After the preemption, a step into generation 2: one of torchrun's
	 * processes stops; its peers wait in all_reduce, no step is
	 * reported, and the hang timeout restarts the group. */
	gen = wait_stepping("trchaos", 2);
	cr_assert_eq(kill(rank1(gen), SIGSTOP), 0);
	wait_stepping("trchaos", gen + 1);
	cr_assert_eq(waitpid(job_pid, &status, 0), job_pid);
	job_pid = 0;
	out = read_file(out_path, NULL);
	cr_assert_not_null(out);
	cr_assert(WIFEXITED(status) && !WEXITSTATUS(status), "%s", out);
	/* The local provider may count the hang within the preemption's
	 * episode; the supervisor's event names it. */
	expect_summary(out, (const char *const[]){ "preemption", NULL });
	free(out);
	cr_assert_eq(sh("grep -q '\"kind\": *\"hang\"' '%s'/bucket/trchaos/"
			"events/*.json", dir), 0, "no hang event");
	out = run_job(job_argv("trcalm", 2, 1, 2, "0", NULL));
	expect_summary(out, (const char *const[]){ NULL });
	free(out);
	chaos = torch_final_params(bucket, "trchaos", 2, 1, 2);
	calm = torch_final_params(bucket, "trcalm", 2, 1, 2);
	cr_assert_str_eq(chaos, calm);
	free(chaos);
	free(calm);
	cr_assert_eq(processes_mentioning(dir), 0);
}
