/*
 * dispatch.c: one fan-out from parsed options to exit status. Interrupts
 * (SIGINT, SIGTERM, SIGHUP) only write to a self-pipe that the fan-out's
 * loop watches: the first ends the remote commands, the second drops the
 * connections.
 */
#include "launcher/dispatch.h"
#include "launcher/launcher.h"
#include "launcher/output.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int signal_pipe[2] = { -1, -1 };

static void on_signal(int sig)
{
	int saved = errno;
	char c = (char)sig;

	if (write(signal_pipe[1], &c, 1) < 0) {
		/* The pipe is full: enough interrupts are pending. */
	}
	errno = saved;
}

static int signals_setup(struct err *e)
{
	struct sigaction sa;

	if (pipe(signal_pipe))
		return err_errno(e, COMMON_EIO, errno, "pipe");
	for (int i = 0; i < 2; i++) {
		fcntl(signal_pipe[i], F_SETFL,
		      fcntl(signal_pipe[i], F_GETFL) | O_NONBLOCK);
		fcntl(signal_pipe[i], F_SETFD, FD_CLOEXEC);
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;
	sigemptyset(&sa.sa_mask);
	/* No SA_RESTART: a call that blocks while the fan-out starts (an
	 * agent, a slow disk) returns EINTR instead of being restarted for
	 * as long as it blocks, and the fan-out then sees the interrupt. */
	sa.sa_flags = 0;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	return 0;
}

static void signals_restore(void)
{
	signal(SIGINT, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	signal(SIGHUP, SIG_DFL);
	for (int i = 0; i < 2; i++) {
		if (signal_pipe[i] >= 0)
			close(signal_pipe[i]);
		signal_pipe[i] = -1;
	}
}

int dispatch(const struct host_options *ho, struct fanout_config *cfg,
	     bool sent_column)
{
	struct targets t;
	struct output out;
	struct output_config oc = { 0 };
	struct fanout_callbacks cb = { 0 };
	struct fanout_result *results = NULL;
	struct err e;
	uint64_t start;
	int rc, status = EXIT_USAGE;

	err_init(&e);
	targets_init(&t);
	memset(&out, 0, sizeof(out));
	if (ho->verbose)
		log_setup("slicectl", LOG_DEBUG);
	rc = targets_build(&t, ho, &e);
	if (rc) {
		log_error("%s", e.msg);
		targets_release(&t);
		return rc == COMMON_EUSAGE ? EXIT_USAGE : EXIT_FAILURE_SSH;
	}
	oc.json = ho->format == 1;
	oc.log_dir = ho->log_dir;
	oc.sent_column = sent_column;
	host_options_config(ho, cfg);
	if (t.identity)
		cfg->identity = t.identity;
	if (t.known_hosts)
		cfg->known_hosts = t.known_hosts;
	results = calloc(t.n, sizeof(*results));
	if (!results)
		rc = err_set(&e, COMMON_ENOMEM, "out of memory");
	if (!rc)
		rc = output_init(&out, &oc, t.v, t.n, &e);
	if (!rc)
		rc = signals_setup(&e);
	if (!rc) {
		cfg->cancel_fd = signal_pipe[0];
		cb.ud = &out;
		cb.output = output_chunk;
		cb.done = output_done;
		cb.flush = output_flush;
		start = mono_ms();
		rc = fanout_run(cfg, t.v, t.n, results, &cb, &e);
		signals_restore();
	}
	if (rc) {
		output_flush(&out);
		log_error("%s", e.msg);
		status = rc == SSH_EINTR ? EXIT_INTERRUPT : EXIT_FAILURE_SSH;
	} else {
		status = output_summary(&out, results, mono_ms() - start);
	}
	if (out.write_failed) {
		log_error("writing output: %s", strerror(out.write_errno));
		if (status == 0)
			status = 1;
	}
	output_release(&out);
	free(results);
	targets_release(&t);
	return status;
}
