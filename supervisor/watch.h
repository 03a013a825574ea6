/*
 * watch.h (private to supervisor/): preemption and maintenance notices
 * from the metadata server. One thread per value long-polls it
 * (wait_for_change with ETags), so a notice arrives within a round trip;
 * the supervisor's loop hears of it through notify_fd.
 */
#ifndef SLICECTL_SUPERVISOR_WATCH_H
#define SLICECTL_SUPERVISOR_WATCH_H

#include "common/common.h"

struct watch;

enum watch_event {
	WATCH_PREEMPTED = 1,    /* instance/preempted became TRUE */
	WATCH_MAINTENANCE = 2,  /* instance/maintenance-event not NONE */
};

/* Starts both watchers; each writes a byte to notify_fd on a notice. */
int watch_start(struct watch **out, int notify_fd, struct err *e);
/* The notices so far (a mask of watch_event), described in what. */
unsigned watch_events(struct watch *w, char *what, size_t len);
/* Cancels the long-polls and joins the threads. NULL is fine. */
void watch_stop(struct watch *w);

#endif
