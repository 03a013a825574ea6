/*
 * identity.h (private to supervisor/): which worker of the run this is.
 * On a TPU VM the metadata server says (agent-worker-number, tpu-env with
 * WORKER_ID and the MEGASCALE_* values of a multislice run); flags say it
 * for the local provider and override the metadata server. In a GKE pod
 * the downward API says it, through the environment the JobSet renders.
 */
#ifndef SLICECTL_SUPERVISOR_IDENTITY_H
#define SLICECTL_SUPERVISOR_IDENTITY_H

#include "common/common.h"
#include "run/run.h"

struct identity {
	unsigned slice, worker;
	unsigned num_slices, workers_per_slice;
	unsigned process_id, num_processes;
	char name[48];              /* slice-S-worker-W */
	struct strlist megascale;   /* "MEGASCALE_...=value" from tpu-env,
				       or from a pod's environment */
	unsigned restart_attempt;   /* a pod's JobSet restart attempt, a
				       Slurm job's restart count */
	char coordinator[256];      /* a host every worker reaches, where
				       process 0 of the group runs: the
				       trainers' rendezvous (MASTER_ADDR) */
	char host[64];              /* the machine, as its scheduler names
				       it (identity_host) */
};

void identity_init(struct identity *id);
void identity_release(struct identity *id);

/* slice and worker < 0: ask the metadata server. Sizes come from the job;
 * a worker outside them is an error naming both. The coordinator is then
 * tpu-env's MEGASCALE_COORDINATOR_ADDRESS (multislice), else the first
 * address of worker-network-endpoints; 127.0.0.1 when the flags said
 * both (this machine's workers). */
int identity_resolve(struct identity *id, const struct job *j, int slice,
		     int worker, struct err *e);

/*
 * In a pod: the slice from SLICE_POD_SLICE (the JobSet job index), the
 * worker from SLICE_POD_WORKER (else JOB_COMPLETION_INDEX, which the Job
 * controller sets), the restart attempt from SLICE_POD_RESTART_ATTEMPT
 * (0 when unset) and MEGASCALE_* as the container's environment has them.
 * The coordinator is SLICE_POD_COORDINATOR (the first pod's DNS name),
 * else MEGASCALE_COORDINATOR_ADDRESS; a job of more than one worker with
 * neither is an error. A missing or malformed value, or one outside the job, is COMMON_EINVAL
 * naming the variable.
 */
int identity_from_pod(struct identity *id, const struct job *j,
		      struct err *e);

/*
 * In a Slurm job step (one task per node, `srun --ntasks-per-node=1`):
 * the process from SLURM_NODEID (SLURM_PROCID must agree: one task per
 * node), the job's nodes from SLURM_NNODES (it must be the job's worker
 * count; slice = node / workers per slice), the restart attempt from
 * SLURM_RESTART_COUNT (0 when unset: the first allocation), and
 * MEGASCALE_COORDINATOR_ADDRESS the first node of SLURM_JOB_NODELIST
 * (else SLURM_NODELIST), which is also the coordinator. A missing or
 * malformed value is COMMON_EINVAL
 * naming the variable.
 */
int identity_from_slurm(struct identity *id, const struct job *j,
			struct err *e);

/*
 * In a Vertex AI custom job's replica: CLUSTER_SPEC's task says which
 * ("workerpool0" index 0 is process 0, "workerpool1" index i process
 * 1 + i), its cluster every replica's "host:port" (as many as the job has
 * workers; the coordinator is workerpool0[0]'s host). A spec of one
 * replica for a job of more workers is a TPU slice, whose hosts the
 * metadata server tells apart (identity_resolve). A missing or malformed
 * spec, or one of another shape, is COMMON_EINVAL saying so.
 */
int identity_from_vertex(struct identity *id, const struct job *j,
			 struct err *e);

/* id->host: SLICE_HOST_NAME when set (the local provider's VMs, tests),
 * else in a Slurm step SLURMD_NODENAME (several slurmd may share a
 * machine), in a pod SLICE_POD_NODE (its node), else the machine's name,
 * else the worker's. The quarantine blames and names hosts by it. */
void identity_host(struct identity *id, bool slurm, bool pod);

/* The first host of a Slurm hostlist ("gpu-[007-009,012],login" gives
 * "gpu-007"); false when list is not one. */
bool identity_first_host(const char *list, char *out, size_t len);

/* Parses tpu-env's "KEY: 'value'" lines into MEGASCALE_* entries and
 * the WORKER_ID / MEGASCALE_SLICE_ID numbers (-1 when absent). */
int identity_parse_tpu_env(const char *text, struct strlist *megascale,
			   int *worker_id, int *slice_id);

#endif
