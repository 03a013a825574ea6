/*
 * fanout_cmd.h (private to launcher/): what `run` and `push` share once their
 * own arguments are parsed: build the targets, wire output and interrupts
 * to the fan-out, run it, print the summary, and pick the exit status.
 */
#ifndef SLICECTL_LAUNCHER_FANOUT_CMD_H
#define SLICECTL_LAUNCHER_FANOUT_CMD_H

#include "launcher/hosts.h"

/* cfg->command (and input) must be set; the rest comes from ho. */
int fanout_cmd_run(const struct host_options *ho, struct fanout_config *cfg,
		   bool sent_column);

#endif
