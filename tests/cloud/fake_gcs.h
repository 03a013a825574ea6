/*
 * tests/cloud/fake_gcs.h: starts tests/fakes/gcs_fake.py on loopback for a
 * test, talks to its /_fake control endpoints, and stops it by pid. A GCS
 * fake is a fake_server (fake_server.h) running that script.
 */
#ifndef SLICECTL_TESTS_FAKE_GCS_H
#define SLICECTL_TESTS_FAKE_GCS_H

#include "tests/cloud/fake_server.h"

/* struct fake_gcs is struct fake_server: proc (pid), port, base. */
#define fake_gcs fake_server

/* extra: more arguments for the fake (NULL-terminated, may be NULL).
 * Returns 0, or -1 after printing why. */
int fake_gcs_start(struct fake_gcs *f, const char *const *extra);
void fake_gcs_stop(struct fake_gcs *f);
/* One control request; *out (may be NULL) gets the answer's body
 * (malloc'd). Returns the HTTP status, or -1. */
long fake_gcs_call(struct fake_gcs *f, const char *method, const char *path,
		   const char *body, char **out);
/* Adds fault rules (a JSON object or list). Returns 0 or -1. */
int fake_gcs_faults(struct fake_gcs *f, const char *rules);

#endif
