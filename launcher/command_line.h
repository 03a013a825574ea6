/*
 * command_line.h (private to launcher/): the one way every command turns
 * its argv into options, so that --help, bad flags and the exit status
 * they give read the same everywhere.
 */
#ifndef SLICECTL_LAUNCHER_COMMAND_LINE_H
#define SLICECTL_LAUNCHER_COMMAND_LINE_H

#include "common/common.h"

/* Parses argv against opts; name is how the command is typed ("run",
 * "ckpt save"). Returns -1 to go on; 0 after printing usage for --help;
 * EXIT_USAGE after saying what was wrong and where help is. */
int command_line_parse(const struct opt *opts, int argc, char **argv,
		       const char *name, const char *usage,
		       bool stop_at_first_positional, struct strlist *pos);

#endif
