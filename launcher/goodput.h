/*
 * goodput.h (private to launcher/): a run's goodput read from its bucket
 * and shown (goodput_show.c). The arithmetic is run/'s (run.h "Goodput"),
 * which the supervisor's Cloud Monitoring export shares.
 */
#ifndef SLICECTL_LAUNCHER_GOODPUT_H
#define SLICECTL_LAUNCHER_GOODPUT_H

#include "common/common.h"
#include "run/run.h"

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

/* ---- goodput_show.c: from a run's bucket, and shown ---- */

/* The goodput of the run at s (its history read now; a live run's ends
 * now) over its last window_ms (0: all of it). */
int goodput_of_run(struct store *s, const struct job *j, int64_t window_ms,
		   struct goodput *g, struct err *e);
/* {"goodput", "elapsed_s", "productive_s", "ideal_step_s", "final_step",
 * "step_samples", "precision", "badput": {CATEGORY: s}, "failures":
 * [{"generation", "cause", "reason", "at", "detection_s", "hang_s",
 * "restart_s", "restore_s", "recompute_s", "recomputed_steps",
 * "total_s"}]}; NULL when memory ran out. */
json_t *goodput_json(const struct goodput *g);
/* One line: the ratio, the time trained, the biggest loss. */
void goodput_headline(const struct goodput *g, char *out, size_t cap);
void goodput_print_text(const struct goodput *g);

#endif
