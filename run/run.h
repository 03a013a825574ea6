/*
 * run/run.h: a run's contract, the objects in its bucket that slicectl
 * and every slice-supervisor read and write (docs/DESIGN.md: job.json,
 * control.json, heartbeats, events, bucket layout).
 *
 * The launcher writes the job spec (job.json), after checking it, before
 * anything is created; slicectl status, logs, restart and stop read and
 * change the run's shared state (control.json, the workers' status
 * objects, the history); the supervisors do all of that and the few
 * changes that are theirs alone (the last section).
 */
#ifndef SLICECTL_RUN_H
#define SLICECTL_RUN_H

#include "common/common.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct store; /* cloud/cloud.h */
struct events_writer; /* the run's history, below */

/* job.json, written once by the launcher at RUN/job.json. */
struct job {
	char *name;              /* the run's name */
	char *command;           /* the trainer, as /bin/sh -c reads it */
	struct strlist env;      /* "NAME=VALUE", exported to the trainer */
	char *workdir;           /* trainer's working directory; NULL: the
				    unpacked code bundle, else the state
				    directory */
	unsigned num_slices;     /* >= 1 */
	unsigned workers_per_slice; /* >= 1 */
	unsigned max_restarts;   /* restarts for the trainer's failures,
				    hangs and preflights before the run
				    fails */
	int64_t max_infra_restarts; /* restarts for the infrastructure
				       (preemptions, maintenance, resets,
				       evictions); -1 no limit */
	unsigned hang_timeout_s; /* no output and no new step: hung; 0 off */
	int hang_signal;         /* sent to the trainer's processes that catch
				    it before a hung trainer is ended, so they
				    print their stacks (faulthandler); 0 none
				    ("hang_signal": "SIGUSR1" in job.json) */
	unsigned grace_s;        /* SIGTERM to exit on preemption (25) */
	unsigned keep;           /* newest committed steps kept (>= 1) */
	unsigned keep_every;     /* also keep steps divisible by it; 0 no */
	unsigned heartbeat_s;    /* status object period (default 10) */
	unsigned spool_mb;       /* local disk for steps not yet uploaded */
	unsigned rendezvous_port; /* the first of RUN_RENDEZVOUS_PORTS ports
				     the trainers' rendezvous cycles through,
				     one per generation (29500) */
	char *preflight;         /* run by /bin/sh -c on every host before
				    each generation's trainer; NULL none */
	unsigned preflight_timeout_s; /* the preflight's bound (300) */
	/* 0 or 1: every checkpoint goes to the bucket. N: only steps
	 * divisible by N, and a leaving host's last; the others live on
	 * the local and peer tiers alone (fast-tier steps). */
	unsigned persist_every;
	unsigned local_keep;     /* committed steps each supervisor keeps
				    on local disk (the local tier); 0 none
				    (JOB_LOCAL_KEEP by default) */
	char *local_dir;         /* where; NULL: STATE_DIR/local (on the
				    host's disk) */
	char *bad_host_pattern;  /* POSIX extended regex: a failed trainer's
				    output line matching it (an ECC or Xid
				    error) blames its host; NULL none */
	bool delete_on_finish;   /* worker 0 deletes the queued resource */
	/* Worker 0 writes the run's goodput to Cloud Monitoring in this
	 * project ("monitoring": {"project": P}); NULL: no export (and a
	 * job.json without "monitoring"). */
	char *monitoring_project;
	/* Where the run's state changes are posted ("notify", a list of
	 * http(s) URLs, at most NOTIFY_MAX_URLS; empty: none). */
	struct strlist notify;
	/* The queued resource running the job (for delete_on_finish);
	 * NULL for the local provider. */
	char *tpu_project;
	char *tpu_zone;
	char *tpu_name;
	/* Where a run on another target lives ("target" in job.json), for
	 * the operator commands; kind NULL: none (a queued resource, or the
	 * local provider). */
	struct job_target {
		/* "tpu-vm", "gke", "slurm" or "local"; NULL in a job.json
		 * written before tpu-vm and local runs recorded theirs (a
		 * "tpu" object then says tpu-vm, none local). */
		char *kind;
		char *cluster, *location, *project; /* NULL: a kubeconfig's;
						       Slurm: its cluster
						       (-M), NULL the
						       default */
		char *namespace, *jobset;
		char *kubeconfig, *context; /* NULL: the default */
		char *partition, *job_id;   /* Slurm: the batch job */
		char *slurmrestd; /* Slurm: its REST API (URL or
				     unix:/path); NULL: the commands */
	} target;
};

/* The signals "hang_signal" may name: "SIGUSR1" (or "USR1") -> SIGUSR1,
 * 0 for any other; and the name of one, NULL for any other. */
