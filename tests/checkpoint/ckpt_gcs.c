/* tests/checkpoint/ckpt_gcs.c: see ckpt_gcs.h. */
#include "tests/checkpoint/ckpt_gcs.h"
#include "tests/checkpoint/ckpt_check.h"

#include <criterion/criterion.h>
#include <stdio.h>
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
	if (ckpt_fake.proc.pid > 0)
		fake_gcs_stop(&ckpt_fake);
	ckpt_teardown();
}

struct store *ckpt_gcs_open(const char *run)
{
	char url[256];
	struct store *s;
	struct err e;

	snprintf(url, sizeof(url), "gs://bkt/runs/%s", run);
	cr_assert_eq(store_open(&s, url, &e), 0, "%s", e.msg);
	return s;
}
