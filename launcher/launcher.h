/*
 * launcher.h: slicectl's commands. Each lives in its own cmd_*.c with the
 * same signature, in the manner of git's builtin/: argv[0] is the command
 * name, the return value is the process exit status.
 */
#ifndef SLICECTL_LAUNCHER_H
#define SLICECTL_LAUNCHER_H

#include "common/common.h"

/* slicectl's own directory: $SLICECTL_HOME, else ~/.slicectl (known
 * hosts, the SSH key, the local provider's runs). Appends "/name" to b. */
int slicectl_home_path(struct buf *b, const char *name, struct err *e);

/* Exit statuses of our own (remote commands' statuses pass through),
 * besides common.h's EXIT_USAGE (2: bad flags or arguments, nothing was
 * started). */
enum {
	EXIT_STATE = 3,      /* a queued resource ended FAILED or SUSPENDED */
	EXIT_NOT_FOUND = 4,  /* no such queued resource, run, worker or log */
	EXIT_TIMEOUT = 124,  /* as timeout(1) */
	EXIT_INTERRUPT = 130,
	EXIT_FAILURE_SSH = 255, /* as ssh(1): a host could not be reached */
};

int cmd_run(int argc, char **argv);
int cmd_push(int argc, char **argv);
int cmd_create(int argc, char **argv);
int cmd_describe(int argc, char **argv);
int cmd_list(int argc, char **argv);
int cmd_delete(int argc, char **argv);
int cmd_reset(int argc, char **argv);
int cmd_wait(int argc, char **argv);
/* A run in its bucket (run_options.h): what its workers report, their
 * logs, a group restart, a graceful stop. */
int cmd_status(int argc, char **argv);
int cmd_logs(int argc, char **argv);
int cmd_restart(int argc, char **argv);
int cmd_stop(int argc, char **argv);
/* A run's history (events/) as a list, and as a picture. */
int cmd_events(int argc, char **argv);
int cmd_report(int argc, char **argv);
/* What share of a run's time trained the model (goodput.h). */
int cmd_goodput(int argc, char **argv);
/* A job handed to the workers' supervisors (job.h), on one of the
 * targets (launcher/target/target.h): tpu-vm (queued resources, the
 * default), gke (a JobSet), slurm (a batch job) or local (this
 * machine). */
int cmd_job(int argc, char **argv);
/* Says what was wrong with `slicectl job`'s flags (a printf format and
 * its arguments), pointing at its --help; returns EXIT_USAGE. For
 * cmd_job.c and the targets' check and submit slots. */
int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Google's announced maintenance of a run's (or queued resource's)
 * nodes, now, optionally right after a committed step. */
int cmd_maintenance(int argc, char **argv);
/* What `slicectl job --watch` does after submitting, for a run already
 * there, while holding the run's watch lease (watch_lease.h). */
int cmd_watch(int argc, char **argv);

#endif
