/*
 * fanout_cmd.c: one fan-out from parsed options to exit status. Interrupts
 * (SIGINT, SIGTERM, SIGHUP) only write to a self-pipe that the fan-out's
 * loop watches: the first ends the remote commands, the second drops the
 * connections.
 */
#include "launcher/fanout_cmd.h"
#include "launcher/launcher.h"
#include "launcher/output.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>

static const int interrupts[] = { SIGINT, SIGTERM, SIGHUP };
#define N_INTERRUPTS (sizeof(interrupts) / sizeof(interrupts[0]))

int fanout_cmd_run(const struct host_options *ho, struct fanout_config *cfg,
		   bool sent_column)
{
	struct host_list t;
	struct output out;
	struct output_config oc = { 0 };
	struct fanout_callbacks cb = { 0 };
	struct fanout_result *results = NULL;
	struct err e;
	uint64_t start = 0;
	int cancel[2] = { -1, -1 };
	int rc, status = EXIT_USAGE;

	err_init(&e);
	host_list_init(&t);
	memset(&out, 0, sizeof(out));
	if (ho->verbose)
		log_setup("slicectl", LOG_DEBUG);
	rc = host_list_build(&t, ho, &e);
	if (rc) {
		log_error("%s", e.msg);
		host_list_release(&t);
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
	if (!rc && !(rc = self_pipe_open(cancel, &e))) {
		/* No SA_RESTART: a call that blocks while the fan-out starts
		 * (an agent, a slow disk) returns EINTR instead of being
		 * restarted for as long as it blocks, and the fan-out then
		 * sees the interrupt. */
		rc = self_pipe_catch(cancel[1], interrupts, N_INTERRUPTS,
				     false, &e);
		if (!rc) {
			cfg->cancel_fd = cancel[0];
			cb.ud = &out;
			cb.output = output_chunk;
			cb.done = output_done;
			cb.flush = output_flush;
			start = mono_ms();
			rc = fanout_run(cfg, t.v, t.n, results, &cb, &e);
		}
		self_pipe_release(cancel, interrupts, N_INTERRUPTS);
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
	host_list_release(&t);
	return status;
}
