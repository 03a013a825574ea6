/*
 * tests/launcher/run_state.h: a run's state built directly in a file://
 * bucket (job.json, control.json, status, logs), for the tests of the
 * operator commands (status, logs, restart, stop), and slicectl run
 * against it. Each helper fails the current Criterion test.
 */
#ifndef SLICECTL_TESTS_RUN_STATE_H
#define SLICECTL_TESTS_RUN_STATE_H

#include "cloud/cloud.h"
#include "run/run.h"
#include "tests/harness/harness.h"

#include <jansson.h>
#include <stddef.h>

/* The test's directory, the bucket's URL in it, run-1's URL and store. */
extern char tmp[HARNESS_PATH];
extern char bucket[HARNESS_PATH + 32];
extern char url[HARNESS_PATH + 64];
extern struct store *st;

/* Makes them: a suite's .init. */
void up(void);
/* Closes the store and removes the directory: a suite's .fini. */
void down(void);

/* Writes run-1's object name. */
void put(const char *name, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void put_job(unsigned slices, unsigned workers, unsigned heartbeat_s,
	     unsigned max_restarts);
/* An RFC 3339 time age_s seconds ago. */
void ago(char *out, size_t cap, long age_s);
void put_control(long long gen, const char *state, const char *reason,
		 const char *by, long age_s);
struct control control_now(void);

/* Runs slicectl with args; its exit status. */
int slicectl(struct run_result *r, const char *const *args);
/* Runs slicectl with "--bucket BUCKET" after args. */
int ops(struct run_result *r, const char *const *args);
/* text as JSON (to json_decref). */
json_t *parse(const char *text);

#endif
