/*
 * supervise.c: one worker's supervision as a small state machine driven by
 * one poll loop, in the manner of s6-supervise. Signals, the threads
 * (syncer, shipper, metadata watch) and the trainer's output all wake the
 * loop through file descriptors, and it sleeps until the nearest time an
 * action waits for. The machine itself, a table of phases by events whose
 * cells are small actions, is supervise_table.c; this file holds the
 * set-up, the loop, and what the actions share (sup.h): the trainer's
 * start, the heartbeat, the state file, the history, the syncer's tasks.
 *
 * The loop never touches the bucket itself: the syncer does, in its
 * thread, so a bucket that fails for minutes leaves the trainer running
 * and notices handled.
 */
#define _XOPEN_SOURCE 700 /* nftw */
#include "supervisor/sup.h"
#include "supervisor/deadline.h"
#include "supervisor/exporter.h"
#include "supervisor/notifier.h"
#include "supervisor/peer.h"
#include "supervisor/launch.h"
#include "supervisor/watch.h"

#include <ftw.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* control.json is read every CLOSE_POLL_MS while the trainer stalls
 * (supervise_table.c's watch_stall). */
#define CLOSE_POLL_MS 200

/* Entering STOP or EMERGENCY starts the trainer's grace period. */
void sup_set_phase(struct sup *s, enum sup_phase p, const char *why)
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

/* One event in the run's history (run/run.h), by this worker, of
 * generation. */
void sup_note_of(struct sup *s, int64_t generation, const char *kind,
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
	if (event_record(s->events, NULL, &ev, &e))
		log_warn("event not recorded: %s", e.msg);
}

void sup_note(struct sup *s, const char *kind, int64_t step,
		 const char *cause, const char *details)
{
	sup_note_of(s, s->generation, kind, step, cause, details);
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
	case P_JOIN:
	case P_PREFLIGHT: return "starting";
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
void sup_publish_as(struct sup *s, bool now)
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
	if (s->phase == P_RUN)
		step_recent_figure(&s->recent, mono_ms(), &st.recent);
	snprintf(st.message, sizeof(st.message), "%s", s->message);
	if (ss.last_error[0] && ss.failures)
		snprintf(st.message, sizeof(st.message),
			 "checkpoint upload failing (%u): %.200s", ss.failures,
			 ss.last_error);
	snprintf(st.boot_id, sizeof(st.boot_id), "%s", s->boot_id);
	syncer_publish(s->sync, &st, s->log_path, s->log_generation, now);
}

void sup_publish(struct sup *s)
{
	sup_publish_as(s, true);
}

void sup_save_state(struct sup *s)
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

void sup_ask(struct sup *s, const struct syncer_request *r)
{
	s->last_req = *r;
	s->task_pending = syncer_request(s->sync, r);
	if (!s->task_pending)
		s->retry_ms = mono_ms() + 100;
}

void sup_cause(const struct sup *s, struct gen_cause *c, int cls,
	       const char *kind)
{
	gen_cause_init(c, cls, kind, s->id.name);
	c->restored = s->restored;
	/* Steps on disk count when the step file says nothing; those of an
	 * earlier generation do not. */
	c->step = s->trained >= 0 ? s->trained
		  : s->newest_done > s->restored ? s->newest_done : -1;
	c->notice = s->notice;
	snprintf(c->host, sizeof(c->host), "%s", s->id.host);
	cause_blame(c, NULL, NULL);
}

void sup_ask_bump(struct sup *s, int64_t from, int64_t restore_step,
		  const struct gen_cause *cause, const char *fmt, ...)
{
	struct syncer_request r = { .task = TASK_BUMP, .generation = from,
				    .restore_step = restore_step };
	int n;
	va_list ap;

	r.cause = *cause;
	n = snprintf(r.reason, sizeof(r.reason), "%s: ", s->id.name);
	va_start(ap, fmt);
	vsnprintf(r.reason + n, sizeof(r.reason) - (size_t)n, fmt, ap);
	va_end(ap);
	log_warn("asking the group to restart: %s", r.reason);
	sup_ask(s, &r);
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
	/* In a pod, the node it runs on: a preflight's verdict or a log
	 * line names the machine, not the pod, which moves. */
	if (getenv("SLICE_POD_NODE"))
		PUT("SLICE_NODE_NAME=%s", getenv("SLICE_POD_NODE"));
#undef PUT
	/* The job's own settings come last, and win. */
	for (size_t i = 0; !rc && i < s->id.megascale.n; i++)
		rc = launch_env_put(env, s->id.megascale.v[i]);
	if (!rc)
		rc = launch_env(&s->id, s->job.rendezvous_port, s->generation,
				env);
	for (size_t i = 0; !rc && i < s->job.env.n; i++)
		rc = launch_env_put(env, s->job.env.v[i]);
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

uint64_t sup_lead_ms(const struct sup *s)
{
	return deadline_lead_ms(s->job.grace_s, s->upload_ms);
}

/* Milliseconds to c's deadline when it is within its lead now, else 0. */
uint64_t sup_deadline_near(const struct sup *s, const struct control *c)
{
	int64_t left = deadline_left_ms(&c->deadline, deadline_now_ms());

	if (left <= 0 || (uint64_t)left > sup_lead_ms(s))
		return 0;
	return (uint64_t)left;
}

/* A run whose end is nearer than a checkpoint takes: no trainer starts. */
static bool run_ends_soon(struct sup *s)
{
	struct control c;
	uint64_t left;

	if (!syncer_control(s->sync, &c) ||
	    strcmp(c.deadline.kind, "run-end") ||
	    !(left = sup_deadline_near(s, &c)))
		return false;
	sup_set_phase(s, P_WAITING, NULL);
	snprintf(s->message, sizeof(s->message),
		 "%.160s in %llu s: no trainer starts; waiting for capacity",
		 c.deadline.about, (unsigned long long)(left / 1000));
	log_warn("%s", s->message);
	sup_publish(s);
	return true;
}

/* The time from a step's .done marker to its part in the bucket. */
void sup_time_upload(struct sup *s, const struct shipper_state *ss,
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

bool sup_spawn(struct sup *s, const char *what, const char *command,
	       const char *dir)
{
	struct strlist env;
	struct gen_cause why_c;
	struct err e;
	char why[64];

	strlist_init(&env);
	err_init(&e);
	if (trainer_env(s, &env)) {
		strlist_release(&env);
		log_error("out of memory");
		s->broken = true;
		sup_set_phase(s, P_END, "out of memory");
		return false;
	}
	if (trainer_start(&s->trainer, command, dir, env.v, s->log_path,
			  &e)) {
		strlist_release(&env);
		log_error("cannot start the %s: %s", what, e.msg);
		sup_cause(s, &why_c, CAUSE_TRAINER, "start");
		cause_set_tail(&why_c, e.msg);
		sup_ask_bump(s, s->generation, -1, &why_c,
			     "cannot start the %s: %s", what, e.msg);
		snprintf(why, sizeof(why), "the %s could not start", what);
		sup_set_phase(s, P_WAIT_GEN, why);
		return false;
	}
	strlist_release(&env);
	return true;
}

/* The size of the file at path, 0 when there is none. */
static off_t file_size(const char *path)
{
	struct stat st;

	return stat(path, &st) ? 0 : st.st_size;
}

enum sup_phase sup_start_trainer(struct sup *s)
{
	/* The job's workdir, else the unpacked bundle, else (no bundle)
	 * the state directory. */
	const char *dir = s->job.workdir ? s->job.workdir
			  : s->have_code ? s->code_dir
					 : s->o->state_dir;

	if (run_ends_soon(s))
		return P_WAITING;
	snprintf(s->log_path, sizeof(s->log_path), "%s/gen-%lld.log",
		 s->log_dir, (long long)s->generation);
	s->log_generation = s->generation;
	/* The preflight's environment names this generation's too. */
	snprintf(s->step_path, sizeof(s->step_path), "%s/gen-%lld.step",
		 s->progress_dir, (long long)s->generation);
	if (s->job.preflight && s->preflight_passed != s->generation)
		return sup_start_preflight(s, dir);
	clear_dir(s->ckpt_dir);
	/* Another run of the same name may have left one. */
	unlink(s->step_path);
	s->trained = -1;
	step_clock_start(&s->step_clock);
	memset(&s->recent, 0, sizeof(s->recent));
	s->trainer_log_from = file_size(s->log_path);
	s->oom_kills_at_start = sup_oom_kills();
	if (!sup_spawn(s, "trainer", s->job.command, dir))
		return s->phase;
	s->starts++;
	s->trainer_since_ms = mono_ms();
	s->trainer_generation = s->generation;
	/* The other workers may take up to the grace period to stop their
	 * old trainers and start again, and this trainer may wait for them
	 * in silence: the hang clock starts that much later. */
	s->progress_ms = mono_ms() + (uint64_t)s->job.grace_s * 1000;
	s->moved_ms = s->gap_ms = 0;
	s->moves = 0;
	sup_note(s, "start", s->restored,
		 s->restored > 0 ? "restored" : "fresh", NULL);
	log_info("trainer started (pid %ld, generation %lld, %s)",
		 (long)s->trainer.pid, (long long)s->generation,
		 s->restored > 0 ? "restored" : "fresh");
	sup_save_state(s);
	sup_set_phase(s, P_RUN, NULL);
	snprintf(s->message, sizeof(s->message), "generation %lld from %s",
		 (long long)s->generation,
		 s->restored > 0 ? "a checkpoint" : "the start");
	sup_publish(s);
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
bool sup_note_trained(struct sup *s)
{
	int64_t v = read_trained(s);
	uint64_t now_us = mono_us();
	double ms;

	if (v <= s->trained)
		return false;
	ms = step_clock_saw(&s->step_clock, v, now_us);
	if (ms > 0 && s->trained >= 0)
		step_recent_add(&s->recent, ms, (uint64_t)(v - s->trained),
				now_us / 1000);
	s->trained = v;
	return true;
}

/* After the trainer is gone: forget it in the state file. */
void sup_trainer_gone(struct sup *s)
{
	sup_note_trained(s);
	trainer_release(&s->trainer);
	trainer_init(&s->trainer);
	sup_save_state(s);
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
		proc_sleep_ms(2000, false);
	}
	store_close(st);
	if (rc)
		return rc;
	rc = job_parse(text, len, &s->job, e);
	free(text);
	return rc;
}

/* In a pod (or a Slurm job) the state file goes with the pod (the
 * allocation); this worker's heartbeat in the bucket says which
 * generation an earlier one ran (0 none). A bucket that cannot say is
 * taken for none, with a warning. */
static int64_t earlier_worker_generation(const struct sup *s)
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
			 "worker's first %s)", e.msg,
			 s->o->slurm ? "allocation" : "pod");
	for (size_t i = 0; i < n; i++)
		if (v[i].slice == s->id.slice && v[i].worker == s->id.worker)
			g = v[i].generation;
	free(v);
	if (st)
		store_close(st);
	return g;
}

/* Worker 0's goodput export (exporter.h); without it the run goes on. */
static void start_exporter(struct sup *s)
{
	struct err xe;

	err_init(&xe);
	if (exporter_start(&s->exporter, s->o->run_url, &s->job, &xe))
		log_warn("not exporting goodput to Cloud Monitoring: %s",
			 xe.msg);
}

/* Process 0's notifications (notifier.h); without them the run goes on. */
static void start_notifier(struct sup *s)
{
	struct err ne;

	err_init(&ne);
	if (notifier_start(&s->notifier, s->o->run_url, &s->job, s->id.name,
			   &ne))
		log_warn("not sending the run's notifications: %s", ne.msg);
}

static void kept(void *peer, uint64_t step)
{
	peer_push(peer, step);
}

static size_t hold(void *peer, struct store *s, uint64_t step,
		   struct ckpt_holder *h)
{
	return peer_hold(peer, s, step, h);
}

/* The peer tier, beside the local tier, where the run has another worker
 * to hold this one's part. Without it (a port that cannot be had, no
 * bucket for the secret) the run goes on with the local tier and the
 * bucket, said so. SLICE_PEER_TIER=0 turns it off. */
static void start_peer(struct sup *s)
{
	const char *off = getenv("SLICE_PEER_TIER");
	char advertise[256];
	struct peer_config pc = {
		.run_url = s->o->run_url, .part = s->id.name,
		.process = s->id.process_id, .processes = s->id.num_processes,
		.workers_per_slice = s->job.workers_per_slice,
		.local_dir = s->local_dir, .advertise = advertise,
		.port = env_number("SLICE_PEER_PORT", 0, 65535, 0),
		.keep = s->job.local_keep + 2,
		.stall_ms = env_number("SLICE_PEER_STALL_MS", 50, 600000, 10000),
	};
	struct err e;

	if (!s->local_dir[0] || s->id.num_processes < 2 ||
	    (off && !strcmp(off, "0")))
		return;
	peer_advertise(s->id.coordinator, advertise, sizeof(advertise));
	err_init(&e);
	if (peer_start(&s->peer, &pc, &e))
		log_warn("no peer tier: %s (restores read the local tier, "
			 "then the bucket)", e.msg);
}

int sup_setup(struct sup *s, struct err *e)
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
	step_watch_open(&s->steps, s->ckpt_dir, s->progress_dir);
	if ((rc = boot_id_read(s->boot_id, e)) ||
	    (rc = sup_state_load(s->state_path, &s->st, &s->st_found, e)) ||
	    (rc = load_job(s, e)) ||
	    (rc = o->slurm    ? identity_from_slurm(&s->id, &s->job, e)
		  : o->vertex ? identity_from_vertex(&s->id, &s->job, e)
		  : o->managed ? identity_from_pod(&s->id, &s->job, e)
			     : identity_resolve(&s->id, &s->job, o->slice,
					    o->worker, e)))
		return rc;
	identity_host(&s->id, o->slurm, o->managed && !o->slurm &&
						 !o->vertex);
	log_info("%s of run %s (%u workers) on host %s; boot %s", s->id.name,
		 s->job.name, s->id.num_processes, s->id.host, s->boot_id);
	if (o->managed) {
		s->earlier_worker_gen = earlier_worker_generation(s);
		if (o->slurm)
			log_info("in a Slurm job, requeue %u; an earlier "
				 "allocation of this worker ran generation "
				 "%lld", s->id.restart_attempt,
				 (long long)s->earlier_worker_gen);
		else if (o->vertex)
			log_info("in a Vertex AI replica; an earlier "
				 "replica of this worker ran generation %lld",
				 (long long)s->earlier_worker_gen);
		else
			log_info("in a pod, JobSet restart attempt %u; an "
				 "earlier pod of this worker ran generation "
				 "%lld", s->id.restart_attempt,
				 (long long)s->earlier_worker_gen);
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
	/* The history's writer first: the syncer records through it. */
	if ((rc = events_writer_start(&s->events, o->run_url, s->id.name,
				      o->state_dir, e)))
		return rc;
	sc.run_url = o->run_url;
	sc.ckpt_dir = s->ckpt_dir;
	sc.spool_dir = s->spool_dir;
	sc.part = s->id.name;
	sc.parts_expected = s->id.num_processes;
	sc.rank = s->id.process_id;
	sc.prune = s->id.process_id == 0;
	sc.keep = s->job.keep;
	sc.keep_every = s->job.keep_every;
	job_local_tier_dir(&s->job, o->state_dir, s->id.name, s->local_dir,
			   sizeof(s->local_dir));
	sc.local_dir = yc.local_dir = s->local_dir[0] ? s->local_dir : NULL;
	sc.local_keep = yc.local_keep = s->job.local_keep;
	start_peer(s);
	if (s->peer) {
		sc.kept = kept;
		sc.kept_ud = s->peer;
		sc.persist_every = s->job.persist_every;
		sc.hold = hold;
		sc.hold_ud = s->peer;
		yc.fetch = peer_fetch;
		yc.fetch_ud = s->peer;
	}
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
	yc.events = s->events;
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
	if (s->id.process_id == 0 && s->job.monitoring_project)
		start_exporter(s);
	if (s->id.process_id == 0 && s->job.notify.n)
		start_notifier(s);
	snprintf(s->message, sizeof(s->message), "{\"boot_id\":\"%.40s\"}",
		 s->boot_id);
	sup_note(s, "boot", -1, s->orphan ? "restarted" : "started",
		 s->message);
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
				peer_leaving(s->peer);
			}
	if (s->watch && !s->notice) {
		char what[256];

		if (watch_events(s->watch, what, sizeof(what))) {
			s->notice = true;
			snprintf(s->why, sizeof(s->why), "metadata: %.200s",
				 what);
			peer_leaving(s->peer);
		}
	}
}

