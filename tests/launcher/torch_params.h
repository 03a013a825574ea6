/*
 * torch_params.h: what the tests of examples/torch (test_torch.c on the
 * local target, test_slurm_torch.c) need: an interpreter that imports
 * torch, the final parameters every rank of a run logged, and ports.
 * Failures end the calling criterion test.
 */
#ifndef SLICECTL_TESTS_LAUNCHER_TORCH_PARAMS_H
#define SLICECTL_TESTS_LAUNCHER_TORCH_PARAMS_H

/* The first of /usr/bin/python3 (Debian's, where python3-torch goes) and
 * python3 on PATH that imports torch.distributed; skips the test, saying
 * why, when none does. Static storage. */
const char *torch_python(void);

/* Every "final params: SHA256" line the workers of BUCKET/RUN logged (a
 * run of slices x workers hosts, procs ranks each): one per rank, all the
 * same; returns it (malloc'd). */
char *torch_final_params(const char *bucket, const char *run,
			 unsigned slices, unsigned workers, unsigned procs);

/* A --rendezvous-port base whose 16 ports are free on 127.0.0.1 now and
 * reserved for this process until it exits, against every other test of
 * the build that asks (static storage): tests run side by side on one
 * loopback, in PID namespaces of their own. From 30000, away from
 * 29500 on, which local runs pick, and below the ephemeral ports. */
const char *torch_rendezvous_base(void);

#endif
