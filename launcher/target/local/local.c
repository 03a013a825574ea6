/*
 * local.c: local_run (see local.h). Every worker is the rendered startup
 * script run by /bin/sh under a root of its own (SLICE_ROOT, with
 * SLICE_SYSTEMD=none it execs slice-supervisor in the foreground), in a
 * process group of its own, with its own metadata port and boot-id file.
 * This process plays systemd (a supervisor that exits non-zero or is
 * killed is started again 2 s later; exit 0 means the worker ended) and
 * the cloud (chaos: preemption notices and vanished VMs, resets, killed
 * and stopped trainers). Its timeline and summary are the run's history
 * (events/, run/run.h) as it grows, the account `slicectl events` and
 * `slicectl report` give: one account of a run, not two.
 *
 * One loop, a tick every 200 ms: reap children, inject due chaos, restart
 * what is due, and every second read the run's new events. This process
 * makes itself a child subreaper, so trainers orphaned by a killed
 * supervisor become its children: it reaps them, and a trainer group is
 * signalled only after /proc shows its leader is a child of the worker's
 * supervisor or of this process (never a recycled pid).
 */
#include "cloud/cloud.h"
#include "launcher/launcher.h"
#include "launcher/target/local/local.h"
#include "launcher/tpu_options.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define PATH_LEN 1200
#define TICK_MS 200
#define RESTART_MS 2000      /* systemd's RestartSec */
#define RESET_BOOT_MS 1000   /* a reset VM boots again */
#define PREEMPT_BACK_MS 2000 /* a preempted slice comes back */
#define MAX_GEN 4096

enum cause { C_CRASH, C_HANG, C_RESET, C_PREEMPTION, C_OTHER, C_NCAUSES };
static const char *const cause_names[C_NCAUSES] = { "crash", "hang", "reset",
						    "preemption", "other" };

struct lworker {
	unsigned slice, worker, process;
	char name[40];
	char root[PATH_LEN + 48], boot[PATH_LEN + 64], script[PATH_LEN + 64];
	char log[PATH_LEN + 64], state[PATH_LEN + 96];
	pid_t pid;            /* the sh/supervisor, leader of its group */
	uint64_t restart_at;  /* when to start it again; 0 none */
	bool ended;           /* exited 0: this worker is done */
	bool down;            /* its VM is gone (preempted) */
	bool killed;          /* killed by the provider: no systemd restart */
	unsigned boots, starts;
	unsigned vm;          /* which VM it runs on: a preemption's new
				 VMs are other machines (SLICE_HOST_NAME) */
};

struct preemption {
	int slice;            /* -1 every */
	uint64_t kill_at, back_at;
	int phase;            /* 0 notice given, 1 gone, 2 back */
};

/* A small set of numbers (process groups, committed steps), in the order
 * they were first added. */
struct u64set {
	uint64_t *v;
	size_t n, cap;
};

/* Adds x; false when it was there already (or memory ran out). */
static bool u64set_add(struct u64set *s, uint64_t x)
{
	for (size_t i = 0; i < s->n; i++)
		if (s->v[i] == x)
			return false;
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 32;
		uint64_t *v = realloc(s->v, cap * sizeof(*v));

		if (!v)
			return false;
		s->v = v;
		s->cap = cap;
	}
	s->v[s->n++] = x;
	return true;
}

struct lrun {
	const struct prepared_run *run;
	const struct local_options *o;
	char dir[PATH_LEN];
	struct lworker *w;
	unsigned n;
	struct local_metadata *md;
	struct store *store;
	uint64_t t0;
	struct chaos_event *chaos;
	size_t nchaos, next_chaos;
	/* Chaos's clock: it runs only while every trainer runs at the
	 * current generation and no failure is pending, so a slow boot or
	 * restore on a loaded machine delays the next event instead of
	 * swallowing it. */
	uint64_t trained_ms, clock_at;
	struct preemption *pre;
	size_t npre;
	/* what the run's history said */
	struct events_seen seen;
	int64_t gen;
	char state[16];
	unsigned restarts[C_NCAUSES];
	/* The same restarts by the class their bump recorded (the
	 * supervisors' own account); CAUSE_NCLASSES: none recorded. */
	unsigned by_class[CAUSE_NCLASSES + 1];
	/* Hosts the run quarantined: "HOST (WHY)". Here the mark is all:
	 * one machine has no other to move a worker to. */
	struct strlist quarantined;
	/* The failure chaos injected last, until the group trains a step
	 * at a generation after it: every bump in between is its doing
	 * (peers of a preempted slice crash or hang waiting for it, also
	 * after its VMs are back and before it trains again). */
	int episode;              /* an enum cause, or -1 none */
	int64_t episode_gen;      /* the generation when it was injected */
	int64_t chaos_at;         /* its Unix ms, until a bump uses it */
	int64_t trained[MAX_GEN];     /* the furthest step by generation */
	int64_t restored[MAX_GEN];    /* the step it restored */
	int64_t *started;             /* per process: the newest generation
					 its trainer started at, and when
					 (Unix ms) */
	int64_t *started_ms;
	struct u64set committed;
	int64_t newest_committed;
	bool recovering;
	int64_t fail_at;              /* Unix ms */
	uint64_t lost_ms;
	unsigned failures;        /* chaos injected, and bumps after none */
	/* groups signalled or seen, for the final sweep */
	struct u64set groups;
};

static volatile sig_atomic_t interrupted;