int job_signal_number(const char *name);
const char *job_signal_name(int sig);

/* Ports from rendezvous_port on: generation G's rendezvous is on
 * rendezvous_port + G % RUN_RENDEZVOUS_PORTS (docs/DESIGN.md, "Trainer
 * environment"). */
#define RUN_RENDEZVOUS_PORTS 16u

#define JOB_LOCAL_KEEP 2u

/* Where the worker `part` ("slice-S-worker-W") whose state directory is
 * state_dir keeps j's local tier: j->local_dir/RUN/PART (a tmpfs a
 * machine's runs and workers share), else STATE_DIR/local; "" when j
 * keeps none. */
void job_local_tier_dir(const struct job *j, const char *state_dir,
			const char *part, char *out, size_t cap);

void job_init(struct job *j); /* the defaults */
/* A deep copy of src into dst (zeroed first); -1 when out of memory. */
int job_target_copy(struct job_target *dst, const struct job_target *src);
void job_target_release(struct job_target *t);
void job_release(struct job *j);
/* Parses job.json. Unknown fields, wrong types and out-of-range values
 * are COMMON_EINVAL with the field named; missing name or command too. */
int job_parse(const char *json, size_t len, struct job *out, struct err *e);
/* job.json for j (*out malloc'd, NUL-terminated). */
int job_to_json(const struct job *j, char **out, struct err *e);

/* Object names of a run, relative to its prefix (see docs/DESIGN.md). */
#define RUN_JOB "job.json"
#define RUN_CONTROL "control.json"
#define RUN_BUNDLE "bundle.tar.zst"

/* "slice-S-worker-W": a worker's part, status and log names. */
void run_worker_name(unsigned slice, unsigned worker, char *out, size_t len);

/*
 * Why a generation ended (cause.c; docs/DESIGN.md "Causes"): its class,
 * what exactly, and the evidence. The class decides which budget the
 * restart draws on: the trainer's failures, hangs and preflights spend
 * max_restarts, the infrastructure's max_infra_restarts, and an
 * operator's nothing.
 */
enum cause_class {
	CAUSE_TRAINER,    /* an exit code or signal, an OOM kill */
	CAUSE_HANG,       /* no output and no step for hang_timeout_s */
	CAUSE_PREFLIGHT,  /* a host's preflight failed */
	CAUSE_INFRA,      /* preemption, maintenance, a window's end, a
			     reset or reboot, a pod evicted or a JobSet or
			     Slurm restart, a host gone, capacity
			     recreated */
	CAUSE_OPERATOR,   /* slicectl restart */
	CAUSE_NCLASSES
};

/* "trainer", "hang", "preflight", "infrastructure", "operator". */
extern const char *const cause_class_names[CAUSE_NCLASSES];
/* The class named name; -1 none. */
int cause_class_of(const char *name);

/* Generations that failed the same way in a row end the run. */
#define CAUSE_SAME_WAY_RUNS 3
/* "The same way" holds a failing step this close to the restored one. */
#define CAUSE_SAME_WAY_STEPS 2

struct gen_cause {
	int cls;                 /* enum cause_class */
	char kind[24];           /* trainer: "exit", "signal", "oom";
				    "hang"; "preflight"; infrastructure:
				    "preemption", "maintenance", "reset",
				    "pod-restart", "pod-replaced",
				    "host-gone", "recreated"; operator:
				    "restart", "stop" */
	int exit_code;           /* "exit": its status; else -1 */
	int signal;              /* "signal", "oom": its number; else 0 */
	int64_t step;            /* the trainer's newest step, -1 none */
	int64_t restored;        /* the step its generation restored */
	bool notice;             /* a notice was pending on its host */
	char worker[64];         /* "slice-S-worker-W", or who ("slicectl") */
	char signature[96];      /* the last non-empty output line, its
				    numbers, hex and addresses as '#' */
	char tail[160];          /* its last output lines, cut */
	char host[64];           /* the machine it happened on, as its
				    scheduler names it ("" not known) */
	char blame[64];          /* why it points at that machine (a bad
				    host, quarantine.c): "SIGSEGV",
				    "SIGBUS", "hang", "preflight", "log:
				    LINE"; "" it does not */
};

/* c zeroed for class cls and kind: no code, no signal, no steps. */
void gen_cause_init(struct gen_cause *c, int cls, const char *kind,
		    const char *worker);
/* c's tail is text, cut at a character's boundary. */
void cause_set_tail(struct gen_cause *c, const char *text);
/* The signature of a log's last lines: the last non-empty line with
 * every run of digits, "0x" hex and hex word of 8 or more characters
 * (an address) made one '#'. */
