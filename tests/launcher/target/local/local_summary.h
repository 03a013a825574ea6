/*
 * local_summary.h: the "summary" line that `slicectl job --local --format
 * json` prints at a run's end, for the tests that run one through the
 * slicectl binary (test_local.c, test_demo.c, test_torch.c,
 * test_local_notify.c).
 */
#ifndef SLICECTL_TESTS_LOCAL_SUMMARY_H
#define SLICECTL_TESTS_LOCAL_SUMMARY_H

#include <jansson.h>

/* The first line of out that is a JSON object of "type" "summary" (to
 * json_decref); NULL when there is none. */
json_t *local_summary(const char *out);

/* The run as a reader wants it in a failed assertion: one line per event
 * of out ("ELAPSED s  MESSAGE"), then the summary as compact JSON
 * (malloc'd; never NULL). */
char *local_story(const char *out);

#endif
