/*
 * supervise.c: one worker's supervision as a small state machine driven by
 * one poll loop, in the manner of s6-supervise. Signals, the threads
 * (syncer, shipper, metadata watch) and the trainer's output all wake the
 * loop through file descriptors, and it sleeps until the nearest time an
 * action waits for. A table of phases by events (supervise_table.h) names
 * the action for each; every phase is left only through an action, which
 * returns the phase it leads to, and every state change is logged by name
 * and published in the heartbeat.
 *
 * The loop never touches the bucket itself: the syncer does, in its
 * thread, so a bucket that fails for minutes leaves the trainer running
 * and notices handled.
 */
#define _XOPEN_SOURCE 700 /* nftw */
#include "supervisor/supervise.h"
#include "supervisor/supervise_table.h"
#include "checkpoint/checkpoint.h"
#include "supervisor/deadline.h"
#include "supervisor/identity.h"
#include "supervisor/shipper.h"
#include "supervisor/state.h"
#include "supervisor/syncer.h"
#include "supervisor/trainer.h"
#include "supervisor/watch.h"

#include <ftw.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* Time after the grace period for the emergency step's upload: systemd
 * waits grace + 30 s (the unit's TimeoutStopSec) before SIGKILL. */
#define FLUSH_AFTER_GRACE_MS 25000
#define RETRY_MS 2000
/* A trainer quiet for twice its usual gap between signs of progress, and
 * at least STALL_MIN_MS, is stalled: control.json is then read every
 * CLOSE_POLL_MS for up to STALL_WATCH_MS, since a failed peer stalls
 * every trainer of the group until the group restarts. */
#define STALL_MIN_MS 500
#define STALL_WATCH_MS 30000
#define CLOSE_POLL_MS 200
/* How often the run phase reads SLICE_STEP_FILE and refreshes the
 * heartbeat: a chatty trainer wakes the loop at every line. */
#define LOOK_MS 100
/* How often worker 0 records the trained step in the run's history (the
 * report's step rate): 720 events an hour, from one worker. */
#define PROGRESS_EVENT_MS 5000

struct sup {
	const struct supervise_options *o;
	struct job job;
	struct identity id;
	char state_path[1100], ckpt_dir[1100], spool_dir[1100];
	char restore_dir[1100], log_dir[1100], log_path[1200];
	char code_dir[1100];       /* the run's bundle, unpacked */
	char progress_dir[1100], step_path[1200];
	char boot_id[40];
	struct sup_state st;
	bool st_found;
	int pipe[2];
	int lock_fd;               /* STATE_DIR/lock, held to the end */
	struct syncer *sync;
	struct shipper *ship;
	struct watch *watch;
	struct deadline_poller *poller; /* worker 0 of a queued resource's */
	struct trainer trainer;

	enum sup_phase phase;
	enum sup_phase after_stop;     /* P_STOP leads here (P_RESTORE or P_END) */
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
	uint64_t look_ms;          /* next step file read (LOOK_MS) */
	int64_t newest_done;
	int64_t trained;           /* SLICE_STEP_FILE's step, -1 none yet */
	bool task_pending;
	bool notice;               /* SIGTERM or a metadata notice */
	bool orphan;               /* an earlier supervisor's trainer ran */
	bool deleting;             /* the queued resource is being deleted */
	bool ready;                /* set up: the state file is ours */
	bool broken;               /* it ended for want of memory */
	int64_t earlier_pod_gen;   /* in a pod: the generation an earlier pod
				      of this worker last ran, 0 none */
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
	int64_t trainer_generation; /* the generation it started at */
	/* The upload of the newest step, timed from its .done marker to
	 * its part in the bucket: the deadline's lead counts on it. */
	int64_t timed_step;
	uint64_t timed_from_ms;
	uint64_t upload_ms;
	int64_t noted_commit;      /* newest commit it made, in the history */
	uint64_t noted_progress_ms; /* last progress event (worker 0) */
};

/* Entering STOP or EMERGENCY starts the trainer's grace period. */
static void set_phase(struct sup *s, enum sup_phase p, const char *why)
{
	if (s->phase != p)
		log_info("%s -> %s%s%s", sup_phase_names[s->phase],
			 sup_phase_names[p], why ? ": " : "", why ? why : "");
	s->phase = p;
	if (p != P_RUN && s->sync) {
		syncer_watch_closely(s->sync, false);
		syncer_progressing(s->sync, false);
	}
	s->deadline_ms = p == P_STOP || p == P_EMERGENCY
				 ? mono_ms() + (uint64_t)s->job.grace_s * 1000
				 : 0;
	s->retry_ms = 0;
	if (why)
		snprintf(s->message, sizeof(s->message), "%s", why);
}

/* One event in the run's history (supervisor.h), by this worker, of
 * generation. */
static void note_of(struct sup *s, int64_t generation, const char *kind,
		    int64_t step, const char *cause, const char *details)
{
	struct event ev;
	struct err e;

	event_init(&ev, kind, generation, s->id.name);
	ev.step = step;
	snprintf(ev.cause, sizeof(ev.cause), "%s", cause ? cause : "");
	snprintf(ev.by, sizeof(ev.by), "%s", s->id.name);
	if (details)
		snprintf(ev.details, sizeof(ev.details), "%s", details);
	if (event_record(NULL, &ev, &e))
		log_warn("event not recorded: %s", e.msg);
}

static void note(struct sup *s, const char *kind, int64_t step,
		 const char *cause, const char *details)
{
	note_of(s, s->generation, kind, step, cause, details);
}

/* ---- signals ---- */

/* What the self-pipe carries from the handler: a stop request (any of the
 * first three) or a trainer that exited. */
static const int caught[] = { SIGTERM, SIGINT, SIGHUP, SIGCHLD };
#define N_CAUGHT (sizeof(caught) / sizeof(caught[0]))

/* ---- the heartbeat ---- */

static const char *status_state(const struct sup *s)
{
	switch (s->phase) {
	case P_JOIN: return "starting";
	case P_RESTORE: return "restoring";
	case P_RUN: return "running";
	case P_STOP: return "stopping";
	case P_WAIT_GEN: return s->deadline.kind[0] ? "stopping" : "failed";
	case P_FINISHED: return "finished";
	case P_EMERGENCY: return s->deadline.kind[0] ? "stopping" : "preempted";
	case P_WAITING: return "waiting";
	default: return s->end_state ? s->end_state : "exited";
	}
}

/* The heartbeat's step: what the trainer says it finished, else the
 * newest step it wrote. */
static void publish_as(struct sup *s, bool now)
{
	struct worker_status st = { .slice = s->id.slice,
				    .worker = s->id.worker };
	struct shipper_state ss;

	shipper_get(s->ship, &ss);
	snprintf(st.state, sizeof(st.state), "%s", status_state(s));
	st.generation = s->generation;
	st.step = s->trained > ss.newest_done ? s->trained : ss.newest_done;
	st.committed_step = ss.newest_committed;
	st.restarts = s->starts;
	st.upload_bps = ss.upload_bps;
	snprintf(st.message, sizeof(st.message), "%s", s->message);
	if (ss.last_error[0] && ss.failures)
		snprintf(st.message, sizeof(st.message),
			 "checkpoint upload failing (%u): %.200s", ss.failures,
			 ss.last_error);
	snprintf(st.boot_id, sizeof(st.boot_id), "%s", s->boot_id);
	syncer_publish(s->sync, &st, s->log_path, now);
}

static void publish(struct sup *s)
{
	publish_as(s, true);
}

static void save_state(struct sup *s)
{
	struct err e;

	err_init(&e);
	snprintf(s->st.run, sizeof(s->st.run), "%s", s->o->run_url);
	snprintf(s->st.boot_id, sizeof(s->st.boot_id), "%s", s->boot_id);
	s->st.generation = s->generation;
	s->st.trainer_pgid = s->trainer.pid;
	s->st.trainer_start = s->trainer.start_time;
	if (sup_state_save(s->state_path, &s->st, &e))
		log_warn("%s", e.msg);
}

static void ask(struct sup *s, const struct syncer_request *r)
{
	s->last_req = *r;
	s->task_pending = syncer_request(s->sync, r);
	if (!s->task_pending)
		s->retry_ms = mono_ms() + 100;
}

static void ask_bump(struct sup *s, int64_t from, int64_t restore_step,
		     const char *fmt, ...) ATTR_PRINTF(4, 5);

static void ask_bump(struct sup *s, int64_t from, int64_t restore_step,
		     const char *fmt, ...)
{
	struct syncer_request r = { .task = TASK_BUMP, .generation = from,
				    .restore_step = restore_step };
	int n;
	va_list ap;

	n = snprintf(r.reason, sizeof(r.reason), "%s: ", s->id.name);
	va_start(ap, fmt);
	vsnprintf(r.reason + n, sizeof(r.reason) - (size_t)n, fmt, ap);
	va_end(ap);
	log_warn("asking the group to restart: %s", r.reason);
	ask(s, &r);
}

/* ---- the trainer ---- */

/* The supervisor's environment without SLICE_* and MEGASCALE_*, then the
 * contract's variables, then the job's (later entries win in sh). */
static int trainer_env(struct sup *s, struct strlist *env)
{
	char kv[1300];
	int rc = 0;

	for (char **p = environ; *p && !rc; p++)
		if (strncmp(*p, "SLICE_", 6) && strncmp(*p, "MEGASCALE_", 10))
			rc = strlist_push(env, *p);
#define PUT(...)                                                               \
	do {                                                                   \
		snprintf(kv, sizeof(kv), __VA_ARGS__);                         \
		if (!rc)                                                       \
			rc = strlist_push(env, kv);                            \
	} while (0)
	PUT("SLICE_RUN=%s", s->job.name);
	PUT("SLICE_ID=%u", s->id.slice);
	PUT("SLICE_NUM_SLICES=%u", s->id.num_slices);
	PUT("SLICE_WORKER_ID=%u", s->id.worker);
	PUT("SLICE_WORKERS_PER_SLICE=%u", s->id.workers_per_slice);
	PUT("SLICE_PROCESS_ID=%u", s->id.process_id);
	PUT("SLICE_NUM_PROCESSES=%u", s->id.num_processes);
	PUT("SLICE_GENERATION=%lld", (long long)s->generation);
	PUT("SLICE_CHECKPOINT_DIR=%s", s->ckpt_dir);
	PUT("SLICE_STEP_FILE=%s", s->step_path);
	if (s->restored > 0) {
		PUT("SLICE_RESTORE_DIR=%s", s->restore_dir);
		PUT("SLICE_RESTORE_STEP=%lld", (long long)s->restored);
	}
#undef PUT
	for (size_t i = 0; !rc && i < s->id.megascale.n; i++)
		rc = strlist_push(env, s->id.megascale.v[i]);
	for (size_t i = 0; !rc && i < s->job.env.n; i++)
		rc = strlist_push(env, s->job.env.v[i]);
	if (!rc)
		rc = strlist_push(env, "");
	if (!rc) {
		/* execle wants a NULL-terminated array. */
		free(env->v[env->n - 1]);
		env->v[env->n - 1] = NULL;
	}
	return rc;
}

static int remove_entry(const char *path, const struct stat *sb, int flag,
			struct FTW *ftw)
{
	(void)sb;
	(void)flag;
	if (ftw->level > 0 && remove(path))
		log_warn("cannot remove %s: %s", path, strerror(errno));
	return 0;
}

/* Removes what an earlier trainer left in the checkpoint directory:
 * steps of another generation must not be shipped. */
static void clear_dir(const char *dir)
{
	nftw(dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

/* ---- deadlines (deadline.h) ---- */

static uint64_t lead_ms(const struct sup *s)
{
	return deadline_lead_ms(s->job.grace_s, s->upload_ms);
}

/* Milliseconds to c's deadline when it is within its lead now, else 0. */
static uint64_t deadline_near(const struct sup *s, const struct control *c)
{
	int64_t left = deadline_left_ms(&c->deadline, deadline_now_ms());

	return left > 0 && (uint64_t)left <= lead_ms(s) ? (uint64_t)left : 0;
}

/* A run whose end is nearer than a checkpoint takes: no trainer starts. */
static bool run_ends_soon(struct sup *s)
{
	struct control c;
	uint64_t left;

	if (!syncer_control(s->sync, &c) ||
	    strcmp(c.deadline.kind, "run-end") || !(left = deadline_near(s, &c)))
		return false;
	set_phase(s, P_WAITING, NULL);
	snprintf(s->message, sizeof(s->message),
		 "%.160s in %llu s: no trainer starts; waiting for capacity",
		 c.deadline.about, (unsigned long long)(left / 1000));
	log_warn("%s", s->message);
	publish(s);
	return true;
}

/* The time from a step's .done marker to its part in the bucket. */
static void time_upload(struct sup *s, const struct shipper_state *ss,
			uint64_t now)
{
	if (ss->newest_done >= 0 && ss->newest_done != s->timed_step) {
		s->timed_step = ss->newest_done;
		s->timed_from_ms = now;
	}
	if (s->timed_from_ms && ss->newest_uploaded == s->timed_step) {
		s->upload_ms = now - s->timed_from_ms;
		s->timed_from_ms = 0;
		log_debug("step %lld went out in %llu ms",
			  (long long)s->timed_step,
			  (unsigned long long)s->upload_ms);
	}
}

static enum sup_phase start_trainer(struct sup *s)
{
	struct strlist env;
	struct err e;
	/* The job's workdir, else the unpacked bundle, else (no bundle)
	 * the state directory. */
	const char *dir = s->job.workdir ? s->job.workdir
			  : s->have_code ? s->code_dir
					 : s->o->state_dir;

	if (run_ends_soon(s))
		return P_WAITING;
	strlist_init(&env);
	err_init(&e);
	clear_dir(s->ckpt_dir);
	snprintf(s->log_path, sizeof(s->log_path), "%s/gen-%lld.log",
		 s->log_dir, (long long)s->generation);
	snprintf(s->step_path, sizeof(s->step_path), "%s/gen-%lld.step",
		 s->progress_dir, (long long)s->generation);
	/* Another run of the same name may have left one. */
	unlink(s->step_path);
	s->trained = -1;
	if (trainer_env(s, &env)) {
		strlist_release(&env);
		log_error("out of memory");
		s->broken = true;
		set_phase(s, P_END, "out of memory");
		return P_END;
	}
	if (trainer_start(&s->trainer, s->job.command, dir, env.v,
			  s->log_path, &e)) {
		strlist_release(&env);
		log_error("cannot start the trainer: %s", e.msg);
		ask_bump(s, s->generation, -1, "cannot start the trainer: %s",
			 e.msg);
		set_phase(s, P_WAIT_GEN, "the trainer could not start");
		return P_WAIT_GEN;
	}
	strlist_release(&env);
	s->starts++;
	s->trainer_since_ms = mono_ms();
	s->trainer_generation = s->generation;
	/* The other workers may take up to the grace period to stop their
	 * old trainers and start again, and this trainer may wait for them
	 * in silence: the hang clock starts that much later. */
	s->progress_ms = mono_ms() + (uint64_t)s->job.grace_s * 1000;
	s->moved_ms = s->gap_ms = 0;
	s->moves = 0;
	note(s, "start", s->restored, s->restored > 0 ? "restored" : "fresh",
	     NULL);
	log_info("trainer started (pid %ld, generation %lld, %s)",
		 (long)s->trainer.pid, (long long)s->generation,
		 s->restored > 0 ? "restored" : "fresh");
	save_state(s);
	set_phase(s, P_RUN, NULL);
	snprintf(s->message, sizeof(s->message), "generation %lld from %s",
		 (long long)s->generation,
		 s->restored > 0 ? "a checkpoint" : "the start");
	publish(s);
	return P_RUN;
}

/* The step the trainer last said it finished in SLICE_STEP_FILE (the
 * optional progress report), or -1. */
static int64_t read_trained(const struct sup *s)
{
	char b[32];
	ssize_t n;
	int fd = open(s->step_path, O_RDONLY | O_CLOEXEC);
	char *end;
	long long v;

	if (fd < 0)
		return -1;
	n = read(fd, b, sizeof(b) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	b[n] = 0;
	errno = 0;
	v = strtoll(b, &end, 10);
	while (*end == '\n' || *end == ' ' || *end == '\r')
		end++;
	return errno || end == b || *end || v < 0 ? -1 : (int64_t)v;
}

/* New progress reported: it resets the hang clock. */
static bool note_trained(struct sup *s)
{
	int64_t v = read_trained(s);

	if (v <= s->trained)
		return false;
	s->trained = v;
	return true;
}

/* After the trainer is gone: forget it in the state file. */
static void trainer_gone(struct sup *s)
{
	note_trained(s);
	trainer_release(&s->trainer);
	trainer_init(&s->trainer);
	save_state(s);
}

static enum sup_phase begin_stop(struct sup *s, enum sup_phase after, const char *why)
{
	trainer_signal(&s->trainer, SIGTERM);
	s->after_stop = after;
	set_phase(s, P_STOP, why);
	publish(s);
	return P_STOP;
}

static enum sup_phase begin_restore(struct sup *s, int64_t generation)
{
	struct syncer_request r = { .task = TASK_RESTORE,
				    .generation = generation };

	shipper_reset(s->ship);
	memset(&s->deadline, 0, sizeof(s->deadline));
	s->generation = generation;
	s->restored = 0;
	s->newest_done = -1;
	set_phase(s, P_RESTORE, NULL);
	snprintf(s->message, sizeof(s->message),
		 "restoring for generation %lld", (long long)generation);
	publish(s);
	ask(s, &r);
	return P_RESTORE;
}

/* Steps the trainer completed still go out before the supervisor
 * leaves (the emergency path has flushed them already). */
#define FLUSH_AT_END_MS 120000

static void note_last_commits(struct sup *s);

static enum sup_phase end(struct sup *s, const char *why)
{
	char details[64];

	if (s->phase != P_EMERGENCY) {
		struct err e;

		err_init(&e);
		if (shipper_flush(s->ship, mono_ms() + FLUSH_AT_END_MS, &e))
			log_warn("last checkpoint not uploaded: %s", e.msg);
	}
	note_last_commits(s);
	/* A VM that goes away after its window leaves the run waiting for
	 * the next; a waiting worker of a stopped run has exited. */
	s->end_state = s->phase == P_FINISHED ? "finished"
		       : s->phase == P_EMERGENCY ? "preempted"
		       : s->phase == P_WAITING && s->notice ? "waiting"
		       : "exited";
	snprintf(details, sizeof(details), "{\"state\":\"%s\"}",
		 s->end_state);
	note(s, "end", -1, why, details);
	set_phase(s, P_END, why);
	publish(s);
	return P_END;
}

/* ---- the actions: one per cell of the table below ---- */

static enum sup_phase begin_emergency(struct sup *s)
{
	log_warn("emergency: %s; the trainer gets SIGTERM and %u s to save "
		 "a final step", s->why, s->job.grace_s);
	trainer_signal(&s->trainer, SIGTERM);
	set_phase(s, P_EMERGENCY, s->why);
	s->st.preempted = true;
	save_state(s);
	publish(s);
	return P_EMERGENCY;
}

/* Each takes control.json as last read (NULL before the first read) and
 * returns the phase it leaves the machine in. */
typedef enum sup_phase action_fn(struct sup *s, const struct control *c);

static bool trainer_alive(const struct sup *s)
{
	return s->trainer.pid && !s->trainer.exited;
}

/* SIGTERM or a metadata notice: the trainer's final step, or the end. */
static enum sup_phase act_notice(struct sup *s, const struct control *c)
{
	(void)c;
	note(s, "notice", s->trained, s->why, NULL);
	if (trainer_alive(s))
		return begin_emergency(s);
	s->st.preempted = true;
	save_state(s);
	return end(s, s->why);
}

/* The run stopped, failed or is done. */
static enum sup_phase act_run_ended(struct sup *s, const struct control *c)
{
	char why[300];

	snprintf(why, sizeof(why), "the run is %s: %s", c->state, c->reason);
	if (trainer_alive(s))
		return begin_stop(s, P_END, why);
	return end(s, why);
}

/* Worker 0 of a finished run deletes its queued resource when the job
 * says so; the end then follows the deletion's result. */
static bool deletes_qr(const struct sup *s, const struct control *c)
{
	return !strcmp(c->state, "done") && s->id.process_id == 0 &&
	       s->job.delete_on_finish;
}

static enum sup_phase act_finished_ended(struct sup *s,
					 const struct control *c)
{
	struct syncer_request d = { .task = TASK_DELETE_QR };

	if (!deletes_qr(s, c))
		return act_run_ended(s, c);
	if (!s->deleting && !s->task_pending) {
		s->deleting = true;
		ask(s, &d);
	}
	return s->phase;
}

static enum sup_phase act_new_generation(struct sup *s,
					 const struct control *c)
{
	char why[300];

	if (!trainer_alive(s))
		return begin_restore(s, c->generation);
	snprintf(why, sizeof(why), "generation %lld: %s",
		 (long long)c->generation, c->reason);
	s->generation = c->generation;
	return begin_stop(s, P_RESTORE, why);
}

static enum sup_phase act_join(struct sup *s, const struct control *c)
{
	bool same_run = s->st_found && !strcmp(s->st.run, s->o->run_url);

	if (strcmp(c->state, "running"))
		return end(s, "the run is not running");
	/* A reboot or reset of this host, or its own preemption, while
	 * the group still runs the generation it was part of: the others
	 * must restart with it from the newest checkpoint. */
	if (same_run && s->st.generation == c->generation &&
	    (strcmp(s->st.boot_id, s->boot_id) || s->st.preempted ||
	     s->orphan)) {
		const char *why = strcmp(s->st.boot_id, s->boot_id)
					  ? "the host was reset or rebooted"
				  : s->st.preempted
					  ? "it rejoins after a preemption"
					  : "its supervisor restarted and its "
					    "trainer was lost";

		log_warn("event: %s (boot %s, was %s)", why, s->boot_id,
			 s->st.boot_id);
		s->st.preempted = false;
		s->generation = c->generation;
		save_state(s);
		ask_bump(s, c->generation, -1, "%s", why);
		set_phase(s, P_WAIT_GEN, why);
		publish(s);
		return P_WAIT_GEN;
	}
	s->st.preempted = false;
	if (s->o->pod && s->id.restart_attempt > c->jobset_restart) {
		/* JobSet recreated every pod: the group restarts from the
		 * newest committed step, counted like any other restart. */
		struct syncer_request r = {
			.task = TASK_BUMP, .generation = c->generation,
			.restore_step = -1,
			.jobset_restart = s->id.restart_attempt,
		};

		snprintf(r.reason, sizeof(r.reason), "%s restart %u",
			 s->o->slurm ? "slurm" : "jobset",
			 s->id.restart_attempt);
		log_warn("event: JobSet restart attempt %u (control.json "
			 "records %lld): joining as the next generation",
			 s->id.restart_attempt, (long long)c->jobset_restart);
		s->generation = c->generation;
		ask(s, &r);
		set_phase(s, P_WAIT_GEN, r.reason);
		publish(s);
		return P_WAIT_GEN;
	}
	if (s->o->pod && s->earlier_pod_gen == c->generation) {
		/* This worker's pod was replaced without a new restart
		 * attempt (a JobSet submitted again): the generation's
		 * step was fixed long ago, the group restarts anew. */
		s->generation = c->generation;
		ask_bump(s, c->generation, -1,
			 "a new pod replaces the one that ran generation %lld",
			 (long long)c->generation);
		set_phase(s, P_WAIT_GEN, "a new pod rejoins");
		publish(s);
		return P_WAIT_GEN;
	}
	return begin_restore(s, c->generation);
}

static enum sup_phase act_restored(struct sup *s, const struct control *c)
{
	const struct syncer_result *r = &s->result;

	if (r->rc == 0) {
		s->restored = r->step;
		s->have_code = r->code;
		if (r->step > 0)
			log_info("restored step %lld", (long long)r->step);
		note(s, "restore", r->step, NULL, NULL);
		if (c->generation > s->generation)
			return begin_restore(s, c->generation);
		return start_trainer(s);
	}
	if (r->rc == CLOUD_EPRECONDITION) {
		/* The generation moved on while we asked: follow it. */
		set_phase(s, P_WAIT_GEN, "the generation moved on");
		return P_WAIT_GEN;
	}
	if (r->bundle_failed &&
	    (r->rc == CLOUD_ECORRUPT || r->rc == CKPT_EUNSAFE)) {
		/* Every worker unpacks the same object: no restart can
		 * help. The run fails, saying why. */
		struct syncer_request f = { .task = TASK_SET_STATE };

		log_error("%s", r->error);
		snprintf(f.state, sizeof(f.state), "failed");
		snprintf(f.reason, sizeof(f.reason), "%s: %.200s", s->id.name,
			 r->error);
		ask(s, &f);
		set_phase(s, P_WAIT_GEN, "the code bundle cannot be unpacked");
		publish(s);
		return P_WAIT_GEN;
	}
	if (!r->bundle_failed && r->fallback_step >= 0 &&
	    (r->rc == CLOUD_ECORRUPT || r->rc == CLOUD_ENOTFOUND ||
	     r->rc == CKPT_EUNSAFE)) {
		log_error("cannot restore: %s", r->error);
		ask_bump(s, s->generation, r->fallback_step,
			 "its part of the checkpoint is bad (%s); restarting "
			 "from step %lld", r->error,
			 (long long)r->fallback_step);
		set_phase(s, P_WAIT_GEN, "a bad checkpoint part");
		return P_WAIT_GEN;
	}
	log_warn("restore failed, retrying: %s", r->error);
	snprintf(s->message, sizeof(s->message), "restore failing: %.200s",
		 r->error);
	s->retry_ms = mono_ms() + RETRY_MS;
	return P_RESTORE;
}

static enum sup_phase act_written(struct sup *s, const struct control *c)
{
	(void)c;
	if (s->result.rc) {
		log_warn("control.json: %s (retrying)", s->result.error);
		s->retry_ms = mono_ms() + RETRY_MS;
	}
	return s->phase;
}

static enum sup_phase act_checked(struct sup *s, const struct control *c)
{
	(void)c;
	if (s->result.rc)
		log_warn("checking whether the run is done: %s",
			 s->result.error);
	if (!s->result.done)
		s->retry_ms = mono_ms() + RETRY_MS;
	return s->phase;
}

static enum sup_phase act_deleted(struct sup *s, const struct control *c)
{
	(void)c;
	if (s->result.rc)
		log_error("deleting the queued resource: %s", s->result.error);
	else
		log_info("the run is done: queued resource %s deleted",
			 s->job.tpu_name);
	return end(s, "the run is done");
}

static enum sup_phase act_retry(struct sup *s, const struct control *c)
{
	(void)c;
	s->retry_ms = 0;
	ask(s, &s->last_req);
	return s->phase;
}

/* While its queued resource is being deleted, a finished worker waits
 * for that alone; its last commits are noted at the end. */
static enum sup_phase act_finished_retry(struct sup *s,
					 const struct control *c)
{
	return deletes_qr(s, c) ? s->phase : act_retry(s, c);
}

/* moved: the trainer's latest sign of progress. The gap from its start
 * to its first sign (start-up, compilation) is not a usual one. */
static void watch_stall(struct sup *s, uint64_t moved, uint64_t now)
{
	uint64_t limit;

	if (moved > s->moved_ms) {
		if (s->moves >= 2) {
			uint64_t gap = moved - s->moved_ms;

			s->gap_ms = s->gap_ms ? (3 * s->gap_ms + gap) / 4 : gap;
		}
		s->moves++;
		s->moved_ms = moved;
	}
	limit = 2 * s->gap_ms > STALL_MIN_MS ? 2 * s->gap_ms : STALL_MIN_MS;
	syncer_watch_closely(s->sync, s->moves >= 3 &&
					      now > s->moved_ms + limit &&
					      now < s->moved_ms + limit +
							    STALL_WATCH_MS);
	syncer_progressing(s->sync, s->moves >= 3 &&
					    now <= s->moved_ms + limit);
}

/* The step worker 0 last noted as the group's trained one, -1 none. */
static int64_t progress_step(const struct sup *s)
{
	return s->trained >= 0 ? s->trained : s->newest_done;
}

/* A commit is noted by the worker that made it (the writer of a step's
 * last part, or worker 0 finishing the job); worker 0 speaks for the
 * group's trained step. */
static void note_progress(struct sup *s, const struct shipper_state *ss,
			  uint64_t now)
{
	int64_t step = progress_step(s);

	if (ss->newest_committed > s->noted_commit) {
		s->noted_commit = ss->newest_committed;
		note(s, "commit", ss->newest_committed, NULL, NULL);
	}
	if (s->id.process_id == 0 && step >= 0 &&
	    now >= s->noted_progress_ms + PROGRESS_EVENT_MS) {
		s->noted_progress_ms = now;
		note(s, "progress", step,
		     s->trained >= 0 ? "SLICE_STEP_FILE" : "checkpoint", NULL);
	}
}

/* The last commits come after the trainers ended. */
static void note_last_commits(struct sup *s)
{
	struct shipper_state ss;

	shipper_get(s->ship, &ss);
	note_progress(s, &ss, mono_ms());
}

static enum sup_phase act_finished_look(struct sup *s,
					const struct control *c)
{
	if (!deletes_qr(s, c))
		note_last_commits(s);
	return P_FINISHED;
}

/* The trainer's signs of progress: new steps, output, SLICE_STEP_FILE
 * (every LOOK_MS), for the hang and stall clocks and the history. */
static enum sup_phase act_look(struct sup *s, const struct control *c)
{
	struct shipper_state ss;
	uint64_t now = mono_ms(), moved = s->trainer.last_output_ms;

	(void)c;
	shipper_get(s->ship, &ss);
	time_upload(s, &ss, now);
	if (ss.newest_done > s->newest_done) {
		s->newest_done = ss.newest_done;
		moved = now;
	}
	if (now >= s->look_ms) {
		s->look_ms = now + LOOK_MS;
		if (note_trained(s))
			moved = now;
		/* Fresh step and committed step for the next regular
		 * heartbeat. */
		publish_as(s, false);
	}
	if (moved > s->progress_ms)
		s->progress_ms = moved;
	watch_stall(s, moved, now);
	note_progress(s, &ss, now);
	return P_RUN;
}

static enum sup_phase act_exited(struct sup *s, const struct control *c)
{
	char how[64];

	(void)c;
	trainer_describe_status(s->trainer.status, how, sizeof(how));
	shipper_kick(s->ship);
	if (WIFEXITED(s->trainer.status) &&
	    WEXITSTATUS(s->trainer.status) == 0) {
		struct syncer_request r = {
			.task = TASK_CHECK_DONE,
			.generation = s->generation,
		};

		trainer_gone(s);
		note(s, "exit", s->trained, how, NULL);
		set_phase(s, P_FINISHED, "the trainer finished");
		publish(s);
		ask(s, &r);
		return P_FINISHED;
	}
	trainer_gone(s);
	note(s, "exit", s->trained, how, NULL);
	ask_bump(s, s->generation, -1, "its trainer ended (%s)", how);
	set_phase(s, P_WAIT_GEN, "the trainer failed");
	snprintf(s->message, sizeof(s->message), "trainer %s", how);
	publish(s);
	return P_WAIT_GEN;
}

static bool hung(const struct sup *s, uint64_t now)
{
	return s->job.hang_timeout_s && now > s->progress_ms &&
	       now - s->progress_ms > (uint64_t)s->job.hang_timeout_s * 1000;
}

static enum sup_phase act_hang(struct sup *s, const struct control *c)
{
	(void)c;
	log_error("the trainer printed nothing and wrote no step for %u s: "
		  "ending it", s->job.hang_timeout_s);
	trainer_gone(s);
	note(s, "hang", s->trained, "no output and no step", NULL);
	ask_bump(s, s->generation, -1,
		 "its trainer hung (no output and no step for %u s)",
		 s->job.hang_timeout_s);
	set_phase(s, P_WAIT_GEN, "the trainer hung");
	publish(s);
	return P_WAIT_GEN;
}

/* The trainer stopped, or outlived its grace period. */
static enum sup_phase act_stopped(struct sup *s, const struct control *c)
{
	if (!s->trainer.exited)
		log_warn("the trainer outlived the %u s grace period: killed",
			 s->job.grace_s);
	trainer_gone(s);
	/* The steps it trained, for what a new generation trains again
	 * (s->generation may be the new one already). */
	note_of(s, s->trainer_generation, "stop", s->trained, s->message,
		NULL);
	if (s->after_stop == P_RESTORE)
		return begin_restore(s, c->generation > s->generation
						? c->generation
						: s->generation);
	return end(s, s->message);
}

/* control.json's deadline is within its lead: the trainer saves a final
 * step now, while there is time to upload it. */
static enum sup_phase act_deadline(struct sup *s, const struct control *c)
{
	uint64_t left = deadline_near(s, c), lead = lead_ms(s), now = mono_ms();

	if (!left || !trainer_alive(s))
		return P_RUN;
	/* A trainer started within the lead (the group just restored a
	 * committed step) has nothing newer to save before maintenance;
	 * before a run's end nothing else is left to do. */
	if (!strcmp(c->deadline.kind, "maintenance") &&
	    s->trainer_since_ms + (lead - left) > now)
		return P_RUN;
	s->deadline = c->deadline;
	s->deadline_at_ms = now + left;
	s->final_step = -1;
	s->resume_asked = false;
	snprintf(s->why, sizeof(s->why), "%s at %s: %.160s", c->deadline.kind,
		 c->deadline.time, c->deadline.about);
	log_warn("deadline in %llu s (%s): the trainer gets SIGTERM and %u s "
		 "to save a final step (lead %llu ms: grace, the last "
		 "upload's %llu ms, margin)", (unsigned long long)(left / 1000),
		 s->why, s->job.grace_s, (unsigned long long)lead,
		 (unsigned long long)s->upload_ms);
	trainer_signal(&s->trainer, SIGTERM);
	set_phase(s, P_EMERGENCY, s->why);
	publish(s);
	return P_EMERGENCY;
}

/* After the final step for a deadline: a run's end leaves the run
 * waiting for capacity; maintenance resumes the group from that step. */
static enum sup_phase after_deadline(struct sup *s,
				     const struct shipper_state *ss, int rc)
{
	char what[64];

	s->final_step = rc ? -1 : ss->newest_uploaded;
	if (s->final_step < 0)
		snprintf(what, sizeof(what), "no final step uploaded");
	else
		snprintf(what, sizeof(what), "final step %lld %s",
			 (long long)s->final_step,
			 ss->newest_committed >= s->final_step ? "committed"
							       : "uploaded");
	if (!strcmp(s->deadline.kind, "run-end")) {
		set_phase(s, P_WAITING, NULL);
		snprintf(s->message, sizeof(s->message),
			 "%.120s at %.30s: %.60s; waiting for capacity",
			 s->deadline.about, s->deadline.time, what);
	} else {
		set_phase(s, P_WAIT_GEN, NULL);
		snprintf(s->message, sizeof(s->message),
			 "%.140s: %.60s; the group resumes from it",
			 s->deadline.about, what);
	}
	log_info("%s", s->message);
	publish(s);
	return s->phase;
}

/* Maintenance checkpointed: the group resumes from the final step. */
static bool resumes(const struct sup *s)
{
	return !strcmp(s->deadline.kind, "maintenance") && !s->resume_asked &&
	       !s->task_pending;
}

/* Once the final step is committed (worker 0 sees it, through its
 * commit passes), or at the deadline itself should worker 0 be gone,
 * the next generation restores it and marks the deadline done. */
static enum sup_phase act_resume(struct sup *s, const struct control *c)
{
	struct syncer_request r = { .task = TASK_BUMP, .restore_step = -1,
				    .deadline = true };
	struct shipper_state ss;

	(void)c;
	if (!resumes(s))
		return P_WAIT_GEN;
	shipper_get(s->ship, &ss);
	if (!(s->id.process_id == 0 && s->final_step >= 0 &&
	      ss.newest_committed >= s->final_step) &&
	    mono_ms() < s->deadline_at_ms)
		return P_WAIT_GEN;
	r.generation = s->generation;
	snprintf(r.reason, sizeof(r.reason),
		 "%.40s: step %lld committed ahead of %.120s; resuming from it",
		 s->id.name, (long long)ss.newest_committed,
		 s->deadline.about);
	log_info("%s", r.reason);
	s->resume_asked = true;
	ask(s, &r);
	return P_WAIT_GEN;
}

/* The trainer is gone or out of time: its last step goes first. */
static enum sup_phase act_finish_emergency(struct sup *s,
					   const struct control *c)
{
	uint64_t flush_deadline = s->deadline_ms + FLUSH_AFTER_GRACE_MS;
	struct shipper_state ss;
	struct err e;
	int rc;

	(void)c;
	/* Before a deadline, the upload may take until the deadline. */
	if (s->deadline.kind[0] && s->deadline_at_ms > flush_deadline)
		flush_deadline = s->deadline_at_ms;

	if (!s->trainer.exited)
		log_warn("the trainer outlived the grace period: killed");
	trainer_gone(s);
	note_of(s, s->trainer_generation, "stop", s->trained, s->why, NULL);
	err_init(&e);
	rc = shipper_flush(s->ship, flush_deadline, &e);
	shipper_get(s->ship, &ss);
	if (rc)
		log_error("the final step could not be uploaded: %s", e.msg);
	else if (ss.newest_uploaded >= 0)
		log_info("final step %lld uploaded%s",
			 (long long)ss.newest_uploaded,
			 ss.newest_committed == ss.newest_uploaded
				 ? " and committed"
				 : "");
	if (s->deadline.kind[0] && !s->notice)
		return after_deadline(s, &ss, rc);
	return end(s, s->why);
}

/* ---- the table ---- */

struct cell {
	enum sup_cell kind;
	action_fn *act;
	const char *name;
	unsigned next;   /* SUP_PHASE_BITs act may leave the machine in */
};

#define B(p) SUP_PHASE_BIT(p)
#define DO(f, to) { SUP_CELL_ACTION, f, #f, to }
#define IGNORED { SUP_CELL_IGNORED, NULL, NULL, 0 }
#define DEFERRED { SUP_CELL_DEFERRED, NULL, NULL, 0 }
#define IMPOSSIBLE { SUP_CELL_IMPOSSIBLE, NULL, NULL, 0 }

/* The syncer's results: the same in every phase that takes them. */
#define RESULTS(restored)                                                      \
	[EV_RESTORED] = restored,                                              \
	[EV_WRITTEN] = DO(act_written, 0),                                     \
	[EV_CHECKED] = DO(act_checked, 0),                                     \
	[EV_DELETED] = DO(act_deleted, B(P_END))

/* What a phase without a trainer heeds in control.json. */
#define FOLLOWS_CONTROL                                                        \
	[EV_CONTROL] = IGNORED,                                                \
	[EV_RUN_ENDED] = DO(act_run_ended, B(P_END)),                          \
	[EV_NEW_GENERATION] = DO(act_new_generation, B(P_RESTORE))

/* A phase the trainer has left: a trainer that exited but was not seen
 * to (the run ended or moved on in the same pass) lingers unnoticed. */
#define NO_TRAINER                                                             \
	[EV_DEADLINE] = IGNORED, [EV_EXITED] = IGNORED, [EV_HANG] = IGNORED,  \
	[EV_GRACE] = IMPOSSIBLE

static const struct cell table[P_COUNT][EV_COUNT] = {
	[P_JOIN] = {
		[EV_NOTICE] = DO(act_notice, B(P_END)),
		[EV_RESTORED] = IMPOSSIBLE, [EV_WRITTEN] = IMPOSSIBLE,
		[EV_CHECKED] = IMPOSSIBLE, [EV_DELETED] = IMPOSSIBLE,
		/* Joining decides on the run's state and generation. */
		[EV_CONTROL] = DO(act_join,
				  B(P_RESTORE) | B(P_WAIT_GEN) | B(P_END)),
		[EV_RUN_ENDED] = IGNORED, [EV_NEW_GENERATION] = IGNORED,
		[EV_RETRY] = IMPOSSIBLE, [EV_LOOK] = IGNORED,
		[EV_DEADLINE] = IGNORED, [EV_EXITED] = IMPOSSIBLE,
		[EV_HANG] = IGNORED, [EV_GRACE] = IMPOSSIBLE,
	},
	[P_RESTORE] = {
		[EV_NOTICE] = DO(act_notice, B(P_END)),
		RESULTS(DO(act_restored, B(P_RESTORE) | B(P_RUN) |
					 B(P_WAIT_GEN) | B(P_WAITING) |
					 B(P_END))),
		/* The restore's result follows a newer generation. */
		[EV_CONTROL] = IGNORED,
		[EV_RUN_ENDED] = DO(act_run_ended, B(P_END)),
		[EV_NEW_GENERATION] = IGNORED,
		[EV_RETRY] = DO(act_retry, 0), [EV_LOOK] = IGNORED,
		NO_TRAINER,
	},
	[P_RUN] = {
		[EV_NOTICE] = DO(act_notice, B(P_EMERGENCY) | B(P_END)),
		RESULTS(IGNORED),
		[EV_CONTROL] = IGNORED,
		[EV_RUN_ENDED] = DO(act_run_ended, B(P_STOP) | B(P_END)),
		[EV_NEW_GENERATION] = DO(act_new_generation,
					 B(P_STOP) | B(P_RESTORE)),
		[EV_RETRY] = DO(act_retry, 0),
		[EV_DEADLINE] = DO(act_deadline, B(P_EMERGENCY)),
		[EV_LOOK] = DO(act_look, 0),
		[EV_EXITED] = DO(act_exited, B(P_FINISHED) | B(P_WAIT_GEN)),
		[EV_HANG] = DO(act_hang, B(P_WAIT_GEN)),
		[EV_GRACE] = IMPOSSIBLE,
	},
	[P_STOP] = {
		[EV_NOTICE] = DO(act_notice, B(P_EMERGENCY) | B(P_END)),
		RESULTS(IGNORED),
		/* Where it goes was decided when it began. */
		[EV_CONTROL] = IGNORED, [EV_RUN_ENDED] = IGNORED,
		[EV_NEW_GENERATION] = IGNORED, [EV_RETRY] = IGNORED,
		[EV_DEADLINE] = IGNORED, [EV_LOOK] = IGNORED,
		[EV_EXITED] = DO(act_stopped, B(P_RESTORE) | B(P_END)),
		[EV_HANG] = IGNORED,
		[EV_GRACE] = DO(act_stopped, B(P_RESTORE) | B(P_END)),
	},
	[P_WAIT_GEN] = {
		[EV_NOTICE] = DO(act_notice, B(P_END)),
		RESULTS(IGNORED),
		FOLLOWS_CONTROL,
		[EV_RETRY] = DO(act_retry, 0),
		[EV_LOOK] = DO(act_resume, 0),
		NO_TRAINER,
	},
	[P_FINISHED] = {
		[EV_NOTICE] = DO(act_notice, B(P_END)),
		RESULTS(IGNORED),
		[EV_CONTROL] = IGNORED,
		[EV_RUN_ENDED] = DO(act_finished_ended, B(P_END)),
		[EV_NEW_GENERATION] = DO(act_new_generation, B(P_RESTORE)),
		[EV_RETRY] = DO(act_finished_retry, 0),
		[EV_LOOK] = DO(act_finished_look, 0),
		NO_TRAINER,
	},
	/* Only the trainer's end counts; the syncer's results wait for
	 * the phase after. */
	[P_EMERGENCY] = {
		[EV_NOTICE] = IGNORED,
		[EV_RESTORED] = DEFERRED, [EV_WRITTEN] = DEFERRED,
		[EV_CHECKED] = DEFERRED, [EV_DELETED] = DEFERRED,
		[EV_CONTROL] = IGNORED, [EV_RUN_ENDED] = IGNORED,
		[EV_NEW_GENERATION] = IGNORED, [EV_RETRY] = IGNORED,
		[EV_DEADLINE] = IGNORED, [EV_LOOK] = IGNORED,
		[EV_EXITED] = DO(act_finish_emergency,
				 B(P_WAIT_GEN) | B(P_WAITING) | B(P_END)),
		[EV_HANG] = IGNORED,
		[EV_GRACE] = DO(act_finish_emergency,
				B(P_WAIT_GEN) | B(P_WAITING) | B(P_END)),
	},
	[P_WAITING] = {
		[EV_NOTICE] = DO(act_notice, B(P_END)),
		RESULTS(IGNORED),
		FOLLOWS_CONTROL,
		[EV_RETRY] = DO(act_retry, 0),
		[EV_LOOK] = IGNORED,
		NO_TRAINER,
	},
	/* The loop ends with the pass that reaches it. */
	[P_END] = {
		[EV_NOTICE] = IMPOSSIBLE, [EV_RESTORED] = IMPOSSIBLE,
		[EV_WRITTEN] = IMPOSSIBLE, [EV_CHECKED] = IMPOSSIBLE,
		[EV_DELETED] = IMPOSSIBLE, [EV_CONTROL] = IMPOSSIBLE,
		[EV_RUN_ENDED] = IMPOSSIBLE, [EV_NEW_GENERATION] = IMPOSSIBLE,
		[EV_RETRY] = IMPOSSIBLE, [EV_DEADLINE] = IMPOSSIBLE,
		[EV_LOOK] = IMPOSSIBLE, [EV_EXITED] = IMPOSSIBLE,
		[EV_HANG] = IMPOSSIBLE, [EV_GRACE] = IMPOSSIBLE,
	},
};

void sup_table_view(enum sup_phase p, enum sup_event ev,
		    struct sup_cell_view *out)
{
	const struct cell *k = &table[p][ev];

	out->kind = k->kind;
	out->action = k->name;
	out->next = k->kind == SUP_CELL_ACTION ? k->next | B(p) : 0;
}

static bool is_result(enum sup_event ev)
{
	return ev == EV_RESTORED || ev == EV_WRITTEN || ev == EV_CHECKED ||
	       ev == EV_DELETED;
}

static enum sup_event result_event(enum syncer_task t)
{
	switch (t) {
	case TASK_RESTORE: return EV_RESTORED;
	case TASK_BUMP:
	case TASK_SET_STATE: return EV_WRITTEN;
	case TASK_CHECK_DONE: return EV_CHECKED;
	case TASK_DELETE_QR: return EV_DELETED;
	case TASK_NONE: break;
	}
	return EV_COUNT;
}

/* Whether ev is raised now; c is control.json, NULL before it was read
 * (nothing but a notice or the trainer's end counts then). */
static bool raised(struct sup *s, enum sup_event ev, const struct control *c,
		   uint64_t now)
{
	if (is_result(ev) && c && !s->have_result)
		s->have_result = syncer_result(s->sync, &s->result);
	switch (ev) {
	case EV_NOTICE: return s->notice;
	case EV_RESTORED:
	case EV_WRITTEN:
	case EV_CHECKED:
	case EV_DELETED:
		return s->have_result && result_event(s->result.task) == ev;
	case EV_CONTROL: return c;
	case EV_RUN_ENDED: return c && strcmp(c->state, "running");
	case EV_NEW_GENERATION:
		return c && !strcmp(c->state, "running") &&
		       c->generation > s->generation;
	case EV_RETRY:
		return c && s->retry_ms && now >= s->retry_ms &&
		       !s->task_pending;
	case EV_DEADLINE: return c && deadline_near(s, c);
	case EV_LOOK: return c;
	case EV_EXITED: return s->trainer.exited;
	case EV_HANG: return hung(s, now);
	case EV_GRACE: return s->deadline_ms && now >= s->deadline_ms;
	case EV_COUNT: break;
	}
	return false;
}

/* One pass over the events, in their order, until one moves the machine
 * to another phase. Returns whether one did. */
static bool pass(struct sup *s)
{
	struct control control;
	const struct control *c =
		syncer_control(s->sync, &control) ? &control : NULL;
	enum sup_phase from = s->phase;

	for (int ev = 0; ev < EV_COUNT && s->phase == from; ev++) {
		const struct cell *k = &table[from][ev];
		enum sup_phase to;

		if (!raised(s, ev, c, mono_ms()) ||
		    k->kind == SUP_CELL_DEFERRED)
			continue;
		if (is_result(ev)) {
			s->have_result = false;
			s->task_pending = false;
		}
		if (k->kind != SUP_CELL_ACTION) {
			if (k->kind != SUP_CELL_IGNORED)
				log_error("%s in phase %s cannot happen",
					  sup_event_names[ev],
					  sup_phase_names[from]);
			continue;
		}
		to = k->act(s, c);
		if (to != s->phase || !((k->next | B(from)) & B(to)))
			log_error("%s in phase %s led to %s, which the table "
				  "does not say", sup_event_names[ev],
				  sup_phase_names[from],
				  sup_phase_names[s->phase]);
	}
	return s->phase != from;
}

#undef B

/* The milliseconds poll may sleep: until the nearest time one of the
 * phase's actions waits for, -1 for none (the pipe and the trainer's
 * output wake it). In the run phase the step file is read every LOOK_MS,
 * which bounds the hang, stall, deadline and progress-event clocks the
 * look feeds. */
static int wait_ms(struct sup *s)
{
	uint64_t next = UINT64_MAX, now = mono_ms();
	struct control c;
	/* A finished worker deleting its queued resource waits for that. */
	bool deleting = s->phase == P_FINISHED &&
			syncer_control(s->sync, &c) && deletes_qr(s, &c);

	if (s->deadline_ms)
		next = s->deadline_ms;
	if (s->retry_ms && !s->task_pending && !deleting &&
	    table[s->phase][EV_RETRY].kind == SUP_CELL_ACTION &&
	    s->retry_ms < next)
		next = s->retry_ms;
	if (s->phase == P_RUN && s->look_ms < next)
		next = s->look_ms;
	if (s->phase == P_WAIT_GEN && resumes(s) && s->deadline_at_ms < next)
		next = s->deadline_at_ms;
	if (s->phase == P_FINISHED && !deleting && s->id.process_id == 0 &&
	    progress_step(s) >= 0 &&
	    s->noted_progress_ms + PROGRESS_EVENT_MS < next)
		next = s->noted_progress_ms + PROGRESS_EVENT_MS;
	if (next == UINT64_MAX)
		return -1;
	if (next <= now)
		return 0;
	return next - now > INT_MAX ? INT_MAX : (int)(next - now);
}

/* ---- set-up and the loop ---- */

static int load_job(struct sup *s, struct err *e)
{
	struct store *st;
	char *text = NULL;
	size_t len = 0;
	int rc = store_open(&st, s->o->run_url, e);

	if (rc)
		return rc;
	for (int attempt = 0;; attempt++) {
		rc = store_read(st, RUN_JOB, 1 << 20, &text, &len, NULL, e);
		if (!rc || rc == CLOUD_ENOTFOUND || rc == CLOUD_EURL ||
		    attempt >= 30)
			break;
		log_warn("reading job.json: %s (retrying)", e->msg);
		sleep(2);
	}
	store_close(st);
	if (rc)
		return rc;
	rc = job_parse(text, len, &s->job, e);
	free(text);
	return rc;
}

/* In a pod the state file goes with the pod; this worker's heartbeat in
 * the bucket says which generation an earlier pod of it ran (0 none). A
 * bucket that cannot say is taken for none, with a warning. */
static int64_t earlier_pod_generation(const struct sup *s)
{
	struct worker_status *v = NULL;
	struct store *st = NULL;
	int64_t g = 0;
	size_t n = 0;
	struct err e;

	err_init(&e);
	if (store_open(&st, s->o->run_url, &e) ||
	    status_list(st, &v, &n, &e))
		log_warn("reading the heartbeats: %s (taking this for the "
			 "worker's first pod)", e.msg);
	for (size_t i = 0; i < n; i++)
		if (v[i].slice == s->id.slice && v[i].worker == s->id.worker)
			g = v[i].generation;
	free(v);
	if (st)
		store_close(st);
	return g;
}

static int setup(struct sup *s, struct err *e)
{
	const struct supervise_options *o = s->o;
	struct shipper_config sc = { 0 };
	struct syncer_config yc = { 0 };
	int rc;

	/* Before anything in the directory is touched. */
	if ((rc = sup_lock(o->state_dir, &s->lock_fd, e)))
		return rc;
	snprintf(s->state_path, sizeof(s->state_path), "%s/state.json",
		 o->state_dir);
	snprintf(s->ckpt_dir, sizeof(s->ckpt_dir), "%s/checkpoints",
		 o->state_dir);
	snprintf(s->spool_dir, sizeof(s->spool_dir), "%s/spool", o->state_dir);
	snprintf(s->restore_dir, sizeof(s->restore_dir), "%s/restore",
		 o->state_dir);
	snprintf(s->code_dir, sizeof(s->code_dir), "%s/code", o->state_dir);
	snprintf(s->log_dir, sizeof(s->log_dir), "%s/logs", o->state_dir);
	snprintf(s->progress_dir, sizeof(s->progress_dir), "%s/progress",
		 o->state_dir);
	if (fs_mkdir_p(s->ckpt_dir, 0755, e) ||
	    fs_mkdir_p(s->spool_dir, 0755, e) ||
	    fs_mkdir_p(s->log_dir, 0755, e) ||
	    fs_mkdir_p(s->progress_dir, 0755, e))
		return e->code;
	if ((rc = boot_id_read(s->boot_id, e)) ||
	    (rc = sup_state_load(s->state_path, &s->st, &s->st_found, e)) ||
	    (rc = load_job(s, e)) ||
	    (rc = o->slurm ? identity_from_slurm(&s->id, &s->job, e)
		  : o->pod   ? identity_from_pod(&s->id, &s->job, e)
			     : identity_resolve(&s->id, &s->job, o->slice,
					    o->worker, e)))
		return rc;
	log_info("%s of run %s (%u workers); boot %s", s->id.name,
		 s->job.name, s->id.num_processes, s->boot_id);
	if (o->pod) {
		s->earlier_pod_gen = earlier_pod_generation(s);
		log_info("in a pod, JobSet restart attempt %u; an earlier pod "
			 "of this worker ran generation %lld",
			 s->id.restart_attempt, (long long)s->earlier_pod_gen);
	}
	/* A supervisor killed outright left its trainer running. */
	s->orphan = s->st_found && s->st.trainer_pgid;
	if (s->orphan)
		trainer_kill_orphan(s->st.trainer_pgid, s->st.trainer_start);
	s->st.trainer_pgid = 0;
	s->ready = true;
	/* SA_RESTART: the loop looks at the pipe, not at EINTR. */
	if ((rc = self_pipe_open(s->pipe, e)) ||
	    (rc = self_pipe_catch(s->pipe[1], caught, N_CAUGHT, true, e)))
		return rc;
	signal(SIGPIPE, SIG_IGN);
	sc.run_url = o->run_url;
	sc.ckpt_dir = s->ckpt_dir;
	sc.spool_dir = s->spool_dir;
	sc.part = s->id.name;
	sc.parts_expected = s->id.num_processes;
	sc.prune = s->id.process_id == 0;
	sc.keep = s->job.keep;
	sc.keep_every = s->job.keep_every;
	sc.spool_bytes = (uint64_t)s->job.spool_mb << 20;
	sc.notify_fd = s->pipe[1];
	sc.poll_ms = 200;
	yc.run_url = o->run_url;
	yc.job = &s->job;
	yc.part = s->id.name;
	yc.restore_dir = s->restore_dir;
	yc.code_dir = s->code_dir;
	yc.n_workers = s->id.num_processes;
	yc.notify_fd = s->pipe[1];
	yc.control_poll_ms = o->control_poll_ms ? o->control_poll_ms : 1000;
	yc.close_poll_ms = yc.control_poll_ms < CLOSE_POLL_MS
				   ? yc.control_poll_ms
				   : CLOSE_POLL_MS;
	if ((rc = shipper_start(&s->ship, &sc, e)) ||
	    (rc = syncer_start(&s->sync, &yc, e)))
		return rc;
	if (!o->no_metadata && (rc = watch_start(&s->watch, s->pipe[1], e)))
		return rc;
	if (s->id.process_id == 0 && s->job.tpu_name && s->job.tpu_project &&
	    s->job.tpu_zone) {
		struct err pe;

		err_init(&pe);
		/* Without it the run goes on; the metadata notices remain. */
		if (deadline_poller_start(&s->poller, o->run_url, &s->job, &pe))
			log_warn("not reading the queued resource's deadlines: "
				 "%s", pe.msg);
	}
	if ((rc = events_start(o->run_url, s->id.name, o->state_dir, e)))
		return rc;
	snprintf(s->message, sizeof(s->message), "{\"boot_id\":\"%.40s\"}",
		 s->boot_id);
	note(s, "boot", -1, s->orphan ? "restarted" : "started", s->message);
	s->message[0] = 0;
	return 0;
}

static void drain_pipe(struct sup *s)
{
	char buf[256];
	ssize_t n;

	while ((n = read(s->pipe[0], buf, sizeof(buf))) > 0)
		for (ssize_t i = 0; i < n; i++)
			if ((buf[i] == SIGTERM || buf[i] == SIGINT ||
			     buf[i] == SIGHUP) && !s->notice) {
				s->notice = true;
				snprintf(s->why, sizeof(s->why),
					 "SIGTERM: the machine is going away");
			}
	if (s->watch && !s->notice) {
		char what[256];

		if (watch_events(s->watch, what, sizeof(what))) {
			s->notice = true;
			snprintf(s->why, sizeof(s->why), "metadata: %.200s",
				 what);
		}
	}
}

/* As a container's first process (a pod), the supervisor inherits every
 * orphan of the trainer's tree: reaped here, the trainer itself left to
 * trainer_reap (waitid's WNOWAIT only looks). */
static void reap_orphans(struct sup *s)
{
	for (int i = 0; i < 64; i++) {
		siginfo_t info;

		memset(&info, 0, sizeof(info));
		if (waitid(P_ALL, 0, &info, WEXITED | WNOHANG | WNOWAIT) ||
		    !info.si_pid || info.si_pid == s->trainer.pid)
			return;
		waitpid(info.si_pid, NULL, WNOHANG);
	}
}

/* A pass that moved the machine is followed by another at once: the new
 * phase looks at what the old one left. */
static void loop(struct sup *s)
{
	bool init = getpid() == 1, moved = false;

	while (s->phase != P_END) {
		struct pollfd p[2] = { { s->pipe[0], POLLIN, 0 },
				       { s->trainer.out_fd, POLLIN, 0 } };

		if (poll(p, s->trainer.out_fd >= 0 ? 2 : 1,
			 moved ? 0 : wait_ms(s)) < 0 &&
		    errno != EINTR)
			break;
		drain_pipe(s);
		if (s->trainer.pid) {
			trainer_drain(&s->trainer);
			trainer_reap(&s->trainer);
		}
		if (init)
			reap_orphans(s);
		moved = pass(s);
	}
}

/* What a pod's exit status tells Kubernetes (supervise.h). */
static int pod_status(struct sup *s)
{
	struct control c;

	if (s->notice)
		return SUPERVISE_EXIT_NOTICE;
	if (s->broken)
		return 1;
	if (syncer_control(s->sync, &c) && !strcmp(c.state, "failed"))
		return SUPERVISE_EXIT_FAILED;
	return 0;
}

int supervise(const struct supervise_options *o)
{
	struct sup s = { .o = o, .phase = P_JOIN, .pipe = { -1, -1 },
			 .lock_fd = -1,
			 .newest_done = -1, .trained = -1,
			 .timed_step = -1 };
	struct err e;
	int status = 0;

	err_init(&e);
	job_init(&s.job);
	identity_init(&s.id);
	trainer_init(&s.trainer);
	if (setup(&s, &e)) {
		log_error("%s", e.msg);
		status = 1;
	} else {
		loop(&s);
		if (o->pod)
			status = pod_status(&s);
	}
	trainer_release(&s.trainer);
	deadline_poller_stop(s.poller);
	watch_stop(s.watch);
	if (s.ship)
		shipper_stop(s.ship);
	if (s.sync)
		syncer_stop(s.sync, mono_ms() + 10000);
	/* What the store does not take by then stays in the spool, for
	 * this worker's next start. */
	events_stop(mono_ms() + 5000);
	if (s.ready)
		save_state(&s);
	self_pipe_release(s.pipe, caught, N_CAUGHT);
	identity_release(&s.id);
	job_release(&s.job);
	if (s.lock_fd >= 0)
		close(s.lock_fd);
	return status;
}
