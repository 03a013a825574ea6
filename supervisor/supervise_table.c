/*
 * supervise_table.c: the supervisor's machine (supervise_table.h): the
 * names of its phases and events, the transitions it may make, a table of
 * phases by events whose cells are small actions, the pass of the loop
 * that dispatches on it, and how long the loop may sleep.
 */
#include "supervisor/sup.h"
#include "checkpoint/checkpoint.h"
#include "supervisor/deadline.h"

#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

/* Time after the grace period for the emergency step's upload: systemd
 * waits grace + 30 s (the unit's TimeoutStopSec) before SIGKILL. */
#define FLUSH_AFTER_GRACE_MS 25000
#define RETRY_MS 2000
/* A trainer quiet for twice its usual gap between signs of progress, and
 * at least STALL_MIN_MS, is stalled: control.json is then read more
 * often (supervise.c's CLOSE_POLL_MS) for up to STALL_WATCH_MS, since a
 * failed peer stalls every trainer of the group until it restarts. */
#define STALL_MIN_MS 500
#define STALL_WATCH_MS 30000
/* How often the run phase reads SLICE_STEP_FILE when inotify cannot say
 * it changed: the hang clock counts in seconds. */
#define LOOK_FALLBACK_MS 1000
/* control.json's deadline is on the wall clock, the loop's sleep on the
 * monotonic one: a sleep towards the deadline's lead is cut to this, so
 * a clock stepped forward costs at most this much of the margin. */
#define DEADLINE_RECHECK_MS 5000
/* How often worker 0 records the trained step in the run's history (the
 * report's step rate): 720 events an hour, from one worker. */
#define PROGRESS_EVENT_MS 5000

#define B(p) SUP_PHASE_BIT(p)

const char *const sup_phase_names[P_COUNT] = {
	[P_JOIN] = "join", [P_RESTORE] = "restore",
	[P_PREFLIGHT] = "preflight", [P_RUN] = "run",
	[P_STOP] = "stop", [P_WAIT_GEN] = "wait-generation",
	[P_FINISHED] = "finished", [P_EMERGENCY] = "emergency",
	[P_WAITING] = "wait-capacity", [P_END] = "end",
};

const char *const sup_event_names[EV_COUNT] = {
	[EV_NOTICE] = "notice", [EV_RESTORED] = "restored",
	[EV_WRITTEN] = "control-written", [EV_CHECKED] = "done-checked",
	[EV_DELETED] = "queued-resource-deleted", [EV_CONTROL] = "control",
	[EV_RUN_ENDED] = "run-ended", [EV_NEW_GENERATION] = "new-generation",
	[EV_RETRY] = "retry", [EV_DEADLINE] = "deadline", [EV_LOOK] = "look",
	[EV_EXITED] = "trainer-exited", [EV_HANG] = "hang",
	[EV_GRACE] = "grace-over",
};

/* RESTORE may enter itself again: a newer generation came while it
 * restored. A trainer is alive only in RUN, STOP and EMERGENCY, so only
 * they (RUN through a deadline, STOP through a notice) reach EMERGENCY;
 * a preflight gives way at once. */
const unsigned sup_allowed[P_COUNT] = {
	[P_JOIN] = B(P_RESTORE) | B(P_WAIT_GEN) | B(P_END),
	[P_RESTORE] = B(P_RESTORE) | B(P_PREFLIGHT) | B(P_RUN) | B(P_WAIT_GEN) |
		      B(P_WAITING) | B(P_END),
	[P_PREFLIGHT] = B(P_RESTORE) | B(P_RUN) | B(P_WAIT_GEN) |
			B(P_WAITING) | B(P_END),
	[P_RUN] = B(P_STOP) | B(P_RESTORE) | B(P_EMERGENCY) | B(P_FINISHED) |
		  B(P_WAIT_GEN) | B(P_END),
	[P_STOP] = B(P_RESTORE) | B(P_EMERGENCY) | B(P_END),
	[P_WAIT_GEN] = B(P_RESTORE) | B(P_END),
	[P_FINISHED] = B(P_RESTORE) | B(P_END),
	[P_EMERGENCY] = B(P_WAIT_GEN) | B(P_WAITING) | B(P_END),
	[P_WAITING] = B(P_RESTORE) | B(P_END),
	[P_END] = 0,
};