void cause_signature(const char *text, char *out, size_t cap);
/* The last n non-empty lines of text, joined by " | ", cut to cap. */
void cause_tail(const char *text, unsigned n, char *out, size_t cap);
/* Whether a and b are the same failure, as a deterministic one repeats:
 * both the trainer's, with the same kind, exit code and signal, the
 * same restored step, each failing within CAUSE_SAME_WAY_STEPS steps of
 * it (or before any step), and the same signature. */
bool cause_same_way(const struct gen_cause *a, const struct gen_cause *b);
/* c as a JSON object's text for an event's details, cut to fit cap
 * (the tail goes first, then the signature); -1 when even that does not
 * fit. */
int cause_details(const struct gen_cause *c, char *out, size_t cap);
/* The class an event's details record (cause_details' text), -1 none
 * (an older writer's bump); its kind into kind[cap] ("" none). */
int cause_class_in(const char *details, char *kind, size_t cap);
/* "exit 7 at step 12 (restored 10) on slice-0-worker-1: TAIL". */
void cause_describe(const struct gen_cause *c, char *out, size_t cap);

/*
 * Bad hosts (quarantine.c; docs/DESIGN.md "Bad hosts"). A failure blames
 * its host when its trainer died of SIGSEGV or SIGBUS (or a shell's exit
 * 128 + either), its output matched job.json's bad_host_pattern, it hung,
 * or its preflight failed. A host blamed by QUARANTINE_HITS of the last
 * QUARANTINE_WINDOW failures (trainer, hang and preflight classes) is
 * quarantined: control.json names it, the bump records the event
 * "quarantine", and its target takes it out as it can.
 */
#define QUARANTINE_WINDOW 3
#define QUARANTINE_HITS 2
#define QUARANTINE_MAX 16

/* Whether pattern compiles as a POSIX extended regex; COMMON_EINVAL
 * naming regcomp's complaint when not. */
int job_check_pattern(const char *pattern, struct err *e);
/* Sets c->blame from c's class and signal or exit code, and from the
 * first line of text (the trainer's output's end) that pattern (NULL:
 * none) matches. */
void cause_blame(struct gen_cause *c, const char *text, const char *pattern);

/* A failure as the quarantine remembers it, and a host it took out. */
struct host_blame {
	int64_t generation;      /* the generation that failed */
	char host[64];           /* "" the failure blamed no host */
	char why[64];            /* gen_cause's blame */
	char worker[48];
};

/* What a run's restarts spent of each budget (control.json's
 * "restarts"). */
struct restart_counts {
	int64_t trainer;         /* trainer failures, hangs, preflights */
	int64_t infra;
	int64_t operator_;
};

/* control.json's optional "deadline": when the run's capacity goes away,
 * a flex-start queued resource's run-duration end ("run-end") or a
 * node's maintenance window ("maintenance"); worker 0 publishes it from
 * the TPU API, and every supervisor checkpoints ahead of it. */
struct control_deadline {
	char kind[16];           /* "run-end", "maintenance"; "" none */
	char time[40];           /* RFC 3339 */
	char about[160];         /* what it is, for people */
	bool checkpointed;       /* the group took its checkpoint for it
				    and went on (maintenance) */
};

/*
 * control.json: {"generation": G, "state": S, "reason": R,
 * "updated_by": W, "restore_step": N or null, "time": T, and on GKE
 * "jobset_restart": A, and "deadline": {"kind", "time", "about",
 * "checkpointed"} while one is known}. It changes only
 * by compare-and-swap on its object generation, so two workers bumping
 * the generation for the same failure produce one bump, and every worker
 * of generation G restores the same step (the first to ask fixes it).
 * States: "running", "stopping" (slicectl stop), "done", "failed".
 * The calls that change the generation or the state also record the
 * change in the run's history through event_record(events, s, ...):
 * queued for the caller's events writer, or written at once when NULL.
 */
