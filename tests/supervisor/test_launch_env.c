/*
 * The launch contract (supervisor/launch.c, the coordinator of
 * supervisor/identity.c): what PyTorch's env:// rendezvous and JAX's
 * jax.distributed.initialize() read, from the identity and the
 * generation; then two real supervisors whose trainer records its
 * environment, fails once so the group restarts, and finishes: every
 * variable is there once, with the right value, the job's own env wins,
 * and MASTER_PORT differs between the generations.
 */
#include "supervisor/identity.h"
#include "supervisor/launch.h"
#include "tests/harness/harness.h"
#include "tests/supervisor/run_check.h"

#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

/* The value of name in env (NULL-terminated "K=V"), asserting it is
 * there exactly once. */
static const char *value_of(char *const *env, const char *name)
{
	size_t n = strlen(name);
	const char *found = NULL;

	for (size_t i = 0; env[i]; i++)
		if (!strncmp(env[i], name, n) && env[i][n] == '=') {
			cr_assert_null(found, "%s is set twice", name);
			found = env[i] + n + 1;
		}
	cr_assert_not_null(found, "%s is not set", name);
	return found;
}

static void job_of(struct job *j, unsigned slices, unsigned workers)
{
	job_init(j);
	j->num_slices = slices;
	j->workers_per_slice = workers;
}

Test(launch, ports_never_repeat_between_consecutive_generations)
{
	cr_expect_eq(launch_port(29500, 1), 29501);
	cr_expect_eq(launch_port(29500, 15), 29515);
	cr_expect_eq(launch_port(29500, 16), 29500);
	for (int64_t g = 1; g < 100; g++) {
		unsigned p = launch_port(31000, g);

		cr_expect_neq(p, launch_port(31000, g + 1));
		cr_expect(p >= 31000 && p < 31000 + RUN_RENDEZVOUS_PORTS);
	}
}

Test(launch, the_variables_of_process_3_of_4)
{
	struct identity id;
	struct strlist env;
	struct job j;
	struct err e;

	job_of(&j, 2, 2);
	identity_init(&id);
	cr_assert_eq(identity_resolve(&id, &j, 1, 1, &e), 0, "%s", e.msg);
	cr_expect_str_eq(id.coordinator, "127.0.0.1");
	strlist_init(&env);
	cr_assert_eq(strlist_push(&env, "RANK=stale"), 0);
	cr_assert_eq(launch_env(&id, 29500, 3, &env), 0);
	cr_assert_eq(strlist_push(&env, ""), 0);
	free(env.v[env.n - 1]);
	env.v[env.n - 1] = NULL;
	cr_expect_str_eq(value_of(env.v, "MASTER_ADDR"), "127.0.0.1");
	cr_expect_str_eq(value_of(env.v, "MASTER_PORT"), "29503");
	cr_expect_str_eq(value_of(env.v, "WORLD_SIZE"), "4");
	cr_expect_str_eq(value_of(env.v, "RANK"), "3");
	cr_expect_str_eq(value_of(env.v, "LOCAL_RANK"), "0");
	cr_expect_str_eq(value_of(env.v, "LOCAL_WORLD_SIZE"), "1");
	cr_expect_str_eq(value_of(env.v, "NODE_RANK"), "3");
	cr_expect_str_eq(value_of(env.v, "GROUP_RANK"), "3");
	cr_expect_str_eq(value_of(env.v, "JAX_COORDINATOR_ADDRESS"),
			 "127.0.0.1:29503");
	strlist_release(&env);

	/* JAX splits at the last colon: an IPv6 host in brackets. */
	snprintf(id.coordinator, sizeof(id.coordinator), "fd00::5");
	strlist_init(&env);
	cr_assert_eq(launch_env(&id, 29500, 17, &env), 0);
	cr_expect_str_eq(env.v[env.n - 1],
			 "JAX_COORDINATOR_ADDRESS=[fd00::5]:29501");
	strlist_release(&env);
	identity_release(&id);
	job_release(&j);
}

static void clear_pod_env(void)
{
	unsetenv("SLICE_POD_COORDINATOR");
	unsetenv("MEGASCALE_COORDINATOR_ADDRESS");
	unsetenv("JOB_COMPLETION_INDEX");
	setenv("SLICE_POD_SLICE", "1", 1);
	setenv("SLICE_POD_WORKER", "0", 1);
}

Test(launch, a_pods_coordinator)
{
	struct identity id;
	struct job j;
	struct err e;

	job_of(&j, 2, 1);
	clear_pod_env();
	identity_init(&id);
	cr_expect_neq(identity_from_pod(&id, &j, &e), 0);
	cr_expect(strstr(e.msg, "SLICE_POD_COORDINATOR"), "%s", e.msg);
	identity_release(&id);

	/* MEGASCALE_COORDINATOR_ADDRESS, without a port it may carry. */
	setenv("MEGASCALE_COORDINATOR_ADDRESS", "run-slice-0-0.run:8080", 1);
	cr_assert_eq(identity_from_pod(&id, &j, &e), 0, "%s", e.msg);
	cr_expect_str_eq(id.coordinator, "run-slice-0-0.run");
	identity_release(&id);

	/* The first pod's name, which GKE's render gives, comes first. */
	setenv("SLICE_POD_COORDINATOR", "run-slice-0-0.run-gpu", 1);
	cr_assert_eq(identity_from_pod(&id, &j, &e), 0, "%s", e.msg);
	cr_expect_str_eq(id.coordinator, "run-slice-0-0.run-gpu");
	identity_release(&id);
	clear_pod_env();
	job_release(&j);
}

