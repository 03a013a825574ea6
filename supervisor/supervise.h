/*
 * supervise.h (private to supervisor/): one worker's supervision, from
 * start to the end of the run or of this machine.
 */
#ifndef SLICECTL_SUPERVISOR_SUPERVISE_H
#define SLICECTL_SUPERVISOR_SUPERVISE_H

#include "common/common.h"

struct supervise_options {
	const char *run_url;
	const char *state_dir;    /* state file, checkpoints, spool, logs */
	int slice, worker;        /* -1: from the metadata server */
	bool no_metadata;         /* no preemption watch (not on a VM) */
	unsigned control_poll_ms; /* how often control.json is read */
};

/* Returns the process exit status: 0 when the run ended (done, failed,
 * stopped) or this worker left through the emergency path; 1 when it
 * could not start (its message logged). */
int supervise(const struct supervise_options *o);

#endif
