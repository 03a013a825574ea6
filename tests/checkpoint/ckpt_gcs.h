/*
 * tests/checkpoint/ckpt_gcs.h: checkpoint tests against the GCS fake: the
 * temporary directory of ckpt_check.h plus a fake started for the suite
 * (STORAGE_EMULATOR_HOST points at it, retries back off 5 ms) and
 * stopped by pid.
 */
#ifndef SLICECTL_TESTS_CKPT_GCS_H
#define SLICECTL_TESTS_CKPT_GCS_H

#include "cloud/cloud.h"
#include "tests/cloud/fake_gcs.h"

extern struct fake_gcs ckpt_fake;

/* The suite's .init and .fini. */
void ckpt_gcs_setup(void);
void ckpt_gcs_teardown(void);
/* The store gs://bkt/runs/RUN (to store_close). */
struct store *ckpt_gcs_open(const char *run);

#endif
