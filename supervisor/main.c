/*
 * main.c: slice-supervisor's command line: `run` (the daemon the startup
 * script installs under systemd) and `ckpt` (the checkpoint commands, for
 * trainers that save on their own).
 */
#include "checkpoint/checkpoint.h"
#include "common/common.h"
#include "supervisor/supervise.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char run_usage[] =
	"usage: slice-supervisor run --job URL [options]\n"
	"\n"
	"Supervises this worker's share of the run at URL (gs://BUCKET/PREFIX/RUN\n"
	"or file:///DIR/RUN, holding job.json): restores the newest committed\n"
	"checkpoint, runs the trainer, ships its checkpoints, log and heartbeat,\n"
	"and restarts with the whole group after a crash, a hang or a reset. On\n"
	"SIGTERM or a preemption notice the trainer gets SIGTERM and the grace\n"
	"period to write a final step, which is uploaded before exit.\n"
	"\n"
	"On a TPU VM the metadata server says which worker this is; elsewhere\n"
	"give --slice and --worker. With --pod (a GKE JobSet's container) the\n"
	"pod's environment says it: SLICE_POD_SLICE, SLICE_POD_WORKER (else\n"
	"JOB_COMPLETION_INDEX) and SLICE_POD_RESTART_ATTEMPT; SIGTERM is the\n"
	"only notice, and a pod of a new JobSet restart attempt restarts the\n"
	"group once from the newest committed step. With --slurm (a task of\n"
	"`srun --ntasks-per-node=1` in the run's batch job) Slurm's says it:\n"
	"SLURM_NODEID, SLURM_NNODES, SLURM_JOB_NODELIST (its first node is the\n"
	"coordinator) and SLURM_RESTART_COUNT, which plays the restart attempt.\n"
	"With --vertex (a Vertex AI custom job's replica) CLUSTER_SPEC says it:\n"
	"workerpool0's replica is the primary (and the coordinator), workerpool1's\n"
	"the other workers in order; a replica started again rejoins as a pod\n"
	"does.\n"
	"\n"
	"Exit status: 0 the run ended or this worker left after a notice; 1 it\n"
	"could not start; 2 bad arguments. With --pod, --slurm or --vertex: 0 the\n"
	"run is done or stopped, 3 it failed, 143 this worker left after\n"
	"SIGTERM.";

static int cmd_run(int argc, char **argv)
{
	struct supervise_options o = { .slice = -1, .worker = -1 };
	const char *root = getenv("SLICE_ROOT");
	unsigned slice = 0, worker = 0, poll_ms = 0;
	const char *slice_arg = NULL, *worker_arg = NULL;
	bool pod = false;
	struct buf state_dir;
	struct strlist pos;
	int status;
	struct opt opts[] = {
		{ .name = "job", .kind = OPT_STRING, .value = &o.run_url,
		  .arg = "URL", .help = "the run's prefix, holding job.json" },
		{ .name = "slice", .kind = OPT_STRING, .value = &slice_arg,
		  .arg = "S", .help = "this worker's slice (default: metadata)" },
		{ .name = "worker", .kind = OPT_STRING, .value = &worker_arg,
		  .arg = "W",
		  .help = "its index in the slice (default: metadata)" },
		{ .name = "state-dir", .kind = OPT_STRING, .value = &o.state_dir,
		  .arg = "DIR",
		  .help = "state, checkpoints and logs (default "
			  "$SLICE_ROOT/var/lib/slicectl)" },
		{ .name = "pod", .kind = OPT_FLAG, .value = &pod,
		  .help = "in a Kubernetes pod: identity from its "
			  "environment, no metadata server" },
		{ .name = "slurm", .kind = OPT_FLAG, .value = &o.slurm,
		  .help = "in a Slurm job step: identity from srun's "
			  "environment, no metadata server" },
		{ .name = "vertex", .kind = OPT_FLAG, .value = &o.vertex,
		  .help = "in a Vertex AI custom job: identity from "
			  "CLUSTER_SPEC" },
		{ .name = "no-metadata", .kind = OPT_FLAG,
		  .value = &o.no_metadata,
		  .help = "no preemption watch (not on a VM)" },
		{ .name = "control-poll", .kind = OPT_SECONDS, .value = &poll_ms,
		  .arg = "S", .help = "read control.json every S (default 1)" },
		{ 0 },
	};

	strlist_init(&pos);
	buf_init(&state_dir);
	status = opt_parse_command(opts, argc, argv, "slice-supervisor run",
				   run_usage, false, &pos);
	if (status >= 0)
		goto out;
	status = EXIT_USAGE;
	if (pos.n) {
		log_error("unexpected argument '%s' (see slice-supervisor run "
			  "--help)", pos.v[0]);
		goto out;
	}
	if (!o.run_url) {
		log_error("--job URL is required (see slice-supervisor run "
			  "--help)");
		goto out;
	}
	if ((pod || o.slurm || o.vertex) && (slice_arg || worker_arg)) {
		log_error("%s takes the slice and worker from the %s "
			  "environment: leave out --slice and --worker",
			  pod ? "--pod" : o.slurm ? "--slurm" : "--vertex",
			  pod ? "pod's" : o.slurm ? "step's" : "replica's");
		goto out;
	}
	if (pod + o.slurm + o.vertex > 1) {
		log_error("--pod, --slurm and --vertex do not go together");
		goto out;
	}
	o.managed = pod || o.slurm || o.vertex;
	if ((slice_arg && sscanf(slice_arg, "%u", &slice) != 1) ||
	    (worker_arg && sscanf(worker_arg, "%u", &worker) != 1) ||
	    (!slice_arg != !worker_arg)) {
		log_error("--slice and --worker go together, as numbers");
		goto out;
	}
	o.no_metadata = o.no_metadata || o.managed;
	if (slice_arg) {
		o.slice = (int)slice;
		o.worker = (int)worker;
	}
	o.control_poll_ms = poll_ms;
	if (!o.state_dir) {
		if (buf_appendf(&state_dir, "%s/var/lib/slicectl",
				root ? root : "")) {
			status = 1;
			goto out;
		}
		o.state_dir = state_dir.data;
	}
	status = supervise(&o);
out:
	buf_release(&state_dir);
	strlist_release(&pos);
	return status;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: slice-supervisor [--version] COMMAND [ARGS]\n\n"
		   "Commands:\n"
		   "  run    supervise this worker's share of a run\n"
		   "  ckpt   save, list, verify, restore and prune "
		   "checkpoints\n\n"
		   "slice-supervisor COMMAND --help shows a command's "
		   "options.\n");
}

int main(int argc, char **argv)
{
	log_setup("slice-supervisor", LOG_INFO);
	signal(SIGPIPE, SIG_IGN);
	signal(SIGXFSZ, SIG_IGN);
	if (argc < 2) {
		usage(stderr);
		return EXIT_USAGE;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "--version")) {
		printf("slice-supervisor %s\n", SLICECTL_VERSION);
		return 0;
	}
	if (!strcmp(argv[1], "run"))
		return cmd_run(argc - 1, argv + 1);
	if (!strcmp(argv[1], "ckpt"))
		return ckpt_cli("slice-supervisor", argc - 1, argv + 1);
	fprintf(stderr, "slice-supervisor: '%s' is not a command; see "
			"slice-supervisor --help\n", argv[1]);
	return EXIT_USAGE;
}
