/*
 * slicectl job --target slurm against a real Slurm 22.05 (slurmctld and
 * two `slurmd -N` nodes on loopback, slurm_cluster.h): the batch script
 * --render prints; submission, status and delete through the CLI; the
 * errors of an unknown partition, a submission Slurm refuses, a
 * controller that does not answer and a machine without Slurm's
 * commands; the flags that are not for this target; a failed preflight
 * and a quarantined node, each requeueing the job without the node.
 */
#include "tests/slurm/slurm_cluster.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* `slicectl job --target slurm` for run with extra flags (NULL-ended). */
static void job(struct run_result *r, const char *run, const char *nodes,
		const char *const *extra, const char *const *env)
{
	const char *argv[48] = { "job", "--target", "slurm", "--partition",
				 "debug", "--nodes", nodes, "--name", run,
				 "--bucket", slurm_bucket, "--command",
				 "exec sleep 300" };
	size_t n = 13;

	for (; extra && *extra && n < 47; extra++)
		argv[n++] = *extra;
	argv[n] = NULL;
	cr_assert_eq(run_slicectl(r, argv, env), 0);
}

Test(slurm, render_prints_the_batch_script)
{
	struct run_result r;
	const char *profile;

	cr_assert_eq(make_temp_dir(slurm_dir, sizeof(slurm_dir), "slurm"), 0);
	snprintf(slurm_bucket, sizeof(slurm_bucket), "file://%s", slurm_dir);
	job(&r, "big", "8",
	    (const char *const[]){ "--num-slices", "2", "--gpus-per-node", "8",
				   "--account", "ml", "--qos", "high",
				   "--time", "2-00:00:00", "--constraint",
				   "h100", "--grace", "40", "--render",
				   NULL },
	    NULL);
	cr_assert_eq(r.status, 0, "%s", r.err);
	for (const char *const *l = (const char *const[]){
		     "#!/bin/sh\n", "#SBATCH --job-name=big\n",
		     "#SBATCH --partition=debug\n", "#SBATCH --nodes=8\n",
		     "#SBATCH --ntasks-per-node=1\n", "#SBATCH --requeue\n",
		     "#SBATCH --signal=B:TERM@100\n",
		     "#SBATCH --gpus-per-node=8\n", "#SBATCH --account=ml\n",
		     "#SBATCH --qos=high\n", "#SBATCH --time=2-00:00:00\n",
		     "#SBATCH --constraint=h100\n",
		     "srun --ntasks-per-node=1 ", "--slurm --state-dir",
		     "sha256sum -c", "scontrol requeue \"$SLURM_JOB_ID\"",
		     /* A failed preflight (exit 4): requeued without its
		      * node, the update after the requeue. */
		     "[ \"$status\" = 4 ] || exit \"$status\"",
		     "node=${SLURMD_NODENAME:-$(hostname)}",
		     "scontrol requeue \"$SLURM_JOB_ID\"\n"
		     "scontrol update JobId=\"$SLURM_JOB_ID\" "
		     "ExcNodeList=\"$excluded\"\nexit 4",
		     "4) exit 4 ;;",
		     NULL };
	     *l; l++)
		cr_expect(strstr(r.out, *l), "no '%s' in:\n%s", *l, r.out);
	/* Cluster Toolkit's NCCL profile, sourced before the step when the
	 * node has it, so that srun hands its variables to the trainers. */
	profile = strstr(r.out, "nccl_profile=${SLICE_NCCL_PROFILE:-/var/lib/"
				"tcpxo/lib64/nccl-env-profile.sh}\n"
				"if [ -r \"$nccl_profile\" ]; then\n"
				"\tset +u\n\t. \"$nccl_profile\"\n");
	cr_expect(profile, "no NCCL profile in:\n%s", r.out);
	cr_expect(profile && profile < strstr(r.out, "srun "),
		  "the profile comes after srun:\n%s", r.out);
	run_result_release(&r);
	slurm_no_run("big");
	rm_rf(slurm_dir);
}

Test(slurm, flags_that_do_not_fit_are_refused_before_anything)
{
	const char *const *cases[] = {
		(const char *const[]){ "--num-slices", "3", NULL },
		(const char *const[]){ "--time", "soon", NULL },
		(const char *const[]){ "--account", "a b", NULL },
		(const char *const[]){ "--queue", "lq", NULL },
		(const char *const[]){ "--accelerator-type", "v4-8", NULL },
		(const char *const[]){ "--spot", NULL },
	};
	struct run_result r;

	cr_assert_eq(make_temp_dir(slurm_dir, sizeof(slurm_dir), "slurm"), 0);
	snprintf(slurm_bucket, sizeof(slurm_bucket), "file://%s", slurm_dir);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		job(&r, "bad", "2", cases[i], NULL);
		cr_expect_eq(r.status, 2, "%s: %s", cases[i][0], r.err);
		run_result_release(&r);
	}
	cr_assert_eq(run_slicectl(&r, (const char *const[]){
					  "job", "--partition", "p", "--name",
					  "x", "--command", "true", NULL },
				  NULL),
		     0);
	cr_expect_eq(r.status, 2);
	cr_expect(strstr(r.err, "are for --target slurm"), "%s", r.err);
	run_result_release(&r);
	rm_rf(slurm_dir);
}

