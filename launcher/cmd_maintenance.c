/*
 * cmd_maintenance.c: `slicectl maintenance RUN|QR`: starts the maintenance
 * Google announced on a queued resource's nodes now
 * (performMaintenanceQueuedResource) instead of at its window, optionally
 * right after the run's next committed step, so the run restarts from
 * that step and the maintenance costs no steps at all.
 */
#include "checkpoint/checkpoint.h"
#include "launcher/launcher.h"
#include "launcher/run_options.h"
#include "launcher/target/target.h"
#include "launcher/tpu_options.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char usage[] =
	"usage: slicectl maintenance RUN|QR [--nodes N1,N2] [--after-commit]\n"
	"       [--wait] [--timeout S] [--bucket URL] [--project P] [--zone Z]\n"
	"       [--format text|json]\n"
	"\n"
	"Starts the maintenance announced on a queued resource's nodes now\n"
	"(the API's performMaintenanceQueuedResource) rather than whenever\n"
	"its window comes: on the nodes named by --nodes, else on every node\n"
	"with maintenance announced (slicectl describe and status show them).\n"
	"\n"
	"RUN is a run under --bucket (or $SLICECTL_BUCKET): its queued\n"
	"resource, project and zone come from its job.json. Anything else is\n"
	"taken for a queued resource's name in --project and --zone.\n"
	"\n"
	"--after-commit (a run only) waits for the run's next committed step\n"
	"and starts the maintenance right after it: the workers restart from\n"
	"that step, so the maintenance costs no steps. --timeout bounds the\n"
	"wait for the step and, with --wait, for the maintenance to be done.\n"
	"\n"
	"Prints \"QR: maintenance started on NODES\"; --format json prints\n"
	"{\"queued_resource\", \"project\", \"zone\", \"nodes\" (null: every\n"
	"node with maintenance announced), \"run\", \"after_step\", \"done\"}.\n"
	"\n"
	"Exit status: 0 started (with --wait: done); 1 the API or the bucket\n"
	"failed, no maintenance is pending there, or the run ended while\n"
	"waiting; 2 bad arguments; 4 no such queued resource; 124 timed out.";

/* How often --after-commit lists the run's checkpoints. */
#define COMMIT_POLL_MS 500

struct maintenance {
	struct tpu_options to;
	struct run_options ro;
	const char *nodes_arg;
	bool after_commit;
	struct strlist nodes;
	const char *qr;
	bool have_run;
	int64_t after_step; /* -1: not waited for */
};

/* The newest committed step of the run, 0 when none. */
static int newest_committed(struct store *s, int64_t *step, struct err *e)
{
	struct ckpt_list l;
	int rc = ckpt_list(s, &l, e);

	*step = 0;
	if (rc)
		return rc;
	for (size_t i = 0; i < l.n; i++)
		if (l.v[i].committed && !l.v[i].corrupt)
			*step = (int64_t)l.v[i].step;
	ckpt_list_release(&l);
	return 0;
}

/* Waits for a step newer than the newest committed now. Returns 0, or
 * an exit status after saying why. */
static int wait_commit(struct maintenance *m)
{
	uint64_t until = m->to.timeout_ms ? mono_ms() + m->to.timeout_ms : 0;
	int64_t from, now;
	struct control c;
	bool found;
	struct err e;
	int rc;

	err_init(&e);
	rc = newest_committed(m->ro.store, &from, &e);
	if (rc)
		return run_exit_status(rc, &e);
	log_info("%s: waiting for a step after %lld to be committed", m->ro.run,
		 (long long)from);
	for (;;) {
		rc = newest_committed(m->ro.store, &now, &e);
		if (rc)
			return run_exit_status(rc, &e);
		if (now > from) {
			m->after_step = now;
			return 0;
		}
		rc = run_control_peek(&m->ro, &c, &found, &e);
		if (rc)
			return run_exit_status(rc, &e);
		if (found && strcmp(c.state, "running")) {
			log_error("%s is %s (%s): no step will be committed; "
				  "maintenance not started", m->ro.run, c.state,
				  c.reason);
			return 1;
		}
		if (until && mono_ms() >= until) {
			log_error("%s: no step after %lld committed within the "
				  "timeout; maintenance not started", m->ro.run,
				  (long long)from);
			return EXIT_TIMEOUT;
		}
		proc_sleep_ms(COMMIT_POLL_MS, true);
	}
}

/* --nodes N1,N2 into m->nodes. */
static int split_nodes(struct maintenance *m)
{
	const char *p = m->nodes_arg;

	while (p && *p) {
		size_t n = strcspn(p, ",");
		char id[256];

		if (!n || n >= sizeof(id)) {
			log_error("--nodes takes node ids separated by commas, "
				  "not '%s'", m->nodes_arg);
			return EXIT_USAGE;
		}
		memcpy(id, p, n);
		id[n] = '\0';
		if (strlist_push(&m->nodes, id)) {
			log_error("out of memory");
			return 1;
		}
		p += n + (p[n] == ',');
	}
	return 0;
}

