/*
 * slurm_run.c: what the operator commands ask of a Slurm run's batch
 * job. `scontrol show job --oneliner ID` says its state, reason, nodes
 * and restart count (squeue forgets a job as soon as it ends; scontrol
 * keeps it for the controller's MinJobAge); `scontrol show hostnames`
 * expands its node list; scancel deletes it; scontrol requeue is the
 * reset (every node's supervisor killed, the next allocation restores
 * the newest committed step). A run submitted through slurmrestd is
 * asked and deleted through it (slurm_rest.c); its API in Slurm 22.05 has
 * no requeue, so the reset is scontrol's there too.
 */
#include "launcher/job.h"
#include "launcher/target/slurm/slurm.h"
#include "launcher/target/target.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Key=Value's value in scontrol's one line (words split on spaces). */
static void field(const char *line, const char *key, char *out, size_t len)
{
	size_t k = strlen(key);

	*out = '\0';
	for (const char *p = line; p && *p;) {
		p += strspn(p, " \n");
		if (!strncmp(p, key, k) && p[k] == '=') {
			size_t n = strcspn(p + k + 1, " \n");

			snprintf(out, len, "%.*s", (int)n, p + k + 1);
			return;
		}
		p += strcspn(p, " \n");
	}
}

static int job_info(const struct job_target *t, struct slurm_job_info *out,
		    struct err *e)
{
	const char *argv[] = { "scontrol", "show", "job", "--oneliner",
			       t->job_id, NULL };
	char restarts[32];
	struct buf b;
	int rc;

	if (t->slurmrestd)
		return slurm_rest_job(t->slurmrestd, t->job_id, out, e);
	memset(out, 0, sizeof(*out));
	out->restarts = -1;
	buf_init(&b);
	rc = slurm_exec(t->cluster, argv, NULL, &b, e);
	if (rc && strstr(e->msg, "Invalid job id")) {
		out->missing = true;
		rc = 0;
	} else if (!rc) {
		const char *text = b.data ? b.data : "";

		field(text, "JobState", out->state, sizeof(out->state));
		field(text, "Reason", out->reason, sizeof(out->reason));
		field(text, "NodeList", out->nodes, sizeof(out->nodes));
		field(text, "Restarts", restarts, sizeof(restarts));
		if (*restarts)
			out->restarts = strtol(restarts, NULL, 10);
		if (!*out->state)
			rc = err_set(e, COMMON_EIO,
				     "scontrol show job %s said no JobState",
				     t->job_id);
	}
	buf_release(&b);
	return rc;
}

/* Where add_worker puts a node's worker. */
struct node_sink {
	struct target_view *v;
	const char *state;
	long restarts;
};

static int add_worker(void *ud, const char *host)
{
	struct node_sink *s = ud;
	struct target_worker *w;

	w = realloc(s->v->workers, (s->v->n + 1) * sizeof(*w));
	if (!w)
		return COMMON_ENOMEM;
	s->v->workers = w;
	w += s->v->n;
	memset(w, 0, sizeof(*w));
	w->slice = 0;
	w->worker = (int)s->v->n++;
	w->restart_attempt = s->restarts;
	snprintf(w->name, sizeof(w->name), "%s", host);
	snprintf(w->phase, sizeof(w->phase), "%s", s->state);
	snprintf(w->node, sizeof(w->node), "%s", host);
	return 0;
}

/* One worker per node of the allocation, in the list's order (the
 * supervisors' SLURM_NODEID order): scontrol expands the list, or, for
 * a run through slurmrestd, slurm_hostlist_each. */
static int add_nodes(const struct job_target *t, const char *state,
		     const char *nodes, long restarts, struct target_view *v,
		     struct err *e)
{
	const char *argv[] = { "scontrol", "show", "hostnames", nodes, NULL };
	struct node_sink sink = { v, state, restarts };
	struct buf b;
	int rc;

	if (!*nodes || !strcmp(nodes, "(null)"))
		return 0;
	if (t->slurmrestd) {
		rc = slurm_hostlist_each(nodes, add_worker, &sink);
		if (rc == COMMON_ENOMEM)
			return err_set(e, rc, "out of memory");
		return rc ? err_set(e, COMMON_EIO, "slurmrestd's node list "
				    "'%s' is not a Slurm hostlist", nodes)
			  : 0;
	}
	buf_init(&b);
	rc = slurm_exec(t->cluster, argv, NULL, &b, e);
	for (char *p = b.data, *nl; !rc && p && *p; p = nl ? nl + 1 : NULL) {
		nl = strchr(p, '\n');
		if (nl)
			*nl = '\0';
		if (*p && add_worker(&sink, p))
			rc = err_set(e, COMMON_ENOMEM, "out of memory");
	}
	buf_release(&b);
	return rc;
}

