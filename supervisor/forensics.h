/*
 * forensics.h (private to supervisor/): what explains a hung trainer,
 * gathered before it is ended: the stacks of every thread of every
 * process of its group (py-spy when on PATH; the kernel's stack and wchan
 * of every task from /proc), the hang signal's output (Python's
 * faulthandler prints its stacks into the trainer's output) and the
 * output's last lines, as one text bounded in size and time.
 */
#ifndef SLICECTL_SUPERVISOR_FORENSICS_H
#define SLICECTL_SUPERVISOR_FORENSICS_H

#include "supervisor/trainer.h"

#include <sys/types.h>

/* The object's bound, and the time all of it may take. */
#define FORENSICS_MAX_BYTES ((size_t)256 << 10)
#define FORENSICS_BUDGET_MS 5000

struct forensics_request {
	const char *header;    /* its first lines (run, worker, why) */
	int signal;            /* job.json's hang_signal; 0 none */
	const char *log_path;  /* where the trainer's output goes */
	off_t log_from;        /* this trainer's output starts there */
	size_t max_bytes;      /* 0: FORENSICS_MAX_BYTES */
	unsigned budget_ms;    /* 0: FORENSICS_BUDGET_MS */
};

/* Appends the forensics of trainer t (alive, its process group t->pid)
 * to out, draining its output into its log meanwhile. COMMON_ENOMEM when
 * memory ran out (out holds what fitted). */
int forensics_collect(const struct forensics_request *r, struct trainer *t,
		      struct buf *out, struct err *e);

#endif
