/*
 * cmd_list.c: `slicectl list`: the queued resources of a zone.
 */
#include "launcher/launcher.h"
#include "launcher/tpu_options.h"

#include <stdlib.h>

static const char usage[] =
	"usage: slicectl list [--project P] [--zone Z] [--format text|json]\n"
	"\n"
	"Lists the zone's queued resources, one a line: name, state,\n"
	"accelerator type, slices, capacity and creation time. --format json\n"
	"prints a JSON array of the API's resources.\n"
	"\n"
	"Exit status: 0 listed (even when none); 1 the API failed; 2 bad\n"
	"arguments.";

int cmd_list(int argc, char **argv)
{
	struct tpu_options to = { 0 };
	struct opt opts[TPU_OPTIONS_COUNT + 1] = { 0 };
	struct tpu_client *c = NULL;
	struct tpu_qr *qs = NULL;
	size_t n = 0;
	struct strlist pos;
	struct err e;
	int rc, status;

	strlist_init(&pos);
	err_init(&e);
	tpu_options_table(&to, opts, TPU_WITH_FORMAT);
	status = tpu_command_start(opts, argc, argv, usage, &pos, 0, &to, &c);
	if (status >= 0)
		goto out;
	status = 0;
	rc = tpu_qr_list(c, &qs, &n, &e);
	if (rc) {
		status = tpu_exit_status(rc, &e);
		goto out;
	}
	if (to.format == 1) {
		printf("[");
		for (size_t i = 0; i < n; i++)
			printf("%s%s", i ? ",\n " : "", qs[i].json);
		printf("]\n");
	} else {
		printf("%-32s %-22s %-16s %6s %-11s %s\n", "NAME", "STATE",
		       "ACCELERATOR", "SLICES", "CAPACITY", "CREATED");
		for (size_t i = 0; i < n; i++)
			printf("%-32s %-22s %-16s %6zu %-11s %s\n", qs[i].id,
			       *qs[i].state ? qs[i].state : "-",
			       qs[i].accelerator_type, qs[i].nnodes,
			       qs[i].capacity,
			       *qs[i].create_time ? qs[i].create_time : "-");
	}
out:
	for (size_t i = 0; i < n; i++)
		tpu_qr_release(&qs[i]);
	free(qs);
	tpu_close(c);
	strlist_release(&pos);
	return status;
}
