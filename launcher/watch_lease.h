/*
 * watch_lease.h (private to launcher/): the lease that lets one watcher
 * of a run act at a time (`slicectl job --watch`, `slicectl watch`), kept
 * as RUN/watch.lease and changed only by compare-and-swap on the object's
 * generation (as control.json is). The holder renews it every lease/3 on
 * a thread of its own; another watcher waits, saying who holds it and
 * when it expires, and takes it over once it has expired. A holder that
 * fails a renewal, or finds another holder there, has lost it at once.
 *
 * The record also carries the recreation under way (struct lease_note),
 * written before the first step of one and cleared after the last, so
 * that a watcher taking over a dead holder's lease finishes that
 * recreation instead of starting a second.
 */
#ifndef SLICECTL_LAUNCHER_WATCH_LEASE_H
#define SLICECTL_LAUNCHER_WATCH_LEASE_H

#include "cloud/cloud.h"

#include <stdbool.h>
#include <stdint.h>

#define RUN_WATCH_LEASE "watch.lease"
/* --lease's default and bounds. */
#define WATCH_LEASE_DEFAULT_MS 30000u
#define WATCH_LEASE_MIN_MS 300u
#define WATCH_LEASE_MAX_MS 3600000u

/* NULL when ms is a lease --lease may give, else what is wrong with it. */
const char *watch_lease_bad_ms(unsigned ms);

/* A recreation under way: what is recreated (a queued resource's id, the
 * CustomJob that ended), the run's generation it saw before bumping it
 * (a second bump from the same generation collapses into the first), why,
 * the queued resource's create body (NULL: none needed), and the
 * createTime of the queued resource it replaces: one begun while that was
 * still ACTIVE (a quarantine) tells it from the one asked for again. */
struct lease_note {
	char about[512];      /* "" no recreation under way */
	int64_t from_generation;
	char why[160];
	char *body;           /* malloc'd */
	char replaces[40];    /* "" none known */
};

void lease_note_release(struct lease_note *n);

struct watch_lease;

/* A lease of lease_ms on the run at run_url, not yet taken; start_ms
 * (mono_ms()) times what it says (job_say). */
int watch_lease_open(const char *run_url, unsigned lease_ms,
		     uint64_t start_ms, struct watch_lease **out,
		     struct err *e);
/* Stops renewing and, when still held, deletes the record so that a
 * waiting watcher takes over at once. NULL is fine. */
void watch_lease_close(struct watch_lease *l);

/* Returns once the lease is ours: at once when the record is absent,
 * ours, or expired; otherwise waits, saying who holds it and when it
 * expires. A record that is no lease (bad JSON, missing fields) is said
 * so and taken over once it has stayed so for a lease. Returns 0, or a
 * store error (e set) that lasted. */
int watch_lease_take(struct watch_lease *l, struct err *e);
/* Whether the lease is ours with time left, as the renewals say. */
bool watch_lease_held(struct watch_lease *l);
/* Renews the lease now, before an action: 0 means it is ours for a whole
 * lease from now; anything else (e says why) means it is lost: do
 * nothing, and watch_lease_take again. note (NULL: the one there stays)
 * becomes the recreation under way; an empty about clears it. */
int watch_lease_act(struct watch_lease *l, const struct lease_note *note,
		    struct err *e);
/* A copy of the recreation under way (about "" when none), as the lease
 * record had it when taken or as last written. Release it. */
int watch_lease_note(struct watch_lease *l, struct lease_note *out);

#endif