/* Whether the job is over (a requeued job comes back: not over). */
static bool ended(const struct slurm_job_info *i, long unused)
{
	static const char *const active[] = {
		"RUNNING", "PENDING", "COMPLETING", "CONFIGURING", "REQUEUED",
		"REQUEUE_HOLD", "REQUEUE_FED", "SUSPENDED", "RESIZING",
		"SIGNALING", "STAGE_OUT",
	};

	(void)unused;
	if (i->missing)
		return true;
	for (size_t k = 0; k < sizeof(active) / sizeof(active[0]); k++)
		if (!strcmp(i->state, active[k]))
			return false;
	return true;
}

int slurm_describe(const struct job *j, struct target_view *out,
		   struct err *e)
{
	const struct job_target *t = &j->target;
	struct slurm_job_info info;
	int rc;

	snprintf(out->what, sizeof(out->what), "Slurm job %s (partition %s)",
		 t->job_id, t->partition);
	rc = job_info(t, &info, e);
	if (rc)
		return rc;
	if (info.missing) {
		out->missing = true;
		snprintf(out->state, sizeof(out->state), "gone");
		return 0;
	}
	snprintf(out->state, sizeof(out->state), "%s", info.state);
	if (*info.reason && strcmp(info.reason, "None"))
		snprintf(out->message, sizeof(out->message), "%s",
			 info.reason);
	out->restarts = info.restarts;
	if (!strcmp(info.state, "COMPLETED"))
		snprintf(out->end, sizeof(out->end), "Completed");
	else if (ended(&info, 0))
		snprintf(out->end, sizeof(out->end), "Failed");
	return add_nodes(t, info.state, info.nodes, info.restarts, out, e);
}

/* Polls until done(info) or timeout_ms: COMMON_EIO. */
static int wait_for(const struct job_target *t, unsigned timeout_ms,
		    bool (*done)(const struct slurm_job_info *, long),
		    long arg, struct slurm_job_info *info, struct err *e)
{
	uint64_t end = mono_ms() + timeout_ms;
	unsigned poll_ms = job_env_ms("SLICECTL_SLURM_POLL_MS", 1000);

	for (;;) {
		int rc = job_info(t, info, e);

		if (rc || done(info, arg))
			return rc;
		if (timeout_ms && mono_ms() >= end)
			return err_set(e, COMMON_EIO,
				       "Slurm job %s is still %s after %.0f s",
				       t->job_id, info->state,
				       timeout_ms / 1000.0);
		proc_sleep_ms(poll_ms, true);
	}
}

int slurm_delete(const struct job *j, bool wait, unsigned timeout_ms,
		 bool *absent, struct err *e)
{
	const struct job_target *t = &j->target;
	struct slurm_job_info info;
	int rc = job_info(t, &info, e);

	*absent = !rc && ended(&info, 0);
	if (rc || *absent)
		return rc;
	rc = t->slurmrestd
		     ? slurm_rest_cancel(t->slurmrestd, t->job_id, e)
		     : slurm_job_command(t->cluster, "scancel", NULL,
					 t->job_id, e);
	if (!rc && wait)
		rc = wait_for(t, timeout_ms, ended, 0, &info, e);
	return rc;
}

static bool running_again(const struct slurm_job_info *i, long before)
{
	return ended(i, 0) ||
	       (!strcmp(i->state, "RUNNING") && i->restarts > before);
}

int slurm_reset(const struct job *j, bool wait, unsigned timeout_ms,
		long *attempt, struct err *e)
{
	const struct job_target *t = &j->target;
	struct slurm_job_info info;
	long before;
	int rc = job_info(t, &info, e);

	*attempt = -1;
	if (rc)
		return rc;
	if (ended(&info, 0))
		return err_set(e, COMMON_EUSAGE,
			       "Slurm job %s has ended (%s): run slicectl job "
			       "again to submit the run anew", t->job_id,
			       info.missing ? "gone" : info.state);
	before = info.restarts;
	rc = slurm_job_command(t->cluster, "scontrol", "requeue", t->job_id,
			       e);
	if (rc || !wait)
		return rc;
	rc = wait_for(t, timeout_ms, running_again, before, &info, e);
	if (!rc && strcmp(info.state, "RUNNING"))
		return err_set(e, COMMON_EIO, "Slurm job %s ended (%s) "
			       "instead of running again", t->job_id,
			       info.missing ? "gone" : info.state);
	if (!rc)
		*attempt = info.restarts;
	return rc;
}
