/*
 * local.h (private to launcher/): the local provider. Every worker of a
 * run is a local process tree started the way a TPU VM starts it: the
 * same rendered startup script under a root prefix of its own
 * (SLICE_ROOT, SLICE_SYSTEMD=none), with a metadata endpoint of its own so
 * that preemption notices arrive as they do on a VM; the provider plays
 * systemd's part (restarting a supervisor that failed) and the cloud's
 * (preempting, resetting), and injects chaos. local_job.c is the
 * target's row (target.h): `slicectl job --target local` (or --local).
 */
#ifndef SLICECTL_LAUNCHER_LOCAL_H
#define SLICECTL_LAUNCHER_LOCAL_H

#include "launcher/job.h"

struct local_options {
	const char *dir;       /* workers' roots; NULL: $SLICECTL_HOME/local/RUN */
	/* "preempt:slice=1@20s,reset@45s,crash:worker=3@60s,hang:worker=2@80s",
	 * "random", or NULL for none. */
	const char *chaos;
	uint64_t seed;         /* for "random" */
	bool quiet;            /* no live timeline */
	int format;            /* 0 text, 1 json (timeline and summary as NDJSON) */
};

/* Runs the prepared run to its end (done, failed or stopped), printing the
 * timeline and then the summary (steps done, restarts by cause,
 * checkpoints committed, steps recomputed, time lost). Returns the exit
 * status: 0 done, 1 failed, 130 interrupted. */
int local_run(const struct prepared_run *run, const struct local_options *o);

/* A base port whose RUN_RENDEZVOUS_PORTS ports are all free on 127.0.0.1
 * now (local_port.c); COMMON_EUSAGE when there is none. */
int local_rendezvous_port(unsigned *out, struct err *e);

/* Parses a chaos spec; COMMON_EUSAGE naming the bad part. */
struct chaos_event {
	enum { CHAOS_PREEMPT, CHAOS_RESET, CHAOS_CRASH, CHAOS_HANG } kind;
	int slice, worker;     /* -1: every */
	uint64_t at_ms;        /* of training: while every trainer runs */
};
int chaos_parse(const char *spec, uint64_t seed, unsigned num_slices,
		unsigned workers_per_slice, struct chaos_event **out, size_t *n,
		struct err *e);

/*
 * The provider's metadata server (local_metadata.c): one port on
 * 127.0.0.1 per worker (process P = slice * workers_per_slice + worker),
 * served by one thread, answering what slice-supervisor reads on a TPU VM
 * (agent-worker-number, tpu-env, worker-network-endpoints, preempted,
 * maintenance-event, with wait_for_change long polls and ETags) under the
 * real server's Metadata-Flavor rules.
 */
struct local_metadata;
int local_metadata_start(struct local_metadata **out, unsigned num_slices,
			 unsigned workers_per_slice, struct err *e);
unsigned local_metadata_port(const struct local_metadata *m,
			     unsigned process);
/* Sets "instance/preempted" or "instance/maintenance-event" of process,
 * waking its long polls; COMMON_EINVAL for another path. */
int local_metadata_set(struct local_metadata *m, unsigned process,
		       const char *path, const char *value);
void local_metadata_stop(struct local_metadata *m);

#endif
