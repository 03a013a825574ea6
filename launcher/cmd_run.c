/*
 * cmd_run.c: `slicectl run`: one command on every host, at once.
 */
#include "launcher/fanout_cmd.h"
#include "launcher/launcher.h"

static const char usage[] =
	"usage: slicectl run [host options] -- COMMAND...\n"
	"\n"
	"Runs COMMAND on every host at once and prints each output line\n"
	"prefixed with its host (\"HOST: \" on stdout for the command's stdout,\n"
	"\"HOST! \" on stderr for its stderr), then a summary. COMMAND is read\n"
	"by the remote login shell, as with ssh. Each host's command also sees\n"
	"SLICE_PROCESS_ID (its index in the host list) and SLICE_NUM_PROCESSES.\n"
	"\n"
	"Exit status: the highest exit status of any host; 128+N for a host\n"
	"whose command died of signal N; 124 if a command timed out; 255 if a\n"
	"host could not be reached or was lost; 2 for bad arguments.";

int cmd_run(int argc, char **argv)
{
	struct host_options ho;
	struct strlist pos;
	struct fanout_config cfg;
	struct buf cmd;
	int status;

	host_options_init(&ho);
	strlist_init(&pos);
	buf_init(&cmd);
	status = host_options_parse(&ho, argc, argv, usage, true, &pos);
	if (status >= 0)
		goto out;
	if (!pos.n) {
		log_error("no command given: slicectl run [options] -- COMMAND");
		status = EXIT_USAGE;
		goto out;
	}
	for (size_t i = 0; i < pos.n; i++)
		if ((i && buf_append(&cmd, " ", 1)) ||
		    buf_appends(&cmd, pos.v[i])) {
			log_error("out of memory");
			status = EXIT_FAILURE_SSH;
			goto out;
		}
	fanout_config_init(&cfg);
	cfg.command = cmd.data;
	status = fanout_cmd_run(&ho, &cfg, false);
out:
	buf_release(&cmd);
	strlist_release(&pos);
	host_options_release(&ho);
	return status;
}
