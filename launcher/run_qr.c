/*
 * run_qr.c: see run_qr.h.
 */
#include "launcher/launcher.h"
#include "launcher/run_qr.h"
#include "launcher/target/target.h"

#include <stdlib.h>
#include <string.h>

void run_qr_table(struct run_qr *q, struct opt *opts, int with)
{
	run_options_table(&q->ro, opts);
	/* run_options_table's --format says what these commands print. */
	tpu_options_table(&q->to, opts + RUN_OPTIONS_COUNT,
			  with & ~TPU_WITH_FORMAT);
}

/* A flag given, else what the run's job.json recorded (NULL leaves it to
 * the environment). */
static const char *flag_or(const char *flag, const char *recorded)
{
	return flag && *flag ? flag : recorded;
}

/*
 * Reads BUCKET/NAME/job.json when there is a bucket, and takes the queued
 * resource, project and zone from it. Returns -1 to go on, or the exit
 * status after saying what is wrong.
 */
static int find_run(struct run_qr *q)
{
	const char *env = getenv("SLICECTL_BUCKET");
	bool given = q->ro.bucket && *q->ro.bucket;
	int status;

	q->qr = q->name;
	if (!given && !(env && *env))
		return -1;
	q->ro.quiet_missing = !given;
	status = run_open(&q->ro, q->name);
	if (status == EXIT_NOT_FOUND && !given) {
		/* Only the environment named the bucket: NAME may well be a
		 * queued resource made without slicectl job. */
		log_info("taking %s as a queued resource's own name instead "
			 "(the bucket came from $SLICECTL_BUCKET, not "
			 "--bucket)", q->name);
		run_options_release(&q->ro);
		return -1;
	}
	if (status >= 0)
		return status;
	q->is_run = true;
	q->qr = NULL;
	return -1;
}

int run_qr_start(const struct opt *opts, int argc, char **argv,
		 const char *usage, struct run_qr *q)
{
	struct strlist pos;
	int status;

	job_init(&q->ro.job);
	strlist_init(&pos);
	status = tpu_command_parse(opts, argc, argv, usage, &pos, 1);
	if (status >= 0)
		goto out;
	q->name = strdup(pos.v[0]);
	if (!q->name) {
		log_error("out of memory");
		status = 1;
		goto out;
	}
	status = find_run(q);
out:
	strlist_release(&pos);
	return status;
}

const struct target_ops *run_qr_target(const struct run_qr *q)
{
	return q->is_run ? target_of(&q->ro.job) : &target_tpu_vm;
}

int run_qr_unsupported(const struct run_qr *q, const char *verb)
{
	log_error("run %s is on the %s target, which has nothing to %s: "
		  "slicectl restart %s restarts its trainers, slicectl stop %s "
		  "ends it", q->name, run_qr_target(q)->name, verb, q->name,
		  q->name);
	return EXIT_USAGE;
}

int run_qr_open(struct run_qr *q, struct tpu_client **c)
{
	if (q->is_run) {
		q->qr = q->ro.job.tpu_name;
		q->to.project = flag_or(q->to.project, q->ro.job.tpu_project);
		q->to.zone = flag_or(q->to.zone, q->ro.job.tpu_zone);
	}
	return tpu_options_open(&q->to, c);
}

void run_qr_say(const struct run_qr *q, const char *doing)
{
	log_info("%s %s (project %s, zone %s)%s%s", doing, q->qr,
		 q->to.project, q->to.zone,
		 q->is_run ? ", the queued resource of run " : "",
		 q->is_run ? q->ro.url : "");
}

void run_qr_release(struct run_qr *q)
{
	run_options_release(&q->ro);
	free(q->name);
	q->name = NULL;
}

void run_qr_print_json(const struct run_qr *q, const char *action,
		       const char *state)
{
	json_t *o = json_object();

	json_object_set_new(o, "name", run_json_text(q->name));
	json_object_set_new(o, "url",
			    run_json_text(q->is_run ? q->ro.url : NULL));
	json_object_set_new(o, "queued_resource", run_json_text(q->qr));
	json_object_set_new(o, "project", run_json_text(q->to.project));
	json_object_set_new(o, "zone", run_json_text(q->to.zone));
	json_object_set_new(o, "action", json_string(action));
	json_object_set_new(o, "state", json_string(state));
	run_print_json(o);
}