static void start2(void)
{
	slurm_cluster_start(2);
}

Test(slurm, submit_status_delete, .init = start2, .fini = slurm_cluster_stop)
{
	char id[32], path[HARNESS_PATH + 64], *text;
	struct run_result r;
	json_t *j, *t, *nodes;

	job(&r, "ops", "2", NULL, NULL);
	cr_assert_eq(r.status, 0, "%s", r.err);
	snprintf(id, sizeof(id), "%.*s", (int)strcspn(r.out, "\n"), r.out);
	cr_assert(strstr(r.err, "submitted to partition debug"), "%s", r.err);
	run_result_release(&r);

	/* job.json names the job; it went up before the job was released. */
	snprintf(path, sizeof(path), "%s/bucket/ops/job.json", slurm_dir);
	text = read_file(path, NULL);
	cr_assert(text);
	j = json_loads(text, 0, NULL);
	free(text);
	t = json_object_get(j, "target");
	cr_expect_str_eq(slurm_jstr(t, "kind"), "slurm");
	cr_expect_str_eq(slurm_jstr(t, "job_id"), id);
	cr_expect_str_eq(slurm_jstr(t, "partition"), "debug");
	json_decref(j);

	cr_expect_eq(slurm_wait_job(id, "RUNNING", NULL, 30000), 0);
	json_decref(slurm_wait_running("ops", 2, 1, 0));
	j = slurm_status("ops");
	t = json_object_get(j, "target");
	cr_expect_str_eq(slurm_jstr(t, "kind"), "slurm");
	cr_expect_str_eq(slurm_jstr(t, "job_state"), "RUNNING");
	cr_expect_eq(json_integer_value(json_object_get(t, "restarts")), 0);
	nodes = json_object_get(t, "nodes");
	cr_assert_eq(json_array_size(nodes), 2);
	cr_expect_str_eq(slurm_jstr(json_array_get(nodes, 0), "node"), "n1");
	cr_expect_str_eq(slurm_jstr(json_array_get(nodes, 1), "node"), "n2");
	json_decref(j);
	cr_assert_eq(run_slicectl(&r, (const char *const[]){
					  "status", "ops", "--bucket",
					  slurm_bucket, NULL },
				  NULL),
		     0);
	snprintf(path, sizeof(path), "Slurm job %s (partition debug): Slurm "
		 "RUNNING; restarts 0", id);
	cr_expect(strstr(r.out, path), "%s", r.out);
	run_result_release(&r);

	cr_assert_eq(run_slicectl(&r, (const char *const[]){
					  "delete", "ops", "--bucket",
					  slurm_bucket, "--wait", NULL },
				  NULL),
		     0);
	cr_expect_eq(r.status, 0, "%s", r.err);
	snprintf(path, sizeof(path), "Slurm job %s deleted", id);
	cr_expect(strstr(r.out, path), "%s", r.out);
	run_result_release(&r);
	slurm_wait_job(id, "CANCELLED", NULL, 30000);
	cr_assert_eq(run_slicectl(&r, (const char *const[]){
					  "delete", "ops", "--bucket",
					  slurm_bucket, NULL },
				  NULL),
		     0);
	cr_expect_eq(r.status, 4, "%s", r.err);
	run_result_release(&r);
}

static void start3(void)
{
	slurm_cluster_start(3);
}

/* Submits run on 2 of the 3 nodes with command and preflight (or NULL),
 * where n1 is made to fail (Slurm gives the first allocation n1 and n2):
 * the job is requeued without n1, its next allocation is n2 and n3,
 * where the run is done; returns its generation then. */
static long long done_without_n1(const char *run, const char *command,
				 const char *preflight)
{
	struct run_result r;
	long long gen;
	char id[32];

	cr_assert_eq(run_slicectl(&r, (const char *const[]){
			"job", "--target", "slurm", "--partition", "debug",
			"--nodes", "2", "--name", run, "--bucket",
			slurm_bucket, "--command", command,
			preflight ? "--preflight" : NULL, preflight, NULL },
				  NULL), 0);
	cr_assert_eq(r.status, 0, "%s%s", r.out, r.err);
	snprintf(id, sizeof(id), "%.*s", (int)strcspn(r.out, "\n"), r.out);
	run_result_release(&r);
	slurm_release_requeued(id, 1);
	gen = slurm_generation(slurm_wait_state(run, "done", 180000));
	cr_assert_eq(sh("scontrol show job %s | grep -q 'ExcNodeList=n1$'",
			id), 0);
	cr_assert_eq(sh("scontrol show job %s | grep -q ' NodeList=n\\[2-3\\]'",
			id), 0);
	return gen;
}

