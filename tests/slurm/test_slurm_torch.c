/*
 * examples/torch (real torch.distributed, gloo) on 2 nodes of a real Slurm
 * (slurm_cluster.h), through the launch contract the supervisor sets from
 * srun's environment, under `scontrol requeue` and then a trainer's crash:
 * the next allocation joins as a new generation, on a new MASTER_PORT,
 * and restores the newest committed step, the crash restarts the group in
 * place on the next port, and every rank ends with an uninterrupted run's
 * parameters, to the bit.
 *
 * The test cluster's nodes (n1, n2: slurmd -N on loopback) have names
 * no resolver knows, so the job's env gives MASTER_ADDR=127.0.0.1 (the
 * job's env wins); on a real cluster the first node's name, which the
 * supervisor sets, resolves.
 */
#include "tests/launcher/torch_params.h"
#include "tests/slurm/slurm_cluster.h"

#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Submits examples/torch as run (a sleep of step_s a step); returns the
 * job id (static). */
static const char *submit(const char *run, const char *step_s)
{
	static char id[32];
	char script[HARNESS_PATH + 32], cmd[128], sleep[64];
	struct run_result r;

	snprintf(script, sizeof(script), "%s/examples/torch",
		 getenv("SLICECTL_SRCDIR"));
	snprintf(cmd, sizeof(cmd), "exec %s train.py", torch_python());
	snprintf(sleep, sizeof(sleep), "TORCH_STEP_S=%s", step_s);
	cr_assert_eq(run_slicectl(&r, (const char *const[]){
			"job", "--target", "slurm", "--partition", "debug",
			"--nodes", "2", "--name", run, "--bucket",
			slurm_bucket, "--script-dir", script, "--command", cmd,
			"--env", "TORCH_STEPS=100", "--env",
			"TORCH_CKPT_EVERY=5", "--env", sleep, "--env",
			"MASTER_ADDR=127.0.0.1", "--env", "PYTHONUNBUFFERED=1",
			"--rendezvous-port", torch_rendezvous_base(),
			"--hang-timeout", "60s", "--grace", "10s",
			"--max-restarts", "10", NULL },
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
	char who[64], proc[64];
	pid_t found;

	snprintf(who, sizeof(who), "\nSLICE_RUN=%s\n", run);
	snprintf(proc, sizeof(proc), "\nSLICE_PROCESS_ID=%d\n", p);
	processes_with("train.py", NULL, who, proc, &found);
	cr_assert_gt(found, 0, "no trainer of process %d", p);
	return found;
}

static void start2(void)
{
	torch_python(); /* skips before a cluster is started for nothing */
	slurm_cluster_start(2);
}

Test(slurm_torch, torch_under_requeue_is_exact, .init = start2,
     .fini = slurm_cluster_stop, .timeout = 600)
{
	char job_id[32], *chaos, *calm;
	long long gen;
	json_t *j;

	snprintf(job_id, sizeof(job_id), "%s", submit("chaos", "0.2"));
	gen = slurm_generation(slurm_wait_running("chaos", 2, 1, 10));
	cr_assert_eq(sh("scontrol requeue %s", job_id), 0);
	slurm_release_requeued(job_id, 1);
	gen = slurm_generation(slurm_wait_running("chaos", 2, gen + 1, 10));
	/* A crash: the group restarts in place, without Slurm. */
	cr_assert_eq(kill(trainer_pid("chaos", 1), SIGKILL), 0);
	json_decref(slurm_wait_running("chaos", 2, gen + 1, 0));
	j = slurm_wait_state("chaos", "done", 300000);
	cr_expect_geq(slurm_generation(j), 3);
	slurm_wait_job(job_id, "COMPLETED", NULL, 60000);

	submit("calm", "0");
	j = slurm_wait_state("calm", "done", 300000);
	cr_expect_eq(slurm_generation(j), 1);
	chaos = torch_final_params(slurm_bucket, "chaos", 1, 2, 1);
	calm = torch_final_params(slurm_bucket, "calm", 1, 2, 1);
	cr_assert_str_eq(chaos, calm);
	free(chaos);
	free(calm);
}
