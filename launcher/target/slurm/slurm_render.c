/*
 * slurm_render.c: the batch script of a run on Slurm. Its one step starts
 * a slice-supervisor on every node, fetched from the run's bucket and
 * checked against its sha256 as the GKE init container does. The job is
 * requeueable and gets SIGTERM (the notice) grace + upload seconds before
 * its time limit; the script hands the notice to every supervisor, which
 * commits an emergency step, and then requeues the job, whose next
 * allocation comes back with SLURM_RESTART_COUNT grown and restores the
 * newest committed step. A node whose preflight fails, or which the run
 * quarantines (its supervisor exits 4 either way), requeues the job
 * without that node.
 *
 * Before the step, the script sources Cluster Toolkit's NCCL profile when
 * the node has one (GPUDirect-TCPXO's settings on A3 Mega), so that srun
 * passes its variables to every supervisor and so to every trainer.
 */
#include "launcher/target/slurm/slurm.h"

#include <ctype.h>
#include <string.h>

/* A value that goes on an #SBATCH line as it is. */
static bool plain(const char *v)
{
	if (!v || !*v)
		return false;
	for (const char *p = v; *p; p++)
		if (isspace((unsigned char)*p) || !isprint((unsigned char)*p) ||
		    strchr("'\"\\$`#", *p))
			return false;
	return true;
}

/* Slurm's time formats: M, M:S, H:M:S, D-H, D-H:M, D-H:M:S, or
 * "infinite"/"unlimited". */
static bool time_limit_valid(const char *t)
{
	const char *p = t;
	unsigned fields = 0;
	bool days = false;

	if (!strcmp(t, "infinite") || !strcmp(t, "unlimited"))
		return true;
	for (;;) {
		size_t n = strspn(p, "0123456789");

		if (!n || n > 6)
			return false;
		p += n;
		fields++;
		if (*p == '-' && !days && fields == 1) {
			days = true;
			fields = 0;
			p++;
			continue;
		}
		if (!*p)
			break;
		if (*p != ':' || fields == 3)
			return false;
		p++;
	}
	return fields <= 3;
}

int slurm_check(const struct slurm_spec *s, struct err *e)
{
	const struct {
		const char *flag, *value;
	} named[] = {
		{ "--partition", s->partition }, { "--account", s->account },
		{ "--qos", s->qos }, { "--constraint", s->constraint },
	};

	if (!s->partition)
		return err_set(e, COMMON_EUSAGE,
			       "--partition is required: the Slurm partition "
			       "the nodes come from (sinfo lists them)");
	for (size_t i = 0; i < sizeof(named) / sizeof(named[0]); i++)
		if (named[i].value && !plain(named[i].value))
			return err_set(e, COMMON_EUSAGE,
				       "%s '%s' has spaces, quotes or other "
				       "characters an #SBATCH line cannot "
				       "hold", named[i].flag, named[i].value);
	if (!s->nodes)
		return err_set(e, COMMON_EUSAGE,
			       "--nodes is required: one supervisor runs on "
			       "each");
	if (s->time_limit && !time_limit_valid(s->time_limit))
		return err_set(e, COMMON_EUSAGE,
			       "--time '%s' is not a Slurm time limit (M, "
			       "H:M:S, D-H:M:S, ...)", s->time_limit);
	if (s->grace_s + SLURM_UPLOAD_S > 65535)
		return err_set(e, COMMON_EUSAGE,
			       "--grace %u is too long: the notice comes "
			       "grace + %u s before the time limit, at most "
			       "65535 s", s->grace_s, SLURM_UPLOAD_S);
	return 0;
}

/* Cluster Toolkit's NCCL profile, read when it is there. Its own
 * references to unset variables (LD_LIBRARY_PATH) must not end the
 * script, which runs under set -u. SLICE_NCCL_PROFILE, in sbatch's
 * environment, names another file: the tests' profile. */
static const char nccl_profile[] =
	"nccl_profile=${SLICE_NCCL_PROFILE:-"
	"/var/lib/tcpxo/lib64/nccl-env-profile.sh}\n"
	"if [ -r \"$nccl_profile\" ]; then\n"
	"\tset +u\n"
	"\t. \"$nccl_profile\"\n"
	"\tset -u\n"
	"fi\n";

/* The step: every node fetches the supervisor, checks it, runs it. */
static const char step_script[] =
	"set -eu\n"
	"dir=\"${TMPDIR:-/tmp}/slicectl-$SLURM_JOB_ID-$SLURM_NODEID\"\n"
	"mkdir -p \"$dir\"\n"
	"%s \"$dir/slice-supervisor.part\"\n"
	"echo \"$SLICE_SUPERVISOR_SHA256  $dir/slice-supervisor.part\" | "
	"sha256sum -c --quiet -\n"
	"chmod 0755 \"$dir/slice-supervisor.part\"\n"
	"mv \"$dir/slice-supervisor.part\" \"$dir/slice-supervisor\"\n"
	"\"$dir/slice-supervisor\" run --job \"$SLICE_RUN_URL\" --slurm "
	"--state-dir \"$dir/state-${SLURM_RESTART_COUNT:-0}\" &\n"
	"sup=$!\n"
	"# The step's signals are the supervisor's, and so is its status.\n"
	"trap 'kill -TERM \"$sup\" 2>/dev/null' TERM\n"
	"while :; do\n"
	"\tstatus=0\n"
	"\twait \"$sup\" || status=$?\n"
	"\tkill -0 \"$sup\" 2>/dev/null || break\n"
	"done\n"
	"[ \"$status\" = 4 ] || exit \"$status\"\n"
	"# This node failed its preflight or is quarantined: the job goes\n"
	"# again without it. Only a pending job's ExcNodeList may change,\n"
	"# and a requeued job is pending at once: the update follows the\n"
	"# requeue, whose SIGTERM this script outlives.\n"
	"trap '' TERM\n"
	"node=${SLURMD_NODENAME:-$(hostname)}\n"
	"excluded=$(scontrol show job \"$SLURM_JOB_ID\" | "
	"sed -n 's/.*ExcNodeList=\\([^ ]*\\).*/\\1/p')\n"
	"case $excluded in\n"
	"''|'(null)') excluded=$node ;;\n"
	"*) excluded=$excluded,$node ;;\n"
	"esac\n"
	"echo \"slicectl: $node failed its preflight or is quarantined: "
	"requeueing job $SLURM_JOB_ID without $excluded\" >&2\n"
	"scontrol requeue \"$SLURM_JOB_ID\"\n"
	"scontrol update JobId=\"$SLURM_JOB_ID\" ExcNodeList=\"$excluded\"\n"
	"exit 4\n";

