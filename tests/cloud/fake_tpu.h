/*
 * tests/cloud/fake_tpu.h: starts tests/fakes/tpu_fake.py (the Cloud TPU
 * API, v2alpha1) on loopback for a test, talks to its /_fake control
 * endpoints, and stops it by pid. A TPU fake is a fake_server
 * (fake_server.h) running that script. Point the client at it with
 * SLICECTL_TPU_ENDPOINT=f.base and any SLICECTL_ACCESS_TOKEN (or the one
 * given with "--require-token", T). The fake's control endpoints, config
 * and fault rules are described at the top of tests/fakes/tpu_fake.py.
 */
#ifndef SLICECTL_TESTS_FAKE_TPU_H
#define SLICECTL_TESTS_FAKE_TPU_H

#include "tests/cloud/fake_server.h"

#include <jansson.h>
#include <stdio.h>

/* struct fake_tpu is struct fake_server: proc (pid), port, base, token. */
#define fake_tpu fake_server

/* The bearer token fake_tpu_call sends (the fake takes any token unless
 * started with "--require-token", T: then set f->token to T). */
#define FAKE_TPU_TOKEN "fake-tpu-test-token"

/* extra: more arguments for the fake (NULL-terminated, may be NULL),
 * e.g. "--delay", "0.05". Returns 0, or -1 after printing why. */
static inline int fake_tpu_start(struct fake_tpu *f,
				 const char *const *extra)
{
	int rc = fake_server_start(f, "tests/fakes/tpu_fake.py", extra);

	snprintf(f->token, sizeof(f->token), "%s", FAKE_TPU_TOKEN);
	return rc;
}

static inline void fake_tpu_stop(struct fake_tpu *f)
{
	fake_server_stop(f);
}

/* One request (control, or API with f->token), e.g. ("GET",
 * "/v2alpha1/projects/p/locations/z/queuedResources/q", NULL, &out);
 * *out (may be NULL) gets the answer's body (malloc'd). Returns the
 * HTTP status, or -1. */
static inline long fake_tpu_call(struct fake_tpu *f, const char *method,
				 const char *path, const char *body,
				 char **out)
{
	return fake_server_call(f, method, path, body, out);
}

/* Adds fault rules (a JSON object or list). Returns 0 or -1. */
static inline int fake_tpu_faults(struct fake_tpu *f, const char *rules)
{
	return fake_server_faults(f, rules);
}

/* Merges settings into the fake's config (POST /_fake/config), e.g.
 * {"delays": {"WAITING_FOR_RESOURCES": 0.05}, "workers_per_node": 2}.
 * Returns 0 or -1. */
static inline int fake_tpu_config(struct fake_tpu *f, const char *json)
{
	return fake_server_post(f, "/_fake/config", json);
}

/* fake_tpu.c: what the fake was asked and what it holds, for Criterion
 * tests (each fails the test when the fake does not answer). */

/* The API requests the fake recorded, in order (control calls are not
 * recorded): a JSON array to json_decref. */
json_t *fake_tpu_requests(struct fake_tpu *f);
/* How many recorded requests had this method and a path ending so. */
size_t fake_tpu_count(struct fake_tpu *f, const char *method,
		      const char *suffix);
/* "DELETE POST ..." of the recorded requests on queued resources, in
 * order, GETs left out (cut at cap). */
void fake_tpu_qr_changes(struct fake_tpu *f, char *out, size_t cap);
/* A spot queued resource's preemption (/_fake/suspend): it goes
 * SUSPENDED. */
void fake_tpu_suspend(struct fake_tpu *f, const char *qr);
/* Waits up to 30 s until fake_tpu_qr_changes reads want. */
void fake_tpu_wait_changes(struct fake_tpu *f, const char *want);
/* Waits up to 30 s until the queued resource at path (the API's, from
 * "/v2alpha1/") is in state want. */
void fake_tpu_wait_qr_state(struct fake_tpu *f, const char *path,
			    const char *want);
/* The fake's resource at path (to json_decref), or NULL when it has none
 * (any answer but 200). */
json_t *fake_tpu_get(struct fake_tpu *f, const char *path);

#endif