/* A step's marker has the shipper look at once (it tells the loop what
 * it found); a changed step file is read by the next look. */
static void take_step_news(struct sup *s)
{
	unsigned news = step_watch_read(&s->steps);

	if (news & STEP_NEWS_DONE)
		shipper_kick(s->ship);
	if (news & STEP_NEWS_STEP)
		s->step_news = true;
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
		/* poll passes over a negative fd: no trainer, no inotify. */
		struct pollfd p[3] = { { s->pipe[0], POLLIN, 0 },
				       { s->trainer.out_fd, POLLIN, 0 },
				       { s->steps.fd, POLLIN, 0 } };

		if (poll(p, 3, moved ? 0 : sup_wait_ms(s)) < 0 &&
		    errno != EINTR)
			break;
		drain_pipe(s);
		if (p[2].revents)
			take_step_news(s);
		if (s->trainer.pid) {
			trainer_drain(&s->trainer);
			trainer_reap(&s->trainer);
		}
		if (init)
			reap_orphans(s);
		moved = sup_pass(s);
	}
}

/* What the exit status tells the scheduler: a pod's to Kubernetes, a
 * step's to Slurm (supervise.h). */
static int managed_status(struct sup *s)
{
	struct control c;

	if (s->notice)
		return SUPERVISE_EXIT_NOTICE;
	if (s->broken)
		return 1;
	if (s->preflight_failed || s->quarantined)
		return SUPERVISE_EXIT_PREFLIGHT;
	if (syncer_control(s->sync, &c) && !strcmp(c.state, "failed"))
		return SUPERVISE_EXIT_FAILED;
	return 0;
}

