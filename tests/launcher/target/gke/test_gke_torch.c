/*
 * slicectl job --target gke with a GPU machine type against the
 * Kubernetes API fake, running examples/torch/train.py (real
 * torch.distributed, gloo, env://) on 2 g2-standard-24 nodes (L4: the
 * plain network stack, which the fake models; it runs no TCPX/TCPXO
 * sidecar): a trainer crash (the group restarts in place) and a pod's
 * eviction (JobSet recreates the pods) end with every rank's parameters
 * equal to an uninterrupted run's, to the bit.
 *
 * MASTER_ADDR is the supervisor's coordinator, SLICE_POD_COORDINATOR =
 * RUN-slice-0-0.RUN; the fake's kubelet gives each pod an /etc/hosts that
 * maps its JobSet's headless-service names to 127.0.0.1, as the cluster's
 * DNS would to the first pod's IP. Skipped, saying why, when no python3
 * imports torch. The fixture is gke_live_check.c's.
 */
#include "tests/launcher/target/gke/gke_live_check.h"
#include "tests/harness/harness.h"
#include "tests/launcher/torch_params.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

TestSuite(gke_live, .init = setup, .fini = cleanup, .timeout = 600);

#define N_ARGS 48

/* job_argv for examples/torch as run on 2 g2-standard-24 nodes, a sleep
 * of step_s a step. */
static const char *const *torch_job(const char *run, const char *step_s)
{
	static char script[HARNESS_PATH + 32], cmd[128], sleep[64];
	static const char *v[N_ARGS];
	const char *src = getenv("SLICECTL_SRCDIR");
	size_t n = 0;

	snprintf(script, sizeof(script), "%s/examples/torch",
		 src ? src : ".");
	snprintf(cmd, sizeof(cmd), "exec %s train.py", torch_python());
	snprintf(sleep, sizeof(sleep), "TORCH_STEP_S=%s", step_s);
	v[n++] = "--script-dir";
	v[n++] = script;
	v[n++] = "--nodes";
	v[n++] = "2";
	v[n++] = "--env";
	v[n++] = "TORCH_STEPS=150";
	v[n++] = "--env";
	v[n++] = "TORCH_CKPT_EVERY=5";
	v[n++] = "--env";
	v[n++] = sleep;
	v[n++] = "--env";
	v[n++] = "PYTHONUNBUFFERED=1";
	v[n++] = "--rendezvous-port";
	v[n++] = torch_rendezvous_base();
	v[n++] = "--hang-timeout";
	v[n++] = "30s";
	v[n++] = "--max-restarts";
	v[n++] = "20";
	v[n] = NULL;
	cr_assert_lt(n, N_ARGS);
	return job_argv(run, "g2-standard-24", "1", cmd, v);
}

static void run_job(const char *const *argv)
{
	struct run_result r;

	cr_assert_eq(run_slicectl(&r, argv, NULL), 0);
	cr_assert_eq(r.status, 0, "%s%s", r.out, r.err);
	cr_assert(strstr(r.out, "pods 2/2 running"), "%s", r.out);
	run_result_release(&r);
}

/* The host pid of run's trainer of process p, found by its environment
 * (the pods' PID namespaces hide it from the heartbeat). */
static pid_t trainer_pid(const char *run, int p)
{
	char name[64], proc[48];
	pid_t found = 0;

	snprintf(name, sizeof(name), "\nSLICE_RUN=%s\n", run);
	snprintf(proc, sizeof(proc), "\nSLICE_PROCESS_ID=%d\n", p);
	processes_with("train.py", NULL, name, proc, &found);
	cr_assert_gt(found, 0, "no trainer of process %d of %s", p, run);
	return found;
}

static long long generation_of(json_t *status)
{
	long long g = json_integer_value(json_object_get(status,
							 "generation"));

	json_decref(status);
	return g;
}

Test(gke_live, torch_on_gpu_nodes_under_a_crash_and_an_eviction_is_exact)
{
	char *chaos, *calm;
	long long gen;

	torch_python(); /* skips before the fake is started for nothing */
	start_fake((const char *const[]){ "--pass-env", "PYTHONUNBUFFERED",
					  NULL });
	make_queue_for("nvidia.com/gpu", "l4",
		       "{\"cloud.google.com/gke-accelerator\":\"nvidia-l4\"}",
		       4);
	run_job(torch_job("chaos", "0.2"));

	/* A trainer crash: the group restarts in place. */
	gen = generation_of(wait_running("chaos", 2, 1, 10));
	cr_assert_eq(kill(trainer_pid("chaos", 1), SIGKILL), 0);
	gen = generation_of(wait_running("chaos", 2, gen + 1, 30));

	/* A pod evicted: JobSet recreates the pods, the run resumes. */
	evict_pod("chaos", 0);
	json_decref(wait_running("chaos", 2, gen + 1, 60));
	json_decref(wait_state("chaos", "done", 300000));
	cr_expect_geq(generation_of(wait_end("chaos", "Completed", 60000)),
		      3);

	/* The same job, never interrupted. */
	run_job(torch_job("calm", "0"));
	cr_expect_eq(generation_of(wait_state("calm", "done", 300000)), 1);
	json_decref(wait_end("calm", "Completed", 60000));

	chaos = torch_final_params(bucket, "chaos", 1, 2, 1);
	calm = torch_final_params(bucket, "calm", 1, 2, 1);
	cr_assert_str_eq(chaos, calm);
	free(chaos);
	free(calm);
	fake_stop(&fake);
}
