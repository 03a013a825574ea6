/*
 * tests/launcher/target/vertex/vertex_check.h: what the tests of slicectl
 * job --target vertex against the Vertex AI fake (test_vertex_chaos.c,
 * test_vertex_torch.c) share beyond gke_live_check.h's directory, status
 * waits and fake handle: starting tests/fakes/vertex_fake.py and pointing
 * slicectl at it. Failures are the current Criterion test's.
 */
#ifndef SLICECTL_TESTS_VERTEX_CHECK_H
#define SLICECTL_TESTS_VERTEX_CHECK_H

#include <jansson.h>

/* Starts the fake (its replicas' logs under DIR/replicas) as
 * gke_live_check.h's fake and api_port, and sets SLICECTL_VERTEX_ENDPOINT,
 * a token and a short poll for the slicectl commands the test runs. */
void vertex_fake_start(void);
/* A status's "generation"; status is released. */
long long generation_of(json_t *status);
/* How many times the run's CustomJob was posted again (--watch, reset),
 * as status shows it; -1 when status has no count (the run deleted). */
long long custom_jobs_submitted_again(const char *run);
/* Preempts run's Spot CustomJob job (its name) and waits up to 90 s for
 * --watch to post a new one. */
void preempt_until_posted_again(const char *run, const char *job);

#endif