static void on_signal(int sig)
{
	(void)sig;
	interrupted = 1;
}

static int64_t wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static double elapsed_s(const struct lrun *r)
{
	return (double)(mono_ms() - r->t0) / 1000.0;
}

/* j as one NDJSON line on stdout, keys sorted; releases j. */
static void print_ndjson(json_t *j)
{
	char *text = j ? json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS) : NULL;

	if (text)
		printf("%s\n", text);
	fflush(stdout);
	free(text);
	json_decref(j);
}

/* What the provider does to the run's workers goes into the run's
 * history too (run/run.h), beside the supervisors' own account. */
static void record(struct lrun *r, const char *kind, const json_t *fields,
		   const char *msg)
{
	static const char *const kinds[][2] = {
		{ "chaos", "chaos" },
		{ "preempt-gone", "gone" },
		{ "preempt-back", "recreated" },
	};
	char *details = NULL;
	struct err e;
	size_t i = 0;

	while (i < sizeof(kinds) / sizeof(*kinds) && strcmp(kinds[i][0], kind))
		i++;
	if (i == sizeof(kinds) / sizeof(*kinds))
		return;
	if (fields)
		details = json_dumps(fields, JSON_COMPACT | JSON_SORT_KEYS);
	if (event_record_as(r->store, "local", kinds[i][1], r->gen, msg,
			    details, &e))
		log_warn("event not recorded: %s", e.msg);
	free(details);
}

/* One timeline line: text on stderr, or an NDJSON "event" on stdout with
 * the extra members of fields (a json object, taken). */
static void event(struct lrun *r, const char *kind, json_t *fields,
		  const char *fmt, ...) ATTR_PRINTF(4, 5);

static void event(struct lrun *r, const char *kind, json_t *fields,
		  const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	record(r, kind, fields, msg);
	if (r->o->quiet) {
		json_decref(fields);
		return;
	}
	if (r->o->format == 1) {
		json_t *j = fields ? fields : json_object();

		json_object_set_new(j, "type", json_string("event"));
		json_object_set_new(j, "elapsed_s",
				    json_real((double)(long long)(elapsed_s(r) *
								  10) / 10));
		json_object_set_new(j, "event", json_string(kind));
		json_object_set_new(j, "message", json_string(msg));
		print_ndjson(j);
		return;
	}
	json_decref(fields);
	fprintf(stderr, "%7.1fs  %s\n", elapsed_s(r), msg);
}

static void remember_group(struct lrun *r, pid_t g)
{
	u64set_add(&r->groups, (uint64_t)g);
}

/* Whether pid is the leader of its own group and a child of parent (or
 * of this process, which adopts orphans). */
static bool leads_group_under(pid_t pid, pid_t parent)
{
	char path[64], buf[1024], *p;
	int ppid = 0, pgrp = 0;
	FILE *f;
	size_t len;

	if (pid <= 1)
		return false;
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (!f)
		return false;
	len = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[len] = '\0';
	p = strrchr(buf, ')');
	if (!p || sscanf(p + 1, " %*c %d %d", &ppid, &pgrp) != 2)
		return false;
	return pgrp == pid &&
	       ((parent > 0 && ppid == parent) || ppid == getpid());
}

/* The trainer group worker w's state file names, when it is really that
 * worker's trainer (see leads_group_under); 0 otherwise. */
static pid_t trainer_group(struct lrun *r, struct lworker *w)
{
	json_t *j = json_load_file(w->state, 0, NULL);
	pid_t g = 0;

	if (j) {
		g = (pid_t)json_integer_value(json_object_get(j,
							      "trainer_pgid"));
		json_decref(j);
	}
	if (g > 1 && leads_group_under(g, w->pid)) {
		remember_group(r, g);
		return g;
	}
	return 0;
}

/* A fresh boot id for w, as a reboot gives the VM. */
static int new_boot(struct lrun *r, struct lworker *w, struct err *e)
{
	char id[64];

	w->boots++;
	snprintf(id, sizeof(id), "local-%d-%llu-%u-%u\n", (int)getpid(),
		 (unsigned long long)r->t0, w->process, w->boots);
	return fs_write_atomic(w->boot, id, strlen(id), 0644, true, e);
}

/* A preempted VM's successor has a disk of its own: the worker's local
 * tier (its state directory's, or job.json's local_dir's folder for it)
 * is gone. The rest of the root stays, as the supervisor installed there
 * would be installed again by the startup script. */
static void wipe_local_tier(struct lrun *r, struct lworker *w)
{
	char path[PATH_LEN * 2], state[PATH_LEN + 96];
	int err;

	snprintf(state, sizeof(state), "%s/var/lib/slicectl", w->root);
	job_local_tier_dir(&r->run->job, state, w->name, path, sizeof(path));
	if (!path[0])
		return;
	err = fs_remove_tree(path);
	if (err)
		event(r, "error", NULL, "%s: cannot wipe %s: %s", w->name,
		      path, strerror(err));
}

