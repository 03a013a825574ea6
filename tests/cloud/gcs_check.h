/*
 * tests/cloud/gcs_check.h: what the GCS client's tests share: a fast retry
 * policy, data patterns, whole-object comparisons, and the fake's fault
 * rules and request log, each failing the current Criterion test.
 */
#ifndef SLICECTL_TESTS_GCS_CHECK_H
#define SLICECTL_TESTS_GCS_CHECK_H

#include "cloud/gcs.h"
#include "tests/cloud/fake_gcs.h"

#include <jansson.h>

/* No credentials from the environment, and none from a metadata server. */
void gcs_check_clean_env(void);
/* The default policy with short backoff and a 1 s stall limit. */
void gcs_check_policy(struct http_policy *p);
/* len pseudo-random bytes from seed (malloc'd). */
unsigned char *gcs_check_pattern(size_t len, unsigned seed);
/* A sink appending to a struct buf. */
int gcs_check_to_buf(void *ud, const void *data, size_t len, struct err *e);
/* Downloads bucket/name through c and checks it is exactly want. */
void gcs_check_object(struct gcs_client *c, const char *bucket,
		      const char *name, const void *want, size_t len);
void gcs_check_fault(struct fake_gcs *f, const char *rules);
/* Every fault rule was used up; then forgets them. */
void gcs_check_no_faults_left(struct fake_gcs *f);
/* The fake's request log (a JSON array, to json_decref). */
json_t *gcs_check_requests(struct fake_gcs *f);

#endif
