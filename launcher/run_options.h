/*
 * run_options.h (private to launcher/): what the commands that look after
 * a run in its bucket share (status, logs, restart, stop): the run named
 * as `RUN --bucket gs://BUCKET[/PREFIX]` (or file:///DIR, default
 * $SLICECTL_BUCKET), --format, opening the run's store and reading its
 * job.json, exit statuses from storage errors, and the JSON they print.
 *
 * Exit statuses: 0 done; 1 the store failed (or refused a change);
 * EXIT_USAGE bad arguments; EXIT_NOT_FOUND no such run (no job.json).
 */
#ifndef SLICECTL_LAUNCHER_RUN_OPTIONS_H
#define SLICECTL_LAUNCHER_RUN_OPTIONS_H

#include "cloud/cloud.h"
#include "common/common.h"
#include "run/run.h"

#include <jansson.h>
#include <stdbool.h>
#include <time.h>

struct run_options {
	const char *bucket;   /* --bucket, else $SLICECTL_BUCKET */
	int format;           /* 0 text, 1 json */
	char *run;            /* RUN, as given (malloc'd) */
	char *url;            /* BUCKET/RUN (malloc'd) */
	struct store *store;  /* the run's prefix */
	struct job job;       /* its job.json */
	bool quiet_missing;   /* no run there is the caller's to explain */
};

/* Fills opts with --bucket and --format bound to ro; opts must have room
 * for RUN_OPTIONS_COUNT entries. */
#define RUN_OPTIONS_COUNT 2
void run_options_table(struct run_options *ro, struct opt *opts);

/* The text every command's usage ends with, for its --help. */
#define RUN_USAGE_BUCKET \
	"The run is BUCKET/RUN, with BUCKET from --bucket or\n" \
	"$SLICECTL_BUCKET: gs://BUCKET[/PREFIX], or file:///DIR for the\n" \
	"local provider.\n"

/*
 * Parses argv against opts (the command's own, then the shared ones, then
 * { 0 }), takes RUN (the one positional argument), opens the run's store
 * and reads its job.json. Returns -1 to go on, or the exit status to end
 * with after saying what is wrong. Release ro whatever it returns.
 */
int run_command_start(const struct opt *opts, int argc, char **argv,
		      const char *usage, struct run_options *ro);
/* run_command_start's second half, for a command that parsed its own
 * arguments: opens run (ro->bucket, else $SLICECTL_BUCKET) and reads its
 * job.json. Returns -1 to go on, or the exit status. */
int run_open(struct run_options *ro, const char *run);
void run_options_release(struct run_options *ro);

/* The exit status for a store error, after logging e's message:
 * EXIT_USAGE for a bad URL, EXIT_NOT_FOUND, else 1. */
int run_exit_status(int rc, const struct err *e);

/* control.json without creating it: *found false (and c zeroed, with
 * generation 0) when no supervisor has created it yet. */
int run_control_peek(struct run_options *ro, struct control *c, bool *found,
		     struct err *e);

/* The reason slicectl writes into control.json when --reason gives
 * none: "WHAT by USER@HOST (slicectl, pid N)". */
void run_default_reason(char *out, size_t cap, const char *what);

/* run_command_start for the commands that change control.json (restart,
 * stop): RUN, --reason, and the shared options. reason gets --reason, or
 * run_default_reason(what). Returns -1 to go on, or the exit status. */
int run_change_start(int argc, char **argv, const char *usage,
		     const char *what, struct run_options *ro, char *reason,
		     size_t cap);
/* An operator's cause of kind ("restart", "stop"): who asked
 * (USER@HOST) and why. */
void run_operator_cause(struct gen_cause *c, const char *kind,
			const char *why);

/* A JSON string for any bytes (invalid UTF-8 becomes U+FFFD); json_null
 * for NULL. Never NULL unless memory ran out. */
json_t *run_json_text(const char *s);
/* {"run", "url", "state", "generation", "reason", "updated_by", "time"}
 * of the run and its control.json c: what restart and stop print, each
 * adding what it changed. NULL when memory ran out. */
json_t *run_control_json(const struct run_options *ro,
			 const struct control *c);
/* Prints v on one line on stdout and releases it. */
void run_print_json(json_t *v);

#endif