struct control {
	int64_t generation;      /* group restart counter, from 1 */
	char state[16];
	char reason[256];
	char updated_by[64];     /* "slice-S-worker-W" or "slicectl" */
	int64_t restore_step;    /* -1: not chosen yet for this generation;
				    0: start fresh (nothing committed) */
	char time[40];           /* RFC 3339, of the last change */
	int64_t jobset_restart;  /* newest JobSet restart attempt whose pods
				    joined (its one bump made); 0 none, and
				    when the member is absent */
	struct control_deadline deadline; /* kind "" when absent */
	/* What the restarts spent of each budget; a control.json written
	 * before they were counted has none, and its generation's restarts
	 * all count as the trainer's. */
	struct restart_counts restarts;
	/* Why the current generation began (the last bump's cause); class
	 * -1 when no bump said (generation 1, an older writer). */
	struct gen_cause cause;
	/* Generations in a row, up to the current one's start, that ended
	 * the same way as cause (cause_same_way); 0 when cause is not the
	 * trainer's. */
	unsigned same_way;
	/* The last QUARANTINE_WINDOW failures, oldest first, and the hosts
	 * quarantined ("failures", "quarantined"). */
	struct host_blame failures[QUARANTINE_WINDOW];
	unsigned nfailures;
	struct host_blame quarantined[QUARANTINE_MAX];
	unsigned nquarantined;
	/* Not written: the change that read this back quarantined
	 * quarantined[nquarantined - 1]. */
	bool quarantined_now;
	int64_t object_generation; /* the store's, for compare-and-swap */
};

/* Records the failure ending c's generation (cause of class trainer,
 * hang or preflight; others are no failure) in c's window, and
 * quarantines its host when the rule says so: true then. */
bool quarantine_note(struct control *c, const struct gen_cause *cause);
/* Whether host is among c's quarantined. */
bool quarantine_has(const struct control *c, const char *host);

/* Reads control.json; when there is none, creates it (create-only) as
 * generation 1, "running". */
int control_load(struct store *s, struct control *out, struct err *e);

/*
 * Moves the run to generation seen->generation + 1 with reason, unless
 * another writer got there first (then *out is what it wrote). When the
 * bump would exceed max_restarts (generation > max_restarts + 1) the run
 * is set "failed" instead. restore_step: -1 lets the next generation
 * choose, or the step it must restore (after a corrupt part). A run that
 * is done, failed or stopping is left as it is.
 */
int control_bump(struct store *s, struct events_writer *events,
		 const struct control *seen, unsigned max_restarts,
		 const char *reason, const char *by, int64_t restore_step,
		 struct control *out, struct err *e);

/*
 * control_bump for a failure of cause (NULL: the trainer's, without
 * evidence), spending its class's budget of j (max_restarts for the
 * trainer, hangs and preflights, max_infra_restarts for the
 * infrastructure, none for an operator): past it the run is "failed".
 * A trainer failure that is the CAUSE_SAME_WAY_RUNS-th in a row the
 * same way (cause_same_way) fails the run at once, naming it. Any other
 * class breaks such a run of failures.
 */
int control_bump_cause(struct store *s, struct events_writer *events,
		       const struct control *seen, const struct job *j,
		       const struct gen_cause *cause, const char *reason,
		       const char *by, int64_t restore_step,
		       struct control *out, struct err *e);

/* Sets state (and reason) by compare-and-swap, retrying on races while
 * the state it would replace is "running". */
int control_set_state(struct store *s, struct events_writer *events,
		      const char *state, const char *reason, const char *by,
		      struct control *out, struct err *e);
/* The same, recording cause as control.json's cause (an operator's stop:
 * who asked and why), which the history's event then carries. */
int control_set_state_cause(struct store *s, struct events_writer *events,
			    const char *state, const char *reason,
			    const char *by, const struct gen_cause *cause,
			    struct control *out, struct err *e);

/* status/slice-S-worker-W.json: a worker's heartbeat. */
struct worker_status {
	unsigned slice, worker;
	char state[24];          /* "starting", "restoring", "running",
				    "stopping", "finished", "failed",
				    "preempted", "waiting" (a flex-start
				    run ended: waiting for capacity),
				    "exited" */
	int64_t generation;
	int64_t step;            /* newest step the trainer reported
				    (SLICE_STEP_FILE) or wrote; -1 none */
	int64_t committed_step;  /* newest step this worker saw committed */
	uint64_t restarts;       /* trainer starts by this supervisor */
	char message[256];
	char time[40];           /* RFC 3339, set by status_put */
	char boot_id[40];
	/* Bytes a second of this worker's newest checkpoint upload (part
	 * size over the save's wall time); 0 none yet. Written as
	 * "upload_bytes_per_s" only when > 0: older readers ignore it and
	 * older writers leave it out. */
	uint64_t upload_bps;
	/* Its trainer's recent step times (step_recent.c), written as
	 * "recent_steps": {"median_ms", "n", "span_s"} only when n > 0. */
	struct step_figure {
		double median_ms;  /* the median of the steps below */
		unsigned n;        /* how many; 0 none */
		double span_s;     /* the time they cover */
	} recent;
};

/* Every worker's status, in name order (*out malloc'd). */
int status_list(struct store *s, struct worker_status **out, size_t *n,
		struct err *e);

