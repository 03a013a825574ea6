/*
 * sup.h (private to supervise.c and supervise_table.c): one supervisor's
 * state, and what supervise.c (set-up, the loop, the trainer, the
 * heartbeat, the history) gives the actions of supervise_table.c, which
 * give the loop its passes and its sleep.
 */
#ifndef SLICECTL_SUPERVISOR_SUP_H
#define SLICECTL_SUPERVISOR_SUP_H

#include "run/run.h"
#include "supervisor/identity.h"
#include "supervisor/shipper.h"
#include "supervisor/state.h"
#include "supervisor/step_watch.h"
#include "supervisor/supervise.h"
#include "supervisor/supervise_table.h"
#include "supervisor/syncer.h"
#include "supervisor/trainer.h"

#include <stdint.h>

struct watch;
struct deadline_poller;
struct exporter;
struct notifier;

struct sup {
	const struct supervise_options *o;
	struct job job;
	struct identity id;
	char state_path[1100], ckpt_dir[1100], spool_dir[1100];
	char restore_dir[1100], log_dir[1100], log_path[1200];
	char local_dir[1400];      /* the local tier, "" none */
	int64_t log_generation;    /* whose trainer writes log_path */
	char code_dir[1100];       /* the run's bundle, unpacked */
	char progress_dir[1100], step_path[1200];
	char boot_id[40];
	struct sup_state st;
	bool st_found;
	int pipe[2];
	int lock_fd;               /* STATE_DIR/lock, held to the end */
	struct events_writer *events; /* this worker's history writer */
	struct syncer *sync;
	struct shipper *ship;
	struct watch *watch;
	struct deadline_poller *poller; /* worker 0 of a queued resource's */
	struct exporter *exporter; /* worker 0's, with "monitoring" */
	struct notifier *notifier; /* process 0's, with "notify" */
	struct peer *peer;         /* the peer tier, NULL none */
	struct trainer trainer;

	enum sup_phase phase;
	enum sup_phase after_stop; /* STOP leads here (RESTORE or END) */
	int64_t generation;        /* being run, or being moved to */
	int64_t restored;          /* step restored for it, 0 none */
	bool have_code;            /* the bundle is unpacked in code_dir */
	uint64_t starts;           /* trainer starts by this supervisor */
	uint64_t deadline_ms;      /* of the phase's wait, 0 none */
	uint64_t retry_ms;         /* re-ask the syncer after, 0 none */
	uint64_t progress_ms;      /* last output or new step (hangs) */
	uint64_t moved_ms;         /* the same, for stalls */
	uint64_t gap_ms;           /* usual time between two of them */
	unsigned moves;            /* of this trainer */
	struct step_watch steps;   /* the trainer's new steps on disk */
	bool step_news;            /* the step file changed: read it */
	uint64_t look_ms;          /* without inotify: next step file read */
	uint64_t looked_ms;        /* the run phase's last look */
	int64_t newest_done;
	int64_t trained;           /* SLICE_STEP_FILE's step, -1 none yet */
	struct step_clock step_clock; /* its step times, for worker 0's
					 progress events */
	struct step_recent recent; /* and for every heartbeat's figure */
	bool task_pending;
	bool notice;               /* SIGTERM or a metadata notice */
	bool orphan;               /* an earlier supervisor's trainer ran */
	bool deleting;             /* the queued resource is being deleted */
	bool ready;                /* set up: the state file is ours */
	bool broken;               /* it ended for want of memory */
	int64_t earlier_worker_gen; /* managed: the generation an earlier
				       pod or allocation of this worker
				       last ran, 0 none */
	const char *end_state;     /* the heartbeat's state once ended */
	char why[256];             /* of the notice */
	char message[256];         /* for the heartbeat */
	struct syncer_request last_req;
	struct syncer_result result; /* taken from the syncer, not yet acted
					on (have_result) */
	bool have_result;

	/* The deadline the emergency path checkpoints for (kind "" for a
	 * notice), its time on the mono clock, and the step saved. */
	struct control_deadline deadline;
	uint64_t deadline_at_ms;
	int64_t final_step;
	bool resume_asked;         /* maintenance: the bump is asked for */
	uint64_t trainer_since_ms; /* when the trainer started */
	off_t trainer_log_from;    /* its log's size then: its output
				      follows */
	int64_t oom_kills_at_start; /* sup_oom_kills() then */
	int64_t trainer_generation; /* the generation it started at */
	int64_t preflight_passed;  /* the generation whose preflight did */
	off_t preflight_from;      /* the log's size when it started */
	bool preflight_failed;     /* managed: what the exit status says */
	bool quarantined;          /* managed: this host is taken out: the
				      same exit status */
	/* The upload of the newest step, timed from its .done marker to
	 * its part in the bucket: the deadline's lead counts on it. */
	int64_t timed_step;
	uint64_t timed_from_ms;
	uint64_t upload_ms;
	int64_t noted_commit;      /* newest commit it made, in the history */
	uint64_t noted_progress_ms; /* last progress event (worker 0) */
};

/* ---- supervise.c ---- */

/* What supervise() runs around its loop, and a test around the actions
 * it drives: a supervisor of o->run_url in o->state_dir with its threads
 * started (set-up), then stopped and everything released (release, also
 * after a set-up that failed). */
void sup_init(struct sup *s, const struct supervise_options *o);
int sup_setup(struct sup *s, struct err *e);
void sup_release(struct sup *s);

