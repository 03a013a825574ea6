/* tests/cloud/fake_tpu.c: see fake_tpu.h. */
#include "tests/cloud/fake_tpu.h"

#include <criterion/criterion.h>
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
