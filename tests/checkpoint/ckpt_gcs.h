/*
 * tests/checkpoint/ckpt_gcs.h: the checkpoint tests that save through the
 * GCS fake share its start and stop: a file:// run as ckpt_check.h makes
 * it, and the fake on loopback with short HTTP retries.
 */
#ifndef SLICECTL_TESTS_CKPT_GCS_H
#define SLICECTL_TESTS_CKPT_GCS_H

#include "tests/cloud/fake_gcs.h"

extern struct fake_gcs ckpt_fake;

/* The suite's .init and .fini. */
void ckpt_gcs_setup(void);
void ckpt_gcs_teardown(void);

#endif
