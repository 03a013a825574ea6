/*
 * tests/cloud/tpu_check.h: what the Cloud TPU API client's tests share:
 * the environment they run in, the names and host keys their documents
 * use, a basic queued-resource spec, and JSON comparison failing the
 * current Criterion test.
 */
#ifndef SLICECTL_TESTS_TPU_CHECK_H
#define SLICECTL_TESTS_TPU_CHECK_H

#include "cloud/tpu.h"

#include <jansson.h>

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

#define PARENT "projects/p/locations/z"
#define QR_NAME PARENT "/queuedResources/qr1"

#define ED25519 "AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"

/* One guest attribute item of the hostkeys/ query. */
#define ITEM(k, v) "{\"namespace\":\"hostkeys\",\"key\":\"" k "\"," \
		   "\"value\":\"" v "\"}"

/* A fixed token, fast polls and retries, no endpoint and no credentials
 * from the machine: every suite's .init. */
void env_setup(void);
/* s parsed, or the test fails. */
json_t *load(const char *s);
/* got and want are equal JSON values. */
void assert_json_eq(const char *got, const char *want);
/* Queued resource qr1: one v5litepod-8 node. */
void spec_basic(struct tpu_qr_spec *s);

#endif
