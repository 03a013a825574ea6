/*
 * run/events_read.h (private to run/): reading the history's objects
 * back and putting their events in time order, shared by events_list
 * (every object, each call) and the follower (events_follow.c: only the
 * objects it has not read yet).
 */
#ifndef SLICECTL_RUN_EVENTS_READ_H
#define SLICECTL_RUN_EVENTS_READ_H

#include "run/run.h"

#include <stddef.h>

#define EVENTS_PREFIX "events/"

/* Events read so far. order keeps, per event, where it was read (its
 * object's reading index << 20 | its index in the object): the tie
 * breaker after the time and the writer. */
struct events_read {
	struct event *v;
	size_t *order;
	size_t n, cap;
	size_t objects;          /* objects read: the next one's index */
};

/* Appends the events of object name (relative to s). An object deleted
 * since it was listed appends nothing and is no error. */
int events_read_object(struct store *s, const char *name,
		       struct events_read *rd, struct err *e);
/* Puts rd's events in time order (ties: by writer, then as read) and
 * drops each event equal to the byte to the one before it: a batch
 * written twice (its write succeeded, the answer was lost, the writer
 * tried again under the next name) counts once. */
int events_read_sort(struct events_read *rd, struct err *e);
void events_read_release(struct events_read *rd);

#endif