/* ---- transitions the actions share ---- */

static enum sup_phase begin_stop(struct sup *s, enum sup_phase after,
				 const char *why)
{
	trainer_signal(&s->trainer, SIGTERM);
	s->after_stop = after;
	sup_set_phase(s, P_STOP, why);
	sup_publish(s);
	return P_STOP;
}

/* Waits for the next generation, saying why in the heartbeat. */
static enum sup_phase wait_generation(struct sup *s, const char *why)
{
	sup_set_phase(s, P_WAIT_GEN, why);
	sup_publish(s);
	return P_WAIT_GEN;
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
	sup_set_phase(s, P_RESTORE, NULL);
	snprintf(s->message, sizeof(s->message),
		 "restoring for generation %lld", (long long)generation);
	sup_publish(s);
	sup_ask(s, &r);
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
	sup_note(s, "end", -1, why, details);
	sup_set_phase(s, P_END, why);
	sup_publish(s);
	return P_END;
}

static enum sup_phase begin_emergency(struct sup *s)
{
	log_warn("emergency: %s; the trainer gets SIGTERM and %u s to save "
		 "a final step", s->why, s->job.grace_s);
	trainer_signal(&s->trainer, SIGTERM);
	sup_set_phase(s, P_EMERGENCY, s->why);
	s->st.preempted = true;
	sup_save_state(s);
	sup_publish(s);
	return P_EMERGENCY;
}

/* ---- the actions: one per cell of the table below ---- */

/* Each takes control.json as last read (NULL before the first read) and
 * returns the phase it leaves the machine in. */
typedef enum sup_phase action_fn(struct sup *s, const struct control *c);

static bool trainer_alive(const struct sup *s)
{
	return s->trainer.pid && !s->trainer.exited;
}

/* A notice on a VM: the group restarts for it now, as the
 * infrastructure's, while this host saves its final step. Its peers would
 * otherwise fail or hang waiting for it, and those restarts would look
 * like their trainers' failures. In a pod or a Slurm step the scheduler's
 * restart is the group's (act_join). */
static void bump_for_notice(struct sup *s)
{
	struct gen_cause cause;

	if (s->o->managed)
		return;
	sup_cause(s, &cause, CAUSE_INFRA,
		  strstr(s->why, "maintenance") ? "maintenance"
		  : strncmp(s->why, "SIGTERM", 7) ? "preemption"
						  : "shutdown");
	sup_ask_bump(s, s->generation, -1, &cause, "%s", s->why);
}

/* SIGTERM or a metadata notice: the trainer's final step, or the end. */
static enum sup_phase act_notice(struct sup *s, const struct control *c)
{
	(void)c;
	sup_note(s, "notice", s->trained, s->why, NULL);
	if (trainer_alive(s)) {
		bump_for_notice(s);
		return begin_emergency(s);
	}
	s->st.preempted = true;
	sup_save_state(s);
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
		sup_ask(s, &d);
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
	struct gen_cause cause;
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
		sup_cause(s, &cause, CAUSE_INFRA,
			  strcmp(s->st.boot_id, s->boot_id) ? "reset"
			  : s->st.preempted		    ? "preemption"
							    : "host-gone");
		s->st.preempted = false;
		s->generation = c->generation;
		sup_save_state(s);
		sup_ask_bump(s, c->generation, -1, &cause, "%s", why);
		return wait_generation(s, why);
	}
	s->st.preempted = false;
	if (s->o->managed && s->id.restart_attempt > c->jobset_restart) {
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
		log_warn("event: %s %u (control.json records %lld): joining "
			 "as the next generation",
			 s->o->slurm ? "Slurm requeue" : "JobSet restart attempt",
			 s->id.restart_attempt, (long long)c->jobset_restart);
		s->generation = c->generation;
		sup_ask(s, &r);
		return wait_generation(s, r.reason);
	}
	if (s->o->managed && s->earlier_worker_gen == c->generation) {
		/* This worker's pod was replaced without a new restart
		 * attempt (a JobSet submitted again): the generation's
		 * step was fixed long ago, the group restarts anew. */
		s->generation = c->generation;
		sup_cause(s, &cause, CAUSE_INFRA, "pod-replaced");
		sup_ask_bump(s, c->generation, -1, &cause,
			     "a new %s replaces the one that ran generation "
			     "%lld", s->o->vertex ? "replica" : "pod",
			     (long long)c->generation);
		return wait_generation(s, "a new pod rejoins");
	}
	return begin_restore(s, c->generation);
}

