/*
 * exporter.h (private to supervisor/): worker 0's export of the run's
 * goodput to Cloud Monitoring (job.json's "monitoring"; docs/DESIGN.md
 * "Cloud Monitoring export").
 *
 * A thread of its own, which never touches the supervisor's loop: every
 * period it reads the history's new objects (events_follow), computes
 * goodput as `slicectl goodput` does and writes the 13 points of the
 * run's series. A Monitoring outage or a slow server only costs points:
 * it is said once, and a point not written within its period is dropped,
 * never queued (the API refuses points older than a series' last).
 */
#ifndef SLICECTL_SUPERVISOR_EXPORTER_H
#define SLICECTL_SUPERVISOR_EXPORTER_H

#include "run/run.h"

/* The period; SLICE_MONITORING_PERIOD_S overrides it, never below the
 * API's one point per series per 10 s. */
#define EXPORTER_PERIOD_S 60u
#define EXPORTER_MIN_PERIOD_S 10u

struct exporter;

/* Starts the export of j's run (at run_url) to j->monitoring_project; j
 * must outlive it. */
int exporter_start(struct exporter **out, const char *run_url,
		   const struct job *j, struct err *e);
/* Cancels a write in flight and ends the thread; a history read in
 * flight is waited for, as the syncer's are. NULL is fine. */
void exporter_stop(struct exporter *x);

#endif
