/*
 * log_reader.h (private to launcher/): reads a worker's trainer output as
 * its supervisor uploads it, once or following it as it grows: immutable
 * segments logs/slice-S-worker-W/gen-G/<offset>.seg, each holding what the
 * log gained since the one before, read in offset order (following reads
 * only the segments past what it printed).
 *
 * Runs of supervisors before segments have one object
 * logs/slice-S-worker-W/gen-G.log per generation instead, re-uploaded
 * whole as it grew and, past the supervisor's cap (8 MiB), only its last
 * 8 MiB, so its content may slide. For those following remembers the last
 * bytes it printed, not only how many: new bytes are what follows them in
 * the new content, wherever they now are; when they are gone (the log was
 * rewritten, or shrank), the log is printed again from its start, after
 * a marker.
 */
#ifndef SLICECTL_LAUNCHER_LOG_READER_H
#define SLICECTL_LAUNCHER_LOG_READER_H

#include "launcher/launcher.h"
#include "launcher/run_options.h"

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

/* The last bytes printed, to find where to go on in a log that slid. */
#define TAIL_MAX 4096

struct logs {
	struct run_options *ro;
	unsigned slice, worker;
	char dir[96];            /* "logs/slice-S-worker-W/" */
	bool json, follow;

	/* The log being printed. */
	int64_t gen;             /* 0: none yet */
	bool segments;           /* name is a gen-G/ of segments, not a
				    gen-G.log */
	char name[128];
	int64_t object_gen;      /* the store's, of what was read; 0 none */
	uint64_t off;            /* bytes of its content printed */
	char tail[TAIL_MAX];     /* its last bytes printed */
	size_t tlen;
	bool at_line_start;      /* text: the last byte printed was '\n' */
	struct buf line;         /* json: the line not ended yet */
	bool printed_any;
	/* follow: set (to the signal) by the caller's handler to stop. */
	const volatile sig_atomic_t *interrupted;
};

/* Keeps printing what comes from generation pinned on (0: the newest)
 * every interval_ms until the run is over for this worker or
 * *l->interrupted; returns the exit status. */
int logs_follow(struct logs *l, int64_t pinned, unsigned interval_ms);
/* Prints generation pinned's log (0: the newest) once; returns the exit
 * status. */
int logs_print_once(struct logs *l, int64_t pinned);

#endif
