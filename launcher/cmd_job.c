/*
 * cmd_job.c: `slicectl job`: hands a training job to the workers'
 * supervisors on one target (target.h): the flags every target shares
 * and each target's own are parsed into struct job_flags, then the
 * target's row checks them and submits the job (job.h puts the run's
 * objects in the bucket).
 */
#include "launcher/hosts.h"
#include "launcher/job.h"
#include "launcher/launcher.h"
#include "launcher/target/target.h"
#include "launcher/watch_lease.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_RECREATE_BUDGET 10

static const char usage[] =
	"usage: slicectl job RUN --bucket gs://BUCKET[/PREFIX] "
	"--accelerator-type T\n"
	"                    --command CMD [options]\n"
	"       slicectl job RUN --target local --workers-per-slice W\n"
	"                    --bucket file:///DIR --command CMD [options]\n"
	"       slicectl job RUN --target gke --cluster C --location L "
	"--queue LQ\n"
	"                    --image IMG --bucket URL --accelerator-type T\n"
	"                    --command CMD [options]\n"
	"       slicectl job RUN --target slurm --partition P --nodes N "
	"--bucket URL\n"
	"                    --command CMD [options]\n"
	"       slicectl job RUN --target vertex --region R --image IMG "
	"--nodes N\n"
	"                    --accelerator-type T --bucket gs://BUCKET "
	"--command CMD\n"
	"                    [options]\n"
	"\n"
	"RUN may be given as --name RUN too, and --node-count as --num-slices\n"
	"(the older spellings).\n"
	"\n"
	"Hands a training job to slice-supervisor on every worker. Checks\n"
	"everything first, then uploads to BUCKET/RUN the code bundle (the\n"
	"--script-dir, as bundle.tar.zst), the supervisor binary, job.json and\n"
	"control.json, and creates the queued resource RUN (--node-count\n"
	"slices) whose startup script installs and starts the supervisor on\n"
	"each worker. The supervisors run --command, ship checkpoints, and\n"
	"restart the whole group from the newest committed step after a\n"
	"crash, hang, reset or preemption. slicectl's ssh key goes into the\n"
	"nodes' metadata, so `slicectl run --tpu RUN` works too.\n"
	"\n"
	"A run's job.json is written once: the same command again resumes the\n"
	"run; other flags under the same name are refused.\n"
	"\n"
	"--watch stays and babysits: it prints the queued resource's and the\n"
	"run's state changes, and when a preemption leaves the queued\n"
	"resource SUSPENDED (or it FAILED) it bumps the run's generation,\n"
	"deletes and recreates it (at most --recreate-budget times, with\n"
	"exponential backoff from 30 s), so the run resumes from its last\n"
	"committed step. It ends when the run is done or failed. It acts only\n"
	"while it holds the run's watch lease (BUCKET/RUN/watch.lease, renewed\n"
	"every --lease/3): a second watcher of the run (another --watch, or\n"
	"slicectl watch RUN) waits and takes over within --lease once the\n"
	"first is gone. --target vertex's --watch submits a CustomJob that\n"
	"capacity ended again, the same way.\n"
	"\n"
	"--provisioning-model flex-start --max-run-duration D asks for\n"
	"flex-start capacity (as slicectl create does): each window lasts D\n"
	"once ACTIVE. The supervisors commit a final step before it ends and\n"
	"wait; --watch then queues the next window with the same shape and the\n"
	"run resumes from that step, window after window, within the recreate\n"
	"budget. slicectl status shows the window's end and the queue state\n"
	"of the next.\n"
	"\n"
	"--target gke runs the job on Google Kubernetes Engine instead: one\n"
	"JobSet (jobset.x-k8s.io) admitted by Kueue through LocalQueue --queue,\n"
	"--node-count slices each on its own TPU node pool, or with a GPU\n"
	"machine type (a3-megagpu-8g, a3-ultragpu-8g, g2-standard-24, ...)\n"
	"--nodes N GPU nodes with their GPUDirect plumbing; one pod per host\n"
	"running --image with slice-supervisor (fetched from the bucket by an\n"
	"init container) as its entry point. The cluster is found through the\n"
	"GKE API (--cluster, --location, --project) or a kubeconfig\n"
	"(--kubeconfig, $KUBECONFIG; --context). It checks that JobSet, Kueue\n"
	"and the LocalQueue are there, creates the JobSet and shows Kueue's\n"
	"admission until every pod runs. --render prints the JobSet instead\n"
	"(YAML, or with --format json a v1 List) for kubectl apply -f.\n"
	"Capacity: --spot, --flex-start (with --queued-provisioning: Kueue's\n"
	"ProvisioningRequest, all or nothing), or --reservation R.\n"
	"\n"
	"--target slurm submits one batch job (sbatch, --requeue) to partition\n"
	"--partition on --nodes nodes (--gpus-per-node, --account, --qos,\n"
	"--time, --constraint as sbatch reads them; --cluster: sbatch -M). Its\n"
	"one step runs slice-supervisor --slurm on every node (srun\n"
	"--ntasks-per-node=1), fetched from the bucket (gs://, or file:// on a\n"
	"shared filesystem). SIGTERM grace + 60 s before --time commits an\n"
	"emergency step and requeues the job; the next allocation restores the\n"
	"newest committed step. It prints the job's id. --render prints the\n"
	"batch script instead. --slurmrestd URL (http://HOST:PORT, or\n"
	"unix:/path/to/socket) submits, asks and deletes through slurmrestd's\n"
	"REST API (openapi/v0.0.38, Slurm 22.05) instead, with the JWT in\n"
	"SLURM_JWT, or none on a unix socket (rest_auth/local).\n"
	"\n"
	"--target local (or --local) runs every worker here instead, as local\n"
	"processes started by the same startup script, with file:// storage;\n"
	"--chaos injects failures ('preempt:slice=1@20s,reset@45s,\n"
	"crash:worker=3@60s,hang:worker=2@80s', or 'random' with --seed).\n"
	"\n"
	"Exit status: 0 created (with --watch or --local: the run is done);\n"
	"1 the bucket, the API or sbatch failed, or the run failed; 2 bad arguments\n"
	"(nothing was created); 130 interrupted.";

