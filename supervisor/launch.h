/*
 * launch.h (private to supervisor/): the launch contract PyTorch and JAX
 * read (docs/DESIGN.md, "Trainer environment"): torchrun's names for the
 * group's rendezvous, size and ranks, and JAX's coordinator address, all
 * from the worker's identity and the generation.
 */
#ifndef SLICECTL_SUPERVISOR_LAUNCH_H
#define SLICECTL_SUPERVISOR_LAUNCH_H

#include "common/common.h"
#include "supervisor/identity.h"

#include <stdint.h>

/* Generation's rendezvous port: base + generation % RUN_RENDEZVOUS_PORTS,
 * so two generations in a row never share one. */
unsigned launch_port(unsigned base, int64_t generation);

/* Sets "NAME=value" in env, replacing an entry of the same name: a later
 * setting wins, and no name is there twice (a program that reads the
 * environment may take either). -1 when out of memory. */
int launch_env_put(struct strlist *env, const char *kv);

/* Puts MASTER_ADDR, MASTER_PORT, WORLD_SIZE, RANK, LOCAL_RANK,
 * LOCAL_WORLD_SIZE, NODE_RANK, GROUP_RANK and JAX_COORDINATOR_ADDRESS for
 * id at generation into env (launch_env_put). -1 when out of memory. */
int launch_env(const struct identity *id, unsigned base, int64_t generation,
	       struct strlist *env);

#endif
