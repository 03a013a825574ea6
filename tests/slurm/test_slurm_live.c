/*
 * examples/sgd on 2 nodes of a real Slurm (slurm_cluster.h) under every
 * failure the Slurm target answers for: a trainer crash and a hang (the
 * group restarts in place through control.json), `scontrol requeue`,
 * `scancel --signal=TERM --batch` (the notice: every supervisor commits
 * an emergency step, the job requeues itself) and a node set down (the
 * job fails on it and Slurm requeues it). Each requeue comes back with
 * SLURM_RESTART_COUNT grown and restores the newest committed step; the
 * final parameters are those of an uninterrupted run, to the bit.
 *
 * Slurm holds a requeued job (BeginTime) for a while before it may run
 * again; the test lets it go a second later with `scontrol update
 * StartTime=now`.
 */
#include "tests/launcher/sgd_params.h"
#include "tests/slurm/slurm_cluster.h"

#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Submits examples/sgd as run (600 steps, a sleep of step_s each);
 * returns the job id (static). */
static const char *submit(const char *run, const char *step_s)
{
	static char id[32];
	char sync[HARNESS_PATH + 64], sgd[HARNESS_PATH + 32], steps[64];
	struct run_result r;

	snprintf(sync, sizeof(sync), "SGD_SYNC_DIR=%s/sync-%s", slurm_dir,
		 run);
	snprintf(sgd, sizeof(sgd), "%s/examples/sgd",
		 getenv("SLICECTL_SRCDIR"));
	snprintf(steps, sizeof(steps), "SGD_STEP_S=%s", step_s);
	cr_assert_eq(run_slicectl(&r, (const char *const[]){
			"job", "--target", "slurm", "--partition", "debug",
			"--nodes", "2", "--name", run, "--bucket",
			slurm_bucket, "--script-dir", sgd, "--command",
			"exec python3 train.py", "--env", "SGD_STEPS=600",
			"--env", steps, "--env", "SGD_CKPT_EVERY=50", "--env",
			"SGD_PRINT_EVERY=25", "--env", sync, "--env",
			"PYTHONUNBUFFERED=1", "--hang-timeout", "4s",
			"--grace", "10s", "--max-restarts", "30", NULL },
				  NULL),
		     0);
	cr_assert_eq(r.status, 0, "%s%s", r.out, r.err);
	snprintf(id, sizeof(id), "%.*s", (int)strcspn(r.out, "\n"), r.out);
	run_result_release(&r);
	return id;
}

/* The trainer of run's process p, found by its environment. */
static pid_t trainer_pid(const char *run, int p)
{
	char sync[HARNESS_PATH + 64], proc[64];
	pid_t found;

	snprintf(sync, sizeof(sync), "\nSGD_SYNC_DIR=%s/sync-%s\n", slurm_dir,
		 run);
	snprintf(proc, sizeof(proc), "\nSLICE_PROCESS_ID=%d\n", p);
	processes_with("train.py", NULL, sync + 1, proc, &found);
	cr_assert_gt(found, 0, "no trainer of process %d", p);
	return found;
}

static void start2(void)
{
	slurm_cluster_start(2);
}

Test(slurm_live, sgd_under_requeue_notice_node_down_crash_and_hang_is_exact,
     .init = start2, .fini = slurm_cluster_stop)
{
	const char *id = submit("chaos", "0.03");
	char job_id[32], cmd[160], *chaos, *calm;
	long long gen;
	json_t *j;

	snprintf(job_id, sizeof(job_id), "%s", id);
	/* A trainer crash: the group restarts in place (control.json). */
	gen = slurm_generation(slurm_wait_running("chaos", 2, 1, 50));
	cr_assert_eq(kill(trainer_pid("chaos", 1), SIGKILL), 0);
	gen = slurm_generation(slurm_wait_running("chaos", 2, gen + 1, 0));

	/* A hang: the hang timeout restarts it in place too. */
	cr_assert_eq(kill(trainer_pid("chaos", 0), SIGSTOP), 0);
	gen = slurm_generation(slurm_wait_running("chaos", 2, gen + 1, 0));

	/* scontrol requeue: the next allocation is restart 1. */
	cr_assert_eq(sh("scontrol requeue %s", job_id), 0);
	slurm_release_requeued(job_id, 1);
	gen = slurm_generation(slurm_wait_running("chaos", 2, gen + 1, 0));

	/* The notice as a time limit or a preemption gives it: SIGTERM to
	 * the batch script, an emergency step, the job requeues itself. */
	cr_assert_eq(sh("scancel --signal=TERM --batch %s", job_id), 0);
	slurm_release_requeued(job_id, 2);
	gen = slurm_generation(slurm_wait_running("chaos", 2, gen + 1, 0));

	/* A node set down: the job fails on it and Slurm requeues it. */
	snprintf(cmd, sizeof(cmd),
		 "scontrol update NodeName=n2 State=DOWN Reason=chaos");
	cr_assert_eq(sh("%s", cmd), 0);
	slurm_release_requeued(job_id, 3);
	json_decref(slurm_wait_running("chaos", 2, gen + 1, 0));

	j = slurm_wait_state("chaos", "done", 300000);
	cr_expect_geq(slurm_generation(j), 6);
	slurm_wait_job(job_id, "COMPLETED", NULL, 60000);

	/* The same job, never interrupted. */
	submit("calm", "0");
	j = slurm_wait_state("calm", "done", 300000);
	cr_expect_eq(slurm_generation(j), 1);

	chaos = sgd_checkpoint_params_of(slurm_bucket, slurm_dir, "chaos", 600,
					 1, 2);
	calm = sgd_checkpoint_params_of(slurm_bucket, slurm_dir, "calm", 600,
					1, 2);
	cr_assert_str_eq(chaos, calm);
	for (int w = 0; w < 2; w++) {
		char *a = sgd_logged_params(slurm_bucket, "chaos", 0, w);
		char *b = sgd_logged_params(slurm_bucket, "calm", 0, w);

		cr_assert_str_eq(a, chaos, "worker 0/%d", w);
		cr_assert_str_eq(b, calm);
		free(a);
		free(b);
	}
	free(chaos);
	free(calm);
}
