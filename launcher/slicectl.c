/*
 * slicectl.c: the command table and main. Shared set-up lives here once:
 * --help and help COMMAND, --version, SIGPIPE, and an exit status that
 * reflects a failed write to stdout.
 */
#include "checkpoint/checkpoint.h"
#include "common/common.h"
#include "launcher/launcher.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* The checkpoint commands are shared with slice-supervisor. */
static int cmd_ckpt(int argc, char **argv)
{
	return ckpt_cli("slicectl", argc, argv);
}

struct command {
	const char *name;
	int (*fn)(int argc, char **argv);
	const char *summary;
};

static const struct command commands[] = {
	{ "job", cmd_job, "hand a training job to supervisors on TPU slices" },
	{ "run", cmd_run, "run a command on many hosts at once over SSH" },
	{ "push", cmd_push, "copy a file or directory to many hosts at once" },
	{ "ckpt", cmd_ckpt, "save, list, verify, restore and prune checkpoints" },
	{ "create", cmd_create, "create a queued resource of TPU slices" },
	{ "describe", cmd_describe, "show a queued resource and its workers" },
	{ "list", cmd_list, "list the queued resources of a zone" },
	{ "wait", cmd_wait, "wait until a queued resource is ACTIVE" },
	{ "reset", cmd_reset, "restart every worker of a queued resource" },
	{ "delete", cmd_delete, "delete a queued resource" },
	{ "watch", cmd_watch, "stay with a run, recreating what preemption "
	  "took" },
	{ "status", cmd_status, "show a run's state and its workers' heartbeats" },
	{ "logs", cmd_logs, "print (or follow) a worker's trainer output" },
	{ "restart", cmd_restart, "restart every worker of a run together" },
	{ "stop", cmd_stop, "stop a run, each trainer saving a final step" },
	{ "maintenance", cmd_maintenance,
	  "start announced maintenance now, after a committed step" },
	{ "events", cmd_events, "list a run's history: bumps, notices, commits" },
	{ "report", cmd_report, "draw a run's history as one HTML page" },
	{ "goodput", cmd_goodput, "how much of a run's time trained the model" },
};

static void usage(FILE *f)
{
	fprintf(f, "usage: slicectl [--version] [--help] COMMAND [ARGS]\n\n"
		   "Launch and keep alive training jobs on Cloud TPU slices.\n\n"
		   "Commands:\n");
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(f, "  %-11s %s\n", commands[i].name,
			commands[i].summary);
	fprintf(f, "\nslicectl help COMMAND (or slicectl COMMAND --help) shows "
		   "a command's help.\n");
}

static const struct command *find_command(const char *name)
{
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (!strcmp(commands[i].name, name))
			return &commands[i];
	return NULL;
}

/* `slicectl help [COMMAND]`: the list, or what COMMAND --help prints, from
 * the command itself so the two can never differ. */
static int help(int argc, char **argv)
{
	char help_flag[] = "--help";
	char *cmd_argv[] = { NULL, help_flag, NULL };
	const struct command *cmd;

	if (argc < 2) {
		usage(stdout);
		return 0;
	}
	if (argc > 2) {
		fprintf(stderr, "slicectl: help takes one command; see "
				"slicectl help\n");
		return EXIT_USAGE;
	}
	cmd = find_command(argv[1]);
	if (!cmd) {
		fprintf(stderr, "slicectl: '%s' is not a command; see "
				"slicectl help\n", argv[1]);
		return EXIT_USAGE;
	}
	cmd_argv[0] = argv[1];
	return cmd->fn(2, cmd_argv);
}

/* A full disk or a closed pipe on stdout must not end in exit status 0. */
static int finish(int status)
{
	if (fflush(stdout) || ferror(stdout)) {
		if (errno != EPIPE)
			fprintf(stderr, "slicectl: error: writing stdout: %s\n",
				strerror(errno));
		return status ? status : 1;
	}
	return status;
}

int main(int argc, char **argv)
{
	const struct command *cmd;
	const char *name;

	log_setup("slicectl", LOG_INFO);
	/* Closed sockets and pipes, and a file-size limit, are reported by
	 * write as errors we can explain, not by a signal that kills us. */
	signal(SIGPIPE, SIG_IGN);
	signal(SIGXFSZ, SIG_IGN);
	if (argc < 2) {
		usage(stderr);
		return EXIT_USAGE;
	}
	name = argv[1];
	/* As git: --help COMMAND is help COMMAND. */
	if (!strcmp(name, "--help") || !strcmp(name, "-h") ||
	    !strcmp(name, "help"))
		return finish(help(argc - 1, argv + 1));
	if (!strcmp(name, "--version")) {
		printf("slicectl %s\n", SLICECTL_VERSION);
		return finish(0);
	}
	cmd = find_command(name);
	if (cmd)
		return finish(cmd->fn(argc - 1, argv + 1));
	fprintf(stderr, "slicectl: '%s' is not a command; see slicectl --help\n",
		name);
	return EXIT_USAGE;
}