void sup_init(struct sup *s, const struct supervise_options *o)
{
	*s = (struct sup){ .o = o, .phase = P_JOIN, .pipe = { -1, -1 },
			   .lock_fd = -1, .steps = { .fd = -1 },
			   .newest_done = -1, .trained = -1,
			   .timed_step = -1, .step_clock = { .step = -1 } };
	job_init(&s->job);
	identity_init(&s->id);
	trainer_init(&s->trainer);
}

void sup_release(struct sup *s)
{
	trainer_release(&s->trainer);
	exporter_stop(s->exporter);
	deadline_poller_stop(s->poller);
	watch_stop(s->watch);
	if (s->ship)
		shipper_stop(s->ship);
	if (s->sync)
		syncer_stop(s->sync, mono_ms() + 10000);
	/* After both: the shipper pushes through it, the syncer fetches. */
	peer_stop(s->peer);
	s->peer = NULL;
	/* What the store does not take by then stays in the spool, for
	 * this worker's next start. */
	events_writer_stop(s->events, mono_ms() + 5000);
	s->events = NULL;
	/* After the events writer: its last events (a "done", a "failed")
	 * are in the history the notifier reads once more. */
	notifier_stop(s->notifier, mono_ms() + NOTIFIER_DRAIN_MS);
	if (s->ready)
		sup_save_state(s);
	step_watch_close(&s->steps);
	self_pipe_release(s->pipe, caught, N_CAUGHT);
	identity_release(&s->id);
	job_release(&s->job);
	if (s->lock_fd >= 0)
		close(s->lock_fd);
}

int supervise(const struct supervise_options *o)
{
	struct sup s;
	struct err e;
	int status = 0;

	err_init(&e);
	sup_init(&s, o);
	if (sup_setup(&s, &e)) {
		log_error("%s", e.msg);
		status = 1;
	} else {
		loop(&s);
		if (o->managed)
			status = managed_status(&s);
	}
	sup_release(&s);
	return status;
}