static void start_worker(struct lrun *r, struct lworker *w)
{
	char host[64], vm_name[64];
	pid_t pid;

	w->restart_at = 0;
	w->ended = w->killed = false;
	snprintf(host, sizeof(host), "127.0.0.1:%u",
		 local_metadata_port(r->md, w->process));
	snprintf(vm_name, sizeof(vm_name), "vm-%u-%s", w->vm, w->name);
	pid = fork();
	if (pid < 0) {
		event(r, "worker-error", NULL,
		      "%s: cannot start (fork: %s); trying again in 2 s",
		      w->name, strerror(errno));
		w->restart_at = mono_ms() + RESTART_MS;
		return;
	}
	if (pid == 0) {
		sigset_t none;
		int fd;

		setpgid(0, 0);
		prctl(PR_SET_PDEATHSIG, SIGTERM);
		sigemptyset(&none);
		sigprocmask(SIG_SETMASK, &none, NULL);
		signal(SIGPIPE, SIG_DFL);
		signal(SIGINT, SIG_DFL);
		signal(SIGTERM, SIG_DFL);
		fd = open(w->log, O_WRONLY | O_CREAT | O_APPEND, 0644);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
			if (fd > 2)
				close(fd);
		}
		fd = open("/dev/null", O_RDONLY);
		if (fd >= 0 && fd != 0) {
			dup2(fd, 0);
			close(fd);
		}
		setenv("SLICE_ROOT", w->root, 1);
		setenv("SLICE_SYSTEMD", "none", 1);
		setenv("GCE_METADATA_HOST", host, 1);
		setenv("SLICE_BOOT_ID_FILE", w->boot, 1);
		setenv("SLICE_HOST_NAME", vm_name, 1);
		execl("/bin/sh", "sh", w->script, (char *)NULL);
		_exit(127);
	}
	setpgid(pid, pid); /* also here: no race with a kill */
	w->pid = pid;
	w->starts++;
	remember_group(r, pid);
	event(r, "worker-start",
	      json_pack("{s:s, s:i, s:i, s:i, s:i}", "worker", w->name,
			"slice", (int)w->slice, "process", (int)w->process,
			"pid", (int)pid, "metadata_port",
			(int)local_metadata_port(r->md, w->process)),
	      "%s started (pid %d%s)", w->name, (int)pid,
	      w->starts > 1 ? ", again" : "");
}

/* The VM is gone: the supervisor's group and its trainer's, at once. */
static void kill_worker(struct lrun *r, struct lworker *w)
{
	pid_t t;

	if (!w->pid)
		return;
	t = trainer_group(r, w);
	kill(-w->pid, SIGKILL);
	if (t)
		kill(-t, SIGKILL);
	w->killed = true;
}

static void worker_exited(struct lrun *r, struct lworker *w, int status)
{
	char how[64];

	if (WIFEXITED(status))
		snprintf(how, sizeof(how), "exit status %d",
			 WEXITSTATUS(status));
	else
		snprintf(how, sizeof(how), "signal %d", WTERMSIG(status));
	w->pid = 0;
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0 && !w->killed) {
		w->ended = true;
		event(r, "worker-exit",
		      json_pack("{s:s, s:i}", "worker", w->name, "status", 0),
		      "%s ended (exit status 0)", w->name);
		return;
	}
	if (w->killed || w->down || interrupted) {
		event(r, "worker-exit",
		      json_pack("{s:s, s:s}", "worker", w->name, "how", how),
		      "%s is gone (%s)", w->name, how);
		return;
	}
	w->restart_at = mono_ms() + RESTART_MS;
	event(r, "worker-exit",
	      json_pack("{s:s, s:s}", "worker", w->name, "how", how),
	      "%s failed (%s): started again in 2 s", w->name, how);
}

/* Reaps every child that ended: workers, and orphaned trainers. */
static void reap(struct lrun *r)
{
	for (;;) {
		siginfo_t si;
		int status;
		pid_t pid;

		memset(&si, 0, sizeof(si));
		if (waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) ||
		    si.si_pid == 0)
			return;
		pid = si.si_pid;
		if (waitpid(pid, &status, 0) != pid)
			return;
		for (unsigned i = 0; i < r->n; i++)
			if (r->w[i].pid == pid)
				worker_exited(r, &r->w[i], status);
	}
}

/* ---- chaos ---- */

static struct lworker *by_process(struct lrun *r, int p)
{
	return p >= 0 && (unsigned)p < r->n ? &r->w[p] : NULL;
}