/* A run under the bucket gives the queued resource; else NAME is one. */
static int resolve(struct maintenance *m, const char *name)
{
	const char *bucket = m->ro.bucket && *m->ro.bucket
				     ? m->ro.bucket
				     : getenv("SLICECTL_BUCKET");
	int status;

	m->qr = name;
	if (bucket && *bucket) {
		m->ro.quiet_missing = true;
		status = run_open(&m->ro, name);
		if (status >= 0 && status != EXIT_NOT_FOUND)
			return status;
		m->have_run = status < 0;
	}
	if (m->after_commit && !m->have_run) {
		log_error("--after-commit needs a run: no run %s under %s", name,
			  bucket && *bucket ? bucket : "(no --bucket)");
		return EXIT_USAGE;
	}
	if (!m->have_run)
		return -1;
	if (!m->ro.job.tpu_name) {
		log_error("run %s has no queued resource (it runs on the %s "
			  "target)", name, target_of(&m->ro.job)->name);
		return EXIT_USAGE;
	}
	m->qr = m->ro.job.tpu_name;
	if (!m->to.project)
		m->to.project = m->ro.job.tpu_project;
	if (!m->to.zone)
		m->to.zone = m->ro.job.tpu_zone;
	return -1;
}

static void print_result(const struct maintenance *m, bool done)
{
	json_t *o, *nodes;

	if (m->to.format != 1) {
		printf("%s: maintenance %s on ", m->qr,
		       done ? "done" : "started");
		if (!m->nodes.n)
			printf("every node with maintenance announced");
		for (size_t i = 0; i < m->nodes.n; i++)
			printf("%s%s", i ? ", " : "", m->nodes.v[i]);
		if (m->after_step >= 0)
			printf(" (after step %lld of %s was committed)",
			       (long long)m->after_step, m->ro.run);
		printf("\n");
		return;
	}
	nodes = m->nodes.n ? json_array() : json_null();
	for (size_t i = 0; i < m->nodes.n; i++)
		json_array_append_new(nodes, run_json_text(m->nodes.v[i]));
	o = json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:b}", "queued_resource",
		      run_json_text(m->qr), "project",
		      run_json_text(m->to.project), "zone",
		      run_json_text(m->to.zone), "nodes", nodes, "run",
		      run_json_text(m->have_run ? m->ro.run : NULL),
		      "after_step",
		      m->after_step >= 0 ? json_integer(m->after_step)
					 : json_null(),
		      "done", done);
	if (o)
		run_print_json(o);
}

int cmd_maintenance(int argc, char **argv)
{
	struct maintenance m = { .after_step = -1 };
	const struct opt own[] = {
		{ .name = "nodes", .kind = OPT_STRING, .value = &m.nodes_arg,
		  .arg = "N1,N2",
		  .help = "only these nodes (default: every node with "
			  "maintenance announced)" },
		{ .name = "after-commit", .kind = OPT_FLAG,
		  .value = &m.after_commit,
		  .help = "start right after the run's next committed step" },
		{ .name = "bucket", .kind = OPT_STRING, .value = &m.ro.bucket,
		  .arg = "URL",
		  .help = "where runs live: gs://BUCKET[/PREFIX] or "
			  "file:///DIR (default: $SLICECTL_BUCKET)" },
	};
	struct opt opts[OPT_COUNT(own) + TPU_OPTIONS_COUNT + 1] = { 0 };
	struct tpu_client *c = NULL;
	struct strlist pos;
	struct err e;
	int status, rc;

	strlist_init(&pos);
	strlist_init(&m.nodes);
	job_init(&m.ro.job);
	memcpy(opts, own, sizeof(own));
	tpu_options_table(&m.to, opt_end(opts),
			  TPU_WITH_FORMAT | TPU_WITH_WAIT | TPU_WITH_TIMEOUT);
	status = tpu_command_parse(opts, argc, argv, usage, &pos, 1);
	if (status >= 0 || (status = split_nodes(&m)) ||
	    (status = resolve(&m, pos.v[0])) >= 0 ||
	    (m.after_commit && (status = wait_commit(&m))) ||
	    (status = tpu_options_open(&m.to, &c)))
		goto out;
	err_init(&e);
	rc = tpu_qr_perform_maintenance(c, m.qr, &m.nodes, m.to.wait,
					m.to.timeout_ms, &e);
	if (rc) {
		status = tpu_exit_status(rc, &e);
		goto out;
	}
	print_result(&m, m.to.wait);
out:
	tpu_close(c);
	run_options_release(&m.ro);
	strlist_release(&m.nodes);
	strlist_release(&pos);
	return status;
}
