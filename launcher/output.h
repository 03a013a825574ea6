/*
 * output.h (private to launcher/): what a fan-out prints. Output arrives in
 * arbitrary chunks; here it becomes whole lines, each prefixed with its
 * host ("HOST: " on stdout for the command's stdout, "HOST! " on stderr for
 * its stderr), optionally kept in one log file per host, and ends with a
 * summary table. With --format json, every line, every host's result and
 * the summary are JSON objects, one per line, on stdout.
 */
#ifndef SLICECTL_LAUNCHER_OUTPUT_H
#define SLICECTL_LAUNCHER_OUTPUT_H

#include "common/common.h"
#include "ssh/fanout.h"

#include <stdio.h>

struct output_config {
	bool json;
	const char *log_dir;
	bool sent_column; /* show bytes sent (push) */
};

struct line_buf {
	char *data;
	size_t len, cap;
};

struct host_out {
	struct line_buf line[2];
	int log_fd;
};

struct output {
	struct output_config cfg;
	const struct fanout_target *targets;
	size_t n;
	struct host_out *hosts;
	struct buf scratch;
	int label_width;
	bool write_failed;
	int write_errno;
};

int output_init(struct output *o, const struct output_config *c,
		const struct fanout_target *t, size_t n, struct err *e);
void output_release(struct output *o);

/* The fanout callbacks; ud is the struct output. */
void output_chunk(void *ud, size_t host, enum fanout_stream s,
		  const char *data, size_t len);
void output_done(void *ud, size_t host, const struct fanout_result *r);
void output_flush(void *ud);

/* Prints the summary and returns the exit status the process should end
 * with: the highest host exit status; 255 when a host could not be reached
 * or was lost; 124 for a timeout; 128+N for a signal. */
int output_summary(struct output *o, const struct fanout_result *r,
		   uint64_t wall_ms);

/* The exit status one host contributes. */
int output_host_status(const struct fanout_result *r);

#endif
