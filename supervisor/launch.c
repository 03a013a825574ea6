/*
 * launch.c: see launch.h.
 */
#include "supervisor/launch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

unsigned launch_port(unsigned base, int64_t generation)
{
	return base + (unsigned)((uint64_t)generation % RUN_RENDEZVOUS_PORTS);
}

int launch_env_put(struct strlist *env, const char *kv)
{
	size_t n = strcspn(kv, "=");

	for (size_t i = 0; i < env->n; i++)
		if (!strncmp(env->v[i], kv, n) && env->v[i][n] == '=') {
			char *copy = strdup(kv);

			if (!copy)
				return -1;
			free(env->v[i]);
			env->v[i] = copy;
			return 0;
		}
	return strlist_push(env, kv);
}

int launch_env(const struct identity *id, unsigned base, int64_t generation,
	       struct strlist *env)
{
	unsigned port = launch_port(base, generation);
	/* One process per host: the host's index is the process's. Under
	 * torchrun --nproc-per-node, torchrun sets its processes' own. */
	const struct {
		const char *name;
		unsigned value;
	} numbers[] = {
		{ "MASTER_PORT", port },
		{ "WORLD_SIZE", id->num_processes },
		{ "RANK", id->process_id },
		{ "LOCAL_RANK", 0 },
		{ "LOCAL_WORLD_SIZE", 1 },
		{ "NODE_RANK", id->process_id },
		{ "GROUP_RANK", id->process_id },
	};
	/* JAX splits host and port at the last colon: an IPv6 address
	 * goes in brackets. */
	bool v6 = strchr(id->coordinator, ':') != NULL;
	char kv[sizeof(id->coordinator) + 64];
	int rc;

	snprintf(kv, sizeof(kv), "MASTER_ADDR=%s", id->coordinator);
	rc = launch_env_put(env, kv);
	for (size_t i = 0; !rc && i < sizeof(numbers) / sizeof(*numbers);
	     i++) {
		snprintf(kv, sizeof(kv), "%s=%u", numbers[i].name,
			 numbers[i].value);
		rc = launch_env_put(env, kv);
	}
	snprintf(kv, sizeof(kv), "JAX_COORDINATOR_ADDRESS=%s%s%s:%u",
		 v6 ? "[" : "", id->coordinator, v6 ? "]" : "", port);
	return rc ? rc : launch_env_put(env, kv);
}