Test(launch, a_slurm_jobs_coordinator_is_its_first_node)
{
	struct identity id;
	struct job j;
	struct err e;

	job_of(&j, 1, 2);
	setenv("SLURM_NODEID", "1", 1);
	setenv("SLURM_PROCID", "1", 1);
	setenv("SLURM_NNODES", "2", 1);
	setenv("SLURM_JOB_NODELIST", "gpu-[007-008]", 1);
	identity_init(&id);
	cr_assert_eq(identity_from_slurm(&id, &j, &e), 0, "%s", e.msg);
	cr_expect_str_eq(id.coordinator, "gpu-007");
	identity_release(&id);
	job_release(&j);
}

/* ---- two supervisors, two generations ---- */

static char dir[HARNESS_PATH];
static pid_t sup[2];

static void down(void)
{
	end_supervisors(sup, 2, dir);
}

/* DIR/env-P-G, as trainer P of generation G wrote it (env -0 output),
 * as a NULL-terminated array; *text holds the strings. */
static char **recorded_env(unsigned p, unsigned g, char **text)
{
	char path[HARNESS_PATH + 32];
	size_t len = 0, n = 0;
	char **v;
	FILE *f;

	snprintf(path, sizeof(path), "%s/env-%u-%u", dir, p, g);
	f = fopen(path, "r");
	cr_assert_not_null(f, "no %s", path);
	*text = NULL;
	cr_assert_geq(getdelim(text, &len, EOF, f), 0);
	len = (size_t)ftell(f);
	fclose(f);
	v = calloc(len + 1, sizeof(*v));
	cr_assert_not_null(v);
	for (size_t i = 0; i < len; i += strlen(*text + i) + 1)
		v[n++] = *text + i;
	return v;
}

Test(launch, every_generation_gets_the_contract_and_a_new_port,
     .fini = down, .timeout = 120)
{
	char job[2048], path[HARNESS_PATH + 64], url[HARNESS_PATH + 16];
	char ports[2][16];

	cr_assert_eq(make_temp_dir(dir, sizeof(dir), "launch"), 0);
	cr_assert_eq(sh("mkdir -p '%s/run'", dir), 0);
	/* Generation 1 fails once both its trainers have written their
	 * environment (on a loaded machine the restart came before the
	 * second one started, and it went straight to generation 2), so
	 * the group restarts; 2 finishes. */
	snprintf(job, sizeof(job),
		 "{\"name\": \"contract\", \"command\": \"env -0 > "
		 "%s/env-$SLICE_PROCESS_ID-$SLICE_GENERATION; "
		 "[ $SLICE_GENERATION -ge 2 ] && exit 0; "
		 "until [ -e %s/env-0-1 ] && [ -e %s/env-1-1 ]; do sleep 0.1; "
		 "done; exit 1\", \"workers_per_slice\": 2, "
		 "\"heartbeat_s\": 1, \"grace_s\": 2, \"rendezvous_port\": "
		 "31000, \"env\": {\"LOCAL_WORLD_SIZE\": \"the-jobs\"}}",
		 dir, dir, dir);
	snprintf(path, sizeof(path), "%s/run/job.json", dir);
	write_text(path, job);
	snprintf(url, sizeof(url), "file://%s/run", dir);
	for (unsigned i = 0; i < 2; i++) {
		char state[HARNESS_PATH + 16], log[HARNESS_PATH + 16];

		snprintf(state, sizeof(state), "%s/w%u", dir, i);
		snprintf(log, sizeof(log), "%s/sup%u.log", dir, i);
		sup[i] = spawn_supervisor(url, state, i, log, NULL);
	}
	for (int i = 0; i < 2; i++)
		cr_assert_eq(wait_child(&sup[i], 90), 0, "supervisor %d: %s",
			     i, supervisor_log(dir, (unsigned)i));
	snprintf(path, sizeof(path), "%s/run", dir);
	assert_run_control(path, 2, "done", NULL);
	for (unsigned g = 1; g <= 2; g++)
		for (unsigned p = 0; p < 2; p++) {
			char *text, **env = recorded_env(p, g, &text);
			char rank[8];

			snprintf(rank, sizeof(rank), "%u", p);
			cr_expect_str_eq(value_of(env, "MASTER_ADDR"),
					 "127.0.0.1");
			cr_expect_str_eq(value_of(env, "WORLD_SIZE"), "2");
			cr_expect_str_eq(value_of(env, "RANK"), rank);
			cr_expect_str_eq(value_of(env, "NODE_RANK"), rank);
			cr_expect_str_eq(value_of(env, "GROUP_RANK"), rank);
			cr_expect_str_eq(value_of(env, "LOCAL_RANK"), "0");
			cr_expect_str_eq(value_of(env, "LOCAL_WORLD_SIZE"),
					 "the-jobs");
			snprintf(ports[g - 1], sizeof(ports[0]), "%s",
				 value_of(env, "MASTER_PORT"));
			cr_expect_str_eq(ports[g - 1], g == 1 ? "31001"
							      : "31002");
			cr_expect_str_eq(value_of(env,
						  "JAX_COORDINATOR_ADDRESS"),
					 g == 1 ? "127.0.0.1:31001"
						: "127.0.0.1:31002");
			free(env);
			free(text);
		}
	cr_expect_str_neq(ports[0], ports[1]);
}
