/*
 * watch_state.h (private to launcher/): what `slicectl job --watch` last
 * saw of a run's queued resource, kept as RUN/watch.json so that `slicectl
 * status` shows it from the bucket alone: the state of the queued
 * resource (between two flex-start windows, the next one's place in the
 * queue), when its window ends, the recreations so far, and how many of
 * control.json's quarantined hosts a recreation answered. Only the
 * launcher writes it; the supervisors never read it.
 */
#ifndef SLICECTL_LAUNCHER_WATCH_STATE_H
#define SLICECTL_LAUNCHER_WATCH_STATE_H

#include "cloud/cloud.h"

#define RUN_WATCH "watch.json"

struct watch_state {
	char queued_resource[64];
	char state[40];        /* the API's, "" when just asked for */
	char capacity[16];     /* tpu_qr's capacity */
	char window_end[40];   /* runDuration.terminationTime, "" none */
	unsigned recreated, budget;
	/* control.json's quarantined hosts, counted from the first, that a
	 * recreation replaced; absent (an older writer) is 0. */
	unsigned quarantines_acted;
	char time[40];         /* RFC 3339, when it was written */
};

/* Writes w (its time set to now), replacing what was there. */
int watch_state_put(struct store *s, struct watch_state *w, struct err *e);
/* Reads it back: CLOUD_ENOTFOUND when no watch wrote one, CLOUD_ECORRUPT
 * when it is not what watch_state_put writes. */
int watch_state_get(struct store *s, struct watch_state *out, struct err *e);

#endif
