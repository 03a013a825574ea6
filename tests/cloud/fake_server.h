/*
 * tests/cloud/fake_server.h: starts one of the fakes in tests/fakes/ (a
 * Python script that takes --port-file and serves on loopback) for a
 * test with the harness's fake_start, talks to its /_fake control
 * endpoints, and stops it by pid.
 * fake_gcs.h and fake_tpu.h name it for each fake.
 */
#ifndef SLICECTL_TESTS_FAKE_SERVER_H
#define SLICECTL_TESTS_FAKE_SERVER_H

#include "tests/harness/harness.h"

struct fake_server {
	struct test_fake proc; /* its pid, its directory */
	unsigned port;
	char base[64]; /* "http://127.0.0.1:PORT" */
	/* When set, fake_server_call sends "Authorization: Bearer TOKEN",
	 * so API paths can be called as well as control ones. */
	char token[64];
};

/* script: the fake, relative to the source tree (SLICECTL_SRCDIR, else
 * the tree this was built from), e.g. "tests/fakes/tpu_fake.py".
 * extra: more arguments for it (NULL-terminated, may be NULL).
 * Returns 0 once it listens, or -1 after printing why. */
int fake_server_start(struct fake_server *f, const char *script,
		      const char *const *extra);
void fake_server_stop(struct fake_server *f);
/* One request to the fake (any path; with f->token when set); *out
 * (may be NULL) gets the answer's body (malloc'd). Returns the HTTP
 * status, or -1. */
long fake_server_call(struct fake_server *f, const char *method,
		      const char *path, const char *body, char **out);
/* POSTs body to a control endpoint; 0 when it answers 200, else -1. */
int fake_server_post(struct fake_server *f, const char *path,
		     const char *body);
/* Adds fault rules (a JSON object or list). Returns 0 or -1. */
int fake_server_faults(struct fake_server *f, const char *rules);

#endif