/* Whether all n_workers workers report "finished" at generation. */
/* How often each of n_workers writes its heartbeat: every heartbeat_s,
 * or less often when the run's heartbeats and log segments together would
 * take more than half of the bucket's initial write rate (GCS: about 1000
 * writes a second). Readers judge a heartbeat stale against this. */
unsigned status_period_ms(unsigned heartbeat_s, unsigned n_workers);

bool status_all_finished(const struct worker_status *v, size_t n,
			 unsigned n_workers, int64_t generation);

/*
 * The run's history (events/): small immutable objects, each one batch of
 * one writer's events, named events/GGGGGG-SSSSSSSSSS-WRITER.json (the
 * generation of its first event, the writer's sequence: the Unix second
 * of the write, so no writer makes more than one object a second) and
 * holding {"writer": W, "events": [{time, kind, generation, worker,
 * cause, step, by, details}, ...]}. Written create-only, never changed.
 * Kinds: bump, failed, stopping, done (control.json changes, by whom and
 * why), notice, restore, start, exit, hang, commit, progress, boot, end,
 * chaos (the local provider's injected failures), gone, recreated, stop
 * (a trainer stopped for a new generation or the run's end).
 */
struct event {
	char time[32];           /* RFC 3339 UTC with milliseconds */
	char kind[16];
	int64_t generation;      /* 0: not known */
	char worker[64];         /* the writer: "slice-S-worker-W",
				    "slicectl", "local" */
	char cause[256];
	int64_t step;            /* -1: none */
	char by[64];
	char details[256];       /* a JSON object's text, or "" */
};

/* ev zeroed, its time now, kind, generation, step -1 and worker. */
void event_init(struct event *ev, const char *kind, int64_t generation,
		const char *worker);
/* A hang event's forensics object (its details' "forensics": the name
 * under the run, forensics/gen-G/slice-S-worker-W.txt) into name: true,
 * or false when ev names none. */
bool event_forensics(const struct event *ev, char *name, size_t cap);

/*
 * A writer of a run's history: one thread that writes what is queued to
 * it as one object at most once a second, with a spool file so that
 * nothing queued is lost to a store outage or a crash. A supervisor opens
 * one and passes it to whatever records events for it; a process that
 * records few events (slicectl, the local provider) needs none. Writers
 * share nothing: each has its own store handle, queue and spool.
 */
struct events_writer;

/* A writer for the run at run_url, as `writer` (a worker's name),
 * spooling to spool_dir (NULL: none); events an earlier writer left in
 * that spool, unable to reach the store, are written now. */
int events_writer_start(struct events_writer **out, const char *run_url,
			const char *writer, const char *spool_dir,
			struct err *e);
/* Writes what is queued (trying until deadline_ms, mono_ms's clock) and
 * ends the writer; what is still unwritten stays in the spool. NULL: no
 * writer, nothing to do. */
void events_writer_stop(struct events_writer *w, uint64_t deadline_ms);

/*
 * Records ev: queued for w (spooled on disk, written within about a
 * second, late when the store is down); with no writer (NULL), written at
 * once to the run at s as its own object. Failing to record history never
 * fails the caller's work: the error is for a message.
 */
int event_record(struct events_writer *w, struct store *s,
		 const struct event *ev, struct err *e);

/* event_record of one event made by `who` (worker and by: "slicectl",
 * "local"), written at once to s: kind, generation, cause and details (a
 * JSON object's text, NULL or too long: none). */
int event_record_as(struct store *s, const char *who, const char *kind,
		    int64_t generation, const char *cause,
		    const char *details, struct err *e);

/* Every event of the run in time order (ties: by writer, then as
 * written); *out malloc'd. */
int events_list(struct store *s, struct event **out, size_t *n,
		struct err *e);

/* Following a run's history as it grows: the events no earlier call with
 * the same seen returned (a late batch's too, whenever it comes), in time
 * order; *out malloc'd, NULL when none. seen starts zeroed. */
struct events_seen {
	uint64_t *v;             /* identities returned, sorted */
	size_t n;
};
int events_new(struct store *s, struct events_seen *seen, struct event **out,
	       size_t *n, struct err *e);
void events_seen_release(struct events_seen *seen);

/*
 * Following a run's history without reading it all again (worker 0's
 * Monitoring export recomputes goodput every minute): the objects are
 * create-only and their names never reused, so each events_follow lists
 * the prefix and reads only the objects no earlier call read, and the
 * follower keeps the whole history read so far, as events_list gives it
 * (in time order, a batch written twice counted once). An object deleted
 * after it was read keeps its events; one deleted before is skipped.
 */
struct events_follower;
int events_follower_new(struct events_follower **out, struct err *e);
void events_follower_free(struct events_follower *f); /* NULL is fine */
/* *v (the follower's, valid until its next call) is the history so far,
 * also after an error: what was read before it stays. */
