/* tests/cloud/fake_gcs.c: see fake_gcs.h; the GCS names of fake_server. */
#include "tests/cloud/fake_gcs.h"

int fake_gcs_start(struct fake_gcs *f, const char *const *extra)
{
	return fake_server_start(f, "tests/fakes/gcs_fake.py", extra);
}

void fake_gcs_stop(struct fake_gcs *f)
{
	fake_server_stop(f);
}

long fake_gcs_call(struct fake_gcs *f, const char *method, const char *path,
		   const char *body, char **out)
{
	return fake_server_call(f, method, path, body, out);
}

int fake_gcs_faults(struct fake_gcs *f, const char *rules)
{
	return fake_server_faults(f, rules);
}
