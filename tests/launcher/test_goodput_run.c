/*
 * slicectl goodput against the trainer's own account: a local chaos run
 * of examples/sgd (a crash, a hang, a preemption) whose process 0 logs a
 * timestamp per step (SGD_STEP_LOG). The test computes goodput itself,
 * as the issue defines it, from those timestamps and its own clock:
 * final step x ideal step time (the mean of the step times at or below
 * median + 3 x MAD) over the time from starting slicectl job to seeing
 * control.json say "done"; slicectl's figure is within 1 percentage point
 * of it.
 */
#include "tests/harness/harness.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char dir[HARNESS_PATH];

static void setup(void)
{
	cr_assert_eq(make_temp_dir(dir, sizeof(dir), "goodput"), 0);
}

static void teardown(void)
{
	if (dir[0])
		rm_rf(dir);
	cr_expect_eq(processes_mentioning(dir), 0);
}

TestSuite(goodput_run, .init = setup, .fini = teardown, .timeout = 600);

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Whether control.json at path says the run is done. */
static bool done(const char *path)
{
	json_t *c = json_load_file(path, 0, NULL);
	const char *state = json_string_value(json_object_get(c, "state"));
	bool yes = state && !strcmp(state, "done");

	json_decref(c);
	return yes;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(double *v, size_t n)
{
	qsort(v, n, sizeof(*v), cmp);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* The ideal step time from "GENERATION STEP TIME" lines: each step's
 * time from the step before it in the same trainer. */
static double ideal_from_log(const char *path, long long *last_step,
			     size_t *samples)
{
	FILE *f = fopen(path, "r");
	double *v = NULL, *dev, t, pt = 0, med, mad, sum = 0, thr;
	long long g, s, pg = -1, ps = -1;
	size_t n = 0, cap = 0, in = 0;

	cr_assert(f, "no step log %s", path);
	while (fscanf(f, "%lld %lld %lf", &g, &s, &t) == 3) {
		if (g == pg && s == ps + 1) {
			if (n == cap) {
				cap = cap ? 2 * cap : 1024;
				v = realloc(v, cap * sizeof(*v));
				cr_assert(v);
			}
			v[n++] = t - pt;
		}
		pg = g;
		ps = s;
		pt = t;
	}
	fclose(f);
	*last_step = ps;
	*samples = n;
	cr_assert_gt(n, 10);
	med = median(v, n);
	dev = malloc(n * sizeof(*dev));
	cr_assert(dev);
	for (size_t i = 0; i < n; i++)
		dev[i] = fabs(v[i] - med);
	mad = median(dev, n);
	thr = med + 3 * mad;
	for (size_t i = 0; i < n; i++)
		if (v[i] <= thr) {
			sum += v[i];
			in++;
		}
	free(dev);
	free(v);
	return sum / (double)in;
}

Test(goodput_run, a_chaos_run_matches_the_trainers_own_steps)
{
	char bucket[HARNESS_PATH + 32], home[HARNESS_PATH + 32];
	char sync[HARNESS_PATH + 32], log[HARNESS_PATH + 32];
	char env_home[HARNESS_PATH + 64], sync_env[HARNESS_PATH + 64];
	char log_env[HARNESS_PATH + 64], src[HARNESS_PATH];
	char control[HARNESS_PATH + 64], job_log[HARNESS_PATH + 32];
	struct run_result r;
	bool ended;
	pid_t pid;
	int status;
	double started, elapsed, ideal, mine;
	long long steps;
	size_t samples;
	json_t *j, *f, *x;
	bool crash = false, hang = false, preemption = false;
	double sum;
	size_t i;
	const char *k;

	snprintf(bucket, sizeof(bucket), "file://%s/bucket", dir);
	snprintf(home, sizeof(home), "%s/home", dir);
	snprintf(sync, sizeof(sync), "%s/sync", dir);
	snprintf(log, sizeof(log), "%s/steps.log", dir);
	snprintf(env_home, sizeof(env_home), "SLICECTL_HOME=%s", home);
	snprintf(sync_env, sizeof(sync_env), "SGD_SYNC_DIR=%s", sync);
	snprintf(log_env, sizeof(log_env), "SGD_STEP_LOG=%s", log);
	snprintf(control, sizeof(control), "%s/bucket/chaos/control.json",
		 dir);
	snprintf(job_log, sizeof(job_log), "%s/job.log", dir);
	snprintf(src, sizeof(src), "%s/examples/sgd",
		 getenv("SLICECTL_SRCDIR") ? getenv("SLICECTL_SRCDIR") : ".");
	cr_assert_eq(mkdir(sync, 0777), 0);
	{
		const char *argv[] = {
			slicectl_bin(), "job", "--local", "--name", "chaos",
			"--bucket",
			bucket, "--num-slices", "2", "--workers-per-slice",
			"1", "--script-dir", src, "--command",
			"exec python3 train.py", "--env", "SGD_STEPS=600",
			"--env", "SGD_STEP_S=0.03", "--env",
			"SGD_CKPT_EVERY=100", "--env", sync_env, "--env",
			log_env, "--env", "PYTHONUNBUFFERED=1",
			"--hang-timeout", "6s", "--grace", "5s",
			"--max-restarts", "20", "--chaos",
			"crash:worker=1@4s,hang:worker=0@10s,"
			"preempt:slice=1@14s", NULL
		};
		const char *env[] = { env_home, NULL };

		/* The chaos clock counts training: 600 steps of 0.03 s
		 * give at least 18 s of it, so the preemption at 14 s
		 * lands however fast the machine (at 20 s, an idle one
		 * finished first). */
		started = now_s();
		pid = spawn_group(argv, env, job_log);
		cr_assert_gt(pid, 0);
		/* The run ends when control.json says so: the local provider
		 * tearing its workers down after is not the run's time. */
		while (!(ended = waitpid(pid, &status, WNOHANG) == pid) &&
		       !done(control))
			usleep(50000);
		elapsed = now_s() - started;
		if (!ended && waitpid(pid, &status, 0) != pid) {
			kill(-pid, SIGKILL);
			cr_assert_fail("slicectl job: no exit status");
		}
		cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0,
			  "slicectl job: status %d (%s)", status, job_log);
	}
	{
		const char *argv[] = { "goodput", "chaos", "--bucket", bucket,
				       "--format", "json", NULL };

		cr_assert_eq(run_slicectl(&r, argv, NULL), 0);
		cr_assert_eq(r.status, 0, "%s", r.err);
	}
	j = json_loads(r.out, 0, NULL);
	cr_assert(j, "%s", r.out);
	ideal = ideal_from_log(log, &steps, &samples);
	mine = (double)steps * ideal / elapsed;
	fprintf(stderr, "goodput: slicectl %.4f (%lld steps x %.5f s over "
		"%.2f s), the trainer's %.4f (%lld steps x %.5f s from %zu "
		"steps over %.2f s)\n",
		json_number_value(json_object_get(j, "goodput")),
		(long long)json_integer_value(json_object_get(j, "final_step")),
		json_number_value(json_object_get(j, "ideal_step_s")),
		json_number_value(json_object_get(j, "elapsed_s")), mine, steps,
		ideal, samples, elapsed);
	cr_assert_eq(json_integer_value(json_object_get(j, "final_step")),
		     steps);
	cr_assert(strstr(json_string_value(json_object_get(j, "precision")),
			 "SLICE_STEP_FILE"), "%s", r.out);
	cr_assert_lt(fabs(json_number_value(json_object_get(j, "goodput")) -
			  mine), 0.01, "%s", r.out);
	/* Every second is somewhere, and each injected failure is one. */
	sum = json_number_value(json_object_get(j, "productive_s"));
	json_object_foreach(json_object_get(j, "badput"), k, x)
		sum += json_number_value(x);
	cr_assert_lt(fabs(sum - json_number_value(json_object_get(
					    j, "elapsed_s"))), 0.01);
	json_array_foreach(json_object_get(j, "failures"), i, f) {
		const char *cause = json_string_value(json_object_get(f,
								      "cause"));

		crash |= !strcmp(cause, "crash");
		hang |= !strcmp(cause, "hang");
		preemption |= !strcmp(cause, "preemption");
	}
	cr_assert(crash && hang && preemption, "%s", r.out);
	json_decref(j);
	run_result_release(&r);
}