/* Node n1's preflight fails; the history names n1. */
Test(slurm, a_failed_preflight_requeues_the_job_without_its_node,
     .init = start3, .fini = slurm_cluster_stop)
{
	done_without_n1("pre", "exit 0", "[ \"$SLURMD_NODENAME\" != n1 ] || "
			"{ echo no GPU on n1; exit 1; }");
	cr_assert_eq(sh("grep -l '\"kind\": *\"preflight_fail\"' "
			"'%s'/bucket/pre/events/*.json | xargs grep -q "
			"'no GPU on n1'", slurm_dir), 0);
}

/* The quarantine's twin: the trainer dies of SIGSEGV on n1 in
 * generations 1 and 2, so the second bump quarantines n1, whose step
 * leaves with exit 4 as after a failed preflight (n2 alone runs
 * generation 3); the requeued job's bump makes generation 4, done on n2
 * and n3, and control.json and the history name n1. */
Test(slurm, a_quarantined_node_requeues_the_job_without_it,
     .init = start3, .fini = slurm_cluster_stop)
{
	char path[HARNESS_PATH + 64], *text;
	json_t *c, *q;

	cr_expect_eq(done_without_n1("bad", "if [ \"$SLURMD_NODENAME\" = n1 ] "
				     "&& [ \"$SLICE_GENERATION\" -le 2 ]; "
				     "then ulimit -c 0; kill -SEGV $$; fi; "
				     "exit 0", NULL), 4);
	snprintf(path, sizeof(path), "%s/bucket/bad/control.json",
		 slurm_dir);
	text = read_file(path, NULL);
	cr_assert(text);
	c = json_loads(text, 0, NULL);
	free(text);
	q = json_object_get(c, "quarantined");
	cr_assert_eq(json_array_size(q), 1);
	cr_expect_str_eq(slurm_jstr(json_array_get(q, 0), "host"), "n1");
	cr_expect_str_eq(slurm_jstr(json_array_get(q, 0), "why"), "SIGSEGV");
	json_decref(c);
	cr_assert_eq(sh("grep -l '\"kind\": *\"quarantine\"' "
			"'%s'/bucket/bad/events/*.json | xargs grep -q "
			"'\"host\": *\"n1\"'", slurm_dir), 0);
}

Test(slurm, clear_errors, .init = start2, .fini = slurm_cluster_stop)
{
	char conf[HARNESS_PATH + 64], env_conf[HARNESS_PATH + 80];
	struct run_result r;
	long long t0;

	/* A partition the cluster does not have: nothing is left behind. */
	job(&r, "nopart", "2", (const char *const[]){ "--partition", "gpu",
						      NULL },
	    NULL);
	cr_expect_eq(r.status, 1);
	cr_expect(strstr(r.err, "invalid partition specified: gpu"), "%s",
		  r.err);
	run_result_release(&r);
	slurm_no_run("nopart");

	/* A feature no node has: sbatch refuses. */
	job(&r, "nofeature", "2", (const char *const[]){ "--constraint",
							 "h100", NULL },
	    NULL);
	cr_expect_eq(r.status, 1);
	cr_expect(strstr(r.err, "submitting the batch job: sbatch: error: "),
		  "%s", r.err);
	cr_expect(strstr(r.err, "Invalid feature specification"), "%s",
		  r.err);
	run_result_release(&r);
	slurm_no_run("nofeature");

	/* A controller that does not answer: its port has nobody. */
	snprintf(conf, sizeof(conf), "%s/dead.conf", slurm_dir);
	cr_assert_eq(sh("sed 's/^SlurmctldPort=.*/SlurmctldPort=9/' '%s' "
			">'%s'", getenv("SLURM_CONF"), conf), 0);
	snprintf(env_conf, sizeof(env_conf), "SLURM_CONF=%s", conf);
	t0 = slurm_now_ms();
	job(&r, "dead", "2", NULL,
	    (const char *const[]){ env_conf,
				   "SLICECTL_SLURM_TIMEOUT_MS=15000", NULL });
	cr_expect_eq(r.status, 1);
	cr_expect(strstr(r.err, "Unable to contact slurm controller") ||
			  strstr(r.err, "did not answer within 15 s"),
		  "%s", r.err);
	cr_expect_lt(slurm_now_ms() - t0, 30000);
	fprintf(stderr, "a dead controller: %lld ms\n", slurm_now_ms() - t0);
	run_result_release(&r);
	slurm_no_run("dead");

	/* No Slurm commands on PATH. */
	job(&r, "nocmd", "2", NULL,
	    (const char *const[]){ "PATH=/nonexistent", NULL });
	cr_expect_eq(r.status, 1);
	cr_expect(strstr(r.err, "sbatch is not installed"), "%s", r.err);
	run_result_release(&r);
	slurm_no_run("nocmd");
}