static void inject(struct lrun *r, const struct chaos_event *ev)
{
	/* The next bump answers the first injection it has not answered: one
	 * landing before that bump (a preemption 0.2 s after a reset, under
	 * the sanitizers) joins its restart, a failure but not its cause. */
	bool first = !r->chaos_at;
	struct lworker *w;
	pid_t g;

	if (first) {
		r->chaos_at = wall_ms();
		r->episode = ev->kind == CHAOS_PREEMPT ? C_PREEMPTION
			   : ev->kind == CHAOS_RESET  ? C_RESET
			   : ev->kind == CHAOS_CRASH  ? C_CRASH
						      : C_HANG;
		r->episode_gen = r->gen;
	}
	r->failures++;
	switch (ev->kind) {
	case CHAOS_PREEMPT: {
		struct preemption *p = &r->pre[r->npre++];

		p->slice = ev->slice;
		p->kill_at = mono_ms() +
			     ((uint64_t)r->run->job.grace_s + 5) * 1000;
		p->phase = 0;
		for (unsigned i = 0; i < r->n; i++) {
			if (ev->slice >= 0 && r->w[i].slice != (unsigned)ev->slice)
				continue;
			local_metadata_set(r->md, i, "instance/preempted",
					   "TRUE");
		}
		if (ev->slice >= 0)
			event(r, "chaos", json_pack("{s:s, s:i}", "chaos",
						    "preempt", "slice",
						    ev->slice),
			      "chaos: slice %d preempted (instance/preempted "
			      "= TRUE; its VMs go in %u s)", ev->slice,
			      r->run->job.grace_s + 5);
		else
			event(r, "chaos", json_pack("{s:s}", "chaos", "preempt"),
			      "chaos: every slice preempted (its VMs go in "
			      "%u s)", r->run->job.grace_s + 5);
		return;
	}
	case CHAOS_RESET:
		event(r, "chaos", json_pack("{s:s}", "chaos", "reset"),
		      "chaos: reset: every worker killed, rebooted with a new "
		      "boot id");
		for (unsigned i = 0; i < r->n; i++) {
			struct err e;

			err_init(&e);
			kill_worker(r, &r->w[i]);
			if (new_boot(r, &r->w[i], &e))
				event(r, "error", NULL, "%s", e.msg);
			r->w[i].down = false;
			r->w[i].restart_at = mono_ms() + RESET_BOOT_MS;
		}
		return;
	case CHAOS_CRASH:
	case CHAOS_HANG:
		w = by_process(r, ev->worker);
		g = w && w->pid ? trainer_group(r, w) : 0;
		if (!g) {
			event(r, "chaos",
			      json_pack("{s:s, s:i}", "chaos",
					ev->kind == CHAOS_CRASH ? "crash"
								: "hang",
					"process", ev->worker),
			      "chaos: %s of process %d skipped: no trainer is "
			      "running there", ev->kind == CHAOS_CRASH
						       ? "crash" : "hang",
			      ev->worker);
			if (first) {
				r->chaos_at = 0;
				r->episode = -1;
			}
			r->failures--;
			return;
		}
		kill(-g, ev->kind == CHAOS_CRASH ? SIGKILL : SIGSTOP);
		event(r, "chaos",
		      json_pack("{s:s, s:i, s:i}", "chaos",
				ev->kind == CHAOS_CRASH ? "crash" : "hang",
				"process", ev->worker, "pgid", (int)g),
		      ev->kind == CHAOS_CRASH
			      ? "chaos: process %d's trainer killed (SIGKILL "
				"to group %d)"
			      : "chaos: process %d's trainer hangs (SIGSTOP to "
				"group %d)",
		      ev->worker, (int)g);
		return;
	}
}

static void preemptions(struct lrun *r)
{
	uint64_t now = mono_ms();

	for (size_t i = 0; i < r->npre; i++) {
		struct preemption *p = &r->pre[i];

		if (p->phase == 0 && now >= p->kill_at) {
			for (unsigned k = 0; k < r->n; k++) {
				struct lworker *w = &r->w[k];

				if (p->slice >= 0 && w->slice != (unsigned)p->slice)
					continue;
				kill_worker(r, w);
				w->down = true;
				w->restart_at = 0;
			}
			p->phase = 1;
			p->back_at = now + PREEMPT_BACK_MS;
			if (p->slice >= 0)
				event(r, "preempt-gone",
				      json_pack("{s:i}", "slice", p->slice),
				      "slice %d: its VMs are gone", p->slice);
			else
				event(r, "preempt-gone", NULL,
				      "every slice: the VMs are gone");
		} else if (p->phase == 1 && now >= p->back_at) {
			for (unsigned k = 0; k < r->n; k++) {
				struct lworker *w = &r->w[k];
				struct err e;

				if (p->slice >= 0 && w->slice != (unsigned)p->slice)
					continue;
				if (w->pid)
					continue; /* not reaped yet */
				err_init(&e);
				if (new_boot(r, w, &e))
					event(r, "error", NULL, "%s", e.msg);
				local_metadata_set(r->md, k,
						   "instance/preempted",
						   "FALSE");
				w->down = false;
				w->vm++;
				wipe_local_tier(r, w);
				w->restart_at = now;
			}
			p->phase = 2;
			if (p->slice >= 0)
				event(r, "preempt-back",
				      json_pack("{s:i}", "slice", p->slice),
				      "slice %d is back: new VMs (new boot "
				      "ids, local disks wiped), "
				      "instance/preempted = FALSE",
				      p->slice);
			else
				event(r, "preempt-back", NULL,
				      "every slice is back: new VMs (new boot "
				      "ids, local disks wiped), "
				      "instance/preempted = FALSE");
		}
	}
}

/* ---- the run, through its history ---- */

/* A bump's cause: the chaos episode in progress, else its reason
 * ("slice-S-worker-W: its trainer ended ...", "... hung ...", "the host
 * was reset or rebooted", "it rejoins after a preemption"). */
static enum cause classify(struct lrun *r, const struct event *ev)
{
	const char *why = ev->cause;

	if (r->episode >= 0 && ev->generation > r->episode_gen)
		return (enum cause)r->episode;
	if (!strcmp(ev->by, "slicectl"))
		return C_OTHER;
	if (strstr(why, "trainer ended"))
		return C_CRASH;
	if (strstr(why, "hung"))
		return C_HANG;
	if (strstr(why, "preempt"))
		return C_PREEMPTION;
	if (strstr(why, "reset") || strstr(why, "reboot") ||
	    strstr(why, "supervisor restarted"))
		return C_RESET;
	return C_OTHER;
}

/* Whether a preemption is still under way (its VMs not back yet). */
static bool preemption_pending(const struct lrun *r)
{
	for (size_t i = 0; i < r->npre; i++)
		if (r->pre[i].phase < 2)
			return true;
	return false;
}

