/*
 * syncer.h (private to supervisor/): everything the supervisor says to and
 * hears from the bucket, except checkpoints (shipper.h), done in a thread
 * of its own so that a bucket answering 503 for minutes never stalls the
 * supervisor's loop: the trainer keeps running and notices keep working.
 *
 * Periodically it reads control.json and publishes the heartbeat and the
 * trainer's log; on request it does one longer task at a time (unpack the
 * run's code bundle and restore a step, bump the generation, set the
 * run's state, check whether every worker finished, delete the queued
 * resource), and puts a file the loop hands it as an object. Every change it has for the loop is announced by a byte on
 * notify_fd.
 */
#ifndef SLICECTL_SUPERVISOR_SYNCER_H
#define SLICECTL_SUPERVISOR_SYNCER_H

#include "run/run.h"

struct syncer;

struct syncer_config {
	const char *run_url;
	const struct job *job;
	const char *part;          /* "slice-S-worker-W" */
	const char *restore_dir;   /* SLICE_RESTORE_DIR */
	/* The local tier (NULL: none): a restore unpacks this host's copy
	 * of the step when it verifies, then drops copies above the step
	 * restored, keeping local_keep (ckpt_local_prune). */
	const char *local_dir;
	unsigned local_keep;
	/* NULL, or the peer tier's fetch when the local tier has no copy
	 * (ckpt_restore_options' fetch). */
	int (*fetch)(void *ud, uint64_t step, const char *part, uint64_t size,
		     uint32_t crc32c, const char *path, struct err *e);
	void *fetch_ud;
	/* Where the run's bundle.tar.zst is unpacked (STATE_DIR/code); the
	 * generation unpacked is recorded next to it in CODE_DIR.generation
	 * so an unchanged bundle is not fetched again. */
	const char *code_dir;
	unsigned n_workers;
	int notify_fd;
	/* The worker's history writer, for the changes to control.json it
	 * makes (control_bump, control_set_state); it outlives the syncer. */
	struct events_writer *events;
	unsigned control_poll_ms;  /* control.json read period (longer in
				      runs of thousands of workers) */
	unsigned close_poll_ms;    /* the same while watching closely */
};

enum syncer_task {
	TASK_NONE,
	TASK_RESTORE,    /* unpack the code bundle when it changed, then
			    agree on generation's step and restore it */
	TASK_BUMP,       /* control_bump from generation, reason; or
			    control_join_restart when jobset_restart */
	TASK_SET_STATE,  /* control_set_state(state, reason) */
	TASK_CHECK_DONE, /* all workers finished at generation? then done */
	TASK_DELETE_QR,  /* the job's queued resource, forced */
};

struct syncer_request {
	enum syncer_task task;
	int64_t generation;
	int64_t restore_step;      /* TASK_BUMP: -1, or the step to restore */
	int64_t jobset_restart;    /* TASK_BUMP: a pod's restart attempt to
				      join, 0 none */
	bool deadline;             /* TASK_BUMP: after the checkpoint for
				      control.json's deadline
				      (control_bump_deadline) */
	char state[16];
	char reason[256];
	struct gen_cause cause;    /* TASK_BUMP (not a join or a deadline's):
				      why, its class and evidence */
};

struct syncer_result {
	enum syncer_task task;
	int rc;                    /* 0, or a cloud/checkpoint error */
	char error[1024];
	int64_t step;              /* TASK_RESTORE: restored step, 0 none */
	int64_t fallback_step;     /* TASK_RESTORE failing on a bad part:
				      the committed step before it (0 none)
				      for the next generation; else -1 */
	bool done;                 /* TASK_CHECK_DONE: the run is done */
	bool code;                 /* TASK_RESTORE: the run has a bundle and
				      it is unpacked in code_dir */
	bool bundle_failed;        /* TASK_RESTORE: rc and error are the
				      bundle's, not the step's */
	bool from_local;           /* TASK_RESTORE: the step came from the
				      local tier, no part read from the
				      store */
	bool from_peer;            /* TASK_RESTORE: from the partner's */
	bool quarantined;          /* TASK_BUMP: it quarantined the host
				      its cause names, and the run goes on */
};

int syncer_start(struct syncer **out, const struct syncer_config *c,
		 struct err *e);
/* The heartbeat to publish every heartbeat_s (and at once when now: a
 * change others should see soon, though never a second time within a
 * second: GCS's per-object write limit), and the local log of generation
 * log_gen whose new bytes go to logs/PART/gen-G/ (G = log_gen) as
 * segments when it grows. The heartbeat's generation moves on before the
 * next trainer starts, while the last one's log may still grow: its
 * bytes belong under its own generation. */
void syncer_publish(struct syncer *s, const struct worker_status *st,
		    const char *log_path, int64_t log_gen, bool now);
/* Reads control.json every close_poll_ms while on: the loop asks for it
 * while its trainer is stalled, which is when a peer's failure (and the
 * group restart it leads to) is likely. */
void syncer_watch_closely(struct syncer *s, bool on);
/* Reads control.json less often (at scale: see syncer.c) while on: the
 * loop says so while its trainer makes progress. */
void syncer_progressing(struct syncer *s, bool on);
/* control.json as last read; false until it has been read once. */
bool syncer_control(struct syncer *s, struct control *out);
/* Queues a task; false when one is still pending (one at a time). */
bool syncer_request(struct syncer *s, const struct syncer_request *r);
/* The finished task's result, once; false when none is ready. */
bool syncer_result(struct syncer *s, struct syncer_result *out);
/* Puts the local file at path (up to SYNCER_UPLOAD_MAX bytes) as the run's
 * object name, soon and once (a hang's forensics); a second call before
 * the first went replaces it. syncer_stop puts one still waiting. */
#define SYNCER_UPLOAD_MAX ((size_t)1 << 20)
void syncer_upload(struct syncer *s, const char *path, const char *name);
/* Publishes the last heartbeat and log (bounded by deadline_ms), then
 * stops the thread. */
void syncer_stop(struct syncer *s, uint64_t deadline_ms);

#endif
