/*
 * tests/slurm/test_slurm_start.c: slurm-cluster.sh's start is bounded. A
 * slurmctld that dies at start (here: a missing auth plugin, as when
 * slurm-wlm-jwt-plugin is not installed) fails it within seconds, with
 * the log's last lines saying why, and leaves no daemon behind.
 */
#include "tests/harness/harness.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>

#define FAIL_WITHIN_MS 20000

Test(slurm_start, a_slurmctld_that_dies_at_start_fails_it_in_seconds)
{
	char dir[HARNESS_PATH], where[HARNESS_PATH + 16];
	char script[HARNESS_PATH + 64];
	struct run_result r;
	long long start, ms;

	cr_assert_eq(make_temp_dir(dir, sizeof(dir), "slurm-start"), 0);
	snprintf(where, sizeof(where), "%s/slurm", dir);
	snprintf(script, sizeof(script), "%s/tests/slurm/slurm-cluster.sh",
		 getenv("SLICECTL_SRCDIR"));
	start = monotonic_ms();
	cr_assert_eq(run_program(&r, (const char *const[]){
					 "sh", script, "start", where, "2",
					 NULL },
				 (const char *const[]){
					 "SLURM_CLUSTER_CONF=AuthAltTypes="
					 "auth/slicectl_missing",
					 NULL }),
		     0);
	ms = monotonic_ms() - start;
	fprintf(stderr, "slurm-cluster.sh start failed after %lld ms:\n%s",
		ms, r.err);
	cr_expect_neq(r.status, 0);
	cr_expect_lt(ms, FAIL_WITHIN_MS);
	ASSERT_HAS(r.err, "slurmctld (pid ");
	ASSERT_HAS(r.err, "exited at start");
	ASSERT_HAS(r.err, "auth/slicectl_missing");
	cr_expect_eq(processes_mentioning(dir), 0, "processes left behind");
	run_result_release(&r);
	rm_rf(dir);
}