int events_follow(struct events_follower *f, struct store *s,
		  const struct event **v, size_t *n, struct err *e);
/* The objects read, by every call so far. */
size_t events_follower_objects(const struct events_follower *f);

/* An event's time as Unix milliseconds; -1 when it is not RFC 3339. */
int64_t event_ms(const struct event *ev);

/*
 * Notifications (notify.c; docs/DESIGN.md "Notifications"): what a run's
 * history says that people want to hear of at once, each as one notice
 * with a stable id (the name of its record under notify/, so that it is
 * sent once whoever reads the history), and the body posted for it:
 * Slack's {"text": "slicectl run NAME: ..."} with the structured notice
 * beside it as "event".
 */
/* The event a host taken out of the run is recorded as (cause: why;
 * details: {"host": H, "why": W, ...}), for the quarantine to record and
 * the notifier to post. */
#define EVENT_QUARANTINE "quarantine"

#define NOTIFY_MAX_URLS 8
#define NOTIFY_URL_MAX 2048
#define NOTIFY_PREFIX "notify/"

/* Whether url may receive notifications: http:// or https://, a host,
 * no spaces or control characters, at most NOTIFY_URL_MAX bytes. */
int notify_url_check(const char *url, struct err *e);
/* url for a log line: its scheme and host only (a Slack webhook's path
 * is its secret). */
void notify_url_shown(const char *url, char *out, size_t cap);

enum notice_kind {
	NOTICE_RESTART,     /* a bump: the group restarted, and why */
	NOTICE_DONE,
	NOTICE_FAILED,
	NOTICE_BUDGET_LOW,  /* a restart budget nearly or wholly spent */
	NOTICE_QUARANTINE,  /* a host taken out of the run (event kind
			       "quarantine", details {"host", "why"}) */
	NOTICE_NKINDS
};

/* "restart", "done", "failed", "budget_low", "quarantine". */
extern const char *const notice_kind_names[NOTICE_NKINDS];

struct notice {
	char id[80];             /* e.g. "restart-000003-1a2b3c4d" */
	int kind;                /* enum notice_kind */
	struct event ev;         /* the event it tells of (a budget's: the
				    bump that spent it) */
	int budget;              /* budget_low: CAUSE_TRAINER (with hangs
				    and preflights) or CAUSE_INFRA */
	int64_t spent, limit;    /* budget_low: restarts spent of limit */
};

/* A budget is low once at most this share of it, or this many
 * restarts, is left. */
#define NOTIFY_LOW_PERCENT 20
#define NOTIFY_LOW_LEFT 2

/* The notices in the history v[0..n) (time order) of the run j:
 * *out (malloc'd, *nout of them) in the history's order. */
int notices_of(const struct job *j, const struct event *v, size_t n,
	       struct notice **out, size_t *nout, struct err *e);
/* The JSON body posted for notice n of run `run` (*out malloc'd). */
int notice_render(const char *run, const struct notice *n, char **out,
		  struct err *e);

/* ---- what only the supervisors do to the run's shared state: fix the
 * step a generation restores, follow a JobSet's restarts, publish a
 * deadline, and write their own heartbeats ---- */

/*
 * The step generation `generation` restores: restore_step when already
 * chosen; else the newest committed, uncorrupt step (0 when none), written
 * into control.json by compare-and-swap so every worker gets the same
 * answer. CLOUD_EPRECONDITION when control.json has moved to another
 * generation meanwhile.
 */
int control_restore_step(struct store *s, int64_t generation, int64_t *step,
			 struct err *e);

/*
 * The pods of JobSet restart attempt `attempt` join the run: the first of
 * them moves control.json to the next generation (reason "jobset restart
 * N", restoring the newest committed step) and records the attempt in
 * "jobset_restart", so every other pod of it, and any later bump racing
 * it, makes no second one. The restart is the infrastructure's (a pod
 * evicted, preempted by Kueue, its node lost; a Slurm requeue) and
 * spends max_infra_restarts: a spent budget sets the run "failed". A run that is not
 * running is left as it is; *out is control.json as it now stands.
 */
int control_join_restart(struct store *s, struct events_writer *events,
			 int64_t attempt, const struct job *j, const char *by,
			 struct control *out, struct err *e);

/*
 * Publishes d as control.json's deadline (kind "" removes it), unless the
 * run is not running or d is there already. The same kind and time keep
 * their "checkpointed" mark.
 */
int control_set_deadline(struct store *s, const struct control_deadline *d,
			 struct control *out, struct err *e);

