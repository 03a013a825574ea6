/*
 * tests/run/spec_check.h: what the tests of the run state the
 * workers share (job.json, control.json, status objects) use: a temporary
 * directory holding a file:// run, and reading and writing its objects,
 * each failing the current Criterion test.
 */
#ifndef SLICECTL_TESTS_SPEC_CHECK_H
#define SLICECTL_TESTS_SPEC_CHECK_H

#include "cloud/cloud.h"
#include "run/run.h"

#include <jansson.h>
#include <stdbool.h>

/* The test's directory, and file://ROOT/bucket/run-1. */
extern char root[512];
extern char url[600];

/* Makes them: a suite's .init. */
void spec_setup(void);
/* Removes the directory: a suite's .fini. */
void spec_teardown(void);
/* The store at url (to store_close). */
struct store *open_store(void);
/* t is "YYYY-MM-DDTHH:MM:SSZ" of this decade or later. */
bool is_rfc3339_utc(const char *t);
/* Object name of s as JSON (to json_decref). */
json_t *read_json(struct store *s, const char *name);
void put_raw(struct store *s, const char *name, const char *text);

#endif
