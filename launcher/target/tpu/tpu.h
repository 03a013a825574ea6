/*
 * tpu.h (private to launcher/target/tpu/): the Cloud TPU target, runs on
 * the TPU VMs of a queued resource. tpu_job.c is `slicectl job` there,
 * tpu_watch.c its --watch, tpu_ops.c the row (target.h) with delete and
 * reset of the queued resource.
 */
#ifndef SLICECTL_LAUNCHER_TARGET_TPU_H
#define SLICECTL_LAUNCHER_TARGET_TPU_H

#include "cloud/cloud.h"
#include "launcher/job.h"

struct job_flags;

/* `slicectl job`'s submit slot for tpu-vm: its options, check and
 * submit (tpu_job.c). */
size_t tpu_job_options(struct job_flags *f, struct opt *opts);
int tpu_job_check(const struct job_flags *f);
int tpu_job_submit(struct job_flags *f);

/* --watch: stays with the queued resource spec of run until the run is
 * done or failed (or the recreate budget is spent). Returns the exit
 * status. */
int tpu_watch(struct tpu_client *c, const struct tpu_qr_spec *spec,
	      const struct job_flags *f, const struct prepared_run *run);

#endif
