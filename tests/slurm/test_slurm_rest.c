/*
 * slicectl job --target slurm --slurmrestd: submission, status and delete
 * through a real slurmrestd 22.05 (openapi/v0.0.38, rest_auth/local on a
 * unix socket) in front of the test's cluster (slurm_cluster.h), with
 * Slurm's commands on slicectl's PATH shadowed by ones that fail and say
 * so, so nothing but the REST API can have done it; the errors of a slurmrestd that does not answer and of one
 * that refuses the job (its "errors" array's message).
 */
#include "tests/slurm/slurm_cluster.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char rest_url[HARNESS_PATH + 40];
static char path_env[4096];
/* slicectl's environment: PATH starts with the shadowing commands. The
 * job is handed the same environment (as sbatch does), and its own
 * scontrol calls must work: the shadows say nothing inside a job. */
static const char *const no_commands[] = { path_env, NULL };

static void start(void)
{
	slurm_cluster_start(2);
	slurm_rest_start(rest_url, sizeof(rest_url), false);
	cr_assert_eq(sh("mkdir '%s/shadow' && for c in sbatch squeue scontrol "
			"scancel; do printf '#!/bin/sh\\n[ -n \"$SLURM_JOB_ID\" ] "
			"&& exec /usr/bin/%%s \"$@\"\\necho %%s >>%s/shadow/used\\n"
			"exit 1\\n' $c $c >'%s/shadow/'$c; chmod +x '%s/shadow/'$c; "
			"done", slurm_dir, slurm_dir, slurm_dir, slurm_dir), 0);
	snprintf(path_env, sizeof(path_env), "PATH=%s/shadow:%s", slurm_dir,
		 getenv("PATH"));
}

/* No Slurm command ran outside a job. */
static void no_command_used(void)
{
	char used[HARNESS_PATH + 32];
	char *text;

	snprintf(used, sizeof(used), "%s/shadow/used", slurm_dir);
	text = read_file(used, NULL);
	cr_expect_null(text, "slicectl ran %s", text);
	free(text);
}

/* `slicectl job --target slurm --slurmrestd URL` for run, extra flags
 * NULL-ended. */
static void job(struct run_result *r, const char *run, const char *url,
		const char *const *extra)
{
	const char *argv[32] = { "job", "--target", "slurm", "--slurmrestd",
				 url, "--partition", "debug", "--nodes", "2",
				 "--name", run, "--bucket", slurm_bucket,
				 "--command", "exec sleep 300" };
	size_t n = 15;

	for (; extra && *extra && n < 31; extra++)
		argv[n++] = *extra;
	argv[n] = NULL;
	cr_assert_eq(run_slicectl(r, argv, no_commands), 0);
}

/* `slicectl CMD ops --bucket B [--wait]` without Slurm's commands. */
static void operate(struct run_result *r, const char *cmd, bool wait)
{
	cr_assert_eq(run_slicectl(r, (const char *const[]){
					  cmd, "ops", "--bucket", slurm_bucket,
					  wait ? "--wait" : NULL, NULL },
				  no_commands),
		     0);
}

Test(slurm_rest, submit_status_delete, .init = start,
     .fini = slurm_cluster_stop)
{
	char id[32], want[HARNESS_PATH + 64], *text;
	struct run_result r;
	json_t *j, *t, *nodes;

	job(&r, "ops", rest_url, NULL);
	cr_assert_eq(r.status, 0, "%s", r.err);
	snprintf(id, sizeof(id), "%.*s", (int)strcspn(r.out, "\n"), r.out);
	cr_assert(strstr(r.err, "submitted to partition debug"), "%s", r.err);
	run_result_release(&r);

	/* job.json keeps the slurmrestd the operator commands ask. */
	snprintf(want, sizeof(want), "%s/bucket/ops/job.json", slurm_dir);
	text = read_file(want, NULL);
	cr_assert(text);
	j = json_loads(text, 0, NULL);
	free(text);
	t = json_object_get(j, "target");
	cr_expect_str_eq(slurm_jstr(t, "job_id"), id);
	cr_expect_str_eq(slurm_jstr(t, "slurmrestd"), rest_url);
	json_decref(j);

	/* Released through the API, the job runs both supervisors. */
	cr_expect_eq(slurm_wait_job(id, "RUNNING", NULL, 30000), 0);
	json_decref(slurm_wait_running("ops", 2, 1, 0));
	operate(&r, "status", false);
	cr_expect_eq(r.status, 0, "%s", r.err);
	snprintf(want, sizeof(want), "Slurm job %s (partition debug): Slurm "
		 "RUNNING; restarts 0", id);
	cr_expect(strstr(r.out, want), "%s", r.out);
	run_result_release(&r);
	cr_assert_eq(run_slicectl(&r, (const char *const[]){
					  "status", "ops", "--bucket",
					  slurm_bucket, "--format", "json",
					  NULL },
				  no_commands),
		     0);
	j = json_loads(r.out, 0, NULL);
	run_result_release(&r);
	cr_assert(j);
	t = json_object_get(j, "target");
	cr_expect_str_eq(slurm_jstr(t, "job_state"), "RUNNING");
	/* slurmrestd says "n[1-2]": expanded here, without scontrol. */
	nodes = json_object_get(t, "nodes");
	cr_assert_eq(json_array_size(nodes), 2);
	cr_expect_str_eq(slurm_jstr(json_array_get(nodes, 0), "node"), "n1");
	cr_expect_str_eq(slurm_jstr(json_array_get(nodes, 1), "node"), "n2");
	json_decref(j);

	operate(&r, "delete", true);
	cr_expect_eq(r.status, 0, "%s", r.err);
	snprintf(want, sizeof(want), "Slurm job %s deleted", id);
	cr_expect(strstr(r.out, want), "%s", r.out);
	run_result_release(&r);
	slurm_wait_job(id, "CANCELLED", NULL, 30000);
	operate(&r, "delete", false);
	cr_expect_eq(r.status, 4, "%s", r.err);
	run_result_release(&r);
	no_command_used();
}

