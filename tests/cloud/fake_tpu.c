/* tests/cloud/fake_tpu.c: see fake_tpu.h. */
#include "tests/cloud/fake_tpu.h"

#include "tests/harness/harness.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

json_t *fake_tpu_requests(struct fake_tpu *f)
{
	char *out = NULL;
	json_t *j;

	cr_assert_eq(fake_tpu_call(f, "GET", "/_fake/requests", NULL, &out),
		     200);
	j = json_loads(out, 0, NULL);
	free(out);
	cr_assert_not_null(j);
	return j;
}

size_t fake_tpu_count(struct fake_tpu *f, const char *method,
		      const char *suffix)
{
	json_t *all = fake_tpu_requests(f), *q;
	size_t i, n = 0;

	json_array_foreach(all, i, q) {
		const char *p = json_string_value(json_object_get(q, "path"));
		const char *m = json_string_value(json_object_get(q, "method"));

		n += p && m && !strcmp(m, method) &&
		     strlen(p) >= strlen(suffix) &&
		     !strcmp(p + strlen(p) - strlen(suffix), suffix);
	}
	json_decref(all);
	return n;
}

void fake_tpu_qr_changes(struct fake_tpu *f, char *out, size_t cap)
{
	json_t *all = fake_tpu_requests(f), *q;
	size_t i, n = 0;

	out[0] = '\0';
	json_array_foreach(all, i, q) {
		const char *p = json_string_value(json_object_get(q, "path"));
		const char *m = json_string_value(json_object_get(q, "method"));

		if (!p || !m || !strcmp(m, "GET") || !strstr(p, "queuedResources"))
			continue;
		n += (size_t)snprintf(out + n, cap - n, "%s%s", n ? " " : "", m);
		if (n >= cap)
			break;
	}
	json_decref(all);
}

json_t *fake_tpu_get(struct fake_tpu *f, const char *path)
{
	char *out = NULL;
	json_t *j = NULL;

	if (fake_tpu_call(f, "GET", path, NULL, &out) == 200)
		j = json_loads(out, 0, NULL);
	free(out);
	return j;
}

void fake_tpu_suspend(struct fake_tpu *f, const char *qr)
{
	char body[128];

	snprintf(body, sizeof(body), "{\"name\": \"%s\"}", qr);
	cr_assert_eq(fake_tpu_call(f, "POST", "/_fake/suspend", body, NULL),
		     200);
}

void fake_tpu_wait_changes(struct fake_tpu *f, const char *want)
{
	char got[512];

	for (int i = 0; i < 1500; i++) {
		fake_tpu_qr_changes(f, got, sizeof(got));
		if (!strcmp(got, want))
			return;
		sleep_ms(20);
	}
	cr_assert_fail("queued resource changes: '%s', not '%s'", got, want);
}

void fake_tpu_wait_qr_state(struct fake_tpu *f, const char *path,
			    const char *want)
{
	char got[64] = "";

	for (int i = 0; i < 1500; i++) {
		json_t *j = fake_tpu_get(f, path);
		const char *s = json_string_value(
			json_object_get(json_object_get(j, "state"), "state"));

		snprintf(got, sizeof(got), "%s", s ? s : "");
		json_decref(j);
		if (!strcmp(got, want))
			return;
		sleep_ms(20);
	}
	cr_assert_fail("%s is %s, never %s", path, got, want);
}
