/*
 * deadline.h (private to supervisor/): when the run's capacity goes away,
 * and how long before it a supervisor must start its last checkpoint.
 *
 * A flex-start queued resource's run ends at runDuration.terminationTime;
 * a node's announced maintenance starts at its window. Worker 0 of a run
 * on a queued resource (job.json's "tpu") reads both through the TPU API
 * at start and every poll period, and publishes the nearest in
 * control.json ("deadline"); every supervisor sees it in the control.json
 * poll it makes anyway, so a run of 4096 workers costs the TPU API one
 * reader, not 4096.
 */
#ifndef SLICECTL_SUPERVISOR_DEADLINE_H
#define SLICECTL_SUPERVISOR_DEADLINE_H

#include "cloud/cloud.h"
#include "run/run.h"

/* Between the trainer's exit and the deadline, besides the upload: the
 * control.json poll, a late heartbeat, clocks a little apart. */
#define DEADLINE_MARGIN_MS 10000u
/* How often worker 0 reads the queued resource; SLICE_DEADLINE_POLL_MS
 * overrides it (tests). */
#define DEADLINE_POLL_MS 180000u

/*
 * The nearest deadline of queued resource q whose nodes (in q's node
 * order, nnodes of them; a node that could not be read is zeroed) are
 * given: the run's end while q is ACTIVE with a termination time, and
 * each announced maintenance's window start. kind "" when none.
 */
void deadline_of(const struct tpu_qr *q, const struct tpu_node *nodes,
		 size_t nnodes, struct control_deadline *out);

/* How long before a deadline a supervisor starts its last checkpoint:
 * the trainer's grace period, the upload it measured for its last step,
 * and the margin. */
uint64_t deadline_lead_ms(unsigned grace_s, uint64_t upload_ms);

/*
 * Milliseconds from now_ms (Unix time in ms) to d's time, negative when
 * it passed; INT64_MAX when d is none or already checkpointed for.
 */
int64_t deadline_left_ms(const struct control_deadline *d, uint64_t now_ms);

/* Unix time in milliseconds. */
uint64_t deadline_now_ms(void);

/* Worker 0's reader: a thread that publishes the job's queued resource's
 * deadline in run_url's control.json at start and every poll period.
 * Stopping it waits for a request in flight. */
struct deadline_poller;

int deadline_poller_start(struct deadline_poller **out, const char *run_url,
			  const struct job *j, struct err *e);
void deadline_poller_stop(struct deadline_poller *p); /* NULL is fine */

#endif
