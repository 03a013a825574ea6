/* tests/cloud/tpu_check.c: see tpu_check.h. */
#include "tests/cloud/tpu_check.h"

#include <criterion/criterion.h>
#include <stdlib.h>

void env_setup(void)
{
	setenv("SLICECTL_ACCESS_TOKEN", "tok-123", 1);
	setenv("SLICECTL_TPU_POLL_MS", "5", 1);
	setenv("SLICECTL_HTTP_RETRY_BASE_MS", "5", 1);
	unsetenv("GOOGLE_APPLICATION_CREDENTIALS");
	unsetenv("SLICECTL_TPU_ENDPOINT");
	setenv("HOME", "/nonexistent", 1);
}

json_t *load(const char *s)
{
	json_error_t je;
	json_t *j = json_loads(s, 0, &je);

	cr_assert(j, "not JSON (%s): %s", je.text, s);
	return j;
}

void assert_json_eq(const char *got, const char *want)
{
	json_t *g = load(got), *w = load(want);

	cr_assert(json_equal(g, w), "got  %s\nwant %s", got, want);
	json_decref(g);
	json_decref(w);
}

void spec_basic(struct tpu_qr_spec *s)
{
	tpu_qr_spec_init(s);
	s->id = "qr1";
	s->accelerator_type = "v5litepod-8";
	s->runtime_version = "v2-alpha-tpuv5-lite";
}