/* Every state change goes through here: logged by name, the syncer's
 * closer polls off outside RUN, timers reset (entering STOP or EMERGENCY
 * starts the trainer's grace period), why kept for the heartbeat. */
void sup_set_phase(struct sup *s, enum sup_phase p, const char *why);
/* One event in the run's history (run/run.h) by this worker, of
 * s->generation or of generation. */
void sup_note(struct sup *s, const char *kind, int64_t step,
	      const char *cause, const char *details);
void sup_note_of(struct sup *s, int64_t generation, const char *kind,
		 int64_t step, const char *cause, const char *details);
/* The heartbeat, now or (!now) with the next regular one. */
void sup_publish(struct sup *s);
void sup_publish_as(struct sup *s, bool now);
void sup_save_state(struct sup *s);
/* A task for the syncer, asked again later when one is still pending;
 * ask_bump asks the group to restart from generation from. */
void sup_ask(struct sup *s, const struct syncer_request *r);
void sup_ask_bump(struct sup *s, int64_t from, int64_t restore_step,
		  const struct gen_cause *cause, const char *fmt, ...)
	ATTR_PRINTF(5, 6);
/* A bump's cause of class cls and kind, by this worker. */
void sup_cause(const struct sup *s, struct gen_cause *c, int cls,
	       const char *kind);
/* The trainer's failure that just ended it, with its evidence (exit
 * code or signal, an OOM kill, its step, its output's last lines). */
void sup_trainer_cause(const struct sup *s, struct gen_cause *c);
/* The kernel's count of OOM kills in this cgroup (else the machine's),
 * -1 when it cannot be read (failure.c). */
int64_t sup_oom_kills(void);
/* Before a hung trainer is ended: its forensics (forensics.h), kept in
 * STATE_DIR/forensics/; details gets the hang event's {"forensics": NAME,
 * "bytes": N}, "" when none was kept. The loop waits for it:
 * FORENSICS_BUDGET_MS at most. Then, once the group's restart is asked
 * for, ship hands them to the syncer for the bucket. */
void sup_hang_forensics(struct sup *s, char *details, size_t cap);
void sup_ship_forensics(struct sup *s);
/* The deadline's lead (deadline.h), and the milliseconds to c's deadline
 * when it is within it now, else 0. */
uint64_t sup_lead_ms(const struct sup *s);
uint64_t sup_deadline_near(const struct sup *s, const struct control *c);
/* Times the newest step's upload, from its .done marker to the bucket. */
void sup_time_upload(struct sup *s, const struct shipper_state *ss,
		     uint64_t now);
/* Starts the trainer for s->generation: RUN, or WAITING (the run ends
 * sooner than a checkpoint takes), WAIT_GEN (it could not start) or END
 * (out of memory). */
enum sup_phase sup_start_trainer(struct sup *s);
/* Starts command in the trainer's slot, with the trainer's environment,
 * in dir, its output appended to log_path: true, or false with the
 * machine in END (out of memory) or WAIT_GEN (it could not start, what
 * in the group restart's reason). */
bool sup_spawn(struct sup *s, const char *what, const char *command,
	       const char *dir);
/* Reads SLICE_STEP_FILE: true when it says a newer step. */
bool sup_note_trained(struct sup *s);
/* After the trainer is gone: forget it in the state file. */
void sup_trainer_gone(struct sup *s);

/* ---- preflight.c ---- */

/* Starts job.json's preflight in the trainer's slot, in dir, for
 * s->generation: PREFLIGHT, with its timeout as the phase's deadline, or
 * WAIT_GEN (it could not start) or END (out of memory). */
enum sup_phase sup_start_preflight(struct sup *s, const char *dir);
/* Ends what is left of the preflight and records its verdict in the
 * history; true when it passed. On a failure why says on which host, how
 * and its last line. */
bool sup_preflight_verdict(struct sup *s, bool timed_out, char *why,
			   size_t len);
/* How long a host whose preflight failed waits before it asks the group
 * to restart (SLICE_PREFLIGHT_BACKOFF_MS). */
unsigned sup_preflight_backoff_ms(void);

/* ---- cordon.c ---- */

/* In a pod whose render asked for it (the variable ask is "1":
 * SLICE_PREFLIGHT_CORDON for a failed preflight, SLICE_CORDON_BAD_HOSTS
 * for a quarantine), marks its node (SLICE_POD_NODE) unschedulable
 * through the API server, best effort and within a few seconds; the
 * event "cordon" says whether it was and why not. False when not asked
 * (nothing done). */
bool sup_cordon(struct sup *s, const char *ask);

/* ---- the quarantine (supervise_table.c's act_written) ---- */

/* This host was just quarantined by this supervisor's bump. Where its
 * scheduler can put the group elsewhere it ends with the exit status
 * that has it do so: a Slurm step (the job is requeued without the
 * node), a pod allowed to cordon its node; true then. Elsewhere the
 * quarantine is the mark (and a queued resource's watcher recreates
 * it). */
bool sup_quarantined(struct sup *s);

/* ---- supervise_table.c ---- */

/* One pass over the events; true when it moved the machine. */
bool sup_pass(struct sup *s);
/* The pass's dispatch of one raised event ev to its cell, given
 * control.json as last read (NULL before the first read); returns the
 * phase it left the machine in. A test drives the actions through it. */
enum sup_phase sup_dispatch(struct sup *s, enum sup_event ev,
			    const struct control *c);
/* The milliseconds the loop may sleep, -1 for no limit. */
int sup_wait_ms(struct sup *s);

#endif