static enum sup_phase act_restored(struct sup *s, const struct control *c)
{
	const struct syncer_result *r = &s->result;
	struct gen_cause cause;

	if (r->rc == 0) {
		s->restored = r->step;
		s->have_code = r->code;
		if (r->step > 0)
			log_info("restored step %lld", (long long)r->step);
		sup_note(s, "restore", r->step, NULL,
			 r->step <= 0 ? NULL
			 : r->from_local ? "{\"source\":\"local\"}"
			 : r->from_peer ? "{\"source\":\"peer\"}"
					: "{\"source\":\"bucket\"}");
		if (c->generation > s->generation)
			return begin_restore(s, c->generation);
		return sup_start_trainer(s);
	}
	if (r->rc == CLOUD_EPRECONDITION) {
		/* The generation moved on while we asked: follow it. */
		sup_set_phase(s, P_WAIT_GEN, "the generation moved on");
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
		sup_ask(s, &f);
		return wait_generation(s, "the code bundle cannot be "
					  "unpacked");
	}
	if (!r->bundle_failed && r->fallback_step >= 0 &&
	    (r->rc == CLOUD_ECORRUPT || r->rc == CLOUD_ENOTFOUND ||
	     r->rc == CKPT_EUNSAFE)) {
		log_error("cannot restore: %s", r->error);
		sup_cause(s, &cause, CAUSE_INFRA, "bad-checkpoint");
		sup_ask_bump(s, s->generation, r->fallback_step, &cause,
			     "its part of the checkpoint is bad (%s); "
			     "restarting from step %lld", r->error,
			     (long long)r->fallback_step);
		sup_set_phase(s, P_WAIT_GEN, "a bad checkpoint part");
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
	if (s->result.quarantined && sup_quarantined(s))
		return end(s, "this host is quarantined");
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
	sup_ask(s, &s->last_req);
	return s->phase;
}

/* While its queued resource is being deleted, a finished worker waits
 * for that alone; its last commits are noted at the end. */
static enum sup_phase act_finished_retry(struct sup *s,
					 const struct control *c)
{
	return deletes_qr(s, c) ? s->phase : act_retry(s, c);
}

/* Quiet for longer than this after its latest sign, a trainer is
 * stalled. */
static uint64_t stall_limit(const struct sup *s)
{
	return 2 * s->gap_ms > STALL_MIN_MS ? 2 * s->gap_ms : STALL_MIN_MS;
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
	limit = stall_limit(s);
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
		sup_note(s, "commit", ss->newest_committed, NULL, NULL);
	}
	if (s->id.process_id == 0 && step >= 0 &&
	    now >= s->noted_progress_ms + PROGRESS_EVENT_MS) {
		char times[sizeof(((struct event *)0)->details)];

		s->noted_progress_ms = now;
		step_clock_take(&s->step_clock, times, sizeof(times));
		sup_note(s, "progress", step,
			 s->trained >= 0 ? "SLICE_STEP_FILE" : "checkpoint",
			 times);
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
 * (when inotify says it changed, else every LOOK_FALLBACK_MS), for the
 * hang and stall clocks and the history. */
static enum sup_phase act_look(struct sup *s, const struct control *c)
{
	struct shipper_state ss;
	uint64_t now = mono_ms(), moved = s->trainer.last_output_ms;

	(void)c;
	s->looked_ms = now;
	shipper_get(s->ship, &ss);
	sup_time_upload(s, &ss, now);
	if (ss.newest_done > s->newest_done) {
		s->newest_done = ss.newest_done;
		moved = now;
	}
	if (s->step_news || (s->steps.fd < 0 && now >= s->look_ms)) {
		s->step_news = false;
		s->look_ms = now + LOOK_FALLBACK_MS;
		if (sup_note_trained(s))
			moved = now;
	}
	/* Fresh step and committed step for the next regular heartbeat. */
	sup_publish_as(s, false);
	if (moved > s->progress_ms)
		s->progress_ms = moved;
	watch_stall(s, moved, now);
	note_progress(s, &ss, now);
	return P_RUN;
}

static enum sup_phase act_exited(struct sup *s, const struct control *c)
{
	struct gen_cause cause;
	char how[64];
	bool ok;

	(void)c;
	trainer_describe_status(s->trainer.status, how, sizeof(how));
	shipper_kick(s->ship);
	/* The status goes with the trainer. */
	ok = WIFEXITED(s->trainer.status) &&
	     WEXITSTATUS(s->trainer.status) == 0;
	sup_trainer_cause(s, &cause);
	sup_trainer_gone(s);
	sup_note(s, "exit", s->trained, how, NULL);
	if (ok) {
		struct syncer_request r = {
			.task = TASK_CHECK_DONE,
			.generation = s->generation,
		};

		sup_set_phase(s, P_FINISHED, "the trainer finished");
		sup_publish(s);
		sup_ask(s, &r);
		return P_FINISHED;
	}
	sup_ask_bump(s, s->generation, -1, &cause, "its trainer ended (%s%s)",
		     how, !strcmp(cause.kind, "oom") ? ", killed for memory"
		     : s->notice ? ", while a notice was pending" : "");
	sup_set_phase(s, P_WAIT_GEN, "the trainer failed");
	snprintf(s->message, sizeof(s->message), "trainer %s", how);
	sup_publish(s);
	return P_WAIT_GEN;
}

/* The trainer trained no step since it started. */
static bool cause_no_step(const struct sup *s)
{
	return s->trained < 0 || s->trained <= s->restored;
}

static bool hung(const struct sup *s, uint64_t now)
{
	return s->job.hang_timeout_s && now > s->progress_ms &&
	       now - s->progress_ms > (uint64_t)s->job.hang_timeout_s * 1000;
}

static enum sup_phase act_hang(struct sup *s, const struct control *c)
{
	struct gen_cause cause;
	char details[sizeof(((struct event *)0)->details)];

	log_error("the trainer printed nothing and wrote no step for %u s: "
		  "taking its forensics, then ending it",
		  s->job.hang_timeout_s);
	sup_hang_forensics(s, details, sizeof(details));
	sup_trainer_gone(s);
	sup_note(s, "hang", s->trained, "no output and no step",
		 *details ? details : NULL);
	/* Silent from its start in a generation the infrastructure began:
	 * the group waits for hosts that are coming back, no trainer hung. */
	if (c && c->generation == s->generation &&
	    c->cause.cls == CAUSE_INFRA && cause_no_step(s))
		sup_cause(s, &cause, CAUSE_INFRA, "waiting-for-hosts");
	else
		sup_cause(s, &cause, CAUSE_HANG, "hang");
	sup_ask_bump(s, s->generation, -1, &cause,
		     "its trainer hung (no output and no step for %u s)",
		     s->job.hang_timeout_s);
	if (*details)
		sup_ship_forensics(s);
	return wait_generation(s, "the trainer hung");
}

/* ---- the preflight (preflight.c) ---- */

/* Its verdict: a pass starts the trainer. A failure in a pod or a Slurm
 * step ends the supervisor, whose exit status has the scheduler replace
 * the host; elsewhere the host waits a back-off and asks the group to
 * restart, which runs every preflight again, until the restarts run out
 * and the run fails naming the host. */
static enum sup_phase preflight_over(struct sup *s, bool timed_out)
{
	struct syncer_request r = { .task = TASK_BUMP,
				    .generation = s->generation,
				    .restore_step = -1 };
	char why[256];

	if (sup_preflight_verdict(s, timed_out, why, sizeof(why)))
		return sup_start_trainer(s);
	if (s->o->managed) {
		s->preflight_failed = true;
		sup_cordon(s, "SLICE_PREFLIGHT_CORDON");
		return end(s, why);
	}
	snprintf(r.reason, sizeof(r.reason), "%.48s: %.200s", s->id.name, why);
	sup_cause(s, &r.cause, CAUSE_PREFLIGHT, "preflight");
	cause_set_tail(&r.cause, why);
	wait_generation(s, why);
	s->last_req = r;
	s->retry_ms = mono_ms() + sup_preflight_backoff_ms();
	return P_WAIT_GEN;
}

static enum sup_phase act_preflight_exited(struct sup *s,
					   const struct control *c)
{
	(void)c;
	return preflight_over(s, false);
}

static enum sup_phase act_preflight_timeout(struct sup *s,
					    const struct control *c)
{
	(void)c;
	return preflight_over(s, true);
}

/* A notice, the run's end or a newer generation: the preflight is ended
 * at once (it has nothing to save) and the rest is as without a
 * trainer. */
static void drop_preflight(struct sup *s)
{
	log_info("preflight ended before its verdict");
	trainer_release(&s->trainer);
	trainer_init(&s->trainer);
	sup_save_state(s);
}

static enum sup_phase act_preflight_notice(struct sup *s,
					   const struct control *c)
{
	drop_preflight(s);
	return act_notice(s, c);
}

static enum sup_phase act_preflight_ended(struct sup *s,
					  const struct control *c)
{
	drop_preflight(s);
	return act_run_ended(s, c);
}

static enum sup_phase act_preflight_new_generation(struct sup *s,
						   const struct control *c)
{
	drop_preflight(s);
	return act_new_generation(s, c);
}

/* The trainer stopped, or outlived its grace period. */
static enum sup_phase act_stopped(struct sup *s, const struct control *c)
{
	if (!s->trainer.exited)
		log_warn("the trainer outlived the %u s grace period: killed",
			 s->job.grace_s);
	sup_trainer_gone(s);
	/* The steps it trained, for what a new generation trains again
	 * (s->generation may be the new one already). */
	sup_note_of(s, s->trainer_generation, "stop", s->trained, s->message,
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
	uint64_t left = sup_deadline_near(s, c), lead = sup_lead_ms(s);
	uint64_t now = mono_ms();

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
	sup_set_phase(s, P_EMERGENCY, s->why);
	sup_publish(s);
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
		sup_set_phase(s, P_WAITING, NULL);
		snprintf(s->message, sizeof(s->message),
			 "%.120s at %.30s: %.60s; waiting for capacity",
			 s->deadline.about, s->deadline.time, what);
	} else {
		sup_set_phase(s, P_WAIT_GEN, NULL);
		snprintf(s->message, sizeof(s->message),
			 "%.140s: %.60s; the group resumes from it",
			 s->deadline.about, what);
	}
	log_info("%s", s->message);
	sup_publish(s);
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
	sup_ask(s, &r);
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
	sup_trainer_gone(s);
	sup_note_of(s, s->trainer_generation, "stop", s->trained, s->why, NULL);
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
		RESULTS(DO(act_restored, B(P_RESTORE) | B(P_PREFLIGHT) |
					 B(P_RUN) | B(P_WAIT_GEN) |
					 B(P_WAITING) | B(P_END))),
		/* The restore's result follows a newer generation. */
		[EV_CONTROL] = IGNORED,
		[EV_RUN_ENDED] = DO(act_run_ended, B(P_END)),
		[EV_NEW_GENERATION] = IGNORED,
		[EV_RETRY] = DO(act_retry, 0), [EV_LOOK] = IGNORED,
		NO_TRAINER,
	},
	/* Its timeout is the phase's deadline (EV_GRACE). */
	[P_PREFLIGHT] = {
		[EV_NOTICE] = DO(act_preflight_notice, B(P_END)),
		RESULTS(IGNORED),
		[EV_CONTROL] = IGNORED,
		[EV_RUN_ENDED] = DO(act_preflight_ended, B(P_END)),
		[EV_NEW_GENERATION] = DO(act_preflight_new_generation,
					 B(P_RESTORE)),
		[EV_RETRY] = DO(act_retry, 0),
		[EV_DEADLINE] = IGNORED, [EV_LOOK] = IGNORED,
		[EV_EXITED] = DO(act_preflight_exited,
				 B(P_RUN) | B(P_WAIT_GEN) | B(P_WAITING) |
				 B(P_END)),
		[EV_HANG] = IGNORED,
		[EV_GRACE] = DO(act_preflight_timeout,
				B(P_RUN) | B(P_WAIT_GEN) | B(P_WAITING) |
				B(P_END)),
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
	case EV_DEADLINE: return c && sup_deadline_near(s, c);
	case EV_LOOK: return c;
	case EV_EXITED: return s->trainer.exited;
	case EV_HANG: return hung(s, now);
	case EV_GRACE: return s->deadline_ms && now >= s->deadline_ms;
	case EV_COUNT: break;
	}
	return false;
}

enum sup_phase sup_dispatch(struct sup *s, enum sup_event ev,
			    const struct control *c)
{
	enum sup_phase from = s->phase, to;
	const struct cell *k = &table[from][ev];

	if (k->kind == SUP_CELL_DEFERRED)
		return from;
	if (is_result(ev)) {
		s->have_result = false;
		s->task_pending = false;
	}
	if (k->kind != SUP_CELL_ACTION) {
		if (k->kind != SUP_CELL_IGNORED)
			log_error("%s in phase %s cannot happen",
				  sup_event_names[ev], sup_phase_names[from]);
		return from;
	}
	to = k->act(s, c);
	if (to != s->phase || !((k->next | B(from)) & B(to)))
		log_error("%s in phase %s led to %s, which the table does not "
			  "say", sup_event_names[ev], sup_phase_names[from],
			  sup_phase_names[s->phase]);
	return s->phase;
}

/* One pass over the events, in their order, until one moves the machine
 * to another phase. Returns whether one did. */
bool sup_pass(struct sup *s)
{
	struct control control;
	const struct control *c =
		syncer_control(s->sync, &control) ? &control : NULL;
	enum sup_phase from = s->phase;

	for (int ev = 0; ev < EV_COUNT && s->phase == from; ev++)
		if (raised(s, ev, c, mono_ms()))
			sup_dispatch(s, ev, c);
	return s->phase != from;
}

/* Brings *next forward to t, a time the run phase's last look had not
 * reached yet (one it had is acted on, or moved, already). */
static void run_clock(const struct sup *s, uint64_t t, uint64_t *next)
{
	if (t > s->looked_ms && t < *next)
		*next = t;
}

/* The run phase's clocks, the look's (act_look) and the events after
 * it: the hang, the stall's start and end, worker 0's progress event,
 * control.json's deadline coming within its lead, and without inotify
 * the step file's next read. Output, new steps, a new step file and
 * control.json's changes wake the loop through its descriptors. */
static uint64_t run_wake(const struct sup *s, const struct control *c,
			 uint64_t now)
{
	uint64_t next = UINT64_MAX;

	if (s->steps.fd < 0)
		run_clock(s, s->look_ms, &next);
	if (s->job.hang_timeout_s)
		run_clock(s, s->progress_ms +
				     (uint64_t)s->job.hang_timeout_s * 1000 + 1,
			  &next);
	if (s->moves >= 3) {
		uint64_t stalled = s->moved_ms + stall_limit(s);

		run_clock(s, stalled + 1, &next);
		run_clock(s, stalled + STALL_WATCH_MS, &next);
	}
	if (s->id.process_id == 0 && progress_step(s) >= 0)
		run_clock(s, s->noted_progress_ms + PROGRESS_EVENT_MS, &next);
	if (c) {
		int64_t left = deadline_left_ms(&c->deadline,
						deadline_now_ms());
		uint64_t lead = sup_lead_ms(s);

		if (left != INT64_MAX && left > 0 && (uint64_t)left > lead)
			run_clock(s, now + ((uint64_t)left - lead <
							 DEADLINE_RECHECK_MS
						 ? (uint64_t)left - lead
						 : DEADLINE_RECHECK_MS),
				  &next);
	}
	return next;
}

/* The milliseconds poll may sleep: until the nearest time one of the
 * phase's actions waits for, -1 for none (the pipe, the trainer's output
 * and the step watch wake it). */
int sup_wait_ms(struct sup *s)
{
	uint64_t next = UINT64_MAX, now = mono_ms();
	struct control c;
	bool have_c = syncer_control(s->sync, &c);
	/* A finished worker deleting its queued resource waits for that. */
	bool deleting = s->phase == P_FINISHED && have_c && deletes_qr(s, &c);

	if (s->deadline_ms)
		next = s->deadline_ms;
	if (s->retry_ms && !s->task_pending && !deleting &&
	    table[s->phase][EV_RETRY].kind == SUP_CELL_ACTION &&
	    s->retry_ms < next)
		next = s->retry_ms;
	if (s->phase == P_RUN) {
		uint64_t run = run_wake(s, have_c ? &c : NULL, now);

		if (run < next)
			next = run;
	}
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
