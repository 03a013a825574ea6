/*
 * slicectl job --target slurm --gpus-per-node 2 on a real Slurm whose 2
 * nodes have 2 fake GPUs each (slurm-cluster.sh's SLURM_CLUSTER_GPUS:
 * gres gpu:2 on /dev/null symlinks):
 *
 * - every trainer sees the node's GPU count from Slurm
 *   (SLURM_GPUS_ON_NODE, CUDA_VISIBLE_DEVICES) and the variables of the
 *   NCCL profile the batch script sourced (SLICE_NCCL_PROFILE names the
 *   test's, in place of Cluster Toolkit's
 *   /var/lib/tcpxo/lib64/nccl-env-profile.sh);
 * - torchrun as the command, with --nproc_per_node "$SLURM_GPUS_ON_NODE",
 *   runs examples/torch as 2 processes on each node: 4 ranks, each
 *   logging the same final parameters. Skipped, saying why, when no
 *   python3 imports torch.
 */
#include "tests/launcher/torch_params.h"
#include "tests/slurm/slurm_cluster.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A profile as Cluster Toolkit's: exports, and a reference to a variable
 * that may be unset, which the batch script's set -u must survive. */
static const char profile[] =
	"export NCCL_TEST_FROM_PROFILE=tcpxo-like\n"
	"export LD_LIBRARY_PATH=/opt/fake-nccl/lib64:$NCCL_UNSET_IN_TESTS\n";

static void start_gpus(void)
{
	char path[HARNESS_PATH + 32];
	FILE *f;

	setenv("SLURM_CLUSTER_GPUS", "2", 1);
	slurm_cluster_start(2);
	snprintf(path, sizeof(path), "%s/nccl-env-profile.sh", slurm_dir);
	f = fopen(path, "w");
	cr_assert_not_null(f);
	cr_assert_eq(fputs(profile, f) < 0 || fclose(f), 0);
	setenv("SLICE_NCCL_PROFILE", path, 1);
}

static void start_torch_gpus(void)
{
	torch_python(); /* skips before a cluster is started for nothing */
	start_gpus();
}

/* Submits run on 2 nodes with --gpus-per-node 2 and command, more flags
 * (NULL-ended) after. The nodes' names resolve nowhere: MASTER_ADDR is
 * loopback, as in test_slurm_torch.c. */
static void submit(const char *run, const char *cmd, const char *const *more)
{
	const char *argv[40] = { "job", "--target", "slurm", "--partition",
				 "debug", "--nodes", "2", "--gpus-per-node",
				 "2", "--name", run, "--bucket", slurm_bucket,
				 "--command", cmd, "--env",
				 "MASTER_ADDR=127.0.0.1", "--grace", "10s" };
	size_t n = 19;
	struct run_result r;

	for (; more && *more; more++) {
		cr_assert_lt(n, 39);
		argv[n++] = *more;
	}
	argv[n] = NULL;
	cr_assert_eq(run_slicectl(&r, argv, NULL), 0);
	cr_assert_eq(r.status, 0, "%s%s", r.out, r.err);
	run_result_release(&r);
}

Test(slurm_gpu, trainers_see_the_gpus_and_the_nccl_profile,
     .init = start_gpus, .fini = slurm_cluster_stop, .timeout = 300)
{
	char cmd[HARNESS_PATH + 64], path[HARNESS_PATH + 32], *env;

	snprintf(cmd, sizeof(cmd), "env >'%s/env-'\"$RANK\"", slurm_dir);
	submit("env", cmd, NULL);
	json_decref(slurm_wait_state("env", "done", 120000));
	for (int rank = 0; rank < 2; rank++) {
		snprintf(path, sizeof(path), "%s/env-%d", slurm_dir, rank);
		env = read_file(path, NULL);
		cr_assert_not_null(env, "rank %d wrote no env-%d", rank, rank);
		for (const char *const *l = (const char *const[]){
			     "\nSLURM_GPUS_ON_NODE=2\n",
			     "\nCUDA_VISIBLE_DEVICES=0,1\n",
			     "\nNCCL_TEST_FROM_PROFILE=tcpxo-like\n",
			     "\nLD_LIBRARY_PATH=/opt/fake-nccl/lib64:\n",
			     "\nLOCAL_WORLD_SIZE=1\n", NULL };
		     *l; l++)
			cr_expect(strstr(env, *l), "rank %d: no %s in\n%s",
				  rank, *l + 1, env);
		free(env);
	}
}

Test(slurm_gpu, torchrun_runs_a_process_per_gpu,
     .init = start_torch_gpus, .fini = slurm_cluster_stop, .timeout = 600)
{
	char script[HARNESS_PATH + 32], cmd[512];

	snprintf(script, sizeof(script), "%s/examples/torch",
		 getenv("SLICECTL_SRCDIR"));
	/* Debian's torch 1.13: --redirects and --tee as in DESIGN.md. */
	snprintf(cmd, sizeof(cmd),
		 "exec %s -m torch.distributed.run --nnodes \"$WORLD_SIZE\" "
		 "--node_rank \"$NODE_RANK\" --nproc_per_node "
		 "\"$SLURM_GPUS_ON_NODE\" --master_addr \"$MASTER_ADDR\" "
		 "--master_port \"$MASTER_PORT\" --max_restarts 0 "
		 "--redirects 9:0 --tee 9:0 train.py", torch_python());
	submit("trgpu", cmd,
	       (const char *const[]){ "--script-dir", script, "--env", "TORCH_STEPS=20", "--env",
				      "TORCH_CKPT_EVERY=5", "--env",
				      "PYTHONUNBUFFERED=1", "--rendezvous-port",
				      torch_rendezvous_base(), NULL });
	json_decref(slurm_wait_state("trgpu", "done", 400000));
	free(torch_final_params(slurm_bucket, "trgpu", 1, 2, 2));
}
