/*
 * run_qr.h (private to launcher/): what `slicectl reset` and `delete` act
 * on. NAME is a run when BUCKET/NAME/job.json exists (BUCKET from
 * --bucket, else $SLICECTL_BUCKET): its job.json says its target (and on
 * Cloud TPU names the queued resource, the project and the zone), so the
 * command works from any machine that reaches the bucket. Otherwise NAME
 * is a queued resource's own name.
 */
#ifndef SLICECTL_LAUNCHER_RUN_QR_H
#define SLICECTL_LAUNCHER_RUN_QR_H

#include "launcher/run_options.h"
#include "launcher/tpu_options.h"

struct run_qr {
	struct tpu_options to;
	struct run_options ro; /* --bucket, --format; the run when is_run */
	char *name;            /* NAME, as given (malloc'd) */
	const char *qr;        /* the queued resource's id, once open */
	bool is_run;
};

/* Fills opts with --bucket, --format, then tpu_options_table's entries
 * for `with` (TPU_WITH_FORMAT is not needed): room for
 * RUN_QR_OPTIONS_COUNT entries. */
#define RUN_QR_OPTIONS_COUNT (RUN_OPTIONS_COUNT + TPU_OPTIONS_COUNT)
void run_qr_table(struct run_qr *q, struct opt *opts, int with);

/* What NAME means, for the commands' --help. */
#define RUN_QR_USAGE_NAME \
	"NAME is a run when BUCKET/NAME/job.json exists, with BUCKET from\n" \
	"--bucket or $SLICECTL_BUCKET (gs://BUCKET[/PREFIX] or file:///DIR):\n" \
	"the queued resource, project and zone come from its job.json\n" \
	"(--project and --zone still win), so this works from any machine\n" \
	"that reaches the bucket and the API. With --bucket, NAME must be\n" \
	"such a run; otherwise a NAME that is no run is the queued\n" \
	"resource's own name.\n"

/* Parses argv against opts (the command's own, run_qr_table's, { 0 })
 * and finds whether NAME is a run. Returns -1 to go on, or the exit
 * status to end with after saying what is wrong. Release q whatever it
 * returns. */
int run_qr_start(const struct opt *opts, int argc, char **argv,
		 const char *usage, struct run_qr *q);
/* The target NAME is on (target.h): the run's, else tpu-vm's (NAME is a
 * queued resource). */
struct target_ops;
const struct target_ops *run_qr_target(const struct run_qr *q);
/* Says the run's target has nothing to `verb` ("delete"); EXIT_USAGE. */
int run_qr_unsupported(const struct run_qr *q, const char *verb);
/* For the tpu-vm target: sets qr (a run's from its job.json, with its
 * project and zone unless the flags gave them) and opens the client.
 * Returns 0 or an exit status after saying what is wrong. */
int run_qr_open(struct run_qr *q, struct tpu_client **c);
/* Says on stderr what the command is `doing` ("resetting") to which
 * queued resource, where, and for which run. */
void run_qr_say(const struct run_qr *q, const char *doing);
void run_qr_release(struct run_qr *q);

/* Prints what the command did as one JSON object on stdout:
 * {"name", "url" (the run's, or null), "queued_resource", "project",
 * "zone", "action", "state"}. */
void run_qr_print_json(const struct run_qr *q, const char *action,
		       const char *state);

#endif