/* The process a writer's name ("slice-S-worker-W") stands for; -1 for
 * any other (slicectl, this provider). */
static int process_of(const struct lrun *r, const char *name)
{
	unsigned sl, w;
	char tail;

	if (sscanf(name, "slice-%u-worker-%u%c", &sl, &w, &tail) != 2 ||
	    sl >= r->run->job.num_slices || w >= r->run->job.workers_per_slice)
		return -1;
	return (int)(sl * r->run->job.workers_per_slice + w);
}

static void note_committed(struct lrun *r, uint64_t step)
{
	if (!u64set_add(&r->committed, step))
		return;
	if ((int64_t)step > r->newest_committed) {
		r->newest_committed = (int64_t)step;
		event(r, "checkpoint",
		      json_pack("{s:I}", "step", (json_int_t)step),
		      "checkpoint step %llu committed",
		      (unsigned long long)step);
	}
}

static void set_state(struct lrun *r, const char *state, const char *why)
{
	if (!strcmp(state, r->state))
		return;
	event(r, "state", json_pack("{s:s, s:s}", "state", state, "reason",
				    why),
	      "run %s%s%s", state, why[0] ? ": " : "", why);
	snprintf(r->state, sizeof(r->state), "%s", state);
}

/* The class a bump's details record (enum cause_class), else
 * CAUSE_NCLASSES, and its kind ("" none). */
static int recorded_class(const struct event *ev, char *kind, size_t cap)
{
	int k = cause_class_in(ev->details, kind, cap);

	return k < 0 ? CAUSE_NCLASSES : k;
}

static const char *class_name(int cls)
{
	return cls < CAUSE_NCLASSES ? cause_class_names[cls] : "unrecorded";
}

/* A new generation: a restart (or several, collapsed), of one cause. */
static void on_bump(struct lrun *r, const struct event *ev)
{
	enum cause k;
	char kind[32];
	int cls;

	if (!r->gen || ev->generation <= r->gen) {
		if (ev->generation > r->gen)
			r->gen = ev->generation;
		return;
	}
	k = classify(r, ev);
	cls = recorded_class(ev, kind, sizeof(kind));
	r->restarts[k] += (unsigned)(ev->generation - r->gen);
	r->by_class[cls] += (unsigned)(ev->generation - r->gen);
	if (!r->chaos_at && (r->episode < 0 ||
			     ev->generation <= r->episode_gen) &&
	    !r->recovering)
		r->failures++;
	if (!r->recovering) {
		r->recovering = true;
		r->fail_at = r->chaos_at ? r->chaos_at : event_ms(ev);
	}
	r->chaos_at = 0;
	r->gen = ev->generation;
	event(r, "generation",
	      json_pack("{s:I, s:s, s:s, s:s, s:s, s:s}", "generation",
			(json_int_t)ev->generation, "cause", cause_names[k],
			"class", class_name(cls), "kind", kind, "reason",
			ev->cause, "updated_by", ev->by),
	      "generation %lld (%s, recorded %s): %s",
	      (long long)ev->generation, cause_names[k], class_name(cls),
	      ev->cause);
}

/* Every trainer started at the current generation (and every VM is
 * back): the failure's time lost ends at the last start. */
static void check_recovered(struct lrun *r)
{
	int64_t at = r->fail_at;
	uint64_t lost;

	if (!r->recovering || preemption_pending(r))
		return;
	for (unsigned i = 0; i < r->n; i++) {
		if (r->started[i] != r->gen)
			return;
		if (r->started_ms[i] > at)
			at = r->started_ms[i];
	}
	lost = (uint64_t)(at - r->fail_at);
	r->recovering = false;
	r->lost_ms += lost;
	event(r, "recovered",
	      json_pack("{s:I, s:f}", "generation", (json_int_t)r->gen,
			"lost_s", (double)lost / 1000.0),
	      "every trainer runs again at generation %lld (%.1f s after the "
	      "failure)", (long long)r->gen, (double)lost / 1000.0);
}

/* Whether every trainer runs at the current generation, with no
 * injected failure pending and none being recovered from: the time
 * chaos events count. */
static bool training(const struct lrun *r)
{
	if (r->recovering || r->chaos_at || r->gen < 1)
		return false;
	for (unsigned i = 0; i < r->n; i++)
		if (r->started[i] != r->gen)
			return false;
	return true;
}

/* Kinds whose step is one the trainers of its generation finished. */
static bool trained_kind(const char *kind)
{
	static const char *const kinds[] = { "exit", "stop", "hang",
					     "progress", "notice", "commit" };

	for (size_t i = 0; i < sizeof(kinds) / sizeof(*kinds); i++)
		if (!strcmp(kind, kinds[i]))
			return true;
	return false;
}

static void on_quarantine(struct lrun *r, const struct event *ev)
{
	json_t *d = json_loads(ev->details, 0, NULL);
	const char *host = json_string_value(json_object_get(d, "host"));
	const char *why = json_string_value(json_object_get(d, "why"));
	char text[192];

	snprintf(text, sizeof(text), "%.64s (%.100s)", host ? host : "?",
		 why ? why : ev->cause);
	if (strlist_push(&r->quarantined, text))
		log_warn("out of memory noting a quarantine");
	event(r, "quarantine", json_pack("{s:s, s:s}", "host", host ? host : "",
					 "why", why ? why : ""),
	      "host %s quarantined, marked (a local run cannot move a "
	      "worker): %s", text, ev->cause);
	json_decref(d);
}

