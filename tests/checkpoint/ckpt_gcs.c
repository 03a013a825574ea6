/*
 * tests/checkpoint/ckpt_gcs.c: see ckpt_gcs.h.
 */
#include "tests/checkpoint/ckpt_gcs.h"

#include "tests/checkpoint/ckpt_check.h"

#include <criterion/criterion.h>

#include <stdlib.h>

struct fake_gcs ckpt_fake;

void ckpt_gcs_setup(void)
{
	ckpt_setup();
	cr_assert_eq(fake_gcs_start(&ckpt_fake, NULL), 0,
		     "GCS fake did not start");
	setenv("STORAGE_EMULATOR_HOST", ckpt_fake.base, 1);
	setenv("SLICECTL_HTTP_RETRY_BASE_MS", "5", 1);
}

void ckpt_gcs_teardown(void)
{
	if (ckpt_fake.pid > 0)
		fake_gcs_stop(&ckpt_fake);
	ckpt_teardown();
}