/*
 * control_bump_cause (restoring the newest committed step, an
 * infrastructure restart of kind "maintenance") after the group's
 * checkpoint for seen->deadline: the next generation also marks that
 * deadline "checkpointed", so it is not taken again.
 */
int control_bump_deadline(struct store *s, const struct control *seen,
			  const struct job *j, const char *reason,
			  const char *by, struct control *out, struct err *e);

/* Writes st (its time set to now) as status/slice-S-worker-W.json. */
int status_put(struct store *s, struct worker_status *st, struct err *e);

/*
 * Step times, to step precision at one event every 5 s (docs/DESIGN.md
 * "Goodput"): worker 0's supervisor times each step the trainer reports
 * in SLICE_STEP_FILE and its progress event carries what it saw since
 * the one before as details {"n": N, "sum_us": S, "b": B, "w": W,
 * "h": [C, ...]}: N steps took S microseconds in all, and C of them took between
 * STEP_HIST_RATIO^(B + i W) and STEP_HIST_RATIO^(B + (i + 1) W) ms (W a
 * power of two, the smallest whose text fits in the event).
 */
#define STEP_HIST_RATIO 1.02
#define STEP_HIST_BUCKETS 1024 /* 1 ms to about 2.6e8 ms; below 1 ms: 0 */
struct step_hist {
	uint64_t n;
	double sum_ms;
	uint64_t c[STEP_HIST_BUCKETS];
};
/* count steps of ms each. */
void step_hist_add(struct step_hist *h, double ms, uint64_t count);
/* The middle of bucket b, in ms. */
double step_hist_mid_ms(double b);
/* h as details text ("" when empty); -1 when nothing fits in cap. */
int step_hist_format(const struct step_hist *h, char *out, size_t cap);
/* Adds the summary in details to into; COMMON_EINVAL when details is no
 * step summary or a malformed one (into unchanged). */
int step_hist_parse(const char *details, struct step_hist *into,
		    struct err *e);

/* The steps a supervisor sees go by: a step's time is from the one seen
 * before it to it, shared among the steps in between when several went
 * by unseen. The first step after a trainer starts is start-up, not a
 * step time. */
struct step_clock {
	struct step_hist h;
	int64_t step;            /* the newest seen, -1 none since start */
	uint64_t at_us;          /* when (microseconds: a 30 ms step timed
				    in whole ms would be 3% off) */
};
void step_clock_start(struct step_clock *c);
/* Returns the time each new step took, in ms; 0 when none was timed. */
double step_clock_saw(struct step_clock *c, int64_t step, uint64_t now_us);

/*
 * A worker's recent step times, for its heartbeat (step_recent.c): every
 * supervisor keeps the times of the last STEP_RECENT_MAX steps its trainer
 * reported and publishes their figure: the median of those that ended
 * within the last STEP_RECENT_WINDOW_MS, and at least of the newest
 * STEP_RECENT_MIN whatever their age. A median, not a mean: one step that
 * waited for a checkpoint does not move it; more than half must be slow.
 */
#define STEP_RECENT_MAX 256
#define STEP_RECENT_WINDOW_MS 30000
#define STEP_RECENT_MIN 8
struct step_recent {
	float ms[STEP_RECENT_MAX];
	uint64_t end_ms[STEP_RECENT_MAX]; /* when it ended, monotonic ms */
	unsigned next, n;
};
/* count steps of ms each that ended at end_ms. */
void step_recent_add(struct step_recent *r, double ms, uint64_t count,
		     uint64_t end_ms);
void step_recent_figure(const struct step_recent *r, uint64_t now_ms,
			struct step_figure *out);

/*
 * Stragglers (straggler.c; docs/DESIGN.md "Stragglers"): a worker whose
 * recent median step time is above median + STRAGGLER_MADS x MAD of its
 * peers' (the MAD at least STRAGGLER_MAD_FLOOR of their median and 1 ms),
 * sustained: its figure holds at least STEP_RECENT_MIN steps covering at
 * least STRAGGLER_MIN_SPAN_S (or STEP_RECENT_MAX steps, when they come
 * faster). Peers are the other workers whose figure holds STEP_RECENT_MIN
 * steps; with fewer than 2 of them nobody is judged.
 */
#define STRAGGLER_MADS 3
#define STRAGGLER_MAD_FLOOR 0.05
#define STRAGGLER_MIN_SPAN_S 10
struct straggler_verdict {
	bool judged;             /* it had peers enough and steps enough */
	bool flagged;            /* a straggler */
	double peers_median_ms;  /* when judged */
	double threshold_ms;
	char reason[256];        /* why flagged, or why not judged or not
				    flagged when that is a near miss; "" */
};
/* f[i] for each of n workers (n 0 for one that does not take part: not
 * running at the run's generation), out[i] each one's verdict. */