static void on_event(struct lrun *r, const struct event *ev)
{
	int64_t g = ev->generation;
	int p = process_of(r, ev->worker);

	if (!strcmp(ev->worker, "local"))
		return; /* this provider's own: printed when it acted */
	if (!strcmp(ev->kind, "bump")) {
		on_bump(r, ev);
		set_state(r, "running", ev->cause);
	} else if (!strcmp(ev->kind, "stopping") ||
		   !strcmp(ev->kind, "failed") || !strcmp(ev->kind, "done")) {
		set_state(r, ev->kind, ev->cause);
	}
	if (!strcmp(ev->kind, EVENT_QUARANTINE))
		on_quarantine(r, ev);
	if (!r->gen && g > 0)
		r->gen = g;
	if (g <= 0 || g >= MAX_GEN)
		return;
	if (!strcmp(ev->kind, "commit") && ev->step >= 0)
		note_committed(r, (uint64_t)ev->step);
	if ((!strcmp(ev->kind, "bump") || !strcmp(ev->kind, "start")) &&
	    ev->step >= 0 && r->restored[g] < 0)
		r->restored[g] = ev->step;
	if (!strcmp(ev->kind, "start") && p >= 0 && g >= r->started[p]) {
		r->started[p] = g;
		r->started_ms[p] = event_ms(ev);
	}
	if (trained_kind(ev->kind) && ev->step > r->trained[g])
		r->trained[g] = ev->step;
	if (r->episode >= 0 && g > r->episode_gen && r->restored[g] >= 0 &&
	    r->trained[g] > r->restored[g])
		r->episode = -1;
}

/* The run's events since the last look, in order. */
static void poll_events(struct lrun *r)
{
	struct event *v;
	size_t n;
	struct err e;

	if (events_new(r->store, &r->seen, &v, &n, &e)) {
		log_debug("events: %s", e.msg);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		on_event(r, &v[i]);
		check_recovered(r);
	}
	free(v);
	check_recovered(r);
}

/* ---- ending ---- */

/* control.json's word on how the run ended, when the history has not
 * said it: the supervisors leave once they see the run done or failed,
 * and under load the provider can find them all gone before it has read
 * the event that says why (the sanitizer run at 0d2ce77: a failed run
 * reported as "running"). */
static void settle_state(struct lrun *r)
{
	struct control c;
	struct err e;

	if (strcmp(r->state, "running") || control_load(r->store, &c, &e))
		return;
	if (!strcmp(c.state, "done") || !strcmp(c.state, "failed") ||
	    !strcmp(c.state, "stopping"))
		set_state(r, c.state, c.reason);
}

static bool any_running(const struct lrun *r)
{
	for (unsigned i = 0; i < r->n; i++)
		if (r->w[i].pid)
			return true;
	return false;
}

static void wait_workers(struct lrun *r, uint64_t ms)
{
	uint64_t until = mono_ms() + ms;

	while (any_running(r) && mono_ms() < until) {
		reap(r);
		proc_sleep_ms(50, true);
	}
	reap(r);
}

/* SIGTERM to every supervisor (each stops its trainer), a wait, then
 * SIGKILL to every group still there. */
static void stop_all(struct lrun *r)
{
	pid_t *trainers = calloc(r->n, sizeof(*trainers));

	for (unsigned i = 0; i < r->n; i++) {
		r->w[i].restart_at = 0;
		if (trainers && r->w[i].pid)
			trainers[i] = trainer_group(r, &r->w[i]);
		if (r->w[i].pid) {
			r->w[i].killed = true;
			kill(-r->w[i].pid, SIGTERM);
			if (trainers && trainers[i])
				kill(-trainers[i], SIGCONT); /* a hung one */
		}
	}
	wait_workers(r, ((uint64_t)r->run->job.grace_s + 10) * 1000);
	for (unsigned i = 0; i < r->n; i++)
		if (r->w[i].pid)
			kill(-r->w[i].pid, SIGKILL);
	free(trainers);
	wait_workers(r, 5000);
}

/* Every group this run made or signalled that still has members: gone. */
static void sweep(struct lrun *r)
{
	for (size_t i = 0; i < r->groups.n; i++) {
		pid_t g = (pid_t)r->groups.v[i];

		if (kill(-g, 0) == 0) {
			/* Only groups whose leader, if alive, is ours. */
			if (kill(g, 0) == 0 && !leads_group_under(g, 0))
				continue;
			kill(-g, SIGKILL);
		}
	}
	for (int t = 0; t < 40; t++) {
		siginfo_t si;

		reap(r);
		memset(&si, 0, sizeof(si));
		if (waitid(P_ALL, 0, &si, WEXITED | WNOHANG | WNOWAIT) &&
		    errno == ECHILD)
			break;
		proc_sleep_ms(50, true);
	}
}

/* Steps trained more than once: generation g trains again the steps
 * from its restored step up to the furthest any earlier one reached. */
static int64_t steps_recomputed(const struct lrun *r)
{
	int64_t recomputed = 0, furthest = -1;

	for (int64_t g = 1; g < MAX_GEN && g <= r->gen; g++) {
		int64_t t = r->trained[g];

		if (g > 1 && r->restored[g] >= 0 && t > r->restored[g] &&
		    furthest > r->restored[g])
			recomputed += (t < furthest ? t : furthest) -
				      r->restored[g];
		if (t > furthest)
			furthest = t;
	}
	return recomputed;
}