int usage_error(const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	log_error("%s (see slicectl job --help)", msg);
	return EXIT_USAGE;
}

/* RUN, as the argument every run command takes or as --name (the older
 * spelling); both given must agree. */
static int run_name(struct job_request *r, const char *name,
		    const struct strlist *pos)
{
	if (pos->n > 1)
		return usage_error("unexpected argument '%s': the run's name "
				   "is the only argument", pos->v[1]);
	if (pos->n && name && strcmp(name, pos->v[0]))
		return usage_error("the run is named twice: '%s' and --name "
				   "'%s'", pos->v[0], name);
	r->name = pos->n ? pos->v[0] : name;
	if (!r->name || !*r->name)
		return usage_error("no run name: slicectl job RUN ...");
	return 0;
}

/* Above any duration OPT_SECONDS takes (46 days). */
#define NOT_GIVEN UINT_MAX

/* job.json would name its own fields: the flags are named here. */
static int preflight_flags(struct job_request *r, unsigned timeout_ms)
{
	if (r->preflight && !*r->preflight)
		return usage_error("--preflight is empty: give a command "
				   "line, as /bin/sh -c reads it");
	if (timeout_ms == NOT_GIVEN)
		return 0;
	if (!r->preflight)
		return usage_error("--preflight-timeout bounds --preflight, "
				   "which is not given");
	if (!timeout_ms || timeout_ms % 1000 || timeout_ms > 86400u * 1000)
		return usage_error("--preflight-timeout takes whole seconds, "
				   "from 1 s to 24 h");
	r->preflight_timeout_s = timeout_ms / 1000;
	return 0;
}

/* --lease: only with --watch, within its bounds. */
static int lease_flag(struct job_flags *o)
{
	const char *bad;

	if (o->lease_ms == NOT_GIVEN) {
		o->lease_ms = WATCH_LEASE_DEFAULT_MS;
		return 0;
	}
	if (!o->watch)
		return usage_error("--lease is the lease of --watch, which is "
				   "not given");
	bad = watch_lease_bad_ms(o->lease_ms);
	return bad ? usage_error("%s", bad) : 0;
}

