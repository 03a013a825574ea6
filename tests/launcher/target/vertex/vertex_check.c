/* tests/launcher/target/vertex/vertex_check.c: see vertex_check.h. */
#include "tests/launcher/target/vertex/vertex_check.h"
#include "tests/harness/harness.h"
#include "tests/launcher/target/gke/gke_live_check.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>

void vertex_fake_start(void)
{
	char work[HARNESS_PATH + 16], endpoint[64];

	snprintf(work, sizeof(work), "%s/replicas", dir);
	cr_assert_eq(fake_start(&fake, "tests/fakes/vertex_fake.py",
				(const char *const[]){
					"--work-dir", work, "--pass-env",
					"PYTHONUNBUFFERED", NULL },
				1, 30000), 0, "the fake did not start");
	api_port = (int)fake.ports[0];
	snprintf(endpoint, sizeof(endpoint), "http://127.0.0.1:%d", api_port);
	setenv("SLICECTL_VERTEX_ENDPOINT", endpoint, 1);
	setenv("SLICECTL_ACCESS_TOKEN", "t0ken", 1);
	setenv("SLICECTL_VERTEX_POLL_MS", "100", 1);
	/* A preemption's SIGTERM-to-SIGKILL: the emergency step's time. */
	POST("/_fake/config", "{\"grace\": 8}");
}

long long generation_of(json_t *status)
{
	long long g = json_integer_value(json_object_get(status,
							 "generation"));

	json_decref(status);
	return g;
}

long long custom_jobs_submitted_again(const char *run)
{
	json_t *j = status_json(run);
	json_t *r = json_object_get(json_object_get(j, "target"), "restarts");
	long long n = json_is_integer(r) ? json_integer_value(r) : -1;

	json_decref(j);
	return n;
}

void preempt_until_posted_again(const char *run, const char *job)
{
	char body[512];

	snprintf(body, sizeof(body), "{\"name\": \"%s\"}", job);
	POST("/_fake/preempt", body);
	for (long long until = now_ms() + 90000;
	     custom_jobs_submitted_again(run) < 1; sleep_ms(300))
		cr_assert_lt(now_ms(), until, "--watch did not post %s again",
			     run);
}
