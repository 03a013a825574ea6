/*
 * command_line.c: see command_line.h.
 */
#include "launcher/command_line.h"
#include "launcher/launcher.h"

int command_line_parse(const struct opt *opts, int argc, char **argv,
		       const char *name, const char *usage,
		       bool stop_at_first_positional, struct strlist *pos)
{
	struct err e;
	int rc;

	err_init(&e);
	rc = opt_parse(opts, argc, argv, pos, stop_at_first_positional, &e);
	if (rc == OPT_HELP) {
		opt_usage(stdout, usage, opts);
		return 0;
	}
	if (rc) {
		log_error("%s (see slicectl %s --help)", e.msg, name);
		return EXIT_USAGE;
	}
	return -1;
}