static void summary(struct lrun *r, const char *how, int status)
{
	int64_t recomputed = steps_recomputed(r);
	unsigned total = 0;
	json_t *j, *causes = json_object(), *classes = json_object();
	json_t *hosts = json_array();
	char by_class[256], quarantined[512] = "none";
	size_t o = 0, q = 0;

	for (size_t i = 0; i < r->quarantined.n; i++) {
		json_array_append_new(hosts,
				      json_string(r->quarantined.v[i]));
		if (q < sizeof(quarantined))
			q += (size_t)snprintf(quarantined + q,
					      sizeof(quarantined) - q, "%s%s",
					      i ? ", " : "",
					      r->quarantined.v[i]);
	}

	for (int k = 0; k < C_NCAUSES; k++) {
		total += r->restarts[k];
		json_object_set_new(causes, cause_names[k],
				    json_integer(r->restarts[k]));
	}
	by_class[0] = '\0';
	for (int k = 0; k <= CAUSE_NCLASSES; k++) {
		json_object_set_new(classes, class_name(k),
				    json_integer(r->by_class[k]));
		if (r->by_class[k] && o < sizeof(by_class))
			o += (size_t)snprintf(by_class + o, sizeof(by_class) - o,
					      "%s%s %u", o ? ", " : "",
					      class_name(k), r->by_class[k]);
	}
	if (r->o->format == 1) {
		j = json_pack("{s:s, s:s, s:s, s:i, s:I, s:i, s:o, s:o, s:i, "
			      "s:I, s:I, s:f, s:I, s:f, s:o}",
			      "type", "summary", "run", r->run->job.name,
			      "end", how, "exit_status", status, "steps_done",
			      (json_int_t)(r->newest_committed < 0
						   ? 0 : r->newest_committed),
			      "restarts", (int)total, "restarts_by_cause",
			      causes, "restarts_by_class", classes,
			      "failures",
			      (int)r->failures,
			      "checkpoints_committed",
			      (json_int_t)r->committed.n, "steps_recomputed",
			      (json_int_t)recomputed, "time_lost_s",
			      (double)r->lost_ms / 1000.0, "generation",
			      (json_int_t)r->gen, "elapsed_s", elapsed_s(r),
			      "quarantined", hosts);
		print_ndjson(j);
		return;
	}
	json_decref(causes);
	json_decref(classes);
	json_decref(hosts);
	fprintf(stderr,
		"\nrun %s: %s after %.1f s\n"
		"  steps done             %lld (newest committed step)\n"
		"  failures               %u\n"
		"  restarts               %u (crash %u, hang %u, reset %u, "
		"preemption %u, other %u)\n"
		"  recorded causes        %s\n"
		"  checkpoints committed  %zu\n"
		"  steps recomputed       %lld\n"
		"  time lost              %.1f s\n"
		"  quarantined hosts      %s\n",
		r->run->job.name, how, elapsed_s(r),
		(long long)(r->newest_committed < 0 ? 0 : r->newest_committed),
		r->failures, total, r->restarts[C_CRASH], r->restarts[C_HANG],
		r->restarts[C_RESET], r->restarts[C_PREEMPTION],
		r->restarts[C_OTHER], o ? by_class : "none",
		r->committed.n, (long long)recomputed,
		(double)r->lost_ms / 1000.0, quarantined);
}

/* ---- set-up and the loop ---- */

static int setup(struct lrun *r, struct err *e)
{
	const struct job *j = &r->run->job;
	int rc;

	if (r->o->dir) {
		snprintf(r->dir, sizeof(r->dir), "%s", r->o->dir);
	} else {
		struct buf b;

		buf_init(&b);
		rc = slicectl_home_path(&b, "local", e);
		if (!rc && buf_appendf(&b, "/%s", j->name))
			rc = err_set(e, COMMON_ENOMEM, "out of memory");
		if (!rc)
			snprintf(r->dir, sizeof(r->dir), "%s", b.data);
		buf_release(&b);
		if (rc)
			return rc;
	}
	if (!j->num_slices || !j->workers_per_slice)
		return err_set(e, COMMON_EINVAL, "the job has no workers");
	r->n = j->num_slices * j->workers_per_slice;
	r->w = calloc(r->n, sizeof(*r->w));
	r->started = calloc(r->n, sizeof(*r->started));
	r->started_ms = calloc(r->n, sizeof(*r->started_ms));
	if (!r->w || !r->started || !r->started_ms)
		return err_set(e, COMMON_ENOMEM, "out of memory");
	rc = chaos_parse(r->o->chaos, r->o->seed, j->num_slices,
			 j->workers_per_slice, &r->chaos, &r->nchaos, e);
	if (rc)
		return rc;
	r->pre = calloc(r->nchaos ? r->nchaos : 1, sizeof(*r->pre));
	if (!r->pre)
		return err_set(e, COMMON_ENOMEM, "out of memory");
	rc = store_open(&r->store, r->run->run_url, e);
	if (rc)
		return rc;
	rc = local_metadata_start(&r->md, j->num_slices, j->workers_per_slice,
				  e);
	if (rc)
		return rc;
	for (unsigned i = 0; i < r->n && !rc; i++) {
		struct lworker *w = &r->w[i];

		w->process = i;
		w->slice = i / j->workers_per_slice;
		w->worker = i % j->workers_per_slice;
		run_worker_name(w->slice, w->worker, w->name, sizeof(w->name));
		snprintf(w->root, sizeof(w->root), "%s/%s", r->dir, w->name);
		snprintf(w->boot, sizeof(w->boot), "%s/boot_id", w->root);
		snprintf(w->script, sizeof(w->script), "%s/startup.sh",
			 w->root);
		snprintf(w->log, sizeof(w->log), "%s/worker.log", w->root);
		snprintf(w->state, sizeof(w->state),
			 "%s/var/lib/slicectl/state.json", w->root);
		rc = fs_mkdir_p(w->root, 0755, e);
		if (!rc)
			rc = fs_write_atomic(w->script, r->run->startup_script,
					     r->run->startup_len, 0755, true, e);
		if (!rc)
			rc = new_boot(r, w, e);
	}
	return rc;
}