int cmd_job(int argc, char **argv)
{
	struct job_flags o = { 0 };
	struct job_request *r = &o.r;
	const struct target_ops *t;
	const char *name = NULL, *hang_signal = NULL;
	struct strlist pos;
	unsigned hang_ms, grace_ms, preflight_ms = NOT_GIVEN;
	int target = -1, status;

	job_request_init(r);
	o.recreate_budget = DEFAULT_RECREATE_BUDGET;
	o.lease_ms = NOT_GIVEN;
	hang_ms = r->hang_timeout_s * 1000u;
	grace_ms = r->grace_s * 1000u;
	const struct opt own[] = {
		{ .name = "name", .kind = OPT_STRING, .value = &name,
		  .arg = "RUN", .help = "the run's name, as the argument RUN: "
		  "also the queued resource's (lowercase letters, digits, "
		  "'-')" },
		{ .name = "bucket", .kind = OPT_STRING, .value = &r->bucket,
		  .arg = "URL", .help = "where runs live: gs://BUCKET[/PREFIX] "
		  "(or file:///DIR; default: $SLICECTL_BUCKET)" },
		{ .name = "accelerator-type", .kind = OPT_STRING,
		  .value = &r->accelerator_type, .arg = "T",
		  .help = "each slice's type, for example v4-32 or "
			  "v5litepod-16" },
		{ .name = "runtime-version", .kind = OPT_STRING,
		  .value = &r->runtime_version, .arg = "V",
		  .help = "the TPU VM image (default: the type's usual one)" },
		{ .name = "node-count", .kind = OPT_UINT, .value = &r->num_slices,
		  .arg = "N", .min = 1, .max = 4096,
		  .help = "slices (default 1); more than 1 is multislice" },
		{ .name = "num-slices", .kind = OPT_UINT, .value = &r->num_slices,
		  .arg = "N", .min = 1, .max = 4096, .help = "as --node-count" },
		{ .name = "script-dir", .kind = OPT_STRING,
		  .value = &r->script_dir, .arg = "DIR",
		  .help = "your code, unpacked on every worker as the "
			  "trainer's working directory" },
		{ .name = "command", .kind = OPT_STRING, .value = &r->command,
		  .arg = "CMD", .help = "the trainer, as /bin/sh -c reads it" },
		{ .name = "env", .kind = OPT_LIST, .value = &r->env,
		  .arg = "K=V", .help = "an environment variable for the "
		  "trainer (repeatable)" },
		{ .name = "max-restarts", .kind = OPT_UINT,
		  .value = &r->max_restarts, .arg = "N", .max = 1000000,
		  .help = "restarts for the trainer's failures, hangs and "
			  "preflights before the run fails (default 100)" },
		{ .name = "max-infra-restarts", .kind = OPT_UINT,
		  .value = &r->max_infra_restarts, .arg = "N", .max = 1000000,
		  .help = "restarts for preemptions, maintenance, resets and "
			  "evictions before the run fails (default: no "
			  "limit)" },
		{ .name = "hang-timeout", .kind = OPT_SECONDS,
		  .value = &hang_ms, .arg = "S",
		  .help = "no output and no new step for S: hung (default "
			  "30m; 0 off)" },
		{ .name = "hang-signal", .kind = OPT_STRING,
		  .value = &hang_signal, .arg = "SIG",
		  .help = "before a hung trainer is ended, sent to its "
			  "processes that catch it, e.g. SIGUSR1 for "
			  "Python's faulthandler.register (default: none)" },
		{ .name = "grace", .kind = OPT_SECONDS, .value = &grace_ms,
		  .arg = "S", .help = "on preemption, time for a final step "
		  "(default 25s)" },
		{ .name = "keep", .kind = OPT_UINT, .value = &r->keep,
		  .arg = "K", .min = 1, .max = 1000000,
		  .help = "newest committed steps kept (default 3)" },
		{ .name = "keep-every", .kind = OPT_UINT, .value = &r->keep_every,
		  .arg = "M", .max = 4000000000u,
		  .help = "also keep every step divisible by M" },
		{ .name = "local-keep", .kind = OPT_UINT,
		  .value = &r->local_keep, .arg = "K", .max = 1000,
		  .help = "each host keeps its part of the newest K committed "
			  "steps on local disk, and an in-place restart "
			  "restores from there, reading no part from the "
			  "bucket (default 2; 0: none)" },
		{ .name = "persist-every", .kind = OPT_UINT,
		  .value = &r->persist_every, .arg = "N",
		  .max = 4000000000u,
		  .help = "only steps divisible by N (and a host's last "
			  "before its machine goes away) go to the bucket; "
			  "the others are committed on the local and peer "
			  "tiers alone, and restored from there while a "
			  "host holding each part lives (default: every "
			  "step)" },
		{ .name = "local-tier-dir", .kind = OPT_STRING,
		  .value = &r->local_dir, .arg = "DIR",
		  .help = "where hosts keep those copies, an absolute path "
			  "(e.g. a tmpfs: /dev/shm/slicectl; default: the "
			  "supervisor's state directory, on disk)" },
		{ .name = "rendezvous-port", .kind = OPT_UINT,
		  .value = &r->rendezvous_port, .arg = "N", .min = 1024,
		  .max = 65536 - RUN_RENDEZVOUS_PORTS,
		  .help = "the trainers' MASTER_PORT cycles through 16 ports "
			  "from N, one per generation (default 29500; "
			  "--local: a free range)" },
		{ .name = "preflight", .kind = OPT_STRING,
		  .value = &r->preflight, .arg = "CMD",
		  .help = "run on every host before each generation's "
			  "trainer (/bin/sh -c, the trainer's environment); "
			  "a host where it fails does not start" },
		{ .name = "preflight-timeout", .kind = OPT_SECONDS,
		  .value = &preflight_ms, .arg = "S",
		  .help = "the preflight's bound; past it, it failed "
			  "(default 5m)" },
		{ .name = "bad-host-pattern", .kind = OPT_STRING,
		  .value = &r->bad_host_pattern, .arg = "REGEX",
		  .help = "a failed trainer's output line matching REGEX "
			  "(POSIX extended; an ECC or Xid error) blames its "
			  "host; a host blamed by 2 of the last 3 failures "
			  "is quarantined (as are SIGSEGV, SIGBUS, hangs and "
			  "failed preflights)" },
		{ .name = "monitoring", .kind = OPT_OPTIONAL,
		  .value = &r->monitoring, .arg = "PROJECT",
		  .help = "worker 0 writes the run's goodput to Cloud "
			  "Monitoring every minute, in PROJECT (default: "
			  "the run's, else gcloud's)" },
		{ .name = "notify", .kind = OPT_LIST, .value = &r->notify,
		  .arg = "URL",
		  .help = "post the run's restarts (with their cause), low "
			  "budgets, quarantines and its end to URL as JSON "
			  "(Slack-compatible; http or https; repeatable, at "
			  "most 8)" },
		{ .name = "spot", .kind = OPT_FLAG, .value = &r->spot,
		  .help = "spot capacity: cheaper, may be preempted" },
		{ .name = "reserved", .kind = OPT_FLAG, .value = &r->reserved,
		  .help = "the project's reserved capacity" },
		{ .name = "best-effort", .kind = OPT_FLAG,
		  .value = &r->best_effort, .help = "best-effort capacity" },
		{ .name = "provisioning-model", .kind = OPT_STRING,
		  .value = &o.provisioning_model, .arg = "M",
		  .help = "standard, spot, reservation-bound or flex-start" },
		{ .name = "delete-on-finish", .kind = OPT_FLAG,
		  .value = &r->delete_on_finish,
		  .help = "delete the queued resource when the run is done" },
		{ .name = "watch", .kind = OPT_FLAG, .value = &o.watch,
		  .help = "stay, and recreate the queued resource after a "
			  "preemption or a host's quarantine" },
		{ .name = "recreate-budget", .kind = OPT_UINT,
		  .value = &o.recreate_budget, .arg = "N", .max = 1000000,
		  .help = "recreations --watch may make (default 10)" },
		{ .name = "lease", .kind = OPT_SECONDS, .value = &o.lease_ms,
		  .arg = "S", .help = "--watch: the watch lease's length; "
		  "another watcher takes over within it (default 30s)" },
		{ .name = "supervisor-bin", .kind = OPT_STRING,
		  .value = &r->supervisor_bin, .arg = "PATH",
		  .help = "the slice-supervisor to upload (default: "
			  "$SLICE_SUPERVISOR_BIN, or next to slicectl)" },
		{ .name = "target", .kind = OPT_CHOICE, .value = &target,
		  .arg = "NAME", .choices = target_choices(),
		  .help = "where the workers run: tpu-vm (Cloud TPU queued "
			  "resources, the default), gke, slurm, local or "
			  "vertex (Vertex AI custom jobs)" },
		{ .name = "local", .kind = OPT_FLAG, .value = &o.local,
		  .help = "run every worker here: --target local" },
		{ .name = "workers-per-slice", .kind = OPT_UINT,
		  .value = &r->workers_per_slice, .arg = "W", .min = 1,
		  .max = 65536, .help = "--local: workers in each slice" },
		{ .name = "local-dir", .kind = OPT_STRING, .value = &o.local_dir,
		  .arg = "DIR", .help = "--local: the workers' roots (default "
		  "$SLICECTL_HOME/local/RUN)" },
		{ .name = "chaos", .kind = OPT_STRING, .value = &o.chaos,
		  .arg = "SPEC", .help = "--local: failures to inject, or "
		  "'random'" },
		{ .name = "seed", .kind = OPT_STRING, .value = &o.seed,
		  .arg = "S", .help = "--local: the seed of --chaos random" },
		{ .name = "quiet", .short_name = 'q', .kind = OPT_FLAG,
		  .value = &o.quiet, .help = "--local: no live timeline" },
		{ .name = "format", .kind = OPT_CHOICE, .value = &o.format,
		  .arg = "text|json", .choices = format_names,
		  .help = "--local: json prints the timeline and summary as "
			  "NDJSON; --render: a v1 List" },
	};
	struct opt opts[OPT_COUNT(own) + JOB_FLAGS_OPTIONS + 1] = { 0 };

	strlist_init(&pos);
	memcpy(opts, own, sizeof(own));
	target_options(&o, opts + OPT_COUNT(own));
	status = opt_parse_command(opts, argc, argv, "slicectl job", usage,
				   false, &pos);
	if (status >= 0)
		goto out;
	status = run_name(r, name, &pos);
	if (status)
		goto out;
	if (hang_ms % 1000 || grace_ms % 1000) {
		status = usage_error("--hang-timeout and --grace take whole "
				     "seconds");
		goto out;
	}
	r->hang_timeout_s = hang_ms / 1000;
	r->grace_s = grace_ms / 1000;
	if (hang_signal && !(r->hang_signal = job_signal_number(hang_signal))) {
		status = usage_error("--hang-signal takes SIGHUP, SIGINT, "
				     "SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM or "
				     "SIGWINCH (or the name without SIG), not "
				     "'%s'", hang_signal);
		goto out;
	}
	status = preflight_flags(r, preflight_ms);
	if (status)
		goto out;
	if (r->local_dir && r->local_dir[0] != '/') {
		status = usage_error("--local-tier-dir takes an absolute path, "
				     "not "
				     "'%s'", r->local_dir);
		goto out;
	}
	if (r->bad_host_pattern) {
		struct err pe;

		err_init(&pe);
		if (job_check_pattern(r->bad_host_pattern, &pe)) {
			status = usage_error("--bad-host-pattern: %s", pe.msg);
			goto out;
		}
	}
	status = lease_flag(&o);
	if (status)
		goto out;
	if (!r->bucket || !*r->bucket)
		r->bucket = getenv("SLICECTL_BUCKET");
	r->project = o.to.project;
	r->zone = o.to.zone;
	o.target = target >= 0 ? targets[target] : NULL;
	t = target_chosen(&o);
	status = t->check ? t->check(&o) : 0;
	if (!status)
		status = t->submit(&o);
out:
	strlist_release(&pos);
	job_request_release(r);
	return status;
}