static const char tail_script[] =
	"step=$!\n"
	"# A notice interrupts wait: wait again until the step has ended.\n"
	"while :; do\n"
	"\twait \"$step\"\n"
	"\tstatus=$?\n"
	"\tkill -0 \"$step\" 2>/dev/null || break\n"
	"done\n"
	"case $status in\n"
	"0) exit 0 ;;  # the run is done or stopped\n"
	"3) echo \"slicectl: the run failed (see slicectl status)\" >&2; "
	"exit 3 ;;\n"
	"1) echo \"slicectl: a supervisor could not start\" >&2; exit 1 ;;\n"
	"4) exit 4 ;;  # a node must be left out: it requeued the job\n"
	"esac\n"
	"# Only a job still running requeues itself: scancel (slicectl "
	"delete)\n# shows COMPLETING and ends it for good, scontrol requeue "
	"has done it.\n"
	"case $(scontrol show job \"$SLURM_JOB_ID\" 2>/dev/null) in\n"
	"*JobState=RUNNING*) ;;\n"
	"*) exit \"$status\" ;;\n"
	"esac\n"
	"# A notice, a lost node, a supervisor that died: the next allocation\n"
	"# restores the newest committed step, one restart of the run's "
	"budget.\n"
	"echo \"slicectl: the step ended with status $status: requeueing "
	"job $SLURM_JOB_ID\" >&2\n"
	"scontrol requeue \"$SLURM_JOB_ID\"\n"
	"exit \"$status\"\n";

int slurm_render(const struct slurm_spec *s, struct buf *b, struct err *e)
{
	const char *url = s->run_url;
	bool file = !strncmp(url, "file://", 7);
	struct buf step;
	char fetch[64];
	int bad;

	if (slurm_check(s, e))
		return e->code;
	buf_init(&step);
	bad = buf_appendf(b, "#!/bin/sh\n#SBATCH --job-name=%s\n"
			     "#SBATCH --partition=%s\n#SBATCH --nodes=%u\n"
			     "#SBATCH --ntasks-per-node=1\n#SBATCH --requeue\n"
			     "#SBATCH --signal=B:TERM@%u\n"
			     "#SBATCH --open-mode=append\n",
			  s->run, s->partition, s->nodes,
			  s->grace_s + SLURM_UPLOAD_S);
	if (s->gpus_per_node)
		bad |= buf_appendf(b, "#SBATCH --gpus-per-node=%u\n",
				   s->gpus_per_node);
	if (s->account)
		bad |= buf_appendf(b, "#SBATCH --account=%s\n", s->account);
	if (s->qos)
		bad |= buf_appendf(b, "#SBATCH --qos=%s\n", s->qos);
	if (s->time_limit)
		bad |= buf_appendf(b, "#SBATCH --time=%s\n", s->time_limit);
	if (s->constraint)
		bad |= buf_appendf(b, "#SBATCH --constraint=%s\n",
				   s->constraint);
	bad |= buf_appendf(b, "# slicectl run %s: one slice-supervisor per "
			      "node. SIGTERM (a preemption, the time limit)\n"
			      "# goes to every supervisor, which commits an "
			      "emergency step; the job then\n# requeues "
			      "itself and its next allocation restores the "
			      "newest committed step.\nset -u\n", s->run);
	bad |= buf_appends(b, nccl_profile);
	bad |= buf_appends(b, "SLICE_RUN_URL=") || shq_append(b, url);
	bad |= buf_appends(b, "\nSLICE_SUPERVISOR_URL=") ||
	       buf_appendf(&step, "%s/supervisor/slice-supervisor-%s",
			   file ? url + 7 : url, s->supervisor_sha256) ||
	       shq_append(b, step.data);
	bad |= buf_appendf(b, "\nSLICE_SUPERVISOR_SHA256=%s\n"
			      "export SLICE_RUN_URL SLICE_SUPERVISOR_URL "
			      "SLICE_SUPERVISOR_SHA256\n"
			      "trap 'scancel --signal=TERM \"$SLURM_JOB_ID\"' "
			      "TERM\n"
			      "srun --ntasks-per-node=1 --kill-on-bad-exit=0 "
			      "/bin/sh -c ",
			   s->supervisor_sha256);
	snprintf(fetch, sizeof(fetch), "%s \"$SLICE_SUPERVISOR_URL\"",
		 file ? "cp" : "gcloud storage cp");
	step.len = 0;
	bad |= buf_appendf(&step, step_script, fetch) ||
	       shq_append(b, step.data) || buf_appends(b, " &\n") ||
	       buf_appends(b, tail_script);
	buf_release(&step);
	if (bad)
		return err_set(e, COMMON_ENOMEM, "out of memory");
	return 0;
}
