/*
 * slicectl job --target vertex with a GPU machine type against the Vertex
 * AI fake, running examples/torch/train.py (real torch.distributed, gloo,
 * env://) as 1 primary + 2 workers (g2-standard-4 --nodes 3, Spot,
 * --watch): a trainer crash (the group restarts in place), the primary's
 * VM lost (Vertex restarts every replica; the supervisors restart the
 * group) and a Spot preemption (the job FAILED; --watch posts a new
 * CustomJob) end with every rank's parameters equal to an uninterrupted
 * run's, to the bit. MASTER_ADDR is
 * workerpool0's host from CLUSTER_SPEC (127.0.0.1 in the fake). Skipped,
 * saying why, when no python3 imports torch. The fixture is
 * gke_live_check.c's; the fake is
 * vertex_check.c's.
 */
#include "tests/launcher/target/gke/gke_live_check.h"
#include "tests/harness/harness.h"
#include "tests/launcher/target/vertex/vertex_check.h"
#include "tests/launcher/torch_params.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

TestSuite(vertex_live, .init = setup, .fini = cleanup, .timeout = 600);

#define N_ARGS 64

/* slicectl job --target vertex for examples/torch as run on 3 nodes, a
 * sleep of step_s a step, rendezvous ports from base, with extra flags
 * (NULL-terminated). */
static const char *const *torch_job(const char *run, const char *step_s,
				    const char *base, const char *const *extra)
{
	static char script[HARNESS_PATH + 32], cmd[128], sleep[64];
	static const char *v[N_ARGS];
	const char *src = getenv("SLICECTL_SRCDIR");
	size_t n = 0;

	snprintf(script, sizeof(script), "%s/examples/torch",
		 src ? src : ".");
	snprintf(cmd, sizeof(cmd), "exec %s train.py", torch_python());
	snprintf(sleep, sizeof(sleep), "TORCH_STEP_S=%s", step_s);
	const char *const args[] = {
		"job", "--target", "vertex", "--region", "us-central1",
		"--project", "proj", "--accelerator-type", "g2-standard-4",
		"--nodes", "3", "--image", "pytorch:2", "--name", run,
		"--bucket", bucket, "--command", cmd, "--grace", "5s",
		"--script-dir", script, "--env", "TORCH_STEPS=100", "--env",
		"TORCH_CKPT_EVERY=5", "--env", sleep, "--env",
		"PYTHONUNBUFFERED=1", "--rendezvous-port", base,
		"--hang-timeout", "30s",
		"--max-restarts", "20",
	};

	for (size_t i = 0; i < sizeof(args) / sizeof(*args); i++)
		v[n++] = args[i];
	for (size_t i = 0; extra && extra[i]; i++) {
		cr_assert_lt(n, N_ARGS - 1);
		v[n++] = extra[i];
	}
	v[n] = NULL;
	return v;
}

static void run_job(const char *const *argv)
{
	struct run_result r;

	cr_assert_eq(run_slicectl(&r, argv, NULL), 0);
	cr_assert_eq(r.status, 0, "%s%s", r.out, r.err);
	run_result_release(&r);
}

Test(vertex_live, torch_under_a_crash_a_lost_vm_and_preemption_is_exact)
{
	char name[64], proc[48], body[512], calm_base[8], *chaos, *calm;
	char out[HARNESS_PATH + 16], err[HARNESS_PATH + 16], job[256];
	const char *what;
	long long gen;
	json_t *j;
	pid_t pid = 0, watch;
	int status;

	torch_python(); /* skips before the fake is started for nothing */
	vertex_fake_start();
	snprintf(out, sizeof(out), "%s/watch.out", dir);
	snprintf(err, sizeof(err), "%s/watch.err", dir);
	watch = spawn_slicectl(torch_job("chaos", "0.15",
					 torch_rendezvous_base(),
					 (const char *const[]){
						 "--spot", "--watch", NULL }),
			       out, err);
	cr_assert_gt(watch, 0);
	/* --watch stays in the foreground: status has a run once the
	 * job is posted. */
	for (long long until = now_ms() + 60000;
	     !exists("bucket/chaos/control.json"); sleep_ms(100))
		cr_assert_lt(now_ms(), until, "--watch posted no job:\n%s",
			     read_file(err, NULL));
	gen = generation_of(wait_running("chaos", 3, 1, 10));
	/* The uninterrupted run's ports, chosen while the chaos run's
	 * first one is bound. */
	snprintf(calm_base, sizeof(calm_base), "%s", torch_rendezvous_base());

	/* A trainer crash: the group restarts in place. */
	snprintf(name, sizeof(name), "\nSLICE_RUN=%s\n", "chaos");
	snprintf(proc, sizeof(proc), "\nSLICE_PROCESS_ID=%d\n", 2);
	processes_with("train.py", NULL, name, proc, &pid);
	cr_assert_gt(pid, 0, "no trainer of process 2");
	cr_assert_eq(kill(pid, SIGKILL), 0);
	/* The same job, never interrupted, alongside. */
	run_job(torch_job("calm", "0", calm_base, NULL));
	j = wait_running("chaos", 3, gen + 1, 30);
	gen = json_integer_value(json_object_get(j, "generation"));
	what = jstr(json_object_get(j, "target"), "object");
	cr_assert(what && !strncmp(what, "CustomJob ", 10));
	snprintf(job, sizeof(job), "%s", what + 10);
	json_decref(j);
	snprintf(body, sizeof(body),
		 "{\"name\": \"%s\", \"pool\": 0, \"replica\": 0}", job);

	/* The primary's VM lost (the rendezvous master's host): every
	 * replica restarts, the run resumes from the newest committed step. */
	POST("/_fake/lose_vm", body);
	j = wait_running("chaos", 3, gen + 1, 50);
	gen = json_integer_value(json_object_get(j, "generation"));
	json_decref(j);

	/* The Spot job preempted: SIGTERM, the emergency step, the job
	 * FAILED; --watch posts a new CustomJob, which resumes from it. */
	preempt_until_posted_again("chaos", job);
	json_decref(wait_running("chaos", 3, gen + 1, 0));
	cr_expect_geq(generation_of(wait_state("chaos", "done", 300000)), 4,
		      "a crash, a lost VM and a preemption: 3 restarts");
	status = wait_exit(watch, 60);
	cr_expect_eq(status, 0, "slicectl job --watch exited %d", status);
	json_decref(wait_end("chaos", "Completed", 60000));
	cr_expect_eq(generation_of(wait_state("calm", "done", 300000)), 1);

	chaos = torch_final_params(bucket, "chaos", 1, 3, 1);
	calm = torch_final_params(bucket, "calm", 1, 3, 1);
	cr_assert_str_eq(chaos, calm);
	free(chaos);
	free(calm);
	fake_stop(&fake);
}
