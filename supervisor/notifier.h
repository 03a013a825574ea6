/*
 * notifier.h (private to supervisor/): process 0's notifications of the
 * run's state changes to job.json's "notify" URLs (docs/DESIGN.md
 * "Notifications").
 *
 * A thread of its own, which never touches the supervisor's loop: every
 * period it reads the history's new objects (events_follow), finds the
 * notices in it (notices_of), and sends each one not sent yet: it claims
 * the notice's record notify/ID create-only, POSTs the body to every URL
 * (each with a few tries, backoff and a per-try time limit), then marks
 * the record sent (or given up). A record that exists already is another
 * sender's: sent, or being sent, and taken over only when its claim is
 * older than NOTIFIER_LEASE_S (its sender died mid-send). A receiver that
 * is down or stalls costs log warnings and this thread's time, never the
 * run's.
 */
#ifndef SLICECTL_SUPERVISOR_NOTIFIER_H
#define SLICECTL_SUPERVISOR_NOTIFIER_H

#include "run/run.h"

#include <stdint.h>

/* How often the history is read; SLICE_NOTIFY_PERIOD_MS overrides it. */
#define NOTIFIER_PERIOD_MS 5000u
/* One POST: its tries, all of them within NOTIFIER_SEND_MS, each within
 * NOTIFIER_TRY_MS (SLICE_NOTIFY_TRY_MS overrides it). */
#define NOTIFIER_TRIES 5u
#define NOTIFIER_SEND_MS 60000u
#define NOTIFIER_TRY_MS 10000u
/* A claim older than this whose record still says "sending" is a dead
 * sender's: twice a send's whole budget, so a live sender is never
 * taken over. SLICE_NOTIFY_LEASE_S overrides it. */
#define NOTIFIER_LEASE_S 150u

/* What the supervisor's exit waits at most for the last notices: when
 * the run ended, and when it leaves a run that goes on. */
#define NOTIFIER_DRAIN_MS 20000u
#define NOTIFIER_LEAVE_MS 5000u

struct notifier;

/* Starts sending the notifications of j's run (at run_url) as `who` (the
 * claims' sender, "slice-S-worker-W"); j must outlive it. */
int notifier_start(struct notifier **out, const char *run_url,
		   const struct job *j, const char *who, struct err *e);
/* Reads the history once more and sends what it holds, waiting for the
 * run's own end event when control.json says the run ended, then ends
 * the thread; a send still going at deadline_ms (mono_ms; at most
 * NOTIFIER_LEAVE_MS from now when the run goes on) is cancelled, and its
 * claim left for a later sender. NULL is fine. */
void notifier_stop(struct notifier *x, uint64_t deadline_ms);

#endif