static void teardown(struct lrun *r)
{
	local_metadata_stop(r->md);
	store_close(r->store);
	free(r->chaos);
	free(r->pre);
	free(r->w);
	free(r->committed.v);
	strlist_release(&r->quarantined);
	free(r->started);
	free(r->started_ms);
	events_seen_release(&r->seen);
	free(r->groups.v);
}

int local_run(const struct prepared_run *run, const struct local_options *o)
{
	struct lrun r;
	struct sigaction sa, old_int, old_term;
	uint64_t next_poll = 0, end_by = 0;
	const char *how = NULL;
	int status = 1;
	struct err e;

	memset(&r, 0, sizeof(r));
	r.run = run;
	r.o = o;
	r.t0 = mono_ms();
	r.newest_committed = -1;
	r.episode = -1;
	for (int g = 0; g < MAX_GEN; g++)
		r.trained[g] = r.restored[g] = -1;
	snprintf(r.state, sizeof(r.state), "running"); /* as prepared */
	err_init(&e);
	interrupted = 0;
	if (setup(&r, &e)) {
		log_error("local run %s: %s", run->job.name, e.msg);
		teardown(&r);
		return e.code == COMMON_EUSAGE ? EXIT_USAGE : 1;
	}
	prctl(PR_SET_CHILD_SUBREAPER, 1);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, &old_int);
	sigaction(SIGTERM, &sa, &old_term);
	event(&r, "run-start",
	      json_pack("{s:s, s:s, s:i, s:i}", "run", run->job.name, "dir",
			r.dir, "slices", (int)run->job.num_slices,
			"workers_per_slice", (int)run->job.workers_per_slice),
	      "run %s: %u slice%s x %u worker%s under %s%s%s",
	      run->job.name, run->job.num_slices,
	      run->job.num_slices == 1 ? "" : "s", run->job.workers_per_slice,
	      run->job.workers_per_slice == 1 ? "" : "s", r.dir,
	      r.nchaos ? ", chaos: " : "", r.nchaos ? o->chaos : "");
	for (unsigned i = 0; i < r.n; i++)
		start_worker(&r, &r.w[i]);
	while (!interrupted) {
		uint64_t now;
		bool all_ended = true, pending = false;

		reap(&r);
		now = mono_ms();
		if (training(&r))
			r.trained_ms += now - r.clock_at;
		r.clock_at = now;
		while (!end_by && r.next_chaos < r.nchaos &&
		       r.trained_ms >= r.chaos[r.next_chaos].at_ms)
			inject(&r, &r.chaos[r.next_chaos++]);
		preemptions(&r);
		for (unsigned i = 0; i < r.n; i++) {
			struct lworker *w = &r.w[i];

			if (!end_by && !w->pid && w->restart_at &&
			    now >= w->restart_at && !w->down)
				start_worker(&r, w);
			if (w->pid || w->restart_at || w->down)
				all_ended = false;
		}
		for (size_t i = 0; i < r.npre; i++)
			pending |= r.pre[i].phase < 2;
		if (now >= next_poll) {
			next_poll = now + 1000;
			poll_events(&r);
		}
		if (!end_by && (!strcmp(r.state, "done") ||
				!strcmp(r.state, "failed"))) {
			/* The supervisors see it too and leave. */
			end_by = now + ((uint64_t)run->job.grace_s + 30) * 1000;
		}
		if ((end_by && (now >= end_by || !any_running(&r))) ||
		    (all_ended && !pending))
			break;
		/* Not restarted: an interrupt ends the tick at once. */
		proc_sleep_ms(TICK_MS, false);
	}
	if (interrupted) {
		event(&r, "interrupted", NULL,
		      "interrupted: stopping every worker");
		how = "interrupted";
		status = EXIT_INTERRUPT;
	}
	stop_all(&r);
	sweep(&r);
	/* The supervisors wrote their last events before they exited. */
	poll_events(&r);
	settle_state(&r);
	if (!how) {
		how = r.state[0] ? r.state : "ended";
		status = !strcmp(r.state, "done") ? 0 : 1;
		if (!strcmp(r.state, "stopping"))
			how = "stopped";
	}
	event(&r, "run-end", json_pack("{s:s, s:i}", "end", how, "status",
				      status),
	      "run %s (exit status %d)", how, status);
	summary(&r, how, status);
	sigaction(SIGINT, &old_int, NULL);
	sigaction(SIGTERM, &old_term, NULL);
	teardown(&r);
	return status;
}
