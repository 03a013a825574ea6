/*
 * shipper.h (private to supervisor/): moves the trainer's completed steps
 * to the bucket in the background, never blocking the trainer.
 *
 * Two threads of its own, sharing one state under one mutex: the scanner
 * watches the checkpoint directory for step-N.done and moves step-N/ into
 * a spool directory at once (a rename: the trainer's directory only ever
 * holds steps in progress); the uploader, with its own store handle,
 * packs and uploads it as this worker's part of step N (ckpt_save); the
 * committer (rank 0) then lists the step, with a bounded backoff, until
 * every part is there and commits it, while the others list nothing
 * unless the committer seems gone (a takeover, see shipper_config) or
 * they are leaving (a flush ends with one commit pass, whoever flushes,
 * as no one may be left to commit). So steps keep leaving
 * the trainer's directory while an upload is slow or failing. "Newest"
 * means the step whose .done marker appeared last, whatever its number.
 * When steps come faster than uploads, only the newest waiting step is
 * uploaded and older waiting ones are dropped (coalescing); a step being
 * uploaded is finished first. Uploads that fail (a bucket answering 503
 * for minutes) are retried with backoff while the spool holds them; the
 * spool is bounded (job spool_mb): when full, the oldest waiting steps go
 * first, never the newest. After each commit worker 0 prunes per keep and
 * keep_every. The threads take no signals: the supervisor's loop does.
 */
#ifndef SLICECTL_SUPERVISOR_SHIPPER_H
#define SLICECTL_SUPERVISOR_SHIPPER_H

#include "checkpoint/checkpoint.h"
#include "cloud/cloud.h"
#include "run/run.h"

struct shipper;

/* The committer lists a step first right after its upload, then after
 * poll_ms, doubling to SHIPPER_COMMIT_POLLS x poll_ms (5 s in the
 * supervisor, whose poll_ms is 200). A takeover waits
 * SHIPPER_TAKEOVER_POLLS x poll_ms (30 s there): six of the committer's
 * longest waits, so a live committer has listed several times after the
 * last part landed before a deputy lists at all. */
#define SHIPPER_COMMIT_POLLS 25u
#define SHIPPER_TAKEOVER_POLLS 150u

struct shipper_config {
	const char *run_url;      /* store_open'd by the uploader itself */
	const char *ckpt_dir;     /* $SLICE_CHECKPOINT_DIR */
	const char *spool_dir;    /* same filesystem as ckpt_dir */
	const char *part;         /* "slice-S-worker-W" */
	unsigned parts_expected;  /* every worker of the run */
	/* This worker's index in the run. 0 is the step's committer; the
	 * others only upload, and worker R takes over a step it sees
	 * uncommitted R x takeover_ms after its own part went up. */
	unsigned rank;
	unsigned takeover_ms;     /* 0: SHIPPER_TAKEOVER_POLLS x poll_ms */
	bool prune;               /* worker 0 */
	unsigned keep, keep_every;
	/* The local tier (NULL: none): each upload also keeps its part in
	 * local_dir, of which the newest local_keep committed steps stay
	 * (ckpt_local_prune). */
	const char *local_dir;
	unsigned local_keep;
	/* NULL, or told (from the uploader's thread, nothing held) each
	 * step whose part the local tier now holds. */
	void (*kept)(void *ud, uint64_t step);
	void *kept_ud;
	/* Fast-tier steps (job persist_every): a step not divisible by
	 * persist_every, saved while not flushing, is kept in local_dir
	 * alone, handed to hold (which pushes it to the partner and names
	 * its holders, peer_hold) and recorded for the committer, reading
	 * and writing no part in the bucket. Without hold, every step goes
	 * to the bucket. */
	unsigned persist_every;
	size_t (*hold)(void *ud, struct store *s, uint64_t step,
		       struct ckpt_holder *h);
	void *hold_ud;
	uint64_t spool_bytes;     /* bound on the spool */
	int notify_fd;            /* a byte is written here on every change
				     of shipper_state; -1 none */
	unsigned poll_ms;         /* checkpoint directory scan period */
};

struct shipper_state {
	int64_t newest_done;      /* newest step-N.done seen; -1 none */
	int64_t newest_uploaded;  /* newest part uploaded; -1 none */
	int64_t newest_committed; /* newest step seen committed; -1 none */
	unsigned waiting;         /* steps in the spool not yet uploaded */
	unsigned dropped;         /* steps dropped by coalescing or spool */
	unsigned failures;        /* consecutive failed attempts */
	uint64_t upload_bps;      /* of the newest successful upload; 0 none */
	char last_error[256];
};

int shipper_start(struct shipper **out, const struct shipper_config *c,
		  struct err *e);
/* A consistent copy of the current state. */
void shipper_get(struct shipper *s, struct shipper_state *out);
/* Scans the checkpoint directory now (the trainer just exited). */
void shipper_kick(struct shipper *s);
/*
 * The emergency path: scans once more, puts the newest step ahead of
 * everything, and waits until it is uploaded (and committed if every
 * part is there) or deadline_ms (mono_ms) passes. A trainer told to stop
 * may save as its final step one older than a step it wrote just before
 * (the step every peer completed); when the two markers were made in the
 * same clock tick, which came last is a guess, so from then on both go
 * out. Returns 0 when the newest is uploaded, CLOUD_ETIMEDOUT, or its
 * upload error.
 */
int shipper_flush(struct shipper *s, uint64_t deadline_ms, struct err *e);
/* Drops every waiting step and forgets in-progress ones (a new
 * generation: steps of the old one must not be committed late); an
 * upload in flight is aborted. */
void shipper_reset(struct shipper *s);
/* Stops the threads (aborting an upload in flight) and frees s. */
void shipper_stop(struct shipper *s);

#endif