void straggler_judge(const struct step_figure *f, size_t n,
		     struct straggler_verdict *out);
/* The same over heartbeats st[i] (NULL: none yet): those running at
 * generation (0: any) take part. -1 when memory ran out. */
int straggler_judge_workers(const struct worker_status *const *st, size_t n,
			    int64_t generation, struct straggler_verdict *out);
/* step_hist_format of what was seen since the last take, then forgets it
 * (the steps seen go on counting). */
int step_clock_take(struct step_clock *c, char *out, size_t cap);


/*
 * Goodput (goodput.c, goodput_steps.c): how much of a run's time trained
 * the model, and where the rest went, computed from its history alone
 * (docs/DESIGN.md "Goodput"). Pure: events in memory in, figures out; no
 * store, no clock, so a test can feed it any history, and both programs
 * (slicectl goodput, the supervisor's Cloud Monitoring export) compute
 * the same figures.
 *
 * Productive time is the final step count x the ideal step time, the mean
 * of the step times at or below median + 3 x MAD (as Google's
 * ml-goodput-measurement computes it). The step times come from worker
 * 0's progress events, which carry a histogram of the step times its
 * supervisor saw since the one before (step_hist.c).
 */
/* Where the time that did not train went. The order is the JSON's. */
enum goodput_cat {
	GP_CAPACITY,    /* creation to the first boot; a preempted host
			   coming back */
	GP_BOOT,        /* boot, supervisor start, a restart's stop of the
			   old trainers, trainer start to its first step */
	GP_RESTORE,     /* a generation's restore of a committed step */
	GP_RECOMPUTE,   /* steps trained again after a restore */
	GP_CKPT_STALL,  /* steps slower than median + 3 x MAD: the trainer
			   blocked saving, most often */
	GP_DETECTION,   /* a failure to the generation's bump */
	GP_HANG,        /* the last step to the hang verdict */
	GP_MAINTENANCE, /* a deadline's (maintenance, window end) stop */
	GP_OTHER,       /* the rest: between the last step and a failure or
			   the end, the final upload, a running trainer's
			   time not covered by whole steps */
	GP_NCATS
};

extern const char *const goodput_cat_names[GP_NCATS];

/* What one generation's end cost (it and the restart after it). */
struct goodput_failure {
	int64_t generation;  /* the generation that ended */
	char cause[16];      /* crash, hang, preemption, maintenance,
				operator, other */
	char reason[256];    /* the bump's */
	int64_t at_ms;       /* the failure (the bump when not known) */
	double detection_s, hang_s, restart_s, restore_s, recompute_s;
	int64_t recomputed_steps;
};

/* A stretch of the run's time and what it went to, group-wide. */
struct goodput_span {
	int64_t from_ms, to_ms;    /* wall clock, ms since the epoch */
	int cat;                   /* enum goodput_cat; GP_NCATS: trained */
};

struct goodput {
	double elapsed_s, productive_s;
	double ideal_step_s;       /* 0: no step times known */
	double badput_s[GP_NCATS];
	int64_t final_step;        /* -1: none */
	uint64_t step_samples;     /* steps with a measured time */
	const char *precision;     /* how the step times were known */
	struct goodput_failure *failures; /* malloc'd */
	size_t nfailures;
	struct goodput_span *spans; /* malloc'd, generation by generation;
				       the whole run's, not the window's */
	size_t nspans;
};

struct goodput_input {
	const struct event *ev;    /* in time order */
	size_t nev;
	int64_t now_ms;            /* a live run's end */
	int64_t window_ms;         /* > 0: only the last window_ms, and the
				      failures in it */
	unsigned hang_timeout_s;   /* job.json's */
};

/* g filled (release it). COMMON_EINVAL when the history holds no event
 * with a time (nothing to measure), COMMON_ENOMEM. Malformed step
 * summaries are skipped: the step times are then fewer, not wrong. */
int goodput_compute(const struct goodput_input *in, struct goodput *g,
		    struct err *e);
void goodput_release(struct goodput *g);

/* productive / elapsed, 0 when nothing elapsed. */
double goodput_ratio(const struct goodput *g);
/* All that one failure cost. */
double goodput_failure_cost(const struct goodput_failure *f);

/* goodput_steps.c: step times. */

/* The mean of h's step times at or below median + 3 x MAD, in ms; 0 when
 * h holds none. */
double goodput_ideal_ms(const struct step_hist *h);
/* What h's steps slower than all's median + 3 x MAD took beyond ideal,
 * in ms (h NULL: none). */
double goodput_slow_excess_ms(const struct step_hist *all,
			      const struct step_hist *h, double ideal);

#endif
