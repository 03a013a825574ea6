/*
 * cmd_watch.c: `slicectl watch RUN`: what `slicectl job --watch` does
 * after submitting, for a run already there, from any machine that
 * reaches its bucket and its target's API: the run's target (target.h)
 * watches it while this watcher holds the run's watch lease
 * (watch_lease.h), so that watchers can come, go and take over.
 */
#include "launcher/launcher.h"
#include "launcher/run_qr.h"
#include "launcher/target/target.h"
#include "launcher/watch_lease.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_RECREATE_BUDGET 10

static const char usage[] =
	"usage: slicectl watch RUN [--bucket URL] [--lease S]\n"
	"                      [--recreate-budget N] [--project P] [--zone Z]\n"
	"\n"
	"Stays with run RUN until it is done or failed, as slicectl job\n"
	"--watch does after submitting: on Cloud TPU, a queued resource that\n"
	"a preemption left SUSPENDED (or that FAILED) is recreated after the\n"
	"run's generation is bumped, asking again for what the queued\n"
	"resource itself says it is; on Vertex AI, a CustomJob that capacity\n"
	"ended is submitted again. At most --recreate-budget recreations\n"
	"(default 10; those earlier watchers made, as watch.json counts\n"
	"them, count too on Cloud TPU).\n"
	"\n"
	"Only one watcher of a run acts at a time: each holds the lease\n"
	"BUCKET/RUN/watch.lease (--lease long, default 30s, renewed every\n"
	"--lease/3) while it acts. Another watcher waits, saying who holds it\n"
	"and when it expires, and takes over within --lease once the holder\n"
	"is gone, finishing any recreation the holder had begun rather than\n"
	"starting another. A watcher that loses its lease stops acting at\n"
	"once and waits again. A watcher that ends releases the lease.\n"
	"\n"
	"Runs on GKE, Slurm and the local provider have nothing to watch:\n"
	"they are refused, saying why.\n"
	"\n" RUN_USAGE_BUCKET "\n"
	"Exit status: 0 the run is done (or stopping, and every worker has\n"
	"left); 1 the run failed, the recreate budget is spent, or the store\n"
	"or the API failed; 2 bad arguments, or a run with nothing to watch;\n"
	"4 no run RUN under BUCKET (no job.json).";

int cmd_watch(int argc, char **argv)
{
	struct run_qr q = { 0 };
	struct watch_flags f = { DEFAULT_RECREATE_BUDGET,
				 WATCH_LEASE_DEFAULT_MS };
	const struct target_ops *t;
	const char *bad;
	int status;
	const struct opt own[] = {
		{ .name = "lease", .kind = OPT_SECONDS, .value = &f.lease_ms,
		  .arg = "S", .help = "the watch lease's length; another "
		  "watcher takes over within it (default 30s)" },
		{ .name = "recreate-budget", .kind = OPT_UINT,
		  .value = &f.recreate_budget, .arg = "N", .max = 1000000,
		  .help = "recreations this watcher may make (default 10)" },
	};
	struct opt opts[OPT_COUNT(own) + RUN_QR_OPTIONS_COUNT + 1] = { 0 };

	memcpy(opts, own, sizeof(own));
	run_qr_table(&q, opt_end(opts), 0);
	/* RUN is a run wherever the bucket comes from: never a queued
	 * resource's own name, as it may be for reset and delete. */
	q.ro.bucket = getenv("SLICECTL_BUCKET");
	status = run_qr_start(opts, argc, argv, usage, &q);
	if (status >= 0)
		goto out;
	bad = q.ro.format == 1 ? "--format json: slicectl watch prints "
				 "progress lines only"
			       : watch_lease_bad_ms(f.lease_ms);
	if (bad) {
		log_error("%s (see slicectl watch --help)", bad);
		status = EXIT_USAGE;
		goto out;
	}
	/* With a bucket, a RUN without job.json has ended above (4). */
	if (!q.is_run) {
		log_error("slicectl watch needs the run's bucket: give --bucket "
			  "or set $SLICECTL_BUCKET");
		status = EXIT_USAGE;
		goto out;
	}
	t = run_qr_target(&q);
	if (!t->watch) {
		log_error("run %s is on %s, which has nothing to watch: %s",
			  q.name, t->name, t->no_watch);
		status = EXIT_USAGE;
		goto out;
	}
	status = t->watch(&q, &f);
out:
	run_qr_release(&q);
	return status;
}
