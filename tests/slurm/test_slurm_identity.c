/*
 * slice-supervisor --slurm's identity from srun's environment
 * (identity_from_slurm): the worker from SLURM_NODEID, the sizes checked
 * against SLURM_NNODES, the coordinator from the node list's first host,
 * SLURM_RESTART_COUNT as the restart attempt, and each missing or wrong
 * variable named.
 */
#include "supervisor/identity.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

Test(slurm_identity, first_host_of_a_hostlist)
{
	const char *cases[][2] = {
		{ "n[1-2]", "n1" }, { "gpu-[007-009,012],login", "gpu-007" },
		{ "a3-node5", "a3-node5" }, { "x1,x2", "x1" },
		{ "rack[3,5]-n", "rack3" },
	};
	char out[64];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		cr_assert(identity_first_host(cases[i][0], out, sizeof(out)),
			  "%s", cases[i][0]);
		cr_expect_str_eq(out, cases[i][1]);
	}
	cr_expect_not(identity_first_host("", out, sizeof(out)));
	cr_expect_not(identity_first_host("n[a-b]", out, sizeof(out)));
}

static void set(const char *node, const char *proc, const char *nnodes,
		const char *list, const char *restarts)
{
	const char *names[] = { "SLURM_NODEID", "SLURM_PROCID", "SLURM_NNODES",
				"SLURM_JOB_NODELIST", "SLURM_RESTART_COUNT" };
	const char *values[] = { node, proc, nnodes, list, restarts };

	unsetenv("SLURM_NODELIST");
	for (size_t i = 0; i < 5; i++)
		if (values[i])
			setenv(names[i], values[i], 1);
		else
			unsetenv(names[i]);
}

/* identity_from_slurm for a job of slices x workers; its error or "". */
static const char *resolve(struct identity *id, unsigned slices,
			   unsigned workers)
{
	static struct err e;
	struct job j;

	job_init(&j);
	j.num_slices = slices;
	j.workers_per_slice = workers;
	err_init(&e);
	identity_init(id);
	if (identity_from_slurm(id, &j, &e))
		return e.msg;
	return "";
}

Test(slurm_identity, node_sizes_coordinator_and_restart_count)
{
	struct identity id;

	set("3", "3", "4", "gpu-[010-013]", "2");
	cr_assert_str_eq(resolve(&id, 2, 2), "");
	cr_expect_eq(id.slice, 1);
	cr_expect_eq(id.worker, 1);
	cr_expect_eq(id.process_id, 3);
	cr_expect_eq(id.num_processes, 4);
	cr_expect_eq(id.restart_attempt, 2);
	cr_expect_str_eq(id.name, "slice-1-worker-1");
	cr_assert_eq(id.megascale.n, 3);
	cr_expect_str_eq(id.megascale.v[0],
			 "MEGASCALE_COORDINATOR_ADDRESS=gpu-010");
	cr_expect_str_eq(id.megascale.v[1], "MEGASCALE_NUM_SLICES=2");
	cr_expect_str_eq(id.megascale.v[2], "MEGASCALE_SLICE_ID=1");
	identity_release(&id);

	/* The first allocation has no SLURM_RESTART_COUNT. */
	set("0", "0", "2", "n[1-2]", NULL);
	cr_assert_str_eq(resolve(&id, 1, 2), "");
	cr_expect_eq(id.restart_attempt, 0);
	identity_release(&id);
}

Test(slurm_identity, each_wrong_variable_is_named)
{
	struct identity id;

	set(NULL, "0", "2", "n[1-2]", NULL);
	cr_expect(strstr(resolve(&id, 1, 2), "SLURM_NODEID is not set"));
	identity_release(&id);
	set("1", "0", "2", "n[1-2]", NULL);
	cr_expect(strstr(resolve(&id, 1, 2), "one task per node"));
	identity_release(&id);
	set("0", "0", "3", "n[1-3]", NULL);
	cr_expect(strstr(resolve(&id, 1, 2), "SLURM_NNODES=3 but the job "
					     "has 2 workers"));
	identity_release(&id);
	set("0", "0", "2", NULL, NULL);
	cr_expect(strstr(resolve(&id, 1, 2), "SLURM_JOB_NODELIST"));
	identity_release(&id);
	set("0", "0", "2", "n[1-2]", "many");
	cr_expect(strstr(resolve(&id, 1, 2), "SLURM_RESTART_COUNT is 'many'"));
	identity_release(&id);
}
