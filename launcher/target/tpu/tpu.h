/*
 * tpu.h (private to launcher/target/tpu/): the Cloud TPU target, runs on
 * the TPU VMs of a queued resource. tpu_job.c is `slicectl job` there,
 * tpu_watch.c its --watch, tpu_ops.c the row (target.h) with delete and
 * reset of the queued resource.
 */
#ifndef SLICECTL_LAUNCHER_TARGET_TPU_H
#define SLICECTL_LAUNCHER_TARGET_TPU_H

#include "cloud/cloud.h"
#include "launcher/job.h"

struct job_flags;

/* `slicectl job`'s submit slot for tpu-vm: its options, check and
 * submit (tpu_job.c). */
size_t tpu_job_options(struct job_flags *f, struct opt *opts);
int tpu_job_check(const struct job_flags *f);
int tpu_job_submit(struct job_flags *f);

struct watch_flags;
struct watch_lease;

/* --watch, and `slicectl watch` of a run on a queued resource: stays
 * with queued resource id of the run at run_url (j its job.json) until
 * the run is done or failed (or the recreate budget is spent), acting
 * only while it holds the run's watch lease. spec is what `slicectl job`
 * asked for; NULL: a recreation asks again for what the queued resource
 * itself says it is. Returns the exit status. */
int tpu_watch(struct tpu_client *c, const char *id,
	      const struct tpu_qr_spec *spec, const char *run_url,
	      const struct job *j, const struct watch_flags *f);

/* What tpu_watch.c's loop and tpu_recreate.c share. */
struct tpu_watch {
	struct tpu_client *c;
	const char *id;
	const struct tpu_qr_spec *spec;  /* NULL: from the resource */
	struct store *s;
	struct watch_lease *lease;
	struct job budget_of;    /* the run's restart budgets alone */
	unsigned budget, recreated;
	uint64_t start_ms, unit_ms;
	struct backoff bo;
	char qr_state[64], run_state[64];
	char window_end[40];     /* the flex-start window's, "" none */
	int64_t generation;
	unsigned quarantines_acted; /* watch.json's quarantines_acted */
};

/* RUN/watch.json for slicectl status (watch_state.h), q NULL when the
 * queued resource was just asked for again; its counts caught up first. */
struct tpu_qr;
void tpu_watch_publish(struct tpu_watch *w, const struct tpu_qr *q);
/* The counts watch.json keeps, where an earlier watcher made more. */
void tpu_watch_catch_up(struct tpu_watch *w);

/* Recreates the queued resource, now SUSPENDED or FAILED (q), or gone
 * (q NULL) while a recreation is under way, seen the control.json read
 * before: the run's generation bumped, the queued resource deleted and
 * asked for again, each step only while the lease is held and the whole
 * kept in the lease record first, so that a watcher taking over finishes
 * it rather than starting another. Returns -1 to go on watching, or an
 * exit status. */
int tpu_recreate(struct tpu_watch *w, const struct control *seen,
		 const struct tpu_qr *q, const char *why);
/* A recreation under way whose queued resource exists again (the holder
 * before died after asking for it): counted, recorded and cleared, seen
 * the control.json read before. Whether one was under way. */
bool tpu_recreate_landed(struct tpu_watch *w, const struct control *seen,
			 const struct tpu_qr *q);
/* Whether a recreation under way began from q, still there (its holder
 * died, or lost the lease, before deleting it). */
bool tpu_recreate_begun_from(struct tpu_watch *w, const struct tpu_qr *q);
/* Whether a recreation of the queued resource is under way. */
bool tpu_recreate_pending(struct tpu_watch *w);

/* tpu_quarantine.c: whether c (running) names a quarantined host no
 * recreation answered yet while q is ACTIVE, why[cap] then naming the
 * host and why it was quarantined. */
bool tpu_quarantine_due(struct tpu_watch *w, const struct control *c,
			const struct tpu_qr *q, char *why, size_t cap);
/* How many of c's quarantined hosts a recreation that bumped from
 * generation from answers: those quarantined before it. */
unsigned tpu_quarantines_answered(const struct control *c, int64_t from);

#endif
