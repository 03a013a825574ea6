/*
 * slice-supervisor --vertex's identity from CLUSTER_SPEC
 * (identity_from_vertex): workerpool0's replica is process 0 and the
 * coordinator, workerpool1's index i is process 1 + i; the launch
 * contract follows (MASTER_ADDR the primary's host); a spec of another
 * shape is named.
 */
#include "supervisor/identity.h"
#include "supervisor/launch.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#define CLUSTER                                                        \
	"{\"cluster\": {\"workerpool0\": [\"cmle-training-wp0:2222\"], " \
	"\"workerpool1\": [\"wp1-0:2222\", \"wp1-1:2222\"]}, "           \
	"\"environment\": \"cloud\", "

/* identity_from_vertex under spec for a job of workers; its error or "". */
static const char *resolve(struct identity *id, const char *spec,
			   unsigned workers)
{
	static struct err e;
	struct job j;

	job_init(&j);
	j.num_slices = 1;
	j.workers_per_slice = workers;
	err_init(&e);
	identity_init(id);
	if (spec)
		setenv("CLUSTER_SPEC", spec, 1);
	else
		unsetenv("CLUSTER_SPEC");
	if (identity_from_vertex(id, &j, &e))
		return e.msg;
	return "";
}

static const char *env_value(const struct strlist *env, const char *name)
{
	size_t n = strlen(name);

	for (size_t i = 0; i < env->n; i++)
		if (!strncmp(env->v[i], name, n) && env->v[i][n] == '=')
			return env->v[i] + n + 1;
	return NULL;
}

Test(vertex_identity, pools_index_and_coordinator)
{
	struct identity id;
	struct strlist env;

	cr_assert_str_eq(resolve(&id, CLUSTER "\"task\": {\"type\": "
					      "\"workerpool1\", \"index\": 1}}",
				 3), "");
	cr_expect_eq(id.process_id, 2);
	cr_expect_eq(id.num_processes, 3);
	cr_expect_str_eq(id.name, "slice-0-worker-2");
	cr_expect_str_eq(id.coordinator, "cmle-training-wp0");
	strlist_init(&env);
	cr_assert_eq(launch_env(&id, 8476, 1, &env), 0);
	cr_expect_str_eq(env_value(&env, "MASTER_ADDR"), "cmle-training-wp0");
	cr_expect_str_eq(env_value(&env, "RANK"), "2");
	cr_expect_str_eq(env_value(&env, "WORLD_SIZE"), "3");
	strlist_release(&env);
	identity_release(&id);

	cr_assert_str_eq(resolve(&id, CLUSTER "\"task\": {\"type\": "
					      "\"workerpool0\", \"index\": 0}}",
				 3), "");
	cr_expect_eq(id.process_id, 0);
	identity_release(&id);

	cr_assert_str_eq(resolve(&id, "{\"cluster\": {\"workerpool0\": "
				      "[\"[fd00::1]:2222\"]}, \"task\": "
				      "{\"type\": \"workerpool0\", \"index\": "
				      "0}}", 1), "");
	cr_expect_str_eq(id.coordinator, "fd00::1");
	identity_release(&id);
}

Test(vertex_identity, other_shapes_are_named)
{
	struct identity id;

	cr_expect(strstr(resolve(&id, NULL, 3), "CLUSTER_SPEC is not set"));
	identity_release(&id);
	cr_expect(strstr(resolve(&id, "{", 3), "not a JSON object"));
	identity_release(&id);
	cr_expect(strstr(resolve(&id, CLUSTER "\"task\": {}}", 3),
			 "has no task"));
	identity_release(&id);
	cr_expect(strstr(resolve(&id, CLUSTER "\"task\": {\"type\": "
					     "\"workerpool2\", \"index\": 0}}",
				 3),
			 "the primary alone in workerpool0"));
	identity_release(&id);
	cr_expect(strstr(resolve(&id, CLUSTER "\"task\": {\"type\": "
					     "\"workerpool1\", \"index\": 0}}",
				 4),
			 "lists 3 replicas but the job has 4 workers"));
	identity_release(&id);
}