Test(slurm_rest, clear_errors, .init = start, .fini = slurm_cluster_stop)
{
	char dead[HARNESS_PATH + 40];
	struct run_result r;

	/* The API's own error: its "errors" array's message. */
	job(&r, "nopart", rest_url,
	    (const char *const[]){ "--partition", "gpu", NULL });
	cr_expect_eq(r.status, 1);
	cr_expect(strstr(r.err, "slurmrestd refused the job: Invalid "
			 "partition name specified"), "%s", r.err);
	run_result_release(&r);
	slurm_no_run("nopart");

	/* A socket nobody serves. */
	snprintf(dead, sizeof(dead), "unix:%s/nobody.sock", slurm_dir);
	job(&r, "dead", dead, NULL);
	cr_expect_eq(r.status, 1);
	cr_expect(strstr(r.err, "slurmrestd at unix:") &&
			  strstr(r.err, "did not answer POST /job/submit"),
		  "%s", r.err);
	run_result_release(&r);
	slurm_no_run("dead");

	/* A slurmrestd that went away after the submission: status says so. */
	job(&r, "ops", rest_url, NULL);
	cr_assert_eq(r.status, 0, "%s", r.err);
	run_result_release(&r);
	slurm_rest_stop();
	operate(&r, "status", false);
	cr_expect(strstr(r.err, "did not answer GET /job/"), "%s%s", r.out,
		  r.err);
	run_result_release(&r);
}

static void start_jwt(void)
{
	setenv("SLURM_CLUSTER_JWT", "1", 1);
	slurm_cluster_start(2);
	unsetenv("SLURM_CLUSTER_JWT");
	slurm_rest_start(rest_url, sizeof(rest_url), true);
	snprintf(path_env, sizeof(path_env), "PATH=%s", getenv("PATH"));
}

/* rest_auth/jwt over TCP: the token from `scontrol token` goes with the
 * user's name; without one slurmrestd's 401 says what is missing. (The
 * test cluster's primary auth/none takes any token slurmrestd passes on:
 * what is checked here is that slicectl sends it.) */
Test(slurm_rest, jwt_over_tcp, .init = start_jwt, .fini = slurm_cluster_stop)
{
	char token[2048] = "", id[32], want[128];
	const char *env[3] = { path_env, token, NULL };
	struct run_result r;
	FILE *p = popen("scontrol token username=root lifespan=600", "r");

	cr_assert(p);
	cr_assert(fgets(token, sizeof(token), p));
	pclose(p);
	token[strcspn(token, "\n")] = '\0';
	cr_assert(!strncmp(token, "SLURM_JWT=", 10), "%s", token);

	cr_assert_eq(run_slicectl(&r, (const char *const[]){
			"job", "--target", "slurm", "--slurmrestd", rest_url,
			"--partition", "debug", "--nodes", "2", "--name", "ops",
			"--bucket", slurm_bucket, "--command", "exec sleep 300",
			NULL }, env), 0);
	cr_assert_eq(r.status, 0, "%s", r.err);
	snprintf(id, sizeof(id), "%.*s", (int)strcspn(r.out, "\n"), r.out);
	run_result_release(&r);
	cr_expect_eq(slurm_wait_job(id, "RUNNING", NULL, 30000), 0);

	/* No token: a 401 that names SLURM_JWT. */
	cr_assert_eq(run_slicectl(&r, (const char *const[]){
			"status", "ops", "--bucket", slurm_bucket, NULL },
			(const char *const[]){ path_env, "SLURM_JWT=", NULL }), 0);
	cr_expect(strstr(r.err, "HTTP 401: Authentication failure") &&
			  strstr(r.err, "SLURM_JWT"), "%s%s", r.out, r.err);
	run_result_release(&r);

	cr_assert_eq(run_slicectl(&r, (const char *const[]){
			"delete", "ops", "--bucket", slurm_bucket, "--wait",
			NULL }, env), 0);
	cr_expect_eq(r.status, 0, "%s", r.err);
	snprintf(want, sizeof(want), "Slurm job %s deleted", id);
	cr_expect(strstr(r.out, want), "%s", r.out);
	run_result_release(&r);
}
