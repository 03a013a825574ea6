/*
 * tpu_options.h (private to launcher/): what the commands that speak to
 * the TPU API share: --project and --zone with their defaults, --format,
 * opening the client, printing queued resources and progress, slicectl's
 * own state directory, and exit statuses from API errors.
 */
#ifndef SLICECTL_LAUNCHER_TPU_OPTIONS_H
#define SLICECTL_LAUNCHER_TPU_OPTIONS_H

#include "cloud/cloud.h"
#include "common/common.h"

#include <stdio.h>

struct tpu_options {
	const char *project;
	const char *zone;
	char project_buf[128]; /* gcloud's configuration's, when used */
	char zone_buf[128];
	int format;          /* 0 text, 1 json */
	bool wait;
	unsigned timeout_ms; /* 0: none */
};

enum {
	TPU_WITH_FORMAT = 1,
	TPU_WITH_WAIT = 2,    /* --wait */
	TPU_WITH_TIMEOUT = 4, /* --timeout */
};

/* Fills opts with --project, --zone and the entries `with` asks for,
 * bound to to; opts must have room for TPU_OPTIONS_COUNT entries. */
#define TPU_OPTIONS_COUNT 5
void tpu_options_table(struct tpu_options *to, struct opt *opts, int with);

/* Fills project and zone where the flags gave none, from
 * CLOUDSDK_CORE_PROJECT and CLOUDSDK_COMPUTE_ZONE, else from gcloud's
 * active configuration (cloud.h: gcloud_default): the one lookup of
 * every command on Cloud TPU. Returns 0, or COMMON_EUSAGE with e saying
 * which is missing and how to give it. */
int tpu_options_resolve(struct tpu_options *to, struct err *e);

/* tpu_options_resolve, then opens the client. Returns 0 or an exit
 * status after saying what is wrong. */
int tpu_options_open(struct tpu_options *to, struct tpu_client **c);

/* Parses argv against opts (the command's own, then the shared ones and
 * { 0 }), checks there are npos arguments, and opens the client. Returns
 * -1 to go on, or the exit status to end with. */
int tpu_command_start(const struct opt *opts, int argc, char **argv,
		      const char *usage, struct strlist *pos, size_t npos,
		      struct tpu_options *to, struct tpu_client **c);

/* tpu_command_start without opening the client: parses argv and checks
 * there are npos arguments. Returns -1 to go on, or the exit status. */
int tpu_command_parse(const struct opt *opts, int argc, char **argv,
		      const char *usage, struct strlist *pos, size_t npos);

/* The exit status for a cloud error (after logging e's message):
 * 1 for API and network failures, EXIT_STATE for a queued resource that
 * ended FAILED or SUSPENDED, EXIT_NOT_FOUND, EXIT_TIMEOUT. */
int tpu_exit_status(int rc, const struct err *e);

/* Prints "NAME: STATE (elapsed)" on stderr; for tpu_progress_fn. */
void tpu_print_progress(void *ud, const struct tpu_qr *q,
			uint64_t elapsed_ms);

/* Describes q (and its nodes, which may be NULL) in text. */
void tpu_print_qr(FILE *f, const struct tpu_qr *q, const struct tpu_node *nodes,
		  size_t nnodes);

#endif
